"""Closed-form real roots of cubics and quartics (Ferrari), polished by Newton steps.

The level ``h`` of Stage 1 and of the tau prior of Stage 2 is a root of a quartic without a
quadratic term (``algorithm.md``, "The quartic on a fixed support"). Everything here is
``@njit`` and allocation-free except the Python entry point :func:`solve_quartic`.
"""
import sys
import hashlib
import os

import numpy as np
from numba import njit

_NEWTON_STEPS = 3

# On-disk cache of the kernels (numba ``cache=True``; compiling takes ~30-40 s, loading ~1-2 s).
# Numba invalidates an entry only when the function's own file changes, not a callee's in another
# module (theta -> stage1 -> quartic): the cache directory is stamped with a hash of the three
# modules and numba's version, their entries deleted when it differs. NTNUMBA_CACHE=0, or a
# cache that cannot be used, keeps the kernels in memory (said once by ntnumba.core.cache).
_KERNEL_MODULES = ("quartic", "stage1", "theta")


def _cache_probe():  # pragma: no cover - never called, only decorated
    return 0


def _cache_disabled():
    return os.environ.get("NTNUMBA_CACHE", "1").strip().lower() in ("0", "false", "no", "off")


def _cache_dir():
    """The directory numba caches this package's kernels in, or None (no cache possible)."""
    if _cache_disabled():
        return None
    try:
        return njit(cache=True)(_cache_probe)._cache._cache_path
    except Exception:  # no writable cache location (RuntimeError), or numba internals moved
        return None


def _purge_stale_cache(cache_dir):
    """Delete the cached kernels of _KERNEL_MODULES unless the stamp matches their sources."""
    import numba
    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256(numba.__version__.encode())
    for name in _KERNEL_MODULES:
        with open(os.path.join(here, name + ".py"), "rb") as f:
            h.update(f.read())
    digest = h.hexdigest()
    stamp = os.path.join(cache_dir, "ntnumba_kernels.stamp")
    try:
        with open(stamp) as f:
            if f.read().strip() == digest:
                return True
    except OSError:
        pass
    try:
        os.makedirs(cache_dir, exist_ok=True)
        for fname in os.listdir(cache_dir):
            if fname.split(".", 1)[0] in _KERNEL_MODULES and fname.endswith((".nbi", ".nbc")):
                try:
                    os.remove(os.path.join(cache_dir, fname))
                except OSError:
                    pass
        tmp = f"{stamp}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(digest)
        os.replace(tmp, stamp)
    except OSError:
        return False  # cannot keep the cache consistent: do not use it
    return True


def _init_cache():
    """``cache=`` of the kernels; a cache that cannot be used is said once (ntnumba.core.cache)."""
    import numba

    from ..core.cache import warn_unusable
    if _cache_disabled() or numba.config.DISABLE_JIT:  # nothing is compiled: nothing to cache
        return False
    d = _cache_dir()
    if d is None:
        warn_unusable(None, "numba finds no writable cache location: NUMBA_CACHE_DIR, the "
                            "package's folder and the user's cache folder")
        return False
    try:
        ok = _purge_stale_cache(d)
    except OSError:
        ok = False
    if not ok:
        warn_unusable(d, "its stamp file cannot be written")
    return ok


#: ``cache=`` of every kernel decorator in _quartic, _stage1 and _theta
CACHE = _init_cache()


def internal_njit(**options):
    """``njit`` for kernels called only from compiled code: no CPython or C-callback wrapper
    (Stage 1's first compilation 8.4 s -> 7.4 s for float64); not callable from Python."""
    return njit(cache=CACHE, error_model="numpy", no_cpython_wrapper=True, no_cfunc_wrapper=True,
                **options)


@internal_njit()
def _cbrt(x):
    """``np.cbrt`` in one place: numba compiles its implementation once per call site."""
    return np.cbrt(x)


