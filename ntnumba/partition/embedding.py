"""The embedding candidate: a UMAP-type layout of the graph rows, then k-means.

The default's angular k-NN graph + spectral step fails on whole kinds of data (documents at
chance, speech, palm prints); a low-dimensional layout of the same rows by the fuzzy-set
cross-entropy of UMAP (McInnes, Healy & Melville 2018) followed by k-means finds their
clusters, and the graph's shared-direction removal is what keeps the faces under varying
light (docs/research/embedding-partition.md). The layout is computed here rather than by
umap-learn: the same objective and schedule, but compiled once into numba's cache (umap-learn
compiles about 7 s of kernels in every new process) and single-threaded, so that its result
does not depend on the number of threads.

Steps (:func:`embedding_partition`), on the rows ``Y`` of the graph (weighted, centred,
shared directions removed):

1. the ``EMBED_NEIGHBORS`` (15) nearest rows by cosine (``ntnumba.partition.graph.knn_search``),
   distance ``1 - cos``;
2. the fuzzy graph (:func:`fuzzy_graph`): per row ``rho`` the nearest distance and ``sigma``
   with ``sum_j exp(-(d_ij - rho) / sigma) = log2(k)``, memberships
   ``p_ij = exp(-(d_ij - rho) / sigma)``, union ``p + p^T - p * p^T``;
3. ``EMBED_DIM`` (10) coordinates started from the graph's spectral embedding and moved by
   stochastic gradient descent on the cross-entropy with ``min_dist = 0`` (:func:`layout`:
   attraction along sampled edges, ``NEGATIVE_RATE`` repulsions per edge sample, learning rate
   falling linearly from 1; 500 epochs up to 10,000 rows, 200 above);
4. ``KMeans(C, n_init=10)`` on the coordinates.

The parameters are umap-learn's defaults with ``min_dist = 0`` and 10 components, the setting
measured; none was tuned per data set. Which partition is kept is decided by
:func:`ntnumba.partition.select.partition` (the normalised cut on the default's graph).
"""
import numpy as np
from numba import njit
from scipy import sparse

from ..model.quartic import CACHE

#: neighbours of the fuzzy graph (umap-learn's default)
EMBED_NEIGHBORS = 15
#: coordinates of the layout
EMBED_DIM = 10
#: repulsive samples per attractive one (umap-learn's default)
NEGATIVE_RATE = 5
#: epochs of the layout: up to 10,000 rows / above (umap-learn's defaults)
EPOCHS = (500, 200)
#: the curve ``1 / (1 + a d^(2b))`` fitted to ``exp(-d)`` on (0, 3], as umap-learn's
#: ``find_ab_params(spread=1, min_dist=0)`` (tests/test_embedding.py refits it)
CURVE_A, CURVE_B = 1.9328083973, 0.7904949732


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def memberships(dist, n_iter=64):
    """The fuzzy memberships of neighbour lists sorted by distance (step 2).

    ``dist`` (n, k): distances to the k nearest (ascending, ``inf`` for none). Returns (n, k):
    ``exp(-(d - rho) / sigma)`` with ``rho`` the first positive distance of the row and
    ``sigma`` found by bisection so that the row sums to ``log2(k)`` (1 at ``rho``).
    """
    n, k = dist.shape
    out = np.empty((n, k))   # zero where d is not finite (no np.zeros: 3 compilations)
    target = np.log2(k)
    for i in range(n):
        rho = 0.0
        for t in range(k):
            if dist[i, t] > 0.0 and np.isfinite(dist[i, t]):
                rho = dist[i, t]
                break
        lo, hi, sigma = 0.0, np.inf, 1.0
        for _ in range(n_iter):
            s = 0.0
            for t in range(k):
                d = dist[i, t] - rho
                if np.isfinite(d):
                    s += np.exp(-d / sigma) if d > 0.0 else 1.0
            if abs(s - target) < 1e-5:
                break
            if s > target:
                hi = sigma
                sigma = (lo + hi) / 2.0
            else:
                lo = sigma
                sigma = sigma * 2.0 if hi == np.inf else (lo + hi) / 2.0
        for t in range(k):
            d = dist[i, t] - rho
            out[i, t] = (np.exp(-d / sigma) if d > 0.0 else 1.0) if np.isfinite(d) else 0.0
    return out


