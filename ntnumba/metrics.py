"""Evaluation measures of the NT clustering paper (Kostadinov et al. 2019, Sec. 5, Tables 1-5).

* Clustering quality (Tables 2-4): :func:`clustering_accuracy` (CA, Hungarian matching),
  :func:`nmi`, :func:`ari`, and :func:`evaluate` for all three at once.
* Properties of the linear map ``A`` (Table 1): :func:`condition_number` and
  :func:`mutual_coherence`.
* k-NN classification on a representation (Table 5): :func:`knn_accuracy` with the split of
  :func:`knn_split`.
"""
from __future__ import annotations

import numpy as np

from .core.linalg import svd

__all__ = [
    "clustering_accuracy",
    "nmi",
    "ari",
    "evaluate",
    "condition_number",
    "mutual_coherence",
    "knn_split",
    "knn_accuracy",
]


def _check_labelings(y_true, y_pred):
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if y_true.ndim != 1 or y_pred.ndim != 1:
        raise ValueError(
            f"y_true and y_pred must be 1-D, got shapes {y_true.shape} and {y_pred.shape}"
        )
    if y_true.shape[0] != y_pred.shape[0]:
        raise ValueError(
            "y_true and y_pred must have the same length, "
            f"got {y_true.shape[0]} and {y_pred.shape[0]}"
        )
    if y_true.shape[0] == 0:
        raise ValueError("y_true and y_pred are empty")
    return y_true, y_pred


def clustering_accuracy(y_true, y_pred, *, reject_label=-1):
    """Clustering accuracy (CA): the best one-to-one matching of clusters to classes.

    ``CA = max_m (1/n) sum_i [m(y_pred_i) == y_true_i]`` over one-to-one maps ``m`` from
    predicted clusters to true classes, found with the Hungarian algorithm
    (``scipy.optimize.linear_sum_assignment``) on the cluster/class contingency table.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        True class labels (any values, e.g. ints or strings).
    y_pred : array-like of shape (n_samples,)
        Cluster labels (any values). The numbers of clusters and classes may differ: the
        surplus clusters (or classes) stay unmatched and their samples count as errors.
    reject_label : scalar or None, default -1
        Predicted label meaning "rejected": never matched, counted as wrong (still in ``n``).
        ``None``: every predicted value is an ordinary cluster. ``y_true`` is not affected.

    Returns
    -------
    float
        In [0, 1].

    Examples
    --------
    >>> from ntnumba.metrics import clustering_accuracy
    >>> clustering_accuracy([0, 0, 1, 1], [1, 1, 0, 0])
    1.0
    >>> clustering_accuracy([0, 0, 1, 1], [5, 5, 5, -1])
    0.5
    """
    from scipy.optimize import linear_sum_assignment

    y_true, y_pred = _check_labelings(y_true, y_pred)
    n = y_true.shape[0]
    keep = np.ones(n, dtype=bool) if reject_label is None else (y_pred != reject_label)
    if not np.any(keep):
        return 0.0
    _, t = np.unique(y_true[keep], return_inverse=True)
    _, p = np.unique(y_pred[keep], return_inverse=True)
    t, p = t.ravel(), p.ravel()
    table = np.zeros((p.max() + 1, t.max() + 1), dtype=np.int64)
    np.add.at(table, (p, t), 1)
    rows, cols = linear_sum_assignment(table, maximize=True)
    return float(table[rows, cols].sum()) / n


def nmi(y_true, y_pred, *, average_method="arithmetic"):
    """Normalised mutual information between two labelings.

    ``NMI = I(T; P) / mean(H(T), H(P))`` with the arithmetic mean by default (scikit-learn's
    default, ``sklearn.metrics.normalized_mutual_info_score``). Invariant to renaming labels.
    A label of -1 is an ordinary cluster here (unlike :func:`clustering_accuracy`).

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        The two labelings.
    average_method : {"arithmetic", "geometric", "min", "max"}, default "arithmetic"
        How the two entropies are averaged in the denominator (``"geometric"``,
        ``sqrt(H(T) H(P))``, is the normalisation of Strehl & Ghosh used in older papers).

    Returns
    -------
    float
        In [0, 1].

    Examples
    --------
    >>> from ntnumba.metrics import nmi
    >>> nmi([0, 0, 1, 1], [1, 1, 0, 0])
    1.0
    """
    from sklearn.metrics import normalized_mutual_info_score

    y_true, y_pred = _check_labelings(y_true, y_pred)
    return float(normalized_mutual_info_score(y_true, y_pred, average_method=average_method))


