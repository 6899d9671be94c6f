r"""Phase-type stations of :math:`c \ge 1` servers: the rules every station shares, and the exact
lumped representation of :math:`c > 1` servers (:func:`ctmc.ph.add_service` with ``servers=c``).

A station of :math:`c` identical servers has a queue variable :math:`n \in 0..K` (jobs in service
and waiting, first come first served) and a service law :math:`PH(\alpha, S)` of order :math:`m`
with exit rates :math:`s = -S\mathbf 1`. :math:`b = \min(n, c)` servers are busy. The servers are
exchangeable, so the state keeps only the number :math:`x_i` of busy servers in each phase
:math:`i` (one counter variable ``{name}_busy_{i}``, bounds :math:`0..c`,
:math:`\sum_i x_i = \min(n, c)`), not the phase of each server: the chain on :math:`(n, x)` is the
exact (strong) lumping of the chain on :math:`(n, j_1, \dots, j_c)` under the permutations of the
servers. Its events, every rate times ``speed``:

* ``{name}_phase_{i}_{k}`` (:math:`S_{ik} > 0`): a server in phase :math:`i` moves to :math:`k`,
  rate :math:`x_i S_{ik}`;
* ``{name}_done_{i}`` (:math:`n \le c`): a completion in phase :math:`i`, rate :math:`x_i s_i`;
  :math:`n \to n - 1`, :math:`x_i \to x_i - 1`;
* ``{name}_done_{i}_next_{k}`` (:math:`n > c`): a completion after which the first waiting job
  starts in phase :math:`k`, rate :math:`x_i s_i \alpha_k`;
* arrivals (:meth:`StationBase.arrival`): to an idle server (:math:`n < c`) one event
  ``{arrival}_{name}_start_{k}`` per starting phase, rate times :math:`\alpha_k`; to the queue
  (:math:`c \le n < K`) the event ``{arrival}``; lost at :math:`n = K`.

Every random choice of phase is one event per outcome, so the rates are :math:`x_i` times
constants. ``to=``, ``guard``, ``speed`` and ``update`` mean what they mean for one server
(:func:`ctmc.ph.add_service`).

**State count.** With :math:`n` jobs the counters are the compositions of :math:`\min(n, c)` into
:math:`m` parts, :math:`\binom{\min(n, c) + m - 1}{m - 1}` of them, so the station alone has

.. math::

    N(c, m, K) = \sum_{n=0}^{K} \binom{\min(n, c) + m - 1}{m - 1}
              = \binom{c + m - 1}{m} + (K - c + 1) \binom{c + m - 1}{m - 1}

states (:func:`station_states`; the hockey-stick identity gives the first term), against
:math:`(K + 1)(m + 1)^c` for distinguishable servers. Two limits are checked before anything is
declared: :math:`N \le` :data:`MAX_STATES`, and the counters' box
:math:`(K + 1)(c + 1)^m` below the :math:`2^{62}` codes of the model's state encoding
(:mod:`ctmc.encoding`), which is what bounds the number of phases: an Erlang-40 law fits on one
server, not on two.

:class:`StationBase` holds what both kinds of station share (arrivals, the variables a station
owns, its empty state, the check of a user's ``update``); :func:`declare_completions` declares the
completion events of either, :func:`speed_rule` applies ``speed`` to a rate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np

from .expr import Var

__all__ = ["MAX_STATES", "StationBase", "MultiServerStation", "station_states", "check_servers",
           "check_update", "speed_rule", "declare_completions", "add_servers"]

#: a station of more servers refuses to have more states than this on its own (before the rest of
#: the model multiplies them)
MAX_STATES = 10 ** 9
#: codes of the model's state encoding lie below this (:mod:`ctmc.encoding`)
_BOX_BITS = 62


def _key(v) -> str:
    return v.name if isinstance(v, Var) else str(v)


def check_update(update, own, what) -> dict:
    """``update`` as a dict, refused (ValueError naming ``what``) when it is not a mapping or
    changes one of the station's own variables (the names ``own``)."""
    if update is None:
        return {}
    if not isinstance(update, Mapping):
        raise ValueError(f"{what}: expected a dict {{var: expression}}, got {type(update).__name__}")
    clash = sorted(set(own) & {_key(k) for k in update})
    if clash:
        raise ValueError(f"{what}: must not change the station's own variables {clash} "
                         "(the helper sets them)")
    return dict(update)


