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

1. a Gauss-Seidel sweep on :math:`M` in increasing level order (on a copy of :math:`Q_{XX}` in that
   order where memory is plentiful, :func:`~ctmc.kernels.sweeps.copy_plentiful`; else on :math:`Q`'s own
   rows taken in that order, :func:`ctmc._relax.sweep_rows`),
2. a coarse correction on the levels: the residual :math:`r = b - Mx` is
   restricted by the weights :math:`s_i = w_i / W_L` (:math:`w_i = 1/q_i` by default,
   :math:`W_L` their sum on the level, so :math:`s^T r` is the mean on the level of the
   point corrections :math:`r_i/q_i`), the correction is constant on each level, and the coarse
   operator is the Galerkin product :math:`A_c = T^T\mathrm{diag}(s) M T`
   (as in :mod:`ctmc.multigrid`, on the transposed side), :math:`T` the 0/1 level matrix. :math:`A_c` is
   the (negated, pinned) generator of the birth-death chain of the levels with
   rates averaged by :math:`s`: tridiagonal, a nonsingular M-matrix, solved exactly
   in :math:`O(\text{levels})`,
3. a Gauss-Seidel sweep in decreasing level order.

Distributed (PETSc), the sweeps are ``MatSOR``'s local sweeps on each process's block, its states in
level order (:func:`ctmc.kernels.sweeps.ordered_sweeper`), the other blocks' entries from before the
sweep; the restriction is summed over the processes, the levels' system solved on each (the same), and
the correction added to the owned states: the algorithm is the same, written once.

It stops when :math:`\|b - Mx\|_\infty \le` ``rtol`` :math:`\|b\|_\infty`. The solver
is only a means: :func:`~ctmc.kernels.evidence.return_time_bound` recomputes the
residual of what it returns and proves the bound from it, whatever solved it.

