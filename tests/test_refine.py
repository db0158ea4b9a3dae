"""Label refinement (ntnumba/partition/refine.py): the partition recomputed on the learned map."""
from dataclasses import replace

import numpy as np
import pytest

import naive_refine
from ntnumba import NTClustering
from ntnumba.engine import loop as _driver
from ntnumba.partition.graph import graph_partition
from ntnumba.partition import refine as R
from ntnumba.metrics import clustering_accuracy


@pytest.mark.parametrize("seed", range(6))
def test_match_labels_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    C = int(rng.integers(2, 6))
    ref = rng.integers(0, C, 40)
    # a renamed copy of ref with some samples moved
    lab = rng.permutation(C)[ref]
    moved = rng.random(40) < 0.3
    lab[moved] = rng.integers(0, C, moved.sum())
    got = R.match_labels(lab, ref, C)
    _, best = naive_refine.match_labels(lab, ref, C)
    assert int(np.sum(got == ref)) == best  # the most agreement possible
    # the same partition, only renamed
    pairs = set(zip(lab.tolist(), got.tolist()))
    assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})


@pytest.mark.parametrize("seed", range(3))
def test_coassociation_weights_match_naive(seed):
    rng = np.random.default_rng(seed)
    n = 15
    W = rng.random((n, n)) * (rng.random((n, n)) < 0.4)
    W = W + W.T
    parts = [rng.integers(0, 3, n) for _ in range(1 + seed)]
    np.testing.assert_allclose(R.coassociation_weights(W, parts).toarray(),
                               naive_refine.coassociation_weights(W, parts), atol=1e-15)


@pytest.mark.parametrize("copies", [None, 2])
def test_refine_partitions_the_coassociation_graph(monkeypatch, copies):
    """The step is: the initial partition's graph (mutual-rank weights, ``k`` times its
    near-copy factor neighbours) and the learned rows' graph, the learned graph's spectral
    partition, both partitions' co-association on the sum of the graphs, its partition. The
    expected graphs, partitions and weights are computed here from the inputs."""
    import naive_graph
    from ntnumba.partition.graph import RANK_LISTS, cluster_qr, graph_rows, shared_directions
    from ntnumba.partition.graph import spectral_embedding

    X, y, wrong = _planted(0)
    rng = np.random.default_rng(5)
    Z = X @ rng.standard_normal((X.shape[1], X.shape[1]))
    mean, V = shared_directions(X, 0)
    p = _driver.Params(3, 60)
    seen = {}
    real = R.coassociation_weights

    def spy(W, parts):
        seen["out"] = real(W, parts).toarray()
        return seen["out"]

    monkeypatch.setattr(R, "coassociation_weights", spy)
    graph = {"mean": mean, "V": V, "copies": copies}
    new, info = R.refine(X, Z, wrong, graph, p, 3, n_shared=1)
    kc = 5 * (copies or 1)  # no near-copies in these data: the measured factor is 1
    Wx = naive_refine.mutual_rank_graph(graph_rows(X, mean, V), kc, RANK_LISTS * kc)
    Wa = naive_graph.knn_graph(naive_refine.within_rows(Z, wrong, 1), kc)
    part_a = cluster_qr(spectral_embedding(Wa, 3, random_state=3)[1])
    Wc = naive_refine.coassociation_weights(Wx + Wa, [wrong, part_a])
    np.testing.assert_allclose(seen["out"], Wc, atol=1e-12)
    want = cluster_qr(spectral_embedding(Wc, 3, random_state=3)[1])
    want, _ = naive_refine.match_labels(want, wrong, 3)
    np.testing.assert_array_equal(new, want)
    assert info["moved"] == int(np.count_nonzero(new != wrong))


