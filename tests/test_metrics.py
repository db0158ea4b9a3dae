"""Tests of ntnumba.metrics against brute force, direct formulas and scikit-learn."""
import itertools

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score

from ntnumba.metrics import (
    ari,
    clustering_accuracy,
    condition_number,
    evaluate,
    knn_accuracy,
    knn_split,
    mutual_coherence,
    nmi,
)


# ----------------------------------------------------------------------------------------------
# Clustering accuracy
# ----------------------------------------------------------------------------------------------
def brute_force_ca(y_true, y_pred, reject=-1):
    """Max over every one-to-one map cluster -> class (classes padded with 'no class')."""
    y_true = list(y_true)
    y_pred = list(y_pred)
    classes = sorted(set(y_true))
    clusters = sorted(set(p for p in y_pred if p != reject))
    slots = classes + [None] * len(clusters)  # unmatched clusters map to None
    best = 0
    for perm in itertools.permutations(range(len(slots)), len(clusters)):
        mapping = {c: slots[k] for c, k in zip(clusters, perm)}
        hits = sum(1 for t, p in zip(y_true, y_pred) if p != reject and mapping[p] == t)
        best = max(best, hits)
    return best / len(y_true)


@pytest.mark.parametrize("seed", range(12))
def test_ca_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 15))
    k_true = int(rng.integers(1, 5))
    k_pred = int(rng.integers(1, 5))
    y_true = rng.integers(0, k_true, n)
    y_pred = rng.integers(0, k_pred, n)
    if seed % 3 == 0:  # some rejected samples
        y_pred[rng.random(n) < 0.3] = -1
    assert clustering_accuracy(y_true, y_pred) == pytest.approx(brute_force_ca(y_true, y_pred))


@pytest.mark.parametrize("seed", range(6))
def test_ca_invariant_under_label_permutation(seed):
    rng = np.random.default_rng(100 + seed)
    y_true = rng.integers(0, 6, 60)
    y_pred = np.where(rng.random(60) < 0.7, y_true, rng.integers(0, 7, 60))
    ca = clustering_accuracy(y_true, y_pred)
    perm_pred = rng.permutation(7)
    perm_true = rng.permutation(6) + 10
    assert clustering_accuracy(perm_true[y_true], perm_pred[y_pred]) == pytest.approx(ca)
    # arbitrary label values (strings) work too
    names = np.array(list("abcdefg"))
    assert clustering_accuracy(names[y_true], names[perm_pred[y_pred]]) == pytest.approx(ca)
    # symmetric when no sample is rejected
    assert clustering_accuracy(y_pred, y_true) == pytest.approx(ca)


def test_ca_hand_computed_cases():
    assert clustering_accuracy([0, 0, 1, 1], [1, 1, 0, 0]) == 1.0
    # more clusters than classes: only one cluster can take class 0
    assert clustering_accuracy([0, 0, 0, 0], [0, 0, 1, 1]) == 0.5
    # fewer clusters than classes
    assert clustering_accuracy([0, 1, 2, 2], [7, 7, 7, 7]) == 0.5
    # rejected samples count as wrong but stay in the denominator
    assert clustering_accuracy([0, 0, 1, 1], [0, -1, 1, -1]) == 0.5
    assert clustering_accuracy([0, 1], [-1, -1]) == 0.0
    # reject_label=None: -1 is an ordinary cluster
    assert clustering_accuracy([0, 0, 1, 1], [-1, -1, 1, 1], reject_label=None) == 1.0
    assert clustering_accuracy([0, 0, 1, 1], [-1, -1, 1, 1]) == 0.5
    # -1 in y_true is an ordinary class
    assert clustering_accuracy([-1, -1, 1, 1], [0, 0, 1, 1]) == 1.0


def test_ca_input_errors():
    with pytest.raises(ValueError, match="same length"):
        clustering_accuracy([0, 1], [0])
    with pytest.raises(ValueError, match="1-D"):
        clustering_accuracy([[0, 1]], [[0, 1]])
    with pytest.raises(ValueError, match="empty"):
        clustering_accuracy([], [])