@internal_njit()
def largest_positive_root(a, b, c, d, out):
    """Real roots of the monic quartic ``x^4 + a x^3 + b x^2 + c x + d`` (Ferrari): returns
    ``(the largest positive root or -1.0, their number)``, the roots ascending in ``out[:4]``.

    ``out``: float64, length >= 8 (``out[4:8]`` scratch). Rescaled, solved through the
    resolvent cubic (Cardano / trigonometric, polished), polished on the original polynomial;
    a root is kept only at rounding-level residual (relative 1e-7), dropping spurious ones.
    One flat function: numba re-optimises every callee in each caller (compile time).
    """
    sig = abs(a)
    t = np.sqrt(abs(b))
    if t > sig:
        sig = t
    t = _cbrt(abs(c))
    if t > sig:
        sig = t
    t = np.sqrt(np.sqrt(abs(d)))
    if t > sig:
        sig = t
    if sig == 0.0:
        for i in range(4):
            out[i] = 0.0
        return -1.0, 4
    # scaled coefficients: x = sig * u
    A = a / sig
    B = b / sig / sig  # successive divisions: sig**4 may under- or overflow
    C = c / sig / sig / sig
    D = d / sig / sig / sig / sig
    # depressed: u = t - A/4 -> t^4 + p t^2 + q t + r
    A4 = 0.25 * A
    A2 = A * A
    p = B - 0.375 * A2
    q = C - 0.5 * A * B + 0.125 * A2 * A
    r = D - 0.25 * A * C + 0.0625 * A2 * B - 0.01171875 * A2 * A2
    # the quadratics t^2 + bq t + cq to solve: biquadratic (q ~ 0), z^2 + p z + r with t^2 = z
    # (roots to out[0:2]); else Ferrari's two factors (roots to out[4:8])
    bi = abs(q) <= 1e-14 * (1.0 + abs(p) + abs(r))
    bq0, cq0, bq1, cq1, nq, o = p, r, 0.0, 0.0, 1, 0
    if not bi:
        # the resolvent cubic m^3 + p m^2 + e1 m + e0 has a positive root: its largest
        e1 = 0.25 * p * p - r
        e0 = -0.125 * q * q
        s = p / 3.0  # depressed: m = z - p/3 -> z^3 + dp z + dq
        dp = e1 - p * s
        dq = 2.0 * s * s * s - s * e1 + e0
        hq = 0.5 * dq
        tp = dp / 3.0
        disc = hq * hq + tp * tp * tp
        if disc > 0.0:
            sd = np.sqrt(disc)
            u = _cbrt(-hq + sd) if -hq + sd >= 0 else -_cbrt(hq - sd)
            w = _cbrt(-hq - sd) if -hq - sd >= 0 else -_cbrt(hq + sd)
            z = u + w
        elif tp < 0.0:
            # three real roots (trigonometric form); the largest one is k = 0
            rr = np.sqrt(-tp)
            arg = -hq / (rr * rr * rr)
            if arg > 1.0:
                arg = 1.0
            elif arg < -1.0:
                arg = -1.0
            z = 2.0 * rr * np.cos(np.arccos(arg) / 3.0)
        else:
            z = _cbrt(-dq) if -dq >= 0 else -_cbrt(dq)
        m = z - s
        fm = ((m + p) * m + e1) * m + e0
        for _ in range(_NEWTON_STEPS):
            dm = (3.0 * m + 2.0 * p) * m + e1
            if dm == 0.0:
                break
            m2 = m - fm / dm
            f2 = ((m2 + p) * m2 + e1) * m2 + e0
            if abs(f2) < abs(fm):
                m = m2
                fm = f2
            else:
                break
        if m <= 0.0:
            m = 1e-300
        s = np.sqrt(2.0 * m)
        half = 0.5 * p + m
        qs = q / (2.0 * s)
        bq0, cq0, bq1, cq1, nq, o = -s, half + qs, s, half - qs, 2, 4
    n = 0
    for k in range(nq):
        bq = bq0 if k == 0 else bq1
        cq = cq0 if k == 0 else cq1
        disc = bq * bq - 4.0 * cq
        scale = bq * bq + 4.0 * abs(cq)
        if disc < 0.0:
            if disc < -1e-10 * scale:
                continue
            disc = 0.0  # above -1e-10 relative: a double root (every root is verified below)
        sd = np.sqrt(disc)
        # stable form: avoid cancellation between -bq and sd
        if bq >= 0.0:
            t1 = -0.5 * (bq + sd)
        else:
            t1 = -0.5 * (bq - sd)
        out[o + n] = t1
        out[o + n + 1] = cq / t1 if t1 != 0.0 else -bq - t1
        n += 2
    if bi:
        nz = n
        n = 0
        for i in range(nz):
            z = out[i]
            if z > 0.0:
                sz = np.sqrt(z)
                out[4 + n] = sz
                out[5 + n] = -sz
                n += 2
            elif z > -1e-10 * (1.0 + abs(p)):
                out[4 + n] = 0.0
                n += 1
    # back to x, polish by Newton steps on the original polynomial, verify
    cnt = 0
    for i in range(n):
        x = (out[4 + i] - A4) * sig
        fx = (((x + a) * x + b) * x + c) * x + d
        for _ in range(_NEWTON_STEPS):
            der = ((4.0 * x + 3.0 * a) * x + 2.0 * b) * x + c
            if der == 0.0:
                break
            x2 = x - fx / der
            f2 = (((x2 + a) * x2 + b) * x2 + c) * x2 + d
            if abs(f2) < abs(fx):
                x = x2
                fx = f2
            else:
                break
        ax = abs(x)
        if abs(fx) <= 1e-7 * ((((ax + abs(a)) * ax + abs(b)) * ax + abs(c)) * ax + abs(d)):
            out[cnt] = x
            cnt += 1
    # insertion sort (at most 4 entries)
    for i in range(1, cnt):
        v = out[i]
        j = i - 1
        while j >= 0 and out[j] > v:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = v
    best = -1.0
    for i in range(cnt):
        if out[i] > 0.0 and out[i] > best:
            best = out[i]
    return best, cnt