def ari(y_true, y_pred):
    """Adjusted Rand index (Hubert & Arabie), ``sklearn.metrics.adjusted_rand_score``.

    1 for identical partitions, about 0 for random ones (can be negative). A label of -1 is an
    ordinary cluster here.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        The two labelings.

    Returns
    -------
    float

    Examples
    --------
    >>> from ntnumba.metrics import ari
    >>> ari([0, 0, 1, 1], [1, 1, 0, 0])
    1.0
    """
    from sklearn.metrics import adjusted_rand_score

    y_true, y_pred = _check_labelings(y_true, y_pred)
    return float(adjusted_rand_score(y_true, y_pred))


def evaluate(y_true, y_pred):
    """CA, NMI and ARI of a clustering in one dict.

    Parameters
    ----------
    y_true, y_pred : array-like of shape (n_samples,)
        True classes and predicted clusters (-1 in ``y_pred`` = rejected, see
        :func:`clustering_accuracy`).

    Returns
    -------
    dict
        ``{"ca": clustering_accuracy, "nmi": nmi (arithmetic), "ari": ari}``, floats in [0, 1]
        (ARI may be slightly negative).

    Examples
    --------
    >>> from ntnumba.metrics import evaluate
    >>> evaluate([0, 0, 1, 1], [1, 1, 0, 0])
    {'ca': 1.0, 'nmi': 1.0, 'ari': 1.0}
    """
    return {
        "ca": clustering_accuracy(y_true, y_pred),
        "nmi": nmi(y_true, y_pred),
        "ari": ari(y_true, y_pred),
    }


