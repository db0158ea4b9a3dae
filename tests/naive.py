"""Slow, obvious reference implementations (NumPy/SciPy) that the kernels are tested against.

Nothing here imports the code under test, except where a reference loops over a kernel that is
itself tested against a reference of this module (``assign_loop`` over ``candidate_nt``).
"""
import itertools
from fractions import Fraction

import numpy as np
from scipy.optimize import minimize


def rho(y, z):
    """rho(y, z) = ||y- * z-||_1 + ||y+ * z+||_1."""
    yp, ym = np.maximum(y, 0), np.maximum(-y, 0)
    zp, zm = np.maximum(z, 0), np.maximum(-z, 0)
    return float(np.sum(ym * zm) + np.sum(yp * zp))


def sigma(y, z):
    """sigma(y, z) = ||y * z||_2^2."""
    return float(np.sum((y * z) ** 2))


def score_sp(y, tau, nu):
    """sP = rho(y, tau) / rho(y, nu) + sigma(y, tau); +inf when rho(y, nu) = 0."""
    den = rho(y, nu)
    if den <= 0:
        return np.inf
    return rho(y, tau) / den + sigma(y, tau)


def _rho_exact(y, z):
    """rho(y, z) as an exact rational number (each product of two floats is exact)."""
    return sum((Fraction(float(a)) * Fraction(float(c)) for a, c in zip(y, z)
                if (a > 0 and c > 0) or (a < 0 and c < 0)), Fraction(0))


def candidate_objective(y, q, tau, nu, lam0, lam1):
    """F(y) = 1/2||q - y||^2 + lam1 ||y||_1 + lam0 sP(y); +inf when rho(y, nu) = 0.

    The ratio term lam0 rho(y, tau) / rho(y, nu) is computed exactly (fractions) and rounded
    once: in floats, rho(y, nu) of subnormal size is rounded to a multiple of 5e-324 (y_j =
    1065 with nu_j = 5e-324: the term was 3e-4 too large, found with a random seed), the ratio
    alone overflows where the term does not (lam0 = 0: 0 * inf was NaN), and rho(y, nu) can
    underflow to 0 where it is positive. Where rho(y, nu) >= 2^-900 floats are as good (and
    faster).
    """
    rest = 0.5 * float(np.sum((q - y) ** 2)) + lam1 * float(np.sum(np.abs(y)))
    den = rho(y, nu)
    if den >= 2.0 ** -900:
        return rest + lam0 * rho(y, tau) / den + lam0 * sigma(y, tau)
    den = _rho_exact(y, nu)
    if den <= 0:
        return np.inf
    try:
        ratio = float(Fraction(lam0) * _rho_exact(y, tau) / den)
    except OverflowError:  # beyond the float range
        ratio = np.inf
    return rest + ratio + lam0 * sigma(y, tau)


def _parts(q, tau, nu, lam0, lam1):
    pos = q > 0
    g = np.where(pos, np.maximum(tau, 0), np.maximum(-tau, 0))
    v = np.where(pos, np.maximum(nu, 0), np.maximum(-nu, 0))
    g[q == 0] = 0
    v[q == 0] = 0
    b = np.abs(q) - lam1
    k = 1 + 2 * lam0 * tau ** 2
    return b, g, v, k


def limit_at_zero(q, tau, nu, lam0, lam1):
    """Infimum of F over sign-consistent y as rho(y, nu) -> 0.

    The coordinates that enter neither rho(y, tau) nor rho(y, nu) are minimised alone
    (soft thresholding); every other coordinate tends to 0, and the ratio tends at best to
    min_j g_j / v_j over v_j > 0 (a ratio of two non-negative linear forms is minimised at a
    vertex).
    """
    b, g, v, k = _parts(q, tau, nu, lam0, lam1)
    free = (g == 0) & (v == 0) & (q != 0)
    y = np.zeros_like(q)
    y[free] = np.sign(q[free]) * np.maximum(b[free], 0) / k[free]
    base = (0.5 * float(np.sum((q - y) ** 2)) + lam1 * float(np.sum(np.abs(y)))
            + lam0 * sigma(y, tau))
    if not np.any(v > 0):
        return np.inf
    with np.errstate(over="ignore"):   # g / v beyond float64 (a tiny v): the limit is inf
        return base + lam0 * float(np.min(g[v > 0] / v[v > 0]))


