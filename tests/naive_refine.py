"""Slow, obvious references of the label refinement (ntnumba/_refine.py)."""
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
