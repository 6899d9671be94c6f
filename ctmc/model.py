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
code, so the numbering is deterministic and independent of the exploration
strategy (a requirement for distributed assembly). Two strategies:

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
fixed cost of about :data:`_LEVEL_POINTS` box points per event. The depth of
the search is at most about the sum of the variables' spans, so ``"box"`` is
used when the box has at most ``_LEVEL_POINTS`` times that sum of points (a
long thin chain such as a tandem line or a JSQ grid) and fits
:data:`_BOX_LIMIT`; ``"bfs"`` otherwise.

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
exactly. With :math:`R` the timed rates out of the tangible states :math:`T`
and :math:`P` the jump chain of the vanishing states (a self-loop only
repeats the choice, so it is divided out: :math:`P'_{vy} = w_{vy} / \sum_{z
\ne v} w_{vz}`), the absorption probabilities :math:`X = (I - P'_{VV})^{-1}
P'_{VT}` give the tangible generator

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

import math
import warnings
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Dict, Optional

import numpy as np
import scipy.sparse as sp

from ._util import Timer, check_memory, memory_limit
from .progress import Progress
from .expr import Expr, Var, as_expr, calls_function
from .results import ModelError, ModelWarning, StateSpaceTooLarge

__all__ = ["Model", "Event"]

