"""NTClustering: the scikit-learn style estimator over the kernels and the driver."""
import warnings
from contextlib import contextmanager
from dataclasses import replace
from numbers import Integral, Real

import numba
import numpy as np
from scipy.sparse import issparse
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, ClusterMixin,
                          TransformerMixin, clone)
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted, validate_data

from ..engine import loop
from ..engine import passes
from ..io import persistence
from ..partition import graph
from ..partition import select
from ..engine.passes import best_scores as _best_scores
from ..engine.passes import tukey_fence as _tukey_fence
from ..model.stage1 import RULES, assign
from ..engine.sources import (INFERENCE_BYTES, MEMORY_BUDGET, LocalBackend, MemoryBlocks,
                              memory_source)
from ..core.validation import (Boolean, Interval, MemoryUsageWarning, Options, Seed, Sequence,
                               check_choice, check_finite, check_scalar, user_stacklevel,
                               validate_params)

INITS = {"random", "k-means++", "kmeans", "graph"}
_INT32_MAX = np.iinfo(np.int32).max
# the fitted attribute that does not end with "_" (replaced as a whole by every fit): the
# FittedModel that predictions, model files and the Dask backend read
_FITTED_PRIVATE = ("_fitted",)
ASSIGN_RULES = set(RULES) | {"graph"}


def is_fitted_name(name):
    """Whether the attribute ``name`` is fitted state (replaced as a whole by every fit): a
    public ``name_`` or one of the private ``_FITTED_PRIVATE``."""
    return name in _FITTED_PRIVATE or (name.endswith("_") and not name.startswith("__"))


def cost_proba(scores):
    """``predict_proba`` of the ``"objective"`` and ``"paper"`` rules (see there) from the
    candidates' scores, shape (n, C, Cs), ``+inf`` for invalid ones: (n, C) float64."""
    s = np.asarray(scores, dtype=np.float64)
    s = s.reshape(s.shape[0], s.shape[1], -1).min(axis=2)
    best = s.min(axis=1, keepdims=True)
    e = np.zeros_like(s)
    ok = np.isfinite(best[:, 0])
    e[ok] = np.exp(-(s[ok] - best[ok]))
    e[~ok] = 1.0
    return e / e.sum(axis=1, keepdims=True)


def set_training_scores(est, labels, outlier_scores, proba):
    """Set ``outlier_scores_``, ``probabilities_`` and ``reject_threshold_`` (see
    :class:`NTClustering`) of the training samples, for every fit."""
    outlier_scores = np.asarray(outlier_scores, dtype=np.float64)
    labels = np.asarray(labels, dtype=np.int64)
    est.outlier_scores_ = outlier_scores
    est.probabilities_ = np.asarray(proba, dtype=np.float64)[np.arange(labels.size), labels]
    if est._fitted.params.rule == "graph":
        est.reject_threshold_ = float(np.max(est._fitted.reference_values(outlier_scores)))
    else:
        est.reject_threshold_ = _tukey_fence(outlier_scores)


def _reference_scores(score, match, ref_scores):
    """``score`` (changed in place) with a row equal to a reference row (``match >= 0``) given
    that row's ``outlier_scores_`` (``ref_scores``; None: unchanged)."""
    if ref_scores is not None:
        hit = match >= 0
        score[hit] = ref_scores[match[hit]]
    return score


def _pass_soft_scores(Xk, carry, match_k, rows, est, ctx):
    """Pass over a block of training rows (its ``rows``, None: all): ``est._soft_scores``, the
    rows equal to a reference row (``ctx[0]``, a :class:`ntnumba.engine.passes.RowIndex`)
    matched to it first."""
    if rows is not None:
        Xk, match_k = Xk[rows], None if match_k is None else match_k[rows]
    if ctx is not None and ctx[0] is not None:
        match_k = (np.full(Xk.shape[0], -1, dtype=np.int64) if match_k is None
                   else np.array(match_k, dtype=np.int64))
        out = np.flatnonzero(match_k < 0)
        if out.size:
            match_k[out] = ctx[0].matches(np.ascontiguousarray(Xk[out]))
    return est._soft_scores(Xk, match_k, ctx)


def _infer_block(Xk, carry, est, ctx, what):
    """Pass over a block of rows of ``predict`` (``what="labels"``: labels, smallest scores),
    ``transform`` ("Y"), ``score`` ("cost"), ``predict_proba`` ("proba") or
    :func:`candidate_scores` ("scores"); ``ctx``: ``NTClustering._vote_context``."""
    X = est._scaled(Xk, est.scale_)
    top = float(np.max(np.abs(X))) if X.size and what != "cost" else 0.0
    if top > MAX_SCALED:  # fourth powers: 1e160 gave -1 and zero codes (score: -inf, warned)
        raise ValueError(f"X: values up to {top:.3g} as the model scales them (the training "
                         f"data: about 1) overflow its scores; at most {MAX_SCALED:g}: give X "
                         "in the units of the training data")
    match = None if ctx is None else est._matches(Xk, X, ctx[0])
    if what == "proba":
        return est._soft_scores(X, match, ctx)[1],
    lab, _, Y, scores, cost = est._stage1(X, ctx, match, labels_only=what == "labels")
    return {"labels": (lab, _best_scores(scores)), "Y": (Y,), "cost": (cost,),
            "scores": (scores,)}[what]


#: ``n_components="auto"``: the paper's M (with more features, the model of a subspace).
AUTO_COMPONENTS = 2100
#: at most this many Stage-1 candidates (``n_clusters x n_similarity``) per sample: 40 bytes
#: each for one sample (a model file declaring 2000 x 2000 took 22.5 GB for 200 rows at once)
MAX_CANDIDATES = 1 << 22
#: inference refuses rows with larger values after the model's scaling (their 4th power overflows)
MAX_SCALED = 1e60
#: ``fit`` warns when the largest feature standard deviation exceeds the median by this factor.
SCALE_WARNING_RATIO = 100.0


def auto_components(n_features):
    """``n_components="auto"``: 2100 whatever ``N`` (see :class:`NTClustering`; model files of
    earlier versions with more features hold ``M = N`` and load as such).

    Examples
    --------
    >>> from ntnumba.estimators.clustering import auto_components
    >>> [auto_components(n) for n in (4, 500, 2100, 3000)]
    [2100, 2100, 2100, 2100]
    """
    return AUTO_COMPONENTS


def _feature_std(X):
    """Per-feature maximum of ``|X|`` and standard deviation (float64), the latter from the
    columns divided by the former: no overflow or underflow at 1e300 or 1e-300."""
    top = np.max(np.abs(X), axis=0).astype(np.float64)
    unit = np.where(top > 0, top, 1.0)
    return top, unit * np.std(X / unit, axis=0, dtype=np.float64)


def _standard_scaler(X):
    """Per-feature mean and 1 / standard deviation (float64; 1 for constant features)."""
    mean = np.mean(X, axis=0, dtype=np.float64)
    top, std = _feature_std(X)
    tiny = std <= 1e-12 * np.maximum(top, 1e-300)
    return mean, np.where(tiny, 1.0, 1.0 / np.where(tiny, 1.0, std))


