"""Threads of this process: Stage 1's sample blocks and the large matrix products.

One pool of Python threads per process serves both. Its size follows numba's thread count
(:func:`numba.get_num_threads`), the one knob of the package's parallelism.

Large products are split by rows and each block is a separate single-thread BLAS call on these
threads (:func:`matmul`), when the BLAS library is limited to one thread around them. The fit
sets that limit (:data:`ntnumba._driver.BLAS_THREADS`). OpenBLAS's own worker threads keep spinning
after a call and then compete with Stage 1's threads for the cores. Threads that return to this
pool do not.
"""
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np
from numba import get_num_threads

_POOL = {}  # (pid, worker count) -> ThreadPoolExecutor
_POOL_LOCK = threading.Lock()
_CONTROLLER = None
_SERIAL = [0]  # depth of the blas_limit(1) contexts in effect (the BLAS setting is global)
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


def run_blocks(fn, bounds, nthreads):
    """Call ``fn(bounds[b], bounds[b + 1])`` for every block ``b`` on ``nthreads`` threads.

    This thread and ``nthreads - 1`` pool threads take blocks from a queue until none is left
    (dynamic scheduling: a thread that loses its core takes fewer blocks). ``fn`` must release
    the GIL to run in parallel (a ``nogil`` numba kernel or a BLAS call). The first exception
    is raised after every thread has stopped.
    """
    nblocks = len(bounds) - 1
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

    futures = [pool(nthreads - 1).submit(worker) for _ in range(nthreads - 1)]
    try:
        worker()
    finally:
        errors = [f.exception() for f in futures]
    for err in errors:
        if err is not None:
            raise err


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
    if _SERIAL[0] > 0 and get_num_threads() > 1:
        return pool(get_num_threads() - 1).submit(fn, *args)
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


@contextmanager
def blas_limit(n):
    """Context limiting the BLAS libraries to ``n`` threads (threadpoolctl, one controller).

    Inside ``blas_limit(1)``, :func:`matmul` splits large products over numba's threads.
    """
    global _CONTROLLER
    if _CONTROLLER is None:
        from threadpoolctl import ThreadpoolController
        _CONTROLLER = ThreadpoolController()
    serial = int(n) == 1
    with _CONTROLLER.limit(limits=n, user_api="blas"):
        _SERIAL[0] += serial
        try:
            yield
        finally:
            _SERIAL[0] -= serial


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
    >>> from ntnumba._parallel import blas_limit, matmul
    >>> a, b = np.ones((300, 200)), np.ones((200, 400))
    >>> with blas_limit(1):
    ...     c = matmul(a, b)
    >>> c.shape, float(c[0, 0])
    ((300, 400), 200.0)
    """
    n, k = a.shape
    m = b.shape[1]
    if _SERIAL[0] == 0 or n < 2 * _BLOCK_ROWS or n * k * m < _MIN_SPLIT:
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
