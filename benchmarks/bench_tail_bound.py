"""What the tail bound (``stationary(..., tail_bound=True)``) costs, and how tight it is.

    .venv/bin/python benchmarks/bench_tail_bound.py                  # kanban:3, fms:5, polling:15, tandem:511
    .venv/bin/python benchmarks/bench_tail_bound.py --cases kanban:3 --repeat 3

For each case, the default ``stationary()`` is timed without and with ``tail_bound=True``,
interleaved in the same run (fastest of ``--repeat``; ``ratio`` = with / without), with the
tail bound's own seconds (``info["tail_bound_seconds"]``), its solver, sweeps and the
componentwise residual it reached. The bound is then set against the true largest relative
error over the states of normal probability, measured against a reference: a tight GMRES
(``tol=1e-13``, polished to ``tail_tol=1e-12``) with its own tail bound, which proves it to that
relative accuracy (``ref bound``; the true error is known to within it). ``estimate`` is ``info["tail_error_estimate"]`` of the call without the
bound (balance error times the condition), ``bal`` its balance error.
"""
from __future__ import annotations

import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from bench_auto import build, cases, timed  # noqa: E402,F401

from ctmc.report import format_table  # noqa: E402

DEFAULT = "kanban:3,fms:5,polling:15,tandem:511"
HEADER = ["case", "states", "method", "s without", "s with", "ratio", "bound s", "solver", "sweeps", "sigma",
          "status with", "bal", "estimate", "tail bound", "true rel", "bound/true", "ref bound"]


def relative(pi, ref):
    ok = ref >= np.finfo(float).tiny
    return float(np.max(np.abs(pi[ok] - ref[ok]) / ref[ok]))


def main(argv=None):
    import argparse
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--method", default="auto")
    known, rest = p.parse_known_args(argv)
    rows = []
    for spec, chain, _ in cases(rest, __doc__.splitlines()[0], DEFAULT):
        warnings.simplefilter("ignore")
        best = {}
        for k in range(known.repeat):
            for tb in ((False, True) if k % 2 == 0 else (True, False)):
                res, t = timed(lambda: chain.stationary(known.method, check=False, tail_bound=tb))
                if tb not in best or t < best[tb][1]:
                    best[tb] = (res, t)
        (off, t0), (on, t1) = best[False], best[True]
        ref = chain.stationary("gmres", check=False, tail_bound=True, tol=1e-13, tail_tol=1e-12)
        true = relative(on.pi, ref.pi)
        i = on.info
        rows.append([spec, chain.n_states, on.method, f"{t0:.2f}", f"{t1:.2f}", f"{t1 / t0:.2f}",
                     f"{i['tail_bound_seconds']:.2f}", i["tail_bound_solver"], i["tail_bound_sweeps"],
                     f"{i['tail_bound_residual']:.1e}", on.status.value, f"{off.balance_error:.1e}",
                     f"{off.info.get('tail_error_estimate', float('nan')):.1e}",
                     f"{i['tail_error_bound']:.1e}",
                     f"{true:.1e}", f"{i['tail_error_bound'] / true:.1f}" if true > 0 else "-",
                     f"{ref.info['tail_error_bound']:.1e}"])
        print(format_table(rows[-1:], HEADER), flush=True)
    print(format_table(rows, HEADER))


if __name__ == "__main__":
    main()
