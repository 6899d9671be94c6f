r"""Two-level solves of the return-time system on chains whose transitions move a level by +-1.

The system
----------
The error bound of a stationary law (:func:`ctmc.kernels.evidence.return_time_bound`)
needs the mean times :math:`m` to reach a pin state :math:`k`:

.. math:: M m = 1, \qquad M = -Q_{XX}, \quad X = C \setminus \{k\},

a nonsingular M-matrix. When every transition raises or lowers a *level* :math:`L`
by one (the ``level_iad`` chains: the number of jobs of a queueing network),
:math:`M` is block tridiagonal in :math:`L` and its diagonal blocks are diagonal: the states
of a level exchange nothing. The slow part of :math:`m` is its growth with the
level (the time to come down); at a fixed level it varies little. Krylov solves
with a local preconditioner see this as a long chain of levels to cross, a few
levels an iteration.

Two levels
----------
Each cycle of :class:`LevelSystem` runs

1. a Gauss-Seidel sweep on :math:`M` in increasing level order
   (:meth:`ctmc.kernels.sweeps.Sweeper.relax_ordered`, the matrix permuted once),
2. a coarse correction on the levels: the residual :math:`r = b - Mx` is
   restricted by the weights :math:`s_i = w_i / W_L` (:math:`w` the stationary law,
   :math:`W_L` its mass on the level, so :math:`s^T r` is the conditional mean of
   :math:`r` on the level), the correction is constant on each level, and the coarse
   operator is the Galerkin product :math:`A_c = T^T\mathrm{diag}(s) M T`
   (as in :mod:`ctmc.multigrid`, on the transposed side), :math:`T` the 0/1 level matrix. :math:`A_c` is
   the (negated, pinned) generator of the birth-death chain of the levels with
   rates averaged by :math:`w`: tridiagonal, a nonsingular M-matrix, solved exactly
   in :math:`O(\text{levels})`,
3. a Gauss-Seidel sweep in decreasing level order.

It stops when :math:`\|b - Mx\|_\infty \le` ``rtol`` :math:`\|b\|_\infty`. The solver
is only a means: :func:`~ctmc.kernels.evidence.return_time_bound` recomputes the
residual of what it returns and proves the bound from it, whatever solved it.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..backends.base import SolveReport
from ..results import Status
from .sweeps import Sweeper

__all__ = ["LevelSystem", "LEVEL_RTOL", "LEVEL_CYCLES"]

#: the relative residual a solve of :class:`LevelSystem` stops at (the bound needs a residual of
#: 0.1 on ``M m = 1``; :func:`~ctmc.kernels.evidence.return_time_bound` refines on its own)
LEVEL_RTOL = 1e-2
#: cycles of one solve at most
LEVEL_CYCLES = 500


class LevelSystem:
    """The return-time system ``M = -Q_XX`` on ``X`` solved by two-level cycles on the levels.

    Parameters
    ----------
    op : Operator
        The chain's operator, on one process.
    X : ndarray of bool
        The class without the pin.
    levels : ndarray of int
        The level of every state; every transition moves it by +-1.
    weights : ndarray
        Non-negative weights of the states within their level (the stationary law).
    rtol, maxiter : float, int
        The stop of a solve (:data:`LEVEL_RTOL`, :data:`LEVEL_CYCLES`).

    Examples
    --------
    The mean times to empty an M/M/1/K queue, against their closed form:

    >>> import numpy as np, ctmc
    >>> from ctmc.backends import operator_for
    >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 30)
    >>> m.event("a", guard=n < 30, rate=1.0, update={n: n + 1})
    >>> m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> op = operator_for(m.build(initial={"n": 0}), "scipy")
    >>> X = np.arange(31) > 0
    >>> s = LevelSystem(op, X, np.arange(31), 0.5 ** np.arange(31.0))
    >>> t, rep = s.solve(X.astype(float))
    >>> exact = sum(sum(0.5 ** i for i in range(31 - k)) / 2.0 for k in range(1, 31))
    >>> bool(abs(t[30] / exact - 1) < 1e-3), rep.status.value
    (True, 'success')
    """

    kind = "level"

    def __init__(self, op, X, levels, weights, rtol: float = LEVEL_RTOL, maxiter: int = LEVEL_CYCLES):
        if op.size != 1:
            raise ValueError("LevelSystem: one process only")
        self.op, self.rtol, self.maxiter = op, float(rtol), int(maxiter)
        X = np.asarray(X, dtype=bool)
        lev = np.asarray(levels)
        idx = np.flatnonzero(X)
        idx = idx[np.argsort(lev[idx], kind="stable")]
        self.order = np.concatenate([idx, np.flatnonzero(~X)])
        self.nx = nx = idx.size
        self.sweeper = Sweeper(op, X, 0.0, transpose=False, order=self.order)
        A = self.sweeper.local                       # Q_XX in level order (unit rows off X)
        # the levels present in X, numbered in order: a level of the pin alone drops out, and the
        # levels on either side of it are not coupled (every transition moves by one)
        _, self.group = np.unique(lev[idx], return_inverse=True)
        nc = int(self.group.max()) + 1 if nx else 0
        w = np.asarray(weights, dtype=float)[idx]
        w = np.where(np.isfinite(w) & (w > 0), w, 0.0)
        W = np.bincount(self.group, weights=w, minlength=nc)
        empty = ~(W > 0)[self.group]                 # no weight on a level: uniform there
        w = np.where(empty, 1.0, w)
        W = np.bincount(self.group, weights=w, minlength=nc)
        self.share = w / W[self.group]
        Mxx = -A[:nx, :nx]
        # T^T diag(s) M T: M's columns moved to their level (M T, duplicates summed by the product)
        MT = sp.csr_matrix((Mxx.data, self.group[Mxx.indices], Mxx.indptr), shape=(nx, nc))
        Ts = sp.csr_matrix((self.share, self.group, np.arange(nx + 1)), shape=(nx, nc)).T
        Ac = (Ts @ MT).tocoo()
        del Mxx, MT
        if np.any(np.abs(Ac.row - Ac.col) > 1):
            raise ValueError("levels: a transition moves the level by more than one")
        ab = np.zeros((3, nc))
        np.add.at(ab, (1 + Ac.row - Ac.col, Ac.col), Ac.data)
        self.ab = ab
        self.info = {"levels": nc}

    def _coarse(self, r):
        from scipy.linalg import solve_banded
        rc = np.bincount(self.group, weights=self.share * r, minlength=self.ab.shape[1])
        return solve_banded((1, 1), self.ab, rc, check_finite=False)[self.group]

    def solve(self, b, transpose: bool = False):
        """``M x = b`` by two-level cycles: ``(x, SolveReport)`` (untransposed only)."""
        if transpose:
            raise NotImplementedError("LevelSystem solves M x = b only (the return times)")
        nx, A, sw = self.nx, self.sweeper.local, self.sweeper
        bo = np.zeros(self.order.size)
        bo[:nx] = np.asarray(b, dtype=float)[self.order[:nx]]
        rhs = -bo                                    # the sweeps solve Q_XX x = -b
        x = np.zeros_like(bo)
        scale = float(np.abs(bo).max(initial=0.0))
        status, it, rel = Status.MAX_ITERATIONS, 0, np.inf
        if scale == 0:
            status = Status.SUCCESS
        for it in range(1, self.maxiter + 1 if scale > 0 else 1):
            sw.relax_ordered(x, rhs, "forward")
            r = bo[:nx] + (A @ x)[:nx]
            x[:nx] += self._coarse(r)
            sw.relax_ordered(x, rhs, "backward")
            r = bo[:nx] + (A @ x)[:nx]
            rel = float(np.abs(r).max(initial=0.0)) / scale
            if not np.isfinite(rel):
                status = Status.BREAKDOWN
                break
            if rel <= self.rtol:
                status = Status.SUCCESS
                break
        out = np.zeros(self.order.size)
        out[self.order[:nx]] = x[:nx]
        return out, SolveReport(status, f"two-level cycles on the levels, residual {rel:.1e}", it,
                                {"relative_residual": rel})

    def close(self):
        """Nothing to release (the interface of a backend's system)."""
