"""Streaming and chunked fitting: ``partial_fit``, ``fit(X, chunk_size=...)`` and the seam that
the Dask backend (:mod:`ntnumba.dask`) plugs into.

Design (see ``docs/scaling.md``):

* Stage 1 is per sample: it runs on one block of rows at a time.
* Stage 2 and Stage 3 need sums over samples. The tau update and the quadratic part of the nu
  update come from the per-cluster sums of ``_theta._statistics``; the Stage-3 update from
  ``X^T X`` and ``Ybar^T X`` (``_transform.assignment_statistics``). Sums of blocks add up.
* The nu step is a majorise-minimise step whose ratio term ``sum_i alpha_i / rho(y_i, nu)`` has
  one denominator per sample: it is not a function of fixed sums. Every nu step makes one or two
  passes over the members' representations ``y_i``. The chunked fit keeps ``Y`` (n x M) out of
  memory: a block's ``Y`` is written to a temporary ``.npy`` file (the local backend) or kept on
  the worker that computed it (the Dask backend), and the passes read it back block by block.

So a chunked or distributed iteration computes the same quantities as the in-memory iteration,
only summed in a different order (``tests/test_stream.py``, ``tests/test_dask.py``).

The backends share :func:`fit_backend`; a backend maps a module-level function over the row
blocks (``fn(Xk, Yk, *block_args, *common)``) and returns the per-block results in block order.
"""
import mmap
import os
import shutil
import sys
import tempfile
import time
import warnings

import numpy as np
from sklearn.utils import check_random_state

from . import _driver, _graph
from ._estimator import _numba_threads, set_training_scores
from ._stage1 import assign
from ._theta import (_NuProblem, _next_unused, _nu_steps, _reseed_order, _rows_kernels,
                     _statistics, _update_taus, data_terms, prior_up,
                     theta_objective)
from ._transform import (TransformStatistics, _regulariser, assignment_statistics,
                         transform_statistics, update_transform)
from ._validation import check_scalar

#: Largest number of samples held in memory for the initialisation and, for the graph rule,
#: as the reference set of the k-NN vote (the first samples of the data / the stream).
REFERENCE_SIZE = 2000

_INT32_MAX = np.iinfo(np.int32).max
_THETA_KEYS = ("count", "sum_q", "sum_qq", "sum_wy_pos", "sum_wy_neg", "sum_yy")


# ---------------------------------------------------------------------------------------------
# input: blocks of rows of any 2-D array-like
# ---------------------------------------------------------------------------------------------
def check_source(X):
    """``X`` as a 2-D array-like that can be sliced by rows; returns ``(X, n, N, dtype)``.

    Objects with ``shape``, ``dtype`` and row slicing (``numpy.memmap``, ``h5py``/``zarr``
    datasets) are kept as they are; anything else goes through ``numpy.asarray``.
    """
    if not (hasattr(X, "shape") and hasattr(X, "dtype") and hasattr(X, "__getitem__")):
        X = np.asarray(X)
    shape = tuple(X.shape)
    if len(shape) != 2:
        raise ValueError(f"X: expected a 2-D array, got shape {shape}")
    n, N = shape
    if n < 1 or N < 1:
        raise ValueError(f"X: array is empty (shape {shape})")
    dt = np.dtype(X.dtype)
    if dt == object or not (np.issubdtype(dt, np.number) or dt == np.bool_):
        raise TypeError(f"X: expected a numeric array, got dtype {dt}")
    if np.issubdtype(dt, np.complexfloating):
        raise TypeError(f"X: complex data is not supported (dtype {dt})")
    dtype = np.dtype(np.float32) if dt == np.float32 else np.dtype(np.float64)
    return X, n, N, dtype


def _release(X):
    """Drop the pages of a ``numpy.memmap`` from this process's resident set (best effort).

    Reading a memmap maps the file's pages into the process; they count in its RSS until the
    kernel needs the memory. ``MADV_DONTNEED`` unmaps them (the page cache keeps the data)."""
    mm = getattr(X, "_mmap", None)
    if mm is not None and hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        try:
            mm.madvise(mmap.MADV_DONTNEED)
        except (OSError, ValueError):  # pragma: no cover - closed map, unsupported platform
            pass


def _libc_trim():
    """glibc's ``malloc_trim(0)`` (None elsewhere)."""
    try:
        import ctypes
        import ctypes.util
        name = ctypes.util.find_library("c")
        if not name or not sys.platform.startswith("linux"):
            return None
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        return None


_TRIM = _libc_trim()


def _trim():
    """Return freed heap pages to the OS after a block (best effort, glibc only).

    Without it the per-sample results kept from block to block (labels, costs: small, long
    lived) pin the block-sized temporaries' heap pages, and the resident set grew with n:
    +56 MB from 50k to 150k samples of dimension 1024 (docs/scaling.md)."""
    if _TRIM is not None:
        _TRIM(0)


