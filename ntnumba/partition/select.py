"""What the graph rule's similarity needs from the data, decided without labels.

The graph rule (:mod:`ntnumba.partition.graph`) compares samples by the *angle* between them
(centred, shared directions removed). Two kinds of data break that, seen in the data alone:

1. **Features on very different scales** (``representation="auto"``). When the largest
   feature standard deviation exceeds ``SCALE_RATIO`` (10) times the median one, the angle is
   decided by the largest feature(s) alone (raw wine: 40% CA, chance 33%). The graph then
   compares the features multiplied by ``1 / std`` (scaled to keep the total variance), and
   the columns of the initial random map ``A`` get the same weights. Images (ratio 1.5-3.7
   on every image set of the development suite) are left as they are.
2. **Few features** (at most ``FEW_FEATURES`` = 16). The angle discards the distance from
   the centre, decisive for 2-5 features (on 2-D blobs: pie slices). The graph then compares
   the centred samples with one extra constant coordinate, the median distance of a sample
   from the mean. The thresholds (10 and 16) were set once, not tuned per data set
   (docs/research/representation-rules.md).
3. **Few features: a Euclidean graph**. Where the constant coordinate applies, the partition
   is that of the Euclidean k-NN graph (:func:`euclidean_partition`, ``k = EUCLIDEAN_FACTOR *
   n_neighbors``: 10, not tuned); on the angular graph at k = 5 overlapping clusters followed
   small noisy components (docs/research/few-features-euclidean-graph.md). ``predict`` votes
   in the rows of rule 2.
4. **More features: the rows or their leading principal directions**. The partition of the
   rows on their ``TRUNCATE_FACTOR * C`` leading principal directions
   (:func:`truncated_partition`) is kept when its relaxed cut is below ``1 - TRUNCATE_MARGIN``
   times the rows' (:func:`fewer_cut`): removing directions lowers a cut whatever it does to
   the clusters. The gain is COIL-20's alone, and fragile
   (docs/research/truncated-principal-directions.md). ``predict`` votes in the rows with the
   chosen partition's ``r`` directions removed.
5. **More features: the embedding candidate** (chosen by the cut). The rows of the kept
   partition (weights, centring, its ``r`` directions removed) are also laid out by
   :mod:`ntnumba.partition.embedding` (UMAP's objective) and split by k-means; that partition
   is kept when its discrete normalised cut on the default's own k-NN graph of the same rows
   is lower (:func:`embedding_choice`). It rescues documents (RELATHE 57 -> 83 CA) and left the
   other kinds unchanged (docs/research/embedding-partition.md, rule R1).
6. **A degenerate partition** (:func:`partition`): a cluster of fewer than ``max(SMALL_MIN,
   SMALL_SHARE * n / C)`` samples (outliers or a small separate component of the graph) makes
   way for the partition of ``C + 1`` (to ``C + RECOVER``) clusters merged to ``C``
   (:func:`merge_small`) with no cluster that small. Not by the cut: a separate component is a
   cluster of cut 0 (docs/research/degenerate-partitions.md).

Rules 1 and 2 are functions of the reference set alone (:func:`graph_space`): the fit and
``predict`` recompute them from the same rows. The graph size ``k`` (``n_neighbors``) is the
same for every data set (docs/research/graph-size-k.md).
"""
import numpy as np

#: the graph standardises features whose largest standard deviation exceeds this times the median
SCALE_RATIO = 10.0
#: at most this many features: the graph's similarity gets the constant coordinate
FEW_FEATURES = 16
#: the Euclidean graph of few features takes this many times ``n_neighbors`` neighbours (10)
EUCLIDEAN_FACTOR = 2
#: rule 4: the rows on their ``TRUNCATE_FACTOR * C`` leading principal directions (C clusters)
TRUNCATE_FACTOR = 4
#: ... partitioned instead of the rows themselves when its cut is lower by more than this share
TRUNCATE_MARGIN = 0.02
#: rule 6: the degenerate size ``max(SMALL_MIN, SMALL_SHARE n / C)``; up to ``C + RECOVER``
SMALL_SHARE, SMALL_MIN, RECOVER = 0.05, 3, 3
#: rules 4 and 5 are not computed when no cut can be lower (the default's partition has no
#: crossing edges): a cut below -PERFECT is rounding no eigensolver or edge sum reaches
PERFECT = 1e-9
REPRESENTATIONS = ("auto", "as-is")


