"""The graph rule's label-free representation rules (ntnumba/_select.py)."""
import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import adjusted_rand_score

from ntnumba import NTClustering
from ntnumba._select import constant_coordinate, feature_weights

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
