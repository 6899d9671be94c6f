"""Large phase-type laws: the sparse sub-generator against the dense one, and far tails.

For Erlang-k of mean 1 (``ctmc.ph.erlang``), k from 10^2 to 10^6: the time
and traced peak memory of building the law and computing its mean and
variance, and their errors against the closed forms (mean 1, variance 1/k).
The baseline in the same run is the same law with a dense sub-generator
(``PhaseType(alpha, S_dense)``), where it fits (``--dense-max``, default
2000 phases; a dense Erlang-10^6 would need 8e12 bytes). Then far tails
against closed forms, relative error: ``exponential(1).sf(t) = e^-t`` and the
Erlang-k survival function as a Poisson sum in exact decimal arithmetic.

Run: .venv/bin/python benchmarks/bench_ph.py [--ks 100,2000,100000,1000000] [--dense-max 2000]
"""
import argparse
import math
import time
import tracemalloc
from decimal import Decimal, getcontext

from tabulate import tabulate

import ctmc.ph as ph


def measured(make):
    """(law, seconds, peak MiB) of building the law and its first two moments."""
    tracemalloc.start()
    t = time.perf_counter()
    law = make()
    mean, var = law.mean, law.variance
    s = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    return mean, var, s, peak


def erlang_sf_exact(k: int, t: float) -> float:
    """P(Erlang-k of mean 1 > t) = P(Poisson(k t) < k), summed in 60-digit decimals."""
    getcontext().prec = 60
    x = Decimal(k) * Decimal(repr(t))
    term, total = (-x).exp(), Decimal(0)
    for i in range(k):
        total += term
        term = term * x / (i + 1)
    return float(total)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="100,2000,100000,1000000")
    ap.add_argument("--dense-max", type=int, default=2000)
    args = ap.parse_args()
    rows = []
    for k in (int(v) for v in args.ks.split(",")):
        mean, var, s, peak = measured(lambda: ph.erlang(k))
        row = [k, f"{s:.3f}", f"{peak:.1f}", f"{abs(mean - 1):.1e}", f"{abs(var * k - 1):.1e}"]
        if k <= args.dense_max:
            sparse = ph.erlang(k)
            _, _, sd, pd = measured(lambda: ph.PhaseType(sparse.alpha, sparse.S_dense))
            row += [f"{sd:.3f}", f"{pd:.1f}", f"{s / sd:.2f}"]
        else:
            row += ["-", f"{8 * k * k / 2 ** 20:.3g} (matrix alone)", "-"]
        rows.append(row)
    print(tabulate(rows, headers=["k", "sparse s", "sparse MiB", "|mean-1|", "|k var-1|",
                                  "dense s", "dense MiB", "sparse/dense"]))
    tails = []
    for t in (50.0, 300.0, 700.0, 740.0):
        got, exact = ph.exponential(1).sf(t), math.exp(-t)
        tails.append([f"exponential(1).sf({t:g})", f"{got:.6e}", f"{exact:.6e}", f"{abs(got / exact - 1):.1e}"])
    for k, t in ((100, 3.0), (1000, 1.5), (10000, 1.2)):
        got, exact = float(ph.erlang(k).sf(t)), erlang_sf_exact(k, t)
        tails.append([f"erlang({k}).sf({t:g})", f"{got:.6e}", f"{exact:.6e}", f"{abs(got / exact - 1):.1e}"])
    print()
    print(tabulate(tails, headers=["tail", "ctmc.ph", "closed form", "relative error"]))


if __name__ == "__main__":
    main()
