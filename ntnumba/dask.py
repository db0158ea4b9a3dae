"""Dask backend: :class:`NTClustering` on a ``dask.distributed`` cluster (optional extra
``ntnumba[dask]``).

Follows dask-ml's ``KMeans`` conventions: the same constructor as the scikit-learn style
estimator, ``fit(X)`` takes a dask array (or anything ``dask.array.asarray`` accepts) and runs on
the active ``dask.distributed`` client, ``labels_`` is a dask array, ``predict`` and
``transform`` of a dask array return dask arrays (``map_blocks``), of a NumPy array NumPy arrays.

Every block of rows stays on a worker, where Stage 1 runs and its ``Y`` stays; only sums
travel, and the small updates run on the client with the in-memory driver
(:mod:`ntnumba.engine.loop`): the result equals the in-memory fit up to rounding. A worker that
dies is recovered by dask from the lineage of the blocks and shared arguments; when dask gives
up, the scheduler is lost or a pass exceeds ``timeout``, the fit raises :class:`ClusterError`,
the input and previous state unchanged. See ``docs/scaling.md``, ``docs/reliability.md``.
"""
import contextlib
import copy
import pickle
import time

import numpy as np

try:
    import dask
    import dask.array as da
    import distributed
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("ntnumba.dask needs dask[array] and distributed: "
                      "python -m pip install 'ntnumba[dask]'") from exc

from .estimators.clustering import NTClustering as _NTClustering
from .estimators.clustering import fit_source, fitted_parts, set_fitted
from .engine.sources import Blocks, check_source, max_abs, read_block, sum_square

__all__ = ["NTClustering", "DaskBackend", "ClusterError"]


class ClusterError(RuntimeError):
    """The cluster failed a fit: a task dask gave up on, a lost scheduler, or a pass without a
    result within ``timeout``; the message names the cause.

    The estimator keeps its previous state and the input is unchanged.

    Examples
    --------
    >>> from ntnumba.dask import ClusterError
    >>> issubclass(ClusterError, RuntimeError)
    True
    """


#: Exceptions of dask's scheduler turned into RuntimeError (by class name: they moved between
#: distributed's modules over versions).
_CLUSTER_ERRORS = {"KilledWorker", "CommClosedError", "FutureCancelledError", "CancelledError",
                   "FuturesCancelledError", "TimeoutError", "StreamClosedError"}
#: Shared arguments larger than this (:func:`_shipped_bytes`: arrays, a row index, an estimator)
#: travel once per pass as one task keyed on their contents (:func:`_identity`: recomputable
#: when a worker dies, unlike scattered data) instead of with every block's task.
_SCATTER_BYTES = 1 << 16
#: Per-block results gathered at a time when they are folded (``combine``).
_FOLD_BATCH = 4


def _shipped_bytes(obj):
    """Bytes ``obj`` adds to a task that carries it: an array's ``nbytes``, else its pickle with
    the arrays' buffers counted, not copied."""
    if isinstance(obj, np.ndarray) and obj.dtype != object:
        return obj.nbytes
    buffers = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    return len(head) + sum(memoryview(b).nbytes for b in buffers)


def _block_arg(obj):
    """``obj`` as an argument of every block task of a lazy dask array: itself when small, else
    one ``dask.delayed`` node that travels once to each worker (unlike a scattered future, not
    tied to the client active when it was built)."""
    if _shipped_bytes(obj) <= _SCATTER_BYTES:
        return obj
    return dask.delayed(obj, pure=False)


def _identity(obj):
    return obj


def _on_worker(fn, n_threads, *args):
    """Run a block function with ``n_threads`` numba threads and one BLAS thread."""
    import numba
    from .core.parallel import blas_limit as _blas_limit
    old = numba.get_num_threads()
    numba.set_num_threads(max(1, min(n_threads, numba.config.NUMBA_NUM_THREADS)))
    try:
        with _blas_limit(1):
            return fn(*args)
    finally:
        numba.set_num_threads(old)


def _merge(carry, r):
    """The block's new carry: the old one updated with what the pass stored."""
    out = {} if carry is None else dict(carry)
    out.update(r[0])
    return out


def _second(r):
    return r[1]


