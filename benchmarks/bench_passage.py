"""Passage analyses at scale: hitting times and Laplace transforms on the benchmark gallery.

    .venv/bin/python benchmarks/bench_passage.py
    .venv/bin/python benchmarks/bench_passage.py --cases kanban:3,tandem:511 --s 0.5

For each gallery model (:mod:`ctmc.models.gallery`) the target is "the first
state variable at its largest reachable value" (kanban: ``w1``, fms:
``P1``, polling: the server's station ``s`` at the last one, cluster:
``left_n``, the working workstations on the left, all up; tandem: ``sc``,
queue C full). The chain is built once; then, one after the other and timed,
``hitting_times(target)`` and ``hitting_laplace(target, s)`` with ``auto``
(on these many-variable chains: GMRES with the Gauss-Seidel preconditioner
and the Gauss-Seidel polish of the small values) and with a reference: the
same analysis by GMRES at ``tol=1e-13`` (at most 3000 iterations). The table gives time, method,
status, balance error and the largest relative difference, state by state,
between ``auto``'s answer and the reference (``rel.diff``; states with
infinite means are left out).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from ctmc.report import format_table

DEFAULT = "kanban:4,fms:5,polling:15,cluster:64,tandem:511"


def rel_diff(a, b):
    ok = np.isfinite(a) & np.isfinite(b) & (np.abs(b) > 0)
    return float(np.max(np.abs(a[ok] / b[ok] - 1))) if ok.any() else 0.0


def main(argv=None):
    from ctmc.models.gallery import parse_spec

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=DEFAULT, help=f"comma-separated name:value (default {DEFAULT})")
    p.add_argument("--s", type=float, default=0.5, help="Laplace argument (default 0.5)")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    rows = []
    for spec in args.cases.split(","):
        chain = parse_spec(spec).chain()
        col = chain.states[chain.states.names[0]]
        target = col == col.max()
        for what, run in (("hitting_times", lambda **kw: chain.hitting_times(target, check=False, **kw)),
                          ("hitting_laplace", lambda **kw: chain.hitting_laplace(target, args.s, check=False, **kw))):
            out = {}
            for route, kw in (("auto", {}), ("gmres tol=1e-13", {"method": "gmres", "tol": 1e-13, "maxiter": 3000})):
                t0 = time.perf_counter()
                res = run(**kw)
                out[route] = (res, time.perf_counter() - t0)
            ref = out["gmres tol=1e-13"][0]
            ref_vals = ref.mean if what == "hitting_times" else ref.values
            for route, (res, t) in out.items():
                vals = res.mean if what == "hitting_times" else res.values
                rows.append([spec, chain.n_states, what, route, res.method, f"{t:.2f}", res.status.value,
                             f"{res.info.get('balance_error', float('nan')):.1e}",
                             "ref" if res is ref else f"{rel_diff(np.ravel(vals), np.ravel(ref_vals)):.1e}"])
    print(format_table(rows, ["model", "states", "analysis", "route", "method", "seconds", "status",
                              "balance err", "rel.diff"]))


if __name__ == "__main__":
    main()
