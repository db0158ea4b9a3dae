"""The graph assignment (ntnumba/partition/graph.py) and its use in NTClustering."""
import numpy as np
import pytest
from scipy import sparse
from sklearn.metrics import adjusted_rand_score
from sklearn.model_selection import cross_validate

import naive
import naive_graph
from ntnumba import MemoryUsageWarning, NTClustering
from ntnumba.engine import loop as _driver
from ntnumba.core import parallel as _parallel
from ntnumba.partition import graph as G


def _planted(seed, C=4, n_per=40, N=30, shared=2, amp=8.0, noise=0.4):
    """C tight clusters plus a strong component along ``shared`` directions common to all."""
    rng = np.random.default_rng(seed)
    centers = 1.5 * rng.standard_normal((C, N))
    y = np.repeat(np.arange(C), n_per)
    S = np.linalg.qr(rng.standard_normal((N, shared)))[0].T
    X = (centers[y] + noise * rng.standard_normal((y.size, N))
         + amp * rng.standard_normal((y.size, shared)) @ S)
    return X, y


def test_graph_similarity_is_the_limit_of_the_nt_similarity():
    """The normalised rho of y = A x, z = A x' (random unit rows of A, no threshold) tends to
    the arc-cosine kernel of the angle between x and x' (Monte Carlo, 200000 rows)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((200000, 4))
    A /= np.linalg.norm(A, axis=1, keepdims=True)
    x = rng.standard_normal(4)
    for t in (0.3, 1.2, 2.5):
        u = rng.standard_normal(4)
        u -= (u @ x) / (x @ x) * x
        z = np.cos(t) * x / np.linalg.norm(x) + np.sin(t) * u / np.linalg.norm(u)
        y, w = A @ x, A @ z
        mc = naive.rho(y, w) / np.sqrt(naive.rho(y, y) * naive.rho(w, w))
        assert G.arccos_kernel(np.cos(t)) == pytest.approx(mc, abs=0.01)
        assert naive_graph.similarity(x, 3.0 * z) == pytest.approx(mc ** 2, abs=0.01)


def test_remove_shared_and_graph_rows():
    rng = np.random.default_rng(1)
    Q = rng.standard_normal((50, 6)) @ np.diag([9.0, 5.0, 1.0, 1.0, 0.5, 0.2])
    mean, V = G.shared_directions(Q, 2)
    _, _, Vt = np.linalg.svd(Q - Q.mean(0), full_matrices=False)
    np.testing.assert_allclose(V.T @ V, Vt[:2].T @ Vt[:2], atol=1e-10)
    R = G.remove_shared(Q, mean, V)
    np.testing.assert_allclose(R @ V.T, 0.0, atol=1e-10)
    np.testing.assert_allclose(R.mean(0), 0.0, atol=1e-12)
    w = rng.random(6) + 0.5
    got = G.graph_rows(Q, mean, V, 2.5, w)
    want = Q * w - mean
    want -= (want @ V.T) @ V
    np.testing.assert_allclose(got, np.c_[want, np.full(50, 2.5)], atol=1e-12)
    # the Lanczos path (> 600 columns) finds the same subspace for a clear spectrum
    big = rng.standard_normal((80, 700)) * 0.01
    big[:, :3] += rng.standard_normal((80, 3)) * [30.0, 20.0, 10.0]
    _, V = G.shared_directions(big, 3)
    _, _, Vt = np.linalg.svd(big - big.mean(0), full_matrices=False)
    np.testing.assert_allclose(V.T @ V, Vt[:3].T @ Vt[:3], atol=1e-6)
    assert G.shared_directions(Q, 0)[1].shape == (0, 6)


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
        assert info["ncut"][info["n_shared"]] <= min(info["ncut"].values()) + G.TIE
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
    codes = X - X.mean(axis=0)
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


def test_restricted_stage1_same_bits_on_any_thread_count():
    """Clusters of very different sizes shared out to the threads: every row's result is
    that of the cluster's own serial Stage 1, on one thread as on two."""
    import numba
    rng = np.random.default_rng(8)
    labels = np.repeat([3, 0, 2, 1, 4], [40, 3, 17, 1, 9])[rng.permutation(70)]
    tau = rng.standard_normal((5, 12))
    nu = rng.standard_normal((2, 12))
    Q = tau[labels] + nu[rng.integers(0, 2, 70)] + 0.3 * rng.standard_normal((70, 12))
    got = []
    old = numba.get_num_threads()
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        numba.set_num_threads(threads)
        try:
            got.append(G.restricted_stage1(Q, tau, nu, labels, 0.03, 0.03, 1.0))
            assert numba.get_num_threads() == threads   # restored in this thread
        finally:
            numba.set_num_threads(old)
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)
    for c in range(5):   # each cluster alone: the same rows
        rows = np.flatnonzero(labels == c)
        alone = G.restricted_stage1(Q[rows], tau, nu, labels[rows], 0.03, 0.03, 1.0)
        for a, b in zip(alone, got[0]):
            np.testing.assert_array_equal(a, b[rows])


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
    assert m.n_shared_ == 2 and m.shared_components_.shape == (2, X.shape[1])
    m = NTClustering(4, n_components=40, n_shared=[0, 3], random_state=0).fit(X)
    assert m.n_shared_ in (0, 3)


