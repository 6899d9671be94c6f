r"""Cyclic polling system: one server visiting ``N`` single-buffer stations.

Source: the ``polling`` case study of PRISM (``prism-examples/ctmcs/polling``,
http://www.prismmodelchecker.org/casestudies/polling.php), after O. Ibe and
K. Trivedi, *Stochastic Petri net models of polling systems*, IEEE Journal on
Selected Areas in Communications 8(9):1649-1657 (1990).

The server is at station ``s`` (1..N) and either polls it (``a = 0``) or
serves it (``a = 1``); station ``i`` holds ``s_i = 1`` when full. Rates:
polling ``gamma = 200``, service ``mu = 1``, arrivals ``lambda = mu / N`` at
each empty station (a local move of the station). Three actions per station,
each shared by the server and station ``i`` (the station's side has rate 1):

* ``loop_i_a``: the server polls an empty station ``i`` (``a = 0``,
  ``s_i = 0``) and moves on to the next station (``N`` wraps to 1), rate gamma;
* ``loop_i_b``: it polls a full station and starts serving (``a := 1``),
  rate gamma;
* ``serve_i``: it ends the service (``s_i := 0``) and moves on, rate mu.

Each command appears once per module, so each action is one event.
Measure: ``S=? [ s1=1 & !(s=1 & a=1) ]``, the long-run probability that
station 1 is waiting for the server.

Sizes: ``1.5 N 2^N`` states (``a = 1`` forces the visited station full) and
``N 2^N + N^2 2^(N-1) + N 2^(N-1) + N (N-1) 2^(N-2)`` transitions; N=15:
737,280 / 6,144,000 as published. Storm (2018) N=15: 0.1324316932.
"""
from __future__ import annotations

import ctmc

from ._base import GalleryModel

__all__ = ["Polling", "polling", "GAMMA", "MU", "n_states", "n_transitions"]

GAMMA = 200.0
MU = 1.0


def n_states(N: int) -> int:
    """Closed-form number of reachable states."""
    return 3 * N * 2 ** N // 2


def n_transitions(N: int) -> int:
    """Closed-form number of transitions: from ``a = 0`` one poll plus one arrival per empty station,
    from ``a = 1`` one service end plus one arrival per other empty station."""
    return N * 2 ** N + N * N * 2 ** N // 2 + N * 2 ** N // 2 + N * (N - 1) * 2 ** N // 4


class Polling(GalleryModel):
    """Cyclic server polling ``N`` stations (PRISM ``polling``, [IT90])."""

    name = "polling"
    parameter = "N"
    prism_property = "S=? [ s1=1 & !(s=1 & a=1) ]"

    def __init__(self, N: int):
        super().__init__(N)
        if self.value < 2:
            raise ValueError(f"N: expected at least 2 stations, got {N!r}")

    @property
    def initial(self):
        return {"s": 1, "a": 0, **{f"s{i}": 0 for i in range(1, self.value + 1)}}

    def model(self) -> ctmc.Model:
        N = self.value
        lam = MU / N
        m = ctmc.Model(f"polling(N={N})")
        s = m.var("s", 1, N)
        a = m.var("a", 0, 1)
        st = {i: m.var(f"s{i}", 0, 1) for i in range(1, N + 1)}
        for i in range(1, N + 1):
            nxt = i % N + 1
            at_i = (s == i)
            m.event(f"loop{i}a", guard=at_i & (a == 0) & (st[i] == 0), rate=GAMMA, update={s: nxt})
            m.event(f"loop{i}b", guard=at_i & (a == 0) & (st[i] == 1), rate=GAMMA, update={a: 1})
            m.event(f"serve{i}", guard=at_i & (a == 1) & (st[i] == 1), rate=MU,
                    update={s: nxt, a: 0, st[i]: 0})
            m.event(f"arrive{i}", guard=st[i] == 0, rate=lam, update={st[i]: 1})
        return m

    def reward(self, chain):
        """Indicator of "station 1 full and not being served"."""
        S = chain.states
        return ((S["s1"] == 1) & ~((S["s"] == 1) & (S["a"] == 1))).astype(float)

    @property
    def prism_constants(self):
        return {}  # N shapes the program (one module per station): it is written in

    def prism_program(self) -> str:
        N = self.value
        L = ["// cyclic polling system, written from the facts of [IT90] / PRISM's case study", "ctmc", "",
             f"const int N = {N};", f"const double mu = {MU};", f"const double gamma = {GAMMA};",
             "const double lambda = mu/N;", "", "module server",
             f"\ts : [1..{N}] init 1;", "\ta : [0..1] init 0;"]
        for i in range(1, N + 1):
            nxt = i % N + 1
            L += [f"\t[loop{i}a] (s={i})&(a=0) -> gamma : (s'={nxt});",
                  f"\t[loop{i}b] (s={i})&(a=0) -> gamma : (a'=1);",
                  f"\t[serve{i}] (s={i})&(a=1) -> mu : (s'={nxt})&(a'=0);"]
        L += ["endmodule", ""]
        for i in range(1, N + 1):
            L += [f"module station{i}", f"\ts{i} : [0..1] init 0;",
                  f"\t[loop{i}a] (s{i}=0) -> 1 : (s{i}'=0);",
                  f"\t[] (s{i}=0) -> lambda : (s{i}'=1);",
                  f"\t[loop{i}b] (s{i}=1) -> 1 : (s{i}'=1);",
                  f"\t[serve{i}] (s{i}=1) -> 1 : (s{i}'=0);",
                  "endmodule", ""]
        return "\n".join(L)


def polling(N: int) -> Polling:
    """The polling system with ``N`` stations."""
    return Polling(N)
