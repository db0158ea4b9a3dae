"""The driver: Stage 1 (assignment), Stage 2 (theta), Stage 3 (A), repeated, over row blocks.

One loop for every fit (as scikit-learn's ``_kmeans_single_lloyd``): initialise, alternate,
record the full objective, check convergence, run the ``n_init`` restarts or a ``warm_start``,
call the callback, report progress, keep the last complete iterate when interrupted, assemble
the fitted state. It runs over a *row-block source* (:mod:`ntnumba.engine.sources`: memory,
chunked reader or dask workers); every iteration is a few maps of the passes of
:mod:`ntnumba.engine.passes` over the blocks and a reduction of their sums. ``partial_fit`` is
the same iteration on running sums with a forgetting factor.
"""
import sys
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np
from numba.core import event as numba_event
from tqdm import tqdm

from . import passes as P
from ..partition import select
from ..partition.graph import DEFAULT_SHARED, graph_init_tau
from ..core.parallel import blas_context  # noqa: F401 - the fit's BLAS policy, loop.blas_context
from .passes import compute_Q  # noqa: F401 - the driver's name for it
from .fitted import FittedModel
from .sources import MemoryBlocks, block_rows
from ..model.theta import data_terms, prior_up, solve_theta, theta_objective
from ..model.transform import (RowSpan, TransformStatistics, complement_span, principal_span,
                               project_statistics, row_span, stage3_regulariser,
                               stage3_regulariser_sv, update_transform)
from ..core.validation import user_stacklevel

#: Size of the reference sample of every fit (in memory, chunked, Dask): the initialisation and,
#: for the graph rule, the partition run on ``min(n, REFERENCE_SIZE)`` rows drawn at random
#: (seeded by ``random_state``; all rows when ``n`` is not larger; drawn among distinct rows,
#: see :func:`reference_rows`), the other rows are labelled by the k-NN vote of ``predict``.
#: ``partial_fit`` partitions its first chunk.
REFERENCE_SIZE = 20000

_INT32_MAX = np.iinfo(np.int32).max


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
    # assign="graph" / init="graph" (ntnumba/partition/graph.py): k of the k-NN graph and the
    # candidate numbers of shared principal directions removed (an int: that number)
    n_neighbors: int = 5
    n_shared: object = DEFAULT_SHARED
    # "auto" or "as-is" (ntnumba/partition/select.py)
    representation: str = "auto"
    max_iter: int = 100
    tol: float = 1e-4
    # MM steps of Stage 3 per outer iteration (each monotone); 1 step: objective within 4% of
    # 30 steps on COIL-20, CA unchanged, ~20x less Stage-3 time (docs/performance.md)
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
    # the partition the fit started from (initial_labels_): init="graph"'s, else the labels of
    # the first iteration's Stage 1; None on a warm start
    initial_labels: np.ndarray = None
    # assign="graph": {"n_shared", "graph_cut", "ref_rows" (None: all)} of the fixed
    # partition in ``labels``; None otherwise
    graph: dict = None

    def copy(self):
        return replace(self, A=None if self.A is None else self.A.copy(), tau=self.tau.copy(),
                       nu=self.nu.copy(),
                       labels=None if self.labels is None else self.labels.copy(),
                       similarity_labels=(None if self.similarity_labels is None
                                          else self.similarity_labels.copy()),
                       objective_history=list(self.objective_history),
                       reseeded=list(self.reseeded),
                       graph=None if self.graph is None else dict(self.graph))


@dataclass
class Context:
    """What one fit carries between the iterations over one source."""

    src: object
    gram: np.ndarray = None       # X^T X (learn_transform): once per fit
    labels: np.ndarray = None     # graph rule: the fixed clusters of all rows
    ref_X: np.ndarray = None      # graph rule: the reference set (scaled rows, the rows
    ref_rows: np.ndarray = None   # ref_rows of the source, None: all) and its labels
    ref_labels: np.ndarray = None
    seed: int = 0                 # of the reference sample
    workspace: dict = field(default_factory=dict)   # of update_transform, batch Stage 3
    forget: float = None          # partial_fit: running sums = forget * sums + this pass
    theta_sums: dict = None
    transform_sums: TransformStatistics = None
    subspace: RowSpan = None      # the subspace of the model (model_span), None: R^N
    shared: tuple = None          # (graph["V"], its shared_basis) (model_shared)
    vote: tuple = None            # graph rule: (rows, scores, shares, match) of the fit's vote


