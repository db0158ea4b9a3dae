"""The Dask backend on a real dask.distributed LocalCluster (2 worker processes, loopback).

Tolerance of "equal to the in-memory fit" as in tests/test_stream.py: labels equal, objective
history rtol 1e-7, parameters within 1e-6 of their largest entry (the sums are added in another
order; the nu step amplifies rounding to ~1e-8 relative).
"""
import os
import signal

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from ntnumba import NTClustering  # noqa: E402

from test_stream import _assert_same_fit, _blobs  # noqa: E402


@pytest.fixture(scope="module")
def client():
    from ntnumba import dask as nd   # noqa: F401 - fail here, not in the workers
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


@pytest.mark.parametrize("kw", [dict(assign="objective", init="k-means++"),
                                dict(assign="graph", init="graph")], ids=["objective", "graph"])
def test_dask_fit_equals_in_memory_fit(client, kw):
    from ntnumba.dask import NTClustering as DaskNT
    X, _ = _blobs()
    X0 = X.copy()
    a = NTClustering(3, n_components=24, max_iter=3, random_state=0, **kw).fit(X)
    b = DaskNT(3, n_components=24, max_iter=3, random_state=0, **kw).fit(
        da.from_array(X, chunks=(30, 10)))
    assert isinstance(b.labels_, da.Array)
    b_local = b.to_local()
    b_local.labels_ = b.labels_.compute()
    b_local.similarity_labels_ = b.similarity_labels_.compute()
    _assert_same_fit(a, b_local)
    np.testing.assert_array_equal(X, X0)
    # predictions: dask in, dask out; equal to the in-memory model's
    pred = b.predict(da.from_array(X, chunks=(50, 10)))
    assert isinstance(pred, da.Array)
    np.testing.assert_array_equal(pred.compute(), a.predict(X))
    np.testing.assert_allclose(b.transform(X), a.transform(X), rtol=0,
                               atol=1e-6 * np.max(np.abs(a.transform(X))))


def test_worker_killed_mid_fit_recovers_or_fails_clearly(client):
    from ntnumba.dask import NTClustering as DaskNT
    X, _ = _blobs()
    X0 = X.copy()
    kw = dict(assign="objective", init="k-means++", max_iter=3, random_state=0)
    ref = NTClustering(3, n_components=24, **kw).fit(X)
    killed = []

    def kill_one_worker(state):
        if state.n_iter == 1:   # after the first iteration: Y blocks live on the workers
            addr, pid = sorted(client.run(os.getpid).items())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(addr)

    model = DaskNT(3, n_components=24, **kw)
    try:
        model.fit(da.from_array(X, chunks=(30, 10)), callback=kill_one_worker)
    except RuntimeError as exc:
        assert "ntnumba.dask" in str(exc) and "input is unchanged" in str(exc)
        assert not hasattr(model, "labels_")   # no half-fitted state
    else:
        local = model.to_local()
        local.labels_ = model.labels_.compute()
        local.similarity_labels_ = model.similarity_labels_.compute()
        _assert_same_fit(ref, local)
    assert killed
    np.testing.assert_array_equal(X, X0)
    client.wait_for_workers(2, timeout=60)


def test_dask_partial_fit_is_not_distributed(client):
    from ntnumba.dask import NTClustering as DaskNT
    with pytest.raises(NotImplementedError, match="partial_fit"):
        DaskNT(2).partial_fit(np.zeros((4, 2)))


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
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all("objective" in e and " eta " in e for e in err), err


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