The polish along the levels
---------------------------
The same levels carry the slow part of the stationary law's tail: the polish of a Krylov answer
(:func:`ctmc.kernels.sweeps.polish_sweeps`) corrects it state by state, so a correction crosses a
level a sweep or so (tandem networks: 575 symmetric sweeps at c = 255, 1900 at c = 1023).
:class:`LevelAggregation` rescales the iterate level by level to the law of its aggregated
birth-death chain before each symmetric sweep (iterative aggregation-disaggregation, Takahashi
1975; :func:`level_factors`, in logs, so a tail of :math:`10^{-250}` keeps its relative digits): the
level masses are right after one step, and the sweeps are left the profile within the levels. At
the stationary law the factors are 1: it is a fixed point, and the polish's stopping rule is
unchanged.
"""
from __future__ import annotations

import weakref
from functools import partial

import numpy as np
from scipy.linalg import solve_banded

from .._util import amax, block_size, blocks, trim_heap
from ..backends.base import SolveReport
from ..backends.csr import row_blocks
from ..results import Status
from .._relax import extension, one_index_type, product
from .sweeps import ordered_sweeper

__all__ = ["LevelSystem", "LEVEL_RTOL", "LEVEL_CYCLES", "LEVEL_MIN", "LEVEL_PROBE", "level_chain",
           "structured_levels", "return_time_systems", "csr_entries", "LEVEL_MASS_FLOOR", "level_factors",
           "level_flows", "LevelAggregation", "POLISH_LEVEL_GAP", "POLISH_LEVEL_START",
           "PolishLevels", "polish_levels", "LEVEL_LIVE", "live_states", "live_order", "fed_states",
           "run_sums", "LEVEL_IAD_TAIL_GAP", "level_steps", "OrderedStates", "by_level", "FrozenBorder",
           "level_sums"]

#: the relative residual a solve of :class:`LevelSystem` stops at (the bound needs a residual of
#: 0.1 on ``M m = 1``; :func:`~ctmc.kernels.evidence.return_time_bound` refines on its own)
LEVEL_RTOL = 1e-2
#: cycles of one solve at most
LEVEL_CYCLES = 500
#: cycles of a solve on levels found by :func:`structured_levels` (tandem networks: 15 at c = 255 and
#: 1023): a wrong guess costs little before the Krylov route takes over
LEVEL_PROBE = 60
#: the fewest levels a state variable needs for :func:`structured_levels` to offer it: a shorter
#: level chain is crossed by a Krylov solve in a few iterations
LEVEL_MIN = 32


#: the levels ``level_iad`` rescales: the leading run whose mass is at least this fraction of the total
#: (beyond, a level law's tail underflows: JSQ rho = 0.4 at K = 600 has masses down to 0.4^1200 = 1e-478;
#: the birth-death chain is cut there, which keeps its ratios, and the sweeps alone go on below)
LEVEL_MASS_FLOOR = 1e-280


#: the probability (of a start summing to one) from which ``level_iad`` sweeps a state: a state below it
#: whose neighbours are all below it too is left as it starts (:func:`live_states`). It feeds a state the
#: balance is checked on (from 2.2e-308, the smallest normal double) at most 1e-11 of its flows, as the
#: floor of JSQ's start (1e-318, 6.6e-320 once normalised) always did under the sweeps; that floor is
#: 50 / 67 / 80 % of the states at K = 2000 / 3000 / 4500, rho = 0.95. At 1e-6 of 2.2e-308 the frozen
#: states fed the smallest normal probabilities 2.5e-6 off at K = 600, rho = 0.4 (at 1e-9: 2.5e-9)
LEVEL_LIVE = np.finfo(float).tiny * 1e-11


def live_states(R, x, floor: float = LEVEL_LIVE):
    r"""The states at least ``floor`` in ``x`` and their neighbours (``R``: the rates, CSR, rows from).

    >>> import scipy.sparse as sp
    >>> R = sp.csr_matrix(np.diag([1.0, 1.0, 1.0], 1) + np.diag([1.0, 1.0, 1.0], -1))
    >>> live_states(R, np.array([1.0, 1e-320, 1e-320, 1e-320]), 1e-310).tolist()
    [True, True, False, False]
    """
    big = (np.asarray(x) >= floor).astype(float)
    return (big > 0) | (R @ big > 0) | (R.T @ big > 0)


def fed_states(op, x, states, floor: float = LEVEL_LIVE) -> int:
    r"""How many of ``states`` a Gauss-Seidel update would lift to ``floor`` of the sum of ``x`` (a law of
    ``op``, one process): their value in-flow / exit rate, :math:`(r_j + x_j q_j) / q_j`, :math:`r = xQ`.
    Left as they started, such states would be fed far more than they give back, below the range the
    balance is checked on (a start that left out probabilities the law has there).

    >>> import ctmc
    >>> from ctmc.backends import operator_for
    >>> op = operator_for(ctmc.CTMC([[-1.0, 1.0, 0.0], [1.0, -2.0, 1.0], [0.0, 1.0, -1.0]]), "scipy")
    >>> x = np.array([1.0, 1e-320, 1e-320])         # state 1 is fed by state 0, state 2 by state 1 only
    >>> fed_states(op, x, [1]), fed_states(op, x, [2])
    (1, 0)
    """
    r, q = op.apply(x, transpose=True)[states], op.exit_rates[states]
    return _lifted(r + x[states] * q, q, float(x.sum()), floor)


def _lifted(inflow, q, total: float, floor: float = LEVEL_LIVE) -> int:
    """How many states an update ``inflow / q`` lifts to ``floor`` of ``total`` (the rule of
    :func:`fed_states` and :class:`FrozenBorder`)."""
    return int(np.count_nonzero(inflow >= floor * total * q))


class FrozenBorder:
    """The states ``level_iad`` leaves out of its sweeps (positions ``live:swept`` of its order) that a swept
    state feeds, and whether a Gauss-Seidel update would lift one to :data:`LEVEL_LIVE` of the sum of the
    iterate (:func:`fed_states` on them; the others are fed by left-out states only, which do not change).
    ``A``: ``Q^T`` in that order (its rows the in-flows), ``q`` the exit rates in that order. Asked at every
    check of the stop: a start that left out what the law needs is swept whole at once, not after the
    swept part failed (the normwise rule cannot hold while the left-out states take mass)."""

    def __init__(self, A, q, live: int, swept: int):
        ptr = A.indptr
        counts = np.diff(ptr[live:swept + 1])
        fed = np.repeat(np.arange(swept - live), counts)[A.indices[ptr[live]:ptr[swept]] < live]
        self.at = live + np.unique(fed)
        self.A, self.q = A[self.at], q[self.at]

    def __call__(self, v) -> bool:
        inflow = product(self.A, v) + v[self.at] * self.q        # (A's rows hold the diagonal -q)
        return _lifted(inflow, self.q, float(v.sum())) > 0


class OrderedStates:
    """What the stopping rule (:class:`~ctmc.kernels.sweeps.Stop`) reads of a one-process operator ``op``,
    for an iterate kept in another order: ``exit_rates`` ``q`` in that order (of the leading states
    it checks), ``qmax`` and the reductions of ``op``."""

    def __init__(self, op, q):
        self.exit_rates, self.qmax, self.allsum, self.allmax = q, op.qmax, op.allsum, op.allmax


def by_level(support, levels):
    """``(order, n)``: the states of ``support`` in level order (stable), and their number.

    >>> by_level(np.array([True, False, True, True]), np.array([2, 0, 1, 2]))[0].tolist()
    [2, 0, 3]
    """
    own = np.flatnonzero(support)
    order = own[np.argsort(np.asarray(levels)[own], kind="stable")]
    return order, order.size


def live_order(R, support, levels, x):
    """``(order, live)``: the states of ``support`` in level order, the ``live`` ones of
    :func:`live_states` (``R``, ``x``) first, then the others.

    >>> import scipy.sparse as sp
    >>> R = sp.csr_matrix(np.diag([1.0, 1.0, 1.0], 1) + np.diag([1.0, 1.0, 1.0], -1))
    >>> x = np.array([1e-320, 1e-320, 1e-300, 1.0])
    >>> order, live = live_order(R, np.ones(4, bool), np.array([3, 2, 1, 0]), x)
    >>> order.tolist(), live
    ([3, 2, 1, 0], 3)
    """
    keep = live_states(R, x) & support
    parts = [by_level(part, levels)[0] for part in (keep, support & ~keep)]
    return np.concatenate(parts), parts[0].size


#: once its normwise cap is met, ``level_iad`` (one process) rescales the levels before every this many
#: iterations only: the level law is then right to the norm and the far tail converges as a front
#: through the sweeps (JSQ K=1000, rho=0.95: 279 iterations and P_block 2.6e-12 off with a step every
#: 1, 8 or 32; none at all: 279 and 1.9e-11), a step costing half a sweep
LEVEL_IAD_TAIL_GAP = 8


def level_steps(lo: int, hi: int, norm_it) -> int:
    """The levels' steps ``level_iad`` takes in iterations ``lo + 1 .. hi``: each up to ``norm_it`` (the
    iteration that met the normwise cap; None: not met), then every :data:`LEVEL_IAD_TAIL_GAP`-th.

    >>> level_steps(0, 279, 23), level_steps(0, 20, None)
    (55, 20)
    """
    k = hi if norm_it is None else min(hi, norm_it)
    return k - lo + hi // LEVEL_IAD_TAIL_GAP - k // LEVEL_IAD_TAIL_GAP


def run_sums(v, counts):
    """The sums of ``v`` over consecutive runs of ``counts`` entries (0 for an empty run).

    >>> run_sums(np.arange(5.0), np.array([2, 0, 3, 0])).tolist()
    [1.0, 0.0, 9.0, 0.0]
    """
    out = np.zeros(len(counts))
    nz = counts > 0
    if nz.any():
        out[nz] = np.add.reduceat(v, (np.cumsum(counts) - counts)[nz])
    return out


def level_factors(X, A, D):
    r"""The factors that rescale each level of a level chain to the law of its aggregated birth-death chain.

    ``X``, ``A``, ``D``: per level :math:`L`, the mass :math:`X_L = \sum_{i \in L} x_i` of the iterate and
    its flows up and down, :math:`\sum_{i \in L} x_i\, \mathrm{up}_i` and :math:`\sum_{i \in L} x_i\,
    \mathrm{down}_i`. The birth-death chain with rates :math:`a_L = A_L / X_L`, :math:`d_L = D_L / X_L`
    has the law :math:`p_{L+1}/p_L = a_L / d_{L+1}` (in logs); level :math:`L` is multiplied by
    :math:`p_L \sum X / X_L` on the leading run of levels with :math:`X_L \ge` :data:`LEVEL_MASS_FLOOR`
    :math:`\sum X`, by 1 beyond (Takahashi 1975).

    >>> X = np.array([0.5, 0.3, 0.2]); A = np.array([1.0, 1.0, 0.0]) * X; D = np.array([0.0, 2.0, 2.0]) * X
    >>> (level_factors(X, A, D) * X).round(6).tolist()           # p = (4, 2, 1) / 7
    [0.571429, 0.285714, 0.142857]
    """
    tot = X.sum()
    ok = X >= LEVEL_MASS_FLOOR * tot
    k = X.size if ok.all() else int(np.argmin(ok))
    f = np.ones(X.size)
    if k < 2:
        return f
    X, a, dn = X[:k], A[:k] / X[:k], D[:k] / X[:k]
    with np.errstate(divide="ignore", invalid="ignore"):
        logp = np.concatenate([[0.0], np.cumsum(np.log(a[:-1]) - np.log(dn[1:]))])
    p = np.exp(logp - logp.max())
    f[:k] = p / p.sum() * X.sum() / X
    return f


class LevelSystem:
    """The return-time system ``M = -Q_XX`` on ``X`` solved by two-level cycles on the levels.

    Parameters
    ----------
    op : Operator
        The chain's operator (distributed: the sweeps are the backend's, :func:`~.sweeps.ordered_sweeper`,
        on each process's block in level order; the coarse system is summed over the processes).
    X : ndarray of bool
        The class without the pin (owned part).
    levels : ndarray of int
        The level of every state; every transition moves it by +-1.
    weights : ndarray, optional
        Non-negative weights of the states within their level (default :math:`1/q_i`: on tandem
        networks, levels ``sm``, 15 cycles at c = 255 and 1023, where the stationary law's weights
        needed 102 and 500+; 19-20 cycles on JSQ either way).
    rtol, maxiter : float, int
        The stop of a solve (:data:`LEVEL_RTOL`, :data:`LEVEL_CYCLES`).
    chain : tuple, optional
        The :func:`level_chain` of ``Q``, ``X``, ``levels`` and ``weights``, when already made
        (:func:`return_time_systems` reuses the one :func:`structured_levels` chose by).

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

    def __init__(self, op, X, levels, weights=None, rtol: float = LEVEL_RTOL, maxiter: int = LEVEL_CYCLES,
                 chain=None):
        self.op, self.rtol, self.maxiter = op, float(rtol), int(maxiter)
        X = np.asarray(X, dtype=bool)
        lev = np.asarray(levels)
        own = lev[op.start:op.stop]
        idx = np.flatnonzero(X)
        if op.n <= np.iinfo(np.int32).max:              # (the order and the sweeps' rows in 32 bits)
            idx = idx.astype(np.int32)
        self.idx = idx = idx[np.argsort(own[idx], kind="stable")]
        del own
        self.sweeper = ordered_sweeper(op, X, idx)          # Q_XX with X in level order
        found = chain if chain is not None else level_chain(
            op.generator_rows(False), X, lev, partial(_exit_weights, op) if weights is None else weights, op)
        if found is None:
            raise ValueError("levels: a transition moves the level by more than one")
        group, share, self.ab = found
        del found
        self.group = group[op.start + idx]                 # (non-decreasing: the states in level order)
        del group
        self.share = share[idx]
        del share
        self.info = {"levels": self.ab.shape[1], "processes": op.size}

    def _residual_blocks(self, x, rhs):
        """``(part, r[part])``, ``r = b - M x`` on the members (``rhs`` holds ``-b``: ``A x - rhs``), a block
        at a time where the sweeps give their product so (``matvec_blocks``: no vector of ``r``), else whole."""
        by_blocks = getattr(self.sweeper, "matvec_blocks", None)
        for part, r in (by_blocks(x) if by_blocks is not None
                        else [(slice(0, self.idx.size), self.sweeper.matvec(x)[:self.idx.size])]):
            yield part, np.subtract(r, rhs[part], out=r)

    def _coarse(self, x, rhs):
        """The coarse correction of ``x`` (in place) from its residual, taken block by block: its sums by
        level, the numbers of ``np.bincount`` of ``share r`` on the whole, then ``x += c[group]``."""
        nl, g = self.ab.shape[1], self.group
        rc = np.zeros(nl)
        for part, r in self._residual_blocks(x, rhs):
            _binsum(g[part], nl, np.multiply(r, self.share[part], out=r), out=rc)
        c = solve_banded((1, 1), self.ab, self.op.allsum(rc), check_finite=False)
        for part in _parts(g.size):
            x[part] += c[g[part]]

    def solve(self, b, transpose: bool = False):
        """``M x = b`` by two-level cycles: ``(x, SolveReport)`` (untransposed only; a collective)."""
        if transpose:
            raise NotImplementedError("LevelSystem solves M x = b only (the return times)")
        op, sw, nx = self.op, self.sweeper, self.idx.size
        release = getattr(op, "release", None)      # (Q^T, R, the exit rates: the cycles read none of them;
        if release is not None:                     # made again when next asked)
            release()
        trim_heap()
        rhs = np.zeros(sw.size)
        bo = rhs[:nx]                                # b on the members in order, then -b in its place:
        np.take(np.asarray(b, dtype=float), self.idx, out=bo, mode="clip")      # (no vector of b beside)
        np.negative(bo, out=bo)                      # the sweeps solve Q_XX x = -b
        x = np.zeros(sw.size)
        scale = op.allmax(amax(bo))
        status, it, rel = Status.MAX_ITERATIONS, 0, np.inf
        if scale == 0:
            status = Status.SUCCESS
        for it in range(1, self.maxiter + 1 if scale > 0 else 1):
            sw.relax_ordered(x, rhs, "forward")
            try:
                self._coarse(x, rhs)
            except (ValueError, np.linalg.LinAlgError):     # a singular level chain (rates of 1e-55 to 10)
                status = Status.BREAKDOWN
                break
            sw.relax_ordered(x, rhs, "backward")
            top = [amax(r) for _, r in self._residual_blocks(x, rhs)]       # (np.max keeps a NaN)
            rel = op.allmax(float(np.max(top, initial=0.0))) / scale
            if not np.isfinite(rel):
                status = Status.BREAKDOWN
                break
            if rel <= self.rtol:
                status = Status.SUCCESS
                break
        del rhs, bo
        release = getattr(sw, "release", None)          # (the sweeps' work vectors: not held past the solve,
        if release is not None:                         # while the bound checks its answer)
            release()
        out = np.zeros(op.stop - op.start)
        out[self.idx] = x[:nx]
        return out, SolveReport(status, f"two-level cycles on the levels, residual {rel:.1e}", it,
                                {"relative_residual": rel})

    def close(self):
        """Free the backend's sweeps (PETSc's matrix; nothing on one process)."""
        close = getattr(self.sweeper, "close", None)
        if close is not None:
            close()