def read_block(X, start, stop, dtype, scale=1.0):
    """Rows ``start:stop`` of ``X`` as a new C-contiguous float array, checked and scaled.

    The input is never written to (a copy is always made).
    """
    Xk = np.asarray(X[start:stop])
    if Xk.ndim != 2 or Xk.shape[0] != stop - start:
        raise ValueError(f"X: rows {start}:{stop} have shape {Xk.shape}, expected "
                         f"({stop - start}, n_features)")
    Xk = np.array(Xk, dtype=dtype, order="C", copy=True)
    _release(X)
    bad = ~np.isfinite(Xk)
    if bad.any():
        row = start + int(np.argwhere(bad)[0][0])
        raise ValueError(f"X: contains {int(bad.sum())} NaN or infinite value(s) in rows "
                         f"{start}:{stop}, first at row {row}")
    if scale != 1.0:
        Xk *= dtype.type(scale)
    return Xk


def _bounds(n, chunk_size):
    return [(s, min(n, s + chunk_size)) for s in range(0, n, chunk_size)]


class LocalBackend:
    """Blocks of rows of an array-like read one at a time; ``Y`` blocks in temporary files."""

    def __init__(self, X, chunk_size, tmp_dir=None):
        self.X, self.n, self.N, self.dtype = check_source(X)
        self.chunk_size = check_scalar(chunk_size, "chunk_size", low=1, integer=True)
        self.bounds = _bounds(self.n, self.chunk_size)
        self.scale = 1.0
        self._tmp_dir = tmp_dir
        self._dir = None

    # -- scaling (the estimator's _rms_scale, summed over blocks)
    def max_abs(self):
        m = 0.0
        for s, e in self.bounds:
            m = max(m, float(np.max(np.abs(read_block(self.X, s, e, self.dtype)))))
        return m

    def mean_square(self, m):
        total = 0.0
        for s, e in self.bounds:
            Xk = read_block(self.X, s, e, self.dtype)
            Z = Xk / Xk.dtype.type(m) if Xk.dtype == np.float32 else Xk / m
            total += float(np.sum(np.square(Z, dtype=np.float64)))
        return total / (self.n * self.N)

    def head(self, m):
        return read_block(self.X, 0, min(m, self.n), self.dtype, self.scale)

    def _ypath(self, b):
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="ntnumba-y-", dir=self._tmp_dir)
        return os.path.join(self._dir, f"y{b}.npy")

    def map(self, fn, block_args=None, common=(), *, use_x=True, use_y=False, store_y=False,
            blocks=None, combine=None):
        """``[fn(Xk, Yk, *block_args[b], *common) for b in blocks]``; with ``combine``, the
        results folded in block order as they come (``combine(acc, r)``), so that per-block
        results (e.g. M x N sums) never pile up."""
        out = []
        acc = None
        for b in range(len(self.bounds)) if blocks is None else blocks:
            s, e = self.bounds[b]
            Xk = read_block(self.X, s, e, self.dtype, self.scale) if use_x else None
            Yk = np.load(self._ypath(b)) if use_y else None
            args = () if block_args is None else block_args[b]
            r = fn(Xk, Yk, *args, *common)
            if store_y:
                np.save(self._ypath(b), r[0])
                r = r[1]
            if combine is None:
                out.append(r)
            else:
                acc = r if acc is None else combine(acc, r)
            Xk = Yk = r = None
            _trim()
        return out if combine is None else acc

    def close(self):
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


# ---------------------------------------------------------------------------------------------
# per-block functions (module level: the Dask backend ships them to the workers)
# ---------------------------------------------------------------------------------------------
def _stage1(Q, tau, nu, p, labels=None):
    """Stage 1 under the rule of ``p``: ``(labels, sim, Y, scores, cost)``.

    The graph rule keeps the given ``labels`` (its cluster's candidates only; ``scores`` is
    None); the other rules assign (:func:`ntnumba.kernels.assign`).
    """
    if p.rule == "graph":
        labels = np.asarray(labels, dtype=np.int64)
        sim, Y, cost = _graph.restricted_stage1(Q, tau, nu, labels, p.lambda0, p.lambda1,
                                                p.lambda_a)
        return labels, sim, Y, None, cost
    labels, sim, Y, scores, det = assign(Q, tau, nu, p.lambda0, p.lambda1, rule=p.rule,
                                         lambda_a=p.lambda_a, return_details=True, prune=True)
    return labels, sim, Y, scores, det["cost"]


def _blk_stage1(Xk, Yk, labels_k, A, tau, nu, p):
    """Stage 1 of one block and its Stage-2 sums: ``(Y, (labels, sim, cost, stats))``."""
    Q = _driver.compute_Q(Xk, A, p.learn_transform)
    lab, sim, Y, _, cost = _stage1(Q, tau, nu, p, labels_k)
    st = _statistics(Q, np.ascontiguousarray(Y, dtype=Q.dtype), lab, sim,
                     np.asarray(tau, dtype=np.float64), np.asarray(nu, dtype=np.float64),
                     p.lambda0)
    return Y, ([lab], [sim], [cost], st)


def _blk_alpha(Xk, Yk, labels_k, tau, lambda0):
    out = np.empty(Yk.shape[0])
    _rows_kernels(*Yk.shape)[0](Yk, np.arange(Yk.shape[0], dtype=np.int64), tau, labels_k, out)
    return out * lambda0


