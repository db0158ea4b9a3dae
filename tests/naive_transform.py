"""Slow, obvious references for Stage 3 (the linear map A), in the row convention.

X (n, N), Ybar (n, M), A (M, N). Nothing here imports the code under test.
"""
from fractions import Fraction

import numpy as np
from scipy.optimize import minimize


def objective(A, X, Ybar, lam2, lam3, lam4):
    """f(A) with every term written out (M x M identity, slogdet)."""
    M = A.shape[0]
    R = X @ A.T - Ybar
    E = A @ A.T - np.eye(M)
    val = 0.5 * np.sum(R ** 2) + 0.5 * lam2 * np.sum(A ** 2) + 0.5 * lam3 * np.sum(E ** 2)
    if lam4 != 0:
        sign, logdet = np.linalg.slogdet(A.T @ A)
        if sign <= 0:
            return np.inf
        val -= lam4 * logdet
    return float(val)


def gradient(A, X, Ybar, lam2, lam3, lam4):
    """(X A^T - Ybar)^T X + lam2 A + 2 lam3 (A A^T - I) A - 2 lam4 A (A^T A)^{-1}."""
    M = A.shape[0]
    g = (X @ A.T - Ybar).T @ X + lam2 * A + 2 * lam3 * (A @ A.T - np.eye(M)) @ A
    if lam4 != 0:
        g = g - 2 * lam4 * A @ np.linalg.inv(A.T @ A)
    return g


def phi(x, t, c, lam2, lam3, lam4):
    """Per-direction objective (c + lam2)/2 x^2 - t x + lam3/2 (x^2 - 1)^2 - lam4 log x^2."""
    with np.errstate(divide="ignore"):
        return (0.5 * (c + lam2) * x ** 2 - t * x + 0.5 * lam3 * (x ** 2 - 1) ** 2
                - (lam4 * np.log(x ** 2) if lam4 else 0.0))


def _polish(x, coeffs, steps=8):
    """Newton steps on the polynomial ``coeffs`` (exact Fractions), each iterate rounded to a
    float: the root of the polynomial of the exact inputs, to float precision."""
    x = Fraction(float(x))
    for _ in range(steps):
        p = dp = Fraction(0)
        for co in coeffs:
            dp = dp * x + p
            p = p * x + co
        if dp == 0:
            break
        x = Fraction(float(x - p / dp))
    return float(x)


def quartic_root(t, c, lam2, lam3, lam4):
    """Minimiser over x >= 0 of phi, from numpy.roots of x * phi'(x) (and x = 0 if lam4 = 0).

    The roots are polished by Newton steps on the polynomial of the exact inputs: its
    coefficient ``c + lambda2 - 2 lambda3`` can cancel (equal parameters one ulp apart), and
    neither its float value nor numpy.roots near the double root at 0 is then accurate.
    """
    a = Fraction(c) + Fraction(lam2) - 2 * Fraction(lam3)
    exact = [2 * Fraction(lam3), Fraction(0), a, -Fraction(t), -2 * Fraction(lam4)]
    roots = np.roots([float(co) for co in exact])
    real = roots[np.abs(roots.imag) <= 1e-7 * max(1.0, np.max(np.abs(roots)))].real
    cands = [_polish(r, exact) for r in real if r > 0]
    if lam4 == 0:
        cands.append(0.0)
    cands = np.array(cands)
    return float(cands[np.argmin(phi(cands, t, c, lam2, lam3, lam4))])


def closed_form_svd(B, c, lam2, lam3, lam4, gram=None):
    """Exact step through a thin SVD of the M x N matrix B; per-direction c_i from ``gram``."""
    U, s, Vt = np.linalg.svd(B, full_matrices=False)
    if gram is not None:
        cs = [float(v @ gram @ v) for v in Vt]
    else:
        cs = [c] * len(s)
    sp = np.array([quartic_root(si, ci, lam2, lam3, lam4) for si, ci in zip(s, cs)])
    return (U * sp) @ Vt


def surrogate(A, B, c, lam2, lam3, lam4):
    """c/2 ||A||^2 - <B, A> + the regularisers (what the exact step minimises)."""
    M = A.shape[0]
    E = A @ A.T - np.eye(M)
    val = 0.5 * (c + lam2) * np.sum(A ** 2) - np.sum(B * A) + 0.5 * lam3 * np.sum(E ** 2)
    if lam4:
        sign, logdet = np.linalg.slogdet(A.T @ A)
        if sign <= 0:
            return np.inf
        val -= lam4 * logdet
    return float(val)


