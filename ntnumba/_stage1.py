"""Stage 1: candidate NT representations in closed form and the min-max assignment.

Names follow ``algorithm.md`` ("Stage 1"). For a sample ``q = A x`` and a candidate pair
``(c1, c2)`` the representation keeps the signs of ``q`` and its magnitudes ``a = |y| >= 0``
minimise the reduced objective

    R(a) = sum_j (k_j a_j^2 / 2 - b_j a_j) + lam * (g . a) / (v . a)

with ``b = |q| - lambda1``, ``k = 1 + 2 lambda0 tau^2``, ``g`` and ``v`` the parts of
``tau_c1`` and ``nu_c2`` of the sign of ``q`` and ``lam = lambda0``. The candidate objective of
``algorithm.md`` is ``F = ||q||^2 / 2 + R``. The same reduced problem (other ``b, g, v, k``)
is the tau prior of Stage 2, so :func:`_solve_ratio` is written for generic inputs.

Precision: arrays are read in their own dtype (float32 or float64); every sum, the quartic and
the returned scores are float64.
"""
import numpy as np
from numba import njit, prange, get_num_threads

from ._quartic import _largest_positive_root
from ._validation import as_float_array, check_choice, check_scalar

# status codes of _solve_ratio
OK = 0              # support iteration converged from the plain soft-threshold support
OK_SAFEGUARD = 1    # the safeguard (grid over h) found the returned point
INVALID = -1        # rho(y, nu) = 0 or the infimum is only approached as y -> 0

_MAX_SI = 50         # support-iteration passes before falling back to the safeguard
_GRID = 48           # h grid of the safeguard
_BISECT = 80         # bisection steps of the safeguard's inner problem
_GOLDEN = 40         # golden-section steps refining the best grid point


@njit(cache=False)
def _support_sums(b, g, v, k, mask):
    Vq = 0.0
    Vg = 0.0
    Vv = 0.0
    Gq = 0.0
    Gg = 0.0
    for j in range(b.shape[0]):
        if mask[j]:
            kj = 1.0 / k[j]
            vj = v[j] * kj
            gj = g[j] * kj
            Vq += vj * b[j]
            Vg += vj * g[j]
            Vv += vj * v[j]
            Gq += gj * b[j]
            Gg += gj * g[j]
    return Vq, Vg, Vv, Gq, Gg


@njit(cache=False)
def _eval_reduced(b, g, v, k, lam, a):
    """R(a) for a given a >= 0, and (g.a, v.a); +inf when v.a == 0."""
    quad = 0.0
    ga = 0.0
    va = 0.0
    for j in range(b.shape[0]):
        aj = a[j]
        if aj != 0.0:
            quad += aj * (0.5 * k[j] * aj - b[j])
            ga += g[j] * aj
            va += v[j] * aj
    if va <= 0.0:
        return np.inf, ga, va
    return quad + lam * ga / va, ga, va


@njit(cache=False)
def _support_iteration(b, g, v, k, lam, a, mask, from_mask, qbuf):
    """SI+ of algorithm.md. Returns (status, R) and leaves the minimiser in ``a``.

    ``from_mask``: start from the support in ``mask`` instead of ``{b > 0}``.
    status OK on convergence, INVALID when the iteration cannot continue (no mass of v on the
    support, no admissible root, or no convergence within _MAX_SI passes).
    """
    M = b.shape[0]
    if not from_mask:
        for j in range(M):
            mask[j] = b[j] > 0.0
    for _ in range(_MAX_SI):
        Vq, Vg, Vv, Gq, Gg = _support_sums(b, g, v, k, mask)
        if Vv <= 0.0:
            return INVALID, np.inf
        if lam == 0.0:
            h = Vq
            if h <= 0.0:
                return INVALID, np.inf
            r = Gq / h
        else:
            h = _largest_positive_root(-Vq, lam * (Vg * Vq - Vv * Gq),
                                       lam * lam * (Vv * Gg - Vg * Vg), qbuf)
            if h <= 0.0:
                return INVALID, np.inf
            r = (h * h - Vq * h + lam * Vg) / (lam * Vv)
        lh = lam / h
        changed = 0
        for j in range(M):
            aj = (b[j] - lh * (g[j] - r * v[j])) / k[j]
            inside = aj > 0.0
            if inside != mask[j]:
                changed += 1
                mask[j] = inside
            a[j] = aj if inside else 0.0
        if changed == 0:
            R, ga, va = _eval_reduced(b, g, v, k, lam, a)
            if not np.isfinite(R):
                return INVALID, np.inf
            return OK, R
    return INVALID, np.inf


