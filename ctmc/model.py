r"""Declarative CTMC models: bounded integer variables and guarded events.

A model is a set of integer state variables :math:`x_1, \dots, x_d` with
inclusive bounds :math:`lo_v \le x_v \le hi_v` and a list of *events*. Event
:math:`e` is enabled in state :math:`x` when its guard :math:`g_e(x)` holds;
it then fires at rate :math:`r_e(x) \ge 0` and moves the chain to
:math:`u_e(x)`. The generator is

.. math::

    Q_{xy} = \sum_{e:\; g_e(x),\; u_e(x) = y \ne x} r_e(x), \qquad
    Q_{xx} = -\sum_{y \ne x} Q_{xy}.

Guards, rates and updates are vectorised expressions (:mod:`ctmc.expr`),
evaluated on thousands of states per numpy call.

**State space.** :meth:`Model.build` keeps only the states reachable from the
initial state(s). Each state is encoded as a mixed-radix integer (the first
declared variable most significant); the chain's states are sorted by this
code (:mod:`ctmc.encoding`), so the numbering is deterministic and independent
of the exploration strategy (a requirement for distributed assembly). Two
strategies (:mod:`ctmc.exploration`):

``"box"``
    evaluate every event on every point of the bounding box (in chunks), then
    find the reachable set with a compiled breadth-first search
    (:func:`scipy.sparse.csgraph.breadth_first_order`) and keep its
    transitions (rates and updates are checked on the reachable states only,
    so an unreachable corner of the box may hold invalid values). Fast when
    the box is not much larger than the reachable set.
``"bfs"``
    breadth-first search from the initial states, one vectorised expansion per
    frontier, with a code -> index table over the box when it fits in memory
    (a log-structured sorted index otherwise). Needed when the box is huge
    (e.g. many variables) and the reachable set small.

``"auto"`` weighs the two by a cost model measured on the benchmark gallery
and the families: the box costs about the same per point and event as the
search per reachable state and event, and each breadth-first level adds a
fixed cost of about ``_LEVEL_POINTS`` box points per event. The depth of the
search is at most about the sum of the variables' spans, so ``"box"`` is used
when the box has at most ``_LEVEL_POINTS`` times that sum of points (a long
thin chain such as a tandem line or a JSQ grid) and fits ``_BOX_LIMIT``;
``"bfs"`` otherwise.

Both are numpy's. Before them, ``build(strategy="auto" | "bfs")`` tries the
*compiled* breadth-first search of ``ctmc._compiled`` (the ``engine``
option): the model's expressions as bytecode run by a C extension, one state
at a time, with no per-level overhead. It builds the same chain (same
numbering, same values to the bit) and hands over to numpy for everything it
does not handle: a user function, immediate moves, heavy expressions on a
chain the cost model explores as a box (then numpy builds), and any error or
special case met on the way (then numpy builds again and reports it with its
own message); the details are in ``ctmc._compiled``.

Transitions of rate 0 are not transitions (they do not make states
reachable); self-loops are dropped from ``Q``.

**Immediate moves** (:meth:`Model.immediate`) take no time. A state where one
is enabled with a positive weight :math:`w_k(x)` is *vanishing*; the others
are *tangible*. Immediate moves have priority (as in generalised stochastic
Petri nets): a vanishing state's timed events never fire, and it is left at
once by move :math:`k` with probability :math:`w_k(x) / \sum_j w_j(x)`. Both
strategies explore the tangible states' timed events and the vanishing
states' immediate moves; then the vanishing states :math:`V` are eliminated
exactly (:mod:`ctmc.immediate`). With :math:`R` the timed rates out of the
tangible states :math:`T` and :math:`P` the jump chain of the vanishing states
(a self-loop only repeats the choice, so it is divided out:
:math:`P'_{vy} = w_{vy} / \sum_{z \ne v} w_{vz}`), the absorption
probabilities :math:`X = (I - P'_{VV})^{-1} P'_{VT}` give the tangible
generator

.. math::

    Q_{ij} = R_{ij} + \sum_{v \in V} R_{iv} X_{vj} \quad (i \ne j \in T).

:math:`X` is found level by level of the vanishing graph (exact sparse
products when it is acyclic, the usual case; a sparse LU per strong component
otherwise). A set of vanishing states that immediate moves cannot leave (a
timeless trap) raises :class:`~ctmc.results.ModelError` naming one of them.
The chain holds the tangible states only (its labels and rewards too);
a vanishing initial state is replaced by the tangible states it leads to
(``chain.initial_law`` holds their law when there are several: uniform over the
given initial states, each replaced by where it leads), and
``build_info["vanishing"]`` counts the states eliminated.
"""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Dict, Optional
from types import MappingProxyType

