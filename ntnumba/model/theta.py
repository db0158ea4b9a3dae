"""Stage 2: the update of theta = (tau, nu) given Q, Y and the assignments.

Names follow ``algorithm.md`` ("Stage 2"). Samples are rows: ``Q`` (n, M), ``Y`` (n, M),
``tau`` (Cd, M), ``nu`` (Cs, M), ``labels = j1`` in [0, Cd), ``similarity_labels = j2`` in
[0, Cs). ``rho(y, z) = sum_j max(y_j z_j, 0)`` and ``sigma(y, z) = ||y * z||^2``. The stage
objective is :func:`theta_objective`; the per-cluster subproblems ``T_c1`` and ``N_c2``, the
conventions for zero denominators (shared with ``tests/naive_theta.py``), the Jacobi order and
what is guaranteed to decrease: docs/algorithm.md, section "Stage 2: conventions and guarantees".

Precision: Q and Y are read in their own dtype (float32 or float64); tau, nu, every sum and every
objective value are float64; the returned tau and nu have the dtype of Q.
"""
import sys
import numpy as np
from numba import get_num_threads, njit

from ..core.parallel import run_blocks, run_ranges
from .quartic import CACHE, internal_njit
from .stage1 import GENERIC, INVALID, as_float_2d, solve_ratio, solve_si
from ..core.validation import as_float_array, check_scalar

# fastmath of the reductions over coordinates; a loop with such a sum only reads arrays, see
# ntnumba.model.stage1._FM (per-sample sums do not depend on the thread count)
_FMR = {"reassoc", "contract", "nsz", "arcp"}

_BS = 256             # column block of the grouped-sum kernels
_NEWTON = 100         # iteration cap of the cubic of the nu step (converges in < 10)
_BACKTRACK = 30       # halvings of the nu step before giving up on a step

# tau_choice codes in ``info``
TAU_KEPT = -2         # the old tau was not improved on (kept)
TAU_DATA = -1         # the minimiser of the data terms alone won
TAU_RESEEDED = -3     # empty cluster, re-seeded
TAU_NO_PRIOR = -4     # the minimiser of the data terms where the prior is absent won
TAU_PENDING = -5      # internal: left by _tau_kernel to its generic version (never returned)
# a value p >= 0 is the prior pair (c1', c2') = divmod(p, Cs) whose quartic candidate won


@internal_njit(fastmath=_FMR)
def _rho_sigma(y, z):
    """(rho(y, z), sigma(y, z)) in float64."""
    r = 0.0
    s = 0.0
    for j in range(y.shape[0]):
        p = y[j] * z[j]
        r += 0.0 if p < 0.0 else p  # max(p, 0.0) (no builtin max: one compilation less)
        s += p * p
    return r, s


