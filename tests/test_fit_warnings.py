"""Warnings of ``fit`` that fire only when something is wrong, and say what the library did:
``n_neighbors`` not below the number of samples, a nearly complete k-NN graph, feature
scales."""
import warnings

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from ntnumba import NTClustering
from ntnumba.partition import graph


def _quiet_fit(model, X):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return model.fit(X)


@pytest.mark.parametrize("n_features", [3, 20])    # the Euclidean graph, the angular graph
def test_n_neighbors_not_below_n_is_clamped_with_a_warning(n_features):
    X, y = make_blobs(60, n_features, centers=3, random_state=0)
    with pytest.warns(UserWarning, match=r"n_neighbors=100 is not below the 60 samples.*"
                                         r"Using n_neighbors=5 .*pass n_neighbors < 60"):
        big = NTClustering(3, n_neighbors=100, n_components=64, random_state=0).fit(X)
    ref = _quiet_fit(NTClustering(3, n_neighbors=5, n_components=64, random_state=0), X)
    np.testing.assert_array_equal(big.labels_, ref.labels_)
    assert big._fitted.params.n_neighbors == 5
    assert adjusted_rand_score(y, big.labels_) > 0.8      # -0.01 with the complete graph
    np.testing.assert_array_equal(big.predict(X), ref.predict(X))
    # at most n / (2 n_clusters): 12 samples, 3 clusters -> 2; no warning below n
    with pytest.warns(UserWarning, match="Using n_neighbors=2 "):
        NTClustering(3, n_neighbors=12, n_components=64, random_state=0).fit(X[:12])
    _quiet_fit(NTClustering(3, n_neighbors=11, n_components=64, random_state=0), X[:12])
    # the objective rule does not use n_neighbors
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        NTClustering(3, n_neighbors=100, n_components=64, random_state=0, assign="objective",
                     init="k-means++").fit(X)
    assert not [w for w in rec if "n_neighbors" in str(w.message)]


def test_partial_fit_clamps_n_neighbors_against_its_reference_chunk():
    X, _ = make_blobs(60, 20, centers=3, random_state=0)
    model = NTClustering(3, n_neighbors=40, n_components=64, random_state=0)
    with pytest.warns(UserWarning, match="n_neighbors=40 is not below the 30 samples"):
        model.partial_fit(X[:30])
    assert model._fitted.params.n_neighbors == 5


def test_nearly_complete_graph_warns_about_cost(monkeypatch):
    """The rule (lists over a quarter of the samples, more than DENSE_ENTRIES entries) on a
    small graph: the constant is lowered instead of timing a large one."""
    monkeypatch.setattr(graph, "DENSE_ENTRIES", 1000)
    X, _ = make_blobs(100, 20, centers=2, random_state=0)
    with pytest.warns(UserWarning, match=r"n_neighbors=30: the k-NN graph lists 99 of the "
                                         r"100 samples.*nearly complete graph, slow"):
        graph.graph_partition(X, 2, n_neighbors=30, n_shared=0, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph.graph_partition(X, 2, n_neighbors=5, n_shared=0, random_state=0)   # 20 < 25
        monkeypatch.setattr(graph, "DENSE_ENTRIES", 10 ** 4)
        graph.graph_partition(X, 2, n_neighbors=30, n_shared=0, random_state=0)  # 9900


def _units():
    """Three clusters in 5 features of very different units (as in test_preprocessing.py)."""
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1, 2], 20)
    Z = 3.0 * rng.standard_normal((3, 5))[y] + rng.standard_normal((60, 5))
    return Z * np.array([1e-3, 1.0, 50.0, 2e3, 0.2]), y


def test_no_scale_warning_where_the_graph_standardises():
    """The graph rule weights the features itself (representation='auto'): the same
    clustering as scaling='standard', no advice to pass it; the objective rule still warns."""
    X, y = _units()
    model = _quiet_fit(NTClustering(3, n_components=20, random_state=0), X)
    assert adjusted_rand_score(y, model.labels_) == 1.0
    with pytest.warns(UserWarning, match=r"ratio \d+\); the largest features dominate.*only "
                                         r"assign='graph' with representation='auto'"):
        NTClustering(3, n_components=20, random_state=0, assign="objective",
                     init="k-means++").fit(X)
    with pytest.warns(UserWarning, match="orders of magnitude"):
        NTClustering(3, n_components=20, random_state=0, representation="as-is").fit(X)


@pytest.mark.parametrize("factor", [1e300, 1e-300])
def test_extreme_feature_scales_warn_and_standard_fixes_them(factor):
    """A 1e300 ratio between feature scales: the small features count as constant (for the
    graph's weights too): a warning at every setting but scaling='standard', which clusters
    them (its standard deviations neither overflow nor underflow)."""
    X, y = make_blobs(300, 6, centers=3, random_state=0)
    X[:, 5] *= factor            # 1e300: feature 5 dwarfs the others; 1e-300: it is lost
    small = [5] if factor < 1 else [0, 1, 2, 3, 4]
    kw = dict(n_components=24, random_state=0)
    with pytest.warns(UserWarning, match=rf"{len(small)} feature\(s\) vary by less than 1e-12 "
                                         rf"of the largest.*feature {small[0]}.*count as "
                                         r"constant.*Pass scaling='standard'"):
        NTClustering(3, **kw).fit(X)
    model = _quiet_fit(NTClustering(3, scaling="standard", **kw), X)
    assert adjusted_rand_score(y, model.labels_) == 1.0     # 0.62 with the defaults


@pytest.mark.parametrize("kw", [{}, dict(assign="objective", init="k-means++", max_iter=5),
                                dict(chunk_size=7)])
def test_empty_clusters_on_duplicated_rows_warn(kw):
    X = np.repeat(np.random.default_rng(0).standard_normal((3, 20)), 10, axis=0)
    chunk = {k: kw.pop(k) for k in list(kw) if k == "chunk_size"}
    model = NTClustering(5, n_components=32, random_state=0, **kw)
    with pytest.warns(RuntimeWarning, match=r"2 of the n_clusters=5 clusters are empty \(the "
                                            r"others hold 10 to 10 of the 30 samples\): X has "
                                            r"only 3 distinct rows.*Lower n_clusters \(to 3"):
        model.fit(X, **chunk)
    assert np.count_nonzero(np.bincount(model.labels_, minlength=5)) == 3
    _quiet_fit(NTClustering(3, n_components=32, random_state=0, **kw), X)