# ---------------------------------------------------------------------------------------------
# the sparse graph: k-NN search, neighbour lists, eigensolver, BLAS policy, progress, memory

def _codes(seed, n=60, m=12, C=3):
    rng = np.random.default_rng(seed)
    Y = np.repeat(rng.standard_normal((C, m)), n // C, axis=0) + 0.5 * rng.standard_normal((n, m))
    Y[rng.random(Y.shape) < 0.3] = 0.0   # sparse codes, as after the soft threshold
    return Y


@pytest.mark.parametrize("exclude_self", [False, True])
def test_knn_search_exact_matches_naive(exclude_self):
    Y = _codes(10)
    Y[5] = 0.0                    # an all-zero row: similarity 0 to everything
    Y[7] = Y[3]                   # a tie
    for k in (1, 4):
        idx, sim = G.knn_search(Y, k, exclude_self=exclude_self, method="exact")
        want_idx, want_sim = naive_graph.knn(Y, k, exclude_self=exclude_self)
        np.testing.assert_allclose(sim, want_sim, atol=1e-12)
        # same neighbours up to the order of equal similarities
        same = (idx == want_idx) | np.isclose(sim, want_sim, atol=0)
        assert same.all()
    # a separate reference set
    R = _codes(11, n=30)
    idx, sim = G.knn_search(Y, 3, Y_ref=R, method="exact")
    want_idx, want_sim = naive_graph.knn(Y, 3, Y_ref=R)
    np.testing.assert_allclose(sim, want_sim, atol=1e-12)
    np.testing.assert_array_equal(idx, want_idx)


def test_knn_search_blocks_and_threads_give_the_same_lists(monkeypatch):
    Y = _codes(12, n=300, m=20)
    want = G.knn_search(Y, 5, exclude_self=True, method="exact")
    monkeypatch.setattr(G, "_BLOCK_ELEMENTS", 300 * 17)   # blocks of 17 rows
    got = G.knn_search(Y, 5, exclude_self=True, method="exact")
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], atol=0)


