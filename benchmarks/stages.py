"""The timed problems of ``python -m benchmarks.bench`` and of the asv suite (``asv_bench/``).

Sizes (:data:`SIZES`): ``tiny`` (120 samples of the COIL-20 demo at 48 pixels, M = 64, Cd = 4;
seconds), ``coil`` (COIL-20 at the paper's size: n = 1440, N = 500, M = 2100, Cd = 20, Cs = 2)
and ``large`` (COIL-20 at 32x32: N = 1024, M = 4200). The state of a problem is that of the
paper's alternating algorithm (``assign="objective"``) after two iterations: one of an
``NTClustering`` fit, one of :func:`iterate`.

Stage 1 is :func:`ntnumba.kernels.assign`, Stage 2 :func:`ntnumba.kernels.update_theta`,
Stage 3 :func:`ntnumba.kernels.update_transform` on the statistics of
:func:`ntnumba.kernels.transform_statistics`; :func:`iterate` composes these public kernels into
one iteration with its objective (it makes the problems' states). The timed iteration is the
fit's own (:func:`fit_iteration`: ``ntnumba.engine.loop.iterate_blocks`` under the fit's BLAS
policy) and the unit of its cost the product ``Q = X A^T`` as the fit computes it
(``ntnumba.engine.passes.compute_Q``): the statistics without forming ``Ybar``, the objective
from the ``Q`` kept for the next Stage 1 and the singular values of ``A``
(docs/research/paper-iteration-speed.md).

The asv suite loads this file by its path (asv imports ``asv_bench/benchmarks`` as the package
``benchmarks``), so it imports nothing of the harness.
"""
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

SIZES = {
    # name: (n or None for the whole COIL set, M, Cd, Cs)
    "tiny": (120, 64, 4, 2),
    "coil": (None, 2100, 20, 2),
    "large": (None, 4200, 20, 2),   # COIL-20 at 32x32 (N = 1024), M = 4200
}

#: BLAS threads while timing: the fit's policy (one BLAS thread beside numba's threads; OpenBLAS
#: threads left spinning after a product slow Stage 1 down, docs/performance.md)
BLAS_THREADS = 1

_LAMBDAS = ("lambda0", "lambda1", "lambda_e", "lambda_a", "lambda2", "lambda3", "lambda4")


def blas_limit():
    """A context with :data:`BLAS_THREADS` BLAS threads (threadpoolctl)."""
    from threadpoolctl import threadpool_limits
    return threadpool_limits(limits=BLAS_THREADS, user_api="blas")


@dataclasses.dataclass
class Params:
    """The hyper-parameters of a problem: ``NTClustering``'s (its defaults for the lambdas) with
    the paper's alternating rule, and one Stage-3 step per iteration as a fit takes."""

    n_clusters: int
    n_components: int
    n_similarity: int
    lambda0: float
    lambda1: float
    lambda_e: float
    lambda_a: float
    lambda2: float
    lambda3: float
    lambda4: float
    rule: str = "objective"
    learn_transform: bool = True
    transform_steps: int = 1

    @classmethod
    def of(cls, n_clusters, n_components, n_similarity=2):
        from ntnumba import NTClustering
        defaults = NTClustering().get_params()
        return cls(n_clusters, n_components, n_similarity,
                   **{k: defaults[k] for k in _LAMBDAS})

    def estimator(self, **kwargs):
        """An ``NTClustering`` of these parameters (``kwargs``: the others)."""
        from ntnumba import NTClustering
        return NTClustering(self.n_clusters, n_components=self.n_components,
                            n_similarity=self.n_similarity, assign=self.rule,
                            learn_transform=self.learn_transform,
                            **{k: getattr(self, k) for k in _LAMBDAS}, **kwargs)

    def stage3(self):
        """The keyword arguments of ``update_transform``: the priors of ``A`` divided by
        ``1 + lambda_a`` (the Stage-3 target is ``Ybar``, see :func:`iterate`)."""
        w = 1.0 + self.lambda_a
        return dict(lambda2=self.lambda2 / w, lambda3=self.lambda3 / w,
                    lambda4=self.lambda4 / w, n_steps=self.transform_steps)