def fuzzy_graph(nn, dist, n):
    """The symmetric fuzzy graph ``P + P^T - P * P^T`` of neighbour lists (step 2; CSR).

    ``nn`` (n, k) int: neighbours (-1: none); ``dist`` their distances, ascending per row.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.embedding import fuzzy_graph
    >>> nn = np.array([[1, 2], [0, 2], [1, 0]])
    >>> dist = np.array([[0.1, 0.5], [0.1, 0.2], [0.2, 0.5]])
    >>> G = fuzzy_graph(nn, dist, 3).toarray()
    >>> bool(np.allclose(G, G.T)), float(G[0, 1])
    (True, 1.0)
    """
    dist = np.where(nn >= 0, dist, np.inf)
    w = memberships(np.ascontiguousarray(dist, dtype=np.float64))
    rows = np.repeat(np.arange(nn.shape[0]), nn.shape[1])
    keep = nn.ravel() >= 0
    P = sparse.csr_matrix((w.ravel()[keep], (rows[keep], nn.ravel()[keep])), shape=(n, n))
    Pt = P.T.tocsr()
    G = (P + Pt - P.multiply(Pt)).tocsr()
    G.eliminate_zeros()
    return G


@njit(nogil=True, cache=CACHE, error_model="numpy", no_cfunc_wrapper=True)
def layout(Z, head, tail, epochs_per_sample, n_epochs, a, b, seed):
    """The layout's stochastic gradient descent (step 3), in place on ``Z`` (n, dim).

    Edge ``e`` (``head[e] -> tail[e]``) is sampled every ``epochs_per_sample[e]`` epochs (< 0:
    never); each sample pulls both ends together with the gradient of
    ``log(1 + a d^(2b))`` and pushes ``head[e]`` from ``NEGATIVE_RATE`` uniformly drawn rows
    with that of ``log(1 - 1 / (1 + a d^(2b)))``; every gradient coordinate is clipped to
    [-4, 4]; the step is ``1 - epoch / n_epochs``. Sequential: the result depends on ``seed``
    only.
    """
    n, dim = Z.shape
    # a 64-bit xorshift generator (its state x): each step gives the uniform int x >> 1
    x = np.uint64(seed) * np.uint64(2654435761) + np.uint64(88172645463325252)
    E = head.shape[0]
    per_negative = epochs_per_sample / NEGATIVE_RATE
    next_sample = epochs_per_sample.copy()
    next_negative = per_negative.copy()
    for epoch in range(n_epochs):
        alpha = 1.0 - epoch / n_epochs
        for e in range(E):
            if epochs_per_sample[e] <= 0.0 or next_sample[e] > epoch:
                continue
            j = head[e]
            k = tail[e]
            d2 = 0.0
            for c in range(dim):
                d2 += (Z[j, c] - Z[k, c]) ** 2
            g = 0.0
            if d2 > 0.0:
                pb = np.exp(b * np.log(d2))  # d2 ** b
                g = -2.0 * a * b * (pb / d2) / (a * pb + 1.0)
            for c in range(dim):
                step = min(4.0, max(-4.0, g * (Z[j, c] - Z[k, c]))) * alpha
                Z[j, c] += step
                Z[k, c] -= step
            next_sample[e] += epochs_per_sample[e]
            # np.int64, not int(): numba compiles int() as two more implementations
            n_neg = np.int64((epoch - next_negative[e]) / per_negative[e])
            for _ in range(n_neg):
                x ^= (x << np.uint64(13))
                x ^= (x >> np.uint64(7))
                x ^= (x << np.uint64(17))
                k = np.int64((x >> np.uint64(1)) % np.uint64(n))
                if k == j:
                    continue
                d2 = 0.0
                for c in range(dim):
                    d2 += (Z[j, c] - Z[k, c]) ** 2
                if d2 <= 0.0:
                    continue
                g = 2.0 * b / ((0.001 + d2) * (a * np.exp(b * np.log(d2)) + 1.0))
                for c in range(dim):
                    Z[j, c] += min(4.0, max(-4.0, g * (Z[j, c] - Z[k, c]))) * alpha
            next_negative[e] += n_neg * per_negative[e]
    return Z


def sample_schedule(G, n_epochs):
    """The edges of ``G`` (COO ``head, tail``) and their epochs per sample: the heaviest edge
    every epoch, an edge of weight ``w`` every ``max(w) / w`` epochs; edges below
    ``max(w) / n_epochs`` are dropped (never sampled), as in umap-learn."""
    G = G.tocoo()
    w = G.data
    top = float(w.max()) if w.size else 1.0
    keep = w >= top / n_epochs
    head, tail, w = G.row[keep], G.col[keep], w[keep]
    return (np.ascontiguousarray(head, dtype=np.int64), np.ascontiguousarray(tail, dtype=np.int64),
            np.ascontiguousarray(top / w, dtype=np.float64))