def _planted(seed, C=3, n_per=30, N=20, n_wrong=18):
    """C separated clusters and a partition with ``n_wrong`` samples in the wrong cluster."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(C), n_per)
    X = 3.0 * rng.standard_normal((C, N))[y] + 0.5 * rng.standard_normal((y.size, N))
    X /= np.sqrt(np.mean(X ** 2))
    wrong = y.copy()
    flip = rng.choice(y.size, n_wrong, replace=False)
    wrong[flip] = (y[flip] + 1) % C
    return X, y, wrong


@pytest.mark.parametrize("seed", range(3))
def test_relabel_fixes_a_wrong_initial_partition(seed):
    X, y, wrong = _planted(seed)
    assert clustering_accuracy(y, wrong) == pytest.approx(0.8)
    out = {}
    for relabel in (0, 1):
        p = _driver.Params(3, 60, rule="graph", init="graph", relabel=relabel, max_iter=2)
        rng = np.random.RandomState(seed)
        state = replace(_driver.initialise(X, p, rng), labels=wrong.copy())
        out[relabel] = _driver.run(X, state, p, rng).labels
    # the fixed partition keeps its errors; learning, then the partition of the learned map,
    # puts every sample in its cluster
    assert clustering_accuracy(y, out[0]) == pytest.approx(0.8)
    assert clustering_accuracy(y, out[1]) == 1.0


def test_estimator_relabel_keeps_initial_labels_and_predict_coherent():
    X, y, _ = _planted(0)
    m = NTClustering(3, n_components=60, relabel=1, max_iter=2, random_state=0).fit(X)
    assert m.initial_labels_.shape == m.labels_.shape
    assert m.n_iter_ == 2
    np.testing.assert_array_equal(m.predict(X), m.labels_)
    assert clustering_accuracy(y, m.labels_) == 1.0


def test_relabel_needs_a_following_iteration_and_a_learned_map():
    X, _, _ = _planted(1)
    # max_iter=1: nothing would fit the new partition, so it is not computed
    a = NTClustering(3, n_components=60, relabel=1, max_iter=1, random_state=0).fit(X)
    np.testing.assert_array_equal(a.labels_, a.initial_labels_)
    # without a learned map there is nothing to recompute the partition from: an error naming
    # both arguments and the fix (it was ignored), at fit and partial_fit
    b = NTClustering(3, relabel=1, max_iter=2, learn_transform=False, random_state=0)
    for fit in (b.fit, b.partial_fit):
        with pytest.raises(ValueError, match=r"relabel: .*learn_transform=False; use "
                                             r"relabel=0 or learn_transform=True"):
            fit(X)
    NTClustering(3, max_iter=2, learn_transform=False, random_state=0).fit(X)  # relabel=0


@pytest.mark.parametrize("n_wrong", [0, 18])
def test_relabel_verbose_line_says_whether_the_partition_changed(n_wrong):
    """With the right partition the partition of the learned map is not kept: the line says
    "partition kept" (it said "new partition: 0 samples moved"); a wrong one is replaced."""
    import io

    X, _, wrong = _planted(0, n_wrong=n_wrong)
    p = _driver.Params(3, 60, rule="graph", init="graph", relabel=1, max_iter=2)
    rng = np.random.RandomState(0)
    state = replace(_driver.initialise(X, p, rng), labels=wrong.copy())
    buf = io.StringIO()
    out = _driver.run(X, state, p, rng, verbose=1, stream=buf)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 2 and lines[1].startswith("iteration    2 ")
    moved = int(np.count_nonzero(out.labels != wrong))
    assert (moved > 0) == (n_wrong > 0)
    if moved:
        assert lines[1].endswith(f"  new partition: {moved} samples moved")
    else:
        assert lines[1].endswith("  partition kept")
    assert "partition" not in lines[0]


def test_relabel_rejects_bad_values():
    X, _, _ = _planted(0)
    for bad in (-1, 1.5, "1"):
        with pytest.raises((ValueError, TypeError), match="relabel"):
            NTClustering(3, n_components=60, relabel=bad).fit(X)


def test_relabel_fit_in_pieces_equals_uninterrupted():
    X, _, _ = _planted(2, n_wrong=0)
    kw = dict(n_components=60, relabel=1, random_state=3)
    whole = NTClustering(3, max_iter=3, **kw).fit(X)
    parts = NTClustering(3, max_iter=1, **kw).fit(X)
    parts.set_params(warm_start=True, max_iter=3).fit(X)
    np.testing.assert_array_equal(parts.labels_, whole.labels_)
    np.testing.assert_array_equal(parts.initial_labels_, whole.initial_labels_)
    np.testing.assert_allclose(parts.components_, whole.components_, rtol=0, atol=0)


@pytest.mark.parametrize("seed", range(4))
def test_normalised_cut_matches_naive(seed):
    rng = np.random.default_rng(seed)
    n, C = 15, 4
    W = rng.random((n, n)) * (rng.random((n, n)) < 0.4)
    W = W + W.T
    np.fill_diagonal(W, 0.0)
    lab = rng.integers(0, C - (seed == 0), n)  # seed 0: an empty cluster
    assert R.normalised_cut(W, lab, C) == pytest.approx(naive_refine.normalised_cut(W, lab, C),
                                                        rel=1e-12)


def test_refine_skips_data_the_representation_rules_change():
    from ntnumba.partition.graph import shared_directions

    X, y, wrong = _planted(0)
    p = _driver.Params(3, 60)
    for Xr in (X[:, :5], X * np.logspace(0, 3, X.shape[1])):  # few features; scales
        mean, V = shared_directions(Xr, 0)
        lab, info = R.refine(Xr, Xr, wrong, {"mean": mean, "V": V}, p, 0)
        np.testing.assert_array_equal(lab, wrong)
        assert info is None
    mean, V = shared_directions(X[:, :5], 0)
    lab, _ = R.refine(X[:, :5], X[:, :5], wrong, {"mean": mean, "V": V},
                      replace(p, representation="as-is"), 0)
    assert clustering_accuracy(y, lab) == 1.0


@pytest.mark.parametrize("n", [40, 8])  # the N x N scatter, and the n x n Gram (n < N)
def test_within_rows_matches_naive(n):
    rng = np.random.default_rng(n)
    Q = rng.standard_normal((n, 12)) * np.linspace(3.0, 0.5, 12)
    lab = np.arange(n) % 3
    np.testing.assert_allclose(R.within_rows(Q, lab, 2), naive_refine.within_rows(Q, lab, 2),
                               atol=1e-10)
    np.testing.assert_allclose(R.within_rows(Q, lab, 0), Q - Q.mean(axis=0), atol=1e-12)


def test_relabel_with_a_reference_sample(monkeypatch):
    """Above the reference size the new partition is that of the reference rows, the other
    rows voted against it; predict on the training rows gives labels_."""
    from ntnumba.partition import select as _select

    X, y, _ = _planted(4, n_per=40, n_wrong=0)
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 70)
    real = _select.partition

    def wrong_partition(*args, **kw):  # the initial partition with 20% of the labels moved
        lab, info = real(*args, **kw)
        lab = lab.copy()
        lab[::5] = (lab[::5] + 1) % 3
        return lab, info

    monkeypatch.setattr(_select, "partition", wrong_partition)
    fits = {r: NTClustering(3, n_components=60, relabel=r, max_iter=2, random_state=0).fit(
        X, chunk_size=50) for r in (0, 1)}
    assert fits[1]._fit_X.shape[0] == 70
    assert clustering_accuracy(y, fits[0].labels_) < 0.9  # the moved labels stay
    assert clustering_accuracy(y, fits[1].labels_) == 1.0
    np.testing.assert_array_equal(fits[1].predict(X), fits[1].labels_)


# ---------------------------------------------------------------------------------------------
# prototypes: the learned model's nearest-mean partition, judged by a coarser graph
# ---------------------------------------------------------------------------------------------
def _touching_blobs(seed, n_per=40, C=3, d=2, spread=2.2):
    """C Gaussian blobs in d features that overlap a little, and their labels."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(C), n_per)
    centres = spread * rng.standard_normal((C, d))
    return centres[y] + rng.standard_normal((y.size, d)), y


