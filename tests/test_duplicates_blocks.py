"""Repeated and near-duplicate samples through the reference sample of the chunked fit (and of
the in-memory fit above ``REFERENCE_SIZE`` rows; the Dask fit: tests/test_dask.py).

The chunked and Dask fits partition a reference sample of ``REFERENCE_SIZE`` rows and label the
others by the k-NN vote; it is set small here so that the vote runs. Problem: the first five
objects of the shipped COIL-20 copy at 10x10 (360 images), the default estimator (its labels
are the graph partition's; ``max_iter=2`` keeps the test short).
"""
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score

from ntnumba import NTClustering
from ntnumba.engine import loop as _driver
from ntnumba.engine.sources import LocalBackend
from ntnumba.datasets import load_demo

#: quality on repeated data equals quality on the data itself within this ARI
ARI_TOL = 0.02


def coil5():
    X, y = load_demo("10x10")
    keep = y < 5
    perm = np.random.default_rng(0).permutation(int(keep.sum()))
    return X[keep][perm], y[keep][perm]


def tiled_with_noise(X, copies=5, noise=0.05, seed=1):
    """Every sample ``copies`` times plus Gaussian noise of ``noise`` x the data's std."""
    Xt = np.tile(X, (copies, 1))
    return Xt + noise * X.std() * np.random.default_rng(seed).standard_normal(Xt.shape)


def chunked_ari(X, y, chunk_size=200):
    model = NTClustering(5, max_iter=2, random_state=0).fit(X, chunk_size=chunk_size)
    return adjusted_rand_score(y, model.labels_)


@pytest.mark.parametrize("chunk_size", [200, None])
def test_repeated_samples_chunked(monkeypatch, chunk_size):
    # 240 reference rows: the vote labels 120 of the 360 images; before, the reference sample
    # of data repeated 2, 4, 8 times held fewer distinct images (ARI 0.68, 0.65, 0.66 vs 0.89).
    # chunk_size=None: the in-memory fit, which above REFERENCE_SIZE rows does the same
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 240)
    X, y = coil5()
    base = chunked_ari(X, y, chunk_size)
    assert base > 0.8
    for r in (2, 4, 8):
        assert chunked_ari(np.tile(X, (r, 1)), np.tile(y, r), chunk_size) == pytest.approx(
            base, abs=ARI_TOL)


def test_near_duplicates_chunked(monkeypatch):
    # tiled 5x plus noise: 1800 rows, 1000 in the reference sample (it covers almost every
    # image), the vote labels the other 800
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 1000)
    X, y = coil5()
    base = chunked_ari(X, y)
    assert chunked_ari(tiled_with_noise(X), np.tile(y, 5)) == pytest.approx(base, abs=ARI_TOL)


def test_reference_rows_are_distinct(monkeypatch):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((50, 4))
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 30)
    # without repeated rows: the draw among all rows
    rows = _driver.reference_rows(LocalBackend(X, 7), 3)
    np.testing.assert_array_equal(rows, np.sort(np.random.RandomState(3).choice(50, 30, False)))
    # repeated rows (shuffled): distinct rows only; all of them when at most REFERENCE_SIZE
    Xr = np.tile(X, (4, 1))[rng.permutation(200)]
    for size in (30, 50):
        monkeypatch.setattr(_driver, "REFERENCE_SIZE", size)
        rows = _driver.reference_rows(LocalBackend(Xr, 7), 3)
        assert len(rows) == size and np.all(np.diff(rows) > 0)
        assert len(np.unique(Xr[rows], axis=0)) == size
    _, first = np.unique(Xr, axis=0, return_index=True)
    np.testing.assert_array_equal(rows, np.sort(first))    # the first copy of each


@pytest.mark.parametrize("chunk_size", [70, None])
def test_copies_of_reference_rows_take_their_label(monkeypatch, chunk_size):
    """A row equal to a row of the reference sample gets that row's label in ``labels_`` (as
    ``predict`` gives it), not a vote of its neighbours: equal samples, one cluster. Before,
    the vote put 1 of 60 copies in another cluster than its reference copy for 4 of 6 seeds
    (overlapping clusters)."""
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 60)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 50)
    X = 0.7 * rng.standard_normal((3, 8))[y] + rng.standard_normal((150, 8))
    X = np.r_[X, X[:60]]  # rows 150..209 repeat rows 0..59
    for seed in range(6):
        m = NTClustering(3, n_components=24, random_state=seed).fit(X, chunk_size=chunk_size)
        np.testing.assert_array_equal(m.labels_[150:], m.labels_[:60])
        np.testing.assert_array_equal(m.predict(X), m.labels_)