_CHUNK = 1 << 18
_BOX_LIMIT = 6.0e7  # box points x events evaluated by the box strategy at most
#: box points whose expansion costs about as much as the fixed cost of one breadth-first level
#: (fit on JSQ K=2000, tandem c=511, polling N=15, cluster N=64: level 2-3e-5 s per event,
#: a point 1-2e-8 s per event)
_LEVEL_POINTS = 1500
_PROBE_LEVELS = 64  # build(strategy="auto"): a breadth-first search this deep before the box
_BITMAP_SHARE = 0.1  # state_space: a box bitmap when the box is at most this share of the memory limit


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
            For a duplicate or invalid name, or ``lo > hi``.
        """
        if not isinstance(name, str) or not name.isidentifier():
            raise ModelError(f"var name: expected an identifier, got {name!r}")
        if name in self._vars:
            raise ModelError(f"var name: {name!r} is already declared")
        for label, b in (("lo", lo), ("hi", hi)):
            if isinstance(b, bool) or not isinstance(b, (int, np.integer)):
                raise ModelError(f"var {name!r}: {label} must be an integer, got {b!r}")
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

    # encoding ---------------------------------------------------------------
    def _layout(self):
        if not self._vars:
            raise ModelError(f"model {self.name!r}: declare at least one variable")
        names = list(self._vars)
        lo = np.array([self._vars[k].lo for k in names], dtype=np.int64)
        span = np.array([self._vars[k].hi - self._vars[k].lo + 1 for k in names], dtype=object)
        box = 1
        for s in span:
            box *= int(s)
        if box >= 2**62:
            raise ModelError(
                f"model {self.name!r}: the bounding box of the variables has {box:.3g} "
                "points, more than a 64-bit code can index; tighten the bounds")
        strides = np.ones(len(names), dtype=np.int64)
        for i in range(len(names) - 2, -1, -1):
            strides[i] = strides[i + 1] * int(span[i + 1])
        return names, lo, np.array(span, dtype=np.int64), strides, box

    def _decode(self, codes, layout):
        """``{variable: values}`` of a batch of codes, every variable decoded."""
        return dict(self._lazy_decode(codes, layout))

    def _calls_function(self) -> bool:
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

    @staticmethod
    def _lazy_decode(codes, layout):
        """The environment of a batch of codes, each variable decoded when an expression first reads it."""
        names, lo, span, strides, _ = layout
        col = {nm: i for i, nm in enumerate(names)}
        return _LazyEnv(names, lambda nm: (codes // strides[col[nm]]) % span[col[nm]] + lo[col[nm]])

    # expansion --------------------------------------------------------------
    def _expand(self, codes, layout, strict: bool, detail: bool = False):
        """All transitions out of a batch of states.

        Returns ``(src_pos, dst_code, rate, oob_pos, vanishing)``: positions
        into ``codes``; with ``strict`` an out-of-bounds update or an invalid
        rate raises, otherwise the sources of out-of-bounds updates and of
        invalid rates (also of events that change nothing) are returned in
        ``oob_pos`` (to be checked once reachability is known).

        ``vanishing`` is ``None`` for a model without immediate moves. With
        them it is a boolean mask over ``codes`` (an immediate move enabled
        with a positive weight); a vanishing state's transitions are its
        immediate moves with their *weights* (self-loops kept: they count for
        the probabilities), a tangible state's are its timed events. With
        ``detail`` the mask is a pair ``(mask, move)``: ``move`` gives, for
        each transition, the index of its immediate move (-1 for a timed event).
        """
        names, lo, span, strides, _ = layout
        # a user function gets the documented plain dict of every variable (and its own copy
        # for each event); expressions of operators only decode and gather what they read
        eager = self._calls_function()
        env = self._decode(codes, layout) if eager else self._lazy_decode(codes, layout)
        n = codes.shape[0]
        srcs, dsts, rates, oobs, moves = [], [], [], [], []
        vanishing = None
        with np.errstate(all="ignore"):
            if self._immediates:
                vanishing = np.zeros(n, dtype=bool)
                for k, ev in enumerate(self._immediates):
                    out = self._fire(ev, env, n, codes, layout, strict, eager, None)
                    if out is None:
                        continue
                    pos, w, dcode, live, oob, _ = out
                    vanishing[pos[live | oob]] = True       # enabled; an out-of-bounds move is an error later
                    if not strict:
                        oobs.append(pos[oob])
                    srcs.append(pos[live])
                    dsts.append(dcode[live])
                    rates.append(np.array(w[live], dtype=float))
                    if detail:
                        moves.append(np.full(int(live.sum()), k, dtype=np.int64))
                tangible = ~vanishing
            for ev in self._events:
                out = self._fire(ev, env, n, codes, layout, strict, eager, None if vanishing is None else tangible)
                if out is None:
                    continue
                pos, r, dcode, live, oob, delta = out
                if not strict:
                    oobs.append(pos[oob])
                keep = live & (delta != 0)
                srcs.append(pos[keep])
                dsts.append(dcode[keep])
                rates.append(np.array(r[keep], dtype=float))
                if detail:
                    moves.append(np.full(int(keep.sum()), -1, dtype=np.int64))
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.empty(0, dt))
        if detail and vanishing is not None:
            vanishing = (vanishing, cat(moves, np.int64))
        return (cat(srcs, np.int64), cat(dsts, np.int64), cat(rates, float),
                cat(oobs, np.int64), vanishing)

    def _fire(self, ev, env, n, codes, layout, strict, eager, where):
        """One event (or immediate move) on a batch: ``(pos, rate, dst_code, live, oob, delta)`` or ``None``.

        ``pos`` are the positions where the guard holds (and ``where``, if
        given); ``live`` marks the transitions with a non-zero rate (or
        weight) that stay in bounds, ``oob`` those that leave them; ``delta``
        is ``dst_code - code`` (0 where nothing changes; meaningless where
        ``oob``).
        """
        names, lo, span, strides, _ = layout
        what = "weight" if ev.immediate else "rate"
        g = _guard(ev, env, n)
        if where is not None:
            g = g & where
        pos = np.flatnonzero(g)
        if pos.size == 0:
            return None
        # the enabled states' values, each variable taken when first read
        if eager:
            sub = {k: v[pos] for k, v in env.items()}
        else:
            sub = env if pos.size == n else _LazyEnv(names, lambda nm, pos=pos: env[nm][pos])
        rv = ev.rate.evaluate(sub)
        bad = None
        if type(rv) in (int, float) and rv > 0 and rv < np.inf:
            # a constant rate (most events): every enabled state is live, nothing to check per state
            r, live = np.full(pos.size, float(rv)), np.ones(pos.size, dtype=bool)
        else:
            if type(rv) in (int, float) and rv == 0:
                return None
            r = _values(ev, what, rv, pos.size, float)
            live = r != 0  # NaN stays live and is caught below
            bad = ~((r >= 0) & (r < np.inf))
            if not bad.any():
                bad = None
            elif strict:
                k = int(np.flatnonzero(bad)[0])
                raise ModelError(
                    f"{_kind(ev)} {ev.name!r}: invalid {what} {r[k]!r} in state "
                    f"{self._state_text(sub, k)} ({what}s must be finite and >= 0)")
        # the code moves by (new - old) * stride per updated variable; a transition that
        # leaves the bounds is marked (an error, or dropped) and its code never used
        delta = 0
        oob = np.zeros(pos.shape, dtype=bool)
        for var, expr in ev.update:
            old = sub[var.name]
            new = expr.evaluate(sub)
            if type(new) is int:
                # a constant value: one bounds test for the whole batch
                if not var.lo <= new <= var.hi:
                    oob |= True
                delta = delta + (new - old) * strides[names.index(var.name)]
                continue
            new = _values(ev, f"update of {var.name!r}", new, pos.size)
            if new.dtype.kind not in "iub":
                newi = np.rint(new)
                nonint = ~(newi == new) & live
                if strict and nonint.any():
                    k = int(np.flatnonzero(nonint)[0])
                    raise ModelError(
                        f"{_kind(ev)} {ev.name!r}: update of {var.name!r} gives the "
                        f"non-integer {new[k]!r} in state {self._state_text(sub, k)}")
                oob |= nonint
                new = np.where(nonint, old, np.nan_to_num(newi)).astype(np.int64)
            elif new.dtype.kind != "i":
                new = new.astype(np.int64)
            oob |= (new < var.lo) | (new > var.hi)
            delta = delta + (new - old) * strides[names.index(var.name)]
        if bad is not None:
            # lenient pass: an invalid rate is flagged like a move out of bounds (an error if the
            # state is reachable), also for an event that leaves the state as it is
            oob |= bad
        oob &= live
        if strict and oob.any():
            k = int(np.flatnonzero(oob)[0])
            raise ModelError(
                f"{_kind(ev)} {ev.name!r}: update leaves the declared bounds from state "
                f"{self._state_text(sub, k)}; bounds are "
                + ", ".join(f"{v.lo} <= {v.name} <= {v.hi}" for v, _ in ev.update))
        if not strict:
            live &= ~oob
        return pos, r, codes[pos] + delta, live, oob, delta

    @staticmethod
    def _state_text(env, k):
        return "(" + ", ".join(f"{nm}={int(v[k])}" for nm, v in env.items()) + ")"

    def _initial_codes(self, initial, layout):
        names, lo, span, strides, _ = layout
        if initial is None:
            raise ValueError("initial: give the initial state(s), e.g. initial={'n': 0}")
        items = [initial] if isinstance(initial, Mapping) else list(initial)
        if not items:
            raise ValueError("initial: no initial state given")
        cols = {}
        for nm in names:
            vals = []
            for it in items:
                if nm not in it:
                    raise ValueError(f"initial: missing value for variable {nm!r}")
                raw = np.atleast_1d(np.asarray(it[nm]))
                if raw.dtype.kind not in "iub" and not (raw.dtype.kind == "f" and np.all(raw == np.round(raw))):
                    raise ValueError(f"initial: {nm} must be an integer, got {it[nm]!r}")
                vals.append(raw.astype(np.int64))
            cols[nm] = np.concatenate(vals)
        for it in items:
            extra = set(it) - set(names)
            if extra:
                raise ValueError(f"initial: unknown variables {sorted(extra)}")
        codes = np.zeros(len(next(iter(cols.values()))), dtype=np.int64)
        for i, nm in enumerate(names):
            v = self._vars[nm]
            if ((cols[nm] < v.lo) | (cols[nm] > v.hi)).any():
                raise ValueError(f"initial: {nm} must lie in [{v.lo}, {v.hi}], got {cols[nm]}")
            codes += (cols[nm] - lo[i]) * strides[i]
        return np.unique(codes)

    # build ------------------------------------------------------------------
    def build(self, initial=None, *, strategy: str = "auto", max_memory=None,
              max_states: Optional[int] = None, progress=None, engine: str = "auto"):
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
        """
        from .chain import CTMC, StateTable

        strategies = {"auto", "box", "bfs"}
        if strategy not in strategies:
            raise ValueError(f"strategy: expected one of {sorted(strategies)}, got {strategy!r}")
        _check_engine(engine)
        if engine == "compiled" and strategy == "box":
            raise ValueError("engine='compiled' searches breadth-first: give strategy='bfs' or 'auto'")
        layout, limit, init, box, n_ev = self._prepare(initial, max_states, max_memory)
        reason = "asked for"
        probed = compiled = None
        auto = strategy == "auto"
        with Timer() as timer:
            prog = Progress(f"building {self.name}", progress)
            if auto:
                strategy, reason = _choose_strategy(box, n_ev, int(layout[2].sum()))
                chosen = strategy
            if auto or strategy == "bfs":
                # the compiled search first (numpy's box stays the choice for heavy expressions on
                # a box-shaped chain, where it is faster)
                compiled = self._compiled(engine, lambda c: c.explore(
                    self, layout, init, max_states=max_states, limit=limit,
                    progress=lambda n: prog.update(f"{n} states found"),
                    box_alternative=engine == "auto" and strategy == "box"))
            if compiled is not None:
                codes, Q, n_trans = compiled
                prog.update(f"{codes.size} states found")
                if auto:
                    strategy, reason = "bfs", (f"compiled breadth-first search (the cost model chose {chosen}: "
                                               f"{reason})")
                initial, extra = np.searchsorted(codes, init), {}
            else:
                if strategy == "box" and auto:
                    # a box far larger than the reachable set (a capacity beyond reach) costs
                    # its size: a short breadth-first search finds a small chain first
                    try:
                        probed = self._build_bfs(init, layout, prog, limit, max_states, max_levels=_PROBE_LEVELS)
                    except (StateSpaceTooLarge, ModelError):
                        probed = None       # the box decides (its own guards apply), as before the probe
                    if probed is not None:
                        strategy, reason = "bfs", (f"the search ended within {_PROBE_LEVELS} levels "
                                                   f"(the box of {box} points was not needed)")
                if probed is not None:
                    codes, src, dst, rate, van = probed
                elif strategy == "box":
                    check_memory(box * (n_ev * 40 + 16), limit, f"exploring the {box}-point box of {self.name!r}")
                    codes, src, dst, rate, van = self._build_box(init, layout, prog, max_states)
                else:
                    codes, src, dst, rate, van = self._build_bfs(init, layout, prog, limit, max_states)
                initial, extra = np.searchsorted(codes, init), {}
                if van is not None:
                    codes, src, dst, rate, initial, extra = self._eliminate(codes, layout, src, dst, rate, van,
                                                                            initial)
                Q = _assemble(src, dst, rate, (codes.size, codes.size))
                n_trans = src.size
            n = codes.size
            prog.close(f"{n} states, {n_trans} transitions")
        states = StateTable(None, codes=codes, layout=layout)
        chain = CTMC(Q, states=states, check=False)
        chain._model = self
        chain._initial = initial
        if "initial_law" in extra:
            chain.set_initial_law(extra["initial_law"])
        for k, v in self._labels.items():
            chain.add_label(k, v)
        for k, v in self._rewards.items():
            chain.add_reward(k, v)
        chain.build_info = {"strategy": strategy, "n_states": n, "n_transitions": int(n_trans),
                            "seconds": timer.elapsed, "box": box, "strategy_reason": reason,
                            "engine": "numpy" if compiled is None else "compiled", **extra}
        return chain

    def _compiled(self, engine, call):
        """``call(ctmc._compiled)`` where ``engine`` lets the compiled engine work, else ``None`` (numpy).

        ``None`` also where it cannot or does not finish; with
        ``engine="compiled"`` a model it cannot compile is a ``ValueError``.
        """
        if engine == "numpy":
            return None
        from . import _compiled
        required = engine == "compiled"
        if self._calls_function() and not required:
            return None
        try:
            return call(_compiled)
        except _compiled.NotCompilable as exc:
            if required:
                raise ValueError(f"engine='compiled': model {self.name!r} cannot be compiled: {exc}") from None
            return None

    def _eliminate(self, codes, layout, src, dst, val, van, initial):
        """The tangible chain: vanishing states eliminated (the module docstring's equations).

        Returns ``(codes, src, dst, rate, initial, info)`` of the tangible
        states, the transitions with ``Q_TT + R_TV X`` (self-loops dropped),
        and the build information (``vanishing``, ``initial_law``).
        """
        n = codes.size
        V = np.flatnonzero(van)
        T = np.flatnonzero(~van)
        info = {"vanishing": int(V.size), "n_explored": int(n)}
        if V.size == 0:
            return codes, src, dst, val, initial, info
        if T.size == 0:
            raise self._trap_error(codes[V[:1]], layout)
        local = np.empty(n, dtype=np.int64)
        local[T] = np.arange(T.size)
        local[V] = np.arange(V.size)
        from_v = van[src]
        to_v = van[dst]
        # timed rates out of tangible states: R_TT and R_TV
        ft = ~from_v
        tt, tv = ft & ~to_v, ft & to_v
        R_TV = sp.csr_matrix((val[tv], (local[src[tv]], local[dst[tv]])), shape=(T.size, V.size))
        # the jump chain on the vanishing states, self-loops divided out: P' = W_off^-1 W_off-diagonal
        P_VV, P_VT = _jump_chain(local[src[from_v]], dst[from_v], val[from_v], van, local, V.size, T.size,
                                 self_loops=(src[from_v] == dst[from_v]))
        trapped = _trapped(P_VV, P_VT)
        if trapped.size:
            raise self._trap_error(codes[V[trapped[:1]]], layout)
        X = _absorb(P_VV, P_VT)
        # Q_TT + R_TV X, self-loops i -> v -> i dropped (they do not change the law)
        add = (R_TV @ X).tocoo()
        s2 = np.concatenate([local[src[tt]], add.row.astype(np.int64)])
        d2 = np.concatenate([local[dst[tt]], add.col.astype(np.int64)])
        r2 = np.concatenate([val[tt], add.data])
        keep = s2 != d2
        # the initial states: each vanishing one replaced by the tangible states it leads to
        iv = van[initial]
        if iv.any():
            law = X[local[initial[iv]]].tocsr()
            law.eliminate_zeros()
            rows = [local[initial[~iv]]] + [law.indices]
            initial_t = np.unique(np.concatenate(rows))
            deterministic = bool(np.all(np.diff(law.indptr) == 1))
            if not deterministic:
                full = sp.vstack([sp.csr_matrix((np.ones(int((~iv).sum())),
                                                 (np.arange(int((~iv).sum())), local[initial[~iv]])),
                                                shape=(int((~iv).sum()), T.size)), law]).tocsr()
                order = np.argsort(np.concatenate([np.flatnonzero(~iv), np.flatnonzero(iv)]), kind="stable")
                full = full[order]
                # one law: uniform over the given initial states, each replaced by where it leads
                info["initial_rows"] = full       # one row per given initial state (code order)
                info["initial_law"] = np.asarray(full.mean(axis=0)).ravel()
                warnings.warn(
                    f"model {self.name!r}: the initial state is vanishing and leads at once to "
                    f"{initial_t.size} tangible states at random; chain.initial holds them as a set and "
                    "chain.initial_law their law (where the one-liners start; give it as p0 to the other "
                    "analyses)", ModelWarning, stacklevel=3)
        else:
            initial_t = local[initial]
        return codes[T], s2[keep], d2[keep], r2[keep], initial_t, info

    def _trap_error(self, code, layout):
        env = self._decode(np.asarray(code, dtype=np.int64), layout)
        return ModelError(
            f"model {self.name!r}: timeless trap: from state {self._state_text(env, 0)} the immediate moves "
            "never reach a tangible state (every state they lead to has an immediate move enabled, so time "
            "would stop); give the immediate moves a way out, or make one of them a timed event")

    def _prepare(self, initial, max_states, max_memory):
        """Checks and layout shared by :meth:`build` and :meth:`state_space`.

        Returns ``(layout, memory limit, initial codes, box size, number of events)``.
        """
        if max_states is not None and not (isinstance(max_states, (int, np.integer)) and max_states > 0):
            raise ValueError(f"max_states: expected a positive integer, got {max_states!r}")
        if not self._events and not self._immediates:
            raise ModelError(f"model {self.name!r}: declare at least one event")
        layout = self._layout()
        limit = memory_limit(max_memory)
        init = self._initial_codes(initial, layout)
        return layout, limit, init, layout[4], len(self._events) + len(self._immediates)

    def _build_box(self, init, layout, prog, max_states):
        """``(codes, src, dst, rate, vanishing)``: the box expanded once, its reachable part kept."""
        codes, (src, dst, rate, van) = self._reachable_box(init, layout, prog, max_states, keep=True)
        index = np.full(layout[4], -1, dtype=np.int64)
        index[codes] = np.arange(codes.size)
        src = index[src]
        mine = src >= 0                      # transitions out of reachable states (their targets are)
        return codes, src[mine], index[dst[mine]], rate[mine], (None if van is None else van[codes])

    def _reachable_box(self, init, layout, prog, max_states, keep=False):
        """Sorted codes of the reachable states: the whole box expanded, then a compiled BFS.

        With ``keep``, also the box's transitions ``(src_code, dst_code, rate,
        vanishing over the box)``, checked on the reachable states as a strict
        expansion would have (the first offending state is expanded strictly
        for its message), so that the reachable ones need no second expansion.
        """
        box = layout[4]
        srcs, dsts, rates, vans, oob_src = [], [], [], [], []
        for start in range(0, box, _CHUNK):
            codes = np.arange(start, min(box, start + _CHUNK), dtype=np.int64)
            s, d, r, oob, v = self._expand(codes, layout, strict=False)
            srcs.append(codes[s])
            dsts.append(d)
            if keep:
                rates.append(r)
                vans.append(v)
            oob_src.append(codes[oob])
            prog.update(f"box {min(box, start + _CHUNK)}/{box}")
        src = np.concatenate(srcs)
        dst = np.concatenate(dsts)
        del srcs, dsts
        # virtual root (index box) linked to every initial state; float data: csgraph's own type
        G = sp.csr_matrix((np.ones(src.size + init.size),
                           (np.concatenate([src, np.full(init.size, box, dtype=np.int64)]),
                            np.concatenate([dst, init]))), shape=(box + 1, box + 1))
        from scipy.sparse.csgraph import breadth_first_order
        order = breadth_first_order(G, box, directed=True, return_predecessors=False)
        del G
        reach = np.zeros(box + 1, dtype=bool)
        reach[order] = True
        reach[box] = False
        codes = np.flatnonzero(reach)
        if max_states is not None and codes.size > max_states:
            raise ModelError(f"model {self.name!r}: {codes.size} reachable states exceed max_states={max_states}")
        oob = np.concatenate(oob_src)
        bad = oob[reach[oob]]          # out-of-bounds moves and invalid rates, flagged by the lenient pass
        if keep:
            rate = np.concatenate(rates)
        if bad.size:
            # re-expand the first offending reachable state strictly, for the message
            self._expand(np.sort(bad)[:1], layout, strict=True)
        if not keep:
            return codes
        van = np.concatenate(vans) if self._immediates else None
        return codes, (src, dst, rate, van)

    def _build_bfs(self, init, layout, prog, limit, max_states, max_levels=None):
        """Breadth-first exploration; ``None`` if it has not ended after ``max_levels`` frontiers."""
        # a sorted index while few states are known; a dense code -> index table over the
        # box once the states found are at least 1/64 of it (8 bytes a point: at most 512
        # bytes a state) and the box is small next to the memory limit
        box = layout[4]
        dense_ok = box * 8 <= _BITMAP_SHARE * limit
        index = _CodeIndex()
        index.add(init, np.arange(init.size))
        found = [init]
        n = init.size
        frontier, f0, n_trans, levels = init, 0, 0, 0
        srcs, dsts, rates, vans = [], [], [], []
        while frontier.size:
            levels += 1
            if max_levels is not None and levels > max_levels:
                return None
            if dense_ok and not isinstance(index, _DenseIndex) and 64 * n >= box:
                index = _DenseIndex(box)
                index.add(np.concatenate(found), np.arange(n))
            nxt = []
            for start in range(0, frontier.size, _CHUNK):
                c = frontier[start:start + _CHUNK]
                s, d, r, _, v = self._expand(c, layout, strict=True)
                srcs.append(s + f0 + start)
                rates.append(r)
                vans.append(v)
                nxt.append(d)
                n_trans += s.size
            f0 += frontier.size
            d_all = np.concatenate(nxt)
            if isinstance(index, _DenseIndex):
                # one gather finds the new targets; their codes are mapped through the table at the end
                new = np.unique(d_all[index.lookup(d_all) < 0])
                index.add(new, np.arange(n, n + new.size))
                dsts.append((False, d_all))
            else:
                # the targets' discovery indices, found once per level (no search over all codes at the end)
                cand, inv = np.unique(d_all, return_inverse=True)
                idx = index.lookup(cand)
                fresh = idx < 0
                new = cand[fresh]
                idx[fresh] = np.arange(n, n + new.size)
                index.add(new, idx[fresh])
                dsts.append((True, idx[inv]))
            found.append(new)
            n += new.size
            frontier = new
            if max_states is not None and n > max_states:
                raise ModelError(f"model {self.name!r}: more than max_states={max_states} reachable states")
            # triplets of the transitions found so far, extrapolated to the states found, and
            # their CSR assembly (about 56 bytes a transition in all), plus codes and index
            check_memory(n * (64 + 56 * n_trans / max(f0, 1)), limit,
                         f"building {self.name!r} ({n} states so far)")
            prog.update(f"{n} states found")
        codes_disc = np.concatenate(found)
        if isinstance(index, _DenseIndex):
            codes = np.flatnonzero(index.table >= 0)
            index.table[codes] = np.arange(codes.size)        # renumbered in code order
            rank = index.table[codes_disc]
        else:
            order = np.argsort(codes_disc, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            codes = codes_disc[order]
        # targets by discovery index (rank: to code order) or by code (the table, now in code order)
        dst = np.concatenate([rank[a] if disc else index.table[a] for disc, a in dsts]) if dsts \
            else np.empty(0, np.int64)
        src = rank[np.concatenate(srcs)] if srcs else np.empty(0, np.int64)
        rate = np.concatenate(rates) if rates else np.empty(0)
        van = None
        if self._immediates:            # in discovery order (each state expanded once), then by code
            van = np.zeros(codes.size, dtype=bool)
            van[rank] = np.concatenate(vans)
        return codes, src, dst, rate, van

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
        from .chain import StateTable
        _check_engine(engine)
        if self._immediates:
            # the tangible states are known once the vanishing ones are eliminated: a build
            return self.build(initial, max_memory=max_memory, max_states=max_states, progress=progress,
                              engine=engine).states
        layout, limit, init, box, n_ev = self._prepare(initial, max_states, max_memory)
        prog = Progress(f"exploring {self.name}", progress)
        found = self._compiled(engine, lambda c: c.explore(
            self, layout, init, max_states=max_states, limit=limit, codes_only=True,
            progress=lambda n: prog.update(f"{n} states found")))
        if found is not None:
            codes = found[0]
            prog.close(f"{codes.size} states")
            return StateTable(None, codes=codes, layout=layout)
        if box * n_ev <= _BOX_LIMIT // 8:
            # small box: the compiled exploration of build's box strategy
            # (its edge list is at most a few hundred MB on every process)
            check_memory(box * (n_ev * 40 + 16), limit, f"exploring the {box}-point box of {self.name!r}")
            codes = self._reachable_box(init, layout, prog, max_states)
            prog.close(f"{codes.size} states")
            return StateTable(None, codes=codes, layout=layout)
        # frontier by frontier; a one-byte-per-point bitmap when the box is
        # small next to the memory limit (every process of a node holds one)
        bitmap = box <= _BITMAP_SHARE * limit
        seen = np.zeros(box, dtype=bool) if bitmap else None
        if bitmap:
            seen[init] = True
        else:
            index = _CodeIndex()
            index.add(init, np.arange(init.size))
            found = [init]
        n, frontier = init.size, init
        while frontier.size:
            nxt = []
            for start in range(0, frontier.size, _CHUNK):
                _, d, _, _, _ = self._expand(frontier[start:start + _CHUNK], layout, strict=True)
                nxt.append(d)
            cand = np.unique(np.concatenate(nxt)) if nxt else np.empty(0, np.int64)
            if bitmap:
                frontier = cand[~seen[cand]]
                seen[frontier] = True
            else:
                frontier = cand[index.lookup(cand) < 0]
                index.add(frontier, np.arange(n, n + frontier.size))
                found.append(frontier)
            n += frontier.size
            if max_states is not None and n > max_states:
                raise ModelError(f"model {self.name!r}: more than max_states={max_states} reachable states")
            if not bitmap:
                check_memory(n * 64, limit, f"exploring {self.name!r} ({n} states so far)")
            prog.update(f"{n} states found")
        codes = np.flatnonzero(seen).astype(np.int64) if bitmap else np.sort(np.concatenate(found))
        prog.close(f"{codes.size} states")
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
        codes, layout = getattr(states, "_codes", None), getattr(states, "_layout", None)
        if codes is None or layout is None or list(layout[0]) != list(self._vars):
            raise ValueError("states: expected the state table of this model (from state_space or build)")
        n = codes.size
        if not (isinstance(start, (int, np.integer)) and isinstance(stop, (int, np.integer))
                and 0 <= start <= stop <= n):
            raise ValueError(f"start, stop: expected 0 <= start <= stop <= {n}, got {start!r}, {stop!r}")
        _check_engine(engine)
        own = self._layout()
        if np.array_equal(layout[1], own[1]) and np.array_equal(layout[2], own[2]):
            # (a table of other bounds: numpy checks the updates against the model's own)
            rows = self._compiled(engine, lambda c: c.rows(self, layout, codes, start, stop, memory_limit(None)))
            if rows is not None:
                return rows
        srcs, dsts, rates = [], [], []
        for a in range(start, stop, _CHUNK):
            b = min(stop, a + _CHUNK)
            s, d, r, _, _ = self._expand(codes[a:b], layout, strict=True)
            col = np.searchsorted(codes, d)
            if col.size and ((col >= n) | (codes[np.minimum(col, n - 1)] != d)).any():
                raise ValueError("states: a transition leaves the given state table (not this model's "
                                 "reachable set)")
            srcs.append(s + (a - start))
            dsts.append(col)
            rates.append(r)
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.empty(0, dt))
        return _assemble(cat(srcs, np.int64), cat(dsts, np.int64), cat(rates, float), (stop - start, n), start)

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
                    g = _guard(ev, env, n)
                    r = _values(ev, "rate", ev.rate.evaluate(env), n, float)
                    if self._immediates:
                        g = g & ~self._vanishing(env, n)
                return np.where(g, r, 0.0)
        for k, ev in enumerate(self._immediates):
            if ev.name == name:
                return self._immediate_flow(k, env, n)
        raise ValueError(f"name: no event {name!r}; events are {[e.name for e in self._events]}"
                         + (f", immediate moves {[e.name for e in self._immediates]}" if self._immediates else ""))

    def _vanishing(self, env, n):
        """Mask of the states of ``env`` where an immediate move is enabled with a non-zero weight."""
        van = np.zeros(n, dtype=bool)
        for ev in self._immediates:
            w = _values(ev, "weight", ev.rate.evaluate(env), n, float)
            van |= _guard(ev, env, n) & (w != 0)
        return van

    def _immediate_flow(self, k, env, n):
        """Expected firings per unit time of immediate move ``k`` from each state of ``env`` (see event_rate)."""
        layout = self._layout()
        names, lo, span, strides, _ = layout
        codes = np.zeros(n, dtype=np.int64)
        for i, nm in enumerate(names):
            codes += (np.asarray(env[nm], dtype=np.int64) - lo[i]) * strides[i]
        s, d, r, _, (van0, move) = self._expand(codes, layout, strict=True, detail=True)
        timed = move < 0
        s, d, r = s[timed], d[timed], r[timed]
        # the vanishing states the timed events lead to, and all those their immediate moves reach
        vcodes, vsrc, vdst, vw, vmove = [], [], [], [], []
        known = np.empty(0, dtype=np.int64)
        frontier = np.unique(d)
        while frontier.size:
            s2, d2, w2, _, (v2, m2) = self._expand(frontier, layout, strict=True, detail=True)
            imm = m2 >= 0
            vcodes.append(frontier[v2])
            vsrc.append(frontier[s2[imm]]), vdst.append(d2[imm]), vw.append(w2[imm]), vmove.append(m2[imm])
            known = np.union1d(known, frontier)
            frontier = np.setdiff1d(np.unique(d2[imm]), known, assume_unique=True)
        Vc = np.sort(np.concatenate(vcodes))
        flow = np.zeros(n)
        if Vc.size == 0:
            return flow
        vsrc, vdst, vw, vmove = (np.concatenate(x) for x in (vsrc, vdst, vw, vmove))
        allc = np.union1d(Vc, vdst)
        van = np.isin(allc, Vc)
        local = np.empty(allc.size, dtype=np.int64)
        local[van] = np.arange(Vc.size)
        local[~van] = np.arange(int((~van).sum()))
        src_l = np.searchsorted(Vc, vsrc)
        loops = vsrc == vdst
        P_VV, P_VT = _jump_chain(src_l, np.searchsorted(allc, vdst), vw, van, local, Vc.size,
                                 int((~van).sum()), self_loops=loops)
        trapped = _trapped(P_VV, P_VT)
        if trapped.size:
            raise self._trap_error(Vc[trapped[:1]], layout)
        # f_v: the move's weight (self-loops included) over the weight of the moves leaving v
        leave = np.bincount(src_l[~loops], weights=vw[~loops], minlength=Vc.size)
        mine = vmove == k
        f = np.bincount(src_l[mine], weights=vw[mine], minlength=Vc.size) / leave
        N = _absorb(P_VV, sp.csr_matrix(f[:, None])).toarray().ravel()
        pos = np.searchsorted(Vc, d)
        hit = (pos < Vc.size) & (Vc[np.minimum(pos, Vc.size - 1)] == d)
        flow += np.bincount(s[hit], weights=r[hit] * N[pos[hit]], minlength=n)
        return flow


