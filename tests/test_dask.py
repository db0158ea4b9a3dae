"""The Dask backend on a real dask.distributed LocalCluster (2 worker processes, loopback).

Tolerance of "equal to the in-memory fit" as in tests/test_stream.py: labels equal, objective
history rtol 1e-7, parameters within 1e-6 of their largest entry (the sums are added in another
order; the nu step amplifies rounding to ~1e-8 relative).
"""
import os
import signal
import sys

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from ntnumba import NTClustering  # noqa: E402

from test_stream import _assert_same_fit, _blobs  # noqa: E402


@pytest.fixture(scope="module")
def client():
    from ntnumba import dask as nd  # noqa: F401 - fail here, not in the workers
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(assign="objective", init="k-means++"),
                                dict(assign="graph", init="graph"),
                                dict(assign="objective", init="k-means++", n_components=6)],
                         ids=["objective", "graph", "subspace"])
def test_dask_fit_equals_in_memory_fit(client, kw):
    # "subspace": n_components < n_features, the model of the rows' principal subspace
    from ntnumba.dask import NTClustering as DaskNT
    X, _ = _blobs()
    X0 = X.copy()
    kw = dict(dict(n_components=24), **kw)
    a = NTClustering(3, max_iter=3, random_state=0, **kw).fit(X)
    b = DaskNT(3, max_iter=3, random_state=0, **kw).fit(
        da.from_array(X, chunks=(30, 10)))
    assert isinstance(b.labels_, da.Array)
    _assert_same_fit(a, b.to_local())   # to_local: labels_ of every row, computed from b's
    np.testing.assert_array_equal(X, X0)
    # predictions: dask in, dask out; equal to the in-memory model's
    pred = b.predict(da.from_array(X, chunks=(50, 10)))
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), a.predict(X))
    np.testing.assert_allclose(b.transform(X), a.transform(X), rtol=0,
                               atol=1e-6 * np.max(np.abs(a.transform(X))))


def _signal_during_pass(monkeypatch, client, iteration, sig):
    """Make the first pass of iteration ``iteration`` send ``sig`` to one worker while the
    pass's block tasks are queued and running (a task of the worker signals itself)."""
    from ntnumba import dask as nd
    real = nd.DaskBackend._map
    done = []

    def _map(self, *args):
        if not done and self.n_iter_hint == iteration:
            # queued on the worker ahead of the pass's tasks: it dies (or stops) holding the
            # blocks of X and Y the pass needs, while the pass is being scheduled
            addr, pid = sorted(self.client.run(os.getpid).items())[0]
            self.client.submit(os.kill, pid, sig, workers=[addr], pure=False)
            done.extend([True, addr])
        return real(self, *args)

    monkeypatch.setattr(nd.DaskBackend, "_map", _map)
    monkeypatch.setattr(nd.DaskBackend, "n_iter_hint", 0, raising=False)
    return done


def _count(state):
    """Callback: the iteration the next passes belong to, for :func:`_signal_during_pass`."""
    from ntnumba import dask as nd
    nd.DaskBackend.n_iter_hint = state.n_iter + 1


@pytest.mark.slow
@pytest.mark.parametrize("n_components", [24, "auto"], ids=["small", "default"])
def test_worker_killed_during_an_iteration_is_recovered(client, monkeypatch, n_components):
    """SIGKILL of a worker in the middle of an iteration's pass: dask recomputes its tasks and
    blocks elsewhere and the fit ends with the result of an undisturbed fit. At the default
    n_components the map (2100 x 10) is a shared argument of its own task, recomputed too
    (before: scattered, the fit ended in ClusterError or FuturesCancelledError)."""
    from ntnumba.dask import NTClustering as DaskNT
    X, _ = _blobs()
    kw = dict(assign="objective", init="k-means++", max_iter=3, random_state=0,
              n_components=n_components)
    ref = NTClustering(3, **kw).fit(X)
    done = _signal_during_pass(monkeypatch, client, 2, signal.SIGKILL)
    try:
        model = DaskNT(3, **kw).fit(da.from_array(X, chunks=(30, 10)), callback=_count,
                                    timeout=120)
    finally:
        client.wait_for_workers(2, timeout=120)
    assert len(done) == 2   # the kill happened
    local = model.to_local()
    local.labels_ = model.labels_.compute()
    local.similarity_labels_ = model.similarity_labels_.compute()
    _assert_same_fit(ref, local)


