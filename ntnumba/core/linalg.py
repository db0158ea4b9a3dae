"""Dense linear algebra shared by the modules (imports nothing of the package).

:func:`svd` is the one SVD of the package: LAPACK's gesdd, and gesvd where gesdd does not
converge.
"""
import numpy as np
import scipy.linalg


def svd(A, full_matrices=True, compute_uv=True, lapack="numpy"):
    """SVD of ``A``: LAPACK gesdd, gesvd where gesdd does not converge.

    gesdd can fail to converge on a finite, well-conditioned matrix with a tight cluster of
    singular values (``docs/reliability.md``, "Degenerate data"); gesvd is slower but converges
    there, with the same products of the factors to rounding. Non-finite input still raises.

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
