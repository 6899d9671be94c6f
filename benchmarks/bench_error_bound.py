"""What the stationary error bound costs: its seconds against the rest of the solve, same call.

    .venv/bin/python benchmarks/bench_error_bound.py                  # jsq:1000, hysteresis:8000 and the gallery
    .venv/bin/python benchmarks/bench_error_bound.py --cases jsq:300 --repeat 3

Every stationary result carries ``error_bound`` (``ctmc.stationary.error_bound``):
direct solves reuse their factors for the return-time system (one more pair of
triangular solves), iterative methods solve it (BiCGStab refined on its true
residual, then GMRES, then sparse LU up to 5000 states) or estimate the error by
one correction solve. The time spent on it is recorded in
``info["error_bound_seconds"]``; the table prints it beside the rest of the call
(``overhead`` = bound / rest), for the fastest of ``--repeat`` calls. The
machine is shared and loaded, so a wall time waits for a core: the CPU seconds
of the call (``call cpu``) and of the iterative bound (``bound cpu``,
``iterative_bound`` timed by a wrapper; 0 for direct solves, whose bound is a
pair of triangular solves) give ``cpu overhead``, the steadier figure.
``rt solver`` is the return-time solver that gave the bound and ``rt its`` the
iterations of each of its solves. The issue's target: at most 10-15 % of the
solve on the gallery.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from bench_auto import cases  # noqa: E402  (the same cases and option as bench_auto)

import ctmc.stationary  # noqa: E402
from ctmc.report import format_table  # noqa: E402

_CPU = []


def _timed(f):
    """``f`` with the CPU seconds of each call appended to ``_CPU``."""
    def run(*args, **kwargs):
        c0 = time.process_time()
        try:
            return f(*args, **kwargs)
        finally:
            _CPU.append(time.process_time() - c0)
    return run

DEFAULT = "jsq:1000,hysteresis:8000,kanban:3,fms:5,cluster:64,polling:15,tandem:511"


def main(argv=None):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--repeat", type=int, default=1, help="calls per case, the fastest kept (default 1)")
    args, rest = p.parse_known_args(argv)
    ctmc.stationary.iterative_bound = _timed(ctmc.stationary.iterative_bound)
    rows = []
    for spec, chain, _ in cases(rest, __doc__.splitlines()[0], DEFAULT):
        runs = []
        for _ in range(max(1, args.repeat)):
            _CPU.clear()
            t0, c0 = time.perf_counter(), time.process_time()
            res = chain.stationary(check=False)
            runs.append((time.perf_counter() - t0, time.process_time() - c0, sum(_CPU), res))
        wall, cpu, bcpu, res = min(runs, key=lambda r: r[1])
        tb = res.info.get("error_bound_seconds", float("nan"))
        rows.append([spec, chain.n_states, res.method, res.status.value, f"{wall:.2f}", f"{tb:.3f}",
                     f"{100 * tb / max(wall - tb, 1e-12):.0f} %", f"{cpu:.2f}", f"{bcpu:.3f}",
                     f"{100 * bcpu / max(cpu - bcpu, 1e-12):.0f} %", f"{res.error_bound:.1e}",
                     res.info.get("error_bound_kind", ""), res.info.get("return_time_solver", ""),
                     "+".join(str(i) for i in res.info.get("return_time_iterations", []))])
    print(format_table(rows, ["case", "states", "method", "status", "call s", "bound s", "overhead", "call cpu",
                              "bound cpu", "cpu overhead", "error_bound", "kind", "rt solver", "rt its"]))


if __name__ == "__main__":
    main()
