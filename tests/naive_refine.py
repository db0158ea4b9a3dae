"""Slow, obvious references of the label refinement (ntnumba/partition/refine.py)."""
import itertools

import numpy as np


def match_labels(labels, reference, n_clusters):
    """The renaming of ``labels`` that keeps the most samples at their ``reference`` label,
    by trying every permutation (first best in lexicographic order)."""
    labels = np.asarray(labels)
    reference = np.asarray(reference)
    best, best_perm = -1, None
    for perm in itertools.permutations(range(n_clusters)):
        agree = sum(int(perm[a] == b) for a, b in zip(labels, reference))
        if agree > best:
            best, best_perm = agree, perm
    return np.array([best_perm[a] for a in labels]), best


def normalised_cut(W, labels, n_clusters):
    """sum over clusters of (weight of the edges leaving c) / (sum of the degrees in c), by
    loops over the dense matrix; an empty cluster adds 1."""
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    total = 0.0
    for c in range(n_clusters):
        vol = sum(W[i, j] for i in range(n) if labels[i] == c for j in range(n))
        out = sum(W[i, j] for i in range(n) if labels[i] == c for j in range(n)
                  if labels[j] != c)
        total += out / vol if vol > 0 else 1.0
    return total


def within_rows(Q, labels, r):
    """Q centred, minus its projection on the r leading eigenvectors of the within-cluster
    scatter matrix sum_i (q_i - m_c(i)) (q_i - m_c(i))^T (dense eigh)."""
    Q = np.asarray(Q, dtype=np.float64)
    S = np.zeros((Q.shape[1], Q.shape[1]))
    for i in range(Q.shape[0]):
        d = Q[i] - Q[labels == labels[i]].mean(axis=0)
        S += np.outer(d, d)
    w, U = np.linalg.eigh(S)
    V = U[:, np.argsort(w)[::-1][:r]]
    Qc = Q - Q.mean(axis=0)
    return Qc - Qc @ V @ V.T


def prototype_partition(Z, labels, n_clusters, max_steps=30):
    """Nearest-mean steps by loops: means as sums over members, squared distances by scalar
    sums, the first smallest distance; stop when nothing moves, when a cluster is empty
    before a step, or before a step that would empty one."""
    Z = np.asarray(Z, dtype=np.float64)
    labels = [int(v) for v in labels]
    n, d = Z.shape
    for _ in range(max_steps):
        members = [[i for i in range(n) if labels[i] == c] for c in range(n_clusters)]
        if any(len(m) == 0 for m in members):
            break
        means = [[sum(Z[i, t] for i in m) / len(m) for t in range(d)] for m in members]
        new = []
        for i in range(n):
            dist = [sum((Z[i, t] - mu[t]) ** 2 for t in range(d)) for mu in means]
            new.append(min(range(n_clusters), key=lambda c: (dist[c], c)))
        if new == labels or len(set(new)) < n_clusters:
            break
        labels = new
    return np.array(labels)


def coassociation_weights(W, partitions):
    """Dense loops: W[i, j] times the fraction of the partitions with P[i] == P[j]."""
    W = np.asarray(W, dtype=np.float64)
    out = np.zeros_like(W)
    for i in range(W.shape[0]):
        for j in range(W.shape[1]):
            together = sum(1 for P in partitions if P[i] == P[j])
            out[i, j] = W[i, j] * together / len(partitions)
    return out


def similarity_matrix(Y):
    """The graph's similarity ((sin t + (pi - t) cos t) / pi)^2 of the angle t of every pair of
    rows, dense (numpy on the matrix of cosines; rows are not zero)."""
    Y = np.asarray(Y, dtype=np.float64)
    U = Y / np.linalg.norm(Y, axis=1, keepdims=True)
    c = np.clip(U @ U.T, -1.0, 1.0)
    t = np.arccos(c)
    return ((np.sin(t) + (np.pi - t) * c) / np.pi) ** 2


def mutual_rank_graph(Y, k, L):
    """Dense W = (K + K^T) / 2 with K_ij = S_ij exp(-(t + b) / k) for j the t-th (t < k) most
    similar row to i and b the position of i among the L most similar rows to j (L if
    absent): every row's order by a full stable sort of the dense similarities (ties: the
    smaller index), the positions in a dense n x n table."""
    S = similarity_matrix(Y)
    n = S.shape[0]
    np.fill_diagonal(S, -np.inf)  # self excluded
    order = np.argsort(-S, axis=1, kind="stable")[:, :L]
    pos = np.full((n, n), L)
    for j in range(n):
        pos[j, order[j]] = np.arange(L)
    K = np.zeros((n, n))
    for i in range(n):
        for t in range(k):
            j = order[i, t]
            K[i, j] = S[i, j] * np.exp(-(t + pos[j, i]) / k)
    return (K + K.T) / 2
