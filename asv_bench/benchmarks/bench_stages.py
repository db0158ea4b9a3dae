"""Time of each stage and of one full iteration (Stages 1-3 and the objective), and one
iteration against the product ``Q = X A^T``."""
import time

import numba
import numpy as np

from .common import DTYPES, SIZES, THREADS, Threads, stage1_input, stage_inputs, warm_up


class Stage1(Threads):
    """Candidates and assignment (``ntnumba.kernels.assign``)."""
    params = [SIZES, THREADS, DTYPES]
    param_names = ["size", "threads", "dtype"]
    timeout = 600

    def setup(self, size, threads, dtype):
        warm_up()
        self.f = stage1_input(size, dtype)
        self.g = stage1_input(size, dtype, "stage1_pruned")
        self.f()  # compiled for this size's shapes/dtype before timing
        self.set_threads(threads)

    def time_assign(self, size, threads, dtype):
        self.f()

    def time_assign_pruned(self, size, threads, dtype):
        """As the fit runs it: ``prune=True`` skips candidates that cannot win."""
        self.g()


class _Stage(Threads):
    params = [SIZES, THREADS]
    param_names = ["size", "threads"]
    timeout = 600
    key = None

    def setup(self, size, threads):
        warm_up()
        self.f = stage_inputs(size)[self.key]
        self.f()
        self.set_threads(threads)


class Stage2(_Stage):
    """Update of tau and nu (``ntnumba.kernels.update_theta``)."""
    key = "stage2"

    def time_update_theta(self, size, threads):
        self.f()


class Stage3(_Stage):
    """Update of A from the iteration's statistics (``ntnumba.kernels.update_transform``), as
    a fit calls it."""
    key = "stage3"

    def time_update_transform(self, size, threads):
        self.f()


class Iteration(_Stage):
    """One full iteration of the fit (Stages 1-3 and the objective pass: ``fit_iteration`` of
    the repository's ``benchmarks/stages.py``)."""
    key = "iteration"

    def time_iteration(self, size, threads):
        self.f()


class PaperIteration(Threads):
    """One iteration of the paper's algorithm and the product ``Q = X A^T`` in the same class
    (the problem of each size, all numba threads): ``track_iteration_over_qax`` is the cost of
    an iteration in products, from medians of the two timed alternately in one process, so that
    the machine's load cancels. COIL-20 at the paper's size: n = 1440, N = 500, M = 2100,
    C = 20, Cs = 2 (target <= 2, goal 1.5; the parts: ``python -m benchmarks.bench
    --breakdown``, docs/research/paper-iteration-speed.md)."""
    params = [SIZES]
    param_names = ["size"]
    timeout = 600
    repeat_ratio = 7

    def setup(self, size):
        warm_up()
        calls = stage_inputs(size)
        self.iteration, self.qax = calls["iteration"], calls["qax"]
        self.set_threads(numba.config.NUMBA_NUM_THREADS)
        self.iteration()
        self.qax()

    def time_iteration(self, size):
        self.iteration()

    def time_qax(self, size):
        """``Q = X A^T`` as the fit computes it."""
        self.qax()

    def track_iteration_over_qax(self, size):
        times = {"iteration": [], "qax": []}
        for _ in range(self.repeat_ratio):
            for key, f in (("iteration", self.iteration), ("qax", self.qax)):
                t = time.perf_counter()
                f()
                times[key].append(time.perf_counter() - t)
        return float(np.median(times["iteration"]) / np.median(times["qax"]))

    track_iteration_over_qax.unit = "iteration / product"
