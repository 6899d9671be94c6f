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

Shapes and labels
-----------------
One convention for every result: per-state arrays have the states on their
**last** axis, indexed like the chain's states; an analysis asked for one
time ``t`` or one transform argument ``s`` (a number) returns arrays without
that axis, and one asked for a sequence of them returns a leading axis of the
same length. So ``transient(p0, t=1.0).p`` and ``hitting_laplace(A, s=0.5).values``
both have shape ``(n_states,)``, and with ``t=[1.0, 2.0]`` shape ``(2, n_states)``.

Results returned by a chain's analyses know their chain: ``result.to_frame()``
gives a table with the state variables as columns and the values beside them
(needs pandas), ``result.marginal("n2")`` the law of one variable,
``result.expect(expr)`` an expectation of an expression of the variables or
of a named reward, and ``result.at(n=3)`` / ``result.at_initial()`` read a
per-state answer at one state or at the chain's initial state. Reprs are short.
"""
from __future__ import annotations

import enum
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .progress import CtmcWarning

__all__ = [
    "Status", "SolverError", "ReducibleChainError", "TailAccuracyWarning",
    "ModelError", "ModelWarning", "StateSpaceTooLarge", "AnalysisResult", "StationaryResult",
    "HittingResult", "LaplaceResult", "FirstPassageResult", "TransientResult", "MeasureResult",
]


class Status(str, enum.Enum):
    """Outcome of an analysis.

    A member equals its value (``Status.SUCCESS == "success"``), so results that
    reported a plain string before report a member now without breaking a comparison.
    """

    #: The answer meets the requested tolerance (residual recomputed by ctmc).
    SUCCESS = "success"
    #: An iterative method stopped at its iteration limit before the tolerance.
    MAX_ITERATIONS = "max_iterations"
    #: The method broke down (singular pivot, Krylov breakdown, NaN).
    BREAKDOWN = "breakdown"
    #: The method finished but the recomputed residual exceeds the tolerance.
    INACCURATE = "inaccurate"
    #: Converged in norm, but the component-wise balance check fails on some
    #: states, or the small probabilities' relative error (measured by a correction
    #: solve, or bounded with ``tail_bound=True``) exceeds ``tail_tol``: small
    #: probabilities are not reliable (see ``balance_error``).
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


class ModelWarning(CtmcWarning, UserWarning):
    """Something about a built model the user should know (printed as one line)."""


class StateSpaceTooLarge(MemoryError):
    """A build or solve would not fit in the memory the user allows."""


class TailAccuracyWarning(CtmcWarning, RuntimeWarning):
    """Small probabilities of a result fail ctmc's component-wise check."""


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
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

    # labels, tables and short reprs (the chain is attached by the analyses) ----
    _chain = None

    def _bind(self, chain):
        """Attach the chain this result is about (its states, labels, rewards, initial states)."""
        object.__setattr__(self, "_chain", chain)
        return self

    @property
    def states(self):
        """The chain's state table (None for a result not obtained from a chain's method)."""
        return getattr(self._chain, "states", None)

    def _per_state(self, spec, name="reward") -> np.ndarray:
        if self._chain is not None:                # the chain's rule: expressions, reward and label names
            return self._chain._values(spec, name)
        from .sets import owned_values
        return owned_values(spec, None, self._n_states(), name=name, finite=True)

    def _n_states(self) -> int:
        cols = self._columns()
        return next(iter(cols.values())).shape[-1]

    def _columns(self) -> dict:
        """Per-state columns of :meth:`to_frame` (name -> array of shape (n_states,))."""
        raise TypeError(f"{type(self).__name__} has no per-state values")

    def to_frame(self):
        """The answer as a :class:`pandas.DataFrame`: state variables, then the values (needs pandas).

        One row per state (per source state for first-passage results).
        """
        from .tables import frame
        return frame(self.states, self._columns())

    def _state_index(self, state=None, **values) -> int:
        if state is not None and values:
            raise ValueError("state: give a state index or variable values, not both")
        if state is None:
            if self.states is None:
                raise ValueError("state: this result has no state table; give a state index")
            return self.states.index(**values)
        if isinstance(state, dict):
            return self.states.index(**state)
        if isinstance(state, (int, np.integer)) and not isinstance(state, bool):
            return int(state)
        raise ValueError(f"state: expected an index or {{var: value}}, got {state!r}")

    def _at(self, i: int):
        raise TypeError(f"{type(self).__name__} has no per-state answer to read at a state")

    def at(self, state=None, **values):
        """The per-state answer at one state: ``result.at(n1=3, n2=0)`` or ``result.at(17)``."""
        return self._at(self._state_index(state, **values))

    def at_initial(self):
        """The per-state answer at the chain's initial state (Storm's default reading).

        Raises ValueError if the chain has no initial state or several (then use :meth:`at`).
        """
        init = getattr(self._chain, "initial", None)
        if init is None or len(init) == 0:
            raise ValueError("at_initial: the chain has no initial state (build it with initial=...)")
        if len(init) > 1:
            raise ValueError(f"at_initial: the chain has {len(init)} initial states; read one with at(...)")
        return self._at(int(init[0]))

    def __repr__(self) -> str:
        from dataclasses import fields
        from .tables import summary
        head = [f"method={self.method!r}", f"status={self.status.value}"]
        body = []
        for f in fields(self):
            if f.name in ("method", "backend", "status", "message", "info"):
                continue
            v = getattr(self, f.name)
            if isinstance(v, (float, np.floating)):
                head.append(f"{f.name}={v:.3g}")
            elif isinstance(v, (int, np.integer)):
                head.append(f"{f.name}={v}")
            else:
                body.append(f"{f.name}: {summary(v)}")
        return f"{type(self).__name__}({', '.join(head)}; {'; '.join(body)})"

    def _repr_html_(self) -> str:
        from dataclasses import fields
        from .tables import html_table, summary
        rows = [(f.name, summary(getattr(self, f.name)) if isinstance(getattr(self, f.name), np.ndarray)
                 else getattr(self, f.name)) for f in fields(self) if f.name not in ("info", "status")]
        return html_table(f"{type(self).__name__}: {self.status.value}", rows)


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
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
        is not usable, NaN when none was asked: method ``"given"`` with
        ``bound=False``); see :func:`ctmc.stationary.error_bound`. Above the
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
        reward : array_like of shape (n_states,), number, expression, callable or str
            Values per state, an expression of the model's variables
            (``n1 + n2``; a boolean one gives a probability), or the name of
            one of the chain's rewards.
        """
        return float(self.pi @ self._per_state(reward))

    def marginal(self, by) -> dict:
        """Stationary law of a variable (or integer expression): ``{value: probability}``."""
        from .tables import marginal
        return marginal(self.pi, self.states, by)

    def _columns(self):
        return {"pi": self.pi}


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
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

    def _columns(self):
        cols = {"mean": self.mean}
        for m in range(2, self.moments.shape[0] + 1):
            cols[f"moment{m}"] = self.moments[m - 1]
        return cols

    def _at(self, i):
        """The mean at state ``i``."""
        return float(self.mean[i])


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class LaplaceResult(AnalysisResult):
    """Laplace-Stieltjes transform ``E_i[exp(-s T_A)]`` (0 when ``T_A = inf``).

    Attributes
    ----------
    s : ndarray, shape (n_s,)
    values : ndarray, shape (n_s, n_states), or (n_states,) for one number ``s``
    target : ndarray of bool
    """

    s: np.ndarray = None
    values: np.ndarray = None
    target: np.ndarray = None
    #: bound on the relative normwise error of ``values`` (see :func:`ctmc.passage.passage_bound`)
    error_bound: float = float("inf")

    def _columns(self):
        if self.values.ndim == 1:
            return {f"s={_num(self.s[0])}": self.values}
        return {f"s={_num(s)}": v for s, v in zip(self.s, self.values)}

    def _at(self, i):
        v = self.values[..., i]
        return float(v) if v.ndim == 0 else v.copy()


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
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
    s, laplace : ndarray, shapes (n_s,) and (n_s, r, m), or (r, m) for one number ``s``
        ``E_i[exp(-s T_A); X_{T_A} = j]`` (``None`` unless ``s`` was given).
    t, cdf : ndarray, shapes (n_t,) and (n_t, r, m), or (r, m) for one number ``t``
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

    def _columns(self):
        cols = {"P(reach)": self.probabilities.sum(axis=1)}
        for k, j in enumerate(self.targets):
            cols[f"P(enter {j})"] = self.probabilities[:, k]
        return cols

    def to_frame(self):
        """One row per source state: its variables, the probability of reaching the target and of each entrance."""
        from .tables import frame
        st = self.states
        sub = None if st is None else _Rows(st, self.sources)
        return frame(sub, self._columns(), index_name="source")


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class TransientResult(AnalysisResult):
    """Transient distributions ``p(t) = p0 exp(Q t)``.

    Attributes
    ----------
    t : ndarray, shape (n_t,)
    p : ndarray, shape (n_t, n_states), or (n_states,) for one number ``t``
    error_bound : float
        Bound on the 1-norm truncation error of each ``p(t)``.
    """

    t: np.ndarray = None
    p: np.ndarray = None
    error_bound: float = 0.0

    def expect(self, reward):
        """``E[r(X_t)]`` for every requested ``t`` (a number for a scalar ``t``).

        ``reward`` as for :meth:`StationaryResult.expect` (values, expression, reward name).
        """
        v = self.p @ self._per_state(reward)
        return float(v) if np.ndim(v) == 0 else v

    def marginal(self, by):
        """Law of a variable at each time: a dict (scalar ``t``) or a list of dicts."""
        from .tables import marginal
        if self.p.ndim == 1:
            return marginal(self.p, self.states, by)
        return [marginal(row, self.states, by) for row in self.p]

    def _columns(self):
        if self.p.ndim == 1:
            return {f"t={_num(self.t[0])}": self.p}
        return {f"t={_num(t)}": row for t, row in zip(self.t, self.p)}


@dataclass(frozen=True, eq=False, repr=False, kw_only=True)
class MeasureResult(AnalysisResult):
    """A measure from the initial law, with its per-state values where they exist.

    Returned by the one-liners of :class:`ctmc.analyses.Analyses`
    (``prob_within``, ``cumulative_reward``, ``throughput``).

    Attributes
    ----------
    value : float or ndarray
        The measure from the initial law (one value per requested ``t``, a
        number for a scalar ``t``).
    values : ndarray or None
        The measure from each starting state (states on the last axis), where
        it is defined per state.
    t : ndarray or None
        The times.
    error_bound : float
        Bound on the absolute error of ``value`` and ``values``.
    """

    value: object = None
    values: Optional[np.ndarray] = None
    t: Optional[np.ndarray] = None
    error_bound: float = 0.0

    def __float__(self):
        return float(self.value)

    def _columns(self):
        if self.values is None:
            raise TypeError("this measure has no per-state values")
        if self.values.ndim == 1:
            return {"value": self.values}
        return {f"t={_num(t)}": v for t, v in zip(self.t, self.values)}

    def _at(self, i):
        if self.values is None:
            raise TypeError("this measure has no per-state values")
        v = self.values[..., i]
        return float(v) if v.ndim == 0 else v.copy()


def _num(x) -> str:
    """Short text of a time or transform argument for a column name."""
    return f"{float(x):g}"


class _Rows:
    """A state table restricted to some rows (first-passage sources)."""

    def __init__(self, states, rows):
        self._st, self._rows = states, np.asarray(rows)

    @property
    def names(self):
        return self._st.names

    def __getitem__(self, name):
        return self._st[name][self._rows]
