"""Stage 3 of the NT clustering algorithm: the linear map ``A``.

Row convention: ``X`` (n, N), target ``Ybar`` (n, M), ``A`` (M, N) with ``M >= N`` (or the
map of a subspace, zero outside it: ``update_transform(span=)``), ``Q = X @ A.T``.
The problem::

    f(A) = 1/2 ||X A^T - Ybar||_F^2 + lambda2/2 ||A||_F^2 + lambda3/2 ||A A^T - I||_F^2
           - lambda4 log det(A^T A)

Only ``G = X^T X``, ``B0 = Ybar^T X`` and ``||Ybar||_F^2`` enter ``f`` and its minimiser
(:class:`TransformStatistics`, summable over row chunks: the seam for streaming and Dask fits).
The exact step ``A = U diag(s') V^T`` of a target ``B = U diag(s) V^T`` (:func:`_closed_form`,
:func:`transform_singular_values`), the MM steps on ``B_k = B0 - A_k (G - c I)``, their
acceleration, the weak and null directions and the span of fewer rows than features:
derivation: docs/algorithm.md, section "Stage 3: the linear map A".
"""
from dataclasses import dataclass

import numpy as np
from numba import get_num_threads
from scipy.linalg import qr as scipy_qr
from scipy.linalg import solve_triangular
from scipy.linalg.lapack import dorgqr as _dorgqr
from scipy.linalg.lapack import dpstrf as _dpstrf
from sklearn.utils import check_random_state

from ..core.linalg import svd as _svd  # gesdd, gesvd where gesdd does not converge
from ..core.parallel import background as _background
from ..core.parallel import blas_limit as _blas_limit
from ..core.parallel import matmul as _matmul
from ..core.parallel import run_blocks
from ..core.parallel import serial as _serial
from ..core.validation import as_float_array, check_choice, check_scalar


def _serial_lapack():
    """Context: one BLAS thread around the N x N LAPACK calls (eigh, Cholesky): their panels
    synchronise the threads (eigh at N = 500 on a loaded 2-core machine: 0.04 s serial, 0.45 s
    on two). The M x N x N products keep every thread.
    """
    return _blas_limit(1)


__all__ = [
    "TransformStatistics",
    "identity_transform",
    "transform_gradient",
    "transform_objective",
    "transform_singular_values",
    "transform_statistics",
    "update_transform",
]

_EPS = np.finfo(np.float64).eps
# weak: s_i < _BAND s_max, orthonormalised explicitly (B v_i / s_i loses ~eps (s_max / s_i)^2)
_BAND = 1e-3
_ZERO = 1e3 * _EPS  # below, no usable direction: random completion
# null space with an anchor (s_i <= _NULL s_max: not reproducible between summation orders),
# completed from the anchor (docs/research/stage3-null-space-threshold.md)
_NULL = float(np.sqrt(_EPS))
# more weak directions than this (count and share of N): the QR route (_closed_form_qr)
_QR_MIN_WEAK = 16
_QR_WEAK_SHARE = 0.125
_C_INFLATE = 1.0 + 1e-10  # c >= lambda_max(G) despite eigvalsh's ~eps ||G|| error


@dataclass(frozen=True, eq=False)
class TransformStatistics:
    """Sufficient statistics of ``(X, Ybar)`` for the Stage-3 problem.

    Attributes
    ----------
    gram : ndarray of shape (N, N), float64
        ``X^T X``.
    cross : ndarray of shape (M, N), float64
        ``Ybar^T X``.
    target_sq : float
        ``||Ybar||_F^2``.
    n_samples : int
        Number of rows the statistics were accumulated over.
    dtype : numpy.dtype
        dtype of the data (float32 or float64); :func:`update_transform` returns ``A`` in it.

    Statistics of disjoint row blocks add up (``+``) to those of the stacked rows.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import transform_statistics
    >>> rng = np.random.default_rng(0)
    >>> X, Ybar = rng.standard_normal((10, 3)), rng.standard_normal((10, 4))
    >>> st = transform_statistics(X[:6], Ybar[:6]) + transform_statistics(X[6:], Ybar[6:])
    >>> bool(np.allclose(st.cross, Ybar.T @ X)), st.n_samples
    (True, 10)
    """

    gram: np.ndarray
    cross: np.ndarray
    target_sq: float
    n_samples: int
    dtype: np.dtype

    @property
    def n_features(self):
        """N, the input dimension."""
        return self.gram.shape[0]

    @property
    def n_components(self):
        """M, the transform dimension."""
        return self.cross.shape[0]

    def __add__(self, other):
        if not isinstance(other, TransformStatistics):
            return NotImplemented
        if other.cross.shape != self.cross.shape:
            raise ValueError(f"cannot add statistics of shapes {self.cross.shape} and "
                             f"{other.cross.shape}")
        return TransformStatistics(self.gram + other.gram, self.cross + other.cross,
                                   self.target_sq + other.target_sq,
                                   self.n_samples + other.n_samples,
                                   np.result_type(self.dtype, other.dtype))


def transform_statistics(X, Ybar):
    """Sufficient statistics ``X^T X``, ``Ybar^T X`` and ``||Ybar||_F^2`` of the Stage-3 problem.

    Parameters
    ----------
    X : array-like of shape (n, N)
        Data, samples as rows (float32 or float64; other numeric types become float64).
    Ybar : array-like of shape (n, M)
        Target representations (``(Y + T) / 2`` in the algorithm).

    Returns
    -------
    stats : TransformStatistics
        Computed in float64; ``stats.dtype`` records the dtype of ``X``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import transform_statistics
    >>> X = np.eye(3, dtype=np.float32)
    >>> st = transform_statistics(X, np.ones((3, 5)))
    >>> st.gram.shape, st.cross.shape, st.target_sq, st.dtype
    ((3, 3), (5, 3), 15.0, dtype('float32'))
    """
    X = as_float_array(X, "X", ndim=2)
    Ybar = as_float_array(Ybar, "Ybar", ndim=2)
    if Ybar.shape[0] != X.shape[0]:
        raise ValueError(f"X and Ybar must have the same number of rows, got {X.shape[0]} and "
                         f"{Ybar.shape[0]}")
    dtype = X.dtype
    X64 = X.astype(np.float64, copy=False)
    Y64 = Ybar.astype(np.float64, copy=False)
    gram = X64.T @ X64
    gram = 0.5 * (gram + gram.T)
    cross = Y64.T @ X64
    target_sq = float(np.vdot(Y64, Y64))
    return TransformStatistics(gram, cross, target_sq, X.shape[0], np.dtype(dtype))


def assignment_statistics(X, Y, tau, nu, labels, similarity_labels, lambda_a=1.0, *,
                          gram=None, chunk_size=256):
    """Statistics of the target ``Ybar = (Y + lambda_a T) / (1 + lambda_a)``, ``T_i = tau_j1(i)
    + nu_j2(i)``, without forming ``Ybar`` or ``T``: one pass over ``Y`` (float64 as it is,
    other dtypes in float64 row chunks of ``chunk_size``) and the per-cluster sums of ``X``.

    Parameters
    ----------
    X, Y : ndarray of shape (n, N) and (n, M)
    tau, nu : ndarray of shape (Cd, M) and (Cs, M)
    labels, similarity_labels : ndarray of int, shape (n,)
    lambda_a : float, default 1.0
    gram : ndarray of shape (N, N), optional
        ``X^T X`` when already known (it does not change between iterations).
    chunk_size : int, default 256

    Returns
    -------
    TransformStatistics
        Equal (up to rounding) to ``transform_statistics(X, Ybar)``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import assignment_statistics, transform_statistics
    >>> rng = np.random.default_rng(0)
    >>> X, Y = rng.standard_normal((30, 3)), rng.standard_normal((30, 5))
    >>> tau, nu = rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    >>> lab, sim = rng.integers(0, 2, 30), rng.integers(0, 2, 30)
    >>> st = assignment_statistics(X, Y, tau, nu, lab, sim, 0.5)
    >>> ref = transform_statistics(X, (Y + 0.5 * (tau[lab] + nu[sim])) / 1.5)
    >>> bool(np.allclose(st.cross, ref.cross)), bool(np.isclose(st.target_sq, ref.target_sq))
    (True, True)
    """
    X = as_float_array(X, "X", ndim=2, allow_empty=True)  # no columns: the span of zero rows
    n, N = X.shape
    Y = np.asarray(Y)
    M = Y.shape[1]
    tau = np.asarray(tau, dtype=np.float64)
    nu = np.asarray(nu, dtype=np.float64)
    Cd, Cs = tau.shape[0], nu.shape[0]
    labels = np.asarray(labels, dtype=np.int64)
    sim = np.asarray(similarity_labels, dtype=np.int64)
    w = 1.0 + lambda_a
    X64 = X.astype(np.float64, copy=False)
    if gram is None:
        gram = X64.T @ X64
        gram = 0.5 * (gram + gram.T)
    one1 = np.zeros((Cd, n))
    one1[labels, np.arange(n)] = 1.0
    one2 = np.zeros((Cs, n))
    one2[sim, np.arange(n)] = 1.0
    # Y^T X, ||Y||^2 and the per-cluster sums of y (float64 Y: one chunk)
    step = max(n, 1) if Y.dtype == np.float64 else chunk_size
    YX = np.zeros((M, N)) if n == 0 else None
    Ys1 = np.zeros((Cd, M))
    Ys2 = np.zeros((Cs, M))
    yy = 0.0
    for s in range(0, n, step):
        Yc = np.asarray(Y[s:s + step], dtype=np.float64)
        part = _matmul(Yc.T, X64[s:s + step])
        if YX is None:
            YX = part
        else:
            YX += part
        yy += float(np.vdot(Yc, Yc))
        Ys1 += one1[:, s:s + step] @ Yc
        Ys2 += one2[:, s:s + step] @ Yc
    part = Yc = None
    S1, S2 = one1 @ X64, one2 @ X64                  # per-cluster sums of x
    # cross = (YX + lambda_a (tau^T S1 + nu^T S2)) / w, with one M x N temporary
    cross = YX
    YX = np.vstack([tau, nu]).T @ np.vstack([S1, S2])
    YX *= lambda_a
    cross += YX
    cross /= w
    YX = None
    # <Y, T> = sum_c tau_c . sum_{j1 = c} y + sum_c nu_c . sum_{j2 = c} y
    yt = float(np.vdot(Ys1, tau) + np.vdot(Ys2, nu))
    counts = np.zeros((Cd, Cs))
    np.add.at(counts, (labels, sim), 1.0)
    TT = np.einsum("ij,ij->i", tau, tau)[:, None] + np.einsum("ij,ij->i", nu, nu)[None, :] \
        + 2.0 * (tau @ nu.T)
    tt = float(np.sum(counts * TT))
    target_sq = (yy + 2.0 * lambda_a * yt + lambda_a * lambda_a * tt) / (w * w)
    return TransformStatistics(gram, cross, max(target_sq, 0.0), n, np.dtype(X.dtype))


