r"""Passage systems beyond one sparse factorisation of the whole set: dense, block-triangular, replicated.

:class:`ctmc.passage.PassageSetup` solves :math:`M = sI - Q_{XX}` on a set
:math:`X` (an M-matrix). Two ways of solving it live here, written on the
primitives of :mod:`ctmc.backends.base`:

* :class:`DenseSystem`: the set gathered on every process and factorised by
  the subtraction-free dense elimination (``gth``), :math:`O(|X|^3)`.
* :class:`BlockTriangularSystem`: when :math:`X` splits into strongly
  connected components none larger than :data:`BTF_LARGEST` of it, number
  :math:`X` component by component in topological order: :math:`M` is block
  triangular, each block (consecutive components, at least :data:`BTF_BLOCK`
  states) is factorised alone and the off-block terms are sums of
  non-negative numbers. One factorisation of :math:`X` fills the triangle
  between components; block by block there is no such fill. On several
  processes the set is gathered and solved so on every process when it fits
  the memory (:func:`gathered_fits`).
* :class:`ReplicatedSystem`: a small :math:`X` gathered and factorised on
  every process, with transposed solves (the adjoint solves of
  :func:`ctmc.joint_passage.first_passage` from a few sources whose corner of
  the chain is small, where a distributed factorisation spans every state).

``auto`` chooses them (:func:`ctmc.passage._auto`) in first-passage analyses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from .backends.base import SolveReport, System
from .linalg import TripletLU
from .results import Status

__all__ = ["BTF_BLOCK", "BTF_LARGEST", "BTF_GATHER_BYTES", "gathered_fits", "DenseSystem", "TriangularPlan",
           "BlockTriangularSystem", "ReplicatedSystem"]

#: block-triangular solves: consecutive strongly connected components are grouped into blocks of at
#: least this many states (one sparse factorisation each; the fill between the components of a block
#: is at most its size per row)
BTF_BLOCK = 256
#: ... and are used when the largest component holds at most this fraction of the set
BTF_LARGEST = 0.25
#: bytes per stored entry of the set (rates and diagonal) of a block-triangular solve gathered on every
#: process: the gathered rows, ``M`` and its permuted copy, the transposed blocks and the factors
#: (JSQ at K = 2000 from (0, K), 8.0e6 entries on two processes: 1.26-1.39 GiB peak per process in all,
#: the chain included, about 170 B per entry; one MUMPS factorisation of the set: 1.78 GiB)
BTF_GATHER_BYTES = 200
#: blocks of up to this many states are factorised without supernodes (less workspace)
_SMALL_BLOCK = 4096


class _GatheredSystem(System):
    """A system of the set ``X`` gathered on every process: ``idx`` (its global indices, in order),
    the right-hand sides gathered on it and the solution's owned part scattered back."""

    def _gather_set(self, op, members):
        """``(X on every process, R's rows of X on every process)``; sets ``idx`` and the owned part."""
        self.op = op
        members = np.asarray(members, dtype=bool)
        full = op.gather(members.astype(float), "all") > 0.5
        self.idx = np.flatnonzero(full)
        own = (self.idx >= op.start) & (self.idx < op.stop)
        self._own, self._local = own, self.idx[own] - op.start
        return full, op.gather_rows(members)          # |X| x n, replicated

    def _whole(self, b):
        """The right-hand sides (owned rows, one or more columns) on ``X``, every process, ``|X| x columns``."""
        cols = b.reshape(b.shape[0], -1)
        return self.op.gather(cols[self._local], "all").reshape(self.idx.size, cols.shape[1])

    def _owned(self, b, sol):
        """The owned part, shaped like ``b``, of a solution ``sol`` on ``X`` (zero off ``X``)."""
        x = np.zeros_like(b)
        x.reshape(b.shape[0], -1)[self._local] = sol[self._own]
        return x


