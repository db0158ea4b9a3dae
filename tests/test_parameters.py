"""Parameters that change nothing the estimator returns are named by a warning (issue 26)."""
import warnings

import numpy as np
import pytest

from ntnumba import NTClustering
from ntnumba.estimators.clustering import NO_EFFECT

X = np.random.default_rng(0).standard_normal((60, 5)) + np.repeat(np.eye(5)[:3] * 4, 20, axis=0)

#: per entry of NO_EFFECT: the settings under which it has no effect, and a non-default value
CASES = {
    "tol": ({"max_iter": 1}, 0.3),
    "online_rate": ({"online_fraction": None}, 0.9),
    "online_fraction": ({"learn_transform": False}, 0.5),
    "n_components": ({"learn_transform": False}, 12),
    "lambda2": ({"learn_transform": False}, 2.0),
    "lambda3": ({"learn_transform": False}, 2.0),
    "lambda4": ({"learn_transform": False}, 2.0),
}


def _outputs(**kw):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        small = {"n_components": 10} if kw.get("learn_transform", True) else {}
        m = NTClustering(3, **dict(small, random_state=0, **kw)).fit(X)
    said = [str(x.message) for x in w if issubclass(x.category, UserWarning)
            and "has no effect" in str(x.message)]
    return (m.labels_, m.transform(X), m.score(X), m.components_, m.predict(X[:7] * 1.1)), said


def test_every_entry_has_a_case():
    assert set(CASES) == set(NO_EFFECT)


@pytest.mark.parametrize("name", sorted(CASES))
def test_setting_without_effect_changes_nothing_and_says_so(name):
    where, value = CASES[name]
    base, said0 = _outputs(**where)
    assert not said0
    other, said = _outputs(**dict(where, **{name: value}))
    for a, b in zip(base, other):
        np.testing.assert_array_equal(a, b)
    assert any(s.startswith(f"{name}={value!r} has no effect") for s in said)


@pytest.mark.parametrize("name, where, value", [
    ("tol", {"max_iter": 3}, 0.3), ("lambda2", {}, 2.0), ("n_components", {}, 12),
    ("online_rate", {"online_fraction": 0.5}, 0.9)])
def test_setting_with_effect_is_not_named(name, where, value):
    base, _ = _outputs(**where)
    other, said = _outputs(**dict(where, **{name: value}))
    assert not said
    assert not all(np.array_equal(a, b) for a, b in zip(base, other))
