"""Stage 3 with fewer samples than features: the problem in the span of the rows.

With ``n < N`` the rows of ``X`` span an ``r <= n`` dimensional subspace (basis ``P``). The data
term sees ``A`` only through ``A P``; outside the span the objective is the regulariser alone,
whose minimiser there is ``s0`` times an isometry onto directions orthogonal to the range of
``A P`` (``s0``: :func:`orthogonal_singular_value`). ``update_transform(..., span=row_span(X))``
solves the ``M x r`` problem and forms that map (``ntnumba.model.transform.span_map``).
References: the full-space update of ``update_transform`` and ``tests/naive_transform.py``.
"""
from dataclasses import replace

import numpy as np
import pytest

import naive_transform as nv
from ntnumba import NTClustering
from ntnumba.engine import loop
from ntnumba.engine import passes
from ntnumba.model.transform import (complement_span, orthogonal_singular_value, principal_span,
                                     project_statistics, row_span, span_map, span_statistics,
                                     transform_objective, update_transform)

LAMS = dict(lambda2=1.0, lambda3=2.0, lambda4=0.5)
PAPER = dict(lambda2=8.0, lambda3=8.0, lambda4=8.0)   # the paper's priors / (1 + lambda_a)


def _problem(n, N, M, seed, duplicate=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, N))
    if duplicate:  # rank n - 2
        X[1], X[3] = X[0], 2.0 * X[2]
    return X, rng.standard_normal((n, M)), rng.standard_normal((M, N)), rng


def _outside(A, P):
    return A - (A @ P) @ P.T


def test_row_span_basis():
    X, _, _, _ = _problem(5, 9, 12, 0, duplicate=True)
    sp = row_span(X)
    assert sp.rank == 3 and sp.n_features == 9 and sp.n_samples == 5
    np.testing.assert_allclose(sp.basis.T @ sp.basis, np.eye(3), atol=1e-14)
    np.testing.assert_allclose(sp.project(X) @ sp.basis.T, X, atol=1e-13)
    np.testing.assert_allclose(sp.full_gram(), X.T @ X, atol=1e-12)
    assert row_span(np.zeros((3, 4))).rank == 0


def _svd_span(X):
    """Reference: numpy's SVD of X, its rank tolerance max(n, N) eps s_max."""
    _, s, Wt = np.linalg.svd(X, full_matrices=False)
    return Wt[s > max(X.shape) * np.finfo(float).eps * s[0]].T


def _near(X, i, j, eps):  # row i: row j plus eps times noise (s_r ~ eps: the SVD keeps it)
    X = X.copy()
    X[i] = X[j] + eps * np.random.default_rng(9).standard_normal(X.shape[1])
    return X


@pytest.mark.parametrize("how, same", [
    ("random", False), ("duplicate", False), ("centred", False), ("huge", False), ("3", False),
    ("near-duplicate", True), ("graded", True), ("common", True), ("truncated", True)])
def test_unordered_row_span_is_the_svd_span(how, same):
    # ordered=False: the rows' span (pivoted Cholesky + CholeskyQR2) with the SVD's rank, or the
    # SVD itself (same=True) where the rank is not clear-cut or a truncation needs its order
    rng = np.random.default_rng(3)
    X = rng.standard_normal((30, 70))
    X = {"random": X, "duplicate": _problem(30, 70, 1, 0, duplicate=True)[0],
         "centred": X - X.mean(0), "huge": 1e140 * X, "near-duplicate": _near(X, 4, 7, 1e-9),
         "graded": np.logspace(0, -9, 30)[:, None] * X,
         "3": np.linalg.qr(X[:, :30])[0] * np.logspace(0, -3.5, 30) @ X, "common": 1.0 + 3e-5 * X,
         "truncated": X}[how]
    max_rank = 12 if how == "truncated" else None
    sp, ref = row_span(X, max_rank, ordered=False), row_span(X, max_rank)
    W = _svd_span(X / 1e140 if how == "huge" else X)[:, :max_rank]
    assert sp.rank == W.shape[1] and np.array_equal(sp.basis, ref.basis) == same
    np.testing.assert_allclose(sp.basis.T @ sp.basis, np.eye(sp.rank), atol=1e-14)
    np.testing.assert_allclose(sp.basis @ sp.basis.T, W @ W.T, atol=1e-12)
    Xp = X @ sp.basis
    np.testing.assert_allclose(sp.gram, Xp.T @ Xp, rtol=1e-12, atol=1e-12 * np.abs(Xp).max() ** 2)


