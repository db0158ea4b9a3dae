"""The graph rule's label-free representation rules (ntnumba/partition/select.py)."""
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris, make_blobs
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler

import naive_graph
from ntnumba import NTClustering
from ntnumba.partition.graph import DEFAULT_SHARED, graph_partition, principal_coordinates
from ntnumba.partition.select import (TRUNCATE_FACTOR, constant_coordinate, euclidean_graph,
                             euclidean_partition, feature_weights, merge_small, partition,
                             rules_partition, truncated_partition)

SMALL = dict(n_components=40, random_state=0)


def test_feature_weights_standardise_only_disparate_scales():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 4)) * [1.0, 2.0, 0.5, 1.0] + 5.0
    assert feature_weights(X) is None  # comparable scales: left alone
    Y = X * [1.0, 1.0, 1.0, 300.0]
    w = feature_weights(Y)
    sd = (Y * w).std(axis=0)
    np.testing.assert_allclose(sd, sd[0])  # every feature at one scale
    np.testing.assert_allclose(np.sum(sd ** 2), np.sum(Y.std(axis=0) ** 2))  # total kept
    Z = np.column_stack([Y, np.full(200, 3.0)])  # a constant feature gets weight 0
    assert feature_weights(Z)[-1] == 0.0
    assert feature_weights(np.zeros((5, 3))) is None


def test_constant_coordinate_only_for_few_features():
    X = np.random.default_rng(0).standard_normal((30, 17))
    assert constant_coordinate(X) is None
    med = np.median([np.sqrt(np.sum((x - X[:, :3].mean(axis=0)) ** 2)) for x in X[:, :3]])
    assert constant_coordinate(X[:, :3]) == pytest.approx(med)


@pytest.mark.parametrize("learn_transform", [True, False])
def test_unscaled_features_do_not_decide_the_graph(learn_transform):
    # 3 blobs in 20 features (more than the few-features rule's 16), plus 12 pure-noise features
    # 1000 times larger (more than the shared directions remove): as given, the graph's angles
    # see only the noise
    X, y = make_blobs([40, 40, 40], n_features=20, cluster_std=2.0, random_state=3)
    noise = 1000.0 * np.random.default_rng(0).standard_normal((120, 12))
    X = np.hstack([X, noise])
    kw = dict(SMALL, learn_transform=learn_transform)
    auto = NTClustering(3, **kw).fit(X)
    as_is = NTClustering(3, representation="as-is", **kw).fit(X)
    assert adjusted_rand_score(y, auto.labels_) > 0.9
    assert adjusted_rand_score(y, as_is.labels_) < 0.3
    if learn_transform:  # new samples see the same representation
        assert adjusted_rand_score(auto.labels_, auto.predict(X)) > 0.9


def test_few_features_count_the_distance():
    # 2-D blobs around the data's centre: angles from the centre alone mix them
    centers = [[0, 0], [6, 0], [-6, 0], [0, 6], [0, -6]]
    X, y = make_blobs(60, centers=centers, cluster_std=1.0, random_state=0)
    auto = NTClustering(5, **SMALL).fit(X)
    as_is = NTClustering(5, representation="as-is", **SMALL).fit(X)
    assert adjusted_rand_score(y, auto.labels_) > 0.85
    assert adjusted_rand_score(y, as_is.labels_) < adjusted_rand_score(y, auto.labels_) - 0.2


def test_representation_is_validated():
    with pytest.raises(ValueError, match="representation"):
        NTClustering(2, representation="scaled").fit(np.eye(4))


def _dense_euclidean_graph(X, k):
    """Slow obvious reference of the few-features graph: all distances, k nearest others."""
    n = X.shape[0]
    D = np.array([[np.sqrt(np.sum((a - b) ** 2)) for b in X] for a in X])
    K = np.zeros((n, n))
    for i in range(n):
        others = [j for j in np.argsort(D[i], kind="stable") if j != i]
        K[i, others[:k]] = 1.0
    return (K + K.T) / 2


@pytest.mark.parametrize("k", [1, 4, 10])
def test_euclidean_graph_matches_the_dense_reference(k):
    X = np.random.default_rng(k).standard_normal((40, 3))
    np.testing.assert_array_equal(euclidean_graph(X, k).toarray(), _dense_euclidean_graph(X, k))


