"""Smoke test of the benchmarks: every asv benchmark runs once at the tiny size (so the suite
never rots; CI does not run asv itself), the side-by-side script runs, and the NumPy reference
(``benchmarks/reference.py``) agrees with the kernels, with a fit and with the iteration the
benchmarks compose of the kernels (``benchmarks/stages.py``)."""
import dataclasses
import importlib
import importlib.util
import inspect
import itertools
import os
import pathlib
import re
import sys

import numpy as np
import pytest

from benchmarks import reference, stages
from ntnumba.kernels import assign, theta_objective, update_theta

ROOT = pathlib.Path(__file__).resolve().parents[1]
# every benchmark file of the asv suite, so that a new one is run here too
BENCH_MODULES = sorted(p.stem for p in (ROOT / "asv_bench" / "benchmarks").glob("bench_*.py"))
PREFIXES = ("time_", "peakmem_", "track_", "mem_")


@pytest.fixture(scope="module")
def asv_suite():
    """The asv suite's modules, its package imported as ``asv_benchmarks`` (asv imports it as
    ``benchmarks``, the name of the repository's own benchmarks package)."""
    os.environ["NTNUMBA_BENCH_SIZES"] = "tiny"
    folder = ROOT / "asv_bench" / "benchmarks"
    spec = importlib.util.spec_from_file_location(
        "asv_benchmarks", folder / "__init__.py", submodule_search_locations=[str(folder)])
    sys.modules["asv_benchmarks"] = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(sys.modules["asv_benchmarks"])
        yield [importlib.import_module(f"asv_benchmarks.{m}") for m in BENCH_MODULES]
    finally:
        for name in [n for n in sys.modules if n.split(".")[0] == "asv_benchmarks"]:
            del sys.modules[name]
        os.environ.pop("NTNUMBA_BENCH_SIZES", None)


def _classes(mod):
    for _, cls in inspect.getmembers(mod, inspect.isclass):
        if cls.__module__ == mod.__name__ and any(
                m.startswith(PREFIXES) for m in dir(cls)):
            yield cls


@pytest.mark.slow
def test_every_asv_benchmark_runs_once_at_tiny_size(asv_suite, monkeypatch):
    from asv_benchmarks.common import stages as loaded
    # the compile benchmark runs a fresh interpreter: replace it by a stub of the same shape
    monkeypatch.setattr(loaded, "_subprocess", lambda code, **kw: {"total": 1.0,
                                                                   "stage1_float64": 0.5,
                                                                   "import": 0.1})
    ran = []
    for mod in asv_suite:
        for cls in _classes(mod):
            params = getattr(cls, "params", [])
            if params and not isinstance(params[0], list):
                params = [params]
            for combo in itertools.product(*params) if params else [()]:
                bench = cls()
                args = ()
                if hasattr(bench, "setup_cache"):
                    args = (bench.setup_cache(),)
                if hasattr(bench, "setup"):
                    bench.setup(*args, *combo)
                try:
                    for name in sorted(dir(bench)):
                        if name.startswith(PREFIXES):
                            out = getattr(bench, name)(*args, *combo)
                            if name.startswith("track_"):
                                assert np.isfinite(out), (cls.__name__, name, combo)
                            ran.append(f"{cls.__name__}.{name}{combo}")
                finally:
                    if hasattr(bench, "teardown"):
                        bench.teardown(*args, *combo)
    assert {r.split("(")[0] for r in ran} >= {
        "Stage1.time_assign", "Stage2.time_update_theta", "Stage3.time_update_transform",
        "Iteration.time_iteration", "Fit.peakmem_fit", "Quality.track_objective",
        "Quality.track_clustering_accuracy", "Compile.track_compile_all_kernels",
        "Compile.track_first_call_from_cache", "PaperIteration.time_iteration",
        "PaperIteration.time_qax", "PaperIteration.track_iteration_over_qax"}


def test_compile_times_cold_then_cached_in_one_fresh_cache(monkeypatch):
    # the cold measurement must start from an empty numba cache, and the cached one must use
    # the cache the cold one wrote (two interpreters, one NUMBA_CACHE_DIR)
    seen = []

    def fake(code, env=None, **kw):
        d = env["NUMBA_CACHE_DIR"]
        seen.append((d, sorted(os.listdir(d))))
        with open(os.path.join(d, f"run{len(seen)}"), "w"):
            pass
        return {"total": float(len(seen))}
    monkeypatch.setattr(stages, "_subprocess", fake)
    cold, cached = stages.compile_times()
    assert (cold["total"], cached["total"]) == (1.0, 2.0)
    assert seen[0] == (seen[1][0], []) and seen[1][1] == ["run1"]
    assert not os.path.exists(seen[0][0])  # removed afterwards


