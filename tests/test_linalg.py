"""The one SVD of the package (ntnumba/core/linalg.py) and its callers when LAPACK's gesdd fails.

gesdd can report non-convergence on a finite, well-conditioned matrix with a tight cluster of
singular values (single-threaded OpenBLAS 0.3.30/0.3.31, a fit on orl-20); no small matrix that
reproduces it is known, so the failure is simulated as in tests/test_null_space.py: every
caller must give, through gesvd, the answer it gives without the failure.
"""
import numpy as np
import pytest
import scipy.linalg

from benchmarks import reference
from ntnumba import metrics
from ntnumba.partition import graph as _graph
from ntnumba.core import linalg as _linalg
from ntnumba.model import transform as _transform


class _FailingGesdd:
    """Stand-ins for numpy.linalg.svd and scipy.linalg.svd whose gesdd does not converge."""

    def __init__(self, monkeypatch):
        self.calls = 0
        real = scipy.linalg.svd

        def numpy_svd(*args, **kwargs):
            self.calls += 1
            raise np.linalg.LinAlgError("SVD did not converge")

        def scipy_svd(*args, lapack_driver="gesdd", **kwargs):
            if lapack_driver == "gesdd":
                self.calls += 1
                raise np.linalg.LinAlgError("SVD did not converge")
            return real(*args, lapack_driver=lapack_driver, **kwargs)

        monkeypatch.setattr(np.linalg, "svd", numpy_svd)
        monkeypatch.setattr(scipy.linalg, "svd", scipy_svd)


def _both(monkeypatch, fn):
    """``fn()`` as it is, then with gesdd failing; the number of failed gesdd calls."""
    want = fn()
    with monkeypatch.context() as m:
        failing = _FailingGesdd(m)
        got = fn()
    return want, got, failing.calls


@pytest.mark.parametrize("lapack", ["numpy", "scipy"])
@pytest.mark.parametrize("shape", [(7, 4), (4, 7), (5, 5)])
def test_svd_falls_back_to_gesvd(monkeypatch, lapack, shape):
    A = np.random.default_rng(0).standard_normal(shape)
    for kw in ({}, {"full_matrices": False}, {"compute_uv": False}):
        want, got, calls = _both(monkeypatch, lambda: _linalg.svd(A, lapack=lapack, **kw))
        assert calls == 1
        if kw.get("compute_uv", True):
            U, s, Vt = got
            np.testing.assert_allclose((U[:, :s.size] * s) @ Vt[:s.size], A, atol=1e-13)
            np.testing.assert_allclose(U[:, :s.size] @ Vt[:s.size],
                                       want[0][:, :s.size] @ want[2][:s.size], atol=1e-13)
            np.testing.assert_allclose(s, want[1], rtol=1e-13)
            assert U.shape == want[0].shape and Vt.shape == want[2].shape
        else:
            np.testing.assert_allclose(got, want, rtol=1e-13)


def test_svd_fallback_does_not_hide_non_finite_input(monkeypatch):
    A = np.ones((5, 3))
    A[2, 1] = np.inf
    with monkeypatch.context() as m:
        _FailingGesdd(m)
        for lapack in ("numpy", "scipy"):
            with pytest.raises((np.linalg.LinAlgError, ValueError)):
                _linalg.svd(A, lapack=lapack)
    assert _transform._svd is _linalg.svd   # the exact Stage-3 step's SVD is this one


def test_condition_number_survives_gesdd_failure(monkeypatch):
    A = np.random.default_rng(1).standard_normal((9, 5))
    want, got, calls = _both(monkeypatch, lambda: metrics.condition_number(A))
    assert calls == 1
    assert got == pytest.approx(want, rel=1e-12)


def test_reference_stage3_survives_gesdd_failure(monkeypatch):
    rng = np.random.default_rng(2)
    X, Ybar, A = (rng.standard_normal(s) for s in ((30, 5), (30, 8), (8, 5)))
    want, got, calls = _both(monkeypatch, lambda: reference.update_transform_reference(
        X, Ybar, A, lambda2=1.0, lambda3=1.0, lambda4=1.0, n_steps=3))
    assert calls >= 3   # the closed form, the objective's regulariser, the MM steps
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-10 * np.abs(want).max())


def test_cluster_qr_survives_gesdd_failure(monkeypatch):
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(4), 10)
    maps = np.eye(4)[labels] + 0.2 * rng.standard_normal((40, 4))
    want, got, calls = _both(monkeypatch, lambda: _graph.cluster_qr(maps))
    assert calls == 1
    np.testing.assert_array_equal(got, want)
    assert len(np.unique(want)) == 4