def full_objective(X, A, Y, labels, sim, tau, nu, p, Q=None, sv=None):
    """Objective of the learning problem (algorithm.md) at one iterate, float64, in memory.

    sum_i [1/2||q_i - y_i||^2 + lambda_a/2||q_i - tau_j1 - nu_j2||^2 + lambda0 sP
           + lambda1||y_i||_1] + lambda_e u_p(theta) + f_d(A) (f_d only when A is learned).
    ``sv``: the singular values of ``A`` when known (f_d from them, no ``A^T A`` product).
    """
    if Q is None:
        Q = compute_Q(X, A, p.learn_transform)
    d2, l1 = data_terms(Q, Y)  # ||Q - Y||^2 and ||Y||_1 without n x M temporaries
    val = 0.5 * d2 + p.lambda1 * l1
    val += theta_objective(Q, Y, labels, sim, tau, nu, lambda0=p.lambda0,
                           lambda_a=p.lambda_a, lambda_e=0.0)
    return val + _parameter_terms(A, tau, nu, p, sv)


def _parameter_terms(A, tau, nu, p, sv=None, subspace=False):
    """``lambda_e u_p(theta) + f_d(A)``: the objective's terms without a sum over samples
    (``subspace``: ``A`` is the map of a subspace, f_d of its nonzero singular values)."""
    val = p.lambda_e * prior_up(tau, nu) if p.lambda_e != 0.0 else 0.0
    if p.learn_transform:
        if sv is None and (subspace or A.shape[0] < A.shape[1]):
            sv = np.linalg.svd(np.asarray(A, dtype=np.float64), compute_uv=False)
            sv = sv[sv > max(A.shape) * np.finfo(np.float64).eps * sv[0]] if sv.size else sv
        if sv is not None:
            val += stage3_regulariser_sv(sv, A.shape[0], p.lambda2, p.lambda3, p.lambda4)
        else:
            A64 = np.asarray(A, dtype=np.float64)
            val += stage3_regulariser(A64.T @ A64, A64.shape[0], p.lambda2, p.lambda3, p.lambda4)
    return val


def stage3_priors(p):
    """The priors of the Stage-3 problem in the scaling of :func:`update_transform`.

    ``1/2||AX - Y||^2 + lambda_a/2||AX - T||^2 = (1 + lambda_a)/2 ||AX - Ybar||^2 + const``
    (``Ybar``: :func:`ntnumba.model.transform.assignment_statistics`): the priors of ``A`` are
    divided by ``1 + lambda_a``.
    """
    w = 1.0 + p.lambda_a
    return dict(lambda2=p.lambda2 / w, lambda3=p.lambda3 / w, lambda4=p.lambda4 / w,
                n_steps=p.transform_steps)


def rms_scale(src, scaling):
    """``scaling="rms"``: one factor s with mean(||s x||^2) = n_features; 1.0 for all-zero data
    or ``scaling=None``.

    At most 2^(maxexp - 2) of the dtype, so that ``s`` and ``s X`` stay finite on subnormal
    data. Two passes over the source's blocks.
    """
    if scaling is None:
        return 1.0
    m = src.max_abs()
    if m == 0.0:
        return 1.0
    ms = src.mean_square(m)
    limit = 2.0 ** (np.finfo(src.dtype).maxexp - 2)
    with np.errstate(over="ignore"):
        s = np.sqrt(1.0 / ms) / m
    return float(min(s, limit))


def initialise(X, p, rng, verbose=0):
    """Initial A, tau, nu from the rows ``X`` (all of X, or the reference sample).

    ``init="random"`` is the paper's: A, tau, nu i.i.d. N(0, 1), except that the rows of A are
    scaled to unit norm. ``init="k-means++"`` keeps the random A and nu, and seeds tau by
    k-means++ in the transform domain (tau_c = q_s - mean nu).
    ``init="kmeans"`` runs scikit-learn's KMeans (n_init=1) on Q for tau.
    ``init="graph"``: tau_c = mean of the q_i of cluster c of the graph partition of the rows
    (:func:`ntnumba.partition.select.partition`) - mean nu.
    """
    n, N = X.shape
    dt = X.dtype
    M = p.n_components if p.learn_transform else N
    if p.learn_transform:
        A = rng.standard_normal((M, N)).astype(dt, copy=False)
        # rows scaled to unit norm (the paper leaves them i.i.d. N(0, 1), of norm ~sqrt(N)):
        # then q = A x has the scale of x's features, the scale of the N(0, 1) tau and nu
        A /= np.linalg.norm(A, axis=1, keepdims=True)
        A = select.weighted_map(X, A, p.representation)  # features of very different scales
    else:
        A = None
    # Q = X A^T for the seeding of tau (init="graph" needs the cluster means only: no n x M)
    Q = None if p.init == "graph" else compute_Q(X, A, p.learn_transform)
    C, Cs = p.n_clusters, p.n_similarity
    nu = rng.standard_normal((Cs, M)).astype(dt)
    if p.init == "random":
        tau = rng.standard_normal((C, M)).astype(dt)
    elif p.init == "k-means++":
        from sklearn.cluster import kmeans_plusplus
        centers, _ = kmeans_plusplus(np.asarray(Q, dtype=np.float64), C,
                                     random_state=rng.randint(_INT32_MAX))
        tau = (centers - nu.mean(axis=0)).astype(dt)
    elif p.init == "kmeans":
        from sklearn.cluster import KMeans
        km = KMeans(C, n_init=1, random_state=rng.randint(_INT32_MAX))
        km.fit(np.asarray(Q, dtype=np.float64))
        tau = (km.cluster_centers_ - nu.mean(axis=0)).astype(dt)
    elif p.init == "graph":
        labels, ginfo = select.partition(X, C, p, rng.randint(_INT32_MAX),
                                         verbose=_internals(verbose))
        U = None if A is None else shared_basis(X, ginfo["V"], p)
        if U is not None:  # the graph rule's model: zero on the shared directions
            A = (A - (A @ U) @ U.T).astype(dt)
        tau = graph_init_tau(X, labels, nu, C, rng, A).astype(dt)
        return State(A=A, tau=np.ascontiguousarray(tau), nu=np.ascontiguousarray(nu),
                     labels=labels, graph=graph_summary(ginfo))
    else:  # pragma: no cover - validated by the estimator
        raise ValueError(f"init: unknown {p.init!r}")
    return State(A=A, tau=np.ascontiguousarray(tau), nu=np.ascontiguousarray(nu))