class DenseSystem(_GatheredSystem):
    """``M = s I - Q_XX`` gathered on every process and factorised by :class:`~ctmc.linalg.TripletLU`.

    The row sums of ``M`` are ``s`` plus the rates leaving ``X``, summed
    without a subtraction, so the elimination is subtraction-free.
    """

    def __init__(self, op, members, shift: float):
        full, rows = self._gather_set(op, members)
        inside = rows[:, self.idx].toarray()
        leak = np.asarray(rows[:, np.flatnonzero(~full)].sum(axis=1)).ravel()
        self.lu = TripletLU(inside, float(shift) + leak) if self.idx.size else None
        self.info = {"solver": "dense subtraction-free elimination"}

    def solve(self, b, transpose=False):
        if transpose:
            raise ValueError("transpose: the subtraction-free solver has no transposed solve")
        b = np.asarray(b, dtype=float)
        if self.lu is None:
            return np.zeros_like(b), SolveReport()
        return self._owned(b, self.lu.solve(self._whole(b))), SolveReport(Status.SUCCESS,
                                                                           "dense subtraction-free elimination")


class ReplicatedSystem(_GatheredSystem):
    """``M = s I - Q_XX`` of a small set gathered on every process and factorised there (SuperLU, diagonal
    pivots), with transposed solves: the adjoint solves of :func:`~ctmc.joint_passage.first_passage` from a few sources whose
    corner of the chain is small, where a distributed factorisation would span every state."""

    def __init__(self, op, members, shift: float):
        import scipy.sparse as sp
        import scipy.sparse.linalg as sla
        _, rows = self._gather_set(op, members)
        q = op.gather(op.exit_rates[np.asarray(members, dtype=bool)], "all")   # in X's (global) order
        M = (sp.diags(float(shift) + q) - rows[:, self.idx]).tocsc()
        self.failure, self.lu = None, None
        if self.idx.size:
            try:
                self.lu = sla.splu(M, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0)
            except RuntimeError as exc:
                self.failure = f"SuperLU failed: {exc}"
        self.info = {"solver": f"sparse LU of {self.idx.size} unknowns on every process"}

    def solve(self, b, transpose=False):
        b = np.asarray(b, dtype=float)
        if self.failure is not None:
            return np.zeros_like(b), SolveReport(Status.BREAKDOWN, self.failure)
        if self.lu is None:
            return np.zeros_like(b), SolveReport()
        sol = self.lu.solve(np.ascontiguousarray(self._whole(b)), trans="T" if transpose else "N")
        return self._owned(b, sol), SolveReport(Status.SUCCESS, "sparse LU (replicated)")


@dataclass(frozen=True)
class TriangularPlan:
    """The strongly connected components of a set, in an order that makes ``M`` block triangular."""

    n: int
    n_components: int
    largest: int
    matrix: object          # M = -Q_XX (diagonal: exit rates) in CSR, numbered along X
    order: np.ndarray       # X's states, component by component, sinks first
    cuts: np.ndarray        # block boundaries in ``order`` (at component boundaries)
    idx: np.ndarray = None  # X's global state numbers, in order (every process)


def gathered_fits(op, entries: float) -> bool:
    """Whether a set of ``entries`` stored entries (rates and diagonal), gathered and solved
    block-triangularly on every process, fits: :data:`BTF_GATHER_BYTES` per entry on each of the
    ``op.size`` processes (counted as sharing one machine) within
    :data:`~ctmc.kernels.plan.BUDGET_FRACTION` of the least memory available on any of them."""
    from ._util import available_memory
    from .kernels.plan import BUDGET_FRACTION
    room = op.allmin(float(available_memory()))
    return BTF_GATHER_BYTES * float(entries) * op.size <= BUDGET_FRACTION * room


def _symmetric_permutation(M, order):
    """``M[order][:, order]`` in CSR: the rows gathered, the column numbers renumbered and sorted (no
    column slicing, which takes seconds on millions of entries)."""
    import scipy.sparse as sp
    inv = np.empty(order.size, dtype=np.int64)
    inv[order] = np.arange(order.size)
    rows = M[order]
    out = sp.csr_matrix((rows.data, inv[rows.indices], rows.indptr), shape=M.shape)
    out.sort_indices()
    return out


