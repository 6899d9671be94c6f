"""P(block) against the load of an M/M/1/K queue for K = 10 and K = 100, by ctmc.sweep.

The blocking probability of the M/M/1/K queue at load rho is

    pi_K = (1 - rho) rho^K / (1 - rho^(K+1))        (1 / (K + 1) at rho = 1).

One sweep over the grid K x rho gives at every point the PRISM property
S=? [ "full" ] (P(block)), the expression "n" (its long-run mean: the mean
queue length) and the throughput, rho (1 - pi_K), from a function of the
chain. Each record carries its error bound; the script checks every value
against the closed forms in exact rational arithmetic and prints the worst
error as a fraction of the stated bound (at most 1: the bounds hold). The
capacities come first in the grid, so the loads of one capacity reuse its
chain (only the rates change).

Run: python examples/sweep_mm1k_blocking.py [--points 11] [--jobs 2]
"""
import argparse
from fractions import Fraction

import numpy as np

import ctmc
from ctmc.report import format_table


def mm1k(K, rho):
    """The M/M/1/K queue with service rate 1 and arrival rate rho."""
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, K)
    m.event("arrival", guard=n < K, rate=rho, update={n: n + 1})
    m.event("departure", guard=n > 0, rate=1.0, update={n: n - 1})
    m.label("full", n == K)
    return m


def served(chain):
    """The throughput: departures per unit time in the long run (a MeasureResult, with its bound)."""
    return chain.throughput("departure")


def exact(K, rho) -> tuple:
    """(P(block), mean queue length, throughput) exactly, from pi_k proportional to rho^k."""
    r = Fraction(rho)
    w = [r ** k for k in range(K + 1)]
    pi = [x / sum(w) for x in w]
    return pi[K], sum(k * p for k, p in enumerate(pi)), r * (1 - pi[K])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--points", type=int, default=11, help="loads from 0.5 to 1.5 (default 11)")
    ap.add_argument("--jobs", type=int, default=None, help="processes (default: the cores, if worth it)")
    args = ap.parse_args()
    loads = [round(x, 6) for x in np.linspace(0.5, 1.5, args.points)]
    res = ctmc.sweep(mm1k, {"K": [10, 100], "rho": loads},
                     {"block": 'S=? [ "full" ]', "mean": "n", "served": served},
                     initial={"n": 0}, jobs=args.jobs, progress=False)
    by = {(r["K"], r["rho"], r["measure"]): r for r in res}
    rows, worst = [], 0.0
    for K in (10, 100):
        for rho in loads:
            for name, want in zip(("block", "mean", "served"), exact(K, rho)):
                r = by[(K, rho, name)]
                assert r["status"] == "success", r
                err = abs(Fraction(r["value"]) - want)
                bound = Fraction(r["error_bound"])
                worst = max(worst, float(err / bound) if bound else (0.0 if err == 0 else float("inf")))
            b = by[(K, rho, "block")]
            rows.append([K, f"{rho:g}", f"{b['value']:.6e}", f"{float(exact(K, rho)[0]):.6e}",
                         f"{b['error_bound']:.1e}", f"{by[(K, rho, 'mean')]['value']:.4f}",
                         f"{by[(K, rho, 'served')]['value']:.6f}", "yes" if b["reused"] else "no"])
    heads = ["K", "rho", "P(block)", "closed form", "bound", "E[N]", "throughput", "reused"]
    print(format_table(rows, heads))
    print(f"\n{len(res)} records, {len(res.errors)} errors, {res.jobs} process(es), {res.seconds:.2f} s")
    print(f"worst |value - exact| / error_bound: {worst:.3g} (the bounds hold: <= 1)")
    assert worst <= 1.0


if __name__ == "__main__":
    main()