def speed_rule(speed):
    """The function applying ``speed`` to a rate: the rate itself at the constant speed 1."""
    if isinstance(speed, (int, float)) and speed == 1.0:
        return lambda r: r
    return lambda r: speed * r


class StationBase:
    """What every phase-type station shares; subclasses give :meth:`own_variables` and :meth:`joins`."""

    def own_variables(self) -> tuple:
        """The variables the station sets (its queue first)."""
        raise NotImplementedError

    def joins(self) -> list:
        """``(guard, probability, update, suffix)`` for each way a job joins the station."""
        raise NotImplementedError

    @property
    def empty(self) -> dict:
        """``{variable name: 0}`` for each of the station's own variables: its part of an initial
        state with the station empty (``model.build(initial={**station.empty, ...})``)."""
        return {v.name: 0 for v in self.own_variables()}

    def check_update(self, update, what) -> dict:
        """``update`` as a dict, refused when it sets one of the station's own variables."""
        return check_update(update, [v.name for v in self.own_variables()], what)

    def arrival(self, name: str, rate: Any, *, guard: Any = True,
                update: Optional[Mapping] = None) -> tuple:
        """Declare the events of jobs arriving at rate ``rate`` (lost when the queue is full).

        An arrival that waits (or, with one server, joins a busy one) is the event ``name``; one
        that finds an idle server is the event ``{name}_{station}_start_{k}`` of rate
        ``rate * alpha_k``, the job starting in phase ``k``. ``guard`` and ``update`` (other
        variables only) apply to every one of them: an arrival from elsewhere in the model (a
        server that is not a phase-type station, a router) is written with them.

        Returns
        -------
        tuple of str
            The names of the events declared.
        """
        user = self.check_update(update, "update")
        names = []
        with self.model._all_or_nothing():      # one refused event: none of the arrival's is left
            for g, p, upd, sfx in self.joins():
                nm = f"{name}{sfx}"
                self.model.event(nm, guard=g & guard, rate=rate if p == 1.0 else rate * p,
                                 update={**upd, **user})
                names.append(nm)
        return tuple(names)


def declare_completions(station, own, work, user, scaled, to) -> tuple:
    """Declare the completion events ``{name}_done_{i}{own suffix}{to suffix}`` of ``station``.

    ``own(i)`` (``i`` a 0-based exit phase) gives ``(at, count, branches)``: where a job in phase
    ``i`` can complete, the number of such jobs (None for one) and the station's own outcomes
    ``(guard, probability, update, suffix)``; ``to`` (a station or None) adds its
    :meth:`StationBase.joins`. Rate: ``count`` times ``s_i`` times both probabilities, scaled.
    """
    down = [(True, 1.0, {}, "")] if to is None else to.joins()
    s = station.law.exit_rates
    done = []
    for i in np.flatnonzero(s > 0):
        at, count, branches = own(int(i))
        for g1, p1, u1, x1 in branches:
            for g2, p2, u2, x2 in down:
                nm = f"{station.name}_done_{i + 1}{x1}{x2}"
                r = float(s[i]) * p1 * p2
                rate = scaled(r if count is None else count * r)
                station.model.event(nm, guard=work & at & g1 & g2, rate=rate, update={**u1, **u2, **user})
                done.append(nm)
    return tuple(done)


def station_states(servers: int, phases: int, capacity: int) -> int:
    r"""The number of states :math:`N(c, m, K)` of a station alone (module docstring), exact."""
    c, m, K = int(servers), int(phases), int(capacity)
    return math.comb(c + m - 1, m) + (K - c + 1) * math.comb(c + m - 1, m - 1)