def _exit_weights(op):
    """The default weights of the states within their level: :math:`1/q_i` (inf where :math:`q_i = 0`,
    which :func:`level_chain` treats as no weight). Passed as ``partial(_exit_weights, op)``: made when
    :func:`level_chain` needs them, in the vector of its shares (not held beside it)."""
    with np.errstate(divide="ignore"):
        return 1.0 / op.exit_rates


def _parts(n: int):
    """Slices of ``range(n)``, :data:`_CHUNK` entries at most at a time (:func:`ctmc._util.blocks`)."""
    return blocks(n, _CHUNK)


def _binsum(index, n: int, *factors, offset: int = 0, out=None):
    r"""``np.bincount(index + offset, weights=prod(factors), minlength=n)``, a chunk at a time: no vector of
    the bins in ``intp`` (``bincount`` converts an int32 ``index`` whole) or of the weights' product. Each
    bin is summed in the order of ``index`` from 0.0 (``np.add.at``), as ``bincount`` sums it: the same numbers.

    >>> g, w = np.array([1, 0, 1, 2], dtype=np.int32), np.array([0.1, 0.2, 0.3, 0.4])
    >>> bool(np.array_equal(_binsum(g, 4, w, w), np.bincount(g, weights=w * w, minlength=4)))
    True
    """
    out = np.zeros(n) if out is None else out          # (``out``: added to, in the same order)
    for part in _parts(index.size):
        w = factors[0][part]
        for f in factors[1:]:
            w = w * f[part]
        np.add.at(out, np.add(index[part], offset, dtype=np.intp), w)
    return out