@njit(cache=False)
def _va_of(b, g, v, k, lh, mu):
    s = 0.0
    for j in range(b.shape[0]):
        if v[j] > 0.0:
            t = b[j] - lh * g[j] + mu * v[j]
            if t > 0.0:
                s += v[j] * t / k[j]
    return s


@njit(cache=False)
def _inner_fixed_h(b, g, v, k, lam, h, a):
    """Exact minimiser of R over {a >= 0, v.a = h} (a convex problem); returns R there.

    KKT: a_j = max(b_j - lam g_j / h + mu v_j, 0) / k_j with mu found by bisection so that
    v.a = h (v.a is non-decreasing in mu).
    """
    M = b.shape[0]
    lh = lam / h
    lo = -1.0
    while _va_of(b, g, v, k, lh, lo) > h:
        lo *= 2.0
        if lo < -1e300:
            break
    hi = 1.0
    while _va_of(b, g, v, k, lh, hi) < h:
        hi *= 2.0
        if hi > 1e300:
            break
    for _ in range(_BISECT):
        mid = 0.5 * (lo + hi)
        if _va_of(b, g, v, k, lh, mid) < h:
            lo = mid
        else:
            hi = mid
    mu = hi
    for j in range(M):
        t = b[j] - lh * g[j] + mu * v[j]
        a[j] = t / k[j] if t > 0.0 else 0.0
    R, ga, va = _eval_reduced(b, g, v, k, lam, a)
    return R


@njit(cache=False)
def _grid_h(href, m):
    return href * 10.0 ** (-6.0 + 7.0 * m / (_GRID - 1))


@njit(cache=False)
def _safeguard(b, g, v, k, lam, a, mask, abest, qbuf):
    """Coarse grid over h = v.a with the exact inner problem, then SI+ from the best support.

    Returns (status, R) with the better of the grid point and the SI+ result in ``a``.
    """
    M = b.shape[0]
    href = 0.0
    vmax = 0.0
    for j in range(M):
        if v[j] > 0.0:
            href += v[j] * max(b[j], 0.0) / k[j]
            t = v[j] * (abs(b[j]) + lam) / k[j]
            if t > vmax:
                vmax = t
    if vmax == 0.0:
        return INVALID, np.inf
    if href <= 0.0:
        href = vmax
    bestR = np.inf
    mbest = -1
    for m in range(_GRID):
        R = _inner_fixed_h(b, g, v, k, lam, _grid_h(href, m), a)
        if R < bestR:
            bestR = R
            mbest = m
    if mbest < 0:
        return INVALID, np.inf
    # golden-section refinement of h between the neighbours of the best grid point
    lo = np.log(_grid_h(href, mbest - 1))
    hi = np.log(_grid_h(href, mbest + 1))
    gr = 0.5 * (np.sqrt(5.0) - 1.0)
    x1 = hi - gr * (hi - lo)
    x2 = lo + gr * (hi - lo)
    f1 = _inner_fixed_h(b, g, v, k, lam, np.exp(x1), a)
    f2 = _inner_fixed_h(b, g, v, k, lam, np.exp(x2), a)
    for _ in range(_GOLDEN):
        if f1 <= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - gr * (hi - lo)
            f1 = _inner_fixed_h(b, g, v, k, lam, np.exp(x1), a)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + gr * (hi - lo)
            f2 = _inner_fixed_h(b, g, v, k, lam, np.exp(x2), a)
    hbest = _grid_h(href, mbest)
    for x, f in ((x1, f1), (x2, f2)):
        if f < bestR:
            bestR = f
            hbest = np.exp(x)
    bestR = _inner_fixed_h(b, g, v, k, lam, hbest, abest)
    if not np.isfinite(bestR):
        return INVALID, np.inf
    for j in range(M):
        mask[j] = abest[j] > 0.0
    st, R = _support_iteration(b, g, v, k, lam, a, mask, True, qbuf)
    if st == OK and R <= bestR:
        return OK_SAFEGUARD, R
    for j in range(M):
        a[j] = abest[j]
    return OK_SAFEGUARD, bestR


