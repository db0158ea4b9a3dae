"""The embedding candidate (ntnumba.partition.embedding) against slow references."""
import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import curve_fit

import naive_embedding as naive
from ntnumba.partition import embedding as emb
from ntnumba.partition import select


def _lists(rng, n, k):
    nn = np.array([rng.choice(np.r_[:i, i + 1:n], k, replace=False) for i in range(n)])
    dist = np.sort(rng.uniform(0.0, 2.0, (n, k)), axis=1)
    return nn, dist


def test_memberships_match_the_root_of_the_row_sum():
    rng = np.random.default_rng(1)
    _, dist = _lists(rng, 40, 7)
    dist[3, :2] = 0.0          # duplicates: zero distances
    dist[5, 5:] = np.inf       # short list
    got = emb.memberships(dist)
    ref = naive.memberships(dist)
    np.testing.assert_allclose(got, ref, atol=2e-4)
    sums = got.sum(axis=1)
    assert sums[3] == 3.0  # three rows at distance <= rho: the target log2(7) is out of reach
    np.testing.assert_allclose(np.delete(sums, 3), np.log2(7), atol=1e-4)


def test_fuzzy_graph_is_the_fuzzy_union():
    rng = np.random.default_rng(2)
    nn, dist = _lists(rng, 30, 5)
    nn[4, 3] = -1
    G = emb.fuzzy_graph(nn, dist, 30).toarray()
    w = naive.memberships(np.where(nn >= 0, dist, np.inf))
    np.testing.assert_allclose(G, naive.fuzzy_union(nn, w, 30), atol=2e-4)


def test_layout_matches_the_edge_by_edge_reference():
    rng = np.random.default_rng(3)
    nn, dist = _lists(rng, 25, 4)
    G = emb.fuzzy_graph(nn, dist, 25)
    head, tail, eps = emb.sample_schedule(G, 30)
    Z0 = rng.uniform(0, 10, (25, 3))
    got = emb.layout(Z0.copy(), head, tail, eps, 30, 1.9, 0.8, 7)
    ref = naive.layout(Z0, head.tolist(), tail.tolist(), eps.tolist(), 30, 1.9, 0.8, 7)
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10)
    assert not np.allclose(got, Z0)


def test_sample_schedule_drops_light_edges_and_spaces_the_rest():
    W = sparse.csr_matrix(np.array([[0, 1.0, 0.5, 0.001], [1.0, 0, 0, 0],
                                    [0.5, 0, 0, 0], [0.001, 0, 0, 0]]))
    head, tail, eps = emb.sample_schedule(W, 100)
    pairs = dict(zip(zip(head.tolist(), tail.tolist()), eps.tolist()))
    assert pairs == {(0, 1): 1.0, (1, 0): 1.0, (0, 2): 2.0, (2, 0): 2.0}


def test_curve_parameters_fit_min_dist_zero():
    # umap-learn's find_ab_params(spread=1, min_dist=0): 1 / (1 + a x^2b) fitted to exp(-x)
    x = np.linspace(0, 3, 300)
    (a, b), _ = curve_fit(lambda x, a, b: 1.0 / (1.0 + a * x ** (2 * b)), x, np.exp(-x))
    assert abs(a - emb.CURVE_A) < 1e-4 and abs(b - emb.CURVE_B) < 1e-4


def test_partition_cut_matches_loops():
    rng = np.random.default_rng(4)
    A = rng.uniform(0, 1, (12, 12)) * (rng.uniform(size=(12, 12)) < 0.4)
    W = sparse.csr_matrix(A + A.T)
    lab = rng.integers(0, 3, 12)
    assert emb.partition_cut(W, lab) == pytest.approx(naive.normalised_cut(W, lab), rel=1e-12)


def _rings(n=60, seed=0):
    """Two clusters of 20 features that an embedding separates."""
    rng = np.random.default_rng(seed)
    X = np.r_[rng.normal(0, 1, (n, 20)) + 3, rng.normal(0, 1, (n, 20)) - 3]
    return X, np.repeat([0, 1], n)


def test_embedding_partition_finds_separated_clusters():
    X, y = _rings()
    lab = emb.embedding_partition(X - X.mean(0), 2, 0)
    assert sorted(np.bincount(lab).tolist()) == [60, 60]
    assert abs(np.corrcoef(lab, y)[0, 1]) == pytest.approx(1.0)


def test_embedding_is_reproducible_and_seeded():
    X, _ = _rings(30, 1)
    a, b, c = emb.embed(X, 3), emb.embed(X, 3), emb.embed(X, 4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def _choice(X, labels, monkeypatch, proposal):
    monkeypatch.setattr(emb, "embedding_partition", lambda Y, C, seed: proposal)
    info = {"mean": X.mean(0), "V": np.zeros((0, X.shape[1]))}
    p = type("P", (), {"n_neighbors": 5})()
    return select.embedding_choice(X, labels, info, 2, p, 0)


def test_embedding_choice_keeps_the_partition_of_lower_cut(monkeypatch):
    X, y = _rings()
    noise = np.random.default_rng(0).integers(0, 2, y.size)
    lab, kept = _choice(X, noise, monkeypatch, y)
    assert kept and np.array_equal(lab, y)
    lab, kept = _choice(X, y, monkeypatch, noise)
    assert not kept and np.array_equal(lab, y)
