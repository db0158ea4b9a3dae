"""All NT representations zero (a huge ``lambda1``, data of subnormal size): one clear warning,
in memory, chunked (here) and with Dask (tests/test_dask.py)."""
import os
import re
import warnings

import numpy as np
import pytest

from sklearn.pipeline import Pipeline

from ntnumba import NTClustering

from test_stream import _blobs

KW = dict(n_components=24, max_iter=2, random_state=0)
MESSAGE = "all NT representations of the training data are zero"


def _max_abs_q(model, X):
    """max |A x| over the scaled training data, from the fitted model."""
    Xs = np.asarray(X, dtype=np.float64) * model.scale_
    return float(np.max(np.abs(Xs @ np.asarray(model.components_, dtype=np.float64).T)))


def check_zero_codes_warning(fit, X):
    """``fit(X)`` (which fits an estimator and returns it) warns once, with lambda1 and the true
    max |A x| of the scaled data in the message."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        model = fit(X)
    hits = [w for w in rec if MESSAGE in str(w.message)]
    assert len(hits) == 1 and hits[0].category is RuntimeWarning, [str(w.message) for w in rec]
    # attributed to the line that called fit (a test file), not to ntnumba's code
    assert os.path.basename(hits[0].filename).startswith("test_"), hits[0].filename
    msg = str(hits[0].message)
    assert f"lambda1={model.lambda1:.6g}" in msg and "rescale the data" in msg
    q_max = float(re.search(r"max \|A x\| = (\S+) ", msg).group(1))
    assert q_max == pytest.approx(_max_abs_q(model, X), rel=1e-3)
    assert not np.any(model.transform(X))   # what the warning says
    return model


def check_no_warning(fit, X):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        fit(X)
    assert not [w for w in rec if MESSAGE in str(w.message)]


CASES = [  # (rule options, lambda1, data factor)
    (dict(assign="graph", init="graph"), 1e6, 1.0),
    (dict(assign="objective", init="k-means++"), 1e6, 1.0),
    (dict(assign="graph", init="graph"), 0.03, 1e-320),     # subnormal: rms caps its factor
]


@pytest.mark.parametrize("chunk_size", [None, 25])
@pytest.mark.parametrize("kw,lambda1,factor", CASES)
def test_zero_codes_warn(kw, lambda1, factor, chunk_size):
    X, _ = _blobs()
    X = X * factor
    check_zero_codes_warning(
        lambda Z: NTClustering(3, lambda1=lambda1, **kw, **KW).fit(Z, chunk_size=chunk_size), X)


@pytest.mark.parametrize("chunk_size", [None, 25])
def test_no_zero_codes_warning_when_codes_exist(chunk_size):
    X, _ = _blobs()
    # lambda1 just below max |A x|: some codes survive, no warning
    with pytest.warns(RuntimeWarning, match=MESSAGE):
        ref = NTClustering(3, lambda1=1e6, **KW).fit(X)
    lam = 0.5 * _max_abs_q(ref, X)
    check_no_warning(lambda Z: NTClustering(3, lambda1=lam, **KW).fit(Z, chunk_size=chunk_size),
                     X)
    check_no_warning(lambda Z: NTClustering(3, **KW).fit(Z, chunk_size=chunk_size), X * 1e-310)


def test_zero_codes_warn_in_partial_fit():
    X, _ = _blobs()
    model = NTClustering(3, lambda1=1e6, **KW)
    check_zero_codes_warning(lambda Z: model.partial_fit(Z), X)


@pytest.mark.parametrize("call", ["fit_predict", "pipeline"])
def test_zero_codes_warning_through_scikit_learn(call):
    """Attributed to the user's line when scikit-learn calls fit (not to sklearn/base.py)."""
    X, _ = _blobs()
    model = NTClustering(3, lambda1=1e6, **KW)
    if call == "fit_predict":
        check_zero_codes_warning(lambda Z: (model.fit_predict(Z), model)[1], X)
    else:
        check_zero_codes_warning(lambda Z: Pipeline([("nt", model)]).fit(Z)[-1], X)
