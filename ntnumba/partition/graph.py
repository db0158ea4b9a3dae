"""Graph assignment: spectral clustering of the samples' angular similarity.

The ``assign="graph"`` rule of :class:`~ntnumba.NTClustering` applies the paper's Stage-1
similarity ``rho`` between the samples themselves. For random unit rows of ``A`` the normalised
``rho`` of ``y = A x`` tends to the arc-cosine kernel of the angle between the samples
(:func:`arccos_kernel`), so the graph is built in the samples' own ``N`` dimensions.

Pipeline on the rows ``X`` (scaled, :mod:`ntnumba.partition.select` applied): the ``r`` leading
principal directions shared by all clusters are projected out (:func:`shared_directions`); the
similarity ``S_ij = k(angle)^2`` gives a symmetrised k-NN graph with mutual-rank weights
(:func:`mutual_rank_graph`); the ``C`` leading eigenvectors of ``D^-1/2 W D^-1/2`` are
partitioned by column-pivoted QR (:func:`cluster_qr`); ``r`` is the candidate with the smallest
relaxed normalised cut (ties within ``TIE`` to the larger (C+1)-th Laplacian eigenvalue), at
most a quarter of the rank of the centred data. No n x n matrix is formed.

Derivation, the choices and their measurements, limits and cost: docs/algorithm.md, "Graph
assignment"; docs/research/graph-edge-similarity.md, docs/research/graph-edge-weights.md.
"""
import functools
import os
import sys
import time
import warnings
from contextlib import contextmanager

import numpy as np
from numba import get_num_threads, njit, set_num_threads
from scipy import sparse
from scipy.linalg import eigh, qr
from scipy.sparse.linalg import LinearOperator, eigsh, splu

from ..core import parallel
from ..core.linalg import svd
from ..core.parallel import run_blocks, run_ranges
from ..model.quartic import CACHE

#: candidate numbers of shared principal directions tried by default
DEFAULT_SHARED = (0, 1, 2, 4, 8, 16)
#: cuts closer than this are ties, broken by the larger (C+1)-th Laplacian eigenvalue
TIE = 1e-6
#: exact k-NN search up to this many samples, approximate (pynndescent) above (``knn="auto"``)
EXACT_MAX = 20000
#: similarity products per block of the exact search (float32 elements, per thread)
_BLOCK_ELEMENTS = 1 << 22

#: warn about cost above this many neighbour-list entries covering over a quarter of the samples
DENSE_ENTRIES = 10 ** 6
_ROWS = 512  # rows per block of the n x N updates (remove_shared)


def _blas_policy():
    """The fit's BLAS thread policy (``ntnumba.core.parallel.blas_context``) around a graph step."""
    return parallel.blas_context()


class Progress:
    """``verbose`` messages of the graph steps (stderr, with the time since the start)."""

    def __init__(self, verbose, stream=None):
        self.verbose = int(verbose or 0)
        self.stream = sys.stderr if stream is None else stream
        self.t0 = time.perf_counter()

    def __call__(self, msg):
        if self.verbose:
            print(f"graph: {msg}  [{time.perf_counter() - self.t0:.1f}s]", file=self.stream,
                  flush=True)