def _blk_rho(Xk, Yk, rows, zidx, Z):
    out = np.empty(rows.shape[0])
    _rows_kernels(rows.shape[0], Yk.shape[1])[0](Yk, rows, Z, zidx, out)
    return out


def _blk_rho2(Xk, Yk, rows, z1, z2):
    o1, o2 = np.empty(rows.shape[0]), np.empty(rows.shape[0])
    _rows_kernels(rows.shape[0], Yk.shape[1])[1](Yk, rows, z1, z2, o1, o2)
    return o1, o2


def _blk_colsum(Xk, Yk, rows, w):
    M = Yk.shape[1]
    pos, neg = np.empty(M), np.empty(M)
    _rows_kernels(rows.shape[0], M)[2](Yk, rows, w, pos, neg)
    return pos, neg


def _blk_qrows(Xk, Yk, idx, A, learn_transform):
    return _driver.compute_Q(np.ascontiguousarray(Xk[idx]), A, learn_transform)


def _blk_gram(Xk, Yk):
    X64 = Xk.astype(np.float64, copy=False)
    return X64.T @ X64


def _blk_stage3(Xk, Yk, labels_k, sim_k, tau, nu, lambda_a):
    st = assignment_statistics(Xk, Yk, tau, nu, labels_k, sim_k, lambda_a,
                               gram=np.zeros((Xk.shape[1], Xk.shape[1])))
    return st.cross, st.target_sq


def _blk_stage3_subset(Xk, Yk, labels_k, sim_k, rows, tau, nu, lambda_a):
    """Statistics of the paper's online subset inside one block (Ybar as ``_driver``)."""
    T = tau[labels_k[rows]] + nu[sim_k[rows]]
    Ybar = (np.asarray(Yk[rows], dtype=np.float64) + lambda_a * T) / (1.0 + lambda_a)
    return transform_statistics(Xk[rows], Ybar)


def _blk_objective(Xk, Yk, labels_k, sim_k, A, tau, nu, p):
    Q = _driver.compute_Q(Xk, A, p.learn_transform)
    d2, l1 = data_terms(Q, Yk)
    return 0.5 * d2 + p.lambda1 * l1 + theta_objective(
        Q, Yk, labels_k, sim_k, tau, nu, lambda0=p.lambda0, lambda_a=p.lambda_a, lambda_e=0.0)


def _blk_final(Xk, Yk, A, tau, nu, p):
    Q = _driver.compute_Q(Xk, A, p.learn_transform)
    lab, sim, _, _ = assign(Q, tau, nu, p.lambda0, p.lambda1, rule=p.rule,
                            lambda_a=p.lambda_a, prune=True)
    return lab, sim


def _blk_soft_scores(Xk, Yk, start, est):
    """``est._soft_scores`` of the block of training rows starting at row ``start``."""
    n_ref = est._fit_X.shape[0] if est._p.rule == "graph" else 0
    rows = np.arange(start, start + Xk.shape[0], dtype=np.int64)
    return est._soft_scores(Xk, match=np.where(rows < n_ref, rows, -1))


def _blk_graph_final(Xk, Yk, labels_k, A, tau, nu, p):
    Q = _driver.compute_Q(Xk, A, p.learn_transform)
    sim, _, _ = _graph.restricted_stage1(Q, tau, nu, labels_k, p.lambda0, p.lambda1, p.lambda_a)
    return sim


def _codes(Q, mean, V, lambda1):
    return _graph.soft_threshold(_graph.remove_shared(Q, mean, V), lambda1)


def _blk_vote(Xk, Yk, rows, A, p, mean, V, codes_ref, labels_ref):
    Q = _driver.compute_Q(np.ascontiguousarray(Xk[rows]), A, p.learn_transform)
    return _graph.knn_vote(_codes(Q, mean, V, p.lambda1), codes_ref, labels_ref, p.n_clusters,
                           p.n_neighbors)


def _add(a, b):
    """Sum of two block results (arrays, numbers, or tuples of them)."""
    if isinstance(a, tuple):
        return tuple(_add(x, y) for x, y in zip(a, b))
    return a + b


def _add_stage1(a, b):
    """Block results of ``_blk_stage1`` (lists of per-sample arrays, Stage-2 sums)."""
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2],
            {k: a[3][k] + b[3][k] for k in _THETA_KEYS})


def _add_stats(a, b):
    return a + b


# ---------------------------------------------------------------------------------------------
# Stage 2 over blocks
# ---------------------------------------------------------------------------------------------
def _scale_theta(st, f):
    return {k: f * np.asarray(v, dtype=np.float64) for k, v in st.items()}


def _block_rows(be, rows):
    """Members ``rows`` (sorted global indices) split by block: ``[(b, local_rows, lo, hi)]``."""
    out = []
    for b, (s, e) in enumerate(be.bounds):
        lo, hi = np.searchsorted(rows, [s, e])
        if hi > lo:
            out.append((b, np.ascontiguousarray(rows[lo:hi] - s, dtype=np.int64), lo, hi))
    return out


class _BlockY:
    """Stands for ``Y`` (n x M) in ``_theta._NuProblem``, which reads only its shape and hands
    it to its row kernels; here those kernels are passes over the backend's blocks."""

    def __init__(self, n, M):
        self.shape = (n, M)


