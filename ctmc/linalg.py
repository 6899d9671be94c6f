r"""Subtraction-free dense elimination for M-matrix systems (GTH for ``Mx = b``).

A nonsingular M-matrix :math:`M = \mathrm{diag}(v + R\mathbf 1) - R` is given
by its *triplet*: the non-negative off-diagonal rates :math:`R` and the
non-negative row sums :math:`v = M\mathbf 1` (for first passage: the rates of
leaving the set, plus the shift :math:`s`). Gaussian elimination that never
forms a diagonal by subtraction, but recomputes each pivot as
:math:`v_k + \sum_{j>k} R_{kj}`, performs only additions and multiplications
of non-negative numbers; for :math:`b \ge 0` every component of
:math:`x = M^{-1} b` then has a relative error of a small multiple of the unit
round-off, however large or small it is (means of :math:`10^{100}`,
probabilities of :math:`10^{-200}`). This is the linear-system analogue of
the Grassmann-Taksar-Heyman algorithm.

Reference: A. S. Alfa, J. Xue, Q. Ye, "Accurate computation of the smallest
eigenvalue of a diagonally dominant M-matrix", Math. Comp. 71 (2002).

This module is public: model families use it for their own dense M-matrix
systems (``ctmc.linalg.TripletLU``), and :func:`gth_solve` for dense
stationary vectors.
"""
from __future__ import annotations

import numpy as np

from ._relax import extension

__all__ = ["TripletLU", "gth_solve", "inverse_norm_bound", "EXTENDED_RANGE"]

#: whether ``numpy.longdouble`` reaches beyond a double's exponent range here (:func:`gth_solve`'s
#: ``extended``): True with x86's 80-bit format, False where it is a double (Windows, ARM macOS)
EXTENDED_RANGE = np.finfo(np.longdouble).maxexp > np.finfo(float).maxexp


class TripletLU:
    """Dense subtraction-free LU of ``M = diag(v + R 1) - R``.

    Parameters
    ----------
    R : ndarray, shape (n, n)
        Non-negative off-diagonal rates (the diagonal is ignored).
    v : ndarray, shape (n,)
        Non-negative row sums of ``M``.

    Examples
    --------
    >>> import numpy as np
    >>> from ctmc.linalg import TripletLU
    >>> R = np.array([[0.0, 1.0], [2.0, 0.0]]); v = np.array([0.0, 1.0])
    >>> TripletLU(R, v).solve(np.ones(2))  # M = [[1, -1], [-2, 3]]
    array([4., 3.])
    """

    def __init__(self, R: np.ndarray, v: np.ndarray):
        A = np.array(R, dtype=float)
        np.fill_diagonal(A, 0.0)
        v = np.array(v, dtype=float)
        n = A.shape[0]
        piv = np.empty(n)
        for k in range(n):
            piv[k] = v[k] + A[k, k + 1:].sum()
            if not piv[k] > 0:
                raise ZeroDivisionError(f"singular M-matrix: zero pivot at position {k}")
            col = A[k + 1:, k] / piv[k]
            A[k + 1:, k] = col
            row = A[k, k + 1:]
            sub = A[k + 1:, k + 1:]
            d = sub.diagonal().copy()
            sub += np.outer(col, row)
            np.fill_diagonal(sub, d)  # the loop i -> k -> i only lowers the pivot of i
            v[k + 1:] += col * v[k]
        self._A, self._piv, self.n = A, piv, n

    def solve(self, b: np.ndarray) -> np.ndarray:
        """Solve ``M x = b`` for ``b >= 0`` (one or several columns).

        A solution beyond the double range comes back with ``inf`` (or
        ``nan``) entries, silently: the callers grade it.
        """
        A, piv = self._A, self._piv
        x = np.array(b, dtype=float)
        n = self.n
        with np.errstate(over="ignore", invalid="ignore"):
            for k in range(n - 1):
                x[k + 1:] += np.multiply.outer(A[k + 1:, k], x[k])
            for k in range(n - 1, -1, -1):
                x[k] = (x[k] + A[k, k + 1:] @ x[k + 1:]) / piv[k]
        return x