def _check_engine(engine):
    engines = {"auto", "compiled", "numpy"}
    if engine not in engines:
        raise ValueError(f"engine: expected one of {sorted(engines)}, got {engine!r}")


def _choose_strategy(box: int, n_events: int, span_sum: int) -> tuple:
    """``("box" | "bfs", why)`` for ``build(strategy="auto")`` (the cost model of the module docstring).

    >>> _choose_strategy(4_004_001, 7, 4002)[0]       # JSQ K=2000: a deep grid, box twice the reachable set
    'box'
    >>> _choose_strategy(2_163_200, 15, 148)[0]       # cluster N=64: box 14 x the reachable set, shallow
    'bfs'
    """
    if box * n_events > _BOX_LIMIT:
        return "bfs", f"box x events = {box * n_events:.3g} > {_BOX_LIMIT:.3g}"
    if box > _LEVEL_POINTS * span_sum:
        return "bfs", (f"box of {box} points > {_LEVEL_POINTS} x {span_sum} (sum of spans, a bound on the "
                       "search depth): the search is cheaper")
    return "box", f"box of {box} points <= {_LEVEL_POINTS} x {span_sum} (sum of spans): a deep, dense chain"


class _LazyEnv(Mapping):
    """A read-only ``{variable: array}`` whose entries are computed on first access.

    Expressions read only the variables they name, so a guard, rate or update
    of a model with many variables decodes (or gathers) only those.
    """

    __slots__ = ("_names", "_get", "_cache")

    def __init__(self, names, get):
        self._names, self._get, self._cache = names, get, {}

    def __getitem__(self, name):
        try:
            return self._cache[name]
        except KeyError:
            if name not in self._names:
                raise
        value = self._cache[name] = self._get(name)
        return value

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)