@pytest.mark.slow
@pytest.mark.parametrize("n_components", [24, "auto"], ids=["small", "default"])
def test_stopped_worker_fails_clearly_within_the_timeout(client, monkeypatch, n_components):
    """SIGSTOP of a worker mid-pass: dask would wait 5 minutes (worker-ttl); with timeout the
    fit stops with one ClusterError naming the worker, and the estimator is unchanged. At the
    default n_components the shared map travels within the timeout too (before: scattered to
    every worker first, the stopped one included, with no bound)."""
    import threading
    import time
    from ntnumba.dask import ClusterError, NTClustering as DaskNT
    X, _ = _blobs()
    kw = dict(n_components=n_components, assign="objective", max_iter=4, random_state=0)
    client.wait_for_workers(2, timeout=120)
    DaskNT(3, **kw).fit(da.from_array(X, chunks=(30, 10)))   # every worker has its kernels
    pids = client.run(os.getpid)
    if n_components == 24:   # as the first pass starts
        done, callback = _signal_during_pass(monkeypatch, client, 0, signal.SIGSTOP), None
    else:   # after iteration 2, before Stage 1 ships the map (2100 x 10) to the workers
        done = []

        def callback(state):
            if state.n_iter == 2:
                os.kill(sorted(pids.values())[0], signal.SIGSTOP)
                done.extend([True, state.n_iter])
    model = DaskNT(3, **kw)
    t0 = time.monotonic()

    def resume():
        for pid in pids.values():
            os.kill(pid, signal.SIGCONT)

    late = threading.Timer(60, resume)   # a fit that ignores the timeout fails, not hangs
    late.start()
    try:
        # the workers named are those the scheduler runs the tasks on: none when the tasks
        # wait for blocks held by the stopped worker
        with pytest.raises(ClusterError, match=r"within timeout=20 s; workers still on them: "
                                               r"\[.*\] \(stopped, hung or overloaded"):
            model.fit(da.from_array(X, chunks=(30, 10)), timeout=20, callback=callback)
        elapsed = time.monotonic() - t0
    finally:
        late.cancel()
        resume()
    assert len(done) == 2 and elapsed < 50
    assert not hasattr(model, "components_")
    client.wait_for_workers(2, timeout=120)


@pytest.mark.slow
def test_workers_stopped_holding_finished_results_fail_within_the_timeout(client, monkeypatch):
    """Every worker SIGSTOPped after a pass's tasks finished, before their results are
    fetched: ClusterError within the timeout (the fetch would wait as long as dask does)."""
    import threading
    import time
    from ntnumba import dask as nd
    X, _ = _blobs()
    client.wait_for_workers(2, timeout=120)
    pids = client.run(os.getpid)
    real, done = nd.DaskBackend._wait, []

    def _wait(self, futures, deadline):
        real(self, futures, deadline)
        if not done and self.n_iter_hint == 2:
            done.extend(os.kill(pid, signal.SIGSTOP) for pid in pids.values())

    def resume():
        for pid in pids.values():
            os.kill(pid, signal.SIGCONT)

    monkeypatch.setattr(nd.DaskBackend, "_wait", _wait)
    monkeypatch.setattr(nd.DaskBackend, "n_iter_hint", 0, raising=False)
    late = threading.Timer(60, resume)   # a fit that ignores the timeout fails, not hangs
    late.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(nd.ClusterError, match=r"finished task\(s\) could not be fetched "
                                                  r"within timeout=20 s"):
            nd.NTClustering(3, assign="objective", max_iter=4, random_state=0).fit(
                da.from_array(X, chunks=(30, 10)), timeout=20, callback=_count)
        elapsed = time.monotonic() - t0
    finally:
        late.cancel()
        resume()
    assert len(done) == 2 and elapsed < 50
    client.wait_for_workers(2, timeout=120)