#: stored entries of ``Q`` read at once by :func:`level_chain` and :func:`level_flows`, and at most a
#: sixteenth of them (not fewer than 4096): their index arrays stay this small (a dozen temporaries of a
#: chunk each: with 1 << 22 they held 75 bytes a transition of tandem c=511 beside Q^T in the polish;
#: 1 << 16 costs the same time within 10 %)
_CHUNK = 1 << 16


def level_chain(Q, X, levels, weights, op=None):
    r"""The level chain of :math:`M = -Q_{XX}`: ``(group, share, ab)``, or None when a transition
    moves the level by more than one.

    ``group`` numbers the levels present in ``X`` in order (-1 off ``X``; every state), ``share`` is
    :math:`s_i = w_i / W_L` (uniform on a level without weight, 0 off ``X``; the rows of ``Q``) and
    ``ab`` holds the Galerkin product :math:`A_c = T^T\mathrm{diag}(s) M T` in the banded form of
    :func:`scipy.linalg.solve_banded` (``(1, 1)``): row ``L`` of :math:`A_c` is the
    :math:`s`-average of the rows of :math:`M` on level ``L``, its columns summed by level. ``Q`` is
    read a chunk of rows at a time (no copy of it). With ``op`` (distributed), ``Q``, ``X`` and
    ``weights`` are the owned rows of ``op`` (``Q``'s columns global, ``levels`` every state's): the
    sums over the levels are summed over the processes, ``ab`` is the same on every one.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> Q = sp.csr_matrix(np.array([[-1., 1, 0], [2, -3, 1], [0, 2, -2]]))
    >>> group, share, ab = level_chain(Q, np.array([False, True, True]), np.arange(3), np.ones(3))
    >>> group.tolist(), ab.tolist()        # M = [[3, -1], [-2, 2]] in banded form
    ([-1, 0, 1], [[0.0, -1.0], [3.0, 2.0], [-2.0, 0.0]])
    """
    X = np.asarray(X, dtype=bool)
    many = op is not None and op.size > 1
    start = op.start if many else 0
    allsum = op.allsum if many else (lambda v: v)
    Xf = op.gather(X, "all").astype(bool) if many else X         # every state's membership (columns)
    lev = _integers(levels)
    group = _level_ranks(lev, Xf)                       # (every state's: the columns)
    nc = int(group.max()) + 1
    g = group[start:start + X.size]                     # the owned rows'
    # the weights w (made here by a callable: not held beside), then the shares in their place; the sums
    # over the levels a chunk at a time (bin 0: the states off X, of weight 0)
    share = weights() if callable(weights) else np.array(weights, dtype=float)
    for part in _parts(share.size):
        w = share[part]
        w[~(X[part] & np.isfinite(w) & (w > 0))] = 0.0
    W = allsum(_binsum(g, nc + 1, share, offset=1))
    empty = ~(W[1:] > 0)
    for part in _parts(share.size):                     # no weight on a level: uniform there
        share[part][X[part] & empty[g[part]]] = 1.0
    W = allsum(_binsum(g, nc + 1, share, offset=1))
    W[0] = 1.0
    for part in _parts(share.size):
        share[part] /= W[g[part] + 1]
    ab = np.zeros(3 * max(nc, 0))
    bad = 0
    for rows, cols, vals in csr_entries(Q):
        keep = X[rows] & Xf[cols]
        r, c = rows[keep], cols[keep]
        if np.any(np.abs(lev[c] - lev[r + start]) > 1):
            bad = 1
            break
        gc = group[c]
        ab += np.bincount((1 + g[r] - gc) * nc + gc, weights=-share[r] * vals[keep], minlength=3 * nc)
    if (allsum(np.array([float(bad)]))[0] if many else bad):
        return None
    return group, share, allsum(ab).reshape(3, nc)


