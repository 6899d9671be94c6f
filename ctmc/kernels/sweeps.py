r"""Gauss-Seidel sweeps, the stopping rule of the stationary iterations, dense GTH on a class.

The sweeps solve :math:`(sI - Q_{XX})\,x = b` (passage systems) or
:math:`Q^T x = 0` on a class (stationary laws, renormalised after each sweep)
state by state: with :math:`Q = R - \mathrm{diag}(q)`,

.. math::

    x_j \leftarrow (1 - \omega)\, x_j + \omega\,
    \frac{b_j + \sum_{i \ne j} R_{ij} x_i}{s + q_j}

in the current values (compiled kernels, :mod:`ctmc._relax`; on each process's
block when distributed, the other blocks from the previous sweep). The
iterations stop by :class:`Stop`: normwise first, then component-wise, so the
small entries are right where the method converges (:func:`polish_sweeps`
applies the same rule to the answer of a Krylov solve).

Checking the rule needs :math:`r = Q^T x`, a product as dear as a sweep;
:func:`checked_sweeps` checks it every :math:`g \le` ``CHECK_GAP`` sweeps,
:math:`g` from the measure's geometric rate, and replays the last block
sweep by sweep when the rule's answer changed in it, so it stops at the
sweep, with the iterate, where a check after every sweep stops (unless the
rule held and failed again within one block: then later, never earlier); a
sweep costs its kernel plus a renormalisation, not twice the kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._relax import extension, one_index_type, product, product_listed, product_rows, sweep, sweep_rows
from .._util import available_memory, blocks
from ..expr import Expr
from ..linalg import EXTENDED_RANGE, gth_solve
from ..results import Status
from . import plan
from .evidence import balance_error, gth_bound

__all__ = ["start_vector", "Stop", "checked_sweeps", "CHECK_GAP", "Sweeper", "RowSweeper", "polish_pair",
           "copy_plentiful", "ordered_sweeper", "OrderedCopySweeps", "RowOrderSweeps", "polish_sweeps", "PolishRun",
           "POLISH_GAP", "POLISH_PATIENCE", "POLISH_BUDGET", "GTH_BALANCE", "GTH_WIDE", "gth_dense",
           "state_levels"]

_TINY = np.finfo(float).tiny

#: :func:`gth_dense` eliminates in extended precision first where the class's rates span more than this
#: (largest over smallest): there a double elimination can lose normal probabilities to underflowed flows
#: that its balance check cannot see either
GTH_WIDE = 1e150

#: the balance error, in units of GTH's entrywise estimate, above which a GTH answer shows that its
#: elimination left the double range (:func:`gth_dense`): an answer within the estimate balances to twice it
#: plus the check's own round-off (at most :math:`2(n+1)u`, below the estimate from two states on)
GTH_BALANCE = 3.0


def start_vector(op, support, x0):
    """The first iterate of a stationary iteration on ``support`` (owned part, summing to one): ``x0``
    restricted to the class and normalised, or uniform on it (``x0`` None)."""
    if x0 is None:
        x = support.astype(float)
        return x / op.allsum(float(x.sum()))
    x = np.array(x0, dtype=float)
    if x.shape != (op.n,) or (x < 0).any() or not x.sum() > 0:
        raise ValueError(f"x0: expected a non-negative vector of shape ({op.n},)")
    x = np.where(support, x[op.start:op.stop], 0.0)
    tot = op.allsum(float(x.sum()))
    if not tot > 0:
        raise ValueError("x0: no mass on the closed class")
    return x / tot


class Stop:
    """The stopping rule of the stationary iterations: normwise, then component-wise.

    An iteration is converged in norm when ``||x Q||_1 / (sum(x) max|q_ii|) <= tol``;
    it then goes on (for at most as many iterations again, plus 10) until the
    balance error is at most ``tail_tol`` too, so that where the method
    converges the small probabilities are right as well, and the grading says
    so when they are not.

    The rule may be checked sparsely (:func:`checked_sweeps`): :meth:`gap`
    predicts from the last two checks how many iterations may pass before the
    next, and :meth:`state` / :meth:`restore` let a block of iterations be
    replayed to find the first one where the rule's answer changed.

    With ``patience`` > 0 the iteration goes on past that point for as long
    as the balance error, or the number of states whose balance error exceeds
    ``tail_tol``, falls by at least 10 % over ``patience`` iterations (a
    method whose tail converges as a front, far behind the norm: the largest
    error rides on the front and stays put while the front moves on, so the
    count of the states it has not yet passed measures the progress; JSQ
    K=300, rho=0.4 by ``level_iad``: the largest error stalled at 0.56 after
    147 iterations, the count fell, and 270 iterations met ``tail_tol``).
    """

    def __init__(self, op, opts, patience: int = 0):
        self.op, self.opts = op, opts
        self.patience = int(patience)
        self.norm_it = None
        self.rel = np.inf
        self.bal = np.inf
        self._last = None          # (iteration, log distance to the target, phase) of the last check
        self._rate = None          # the log distance's fall per iteration between the last two checks
        self._tail = ()            # (iteration, balance error) of the checks past the normwise cap

    def __call__(self, it, x, r) -> bool:
        op = self.op
        g = op.allsum(np.array([np.abs(r).sum(), x.sum()]))
        self.rel = g[0] / (g[1] * op.qmax)
        self.bal = np.inf
        if not self.rel <= self.opts.tol:
            self._note(it, self.rel / self.opts.tol)
            return False
        if self.norm_it is None:
            self.norm_it = it
        self.bal = balance_error(op, x, r, floor=_TINY * g[1])   # x is normalised only every few steps
        self._note(it, self.bal / self.opts.tail_tol)
        if self.bal <= self.opts.tail_tol:
            return True
        if it < 2 * self.norm_it + 10:
            return False
        if not self.patience:
            return True
        bad = _unbalanced(op, x, r, _TINY * g[1], self.opts.tail_tol)
        self._tail = self._tail + ((it, self.bal, bad),)
        old = [(b, n) for i, b, n in self._tail if i <= it - self.patience]
        return bool(old) and not (self.bal <= 0.9 * old[-1][0] or bad <= 0.9 * old[-1][1])

    def _note(self, it, ratio):
        with np.errstate(divide="ignore", invalid="ignore"):
            d = float(np.log(ratio))
        prev, self._last = self._last, (it, d, self.norm_it)
        self._rate = None
        same_phase = prev is not None and prev[2] == self.norm_it and it > prev[0]
        if same_phase and np.isfinite(d) and np.isfinite(prev[1]):
            self._rate = (prev[1] - d) / (it - prev[0])

    def gap(self, it, most: int) -> int:
        """Iterations to run before the next check (1 to ``most``): half the number the
        geometric rate of the last two checks predicts are left before the rule's answer
        changes (``most`` when the measure does not fall), never past the iteration cap."""
        if self._last is None or self._last[0] != it or not np.isfinite(self._last[1]):
            return 1
        rate, d = self._rate, self._last[1]
        if rate is None:
            return 1
        left = d / rate if rate > 0 else np.inf
        if self.norm_it is not None and not self.patience:
            left = min(left, 2 * (2 * self.norm_it + 10 - it))    # halved below: lands before the cap
        return int(max(1, min(most, left // 2)))

    def state(self):
        return self.norm_it, self.rel, self.bal, self._last, self._rate, self._tail

    def restore(self, state):
        self.norm_it, self.rel, self.bal, self._last, self._rate, self._tail = state


def _unbalanced(op, x, r, floor, tol) -> int:
    """How many states (global) with ``x_j >= floor`` and an exit have ``|r_j| > tol x_j q_j``
    (the states :func:`ctmc.kernels.evidence.balance_error` finds above ``tol``)."""
    out = x * op.exit_rates
    ok = (x >= floor) & (out > 0)
    return int(op.allsum(float(np.count_nonzero(np.abs(r[ok]) > tol * out[ok]))))


#: the most iterations :func:`checked_sweeps` runs between two checks of the stopping rule
CHECK_GAP = 16


def checked_sweeps(step, x, check, stop, first: int, last: int, on_check=None, must_check=None,
                   most: int = CHECK_GAP):
    r"""Iterations ``first .. last`` of ``step(it, x)`` (in place), stopping where checking after each would.

    ``check(it, x)`` applies the stopping rule ``stop`` (:class:`Stop`) to the
    iterate; it costs a product with :math:`Q^T`, about one sweep. It is run
    every :math:`g` iterations, :math:`1 \le g \le` ``most``, :math:`g` half the
    iterations the measure's geometric rate predicts are left
    (:meth:`Stop.gap`), and at every ``it`` where ``must_check(it)``. When a
    check finds the rule's answer changed (converged in norm, or stopped), the
    block since the previous check is replayed from its saved iterate, checked
    after each iteration, so the iteration found is the first where the rule
    holds, as checking every iteration finds, unless the rule held within a
    block and then failed again by its end (the answer there still meets the
    rule: it only stops later). The iterations are deterministic, so the replay
    reproduces them bit for bit.

    ``on_check(it)`` runs after each check that does not stop; a non-None
    return ends the iterations with it. Returns ``(it, outcome)``: outcome
    True when the rule stopped at ``it``, False when ``step`` broke down
    (returned False) at ``it``, None when ``last`` was reached, else what
    ``on_check`` returned.
    """
    saved = x.copy()
    it = saved_it = first - 1
    saved_state = stop.state()
    gap = 1
    while it < last:
        target = min(it + gap, last)
        if must_check is not None:
            target = next((j for j in range(it + 1, target) if must_check(j)), target)
        while it < target:
            it += 1
            if not step(it, x):
                return it, False
        phase = stop.norm_it
        done = check(it, x)
        if (done or stop.norm_it != phase) and it - saved_it > 1:
            np.copyto(x, saved)                     # replay the block, checking each iteration
            stop.restore(saved_state)
            it = saved_it
            while True:
                it += 1
                step(it, x)
                done = check(it, x)
                if done or stop.norm_it != phase:
                    break
        if done:
            return it, True
        if on_check is not None:
            out = on_check(it)
            if out is not None:
                return it, out
        np.copyto(saved, x)
        saved_it, saved_state = it, stop.state()
        gap = stop.gap(it, most)
    return it, None


class Sweeper:
    """Gauss-Seidel / SOR sweeps over the owned block (compiled kernels, :mod:`ctmc._relax`);
    the other processes' blocks are taken from the previous sweep.

    Calling it sweeps ``Q^T x = 0`` on the set ``support`` and renormalises
    (the stationary iterations); :meth:`relax` sweeps the passage system
    ``(shift I - Q_XX) x = b`` (``transpose=False``) or its transpose on
    ``X = support``, without renormalising. ``order`` (a permutation of the
    owned states, optional) is the order of a forward sweep: the matrix is
    permuted once, the iterate on each sweep.
    """

    def __init__(self, op, support, shift: float = 0.0, transpose: bool = True, order=None):
        self.op, self.support = op, support
        self.ghosts = None
        self.order = None
        if order is not None:
            order = np.asarray(order, dtype=np.int64)
            m = op.stop - op.start
            # a permutation: m entries in range, each state once (a count, not a sort: 1e7 states)
            if order.shape != (m,) or (m and (order.min() < 0 or order.max() >= m
                                              or not (np.bincount(order, minlength=m) == 1).all())):
                raise ValueError(f"order: expected a permutation of the {m} owned states")
            self.order = order
        if (op.size == 1 and shift == 0 and transpose and bool(np.all(support)) and op.n > 1
                and bool(np.all(op.exit_rates > 0))):
            # the whole chain on one process: R^T - diag(q) is Q^T itself (every diagonal entry
            # stored, none zero): sweep its own rows, the same terms in the same order, no copy
            self.local = one_index_type(self._ordered(op.generator_rows(True)))
            self._zero = np.zeros(op.n)
            return
        A = op.local_rows(transpose=transpose).tocsr()     # rates R (or R^T): owned rows, global columns
        keep = support.astype(float)
        full_support = op.gather(keep, "all") if op.size > 1 else keep
        A = (sp.diags(keep) @ A @ sp.diags(full_support)).tocsr()
        # R_XX - diag(shift + q) on the owned block (unit rows outside the set keep x = 0 there)
        local = (A[:, op.start:op.stop] - sp.diags(np.where(support, float(shift) + op.exit_rates, -1.0))).tocsr()
        local = self._ordered(local)
        local.sort_indices()
        local.data = np.ascontiguousarray(local.data, dtype=float)
        self.local = one_index_type(local)                 # converted once, not on every sweep
        self._zero = np.zeros(local.shape[0])              # the right-hand side of Q^T x = 0
        if op.size > 1:
            # the other blocks' columns: the entries of A whose column is not owned, taken by
            # masking A's stored entries (a column assignment on A would densify it)
            off = (A.indices < op.start) | (A.indices >= op.stop)
            g = sp.csr_matrix((np.where(off, A.data, 0.0), A.indices, A.indptr), shape=A.shape)
            g.eliminate_zeros()
            self.ghosts = g

    def _ordered(self, A):
        """``A`` (owned rows and columns) with rows and columns in sweep order."""
        if self.order is None:
            return A
        A = sp.csr_matrix(A)[self.order][:, self.order].tocsr()
        A.sort_indices()
        return A

    def __call__(self, x, omega=1.0, direction="forward"):
        """One sweep on ``x`` (owned, contiguous), in place; then ``x`` is renormalised.

        Returns False when the iterate stopped being a positive finite vector.
        """
        self.relax(x, None, omega, direction)
        s = self.op.allsum(float(x.sum()))
        if not np.isfinite(s) or s <= 0:
            return False
        x /= s
        return True

    def relax(self, x, b=None, omega=1.0, direction="forward"):
        """One sweep on ``(shift I - Q_XX) x = b`` (owned parts; ``b = None``: 0), ``x`` in place."""
        op = self.op
        if self.ghosts is not None:
            rhs = (np.zeros_like(x) if b is None else -np.where(self.support, b, 0.0))
            rhs -= self.ghosts @ op.gather(x, "all")
        else:
            rhs = self._zero if b is None else -np.where(self.support, b, 0.0)
        if self.order is None:
            sweep(self.local, x, rhs, omega, direction)
            return
        xo = np.ascontiguousarray(x[self.order])
        sweep(self.local, xo, np.ascontiguousarray(rhs[self.order]), omega, direction)
        x[self.order] = xo

    def matvec(self, xo) -> np.ndarray:
        """``local @ xo``: the product with the owned block in sweep order (one process)."""
        return self.local @ xo

    def relax_ordered(self, xo, rhs, direction="forward", omega=1.0):
        """One sweep on ``xo``, an iterate already in sweep order (``order``), with the right-hand
        side ``rhs`` in that order, in place; one process only (no other blocks to take)."""
        if self.ghosts is not None:
            raise ValueError("relax_ordered: a distributed sweep takes the other blocks; use relax")
        sweep(self.local, xo, rhs, omega, direction)


class RowSweeper:
    r"""Symmetric Gauss-Seidel sweeps of :math:`Q^T x = 0` on the whole chain (one process) from
    :math:`Q`'s own rows: no :math:`Q^T` (a second copy of the matrix), two vectors instead.

    A sweep on :math:`Q^T` reads column :math:`j` of :math:`Q` to update :math:`x_j`; here each row
    :math:`i`, once swept, scatters its terms :math:`q_{ik} x_i` into the columns swept after it, and
    the terms of the rows swept after :math:`j` come from the sweep before, in the other direction
    (the compiled kernel ``gst``). The updates are a Gauss-Seidel sweep's, each column's terms summed in
    another order (equal to round-off). The terms the forward sweep reads are the backward sweep's:
    :meth:`invalidate` after ``x`` is changed between two calls (the first call sets them up).
    Calling it runs a forward and a backward sweep and renormalises ``x`` (in place); False when the
    iterate stopped being a positive finite vector. :meth:`fits` says where it applies (the compiled
    kernels built, the whole chain the class, every state with an exit, ``Q``'s rows sorted, no duplicates).
    """

    def __init__(self, op):
        self.op, self.Q = op, one_index_type(op.generator_rows(False))
        if not self.Q.has_canonical_format:
            raise ValueError("RowSweeper: Q's rows must be sorted, without duplicates (scipy's sum_duplicates)")
        self._q = np.ascontiguousarray(op.exit_rates, dtype=float)   # (minus Q's diagonal, to the bit)
        self._ext = extension()
        n = op.n
        self._ahead, self._behind = np.empty(n), np.empty(n)   # the forward sweep's terms, the backward's
        self._zero = np.empty(0)                               # (the right-hand side 0: no vector of zeros)
        self._fresh = False

    @staticmethod
    def fits(op, support) -> bool:
        return (extension() is not None and hasattr(extension(), "gst") and op.size == 1 and op.n > 1
                and bool(np.all(support)) and bool(np.all(op.exit_rates > 0))
                and bool(op.generator_rows(False).has_canonical_format))    # (the kernel's rows: sorted)

    def invalidate(self):
        """``x`` was changed since the last call: the terms are made again from it."""
        self._fresh = False

    def _gst(self, x, fill, read, backward, scale=1.0, init=False):
        Q = self.Q
        self._ext.gst(Q.indptr, Q.indices, Q.data, x, self._zero, fill, read, self._q, float(scale), backward,
                      init)

    def __call__(self, x) -> bool:
        if not self._fresh:                      # the backward terms of x as it stands; the forward's zero
            self._gst(x, self._behind, self._ahead, False, init=True)
            self._ahead.fill(0.0)
            self._scale = 1.0
        # (each sweep zeroes the terms it reads: the next one's to fill; the backward terms are divided by
        # the renormalisation as they are read, the numbers of dividing them first)
        self._gst(x, self._ahead, self._behind, False, self._scale)
        self._gst(x, self._behind, self._ahead, True)
        s = float(x.sum())
        self._fresh = False
        if not np.isfinite(s) or s <= 0:
            return False
        x /= s
        self._scale, self._fresh = s, True
        return True


def copy_plentiful(op, vectors: float = plan.POLISH_COPY_VECTORS) -> bool:
    """Whether a second matrix of ``Q``'s size (``Q^T`` for the polish, ``Q`` in level order for
    :class:`~ctmc.kernels.levels.LevelSystem`) may be made, ``vectors`` float64 vectors of the states held
    beside it (:func:`ctmc.kernels.plan.copy_fits`: at most :data:`~ctmc.kernels.plan.COPY_SHARE` of the
    memory at hand, :data:`~ctmc.kernels.plan.BUDGET_FRACTION` of the available, and the stage's peak within
    :data:`~ctmc.kernels.plan.PEAK_BYTES_PER_TRANSITION`, the rule of the bound's thread): there the faster
    route with the copy is kept, elsewhere the sweeps read ``Q``'s own rows (tandem: 16.6 bytes a transition
    less; a polish sweep 1.2 times as dear, a level cycle 4)."""
    Q = op.generator_rows(False)
    nbytes = Q.data.nbytes + Q.indices.nbytes + Q.indptr.nbytes
    return plan.copy_fits(op.n, Q.nnz, nbytes, vectors, plan.BUDGET_FRACTION * available_memory())


def polish_pair(op, support, x, levels=None):
    """The step of the stationary polish on ``x`` (owned, in place) for :func:`polish_sweeps`: ``levels``
    (a :class:`~ctmc.kernels.levels.PolishLevels`, optional: its aggregation first), then a forward and a
    backward sweep, renormalised after the backward one only (the law is scale-free); False when the
    iterate broke down. The sweeps read ``Q``'s rows where :meth:`RowSweeper.fits` and memory is not
    plentiful (:func:`copy_plentiful`; no ``Q^T`` beside ``Q``: 16.6 bytes a transition on tandem), else
    ``Q^T``'s (:class:`Sweeper`)."""
    rows = RowSweeper(op) if RowSweeper.fits(op, support) and not copy_plentiful(op) else None
    sweeper = Sweeper(op, support) if rows is None else None

    def pair():
        if levels is not None:
            steps = levels.steps
            levels(x)
            if rows is not None and levels.steps != steps:
                rows.invalidate()
        if rows is not None:
            return rows(x)
        sweeper.relax(x, None, 1.0, "forward")
        return sweeper(x, 1.0, "backward")
    return pair


