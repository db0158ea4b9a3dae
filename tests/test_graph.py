"""The graph assignment (ntnumba/_graph.py) and its use in NTClustering."""
import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics import adjusted_rand_score

import naive
from ntnumba import NTClustering, _driver
from ntnumba import _graph as G


def _planted(seed, C=4, n_per=40, N=30, shared=2, amp=8.0, noise=0.4):
    """C tight clusters plus a strong component along ``shared`` directions common to all."""
    rng = np.random.default_rng(seed)
    centers = 1.5 * rng.standard_normal((C, N))
    y = np.repeat(np.arange(C), n_per)
    S = np.linalg.qr(rng.standard_normal((N, shared)))[0].T
    X = (centers[y] + noise * rng.standard_normal((y.size, N))
         + amp * rng.standard_normal((y.size, shared)) @ S)
    return X, y


def test_nt_similarity_matches_naive_rho():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((7, 9)) * (rng.random((7, 9)) < 0.6)
    Z = rng.standard_normal((4, 9))
    Y[3] = 0.0
    for A, B, S in ((Y, Y, G.nt_similarity(Y)), (Y, Z, G.nt_similarity(Y, Z))):
        for i in range(A.shape[0]):
            for j in range(B.shape[0]):
                den = np.sqrt(naive.rho(A[i], A[i]) * naive.rho(B[j], B[j]))
                want = naive.rho(A[i], B[j]) / den if den > 0 else 0.0
                assert S[i, j] == pytest.approx(want, abs=1e-12)
    assert np.all(G.nt_similarity(Y)[3] == 0.0)


def test_soft_threshold_and_remove_shared():
    Q = np.array([[0.5, -0.01, -2.0]])
    np.testing.assert_allclose(G.soft_threshold(Q, 0.03), [[0.47, 0.0, -1.97]])
    rng = np.random.default_rng(1)
    Q = rng.standard_normal((50, 6)) @ np.diag([9.0, 5.0, 1.0, 1.0, 0.5, 0.2])
    mean, V = G.shared_directions(Q, 2)
    _, _, Vt = np.linalg.svd(Q - Q.mean(0), full_matrices=False)
    np.testing.assert_allclose(V.T @ V, Vt[:2].T @ Vt[:2], atol=1e-10)
    R = G.remove_shared(Q, mean, V)
    np.testing.assert_allclose(R @ V.T, 0.0, atol=1e-10)
    np.testing.assert_allclose(R.mean(0), 0.0, atol=1e-12)
    # the randomised path (> 600 columns) finds the same subspace for a clear spectrum
    big = rng.standard_normal((80, 700)) * 0.01
    big[:, :3] += rng.standard_normal((80, 3)) * [30.0, 20.0, 10.0]
    _, V = G.shared_directions(big, 3, random_state=0)
    _, _, Vt = np.linalg.svd(big - big.mean(0), full_matrices=False)
    np.testing.assert_allclose(V.T @ V, Vt[:3].T @ Vt[:3], atol=1e-6)
    assert G.shared_directions(Q, 0)[1].shape == (0, 6)


def test_knn_affinity_is_the_symmetrised_knn_graph():
    rng = np.random.default_rng(2)
    S = rng.random((12, 12))
    S = (S + S.T) / 2
    k = 3
    W = G.knn_affinity(S, k).toarray()
    np.testing.assert_array_equal(W, W.T)
    assert np.all(np.diag(W) == 0)
    K = np.zeros_like(S)
    for i in range(12):
        order = [j for j in np.argsort(-S[i]) if j != i][:k]
        K[i, order] = S[i, order]
    np.testing.assert_allclose(W, (K + K.T) / 2)


@pytest.mark.parametrize("n_per", [20, 90])   # dense eigh path and the sparse eigsh path
def test_spectral_embedding_finds_disconnected_components(n_per):
    rng = np.random.default_rng(3)
    C = 3
    blocks = []
    for _ in range(C):
        B = rng.random((n_per, n_per)) * (rng.random((n_per, n_per)) < 0.3)
        B = B + B.T + np.eye(n_per, k=1) + np.eye(n_per, k=-1)   # connected block
        np.fill_diagonal(B, 0)
        blocks.append(sparse.csr_matrix(B))
    W = sparse.block_diag(blocks).tocsr()
    perm = rng.permutation(W.shape[0])
    W = W[perm][:, perm]
    truth = np.repeat(np.arange(C), n_per)[perm]
    vals, maps, cut = G.spectral_embedding(W, C, random_state=0)
    assert cut == pytest.approx(0.0, abs=1e-8)
    assert vals.size == C + 1 and vals[C] < 1 - 1e-3
    assert adjusted_rand_score(truth, G.cluster_qr(maps)) == 1.0


def test_graph_partition_removes_the_shared_component():
    for seed in range(3):
        X, y = _planted(seed)
        lab0, _ = G.graph_partition(X, 4, n_shared=0, random_state=0)
        lab, info = G.graph_partition(X, 4, random_state=0, return_all=True)
        assert info["n_shared"] >= 2     # the two shared directions are removed
        assert adjusted_rand_score(y, lab) == 1.0
        # candidates are capped at a quarter of the rank (N = 30): 7 directions
        assert set(info["labels"]) == {min(r, 7) for r in G.DEFAULT_SHARED}
        assert info["ncut"][info["n_shared"]] <= min(info["ncut"].values()) + G._TIE
    # without the removal the shared component mixes the clusters in at least one draw
    worst = min(adjusted_rand_score(*(_planted(s)[1], G.graph_partition(
        _planted(s)[0], 4, n_shared=0, random_state=0)[0])) for s in range(3))
    assert worst < 0.9


