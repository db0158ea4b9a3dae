"""Streaming: fit(X, chunk_size=...) against the in-memory fit, bounded memory, partial_fit.

Tolerance of "equal to the in-memory fit" (docs/scaling.md): with one block the chunked fit is
bitwise identical; with several blocks the sums are added in another order (relative
differences ~1e-16) and the nu step amplifies them to ~1e-8 relative in the parameters after a
few iterations (float64; float32 results are rounded to float32). Tested: labels equal,
objective history rtol 1e-7, parameters within 1e-6 of their largest entry.
"""
import hashlib
import tracemalloc

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from ntnumba import NTClustering
from ntnumba.estimators.clustering import fitted_parts, set_fitted
from ntnumba.engine import loop as _driver
from ntnumba.model.stage1 import assign

PARAM_RTOL = 1e-6
OBJ_RTOL = 1e-7


def _blobs(n_per=40, n_features=10, k=3, seed=0, spread=4.0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n_per)
    X = spread * rng.standard_normal((k, n_features))[y] + rng.standard_normal((k * n_per,
                                                                                 n_features))
    perm = rng.permutation(k * n_per)
    return X[perm], y[perm]


def _assert_same_fit(a, b, exact=False):
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.similarity_labels_, b.similarity_labels_)
    assert a.n_iter_ == b.n_iter_
    assert a.scale_ == pytest.approx(b.scale_, rel=1e-12)
    for name in ("components_", "dissimilarity_", "similarity_"):
        u, v = getattr(a, name), getattr(b, name)
        assert u.dtype == v.dtype, name
        if exact:
            np.testing.assert_array_equal(u, v, err_msg=name)
        else:
            tol = PARAM_RTOL * max(float(np.max(np.abs(u))), 1.0)
            np.testing.assert_allclose(v, u, rtol=0, atol=tol, err_msg=name)
    # exact: the objective's terms are added in another order (last bit)
    np.testing.assert_allclose(b.objective_history_, a.objective_history_,
                               rtol=1e-14 if exact else OBJ_RTOL)
    # the objective rules' threshold is Q3^4 / Q1^3 of the costs (Tukey's far-out fence on a
    # log scale): the relative differences of the quartiles add up about seven times
    assert b.reject_threshold_ == pytest.approx(a.reject_threshold_, rel=7 * PARAM_RTOL)


CONFIGS = [
    dict(assign="objective", init="k-means++"),
    dict(assign="paper", init="random"),
    dict(assign="objective", init="random", online_fraction=0.8),
    dict(assign="graph", init="graph"),
    dict(assign="objective", init="graph", learn_transform=False),
]