def _gathered_matrix(rows, full, q):
    """``M = diag(q) - R_XX`` (CSR, numbered along ``X``) from ``R``'s rows of ``X`` (global columns,
    sorted) and the mask ``full`` of ``X``: the columns renumbered in one pass, rates leaving ``X``
    dropped (the same matrix as ``sp.diags(q) - rows[:, X]``, without the column slicing)."""
    import scipy.sparse as sp
    k = rows.shape[0]
    rows.sum_duplicates()
    keep = full[rows.indices]
    newcol = (np.cumsum(full) - 1)[rows.indices[keep]]
    counts = np.bincount(np.repeat(np.arange(k), np.diff(rows.indptr))[keep], minlength=k)
    # each row: its rates inside X, then its diagonal (canonical order restored by sort_indices)
    lengths = counts.astype(np.int64) + 1
    indptr = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices = np.empty(indptr[-1], dtype=np.int64)
    data = np.empty(indptr[-1])
    diag_at = indptr[1:] - 1
    rest = np.ones(indptr[-1], dtype=bool)
    rest[diag_at] = False
    indices[rest], data[rest] = newcol, -rows.data[keep]
    indices[diag_at], data[diag_at] = np.arange(k), q
    M = sp.csr_matrix((data, indices, indptr), shape=(k, k))
    M.sort_indices()
    return M