def test_cluster_errors_become_one_clear_error():
    from ntnumba.dask import ClusterError, DaskBackend

    class CommClosedError(OSError):
        pass

    class KilledWorker(Exception):
        pass

    class Client:
        status = "running"

    be = DaskBackend.__new__(DaskBackend)
    be.client = Client()
    for exc, match in ((CommClosedError("in <TCP (closed)>: Stream is closed"),
                        r"lost the data, a task or the connection to the scheduler "
                        r"\(CommClosedError"),
                       (KilledWorker("attempted to run task x on 4 workers"),
                        r"dask gave up on a task after its workers died")):
        with pytest.raises(ClusterError, match=match):
            with be._cluster_errors():
                raise exc
    with pytest.raises(ZeroDivisionError):   # not a cluster error: as itself
        with be._cluster_errors():
            1 / 0


@pytest.mark.slow
def test_dask_partial_fit_is_not_distributed(client):
    from ntnumba.dask import NTClustering as DaskNT
    with pytest.raises(NotImplementedError, match="partial_fit"):
        DaskNT(2).partial_fit(np.zeros((4, 2)))


@pytest.mark.slow
def test_dask_bad_input(client):
    from ntnumba.dask import NTClustering as DaskNT
    X, _ = _blobs()
    X[45, 2] = np.inf
    with pytest.raises(ValueError, match=r"X: .*first at row 45"):
        DaskNT(3, n_components=24, assign="objective").fit(da.from_array(X, chunks=(30, 10)))
    with pytest.raises(ValueError, match="X: expected a 2-D"):
        DaskNT(3).fit(da.zeros((4, 3, 2)))


def _dask_same(a, b):
    loc = b.to_local()
    loc.labels_ = b.labels_.compute()
    loc.similarity_labels_ = b.similarity_labels_.compute()
    _assert_same_fit(a, loc)


@pytest.mark.slow
def test_dask_warm_start_and_progress(client, capsys):
    """A Dask fit split in two equals one in-memory fit; progress lines carry an ETA."""
    from ntnumba.dask import NTClustering as DaskNT
    X, _ = _blobs()
    kw = dict(n_components=24, assign="objective", init="k-means++", random_state=0, tol=0.0)
    one = NTClustering(3, max_iter=3, **kw).fit(X)
    part = DaskNT(3, max_iter=1, warm_start=True, verbose=1, **kw)
    part.fit(da.from_array(X, chunks=(30, 10)))
    part.set_params(max_iter=3).fit(da.from_array(X, chunks=(30, 10)))
    _dask_same(one, part)
    err = [e for e in capsys.readouterr().err.splitlines() if e.startswith("iteration")]
    assert len(err) == 3 and all("objective" in e and " eta " in e for e in err), err


@pytest.mark.slow
def test_dask_progress_bars_of_the_passes(client, monkeypatch):
    """verbose on a terminal: bars of the samples done as the blocks finish (each block's
    count arrives from dask's callback thread, possibly after the pass ended)."""
    from ntnumba.dask import NTClustering as DaskNT
    from test_verbose import bars, eager_bars
    eager_bars(monkeypatch)
    X, _ = _blobs()
    DaskNT(3, n_components=24, random_state=0, max_iter=2, verbose=1).fit(
        da.from_array(X, chunks=(30, 10)))
    done = bars(sys.stderr.getvalue(), "samples")
    assert {t for _, t in done} == {120} and max(d for d, _ in done) >= 90, done


@pytest.mark.slow
def test_dask_subnormal_data(client):
    from ntnumba.dask import NTClustering as DaskNT
    X, _ = _blobs()
    X = X * 1e-310
    kw = dict(n_components=24, assign="objective", init="k-means++", random_state=0,
              max_iter=1)
    a = NTClustering(3, **kw).fit(X)
    b = DaskNT(3, **kw).fit(da.from_array(X, chunks=(30, 10)))
    assert np.isfinite(b.scale_) and b.scale_ == a.scale_
    _dask_same(a, b)