def ordered_sweeper(op, members, order, transpose: bool = False):
    """Gauss-Seidel sweeps on ``Q_XX`` (``transpose``: ``Q^T_XX``) with the owned members of ``X``
    (``members``) in ``order`` (local numbers, each member once): an object with
    ``relax_ordered(xo, rhs, direction)`` (solving ``A xo = rhs`` in place, ``A`` that matrix in
    order), ``matvec(xo)`` and ``nx`` (the members, first in ``xo``), ``size`` (the length of
    ``xo``). The backend's own (:meth:`ctmc.backends.base.Operator.ordered_sweeps`: PETSc's
    ``MatSOR`` on every process's block), else a :class:`Sweeper` on one process, the other owned
    states after the members as unit rows (``xo`` zero there); untransposed, a copy of ``Q_XX`` in that
    order where memory is plentiful (:func:`copy_plentiful`, :class:`OrderedCopySweeps`: the members only),
    else :class:`RowOrderSweeps` on ``Q``'s own rows."""
    made = op.ordered_sweeps(members, order, transpose)
    if made is not None:
        return made
    if op.size != 1:
        raise ValueError(f"ordered_sweeper: the {op.backend} backend has no distributed sweeps")
    members = np.asarray(members, dtype=bool)
    if not transpose:
        copied = copy_plentiful(op, plan.LEVEL_COPY_VECTORS)
        return (OrderedCopySweeps if copied else RowOrderSweeps)(op, order)
    sw = Sweeper(op, members, 0.0, transpose=transpose,
                 order=np.concatenate([np.asarray(order, dtype=np.int64), np.flatnonzero(~members)]))
    sw.nx, sw.size = int(np.count_nonzero(members)), op.stop - op.start
    return sw


