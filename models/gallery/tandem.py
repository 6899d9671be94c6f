r"""Tandem queueing network: a Coxian-2 server feeding an exponential server, capacity ``c`` each.

Source: the ``tandem`` case study of PRISM (``prism-examples/ctmcs/tandem``,
http://www.prismmodelchecker.org/casestudies/tandem.php), after H. Hermanns,
J. Meyer-Kayser and M. Siegle, *Multi terminal binary decision diagrams to
represent and analyse continuous time Markov chains*, Proc. 3rd Int. Workshop
on the Numerical Solution of Markov Chains (NSMC'99), 188-207 (1999).

Queue C holds ``sc`` in ``0..c`` customers and its server has a phase ``ph``
in {1, 2}; queue M holds ``sm`` in ``0..c``. Customers arrive at C at rate
``lambda = 4c`` (lost when C is full). In phase 1 the server of C either
passes the customer on to M at rate ``mu1b = 1.8`` or moves to phase 2 at
rate ``mu1a = 0.2``; in phase 2 it passes the customer on at rate ``mu2 = 2``
and returns to phase 1. Passing on is the action ``route``, shared with M
(rate 1, needs ``sm < c``): a customer cannot leave C while M is full. M
serves at rate ``kappa = 4``.

Measure: ``R=? [S]`` with the state reward ``sc + sm``, the mean number of
customers in the network.

Sizes: ``(c+1)(2c+1)`` states (phase 2 needs ``sc >= 1``) and
``7c^2 + 3c - 1`` transitions; c=511: 523,776 / 1,829,379 as published. A
sparse direct solve gives 511.82899236 at c=511 (Storm 2018: 513.4755157).
"""
from __future__ import annotations

import ctmc

from ._base import GalleryModel

__all__ = ["Tandem", "tandem", "n_states", "n_transitions", "MU1A", "MU1B", "MU2", "KAPPA"]

MU1A, MU1B, MU2, KAPPA = 0.2, 1.8, 2.0, 4.0


def n_states(c: int) -> int:
    """Closed-form number of reachable states."""
    return (c + 1) * (2 * c + 1)


def n_transitions(c: int) -> int:
    """Closed-form number of transitions."""
    return 7 * c * c + 3 * c - 1


class Tandem(GalleryModel):
    """Tandem network with queue capacity ``c`` (PRISM ``tandem``, [HMKS99])."""

    name = "tandem"
    parameter = "c"
    prism_property = 'R{"customers"}=? [ S ]'

    @property
    def initial(self):
        return {"sc": 0, "ph": 1, "sm": 0}

    def model(self) -> ctmc.Model:
        c = self.value
        m = ctmc.Model(f"tandem(c={c})")
        sc = m.var("sc", 0, c)
        ph = m.var("ph", 1, 2)
        sm = m.var("sm", 0, c)
        m.event("arrive", guard=sc < c, rate=4.0 * c, update={sc: sc + 1})
        m.event("phase", guard=(sc > 0) & (ph == 1), rate=MU1A, update={ph: 2})
        # route = (command of C) x (command of M, rate 1): one event per command of C
        m.event("route1", guard=(sc > 0) & (ph == 1) & (sm < c), rate=MU1B, update={sc: sc - 1, sm: sm + 1})
        m.event("route2", guard=(sc > 0) & (ph == 2) & (sm < c), rate=MU2,
                update={sc: sc - 1, ph: 1, sm: sm + 1})
        m.event("depart", guard=sm > 0, rate=KAPPA, update={sm: sm - 1})
        return m

    def reward(self, chain):
        """Customers in the network, ``sc + sm``."""
        return (chain.states["sc"] + chain.states["sm"]).astype(float)

    def prism_program(self) -> str:
        return "\n".join([
            "// tandem queueing network, written from the facts of [HMKS99] / PRISM's case study",
            "ctmc", "", "const int c;", "",
            "module queueC",
            "\tsc : [0..c] init 0;", "\tph : [1..2] init 1;",
            "\t[] (sc<c) -> 4*c : (sc'=sc+1);",
            f"\t[] (sc>0) & (ph=1) -> {MU1A} : (ph'=2);",
            f"\t[route] (sc>0) & (ph=1) -> {MU1B} : (sc'=sc-1);",
            f"\t[route] (sc>0) & (ph=2) -> {MU2} : (sc'=sc-1) & (ph'=1);",
            "endmodule", "",
            "module queueM",
            "\tsm : [0..c] init 0;",
            "\t[route] (sm<c) -> 1 : (sm'=sm+1);",
            f"\t[] (sm>0) -> {KAPPA} : (sm'=sm-1);",
            "endmodule", "",
            'rewards "customers"', "\ttrue : sc + sm;", "endrewards", ""])


def tandem(c: int) -> Tandem:
    """The tandem network with queue capacity ``c``."""
    return Tandem(c)
