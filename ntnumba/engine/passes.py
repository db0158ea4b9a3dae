"""Per-block passes of the alternating algorithm: plain module-level functions.

Every pass has the signature ``fn(X_b, carry_b, *block_args, *common)`` of
:mod:`ntnumba.engine.sources` (``X_b`` the scaled rows of one block, ``carry_b`` what earlier passes
stored for it: ``Y`` of the iteration, ``Q`` of the current ``A`` in memory) and returns small
results (per-sample labels and costs, sums over the block's samples), so that the driver can
run them on all of ``X`` in memory, on blocks read from disk, or on dask workers (module-level
functions ship by reference). The stages' equations live in their own modules (``_stage1``,
``_theta``, ``_transform``, ``_graph``); the passes only call them.
"""
import numpy as np

from ..partition import graph
from ..partition import select
from ..core.parallel import matmul as _matmul
from ..model.stage1 import assign, trusted_inputs
from ..model.theta import rows_kernels, stage2_sums, data_terms, theta_objective
from ..model.transform import assignment_statistics


def compute_Q(X, A, learn_transform):
    """Q = X A^T in the dtype of X (A = I: Q is X itself, no copy)."""
    if not learn_transform and A is None:
        return X
    return _matmul(X, A.T.astype(X.dtype, copy=False))


def best_scores(scores):
    """Per-sample smallest score over the candidates (``scores`` of shape (n, ...))."""
    scores = np.asarray(scores, dtype=np.float64)
    return scores.reshape(scores.shape[0], -1).min(axis=1)


def tukey_fence(values):
    """Tukey's far-out fence ``Q3 + 3 (Q3 - Q1)`` of the finite values, on a log scale.

    Scores are costs (positive, right-skewed): with all finite values > 0 the fence is taken on
    ``log(score)``, i.e. ``Q3 (Q3 / Q1)^3``; otherwise on the values themselves. inf if there is
    no finite value.
    """
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("inf")
    if np.all(v > 0):
        q1, q3 = np.percentile(np.log(v), [25.0, 75.0])
        return float(np.exp(q3 + 3.0 * (q3 - q1)))
    q1, q3 = np.percentile(v, [25.0, 75.0])
    return float(q3 + 3.0 * (q3 - q1))


# ---------------------------------------------------------------------------------------------
# Stage 1: one function per learning rule, ``(Q, tau, nu, p, labels) -> (labels, sim, Y,
# scores, cost)``; ``labels`` are the clusters fixed by the rule (graph) or None
# ---------------------------------------------------------------------------------------------
def _stage1_assign(Q, tau, nu, p, labels):
    """The ``objective`` and ``paper`` rules: every candidate; only winners matter (pruned)."""
    labels, sim, Y, scores, det = assign(Q, tau, nu, p.lambda0, p.lambda1, rule=p.rule,
                                         lambda_a=p.lambda_a, return_details=True, prune=True)
    return labels, sim, Y, scores, det["cost"]


def _stage1_graph(Q, tau, nu, p, labels):
    """The ``graph`` rule: the cluster is fixed, the best candidate of that cluster."""
    labels = np.asarray(labels, dtype=np.int64)
    sim, Y, cost = graph.restricted_stage1(Q, tau, nu, labels, p.lambda0, p.lambda1,
                                           p.lambda_a)
    return labels, sim, Y, None, cost


STAGE1 = {"objective": _stage1_assign, "paper": _stage1_assign, "graph": _stage1_graph}


def stage1(Q, tau, nu, p, labels=None):
    """Stage 1 under the rule ``p.rule`` (:data:`STAGE1`)."""
    return STAGE1[p.rule](Q, tau, nu, p, labels)


# ---------------------------------------------------------------------------------------------
# passes of one iteration
# ---------------------------------------------------------------------------------------------
def _q_of(Xk, carry, A, p):
    Q = None if carry is None else carry.get("Q")
    return compute_Q(Xk, A, p.learn_transform) if Q is None else Q


def pass_stage1(Xk, carry, labels_k, A, tau, nu, p):
    """Stage 1 of a block and its Stage-2 sums; stores ``Y`` (and drops ``Q``)."""
    Q = _q_of(Xk, carry, A, p)
    with trusted_inputs():  # Q comes from X and A, checked: no NaN scans of n x M inputs
        lab, sim, Y, _, cost = stage1(Q, tau, nu, p, labels_k)
        st = stage2_sums(Q, np.ascontiguousarray(Y, dtype=Q.dtype), lab, sim,
                         np.asarray(tau, dtype=np.float64), np.asarray(nu, dtype=np.float64),
                         p.lambda0)
    return {"Y": Y, "Q": None, "Q_of": None}, ([lab], [sim], [cost], st)


def add_stage1(a, b):
    """Fold of :func:`pass_stage1` results (lists of per-sample arrays, Stage-2 sums)."""
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], {k: a[3][k] + b[3][k] for k in a[3]}