class _BlockNuProblem(_NuProblem):
    """The nu subproblem of ``_theta`` with the passes over the members' ``y`` done by blocks.

    The value, the candidates and the step rule are those of ``_theta._NuProblem`` /
    ``_theta._nu_steps``; only its three row kernels (``rho_rows``, ``rho_rows2``, ``colsum``:
    rho of the members, the weighted signed column sums) are replaced by sums over blocks.
    """

    def __init__(self, be, rows, alpha, Pn, m, tau, nu, c2, lambda_a, lambda_e):
        super().__init__(_BlockY(be.n, tau.shape[1]), rows, alpha, Pn, m, tau, nu, c2,
                         lambda_a, lambda_e)
        self.be = be
        self.parts = _block_rows(be, rows)
        self.blocks = [b for b, *_ in self.parts]
        self.rho_rows = self._rho_rows
        self.rho_rows2 = self._rho_rows2
        self.colsum = self._colsum

    def _args(self, *extra):
        args = {b: (r,) + tuple(x[lo:hi] for x in extra) for b, r, lo, hi in self.parts}
        return [args.get(b) for b in range(len(self.be.bounds))]

    def _check(self, rows):
        if rows is not self.rows:  # pragma: no cover - _NuProblem passes its own rows
            raise RuntimeError("_BlockNuProblem: unexpected rows")

    def _rho_rows(self, Y, rows, Z, zidx, out):
        self._check(rows)
        res = self.be.map(_blk_rho, self._args(zidx), (np.ascontiguousarray(Z),),
                          use_x=False, use_y=True, blocks=self.blocks)
        out[:] = np.concatenate(res) if res else np.empty(0)

    def _rho_rows2(self, Y, rows, z1, z2, out1, out2):
        self._check(rows)
        res = self.be.map(_blk_rho2, self._args(), (z1, z2), use_x=False, use_y=True,
                          blocks=self.blocks)
        out1[:] = np.concatenate([r[0] for r in res])
        out2[:] = np.concatenate([r[1] for r in res])

    def _colsum(self, Y, rows, w, pos, neg):
        self._check(rows)
        pos[:], neg[:] = self.be.map(_blk_colsum, self._args(w), use_x=False, use_y=True,
                                     blocks=self.blocks, combine=_add)


def _q_row(be, i, A, p):
    """``q_i`` (the data dtype) of global sample ``i``."""
    b = next(b for b, (s, e) in enumerate(be.bounds) if s <= i < e)
    args = [None] * len(be.bounds)
    args[b] = (np.array([i - be.bounds[b][0]]),)
    return be.map(_blk_qrows, args, (A, p.learn_transform), blocks=[b])[0][0]


def _update_theta_blocks(be, stats, labels, sim, cost, tau, nu, A, p, n_nu_steps=5):
    """``_theta.update_theta`` (with ``cost``) from block sums and block passes."""
    tau = np.asarray(tau, dtype=np.float64)
    nu = np.asarray(nu, dtype=np.float64)
    Cs = nu.shape[0]
    counts = stats["count"]
    need_reseed = bool(np.any(counts.sum(axis=1) == 0) or np.any(counts.sum(axis=0) == 0))
    reorder = _reseed_order(cost, None) if need_reseed else None
    used = set()
    tau_new, _, _, _ = _update_taus(stats, tau, nu, p.lambda0, p.lambda_a, p.lambda_e, False)
    reseeded = [int(c) for c in np.flatnonzero(counts.sum(axis=1) == 0)]
    for c in reseeded:
        i = _next_unused(reorder, used)
        tau_new[c] = _q_row(be, i, A, p) - nu[sim[i]]
    N = counts.astype(np.float64)
    m = N.sum(axis=0)
    Pn = p.lambda_a * (stats["sum_q"].sum(axis=0) - N.T @ tau_new)
    args = [(labels[s:e],) for s, e in be.bounds]
    alpha = np.concatenate(be.map(_blk_alpha, args, (tau_new, p.lambda0), use_x=False,
                                  use_y=True))
    nu_new = nu.copy()
    for c2 in range(Cs):
        rows = np.flatnonzero(sim == c2).astype(np.int64)
        if rows.size == 0:
            i = _next_unused(reorder, used)
            nu_new[c2] = _q_row(be, i, A, p) - tau_new[labels[i]]
            continue
        prob = _BlockNuProblem(be, rows, alpha[rows], Pn[c2], m[c2], tau_new, nu, c2,
                               p.lambda_a, p.lambda_e)
        z, _, _, _ = _nu_steps(prob, nu[c2].copy(), n_nu_steps)
        nu_new[c2] = z
    return tau_new.astype(be.dtype), nu_new.astype(be.dtype), reseeded


