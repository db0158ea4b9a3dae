"""What the graph rule's similarity needs from the data, decided without labels.

The graph rule (:mod:`ntnumba._graph`) compares samples by the *angle* between them (centred,
shared directions removed; the limit of the normalised support-intersection similarity of
their random NT codes). Two kinds of data break that similarity, and both can be seen in the
data alone:

1. **Features on very different scales** (``representation="auto"``). When the largest
   feature standard deviation exceeds ``SCALE_RATIO`` (10) times the median one, the angle is
   decided by the largest feature(s) alone (scikit-learn's raw wine: proline's standard
   deviation is ~1000 times the median; the default clustered it at 40% CA, near the 33% of
   chance). The graph then compares the features multiplied by ``1 / std`` (scaled so that
   the total variance is kept), and the columns of the initial random map ``A`` get the same
   weights: ``A x`` is a random map of the standardised sample, for learning and for new
   samples alike. Images and other data of comparable feature scales (ratio 1.5-3.7 on every
   image set of the development suite) are left as they are.
2. **Few features** (at most ``FEW_FEATURES`` = 16). The angle between centred samples
   discards their distance from the centre, one of ``N`` degrees of freedom: negligible for
   images, decisive for 2-5 features (on 2-D blobs the angle groups samples into pie slices).
   The graph then compares the centred samples with one extra constant coordinate, as large
   as the median distance of a sample from the mean. The angle between ``(x, c)`` and
   ``(z, c)`` depends on ``x - z`` as well as on the angle, and tends to the Euclidean
   distance as ``c`` grows.

3. **Few features: a Euclidean graph** (the partition of rule 2's data). Where the constant
   coordinate applies, the partition itself is not taken from the angular graph but from
   the Euclidean one (:func:`euclidean_partition`): the symmetrised k-NN graph of the
   (weighted) samples by Euclidean distance, unit weights, ``k = EUCLIDEAN_FACTOR *
   n_neighbors`` (10 at the default, the ``n_neighbors`` default of scikit-learn's
   ``SpectralClustering``; not tuned), the leading eigenvectors of its normalised adjacency
   and k-means (10 restarts, seeded) on them. With the angular graph of rule 2 and k = 5 the
   partition of overlapping Gaussian clusters followed small, noisy k-NN components
   (standardised iris 72.7% CA against KMeans's 83.2). ``predict`` keeps the k-NN vote in the
   rows of rule 2 (centred, constant coordinate).

Both are functions of the reference set alone (:func:`graph_space`): the fit and ``predict``
recompute them from the same rows.

Measured on the development suite (``docs/dev_results.md``): raw wine 40 -> 94, raw
breast_cancer 60 -> 94, blobs scaled over five orders of magnitude 21 -> 100, iris 78 -> 91,
2-D blobs 64 -> 89 (CA %, one seed of the graph partition); unchanged on every image set
(the rules do not trigger there). The thresholds (10 and 16) were set once, on the synthetic
and scikit-learn tabular cases, and are not tuned per data set.

Rule 3, measured (``docs/dev_results.md``; CA / NMI %, the 8 development sets of at most 16
features, before -> after): iris raw 90.0 / 77.8 -> 90.7 / 80.6, standardised 72.7 / 51.5 ->
84.7 / 69.0, wine (raw and standardised, both standardised by rule 1) 93.8 / 80.7 ->
96.1 / 86.1, 2-D blobs 89.5 / 79.1 -> 94.0 / 86.6, unbalanced blobs 99.8 / 99.2 -> 100 / 100,
the other blobs 100 before and after. On the held-out check set, not used to choose it
(``docs/dev_check.md``, ``python -m ntnumba.reproduce --suite dev --set check``; its 10 sets
of 2-12 features: blobs of other sizes, dimensions, spreads and seeds, blobs through a random
linear map, two moons, two circles, make_classification, the first 6 features of wine; 5
seeds): at or above KMeans on CA and NMI on 8 of the 10 before, on all 10 after, at or above
the best peer on 5 before, 8 after (two circles 52.7 -> 100, 4-D blobs of spread 3
42.1 -> 86.7, two moons 86.5 -> 90.5 CA); it loses on blobs through a random linear map in
2-D (95.3 -> 84.7, KMeans 84.7), where the angular graph followed the elongated clusters.

Tried for few features and dropped (one seed, the same sets): k-means (Lloyd) started from
the angular graph's partition (iris standardised 85.3, wine 95.5, but two moons 86.5 -> 75.0,
elongated 2-D blobs 95.3 -> 84.7, make_classification 96.5 -> 93.5); keeping it only when its
normalised cut on a k = 5 or k = 20 graph is within 3x or 2x of the graph partition's (still
two moons 75.0 or elongated blobs 84.7; the cuts of the two partitions differ by less than 1%
on wine, a coin flip); the Euclidean graph with cluster_qr instead of k-means (wine 96.1,
iris standardised 82.0, unbalanced blobs 99.4) and with the self-tuning Gaussian weights of
Zelnik-Manor and Perona (local scale: the 7th neighbour; k = 10 and 15: iris standardised
83.3 / 81.3, wine 94.9 / 96.1).

Tried since for the Euclidean graph of rule 3, none adopted (5 seeds, CA / NMI %, the default
configuration with only :func:`euclidean_partition` changed; counts over the 8 development
sets of at most 16 features at or above KMeans / at or above the best peer, then over the 10
such sets of the check set, with the mean CA / NMI; peers as on the pages). Rule 3 as it is:
dev 7 / 5, mean 95.19 / 88.54 (iris raw 90.7 / 80.6 and standardised 84.7 / 69.0 below the
best peer, wine 96.1 / 86.1 below KMeans's 96.6 / 87.6); check 10 / 8, 94.39 / 83.84 (two
moons 90.5 / 63.1, elongated 2-D blobs 84.7 / 67.4). No variant raises a dev count, all but
the shared-neighbour weights lower one; the Gaussian weights help the check set (two moons
up to 100) and standardised iris, but lose wine and the 2-D blobs:

- mutual-rank weights (:func:`ntnumba._graph.mutual_rank_graph`, unit similarity, lists of
  4 k): dev 5 / 3, 86.59 / 79.46 (wine 61.8 / 51.5), check
  8 / 6, 93.24 / 84.49 (wine's first 6 features 85.4 -> 65.7); with k = 15: dev 6 / 5,
  94.81 / 87.51 (iris standardised 82.7 / 63.5 below KMeans), check 8 / 5; with the rows of
  the embedding normalised: dev 6 / 5, 94.41 / 86.76, check 8 / 6 (wine 6 features 66.9);
- shared-neighbour weights ``(|N_L(i) & N_L(j)| + 1) / (L + 1)``: L = k, dev 7 / 5,
  94.63 / 87.18 (iris standardised 86.0 / 71.5, wine 93.3 / 79.5), check 10 / 7,
  95.18 / 85.50; L = 4 k, dev 7 / 5, 94.94 / 87.85 (wine 94.9 / 83.3), check 10 / 8,
  94.72 / 84.67;
- Gaussian weights ``exp(-d^2 / (f sigma^2))``, ``sigma`` the median distance to the k-th
  neighbour: f = 1, dev 6 / 5, 94.95 / 88.10 (iris standardised 87.3 / 75.0, above every
  peer, but wine 94.4 / 82.0 and 2-D blobs 92.8 / 85.2, below KMeans's 93.8 / 85.4), check
  10 / 9, 95.95 / 88.60 (two moons 100 / 100, elongated 2-D blobs 88.0 / 71.6); f = 2, dev
  6 / 4, 94.95 / 88.02 (iris standardised 86.0 / 71.5, wine 94.9, 2-D blobs 93.1 / 85.5),
  check 10 / 9, 95.64 / 87.73; f = 4, dev 6 / 4, 95.06 / 88.26, check 10 / 7, 94.84 / 85.00;
  f = 1 with k = 15, dev 6 / 4, 94.62 / 87.18, check 9 / 8, 95.54 / 87.37; f = 2 with
  k = 15, dev 6 / 4, 94.49 / 87.09, check 9 / 6, 95.27 / 86.71; f = 1 with the rows of the
  embedding normalised, dev 6 / 4, 94.52 / 86.75 (wine 94.4, 2-D blobs 93.2 / 84.6), check
  9 / 7, 95.74 / 88.18 (two moons 100);
- the mutual k-NN graph (unit weights) joined with every sample's 3 nearest: dev 6 / 4,
  94.35 / 86.38 (wine 93.3, 2-D blobs 92.3 / 83.1), check 8 / 6, 95.08 / 87.08 (two moons
  98.0, wine 6 features 81.5); the k-NN graph joined with the mutual edges of the 2 k graph:
  dev 6 / 5, 94.77 / 87.39 (iris standardised 82.1 / 62.6), check 10 / 7, 95.48 / 87.18;
- C + 1 eigenvectors: dev 6 / 5, 91.33 / 87.91 (iris standardised 54.7 / 65.2), check 8 / 6,
  90.59 / 82.46 (elongated 2-D blobs 52.0); the rows of the embedding normalised (Ng, Jordan
  and Weiss): dev 5 / 4, 94.65 / 87.07 (unbalanced blobs 99.4, iris standardised 82.7),
  check 10 / 8, 94.61 / 84.44; both: dev 5 / 4, 91.43 / 85.86 (wine 96.5 / 87.6, nearly
  KMeans's, but unbalanced blobs 71.9), check 8 / 6, 90.92 / 81.60;
- k = 15 (unit weights): dev 6 / 4, 94.62 / 86.55 (iris standardised 83.3 / 66.3, wine
  94.9), check 9 / 6, 94.11 / 83.06.

Data of many features where the default stays below KMeans (Isolet, the MNIST subset): the
partition of the angular graph with k-means instead of cluster_qr (Isolet 59.5, MNIST 52.0;
on unit-norm embedding rows 61.8 and 52.8, Yale B 95.0 -> 91.6), the constant coordinate for
every data set (Isolet 59.9, USPS 80.5 -> 69.8) and k-means started from the graph partition
(Isolet 62.6, COIL-20 83.9 -> 71.2, Yale B 95.0 -> 12.5) do not close the gap; a larger graph
(k = 15: Isolet 62.4, MNIST 60.1, Isolet 20 per class 68.3 CA) does there but loses on the
face and object sets (k = 10 on this suite: ORL 83.2 -> 80.5, Yale B unbalanced 64.6 -> 54.9;
k = 10 and 15 on the paper's sets: ``docs/results.md``, item 2), and none of the label-free
choices of k tried (below) picks it on those sets only.

A label-free choice of the graph size ``k`` was tried (the relaxed normalised cut, the
eigengap and the ratio of the (C+1)-th Laplacian eigenvalue to the mean cut over k in
(5, 10, 15); the partition most in agreement with the others): none was better than k = 5 by
more than 0.5 CA points on average over 21 data sets, so ``n_neighbors`` stays 5.

Since then the angular graph's edges carry mutual-rank weights (:mod:`ntnumba._graph`, step
2, with the variants tried instead: multi-scale graphs of sizes (k, 2k, 4k) and others,
re-ranking, shared-neighbour weights): the MNIST subset rises above KMeans (52.3 / 55.7 ->
60.4 / 64.5); Isolet and Isolet 20 per class stay below KMeans's CA. The same mutual-rank
weights on the Euclidean graph of rule 3 (unit similarities, ranks over 4 x its k = 10
nearest, scale k or k / 2) were tried on its 8 development sets (one seed) and dropped: wine
(raw and standardised) 96.1 -> 61.8 and 67.4 CA, 2-D blobs 94.0 -> 93.3 and 92.2, standardised
iris 84.7 -> 85.3 and 57.3; at or above KMeans on 7 -> 5 and 4 of the 8.
"""
import numpy as np