class BlockTriangularSystem(_GatheredSystem):
    r"""``M = sI - Q_XX`` solved block by block along the strongly connected components of ``X``.

    Numbered component by component with the components in topological
    order (a component before those it can move to is after them: sinks
    first), ``M`` is block lower triangular; the components are grouped in
    consecutive blocks of at least :data:`BTF_BLOCK` states, each factorised
    alone (sparse LU, diagonal pivots). Then

    .. math::

        x_G = M_{GG}^{-1}\big(b_G + R_{G,<G}\, x_{<G}\big), \qquad
        y_G = M_{GG}^{-T}\big(e_G + R_{>G,G}^T\, y_{>G}\big)

    block after block (forward: first block first; transposed: last first):
    the off-block terms are sums of non-negative numbers (subtraction-free,
    as the dense elimination is), and there is no fill between blocks, where
    one factorisation of the whole matrix fills the triangle between
    components. A level process whose level never grows before the target
    (the JSQ chain before the first equality: 2000 levels of at most 2000
    states at K = 2000) is solved in time and memory linear in its size.

    On several processes the set is gathered and solved on every process
    (the right-hand sides gathered, each process keeping its rows of the
    answer) when it fits the memory (:func:`gathered_fits`): a distributed
    factorisation of the whole set would fill the triangle between the
    components (JSQ at K = 2000 from a source that sees every state: one
    MUMPS factorisation of 2e6 states on two processes against this solve).

    Used by ``auto`` in :func:`~ctmc.joint_passage.first_passage` when the largest
    component holds at most :data:`BTF_LARGEST` of the set (:meth:`plan`).
    """

    @staticmethod
    def plan(op, members) -> Optional[TriangularPlan]:
        """The components of ``X = members`` when a block-triangular solve pays (and, on several
        processes, the gathered set fits: :func:`gathered_fits`), else None. Collective."""
        import scipy.sparse as sp
        from scipy.sparse.csgraph import connected_components
        from .backends.csr import principal_block
        members = np.asarray(members, dtype=bool)
        n = int(round(op.allsum(float(members.sum()))))
        if n < 4 * BTF_BLOCK:
            return None
        if op.size == 1:
            idx = np.flatnonzero(members)
            M = principal_block(op.generator_rows(), members, op.exit_rates[members])
        else:
            entries = op.allsum(float(op.offdiagonal_counts()[members].sum())) + n
            if not gathered_fits(op, entries):
                return None
            full = op.gather(members.astype(float), "all") > 0.5
            idx = np.flatnonzero(full)
            M = _gathered_matrix(op.gather_rows(members), full, op.gather(op.exit_rates[members], "all"))
        nc, lab = connected_components(M, directed=True, connection="strong")
        largest = int(np.bincount(lab).max())
        if nc < 2 or largest > BTF_LARGEST * n:
            return None
        coo = M.tocoo()
        cross = lab[coo.row] != lab[coo.col]
        if not np.all(lab[coo.row[cross]] > lab[coo.col[cross]]):
            return None       # the components are not numbered in topological order: no plan
        order = np.argsort(lab, kind="stable")
        sizes = np.bincount(lab, minlength=nc)
        ends = np.cumsum(sizes)                        # component boundaries in ``order``
        cuts, last = [0], 0
        for e in ends:
            if e - last >= BTF_BLOCK:
                cuts.append(int(e))
                last = int(e)
        if cuts[-1] != n:
            cuts.append(n)
        return TriangularPlan(n, int(nc), largest, M, order, np.asarray(cuts), idx)

    def __init__(self, op, members, shift: float, plan: TriangularPlan):
        import scipy.sparse as sp
        import scipy.sparse.linalg as sla
        from ._sparse_lu import choose_ordering
        self.op = op
        self.idx = plan.idx
        own = (self.idx >= op.start) & (self.idx < op.stop)
        self._own, self._local = own, self.idx[own] - op.start
        o = plan.order
        Mp = _symmetric_permutation(plan.matrix, o)
        if shift:
            Mp = (Mp + float(shift) * sp.identity(plan.n, format="csr")).tocsr()
        self._Mp, self._MpT, self._order = Mp, None, o
        self._blocks, fill = [], 0
        self.failure = None
        for g0, g1 in zip(plan.cuts[:-1], plan.cuts[1:]):
            rows = Mp[g0:g1]
            D = rows[:, g0:g1].tocsc()
            # the ordering by the rule of every sparse LU (natural where the block is nearly banded, as a
            # component in state order often is); diagonal pivots (an M-matrix); a small block is
            # factorised without supernodes, whose workspace is most of the memory of a small SuperLU
            small = {"PanelSize": 1, "Relax": 1} if g1 - g0 <= _SMALL_BLOCK else None
            try:
                lu = sla.splu(D, permc_spec=choose_ordering(D), diag_pivot_thresh=0.0, options=small or {})
            except RuntimeError as exc:
                self.failure = f"block {g0}:{g1}: {exc}"
                break
            fill += int(lu.nnz)
            self._blocks.append((int(g0), int(g1), lu, rows[:, :g0].tocsr()))
        self.info = {"solver": "block-triangular sparse LU" + (f", on each of {op.size} processes"
                                                                if op.size > 1 else ""),
                     "blocks": len(self._blocks), "components": plan.n_components,
                     "largest_component": plan.largest, "fill": fill}

    def solve(self, b, transpose=False):
        b = np.asarray(b, dtype=float)
        if self.failure is not None:
            return np.zeros_like(b), SolveReport(Status.BREAKDOWN, self.failure)
        bp = self._whole(b)[self._order]                    # X's right-hand sides, component order
        xp = np.zeros_like(bp)
        if not transpose:
            for g0, g1, lu, before in self._blocks:
                r = bp[g0:g1] - before @ xp[:g0] if g0 else bp[g0:g1]
                xp[g0:g1] = lu.solve(np.ascontiguousarray(r))
        else:
            if self._MpT is None:       # the blocks' columns below them, made at the first transposed solve
                MpT = self._Mp.T.tocsr()
                self._MpT = [MpT[g0:g1, g1:].tocsr() for g0, g1, _, _ in self._blocks]
            for (g0, g1, lu, _), after in zip(reversed(self._blocks), reversed(self._MpT)):
                r = bp[g0:g1] - after @ xp[g1:] if after.nnz else bp[g0:g1]
                xp[g0:g1] = lu.solve(np.ascontiguousarray(r), trans="T")
        out = np.empty_like(xp)
        out[self._order] = xp
        x = self._owned(b, out.reshape(out.shape[0], -1))
        if not np.all(np.isfinite(out)):        # the same verdict on every process: ``out`` is replicated
            return x, SolveReport(Status.BREAKDOWN, "block-triangular solve: a non-finite value")
        return x, SolveReport(Status.SUCCESS, "block-triangular sparse LU")

    def close(self):
        self._blocks, self._Mp, self._MpT = [], None, None