# ---------------------------------------------------------------------------------------------
# one iteration over blocks (mirrors _driver._iterate)
# ---------------------------------------------------------------------------------------------
def _iterate_blocks(be, state, p, rng, fixed_labels, gram):
    A, tau, nu = state.A, state.tau, state.nu
    args = [((None if fixed_labels is None else fixed_labels[s:e]),) for s, e in be.bounds]
    lab_l, sim_l, cost_l, stats = be.map(_blk_stage1, args, (A, tau, nu, p), store_y=True,
                                         combine=_add_stage1)
    labels = np.concatenate(lab_l).astype(np.int64)
    sim = np.concatenate(sim_l).astype(np.int64)
    cost = np.concatenate(cost_l)
    lab_l = sim_l = cost_l = None
    tau, nu, reseeded = _update_theta_blocks(be, stats, labels, sim, cost, tau, nu, A, p)
    if p.learn_transform:
        w = 1.0 + p.lambda_a
        lam = dict(lambda2=p.lambda2 / w, lambda3=p.lambda3 / w, lambda4=p.lambda4 / w,
                   n_steps=p.transform_steps)
        if p.online_fraction is None:
            args = [(labels[s:e], sim[s:e]) for s, e in be.bounds]
            cross, tsq = be.map(_blk_stage3, args, (tau, nu, p.lambda_a), use_y=True,
                                combine=_add)
            stats3 = TransformStatistics(gram, cross, max(float(tsq), 0.0), be.n, be.dtype)
            A = update_transform(A=A, stats=stats3, **lam)
        else:
            n = be.n
            msub = min(n, max(1, int(round(p.online_fraction * n))))
            rows = np.sort(rng.choice(n, size=msub, replace=False))
            parts = _block_rows(be, rows)
            args = [None] * len(be.bounds)
            for b, r, _, _ in parts:
                s, e = be.bounds[b]
                args[b] = (labels[s:e], sim[s:e], r)
            stats3 = be.map(_blk_stage3_subset, args, (tau, nu, p.lambda_a), use_y=True,
                            blocks=[b for b, *_ in parts], combine=_add_stats)
            A = update_transform(A=A, stats=stats3, online_rate=p.online_rate, **lam)
    args = [(labels[s:e], sim[s:e]) for s, e in be.bounds]
    obj = float(be.map(_blk_objective, args, (A, tau, nu, p), use_y=True, combine=_add))
    if p.lambda_e != 0.0:
        obj += p.lambda_e * prior_up(tau, nu)
    if p.learn_transform:
        A64 = np.asarray(A, dtype=np.float64)
        obj += _regulariser(A64.T @ A64, A64.shape[0], p.lambda2, p.lambda3, p.lambda4)
    new = _driver.State(A=A, tau=tau, nu=nu, labels=labels, similarity_labels=sim,
                        objective_history=state.objective_history + [obj],
                        n_iter=state.n_iter + 1,
                        reseeded=state.reseeded + [(state.n_iter + 1, c) for c in reseeded],
                        graph=state.graph if p.rule == "graph" else None)
    return new, obj, reseeded


def _graph_labels(be, X0, state, p, rng, seed):
    """assign="graph": the partition of the reference set ``X0`` (the first samples), every
    other sample labelled by the k-NN vote against it (as ``predict``)."""
    if state.graph is None or state.labels is None:
        Q0 = _driver.compute_Q(X0, state.A, p.learn_transform)
        lab0, info = _graph.graph_partition(Q0, state.tau.shape[0], lambda1=p.lambda1,
                                            n_neighbors=p.n_neighbors, n_shared=p.n_shared,
                                            random_state=rng.randint(_INT32_MAX))
        state.graph = {"n_shared": info["n_shared"], "graph_cut": info["ncut"][info["n_shared"]],
                       "ncut": dict(info["ncut"])}
    else:
        lab0 = state.labels
    lab0 = np.asarray(lab0, dtype=np.int64)
    n0 = X0.shape[0]
    if be.n == n0:
        return lab0
    Q0 = _driver.compute_Q(X0, state.A, p.learn_transform)
    mean, V = _graph.shared_directions(Q0, int(state.graph["n_shared"]), labels=lab0,
                                       random_state=seed)
    codes0 = _codes(Q0, mean, V, p.lambda1)
    rows = np.arange(n0, be.n, dtype=np.int64)
    parts = _block_rows(be, rows)
    args = [None] * len(be.bounds)
    for b, r, _, _ in parts:
        args[b] = (r,)
    res = be.map(_blk_vote, args, (state.A, p, mean, V, codes0, lab0),
                 blocks=[b for b, *_ in parts])
    return np.concatenate([lab0] + [r[0] for r in res])


