"""The error bound of a ``level_iad`` answer: return times on the levels against the Krylov route, same run.

    .venv/bin/python benchmarks/bench_level_bound.py                 # JSQ K = 500, 1000
    .venv/bin/python benchmarks/bench_level_bound.py --K 300 2000 --rho 0.95

For each JSQ chain (``ctmc.models.jsq.JSQ2``, mu2 = 0.5) one ``level_iad`` solve gives
the answer; then :func:`ctmc.kernels.evidence.iterative_bound` bounds its error on the
same operator and pin, twice: with the return times solved on the levels
(:class:`ctmc.kernels.levels.LevelSystem`, the route of ``stationary(..., "level_iad")``)
and by the route every other iterative method takes (BiCGStab, GMRES, then the
first-order correction estimate). The table gives each one's CPU seconds (set-up
included), its bound, its kind (``proven`` or ``estimate``), the return-time solver
and its iterations, and the ratio of CPU seconds. The machine may be shared: compare
the ratio, and give ``uptime`` with the numbers.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from ctmc.backends import operator_for
from ctmc.kernels.evidence import iterative_bound
from ctmc.kernels.levels import LevelSystem
from ctmc.models.jsq import JSQ2


def bound(op, pi, pin, levels, level: bool):
    support = np.ones(op.n, dtype=bool)
    info = {}
    c0 = time.process_time()
    system = None
    if level:
        X = support.copy()
        X[pin] = False
        system = LevelSystem(op, X, levels, pi)
    b, kind = iterative_bound(op, support, pi, pin, op.n, {}, info, error_tol=1e-6, system=system)
    its = "+".join(map(str, info.get("return_time_iterations", [])))
    return time.process_time() - c0, b, kind, info.get("return_time_solver", ""), its


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--K", type=int, nargs="+", default=[500, 1000])
    p.add_argument("--rho", type=float, default=0.95)
    args = p.parse_args(argv)
    rows = []
    for K in args.K:
        q = JSQ2(K, args.rho, 0.5)
        ch = q.chain()
        res = ch.stationary("level_iad", levels=q.levels(), x0=q.start_vector(), check=False)
        op = operator_for(ch, "scipy")
        pin = int(np.argmax(res.pi))
        lv = bound(op, res.pi, pin, q.levels(), True)
        kr = bound(op, res.pi, pin, q.levels(), False)
        rows.append([K, ch.n_states, res.status.value, f"{kr[0]:.2f}", f"{kr[1]:.1e}", kr[2], f"{kr[3]} {kr[4]}",
                     f"{lv[0]:.2f}", f"{lv[1]:.1e}", lv[2], f"{lv[3]} {lv[4]}", f"{kr[0] / lv[0]:.0f}x"])
    head = ["K", "states", "level_iad", "krylov cpu", "bound", "kind", "solver its", "level cpu", "bound", "kind",
            "solver its", "speed-up"]
    width = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(str(c).rjust(w) for c, w in zip(r, width)))


if __name__ == "__main__":
    main()
