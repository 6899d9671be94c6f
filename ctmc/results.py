"""Result objects, statuses and errors shared by every analysis.

Every analysis returns a frozen result object carrying its own evidence: the
answer, the method and backend that produced it, a :class:`Status`, the
iteration count, a residual *recomputed by ctmc* from the generator (never the
solver's own estimate), the wall time and raw backend information.

A result whose status is not :attr:`Status.SUCCESS` is raised as a
:class:`SolverError` carrying the result (``err.result``) unless the caller
passes ``check=False``; the one exception is :attr:`Status.TAIL_INACCURATE`,
which only warns (:class:`TailAccuracyWarning`), since the bulk of the answer
is valid and only probabilities far below the largest ones are in doubt.
"""
from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

__all__ = [
    "Status", "SolverError", "ReducibleChainError", "TailAccuracyWarning",
    "ModelError", "StateSpaceTooLarge", "AnalysisResult", "StationaryResult",
    "HittingResult", "LaplaceResult", "FirstPassageResult", "TransientResult",
]


class Status(enum.Enum):
    """Outcome of an analysis."""

    #: The answer meets the requested tolerance (residual recomputed by ctmc).
    SUCCESS = "success"
    #: An iterative method stopped at its iteration limit before the tolerance.
    MAX_ITERATIONS = "max_iterations"
    #: The method broke down (singular pivot, Krylov breakdown, NaN).
    BREAKDOWN = "breakdown"
    #: The method finished but the recomputed residual exceeds the tolerance.
    INACCURATE = "inaccurate"
    #: Converged in norm, but the component-wise balance check fails on some
    #: states: small probabilities are not reliable (see ``balance_error``).
    TAIL_INACCURATE = "tail_inaccurate"

    @property
    def ok(self) -> bool:
        """True for :attr:`SUCCESS`."""
        return self is Status.SUCCESS


class SolverError(RuntimeError):
    """An analysis did not reach its tolerance; ``.result`` holds what it got."""

    def __init__(self, message: str, result: Optional["AnalysisResult"] = None):
        super().__init__(message)
        self.result = result


class ReducibleChainError(ValueError):
    """The chain has several closed classes, so no unique stationary law exists.

    ``.closed_classes`` lists the state indices of each closed class.
    """

    def __init__(self, message: str, closed_classes):
        super().__init__(message)
        self.closed_classes = closed_classes


class ModelError(ValueError):
    """A model declaration is invalid (bad bounds, update out of bounds, ...)."""


class StateSpaceTooLarge(MemoryError):
    """A build or solve would not fit in the memory the user allows."""


class TailAccuracyWarning(RuntimeWarning):
    """Small probabilities of a result fail ctmc's component-wise check."""


@dataclass(frozen=True, eq=False)
class AnalysisResult:
    """Fields common to all results.

    Attributes
    ----------
    method : str
        Name of the method that produced the answer (after ``"auto"`` chose).
    backend : str
        Linear-algebra backend (``"scipy"`` or ``"petsc"``).
    status : Status
        Outcome; see :class:`Status`.
    message : str
        Human-readable explanation of the status.
    iterations : int
        Iterations of an iterative method (0 for direct methods).
    residual : float
        Residual recomputed by ctmc; its definition is given per result type.
    wall_time : float
        Seconds spent in the analysis (setup included).
    info : dict
        Raw backend information (orderings, fill, fallbacks, ...).
    """

    method: str
    backend: str
    status: Status
    message: str
    iterations: int
    residual: float
    wall_time: float
    info: dict = field(default_factory=dict, repr=False)

    def check(self, strict: bool = True):
        """Raise :class:`SolverError` unless the status is a success; return ``self``.

        :attr:`Status.TAIL_INACCURATE` only warns (:class:`TailAccuracyWarning`).
        With ``strict=False`` nothing is raised (the warning still is).
        """
        if self.status is Status.TAIL_INACCURATE:
            warnings.warn(f"{type(self).__name__} ({self.method}): {self.message}",
                          TailAccuracyWarning, stacklevel=4)
        elif not self.status.ok and strict:
            raise SolverError(f"{self.method} on backend {self.backend!r}: "
                              f"{self.status.value}: {self.message}", self)
        return self


@dataclass(frozen=True, eq=False)
class StationaryResult(AnalysisResult):
    """Stationary distribution ``pi`` with ``pi Q = 0``, ``sum(pi) = 1``.

    Attributes
    ----------
    pi : ndarray, shape (n_states,)
        The stationary probabilities, indexed like the chain's states.
    balance_error : float
        ``max_j |(pi Q)_j| / (pi_j |q_jj|)`` over states with a
        representable probability: the relative imbalance between the flow
        into and out of each state. Large values flag noise-dominated small
        probabilities. (A small value is necessary, not sufficient, for
        relative accuracy.)
    underflow : int
        Number of states whose probability is below the smallest normal
        double (their value is 0 or denormal and carries no relative accuracy).
    error_bound : float
        A proven bound on ``||pi - pi_exact||_1`` (``inf`` when the answer
        is not usable); see :func:`ctmc.stationary.error_bound`. Above the
        option ``error_tol`` the status is ``INACCURATE``.

    ``residual`` is ``||pi Q||_1``; ``info["condition"]`` is
    ``max|q_ii| max_i E_i[T_k]``, the largest mean time to reach the state
    ``k = info["return_time_state"]`` in units of the fastest exit: the
    condition number of the bound.
    """

    pi: np.ndarray = None
    balance_error: float = 0.0
    underflow: int = 0
    error_bound: float = float("inf")

    def expect(self, reward) -> float:
        """Stationary expectation ``sum_j pi_j r_j`` of a per-state reward.

        Parameters
        ----------
        reward : array_like, shape (n_states,)
        """
        r = np.asarray(reward, dtype=float)
        if r.shape != self.pi.shape:
            raise ValueError(f"reward: expected shape {self.pi.shape}, got {r.shape}")
        return float(self.pi @ r)