@pytest.mark.slow
@pytest.mark.parametrize("N,rank", [(8, 4), (40, 10)])
def test_dask_components_equal_in_memory_outside_the_span(client, N, rank):
    """Rank-deficient data: the Dask fit's map equals the in-memory one also where the data
    leave it undetermined (tests/test_null_space.py)."""
    from ntnumba.dask import NTClustering as DaskNT
    from test_null_space import _assert_same_components, _rank_deficient_blobs
    X, P = _rank_deficient_blobs(N, rank)
    kw = dict(n_components=3 * N, assign="objective", init="k-means++", random_state=0,
              max_iter=3)
    a = NTClustering(3, **kw).fit(X)
    b = DaskNT(3, **kw).fit(da.from_array(X, chunks=(30, N)))
    np.testing.assert_array_equal(b.labels_.compute(), a.labels_)
    _assert_same_components(a, b.to_local(), P)


@pytest.mark.slow
@pytest.mark.parametrize("lambda1,factor", [(1e6, 1.0), (0.03, 1e-320)])
def test_dask_zero_codes_warn(client, lambda1, factor):
    """All NT representations zero: the warning of tests/test_zero_codes.py, from the
    workers' passes."""
    from ntnumba.dask import NTClustering as DaskNT
    from test_zero_codes import KW, check_zero_codes_warning
    X, _ = _blobs()
    X = X * factor
    check_zero_codes_warning(
        lambda Z: DaskNT(3, lambda1=lambda1, **KW).fit(da.from_array(Z, chunks=(30, 10))), X)


@pytest.mark.slow
def test_dask_repeated_and_near_duplicate_samples(client, monkeypatch):
    """tests/test_duplicates_blocks.py through Dask: the reference sample (drawn in this
    process) and the vote of the other rows (on the workers)."""
    from sklearn.metrics import adjusted_rand_score as ari

    from ntnumba.engine import loop as _driver
    from ntnumba.dask import NTClustering as DaskNT
    from test_duplicates_blocks import ARI_TOL, coil5, tiled_with_noise
    X, y = coil5()

    def dask_ari(Z, labels):
        model = DaskNT(5, max_iter=2, random_state=0).fit(
            da.from_array(Z, chunks=(200, Z.shape[1])))
        return ari(labels, model.labels_.compute())

    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 240)
    base = dask_ari(X, y)
    assert dask_ari(np.tile(X, (4, 1)), np.tile(y, 4)) == pytest.approx(base, abs=ARI_TOL)
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 1000)
    assert dask_ari(tiled_with_noise(X), np.tile(y, 5)) == pytest.approx(dask_ari(X, y),
                                                                         abs=ARI_TOL)


@pytest.mark.slow
def test_shared_pass_arguments_are_scattered_once(client, monkeypatch):
    """The graph rule's vote and soft-score passes share the reference rows (a row index) and
    the fitted estimator with every block: each is shipped once per pass, never pickled into
    each block's task (no block task argument other than a future is larger than the scatter
    threshold)."""
    import pickle

    from ntnumba.engine import loop as _driver
    from ntnumba.dask import _SCATTER_BYTES
    from ntnumba.dask import NTClustering as DaskNT
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 200)   # 200 x 64 float64 rows: 100 kB
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 200)
    X = 2 * rng.standard_normal((3, 64))[y] + rng.standard_normal((600, 64))
    inline = []
    submit = client.submit

    def spy(fn, *args, **kw):
        inline.extend((getattr(fn, "__name__", fn), type(a).__name__, len(pickle.dumps(a)))
                      for a in args if not isinstance(a, distributed.Future))
        return submit(fn, *args, **kw)

    monkeypatch.setattr(client, "submit", spy)
    DaskNT(3, n_components=64, random_state=0).fit(da.from_array(X, chunks=100), client=client)
    assert len(inline) > 6
    # each travels in a task of its own (recomputable, unlike scattered data), not per block
    big = [a for a in inline if a[2] > _SCATTER_BYTES and a[0] != "_identity"]
    assert not big and any(a[0] == "_identity" for a in inline), big