def test_span_with_its_largest_eigenvalue_gives_the_same_step():
    # row_span's pivoted route keeps lambda_max(gram) (numpy's eigvalsh the reference), which the
    # MM steps then take instead of computing it: the same map to rounding
    X, Ybar, A0, _ = _problem(20, 50, 60, 1)
    sp = row_span(X, ordered=False)
    assert sp.lambda_max == pytest.approx(np.linalg.eigvalsh(sp.gram)[-1], rel=1e-13)
    got = update_transform(X, Ybar, A0, span=sp, n_steps=5, **PAPER)
    ref = update_transform(X, Ybar, A0, span=replace(sp, lambda_max=None), n_steps=5, **PAPER)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12 * np.abs(ref).max())


def test_orthogonal_singular_value_minimises_the_prior():
    for lam in (LAMS, PAPER, dict(lambda2=1.0, lambda3=1.0, lambda4=0.0)):
        s0 = orthogonal_singular_value(**lam)
        assert s0 == pytest.approx(nv.prior_singular_value(*lam.values()), rel=1e-12)
        grid = np.linspace(1e-3, 3.0, 30001)
        vals = nv.phi(grid, 0.0, 0.0, *lam.values())
        assert nv.phi(np.array([s0]), 0.0, 0.0, *lam.values())[0] <= vals.min() + 1e-12


@pytest.mark.parametrize("n,N,M,dup", [(6, 10, 14, False), (7, 12, 12, True),
                                       (20, 60, 90, False), (3, 5, 5, False)])