# ----------------------------------------------------------------------------------------------
# NMI, ARI, evaluate
# ----------------------------------------------------------------------------------------------
def naive_nmi(a, b):
    """Arithmetic-mean NMI from the textbook formulas."""
    a, b = np.asarray(a), np.asarray(b)
    n = len(a)
    ua, ub = np.unique(a), np.unique(b)
    P = np.array([[np.sum((a == i) & (b == j)) for j in ub] for i in ua]) / n
    pa, pb = P.sum(1), P.sum(0)
    mi = sum(P[i, j] * np.log(P[i, j] / (pa[i] * pb[j]))
             for i in range(len(ua)) for j in range(len(ub)) if P[i, j] > 0)
    ha = -np.sum(pa * np.log(pa))
    hb = -np.sum(pb * np.log(pb))
    return mi / ((ha + hb) / 2)


@pytest.mark.parametrize("seed", range(5))
def test_nmi_ari_agree_with_sklearn(seed):
    rng = np.random.default_rng(200 + seed)
    y_true = rng.integers(0, 5, 80)
    y_pred = np.where(rng.random(80) < 0.6, y_true, rng.integers(0, 4, 80))
    assert nmi(y_true, y_pred) == pytest.approx(normalized_mutual_info_score(y_true, y_pred))
    assert nmi(y_true, y_pred) == pytest.approx(naive_nmi(y_true, y_pred))
    for method in ("arithmetic", "geometric", "min", "max"):
        assert nmi(y_true, y_pred, average_method=method) == pytest.approx(
            normalized_mutual_info_score(y_true, y_pred, average_method=method)
        )
    assert ari(y_true, y_pred) == pytest.approx(adjusted_rand_score(y_true, y_pred))


def test_nmi_ari_perfect_and_errors():
    assert nmi([0, 0, 1, 2], [5, 5, 3, 4]) == pytest.approx(1.0)
    assert ari([0, 0, 1, 2], [5, 5, 3, 4]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        nmi([0, 1, 2], [0, 1])
    with pytest.raises(ValueError):
        ari([0, 1, 2], [0, 1])


def test_evaluate_dict():
    rng = np.random.default_rng(3)
    y_true = rng.integers(0, 4, 50)
    y_pred = rng.integers(0, 4, 50)
    out = evaluate(y_true, y_pred)
    assert set(out) == {"ca", "nmi", "ari"}
    assert out["ca"] == pytest.approx(brute_force_ca(y_true, y_pred))
    assert out["nmi"] == pytest.approx(normalized_mutual_info_score(y_true, y_pred))
    assert out["ari"] == pytest.approx(adjusted_rand_score(y_true, y_pred))
    assert all(isinstance(v, float) for v in out.values())


# ----------------------------------------------------------------------------------------------
# Properties of A
# ----------------------------------------------------------------------------------------------
def naive_coherence(A):
    """Mean of squared off-diagonal entries of the full M x M Gram of unit-norm rows."""
    A = np.asarray(A, float)
    norms = np.linalg.norm(A, axis=1, keepdims=True)
    B = np.divide(A, norms, out=np.zeros_like(A), where=norms > 0)
    G = B @ B.T
    M = A.shape[0]
    off = ~np.eye(M, dtype=bool)
    return np.mean(G[off] ** 2)


@pytest.mark.parametrize("shape", [(30, 7), (7, 30), (12, 12), (2, 1)])
def test_coherence_matches_direct_formula(shape):
    rng = np.random.default_rng(sum(shape))
    A = rng.normal(size=shape)
    assert mutual_coherence(A) == pytest.approx(naive_coherence(A), rel=1e-12, abs=1e-15)
    if shape[1] > 1:
        assert mutual_coherence(A, vectors="columns") == pytest.approx(
            naive_coherence(A.T), rel=1e-12
        )
    # invariant to scaling the rows
    D = np.diag(rng.uniform(0.1, 10, shape[0]))
    assert mutual_coherence(D @ A) == pytest.approx(mutual_coherence(A), rel=1e-10)


def test_coherence_zero_rows_and_welch_bound():
    rng = np.random.default_rng(5)
    A = rng.normal(size=(40, 6))
    A[[3, 17]] = 0.0
    assert mutual_coherence(A) == pytest.approx(naive_coherence(A), rel=1e-12)
    B = rng.normal(size=(60, 10))
    M, N = B.shape
    assert mutual_coherence(B) >= (M / N - 1) / (M - 1) - 1e-12


def test_coherence_analytic_cases():
    assert mutual_coherence(np.eye(5)) == pytest.approx(0.0, abs=1e-15)
    Q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(6, 6)))
    assert mutual_coherence(Q) == pytest.approx(0.0, abs=1e-14)  # orthonormal rows
    assert mutual_coherence(3.0 * Q[:4]) == pytest.approx(0.0, abs=1e-14)
    # every row of I repeated twice: 2N of the 2N(2N-1) ordered pairs have (b_i.b_j)^2 = 1
    N = 4
    rows = np.vstack([np.eye(N), -2 * np.eye(N)])
    assert mutual_coherence(rows) == pytest.approx(1 / (2 * N - 1))
    # Mercedes-Benz frame: 3 unit vectors at 120 degrees, |<b_i, b_j>| = 1/2
    ang = 2 * np.pi * np.arange(3) / 3
    mb = np.column_stack([np.cos(ang), np.sin(ang)])
    assert mutual_coherence(mb) == pytest.approx(0.25)
    # a tight frame reaches the Welch bound (M/N - 1)/(M - 1)
    M = 7
    ang = np.pi * np.arange(M) / M
    frame = np.column_stack([np.cos(ang), np.sin(ang)])
    assert mutual_coherence(frame) == pytest.approx((M / 2 - 1) / (M - 1))


