r"""Dependable workstation cluster: two clusters of ``N`` workstations, one repair unit.

Source: the ``cluster`` case study of PRISM (``prism-examples/ctmcs/cluster``,
http://www.prismmodelchecker.org/casestudies/cluster.php), after
B. Haverkort, H. Hermanns and J.-P. Katoen, *On the use of model checking
techniques for dependability evaluation*, Proc. 19th IEEE Symposium on
Reliable Distributed Systems (SRDS'00), 228-237 (2000).

Components: ``left_n``, ``right_n`` in ``0..N`` working workstations per
cluster; the switches ``toleft_n``, ``toright_n`` and the backbone
``line_n`` (1 = working); for each component a flag (``left``, ``right``,
``toleft``, ``toright``, ``line``) saying it is in repair; the repair unit's
flag ``r`` (busy). Failures are local: a workstation at rate 1/500 each
(``left_n / 500`` for the cluster), a switch at 1/4000, the backbone at
1/5000. Repairs synchronise the component with the repair unit, one event per
pair of commands (rate = product):

* ``start<X>``: unit idle, component X broken and not in repair: rate
  ``1 * 10``, both flags set;
* ``repair<X>``: unit busy, X in repair (and broken): rate ``1 * mu_X`` with
  ``mu`` = 2 for a cluster (one workstation repaired), 0.25 for a switch,
  0.125 for the backbone; both flags cleared, X (one more workstation) works.

Measure: ``S=? ["premium"]``, the long-run probability of premium quality of
service: ``N`` connected working workstations, i.e. ``left_n >= N`` and
``toleft_n``, or ``right_n >= N`` and ``toright_n``, or
``left_n + right_n >= N`` with both switches and the backbone working.

Published sizes: N=64: 151,060 states / 733,216 transitions; N=128:
597,012 / 2,908,192. Storm (2018) N=64: 0.9986761964.
"""
from __future__ import annotations

import ctmc

from ._base import GalleryModel

__all__ = ["Cluster", "cluster", "FAIL", "REPAIR"]

#: failure rates: per workstation, per switch, backbone
FAIL = {"ws": 1 / 500, "switch": 1 / 4000, "line": 1 / 5000}
#: repair rates of the repair unit; inspection (start) rate
REPAIR = {"left": 2.0, "right": 2.0, "toleft": 0.25, "toright": 0.25, "line": 0.125, "start": 10.0}


class Cluster(GalleryModel):
    """Two clusters of ``N`` workstations (PRISM ``cluster``, [HHK00])."""

    name = "cluster"
    parameter = "N"
    prism_property = 'S=? [ "premium" ]'

    @property
    def initial(self):
        N = self.value
        return {"left_n": N, "left": 0, "right_n": N, "right": 0, "r": 0,
                "line": 0, "line_n": 1, "toleft": 0, "toleft_n": 1, "toright": 0, "toright_n": 1}

    def model(self) -> ctmc.Model:
        N = self.value
        m = ctmc.Model(f"cluster(N={N})")
        v = {k: m.var(k, 0, N if k in ("left_n", "right_n") else 1) for k in self.initial}
        r = v["r"]
        start, rep = REPAIR["start"], REPAIR
        for side in ("left", "right"):  # a cluster of workstations
            n, busy = v[f"{side}_n"], v[side]
            m.event(f"fail_{side}", guard=n > 0, rate=FAIL["ws"] * n, update={n: n - 1})
            m.event(f"start_{side}", guard=(busy == 0) & (n < N) & (r == 0), rate=1.0 * start,
                    update={busy: 1, r: 1})
            m.event(f"repair_{side}", guard=(busy == 1) & (n < N) & (r == 1), rate=1.0 * rep[side],
                    update={busy: 0, n: n + 1, r: 0})
        for comp, fail in (("line", "line"), ("toleft", "switch"), ("toright", "switch")):  # single parts
            ok, busy = v[f"{comp}_n"], v[comp]
            m.event(f"fail_{comp}", guard=ok == 1, rate=FAIL[fail], update={ok: 0})
            m.event(f"start_{comp}", guard=(busy == 0) & (ok == 0) & (r == 0), rate=1.0 * start,
                    update={busy: 1, r: 1})
            m.event(f"repair_{comp}", guard=(busy == 1) & (ok == 0) & (r == 1), rate=1.0 * rep[comp],
                    update={busy: 0, ok: 1, r: 0})
        return m

    def premium(self, states):
        """Mask of the states with premium quality of service (the label ``"premium"``)."""
        N = self.value
        ln, rn = states["left_n"], states["right_n"]
        tl, tr, li = states["toleft_n"] == 1, states["toright_n"] == 1, states["line_n"] == 1
        return ((ln >= N) & tl) | ((rn >= N) & tr) | ((ln + rn >= N) & tl & li & tr)

    def reward(self, chain):
        """Indicator of premium quality of service."""
        return self.premium(chain.states).astype(float)

    def prism_program(self) -> str:
        F, R = FAIL, REPAIR
        L = ["// workstation cluster, written from the facts of [HHK00] / PRISM's case study", "ctmc", "",
             "const int N;", ""]
        for side in ("left", "right"):
            a = side.capitalize()
            L += [f"module {a}",
                  f"\t{side}_n : [0..N] init N;", f"\t{side} : bool init false;",
                  f"\t[start{a}] !{side} & ({side}_n<N) -> 1 : ({side}'=true);",
                  f"\t[repair{a}] {side} & ({side}_n<N) -> 1 : ({side}'=false) & ({side}_n'={side}_n+1);",
                  f"\t[] ({side}_n>0) -> {F['ws']!r}*{side}_n : ({side}_n'={side}_n-1);",
                  "endmodule", ""]
        for comp, a, fail in (("line", "Line", "line"), ("toleft", "ToLeft", "switch"),
                              ("toright", "ToRight", "switch")):
            L += [f"module {a}",
                  f"\t{comp} : bool init false;", f"\t{comp}_n : bool init true;",
                  f"\t[start{a}] !{comp} & !{comp}_n -> 1 : ({comp}'=true);",
                  f"\t[repair{a}] {comp} & !{comp}_n -> 1 : ({comp}'=false) & ({comp}_n'=true);",
                  f"\t[] {comp}_n -> {F[fail]!r} : ({comp}_n'=false);",
                  "endmodule", ""]
        L += ["module Repairman", "\tr : bool init false;"]
        for comp, a in (("left", "Left"), ("right", "Right"), ("toleft", "ToLeft"), ("toright", "ToRight"),
                        ("line", "Line")):
            L.append(f"\t[start{a}] !r -> {R['start']} : (r'=true);")
        for comp, a in (("left", "Left"), ("right", "Right"), ("toleft", "ToLeft"), ("toright", "ToRight"),
                        ("line", "Line")):
            L.append(f"\t[repair{a}] r -> {R[comp]} : (r'=false);")
        L += ["endmodule", "",
              'label "premium" = (left_n>=N & toleft_n) | (right_n>=N & toright_n) | '
              "((left_n+right_n)>=N & toleft_n & line_n & toright_n);", ""]
        return "\n".join(L)


def cluster(N: int) -> Cluster:
    """The cluster system with ``N`` workstations per cluster."""
    return Cluster(N)
