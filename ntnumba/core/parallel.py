"""Threads of this process: Stage 1's sample blocks and the large matrix products.

One pool of Python threads per process serves both. Its size follows numba's thread count
(:func:`numba.get_num_threads`, which numba keeps per thread), the one knob of the package's
parallelism.

Large products are split by rows and each block is a separate single-thread BLAS call on these
threads (:func:`matmul`), when the BLAS library is limited to one thread around them. The fit
sets that limit (:data:`ntnumba.core.parallel.BLAS_THREADS`). OpenBLAS's own worker threads keep
spinning after a call and then compete with Stage 1's threads for the cores. Threads that return to
this pool do not.

The split of :func:`matmul` follows the :func:`blas_limit` contexts of the calling thread only
(a context variable). The process-wide BLAS thread count is reference-counted over the open
contexts of every thread (the smallest limit holds until the last exits), so two fits in two
threads make the same BLAS calls as each alone. OpenBLAS is set through
``openblas_set_num_threads_local`` when it has it: the global setter is ignored from a non-main
thread once the main thread has set it (``docs/reliability.md``, "Determinism").
"""
import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext

import numpy as np
from numba import get_num_threads

_POOL = {}  # (pid, worker count) -> ThreadPoolExecutor
_POOL_LOCK = threading.Lock()
_CONTROLLER = None
# depth of the blas_limit(1) contexts of this thread (copied into the pool tasks it submits)
_SERIAL = contextvars.ContextVar("ntnumba_blas_serial", default=0)
_LIBS = None  # (OpenBLAS setters openblas_set_num_threads_local, prefixes of the other libs)
# the BLAS setting is process-wide: one entry per blas_limit context open in any thread
_BLAS_LOCK = threading.Lock()
_BLAS_HOLDERS = []   # the limits requested by the open contexts
_BLAS_STATE = {"limiter": None, "limit": None, "original": None}
# Products of fewer multiply-adds than this run as one call (the split costs ~50 us).
_MIN_SPLIT = 1 << 23
_BLOCK_ROWS = 128   # a split product has blocks of at least this many rows
_MAX_BLOCKS = 16    # and at most this many blocks


def pool(nworkers):
    """The executor with ``nworkers`` threads of this process (a forked child, whose copy of
    the parent's executor has no threads, gets its own)."""
    key = (os.getpid(), nworkers)
    with _POOL_LOCK:
        ex = _POOL.get(key)
        if ex is None:
            ex = _POOL[key] = ThreadPoolExecutor(max_workers=nworkers,
                                                 thread_name_prefix="ntnumba")
        return ex


_RUN = set()  # the code of the functions run_blocks has run


def run_blocks(fn, bounds, nthreads):
    """Call ``fn(bounds[b], bounds[b + 1])`` for every block ``b`` on ``nthreads`` threads.

    This thread and ``nthreads - 1`` pool threads take blocks from a queue until none is left
    (dynamic scheduling: a thread that loses its core takes fewer blocks). ``fn`` must release
    the GIL to run in parallel (a ``nogil`` numba kernel or a BLAS call). The first exception
    is raised after every thread has stopped.
    """
    nblocks = len(bounds) - 1
    code = getattr(fn, "__code__", None)
    if nblocks > 1 and code not in _RUN:  # first call: its kernels compile in this thread alone
        _RUN.add(code)
        fn(bounds[0], bounds[1])
        bounds, nblocks = bounds[1:], nblocks - 1
    nthreads = max(1, min(int(nthreads), nblocks))
    if nthreads == 1:
        for b in range(nblocks):
            fn(bounds[b], bounds[b + 1])
        return
    queue = iter(range(nblocks))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                b = next(queue, None)
            if b is None:
                return
            fn(bounds[b], bounds[b + 1])

    futures = [_submit(pool(nthreads - 1), worker) for _ in range(nthreads - 1)]
    try:
        worker()
    finally:
        errors = [f.exception() for f in futures]
    for err in errors:
        if err is not None:
            raise err


def _submit(executor, fn, *args):
    """``executor.submit(fn, *args)`` run in a copy of this thread's context (its policy)."""
    return executor.submit(contextvars.copy_context().run, fn, *args)


def serial():
    """True inside a :func:`blas_limit` (1) context of this thread: :func:`matmul` splits."""
    return _SERIAL.get() > 0


class _Done:
    """A finished call with the interface of a future (``result()``)."""

    def __init__(self, fn, args):
        self._value = fn(*args)

    def result(self):
        return self._value


def background(fn, *args):
    """Start ``fn(*args)`` on a pool thread while this thread goes on; returns a future.

    Only inside :func:`blas_limit` with one BLAS thread and with more than one numba thread
    (two single-thread LAPACK calls then share the cores); otherwise ``fn`` runs here, now.
    Call ``result()`` before leaving the ``blas_limit`` context.
    """
    if serial() and get_num_threads() > 1:
        return _submit(pool(get_num_threads() - 1), fn, *args)
    return _Done(fn, args)