#: rows of the product an ordered sweeper's ``matvec_blocks`` gives at a time (the level system's residual is
#: reduced block by block: its sums by level and its largest entry, no vector of it)
MATVEC_BLOCK = 1 << 16


class OrderedCopySweeps:
    """Gauss-Seidel sweeps of ``Q_XX`` on a copy of it with ``X`` in ``order`` (one process): the interface of
    :func:`ordered_sweeper`, ``xo`` the members in order. The copy is made by rows then columns (no masked
    copy of the whole of ``Q``: that peaked at 117 bytes a transition on tandem c=511)."""

    def __init__(self, op, order):
        rows = np.asarray(order, dtype=np.int64)
        self.A = one_index_type(op.generator_rows(False))[rows][:, rows].tocsr()
        self.A.sort_indices()
        self.nx = self.size = int(rows.size)

    def relax_ordered(self, xo, rhs, direction="forward", omega=1.0):
        sweep(self.A, xo, rhs, omega, direction)

    def matvec(self, xo) -> np.ndarray:
        return product(self.A, xo)

    def matvec_blocks(self, xo):
        """``(part, (A xo)[part])`` a block of :data:`MATVEC_BLOCK` rows at a time (no vector of the product)."""
        for part in blocks(self.nx, MATVEC_BLOCK):
            yield part, product_rows(self.A, xo, part.start, part.stop)


