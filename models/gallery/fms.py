r"""Flexible manufacturing system: three part types, three machine groups, ``n`` pallets per type.

Source: the ``fms`` case study of PRISM (``prism-examples/ctmcs/fms``,
http://www.prismmodelchecker.org/casestudies/fms.php), after G. Ciardo and
K. S. Trivedi, *A decomposition approach for stochastic reward net models*,
Performance Evaluation 18(1):37-59 (1993).

Places of the Petri net are counters. Part type 1 is machined on M1 (3
machines), type 2 on M2 (1 machine), type 3 on M2 too (``P3M2``, without
taking M2's token), and assembled parts "12" on M3 (2 machines). Each type
``k`` in {1, 2, 3, 12}: ``Pk`` raw parts; the load action ``tk`` takes one to
a free machine (``PkMm``, one machine token less) or, with none free, to the
waiting place ``PkwMm``, at rate ``Pk * min(1, np / r)`` with
``np = floor(3n / 2)`` (the number of loading pallets) and
``r = P1 + P2 + P3 + P12``. Machining ends (M1: ``0.2 * P1M1``; M2: 0.1; M3:
``P12M3``) put the part in ``Pks`` (finished); the machine takes the next
waiting part if any, else its token returns. Parts 1 and 2 may instead
(M1: ``0.05 * P1M1``; M2: 1/15) go to be assembled, waiting in ``P1wP2`` /
``P2wP1`` unless a partner is waiting: the action ``p1p2``, shared by the
machines 1, 2 and the assembly ``12`` (which gains a raw part ``P12``),
fires once per combination of the commands of the three modules (3 x 3 x 1
combinations; rate = product of rates, update = union). Finished parts
return as raw parts at rate 1/60 (all of ``Pks`` at once); the return of the
assembled parts (``fp12``) also gives one part of type 1 and one of type 2
back per assembled part. ``p2p3`` lets a type-3 part finish on M2 (rate 1/2)
only while M2's token is present.

PRISM's model has a counter ``P1d`` that no command changes (always 0); it
is left out (it changes neither the states nor the transitions).

Measure: ``R{"productivity"}=? [S]``, the action rewards 400 per ``t1``,
600 per ``t2``, 100 per ``t3`` and 1100 per ``t12``.

Published sizes: n=5: 152,712 states / 1,111,482 transitions; n=6: 537,768 /
4,205,670; n=7: 1,639,440 / 13,552,968.
"""
from __future__ import annotations

import itertools

import ctmc
from ctmc import minimum

from ._base import GalleryModel, flat_prism_program

__all__ = ["FMS", "fms", "PRODUCTIVITY"]

#: productivity reward per load action
PRODUCTIVITY = {"t1": 400.0, "t2": 600.0, "t3": 100.0, "t12": 1100.0}