@pytest.mark.slow
def test_bench_script_tiny(capsys):
    import benchmarks.bench as nb
    res = nb.run("tiny", repeat=1, ref_repeat=1, fit_iter=2, peers=True, memory=False,
                 compile_time=False, scaling=False)
    table = nb.format_table(res["summary"])
    assert "Stage 1 speed-up vs NumPy reference" in table
    # the iteration in products Q = X A^T, from the same round-robin
    full = res["ntnumba"][max(res["ntnumba"])]
    assert f"| one iteration / Q = X A^T product | {full['iteration'] / full['qax']:.4g} |" \
        in table
    assert res["reference_identical_assignments"] == 1.0
    # the COIL-size targets are not applied to the tiny problem; the size-free ones are
    assert "| (>= 50 at --size coil) |  |" in table
    for name, _, target, met in res["summary"]:
        if met is not None:
            assert name in nb.SIZE_FREE, name
    # progress on standard error, one line per phase
    err = capsys.readouterr().err
    for phase in ("--size tiny: loading", "Stages 1-3", "NumPy reference", "roof",
                  "scikit-learn peers"):
        assert re.search(rf"^\[bench +[\d.]+ s\] .*{re.escape(phase)}", err, flags=re.M), err


def test_bench_ratio_only(capsys):
    import benchmarks.bench as nb
    out = nb.main(["--size", "tiny", "--ratio-only", "--repeat", "2"])
    assert out["ratio"] == pytest.approx(out["iteration"] / out["qax"])
    printed = capsys.readouterr().out
    assert f"one iteration / Q = X A^T product: {out['ratio']:.2f} " in printed
    assert "load average" in printed


def test_bench_breakdown_restores_the_functions():
    import io
    import benchmarks.bench as nb
    from ntnumba.engine import loop, passes
    before = (passes.pass_stage1, loop.update_transform)
    out = nb.breakdown("tiny", 2, stream=io.StringIO())
    assert set(out) == {"qax", "iteration"} | {label for label, _, _ in nb.PARTS}
    assert all(v > 0 for v in out.values())
    assert (passes.pass_stage1, loop.update_transform) == before  # the timers are removed


def test_bench_targets_per_size():
    import benchmarks.bench as nb
    rows = [("full iteration (s, all threads)", 0.5, "<= 0.3 (goal 0.1)", False),
            ("Stage 1 speed-up vs NumPy reference", 20.0, ">= 50", False),
            ("float32 identical assignments", 0.9, ">= 0.99", False),
            ("Stage 2 (s)", 0.1, "", None)]
    coil = {"size": "coil", "problem": {"n": 1440, "M": 2100, "Cd": 20, "Cs": 2}}
    assert nb._per_size(rows, coil) == rows
    tiny = dict(coil, size="tiny", problem={"n": 120, "M": 64, "Cd": 4, "Cs": 2})
    assert [r[3] for r in nb._per_size(rows, tiny)] == [None, None, False, None]
    large = dict(coil, size="large", problem={"n": 1440, "M": 4200, "Cd": 20, "Cs": 2})
    it = nb._per_size(rows, large)[0]
    assert it[2].startswith("<= 0.6 ") and it[3] is True          # twice COIL's work


def test_bench_options_have_help():
    import benchmarks.bench as nb
    for action in nb.build_parser()._actions:
        assert action.help and len(action.help) > 10, action.option_strings


