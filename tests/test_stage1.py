"""Stage 1: quartic solver, candidate NT representations and the assignment kernel."""
import numpy as np
import pytest
from numba import njit

import naive
from ntnumba.model import stage1 as _stage1
from ntnumba.kernels import assign, candidate_nt, solve_quartic

LAM = 0.03  # the paper's lambda0 = lambda1


# ------------------------------------------------------------------------------ quartic
def _match_roots(ours, ref, rtol):
    """Every reference root has one of ours nearby and vice versa."""
    scale = max(1.0, np.max(np.abs(ref), initial=0.0))
    for r in ref:
        assert np.min(np.abs(ours - r), initial=np.inf) <= rtol * scale, (ours, ref)
    for r in ours:
        assert np.min(np.abs(ref - r), initial=np.inf) <= rtol * scale, (ours, ref)


def test_quartic_random_against_numpy_roots():
    rng = np.random.default_rng(0)
    for _ in range(500):
        c = rng.standard_normal(5)
        ours = solve_quartic(c)
        ref = naive.real_roots_numpy(c, tol=1e-9)
        _match_roots(ours, ref, 1e-8)


def test_quartic_four_real_roots_from_factors():
    rng = np.random.default_rng(1)
    for _ in range(300):
        r = np.sort(rng.uniform(-10, 10, 4))
        if np.min(np.diff(r)) < 1e-2:
            continue
        ours = solve_quartic(np.poly(r))
        assert ours.size == 4
        np.testing.assert_allclose(ours, r, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("roots", [
    [1.0, 1.0, 2.0, -3.0],          # double root
    [2.0, 2.0, 2.0, 2.0],           # quadruple root
    [1e-8, 2.0, 3.0, -1.0],         # root near zero
    [0.0, 0.5, -0.5, 4.0],          # exact zero root
    [5.0, 5.0 + 1e-7, -2.0, 1.0],   # near-double root
])
def test_quartic_adversarial(roots):
    ours = solve_quartic(np.poly(roots))
    # multiple roots are ill-conditioned: a root of multiplicity m moves by eps^(1/m)
    for r in roots:
        assert np.min(np.abs(ours - r)) <= 1e-3 * max(1.0, abs(r)), (ours, roots)


@pytest.mark.parametrize("scale", [1e-70, 1e-30, 1.0, 1e30, 1e70])
def test_quartic_scale_invariance(scale):
    r = np.array([-3.0, -0.5, 1.0, 7.0]) * scale
    c = np.poly(r)
    ours = solve_quartic(c / np.max(np.abs(c)))
    np.testing.assert_allclose(ours, r, rtol=1e-9)


def test_quartic_stage1_shape_against_numpy_roots():
    """The kernel's quartic has no quadratic term: h^4 - Vq h^3 + c1 h + c0, c0 >= 0."""
    rng = np.random.default_rng(2)
    for _ in range(500):
        Vq = rng.uniform(-5, 50)
        c1 = rng.standard_normal() * 10.0 ** rng.uniform(-6, 3)
        c0 = rng.uniform(0, 1) * 10.0 ** rng.uniform(-8, 2)
        c = [1.0, -Vq, 0.0, c1, c0]
        _match_roots(solve_quartic(c), naive.real_roots_numpy(c, tol=1e-9), 1e-7)


def test_quartic_errors():
    with pytest.raises(ValueError, match="leading coefficient"):
        solve_quartic([0, 1, 2, 3, 4])
    with pytest.raises(ValueError, match="5 coefficients"):
        solve_quartic([1, 2, 3])
    with pytest.raises(ValueError, match="finite"):
        solve_quartic([1, np.nan, 0, 0, 0])


# ------------------------------------------------------------------------------ candidate
def _instances(n, M, q_scale, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield (q_scale * rng.standard_normal(M), rng.standard_normal(M),
               rng.standard_normal(M))


def _same_value(v, ref, rtol=1e-9):
    if np.isinf(ref):
        return np.isinf(v)
    return np.isfinite(v) and abs(v - ref) <= rtol * abs(ref)


@pytest.mark.slow
@pytest.mark.parametrize("q_scale", [1.0, 3.0])
def test_candidate_is_global_minimum_paper_lambdas(q_scale):
    """At the paper's lambdas SI+ reaches the enumerated global minimum."""
    for q, tau, nu in _instances(150, 8, q_scale, seed=int(q_scale * 10)):
        y_ref, v_ref = naive.candidate_enum(q, tau, nu, LAM, LAM)
        y, v = candidate_nt(q, tau, nu, LAM, LAM)
        assert _same_value(v, v_ref), (v, v_ref)
        if np.isfinite(v_ref):
            np.testing.assert_allclose(y, y_ref, rtol=1e-7, atol=1e-9)


@pytest.mark.slow
def test_candidate_large_lambda0_failure_rates():
    """Away from the paper's regime SI+ is a local method; the safeguard must be exact.

    Documented rates (docs/algorithm.md): measured over these 300 instances.
    """
    n_si = n_sg = total = 0
    for lam0, M, seed in [(0.5, 7, 3), (2.0, 7, 4), (5.0, 6, 5)]:
        for q, tau, nu in _instances(100, M, 1.0, seed):
            _, v_ref = naive.candidate_enum(q, tau, nu, lam0, LAM)
            _, v_si = candidate_nt(q, tau, nu, lam0, LAM)
            _, v_sg = candidate_nt(q, tau, nu, lam0, LAM, safeguard=True)
            total += 1
            n_si += _same_value(v_si, v_ref)
            n_sg += _same_value(v_sg, v_ref)
            # neither may ever be below the global minimum
            if np.isfinite(v_ref):
                assert not (v_si < v_ref * (1 - 1e-9)) and not (v_sg < v_ref * (1 - 1e-9))
    assert n_si / total >= 0.95
    assert n_sg / total >= 0.99


@pytest.mark.slow
def test_candidate_never_above_lbfgs():
    for q, tau, nu in _instances(40, 12, 2.0, seed=7):
        _, v = candidate_nt(q, tau, nu, LAM, LAM)
        ref = naive.candidate_lbfgs(q, tau, nu, LAM, LAM, n_starts=4)
        if ref >= 1e299:  # no start found a point with rho(y, nu) > 0
            assert np.isinf(v)
            continue
        assert v <= ref + 1e-9 * abs(ref)


def test_candidate_value_is_objective_at_y_and_signs():
    for q, tau, nu in _instances(100, 60, 2.0, seed=8):
        y, v = candidate_nt(q, tau, nu, LAM, LAM)
        assert np.isfinite(v)
        assert v == pytest.approx(naive.candidate_objective(y, q, tau, nu, LAM, LAM),
                                  rel=1e-12)
        nz = y != 0
        assert np.all(np.sign(y[nz]) == np.sign(q[nz]))


def test_candidate_lambda0_zero_is_soft_threshold():
    q, tau, nu = next(_instances(1, 30, 2.0, seed=9))
    y, v = candidate_nt(q, tau, nu, 0.0, 0.5)
    np.testing.assert_allclose(y, np.sign(q) * np.maximum(np.abs(q) - 0.5, 0))


def test_candidate_invalid_cases():
    rng = np.random.default_rng(10)
    q = rng.standard_normal(10)
    tau = rng.standard_normal(10)
    # nu has no mass on the signs of q: rho(y, nu) = 0 for every sign-consistent y
    nu = -np.abs(rng.standard_normal(10)) * np.sign(q)
    y, v = candidate_nt(q, tau, nu, LAM, LAM)
    assert np.isinf(v) and np.all(y == 0)
    # |q| <= lambda1 everywhere: the infimum is only approached as y -> 0
    y, v = candidate_nt(0.01 * q, tau, rng.standard_normal(10), LAM, LAM)
    assert np.isinf(v) and np.all(y == 0)
    assert np.isinf(naive.candidate_enum(0.01 * q, tau, rng.standard_normal(10), LAM, LAM)[1])
    # all-zero q
    y, v = candidate_nt(np.zeros(10), tau, nu, LAM, LAM)
    assert np.isinf(v) and np.all(y == 0)


@pytest.mark.parametrize("tau_scale, nu_scale", [
    (1e-40, 1e-40),      # normal range: the arithmetic of before
    (1e-100, 1e-100),    # the quartic's terms (~ v^4) underflowed
    (1e-160, 1e-160),    # v^2 underflowed: Vv = 0 or subnormal
    (1e-310, 1e-310),    # subnormal g and v: the safeguard's lam / h overflowed
    (1e-310, 1e-160),    # mixed: tiny g, v of another decade
    (1.0, 1e-310),       # a normal tau, a subnormal nu
])
def test_candidate_and_assign_with_tiny_tau_and_nu(tau_scale, nu_scale):
    """Kernel (SI+ alone, with the safeguard, and the batched assignment with two dissimilarity
    and two similarity parameters) against the enumeration, which scales tiny ``v`` itself. The
    ratio term depends on g, v only through g.a / v.a: the kernel rescales every problem whose
    v is tiny by a power of two. (tau of 1e-160 with nu of 1e-310 is left out: g / v ~ 1e150,
    beyond what the enumeration handles.)"""
    rng = np.random.default_rng(27)
    finite = 0
    for _ in range(6):
        M = int(rng.integers(3, 5))
        q = 2.0 * rng.standard_normal(M)
        tau = tau_scale * rng.standard_normal((2, M))
        nu = nu_scale * rng.standard_normal((2, M))
        lam0 = float(rng.choice([0.03, 0.3, 1.0]))
        F = assign(q[None], tau, nu, lam0, LAM, return_details=True)[4]["F"][0]
        for c1 in range(2):
            for c2 in range(2):
                _, ref = naive.candidate_enum(q, tau[c1], nu[c2], lam0, LAM)
                got = [candidate_nt(q, tau[c1], nu[c2], lam0, LAM, safeguard=sg)[1]
                       for sg in (False, True)] + [F[c1, c2]]
                if np.isinf(ref):
                    assert np.all(np.isinf(got)), (got, ref)
                    continue
                finite += 1
                np.testing.assert_allclose(got, ref, rtol=1e-9)
    assert finite >= 12  # the cases are not all invalid


@pytest.mark.parametrize("scale", [1.0, 2.0 ** 100])
def test_candidate_whose_si_point_is_above_the_limit_at_zero(scale):
    """SI+ settles here on a point that is not below the limit at zero while the safeguard
    finds a valid minimiser: the candidate must go to the safeguard, not be marked invalid (it
    was, with ``safeguard=False``: value inf). Tiny tau, nu (rescaled inside) and the same case
    at normal scale (x 2^100, exact). Kernel and assignment against the enumeration."""
    q = np.array([1.552, -0.568, 0.0815])
    tau = scale * np.array([5.38e-41, -1.42e-40, -8.30e-41])
    nu = scale * np.array([-1.60e-41, -3.69e-41, 1.68e-41])
    lam0 = 0.3
    _, ref = naive.candidate_enum(q, tau, nu, lam0, LAM)
    assert np.isfinite(ref)
    got = [candidate_nt(q, tau, nu, lam0, LAM, safeguard=sg)[1] for sg in (False, True)]
    for dtype in (np.float64, np.float32) if scale != 1.0 else (np.float64,):
        F = assign(q[None].astype(dtype), tau[None], nu[None], lam0, LAM,
                   return_details=True)[4]["F"]
        got.append(F[0, 0, 0])
    np.testing.assert_allclose(got, ref, rtol=1e-6)


def test_assign_float32_with_tiny_tau_and_nu():
    """float32 batched passes: with tau, nu of 1e-22 the sums (v^2 ~ 1e-44) are float32
    subnormals; such candidates go to the float64 solvers. Against the enumeration."""
    rng = np.random.default_rng(3)
    finite = 0
    for _ in range(30):
        M = int(rng.integers(3, 5))
        q = (2.0 * rng.standard_normal(M)).astype(np.float32)
        tau = (1e-22 * rng.standard_normal((1, M))).astype(np.float32)
        nu = (1e-22 * rng.standard_normal((1, M))).astype(np.float32)
        lam0 = float(rng.choice([0.03, 0.3]))
        F = assign(q[None], tau, nu, lam0, LAM, return_details=True)[4]["F"][0, 0, 0]
        _, ref = naive.candidate_enum(q.astype(float), tau[0].astype(float),
                                      nu[0].astype(float), lam0, LAM)
        if np.isinf(ref):
            assert np.isinf(F)
            continue
        finite += 1
        assert F == pytest.approx(ref, rel=1e-5)
    assert finite >= 20


def test_candidate_argument_errors():
    with pytest.raises(ValueError, match="nu: expected length 3"):
        candidate_nt(np.ones(3), np.ones(3), np.ones(4), LAM, LAM)
    with pytest.raises(ValueError, match="lambda0: must be >= 0"):
        candidate_nt(np.ones(3), np.ones(3), np.ones(3), -1.0, LAM)
    with pytest.raises(ValueError, match="q: contains 1 NaN"):
        candidate_nt([1.0, np.nan, 2.0], np.ones(3), np.ones(3), LAM, LAM)


# ------------------------------------------------------------------------------ assign
def _problem(n, M, Cd, Cs, seed, q_scale=2.0):
    rng = np.random.default_rng(seed)
    return (q_scale * rng.standard_normal((n, M)), rng.standard_normal((Cd, M)),
            rng.standard_normal((Cs, M)))


@pytest.mark.parametrize("rule", ["objective", "paper"])
def test_assign_equals_enumeration_loop(rule):
    Q, tau, nu = _problem(6, 7, 3, 2, seed=11)
    labels, sim, Y, scores = assign(Q, tau, nu, LAM, LAM, rule=rule, lambda_a=0.7)
    ref = naive.assign_loop(Q, tau, nu, LAM, LAM, rule, 0.7, naive.candidate_enum)
    np.testing.assert_array_equal(labels, ref[0])
    np.testing.assert_array_equal(sim, ref[1])
    np.testing.assert_allclose(Y, ref[2], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(scores, ref[3], rtol=1e-8)


@pytest.mark.parametrize("rule", ["objective", "paper"])
def test_assign_equals_candidate_loop(rule):
    Q, tau, nu = _problem(25, 80, 4, 3, seed=12)
    labels, sim, Y, scores = assign(Q, tau, nu, LAM, LAM, rule=rule, lambda_a=1.0)
    ref = naive.assign_loop(Q, tau, nu, LAM, LAM, rule, 1.0, candidate_nt)
    np.testing.assert_array_equal(labels, ref[0])
    np.testing.assert_array_equal(sim, ref[1])
    np.testing.assert_allclose(Y, ref[2], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(scores, ref[3], rtol=1e-9)


def test_assign_invalid_candidates_never_win():
    rng = np.random.default_rng(13)
    Q = 2.0 * rng.standard_normal((20, 30))
    tau = rng.standard_normal((3, 30))
    # nu_0 has no mass where any q has its signs -> every (c1, 0) candidate is invalid
    nu = np.vstack([np.zeros(30), rng.standard_normal(30)])
    labels, sim, Y, scores, det = assign(Q, tau, nu, LAM, LAM, rule="paper",
                                         return_details=True)
    assert np.all(np.isinf(scores[:, :, 0]))
    assert np.all(sim == 1)
    assert np.all(np.isfinite(det["cost"]))
    # a sample with no valid candidate: y = 0, a finite label, never a score-0 winner
    Q[0] = 0.001
    labels, sim, Y, scores = assign(Q, tau, nu, LAM, LAM)
    assert np.all(Y[0] == 0) and np.all(np.isinf(scores[0]))
    assert 0 <= labels[0] < 3


def test_assign_float32_matches_float64():
    Q, tau, nu = _problem(60, 50, 4, 2, seed=14)
    l64, s64, Y64, sc64 = assign(Q, tau, nu, LAM, LAM)
    l32, s32, Y32, sc32 = assign(Q.astype(np.float32), tau, nu, LAM, LAM)
    assert Y32.dtype == np.float32 and Y64.dtype == np.float64
    assert np.mean(l32 == l64) >= 0.95
    np.testing.assert_allclose(sc32, sc64, rtol=1e-4)


def test_assign_recovers_planted_clusters():
    rng = np.random.default_rng(15)
    C, M, per = 5, 120, 30
    tau = 2.0 * rng.standard_normal((C, M))
    nu = rng.standard_normal((2, M))
    truth = np.repeat(np.arange(C), per)
    sim_truth = rng.integers(0, 2, truth.size)
    Q = tau[truth] + nu[sim_truth] + 0.5 * rng.standard_normal((truth.size, M))
    labels, sim, Y, scores = assign(Q, tau, nu, LAM, LAM)
    assert np.mean(labels == truth) >= 0.99
    assert np.mean(sim == sim_truth) >= 0.9


def _planted(seed, C=5, M=60, per=12, Cs=2, noise=0.5):
    rng = np.random.default_rng(seed)
    tau = 2.0 * rng.standard_normal((C, M))
    nu = rng.standard_normal((Cs, M))
    truth = np.repeat(np.arange(C), per)
    Q = tau[truth] + nu[rng.integers(0, Cs, truth.size)] \
        + noise * rng.standard_normal((truth.size, M))
    return Q, tau, nu


@pytest.mark.slow
def test_assign_lower_bound_holds_for_every_candidate():
    # the bound behind prune=True: F >= ||q||^2/2 - sum_j max(|q_j| - lambda1, 0)^2 / (2 k_j),
    # checked against the candidates' objectives of the enumeration reference (no pruning)
    for Q, tau, nu in (_problem(6, 7, 3, 2, seed=21), _planted(22, M=9, per=2)):
        for lam0 in (LAM, 0.5, 3.0):
            ref = naive.assign_loop(Q, tau, nu, lam0, LAM, "objective", 0.7,
                                    naive.candidate_enum)
            scores = ref[3]
            adj = 0.35 * ((Q[:, None, None, :] - tau[None, :, None, :]
                           - nu[None, None, :, :]) ** 2).sum(-1)
            b = np.maximum(np.abs(Q) - LAM, 0.0)
            k = 1.0 + 2.0 * lam0 * tau ** 2
            lb = 0.5 * (Q ** 2).sum(1)[:, None] - 0.5 * (b ** 2) @ (1.0 / k).T
            finite = np.isfinite(scores)
            assert finite.any()
            assert np.all((scores - adj - lb[:, :, None])[finite] >= -1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", ["random", "planted", "ties", "invalid"])
def test_assign_prune_equals_full_evaluation(case, dtype):
    if case == "random":
        Q, tau, nu = _problem(40, 30, 4, 3, seed=23)
    elif case == "planted":
        Q, tau, nu = _planted(24, Cs=3)
    elif case == "ties":  # duplicated parameters: equal scores, the first pair must win
        Q, tau, nu = _planted(25, C=3, per=8)
        tau = np.vstack([tau, tau[::-1]])
        nu = np.vstack([nu, nu])
    else:  # every (c1, 0) candidate invalid, and one sample with no valid candidate
        Q, tau, nu = _planted(26, C=3, per=8)
        nu[0] = 0.0
        Q[0] = 0.001
    Q = Q.astype(dtype)
    full = assign(Q, tau, nu, LAM, LAM, lambda_a=0.7, return_details=True)
    pruned = assign(Q, tau, nu, LAM, LAM, lambda_a=0.7, return_details=True, prune=True)
    np.testing.assert_array_equal(pruned[0], full[0])
    np.testing.assert_array_equal(pruned[1], full[1])
    np.testing.assert_allclose(pruned[2], full[2], rtol=1e-6 if dtype == np.float32 else 1e-12,
                               atol=0)
    np.testing.assert_allclose(pruned[4]["cost"], full[4]["cost"], rtol=1e-12)
    st = pruned[4]["status"]
    skipped = st == _stage1_mod().PRUNED
    # skipped candidates report +inf and could not have won; the others equal the full run
    assert np.all(np.isinf(pruned[3][skipped]))
    np.testing.assert_allclose(pruned[3][~skipped], full[3][~skipped], rtol=1e-12)
    np.testing.assert_array_equal(st[~skipped], full[4]["status"][~skipped])
    best = full[3].reshape(len(Q), -1).min(1)
    assert np.all(full[3][skipped] >= best[np.nonzero(skipped)[0]])
    if case == "planted":
        assert skipped.mean() > 0.5  # the bound does prune on clustered data


def _stage1_mod():
    from ntnumba.model import stage1 as _stage1
    return _stage1


def test_assign_prune_is_ignored_for_the_paper_rule():
    Q, tau, nu = _planted(27)
    full = assign(Q, tau, nu, LAM, LAM, rule="paper")
    pruned = assign(Q, tau, nu, LAM, LAM, rule="paper", prune=True)
    for a, b in zip(full, pruned):
        np.testing.assert_array_equal(a, b)


def test_assign_argument_errors():
    Q, tau, nu = _problem(3, 5, 2, 1, seed=16)
    with pytest.raises(ValueError, match="rule: expected one of"):
        assign(Q, tau, nu, LAM, LAM, rule="bogus")
    with pytest.raises(ValueError, match="tau: expected 5 columns"):
        assign(Q, tau[:, :4], nu, LAM, LAM)
    with pytest.raises(ValueError, match="Q: expected a 2-D array"):
        assign(Q[0], tau, nu, LAM, LAM)
    with pytest.raises(TypeError, match="Q: complex data"):
        assign(Q + 1j, tau, nu, LAM, LAM)


def test_kernel_cache_is_purged_when_a_kernel_module_changes(tmp_path, monkeypatch):
    # numba invalidates a cached kernel only when its own file changes; the package stamps
    # the cache with a hash of quartic, stage1 and theta and drops their files otherwise
    from ntnumba.model import quartic as _quartic
    names = ["stage1._assign_kernel-700.py311.nbi", "stage1._assign_kernel-700.py311.1.nbc",
             "theta._group_sums-180.py311.nbi", "quartic._poly4-1.py311.1.nbc",
             "other._f-1.py311.nbi", "unrelated.txt"]
    for n in names:
        (tmp_path / n).write_text("x")
    assert _quartic._purge_stale_cache(str(tmp_path))
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["ntnumba_kernels.stamp", "other._f-1.py311.nbi", "unrelated.txt"]
    # same sources: nothing is deleted
    (tmp_path / names[0]).write_text("x")
    assert _quartic._purge_stale_cache(str(tmp_path))
    assert (tmp_path / names[0]).exists()
    # another numba version (or edited sources): purged again
    import numba
    monkeypatch.setattr(numba, "__version__", numba.__version__ + ".test")
    assert _quartic._purge_stale_cache(str(tmp_path))
    assert not (tmp_path / names[0]).exists()


def test_assignment_kernel_is_cacheable():
    # numba refuses to cache a kernel with "dynamic globals" (numba.get_num_threads() inside
    # the kernel was one): then every process would compile it again (~5-10 s per dtype)
    import glob
    import os
    from ntnumba.model import quartic as _quartic
    from ntnumba.model import stage1 as _stage1
    if not _quartic.CACHE:
        pytest.skip("numba cache disabled on this machine")
    rng = np.random.default_rng(0)
    assign(rng.standard_normal((5, 8)), rng.standard_normal((2, 8)), rng.standard_normal((2, 8)),
           0.03, 0.03)
    path = _stage1._assign_rows._cache._cache_path
    assert glob.glob(os.path.join(path, "stage1._assign_rows-*.nbi"))


def test_assignment_blocks_on_threads_equal_one_block():
    # _assign_kernel cuts the samples into blocks taken by Python threads: any number of
    # threads gives the same arrays as one block on one thread (and both match candidate_nt)
    from ntnumba.model import stage1 as _stage1
    rng = np.random.default_rng(11)
    Q = 1.5 * rng.standard_normal((37, 24))
    tau, nu = rng.standard_normal((3, 24)), rng.standard_normal((3, 24))
    tpos, tneg = _stage1._split_signs(tau)
    npos, nneg = _stage1._split_signs(nu)
    adj = _stage1.adjustment_term(Q, tau, nu, 1.0)
    tsq = tau * tau
    kmat = 1.0 + 2.0 * 0.03 * tsq
    outs = []
    for nthreads in (1, 2, 3, 5):
        lab = np.empty(37, dtype=np.int64)
        sim = np.empty(37, dtype=np.int64)
        Y = np.empty_like(Q)
        F = np.empty((37, 3, 3))
        SP = np.empty((37, 3, 3))
        status = np.empty((37, 3, 3), dtype=np.int8)
        _stage1._assign_kernel(Q, tpos, tneg, tsq, kmat, 1.0 / kmat, npos, nneg, 0.03, 0.03, adj,
                               1, False, lab, sim, Y, F, SP, status, nthreads)
        outs.append((lab, sim, Y, F, SP, status))
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            np.testing.assert_array_equal(a, b)
    lab, sim, Y = outs[0][:3]
    for i in range(0, 37, 6):
        y, value = candidate_nt(Q[i], tau[lab[i]], nu[sim[i]], 0.03, 0.03)
        assert value == pytest.approx(outs[0][3][i, lab[i], sim[i]], rel=1e-10)
        np.testing.assert_allclose(Y[i], y, rtol=1e-12, atol=1e-14)


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs os.fork")
def test_assignment_threads_work_in_a_forked_child():
    # the thread pool of the parent does not exist in a forked child: it must not hang there
    import os
    import numba
    rng = np.random.default_rng(2)
    Q, tau, nu = (rng.standard_normal((40, 16)), rng.standard_normal((3, 16)),
                  rng.standard_normal((2, 16)))
    old = numba.get_num_threads()
    numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
    try:
        ref = assign(Q, tau, nu, 0.03, 0.03)[0]
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: assign with the same thread count, report, exit at once
            try:
                ok = np.array_equal(assign(Q, tau, nu, 0.03, 0.03)[0], ref)
                os.write(w, b"1" if ok else b"0")
            finally:
                os._exit(0)
        os.close(w)
        import select
        ready, _, _ = select.select([r], [], [], 60)
        got = os.read(r, 1) if ready else b""
        if not ready:
            os.kill(pid, 9)
        os.waitpid(pid, 0)
        assert got == b"1"
    finally:
        numba.set_num_threads(old)


def test_samples_left_by_the_fast_kernel_equal_the_generic_kernel(monkeypatch):
    # _assign_rows without the safeguard's code leaves the samples with a candidate SI+ does
    # not settle to its generic version; every output equals the generic version run on every
    # sample
    from ntnumba.model import stage1 as _stage1
    rng = np.random.default_rng(1)
    n, M, Cd, Cs = 40, 12, 3, 2
    tau, nu = 2.0 * rng.standard_normal((Cd, M)), rng.standard_normal((Cs, M))
    Q = (tau[rng.integers(0, Cd, n)] + nu[rng.integers(0, Cs, n)]
         + 0.5 * rng.standard_normal((n, M)))
    kernel = _stage1._assign_rows
    rows = []

    def spy(start, stop, r, *args, **kw):
        if kw.get("generic"):
            rows.extend(r[start:stop])
        return kernel(start, stop, r, *args, **kw)

    for prune in (False, True):
        rows.clear()
        monkeypatch.setattr(_stage1, "_assign_rows", spy)
        split = assign(Q, tau, nu, 0.5, 0.03, prune=prune, return_details=True)
        assert 0 < len(rows) < n  # the path under test ran, for some samples only
        # every sample through the generic version
        monkeypatch.setattr(_stage1, "_assign_rows", lambda *a, **kw: kernel(*a, generic=True))
        ref = assign(Q, tau, nu, 0.5, 0.03, prune=prune, return_details=True)
        for a, b in zip(split[:4] + tuple(split[4].values()), ref[:4] + tuple(ref[4].values())):
            np.testing.assert_array_equal(a, b)


@pytest.mark.slow
def test_default_fit_compiles_each_kernel_once_and_no_safeguard():
    # first-call compilation (docs/performance.md): one signature per kernel (no literal or
    # mixed-type variants), and the safeguard's kernels only when a problem needs them
    import subprocess
    import sys
    code = (
        "import numpy as np, ntnumba, pkgutil, importlib\n"
        "from numba.core.dispatcher import Dispatcher\n"
        "from sklearn.datasets import make_blobs\n"
        "X, _ = make_blobs(200, n_features=8, centers=3, random_state=0)\n"
        "ntnumba.NTClustering(3, random_state=0, max_iter=2).fit(X)\n"
        "for m in pkgutil.walk_packages(ntnumba.__path__, 'ntnumba.'):\n"
        "    mod = importlib.import_module(m.name)\n"
        "    for k, v in vars(mod).items():\n"
        "        if isinstance(v, Dispatcher) and v.__module__ == mod.__name__:\n"
        "            print(mod.__name__ + '.' + k, len(v.signatures))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    counts = {k: int(v) for k, v in (line.split() for line in out.splitlines())}
    assert counts["ntnumba.model.stage1._assign_rows"] == 1
    assert counts["ntnumba.model.theta._tau_kernel"] == 1
    assert {k: c for k, c in counts.items() if c > 1} == {}
    for name in ("model.stage1.solve_ratio", "model.stage1._safeguard",
                 "model.stage1._inner_fixed_h"):
        assert counts["ntnumba." + name] == 0, name


# ------------------------------------------------------------------------------ one t everywhere
@njit
def _supports_at_one_level(b, g, v, ki, t2, cst5, cst7, tsup):
    """The written magnitudes at one level, and what the passes decide at that level."""
    a = np.empty(b.shape[0])
    _stage1._write_a(b, g, v, ki, cst5, a)
    m = np.empty_like(b)
    for j in range(b.shape[0]):
        m[j] = 1.0 if a[j] > 0.0 else 0.0
    _stage1._fused_pass(b, g, v, ki, t2, cst5, tsup)  # leaves t in tsup
    # the check passes count the coordinates whose membership differs from m
    ch1 = _stage1._check_pass1(b, m, g, ki, t2, v, cst7)[0]
    pair = _stage1._check_pass2(b, m, g, ki, t2, v, v, cst7)
    return a, ch1, pair[0], pair[6]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_written_magnitudes_have_the_support_the_passes_evaluated(dtype):
    # The passes evaluate the objective on {t > 0}; the winner's magnitudes are written later
    # from its level. Here every t is within 3 ulps of 0 (b nudged around lh g - lh r v):
    # _write_a once computed (b - lh (g - r v)) / k in float64, another rounding, and wrote
    # another support than the one evaluated (float32 and float64 data).
    rng = np.random.default_rng(0)
    M = 64
    for _ in range(10):
        g, v = np.abs(rng.standard_normal((2, M))).astype(dtype)
        ki = (1.0 / (1.0 + rng.random(M))).astype(dtype)
        t2 = rng.random(M).astype(dtype)
        lh, r = 0.2 + rng.random(), 2.0 * rng.random()
        cst5 = np.array([lh, lh * r, 0.0, 0.5, 1.0]).astype(dtype)
        cst7 = np.array([lh, lh * r, lh, lh * r, 0.0, 0.5, 1.0]).astype(dtype)
        b = (np.float64(cst5[0]) * g - np.float64(cst5[1]) * v).astype(dtype)
        for j, step in enumerate(rng.integers(-3, 4, M)):
            for _ in range(abs(step)):
                b[j] = np.nextafter(b[j], dtype(np.inf) if step > 0 else dtype(-np.inf))
        tsup = rng.integers(0, 2, M).astype(dtype)
        a, ch1, ch20, ch21 = _supports_at_one_level(b, g, v, ki, t2, cst5, cst7, tsup)
        assert 0 < np.count_nonzero(a) < M
        np.testing.assert_array_equal(a > 0, tsup > 0)   # the fused pass's support
        assert ch1 == ch20 == ch21 == 0                   # the check passes'
        np.testing.assert_array_equal(a, np.where(tsup > 0, tsup * ki, 0))


@njit
def _generic_step_at_one_level(b, g, v, k, t2, cst5, tsup):
    """The generic SI+ step's support and magnitudes at one level, and the fused pass's t."""
    a = np.empty(b.shape[0])
    mask = np.zeros(b.shape[0], dtype=np.bool_)
    _stage1._si_step(b, g, v, k, cst5[0], cst5[1], a, mask)
    _stage1._fused_pass(b, g, v, 1.0 / k, t2, cst5, tsup)  # leaves t in tsup
    return a, mask


def test_generic_step_has_the_support_and_t_of_the_passes():
    # The generic solver (float64: Stage 2's tau prior, the samples the fast passes leave)
    # decides its support and writes its magnitudes from the passes' t (_t_at): at a level
    # where every t is within 3 ulps of 0, the same support as the fused pass and a = t / k.
    # It computed b - lh (g - r v), another rounding, and another support on such ties.
    rng = np.random.default_rng(1)
    M = 64
    for _ in range(10):
        g, v = np.abs(rng.standard_normal((2, M)))
        k = 1.0 + rng.random(M)
        t2 = rng.random(M)
        lh, r = 0.2 + rng.random(), 2.0 * rng.random()
        cst5 = np.array([lh, lh * r, 0.0, 0.5, 1.0])
        b = cst5[0] * g - cst5[1] * v
        for j, step in enumerate(rng.integers(-3, 4, M)):
            for _ in range(abs(step)):
                b[j] = np.nextafter(b[j], np.inf if step > 0 else -np.inf)
        tsup = rng.integers(0, 2, M).astype(np.float64)
        a, mask = _generic_step_at_one_level(b, g, v, k, t2, cst5, tsup)
        assert 0 < np.count_nonzero(mask) < M
        np.testing.assert_array_equal(mask, tsup > 0)
        np.testing.assert_array_equal(a, np.where(tsup > 0, tsup / k, 0.0))


def test_t_at_never_takes_the_fastmath_flags_of_its_caller():
    """numba gives a function without its own ``fastmath`` option the flags of the caller it is
    first compiled for: ``_t_at`` had contraction (FMA) when a fastmath pass compiled it first
    (a fit) and none when ``candidate_nt`` did, so ``candidate_nt`` gave other bits after a fit
    (found with a random seed: ``y_0`` 9.0e-72 against 2.6e-73 on the same input). A fresh copy
    with ``_t_at``'s options, first compiled for a fastmath caller, has no fastmath flag."""
    kernel = vars(_stage1)["_t_at"]   # only its options and Python source: not called here
    options = {k: v for k, v in kernel.targetoptions.items()
               if k not in ("cache", "nopython")}   # njit's own; no cache file of the copy
    t_at = njit(**options)(kernel.py_func)

    @njit(fastmath=True)
    def caller(b, g, v, lh, lr):
        return t_at(b, g, v, lh, lr)

    assert caller(1.0, 2.0, 3.0, 0.5, 0.25) == 1.0 - 0.5 * 2.0 + 0.25 * 3.0
    ir = "\n".join(t_at.inspect_llvm().values())
    ops = [ln for ln in ir.splitlines() if any(f" {op} " in ln for op in ("fmul", "fsub", "fadd"))]
    assert ops and not [ln for ln in ops if any(f in ln for f in ("fast", "contract", "reassoc"))]
