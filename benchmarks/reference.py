"""Plain vectorised NumPy reference of one iteration (Stages 1-3 and the objective).

The same mathematics as the numba kernels (``algorithm.md``), written the way one would write it
without a compiler: loops over candidate pairs ``(c1, c2)`` and over support iterations, every
operation vectorised over samples and coordinates (n x M arrays), the quartic solved for all
samples at once through the eigenvalues of companion matrices, and Stage 3 by a thin SVD of the
M x N target per step. Used by ``python -m benchmarks.bench`` (speed ratios) and by the tests
(agreement on small problems); not installed with the package.

Differences from the kernels, all outside the paper's regime: there is no safeguard (a candidate
whose support iteration does not settle within ``_MAX_SI`` passes is invalid), and validity is
decided by the exact limit at zero for every candidate.
"""
import numpy as np

# LAPACK's gesdd, gesvd where gesdd does not converge: the package's SVD
from ntnumba.core.linalg import svd

_MAX_SI = 50


# --------------------------------------------------------------------------------------------
# Stage 1
# --------------------------------------------------------------------------------------------
def _largest_positive_roots(c3, c1, c0):
    """Largest positive root of h^4 + c3 h^3 + c1 h + c0 per entry (NaN when none)."""
    P = c3.shape[0]
    comp = np.zeros((P, 4, 4))
    comp[:, 0, :] = -np.stack([c3, np.zeros(P), c1, c0], axis=1)
    comp[:, 1, 0] = comp[:, 2, 1] = comp[:, 3, 2] = 1.0
    roots = np.linalg.eigvals(comp)
    real = np.abs(roots.imag) <= 1e-7 * np.maximum(np.abs(roots), 1e-300)
    x = np.where(real & (roots.real > 0), roots.real, -np.inf)
    h = x.max(axis=1)
    h = np.where(np.isfinite(h), h, np.nan)
    for _ in range(3):  # Newton polish on the original polynomial
        f = ((h + c3) * h * h + c1) * h + c0
        d = (4.0 * h + 3.0 * c3) * h * h + c1
        step = np.divide(f, d, out=np.zeros_like(h), where=(d != 0) & np.isfinite(h))
        h = h - step
    return h


def solve_ratio_batch(b, g, v, k, lam):
    """SI+ for P independent reduced problems (rows): min sum(k a^2/2 - b a) + lam g.a/v.a.

    ``b, g, v`` of shape (P, M), ``k`` (P, M) or (M,). Returns ``a`` (P, M), ``R`` (P,) with
    +inf for invalid problems, and the value terms ``ga, va`` (P,).
    """
    P, M = b.shape
    k = np.broadcast_to(k, (P, M))
    a = np.maximum(b, 0.0) / k
    mask = a > 0
    h = np.zeros(P)
    r = np.zeros(P)
    done = np.zeros(P, dtype=bool)
    ok = np.ones(P, dtype=bool)
    for _ in range(_MAX_SI):
        live = ~done & ok
        if not live.any():
            break
        idx = np.flatnonzero(live)
        mk = mask[idx] / k[idx]
        bi, gi, vi = b[idx], g[idx], v[idx]
        Vq = np.sum(vi * bi * mk, axis=1)
        Vg = np.sum(vi * gi * mk, axis=1)
        Vv = np.sum(vi * vi * mk, axis=1)
        Gq = np.sum(gi * bi * mk, axis=1)
        Gg = np.sum(gi * gi * mk, axis=1)
        if lam == 0.0:
            hi = Vq
            ri = np.divide(Gq, hi, out=np.zeros_like(hi), where=hi > 0)
        else:
            with np.errstate(invalid="ignore", divide="ignore"):
                hi = _largest_positive_roots(-Vq, lam * (Vg * Vq - Vv * Gq),
                                             lam * lam * (Vv * Gg - Vg * Vg))
                ri = (hi * hi - Vq * hi + lam * Vg) / (lam * Vv)
        bad = ~(Vv > 0) | ~(hi > 0)
        ok[idx[bad]] = False
        good = ~bad
        idx, hi, ri = idx[good], hi[good], ri[good]
        lh = lam / hi
        ai = (b[idx] - lh[:, None] * (g[idx] - ri[:, None] * v[idx])) / k[idx]
        new_mask = ai > 0
        done[idx[np.all(new_mask == mask[idx], axis=1)]] = True
        mask[idx] = new_mask
        a[idx] = np.maximum(ai, 0.0)
        h[idx], r[idx] = hi, ri
    ok &= done
    ga = np.sum(g * a, axis=1)
    va = np.sum(v * a, axis=1)
    ok &= va > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        R = np.sum(a * (0.5 * k * a - b), axis=1) + lam * ga / va
        # the infimum approached as y -> 0: free coordinates alone + lam min g/v
        free = (g == 0) & (v == 0) & (b > 0)
        dec = -0.5 * np.sum(np.where(free, b * b / k, 0.0), axis=1)
        rmin = np.min(np.where(v > 0, g / np.where(v > 0, v, 1.0), np.inf), axis=1)
    ok &= R < dec + lam * rmin
    R = np.where(ok, R, np.inf)
    a[~ok] = 0.0
    return a, R, ga, va