@pytest.mark.parametrize("step", ["relabel", "prototypes"])
def test_refine_steps_check_their_memory(step, monkeypatch, memory_trace):
    """relabel's two graphs and the prototype step's coarse graph pass the graph partition's
    memory check: the estimate bounds the traced peak (8 near-copies of every sample: the
    data's lists are 4 k 8 long), and too little memory stops the step with a MemoryError
    that names the option doing without it."""
    from ntnumba.partition import graph as G

    rng = np.random.default_rng(0)
    base = 3 * rng.standard_normal((4, 30))[np.arange(100) % 4] + rng.standard_normal((100, 30))
    X = np.repeat(base, 8, axis=0) + 1e-4 * rng.standard_normal((800, 30))
    labels, graph = G.graph_partition(X, 4, n_shared=0, random_state=0)
    assert graph["copies"] == 8
    wrong = labels.copy()
    wrong[:80] = (wrong[:80] + 1) % 4
    p = _driver.Params(4, 20)

    def run():
        if step == "relabel":
            return R.refine(X, X, wrong, graph, p, 0)
        return R.prototype_refine(X, X, wrong, p)

    run()  # compile
    peak, estimates, _ = memory_trace(run)
    assert estimates and peak <= max(estimates) <= 3 * peak + G.get_num_threads() * 4 * 800 ** 2
    monkeypatch.setattr(G, "available_memory", lambda: 1000)
    fix = "relabel=0" if step == "relabel" else "prototypes=False"
    with pytest.raises(MemoryError, match=f"{fix}.* needs about"):
        run()