# ---------------------------------------------------------------------------------------------
# the row passes of Stage 2 over the blocks of a source
# ---------------------------------------------------------------------------------------------
class _BlockRows:
    """The passes of :func:`ntnumba.model.theta.solve_theta` (``alpha``, ``members``, ``q_row``)
    over the source's blocks, ``Y`` where the blocks keep it."""

    def __init__(self, src, A, p):
        self.src, self.A, self.p = src, A, p

    def alpha(self, tau, labels):
        args = [(labels[s:e],) for s, e in self.src.bounds]
        return np.concatenate(self.src.map(P.pass_alpha, args, (tau,), use_x=False,
                                           use_carry=True))

    def members(self, rows):
        return _BlockMembers(self.src, rows)

    def q_row(self, i):
        b = next(b for b, (s, e) in enumerate(self.src.bounds) if s <= i < e)
        args = [None] * len(self.src.bounds)
        args[b] = (np.array([i - self.src.bounds[b][0]]),)
        return self.src.map(P.pass_qrows, args, (self.A, self.p.learn_transform),
                            blocks=[b])[0][0]


class _BlockMembers:
    """:class:`ntnumba.model.theta.MemberRows` (the members of one nu) over the blocks."""

    def __init__(self, src, rows):
        self.src = src
        self.parts = block_rows(src.bounds, rows)
        self.blocks = [b for b, *_ in self.parts]

    def _map(self, fn, extra, common, combine=None):
        args = [None] * len(self.src.bounds)
        for b, r, lo, hi in self.parts:
            args[b] = (r,) + tuple(x[lo:hi] for x in extra)
        return self.src.map(fn, args, common, use_x=False, use_carry=True, blocks=self.blocks,
                            combine=combine)

    def rho(self, Z, zidx, out):
        out[:] = np.concatenate(self._map(P.pass_rho, (zidx,), (np.ascontiguousarray(Z),)))

    def rho2(self, z1, z2, out1, out2):
        res = self._map(P.pass_rho2, (), (z1, z2))
        out1[:] = np.concatenate([r[0] for r in res])
        out2[:] = np.concatenate([r[1] for r in res])

    def colsum(self, w, pos, neg):
        pos[:], neg[:] = self._map(P.pass_colsum, (w,), (), combine=P.add)


def _forgotten(acc, new, forget):
    """Running sums ``forget * acc + new`` (``acc`` None: ``new``)."""
    if isinstance(new, TransformStatistics):
        if acc is None:
            return new
        return TransformStatistics(forget * acc.gram + new.gram, forget * acc.cross + new.cross,
                                   forget * acc.target_sq + new.target_sq,
                                   acc.n_samples + new.n_samples, new.dtype)
    new = {k: np.asarray(v, dtype=np.float64) for k, v in new.items()}
    return new if acc is None else {k: forget * acc[k] + new[k] for k in new}


def shared_basis(X, V, p):
    """Graph rule: an orthonormal basis (N, r) of the input directions its partition removed as
    shared (rows ``V``, of the feature-weighted rows ``X``), None: none. The model leaves them
    out (docs/research/model-shared-directions.md)."""
    if p.rule != "graph" or V is None or len(V) == 0:
        return None
    w = select.graph_space(X, p.representation)[0]
    U = np.asarray(V, dtype=np.float64).T
    if w is not None:  # removed: x with w * x in span(V)
        U = U * np.divide(1.0, w, out=np.zeros_like(w), where=w > 0)[:, None]
    return np.linalg.qr(U)[0]


def model_shared(ctx, graph, p):
    """:func:`shared_basis` of ``graph`` and the reference rows (cached on ``ctx``)."""
    V = None if graph is None else graph.get("V")
    if ctx.shared is None or ctx.shared[0] is not V:
        ctx.shared, ctx.subspace = (V, shared_basis(ctx.ref_X, V, p)), None
    return ctx.shared[1]