@njit(cache=False)
def _limit_at_zero(b, g, v, k, lam):
    """Infimum of R approached as v.a -> 0 (algorithm.md: 'the infimum only reached as y -> 0').

    Coordinates with g = v = 0 do not enter the ratio and keep their soft-threshold optimum;
    the ratio tends at best to min_j g_j / v_j over v_j > 0.
    """
    dec = 0.0
    rmin = np.inf
    for j in range(b.shape[0]):
        if v[j] > 0.0:
            t = g[j] / v[j]
            if t < rmin:
                rmin = t
        elif g[j] == 0.0 and b[j] > 0.0:
            dec -= 0.5 * b[j] * b[j] / k[j]
    return dec + lam * rmin


@njit(cache=False)
def _solve_ratio(b, g, v, k, lam, a, mask, work, qbuf, safeguard):
    """Minimise R(a) = sum(k a^2/2 - b a) + lam g.a/v.a over a >= 0 (k > 0, g, v >= 0).

    Writes the minimiser to ``a`` and returns ``(status, R)``; ``R = +inf`` and ``a = 0`` when
    the candidate is invalid. ``mask`` (bool, M), ``work`` (float64, 2 x M) and ``qbuf``
    (float64, 8) are caller-owned scratch. The support iteration runs first; the safeguard runs
    when it fails or, with ``safeguard=True``, always (the better point is kept).
    """
    M = b.shape[0]
    st, R = _support_iteration(b, g, v, k, lam, a, mask, False, qbuf)
    if st != OK or safeguard:
        asave = work[1]
        if st == OK:
            for j in range(M):
                asave[j] = a[j]
            Rsi = R
        else:
            Rsi = np.inf
        st2, R2 = _safeguard(b, g, v, k, lam, a, mask, work[0], qbuf)
        if st2 == OK_SAFEGUARD and R2 < Rsi:
            st, R = OK_SAFEGUARD, R2
        elif np.isfinite(Rsi):
            for j in range(M):
                a[j] = asave[j]
            st, R = OK, Rsi
        else:
            st, R = INVALID, np.inf
    if st != INVALID and not (R < _limit_at_zero(b, g, v, k, lam)):
        st = INVALID
    if st == INVALID:
        for j in range(M):
            a[j] = 0.0
        return INVALID, np.inf
    return st, R


@njit(cache=False)
def _fill_candidate_inputs(q, tpos, tneg, tsq, npos, nneg, lam0, lam1, b, g, v, k):
    for j in range(q.shape[0]):
        qj = q[j]
        b[j] = abs(qj) - lam1
        if qj > 0.0:
            g[j] = tpos[j]
            v[j] = npos[j]
        elif qj < 0.0:
            g[j] = tneg[j]
            v[j] = nneg[j]
        else:  # sign(y) = sign(q) = 0: the coordinate leaves the problem
            g[j] = 0.0
            v[j] = 0.0
        k[j] = 1.0 + 2.0 * lam0 * tsq[j]