def _kind(ev):
    return "immediate move" if ev.immediate else "event"


def _guard(ev, env, n):
    """The guard of ``ev`` on ``env`` as a boolean array of shape ``(n,)``; a non-boolean guard is an error."""
    g = ev.guard.evaluate(env)
    if type(g) is np.ndarray and g.dtype == bool and g.shape == (n,):
        return g                        # the common case, without the checks' conversions
    g = np.asarray(g)
    if g.dtype != bool:
        raise ModelError(f"{_kind(ev)} {ev.name!r}: guard must be boolean (comparisons such as n < 5 combined with "
                         f"&, |, ~), got values of type {g.dtype} (write e.g. n != 4 instead of n - 4)")
    return _values(ev, "guard", g, n)


def _values(ev, what, value, n, dtype=None):
    """``_full`` for a value of event ``ev``: a function returning the wrong length is named."""
    if type(value) is np.ndarray and value.shape == (n,) and (dtype is None or value.dtype == dtype):
        return value
    a = np.asarray(value, dtype=dtype)
    if a.ndim and a.shape != (n,):
        raise ModelError(f"{_kind(ev)} {ev.name!r}: its {what} gave {a.shape[0] if a.ndim == 1 else a.shape} "
                         f"values for {n} states (a function must return one value per state of the "
                         "variables it is given, or a scalar)")
    return _full(a, n)


