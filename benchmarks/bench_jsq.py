"""ctmc.models.jsq at scale: K up to 2000 (about 2e6 states) on the default backend.

For each K, times the public calls of :class:`ctmc.models.jsq.JSQ2` (build,
stationary law, blocking probability, mean time to saturation from every
state) and checks their answers against the closed forms of
:mod:`ctmc.models.jsq`. Baseline in the same run: the naive stationary solve
(``spsolve`` with one balance equation replaced by the normalisation), run
while it fits its time budget, and the closed forms themselves.

Run: .venv/bin/python benchmarks/bench_jsq.py [--quick] [--K 500 1000 2000] [--backend petsc]
"""
import argparse
import gc
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import git_state, naive_stationary, warm_up  # noqa: E402

from ctmc.models.jsq import JSQ2  # noqa: E402
from ctmc.report import format_table  # noqa: E402

RHO, MU2 = 0.9, 0.5


def timed(fn, *a, **kw):
    """Call ``fn``; return (result, wall seconds, CPU seconds of this process)."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn(*a, **kw)
    return out, time.perf_counter() - t0, time.process_time() - c0


def rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def run(K, naive_budget, backend="scipy"):
    q = JSQ2(K, RHO, MU2)
    chain, t_build, _ = timed(q.chain)
    res, t_stat, c_stat = timed(q.stationary, backend=backend)
    pb, t_pb, _ = timed(q.blocking_probability)
    pb_cf = q.blocking_probability("closed_form")
    cf, t_cf, _ = timed(q.saturation_times, source="closed_form")
    sat, t_sat, c_sat = timed(q.saturation_analysis, backend=backend)
    fin = cf > 0
    sat_err = float(np.max(np.abs(sat.mean[fin] / cf[fin] - 1)))
    naive = "-"
    if naive_budget > 0:
        pn, t_naive, _ = timed(naive_stationary, chain.Q)
        pbn = pn[chain.index(s=K, l=K)]
        naive = f"{t_naive:.2f} s, rel.err {abs(pbn / pb_cf - 1):.1e}"
    row = [K, chain.n_states, f"{t_build:.2f}", f"{t_stat:.2f} / {c_stat:.2f} ({res.method})", f"{res.residual:.1e}",
           f"{pb:.4e}", f"{abs(pb / pb_cf - 1):.1e}", f"{t_pb:.4f}",
           f"{t_sat:.2f} / {c_sat:.2f} ({sat.method}, {sat.status.value})", f"{sat_err:.1e}", f"{t_cf:.2f}", naive,
           f"{rss_gib():.1f}"]
    del q, chain, res, sat, cf
    gc.collect()
    return row, t_stat


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="K = 100, 300 only (< 20 s)")
    ap.add_argument("--K", type=int, nargs="*", default=None)
    ap.add_argument("--backend", default="scipy", help="backend of the chain's analyses (scipy or petsc)")
    ap.add_argument("--naive-max-states", type=int, default=150_000,
                    help="run the naive spsolve baseline up to this many states")
    a = ap.parse_args(argv)
    Ks = a.K or ([100, 300] if a.quick else [500, 1000, 1500, 2000])
    print(git_state())
    print(f"backend {a.backend}; JSQ2(K, rho={RHO}, mu2={MU2}): stationary (pinned sparse LU), blocking vs closed form, "
          "mean time to (K,K) from every state (ctmc hitting times vs closed form)")
    warm_up()
    rows = []
    for K in Ks:
        n = (K + 1) * (K + 2) // 2
        row, _ = run(K, 1 if n <= a.naive_max_states else 0, a.backend)
        rows.append(row)
        print(f"  done K={K}", flush=True)
    print(format_table(rows, ["K", "states", "build s", "stationary wall/cpu s", "residual", "P_block",
                              "rel.err", "P_block s", "saturation (chain) wall/cpu s", "max rel.err",
                              "closed form s", "baseline naive spsolve", "peak RSS GiB"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