@njit(cache=False)
def _candidate_scalar(q, tau, nu, lam0, lam1, safeguard):
    M = q.shape[0]
    b = np.empty(M)
    g = np.empty(M)
    v = np.empty(M)
    k = np.empty(M)
    a = np.empty(M)
    work = np.empty((2, M))
    mask = np.empty(M, dtype=np.bool_)
    qbuf = np.empty(8)
    tpos = np.maximum(tau, 0.0)
    tneg = np.maximum(-tau, 0.0)
    npos = np.maximum(nu, 0.0)
    nneg = np.maximum(-nu, 0.0)
    _fill_candidate_inputs(q, tpos, tneg, tau * tau, npos, nneg, lam0, lam1, b, g, v, k)
    st, R = _solve_ratio(b, g, v, k, lam0, a, mask, work, qbuf, safeguard)
    qq = 0.0
    for j in range(M):
        qq += q[j] * q[j]
    y = np.empty(M)
    for j in range(M):
        y[j] = a[j] if q[j] > 0.0 else -a[j]
    if st == INVALID:
        return y, np.inf, st
    return y, 0.5 * qq + R, st


# Flags for the reductions of the fused passes: reassociation lets LLVM vectorise the sums.
# No 'nnan'/'ninf': +inf is a meaningful value in this module.
_FM = {"reassoc", "contract", "nsz", "arcp"}


@njit(fastmath=_FM, cache=False)
def _fused_pass(b, g, v, ki, k, t2, lh, r, mask):
    """One pass of SI+ with everything the next step needs, branch-free.

    With the current level ``h`` (``lh = lam / h``) and ratio ``r``: the new magnitudes
    ``a_j = max((b_j - lh (g_j - r v_j)) / k_j, 0)``, the new support (written to ``mask``,
    changes counted), the support sums of the next quartic over the new support and the value
    terms at ``a``. ``lh = r = 0`` gives the start ``a = max(b, 0) / k`` (support ``{b > 0}``).
    Returns (changed, Vq, Vg, Vv, Gq, Gg, quad, ga, va, sig, dec) where quad = sum a(k a/2 - b),
    ga = g.a, va = v.a, sig = sum t2 a^2 and dec = -1/2 sum b^2/k over {a > 0, g = v = 0}.
    """
    changed = 0
    Vq = 0.0
    Vg = 0.0
    Vv = 0.0
    Gq = 0.0
    Gg = 0.0
    quad = 0.0
    ga = 0.0
    va = 0.0
    sig = 0.0
    dec = 0.0
    for j in range(b.shape[0]):
        bj = np.float64(b[j])
        gj = np.float64(g[j])
        vj = np.float64(v[j])
        kij = np.float64(ki[j])
        a = (bj - lh * (gj - r * vj)) * kij
        ins = a > 0.0
        changed += ins != mask[j]
        mask[j] = ins
        m = 1.0 if ins else 0.0
        a *= m
        vk = vj * kij * m
        gk = gj * kij * m
        Vq += vk * bj
        Vg += vk * gj
        Vv += vk * vj
        Gq += gk * bj
        Gg += gk * gj
        quad += a * (0.5 * np.float64(k[j]) * a - bj)
        ga += gj * a
        va += vj * a
        sig += np.float64(t2[j]) * a * a
        free = 1.0 if (gj == 0.0 and vj == 0.0) else 0.0
        dec -= 0.5 * free * bj * a
    return changed, Vq, Vg, Vv, Gq, Gg, quad, ga, va, sig, dec


