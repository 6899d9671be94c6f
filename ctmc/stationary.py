r"""Stationary distribution of a finite CTMC, written once for every backend.

Problem
-------
Given a generator :math:`Q` with one closed class, find the row vector
:math:`\pi \ge 0` with

.. math::

    \pi Q = 0, \qquad \sum_i \pi_i = 1 .

:math:`\pi` vanishes on transient states, so every method works on the closed
class :math:`C` (found by reachability, :func:`closed_classes`) and embeds the
answer. The methods are written on the primitives of
:mod:`ctmc.backends.base`, so each runs on every backend (``"scipy"``,
``"petsc"``) with the same options.

Methods (the registry :data:`METHODS`)
--------------------------------------
``gth``
    Grassmann-Taksar-Heyman elimination on a dense copy of the class.
    Subtraction-free: every probability, however small, comes out with
    relative accuracy near machine precision. :math:`O(n^3)`; for chains up
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
    rate) and re-pins by :func:`next_pin`.
``gmres``, ``bicgstab``
    Krylov solvers on the same pinned system, with an incomplete-LU (on each
    process's block when distributed), Jacobi or no preconditioner.
``power``
    Power iteration on the uniformised chain :math:`P = I + Q/\Lambda`,
    :math:`\Lambda = 1.02 \max_i |q_{ii}|`.
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
``auto``
    Chosen by the class's structure, measured cheaply before any heavy work
    (:func:`structure_facts`, :func:`_auto_plan`): ``gth`` up to 1000
    states; ``lu`` when the chain is banded in state order or has at most two
    dimensions (state variables that vary on the class); on
    many-dimensional chains, where a direct solve fills in badly, GMRES with a
    Gauss-Seidel preconditioner and tail polish (at most 300 iterations), then
    Gauss-Seidel sweeps for as long as their rate of convergence predicts
    success within 500 sweeps, then ``lu``, then ``power``. A method that
    breaks down, runs out of memory or (for the probes) stalls or leaves a
    noisy tail hands over to the next; ``info["auto"]`` records the facts, the plan and why, and
    ``info["fallbacks"]`` what failed.

Evidence
--------
Every result carries ``residual`` :math:`= \|\pi Q\|_1` and
``balance_error`` :math:`= \max_j |(\pi Q)_j| / (\pi_j |q_{jj}|)`, the
relative mismatch between the probability flow into and out of each state,
both recomputed from the generator (:func:`stationary_evidence`). The grading
(:func:`grade`) is the same for every method and backend: significant
negative entries make the answer ``INACCURATE``; round-off negatives are set
to 0 and, like a large balance error or a zero probability with a positive
inflow, make it ``TAIL_INACCURATE`` (a warning), so a wrong tail is never
silent. The balance check is necessary, not sufficient: an error that varies
smoothly from state to state can pass it.

References
----------
W. K. Grassmann, M. I. Taksar, D. P. Heyman, "Regenerative analysis and
steady state distributions for Markov chains", Operations Research 33 (1985).
W. J. Stewart, *Introduction to the Numerical Solution of Markov Chains*,
Princeton University Press (1994), chapters 2-4.
"""
from __future__ import annotations

import bisect
import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp

from ._sparse_lu import natural_is_cheap
from ._util import available_memory
from .progress import Progress, scoped
from .backends import check_backend_options, operator_for
from .backends.base import UNIT_ROUNDOFF, LinearSpec, SolveReport
from .linalg import gth_solve, inverse_norm_bound
from .options import DirectOptions, GTHOptions, KrylovSolverOptions, Tolerances, grade_bound, linear_spec
from .options import make_options as _make_options
from .options import integer_in as _integer_in
from .options import positive as _positive
from .results import ReducibleChainError, SolverError, StationaryResult, Status
from .sets import unit_mask as _unit

__all__ = ["METHODS", "Method", "StationaryOptions", "GTHOptions", "LUOptions", "IterativeOptions",
           "SOROptions", "KrylovOptions", "EigOptions", "LevelIADOptions", "MultilevelOptions", "AutoOptions",
           "stationary", "make_options",
           "stationary_evidence", "grade", "next_pin", "closed_classes", "NEGATIVE_TOL"]

_TINY = np.finfo(float).tiny


# --------------------------------------------------------------------------
# options: one frozen class per method, the same on every backend
# --------------------------------------------------------------------------
def _check_pin(pin):
    if pin is not None and (isinstance(pin, bool) or not isinstance(pin, (int, np.integer)) or pin < 0):
        raise ValueError(f"pin: expected a state index >= 0, got {pin!r}")