def _full(value, n, dtype=None):
    """``value`` as an array of shape ``(n,)`` (scalars broadcast, no copy when it already is one)."""
    a = np.asarray(value, dtype=dtype)
    return a if a.shape == (n,) else np.broadcast_to(a, (n,))


def _jump_chain(src, dst, w, van, local, nv, nt, self_loops):
    """``(P_VV, P_VT)``: the embedded jump chain on the vanishing states, self-loops divided out.

    ``src`` are local vanishing indices, ``dst`` global state indices, ``w``
    weights. A self-loop of probability :math:`p_{vv}` only repeats the
    choice, so row :math:`v` is divided by :math:`1 - p_{vv}`: the weights of
    the moves that leave :math:`v` divided by their sum. A state whose every
    move is a self-loop gets an empty row (a trap, found by :func:`_trapped`).
    """
    off = ~self_loops
    s, d, w = src[off], dst[off], w[off]
    total = np.bincount(s, weights=w, minlength=nv)
    p = w / total[s]
    to_v = van[d]
    P_VV = sp.csr_matrix((p[to_v], (s[to_v], local[d[to_v]])), shape=(nv, nv))
    P_VT = sp.csr_matrix((p[~to_v], (s[~to_v], local[d[~to_v]])), shape=(nv, nt))
    P_VV.sum_duplicates()
    P_VT.sum_duplicates()
    return P_VV, P_VT