@pytest.mark.parametrize("amp, offset", [(8.0, None), (1e4, None), (8.0, 2.5)])
def test_knn_candidates_match_the_search_of_every_candidate(amp, offset, monkeypatch):
    """One pass over the blocks for every candidate r (rank-r corrections of one product)
    gives the lists of the slow reference on every candidate's own rows, also where the
    removed directions carry almost all the energy (amp 1e4), with the constant coordinate,
    over several blocks, and with a zero row."""
    X, _ = _planted(22, n_per=30, N=20, shared=3, amp=amp)
    X[7] = X.mean(axis=0)          # a zero row once centred: cosine 0 against every row
    mean, V = G.shared_directions(X, 9)
    cands = [0, 1, 3, 6, 9]
    monkeypatch.setattr(G, "_BLOCK_ELEMENTS", 2 * 120 * 16)   # blocks of 16 rows
    lists = G.knn_candidates(X, mean, V, cands, 4, offset)
    assert sorted(lists) == cands
    for r in cands:
        Y = G.graph_rows(X, mean, V[:r], offset)
        want_idx, want_sim = naive_graph.knn(Y, 4, exclude_self=True)
        idx, sim = G.exact_order(Y, Y, lists[r])
        np.testing.assert_allclose(sim, want_sim, atol=1e-12)
        same = (idx == want_idx) | np.isclose(sim, want_sim, atol=0)
        assert same.all(), r


@pytest.mark.slow
def test_knn_search_approximate_recall():
    rng = np.random.default_rng(13)
    centers = rng.standard_normal((20, 40))
    Y = centers[rng.integers(0, 20, 3000)] + 0.4 * rng.standard_normal((3000, 40))
    exact, _ = G.knn_search(Y, 10, exclude_self=True, method="exact")
    approx, sim = G.knn_search(Y, 10, exclude_self=True, method="approximate", random_state=0)
    assert np.all(approx != np.arange(3000)[:, None])
    recall = np.mean([np.intersect1d(a, e).size / 10 for a, e in zip(approx, exact)])
    assert recall >= 0.95
    np.testing.assert_allclose(sim, G.pair_similarity(Y, Y, approx), atol=0)


def test_pair_similarity_and_knn_graph_match_naive():
    Y = _codes(14, n=30)
    W = G.knn_graph(*G.knn_search(Y, 4, exclude_self=True, method="exact"))
    np.testing.assert_allclose(W.toarray(), naive_graph.knn_graph(Y, 4), atol=1e-12)
    nn = np.array([[1, 2], [0, -1]])
    got = G.pair_similarity(Y[:2], Y, nn)
    assert got[0, 0] == pytest.approx(naive_graph.similarity(Y[0], Y[1]), abs=1e-14)
    assert got[0, 1] == pytest.approx(naive_graph.similarity(Y[0], Y[2]), abs=1e-14)
    assert got[1, 1] == 0.0


def test_reverse_ranks_match_naive():
    rng = np.random.default_rng(3)
    idx = np.stack([rng.permutation(12)[:5] for _ in range(12)])
    idx[idx == np.arange(12)[:, None]] = -1          # no self entries; -1 are gaps
    idx[2, 4] = -1
    np.testing.assert_array_equal(G.reverse_ranks(idx), naive_graph.reverse_ranks(idx))


@pytest.mark.parametrize("k, L", [(4, 16), (3, 3), (5, 29)])
def test_mutual_rank_graph_matches_naive(k, L):
    Y = _codes(15, n=30)
    W = G.mutual_rank_graph(*G.knn_search(Y, L, exclude_self=True, method="exact"), k)
    np.testing.assert_allclose(W.toarray(), naive_graph.mutual_rank_graph(Y, k, L), atol=1e-12)


def test_graph_partition_uses_the_mutual_rank_graph():
    """The default partition is the spectral partition of the naive mutual-rank graph over
    ``RANK_LISTS k`` neighbours; ``weighting="similarity"`` that of the plain k-NN graph."""
    X, y = _planted(1, C=3, n_per=30, shared=0, noise=2.5)   # overlapping: the graphs differ
    Y = G.graph_rows(X, X.mean(axis=0), np.zeros((0, X.shape[1])))
    cuts = []
    for weighting, W in (("mutual-rank", naive_graph.mutual_rank_graph(Y, 5, 5 * G.RANK_LISTS)),
                         ("similarity", naive_graph.knn_graph(Y, 5))):
        lab, info = G.graph_partition(X, 3, n_shared=0, random_state=0, weighting=weighting)
        _, maps, cut = G.spectral_embedding(sparse.csr_matrix(W), 3, random_state=0)
        assert info["ncut"][0] == pytest.approx(cut, abs=1e-9)
        assert adjusted_rand_score(G.cluster_qr(maps), lab) == 1.0
        cuts.append(cut)
    assert cuts[0] < cuts[1] - 0.05
    with pytest.raises(ValueError, match="weighting"):
        G.graph_partition(X, 3, weighting="rank")