class RowOrderSweeps:
    """Gauss-Seidel sweeps of ``Q_XX`` from ``Q``'s own rows taken in ``order`` (the members of ``X``, one
    process; the compiled ``sweep_rows``, pyamg's indexed sweep without it): no copy of the matrix, the
    interface of :func:`ordered_sweeper` (``xo`` the members in ``order``), one vector of the chain's
    states beside, the iterate (zero off ``X``, where ``Q``'s entries then add nothing); the right-hand side
    is read in order (``listed``) and the product made over the listed rows
    (:func:`ctmc._relax.product_listed`): no vector of every state for either. ``order`` is kept as given,
    int32 or int64. A sweep is about 4 times as dear as on a copy in order: the rows are read out of their
    order."""

    def __init__(self, op, order):
        self.Q = one_index_type(op.generator_rows(False))
        rows = np.asarray(order)
        self.rows = rows if rows.dtype in (np.int32, np.int64) else rows.astype(np.int64)
        self.nx = self.size = int(self.rows.size)
        self._n, self._x = op.n, None                         # (made on first use: not held by a set-up)

    def _full(self, xo):
        if self._x is None:
            self._x = np.zeros(self._n)
        self._x[self.rows] = xo
        return self._x

    def relax_ordered(self, xo, rhs, direction="forward", omega=1.0):
        if omega != 1.0:
            raise ValueError("RowOrderSweeps: omega = 1 only")
        x = self._full(xo)
        sweep_rows(self.Q, x, rhs, self.rows, direction, listed=True)
        np.take(x, self.rows, out=xo, mode="clip")            # (the rows are in range: no buffered copy)

    def matvec(self, xo) -> np.ndarray:
        return product_listed(self.Q, self._full(xo), self.rows)

    def matvec_blocks(self, xo):
        """``(part, (A xo)[part])`` a block of :data:`MATVEC_BLOCK` rows at a time (no vector of the product)."""
        x = self._full(xo)
        for part in blocks(self.nx, MATVEC_BLOCK):
            yield part, product_listed(self.Q, x, self.rows[part])

    def release(self):
        """Free the vector of the chain's states (made again on the next use): after a solve."""
        self._x = None


