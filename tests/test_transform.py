"""Stage 3 (the linear map A): objective, gradient, quartic, exact step, MM, statistics, online.

References live in ``tests/naive_transform.py`` (explicit formulas, SVD route, numpy.roots,
multistart L-BFGS-B).
"""
import doctest

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import naive_transform as nv
from ntnumba.model import transform as _transform
from ntnumba.model.transform import (
    _closed_form,
    identity_transform,
    transform_gradient,
    transform_objective,
    transform_singular_values,
    transform_statistics,
    update_transform,
)

LAMS = [(16.0, 16.0, 16.0), (1.0, 2.0, 0.5), (0.3, 0.0, 1.0), (0.5, 1.0, 0.0)]


def _problem(seed, n=30, N=4, M=6, scale_cols=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, N))
    if scale_cols is not None:
        X = X * scale_cols
    Ybar = rng.standard_normal((n, M)) * 2.0
    A0 = rng.standard_normal((M, N))
    return X, Ybar, A0


def _isotropic_X(rng, n, N, c):
    """X with orthogonal columns of squared norm c: X^T X = c I."""
    Q, _ = np.linalg.qr(rng.standard_normal((n, N)))
    return Q * np.sqrt(c)


def _lam_kw(lams):
    return dict(lambda2=lams[0], lambda3=lams[1], lambda4=lams[2])


# ------------------------------------------------------------------------------------------
# objective and gradient
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lams", LAMS)
def test_objective_and_gradient_match_naive(lams):
    X, Ybar, A = _problem(0)
    f = transform_objective(A, X, Ybar, *lams)
    assert f == pytest.approx(nv.objective(A, X, Ybar, *lams), rel=1e-12)
    stats = transform_statistics(X, Ybar)
    assert transform_objective(A, stats=stats, **_lam_kw(lams)) == pytest.approx(f, rel=1e-10)
    g = transform_gradient(A, X, Ybar, *lams)
    np.testing.assert_allclose(g, nv.gradient(A, X, Ybar, *lams), rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(transform_gradient(A, stats=stats, **_lam_kw(lams)), g)


def test_naive_gradient_is_the_derivative_of_the_objective():
    # central differences of the explicit objective validate the direct gradient formula
    X, Ybar, A = _problem(1)
    lams = (1.0, 2.0, 0.5)
    g = nv.gradient(A, X, Ybar, *lams)
    h = 1e-6
    fd = np.zeros_like(A)
    for idx in np.ndindex(*A.shape):
        E = np.zeros_like(A)
        E[idx] = h
        fd[idx] = (nv.objective(A + E, X, Ybar, *lams)
                   - nv.objective(A - E, X, Ybar, *lams)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-5)


def test_objective_is_inf_for_rank_deficient_A():
    X, Ybar, A = _problem(2)
    A[:, 0] = A[:, 1]
    assert transform_objective(A, X, Ybar, 1.0, 1.0, 1.0) == np.inf
    assert np.isfinite(transform_objective(A, X, Ybar, 1.0, 1.0, 0.0))


# ------------------------------------------------------------------------------------------
# per-direction quartic
# ------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(t=st.one_of(st.just(0.0), st.floats(1e-6, 1e4)),
       c=st.floats(0.0, 1e3),
       lam2=st.floats(0.0, 50.0),
       lam3=st.floats(1e-3, 50.0),
       lam4=st.one_of(st.just(0.0), st.floats(1e-4, 50.0)))
# c + lambda2 - 2 lambda3 cancels (lambda2 = lambda3 one ulp above c): a root of ~1e-8 that a
# float reference misses (found with a random seed)
@example(t=0.0, c=0.001, lam2=0.0010000000000000002, lam3=0.0010000000000000002, lam4=0.0)
def test_quartic_root_matches_numpy_roots(t, c, lam2, lam3, lam4):
    r = float(transform_singular_values(t, c, lam2, lam3, lam4))
    ref = nv.quartic_root(t, c, lam2, lam3, lam4)
    assert r == pytest.approx(ref, rel=1e-9, abs=1e-12)
    if lam4 > 0:
        assert r > 0
        a = c + lam2 - 2 * lam3
        p = 2 * lam3 * r ** 4 + a * r ** 2 - t * r - 2 * lam4
        scale = 2 * lam3 * r ** 4 + abs(a) * r ** 2 + t * r + 2 * lam4
        assert abs(p) <= 1e-12 * scale