@njit(cache=False)
def _fast_candidate(b, g, v, ki, k, t2, lam, mask, qbuf):
    """SI+ by fused passes (one pass per support iteration, ~3 passes in the paper's regime).

    Returns (status, R, sP, h, r): status OK, or INVALID when the generic path must decide
    (no mass of v, no admissible root, no convergence, or R not clearly below the limit at
    zero). The magnitudes are not stored: they follow from (h, r), see :func:`_write_a`.
    """
    (ch, Vq, Vg, Vv, Gq, Gg, quad, ga, va, sig,
     dec) = _fused_pass(b, g, v, ki, k, t2, 0.0, 0.0, mask)
    for _ in range(_MAX_SI):
        if Vv <= 0.0:
            return INVALID, np.inf, np.inf, 0.0, 0.0
        if lam == 0.0:
            h = Vq
            if h <= 0.0:
                return INVALID, np.inf, np.inf, 0.0, 0.0
            r = Gq / h
        else:
            h = _largest_positive_root(-Vq, lam * (Vg * Vq - Vv * Gq),
                                       lam * lam * (Vv * Gg - Vg * Vg), qbuf)
            if h <= 0.0:
                return INVALID, np.inf, np.inf, 0.0, 0.0
            r = (h * h - Vq * h + lam * Vg) / (lam * Vv)
        lh = lam / h
        (ch, Vq, Vg, Vv, Gq, Gg, quad, ga, va, sig,
         dec) = _fused_pass(b, g, v, ki, k, t2, lh, r, mask)
        if ch == 0:
            if not va > 0.0:
                return INVALID, np.inf, np.inf, 0.0, 0.0
            R = quad + lam * ga / va
            # dec >= limit at zero - lam min(g/v): R < dec proves validity without a pass
            if not R < dec:
                return INVALID, np.inf, np.inf, 0.0, 0.0
            return OK, R, ga / va + sig, h, r
    return INVALID, np.inf, np.inf, 0.0, 0.0


@njit(cache=False)
def _write_a(b, g, v, ki, lh, r, a):
    for j in range(b.shape[0]):
        t = (b[j] - lh * (g[j] - r * v[j])) * ki[j]
        a[j] = t if t > 0.0 else 0.0


@njit(parallel=True, cache=False)
def _assign_kernel(Q, tpos, tneg, tsq, kmat, kimat, npos, nneg, lam0, lam1, adj, rule,
                   safeguard, labels, slabels, Y, F, SP, status):
    """All n x Cd x Cs candidates and the argmin assignment.

    prange over blocks of samples; each block owns its scratch and writes only its rows of
    ``labels, slabels, Y, F, SP, status``. ``adj[i, c1, c2]`` is the adjustment term
    lambda_a/2 ||q_i - tau_c1 - nu_c2||^2 (used by rule 1, "objective"); rule 0 is "paper".
    ``kmat = 1 + 2 lambda0 tau^2`` and ``kimat = 1 / kmat`` are per-cluster constants.
    Every candidate runs the fused SI+ (:func:`_fast_candidate`); the few it cannot settle
    (and all, with ``safeguard``) go through the generic :func:`_solve_ratio`.
    """
    n, M = Q.shape
    Cd = tpos.shape[0]
    Cs = npos.shape[0]
    nblocks = min(n, 8 * get_num_threads())
    dt = Q.dtype
    for blk in prange(nblocks):
        start = (blk * n) // nblocks
        stop = ((blk + 1) * n) // nblocks
        b = np.empty(M, dtype=dt)
        g = np.empty(M, dtype=dt)
        V = np.empty((Cs, M), dtype=dt)
        a = np.empty(M)
        work = np.empty((2, M))
        ywin = np.empty(M)
        mask = np.empty(M, dtype=np.bool_)
        qbuf = np.empty(8)
        for i in range(start, stop):
            q = Q[i]
            best = np.inf
            bc1 = -1
            bc2 = -1
            qq = 0.0
            for j in range(M):
                qj = q[j]
                qq += qj * qj
                b[j] = abs(qj) - lam1
                for c2 in range(Cs):
                    V[c2, j] = npos[c2, j] if qj > 0.0 else (nneg[c2, j] if qj < 0.0 else 0.0)
            for c1 in range(Cd):
                for j in range(M):
                    qj = q[j]
                    g[j] = tpos[c1, j] if qj > 0.0 else (tneg[c1, j] if qj < 0.0 else 0.0)
                k = kmat[c1]
                ki = kimat[c1]
                t2 = tsq[c1]
                for c2 in range(Cs):
                    v = V[c2]
                    if safeguard:
                        st = INVALID
                    else:
                        st, R, sp, h, r = _fast_candidate(b, g, v, ki, k, t2, lam0, mask, qbuf)
                    fast = st == OK
                    if not fast:
                        st, R = _solve_ratio(b, g, v, k, lam0, a, mask, work, qbuf, safeguard)
                        if st != INVALID:
                            ga = 0.0
                            va = 0.0
                            sig = 0.0
                            for j in range(M):
                                aj = a[j]
                                if aj != 0.0:
                                    ga += g[j] * aj
                                    va += v[j] * aj
                                    sig += t2[j] * aj * aj
                            sp = ga / va + sig
                    status[i, c1, c2] = st
                    if st == INVALID:
                        F[i, c1, c2] = np.inf
                        SP[i, c1, c2] = np.inf
                        continue
                    SP[i, c1, c2] = sp
                    Fv = 0.5 * qq + R
                    F[i, c1, c2] = Fv
                    score = sp if rule == 0 else Fv + adj[i, c1, c2]
                    if score < best:
                        best = score
                        bc1 = c1
                        bc2 = c2
                        if fast:
                            _write_a(b, g, v, ki, lam0 / h, r, ywin)
                        else:
                            for j in range(M):
                                ywin[j] = a[j]
            if bc1 < 0:
                # every candidate invalid (e.g. |q| <= lambda1 everywhere): y = 0 and the pair
                # nearest in the adjustment term; never a winner with score 0
                bestadj = np.inf
                for c1 in range(Cd):
                    for c2 in range(Cs):
                        if adj[i, c1, c2] < bestadj:
                            bestadj = adj[i, c1, c2]
                            bc1 = c1
                            bc2 = c2
                for j in range(M):
                    Y[i, j] = 0.0
            else:
                for j in range(M):
                    Y[i, j] = ywin[j] if q[j] > 0.0 else -ywin[j]
            labels[i] = bc1
            slabels[i] = bc2