#: ratio of the largest to the median feature standard deviation above which the graph
#: standardises the features
SCALE_RATIO = 10.0
#: at most this many features: the graph's similarity gets the constant coordinate
FEW_FEATURES = 16
#: the Euclidean graph of few-feature data takes this many times ``n_neighbors`` neighbours
#: (10 at the default ``n_neighbors=5``: scikit-learn's ``SpectralClustering`` default)
EUCLIDEAN_FACTOR = 2
REPRESENTATIONS = ("auto", "as-is")


def feature_weights(X, *, ratio=SCALE_RATIO):
    """Per-feature weights that standardise ``X``, or None when its scales are comparable.

    Parameters
    ----------
    X : array-like of shape (n, N)
    ratio : float, default 10
        Standardise when ``max(std) > ratio * median(std)`` over the non-constant features.

    Returns
    -------
    None or ndarray of shape (N,)
        ``w_j = s / std_j`` (0 for constant features) with ``s`` keeping the total variance:
        ``sum_j var(w_j x_j) = sum_j var(x_j)``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._select import feature_weights
    >>> X = np.random.default_rng(0).standard_normal((50, 3)) * [1.0, 1.0, 1000.0]
    >>> w = feature_weights(X)
    >>> np.round((X * w).std(axis=0) / (X * w).std(axis=0)[0], 6).tolist()
    [1.0, 1.0, 1.0]
    >>> feature_weights(X[:, :2]) is None
    True
    """
    X = np.asarray(X, dtype=np.float64)
    sd = X.std(axis=0)
    top = float(sd.max()) if sd.size else 0.0
    live = sd > 1e-12 * top
    if top == 0.0 or sd[live].max() <= ratio * np.median(sd[live]):
        return None
    w = np.zeros_like(sd)
    w[live] = 1.0 / sd[live]
    w *= np.sqrt(np.sum(sd ** 2) / np.count_nonzero(live))
    return w