def _random_graph(n, degree, seed=0):
    """A random graph: no cluster structure, so its Laplacian's sparse LU is nearly dense."""
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, degree * n), rng.integers(0, n, degree * n)
    W = sparse.csr_matrix((np.ones(degree * n), (i, j)), shape=(n, n))
    W = (W + W.T).tocsr()
    W.setdiag(0)
    W.eliminate_zeros()
    return W


def test_dense_factor_goes_to_lanczos(monkeypatch):
    """Below SHIFT_INVERT_MAX too, a Laplacian whose LU holds more than DENSE_FACTOR of a dense
    matrix (and DENSE_MIN entries) goes to Lanczos, with the same eigenvalues as shift-invert;
    the graphs sharing a ``memo`` after it are not factorised at all; a clustered k-NN graph,
    a small LU and a call without ``memo`` stay on shift-invert."""
    W = _random_graph(400, 4)
    memo = {}
    G.spectral_embedding(W, 4, random_state=0, memo=memo)
    assert memo == {}   # a small LU, cheap however dense: shift-invert
    monkeypatch.setattr(G, "DENSE_MIN", 0)
    calls = []
    lu = G.shifted_lu
    monkeypatch.setattr(G, "shifted_lu", lambda L: calls.append(L.shape) or lu(L))
    memo = {}
    got = G.spectral_embedding(W, 4, random_state=0, memo=memo)
    assert memo == {"dense": True} and len(calls) == 1
    again = G.spectral_embedding(W, 4, random_state=0, memo=memo)
    assert len(calls) == 1
    np.testing.assert_array_equal(again[0], got[0])
    monkeypatch.setattr(G, "DENSE_FACTOR", 2.0)   # no LU is that dense: shift-invert
    want = G.spectral_embedding(W, 4, random_state=0)
    np.testing.assert_allclose(got[0], want[0], atol=1e-8)
    assert got[2] == pytest.approx(want[2], abs=1e-8)
    dense = np.diag(1.0 / np.sqrt(np.asarray(W.sum(axis=1)).ravel()))
    top = np.linalg.eigvalsh(dense @ W.toarray() @ dense)[::-1][:5]
    np.testing.assert_allclose(got[0], top, atol=1e-8)
    monkeypatch.setattr(G, "DENSE_FACTOR", 1.0 / 3.0)   # no memo: no check, shift-invert
    alone = G.spectral_embedding(W, 4, random_state=0)
    np.testing.assert_array_equal(alone[0], want[0])
    # a clustered k-NN graph factorises sparsely: shift-invert, memo untouched
    X, y = _planted(4, n_per=60)
    Y = G.graph_rows(X, *G.shared_directions(X, 2))
    memo = {}
    G.spectral_embedding(G.knn_graph(*G.knn_search(Y, 5, exclude_self=True)), 4,
                         random_state=0, memo=memo)
    assert memo == {} and calls[-1] == (240, 240)


