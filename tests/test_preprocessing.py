"""What the estimator does to a user's data before the transform: ``scaling`` and
``n_components="auto"``."""
import warnings

import numpy as np
import pytest
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import ntnumba
from ntnumba import NTClustering

SMALL = dict(n_components=20, max_iter=2, random_state=0)
# the rules that do not standardise the features themselves (the graph rule does: no warning)
OBJECTIVE = dict(SMALL, assign="objective", init="k-means++")


@pytest.fixture(scope="module")
def mixed_units():
    """Three clusters in 5 features of very different units and offsets (as raw tabular data)."""
    rng = np.random.default_rng(3)
    y = np.repeat([0, 1, 2], 20)
    Z = 3.0 * rng.standard_normal((3, 5))[y] + rng.standard_normal((60, 5))
    units = np.array([1e-3, 1.0, 50.0, 2e3, 0.2])
    offsets = np.array([0.0, 10.0, -300.0, 5e4, 1.0])
    return Z * units + offsets, Z, y


def test_standard_is_standard_scaler_then_rms(mixed_units):
    X, _, _ = mixed_units
    m = NTClustering(3, scaling="standard", **SMALL).fit(X)
    ref = StandardScaler().fit_transform(X)                  # unit variance: the rms factor is 1
    np.testing.assert_allclose(m._scaled(X, m.scale_), ref, atol=1e-12)
    np.testing.assert_allclose(m.feature_mean_, X.mean(axis=0))
    np.testing.assert_allclose(1.0 / m.feature_scale_, X.std(axis=0))
    # the same model as the default scaling on data standardised by scikit-learn
    r = NTClustering(3, **SMALL).fit(ref)
    np.testing.assert_array_equal(m.labels_, r.labels_)
    np.testing.assert_allclose(m.components_, r.components_, rtol=1e-4, atol=1e-7)
    np.testing.assert_array_equal(m.predict(X[::3]), r.predict(ref[::3]))


def test_standard_makes_units_irrelevant_and_rms_warns(mixed_units):
    X, Z, y = mixed_units
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = NTClustering(3, scaling="standard", **SMALL).fit(X)     # no warning
        b = NTClustering(3, scaling="standard", **SMALL).fit(Z)     # equal scales: none either
        NTClustering(3, **SMALL).fit(Z)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    with pytest.warns(UserWarning, match=r"feature scales differ by orders of magnitude "
                                         r"\(standard deviation of feature 3.*"
                                         r"scaling='standard'"):
        NTClustering(3, **OBJECTIVE).fit(X)
    with pytest.warns(UserWarning, match="orders of magnitude"):
        NTClustering(3, scaling="none", **OBJECTIVE).fit(X)


@pytest.mark.parametrize("call", ["fit", "fit_predict", "pipeline"])
def test_scale_warning_names_the_users_line(mixed_units, call):
    """The warning names the line that called ntnumba (this file), not a frame inside ntnumba
    or scikit-learn (ClusterMixin.fit_predict and Pipeline.fit call fit)."""
    X, _, _ = mixed_units
    model = NTClustering(3, **OBJECTIVE)
    with pytest.warns(UserWarning, match="orders of magnitude") as rec:
        if call == "pipeline":
            Pipeline([("nt", model)]).fit(X)
        else:
            getattr(model, call)(X)
    assert {w.filename for w in rec if "orders of magnitude" in str(w.message)} == {__file__}


def test_constant_feature_and_float32(mixed_units):
    X, _, _ = mixed_units
    X = np.c_[X, np.full(60, 7.0)].astype(np.float32)
    m = NTClustering(3, scaling="standard", **SMALL).fit(X)
    Xs = m._scaled(X, 1.0)
    assert Xs.dtype == np.float32 and m.components_.dtype == np.float32
    np.testing.assert_array_equal(Xs[:, -1], 0.0)             # centred, not divided by 0
    assert np.all(np.isfinite(Xs))


def test_none_is_none_and_bad_values(mixed_units):
    X, _, _ = mixed_units
    a = NTClustering(3, scaling="none", **SMALL).fit(X[:, :2])
    b = NTClustering(3, scaling=None, **SMALL).fit(X[:, :2])
    assert a.scale_ == b.scale_ == 1.0
    np.testing.assert_array_equal(a.labels_, b.labels_)
    with pytest.raises(ValueError, match=r"scaling: expected one of \['none', 'rms', "
                                         r"'standard'\], got 'minmax'"):
        NTClustering(3, scaling="minmax", **SMALL).fit(X)
    with pytest.raises(ValueError, match="scaling: 'standard' is not supported by the chunked"):
        NTClustering(3, scaling="standard", **SMALL).fit(X, chunk_size=20)


def test_standard_survives_save_and_partial_fit(mixed_units, tmp_path):
    X, _, _ = mixed_units
    m = NTClustering(3, scaling="standard", **SMALL).fit(X)
    path = m.save(tmp_path / "m.npz") or tmp_path / "m.npz"
    loaded = ntnumba.load(path)
    np.testing.assert_array_equal(loaded.feature_mean_, m.feature_mean_)
    np.testing.assert_array_equal(loaded.predict(X), m.predict(X))
    p = NTClustering(3, scaling="standard", n_components=20, assign="objective",
                     init="k-means++", random_state=0)
    p.partial_fit(X[:30])
    np.testing.assert_allclose(p.feature_mean_, X[:30].mean(axis=0))   # from the first chunk
    p.partial_fit(X[30:])
    np.testing.assert_allclose(p.feature_mean_, X[:30].mean(axis=0))
    r = NTClustering(3, scaling="rms", n_components=20, assign="objective")
    r.fit(X[:, :2])
    assert not hasattr(r, "feature_mean_")
    r.set_params(scaling="standard").fit(X)
    r.set_params(scaling="rms").fit(X[:, :2])     # a refit with another mode drops the stats
    assert not hasattr(r, "feature_mean_")


# ------------------------------------------------------------------------ n_components="auto"
@pytest.mark.parametrize("n_features, expected", [
    (4, 2100), (441, 2100), (500, 2100), (576, 2100), (2100, 2100), (2101, 2100),
    (10000, 2100)])
def test_auto_components_rule(n_features, expected):
    assert NTClustering(3)._params(n_features).n_components == expected      # the default
    assert NTClustering(3, n_components="auto")._params(n_features).n_components == expected


def test_errors_suggest_auto():
    with pytest.raises(ValueError, match=r"n_components: expected one of \['auto'\]"):
        NTClustering(3, n_components="big")._params(4)