@pytest.mark.parametrize("N", [5, 6, 10])
def test_low_dimensional_blobs(N):
    """Few features: the cap on r keeps the cut from removing (almost) every direction."""
    from sklearn.datasets import make_blobs
    for seed in range(3):
        X, y = make_blobs(150, n_features=N, centers=3, random_state=seed)
        lab, info = G.graph_partition(X, 3, random_state=0)
        assert info["n_shared"] <= N // 4
        assert adjusted_rand_score(y, lab) > 0.95
        m = NTClustering(3, n_components=48, assign="graph", init="graph",
                         random_state=0).fit(X)
        assert adjusted_rand_score(y, m.labels_) > 0.95


def test_graph_partition_small_inputs():
    X = np.random.default_rng(4).standard_normal((3, 5))
    lab, info = G.graph_partition(X, 3)
    assert sorted(lab.tolist()) == [0, 1, 2] and info["n_shared"] == 0
    lab, _ = G.graph_partition(np.random.default_rng(5).standard_normal((10, 4)), 1)
    assert np.all(lab == 0)


def test_knn_vote():
    X, y = _planted(0)
    codes = G.soft_threshold(X, 0.03)
    rng = np.random.default_rng(6)
    new = codes + 0.01 * rng.standard_normal(codes.shape)
    lab, score = G.knn_vote(new, codes, y, 4, 5)
    np.testing.assert_array_equal(lab, y)
    assert np.all((score >= 0) & (score <= 1))
    # leave-one-out on the reference itself: the duplicate (similarity 1) is not counted
    _, s_self = G.knn_vote(codes, codes, y, 4, 1)
    _, s_loo = G.knn_vote(codes, codes, y, 4, 1, exclude_self=True)
    np.testing.assert_allclose(s_self, 0.0, atol=1e-12)
    assert np.all(s_loo > 0)


def test_restricted_stage1_against_naive_candidates():
    rng = np.random.default_rng(7)
    Q = rng.standard_normal((6, 5)) * 2
    tau = rng.standard_normal((3, 5))
    nu = rng.standard_normal((2, 5))
    labels = np.array([0, 2, 1, 1, 0, 2])
    lam0 = lam1 = 0.03
    sim, Y, cost = G.restricted_stage1(Q, tau, nu, labels, lam0, lam1, 1.0)
    for i in range(6):
        c = labels[i]
        best = None
        for c2 in range(2):
            y, F = naive.candidate_enum(Q[i], tau[c], nu[c2], lam0, lam1)
            full = F + 0.5 * np.sum((Q[i] - tau[c] - nu[c2]) ** 2)
            if best is None or full < best[0]:
                best = (full, c2, y)
        assert sim[i] == best[1]
        np.testing.assert_allclose(Y[i], best[2], atol=1e-7)
        assert cost[i] == pytest.approx(best[0], rel=1e-7)


def test_estimator_graph_partition_is_fixed_over_iterations():
    X, y = _planted(1)
    seen = []
    m = NTClustering(4, n_components=40, max_iter=3, tol=0.0, random_state=0).fit(
        X, callback=lambda s: seen.append(s.labels.copy()))
    assert m.n_iter_ == 3 and len(seen) == 3
    for lab in seen[1:]:
        np.testing.assert_array_equal(lab, seen[0])
    np.testing.assert_array_equal(m.labels_, seen[0])
    assert adjusted_rand_score(y, m.labels_) == 1.0
    # the partition is the graph of the initial representations (independent recomputation)
    p = m._params(X.shape[1])
    Xs = m._scaled(X, m.scale_)
    rng = np.random.RandomState(np.random.RandomState(0).randint(np.iinfo(np.int32).max, size=1)[0])
    s0 = _driver.initialise(Xs, p, rng)
    np.testing.assert_array_equal(s0.labels, m.labels_)
    assert m.n_shared_ == s0.graph["n_shared"] and m.graph_cut_ == s0.graph["graph_cut"]
    # predict on the training data: the k-NN vote agrees with the partition
    assert np.mean(m.predict(X) == m.labels_) > 0.97
    assert m.transform(X).shape == (X.shape[0], 40)


def test_self_training_by_dropping_the_partition():
    """A callback that clears ``state.graph`` makes the next iteration re-partition."""
    X, _ = _planted(2)
    calls = []

    def cb(state):
        calls.append(state.graph)
        state.graph = None

    NTClustering(4, n_components=40, max_iter=3, tol=0.0, random_state=0).fit(X, callback=cb)
    assert len(calls) == 3 and all(g is not None and "graph_cut" in g for g in calls)


@pytest.mark.parametrize("bad, err", [(-1, ValueError), ("all", ValueError), ([], ValueError),
                                      ([1, -2], ValueError), (1.5, TypeError)])
def test_n_shared_validation(bad, err):
    X, _ = _planted(0, n_per=5)
    with pytest.raises(err, match="n_shared"):
        NTClustering(4, n_components=40, n_shared=bad).fit(X)


def test_n_shared_fixed_and_candidates():
    X, y = _planted(3)
    m = NTClustering(4, n_components=40, n_shared=2, random_state=0).fit(X)
    assert m.n_shared_ == 2 and m.shared_components_.shape == (2, 40)
    m = NTClustering(4, n_components=40, n_shared=[0, 3], random_state=0).fit(X)
    assert m.n_shared_ in (0, 3)