def feature_weights(X, *, ratio=SCALE_RATIO):
    """Per-feature weights (N,) that standardise ``X`` (n, N) when ``max(std) > ratio *
    median(std)`` over its non-constant features, else None: ``w_j = s / std_j`` (0 for
    constant features), ``s`` keeping the total variance ``sum_j var(w_j x_j) = sum_j var(x_j)``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.select import feature_weights
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
    >>> from ntnumba.partition.select import constant_coordinate
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
    coordinate (None: none) of :func:`ntnumba.partition.graph.graph_rows`, and the names of the
    rules applied. ``representation="as-is"``: neither.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.select import graph_space
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
    """The graph partition of ``init="graph"`` by rules 1-6 (module docs) of the scaled data
    ``X``; ``p``: the driver's parameters (``n_neighbors``, ``n_shared``, ``representation``).
    Returns as :func:`ntnumba.partition.graph.graph_partition`, ``info["representation"]`` the
    rules applied."""
    from .graph import Progress

    labels, info = rules_partition(X, n_clusters, p, random_state, verbose)
    C = int(n_clusters)
    least = max(SMALL_MIN, SMALL_SHARE * labels.size / C)
    for extra in range(1, RECOVER + 1 if C * least <= labels.size else 1):  # else none can
        small = int(np.bincount(labels, minlength=C).min())
        if small >= least:
            break
        lab, inf = rules_partition(X, C + extra, p, random_state, verbose)
        lab = merge_small(X, lab, inf, C, p)
        if np.bincount(lab, minlength=C).min() >= least:
            inf["representation"] += [f"{C + extra} clusters merged (one of {small} samples)"]
            Progress(verbose)(f"degenerate partition: {inf['representation'][-1]}")
            return lab, inf
    return labels, info


def merge_small(X, labels, info, n_clusters, p):
    """``labels`` with the samples outside its ``n_clusters`` largest clusters given to those by
    ``predict``'s k-NN vote (:func:`ntnumba.partition.graph.knn_vote`) in its graph's rows."""
    from .graph import compact_labels, graph_rows, knn_vote

    sizes = np.bincount(labels)
    out = ~np.isin(labels, np.argsort(-sizes, kind="stable")[:n_clusters])
    Y = graph_rows(X, info["mean"], info["V"], info.get("offset"),
                   graph_space(X, getattr(p, "representation", "as-is"))[0])
    labels = labels.copy()
    labels[out] = knn_vote(Y[out], Y[~out], labels[~out], sizes.size, p.n_neighbors)[0]
    return compact_labels(labels, n_clusters)


def rules_partition(X, n_clusters, p, random_state, verbose=0):
    """:func:`partition` by rules 1-5 alone (module docs)."""
    from .graph import Progress, graph_partition

    representation = getattr(p, "representation", "as-is")
    w, offset, applied = graph_space(X, representation)
    Xw = X if w is None else np.asarray(X, dtype=np.float64) * w
    if offset is not None:  # few features: the Euclidean graph (module docs, rule 3)
        labels, info = euclidean_partition(Xw, n_clusters, EUCLIDEAN_FACTOR * p.n_neighbors,
                                           random_state, offset=offset, verbose=verbose)
        applied = applied + ["euclidean graph"]
    else:
        labels, info = graph_partition(Xw, n_clusters, n_neighbors=p.n_neighbors,
                                       n_shared=p.n_shared, random_state=random_state,
                                       verbose=verbose, offset=offset)
        if representation == "auto":  # module docs, rule 4
            can = fewer_cut({"n_shared": 0, "ncut": {0: -PERFECT}}, info)
            alt = truncated_partition(Xw, n_clusters, p, random_state, verbose) if can else None
            if not can:
                Progress(verbose)("principal directions not kept, not computed: cut 0")
            if alt is not None:
                better = fewer_cut(alt[1], info)
                Progress(verbose)(f"rows on {alt[1]['truncated']} principal directions: cut "
                                  f"{chosen_cut(alt[1]):.6f} against {chosen_cut(info):.6f}: "
                                  + ("kept" if better else "not kept"))
                if better:
                    labels, info = alt
                    applied = applied + [f"{info['truncated']} principal directions"]
            labels, kept = embedding_choice(Xw, labels, info, n_clusters, p, random_state,
                                            verbose)
            applied = applied + (["embedding"] if kept else [])
    info["representation"] = applied
    return labels, info


def embedding_choice(X, labels, info, n_clusters, p, random_state, verbose=0):
    """Rule 5 (module docs): the embedding candidate's partition of the rows the graph
    compared (:func:`ntnumba.partition.embedding.embedding_partition`), kept when its
    discrete normalised cut on the default's own k-NN graph of those rows is lower than that
    of ``labels``. Equal rows count once, as in the graph. Returns ``(labels, kept)``."""
    from .embedding import embedding_partition, partition_cut
    from .graph import (Progress, compact_labels, distinct_rows, graph_rows, neighbour_lists,
                        weighted_graph)

    Y = graph_rows(X, info["mean"], info["V"])
    first, inverse = distinct_rows(Y)
    Y = Y[first]
    if Y.shape[0] <= 2 * n_clusters:
        return labels, False
    k = p.n_neighbors
    nn, sim, copies = neighbour_lists(Y, k, None, "mutual-rank", "auto", random_state)
    W = weighted_graph(nn, sim, k * copies, Y.shape[0], "mutual-rank")
    cut = partition_cut(W, labels[first])
    if cut <= PERFECT:  # no crossing edges: no partition has a lower cut
        Progress(verbose)("embedding candidate not kept, not computed: cut 0")
        return labels, False
    emb = embedding_partition(Y, n_clusters, random_state)
    cut_emb = partition_cut(W, emb)
    kept = cut_emb < cut
    Progress(verbose)(f"embedding candidate: cut {cut_emb:.6f} against {cut:.6f}: "
                      + ("kept" if kept else "not kept"))
    return (compact_labels(emb[inverse], n_clusters), True) if kept else (labels, False)


def chosen_cut(info):
    """The relaxed normalised cut of the partition a graph partition's ``info`` describes."""
    return info["ncut"][info["n_shared"]]