def add(a, b):
    """Sum of two block results (arrays, numbers, or tuples of them)."""
    if isinstance(a, tuple):
        return tuple(add(x, y) for x, y in zip(a, b))
    return a + b


def pass_alpha(Xk, carry, labels_k, tau):
    """``rho(y_i, tau_j1(i))`` of the block's samples."""
    Y = carry["Y"]
    out = np.empty(Y.shape[0])
    rows_kernels(*Y.shape)[0](Y, np.arange(Y.shape[0], dtype=np.int64), tau, labels_k, out)
    return out


def pass_rho(Xk, carry, rows, zidx, Z):
    """``rho(y_i, Z[zidx_i])`` of the members ``rows`` of the block."""
    Y = carry["Y"]
    out = np.empty(rows.shape[0])
    rows_kernels(rows.shape[0], Y.shape[1])[0](Y, rows, Z, zidx, out)
    return out


def pass_rho2(Xk, carry, rows, z1, z2):
    """``rho(y_i, z1)`` and ``rho(y_i, z2)`` of the members ``rows`` in one pass."""
    Y = carry["Y"]
    o1, o2 = np.empty(rows.shape[0]), np.empty(rows.shape[0])
    rows_kernels(rows.shape[0], Y.shape[1])[1](Y, rows, z1, z2, o1, o2)
    return o1, o2


def pass_colsum(Xk, carry, rows, w):
    """Weighted signed column sums ``sum_i w_i y_i+``, ``sum_i w_i y_i-`` of the members."""
    Y = carry["Y"]
    M = Y.shape[1]
    pos, neg = np.empty(M), np.empty(M)
    rows_kernels(rows.shape[0], M)[2](Y, rows, w, pos, neg)
    return pos, neg


def pass_qrows(Xk, carry, idx, A, learn_transform):
    """``q_i`` of the rows ``idx`` of the block."""
    return compute_Q(np.ascontiguousarray(Xk[idx]), A, learn_transform)


def pass_row_hashes(Xk, carry):
    """Pass: the 64-bit hash of every row of the block (equal rows in float32, equal hashes;
    :func:`ntnumba.partition.graph.distinct_rows`)."""
    return graph.row_hashes(Xk)


def pass_gram(Xk, carry):
    """``X^T X`` of the block (float64)."""
    X64 = Xk.astype(np.float64, copy=False)
    return X64.T @ X64


def pass_stage3(Xk, carry, labels_k, sim_k, rows, tau, nu, lambda_a, basis=None):
    """``(X^T X, Ybar^T X, ||Ybar||^2)`` of the block without forming ``Ybar``; ``X^T X``
    (known to the driver) only for a subset ``rows`` (the paper's online update), else 0.
    ``basis`` (N x r): of the rows ``X @ basis`` (Stage 3 in the span of the rows)."""
    Y = carry["Y"]
    if rows is not None:
        Xk, Y, labels_k, sim_k = Xk[rows], Y[rows], labels_k[rows], sim_k[rows]
    if basis is not None:
        Xk = _matmul(Xk.astype(np.float64, copy=False), basis)
    st = assignment_statistics(Xk, Y, tau, nu, labels_k, sim_k, lambda_a,
                               gram=None if rows is not None else 0.0)
    return (st.gram if rows is not None else 0.0), st.cross, st.target_sq


def pass_objective(Xk, carry, labels_k, sim_k, A, tau, nu, p, keep_q):
    """The block's per-sample terms of the objective at the new parameters (``Y`` of Stage 1);
    stores ``Q`` of the new ``A`` when the source keeps it (the next Stage 1 starts from it, and
    :func:`pass_final` when ``A`` is the final one: ``"Q_of"`` is that ``A``)."""
    Q = compute_Q(Xk, A, p.learn_transform)
    Y = carry["Y"]
    with trusted_inputs():
        d2, l1 = data_terms(Q, Y)
        val = 0.5 * d2 + p.lambda1 * l1 + theta_objective(
            Q, Y, labels_k, sim_k, tau, nu, lambda0=p.lambda0, lambda_a=p.lambda_a,
            lambda_e=0.0)
    return ({"Q": Q, "Q_of": A} if keep_q else {}), val


def pass_final(Xk, carry, labels_k, A, tau, nu, p):
    """Stage 1 with the final parameters: ``(labels, sim, nonzero, q_max)`` of the block's
    samples (the graph rule keeps its clusters): ``nonzero`` the number of samples whose NT
    representation is not all zero, ``q_max`` the largest ``|q|`` of the block (0.0 if empty).
    ``Q = X A^T`` is the one the last objective pass stored when it is of this ``A`` (the same
    product, not computed twice)."""
    Q = None if carry is None or carry.get("Q_of") is not A else carry.get("Q")
    if Q is None:
        Q = compute_Q(Xk, A, p.learn_transform)
    lab, sim, Y, _, _ = stage1(Q, tau, nu, p, labels_k)
    nonzero = int(np.count_nonzero(np.any(Y != 0, axis=1))) if Y.size else 0
    q_max = float(np.max(np.abs(Q))) if Q.size else 0.0
    return lab, sim, nonzero, q_max