@njit(fastmath=_FMR, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _rho(y, z):
    r = 0.0
    for j in range(y.shape[0]):
        p = y[j] * z[j]
        r += 0.0 if p < 0.0 else p
    return r


@njit(cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _prior_eval(y, tau, nu, skip_tau, skip_nu):
    """``(f_c, c1, c2)``: f_c(y, theta without (skip_tau, skip_nu)) and its active pair;
    ``(0.0, -1, -1)`` when no pair has a positive denominator (the term is absent)."""
    rmax = 0.0
    c2b = -1
    for c2 in range(nu.shape[0]):
        if c2 == skip_nu:
            continue
        r = _rho(y, nu[c2])
        if r > rmax:
            rmax = r
            c2b = c2
    if c2b < 0:
        return 0.0, -1, -1
    best = np.inf
    c1b = -1
    for c1 in range(tau.shape[0]):
        if c1 == skip_tau:
            continue
        rt, sg = _rho_sigma(y, tau[c1])
        val = rt / rmax + sg
        if val < best:
            best = val
            c1b = c1
    if c1b < 0:
        return 0.0, -1, -1
    return best, c1b, c2b


@njit(cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _prior_terms(tau, nu, out):
    """out[p] = f_c of parameter p: taus first (p < Cd), then nus (serial, O((Cd + Cs)^2 M))."""
    Cd = tau.shape[0]
    Cs = nu.shape[0]
    none = np.int64(-1)  # int64, not a literal: one compiled _prior_eval for every caller
    for p in range(Cd + Cs):
        if p < Cd:
            val, c1, c2 = _prior_eval(tau[p], tau, nu, p, none)
        else:
            val, c1, c2 = _prior_eval(nu[p - Cd], tau, nu, none, p - Cd)
        out[p] = val


@njit(nogil=True, fastmath=_FMR, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _sample_terms(start, stop, Q, Y, tau, nu, labels, slabels, out):
    """Per sample ``i`` in ``start:stop``: ||q - tau_j1 - nu_j2||^2, rho(y, tau_j1),
    rho(y, nu_j2), sigma(y, tau_j1)."""
    M = Q.shape[1]
    for i in range(start, stop):
        c1 = labels[i]
        c2 = slabels[i]
        d2 = 0.0
        rt = 0.0
        rn = 0.0
        sg = 0.0
        for j in range(M):
            t = tau[c1, j]
            v = nu[c2, j]
            d = Q[i, j] - t - v
            d2 += d * d
            yj = Y[i, j]
            p = yj * t
            if p > 0.0:
                rt += p
            sg += p * p
            p = yj * v
            if p > 0.0:
                rn += p
        out[i, 0] = d2
        out[i, 1] = rt
        out[i, 2] = rn
        out[i, 3] = sg


@njit(nogil=True, fastmath=_FMR, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _group_sums(start, stop, Q, Y, w, order, offsets, sq, qq, bp, bm, yy):
    """Per group g (rows order[offsets[g]:offsets[g+1]]): sums of q, ||q||^2, w y+, w y-, y^2,
    for the (group, column block) tasks ``start:stop``; ``qq[g, block]``: the block's part."""
    M = Q.shape[1]
    nb = (M + _BS - 1) // _BS
    for t in range(start, stop):
        g = t // nb
        j0 = (t % nb) * _BS
        j1 = j0 + _BS if j0 + _BS < M else M
        L = j1 - j0
        s_q = sq[g, j0:j1]  # the sums in place: no allocation compiled here
        s_p = bp[g, j0:j1]
        s_m = bm[g, j0:j1]
        s_y = yy[g, j0:j1]
        for jj in range(L):
            s_q[jj] = 0.0
            s_p[jj] = 0.0
            s_m[jj] = 0.0
            s_y[jj] = 0.0
        s_qq = 0.0
        for r in range(offsets[g], offsets[g + 1]):
            i = order[r]
            wi = w[i]
            for jj in range(L):
                qv = np.float64(Q[i, j0 + jj])
                yv = np.float64(Y[i, j0 + jj])
                s_q[jj] += qv
                s_y[jj] += yv * yv
                if yv > 0.0:
                    s_p[jj] += wi * yv
                else:
                    s_m[jj] -= wi * yv
            for jj in range(L):  # loads only (see _FMR)
                qv = np.float64(Q[i, j0 + jj])
                s_qq += qv * qv
        qq[g, t % nb] = s_qq


# Row kernels of the nu steps: serial without the GIL (``_s``) or in blocks on Python threads,
# chosen by size, never by thread count (same results). Small calls stay serial: waking a thread
# on a busy core costs more than the work (Stage 2 at COIL size: 0.07 s serial, 0.23 s on two).
_SERIAL_MAX = 1 << 22  # rows x M up to which the row kernels run serially


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _rho_rows_s(Y, rows, Z, zidx, out):
    """out[r] = rho(Y[rows[r]], Z[zidx[r]])."""
    for r in range(rows.shape[0]):
        out[r] = _rho(Y[rows[r]], Z[zidx[r]])


@njit(nogil=True, fastmath=_FMR, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _rho_rows2_s(Y, rows, z1, z2, out1, out2):
    """out1[r] = rho(Y[rows[r]], z1), out2[r] = rho(Y[rows[r]], z2): one read of each row."""
    for r in range(rows.shape[0]):
        i = rows[r]
        s1 = 0.0
        s2 = 0.0
        for j in range(Y.shape[1]):
            yv = np.float64(Y[i, j])
            p1 = yv * z1[j]
            p2 = yv * z2[j]
            s1 += 0.0 if p1 < 0.0 else p1
            s2 += 0.0 if p2 < 0.0 else p2
        out1[r] = s1
        out2[r] = s2


@njit(nogil=True, fastmath=_FMR, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _colsum_blocks(Y, rows, w, pos, neg, t0, t1):
    """Column blocks ``t0:t1`` of :func:`_weighted_signed_colsum`."""
    M = Y.shape[1]
    for t in range(t0, t1):
        j0 = t * _BS
        j1 = j0 + _BS if j0 + _BS < M else M
        L = j1 - j0
        s_p = pos[j0:j1]  # the sums in place: no allocation compiled here
        s_m = neg[j0:j1]
        for jj in range(L):
            s_p[jj] = 0.0
            s_m[jj] = 0.0
        for r in range(rows.shape[0]):
            wr = w[r]
            if wr == 0.0:
                continue
            i = rows[r]
            for jj in range(L):
                yv = np.float64(Y[i, j0 + jj])
                if yv > 0.0:
                    s_p[jj] += wr * yv
                else:
                    s_m[jj] -= wr * yv


def _weighted_signed_colsum_s(Y, rows, w, pos, neg):
    """pos = sum_r w_r Y[rows[r]]+, neg = sum_r w_r Y[rows[r]]- (column blocks in order)."""
    _colsum_blocks(Y, rows, w, pos, neg, 0, (Y.shape[1] + _BS - 1) // _BS)


def _rho_rows(Y, rows, Z, zidx, out):
    """:func:`_rho_rows_s` on blocks of rows, on the threads."""
    run_ranges(lambda a, b: _rho_rows_s(Y, rows[a:b], Z, zidx[a:b], out[a:b]), rows.shape[0])


def _rho_rows2(Y, rows, z1, z2, out1, out2):
    """:func:`_rho_rows2_s` on blocks of rows, on the threads."""
    run_ranges(lambda a, b: _rho_rows2_s(Y, rows[a:b], z1, z2, out1[a:b], out2[a:b]),
               rows.shape[0])


def _weighted_signed_colsum(Y, rows, w, pos, neg):
    """:func:`_weighted_signed_colsum_s` with the column blocks shared out over the threads."""
    run_ranges(lambda a, b: _colsum_blocks(Y, rows, w, pos, neg, a, b),
               (Y.shape[1] + _BS - 1) // _BS, blocks_per_thread=1)


def rows_kernels(n_rows, M):
    """(_rho_rows, _rho_rows2, _weighted_signed_colsum), serial for n_rows x M <= _SERIAL_MAX."""
    if n_rows * M <= _SERIAL_MAX:
        return _rho_rows_s, _rho_rows2_s, _weighted_signed_colsum_s
    return _rho_rows, _rho_rows2, _weighted_signed_colsum


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _tau_kernel(start, stop, P, BP, BM, KD, tau, nu, lam_e, active, safeguard, out, Told, Tnew,
                choice, todo, ws, mask, qbuf, generic=None):
    """tau_c for ``c`` in ``start:stop`` with ``todo[c]``; iteration c writes only row/entry c.

    Candidates (docs/algorithm.md, "tau: the prior through the same quartic"): the data terms'
    exact minimiser, for lam_e > 0 the region without prior and the best prior pair's quartic
    solution on the branch s = sign(P), and the old tau; the smallest T_c wins. A cluster
    without members keeps its tau. Without ``generic`` a cluster that needs the safeguard is
    left (``choice[c] = TAU_PENDING``) for the ``generic=True`` version (same outputs; numba
    prunes on the type of ``generic``). Serial, one function on Python threads: a ``prange``
    re-optimised ``solve_ratio`` (+3.3 s of JIT), and so does every extra compiled caller.
    Scratch from the caller (:func:`_tau_scratch`: no allocation compiled here).
    """
    Cd, M = P.shape
    Cs = nu.shape[0]
    s, b, kk, g, v, a, cand = ws[0], ws[1], ws[2], ws[3], ws[4], ws[5], ws[6]
    work = ws[7:9]
    for c in range(start, stop):
        if not todo[c]:
            continue
        abandon = False
        if not active[c]:
            for j in range(M):
                out[c, j] = tau[c, j]
            Told[c] = np.nan
            Tnew[c] = np.nan
            choice[c] = TAU_RESEEDED
            continue
        # data terms alone: per coordinate, branch + has b+ = P - B+, branch - has b- = -P - B-
        for j in range(M):
            bpj = P[c, j] - BP[c, j]
            bmj = -P[c, j] - BM[c, j]
            if bmj > bpj and bmj > 0.0:
                cand[j] = -bmj / KD[c, j]
            elif bpj > 0.0:
                cand[j] = bpj / KD[c, j]
            else:
                cand[j] = 0.0
            if P[c, j] >= 0.0:
                s[j] = 1.0
                b[j] = P[c, j] - BP[c, j]
            else:
                s[j] = -1.0
                b[j] = -P[c, j] - BM[c, j]
        best = np.inf
        ch = TAU_KEPT
        # step -1: T_c of the old tau; then the candidates in cand
        for step in range(-1, 3):
            code = TAU_DATA
            if step > 0 and not (lam_e > 0.0 and Cd > 1):
                break
            if step == 1:
                # the region where the prior is absent: rho(tau, nu_c2) = 0 for every nu, i.e.
                # tau supported on {j: s_j nu_c2j <= 0 for all c2} (data terms only, closed form)
                code = TAU_NO_PRIOR
                for j in range(M):
                    free = b[j] > 0.0
                    for c2 in range(Cs):
                        if s[j] * nu[c2, j] > 0.0:
                            free = False
                    cand[j] = s[j] * b[j] / KD[c, j] if free else 0.0
            elif step == 2:
                # the best prior pair's quartic solution on the branch s = sign(P)
                bestR = np.inf
                code = -1
                for c1p in range(Cd):
                    if c1p == c:
                        continue
                    for j in range(M):
                        tp = tau[c1p, j]
                        kk[j] = KD[c, j] + 2.0 * lam_e * tp * tp
                        x = s[j] * tp
                        g[j] = 0.0 if x < 0.0 else x
                    for c2 in range(Cs):
                        for j in range(M):
                            x = s[j] * nu[c2, j]
                            v[j] = 0.0 if x < 0.0 else x
                        if generic is None:
                            st, R = solve_si(b, g, v, kk, lam_e, a, mask, qbuf)
                            if st == GENERIC:
                                abandon = True
                                break
                        else:
                            st, R = solve_ratio(b, g, v, kk, lam_e, a, mask, work, qbuf,
                                                 safeguard)
                        if st != INVALID and R < bestR:
                            bestR = R
                            code = c1p * Cs + c2
                            for j in range(M):
                                cand[j] = s[j] * a[j]
                    if abandon:
                        break
                if abandon or code < 0:
                    break
            # T_c(t) without its constant: sum_j (-P t + KD t^2/2 + BP t+ + BM t-) + lam_e f_c(t)
            t = tau[c] if step < 0 else cand
            val = 0.0
            for j in range(M):
                tj = t[j]
                val += tj * (0.5 * KD[c, j] * tj - P[c, j])
                if tj > 0.0:
                    val += BP[c, j] * tj
                elif tj < 0.0:
                    val -= BM[c, j] * tj
            if lam_e > 0.0:
                pr, pc1, pc2 = _prior_eval(t, tau, nu, c, np.int64(-1))  # int64: see _prior_terms
                val += lam_e * pr
            if step < 0:
                best = val
                Told[c] = best
                for j in range(M):
                    out[c, j] = tau[c, j]
            elif val < best:
                best = val
                ch = code
                for j in range(M):
                    out[c, j] = cand[j]
        if abandon:  # left to the generic version
            choice[c] = TAU_PENDING
            continue
        Tnew[c] = best
        choice[c] = ch


@njit(cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _cubic_root(k, b, K):
    """Unique positive root of k x^3 - b x^2 - K (k, K > 0): argmin of k x^2/2 - b x + K/x
    (Newton from an upper bound, where the cubic is increasing and convex: monotone)."""
    x = (0.0 if b < 0.0 else b) / k + (K / k) ** (1.0 / 3.0)
    for _ in range(_NEWTON):
        f = x * x * (k * x - b) - K
        d = x * (3.0 * k * x - 2.0 * b)
        if d <= 0.0:
            break
        xn = x - f / d
        if not xn < x:   # monotone from the right: stop when no further decrease
            break
        if xn <= 0.0:
            xn = 0.5 * x
        x = xn
    return x


@njit(cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _nu_candidates(z, Gp, Gm, bp, bm, k, outA, outB):
    """The two candidates of one nu step: ``outA`` majorise-minimise (Jensen, K_j / x on the
    current branch), ``outB`` the ratio terms linearised (both branches free). ``bp``/``bm``:
    linear coefficients on nu_j = +x / -x, ``Gp``/``Gm``: sum_i alpha_i |y_ij| / rho_i^2."""
    for j in range(z.shape[0]):
        zj = z[j]
        kj = k[j]
        K = 0.0
        if zj > 0.0:
            K = zj * zj * Gp[j]
        elif zj < 0.0:
            K = zj * zj * Gm[j]
        if K > 0.0:
            if zj > 0.0:
                outA[j] = _cubic_root(kj, bp[j], K)
            else:
                outA[j] = -_cubic_root(kj, bm[j], K)
        else:
            if bm[j] > bp[j] and bm[j] > 0.0:
                outA[j] = -bm[j] / kj
            elif bp[j] > 0.0:
                outA[j] = bp[j] / kj
            else:
                outA[j] = 0.0
        lp = bp[j] + Gp[j]
        lm = bm[j] + Gm[j]
        if lm > lp and lm > 0.0:
            outB[j] = -lm / kj
        elif lp > 0.0:
            outB[j] = lp / kj
        else:
            outB[j] = 0.0


@njit(nogil=True, fastmath=_FMR, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _data_rows(start, stop, Q, Y, out):
    """Per row ``i`` in ``start:stop``: sum (q - y)^2 and sum |y| (float64)."""
    M = Q.shape[1]
    for i in range(start, stop):
        d2 = 0.0
        l1 = 0.0
        for j in range(M):
            yv = np.float64(Y[i, j])
            d = np.float64(Q[i, j]) - yv
            d2 += d * d
            l1 += abs(yv)
        out[i, 0] = d2
        out[i, 1] = l1


def data_terms(Q, Y):
    """``(||Q - Y||_F^2, ||Y||_1)`` in float64 without an n x M temporary (Q, Y: (n, M)).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.theta import data_terms
    >>> data_terms(np.array([[1.0, 2.0]]), np.array([[0.0, -1.0]]))
    (10.0, 1.0)
    """
    Q = np.ascontiguousarray(Q)
    Y = np.ascontiguousarray(Y)
    if Q.shape != Y.shape or Q.ndim != 2:
        raise ValueError(f"Q and Y: expected two 2-D arrays of the same shape, got {Q.shape} "
                         f"and {Y.shape}")
    out = np.empty((Q.shape[0], 2))
    run_ranges(lambda start, stop: _data_rows(start, stop, Q, Y, out), Q.shape[0])
    s = out.sum(axis=0)
    return float(s[0]), float(s[1])


def _check_labels(labels, name, n, C, what):
    arr = np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array, got shape {arr.shape}")
    if arr.shape[0] != n:
        raise ValueError(f"{name}: expected length {n} (the rows of Q), got {arr.shape[0]}")
    if not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name}: expected an integer array, got dtype {arr.dtype}")
    if n and (arr.min() < 0 or arr.max() >= C):
        raise ValueError(f"{name}: values must be in [0, {C}) (the number of {what}), "
                         f"got values in [{arr.min()}, {arr.max()}]")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _check_params(tau, nu, M=None):
    tau = as_float_array(tau, "tau", ndim=2, dtype=np.float64)
    nu = as_float_array(nu, "nu", ndim=2, dtype=np.float64)
    if M is None:
        M = tau.shape[1]
        if nu.shape[1] != M:
            raise ValueError(f"nu: expected {M} columns (the columns of tau), "
                             f"got shape {nu.shape}")
    for name, arr in (("tau", tau), ("nu", nu)):
        if arr.shape[1] != M:
            raise ValueError(f"{name}: expected {M} columns (the columns of Q), "
                             f"got shape {arr.shape}")
    return tau, nu


def _prepare(Q, Y, labels, similarity_labels, tau, nu):
    Q = as_float_2d(Q, "Q")
    n, M = Q.shape
    Y = as_float_2d(Y, "Y", dtype=Q.dtype)
    if Y.shape != Q.shape:
        raise ValueError(f"Y: expected shape {Q.shape} (the shape of Q), got {Y.shape}")
    tau, nu = _check_params(tau, nu, M)
    labels = _check_labels(labels, "labels", n, tau.shape[0], "rows of tau")
    slabels = _check_labels(similarity_labels, "similarity_labels", n, nu.shape[0],
                            "rows of nu")
    return Q, Y, labels, slabels, tau, nu


def _objective_from_terms(terms, tau, nu, lambda0, lambda_a, lambda_e):
    d2, rt, rn, sg = terms[:, 0], terms[:, 1], terms[:, 2], terms[:, 3]
    ratio = np.divide(rt, rn, out=np.zeros_like(rt), where=rn > 0)
    val = 0.5 * lambda_a * np.sum(d2) + lambda0 * (np.sum(ratio) + np.sum(sg))
    if lambda_e != 0.0:
        val += lambda_e * _prior_up64(tau, nu)
    return float(val)


def _prior_up64(tau, nu):
    out = np.empty(tau.shape[0] + nu.shape[0])
    _prior_terms(tau, nu, out)
    return float(np.sum(out))


def _sample_terms_of(Q, Y, tau, nu, labels, slabels):
    terms = np.empty((Q.shape[0], 4))
    run_ranges(lambda start, stop: _sample_terms(start, stop, Q, Y, tau, nu, labels, slabels,
                                                 terms), Q.shape[0])
    return terms


def prior_up(tau, nu):
    """The prior ``u_p(theta)`` of the dissimilarity and similarity parameters.

    ``u_p = sum_c1 f_c(tau_c1, theta without tau_c1) + sum_c2 f_c(nu_c2, theta without nu_c2)``
    with ``f_c(y, theta') = min_c1' [rho(y, tau_c1') / max_c2' rho(y, nu_c2') + sigma(y,
    tau_c1')]`` over the parameters of ``theta'`` (``algorithm.md``).

    Parameters
    ----------
    tau, nu : array_like of shape (Cd, M) and (Cs, M)
        Dissimilarity and similarity parameters.

    Returns
    -------
    float
        ``u_p`` (float64 arithmetic).

    Notes
    -----
    Zero denominators: a pair ``(tau_c1', nu_c2')`` with ``rho(y, nu_c2') = 0`` is skipped
    (equivalently the denominator is the maximum over the other nus). A term with no pair left
    is 0 (absent): a tau when Cd = 1 (no other tau), a nu when Cs = 1 (no other nu), or a
    parameter whose support meets no other nu with matching signs.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.theta import prior_up
    >>> tau = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> nu = np.array([[1.0, 1.0]])
    >>> prior_up(tau, nu)   # each tau: ratio 0 (disjoint), sigma 0; the nu has no other nu
    0.0
    >>> prior_up(np.array([[1.0, 1.0], [1.0, 2.0]]), np.array([[1.0, 1.0], [2.0, 0.0]]))
    20.5
    """
    tau, nu = _check_params(tau, nu)
    return _prior_up64(tau, nu)


def theta_objective(Q, Y, labels, similarity_labels, tau, nu, *, lambda0=0.03, lambda_a=1.0,
                    lambda_e=0.001):
    """The Stage-2 objective: everything of the learning problem that depends on theta.

    The sum::

        sum_i [ lambda_a/2 ||q_i - tau_j1(i) - nu_j2(i)||^2
                + lambda0 ( rho(y_i, tau_j1(i)) / rho(y_i, nu_j2(i)) + sigma(y_i, tau_j1(i)) ) ]
        + lambda_e u_p(theta)

    Parameters
    ----------
    Q, Y : array_like of shape (n, M)
        Linear maps ``X @ A.T`` and NT representations (Stage 1) of the samples (rows).
    labels, similarity_labels : array_like of int, shape (n,)
        The assignments ``j1`` in ``[0, Cd)`` and ``j2`` in ``[0, Cs)``.
    tau, nu : array_like of shape (Cd, M) and (Cs, M)
        Dissimilarity and similarity parameters.
    lambda0, lambda_a, lambda_e : float
        Weights of the min-max score, of the adjustment term and of the prior (>= 0).

    Returns
    -------
    float
        The objective, accumulated in float64.

    Notes
    -----
    A sample with ``rho(y_i, nu_j2(i)) = 0`` (e.g. ``y_i = 0``, a sample whose Stage-1
    candidates were all invalid) contributes no ratio term. See :func:`prior_up` for the
    conventions of the prior.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.theta import theta_objective
    >>> Q = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> Y = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> tau = np.array([[1.0, 1.0]]); nu = np.array([[1.0, 0.0]])
    >>> theta_objective(Q, Y, [0, 0], [0, 0], tau, nu, lambda0=1.0, lambda_a=2.0,
    ...                 lambda_e=0.0)   # (0 + 1 + 1) + (2 + no ratio + 1)
    5.0
    """
    Q, Y, labels, slabels, tau, nu = _prepare(Q, Y, labels, similarity_labels, tau, nu)
    lambda0 = check_scalar(lambda0, "lambda0", low=0.0)
    lambda_a = check_scalar(lambda_a, "lambda_a", low=0.0)
    lambda_e = check_scalar(lambda_e, "lambda_e", low=0.0)
    terms = _sample_terms_of(Q, Y, tau, nu, labels, slabels)
    return _objective_from_terms(terms, tau, nu, lambda0, lambda_a, lambda_e)


def _groups(labels, slabels, Cd, Cs):
    gid = labels * Cs + slabels
    order = np.argsort(gid, kind="stable").astype(np.int64)
    offsets = np.zeros(Cd * Cs + 1, dtype=np.int64)
    np.cumsum(np.bincount(gid, minlength=Cd * Cs), out=offsets[1:])
    return order, offsets


def stage2_sums(Q, Y, labels, slabels, tau, nu, lambda0):
    n, M = Q.shape
    Cd, Cs = tau.shape[0], nu.shape[0]
    rn = np.empty(n)
    rows_kernels(n, Y.shape[1])[0](Y, np.arange(n), nu, slabels, rn)
    w = np.divide(lambda0, rn, out=np.zeros(n), where=rn > 0)
    order, offsets = _groups(labels, slabels, Cd, Cs)
    G = Cd * Cs
    nb = (M + _BS - 1) // _BS
    sq = np.empty((G, M))
    qq = np.empty((G, nb))
    bp = np.empty((G, M))
    bm = np.empty((G, M))
    yy = np.empty((G, M))
    run_ranges(lambda start, stop: _group_sums(start, stop, Q, Y, w, order, offsets, sq, qq, bp,
                                               bm, yy), G * nb)
    return {
        "count": np.diff(offsets).reshape(Cd, Cs),
        "sum_q": sq.reshape(Cd, Cs, M),
        "sum_qq": qq.sum(axis=1).reshape(Cd, Cs),
        "sum_wy_pos": bp.reshape(Cd, Cs, M).sum(axis=1),
        "sum_wy_neg": bm.reshape(Cd, Cs, M).sum(axis=1),
        "sum_yy": yy.reshape(Cd, Cs, M).sum(axis=1),
    }


def theta_statistics(Q, Y, labels, similarity_labels, tau, nu, lambda0=0.03):
    """The per-cluster sums over samples that the tau update needs (the streaming seam).

    Every entry is a sum over samples, so statistics of disjoint batches of samples (with the
    same theta) add up to the statistics of their union.

    Parameters
    ----------
    Q, Y : array_like of shape (n, M)
        Linear maps and NT representations of the samples (rows).
    labels, similarity_labels : array_like of int, shape (n,)
        The assignments ``j1`` in ``[0, Cd)`` and ``j2`` in ``[0, Cs)``.
    tau, nu : array_like of shape (Cd, M) and (Cs, M)
        Dissimilarity parameters (only their number Cd is used) and similarity parameters
        (the weights ``w_i`` below use them).
    lambda0 : float, default 0.03
        Weight of the min-max score.

    Returns
    -------
    dict
        ``"count"`` (Cd, Cs) int: samples per pair ``(j1, j2)``;
        ``"sum_q"`` (Cd, Cs, M): sum of ``q_i`` per pair;
        ``"sum_qq"`` (Cd, Cs): sum of ``||q_i||^2`` per pair;
        ``"sum_wy_pos"``, ``"sum_wy_neg"`` (Cd, M): sum over ``j1(i) = c1`` of ``w_i y_i+`` and
        ``w_i y_i-`` with ``w_i = lambda0 / rho(y_i, nu_j2(i))`` (0 when the denominator is 0);
        ``"sum_yy"`` (Cd, M): sum over ``j1(i) = c1`` of ``y_i**2``. All float64.

    Notes
    -----
    The tau update needs nothing else (``P`` and ``k`` of ``docs/algorithm.md``, "tau:
    per-coordinate closed form"). The nu update does not reduce to fixed sums: its ratio term
    ``sum_i alpha_i / rho(y_i, nu)`` has one denominator per sample, so every nu step needs a
    pass over that nu's samples (its quadratic part comes from ``count``, ``sum_q``, ``sum_qq``).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.theta import theta_statistics
    >>> rng = np.random.default_rng(0)
    >>> Q, Y = rng.standard_normal((2, 6, 4))
    >>> tau, nu = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    >>> lab, sim = np.array([0, 0, 1, 2, 2, 2]), np.array([0, 1, 1, 0, 0, 1])
    >>> st = theta_statistics(Q, Y, lab, sim, tau, nu)
    >>> st["count"].tolist()
    [[1, 1], [0, 1], [2, 1]]
    >>> part = [theta_statistics(Q[s], Y[s], lab[s], sim[s], tau, nu) for s in (slice(0, 3),
    ...                                                                          slice(3, 6))]
    >>> bool(np.allclose(part[0]["sum_q"] + part[1]["sum_q"], st["sum_q"]))
    True
    """
    Q, Y, labels, slabels, tau, nu = _prepare(Q, Y, labels, similarity_labels, tau, nu)
    lambda0 = check_scalar(lambda0, "lambda0", low=0.0)
    return stage2_sums(Q, Y, labels, slabels, tau, nu, lambda0)


def _reseed_order(cost, d2):
    key = d2 if cost is None else cost
    return np.argsort(-key, kind="stable")


def _next_unused(order, used):
    for i in order:
        if int(i) not in used:
            used.add(int(i))
            return int(i)
    # more empty clusters than samples: reuse from the top
    return int(order[len(used) % len(order)])


def _tau_scratch(M):
    """Scratch of one :func:`_tau_kernel` call: 9 rows of M, the mask, the quartic's buffer."""
    return np.empty((9, M)), np.empty(M, dtype=np.bool_), np.empty(8)


def _update_taus(stats, tau, nu, lambda0, lambda_a, lambda_e, safeguard=False):
    """The tau block from the statistics. Returns (tau_new, Told, Tnew, choice, const)."""
    N = stats["count"]
    nc = N.sum(axis=1)
    P = lambda_a * (stats["sum_q"].sum(axis=1) - N.astype(np.float64) @ nu)
    KD = lambda_a * nc[:, None] + 2.0 * lambda0 * stats["sum_yy"]
    # constant of T_c: lambda_a/2 sum_i ||q_i - nu_j2(i)||^2
    nn = np.einsum("ij,ij->i", nu, nu)
    const = 0.5 * lambda_a * (stats["sum_qq"].sum(axis=1)
                              - 2.0 * np.einsum("abm,bm->a", stats["sum_q"], nu) + N @ nn)
    Cd, M = tau.shape
    out = np.empty_like(tau)
    Told = np.empty(Cd)
    Tnew = np.empty(Cd)
    choice = np.empty(Cd, dtype=np.int64)
    todo = np.ones(Cd, dtype=np.bool_)
    args = (P, stats["sum_wy_pos"], stats["sum_wy_neg"], KD, tau, nu, lambda_e, nc > 0,
            bool(safeguard), out, Told, Tnew, choice, todo)
    if not safeguard:
        # SI+ only; the generic version (safeguard) for the clusters it leaves: same results
        run_blocks(lambda start, stop: _tau_kernel(start, stop, *args, *_tau_scratch(M)),
                   list(range(Cd + 1)), get_num_threads())
        todo[:] = choice == TAU_PENDING
    if todo.any():
        run_blocks(lambda start, stop: _tau_kernel(start, stop, *args, *_tau_scratch(M),
                                                   generic=True),
                   list(range(Cd + 1)), get_num_threads())
    return out, Told + const, Tnew + const, choice


class MemberRows:
    """The nu step's passes over the members ``rows`` of one nu, ``Y`` in memory: ``rho``,
    ``rho2`` (two vectors, one pass), ``colsum`` (the majoriser's weighted signed sums)."""

    def __init__(self, Y, rows):
        self.Y, self.rows = Y, rows
        self._k = rows_kernels(rows.shape[0], Y.shape[1])

    def rho(self, Z, zidx, out):
        self._k[0](self.Y, self.rows, Z, zidx, out)

    def rho2(self, z1, z2, out1, out2):
        self._k[1](self.Y, self.rows, z1, z2, out1, out2)

    def colsum(self, w, pos, neg):
        self._k[2](self.Y, self.rows, w, pos, neg)


class _NuProblem:
    """N_c2(z) without its constant, for the members of one nu (see module docs); ``members``
    gives the passes over their ``y_i`` (:class:`MemberRows` or the driver's row blocks)."""

    def __init__(self, members, alpha, Pn, m, tau, nu, c2, lambda_a, lambda_e):
        self.members, self.alpha, self.Pn = members, alpha, Pn
        self.n_rows = alpha.shape[0]
        self.kq = lambda_a * m
        self.tau, self.nu, self.c2, self.lambda_e = tau, nu, c2, lambda_e
        self.zidx = np.zeros(self.n_rows, dtype=np.int64)
        self.keep_positive = None   # set by start(), or from nu_c2 on the first value()

    def start(self, z):
        """value(z) at the starting point; fixes the members whose denominator must stay > 0."""
        rr = np.empty(self.n_rows)
        self.members.rho(z[None, :], self.zidx, rr)
        self.keep_positive = (self.alpha > 0) & (rr > 0)
        return self._value_from(z, rr)

    def value(self, z):
        """(value, rho of the members, active prior pair); +inf where a member with alpha_i > 0
        and a positive denominator at the start would get rho = 0 (no reward for "no ratio")."""
        rr = np.empty(self.n_rows)
        self.members.rho(z[None, :], self.zidx, rr)
        return self._value_from(z, rr)

    def value2(self, z1, z2):
        """(value(z1), value(z2)) with one pass over the members' rows."""
        rr1 = np.empty(self.n_rows)
        rr2 = np.empty(self.n_rows)
        self.members.rho2(z1, z2, rr1, rr2)
        return self._value_from(z1, rr1), self._value_from(z2, rr2)

    def _value_from(self, z, rr):
        if self.keep_positive is None:
            rr0 = np.empty(self.n_rows)
            self.members.rho(self.nu[self.c2:self.c2 + 1], self.zidx, rr0)
            self.keep_positive = (self.alpha > 0) & (rr0 > 0)
        if np.any(self.keep_positive & (rr <= 0)):
            return np.inf, rr, (-1, -1)
        ratio = float(np.sum(np.divide(self.alpha, rr, out=np.zeros_like(rr), where=rr > 0)))
        val = float(z @ (0.5 * self.kq * z - self.Pn)) + ratio
        pair = (-1, -1)
        if self.lambda_e > 0.0:
            pr, c1, c2 = _prior_eval(z, self.tau, self.nu, -1, self.c2)
            val += self.lambda_e * pr
            pair = (c1, c2)
        return val, rr, pair

    def candidates(self, z, rr, pair):
        """The MM candidate A and the linearised candidate B at z (see _nu_candidates)."""
        M = z.shape[0]
        wk = np.divide(self.alpha, rr * rr, out=np.zeros_like(rr), where=rr > 0)
        Gp = np.empty(M)
        Gm = np.empty(M)
        self.members.colsum(wk, Gp, Gm)
        k = np.full(M, self.kq)
        bp = self.Pn.copy()
        bm = -self.Pn
        c1, c2 = pair
        if c1 >= 0 and c2 >= 0:
            le = self.lambda_e
            tp = self.tau[c1]
            vp = self.nu[c2]
            Nr = _rho(z, tp)
            D = _rho(z, vp)
            # one-sided derivatives of rho(z, tp)/rho(z, vp) in x = |z_j| on each branch
            Lp = (np.maximum(tp, 0) * D - Nr * np.maximum(vp, 0)) / (D * D)
            Lm = (np.maximum(-tp, 0) * D - Nr * np.maximum(-vp, 0)) / (D * D)
            k += 2.0 * le * tp * tp
            bp -= le * Lp
            bm -= le * Lm
        A = np.empty(M)
        B = np.empty(M)
        _nu_candidates(z, Gp, Gm, bp, bm, k, A, B)
        return A, B


def _nu_steps(prob, z, n_steps):
    """n_steps of the nu update, never increasing prob.value: (z, v0, v, accepted)."""
    v0, rr, pair = prob.start(z)
    val = v0
    accepted = 0
    for _ in range(n_steps):
        tol = 1e-12 * (abs(val) + 0.5 * prob.kq * float(z @ z) + 1.0)
        A, B = prob.candidates(z, rr, pair)
        (vA, rrA, pA), (vB, rrB, pB) = prob.value2(A, B)
        best = (vB, B, rrB, pB) if vB < vA else (vA, A, rrA, pA)
        if not best[0] < val:
            if best[0] - val <= tol:   # converged: the candidates differ by rounding only
                break
            best = None
            t = 0.5
            for _ in range(_BACKTRACK):
                zt = z + t * (A - z)
                vt, rrt, pt = prob.value(zt)
                if vt < val:
                    best = (vt, zt, rrt, pt)
                    break
                t *= 0.5
            if best is None:
                break
        decrease = val - best[0]
        val, z, rr, pair = best
        accepted += 1
        if decrease <= tol:
            break
    return z, v0, val, accepted


def needs_reseed(stats):
    """True when a tau or a nu has no member in ``stats`` (it is then re-seeded)."""
    counts = stats["count"]
    return bool(np.any(counts.sum(axis=1) == 0) or np.any(counts.sum(axis=0) == 0))


class RowsInMemory:
    """The row passes of :func:`solve_theta` with ``Q`` and ``Y`` in memory."""

    def __init__(self, Q, Y):
        self.Q, self.Y = Q, Y

    def alpha(self, tau, labels):
        """``rho(y_i, tau_j1(i))`` of every sample."""
        out = np.empty(self.Y.shape[0])
        rows_kernels(*self.Y.shape)[0](self.Y, np.arange(self.Y.shape[0]), tau, labels, out)
        return out

    def members(self, rows):
        return MemberRows(self.Y, rows)

    def q_row(self, i):
        return self.Q[i]


def solve_theta(stats, rows, labels, slabels, tau, nu, *, lambda0, lambda_a, lambda_e,
                reseed_key=None, n_nu_steps=5, safeguard=False, values=False):
    """Stage 2 from its statistics (every fit's solver): tau block, re-seeding, nu steps.

    ``stats``: :func:`theta_statistics` (one pass or running sums); ``rows``: the passes the nu
    steps need (``alpha``, ``members``, ``q_row``: :class:`RowsInMemory` or the driver's row
    blocks) over the samples labelled ``labels``, ``slabels``. With running counts ``m`` above
    a nu's members in the pass (``partial_fit``) their ``alpha_i`` are scaled by ``m / members``.
    Returns float64 ``(tau_new, nu_new, details)``; the method: :func:`update_theta`.
    """
    counts = stats["count"]
    Cs = nu.shape[0]
    order = None
    if needs_reseed(stats):
        order = _reseed_order(reseed_key, None) if reseed_key is not None else \
            np.arange(labels.shape[0])
    used = set()
    # ---- taus given the old nus (Jacobi: each sees the old other taus)
    tau_new, Told, Tnew, choice = _update_taus(stats, tau, nu, lambda0, lambda_a, lambda_e,
                                               safeguard)
    reseeded = [int(c) for c in np.flatnonzero(counts.sum(axis=1) == 0)]
    for c in reseeded:
        i = _next_unused(order, used)
        tau_new[c] = rows.q_row(i) - nu[slabels[i]]
    # ---- nus given the new taus (Jacobi: each sees the old other nus)
    N = counts.astype(np.float64)
    m = N.sum(axis=0)
    Pn = lambda_a * (stats["sum_q"].sum(axis=0) - N.T @ tau_new)
    alpha = rows.alpha(tau_new, labels)
    alpha *= lambda0
    nu_new = nu.copy()
    nu_obj = np.full((Cs, 2), np.nan)
    nu_steps = np.zeros(Cs, dtype=np.int64)
    reseeded_nu = []
    if values:
        tt = np.einsum("ij,ij->i", tau_new, tau_new)
        const_nu = 0.5 * lambda_a * (stats["sum_qq"].sum(axis=0)
                                     - 2.0 * np.einsum("abm,am->b", stats["sum_q"], tau_new)
                                     + N.T @ tt)
    for c2 in range(Cs):
        members = np.flatnonzero(slabels == c2).astype(np.int64)
        if m[c2] == 0:
            reseeded_nu.append(c2)
            i = _next_unused(order, used)
            nu_new[c2] = rows.q_row(i) - tau_new[labels[i]]
            continue
        if members.size == 0 or (n_nu_steps == 0 and not values):
            continue
        a = alpha[members]
        if m[c2] != members.size:
            a = a * (m[c2] / members.size)
        prob = _NuProblem(rows.members(members), a, Pn[c2], m[c2], tau_new, nu, c2, lambda_a,
                          lambda_e)
        z, v0, v1, acc = _nu_steps(prob, nu[c2].copy(), n_nu_steps)
        nu_new[c2] = z
        if values:
            nu_obj[c2] = (v0 + const_nu[c2], v1 + const_nu[c2])
        nu_steps[c2] = acc
    return tau_new, nu_new, {"reseeded": reseeded, "reseeded_nu": reseeded_nu,
                             "tau_objective": np.column_stack([Told, Tnew]),
                             "nu_objective": nu_obj, "tau_choice": choice,
                             "nu_steps": nu_steps}


def update_theta(Q, Y, labels, similarity_labels, tau, nu, *, lambda0=0.03, lambda_a=1.0,
                 lambda_e=0.001, cost=None, n_nu_steps=5, safeguard=False, return_info=False):
    """Stage 2: update the dissimilarity (tau) and similarity (nu) parameters.

    The assignments are kept (the paper reuses Stage 1's; nothing is re-assigned). Order: every
    tau given the old nus, then every nu given the new taus (the paper's order; Jacobi inside
    each block, docs/algorithm.md, "Stage 2: conventions and guarantees").

    Parameters
    ----------
    Q, Y : array_like of shape (n, M)
        Linear maps ``X @ A.T`` (float32 or float64) and NT representations from Stage 1 (read
        in the dtype of Q) of the samples (rows).
    labels, similarity_labels : array_like of int, shape (n,)
        The assignments ``j1`` in ``[0, Cd)`` (the cluster) and ``j2`` in ``[0, Cs)``.
    tau, nu : array_like of shape (Cd, M) and (Cs, M)
        Current dissimilarity and similarity parameters.
    lambda0 : float, default 0.03
        Weight of the min-max score (>= 0).
    lambda_a : float, default 1.0
        Weight of the adjustment term (> 0: it makes every subproblem strongly convex in the
        data terms).
    lambda_e : float, default 0.001
        Weight of the prior ``u_p`` (>= 0).
    cost : array_like of shape (n,), optional
        Per-sample cost (e.g. ``details["cost"]`` of :func:`ntnumba.kernels.assign`). Empty
        clusters are re-seeded from the samples with the largest cost; without it, from the
        samples farthest from their own ``tau_j1 + nu_j2``.
    n_nu_steps : int, default 5
        Steps of the nu update (>= 0; 0 keeps the nus, except re-seeding).
    safeguard : bool, default False
        Run the safeguard of the ratio solver (:func:`ntnumba.kernels.candidate_nt`) for every
        prior pair of the tau update: SI+ alone is exact in the paper's regime but can stop at a
        local solution with a strong prior. About 10^4 M operations per pair: small problems.
    return_info : bool, default False
        Also return a dict of diagnostics (see Returns).

    Returns
    -------
    tau_new : ndarray of shape (Cd, M)
        In the dtype of Q.
    nu_new : ndarray of shape (Cs, M)
        In the dtype of Q.
    info : dict, only with ``return_info=True``
        ``"objective_before"``, ``"objective_after"``: :func:`theta_objective` at the old and
        the returned parameters; ``"reseeded"``: list of the re-seeded (empty) taus;
        ``"reseeded_nu"``: list of the re-seeded (empty) nus; ``"tau_objective"`` (Cd, 2) and
        ``"nu_objective"`` (Cs, 2): each subproblem's value before and after (NaN for re-seeded
        parameters); ``"tau_choice"`` (Cd,) int: -2 kept the old tau, -1 the minimiser of the
        data terms, -3 re-seeded, ``p >= 0`` the quartic solution of the prior pair
        ``(c1', c2') = divmod(p, Cs)``; ``"nu_steps"`` (Cs,) int: accepted nu steps.

    Notes
    -----
    tau: the exact minimiser per cluster and coordinate (both sign branches), with the prior
    through the Stage-1 quartic; nu: majorise-minimise steps (Jensen's bound on ``1/rho``,
    the root of ``k x^3 - b x^2 - K``) with a linearised alternative and step halving; empty
    parameters are re-seeded from the sample of largest ``cost`` (labels unchanged). Every tau
    and nu subproblem value is non-increasing; with ``lambda_e = 0`` so is
    :func:`theta_objective`. The derivations: ``docs/algorithm.md``, "Stage 2".

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.theta import update_theta
    >>> rng = np.random.default_rng(0)
    >>> centers = 3.0 * rng.standard_normal((3, 30))
    >>> labels = np.repeat([0, 1], 10)          # cluster 2 is empty
    >>> sim = np.zeros(20, dtype=int)
    >>> Q = centers[labels] + 0.3 * rng.standard_normal((20, 30))
    >>> Y = np.sign(Q) * np.maximum(np.abs(Q) - 0.03, 0)
    >>> tau, nu = rng.standard_normal((3, 30)), rng.standard_normal((1, 30))
    >>> tau2, nu2, info = update_theta(Q, Y, labels, sim, tau, nu, return_info=True)
    >>> info["reseeded"]
    [2]
    >>> bool(info["objective_after"] < info["objective_before"])
    True
    """
    Q, Y, labels, slabels, tau, nu = _prepare(Q, Y, labels, similarity_labels, tau, nu)
    n = Q.shape[0]
    lambda0 = check_scalar(lambda0, "lambda0", low=0.0)
    lambda_a = check_scalar(lambda_a, "lambda_a", low=0.0, low_inclusive=False)
    lambda_e = check_scalar(lambda_e, "lambda_e", low=0.0)
    n_nu_steps = check_scalar(n_nu_steps, "n_nu_steps", low=0, integer=True)
    if cost is not None:
        cost = as_float_array(cost, "cost", ndim=1, dtype=np.float64)
        if cost.shape[0] != n:
            raise ValueError(f"cost: expected length {n} (the rows of Q), got {cost.shape[0]}")

    stats = stage2_sums(Q, Y, labels, slabels, tau, nu, lambda0)
    obj_before = d2 = None
    if return_info or (cost is None and needs_reseed(stats)):
        terms = _sample_terms_of(Q, Y, tau, nu, labels, slabels)
        obj_before = _objective_from_terms(terms, tau, nu, lambda0, lambda_a, lambda_e)
        d2 = terms[:, 0]
    tau_new, nu_new, det = solve_theta(
        stats, RowsInMemory(Q, Y), labels, slabels, tau, nu, lambda0=lambda0,
        lambda_a=lambda_a, lambda_e=lambda_e, reseed_key=cost if cost is not None else d2,
        n_nu_steps=n_nu_steps, safeguard=safeguard, values=return_info)
    tau_out = tau_new.astype(Q.dtype, copy=False)
    nu_out = nu_new.astype(Q.dtype, copy=False)
    if not return_info:
        return tau_out, nu_out
    t64, n64 = tau_out.astype(np.float64), nu_out.astype(np.float64)
    terms_after = _sample_terms_of(Q, Y, t64, n64, labels, slabels)
    info = {
        "objective_before": obj_before,
        "objective_after": _objective_from_terms(terms_after, t64, n64, lambda0, lambda_a,
                                                 lambda_e),
        "reseeded": det["reseeded"],
        "reseeded_nu": det["reseeded_nu"],
        "tau_objective": det["tau_objective"],
        "nu_objective": det["nu_objective"],
        "tau_choice": det["tau_choice"],
        "nu_steps": det["nu_steps"],
    }
    return tau_out, nu_out, info


# a full or unwritable numba cache never fails a fit (ntnumba/core/cache.py)
from ..core.cache import guard as _cache_guard  # noqa: E402

_cache_guard(sys.modules[__name__])
