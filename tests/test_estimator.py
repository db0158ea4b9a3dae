"""NTClustering and the alternating driver."""
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from ntnumba import NTClustering
from ntnumba.engine import loop as _driver
from ntnumba.engine import passes as _passes

SMALL = dict(n_components=24, max_iter=15)


def _blobs(n_per=25, C=3, N=8, sep=6.0, seed=0):
    rng = np.random.default_rng(seed)
    centers = sep * rng.standard_normal((C, N))
    y = np.repeat(np.arange(C), n_per)
    X = centers[y] + rng.standard_normal((y.size, N))
    perm = rng.permutation(y.size)
    return X[perm], y[perm]


# sklearn (1.9.1) reads classifier_tags.multi_class of any estimator with predict_proba that
# takes sparse input (None for a clusterer); tests/test_inference.py checks every format
_SPARSE = {c: "reads classifier tags a clusterer has not" for c in (
    "check_estimator_sparse_array", "check_estimator_sparse_matrix")}


@parametrize_with_checks(
    [NTClustering(3, n_components=16, max_iter=10, random_state=0)],
    expected_failed_checks=lambda est: _SPARSE)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("learn_transform", [True, False])
def test_recovers_planted_clusters(learn_transform):
    X, y = _blobs(seed=1)
    model = NTClustering(3, learn_transform=learn_transform, random_state=0, **SMALL).fit(X)
    assert adjusted_rand_score(y, model.labels_) > 0.95
    assert adjusted_rand_score(y, model.predict(X)) > 0.95


def test_same_random_state_same_result():
    X, _ = _blobs(seed=2)
    a = NTClustering(3, random_state=5, **SMALL).fit(X)
    b = NTClustering(3, random_state=5, **SMALL).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.objective_history_, b.objective_history_)


def test_objective_non_increasing_exact_variant():
    """objective rule, batch A update and lambda_e = 0: every stage is exact or monotone."""
    X, _ = _blobs(n_per=20, C=4, N=6, sep=2.0, seed=3)
    model = NTClustering(4, lambda_e=0.0, tol=0.0, random_state=0, n_components=20,
                         max_iter=12).fit(X)
    h = model.objective_history_
    assert h.size == 12 and np.all(np.isfinite(h))
    assert np.all(np.diff(h) <= 1e-9 * np.abs(h[:-1])), np.diff(h)


def _iterate(X, state, p, rng):
    """One in-memory iteration of the driver from ``state`` on the scaled rows ``X``."""
    src = _driver.MemoryBlocks(X)
    ctx = _driver.Context(src, gram=_driver.gram(src) if p.learn_transform else None)
    with _driver.blas_context():
        return _driver.iterate_blocks(ctx, state, p, rng)


def test_objective_history_matches_recomputation():
    X, _ = _blobs(n_per=15, C=3, N=5, seed=4)
    p = NTClustering(3, random_state=0, n_components=15, max_iter=3, tol=0.0,
                     assign="objective", init="k-means++")._params(5)
    rng = np.random.RandomState(0)
    s0 = _driver.initialise(X, p, rng)
    s1, obj, _ = _iterate(X, s0, p, rng)
    # recompute from scratch with the naive references
    import naive
    import naive_theta
    Q = X @ s1.A.T
    val = 0.0
    T = s1.tau[s1.labels] + s1.nu[s1.similarity_labels]
    from ntnumba.kernels import assign
    Y = assign(X @ s0.A.T, s0.tau, s0.nu, p.lambda0, p.lambda1)[2]
    for i in range(X.shape[0]):
        y = Y[i]
        val += 0.5 * np.sum((Q[i] - y) ** 2) + p.lambda1 * np.sum(np.abs(y))
        val += 0.5 * p.lambda_a * np.sum((Q[i] - T[i]) ** 2)
        val += p.lambda0 * naive.score_sp(y, s1.tau[s1.labels[i]], s1.nu[s1.similarity_labels[i]])
    val += p.lambda_e * naive_theta.prior_up(s1.tau, s1.nu)
    A = s1.A
    val += (0.5 * p.lambda2 * np.sum(A ** 2) + 0.5 * p.lambda3 * np.sum((A @ A.T - np.eye(15)) ** 2)
            - p.lambda4 * np.linalg.slogdet(A.T @ A)[1])
    assert obj == pytest.approx(val, rel=1e-9)


