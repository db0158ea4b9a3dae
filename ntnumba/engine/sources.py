"""Row blocks: where the rows of ``X`` live, and a map over them (see ``docs/scaling.md``).

The driver (:mod:`ntnumba.engine.loop`) runs every fit over a *row-block source*:
:class:`MemoryBlocks` (all of ``X`` as one block, :func:`memory_source`), :class:`LocalBackend`
(blocks of any sliceable array read one at a time, ``fit(X, chunk_size=...)``) or
:class:`ntnumba.dask.DaskBackend` (blocks of a dask array held on the workers).

A source has ``n``, ``N``, ``dtype``, ``bounds`` (the ``(start, stop)`` of each block) and
``scale``, computes ``max_abs()`` and ``mean_square(m)`` of the raw data (for ``scaling="rms"``),
and maps a module-level pass function over its blocks::

    source.map(fn, block_args, common, use_x=True, use_carry=False, store=False,
               blocks=None, combine=None)

calls ``fn(X_b, carry_b, *block_args[b], *common)`` for every block ``b`` (``X_b`` scaled by
``scale``; ``carry_b`` the dict a previous pass stored for the block). With ``store=True``
``fn`` returns ``(update, result)`` and ``update`` is merged into ``carry_b`` where the block
lives. The results come back in block order, or folded in block order by ``combine`` (so the
rounding never depends on timing). The pass functions are in :mod:`ntnumba.engine.passes`.
"""
import mmap
import os
import shutil
import sys
import tempfile

import numpy as np
from tqdm import tqdm

from ..core.validation import check_scalar


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
    """Rows ``start:stop`` of ``X`` (an array-like or a scipy.sparse matrix) as a new
    C-contiguous float array, checked and scaled.

    The input is never written to (a copy is always made).
    """
    Xk = X[start:stop]
    Xk = Xk.toarray() if hasattr(Xk, "toarray") else np.asarray(Xk)   # scipy.sparse: dense
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


def max_abs(Xk):
    """Largest absolute value of a block (the first pass of ``scaling="rms"``)."""
    return float(np.max(np.abs(Xk)))


def sum_square(Xk, m):
    """``sum((X / m)^2)`` of a block in float64 (the second pass of ``scaling="rms"``)."""
    Z = Xk / Xk.dtype.type(m) if Xk.dtype == np.float32 else Xk / m
    return float(np.sum(np.square(Z, dtype=np.float64)))


def block_rows(bounds, rows):
    """Sorted global row indices ``rows`` split by block: ``[(b, local_rows, lo, hi)]``."""
    out = []
    for b, (s, e) in enumerate(bounds):
        lo, hi = np.searchsorted(rows, [s, e])
        if hi > lo:
            out.append((b, np.ascontiguousarray(rows[lo:hi] - s, dtype=np.int64), lo, hi))
    return out


def take_rows(Xk, carry, rows):
    """Pass: the rows ``rows`` (local indices) of a block."""
    return Xk[rows]


class Blocks:
    """The map of a source whose blocks are reached from this process."""

    subsample = True   # above REFERENCE_SIZE rows the reference sample is drawn (driver)
    keep_q = False     # Q = X A^T is not kept between passes
    report = None      # the fit's loop.Report: a progress bar per pass over several blocks

    def progress(self, blocks):
        """The progress bar of a pass over ``blocks`` (samples done; ``with`` it)."""
        rows = sum(self.bounds[b][1] - self.bounds[b][0] for b in blocks)
        return (tqdm(disable=True) if self.report is None else
                self.report.bar(rows, "samples", len(blocks) > 1))

    def map(self, fn, block_args=None, common=(), *, use_x=True, use_carry=False, store=False,
            blocks=None, combine=None):
        out = []
        acc = None
        blocks = range(len(self.bounds)) if blocks is None else blocks
        with self.progress(blocks) as bar:
            for b in blocks:
                args = () if block_args is None else block_args[b]
                r = fn(self._x(b) if use_x else None, self._carry(b) if use_carry else None,
                       *args, *common)
                if store:
                    self._store(b, r[0])
                    r = r[1]
                if combine is None:
                    out.append(r)
                else:
                    acc = r if acc is None else combine(acc, r)
                r = None
                self._done()
                bar.update(self.bounds[b][1] - self.bounds[b][0])
        return out if combine is None else acc

    def take(self, rows=None):
        """The rows ``rows`` (sorted global indices; None: all) as one scaled array."""
        if rows is None:
            parts = self.map(take_rows, [(slice(None),)] * len(self.bounds))
        else:
            parts_ = block_rows(self.bounds, np.asarray(rows, dtype=np.int64))
            args = [None] * len(self.bounds)
            for b, r, _, _ in parts_:
                args[b] = (r,)
            parts = self.map(take_rows, args, blocks=[b for b, *_ in parts_])
        return np.concatenate(parts) if len(parts) > 1 else np.ascontiguousarray(parts[0])

    def _done(self):
        pass

    def close(self):
        pass