#: the tolerances every stationary method takes (``tol`` on ``||pi Q||_1 / max|q_ii|``)
StationaryOptions = Tolerances


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
class IterativeOptions(StationaryOptions):
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
    after convergence, until the small probabilities balance too (0: none)."""

    pin: Optional[int] = None
    repin: float = 1e-3

    def __post_init__(self):
        super().__post_init__()
        _check_pin(self.pin)
        _positive("repin", self.repin)


@dataclass(frozen=True)
class EigOptions(StationaryOptions):
    """Options of ``eig``: ``maxiter`` (restarts, 10 000), ``ncv`` (basis size, the backend's default
    if None) and ``polish`` as for ``gmres``."""

    maxiter: Optional[int] = 10_000
    ncv: Optional[int] = None
    polish: int = 2000

    def __post_init__(self):
        super().__post_init__()
        _integer_in("polish", self.polish)
        if self.maxiter is not None:
            _positive("maxiter", self.maxiter, integer=True)
        if self.ncv is not None:
            _positive("ncv", self.ncv, integer=True)


@dataclass(frozen=True)
class LevelIADOptions(StationaryOptions):
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
class AutoOptions(StationaryOptions):
    """Options of ``auto``: the shared tolerances, passed to the method it chooses."""


def make_options(method: str, options: dict):
    """Validate ``options`` for stationary ``method`` into its frozen options class."""
    return _make_options("stationary", METHODS, method, options)


# --------------------------------------------------------------------------
# evidence and grading (one rule for every method and backend)
# --------------------------------------------------------------------------
def stationary_evidence(op, pi: np.ndarray):
    """Residual ``||pi Q||_1``, balance error, underflow and lost counts of ``pi`` (owned part).

    The balance error is ``max_j |(pi Q)_j| / (pi_j |q_jj|)`` over states with
    a normal (non-denormal) ``pi_j``; states below the smallest normal double
    are counted in ``underflow``; ``lost`` counts states whose probability is
    0 although their inflow implies a representable one.

    Returns
    -------
    residual, balance_error, underflow, lost
    """
    r = op.apply(pi, transpose=True)
    q = op.exit_rates
    inflow = op.rates(pi, transpose=True)
    bal = _balance_error(op, pi, r)
    under = np.count_nonzero(((pi < _TINY) & (pi > 0)) | ((pi == 0) & (r != 0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        lost = np.count_nonzero((pi == 0) & (q > 0) & (inflow / q >= _TINY))
    s = op.allsum(np.array([np.abs(r).sum(), under, lost], dtype=float))
    return float(s[0]), bal, int(s[1]), int(s[2])


def _balance_error(op, x, r, floor: float = _TINY) -> float:
    """``max_j |r_j| / (x_j q_j)`` over states with ``x_j >= floor`` and an exit (global).

    ``r`` is ``(x Q)`` on the owned rows: the relative imbalance of flow in and out of each state.
    """
    out = x * op.exit_rates
    ok = (x >= floor) & (out > 0)
    return op.allmax(float(np.max(np.abs(r[ok]) / out[ok], initial=0.0)))


#: a solution entry below -NEGATIVE_TOL * max is a failed solve, not round-off
NEGATIVE_TOL = 1e-8
#: negatives below this share of the max are round-off of a direct solve: set to 0 silently
_ROUNDOFF = 1e-13


def grade(status: Status, msg: str, *, rel_residual: float, balance: float, lost: int, negative: float,
          opts: StationaryOptions):
    """The status of a stationary answer from its evidence (every method, every backend).

    Parameters
    ----------
    status, msg
        What the method itself reported.
    rel_residual : float
        ``||pi Q||_1 / max|q_ii|``.
    balance : float
        The balance error.
    lost : int
        Zero probabilities with a positive inflow.
    negative : float
        ``-min(x) / max(x)`` of the raw solution (0 if none was negative).

    Examples
    --------
    >>> o = StationaryOptions()
    >>> grade(Status.SUCCESS, "lu", rel_residual=1e-16, balance=1e-12, lost=0, negative=0.0, opts=o)[0]
    <Status.SUCCESS: 'success'>
    >>> grade(Status.SUCCESS, "gmres", rel_residual=1e-12, balance=1e-12, lost=0, negative=1e-10, opts=o)[0]
    <Status.TAIL_INACCURATE: 'tail_inaccurate'>
    >>> grade(Status.SUCCESS, "arpack", rel_residual=1e-12, balance=0.0, lost=0, negative=1e-3, opts=o)[0]
    <Status.INACCURATE: 'inaccurate'>
    """
    usable = status in (Status.SUCCESS, Status.TAIL_INACCURATE)
    if usable and negative > NEGATIVE_TOL:
        return Status.INACCURATE, f"{msg}; negative probabilities (down to {-negative:.1e} of the max)"
    if usable and rel_residual > opts.tol:
        return Status.INACCURATE, f"{msg}; residual {rel_residual:.2e} above tol {opts.tol:.1e}"
    if status is not Status.SUCCESS:
        return status, msg
    if negative > _ROUNDOFF:
        return Status.TAIL_INACCURATE, (
            f"{msg}; negative values of round-off size (down to {-negative:.1e} of the max) set to 0: the "
            "small probabilities are noise (try 'gth' on small chains, or 'lu')")
    if balance > opts.tail_tol:
        return Status.TAIL_INACCURATE, (
            f"{msg}; component-wise balance error {balance:.2e} exceeds tail_tol {opts.tail_tol:.1e}: "
            "small probabilities are unreliable (use 'lu' or 'gth')")
    if lost:
        return Status.TAIL_INACCURATE, (
            f"{msg}; {lost} states have probability 0 although their inflow is positive: small "
            "probabilities were lost (use 'lu' or 'gth')")
    return Status.SUCCESS, msg


# --------------------------------------------------------------------------
# the error bound: a condition estimate by mean times to reach the pin
# --------------------------------------------------------------------------
_U = UNIT_ROUNDOFF
#: the Krylov solve of the return times when no factorisation is at hand
_RETURN_SPEC = LinearSpec(kind="gmres", ordering="auto", preconditioner="sgs", rtol=1e-6, maxiter=200,
                          restart=50)


def _gamma(op) -> float:
    """Relative round-off of a product with ``Q`` (:meth:`ctmc.backends.base.Operator.product_roundoff`)."""
    return op.product_roundoff()


def _value_at(op, x, i: int) -> float:
    """``x[i]`` for a global index ``i`` of an owned vector, on every process (a collective)."""
    return op.allmax(float(x[i - op.start]) if op.start <= i < op.stop else -np.inf)


def _residual_1norm(op, support, pi) -> tuple:
    """``(r, ||r||_1 on the class, round-off bound of computing it)`` for ``r = pi Q`` (owned part)."""
    r = op.apply(pi, transpose=True)
    r1 = op.allsum(float(np.abs(r[support]).sum()))
    return r, r1, 2 * _gamma(op) * op.allsum(float((pi * op.exit_rates)[support].sum()))


def return_time_bound(op, support, pin: int, system=None, backend_options=None) -> tuple:
    r"""An upper bound on :math:`\|m\|_\infty`, ``m`` the mean times to reach ``pin`` from the class.

    ``m = M^{-1} 1`` with ``M = -Q_XX`` on ``X = support - {pin}``, a
    nonsingular M-matrix, so :math:`\|M^{-1}\|_\infty = \|m\|_\infty`. From a
    computed :math:`\hat m` with residual :math:`\rho = 1 - M\hat m` (recomputed,
    its round-off added), :math:`m - \hat m = M^{-1}\rho` gives
    :math:`\|m\|_\infty \le \|\hat m\|_\infty / (1 - \|\rho\|_\infty)`, proven
    whatever solver produced :math:`\hat m`; ``inf`` if :math:`\|\rho\|_\infty \ge 1`.

    Parameters
    ----------
    system : optional
        A set-up system of ``M`` (the pinned stationary factorisation, solved
        untransposed); without it a GMRES solve with the Gauss-Seidel
        preconditioner runs.

    Returns
    -------
    (bound, estimate)
        The proven bound and :math:`\|\hat m\|_\infty`.

    Examples
    --------
    M/M/1/K: the mean time to empty from the full queue is known in closed form.

    >>> import ctmc
    >>> from ctmc.backends import operator_for
    >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 30)
    >>> m.event("a", guard=n < 30, rate=1.0, update={n: n + 1})
    >>> m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> op = operator_for(m.build(initial={"n": 0}), "scipy")
    >>> bound, est = return_time_bound(op, np.ones(31, dtype=bool), 0)
    >>> # from the full queue: the sum over k of the mean passage times k -> k-1
    >>> exact = sum(sum(0.5 ** i for i in range(31 - k)) / 2.0 for k in range(1, 31))
    >>> bool(abs(est / exact - 1) < 1e-4 and exact <= bound <= est * (1 + 1e-3))
    True
    """
    X = support & ~_unit(op, pin)
    own = system is None
    if own:
        system = op.system(X, 0.0, _RETURN_SPEC, backend_options or {})
    try:
        m, _ = system.solve(X.astype(float), transpose=False)
    finally:
        if own:
            system.close()
    m = np.where(X, m, 0.0)
    if not np.all(np.isfinite(m)):
        return np.inf, np.inf
    est = op.allmax(float(np.abs(m).max(initial=0.0)))
    rho = np.where(X, 1.0 + op.apply(m, transpose=False), 0.0)
    rn = op.allmax(float(np.abs(rho).max(initial=0.0))) + _gamma(op) * (2 * op.qmax * est + 1.0)
    return inverse_norm_bound(est, rn), est


def error_bound(op, support, pi, pin: int, m_bound: float) -> float:
    r"""Proven bound on :math:`\|\hat\pi - \pi\|_1` from the residual and the mean times to reach ``pin``.

    With :math:`r = \hat\pi Q` (recomputed, plus its round-off) and ``k = pin``,
    the pinned equations give :math:`\hat\pi_{-k}/\hat\pi_k - \pi_{-k}/\pi_k =
    (r_{-k}/\hat\pi_k)(-Q_{kk'})^{-1}`, whose 1-norm is at most
    :math:`\|r\|_1\|m\|_\infty/\hat\pi_k`; normalising doubles it at most and
    multiplies it by :math:`\pi_k`. With :math:`\beta = 2\|r\|_1\|m\|_\infty/\hat\pi_k`:
    :math:`\|\hat\pi - \pi\|_1 \le \hat\pi_k\beta/(1-\beta)`, ``inf`` if
    :math:`\beta \ge 1`. :math:`\|m\|_\infty` (the largest mean time to reach
    ``k``) is the chain's condition number in this bound, in the spirit of Cho &
    Meyer, "Markov chain sensitivity measured by mean first passage times",
    Linear Algebra Appl. 316 (2000): it is huge exactly on nearly
    decomposable chains.
    """
    _, r1, rounding = _residual_1norm(op, support, pi)
    pik = _value_at(op, pi, pin)
    if not (pik > 0 and np.isfinite(m_bound)):
        return np.inf
    beta = 2 * (r1 + rounding) * m_bound / pik
    return pik * beta / (1 - beta) if beta < 1 else np.inf


def correction_estimate(op, support, pi, pin: int, backend_options=None) -> tuple:
    r"""First-order estimate of :math:`\|\hat\pi - \pi\|_1` by one correction solve (iterative methods).

    The error of the pinned solution is :math:`\hat x - x = M^{-T}(r_{-k}/\hat\pi_k)`
    (see :func:`error_bound`): one more solve of the transposed pinned system,
    with the residual as its right-hand side, computes it, and normalising gives
    :math:`\|\hat\pi - \pi\|_1 \approx 2\hat\pi_k\|d\|_1`. The residual's
    own round-off is added in proportion (:math:`\|d\|/\|r\|` estimates
    :math:`\|M^{-T}\|`). It is an estimate, not a proof: it assumes the
    correction solve is right to its first digit, which its own backward error
    (``rtol`` 1e-8) vouches for while the chain's condition stays below 1e7
    (:func:`_iterative_bound` checks a lower estimate of it first).

    Returns
    -------
    (estimate, iterations)
    """
    X = support & ~_unit(op, pin)
    r, r1, rounding = _residual_1norm(op, support, pi)
    pik = _value_at(op, pi, pin)
    if not pik > 0:
        return np.inf, 0
    if r1 == 0:       # the residual is round-off through and through: nothing to scale it by
        return np.inf, 0
    spec = dataclasses.replace(_RETURN_SPEC, rtol=1e-8)
    sysm = op.system(X, 0.0, spec, backend_options or {})
    try:
        d, rep = sysm.solve(np.where(X, r / pik, 0.0), transpose=True)
    finally:
        sysm.close()
    if rep.status is not Status.SUCCESS or not np.all(np.isfinite(d)):
        return np.inf, rep.iterations
    d1 = op.allsum(float(np.abs(d[X]).sum()))
    return 2 * pik * d1 * (1 + rounding / r1), rep.iterations


#: classes up to this many states get a proven bound from a sparse LU of the return-time system
_BOUND_LU_STATES = 5000


def _iterative_bound(op, support, pi, pin, ctx, info) -> tuple:
    """The error bound of an iterative method's answer: ``(bound, kind)``; evidence into ``info``.

    Proven (:func:`error_bound`) when the return-time system is solved well
    enough to bound its solution (whatever solved it): by GMRES, else, on
    classes up to :data:`_BOUND_LU_STATES` states, by sparse LU (``inf`` if
    even that cannot); on larger classes the first-order
    :func:`correction_estimate`, accepted only where the condition (from the
    unconverged return times, a lower estimate) leaves its own 1e-8 solve a
    digit: ``inf`` otherwise.
    """
    m_est = 0.0
    specs = [_RETURN_SPEC] + ([dataclasses.replace(_RETURN_SPEC, kind="lu")] if ctx.size <= _BOUND_LU_STATES else [])
    for spec in specs:
        try:
            system = op.system(support & ~_unit(op, pin), 0.0, spec, ctx.backend_options)
        except MemoryError:
            continue
        try:
            m_bound, est = return_time_bound(op, support, pin, system=system)
        finally:
            system.close()
        m_est = max(m_est, est if not np.isnan(est) else np.inf)      # inf: the solve overflowed
        info["condition"] = m_est * op.qmax
        if np.isfinite(m_bound):
            return error_bound(op, support, pi, pin, m_bound), "proven"
        if spec.kind == "lu":     # a direct solve could not bound it: nothing cheaper will vouch for it
            return np.inf, "proven"
    if not m_est * op.qmax * 1e-8 < 0.1:
        return np.inf, "estimate"
    est, its = correction_estimate(op, support, pi, pin, ctx.backend_options)
    info["correction_iterations"] = its
    return est, "estimate"


def _gth_bound(n: int) -> float:
    """GTH's entrywise error estimate on the 1-norm: ``2 n^2 u``.

    Subtraction-free elimination computes every probability to a small
    relative error, independently of the chain's conditioning (O'Cinneide,
    "Entrywise perturbation theory and error analysis for Markov chains",
    Numer. Math. 65, 1993, proves a bound growing like ``n^3 u``); ``n``
    elimination steps of sums of up to ``n`` terms give the first-order count
    ``2 n^2 u`` used here, an estimate (``error_bound_kind`` says so), far
    above the errors seen in practice.
    """
    return 2.0 * n * n * _U


# --------------------------------------------------------------------------
# closed classes by reachability
# --------------------------------------------------------------------------
def _count(op, mask) -> int:
    return int(round(op.allsum(float(np.count_nonzero(mask)))))


def _global_argmax(op, x):
    """``(max, global index)`` of an owned vector over every process (the first index on ties)."""
    k = int(np.argmax(x)) if x.size else 0
    val = float(x[k]) if x.size else -np.inf
    if op.size == 1:
        return val, op.start + k
    table = op.gather(np.array([val, op.start + k]), "all").reshape(op.size, 2)
    j = int(np.argmax(table[:, 0]))
    return float(table[j, 0]), int(table[j, 1])


#: jumps of :func:`walk_pin` at most (about 0.05 s; a quarter of the class size, at least 5,000);
#: the holding times of the second half are counted
_WALK_STEPS = 50_000


def walk_pin(op, support, hint=None, steps=None, seed: int = 0) -> int:
    """A probable state of the closed class ``support``, to pin a Krylov solve on (one process).

    A pinned solve computes ``x = pi / pi_pin``: pinned on a state of
    probability 1e-57 relative to the largest (the slowest-exit state of a
    4-species population chain), GMRES cannot converge. This walks the jump
    chain for ``steps`` jumps (default: a quarter of the class size, between
    5,000 and :data:`_WALK_STEPS`; seeded: reproducible) from ``hint`` (the
    initial state, if in the class) and again from the slowest-exit state,
    and returns the state with the most expected holding time in the second
    halves of the walks: a long-run time average, i.e. a state where ``pi``
    is large. Two starts, because a walk that starts far from the probable
    region may not reach it in time (an M/M/1/K queue started full, review),
    while the slowest-exit state is the old pin and often probable itself.
    Measured on that chain: probability 0.78-0.84 of the largest, and GMRES
    converges (2.4e6 states: 100 iterations; pinned at the slowest exit it
    stopped at its limit).

    >>> import ctmc
    >>> m = ctmc.Model("mm1"); n = m.var("n", 0, 400)
    >>> m.event("a", guard=n < 400, rate=1.0, update={n: n + 1})
    >>> m.event("s", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> c = m.build(initial={"n": 400})              # the least probable state as a start
    >>> from ctmc.backends import operator_for
    >>> int(c.states["n"][walk_pin(operator_for(c, "scipy"), np.ones(c.n_states, bool), 400)]) <= 3
    True
    """
    R = op.local_rows().tocsr()
    q = op.exit_rates
    if steps is None:
        steps = min(_WALK_STEPS, max(5_000, int(support.sum()) // 4))
    slowest = _slowest_exit(op, support)
    starts = [slowest]
    if hint is not None and 0 <= int(hint) < op.n and support[int(hint)] and int(hint) != slowest:
        starts.insert(0, int(hint))
    data = R.data
    cum = np.cumsum(data)                # the next state: one search in the running sum of the rates
    # scalars read through memoryviews (Python numbers at once: a numpy scalar per read cost 4x more)
    indptr, indices, cum_m, qm = (memoryview(np.ascontiguousarray(x)) for x in (R.indptr, R.indices, cum, q))
    rows: dict = {}                      # rows whose rates are lost in the running sum: their own sums
    rng = np.random.default_rng(seed)
    hold: dict = {}
    for s in starts:
        u = rng.random(steps).tolist()
        for k in range(steps):
            a, b = indptr[s], indptr[s + 1]
            qs = qm[s]
            if b == a or not qs > 0:
                return s                 # an absorbing state: the class is that state
            if 2 * k >= steps:
                hold[s] = hold.get(s, 0.0) + 1.0 / qs
            lo = cum_m[a - 1] if a else 0.0
            hi = cum_m[b - 1]
            if hi - lo > 1e-9 * hi:
                # the first running sum beyond the draw, within the row (the sums are non-decreasing)
                j = min(bisect.bisect_right(cum_m, lo + u[k] * (hi - lo), a, b), b - 1)
            else:
                c = rows.get(s)
                if c is None:
                    c = rows[s] = np.cumsum(data[a:b])
                j = a + min(int(np.searchsorted(c, u[k] * c[-1], "right")), b - a - 1)
            s = int(indices[j])
    return max(hold, key=hold.get) if hold else starts[0]


def _slowest_exit(op, support) -> int:
    """Global index of the supported state with the smallest exit rate (the first on ties)."""
    return _global_argmax(op, np.where(support, -op.exit_rates, -np.inf))[1]


def _closed_class_from(op, z):
    """The closed class reached from state ``z`` (owned mask)."""
    for _ in range(op.n + 1):
        seed = _unit(op, z)
        fwd = op.reach(seed, forward=True)
        back = op.reach(seed)
        escape = fwd & ~back
        if _count(op, escape) == 0:
            return fwd
        z = _slowest_exit(op, escape)  # a state z cannot be reached back from: go deeper
    raise RuntimeError("closed class search did not terminate")  # pragma: no cover


def closed_classes(op, hint: Optional[int] = None, limit: Optional[int] = None) -> list:
    """Closed classes of the chain as owned masks, sorted by their smallest state.

    The first search starts at ``hint`` (default: the slowest-exit state);
    each further one at a state that cannot reach a class found so far.
    ``limit`` stops after that many classes.
    """
    found = []
    accounted = np.zeros(op.stop - op.start, dtype=bool)
    everything = np.ones_like(accounted)
    z = _slowest_exit(op, everything) if hint is None else int(hint)
    while True:
        C = _closed_class_from(op, z)
        found.append(C)
        accounted |= op.reach(C)
        if limit is not None and len(found) >= limit:
            break
        rest = ~accounted
        if _count(op, rest) == 0:
            break
        z = _slowest_exit(op, rest)
    # every process takes part in each reduction, owning states of the class or not
    first = [op.allmin(float(np.flatnonzero(C)[0] + op.start) if C.any() else np.inf) for C in found]
    return [C for _, C in sorted(zip(first, found), key=lambda t: t[0])]


def _describe(op, classes, limit=5):
    parts = []
    for C in classes[:limit]:
        idx = np.flatnonzero(op.gather(C.astype(float), "all") > 0.5)
        first = [_state_name(op, i) for i in idx[:3]]
        more = f" and {idx.size - 3} more" if idx.size > 3 else ""
        parts.append("{" + ", ".join(first) + more + "}")
    if len(classes) > limit:
        parts.append("... (more classes)")
    return "; ".join(parts)


def _state_name(op, i):
    st = op.states
    if st is None:
        return f"state {i}"
    return "(" + ", ".join(f"{k}={int(st[k][i])}" for k in st.names) + ")"


# --------------------------------------------------------------------------
# methods: each takes (op, support, opts, hint, context) and returns
# (x owned or None, iterations, status, message); x need not be normalised
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Method:
    """A registered stationary method: its function, options class and one-line description."""

    run: Callable
    options: type
    summary: str


@dataclass
class _Context:
    info: dict
    backend_options: dict
    size: int  # states in the class


def _pin_hint(op, support, hint):
    """The initial state if it lies in the class, else the slowest-exit state."""
    if hint is not None:
        inside = _count(op, support & _unit(op, hint))
        if inside:
            return int(hint)
    return _slowest_exit(op, support)


def _gth(op, support, opts: GTHOptions, hint, ctx):
    if ctx.size > opts.max_states:
        raise ValueError(f"method: gth is dense O(n^3) and limited to max_states={opts.max_states}; "
                         f"this class has {ctx.size} states (use 'lu' or raise max_states)")
    return _gth_dense(op, support)


def _gth_dense(op, support):
    idx = np.flatnonzero(op.gather(support.astype(float), "all") > 0.5)
    rows = op.gather_rows(support)
    A = rows[:, idx].toarray()
    xs = gth_solve(A) if idx.size > 1 else np.ones(1)
    if not np.all(np.isfinite(xs)):
        return None, 0, Status.BREAKDOWN, "GTH produced non-finite values (rates spanning > 1e300?)"
    x = np.zeros(op.stop - op.start)
    own = (idx >= op.start) & (idx < op.stop)
    x[idx[own] - op.start] = xs[own]
    return x, 0, Status.SUCCESS, "GTH elimination"


def next_pin(x_max: float, argmax: int, x_min: float, x_pin: float, pins, slowest: int,
             repin: float, argabs: Optional[int] = None) -> Optional[int]:
    """Where a pinned stationary solve should be repeated, or ``None`` to keep it.

    A pin on a state of negligible probability gives a solution of size
    ``1/pi_pin`` that is round-off with mixed signs and a meaningless argmax:
    significant negatives move the pin to the slowest-exit state (then to the
    argmax, then to ``argabs``, the largest entry in magnitude: where the
    garbage is largest, the pinned system is most nearly singular, i.e. the
    probability is high). A pin carrying less than ``repin`` of the largest
    entry moves to the argmax. A state already tried is never tried again.

    Examples
    --------
    >>> next_pin(1.0, 7, -0.5, 1e-3, [0], slowest=3, repin=1e-3)   # garbage: slowest exit
    3
    >>> next_pin(1.0, 7, 0.0, 1e-9, [0], slowest=3, repin=1e-3)    # improbable pin: argmax
    7
    >>> next_pin(1.0, 7, 0.0, 0.5, [0], slowest=3, repin=1e-3) is None
    True
    >>> next_pin(1.0, 0, -6e9, 1.0, [0], slowest=0, repin=1e-3, argabs=4242)   # garbage at the pin
    4242
    """
    if x_min < -NEGATIVE_TOL * x_max:
        nxt = next((c for c in (slowest, argmax, argabs) if c is not None and c not in pins), None)
    elif x_pin < repin * x_max:
        nxt = argmax
    else:
        return None
    return None if nxt is None or nxt in pins else int(nxt)


def _pinned(kind: str):
    """Pinned sparse solve (direct or Krylov) with the re-pin rule :func:`next_pin`."""
    def run(op, support, opts, hint, ctx):
        info = ctx.info
        if ctx.size == 1:
            return support.astype(float), 0, Status.SUCCESS, "single state"
        slowest = _slowest_exit(op, support)
        if opts.pin is not None:
            if opts.pin >= op.n:
                raise ValueError(f"pin: state index must be < {op.n}, got {opts.pin}")
            pin = int(opts.pin)
        elif kind == "lu":
            pin = _pin_hint(op, support, hint)
        else:
            # a Krylov solve pinned on a negligible-probability state (a user's
            # initial state often is one) stalls for its whole iteration budget
            # before a re-pin can help: a short random walk finds a probable state
            # (on one process; the slowest-exit state on several)
            pin = walk_pin(op, support, hint) if op.size == 1 else slowest
            info["pin_rule"] = "random walk" if op.size == 1 else "slowest exit"
        spec = linear_spec(kind, opts)
        info["pins"] = []
        x, rep, its = None, SolveReport(), 0
        for attempt in range(3):
            info["pins"].append(pin)
            e = _unit(op, pin)
            try:
                sysm = op.system(support & ~e, 0.0, spec, ctx.backend_options)
            except MemoryError as exc:
                return None, its, Status.BREAKDOWN, f"{kind}: out of memory ({exc})"
            try:
                b = np.where(support & ~e, _row_of_R(op, pin), 0.0)
                t0 = time.perf_counter()
                x, rep = sysm.solve(b, transpose=True)
                info["solve_seconds"] = time.perf_counter() - t0
                info.update(sysm.info)
                if kind == "lu" and rep.status is Status.SUCCESS:
                    # the condition estimate of the error bound, from the same factors
                    tb = time.perf_counter()
                    info["_return"] = (pin, return_time_bound(op, support, pin, system=sysm))
                    info["error_bound_seconds"] = time.perf_counter() - tb
            finally:
                sysm.close()
            its += rep.iterations
            x[e] = 1.0
            if rep.status is Status.BREAKDOWN or not np.all(np.isfinite(x)):
                # an overflow (a pin of negligible probability: x ~ 1/pi_pin) points at the
                # probable states: the largest entry, infinities included
                big = _global_argmax(op, np.nan_to_num(x, nan=-np.inf, posinf=np.finfo(float).max))[1]
                nxt = slowest if slowest not in info["pins"] else (big if big not in info["pins"] else None)
            else:
                xmax, top = _global_argmax(op, x)
                xmin = op.allmin(float(x.min()) if x.size else np.inf)
                xp = _value_at(op, x, pin)
                nxt = next_pin(xmax, top, xmin, xp, info["pins"], slowest, opts.repin,
                               argabs=_global_argmax(op, np.abs(x))[1])
            if attempt == 2 or nxt is None:
                break
            info["failed_pin"] = f"state {pin}: {rep.reason}" if rep.status is Status.BREAKDOWN else None
            pin = nxt
        if rep.status is Status.BREAKDOWN:
            return None, its, rep.status, f"{kind}: {rep.reason}"
        msg = f"{kind} pinned at state {pin}" + (f" ({rep.reason})" if rep.reason else "")
        if kind != "lu" and rep.status is Status.SUCCESS:
            x = _polish(op, support, x, opts, ctx)
        return x, its, rep.status, msg
    return run


def _row_of_R(op, i):
    """Owned part of row ``i`` of ``R`` (``R_ij`` at the owned ``j``)."""
    return op.rates(_unit(op, i).astype(float), transpose=True)


def _start(op, support, x0):
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


class _Stop:
    """The stopping rule of the stationary iterations: normwise, then component-wise.

    An iteration is converged in norm when ``||x Q||_1 / (sum(x) max|q_ii|) <= tol``;
    it then goes on (for at most as many iterations again, plus 10) until the
    balance error is at most ``tail_tol`` too, so that where the method
    converges the small probabilities are right as well, and the grading says
    so when they are not.
    """

    def __init__(self, op, opts):
        self.op, self.opts = op, opts
        self.norm_it = None
        self.rel = np.inf

    def __call__(self, it, x, r) -> bool:
        op = self.op
        g = op.allsum(np.array([np.abs(r).sum(), x.sum()]))
        self.rel = g[0] / (g[1] * op.qmax)
        if not self.rel <= self.opts.tol:
            return False
        if self.norm_it is None:
            self.norm_it = it
        bal = _balance_error(op, x, r, floor=_TINY * g[1])   # x is normalised only every few steps
        return bal <= self.opts.tail_tol or it >= 2 * self.norm_it + 10


def _power(op, support, opts: IterativeOptions, hint, ctx):
    lam = 1.02 * op.qmax
    ctx.info["uniformization_rate"] = lam
    x = _start(op, support, opts.x0)
    stop = _Stop(op, opts)
    with Progress("stationary (power)", opts.progress) as prog:
        for it in range(opts.maxiter):
            r = op.apply(x, transpose=True)
            if stop(it, x, r):
                return x, it, Status.SUCCESS, f"power: converged in {it} iterations"
            prog.residual(stop.rel, opts.tol, f"iteration {it}")
            x = x + r / lam
            if it % 10 == 9:
                x /= op.allsum(float(x.sum()))
    return x, opts.maxiter, Status.MAX_ITERATIONS, f"power: not converged after {opts.maxiter} iterations"


class _Sweeper:
    """Gauss-Seidel / SOR sweeps over the owned block (compiled kernels, :mod:`ctmc._relax`);
    the other processes' blocks are taken from the previous sweep.

    Calling it sweeps ``Q^T x = 0`` on the set ``support`` and renormalises
    (the stationary iterations); :meth:`relax` sweeps the passage system
    ``(shift I - Q_XX) x = b`` (``transpose=False``) or its transpose on
    ``X = support``, without renormalising.
    """

    def __init__(self, op, support, shift: float = 0.0, transpose: bool = True):
        self.op, self.support = op, support
        A = op.local_rows(transpose=transpose).tocsr()     # rates R (or R^T): owned rows, global columns
        keep = support.astype(float)
        full_support = op.gather(keep, "all") if op.size > 1 else keep
        A = (sp.diags(keep) @ A @ sp.diags(full_support)).tocsr()
        # R_XX - diag(shift + q) on the owned block (unit rows outside the set keep x = 0 there)
        local = (A[:, op.start:op.stop] - sp.diags(np.where(support, float(shift) + op.exit_rates, -1.0))).tocsr()
        local.sort_indices()
        local.data = np.ascontiguousarray(local.data, dtype=float)
        self.local = local
        self.ghosts = None
        if op.size > 1:
            g = A.tolil()
            g[:, op.start:op.stop] = 0.0
            self.ghosts = g.tocsr()

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
        from ._relax import sweep
        op = self.op
        rhs = np.zeros_like(x) if b is None else -np.where(self.support, b, 0.0)
        if self.ghosts is not None:
            rhs -= self.ghosts @ op.gather(x, "all")
        sweep(self.local, x, rhs, omega, direction)


def polish_sweeps(sweep_pair, measure, budget: int, tail_tol: float):
    """Symmetric sweeps until the balance error ``measure()`` meets ``tail_tol`` or stalls.

    ``sweep_pair()`` runs one forward and one backward sweep (False: the
    iterate broke down). Sweeps go in blocks of 25; the loop stops when the
    balance error is at most ``tail_tol`` or has fallen by less than 10 %
    over the last 100 sweeps, or after ``budget`` sweeps. Returns
    ``(sweeps, last balance error)``; one rule for stationary laws and
    passage systems.
    """
    history = [measure()]
    k = 0
    while k < budget and not history[-1] <= tail_tol:
        for _ in range(min(25, budget - k)):
            if not sweep_pair():
                return k, history[-1]
            k += 1
        history.append(measure())
        if len(history) > 4 and not history[-1] <= 0.9 * history[-5]:
            break
    return k, history[-1]


def _sor(op, support, opts: IterativeOptions, hint, ctx):
    """Gauss-Seidel / SOR sweeps on ``Q^T x = 0`` (:class:`_Sweeper`) with the stopping rule :class:`_Stop`."""
    omega = float(getattr(opts, "omega", 1.0))
    ctx.info["omega"] = omega
    sweeper = _Sweeper(op, support)
    x = np.ascontiguousarray(_start(op, support, opts.x0))
    stop = _Stop(op, opts)
    with Progress(f"stationary (sor, omega={omega})", opts.progress) as prog:
        for it in range(1, opts.maxiter + 1):
            if not sweeper(x, omega):
                return None, it, Status.BREAKDOWN, "iteration diverged"
            r = op.apply(x, transpose=True)
            if stop(it, x, r):
                return x, it, Status.SUCCESS, f"converged in {it} sweeps"
            prog.residual(stop.rel, opts.tol, f"sweep {it}")
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
    sweeper = _Sweeper(op, support)
    x = np.ascontiguousarray(_start(op, support, None))
    stop = _Stop(op, tight)
    history = []
    for it in range(1, budget + 1):
        if not sweeper(x):
            return None, it, Status.BREAKDOWN, "gauss_seidel probe: the iteration diverged"
        r = op.apply(x, transpose=True)
        if stop(it, x, r):
            return x, it, Status.SUCCESS, f"gauss_seidel: converged in {it} sweeps"
        history.append(stop.rel)
        if it % window == 0 and it > window and stop.norm_it is None:
            rho = (history[-1] / history[-1 - window]) ** (1.0 / window)
            left = np.log(tight.tol / history[-1]) / np.log(rho) if rho < 1 else np.inf
            if it + left > budget:
                return x, it, Status.MAX_ITERATIONS, (f"gauss_seidel stalls: {left:.0f} more sweeps predicted "
                                                      f"(rate {rho:.4f} per sweep)")
    return x, budget, Status.MAX_ITERATIONS, f"gauss_seidel: not converged in {budget} sweeps"


def _balance(op, x):
    """The balance error of an owned, normalised iterate (global)."""
    return _balance_error(op, x, op.apply(x, transpose=True))


def _polish(op, support, x, opts, ctx):
    """Symmetric Gauss-Seidel sweeps from a converged Krylov/eigen answer until its tail balances.

    A Krylov solve stopped on a normwise residual leaves the small
    probabilities as noise; sweeps from that answer correct them locally,
    state by state. Up to ``opts.polish`` symmetric sweeps, stopped when the
    balance error meets ``tail_tol`` or has fallen by less than 10 % over the
    last 100 sweeps (the error travels through the chain as a front: on a
    tandem network of 130,816 states it stays near 100 for 150 sweeps, then
    falls to 1e-6 by sweep 570). Returns the polished iterate (owned part).
    """
    if not getattr(opts, "polish", 0):
        return x
    neg = int(op.allsum(float(np.count_nonzero(support & (x < 0)))))
    if neg:
        ctx.info["negative_states"] = neg   # reported even when the sweeps repair them
    x = np.ascontiguousarray(np.where(support, np.maximum(x, 0.0), 0.0))
    x /= op.allsum(float(x.sum()))
    bal = _balance(op, x)
    ctx.info["balance_before_polish"] = bal
    if bal <= opts.tail_tol:
        return x
    sweeper = _Sweeper(op, support)
    k, _ = polish_sweeps(lambda: sweeper(x, 1.0, "forward") and sweeper(x, 1.0, "backward"),
                         lambda: _balance(op, x), opts.polish, opts.tail_tol)
    ctx.info["polish_sweeps"] = k
    return x


def _eig(op, support, opts: EigOptions, hint, ctx):
    if ctx.size < 3:
        return _gth_dense(op, support)
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


def _levels(op, spec, name: str = "levels") -> np.ndarray:
    """The level of every state (replicated), from a variable name, an expression or an array
    (errors name the option ``name``)."""
    from .expr import Expr
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
       levels, so a level is updated in one sparse product (on each process's
       block when distributed, other blocks from the previous sweep).

    It stops by the rule of the other iterations (:class:`_Stop`).
    """
    lev_full = _levels(op, opts.levels)
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
    out = np.where(support, op.exit_rates, 1.0)
    IN = op.local_rows(transpose=True).tocsr()
    n_lev = int(op.allmax(float(lev[support].max(initial=0)))) + 1
    own = np.flatnonzero(support)
    order = own[np.argsort(lev[own], kind="stable")]
    bounds = np.searchsorted(lev[order], np.arange(n_lev + 1))
    blocks = [(order[bounds[L]:bounds[L + 1]], IN[order[bounds[L]:bounds[L + 1]]]) for L in range(n_lev)]
    x = _start(op, support, opts.x0)
    if (x[support] <= 0).any():
        raise ValueError("x0: level_iad needs a positive initial guess on the closed class")
    lv = np.where(support, lev, 0)
    status, it = Status.MAX_ITERATIONS, 0
    stop = _Stop(op, opts)
    with Progress("stationary (level_iad)", opts.progress) as prog:
        for it in range(1, opts.maxiter + 1):
            X = op.allsum(np.bincount(lv, weights=x, minlength=n_lev))
            a = op.allsum(np.bincount(lv, weights=x * up, minlength=n_lev)) / X
            dn = op.allsum(np.bincount(lv, weights=x * down, minlength=n_lev)) / X
            with np.errstate(divide="ignore"):
                logp = np.concatenate([[0.0], np.cumsum(np.log(a[:-1]) - np.log(dn[1:]))])
            p = np.exp(logp - logp.max())
            p /= p.sum()
            x = np.where(support, x * (p / X)[lv], 0.0)
            xf = op.gather(x, "all")          # the scipy backend: x itself, updated in place
            for L in list(range(n_lev)) + list(range(n_lev - 1, -1, -1)):
                loc, B = blocks[L]
                if loc.size:
                    xf[op.start + loc] = (B @ xf) / out[loc]
            x = np.array(xf[op.start:op.stop])
            x /= op.allsum(float(x.sum()))
            r = op.apply(x, transpose=True)
            if stop(it, x, r):
                status = Status.SUCCESS
                break
            if not np.isfinite(stop.rel):
                return None, it, Status.BREAKDOWN, "level_iad: the iteration diverged"
            prog.residual(stop.rel, opts.tol, f"iteration {it}")
    ctx.info.update(levels=n_lev)
    return x, it, status, f"level aggregation + Gauss-Seidel by levels, {it} iterations"


#: stationary methods by name; ``auto`` is an entry like the others
METHODS: dict = {}

from .aggregation import MultilevelOptions, multilevel as _multilevel  # noqa: E402  (it uses the above)

_AUTO_GTH = 1000
#: a state variable counts as a dimension of the chain when it takes more than this many values
#: (binary variables count: fifteen of them make a 15-dimensional hypercube, where LU fills in)
_DIM_VALUES = 1
#: iterations of the Krylov probe of ``auto`` on many-dimensional chains
_PROBE_ITERATIONS = 300
#: its Arnoldi basis: GMRES(50) stagnates on 4-species population chains (JIQ with buffer 3,
#: N = 120: backward error 7e-8 after 10,000 steps) where GMRES(100) converges in 77 steps,
#: and it costs nothing on the gallery (benchmarks/README.md)
_PROBE_RESTART = 100


def probe_restart(owned_states: int, memory: float) -> int:
    """The restart of ``auto``'s GMRES probe: :data:`_PROBE_RESTART` Arnoldi vectors, fewer
    (but at least 20) where their basis would take more than a tenth of ``memory`` bytes.

    >>> probe_restart(10**6, 24e9), probe_restart(10**7, 24e9), probe_restart(10**9, 24e9)
    (100, 29, 20)
    """
    fit = int(0.1 * memory / (8.0 * max(owned_states, 1))) - 1
    return max(20, min(_PROBE_RESTART, fit))


def structure_facts(op, support) -> dict:
    """Cheap facts about a closed class that ``auto`` chooses by (every backend; O(nnz)).

    Returns a dict with ``states``, ``transitions`` (off-diagonal entries in the
    class), ``envelope_per_nnz`` (the envelope of the symmetrised pattern in
    state order over its number of entries: below about 10 the chain is
    banded and a direct solve in state order fills in little),
    ``profile_flops`` (the sum of the squared row widths: a bound on the work
    of that solve), and
    ``dimensions``: how many state variables vary on the class (None for a
    chain without a state table).

    Examples
    --------
    >>> import ctmc
    >>> from ctmc.backends import operator_for
    >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 50)
    >>> m.event("a", guard=n < 50, rate=1.0, update={n: n + 1})
    >>> m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> c = m.build(initial={"n": 0}); op = operator_for(c, "scipy")
    >>> f = structure_facts(op, np.ones(c.n_states, dtype=bool))
    >>> f["dimensions"], f["envelope_per_nnz"] <= 1
    (1, True)
    """
    m = op.stop - op.start
    first = np.arange(op.start, op.stop, dtype=np.int64)
    nnz = 0
    for transpose in (False, True):
        A = op.local_rows(transpose).tocoo()
        keep = support[A.row]
        rows, cols = A.row[keep], A.col[keep].astype(np.int64)
        if not transpose:
            nnz = int(rows.size)
        np.minimum.at(first, rows, cols)
    w = np.where(support, np.arange(op.start, op.stop) - first, 0).astype(float) if m else np.zeros(0)
    g = op.allsum(np.array([w.sum(), nnz, w @ w], dtype=float))
    facts = {"states": _count(op, support), "transitions": int(g[1]),
             "envelope_per_nnz": float(g[0] / max(g[1], 1.0)), "profile_flops": float(g[2]),
             "dimensions": None}
    if op.states is not None:
        dims = 0
        for name in op.states.names:
            col = np.asarray(op.states[name])[op.start:op.stop][support]
            lo = op.allmin(float(col.min()) if col.size else np.inf)
            hi = op.allmax(float(col.max()) if col.size else -np.inf)
            dims += int(hi - lo + 1 > _DIM_VALUES)
        facts["dimensions"] = dims
    return facts


def _auto_plan(facts) -> tuple:
    """The methods ``auto`` tries in turn, and why (a pure rule on :func:`structure_facts`).

    >>> _auto_plan({"states": 500, "envelope_per_nnz": 40.0, "dimensions": 2})[0]
    ['gth']
    >>> _auto_plan({"states": 10**5, "envelope_per_nnz": 3.0, "dimensions": 3})[0]
    ['lu', 'gmres']
    >>> _auto_plan({"states": 10**5, "envelope_per_nnz": 300.0, "dimensions": 2})[0]
    ['lu', 'gmres']
    >>> _auto_plan({"states": 10**5, "envelope_per_nnz": 300.0, "dimensions": 16})[0]
    ['gmres-probe', 'gauss_seidel-probe', 'lu', 'gmres-long', 'power']
    """
    n, env, dims = facts["states"], facts["envelope_per_nnz"], facts["dimensions"]
    flops = facts.get("profile_flops", np.inf)
    if n <= _AUTO_GTH:
        return ["gth"], f"{n} states <= {_AUTO_GTH}: dense subtraction-free elimination"
    if natural_is_cheap(env, flops, 1.0):
        return ["lu", "gmres"], (f"banded in state order (envelope {env:.1f} x nnz, profile work {flops:.1e}): "
                                 "direct solve")
    if dims is None or dims <= 2:
        return ["lu", "gmres"], (f"{'no state table' if dims is None else f'{dims} dimensions'}: "
                                 "direct solve with a fill-reducing ordering")
    return ["gmres-probe", "gauss_seidel-probe", "lu", "gmres-long", "power"], (
        f"{dims} dimensions: a direct solve fills in badly; GMRES({_PROBE_RESTART}) with a Gauss-Seidel "
        f"preconditioner ({_PROBE_ITERATIONS} iterations at most), then Gauss-Seidel sweeps while they converge fast, "
        "then the direct solve (given up when its factors outgrow the memory), then GMRES with its whole "
        "iteration budget")


def _auto(op, support, opts: AutoOptions, hint, ctx):
    """Choose by structure (:func:`_auto_plan`), fall back when a method fails or stalls."""
    facts = structure_facts(op, support)
    plan, reason = _auto_plan(facts)
    ctx.info["auto"] = dict(facts, plan=plan, reason=reason)
    common = {"tol": opts.tol, "tail_tol": opts.tail_tol}
    tried, best = [], None
    for i, m in enumerate(plan):
        name, kw, run = m, dict(common), None
        if m in ("gmres-probe", "gmres-long"):
            # one value on every process (PETSc needs it), from each one's share of its memory
            restart = int(op.allmin(float(probe_restart(op.stop - op.start, available_memory() / max(op.size, 1)))))
            ctx.info["auto"]["probe_restart"] = restart
            name, kw = "gmres", dict(common, preconditioner="sgs", restart=restart)
            if m == "gmres-probe":
                kw["maxiter"] = _PROBE_ITERATIONS
        elif m == "gauss_seidel-probe":
            name, run = "gauss_seidel", _gs_probe
        o = METHODS[name].options(**kw)
        try:
            x, its, status, msg = (run or METHODS[name].run)(op, support, o, hint, ctx)
        except MemoryError as exc:
            tried.append(f"{m}: out of memory ({exc})")
            continue
        ev = _evaluate(op, support, x, status, msg, o, ctx, name)
        last = i == len(plan) - 1
        # an inaccurate direct solve is not improved by an iterative one: only a breakdown
        # (or a Krylov probe that stalls or leaves a noisy tail) moves on
        accept = ev.status is Status.SUCCESS or (not m.endswith("-probe") and ev.status is not Status.BREAKDOWN)
        if ev.pi is not None and (best is None or _RANK[ev.status] < _RANK[best[1].status]):
            best = ((x, its, status, msg), ev, name)
        if accept or last:
            break
        tried.append(f"{m}: {ev.status.value} ({ev.message})")
    if best is None:
        raise SolverError("auto: every method failed: " + "; ".join(tried))
    out, ev, name = best
    ctx.info.update(chosen=name, evaluated=ev)
    if tried:
        ctx.info["fallbacks"] = tried
    return out


_RANK = {Status.SUCCESS: 0, Status.TAIL_INACCURATE: 1, Status.INACCURATE: 2, Status.MAX_ITERATIONS: 3,
         Status.BREAKDOWN: 4}


METHODS.update({
    "auto": Method(_auto, AutoOptions, "chosen by the chain's structure (_auto_plan), with fallbacks"),
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
    "multilevel": Method(_multilevel, MultilevelOptions,
                         "multilevel aggregation-disaggregation cycles with Gauss-Seidel smoothing"),
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
    ret = ctx.info.pop("_return", None)
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
    # clip first, then normalise: the law sums to one
    xp = np.maximum(x, 0.0)
    pi = xp / op.allsum(float(xp.sum()))
    if negative:
        info["negative_states"] = int(op.allsum(float(np.count_nonzero(x < 0))))
    residual, bal, under, lost = stationary_evidence(op, pi)
    rel = residual / max(op.qmax, _TINY)
    status, msg = grade(status, msg, rel_residual=rel, balance=bal, lost=lost, negative=negative, opts=opts)
    info.update(relative_residual=rel, zero_with_inflow=lost)
    bound = np.inf
    tb = time.perf_counter()
    if status in (Status.SUCCESS, Status.TAIL_INACCURATE):
        if ctx.size == 1:
            bound = 0.0
        elif method == "gth":
            bound = _gth_bound(ctx.size)
            info["error_bound_kind"] = "estimate"
        elif ret is not None:            # a direct solve: proven, from the same factors
            pin, (m_bound, m_est) = ret
            bound = error_bound(op, support, pi, pin, m_bound)
            info.update(condition=m_est * op.qmax, return_time_state=pin, error_bound_kind="proven")
        else:                            # an iterative method
            pin = _global_argmax(op, pi)[1]
            bound, kind = _iterative_bound(op, support, pi, pin, ctx, info)
            info.update(error_bound_kind=kind, return_time_state=pin)
        status, msg = grade_bound(status, msg, bound, opts)
        info["error_bound_seconds"] = ctx.info.pop("error_bound_seconds", 0.0) + time.perf_counter() - tb
    return _Evaluated(pi, status, msg, residual, bal, under, info, bound)


def _solve_class(op, support, method, opts, hint, backend_options, t0):
    ctx = _Context(info={}, backend_options=backend_options, size=_count(op, support))
    if ctx.size == 1:
        x, its, status, msg = support.astype(float), 0, Status.SUCCESS, "single absorbing state"
    else:
        x, its, status, msg = METHODS[method].run(op, support, opts, hint, ctx)
    used = ctx.info.pop("chosen", method)
    ev = ctx.info.pop("evaluated", None)
    if ev is None:
        ev = _evaluate(op, support, x, status, msg, opts, ctx, method)
    info = {**ev.info, **ctx.info, "processes": op.size}
    if ev.pi is None:
        return StationaryResult(used, op.backend, ev.status, ev.message, its, float("nan"),
                                time.perf_counter() - t0, info, pi=np.full(op.stop - op.start, np.nan),
                                balance_error=float("inf"))
    return StationaryResult(used, op.backend, ev.status, ev.message, its, ev.residual, time.perf_counter() - t0,
                            info, pi=ev.pi, balance_error=ev.balance, underflow=ev.underflow,
                            error_bound=ev.error_bound)


@scoped
def stationary(chain, method: str = "auto", *, backend: str = "scipy", check: bool = True,
               per_class: bool = False, backend_options=None, **options):
    """Stationary distribution of ``chain``; see :meth:`ctmc.CTMC.stationary`.

    Examples
    --------
    >>> import ctmc
    >>> c = ctmc.CTMC([[-2.0, 2.0], [1.0, -1.0]])
    >>> [round(float(p), 12) for p in stationary(c, "lu").pi]
    [0.333333333333, 0.666666666667]
    """
    # everything the caller can get wrong is checked before any heavy work
    opts = make_options(method, options)
    bo = check_backend_options(backend, backend_options)
    mode = bo.pop("gather", None)
    t0 = time.perf_counter()
    op = operator_for(chain, backend)
    mode = mode or op.default_gather
    hint = None if op.initial is None or len(op.initial) == 0 else int(op.initial[0])
    if per_class:
        classes = closed_classes(op, hint)
    else:
        classes = closed_classes(op, hint, limit=1)
        if _count(op, op.reach(classes[0])) < op.n:
            classes = closed_classes(op, hint, limit=6)
            raise ReducibleChainError(
                f"the chain has {'more than 5' if len(classes) > 5 else len(classes)} closed classes, so its "
                f"stationary distribution is not unique: {_describe(op, classes)}. Pass per_class=True for one "
                "law per class.", [np.flatnonzero(op.gather(C.astype(float), 'all') > 0.5) for C in classes])
    results = []
    for C in classes:
        res = _solve_class(op, C, method, opts, hint, bo, t0)
        size = _count(op, C)
        if size < op.n:
            res.info.update(closed_class_size=size, transient_states=op.n - size)
        if mode == "none":
            res.info["rows"] = (op.start, op.stop)
        res = dataclasses.replace(res, pi=op.gather(res.pi, mode))
        results.append(res.check(check))
    return results if per_class else results[0]