def test_quartic_root_vectorised_and_special_cases():
    rng = np.random.default_rng(3)
    t = np.concatenate([[0.0], rng.exponential(10.0, 50)])
    c = rng.uniform(0, 100, t.size)
    r = transform_singular_values(t, c, 16.0, 16.0, 16.0)
    ref = [nv.quartic_root(ti, ci, 16.0, 16.0, 16.0) for ti, ci in zip(t, c)]
    np.testing.assert_allclose(r, ref, rtol=1e-10)
    # lambda3 = 0: quadratic; lambda3 = lambda4 = 0: t / (c + lambda2)
    np.testing.assert_allclose(transform_singular_values(t, c, 1.0, 0.0, 2.0),
                               [nv.quartic_root(ti, ci, 1.0, 0.0, 2.0) for ti, ci in zip(t, c)],
                               rtol=1e-12)
    np.testing.assert_allclose(transform_singular_values(t, c, 1.0, 0.0, 0.0), t / (c + 1.0))
    # lambda4 = 0, s = 0: root 0 when a >= 0, sqrt(-a / (2 lambda3)) when a < 0
    assert transform_singular_values(0.0, 5.0, 0.0, 1.0, 0.0) == 0.0
    assert transform_singular_values(0.0, 0.0, 0.0, 2.0, 0.0) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        transform_singular_values(-1.0, 1.0)
    with pytest.raises(ValueError):
        transform_singular_values(1.0, 0.0, 0.0, 0.0, 1.0)  # unbounded below


# ------------------------------------------------------------------------------------------
# exact step: eigen route vs SVD route
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(6, 4), (4, 4), (9, 3), (20, 7)])
@pytest.mark.parametrize("lams", LAMS[:3])
def test_closed_form_matches_svd_route_full_rank(shape, lams):
    rng = np.random.default_rng(sum(shape))
    for scale in (0.1, 1.0, 30.0):
        B = rng.standard_normal(shape) * scale
        c = float(rng.uniform(0.5, 5.0))
        np.testing.assert_allclose(_closed_form(B, c, *lams), nv.closed_form_svd(B, c, *lams),
                                   rtol=1e-9, atol=1e-11)
        # per-direction curvature c_i = v_i^T G v_i
        Xg = rng.standard_normal((3 * shape[1], shape[1]))
        G = Xg.T @ Xg
        np.testing.assert_allclose(_closed_form(B, None, *lams, gram=G),
                                   nv.closed_form_svd(B, None, *lams, gram=G),
                                   rtol=1e-9, atol=1e-11)


def _check_same_minimiser(B, c, lams, A, A_ref):
    # the minimiser is unique up to the choice of U on the null space of B: compare what is
    # determined (singular values, action on the row space of B, the surrogate value)
    M, N = B.shape
    assert A.shape == (M, N)
    np.testing.assert_allclose(np.linalg.svd(A, compute_uv=False),
                               np.linalg.svd(A_ref, compute_uv=False), rtol=1e-9, atol=1e-12)
    _, s, Vt = np.linalg.svd(B)
    rank = int(np.sum(s > 1e-10 * max(s.max(), 1e-300)))
    Vr = Vt[:rank].T
    np.testing.assert_allclose(A @ Vr, A_ref @ Vr, rtol=1e-8, atol=1e-10)
    f, f_ref = nv.surrogate(A, B, c, *lams), nv.surrogate(A_ref, B, c, *lams)
    assert f == pytest.approx(f_ref, rel=1e-11, abs=1e-11)


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
@pytest.mark.parametrize("M", [4, 7])
def test_closed_form_matches_svd_route_rank_deficient(rank, M):
    rng = np.random.default_rng(10 * rank + M)
    N = 4
    lams = (1.0, 2.0, 0.5)
    B = rng.standard_normal((M, rank)) @ rng.standard_normal((rank, N)) * 3.0
    A = _closed_form(B, 2.0, *lams)
    _check_same_minimiser(B, 2.0, lams, A, nv.closed_form_svd(B, 2.0, *lams))
    # U is orthonormal: A^T A has eigenvalues s'^2 exactly
    sp = transform_singular_values(np.linalg.svd(B, compute_uv=False), 2.0, *lams)
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(A.T @ A)), np.sort(sp ** 2), rtol=1e-12)