def model_span(ctx, p, U=None):
    """The subspace of the model (:class:`RowSpan`, cached on ``ctx``; ``A`` zero outside it):
    the rows' (without the shared directions ``U``) of ``min(rank, n_components)`` dimensions."""
    if ctx.subspace is None:
        G, M = ctx.gram, p.n_components
        if U is not None or not isinstance(G, RowSpan):
            ctx.subspace = subspace_of(G, ctx.src.n, M, U)
        elif G.rank <= M:
            ctx.subspace = replace(G, zero_outside=True)
        else:  # row_span's basis is ordered by singular value
            ctx.subspace = RowSpan(np.ascontiguousarray(G.basis[:, :M]),
                                   np.ascontiguousarray(G.gram[:M, :M]), G.n_samples,
                                   zero_outside=True)
    return ctx.subspace


def subspace_of(G, n_samples, M, U=None):
    """The model's subspace (zero outside it) of rows whose ``X^T X`` (or :class:`RowSpan`) is
    ``G``: their principal subspace of at most ``M`` dimensions, without the directions ``U``."""
    if U is not None:
        return complement_span(G, n_samples, M, U)
    return replace(principal_span(G, n_samples, M), zero_outside=True)


def in_subspace(p, N, U, n):
    """Whether the model is that of a subspace, zero outside it: ``M < N``, shared directions
    ``U`` left out, or fewer rows ``n`` than features (their span, exact for them;
    docs/research/wide-model.md)."""
    return p.n_components < N or U is not None or n < N


def gram(src, p=None):
    """``X^T X`` of the source (float64, symmetric); with fewer rows than features the span of
    the rows (:class:`RowSpan`; any basis when :func:`model_span` takes it whole)."""
    if src.n < src.N:
        return row_span(src.take(), ordered=p is None or src.n > p.n_components)
    G = src.map(P.pass_gram, combine=P.add)
    return 0.5 * (G + G.T)


# ---------------------------------------------------------------------------------------------
# one iteration
# ---------------------------------------------------------------------------------------------
def iterate_blocks(ctx, state, p, rng):
    """One complete iteration (Stages 1-3 and the objective) over ``ctx.src`` from ``state``;
    returns ``(new_state, objective, reseeded)``."""
    src = ctx.src
    A, tau, nu = state.A, state.tau, state.nu
    n = src.n
    graph = state.graph
    if p.rule == "graph" and graph is None:  # dropped (e.g. by a callback): partition again
        part = State(A=A, tau=tau, nu=nu)
        _set_graph(ctx, part, p, rng)
        graph = part.graph
    fixed = ctx.labels
    args = [(None if fixed is None else fixed[s:e],) for s, e in src.bounds]
    lab_l, sim_l, cost_l, stats = src.map(P.pass_stage1, args, (A, tau, nu, p), use_carry=True,
                                          store=True, combine=P.add_stage1)
    labels = np.concatenate(lab_l).astype(np.int64, copy=False)
    sim = np.concatenate(sim_l).astype(np.int64, copy=False)
    cost = np.concatenate(cost_l)
    lab_l = sim_l = cost_l = None
    if ctx.forget is not None:
        stats = ctx.theta_sums = _forgotten(ctx.theta_sums, stats, ctx.forget)
    tau, nu, det = solve_theta(stats, _BlockRows(src, A, p), labels, sim,
                               np.asarray(tau, dtype=np.float64),
                               np.asarray(nu, dtype=np.float64), lambda0=p.lambda0,
                               lambda_a=p.lambda_a, lambda_e=p.lambda_e, reseed_key=cost)
    tau, nu = tau.astype(src.dtype), nu.astype(src.dtype)
    sub = False   # the model of a subspace (in_subspace)
    if p.learn_transform:
        rows = [None] * len(src.bounds)
        blocks, m = None, n
        if p.online_fraction is not None:  # the paper's online update: a random subset
            m = min(n, max(1, int(round(p.online_fraction * n))))
            parts = block_rows(src.bounds, np.sort(rng.choice(n, size=m, replace=False)))
            for b, r, _, _ in parts:
                rows[b] = r
            blocks = [b for b, *_ in parts]
        args = [(labels[s:e], sim[s:e], rows[b]) for b, (s, e) in enumerate(src.bounds)]
        U = model_shared(ctx, graph, p)
        sub = in_subspace(p, src.N, U, n)
        span = ctx.gram if isinstance(ctx.gram, RowSpan) else None
        gram3 = ctx.gram
        if span is not None and (ctx.forget is not None
                                 or (p.online_fraction is not None and not sub)):
            span, gram3 = None, ctx.gram.full_gram()  # a subset's, running sums: all of R^N
        elif sub and ctx.forget is None:
            span = gram3 = model_span(ctx, p, U)
        G, cross, tsq = src.map(P.pass_stage3, args, (tau, nu, p.lambda_a,
                                                      None if span is None else span.basis),
                                use_carry=True, blocks=blocks, combine=P.add)
        stats3 = TransformStatistics((gram3 if span is None else span.gram)
                                     if p.online_fraction is None else G, cross,
                                     max(float(tsq), 0.0), m, src.dtype)
        if ctx.forget is not None:
            stats3 = ctx.transform_sums = _forgotten(ctx.transform_sums, stats3, ctx.forget)
            sub = in_subspace(p, src.N, U, stats3.n_samples)
        if sub and span is None:  # running sums in R^N: the model of their principal subspace
            span = subspace_of(stats3.gram, stats3.n_samples, p.n_components, U)
            stats3 = project_statistics(stats3, span)
        if p.online_fraction is None:
            A = update_transform(A=A, stats=stats3, workspace=ctx.workspace, span=span,
                                 **stage3_priors(p))
        else:
            A = update_transform(A=A, stats=stats3, online_rate=p.online_rate, span=span,
                                 **stage3_priors(p))
    args = [(labels[s:e], sim[s:e]) for s, e in src.bounds]
    obj = float(src.map(P.pass_objective, args, (A, tau, nu, p, src.keep_q), use_carry=True,
                        store=True, combine=P.add))
    ws = ctx.workspace
    obj += _parameter_terms(A, tau, nu, p, ws.get("sv") if ws.get("A") is A else None,
                            subspace=sub)
    new = State(A=A, tau=tau, nu=nu, labels=labels, similarity_labels=sim,
                objective_history=state.objective_history + [obj], n_iter=state.n_iter + 1,
                reseeded=state.reseeded + [(state.n_iter + 1, c) for c in det["reseeded"]],
                graph=graph)
    return new, obj, det["reseeded"]