def adjustment_reference(Q, tau, nu, lambda_a):
    """lambda_a/2 ||q_i - tau_c1 - nu_c2||^2, by explicit differences per pair (n x Cd x Cs)."""
    n = Q.shape[0]
    out = np.empty((n, tau.shape[0], nu.shape[0]))
    for c1 in range(tau.shape[0]):
        for c2 in range(nu.shape[0]):
            d = Q - tau[c1] - nu[c2]
            out[:, c1, c2] = 0.5 * lambda_a * np.einsum("ij,ij->i", d, d)
    return out


def assign_reference(Q, tau, nu, lambda0, lambda1, *, rule="objective", lambda_a=1.0):
    """Stage 1 in NumPy: (labels, similarity_labels, Y, scores) as :func:`ntnumba.kernels.assign`.

    Loops over the Cd x Cs candidate pairs; each pair's support iteration is vectorised over
    the samples (:func:`solve_ratio_batch`). Computes in float64.
    """
    Q = np.asarray(Q, dtype=np.float64)
    tau = np.asarray(tau, dtype=np.float64)
    nu = np.asarray(nu, dtype=np.float64)
    n, M = Q.shape
    Cd, Cs = tau.shape[0], nu.shape[0]
    pos, neg = Q > 0, Q < 0
    b = np.abs(Q) - lambda1
    qq = 0.5 * np.einsum("ij,ij->i", Q, Q)
    adj = adjustment_reference(Q, tau, nu, lambda_a)
    scores = np.empty((n, Cd, Cs))
    best = np.full(n, np.inf)
    labels = np.zeros(n, dtype=np.int64)
    sim = np.zeros(n, dtype=np.int64)
    Ya = np.zeros((n, M))
    for c1 in range(Cd):
        g = np.where(pos, np.maximum(tau[c1], 0), np.where(neg, np.maximum(-tau[c1], 0), 0.0))
        k = 1.0 + 2.0 * lambda0 * tau[c1] ** 2
        for c2 in range(Cs):
            v = np.where(pos, np.maximum(nu[c2], 0), np.where(neg, np.maximum(-nu[c2], 0), 0.0))
            a, R, ga, va = solve_ratio_batch(b, g, v, k, lambda0)
            with np.errstate(invalid="ignore", divide="ignore"):
                sp = ga / va + np.sum(tau[c1] ** 2 * a * a, axis=1)
            valid = np.isfinite(R)
            sp = np.where(valid, sp, np.inf)
            F = np.where(valid, qq + R, np.inf)
            s = sp if rule == "paper" else F + adj[:, c1, c2]
            scores[:, c1, c2] = s
            better = s < best
            best[better] = s[better]
            labels[better], sim[better] = c1, c2
            Ya[better] = a[better]
    dead = ~np.isfinite(best)
    if dead.any():  # every candidate invalid: y = 0, the pair nearest in the adjustment term
        flat = adj[dead].reshape(int(dead.sum()), -1).argmin(axis=1)
        labels[dead], sim[dead] = np.divmod(flat, Cs)
        Ya[dead] = 0.0
    return labels, sim, np.where(pos, Ya, -Ya), scores


# --------------------------------------------------------------------------------------------
# Stage 2
# --------------------------------------------------------------------------------------------
def _rho(Y, z):
    return np.sum(np.maximum(Y * z, 0.0), axis=-1)