def statistics(X, Ybar, like=None):
    """``transform_statistics(X, Ybar)``; with ``like`` (statistics of the same ``X``) only
    ``Ybar^T X`` and ``||Ybar||^2`` are computed and ``X^T X`` is ``like``'s array, as in a fit
    (``update_transform`` then reuses ``lambda_max`` from its workspace)."""
    from ntnumba.kernels import transform_statistics
    if like is None:
        return transform_statistics(X, Ybar)
    Y64 = np.asarray(Ybar, dtype=np.float64)
    return dataclasses.replace(like, cross=Y64.T @ np.asarray(X, dtype=np.float64),
                               target_sq=float(np.vdot(Y64, Y64)))


def target(Y, labels, sim, tau, nu, lambda_a):
    """The Stage-3 target ``Ybar = (Y + lambda_a (tau_j1 + nu_j2)) / (1 + lambda_a)``."""
    return (Y + lambda_a * (tau[labels] + nu[sim])) / (1.0 + lambda_a)


def objective(Q, Y, labels, sim, tau, nu, A, p):
    """The objective of the learning problem at one iterate (``Q = X A^T``)."""
    from ntnumba.kernels import theta_objective, transform_objective
    obj = 0.5 * float(np.sum((Q - Y) ** 2)) + p.lambda1 * float(np.sum(np.abs(Y)))
    obj += theta_objective(Q, Y, labels, sim, tau, nu, lambda0=p.lambda0, lambda_a=p.lambda_a,
                           lambda_e=p.lambda_e)
    if p.learn_transform:  # the priors of A: transform_objective of one zero sample
        M, N = A.shape
        obj += transform_objective(A, np.zeros((1, N)), np.zeros((1, M)), p.lambda2,
                                   p.lambda3, p.lambda4)
    return obj


def fit_iteration(pb):
    """A callable running one iteration of the fit (``iterate_blocks`` of ``ntnumba.engine.loop``,
    in memory, under the fit's BLAS policy) from the state of ``pb``, the same at every call:
    ``Q = X A^T`` of that state in the block's carry, a copy of its ``workspace``. Returns the
    fit's ``(state, objective, reseeded)``."""
    from ntnumba.core.parallel import blas_context
    from ntnumba.engine import loop
    from ntnumba.engine.sources import MemoryBlocks
    p = pb.p
    fp = loop.Params(p.n_clusters, p.n_components, p.n_similarity, rule=p.rule,
                     learn_transform=p.learn_transform, transform_steps=p.transform_steps,
                     **{k: getattr(p, k) for k in _LAMBDAS})
    src = MemoryBlocks(pb.X)
    ctx = loop.Context(src, gram=pb.stats.gram if p.learn_transform else None)
    state = loop.State(A=pb.A, tau=pb.tau, nu=pb.nu)

    def call():
        src.carry = [{"Q": pb.Q, "Q_of": pb.A}]
        ctx.workspace = dict(pb.workspace or {})
        with blas_context():
            return loop.iterate_blocks(ctx, state, fp, np.random.RandomState(0))

    return call


def fit_product(pb):
    """A callable: ``Q = X A^T`` of the state of ``pb`` as the fit computes it."""
    from ntnumba.core.parallel import blas_context
    from ntnumba.engine.passes import compute_Q

    def call():
        with blas_context():
            return compute_Q(pb.X, pb.A, True)

    return call