#: the default budget of symmetric sweeps of the stationary polish (option ``polish``). The sweeps a
#: tail needs grow with the depth the correction travels until that depth reaches the underflow: on
#: tandem networks 575 (c=255), 1125 (c=511), 1900 (c=1023), and at c=4095 2000 were not enough
#: (its tail ends near sm=950, where pi reaches 1e-308); the stall rule ends a polish that stops
#: progressing long before such a budget.
POLISH_BUDGET = 5000
#: the most symmetric sweeps :func:`polish_sweeps` runs between two measurements of the balance error
POLISH_GAP = 25
#: :func:`polish_sweeps` gives up when the balance error has fallen by less than 10 % over this many sweeps
POLISH_PATIENCE = 100
#: :func:`polish_sweeps` sweeps on to ``tail_tol`` times this: a balance error at ``tail_tol`` leaves
#: probabilities 10-20 times ``tail_tol`` off relatively (measured on supermarket and product-form chains)
POLISH_MARGIN = 0.01


@dataclass(frozen=True)
class PolishRun:
    """How a polish (:func:`polish_sweeps`) ended.

    Attributes
    ----------
    sweeps : int
        Symmetric sweeps run.
    balance : float
        The balance error last measured (after ``sweeps`` sweeps).
    outcome : str
        ``"met"`` (``balance <= tail_tol``), ``"stalled"`` (fell by less than
        10 % over :data:`POLISH_PATIENCE` sweeps), ``"budget"`` (the budget
        spent first) or ``"breakdown"`` (the iterate stopped being a positive
        finite vector).
    """

    sweeps: int
    balance: float
    outcome: str

    @property
    def met(self) -> bool:
        return self.outcome == "met"

    def describe(self, tail_tol: float) -> str:
        """One line: what the polish did and whether the tail criterion holds (``info["polish_stop"]``)."""
        head = f"{self.sweeps} symmetric sweeps, balance error {self.balance:.2e}"
        return {"met": f"{head} <= tail_tol {tail_tol:.1e}",
                "stalled": f"{head} > tail_tol {tail_tol:.1e}: fell by less than 10 % over the last "
                           f"{POLISH_PATIENCE} sweeps",
                "budget": f"{head} > tail_tol {tail_tol:.1e}: the sweep budget (option polish) spent",
                "breakdown": f"{head}: the iterate broke down"}[self.outcome]


