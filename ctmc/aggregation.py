r"""Multilevel iterative aggregation-disaggregation for stationary laws (the ``multilevel`` method).

Aggregation
-----------
Partition the states of an irreducible generator :math:`Q = R - \operatorname{diag}(q)`
into aggregates :math:`I = 1..m` by a map :math:`a`, with the 0/1 matrix
:math:`P_{iI} = [a(i) = I]`. For a positive iterate :math:`x` with aggregated
masses :math:`X = P^T x`, the *coarse chain*

.. math::

    R^c_{IJ} = \sum_{i \in I,\, j \in J} \frac{x_i}{X_I} R_{ij} \quad (I \ne J),
    \qquad q^c_I = \sum_{J \ne I} R^c_{IJ},

i.e. :math:`Q_c = \operatorname{diag}(X)^{-1} P^T \operatorname{diag}(x) Q P`,
is again a generator (rates of moving between aggregates when the state
within an aggregate is distributed like :math:`x`). If :math:`x` is
proportional to :math:`\pi` on every aggregate, the stationary law
:math:`y` of :math:`Q_c` is exactly :math:`P^T \pi`, and the
*disaggregation*

.. math::

    x_i \leftarrow x_i \, y_{a(i)} / X_{a(i)}

returns :math:`\pi`. Aggregation fixes the distribution *between*
aggregates (the slow, global part of the error); Gauss-Seidel sweeps fix it
*within* them (the fast, local part). Alternating the two is iterative
aggregation-disaggregation (Takahashi 1975; Stewart 1994, ch. 6); it is
exact in the limit of nearly completely decomposable chains, where plain
sweeps stall.

Levels and cycles
-----------------
The coarse chain is built from non-negative products only (no
subtraction), so it can itself be aggregated. With a hierarchy of partitions
(level 0 the states, level :math:`l+1` grouping the aggregates of level
:math:`l`), one *V-cycle* at level :math:`l` is: ``pre_sweeps`` Gauss-Seidel
sweeps on level :math:`l`; the coarse chain of level :math:`l+1` from the
smoothed iterate; one cycle at level :math:`l+1` started from :math:`X`
(an exact solve at the coarsest level); disaggregation; ``post_sweeps``
sweeps (Horton & Leutenegger 1994). A *W-cycle* visits each coarser level
twice, an *F-cycle* once with an F-cycle and once with a V-cycle. The
coarsest chain (at most ``coarse_size`` aggregates) is solved by GTH
elimination (:func:`ctmc.linalg.gth_solve`), or in :math:`O(m)` by the
product formula when it is a birth-death chain.

Aggregates
----------
``aggregates`` gives the partitions, finest first: a state variable's name
or an expression of the model's variables (the aggregate of a state is the
value), or an integer array (one id per state, or one per aggregate of the
previous level). Levels given by state values must nest: the states of one
aggregate of level :math:`l` must share their value at level :math:`l+1`.
Beyond the given levels (or with ``aggregates=None``) the hierarchy is built
*automatically* until at most ``coarse_size`` aggregates remain: two passes of
pairwise matching per level on the graph of the probability flows
:math:`x_i R_{ij} + x_j R_{ji}` of the current iterate (each pass joins each
state to the neighbour with which it exchanges most probability flow, when
that neighbour chooses it too; ties broken by a fixed hash; states left over
join their strongest neighbour's pair). States that exchange much flow are
strongly coupled, so the aggregates follow the nearly decomposable blocks of
a chain when it has them (De Sterck, Manteuffel, McCormick et al. 2008-2010
base their multilevel aggregation on the same kind of strength of
connection). The matching is done once, from the iterate after two sweeps.

Distribution
------------
The fine level is swept on each process's block (:class:`ctmc.kernels.sweeps.Sweeper`, the
other blocks from the previous sweep); automatic aggregates of the fine
level never straddle two processes. The coarse chains are assembled from
per-process sums and replicated on every process, so every coarser level is
computed redundantly: they are meant to be small (the first coarse level
has about a quarter of the states with automatic aggregates).

References
----------
Y. Takahashi, "A lumping method for numerical calculations of stationary
distributions of Markov chains", Research Report B-18, Tokyo Institute of
Technology (1975).
G. Horton, S. T. Leutenegger, "A multi-level solution algorithm for
steady-state Markov chains", ACM SIGMETRICS (1994).
W. J. Stewart, *Introduction to the Numerical Solution of Markov Chains*,
Princeton University Press (1994), chapter 6.
H. De Sterck, T. A. Manteuffel, S. F. McCormick, Q. Nguyen, J. Ruge,
"Multilevel adaptive aggregation for Markov chains, with application to web
ranking", SIAM J. Sci. Comput. 30 (2008).

Examples
--------
An M/M/1/5 queue whose server switches between two modes at rates of order
1e-9 (when idle) is a nearly completely decomposable chain, where
Gauss-Seidel sweeps stall; aggregating by the mode (a two-state coarse
chain) gives the law GTH gives:

>>> import numpy as np, ctmc
>>> m = ctmc.Model("ncd"); b = m.var("b", 0, 1); n = m.var("n", 0, 5)
>>> m.event("arrive", guard=n < 5, rate=0.5, update={n: n + 1})
>>> m.event("serve", guard=n > 0, rate=1.0, update={n: n - 1})
>>> m.event("on", guard=(n == 0) & (b == 0), rate=1e-9, update={b: 1})
>>> m.event("off", guard=(n == 0) & (b == 1), rate=3e-9, update={b: 0})
>>> c = m.build(initial={"b": 0, "n": 0})
>>> res = c.stationary("multilevel", aggregates="b", check=False)
>>> res.info["coarse_sizes"]
[2]
>>> round(float(res.pi[c.states["b"] == 1].sum()), 12)   # P(mode 1) = 1/4
0.25
>>> exact = c.stationary("gth").pi
>>> bool(np.allclose(res.pi, exact, rtol=1e-8, atol=0))
True

The residual-based error bound cannot vouch for it, though: the chain's
condition (mean times to cross between the modes, ~1e9) multiplies the
residual, so the status says ``inaccurate`` and ``error_bound`` is honest
but far above the true error:

>>> res.status.value, bool(np.abs(res.pi - exact).sum() <= res.error_bound)
('inaccurate', True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.sparse as sp

from .linalg import gth_solve
from .multigrid import standard_aggregates
from .kernels.levels import LEVEL_MASS_FLOOR, level_factors  # noqa: F401  (their home; named here too)
from .kernels.sweeps import Stop, Sweeper, gth_dense, start_vector, state_levels
from .options import Tolerances, integer_in, positive
from .progress import Progress
from .results import Status

__all__ = ["MultilevelOptions", "multilevel", "level_factors", "CYCLES", "AUTOMATIC"]

#: the cycle shapes: how often a level visits the next coarser one
CYCLES = ("V", "W", "F")
#: largest coarsest chain (dense GTH, O(m^3) each cycle)
_MAX_COARSE = 5000
#: sweeps on the fine level before the automatic aggregates are chosen
_SETUP_SWEEPS = 2
_TINY = np.finfo(float).tiny
#: smallest weight x_i / X_I of a state in the coarse rates: a state far below its aggregate's mass
#: (or underflowed) still carries its transitions, and the coarse chain stays irreducible with rates
#: that GTH can eliminate without overflow
_WEIGHT_FLOOR = 1e-150


def _is_level_spec(s) -> bool:
    from .expr import Expr
    if isinstance(s, (str, Expr)):
        return True
    if isinstance(s, (list, tuple)):
        if not s or not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in s):
            return False
        s = np.asarray(s)
    return isinstance(s, np.ndarray) and s.ndim == 1 and s.size > 0 and s.dtype.kind in "iu"


def _level_specs(aggregates) -> tuple:
    """The per-level specifications of ``aggregates`` (finest first); () for None."""
    if aggregates is None:
        return ()
    if _is_level_spec(aggregates):
        return (aggregates,)
    if isinstance(aggregates, (list, tuple)) and aggregates and all(_is_level_spec(s) for s in aggregates):
        return tuple(aggregates)
    raise ValueError("aggregates: expected None (automatic), a state variable's name, an expression, a 1-D "
                     "integer array (one aggregate id per state), or a non-empty list of these (finest level "
                     f"first); got {aggregates!r:.200}")


@dataclass(frozen=True)
class MultilevelOptions(Tolerances):
    """Options of ``multilevel`` (see :mod:`ctmc.aggregation`).

    Attributes
    ----------
    aggregates : str, Expr, array_like of int, list of these, or None
        The partitions, finest first; None chooses them automatically. Levels
        are added automatically after the given ones until at most
        ``coarse_size`` aggregates remain.
    coarse_size : int
        Coarsen until at most this many aggregates remain (2..5000); the
        coarsest chain is solved exactly (dense GTH) in every cycle.
    cycle : {"V", "W", "F"}
        Cycle shape.
    pre_sweeps, post_sweeps : int
        Gauss-Seidel sweeps before aggregating and after disaggregating, on
        every level but the coarsest (0..100 each, not both 0).
    smoother : {"forward", "symmetric"}
        A sweep is one forward Gauss-Seidel pass, or a forward and a backward one.
    maxiter : int
        Cycle limit.
    aggregation : {"pairwise", "standard"}
        How the automatic levels are found (:data:`AUTOMATIC`): pairwise
        matching on the flow graph, or the standard aggregation of
        :func:`ctmc.multigrid.standard_aggregates` (the multilevel
        preconditioner's: compiled and larger aggregates, 2-3x faster on
        kanban, polling, cluster and tandem, but 29 cycles and ``inaccurate`` on fms
        n=4 where matching takes 13: benchmarks/README.md).
    x0 : array_like, optional
        Positive initial guess (default uniform on the closed class).
    progress : bool, optional
        Report the residual on stderr during long runs.
    """

    aggregates: object = None
    coarse_size: int = 256
    cycle: str = "V"
    pre_sweeps: int = 1
    post_sweeps: int = 1
    smoother: str = "symmetric"
    maxiter: int = 1000
    aggregation: str = "pairwise"
    x0: Optional[np.ndarray] = None

    def __post_init__(self):
        super().__post_init__()
        _level_specs(self.aggregates)
        integer_in("coarse_size", self.coarse_size, 2, _MAX_COARSE)
        if self.cycle not in CYCLES:
            raise ValueError(f"cycle: expected one of {CYCLES}, got {self.cycle!r}")
        for name in ("pre_sweeps", "post_sweeps"):
            integer_in(name, getattr(self, name), 0, 100)
        if self.pre_sweeps + self.post_sweeps == 0:
            raise ValueError("pre_sweeps, post_sweeps: at least one sweep per level is needed (both are 0)")
        if self.aggregation not in AUTOMATIC:
            raise ValueError(f"aggregation: expected one of {sorted(AUTOMATIC)}, got {self.aggregation!r}")
        if self.smoother not in ("forward", "symmetric"):
            raise ValueError(f"smoother: expected 'forward' or 'symmetric', got {self.smoother!r}")
        positive("maxiter", self.maxiter, integer=True)


# --------------------------------------------------------------------------
# automatic aggregates: pairwise matching on the flow graph
# --------------------------------------------------------------------------
#: relative strength below which two states are not aggregated (see :func:`_match`)
_WEAK = 1e-4


def _match(S: sp.csr_matrix, rounds: int = 10) -> np.ndarray:
    """Aggregate ids (0..k-1) by one pass of pairwise matching on a symmetric strength matrix.

    Each round matches the locally dominant edges (the strongest edge of both
    its ends) among unmatched nodes; the edge weights carry a fixed hash of
    ``(i, j)`` of relative size 1e-6 so that equal weights do not tie.
    Unmatched nodes with a neighbour then join their strongest neighbour's
    aggregate; isolated ones stay alone. An edge whose relative strength
    (below) is under :data:`_WEAK` is neither matched nor joined along: the
    blocks of a nearly decomposable chain stay apart.

    >>> S = sp.csr_matrix(np.array([[0, 5, 1, 0], [5, 0, 1, 0], [1, 1, 0, 2], [0, 0, 2, 0.]]))
    >>> _match(S).tolist()
    [0, 0, 1, 1]
    """
    m = S.shape[0]
    A = sp.triu(S, k=1).tocoo()
    i, j = A.row.astype(np.int64), A.col.astype(np.int64)
    h = ((i * 1_000_003 + j * 7_919) % 104_729) / 104_729.0
    # relative strength s_ij / sqrt(max_k s_ik max_k s_jk): along a path whose flows fall
    # geometrically every edge is then about as strong, and a round matches many of them
    # instead of only the strongest
    top = np.sqrt(np.asarray(abs(S).max(axis=1).todense()).ravel())
    top[top == 0] = 1.0
    w = A.data / (top[i] * top[j]) * (1.0 + 1e-3 * h)
    keep = w > _WEAK          # weak couplings (nearly decomposable blocks) are never merged across
    i, j, w = i[keep], j[keep], w[keep]
    mate = np.full(m, -1, dtype=np.int64)
    for _ in range(rounds):
        live = (mate[i] < 0) & (mate[j] < 0)
        if not live.any():
            break
        li, lj, lw = i[live], j[live], w[live]
        B = sp.csr_matrix((np.r_[lw, lw], (np.r_[li, lj], np.r_[lj, li])), shape=(m, m))
        best = np.asarray(B.max(axis=1).todense()).ravel()
        dom = (lw == best[li]) & (lw == best[lj])
        di, dj = li[dom], lj[dom]
        # a node with two equal dominant edges keeps one
        ends = np.concatenate([di, dj])
        _, first, counts = np.unique(ends, return_index=True, return_counts=True)
        if (counts > 1).any():
            dup = np.zeros(m, dtype=bool)
            dup[np.unique(ends)[counts > 1]] = True
            ok = ~(dup[di] | dup[dj])
            di, dj = di[ok], dj[ok]
            if di.size == 0:
                di, dj = li[dom][:1], lj[dom][:1]
        mate[di], mate[dj] = dj, di
    agg = np.full(m, -1, dtype=np.int64)
    lead = np.flatnonzero((mate >= 0) & (np.arange(m) < mate))
    agg[lead] = np.arange(lead.size)
    agg[mate[lead]] = agg[lead]
    k = lead.size
    rest = np.flatnonzero(agg < 0)
    if rest.size:
        # the leftover nodes join the aggregate of their strongest matched neighbour
        B = S[rest].tocoo()
        ok = (agg[B.col] >= 0) & (B.data > _WEAK * top[rest[B.row]] * top[B.col])
        r, c, v = B.row[ok], B.col[ok], B.data[ok]
        order = np.lexsort((-v, r))
        r, c = r[order], c[order]
        firsts = np.flatnonzero(np.r_[True, r[1:] != r[:-1]]) if r.size else np.zeros(0, dtype=np.int64)
        agg[rest[r[firsts]]] = agg[c[firsts]]
        alone = np.flatnonzero(agg < 0)
        agg[alone] = k + np.arange(alone.size)
    return agg


def _pairwise(S: sp.csr_matrix, passes: int = 2) -> np.ndarray:
    """``passes`` passes of :func:`_match`, each on the graph contracted by the previous one."""
    m = S.shape[0]
    agg = np.arange(m)
    for _ in range(passes):
        a = _match(S)
        agg = a[agg]
        k = int(a.max()) + 1 if a.size else 0
        P = sp.csr_matrix((np.ones(a.size), (np.arange(a.size), a)), shape=(a.size, k))
        S = (P.T @ S @ P).tocsr()
        S.setdiag(0.0)
        S.eliminate_zeros()
    return agg


#: how automatic levels are found from a symmetric strength (flow) matrix: aggregate ids 0..m-1
AUTOMATIC = {"pairwise": _pairwise, "standard": lambda S: standard_aggregates(S)}


# --------------------------------------------------------------------------
# the hierarchy
# --------------------------------------------------------------------------
class _Restriction:
    """From level ``l`` to level ``l+1``: the aggregate of each unit and the coarse pattern.

    ``rows, cols`` are the off-diagonal entries of level ``l`` held here
    (``rows`` index the local iterate, ``cols`` global units); ``agg`` is the
    aggregate of each local unit (-1 outside the class), ``agg_cols`` that of
    each column. ``reduce`` sums over processes (None on replicated levels).
    """

    def __init__(self, rows, cols, agg, agg_cols, m, reduce, gather):
        self.agg, self.m, self.reduce = agg, m, reduce
        a, b = agg[rows], agg_cols
        self.keep = np.flatnonzero((a != b) & (a >= 0) & (b >= 0))
        a, b = a[self.keep].astype(np.int64), b[self.keep].astype(np.int64)
        key = a * m + b
        keys = np.unique(gather(np.unique(key)).astype(np.int64))
        self.slot = np.searchsorted(keys, key)
        self.rows = rows[self.keep]
        self.crow, self.ccol = keys // m, keys % m
        self._inside = agg >= 0
        self.sizes = self._sum(np.bincount(agg[self._inside], minlength=m).astype(float))

    def _sum(self, v):
        return v if self.reduce is None else self.reduce(v)

    def coarse(self, x, vals):
        """``(X, rates)``: the aggregated iterate and the coarse rates ``sum_i x_i R_ij / X_I``.

        ``vals`` are the rates of the entries ``rows, cols`` given at construction.
        """
        inside = self._inside
        a = self.agg[inside]
        X = self._sum(np.bincount(a, weights=x[inside], minlength=self.m))
        # weights x_i / X_I within an aggregate (<= 1: no overflow); one whose mass underflowed
        # to 0 weighs its states alike
        w = np.zeros_like(x)
        w[inside] = self._share(x[inside], X, a)
        w[inside] = np.where(X[a] > 0, np.maximum(w[inside], _WEIGHT_FLOOR), 1.0 / self.sizes[a])
        F = self._sum(np.bincount(self.slot, weights=w[self.rows] * vals[self.keep], minlength=self.crow.size))
        return X, F

    def prolong(self, x, X, y):
        """Disaggregate in place: ``x_i *= y_I / X_I`` (aggregates of zero mass get ``y_I`` shared evenly)."""
        inside = self._inside
        a = self.agg[inside]
        x[inside] = np.where(X[a] > 0, self._share(x[inside], X, a) * y[a], y[a] / self.sizes[a])

    @staticmethod
    def _share(xi, X, a):
        """``x_i / X_{a(i)}`` (0 where ``X`` is 0)."""
        Xa = X[a]
        return np.divide(xi, Xa, out=np.zeros_like(xi), where=Xa > 0)


class _Chain:
    """A coarse chain of ``m`` states, replicated on every process, with a fixed pattern.

    ``crow, ccol``: the off-diagonal pattern; :meth:`set` fills the rates.
    """

    def __init__(self, m, crow, ccol):
        self.m, self.crow, self.ccol = m, crow, ccol
        self.vals = np.zeros(crow.size)
        k = crow.size
        # Q^T with a stored diagonal: rows are the in-flows, (ccol, crow), then (i, i)
        r = np.concatenate([ccol, np.arange(m)])
        c = np.concatenate([crow, np.arange(m)])
        T = sp.csr_matrix((np.arange(1, k + m + 1, dtype=float), (r, c)), shape=(m, m))
        T.sort_indices()
        self._perm = T.data.astype(np.int64) - 1
        T.indices = T.indices.astype(np.int64)
        T.indptr = T.indptr.astype(np.int64)
        self.QT = T
        self.birth_death = bool(np.all(np.abs(crow - ccol) == 1))
        self.restriction = None

    def set(self, vals):
        self.vals = vals
        self.q = np.bincount(self.crow, weights=vals, minlength=self.m)
        self.QT.data = np.concatenate([vals, -self.q])[self._perm]

    def sweep(self, y, direction):
        from ._relax import sweep
        q = self.q
        if not np.all(q > 0):
            return
        sweep(self.QT, y, np.zeros_like(y), 1.0, direction)
        y /= y.sum()

    def strength(self, y):
        F = sp.csr_matrix((y[self.crow] * self.vals, (self.crow, self.ccol)), shape=(self.m, self.m))
        return (F + F.T).tocsr()

    def solve(self):
        """The stationary law of this chain (birth-death product formula, else GTH)."""
        m = self.m
        if self.birth_death:
            up, down = np.zeros(m), np.zeros(m)
            u = self.ccol > self.crow
            up[self.crow[u]] = self.vals[u]
            down[self.crow[~u]] = self.vals[~u]
            with np.errstate(divide="ignore"):
                logp = np.concatenate([[0.0], np.cumsum(np.log(up[:-1]) - np.log(down[1:]))])
            p = np.exp(logp - logp.max())
            return p / p.sum()
        A = np.zeros((m, m))
        A[self.crow, self.ccol] = self.vals
        return gth_solve(A)


class _Hierarchy:
    """The levels of one multilevel solve: level 0 on the operator, the others :class:`_Chain`."""

    def __init__(self, op, support, sweeper, order=None):
        self.op, self.support, self.sweeper, self.order = op, support, sweeper, order
        R = op.local_rows().tocoo()
        self.full_support = op.gather(support.astype(float), "all") > 0.5 if op.size > 1 else support
        keep = support[R.row] & self.full_support[R.col]
        self.rows, self.cols, self.vals = R.row[keep], R.col[keep].astype(np.int64), R.data[keep]
        self.restrictions = []     # level l -> l+1
        self.chains = [None]       # level l >= 1
        self.sizes = [int(round(op.allsum(float(np.count_nonzero(support)))))]

    # --- building ----------------------------------------------------------
    def add_level(self, agg_local, agg_full=None):
        """Add the level grouping the units of the current coarsest level (ids >= 0 on the class).

        On level 0 ``agg_local`` is the owned part (``agg_full``, replicated,
        is gathered when not given); on coarser levels it is replicated.
        """
        op = self.op
        if len(self.chains) == 1:
            if agg_full is None:
                agg_full = (op.gather(agg_local.astype(float), "all").astype(np.int64) if op.size > 1
                            else agg_local)
            m = int(op.allmax(float(agg_local.max(initial=-1)))) + 1
            res = _Restriction(self.rows, self.cols, agg_local, agg_full[self.cols], m, op.allsum,
                               lambda v: op.gather(v.astype(float), "all"))
        else:
            c = self.chains[-1]
            m = int(agg_local.max()) + 1
            res = _Restriction(c.crow, c.ccol, agg_local, agg_local[c.ccol], m, None, lambda v: v)
        self.restrictions.append(res)
        self.chains.append(_Chain(m, res.crow, res.ccol))
        self.sizes.append(m)

    def restrict(self, l, x):
        """Set the coarse chain of level ``l + 1`` from the iterate ``x`` of level ``l``; returns ``X``."""
        vals = self.vals if l == 0 else self.chains[l].vals
        X, F = self.restrictions[l].coarse(x, vals)
        self.chains[l + 1].set(F)
        return X

    def fine_strength(self, x):
        """Symmetric flows ``x_i R_ij + x_j R_ji`` between owned states, as a local CSR matrix."""
        op = self.op
        own = (self.cols >= op.start) & (self.cols < op.stop)
        r, c = self.rows[own], self.cols[own] - op.start
        m = op.stop - op.start
        F = sp.csr_matrix((x[r] * self.vals[own], (r, c)), shape=(m, m))
        return (F + F.T).tocsr()

    # --- smoothing ---------------------------------------------------------
    def smooth(self, l, x, sweeps, symmetric):
        dirs = ("forward", "backward") if symmetric else ("forward",)
        for _ in range(sweeps):
            for d in dirs:
                if l == 0:
                    if self.order is None:
                        ok = self.sweeper(x, 1.0, d)
                    else:
                        xp = np.ascontiguousarray(x[self.order])
                        ok = self.sweeper(xp, 1.0, d)
                        x[self.order] = xp
                    if not ok:
                        return False
                else:
                    self.chains[l].sweep(x, d)
        return True


# --------------------------------------------------------------------------
# building from the options, and the cycle
# --------------------------------------------------------------------------
def _state_ids(op, spec, full_support):
    """Aggregate ids per state (replicated), compacted to 0..m-1 on the class, -1 elsewhere."""
    lev = state_levels(op, spec, name="aggregates")
    ids = np.full(op.n, -1, dtype=np.int64)
    _, ids[full_support] = np.unique(lev[full_support], return_inverse=True)
    return ids


def build(op, support, specs, sweeper, coarse_size, x, order=None, symmetric=False, aggregation="pairwise"):
    """The hierarchy for the level specifications ``specs``, then automatic levels down to ``coarse_size``.

    ``x`` (owned, positive on the class) is the iterate the automatic
    aggregates are chosen from; it is smoothed in place first when needed.
    """
    H = _Hierarchy(op, support, sweeper, order)
    full_support = H.full_support
    unit_of_state = None       # the coarsest unit of each state (replicated) while the levels come per state
    y = x                      # the iterate of the coarsest level built so far
    for k, spec in enumerate(specs):
        per_state = not (isinstance(spec, (np.ndarray, list, tuple)) and len(spec) != op.n)
        if per_state:
            ids = _state_ids(op, spec, full_support)
            if unit_of_state is None:
                if k:
                    raise ValueError(f"aggregates: level {k + 1} is given per state, level {k} per aggregate: "
                                     "give the later levels per aggregate too")
                unit_of_state = ids
                H.add_level(ids[op.start:op.stop], ids)
                y = H.restrict(0, y)
                continue
            # the aggregate of each unit of the previous level: the same for all its states
            m_prev = H.sizes[-1]
            lo = np.full(m_prev, np.iinfo(np.int64).max)
            hi = np.full(m_prev, -1)
            np.minimum.at(lo, unit_of_state[full_support], ids[full_support])
            np.maximum.at(hi, unit_of_state[full_support], ids[full_support])
            if (lo != hi).any():
                raise ValueError(f"aggregates: level {k + 1} does not nest in level {k}: "
                                 f"{int(np.count_nonzero(lo != hi))} aggregates of level {k} hold states of "
                                 f"several aggregates of level {k + 1}")
            _, agg = np.unique(hi, return_inverse=True)
        else:
            arr = np.asarray(spec)
            if k == 0 or arr.shape != (H.sizes[-1],):
                raise ValueError(f"aggregates: level {k + 1} gives {len(spec)} ids; expected one per state "
                                 f"({op.n})" + (f" or one per aggregate of level {k} ({H.sizes[-1]})" if k else ""))
            _, agg = np.unique(arr, return_inverse=True)
        if unit_of_state is not None:
            unit_of_state = np.where(full_support, agg[np.maximum(unit_of_state, 0)], -1)
        H.add_level(agg)
        y = H.restrict(len(H.chains) - 2, y)
    while H.sizes[-1] > coarse_size:
        l = len(H.chains) - 1
        if l == 0:
            H.smooth(0, x, _SETUP_SWEEPS, symmetric)
            agg = np.where(support, AUTOMATIC[aggregation](H.fine_strength(x)), -1)
            # local ids -> global ids: offsets by process
            counts = op.gather(np.array([float(agg.max(initial=-1) + 1)]), "all")
            agg = np.where(agg >= 0, agg + int(counts[:op.rank].sum()), -1)
            m = int(op.allmax(float(agg.max(initial=-1)))) + 1
        else:
            y = y / y.sum()
            for _ in range(_SETUP_SWEEPS):
                H.chains[l].sweep(y, "forward")
            agg = AUTOMATIC[aggregation](H.chains[l].strength(y))
            m = int(agg.max()) + 1
        if m > 0.9 * H.sizes[-1] or m < 2:
            break                       # the graph no longer coarsens (or to a single aggregate)
        H.add_level(agg)
        y = H.restrict(l, y)
    return H


def cycle(H, l, x, shape, pre, post, symmetric):
    """One cycle of shape ``shape`` at level ``l`` on the iterate ``x`` (in place); False on breakdown."""
    last = len(H.chains) - 1
    if l == last:
        x[:] = H.chains[l].solve()
        return True
    if not H.smooth(l, x, pre, symmetric):
        return False
    X = H.restrict(l, x)
    y = X / X.sum()
    visits = {"V": ("V",), "W": ("W", "W"), "F": ("F", "V")}[shape]
    for v in visits:
        if not cycle(H, l + 1, y, v, pre, post, symmetric):
            return False
    H.restrictions[l].prolong(x, X, y * X.sum())
    if post:
        return H.smooth(l, x, post, symmetric)
    if l == 0:
        x /= H.op.allsum(float(x.sum()))
    return True


def iterate(op, support, H, x, opts, *, pre, post, symmetric, shape, label):
    """Cycles until the stopping rule of the other iterations holds (:class:`ctmc.kernels.sweeps.Stop`)."""
    stop = Stop(op, opts)
    with Progress(f"stationary ({label})", opts.progress) as prog:
        status, it = Status.MAX_ITERATIONS, 0
        for it in range(1, opts.maxiter + 1):
            try:
                ok = cycle(H, 0, x, shape, pre, post, symmetric)
            except (ValueError, ZeroDivisionError) as exc:
                return None, it, Status.BREAKDOWN, f"{label}: the coarse solve failed ({exc})"
            if not ok:
                return None, it, Status.BREAKDOWN, f"{label}: the iteration diverged"
            r = op.apply(x, transpose=True)
            if stop(it, x, r):
                status = Status.SUCCESS
                break
            if not np.isfinite(stop.rel):
                return None, it, Status.BREAKDOWN, f"{label}: the iteration diverged"
            prog.residual(stop.rel, opts.tol, f"cycle {it}")
    return x, it, status, None


def multilevel(op, support, opts: MultilevelOptions, hint, ctx):
    """The ``multilevel`` stationary method (registered in :data:`ctmc.stationary.METHODS`)."""
    specs = _level_specs(opts.aggregates)
    x = np.ascontiguousarray(start_vector(op, support, opts.x0))
    if (x[support] <= 0).any():
        raise ValueError("x0: multilevel needs a positive initial guess on the closed class")
    if not specs and ctx.size <= opts.coarse_size:
        x, its, status, msg = gth_dense(op, support)
        ctx.info.update(levels=1, coarse_sizes=[], cycles=0)
        return x, its, status, f"multilevel: {ctx.size} states <= coarse_size, {msg}"
    sweeper = Sweeper(op, support)
    H = build(op, support, specs, sweeper, opts.coarse_size, x, symmetric=opts.smoother == "symmetric",
              aggregation=opts.aggregation)
    coarsest = H.sizes[-1]
    ctx.info.update(levels=len(H.sizes), coarse_sizes=H.sizes[1:], cycle=opts.cycle)
    if coarsest > _MAX_COARSE:
        raise ValueError(f"aggregates: the coarsest chain has {coarsest} aggregates and automatic coarsening "
                         f"cannot reduce it further; at most {_MAX_COARSE} can be solved exactly (give coarser "
                         "aggregates)")
    x, it, status, msg = iterate(op, support, H, x, opts, pre=opts.pre_sweeps, post=opts.post_sweeps,
                                 symmetric=opts.smoother == "symmetric", shape=opts.cycle, label="multilevel")
    ctx.info["cycles"] = it
    if msg is None:
        msg = (f"multilevel aggregation-disaggregation, {len(H.sizes)} levels {H.sizes}, {opts.cycle}-cycles: "
               f"{'converged in' if status is Status.SUCCESS else 'not converged after'} {it} cycles")
    return x, it, status, msg