@pytest.mark.slow
def test_inference_ships_the_estimator_once_not_with_every_block(client, monkeypatch):
    """predict, predict_proba, transform and score of a dask array refer every block's task to
    one node holding the fitted estimator: no block task carries more than the scatter
    threshold (before: the estimator, here ~0.4 MB, was pickled into each of them)."""
    import pickle

    import dask
    from dask.core import flatten

    from ntnumba.dask import _SCATTER_BYTES
    from ntnumba.dask import NTClustering as DaskNT
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 200)
    X = 2 * rng.standard_normal((3, 64))[y] + rng.standard_normal((600, 64))
    Xd = da.from_array(X, chunks=(100, 64))
    model = DaskNT(3, n_components=64, random_state=0).fit(Xd, client=client)
    local = model.to_local()
    assert len(pickle.dumps(local)) > 2 * _SCATTER_BYTES

    def task_sizes(graph, keys):
        graph = dict(graph)
        return [len(pickle.dumps(graph[k])) for k in keys]

    for name in ("predict", "predict_proba", "transform"):
        out = getattr(model, name)(Xd)
        sizes = task_sizes(out.__dask_graph__(), list(flatten(out.__dask_keys__())))
        assert len(sizes) == 6 and max(sizes) <= _SCATTER_BYTES, (name, sizes)
        np.testing.assert_array_equal(out.compute(), getattr(local, name)(X), err_msg=name)
    parts = []
    compute = dask.compute

    def spy(*args, **kwargs):  # the per-block tasks of score
        parts.extend(args)
        return compute(*args, **kwargs)

    monkeypatch.setattr(dask, "compute", spy)
    score = model.score(Xd)
    sizes = [task_sizes(p.__dask_graph__(), [p.key])[0] for p in parts]
    assert len(sizes) == 6 and max(sizes) <= _SCATTER_BYTES, sizes
    assert score == pytest.approx(local.score(X), rel=1e-12)


@pytest.mark.slow
def test_to_local_has_every_row_as_the_in_memory_fit(client, monkeypatch, tmp_path):
    """With a reference sample (more rows than REFERENCE_SIZE), the model of to_local() and
    its file hold labels_ and the other per-row arrays of every training row, as the Dask
    model and the in-memory chunked fit do (they held the reference sample's)."""
    from ntnumba import load
    from ntnumba.engine import loop as _driver
    from ntnumba.dask import NTClustering as DaskNT
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 200)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 200)
    X = 2 * rng.standard_normal((3, 64))[y] + rng.standard_normal((600, 64))
    kw = dict(n_components=64, max_iter=2, random_state=0)
    model = DaskNT(3, **kw).fit(da.from_array(X, chunks=100), client=client)
    ref = NTClustering(3, **kw).fit(X, chunk_size=100)
    for local in (model.to_local(), load(model.save(tmp_path / "m"))):
        np.testing.assert_array_equal(local.labels_, model.labels_.compute())
        _assert_same_fit(ref, local)
        for name in ("initial_labels_", "outlier_scores_", "probabilities_"):
            u, v = getattr(ref, name), getattr(local, name)
            assert v.shape == (600,), name
            np.testing.assert_allclose(v, u, rtol=1e-6, atol=1e-12, err_msg=name)
        np.testing.assert_array_equal(local.predict(X), ref.predict(X))
    # a new model at every call: fitting it leaves the Dask model's predictions alone
    pred = model.predict(X)
    model.to_local().fit(X[::-1])
    np.testing.assert_array_equal(model.predict(X), pred)
    # and its own arrays and fitted state: changing them in place leaves the Dask model alone
    local, A, tau = model.to_local(), model.components_.copy(), model._fitted.state.tau.copy()
    local.components_ *= 2
    local._fitted.state.tau *= 2
    np.testing.assert_array_equal(model.components_, A)
    np.testing.assert_array_equal(model._fitted.state.A, A)
    np.testing.assert_array_equal(model._fitted.state.tau, tau)
    np.testing.assert_array_equal(model.predict(X), pred)
    shared = [k for k, v in vars(model).items() if isinstance(v, np.ndarray)
              and k in vars(local) and np.shares_memory(v, getattr(local, k))]
    assert shared == [] and local._fitted.state is not model._fitted.state
    assert local._fitted.ref_X is model._fitted.ref_X