def _trapped(P_VV, P_VT):
    """Local indices of the vanishing states from which no tangible state can be reached."""
    from scipy.sparse.csgraph import breadth_first_order
    nv = P_VV.shape[0]
    exits = np.flatnonzero(np.diff(P_VT.indptr))
    A = P_VV.tocoo()
    # reversed edges, plus a root (index nv) linked to every state with a move to a tangible state
    G = sp.csr_matrix((np.ones(A.nnz + exits.size, dtype=np.int8),
                       (np.concatenate([A.col, np.full(exits.size, nv)]), np.concatenate([A.row, exits]))),
                      shape=(nv + 1, nv + 1))
    seen = np.zeros(nv + 1, dtype=bool)
    seen[breadth_first_order(G, nv, directed=True, return_predecessors=False)] = True
    return np.flatnonzero(~seen[:nv])


def _gather(indptr, indices, cols):
    """The concatenated ``indices[indptr[c]:indptr[c + 1]]`` of the columns (or rows) ``cols``."""
    starts, stops = indptr[cols], indptr[cols + 1]
    lens = stops - starts
    if not lens.sum():
        return np.empty(0, dtype=indices.dtype)
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return indices[offs + np.arange(lens.sum())]


def _levels(P):
    """Strong components of the graph of ``P`` and their level in the condensation.

    The level of a component is the length of the longest path from it to a
    component with no successor (level 0), found by peeling sinks (Kahn's
    algorithm, one vectorised step per level). Returns ``(comp, level)``,
    ``comp[i]`` the component of state ``i``.
    """
    from scipy.sparse.csgraph import connected_components
    nv = P.shape[0]
    nc, comp = connected_components(P, directed=True, connection="strong")
    A = P.tocoo()
    cr, cc = comp[A.row], comp[A.col]
    between = cr != cc
    C = sp.csr_matrix((np.ones(int(between.sum()), dtype=np.int8), (cr[between], cc[between])), shape=(nc, nc))
    C.sum_duplicates()
    outdeg = np.diff(C.indptr).astype(np.int64)
    Ct = C.tocsc()
    level = np.full(nc, -1, dtype=np.int64)
    ready, depth = np.flatnonzero(outdeg == 0), 0
    while ready.size:
        level[ready] = depth
        preds, counts = np.unique(_gather(Ct.indptr, Ct.indices, ready), return_counts=True)
        outdeg[preds] -= counts
        ready = preds[outdeg[preds] == 0]
        depth += 1
    assert (level >= 0).all() and nv == comp.size
    return comp, level