def _integers(levels):
    """``levels`` as an integer array: as given (int32 decoded columns stay 32 bits), else int64."""
    lev = np.asarray(levels)
    return lev if lev.dtype.kind in "iu" else lev.astype(np.int64)


def _level_ranks(lev, X):
    """The rank of each state's level among the levels present in ``X`` (int32; -1 off ``X``): a count
    over the span of the levels, a chunk of the states at a time, or a sort where the span is wider than
    the states."""
    group = np.full(X.size, -1, dtype=np.int32)
    bounds = _bounds(lev, X)
    if bounds is None:
        return group
    lo, hi = bounds
    if hi - lo < X.size:
        present = np.zeros(hi - lo + 1, dtype=bool)
        for part in _parts(X.size):
            present[lev[part][X[part]] - lo] = True
        rank = np.cumsum(present, dtype=np.int32) - 1
        for part in _parts(X.size):
            m = X[part]
            group[part][m] = rank[lev[part][m] - lo]
    else:
        group[X] = np.unique(lev[X], return_inverse=True)[1]
    return group


def csr_entries(Q):
    """The stored entries of the CSR matrix ``Q`` as ``(rows, cols, values)``, :data:`_CHUNK` at a time
    (rows numbered from 0; no copy of ``Q``: :func:`ctmc.backends.csr.row_blocks`)."""
    ptr = Q.indptr
    for start, stop in row_blocks(ptr, block_size(ptr[-1], _CHUNK)):
        lo, hi = int(ptr[start]), int(ptr[stop])
        yield np.repeat(np.arange(start, stop), np.diff(ptr[start:stop + 1])), Q.indices[lo:hi], Q.data[lo:hi]