def initial_coordinates(G, dim, seed):
    """The layout's start: the graph's ``dim`` leading non-trivial eigenvectors of
    ``D^-1/2 G D^-1/2``, each scaled to [0, 10] (umap-learn's spectral start)."""
    from .graph import spectral_embedding

    n = G.shape[0]
    d = np.asarray(G.sum(axis=1)).ravel()
    d = np.maximum(d, 0.0) + (d <= 0)
    if n <= dim + 2:
        return np.random.RandomState(seed).uniform(0.0, 10.0, (n, dim))
    _, maps, _ = spectral_embedding(G, dim + 1, random_state=seed)
    Z = maps[:, 1:] * np.sqrt(d)[:, None]  # the eigenvectors themselves
    lo, hi = Z.min(axis=0), Z.max(axis=0)
    return np.ascontiguousarray(10.0 * (Z - lo) / np.where(hi > lo, hi - lo, 1.0))


def embed(Y, random_state=0, *, n_neighbors=EMBED_NEIGHBORS, dim=EMBED_DIM):
    """The layout coordinates of the rows ``Y`` (steps 1-3; shape (n, dim)).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.embedding import embed
    >>> rng = np.random.default_rng(0)
    >>> Y = np.r_[rng.normal(0, 1, (40, 8)) + 4, rng.normal(0, 1, (40, 8)) - 4]
    >>> embed(Y, 0).shape
    (80, 10)
    """
    from .graph import knn_search, unit_rows

    Y = np.asarray(Y, dtype=np.float64)
    n = Y.shape[0]
    nn, _ = knn_search(Y, min(n_neighbors, n - 1), exclude_self=True, random_state=random_state)
    U = unit_rows(Y, np.float64)
    dist = np.empty(nn.shape)
    for t in range(nn.shape[1]):  # one (n, N) gather at a time, not (n, k, N)
        dist[:, t] = 1.0 - np.einsum("ij,ij->i", U, U[np.maximum(nn[:, t], 0)])
    np.maximum(dist, 0.0, out=dist)
    order = np.argsort(dist, axis=1, kind="stable")
    nn, dist = np.take_along_axis(nn, order, axis=1), np.take_along_axis(dist, order, axis=1)
    G = fuzzy_graph(nn, dist, n)
    n_epochs = EPOCHS[0] if n <= 10000 else EPOCHS[1]
    Z = initial_coordinates(G, dim, random_state)
    head, tail, eps = sample_schedule(G, n_epochs)
    return layout(Z, head, tail, eps, n_epochs, CURVE_A, CURVE_B, int(random_state))


def embedding_partition(Y, n_clusters, random_state=0):
    """The embedding candidate's partition of the rows ``Y`` (module docs): labels (n,).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.embedding import embedding_partition
    >>> rng = np.random.default_rng(0)
    >>> Y = np.r_[rng.normal(0, 1, (40, 8)) + 4, rng.normal(0, 1, (40, 8)) - 4]
    >>> np.bincount(embedding_partition(Y, 2, 0)).tolist()
    [40, 40]
    """
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    Z = embed(Y, random_state)
    # one thread: on (n, 10) coordinates OpenMP's threads cost more than they share (2.4 s
    # against 0.04 s of processor time for 1440 rows on a loaded 2-core machine)
    with threadpool_limits(1):
        km = KMeans(int(n_clusters), n_init=10, random_state=int(random_state))
        lab = km.fit_predict(Z)
    return np.asarray(lab, dtype=np.int64)


def partition_cut(W, labels):
    """The discrete normalised cut ``sum_c cut(c) / vol(c)`` of ``labels`` on the graph ``W``.

    Examples
    --------
    >>> import numpy as np
    >>> from scipy import sparse
    >>> from ntnumba.partition.embedding import partition_cut
    >>> W = sparse.csr_matrix(np.array([[0, 1, 0.1], [1, 0, 0], [0.1, 0, 0.0]]))
    >>> round(partition_cut(W, np.array([0, 0, 1])), 6)   # 0.1/2.1 + 0.1/0.1
    1.047619
    """
    labels = np.asarray(labels)
    _, inv = np.unique(labels, return_inverse=True)
    n = labels.size
    H = sparse.csr_matrix((np.ones(n), (np.arange(n), inv)))
    deg = np.asarray(W.sum(axis=1)).ravel()
    vol = H.T @ deg
    within = np.asarray((H.T @ (W @ H)).diagonal()).ravel()
    return float(np.sum((vol - within) / np.where(vol > 0, vol, 1.0)))