class FMS(GalleryModel):
    """Flexible manufacturing system with ``n`` pallets per part type (PRISM ``fms``, [CT93])."""

    name = "fms"
    parameter = "n"
    prism_property = 'R{"productivity"}=? [ S ]'

    _COUNTS = ("P1", "P1wM1", "P1s", "P1wP2", "P2", "P2wM2", "P2s", "P2wP1", "P3", "P3M2", "P3s",
               "P12", "P12wM3", "P12s")

    @property
    def initial(self):
        n = self.value
        init = {k: 0 for k in self._COUNTS}
        init.update(P1=n, P2=n, P3=n, P1M1=0, M1=3, P2M2=0, M2=1, P12M3=0, M3=2)
        return init

    def model(self) -> ctmc.Model:
        n = self.value
        m = ctmc.Model(f"fms(n={n})")
        v = {}
        for k in self.initial:
            hi = {"P1M1": 3, "M1": 3, "P2M2": 1, "M2": 1, "P12M3": 2, "M3": 2}.get(k, n)
            v[k] = m.var(k, 0, hi)
        P1, P1wM1, P1M1, P1s, P1wP2, M1 = (v[k] for k in ("P1", "P1wM1", "P1M1", "P1s", "P1wP2", "M1"))
        P2, P2wM2, P2M2, P2s, P2wP1, M2 = (v[k] for k in ("P2", "P2wM2", "P2M2", "P2s", "P2wP1", "M2"))
        P3, P3M2, P3s = v["P3"], v["P3M2"], v["P3s"]
        P12, P12wM3, P12M3, P12s, M3 = (v[k] for k in ("P12", "P12wM3", "P12M3", "P12s", "M3"))
        np_ = (3 * n) // 2
        share = minimum(1.0, np_ / (P1 + P2 + P3 + P12))  # evaluated where some Pk > 0 only

        def load(k, P, PM, M, Pw, cap):  # the two commands of action t<k> (to a machine / to the queue)
            m.event(f"t{k}_machine", guard=(P > 0) & (M > 0) & (PM < cap), rate=P * share,
                    update={P: P - 1, PM: PM + 1, M: M - 1})
            m.event(f"t{k}_queue", guard=(P > 0) & (M == 0) & (Pw < n), rate=P * share,
                    update={P: P - 1, Pw: Pw + 1})

        load(1, P1, P1M1, M1, P1wM1, 3)
        load(2, P2, P2M2, M2, P2wM2, 1)
        load(12, P12, P12M3, M3, P12wM3, 2)
        m.event("t3_load", guard=(P3 > 0) & (P3M2 < n), rate=P3 * share, update={P3: P3 - 1, P3M2: P3M2 + 1})

        def release(PM, Pw, M, cap):
            """Machine PM ends a job: (guard, update) with no part waiting (token back) and with one waiting."""
            return [((Pw == 0) & (M < cap), {PM: PM - 1, M: M + 1}), (Pw > 0, {Pw: Pw - 1})]

        # machining ends: to finished, or (types 1, 2) to assembly when no partner waits
        for name, PM, Pw, M, cap, rate in (("m1", P1M1, P1wM1, M1, 3, 0.2 * P1M1),
                                           ("m2", P2M2, P2wM2, M2, 1, 0.1),
                                           ("m3", P12M3, P12wM3, M3, 2, 1.0 * P12M3)):
            Ps = {"m1": P1s, "m2": P2s, "m3": P12s}[name]
            for i, (g, u) in enumerate(release(PM, Pw, M, cap)):
                m.event(f"{name}_done_{i}", guard=(PM > 0) & g & (Ps < n), rate=rate, update={**u, Ps: Ps + 1})
        for name, PM, Pw, M, cap, rate, wait_own, wait_other in (
                ("m1", P1M1, P1wM1, M1, 3, 0.05 * P1M1, P1wP2, P2wP1),
                ("m2", P2M2, P2wM2, M2, 1, 1.0 / 15, P2wP1, P1wP2)):
            for i, (g, u) in enumerate(release(PM, Pw, M, cap)):
                m.event(f"{name}_to_assembly_{i}", guard=(PM > 0) & (wait_other == 0) & g & (wait_own < n),
                        rate=rate, update={**u, wait_own: wait_own + 1})

        # p1p2: machine 1 side x machine 2 side x assembly side
        def side(PM, Pw, M, cap, rate, wait_own, wait_other):
            cmds = [((PM > 0) & (wait_other > 0) & g, rate, u) for g, u in release(PM, Pw, M, cap)]
            cmds.append((wait_own > 0, 1.0, {wait_own: wait_own - 1}))
            return cmds

        side1 = side(P1M1, P1wM1, M1, 3, 0.05 * P1M1, P1wP2, P2wP1)
        side2 = side(P2M2, P2wM2, M2, 1, 1.0 / 15, P2wP1, P1wP2)
        for i, ((g1, r1, u1), (g2, r2, u2)) in enumerate(itertools.product(side1, side2)):
            m.event(f"p1p2_{i}", guard=g1 & g2 & (P12 < n), rate=r1 * r2, update={**u1, **u2, P12: P12 + 1})

        # finished parts return to raw (all at once)
        for P, Ps in ((P1, P1s), (P2, P2s), (P3, P3s)):
            m.event(f"return_{P.name}", guard=(Ps > 0) & (P + Ps <= n), rate=1.0 / 60,
                    update={Ps: 0, P: P + Ps})
        # fp12: assembled parts leave, giving back their type-1 and type-2 pallets (1 * 1 * 1/60)
        m.event("fp12", guard=(P1 + P12s <= n) & (P2 + P12s <= n) & (P12s > 0), rate=1.0 / 60,
                update={P1: P1 + P12s, P2: P2 + P12s, P12s: 0})
        # p2p3: a type-3 part finishes on M2 while M2's token is there (1 * 1/2)
        m.event("p2p3", guard=(M2 > 0) & (P3M2 > 0) & (P3s < n), rate=0.5, update={P3M2: P3M2 - 1, P3s: P3s + 1})
        return m

    def reward(self, chain):
        """Productivity rate: 400, 600, 100, 1100 per ``t1``, ``t2``, ``t3``, ``t12`` transition."""
        return sum(w * chain.event_rate(ev) for ev, w in _reward_events().items())

    def prism_program(self) -> str:
        """A flat PRISM program (one command per event of :meth:`model`), the productivity reward on
        the load actions ``t1``, ``t2``, ``t3``, ``t12``."""
        rewards = "\n".join(['rewards "productivity"'] + [f"\t[{a}] true : {w:g};" for a, w in PRODUCTIVITY.items()]
                             + ["endrewards"])
        actions = {ev: ev.split("_")[0] for ev in _reward_events()}
        return flat_prism_program(self.model(), self.initial, actions=actions, rewards=rewards,
                                  title=f"flexible manufacturing system [CT93], n={self.value}")

    @property
    def prism_constants(self):
        return {}  # the flat program is written for this n


def _reward_events():
    """Events of the load actions and their productivity weights."""
    return {f"{a}_{where}": w for a, w in PRODUCTIVITY.items()
            for where in (("machine", "queue") if a != "t3" else ("load",))}


def fms(n: int) -> FMS:
    """The flexible manufacturing system with ``n`` pallets per part type."""
    return FMS(n)