def polish_sweeps(sweep_pair, measure, budget: int, tail_tol: float) -> PolishRun:
    r"""Symmetric sweeps until the balance error ``measure()`` meets ``tail_tol`` with the margin
    :data:`POLISH_MARGIN`, stalls, or the budget is spent (``met``: it is within ``tail_tol`` at the end).

    ``sweep_pair()`` runs one forward and one backward sweep (False: the
    iterate broke down); ``measure()`` costs about one product with
    :math:`Q^T`. The error is measured after the first sweep, then after
    ``g`` sweeps, :math:`1 \le g \le` :data:`POLISH_GAP`: half the sweeps the geometric rate between the last
    two measurements predicts are left before the target is met (the gap
    when it does not fall), so the sweeps stop within a few of the first one
    that meets it, while a front that travels the chain for hundreds of
    sweeps with the error flat is measured every :data:`POLISH_GAP`. The
    loop also stops when the error has fallen by less than 10 % over the
    last :data:`POLISH_PATIENCE` sweeps, or after ``budget`` sweeps.
    Returns a :class:`PolishRun` (whether ``tail_tol`` was met, and why
    not); one rule for stationary laws and passage systems.
    """
    history = [(0, measure())]            # (sweeps, balance error) at each measurement
    k, target = 0, tail_tol * POLISH_MARGIN

    def ended(outcome):
        return PolishRun(k, history[-1][1], "met" if history[-1][1] <= tail_tol else outcome)

    while True:
        bal = history[-1][1]
        if bal <= target:
            return ended("met")
        if k >= budget:
            return ended("budget")
        gap = 1                           # the first measurement after one sweep: a rate to predict from
        if len(history) > 1:
            gap = POLISH_GAP
            (k0, b0), (k1, b1) = history[-2], history[-1]
            if 0 < b1 < b0:
                left = np.log(b1 / target) / (np.log(b0 / b1) / (k1 - k0))
                gap = int(min(POLISH_GAP, max(1.0, left / 2)))
        for _ in range(min(gap, budget - k)):
            if not sweep_pair():
                return PolishRun(k, history[-1][1], "breakdown")
            k += 1
        history.append((k, measure()))
        old = [b for j, b in history if j <= k - POLISH_PATIENCE]
        if old and not history[-1][1] <= 0.9 * old[-1] and not history[-1][1] <= target:
            return ended("stalled")