@dataclass(frozen=True, eq=False)
class HittingResult(AnalysisResult):
    """Moments of the hitting time ``T_A = inf{t >= 0: X_t in A}``.

    Attributes
    ----------
    mean : ndarray, shape (n_states,)
        ``E_i[T_A]``; ``inf`` where ``P_i(T_A < inf) < 1``; 0 on ``A``.
    moments : ndarray, shape (k, n_states)
        ``moments[m-1] = E_i[T_A^m]`` for ``m = 1..k``.
    finite : ndarray of bool
        States from which ``A`` is reached with probability one.
    target : ndarray of bool
        The target set ``A``.

    ``residual`` is the largest normwise backward error
    ``||M x - b||_inf / (||M||_inf ||x||_inf + ||b||_inf)`` of the linear
    systems solved (``M = -Q_FF`` on the states ``F`` with finite moments);
    ``info["balance_error"]`` is the component-wise check and
    ``info["condition"]`` the condition number ``||M||_inf ||M^-1||_inf``
    (sparse LU only).

    ``error_bound`` bounds the relative normwise error of the means on the
    states with finite moments (``info["error_bound_kind"]``: ``"proven"``
    or ``"estimate"`` for GTH, see :func:`ctmc.passage.passage_bound`, both graded
    against ``error_tol``; ``"normwise"`` for means through a regeneration
    state, reported but not graded: it is proven yet astronomically loose for
    a rare target, whose means that method keeps entrywise accurate).
    """

    mean: np.ndarray = None
    moments: np.ndarray = None
    finite: np.ndarray = None
    target: np.ndarray = None
    error_bound: float = float("inf")

    def variance(self) -> np.ndarray:
        """``Var_i[T_A]`` (requires ``moments >= 2``)."""
        if self.moments.shape[0] < 2:
            raise ValueError("moments: variance needs moments >= 2")
        return self.moments[1] - self.moments[0] ** 2


@dataclass(frozen=True, eq=False)
class LaplaceResult(AnalysisResult):
    """Laplace-Stieltjes transform ``E_i[exp(-s T_A)]`` (0 when ``T_A = inf``).

    Attributes
    ----------
    s : ndarray, shape (n_s,)
    values : ndarray, shape (n_s, n_states) or (n_states,) for a scalar ``s``.
    target : ndarray of bool
    """

    s: np.ndarray = None
    values: np.ndarray = None
    target: np.ndarray = None
    #: bound on the relative normwise error of ``values`` (see :func:`ctmc.passage.passage_bound`)
    error_bound: float = float("inf")


@dataclass(frozen=True, eq=False)
class FirstPassageResult(AnalysisResult):
    """Joint law of ``(T_A, X_{T_A})``.

    Attributes
    ----------
    targets : ndarray of int, shape (m,)
        Indices of the states of ``A`` (columns of the arrays below).
    sources : ndarray of int, shape (r,)
        Indices of the starting states (rows).
    probabilities : ndarray, shape (r, m)
        ``P_i(T_A < inf, X_{T_A} = j)``.
    s, laplace : ndarray, shapes (n_s,) and (n_s, r, m)
        ``E_i[exp(-s T_A); X_{T_A} = j]`` (``None`` unless ``s`` was given).
    t, cdf : ndarray, shapes (n_t,) and (n_t, r, m)
        ``P_i(T_A <= t, X_{T_A} = j)`` (``None`` unless ``t`` was given).
    error_bound : float
        Bound on the absolute truncation error of ``cdf`` (uniformisation).
    solve_error_bound : float
        Bound on the error of ``probabilities`` and ``laplace`` from their
        linear solves, normwise: relative to the largest value of the whole
        solution (every state that can reach the target, not only the
        ``sources``), as the stationary bound is; small values are guarded by
        the component-wise balance check (``TAIL_INACCURATE``) (see
        :func:`ctmc.passage.passage_bound`; graded against ``error_tol``;
        ``nan`` for the adjoint solves used when targets are fewer than sources).
    """

    targets: np.ndarray = None
    sources: np.ndarray = None
    probabilities: np.ndarray = None
    s: Optional[np.ndarray] = None
    laplace: Optional[np.ndarray] = None
    t: Optional[np.ndarray] = None
    cdf: Optional[np.ndarray] = None
    error_bound: float = 0.0
    solve_error_bound: float = float("nan")


@dataclass(frozen=True, eq=False)
class TransientResult(AnalysisResult):
    """Transient distributions ``p(t) = p0 exp(Q t)``.

    Attributes
    ----------
    t : ndarray, shape (n_t,)
    p : ndarray, shape (n_t, n_states)
    error_bound : float
        Bound on the 1-norm truncation error of each ``p(t)``.
    """

    t: np.ndarray = None
    p: np.ndarray = None
    error_bound: float = 0.0

    def expect(self, reward) -> np.ndarray:
        """``E[r(X_t)]`` for every requested ``t``."""
        r = np.asarray(reward, dtype=float)
        if r.shape != self.p.shape[1:]:
            raise ValueError(f"reward: expected shape {self.p.shape[1:]}, got {r.shape}")
        return self.p @ r