@pytest.mark.parametrize("kw", CONFIGS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_chunked_fit_equals_in_memory_fit(kw, dtype):
    X, _ = _blobs()
    X = X.astype(dtype)
    X0 = X.copy()
    a = NTClustering(3, n_components=24, max_iter=3, random_state=0, **kw).fit(X)
    b = NTClustering(3, n_components=24, max_iter=3, random_state=0, **kw).fit(X,
                                                                               chunk_size=25)
    _assert_same_fit(a, b)
    np.testing.assert_array_equal(X, X0)
    # the fitted chunked model predicts like the in-memory one
    np.testing.assert_array_equal(a.predict(X[:30]), b.predict(X[:30]))


def test_one_block_is_bitwise_identical():
    X, _ = _blobs()
    kw = dict(assign="objective", init="k-means++", max_iter=3, random_state=1)
    a = NTClustering(3, n_components=24, **kw).fit(X)
    b = NTClustering(3, n_components=24, **kw).fit(X, chunk_size=len(X))
    _assert_same_fit(a, b, exact=True)


def test_memmap_input_equals_in_memory_and_is_unchanged(tmp_path):
    X, _ = _blobs(n_per=50)
    path = tmp_path / "x.f32"
    mm = np.memmap(path, dtype=np.float32, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    del mm
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    Xm = np.memmap(path, dtype=np.float32, mode="r", shape=X.shape)
    kw = dict(assign="objective", init="k-means++", max_iter=2, random_state=0)
    a = NTClustering(3, n_components=24, **kw).fit(np.array(Xm))
    b = NTClustering(3, n_components=24, **kw).fit(Xm, chunk_size=32)
    _assert_same_fit(a, b)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest


class _Reader:
    """A chunked reader without __array__: only shape, dtype and row slicing."""

    def __init__(self, X):
        self._X = X
        self.shape = X.shape
        self.dtype = X.dtype
        self.rows_read = []

    def __getitem__(self, key):
        assert isinstance(key, slice) and key.step is None, key
        out = self._X[key]
        self.rows_read.append(out.shape[0])
        return out.copy()


def test_reader_is_read_in_blocks_of_chunk_size():
    X, _ = _blobs()
    reader = _Reader(X)
    kw = dict(assign="objective", init="random", max_iter=2, random_state=0)
    b = NTClustering(3, n_components=24, **kw).fit(reader, chunk_size=16)
    a = NTClustering(3, n_components=24, **kw).fit(X)
    _assert_same_fit(a, b)
    # the initialisation sample is read block by block too
    assert all(r <= 16 for r in reader.rows_read)
    assert len(reader.rows_read) > 10


@pytest.mark.slow
def test_memory_is_bounded(tmp_path, monkeypatch):
    """No n x M array: the traced peak of the chunked fit stays far below n * M * 8 bytes,
    while the in-memory fit of the same data goes above it (the measurement sees them)."""
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 200)
    rng = np.random.default_rng(0)
    n, N, M = 40000, 6, 128
    X = rng.standard_normal((n, N))
    X[: n // 2] += 3.0
    path = tmp_path / "x.f64"
    mm = np.memmap(path, dtype=np.float64, mode="w+", shape=X.shape)
    mm[:] = X
    mm.flush()
    Xm = np.memmap(path, dtype=np.float64, mode="r", shape=X.shape)
    nM = n * M * 8
    kw = dict(n_components=M, assign="objective", init="k-means++", max_iter=1, random_state=0,
              n_similarity=2)
    NTClustering(2, **kw).fit(X[:500], chunk_size=100)          # compile outside the trace
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        NTClustering(2, **kw).fit(Xm, chunk_size=500)
        chunked = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        NTClustering(2, **kw).fit(X)
        whole = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert whole > nM, (whole, nM)
    assert chunked < 0.25 * nM, (chunked, nM)
    print(f"traced peak: chunked {chunked / 2**20:.1f} MB, in memory {whole / 2**20:.1f} MB, "
          f"n x M float64 {nM / 2**20:.1f} MB")


def test_graph_rule_with_reference_set(monkeypatch):
    """n > REFERENCE_SIZE: the first samples are partitioned, the others voted."""
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 60)
    X, y = _blobs(n_per=50, n_features=20)
    m = NTClustering(3, n_components=40, random_state=0).fit(X, chunk_size=40)
    assert adjusted_rand_score(y, m.labels_) == 1.0
    assert m._fitted.ref_X.shape[0] == 60
    assert adjusted_rand_score(y, m.predict(X)) == 1.0


@pytest.mark.parametrize("bad, match", [
    (dict(chunk_size=0), "chunk_size"),
    (dict(chunk_size=2.5), "chunk_size"),
])
def test_bad_chunk_size(bad, match):
    X, _ = _blobs()
    with pytest.raises((ValueError, TypeError), match=match):
        NTClustering(3, n_components=24).fit(X, **bad)


def test_bad_input_names_x_and_row(tmp_path):
    X, _ = _blobs()
    X[77, 3] = np.nan
    X0 = X.copy()
    with pytest.raises(ValueError, match=r"X: .*first at row 77"):
        NTClustering(3, n_components=24, assign="objective").fit(X, chunk_size=25)
    np.testing.assert_array_equal(X, X0)
    with pytest.raises(ValueError, match="X: expected a 2-D"):
        NTClustering(3, n_components=24).fit(np.zeros((2, 3, 4)), chunk_size=2)
    with pytest.raises(TypeError, match="X: expected a numeric"):
        NTClustering(3, n_components=24).fit(np.array([["a", "b"]] * 5), chunk_size=2)
    with pytest.raises(ValueError, match="n_samples=2"):
        NTClustering(3, n_components=24).fit(np.ones((2, 3)), chunk_size=2)


# --------------------------------------------------------------------------- partial_fit
def test_first_partial_fit_is_one_batch_iteration():
    """One chunk: the running sums are the chunk's, so the update is the batch iteration."""
    X, _ = _blobs()
    kw = dict(assign="objective", init="k-means++", random_state=0)
    a = NTClustering(3, n_components=24, max_iter=1, **kw).fit(X)
    b = NTClustering(3, n_components=24, **kw).partial_fit(X)
    for name in ("components_", "dissimilarity_", "similarity_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert b.n_iter_ == 1


def test_forgetting_factor_weights_the_statistics():
    X, _ = _blobs(n_per=60)
    X1, X2 = X[:100], X[100:]
    f = 0.5
    m = NTClustering(3, n_components=24, assign="objective", init="k-means++", random_state=0)
    m.partial_fit(X1, forget=f)
    c1 = m._fitted.stream["theta"]["count"].copy()
    A, tau, nu = m.components_, m.dissimilarity_, m.similarity_
    Q2 = (X2 * m.scale_) @ A.T
    lab, sim, _, _ = assign(Q2, tau, nu, m.lambda0, m.lambda1, rule="objective",
                            lambda_a=m.lambda_a)
    c2 = np.zeros_like(c1)
    np.add.at(c2, (lab, sim), 1.0)
    m.partial_fit(X2, forget=f)
    np.testing.assert_allclose(m._fitted.stream["theta"]["count"], f * c1 + c2)
    np.testing.assert_allclose(m._fitted.stream["transform"].gram,
                               f * ((X1 * m.scale_).T @ (X1 * m.scale_))
                               + (X2 * m.scale_).T @ (X2 * m.scale_), rtol=1e-10)


@pytest.mark.parametrize("kw", [dict(assign="objective", init="k-means++"),
                                dict(assign="graph", init="graph")], ids=["objective", "graph"])
def test_partial_fit_stream_clusters(kw):
    X, y = _blobs(n_per=100, n_features=20)
    X0 = X.copy()
    m = NTClustering(3, n_components=40, random_state=0, **kw)
    for chunk in np.array_split(X, 6):
        m.partial_fit(chunk, forget=0.8)
    np.testing.assert_array_equal(X, X0)
    assert m.n_iter_ == 6 and len(m.objective_history_) == 6
    assert adjusted_rand_score(y, m.predict(X)) == 1.0
    if kw["assign"] == "objective":
        np.testing.assert_array_equal(m.labels_, m.predict(np.array_split(X, 6)[-1]))


def test_partial_fit_continues_a_fit():
    X, y = _blobs(n_per=60)
    m = NTClustering(3, n_components=24, assign="objective", init="k-means++", max_iter=2,
                     random_state=0).fit(X[:90])
    A = m.components_.copy()
    m.partial_fit(X[90:])
    assert m.n_iter_ == 3
    assert not np.array_equal(A, m.components_)
    assert adjusted_rand_score(y, m.predict(X)) == 1.0


def test_fit_between_partial_fits_restarts_the_statistics():
    X, _ = _blobs(n_per=60)
    m = NTClustering(3, n_components=24, assign="objective", init="k-means++", random_state=0)
    m.partial_fit(X[:90])
    m.partial_fit(X[90:])
    assert m._fitted.stream["theta"]["count"].sum() == len(X)
    m.fit(X[:90])
    m.partial_fit(X[90:])          # continues the fit, with fresh sums of this chunk only
    assert m._fitted.stream["theta"]["count"].sum() == len(X) - 90
    assert m.n_iter_ == m.max_iter + 1


def test_partial_fit_bad_input():
    X, _ = _blobs()
    m = NTClustering(3, n_components=24, assign="objective")
    for f in (0.0, 1.5):
        with pytest.raises(ValueError, match="forget"):
            m.partial_fit(X, forget=f)
    with pytest.raises(ValueError, match="first chunk"):
        m.partial_fit(X[:2])
    m.partial_fit(X)
    with pytest.raises(ValueError, match="X"):
        m.partial_fit(X[:, :5])


# --------------------------------------------------------------------------- one driver
def test_subnormal_data_through_chunk_size():
    """Data of size 1e-310: the rms factor is capped (finite) on every path (the chunked fit
    raised "Q: contains NaN"), and the chunked fit equals the in-memory one. After the first
    iteration only the objective is compared (within 1e-5): data this far below the priors'
    scale leave A undetermined up to a rotation (singular values 1.1317 vs 1.1292), which the
    rounding of the block sums picks differently (measured: 6.7e-7 after 3 iterations)."""
    X, _ = _blobs()
    X = X * 1e-310
    kw = dict(assign="objective", init="k-means++", random_state=0, tol=0.0)
    a = NTClustering(3, n_components=24, max_iter=1, **kw).fit(X)
    b = NTClustering(3, n_components=24, max_iter=1, **kw).fit(X, chunk_size=25)
    assert np.isfinite(b.scale_) and b.scale_ == a.scale_
    _assert_same_fit(a, b)
    a.set_params(max_iter=3, warm_start=True).fit(X)
    b.set_params(max_iter=3, warm_start=True).fit(X, chunk_size=25)
    assert np.all(np.isfinite(b.components_)) and b.n_iter_ == 3
    np.testing.assert_allclose(b.objective_history_, a.objective_history_, rtol=1e-5)


@pytest.mark.parametrize("kw", [dict(assign="objective", init="k-means++"),
                                dict(assign="graph", init="graph")], ids=["objective", "graph"])
def test_chunked_warm_start_equals_one_fit(kw):
    X, _ = _blobs()
    kw = dict(kw, n_components=24, random_state=0, tol=0.0)
    one = NTClustering(3, max_iter=4, **kw).fit(X, chunk_size=25)
    part = NTClustering(3, max_iter=2, warm_start=True, **kw).fit(X, chunk_size=25)
    assert part.n_iter_ == 2
    part.set_params(max_iter=4).fit(X, chunk_size=25)
    _assert_same_fit(one, part)
    _assert_same_fit(NTClustering(3, max_iter=4, **kw).fit(X), part)


@pytest.mark.parametrize("chunk_size", [None, 25])
def test_warm_start_beyond_the_reference_set_equals_one_fit(chunk_size, monkeypatch):
    """A graph fit of more rows than its reference sample continues with warm_start (it
    raised a shape mismatch: the previous labels of every row taken for the reference's)."""
    from ntnumba.engine import loop as _driver
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 40)
    X, _ = _blobs()
    kw = dict(n_components=24, random_state=0, tol=0.0)
    one = NTClustering(3, max_iter=3, **kw).fit(X, chunk_size=chunk_size)
    part = NTClustering(3, max_iter=1, warm_start=True, **kw).fit(X, chunk_size=chunk_size)
    part.set_params(max_iter=3).fit(X, chunk_size=chunk_size)
    assert part._fitted.ref_X.shape[0] == 40 and part.n_iter_ == 3
    _assert_same_fit(one, part)


def test_progress_with_eta_chunked_and_partial(capsys):
    X, _ = _blobs()
    kw = dict(n_components=24, assign="objective", init="k-means++", random_state=0, tol=0.0,
              verbose=1)
    NTClustering(3, max_iter=3, **kw).fit(X, chunk_size=25)
    err = [e for e in capsys.readouterr().err.splitlines() if not e.startswith("compiling")]
    assert err[0] == "fit: 120 samples x 10 features, 3 clusters" and err[-1].startswith("total")
    err = [e for e in err if e.startswith("iteration")]
    assert len(err) == 3 and all("objective" in e and " eta " in e for e in err), err
    m = NTClustering(3, **kw)
    m.partial_fit(X[:60])
    m.partial_fit(X[60:])
    err = [e for e in capsys.readouterr().err.splitlines() if not e.startswith("compiling")]
    assert len(err) == 2 and all("objective" in e and " eta " in e for e in err), err
    assert err[1].startswith("iteration    2")


def _sorted_blobs(n_per=100, k=3, n_features=20, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n_per)
    X = 4.0 * rng.standard_normal((k, n_features))[y]
    return X + rng.standard_normal(X.shape), y


def test_reference_sample_does_not_depend_on_row_order(monkeypatch):
    """Class-sorted rows: the reference sample is drawn at random (not the first rows), so
    sorted and shuffled input give the same clustering."""
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 60)
    X, y = _sorted_blobs()
    perm = np.random.default_rng(1).permutation(len(X))
    kw = dict(n_components=40, random_state=0)
    a = NTClustering(3, **kw).fit(X, chunk_size=50)
    b = NTClustering(3, **kw).fit(X[perm], chunk_size=50)
    assert a._fitted.ref_X.shape[0] == 60
    assert adjusted_rand_score(y, a.labels_) >= 0.99
    labels_b = np.empty_like(b.labels_)
    labels_b[perm] = b.labels_
    assert adjusted_rand_score(a.labels_, labels_b) >= 0.99
    # a model file of a sampled reference set predicts like the model
    local = NTClustering(3, **kw)
    set_fitted(local, *a._fitted.portable(fitted_parts(a)[0]))
    assert adjusted_rand_score(a.predict(X), local.predict(X)) == 1.0