# ---------------------------------------------------------------------------------------------
# the chunked / distributed fit
# ---------------------------------------------------------------------------------------------
def fit_backend(est, be, *, callback=None):
    """Fit ``est`` (an NTClustering) over the blocks of ``be``; sets the fitted attributes.

    Mirrors ``NTClustering.fit``: validation, ``scaling="rms"`` (from two passes), ``n_init``
    restarts, ``max_iter``/``tol``, ``callback``, KeyboardInterrupt keeping the last complete
    iteration. The initialisation (and, for the graph rule, the partition) uses the first
    ``REFERENCE_SIZE`` samples; with ``n <= REFERENCE_SIZE`` it is the in-memory one.
    """
    if est.warm_start and hasattr(est, "_state"):
        raise ValueError("warm_start: continuing a fit is not supported by the chunked and "
                         "Dask fits; use partial_fit to update a fitted model with new data")
    n, N = be.n, be.N
    p = est._params(N)
    if n < p.n_clusters:
        raise ValueError(f"X: n_samples={n} should be >= n_clusters={p.n_clusters}")
    if est.scaling is None:
        scale = 1.0
    else:
        mx = be.max_abs()
        scale = 1.0 if mx == 0.0 else float(np.sqrt(1.0 / be.mean_square(mx)) / mx)
    be.scale = scale
    stream = sys.stderr
    ctx = _driver.blas_context()
    with _numba_threads(est.n_jobs):
        ctx.__enter__()
        try:
            X0 = be.head(REFERENCE_SIZE)
            gram = None
            if p.learn_transform:
                G = be.map(_blk_gram, combine=_add)
                gram = 0.5 * (G + G.T)
            seed_vote = check_random_state(est.random_state).randint(_INT32_MAX)
            best = best_rng = best_labels = None
            seeds = check_random_state(est.random_state).randint(_INT32_MAX, size=est.n_init)
            for s in seeds:
                rng = np.random.RandomState(s)
                state = _driver.initialise(X0, p, rng)
                fixed = None
                if p.rule == "graph":
                    fixed = _graph_labels(be, X0, state, p, rng, seed_vote)
                    state.labels = fixed
                t0 = time.perf_counter()
                try:
                    while state.n_iter < p.max_iter:
                        prev = state.objective_history[-1] if state.objective_history else None
                        state, obj, reseeded = _iterate_blocks(be, state, p, rng, fixed, gram)
                        if est.verbose:
                            ch = "" if prev is None else \
                                f"  change {(prev - obj) / abs(prev):+.3e}"
                            print(f"iteration {state.n_iter:4d}  objective {obj:.6e}{ch}  "
                                  f"elapsed {_driver._fmt_time(time.perf_counter() - t0)}"
                                  + (f"  re-seeded clusters {reseeded}" if reseeded else ""),
                                  file=stream, flush=True)
                        if callback is not None and callback(state):
                            break
                        if prev is not None and abs(prev - obj) <= p.tol * max(abs(prev),
                                                                                1e-300):
                            break
                except KeyboardInterrupt:
                    state = state.copy()
                    state.interrupted = True
                if best is None or (state.objective_history and (
                        not best.objective_history
                        or state.objective_history[-1] < best.objective_history[-1])):
                    best, best_rng, best_labels = state, rng, fixed
                if state.interrupted:
                    break
            _finalise_backend(est, be, best, best_rng, p, X0, best_labels, seed_vote)
        finally:
            ctx.__exit__(None, None, None)
    if best.interrupted:
        warnings.warn(f"fit interrupted: keeping iteration {best.n_iter}", RuntimeWarning)
        raise KeyboardInterrupt
    return est


def _finalise_backend(est, be, state, rng, p, X0, labels, seed):
    """The fitted attributes of ``NTClustering._finalise`` from block passes."""
    est._state = state
    est._rng_state = rng.get_state()
    est._p = p
    est.scale_ = be.scale
    est.n_features_in_ = be.N
    A = state.A if state.A is not None else np.eye(be.N, dtype=be.dtype)
    est.components_ = A
    est.dissimilarity_ = state.tau
    est.similarity_ = state.nu
    est.objective_history_ = np.asarray(state.objective_history, dtype=np.float64)
    est.n_iter_ = state.n_iter
    if p.rule == "graph":
        args = [(labels[s:e],) for s, e in be.bounds]
        sims = be.map(_blk_graph_final, args, (state.A, state.tau, state.nu, p))
        est.labels_ = np.asarray(labels, dtype=np.int64)
        est.similarity_labels_ = np.concatenate(sims).astype(np.int64)
        _set_graph_reference(est, X0, labels[:X0.shape[0]], state, p, seed)
    else:
        res = be.map(_blk_final, None, (state.A, state.tau, state.nu, p))
        est.labels_ = np.concatenate([r[0] for r in res]).astype(np.int64)
        est.similarity_labels_ = np.concatenate([r[1] for r in res]).astype(np.int64)
    # the soft scores of every training sample (the first rows are the graph's reference set)
    res = be.map(_blk_soft_scores, [(s,) for s, _ in be.bounds], (est,))
    set_training_scores(est, est.labels_, np.concatenate([r[0] for r in res]),
                        np.concatenate([r[1] for r in res]))


def _set_graph_reference(est, Xref, labels_ref, state, p, seed):
    """The graph rule's out-of-sample state (as ``NTClustering._fit_graph``) on a reference set
    of bounded size: ``predict`` votes against ``Xref`` with ``labels_[:len(Xref)]``."""
    Q = _driver.compute_Q(Xref, state.A, p.learn_transform)
    r = int(state.graph["n_shared"])
    est.graph_cut_ = float(state.graph["graph_cut"])
    est.n_shared_ = r
    est.shared_mean_, est.shared_components_ = _graph.shared_directions(
        Q, r, labels=np.asarray(labels_ref, dtype=np.int64), random_state=seed)
    est._fit_X = Xref