def _shifted(raw, start, stop, dtype, scale):
    try:
        return read_block(raw, 0, stop - start, dtype, scale)
    except ValueError as exc:  # name the global row, not the row of the block
        msg = str(exc)
        if "first at row" in msg:
            head, _, row = msg.rpartition("first at row ")
            msg = (f"X: contains NaN or infinite value(s) in rows {start}:{stop}, "
                   f"first at row {start + int(row)}")
        raise ValueError(msg) from None


def _max_abs(raw, start, stop, dtype):
    return max_abs(_shifted(raw, start, stop, dtype, 1.0))


def _sum_square(raw, start, stop, dtype, m):
    return sum_square(_shifted(raw, start, stop, dtype, 1.0), m)


def _client(client=None):
    if client is not None:
        return client
    try:
        return distributed.get_client()
    except ValueError:
        raise ValueError("client: no dask.distributed Client is active; create one "
                         "(distributed.Client(...) or LocalCluster) or pass client=") from None


def _as_dask(X, name="X"):
    if not isinstance(X, da.Array):
        X, n, N, _ = check_source(X)
        X = da.from_array(X, chunks=(min(n, 10_000), N))
    if X.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array, got shape {X.shape}")
    if any(np.isnan(c) for c in X.shape):
        raise ValueError(f"{name}: unknown chunk sizes; call X.compute_chunk_sizes() first")
    return X.rechunk({1: -1})


