"""JSQ formulas (ctmc.models.jsq.tibi) against the generic chain, K = 100, 1000, 4500.

For each K: the saturation transform E_(x,y)[exp(-s tau)] from every state by
the level recursion against ``JSQ2.saturation_laplace`` (ctmc's generic
hitting-time transform on the (K+1)(K+2)/2-state chain), and the first-equality
law from one source ``(K//2, K)`` by the level recursion against
``JSQ2.first_equality``. Each chain route runs in a child process with a wall
budget (``--budget``, default 60 s) and an address-space cap (``--mem-gib``,
default 6), and reports "-" past either. Columns: wall seconds, and the largest
relative difference over the entries the chain returns above 1e-280.

Also prints the leading-term error of the large-K expansion of E_(0,0)[tau]
against the exact log-space closed form at rho = 0.999 (predicted vs actual).

Run: .venv/bin/python benchmarks/bench_jsq_formulas.py [--K 100 1000 4500] [--budget 60] [--mem-gib 6]
"""
import argparse
import math
import multiprocessing as mp
import os
import resource
import sys
import time

import numpy as np

from ctmc.models.jsq import (JSQ2, first_equality_law, log_saturation_mean, saturation_laplace,
                             saturation_mean_expansion)
from ctmc.report import format_table

RHO, MU2, S = 0.9, 0.3, 0.01
HEAD = ["K", "states", "transform: formula s", "residual", "min log f", "chain s", "status", "rel.diff",
        "first-eq: formula s", "chain s", "status", "rel.diff"]


def _child(kind, K, mem_gib, conn):
    try:
        resource.setrlimit(resource.RLIMIT_AS, (int(mem_gib * 2 ** 30),) * 2)
        q = JSQ2(K, RHO, MU2)
        t0 = time.perf_counter()
        if kind == "laplace":
            res = q.saturation_laplace([S])
            st = q.chain().states
            out = (np.asarray(res.values)[0], np.column_stack([st["s"], st["l"]]), res.status.value)
        else:
            res = q.first_equality(s=[S], sources={"s": K // 2, "l": K})
            out = (np.asarray(res.laplace)[0, 0], None, res.status.value)
        conn.send((time.perf_counter() - t0, out))
    except BaseException as exc:  # noqa: BLE001 - report any failure of the chain route
        conn.send((None, f"{type(exc).__name__}: {str(exc)[:32]}"))
    conn.close()


def chain_route(kind, K, budget, mem_gib):
    ctx = mp.get_context("fork")
    a, b = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(kind, K, mem_gib, b))
    p.start()
    if a.poll(budget):
        got = a.recv()
    else:
        got = (None, f"> {budget:.0f} s")
    p.kill()
    p.join()
    return got


def relerr(mine, ref):
    ok = ref > 1e-280
    return float(np.max(np.abs(mine[ok] / ref[ok] - 1))) if ok.any() else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--K", type=int, nargs="+", default=[100, 1000, 4500])
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--mem-gib", type=float, default=6.0)
    args = ap.parse_args()
    print(f"rho = {RHO}, mu2 = nu = {MU2}, s = {S}; load {os.getloadavg()[0]:.2f} (1 min), "
          f"{os.cpu_count()} cores")
    rows = []
    for K in args.K:
        t0 = time.perf_counter()
        r = saturation_laplace(K, RHO, MU2, s=S)
        t_f = time.perf_counter() - t0
        t_c, got = chain_route("laplace", K, args.budget, args.mem_gib)
        if t_c is None:
            lap = ["-", got, "-"]
        else:
            vals, st, status = got
            idx = {(int(x), int(y)): i for i, (x, y) in enumerate(r.states)}
            mine = r.values[0][[idx[(int(x), int(y))] for x, y in st]]
            lap = [f"{t_c:.2f}", status, f"{relerr(mine, vals):.1e}"]
        t0 = time.perf_counter()
        fe = first_equality_law(RHO, MU2, sources=[(K // 2, K)], s=S)
        t_fe = time.perf_counter() - t0
        t_cf, got = chain_route("first", K, args.budget, args.mem_gib)
        if t_cf is None:
            fq = ["-", got, "-"]
        else:
            vals, _, status = got
            fq = [f"{t_cf:.2f}", status, f"{relerr(fe.laplace[0, 0], vals[:K + 1]):.1e}"]
        rows.append([K, (K + 1) * (K + 2) // 2, f"{t_f:.2f}", f"{r.residual:.0e}",
                     f"{r.log_values.min():.0f}",
                     *lap, f"{t_fe:.3f}", *fq])
        print(format_table(rows[-1:], HEAD), flush=True)
    print()
    print(format_table(rows, HEAD))
    print()
    rho, mu2 = 0.999, MU2
    erows = []
    for K in (100, 300, 1000, 2000, 4500):
        e = saturation_mean_expansion(K, rho, mu2, state=(0, 0))
        act = math.expm1(log_saturation_mean(K, rho, mu2, states=[(0, 0)])[0] - e.log_leading)
        erows.append([K, f"{e.log_leading / math.log(10):.2f}", f"{act:.3e}",
                      f"{e.predicted_relative_error:.3e}"])
    print(f"E_(0,0)[tau] ~ C rho^-2K at rho = {rho}, mu2 = nu = {mu2}, C = {e.C:.6g}:")
    print(format_table(erows, ["K", "log10 leading", "actual rel.err", "predicted"]))
    print(f"load after: {os.getloadavg()[0]:.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