def fewer_cut(alt, info, margin=TRUNCATE_MARGIN):
    """Whether the partition ``alt`` (an ``info``) has the smaller cut than ``info`` by more
    than the share ``margin`` of it (and by more than the graph's tie tolerance).

    Examples
    --------
    >>> from ntnumba.partition.select import fewer_cut
    >>> fewer_cut({"n_shared": 0, "ncut": {0: 0.97}}, {"n_shared": 2, "ncut": {2: 1.0}})
    True
    >>> fewer_cut({"n_shared": 0, "ncut": {0: 0.99}}, {"n_shared": 2, "ncut": {2: 1.0}})
    False
    """
    from .graph import TIE

    return chosen_cut(alt) < (1.0 - margin) * chosen_cut(info) - TIE


def truncated_partition(X, n_clusters, p, random_state, verbose=0):
    """The graph partition of the rows ``X`` on their ``TRUNCATE_FACTOR * n_clusters`` leading
    principal directions (module docs, rule 4), or None when ``X`` spans no more directions.

    Returns ``(labels, info)`` as :func:`ntnumba.partition.graph.graph_partition`, ``info["mean"]``
    and ``info["V"]`` (the ``r`` directions removed) in the features of ``X``,
    ``info["truncated"]`` the number of directions kept. Equal rows count once, as in the graph.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> from ntnumba.partition.select import truncated_partition
    >>> rng = np.random.default_rng(0)
    >>> X = np.repeat(3.0 * rng.standard_normal((2, 40)), 30, axis=0)
    >>> X += 0.3 * rng.standard_normal(X.shape)
    >>> p = SimpleNamespace(n_neighbors=5, n_shared=(0, 1, 2))
    >>> labels, info = truncated_partition(X, 2, p, 0)
    >>> info["truncated"], np.bincount(labels).tolist(), info["V"].shape[1]
    (8, [30, 30], 40)
    """
    from .graph import distinct_rows, graph_partition, principal_coordinates

    X = np.asarray(X, dtype=np.float64)
    # equal rows count once, as in the partition of the rows (one node of its graph): the
    # directions and the size test do not depend on how often a sample repeats
    first, inverse = distinct_rows(X)
    Xd = X[first] if first.size < X.shape[0] else X
    d = TRUNCATE_FACTOR * int(n_clusters)
    if d >= min(Xd.shape[0] - 1, X.shape[1]):
        return None
    Z, mean, P = principal_coordinates(Xd, d)
    labels, info = graph_partition(Z, n_clusters, n_neighbors=p.n_neighbors,
                                   n_shared=p.n_shared, random_state=random_state,
                                   verbose=verbose)
    info["mean"] = mean + info["mean"] @ P
    info["V"] = np.ascontiguousarray(info["V"] @ P)
    info["truncated"] = d
    # first is ascending: the labels keep their order of first appearance
    return labels[inverse], info