def test_lanczos_path_of_the_eigensolver(monkeypatch):
    """Above SHIFT_INVERT_MAX samples: Lanczos on I + D^-1/2 W D^-1/2, same eigenpairs."""
    X, y = _planted(4, n_per=60)
    Y = G.graph_rows(X, *G.shared_directions(X, 2))
    W = G.knn_graph(*G.knn_search(Y, 5, exclude_self=True))
    want = G.spectral_embedding(W, 4, random_state=0)
    monkeypatch.setattr(G, "SHIFT_INVERT_MAX", 10)
    got = G.spectral_embedding(W, 4, random_state=0)
    np.testing.assert_allclose(got[0], want[0], atol=1e-8)
    assert got[2] == pytest.approx(want[2], abs=1e-8)
    assert adjusted_rand_score(G.cluster_qr(got[1]), G.cluster_qr(want[1])) == 1.0
    # a connected graph (weak ring through all samples): no multiplicity, plain Lanczos
    n = W.shape[0]
    ring = sparse.csr_matrix((np.full(n, 1e-3), (np.arange(n), (np.arange(n) + 1) % n)),
                             shape=(n, n))
    W = (W + ring + ring.T).tocsr()
    monkeypatch.setattr(G, "SHIFT_INVERT_MAX", 10 ** 9)
    want = G.spectral_embedding(W, 4, random_state=0)
    monkeypatch.setattr(G, "SHIFT_INVERT_MAX", 10)
    got = G.spectral_embedding(W, 4, random_state=0)
    np.testing.assert_allclose(got[0], want[0], atol=1e-8)
    assert adjusted_rand_score(G.cluster_qr(got[1]), G.cluster_qr(want[1])) == 1.0


def test_graph_runs_under_the_fit_blas_policy(monkeypatch):
    from threadpoolctl import threadpool_info
    seen = []

    def spy(name):
        real = getattr(G, name)

        def wrapped(*a, **kw):
            seen.append((name, [d["num_threads"] for d in threadpool_info()
                                if d["user_api"] == "blas"]))
            return real(*a, **kw)
        monkeypatch.setattr(G, name, wrapped)

    spy("_knn_exact")            # the first candidate's search
    spy("_topk_candidates")      # the other candidates' (its products run on the threads)
    monkeypatch.setattr(_parallel, "BLAS_THREADS", 1)
    X, _ = _planted(5)
    G.graph_partition(X, 4, n_shared=[0, 2], random_state=0)
    assert {name for name, _ in seen} == {"_knn_exact", "_topk_candidates"}
    assert all(t == 1 for _, threads in seen for t in threads)


def test_graph_progress_and_memory_check(capsys, monkeypatch):
    X, _ = _planted(6)
    G.graph_partition(X, 4, n_shared=[0, 2], random_state=0, verbose=1)
    err = capsys.readouterr().err
    assert "graph:" in err and "r = 2: eigensolver" in err
    G.graph_partition(X, 4, n_shared=[0, 2], random_state=0)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(G, "available_memory", lambda: 1000)
    with pytest.raises(MemoryError, match="k-NN graph needs about"):
        G.graph_partition(X, 4, random_state=0)


@pytest.mark.parametrize("call", ["graph_partition", "fit", "fit_predict", "cross_validate"])
def test_memory_warning_points_at_the_users_call(call, monkeypatch, memory_trace):
    """The MemoryUsageWarning of the memory check (an estimate above half of the available
    memory) names the line that called ntnumba, not a frame inside the package or inside
    scikit-learn (whose ClusterMixin.fit_predict calls fit) or joblib (through which
    cross_validate calls fit)."""
    X, _ = _planted(6)

    def run():
        if call == "graph_partition":
            G.graph_partition(X, 4, n_shared=[0, 2], random_state=0)
        elif call == "cross_validate":
            cross_validate(NTClustering(4, n_components=40, max_iter=1, random_state=0), X,
                           cv=2)
        else:
            model = NTClustering(4, n_components=40, max_iter=1, random_state=0)
            getattr(model, call)(X)

    estimates = memory_trace(run)[1]
    monkeypatch.setattr(G, "available_memory", lambda: int(1.5 * max(estimates)))
    with pytest.warns(MemoryUsageWarning, match="k-NN graph needs about") as record:
        run()
    assert {w.filename for w in record if w.category is MemoryUsageWarning} == {__file__}