def _prior(y, tau, nu, skip_tau, skip_nu):
    """f_c(y, theta without the skipped parameter) (0 when no pair is left)."""
    others_nu = [c for c in range(nu.shape[0]) if c != skip_nu]
    others_tau = [c for c in range(tau.shape[0]) if c != skip_tau]
    if not others_nu or not others_tau:
        return 0.0
    rmax = max(_rho(y, nu[c]) for c in others_nu)
    if not rmax > 0:
        return 0.0
    T = tau[others_tau]
    return float(np.min(_rho(T, y) / rmax + np.sum((T * y) ** 2, axis=1)))


def _cubic_roots(k, b, K):
    """Positive root of k x^3 - b x^2 - K per entry (K > 0), Newton from above."""
    x = np.maximum(b, 0.0) / k + np.cbrt(K / k)
    for _ in range(100):
        f = x * x * (k * x - b) - K
        d = x * (3.0 * k * x - 2.0 * b)
        xn = np.where(d > 0, x - f / np.where(d > 0, d, 1.0), x)
        xn = np.where(xn <= 0, 0.5 * x, xn)
        if not np.any(xn < x):
            break
        x = np.minimum(xn, x)
    return x


def update_theta_reference(Q, Y, labels, sim, tau, nu, *, lambda0=0.03, lambda_a=1.0,
                           lambda_e=0.001, cost=None, n_nu_steps=5):
    """Stage 2 in NumPy, the same updates as :func:`ntnumba.kernels.update_theta`."""
    Q = np.asarray(Q, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    tau = np.asarray(tau, dtype=np.float64)
    nu = np.asarray(nu, dtype=np.float64)
    n, M = Q.shape
    Cd, Cs = tau.shape[0], nu.shape[0]
    rn = _rho(Y, nu[sim])
    w = np.divide(lambda0, rn, out=np.zeros(n), where=rn > 0)
    d2 = np.sum((Q - tau[labels] - nu[sim]) ** 2, axis=1)
    order = np.argsort(-(d2 if cost is None else np.asarray(cost)), kind="stable")
    used = set()

    def next_unused():
        for i in order:
            if int(i) not in used:
                used.add(int(i))
                return int(i)
        return int(order[len(used) % n])

    tau_new = tau.copy()
    for c in range(Cd):
        mem = labels == c
        if not mem.any():
            continue
        P = lambda_a * np.sum(Q[mem] - nu[sim[mem]], axis=0)
        BP = np.sum(w[mem, None] * np.maximum(Y[mem], 0), axis=0)
        BM = np.sum(w[mem, None] * np.maximum(-Y[mem], 0), axis=0)
        KD = lambda_a * mem.sum() + 2.0 * lambda0 * np.sum(Y[mem] ** 2, axis=0)

        def value(t):
            val = float(np.sum(t * (0.5 * KD * t - P) + BP * np.maximum(t, 0)
                               + BM * np.maximum(-t, 0)))
            return val + (lambda_e * _prior(t, tau, nu, c, -1) if lambda_e > 0 else 0.0)

        bp, bm = P - BP, -P - BM
        cands = [tau[c], np.where((bm > bp) & (bm > 0), -bm / KD, np.where(bp > 0, bp / KD, 0))]
        s = np.where(P >= 0, 1.0, -1.0)
        bs = np.where(P >= 0, P - BP, -P - BM)
        if lambda_e > 0 and Cd > 1:
            free = (bs > 0) & np.all(s * nu <= 0, axis=0)
            cands.append(np.where(free, s * bs / KD, 0.0))
            pairs = [(c1, c2) for c1 in range(Cd) if c1 != c for c2 in range(Cs)]
            T = tau[[p[0] for p in pairs]]
            G = np.maximum(s * T, 0)
            V = np.maximum(s * nu[[p[1] for p in pairs]], 0)
            K = KD + 2.0 * lambda_e * T * T
            a, R, _, _ = solve_ratio_batch(np.broadcast_to(bs, G.shape), G, V, K, lambda_e)
            if np.isfinite(R).any():
                cands.append(s * a[int(np.argmin(R))])
        vals = [value(t) for t in cands]
        tau_new[c] = cands[int(np.argmin(vals))]
    for c in np.flatnonzero(np.bincount(labels, minlength=Cd) == 0):
        i = next_unused()
        tau_new[c] = Q[i] - nu[sim[i]]

    alpha = lambda0 * _rho(Y, tau_new[labels])
    nu_new = nu.copy()
    for c2 in range(Cs):
        rows = np.flatnonzero(sim == c2)
        if rows.size == 0:
            i = next_unused()
            nu_new[c2] = Q[i] - tau_new[labels[i]]
            continue
        Yr, al = Y[rows], alpha[rows]
        Pn = lambda_a * np.sum(Q[rows] - tau_new[labels[rows]], axis=0)
        kq = lambda_a * rows.size
        keep = (al > 0) & (_rho(Yr, nu[c2]) > 0)

        def value(z):
            rr = _rho(Yr, z)
            if np.any(keep & (rr <= 0)):
                return np.inf, rr, (-1, -1)
            val = float(z @ (0.5 * kq * z - Pn))
            val += float(np.sum(np.divide(al, rr, out=np.zeros_like(rr), where=rr > 0)))
            pair = (-1, -1)
            if lambda_e > 0:
                pr = _prior(z, tau_new, nu, -1, c2)
                val += lambda_e * pr
                others = [c for c in range(Cs) if c != c2]
                if others and pr != 0.0:
                    cb = max(others, key=lambda c: _rho(z, nu[c]))
                    rmax = _rho(z, nu[cb])
                    c1b = int(np.argmin([_rho(tau_new[t], z) / rmax
                                         + np.sum((tau_new[t] * z) ** 2) for t in range(Cd)]))
                    pair = (c1b, cb)
            return val, rr, pair

        z = nu[c2].copy()
        val, rr, pair = value(z)
        for _ in range(n_nu_steps):
            tol = 1e-12 * (abs(val) + 0.5 * kq * float(z @ z) + 1.0)
            wk = np.divide(al, rr * rr, out=np.zeros_like(rr), where=rr > 0)
            Gp = wk @ np.maximum(Yr, 0)
            Gm = wk @ np.maximum(-Yr, 0)
            k = np.full(M, kq)
            bp, bm = Pn.copy(), -Pn
            if pair[0] >= 0:
                tp, vp = tau_new[pair[0]], nu[pair[1]]
                Nr, D = _rho(z, tp), _rho(z, vp)
                k += 2.0 * lambda_e * tp * tp
                bp -= lambda_e * (np.maximum(tp, 0) * D - Nr * np.maximum(vp, 0)) / D ** 2
                bm -= lambda_e * (np.maximum(-tp, 0) * D - Nr * np.maximum(-vp, 0)) / D ** 2
            Kc = np.where(z > 0, z * z * Gp, np.where(z < 0, z * z * Gm, 0.0))
            closed = np.where((bm > bp) & (bm > 0), -bm / k, np.where(bp > 0, bp / k, 0.0))
            with np.errstate(invalid="ignore", divide="ignore"):
                root = _cubic_roots(k, np.where(z > 0, bp, bm), np.where(Kc > 0, Kc, 1.0))
            A = np.where(Kc > 0, np.sign(z) * root, closed)
            lp, lm = bp + Gp, bm + Gm
            B = np.where((lm > lp) & (lm > 0), -lm / k, np.where(lp > 0, lp / k, 0.0))
            cA, cB = value(A), value(B)
            best = (cB[0], B, cB[1], cB[2]) if cB[0] < cA[0] else (cA[0], A, cA[1], cA[2])
            if not best[0] < val:
                if best[0] - val <= tol:
                    break
                best, t = None, 0.5
                for _ in range(30):
                    zt = z + t * (A - z)
                    ct = value(zt)
                    if ct[0] < val:
                        best = (ct[0], zt, ct[1], ct[2])
                        break
                    t *= 0.5
                if best is None:
                    break
            decrease = val - best[0]
            val, z, rr, pair = best
            if decrease <= tol:
                break
        nu_new[c2] = z
    return tau_new, nu_new


# --------------------------------------------------------------------------------------------
# Stage 3 and the objective
# --------------------------------------------------------------------------------------------
def _singular_values(s, c, lambda2, lambda3, lambda4):
    from ntnumba.kernels import transform_singular_values
    return transform_singular_values(s, c, lambda2, lambda3, lambda4)


def _regulariser(A, lambda2, lambda3, lambda4):
    sv = svd(A, compute_uv=False)
    s2 = sv * sv
    return (0.5 * lambda2 * s2.sum() + 0.5 * lambda3 * (np.sum((s2 - 1) ** 2) + A.shape[0]
                                                        - A.shape[1])
            - lambda4 * np.sum(np.log(s2)))


def _f3(A, X, Ybar, lambda2, lambda3, lambda4):
    R = X @ A.T - Ybar
    return 0.5 * float(np.vdot(R, R)) + _regulariser(A, lambda2, lambda3, lambda4)


def update_transform_reference(X, Ybar, A, *, lambda2=16.0, lambda3=16.0, lambda4=16.0,
                               n_steps=1):
    """Stage 3 in NumPy: closed-form start (best of it and ``A``), then plain MM steps, each
    by a thin SVD of the M x N surrogate target ``B = Ybar^T X - A (X^T X - c I)``."""
    X = np.asarray(X, dtype=np.float64)
    G = X.T @ X
    B0 = Ybar.T @ X
    U, s, Vt = svd(B0, full_matrices=False)
    ci = np.einsum("ij,jk,ik->i", Vt, G, Vt)
    A_cf = (U * _singular_values(s, ci, lambda2, lambda3, lambda4)) @ Vt
    f_cf = _f3(A_cf, X, Ybar, lambda2, lambda3, lambda4)
    f_A = _f3(A, X, Ybar, lambda2, lambda3, lambda4)
    A, f = (A_cf, f_cf) if f_cf < f_A else (np.asarray(A, dtype=np.float64), f_A)
    c = np.linalg.eigvalsh(G)[-1] * (1.0 + 1e-10)
    for _ in range(n_steps):
        U, s, Vt = svd(B0 - A @ (G - c * np.eye(G.shape[0])), full_matrices=False)
        A_new = (U * _singular_values(s, c, lambda2, lambda3, lambda4)) @ Vt
        f_new = _f3(A_new, X, Ybar, lambda2, lambda3, lambda4)
        if not f_new <= f:
            break
        A, f = A_new, f_new
    return A


def iterate_reference(X, A, tau, nu, p):
    """One full iteration (Stages 1-3 and the objective) in NumPy; ``p`` the hyper-parameters
    (attributes as :class:`benchmarks.stages.Params`).

    Returns ``(A, tau, nu, labels, objective)``.
    """
    X = np.asarray(X, dtype=np.float64)
    Q = X @ A.T
    labels, sim, Y, scores = assign_reference(Q, tau, nu, p.lambda0, p.lambda1, rule=p.rule,
                                              lambda_a=p.lambda_a)
    cost = scores[np.arange(X.shape[0]), labels, sim]
    tau, nu = update_theta_reference(Q, Y, labels, sim, tau, nu, lambda0=p.lambda0,
                                     lambda_a=p.lambda_a, lambda_e=p.lambda_e, cost=cost)
    if p.learn_transform:
        w = 1.0 + p.lambda_a
        Ybar = (Y + p.lambda_a * (tau[labels] + nu[sim])) / w
        A = update_transform_reference(X, Ybar, A, lambda2=p.lambda2 / w,
                                       lambda3=p.lambda3 / w, lambda4=p.lambda4 / w,
                                       n_steps=p.transform_steps)
        Q = X @ A.T
    rt, rn = _rho(Y, tau[labels]), _rho(Y, nu[sim])
    obj = (0.5 * np.sum((Q - Y) ** 2) + p.lambda1 * np.sum(np.abs(Y))
           + 0.5 * p.lambda_a * np.sum((Q - tau[labels] - nu[sim]) ** 2)
           + p.lambda0 * (np.sum(np.divide(rt, rn, out=np.zeros_like(rt), where=rn > 0))
                          + np.sum((Y * tau[labels]) ** 2)))
    if p.lambda_e:
        obj += p.lambda_e * (sum(_prior(tau[c], tau, nu, c, -1) for c in range(tau.shape[0]))
                             + sum(_prior(nu[c], tau, nu, -1, c) for c in range(nu.shape[0])))
    if p.learn_transform:
        obj += _regulariser(A, p.lambda2, p.lambda3, p.lambda4)
    return A, tau, nu, labels, float(obj)
