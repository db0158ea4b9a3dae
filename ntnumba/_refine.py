"""Label refinement: the partition recomputed on the *learned* representations.

With ``assign="graph"`` the clusters are a spectral partition of the k-NN graph of the samples'
angular similarity (:mod:`ntnumba._graph`, the large-``M`` limit of the NT similarity of a
random map); the iterations of the learning problem (Stages 1-3: ``A``, ``tau``, ``nu`` with the
paper's objective) then fit the model to that partition. Left alone, the partition never
changes: what learning does is invisible in the labels. ``relabel=R``
(:class:`~ntnumba.NTClustering`) closes the loop: after each of the first ``R`` iterations the
graph partition is computed again, by the same graph and the same label-free choice of the
shared directions, from the representations ``A x`` of the *learned* map, and the next
iteration fits ``A``, ``tau``, ``nu`` to it.

The learned map is the Stage-3 solution for the target ``(Y + tau_c + nu)/2``: it draws the
samples of one cluster together, so the graph of its representations is shaped by the clusters
the model was fitted to, and a partition that cut a class in two (or merged two) is sometimes
repaired there. Two safeguards:

* a trust region: the new partition replaces the current one only if its discrete normalised
  cut (:func:`normalised_cut`) of the learned representations' graph is smaller;
* nothing is recomputed when a representation rule of ``representation="auto"`` applies
  (:func:`learned_map_applies`).

The new labels are matched to the previous ones (:func:`match_labels`: the permutation that
keeps the most samples in their cluster) so that ``tau_c`` keeps describing cluster ``c``.
What it changes, data set by data set: ``docs/dev_results.md``.
"""
import numpy as np
from scipy.optimize import linear_sum_assignment


def contingency(labels, reference, n_clusters):
    """``T[a, b]``: number of samples with ``labels == a`` and ``reference == b`` (C x C)."""
    T = np.zeros((n_clusters, n_clusters), dtype=np.int64)
    np.add.at(T, (np.asarray(labels, dtype=np.int64), np.asarray(reference, dtype=np.int64)), 1)
    return T


def match_labels(labels, reference, n_clusters):
    """``labels`` renamed so that as many samples as possible keep their ``reference`` label.

    The renaming is the permutation ``pi`` of ``0..n_clusters-1`` maximising
    ``sum_i [pi(labels_i) == reference_i]`` (Hungarian algorithm on the contingency table);
    the partition itself is unchanged.

    Parameters
    ----------
    labels, reference : array-like of int, shape (n,), values in ``0..n_clusters-1``
    n_clusters : int

    Returns
    -------
    ndarray of shape (n,), int64

    Examples
    --------
    >>> from ntnumba._refine import match_labels
    >>> match_labels([1, 1, 0, 0, 2], [0, 0, 1, 1, 1], 3).tolist()
    [0, 0, 1, 1, 2]
    """
    labels = np.asarray(labels, dtype=np.int64)
    T = contingency(labels, reference, n_clusters)
    rows, cols = linear_sum_assignment(-T)
    perm = np.arange(n_clusters, dtype=np.int64)
    perm[rows] = cols
    return perm[labels]