def _warn_feature_scales(X, standardised):
    """Warn when the largest feature standard deviation exceeds the median by
    ``SCALE_WARNING_RATIO`` and nothing standardises them, or when some vary by less than 1e-12
    of the largest (measured ratios: docs/user_guide.md, "Data scale")."""
    if X.shape[0] < 2 or X.shape[1] < 2:
        return
    top, std = _feature_std(X)
    live = std > 1e-12 * top
    if np.count_nonzero(live) < 2:
        return
    j, med = int(np.argmax(std)), float(np.median(std[live]))
    lost = np.flatnonzero(live & (std <= 1e-12 * std[j]))
    fix = ("Pass scaling='standard' (every feature standardised on its own first; --scaling "
           "standard) or scale the features first, e.g. with sklearn.preprocessing."
           "StandardScaler")
    if lost.size:
        warnings.warn(
            f"X: {lost.size} feature(s) vary by less than 1e-12 of the largest standard "
            f"deviation (feature {lost[0]}: {std[lost[0]]:.3g}; feature {j}: {std[j]:.3g}): "
            "they count as constant and take no part in the clustering, the graph's per-feature "
            f"weights (representation='auto') included. {fix}", UserWarning,
            stacklevel=user_stacklevel())
    elif std[j] > SCALE_WARNING_RATIO * med and not standardised:
        warnings.warn(
            f"X: the feature scales differ by orders of magnitude (standard deviation of "
            f"feature {j}: {std[j]:.3g}, median {med:.3g}, ratio {std[j] / med:.0f}); the "
            "largest features dominate the clustering (only assign='graph' with "
            f"representation='auto' weights them). {fix}", UserWarning,
            stacklevel=user_stacklevel())


#: the model's memory warning threshold (and half of the available memory): a 5.8 MB input of
#: 60 x 12000 takes 2.3 GiB; above 2 GiB, machines of 8 GB and CI runners are at risk
MODEL_WARN_BYTES = 2 << 30