def run_ranges(fn, n, blocks_per_thread=4, nthreads=None):
    """``fn(start, stop)`` over ``range(n)`` cut into ``blocks_per_thread`` blocks per thread,
    run by :func:`run_blocks` on ``nthreads`` threads (default: numba's thread count); ``fn``
    should release the GIL. One thread makes one call ``fn(0, n)``."""
    nthreads = get_num_threads() if nthreads is None else max(int(nthreads), 1)
    if nthreads == 1:
        fn(0, n)
        return
    nblocks = max(1, min(n, blocks_per_thread * nthreads))
    run_blocks(fn, [(b * n) // nblocks for b in range(nblocks + 1)], nthreads)


def _controller():
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController
        _CONTROLLER = ThreadpoolController()
    return _CONTROLLER


def _blas_libs():
    """(OpenBLAS ``openblas_set_num_threads_local`` functions, prefixes of the other BLAS
    libraries) of the BLAS libraries loaded."""
    global _LIBS
    if _LIBS is None:
        local, shared = [], []
        for lib in _controller().lib_controllers:
            if lib.user_api != "blas":
                continue
            setter = getattr(getattr(lib, "dynlib", None), "openblas_set_num_threads_local",
                             None)
            if lib.internal_api == "openblas" and setter is not None:
                local.append(setter)
            else:
                shared.append(lib.prefix)
        _LIBS = (local, shared)
    return _LIBS


def _apply_blas_limit():
    """Set the BLAS libraries to the smallest limit the open contexts request (under
    _BLAS_LOCK); restore their original setting when none is open."""
    local, shared = _blas_libs()
    want = min(_BLAS_HOLDERS) if _BLAS_HOLDERS else None
    st = _BLAS_STATE
    if want == st["limit"]:
        return
    if want is None:
        for f, old in zip(local, st["original"]):
            f(old)
        if st["limiter"] is not None:
            st["limiter"].restore_original_limits()
        st["limiter"] = st["original"] = None
    else:
        previous = [f(want) for f in local]
        if st["original"] is None:
            st["original"] = previous
        if shared:
            limiter = _controller().limit(limits={prefix: want for prefix in shared})
            if st["limiter"] is None:
                st["limiter"] = limiter  # the one that holds the original setting
    st["limit"] = want


@contextmanager
def blas_limit(n):
    """Context limiting the BLAS libraries to ``n`` threads (threadpoolctl, one controller).

    Inside ``blas_limit(1)``, :func:`matmul` splits large products over numba's threads (in
    this thread only). The BLAS setting is process-wide: while contexts of several threads
    are open, the smallest limit they ask for holds, and the original setting returns when the
    last one exits (one thread's exit never lifts another's limit).
    """
    n = int(n)
    with _BLAS_LOCK:
        _BLAS_HOLDERS.append(n)
        try:
            _apply_blas_limit()
        except BaseException:
            _BLAS_HOLDERS.remove(n)
            raise
    token = _SERIAL.set(_SERIAL.get() + 1) if n == 1 else None
    try:
        yield
    finally:
        if token is not None:
            _SERIAL.reset(token)
        with _BLAS_LOCK:
            _BLAS_HOLDERS.remove(n)
            _apply_blas_limit()


def matmul(a, b, out=None):
    """``a @ b`` for 2-D arrays, the rows of ``a`` split over numba's threads.

    The split is used only inside :func:`blas_limit` with one BLAS thread, for products of at
    least ``2^23`` multiply-adds and 256 rows; otherwise this is ``np.matmul(a, b, out=out)``.
    The row blocks (at most 16, of at least 128 rows) depend on the shapes only, and each is one
    BLAS call: the result is bitwise the same on any number of threads (it can differ from the
    unsplit product in the last bits).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.core.parallel import blas_limit, matmul
    >>> a, b = np.ones((300, 200)), np.ones((200, 400))
    >>> with blas_limit(1):
    ...     c = matmul(a, b)
    >>> c.shape, float(c[0, 0])
    ((300, 400), 200.0)
    """
    n, k = a.shape
    m = b.shape[1]
    if not serial() or n < 2 * _BLOCK_ROWS or n * k * m < _MIN_SPLIT:
        return np.matmul(a, b, out=out)
    if out is None:
        out = np.empty((n, m), dtype=np.result_type(a.dtype, b.dtype))
    # the blocks depend on the shape only, not on the thread count: the same BLAS calls, hence
    # the same bits, on any number of threads (one thread runs them one after the other)
    nblocks = min(_MAX_BLOCKS, n // _BLOCK_ROWS)
    bounds = [(i * n) // nblocks for i in range(nblocks + 1)]

    def block(start, stop):
        np.matmul(a[start:stop], b, out=out[start:stop])

    run_blocks(block, bounds, get_num_threads())
    return out


# BLAS threads during an iteration: the numba kernels run on every core; the BLAS calls between
# them (X A^T, Y^T X, the Stage-3 products) run serially. On the shared 2-core machine two
# OpenBLAS threads next to numba's OpenMP workers made one iteration 4.5x slower (3.7 s vs
# 0.8 s, docs/performance.md). None: leave the BLAS thread count alone.
BLAS_THREADS = 1


def blas_context():
    """The fit's BLAS thread policy: a context with ``BLAS_THREADS`` BLAS threads (``None``:
    the BLAS setting is left alone)."""
    if BLAS_THREADS is None:
        return nullcontext()
    return blas_limit(BLAS_THREADS)