# --------------------------------------------------------------------------------------------
# Python entry points (validation, preparation, the kernel call)
# --------------------------------------------------------------------------------------------

RULES = {"paper": 0, "objective": 1}


def _split_signs(P):
    return np.maximum(P, 0), np.maximum(-P, 0)


def candidate_nt(q, tau, nu, lambda0, lambda1, *, safeguard=False, return_status=False):
    """One candidate NT representation in closed form.

    Solves, for one sample ``q = A x`` and one pair ``(tau_c1, nu_c2)``,

        min_y  1/2 ||q - y||^2 + lambda1 ||y||_1
               + lambda0 ( rho(y, tau) / rho(y, nu) + sigma(y, tau) )   with sign(y) = sign(q)

    by the support iteration (SI+) of ``algorithm.md``: the threshold level ``h = rho(y, nu)``
    is the larger positive root of a quartic, solved in closed form.

    Parameters
    ----------
    q : array_like of shape (M,)
        The linear map of one sample, ``A @ x``.
    tau, nu : array_like of shape (M,)
        Dissimilarity parameter of cluster ``c1`` and similarity parameter ``c2``.
    lambda0, lambda1 : float
        Weight of the min-max score and of the l1 norm (both >= 0).
    safeguard : bool, default False
        Also run the safeguard (a grid over ``h`` with the exact inner problem, then SI+ from
        the best support) and keep the better point. It runs anyway when SI+ fails. Needed only
        far from the paper's regime (large ``lambda0`` relative to ``|q|``); see
        ``docs/algorithm.md`` for measured failure rates.
    return_status : bool, default False
        Also return the status: 0 = SI+ converged, 1 = found by the safeguard, -1 = invalid.

    Returns
    -------
    y : ndarray of shape (M,), float64
        The representation; ``sign(y) = sign(q)`` where ``y != 0``. Zero for an invalid
        candidate.
    value : float
        The candidate objective ``F`` at ``y`` (the expression above); ``+inf`` when the
        candidate is invalid: ``rho(y, nu) = 0`` or the infimum is only approached as y -> 0.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.kernels import candidate_nt
    >>> rng = np.random.default_rng(0)
    >>> q, tau, nu = rng.standard_normal((3, 50)) * [[5.0], [1.0], [1.0]]
    >>> y, value = candidate_nt(q, tau, nu, 0.03, 0.03)
    >>> bool(np.all(np.sign(y[y != 0]) == np.sign(q[y != 0])))
    True
    """
    q = as_float_array(q, "q", ndim=1, dtype=np.float64)
    M = q.shape[0]
    tau = as_float_array(tau, "tau", ndim=1, dtype=np.float64)
    nu = as_float_array(nu, "nu", ndim=1, dtype=np.float64)
    for name, arr in (("tau", tau), ("nu", nu)):
        if arr.shape[0] != M:
            raise ValueError(f"{name}: expected length {M} (the length of q), got {arr.shape[0]}")
    lambda0 = check_scalar(lambda0, "lambda0", low=0.0)
    lambda1 = check_scalar(lambda1, "lambda1", low=0.0)
    y, value, st = _candidate_scalar(q, tau, nu, lambda0, lambda1, bool(safeguard))
    if return_status:
        return y, value, int(st)
    return y, value