def mm_svd(X, Ybar, A0, lam2, lam3, lam4, n_steps):
    """Plain MM loop with SVDs: B_k = Ybar^T X - A_k (X^T X - c I). Returns all iterates."""
    G = X.T @ X
    c = np.linalg.eigvalsh(G)[-1]
    A = A0
    iterates = [A]
    for _ in range(n_steps):
        B = Ybar.T @ X - A @ (G - c * np.eye(G.shape[0]))
        A = closed_form_svd(B, c, lam2, lam3, lam4)
        iterates.append(A)
    return iterates


def brute_force(X, Ybar, M, lam2, lam3, lam4, n_starts=6, seed=0, starts=()):
    """Multistart L-BFGS-B on the flattened A. Returns (best f, best A)."""
    N = X.shape[1]
    rng = np.random.default_rng(seed)

    def fun(a):
        A = a.reshape(M, N)
        f = objective(A, X, Ybar, lam2, lam3, lam4)
        if not np.isfinite(f):
            return 1e300, np.zeros_like(a)
        return f, gradient(A, X, Ybar, lam2, lam3, lam4).ravel()

    inits = list(starts) + [rng.standard_normal((M, N)) for _ in range(n_starts)]
    best = (np.inf, None)
    for A0 in inits:
        res = minimize(fun, A0.ravel(), jac=True, method="L-BFGS-B",
                       options=dict(maxiter=20000, maxfun=40000, ftol=1e-15, gtol=1e-11,
                                    maxcor=30))
        f = objective(res.x.reshape(M, N), X, Ybar, lam2, lam3, lam4)
        if f < best[0]:
            best = (f, res.x.reshape(M, N))
    return best


def closed_form_anchored(B, c, lam2, lam3, lam4, anchor, rank, gram=None):
    """Exact step whose action on the null space of B (all but the ``rank`` largest singular
    directions) is the minimiser closest to ``anchor``: ``P D V0^T`` with ``D = s'(C0)``
    (the root for s = 0 as a matrix function of the curvature ``C0 = V0^T gram V0`` or
    ``c I``) and ``P`` the polar factor of ``(I - U_r U_r^T) anchor V0 D``. Full SVDs."""
    U, s, Vt = np.linalg.svd(B, full_matrices=False)
    Ur, Vr, V0 = U[:, :rank], Vt[:rank].T, Vt[rank:].T
    cs = [float(v @ gram @ v) if gram is not None else c for v in Vr.T]
    A = (Ur * [quartic_root(si, ci, lam2, lam3, lam4) for si, ci in zip(s, cs)]) @ Vr.T
    C0 = V0.T @ gram @ V0 if gram is not None else c * np.eye(V0.shape[1])
    w, W = np.linalg.eigh(C0)
    D = (W * [quartic_root(0.0, wi, lam2, lam3, lam4) for wi in w]) @ W.T
    Z = anchor @ V0 @ D
    Z = Z - Ur @ (Ur.T @ Z)
    Pu, _, Pvt = np.linalg.svd(Z, full_matrices=False)
    return A + Pu @ Pvt @ D @ V0.T


def span_map(A1, P, s0, W):
    """``A1 P^T + s0 Omega``: ``Omega`` the polar factor of ``(I - U U^T) W (I - P P^T)`` on
    the complement of ``span(P)`` (``U``: left singular vectors of ``A1``), from a full SVD
    (its ``N - r`` largest singular directions)."""
    M, r = A1.shape
    N = P.shape[0]
    U = np.linalg.svd(A1, full_matrices=False)[0]
    Pi = np.eye(N) - P @ P.T
    Z = (np.eye(M) - U @ U.T) @ W @ Pi
    Uz, _, Vzt = np.linalg.svd(Z, full_matrices=False)
    k = N - r
    return A1 @ P.T + s0 * Uz[:, :k] @ Vzt[:k]


def prior_singular_value(lam2, lam3, lam4):
    """argmin over s > 0 of the regulariser of one singular value (no data): the quartic's
    root for t = 0, c = 0."""
    return quartic_root(0.0, 0.0, lam2, lam3, lam4)
