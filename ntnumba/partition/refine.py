"""Label refinement: the partition recomputed with the *learned* representations.

With ``assign="graph"`` the clusters are a spectral partition of the k-NN graph of the samples'
angular similarity with mutual-rank edge weights (:mod:`ntnumba.partition.graph`, the large-``M`` limit
of the NT similarity of a random map); the iterations of the learning problem (Stages 1-3:
``A``, ``tau``, ``nu`` with the paper's objective) then fit the model to that partition. Left
alone, the partition never changes: what learning does is invisible in the labels.
``relabel=R`` (:class:`~ntnumba.NTClustering`) closes the loop: after each of the first ``R``
iterations a new partition is computed from the initial partition's graph *and* the k-NN graph
of the representations ``A x`` of the learned map (their co-association, :func:`refine`), and
the next iteration fits ``A``, ``tau``, ``nu`` to it. ``prototypes=True``
(:func:`prototype_refine`) instead tries the learned model's own nearest-mean partition once,
after the first iteration, judged by the graph partition's graph with more neighbours.

The learned map is the Stage-3 solution for the target ``(Y + tau_c + nu)/2``: it draws the
samples of one cluster together, so the graph of its representations is shaped by the clusters
the model was fitted to, and a partition that cut a class in two (or merged two) is sometimes
repaired there; it also drops what the data's graph knew. The step (:func:`refine`) therefore
*adds* the learned map's view to the data's graph instead of replacing it: the k-NN graphs of
the data (the initial partition's graph: its rows, near-copy factor and mutual-rank weights,
built by the same functions, :func:`ntnumba.partition.graph.neighbour_lists` and
:func:`ntnumba.partition.graph.weighted_graph`) and of the learned map (similarity weights), their sum,
each edge weighted
by the share of the two partitions (the current one and the learned graph's own spectral
partition) that keep its two ends together (a co-association), and the spectral partition of
that graph. Nothing is recomputed when a representation rule of ``representation="auto"``
applies (:func:`learned_map_applies`).

The new labels are matched to the previous ones (:func:`match_labels`: the permutation that
keeps the most samples in their cluster) so that ``tau_c`` keeps describing cluster ``c``.
What it changes, data set by data set: ``docs/dev_results.md``.

Variants of the step measured (issue 13, item 3), each one step on the model of the default
fit after one iteration (``labels_`` of ``relabel=1, max_iter=2`` is that step's partition:
the graph rule keeps it), the fit's seed also the graph's; CA / NMI of ``labels_`` minus
``initial_labels_``, means over the data sets (points), and the number of sets whose mean went
up / down by more than 0.05 CA points. Development suite: 24 sets x 5 seeds unless marked
"1 seed"; check set (``--set check``, 19 sets, never used to choose): 1 seed unless marked.
On 9 of the 24 development sets and 10 of the 19 check sets a representation rule applies
and nothing changes. All of them were measured while the graph partition had plain
similarity weights (before the mutual-rank weights), by development scripts on saved fits that
the package does not keep, except the runs of ``relabel=1`` itself (the suite's command,
``python -m ntnumba.reproduce --suite dev --methods "ntnumba (default)|ntnumba, relabel=1"``,
``--set check`` for the check set, ``--quick`` for 1 seed).

* the partition of the learned map's graph ``W_A`` alone, kept only with a smaller cut of
  ``W_A`` (the step before this one): +0.18 / -0.01 (CA up on 6, down on 5); without the
  trust region (1 seed) +0.19 / -0.09; check -0.34 / -0.47 (5 seeds: -0.37 / -0.57, up 1,
  down 6);
* the partition of ``W_X + W_A`` (``W_X``: the data's graph): +0.21 / +0.14 (up 7, down 5);
  check -0.38 / -0.63 (up 2, down 4); each graph divided by its total weight (1 seed)
  +0.25 / +0.23; kept only with a smaller cut of the sum (1 seed) +0.13 / +0.26;
  ``0.7 W_X + 0.3 W_A``: +0.10 / +0.14, check -0.22 / -0.43; ``0.3 W_X + 0.7 W_A`` (1 seed):
  +0.32 / +0.08;
* the same, new labels only for samples with less than 50% (80%) of their edge weight to
  their own cluster in both graphs (confidence filter): +0.11 / +0.08 (+0.18 / +0.15);
  check -0.11 / -0.23 (-0.28 / -0.54);
* label spreading (harmonic solution on ``W_X + W_A``) from the samples with at least 80%
  (90%) agreement in both graphs: +0.09 / +0.36 (+0.13 / +0.43, up 6, down 7); check
  -0.14 / -0.05 (-0.10 / +0.05); on ``W_X`` alone with seeds from ``W_X`` alone (no learning
  at all): -0.01 / +0.38, check -0.04 / +0.06;
* the learned metric moved further from the initial random map's, ``G0 + eta (A^T A - G0)``
  (``G0 = A_0^T A_0``), with ``W_X`` added (1 seed): ``eta`` = 1 +0.25 / +0.25 (the sum
  above), 2: -2.44 / -2.66, 4: -5.25 / -5.87; the learned graph alone at ``eta`` = 2:
  -3.69 / -4.29;
* co-association of the current and the learned graph's partitions on the edges of ``W_X``
  only: +0.31 / +0.24 (up 10, down 2); check -0.02 / +0.07;
* co-association of the current partition, the learned graph's and that of
  ``W_X + W_A``, on ``W_X + W_A``: +0.38 / +0.27 (up 10, down 3); check -0.24 / -0.45;
* **co-association of the current and the learned graph's partitions on** ``W_X + W_A``
  (:func:`refine`, kept as ``relabel``'s step), with the plain graph partition and a plain
  ``W_X``: +0.51 / +0.35 (up 10, down 2); check
  -0.13 / -0.10 (5 seeds: -0.13 / -0.11, up 3, down 3); in the suite's own run (5 seeds,
  ``docs/dev_results.md``) +0.51 / +0.35, at or above KMeans on 22 sets (the default 20);
  two such steps (``relabel=2, max_iter=3``, the suite's run, 1 seed): +0.06 / -0.12.
  The same with the shares squared (an edge one partition cuts weighs 1/4): +0.48 / +0.35;
  with a third partition, the learned map's graph without the within-cluster directions
  removed: +0.43 / +0.35 (up 9, down 4); the learned map's graph with 10 neighbours (twice
  ``n_neighbors``): +0.13 / -0.29; only the learned partition taken from that graph:
  +0.37 / +0.15.
* the same step after the graph partition took mutual-rank weights: with a plain-similarity
  ``W_X`` (the suite's pages, 5 seeds) -0.17 / -0.30 (up 8, down 5), check -0.13 / -0.12;
  with ``W_X`` the initial partition's own mutual-rank graph (now; the suite's command,
  ``--quick``, 1 seed, load 8.4) -0.37 / -0.42 (up 6, down 7: Extended Yale B unbalanced
  -6.1, MNIST subset -3.0, USPS -2.4), check -0.22 / -0.28 (up 4, down 4); 5 seeds (``docs/dev_results.md``,
  ``docs/dev_check.md``) -0.16 / -0.35 (up 7, down 6), check -0.21 / -0.26. Either way
  below ``initial_labels_``: kept as the initial partition's graph so that the two
  cannot drift apart.

Cross-fitting (out-of-fold learning), against the self-confirmation of the steps above (the
map judges the labels it was fitted to): the samples split into ``F`` folds stratified by
``initial_labels_`` (seeded by the fit's seed); for each fold, one iteration of Stages 1-3
(:func:`ntnumba.engine.loop.iterate`, the labels fixed) from the fit's initial ``A`` and ``nu``
(``tau`` from the training folds' means) on the *other* folds only; every sample is then judged
by a map that was not fitted to its own label. The new labels are scored directly (no
iteration after them); CA / NMI minus ``initial_labels_`` as above (means over all 24 and 19
sets), moved only on the 15 development and 9 check sets where :func:`learned_map_applies`
(elsewhere nothing changes); ``F = 3``,
1 seed unless marked. Controls: the same evidence from the initial random map ``A_0`` (no
learning) and from the data's graph rows (no map). All measured before the principal-directions
rule of ``representation="auto"`` (:func:`ntnumba.partition.select.truncated_partition`, which changed
the initial partition of COIL-20 and of some check sets). Development scripts on fits the package
does not keep (load 3-8); the out-of-fold step alone (3 folds, the vote of the learned map)
takes 0.7-6.1 times the default fit's time (COIL-20 2.9, Extended Yale B 1.9, USPS 1.7,
Isolet 1.8, ORL 6.1, digits 0.7; medians of 3, load 5.9-6.4).

* the model's min-max assignment (``rule="objective"``, all candidates) of the held-out fold,
  a new label where another cluster's cost is lower by a relative margin above 0, 0.02, 0.05,
  0.1: -7.12 / -9.40, -6.61 / -8.85, -5.91 / -8.11, -4.84 / -6.71 (down on 12-13; Extended
  Yale B -42 to -59 CA, the prototype rule on manifold data); check -4.01 / -5.59 to
  -2.81 / -3.73; the in-sample assignment of the default fit's own model: -5.28 / -7.10, check
  -3.10 / -3.97. Where it agrees with the out-of-fold vote below (share >= 0.5):
  -0.19 / -0.36 (with ``A_0``'s vote -0.08 / -0.23);
* the out-of-fold k-NN vote (``n_neighbors`` training-fold neighbours in the learned map's
  rows, :func:`metric_rows`, centred, the training folds' ``n_shared`` within-cluster
  directions removed), a new label where another cluster's vote share is at least 0.5, 0.6,
  0.8, 0.99: -0.60 / -0.97 (up 2, down 12), -0.11 / -0.16, +0.00 / -0.01, +0.02 / +0.05 (up
  4, down 4); with ``A_0``: -0.27 / -0.65, -0.01 / -0.19, +0.02 / -0.11; in the data's graph
  rows: -0.34 / -0.67, -0.02 / -0.13, +0.01 / -0.05. 5 seeds, 0.8: +0.02 / -0.01; check
  (5 seeds) 0.8: +0.07 / +0.23, ``A_0`` +0.02 / +0.10, and at 0.6 the controls gain more
  than the learned map (``A_0`` +0.14 / +0.33, data rows +0.15 / +0.36, learned
  +0.05 / +0.05);
* **confident learning** on those votes (per-cluster thresholds ``t_c`` = the mean share of
  ``c`` over the samples labelled ``c``; a sample moves to the cluster of largest share among
  those at or above their threshold when that share exceeds its own label's): +0.06 / +0.09
  (up 5, down 4; 2.3 samples moved per set), ``A_0`` +0.03 / +0.02, data rows
  +0.03 / +0.01; 5 seeds +0.02 / +0.02 (up 3, down 5: USPS -0.4), ``A_0`` +0.00 / -0.01,
  data rows -0.01 / -0.02; check (5 seeds) +0.05 / +0.22 (up 4, down 3), ``A_0``
  +0.02 / +0.09, data rows +0.01 / +0.07; no set crosses KMeans either way. The same rule on
  the in-sample leave-one-out vote of the default fit's map (no folds): +0.02 / -0.01, check
  +0.08 / +0.33: the folds are not what it gains from. Built as an option of the fit (the
  step before the first iteration, which then fits the model to its labels; folds by a
  seeded shuffle grouped by label, seeded by the fit's random draws) and run by the suite
  (``python -m ntnumba.reproduce --suite dev --methods "ntnumba (default)|ntnumba,
  crossfit"``, 5 seeds, and ``--set check``; load 4.3-7.3): +0.02 / -0.04 (up 4: MNIST subset
  +0.6, Isolet, ORL, COIL-20 20 per class; down 4: USPS -0.3 / -0.6, USPS 20 per class
  -0.1 / -0.7, digits, Extended Yale B unbalanced), at or above the best peer on 15 sets (the
  default 16: USPS 20 per class falls below Spectral k=5 in NMI), KMeans 21 as the default;
  check +0.05 / +0.19 (up 3, down 4; breast_cancer with noise features +0.8 / +3.7 reaches
  the best peer, USPS 5 classes -0.6 / -1.3); the fit took 1.2-5.6 times as long on the
  development sets where it runs (USPS 1.2, Extended Yale B 2.2, COIL-20 2.5, Isolet 2.9,
  ORL 4.6, ORL 20 subjects 5.6; means of 5 seeds). The mean NMI falls on the development
  suite: not kept;
* the out-of-fold k-NN graph (each sample's ``3 n_neighbors`` nearest among all samples in the
  map not fitted to it, similarity weights) as ``W_A`` of :func:`refine`'s co-association
  step: +0.04 / -0.45 (up 9, down 5), ``A_0``'s graph -0.06 / -0.04, the in-sample step
  (``relabel``'s, the same scripts) -0.37 / -0.42; 5 seeds -0.22 / -0.42 (up 5, down 8),
  ``A_0`` -0.26 / -0.22; check (5 seeds) -0.21 / -0.28, ``A_0`` +0.13 / +0.47;
* ``F = 5``: vote 0.8 +0.05 / -0.05, confident learning +0.05 / +0.01, graph
  -0.13 / -0.47; 5 iterations on the training folds instead of 1 (``F = 3``): vote 0.5
  -1.40 / -2.71, confident learning -0.29 / -0.76, graph -3.12 / -3.73, assignment
  -13.03 / -15.91: the longer-learned map is a worse neighbour space out of fold too.

Cross-fitting removes the self-confirmation (the co-association step gains 0.4 CA points
over the in-sample one, 1 seed) but what is left is the data's graph: the out-of-fold evidence
of the learned map is no better than the same evidence from ``A_0`` or from the data's rows,
and its best rule moves about two samples per set, a few hundredths of a point either way
(+0.02 / +0.02 in the scripts, +0.02 / -0.04 as an option, 5 seeds).

None of them is the default: every one changes only a few percent of the labels, the gains
are a fraction of a point and the check set does not confirm them (the kept variant loses
~2 CA points there on USPS 5-class and on wine with noise features, and gains on
breast_cancer with noise features and Isolet). Label spreading raises NMI but with
the same gain without the learned map (it smooths labels over the data's graph); moving the
metric further along the learned direction (``eta > 1``) falls quickly: one iteration's map
is a weak, noisy metric, not a better one.

``prototypes=True`` (:func:`prototype_refine`) is the other way round: the learned model is a
prototype classifier in the transform domain (each cluster's ``tau_c + nu`` near the mean of
its ``A x``), the graph a manifold method. After the first iteration the model's nearest-mean
partition (:func:`prototype_partition` in the metric of the learned map, :func:`metric_rows`),
started from the graph partition, replaces it when a coarser graph of the same rows
(:func:`coarse_graph`, ``COARSE`` times the neighbours, the graph partition's mutual-rank
weights) says it cuts clearly less (``CUT_RATIO``). That is what KMeans does better than the
graph on few-feature Gaussian data.

With the graph partition's mutual-rank weights the coarse graph must have them too: judged by
a plain-similarity coarse graph the step replaced the graph partition of COIL-20 (development
suite, 5 seeds: CA 85.2 -> 74.0-74.9 on every seed; ``NTClustering(20, prototypes=True,
random_state=0)`` on ``load_demo()``: 0.865 -> 0.747, 345 of 1440 samples moved) and moved
Isolet (NMI 80.5 -> 77.0-77.4). With the mutual-rank coarse graph the demo is unchanged
(0.865), the blobs of the estimator's docstring example still gain (CA 0.973 -> 0.987, 5
samples moved; from the rows' own partition, ``representation="as-is"``, 0.96 -> 0.987, 10
moved) and, 1 seed, no set of the development suite or of the check set changes
(``python -m ntnumba.reproduce --suite dev --quick --methods "ntnumba (default)|ntnumba,
relabel=1|ntnumba, prototypes" --out /tmp/dF``, and with ``--set check``; load 8.4): mean
CA / NMI equal to the default's.

Measured while choosing it, with the graph partition's plain similarity weights then
(development suite, one seed, the default fit's model after one iteration, by development
scripts the package does not keep; CA / NMI means over 24 sets, from 84.39 / 81.84; labels
only to score):

* nearest-mean steps kept unconditionally: 72.35 / 67.03 (up on 3 sets, down on 17: the
  manifold sets fall to k-means level, Extended Yale B 95 -> 10); in the data's own metric
  (``A = I``) 72.68 / 67.55: the learned map after one iteration is no better a metric;
* the same judged by the cut of the partition's own graph (``k = n_neighbors``): never kept
  (the spectral partition cuts that graph least); judged by graphs of 15, 20, 30 and 40
  neighbours: 20 or more separate the two sets it helps (cut ratio 0.45-0.87) from the rest
  (>= 0.97), ratio threshold 0.95 with 30 (the defaults here): +0.78 / +1.07, on 21 held-out
  cases +0.16 / +0.20 (three changed, all up); in the ``A = I`` metric +0.71 / +0.87 and
  +0.41 / +0.55;
* one graph per sample's cost (nearest-mean squared distance over the mean within-cluster
  distance minus ``beta`` times the share of its 5 graph neighbours in the cluster; iterated
  conditional modes): ``beta`` = 1, 2, 4 gave 75.05 / 70.91, 81.04 / 77.37, 82.82 / 79.44;
* the partition of the learned map (``relabel``'s) after 5 iterations fitted to the graph
  partition instead of 1 (``kappa(A)`` 2 -> 13 on COIL-20), no trust region: 74.60 / 71.24,
  down on 22 sets: the longer-learned map is a worse graph space.
"""
import numpy as np
from scipy.optimize import linear_sum_assignment