def gth_dense(op, support, info=None):
    r"""The stationary law of the class ``support`` by dense GTH elimination (gathered on every process).

    GTH's estimate (:func:`~ctmc.kernels.evidence.gth_bound`, :math:`\varepsilon = 2n^2u` entrywise) rests
    on an elimination without under- or overflow. An answer within it balances to :math:`2\varepsilon` plus
    the round-off of the check, so a balance error above :data:`GTH_BALANCE` :math:`\varepsilon` shows that
    the elimination left the double range (rates spanning beyond it: 1e160 and 1e-170 into one state, whose
    quotient underflows), as does a zero pivot on the class (irreducible by construction). Then the
    elimination is redone in extended precision where ``numpy.longdouble`` has a wider range
    (:func:`ctmc.linalg.gth_solve`, ``info["gth_precision"] = "extended"``); an answer that still does not
    balance is ``INACCURATE``, the reason in ``info["gth_range"]``.

    Returns ``(x owned or None, 0, status, message)``, a stationary method's result.
    """
    info = {} if info is None else info
    idx = np.flatnonzero(op.gather(support.astype(float), "all") > 0.5)
    A = op.gather_rows(support)[:, idx].toarray()
    limit = GTH_BALANCE * gth_bound(idx.size)
    xs, bal, used = None, np.inf, False
    pos = A[A > 0]
    # rates spanning beyond GTH_WIDE: flows of normal probabilities may underflow in doubles, where neither
    # the elimination nor its check sees them (a leaf of 1e-250 computed 0, graded success): extended first
    wide = pos.size > 0 and float(pos.max()) > GTH_WIDE * float(pos.min())
    for extended in ((True, False) if wide else (False, True)) if EXTENDED_RANGE else (False,):
        try:
            y = gth_solve(A, extended) if idx.size > 1 else np.ones(1)
        except ValueError:              # a zero pivot: the class is irreducible, so an underflow
            continue
        b = _gth_balance(A, y) if np.all(np.isfinite(y)) else np.inf
        if xs is None or b < bal:
            xs, bal, used = y, b, extended
        if bal <= limit:
            break
    if used:
        info["gth_precision"] = "extended"
    if xs is None or not np.all(np.isfinite(xs)):
        return None, 0, Status.BREAKDOWN, "GTH produced non-finite values or a zero pivot (rates spanning > 1e300?)"
    x = np.zeros(op.stop - op.start)
    own = (idx >= op.start) & (idx < op.stop)
    x[idx[own] - op.start] = xs[own]             # (rounded to doubles: an extended answer's tail may underflow)
    if not bal <= limit:
        info["gth_range"] = (f"balance error {bal:.1e} above GTH's round-off {limit:.1e}: the elimination left "
                             "the double range (rates spanning beyond it); no error estimate holds")
        return x, 0, Status.INACCURATE, "GTH elimination: " + info["gth_range"]
    return x, 0, Status.SUCCESS, "GTH elimination" + (" in extended precision" if used else "")