#: the in-memory fit keeps ``Q = X A^T`` and ``Y`` (two n x M arrays) in memory while they take
#: at most this many bytes; above, it runs over blocks of rows as ``fit(X, chunk_size=...)``
#: does (:func:`memory_source`). 10,000 x 100 blobs, M = 2100 (336 MB of Q and Y): in memory
#: 27.0 s and 827 MB above the process, over blocks 21.7 s and 75 MB (load 6); the paper's
#: data sets (at most 81 MB) stay in memory
MEMORY_BUDGET = 1 << 28
#: bytes of one block x M array of the blocks of :func:`memory_source`
BLOCK_BYTES = 1 << 24
#: bytes of the per-row arrays of one block of ``predict``, ``transform``, ``score`` and
#: ``predict_proba`` (rows ``X``, ``Q``, ``Y``, every candidate's scores); 10^5 x 50 rows,
#: default model: 4.5 GB peak RSS at once, 0.53 GB in blocks (benchmarks/predict_memory.py)
INFERENCE_BYTES = 1 << 26


def memory_source(X, n_components):
    """The row-block source of the in-memory fit of ``X`` (validated) with ``M = n_components``.

    :class:`MemoryBlocks` while ``Q`` and ``Y`` (``2 n M`` values) take at most
    ``MEMORY_BUDGET`` bytes; else :class:`LocalBackend` over blocks of ``BLOCK_BYTES`` per
    block x M array (``Y`` of a block in a temporary file between the passes): memory
    ``O(block M + M^2 + n k)`` instead of ``O(n M)``, the same iteration.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.engine.sources import memory_source
    >>> type(memory_source(np.zeros((100, 5)), 2100)).__name__
    'MemoryBlocks'
    >>> type(memory_source(np.zeros((10 ** 5, 5)), 2100)).__name__
    'LocalBackend'
    """
    item = np.dtype(X.dtype).itemsize
    if 2 * X.shape[0] * n_components * item <= MEMORY_BUDGET:
        return MemoryBlocks(X)
    return LocalBackend(X, max(1, BLOCK_BYTES // (n_components * item)))


class MemoryBlocks(Blocks):
    """All of ``X`` (validated, C-contiguous float) as one block in memory.

    Nothing is copied except once by ``set_scale`` (``X * scale``, the input unchanged); the
    block's carry (``Y``, and ``Q`` of the current ``A`` between iterations) stays here.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.engine.sources import MemoryBlocks
    >>> src = MemoryBlocks(np.ones((5, 2)))
    >>> src.bounds, src.map(lambda Xk, carry: float(Xk.sum()))
    ([(0, 5)], [10.0])
    """

    keep_q = True

    def __init__(self, X):
        self.X = X
        self.n, self.N = X.shape
        self.dtype = X.dtype
        self.bounds = [(0, self.n)]
        self.scale = 1.0
        self.reset()

    def set_scale(self, scale):
        self.scale = scale
        if scale != 1.0:
            self.X = self.X * self.dtype.type(scale)

    def max_abs(self):
        return max_abs(self.X)

    def mean_square(self, m):
        return sum_square(self.X, m) / (self.n * self.N)

    def reset(self):
        """Forget what the passes stored (a new start)."""
        self.carry = [{}]

    def take(self, rows=None):
        return self.X if rows is None else self.X[rows]

    def _x(self, b):
        return self.X

    def _carry(self, b):
        return self.carry[b]

    def _store(self, b, update):
        self.carry[b].update(update)


class LocalBackend(Blocks):
    """Blocks of rows of an array-like read one at a time; ``Y`` blocks in temporary files."""

    def __init__(self, X, chunk_size, tmp_dir=None):
        self.X, self.n, self.N, self.dtype = check_source(X)
        self.chunk_size = check_scalar(chunk_size, "chunk_size", low=1, integer=True)
        self.bounds = [(s, min(self.n, s + self.chunk_size))
                       for s in range(0, self.n, self.chunk_size)]
        self.scale = 1.0
        self._tmp_dir = tmp_dir
        self._dir = None

    def set_scale(self, scale):
        self.scale = scale

    def max_abs(self):
        return max(max_abs(read_block(self.X, s, e, self.dtype)) for s, e in self.bounds)

    def mean_square(self, m):
        return sum(sum_square(read_block(self.X, s, e, self.dtype), m)
                   for s, e in self.bounds) / (self.n * self.N)

    def reset(self):
        self.close()

    def _ypath(self, b):
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="ntnumba-y-", dir=self._tmp_dir)
        return os.path.join(self._dir, f"y{b}.npy")

    def _x(self, b):
        s, e = self.bounds[b]
        return read_block(self.X, s, e, self.dtype, self.scale)

    def _carry(self, b):
        path = self._ypath(b)
        return {"Y": np.load(path)} if os.path.exists(path) else {}

    def _store(self, b, update):
        if update.get("Y") is not None:
            np.save(self._ypath(b), update["Y"])

    def _done(self):
        _trim()

    def close(self):
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