#: the edge weights of the graph partition (``graph_partition``'s default), those of ``W_X``
#: in :func:`refine` and of the coarse graph of :func:`prototype_refine`
PARTITION_WEIGHTING = "mutual-rank"


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
    >>> from ntnumba.partition.refine import match_labels
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
    >>> from ntnumba.partition.refine import normalised_cut
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
    >>> from ntnumba.partition.refine import within_rows
    >>> Q = np.array([[0.0, 5.0], [0.0, -5.0], [9.0, 5.0], [9.0, -5.0]])
    >>> within_rows(Q, np.array([0, 0, 1, 1]), 1).tolist()   # the within-cluster axis goes
    [[-4.5, 0.0], [-4.5, 0.0], [4.5, 0.0], [4.5, 0.0]]
    """
    from . import graph

    Q = np.asarray(Q, dtype=np.float64)
    mean = Q.mean(axis=0)
    if r <= 0:
        return Q - mean
    labels = np.asarray(labels, dtype=np.int64)
    R = Q.copy()
    for c in np.unique(labels):
        sel = labels == c
        R[sel] -= R[sel].mean(axis=0)
    _, V = graph.shared_directions(R, r)
    return graph.remove_shared(Q, mean, V)


def learned_map_applies(X, p):
    """Whether the partition of the learned map can be used for ``X``.

    Not when a representation rule of ``representation="auto"`` (:mod:`ntnumba.partition.select`)
    applies: those rules act on the initial map and the graph (standardised columns of the
    initial ``A``, a constant coordinate for data of at most 16 features), and the learned map,
    kept well conditioned by its priors, does not carry them (measured: on raw wine, raw
    breast_cancer and scaled blobs the partition of the learned map fell to 50-72% CA).
    """
    from . import select

    if getattr(p, "representation", "as-is") != "auto":
        return True
    return (X.shape[1] > select.FEW_FEATURES and select.feature_weights(X) is None)


def graph_of_rows(Y, k, random_state=0, weighting="similarity", check=None):
    """The k-NN graph of the rows ``Y`` by the graph's angular similarity, ``k`` neighbours
    (at most ``n - 1``), built as the graph partition builds its graph: the lists of
    :func:`ntnumba.partition.graph.neighbour_lists`, the edge weights of
    :func:`ntnumba.partition.graph.weighted_graph` (``"similarity"``: the symmetrised similarities;
    ``"mutual-rank"``: the graph partition's weights). ``check(K)``: a memory check before
    the lists of ``K`` neighbours are searched (``neighbour_lists``)."""
    from . import graph

    n = Y.shape[0]
    k = min(n - 1, int(k))
    nn, sim, _ = graph.neighbour_lists(Y, k, 1, weighting, random_state=random_state,
                                        check=check)
    return graph.weighted_graph(nn, sim, k, n, weighting)


def coassociation_weights(W, partitions):
    """The edges of ``W`` times the share of the ``partitions`` that put both ends in one
    cluster: ``W'_ij = W_ij * (1/m) sum_t [P_t(i) == P_t(j)]`` (CSR).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.refine import coassociation_weights
    >>> W = np.array([[0, 1.0, 2.0], [1.0, 0, 4.0], [2.0, 4.0, 0]])
    >>> coassociation_weights(W, [np.array([0, 0, 1]), np.array([0, 1, 1])]).toarray().tolist()
    [[0.0, 0.5, 0.0], [0.5, 0.0, 2.0], [0.0, 2.0, 0.0]]
    """
    from scipy import sparse

    W = sparse.coo_matrix(W, dtype=np.float64)
    share = np.mean([np.asarray(P)[W.row] == np.asarray(P)[W.col] for P in partitions], axis=0)
    out = sparse.csr_matrix((W.data * share, (W.row, W.col)), shape=W.shape)
    out.eliminate_zeros()
    return out


def _spectral_partition(W, C, random_state):
    """The graph partition's step 3 on ``W``: ``cluster_qr`` of its ``C`` leading
    eigenvectors (:func:`ntnumba.partition.graph.spectral_embedding`)."""
    from . import graph

    return graph.cluster_qr(graph.spectral_embedding(W, C, random_state=random_state)[1])


def refine(X, Z, labels, graph, p, random_state, n_shared=0, verbose=0):
    """One refinement step: the partition of the co-association graph of the data's graph and
    the learned map's graph.

    Two k-NN graphs of the same samples, ``k = n_neighbors`` times the data's near-copy
    factor (:func:`ntnumba.partition.graph.copy_factor`): ``W_X``, the graph of the initial partition
    (the rows ``X`` centred, the shared directions of ``graph`` removed,
    :func:`ntnumba.partition.graph.graph_rows`), and ``W_A``, that of the learned map (the rows ``Z``,
    :func:`metric_rows`, with the ``n_shared`` leading within-cluster directions removed,
    :func:`within_rows`). ``W_A``'s spectral partition ``P_A`` is computed; the edges of
    ``W_X + W_A`` are weighted by the share of the two partitions, ``labels`` and ``P_A``,
    that put both ends in one cluster (:func:`coassociation_weights`: 1, 1/2 or 0), and that
    graph is partitioned (leading eigenvectors of its normalised adjacency, ``cluster_qr``),
    the result matched to ``labels`` (:func:`match_labels`). Learning adds to the data's
    graph what the learned map separates, rather than replacing it; an edge both partitions
    cut is dropped. Equal rows of ``X`` are one node. Nothing happens when
    :func:`learned_map_applies` says no.

    Parameters
    ----------
    X : ndarray of shape (n, N)
        The (scaled) rows of the reference set.
    Z : ndarray of shape (n, d)
        Rows with the angles of the learned representations ``A x`` (:func:`metric_rows`:
        ``Z = X L`` with ``L L^T = A^T A``; or ``A x`` itself).
    labels : ndarray of shape (n,)
        The current partition.
    graph : dict
        The initial partition's summary: ``"mean"`` and ``"V"`` of its rows.
    p : ntnumba.engine.loop.Params
        ``n_clusters``, ``n_neighbors``.
    random_state : int
        Seed of the k-NN search (approximate only) and of the eigensolver.
    n_shared : int
        Within-cluster directions removed from the learned rows.

    Returns
    -------
    labels : ndarray of shape (n,), int64
        The new partition (``labels`` when nothing was done).
    info : dict or None
        None when nothing was done, else ``{"moved": samples whose label changed}``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.engine.loop import Params
    >>> from ntnumba.partition.graph import shared_directions
    >>> from ntnumba.partition.refine import refine
    >>> rng = np.random.default_rng(0)
    >>> X = np.repeat(3.0 * rng.standard_normal((2, 20)), 30, axis=0)
    >>> X += 0.3 * rng.standard_normal(X.shape)
    >>> mean, V = shared_directions(X, 0)
    >>> wrong = np.r_[np.zeros(40, int), np.ones(20, int)]   # 10 samples in the wrong cluster
    >>> new, info = refine(X, X, wrong, {"mean": mean, "V": V}, Params(2, 20), 0)
    >>> new.tolist() == [0] * 30 + [1] * 30, info["moved"]
    (True, 10)
    """
    from . import graph

    labels = np.asarray(labels, dtype=np.int64)
    if not learned_map_applies(X, p):
        return labels, None
    C = p.n_clusters
    X = np.asarray(X, dtype=np.float64)
    first, inverse = graph.distinct_rows(X)
    if first.size <= C:
        return labels, None
    lab = labels[first]
    say = graph.Progress(verbose)
    k = p.n_neighbors
    Yx = graph.graph_rows(X[first], graph["mean"], graph["V"])

    def check(K):  # the graph partition's memory check, for the two graphs' lists
        graph._check_graph_memory(first.size, X.shape[1], K, 2,
                                   "relabel's two k-NN graphs (relabel=0 has none)")

    # the initial partition's graph: its lists, near-copy factor and weights
    nn, sim, copies = graph.neighbour_lists(Yx, k, graph.get("copies"), PARTITION_WEIGHTING,
                                             random_state=random_state, check=check)
    kc = k * copies
    Wx = graph.weighted_graph(nn, sim, kc, first.size, PARTITION_WEIGHTING)
    nn = sim = None
    Wa = graph_of_rows(within_rows(np.asarray(Z, dtype=np.float64)[first], lab, n_shared), kc,
                       random_state)
    say(f"refine: graphs of the data ({Wx.nnz} edges) and of the learned map ({Wa.nnz})")
    part_a = _spectral_partition(Wa, C, random_state)
    W = coassociation_weights(Wx + Wa, [lab, part_a])
    new = _spectral_partition(W, C, random_state)
    new = match_labels(graph.compact_labels(new[inverse], C), labels, C)
    return new, {"moved": int(np.count_nonzero(new != labels))}


# ---------------------------------------------------------------------------------------------
# prototypes: the learned model's nearest-mean partition, judged by a coarser graph
# ---------------------------------------------------------------------------------------------
#: the coarse graph of :func:`prototype_refine` has this many times ``n_neighbors`` neighbours
COARSE = 6
#: the prototype partition is kept only when its cut of the coarse graph is below this
#: fraction of the current partition's cut
CUT_RATIO = 0.95
#: at most this many nearest-mean steps (:func:`prototype_partition`)
PROTOTYPE_STEPS = 10


def metric_rows(X, A):
    """Rows ``Z`` (n x N) with ``||z_i - z_j|| = ||A x_i - A x_j||``: ``Z = X L``, ``L`` the
    Cholesky factor of ``A^T A`` (``A`` None: the identity, ``Z = X``); float64.

    The transform domain's distances without the n x M representations: ``A^T A = L L^T``
    gives ``||A d||^2 = d^T L L^T d = ||L^T d||^2``. A singular ``A^T A`` (never for the
    learned overcomplete map, whose prior keeps ``log det(A^T A)`` finite) falls back to
    ``L = U sqrt(diag(w))`` of its eigendecomposition ``U diag(w) U^T``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.refine import metric_rows
    >>> rng = np.random.default_rng(0)
    >>> X, A = rng.standard_normal((4, 3)), rng.standard_normal((7, 3))
    >>> Z = metric_rows(X, A)
    >>> bool(np.isclose(np.linalg.norm(Z[0] - Z[1]), np.linalg.norm(A @ (X[0] - X[1]))))
    True
    """
    X = np.asarray(X, dtype=np.float64)
    if A is None:
        return X
    A = np.asarray(A, dtype=np.float64)
    G = A.T @ A
    try:
        L = np.linalg.cholesky(0.5 * (G + G.T))
    except np.linalg.LinAlgError:
        w, U = np.linalg.eigh(0.5 * (G + G.T))
        L = U * np.sqrt(np.maximum(w, 0.0))
    return X @ L


def prototype_partition(Z, labels, n_clusters, max_steps=PROTOTYPE_STEPS):
    """Nearest-mean steps from ``labels``: every row to the cluster of the nearest mean of the
    rows ``Z`` (ties to the smaller cluster index), repeated until nothing moves, at most
    ``max_steps`` times (``PROTOTYPE_STEPS``: on the development suite the partitions it
    kept had stopped moving after 5).

    In the transform domain (``Z``: :func:`metric_rows` of the learned ``A``) this is the
    learned model's assignment with the cluster's parameters at their members' mean (the
    ``lambda_a`` term of the objective, ``||A x - tau_c - nu||^2`` with ``tau_c + nu`` the
    mean of ``A x`` over cluster ``c``, minimised over ``c``; the min-max terms are left out:
    on data of few features they collapse the clusters, docs/dev_results.md). A step that
    would leave a cluster empty is not taken (the previous labels are returned).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.partition.refine import prototype_partition
    >>> Z = np.array([[0.0], [1.0], [2.0], [9.0], [10.0]])
    >>> prototype_partition(Z, np.array([0, 0, 1, 1, 1]), 2).tolist()
    [0, 0, 0, 1, 1]
    """
    Z = np.asarray(Z, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    n = Z.shape[0]
    for _ in range(int(max_steps)):
        count = np.bincount(labels, minlength=n_clusters)
        if np.any(count == 0):
            break
        member = np.zeros((n_clusters, n))
        member[labels, np.arange(n)] = 1.0 / count[labels]
        mu = member @ Z  # the cluster means
        # ||z - mu_c||^2 without the ||z||^2 every cluster shares
        d = np.einsum("ij,ij->i", mu, mu)[None, :] - 2.0 * (Z @ mu.T)
        new = d.argmin(axis=1).astype(np.int64)
        if np.array_equal(new, labels) or np.any(np.bincount(new, minlength=n_clusters) == 0):
            break
        labels = new
    return labels


def coarse_graph(rows, p, random_state=0, check=None):
    """The graph partition's k-NN graph (mutual-rank weights, :func:`graph_of_rows`) of the
    graph rows ``rows`` (:func:`ntnumba.partition.graph.graph_rows` of the initial partition, distinct
    rows) with ``COARSE * n_neighbors`` neighbours (at most ``n - 1``); ``check``: the memory
    check (:func:`graph_of_rows`)."""
    return graph_of_rows(rows, COARSE * p.n_neighbors, random_state, PARTITION_WEIGHTING,
                         check)


def prototype_refine(Z, rows, labels, p, random_state=0):
    """The learned model's nearest-mean partition (:func:`prototype_partition` of the rows
    ``Z``, started from ``labels``), kept only when it cuts a coarser graph of the samples
    clearly less than ``labels`` do.

    The graph partition follows the k-NN graph of ``k = n_neighbors`` neighbours: a manifold
    method. The learned model is a prototype classifier in the transform domain. The two
    disagree where the clusters are compact blobs that overlap at the scale of ``k``
    neighbours (few-feature Gaussian data): the spectral relaxation of the small graph then
    cuts a cluster in two. The judge is the discrete normalised cut (:func:`normalised_cut`)
    of the same rows' graph with ``COARSE`` times more neighbours (:func:`coarse_graph`):
    the prototype partition replaces ``labels`` only when its cut is below ``CUT_RATIO``
    times theirs. Equal rows are one node of that graph, as in the graph partition: data
    repeated ``r`` times get the decision of the data. The coarse graph has the graph
    partition's mutual-rank weights: on manifold data (COIL-20 images) the nearest-mean
    partition cuts it more and is rejected (a plain-similarity coarse graph kept it).

    Parameters
    ----------
    Z : ndarray of shape (n, d)
        The rows in the transform domain's metric (:func:`metric_rows`).
    rows : ndarray of shape (n, m)
        The rows the graph partition compared (:func:`ntnumba.partition.graph.graph_rows`).
    labels : ndarray of shape (n,)
        The current partition.
    p : ntnumba.engine.loop.Params
        ``n_clusters``, ``n_neighbors``.
    random_state : int
        Seed of the k-NN search (used by the approximate search only).

    Returns
    -------
    labels : ndarray of shape (n,), int64
        The kept partition.
    info : dict
        ``"cuts"``: ``(current, prototype)`` cuts of the coarse graph (absent when the
        prototype partition equals ``labels``), ``"kept"``: whether it replaced them.

    Examples
    --------
    Two blobs that touch, and a partition with a third of one blob on the wrong side:

    >>> import numpy as np
    >>> from ntnumba.engine.loop import Params
    >>> from ntnumba.partition.refine import prototype_refine
    >>> rng = np.random.default_rng(0)
    >>> X = np.r_[rng.normal(-2.0, 1.0, (40, 2)), rng.normal(2.0, 1.0, (40, 2))]
    >>> wrong = (X[:, 0] > -1.0).astype(int)
    >>> new, info = prototype_refine(X, X, wrong, Params(2, 2))
    >>> info["kept"], float(np.mean(new == np.repeat([0, 1], 40))) > 0.9
    (True, True)
    """
    from . import graph

    labels = np.asarray(labels, dtype=np.int64)
    new = prototype_partition(Z, labels, p.n_clusters)
    if np.array_equal(new, labels):
        return labels, {"kept": False}
    # equal rows are one node, as in the graph partition (copies must not fill the lists)
    first, _ = graph.distinct_rows(np.asarray(rows, dtype=np.float64))
    W = coarse_graph(np.asarray(rows, dtype=np.float64)[first], p, random_state,
                     check=lambda K: graph._check_graph_memory(
                         first.size, np.shape(rows)[1], K, 1,
                         "the prototype step's coarse k-NN graph (prototypes=False has none)"))
    cuts = (normalised_cut(W, labels[first], p.n_clusters),
            normalised_cut(W, new[first], p.n_clusters))
    kept = cuts[1] < CUT_RATIO * cuts[0]
    return (new if kept else labels), {"cuts": cuts, "kept": bool(kept)}