@pytest.mark.parametrize("rule", ["objective", "paper"])
def test_reference_stage1_agrees_with_kernel(rule):
    rng = np.random.default_rng(3)
    Q = 2.0 * rng.standard_normal((50, 90))
    tau, nu = rng.standard_normal((4, 90)), rng.standard_normal((3, 90))
    lab, sim, Y, sc = assign(Q, tau, nu, 0.03, 0.03, rule=rule, lambda_a=0.7)
    rl, rs, rY, rsc = reference.assign_reference(Q, tau, nu, 0.03, 0.03, rule=rule,
                                                 lambda_a=0.7)
    np.testing.assert_array_equal(lab, rl)
    np.testing.assert_array_equal(sim, rs)
    np.testing.assert_allclose(Y, rY, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(sc, rsc, rtol=1e-9)


def test_reference_stage2_agrees_with_kernel():
    rng = np.random.default_rng(4)
    Q = 2.0 * rng.standard_normal((60, 40))
    tau, nu = rng.standard_normal((3, 40)), rng.standard_normal((2, 40))
    lab, sim, Y, _, det = assign(Q, tau, nu, 0.03, 0.03, return_details=True)
    t1, n1 = update_theta(Q, Y, lab, sim, tau, nu, cost=det["cost"])
    t2, n2 = reference.update_theta_reference(Q, Y, lab, sim, tau, nu, cost=det["cost"])
    np.testing.assert_allclose(t1, t2, rtol=1e-8, atol=1e-10)
    assert theta_objective(Q, Y, lab, sim, t1, n1) == pytest.approx(
        theta_objective(Q, Y, lab, sim, t2, n2), rel=1e-12)
    # the last nu step picks between candidates tied to rounding: nu known to sqrt(2eps|f|/kq)~6e-8
    np.testing.assert_allclose(n1, n2, rtol=1e-8, atol=1e-7)


def _two_iterations_of_a_fit(**changes):
    """(X, params, the states after iterations 1 and 2 of a fit of the paper's alternating
    rule), each ``(A, tau, nu, labels, objective)`` from the fit's callback; ``changes``: of
    the parameters."""
    X = np.random.default_rng(5).standard_normal((40, 6))
    p = dataclasses.replace(stages.Params.of(3, 12), **changes)
    states = []

    def keep(state):
        states.append((state.A.copy(), state.tau.copy(), state.nu.copy(),
                       np.array(state.labels), state.objective_history[-1]))
    p.estimator(init="k-means++", max_iter=2, tol=0, scaling=None,
                random_state=0).fit(X, callback=keep)
    return X, p, states


def _same_iteration(got, want):
    A, tau, nu, labels, obj = got
    np.testing.assert_array_equal(labels, want[3])
    np.testing.assert_allclose(tau, want[1], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(A, want[0], rtol=1e-6, atol=1e-8)
    assert obj == pytest.approx(want[4], rel=1e-8)


def test_reference_iteration_matches_a_fit():
    X, p, (first, second) = _two_iterations_of_a_fit()
    _same_iteration(reference.iterate_reference(X, *first[:3], p), second)


def test_benchmark_iteration_of_the_kernels_matches_a_fit():
    X, p, (first, second) = _two_iterations_of_a_fit()
    ws = {}
    got = stages.iterate(X, *first[:3], p, workspace=ws)
    _same_iteration(got[:5], second)
    # the next iteration from the statistics and workspace it left equals one without them
    again = stages.iterate(X, *got[:3], p, Q=got[5], like=got[6], workspace=ws)
    fresh = stages.iterate(X, *got[:3], p)
    _same_iteration(again[:5], fresh[:5])


def test_benchmark_fit_iteration_is_the_fits_second_iteration():
    from ntnumba.kernels import transform_statistics
    X, p, (first, second) = _two_iterations_of_a_fit(lambda_a=0.5, lambda2=4.0, lambda4=2.0)
    pb = stages.Problem(X, None, p, *first[:3], Q=X @ first[0].T, workspace={},
                        stats=transform_statistics(X, X @ first[0].T))
    call = stages.fit_iteration(pb)
    state, obj, _ = call()
    _same_iteration((state.A, state.tau, state.nu, state.labels, obj), second)
    again, obj2, _ = call()  # every call from the same state
    np.testing.assert_array_equal(again.A, state.A)
    assert obj2 == obj
    np.testing.assert_array_equal(stages.fit_product(pb)(), X @ first[0].T)


@pytest.mark.slow
def test_asv_check_finds_the_suite(tmp_path):
    """asv discovers every benchmark and accepts its parameters (where asv is installed)."""
    import shutil
    import subprocess
    asv = shutil.which("asv", path=os.path.dirname(sys.executable)) or shutil.which("asv")
    if asv is None:
        pytest.skip("asv is not installed (pip install -e '.[bench]')")
    env = dict(os.environ, HOME=str(tmp_path))          # no machine file needed, none written
    res = subprocess.run([asv, "check", "--python=same"], cwd=ROOT / "asv_bench", env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "No problems found" in res.stdout, res.stdout
