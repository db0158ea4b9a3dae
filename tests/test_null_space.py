"""Stage 3 on rank-deficient data: the map's action outside the data's span.

There the objective does not see ``A`` (it is invariant under ``A -> A R`` for orthogonal ``R``
fixing the span of the data), and an exact step on a rank-deficient target ``B`` may complete
its null space any way it likes. The completion from the anchor (the current map,
``ntnumba.model.transform._anchored_null``) makes it a function of ``B`` and the anchor only, so
that fits whose block sums round differently (in memory, ``chunk_size``, Dask) give the same
``components_``, also outside the span. Reference: ``tests/naive_transform.py``
(``closed_form_anchored``, full SVDs).
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import naive_transform as nv
from ntnumba import NTClustering
from ntnumba.model import transform as _transform
from ntnumba.model.transform import _closed_form

from test_stream import _blobs

LAMS = (1.0, 2.0, 0.5)


def _low_rank(rng, M, N, rank, scale=3.0):
    return rng.standard_normal((M, rank)) @ rng.standard_normal((rank, N)) * scale


def _rank_deficient_blobs(N=8, rank=4, seed=1, dtype=np.float64):
    """The blobs of tests/test_stream.py projected on a random ``rank``-dimensional subspace,
    and a projector on that span."""
    X, _ = _blobs(n_features=N)
    W = np.random.default_rng(seed).standard_normal((N, rank))
    P = W @ np.linalg.pinv(W)
    return (X @ P).astype(dtype), P


@pytest.mark.parametrize("route", ["auto", "qr"])
@pytest.mark.parametrize("M,N,rank", [(9, 6, 3), (7, 4, 0), (50, 40, 10)])
@pytest.mark.parametrize("curv", ["scalar", "gram"])
def test_anchored_completion_matches_reference(route, M, N, rank, curv):
    rng = np.random.default_rng(M + N + rank)
    B = _low_rank(rng, M, N, rank)
    anchor = rng.standard_normal((M, N))
    gram = None
    if curv == "gram":
        Xg = rng.standard_normal((3 * N, N))
        gram = Xg.T @ Xg
    info = {}
    A, sv = _closed_form(B, 2.0, *LAMS, gram=gram, route=route, info=info, anchor=anchor,
                         return_sv=True)
    if route == "auto" and N == 40:
        assert info["route"] == "qr"    # many null directions: the QR route
    ref = nv.closed_form_anchored(B, 2.0, *LAMS, anchor, rank, gram=gram)
    np.testing.assert_allclose(A, ref, rtol=1e-8, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(np.sort(sv), np.linalg.svd(A, compute_uv=False)[::-1],
                               rtol=1e-9)


def test_anchored_completion_is_the_minimiser_closest_to_the_anchor():
    # brute force: every other completion U0 s'_0 V0^T (U0 orthonormal, orthogonal to the
    # left singular vectors of B) has the same surrogate value and is farther from the anchor
    rng = np.random.default_rng(3)
    M, N, rank, c = 9, 5, 2, 2.0
    B = _low_rank(rng, M, N, rank)
    anchor = rng.standard_normal((M, N))
    A = _closed_form(B, c, *LAMS, anchor=anchor)
    f = nv.surrogate(A, B, c, *LAMS)
    U, s, Vt = np.linalg.svd(B)
    Ur, V0 = U[:, :rank], Vt[rank:].T
    s0 = nv.quartic_root(0.0, c, *LAMS)
    A_r = A - A @ V0 @ V0.T
    d = np.linalg.norm(A - anchor)
    for _ in range(200):
        Z = rng.standard_normal((M, N - rank))
        Z -= Ur @ (Ur.T @ Z)
        U0, _ = np.linalg.qr(Z)
        other = A_r + s0 * U0 @ V0.T
        assert nv.surrogate(other, B, c, *LAMS) == pytest.approx(f, rel=1e-12)
        assert np.linalg.norm(other - anchor) >= d - 1e-12


@pytest.mark.parametrize("route", ["auto", "qr"])
@pytest.mark.parametrize("N,rank", [(6, 3), (40, 10)])
def test_anchored_completion_does_not_depend_on_rounding(route, N, rank):
    # B of another summation order (~eps relative): the same A; a completion by the
    # factorisation (no anchor) is O(1) apart
    rng = np.random.default_rng(N)
    M = N + 5
    B = _low_rank(rng, M, N, rank)
    B2 = B + 1e-16 * np.abs(B).max() * rng.standard_normal(B.shape)
    anchor = rng.standard_normal((M, N))
    A = _closed_form(B, 2.0, *LAMS, route=route, anchor=anchor)
    A2 = _closed_form(B2, 2.0, *LAMS, route=route, anchor=anchor)
    np.testing.assert_allclose(A2, A, rtol=0, atol=1e-10 * np.abs(A).max())
    free = _closed_form(B, 2.0, *LAMS, route=route)
    free2 = _closed_form(B2, 2.0, *LAMS, route=route)
    assert np.abs(free - free2).max() > 1e-3   # what the anchor is for


@pytest.mark.parametrize("route", ["auto", "qr"])
def test_full_rank_target_ignores_the_anchor(route):
    rng = np.random.default_rng(8)
    B = rng.standard_normal((12, 7))
    Xg = rng.standard_normal((20, 7))
    for kw in (dict(), dict(gram=Xg.T @ Xg)):
        np.testing.assert_array_equal(
            _closed_form(B, 2.0, *LAMS, route=route, anchor=rng.standard_normal((12, 7)), **kw),
            _closed_form(B, 2.0, *LAMS, route=route, **kw))


def _gesdd_fails(*args, **kwargs):
    _gesdd_fails.calls += 1
    raise np.linalg.LinAlgError("SVD did not converge")


@pytest.mark.parametrize("route", ["auto", "qr"])
@pytest.mark.parametrize("curv", ["scalar", "gram"])
def test_anchored_completion_survives_gesdd_failure(monkeypatch, route, curv):
    # LAPACK gesdd (numpy.linalg.svd) can report non-convergence on a finite, well-conditioned
    # matrix with a tight cluster of singular values: single-threaded OpenBLAS 0.3.31 did on the
    # completion's Z of a fit on orl-20 (2100 x 376, 176 singular values equal to 1e-13), which
    # is what a second anchored step on a flat curvature makes (the anchor is then a multiple
    # of an orthonormal map on the null space). That matrix is too large to embed and the
    # failure depends on the BLAS build, so gesdd's failure is simulated here: the step must
    # give the answer it gives without it, and the reference's.
    rng = np.random.default_rng(21)
    M, N, rank = 30, 12, 4
    B = _low_rank(rng, M, N, rank)
    gram = None
    if curv == "gram":
        Xg = rng.standard_normal((3 * N, N))
        gram = Xg.T @ Xg
    anchor = _closed_form(B, 2.0, *LAMS, gram=gram, route=route,
                          anchor=rng.standard_normal((M, N)))
    expected = _closed_form(B, 2.0, *LAMS, gram=gram, route=route, anchor=anchor)
    ref = nv.closed_form_anchored(B, 2.0, *LAMS, anchor, rank, gram=gram)
    _gesdd_fails.calls = 0
    with monkeypatch.context() as m:
        m.setattr(np.linalg, "svd", _gesdd_fails)
        # the completion's polar factor through its SVD (a well-conditioned Z, as here, takes
        # the Gram route of _polar_gram otherwise)
        m.setattr(_transform, "_POLAR_COND", 1.0)
        A = _closed_form(B, 2.0, *LAMS, gram=gram, route=route, anchor=anchor)
    # the QR route: the SVDs of R and of the completion's Z; "auto" takes the Gram route at
    # this size, with the completion's only
    assert _gesdd_fails.calls == (2 if route == "qr" else 1)
    np.testing.assert_allclose(A, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    np.testing.assert_allclose(A, ref, rtol=1e-8, atol=1e-9 * np.abs(ref).max())


def test_svd_fallback_does_not_hide_non_finite_input(monkeypatch):
    from ntnumba.model.transform import _svd
    A = np.ones((5, 3))
    A[2, 1] = np.nan
    _gesdd_fails.calls = 0
    monkeypatch.setattr(np.linalg, "svd", _gesdd_fails)
    with pytest.raises(np.linalg.LinAlgError):
        _svd(A)


def _assert_same_components(a, b, P):
    """components_ equal within 1e-6 of their largest entry, on and outside the span, and
    ``transform`` of data outside the span equal."""
    A, B = a.components_.astype(np.float64), b.components_.astype(np.float64)
    tol = 1e-6 * np.abs(A).max()
    np.testing.assert_allclose(B @ P, A @ P, rtol=0, atol=tol)
    np.testing.assert_allclose(B, A, rtol=0, atol=tol)
    Xo = np.random.default_rng(5).standard_normal((30, A.shape[1])).astype(a.components_.dtype)
    assert np.abs(Xo @ (np.eye(A.shape[1]) - P)).max() > 0.1     # outside the span
    ta, tb = a.transform(Xo), b.transform(Xo)
    np.testing.assert_allclose(tb, ta, rtol=0, atol=1e-6 * np.abs(ta).max())


@pytest.mark.parametrize("kw", [dict(assign="objective", init="k-means++"),
                                dict(assign="graph", init="graph")], ids=["objective", "graph"])
@pytest.mark.parametrize("N,rank,dtype", [(8, 4, np.float64), (40, 10, np.float64),
                                          (8, 4, np.float32)])
def test_chunked_components_equal_in_memory_outside_the_span(kw, N, rank, dtype):
    # N = 8: the Gram route of the exact step; N = 40: the QR route and the reduced space
    X, P = _rank_deficient_blobs(N, rank, dtype=dtype)
    est = dict(n_components=3 * N, max_iter=3, random_state=0, **kw)
    a = NTClustering(3, **est).fit(X)
    b = NTClustering(3, **est).fit(X, chunk_size=25)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    _assert_same_components(a, b, P)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), N=st.integers(1, 8), extra=st.integers(0, 6),
       rank_share=st.floats(0.0, 0.9), route=st.sampled_from(["auto", "qr"]),
       gram=st.booleans())
def test_anchored_completion_property(seed, N, extra, rank_share, route, gram):
    # any shape and rank: the reference's minimiser, and the same A for B rounded otherwise
    rng = np.random.default_rng(seed)
    M, rank = N + extra, int(rank_share * N)
    B = _low_rank(rng, M, N, rank)
    anchor = rng.standard_normal((M, N))
    G = None
    if gram:
        Xg = rng.standard_normal((2 * N + 1, N))
        G = Xg.T @ Xg
    A = _closed_form(B, 2.0, *LAMS, gram=G, route=route, anchor=anchor)
    ref = nv.closed_form_anchored(B, 2.0, *LAMS, anchor, rank, gram=G)
    np.testing.assert_allclose(A, ref, rtol=0, atol=1e-7 * max(np.abs(ref).max(), 1.0))
    # rounding is relative to the sums' terms (B = 0 stays 0: sums of zeros)
    B2 = B + 1e-16 * np.abs(B).max() * rng.standard_normal(B.shape)
    A2 = _closed_form(B2, 2.0, *LAMS, gram=G, route=route, anchor=anchor)
    np.testing.assert_allclose(A2, A, rtol=0, atol=1e-7 * max(np.abs(A).max(), 1.0))