def chunked_fit(est, X, chunk_size, *, callback=None, tmp_dir=None):
    """``NTClustering.fit(X, chunk_size=...)``: the fit with at most ``chunk_size`` rows of
    ``X`` (and of ``A X``, ``Y``) in memory at a time.

    Parameters
    ----------
    est : NTClustering
    X : array-like of shape (n_samples, n_features)
        ``numpy.ndarray``, ``numpy.memmap`` or any object with ``shape``, ``dtype`` and row
        slicing (``X[a:b]``), e.g. an ``h5py`` or ``zarr`` dataset. Read block by block, never
        modified.
    chunk_size : int
        Rows per block.
    callback : callable, optional
        As in ``fit``.
    tmp_dir : str, optional
        Directory of the temporary files holding the blocks of ``Y`` (default: the system's
        temporary directory; removed at the end).

    Returns
    -------
    est : NTClustering

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba import NTClustering
    >>> from ntnumba._stream import chunked_fit
    >>> X = np.random.default_rng(0).standard_normal((40, 4))
    >>> model = NTClustering(2, n_components=8, assign="objective", init="random",
    ...                      max_iter=2, random_state=0)
    >>> chunked_fit(model, X, chunk_size=16).labels_.shape
    (40,)
    """
    be = LocalBackend(X, chunk_size, tmp_dir=tmp_dir)
    try:
        return fit_backend(est, be, callback=callback)
    finally:
        be.close()


# ---------------------------------------------------------------------------------------------
# partial_fit
# ---------------------------------------------------------------------------------------------
def _add_theta(acc, st, forget):
    st = _scale_theta(st, 1.0)
    if acc is None:
        return st
    return {k: forget * acc[k] + st[k] for k in _THETA_KEYS}


def _add_transform(acc, st, forget):
    if acc is None:
        return st
    return TransformStatistics(forget * acc.gram + st.gram, forget * acc.cross + st.cross,
                               forget * acc.target_sq + st.target_sq,
                               acc.n_samples + st.n_samples, st.dtype)


def partial_fit(est, X, forget=1.0):
    """One streaming update of ``est`` with the chunk ``X``; see ``NTClustering.partial_fit``."""
    forget = check_scalar(forget, "forget", low=0.0, low_inclusive=False, high=1.0)
    # a stream continues only from the state its last call left (a fit() in between restarts)
    first = getattr(est, "_stream_", {}).get("state") is not getattr(est, "_state", None) \
        or not hasattr(est, "_stream_")
    from_fit = first and hasattr(est, "_state")
    X = est._check_X(X, reset=first and not from_fit)
    n, N = X.shape
    p = est._params(N)
    with _numba_threads(est.n_jobs), _driver.blas_context():
        _partial_fit(est, X, p, forget, first, from_fit)
    return est