def test_euclidean_partition_matches_the_reference_pipeline():
    # 3 blobs in 3 features, the first rows repeated: equal rows are one node, same label
    X, y = make_blobs([30, 30, 30], n_features=3, cluster_std=1.0, random_state=5)
    Xr = np.vstack([X, X[:7]])
    labels, info = euclidean_partition(Xr, 3, 10, 0)
    np.testing.assert_array_equal(labels[90:], labels[:7])
    # reference: dense graph, dense eigenvectors of D^-1/2 W D^-1/2, k-means on D^-1/2 U
    W = _dense_euclidean_graph(X, 10)
    d = W.sum(axis=1)
    vals, U = np.linalg.eigh(W / np.sqrt(np.outer(d, d)))
    maps = U[:, ::-1][:, :3] / np.sqrt(d)[:, None]
    ref = KMeans(3, n_init=10, random_state=0).fit_predict(maps)
    assert adjusted_rand_score(ref, labels[:90]) == 1.0
    assert adjusted_rand_score(y, labels[:90]) == 1.0
    assert info["ncut"][0] == pytest.approx(3 - vals[::-1][:3].sum(), abs=1e-8)


def test_few_features_use_the_euclidean_graph(monkeypatch):
    # standardised iris: the angular graph with the constant coordinate reaches ARI 0.43 here,
    # the Euclidean graph 0.65 (docs/dev_results.md: CA 72.7 -> 84.7)
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    model = NTClustering(3, **SMALL).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.6
    np.testing.assert_array_equal(model.predict(X), model.labels_)
    # only for few features, and not with representation="as-is"
    from ntnumba.partition import select as _select

    def fail(*args, **kwargs):
        raise AssertionError("Euclidean graph used")

    monkeypatch.setattr(_select, "euclidean_partition", fail)
    NTClustering(3, representation="as-is", **SMALL).fit(X)
    many = np.hstack([X, X, X, X, X[:, :1]])  # 17 features
    NTClustering(3, **SMALL).fit(many)
    with pytest.raises(AssertionError, match="Euclidean"):
        NTClustering(3, **SMALL).fit(many[:, :16])


def _subspace_blobs(seed):
    """3 blobs x 30 in 3 of 40 directions, noise in the other 37, rotated at random."""
    X, y = make_blobs([30, 30, 30], n_features=3, cluster_std=1.0, center_box=(-6.0, 6.0),
                      random_state=seed)
    rng = np.random.default_rng(seed)
    X = np.hstack([X, 0.8 * rng.standard_normal((90, 37))])
    return X @ np.linalg.qr(rng.standard_normal((40, 40)))[0], y