def weighted_map(X, A, representation="auto"):
    """The initial map with its columns weighted by :func:`feature_weights` (else ``A``)."""
    if representation != "auto" or A is None:
        return A
    w = feature_weights(X)
    if w is None:
        return A
    return np.ascontiguousarray(A * w[None, :].astype(A.dtype))


def constant_coordinate(X, *, few=FEW_FEATURES):
    """The constant coordinate of the few-features rule (module docs), or None for more
    features: the median distance of a row of ``X`` from the rows' mean.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._select import constant_coordinate
    >>> constant_coordinate(np.array([[0.0, 0.0], [2.0, 0.0], [4.0, 0.0]]))
    2.0
    >>> constant_coordinate(np.zeros((3, 20))) is None
    True
    """
    X = np.asarray(X, dtype=np.float64)
    if X.shape[1] > few:
        return None
    return float(np.median(np.linalg.norm(X - X.mean(axis=0), axis=1)))


def graph_space(X, representation="auto"):
    """The representation rules for the rows ``X`` (the scaled reference set).

    Returns ``(weights, offset, applied)``: the feature weights (None: none), the constant
    coordinate (None: none) of :func:`ntnumba._graph.graph_rows`, and the names of the rules
    applied. ``representation="as-is"``: neither.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._select import graph_space
    >>> X = np.random.default_rng(0).standard_normal((50, 3)) * [1.0, 1.0, 1000.0]
    >>> w, c, applied = graph_space(X)
    >>> applied
    ['standardised', 'constant coordinate']
    """
    if representation != "auto":
        return None, None, []
    w = feature_weights(X)
    Xw = np.asarray(X, dtype=np.float64) if w is None else np.asarray(X, dtype=np.float64) * w
    c = constant_coordinate(Xw)
    applied = (["standardised"] if w is not None else []) + \
        (["constant coordinate"] if c is not None else [])
    return w, c, applied