@pytest.mark.parametrize("lam", [LAMS, PAPER], ids=["lams", "paper"])
def test_span_step_equals_full_step_in_the_span(n, N, M, dup, lam):
    # from an arbitrary map: the same action on the span and the same objective as the
    # full-space update; outside the span s0 times an isometry orthogonal to the span's image
    X, Ybar, A0, _ = _problem(n, N, M, n + N + M, dup)
    sp = row_span(X)
    P = sp.basis
    Af, hf = update_transform(X, Ybar, A0, n_steps=4, return_history=True, **lam)
    As, hs = update_transform(X, Ybar, A0, n_steps=4, return_history=True, span=sp, **lam)
    scale = np.abs(Af).max()
    np.testing.assert_allclose(As @ P, Af @ P, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(hs, hf, rtol=1e-11)
    assert transform_objective(As, X, Ybar, *lam.values()) == pytest.approx(hf[-1], rel=1e-11)
    s0 = orthogonal_singular_value(**lam)
    W = _outside(As, P)
    sv = np.linalg.svd(W, compute_uv=False)
    np.testing.assert_allclose(sv[:N - sp.rank], s0, rtol=1e-12)
    assert np.all(sv[N - sp.rank:] < 1e-12 * s0)
    np.testing.assert_allclose((As @ P).T @ W, 0.0, atol=1e-12 * scale * s0)
    # the first completion: anchored to the embedding [I; 0] of the complement
    E = np.zeros((M, N))
    E[:N] = np.eye(N)
    np.testing.assert_allclose(As, nv.span_map(As @ P, P, s0, E), rtol=0, atol=1e-10 * scale)


@pytest.mark.parametrize("init", ["closed_form", "best"])
@pytest.mark.parametrize("n,N,M,dup", [(6, 10, 14, False), (7, 12, 12, True)])
def test_span_step_equals_full_step_from_its_own_map(init, n, N, M, dup):
    # from a map that is s0 times an isometry outside the span (what every step returns) the
    # full-space update completes the null space of its closed-form start from that map, as
    # span_map does: the whole map agrees, also over several calls with new targets
    X, Ybar, A0, rng = _problem(n, N, M, 7 * n + N, dup)
    sp = row_span(X)
    A = update_transform(X, Ybar, A0, n_steps=2, **LAMS)
    Af = As = A
    for _ in range(3):
        Ybar = rng.standard_normal(Ybar.shape)
        Af, hf = update_transform(X, Ybar, Af, n_steps=3, init=init, return_history=True,
                                  **LAMS)
        As, hs = update_transform(X, Ybar, As, n_steps=3, init=init, return_history=True,
                                  span=sp, **LAMS)
        np.testing.assert_allclose(As, Af, rtol=0, atol=1e-10 * np.abs(Af).max())
        np.testing.assert_allclose(hs, hf, rtol=1e-11)


def test_span_step_from_the_current_map_is_never_worse():
    # init="current": the full-space MM steps couple the span and its complement (the current
    # map's image outside the span need not be orthogonal to the new target); the span update
    # sets the complement to its optimum given the span part: never worse than either
    X, Ybar, A0, rng = _problem(6, 10, 14, 13)
    sp = row_span(X)
    A = update_transform(X, Ybar, A0, n_steps=2, **LAMS)
    for _ in range(3):
        Ybar = rng.standard_normal(Ybar.shape)
        f0 = transform_objective(A, X, Ybar, *LAMS.values())
        Af = update_transform(X, Ybar, A, n_steps=3, init="current", **LAMS)
        As = update_transform(X, Ybar, A, n_steps=3, init="current", span=sp, **LAMS)
        fs = transform_objective(As, X, Ybar, *LAMS.values())
        assert fs <= f0
        assert fs <= transform_objective(Af, X, Ybar, *LAMS.values()) * (1 + 1e-12)
        A = As


def test_span_step_matches_naive_mm():
    # the reference: the closed-form start through a full SVD of Ybar^T X (per-direction
    # curvature, its null space completed from the anchor [I; 0]), then plain MM steps with
    # full SVDs (tests/naive_transform.py)
    X, Ybar, A0, _ = _problem(5, 8, 11, 3)
    sp = row_span(X)
    E = np.zeros((11, 8))
    E[:8] = np.eye(8)
    start = nv.closed_form_anchored(Ybar.T @ X, None, *LAMS.values(), E, sp.rank,
                                    gram=X.T @ X)
    it = nv.mm_svd(X, Ybar, start, *LAMS.values(), n_steps=5)
    A = update_transform(X, Ybar, A0, n_steps=5, init="closed_form", accelerate=False,
                         tol=0.0, span=sp, **LAMS)
    # the code's majorising constant is lambda_max(X^T X) (1 + 1e-10)
    np.testing.assert_allclose(A, it[-1], rtol=0, atol=1e-8 * np.abs(it[-1]).max())


def test_orthogonal_part_minimises_the_objective_given_the_span_part():
    # any other action outside the span (random maps there) has a larger objective
    X, Ybar, A0, rng = _problem(6, 10, 14, 11)
    sp = row_span(X)
    A = update_transform(X, Ybar, A0, span=sp, **PAPER)
    f = transform_objective(A, X, Ybar, *PAPER.values())
    Pi = np.eye(10) - sp.basis @ sp.basis.T
    for _ in range(20):
        other = A @ sp.basis @ sp.basis.T + rng.standard_normal((14, 10)) @ Pi
        assert transform_objective(other, X, Ybar, *PAPER.values()) > f
        near = A + 1e-3 * rng.standard_normal((14, 10)) @ Pi
        assert transform_objective(near, X, Ybar, *PAPER.values()) > f


def test_new_rows_outside_the_span():
    # a new row x = x_span + x_out: A x_out has norm s0 ||x_out||, orthogonal to the images of
    # the training rows
    X, Ybar, A0, rng = _problem(6, 10, 14, 5)
    sp = row_span(X)
    A = update_transform(X, Ybar, A0, span=sp, **PAPER)
    s0 = orthogonal_singular_value(**PAPER)
    x = rng.standard_normal((4, 10))
    x_out = x - (x @ sp.basis) @ sp.basis.T
    np.testing.assert_allclose(np.linalg.norm(x_out @ A.T, axis=1),
                               s0 * np.linalg.norm(x_out, axis=1), rtol=1e-12)
    np.testing.assert_allclose((X @ A.T) @ (x_out @ A.T).T, 0.0,
                               atol=1e-11 * np.abs(X @ A.T).max())


def test_span_map_completes_directions_the_anchor_loses():
    # the anchor's action outside the span contains a direction of the range of A1: the polar
    # factor is not unique there and is completed at random, still an isometry orthogonal to A1
    rng = np.random.default_rng(4)
    M, N, r, s0 = 8, 6, 2, 1.5
    P = np.linalg.qr(rng.standard_normal((N, r)))[0]
    Pp = np.linalg.svd(np.eye(N) - P @ P.T)[0][:, :N - r]
    U1 = np.linalg.qr(rng.standard_normal((M, r)))[0]
    A1 = U1 * [2.0, 3.0]
    Q = np.linalg.qr(np.hstack([U1[:, :1], rng.standard_normal((M, N - r - 1))]))[0]
    A = span_map(A1, P, s0, anchor=A1 @ P.T + s0 * Q @ Pp.T)
    np.testing.assert_allclose(A @ P, A1, atol=1e-14)
    W = _outside(A, P)
    np.testing.assert_allclose(np.linalg.svd(W, compute_uv=False)[:N - r], s0, rtol=1e-12)
    np.testing.assert_allclose(U1.T @ W, 0.0, atol=1e-13)
    # the directions the anchor keeps are the anchor's (projected, then normalised)
    ref = nv.span_map(A1, P, s0, Q @ Pp.T)
    keep = Pp[:, 1:]
    np.testing.assert_allclose(A @ keep, ref @ keep, atol=1e-12)


def test_span_statistics_and_errors():
    X, Ybar, A0, _ = _problem(4, 7, 9, 2)
    sp = row_span(X)
    st = span_statistics(X, Ybar, sp)
    assert st.gram is sp.gram
    np.testing.assert_allclose(st.cross, Ybar.T @ X @ sp.basis, atol=1e-12)
    a = update_transform(stats=st, A=A0, span=sp, **LAMS)
    b = update_transform(X, Ybar, A0, span=sp, **LAMS)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(TypeError, match="RowSpan"):
        update_transform(X, Ybar, A0, span=sp.basis)
    with pytest.raises(ValueError, match="batch"):
        update_transform(X, Ybar, A0, span=sp, online_rate=0.5)
    with pytest.raises(ValueError, match="span"):
        update_transform(A=A0, stats=update_transform.__globals__["transform_statistics"](
            X, Ybar), span=sp)
    with pytest.raises(ValueError, match="M >= r"):   # M < N: the map of the span, M >= r
        update_transform(X, Ybar[:, :3], A0[:3], span=sp)


def test_span_with_no_data_is_the_prior():
    X, Ybar = np.zeros((3, 5)), np.random.default_rng(0).standard_normal((3, 6))
    sp = row_span(X)
    A, h = update_transform(X, Ybar, None, span=sp, return_history=True, **PAPER)
    np.testing.assert_allclose(np.linalg.svd(A, compute_uv=False),
                               orthogonal_singular_value(**PAPER), rtol=1e-12)
    assert h[-1] == pytest.approx(transform_objective(A, X, Ybar, *PAPER.values()), rel=1e-12)


def test_workspace_gives_the_same_maps():
    X, Ybar, A0, rng = _problem(6, 10, 14, 9)
    sp = row_span(X)
    ws = {}
    a = b = A0
    for _ in range(3):
        Ybar = rng.standard_normal(Ybar.shape)
        st = span_statistics(X, Ybar, sp)
        a = update_transform(A=a, stats=st, span=sp, workspace=ws, n_steps=2, **LAMS)
        b = update_transform(A=b, stats=st, span=sp, n_steps=2, **LAMS)
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(b).max())
    assert ws["A"] is a and ws["sv"].shape == (10,)