def vote_space(Xref, mean, V, representation):
    """``(weights, mean, V, offset)``: what :func:`ntnumba.partition.graph.graph_rows` needs to
    give the rows the graph rule compares, for the partition's ``mean`` and shared directions
    ``V`` and the representation rules of the reference set ``Xref`` (scaled;
    :func:`ntnumba.partition.select.graph_space`)."""
    w, offset, _ = select.graph_space(Xref, representation)
    return w, mean, V, offset


def space_rows(X, space):
    """The graph rows of the scaled rows ``X`` in ``space`` (:func:`vote_space`)."""
    w, mean, V, offset = space
    return graph.graph_rows(X, mean, V, offset, w)


class RowIndex:
    """The rows of ``ref`` sorted byte for byte (-0.0 as 0.0), once, for :func:`row_matches`.

    Made once per fit or prediction and searched with every block.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.engine.passes import RowIndex, row_matches
    >>> index = RowIndex(np.array([[1.0, 2.0], [0.0, 1.0]]))
    >>> row_matches(np.array([[0.0, 1.0], [5.0, 5.0]]), index).tolist()
    [1, -1]
    """

    def __init__(self, ref):
        ref = np.ascontiguousarray(ref) + 0.0   # -0.0 + 0.0 is 0.0: equal values, equal keys
        self.dtype, self.shape = ref.dtype, ref.shape
        self.row = np.dtype((np.void, ref.dtype.itemsize * max(ref.shape[1], 1)))
        r = ref.view(self.row).ravel() if ref.size else np.empty(0, self.row)
        self.order = np.argsort(r, kind="stable")
        self.keys = r[self.order]

    def matches(self, X):
        """:func:`row_matches` of ``X`` against the indexed rows."""
        out = np.full(X.shape[0], -1, dtype=np.int64)
        if X.dtype != self.dtype or X.shape[1] != self.shape[1] or self.shape[0] == 0:
            return out
        q = (np.ascontiguousarray(X) + 0.0).view(self.row).ravel()
        pos = np.minimum(np.searchsorted(self.keys, q), self.keys.size - 1)
        hit = self.keys[pos] == q
        out[hit] = self.order[pos[hit]]
        return out


def row_matches(X, ref):
    """Index of the row of ``ref`` equal (in value, same dtype) to each row of ``X``, -1 if none
    (the first such row when ``ref`` repeats it). ``ref``: the rows, or their
    :class:`RowIndex` (sorted once for many calls)."""
    return (ref if isinstance(ref, RowIndex) else RowIndex(ref)).matches(X)


def graph_vote(X, space, rows_ref, labels_ref, p, *, match=None, return_votes=False):
    """The graph rule's labels of new rows: the k-NN vote of the reference set.

    ``X``: scaled rows; ``space``: :func:`vote_space` of the reference set; ``rows_ref``: its
    graph rows (:func:`space_rows`), ``labels_ref`` its labels; ``p``: ``n_clusters`` and
    ``n_neighbors``. ``match`` (None or int array of shape (n,)): the reference row equal to
    each row (:func:`row_matches`; -1: none); such a row gets that reference row's label (the
    partition, not a vote) and the leave-one-out vote of the others (its score and shares).
    Returns what :func:`ntnumba.partition.graph.knn_vote` returns; the one vote of the fit
    (:func:`pass_vote`) and of ``predict``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.engine.loop import Params
    >>> from ntnumba.engine.passes import graph_vote, space_rows, vote_space
    >>> ref = np.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 0.0, 1.0], [0.0, 0.1, 0.9]])
    >>> space = vote_space(ref, np.zeros(3), np.zeros((0, 3)), "as-is")
    >>> graph_vote(np.array([[1.0, 0.05, 0.0]]), space, space_rows(ref, space),
    ...            np.array([0, 0, 1, 1]), Params(2, 3, n_neighbors=2))[0].tolist()
    [0]
    """
    labels_ref = np.asarray(labels_ref, dtype=np.int64)
    hit = None if match is None else np.asarray(match, dtype=np.int64) >= 0
    exclude = match if hit is not None and hit.any() else None
    out = graph.knn_vote(space_rows(X, space), rows_ref, labels_ref, p.n_clusters,
                         p.n_neighbors, exclude=exclude, return_votes=return_votes)
    if exclude is not None:
        out[0][hit] = labels_ref[np.asarray(match)[hit]]
    return out


def pass_vote(Xk, carry, rows, p, space, Xref, rows_ref, labels_ref):
    """Graph rule: ``(labels, scores, shares, match)`` of the rows ``rows`` of the block by the
    vote of ``predict`` (:func:`graph_vote`; a row equal to a reference row, ``match``, takes
    its label). ``Xref``: the reference rows or their :class:`RowIndex`, made once."""
    X = np.ascontiguousarray(Xk[rows])
    match = row_matches(X, Xref)
    return graph_vote(X, space, rows_ref, labels_ref, p, match=match, return_votes=True) + (match,)
