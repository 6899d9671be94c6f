"""Local relaxation sweeps in compiled code (pyamg's kernels), for any backend.

The stationary iterations (Gauss-Seidel, SOR) sweep the rows a process owns;
the sweep itself is plain local linear algebra, done here with pyamg's
compiled CSR Gauss-Seidel/SOR kernels (about 1e8 entries per second, against
about 1e6 for a Python-level triangular solve). pyamg is a dependency for
that reason.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["sweep", "one_index_type"]


def one_index_type(A: sp.csr_matrix) -> sp.csr_matrix:
    """``A`` with ``indices`` and ``indptr`` of one integer type, which the compiled kernels take.

    ``A`` itself when they agree; else a new matrix of its own arrays (one index
    type, as scipy's constructor chooses it; a copy of the values: sorting it in
    place never touches ``A``).
    Callers that sweep one matrix many times convert it once with this, so
    :func:`sweep` finds nothing to convert.

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.eye(2)); A.indptr = A.indptr.astype(np.int64)
    >>> B = one_index_type(A); (B.indices.dtype == B.indptr.dtype, np.shares_memory(B.data, A.data))
    (True, False)
    """
    if A.indices.dtype == A.indptr.dtype:
        return A
    return sp.csr_matrix((A.data.copy(), A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)


def sweep(A: sp.csr_matrix, x: np.ndarray, b: np.ndarray, omega: float = 1.0, direction: str = "forward"):
    """One Gauss-Seidel (``omega = 1``) or SOR sweep on ``A x = b``, in place.

    Parameters
    ----------
    A : scipy.sparse.csr_matrix, square, float64, non-zero diagonal
    x : ndarray of float64, contiguous (updated in place)
    b : ndarray of float64
    omega : float
    direction : {"forward", "backward"}

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[4.0, -1.0], [-1.0, 4.0]])); x = np.zeros(2)
    >>> for _ in range(30): sweep(A, x, np.array([3.0, 3.0]))
    >>> np.round(x, 12)
    array([1., 1.])
    """
    from pyamg import amg_core

    n = A.shape[0]
    A = one_index_type(A)
    start, stop, step = (0, n, 1) if direction == "forward" else (n - 1, -1, -1)
    if omega == 1.0:
        amg_core.gauss_seidel(A.indptr, A.indices, A.data, x, b, start, stop, step)
    else:
        amg_core.sor_gauss_seidel(A.indptr, A.indices, A.data, x, b, start, stop, step, omega)
