"""Graph assignment: spectral clustering of the NT support-intersection similarity.

The paper's Stage-1 score compares a representation with the parameters ``tau, nu`` through
the similarity on the support intersection, ``rho(y, z) = ||y- * z-||_1 + ||y+ * z+||_1``. The
``assign="graph"`` rule of :class:`~ntnumba.NTClustering` applies the same measure between the
samples themselves and clusters the resulting graph (see ``docs/results.md`` for why: the
centroid-type Stage-1/Stage-2 alternation clusters at k-means level on the paper's data sets).

Pipeline, on the linear maps ``Q = X A^T`` (rows are samples):

1. **Shared component.** ``Q`` is centred and its ``r`` leading principal directions are
   projected out. They are the directions shared by all clusters (on Extended Yale B the
   illumination, whose first three principal components carry 67% of the variance); in the
   NT model this is what the similarity parameters ``nu`` absorb, a component common to every
   cluster that must not drive the assignment. ``r`` is chosen without labels, see 5.
2. **NT representation.** ``y = sign(q) max(|q| - lambda1, 0)``, the Stage-1 candidate without
   the ``lambda0`` terms (the ratio term moves ``y`` by ~1e-4 relative in the paper's regime).
3. **Similarity.** ``S_ij = rho(y_i, y_j) / sqrt(rho(y_i, y_i) rho(y_j, y_j))`` in [0, 1]
   (two matrix products of the positive and negative parts).
4. **Graph and partition.** Symmetrised k-nearest-neighbour graph with weights ``S_ij``
   (``W = (K + K^T) / 2``), the ``C`` leading eigenvectors of the normalised adjacency
   ``D^-1/2 W D^-1/2`` and a partition by column-pivoted QR (``cluster_qr``, Damle et al.
   2019; deterministic, no k-means restarts).
5. **Choice of r without labels.** For every candidate ``r`` the relaxed C-way normalised cut
   ``ncut = C - sum of the C largest eigenvalues of D^-1/2 W D^-1/2`` (the value spectral
   clustering minimises) is computed; the ``r`` with the smallest cut, i.e. the representation
   whose graph is closest to ``C`` disconnected groups, is kept. Ties (cuts within 1e-6, e.g.
   graphs that fall apart into C or more components) go to the larger (C+1)-th eigenvalue of
   the Laplacian ``I - D^-1/2 W D^-1/2``: exactly C groups rather than more. At most a quarter
   of the rank of the centred data is removed (removing directions makes any k-NN graph look
   more clustered; without the cap the cut chose ``r = N - 1`` on blobs of N = 3..6 features).

Limits: rho normalised depends on the angle between samples, not on their norms; that suits
high-dimensional data (images: the paper's data sets) and not data of very few features (on
2-D blobs the graph rule clusters worse than KMeans; use ``assign="objective"`` there).

Cost: dense ``n x n`` similarities (``O(n^2 M)`` per candidate ``r``): meant for the paper's
data-set sizes (up to a few thousand samples). Larger problems need an approximate k-NN search.
"""
import numpy as np
from scipy import sparse
from scipy.linalg import qr, svd
from scipy.sparse.linalg import eigsh

#: candidate numbers of shared principal directions tried by default
DEFAULT_SHARED = (0, 1, 2, 4, 8, 16)
#: cuts closer than this are ties, broken by the larger (C+1)-th Laplacian eigenvalue
_TIE = 1e-6


_ROWS = 512  # rows per block of the n x M updates (remove_shared)


def shared_directions(Q, r, *, labels=None, random_state=None, return_sv=False):
    """Mean and the ``r`` leading principal directions of the rows of ``Q``.

    Returns ``(mean, V)`` with ``mean`` of shape (M,) and ``V`` of shape (r, M), orthonormal rows
    (``V`` is empty for ``r = 0``). With ``labels``: the leading directions of the
    within-cluster scatter (``Q`` minus its cluster means), the variation shared *inside* the
    clusters; used once a partition exists (the learned A contracts the clusters, after which
    the leading directions of the total scatter separate clusters instead). Exact thin SVD when
    ``min(Q.shape)`` is small, otherwise a randomised SVD (seeded by ``random_state``).
    With ``return_sv`` also the ``r`` singular values of the centred (scatter) matrix.
    """
    Q = np.asarray(Q, dtype=np.float64)
    mean = Q.mean(axis=0)
    M = Q.shape[1]
    r = int(min(r, max(min(Q.shape) - 1, 0)))
    if r <= 0:
        return (mean, np.zeros((0, M))) + ((np.zeros(0),) if return_sv else ())
    Qc = Q - mean
    if labels is not None:
        labels = np.asarray(labels)
        for c in np.unique(labels):
            m = labels == c
            Qc[m] -= Qc[m].mean(axis=0)
    if min(Qc.shape) <= 600:
        _, sv, Vt = np.linalg.svd(Qc, full_matrices=False)
    else:
        from sklearn.utils.extmath import randomized_svd
        _, sv, Vt = randomized_svd(Qc, r, n_iter=7, random_state=random_state)
    out = (mean, np.ascontiguousarray(Vt[:r]))
    return out + (sv[:r],) if return_sv else out