import numpy as np
import scipy.sparse as sp

from . import exploration, transitions
from .chain import CTMC, StateTable
from .encoding import StateLayout
from .expr import INT64, Expr, Var, as_expr, calls_function
from .immediate import flow as immediate_flow, vanishing as vanishing_mask
from .results import ModelError

__all__ = ["Model", "Event"]


@dataclass(frozen=True)
class Event:
    """A guarded transition of a :class:`Model` (see :meth:`Model.event`)."""

    name: str
    guard: Expr
    rate: Expr     # the weight of an immediate move
    update: tuple  # ((Var, Expr), ...)
    immediate: bool = False


class Model:
    """A declarative CTMC: integer variables plus guarded, rated events.

    Parameters
    ----------
    name : str
        A label for messages and reports.

    Examples
    --------
    An M/M/1/K queue:

    >>> import ctmc
    >>> K, lam, mu = 5, 1.0, 2.0
    >>> m = ctmc.Model("mm1k")
    >>> n = m.var("n", 0, K)
    >>> m.event("arrival", guard=n < K, rate=lam, update={n: n + 1})
    >>> m.event("departure", guard=n > 0, rate=mu, update={n: n - 1})
    >>> chain = m.build(initial={"n": 0})
    >>> chain.n_states
    6
    >>> round(chain.stationary().pi[0], 10)  # (1 - r) / (1 - r^(K+1)), r = 1/2
    0.5079365079
    """

    def __init__(self, name: str = "model"):
        self.name = str(name)
        self._vars: Dict[str, Var] = {}
        self._events: list[Event] = []
        self._immediates: list[Event] = []
        self._labels: Dict[str, Any] = {}
        self._rewards: Dict[str, Any] = {}

    # declaration ------------------------------------------------------------
    def var(self, name: str, lo: int, hi: int) -> Var:
        """Declare an integer state variable with inclusive bounds.

        Parameters
        ----------
        name : str
            A Python identifier, unique in the model.
        lo, hi : int
            Bounds, ``lo <= hi``.

        Returns
        -------
        Var
            A handle usable in expressions and as an ``update`` key.

        Raises
        ------
        ModelError
            For a duplicate or invalid name, bounds beyond the 64-bit range, or ``lo > hi``.
        """
        if not isinstance(name, str) or not name.isidentifier():
            raise ModelError(f"var name: expected an identifier, got {name!r}")
        if name in self._vars:
            raise ModelError(f"var name: {name!r} is already declared")
        for label, b in (("lo", lo), ("hi", hi)):
            if isinstance(b, bool) or not isinstance(b, (int, np.integer)):
                raise ModelError(f"var {name!r}: {label} must be an integer, got {b!r}")
            if not INT64[0] <= int(b) <= INT64[1]:       # values are 64-bit integers (ctmc.expr)
                raise ModelError(f"var {name!r}: {label} must lie in the 64-bit range [-2**63, 2**63 - 1], "
                                 f"got {b!r}")
        if lo > hi:
            raise ModelError(f"var {name!r}: bounds must satisfy lo <= hi, got lo={lo}, hi={hi}")
        v = Var(name, int(lo), int(hi))
        self._vars[name] = v
        return v

    def event(self, name: str, *, guard: Any = True, rate: Any, update: Mapping) -> None:
        """Declare an event.

        Parameters
        ----------
        name : str
            Label used in error messages and by :meth:`ctmc.CTMC.event_rate`.
        guard : Expr, callable or bool, default True
            Boolean expression: where the event is enabled.
        rate : Expr, callable or number
            Rate (>= 0) of the event where enabled; may depend on the state.
        update : dict
            ``{var: expression}``; variables not listed keep their value.
            Keys may be :class:`~ctmc.expr.Var` handles or variable names.

        Raises
        ------
        ModelError
            For an unknown variable in ``update`` or a negative constant rate.
        """
        self._events.append(self._declare(name, guard, rate, update, "rate", immediate=False))

    def immediate(self, name: str, *, guard: Any = True, update: Mapping, weight: Any = 1.0) -> None:
        r"""Declare an immediate (zero-time) move, eliminated exactly by :meth:`build`.

        A state where some immediate move is enabled (its guard holds and its
        weight is positive) is *vanishing*: the chain leaves it at once, by one
        of its enabled immediate moves chosen with probability weight / total
        weight. Immediate moves have priority over timed events, as in
        generalised stochastic Petri nets: the timed events of a vanishing
        state never fire there. The built chain has the other (*tangible*)
        states only; see the module docstring for the elimination.

        Parameters
        ----------
        name : str
            Unique among the model's events and immediate moves; by
            :meth:`ctmc.CTMC.event_rate` its flow (expected firings per unit
            time from each tangible state).
        guard : Expr, callable or bool, default True
            Boolean expression: where the move is enabled.
        update : dict
            ``{var: expression}``, as for :meth:`event`. An update that leaves
            the state unchanged is allowed (the choice is redrawn).
        weight : Expr, callable or number, default 1.0
            Weight (>= 0, finite) where enabled; may depend on the state. A
            weight of 0 disables the move in that state.

        Raises
        ------
        ModelError
            For an unknown variable in ``update``, a duplicate name or a
            negative constant weight (a negative weight in a reachable state is
            reported by :meth:`build`, naming the move and the state).

        Examples
        --------
        A server that serves queue ``q`` and moves on at once when it is empty
        (``s`` is the queue being served):

        >>> import ctmc
        >>> m = ctmc.Model("polling")
        >>> a, b, s = m.var("a", 0, 1), m.var("b", 0, 1), m.var("s", 0, 1)
        >>> m.event("arrive_a", guard=a < 1, rate=1.0, update={a: 1})
        >>> m.event("arrive_b", guard=b < 1, rate=1.0, update={b: 1})
        >>> m.event("serve_a", guard=(s == 0) & (a > 0), rate=2.0, update={a: 0})
        >>> m.event("serve_b", guard=(s == 1) & (b > 0), rate=2.0, update={b: 0})
        >>> m.immediate("switch_ab", guard=(s == 0) & (a == 0) & (b > 0), update={s: 1})
        >>> m.immediate("switch_ba", guard=(s == 1) & (b == 0) & (a > 0), update={s: 0})
        >>> chain = m.build(initial={"a": 0, "b": 0, "s": 0})
        >>> chain.n_states, chain.build_info["vanishing"]
        (6, 2)
        >>> chain.Q[chain.index(a=0, b=0, s=0), chain.index(a=0, b=1, s=1)]  # arrival at b, switch at once
        1.0
        """
        self._immediates.append(self._declare(name, guard, weight, update, "weight", immediate=True))

    def _declare(self, name, guard, rate, update, what, immediate):
        """The checked :class:`Event` of :meth:`event` / :meth:`immediate`."""
        kind = "immediate move" if immediate else "event"
        name = str(name)
        if not isinstance(update, Mapping):
            raise ModelError(f"{kind} {name!r}: update must be a dict {{var: expression}}")
        if any(e.name == name for e in (*self._events, *self._immediates)):
            raise ModelError(f"{kind} {name!r}: an event or immediate move of that name is already declared "
                             "(names must be unique: event_rate and throughput look events up by name)")
        def expr(value, part):
            try:
                return as_expr(value)
            except TypeError as exc:           # name the declaration and the parameter
                raise ModelError(f"{kind} {name!r}: {part}: {exc} (give a number, an expression of the "
                                 "variables or a function of the state)") from None

        items = []
        for key, val in update.items():
            vname = key.name if isinstance(key, Var) else key
            if vname not in self._vars:
                raise ModelError(f"{kind} {name!r}: update names unknown variable {key!r}")
            if any(v.name == vname for v, _ in items):
                raise ModelError(f"{kind} {name!r}: update names variable {vname!r} twice (once as the "
                                 "variable, once by its name?); give one new value per variable")
            items.append((self._vars[vname], expr(val, f"update of {vname}")))
        if isinstance(rate, (int, float)) and not isinstance(rate, bool):
            if not (rate >= 0 and math.isfinite(rate)):
                raise ModelError(f"{kind} {name!r}: {what} must be finite and >= 0, got {rate!r}")
        return Event(name, expr(guard, "guard"), expr(rate, what), tuple(items), immediate)

    @contextlib.contextmanager
    def _all_or_nothing(self):
        """Undo the declarations of the block when it raises: a helper declaring several variables and
        events (:func:`ctmc.ph.add_service`) leaves the model as it was when one of them is refused."""
        parts = (self._vars, self._events, self._immediates, self._labels, self._rewards)
        saved = [p.copy() for p in parts]
        try:
            yield
        except BaseException:
            for p, before in zip(parts, saved):
                p.clear()
                if isinstance(p, dict):
                    p.update(before)
                else:
                    p.extend(before)
            self.__dict__.pop("_calls_cache", None)     # keyed by the counts of events, which shrank
            raise

    def label(self, name: str, states: Any) -> None:
        """Name a set of states (a boolean expression); built chains carry it in ``chain.labels``.

        Labels are written by :func:`ctmc.io.write_prism` / :func:`ctmc.io.write_drn`
        and accepted by name wherever a set of states is expected.
        """
        if not isinstance(name, str) or not name:
            raise ModelError(f"label name: expected a non-empty string, got {name!r}")
        self._labels[name] = as_expr(states)

    def reward(self, name: str, values: Any) -> None:
        """Name a per-state reward rate (an expression); built chains carry it in ``chain.rewards``."""
        if not isinstance(name, str) or not name:
            raise ModelError(f"reward name: expected a non-empty string, got {name!r}")
        self._rewards[name] = as_expr(values)

    @property
    def variables(self) -> tuple:
        """The declared variables, in declaration order."""
        return tuple(self._vars.values())

    @property
    def events(self) -> tuple:
        """The declared (timed) events."""
        return tuple(self._events)

    @property
    def immediates(self) -> tuple:
        """The declared immediate moves (:meth:`immediate`)."""
        return tuple(self._immediates)

    @property
    def labels(self) -> Mapping[str, Expr]:
        """The declared labels, name -> boolean expression (:meth:`label`), read-only.

        >>> m = Model("q"); n = m.var("n", 0, 3); m.label("full", n == 3)
        >>> dict(m.labels)
        {'full': (n == 3)}
        """
        return MappingProxyType(self._labels)

    @property
    def rewards(self) -> Mapping[str, Expr]:
        """The declared rewards, name -> expression (:meth:`reward`), read-only."""
        return MappingProxyType(self._rewards)

    # encoding ---------------------------------------------------------------
    @property
    def layout(self) -> StateLayout:
        """The state encoding of the declared variables (:class:`~ctmc.encoding.StateLayout`).

        Raises
        ------
        ModelError
            Without variables, or when their bounding box has :math:`2^{62}` points or more.
        """
        return StateLayout.of(self.variables, self.name)

    @property
    def calls_function(self) -> bool:
        """Whether a guard, rate or update of the model calls a user function.

        Asked once per batch of states; the answer is kept until an event or
        immediate move is added (declarations are only ever added).
        """
        key = (len(self._events), len(self._immediates))
        cached = getattr(self, "_calls_cache", None)
        if cached is None or cached[0] != key:
            cached = self._calls_cache = (key, any(
                calls_function(e) for ev in (*self._events, *self._immediates)
                for e in (ev.guard, ev.rate, *(u for _, u in ev.update))))
        return cached[1]

    def initial_codes(self, initial) -> np.ndarray:
        """The sorted distinct codes (in :attr:`layout`) of the initial state(s) ``initial``.

        Parameters
        ----------
        initial : dict or list of dict
            As for :meth:`build`.

        Raises
        ------
        ValueError
            For a bad ``initial`` (missing, unknown or out-of-bounds variables).
        """
        return self.layout.initial_codes(initial)

    # build ------------------------------------------------------------------
    def build(self, initial=None, *, strategy: str = "auto", max_memory=None,
              max_states: Optional[int] = None, progress=None, engine: str = "auto", reuse=None):
        """Explore the reachable states and assemble the generator.

        Parameters
        ----------
        initial : dict or list of dict
            Initial state(s), ``{var_name: value}``; every variable is needed.
        strategy : {"auto", "box", "bfs"}
            Exploration strategy (see the module docstring). ``"auto"`` uses
            ``"box"`` when the bounding box times the number of events is at
            most 6e7 and the box has at most 1500 points per unit of the sum
            of the variables' spans (a bound on the search depth), else
            ``"bfs"``; ``build_info["strategy_reason"]`` says why.
        max_memory : int, optional
            Bytes the build may use; default 80 % of the available memory.
            A build estimated to need more raises
            :class:`~ctmc.results.StateSpaceTooLarge` before the heavy work.
        max_states : int, optional
            Refuse to build more states than this.
        progress : bool, optional
            Report progress on stderr (default: when stderr is a terminal).
        engine : {"auto", "compiled", "numpy"}
            Who explores with ``strategy="auto"`` or ``"bfs"``: ``"auto"`` the
            compiled search where the model compiles (numpy otherwise, and
            wherever it stops; see the module docstring), ``"compiled"`` the
            same but a ``ValueError`` naming the reason if the model cannot be
            compiled or the extension is not installed, ``"numpy"`` the
            vectorised builder only. ``build_info["engine"]`` says which built
            the chain.
        reuse : CTMC, optional
            A chain built before from a model of the same structure (the
            same variables, bounds, initial states, events' guards and
            updates, none calling a user function; rates may differ): its
            states and moves are kept and only the rates evaluated anew, when
            no move leaves them and all are still reached
            (:func:`ctmc.exploration.rebuild`); else the chain is built from
            scratch. The chain is the same either way;
            ``build_info["reused"]`` is True when the states were kept.

        Returns
        -------
        CTMC
            The chain on the reachable states, sorted by state code.

        Raises
        ------
        ModelError
            An update leaves the declared bounds, or a rate is negative or NaN,
            in a reachable state (the message names the event and the state).
        ValueError
            For a bad ``initial``, ``strategy`` or limit.
        TypeError
            For a ``reuse`` that is not a chain.
        """
        if reuse is not None and not isinstance(reuse, CTMC):
            raise TypeError(f"reuse: expected a chain built before (a ctmc.CTMC), got {type(reuse).__name__}")
        built = None if reuse is None else exploration.rebuild(self, initial, reuse, max_states=max_states,
                                                               max_memory=max_memory)
        if built is None:
            built = exploration.build(self, initial, strategy=strategy, max_memory=max_memory,
                                      max_states=max_states, progress=progress, engine=engine)
        states = StateTable(None, codes=built.codes, layout=built.layout)
        start = np.zeros(built.Q.shape[0], dtype=bool)    # the initial states as a set (a mask)
        start[built.initial] = True
        chain = CTMC(built.Q, states=states, check=False, initial=start, model=self)
        if "initial_law" in built.info:
            chain.set_initial_law(built.info["initial_law"])
        for k, v in self._labels.items():
            chain.add_label(k, v)
        for k, v in self._rewards.items():
            chain.add_reward(k, v)
        chain.build_info = built.info
        return chain

    # distributed assembly ---------------------------------------------------
    def state_space(self, initial=None, *, max_states: Optional[int] = None, max_memory=None,
                    progress=None, engine: str = "auto"):
        """Reachable states in the numbering of :meth:`build`, without the generator.

        The global numbering needed for distributed assembly: every process
        can call this (the state table is small next to the generator) and
        then assemble only its own rows with :meth:`generator_rows`. No
        generator is built: a small bounding box (points x events at most
        1/8 of the ``box`` strategy's limit) is explored as by ``build``'s
        compiled box strategy; a larger one by a breadth-first search that
        keeps state codes only (a one-byte flag per point of the box when the
        box is below a tenth of the memory limit, a sorted index otherwise).

        For a model with immediate moves (:meth:`immediate`) the states are
        the *tangible* ones, those of the built chain, and finding them needs
        the elimination: this calls :meth:`build` (and :meth:`generator_rows`
        refuses such a model).

        Parameters
        ----------
        initial, max_states, max_memory, progress, engine
            As for :meth:`build` (the compiled engine finds the codes only).

        Returns
        -------
        StateTable
            Sorted by state code: row ``i`` is state ``i`` of ``build(initial)``.

        Examples
        --------
        >>> import ctmc
        >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 4)
        >>> m.event("arrival", guard=n < 4, rate=1.0, update={n: n + 1})
        >>> m.event("departure", guard=n > 0, rate=2.0, update={n: n - 1})
        >>> m.state_space(initial={"n": 0})["n"]
        array([0, 1, 2, 3, 4])
        """
        exploration.check_engine(engine)
        if self._immediates:
            # the tangible states are known once the vanishing ones are eliminated: a build
            return self.build(initial, max_memory=max_memory, max_states=max_states, progress=progress,
                              engine=engine).states
        codes, layout = exploration.reachable(self, initial, max_states=max_states, max_memory=max_memory,
                                              progress=progress, engine=engine)
        return StateTable(None, codes=codes, layout=layout)

    def generator_rows(self, states, start: int, stop: int, *, engine: str = "auto") -> sp.csr_matrix:
        """Rows ``start:stop`` of the generator, from the events of those states only.

        Parameters
        ----------
        states : StateTable
            The global numbering, from :meth:`state_space` (or ``build().states``).
        start, stop : int
            The block of rows, ``0 <= start <= stop <= len(states)``.
        engine : {"auto", "compiled", "numpy"}
            As for :meth:`build`.

        Returns
        -------
        scipy.sparse.csr_matrix, shape (stop - start, len(states))
            Equal to ``build(initial).Q[start:stop]`` (global column numbers,
            diagonal included).

        Examples
        --------
        >>> import ctmc
        >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 4)
        >>> m.event("arrival", guard=n < 4, rate=1.0, update={n: n + 1})
        >>> m.event("departure", guard=n > 0, rate=2.0, update={n: n - 1})
        >>> m.generator_rows(m.state_space(initial={"n": 0}), 1, 2).toarray()
        array([[ 2., -3.,  1.,  0.,  0.]])
        """
        if self._immediates:
            raise ModelError(
                f"model {self.name!r}: generator_rows cannot assemble a model with immediate moves "
                f"({', '.join(e.name for e in self._immediates)}): eliminating the vanishing states mixes "
                "rows of different blocks; build the chain serially with Model.build (the distributed "
                "PETSc build does not support immediate moves)")
        return exploration.generator_rows(self, states, start, stop, engine=engine)

    def event_rate(self, name: str, env) -> np.ndarray:
        r"""Rate of event ``name`` in each state of ``env`` (0 where disabled).

        For a timed event, its rate where enabled; 0 in a vanishing state
        (immediate moves have priority, so timed events never fire there).
        For an immediate move, its *flow*: the expected number of its firings
        per unit time from each (tangible) state, that is
        :math:`\sum_v R_{iv} N_v` over the vanishing states :math:`v` the
        state's timed events lead to, with :math:`N = (I - P')^{-1} f` the
        expected number of firings in the zero-time excursion from :math:`v`
        (:math:`f_v` the move's weight over the total weight of the moves
        that leave :math:`v`; the module docstring defines :math:`P'`). So
        ``pi @ chain.event_rate(name)`` is its throughput in both cases.
        """
        n = len(next(iter(env.values())))
        for ev in self._events:
            if ev.name == name:
                with np.errstate(all="ignore"):
                    g = transitions.guard(ev, env, n)
                    r = transitions.rate_where(ev, env, n, g)
                    if self._immediates:
                        g = g & ~vanishing_mask(self, env, n)
                return np.where(g, r, 0.0)
        for k, ev in enumerate(self._immediates):
            if ev.name == name:
                return immediate_flow(self, k, env, n)
        raise ValueError(f"name: no event {name!r}; events are {[e.name for e in self._events]}"
                         + (f", immediate moves {[e.name for e in self._immediates]}" if self._immediates else ""))
