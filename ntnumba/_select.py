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

Both are functions of the reference set alone (:func:`graph_space`): the fit and ``predict``
recompute them from the same rows.

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
    labels, info = graph_partition(Xw, n_clusters, n_neighbors=p.n_neighbors,
                                   n_shared=p.n_shared, random_state=random_state,
                                   verbose=verbose, offset=offset)
    info["representation"] = applied
    return labels, info