@pytest.mark.parametrize("chunk_size", [70, None])
def test_copies_of_reference_rows_take_their_scores(monkeypatch, chunk_size):
    """A row equal to a row of the reference sample gets that row's leave-one-out
    ``outlier_scores_`` and ``probabilities_`` (as ``predict_proba`` and ``score_samples``
    give them), not the scores of a vote that counts its copy."""
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 60)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 50)
    X = 0.7 * rng.standard_normal((3, 8))[y] + rng.standard_normal((150, 8))
    X = np.r_[X, X[:60]]  # rows 150..209 repeat rows 0..59
    m = NTClustering(3, n_components=24, random_state=0).fit(X, chunk_size=chunk_size)
    ref = set(m._fitted.state.graph["ref_rows"].tolist())
    orig = np.array([i for i in range(60) if i in ref])
    assert orig.size > 10
    np.testing.assert_array_equal(m.outlier_scores_[orig + 150], m.outlier_scores_[orig])
    np.testing.assert_array_equal(m.probabilities_[orig + 150], m.probabilities_[orig])
    proba = m.predict_proba(X[orig + 150])[np.arange(orig.size), m.labels_[orig + 150]]
    np.testing.assert_allclose(m.probabilities_[orig + 150], proba, rtol=0, atol=1e-12)


def test_row_index_matches_the_obvious_search():
    """:class:`ntnumba.engine.passes.RowIndex`, sorted once and searched by several blocks, finds
    the first reference row equal in value (a row repeated in the reference; -0.0 equals 0.0;
    another dtype or width: no match)."""
    import naive_graph

    from ntnumba.engine import passes as _passes

    rng = np.random.default_rng(4)
    ref = rng.integers(-2, 3, (40, 3)).astype(np.float64)   # many equal rows
    ref[5] = [0.0, 1.0, -0.0]
    index = _passes.RowIndex(ref)
    X = np.r_[ref[::-1], rng.integers(-3, 4, (30, 3)).astype(np.float64),
              [[0.0, 1.0, 0.0], [-0.0, 1.0, -0.0], [0.0, 1.0, -0.0]]]
    want = naive_graph.row_matches(X, ref)
    assert np.any(want >= 0) and np.any(want < 0) and np.any(want[:40] != np.arange(39, -1, -1))
    for block in np.array_split(np.arange(X.shape[0]), 4):
        want = naive_graph.row_matches(X[block], ref)
        np.testing.assert_array_equal(_passes.row_matches(X[block], index), want)
        np.testing.assert_array_equal(_passes.row_matches(X[block], ref), want)
    for other in (X.astype(np.float32), X[:, :2]):
        assert np.all(_passes.row_matches(other, index) == -1)
    assert np.all(_passes.row_matches(X, ref[:0]) == -1)


@pytest.mark.parametrize("chunk_size", [30, None])
def test_vote_sorts_the_reference_rows_once(monkeypatch, chunk_size):
    """The fit's vote and training-score passes sort the reference rows once each, not once per
    block, and the fit is the fit of the obvious row search (bit for bit: labels, scores,
    predict) on data with exact copies of reference rows."""
    import naive_graph

    from ntnumba.engine import passes as _passes

    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 60)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 50)
    X = 0.7 * rng.standard_normal((3, 8))[y] + rng.standard_normal((150, 8))
    X = np.r_[X, X[:60]]  # rows 150..209 repeat rows 0..59

    class Counted(_passes.RowIndex):
        made = 0

        def __init__(self, ref):
            Counted.made += 1
            super().__init__(ref)

    class Obvious:
        def __init__(self, ref):
            self.ref = np.array(ref)

        def matches(self, X):
            return naive_graph.row_matches(X, self.ref)

    fits = {}
    for name, cls in (("index", Counted), ("obvious", Obvious)):
        with monkeypatch.context() as m:
            m.setattr(_passes, "RowIndex", cls)
            fits[name] = NTClustering(3, n_components=24, random_state=0).fit(
                X, chunk_size=chunk_size)
            if name == "index":
                assert Counted.made == 2       # the vote, then the training scores
            fits[name].predicted = fits[name].predict(X)
    a, b = fits["index"], fits["obvious"]
    for attr in ("labels_", "outlier_scores_", "probabilities_", "predicted"):
        np.testing.assert_array_equal(getattr(a, attr), getattr(b, attr), err_msg=attr)
    np.testing.assert_array_equal(a.labels_[150:], a.labels_[:60])