def _wide(n=30, N=48, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(3), n // 3)
    return 4.0 * rng.standard_normal((3, N))[y] + rng.standard_normal((n, N))


@pytest.mark.parametrize("kw", [dict(assign="objective", init="k-means++"), dict()],
                         ids=["objective", "default"])
def test_fit_with_fewer_rows_than_features_works_in_the_span(kw, monkeypatch):
    # the fit never forms X^T X (N x N) and gives the labels of the full-space update, the same
    # objective and the same action on the span of the rows
    X = _wide()
    est = dict(n_components=64, max_iter=3, random_state=0, **kw)
    ref = NTClustering(3, **est)
    with monkeypatch.context() as m:
        m.setattr(loop, "gram", lambda src, p=None: src.map(passes.pass_gram, combine=passes.add))
        ref.fit(X)

    def no_gram(*a, **k):
        raise AssertionError("X^T X formed")
    monkeypatch.setattr(passes, "pass_gram", no_gram)
    got = NTClustering(3, **est).fit(X)
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.objective_history_, ref.objective_history_, rtol=1e-9)
    P = row_span(X * got.scale_).basis
    np.testing.assert_allclose(got.components_ @ P, ref.components_ @ P, rtol=0,
                               atol=1e-8 * np.abs(ref.components_).max())
    np.testing.assert_array_equal(got.predict(X), ref.predict(X))