def level_flows(Q, X, levels):
    r"""The rates of each state of ``X`` to the level above and below, within ``X``: ``(up, down)``
    (0 off ``X``), or None when a transition within ``X`` moves the level by more than one.

    ``Q`` is read a chunk of rows at a time (no copy of it); a transition within a level counts in
    neither.

    >>> import numpy as np, scipy.sparse as sp
    >>> Q = sp.csr_matrix(np.array([[-1., 1, 0], [2, -3, 1], [0, 2, -2]]))
    >>> [v.tolist() for v in level_flows(Q, np.ones(3, dtype=bool), np.arange(3))]
    [[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]]
    """
    X = np.asarray(X, dtype=bool)
    lev = _integers(levels)
    n = Q.shape[0]
    up, down = np.zeros(n), np.zeros(n)
    for rows, cols, vals in csr_entries(Q):
        step = np.where(X[rows] & X[cols], lev[cols] - lev[rows], 0)
        if np.any(np.abs(step) > 1):
            return None
        if rows.size:               # (the chunk's rows only: a bincount over all n per chunk was
            a, b = int(rows[0]), int(rows[-1]) + 1          # 4600 vectors of 268 MB at tandem c=4095)
            for out, on in ((up, step > 0), (down, step < 0)):
                out[a:b] += np.bincount(rows[on] - a, weights=vals[on], minlength=b - a)
    return up, down


#: :class:`LevelAggregation` rescales the levels before every this many symmetric sweeps of the polish
#: (tandem c=511: 104, 103, 105, 127, 133 sweeps to tail_tol 1e-6 with a step every 1, 2, 4, 8, 16;
#: a step costs about a sweep)
POLISH_LEVEL_GAP = 4
#: ... from this many sweeps on: a polish the sweeps alone finish sooner is left to them (cluster N=64
#: on ``left_n``: 8 sweeps alone, 39 with a step from the first, where the levels are not its slow part)
POLISH_LEVEL_START = 25


class LevelAggregation:
    r"""The aggregation step of the polish along levels: called before each symmetric sweep, it
    rescales ``x`` (a law on ``X``, any scale) level by level to the law of its aggregated
    birth-death chain, in place, before every ``gap``-th (the first included).

    The chain's rates are the :math:`x`-averages on each level of the flows of :func:`level_flows`
    (:func:`level_factors`); where they give no finite positive factor (a level without flow) the
    step leaves ``x`` as it is. ``steps`` counts the steps taken.

    Parameters
    ----------
    Q : CSR matrix
        The generator (rows: from).
    X : ndarray of bool
        The class.
    levels : ndarray of int
        The level of every state; every transition within ``X`` moves it by at most one.
    gap : int
        Calls per step (:data:`POLISH_LEVEL_GAP`).

    Examples
    --------
    The M/M/1/K queue is its own level chain: one step gives its law from any positive start.

    >>> import numpy as np, scipy.sparse as sp
    >>> n = np.arange(6)
    >>> Q = sp.diags([np.ones(5), np.r_[-1.0, -3 * np.ones(4), -2], 2 * np.ones(5)], [1, 0, -1], format="csr")
    >>> x = np.ones(6); LevelAggregation(Q, np.ones(6, dtype=bool), n)(x)
    >>> bool(np.allclose(x / x.sum(), 0.5 ** n / (2 - 0.5 ** 5), rtol=1e-14, atol=0))
    True
    """

    def __init__(self, Q, X, levels, gap: int = POLISH_LEVEL_GAP):
        if int(gap) < 1:
            raise ValueError(f"gap: expected an integer >= 1, got {gap}")
        flows = level_flows(Q, X, levels)
        if flows is None:
            raise ValueError("levels: a transition moves the level by more than one")
        self.up, self.down = flows
        del flows
        X = np.asarray(X, dtype=bool)
        lev = _integers(levels)
        lo = min((_bounds(lev, X) or (0, 0))[0], 0)
        self.lev = np.zeros(X.size, dtype=np.int32)     # (held through the polish: 32 bits, made by chunks)
        for part in _parts(X.size):
            np.subtract(lev[part], lo, out=self.lev[part], where=X[part], casting="unsafe")
        self.nl = int(self.lev.max(initial=0)) + 1
        self.gap, self.calls, self.steps = int(gap), 0, 0

    def __call__(self, x):
        """Before a symmetric sweep on ``x`` (zero off ``X``): a step every ``gap`` calls, in place."""
        self.calls += 1
        if (self.calls - 1) % self.gap:
            return
        lev, ext = self.lev, extension()
        mass, up, down = level_sums(lev, x, self.up, self.down, self.nl)
        f = level_factors(mass, up, down)
        if np.all(np.isfinite(f)) and np.all(f[mass > 0] > 0):
            if ext is not None:
                ext.level_scale(lev, f, x)
            else:
                for part in _parts(x.size):
                    x[part] *= f[lev[part]]
            self.steps += 1