def _gth_balance(A, x, block: int = 256) -> float:
    """The balance error of GTH's answer ``x`` on the class's dense rates ``A`` (zero diagonal), computed in the
    precision of ``x`` by blocks of rows: in extended precision no flow under- or overflows where a double's
    would (a law with 1e-320 beside 1e-160 is checked on numbers, not on denormal remnants)."""
    inflow, out, leaves = (np.zeros(x.size, dtype=x.dtype) for _ in range(3))
    for s in range(0, x.size, block):
        rows = A[s:s + block].astype(x.dtype, copy=False)
        inflow += x[s:s + block] @ rows
        leaves[s:s + block] = rows.sum(axis=1)
        out[s:s + block] = x[s:s + block] * leaves[s:s + block]
    tiny = np.finfo(x.dtype).tiny
    # a normal probability whose outflow is not a normal number (x q_i underflowed) cannot be checked in
    # this precision: not balanced (inf), so the class is redone in extended precision
    if np.any((x >= tiny) & (leaves > 0) & (out < tiny)):
        return np.inf
    ok = (out > 0) & (x >= tiny)
    return float(np.max(np.abs(inflow[ok] - out[ok]) / out[ok], initial=0.0))


def state_levels(op, spec, name: str = "levels") -> np.ndarray:
    """The level of every state (replicated), from a variable name, an expression or an array
    (errors name the option ``name``)."""
    if isinstance(spec, str) or isinstance(spec, Expr):
        if op.states is None:
            raise ValueError(f"{name}: this chain has no state table; give one integer per state")
        env = op.states.as_dict()
        lev = env[spec] if isinstance(spec, str) and spec in env else None
        if lev is None:
            if isinstance(spec, str):
                raise ValueError(f"{name}: no state variable {spec!r}; variables are {list(env)}")
            lev = spec.evaluate(env)
    else:
        lev = spec
    lev = np.asarray(lev)
    if lev.shape != (op.n,) or lev.dtype.kind not in "iub":
        raise ValueError(f"{name}: expected one integer per state ({op.n}), got shape {lev.shape} and "
                         f"dtype {lev.dtype}")
    return lev.astype(np.int64) - int(lev.min())