def test_fit_in_the_span_chunked_partial_and_online():
    # chunked: the same fit; partial_fit and the online update: the full-space statistics
    X = _wide()
    est = dict(n_components=64, max_iter=2, random_state=0, assign="objective",
               init="k-means++")
    a = NTClustering(3, **est).fit(X)
    b = NTClustering(3, **est).fit(X, chunk_size=7)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_allclose(b.components_, a.components_, rtol=0,
                               atol=1e-8 * np.abs(a.components_).max())
    c = NTClustering(3, online_fraction=0.9, **est).fit(X)
    assert np.all(np.isfinite(c.components_))
    d = NTClustering(3, **est)
    d.partial_fit(X[:15])
    d.partial_fit(X[15:])
    assert np.all(np.isfinite(d.components_))


def test_fit_of_zero_rows_with_fewer_rows_than_features():
    # the span of zero rows has no dimension: the model's map is zero everywhere
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # all representations are zero
        model = NTClustering(1, n_components=6, random_state=0).fit(np.zeros((2, 5)))
    assert model.components_.shape == (6, 5) and not np.any(model.components_)
    assert np.all(np.isfinite(model.objective_history_))


# ------------------------------------------------- n_components < N: the model of a subspace
@pytest.mark.parametrize("n,N,M", [(6, 20, 8), (5, 9, 5), (12, 40, 30)])
def test_subspace_step_is_the_step_of_the_projected_rows(n, N, M):
    # M < N: A = A1 P^T with A1 the ordinary (M >= r) update of the coordinates X P from A0 P
    X, Ybar, A0, _ = _problem(n, N, M, 3)
    sp = row_span(X)
    A, hist = update_transform(X, Ybar, A0, span=sp, return_history=True, **PAPER)
    A1, hist1 = update_transform(X @ sp.basis, Ybar, A0 @ sp.basis, return_history=True,
                                 **PAPER)
    np.testing.assert_allclose(A, A1 @ sp.basis.T, rtol=0, atol=1e-10 * np.abs(A1).max())
    np.testing.assert_allclose(hist, hist1, rtol=1e-10)
    np.testing.assert_allclose(_outside(A, sp.basis), 0.0, atol=1e-12)
    A_on = update_transform(X, Ybar, A0, span=sp, online_rate=0.5, **PAPER)
    np.testing.assert_allclose(A_on, (0.5 * A0 @ sp.basis + 0.5 * A1) @ sp.basis.T, rtol=0,
                               atol=1e-10 * np.abs(A1).max())
    with pytest.raises(ValueError, match="expected M >= r"):
        update_transform(X, Ybar[:, :n - 1], A0[:n - 1], span=sp, **PAPER)


