r"""Embedded control system: sensors, three processors, actuators, a bus; up to ``MAX_COUNT`` skipped cycles.

Source: the ``embedded`` case study of PRISM (``prism-examples/ctmcs/embedded``,
http://www.prismmodelchecker.org/casestudies/embedded.php), after
M. Kwiatkowska, G. Norman and D. Parker, *Controller dependability analysis
by probabilistic model checking*, Proc. INCOM'04 (2004), itself after
J. Muppala, G. Ciardo and K. Trivedi, *Stochastic reward nets for reliability
prediction*, Comm. in Reliability, Maintainability and Serviceability 1(2)
(1994).

Time is in seconds. Components and their local moves:

* sensors ``s`` in ``1..3`` working (``0..3`` declared): one fails at rate
  ``s * lambda_s`` while ``s > 1`` (``lambda_s`` = 1/month);
* actuators ``a`` in ``0..2`` working: one fails at rate ``a * lambda_a``
  (``lambda_a`` = 1/(2 months));
* the input processor ``i`` (2 ok, 1 transient fault, 0 failed), enabled
  while ``s >= MIN_SENSORS = 2``: permanent failure ``i > 0 -> 0`` at
  ``lambda_p`` (1/year), transient fault ``2 -> 1`` at ``delta_f`` (1/day),
  reboot ``1 -> 2`` at ``delta_r`` (1/30 s, the action ``input_reboot``);
* the output processor ``o``: the same with ``a >= MIN_ACTUATORS = 1``
  (reboot: ``output_reboot``);
* the main processor ``m`` (1 ok, 0 failed; fails at ``lambda_p``) and its
  counter ``count`` in ``0..MAX_COUNT+1`` of consecutive skipped cycles: at
  each timeout (rate ``tau`` = 1/min, action ``timeout``) it is reset if the
  cycle completed (``comp``) and incremented (capped at ``MAX_COUNT+1``)
  otherwise;
* the bus, three flags ``comp`` (processed since the last timeout), ``reqi``
  (input data ready), ``reqo`` (instructions waiting for the output), which
  the three actions update (rate 1 on the bus's side):

  - ``input_reboot``: ``comp := comp | (m=1 & !reqo)``, ``reqi := true``,
    ``reqo := !(o=2 & a>=1) & (reqo | m=1)``;
  - ``output_reboot``: ``comp := comp | (reqi & m=1)``,
    ``reqi := (i=2 & s>=2) | (reqi & m=0)``, ``reqo := false``;
  - ``timeout``: ``comp := reqi & !reqo & m=1``,
    ``reqi := (i=2 & s>=2) | (reqi & (reqo | m=0))``,
    ``reqo := !(o=2 & a>=1) & (reqo | (reqi & m=1))``.

  Initially every component works, ``comp`` and ``reqi`` hold, ``count = 0``.

The system is *down* when ``(i=2 & s<2) | count=MAX_COUNT+1 | (o=2 & a<1) |
m=0``, in *danger* when not down with a transient fault (``i=1 | o=1``), *up*
otherwise. Measure: ``R{"up"}=? [ F "down" ]``, the expected time (hours: the
reward ``up : 1/3600``) spent up before the system first goes down, from the
initial state: a hitting-time reward, :meth:`ctmc.CTMC.hitting_times` with
``reward``.

Sizes: ``count`` is the only variable growing with ``MAX_COUNT``, and the
chain with it: ``845 MAX_COUNT + 1788`` states and ``3567 MAX_COUNT + 7070``
transitions (:func:`n_states`, :func:`n_transitions`; MAX_COUNT=2: 3,478 /
14,204, checked against Storm's build of :meth:`Embedded.prism_program`,
which counts 435 more transitions: the self-loops of the skipped-cycle
counter at its cap, which do not change a CTMC and which ctmc drops).
MAX_COUNT=4000: 3,381,788 states, the size of the comparison with Storm.

Storm builds only what the property needs: with ``BuilderOptions`` made from
``F "down"`` it does not explore beyond the down states (2,496,828 states at
MAX_COUNT=4000). ``Embedded(MAX_COUNT, stop_at_down=True)`` builds that
chain (every event disabled in the down states), on which the measure is the
same.

Examples
--------
>>> from ctmc.models.gallery import embedded
>>> g = embedded(2)
>>> chain = g.chain()
>>> chain.n_states, chain.n_transitions
(3478, 14204)
>>> round(g.measure(g.solve(chain), chain), 6)     # hours up before the first failure
423.844317
"""
from __future__ import annotations

import ctmc
from ctmc.expr import minimum, where

from ._base import GalleryModel

__all__ = ["Embedded", "embedded", "RATES", "MIN_SENSORS", "MIN_ACTUATORS", "n_states", "n_transitions"]

