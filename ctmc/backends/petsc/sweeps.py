r"""Gauss-Seidel sweeps in a given order of each process's states, by PETSc's own ``MatSOR``.

:class:`OrderedSweeps` holds :math:`A = R_{XX} - \mathrm{diag}(q)` (:math:`Q_{XX}`, or
:math:`Q^T_{XX}` from :math:`R^T`) with the owned states of :math:`X` renumbered in the order
given (``MatCreateSubMatrix`` with one index set for rows and columns: each process keeps its own
rows, in that order). A sweep is ``MatSOR`` with a local forward or backward sweep
(``SOR_LOCAL_FORWARD_SWEEP``): the other processes' entries of the iterate are scattered once
(PETSc's ghost update of the product), then the owned block is swept in the new order, so a
sweep in level order updates each level from the level below it as on one process. It is the
distributed form of :meth:`ctmc.kernels.sweeps.Sweeper.relax_ordered` (same sign: it solves
:math:`A x = \mathrm{rhs}`) and :meth:`matvec` that of the product with ``Sweeper.local``; the
iterate and right-hand side are numpy arrays of the owned members in that order (placed in PETSc
vectors without a copy).
"""
from __future__ import annotations

import numpy as np

from ._env import load_petsc

__all__ = ["OrderedSweeps"]


class OrderedSweeps:
    """Sweeps on :math:`Q_{XX}` (``transpose``: :math:`Q^T_{XX}`) with the owned members in ``order``.

    Parameters
    ----------
    dc : DistributedChain
    members : ndarray of bool
        Owned mask of ``X``.
    order : ndarray of int
        The owned members of ``X`` (local numbers), each once, in sweep order.
    transpose : bool
        Sweep the in-flow rows (``R^T``): the stationary equations ``Q^T x = 0``.

    Attributes
    ----------
    size, nx : int
        Length of the iterate (the owned members, ``len(order)``), both.
    """

    def __init__(self, dc, members, order, transpose: bool = False):
        PETSc = load_petsc()
        order = np.asarray(order, dtype=np.int64)
        members = np.asarray(members, dtype=bool)
        m = dc.stop - dc.start
        # every member, each once (a count, not a sort: 1e7 states); decided together (no process left in a
        # collective while another raises)
        bad = order.ndim != 1 or order.size != np.count_nonzero(members) or bool(order.size and (
            order.min() < 0 or order.max() >= m or not members[order].all()
            or np.bincount(order, minlength=m).max() > 1))
        if dc.allsum(float(bad)):
            raise ValueError("order: expected every owned member of X (local numbers), each once")
        self.dc, self.size = dc, int(order.size)
        self.nx = self.size
        iset = PETSc.IS().createGeneral((order + dc.start).astype(PETSc.IntType), comm=dc.comm)
        try:
            R = dc.transposed_rates() if transpose else dc.R
            A = R.createSubMatrix(iset, iset)
        finally:
            iset.destroy()
        A.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
        # point sweeps: AIJ's i-node routines sweep rows of one pattern as a block, inverting its diagonal
        # block, singular on a chain's Q^T (two states: NaN at the first sweep)
        A.setOption(PETSc.Mat.Option.USE_INODES, False)
        d = A.createVecLeft()
        d.getArray()[:] = -dc.exit_rates[order]
        A.setDiagonal(d)
        self.A = A
        self._x, self._b = d, A.createVecRight()
        self._y = A.createVecLeft()
        self._types = {"forward": PETSc.Mat.SORType.LOCAL_FORWARD_SWEEP,
                       "backward": PETSc.Mat.SORType.LOCAL_BACKWARD_SWEEP,
                       "symmetric": PETSc.Mat.SORType.LOCAL_SYMMETRIC_SWEEP}

    def relax_ordered(self, xo, rhs, direction="forward", omega=1.0):
        """One local sweep on ``A xo = rhs`` (owned members in order), ``xo`` in place (a collective)."""
        self._x.placeArray(xo)
        self._b.placeArray(np.ascontiguousarray(rhs, dtype=float))
        try:
            self.A.SOR(self._b, self._x, omega=float(omega), sortype=self._types[direction])
        finally:
            self._x.resetArray(), self._b.resetArray()

    def matvec(self, xo) -> np.ndarray:
        """``A xo`` (owned members in order; a new array)."""
        self._x.placeArray(xo)
        try:
            self.A.mult(self._x, self._y)
        finally:
            self._x.resetArray()
        return self._y.getArray().copy()

    def close(self):
        """Free the PETSc matrix and vectors."""
        for obj in (self.A, self._x, self._b, self._y):
            if obj is not None:
                obj.destroy()
        self.A = self._x = self._b = self._y = None