def remove_shared(Q, mean, V):
    """``(Q - mean)`` with its components along the rows of ``V`` removed (float64).

    One n x M result; the projection is subtracted in blocks of rows (no second n x M array).
    """
    Qc = np.asarray(Q, dtype=np.float64) - mean
    if V.shape[0]:
        P = Qc @ V.T
        for start in range(0, Qc.shape[0], _ROWS):
            Qc[start:start + _ROWS] -= P[start:start + _ROWS] @ V
    return Qc


def soft_threshold(Q, lambda1, *, overwrite=False):
    """The NT representation without the ``lambda0`` terms: ``sign(q) max(|q| - lambda1, 0)``.

    ``overwrite``: compute in ``Q`` (a float array the caller no longer needs) instead of a new
    array.
    """
    Q = np.asarray(Q)
    if not np.issubdtype(Q.dtype, np.floating):
        Q, overwrite = Q.astype(np.float64), True
    negative = Q < 0
    out = np.abs(Q, out=Q if overwrite else None)
    out -= lambda1
    np.maximum(out, 0.0, out=out)
    np.negative(out, out=out, where=negative)
    return out


def nt_similarity(Y, Z=None):
    """Normalised support-intersection similarity between the rows of ``Y`` (and ``Z``).

    ``S_ij = rho(y_i, z_j) / sqrt(rho(y_i, y_i) rho(z_j, z_j))`` with
    ``rho(y, z) = ||y- * z-||_1 + ||y+ * z+||_1`` (the paper's measure); ``S`` is in [0, 1],
    and 0 for an all-zero row.
    """
    Y = np.asarray(Y, dtype=np.float64)
    Z = Y if Z is None else np.asarray(Z, dtype=np.float64)
    # the positive parts, then the negative parts: one sign part of each at a time
    def part(A, negative):
        if not negative:
            return np.maximum(A, 0.0)
        out = np.negative(A)
        return np.maximum(out, 0.0, out=out)

    R = None
    for negative in (False, True):
        Yh = part(Y, negative)
        Zh = Yh if Z is Y else part(Z, negative)
        if R is None:
            R = Yh @ Zh.T
        else:
            R += Yh @ Zh.T
        Yh = Zh = None
    dy = np.einsum("ij,ij->i", Y, Y)   # rho(y, y) = ||y||^2
    dz = dy if Z is Y else np.einsum("ij,ij->i", Z, Z)
    with np.errstate(divide="ignore"):
        sy = np.where(dy > 0, 1.0 / np.sqrt(dy), 0.0)
        sz = np.where(dz > 0, 1.0 / np.sqrt(dz), 0.0)
    R *= sy[:, None]
    R *= sz[None, :]
    np.clip(R, 0.0, 1.0, out=R)
    return R


def knn_affinity(S, n_neighbors, *, overwrite=False):
    """Symmetrised k-NN graph of a similarity matrix: ``W = (K + K^T) / 2`` (CSR, float64).

    ``K_ij = S_ij`` if ``j`` is one of the ``n_neighbors`` most similar samples to ``i``
    (``i`` itself excluded), else 0. ``overwrite``: ``S`` (float64) may be used as scratch.
    """
    S = np.asarray(S, dtype=np.float64)
    n = S.shape[0]
    k = int(min(n_neighbors, n - 1))
    if k < 1:
        return sparse.csr_matrix((n, n))
    D = np.negative(S, out=S if overwrite else None)  # distances: the k smallest are wanted
    S = None
    np.fill_diagonal(D, np.inf)
    idx = np.argpartition(D, k - 1, axis=1)[:, :k]
    rows = np.repeat(np.arange(n), k)
    cols = idx.ravel()
    vals = np.maximum(-D[rows, cols], 0.0)
    K = sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))
    W = (K + K.T) * 0.5
    W.eliminate_zeros()
    return W.tocsr()