@pytest.mark.parametrize("seed", range(5))
def test_prototype_partition_matches_naive(seed):
    rng = np.random.default_rng(seed)
    C = int(rng.integers(2, 5))
    Z = rng.standard_normal((30, 3)) + rng.integers(0, 3, (30, 1))
    lab = rng.integers(0, C, 30)
    lab[:C] = np.arange(C)
    got = R.prototype_partition(Z, lab, C)
    np.testing.assert_array_equal(
        got, naive_refine.prototype_partition(Z, lab, C, max_steps=R.PROTOTYPE_STEPS))
    # two steps at most: the same as the reference's two steps
    np.testing.assert_array_equal(R.prototype_partition(Z, lab, C, max_steps=2),
                                  naive_refine.prototype_partition(Z, lab, C, max_steps=2))


def test_prototype_partition_never_empties_a_cluster():
    # both means at 0: every sample goes to cluster 0 (ties to the smaller index), which
    # would empty cluster 1; the step is not taken
    Z = np.array([[-6.0], [-4.0], [4.0], [6.0], [-5.0], [5.0]])
    lab = np.array([0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(R.prototype_partition(Z, lab, 2), lab)
    np.testing.assert_array_equal(naive_refine.prototype_partition(Z, lab, 2), lab)
    # a tie that empties nothing: means -1 and 3, the sample at 1 goes to the smaller index
    Z = np.array([[-2.0], [0.0], [1.0], [5.0]])
    lab = np.array([0, 0, 1, 1])
    want = naive_refine.prototype_partition(Z, lab, 2)
    np.testing.assert_array_equal(want, [0, 0, 0, 1])
    np.testing.assert_array_equal(R.prototype_partition(Z, lab, 2), want)


@pytest.mark.parametrize("shape", [(7, 3), (12, 5)])
def test_metric_rows_distances_are_those_of_the_map(shape):
    rng = np.random.default_rng(shape[0])
    A = rng.standard_normal(shape)
    X = rng.standard_normal((6, shape[1]))
    Z = R.metric_rows(X, A)
    for i in range(6):
        for j in range(6):
            assert np.linalg.norm(Z[i] - Z[j]) == pytest.approx(
                np.linalg.norm(A @ (X[i] - X[j])), rel=1e-10, abs=1e-12)
    np.testing.assert_array_equal(R.metric_rows(X, None), X)
    # a rank-deficient map: the square-root fallback keeps the distances
    A[:, 0] = A[:, 1]
    Z = R.metric_rows(X, A)
    assert np.linalg.norm(Z[0] - Z[1]) == pytest.approx(np.linalg.norm(A @ (X[0] - X[1])),
                                                        rel=1e-8)


@pytest.mark.parametrize("seed,moved", [(0, True), (1, True), (2, False), (3, False)])
def test_prototype_refine_decides_by_the_coarse_cut(seed, moved):
    """The judge: the cuts of the mutual-rank graph (the graph partition's weights) of
    ``COARSE * n_neighbors`` neighbours, by the dense reference."""
    from ntnumba.partition.graph import RANK_LISTS

    X, y = _touching_blobs(seed, n_per=15)
    p = _driver.Params(3, 2, n_neighbors=2)
    rows = X - X.mean(axis=0)
    start = y.copy()
    if moved:
        start[::4] = (start[::4] + 1) % 3  # a quarter of the samples in the wrong cluster
    lab, info = R.prototype_refine(X, rows, start, p)
    new = naive_refine.prototype_partition(X, start, 3)
    k = min(len(rows) - 1, R.COARSE * p.n_neighbors)
    W = naive_refine.mutual_rank_graph(rows, k, min(len(rows) - 1, RANK_LISTS * k))
    cuts = (naive_refine.normalised_cut(W, start, 3), naive_refine.normalised_cut(W, new, 3))
    np.testing.assert_allclose(info["cuts"], cuts, rtol=1e-9)
    keep = cuts[1] < R.CUT_RATIO * cuts[0]
    assert info["kept"] == keep
    np.testing.assert_array_equal(lab, new if keep else start)


@pytest.mark.parametrize("r", [2, 5])
def test_prototype_refine_decides_on_distinct_rows(r):
    """Equal rows are one node of the coarse graph, as in the graph partition: data repeated
    ``r`` times get the cuts and the decision of the data."""
    X, y = _touching_blobs(0, n_per=15)
    p = _driver.Params(3, 2, n_neighbors=2)
    start = y.copy()
    start[::4] = (start[::4] + 1) % 3
    lab, info = R.prototype_refine(X, X, start, p)
    Xr, start_r = np.tile(X, (r, 1)), np.tile(start, r)
    lab_r, info_r = R.prototype_refine(Xr, Xr, start_r, p)
    np.testing.assert_allclose(info_r["cuts"], info["cuts"], rtol=1e-9)
    assert info_r["kept"] == info["kept"]
    np.testing.assert_array_equal(lab_r, np.tile(lab, r))


def test_prototype_refine_rejects_the_nearest_means_on_images():
    """Five objects of the COIL-20 demo copy: the graph partition is right; the nearest-mean
    partition (CA 0.83) cuts a coarse graph with plain similarity weights less (cut ratio
    0.76: the judge before, which replaced the graph partition of COIL-20, CA 86.5 -> 74.7),
    but not the coarse graph with the partition's own mutual-rank weights: rejected."""
    from ntnumba.partition.graph import RANK_LISTS, graph_rows
    from ntnumba.datasets import load_demo

    X, y = load_demo()
    X, y = X[y < 5], y[y < 5]
    lab, info = graph_partition(X, 5, random_state=0)
    assert clustering_accuracy(y, lab) == 1.0
    rows = graph_rows(X, info["mean"], info["V"])
    p = _driver.Params(5, 2)
    new, out = R.prototype_refine(X, rows, lab, p)
    proto = R.prototype_partition(X, lab, 5)
    assert clustering_accuracy(y, proto) < 0.9
    k = R.COARSE * p.n_neighbors
    W = naive_refine.mutual_rank_graph(rows, k, RANK_LISTS * k)
    cuts = (naive_refine.normalised_cut(W, lab, 5), naive_refine.normalised_cut(W, proto, 5))
    np.testing.assert_allclose(out["cuts"], cuts, rtol=1e-9)
    assert cuts[1] >= R.CUT_RATIO * cuts[0] and not out["kept"]
    np.testing.assert_array_equal(new, lab)
    # the plain-similarity graph of the same neighbours prefers the nearest means
    S = naive_refine.similarity_matrix(rows)
    np.fill_diagonal(S, -np.inf)
    K = np.zeros_like(S)
    top = np.argsort(-S, axis=1, kind="stable")[:, :k]
    np.put_along_axis(K, top, np.take_along_axis(S, top, axis=1), axis=1)
    Wp = (K + K.T) / 2
    assert R.normalised_cut(Wp, proto, 5) < R.CUT_RATIO * R.normalised_cut(Wp, lab, 5)


def _prototype_case():
    """Four overlapping Gaussian blobs in 20 features (the angular graph): the prototype step
    is kept (10 samples move; CA 0.96 -> 0.987) from the partition of the rows themselves
    (``representation="as-is"``; "auto" starts it from the partition of their 16 leading
    principal directions, CA 0.973, ntnumba/partition/select.py rule 4)."""
    from sklearn.datasets import make_blobs

    return make_blobs(300, n_features=20, centers=4, cluster_std=6.0, random_state=2)


def test_estimator_prototypes_same_on_repeated_data():
    """Overlapping blobs: the step is kept; the data repeated twice get the same partition."""
    X, y = _prototype_case()
    # the step from the rows' own partition (_prototype_case). The default's initial partition
    # does not depend on repeats (test_select.py); from it the step itself moves 2 of the 600
    # repeated rows to another cluster than their copies in the unique fit
    kw = dict(prototypes=True, random_state=0, representation="as-is")
    one = NTClustering(4, **kw).fit(X)
    two = NTClustering(4, **kw).fit(np.tile(X, (2, 1)))
    np.testing.assert_array_equal(two.initial_labels_, np.tile(one.initial_labels_, 2))
    assert clustering_accuracy(y, one.labels_) > clustering_accuracy(y, one.initial_labels_)
    np.testing.assert_array_equal(two.labels_, np.tile(one.labels_, 2))


def test_prototype_refine_keeps_a_partition_the_coarse_graph_prefers():
    """Two concentric rings: nearest means cut both rings in half, the coarse graph of the
    rings keeps the partition into rings."""
    from ntnumba.partition import select as _select

    rng = np.random.default_rng(0)
    t = rng.uniform(0, 2 * np.pi, 200)
    r = np.repeat([1.0, 4.0], 100)
    X = np.c_[r * np.cos(t), r * np.sin(t)] + 0.05 * rng.standard_normal((200, 2))
    y = np.repeat([0, 1], 100)
    p = _driver.Params(2, 2)
    # the rows of the few-features rule (centred, a constant coordinate)
    rows = np.c_[X - X.mean(axis=0), np.full(200, _select.constant_coordinate(X))]
    lab, info = R.prototype_refine(X, rows, y, p)
    assert not info["kept"] and info["cuts"][1] > info["cuts"][0]
    np.testing.assert_array_equal(lab, y)


def test_estimator_prototypes_repairs_a_split_cluster_and_keeps_initial_labels(monkeypatch):
    """A graph partition with a quarter of the samples in the wrong cluster: the prototype
    step repairs it (the coarse graph agrees), ``initial_labels_`` keeps the start,
    ``predict`` gives ``labels_``; later iterations fit the new partition."""
    from ntnumba.partition import select as _select

    X, y = _touching_blobs(3, n_per=40, d=3, spread=4.0)
    real = _select.partition

    def wrong_partition(*args, **kw):
        lab, info = real(*args, **kw)
        lab = lab.copy()
        lab[::4] = (lab[::4] + 1) % 3
        return lab, info

    monkeypatch.setattr(_select, "partition", wrong_partition)
    for learn, max_iter in ((True, 1), (True, 2), (False, 2)):
        off = NTClustering(3, n_components=24, learn_transform=learn, random_state=0).fit(X)
        seen = []
        on = NTClustering(3, n_components=24, learn_transform=learn, prototypes=True,
                          max_iter=max_iter, tol=0.0, random_state=0).fit(
            X, callback=lambda st: seen.append(st.labels.copy()))
        assert clustering_accuracy(y, off.labels_) < 0.8
        np.testing.assert_array_equal(on.initial_labels_, off.labels_)
        assert clustering_accuracy(y, on.labels_) > 0.95
        # the first iteration is followed by the new partition (the callback sees it)
        assert on.n_iter_ == len(seen) == max_iter
        np.testing.assert_array_equal(seen[0], on.labels_)
        np.testing.assert_array_equal(on.predict(X), on.labels_)


def test_prototypes_fit_in_pieces_equals_uninterrupted_and_rejects_bad_values():
    """Overlapping blobs: the step is kept (the test runs it)."""
    X, _ = _prototype_case()
    kw = dict(n_components=24, prototypes=True, random_state=0, representation="as-is")
    whole = NTClustering(4, max_iter=3, tol=0.0, **kw).fit(X)
    assert np.count_nonzero(whole.labels_ != whole.initial_labels_) > 10
    parts = NTClustering(4, max_iter=1, tol=0.0, **kw).fit(X)
    parts.set_params(warm_start=True, max_iter=3).fit(X)
    np.testing.assert_array_equal(parts.labels_, whole.labels_)
    np.testing.assert_allclose(parts.components_, whole.components_, rtol=0, atol=0)
    for bad in (1, "yes", None):
        with pytest.raises((ValueError, TypeError), match="prototypes"):
            NTClustering(3, n_components=24, prototypes=bad).fit(X)


@pytest.mark.parametrize("save", [False, True])
def test_prototypes_interrupted_inside_the_step_is_done_on_resume(monkeypatch, tmp_path, save):
    """A KeyboardInterrupt inside the prototype step keeps iteration 1 without the step; a
    ``warm_start`` (after a save and load too) does the step and equals an uninterrupted
    fit."""
    import ntnumba

    X, _ = _prototype_case()
    kw = dict(prototypes=True, max_iter=2, tol=0.0, random_state=0, representation="as-is")
    whole = NTClustering(4, **kw).fit(X)
    assert not np.array_equal(whole.labels_, whole.initial_labels_)  # the step is kept

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    real = R.prototype_refine
    monkeypatch.setattr(R, "prototype_refine", interrupt)
    m = NTClustering(4, **kw)
    with pytest.warns(RuntimeWarning, match="interrupted"), pytest.raises(KeyboardInterrupt):
        m.fit(X)
    assert m.n_iter_ == 1
    np.testing.assert_array_equal(m.labels_, whole.initial_labels_)
    monkeypatch.setattr(R, "prototype_refine", real)
    if save:
        m = ntnumba.load(m.save(str(tmp_path / "m.npz")))
    m.set_params(warm_start=True).fit(X)
    np.testing.assert_array_equal(m.labels_, whole.labels_)
    np.testing.assert_allclose(m.components_, whole.components_, rtol=0, atol=0)


@pytest.mark.parametrize("kept", [False, True])
def test_prototypes_verbose_lines_on_the_run_stream(kept):
    """The step's line goes to the stream of ``run``; "new partition" only when kept, else
    "partition kept" (as a relabel step that keeps the partition says)."""
    import io

    if kept:  # overlapping blobs: kept
        X, _ = _prototype_case()
    else:  # touching blobs: a different partition, not kept
        X, _ = _touching_blobs(0, n_per=30, d=3)
    m = NTClustering(4 if kept else 3, n_components=24, prototypes=True,
                     representation="as-is")
    p = m._params(X.shape[1])
    rng = np.random.RandomState(0)
    buf = io.StringIO()
    _driver.run(X, _driver.initialise(X, p, rng), p, rng, verbose=1, stream=buf)
    out = buf.getvalue()
    assert ("prototypes: coarse-graph cut" in out and ("not kept" in out) != kept)
    assert ("new partition" in out) == kept
    assert ("  partition kept" in out) != kept
    if kept:
        assert "new partition: 0 " not in out


@pytest.mark.parametrize("assign", ["objective", "paper"])
def test_relabel_and_prototypes_need_the_graph_rule(assign, tmp_path):
    import ntnumba

    X, _ = _touching_blobs(0, n_per=10)
    # a model file of such parameters (written before they were refused) still loads
    old = NTClustering(3, n_components=24, assign=assign, init="random", random_state=0).fit(X)
    old.set_params(relabel=1, prototypes=True)
    np.testing.assert_array_equal(ntnumba.load(old.save(str(tmp_path / "m"))).predict(X),
                                  old.predict(X))
    for kw, fix in (({"relabel": 1, "max_iter": 2}, "relabel=0"),
                    ({"prototypes": True}, "prototypes=False")):
        m = NTClustering(3, n_components=24, assign=assign, init="random", **kw)
        with pytest.raises(ValueError, match=f"{list(kw)[0]}: .*{assign}.*{fix}"):
            m.fit(X)
        with pytest.raises(ValueError, match=list(kw)[0]):
            m.partial_fit(X)
    # accepted with the graph rule
    NTClustering(3, n_components=24, relabel=1, max_iter=2, prototypes=True).fit(X)


@pytest.mark.parametrize("case", ["few features, scales", "as-is"])
def test_fit_vote_and_predict_vote_agree(monkeypatch, case):
    """The fit labels the rows outside its reference sample by the same vote as ``predict``
    (one function, ``_passes.graph_vote``): ``labels_`` of those rows equal ``predict`` and
    the vote computed from the fitted state by hand (the representation rules included)."""
    import naive_graph

    from ntnumba.partition import graph as _graph
    from ntnumba.partition import select as _select

    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(3), 40)
    X = 0.8 * rng.standard_normal((3, 6))[y] + rng.standard_normal((120, 6))  # overlapping
    if case != "as-is":
        X = X * np.logspace(0, 3, 6)  # both representation rules apply
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 50)
    rep = "auto" if case != "as-is" else "as-is"
    m = NTClustering(3, n_components=24, representation=rep, random_state=0).fit(X)
    rows = m._state.graph["ref_rows"]
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

    np.testing.assert_allclose(grows(Xs[others]), _graph.graph_rows(
        Xs[others], m.shared_mean_, m.shared_components_, offset, w), atol=1e-9)
    idx, sim = naive_graph.knn(grows(Xs[others]), 5, Y_ref=grows(ref))
    votes = np.zeros((others.size, 3))
    for i in range(others.size):
        for j, s in zip(idx[i], sim[i]):
            votes[i, m._fit_labels[j]] += max(s, 0.0) + 1e-12
    np.testing.assert_array_equal(m.labels_[others], votes.argmax(axis=1))