def _resolve_stats(X, Ybar, stats):
    if stats is not None:
        if X is not None or Ybar is not None:
            raise ValueError("give either X and Ybar or stats=, not both")
        if not isinstance(stats, TransformStatistics):
            raise TypeError(f"stats: expected TransformStatistics, got {type(stats).__name__}")
        return stats
    if X is None or Ybar is None:
        raise ValueError("X and Ybar are required when stats= is not given")
    return transform_statistics(X, Ybar)


def _check_lambdas(lambda2, lambda3, lambda4):
    return (check_scalar(lambda2, "lambda2", low=0.0), check_scalar(lambda3, "lambda3", low=0.0),
            check_scalar(lambda4, "lambda4", low=0.0))


def _check_A(A, M, N, name="A", subspace=False):
    A = as_float_array(A, name, ndim=2)
    if M is not None and A.shape != (M, N):
        raise ValueError(f"{name}: expected shape {(M, N)}, got {A.shape}")
    if A.shape[0] < A.shape[1] and not subspace:
        raise ValueError(f"{name}: expected M >= N (overcomplete), got shape {A.shape}")
    return A


def stage3_regulariser(S, M, lambda2, lambda3, lambda4):
    """lambda2/2 tr S + lambda3/2 (||S||^2 - 2 tr S + M) - lambda4 logdet S, with S = A^T A."""
    tr = float(np.trace(S))
    val = 0.5 * lambda2 * tr + 0.5 * lambda3 * (float(np.vdot(S, S)) - 2.0 * tr + M)
    if lambda4 != 0.0:
        try:
            with _serial_lapack():
                L = np.linalg.cholesky(S)
        except np.linalg.LinAlgError:
            return np.inf
        d = np.diagonal(L)
        if not np.all(d > 0):
            return np.inf
        val -= lambda4 * 2.0 * float(np.sum(np.log(d)))
    return val


def _objective_parts(A, S, stats, lambda2, lambda3, lambda4):
    """f(A) from the statistics, with S = A^T A given: 1/2<G, S> - <B0, A> + 1/2||Ybar||^2 + R."""
    data = 0.5 * float(np.vdot(stats.gram, S)) - float(np.vdot(stats.cross, A)) \
        + 0.5 * stats.target_sq
    return data + stage3_regulariser(S, A.shape[0], lambda2, lambda3, lambda4)


def transform_objective(A, X=None, Ybar=None, lambda2=16.0, lambda3=16.0, lambda4=16.0, *,
                        stats=None):
    """Stage-3 objective ``f(A)``.

    ``f(A) = 1/2 ||X A^T - Ybar||_F^2 + lambda2/2 ||A||_F^2 + lambda3/2 ||A A^T - I||_F^2
    - lambda4 log det(A^T A)``.

    Parameters
    ----------
    A : array-like of shape (M, N)
        Linear map, ``M >= N``.
    X, Ybar : array-like of shape (n, N) and (n, M), optional
        Data (rows are samples) and target; omit when ``stats`` is given.
    lambda2, lambda3, lambda4 : float, default 16.0
        Weights of the Frobenius norm, of the near-orthogonality term and of the log-determinant.
    stats : TransformStatistics, optional
        Precomputed :func:`transform_statistics` to use instead of ``X`` and ``Ybar``.

    Returns
    -------
    f : float
        ``+inf`` when ``lambda4 > 0`` and ``A^T A`` is singular.

    Notes
    -----
    ``||A A^T - I||_F^2`` is evaluated through the N x N Gram ``S = A^T A`` as
    ``||S||_F^2 - 2 tr S + M``, and ``log det S`` through a Cholesky factor. With ``X`` and
    ``Ybar`` the data term is the residual norm itself; with ``stats`` it is the expansion
    ``1/2 <G, S> - <B0, A> + 1/2 ||Ybar||^2``, which loses absolute accuracy ~eps ||Ybar||^2 when
    the residual is tiny.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import transform_objective
    >>> X = np.eye(2)
    >>> A = np.eye(2)
    >>> transform_objective(A, X, X, 1.0, 1.0, 1.0)   # 0 + 1/2 * 2 + 0 - log 1
    1.0
    """
    lambda2, lambda3, lambda4 = _check_lambdas(lambda2, lambda3, lambda4)
    A = _check_A(A, None, None).astype(np.float64, copy=False)
    S = A.T @ A
    if stats is None:
        if X is None or Ybar is None:
            raise ValueError("X and Ybar are required when stats= is not given")
        X = as_float_array(X, "X", ndim=2).astype(np.float64, copy=False)
        Ybar = as_float_array(Ybar, "Ybar", ndim=2).astype(np.float64, copy=False)
        if X.shape[1] != A.shape[1] or Ybar.shape != (X.shape[0], A.shape[0]):
            raise ValueError(f"shapes do not match: A {A.shape}, X {X.shape}, Ybar {Ybar.shape}")
        R = X @ A.T - Ybar
        return 0.5 * float(np.vdot(R, R)) + stage3_regulariser(S, A.shape[0], lambda2,
                                                               lambda3, lambda4)
    stats = _resolve_stats(X, Ybar, stats)
    if stats.cross.shape != A.shape:
        raise ValueError(f"A: expected shape {stats.cross.shape}, got {A.shape}")
    return _objective_parts(A, S, stats, lambda2, lambda3, lambda4)


def transform_gradient(A, X=None, Ybar=None, lambda2=16.0, lambda3=16.0, lambda4=16.0, *,
                       stats=None):
    """Gradient of :func:`transform_objective` with respect to ``A``.

    ``grad = (X A^T - Ybar)^T X + lambda2 A + 2 lambda3 (A A^T - I) A - 2 lambda4 A (A^T A)^{-1}``,
    evaluated as ``A G - B0 + lambda2 A + 2 lambda3 (A S - A) - 2 lambda4 A S^{-1}`` with
    ``G = X^T X``, ``B0 = Ybar^T X``, ``S = A^T A``.

    Parameters
    ----------
    A, X, Ybar, lambda2, lambda3, lambda4, stats
        As in :func:`transform_objective`.

    Returns
    -------
    grad : ndarray of shape (M, N), float64

    Raises
    ------
    numpy.linalg.LinAlgError
        When ``lambda4 > 0`` and ``A^T A`` is singular.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import transform_gradient
    >>> # f(A) = 1/2||A - I||^2 + 1/2||A||^2 + 1/2||A A^T - I||^2 - log det(A^T A), A = a I
    >>> g = transform_gradient(np.eye(2), np.eye(2), np.eye(2), 1.0, 1.0, 1.0)
    >>> g   # 0 + A + 0 - 2 A
    array([[-1.,  0.],
           [ 0., -1.]])
    """
    lambda2, lambda3, lambda4 = _check_lambdas(lambda2, lambda3, lambda4)
    A = _check_A(A, None, None).astype(np.float64, copy=False)
    stats = _resolve_stats(X, Ybar, stats)
    if stats.cross.shape != A.shape:
        raise ValueError(f"A: expected shape {stats.cross.shape}, got {A.shape}")
    S = A.T @ A
    grad = A @ stats.gram - stats.cross + lambda2 * A + 2.0 * lambda3 * (A @ S - A)
    if lambda4 != 0.0:
        # A S^{-1} = (S^{-1} A^T)^T
        grad -= 2.0 * lambda4 * np.linalg.solve(S, A.T).T
    return grad


