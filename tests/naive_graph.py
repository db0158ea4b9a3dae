"""Slow, obvious references of the graph kernels (ntnumba/partition/graph.py)."""
import math

import numpy as np


def similarity(y, z):
    """The graph's similarity of two rows: ((sin t + (pi - t) cos t) / pi)^2 of their angle t
    (0 when a row is zero), by scalar arithmetic."""
    ny = math.sqrt(sum(v * v for v in y))
    nz = math.sqrt(sum(v * v for v in z))
    if ny == 0 or nz == 0:
        return 0.0
    c = max(-1.0, min(1.0, sum(a * b for a, b in zip(y, z)) / (ny * nz)))
    t = math.acos(c)
    return ((math.sin(t) + (math.pi - t) * c) / math.pi) ** 2


def knn(Y, k, Y_ref=None, exclude_self=False):
    """The k most similar reference rows of every row (ties: the smaller index), and their
    similarities, by a full sort of every row of the similarity matrix."""
    ref = Y if Y_ref is None else Y_ref
    idx = np.zeros((len(Y), k), dtype=np.int64)
    sim = np.zeros((len(Y), k))
    for i, y in enumerate(Y):
        s = [(-similarity(y, z), j) for j, z in enumerate(ref) if not (exclude_self and i == j)]
        s.sort()
        idx[i] = [j for _, j in s[:k]]
        sim[i] = [-v for v, _ in s[:k]]
    return idx, sim


def knn_graph(Y, k):
    """Dense W = (K + K^T) / 2 of the k-NN lists (self excluded)."""
    n = len(Y)
    idx, sim = knn(Y, k, exclude_self=True)
    K = np.zeros((n, n))
    for i in range(n):
        K[i, idx[i]] = sim[i]
    return (K + K.T) / 2


def row_matches(X, ref):
    """Index of the first row of ``ref`` equal in value to each row of ``X`` (-0.0 == 0.0), -1
    if none (a loop over the pairs; rows of another dtype or width match nothing)."""
    X, ref = np.asarray(X), np.asarray(ref)
    out = np.full(X.shape[0], -1, dtype=np.int64)
    if X.dtype != ref.dtype or X.ndim != 2 or ref.ndim != 2 or X.shape[1] != ref.shape[1]:
        return out
    for i in range(X.shape[0]):
        for j in range(ref.shape[0]):
            if np.array_equal(X[i], ref[j]):
                out[i] = j
                break
    return out


def reverse_ranks(idx):
    """back[i, t] = position of i in the list of j = idx[i, t] (L if absent or j < 0), by a
    scan of that list."""
    n, L = idx.shape
    back = np.full((n, L), L, dtype=np.int64)
    for i in range(n):
        for t in range(L):
            j = idx[i, t]
            if j < 0:
                continue
            for u in range(L):
                if idx[j, u] == i:
                    back[i, t] = u
                    break
    return back


def mutual_rank_graph(Y, k, L):
    """Dense W = (K + K^T) / 2 with K_ij = S_ij exp(-(t + b) / k) for j the t-th (t < k) most
    similar row to i and b the position of i among the L most similar rows to j (L if
    absent), from a full sort of every row's similarities."""
    n = len(Y)
    idx, sim = knn(Y, L, exclude_self=True)
    K = np.zeros((n, n))
    for i in range(n):
        for t in range(k):
            j = idx[i, t]
            b = L
            for u in range(L):
                if idx[j, u] == i:
                    b = u
                    break
            K[i, j] = sim[i, t] * math.exp(-(t + b) / k)
    return (K + K.T) / 2


def principal_coordinates(X, d):
    """The centred rows on their d leading principal directions and those directions (d, N),
    by a full SVD of the centred matrix (signs arbitrary)."""
    Xc = np.asarray(X, dtype=np.float64) - np.mean(X, axis=0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    return Xc @ Vt[:d].T, Vt[:d]
