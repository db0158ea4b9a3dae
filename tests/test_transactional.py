"""A refit that fails or is interrupted leaves the previous fitted state exactly as it was.

Exceptions (MemoryError, KeyboardInterrupt, ValueError) are injected at every phase of a fit
(scaling, X^T X, initialisation, graph step, Stage 1 of the first iteration, assembly of the
fitted state) on every path; an interrupt after a complete iteration keeps that iterate with a
warning (tests/test_estimator.py).
"""
import copy
import dataclasses

import numpy as np
import pytest

from ntnumba import NTClustering
from ntnumba.engine import loop as _driver
from ntnumba.engine import passes as _passes

from test_stream import _blobs


def _snapshot(model):
    return copy.deepcopy(vars(model))


def _same(a, b, where):
    if dataclasses.is_dataclass(a):
        _same(vars(a), vars(b), where)
    elif isinstance(a, dict):
        assert set(a) == set(b), (where, set(a) ^ set(b))
        for k in a:
            _same(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert a == b or (a != a and b != b), where


PHASES = [(_driver, "rms_scale"), (_driver, "gram"), (_driver, "initialise"),
          (_driver, "graph_labels"), (_passes, "pass_stage1"), (_driver, "fitted_attributes")]
# partial_fit continuing a fit: no scaling, initialisation or partition, a vote instead
PARTIAL_PHASES = [(_driver, "gram"), (_driver, "_vote"), (_passes, "pass_stage1"),
                  (_driver, "fitted_attributes")]


def _raiser(exc):
    def fail(*args, **kwargs):
        raise exc("injected")
    return fail


@pytest.fixture(scope="module")
def data():
    X, _ = _blobs()
    X2, _ = _blobs(n_per=30, seed=5)
    return X, X2


@pytest.mark.parametrize("path", ["memory", "chunked", "partial"])
@pytest.mark.parametrize("exc", [MemoryError, KeyboardInterrupt, ValueError])
def test_failed_refit_keeps_the_fitted_state(data, path, exc, monkeypatch):
    X, X2 = data
    model = NTClustering(3, n_components=24, random_state=0, max_iter=2)
    model.fit(X)
    before = _snapshot(model)
    labels = model.predict(X)
    for module, name in PARTIAL_PHASES if path == "partial" else PHASES:
        # an interrupt inside the iterations of a fit keeps the last complete iterate (here
        # the new fit's initial one) with a warning: tested at the end
        if exc is KeyboardInterrupt and name == "pass_stage1" and path != "partial":
            continue
        with monkeypatch.context() as mp:
            mp.setattr(module, name, _raiser(exc))
            model.set_params(random_state=1)
            with pytest.raises(exc):
                if path == "memory":
                    model.fit(X2)
                elif path == "chunked":
                    model.fit(X2, chunk_size=25)
                else:
                    model.partial_fit(X2)
        model.set_params(random_state=0)
        _same(before, vars(model), f"{path}/{name}")
    np.testing.assert_array_equal(model.predict(X), labels)
    if exc is KeyboardInterrupt and path != "partial":
        monkeypatch.setattr(_passes, "pass_stage1", _raiser(exc))
        with pytest.warns(RuntimeWarning, match="interrupted: keeping iteration 0"):
            with pytest.raises(KeyboardInterrupt):
                model.fit(X2) if path == "memory" else model.fit(X2, chunk_size=25)
        assert model.n_iter_ == 0 and model.labels_.shape == (len(X2),)


def test_refit_failing_validation_keeps_the_fitted_state(data):
    X, _ = data
    model = NTClustering(3, n_components=24, random_state=0).fit(X)
    before = _snapshot(model)
    bad = X.copy()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="X"):
        model.fit(bad)
    with pytest.raises(ValueError, match="n_similarity"):   # valid X, an invalid parameter
        model.set_params(n_similarity=0).fit(np.random.default_rng(0).standard_normal((50, 30)))
    model.set_params(n_similarity=2)
    with pytest.raises(ValueError, match="n_samples"):
        model.fit(X[:2], chunk_size=2)
    _same(before, vars(model), "validation")
    assert model.predict(X).shape == (len(X),)


def test_refit_on_other_features_replaces_everything(data):
    """A successful refit leaves no attribute of the previous fit behind (graph -> objective:
    no n_shared_, shared directions or reference set)."""
    X, _ = data
    model = NTClustering(3, n_components=24, random_state=0).fit(X)
    assert hasattr(model, "n_shared_")
    model.set_params(assign="objective", init="k-means++").fit(X[:, :6])
    assert model.n_features_in_ == 6
    for k in ("n_shared_", "graph_cut_", "shared_mean_"):
        assert not hasattr(model, k), k
    assert model._fitted.ref_X is None and model._fitted.ref_labels is None


def _once(module, name, monkeypatch):
    """``module.name`` raising KeyboardInterrupt at its first call, itself afterwards."""
    real, calls = getattr(module, name), []

    def first_interrupts(*args, **kwargs):
        calls.append(name)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, first_interrupts)
    return calls


@pytest.mark.parametrize("where", ["fitted_attributes", "set_training_scores"])
def test_interrupt_after_the_last_iteration_keeps_it(data, where, monkeypatch):
    """Ctrl-C while the fitted attributes or training scores are computed (after the last
    iteration) keeps that iteration, as one during the iterations does."""
    from ntnumba.estimators import clustering
    X, _ = data
    kw = dict(n_components=24, random_state=0, max_iter=3, tol=0.0, assign="objective",
              init="k-means++")
    ref = NTClustering(3, **kw).fit(X)
    model = NTClustering(3, **kw)
    calls = _once(_driver if where == "fitted_attributes" else clustering, where, monkeypatch)
    with pytest.warns(RuntimeWarning, match="fit interrupted: keeping iteration 3"):
        with pytest.raises(KeyboardInterrupt):
            model.fit(X)
    assert len(calls) == 2 and model.n_iter_ == 3
    for k in ("labels_", "objective_history_", "components_", "outlier_scores_"):
        np.testing.assert_array_equal(getattr(model, k), getattr(ref, k), err_msg=k)


def test_interrupt_in_a_later_restart_keeps_the_complete_ones(data, monkeypatch):
    X, _ = data
    kw = dict(n_components=24, random_state=0, max_iter=2)
    ref = NTClustering(3, **kw).fit(X)     # n_init=1: the first start of n_init=2
    real, calls = _driver.initialise, []
    monkeypatch.setattr(_driver, "initialise", lambda *a, **k: calls.append(1) or (
        real(*a, **k) if len(calls) == 1 else _raiser(KeyboardInterrupt)()))
    model = NTClustering(3, n_init=2, **kw)
    with pytest.warns(RuntimeWarning, match="fit interrupted: keeping iteration 2"):
        with pytest.raises(KeyboardInterrupt):
            model.fit(X)
    np.testing.assert_array_equal(model.labels_, ref.labels_)
    np.testing.assert_array_equal(model.objective_history_, ref.objective_history_)