def level_sums(lev, x, up, down, nl: int) -> np.ndarray:
    """The sums of ``x``, ``x up`` and ``x down`` over each level ``0..nl-1`` of the states (``lev``): rows
    of a ``(3, nl)`` array, in state order (numpy's ``bincount`` with these weights, to the bit; compiled, no
    state-sized temporary: with an int32 ``lev`` ``bincount`` casts it, and each product is one more;
    :func:`_binsum`'s chunks without the extension).

    >>> level_sums(np.array([0, 1, 1], dtype=np.int32), np.array([1.0, 2, 3]), np.ones(3), np.arange(3.0), 2)
    array([[1., 5.],
           [1., 5.],
           [0., 8.]])
    """
    ext = extension()
    if ext is not None:
        out = np.empty((3, int(nl)))
        ext.level_sums(lev, np.ascontiguousarray(x, dtype=float), up, down, out)
        return out
    return np.stack([_binsum(lev, nl, x), _binsum(lev, nl, x, up), _binsum(lev, nl, x, down)])


class PolishLevels:
    """The aggregation step of the polish on the class ``support``, called before each symmetric sweep:
    the plain sweeps first, then, from the ``start``-th call (:data:`POLISH_LEVEL_START`), a
    :class:`LevelAggregation` on the variable :func:`structured_levels` finds, pinned at ``pin`` (None: the
    largest entry of ``x`` then), the error bound's pin: the search is made only then, and kept for the
    bound's :func:`return_time_systems` at that pin (not made twice). ``name`` is the variable's (None
    before the search or without one), ``steps`` the steps taken. One process only."""

    def __init__(self, op, support, pin=None, start: int = POLISH_LEVEL_START):
        if op.size != 1:
            raise ValueError("PolishLevels: one process only")
        self.op, self.support, self.pin, self.start = op, np.asarray(support, dtype=bool), pin, int(start)
        self.calls, self.name, self.agg = 0, None, None

    @property
    def steps(self) -> int:
        return 0 if self.agg is None else self.agg.steps

    def info(self) -> dict:
        """``{"polish_levels": "<name>: <steps> aggregation steps"}`` once a variable was found, else {}."""
        return {} if self.name is None else {"polish_levels": f"{self.name}: {self.steps} aggregation steps"}

    def __call__(self, x):
        self.calls += 1
        if self.calls == self.start + 1:
            self._search(x)
        if self.agg is not None:
            self.agg(x)

    def _search(self, x):
        op, X = self.op, self.support.copy()
        X[int(np.argmax(np.where(X, x, -np.inf))) if self.pin is None else int(self.pin)] = False
        found = _structured(op, X)
        if found is None:
            return
        name, lev = found[:2]
        del found                       # (the chain is made again when asked: not held through the polish)
        _KEPT[op] = (X, name)           # (nor the column: decoded again)
        try:
            self.agg = LevelAggregation(op.generator_rows(False), self.support, lev)
            self.name = name
        except ValueError:              # the pin's own transitions move the level by more than one
            pass


def polish_levels(op, support, pin=None, balance: float = 0.0):
    """The :class:`PolishLevels` of a polish on ``support`` (``pin``: the error bound's, None: the
    argmax), or None where no level variable can be found (several processes, no state table).
    A polish that starts from a balance error above 1 (a tail wrong by orders of magnitude: a front to
    cross the chain) aggregates from its first sweep: started at the 26th, the first step raised
    tandem c=1023's error above where it had been 100 sweeps before, and the stall rule ended the polish."""
    if op.size != 1 or op.states is None:
        return None
    return PolishLevels(op, support, pin, 0 if balance > 1 else POLISH_LEVEL_START)


def structured_levels(op, X, min_levels: int = LEVEL_MIN):
    r"""The state variable whose levels carry the slow part of the return times on ``X``: ``(name,
    levels)``, or None.

    Every variable of the chain's state table with at least ``min_levels`` values on ``X`` whose
    every transition within ``X`` moves it by at most one is a candidate; its level chain
    (:func:`level_chain`, weights :math:`1/q_i`) is solved for the mean times to reach the pin's
    side, :math:`A_c m_c = 1` (tridiagonal). The candidate with the largest :math:`\max m_c` is
    the one along which the passage to the pin is slow (on a tandem network ``sm``, the second
    queue: :math:`\max m_c` about ``c/2`` against ``1/(4c)``-sized steps along ``sc``). One
    process only; None without a state table or a candidate.

    Examples
    --------
    >>> import numpy as np, ctmc
    >>> from ctmc.backends import operator_for
    >>> m = ctmc.Model("two"); a = m.var("a", 0, 40); b = m.var("b", 0, 40)
    >>> m.event("in", guard=a < 40, rate=100.0, update={a: a + 1})
    >>> m.event("move", guard=(a > 0) & (b < 40), rate=1.0, update={a: a - 1, b: b + 1})
    >>> m.event("out", guard=b > 0, rate=2.0, update={b: b - 1})
    >>> op = operator_for(m.build(initial={"a": 0, "b": 0}), "scipy")
    >>> X = np.ones(op.n, dtype=bool); X[op.states.index(a=40, b=0)] = False
    >>> structured_levels(op, X)[0]
    'b'
    """
    found = _structured(op, X, min_levels)
    return None if found is None else found[:2]


