r"""Peer-to-peer file distribution: ``N`` clients download ``K`` blocks (BitTorrent-like).

Source: the ``peer2peer`` case study of PRISM (``prism-examples/ctmcs/peer2peer``,
http://www.prismmodelchecker.org/casestudies/peer2peer.php), G. Norman and
D. Parker (2006).

One more client than the ``N`` holds all ``K`` blocks from the start. Client
``i`` holds block ``j`` when ``b_ij = 1`` (all 0 initially); it downloads a
missing block ``j`` at rate ``mu (1 + min(3, c_j))``, ``mu = 2``, where
``c_j = sum_i b_ij`` is the number of the ``N`` clients holding it (the
seed plus at most three of them serve a block at once). No other moves: a
state with every block everywhere is absorbing.

Measure: ``P=? [ true U<=T "done" ]`` at ``T = 1.5``, the probability that
every client holds every block by time ``T`` (label ``"done"``: ``sum b_ij =
N K``): a time-bounded reachability of an absorbing state, which is the
transient probability of that state at ``T`` (:meth:`ctmc.CTMC.transient`).

Sizes: every combination of blocks is reachable, ``2^(N K)`` states and
``N K 2^(N K - 1)`` transitions (:func:`n_states`, :func:`n_transitions`):
N=4, K=5: 1,048,576 states / 10,485,760 transitions, as published. The size
parameter of the gallery is ``K``, with ``N`` = 4 clients by default
(``Peer2Peer(K, N=5)`` for the case study's other family).

Examples
--------
Two clients, one block: the first copy comes at rate 2 + 2 (each from the
seed), the second at 2 (1 + 1) = 4: ``P(T <= 1.5) = 1 - 7 exp(-6)``.

>>> from ctmc.models.gallery import peer2peer
>>> g = peer2peer(1, N=2)
>>> g.chain().n_states, round(g.measure(g.solve()), 10)
(4, 0.9826487348)
"""
from __future__ import annotations

import numpy as np

import ctmc
from ctmc.expr import minimum

from ._base import GalleryModel

__all__ = ["Peer2Peer", "peer2peer", "MU", "T", "n_states", "n_transitions"]

#: download rate of one block from one source
MU = 2.0
#: time bound of the published measure
T = 1.5


def n_states(N: int, K: int) -> int:
    """Closed-form number of states: every set of held blocks."""
    return 2 ** (N * K)


def n_transitions(N: int, K: int) -> int:
    """Closed-form number of transitions: one per missing block of each state."""
    return N * K * 2 ** (N * K - 1)


class Peer2Peer(GalleryModel):
    """``N`` clients downloading ``K`` blocks (PRISM ``peer2peer``)."""

    name = "peer2peer"
    parameter = "K"
    prism_property = f'P=? [ true U<={T} "done" ]'
    analysis = "transient"

    def __init__(self, K: int, N: int = 4):
        super().__init__(K)
        if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
            raise ValueError(f"N: expected a positive integer, got {N!r}")
        self.clients = int(N)

    def __repr__(self) -> str:
        return f"{self.name}(N={self.clients}, K={self.value})"

    def _names(self):
        return [[f"b{i}{j}" if self.clients < 10 and self.value < 10 else f"b{i}_{j}"
                 for j in range(1, self.value + 1)] for i in range(1, self.clients + 1)]

    @property
    def initial(self):
        return {b: 0 for row in self._names() for b in row}

    def model(self) -> ctmc.Model:
        N, K = self.clients, self.value
        m = ctmc.Model(f"peer2peer(N={N}, K={K})")
        b = [[m.var(name, 0, 1) for name in row] for row in self._names()]
        for j in range(K):
            holders = b[0][j]
            for i in range(1, N):
                holders = holders + b[i][j]
            rate = MU * (1 + minimum(3, holders))
            for i in range(N):
                m.event(f"get{i + 1}_{j + 1}", guard=b[i][j] == 0, rate=rate, update={b[i][j]: 1})
        return m

    def done(self, states):
        """Mask of the states where every client holds every block (the label ``"done"``)."""
        return np.logical_and.reduce([states[name] == 1 for row in self._names() for name in row])

    def target(self, chain):
        """The target set of the measure: the states labelled ``"done"``."""
        return self.done(chain.states)

    def solve(self, chain=None, **options):
        """The measure's analysis: ``chain.transient(initial, T, **options)``."""
        chain = self.chain() if chain is None else chain
        return chain.transient(int(chain.initial[0]), [T], **options)

    def measure(self, result, chain=None) -> float:
        """``P=? [ true U<=T "done" ]`` from a :class:`ctmc.TransientResult` at ``T``: the probability
        of the (absorbing) done state, every block with every client (found by its code, not by
        decoding the ``N K`` columns of every state)."""
        chain = self.chain() if chain is None else chain
        done = chain.index(**{name: 1 for row in self._names() for name in row})   # the one done state
        return float(np.asarray(result.p)[-1][done])

    @property
    def prism_constants(self):
        return {}

    def prism_program(self) -> str:
        N, K = self.clients, self.value
        names = self._names()
        L = [f"// peer-to-peer file distribution, written from the facts of PRISM's case study (N={N}, K={K})",
             "ctmc", "", f"const double mu = {MU!r};", ""]
        for j in range(K):
            held = "+".join(names[i][j] for i in range(N))
            L.append(f"formula rate{j + 1} = mu*(1+min(3,{held}));")
        L.append("")
        for i in range(N):
            L.append(f"module client{i + 1}")
            L += [f"\t{names[i][j]} : [0..1] init 0;" for j in range(K)]
            L += [f"\t[] {names[i][j]}=0 -> rate{j + 1} : ({names[i][j]}'=1);" for j in range(K)]
            L += ["endmodule", ""]
        every = "+".join(name for row in names for name in row)
        L += [f'label "done" = {every} = {N * K};', ""]
        return "\n".join(L)


def peer2peer(K: int, N: int = 4) -> Peer2Peer:
    """The peer-to-peer protocol with ``N`` clients and ``K`` blocks."""
    return Peer2Peer(K, N)
