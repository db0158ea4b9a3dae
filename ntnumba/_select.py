"""What the graph rule's similarity needs from the data, decided without labels.

The graph rule (:mod:`ntnumba._graph`) compares samples by the normalised support-intersection
similarity of their centred NT representations, which is close to a function of the *angle*
between the centred samples. Two kinds of data break that similarity, and both can be seen
in the data alone:

1. **Features on very different scales** (``representation="auto"``). When the largest
   feature standard deviation exceeds ``SCALE_RATIO`` (10) times the median one, the angle is
   decided by the largest feature(s) alone (scikit-learn's raw wine: proline's standard
   deviation is ~1000 times the median; the default clustered it at 40% CA, near the 33% of
   chance). The columns of the initial random map ``A`` are then multiplied by ``1 / std``
   of their feature (scaled so that the total variance is kept): ``A x`` is a random map of
   the standardised sample, for the graph, for learning and for new samples alike. Images and
   other data of comparable feature scales (ratio 1.5-3.7 on every image set of the
   development suite) are left as they are. With ``learn_transform=False`` (``A = I``) only
   the graph sees the standardised data.
2. **Few features** (at most ``FEW_FEATURES`` = 16). The angle between centred samples
   discards their distance from the centre, one of ``N`` degrees of freedom: negligible for
   images, decisive for 2-5 features (on 2-D blobs the angle groups samples into pie slices).
   The graph then compares the centred samples with one extra constant coordinate, as large
   as the median distance of a sample from the mean (in ``A x``: a fixed random direction of
   that length added to every centred row). The angle between ``(x, c)`` and ``(z, c)``
   depends on ``x - z`` as well as on the angle, and tends to the Euclidean distance as ``c``
   grows.

Measured on the development suite (``docs/dev_results.md``): raw wine 40 -> 94, raw
breast_cancer 60 -> 94, blobs scaled over five orders of magnitude 21 -> 100, iris 78 -> 91,
2-D blobs 64 -> 89 (CA %, one seed of the graph partition); unchanged on every image set
(the rules do not trigger there). The thresholds (10 and 16) were set once, on the synthetic
and scikit-learn tabular cases, and are not tuned per data set.

A label-free choice of the graph size ``k`` was tried (the relaxed normalised cut, the
eigengap and the ratio of the (C+1)-th Laplacian eigenvalue to the mean cut over k in
(5, 10, 15); the partition most in agreement with the others): none was better than k = 5 by
more than 0.5 CA points on average over 21 data sets, so ``n_neighbors`` stays 5.
"""
import numpy as np

#: ratio of the largest to the median feature standard deviation above which the graph
#: standardises the features
SCALE_RATIO = 10.0
#: at most this many features: the graph's similarity gets the constant coordinate
FEW_FEATURES = 16
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


def constant_coordinate(Q, n_features, random_state, *, few=FEW_FEATURES):
    """The offset of the few-features rule (module docs), or None for more features.

    A random unit direction (seeded by ``random_state``) in the space of ``Q``'s rows, scaled
    to the median distance of a row of ``Q`` from the rows' mean.
    """
    if n_features > few:
        return None
    Q = np.asarray(Q, dtype=np.float64)
    c = float(np.median(np.linalg.norm(Q - Q.mean(axis=0), axis=1)))
    a = np.random.RandomState(random_state).standard_normal(Q.shape[1])
    return (c / np.linalg.norm(a)) * a


def partition(X, Q, n_clusters, p, random_state, verbose=0):
    """The graph partition of ``init="graph"`` with the representation rules (module docs).

    ``X``: the (scaled) data; ``Q``: ``X A^T`` of the initial map (``X`` itself when
    ``A = I``); ``p``: the driver's parameters (``lambda1``, ``n_neighbors``, ``n_shared``,
    ``representation``, ``learn_transform``). Returns what
    :func:`ntnumba._graph.graph_partition` returns; ``info["representation"]`` records the
    rules applied.
    """
    from ._graph import graph_partition, graph_width

    rep = getattr(p, "representation", "as-is")
    offset, applied = None, []
    if rep == "auto":
        if not p.learn_transform:  # A = I: no map to carry the weights, the graph alone
            w = feature_weights(X)
            if w is not None:
                Q = np.asarray(X, dtype=np.float64) * w
        if feature_weights(X) is not None:
            applied.append("standardised")
        # in the columns the graph uses (graph_width)
        offset = constant_coordinate(Q[:, :graph_width(Q.shape[1])], X.shape[1], random_state)
        if offset is not None:
            applied.append("constant coordinate")
    labels, info = graph_partition(Q, n_clusters, lambda1=p.lambda1, n_neighbors=p.n_neighbors,
                                   n_shared=p.n_shared, random_state=random_state,
                                   verbose=verbose, offset=offset)
    info["representation"] = applied
    return labels, info
