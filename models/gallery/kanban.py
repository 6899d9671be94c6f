r"""Kanban manufacturing system: four cells, ``t`` kanban cards per cell.

Source: the ``kanban`` case study of PRISM (``prism-examples/ctmcs/kanban``,
http://www.prismmodelchecker.org/casestudies/kanban.php), after
G. Ciardo and M. Tilgner, *On the use of Kronecker operators for the solution
of generalized stochastic Petri nets*, ICASE Report 96-35 (1996).

Cell ``i`` (1..4) has four counters in ``0..t``: ``w_i`` (cards in the cell),
``x_i`` (parts in processing), ``y_i`` (parts sent back for rework), ``z_i``
(parts done, waiting to leave). Inside a cell: a part in processing goes to
rework at rate ``redo_i`` or is finished at rate ``ok_i``; a reworked part
returns to processing at rate ``back`` = 0.3. Between cells:

* ``in``: a part enters cell 1 (``w1 < t``, ``x1 < t``) at rate 1.0;
* ``s1``: a finished part of cell 1 (``z1 > 0``, ``w1 > 0``) is split into
  cells 2 and 3 (each with ``w < t``, ``x < t``), rate 0.4 (cells 2 and 3
  take part at rate 1);
* ``s2``: finished parts of cells 2 and 3 are joined into cell 4, rate 0.5
  (cells 2, 3 take part at rate 1);
* a finished part leaves cell 4 at rate 0.9.

Each action has one command per module, so each synchronisation is one event.
Measure: ``R{"throughput"}=? [S]`` with the action reward ``[in] true : 1``,
the stationary rate of entries into cell 1.

Published sizes: t=1: 160 states / 616 transitions; t=2: 4,600 / 28,120;
t=3: 58,400 / 446,400; t=4: 454,475 / 3,979,850. Storm (2018) t=4:
throughput 0.2762966549.
"""
from __future__ import annotations

import ctmc

from ._base import GalleryModel

__all__ = ["Kanban", "kanban", "RATES"]

#: rates of the case study
RATES = {"in1": 1.0, "out4": 0.9, "synch123": 0.4, "synch234": 0.5, "back": 0.3,
         "redo": (0.36, 0.42, 0.39, 0.33), "ok": (0.84, 0.98, 0.91, 0.77)}


class Kanban(GalleryModel):
    """Kanban system with ``t`` cards per cell (PRISM ``kanban``, [CT96])."""

    name = "kanban"
    parameter = "t"
    prism_property = 'R{"throughput"}=? [ S ]'

    @property
    def initial(self):
        return {f"{v}{i}": 0 for i in range(1, 5) for v in "wxyz"}

    def model(self) -> ctmc.Model:
        t, R = self.value, RATES
        m = ctmc.Model(f"kanban(t={t})")
        cell = {}
        for i in range(1, 5):
            cell[i] = {v: m.var(f"{v}{i}", 0, t) for v in "wxyz"}
        for i in range(1, 5):
            w, x, y, z = (cell[i][v] for v in "wxyz")
            m.event(f"redo{i}", guard=(x > 0) & (y < t), rate=R["redo"][i - 1], update={x: x - 1, y: y + 1})
            m.event(f"ok{i}", guard=(x > 0) & (z < t), rate=R["ok"][i - 1], update={x: x - 1, z: z + 1})
            m.event(f"back{i}", guard=(y > 0) & (x < t), rate=R["back"], update={y: y - 1, x: x + 1})

        def enter(i):  # guard and update of a part entering cell i
            c = cell[i]
            return (c["w"] < t) & (c["x"] < t), {c["w"]: c["w"] + 1, c["x"]: c["x"] + 1}

        def leave(i):  # guard and update of a finished part leaving cell i
            c = cell[i]
            return (c["z"] > 0) & (c["w"] > 0), {c["z"]: c["z"] - 1, c["w"]: c["w"] - 1}

        g, u = enter(1)
        m.event("in", guard=g, rate=R["in1"], update=u)
        # s1: cell 1 leaves, cells 2 and 3 enter (rates 0.4 * 1 * 1)
        (g1, u1), (g2, u2), (g3, u3) = leave(1), enter(2), enter(3)
        m.event("s1", guard=g1 & g2 & g3, rate=R["synch123"], update={**u1, **u2, **u3})
        # s2: cells 2 and 3 leave, cell 4 enters (rates 1 * 1 * 0.5)
        (g2, u2), (g3, u3), (g4, u4) = leave(2), leave(3), enter(4)
        m.event("s2", guard=g2 & g3 & g4, rate=R["synch234"], update={**u2, **u3, **u4})
        g, u = leave(4)
        m.event("out", guard=g, rate=R["out4"], update=u)
        return m

    def reward(self, chain):
        """Rate of the ``in`` action in each state (its stationary mean is the throughput)."""
        return chain.event_rate("in")

    def prism_program(self) -> str:
        R = RATES
        lines = ["// kanban system, written from the facts of [CT96] / PRISM's case study", "ctmc", "",
                 "const int t;", ""]

        def cmd(action, guard, rate, upd):
            return f"\t[{action}] {guard} -> {rate} : {upd};"

        for i in range(1, 5):
            lines.append(f"module cell{i}")
            lines += [f"\t{v}{i} : [0..t] init 0;" for v in "wxyz"]
            enter = (f"(w{i}<t) & (x{i}<t)", f"(w{i}'=w{i}+1) & (x{i}'=x{i}+1)")
            leave = (f"(z{i}>0) & (w{i}>0)", f"(z{i}'=z{i}-1) & (w{i}'=w{i}-1)")
            enter_action, enter_rate = {1: ("in", R["in1"]), 2: ("s1", 1), 3: ("s1", 1),
                                        4: ("s2", R["synch234"])}[i]
            leave_action, leave_rate = {1: ("s1", R["synch123"]), 2: ("s2", 1), 3: ("s2", 1), 4: ("", R["out4"])}[i]
            lines.append(cmd(enter_action, enter[0], enter_rate, enter[1]))
            lines.append(cmd("", f"(x{i}>0) & (y{i}<t)", R["redo"][i - 1], f"(x{i}'=x{i}-1) & (y{i}'=y{i}+1)"))
            lines.append(cmd("", f"(x{i}>0) & (z{i}<t)", R["ok"][i - 1], f"(x{i}'=x{i}-1) & (z{i}'=z{i}+1)"))
            lines.append(cmd("", f"(y{i}>0) & (x{i}<t)", R["back"], f"(y{i}'=y{i}-1) & (x{i}'=x{i}+1)"))
            lines.append(cmd(leave_action, leave[0], leave_rate, leave[1]))
            lines += ["endmodule", ""]
        lines += ['rewards "throughput"', "\t[in] true : 1;", "endrewards", ""]
        return "\n".join(lines)


def kanban(t: int) -> Kanban:
    """The kanban system with ``t`` cards per cell."""
    return Kanban(t)
