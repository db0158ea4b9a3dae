"""Stage 1: candidate NT representations in closed form and the min-max assignment.

Names follow ``algorithm.md`` ("Stage 1", "Reduction to magnitudes"): the magnitudes
``a = |y| >= 0`` minimise ``R(a) = sum_j (k_j a_j^2 / 2 - b_j a_j) + lam (g . a) / (v . a)``
and the candidate objective is ``F = ||q||^2 / 2 + R``. The same reduced problem (other
``b, g, v, k``) is the tau prior of Stage 2, so :func:`solve_ratio` takes generic inputs.

Precision: arrays are read in their own dtype (float32 or float64); every sum, the quartic and
the returned scores are float64.
"""
import math
import sys
import threading
from contextlib import contextmanager

import numpy as np
from numba import get_num_threads, njit

from ..core.parallel import blas_limit
from ..core.parallel import matmul as _matmul
from ..core.parallel import run_ranges
from .quartic import CACHE, internal_njit, largest_positive_root
from ..core.validation import as_float_array, check_choice, check_scalar

# the driver's Q and Y come from a validated X: no NaN/inf scan there (~15 ms per iteration)
_LOCAL = threading.local()


@contextmanager
def trusted_inputs():
    """Context (this thread, :func:`ntnumba.engine.loop.iterate`): the n x M inputs of the
    stage entry points are converted (dtype, C order) but not scanned for NaN/inf."""
    old = getattr(_LOCAL, "trusted", False)
    _LOCAL.trusted = True
    try:
        yield
    finally:
        _LOCAL.trusted = old


def as_float_2d(a, name, dtype=None):
    """:func:`as_float_array` (2-D); inside :func:`trusted_inputs` without the finite scan."""
    if getattr(_LOCAL, "trusted", False):
        arr = np.asarray(a)
        if arr.ndim == 2 and arr.size and arr.dtype.kind == "f":
            if dtype is None:
                dtype = arr.dtype if arr.dtype in (np.float32, np.float64) else np.float64
            return np.ascontiguousarray(arr, dtype=dtype)
    return as_float_array(a, name, ndim=2, dtype=dtype)


# status codes of solve_ratio
OK = 0              # support iteration converged from the plain soft-threshold support
OK_SAFEGUARD = 1    # the safeguard (grid over h) found the returned point
INVALID = -1        # rho(y, nu) = 0 or the infimum is only approached as y -> 0
PRUNED = 2          # assign(prune=True): not evaluated, its lower bound exceeds the best score
GENERIC = -2        # internal (solve_si): SI+ did not settle, the safeguard must decide

_MAX_SI = 50         # support-iteration passes before falling back to the safeguard
_GRID = 48           # h grid of the safeguard: points over its 9 decades below href
_GRID_MAX = 1024     # the grid is extended (same density) below coordinates of tiny v
_BISECT = 80         # bisection steps of the safeguard's inner problem
_GOLDEN = 40         # golden-section steps refining the best grid point
_REFINE = 3          # local minima of the safeguard's grid that are refined
# v below 2^-128 everywhere: g, v rescaled by a power of two (_tiny_v_exponent); the batched
# passes leave Vv below 2^-100 (float32 sums near subnormal) to the generic float64 solvers
_V_TINY = 2.0 ** -128
_VV_TINY = 2.0 ** -100
_G_SCALED_MAX = 400  # the rescaling keeps g below 2^400 (Gg, Vv Gg finite)


@internal_njit()
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


@internal_njit()
def _support_iteration(b, g, v, k, lam, a, mask, qbuf):
    """SI+ from the support in ``mask``: (OK or INVALID, R), the minimiser left in ``a``."""
    for _ in range(_MAX_SI):
        Vq = 0.0   # the support's sums
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
        if Vv <= 0.0:
            return INVALID, np.inf
        if lam == 0.0:
            h = Vq
            if h <= 0.0:
                return INVALID, np.inf
            r = Gq / h
        else:
            h = largest_positive_root(-Vq, 0.0, lam * (Vg * Vq - Vv * Gq),
                                       lam * lam * (Vv * Gg - Vg * Vg), qbuf)[0]
            if h <= 0.0:
                return INVALID, np.inf
            r = (h * h - Vq * h + lam * Vg) / (lam * Vv)
        lh = lam / h
        lr = lh * r
        if not (np.isfinite(r) and np.isfinite(lh) and np.isfinite(lr)):
            return INVALID, np.inf  # under/overflow: the safeguard decides
        if _si_step(b, g, v, k, lh, lr, a, mask) == 0:
            R, ga, va = _eval_reduced(b, g, v, k, lam, a)
            if not np.isfinite(R):
                return INVALID, np.inf
            return OK, R
    return INVALID, np.inf


@internal_njit()
def _si_step(b, g, v, k, lh, lr, a, mask):
    """One SI+ step at ``lh = lam / h``, ``lr = lh r``: ``mask = {t > 0}``, ``a = max(t, 0) / k``;
    returns the number of coordinates whose membership changed."""
    changed = 0
    for j in range(b.shape[0]):
        t = _t_at(b[j], g[j], v[j], lh, lr)
        inside = t > 0.0
        if inside != mask[j]:
            changed += 1
            mask[j] = inside
        a[j] = t / k[j] if inside else 0.0
    return changed


@internal_njit()
def _va_of(b, g, v, k, lh, mu):
    s = 0.0
    for j in range(b.shape[0]):
        if v[j] > 0.0:
            t = _t_at(b[j], g[j], v[j], lh, mu)
            if t > 0.0:
                s += v[j] * t / k[j]
    return s