def test_closed_form_wide_dynamic_range():
    # singular values spread over 1e7: the Gram route must still give an orthonormal U
    rng = np.random.default_rng(4)
    M, N = 12, 6
    U, _ = np.linalg.qr(rng.standard_normal((M, N)))
    V, _ = np.linalg.qr(rng.standard_normal((N, N)))
    B = (U * np.logspace(4, -3, N)) @ V.T
    lams = (16.0, 16.0, 16.0)
    A = _closed_form(B, 1.0, *lams)
    _check_same_minimiser(B, 1.0, lams, A, nv.closed_form_svd(B, 1.0, *lams))


def test_closed_form_many_weak_directions_takes_the_qr_route():
    # image-like B: most singular values below _BAND * s_max (the start on Ybar^T X of
    # COIL-20 has ~465 of 500); the QR route must match the SVD reference in every direction
    rng = np.random.default_rng(5)
    M, N = 60, 24
    U, _ = np.linalg.qr(rng.standard_normal((M, N)))
    V, _ = np.linalg.qr(rng.standard_normal((N, N)))
    B = (U * np.logspace(3, -9, N)) @ V.T
    Xg = rng.standard_normal((3 * N, N)) * np.logspace(0, -4, N)
    G = Xg.T @ Xg
    lams = (16.0, 16.0, 16.0)
    for route in ("auto", "qr"):
        info = {}
        A = _closed_form(B, 1.0, *lams, route=route, info=info)
        assert info["route"] == "qr"
        _check_same_minimiser(B, 1.0, lams, A, nv.closed_form_svd(B, 1.0, *lams))
        A, sv = _closed_form(B, None, *lams, gram=G, route=route, return_sv=True)
        np.testing.assert_allclose(A, nv.closed_form_svd(B, None, *lams, gram=G),
                                   rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(np.sort(sv), np.linalg.svd(A, compute_uv=False)[::-1],
                                   rtol=1e-12)
    # few weak directions: the Gram route
    info = {}
    _closed_form(rng.standard_normal((M, N)), 1.0, *lams, info=info)
    assert info["route"] == "gram"


def test_closed_form_route_from_the_qr_singular_values():
    """route="qr_first" (the closed-form start's first route) factors B by QR and picks the
    route from R's singular values: the same route and the same bits as "qr" for a B with
    many weak directions, as "gram" for one with few (the QR discarded)."""
    rng = np.random.default_rng(41)
    M, N = 60, 24
    U, _ = np.linalg.qr(rng.standard_normal((M, N)))
    V, _ = np.linalg.qr(rng.standard_normal((N, N)))
    Xg = rng.standard_normal((3 * N, N))
    lams = (16.0, 16.0, 16.0)
    for B, want in (((U * np.logspace(3, -9, N)) @ V.T, "qr"),
                    (rng.standard_normal((M, N)), "gram")):
        for c, kw in ((1.0, {}), (None, dict(gram=Xg.T @ Xg))):
            info, info_ref = {}, {}
            got = _closed_form(B, c, *lams, route="qr_first", info=info, return_sv=True, **kw)
            ref = _closed_form(B, c, *lams, route=want, info=info_ref, return_sv=True, **kw)
            assert info["route"] == info_ref["route"] == want
            for a, b in zip(got, ref):
                np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("cond", [1.0, 3.0, 90.0])
def test_polar_factor_from_the_gram_matches_the_svd(cond):
    # the polar factor U W^T of a well-conditioned M x k matrix (the null-space completion's Z)
    rng = np.random.default_rng(42)
    M, k = 50, 9
    U, _ = np.linalg.qr(rng.standard_normal((M, k)))
    W, _ = np.linalg.qr(rng.standard_normal((k, k)))
    Z = (U * np.geomspace(2.0, 2.0 / cond, k)) @ W.T
    P = _transform._polar_gram(Z)
    Uz, _, Wzt = np.linalg.svd(Z, full_matrices=False)
    np.testing.assert_allclose(P, Uz @ Wzt, rtol=0, atol=1e-11)
    np.testing.assert_allclose(P.T @ P, np.eye(k), rtol=0, atol=1e-11)


def test_polar_factor_from_the_gram_declines_ill_conditioned():
    rng = np.random.default_rng(43)
    U, _ = np.linalg.qr(rng.standard_normal((50, 6)))
    for sv in (np.geomspace(1.0, 1e-3, 6), np.r_[np.ones(5), 0.0]):
        assert _transform._polar_gram(U * sv) is None
    assert _transform._polar_gram(np.zeros((50, 0))) is None


def test_current_start_objective_from_its_gram():
    # without a workspace the current A's objective comes from A^T A alone (<A G, A> as
    # <A^T A, G>): history[0] of init="current" is f(A) of the reference formula
    X, Ybar, A0 = _problem(44, n=40, N=5, M=8)
    for lams in LAMS:
        _, hist = update_transform(X, Ybar, A0, **_lam_kw(lams), n_steps=0, init="current",
                                   return_history=True)
        np.testing.assert_allclose(hist[0], nv.objective(A0, X, Ybar, *lams), rtol=1e-12)


@pytest.mark.parametrize("rank", [0, 2])
def test_closed_form_qr_route_rank_deficient(rank):
    rng = np.random.default_rng(rank)
    M, N = 9, 5
    lams = (1.0, 2.0, 0.5)
    B = rng.standard_normal((M, rank)) @ rng.standard_normal((rank, N)) * 3.0
    A = _closed_form(B, 2.0, *lams, route="qr")
    _check_same_minimiser(B, 2.0, lams, A, nv.closed_form_svd(B, 2.0, *lams))
    sp = transform_singular_values(np.linalg.svd(B, compute_uv=False), 2.0, *lams)
    np.testing.assert_allclose(np.sort(np.linalg.eigvalsh(A.T @ A)), np.sort(sp ** 2), rtol=1e-12)


def test_workspace_gives_the_same_iterates():
    # the driver's workspace (lambda_max, <A G, A> and the singular values of the previous A) must
    # not change what the update computes: a chain of calls with and without it
    X, Ybar, A0 = _problem(7, n=40, N=5, M=8, scale_cols=np.logspace(0, -6, 5))
    kw = dict(lambda2=1.0, lambda3=2.0, lambda4=0.5, n_steps=2)
    ws = {}
    st = transform_statistics(X, Ybar)
    A_plain, A_ws = A0, A0
    for k in range(4):
        Yk = Ybar + 0.1 * k
        st_k = transform_statistics(X, Yk)
        st_k = _transform.TransformStatistics(st.gram, st_k.cross, st_k.target_sq,
                                              st_k.n_samples, st_k.dtype)
        A_plain, h_plain = update_transform(A=A_plain, stats=st_k, return_history=True, **kw)
        A_ws, h_ws = update_transform(A=A_ws, stats=st_k, return_history=True, workspace=ws,
                                      **kw)
        np.testing.assert_allclose(A_ws, A_plain, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(h_ws, h_plain, rtol=1e-10)
        assert ws["A"] is A_ws and ws["G"] is st.gram
        # the reused products are those of the returned A
        assert ws["AGA"] == pytest.approx(np.vdot(A_ws @ st.gram, A_ws), rel=1e-12)
        np.testing.assert_allclose(np.sort(ws["sv"]), np.linalg.svd(A_ws, compute_uv=False)[::-1],
                                   rtol=1e-10)
        # and the objective of the next start equals transform_objective
        assert h_ws[-1] == pytest.approx(transform_objective(A_ws, X, Yk, 1.0, 2.0, 0.5),
                                         rel=1e-9)


# ------------------------------------------------------------------------------------------
# exact when X^T X = c I
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lams", LAMS[:3])
def test_exact_formula_when_gram_is_isotropic(lams):
    rng = np.random.default_rng(5)
    n, N, M = 30, 4, 6
    X = _isotropic_X(rng, n, N, c=7.0)
    Ybar = rng.standard_normal((n, M)) * 2.0
    A = update_transform(X, Ybar, **_lam_kw(lams), n_steps=0)  # closed form only
    f = nv.objective(A, X, Ybar, *lams)
    g = nv.gradient(A, X, Ybar, *lams)
    scale = np.linalg.norm(nv.gradient(rng.standard_normal((M, N)), X, Ybar, *lams))
    assert np.linalg.norm(g) <= 1e-10 * scale
    f_bf, _ = nv.brute_force(X, Ybar, M, *lams, n_starts=5, seed=1)
    assert f <= f_bf + 1e-10 * abs(f_bf)
    assert f == pytest.approx(f_bf, rel=1e-9)
    # further MM steps cannot improve on it
    A2, hist = update_transform(X, Ybar, A, **_lam_kw(lams), n_steps=5, return_history=True)
    assert hist[-1] >= hist[0] - 1e-12 * abs(hist[0])


# ------------------------------------------------------------------------------------------
# MM for a general X
# ------------------------------------------------------------------------------------------
def test_mm_step_is_the_row_convention_majoriser():
    # plain MM iterates equal an independent SVD implementation of B_k = Ybar^T X - A_k (G - cI)
    X, Ybar, A0 = _problem(6, scale_cols=np.array([3.0, 1.0, 0.3, 1.5]))
    lams = (1.0, 2.0, 0.5)
    ref = nv.mm_svd(X, Ybar, A0, *lams, n_steps=4)
    for k in range(1, 5):
        A = update_transform(X, Ybar, A0, **_lam_kw(lams), n_steps=k, tol=0.0, init="current",
                             accelerate=False)
        np.testing.assert_allclose(A, ref[k], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("rank", [None, 10])
def test_mm_in_the_span_of_the_qr_start_equals_full_space_mm(rank):
    # image-like X (column scales over 8 decades): the closed-form start takes the QR route,
    # B0 = Qb R, and the MM steps run on N x N matrices K (A = Qb K). The iterates must equal
    # the plain full-space MM with SVDs from the same start (tests/naive_transform.py).
    rng = np.random.default_rng(11)
    n, N, M = 100, 40, 50
    X = rng.standard_normal((n, N)) * np.logspace(0, -8, N)
    Ybar = rng.standard_normal((n, M)) * 2.0
    if rank is not None:  # rank-deficient target: Householder completes Qb
        Ybar = rng.standard_normal((n, rank)) @ rng.standard_normal((rank, M))
    lams = (1.0, 2.0, 0.5)
    G = X.T @ X
    kw = dict(n_steps=0, init="closed_form", **_lam_kw(lams))
    start = update_transform(X, Ybar, **kw)
    if rank is None:
        np.testing.assert_allclose(start, nv.closed_form_svd(Ybar.T @ X, None, *lams, gram=G),
                                   rtol=1e-7, atol=1e-9 * np.abs(start).max())
    # (rank-deficient: the completion of the start is any of equally good ones; from there
    # the targets B_k have full rank and the iterates are unique)
    ref = nv.mm_svd(X, Ybar, start, *lams, n_steps=3)
    for k in range(4):
        ws = {}
        A, hist = update_transform(X, Ybar, **_lam_kw(lams), n_steps=k, tol=0.0,
                                   init="closed_form", accelerate=False, workspace=ws,
                                   return_history=True)
        assert ws["start_route"] == "qr"
        assert ("step_route" in ws) == (k > 0)   # the route of the last step, for the next
        np.testing.assert_allclose(A, ref[k], rtol=1e-7, atol=1e-9 * np.abs(ref[k]).max())
        assert hist[-1] == pytest.approx(transform_objective(A, X, Ybar, *lams), rel=1e-9)
        assert ws["AGA"] == pytest.approx(np.vdot(A @ G, A), rel=1e-9)
        np.testing.assert_allclose(np.sort(ws["sv"]), np.linalg.svd(A, compute_uv=False)[::-1],
                                   rtol=1e-9)


@pytest.mark.parametrize("accelerate", [False, True])
@pytest.mark.parametrize("seed,lams", [(7, (16.0, 16.0, 16.0)), (8, (1.0, 2.0, 0.5)),
                                       (9, (0.3, 0.0, 1.0)), (10, (0.5, 1.0, 0.0))])
def test_mm_monotone_converges_to_brute_force(seed, lams, accelerate):
    X, Ybar, A0 = _problem(seed, scale_cols=np.array([4.0, 1.0, 0.5, 2.0]))
    A, hist = update_transform(X, Ybar, A0, **_lam_kw(lams), n_steps=3000, tol=1e-15,
                               accelerate=accelerate, return_history=True)
    assert len(hist) > 2
    # monotone: every recorded step (a rejected last one included) never increases f
    assert np.all(np.diff(hist) <= 1e-13 * np.abs(hist[1:]))
    f = nv.objective(A, X, Ybar, *lams)
    assert f == pytest.approx(hist[-1] if hist[-1] <= hist[-2] else hist[-2], rel=1e-10)
    # stationary: gradient small relative to the gradient at the starting point
    A_start = update_transform(X, Ybar, A0, **_lam_kw(lams), n_steps=0)
    g0 = np.linalg.norm(nv.gradient(A_start, X, Ybar, *lams))
    assert np.linalg.norm(nv.gradient(A, X, Ybar, *lams)) <= 1e-5 * g0
    # and as good as multistart L-BFGS-B
    f_bf, _ = nv.brute_force(X, Ybar, A0.shape[0], *lams, n_starts=5, seed=seed)
    assert f <= f_bf + 1e-6 * abs(f_bf)
    assert f == pytest.approx(f_bf, rel=1e-6)


@pytest.mark.slow
def test_acceleration_helps_on_an_ill_conditioned_gram():
    X, Ybar, A0 = _problem(11, n=40, N=5, M=8, scale_cols=np.array([30.0, 5.0, 1.0, 0.2, 0.05]))
    lams = (1.0, 1.0, 1.0)
    # X^T X has condition ~7e5: plain MM crawls (rate ~ 1 - curvature / lambda_max)
    kw = dict(**_lam_kw(lams), n_steps=2500, tol=0.0, return_history=True)
    _, h_plain = update_transform(X, Ybar, A0, accelerate=False, **kw)
    _, h_acc = update_transform(X, Ybar, A0, accelerate=True, **kw)
    f_bf, _ = nv.brute_force(X, Ybar, 8, *lams, n_starts=3, seed=0)
    gap_plain, gap_acc = h_plain[-1] - f_bf, h_acc[-1] - f_bf
    assert gap_plain > 1e-5 * abs(f_bf)
    assert gap_acc < 1e-9 * abs(f_bf)


def test_best_init_is_never_worse_than_current_A():
    X, Ybar, A0 = _problem(12)
    lams = (16.0, 16.0, 16.0)
    A_opt = update_transform(X, Ybar, A0, **_lam_kw(lams), n_steps=500, tol=1e-14)
    f_opt = nv.objective(A_opt, X, Ybar, *lams)
    A1 = update_transform(X, Ybar, A_opt, **_lam_kw(lams), n_steps=1)
    assert nv.objective(A1, X, Ybar, *lams) <= f_opt * (1 + 1e-14)
    # from the closed form only, one step is worse than the converged A we passed in
    A2 = update_transform(X, Ybar, A_opt, **_lam_kw(lams), n_steps=1, init="closed_form")
    assert nv.objective(A2, X, Ybar, *lams) > f_opt


# ------------------------------------------------------------------------------------------
# statistics seam and dtypes
# ------------------------------------------------------------------------------------------
def test_stats_path_identical_to_data_path():
    X, Ybar, A0 = _problem(13)
    kw = dict(lambda2=1.0, lambda3=2.0, lambda4=0.5, n_steps=20)
    A_data, h_data = update_transform(X, Ybar, A0, return_history=True, **kw)
    stats = transform_statistics(X, Ybar)
    A_stats, h_stats = update_transform(A=A0, stats=stats, return_history=True, **kw)
    np.testing.assert_array_equal(A_data, A_stats)
    np.testing.assert_array_equal(h_data, h_stats)
    # statistics are summable over row blocks
    parts = transform_statistics(X[:11], Ybar[:11]) + transform_statistics(X[11:], Ybar[11:])
    assert parts.n_samples == X.shape[0]
    np.testing.assert_allclose(parts.gram, stats.gram, rtol=1e-12)
    np.testing.assert_allclose(parts.cross, stats.cross, rtol=1e-12)
    assert parts.target_sq == pytest.approx(stats.target_sq, rel=1e-12)
    np.testing.assert_allclose(update_transform(A=A0, stats=parts, **kw), A_data, rtol=1e-8)


def test_float32_in_float32_out():
    X, Ybar, A0 = _problem(14)
    A64 = update_transform(X, Ybar, A0, n_steps=10)
    A32 = update_transform(X.astype(np.float32), Ybar.astype(np.float32), A0.astype(np.float32),
                           n_steps=10)
    assert A64.dtype == np.float64 and A32.dtype == np.float32
    np.testing.assert_allclose(A32, A64, rtol=1e-3, atol=1e-4)
    assert transform_statistics(X.astype(np.float32), Ybar).dtype == np.float32


# ------------------------------------------------------------------------------------------
# online variant
# ------------------------------------------------------------------------------------------
def test_online_variant_limits():
    X, Ybar, A0 = _problem(15)
    batch = update_transform(X, Ybar, A0, n_steps=15)
    full = update_transform(X, Ybar, A0, n_steps=15, online_rate=1.0, sample_fraction=1.0,
                            random_state=0)
    np.testing.assert_array_equal(full, batch)
    same = update_transform(X, Ybar, A0, n_steps=15, online_rate=0.0, sample_fraction=0.8,
                            random_state=0)
    np.testing.assert_array_equal(same, A0)


def test_online_variant_subset_and_mix():
    X, Ybar, A0 = _problem(16, n=40)
    kw = dict(n_steps=15, sample_fraction=0.85, random_state=3)
    A_hat = update_transform(X, Ybar, A0, **kw)
    np.testing.assert_array_equal(update_transform(X, Ybar, A0, **kw), A_hat)  # reproducible
    rows = np.sort(np.random.RandomState(3).choice(40, size=34, replace=False))
    np.testing.assert_array_equal(update_transform(X[rows], Ybar[rows], A0, n_steps=15), A_hat)
    assert not np.allclose(A_hat, update_transform(X, Ybar, A0, n_steps=15))
    mixed = update_transform(X, Ybar, A0, online_rate=0.25, **kw)
    np.testing.assert_allclose(mixed, 0.75 * A0 + 0.25 * A_hat, rtol=1e-14, atol=1e-14)


# ------------------------------------------------------------------------------------------
# validation, helpers, docs
# ------------------------------------------------------------------------------------------
def test_errors():
    X, Ybar, A0 = _problem(17)
    with pytest.raises(ValueError, match="M >= N"):
        update_transform(X, Ybar[:, :3])
    with pytest.raises(ValueError, match="not both"):
        update_transform(X, Ybar, stats=transform_statistics(X, Ybar))
    with pytest.raises(ValueError, match="online_rate needs"):
        update_transform(X, Ybar, online_rate=0.5)
    with pytest.raises(ValueError, match="sample_fraction needs"):
        update_transform(A=A0, stats=transform_statistics(X, Ybar), sample_fraction=0.5)
    with pytest.raises(ValueError, match="shape"):
        update_transform(X, Ybar, A0[:, :3])
    with pytest.raises(ValueError, match="lambda3"):
        update_transform(X, Ybar, lambda3=-1.0)


def test_identity_transform():
    np.testing.assert_array_equal(identity_transform(3), np.eye(3))
    assert identity_transform(2, dtype=np.float32).dtype == np.float32


def test_docstring_examples_run():
    result = doctest.testmod(_transform, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 5 and result.failed == 0
