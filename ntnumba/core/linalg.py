"""Dense linear algebra shared by the modules (imports nothing of the package).

:func:`svd` is the one SVD of the package: LAPACK's gesdd, and gesvd where gesdd does not
converge.
"""
import numpy as np
import scipy.linalg


def svd(A, full_matrices=True, compute_uv=True, lapack="numpy"):
    """SVD of ``A``: LAPACK gesdd, gesvd where gesdd does not converge.

    gesdd's divide and conquer can report non-convergence on a finite, well-conditioned matrix
    whose singular values form a tight cluster (seen with single-threaded OpenBLAS 0.3.30 and
    0.3.31 on a 2100 x 376 matrix with singular values in [1.256, 1.281], 176 of them equal to
    1e-13, in the null-space completion of a fit on orl-20). gesvd (QR iteration) is slower but
    converges there; it factors the same matrix, so the products the callers form from the
    factors (the polar factor, ``U diag(f(s)) V^T``, the singular values) agree with gesdd's
    to rounding. Non-finite input still raises.

    Parameters
    ----------
    A : ndarray of shape (m, n)
    full_matrices, compute_uv : bool
        As :func:`numpy.linalg.svd`.
    lapack : {"numpy", "scipy"}, default "numpy"
        Whose gesdd is tried first: :func:`numpy.linalg.svd` or :func:`scipy.linalg.svd`
        (two LAPACK builds whose results differ in the last bits; each caller keeps the one it
        had).

    Returns
    -------
    ``(U, s, Vh)``, or ``s`` when ``compute_uv=False``.

    Examples
    --------
    >>> import numpy as np
    >>> from ntnumba.core.linalg import svd
    >>> svd(np.diag([3.0, 1.0, 2.0]), compute_uv=False).tolist()
    [3.0, 2.0, 1.0]
    """
    try:
        if lapack == "scipy":
            return scipy.linalg.svd(A, full_matrices=full_matrices, compute_uv=compute_uv)
        return np.linalg.svd(A, full_matrices=full_matrices, compute_uv=compute_uv)
    except np.linalg.LinAlgError:
        if not np.all(np.isfinite(A)):
            raise
        return scipy.linalg.svd(A, full_matrices=full_matrices, compute_uv=compute_uv,
                                lapack_driver="gesvd", check_finite=False)