def partition(X, n_clusters, p, random_state, verbose=0):
    """The graph partition of ``init="graph"`` with the representation rules (module docs).

    ``X``: the (scaled) data; ``p``: the driver's parameters (``n_neighbors``, ``n_shared``,
    ``representation``). Returns what :func:`ntnumba._graph.graph_partition` returns;
    ``info["representation"]`` records the rules applied.
    """
    from ._graph import graph_partition

    w, offset, applied = graph_space(X, getattr(p, "representation", "as-is"))
    Xw = X if w is None else np.asarray(X, dtype=np.float64) * w
    if offset is not None:  # few features: the Euclidean graph (module docs, rule 3)
        labels, info = euclidean_partition(Xw, n_clusters, EUCLIDEAN_FACTOR * p.n_neighbors,
                                           random_state, offset=offset, verbose=verbose)
        applied = applied + ["euclidean graph"]
    else:
        labels, info = graph_partition(Xw, n_clusters, n_neighbors=p.n_neighbors,
                                       n_shared=p.n_shared, random_state=random_state,
                                       verbose=verbose, offset=offset)
    info["representation"] = applied
    return labels, info


def euclidean_graph(X, n_neighbors):
    """The symmetrised Euclidean k-NN graph of the (distinct) rows of ``X``, unit weights.

    ``K_ij = 1`` when row ``j`` is one of the ``n_neighbors`` (at most ``n - 1``) nearest rows
    to row ``i`` by Euclidean distance (itself excluded); returns ``W = (K + K^T) / 2`` (CSR).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._select import euclidean_graph
    >>> euclidean_graph(np.array([[0.0], [1.0], [5.0]]), 1).toarray().tolist()
    [[0.0, 1.0, 0.0], [1.0, 0.0, 0.5], [0.0, 0.5, 0.0]]
    """
    from sklearn.neighbors import NearestNeighbors

    from ._graph import knn_graph

    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    k = int(min(max(1, n_neighbors), n - 1))
    nn = NearestNeighbors(n_neighbors=k + 1).fit(X).kneighbors(X, return_distance=False)
    # the row itself is among its k + 1 nearest (distinct rows): drop it, keep k others
    order = np.argsort(nn == np.arange(n)[:, None], axis=1, kind="stable")
    nn = np.take_along_axis(nn, order, axis=1)[:, :k]
    return knn_graph(nn, np.ones(nn.shape), n)