class DaskBackend(Blocks):
    """Row blocks of a dask array held as futures on a ``dask.distributed`` cluster.

    A row-block source of the driver (:mod:`ntnumba.engine.sources`): ``map(fn, ...)`` submits
    ``fn(X_b, carry_b, *block_args, *common)`` for every block on the worker holding it and
    gathers the (small) results; with ``store`` what the pass stores (the block's ``Y``) stays
    on the worker. ``_gather`` is the one place results come back from the cluster.

    Parameters
    ----------
    client : distributed.Client
    X : dask.array.Array of shape (n_samples, n_features)
        Rechunked to whole rows per block. Not modified.
    timeout : float, optional
        Seconds a pass may wait for its results before :class:`ClusterError`; None: no limit.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from distributed import Client, LocalCluster
    >>> from ntnumba.dask import DaskBackend
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \\
    ...         Client(cluster) as client:
    ...     be = DaskBackend(client, da.ones((10, 3), chunks=(4, 3)))
    ...     be.bounds
    [(0, 4), (4, 8), (8, 10)]
    """

    def __init__(self, client, X, timeout=None):
        if timeout is not None:
            from .core.validation import check_scalar
            timeout = check_scalar(timeout, "timeout", low=0.0, low_inclusive=False)
        self.timeout = timeout
        X = _as_dask(X)
        _, self.n, self.N, self.dtype = check_source(X)
        self.X = X
        self.client = client
        starts = np.cumsum((0,) + X.chunks[0])
        self.bounds = [(int(s), int(e)) for s, e in zip(starts[:-1], starts[1:])]
        self.scale = 1.0
        self._raw = None
        self._xf = None
        self._yf = [None] * len(self.bounds)
        nthreads = client.nthreads()
        self.n_threads = max(1, min(nthreads.values())) if nthreads else 1

    def _fail(self, cause, exc=None):
        raise ClusterError(
            f"ntnumba.dask: {cause}; the fit was abandoned. The input is unchanged and the "
            "estimator keeps its previous state.") from exc

    @contextlib.contextmanager
    def _cluster_errors(self):
        """Errors of the cluster (lost workers, scheduler or connection) as one RuntimeError."""
        try:
            yield
        except ClusterError:
            raise
        except Exception as exc:
            name = type(exc).__name__
            if name == "KilledWorker":
                self._fail(f"dask gave up on a task after its workers died ({exc}); check the "
                           "workers (memory limits, crashes) or raise "
                           "distributed.scheduler.allowed-failures", exc)
            if name in _CLUSTER_ERRORS or isinstance(exc, OSError) or (
                    self.client.status not in ("running", "connecting", "newly-created")):
                self._fail(f"the cluster lost the data, a task or the connection to the "
                           f"scheduler ({name}: {exc}; client status {self.client.status!r})",
                           exc)
            raise

    def _deadline(self):
        return None if self.timeout is None else time.monotonic() + self.timeout

    def _wait(self, futures, deadline):
        """Wait for ``futures`` until ``deadline`` (ClusterError naming the workers still busy
        with them)."""
        pending = [f for f in futures if not f.done()]
        while pending:
            step = 1.0 if deadline is None else min(1.0, max(deadline - time.monotonic(), 0.0))
            try:
                distributed.wait(pending, timeout=step)
            except (TimeoutError, distributed.TimeoutError):
                pass
            pending = [f for f in pending if not f.done()]
            if self.client.status in ("closing", "closed", "failed"):
                self._fail(f"the connection to the scheduler was lost (client status "
                           f"{self.client.status!r})")
            if pending and deadline is not None and time.monotonic() >= deadline:
                keys = {f.key for f in pending}
                try:
                    busy = sorted(w for w, ks in self.client.processing().items()
                                  if keys.intersection(ks))
                except Exception:  # the scheduler does not answer either
                    busy = ["(the scheduler does not answer)"]
                self._fail(f"{len(pending)} task(s) brought no result within timeout="
                           f"{self.timeout:g} s; workers still on them: {busy} (stopped, hung or "
                           f"overloaded; none listed: they wait for data of such a worker). "
                           f"Raise timeout= for slow passes")

    def _gather(self, futures, deadline=None):
        """The results of ``futures``, by ``deadline`` (default: ``timeout`` from now)."""
        deadline = self._deadline() if deadline is None else deadline
        with self._cluster_errors():
            self._wait(futures, deadline)
            if deadline is None:
                return self.client.gather(futures)
            try:  # bounded too: the results may sit on a worker that stopped since
                return self.client.sync(lambda: self.client.gather(futures, asynchronous=True),
                                        callback_timeout=max(deadline - time.monotonic(), 0.1))
            except (TimeoutError, distributed.TimeoutError):
                self._fail(f"the results of {len(futures)} finished task(s) could not be "
                           f"fetched within timeout={self.timeout:g} s (a worker holding them "
                           "stopped or hung). Raise timeout= for slow passes")

    def _raw_blocks(self):
        if self._raw is None:
            with self._cluster_errors():
                self._raw = self.client.compute(list(self.X.to_delayed().ravel()))
        return self._raw

    def max_abs(self):
        raw = self._raw_blocks()
        fs = [self.client.submit(_max_abs, r, s, e, self.dtype, pure=False)
              for r, (s, e) in zip(raw, self.bounds)]
        return max(self._gather(fs))

    def mean_square(self, m):
        raw = self._raw_blocks()
        fs = [self.client.submit(_sum_square, r, s, e, self.dtype, m, pure=False)
              for r, (s, e) in zip(raw, self.bounds)]
        return float(sum(self._gather(fs))) / (self.n * self.N)

    def _blocks(self):
        if self._xf is None:
            raw = self._raw_blocks()
            self._xf = [self.client.submit(_shifted, r, s, e, self.dtype,
                                           1.0 if self.scale is None else self.scale,
                                           pure=False)
                        for r, (s, e) in zip(raw, self.bounds)]
            self._raw = None   # the scaled blocks keep the lineage
        return self._xf

    def set_scale(self, scale):
        self.scale = scale

    def reset(self):
        self._yf = [None] * len(self.bounds)

    def map(self, fn, block_args=None, common=(), *, use_x=True, use_carry=False, store=False,
            blocks=None, combine=None):
        blocks = range(len(self.bounds)) if blocks is None else blocks
        with self._cluster_errors(), self.progress(blocks) as bar:
            return self._map(fn, block_args, common, use_x, use_carry, store, blocks, combine,
                             self._deadline(), bar)

    def _map(self, fn, block_args, common, use_x, use_carry, store, blocks, combine, deadline,
             bar):
        xf = self._blocks()
        common = tuple(self.client.submit(_identity, c, pure=True)
                       if _shipped_bytes(c) > _SCATTER_BYTES else c for c in common)
        results = []
        for b in blocks:
            args = () if block_args is None else tuple(block_args[b])
            f = self.client.submit(_on_worker, fn, self.n_threads, xf[b] if use_x else None,
                                   self._yf[b] if use_carry else None, *args, *common,
                                   pure=False)
            if store:
                self._yf[b] = self.client.submit(_merge, self._yf[b], f, pure=False)
                f = self.client.submit(_second, f, pure=False)
            if not bar.disable:   # samples done, as the blocks finish
                s, e = self.bounds[b]
                f.add_done_callback(lambda _, rows=e - s: bar.update(rows))
            results.append(f)
        if combine is None:
            return self._gather(results, deadline)
        # fold in block order, a few results at a time: the client never holds all the
        # per-block sums (M x N each for Stage 3), and the rounding does not depend on timing
        acc = None
        for i in range(0, len(results), _FOLD_BATCH):
            for r in self._gather(results[i:i + _FOLD_BATCH], deadline):
                acc = r if acc is None else combine(acc, r)
            results[i:i + _FOLD_BATCH] = [None] * len(results[i:i + _FOLD_BATCH])
        return acc

    def close(self):
        self._xf = None
        self._raw = None
        self._yf = [None] * len(self.bounds)