@pytest.mark.slow
def test_memory_warning_is_shown_by_the_default_filters(tmp_path):
    """A script run with Python's default warning filters (which ignore ResourceWarning) prints
    the memory check's warning on stderr, at the script's line."""
    import os
    import subprocess
    import sys

    script = tmp_path / "fit_near_the_limit.py"
    script.write_text("from ntnumba.partition import graph as _graph\n"
                      "_graph.available_memory = lambda: 3 * 2**30\n"
                      "_graph.check_memory(2 * 2**30, 'the k-NN graph')\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (f"{script}:3: MemoryUsageWarning: the k-NN graph needs about 2.0 GiB of the "
            "3.0 GiB available") in res.stderr


def test_neighbour_lists_check_memory_before_every_search():
    """The memory check runs inside neighbour_lists before each search: the first lists
    (max(8 k, 32) = 40 neighbours for k = 5) and, with 8 near-copies of every sample, the
    lengthened ones (4 k 8 = 160); with the factor given, once at 4 k g."""
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((50, 12))
    calls = []
    nn, _, g = G.neighbour_lists(np.repeat(Y, 8, axis=0) + 1e-4 * rng.standard_normal((400, 12)),
                                 5, check=calls.append)
    assert (g, calls, nn.shape[1]) == (8, [40, 160], 160)
    calls = []
    G.neighbour_lists(Y, 2, copies=3, check=calls.append)
    assert calls == [24]


@pytest.mark.parametrize("weighting", G.WEIGHTINGS)
def test_graph_memory_estimate_bounds_the_traced_peak(weighting, memory_trace):
    """8 near-copies of every sample: the mutual ranks look at 4 x 5 x 8 = 160 neighbours per
    row (the estimate once sized the lists at 40 and was 7 times below the peak here)."""
    rng = np.random.default_rng(0)
    base = 3 * rng.standard_normal((4, 12))[np.arange(100) % 4] + rng.standard_normal((100, 12))
    X = np.repeat(base, 8, axis=0) + 1e-4 * rng.standard_normal((800, 12))
    G.graph_partition(X[:50], 2, n_shared=0, random_state=0, weighting=weighting)  # compile
    peak, estimate, (labels, info) = memory_trace(
        lambda: G.graph_partition(X, 4, n_shared=0, random_state=0, weighting=weighting))
    assert info["copies"] == 8
    assert peak <= max(estimate) <= 3 * peak + G.get_num_threads() * 4 * 800 ** 2


# ---------------------------------------------------------------------------------------------
# duplicates: equal samples are one node; near-copies widen the neighbour lists

def test_distinct_rows_groups_equal_rows():
    rng = np.random.default_rng(20)
    base = rng.standard_normal((6, 4))
    pick = rng.integers(0, 6, 40)
    Q = base[pick]
    Q[3] = -0.0 * Q[3]                       # -0.0 and 0.0 are the same row
    Q[4] = 0.0
    first, inverse = G.distinct_rows(Q)
    np.testing.assert_array_equal(Q[first][inverse], Q)
    # naive: two rows are in one group exactly when they are equal
    for i in range(40):
        for j in range(40):
            assert (inverse[i] == inverse[j]) == bool(np.all(Q[i] == Q[j]))
    assert np.all(np.diff(first) > 0) and first[0] == 0


@pytest.mark.parametrize("rep", [2, 4, 8])
def test_graph_partition_of_repeated_samples_equals_the_unique_one(rep):
    from sklearn.datasets import make_blobs
    X, y = make_blobs(200, n_features=20, centers=4, cluster_std=2.5, random_state=0)
    lab_u, info_u = G.graph_partition(X, 4, random_state=0)
    perm = np.random.default_rng(rep).permutation(200 * rep)
    lab_r, info_r = G.graph_partition(np.repeat(X, rep, axis=0)[perm], 4, random_state=0)
    assert info_r["n_distinct"] == 200
    assert adjusted_rand_score(np.repeat(lab_u, rep)[perm], lab_r) == 1.0