@pytest.mark.parametrize("chunk_size", [None, 50])
def test_graph_partition_of_every_path_applies_the_representation_rules(monkeypatch, chunk_size):
    """A partition the driver makes after the initialisation (assign="graph" with another
    init) goes through the same representation rules as init="graph", in memory and chunked."""
    from ntnumba.partition import select as _select
    calls = []
    real = _select.partition

    def spy(*args, **kwargs):
        calls.append(args[0].shape)
        return real(*args, **kwargs)

    monkeypatch.setattr(_select, "partition", spy)
    X, _ = _sorted_blobs()
    NTClustering(3, n_components=40, assign="graph", init="k-means++", max_iter=1,
                 random_state=0).fit(X, chunk_size=chunk_size)
    assert calls == [X.shape]


@pytest.mark.parametrize("chunk_size", [None, 64])
def test_training_scores_reuse_the_fits_vote(monkeypatch, chunk_size):
    """Above the reference size the fit votes the other rows once: the training scores take
    that vote (graph_vote runs on the reference rows only) and equal the scores of a pass
    that votes every row again."""
    import ntnumba.estimators.clustering as ec
    from ntnumba.engine import passes
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 150)
    X, _ = _blobs(n_per=200, spread=2.0)
    X[7] = X[500]   # a voted row equal to another row
    voted = []
    real = passes.graph_vote
    monkeypatch.setattr(passes, "graph_vote", lambda X, *a, **k: voted.append(len(X)) or
                        real(X, *a, **k))
    got = NTClustering(3, n_components=24, random_state=0).fit(X, chunk_size=chunk_size)
    assert sum(voted) == X.shape[0]   # the fit's vote of 450 rows, the scores' of 150
    orig = ec.NTClustering._with_training_scores
    monkeypatch.setattr(ec.NTClustering, "_with_training_scores",
                        lambda self, src, attrs, fitted, ref_in_src=True, vote=None:
                        orig(self, src, attrs, fitted, ref_in_src))
    ref = NTClustering(3, n_components=24, random_state=0).fit(X, chunk_size=chunk_size)
    np.testing.assert_array_equal(got.outlier_scores_, ref.outlier_scores_)
    np.testing.assert_array_equal(got.probabilities_, ref.probabilities_)
    assert got.reject_threshold_ == ref.reject_threshold_