def _absorb(P, B):
    r"""``X = (I - P)^{-1} B``, sparse, for a jump chain ``P`` on vanishing states that all reach an exit.

    The states are taken level by level of the condensation of the graph of
    ``P`` (:func:`_levels`), lowest first: at level :math:`\ell` the rows
    :math:`L` satisfy :math:`(I - P_{LL}) X_L = B_L + P_{L,<\ell} X_{<\ell}`
    where :math:`P_{LL}` is block diagonal (one block per strong component:
    different components of a level have no move between them). When the
    graph is acyclic (the usual case) :math:`P_{LL} = 0` and no system is
    solved: each level is one sparse product, exact. A cycle's block is
    solved by a sparse LU (:func:`_solve_cycles`).
    """
    nv, k = B.shape
    comp, level = _levels(P)
    lv = level[comp]
    perm = np.lexsort((comp, lv))
    inv = np.empty_like(perm)
    inv[perm] = np.arange(nv)
    Pp = P[perm][:, perm].tocsr()
    Bp = B.tocsr()[perm]
    bounds = np.searchsorted(lv[perm], np.arange(int(level.max()) + 2))
    cp = comp[perm]
    X = _Rows(k)
    for a, b in zip(bounds[:-1], bounds[1:]):
        rhs = Bp[a:b]
        if a:
            lower = Pp[a:b, :a]
            if lower.nnz:
                rhs = rhs + lower @ X.matrix()
        D = Pp[a:b, a:b]
        if D.nnz:
            rhs = _solve_cycles(D, rhs.tocsr(), cp[a:b])
        X.append(rhs.tocsr())
    return X.matrix()[inv]