def iterate(X, A, tau, nu, p, Q=None, like=None, workspace=None):
    """One iteration (Stages 1-3 and the objective) composed of the public kernels.

    ``Q``: ``X A^T`` when known; ``like``: statistics of ``X`` whose ``X^T X`` is reused;
    ``workspace``: the dict ``update_transform`` carries between calls. Returns
    ``(A, tau, nu, labels, objective, Q, stats)``: the new parameters, the Stage-1 labels, the
    objective, ``X A^T`` of the new ``A`` and the Stage-3 statistics.
    """
    from ntnumba.kernels import assign, update_theta, update_transform
    if Q is None:
        Q = X @ A.T
    lab, sim, Y, _, det = assign(Q, tau, nu, p.lambda0, p.lambda1, rule=p.rule,
                                 lambda_a=p.lambda_a, return_details=True, prune=True)
    tau, nu = update_theta(Q, Y, lab, sim, tau, nu, lambda0=p.lambda0, lambda_a=p.lambda_a,
                           lambda_e=p.lambda_e, cost=det["cost"])
    stats = like
    if p.learn_transform:
        stats = statistics(X, target(Y, lab, sim, tau, nu, p.lambda_a), like)
        A = update_transform(A=A, stats=stats, workspace=workspace, **p.stage3())
        Q = X @ A.T
    return A, tau, nu, lab, objective(Q, Y, lab, sim, tau, nu, A, p), Q, stats


@dataclasses.dataclass
class Problem:
    """A timed problem: data ``X`` (rms-scaled, as a fit sees it), labels ``y``, parameters
    ``p``, the state ``A``, ``tau``, ``nu``, ``Q = X A^T``, the Stage-3 statistics ``stats`` of
    ``X`` and the ``workspace`` of ``update_transform`` (it describes ``A``)."""

    X: np.ndarray
    y: np.ndarray
    p: Params
    A: np.ndarray
    tau: np.ndarray
    nu: np.ndarray
    Q: np.ndarray = None
    stats: object = None
    workspace: dict = None

    def step(self):
        """The problem after one more :func:`iterate`."""
        ws = dict(self.workspace or {})
        A, tau, nu, _, _, Q, stats = iterate(self.X, self.A, self.tau, self.nu, self.p, self.Q,
                                             self.stats, ws)
        return dataclasses.replace(self, A=A, tau=tau, nu=nu, Q=Q, stats=stats, workspace=ws)

    def rows(self, rows):
        """The same state on the rows ``rows`` of the data (its own statistics; the workspace
        holds ``lambda_max`` of their ``X^T X``)."""
        from ntnumba.kernels import assign, update_transform
        X = np.ascontiguousarray(self.X[rows])
        Q = np.ascontiguousarray(self.Q[rows])
        lab, sim, Y, _ = assign(Q, self.tau, self.nu, self.p.lambda0, self.p.lambda1,
                                rule=self.p.rule, lambda_a=self.p.lambda_a)
        stats = statistics(X, target(Y, lab, sim, self.tau, self.nu, self.p.lambda_a))
        ws = {}
        update_transform(A=self.A, stats=stats, workspace=ws, **self.p.stage3())
        return dataclasses.replace(self, X=X, y=self.y[rows], Q=Q, stats=stats, workspace=ws)


def problem(size, seed=0):
    """The :class:`Problem` of a named size (module docs)."""
    from ntnumba.datasets import load_demo
    n, M, Cd, Cs = SIZES[size]
    X, y = load_demo("32x32" if size == "large" else "paper")
    if size == "tiny":
        rng = np.random.default_rng(seed)
        keep = np.sort(rng.choice(X.shape[0], n, replace=False))
        X, y = X[keep][:, :48], y[keep] % Cd
    X = np.ascontiguousarray(X * np.sqrt(1.0 / np.mean(X * X)))  # the estimator's rms scaling
    p = Params.of(Cd, M, Cs)
    model = p.estimator(init="k-means++", max_iter=1, tol=0, scaling=None,
                        random_state=seed).fit(X)
    first = Problem(X, y, p, model.components_, model.dissimilarity_, model.similarity_)
    with blas_limit():
        return first.step()