def normalised_cut(W, labels, n_clusters):
    """Discrete C-way normalised cut ``sum_c cut(c, rest) / vol(c)`` of a partition of ``W``.

    ``W``: symmetric non-negative (sparse or dense) n x n affinities; ``vol(c)`` the sum of
    the degrees of cluster ``c``, ``cut(c, rest)`` the weight of the edges leaving it. An empty
    cluster or one of zero volume adds 1 (it cuts nothing off).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._refine import normalised_cut
    >>> W = np.array([[0, 1, 0.1, 0], [1, 0, 0, 0], [0.1, 0, 0, 1], [0, 0, 1, 0]])
    >>> round(normalised_cut(W, np.array([0, 0, 1, 1]), 2), 6)
    0.095238
    """
    from scipy import sparse

    W = sparse.csr_matrix(W, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    deg = np.asarray(W.sum(axis=1)).ravel()
    vol = np.bincount(labels, weights=deg, minlength=n_clusters)
    Wc = W.tocoo()
    same = labels[Wc.row] == labels[Wc.col]
    inside = np.bincount(labels[Wc.row[same]], weights=Wc.data[same], minlength=n_clusters)
    ok = vol > 0
    return float(np.sum(1.0 - inside[ok] / vol[ok]) + np.count_nonzero(~ok))


def learned_graph(Q, info, p, random_state):
    """The k-NN graph of the partition ``info`` of the learned representations ``Q``: the
    same rows (centred, its shared directions removed, :func:`ntnumba._graph.graph_rows`), the
    same similarity, ``k`` times its near-copy factor neighbours, symmetrised
    (:func:`ntnumba._graph.knn_graph`)."""
    from . import _graph

    Y = _graph.graph_rows(Q, info["mean"], info["V"])
    k = min(Q.shape[0] - 1, p.n_neighbors * int(info.get("copies") or 1))
    nn, sim = _graph.knn_search(Y, k, exclude_self=True, random_state=random_state)
    return _graph.knn_graph(nn, sim, Q.shape[0])


def within_rows(Q, labels, r):
    """The learned representations centred, with the ``r`` leading directions of the
    *within-cluster* scatter (``Q`` minus its cluster means under ``labels``) removed.

    The initial partition removes the leading directions of the total scatter, shared by all
    clusters (what ``nu`` stands for). The learned map draws every cluster towards its
    ``tau_c + nu``: its leading total-scatter directions then separate the clusters, and the
    shared ones are those left inside the clusters. ``r`` is the initial partition's choice.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._refine import within_rows
    >>> Q = np.array([[0.0, 5.0], [0.0, -5.0], [9.0, 5.0], [9.0, -5.0]])
    >>> within_rows(Q, np.array([0, 0, 1, 1]), 1).tolist()   # the within-cluster axis goes
    [[-4.5, 0.0], [-4.5, 0.0], [4.5, 0.0], [4.5, 0.0]]
    """
    from . import _graph

    Q = np.asarray(Q, dtype=np.float64)
    mean = Q.mean(axis=0)
    if r <= 0:
        return Q - mean
    labels = np.asarray(labels, dtype=np.int64)
    R = Q.copy()
    for c in np.unique(labels):
        sel = labels == c
        R[sel] -= R[sel].mean(axis=0)
    _, V = _graph.shared_directions(R, r)
    return _graph.remove_shared(Q, mean, V)


def learned_map_applies(X, p):
    """Whether the partition of the learned map can be used for ``X``.

    Not when a representation rule of ``representation="auto"`` (:mod:`ntnumba._select`)
    applies: those rules act on the initial map and the graph (standardised columns of the
    initial ``A``, a constant coordinate for data of at most 16 features), and the learned map,
    kept well conditioned by its priors, does not carry them (measured: on raw wine, raw
    breast_cancer and scaled blobs the partition of the learned map fell to 50-72% CA).
    """
    from . import _select

    if getattr(p, "representation", "as-is") != "auto":
        return True
    return (X.shape[1] > _select.FEW_FEATURES and _select.feature_weights(X) is None)


def refine(X, Q, labels, p, random_state, n_shared=0, verbose=0):
    """One refinement step: the partition of the learned map, kept only if it cuts the learned
    graph less than ``labels`` do.

    The rows are the learned representations ``Q`` with the ``n_shared`` leading
    within-cluster directions removed (:func:`within_rows`; ``n_shared``: the initial
    partition's choice). The new partition (:func:`repartition`) and the current one are both
    scored by the discrete normalised cut (:func:`normalised_cut`) of the learned representations' k-NN
    graph (:func:`learned_graph`); the new one replaces the current one only with a smaller
    cut (a trust region: the spectral relaxation does not always lower the discrete cut, and
    then the current partition is kept). Nothing happens when :func:`learned_map_applies`
    says no.

    Returns
    -------
    labels : ndarray of shape (n,), int64
        The kept partition.
    info : dict or None
        The new partition's graph summary when it was kept (else None), with ``"cuts"``:
        ``(current, new)`` normalised cuts (absent when nothing was tried).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._driver import Params
    >>> from ntnumba._refine import refine
    >>> rng = np.random.default_rng(0)
    >>> X = np.repeat(3.0 * rng.standard_normal((2, 20)), 30, axis=0)
    >>> X += 0.3 * rng.standard_normal(X.shape)
    >>> wrong = np.r_[np.zeros(40, int), np.ones(20, int)]   # 10 samples in the wrong cluster
    >>> new, info = refine(X, X, wrong, Params(2, 20), 0)
    >>> new.tolist() == [0] * 30 + [1] * 30, info["cuts"][1] < info["cuts"][0]
    (True, True)
    """
    labels = np.asarray(labels, dtype=np.int64)
    if not learned_map_applies(X, p):
        return labels, None
    Q = within_rows(Q, labels, n_shared)
    new, info = repartition(Q, labels, p, random_state, verbose=verbose)
    W = learned_graph(Q, info, p, random_state)
    cuts = (normalised_cut(W, labels, p.n_clusters), normalised_cut(W, new, p.n_clusters))
    info["cuts"] = cuts
    if cuts[1] < cuts[0]:
        return new, info
    return labels, None


def repartition(Q, labels, p, random_state, verbose=0):
    """The graph partition of the rows ``Q``, matched to ``labels``.

    The rows are partitioned by the graph of the samples (:func:`ntnumba._graph.graph_partition`:
    centred, cosine k-NN graph, spectral partition) with no further shared directions removed
    (:func:`refine` removes the within-cluster ones first); the representation rules of
    :mod:`ntnumba._select` are not applied (see :func:`learned_map_applies`).

    Parameters
    ----------
    Q : ndarray of shape (n, M)
        The rows (in a fit: the learned representations of the reference set,
        :func:`within_rows`).
    labels : ndarray of shape (n,)
        The current partition (the new one is renamed to agree with it, :func:`match_labels`).
    p : ntnumba._driver.Params
        The fit's parameters (``n_clusters``, ``n_neighbors``).
    random_state : int
        Seed of the graph's k-NN search and eigensolver.

    Returns
    -------
    labels : ndarray of shape (n,), int64
    info : dict
        As :func:`ntnumba._graph.graph_partition` (``"n_shared"``, ``"ncut"``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba._driver import Params
    >>> from ntnumba._refine import repartition
    >>> g = np.random.default_rng(1)
    >>> X = np.vstack([g.normal(4.0, 1.0, (25, 18)), g.normal(-4.0, 1.0, (25, 18))])
    >>> current = np.r_[np.ones(25, int), np.zeros(25, int)]
    >>> new, _ = repartition(X, current, Params(2, 18), 0)
    >>> bool((new == current).all())   # the same two groups, named as in ``current``
    True
    """
    from . import _graph

    new, info = _graph.graph_partition(Q, p.n_clusters, n_neighbors=p.n_neighbors,
                                       n_shared=0, random_state=random_state,
                                       verbose=verbose)
    return match_labels(new, labels, p.n_clusters), info