@internal_njit()
def _inner_fixed_h(b, g, v, k, lam, h, a):
    """Exact minimiser of R over {a >= 0, v.a = h}, written to ``a``; returns R there.

    mu by bisection, then the point on v.a = h between the bracketing mu's (derivation:
    docs/algorithm.md, section "The safeguard": at a tiny h neither bracket end is near it).
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
        if not (lo < mid < hi):  # neighbouring floats: nothing left to bisect
            break
        if _va_of(b, g, v, k, lh, mid) < h:
            lo = mid
        else:
            hi = mid
    # v.a is linear in a: theta places the interpolated point on v.a = h
    valo = _va_of(b, g, v, k, lh, lo)
    vahi = _va_of(b, g, v, k, lh, hi)
    theta = (h - valo) / (vahi - valo) if vahi > valo else 1.0
    theta = min(max(theta, 0.0), 1.0)
    for j in range(M):
        tlo = _t_at(b[j], g[j], v[j], lh, lo)
        thi = _t_at(b[j], g[j], v[j], lh, hi)
        alo = tlo / k[j] if tlo > 0.0 else 0.0
        ahi = thi / k[j] if thi > 0.0 else 0.0
        a[j] = alo + theta * (ahi - alo)
    R, ga, va = _eval_reduced(b, g, v, k, lam, a)
    return R


@internal_njit()
def _grid_h(lhlo, m):
    """Grid point m of the safeguard: log h = lhlo + m * (9 ln 10 / (_GRID - 1))."""
    return np.exp(lhlo + m * (9.0 * np.log(10.0) / (_GRID - 1)))


@internal_njit()
def _safeguard(b, g, v, k, lam, a, mask, abest, qbuf):
    """The safeguard of docs/algorithm.md, section "The safeguard": (status, R), the best point in
    ``a`` (``abest`` is scratch)."""
    M = b.shape[0]
    # Upper bound of h = v.a over {R(a) <= R0}, R0 the limit at zero: the ratio term is >= 0
    # and each k a^2/2 - b a >= -b+^2/(2k), so k_j a_j^2/2 - b_j a_j <= R0 + sum_l b_l+^2/(2k_l)
    R0 = _limit_at_zero(b, g, v, k, lam)
    if not np.isfinite(R0):
        return INVALID, np.inf
    bsum = 0.0
    for j in range(M):
        if b[j] > 0.0:
            bsum += 0.5 * b[j] * b[j] / k[j]
    D = max(R0 + bsum, 0.0)
    href = 0.0
    for j in range(M):
        if v[j] > 0.0:
            href += v[j] * (abs(b[j]) + np.sqrt(b[j] * b[j] + 2.0 * k[j] * D)) / k[j]
    if not (href > 0.0 and np.isfinite(href)):
        return INVALID, np.inf
    # the grid spans 9 decades below href and 9 below the smallest single-coordinate bound
    # v_j amax_j: with v of very different magnitudes the optimum can sit at a tiny h
    hmin = href
    for j in range(M):
        if v[j] > 0.0:
            hj = v[j] * (abs(b[j]) + np.sqrt(b[j] * b[j] + 2.0 * k[j] * D)) / k[j]
            if hj > 0.0 and hj < hmin:
                hmin = hj
    step = 9.0 * np.log(10.0) / (_GRID - 1)
    lhlo = np.log(hmin) - 9.0 * np.log(10.0)
    ngrid = min(int(np.ceil((np.log(href) - lhlo) / step)) + 1, _GRID_MAX)
    ngrid = max(ngrid, _GRID)
    lhlo = np.log(href) - (ngrid - 1) * step
    Rg = np.empty(ngrid)
    bestR = np.inf
    # SI+ from every new support of the grid (told apart by count, sum and sum of squares of
    # the indices): they lead SI+ into basins too narrow for the grid
    sig0 = -1.0
    sig1 = -1.0
    sig2 = -1.0
    for m in range(ngrid):
        Rg[m] = _inner_fixed_h(b, g, v, k, lam, _grid_h(lhlo, m), a)
        if not np.isfinite(Rg[m]):
            continue
        c0 = 0.0
        c1 = 0.0
        c2 = 0.0
        for j in range(M):
            mask[j] = a[j] > 0.0
            if mask[j]:
                c0 += 1.0
                c1 += j
                c2 += float(j) * j
        if c0 == sig0 and c1 == sig1 and c2 == sig2:
            continue
        sig0 = c0
        sig1 = c1
        sig2 = c2
        st, R = _support_iteration(b, g, v, k, lam, a, mask, qbuf)
        if st == OK and R < bestR:
            bestR = R
            for j in range(M):
                abest[j] = a[j]
    # refine the _REFINE lowest local minima of the grid as evaluated (a refined point is
    # excluded, never changed, so its neighbours on the slope do not become minima)
    chosen = np.full(_REFINE, -1)
    for r in range(_REFINE):
        mbest = np.int64(-1)  # int64, not a literal: _golden_h compiles once
        for m in range(ngrid):
            if not np.isfinite(Rg[m]):
                continue
            if m > 0 and not (Rg[m] < Rg[m - 1]):
                continue
            if m < ngrid - 1 and Rg[m] > Rg[m + 1]:
                continue
            done = False
            for i in range(r):
                if chosen[i] == m:
                    done = True
            if done:
                continue
            if mbest < 0 or Rg[m] < Rg[mbest]:
                mbest = m
        if mbest < 0:
            break
        chosen[r] = mbest
        hloc, Rloc = _golden_h(b, g, v, k, lam, lhlo, mbest, Rg[mbest], a)
        Rloc = _inner_fixed_h(b, g, v, k, lam, hloc, a)
        if not np.isfinite(Rloc):
            continue
        for j in range(M):
            mask[j] = a[j] > 0.0
        # SI+ from the support of the refined point, into abest's slot only if it is better
        Rh = Rloc
        st, R = _support_iteration(b, g, v, k, lam, a, mask, qbuf)
        if st == OK and R <= Rh:
            Rh = R
        else:
            Rh = _inner_fixed_h(b, g, v, k, lam, hloc, a)
        if Rh < bestR:
            bestR = Rh
            for j in range(M):
                abest[j] = a[j]
    if not np.isfinite(bestR):
        return INVALID, np.inf
    for j in range(M):
        a[j] = abest[j]
    return OK_SAFEGUARD, bestR


@internal_njit()
def _golden_h(b, g, v, k, lam, lhlo, mbest, Rbest, a):
    """Golden-section refinement of log h between the neighbours of grid point ``mbest``."""
    lo = np.log(_grid_h(lhlo, mbest - 1))
    hi = np.log(_grid_h(lhlo, mbest + 1))
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
    hbest = _grid_h(lhlo, mbest)
    fbest = Rbest
    if f1 < fbest:
        hbest, fbest = np.exp(x1), f1
    if f2 < fbest:
        hbest, fbest = np.exp(x2), f2
    return hbest, fbest


@internal_njit()
def _limit_at_zero(b, g, v, k, lam):
    """Infimum of R as v.a -> 0: lam min_j g_j / v_j plus the soft-threshold value where
    g = v = 0 (algorithm.md, "Invalid candidates")."""
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


@internal_njit()
def _tiny_v_exponent(g, v):
    """The exponent e >= 0 of the power of two that brings max(v) to [1/2, 1), 0 unless
    max(v) < _V_TINY; capped so that max(g) 2^e < 2^_G_SCALED_MAX.

    R depends on g, v only through g.a / v.a (scale-free), while the quartic's terms are
    ~ max(v)^4 and underflow for v below ~1e-75 (lam / h overflows below ~3e-309).
    """
    vmax = 0.0
    gmax = 0.0
    for j in range(v.shape[0]):
        vmax = v[j] if v[j] > vmax else vmax  # max(): no builtin, one compilation less
        gmax = g[j] if g[j] > gmax else gmax
    if not (vmax > 0.0 and vmax < _V_TINY):
        return 0
    e = -math.frexp(vmax)[1]
    if gmax > 0.0:
        ec = _G_SCALED_MAX - math.frexp(gmax)[1]
        e = ec if ec < e else e
    return e if e > 0 else 0


@internal_njit()
def _scale_gv(g, v, e):
    """g, v *= 2^e in place (exact: the inverse call restores them bit for bit)."""
    for j in range(g.shape[0]):
        g[j] = math.ldexp(g[j], e)
        v[j] = math.ldexp(v[j], e)


@internal_njit()
def solve_ratio(b, g, v, k, lam, a, mask, work, qbuf, safeguard):
    """Minimise R(a) = sum(k a^2/2 - b a) + lam g.a/v.a over a >= 0 (k > 0, g, v >= 0).

    Writes the minimiser to ``a`` and returns ``(status, R)``; ``R = +inf``, ``a = 0`` when
    invalid. Scratch: ``mask`` (bool, M), ``work`` (float64, 2 x M), ``qbuf`` (float64, 8).
    SI+ first; the safeguard and the point of zero ratio term when SI+ fails or with
    ``safeguard=True`` (the best point is kept). A tiny ``v`` is rescaled
    (:func:`_tiny_v_exponent`); ``g`` and ``v`` are restored exactly.
    """
    M = b.shape[0]
    st, R = solve_si(b, g, v, k, lam, a, mask, qbuf)
    if st == OK and not safeguard:
        return st, R
    e = _tiny_v_exponent(g, v)   # solve_si restored g and v bit for bit: the same e
    if e > 0:
        _scale_gv(g, v, e)
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
    # the point of zero ratio term (a corner, optimal when v is tiny there), a cheap check
    az = work[0]
    for j in range(M):
        az[j] = b[j] / k[j] if (g[j] == 0.0 and b[j] > 0.0) else 0.0
    Rz, _, _ = _eval_reduced(b, g, v, k, lam, az)
    if Rz < R:
        for j in range(M):
            a[j] = az[j]
        st, R = OK_SAFEGUARD, Rz
    # the best support of one coordinate, where the ratio is the constant g_j / v_j: missed by
    # SI+ when v_j is tiny beside the other v (its quartic's terms underflow)
    jb, rb = -1, np.inf
    for j in range(M):
        if b[j] > 0.0 and v[j] > 0.0 and lam * (g[j] / v[j]) - 0.5 * b[j] * b[j] / k[j] < rb:
            jb, rb = j, lam * (g[j] / v[j]) - 0.5 * b[j] * b[j] / k[j]
    if rb < R:
        for j in range(M):
            az[j] = b[j] / k[j] if j == jb else 0.0
        Rz, _, _ = _eval_reduced(b, g, v, k, lam, az)
        if Rz < R:
            for j in range(M):
                a[j] = az[j]
            st, R = OK_SAFEGUARD, Rz
    st, R = _checked(b, g, v, k, lam, a, st, R)
    if e > 0:
        _scale_gv(g, v, -e)
    return st, R


@internal_njit()
def _checked(b, g, v, k, lam, a, st, R):
    """INVALID (and ``a = 0``) unless R is below the limit at zero."""
    if st != INVALID and not (R < _limit_at_zero(b, g, v, k, lam)):
        st = INVALID
    if st == INVALID:
        for j in range(b.shape[0]):
            a[j] = 0.0
        return INVALID, np.inf
    return st, R


@internal_njit()
def solve_si(b, g, v, k, lam, a, mask, qbuf):
    """SI+ from the support {b > 0} (the first step of :func:`solve_ratio`, compiled without
    its safeguard): ``(OK, R)`` when SI+ settles below the limit at zero, else
    ``(GENERIC, inf)`` (the caller then needs :func:`solve_ratio`). A tiny ``v`` is rescaled
    (:func:`_tiny_v_exponent`); ``g`` and ``v`` are restored exactly."""
    e = _tiny_v_exponent(g, v)
    if e > 0:
        _scale_gv(g, v, e)
    for j in range(b.shape[0]):
        mask[j] = b[j] > 0.0
    st, R = _support_iteration(b, g, v, k, lam, a, mask, qbuf)
    if st != OK or not (R < _limit_at_zero(b, g, v, k, lam)):
        st, R = GENERIC, np.inf
    if e > 0:
        _scale_gv(g, v, -e)
    return st, R


@internal_njit()
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


@njit(cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
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
    st, R = solve_ratio(b, g, v, k, lam0, a, mask, work, qbuf, safeguard)
    qq = 0.0
    for j in range(M):
        qq += q[j] * q[j]
    y = np.empty(M)
    for j in range(M):
        y[j] = a[j] if q[j] > 0.0 else -a[j]
    if st == INVALID:
        return y, np.inf, st
    return y, 0.5 * qq + R, st


# Reassociation vectorises the sums (no 'nnan'/'ninf': +inf is meaningful here). A loop that
# also stores gets a run-time overlap check and falls back to the plain loop (other bits)
# depending on the heap: every fastmath reduction below only reads arrays.
_FM = {"reassoc", "contract", "nsz", "arcp"}


@internal_njit(fastmath=False)
def _t_at(bj, gj, vj, lh, lr):
    """``t_j = b_j - lh g_j + lh r v_j`` (``lh = lam / h``, ``lr = lh r``); ``a_j = t_j / k_j``
    where ``t_j > 0``.

    The one expression of every pass and :func:`_write_a`, so the returned magnitudes have the
    support the objective was evaluated on. ``fastmath=False`` is explicit: otherwise numba
    gives it the flags of its first compiled caller, and results depended on compile order.
    """
    return bj - lh * gj + lr * vj


@internal_njit(fastmath=_FM)
def _fused_pass(b, g, v, ki, t2, cst, tsup):
    """One branch-free SI+ pass at ``cst = (lh, lh r, 0, 1/2, 1)`` (dtype of the arrays).

    ``tsup``: the previous ``t`` (support ``{tsup > 0}``, 0/1 works), overwritten by this one.
    Returns (changed, Vq, Vg, Vv, Gq, Gg, quad, ga, va, sig, dec): the count of changed
    memberships, the next quartic's sums, quad = sum a(k a/2 - b), g.a, v.a, sig = sum t2 a^2
    and dec = -1/2 sum b^2/k over {a > 0, g = v = 0}, in the dtype of the arrays.
    """
    lh = cst[0]
    lr = cst[1]
    zero = cst[2]
    half = cst[3]
    one = cst[4]
    # stores and an integer count only (see _FM)
    changed = 0
    for j in range(b.shape[0]):
        t = _t_at(b[j], g[j], v[j], lh, lr)
        changed += 0 if (t > zero) == (tsup[j] > zero) else 1
        tsup[j] = t
    # the sums: loads only (see _FM)
    Vq = zero
    Vg = zero
    Vv = zero
    Gq = zero
    Gg = zero
    quad = zero
    ga = zero
    va = zero
    sig = zero
    dec = zero
    for j in range(b.shape[0]):
        bj = b[j]
        gj = g[j]
        vj = v[j]
        kij = ki[j]
        t = tsup[j]
        ins = t > zero
        mi = one if ins else zero
        a = t * kij if ins else zero
        vk = vj * kij * mi
        gk = gj * kij * mi
        Vq += vk * bj
        Vg += vk * gj
        Vv += vk * vj
        Gq += gk * bj
        Gg += gk * gj
        quad += a * (half * t - bj)
        ga += gj * a
        va += vj * a
        sig += t2[j] * a * a
        dec += bj * a if (gj == zero and vj == zero) else zero
    return changed, Vq, Vg, Vv, Gq, Gg, quad, ga, va, sig, -half * dec


# Batched passes: in the dtype of their arrays (float32: twice the lanes); typed ``zero``/``cst``
# so that no float64 literal promotes the loop; the caller widens the sums.

@internal_njit(fastmath=_FM)
def _first_sums2(w, m, g, ki, v0, v1, zero):
    """Support sums on S0 = {b > 0} (``w = max(b, 0)``, ``m = [b > 0]``) of the candidates
    ``(c1, c2)``, ``(c1, c2 + 1)``: (Gq, Gg, Vq0, Vg0, Vv0, Vq1, Vg1, Vv1)."""
    Gq = zero
    Gg = zero
    Vq0 = zero
    Vg0 = zero
    Vv0 = zero
    Vq1 = zero
    Vg1 = zero
    Vv1 = zero
    for j in range(w.shape[0]):
        gj = g[j]
        kij = ki[j]
        wk = w[j] * kij
        mk = m[j] * kij
        mg = mk * gj
        Gq += wk * gj
        Gg += mg * gj
        x = v0[j]
        Vq0 += wk * x
        Vg0 += mg * x
        Vv0 += mk * x * x
        x = v1[j]
        Vq1 += wk * x
        Vg1 += mg * x
        Vv1 += mk * x * x
    return Gq, Gg, Vq0, Vg0, Vv0, Vq1, Vg1, Vv1


@internal_njit(fastmath=_FM)
def _first_sums1(w, m, g, ki, v0, zero):
    """:func:`_first_sums2` for one candidate: (Gq, Gg, Vq, Vg, Vv)."""
    Gq = zero
    Gg = zero
    Vq0 = zero
    Vg0 = zero
    Vv0 = zero
    for j in range(w.shape[0]):
        gj = g[j]
        kij = ki[j]
        wk = w[j] * kij
        mk = m[j] * kij
        mg = mk * gj
        Gq += wk * gj
        Gg += mg * gj
        x = v0[j]
        Vq0 += wk * x
        Vg0 += mg * x
        Vv0 += mk * x * x
    return Gq, Gg, Vq0, Vg0, Vv0


@internal_njit(fastmath=_FM)
def _check_pass2(b, m, g, ki, t2, v0, v1, cst):
    """Second SI+ pass of two candidates from S0 (``m = [b > 0]``) at
    ``cst = (lh0, lh0 r0, lh1, lh1 r1, 0, 1/2, 1)``: per candidate the (float) count of changed
    memberships and the value terms of :func:`_fused_pass` (free = sum b a where g = v = 0),
    final when nothing changed: (ch0, quad0, ga0, va0, sig0, free0, ch1, ..., free1).
    """
    lh0 = cst[0]
    lr0 = cst[1]
    lh1 = cst[2]
    lr1 = cst[3]
    zero = cst[4]
    half = cst[5]
    one = cst[6]
    ch0 = zero
    ch1 = zero
    q0 = zero
    ga0 = zero
    va0 = zero
    s0 = zero
    d0 = zero
    q1 = zero
    ga1 = zero
    va1 = zero
    s1 = zero
    d1 = zero
    for j in range(b.shape[0]):
        bj = b[j]
        gj = g[j]
        kij = ki[j]
        tj = t2[j]
        mo = m[j]
        fb = bj if gj == zero else zero
        x = v0[j]
        t = _t_at(bj, gj, x, lh0, lr0)
        ins = t > zero
        a = t * kij if ins else zero
        dm = (one if ins else zero) - mo
        ch0 += dm * dm
        q0 += a * (half * t - bj)
        ga0 += gj * a
        va0 += x * a
        s0 += tj * a * a
        d0 += fb * a if x == zero else zero
        x = v1[j]
        t = _t_at(bj, gj, x, lh1, lr1)
        ins = t > zero
        a = t * kij if ins else zero
        dm = (one if ins else zero) - mo
        ch1 += dm * dm
        q1 += a * (half * t - bj)
        ga1 += gj * a
        va1 += x * a
        s1 += tj * a * a
        d1 += fb * a if x == zero else zero
    return ch0, q0, ga0, va0, s0, d0, ch1, q1, ga1, va1, s1, d1


@internal_njit(fastmath=_FM)
def _check_pass1(b, m, g, ki, t2, v0, cst):
    """:func:`_check_pass2` for one candidate: (ch, quad, ga, va, sig, free)."""
    lh0 = cst[0]
    lr0 = cst[1]
    zero = cst[4]
    half = cst[5]
    one = cst[6]
    ch0 = zero
    q0 = zero
    ga0 = zero
    va0 = zero
    s0 = zero
    d0 = zero
    for j in range(b.shape[0]):
        bj = b[j]
        gj = g[j]
        kij = ki[j]
        tj = t2[j]
        fb = bj if gj == zero else zero
        x = v0[j]
        t = _t_at(bj, gj, x, lh0, lr0)
        ins = t > zero
        a = t * kij if ins else zero
        dm = (one if ins else zero) - m[j]
        ch0 += dm * dm
        q0 += a * (half * t - bj)
        ga0 += gj * a
        va0 += x * a
        s0 += tj * a * a
        d0 += fb * a if x == zero else zero
    return ch0, q0, ga0, va0, s0, d0


@internal_njit()
def _level(Vq, Vg, Vv, Gq, Gg, lam, qbuf):
    """(ok, h, r) of the quartic on one support's sums; ok False when SI+ cannot continue
    (also for ``Vv < _VV_TINY``: the generic solvers rescale a tiny ``v``)."""
    if Vv < _VV_TINY:
        return False, 0.0, 0.0
    if lam == 0.0:
        h = Vq
        if h <= 0.0:
            return False, 0.0, 0.0
        return True, h, Gq / h
    h = largest_positive_root(-Vq, 0.0, lam * (Vg * Vq - Vv * Gq),
                               lam * lam * (Vv * Gg - Vg * Vg), qbuf)[0]
    if h <= 0.0:
        return False, 0.0, 0.0
    r = (h * h - Vq * h + lam * Vg) / (lam * Vv)
    if not (np.isfinite(r) and np.isfinite(lam / h)):  # under/overflow: the safeguard decides
        return False, 0.0, 0.0
    return True, h, r


@internal_njit()
def _settle(ok, h, r, ch, quad, ga, va, sig, free, lam, b, g, v, ki, t2, m, fmask, fcst,
            qbuf):
    """(status, R, sP, h, r) of a candidate after its check pass: final if its support did
    not change, else SI+ from S0 (scratch ``fmask``, ``fcst = (., ., 0, 1/2, 1)``, dtype of
    ``b``)."""
    if not ok:
        return INVALID, np.inf, np.inf, 0.0, 0.0
    bound = -0.5 * np.float64(free)   # a lower bound of the limit at zero
    if ch != 0:
        # SI+ by fused passes from (h, r) and the support S0 (the magnitudes follow from
        # (h, r), :func:`_write_a`)
        for j in range(b.shape[0]):
            fmask[j] = m[j]
        for _ in range(_MAX_SI):
            lh = lam / h
            fcst[0] = lh
            fcst[1] = lh * r
            (ch, Vq, Vg, Vv, Gq, Gg, quad, ga, va, sig,
             dec) = _fused_pass(b, g, v, ki, t2, fcst, fmask)
            if ch == 0:
                # dec >= limit at zero - lam min(g/v): R < dec proves validity without a pass
                bound = np.float64(dec)
                break
            ok, h, r = _level(np.float64(Vq), np.float64(Vg), np.float64(Vv), np.float64(Gq),
                              np.float64(Gg), lam, qbuf)
            if not ok:
                return INVALID, np.inf, np.inf, 0.0, 0.0
        if ch != 0:
            return INVALID, np.inf, np.inf, 0.0, 0.0
    # the support did not change: INVALID unless v.a > 0 and R < bound
    va = np.float64(va)
    if not va > 0.0:
        return INVALID, np.inf, np.inf, 0.0, 0.0
    ga = np.float64(ga)
    R = np.float64(quad) + lam * ga / va
    if not R < bound:
        return INVALID, np.inf, np.inf, 0.0, 0.0
    return OK, R, ga / va + np.float64(sig), h, r


@internal_njit()
def _write_a(b, g, v, ki, cst, a):
    """``a = max(t, 0) / k`` at ``cst = (lh, lh r, 0)``, as the passes compute it."""
    lh = cst[0]
    lr = cst[1]
    zero = cst[2]
    for j in range(b.shape[0]):
        t = _t_at(b[j], g[j], v[j], lh, lr)
        a[j] = t * ki[j] if t > zero else zero


@internal_njit()
def _gather(q, P, N, out):
    """out_j = P_j where q_j > 0, N_j where q_j < 0, 0 where q_j = 0 (the sign part of q)."""
    for j in range(q.shape[0]):
        qj = q[j]
        out[j] = P[j] if qj > 0.0 else (N[j] if qj < 0.0 else 0.0)


@internal_njit(fastmath=_FM)
def _bound_sum(w, ki, zero):
    """sum_j w_j^2 / k_j: ``-1/2`` of it bounds the reduced objective R from below."""
    acc = zero
    for j in range(w.shape[0]):
        wj = w[j]
        acc += wj * wj * ki[j]
    return acc


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _assign_rows(start, stop, rows, Q, tpos, tneg, tsq, kmat, kimat, npos, nneg, lam0, lam1,
                 adj, rule, safeguard, prune, labels, slabels, Y, F, SP, status, pending,
                 wd, wc, w64, s64, mask, pst, generic=None):
    """Samples ``rows[start:stop]`` of :func:`_assign_kernel`, serial, without the GIL.

    Without ``generic`` a sample with a candidate the fused passes do not settle (rare) is
    flagged in ``pending`` and left unwritten for the ``generic=True`` version (same outputs;
    numba prunes on the type of ``generic``: :func:`solve_ratio` compiled only when needed).
    ``prune`` (rule 1): the bound of docs/algorithm.md, section "Assignment"; smallest bound
    first, then only the candidates that can win; ties go to the first in the usual order.
    Scratch from the caller (:func:`_assign_kernel`: no allocation compiled here).
    """
    M = Q.shape[1]
    Cd = tpos.shape[0]
    Cs = npos.shape[0]
    b, w, m, g, fmask = wd[0], wd[1], wd[2], wd[3], wd[4]
    V = wd[5:]
    cst = wc[:7]
    fcst = wc[7:]
    for j in range(5):
        cst[j] = 0.0
        fcst[j] = 0.0
    a = w64[0]
    work = w64[1:3]
    # float64 inputs of the generic solver (rare path): one compiled solve_ratio for both dtypes
    b64, g64, v64, k64, ywin = w64[3], w64[4], w64[5], w64[6], w64[7]
    qbuf = s64[:8]
    pR = s64[8:10]
    psp = s64[10:12]
    ph = s64[12:14]
    pr = s64[14:16]
    lb = s64[16:]
    cst[5] = 0.5
    cst[6] = 1.0
    fcst[3] = 0.5
    fcst[4] = 1.0
    zero = cst[4]
    prune = prune and rule == 1 and not safeguard
    # rounding margin of the bound test: the batched sums run in the dtype of Q
    rel = 1e-4 if Q.itemsize == 4 else 1e-10
    for r in range(start, stop):
        i = rows[r]
        abandon = False
        q = Q[i]
        best = np.inf
        bc1 = -1
        bc2 = -1
        bfast = False
        blh = 0.0
        br = 0.0
        qq = 0.0
        for j in range(M):
            qj = q[j]
            qq += qj * qj
            bj = abs(qj) - lam1
            b[j] = bj
            inside = bj > 0.0
            w[j] = bj if inside else 0.0
            m[j] = 1.0 if inside else 0.0
        for c2 in range(Cs):
            _gather(q, npos[c2], nneg[c2], V[c2])
        f1 = -1
        f2 = -1
        if prune:
            fb = np.inf
            for c1 in range(Cd):
                lb[c1] = 0.5 * qq - 0.5 * np.float64(_bound_sum(w, kimat[c1], zero))
                for c2 in range(Cs):
                    if lb[c1] + adj[i, c1, c2] < fb:
                        fb = lb[c1] + adj[i, c1, c2]
                        f1 = c1
                        f2 = c2
        # phase 0 (prune only): the candidate of the smallest bound; phase 1: the others
        for pc in range((2 if prune else 1) * Cd):
            phase = pc // Cd
            c1 = pc - phase * Cd
            if prune and phase == 0 and c1 != f1:
                continue
            k = kmat[c1]
            ki = kimat[c1]
            t2 = tsq[c1]
            _gather(q, tpos[c1], tneg[c1], g)
            c2 = 0
            while c2 < Cs:
                if prune:
                    # candidates c2, c2 + 1 of this phase that can still win
                    cut = best + rel * (abs(best) + 0.5 * qq)
                    if phase == 0:
                        need0 = c2 == f2
                        need1 = False
                    else:
                        need0 = not (c1 == f1 and c2 == f2) and lb[c1] + adj[i, c1, c2] <= cut
                        need1 = (c2 + 1 < Cs and not (c1 == f1 and c2 + 1 == f2)
                                 and lb[c1] + adj[i, c1, c2 + 1] <= cut)
                    if not need0:
                        if phase == 1 and not (c1 == f1 and c2 == f2):
                            status[i, c1, c2] = PRUNED
                            F[i, c1, c2] = np.inf
                            SP[i, c1, c2] = np.inf
                        c2 += 1
                        continue
                    npair = 2 if need1 else 1
                else:
                    npair = 1 if (safeguard or c2 + 1 == Cs) else 2
                if safeguard:
                    pst[0] = INVALID
                elif npair == 2:
                    v0 = V[c2]
                    v1 = V[c2 + 1]
                    Gq, Gg, Vq0, Vg0, Vv0, Vq1, Vg1, Vv1 = _first_sums2(w, m, g, ki, v0, v1,
                                                                        zero)
                    ok0, h0, r0 = _level(np.float64(Vq0), np.float64(Vg0),
                                         np.float64(Vv0), np.float64(Gq), np.float64(Gg),
                                         lam0, qbuf)
                    ok1, h1, r1 = _level(np.float64(Vq1), np.float64(Vg1),
                                         np.float64(Vv1), np.float64(Gq), np.float64(Gg),
                                         lam0, qbuf)
                    lh = lam0 / h0 if ok0 else 0.0
                    cst[0] = lh
                    cst[1] = lh * r0
                    lh = lam0 / h1 if ok1 else 0.0
                    cst[2] = lh
                    cst[3] = lh * r1
                    (ch0, qd0, ga0, va0, sg0, fr0, ch1, qd1, ga1, va1, sg1,
                     fr1) = _check_pass2(b, m, g, ki, t2, v0, v1, cst)
                    pst[0], pR[0], psp[0], ph[0], pr[0] = _settle(
                        ok0, h0, r0, ch0, qd0, ga0, va0, sg0, fr0, lam0, b, g, v0, ki, t2,
                        m, fmask, fcst, qbuf)
                    pst[1], pR[1], psp[1], ph[1], pr[1] = _settle(
                        ok1, h1, r1, ch1, qd1, ga1, va1, sg1, fr1, lam0, b, g, v1, ki, t2,
                        m, fmask, fcst, qbuf)
                else:
                    v0 = V[c2]
                    Gq, Gg, Vq0, Vg0, Vv0 = _first_sums1(w, m, g, ki, v0, zero)
                    ok0, h0, r0 = _level(np.float64(Vq0), np.float64(Vg0),
                                         np.float64(Vv0), np.float64(Gq), np.float64(Gg),
                                         lam0, qbuf)
                    lh = lam0 / h0 if ok0 else 0.0
                    cst[0] = lh
                    cst[1] = lh * r0
                    ch0, qd0, ga0, va0, sg0, fr0 = _check_pass1(b, m, g, ki, t2, v0, cst)
                    pst[0], pR[0], psp[0], ph[0], pr[0] = _settle(
                        ok0, h0, r0, ch0, qd0, ga0, va0, sg0, fr0, lam0, b, g, v0, ki, t2,
                        m, fmask, fcst, qbuf)
                for t in range(npair):
                    cc = c2 + t
                    v = V[cc]
                    st = pst[t]
                    R = pR[t]
                    sp = psp[t]
                    fast = st == OK
                    if not fast:
                        if generic is None:   # rare: the sample is left to the generic version
                            pending[i] = True
                            abandon = True
                            break
                        for j in range(M):
                            b64[j] = b[j]
                            g64[j] = g[j]
                            v64[j] = v[j]
                            k64[j] = k[j]
                        st, R = solve_ratio(b64, g64, v64, k64, lam0, a, mask, work, qbuf,
                                            safeguard)
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
                    status[i, c1, cc] = st
                    if st == INVALID:
                        F[i, c1, cc] = np.inf
                        SP[i, c1, cc] = np.inf
                        continue
                    SP[i, c1, cc] = sp
                    Fv = 0.5 * qq + R
                    F[i, c1, cc] = Fv
                    score = sp if rule == 0 else Fv + adj[i, c1, cc]
                    if score < best or (prune and score == best and (
                            c1 < bc1 or (c1 == bc1 and cc < bc2))):
                        best = score
                        bc1 = c1
                        bc2 = cc
                        bfast = fast
                        if fast:
                            blh = lam0 / ph[t]
                            br = pr[t]
                        else:
                            for j in range(M):
                                ywin[j] = a[j]
                if abandon:
                    break
                c2 += npair
            if abandon:
                break
        if abandon:  # left to _assign_rows_generic
            continue
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
            if bfast:
                _gather(q, tpos[bc1], tneg[bc1], g)
                fcst[0] = blh   # the level's constants as the passes had them
                fcst[1] = blh * br
                _write_a(b, g, V[bc2], kimat[bc1], fcst, ywin)
            for j in range(M):
                Y[i, j] = ywin[j] if q[j] > 0.0 else -ywin[j]
        labels[i] = bc1
        slabels[i] = bc2


def _assign_kernel(Q, tpos, tneg, tsq, kmat, kimat, npos, nneg, lam0, lam1, adj, rule,
                   safeguard, labels, slabels, Y, F, SP, status, nthreads, prune=False):
    """All n x Cd x Cs candidates and the argmin assignment (rule 0 "paper", 1 "objective").

    ``8 nthreads`` blocks of samples, taken from a queue by ``nthreads`` Python threads, each
    writing only its rows. ``kmat = 1 + 2 lambda0 tau^2``, ``kimat = 1 / kmat``. S0 is the same
    for every candidate of a sample: the first pass is only the support sums, the second
    (two nus at once) is final when the support does not change (most candidates at the
    paper's lambdas); the rest continue by fused passes, or :func:`solve_ratio`.
    """
    # Python threads instead of a numba prange: the parallel (parfor) build of this kernel
    # cost ~5 s of compilation per dtype on top of the serial body (docs/performance.md)
    pending = np.zeros(Q.shape[0], dtype=np.bool_)
    args = (Q, tpos, tneg, tsq, kmat, kimat, npos, nneg, lam0, lam1, adj, rule, safeguard,
            bool(prune), labels, slabels, Y, F, SP, status, pending)

    rows = np.arange(Q.shape[0], dtype=np.int64)
    M, Cs, Cd = Q.shape[1], npos.shape[0], tpos.shape[0]

    def scratch():   # per call (thread): the dtype of Q, float64 rows and scalars, mask, status
        return (np.empty((5 + Cs, M), dtype=Q.dtype), np.empty(12, dtype=Q.dtype),
                np.empty((8, M)), np.empty(16 + Cd), np.empty(M, dtype=np.bool_),
                np.empty(2, dtype=np.int64))
    if not safeguard:
        # SI+ only; the generic version (safeguard) for the samples it leaves: same results
        run_ranges(lambda start, stop: _assign_rows(start, stop, rows, *args, *scratch()),
                   rows.shape[0], blocks_per_thread=8, nthreads=nthreads)
        rows = np.flatnonzero(pending).astype(np.int64)
    if rows.shape[0]:
        run_ranges(lambda start, stop: _assign_rows(start, stop, rows, *args, *scratch(),
                                                    generic=True),
                   rows.shape[0], blocks_per_thread=8, nthreads=nthreads)


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
        Also run the safeguard (a grid over ``h``, ``docs/algorithm.md``) and keep the better
        point; it runs anyway when SI+ fails. Needed only far from the paper's regime (large
        ``lambda0`` relative to ``|q|``; measured failure rates in ``docs/algorithm.md``).
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

    Parameters
    ----------
    Q : array_like of shape (n, M)
        Linear maps of the samples (rows).
    tau : array_like of shape (Cd, M)
        Dissimilarity parameters.
    nu : array_like of shape (Cs, M)
        Similarity parameters.
    lambda_a : float
        Weight of the term.

    Returns
    -------
    adj : ndarray of shape (n, Cd, Cs), float64

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.kernels import adjustment_term
    >>> Q = np.array([[1.0, 2.0]])
    >>> tau = np.array([[1.0, 2.0], [0.0, 0.0]])
    >>> nu = np.array([[0.0, 1.0]])
    >>> adjustment_term(Q, tau, nu, lambda_a=2.0)[0, :, 0].tolist()   # ||(0, -1)||^2, ||(1, 1)||^2
    [1.0, 2.0]
    """
    Q = np.asarray(Q, dtype=np.float64)
    tau = np.asarray(tau, dtype=np.float64)
    nu = np.asarray(nu, dtype=np.float64)
    qq = np.einsum("ij,ij->i", Q, Q)
    QTN = _matmul(Q, np.concatenate([tau, nu]).T)  # one product, split over the threads
    QT, QN = QTN[:, :tau.shape[0]], QTN[:, tau.shape[0]:]
    TT = np.einsum("ij,ij->i", tau, tau)
    NN = np.einsum("ij,ij->i", nu, nu)
    TN = tau @ nu.T
    d = (qq[:, None, None] - 2.0 * QT[:, :, None] - 2.0 * QN[:, None, :]
         + TT[None, :, None] + NN[None, None, :] + 2.0 * TN[None, :, :])
    np.maximum(d, 0.0, out=d)
    d *= 0.5 * lambda_a
    return d


def assign(Q, tau, nu, lambda0, lambda1, *, rule="objective", lambda_a=1.0, safeguard=False,
           return_details=False, prune=False):
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
        (adjustment terms), ``"status"`` (0, 1, -1 or 2 per candidate) and ``"cost"`` (the full
        cost of the assigned pair per sample, float64; for a sample whose candidates are all
        invalid, the cost of ``y = 0`` without the undefined ratio term:
        ``||q||^2 / 2 + lambda_a/2 ||q - tau - nu||^2``).
    prune : bool, default False
        ``"objective"`` rule only (ignored otherwise, and with ``safeguard``): skip the
        candidates whose lower bound (``docs/algorithm.md``, "Assignment") exceeds the best
        score found: score ``+inf``, status 2. ``labels``, ``Y`` and ``cost`` are those of the
        full evaluation (ties included, up to rounding). The fit uses it.

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
    Samples run in blocks on numba's thread count of Python threads; results do not depend on
    it. ``Q, tau, nu`` are read in the dtype of ``Q`` (float32 or float64; other input becomes
    float64); the quartic and the scores are float64.

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
    Q = as_float_2d(Q, "Q")
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
    with blas_limit(1):  # its product split over the threads: no OpenBLAS threads left spinning
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
                   rule_id, bool(safeguard), labels, slabels, Y, F, SP, status,
                   get_num_threads(), prune=bool(prune))
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


# a full or unwritable numba cache never fails a fit (ntnumba/core/cache.py)
from ..core.cache import guard as _cache_guard  # noqa: E402

_cache_guard(sys.modules[__name__])