def stage_calls(pb, dtype=np.float64):
    """Callables of Stage 1, 2, 3, one iteration of the fit (:func:`fit_iteration`) and the
    product ``Q = X A^T`` as the fit computes it (:func:`fit_product`: the unit of an
    iteration's cost) on the problem ``pb``; the inputs of Stages 2 and 3 (Stage 1's output)
    are computed once here. Stage 1 also in ``dtype``."""
    from ntnumba.kernels import assign, update_theta, update_transform
    p, X = pb.p, pb.X
    Qd = pb.Q.astype(dtype)
    lab, sim, Y, _, det = assign(pb.Q, pb.tau, pb.nu, p.lambda0, p.lambda1, rule=p.rule,
                                 lambda_a=p.lambda_a, return_details=True)

    def stage3():
        stats = statistics(X, target(Y, lab, sim, pb.tau, pb.nu, p.lambda_a), pb.stats)
        return update_transform(A=pb.A, stats=stats, workspace=dict(pb.workspace),
                                **p.stage3())

    return {
        "stage1": lambda: assign(Qd, pb.tau, pb.nu, p.lambda0, p.lambda1, rule=p.rule,
                                 lambda_a=p.lambda_a),
        # as the fit runs it: candidates that cannot win are skipped (same assignment)
        "stage1_pruned": lambda: assign(Qd, pb.tau, pb.nu, p.lambda0, p.lambda1, rule=p.rule,
                                        lambda_a=p.lambda_a, prune=True),
        "stage2": lambda: update_theta(pb.Q, Y, lab, sim, pb.tau, pb.nu, lambda0=p.lambda0,
                                       lambda_a=p.lambda_a, lambda_e=p.lambda_e,
                                       cost=det["cost"]),
        "stage3": stage3,
        "iteration": fit_iteration(pb),
        "qax": fit_product(pb),
    }


# --------------------------------------------------------------------------------------------
# first-call compilation, in fresh interpreters
# --------------------------------------------------------------------------------------------
def _subprocess(code, timeout=1800, env=None):
    """The JSON object the last line of ``python -c code`` prints (``env``: added variables)."""
    full_env = None if env is None else {**os.environ, **env}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=timeout, env=full_env)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


_COMPILE = """
import json, time, numpy as np
t0 = time.perf_counter()
import ntnumba
from ntnumba import NTClustering
from ntnumba.kernels import assign, update_theta
t_import = time.perf_counter() - t0
rng = np.random.default_rng(0)
Q, tau = rng.standard_normal((20, 16)), rng.standard_normal((3, 16))
nu = rng.standard_normal((2, 16))
out = {"import": t_import}
def first(name, f):
    t = time.perf_counter(); f(); t1 = time.perf_counter() - t
    t = time.perf_counter(); f(); t2 = time.perf_counter() - t
    out[name] = t1 - t2
first("stage1_float64", lambda: assign(Q, tau, nu, 0.03, 0.03))
first("stage1_float32", lambda: assign(Q.astype(np.float32), tau, nu, 0.03, 0.03))
lab, sim, Y, _ = assign(Q, tau, nu, 0.03, 0.03)
first("stage2", lambda: update_theta(Q, Y, lab, sim, tau, nu))
X = rng.standard_normal((30, 4))
first("fit_rest", lambda: NTClustering(3, n_components=8, max_iter=2, random_state=0).fit(X))
out["total"] = sum(v for k, v in out.items() if k != "import")
print(json.dumps(out))
"""


def compile_times():
    """First-call compilation in fresh interpreters: (cold, cached).

    Both use a new, empty numba cache directory (``NUMBA_CACHE_DIR``): the first interpreter
    compiles every kernel and writes the cache (what a user's first fit pays once), the second
    loads them from it (every later process). With the cache disabled (``NTNUMBA_CACHE=0``)
    both compile.
    """
    with tempfile.TemporaryDirectory(prefix="ntnumba-numba-cache-") as d:
        env = {"NUMBA_CACHE_DIR": d}
        cold = _subprocess(_COMPILE, env=env)
        cached = _subprocess(_COMPILE, env=env)
    return cold, cached