def available_memory():
    """Bytes of memory available to this process (MemAvailable; None if unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(nbytes, what):
    """Raise MemoryError when ``nbytes`` exceed the available memory, warn above half of it."""
    from ..core.validation import MemoryUsageWarning, user_stacklevel

    avail = available_memory()
    if avail is None:
        return
    if nbytes > avail:
        raise MemoryError(
            f"{what} needs about {nbytes / 2**30:.1f} GiB but {avail / 2**30:.1f} GiB are "
            "available: use fewer samples (fit a random subset and predict the rest), "
            "fewer n_components, or chunk_size")
    if nbytes > 0.5 * avail:
        warnings.warn(f"{what} needs about {nbytes / 2**30:.1f} GiB of the "
                      f"{avail / 2**30:.1f} GiB available", MemoryUsageWarning,
                      stacklevel=user_stacklevel())


def _gram(Q, mean=None):
    """``(Q - mean)^T (Q - mean)`` (float64); blocks fixed by the shape: same bits on any
    thread count."""
    n, m = Q.shape
    nb = int(min(16, max(1, n // 256)))
    bounds = [(i * n) // nb for i in range(nb + 1)]
    parts = [None] * nb

    def block(start, stop):
        b = bounds.index(start)
        Qb = np.asarray(Q[start:stop], dtype=np.float64)
        if mean is not None:
            Qb = Qb - mean
        parts[b] = Qb.T @ Qb

    run_blocks(block, bounds, get_num_threads())
    G = parts[0]
    for P in parts[1:]:
        G += P
    return 0.5 * (G + G.T)


def shared_directions(X, r, *, return_sv=False):
    """Mean and the ``r`` leading principal directions of the rows of ``X``.

    ``mean`` (N,), ``V`` (r, N) with orthonormal rows (empty for ``r = 0``), from the N x N
    scatter or, when ``n < N``, the n x n Gram matrix. ``return_sv``: also the ``r`` singular
    values of the centred matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import shared_directions
    >>> X = np.random.default_rng(0).standard_normal((100, 5)) * [9.0, 1.0, 1.0, 1.0, 1.0]
    >>> mean, V = shared_directions(X, 1)
    >>> np.round(np.abs(V), 1)
    array([[1., 0., 0., 0., 0.]])
    """
    X = np.asarray(X)
    if not np.issubdtype(X.dtype, np.floating):
        X = X.astype(np.float64)
    n, m = X.shape
    mean = X.mean(axis=0, dtype=np.float64)
    r = int(min(r, max(min(n, m) - 1, 0)))
    if r <= 0:
        return (mean, np.zeros((0, m))) + ((np.zeros(0),) if return_sv else ())
    with _blas_policy():
        if n < m:  # fewer samples than features: the n x n side
            return _shared_small(X, mean, r, return_sv)
        w, U = _eig_top(_gram(X, mean), r)
    sv = np.sqrt(np.maximum(w, 0.0))
    out = (mean, np.ascontiguousarray(U.T))
    return out + (sv,) if return_sv else out


def _eig_top(G, r):
    """The ``r`` largest eigenpairs of the symmetric ``G``, descending."""
    m = G.shape[0]
    if m <= 600 or 4 * r >= m:
        w, U = eigh(G, subset_by_index=[m - r, m - 1])
    else:  # Lanczos: r << m leading eigenpairs without the O(m^3) reduction
        v0 = np.random.RandomState(0).uniform(-1.0, 1.0, m)
        w, U = eigsh(G, k=r, which="LA", v0=v0, tol=1e-12)
    order = np.argsort(w)[::-1]
    return w[order], U[:, order]


def _shared_small(X, mean, r, return_sv):
    """:func:`shared_directions` through the n x n Gram matrix (``n < N``)."""
    Xc = np.asarray(X, dtype=np.float64) - mean
    K = Xc @ Xc.T
    w, U = _eig_top(0.5 * (K + K.T), r)
    sv = np.sqrt(np.maximum(w, 0.0))
    V = (U.T @ Xc) / np.where(sv > 0, sv, 1.0)[:, None]
    # orthonormal rows also where the spectrum is degenerate or zero
    V = np.linalg.qr(V.T)[0].T if V.shape[0] else V
    out = (mean, np.ascontiguousarray(V))
    return out + (sv,) if return_sv else out


def principal_coordinates(X, d):
    """The centred rows of ``X`` on their ``d`` leading principal directions.

    Returns ``(Z, mean, P)``: ``Z = (X - mean) P^T`` (n, d), ``mean`` (N,), ``P`` (d, N) with
    orthonormal rows (:func:`shared_directions`).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import principal_coordinates
    >>> X = np.random.default_rng(0).standard_normal((100, 5)) * [9.0, 3.0, 1.0, 1.0, 1.0]
    >>> Z, mean, P = principal_coordinates(X, 2)
    >>> Z.shape, np.round(np.abs(P), 1).tolist()
    ((100, 2), [[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0, 0.0]])
    """
    mean, P = shared_directions(X, d)
    Z = np.asarray(X, dtype=np.float64) - mean
    with _blas_policy():
        Z = Z @ P.T
    return np.ascontiguousarray(Z), mean, P


def remove_shared(X, mean, V, *, return_coef=False):
    """``(X - mean)`` with its components along the rows of ``V`` removed (float64, one n x N
    array); ``return_coef``: also the n x r coefficients ``(X - mean) V^T`` subtracted."""
    mean = np.asarray(mean, dtype=np.float64)
    Xc = np.asarray(X).astype(np.float64) - mean
    coef = np.zeros((Xc.shape[0], V.shape[0])) if return_coef else None
    if V.shape[0]:
        with _blas_policy():
            for start in range(0, Xc.shape[0], _ROWS):
                P = Xc[start:start + _ROWS] @ V.T
                Xc[start:start + _ROWS] -= P @ V
                if return_coef:
                    coef[start:start + _ROWS] = P
    return (Xc, coef) if return_coef else Xc


def graph_rows(X, mean, V, offset=None, weights=None):
    """The rows the graph compares: weighted, centred, shared directions removed (float64).

    ``weights`` (N,): feature weights applied first; ``offset``: a constant coordinate appended
    to every row (shape (n, N + 1) then); both from :mod:`ntnumba.partition.select`.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import graph_rows
    >>> graph_rows(np.array([[1.0, 2.0], [3.0, 2.0]]), np.array([2.0, 2.0]), np.zeros((0, 2)),
    ...            offset=5.0).tolist()
    [[-1.0, 0.0, 5.0], [1.0, 0.0, 5.0]]
    """
    X = np.asarray(X)
    if weights is not None:
        X = np.asarray(X, dtype=np.float64) * weights
    R = remove_shared(X, mean, V)
    return R if offset is None else _with_offset(R, offset)


def _with_offset(R, offset):
    """``R`` with the constant column ``offset`` appended (:func:`graph_rows`)."""
    return np.hstack([R, np.full((R.shape[0], 1), float(offset))])


def arccos_kernel(c):
    """``k(t) = (sin t + (pi - t) cos t) / pi`` of the angle ``t = arccos(c)`` (elementwise).

    The limit of the normalised NT similarity of ``A x`` and ``A x'`` for many random unit rows
    of ``A``: 1 for equal directions, 1/pi for orthogonal ones, 0 for opposite ones.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import arccos_kernel
    >>> np.round(arccos_kernel(np.array([1.0, 0.0, -1.0])), 4).tolist()
    [1.0, 0.3183, 0.0]
    """
    c = np.clip(np.asarray(c, dtype=np.float64), -1.0, 1.0)
    t = np.arccos(c)
    return (np.sin(t) + (np.pi - t) * c) / np.pi


def unit_rows(Y, dtype=np.float32):
    """The rows of ``Y`` divided by their norms (zero rows stay zero)."""
    Y = np.asarray(Y)
    norm = np.sqrt(np.einsum("ij,ij->i", Y, Y, dtype=np.float64))
    inv = np.where(norm > 0, 1.0 / np.where(norm > 0, norm, 1.0), 0.0)
    Z = np.empty(Y.shape, dtype=dtype)
    for start in range(0, Y.shape[0], _ROWS):
        np.multiply(Y[start:start + _ROWS], inv[start:start + _ROWS, None],
                    out=Z[start:start + _ROWS], casting="unsafe")
    return Z


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _topk_rows(S, row0, exclude, idx, val):
    """The ``k = idx.shape[1]`` largest entries of every row of ``S`` into rows ``row0..`` of
    ``idx``, ``val`` (descending, ties to the smaller column, column ``exclude[row0 + i]``
    skipped; -1 / -inf where fewer than ``k``). A Numba JIT-compiled kernel."""
    b, n = S.shape
    k = idx.shape[1]
    for i in range(b):
        out = row0 + i
        for j in range(k):
            idx[out, j] = -1
            val[out, j] = -np.inf
        cnt = 0
        for c in range(n):
            if c == exclude[out]:
                continue
            s = S[i, c]
            if cnt < k:
                pos = cnt
                cnt += 1
            elif s > val[out, k - 1]:
                pos = k - 1
            else:
                continue
            # insertion into the sorted list (only strictly larger values move up: stable)
            while pos > 0 and s > val[out, pos - 1]:
                idx[out, pos] = idx[out, pos - 1]
                val[out, pos] = val[out, pos - 1]
                pos -= 1
            idx[out, pos] = c
            val[out, pos] = s


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _row_sq(Y, out, start, stop):
    """Squared norms of the rows ``start..stop`` of ``Y`` (float64). A Numba JIT kernel."""
    for i in range(start, stop):
        a = 0.0
        for t in range(Y.shape[1]):
            a += Y[i, t] * Y[i, t]
        out[i] = a


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _pair_cosine(Y, Yref, nn, asq, bsq, out, start, stop):
    """Cosine between ``Y[i]`` and ``Yref[nn[i, j]]`` for rows ``start..stop`` (float64; 0 for
    ``nn`` -1 or a zero row); ``asq``, ``bsq``: squared row norms. A Numba JIT kernel."""
    m = Y.shape[1]
    for i in range(start, stop):
        a = asq[i]
        for j in range(nn.shape[1]):
            c = nn[i, j]
            if c < 0:
                out[i, j] = 0.0
                continue
            num = 0.0
            for t in range(m):
                num += Y[i, t] * Yref[c, t]
            den = np.sqrt(a * bsq[c])
            out[i, j] = max(-1.0, min(num / den, 1.0)) if den > 0.0 else 0.0


def pair_similarity(Y, Yref, nn):
    """Graph similarities ``arccos_kernel(cos(Y[i], Yref[nn[i, j]]))**2`` (float64, exact;
    0 where ``nn`` is -1 or a row is zero)."""
    Y = np.ascontiguousarray(Y, dtype=np.float64)
    Yref = Y if Yref is None else np.ascontiguousarray(Yref, dtype=np.float64)
    nn = np.ascontiguousarray(nn, dtype=np.int64)
    cos = np.zeros(nn.shape)
    if nn.size:
        asq = np.empty(Y.shape[0])
        run_ranges(lambda a, b: _row_sq(Y, asq, a, b), Y.shape[0])
        bsq = asq
        if Yref is not Y:
            bsq = np.empty(Yref.shape[0])
            run_ranges(lambda a, b: _row_sq(Yref, bsq, a, b), Yref.shape[0])
        run_ranges(lambda a, b: _pair_cosine(Y, Yref, nn, asq, bsq, cos, a, b), nn.shape[0])
    zero = (nn < 0) | (np.einsum("ij,ij->i", Y, Y) == 0)[:, None]
    if nn.size:
        ok = nn >= 0
        zero[ok] |= np.einsum("ij,ij->i", Yref, Yref)[nn[ok]] == 0
    return np.where(zero, 0.0, arccos_kernel(cos) ** 2)


def _knn_exact(Z, Zref, k, exclude):
    """Blocked exact search over unit rows (cosine): ``(idx, approximate cosines)``."""
    n, n_ref = Z.shape[0], Zref.shape[0]
    idx = np.empty((n, k), dtype=np.int64)
    val = np.empty((n, k), dtype=np.float32 if Z.dtype == np.float32 else np.float64)
    rows = int(max(16, min(2048, _BLOCK_ELEMENTS // max(n_ref, 1))))
    nb = -(-n // rows)
    bounds = [(b * n) // nb for b in range(nb + 1)]
    ZrT = Zref.T

    def block(start, stop):
        S = Z[start:stop] @ ZrT
        _topk_rows(S, start, exclude, idx, val)

    run_blocks(block, bounds, get_num_threads())
    return idx, val


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def _topk_candidates(G, row0, coefT, rs, inv, idx, val):
    """:func:`_topk_rows` (self skipped) of every candidate ``rs[c]``'s cosines for a block
    of rows ``row0..``, into ``idx[c]``, ``val[c]``. A Numba JIT-compiled kernel.

    ``G``: products of the rows with all ``rs[-1]`` directions removed; candidate ``rs[c]``'s
    products add ``sum_{t >= rs[c]} coefT[t, i] coefT[t, j]`` (accumulated from the last
    candidate down), times the inverse norms ``inv[c]`` (0 for a zero row).
    """
    b, n = G.shape
    nc = rs.shape[0]
    rmax = coefT.shape[0]
    k = idx.shape[2]
    s = np.empty(n)
    v = np.empty(n)
    for i in range(b):
        out = row0 + i
        for col in range(n):
            s[col] = G[i, col]
        hi = rmax
        for c in range(nc - 1, -1, -1):
            for t in range(rs[c], hi):
                a = coefT[t, out]
                for col in range(n):
                    s[col] += a * coefT[t, col]
            hi = rs[c]
            f = inv[c, out]
            for col in range(n):
                v[col] = s[col] * f * inv[c, col]
            for j in range(k):
                idx[c, out, j] = -1
                val[c, out, j] = -np.inf
            cnt = 0
            thr = -np.inf
            for col in range(n):
                x = v[col]
                if col == out or (cnt == k and not x > thr):
                    continue
                if cnt < k:
                    pos = cnt
                    cnt += 1
                else:
                    pos = k - 1
                # insertion into the sorted list (only strictly larger values move up: stable)
                while pos > 0 and x > val[c, out, pos - 1]:
                    idx[c, out, pos] = idx[c, out, pos - 1]
                    val[c, out, pos] = val[c, out, pos - 1]
                    pos -= 1
                idx[c, out, pos] = col
                val[c, out, pos] = x
                if cnt == k:
                    thr = val[c, out, k - 1]


def knn_candidates(X, mean, V, rs, k, offset=None):
    """Exact k-NN lists (self excluded) of the graph's rows of every candidate ``r``, one pass.

    Candidate ``r``'s rows are ``graph_rows(X, mean, V[:r], offset) = R + P[:, r:] V[r:]``
    (``R``: the largest candidate's rows, orthogonal to ``V``; ``P = (X - mean) V^T``), so one
    float64 product ``R_block R^T`` per block serves every candidate, with norms
    ``|R|^2 + |P[:, r:]|^2`` (no cancellation); no n x n matrix.

    Returns ``{r: idx}``, ``idx`` (n, k) int64 by decreasing cosine: :func:`knn_search`'s lists
    (``exclude_self=True``) up to the order of near-ties.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import knn_candidates, shared_directions
    >>> X = np.random.default_rng(0).standard_normal((30, 6))
    >>> mean, V = shared_directions(X, 2)
    >>> lists = knn_candidates(X, mean, V, [0, 2], 3)
    >>> sorted(lists), lists[2].shape
    ([0, 2], (30, 3))
    """
    rs = np.array(sorted({int(r) for r in rs}), dtype=np.int64)
    n = X.shape[0]
    k = int(min(k, n - 1))
    rmax = int(rs[-1])
    R, coef = remove_shared(X, mean, np.asarray(V)[:rmax], return_coef=True)
    if offset is not None:
        R = _with_offset(R, offset)
    base = np.einsum("ij,ij->i", R, R)
    tail = np.cumsum(np.square(coef)[:, ::-1], axis=1)[:, ::-1]   # |P[:, t:]|^2
    nrm2 = np.stack([base + (tail[:, r] if r < rmax else 0.0) for r in rs])
    inv = np.where(nrm2 > 0, 1.0 / np.sqrt(np.where(nrm2 > 0, nrm2, 1.0)), 0.0)
    idx = np.empty((rs.size, n, max(k, 0)), dtype=np.int64)
    val = np.empty(idx.shape)
    if k > 0:
        rows = int(max(16, min(1024, _BLOCK_ELEMENTS // 2 // max(n, 1))))
        nb = max(-(-n // rows), min(8, -(-n // 64)))
        bounds = [(b * n) // nb for b in range(nb + 1)]
        RT = np.ascontiguousarray(R.T)
        coefT = np.ascontiguousarray(coef.T)

        def block(start, stop):
            _topk_candidates(R[start:stop] @ RT, start, coefT, rs, inv, idx, val)

        with _blas_policy():
            run_blocks(block, bounds, get_num_threads())
    return {int(r): idx[c] for c, r in enumerate(rs)}


def _knn_approximate(Z, Zref, k, exclude, seed, verbose):
    """pynndescent search over unit rows (cosine): ``(idx, None)``."""
    exclude_self = exclude is not None
    try:
        from pynndescent import NNDescent
    except ImportError as exc:  # pragma: no cover - a dependency
        raise ImportError("the approximate k-NN search needs pynndescent "
                          "(pip install pynndescent), or pass knn='exact'") from exc
    same = Zref is Z
    kk = k + (1 if exclude_self else 0)
    index = NNDescent(Zref, metric="cosine", n_neighbors=max(kk, 10) if same else 30,
                      random_state=seed, verbose=bool(verbose > 1), compressed=True,
                      low_memory=True)
    if same:
        nn, _ = index.neighbor_graph
        nn = nn[:, :max(kk, 10)]
    else:
        index.prepare()
        nn, _ = index.query(Z, k=kk)
    nn = np.asarray(nn, dtype=np.int64)
    if exclude_self:
        keep = nn != exclude[:, None]
        # the first k entries that are not the sample itself
        order = np.argsort(~keep, axis=1, kind="stable")
        nn = np.take_along_axis(nn, order, axis=1)
    return nn[:, :k], None


def knn_search(Y, k, *, Y_ref=None, exclude_self=False, exclude=None, method="auto",
               random_state=None, verbose=0):
    """The ``k`` most similar rows of ``Y_ref`` (default ``Y``) for every row of ``Y``.

    Parameters
    ----------
    Y, Y_ref : ndarray of shape (n, m), (n_ref, m)
        The rows the graph compares (:func:`graph_rows`), ordered by cosine.
    k : int
        Number of neighbours (capped at the number of candidates).
    exclude_self : bool, default False
        ``Y_ref`` is ``Y``: sample ``i`` is not its own neighbour.
    exclude : None or int array of shape (n,)
        A row of ``Y_ref`` that is not a neighbour of that row of ``Y`` (-1: none).
    method : {"auto", "exact", "approximate"}, default "auto"
        ``"exact"``: blocked products of the float32 unit rows (memory ``O(n k)`` plus a
        block per thread); ``"approximate"``: pynndescent (cosine); ``"auto"``: exact up to
        ``EXACT_MAX`` reference samples.
    random_state : int or None
        Seed of the approximate search.

    Returns
    -------
    idx : ndarray of shape (n, k), int64
        Neighbours by decreasing similarity (-1 where there are fewer than ``k``).
    sim : ndarray of shape (n, k), float64
        Their normalised similarities, computed exactly in float64 (:func:`pair_similarity`).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import knn_search
    >>> Y = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [-1.0, 0.0]])
    >>> idx, sim = knn_search(Y, 1, exclude_self=True)
    >>> idx.ravel().tolist()
    [1, 0, 1, 2]
    """
    Y = np.asarray(Y, dtype=np.float64)
    same = Y_ref is None or Y_ref is Y
    Yr = Y if same else np.asarray(Y_ref, dtype=np.float64)
    n, n_ref = Y.shape[0], Yr.shape[0]
    if exclude_self:
        exclude = np.arange(n, dtype=np.int64)
    ex = None if exclude is None else np.ascontiguousarray(exclude, dtype=np.int64)
    k = int(max(0, min(k, n_ref - (1 if ex is not None and np.any(ex >= 0) else 0))))
    if k == 0 or n == 0:
        return np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0))
    if method == "auto":
        method = "exact" if n_ref <= EXACT_MAX or (not same and n * n_ref <= EXACT_MAX ** 2) \
            else "approximate"
    if method not in ("exact", "approximate"):
        raise ValueError(f"method: expected 'auto', 'exact' or 'approximate', got {method!r}")
    with _blas_policy():
        Z = unit_rows(Y)
        Zr = Z if same else unit_rows(Yr)
        if method == "exact" or n_ref <= k + 1:
            nn, _ = _knn_exact(Z, Zr, k, np.full(n, -1, dtype=np.int64) if ex is None else ex)
        else:
            nn, _ = _knn_approximate(Z, Zr, k, ex, random_state, verbose)
        Z = Zr = None
        return exact_order(Y, Yr, nn)


def exact_order(Y, Yref, nn):
    """``(nn, sim)`` ordered by the exact similarities :func:`pair_similarity` (descending,
    stable: a search's float32 or float64 order may swap near-ties)."""
    sim = pair_similarity(Y, Yref, nn)
    order = np.argsort(-sim, axis=1, kind="stable")
    return np.take_along_axis(nn, order, axis=1), np.take_along_axis(sim, order, axis=1)


def knn_graph(idx, sim, n=None):
    """Symmetrised k-NN graph ``W = (K + K^T) / 2`` from neighbour lists (CSR, float64).

    ``K_ij = sim[i, t]`` for ``j = idx[i, t]``; entries with ``idx < 0`` are ignored.
    """
    n = idx.shape[0] if n is None else int(n)
    k = idx.shape[1]
    rows = np.repeat(np.arange(idx.shape[0]), k)
    cols = idx.ravel()
    vals = np.asarray(sim, dtype=np.float64).ravel()
    ok = cols >= 0
    K = sparse.csr_matrix((vals[ok], (rows[ok], cols[ok])), shape=(n, n))
    W = (K + K.T) * 0.5
    W.eliminate_zeros()
    return W.tocsr()


#: the mutual-rank weights look at every sample's ``RANK_LISTS * k`` nearest neighbours
RANK_LISTS = 4
#: edge weightings of the k-NN graph (``graph_partition(weighting=...)``)
WEIGHTINGS = ("mutual-rank", "similarity")


def reverse_ranks(idx):
    """``back[i, t]``: the position of ``i`` in the list of ``j = idx[i, t]`` (0 for its
    nearest; ``L = idx.shape[1]`` when absent or ``j < 0``). ``O(n L log(n L))`` time.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import reverse_ranks
    >>> reverse_ranks(np.array([[1, 2], [0, 2], [1, 0]])).tolist()
    [[0, 1], [0, 0], [1, 1]]
    """
    idx = np.asarray(idx, dtype=np.int64)
    n, L = idx.shape
    m = max(n, int(idx.max()) + 1 if idx.size else 0)
    rows = np.repeat(np.arange(n, dtype=np.int64), L)
    cols = idx.ravel()
    ok = cols >= 0
    keys = rows[ok] * m + cols[ok]
    pos = np.tile(np.arange(L, dtype=np.int64), n)[ok]
    order = np.argsort(keys, kind="stable")
    keys, pos = keys[order], pos[order]
    back = np.full(n * L, L, dtype=np.int64)
    query = cols[ok] * m + rows[ok]          # (j, i): is i in the list of j?
    at = np.searchsorted(keys, query)
    hit = at < keys.size
    hit[hit] = keys[at[hit]] == query[hit]
    found = np.flatnonzero(ok)[hit]
    back[found] = pos[at[hit]]
    return back.reshape(n, L)


def mutual_rank_graph(idx, sim, k, n=None):
    """The k-NN graph with mutual-rank weights (module docs, step 2).

    ``idx``, ``sim`` (n, L): every sample's ``L >= k`` nearest neighbours, descending.
    ``K_ij = S_ij exp(-(t + b) / k)`` for ``j = idx[i, t]``, ``t < k``, ``b`` from
    :func:`reverse_ranks`; returns ``W = (K + K^T) / 2`` (CSR), the edges of :func:`knn_graph`.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import mutual_rank_graph
    >>> idx = np.array([[1, 2], [0, 2], [1, 0]])
    >>> W = mutual_rank_graph(idx, np.ones((3, 2)), 1)
    >>> np.round(W.toarray(), 3).tolist()
    [[0.0, 1.0, 0.0], [1.0, 0.0, 0.184], [0.0, 0.184, 0.0]]
    """
    idx = np.asarray(idx, dtype=np.int64)
    k = int(min(k, idx.shape[1]))
    back = reverse_ranks(idx)[:, :k]
    w = np.exp(-(np.arange(k)[None, :] + back) / max(k, 1))
    return knn_graph(idx[:, :k], np.asarray(sim, dtype=np.float64)[:, :k] * w, n)


#: above this many samples Lanczos on the normalised adjacency replaces shift-invert (at SHIFT,
#: just below 0) on the Laplacian, whose sparse LU fills in on large graphs (docs/algorithm.md)
SHIFT_INVERT_MAX, SHIFT = 3000, -1e-5
#: ... or when its LU fills this share of n x n and has over DENSE_MIN entries (expensive:
#: no cluster structure to order by; docs/research/spectral-step-variants.md)
DENSE_FACTOR, DENSE_MIN = 1.0 / 3.0, 10 ** 6


def shifted_lu(L, sigma=SHIFT):
    """The sparse LU of ``L - sigma I`` (``L`` symmetric, CSC), as ``eigsh(L, sigma=sigma)``."""
    return splu((L - sigma * sparse.eye(L.shape[0])).tocsc())


def spectral_embedding(W, n_clusters, *, random_state=None, memo=None):
    """Leading eigenpairs of the normalised adjacency ``D^-1/2 W D^-1/2`` (sparse ``W``).

    Returns ``(values, maps, ncut)``: the ``C + 1`` largest eigenvalues (descending; ``C``
    when the graph is that small), the first ``C`` eigenvectors scaled by ``D^-1/2`` (n, C)
    and the relaxed cut ``C - sum(values[:C])``. Isolated samples get a self-loop.
    ``memo``: a dict shared by the calls on one partition's candidate graphs: the LU's
    density is checked (``DENSE_FACTOR``, ``DENSE_MIN``) and once one is dense, no more LUs.
    """
    n = W.shape[0]
    C = int(n_clusters)
    k = min(C + 1, n)
    W = sparse.csr_matrix(W, dtype=np.float64)
    d = np.asarray(W.sum(axis=1)).ravel()
    W = W + sparse.diags((d <= 0).astype(np.float64))
    d = np.maximum(d, 0.0) + (d <= 0)
    dm = 1.0 / np.sqrt(d)
    Nrm = (sparse.diags(dm) @ W @ sparse.diags(dm)).tocsr()
    if k >= n - 1 or n <= 200:
        vals, vecs = np.linalg.eigh(Nrm.toarray())
        vals, vecs = vals[::-1][:k], vecs[:, ::-1][:, :k]
    else:
        rng = np.random.RandomState(random_state) if not isinstance(
            random_state, np.random.RandomState) else random_state
        v0 = rng.uniform(-1.0, 1.0, n)
        lu = None
        if n <= SHIFT_INVERT_MAX and not (memo or {}).get("dense"):
            # shift-invert just below 0 on the Laplacian L = I - Nrm, as scikit-learn's
            # spectral_embedding: well separated even when many eigenvalues are ~0 (a k-NN
            # graph with several connected components), where plain "LA" on Nrm misses some
            L = (sparse.identity(n, format="csr") - Nrm).tocsc()
            lu = shifted_lu(L)
            if memo is not None and lu.L.nnz + lu.U.nnz > max(DENSE_FACTOR * n * n, DENSE_MIN):
                memo["dense"], lu = True, None
        if lu is not None:
            vals, vecs = eigsh(L, k=k, sigma=SHIFT, which="LM", v0=v0, tol=0.0,
                               OPinv=LinearOperator((n, n), lu.solve, dtype=np.float64))
            vals = 1.0 - vals
        else:
            vals, vecs = _lanczos_top(Nrm, d, k, v0)
        order = np.argsort(vals)[::-1]
        vals, vecs = vals[order], vecs[:, order]
    maps = vecs[:, :C] * dm[:, None]
    return vals, maps, float(C - np.sum(vals[:C]))


def _lanczos_top(Nrm, d, k, v0):
    """The ``k`` largest eigenpairs of ``Nrm = D^-1/2 W D^-1/2`` by Lanczos, no factorisation.

    Each connected component gives the eigenvalue 1 (eigenvector ``D^1/2`` on it), a
    multiplicity Lanczos cannot resolve: those are written down (largest volume first) and
    projected out; Lanczos finds the rest on ``I + Nrm`` in their complement.
    """
    from scipy.sparse.csgraph import connected_components

    n = Nrm.shape[0]
    ncomp, comp = connected_components(Nrm, directed=False)
    vol = np.bincount(comp, weights=d, minlength=ncomp)
    keep = np.argsort(-vol, kind="stable")[:k]
    U = np.zeros((n, keep.size))
    for j, c in enumerate(keep):
        sel = comp == c
        U[sel, j] = np.sqrt(d[sel] / vol[c])
    if keep.size >= k:
        return np.ones(k), U
    kk = k - keep.size

    def mv(x):
        x = np.asarray(x).reshape(n, -1)
        x = x - U @ (U.T @ x)
        y = x + Nrm @ x
        return y - U @ (U.T @ y)

    op = LinearOperator((n, n), matvec=mv, matmat=mv, dtype=np.float64)
    v0 = v0 - U @ (U.T @ v0)
    vals, vecs = eigsh(op, k=kk, which="LA", v0=v0, tol=1e-10,
                       ncv=min(n - keep.size, max(2 * kk + 1, 20)), maxiter=100 * n)
    return np.r_[np.ones(keep.size), vals - 1.0], np.c_[U, vecs]


def cluster_qr(maps):
    """Partition from a spectral embedding by column-pivoted QR (Damle, Minden & Ying 2019)."""
    C = maps.shape[1]
    _, _, piv = qr(maps.T, pivoting=True)
    ut, _, v = svd(maps[piv[:C], :].T, lapack="scipy")
    return np.abs(maps @ (ut @ v.conj())).argmax(axis=1).astype(np.int64)


def compact_labels(labels, n_clusters):
    """Consecutive labels ``0..C-1`` in order of first appearance of each used cluster."""
    _, first = np.unique(labels, return_index=True)
    order = labels[np.sort(first)]
    mapping = np.full(max(int(labels.max()) + 1, n_clusters), -1, dtype=np.int64)
    mapping[order] = np.arange(order.size)
    return mapping[labels]


@functools.lru_cache(maxsize=8)
def _hash_multipliers(N):
    """The fixed odd 64-bit multipliers of :func:`row_hashes` (one per feature; read-only)."""
    m = np.random.default_rng(0x5EED).integers(0, 2 ** 63, N, dtype=np.uint64)
    m = m * np.uint64(2) + np.uint64(1)
    m.flags.writeable = False
    return m


def row_hashes(Q):
    """64-bit hash of the float32 bits of every row of ``Q`` (-0.0 as 0.0): ``sum_t m_t b_t``
    mod 2^64 with fixed odd multipliers ``m_t``. Equal rows in float32, equal hashes; the
    callers check collisions (NumPy: no kernel to compile on a first call)."""
    Q = np.asarray(Q)
    m = _hash_multipliers(Q.shape[1])
    h = np.zeros(Q.shape[0], dtype=np.uint64)
    for s in range(0, Q.shape[0], _ROWS):   # the products wrap mod 2^64 (unsigned)
        b = (Q[s:s + _ROWS].astype(np.float32) + np.float32(0.0)).view(np.uint32)
        h[s:s + _ROWS] = (b.astype(np.uint64) * m).sum(axis=1, dtype=np.uint64)
    return h


def distinct_rows(Q):
    """Groups of equal rows (equal in float32): ``(first, inverse)``.

    ``first``: the first row of every group (ascending); ``inverse``: the group of every row,
    ``Q[first][inverse] == Q`` in float32. Hash collisions are verified apart.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import distinct_rows
    >>> first, inverse = distinct_rows(np.array([[1.0, 2.0], [3.0, 4.0], [1.0, 2.0]]))
    >>> first.tolist(), inverse.tolist()
    ([0, 1], [0, 1, 0])
    """
    Q = np.ascontiguousarray(Q)
    n = Q.shape[0]
    _, first, inverse = np.unique(row_hashes(Q), return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    rep = first[inverse]
    Q32 = Q.astype(np.float32) if Q.dtype != np.float32 else Q
    dup = np.flatnonzero(rep != np.arange(n))
    if dup.size:
        differ = np.any(Q32[dup] != Q32[rep[dup]], axis=1)
        rep[dup[differ]] = dup[differ]  # hash collisions: their own group
    first, inverse = np.unique(rep, return_inverse=True)
    return first.astype(np.int64), inverse.ravel().astype(np.int64)


#: a sample's neighbours before a jump of this factor in ``1 - S`` count as its near-copies
_JUMP = 4.0


def copy_factor(sim, k):
    """Typical number of near-copies of a sample, from sorted neighbour similarities.

    ``sim`` (n, K) descending. With ``d_j = 1 - sim[i, j]``, ``g_i = j + 1`` for the first
    ``j < K / 2`` with ``d_{j+1} > 4 d_j``, else 1; returns the median of ``g_i`` (1 without
    near-duplicates). The graph then takes ``k g`` neighbours, about ``k`` distinct ones;
    without it a data set tiled with small noise falls apart into groups of copies.
    """
    n, K = sim.shape
    if n == 0 or K < 2 * k:
        return 1
    d = 1.0 - np.asarray(sim, dtype=np.float64)
    half = K // 2
    jump = d[:, 1:half + 1] > _JUMP * np.maximum(d[:, :half], 1e-12)
    first = np.where(jump.any(axis=1), jump.argmax(axis=1) + 2, 1)
    return int(max(1, np.median(first)))


def list_length(n, k, copies=None, weighting="mutual-rank"):
    """Neighbours per list of the graph of ``n`` rows (at most ``n - 1``): ``L k g`` for the
    near-copy factor ``g = copies`` (``L = RANK_LISTS`` for the mutual ranks, 1 for
    ``"similarity"``); ``copies`` None (not measured yet): ``max(8 k, 32, L k)``, enough to
    see the near-copies (:func:`copy_factor`).

    Examples
    --------
    >>> from ntnumba.partition.graph import list_length
    >>> list_length(1000, 5), list_length(1000, 5, 3), list_length(1000, 5, 3, "similarity")
    (40, 60, 15)
    """
    lk = RANK_LISTS if weighting == "mutual-rank" else 1
    return min(n - 1, max(8 * k, 32, lk * k) if copies is None else lk * k * copies)


def max_copy_factor(n, k, weighting="mutual-rank"):
    """The largest near-copy factor :func:`neighbour_lists` can measure on ``n`` rows: the
    first lists' length (:func:`list_length`) over ``k``, at least 1.

    Examples
    --------
    >>> from ntnumba.partition.graph import max_copy_factor
    >>> max_copy_factor(1000, 5), max_copy_factor(10, 5)
    (8, 1)
    """
    return max(1, list_length(n, k, None, weighting) // max(k, 1))


def neighbour_lists(Y, k, copies=None, weighting="mutual-rank", method="auto",
                    random_state=None, verbose=0, check=None):
    """The neighbour lists a k-NN graph of the rows ``Y`` is built from
    (:func:`weighted_graph`), as the graph partition searches them.

    ``copies`` None: ``g`` (:func:`copy_factor`) is measured on the first lists
    (:func:`list_length`) and the lists lengthened when needed; else ``g = copies``. Returns
    ``nn``, ``sim`` (:func:`knn_search`, self excluded; at least ``list_length(n, k, g)``
    neighbours) and ``g``. ``check(K)`` is called before every search of ``K`` neighbours.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import neighbour_lists
    >>> Y = np.random.default_rng(0).standard_normal((50, 4))
    >>> nn, sim, g = neighbour_lists(np.repeat(Y, 3, axis=0), 2)   # every row three times
    >>> g, nn.shape                                                # max(8 k, 32) >= 4 k g
    (3, (150, 32))
    >>> neighbour_lists(Y, 2, copies=3)[0].shape
    (50, 24)
    """
    def search(K):
        if check is not None:
            check(K)
        return knn_search(Y, K, exclude_self=True, method=method, random_state=random_state,
                          verbose=verbose)

    n = Y.shape[0]
    K = list_length(n, k, copies, weighting)
    nn, sim = search(K)
    if copies is None:
        copies = min(copy_factor(sim, k), max_copy_factor(n, k, weighting))
        if K < list_length(n, k, copies, weighting):  # the mutual ranks need longer lists
            nn, sim = search(list_length(n, k, copies, weighting))
    return nn, sim, copies


def weighted_graph(nn, sim, k, n, weighting="mutual-rank"):
    """The graph partition's k-NN graph from sorted neighbour lists (:func:`neighbour_lists`):
    ``weighting="mutual-rank"``: :func:`mutual_rank_graph` of the first ``RANK_LISTS * k``
    neighbours; ``"similarity"``: :func:`knn_graph` of the first ``k``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import knn_search, weighted_graph
    >>> Y = np.random.default_rng(0).standard_normal((30, 4))
    >>> nn, sim = knn_search(Y, 12, exclude_self=True)
    >>> weighted_graph(nn, sim, 3, 30).nnz == weighted_graph(nn, sim, 3, 30, "similarity").nnz
    True
    """
    if weighting == "mutual-rank":
        L = RANK_LISTS * k
        return mutual_rank_graph(nn[:, :L], sim[:, :L], k, n)
    return knn_graph(nn[:, :k], sim[:, :k], n)


def graph_partition(X, n_clusters, *, n_neighbors=5, n_shared=DEFAULT_SHARED, random_state=None,
                    return_all=False, knn="auto", verbose=0, offset=None,
                    weighting="mutual-rank"):
    """Cluster the rows of ``X`` on the k-NN graph of their angular similarity (module docs).

    Parameters
    ----------
    X : array-like of shape (n, N)
        The samples (scaled, with the representation rules of :mod:`ntnumba.partition.select`
        applied).
    n_clusters : int
    n_neighbors : int, default 5
        ``k`` of the k-NN graph.
    n_shared : int or sequence of int, default (0, 1, 2, 4, 8, 16)
        Number ``r`` of shared principal directions removed; a sequence: candidates, the one
        with the smallest relaxed normalised cut is used. Capped at a quarter of the rank of
        the centred ``X`` (on data of few features no or few directions are removed).
    random_state : int, RandomState or None
        Seed of the approximate k-NN search and of the eigensolver's start vector.
    return_all : bool, default False
        Also return the partition of every candidate ``r`` (``info["labels"]``, for ablations).
    knn : {"auto", "exact", "approximate"}, default "auto"
        The k-NN search (:func:`knn_search`).
    verbose : int, default 0
        Progress of every phase on stderr.
    offset : None or float
        A constant coordinate appended to every centred row (:func:`graph_rows`).
    weighting : {"mutual-rank", "similarity"}, default "mutual-rank"
        The edge weights: the similarity times the mutual-rank factor
        (:func:`mutual_rank_graph`), or the similarity alone (:func:`knn_graph`).

    Returns
    -------
    labels : ndarray of shape (n,), int64, values in ``0..n_clusters-1``
    info : dict
        ``"n_shared"`` (the chosen r), ``"ncut"`` ({r: cut}), ``"mean"`` (N,), ``"V"`` (r, N),
        ``"n_distinct"`` (number of distinct rows: equal rows are one node of the graph).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import graph_partition
    >>> rng = np.random.default_rng(0)
    >>> X = np.repeat(3.0 * rng.standard_normal((2, 20)), 30, axis=0)
    >>> X += 0.3 * rng.standard_normal(X.shape)
    >>> labels, info = graph_partition(X, 2, random_state=0)
    >>> np.bincount(labels).tolist()
    [30, 30]
    """
    X = np.asarray(X)
    if not np.issubdtype(X.dtype, np.floating):
        X = X.astype(np.float64)
    n, N = X.shape
    C = int(n_clusters)
    cands = [int(n_shared)] if np.isscalar(n_shared) else sorted({int(r) for r in n_shared})
    if n <= C:
        labels = np.arange(n, dtype=np.int64) % max(C, 1)
        mean, V = shared_directions(X, 0)
        return labels, {"n_shared": 0, "ncut": {0: 0.0}, "mean": mean, "V": V,
                        "n_distinct": n}
    if isinstance(random_state, (int, np.integer)):
        seed = int(random_state)
    else:
        from sklearn.utils import check_random_state
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    say = Progress(verbose)
    k = int(n_neighbors)
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting: expected one of {WEIGHTINGS}, got {weighting!r}")
    with _blas_policy():
        labels, info = _partition(X, C, k, cands, seed, return_all, knn, say, offset,
                                  weighting)
    return labels, info


def _check_graph_memory(n, N, K, n_cands, what="the k-NN graph"):
    """:func:`check_memory` for the k-NN graph of ``n`` rows of ``N`` features, ``K`` neighbours:
    the rows, a block per thread, 16 bytes per list entry and candidate, 96 for the graph."""
    check_memory(n * (N + 1) * (8 + 8) + get_num_threads() * min(n * n, _BLOCK_ELEMENTS) * 4
                 + n * (K + 1) * (96 + 16 * n_cands), what)


def _partition(X, C, k, cands, seed, return_all, knn, say, offset=None,
               weighting="mutual-rank"):
    n, N = X.shape
    # equal samples are one node: copies of a sample must not fill its neighbour list
    first, inverse = distinct_rows(X)
    Xd = X[first] if first.size < n else X
    nd = Xd.shape[0]
    say(f"{n} samples ({nd} distinct), {N} features, k = {k}")
    if nd <= C:
        lab = np.arange(nd, dtype=np.int64)
        mean, V = shared_directions(Xd, 0)
        return lab[inverse], {"n_shared": 0, "ncut": {0: 0.0}, "mean": mean, "V": V,
                              "n_distinct": nd}
    K = list_length(nd, k, 1, weighting)
    if K > nd / 4 and nd * K > DENSE_ENTRIES:  # a user's large k (near-copies excluded)
        from ..core.validation import user_stacklevel
        warnings.warn(f"n_neighbors={k}: the k-NN graph lists {K} of the {nd} samples for every "
                      f"sample: a nearly complete graph, slow (its time grows as n_samples x "
                      f"n_neighbors, for each of {len(cands)} candidate graphs); the default "
                      "is 5", UserWarning, stacklevel=user_stacklevel())
    # at most a quarter of the rank of the centred data (docs/algorithm.md, step 4); the
    # leading 4 r_max + 1 directions give the rank when it is that small
    full = min(nd - 1, N)
    r_req = min(4 * max(cands) + 1, full) if max(cands) > 0 else 0
    mean, Vall, sv = shared_directions(Xd, r_req, return_sv=True)
    rank = int(np.sum(sv > 1e-7 * sv[0])) if sv.size and sv[0] > 0 else 0
    if rank == Vall.shape[0]:
        rank = full  # at least r_req directions: the cap does not bind
    cands = sorted({min(r, rank // 4) for r in cands})
    say(f"shared directions: {Vall.shape[0]} (rank {rank}), candidates r = {cands}")
    best = None
    cuts = {}
    all_labels = {}
    copies = None  # near-copies per sample (copy_factor), from the first candidate's lists
    # list_length: enough neighbours to see near-copies (copy_factor), then L k g of them
    exact = knn == "exact" or (knn == "auto" and nd <= EXACT_MAX)
    lists = None  # the exact lists of the other candidates, from one pass (knn_candidates)
    memo = {}  # whether the candidates' Laplacians factorise sparsely (spectral_embedding)
    for r in cands:
        V = Vall[:r]
        Y = graph_rows(Xd, mean, V, offset)
        if lists is not None:
            nn, sim = exact_order(Y, Y, lists.pop(r))
        else:
            first_lists = copies is None
            nn, sim, copies = neighbour_lists(
                Y, k, copies, weighting, knn, seed, say.verbose,
                check=lambda K: _check_graph_memory(nd, N, K, len(cands)))
            if first_lists:
                say(f"near-copies per sample: {copies} (k-NN graph with {k * copies} neighbours)")
            if first_lists and exact and len(cands) > 1:
                lists = knn_candidates(Xd, mean, Vall, cands[1:],
                                       list_length(nd, k, copies, weighting), offset)
                say(f"exact k-NN lists of the other {len(cands) - 1} candidates")
        Y = None
        W = weighted_graph(nn, sim, k * copies, nd, weighting)
        nn = sim = None
        say(f"r = {r}: k-NN graph ({W.nnz} edges)")
        vals, maps, cut = spectral_embedding(W, C, random_state=seed, memo=memo)
        W = None
        cuts[r] = cut
        say(f"r = {r}: eigensolver, cut {cut:.6f}")
        # the (C+1)-th Laplacian eigenvalue: 0 when the graph has more than C components
        gap = 1.0 - vals[C] if vals.size > C else 0.0
        if return_all:
            all_labels[r] = compact_labels(cluster_qr(maps)[inverse], C)
        if best is None or cut < best[0] - TIE or (abs(cut - best[0]) <= TIE and
                                                    gap > best[1]):
            best = (cut, gap, r, V, maps)
    _, _, r, V, maps = best
    labels = compact_labels(cluster_qr(maps)[inverse], C)
    say(f"partition: r = {r}")
    info = {"n_shared": r, "ncut": cuts, "mean": mean, "V": V, "n_distinct": nd,
            "copies": copies}
    if return_all:
        info["labels"] = all_labels
    return labels, info


# ---------------------------------------------------------------------------------------------
# the graph rule inside the alternating algorithm and for new samples

def restricted_stage1(Q, tau, nu, labels, lambda0, lambda1, lambda_a):
    """Stage 1 with the cluster fixed: for sample i only the candidates ``(labels[i], c2)``.

    Returns ``(similarity_labels, Y, cost)``: the best ``c2`` by the ``objective`` rule, its
    representation and cost (float64). Whole clusters go to the threads (largest first; small
    clusters split over threads cost more than they saved); same results on any thread count.
    """
    from ..model.stage1 import assign

    Q = np.asarray(Q)
    n, M = Q.shape
    labels = np.asarray(labels, dtype=np.int64)
    sim = np.zeros(n, dtype=np.int64)
    Y = np.zeros((n, M), dtype=Q.dtype)
    cost = np.zeros(n)
    order = np.argsort(labels, kind="stable")     # the rows of every cluster, ascending
    clusters, starts, counts = np.unique(labels[order], return_index=True, return_counts=True)
    big = np.argsort(-counts, kind="stable")

    def solve(first, last):
        with _numba_threads(1):
            for j in big[first:last]:
                c = clusters[j]
                idx = order[starts[j]:starts[j] + counts[j]]
                _, s, Yc, _, det = assign(Q[idx], tau[c:c + 1], nu, lambda0, lambda1,
                                          rule="objective", lambda_a=lambda_a,
                                          return_details=True, prune=True)
                sim[idx] = s
                Y[idx] = Yc
                cost[idx] = det["cost"]

    run_blocks(solve, list(range(clusters.size + 1)), get_num_threads())
    return sim, Y, cost


@contextmanager
def _numba_threads(n):
    """numba's thread count of this thread set to ``n`` (restored afterwards)."""
    old = get_num_threads()
    set_num_threads(min(n, old))
    try:
        yield
    finally:
        set_num_threads(old)


def graph_init_tau(X, labels, nu, n_clusters, rng, A=None):
    """Initial taus from a partition: ``tau_c = mean of the q_i in c - mean(nu)``.

    ``q_i = A x_i`` (``A`` None: the identity), from the means of the ``x_i`` (no n x M
    array); an empty cluster gets a random sample's ``q``.
    """
    X = np.asarray(X, dtype=np.float64)
    means = np.empty((n_clusters, X.shape[1]))
    for c in range(n_clusters):
        m = labels == c
        means[c] = X[m].mean(axis=0) if np.any(m) else X[rng.randint(X.shape[0])]
    Q = means if A is None else means @ np.asarray(A, dtype=np.float64).T
    return Q - np.asarray(nu, dtype=np.float64).mean(axis=0)


def knn_vote(Y_new, Y_ref, labels_ref, n_clusters, n_neighbors, *, exclude_self=False,
             exclude=None, return_votes=False, method="auto", random_state=0):
    """Out-of-sample rule of the graph mode: similarity-weighted vote of the nearest references.

    The ``n_neighbors`` most similar rows of ``Y_ref`` (:func:`knn_search`) vote for their
    label with weight ``S``, their similarity. Returns ``(labels, score)``, ``score = 1 - mean
    S`` (the quantity the rejection option thresholds). ``exclude_self``, ``exclude``,
    ``method``, ``random_state``: as in :func:`knn_search` (leave-one-out votes).
    ``return_votes``: also the (n_new, n_clusters) shares of ``max(S, 0) + 1e-12`` per label.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.graph import knn_vote
    >>> ref = np.array([[1.0, 0.0], [0.9, 0.2], [0.0, 1.0], [0.1, 0.9]])
    >>> knn_vote(np.array([[1.0, 0.1]]), ref, np.array([0, 0, 1, 1]), 2, 2)[0].tolist()
    [0]
    """
    Y_new = np.asarray(Y_new, dtype=np.float64)
    n = Y_new.shape[0]
    labels_ref = np.asarray(labels_ref, dtype=np.int64)
    same = Y_ref is Y_new
    nn, w = knn_search(Y_new, max(1, int(n_neighbors)), Y_ref=None if same else Y_ref,
                       exclude_self=exclude_self, exclude=exclude, method=method,
                       random_state=random_state)
    if nn.shape[1] == 0:  # no reference sample to vote
        out = (np.zeros(n, dtype=np.int64), np.ones(n))
        return out + (np.full((n, n_clusters), 1.0 / n_clusters),) if return_votes else out
    w = np.maximum(w, 0.0)
    ok = nn >= 0
    votes = np.zeros((n, n_clusters))
    np.add.at(votes, (np.repeat(np.arange(n), nn.shape[1])[ok.ravel()],
                      labels_ref[nn[ok]]), w[ok] + 1e-12)
    labels = votes.argmax(axis=1)
    score = 1.0 - w.mean(axis=1)
    if return_votes:
        return labels, score, votes / votes.sum(axis=1, keepdims=True)
    return labels, score


# a full or unwritable numba cache never fails a fit (ntnumba/core/cache.py)
from ..core.cache import guard as _cache_guard  # noqa: E402

_cache_guard(sys.modules[__name__])