def test_coherence_errors():
    with pytest.raises(ValueError, match="at least 2"):
        mutual_coherence(np.ones((1, 3)))
    with pytest.raises(ValueError, match="vectors"):
        mutual_coherence(np.eye(3), vectors="diagonal")
    with pytest.raises(ValueError, match="2-D"):
        mutual_coherence(np.ones(3))


@pytest.mark.parametrize("shape", [(20, 5), (5, 20), (8, 8)])
def test_condition_number_matches_numpy(shape):
    A = np.random.default_rng(shape[0]).normal(size=shape)
    s = np.sqrt(np.linalg.eigvalsh(A.T @ A if shape[0] >= shape[1] else A @ A.T))
    assert condition_number(A) == pytest.approx(s.max() / s.min(), rel=1e-8)
    assert condition_number(A) == pytest.approx(np.linalg.cond(A, 2), rel=1e-10)


def test_condition_number_special_cases():
    assert condition_number(np.diag([4.0, 2.0, 1.0])) == pytest.approx(4.0)
    assert condition_number(np.eye(3)) == pytest.approx(1.0)
    Q, _ = np.linalg.qr(np.random.default_rng(2).normal(size=(9, 4)))
    assert condition_number(5 * Q) == pytest.approx(1.0)
    assert condition_number(np.array([[1.0, 2.0], [2.0, 4.0]])) > 1e15  # rank 1
    assert condition_number(np.zeros((3, 2))) == np.inf
    with pytest.raises(ValueError, match="NaN"):
        condition_number(np.array([[1.0, np.nan], [0.0, 1.0]]))


# ----------------------------------------------------------------------------------------------
# k-NN protocol
# ----------------------------------------------------------------------------------------------
def _blobs(n_per, k, dim, sep, seed):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n_per)
    centers = rng.normal(size=(k, dim)) * sep
    return centers[y] + rng.normal(size=(k * n_per, dim)), y


def test_knn_accuracy_separated_and_random():
    Z, y = _blobs(20, 4, 5, 50.0, 0)
    assert knn_accuracy(Z, y) == 1.0
    assert knn_accuracy(Z, y, n_neighbors=5, test_size=0.5, random_state=3) == 1.0
    rng = np.random.default_rng(1)
    noise = rng.normal(size=(200, 5))
    labels = rng.integers(0, 4, 200)
    assert knn_accuracy(noise, labels) < 0.6  # no signal -> near chance (0.25)


def test_knn_split_is_stratified_and_used_by_knn_accuracy():
    y = np.repeat(np.arange(5), [10, 20, 10, 30, 10])
    tr, te = knn_split(y, test_size=0.3, random_state=7)
    assert len(np.intersect1d(tr, te)) == 0
    assert np.array_equal(np.sort(np.concatenate([tr, te])), np.arange(len(y)))
    assert np.array_equal(np.bincount(y[te]), [3, 6, 3, 9, 3])
    # knn_accuracy must use exactly this split: training rows encode their class, test rows
    # are put on the wrong class; any other split would mix the two and score above 0.
    Z = np.zeros((len(y), 1))
    Z[tr, 0] = 100.0 * y[tr]
    Z[te, 0] = 100.0 * ((y[te] + 1) % 5)
    assert knn_accuracy(Z, y, test_size=0.3, random_state=7) == 0.0
    Z[te, 0] = 100.0 * y[te]
    assert knn_accuracy(Z, y, test_size=0.3, random_state=7) == 1.0


def test_knn_accuracy_errors():
    with pytest.raises(ValueError, match="one row per label"):
        knn_accuracy(np.zeros((5, 2)), [0, 1, 0, 1])