def test_n_init_keeps_lowest_objective():
    X, _ = _blobs(n_per=15, C=3, N=5, sep=1.5, seed=5)
    finals = []
    seeds = np.random.RandomState(7).randint(np.iinfo(np.int32).max, size=3)
    for s in seeds:
        m = NTClustering(3, random_state=0, n_components=15, max_iter=5)
        # the same per-restart seed as n_init uses
        p = m._params(5)
        Xs = m._scaled(X, _driver.rms_scale(_driver.MemoryBlocks(X), "rms"))
        rng = np.random.RandomState(s)
        st = _driver.run(Xs, _driver.initialise(Xs, p, rng), p, rng)
        finals.append(st.objective_history[-1])
    model = NTClustering(3, random_state=7, n_init=3, n_components=15, max_iter=5).fit(X)
    assert model.objective_history_[-1] == pytest.approx(min(finals), rel=1e-12)


@pytest.mark.parametrize("assign", ["graph", "objective"])
def test_final_labels_are_stage1_of_the_kept_restart(assign):
    # labels_ / similarity_labels_ are Stage 1 with the kept restart's final parameters (the
    # final pass reuses Q = X A^T only when it is of that A, not the last restart's)
    X, _ = _blobs(n_per=15, C=3, N=5, sep=1.5, seed=5)
    m = NTClustering(3, assign=assign, random_state=3, n_init=3, n_components=15,
                     max_iter=3).fit(X)
    Q = _driver.compute_Q(m._scaled(X, m.scale_), m.components_, True)
    fixed = m.labels_ if assign == "graph" else None
    lab, sim = _passes.stage1(Q, m.dissimilarity_, m.similarity_, m._fitted.params, fixed)[:2]
    np.testing.assert_array_equal(m.labels_, lab)
    np.testing.assert_array_equal(m.similarity_labels_, sim)


def test_identity_transform_option():
    X, _ = _blobs(seed=6)
    model = NTClustering(3, learn_transform=False, random_state=0, max_iter=5).fit(X)
    np.testing.assert_array_equal(model.components_, np.eye(X.shape[1]))
    assert model.dissimilarity_.shape == (3, X.shape[1])
    assert model.transform(X).shape == X.shape


def test_paper_rule_selectable_and_online_variant():
    X, _ = _blobs(seed=7)
    m = NTClustering(3, assign="paper", random_state=0, **SMALL).fit(X)
    assert m.labels_.shape == (X.shape[0],)
    m = NTClustering(3, online_fraction=0.85, online_rate=0.5, random_state=0, **SMALL).fit(X)
    assert np.all(np.isfinite(m.objective_history_))


def test_n_jobs_restored_and_thread_independent():
    import numba
    X, _ = _blobs(seed=8)
    before = numba.get_num_threads()
    a = NTClustering(3, random_state=1, n_jobs=1, **SMALL).fit(X)
    assert numba.get_num_threads() == before
    b = NTClustering(3, random_state=1, n_jobs=-1, **SMALL).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.dissimilarity_, b.dissimilarity_)
    np.testing.assert_array_equal(a.objective_history_, b.objective_history_)


@pytest.mark.parametrize("n_per, N, M", [(15, 5, 15), (10, 50, 60)])  # fewer rows than
def test_warm_start_equals_uninterrupted_fit(n_per, N, M):              # features: the span
    X, _ = _blobs(n_per=n_per, C=3, N=N, sep=1.5, seed=9)
    full = NTClustering(3, random_state=3, tol=0.0, n_components=M, max_iter=6).fit(X)
    part = NTClustering(3, random_state=3, tol=0.0, n_components=M, max_iter=1,
                        warm_start=True).fit(X)
    for total in (3, 6):
        part.set_params(max_iter=total).fit(X)
    np.testing.assert_array_equal(part.objective_history_, full.objective_history_)
    np.testing.assert_array_equal(part.components_, full.components_)
    np.testing.assert_array_equal(part.labels_, full.labels_)


