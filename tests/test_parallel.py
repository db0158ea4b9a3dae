"""The process's threads: block scheduling and the row-split products (ntnumba/core/parallel.py)."""
import functools
import threading

import numba
import numpy as np
import pytest
from numba import njit

from ntnumba.core import parallel as _parallel
from ntnumba.model import stage1 as _stage1
from ntnumba.core.parallel import blas_limit, matmul, run_blocks


@pytest.mark.parametrize("nthreads", [1, 2, 3, 8])
def test_run_blocks_calls_every_block_once(nthreads):
    bounds = [0, 3, 3, 10, 11, 20]
    seen, lock = [], threading.Lock()

    def fn(a, b):
        with lock:
            seen.append((a, b))

    run_blocks(fn, bounds, nthreads)
    assert sorted(seen) == list(zip(bounds[:-1], bounds[1:]))


def test_run_blocks_raises_the_error_of_a_block():
    def fn(a, b):
        if a == 4:
            raise ValueError("block 4")

    with pytest.raises(ValueError, match="block 4"):
        run_blocks(fn, [0, 2, 4, 6, 8], 2)


@pytest.mark.parametrize("shape", [(700, 300, 90), (41, 2000, 300)])
def test_matmul_split_equals_numpy(shape, monkeypatch):
    n, k, m = shape
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, k))
    b = rng.standard_normal((k, m))
    ref = a @ b
    calls = []
    real = _parallel.run_blocks
    monkeypatch.setattr(_parallel, "run_blocks", lambda *x: calls.append(1) or real(*x))
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        with blas_limit(1):
            c = matmul(a, b)
            ct = matmul(a.T.copy().T, b)  # a Fortran-ordered left factor
            out = np.full((n, m), np.nan)
            c_out = matmul(a, b, out=out)
            numba.set_num_threads(1)
            c_one = matmul(a, b)  # the same blocks one after the other: the same bits
    finally:
        numba.set_num_threads(old)
    assert c.flags.c_contiguous and c_out is out
    for x in (c, ct, c_out):
        np.testing.assert_allclose(x, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    np.testing.assert_array_equal(c_one, c)
    split = n >= 2 * _parallel._BLOCK_ROWS  # both shapes have enough multiply-adds
    assert len(calls) == (4 if split else 0)
    # outside blas_limit(1) (BLAS threads unknown): one BLAS call, no split
    calls.clear()
    np.testing.assert_allclose(matmul(a, b), ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    assert not calls


def test_blas_limit_nests_and_restores():
    from threadpoolctl import threadpool_info
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with blas_limit(1):
        assert _parallel._SERIAL.get() == 1 and _parallel.serial()
        with blas_limit(1):
            assert _parallel._SERIAL.get() == 2
        with blas_limit(2):
            assert _parallel._SERIAL.get() == 1
    assert _parallel._SERIAL.get() == 0 and not _parallel.serial()
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before


def test_background_runs_on_a_pool_thread_only_inside_blas_limit_1():
    where = []

    def fn(x):
        where.append(threading.current_thread() is threading.main_thread())
        return 2 * x

    assert _parallel.background(fn, 3).result() == 6
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        with blas_limit(1):
            assert _parallel.background(fn, 4).result() == 8
        split = numba.get_num_threads() > 1
    finally:
        numba.set_num_threads(old)
    assert where == [True, not split]


def test_kernels_without_a_python_wrapper_are_called_only_from_compiled_code():
    # ``quartic.internal_njit`` kernels have no CPython wrapper (less compilation): a call from
    # Python would crash the interpreter. Static check over the package, tests and benchmarks:
    # such a kernel is named only inside other compiled kernels.
    import ast
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[1]

    def decorators(fn):
        return {(d.func.id if isinstance(d, ast.Call) and isinstance(d.func, ast.Name)
                 else getattr(d, "id", "")) for d in fn.decorator_list}

    files = sorted((root / "ntnumba").rglob("*.py")) + sorted((root / "tests").glob("*.py")) \
        + sorted((root / "asv_bench" / "benchmarks").glob("*.py")) \
        + sorted((root / "docs").glob("*.py"))
    trees = {f: ast.parse(f.read_text()) for f in files}
    internal = {n.name for f, t in trees.items() if "ntnumba" in f.relative_to(root).parts
                for n in ast.walk(t) if isinstance(n, ast.FunctionDef)
                and "internal_njit" in decorators(n)}
    assert {"solve_ratio", "_level", "_first_sums2"} <= internal
    offenders = []
    for f, tree in trees.items():
        compiled = {id(x) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                    and decorators(n) & {"njit", "internal_njit"} for x in ast.walk(n)}
        # a Python function or method of the same name in this file is another function
        own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and not decorators(n) & {"njit", "internal_njit"}}
        for n in ast.walk(tree):
            if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in compiled:
                name = n.id if isinstance(n, ast.Name) else n.attr
                if name in internal and name not in own:
                    offenders.append(f"{f.name}:{n.lineno} {name}")
    assert not offenders


def test_stage1_and_predict_leave_the_blas_threads_as_they_were(monkeypatch):
    # assign computes its adjustment terms with one BLAS thread (its product split over the
    # pool) and the estimator's Stage 1 runs with the fit's BLAS setting; both restore it
    from threadpoolctl import threadpool_info

    from ntnumba import NTClustering
    from ntnumba.kernels import assign

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    rng = np.random.default_rng(0)
    X = rng.standard_normal((60, 6))
    before = blas_threads()
    assign(rng.standard_normal((30, 12)), rng.standard_normal((3, 12)),
           rng.standard_normal((2, 12)), 0.03, 0.03)
    model = NTClustering(3, n_components=12, assign="objective", init="k-means++",
                         max_iter=2, random_state=0).fit(X)
    labels = model.predict(X)
    assert blas_threads() == before
    monkeypatch.setattr(_parallel, "BLAS_THREADS", None)  # None: the setting is left alone
    np.testing.assert_array_equal(model.predict(X), labels)
    assert blas_threads() == before


def test_a_fit_gives_the_same_bits_on_one_and_on_two_threads():
    # large enough that the products of the iteration are split into row blocks
    from ntnumba import NTClustering
    rng = np.random.default_rng(1)
    X = np.repeat(rng.standard_normal((4, 80)), 80, axis=0) + rng.standard_normal((320, 80))
    fits = []
    for n_jobs in (1, 2):
        model = NTClustering(4, n_components=400, assign="objective", init="k-means++",
                             max_iter=2, tol=0, random_state=0, n_jobs=n_jobs).fit(X)
        fits.append(model)
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    np.testing.assert_array_equal(fits[0].components_, fits[1].components_)
    np.testing.assert_array_equal(fits[0].objective_history_, fits[1].objective_history_)


def test_a_split_transposed_product_gives_the_same_bits_on_any_thread_count():
    # Ybar^T X at COIL-20 size: OpenBLAS's result for a row block of a transposed operand
    # depends on where the block starts, so the blocks must not depend on the thread count
    rng = np.random.default_rng(2)
    Y = rng.standard_normal((1440, 2100))
    X = rng.standard_normal((1440, 500))
    old = numba.get_num_threads()
    outs = []
    try:
        with blas_limit(1):
            for threads in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
                numba.set_num_threads(threads)
                outs.append(matmul(Y.T, X))
    finally:
        numba.set_num_threads(old)
    for other in outs[1:]:
        np.testing.assert_array_equal(other, outs[0])


# ------------------------------------------------------------------------------ concurrency
def _blas_threads():
    from threadpoolctl import threadpool_info
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_the_split_policy_belongs_to_the_thread_that_set_it(monkeypatch):
    """Another thread's blas_limit(1) does not make this thread's products split, and pool
    tasks submitted inside a context see that context."""
    calls = []
    real = _parallel.run_blocks
    monkeypatch.setattr(_parallel, "run_blocks",
                        lambda fn, bounds, n: (calls.append(len(bounds)), real(fn, bounds, n)))
    a, b = np.ones((512, 128)), np.ones((128, 256))   # 2^24 multiply-adds: splittable
    inside, release = threading.Event(), threading.Event()

    def holder():
        with blas_limit(1):
            inside.set()
            release.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    try:
        assert inside.wait(10)
        assert not _parallel.serial()
        np.testing.assert_array_equal(matmul(a, b), a @ b)
        assert calls == []                       # not split: this thread set no limit
        with blas_limit(1):
            matmul(a, b)
            assert len(calls) == 1               # split: this thread's own context
            assert _parallel._submit(_parallel.pool(1), _parallel.serial).result()
        assert not _parallel._submit(_parallel.pool(1), _parallel.serial).result()
    finally:
        release.set()
        t.join()


class _FakeController:
    """A BLAS library with one process-wide setting (as MKL or BLIS), for the bookkeeping."""

    def __init__(self):
        self.threads = 4

    def limit(self, limits):
        ctl, original = self, self.threads
        self.threads = min(limits.values())

        class Limiter:
            def restore_original_limits(self):
                ctl.threads = original
        return Limiter()


def test_a_process_wide_blas_limit_is_reference_counted_across_threads(monkeypatch):
    """One thread leaving its context keeps the limit of another thread's open context; the
    original setting returns when the last context exits."""
    fake = _FakeController()
    monkeypatch.setattr(_parallel, "_LIBS", ([], ["libfakeblas"]))
    monkeypatch.setattr(_parallel, "_BLAS_STATE", {"limiter": None, "limit": None,
                                                   "original": None})
    monkeypatch.setattr(_parallel, "_controller", lambda: fake)
    entered, leave_a, left_a, leave_b = (threading.Event() for _ in range(4))
    seen = {}

    def a():
        with blas_limit(1):
            entered.set()
            leave_a.wait(10)
        left_a.set()

    def b():
        entered.wait(10)
        with blas_limit(2):
            seen["both open"] = fake.threads
            leave_a.set()
            left_a.wait(10)
            seen["after A left"] = fake.threads
            leave_b.wait(10)

    threads = [threading.Thread(target=f) for f in (a, b)]
    for t in threads:
        t.start()
    left_a.wait(10)
    leave_b.set()
    for t in threads:
        t.join()
    assert seen == {"both open": 1, "after A left": 2}
    assert fake.threads == 4 and _parallel._BLAS_HOLDERS == []


def _concurrency_fits():
    rng = np.random.default_rng(5)
    X1 = np.repeat(rng.standard_normal((4, 64)), 150, axis=0) + rng.standard_normal((600, 64))
    X2 = np.repeat(rng.standard_normal((3, 48)), 200, axis=0) + rng.standard_normal((600, 48))
    return [(X1, dict(n_clusters=4, n_components=256, random_state=0)),
            (X2, dict(n_clusters=3, n_components=320, random_state=1))]


def _fit(X, kw):
    from ntnumba import NTClustering
    return NTClustering(assign="objective", init="k-means++", max_iter=3, tol=0, **kw).fit(X)


def _assert_same_fit(got, ref):
    for name in ("components_", "dissimilarity_", "similarity_", "labels_",
                 "objective_history_"):
        np.testing.assert_array_equal(getattr(got, name), getattr(ref, name), err_msg=name)


def test_a_fit_in_another_thread_equals_the_fit_in_the_main_thread():
    # after the main thread has set and restored the BLAS limit (any fit does), OpenBLAS's
    # global setter is ignored from other threads: their fits ran with two BLAS threads
    X, kw = _concurrency_fits()[0]
    ref = _fit(X, kw)
    out = []
    t = threading.Thread(target=lambda: out.append(_fit(X, kw)))
    t.start()
    t.join()
    _assert_same_fit(out[0], ref)


def test_two_fits_in_two_threads_equal_the_sequential_fits_bit_for_bit():
    jobs = _concurrency_fits()
    fit = _fit
    seq = [fit(X, kw) for X, kw in jobs]
    for _ in range(2):
        out = [None, None]
        go = threading.Barrier(2)

        def run(i):
            go.wait(10)
            out[i] = fit(*jobs[i])

        threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for ref, got in zip(seq, out):
            _assert_same_fit(got, ref)


# ------------------------------------------------------------ the same bits wherever arrays lie
# LLVM vectorises a fastmath reduction into several partial sums; when the loop also stores to
# an array, it adds a run-time check that the store does not overlap the arrays read and runs
# the plain loop (one sum, other bits) when they lie within a few vectors of each other. Where
# numba's allocator puts a kernel's scratch depends on the heap (thread, earlier calls): the
# float32 transform of a model and of its reloaded copy once differed by 1 ulp in three rows.
@njit
def _first_sums2_of(w, m, g, ki, v0, v1, zero):
    return _stage1._first_sums2(w, m, g, ki, v0, v1, zero)


def _placed(arrays, rng):
    """Copies of the 1-D ``arrays`` in one buffer, in a random order, with gaps of 0-39 entries."""
    buf = np.zeros(sum(a.size + 40 for a in arrays) + 16, dtype=arrays[0].dtype)
    out, pos = [None] * len(arrays), int(rng.integers(0, 16))
    for k in rng.permutation(len(arrays)):
        out[k] = buf[pos:pos + arrays[k].size]
        out[k][:] = arrays[k]
        pos += arrays[k].size + int(rng.integers(0, 40))
    return out


# Only _first_sums2 is run here. Before it was made loads-only, its check was LLVM's "difference"
# form (store and loads at least 128 bytes apart), which arrays lying close in one buffer fail:
# this test failed on that code. _fused_pass then also stored and summed in one loop, but LLVM
# guarded that loop with an exact-overlap check, which arrays that do not overlap never fail:
# no placement changed its bits, so a placement test of it could not fail. The compiled-code
# test below (test_no_fastmath_loop_both_stores_and_sums) is what guards _fused_pass.
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_first_sums_give_the_same_bits_wherever_their_arrays_lie(dtype):
    rng = np.random.default_rng(0)
    for M in (5, 10, 13):
        b, g, v0, v1 = rng.standard_normal((4, M)).astype(dtype)
        w, m = np.maximum(b, 0), (b > 0).astype(dtype)
        ki = (1.0 / (1.0 + rng.random(M))).astype(dtype)
        sums = set()
        for _ in range(60):
            sums.add(np.array(_first_sums2_of(*_placed([w, m, g, ki, v0, v1], rng),
                                              dtype(0)), dtype=dtype).tobytes())
        assert len(sums) == 1, M


@functools.lru_cache(maxsize=None)
def _typing_only_pipeline():
    """A numba compiler pipeline that stops after type inference (no code generation)."""
    from numba.core import compiler, compiler_machinery
    from numba.core.typed_passes import NopythonTypeInference

    @compiler_machinery.register_pass(mutates_CFG=False, analysis_only=True)
    class _StopAfterTyping(compiler_machinery.AnalysisPass):
        _name = "ntnumba_stop_after_typing"

        def __init__(self):
            compiler_machinery.AnalysisPass.__init__(self)

        def run_pass(self, state):
            raise compiler._EarlyPipelineCompletion(state.typemap)

    class _TypingOnly(compiler.CompilerBase):
        def define_pipelines(self):
            pm = compiler.DefaultPassBuilder.define_untyped_pipeline(self.state)
            pm.add_pass(NopythonTypeInference, "type inference")
            pm.add_pass(_StopAfterTyping, "stop after typing")
            pm.finalize()
            return [pm]

    return _TypingOnly


def _type_callees(disp, sig):
    """Numba's front end and type inference of ``disp`` for the argument types ``sig``.

    Typing a call compiles the called kernel for its argument types, or loads it from numba's
    cache, so the kernels ``disp`` calls get their signatures in this process. A kernel loaded
    from the cache is not typed, and neither are the kernels it calls: with a warm cache the
    kernels called only from compiled code have no signature until this runs on their callers.
    """
    from numba.core import compiler
    flags = compiler.Flags()
    disp.targetdescr.options.parse_as_flags(flags, disp.targetoptions)
    compiler.compile_extra(disp.targetdescr.typing_context, disp.targetdescr.target_context,
                           disp.py_func, sig, None, flags, {},
                           pipeline_class=_typing_only_pipeline())


def _fastmath_kernels_with_all_signatures(modules):
    """The fastmath dispatchers of ``modules``, each with every signature the process's calls of
    the modules' kernels reach (its callers are typed until nothing new turns up)."""
    disps = {}
    for mod in modules:
        for n, o in vars(mod).items():
            if isinstance(o, numba.core.registry.CPUDispatcher):
                assert disps.setdefault(n, o) is o, n  # one kernel per name
    fastmath = {n for n, o in disps.items() if o.targetoptions.get("fastmath")}
    calls = {n: set(o.py_func.__code__.co_names) & set(disps) for n, o in disps.items()}
    reach = set(fastmath)  # the kernels from which a fastmath kernel is reached
    while True:
        more = {n for n in disps if calls[n] & reach} - reach
        if not more:
            break
        reach |= more
    typed = set()
    while True:
        todo = [(n, sig) for n in reach if calls[n] & reach
                for sig in disps[n].signatures if (n, sig) not in typed]
        if not todo:
            break
        for n, sig in todo:
            _type_callees(disps[n], sig)
            typed.add((n, sig))
    return {n: disps[n] for n in fastmath}


@pytest.mark.slow
def test_no_fastmath_loop_both_stores_and_sums():
    # The kernels' scratch is allocated inside them, out of a test's reach: check the compiled
    # code instead, of every fastmath kernel of Stage 1 and of the theta step for every argument
    # types a fit of either dtype calls it with. A vectorised loop body that stores (plainly or
    # masked) and carries a floating-point vector accumulator is such a loop (the stores of a
    # loop that only adds elementwise are fine).
    import re

    from ntnumba import NTClustering
    from ntnumba.model import theta as _theta
    X = np.random.default_rng(0).standard_normal((40, 4))
    for dtype in (np.float32, np.float64):  # compiles (or loads) the entry kernels of both dtypes
        NTClustering(2, n_components=8, max_iter=2, random_state=0).fit(X.astype(dtype))
    kernels = _fastmath_kernels_with_all_signatures((_stage1, _theta))
    accumulator = re.compile(r"%vec\.phi[\w.]* = phi [a-z ]*<\d+ x (float|double)>")
    store = re.compile(r"store <\d+ x|llvm\.masked\.(store|scatter)")
    checked, offenders, sums = {}, [], 0
    for name, obj in kernels.items():
        # a fresh copy: numba does not show the code of kernels loaded from its cache
        fresh = numba.jit(**dict(obj.targetoptions, cache=False))(obj.py_func)
        for sig in obj.signatures:
            fresh.compile(sig)
            checked.setdefault(name, set()).add(str(sig))
        for ir in fresh.inspect_llvm().values():
            for block in re.split(r"\n(?=[\w.$-]+:)", ir):
                if block.startswith("vector.body") and accumulator.search(block):
                    sums += 1  # the pattern still finds the vectorised sums
                    if store.search(block):
                        offenders.append(name)
    # every fastmath kernel, a new one included, is inspected (13 today), for both dtypes where
    # it takes the data's dtype (_rho_sigma and _rho's second argument are always float64)
    assert set(checked) == set(kernels) and len(kernels) >= 13 and sums > 0
    for name, sigs in checked.items():
        assert any("float64" in s for s in sigs), name
        if name not in ("_rho_sigma",):
            assert any("float32" in s for s in sigs), name
    assert not offenders, offenders


def test_run_blocks_first_call_runs_one_block_alone():
    """The first call of a function compiles its kernels: its first block runs in this thread
    before the pool starts (two threads compiling took about 1 s more processor time); later
    calls share the blocks at once."""
    import threading
    import time

    from ntnumba.core.parallel import run_blocks
    events = []

    def fn(s, e):
        events.append(("start", s, threading.get_ident()))
        time.sleep(0.05)
        events.append(("end", s, threading.get_ident()))

    run_blocks(fn, [0, 1, 2, 3, 4], 2)
    assert events[:2] == [("start", 0, threading.get_ident()), ("end", 0, threading.get_ident())]
    assert sorted(e[1] for e in events if e[0] == "end") == [0, 1, 2, 3]
    events.clear()
    run_blocks(fn, [0, 1, 2, 3, 4], 2)   # the second call: two blocks at once
    assert [e[0] for e in events[:2]] == ["start", "start"]