def check_servers(servers, queue, law) -> int:
    """``servers`` as an int in ``1..K`` (``K`` the queue's upper bound), refused (ValueError naming
    it and the range) otherwise, or when the station would exceed :data:`MAX_STATES` states or
    the state encoding's :math:`2^{62}` codes."""
    K = int(queue.hi)
    if isinstance(servers, bool) or not isinstance(servers, (int, np.integer)) or not 1 <= servers <= K:
        raise ValueError(f"servers: expected an integer in 1..{K} (at most the upper bound of queue "
                         f"{queue.name!r}), got {servers!r}")
    c, m = int(servers), law.n_phases
    if c == 1:
        return c
    bits = math.log2(K + 1) + m * math.log2(c + 1)
    if bits >= _BOX_BITS:
        raise ValueError(f"servers: {c} servers with {m} phases need {m} counters in 0..{c}, a box of "
                         f"(K + 1)(c + 1)^m = 2^{bits:.1f} codes; the state encoding allows fewer than "
                         f"2^{_BOX_BITS}: use fewer servers or a law with fewer phases (ph.fit)")
    n = station_states(c, m, K)
    if n > MAX_STATES:
        raise ValueError(f"servers: {c} servers with {m} phases and capacity {K} make {n:.4g} states "
                         f"(allowed up to {MAX_STATES:.0e}): use fewer servers, a law with fewer "
                         "phases (ph.fit) or a smaller capacity")
    return c


@dataclass(frozen=True, eq=False)
class MultiServerStation(StationBase):
    r"""A station of ``servers`` servers declared by :func:`ctmc.ph.add_service` (module docstring).

    Attributes
    ----------
    model : Model
    law : PhaseType
    queue : Var
        Jobs at the station (in service and waiting).
    busy : tuple of Var
        ``busy[i]``: the number of servers busy in phase ``i + 1`` (``{name}_busy_{i+1}``).
    servers : int
    name : str
        Prefix of the station's event and variable names.
    phase_events, completion_events : tuple of str
        Names of the declared events (the station's throughput is the sum over
        ``completion_events``: ``chain.throughput(station.completion_events)``).
    """

    model: Any
    law: Any
    queue: Var
    busy: tuple
    servers: int
    name: str
    phase_events: tuple
    completion_events: tuple

    def own_variables(self) -> tuple:
        return (self.queue, *self.busy)

    def joins(self) -> list:
        n, c = self.queue, self.servers
        out = [((n >= c) & (n < n.hi), 1.0, {n: n + 1}, "")]
        for k in np.flatnonzero(self.law.alpha > 0):
            x = self.busy[k]
            out.append((n < c, float(self.law.alpha[k]), {n: n + 1, x: x + 1}, f"_{self.name}_start_{k + 1}"))
        return out


def add_servers(model, law, queue, servers, *, name, guard, speed, update, to) -> MultiServerStation:
    """Declare the lumped ``servers``-server station (module docstring) on ``model``.

    Called by :func:`ctmc.ph.add_service`, which checked every argument (``servers`` by
    :func:`check_servers`); the counters' names are checked here before anything is declared.
    """
    n, c, m = queue, int(servers), law.n_phases
    names = [f"{name}_busy_{i + 1}" for i in range(m)]
    user = check_update(update, [queue.name, *names], "update")
    taken = sorted(set(names) & {v.name for v in model.variables})
    if taken:
        raise ValueError(f"name: the counters {taken[:3]} of station {name!r} are already variables of model "
                         f"{model.name!r}: give the station another name")
    busy = tuple(model.var(v, 0, c) for v in names)
    scaled = speed_rule(speed)
    moves = []
    for i0, i1, d, rate in law.phase_moves:
        for i in range(i0, i1 + 1):
            x, y = busy[i - 1], busy[i - 1 + d]
            nm = f"{name}_phase_{i}_{i + d}"
            model.event(nm, guard=(x >= 1) & guard, rate=scaled(x * float(rate)), update={x: x - 1, y: y + 1})
            moves.append(nm)

    def own(i):
        x = busy[i]
        out = [(n <= c, 1.0, {n: n - 1, x: x - 1}, "")]
        for k in np.flatnonzero(law.alpha > 0):
            upd = {n: n - 1} if k == i else {n: n - 1, x: x - 1, busy[k]: busy[k] + 1}
            out.append((n > c, float(law.alpha[k]), upd, f"_next_{k + 1}"))
        return x >= 1, x, out

    st = MultiServerStation(model, law, queue, busy, c, name, (), ())
    done = declare_completions(st, own, guard, user, scaled, to)
    return MultiServerStation(model, law, queue, busy, c, name, tuple(moves), done)