def candidate_enum(q, tau, nu, lam0, lam1):
    """Global minimiser of F by enumerating every support and every positive quartic root.

    For each non-empty support S the stationary points with a_S > 0 are given by the positive
    roots h of P(h) (numpy.roots) and r = (h^2 - Vq h + lam0 Vg) / (lam0 Vv). F is evaluated
    directly at each. Returns (y, value); value = +inf (y = 0) when no stationary point is below
    the limit at zero. Exponential in M: keep M <= 10.

    The ratio term lam0 (g.a) / (v.a) is unchanged when g and v are divided by one factor: on
    each support they are divided by the power of two just above max v_S (exactly), so that
    the sums (Vv = sum v^2 / k, ...) stay in range when v is tiny (v of 1e-160 or subnormal:
    Vv underflowed to 0 and every support was skipped, so the minimum was "inf"). A support
    whose coefficients still overflow (g_j / max v_S > ~1e150 for some j) is skipped: there
    g_j a_j <= (F / lam0) v.a <= (F / lam0) max v_S sum a_S, so F < lam0 1e140 only where a_j
    is below 1e-10 of sum a_S, i.e. near the smaller support.
    """
    q = np.asarray(q, float)
    M = q.size
    b, g, v, k = _parts(q, tau, nu, lam0, lam1)
    best_val, best_y = np.inf, np.zeros(M)
    idx = [j for j in range(M) if q[j] != 0]
    for size in range(1, len(idx) + 1):
        for S in itertools.combinations(idx, size):
            S = np.array(S)
            scale = np.ldexp(1.0, np.frexp(np.max(v[S]))[1])   # 2^e > max v_S (1 when 0)
            with np.errstate(over="ignore", invalid="ignore"):
                bs, gs, vs, ks = b[S], g[S] / scale, v[S] / scale, k[S]
                Vq = np.sum(vs * bs / ks)
                Vg = np.sum(vs * gs / ks)
                Vv = np.sum(vs * vs / ks)
                Gq = np.sum(gs * bs / ks)
                Gg = np.sum(gs * gs / ks)
                coeffs = [1.0, -Vq, 0.0, lam0 * (Vg * Vq - Vv * Gq),
                          lam0 ** 2 * (Vv * Gg - Vg ** 2)]
            if Vv <= 0 or not np.all(np.isfinite(coeffs)):
                continue
            roots = np.roots(coeffs)
            for h in roots:
                if abs(h.imag) > 1e-9 * max(1.0, abs(h)) or h.real <= 0:
                    continue
                h = h.real
                r = (h * h - Vq * h + lam0 * Vg) / (lam0 * Vv)
                aS = (bs - lam0 * (gs - r * vs) / h) / ks
                if np.any(aS <= 0):
                    continue
                y = np.zeros(M)
                y[S] = np.sign(q[S]) * aS
                val = candidate_objective(y, q, tau, nu, lam0, lam1)
                if val < best_val:
                    best_val, best_y = val, y
    if not best_val < limit_at_zero(q, tau, nu, lam0, lam1):
        return np.zeros(M), np.inf
    return best_y, best_val


def candidate_lbfgs(q, tau, nu, lam0, lam1, n_starts=10, seed=0):
    """Multistart L-BFGS-B over a = |y| >= 0 (a local method: an upper bound of the minimum)."""
    q = np.asarray(q, float)
    s = np.sign(q)
    rng = np.random.default_rng(seed)

    def f(a):
        val = candidate_objective(s * a, q, tau, nu, lam0, lam1)
        return val if np.isfinite(val) else 1e300

    best = np.inf
    starts = [np.maximum(np.abs(q) - lam1, 0) + 1e-3]
    starts += [np.abs(q) * rng.uniform(0, 1.5, q.size) for _ in range(n_starts - 1)]
    for a0 in starts:
        res = minimize(f, a0, method="L-BFGS-B", bounds=[(0, None)] * q.size)
        best = min(best, float(res.fun))
    return best


def assign_loop(Q, tau, nu, lam0, lam1, rule, lambda_a, candidate):
    """Per-candidate loop: ``candidate(q, tau_c1, nu_c2, lam0, lam1) -> (y, F)``.

    Returns labels, similarity labels, Y and the score matrix of the rule.
    """
    n, M = Q.shape
    Cd, Cs = tau.shape[0], nu.shape[0]
    scores = np.full((n, Cd, Cs), np.inf)
    ys = np.zeros((n, Cd, Cs, M))
    adj = np.zeros((n, Cd, Cs))
    for i in range(n):
        for c1 in range(Cd):
            for c2 in range(Cs):
                y, F = candidate(Q[i], tau[c1], nu[c2], lam0, lam1)
                adj[i, c1, c2] = 0.5 * lambda_a * np.sum((Q[i] - tau[c1] - nu[c2]) ** 2)
                ys[i, c1, c2] = y
                if np.isfinite(F):
                    scores[i, c1, c2] = (score_sp(y, tau[c1], nu[c2]) if rule == "paper"
                                         else F + adj[i, c1, c2])
    labels = np.zeros(n, int)
    sim = np.zeros(n, int)
    Y = np.zeros((n, M))
    for i in range(n):
        if np.all(np.isinf(scores[i])):
            c1, c2 = np.unravel_index(np.argmin(adj[i]), adj[i].shape)
        else:
            c1, c2 = np.unravel_index(np.argmin(scores[i]), scores[i].shape)
            Y[i] = ys[i, c1, c2]
        labels[i], sim[i] = c1, c2
    return labels, sim, Y, scores


def real_roots_numpy(coeffs, tol=1e-7):
    """Real roots of a polynomial by numpy.roots (imaginary part below tol * scale)."""
    r = np.roots(coeffs)
    scale = np.maximum(1.0, np.abs(r))
    return np.sort(r[np.abs(r.imag) <= tol * scale].real)