def test_principal_span_is_the_top_singular_subspace():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((40, 9)) * np.arange(1, 10)       # distinct singular values
    sp = principal_span(X.T @ X, 40, 4)
    W = np.linalg.svd(X)[2][:4].T                              # reference: numpy's SVD of X
    np.testing.assert_allclose(sp.basis @ sp.basis.T, W @ W.T, atol=1e-10)
    np.testing.assert_allclose(sp.gram, (X @ sp.basis).T @ (X @ sp.basis), atol=1e-9)
    sub = row_span(X[:3], max_rank=2)
    W3 = np.linalg.svd(X[:3])[2][:2].T
    np.testing.assert_allclose(sub.basis @ sub.basis.T, W3 @ W3.T, atol=1e-10)
    st = project_statistics(loop.TransformStatistics(X.T @ X, Ybar := rng.standard_normal(
        (5, 9)), 1.0, 40, np.dtype(np.float64)), sp)
    np.testing.assert_allclose(st.cross, Ybar @ sp.basis)


def _row_space_in(A, B):
    """Largest |A v| over unit v orthogonal to the columns of B (orthonormal)."""
    out = A - (A @ B) @ B.T
    return np.linalg.norm(out, 2) / np.linalg.norm(A, 2)


@pytest.mark.parametrize("M", [40, 20])
@pytest.mark.parametrize("kw", [dict(), dict(assign="objective", init="k-means++"),
                                dict(online_fraction=0.8, assign="objective")],
                         ids=["default", "objective", "online"])
def test_fit_with_fewer_components_than_features(kw, M):
    # M < N: A is zero outside the rows' top-min(n, M) singular subspace (numpy's SVD: their
    # span when n = 30 <= M); new rows' parts outside it change nothing
    X = _wide(n=30, N=48)
    model = NTClustering(3, n_components=M, max_iter=2, random_state=0, **kw).fit(X)
    assert model.components_.shape == (M, 48)
    P = np.linalg.svd(X * model.scale_)[2][:min(30, M)].T
    assert _row_space_in(model.components_, P) < 1e-10
    assert np.linalg.matrix_rank(model.components_) == min(30, M)
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((5, 48))
    Z_out = Z - (Z @ P) @ P.T
    np.testing.assert_allclose(model.transform(Z + Z_out), model.transform(Z), atol=1e-9)
    assert np.all(np.isfinite(model.objective_history_))


def test_fit_in_a_principal_subspace_and_partial_fit():
    # n > N > M: the top-M principal subspace of the scaled rows (numpy's SVD as reference)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((90, 12)) * np.linspace(3.0, 0.5, 12) + 4.0 * rng.standard_normal(
        (3, 12))[np.repeat(np.arange(3), 30)]
    model = NTClustering(3, n_components=7, max_iter=2, random_state=0, assign="objective",
                         init="k-means++").fit(X)
    W = np.linalg.svd(X * model.scale_)[2][:7].T
    assert _row_space_in(model.components_, W) < 1e-9
    assert np.linalg.matrix_rank(model.components_) == 7
    part = NTClustering(3, n_components=7, random_state=0)
    part.partial_fit(X[:45])
    part.partial_fit(X[45:])   # running sums (forget=1): the principal subspace of all rows
    W = np.linalg.svd(X * part.scale_)[2][:7].T
    assert _row_space_in(part.components_, W) < 1e-9


# --------------------------------------- the graph rule's shared directions: outside the model
@pytest.mark.parametrize("n,N,rows", [(60, 9, False), (7, 20, True), (30, 12, True)])
def test_complement_span_is_the_top_subspace_of_the_rows_without_U(n, N, rows):
    # reference: numpy's SVD of the rows with their components along U removed
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, N)) * np.linspace(3.0, 0.5, N)
    U = np.linalg.qr(X[:2].T + 0.1 * rng.standard_normal((N, 2)))[0]   # partly in the rows
    Xc = X - (X @ U) @ U.T
    k = min(n, N - 2) - 1
    sp = complement_span(row_span(X) if rows else X.T @ X, n, k, U)
    W = np.linalg.svd(Xc)[2][:k].T
    assert sp.zero_outside and sp.basis.shape == (N, k)
    np.testing.assert_allclose(sp.basis.T @ sp.basis, np.eye(k), atol=1e-10)
    np.testing.assert_allclose(sp.basis @ sp.basis.T, W @ W.T, atol=1e-8)
    np.testing.assert_allclose(U.T @ sp.basis, 0.0, atol=1e-10)
    np.testing.assert_allclose(sp.gram, (Xc @ sp.basis).T @ (Xc @ sp.basis), atol=1e-8)


