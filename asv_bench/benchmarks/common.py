"""Problems, sizes and thread control shared by the benchmark modules.

Sizes: ``tiny`` (every benchmark in seconds; the smoke test), ``coil`` (COIL-20 at the paper's
size: n = 1440, N = 500, M = 2100, Cd = 20, Cs = 2) and ``large`` (COIL-20 at 32x32, N = 1024,
M = 4200), the last only with ``NTNUMBA_BENCH_LARGE=1``. ``NTNUMBA_BENCH_SIZES=tiny`` (comma
list) restricts the sizes, e.g. for a quick local run. The problems and the stage callables are
those of ``python -m benchmarks.bench`` (the repository's ``benchmarks/stages.py``, public API
of ntnumba only).
"""
import functools
import importlib.util
import os
import sys
from pathlib import Path

import numba
import numpy as np


def _harness(name):
    """The module ``name`` of the repository's ``benchmarks/`` folder, loaded from its file:
    asv imports this folder as the package ``benchmarks``, which hides the repository's."""
    key = f"ntnumba_harness_{name}"
    if key not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(key, path)
        sys.modules[key] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[key])
    return sys.modules[key]


#: the problems and stage callables of ``python -m benchmarks.bench``
stages = _harness("stages")


def sizes():
    env = os.environ.get("NTNUMBA_BENCH_SIZES")
    if env:
        return [s.strip() for s in env.split(",") if s.strip()]
    out = ["tiny", "coil"]
    if os.environ.get("NTNUMBA_BENCH_LARGE", "") not in ("", "0"):
        out.append("large")
    return out


SIZES = sizes()
THREADS = sorted({1, numba.config.NUMBA_NUM_THREADS})
DTYPES = ["float64", "float32"]


@functools.lru_cache(maxsize=None)
def problem(size):
    """The problem of ``size`` (``benchmarks/stages.py``); cached per process."""
    return stages.problem(size)


@functools.lru_cache(maxsize=None)
def stage_inputs(size):
    """Callables of the stages on the problem of ``size``."""
    return stages.stage_calls(problem(size))


@functools.lru_cache(maxsize=None)
def stage1_input(size, dtype, which="stage1"):
    return stages.stage_calls(problem(size), np.dtype(dtype))[which]


def warm_up():
    """Compile every kernel on tiny data (both dtypes), outside any timed method."""
    stage_inputs("tiny")["iteration"]()
    for dt in DTYPES:
        stage1_input("tiny", dt)()


class Threads:
    """Set numba's thread count (and the fit's BLAS thread count) in setup, restore them in
    teardown."""

    def set_threads(self, n):
        self._old_threads = numba.get_num_threads()
        numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))
        self._blas = stages.blas_limit()

    def teardown(self, *args):
        if hasattr(self, "_old_threads"):
            numba.set_num_threads(self._old_threads)
        if hasattr(self, "_blas"):
            self._blas.restore_original_limits()
