"""The alternating driver: Stage 1 (assignment), Stage 2 (theta), Stage 3 (A), repeated.

A thin Python loop in the spirit of scikit-learn's ``_kmeans_single_lloyd``: the compiled
kernels do one stage each; this module initialises, alternates, records the full objective of
the learning problem, checks convergence, prints progress and keeps the last complete iterate
when interrupted.
"""
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import numpy as np

from ._graph import DEFAULT_SHARED, graph_init_tau, graph_partition, graph_stage1
from ._parallel import blas_limit
from ._parallel import matmul as _matmul
from ._stage1 import assign, trusted_inputs
from ._theta import data_terms, theta_objective, update_theta
from ._transform import _regulariser, _regulariser_sv, assignment_statistics, update_transform


@dataclass
class Params:
    """Hyper-parameters of one fit (validated by the estimator)."""

    n_clusters: int
    n_components: int
    n_similarity: int = 2
    lambda0: float = 0.03
    lambda1: float = 0.03
    lambda_e: float = 0.001
    lambda_a: float = 1.0
    lambda2: float = 16.0
    lambda3: float = 16.0
    lambda4: float = 16.0
    learn_transform: bool = True
    rule: str = "objective"
    online_fraction: float = None
    online_rate: float = 0.5
    init: str = "k-means++"
    # assign="graph" / init="graph" (ntnumba/_graph.py): k of the k-NN graph and the candidate
    # numbers of shared principal directions removed (an int: that number)
    n_neighbors: int = 5
    n_shared: object = DEFAULT_SHARED
    max_iter: int = 100
    tol: float = 1e-4
    # MM steps of Stage 3 per outer iteration, warm-started from the best of the current A and
    # the approximate closed form. Each step is monotone, so a few per iteration still make the
    # objective non-increasing; 1 step: objective within 4% of 30 steps after 5 iterations on
    # COIL-20 at the paper's size, CA unchanged, ~20x less Stage-3 time (docs/performance.md).
    transform_steps: int = 1


@dataclass
class State:
    """One complete iterate of the alternating algorithm."""

    A: np.ndarray
    tau: np.ndarray
    nu: np.ndarray
    labels: np.ndarray = None
    similarity_labels: np.ndarray = None
    objective_history: list = field(default_factory=list)
    n_iter: int = 0
    reseeded: list = field(default_factory=list)
    interrupted: bool = False
    # assign="graph": {"n_shared": r, "graph_cut": cut} of the partition in ``labels`` (kept
    # fixed over the iterations, see ntnumba/_graph.py); None otherwise
    graph: dict = None

    def copy(self):
        return replace(self, A=self.A.copy(), tau=self.tau.copy(), nu=self.nu.copy(),
                       labels=None if self.labels is None else self.labels.copy(),
                       similarity_labels=(None if self.similarity_labels is None
                                          else self.similarity_labels.copy()),
                       objective_history=list(self.objective_history),
                       reseeded=list(self.reseeded))


def compute_Q(X, A, learn_transform):
    """Q = X A^T in the dtype of X (A = I: Q is X itself, no copy)."""
    if not learn_transform and A is None:
        return X
    return _matmul(X, A.T.astype(X.dtype, copy=False))


def full_objective(X, A, Y, labels, sim, tau, nu, p, Q=None, sv=None):
    """Objective of the learning problem (algorithm.md) at one iterate, float64.

    sum_i [1/2||q_i - y_i||^2 + lambda_a/2||q_i - tau_j1 - nu_j2||^2 + lambda0 sP + lambda1||y_i||_1]
    + lambda_e u_p(theta) + f_d(A) (f_d only when A is learned).
    ``sv``: the singular values of ``A`` when known (f_d from them, no ``A^T A`` product).
    """
    if Q is None:
        Q = compute_Q(X, A, p.learn_transform)
    d2, l1 = data_terms(Q, Y)  # ||Q - Y||^2 and ||Y||_1 without n x M temporaries
    val = 0.5 * d2 + p.lambda1 * l1
    val += theta_objective(Q, Y, labels, sim, tau, nu, lambda0=p.lambda0,
                           lambda_a=p.lambda_a, lambda_e=p.lambda_e)
    if p.learn_transform:
        if sv is not None:
            val += _regulariser_sv(sv, A.shape[0], p.lambda2, p.lambda3, p.lambda4)
        else:
            A64 = np.asarray(A, dtype=np.float64)
            val += _regulariser(A64.T @ A64, A64.shape[0], p.lambda2, p.lambda3, p.lambda4)
    return val