@njit(cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _roots(c, out):  # the Python entry of largest_positive_root (compiled only when used)
    return largest_positive_root(c[1], c[2], c[3], c[4], out)[1]


def solve_quartic(coeffs):
    """Real roots of a quartic polynomial, in closed form (Ferrari) with Newton polishing.

    Parameters
    ----------
    coeffs : array_like of shape (5,)
        Coefficients ``[a4, a3, a2, a1, a0]`` of ``a4 x^4 + a3 x^3 + a2 x^2 + a1 x + a0``,
        highest degree first (the order of :func:`numpy.roots`). ``a4`` must be non-zero.

    Returns
    -------
    roots : ndarray of float64
        The distinct-as-computed real roots in ascending order (0 to 4 values). A double root
        may appear once or twice.

    Notes
    -----
    The solver of the Stage-1 kernel (``algorithm.md``, Stage 1): rescaled, solved through
    the resolvent cubic, polished by up to three Newton steps; roots whose residual is not at
    rounding level are dropped.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.kernels import solve_quartic
    >>> np.round(solve_quartic([1.0, -10.0, 35.0, -50.0, 24.0]), 12)  # (x-1)(x-2)(x-3)(x-4)
    array([1., 2., 3., 4.])
    """
    c = np.asarray(coeffs, dtype=np.float64).ravel()
    if c.shape != (5,):
        raise ValueError(f"coeffs: expected 5 coefficients, got shape {np.shape(coeffs)}")
    if not np.all(np.isfinite(c)):
        raise ValueError("coeffs: coefficients must be finite")
    if c[0] == 0.0:
        raise ValueError("coeffs: the leading coefficient a4 must be non-zero")
    c = c / c[0]
    out = np.empty(8)
    cnt = _roots(c, out)
    return out[:cnt].copy()


# a full or unwritable numba cache never fails a fit (ntnumba/core/cache.py)
from ..core.cache import guard as _cache_guard  # noqa: E402

_cache_guard(sys.modules[__name__])