def gth_solve(A: np.ndarray, extended: bool = False) -> np.ndarray:
    """Stationary vector of a dense irreducible generator (or stochastic matrix) by GTH.

    Only off-diagonal entries are used, so no subtraction occurs and every
    component keeps high relative accuracy. Each elimination step updates only
    the rows and columns that have a nonzero in the pivot's column and row: the
    cost is :math:`O(n b^2)` for a chain of bandwidth :math:`b` (a birth-death
    chain: :math:`O(n)` arithmetic), :math:`O(n^3)` for a dense one. The steps run
    compiled where the extension ``ctmc._kernels`` is in use (``CTMC_KERNELS=0``: numpy),
    with the same operations in the same order: the same numbers to the bit.

    Parameters
    ----------
    A : ndarray, shape (n, n)
        Generator or transition matrix; not modified.
    extended : bool
        Eliminate in ``numpy.longdouble`` (numpy's steps; :data:`EXTENDED_RANGE` says whether its exponent
        range is wider than a double's: 80-bit on x86-64 Linux, up to :math:`10^{4932}`), for chains whose
        rates span so far that the elimination's products under- or overflow a double (rates of 1e160 and
        1e-170 into one state); the answer is then a ``numpy.longdouble`` array.

    Examples
    --------
    >>> import numpy as np
    >>> from ctmc.linalg import gth_solve
    >>> gth_solve(np.array([[-1.0, 1.0], [1e-200, -1e-200]]))
    array([1.e-200, 1.e+000])

    Probabilities spanning more than the double range underflow to 0
    instead of overflowing the back-substitution:

    >>> gth_solve(np.array([[-1e-200, 1e-200, 0.0], [1.0, -2.0, 1.0], [0.0, 1e-200, -1e-200]]))
    array([5.e-001, 5.e-201, 5.e-001])
    """
    dtype = np.longdouble if extended else float
    A = np.array(A, dtype=dtype, order="C")
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"A: expected a square matrix of at least one state, got shape {A.shape}")
    n = A.shape[0]
    # the update of step k touches only rows k+1..low[k] and columns k+1..high[k], the envelope:
    # a nonzero of column k below the diagonal is one of A's or a fill-in from an earlier step's
    # column, so lies above the running maximum of the columns' last nonzero rows (rows: the
    # same for the row's last nonzero column). The products left out are exact zeros: the same
    # numbers as an update of the whole trailing block.
    x = np.zeros(n, dtype=dtype)
    kernel = None if extended else getattr(extension(), "gth", None)    # None: not built, switched off, ...
    zero = kernel(A, x) if kernel else _gth_steps(A, _envelope(A), _envelope(A.T), x)
    if zero >= 0:
        raise ValueError(f"A: the chain is not irreducible (GTH met a zero pivot at state {zero})")
    return x / x.sum()


def _gth_steps(A: np.ndarray, low: np.ndarray, high: np.ndarray, x: np.ndarray) -> int:
    """GTH's elimination and back-substitution in numpy: ``A`` overwritten, ``x`` the unnormalised vector.

    Returns the step of a zero pivot (``x`` then meaningless), else -1. The compiled kernel
    (``gth`` in ``ctmc/_kernels_gth.h``, which works out the same envelope itself) makes the same
    operations in the same order (every sum is a contiguous array's ``.sum()``, whose pairwise order
    it copies): the same numbers to the bit.
    """
    n = A.shape[0]
    for k in range(n - 1):
        r, c = low[k] + 1, high[k] + 1
        scale = A[k, k + 1:c].sum()
        if scale <= 0:
            return k
        if r > k + 1 and c > k + 1:
            col = A[k + 1:r, k]
            col /= scale
            A[k + 1:r, k + 1:c] += np.outer(col, A[k, k + 1:c])
    x[n - 1] = 1.0
    for k in range(n - 2, -1, -1):
        r = low[k] + 1
        x[k] = (x[k + 1:r] * A[k + 1:r, k]).sum()
        if x[k] > 1.0:
            # keep max(x) = 1 so the next product cannot overflow; entries
            # that underflow here are below 1e-308 relative to state k and
            # would underflow after the final normalisation anyway
            x[k:] /= x[k]
    return -1


def _envelope(A: np.ndarray) -> np.ndarray:
    """Per column ``k``: the running maximum over columns ``<= k`` of their last nonzero row below
    the diagonal (``k`` where there is none)."""
    n = A.shape[0]
    below = np.tril(A != 0, -1)
    last = np.where(below.any(axis=0), n - 1 - np.argmax(below[::-1], axis=0), np.arange(n))
    return np.maximum.accumulate(np.maximum(last, np.arange(n)))


def inverse_norm_bound(y_norm: float, residual_norm: float, rhs_min: float = 1.0) -> float:
    r"""Proven bound on :math:`\|M^{-1}\|_\infty` for a nonsingular M-matrix from one approximate solve.

    For :math:`M y = c` with :math:`c \ge c_{\min} > 0` and a computed
    :math:`\hat y` whose residual :math:`\rho = c - M\hat y` has
    :math:`\|\rho\|_\infty \le` ``residual_norm`` (round-off of computing it
    included by the caller): :math:`M^{-1} \ge 0` gives
    :math:`\|M^{-1}\|_\infty c_{\min} \le \|M^{-1}c\|_\infty \le \|\hat y\|_\infty
    + \|M^{-1}\|_\infty\|\rho\|_\infty`, so
    :math:`\|M^{-1}\|_\infty \le \|\hat y\|_\infty / (c_{\min} - \|\rho\|_\infty)`;
    ``inf`` when the residual is not below :math:`c_{\min}`. Whatever solver
    produced :math:`\hat y`.

    >>> inverse_norm_bound(2.0, 0.0), inverse_norm_bound(2.0, 0.5), inverse_norm_bound(2.0, 1.0)
    (2.0, 4.0, inf)
    """
    return y_norm / (rhs_min - residual_norm) if residual_norm < rhs_min else float("inf")