def initialise(X, p, rng, verbose=0):
    """Initial A, tau, nu.

    ``init="random"`` is the paper's: A, tau, nu i.i.d. N(0, 1), except that the rows of A are
    scaled to unit norm. ``init="k-means++"`` keeps the random A and nu, and seeds tau by
    k-means++ in the transform domain (tau_c = q_s - mean nu).
    ``init="kmeans"`` runs scikit-learn's KMeans (n_init=1) on Q for tau.
    ``init="graph"``: tau_c = mean of the q_i of cluster c of the NT-similarity graph partition
    (:func:`ntnumba._graph.graph_partition`) - mean nu.
    """
    n, N = X.shape
    dt = X.dtype
    M = p.n_components if p.learn_transform else N
    if p.learn_transform:
        A = rng.standard_normal((M, N)).astype(dt)
        # rows scaled to unit norm (the paper leaves them i.i.d. N(0, 1), of norm ~sqrt(N)):
        # then q = A x has the scale of x's features, the scale of the N(0, 1) tau and nu
        A /= np.linalg.norm(A, axis=1, keepdims=True)
    else:
        A = None
    Q = compute_Q(X, A, p.learn_transform)
    C, Cs = p.n_clusters, p.n_similarity
    nu = rng.standard_normal((Cs, M)).astype(dt)
    if p.init == "random":
        tau = rng.standard_normal((C, M)).astype(dt)
    elif p.init == "k-means++":
        from sklearn.cluster import kmeans_plusplus
        centers, _ = kmeans_plusplus(np.asarray(Q, dtype=np.float64), C,
                                     random_state=rng.randint(np.iinfo(np.int32).max))
        tau = (centers - nu.mean(axis=0)).astype(dt)
    elif p.init == "kmeans":
        from sklearn.cluster import KMeans
        km = KMeans(C, n_init=1, random_state=rng.randint(np.iinfo(np.int32).max))
        km.fit(np.asarray(Q, dtype=np.float64))
        tau = (km.cluster_centers_ - nu.mean(axis=0)).astype(dt)
    elif p.init == "graph":
        labels, ginfo = graph_partition(Q, C, lambda1=p.lambda1, n_neighbors=p.n_neighbors,
                                        n_shared=p.n_shared,
                                        random_state=rng.randint(np.iinfo(np.int32).max),
                                        verbose=verbose)
        tau = graph_init_tau(Q, labels, nu, C, rng).astype(dt)
        graph = {"n_shared": ginfo["n_shared"], "graph_cut": ginfo["ncut"][ginfo["n_shared"]],
                 "ncut": dict(ginfo["ncut"])}
        return State(A=A, tau=np.ascontiguousarray(tau), nu=np.ascontiguousarray(nu),
                     labels=labels, graph=graph)
    else:  # pragma: no cover - validated by the estimator
        raise ValueError(f"init: unknown {p.init!r}")
    return State(A=A, tau=np.ascontiguousarray(tau), nu=np.ascontiguousarray(nu))


# BLAS threads during an iteration: the numba kernels run on every core; the BLAS calls between
# them (X A^T, Y^T X, the Stage-3 products) run serially. On the shared 2-core machine two
# OpenBLAS threads next to numba's OpenMP workers made one iteration 4.5x slower (3.7 s vs
# 0.8 s, docs/performance.md). None: leave the BLAS thread count alone.
BLAS_THREADS = 1


def iterate(X, state, p, rng, Q=None, workspace=None):
    """One complete iteration (Stages 1-3) from ``state``; returns the new state and objective.

    Runs :func:`_iterate` with ``BLAS_THREADS`` BLAS threads (restored afterwards).
    """
    with blas_context():
        return _iterate(X, state, p, rng, Q, workspace)


def blas_context():
    """Context with ``BLAS_THREADS`` BLAS threads (``None``: the BLAS setting is left alone)."""
    if BLAS_THREADS is None:
        return nullcontext()
    return blas_limit(BLAS_THREADS)


def _iterate(X, state, p, rng, Q=None, workspace=None):
    """One complete iteration (Stages 1-3) from ``state``; returns the new state and objective.

    ``Q``: ``compute_Q(X, state.A)`` when the caller has it (the previous iteration computed it
    for its objective, ``info["Q_next"]``), else it is computed here. A one-element list hands
    it over: the list is emptied, so that Q (n x M) is freed during Stage 3 (:func:`run`).
    ``workspace``: a dict carried from one iteration to the next on the same ``X`` (``X^T X``,
    ``lambda_max(X^T X)``, and ``A G`` and the singular values of ``state.A``, see
    :func:`ntnumba._transform.update_transform`); updated in place for the returned state
    (also returned as ``info["workspace_next"]``).
    """
    box = Q if isinstance(Q, list) else [Q]
    Q = None  # only the box refers to Q: _iterate_body can free it
    ws = {} if workspace is None else workspace
    with trusted_inputs():  # Q and Y come from the kernels: no NaN scans of n x M inputs
        return _iterate_body(X, state, p, rng, box, ws)