#: the search of :func:`polish_levels` on each operator, ``(X, name)`` (the chosen column and its level chain
#: are made again when asked, not held through the polish: 1.5 float64 vectors of the states), until the
#: bound's :func:`return_time_systems` asks at the same ``X`` (then it is dropped)
_KEPT = weakref.WeakKeyDictionary()


def _structured(op, X, min_levels: int = LEVEL_MIN):
    """:func:`structured_levels` with the chosen variable's :func:`level_chain`: ``(name, levels, chain)``
    or None (the chain serves the :class:`LevelSystem` set up on it: not made twice)."""
    if op.size != 1 or op.states is None:
        return None
    X = np.asarray(X, dtype=bool)
    if not X.any():
        return None
    Q = op.generator_rows(False)
    weights = partial(_exit_weights, op)                # (made in each chain's shares: not held beside)
    kept = _KEPT.pop(op, None)
    if kept is not None and min_levels == LEVEL_MIN and np.array_equal(kept[0], X):
        lev = np.asarray(op.states.column(kept[1]))
        return kept[1], lev, level_chain(Q, X, lev, weights)
    best = last = lev = found = None
    for name in op.states.names:
        whole = op.states.value_range(name)             # (decoded by blocks: a variable too short is
        if whole is None or whole[1] - whole[0] + 1 < min_levels:      # passed by without its column)
            continue
        last = lev = found = None                       # one candidate's column and chain at a time
        lev = np.asarray(op.states.column(name))        # (decoded for the search, none kept)
        if lev.dtype.kind not in "iub" or _span(lev, X) < min_levels:
            continue
        found = level_chain(Q, X, lev, weights)
        if found is None:
            continue
        try:
            mc = solve_banded((1, 1), found[2], np.ones(found[2].shape[1]), check_finite=False)
        except (ValueError, np.linalg.LinAlgError):     # a singular level chain: no use
            continue
        top = float(mc.max()) if np.all(np.isfinite(mc)) else -np.inf
        if top > 0 and (best is None or top > best[0]):
            best, last = (top, name), (name, lev, found)
    lev = found = None
    if best is None:
        return None
    if last is None:                                    # a later candidate was searched after the best:
        lev = np.asarray(op.states.column(best[1]))     # its column and chain made again
        last = (best[1], lev, level_chain(Q, X, lev, weights))
    return last


def _bounds(lev, X):
    """``(min, max)`` of the integers ``lev`` on ``X``, a chunk at a time (no copy of ``lev[X]``), or None."""
    lo = hi = None
    for part in _parts(X.size):
        lx = lev[part][X[part]]
        if lx.size:
            a, b = int(lx.min()), int(lx.max())
            lo, hi = (a, b) if lo is None else (min(lo, a), max(hi, b))
    return None if lo is None else (lo, hi)


def _span(lev, X) -> int:
    """How many values the integers ``lev`` span on ``X`` (0 on none)."""
    b = _bounds(lev, X)
    return 0 if b is None else b[1] - b[0] + 1


def return_time_systems(op, X, levels=None, info=None) -> tuple:
    """``(first, later)``: the return-time systems on levels for
    :func:`ctmc.kernels.evidence.iterative_bound`.

    With ``levels`` (``level_iad``'s, ``"given"``'s) ``first`` is a :class:`LevelSystem` on them
    (tried before any Krylov solve, :data:`LEVEL_CYCLES` cycles; distributed too). Without (one process
    only, else ``(None, None)``), ``later`` is a callable
    that finds a variable by :func:`structured_levels` (its name into ``info["return_time_levels"]``)
    and sets up a :class:`LevelSystem` on it (:data:`LEVEL_PROBE` cycles), or returns None (the same
    each call: set up once): tried only where BiCGStab did not bound the return times, or at once where
    a BiCGStab solve did not converge (:func:`~ctmc.kernels.evidence.inverse_norm_bound_of`, ``settle``),
    so chains it serves pay nothing. Where the polish of the answer searched the levels at the same pin
    (:class:`PolishLevels`: a tail its sweeps crossed slowly), ``first`` is the :class:`LevelSystem` on
    them (:data:`LEVEL_PROBE` cycles): on tandem c = 4095 BiCGStab spent 200 iterations (700 s) diverging
    before the levels' 15 cycles.
    """
    if levels is not None:
        return LevelSystem(op, X, levels), None
    if op.size != 1:
        return None, None

    def setup():
        found = _structured(op, X)
        if found is not None and info is not None:
            info["return_time_levels"] = found[0]
        return None if found is None else LevelSystem(op, X, found[1], maxiter=LEVEL_PROBE, chain=found[2])
    kept = _KEPT.get(op)
    if kept is not None and np.array_equal(kept[0], X):        # the polish needed them: first
        return setup(), None
    made = []

    def later():
        if not made:                                    # set up once, however often asked
            made.append(setup())
        return made[0]
    return None, later