# ---------------------------------------------------------------------------------------------
# the loop, restarts, warm start
# ---------------------------------------------------------------------------------------------
def _fmt_time(s):
    if not np.isfinite(s):
        return "?"
    if s < 60:
        return f"{s:.1f}s"
    return f"{int(s // 60)}m{int(s % 60):02d}s"


class Report(numba_event.Listener):
    """The ``verbose`` output of a fit (stderr): one line per phase with its time, one per
    iteration, the total; tqdm progress bars on a terminal. numba's compilations
    (``"numba:compile"`` events: first calls, not cache loads) are announced once and timed
    apart (``with report:``). ``verbose >= 2`` adds the internals of the graph partition."""

    def __init__(self, verbose=0, stream=None):
        self.verbose = int(verbose or 0)
        self.stream = sys.stderr if stream is None else stream
        self.t0 = time.perf_counter()
        self.compiling, self.depth, self.since = 0.0, 0, None

    def __call__(self, msg):
        if self.verbose:   # above the progress bars of the stream
            tqdm.write(msg, file=self.stream)
            self.stream.flush()

    def bar(self, total, desc, show=True, delay=1.0, **kw):
        """A tqdm progress bar on the stream (``with`` it; cleared when closed), shown with
        ``verbose`` and ``show`` when the stream is a terminal, from ``delay`` seconds on."""
        return tqdm(total=total, desc=desc, file=self.stream, leave=False, delay=delay,
                    disable=None if self.verbose and show else True, **kw)

    def on_start(self, event):  # compilations are serialised by numba's compiler lock
        self.depth += 1
        if self.depth == 1:
            if self.since is None:
                self("compiling numba kernels (first call only: it can take tens of seconds; "
                     "cached for later calls) ...")
            self.since = time.perf_counter()

    def on_end(self, event):
        self.depth -= 1
        if self.depth == 0:
            self.compiling += time.perf_counter() - self.since

    def elapsed(self):
        """Seconds since the start, compilation excluded."""
        return time.perf_counter() - self.t0 - self.compiling

    def __enter__(self):
        numba_event.register("numba:compile", self)

    def __exit__(self, *exc):
        numba_event.unregister("numba:compile", self)

    @contextmanager
    def phase(self, what):
        """One line ``what: time`` after the block (None: no line)."""
        start = self.elapsed()
        yield
        if what:
            self(f"{what}: {_fmt_time(self.elapsed() - start)}")

    def total(self):
        more = (f" (and {_fmt_time(self.compiling)} compiling numba kernels, first call only)"
                if self.compiling else "")
        self(f"total {_fmt_time(self.elapsed())}{more}")


def _report(verbose, stream=None):
    return verbose if isinstance(verbose, Report) else Report(verbose, stream)


def _internals(verbose):  # the graph partition's own messages
    return max(0, _report(verbose).verbose - 1)