#: rates of the case study, per second
RATES = {"lambda_p": 1 / (365 * 24 * 60 * 60), "lambda_s": 1 / (30 * 24 * 60 * 60),
         "lambda_a": 1 / (2 * 30 * 24 * 60 * 60), "tau": 1 / 60, "delta_f": 1 / (24 * 60 * 60),
         "delta_r": 1 / 30}
MIN_SENSORS = 2
MIN_ACTUATORS = 1


def n_states(max_count: int) -> int:
    """Number of reachable states (closed form, measured on MAX_COUNT = 2..40)."""
    return 845 * max_count + 1788


def n_transitions(max_count: int) -> int:
    """Number of transitions, self-loops excluded (closed form, measured on MAX_COUNT = 2..40)."""
    return 3567 * max_count + 7070


def _flag(cond):
    """A boolean expression as a 0/1 update value."""
    return where(cond, 1, 0)


class Embedded(GalleryModel):
    """Embedded control system with at most ``MAX_COUNT`` skipped cycles (PRISM ``embedded``, [KNP04])."""

    name = "embedded"
    parameter = "MAX_COUNT"
    prism_property = 'R{"up"}=? [ F "down" ]'
    analysis = "hitting"

    def __init__(self, max_count: int, stop_at_down: bool = False):
        super().__init__(max_count)
        self.stop_at_down = bool(stop_at_down)

    def __repr__(self) -> str:
        return f"{self.name}(MAX_COUNT={self.value}{', stop_at_down=True' if self.stop_at_down else ''})"

    @property
    def initial(self):
        return {"s": 3, "i": 2, "a": 2, "o": 2, "m": 1, "count": 0, "comp": 1, "reqi": 1, "reqo": 0}

    def model(self) -> ctmc.Model:
        K, R = self.value, RATES
        mdl = ctmc.Model(repr(self))
        s, i = mdl.var("s", 0, 3), mdl.var("i", 0, 2)
        a, o = mdl.var("a", 0, 2), mdl.var("o", 0, 2)
        m, count = mdl.var("m", 0, 1), mdl.var("count", 0, K + 1)
        comp, reqi, reqo = mdl.var("comp", 0, 1), mdl.var("reqi", 0, 1), mdl.var("reqo", 0, 1)
        down = ((i == 2) & (s < MIN_SENSORS)) | (count == K + 1) | ((o == 2) & (a < MIN_ACTUATORS)) | (m == 0)

        def event(name, guard, rate, update):      # stop_at_down: no event where the system is down
            mdl.event(name, guard=guard & ~down if self.stop_at_down else guard, rate=rate, update=update)

        event("sensor_fail", guard=s > 1, rate=s * R["lambda_s"], update={s: s - 1})
        event("actuator_fail", guard=a > 0, rate=a * R["lambda_a"], update={a: a - 1})
        # the input and output processors, each with its reboot synchronised with the bus
        for p, units, least, reboot in ((i, s, MIN_SENSORS, "input_reboot"), (o, a, MIN_ACTUATORS, "output_reboot")):
            ok = units >= least
            event(f"{p.name}_fail", guard=(p > 0) & ok, rate=R["lambda_p"], update={p: 0})
            event(f"{p.name}_fault", guard=(p == 2) & ok, rate=R["delta_f"], update={p: 1})
            if reboot == "input_reboot":
                bus = {comp: _flag((comp == 1) | ((m == 1) & (reqo == 0))), reqi: 1,
                       reqo: _flag(~((o == 2) & (a >= MIN_ACTUATORS)) & ((reqo == 1) | (m == 1)))}
            else:
                bus = {comp: _flag((comp == 1) | ((reqi == 1) & (m == 1))),
                       reqi: _flag(((i == 2) & (s >= MIN_SENSORS)) | ((reqi == 1) & (m == 0))), reqo: 0}
            event(reboot, guard=(p == 1) & ok, rate=R["delta_r"], update={p: 2, **bus})
        event("main_fail", guard=m == 1, rate=R["lambda_p"], update={m: 0})
        # timeout: the main processor's two commands, each with the bus's one
        bus = {comp: _flag((reqi == 1) & (reqo == 0) & (m == 1)),
               reqi: _flag(((i == 2) & (s >= MIN_SENSORS)) | ((reqi == 1) & ((reqo == 1) | (m == 0)))),
               reqo: _flag(~((o == 2) & (a >= MIN_ACTUATORS)) & ((reqo == 1) | ((reqi == 1) & (m == 1))))}
        event("timeout_done", guard=comp == 1, rate=R["tau"], update={count: 0, **bus})
        event("timeout_skip", guard=comp == 0, rate=R["tau"], update={count: minimum(count + 1, K + 1), **bus})
        return mdl

    # the labels --------------------------------------------------------------
    def down(self, states):
        """Mask of the states where the system is down (the label ``"down"``)."""
        return self._status(states)[0]

    def up(self, states):
        """Mask of the states where the system is up: not down, no transient fault."""
        down, fault = self._status(states)
        return ~down & ~fault

    def _status(self, states):
        """``(down, transient fault)`` masks, each state column decoded once."""
        i, s, o, a = states["i"], states["s"], states["o"], states["a"]
        down = (((i == 2) & (s < MIN_SENSORS)) | (states["count"] == self.value + 1)
                | ((o == 2) & (a < MIN_ACTUATORS)) | (states["m"] == 0))
        return down, (i == 1) | (o == 1)

    def reward(self, chain):
        """The reward ``"up"``: 1/3600 per second up (hours)."""
        return self.up(chain.states).astype(float) / 3600.0

    def target(self, chain):
        """The target set of the measure: the states labelled ``"down"``."""
        return self.down(chain.states)

    def solve(self, chain=None, **options):
        """The measure's analysis: ``chain.hitting_times(down, reward=up / 3600, **options)``."""
        chain = self.chain() if chain is None else chain
        down, fault = self._status(chain.states)
        return chain.hitting_times(down, reward=(~down & ~fault) / 3600.0, **options)

    def measure(self, result, chain=None) -> float:
        """``R{"up"}=? [ F "down" ]`` at the initial state, from a :class:`ctmc.HittingResult`."""
        chain = self.chain() if chain is None else chain
        return float(result.mean[int(chain.initial[0])])

    def prism_program(self) -> str:
        R = RATES
        L = ["// embedded control system, written from the facts of [KNP04] / PRISM's case study", "ctmc", "",
             "const int MAX_COUNT;", f"const int MIN_SENSORS = {MIN_SENSORS};",
             f"const int MIN_ACTUATORS = {MIN_ACTUATORS};", ""]
        L += [f"const double {k} = {v!r};" for k, v in R.items()] + [""]
        L += ["module sensors", "\ts : [0..3] init 3;", "\t[] s>1 -> s*lambda_s : (s'=s-1);", "endmodule", "",
              "module actuators", "\ta : [0..2] init 2;", "\t[] a>0 -> a*lambda_a : (a'=a-1);", "endmodule", ""]
        for p, units, least, reboot in (("i", "s", "MIN_SENSORS", "input_reboot"),
                                        ("o", "a", "MIN_ACTUATORS", "output_reboot")):
            L += [f"module proc{p}", f"\t{p} : [0..2] init 2;",
                  f"\t[] {p}>0 & {units}>={least} -> lambda_p : ({p}'=0);",
                  f"\t[] {p}=2 & {units}>={least} -> delta_f : ({p}'=1);",
                  f"\t[{reboot}] {p}=1 & {units}>={least} -> delta_r : ({p}'=2);", "endmodule", ""]
        L += ["module procm", "\tm : [0..1] init 1;", "\tcount : [0..MAX_COUNT+1] init 0;",
              "\t[] m=1 -> lambda_p : (m'=0);",
              "\t[timeout] comp -> tau : (count'=0);",
              "\t[timeout] !comp -> tau : (count'=min(count+1, MAX_COUNT+1));", "endmodule", "",
              "module bus", "\tcomp : bool init true;", "\treqi : bool init true;", "\treqo : bool init false;",
              "\t[input_reboot] true -> 1 : (comp'=(comp | (m=1 & !reqo))) & (reqi'=true)"
              " & (reqo'=!(o=2 & a>=1) & (reqo | m=1));",
              "\t[output_reboot] true -> 1 : (comp'=(comp | (reqi & m=1))) & (reqi'=(i=2 & s>=2) | (reqi & m=0))"
              " & (reqo'=false);",
              "\t[timeout] true -> 1 : (comp'=(reqi & !reqo & m=1)) & (reqi'=(i=2 & s>=2) | (reqi & (reqo | m=0)))"
              " & (reqo'=!(o=2 & a>=1) & (reqo | (reqi & m=1)));", "endmodule", "",
              "formula down = (i=2&s<MIN_SENSORS)|(count=MAX_COUNT+1)|(o=2&a<MIN_ACTUATORS)|(m=0);",
              "formula danger = !down & (i=1 | o=1);", "formula up = !down & !danger;",
              'label "down" = down;', "",
              'rewards "up"', "\tup : 1/3600;", "endrewards", ""]
        return "\n".join(L)


def embedded(max_count: int, stop_at_down: bool = False) -> Embedded:
    """The embedded control system with at most ``max_count`` consecutive skipped cycles."""
    return Embedded(max_count, stop_at_down)