def _partial_fit(est, X, p, forget, first, from_fit):
    n, N = X.shape
    if first and not from_fit:
        if n < p.n_clusters:
            raise ValueError(f"X: the first chunk has n_samples={n}, should be >= "
                             f"n_clusters={p.n_clusters}")
        scale = est._rms_scale(X)
        Xs = est._scaled(X, scale)
        rng = np.random.RandomState(check_random_state(est.random_state).randint(_INT32_MAX))
        X0 = Xs[:REFERENCE_SIZE]
        state = _driver.initialise(X0, p, rng)
        ref = None
        if p.rule == "graph":
            if state.graph is None or state.labels is None:
                Q0 = _driver.compute_Q(X0, state.A, p.learn_transform)
                lab0, info = _graph.graph_partition(
                    Q0, p.n_clusters, lambda1=p.lambda1, n_neighbors=p.n_neighbors,
                    n_shared=p.n_shared, random_state=rng.randint(_INT32_MAX))
                state.graph = {"n_shared": info["n_shared"],
                               "graph_cut": info["ncut"][info["n_shared"]]}
                state.labels = lab0
            ref = (np.array(X0), np.asarray(state.labels, dtype=np.int64))
        stream = {"theta": None, "transform": None, "ref": ref, "scale": scale,
                  "n_seen": 0}
    else:
        if first:  # continue a model fitted by fit(): fresh statistics from its parameters
            state = est._state.copy()
            rng = np.random.RandomState()
            rng.set_state(est._rng_state)
            ref = None
            if p.rule == "graph":
                ref = (np.asarray(est._fit_X)[:REFERENCE_SIZE],
                       np.asarray(est.labels_, dtype=np.int64)[:REFERENCE_SIZE])
            stream = {"theta": None, "transform": None, "ref": ref, "scale": est.scale_,
                      "n_seen": 0}
        else:
            stream = est._stream_
            state = est._state
            rng = np.random.RandomState()
            rng.set_state(est._rng_state)
        Xs = est._scaled(X, stream["scale"])
    A, tau, nu = state.A, state.tau, state.nu
    t64, n64 = np.asarray(tau, dtype=np.float64), np.asarray(nu, dtype=np.float64)
    ref = stream["ref"]
    if p.rule == "graph":
        r_sh = int(state.graph["n_shared"])
        seed = check_random_state(est.random_state).randint(_INT32_MAX)
        n_fixed = ref[0].shape[0] if (first and not from_fit) else 0

    # ---- Stage 1 on the chunk with the current parameters
    Q = _driver.compute_Q(Xs, A, p.learn_transform)
    voted = _vote_ref(Q, ref, A, p, r_sh, seed, n_fixed) if p.rule == "graph" else None
    labels, sim, Y, _, cost = _stage1(Q, tau, nu, p, voted)

    # ---- Stage 2: forgotten per-cluster sums; the nu ratio term from the chunk
    st = _statistics(Q, np.ascontiguousarray(Y, dtype=Q.dtype), labels, sim, t64, n64,
                     p.lambda0)
    acc = _add_theta(stream["theta"], st, forget)
    stream["theta"] = acc
    nc = acc["count"].sum(axis=1)
    tau_new, _, _, _ = _update_taus(acc, t64, n64, p.lambda0, p.lambda_a, p.lambda_e, False)
    order = _reseed_order(cost, None)
    used = set()
    for c in np.flatnonzero(nc == 0):     # never had a member: seed from the chunk
        i = _next_unused(order, used)
        tau_new[c] = Q[i] - n64[sim[i]]
    Nc = acc["count"]
    m = Nc.sum(axis=0)
    Pn = p.lambda_a * (acc["sum_q"].sum(axis=0) - Nc.T @ tau_new)
    alpha = np.empty(n)
    _rows_kernels(*Y.shape)[0](Y, np.arange(n, dtype=np.int64), tau_new, labels, alpha)
    alpha *= p.lambda0
    nu_new = n64.copy()
    for c2 in range(n64.shape[0]):
        rows = np.flatnonzero(sim == c2).astype(np.int64)
        if m[c2] == 0:
            i = _next_unused(order, used)
            nu_new[c2] = Q[i] - tau_new[labels[i]]
            continue
        if rows.size == 0:
            continue
        # the ratio term of the chunk's members stands for that of all (forgotten) members
        prob = _NuProblem(Y, rows, alpha[rows] * (m[c2] / rows.size), Pn[c2], m[c2], tau_new,
                          n64, c2, p.lambda_a, p.lambda_e)
        nu_new[c2] = _nu_steps(prob, n64[c2].copy(), 5)[0]
    tau, nu = tau_new.astype(X.dtype), nu_new.astype(X.dtype)

    # ---- Stage 3: forgotten X^T X, Ybar^T X
    if p.learn_transform:
        w = 1.0 + p.lambda_a
        st3 = assignment_statistics(Xs, Y, tau, nu, labels, sim, p.lambda_a)
        stream["transform"] = _add_transform(stream["transform"], st3, forget)
        A = update_transform(A=A, stats=stream["transform"], lambda2=p.lambda2 / w,
                             lambda3=p.lambda3 / w, lambda4=p.lambda4 / w,
                             n_steps=p.transform_steps)
    Y = None
    stream["n_seen"] += n

    # ---- the chunk with the updated parameters: objective and labels (as MiniBatchKMeans)
    Q = _driver.compute_Q(Xs, A, p.learn_transform)
    voted = _vote_ref(Q, ref, A, p, r_sh, seed, n_fixed) if p.rule == "graph" else None
    labels, sim, Y, scores, _ = _stage1(Q, tau, nu, p, voted)
    obj = _driver.full_objective(Xs, A, Y, labels, sim, tau, nu, p, Q=Q)
    state = _driver.State(A=A, tau=tau, nu=nu, labels=labels, similarity_labels=sim,
                          objective_history=state.objective_history + [obj],
                          n_iter=state.n_iter + 1, graph=state.graph)
    stream["state"] = state
    est._stream_ = stream
    est._state = state
    est._rng_state = rng.get_state()
    est._p = p
    est.scale_ = stream["scale"]
    est.components_ = A if A is not None else np.eye(N, dtype=X.dtype)
    est.dissimilarity_ = tau
    est.similarity_ = nu
    est.objective_history_ = np.asarray(state.objective_history, dtype=np.float64)
    est.n_iter_ = state.n_iter
    if p.rule == "graph":
        _set_graph_reference(est, ref[0], ref[1], state, p, seed)
        est.labels_ = ref[1]
        est.similarity_labels_ = _graph.restricted_stage1(
            _driver.compute_Q(ref[0], A, p.learn_transform), tau, nu, ref[1], p.lambda0,
            p.lambda1, p.lambda_a)[0]
        scored, match = ref[0], np.arange(ref[0].shape[0])
    else:
        est.labels_ = labels
        est.similarity_labels_ = sim
        scored, match = Xs, None
    set_training_scores(est, est.labels_, *est._soft_scores(scored, match=match))


def _vote_ref(Q, ref, A, p, r, seed, n_fixed=0):
    """Graph rule in a stream: labels of the chunk by the k-NN vote against the reference set
    (its ``r`` shared directions removed, as ``predict``); the first ``n_fixed`` rows of the
    chunk are the reference set itself and keep its labels."""
    Xref, lab_ref = ref
    Qref = _driver.compute_Q(Xref, A, p.learn_transform)
    mean, V = _graph.shared_directions(Qref, r, labels=lab_ref, random_state=seed)
    labels = _graph.knn_vote(_codes(Q, mean, V, p.lambda1), _codes(Qref, mean, V, p.lambda1),
                             lab_ref, p.n_clusters, p.n_neighbors)[0]
    labels[:n_fixed] = lab_ref[:n_fixed]
    return labels