def run(ctx, state, p, rng, *, verbose=0, callback=None, stream=None):
    """Alternate from ``state`` until ``max_iter`` or a relative decrease below ``tol``.

    ``ctx``: a :class:`Context` (or an array ``X``, scaled, in memory). Returns the last
    complete iterate. A KeyboardInterrupt between or inside iterations stops the loop and
    returns the last complete iterate with ``interrupted=True``. ``callback(state)`` is called
    after every iteration; returning True stops the loop. ``verbose`` (or a :class:`Report`):
    one line per iteration (objective, relative change, elapsed time, ETA) on ``stream``.
    """
    if not isinstance(ctx, Context):
        src = MemoryBlocks(ctx)
        ctx = Context(src, gram=gram(src, p) if p.learn_transform else None)
        if p.rule == "graph":
            state, ctx.ref_X = state.copy(), src.X
            _set_graph(ctx, state, p, rng)
    say = _report(verbose, stream)
    t0 = say.elapsed()
    start_iter = state.n_iter
    try:
        # no delay: every line redraws the bar, and tqdm clears a delayed bar only if it drew it
        with blas_context(), say.bar(p.max_iter, "iterations", p.max_iter > start_iter + 1,
                                     delay=0, initial=start_iter) as bar:
            while state.n_iter < p.max_iter:
                prev = state.objective_history[-1] if state.objective_history else None
                state, obj, reseeded = iterate_blocks(ctx, state, p, rng)
                bar.update()
                if say.verbose:
                    eta = ((say.elapsed() - t0) / (state.n_iter - start_iter)
                           * (p.max_iter - state.n_iter))
                    change = "" if prev is None else f"  change {(prev - obj) / abs(prev):+.3e}"
                    msg = (f"iteration {state.n_iter:4d}  objective {obj:.6e}{change}  "
                           f"elapsed {_fmt_time(say.elapsed())}  eta {_fmt_time(eta)}")
                    say(msg + (f"  re-seeded clusters {reseeded}" if reseeded else ""))
                if callback is not None and callback(state):
                    break
                if prev is not None and abs(prev - obj) <= p.tol * max(abs(prev), 1e-300):
                    break
    except KeyboardInterrupt:
        state = state.copy()
        state.interrupted = True
        say(f"interrupted: keeping iteration {state.n_iter}")
    return state


class _FirstLabels:
    """Callback wrapper keeping the partition a fit starts from (``initial_labels_``).

    ``labels``: the initial partition when the initialisation made one (``init="graph"``),
    else the labels of the first iteration's Stage 1.
    """

    def __init__(self, labels, callback):
        self.labels = None if labels is None else np.array(labels, dtype=np.int64)
        self.callback = callback

    def __call__(self, state):
        if self.labels is None and state.labels is not None:
            self.labels = np.array(state.labels, dtype=np.int64)
        return self.callback(state) if self.callback is not None else False


def graph_summary(info):
    """What a fit keeps of a graph partition's ``info``: ``n_shared``, its cut, every cut, and
    the mean and shared directions of the graph's rows (those of ``predict``)."""
    return {"n_shared": info["n_shared"], "graph_cut": info["ncut"][info["n_shared"]],
            "ncut": dict(info["ncut"]), "mean": info["mean"], "V": info["V"]}


def reference_rows(src, seed):
    """Rows of the reference sample (sorted), or None for all rows (see REFERENCE_SIZE).

    Drawn among distinct rows (the first of every group of equal rows, by a hash pass over the
    blocks): data repeated r times get the reference sample of the data itself, not one with
    fewer distinct rows (all of them when there are at most ``REFERENCE_SIZE``); on data
    without repeated rows the same draw as among all rows.
    """
    if not src.subsample or src.n <= REFERENCE_SIZE:
        return None
    # rows of equal hashes: the first only (rows of colliding hashes are never drawn)
    _, first = np.unique(np.concatenate(src.map(P.pass_row_hashes)), return_index=True)
    first = np.sort(first)
    if first.size <= REFERENCE_SIZE:
        return first
    return np.sort(first[np.random.RandomState(seed).choice(first.size, REFERENCE_SIZE,
                                                            replace=False)])


def _vote(src, rows, Xref, lab_ref, graph, p):
    """Graph rule: :func:`ntnumba.engine.passes.pass_vote`'s ``(labels, scores, shares,
    match)`` of the global rows ``rows`` against the reference set (as ``predict``)."""
    space = P.vote_space(Xref, graph["mean"], graph["V"], p.representation)
    rows_ref = P.space_rows(Xref, space)
    parts = block_rows(src.bounds, rows)
    args = [None] * len(src.bounds)
    for b, local, _, _ in parts:
        args[b] = (local,)
    res = src.map(P.pass_vote, args, (p, space, P.RowIndex(Xref), rows_ref, lab_ref),
                  blocks=[b for b, *_ in parts])
    return tuple(np.concatenate([r[i] for r in res]) for i in range(4))