def _predict_block(block, est, reject):
    return est.predict(block, reject=reject)


def _proba_block(block, est):
    return est.predict_proba(block)


def _transform_block(block, est):
    return est.transform(block)


def _score_block(block, est):
    return est.score(block)


class NTClustering(_NTClustering):
    """:class:`ntnumba.NTClustering` fitted on a ``dask.distributed`` cluster.

    Same parameters, algorithm and defaults as :class:`ntnumba.NTClustering` (see there). The
    fit runs on the active ``distributed.Client`` (or ``fit(X, client=...)``): Stage 1 on each
    block of rows where it lives, the Stage-2/3 sums reduced across blocks, the small updates on
    the client, by the same driver as the in-memory fit (``warm_start`` included). The
    initialisation uses a reference sample of ``min(n_samples, 20000)`` rows drawn at random
    (seeded by ``random_state``; all rows when there are not more): for ``n_samples <= 20000``
    the result equals the in-memory fit up to rounding. With ``assign="graph"`` the graph
    partition is computed on the reference sample and the other rows are labelled by the k-NN
    vote of ``predict``. See ``docs/scaling.md``.

    Attributes
    ----------
    labels_, similarity_labels_ : dask.array.Array of shape (n_samples,)
        As in :class:`ntnumba.NTClustering`, chunked like the rows of ``X``.
    components_, dissimilarity_, similarity_, objective_history_, n_iter_, scale_ : ndarray
        As in :class:`ntnumba.NTClustering`.

    Examples
    --------
    >>> import numpy as np, dask.array as da
    >>> from distributed import Client, LocalCluster
    >>> from ntnumba.dask import NTClustering
    >>> rng = np.random.default_rng(0)
    >>> X = np.repeat(5.0 * rng.standard_normal((2, 6)), 30, axis=0) + rng.standard_normal((60, 6))
    >>> with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as cluster, \\
    ...         Client(cluster):
    ...     model = NTClustering(2, n_components=12, assign="objective", init="k-means++",
    ...                          max_iter=3, random_state=0).fit(da.from_array(X, chunks=20))
    ...     labels = model.labels_.compute()
    ...     Xd = da.from_array(X, chunks=20)
    ...     same = bool((model.predict(Xd).compute() == labels).all())
    ...     proba = model.predict_proba(Xd).compute()
    ...     codes = model.transform(Xd).compute()
    ...     score = model.score(Xd)
    >>> labels.shape, len(set(labels[:30])), len(set(labels[30:])), same
    ((60,), 1, 1, True)
    >>> proba.shape, codes.shape, bool(score <= 0)
    ((60, 2), (60, 12), True)
    >>> import os, tempfile, ntnumba
    >>> path = model.save(os.path.join(tempfile.mkdtemp(), "m"))   # as to_local().save
    >>> bool((ntnumba.load(path).predict(X) == model.to_local().predict(X)).all())
    True
    """

    def fit(self, X, y=None, *, callback=None, client=None, timeout=None):
        """Fit on the cluster; see :meth:`ntnumba.NTClustering.fit`.

        Parameters
        ----------
        X : dask.array.Array or array-like of shape (n_samples, n_features)
            NumPy input is split into blocks of 10000 rows. Not modified.
        y : Ignored
        callback : callable, optional
            As in :meth:`ntnumba.NTClustering.fit`.
        client : distributed.Client, optional
            Default: the active client.
        timeout : float, optional
            Seconds a pass over the blocks may wait for its results (one pass is a fraction
            of an iteration). Past it the fit stops with :class:`ClusterError` naming the
            workers still busy: the bound for a stopped or hung worker, which dask itself
            declares dead only after ``distributed.scheduler.worker-ttl`` (5 minutes by
            default). None: wait as long as dask does. A worker that dies is recovered
            without it (its tasks are recomputed elsewhere).

        Returns
        -------
        self : NTClustering

        Raises
        ------
        ClusterError
            The cluster failed the fit (a ``RuntimeError``): the message names the cause. The
            estimator keeps its previous state.

        Examples
        --------
        >>> import numpy as np
        >>> from distributed import Client, LocalCluster
        >>> from ntnumba.dask import NTClustering
        >>> X = np.random.default_rng(0).standard_normal((40, 4))
        >>> with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as c, \\
        ...         Client(c) as client:
        ...     model = NTClustering(2, n_components=8, assign="objective", max_iter=2,
        ...                          random_state=0).fit(X, client=client)
        >>> model.n_iter_
        2
        """
        be = DaskBackend(_client(client), X, timeout=timeout)
        try:
            return fit_source(self, be, callback)
        finally:
            be.close()

    def _set_fitted(self, attrs, fitted, checked=None, src=None):
        """The fitted state, with a plain local model for predictions and ``labels_`` as dask
        arrays chunked like the rows of ``X``."""
        loc = _NTClustering(**self.get_params())
        set_fitted(loc, *fitted.portable(attrs))
        attrs["_local_"] = loc
        if src is not None:
            chunks = (src.X.chunks[0],)
            attrs["labels_"] = da.from_array(attrs["labels_"], chunks=chunks)
            attrs["similarity_labels_"] = da.from_array(attrs["similarity_labels_"],
                                                        chunks=chunks)
        set_fitted(self, attrs, fitted, checked)

    def partial_fit(self, X, y=None, *, forget=1.0):
        """Not distributed: use :meth:`ntnumba.NTClustering.partial_fit` on the client.

        Parameters
        ----------
        X : array-like
        y : Ignored
        forget : float

        Raises
        ------
        NotImplementedError
            Always.

        Examples
        --------
        >>> from ntnumba.dask import NTClustering
        >>> NTClustering(2).partial_fit([[0.0, 1.0]])
        Traceback (most recent call last):
        ...
        NotImplementedError: ntnumba.dask.NTClustering.partial_fit: ...
        """
        raise NotImplementedError(
            "ntnumba.dask.NTClustering.partial_fit: a stream of chunks is processed on the "
            "client; use ntnumba.NTClustering.partial_fit (e.g. on chunk.compute())")

    def _local(self):
        if not hasattr(self, "_local_"):
            from sklearn.exceptions import NotFittedError
            raise NotFittedError("This ntnumba.dask.NTClustering instance is not fitted yet; "
                                 "call fit first")
        return self._local_

    def to_local(self):
        """The fitted model as a plain :class:`ntnumba.NTClustering` (e.g. to ``save`` it).

        Its attributes are those of the in-memory (chunked) fit: ``labels_`` and
        ``similarity_labels_`` as NumPy arrays of every training row (computed from the dask
        arrays), ``outlier_scores_``, ``probabilities_`` and ``initial_labels_`` of every
        row, and with ``assign="graph"`` and more than 20000 training rows the reference
        sample ``predict`` votes with. A new model at every call, with its own copies of the
        arrays and of the fitted state: fitting it or changing its arrays in place leaves this
        one as it is (only the reference rows ``predict`` votes with, a private array, are
        shared).

        Returns
        -------
        ntnumba.NTClustering

        Examples
        --------
        >>> import numpy as np
        >>> from distributed import Client, LocalCluster
        >>> from ntnumba.dask import NTClustering
        >>> X = np.random.default_rng(0).standard_normal((40, 4))
        >>> with LocalCluster(n_workers=1, processes=False, dashboard_address=None) as c, \\
        ...         Client(c):
        ...     local = NTClustering(2, n_components=8, random_state=0).fit(X).to_local()
        >>> type(local).__module__, local.predict(X).shape
        ('ntnumba.estimators.clustering', (40,))
        """
        self._local()  # NotFittedError when not fitted
        attrs, fitted = fitted_parts(self)
        attrs.pop("_local_", None)
        lazy = [k for k, v in attrs.items() if isinstance(v, da.Array)]
        computed = dict(zip(lazy, dask.compute(*[attrs[k] for k in lazy])))
        # the computed arrays are new already; the reference rows (up to REFERENCE_SIZE rows,
        # private) are shared; everything else is copied
        ref = fitted.ref_X
        memo = {} if ref is None else {id(ref): ref}
        attrs, fitted = copy.deepcopy(
            ({k: v for k, v in attrs.items() if k not in computed}, fitted), memo)
        attrs.update(computed)
        local = _NTClustering(**self.get_params())
        set_fitted(local, attrs, fitted)
        return local

    def predict(self, X, reject=None):
        """Cluster of each sample (see :meth:`ntnumba.NTClustering.predict`).

        Parameters
        ----------
        X : dask.array.Array or array-like of shape (n_samples, n_features)
        reject : None, float or "auto", default None

        Returns
        -------
        labels : dask.array.Array (for dask input) or ndarray of shape (n_samples,)

        Examples
        --------
        See :class:`NTClustering`.
        """
        loc = self._local()
        if isinstance(X, da.Array):
            X = _as_dask(X)
            return X.map_blocks(_predict_block, _block_arg(loc), reject, dtype=np.int64,
                                drop_axis=1, meta=np.empty((0,), dtype=np.int64))
        return loc.predict(X, reject=reject)

    def predict_proba(self, X):
        """Soft assignment of each sample (see :meth:`ntnumba.NTClustering.predict_proba`).

        Parameters
        ----------
        X : dask.array.Array or array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : dask.array.Array (for dask input) or ndarray of shape (n_samples, n_clusters)

        Examples
        --------
        See :class:`NTClustering`.
        """
        loc = self._local()
        if isinstance(X, da.Array):
            X = _as_dask(X)
            return X.map_blocks(_proba_block, _block_arg(loc), dtype=np.float64,
                                chunks=(X.chunks[0], (loc.n_clusters,)),
                                meta=np.empty((0, 0), dtype=np.float64))
        return loc.predict_proba(X)

    def set_output(self, *, transform=None):
        """Only the default container: :meth:`transform` returns dask arrays for dask input.

        For a dask DataFrame use ``dask.dataframe.from_dask_array(model.transform(X),
        columns=model.get_feature_names_out())``.

        Parameters
        ----------
        transform : {"default"} or None

        Returns
        -------
        self : NTClustering

        Examples
        --------
        >>> from ntnumba.dask import NTClustering
        >>> NTClustering(2).set_output(transform="default").n_clusters
        2
        """
        if transform not in (None, "default"):
            raise ValueError(f"set_output: ntnumba.dask.NTClustering supports only "
                             f"transform='default' (dask arrays), got {transform!r}; use "
                             "dask.dataframe.from_dask_array(model.transform(X), "
                             "columns=model.get_feature_names_out())")
        return super().set_output(transform=transform)

    def transform(self, X):
        """The assigned NT representations (see :meth:`ntnumba.NTClustering.transform`).

        Parameters
        ----------
        X : dask.array.Array or array-like of shape (n_samples, n_features)

        Returns
        -------
        Y : dask.array.Array (for dask input) or ndarray of shape (n_samples, n_components)

        Examples
        --------
        See :class:`NTClustering`.
        """
        loc = self._local()
        if isinstance(X, da.Array):
            X = _as_dask(X)
            M = loc.components_.shape[0]
            return X.map_blocks(_transform_block, _block_arg(loc), dtype=loc.components_.dtype,
                                chunks=(X.chunks[0], (M,)),
                                meta=np.empty((0, 0), dtype=loc.components_.dtype))
        return loc.transform(X)

    def score(self, X, y=None):
        """Opposite of the summed per-sample cost (see :meth:`ntnumba.NTClustering.score`).

        Parameters
        ----------
        X : dask.array.Array or array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        score : float

        Examples
        --------
        See :class:`NTClustering`.
        """
        loc = self._local()
        if isinstance(X, da.Array):
            X = _as_dask(X)
            est = _block_arg(loc)
            parts = [dask.delayed(_score_block)(b, est) for b in X.to_delayed().ravel()]
            return float(sum(dask.compute(*parts)))
        return loc.score(X)

    def save(self, path):
        """Save the fitted model (as :meth:`to_local` then :meth:`ntnumba.NTClustering.save`).

        Parameters
        ----------
        path : str or path-like

        Returns
        -------
        path : str

        Examples
        --------
        See :class:`NTClustering`.
        """
        return self.to_local().save(path)