def test_graph_partition_of_near_copies():
    """Every sample 5 times with noise 1% of the data's spread: each sample's nearest
    neighbours are its own copies; the graph widens to k distinct neighbours (without that
    it falls into groups of copies: ARI 0.02 and 0.11 on these two draws)."""
    from sklearn.datasets import make_blobs
    for seed in range(2):
        X, y = make_blobs(200, n_features=20, centers=4, cluster_std=2.5, random_state=seed)
        ari_u = adjusted_rand_score(y, G.graph_partition(X, 4, random_state=0)[0])
        rng = np.random.default_rng(seed)
        Xt = np.tile(X, (5, 1)) + 0.01 * X.std() * rng.standard_normal((1000, 20))
        lab, info = G.graph_partition(Xt, 4, random_state=0)
        assert info["copies"] == 5
        assert adjusted_rand_score(np.tile(y, 5), lab) >= ari_u - 0.02
    # no near-copies: the plain k-NN graph
    assert G.graph_partition(X, 4, random_state=0)[1]["copies"] == 1


def test_copy_factor():
    d = np.array([[0.01, 0.011, 0.012, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97]] * 5)
    assert G.copy_factor(1.0 - d, 2) == 4            # three near-copies, then a jump
    smooth = 1.0 - np.linspace(0.1, 0.5, 10)[None, :].repeat(5, axis=0)
    assert G.copy_factor(smooth, 2) == 1


@pytest.mark.parametrize("shape", [(80, 30), (30, 80)])   # the N x N and the n x n side
def test_shared_directions_match_svd(shape):
    rng = np.random.default_rng(21)
    Q = rng.standard_normal(shape) * np.linspace(3.0, 0.1, shape[1])
    _, sv, Vt = np.linalg.svd(Q - Q.mean(axis=0), full_matrices=False)
    mean, V, got_sv = G.shared_directions(Q, 4, return_sv=True)
    np.testing.assert_allclose(V.T @ V, Vt[:4].T @ Vt[:4], atol=1e-8)
    np.testing.assert_allclose(got_sv, sv[:4], rtol=1e-8)
    np.testing.assert_allclose(mean, Q.mean(axis=0))


def test_in_memory_fit_over_blocks_equals_one_block(monkeypatch):
    """Above MEMORY_BUDGET fit(X) runs over blocks of rows: the same fit as one block."""
    from ntnumba.engine import sources as _stream
    X, _ = _planted(7, n_per=30)
    kw = dict(n_components=40, max_iter=2, tol=0.0, random_state=0)
    want = NTClustering(4, **kw).fit(X)
    used = []

    class Spy(_stream.LocalBackend):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            used.append(len(self.bounds))

    monkeypatch.setattr(_stream, "LocalBackend", Spy)
    monkeypatch.setattr(_stream, "MEMORY_BUDGET", 1)
    monkeypatch.setattr(_stream, "BLOCK_BYTES", 40 * 8 * 25)   # blocks of 25 rows
    got = NTClustering(4, **kw).fit(X)
    assert used == [5]
    np.testing.assert_array_equal(got.labels_, want.labels_)
    np.testing.assert_allclose(got.objective_history_, want.objective_history_, rtol=1e-7)
    np.testing.assert_allclose(got.components_, want.components_,
                               atol=1e-6 * np.abs(want.components_).max())


def test_reference_sample_fit_does_not_depend_on_row_order(monkeypatch):
    """Above REFERENCE_SIZE rows the in-memory fit partitions a random sample and votes the
    rest: class-sorted and shuffled rows give the same clusters."""
    from sklearn.datasets import make_blobs
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 150)
    X, y = make_blobs(600, n_features=20, centers=4, cluster_std=2.0, random_state=0)
    kw = dict(n_components=40, random_state=0)
    labels = []
    for order in (np.argsort(y, kind="stable"), np.random.default_rng(0).permutation(600)):
        m = NTClustering(4, **kw).fit(X[order])
        assert m._fitted.ref_X.shape[0] == 150
        np.testing.assert_array_equal(m.predict(X[order]), m.labels_)
        lab = np.empty(600, dtype=np.int64)
        lab[order] = m.labels_
        labels.append(lab)
    assert adjusted_rand_score(*labels) >= 0.99
    assert adjusted_rand_score(y, labels[0]) >= 0.99