def graph_labels(src, Xref, ref_rows, state, p, rng, verbose=0):
    """Graph rule: the clusters of every row. The reference set ``Xref`` (rows ``ref_rows``,
    None: all) is partitioned (or keeps ``state.labels`` of ``init="graph"``), the other rows
    are labelled by the k-NN vote; ``state.labels`` of every row (a ``warm_start``) are kept.
    Sets ``state.graph``; returns ``(labels, vote)`` (:func:`_vote` of the other rows, or
    None)."""
    if state.graph is None or state.labels is None:
        # the same partition, representation rules included, as init="graph" (initialise)
        lab, info = select.partition(Xref, p.n_clusters, p, rng.randint(_INT32_MAX),
                                      verbose=_internals(verbose))
        state.graph = graph_summary(info)
    else:
        lab = state.labels
    lab = np.asarray(lab, dtype=np.int64)
    state.graph["ref_rows"] = ref_rows
    if ref_rows is None or len(lab) == src.n:  # every row labelled (a continued fit)
        return lab, None
    labels = np.empty(src.n, dtype=np.int64)
    labels[ref_rows] = lab
    others = np.setdiff1d(np.arange(src.n), ref_rows)
    vote = _vote(src, others, Xref, lab, state.graph, p)
    labels[others] = vote[0]
    return labels, (others,) + vote[1:]


def _set_graph(ctx, state, p, rng, verbose=0):
    """Graph rule: the clusters of every row of ``ctx.src`` from ``state`` (its partition of
    the reference set ``ctx.ref_X``, or a new one) into ``ctx`` and ``state.labels``; one
    ``verbose`` line for what it did."""
    n, ref, say = ctx.src.n, ctx.ref_rows, _report(verbose)
    what = [] if state.graph is not None and state.labels is not None else [
        f"graph partition of {n if ref is None else len(ref)} samples"]
    if ref is not None and (state.labels is None or len(state.labels) != n):
        what.append(f"k-NN vote of the other {n - len(ref)} samples")
    with say.phase(" and ".join(what)):
        ctx.labels, ctx.vote = graph_labels(ctx.src, ctx.ref_X, ref, state, p, rng, say)
        state.labels = ctx.labels
    ctx.ref_labels = ctx.labels if ctx.ref_rows is None else ctx.labels[ctx.ref_rows]


def fit(src, p, *, seeds, seed, warm=None, verbose=0, callback=None):
    """Fit over the source ``src`` (scale set): the ``n_init`` restarts from ``seeds`` (the one
    with the lowest final objective is kept) or, with ``warm = (state, rng)``, the continuation
    of that iterate. ``seed``: of the reference sample. Returns ``(state, rng, ctx)``;
    ``state.interrupted`` after a KeyboardInterrupt during the iterations, or during a later
    restart's initialisation (the last complete iterate)."""
    say = src.report = _report(verbose)   # the source's passes show progress bars
    with say.phase("feature statistics (X^T X)" if p.learn_transform else None):
        G = gram(src, p) if p.learn_transform else None
    if warm is not None:
        state, rng = warm[0].copy(), warm[1]
        ctx = Context(src, gram=G, seed=seed)
        if p.rule == "graph":
            if state.labels is None or len(state.labels) != src.n:
                raise ValueError("warm_start: the graph rule continues on the samples of the "
                                 f"previous fit ({0 if state.labels is None else len(state.labels)}"
                                 f" rows), got {src.n} rows; fit without warm_start")
            ctx.ref_rows = (state.graph or {}).get("ref_rows")
            ctx.ref_X = src.take(ctx.ref_rows)
            _set_graph(ctx, state, p, rng, say)
        return run(ctx, state, p, rng, verbose=say, callback=callback), rng, ctx
    ref_rows = reference_rows(src, seed)
    Xref = src.take(ref_rows)
    best = None
    for i, s in enumerate(seeds):
        rng = np.random.RandomState(s)
        src.reset()
        if len(seeds) > 1:
            say(f"start {i + 1} of {len(seeds)}")
        try:
            with say.phase(f"graph partition of {len(Xref)} samples" if p.init == "graph"
                           else f"initialisation ({p.init})"):
                state = initialise(Xref, p, rng, verbose=say)
            ctx = Context(src, gram=G, ref_X=Xref, ref_rows=ref_rows, seed=seed)
            if p.rule == "graph":
                _set_graph(ctx, state, p, rng, say)
        except KeyboardInterrupt:  # keep the best of the complete restarts
            if best is None:
                raise
            best[1].interrupted = True
            say(f"interrupted: keeping start {i} of {len(seeds)}")
            break
        first = _FirstLabels(state.labels if state.labels is not None
                             and len(state.labels) == src.n else None, callback)
        state = run(ctx, state, p, rng, verbose=say, callback=first)
        state.initial_labels = first.labels
        key = state.objective_history[-1] if state.objective_history else np.inf
        if best is None or key < best[0]:
            best = (key, state, rng, ctx)
        if state.interrupted:
            break
    return best[1:]


