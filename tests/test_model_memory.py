"""The memory check of the paper's model before a fit's work (issue 28, wide data): the
estimate against traced allocations, the refusal and the warning before anything is allocated."""
import tracemalloc
import warnings

import numpy as np
import pytest

from ntnumba import MemoryUsageWarning, NTClustering
from ntnumba.estimators.clustering import MODEL_WARN_BYTES, model_memory
from ntnumba.partition import graph


def _blobs(n, N, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, N)) + 3.0 * rng.standard_normal((3, N))[np.arange(n) % 3]


def _traced_peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_estimate_bounds_the_traced_peak_of_a_fit(dtype):
    # several iterations of the objective rule: Stage 3 from the current map (its peak)
    X = _blobs(40, 700).astype(dtype)
    kw = dict(assign="objective", tol=0.0, max_iter=3, random_state=0)
    NTClustering(3, **kw).fit(X)  # compiled outside the trace
    peak = _traced_peak(lambda: NTClustering(3, **kw).fit(X))
    est = model_memory(40, 700, 2100, np.dtype(dtype).itemsize)
    assert peak <= est <= 3 * peak, (peak, est)


def test_refused_before_any_allocation_and_the_fit_kept(monkeypatch):
    X = _blobs(30, 3000)
    model = NTClustering(3, n_components=3000, random_state=0).fit(X[:, :5])
    before = {k: v for k, v in vars(model).items() if k.endswith("_")}
    need = model_memory(30, 3000, 3000)
    assert need > 3 * 3000 * 3000 * 8   # above the three maps, each 72 MB
    monkeypatch.setattr(graph, "available_memory", lambda: need // 4)
    fresh = NTClustering(3, n_components=3000, random_state=0)
    for call in (model.fit, fresh.partial_fit):
        with pytest.raises(MemoryError) as info:
            call(X)
        msg = str(info.value)
        for part in (f"{need / 2**30:.1f} GiB", "3000 x 3000", "learn_transform=False", "PCA"):
            assert part in msg, msg
    peak = _traced_peak(lambda: pytest.raises(MemoryError, model.fit, X))
    assert peak < 3000 * 3000 * 8 / 10   # not one map: a tenth of A at most (X is 0.7 MB)
    after = {k: v for k, v in vars(model).items() if k.endswith("_")}
    assert after.keys() == before.keys() and all(after[k] is before[k] for k in before)
    assert not [k for k in vars(fresh) if k.endswith("_")]
    # the fix the message names: the same data without the learned map fits
    labels = NTClustering(3, learn_transform=False, random_state=0).fit(X).labels_
    assert np.bincount(labels).tolist() == [10, 10, 10]


def test_warning_above_half_of_the_available_memory(monkeypatch):
    X = _blobs(30, 3000)
    need = model_memory(30, 3000, 3000)
    model = NTClustering(3, n_components=3000, random_state=0)
    with warnings.catch_warnings():   # an error: the fit stops before its work
        warnings.simplefilter("error", MemoryUsageWarning)
        monkeypatch.setattr(graph, "available_memory", lambda: int(1.5 * need))
        with pytest.raises(MemoryUsageWarning, match=f"{need / 2**30:.1f} GiB"):
            model.fit(X)
        model.set_params(n_components="auto").fit(X)   # the default, M = 2100: no warning
        assert model.components_.shape == (2100, 3000)
    assert model.labels_.shape == (30,)


@pytest.mark.parametrize("avail", [None, 1 << 50])
def test_warning_above_the_fixed_threshold(monkeypatch, avail):
    # 2 x 12000: A of 12000 x 12000 (1.1 GB) whatever the memory, unknown memory included
    assert model_memory(2, 12000, 12000) > MODEL_WARN_BYTES > model_memory(2, 4000, 4000)
    monkeypatch.setattr(graph, "available_memory", lambda: avail)
    model = NTClustering(2, n_components=12000, n_neighbors=1, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MemoryUsageWarning)
        with pytest.raises(MemoryUsageWarning, match="12000 x 12000"):
            model.fit(np.random.default_rng(0).random((2, 12000)))
    assert not hasattr(model, "components_")
