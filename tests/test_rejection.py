"""The rejection option: ``predict(X, reject=...)`` labels -1 the samples whose score is high."""
import numpy as np
import pytest

from ntnumba import NTClustering
from ntnumba.datasets import load_demo, normalize_images
from ntnumba.estimators.clustering import candidate_scores

RULES = [dict(assign="graph", init="graph"), dict(assign="objective", init="k-means++"),
         dict(assign="paper", init="k-means++")]


def _blobs_with_outliers(seed=0, C=3, n_per=40, N=8):
    rng = np.random.default_rng(seed)
    centers = 6.0 * rng.standard_normal((C, N))
    y = np.repeat(np.arange(C), n_per)
    X = centers[y] + rng.standard_normal((y.size, N))
    held = centers[np.repeat(np.arange(C), 15)] + rng.standard_normal((3 * 15, N))
    # synthetic outliers: uniform in a box three times wider than the data, away from the blobs
    span = np.abs(X).max()
    out = rng.uniform(-3 * span, 3 * span, size=(400, N))
    d = np.min(np.linalg.norm(out[:, None, :] - centers[None], axis=2), axis=1)
    out = out[d > 4 * span / 3][:40]
    return X, held, out


@pytest.fixture(scope="module")
def blobs():
    return _blobs_with_outliers()


@pytest.mark.parametrize("kw", RULES, ids=lambda kw: kw["assign"])
def test_auto_threshold_rejects_synthetic_outliers(blobs, kw):
    X, held, out = blobs
    m = NTClustering(3, n_components=24, max_iter=5, random_state=0, **kw).fit(X)
    assert np.isfinite(m.reject_threshold_)
    assert np.mean(m.predict(out, reject="auto") == -1) >= 0.9
    assert np.mean(m.predict(held, reject="auto") == -1) <= 0.05
    # the training samples themselves: at most a few beyond the fence
    assert np.mean(m.predict(X, reject="auto") == -1) <= 0.05


def test_rejection_only_relabels_and_is_monotone_in_the_threshold(blobs):
    X, held, out = blobs
    Z = np.r_[held, out]
    m = NTClustering(3, n_components=24, max_iter=3, random_state=0).fit(X)
    plain = m.predict(Z)
    np.testing.assert_array_equal(m.predict(Z, reject=None), plain)
    scores = candidate_scores(m, Z).min(axis=1)
    counts = []
    for thr in np.quantile(scores, [0.0, 0.2, 0.5, 0.9]):
        lab = m.predict(Z, reject=float(thr))
        keep = lab != -1
        np.testing.assert_array_equal(lab[keep], plain[keep])      # others keep their label
        np.testing.assert_array_equal(~keep, scores > thr)        # exactly the high scores
        counts.append(int(np.sum(~keep)))
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1]
    assert np.all(m.predict(Z, reject=float(scores.max())) != -1)


@pytest.mark.parametrize("bad, err", [("yes", ValueError), (np.nan, ValueError),
                                      ([1.0], TypeError)])
def test_reject_validation(blobs, bad, err):
    X, _, _ = blobs
    m = NTClustering(3, n_components=24, max_iter=2, random_state=0).fit(X)
    with pytest.raises(err, match="reject"):
        m.predict(X, reject=bad)


def test_noise_images_among_coil_objects():
    """Real images (5 COIL-20 objects, shipped copy) vs Gaussian-noise images."""
    X, y = load_demo("16x16")
    keep = y < 5
    X, y = X[keep], y[keep]
    rng = np.random.default_rng(0)
    train = rng.random(y.size) < 0.7
    noise = normalize_images(rng.standard_normal((30, X.shape[1])))
    m = NTClustering(5, n_components=300, random_state=0).fit(X[train])
    assert np.mean(m.predict(noise, reject="auto") == -1) == 1.0
    assert np.mean(m.predict(X[~train], reject="auto") == -1) <= 0.05