def test_keyboard_interrupt_keeps_last_complete_iterate():
    X, _ = _blobs(seed=10)
    seen = []

    def cb(state):
        seen.append(state.n_iter)
        if state.n_iter == 3:
            raise KeyboardInterrupt

    model = NTClustering(3, random_state=0, tol=0.0, **SMALL)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        with pytest.raises(KeyboardInterrupt):
            model.fit(X, callback=cb)
    assert model.n_iter_ == 3 and len(model.objective_history_) == 3
    assert model.predict(X).shape == (X.shape[0],)


def test_callback_can_stop():
    X, _ = _blobs(seed=11)
    model = NTClustering(3, random_state=0, tol=0.0, **SMALL)
    model.fit(X, callback=lambda s: s.n_iter >= 2)
    assert model.n_iter_ == 2


def test_verbose_progress_lines(capsys):
    X, _ = _blobs(seed=12)
    NTClustering(3, random_state=0, verbose=1, tol=0.0, n_components=24, max_iter=3).fit(X)
    err = capsys.readouterr().err.strip().splitlines()
    # the phases (tests/test_verbose.py), one line per iteration
    iters = [line for line in err if line.startswith("iteration")]
    assert len(iters) == 3 and len(err) > 3
    assert all("objective" in line and "eta" in line for line in iters)


def test_each_stage_never_increases_the_full_objective():
    """Stage 1 (objective rule), Stage 2 (lambda_e = 0) and Stage 3 (batch MM), one at a time."""
    from ntnumba.kernels import assign, update_theta, update_transform
    for seed in range(4):
        X, _ = _blobs(n_per=12, C=3, N=5, sep=1.0, seed=20 + seed)
        X = X / np.sqrt(np.mean(X ** 2))
        p = NTClustering(3, lambda_e=0.0, random_state=0, n_components=12, assign="objective",
                         init="k-means++")._params(5)
        rng = np.random.RandomState(seed)
        s0 = _driver.initialise(X, p, rng)
        s, obj, _ = _iterate(X, s0, p, rng)
        Q = X @ s.A.T
        # the previous iterate: Stage 1 of the first iteration, with the initial parameters
        Y0 = assign(X @ s0.A.T, s0.tau, s0.nu, p.lambda0, p.lambda1, lambda_a=p.lambda_a)[2]
        J0 = _driver.full_objective(X, s.A, Y0, s.labels, s.similarity_labels, s.tau, s.nu, p)
        assert J0 == pytest.approx(obj, rel=1e-12)
        lab, sim, Y = assign(Q, s.tau, s.nu, p.lambda0, p.lambda1, lambda_a=p.lambda_a)[:3]
        J1 = _driver.full_objective(X, s.A, Y, lab, sim, s.tau, s.nu, p)
        tau, nu = update_theta(Q, Y, lab, sim, s.tau, s.nu, lambda0=p.lambda0,
                               lambda_a=p.lambda_a, lambda_e=0.0)
        J2 = _driver.full_objective(X, s.A, Y, lab, sim, tau, nu, p)
        w = 1 + p.lambda_a
        Ybar = (Y + p.lambda_a * (tau[lab] + nu[sim])) / w
        A = update_transform(X, Ybar, s.A, lambda2=p.lambda2 / w, lambda3=p.lambda3 / w,
                             lambda4=p.lambda4 / w, n_steps=5)
        J3 = _driver.full_objective(X, A, Y, lab, sim, tau, nu, p)
        tol = 1e-10 * abs(J0)
        assert J1 <= J0 + tol and J2 <= J1 + tol and J3 <= J2 + tol, (J0, J1, J2, J3)


def test_removed_options_are_not_parameters():
    """``relabel``, ``prototypes`` and ``n_dissimilarity`` were removed
    (``docs/research/relabel-and-prototypes.md``): not parameters, refused as unknown."""
    params = NTClustering().get_params()
    for name in ("relabel", "prototypes", "n_dissimilarity"):
        assert name not in params
        with pytest.raises(TypeError, match=name):
            NTClustering(3, **{name: 1})