def euclidean_partition(X, n_clusters, n_neighbors, random_state, *, offset=None, verbose=0):
    """Spectral clustering of the Euclidean k-NN graph of the rows of ``X`` (module docs).

    The symmetrised graph of the ``n_neighbors`` nearest rows by Euclidean distance, every
    edge of weight 1 (``W = (K + K^T) / 2``; equal rows are one node); the ``n_clusters``
    leading eigenvectors of ``D^-1/2 W D^-1/2`` (:func:`ntnumba._graph.spectral_embedding`)
    and k-means (10 restarts, seeded by ``random_state``) on the rows of that embedding.

    Returns ``(labels, info)`` as :func:`ntnumba._graph.graph_partition` (no shared direction
    removed: ``info["n_shared"] = 0``; ``info["ncut"]`` the relaxed cut of this graph), with
    ``info["mean"]``, ``info["V"]`` describing the rows of the k-NN vote of ``predict``
    (:func:`ntnumba._graph.graph_rows` with the constant coordinate ``offset``).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._select import euclidean_partition
    >>> rng = np.random.default_rng(0)
    >>> X = np.r_[rng.normal(0.0, 1.0, (30, 2)), rng.normal(8.0, 1.0, (30, 2))]
    >>> labels, info = euclidean_partition(X, 2, 10, 0)
    >>> sorted(np.bincount(labels).tolist())
    [30, 30]
    """
    from sklearn.cluster import KMeans

    from ._graph import _Progress, _relabel, distinct_rows, shared_directions, spectral_embedding

    X = np.asarray(X, dtype=np.float64)
    C = int(n_clusters)
    say = _Progress(verbose)
    first, inverse = distinct_rows(X)
    Xd = X[first]
    nd = Xd.shape[0]
    mean, V = shared_directions(Xd, 0)
    info = {"n_shared": 0, "mean": mean, "V": V, "n_distinct": nd, "copies": 1,
            "offset": offset}
    if nd <= C:
        info["ncut"] = {0: 0.0}
        return _relabel(np.arange(nd, dtype=np.int64)[inverse], C), info
    say(f"{X.shape[0]} samples ({nd} distinct), {X.shape[1]} features: Euclidean k-NN "
        f"graph, k = {min(n_neighbors, nd - 1)}")
    W = euclidean_graph(Xd, n_neighbors)
    seed = random_state if isinstance(random_state, (int, np.integer)) else \
        np.random.RandomState(random_state).randint(np.iinfo(np.int32).max)
    _, maps, cut = spectral_embedding(W, C, random_state=int(seed))
    info["ncut"] = {0: cut}
    say(f"eigensolver, cut {cut:.6f}; k-means on the embedding")
    lab = KMeans(C, n_init=10, random_state=int(seed)).fit_predict(maps)
    return _relabel(np.asarray(lab, dtype=np.int64)[inverse], C), info