def adjustment_term(Q, tau, nu, lambda_a):
    """``lambda_a / 2 ||q_i - tau_c1 - nu_c2||^2`` for all i, c1, c2 (float64, n x Cd x Cs).

    Expanded into matrix products (no n x Cd x Cs x M array); clipped at 0 against rounding.
    """
    Q = np.asarray(Q, dtype=np.float64)
    tau = np.asarray(tau, dtype=np.float64)
    nu = np.asarray(nu, dtype=np.float64)
    qq = np.einsum("ij,ij->i", Q, Q)
    QT = Q @ tau.T
    QN = Q @ nu.T
    TT = np.einsum("ij,ij->i", tau, tau)
    NN = np.einsum("ij,ij->i", nu, nu)
    TN = tau @ nu.T
    d = (qq[:, None, None] - 2.0 * QT[:, :, None] - 2.0 * QN[:, None, :]
         + TT[None, :, None] + NN[None, None, :] + 2.0 * TN[None, :, :])
    np.maximum(d, 0.0, out=d)
    d *= 0.5 * lambda_a
    return d


def assign(Q, tau, nu, lambda0, lambda1, *, rule="objective", lambda_a=1.0, safeguard=False,
           return_details=False):
    """Stage 1 for all samples: every candidate, then the min-max assignment.

    For every sample ``q_i`` (row of ``Q``) and every pair ``(c1, c2)`` the candidate
    representation is computed in closed form (:func:`candidate_nt`), then the pair with the
    smallest score is assigned.

    Parameters
    ----------
    Q : array_like of shape (n, M)
        Linear maps of the samples, ``X @ A.T``. float32 input is kept in float32 (see Notes).
    tau : array_like of shape (Cd, M)
        Dissimilarity parameters, one row per cluster.
    nu : array_like of shape (Cs, M)
        Similarity parameters.
    lambda0, lambda1 : float
        Weights of the min-max score and of the l1 norm (>= 0).
    rule : {"objective", "paper"}, default "objective"
        ``"paper"``: argmin of the score ``sP = rho(y,tau)/rho(y,nu) + sigma(y,tau)`` alone (the
        paper's Stage 1, Part 2; it collapses into one cluster when learning, see the docs).
        ``"objective"``: argmin of the full per-sample cost
        ``1/2||q-y||^2 + lambda1||y||_1 + lambda0 sP + lambda_a/2 ||q - tau_c1 - nu_c2||^2``.
    lambda_a : float, default 1.0
        Weight of the adjustment term (``"objective"`` rule only).
    safeguard : bool, default False
        Run the safeguard for every candidate (see :func:`candidate_nt`); slower.
    return_details : bool, default False
        Also return a dict with ``"F"`` (candidate objectives), ``"sP"`` (scores), ``"adj"``
        (adjustment terms), ``"status"`` (0, 1 or -1 per candidate) and ``"cost"`` (the full
        cost of the assigned pair per sample, float64; for a sample whose candidates are all
        invalid, the cost of ``y = 0`` without the undefined ratio term:
        ``||q||^2 / 2 + lambda_a/2 ||q - tau - nu||^2``).

    Returns
    -------
    labels : ndarray of shape (n,), int64
        The assigned dissimilarity index ``c1`` (the cluster).
    similarity_labels : ndarray of shape (n,), int64
        The assigned similarity index ``c2``.
    Y : ndarray of shape (n, M)
        The assigned NT representations, in the dtype of ``Q``.
    scores : ndarray of shape (n, Cd, Cs), float64
        The score the rule minimises for every candidate; ``+inf`` for invalid candidates.
        A sample whose candidates are all invalid (e.g. ``|q| <= lambda1`` everywhere) gets
        ``y = 0`` and the pair with the smallest adjustment term.

    Notes
    -----
    Samples are processed in parallel (numba ``prange`` over blocks of samples), each block with
    its own scratch; results do not depend on the thread count. ``Q, tau, nu`` are read in the
    dtype of ``Q`` (float32 or float64; other input becomes float64); all sums, the quartic and
    the scores are computed in float64.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.kernels import assign
    >>> rng = np.random.default_rng(0)
    >>> tau = 3.0 * rng.standard_normal((3, 40))
    >>> nu = rng.standard_normal((1, 40))
    >>> Q = tau[[0, 1, 2, 0]] + nu[0] + 0.1 * rng.standard_normal((4, 40))
    >>> labels, sim, Y, scores = assign(Q, tau, nu, 0.03, 0.03)
    >>> labels.tolist()
    [0, 1, 2, 0]
    """
    Q = as_float_array(Q, "Q", ndim=2)
    n, M = Q.shape
    dt = Q.dtype
    tau = as_float_array(tau, "tau", ndim=2, dtype=dt)
    nu = as_float_array(nu, "nu", ndim=2, dtype=dt)
    for name, arr in (("tau", tau), ("nu", nu)):
        if arr.shape[1] != M:
            raise ValueError(f"{name}: expected {M} columns (the columns of Q), "
                             f"got shape {arr.shape}")
    lambda0 = check_scalar(lambda0, "lambda0", low=0.0)
    lambda1 = check_scalar(lambda1, "lambda1", low=0.0)
    lambda_a = check_scalar(lambda_a, "lambda_a", low=0.0)
    rule_id = RULES[check_choice(rule, "rule", RULES)]
    Cd, Cs = tau.shape[0], nu.shape[0]
    adj = adjustment_term(Q, tau, nu, lambda_a)
    tpos, tneg = _split_signs(tau)
    npos, nneg = _split_signs(nu)
    labels = np.empty(n, dtype=np.int64)
    slabels = np.empty(n, dtype=np.int64)
    Y = np.empty((n, M), dtype=dt)
    F = np.empty((n, Cd, Cs))
    SP = np.empty((n, Cd, Cs))
    status = np.empty((n, Cd, Cs), dtype=np.int8)
    tsq = tau * tau
    kmat = 1.0 + 2.0 * lambda0 * tsq
    _assign_kernel(Q, tpos, tneg, tsq, kmat, 1.0 / kmat, npos, nneg, lambda0, lambda1, adj,
                   rule_id, bool(safeguard), labels, slabels, Y, F, SP, status)
    scores = SP if rule_id == 0 else F + adj
    if not return_details:
        return labels, slabels, Y, scores
    idx = np.arange(n)
    cost = F[idx, labels, slabels] + adj[idx, labels, slabels]
    # samples with every candidate invalid have y = 0: data terms ||q||^2 / 2, no ratio term
    dead = ~np.isfinite(cost)
    if np.any(dead):
        Qd = Q[dead].astype(np.float64)
        cost[dead] = 0.5 * np.einsum("ij,ij->i", Qd, Qd) + adj[dead, labels[dead], slabels[dead]]
    details = {"F": F, "sP": SP, "adj": adj, "status": status, "cost": cost}
    return labels, slabels, Y, scores, details