def test_prototypes_with_a_reference_sample_and_not_in_partial_fit(monkeypatch):
    """Above the reference size the prototype partition is that of the reference rows, the
    other rows voted against it (``predict`` gives ``labels_``); ``partial_fit`` runs no
    prototype step even where its partition would be kept."""
    X, y = _touching_blobs(3, n_per=40, d=3, spread=4.0)
    monkeypatch.setattr(_driver, "REFERENCE_SIZE", 90)
    calls = []
    real = R.prototype_refine

    def wrong_start(Z, rows, labels, p, random_state=0):  # a quarter of the labels moved
        lab = np.asarray(labels).copy()
        lab[::4] = (lab[::4] + 1) % p.n_clusters
        calls.append(lab.size)
        return real(Z, rows, lab, p, random_state)

    monkeypatch.setattr(R, "prototype_refine", wrong_start)
    m = NTClustering(3, n_components=24, prototypes=True, random_state=0).fit(X, chunk_size=50)
    assert calls == [90] and m._fit_X.shape[0] == 90
    assert clustering_accuracy(y, m.labels_) > 0.95
    np.testing.assert_array_equal(m.predict(X), m.labels_)
    fits = []
    for on in (False, True):
        mp = NTClustering(3, n_components=24, prototypes=on, random_state=0)
        for s, e in ((0, 50), (50, 120)):
            mp.partial_fit(X[s:e])
        fits.append(mp.labels_)
    assert calls == [90]
    np.testing.assert_array_equal(fits[0], fits[1])