def model_memory(n, N, M, itemsize=8):
    """Bytes of the paper's model on ``n`` rows of ``N`` features (``M = n_components``),
    float64 values: three M x N maps, ten ``min(n, N) x (M + N)`` arrays of Stage 3, ``Q`` and
    ``Y`` (in blocks above MEMORY_BUDGET), two N x N for float32 input or for the principal
    subspace (``M < N <= n``); times 1.5 (measured: docs/user_guide.md, "Memory of wide
    data")."""
    return int(12 * (3 * M * N + 10 * min(n, N) * (M + N) + min(2 * n * M, MEMORY_BUDGET // 8)
                     + (2 * N * N if itemsize < 8 or M < N <= n else 0)))


def _check_model_memory(n, p, N, itemsize):
    """MemoryError when :func:`model_memory` exceeds the available memory, MemoryUsageWarning
    above half of it or :data:`MODEL_WARN_BYTES` (before any work of the fit)."""
    need, avail = model_memory(n, N, p.n_components, itemsize), graph.available_memory() or np.inf
    if not p.learn_transform or need <= min(MODEL_WARN_BYTES, 0.5 * avail):
        return
    msg = (f"the fit needs about {need / 2**30:.1f} GiB ({avail / 2**30:.1f} GiB available): "
           f"A is n_components x n_features = {p.n_components} x {N}, and Stage 3 holds up to "
           "three such maps and its workspaces. learn_transform=False gives the same labels_ at "
           "the default assign='graph' without them; or reduce the features first (e.g. PCA)")
    if need > avail:
        raise MemoryError(msg)
    warnings.warn(msg, MemoryUsageWarning, stacklevel=user_stacklevel())


def _auto_as_fitted(est, p):
    """``p`` of a continued fit: ``n_components="auto"`` keeps the fitted map's M (the earlier
    rule ``max(2100, N)`` of model files of earlier versions)."""
    A = est._fitted.state.A
    if est.n_components == "auto" and A is not None and A.shape[0] != p.n_components:
        return replace(p, n_components=A.shape[0])
    return p


def _graph_neighbors(p, n):
    """``p`` with ``n_neighbors`` below the ``n`` rows the graph partitions (with a warning):
    ``min(5, n // (2 n_clusters))``, at least 1 (a complete graph: 3 blobs of 20, ARI -0.01)."""
    if "graph" not in (p.rule, p.init) or p.n_neighbors < n:
        return p
    k = max(1, min(5, n // (2 * p.n_clusters)))
    warnings.warn(f"n_neighbors={p.n_neighbors} is not below the {n} samples the graph "
                  "partitions: its k-NN graph would join every sample to every other and show "
                  f"no clusters. Using n_neighbors={k} (the default 5, at most n_samples / "
                  f"(2 n_clusters)); pass n_neighbors < {n} to choose", UserWarning,
                  stacklevel=user_stacklevel())
    return replace(p, n_neighbors=k)


def _warn_empty_clusters(src, labels, C):
    """Warn when clusters of the fit are empty, with the number of distinct rows of the
    source ``src`` (one hash pass) when it is below ``C``: the likely cause."""
    sizes = np.bincount(labels, minlength=C)
    empty = int(np.count_nonzero(sizes == 0))
    if not empty:
        return
    nd = np.unique(np.concatenate(src.map(passes.pass_row_hashes))).size
    cause = (f"X has only {nd} distinct rows (duplicated rows): at most {nd} clusters can "
             "hold samples" if nd < C else "the data may hold fewer groups than n_clusters, or the "
             "fit stopped early (max_iter)")
    warnings.warn(f"{empty} of the n_clusters={C} clusters are empty (the others hold "
                  f"{sizes[sizes > 0].min()} to {sizes.max()} of the {labels.size} samples): "
                  f"{cause}. Lower n_clusters (to {min(nd, C - empty)} or fewer)", RuntimeWarning,
                  stacklevel=user_stacklevel())


@contextmanager
def _numba_threads(n_jobs):
    """Map ``n_jobs`` to numba's thread count and restore it afterwards."""
    if n_jobs is None:
        yield
        return
    n_max = numba.config.NUMBA_NUM_THREADS
    n = n_max if n_jobs == -1 else (max(1, n_max + 1 + n_jobs) if n_jobs < 0 else n_jobs)
    n = min(n, n_max)
    old = numba.get_num_threads()
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old)


#: The declarative checks of :class:`NTClustering`'s parameters (name -> alternatives; see
#: :func:`ntnumba.core.validation.validate_params`); checks between parameters are in ``_params``.
PARAMETER_CONSTRAINTS = {
    "n_clusters": [Interval(Integral, 1)],
    "n_components": [Options("auto"), Interval(Integral, 1)],
    "n_similarity": [Interval(Integral, 1)],
    **{name: [Interval(Real, 0.0)] for name in ("lambda0", "lambda1", "lambda_e", "lambda2",
                                                "lambda3", "lambda4")},
    "lambda_a": [Interval(Real, 0.0, low_inclusive=False)],
    "learn_transform": [Boolean()],
    "assign": [Options(*ASSIGN_RULES)],
    "online_fraction": [None, Interval(Real, 0.0, 1.0, low_inclusive=False)],
    "online_rate": [Interval(Real, 0.0, 1.0)],
    "init": [Options(*INITS)],
    "n_neighbors": [Interval(Integral, 1)],
    "n_shared": [Options("auto"), Interval(Integral, 0), Sequence(Interval(Integral, 0))],
    "representation": [Options(*select.REPRESENTATIONS)],
    "max_iter": [Interval(Integral, 1)],
    "tol": [Interval(Real, 0.0)],
    "n_init": [Interval(Integral, 1)],
    "scaling": [None, Options("rms", "standard", "none")],
    "random_state": [Seed()],
    "n_jobs": [None, Interval(Integral)],
    "verbose": [Interval(Integral, 0)],
    "warm_start": [Boolean()],
}


#: settings that change nothing the estimator returns given the others: name -> (when, why);
#: ``fit`` warns when one of them is set to other than its default there
_NOT_LEARNED = (lambda v: not v["learn_transform"], "A is not learned (learn_transform=False)")
NO_EFFECT = {
    "tol": (lambda v: v["max_iter"] == 1, "max_iter=1 stops after one iteration"),
    "online_rate": (lambda v: v["online_fraction"] is None or not v["learn_transform"],
                    "it weights the online update of A (online_fraction, learn_transform)"),
    **{name: _NOT_LEARNED for name in ("n_components", "online_fraction", "lambda2", "lambda3",
                                       "lambda4")},
}


def warn_no_effect(params):
    """Warn (``UserWarning``) about every parameter of ``params`` (``get_params()``) set to
    other than its default where it changes nothing the estimator returns (:data:`NO_EFFECT`).

    Examples
    --------
    >>> import warnings
    >>> from ntnumba import NTClustering
    >>> from ntnumba.estimators.clustering import warn_no_effect
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     warn_no_effect(NTClustering(3, tol=0.1).get_params())
    >>> str(w[0].message)
    'tol=0.1 has no effect: max_iter=1 stops after one iteration'
    """
    import inspect
    defaults = inspect.signature(NTClustering).parameters
    for name, (when, why) in NO_EFFECT.items():
        value = params[name]
        default = defaults[name].default
        if when(params) and not (value is default or value == default):
            warnings.warn(f"{name}={value!r} has no effect: {why}", UserWarning,
                          stacklevel=user_stacklevel())


class NTClustering(ClassNamePrefixFeaturesOutMixin, ClusterMixin, TransformerMixin,
                   BaseEstimator):
    """Clustering with jointly learned nonlinear transforms (Kostadinov et al., 2019).

    By default (``assign="graph"``) the clusters are a spectral partition of the k-NN graph of
    the samples with their shared directions removed; new samples get the k-NN vote of the
    training samples. The paper's model is then fitted to those clusters: a linear map ``A``
    (``n_components x n_features``), dissimilarity parameters ``tau`` (one per cluster) and
    similarity parameters ``nu``, learned by alternating the three stages (``max_iter`` times);
    they give :meth:`transform` and :meth:`score`, not the clusters. With ``assign="objective"``
    or ``"paper"`` every sample is assigned the cluster of its best candidate NT representation
    at every iteration (the paper's rule).

    Parameters
    ----------
    n_clusters : int, default 8
        Number of clusters ``C`` (= number of dissimilarity parameters ``Cd``).
    n_components : int or "auto", default "auto"
        Dimension ``M`` of the NT representations (rows of ``A``); ``"auto"``: 2100, the
        paper's. The model lives in the training rows' principal subspace of ``min(rank, M)``
        dimensions (their span with fewer rows than features or ``M``), its cost bounded by
        ``M``; with ``assign="graph"`` without the ``n_shared_`` directions the partition
        removed. ``A`` is zero outside it: that part of a new row does not enter
        ``transform`` or ``score``. Ignored when ``learn_transform=False`` (``M = N``).
    n_similarity : int, default 2
        Number of similarity parameters ``Cs`` (>= 1).
    lambda0, lambda1 : float, default 0.03
        Weights of the min-max score and of the l1 norm of the representations. When no
        training sample keeps a nonzero representation (``lambda1`` at or above every
        ``|A x|`` of the scaled data) ``fit`` warns (``RuntimeWarning``) with ``max |A x|``.
    lambda_e : float, default 0.001
        Weight of the discrimination prior ``u_p`` on the parameters.
    lambda_a : float, default 1.0
        Weight of the adjustment term ``||A x - tau - nu||^2`` (the paper writes lambda2 both for
        it and for ``||A||_F``; here they are separate).
    lambda2, lambda3, lambda4 : float, default 16.0
        Priors of ``A``: ``||A||_F^2``, ``||A A^T - I||_F^2`` and ``-log det(A^T A)``.
    learn_transform : bool, default True
        Learn ``A``; with False, ``A = I`` and only Stages 1 and 2 alternate.
    assign : {"graph", "objective", "paper"}, default "graph"
        ``"paper"``: the paper's Stage 1 (min-max score only; read literally it collapses
        into one cluster while learning). ``"objective"``: the full per-sample cost of the
        learning problem. ``"graph"`` (not in the paper): a spectral partition of the k-NN
        graph of the samples with their shared directions removed, computed once and kept;
        the iterations fit ``tau``, ``nu`` and ``A`` to it (user guide, docs/algorithm.md).
    online_fraction : None or float in (0, 1], default None
        Paper's online A update: ``A_hat`` from a random fraction of the samples.
    online_rate : float in [0, 1], default 0.5
        ``A <- (1 - rate) A + rate A_hat`` when ``online_fraction`` is set.
    init : {"graph", "k-means++", "random", "kmeans"}, default "graph"
        tau: the paper's i.i.d. N(0, 1) (``"random"``), k-means++ seeds or one KMeans run on
        ``A X``, or the means of ``A x`` over the clusters of the graph partition.
    n_neighbors : int, default 5
        ``k`` of the k-NN graph (``assign="graph"`` / ``init="graph"``) and of the k-NN vote
        that labels new samples in :meth:`predict`.
    n_shared : "auto", int or sequence of int, default "auto"
        Number of shared principal directions of the samples removed before the graph is
        built; ``"auto"``: of 0, 1, 2, 4, 8, 16 the one of smallest relaxed normalised cut.
    representation : {"auto", "as-is"}, default "auto"
        What the graph sees. ``"auto"``, decided from the data alone (user guide): features
        of very different scales standardised; at most 16 features, a Euclidean graph; more,
        the ``4 n_clusters`` leading principal directions or a UMAP-type layout when its
        normalised cut is lower. ``"as-is"``: none of these.
    max_iter : int, default 1
        Maximum number of iterations (the paper runs 100). With ``assign="graph"`` the
        clustering does not change over them (docs/table5.md: ``transform``'s 1-NN accuracy).
    tol : float, default 1e-4
        Stop when the relative change of the objective is below ``tol``.
    n_init : int, default 1
        Restarts from different initialisations; the one with the lowest objective is kept.
    scaling : {"rms", "standard", "none", None}, default "rms"
        ``"rms"``: one scalar (``scale_``) makes the mean squared feature value 1, the scale
        of the paper's unit-variance images; the features keep their relative scales (right
        for pixels). ``"standard"``: every feature centred and divided by its standard
        deviation first (``feature_mean_``, ``feature_scale_``; not with ``chunk_size`` or
        Dask). ``"none"`` / ``None``: the data as given. ``fit`` warns about features of very
        different or vanishing scales. User guide, "Data scale".
    random_state : int, RandomState instance or None, default None
        Seed of every random draw (initialisation, online subsets).
    n_jobs : int or None, default None
        Numba threads during fit/predict (-1: all); restored afterwards.
    verbose : int, default 0
        On stderr: 1, a line per phase and iteration with times and a total, compilation timed
        apart, progress bars on a terminal; 2, also the graph partition's internals.
    warm_start : bool, default False
        Continue from the previous fit's parameters and iteration count (``max_iter`` counts
        all iterations): a fit split into pieces equals an uninterrupted fit.

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of every training sample (Stage 1 with the final parameters).
    similarity_labels_ : ndarray of shape (n_samples,)
        Assigned similarity parameter of every training sample.
    components_ : ndarray of shape (n_components, n_features)
        The linear map ``A`` (the identity when ``learn_transform=False``).
    dissimilarity_ : ndarray of shape (n_clusters, n_components)
        ``tau``.
    similarity_ : ndarray of shape (n_similarity, n_components)
        ``nu``.
    objective_history_ : ndarray
        Full objective of the learning problem after every iteration.
    n_iter_ : int
        Iterations run.
    initial_labels_ : ndarray of shape (n_samples,)
        The partition the fit started from: the graph partition of the initial transform
        (``init="graph"``), else the labels of the first iteration's Stage 1. Compare with
        ``labels_`` to see what the iterations changed.
    n_features_in_ : int
        Number of features seen during fit.
    scale_ : float
        The factor applied to the data before the transform (1.0 with ``scaling=None``).
    feature_mean_, feature_scale_ : ndarray of shape (n_features,)
        ``scaling="standard"`` only: the data are ``(X - feature_mean_) * feature_scale_``
        before ``scale_`` is applied.
    reject_threshold_ : float
        Threshold of ``predict(X, reject="auto")`` (see :meth:`predict`).
    outlier_scores_ : ndarray of shape (n_samples,)
        The score ``predict(X, reject=...)`` compares with the threshold (higher: more
        outlying; leave-one-out for ``"graph"``; see :meth:`predict`), as hdbscan's.
    probabilities_ : ndarray of shape (n_samples,)
        Soft score in [0, 1] of every training sample for its own cluster ``labels_``:
        ``predict_proba(X_train)[i, labels_[i]]`` (see :meth:`predict_proba`). As hdbscan's
        ``probabilities_`` (strength of the membership), with another definition.
    n_shared_ : int
        ``assign="graph"`` only: number of shared principal directions removed.
    graph_cut_ : float
        ``assign="graph"`` only: relaxed normalised cut of the graph of the clustering.
    shared_mean_, shared_components_ : ndarray of shape (n_features,) and (n_shared, n_features)
        ``assign="graph"`` only: mean and shared directions of the (scaled, weighted) training
        samples the graph compared, removed from new samples in :meth:`predict`.

    Notes
    -----
    The objective is non-increasing for ``assign="objective"``, batch A updates and
    ``lambda_e = 0``. The paper's literal variant is
    ``NTClustering(C, assign="paper", init="random", scaling=None, max_iter=100)``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba import NTClustering
    >>> rng = np.random.default_rng(0)
    >>> centers = 5.0 * rng.standard_normal((3, 10))
    >>> X = np.repeat(centers, 20, axis=0) + rng.standard_normal((60, 10))
    >>> model = NTClustering(3, n_components=40, random_state=0).fit(X)
    >>> model.labels_.shape, model.transform(X).shape
    ((60,), (60, 40))
    """

    def __init__(self, n_clusters=8, *, n_components="auto", n_similarity=2, lambda0=0.03,
                 lambda1=0.03, lambda_e=0.001, lambda_a=1.0, lambda2=16.0, lambda3=16.0,
                 lambda4=16.0, learn_transform=True, assign="graph", online_fraction=None,
                 online_rate=0.5, init="graph", n_neighbors=5, n_shared="auto",
                 representation="auto", max_iter=1, tol=1e-4, n_init=1, scaling="rms",
                 random_state=None, n_jobs=None, verbose=0, warm_start=False):
        self.n_clusters = n_clusters
        self.n_components = n_components
        self.n_similarity = n_similarity
        self.lambda0 = lambda0
        self.lambda1 = lambda1
        self.lambda_e = lambda_e
        self.lambda_a = lambda_a
        self.lambda2 = lambda2
        self.lambda3 = lambda3
        self.lambda4 = lambda4
        self.learn_transform = learn_transform
        self.assign = assign
        self.online_fraction = online_fraction
        self.online_rate = online_rate
        self.init = init
        self.n_neighbors = n_neighbors
        self.n_shared = n_shared
        self.representation = representation
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.scaling = scaling
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.warm_start = warm_start

    # ------------------------------------------------------------------ validation
    def _params(self, n_features):
        """The checked parameters of a fit on ``n_features`` features (``loop.Params``):
        :data:`PARAMETER_CONSTRAINTS`, then the checks between parameters."""
        v = validate_params(self.get_params(), PARAMETER_CONSTRAINTS)
        M = auto_components(n_features) if v["n_components"] == "auto" else v["n_components"]
        if v["n_clusters"] * v["n_similarity"] > MAX_CANDIDATES:  # one row's Stage 1 in memory
            raise ValueError(f"n_clusters x n_similarity: at most {MAX_CANDIDATES} candidates "
                             f"per sample (40 bytes each), got {v['n_clusters']} x "
                             f"{v['n_similarity']}; use fewer")
        if v["n_jobs"] == 0:
            raise ValueError("n_jobs: must be a positive integer, -1 or None, got 0")
        n_shared = v["n_shared"]
        if n_shared == "auto":
            n_shared = tuple(graph.DEFAULT_SHARED)
        lam = {name: v[name] for name in ("lambda0", "lambda1", "lambda_e", "lambda_a",
                                          "lambda2", "lambda3", "lambda4")}
        return loop.Params(n_clusters=v["n_clusters"], n_components=M,
                           n_similarity=v["n_similarity"], rule=v["assign"], init=v["init"],
                           online_fraction=v["online_fraction"], online_rate=v["online_rate"],
                           n_neighbors=v["n_neighbors"], n_shared=n_shared,
                           representation=v["representation"], max_iter=v["max_iter"],
                           tol=v["tol"], learn_transform=v["learn_transform"], **lam)

    def _check_X(self, X, reset, dense=False):
        """Validated 2-D float32/float64 C array or CSR matrix (``dense``: densified after
        ``graph.check_memory``); a copy only when needed, never modified.

        scikit-learn's validation with every message prefixed by the argument name, then a
        finiteness check that counts the bad entries and names the first row.
        """
        try:
            X = validate_data(self, X, reset=reset, dtype=[np.float64, np.float32],
                              accept_sparse="csr", ensure_all_finite=False,
                              ensure_min_samples=1, ensure_min_features=1, order="C")
        except (TypeError, ValueError) as exc:
            from ..datasets import non_numeric_frame_error   # text columns: which, and fixes
            frame_error = non_numeric_frame_error(X)
            if frame_error is not None:
                raise frame_error from None
            msg = str(exc)
            raise type(exc)(msg if msg.startswith("X:") else f"X: {msg}") from None
        if not issparse(X):
            check_finite(X, "X")
            return X
        check_finite(X.data, "X: the stored values of the sparse matrix")
        if dense:   # the in-memory fit needs every row dense
            graph.check_memory(X.shape[0] * X.shape[1] * X.dtype.itemsize,
                               "X: the dense copy of the sparse matrix for the fit")
            X = X.toarray()
        return X

    def _scaling_mode(self):
        """``scaling`` validated: "rms", "standard" or None ("none")."""
        if self.scaling is None or self.scaling == "none":
            return None
        return check_choice(self.scaling, "scaling", {"rms", "standard", "none"})

    def _standardise(self, X, learn):
        """``scaling="standard"``: ``X`` centred and scaled per feature, and the statistics
        (learned from ``X`` when ``learn``, else the fitted ones); ``{}`` and ``X`` otherwise,
        after the warning about feature scales when ``learn``."""
        if self._scaling_mode() != "standard":
            if learn:
                _warn_feature_scales(X, self.assign == "graph" and self.representation == "auto")
            return X, {}
        if learn:
            mean, scale = _standard_scaler(X)
        else:
            mean, scale = self.feature_mean_, self.feature_scale_
        Z = ((X - mean) * scale).astype(X.dtype, copy=False)
        return np.ascontiguousarray(Z), {"feature_mean_": mean, "feature_scale_": scale}

    def _scaled(self, X, scale):
        """``X`` as the model sees it: per-feature standardisation (if any), times ``scale``."""
        if hasattr(self, "feature_mean_"):
            Z = (X - self.feature_mean_) * self.feature_scale_
            X = Z.astype(X.dtype, copy=False)
        if scale == 1.0:
            return X
        return X * X.dtype.type(scale)

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y=None, *, callback=None, chunk_size=None):
        """Learn A, tau and nu by alternating the three stages.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data (float32 is kept in float32; other numeric types become float64).
            Not modified.
        y : Ignored
            Present for API consistency.
        callback : callable, optional
            ``callback(estimator_state)`` after every iteration (a snapshot with ``A``, ``tau``,
            ``nu``, ``labels``, ``objective_history``, ``n_iter``); return True to stop.
        chunk_size : int, optional
            Stream ``X`` (also a ``numpy.memmap`` or any object with ``shape``, ``dtype`` and
            row slicing) in blocks of ``chunk_size`` rows: one block in memory at a time, the
            same iteration (``docs/scaling.md``). Any fit partitions a seeded random reference
            sample of ``min(n_samples, 20000)`` rows; the others get :meth:`predict`'s vote.

        Returns
        -------
        self : NTClustering
            Interrupted (KeyboardInterrupt) during or after the iterations, it keeps the last
            complete iteration (a RuntimeWarning) and raises again; a refit that raises
            otherwise leaves the previous fitted state as it was.

        Examples
        --------
        >>> import numpy as np
        >>> from ntnumba import NTClustering
        >>> X = np.r_[np.zeros((10, 3)), np.full((10, 3), 4.0)]
        >>> X += np.random.default_rng(0).standard_normal(X.shape) * 0.1
        >>> NTClustering(2, n_components=12, random_state=0).fit(X).labels_.tolist().count(0)
        10
        """
        if chunk_size is not None:
            src = LocalBackend(X.tocsr() if issparse(X) else X, chunk_size)
            try:
                return self._fit_source(src, callback)
            finally:
                src.close()
        warm = self.warm_start and hasattr(self, "_fitted")
        checked = self if warm else clone(self)  # validation sets no attribute of self
        X = checked._check_X(X, reset=not warm, dense=True)
        X, stats = self._standardise(X, learn=not warm)
        p = checked._params(X.shape[1])
        src = memory_source(X, p.n_components if p.learn_transform else X.shape[1])
        src.standardised = True
        try:
            return self._fit_source(src, callback, checked, stats)
        finally:
            src.close()

    def _fit_source(self, src, callback, checked=None, stats=None):
        """Fit over a row-block source (:mod:`ntnumba.engine.sources`, :mod:`ntnumba.dask`);
        transactional: the state is assembled aside and set at once (see ``fit``, Returns)."""
        if not isinstance(self.warm_start, (bool, np.bool_)):
            raise TypeError(f"warm_start: expected a bool, got {self.warm_start!r}")
        warm = self.warm_start and hasattr(self, "_fitted")
        p = self._params(src.N)
        warn_no_effect(self.get_params())
        if self._scaling_mode() == "standard" and not getattr(src, "standardised", False):
            raise ValueError("scaling: 'standard' is not supported by the chunked and Dask "
                             "fits; standardise the features first (e.g. per-feature means and "
                             "standard deviations from one pass) and use scaling='rms'")
        if src.n < p.n_clusters:
            raise ValueError(f"X: n_samples={src.n} should be >= n_clusters={p.n_clusters}")
        p = _graph_neighbors(p, min(src.n, loop.REFERENCE_SIZE))
        if warm and src.N != self.n_features_in_:
            raise ValueError(f"X: has {src.N} features, but the fitted model (warm_start=True) "
                             f"has {self.n_features_in_}")
        p = _auto_as_fitted(self, p) if warm else p
        _check_model_memory(src.n, p, src.N, np.dtype(src.dtype).itemsize)
        seeds = check_random_state(self.random_state).randint(_INT32_MAX, size=self.n_init)
        seed = check_random_state(self.random_state).randint(_INT32_MAX)
        # every BLAS call of the fit under its BLAS thread policy
        say = loop.Report(self.verbose)
        with say, _numba_threads(self.n_jobs), loop.blas_context():
            say(f"fit: {src.n} samples x {src.N} features, {p.n_clusters} clusters")
            src.set_scale(self.scale_ if warm else loop.rms_scale(src, self._scaling_mode()))
            w = None
            if warm:
                w = (self._fitted.state, np.random.RandomState())
                w[1].set_state(self._fitted.rng_state)
            state, rng, ctx = loop.fit(src, p, seeds=seeds, seed=seed, warm=w, verbose=say,
                                       callback=callback)
            try:
                with say.phase("labels and training scores"):
                    attrs, fitted = self._assemble(src, ctx, state, rng, p, seed)
            except KeyboardInterrupt:  # keep the complete iterate: assemble it again
                state.interrupted = True
                say(f"interrupted: assembling iteration {state.n_iter} (interrupt again to "
                    "discard the fit)")
                attrs, fitted = self._assemble(src, ctx, state, rng, p, seed)
        say.total()
        if warm and hasattr(self, "initial_labels_"):  # a continued fit keeps its start
            attrs.setdefault("initial_labels_", self.initial_labels_)
        attrs.update(stats or {})
        self._set_fitted(attrs, fitted, checked, src)
        _warn_empty_clusters(src, attrs["labels_"], p.n_clusters)
        if state.interrupted:
            warnings.warn(f"fit interrupted: keeping iteration {state.n_iter}", RuntimeWarning,
                          stacklevel=user_stacklevel())
            raise KeyboardInterrupt
        return self

    def _assemble(self, src, ctx, state, rng, p, seed):
        """``(attrs, fitted)`` of the iterate ``state``, training scores included."""
        attrs, fitted = loop.fitted_attributes(ctx, state, rng, p, seed)
        return self._with_training_scores(src, attrs, fitted, vote=ctx.vote), fitted

    def _set_fitted(self, attrs, fitted, checked=None, src=None):
        """:func:`set_fitted` (the Dask estimator overrides it)."""
        set_fitted(self, attrs, fitted, checked)

    def partial_fit(self, X, y=None, *, forget=1.0):
        """Update the model with one chunk of a stream (one pass of the three stages).

        The first call initialises from the chunk (a model fitted by ``fit`` or loaded is
        continued). Every call is one iteration of ``fit`` on the chunk with the Stage-2/3 sums
        replaced by running sums times ``forget`` plus the chunk's (``docs/scaling.md``,
        "Streaming"). ``labels_``: the last chunk's (as ``MiniBatchKMeans``). With
        ``assign="graph"`` the first chunk's partition is the reference set, later chunks get
        :meth:`predict`'s vote. A call that raises leaves the model as it was; model files of
        format version 2 or older continue with fresh running sums (a ``RuntimeWarning``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            One chunk (the first one needs ``n_samples >= n_clusters``). Not modified.
        y : Ignored
        forget : float in (0, 1], default 1.0
            A chunk seen ``k`` calls ago counts with weight ``forget**k``. 1.0: all chunks
            equally (the batch problem for fixed assignments); smaller values follow a drifting
            stream (memory of about ``chunk / (1 - forget)`` samples; the paper's online rate
            ``rho`` is ``forget = 1 - rho`` for statistics).

        Returns
        -------
        self : NTClustering

        Examples
        --------
        >>> import numpy as np
        >>> from ntnumba import NTClustering
        >>> rng = np.random.default_rng(0)
        >>> X = np.repeat(5.0 * rng.standard_normal((2, 6)), 50, axis=0)
        >>> X += rng.standard_normal(X.shape)
        >>> X = X[rng.permutation(100)]
        >>> model = NTClustering(2, n_components=12, assign="objective", init="k-means++",
        ...                      random_state=0)
        >>> for chunk in np.array_split(X, 4):
        ...     model = model.partial_fit(chunk, forget=0.9)
        >>> model.n_iter_, model.predict(X).shape
        (4, (100,))
        """
        forget = check_scalar(forget, "forget", low=0.0, low_inclusive=False, high=1.0)
        old = getattr(self, "_fitted", None)
        stream = None if old is None else old.stream
        if old is not None and stream is None and old.sums_lost:
            warnings.warn("partial_fit: model files of format version 2 and older do not "
                          "store the running sums of partial_fit; they restart from this chunk "
                          "(earlier data count only through the loaded parameters)",
                          RuntimeWarning, stacklevel=user_stacklevel())
        # a stream continues only from the state its last call left (a fit() in between
        # continues that fit with fresh running sums)
        cont = stream is not None
        from_fit = not cont and old is not None
        checked = self if (cont or from_fit) else clone(self)
        X = checked._check_X(X, reset=checked is not self, dense=True)
        p = self._params(X.shape[1])
        _check_model_memory(X.shape[0], p, X.shape[1], X.dtype.itemsize)
        p = _auto_as_fitted(self, p) if cont or from_fit else p
        X, stats = self._standardise(X, learn=not (cont or from_fit))
        src = MemoryBlocks(X)
        seed = check_random_state(self.random_state).randint(_INT32_MAX)
        state = None
        if cont or from_fit:
            state, rng = old.state, np.random.RandomState()
            rng.set_state(old.rng_state)
            if from_fit:
                stream = {"theta": None, "transform": None, "scale": self.scale_,
                          "ref": ((old.ref_X, old.reference_labels(self.labels_))
                                  if p.rule == "graph" else None)}
        elif X.shape[0] < p.n_clusters:
            raise ValueError(f"X: the first chunk has n_samples={X.shape[0]}, should be >= "
                             f"n_clusters={p.n_clusters}")
        else:
            rng = np.random.RandomState(check_random_state(self.random_state).randint(_INT32_MAX))
            stream = {"theta": None, "transform": None, "ref": None,
                      "scale": loop.rms_scale(src, self._scaling_mode())}
        ref = stream["ref"]
        p = _graph_neighbors(p, X.shape[0] if ref is None else ref[0].shape[0])
        with _numba_threads(self.n_jobs), loop.blas_context():
            src.set_scale(stream["scale"])
            attrs, fitted, stream = loop.partial(src, state, rng, p, stream, forget, seed,
                                                 verbose=self.verbose)
            attrs = self._with_training_scores(src, attrs, fitted, stream["ref"][0] is src.X
                                               if stream["ref"] is not None else False)
        fitted.stream = stream
        attrs.update(stats)
        self._set_fitted(attrs, fitted, checked)
        return self

    def _with_training_scores(self, src, attrs, fitted, ref_in_src=True, vote=None):
        """``attrs`` with :func:`set_training_scores`'s attributes from one pass over ``src``
        (``ref_in_src``: the reference rows are rows of ``src``, scored leave-one-out;
        ``vote``: the fit's vote of the other rows, ``Context.vote``, not computed again)."""
        tmp = NTClustering(**self.get_params())
        set_fitted(tmp, dict(attrs), fitted)
        graph_rule = fitted.params.rule == "graph"
        match = None
        if graph_rule and ref_in_src:
            rows = fitted.ref_rows()
            n_ref = fitted.ref_X.shape[0]
            if rows is None:
                match = np.arange(src.n)
            else:
                match = np.full(src.n, -1, dtype=np.int64)
                match[rows] = np.arange(n_ref)
        index = None  # the reference rows sorted once for all blocks (rows not matched yet)
        if graph_rule and (match is None or np.any(match < 0)):
            index = passes.RowIndex(fitted.ref_X)
        ctx = tmp._vote_context(index) if graph_rule else None
        todo = np.ones(src.n, dtype=bool)
        if vote is not None and match is not None:
            todo[vote[0]] = False
        args = [(None if match is None else match[s:e], None if todo[s:e].all() else
                 np.flatnonzero(todo[s:e])) for s, e in src.bounds]
        with loop.blas_context():
            res = src.map(_pass_soft_scores, args, (tmp, ctx))
            score, shares = (np.concatenate([r[i] for r in res]) for i in (0, 1))
            if not todo.all():
                score_all = np.empty(src.n)
                shares_all = np.empty((src.n, shares.shape[1]))
                score_all[todo], shares_all[todo] = score, shares
                score_all[vote[0]] = _reference_scores(vote[1], vote[3], ctx[4])
                shares_all[vote[0]] = vote[2]
                score, shares = score_all, shares_all
            set_training_scores(tmp, attrs["labels_"], score, shares)
            if graph_rule and not ref_in_src:  # partial_fit, later chunks
                ref = fitted.ref_X
                tmp.reject_threshold_ = float(np.max(
                    tmp._soft_scores(ref, np.arange(ref.shape[0]), ctx)[0]))
        for k in ("outlier_scores_", "probabilities_", "reject_threshold_"):
            attrs[k] = getattr(tmp, k)
        return attrs

    def _vote_space(self, ref=None):
        """:func:`ntnumba.engine.passes.vote_space` of the fit (reference set ``ref``, default
        the fit's)."""
        ref = self._fitted.ref_X if ref is None else ref
        return passes.vote_space(ref, self.shared_mean_, self.shared_components_,
                                 self._fitted.params.representation)

    def _vote_context(self, index):
        """What the graph vote of every block shares: ``index`` (a RowIndex or None), the vote
        space, the reference rows' graph rows, labels and ``outlier_scores_`` (if set)."""
        fitted, ref = self._fitted, self._fitted.ref_X
        space = self._vote_space(ref)
        scores = getattr(self, "outlier_scores_", None)
        if scores is not None:
            scores = fitted.reference_values(scores)
            scores = scores if scores.shape[0] >= ref.shape[0] else None
        return (index, space, passes.space_rows(ref, space),
                fitted.reference_labels(self.labels_), scores)

    def _infer(self, X, what):
        """:func:`_infer_block` over blocks of the checked rows ``X`` (array or sparse, densified
        a block at a time) of at most ``INFERENCE_BYTES`` of per-row arrays (``X``, ``Q``, ``Y``,
        the ``C x Cs`` scores; at least one row), with the fit's thread counts."""
        p = self._fitted.params
        row = 8 * (2 * X.shape[1] + 3 * self.components_.shape[0]) + 40 * (
            p.n_clusters * p.n_similarity)
        src = LocalBackend(X, max(1, INFERENCE_BYTES // row))
        with _numba_threads(self.n_jobs), loop.blas_context():
            ref, ctx = self._fitted.ref_X, None
            if p.rule == "graph" and X.dtype == np.float32 and ref.dtype == np.float64:
                ref = ref / self.scale_   # float32 rows, float64 model: compared unscaled
                if hasattr(self, "feature_mean_"):
                    ref = ref / self.feature_scale_ + self.feature_mean_
                ref = ref.astype(np.float32)
            if p.rule == "graph":
                ctx = self._vote_context(passes.RowIndex(ref))
            out = None
            with loop.Report(self.verbose).bar(src.n, "samples", len(src.bounds) > 1) as bar:
                for b, (start, stop) in enumerate(src.bounds):
                    part = src.map(_infer_block, None, (self, ctx, what), blocks=[b])[0]
                    out = out or [np.empty((src.n,) + a.shape[1:], a.dtype) for a in part]
                    for o, a in zip(out, part):
                        o[start:stop] = a
                    bar.update(stop - start)
        return out

    def _matches(self, raw, X, index):
        """The reference row equal to each row (``raw``, scaled ``X``; -1: none), compared in
        the coarser of the training and input dtypes (``index``: see ``_infer``)."""
        ref_dtype = self._fitted.ref_X.dtype
        if X.dtype == ref_dtype:
            return index.matches(X)
        if ref_dtype == np.float32:  # float64 rows: in float32, scaled as the fit did
            return index.matches(self._scaled(raw.astype(np.float32), self.scale_))
        return index.matches(raw)

    def _stage1(self, X, ctx=None, match=None, labels_only=False):
        """Stage 1 with the learned parameters of the scaled rows ``X``: ``(labels, sim, Y,
        scores, cost)`` (``cost``: the full per-sample cost of the assigned candidates).

        ``assign="graph"``: labels by the k-NN vote of the training samples (documented in
        :meth:`predict`; ``ctx``, ``match``: see ``_graph_vote``), ``Y`` and ``sim`` the
        Stage-1 candidates of that cluster, ``scores`` the (n, 1) rejection scores of
        :meth:`predict`; with ``labels_only`` it stops after the vote (no ``Q``).
        """
        p = self._fitted.params
        vote = None
        if p.rule == "graph":
            vote = self._graph_vote(X, match, ctx)[:2]
            if labels_only:
                return vote[0], None, None, vote[1][:, None], None
        Q = loop.compute_Q(X, self._fitted.state.A, p.learn_transform)
        # the fit's Stage 1 (pruned: only the winners' scores are used by predict, rejection)
        lab, sim, Y, scores, cost = passes.stage1(Q, self.dissimilarity_, self.similarity_, p,
                                                  None if vote is None else vote[0])
        return lab, sim, Y, scores if vote is None else vote[1][:, None], cost

    def _graph_vote(self, X, match, ctx):
        """The graph rule's labels, rejection scores and vote shares of the scaled rows ``X``
        (:func:`ntnumba.engine.passes.graph_vote`; ``ctx``: :meth:`_vote_context`; ``match``:
        the equal reference row or -1). A row equal to a training row gets its label and
        ``outlier_scores_``."""
        index, space, rows_ref, labels_ref, ref_scores = ctx
        match = index.matches(X) if match is None else np.asarray(match, dtype=np.int64)
        labels, score, shares = passes.graph_vote(X, space, rows_ref, labels_ref,
                                                  self._fitted.params, match=match,
                                                  return_votes=True)
        return labels, _reference_scores(score, match, ref_scores), shares

    def _soft_scores(self, X, match=None, ctx=None):
        """``(outlier scores, predict_proba)`` of the scaled rows ``X`` (see :meth:`predict`,
        :meth:`predict_proba`); ``match``, ``ctx``: see ``_graph_vote``."""
        p = self._fitted.params
        if p.rule == "graph":  # the vote compares graph rows: no Q
            return self._graph_vote(X, match, ctx)[1:]
        Q = loop.compute_Q(X, self._fitted.state.A, p.learn_transform)
        # every candidate's score (the pruned Stage 1 of predict leaves the losers at +inf)
        scores = assign(Q, self.dissimilarity_, self.similarity_, p.lambda0, p.lambda1,
                        rule=p.rule, lambda_a=p.lambda_a)[3]
        return _best_scores(scores), cost_proba(scores)

    # ------------------------------------------------------------------ inference
    def predict(self, X, reject=None):
        """Cluster of each sample, optionally with the rejection option (label -1).

        ``assign="objective"`` or ``"paper"``: Stage 1 with the learned A, tau and nu.
        ``"graph"``: the rows vote, by graph similarity, for the labels of their
        ``n_neighbors`` most similar training samples (as the graph compared them); a row
        equal to a training sample keeps its label, so ``fit(X).predict(X)`` equals
        ``labels_`` for every rule.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        reject : None, float or "auto", default None
            Rejection option (paper, Sec. 1 (d)): samples whose score is above a threshold get
            the label -1. The score: the smallest Stage-1 score (``sP`` for ``"paper"``, the
            full per-sample cost for ``"objective"``); for ``"graph"`` ``1 -`` the mean graph
            similarity to the ``n_neighbors`` most similar training samples. A float is the
            threshold; ``"auto"``: ``reject_threshold_`` (``"graph"``: the largest
            leave-one-out score of a training sample; otherwise Tukey's far-out fence of the
            training scores on a log scale, ``Q3 (Q3 / Q1)^3``; ``docs/results.md``).

        Returns
        -------
        labels : ndarray of shape (n_samples,), int64

        Examples
        --------
        >>> import numpy as np
        >>> from ntnumba import NTClustering
        >>> X = np.r_[np.zeros((10, 3)), np.full((10, 3), 4.0)]
        >>> X += np.random.default_rng(0).standard_normal(X.shape) * 0.1
        >>> model = NTClustering(2, n_components=12, random_state=0).fit(X)
        >>> bool(model.predict(X[:1] + 4.0)[0] == model.labels_[-1])
        True
        """
        check_is_fitted(self)
        if isinstance(reject, str):
            check_choice(reject, "reject", {"auto"})
        elif reject is not None:
            reject = check_scalar(reject, "reject")
        labels, scores = self._infer(self._check_X(X, reset=False), "labels")
        if reject is None:
            return labels
        thr = self.reject_threshold_ if isinstance(reject, str) else float(reject)
        labels[scores > thr] = -1
        return labels

    def predict_proba(self, X):
        """Soft assignment: a score in [0, 1] per sample and cluster, summing to 1 per sample.

        Defined from the model's own scores, per assignment rule:

        - ``assign="graph"``: the shares of the similarity-weighted k-NN vote of
          :meth:`predict` (neighbour ``j`` adds ``max(rho_j, 0) + 1e-12`` to its cluster,
          ``rho_j`` its graph similarity, then the row is divided by its sum). A row equal to a
          training sample gets the vote of the other training samples (leave-one-out).
        - ``"objective"`` and ``"paper"``: ``p_k = exp(-s_k) / sum_j exp(-s_j)``, ``s_k`` the
          smallest score the rule minimises over the candidates of cluster ``k`` (the full
          per-sample cost for ``"objective"``, the min-max score ``sP`` for ``"paper"``): the
          score read as a negative log-likelihood, at temperature 1. ``1/C`` everywhere for a
          sample whose candidates are all invalid.

        For new samples ``predict_proba(X).argmax(axis=1) == predict(X)`` (up to ties). On
        the training samples of the graph rule the labels are the spectral partition, not a
        vote, so the argmax can differ from ``labels_``; the share of a sample's own cluster is
        ``probabilities_``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        proba : ndarray of shape (n_samples, n_clusters), float64

        Examples
        --------
        >>> import numpy as np
        >>> from ntnumba import NTClustering
        >>> X = np.r_[np.zeros((10, 3)), np.full((10, 3), 4.0)]
        >>> X += np.random.default_rng(0).standard_normal(X.shape) * 0.1
        >>> model = NTClustering(2, n_components=12, random_state=0).fit(X)
        >>> proba = model.predict_proba(X[:2] + 0.05)
        >>> proba.shape, np.allclose(proba.sum(axis=1), 1.0)
        ((2, 2), True)
        >>> bool((proba.argmax(axis=1) == model.predict(X[:2] + 0.05)).all())
        True
        """
        check_is_fitted(self)
        return self._infer(self._check_X(X, reset=False), "proba")[0]

    @property
    def _n_features_out(self):
        """Number of output features of :meth:`transform` (``get_feature_names_out``)."""
        return self.components_.shape[0]

    def transform(self, X):
        """The assigned NT representations ``y`` of each sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        Y : ndarray of shape (n_samples, n_components)
            Sparse-ish representations with ``sign(y) = sign(A x)``, in the dtype of ``X``.

        Examples
        --------
        >>> import numpy as np
        >>> from ntnumba import NTClustering
        >>> X = np.random.default_rng(0).standard_normal((30, 4))
        >>> NTClustering(2, n_components=16, random_state=0).fit(X).transform(X).shape
        (30, 16)
        """
        check_is_fitted(self)
        return self._infer(self._check_X(X, reset=False), "Y")[0]

    def score(self, X, y=None):
        """Opposite of the per-sample cost of the learning problem summed over ``X``.

        The cost of a sample is ``1/2||A x - y||^2 + lambda1||y||_1 + lambda0 sP +
        lambda_a/2 ||A x - tau - nu||^2`` at its assigned candidate (higher is better, as
        scikit-learn's ``KMeans.score``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : Ignored

        Returns
        -------
        score : float

        Examples
        --------
        >>> import numpy as np
        >>> from ntnumba import NTClustering
        >>> X = np.random.default_rng(0).standard_normal((30, 4))
        >>> model = NTClustering(2, n_components=16, random_state=0).fit(X)
        >>> bool(model.score(X) <= 0)
        True
        """
        check_is_fitted(self)
        # in float64 whatever the dtype of X: the cost of a float32 sample can exceed float32
        X = self._check_X(X, reset=False).astype(np.float64, copy=False)
        cost = self._infer(X, "cost")[0]
        with np.errstate(over="ignore"):
            total = float(np.sum(cost, dtype=np.float64))
        if not np.isfinite(total):
            big = int(np.sum(~np.isfinite(cost)))
            warnings.warn(f"score: the cost of {big or 'the sum of all'} sample(s) of X exceeds "
                          "the float64 range (samples about 1e154 times the scale of the "
                          "training data): the score is -inf. Such samples lie far outside the "
                          "training data; check their units", RuntimeWarning,
                          stacklevel=user_stacklevel())
        return -total

    def save(self, path):
        """Save the fitted model to a versioned ``.npz`` file (no pickle); see :func:`ntnumba.load`.

        Parameters
        ----------
        path : str or path-like
            Destination; ``.npz`` is appended when missing.

        Returns
        -------
        path : str
            The file written.

        Examples
        --------
        >>> import numpy as np, tempfile, os
        >>> from ntnumba import NTClustering, load
        >>> X = np.random.default_rng(0).standard_normal((30, 4))
        >>> model = NTClustering(2, n_components=8, random_state=0).fit(X)
        >>> path = model.save(os.path.join(tempfile.mkdtemp(), "model"))
        >>> path.endswith(".npz"), load(path).n_iter_ == model.n_iter_
        (True, True)
        """
        return persistence.save_model(path, self.get_params(), *fitted_parts(self))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.sparse = True
        return tags


def load(path):
    """Load a model written by :meth:`NTClustering.save`.

    Parameters
    ----------
    path : str or path-like
        The ``.npz`` file.

    Returns
    -------
    model : NTClustering
        Fitted, every public fitted attribute of the saved model: its methods give its bits,
        ``warm_start`` and ``partial_fit`` continue as it would (format version 2 and older:
        see ``docs/user_guide.md``, "Saving and loading models").

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is truncated or corrupted, not an ntnumba model, or of a newer format
        version than this library reads. The message names the file.

    Examples
    --------
    >>> import numpy as np, tempfile, os
    >>> import ntnumba
    >>> X = np.random.default_rng(0).standard_normal((30, 4))
    >>> model = ntnumba.NTClustering(2, n_components=8, random_state=0).fit(X)
    >>> path = model.save(os.path.join(tempfile.mkdtemp(), "model.npz"))
    >>> bool(np.array_equal(ntnumba.load(path).predict(X), model.predict(X)))
    True
    """
    params, attrs, fitted = persistence.read_model(path, _file_params)
    model = NTClustering(**params)
    set_fitted(model, attrs, fitted)
    return model


def _file_params(params, n_features):
    """The validated parameters of a model file's ``params`` for ``n_features`` features."""
    try:
        model = NTClustering(**params)
    except TypeError as exc:  # a parameter NTClustering does not take
        raise persistence.UnreadableParameters(str(exc)) from None
    return model._params(n_features)


def set_fitted(est, attrs, fitted, checked=None):
    """Replace the fitted state of ``est`` by the public ``attrs`` and the
    :class:`~ntnumba.engine.fitted.FittedModel` ``fitted`` in one step (plus ``checked``'s
    ``n_features_in_``, ``feature_names_in_``); every fit, :func:`load` and Dask use it."""
    if checked is not None:
        for k in ("n_features_in_", "feature_names_in_"):
            if hasattr(checked, k):
                attrs.setdefault(k, getattr(checked, k))
    attrs = dict(attrs, _fitted=fitted)
    stale = [k for k in vars(est) if k not in attrs and is_fitted_name(k)]
    for k in stale:
        delattr(est, k)
    vars(est).update(attrs)


def fitted_parts(est):
    """``(attrs, fitted)``: the public fitted attributes of ``est`` and its
    :class:`~ntnumba.engine.fitted.FittedModel` (the inverse of :func:`set_fitted`)."""
    check_is_fitted(est)
    attrs = {k: v for k, v in vars(est).items() if is_fitted_name(k) and k != "_fitted"}
    return attrs, est._fitted


def fit_source(est, src, callback=None):
    """Fit the estimator ``est`` over a row-block source (:mod:`ntnumba.engine.sources`; the
    Dask backend's :class:`ntnumba.dask.DaskBackend`): the fit of every backend."""
    return est._fit_source(src, callback)


def candidate_scores(model, X):
    """The Stage-1 scores of the rows ``X`` with the fitted ``model``: shape (n, C, Cs), every
    candidate's score of the ``"objective"`` and ``"paper"`` rules (``+inf``: invalid or
    pruned), or (n, 1), the rejection score of the graph rule; what
    ``predict(X, reject=...)`` thresholds (its smallest entry per row)."""
    check_is_fitted(model)
    return model._infer(model._check_X(X, reset=False), "scores")[0]