def test_bench_large_data_sets_are_structured():
    from benchmarks.bench_large import make_data
    for kind in ("blobs", "subspaces", "coil"):
        X, y = make_data(kind, 300, 20, 4)
        assert X.shape[0] == 300 and y.shape == (300,) and np.isfinite(X).all()
    X, y = make_data("subspaces", 400, 30, 3)
    # every sample lies (up to the 5% noise) in the 5-dimensional subspace of its cluster
    for c in range(3):
        sv = np.linalg.svd(X[y == c], compute_uv=False)
        assert sv[5] < 0.2 * sv[4]
    with pytest.raises(ValueError, match="kind"):
        make_data("nope", 10, 5, 2)


@pytest.mark.parametrize("case", ["few features, scales", "as-is"])
def test_fit_vote_and_predict_vote_agree(monkeypatch, case):
    """The fit labels the rows outside its reference sample by the same vote as ``predict``
    (one function, ``_passes.graph_vote``): ``labels_`` of those rows equal ``predict`` and
    the vote computed from the fitted state by hand (the representation rules included)."""
    from ntnumba.partition import select as _select

    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(3), 40)
    X = 0.8 * rng.standard_normal((3, 6))[y] + rng.standard_normal((120, 6))  # overlapping
    if case != "as-is":
        X = X * np.logspace(0, 3, 6)  # both representation rules apply
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 50)
    rep = "auto" if case != "as-is" else "as-is"
    m = NTClustering(3, n_components=24, representation=rep, random_state=0).fit(X)
    rows = m._fitted.state.graph["ref_rows"]
    others = np.setdiff1d(np.arange(120), rows)
    assert rows is not None and others.size == 70
    np.testing.assert_array_equal(m.predict(X[others]), m.labels_[others])
    # by hand: the rows the graph compares, then a similarity-weighted vote of 5 neighbours
    Xs = X * m.scale_
    ref = Xs[rows]
    w, offset, _ = _select.graph_space(ref, rep)
    assert (w is not None) == (case != "as-is")

    def grows(Z):
        Z = Z * (1.0 if w is None else w) - (ref * (1.0 if w is None else w)).mean(axis=0)
        Z = Z - (Z @ m.shared_components_.T) @ m.shared_components_
        return Z if offset is None else np.c_[Z, np.full(len(Z), offset)]

    np.testing.assert_allclose(grows(Xs[others]), G.graph_rows(
        Xs[others], m.shared_mean_, m.shared_components_, offset, w), atol=1e-9)
    idx, sim = naive_graph.knn(grows(Xs[others]), 5, Y_ref=grows(ref))
    votes = np.zeros((others.size, 3))
    for i in range(others.size):
        for j, s in zip(idx[i], sim[i]):
            votes[i, m._fitted.ref_labels[j]] += max(s, 0.0) + 1e-12
    np.testing.assert_array_equal(m.labels_[others], votes.argmax(axis=1))


def test_row_hashes_equal_rows_equal_hashes_and_distinct_rows_differ():
    # equal rows in float32 (-0.0 as 0.0) hash equal; distinct rows of random data differ
    # (reference: byte comparison of the float32 rows)
    rng = np.random.default_rng(21)
    X = rng.standard_normal((3000, 7))
    X[10] = X[20].astype(np.float32)          # equal in float32, not in float64
    X[30] = np.where(X[40] == 0, -0.0, X[40])
    X[50] = 0.0
    X[51] = -0.0
    h = G.row_hashes(X)
    assert h.dtype == np.uint64 and h.shape == (3000,)
    assert h[10] == h[20] and h[30] == h[40] and h[50] == h[51]
    keys = (X.astype(np.float32) + np.float32(0.0)).view(np.uint32)
    n_distinct = np.unique(keys, axis=0).shape[0]
    assert np.unique(h).size == n_distinct
    np.testing.assert_array_equal(G.row_hashes(X[::-1]), h[::-1])   # no order dependence
