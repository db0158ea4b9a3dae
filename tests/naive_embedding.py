"""Slow, obvious references for :mod:`ntnumba.partition.embedding` (pure Python loops)."""
import math

import numpy as np
from scipy.optimize import brentq

MASK = (1 << 64) - 1


def memberships(dist):
    """Per row: rho = first positive finite distance; sigma solving sum = log2(k) by brentq."""
    n, k = dist.shape
    out = np.zeros((n, k))
    for i in range(n):
        row = [d for d in dist[i] if math.isfinite(d)]
        pos = [d for d in row if d > 0]
        rho = pos[0] if pos else 0.0

        def excess(sigma):
            return sum(math.exp(-(d - rho) / sigma) if d > rho else 1.0 for d in row) \
                - math.log2(k)
        if excess(1e-12) >= 0 or excess(1e6) <= 0:  # no sigma can reach the target
            sigma = 1e-12 if excess(1e-12) >= 0 else 1e6
        else:
            sigma = brentq(excess, 1e-12, 1e6, xtol=1e-14)
        for t in range(k):
            d = dist[i, t]
            if math.isfinite(d):
                out[i, t] = math.exp(-(d - rho) / sigma) if d > rho else 1.0
    return out


def fuzzy_union(nn, w, n):
    """Dense P + P^T - P * P^T of neighbour lists ``nn`` with memberships ``w``."""
    P = np.zeros((n, n))
    for i in range(nn.shape[0]):
        for t in range(nn.shape[1]):
            if nn[i, t] >= 0:
                P[i, nn[i, t]] = w[i, t]
    return P + P.T - P * P.T


def xorshift(state):
    x = state[0]
    x ^= (x << 13) & MASK
    x ^= x >> 7
    x ^= (x << 17) & MASK
    state[0] = x
    return x >> 1


def layout(Z, head, tail, eps, n_epochs, a, b, seed, negative_rate=5):
    """The SGD of UMAP's layout written out edge by edge (umap-learn's
    ``_optimize_layout_euclidean_single_epoch``, move_other, gamma = 1)."""
    Z = np.array(Z, dtype=np.float64)
    n, dim = Z.shape
    state = [(seed * 2654435761 + 88172645463325252) & MASK]
    per_neg = [e / negative_rate for e in eps]
    nxt = list(eps)
    nxt_neg = list(per_neg)

    def clip(v):
        return min(4.0, max(-4.0, v))
    for epoch in range(n_epochs):
        alpha = 1.0 - epoch / n_epochs
        for e in range(len(head)):
            if eps[e] <= 0 or nxt[e] > epoch:
                continue
            j, k = head[e], tail[e]
            d2 = sum((Z[j, c] - Z[k, c]) ** 2 for c in range(dim))
            pb = math.exp(b * math.log(d2)) if d2 > 0 else 0.0  # d2 ** b
            g = -2 * a * b * (pb / d2) / (a * pb + 1) if d2 > 0 else 0.0
            for c in range(dim):
                s = clip(g * (Z[j, c] - Z[k, c])) * alpha
                Z[j, c] += s
                Z[k, c] -= s
            nxt[e] += eps[e]
            n_neg = int((epoch - nxt_neg[e]) / per_neg[e])
            for _ in range(n_neg):
                k = xorshift(state) % n
                if k == j:
                    continue
                d2 = sum((Z[j, c] - Z[k, c]) ** 2 for c in range(dim))
                if d2 <= 0:
                    continue
                g = 2 * b / ((0.001 + d2) * (a * math.exp(b * math.log(d2)) + 1))
                for c in range(dim):
                    Z[j, c] += clip(g * (Z[j, c] - Z[k, c])) * alpha
            nxt_neg[e] += n_neg * per_neg[e]
    return Z


def normalised_cut(W, labels):
    """sum over clusters of (weight leaving the cluster) / (weight of its rows), by loops."""
    W = np.asarray(W.toarray() if hasattr(W, "toarray") else W)
    total = 0.0
    for c in set(labels.tolist()):
        vol = leave = 0.0
        for i in range(len(labels)):
            if labels[i] != c:
                continue
            for j in range(len(labels)):
                vol += W[i, j]
                if labels[j] != c:
                    leave += W[i, j]
        total += leave / vol if vol > 0 else 0.0
    return total