def _iterate_body(X, state, p, rng, box, ws):
    Q = box.pop() if box else None
    if Q is None:
        Q = compute_Q(X, state.A, p.learn_transform)
    if p.rule == "graph":  # clusters from the NT-similarity graph, then Stages 2-3 as usual
        labels, sim, Y, det = graph_stage1(Q, state, p, rng)
    else:
        # only the winners are used: candidates that cannot win are skipped (exact)
        labels, sim, Y, _, det = assign(Q, state.tau, state.nu, p.lambda0, p.lambda1,
                                        rule=p.rule, lambda_a=p.lambda_a, return_details=True,
                                        prune=True)
    tau, nu = update_theta(Q, Y, labels, sim, state.tau, state.nu, lambda0=p.lambda0,
                           lambda_a=p.lambda_a, lambda_e=p.lambda_e, cost=det["cost"])
    # the taus update_theta re-seeds: those without members
    info = {"reseeded": [int(c) for c in
                         np.flatnonzero(np.bincount(labels, minlength=tau.shape[0]) == 0)]}
    A = state.A
    if p.learn_transform:
        Q = None  # recomputed below with the new A; frees n x M during Stage 3
        # 1/2||AX - Y||^2 + lambda_a/2||AX - T||^2 = (1 + lambda_a)/2 ||AX - Ybar||^2 + const:
        # the Stage-3 problem in the scaling of update_transform divides the priors by 1+lambda_a
        w = 1.0 + p.lambda_a
        if p.online_fraction is None:
            # the statistics of Ybar = (Y + lambda_a T) / w without forming Ybar or T (n x M)
            if ws.get("X") is not X:  # X^T X does not change during a fit
                ws.clear()
                X64 = np.asarray(X, dtype=np.float64)
                gram = X64.T @ X64
                ws.update(X=X, gram=0.5 * (gram + gram.T))
                X64 = gram = None
            stats = assignment_statistics(X, Y, tau, nu, labels, sim, p.lambda_a,
                                          gram=ws["gram"])
            A = update_transform(A=A, stats=stats, lambda2=p.lambda2 / w,
                                 lambda3=p.lambda3 / w, lambda4=p.lambda4 / w,
                                 n_steps=p.transform_steps, workspace=ws)
            stats = None
        else:
            T = tau[labels] + nu[sim]
            Ybar = (np.asarray(Y, dtype=np.float64) + p.lambda_a * T) / w
            A = update_transform(X, Ybar, A, lambda2=p.lambda2 / w, lambda3=p.lambda3 / w,
                                 lambda4=p.lambda4 / w, n_steps=p.transform_steps,
                                 sample_fraction=p.online_fraction, online_rate=p.online_rate,
                                 random_state=rng)
        Q = compute_Q(X, A, True)
    sv = ws.get("sv") if (p.learn_transform and ws.get("A") is A) else None
    obj = full_objective(X, A, Y, labels, sim, tau, nu, p, Q=Q, sv=sv)
    new = State(A=A, tau=tau, nu=nu, labels=labels, similarity_labels=sim,
                objective_history=state.objective_history + [obj], n_iter=state.n_iter + 1,
                reseeded=state.reseeded + [(state.n_iter + 1, c) for c in info["reseeded"]],
                graph=det.get("graph"))
    info["Q_next"] = Q
    info["workspace_next"] = ws
    return new, obj, info


def _fmt_time(s):
    if not np.isfinite(s):
        return "?"
    if s < 60:
        return f"{s:.1f}s"
    return f"{int(s // 60)}m{int(s % 60):02d}s"


def run(X, state, p, rng, *, verbose=0, callback=None, stream=None):
    """Alternate from ``state`` until ``max_iter`` or a relative decrease below ``tol``.

    Returns the last complete iterate. A KeyboardInterrupt between or inside iterations stops the
    loop and returns the last complete iterate with ``interrupted=True``. ``callback(state)`` is
    called after every iteration; returning True stops the loop.
    """
    stream = sys.stderr if stream is None else stream
    t0 = time.perf_counter()
    start_iter = state.n_iter
    Q = []  # X A^T of the current state, handed from one iteration to the next (see iterate)
    ws = {}  # the Stage-3 workspace, likewise
    try:
        while state.n_iter < p.max_iter:
            prev = state.objective_history[-1] if state.objective_history else None
            new, obj, info = iterate(X, state, p, rng, Q=Q, workspace=ws)
            Q = [info.pop("Q_next")]
            info.pop("workspace_next")
            state = new
            if verbose:
                done = state.n_iter - start_iter
                el = time.perf_counter() - t0
                eta = el / done * (p.max_iter - state.n_iter)
                change = "" if prev is None else f"  change {(prev - obj) / abs(prev):+.3e}"
                msg = (f"iteration {state.n_iter:4d}  objective {obj:.6e}{change}  "
                       f"elapsed {_fmt_time(el)}  eta {_fmt_time(eta)}")
                if info["reseeded"]:
                    msg += f"  re-seeded clusters {info['reseeded']}"
                print(msg, file=stream, flush=True)
            if callback is not None and callback(state):
                break
            if prev is not None and abs(prev - obj) <= p.tol * max(abs(prev), 1e-300):
                break
    except KeyboardInterrupt:
        state = state.copy()
        state.interrupted = True
        if verbose:
            print(f"interrupted: keeping iteration {state.n_iter}", file=stream, flush=True)
    return state