def transform_singular_values(s, c, lambda2=16.0, lambda3=16.0, lambda4=16.0):
    """Singular values of the exact Stage-3 step: the positive root of the per-direction quartic.

    For each direction ``i``, returns the minimiser over ``s' >= 0`` of
    ``phi(s') = (c_i + lambda2)/2 s'^2 - s_i s' + lambda3/2 (s'^2 - 1)^2 - lambda4 log s'^2``,
    i.e. the unique positive root of
    ``2 lambda3 s'^4 + (c_i + lambda2 - 2 lambda3) s'^2 - s_i s' - 2 lambda4 = 0``.

    Parameters
    ----------
    s : array-like
        Singular values ``s_i >= 0`` of the target ``B``.
    c : float or array-like
        Curvature of the data term (``lambda_max(X^T X)`` or per direction), broadcast with ``s``.
    lambda2, lambda3, lambda4 : float, default 16.0

    Returns
    -------
    s_new : ndarray of float64, broadcast shape of ``s`` and ``c``

    Notes
    -----
    ``p`` has exactly one positive root for ``lambda3, lambda4 > 0`` (Descartes' rule of signs),
    reached by Newton's iteration from an upper bound without crossing it; the proof and the
    cases ``lambda3 = 0`` and ``lambda4 = 0``: ``docs/algorithm.md``, "The singular values of an
    exact step".

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import transform_singular_values
    >>> r = transform_singular_values([0.0, 1.0, 10.0], 1.0, 1.0, 1.0, 1.0)
    >>> p = 2 * r**4 + (1 + 1 - 2) * r**2 - np.array([0.0, 1.0, 10.0]) * r - 2
    >>> bool(np.all(r > 0)), bool(np.allclose(p, 0))
    (True, True)
    """
    lambda2, lambda3, lambda4 = _check_lambdas(lambda2, lambda3, lambda4)
    t = np.asarray(s, dtype=np.float64)
    cc = np.asarray(c, dtype=np.float64)
    if np.any(t < 0) or not np.all(np.isfinite(t)):
        raise ValueError("s: singular values must be finite and >= 0")
    if not np.all(np.isfinite(cc)):
        raise ValueError("c: must be finite")
    t, a = np.broadcast_arrays(t, cc + (lambda2 - 2.0 * lambda3))
    t = t.astype(np.float64, copy=True)
    a = a.astype(np.float64, copy=True)

    if lambda3 == 0.0:
        if np.any(a <= 0):
            raise ValueError("the objective is unbounded below: lambda3 = 0 needs c + lambda2 > 0")
        if lambda4 > 0:
            return (t + np.sqrt(t * t + 8.0 * a * lambda4)) / (2.0 * a)
        return t / a

    a_neg = np.maximum(-a, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        if lambda4 > 0:
            x = np.maximum.reduce([np.sqrt(1.5 * a_neg / lambda3), np.cbrt(1.5 * t / lambda3),
                                   np.full_like(t, (3.0 * lambda4 / lambda3) ** 0.25)])
            quad = np.where(a > 0, (t + np.sqrt(t * t + 8.0 * a * lambda4)) / (2.0 * a), np.inf)
        else:
            x = np.maximum(np.sqrt(a_neg / lambda3), np.cbrt(t / lambda3))
            quad = np.where(a > 0, t / a, np.inf)
    x = np.minimum(x, quad)

    two_l3 = 2.0 * lambda3
    for _ in range(200):
        x2 = x * x
        if lambda4 > 0:
            fx = ((two_l3 * x2 + a) * x - t) * x - 2.0 * lambda4
            dfx = (4.0 * two_l3 * x2 + 2.0 * a) * x - t
        else:
            fx = (two_l3 * x2 + a) * x - t
            dfx = 3.0 * two_l3 * x2 + a
        ok = (fx > 0) & (dfx > 0)
        step = np.where(ok, fx / np.where(ok, dfx, 1.0), 0.0)
        x = np.maximum(x - step, 0.0)
        if not np.any(step > 4.0 * _EPS * x):
            break
    return x


def _orthonormal_completion(W, U_strong, rng):
    """The columns of ``W`` (M x k, most important first) orthonormalised against ``U_strong``
    and among themselves with Gram-Schmidt semantics (signs kept; a lost column replaced at
    random): CholeskyQR2, Householder QR as the fallback."""
    M, k = W.shape
    Z = W.copy()
    for _ in range(4):
        for _ in range(2):  # "twice is enough"
            if U_strong.shape[1]:
                Z -= U_strong @ (U_strong.T @ Z)
        norms = np.linalg.norm(Z, axis=0)
        lost = ~(norms > 1e-6)
        if np.any(lost):
            Z = np.where(lost, rng.standard_normal((M, k)) / np.sqrt(M), Z)
            continue
        Z /= norms
        try:
            for _ in range(2):
                with _serial_lapack():
                    L = np.linalg.cholesky(Z.T @ Z)
                d = np.diagonal(L)
                if not np.all(d > 1e-6 * d.max()):
                    raise np.linalg.LinAlgError("ill-conditioned")
                Z = solve_triangular(L, Z.T, lower=True, check_finite=False).T  # Z L^{-T}
            return Z
        except np.linalg.LinAlgError:
            Q, R = np.linalg.qr(Z)
            d = np.diagonal(R)
            lost = ~(np.abs(d) > 1e-8)
            if not np.any(lost):
                return Q * np.where(d < 0, -1.0, 1.0)
            Z = np.where(lost, rng.standard_normal((M, k)) / np.sqrt(M), Q)
    raise np.linalg.LinAlgError("could not complete an orthonormal basis")


def _refine_weak(B, Vw, floor):
    """``(W = B Vw, Vw)`` rotated to the accurate singular directions of ``B`` in the (accurate)
    span of ``Vw``, column norms decreasing: the eigenproblem re-solved from ``W``, recursively
    on the still-weak part, down to ``floor``."""
    W = B @ Vw
    Vw = Vw.copy()
    start, k = 0, Vw.shape[1]
    while start < k:
        sub = W[:, start:]
        S = sub.T @ sub
        with _serial_lapack():
            w, R = np.linalg.eigh(S)
        R = R[:, ::-1]
        W[:, start:] = sub @ R
        Vw[:, start:] = Vw[:, start:] @ R
        sv = np.sqrt(np.maximum(w[::-1], 0.0))
        if not sv[0] > floor:  # only noise left: completed at random by the caller
            break
        below = np.flatnonzero(sv < _BAND * sv[0])
        if below.size == 0:
            break
        start += int(below[0])
    return W, Vw


def _null_count(s, anchor):
    """Number of trailing (smallest) entries of the descending ``s`` that are the null space of
    ``B`` (``s_i <= _NULL * s_max``; all of them when ``B = 0``); 0 without an anchor."""
    if anchor is None or s.size == 0:
        return 0
    return int(np.count_nonzero(s <= _NULL * s[0]))


#: :func:`_polar_gram` only when the singular values are within this factor of each other
_POLAR_COND = 1e2


def _polar_gram(Z):
    """The polar factor ``Z (Z^T Z)^(-1/2)`` from the k x k Gram (~5x cheaper than the SVD), or
    None unless ``Z`` is finite with singular values within ``_POLAR_COND`` (then accurate to
    ~eps _POLAR_COND^2). ``Z`` is scaled by a power of two first: no over/underflow in ``Z^T Z``.
    """
    if Z.shape[1] == 0 or Z.size == 0:
        return None
    big = float(np.max(np.abs(Z)))
    if not np.isfinite(big):
        return None
    Z = np.ldexp(Z, -np.frexp(big)[1])
    with _serial_lapack():
        w, W = np.linalg.eigh(Z.T @ Z)
    if not (np.all(np.isfinite(w)) and w[0] > w[-1] / _POLAR_COND ** 2):
        return None
    return _matmul(Z, (W / np.sqrt(w)) @ W.T)


def _anchored_null(anchor, V0, C0, project, lambda2, lambda3, lambda4, rng):
    """The exact step on the null space ``V0`` (N x k) of ``B``: ``(P, D, sp0)``, the completion
    ``P D V0^T`` closest to the anchor (derivation: docs/algorithm.md, section "Weak and null
    directions, and the rate of MM"); ``sp0`` the eigenvalues of ``D``, ``C0`` the curvature
    (k x k, or a scalar ``c``). Columns where the projected anchor has no action: seeded random.
    """
    M, k = anchor.shape[0], V0.shape[1]
    if np.ndim(C0) == 0:  # one curvature c for every direction: D = s'_0 I
        sp0 = np.full(k, float(transform_singular_values(0.0, float(C0), lambda2, lambda3,
                                                         lambda4)))
        D = np.diag(sp0)
    else:
        c0, Wc = np.linalg.eigh(0.5 * (C0 + C0.T))
        sp0 = transform_singular_values(np.zeros(k), c0, lambda2, lambda3, lambda4)
        D = (Wc * sp0) @ Wc.T
    Z = project(project(_matmul(anchor, V0 @ D)))
    P = _polar_gram(Z)
    if P is not None:
        return P, D, sp0
    Uz, sz, Wzt = _svd(Z, full_matrices=False)
    good = sz > 1e-8 * sz[0] if sz.size and sz[0] > 0 else np.zeros(k, dtype=bool)
    if not np.all(good):
        bad = ~good
        for _ in range(4):
            Uz[:, bad] = rng.standard_normal((M, int(np.count_nonzero(bad)))) / np.sqrt(M)
            Uz[:, bad] = project(project(Uz[:, bad]))
            Q, Rq = np.linalg.qr(Uz)  # the good columns come first (sz descending): kept
            d = np.diagonal(Rq)
            if np.all(np.abs(d) > 1e-8):
                Uz = Q * np.where(d < 0, -1.0, 1.0)
                break
        else:  # pragma: no cover - random columns lost four times
            raise np.linalg.LinAlgError("could not complete an orthonormal basis")
    return Uz @ Wzt, D, sp0


def _form_q(qf, tau):
    """The M x N ``Q`` of a Householder QR from its reflectors (LAPACK orgqr, in place)."""
    lwork = int(_dorgqr(qf, tau, lwork=-1)[1][0])
    Q, _, info = _dorgqr(qf, tau, lwork=max(lwork, qf.shape[1]), overwrite_a=True)
    if info != 0:
        raise np.linalg.LinAlgError(f"orgqr failed (info={info})")
    return Q


def _qr_factors(B):
    """``(Qb, R, Ur, s, Vt)``: the Householder QR ``B = Qb R`` (M x N, ``Qb`` formed) and the
    SVD ``R = Ur diag(s) Vt`` (``s`` descending: the singular values of ``B``)."""
    N = B.shape[1]
    with _serial_lapack():
        # scipy's geqrf (~30% faster than numpy's); Qb formed on another thread meanwhile
        (qf, tau), _ = scipy_qr(B, mode="raw", check_finite=False)
        R = np.triu(qf[:N])
        future = _background(_form_q, qf, tau)
        Ur, s, Vt = _svd(R)
        Qb = future.result()
    return Qb, R, Ur, s, Vt


def _closed_form_qr(B, lambda2, lambda3, lambda4, curvature, return_sv, factored=False,
                    anchor=None, factors=None):
    """The exact step through ``B = Qb R`` (Householder) and the SVD of ``R``: orthonormal in
    every direction (with ``anchor`` the null space from :func:`_anchored_null`, held in the
    last columns of ``Qb``). ``factored``: ``(Qb, R, K, s')`` with ``A = Qb K``, ``R = Qb^T B``;
    ``factors``: :func:`_qr_factors` of ``B`` when known.
    """
    N = B.shape[1]
    Qb, R, Ur, s, Vt = _qr_factors(B) if factors is None else factors
    k = _null_count(s, anchor)
    if k == 0:
        sp = transform_singular_values(s, curvature(Vt.T), lambda2, lambda3, lambda4)
        K = (Ur * sp) @ Vt
    else:
        r = N - k
        Ur_r, Ur_0, Vt_r, V0 = Ur[:, :r], Ur[:, r:], Vt[:r], Vt[r:].T

        def project(Y):  # Y - U_r U_r^T Y with U_r = Qb Ur_r
            return Y - _matmul(Qb, Ur_r @ (Ur_r.T @ _matmul(Qb.T, Y)))

        P, D, sp0 = _anchored_null(anchor, V0, curvature(V0, full=True), project, lambda2,
                                   lambda3, lambda4, np.random.default_rng(0))
        sp_r = transform_singular_values(s[:r], curvature(Vt_r.T), lambda2, lambda3, lambda4)
        sp = np.concatenate([sp_r, sp0])
        K = (Ur * np.concatenate([sp_r, np.zeros(k)])) @ Vt
        K += Ur_0 @ (D @ Vt[r:])
        # the basis Qb + (P - Qb Ur_0) Ur_0^T (orthonormal, holds A) and R' = Qb'^T B in it
        R = R + Ur_0 @ (_matmul(B.T, P).T - Ur_0.T @ R)
        update = _matmul(Ur_0, (P - _matmul(Qb, Ur_0)).T)  # N x M: transposed, Qb's (F) order
        Qb += update.T
    if factored:
        return Qb, R, K, sp
    A = _matmul(Qb, K)
    return (A, sp) if return_sv else A


def _many_weak(s, N):
    """Whether the descending ``s`` has too many weak values: the closed form takes the QR route."""
    s_max = s[0] if N else 0.0
    if not s_max > 0:
        return False
    return np.count_nonzero(~(s > _BAND * s_max)) > max(_QR_MIN_WEAK, _QR_WEAK_SHARE * N)


def _closed_form(B, c, lambda2, lambda3, lambda4, gram=None, return_sv=False, route="gram",
                 info=None, factored=False, anchor=None):
    """Exact step: argmin_A c/2||A||^2 - <B, A> + R(A), through the N x N eigenproblem of B^T B.

    ``gram``: per-direction curvature ``c_i = v_i^T gram v_i`` instead of ``c`` (the
    approximate closed form). Returns ``A`` (M x N, float64), with ``return_sv`` also ``s'``
    (its singular values, any order: :func:`stage3_regulariser_sv`). ``route``: "qr" directly,
    or the QR route when there are many weak directions, decided after the Gram route's
    ``eigh`` ("gram", also "auto") or from the QR route's singular values ("qr_first");
    ``info["route"]`` gets the route taken. ``anchor``: the
    completion of the null space of ``B`` (:func:`_anchored_null`; unused without one).
    """
    M, N = B.shape
    info = {} if info is None else info

    def curvature(Vx, full=False):
        if gram is None:
            return float(c) if full else np.full(Vx.shape[1], float(c))
        if full:
            return Vx.T @ _matmul(gram, Vx)
        return np.einsum("ij,ij->j", Vx, _matmul(gram, Vx))

    if route in ("qr", "qr_first"):
        factors = _qr_factors(B)
        if route == "qr" or _many_weak(factors[3], N):
            info["route"] = "qr"
            return _closed_form_qr(B, lambda2, lambda3, lambda4, curvature, return_sv,
                                   factored, anchor, factors)
    with _serial_lapack():
        w, V = np.linalg.eigh(B.T @ B)
    w, V = w[::-1], V[:, ::-1]  # descending
    s = np.sqrt(np.maximum(w, 0.0))
    s_max = s[0] if N else 0.0
    strong = s > _BAND * s_max if s_max > 0 else np.zeros(N, dtype=bool)
    weak = ~strong
    info["route"] = "qr" if _many_weak(s, N) else "gram"
    if info["route"] == "qr":  # many weak directions (image data): accurate and cheaper
        return _closed_form_qr(B, lambda2, lambda3, lambda4, curvature, return_sv, factored,
                               anchor)

    A, sv, U_s = None, np.zeros(0), np.zeros((M, 0))
    if np.any(strong):
        Vs, ss = V[:, strong], s[strong]
        sp = transform_singular_values(ss, curvature(Vs), lambda2, lambda3, lambda4)
        sv = sp
        H = (Vs * (sp / ss)) @ Vs.T  # A_strong = B Vs diag(s'/s) Vs^T = U_s diag(s') Vs^T
        A = _matmul(B, H)
        if np.any(weak):
            U_s = (B @ Vs) / ss
    if np.any(weak):
        # U on the weak subspace: refined, orthonormalised against U_s, completed at random or
        # (null space, with an anchor) from the anchor
        zero = _ZERO if anchor is None else _NULL
        W, Vw = _refine_weak(B, V[:, weak], zero * s_max)
        norms = np.linalg.norm(W, axis=0)
        rng = np.random.default_rng(0)
        usable = norms > zero * s_max if s_max > 0 else np.zeros(Vw.shape[1], dtype=bool)
        if anchor is not None and not np.all(usable):
            W, V0, Vw = W[:, usable], Vw[:, ~usable], Vw[:, usable]
            norms = norms[usable]
            usable = usable[usable]
        else:
            V0 = None
        Z = np.where(usable, W / np.where(usable, norms, 1.0),
                     rng.standard_normal(W.shape) / np.sqrt(M))
        Uw = _orthonormal_completion(Z, U_s, rng) if Z.shape[1] else Z
        # linear coefficient of each direction: u_i^T B v_i (>= 0 after the sign fix)
        tw = np.where(usable, np.maximum(np.einsum("ij,ij->j", Uw, W), 0.0), 0.0)
        spw = transform_singular_values(tw, curvature(Vw), lambda2, lambda3, lambda4)
        sv = np.concatenate([sv, spw])
        A_weak = Uw @ (spw[:, None] * Vw.T)
        if V0 is not None:
            U_r = np.hstack([U_s, Uw])

            def project(Y):
                return Y - U_r @ (U_r.T @ Y)

            P, D, sp0 = _anchored_null(anchor, V0, curvature(V0, full=True), project, lambda2,
                                       lambda3, lambda4, rng)
            A_weak += P @ (D @ V0.T)
            sv = np.concatenate([sv, sp0])
        A = A_weak if A is None else A + A_weak
    if factored:
        return None, None, A, sv
    return (A, sv) if return_sv else A


def _lambda_max(G):
    if G.shape[0] == 0:
        return 0.0
    with _serial_lapack():
        lam = float(np.linalg.eigvalsh(G)[-1])
    return max(lam, 0.0) * _C_INFLATE


def stage3_regulariser_sv(sv, M, lambda2, lambda3, lambda4):
    """:func:`stage3_regulariser` from the singular values ``sv`` of ``A`` (the eigenvalues of
    ``S`` are ``sv^2``)."""
    s2 = np.square(sv)
    tr = float(np.sum(s2))
    val = 0.5 * lambda2 * tr + 0.5 * lambda3 * (float(np.sum(np.square(s2))) - 2.0 * tr + M)
    if lambda4 != 0.0:
        if not np.all(s2 > 0):
            return np.inf
        val -= lambda4 * float(np.sum(np.log(s2)))
    return val


def _mm(stats, A_start, lambda2, lambda3, lambda4, n_steps, tol, init, accelerate,
        workspace=None):
    """Closed-form start + MM steps on the statistics: (A float64, history list).

    Each point is paired with ``A G`` (the data term ``1/2 <A G, A> - <B0, A> + 1/2 ||Ybar||^2``
    and the next step need it); a step's regulariser comes from its singular values. After a
    winning QR-route start the steps run on ``K`` with ``A = Qb K`` (N x N, ``R`` in place of
    ``B0``; docs/algorithm.md, "General X"). ``workspace``: see :func:`update_transform`.
    """
    G, B0 = stats.gram, stats.cross
    M = B0.shape[0]
    half_t = 0.5 * stats.target_sq
    ws = {} if workspace is None else workspace

    def regulariser(A, sv):
        if sv is None:
            return stage3_regulariser(A.T @ A, M, lambda2, lambda3, lambda4)
        return stage3_regulariser_sv(sv, M, lambda2, lambda3, lambda4)

    candidates = []
    if init in ("best", "closed_form") or A_start is None:
        # the start's route of last time, at first "qr_first" (image data need the QR route)
        info = {}
        Qb, R, K, sv = _closed_form(B0, None, lambda2, lambda3, lambda4, gram=G,
                                    return_sv=True, route=ws.get("start_route", "qr_first"),
                                    info=info, factored=True, anchor=A_start)
        ws["start_route"] = info["route"]
        Bx = B0 if Qb is None else R  # the target in the space of K
        KG = _matmul(K, G)
        aga = float(np.vdot(KG, K))
        f_cf = 0.5 * aga - float(np.vdot(Bx, K)) + half_t + regulariser(K, sv)
        candidates.append((f_cf, 0, K, KG, aga, sv, Qb, Bx))
    if A_start is not None and init in ("best", "current"):
        AG_st = None  # formed below only if this start wins
        if ws.get("A") is A_start and ws.get("G") is G:
            aga, sv_st = ws["AGA"], ws["sv"]
            reg = regulariser(A_start, sv_st)
        else:
            # <A G, A> = <A^T A, G>: one N x N Gram serves the data term and the regulariser
            S_st = A_start.T @ A_start
            aga = float(np.vdot(S_st, G))
            reg = stage3_regulariser(S_st, M, lambda2, lambda3, lambda4)
            S_st = sv_st = None
        f_st = 0.5 * aga - float(np.vdot(B0, A_start)) + half_t + reg
        candidates.append((f_st, 1, A_start, AG_st, aga, sv_st, None, B0))
    f, _, A, AG, aga, sv, basis, Bx = min(candidates, key=lambda item: item[:2])
    candidates = K = KG = AG_st = Qb = R = None  # the losing start's arrays can go
    for key in ("A", "AGA", "sv"):
        ws.pop(key, None)
    history = [f]

    def finish(A, aga, sv):
        if basis is not None:
            A = _matmul(basis, A)
        ws.update(A=A, AGA=aga, sv=sv, G=G)
        return A, history

    if n_steps == 0:
        return finish(A, aga, sv)
    if AG is None:  # the current A won and its A G was not kept
        AG = _matmul(A, G)

    c = ws["c"] = ws["c"] if ws.get("G") is G and "c" in ws else _lambda_max(G)
    if lambda3 == 0.0 and c + lambda2 <= 0.0:
        raise ValueError("the objective is unbounded below: lambda3 = 0 needs "
                         "lambda_max(X^T X) + lambda2 > 0")

    def step_from(Z, ZG):
        B = c * Z
        B += Bx
        B -= ZG  # B = Bx - Z (G - c I): the surrogate of f at Z
        info = {}
        # at first "gram": an MM step's target has few weak directions
        A_new, sv = _closed_form(B, c, lambda2, lambda3, lambda4, return_sv=True, anchor=Z,
                                 route=ws.get("step_route", "gram"), info=info)
        ws["step_route"] = info["route"]
        B = None
        AG_new = _matmul(A_new, G)
        aga = float(np.vdot(AG_new, A_new))
        f_new = 0.5 * aga - float(np.vdot(Bx, A_new)) + half_t + regulariser(A_new, sv)
        return A_new, AG_new, aga, f_new, sv

    def extrapolate(X1, X0, beta):
        out = X1 - X0
        out *= beta
        out += X1
        return out

    A_prev, AG_prev = A, AG
    t = 1.0
    for _ in range(n_steps):
        A_new = None
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        beta = (t - 1.0) / t_next if accelerate else 0.0
        if beta > 0.0:
            # FISTA-type extrapolation; kept only if it decreases f (else: restart)
            A_try, AG_try, aga_try, f_try, sv_try = step_from(extrapolate(A, A_prev, beta),
                                                              extrapolate(AG, AG_prev, beta))
            if f_try <= f:
                A_new, AG_new, aga_new, f_new, sv_new = A_try, AG_try, aga_try, f_try, sv_try
            else:
                t_next = 1.0
            A_try = AG_try = None
        if A_new is None:
            # plain MM step from A: f(A_new) <= f(A) by the majorisation
            A_new, AG_new, aga_new, f_new, sv_new = step_from(A, AG)
        history.append(f_new)
        if not f_new <= f:  # never accept an increase (rounding at convergence, or NaN)
            break
        decrease = f - f_new
        A_prev, AG_prev = A, AG
        A, AG, aga, f, t, sv = A_new, AG_new, aga_new, f_new, t_next, sv_new
        if decrease <= tol * max(abs(f), np.finfo(np.float64).tiny):
            break
    return finish(A, aga, sv)


@dataclass(frozen=True, eq=False)
class RowSpan:
    """An orthonormal basis of the span of the rows of ``X`` and the data in it, for Stage 3 in
    the span (``n < N``; ``update_transform(..., span=...)``, :func:`row_span`).

    Attributes
    ----------
    basis : ndarray of shape (N, r), float64
        Orthonormal columns spanning the rows of ``X`` (up to rows of rounding size).
    gram : ndarray of shape (r, r), float64
        ``(X basis)^T (X basis)``: ``X^T X`` in the span.
    n_samples : int
    """

    basis: np.ndarray
    gram: np.ndarray
    n_samples: int
    zero_outside: bool = False   # the map of the model is zero outside it, whatever M
    lambda_max: float = None     # the largest eigenvalue of gram, when known (row_span)

    @property
    def n_features(self):
        """N, the input dimension."""
        return self.basis.shape[0]

    @property
    def rank(self):
        """r, the dimension of the span."""
        return self.basis.shape[1]

    def project(self, X):
        """The coordinates ``X @ basis`` (float64) of rows ``X`` (n, N) in the span."""
        X = as_float_array(X, "X", ndim=2).astype(np.float64, copy=False)
        if X.shape[1] != self.n_features:
            raise ValueError(f"X: expected {self.n_features} features, got {X.shape[1]}")
        return _matmul(X, self.basis)

    def full_gram(self):
        """``X^T X`` (N x N) from the span, ``basis gram basis^T`` (computed once)."""
        G = self.__dict__.get("_full_gram")
        if G is None:
            G = _matmul(_matmul(self.basis, self.gram), self.basis.T)
            G = 0.5 * (G + G.T)
            object.__setattr__(self, "_full_gram", G)
        return G


def row_span(X, max_rank=None, ordered=True):
    """The span of the rows of ``X`` (n, N) (:class:`RowSpan`), from the thin SVD
    ``X = U S W^T``: the right singular vectors above numpy's rank tolerance
    ``max(n, N) eps s_max``, the first ``max_rank`` of them (the principal subspace of that
    size). ``ordered=False`` (any basis of the span will do): when the rank is at most
    ``max_rank``, rows picked by a pivoted Cholesky of ``X X^T``, orthonormalised (CholeskyQR2),
    if they span every row to the SVD's tolerance and ``s_r > 1e-5 s_max`` (the SVD's rank and
    span, to rounding; about half the time of the SVD). Cost ``O(n^2 N)`` time, ``O(n N)``
    memory.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import row_span
    >>> X = np.random.default_rng(0).standard_normal((3, 8))
    >>> sp = row_span(X)
    >>> sp.basis.shape, bool(np.allclose(sp.project(X) @ sp.basis.T, X))
    ((8, 3), True)
    """
    X = as_float_array(X, "X", ndim=2).astype(np.float64, copy=False)
    n, N = X.shape
    basis = np.zeros((N, 0))
    if n and N and np.any(X):
        # X / 2^e (exact): no overflow of the squares
        scale = np.ldexp(1.0, -int(np.frexp(float(np.max(np.abs(X))))[1]))
        Xs = X * scale
        with _serial_lapack():
            span = None if ordered or min(n, N) > (max_rank or n) else _pivoted_span(Xs, scale)
            if span is not None:
                return span
            _, s, Wt = _svd(Xs, full_matrices=False)
        keep = np.flatnonzero(s > max(n, N) * _EPS * s[0])[:max_rank]
        basis = np.ascontiguousarray(Wt[keep].T)
    Xp = _matmul(X, basis)
    gram = Xp.T @ Xp
    return RowSpan(basis, 0.5 * (gram + gram.T), n)


def _pivoted_span(Xs, scale):
    """:func:`row_span` from rows of ``Xs = scale X`` picked by a pivoted Cholesky of
    ``Xs Xs^T``, None where it may differ from the SVD's (one BLAS thread: less processor time
    than two, whatever the size)."""
    n, N = Xs.shape
    G = Xs @ Xs.T
    C, piv, r, _ = _dpstrf(G, lower=1, tol=1e-10 * float(np.max(np.diagonal(G))))
    kept, rest = piv[:r] - 1, piv[r:] - 1
    Q, T = Xs[kept], np.tril(C[:r, :r])
    try:
        for L in (T, None):  # twice: orthonormal to rounding; T: the kept rows in the basis
            L = np.linalg.cholesky(Q @ Q.T) if L is None else L
            Q = solve_triangular(L, Q, lower=True, check_finite=False)
            T = T if L is T else T @ L
    except np.linalg.LinAlgError:
        return None
    basis, Xp = np.ascontiguousarray(Q.T), np.empty((n, r))
    Xp[kept], Xp[rest] = T, Xs[rest] @ basis
    out = np.linalg.norm(Xs[rest] - Xp[rest] @ basis.T)  # the rows outside the span
    gram = Xp.T @ Xp
    lam = np.linalg.eigvalsh(gram)  # the squared singular values of Xs, to rounding
    if not (lam[0] > 1e-10 * lam[-1] and out <= max(n, N) * _EPS * np.sqrt(lam[-1])):
        return None
    gram /= scale * scale
    return RowSpan(basis, 0.5 * (gram + gram.T), n, lambda_max=float(lam[-1]) / (scale * scale))


def principal_span(G, n_samples, max_rank):
    """The principal subspace of at most ``max_rank`` dimensions of rows whose ``X^T X`` is
    ``G`` (:class:`RowSpan`): the eigenvectors of the largest eigenvalues, above the rank
    tolerance ``N eps lambda_max``. Cost ``O(N^3)`` time, ``O(N^2)`` memory.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import principal_span
    >>> X = np.random.default_rng(0).standard_normal((50, 6))
    >>> principal_span(X.T @ X, 50, 4).basis.shape
    (6, 4)
    """
    G = np.asarray(G, dtype=np.float64)
    with _serial_lapack():
        w, V = np.linalg.eigh(0.5 * (G + G.T))
    w, V = w[::-1], V[:, ::-1]
    keep = np.flatnonzero(w > G.shape[0] * _EPS * max(w[0] if w.size else 0.0, 0.0))[:max_rank]
    basis = np.ascontiguousarray(V[:, keep])
    gram = _matmul(basis.T, _matmul(G, basis))
    return RowSpan(basis, 0.5 * (gram + gram.T), n_samples)


def complement_span(G, n_samples, max_rank, exclude):
    """:func:`principal_span` of the rows (``X^T X`` ``G``, or their :class:`RowSpan`) with
    their components along the orthonormal columns of ``exclude`` (N, r) removed: orthogonal
    to ``exclude``, ``zero_outside`` (the model's map is zero outside it, whatever M).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import complement_span
    >>> X = np.random.default_rng(0).standard_normal((50, 6))
    >>> sp = complement_span(X.T @ X, 50, 6, np.eye(6)[:, :1])
    >>> sp.basis.shape, bool(np.allclose(sp.basis[0], 0.0))
    ((6, 5), True)
    """
    U = np.asarray(exclude, dtype=np.float64)
    if isinstance(G, RowSpan):  # rows C B^T: without U, C Z^T with Z = (I - U U^T) B = L S R^T
        L, s, Rt = _svd(G.basis - _matmul(U, _matmul(U.T, G.basis)), full_matrices=False)
        T = Rt.T * s
        inner = principal_span(_matmul(T.T, _matmul(G.gram, T)), n_samples, max_rank)
        basis = _matmul(L, inner.basis)
    else:  # (I - U U^T) G (I - U U^T)
        G = np.asarray(G, dtype=np.float64)
        GU = _matmul(G, U)
        G = G - _matmul(U, GU.T) - _matmul(GU, U.T) + _matmul(U, _matmul(_matmul(U.T, GU), U.T))
        inner = principal_span(G, n_samples, max_rank)
        basis = inner.basis
    return RowSpan(np.ascontiguousarray(basis), inner.gram, n_samples, zero_outside=True)


def project_statistics(stats, span):
    """:class:`TransformStatistics` in full coordinates (``X^T X`` N x N) taken to the
    coordinates of ``span`` (the rows ``X @ span.basis``)."""
    P = span.basis
    gram = _matmul(P.T, _matmul(stats.gram, P))
    return TransformStatistics(0.5 * (gram + gram.T), _matmul(stats.cross, P), stats.target_sq,
                               stats.n_samples, stats.dtype)


def span_statistics(X, Ybar, span):
    """:class:`TransformStatistics` of the projected rows ``X @ span.basis`` and ``Ybar``, with
    ``span.gram`` as their ``X^T X`` (the statistics of ``update_transform(..., span=span)``).

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import row_span, span_statistics
    >>> rng = np.random.default_rng(0)
    >>> X, Ybar = rng.standard_normal((3, 8)), rng.standard_normal((3, 10))
    >>> span_statistics(X, Ybar, row_span(X)).cross.shape
    (10, 3)
    """
    X = as_float_array(X, "X", ndim=2)
    Ybar = as_float_array(Ybar, "Ybar", ndim=2).astype(np.float64, copy=False)
    if Ybar.shape[0] != X.shape[0]:
        raise ValueError(f"X and Ybar must have the same number of rows, got {X.shape[0]} and "
                         f"{Ybar.shape[0]}")
    cross = _matmul(Ybar.T, span.project(X))
    return TransformStatistics(span.gram, cross, float(np.vdot(Ybar, Ybar)), X.shape[0],
                               np.dtype(X.dtype))


def orthogonal_singular_value(lambda2=16.0, lambda3=16.0, lambda4=16.0):
    """The singular value that minimises the regulariser alone: ``s0 = argmin_s
    lambda2/2 s^2 + lambda3/2 (s^2 - 1)^2 - lambda4 log s^2`` (the quartic's root for
    ``s_i = 0``, ``c = 0``).

    The minimiser of Stage 3 acts as ``s0`` times an isometry outside the training rows' span.

    Examples
    --------
    >>> from ntnumba.model.transform import orthogonal_singular_value
    >>> s0 = orthogonal_singular_value(1.0, 1.0, 1.0)   # root of 2 s^4 - 1 s^2 - 2
    >>> round(2 * s0 ** 4 - s0 ** 2 - 2, 12)
    0.0
    """
    return float(transform_singular_values(0.0, 0.0, lambda2, lambda3, lambda4))


def _rows_apply(fn, M, N):
    """``fn(start, stop)`` over row blocks of an M x N result (about 16 MiB each), on numba's
    threads inside ``blas_limit(1)`` (one BLAS thread per block), else in this thread."""
    rows = max(64, (1 << 21) // max(N, 1))
    bounds = list(range(0, M, rows)) + [M]
    if len(bounds) < 2:
        return
    run_blocks(fn, bounds, get_num_threads() if _serial() else 1)


#: probes of the test whether the current map is an isometry outside the span
_PROBES = 4
#: tolerance of that test, relative to s0^2
_ISOMETRY_TOL = 1e-10


def _isometric_outside(A, P, s0):
    """Whether ``A`` acts outside ``span(P)`` as ``s0`` times an isometry (what a span step
    returns): ``A (I - P P^T)`` applied to a few seeded Gaussian vectors of the complement."""
    N, r = P.shape
    if A is None or not s0 > 0 or N == r:
        return False
    Z = np.random.default_rng(0).standard_normal((N, min(_PROBES, N - r)))
    Z -= P @ (P.T @ Z)
    Z -= P @ (P.T @ Z)
    Y = A @ Z
    ref = (s0 * s0) * (Z.T @ Z)
    err = np.max(np.abs(Y.T @ Y - ref)) if np.all(np.isfinite(Y)) else np.inf
    return bool(err <= _ISOMETRY_TOL * np.max(np.abs(ref)))


def _span_polar(ZV, project):
    """The polar factor of ``ZV`` (M x k); columns it has lost (norm <= 1e-8: the anchor had
    no action there) completed by seeded random orthonormal vectors, ``project`` removing the
    directions they must avoid."""
    P = _polar_gram(ZV)
    if P is not None:
        return P
    M, k = ZV.shape
    Uz, sz, Wzt = _svd(ZV, full_matrices=False)
    lost = ~(sz > 1e-8)
    if np.any(lost):
        rng = np.random.default_rng(0)
        for _ in range(4):
            Rn = rng.standard_normal((M, int(np.count_nonzero(lost)))) / np.sqrt(M)
            for _ in range(2):
                Rn = project(Rn)
                Rn -= Uz[:, ~lost] @ (Uz[:, ~lost].T @ Rn)
            Q, Rq = np.linalg.qr(Rn)
            d = np.abs(np.diagonal(Rq))
            if np.all(d > 1e-8):
                Uz[:, lost] = Q
                break
        else:  # pragma: no cover - random columns lost four times
            raise np.linalg.LinAlgError("could not complete an orthonormal basis")
    return Uz @ Wzt


def span_map(A1, P, s0, anchor=None, anchor_span=None):
    """The map ``A = A1 P^T + s0 Omega`` (M x N) of a Stage-3 step in the span ``P`` (N x r).

    ``Omega``: the polar factor of ``(I - U U^T) W`` for the anchor ``W`` (derivation:
    docs/algorithm.md, section "Fewer samples than features"), in ``O(M N r)``; the result is
    formed once as ``base + L R`` (``L`` of at most ``2 r`` columns).

    Parameters
    ----------
    A1 : ndarray of shape (M, r)
    P : ndarray of shape (N, r), orthonormal columns
    s0 : float
        :func:`orthogonal_singular_value` of the priors.
    anchor : ndarray of shape (M, N), optional
        The current map; used when it is ``s0`` times an isometry outside the span.
    anchor_span : ndarray of shape (M, r), optional
        ``anchor @ P`` when known.

    Returns
    -------
    A : ndarray of shape (M, N), float64
    """
    M, r = A1.shape
    N = P.shape[0]
    if M < N:
        raise ValueError(f"expected M >= N (overcomplete), got M = {M} and N = {N}")
    current = anchor is not None and _isometric_outside(anchor, P, s0)
    # U: an orthonormal basis of the range of A1
    if r:
        Ua, sa, _ = _svd(A1, full_matrices=False)
        U = Ua[:, sa > max(M, r) * _EPS * sa[0]] if sa.size and sa[0] > 0 else Ua[:, :0]
    else:
        U = np.zeros((M, 0))
    if current:
        AP = _matmul(anchor, P) if anchor_span is None else anchor_span
        UA = _matmul(U.T, anchor)                      # q x N
        C = (UA - (UA @ P) @ P.T) / s0                 # U^T W
    else:
        UN = U[:N]
        C = UN.T - (UN.T @ P) @ P.T                    # U^T [I; 0] (I - P P^T)
    if C.size:
        Uc, sc, Vct = _svd(C, full_matrices=False)
    else:
        Uc, sc, Vct = np.zeros((U.shape[1], 0)), np.zeros(0), np.zeros((0, N))
    keep = sc > 1e-8  # below, (1 - s^2)^(-1/2) - 1 < 1e-16: no correction
    Vj = Vct[keep].T
    # Z V for Z = (I - U U^T) W: W V - U (U^T W V), U^T W V = Uc diag(sc)
    if current:
        WV = (_matmul(anchor, Vj) - AP @ (P.T @ Vj)) / s0
    else:
        WV = np.zeros((M, Vj.shape[1]))
        WV[:N] = Vj - P @ (P.T @ Vj)
    ZV = WV - U @ (Uc[:, keep] * sc[keep])

    def project(Y):  # off U and off the range of W outside Vj
        Y = Y - U @ (U.T @ Y)
        if current:
            Wt = (_matmul(anchor.T, Y) - P @ (AP.T @ Y)) / s0
        else:
            Wt = Y[:N] - P @ (P.T @ Y[:N])
        Wt -= Vj @ (Vj.T @ Wt)
        if current:
            Y -= (_matmul(anchor, Wt) - AP @ (P.T @ Wt)) / s0
        else:
            Y[:N] -= Wt - P @ (P.T @ Wt)
        return Y

    D = np.zeros((M, sc.size))
    if Vj.shape[1]:
        D[:, keep] = _span_polar(ZV, project) - ZV
    # A = A1 P^T + s0 (W - U C + D Vj^T): a base (the anchor, or s0 [I; 0]) plus L R
    first = A1 - AP if current else A1.copy()
    if not current:
        first[:N] -= s0 * P
    L = np.hstack([first, s0 * (D - U @ (Uc * sc))])
    R = np.vstack([P.T, Vct])
    out = np.empty((M, N))

    def block(s, e):
        if L.shape[1]:
            np.matmul(L[s:e], R, out=out[s:e])
        else:
            out[s:e] = 0.0
        if current:
            out[s:e] += anchor[s:e]
        elif s < N:
            d = np.arange(s, min(e, N))
            out[d, d] += s0
    _rows_apply(block, M, N)
    return out


def _span_update(stats, span, A64, lambda2, lambda3, lambda4, n_steps, tol, init,
                 accelerate, workspace):
    """Stage 3 in the span: :func:`_mm` on the reduced ``stats`` from ``A P``, then
    :func:`span_map`: (A, history). The reduced problem starts afresh from ``A P`` every call
    (no reduced map or start route carried): the result depends on ``A`` alone, so a warm start
    continues with the same bits as an uninterrupted fit."""
    P, M = span.basis, stats.cross.shape[0]
    N, r = P.shape
    s0 = orthogonal_singular_value(lambda2, lambda3, lambda4)
    ws, sub = ({} if workspace is None else workspace), {}
    if span.lambda_max is not None and stats.gram is span.gram:  # c of the MM steps, known
        sub.update(G=stats.gram, c=max(span.lambda_max, 0.0) * _C_INFLATE)
    A1_start = None if A64 is None else _matmul(A64, P)
    if r:
        A1, history = _mm(stats, A1_start, lambda2, lambda3, lambda4, n_steps, tol, init,
                          accelerate, sub)
        sv_r = sub["sv"] if sub.get("sv") is not None else _svd(A1, compute_uv=False)
        aga = sub.get("AGA")
    else:  # no data: only the regulariser
        A1 = np.zeros((M, 0))
        history = [0.5 * stats.target_sq + 0.5 * lambda3 * M]
        sv_r, aga = np.zeros(0), 0.0
    if M < N or span.zero_outside:  # the model of the subspace: zero outside it
        A = _matmul(A1, P.T)
        ws.update(A=A, sv=sv_r, AGA=aga, G=span.gram)
        return A, history
    # outside the span every singular value is s0: f gains (N - r)(psi(s0) - lambda3/2)
    const = stage3_regulariser_sv(np.full(N - r, s0), 0, lambda2, lambda3, lambda4)
    history = [h + const for h in history]
    A = span_map(A1, P, s0, anchor=A64, anchor_span=A1_start)
    ws.update(A=A, sv=np.concatenate([sv_r, np.full(N - r, s0)]), AGA=aga, G=span.gram)
    return A, history


def update_transform(X=None, Ybar=None, A=None, *, lambda2=16.0, lambda3=16.0, lambda4=16.0,
                     n_steps=30, tol=1e-9, init="best", accelerate=True, stats=None,
                     online_rate=None, sample_fraction=None, random_state=None,
                     return_history=False, workspace=None, span=None):
    """Stage-3 update of the linear map: approximately minimise :func:`transform_objective`.

    Starts from the approximate closed form (or from ``A`` when that is better, see ``init``) and
    refines it by majorise-minimise steps, each an exact closed-form step on a surrogate, until
    ``n_steps`` steps or a relative objective decrease below ``tol``.

    Parameters
    ----------
    X, Ybar : array-like of shape (n, N) and (n, M), optional
        Data (rows) and target ``(Y + lambda_a T) / (1 + lambda_a)``; omit with ``stats``.
    A : array-like of shape (M, N), optional
        Current map: a candidate starting point and the anchor of the online variant.
    lambda2, lambda3, lambda4 : float, default 16.0
        Regulariser weights (paper defaults).
    n_steps : int, default 30
        Maximum number of MM steps (0: closed form / best start only).
    tol : float, default 1e-9
        Stop when ``(f_k - f_{k+1}) <= tol * |f_{k+1}|``.
    init : {"best", "closed_form", "current"}, default "best"
        Starting point of the MM steps: the approximate closed form, the given ``A``, or the one
        of the two with the lower objective (then the result is never worse than ``A``).
    accelerate : bool, default True
        Extrapolate between MM steps (FISTA-type); an extrapolated step is kept only if it
        decreases ``f`` (else the plain step), so the iteration stays monotone. Much faster when
        ``X^T X`` is ill-conditioned (images). ``False``: the plain MM iteration.
    stats : TransformStatistics, optional
        Precomputed :func:`transform_statistics` to use instead of ``X`` and ``Ybar``.
    online_rate : float in [0, 1], optional
        Paper's online variant: return ``(1 - rho) A + rho A_hat`` with ``rho = online_rate`` and
        ``A_hat`` the batch update. Needs ``A``.
    sample_fraction : float in (0, 1], optional
        Compute ``A_hat`` on a random subset of ``round(sample_fraction * n)`` rows (paper:
        85-90%). Needs ``X`` and ``Ybar`` (not ``stats``).
    random_state : int, RandomState instance or None
        Seed of the row subset.
    return_history : bool, default False
        Also return the objective values: ``history[0]`` at the start, ``history[k]`` after
        step ``k`` (a last step that would increase ``f`` is recorded and rejected).
    workspace : dict, optional
        The driver's cache between calls (batch, float64; ``lambda_max``, ``<A G, A>``, the
        singular values of the returned ``A``): same results up to rounding.
    span : RowSpan, optional
        Work in the span of the rows (``row_span(X)`` of ``ntnumba.model.transform``; fewer rows
        than features; ``principal_span``): ``stats`` of the projected rows
        (``span_statistics``, ``(M, r)``); ``A`` and the result are ``M x N``, ``s0`` times an
        isometry outside the span (the minimiser there). With ``M < N`` or
        ``span.zero_outside`` (``complement_span``) the problem is posed in the span alone
        (``M >= r``): the result is ``A1 P^T``, zero outside it (the online update too). Batch
        update only otherwise. See Notes.

    Returns
    -------
    A_new : ndarray of shape (M, N)
        In the dtype of ``X`` (float32 or float64).
    history : ndarray of float64
        Only with ``return_history=True``; for the online variant, the history of ``A_hat``.

    Notes
    -----
    Each MM step minimises the majoriser ``c/2||A||^2 - <B_k, A>`` (``B_k = Ybar^T X -
    A_k (G - c I)``, ``c >= lambda_max(X^T X)``) exactly, so ``f`` never increases; with
    ``init="best"`` and ``A`` given, ``f(A_new) <= f(A)``. Derivations: ``docs/algorithm.md``,
    "Stage 3". The online variant is the paper's, not monotone.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.model.transform import update_transform, transform_objective
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((40, 4))
    >>> Ybar = rng.standard_normal((40, 6))
    >>> A0 = rng.standard_normal((6, 4))
    >>> A1, hist = update_transform(X, Ybar, A0, lambda2=1.0, lambda3=1.0, lambda4=1.0,
    ...                             return_history=True)
    >>> A1.shape, bool(hist[-1] < hist[0])
    ((6, 4), True)
    >>> bool(transform_objective(A1, X, Ybar, 1.0, 1.0, 1.0)
    ...      < transform_objective(A0, X, Ybar, 1.0, 1.0, 1.0))
    True
    """
    lambda2, lambda3, lambda4 = _check_lambdas(lambda2, lambda3, lambda4)
    n_steps = check_scalar(n_steps, "n_steps", low=0, integer=True)
    tol = check_scalar(tol, "tol", low=0.0)
    init = check_choice(init, "init", {"best", "closed_form", "current"})
    if sample_fraction is not None:
        sample_fraction = check_scalar(sample_fraction, "sample_fraction", low=0.0,
                                       low_inclusive=False, high=1.0)
        if stats is not None:
            raise ValueError("sample_fraction needs X and Ybar, not stats=")
    if online_rate is not None:
        online_rate = check_scalar(online_rate, "online_rate", low=0.0, high=1.0)
        if A is None:
            raise ValueError("online_rate needs the current A")

    if span is not None:
        return _update_in_span(X, Ybar, A, span, stats, lambda2, lambda3, lambda4, n_steps, tol,
                               init, accelerate, online_rate, sample_fraction, return_history,
                               workspace)
    if sample_fraction is not None:
        X = as_float_array(X, "X", ndim=2)
        Ybar = as_float_array(Ybar, "Ybar", ndim=2)
        n = X.shape[0]
        if Ybar.shape[0] != n:
            raise ValueError(f"X and Ybar must have the same number of rows, got {n} and "
                             f"{Ybar.shape[0]}")
        m = min(n, max(1, int(round(sample_fraction * n))))
        rng = check_random_state(random_state)
        rows = np.sort(rng.choice(n, size=m, replace=False))
        stats = transform_statistics(X[rows], Ybar[rows])
    else:
        stats = _resolve_stats(X, Ybar, stats)
    M, N = stats.cross.shape
    if M < N:
        raise ValueError(f"expected M >= N (overcomplete), got M = {M} rows of Ybar^T X and "
                         f"N = {N}")
    if init == "current" and A is None:
        raise ValueError("init='current' needs A")
    A64 = None if A is None else _check_A(A, M, N).astype(np.float64, copy=False)

    if workspace is not None and (online_rate is not None or sample_fraction is not None
                                  or stats.dtype != np.float64):
        workspace = None  # the returned A is not the A the workspace would describe
    A_hat, history = _mm(stats, A64, lambda2, lambda3, lambda4, n_steps, tol, init,
                         bool(accelerate), workspace)
    if online_rate is not None:
        A_hat = (1.0 - online_rate) * A64 + online_rate * A_hat
    A_out = A_hat.astype(stats.dtype, copy=False)
    if return_history:
        return A_out, np.asarray(history, dtype=np.float64)
    return A_out


def _update_in_span(X, Ybar, A, span, stats, lambda2, lambda3, lambda4, n_steps, tol, init,
                    accelerate, online_rate, sample_fraction, return_history, workspace):
    """:func:`update_transform` with ``span`` (checked arguments)."""
    if not isinstance(span, RowSpan):
        raise TypeError(f"span: expected a RowSpan (row_span(X)), got {type(span).__name__}")
    if stats is None:
        if X is None or Ybar is None:
            raise ValueError("X and Ybar are required when stats= is not given")
        stats = span_statistics(X, Ybar, span)
    else:
        stats = _resolve_stats(X, Ybar, stats)
    N, r = span.basis.shape
    M = stats.cross.shape[0]
    if sample_fraction is not None or (online_rate is not None and M >= N
                                       and not span.zero_outside):
        raise ValueError("span= is for the batch update: not with sample_fraction, nor with "
                         "online_rate unless M < N or span.zero_outside")
    if stats.cross.shape[1] != r or stats.gram.shape != (r, r):
        raise ValueError(f"stats: expected the statistics of the rows in the span (Ybar^T X "
                         f"of shape ({M}, {r})), got {stats.cross.shape}")
    if M < r:
        raise ValueError(f"expected M >= r (overcomplete in the span), got M = {M} rows of "
                         f"Ybar^T X and r = {r}")
    if init == "current" and A is None:
        raise ValueError("init='current' needs A")
    A64 = None if A is None else _check_A(A, M, N, subspace=True).astype(np.float64, copy=False)
    if online_rate is not None:  # the online update of the map of the subspace
        A1 = update_transform(A=_matmul(A64, span.basis), stats=stats, lambda2=lambda2,
                              lambda3=lambda3, lambda4=lambda4, n_steps=n_steps, tol=tol,
                              init=init, accelerate=accelerate, online_rate=online_rate,
                              return_history=return_history)
        A1, history = A1 if return_history else (A1, None)
        A_hat = _matmul(np.asarray(A1, dtype=np.float64), span.basis.T)
    else:
        if workspace is not None and stats.dtype != np.float64:
            workspace = None
        A_hat, history = _span_update(stats, span, A64, lambda2, lambda3, lambda4, n_steps,
                                      tol, init, accelerate, workspace)
    A_out = A_hat.astype(stats.dtype, copy=False)
    if return_history:
        return A_out, np.asarray(history, dtype=np.float64)
    return A_out


def identity_transform(N, dtype=np.float64):
    """The identity map ``A = I_N`` (M = N): the algorithm without a learned transform.

    Parameters
    ----------
    N : int
        Input dimension.
    dtype : dtype, default float64

    Returns
    -------
    A : ndarray of shape (N, N)

    Examples
    --------
    >>> from ntnumba.model.transform import identity_transform
    >>> identity_transform(2)
    array([[1., 0.],
           [0., 1.]])
    """
    N = check_scalar(N, "N", low=1, integer=True)
    return np.eye(N, dtype=dtype)
