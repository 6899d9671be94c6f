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
"""
from __future__ import annotations

import numpy as np


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
    >>> from ctmc._triplet import TripletLU
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
        """Solve ``M x = b`` for ``b >= 0`` (one or several columns)."""
        A, piv = self._A, self._piv
        x = np.array(b, dtype=float)
        n = self.n
        for k in range(n - 1):
            x[k + 1:] += np.multiply.outer(A[k + 1:, k], x[k])
        for k in range(n - 1, -1, -1):
            x[k] = (x[k] + A[k, k + 1:] @ x[k + 1:]) / piv[k]
        return x