def _check_matrix(A):
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.size == 0:
        raise ValueError(f"A must be a non-empty 2-D array, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError("A contains NaN or inf")
    return A


def condition_number(A):
    """Condition number ``kappa(A) = s_max / s_min`` of the singular values of ``A``.

    The paper's Table 1 measure for the learned linear map ``A`` (M x N). For a non-square
    matrix the ``min(M, N)`` singular values are used; a rank-deficient ``A`` gives ``inf``.

    Parameters
    ----------
    A : array-like of shape (M, N)

    Returns
    -------
    float
        >= 1, or ``inf``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.metrics import condition_number
    >>> condition_number(np.diag([4.0, 2.0, 1.0]))
    4.0
    """
    A = _check_matrix(A)
    s = svd(A, compute_uv=False)
    if s[-1] <= 0.0:
        return float("inf")
    return float(s[0] / s[-1])


def mutual_coherence(A, *, vectors="rows"):
    """Expected mutual coherence: mean squared normalised off-diagonal Gram entry.

    With ``b_1..b_M`` the rows of ``A`` (M x N) scaled to unit norm,

        mu(A) = 1 / (M (M - 1)) * sum_{i != j} (b_i . b_j)^2 ,

    the mean squared off-diagonal entry of ``G = B B^T``, computed through the N x N ``B^T B``.
    A zero row is counted as orthogonal to every other row.

    Parameters
    ----------
    A : array-like of shape (M, N)
        Typically the overcomplete linear map, M >= N.
    vectors : {"rows", "columns"}, default "rows"
        Which vectors of ``A`` are compared: the M rows (the analysis atoms; default, as in the
        package's design notes) or the N columns (``mu(A.T)``).

    Returns
    -------
    float
        In [0, 1]; 0 iff the vectors are pairwise orthogonal.

    Notes
    -----
    For M > N unit rows the Welch bound gives ``mu >= (M / N - 1) / (M - 1)`` (tight frames);
    i.i.d. Gaussian rows give about ``1 / N``. The paper's Table 1 (mu ~ 1e-6, M = 2100, N =
    400..576, definition not stated) is below the row Welch bound (~1.5e-3 at N = 500), so it
    cannot be compared with this measure as is (``vectors="columns"`` has no such bound).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.metrics import mutual_coherence
    >>> mutual_coherence(np.eye(3))
    0.0
    >>> mutual_coherence(np.vstack([np.eye(2), np.eye(2)]))  # 4 pairs of equal rows / 12
    0.3333333333333333
    """
    A = _check_matrix(A)
    if vectors == "columns":
        A = A.T
    elif vectors != "rows":
        raise ValueError(f"vectors must be 'rows' or 'columns', got {vectors!r}")
    M = A.shape[0]
    if M < 2:
        raise ValueError(f"mutual_coherence needs at least 2 {vectors}, got {M}")
    norms = np.linalg.norm(A, axis=1)
    nonzero = norms > 0
    B = A[nonzero] / norms[nonzero, None]
    if B.shape[0] <= B.shape[1]:
        G = B @ B.T
        off = float(np.sum(G * G)) - float(np.sum(np.diag(G) ** 2))
    else:
        H = B.T @ B
        off = float(np.sum(H * H)) - B.shape[0]
    return max(off, 0.0) / (M * (M - 1))


def knn_split(y, *, test_size=0.3, random_state=0):
    """Stratified train/test split indices used by :func:`knn_accuracy`.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Class labels (each class needs at least 2 samples).
    test_size : float or int, default 0.3
        Fraction (or number) of samples in the test part, as in
        ``sklearn.model_selection.train_test_split``.
    random_state : int, default 0
        Seed of the split.

    Returns
    -------
    train_idx, test_idx : ndarray of int
        Sorted, disjoint index arrays covering all samples.

    Examples
    --------
    >>> from ntnumba.metrics import knn_split
    >>> tr, te = knn_split([0] * 10 + [1] * 10)
    >>> len(tr), len(te)
    (14, 6)
    """
    from sklearn.model_selection import train_test_split

    y = np.asarray(y).ravel()
    idx = np.arange(y.shape[0])
    tr, te = train_test_split(idx, test_size=test_size, random_state=random_state, stratify=y)
    return np.sort(tr), np.sort(te)


def knn_accuracy(Z, y, *, n_neighbors=1, test_size=0.3, random_state=0, metric="euclidean"):
    """k-NN classification accuracy of a representation (the paper's Table 5, our protocol).

    ``sklearn.neighbors.KNeighborsClassifier`` fitted on the training rows of ``Z`` of
    :func:`knn_split`, scored on its test rows. The paper states no split, ``k`` or distance:
    this is *our* protocol (1-NN, Euclidean, 70/30 stratified, seed 0). To learn the transform
    on the training part only, as the paper does, fit on ``X[train_idx]`` of the same
    ``knn_split``, fill ``Z`` from the fitted model and call this with the same arguments.

    Parameters
    ----------
    Z : array-like of shape (n_samples, n_features)
        The representation (e.g. NT codes, or the raw images).
    y : array-like of shape (n_samples,)
        Class labels.
    n_neighbors : int, default 1
        ``k``.
    test_size : float or int, default 0.3
        Test fraction (or count), see :func:`knn_split`.
    random_state : int, default 0
        Seed of the split.
    metric : str, default "euclidean"
        Distance of the classifier (any ``KNeighborsClassifier`` metric).

    Returns
    -------
    float
        Test accuracy in [0, 1].

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.metrics import knn_accuracy
    >>> rng = np.random.default_rng(0)
    >>> y = np.repeat([0, 1], 20)
    >>> Z = rng.normal(size=(40, 2)) + 10 * y[:, None]
    >>> knn_accuracy(Z, y)
    1.0
    """
    from sklearn.neighbors import KNeighborsClassifier

    Z = np.asarray(Z, dtype=np.float64)
    y = np.asarray(y).ravel()
    if Z.ndim != 2 or Z.shape[0] != y.shape[0]:
        raise ValueError(
            f"Z must be 2-D with one row per label, got Z shape {Z.shape} and {y.shape[0]} labels"
        )
    tr, te = knn_split(y, test_size=test_size, random_state=random_state)
    clf = KNeighborsClassifier(n_neighbors=n_neighbors, metric=metric)
    clf.fit(Z[tr], y[tr])
    return float(clf.score(Z[te], y[te]))