def partial(src, state, rng, p, stream, forget, seed, *, verbose=0):
    """One ``partial_fit`` call: the iteration of :func:`fit` on the chunk ``src`` with the
    Stage-2/3 sums added to the running sums of ``stream`` (times ``forget``).

    ``state`` None: initialise from the chunk. ``stream``: ``{"theta", "transform"}`` running
    sums (None at the start) and ``"ref"`` (the graph rule's reference set ``(X, labels)``,
    None: the chunk's partition becomes it). Returns ``(public fitted attributes,
    FittedModel, new stream)``;
    nothing is changed when it raises (an interrupt included).
    """
    ctx = Context(src, gram=gram(src, p) if p.learn_transform else None, forget=forget,
                  theta_sums=stream["theta"], transform_sums=stream["transform"], seed=seed)
    say = _report(verbose)
    state = initialise(src.X, p, rng, verbose=say) if state is None else state.copy()
    ref = stream["ref"]
    if p.rule == "graph":
        if ref is None:
            ctx.ref_X = src.X
            _set_graph(ctx, state, p, rng, say)
            ref = (src.X, ctx.labels)
        else:
            ctx.labels = _vote(src, np.arange(src.n), ref[0], ref[1], state.graph, p)[0]
        state.labels = ctx.labels
        ctx.ref_X, ctx.ref_labels = ref
    new = run(ctx, state, replace(p, max_iter=state.n_iter + 1), rng, verbose=say)
    if new.interrupted:
        raise KeyboardInterrupt
    attrs, fitted = fitted_attributes(ctx, new, rng, p, seed)
    return attrs, fitted, {"theta": ctx.theta_sums, "transform": ctx.transform_sums,
                           "ref": ref, "scale": src.scale,
                           "n_seen": stream.get("n_seen", 0) + src.n}


# ---------------------------------------------------------------------------------------------
# the fitted state
# ---------------------------------------------------------------------------------------------
def warn_zero_codes(nonzero, q_max, p, scale):
    """One ``RuntimeWarning`` when no training sample has a nonzero NT representation
    (``nonzero == 0``): ``lambda1`` at or above every ``|q| = |A x|`` of the scaled data (a
    large ``lambda1``, or data of subnormal size that ``scaling="rms"`` cannot scale up).
    Attributed to the user's call (:func:`ntnumba.core.validation.user_stacklevel`)."""
    if nonzero:
        return
    warnings.warn(
        f"all NT representations of the training data are zero: lambda1={p.lambda1:.6g} "
        f"against max |A x| = {q_max:.4g} over the data scaled by scale_={scale:.3g}; "
        f"transform() gives zeros and the representations play no part in the clusters. "
        f"Lower lambda1 below max |A x| or rescale the data", RuntimeWarning,
        stacklevel=user_stacklevel())


def fitted_attributes(ctx, state, rng, p, seed):
    """``(attrs, fitted)``: the public fitted attributes of :class:`ntnumba.NTClustering` from
    the final iterate (a dict; the estimator assigns them all at once) and the
    :class:`~ntnumba.engine.fitted.FittedModel`. ``labels_`` and ``similarity_labels_``:
    Stage 1 with the final parameters over the source's blocks (the soft scores of the
    training rows are the estimator's)."""
    src = ctx.src
    if p.rule == "graph" and state.graph is None:  # dropped after the last iteration
        state = state.copy()
        _set_graph(ctx, state, p, np.random.RandomState(seed))
    A = state.A if state.A is not None else np.eye(src.N, dtype=src.dtype)
    fitted = FittedModel(params=p, state=state, rng_state=rng.get_state())
    out = {"scale_": src.scale, "n_features_in_": src.N, "components_": A,
           "dissimilarity_": state.tau, "similarity_": state.nu, "n_iter_": state.n_iter,
           "objective_history_": np.asarray(state.objective_history, dtype=np.float64)}
    if state.initial_labels is not None:
        out["initial_labels_"] = state.initial_labels
    fixed = ctx.labels
    args = [(None if fixed is None else fixed[s:e],) for s, e in src.bounds]
    with blas_context():
        res = src.map(P.pass_final, args, (state.A, state.tau, state.nu, p),
                      use_carry=src.keep_q)
        out["labels_"] = np.concatenate([r[0] for r in res]).astype(np.int64, copy=False)
        out["similarity_labels_"] = np.concatenate([r[1] for r in res]).astype(np.int64,
                                                                               copy=False)
        warn_zero_codes(sum(r[2] for r in res), max((r[3] for r in res), default=0.0), p,
                        src.scale)
        if p.rule != "graph":
            return out, fitted
    r = int(state.graph["n_shared"])
    out.update(graph_cut_=float(state.graph["graph_cut"]), n_shared_=r,
               shared_mean_=np.asarray(state.graph["mean"], dtype=np.float64),
               shared_components_=np.asarray(state.graph["V"], dtype=np.float64))
    fitted.ref_X = ctx.ref_X
    fitted.ref_labels = np.asarray(ctx.ref_labels, dtype=np.int64)
    return out, fitted