def spectral_embedding(W, n_clusters, *, random_state=None):
    """Leading eigenpairs of the normalised adjacency ``D^-1/2 W D^-1/2``.

    Returns ``(values, maps, ncut)``: the ``n_clusters + 1`` largest eigenvalues (descending;
    ``n_clusters`` when the graph is that small), the eigenvectors of the first ``n_clusters``
    scaled by ``D^-1/2`` (rows are samples) and the relaxed normalised cut
    ``n_clusters - sum(values[:n_clusters])``. Isolated samples get a self-loop so that ``D`` is
    invertible.
    """
    n = W.shape[0]
    C = int(n_clusters)
    k = min(C + 1, n)
    d = np.asarray(W.sum(axis=1)).ravel()
    W = W + sparse.diags((d <= 0).astype(np.float64))
    d = np.maximum(d, 0.0) + (d <= 0)
    dm = 1.0 / np.sqrt(d)
    Nrm = sparse.diags(dm) @ W @ sparse.diags(dm)
    if k >= n - 1 or n <= 200:
        vals, vecs = np.linalg.eigh(Nrm.toarray())
        vals, vecs = vals[::-1][:k], vecs[:, ::-1][:, :k]
    else:
        rng = np.random.RandomState(random_state) if not isinstance(
            random_state, np.random.RandomState) else random_state
        v0 = rng.uniform(-1.0, 1.0, n)
        # shift-invert just below 0 on the Laplacian L = I - Nrm, as scikit-learn's
        # spectral_embedding: well separated even when many eigenvalues are ~0 (a k-NN graph
        # with several connected components), where plain "LA" on Nrm misses some
        L = (sparse.identity(n) - Nrm).tocsc()
        vals, vecs = eigsh(L, k=k, sigma=-1e-5, which="LM", v0=v0, tol=0.0)
        vals = 1.0 - vals
        order = np.argsort(vals)[::-1]
        vals, vecs = vals[order], vecs[:, order]
    maps = vecs[:, :C] * dm[:, None]
    return vals, maps, float(C - np.sum(vals[:C]))


def cluster_qr(maps):
    """Partition from a spectral embedding by column-pivoted QR (Damle, Minden & Ying 2019)."""
    C = maps.shape[1]
    _, _, piv = qr(maps.T, pivoting=True)
    ut, _, v = svd(maps[piv[:C], :].T)
    return np.abs(maps @ (ut @ v.conj())).argmax(axis=1).astype(np.int64)


def _relabel(labels, n_clusters):
    """Consecutive labels ``0..C-1`` in order of first appearance of each used cluster."""
    _, first = np.unique(labels, return_index=True)
    order = labels[np.sort(first)]
    mapping = np.full(max(int(labels.max()) + 1, n_clusters), -1, dtype=np.int64)
    mapping[order] = np.arange(order.size)
    return mapping[labels]