def test_zero_outside_step_with_more_components_than_features():
    # M >= N with span.zero_outside: A = A1 P^T, A1 the update of the coordinates X P
    X, Ybar, A0, rng = _problem(40, 8, 20, 5)
    U = np.linalg.qr(rng.standard_normal((8, 2)))[0]
    Xc = X - (X @ U) @ U.T
    sp = complement_span(X.T @ X, 40, 20, U)
    A = update_transform(stats=span_statistics(Xc, Ybar, sp), A=A0, span=sp, **PAPER)
    A1 = update_transform(Xc @ sp.basis, Ybar, A0 @ sp.basis, **PAPER)
    np.testing.assert_allclose(A, A1 @ sp.basis.T, rtol=0, atol=1e-10 * np.abs(A1).max())
    np.testing.assert_allclose(A @ U, 0.0, atol=1e-12)


def _shared_data(n_per, N, seed=3):
    """4 tight clusters plus a strong component along 2 directions common to all (S)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(4), n_per)
    S = np.linalg.qr(rng.standard_normal((N, 2)))[0].T
    X = (1.5 * rng.standard_normal((4, N))[y] + 0.4 * rng.standard_normal((y.size, N))
         + 8.0 * rng.standard_normal((y.size, 2)) @ S)
    return X, rng


@pytest.mark.parametrize("n_per,N,M", [(40, 30, 40), (5, 30, 40), (40, 30, 12)],
                         ids=["n>N", "n<N", "M<N"])
@pytest.mark.parametrize("how", ["fit", "partial_fit"])
def test_graph_model_is_zero_on_the_shared_directions(n_per, N, M, how):
    # the graph rule removed n_shared_ directions: A is zero on them (in the input's
    # coordinates), transform ignores them, and the model is that of the rows without them
    X, rng = _shared_data(n_per, N)
    model = NTClustering(4, n_components=M, n_shared=2, max_iter=2, random_state=0)
    if how == "fit":
        model.fit(X)
    else:
        model.partial_fit(X[::2]).partial_fit(X[1::2])
    assert model.n_shared_ == 2
    U = np.linalg.qr(model.shared_components_.T)[0]
    A = model.components_
    assert np.abs(A @ U).max() < 1e-10 * np.abs(A).max()
    Xs = X * model.scale_
    rank = min(len(X), N) - 2
    assert np.linalg.matrix_rank(A, 1e-8 * np.abs(A).max()) == min(M, rank)
    Z = rng.standard_normal((6, N))
    np.testing.assert_allclose(model.transform(Z + rng.standard_normal((6, 2)) @ U.T),
                               model.transform(Z), atol=1e-9)
    assert np.all(np.isfinite(model.objective_history_))
    W = np.linalg.svd(Xs - (Xs @ U) @ U.T)[2][:min(M, rank)].T
    if how == "fit":   # the principal subspace of the rows without U
        assert _row_space_in(A, W) < 1e-8


def test_initial_map_is_zero_on_the_shared_directions():
    # A_0 of the graph rule (and the tau it seeds) already ignore the shared directions
    X, _ = _shared_data(40, 30)
    model = NTClustering(4, n_shared=2, random_state=0)
    p = model._params(30)
    st = loop.initialise(X, p, np.random.RandomState(0))
    U = np.linalg.qr(np.asarray(st.graph["V"]).T)[0]
    assert U.shape == (30, 2) and np.abs(st.A @ U).max() < 1e-12
    p = model.set_params(assign="objective")._params(30)
    st = loop.initialise(X, p, np.random.RandomState(0))   # another rule: the paper's A_0
    assert np.abs(st.A @ U).max() > 0.1
