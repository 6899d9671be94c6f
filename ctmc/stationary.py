r"""Stationary distribution of a finite CTMC, written once for every backend.

Problem
-------
Given a generator :math:`Q` with one closed class, find the row vector
:math:`\pi \ge 0` with

.. math::

    \pi Q = 0, \qquad \sum_i \pi_i = 1 .

:math:`\pi` vanishes on transient states, so every method works on the closed
class :math:`C` (:func:`ctmc.kernels.classes.sole_closed_class`: the strongly connected components of
``Q``'s rows on scipy, reachability both ways elsewhere) and embeds the
answer. The methods are written on the primitives of
:mod:`ctmc.backends.base`, so each runs on every backend (``"scipy"``,
``"petsc"``) with the same options.

Methods (the registry :data:`METHODS`)
--------------------------------------
``gth``
    Grassmann-Taksar-Heyman elimination on a dense copy of the class.
    Subtraction-free: every probability, however small, comes out with
    relative accuracy near machine precision (redone in extended precision where
    rates spanning beyond the double range made it leave it:
    :func:`ctmc.kernels.sweeps.gth_dense`). :math:`O(n^3)`; for chains up
    to a few thousand states.
``lu``
    Sparse direct solve of the *pinned* system. Fix :math:`\pi_p = 1` for one
    state :math:`p` and solve :math:`(-Q_{XX})^T x = R_{p,X}^T` on
    :math:`X = C \setminus \{p\}` (a nonsingular M-matrix), then normalise.
    Removing one row and column keeps the sparsity; the factorisation uses
    diagonal pivots (the matrix is column diagonally dominant), so the
    fill-reducing ordering is kept. The pin matters for tail accuracy: the
    computed :math:`x` carries errors of the order of :math:`\epsilon \max x`,
    so pinning a low-probability state drowns the other small probabilities.
    ctmc pins the model's initial state (or the state with the slowest exit
    rate) and re-pins by :func:`ctmc.kernels.classes.next_pin`.
``gmres``, ``bicgstab``
    Krylov solvers on the same pinned system, with an incomplete-LU (on each
    process's block when distributed), Jacobi or no preconditioner.
``power``
    Power iteration on the uniformised :math:`P = I + Q/\Lambda`, :math:`\Lambda = 1.02 \max_i |q_{ii}|`.
``gauss_seidel``, ``sor``
    (Successive over-)relaxation on :math:`Q^T x = 0`, renormalised each
    sweep (on each process's block when distributed, the other blocks taken
    from the previous sweep).
``eig``
    The eigenvector of :math:`P^T` for the eigenvalue 1 by an implicitly
    restarted Krylov eigensolver (ARPACK on scipy, SLEPc Krylov-Schur on PETSc).
``level_iad``
    Iterative aggregation-disaggregation for chains whose transitions move a
    *level* (a variable or expression, option ``levels``) by exactly one:
    an exact birth-death solve on the level, then Gauss-Seidel by levels.
    For many-dimensional chains (occupancy chains) where LU fills in badly.
``multilevel``
    Multilevel aggregation-disaggregation cycles (:mod:`ctmc.aggregation`) on
    given or automatic aggregates, with Gauss-Seidel smoothing; for nearly
    completely decomposable chains, where plain sweeps stall.
``given``
    A law computed elsewhere (option ``x0``), graded and bounded like the answers above (:mod:`ctmc.given`).
``auto``
    Chosen by the class's structure, measured cheaply before any heavy work (:func:`structure_facts`,
    :func:`auto_plan`): ``gth`` up to 1000 states; ``lu`` when the chain is banded in state order or has
    at most two dimensions (state variables that vary on the class); on many-dimensional chains, where a
    direct solve fills in badly, BiCGStab then GMRES with a Gauss-Seidel preconditioner and tail polish,
    then Gauss-Seidel sweeps for as long as their rate of convergence predicts success within 500
    sweeps, then ``lu``, then ``power``. A method that breaks down, runs out of memory or (for the
    probes) stalls or leaves a noisy tail hands over to the next; ``info["auto"]`` records the facts,
    the plan and why, and ``info["fallbacks"]`` what failed. The plan fits a memory budget (option
    ``memory``, default 90 % of the available memory; :func:`ctmc.kernels.plan.memory_plan`): the GMRES
    basis that fits, else BiCGStab and Gauss-Seidel sweeps (``info["auto"]["memory_plan"]`` says why),
    and a budget too small for the error bound's solve is an error before any solve. When no planned
    method succeeds on a class small enough for it (:func:`ctmc.kernels.plan.dense_fallback`: up to 4000
    states, its dense matrix within the budget), ``gth`` is the last resort
    (``info["auto"]["last_resort"]``; the failures in ``info["fallbacks"]``).

Evidence
--------
Every result carries ``residual`` :math:`= \|\pi Q\|_1`, ``balance_error`` :math:`= \max_j |(\pi Q)_j| /
(\pi_j |q_{jj}|)` and ``error_bound``, recomputed from the generator (from :math:`sQ`, ``info["rate_scale"]``
:math:`= s` a power of two, where the largest exit rate is outside :data:`~ctmc.backends.base.RATE_RANGE`)
and graded by one rule for every method and backend (:mod:`ctmc.kernels.evidence`); a Krylov solve's
return times are solved beside it on another core (:mod:`ctmc.kernels.ahead`).

References
----------
W. K. Grassmann, M. I. Taksar, D. P. Heyman, "Regenerative analysis and
steady state distributions for Markov chains", Operations Research 33 (1985).
W. J. Stewart, *Introduction to the Numerical Solution of Markov Chains*,
Princeton University Press (1994), chapters 2-4.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.sparse as sp

from ._relax import product, sweep
from ._util import available_memory
from .aggregation import MultilevelOptions, level_factors, multilevel
from .given import GivenOptions, given
from .progress import Progress, scoped
from .backends import check_backend_options, operator_for
from .backends.base import SolveReport
from .kernels.classes import (closed_classes, count, describe_classes, global_argmax, next_pin, pin_hint,
                              slowest_exit, sole_closed_class, walk_pin)
from .kernels.evidence import (NEGATIVE_TOL, balance_error, correction_estimate, error_bound, grade, grade_bound,
                               gth_bound, return_time_bound, stationary_evidence, value_at)
from .kernels import plan
from .kernels.ahead import ReturnTimesAhead, bound_ahead, close_ahead
from .kernels.levels import (LEVEL_IAD_TAIL_GAP, FrozenBorder, OrderedStates, by_level, fed_states, level_steps,
                             live_order, polish_levels, run_sums)
from .kernels.plan import auto_plan, probe_restart, structure_facts
from .kernels.registry import Method, deprecated_aliases
from .kernels.sweeps import (POLISH_BUDGET, Stop, Sweeper, checked_sweeps, gth_dense, ordered_sweeper,
                             polish_pair, polish_sweeps, start_vector, state_levels)
from .kernels.tail import tail_evidence
from .options import (DirectOptions, GTHOptions, KrylovSolverOptions, Tolerances, integer_in as _integer_in,
                      linear_spec, make_options as _make_options, positive as _positive, tail_bound_flag)
from .results import ReducibleChainError, SolverError, StationaryResult, Status
from .sets import unit_mask

__all__ = ["METHODS", "Method", "GTHOptions", "LUOptions", "IterativeOptions", "SOROptions", "KrylovOptions",
           "EigOptions", "LevelIADOptions", "MultilevelOptions", "GivenOptions", "AutoOptions", "stationary",
           "structure_facts", "probe_restart", "walk_pin", "polish_sweeps", "return_time_bound",
           "error_bound", "correction_estimate", "stationary_evidence", "grade", "next_pin", "closed_classes",
           "NEGATIVE_TOL"]

_TINY = np.finfo(float).tiny


#: old names, reachable with a DeprecationWarning naming the one name
__getattr__ = deprecated_aliases(__name__, {
    "StationaryOptions": ("ctmc.options.Tolerances", Tolerances),
    "make_options": ("ctmc.options.make_options('stationary', ctmc.stationary.METHODS, method, options)",
                     lambda method, options: _make_options("stationary", METHODS, method, options))})


# --------------------------------------------------------------------------
# options: one frozen class per method, the same on every backend
# --------------------------------------------------------------------------
def _check_pin(pin):
    if pin is not None and (isinstance(pin, bool) or not isinstance(pin, (int, np.integer)) or pin < 0):
        raise ValueError(f"pin: expected a state index >= 0, got {pin!r}")


@dataclass(frozen=True)
class LUOptions(DirectOptions):
    """Options of ``lu``: the ordering (:class:`ctmc.options.DirectOptions`), and the pin.

    Attributes
    ----------
    pin : int, optional
        State whose probability is fixed before normalising (default: the
        model's initial state, else the state with the slowest exit rate).
    repin : float
        Solve again pinned at the most probable state when
        ``pi[pin] < repin * max(pi)``.
    """

    pin: Optional[int] = None
    repin: float = 1e-3

    def __post_init__(self):
        super().__post_init__()
        _check_pin(self.pin)
        _positive("repin", self.repin)


@dataclass(frozen=True)
class IterativeOptions(Tolerances):
    """Options of ``power`` and ``gauss_seidel``.

    Attributes
    ----------
    maxiter : int
        Iteration (sweep) limit.
    x0 : array_like, optional
        Initial guess (default uniform on the closed class).
    progress : bool, optional
        Report the residual on stderr during long runs (default: when stderr
        is a terminal); False silences it.
    """

    maxiter: int = 100_000
    x0: Optional[np.ndarray] = None

    def __post_init__(self):
        super().__post_init__()
        _positive("maxiter", self.maxiter, integer=True)


@dataclass(frozen=True)
class SOROptions(IterativeOptions):
    """Options of ``sor``: those of ``gauss_seidel`` and ``omega`` (0 < omega < 2)."""

    omega: float = 1.0

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.omega, bool) or not isinstance(self.omega, (int, float)) or not 0 < self.omega < 2:
            raise ValueError(f"omega: expected 0 < omega < 2, got {self.omega!r}")


@dataclass(frozen=True)
class KrylovOptions(KrylovSolverOptions):
    """Options of ``gmres`` and ``bicgstab``: the Krylov settings
    (:class:`ctmc.options.KrylovSolverOptions`), ``pin``, ``repin`` as for
    ``lu``, and ``polish``: at most that many symmetric Gauss-Seidel sweeps
    after convergence, until the small probabilities balance too (:data:`POLISH_BUDGET`; 0: none)."""

    polish: int = POLISH_BUDGET
    pin: Optional[int] = None
    repin: float = 1e-3

    def __post_init__(self):
        super().__post_init__()
        _check_pin(self.pin)
        _positive("repin", self.repin)


@dataclass(frozen=True)
class EigOptions(Tolerances):
    """Options of ``eig``: ``maxiter`` (restarts, 10 000), ``ncv`` (basis size, the backend's default
    if None) and ``polish`` as for ``gmres``."""

    maxiter: Optional[int] = 10_000
    ncv: Optional[int] = None
    polish: int = POLISH_BUDGET

    def __post_init__(self):
        super().__post_init__()
        _integer_in("polish", self.polish)
        if self.maxiter is not None:
            _positive("maxiter", self.maxiter, integer=True)
        if self.ncv is not None:
            _positive("ncv", self.ncv, integer=True)


@dataclass(frozen=True)
class LevelIADOptions(Tolerances):
    """Options of ``level_iad``.

    Attributes
    ----------
    levels : str, Expr or array_like of int
        The level of each state: a state variable's name, an expression of the
        model's variables, or one integer per state. Every transition must
        change it by exactly +-1.
    maxiter : int
        Iteration limit (one aggregation and one symmetric sweep each).
    x0 : array_like, optional
        Positive initial guess (default uniform).
    progress : bool, optional
        Report the residual on stderr during long runs.
    """

    levels: object = None
    maxiter: int = 1000
    x0: Optional[np.ndarray] = None

    def __post_init__(self):
        super().__post_init__()
        _positive("maxiter", self.maxiter, integer=True)
        if self.levels is None:
            raise ValueError("levels: level_iad needs the level of each state (a variable name, an expression "
                             "or an integer array)")


@dataclass(frozen=True)
class AutoOptions(Tolerances):
    """Options of ``auto``: the shared tolerances, passed to the method it chooses, and

    Attributes
    ----------
    memory : float, optional
        The bytes the solve may allocate beyond the generator (default: 90 % of the
        memory available when the plan is made, :func:`ctmc._util.available_memory`).
        The plan fits its GMRES basis into it, or takes BiCGStab and Gauss-Seidel
        sweeps where no basis fits (:func:`ctmc.kernels.plan.memory_plan`); a budget
        below what the error bound's solve needs is an error, before any solve.
    """

    memory: Optional[float] = None

    def __post_init__(self):
        super().__post_init__()
        if self.memory is not None:
            _positive("memory", self.memory)


# --------------------------------------------------------------------------
# methods: each takes (op, support, opts, hint, context) and returns
# (x owned or None, iterations, status, message); x need not be normalised
# --------------------------------------------------------------------------
@dataclass
class _Context:
    info: dict
    backend_options: dict
    size: int  # states in the class
    tail: bool = False  # the tail bound asked for (stationary's tail_bound)


def _gth(op, support, opts: GTHOptions, hint, ctx):
    if ctx.size > opts.max_states:
        raise ValueError(f"method: gth is dense O(n^3) and limited to max_states={opts.max_states}; "
                         f"this class has {ctx.size} states (use 'lu' or raise max_states)")
    return gth_dense(op, support, ctx.info)


def _pinned(kind: str):
    """Pinned sparse solve (direct or Krylov) with the re-pin rule :func:`next_pin`."""
    def run(op, support, opts, hint, ctx):
        info = ctx.info
        if ctx.size == 1:
            return support.astype(float), 0, Status.SUCCESS, "single state"
        slowest = slowest_exit(op, support)
        if opts.pin is not None:
            if opts.pin >= op.n:
                raise ValueError(f"pin: state index must be < {op.n}, got {opts.pin}")
            pin = int(opts.pin)
        elif kind == "lu":
            pin = pin_hint(op, support, hint)
        else:
            # a Krylov solve pinned on a negligible-probability state (a user's initial state often is
            # one) stalls for its whole iteration budget before a re-pin can help: a short random walk
            # finds a probable state (on one process; the slowest-exit state on several)
            pin = walk_pin(op, support, hint) if op.size == 1 else slowest
            info["pin_rule"] = "random walk" if op.size == 1 else "slowest exit"
        spec = linear_spec(kind, opts)
        info["pins"] = []
        x, rep, its = None, SolveReport(), 0
        for attempt in range(3):
            info["pins"].append(pin)
            e = unit_mask(op, pin)
            try:
                sysm = op.system(support & ~e, 0.0, spec, ctx.backend_options)
            except MemoryError as exc:
                return None, its, Status.BREAKDOWN, f"{kind}: out of memory ({exc})"
            try:
                sysm.prepare(transpose=True)     # (a Krylov set-up frees Q^T before b is made beside it)
                if kind != "lu" and "_ahead" not in info:      # the bound's return times on another core
                    info["_ahead"] = ReturnTimesAhead.start(op, support, pin, ctx.size, ctx.backend_options)
                t0 = time.perf_counter()         # b, the row of R off the pin, held by the solve alone (its
                b = np.where(support & ~e, _row_of_R(op, pin), 0.0)     # vector may become the iterate's);
                e = None                         # the pin's mask is made again after it, not held beside it
                x, rep = sysm.solve(b, transpose=True, overwrite_b=True)
                b = None
                info["solve_seconds"] = time.perf_counter() - t0
                info.update(sysm.info)
                if kind == "lu" and rep.status is Status.SUCCESS:
                    # the condition estimate of the error bound, from the same factors
                    tb = time.perf_counter()
                    rt = {}
                    info["_return"] = (pin, return_time_bound(op, support, pin, system=sysm, info=rt),
                                       rt.get("return_time_upper"))
                    info["error_bound_seconds"] = time.perf_counter() - tb
            finally:
                sysm.close()
            its += rep.iterations
            e = unit_mask(op, pin)
            x[e] = 1.0
            if rep.status is Status.BREAKDOWN or not np.all(np.isfinite(x)):
                # an overflow (a pin of negligible probability: x ~ 1/pi_pin) points at the
                # probable states: the largest entry, infinities included
                big = global_argmax(op, np.nan_to_num(x, nan=-np.inf, posinf=np.finfo(float).max))[1]
                nxt = slowest if slowest not in info["pins"] else (big if big not in info["pins"] else None)
            else:
                xmax, top = global_argmax(op, x)
                xmin = op.allmin(float(x.min()) if x.size else np.inf)
                xp = value_at(op, x, pin)
                nxt = next_pin(xmax, top, xmin, xp, info["pins"], slowest, opts.repin,
                               argabs=global_argmax(op, np.abs(x))[1])
            if attempt == 2 or nxt is None:
                break
            info["failed_pin"] = f"state {pin}: {rep.reason}" if rep.status is Status.BREAKDOWN else None
            pin = nxt
        if rep.status is Status.BREAKDOWN:
            return None, its, rep.status, f"{kind}: {rep.reason}"
        msg = f"{kind} pinned at state {pin}" + (f" ({rep.reason})" if rep.reason else "")
        sysm = e = None                      # (their masks not held beside the polish's Q^T)
        if kind != "lu" and rep.status is Status.SUCCESS:
            x = _polish(op, support, x, opts, ctx)
        return x, its, rep.status, msg
    return run


def _row_of_R(op, i):
    """Owned part of row ``i`` of ``R`` (``R_ij`` at the owned ``j``)."""
    return op.rates(unit_mask(op, i).astype(float), transpose=True)


def _power(op, support, opts: IterativeOptions, hint, ctx):
    """Power iteration ``x <- x + x Q / lam`` (renormalised every 10 steps), stopped by :class:`Stop`
    checked sparsely (:func:`checked_sweeps`); a check's product ``x Q`` serves the next step."""
    lam = 1.02 * op.qmax
    ctx.info["uniformization_rate"] = lam
    x = start_vector(op, support, opts.x0)
    stop = Stop(op, opts)
    last = [None, None]                      # (iterate number, x Q) of the last check

    def step(it, x):                         # iterate it from iterate it - 1
        if it > 0:
            r = last[1] if last[0] == it - 1 else op.apply(x, transpose=True)
            r /= lam                         # x + r / lam, in place: the same rounding
            x += r
            if it % 10 == 0:
                x /= op.allsum(float(x.sum()))
        return True

    def check(it, x):
        last[:] = it, op.apply(x, transpose=True)
        return stop(it, x, last[1])

    with Progress("stationary (power)", opts.progress) as prog:
        it, out = checked_sweeps(step, x, check, stop, 0, opts.maxiter - 1,
                                 on_check=lambda it: prog.residual(stop.rel, opts.tol, f"iteration {it}"))
    if out:
        return x, it, Status.SUCCESS, f"power: converged in {it} iterations"
    step(opts.maxiter, x)
    return x, opts.maxiter, Status.MAX_ITERATIONS, f"power: not converged after {opts.maxiter} iterations"


def _sor(op, support, opts: IterativeOptions, hint, ctx):
    """Gauss-Seidel / SOR sweeps on ``Q^T x = 0`` (:class:`Sweeper`) with the stopping rule :class:`Stop`,
    checked sparsely where it cannot change its answer (:func:`checked_sweeps`)."""
    omega = float(getattr(opts, "omega", 1.0))
    ctx.info["omega"] = omega
    sweeper = Sweeper(op, support)
    x = np.ascontiguousarray(start_vector(op, support, opts.x0))
    stop = Stop(op, opts)
    with Progress(f"stationary (sor, omega={omega})", opts.progress) as prog:
        it, out = checked_sweeps(lambda it, x: sweeper(x, omega), x,
                                 lambda it, x: stop(it, x, op.apply(x, transpose=True)), stop, 1,
                                 opts.maxiter, on_check=lambda it: prog.residual(stop.rel, opts.tol, f"sweep {it}"))
    if out is False:
        return None, it, Status.BREAKDOWN, "iteration diverged"
    if out:
        return x, it, Status.SUCCESS, f"converged in {it} sweeps"
    return x, opts.maxiter, Status.MAX_ITERATIONS, f"not converged after {opts.maxiter} sweeps"


def _gs_probe(op, support, opts, hint, ctx, budget: int = 500, window: int = 10):
    """Gauss-Seidel sweeps as a probe of ``auto``: given up as soon as they stall.

    The normwise tolerance is a hundredth of the one asked (the sweeps are
    cheap; the measure then carries about that much fewer digits of error).
    Every ``window`` sweeps the residual's geometric rate of decrease predicts
    how many sweeps are left; the probe stops (``MAX_ITERATIONS``) when that
    prediction exceeds the budget, or at once when the residual grows.
    """
    tight = IterativeOptions(tol=opts.tol * 1e-2, tail_tol=opts.tail_tol)
    sweeper = Sweeper(op, support)
    x = np.ascontiguousarray(start_vector(op, support, None))
    stop = Stop(op, tight)
    history = {}

    def stalls(it):
        history[it] = stop.rel
        if it % window == 0 and it > window and stop.norm_it is None:
            rho = (history[it] / history[it - window]) ** (1.0 / window)
            left = np.log(tight.tol / history[it]) / np.log(rho) if rho < 1 else np.inf
            if it + left > budget:
                return f"gauss_seidel stalls: {left:.0f} more sweeps predicted (rate {rho:.4f} per sweep)"
        return None

    it, out = checked_sweeps(lambda it, x: sweeper(x), x,
                             lambda it, x: stop(it, x, op.apply(x, transpose=True)), stop, 1, budget, on_check=stalls, must_check=lambda it: it % window == 0)
    if out is False:
        return None, it, Status.BREAKDOWN, "gauss_seidel probe: the iteration diverged"
    if out is True:
        return x, it, Status.SUCCESS, f"gauss_seidel: converged in {it} sweeps"
    if out is not None:
        return x, it, Status.MAX_ITERATIONS, out
    return x, budget, Status.MAX_ITERATIONS, f"gauss_seidel: not converged in {budget} sweeps"


def _balance(op, x):
    """The balance error of an owned, normalised iterate (global)."""
    return balance_error(op, x)                    # x Q by blocks of rows: no vector beside Q^T (the polish's)


def _polish(op, support, x, opts, ctx):
    """Symmetric Gauss-Seidel sweeps from a converged Krylov/eigen answer until its tail balances.

    A Krylov solve stopped on a normwise residual leaves the small probabilities as noise; sweeps
    correct them state by state by the rule of :func:`polish_sweeps` (compiled; up to ``opts.polish``;
    ``info["polish_stop"]`` says how it ended), from the 26th on with aggregation steps on the levels of a
    variable :func:`~ctmc.kernels.levels.polish_levels` finds (``info["polish_levels"]``), which the
    sweeps alone cross a level a sweep (tandem c=511: 1159 symmetric sweeps, 127 with the steps).
    Returns the polished iterate (owned part).
    """
    if not getattr(opts, "polish", 0):
        return x
    neg = int(op.allsum(float(np.count_nonzero(support & (x < 0)))))
    if neg:
        ctx.info["negative_states"] = neg   # reported even when the sweeps repair them
    x = np.ascontiguousarray(x, dtype=float)       # in place: the solve's own answer, no copy beside Q^T
    np.copyto(x, 0.0, where=~support | (x < 0))
    x /= op.allsum(float(x.sum()))
    bal = _balance(op, x)
    ctx.info["balance_before_polish"] = bal
    if bal <= opts.tail_tol:
        return x
    lev = polish_levels(op, support, getattr(ctx.info.get("_ahead"), "pin", None), bal)
    run = polish_sweeps(polish_pair(op, support, x, lev), lambda: _balance(op, x), opts.polish, opts.tail_tol)
    ctx.info.update(polish_sweeps=run.sweeps, polish_stop=run.describe(opts.tail_tol),
                    **(lev.info() if lev else {}))
    op.release()        # the Q^T the sweeps read: the answer's evidence reads Q's rows (the same numbers)
    return x


def _eig(op, support, opts: EigOptions, hint, ctx):
    if ctx.size < 3:
        return gth_dense(op, support, ctx.info)
    x, rep = op.null_vector(support, tol=opts.tol * 1e-2, maxiter=opts.maxiter, ncv=opts.ncv,
                            backend_options=ctx.backend_options)
    ctx.info.update(rep.info)
    if x is None:
        return None, rep.iterations, Status.BREAKDOWN if rep.status is Status.SUCCESS else rep.status, rep.reason
    sign = np.sign(op.allsum(float(x.sum()))) or 1.0
    x = x * sign
    if rep.status is Status.SUCCESS and op.allmin(float(x.min(initial=0.0))) >= -NEGATIVE_TOL * op.allmax(
            float(x.max(initial=0.0))):
        x = _polish(op, support, x, opts, ctx)
    return x, rep.iterations, rep.status, rep.reason


#: ``level_iad`` goes on past twice the iterations of its normwise convergence while its balance
#: error (or the count of states above tail_tol, :class:`Stop`) falls by 10 % over this many
#: iterations: the level law converges in a few dozen, the far tail as a front (JSQ K=1000 from its
#: model's start floored at 1e-310: normwise at 23, balance 0.13 at 100, 0.088 at 250, 1.5e-15 at 400)
LEVEL_IAD_PATIENCE = 100


def _level_iad(op, support, opts: LevelIADOptions, hint, ctx):
    r"""Iterative aggregation-disaggregation on a level that every transition moves by +-1.

    When every transition raises or lowers a *level* :math:`L` by one (the total
    number of jobs of a queueing network, say), :math:`Q` is block tridiagonal
    in :math:`L` with empty diagonal blocks. The slow mode of such a chain is
    usually the fluctuation of :math:`L`; the profile at a fixed level mixes
    fast. Each iteration therefore

    1. *aggregates* the iterate into the birth-death chain of :math:`L` (birth
       rate :math:`a_L = E[\text{up rate} \mid L]`, death rate
       :math:`d_L = E[\text{down rate} \mid L]`), solves it exactly in logs
       (:math:`p_{L+1}/p_L = a_L / d_{L+1}`) and rescales the iterate level by
       level to these masses (Takahashi 1975; Stewart 1994, ch. 6), then
    2. runs a forward and a backward Gauss-Seidel sweep ordered by level: the
       states of a level only exchange probability with the two neighbouring
       levels, so a level's states may be updated in any order (on each process's
       block when distributed, PETSc's ``MatSOR``: other blocks from before the sweep).

    It stops by the rule of the other iterations (:class:`Stop`), going on past its normwise
    cap while the balance error or its count still falls (:data:`LEVEL_IAD_PATIENCE`).
    """
    lev_full = state_levels(op, opts.levels)
    lev = lev_full[op.start:op.stop]
    out_rows = op.local_rows().tocoo()
    keep = support[out_rows.row]
    step = lev_full[out_rows.col[keep]] - lev[out_rows.row[keep]]
    bad = op.allsum(float(np.count_nonzero(np.abs(step) != 1)))
    if bad:
        raise ValueError("levels: every transition must change the level by exactly +-1 "
                         f"({int(bad)} transitions do not)")
    m = op.stop - op.start
    rows, vals = out_rows.row[keep], out_rows.data[keep]
    up = np.bincount(rows[step > 0], weights=vals[step > 0], minlength=m)
    down = np.bincount(rows[step < 0], weights=vals[step < 0], minlength=m)
    n_lev = int(op.allmax(float(lev[support].max(initial=0)))) + 1
    x = start_vector(op, support, opts.x0)
    if (x[support] <= 0).any():
        raise ValueError("x0: level_iad needs a positive initial guess on the closed class")
    ctx.info["_levels"] = lev_full             # for the return times of the error bound (_evaluate)
    return _level_iad_ordered(op, support, opts, ctx, lev, up, down, n_lev, x)


def _level_iad_ordered(op, support, opts, ctx, lev, up, down, n_lev, x0):
    """``level_iad`` with the iterate in level order (a level's states exchange no probability: any order
    within it), the level masses sums of consecutive entries (over the processes), swept by the compiled
    kernel on the matrix permuted once or by PETSc's ``MatSOR`` on each process's block
    (:func:`ordered_sweeper`). On one process the states :func:`live_states` leaves out come last, not swept
    unless the tail stalls or feeds them (``info["unfrozen_at"]``), and the stop reads the swept rows; on
    several every state is swept and the stop reads the iterate in state order (:func:`checked_sweeps`).
    Past the normwise cap the levels are rescaled less often."""
    # (one process with ctmc's compiled sweeps on a permuted copy; a backend's own ordered sweeps sweep all)
    one, own = op.size == 1 and not op.own_ordered_sweeps, op.stop - op.start
    order, ml = live_order(op.local_rows(), support, lev, x0) if one else by_level(support, lev)
    m, sw = order.size, ordered_sweeper(op, support, order, transpose=True)
    runs = [(a, b, np.bincount(lev[order[a:b]], minlength=n_lev)) for a, b in ((0, ml), (ml, m))]
    up_o, down_o, xo, zero = up[order], down[order], np.zeros(sw.size), np.zeros(sw.size)
    xo[:m] = x0[order]
    unordered = lambda v: np.bincount(order, weights=v[:m], minlength=own)    # noqa: E731 (exact: one a bin)
    if one:     # qo: the stop's exit rates, in that order; rows: the swept ones of A (a view)
        A, qo = sw.local, op.exit_rates[np.concatenate([order, np.flatnonzero(~support)])]
        rows = A if ml == m else sp.csr_matrix((A.data, A.indices, A.indptr[:ml + 1]), shape=(ml, op.n))
        relax = lambda v, d: sweep(rows, v, zero, 1.0, d)                     # noqa: E731
        border = FrozenBorder(A, qo, ml, m) if ml < m else None                # (left out, fed by the swept)
        check = lambda it, v: (stop(it, v[:rows.shape[0]], product(rows, v))   # noqa: E731 (the swept rows)
                               or rows is not A and border(v))
        stop = Stop(OrderedStates(op, qo[:rows.shape[0]]), opts, patience=LEVEL_IAD_PATIENCE)
    else:
        A = rows = None
        relax = lambda v, d: sw.relax_ordered(v, zero, d)                     # noqa: E731
        stop = Stop(op, opts, patience=LEVEL_IAD_PATIENCE)

        def check(it, v):                                      # (the iterate in state order)
            x = unordered(v)
            return stop(it, x, op.apply(x, transpose=True))

    def step(it, v):
        agg = stop.norm_it is None or it % LEVEL_IAD_TAIL_GAP == 0
        if agg:
            f = level_factors(*op.allsum(np.stack([sum(run_sums(w[a:b], c) for a, b, c in runs)
                                                   for w in (v[:m], v[:m] * up_o, v[:m] * down_o)])))
            for a, b, c in runs:
                v[a:b] *= np.repeat(f, c)
        relax(v, "forward")
        relax(v, "backward")
        s = op.allsum(float(v.sum() if agg or not one else v[:rows.shape[0]].sum()))   # (renormalised
        if agg and s > 0:                                                                # with the levels)
            v /= s
        return np.isfinite(s) and s > 0

    with Progress("stationary (level_iad)", opts.progress) as prog:
        on = lambda it: prog.residual(stop.rel, opts.tol, f"iteration {it}")    # noqa: E731
        it, out = checked_sweeps(step, xo, check, stop, 1, opts.maxiter, on_check=on)
        steps = level_steps(0, it, stop.norm_it)
        fed = ml < m and out is not False and fed_states(op, unordered(xo), order[ml:m])    # left out, fed
        if ml < m and (fed or out is True and not stop.bal <= opts.tail_tol) and it < opts.maxiter:
            ctx.info["unfrozen_at"], rows, first, fed = it, A, it, False          # every state swept again
            stop = Stop(OrderedStates(op, qo), opts, patience=LEVEL_IAD_PATIENCE)
            it, out = checked_sweeps(step, xo, check, stop, first + 1, opts.maxiter, on_check=on)
            steps += level_steps(first, it, stop.norm_it)
    ctx.info.update(levels=n_lev, level_aggregations=steps, swept_states=m if rows is A else ml)
    if out is False or not np.isfinite(stop.rel):
        return None, it, Status.BREAKDOWN, "level_iad: the iteration diverged"
    status = Status.SUCCESS if (out or stop.rel <= opts.tol) and not fed else Status.MAX_ITERATIONS  # +tail
    return unordered(xo), it, status, f"level aggregation + Gauss-Seidel by levels, {it} iterations"


#: stationary methods by name; ``auto`` is an entry like the others
METHODS: dict = {}


def _auto(op, support, opts: AutoOptions, hint, ctx):
    """Choose by structure (:func:`auto_plan`) within the memory budget (:func:`plan.memory_plan`),
    fall back when a method fails or stalls."""
    facts = structure_facts(op, support)
    steps, reason = auto_plan(facts)
    # the budget: one value on every process (PETSc needs it), from each one's share of its memory
    given = opts.memory is not None
    budget = float(opts.memory) if given else plan.BUDGET_FRACTION * available_memory()
    budget = op.allmin(budget / (1 if given else max(op.size, 1)))
    owned = int(op.allmax(float(op.stop - op.start)))
    per_state = (facts["transitions"] + facts["states"]) / max(facts["states"], 1)
    ctx.info["auto"] = dict(facts, plan=steps, reason=reason, memory_budget=budget)
    if len(steps) > 1 or steps[0] != "gth":
        released = op.allmin(float(op.releasable()))
        steps, restart, note = plan.memory_plan(steps, owned, int(per_state * owned), budget, given=given,
                                                released=released)
        ctx.info["auto"].update(plan=steps, probe_restart=restart)
        if note:
            ctx.info["auto"]["memory_plan"] = note
            ctx.info["auto"]["reason"] = f"{reason}; {note}"
    common = {"tol": opts.tol, "tail_tol": opts.tail_tol, "error_tol": opts.error_tol}
    tried, best, ended = [], None, None
    for i, m in enumerate(steps):
        name, kw, run = m, dict(common), None
        if m in ("gmres-probe", "gmres-long", "gmres"):
            name, kw = "gmres", dict(common, preconditioner="sgs", restart=restart)
            if m == "gmres-probe":      # a probe that does not converge stops early (gmres-long is not one)
                kw.update(maxiter=plan.PROBE_ITERATIONS, stall=plan.BICGSTAB_STALL)
        elif m in ("bicgstab-probe", "bicgstab-first-probe"):   # the lean Krylov step of a tight budget
            name, kw = "bicgstab", dict(common, preconditioner="sgs",     # (or the first of a plentiful one)
                                        maxiter=plan.PROBE_ITERATIONS if m == "bicgstab-probe"
                                        else plan.BICGSTAB_FIRST_ITERATIONS)
            if m == "bicgstab-first-probe":     # GMRES follows: a probe that does not converge stops early
                kw["stall"] = plan.BICGSTAB_STALL
        elif m == "gauss_seidel-probe":
            name, run = "gauss_seidel", _gs_probe
        o = METHODS[name].options(**kw)
        try:
            x, its, status, msg = (run or METHODS[name].run)(op, support, o, hint, ctx)
        except MemoryError as exc:
            tried.append(f"{m}: out of memory ({exc})")
            continue
        got, x = [x], None       # handed over: the raw answer is not held beside the law and its bound
        ev = _evaluate(op, support, got, status, msg, o, ctx, name)
        last = i == len(steps) - 1
        # an inaccurate direct solve is not improved by an iterative one: only a breakdown
        # (or a Krylov probe that stalls or leaves a noisy tail) moves on
        accept = ev.status is Status.SUCCESS or (not m.endswith("-probe") and ev.status is not Status.BREAKDOWN)
        if ev.pi is not None and (best is None or _quality(ev) < _quality(best[1])):
            best = ((x, its, status, msg), ev, name)
        ended = f"{m}: {ev.status.value} ({ev.message})"
        if accept or last:
            break
        tried.append(ended)
    if (best is None or best[1].status is not Status.SUCCESS) and "gth" not in steps \
            and plan.dense_fallback(ctx.size, budget):
        # every planned method failed: the dense subtraction-free elimination, exact on any conditioning
        if ended is not None and ended not in tried:
            tried.append(ended)
        ctx.info["auto"]["last_resort"] = "gth"
        try:
            x, its, status, msg = _gth(op, support, METHODS["gth"].options(**common), hint, ctx)
        except MemoryError as exc:
            x, its, status, msg = None, 0, Status.BREAKDOWN, f"out of memory ({exc})"
        ev = _evaluate(op, support, x, status, f"{msg}, the last resort after every planned method failed",
                       METHODS["gth"].options(**common), ctx, "gth")
        if ev.pi is None:
            tried.append(f"gth (last resort): {ev.status.value} ({ev.message})")
        if ev.pi is not None and (best is None or _RANK[ev.status] <= _RANK[best[1].status]):
            best = ((x, its, status, msg), ev, "gth")
    if best is None:
        raise SolverError("auto: every method failed: " + "; ".join(tried))
    out, ev, name = best
    ctx.info.update(chosen=name, evaluated=ev)
    if tried:
        ctx.info["fallbacks"] = tried
    return out


_RANK = {Status.SUCCESS: 0, Status.TAIL_INACCURATE: 1, Status.INACCURATE: 2, Status.MAX_ITERATIONS: 3,
         Status.BREAKDOWN: 4}


def _quality(ev) -> tuple:
    """What ranks auto's answers: the status, then (equal statuses) the smaller bound, then balance error."""
    finite = (lambda v: v if np.isfinite(v) else np.inf)
    return _RANK[ev.status], finite(ev.error_bound), finite(ev.balance)


METHODS.update({
    "auto": Method(_auto, AutoOptions, "chosen by the chain's structure (auto_plan), with fallbacks"),
    "gth": Method(_gth, GTHOptions, "dense subtraction-free elimination (GTH)"),
    "lu": Method(_pinned("lu"), LUOptions, "pinned sparse direct solve"),
    "gmres": Method(_pinned("gmres"), KrylovOptions, "pinned GMRES with a preconditioner"),
    "bicgstab": Method(_pinned("bicgstab"), KrylovOptions, "pinned BiCGStab with a preconditioner"),
    "power": Method(_power, IterativeOptions, "power iteration on the uniformised chain"),
    "gauss_seidel": Method(_sor, IterativeOptions, "Gauss-Seidel sweeps on Q^T x = 0"),
    "sor": Method(_sor, SOROptions, "successive over-relaxation on Q^T x = 0"),
    "eig": Method(_eig, EigOptions, "Krylov eigensolver for the eigenvalue 1 of the uniformised chain"),
    "level_iad": Method(_level_iad, LevelIADOptions,
                        "aggregation-disaggregation on a level moved by +-1, Gauss-Seidel by levels"),
    "multilevel": Method(multilevel, MultilevelOptions,
                         "multilevel aggregation-disaggregation cycles with Gauss-Seidel smoothing"),
    "given": Method(given, GivenOptions, "a law computed elsewhere (x0), graded and bounded like the others"),
})


# --------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------
@dataclass
class _Evaluated:
    """A raw solution normalised, clipped, with its evidence and graded status."""

    pi: Optional[np.ndarray]
    status: Status
    message: str
    residual: float = float("nan")
    balance: float = float("inf")
    underflow: int = 0
    info: dict = None
    error_bound: float = float("inf")


def _evaluate(op, support, x, status, msg, opts, ctx, method) -> _Evaluated:
    """Normalise a raw solution, recompute its evidence and grade it (:func:`grade`, :func:`grade_bound`)."""
    ret, levels = ctx.info.pop("_return", None), ctx.info.pop("_levels", None)
    x = x.pop() if isinstance(x, list) else x    # a list handed over: emptied (not held beside the bound)
    if x is None:
        return _Evaluated(None, status, msg, info={})
    x = np.where(support, x, 0.0)
    xmax = op.allmax(float(x.max()) if x.size else -np.inf)
    xmin = op.allmin(float(x.min()) if x.size else np.inf)
    tot = op.allsum(float(x.sum()))
    if not (np.isfinite(tot) and tot > 0 and np.isfinite(xmax)):
        return _Evaluated(None, Status.BREAKDOWN, f"{msg}; non-finite or zero solution", info={})
    negative = max(0.0, -xmin / xmax)
    info = {}
    if negative:
        info["negative_states"] = int(op.allsum(float(np.count_nonzero(x < 0))))
    # clip first, then normalise: the law sums to one (in place: the bound's solve holds one vector of it)
    pi = np.maximum(x, 0.0, out=x)
    pi /= op.allsum(float(pi.sum()))
    residual, bal, under, lost = stationary_evidence(op, pi)
    rel = residual / max(op.qmax, _TINY)
    status, msg = grade(status, msg, rel_residual=rel, balance=bal, lost=lost, negative=negative, opts=opts)
    info.update(relative_residual=rel, zero_with_inflow=lost)
    bound = np.inf if ctx.info.pop("_bound", True) else np.nan     # NaN: "given" with bound=False
    tb = time.perf_counter()
    if status in (Status.SUCCESS, Status.TAIL_INACCURATE) and not np.isnan(bound):
        if ctx.size == 1:
            bound = 0.0
        elif method == "gth":
            bound = info["tail_error_estimate"] = gth_bound(ctx.size)     # (entrywise: the tail's too)
            info["error_bound_kind"] = "estimate"
        elif ret is not None:            # a direct solve: proven, from the same factors
            pin, (m_bound, m_est), upper = ret
            bound = error_bound(op, support, pi, pin, m_bound, upper=upper)
            info.update(condition=m_est * op.qmax, return_time_state=pin, error_bound_kind="proven")
        else:       # an iterative method: its return times solved ahead if they were, else on levels
            bound, kind, pin = bound_ahead(ctx.info.get("_ahead") if levels is None else None, op, support, pi,
                                           ctx.size, ctx.backend_options, info, opts.error_tol, levels=levels)
            info.update(error_bound_kind=kind, return_time_state=pin)
        # graded by a proven bound only: the first-order estimate rests on a lower estimate of the condition
        status, msg = grade_bound(status, msg, bound if info.get("error_bound_kind") != "estimate"
                                  or method == "gth" else np.inf, opts)
        info["error_bound_seconds"] = ctx.info.pop("error_bound_seconds", 0.0) + time.perf_counter() - tb
        status, msg = tail_evidence(op, support, pi, bal, info, opts, status, msg,   # (ctmc.kernels.tail)
                                    ctx.size, ctx.backend_options, ctx.tail)
    return _Evaluated(pi, status, msg, residual, bal, under, info, bound)


def _solve_class(op, support, method, opts, hint, backend_options, t0, tail=False):
    ctx = _Context(info={}, backend_options=backend_options, size=count(op, support), tail=tail)
    try:
        if ctx.size == 1 and method != "given":      # "given" still checks its law there
            x, its, status, msg = support.astype(float), 0, Status.SUCCESS, "single absorbing state"
        else:
            x, its, status, msg = METHODS[method].run(op, support, opts, hint, ctx)
        used = ctx.info.pop("chosen", method)
        ev = ctx.info.pop("evaluated", None)
        if ev is None:
            ev = _evaluate(op, support, x, status, msg, opts, ctx, method)
    finally:                                     # the return times' thread ended, its system freed
        close_ahead(ctx.info.pop("_ahead", None))
    info = {**ev.info, **ctx.info, "processes": op.size}
    if ev.pi is None:
        return StationaryResult(method=used, backend=op.backend, status=ev.status, message=ev.message,
                                iterations=its, residual=float("nan"), wall_time=time.perf_counter() - t0,
                                info=info, pi=np.full(op.stop - op.start, np.nan), balance_error=float("inf"))
    return StationaryResult(method=used, backend=op.backend, status=ev.status, message=ev.message, iterations=its,
                            residual=ev.residual, wall_time=time.perf_counter() - t0, info=info, pi=ev.pi, balance_error=ev.balance, underflow=ev.underflow,
                            error_bound=ev.error_bound)


@scoped
def stationary(chain, method: str = "auto", *, backend: str = "scipy", check: bool = True,
               per_class: bool = False, backend_options=None, tail_bound: bool = False, **options):
    """Stationary distribution of ``chain``; see :meth:`ctmc.CTMC.stationary`.

    Examples
    --------
    >>> import ctmc
    >>> c = ctmc.CTMC([[-2.0, 2.0], [1.0, -1.0]])
    >>> [round(float(p), 12) for p in stationary(c, "lu").pi]
    [0.333333333333, 0.666666666667]
    """
    # everything the caller can get wrong is checked before any heavy work
    opts = _make_options("stationary", METHODS, method, options)
    tail_bound_flag(tail_bound, opts)
    bo = check_backend_options(backend, backend_options, getattr(opts, "preconditioner", None))
    mode = bo.pop("gather", None)
    t0 = time.perf_counter()
    op, scale = operator_for(chain, backend).normalised()      # the law is that of s Q (s = 1 mostly)
    mode = mode or op.default_gather
    hint = None if op.initial is None or len(op.initial) == 0 else int(op.initial[0])
    if per_class:
        classes = closed_classes(op, hint)
    else:
        sole = sole_closed_class(op, hint)
        classes = [sole]
        if sole is None:
            classes = closed_classes(op, hint, limit=6)
            raise ReducibleChainError(
                f"the chain has {'more than 5' if len(classes) > 5 else len(classes)} closed classes, so its "
                f"stationary distribution is not unique: {describe_classes(op, classes)}. Pass per_class=True for one "
                "law per class.", [np.flatnonzero(op.gather(C.astype(float), 'all') > 0.5) for C in classes])
    results = []
    for C in classes:
        res = _solve_class(op, C, method, opts, hint, bo, t0, bool(tail_bound))
        size = count(op, C)
        if size < op.n:
            res.info.update(closed_class_size=size, transient_states=op.n - size)
        if mode == "none":
            res.info["rows"] = (op.start, op.stop)
        res.info["rate_scale"] = scale                             # (pi Q = (pi sQ) / s)
        if "uniformization_rate" in res.info:
            res.info["uniformization_rate"] /= scale
        res = dataclasses.replace(res, pi=op.gather(res.pi, mode), residual=res.residual / scale)
        results.append(res.check(check))
    return results if per_class else results[0]