def graph_partition(Q, n_clusters, *, lambda1=0.03, n_neighbors=5, n_shared=DEFAULT_SHARED,
                    random_state=None, return_all=False):
    """Cluster the rows of ``Q`` on the k-NN graph of their NT similarity (module docs).

    Parameters
    ----------
    Q : array-like of shape (n, M)
        Linear maps of the samples.
    n_clusters : int
    lambda1 : float, default 0.03
        Threshold of the NT representation.
    n_neighbors : int, default 5
        ``k`` of the k-NN graph.
    n_shared : int or sequence of int, default (0, 1, 2, 4, 8, 16)
        Number ``r`` of shared principal directions removed; a sequence: candidates, the one
        with the smallest relaxed normalised cut is used. Capped at a quarter of the rank of
        the centred ``Q`` (on data of few features no or few directions are removed).
    random_state : int, RandomState or None
        Seed of the randomised SVD and of the eigen-solver's start vector.
    return_all : bool, default False
        Also return the partition of every candidate ``r`` (``info["labels"]``, for ablations).

    Returns
    -------
    labels : ndarray of shape (n,), int64, values in ``0..n_clusters-1``
    info : dict
        ``"n_shared"`` (the chosen r), ``"ncut"`` ({r: cut}), ``"mean"`` (M,), ``"V"`` (r, M).
    """
    Q = np.asarray(Q, dtype=np.float64)
    n = Q.shape[0]
    C = int(n_clusters)
    cands = [int(n_shared)] if np.isscalar(n_shared) else sorted({int(r) for r in n_shared})
    if n <= C:
        labels = np.arange(n, dtype=np.int64) % max(C, 1)
        mean, V = shared_directions(Q, 0)
        return labels, {"n_shared": 0, "ncut": {0: 0.0}, "mean": mean, "V": V}
    if isinstance(random_state, (int, np.integer)):
        seed = int(random_state)
    else:
        from sklearn.utils import check_random_state
        seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max))
    # remove at most a quarter of the directions the centred data span (their rank, at most
    # min(n - 1, N)): removing directions makes any k-NN graph look more clustered, and on data
    # of few features (low-dimensional blobs) the cut then prefers removing almost everything;
    # the leading 4 r_max + 1 directions give the rank when it is that small
    full = min(Q.shape[0] - 1, Q.shape[1])
    r_req = min(4 * max(cands) + 1, full)
    mean, Vall, sv = shared_directions(Q, r_req, random_state=seed, return_sv=True)
    rank = int(np.sum(sv > 1e-8 * sv[0])) if sv.size and sv[0] > 0 else 0
    if rank == Vall.shape[0]:
        rank = full  # at least r_req directions: the cap does not bind
    cands = sorted({min(r, rank // 4) for r in cands})
    best = None
    cuts = {}
    all_labels = {}
    for r in cands:
        V = Vall[:r]
        Y = soft_threshold(remove_shared(Q, mean, V), lambda1, overwrite=True)
        W = knn_affinity(nt_similarity(Y), n_neighbors, overwrite=True)
        Y = None
        vals, maps, cut = spectral_embedding(W, C, random_state=seed)
        cuts[r] = cut
        # the (C+1)-th Laplacian eigenvalue: 0 when the graph has more than C components
        gap = 1.0 - vals[C] if vals.size > C else 0.0
        if return_all:
            all_labels[r] = _relabel(cluster_qr(maps), C)
        if best is None or cut < best[0] - _TIE or (abs(cut - best[0]) <= _TIE and
                                                    gap > best[1]):
            best = (cut, gap, r, V, maps)
    _, _, r, V, maps = best
    labels = _relabel(cluster_qr(maps), C)
    info = {"n_shared": r, "ncut": cuts, "mean": mean, "V": V}
    if return_all:
        info["labels"] = all_labels
    return labels, info


# ---------------------------------------------------------------------------------------------
# the graph rule inside the alternating algorithm and for new samples

def restricted_stage1(Q, tau, nu, labels, lambda0, lambda1, lambda_a):
    """Stage 1 with the cluster fixed: for sample i only the candidates ``(labels[i], c2)``.

    Returns ``(similarity_labels, Y, cost)``: the best ``c2`` by the full per-sample cost (the
    ``objective`` rule among the allowed pairs), its representation and its cost (float64).
    """
    from ._stage1 import assign

    Q = np.asarray(Q)
    n, M = Q.shape
    labels = np.asarray(labels, dtype=np.int64)
    sim = np.zeros(n, dtype=np.int64)
    Y = np.zeros((n, M), dtype=Q.dtype)
    cost = np.zeros(n)
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        _, s, Yc, _, det = assign(Q[idx], tau[c:c + 1], nu, lambda0, lambda1, rule="objective",
                                  lambda_a=lambda_a, return_details=True, prune=True)
        sim[idx] = s
        Y[idx] = Yc
        cost[idx] = det["cost"]
    return sim, Y, cost


def graph_stage1(Q, state, p, rng):
    """The ``assign="graph"`` Stage 1 of the driver.

    The clusters are the partition of :func:`graph_partition` (parameters ``p.lambda1``,
    ``p.n_neighbors``, ``p.n_shared``) of the NT representations of the first iterate; it is
    computed once (by ``init="graph"`` or at the first iteration) and then kept:
    re-partitioning after every A update is self-training, which drifts (measured in
    ``docs/results.md``). Every sample gets the NT representation and the similarity
    parameter of its cluster's candidates (:func:`restricted_stage1`), so that Stages 2 and 3
    learn ``tau``, ``nu`` and ``A`` for the graph's clusters.

    Returns ``(labels, similarity_labels, Y, details)`` with ``details["cost"]`` (per-sample
    cost) and ``details["graph"]`` (``{"n_shared": r, "graph_cut": cut}``).
    """
    if state.graph is not None and state.labels is not None:
        labels, graph = state.labels, state.graph
    else:
        seed = rng.randint(np.iinfo(np.int32).max)
        labels, info = graph_partition(Q, state.tau.shape[0], lambda1=p.lambda1,
                                       n_neighbors=p.n_neighbors, n_shared=p.n_shared,
                                       random_state=seed)
        graph = {"n_shared": info["n_shared"], "graph_cut": info["ncut"][info["n_shared"]],
                 "ncut": dict(info["ncut"])}
    sim, Y, cost = restricted_stage1(Q, state.tau, state.nu, labels, p.lambda0, p.lambda1,
                                     p.lambda_a)
    return labels, sim, Y, {"cost": cost, "graph": graph}


def graph_init_tau(Q, labels, nu, n_clusters, rng):
    """Initial taus from a partition: ``tau_c = mean of the q_i in c - mean(nu)``.

    An empty cluster gets a random sample's ``q`` (k-means++-style re-seeding is done by Stage 2
    later on).
    """
    Q = np.asarray(Q, dtype=np.float64)
    tau = np.empty((n_clusters, Q.shape[1]))
    for c in range(n_clusters):
        m = labels == c
        tau[c] = Q[m].mean(axis=0) if np.any(m) else Q[rng.randint(Q.shape[0])]
    return tau - np.asarray(nu, dtype=np.float64).mean(axis=0)


def knn_vote(Y_new, Y_ref, labels_ref, n_clusters, n_neighbors, *, exclude_self=False,
             exclude=None, return_votes=False):
    """Out-of-sample rule of the graph mode: similarity-weighted vote of the nearest references.

    For every row of ``Y_new`` the ``n_neighbors`` most similar rows of ``Y_ref``
    (:func:`nt_similarity`) vote for their label with weight ``S``. Returns ``(labels, score)``
    where ``score = 1 - mean similarity to those neighbours`` (0: identical to its neighbours,
    1: no support overlap with any training sample), the quantity the rejection option
    thresholds. ``exclude_self``: ``Y_new`` is ``Y_ref`` (training scores, leave-one-out).
    ``exclude``: None or an int array of shape ``(n_new,)``, a row of ``Y_ref`` that does not
    vote for that row of ``Y_new`` (-1: none); the leave-one-out vote of given training rows.
    ``return_votes``: also return the ``(n_new, n_clusters)`` vote shares (each neighbour's
    weight ``max(S, 0) + 1e-12`` summed per label, divided by the row's total).
    Processed in blocks of rows (memory ``O(block x n_ref)``).
    """
    n = Y_new.shape[0]
    n_ref = Y_ref.shape[0]
    if exclude_self:
        exclude = np.arange(n)
    k = int(max(1, min(n_neighbors, n_ref - (1 if exclude is not None else 0))))
    labels = np.empty(n, dtype=np.int64)
    score = np.empty(n)
    shares = np.empty((n, n_clusters)) if return_votes else None
    block = max(1, int(2 ** 22 // max(n_ref, 1)))
    for start in range(0, n, block):
        stop = min(n, start + block)
        whole = Y_new is Y_ref and start == 0 and stop == n  # one block of the same codes
        S = nt_similarity(Y_new[start:stop], None if whole else Y_ref)
        if exclude is not None:
            ex = np.asarray(exclude[start:stop], dtype=np.int64)
            rows = np.flatnonzero(ex >= 0)
            S[rows, ex[rows]] = -np.inf
        if k < n_ref:
            nn = np.argpartition(-S, k - 1, axis=1)[:, :k]
        else:
            nn = np.tile(np.arange(n_ref), (stop - start, 1))
        w = np.take_along_axis(S, nn, axis=1)
        w = np.maximum(w, 0.0)
        votes = np.zeros((stop - start, n_clusters))
        np.add.at(votes, (np.repeat(np.arange(stop - start), nn.shape[1]),
                          labels_ref[nn].ravel()), w.ravel() + 1e-12)
        labels[start:stop] = votes.argmax(axis=1)
        score[start:stop] = 1.0 - w.mean(axis=1)
        if return_votes:
            shares[start:stop] = votes / votes.sum(axis=1, keepdims=True)
    if return_votes:
        return labels, score, shares
    return labels, score