#: dense right-hand side entries per sparse-LU solve of :func:`_solve_cycles`
_DENSE_RHS = 1 << 22


def _solve_cycles(D, rhs, comp):
    """``(I - D)^{-1} rhs`` for a block-diagonal ``D`` (blocks: runs of equal ``comp``)."""
    from scipy.sparse.linalg import splu
    m, k = rhs.shape
    starts = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1]])
    sizes = np.diff(np.r_[starts, m])
    cyc = np.repeat(sizes > 1, sizes)                 # rows of components with a cycle
    out_r, out_c, out_v = [], [], []
    triv = np.flatnonzero(~cyc)
    t = rhs[triv].tocoo()
    out_r.append(triv[t.row]), out_c.append(t.col), out_v.append(t.data)
    # components with a cycle, grouped (whole components) into batches of about 2048 rows
    rows = np.flatnonzero(cyc)
    offs = np.r_[0, np.cumsum(sizes[sizes > 1])]
    idx = np.searchsorted(offs, np.arange(0, rows.size, 2048), side="right") - 1
    cuts = np.unique(np.r_[offs[idx], rows.size])
    for a, b in zip(cuts[:-1], cuts[1:]):
        r = rows[a:b]
        A = (sp.identity(r.size, format="csc") - D[r][:, r]).tocsc()
        lu = splu(A)
        R = rhs[r]
        cols = np.unique(R.indices)
        step = max(1, _DENSE_RHS // max(r.size, 1))
        for c0 in range(0, cols.size, step):
            cc = cols[c0:c0 + step]
            Y = lu.solve(np.asarray(R[:, cc].toarray(), dtype=float))
            np.maximum(Y, 0.0, out=Y)                 # (I - D)^{-1} >= 0: clip round-off
            i, j = np.nonzero(Y)
            out_r.append(r[i]), out_c.append(cc[j]), out_v.append(Y[i, j])
    return sp.csr_matrix((np.concatenate(out_v), (np.concatenate(out_r), np.concatenate(out_c))), shape=(m, k))


class _Rows:
    """A CSR matrix grown by appending rows, in amortised O(1) per entry."""

    def __init__(self, k):
        self.k, self.m, self.nnz = k, 0, 0
        self.indptr = [np.zeros(1, dtype=np.int64)]
        self.indices = np.empty(1024, dtype=np.int64)
        self.data = np.empty(1024)

    def append(self, A):
        A.sum_duplicates()
        need = self.nnz + A.nnz
        if need > self.data.size:
            cap = max(need, 2 * self.data.size)
            self.indices = np.resize(self.indices, cap)
            self.data = np.resize(self.data, cap)
        self.indices[self.nnz:need] = A.indices
        self.data[self.nnz:need] = A.data
        self.indptr.append(A.indptr[1:] + self.nnz)
        self.m += A.shape[0]
        self.nnz = need

    def matrix(self):
        if len(self.indptr) > 1:
            self.indptr = [np.concatenate(self.indptr)]
        return sp.csr_matrix((self.data[:self.nnz], self.indices[:self.nnz], self.indptr[0]),
                             shape=(self.m, self.k))


def _assemble(src, dst, rate, shape, first=0):
    """Rows ``first:first + shape[0]`` of a generator, CSR, from transition triplets.

    Duplicates (events of one state leading to the same state) are summed in
    the order given (the order of the events, for a chain without immediate
    moves: the compiled builder's order); the diagonal (column ``first +
    row``) is minus the row sum. scipy sums duplicates after sorting each
    row, stably in rows of at most 16 entries (its sort is then an insertion
    sort) but not in longer ones: their duplicates are summed here first, in
    order, so that every row's sums are the compiled builder's to the bit.
    """
    m, n = shape
    counts = np.bincount(src, minlength=m) if src.size else np.zeros(m, np.int64)
    long = counts > 16
    if long.any():
        sel = long[src]
        key = src[sel] * np.int64(n) + dst[sel]
        uniq, inv = np.unique(key, return_inverse=True)
        sums = np.zeros(uniq.size)
        np.add.at(sums, inv, rate[sel])                  # in the order given
        src = np.concatenate([src[~sel], uniq // n])
        dst = np.concatenate([dst[~sel], uniq % n])
        rate = np.concatenate([rate[~sel], sums])
    off = sp.csr_matrix((rate, (src, dst)), shape=shape)
    off.sum_duplicates()
    out = np.asarray(off.sum(axis=1)).ravel()
    diag = sp.csr_matrix((-out, (np.arange(m), np.arange(first, first + m))), shape=shape)
    Q = (off + diag).tocsr()
    Q.sort_indices()
    return Q


class _DenseIndex:
    """Code -> index in one array over the whole box (-1: not seen): O(1) per lookup."""

    def __init__(self, box):
        self.table = np.full(box, -1, dtype=np.int64)

    def add(self, codes, idx):
        self.table[codes] = idx

    def lookup(self, q):
        return self.table[q]


class _CodeIndex:
    """Sorted runs of (code, index) merged like a binary counter (LSM style).

    Lookup costs one ``searchsorted`` per run (O(log n) runs); insertion is
    amortised O(log n) per code.
    """

    def __init__(self):
        self.runs: list = []

    def add(self, codes, idx):
        if codes.size == 0:
            return
        o = np.argsort(codes, kind="stable")
        self.runs.append((codes[o], np.asarray(idx)[o]))
        while len(self.runs) >= 2 and self.runs[-1][0].size >= self.runs[-2][0].size // 2:
            (c2, i2), (c1, i1) = self.runs.pop(), self.runs.pop()
            c = np.concatenate([c1, c2])
            i = np.concatenate([i1, i2])
            o = np.argsort(c, kind="stable")
            self.runs.append((c[o], i[o]))

    def lookup(self, q):
        res = np.full(q.shape, -1, dtype=np.int64)
        for c, i in self.runs:
            pos = np.searchsorted(c, q)
            pos[pos >= c.size] = c.size - 1
            hit = c[pos] == q
            res[hit] = i[pos[hit]]
        return res