def test_principal_coordinates_match_the_svd():
    X, _ = _subspace_blobs(0)
    Z, mean, P = principal_coordinates(X, 12)
    Zn, Pn = naive_graph.principal_coordinates(X, 12)
    np.testing.assert_allclose(mean, X.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(Z @ Z.T, Zn @ Zn.T, atol=1e-8)  # the same angles
    np.testing.assert_allclose(P.T @ P, Pn.T @ Pn, atol=1e-8)  # the same directions
    # the partition of those coordinates gives its r removed directions in X's features
    p = SimpleNamespace(n_neighbors=5, n_shared=2)
    _, info = truncated_partition(X, 3, p, 0)
    assert info["truncated"] == 12 and info["V"].shape == (2, 40)
    np.testing.assert_allclose(info["V"].T @ info["V"], Pn[:2].T @ Pn[:2], atol=1e-8)


@pytest.mark.parametrize("seed, truncated", [(1, True), (0, False)])
def test_the_cut_chooses_the_truncated_rows(seed, truncated):
    X, y = _subspace_blobs(seed)
    p = SimpleNamespace(n_neighbors=5, n_shared=DEFAULT_SHARED, representation="auto")
    labels, info = partition(X, 3, p, 0)
    # reference: the partitions of the rows and of their SVD coordinates, the lower cut by
    # more than 2% of the rows' cut
    la, ia = graph_partition(X, 3, random_state=0)
    Zn, Pn = naive_graph.principal_coordinates(X, TRUNCATE_FACTOR * 3)
    lt, it = graph_partition(Zn, 3, random_state=0)
    cut_a, cut_t = ia["ncut"][ia["n_shared"]], it["ncut"][it["n_shared"]]
    assert (cut_t < 0.98 * cut_a) == truncated  # the case this parameter set is about
    assert adjusted_rand_score(lt if truncated else la, labels) == 1.0
    assert ("truncated" in info) == truncated
    assert info["n_shared"] == (it if truncated else ia)["n_shared"]
    # predict's rows: the samples with the partition's r leading principal directions removed
    r = info["n_shared"]
    np.testing.assert_allclose(info["mean"], X.mean(axis=0), atol=1e-10)
    np.testing.assert_allclose(info["V"].T @ info["V"], Pn[:r].T @ Pn[:r], atol=1e-8)
    # representation="as-is": the rows themselves
    labels, info = partition(X, 3, SimpleNamespace(**{**vars(p), "representation": "as-is"}), 0)
    assert "truncated" not in info and adjusted_rand_score(la, labels) == 1.0


def test_truncated_fit_predicts_its_labels():
    X, y = _subspace_blobs(1)
    model = NTClustering(3, **SMALL).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.9
    assert model.shared_components_.shape[1] == X.shape[1]
    np.testing.assert_array_equal(model.predict(X), model.labels_)


def test_truncated_rows_count_each_distinct_row_once():
    """30 of the rows repeated 20 more times: the truncated rows' partition (kept) of the
    distinct rows, and the default fit's labels, are those of the data without copies (the
    directions are those of the distinct rows, as in the partition of the rows)."""
    X, _ = make_blobs(300, n_features=20, centers=4, cluster_std=6.0, random_state=2)
    rng = np.random.default_rng(0)
    heavy = np.r_[np.arange(300), np.repeat(rng.choice(300, 30, replace=False), 20)]
    p = SimpleNamespace(n_neighbors=5, n_shared=DEFAULT_SHARED, representation="auto")
    lab_u, info_u = partition(X, 4, p, 0)
    lab_r, info_r = partition(X[heavy], 4, p, 0)
    assert info_u["representation"] == info_r["representation"] == ["16 principal directions"]
    np.testing.assert_array_equal(lab_r, lab_u[heavy])
    np.testing.assert_allclose(info_r["mean"], info_u["mean"], atol=1e-12)
    np.testing.assert_allclose(info_r["V"], info_u["V"], atol=1e-12)
    one = NTClustering(4, random_state=0).fit(X)
    many = NTClustering(4, random_state=0).fit(X[heavy])
    np.testing.assert_array_equal(many.initial_labels_, one.initial_labels_[heavy])
    np.testing.assert_array_equal(many.labels_, one.labels_[heavy])


@pytest.mark.parametrize("share, kept", [(0.99, False), (0.97, True)])
def test_truncated_rows_need_a_cut_lower_by_the_margin(monkeypatch, share, kept):
    """A truncated cut lower by 1% than the rows' cut is not kept, lower by 3% is (the 2%
    margin, TRUNCATE_MARGIN): by fewer_cut and through partition's choice."""
    import ntnumba.partition.graph as G
    import ntnumba.partition.select as S

    rows = {"n_shared": 2, "ncut": {0: 0.5, 2: 0.4}, "mean": np.zeros(20), "V": np.zeros((2, 20))}
    alt = {"n_shared": 0, "ncut": {0: share * 0.4}, "mean": np.zeros(20), "V": np.zeros((0, 20)),
           "truncated": 16}
    assert S.fewer_cut(alt, rows) == kept
    assert S.fewer_cut(alt, rows, margin=0.0)  # lower at all: kept without a margin
    # partition: the rows' and the truncated rows' partitions replaced by these two
    X = np.random.default_rng(0).standard_normal((30, 20))
    lab_rows, lab_alt = np.arange(30) % 4, np.arange(30) // 8
    monkeypatch.setattr(G, "graph_partition", lambda *a, **k: (lab_rows, dict(rows)))
    monkeypatch.setattr(S, "truncated_partition", lambda *a, **k: (lab_alt, dict(alt)))
    monkeypatch.setattr(S, "embedding_choice", lambda X, labels, *a, **k: (labels, False))
    p = SimpleNamespace(n_neighbors=5, n_shared=DEFAULT_SHARED, representation="auto")
    labels, info = partition(X, 4, p, 0)
    np.testing.assert_array_equal(labels, lab_alt if kept else lab_rows)
    assert info["n_shared"] == (0 if kept else 2)
    assert ("16 principal directions" in info["representation"]) == kept


def _blobs_and_clique(d, seed):
    """3 blobs of 300 (unit spread, centres 7 apart) and a tight clique of 12 far away (a
    separate component of the k-NN graph, below the 5% of n / C of rule 6)."""
    rng = np.random.default_rng(seed)
    centres = np.zeros((3, d))
    centres[1, 0] = centres[2, 1] = 7.0
    y = np.repeat(np.arange(3), 300)
    X = np.r_[centres[y] + rng.standard_normal((900, d)), 30.0 + 0.3 * rng.standard_normal((12, d))]
    return X, y


@pytest.mark.parametrize("d, seed", [(2, 1), (30, 2)])
def test_a_degenerate_partition_is_recovered(d, seed):
    """The clique took a whole cluster (two blobs merged) by rules 1-5; rule 6 gives the
    blobs back, the clique in one of them (the Euclidean graph at 2 features, the angular
    graph at 30)."""
    X, y = _blobs_and_clique(d, seed)
    p = SimpleNamespace(n_neighbors=5, n_shared=DEFAULT_SHARED, representation="auto")
    old, _ = rules_partition(X, 3, p, 0)
    assert np.bincount(old).min() == 12 and adjusted_rand_score(y, old[:900]) < 0.6
    labels, info = partition(X, 3, p, 0)
    assert adjusted_rand_score(y, labels[:900]) > 0.99
    assert np.unique(labels[900:]).size == 1 and np.bincount(labels).min() >= 299
    assert info["representation"][-1] == "4 clusters merged (one of 12 samples)"


def test_a_partition_with_a_small_real_cluster_is_kept():
    """5 blobs of 400 down to 10 samples (the suite's blobs-unbal, 10 above 5% of n / C):
    rule 6 changes nothing, and the 10 are a cluster."""
    sizes = [400, 150, 60, 25, 10]
    X, y = make_blobs(sizes, n_features=10, cluster_std=2.0, center_box=(-10.0, 10.0),
                      random_state=0)
    p = SimpleNamespace(n_neighbors=5, n_shared=DEFAULT_SHARED, representation="auto")
    labels, info = partition(X, 5, p, 0)
    np.testing.assert_array_equal(labels, rules_partition(X, 5, p, 0)[0])
    assert adjusted_rand_score(y, labels) == 1.0
    assert not any("merged" in r for r in info["representation"])


def test_merge_small_gives_the_small_clusters_to_their_nearest_large_one():
    """Clusters outside the 3 largest go, sample by sample, to the majority label of the 5
    most similar (cosine of the centred rows) samples of the 3 largest: brute force."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0, 0.0], [10.0, 0.0, 0.0], [0.0, 10.0, 0.0], [11.0, 1.0, 0.0],
                        [0.0, 0.0, 12.0]])
    lab = np.repeat(np.arange(5), [50, 40, 30, 4, 3])
    X = centres[lab] + 0.5 * rng.standard_normal((lab.size, 3))
    info = {"mean": X.mean(axis=0), "V": np.zeros((0, 3))}
    out = merge_small(X, lab, info, 3, SimpleNamespace(n_neighbors=5, representation="as-is"))
    R = X - X.mean(axis=0)
    R /= np.linalg.norm(R, axis=1, keepdims=True)
    big = lab < 3
    expect = lab.copy()
    for i in np.flatnonzero(~big):
        near = np.argsort(-(R[big] @ R[i]))[:5]
        expect[i] = np.bincount(lab[big][near]).argmax()
    assert set(expect[~big]) == {0, 1}  # both small clusters moved, to different ones
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("sep, computed", [(30.0, False), (1.0, True)])
def test_rules_4_and_5_skipped_when_no_cut_can_be_lower(monkeypatch, sep, computed):
    """A partition without crossing edges (blobs far apart, cut 0): rules 4 and 5 cannot
    lower the cut, so neither is computed; on overlapping blobs both are."""
    import ntnumba.partition.embedding as E
    import ntnumba.partition.select as S

    calls = []
    real_t, real_e = S.truncated_partition, E.embedding_partition
    monkeypatch.setattr(S, "truncated_partition",
                        lambda *a, **k: calls.append("4") or real_t(*a, **k))
    monkeypatch.setattr(E, "embedding_partition",
                        lambda *a, **k: calls.append("5") or real_e(*a, **k))
    X, _ = make_blobs(300, n_features=40, centers=3, cluster_std=1.0, center_box=(0, sep),
                      random_state=1)
    p = SimpleNamespace(n_neighbors=5, n_shared=DEFAULT_SHARED, representation="auto")
    labels, info = rules_partition(X, 3, p, 0)
    assert (calls == ["4", "5"]) == computed, calls
    if not computed:   # the cut that made them pointless
        assert info["ncut"][info["n_shared"]] < 1e-9