def euclidean_graph(X, n_neighbors):
    """The symmetrised Euclidean k-NN graph of the (distinct) rows of ``X``, unit weights.

    ``K_ij = 1`` when row ``j`` is one of the ``n_neighbors`` (at most ``n - 1``) nearest rows
    to row ``i`` by Euclidean distance (itself excluded); returns ``W = (K + K^T) / 2`` (CSR).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.select import euclidean_graph
    >>> euclidean_graph(np.array([[0.0], [1.0], [5.0]]), 1).toarray().tolist()
    [[0.0, 1.0, 0.0], [1.0, 0.0, 0.5], [0.0, 0.5, 0.0]]
    """
    from sklearn.neighbors import NearestNeighbors

    from .graph import knn_graph

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

    :func:`euclidean_graph` (equal rows one node), the ``n_clusters`` leading eigenvectors of
    ``D^-1/2 W D^-1/2`` (:func:`ntnumba.partition.graph.spectral_embedding`) and k-means (10
    restarts, seeded) on them. Returns ``(labels, info)`` as
    :func:`ntnumba.partition.graph.graph_partition` (``info["n_shared"] = 0``; ``info["mean"]``,
    ``info["V"]`` and ``offset`` give the rows of ``predict``'s vote).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.select import euclidean_partition
    >>> rng = np.random.default_rng(0)
    >>> X = np.r_[rng.normal(0.0, 1.0, (30, 2)), rng.normal(8.0, 1.0, (30, 2))]
    >>> labels, info = euclidean_partition(X, 2, 10, 0)
    >>> sorted(np.bincount(labels).tolist())
    [30, 30]
    """
    from sklearn.cluster import KMeans

    from .graph import (Progress, compact_labels, distinct_rows, shared_directions,
                        spectral_embedding)

    X = np.asarray(X, dtype=np.float64)
    C = int(n_clusters)
    say = Progress(verbose)
    first, inverse = distinct_rows(X)
    Xd = X[first]
    nd = Xd.shape[0]
    mean, V = shared_directions(Xd, 0)
    info = {"n_shared": 0, "mean": mean, "V": V, "n_distinct": nd, "copies": 1,
            "offset": offset}
    if nd <= C:
        info["ncut"] = {0: 0.0}
        return compact_labels(np.arange(nd, dtype=np.int64)[inverse], C), info
    say(f"{X.shape[0]} samples ({nd} distinct), {X.shape[1]} features: Euclidean k-NN "
        f"graph, k = {min(n_neighbors, nd - 1)}")
    W = euclidean_graph(Xd, n_neighbors)
    seed = random_state if isinstance(random_state, (int, np.integer)) else \
        np.random.RandomState(random_state).randint(np.iinfo(np.int32).max)
    _, maps, cut = spectral_embedding(W, C, random_state=int(seed))
    info["ncut"] = {0: cut}
    say(f"eigensolver, cut {cut:.6f}; k-means on the embedding")
    lab = KMeans(C, n_init=10, random_state=int(seed)).fit_predict(maps)
    return compact_labels(np.asarray(lab, dtype=np.int64)[inverse], C), info
