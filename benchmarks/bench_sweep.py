"""Rebuilding a chain when only its rates change: ``Model.build(reuse=...)`` against a fresh build.

    .venv/bin/python benchmarks/bench_sweep.py                 # JSQ K=1000 and a tandem line, 8 loads each
    .venv/bin/python benchmarks/bench_sweep.py --quick         # smaller chains

For each model and engine, the same loads are built twice in the same
process: fresh (``Model.build``, the baseline, exploring every time) and
chained (``Model.build(reuse=previous)``, as :func:`ctmc.sweep` does: the
first reuse finds the moves, the next ones evaluate the rates only). Times are
the median per point over the loads after the first reuse, whose own time is
the column ``first reuse s``; the last column checks that every reused
generator equals the fresh one bit for bit.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import ctmc
from ctmc.models.jsq import JSQ2


def tandem(K):
    def make(rho):
        m = ctmc.Model("tandem")
        a, b = m.var("a", 0, K), m.var("b", 0, K)
        m.event("arrive", guard=a < K, rate=rho, update={a: a + 1})
        m.event("serve1", guard=(a > 0) & (b < K), rate=1.0, update={a: a - 1, b: b + 1})
        m.event("serve2", guard=b > 0, rate=1.0 + rho / 4, update={b: b - 1})
        return m
    return make, {"a": 0, "b": 0}


def jsq(K):
    return (lambda rho: JSQ2(K, rho, 0.5).model()), {"s": 0, "l": 0}


def run(name, make, init, loads, engine):
    fresh, chained, same, first = [], [], True, 0.0
    prev = None
    for k, rho in enumerate(loads):
        t0 = time.perf_counter()
        f = make(rho).build(initial=init, engine=engine)
        t1 = time.perf_counter()
        c = make(rho).build(initial=init, engine=engine, reuse=prev)
        t2 = time.perf_counter()
        if k >= 2:                                   # after the first reuse, which finds the moves
            fresh.append(t1 - t0)
            chained.append(t2 - t1)
        elif k == 1:
            first = t2 - t1
        same &= all(np.array_equal(getattr(f.Q, p), getattr(c.Q, p)) for p in ("indptr", "indices", "data"))
        prev = c
    a, b = statistics.median(fresh), statistics.median(chained)
    print(f"{name:<18}{engine:<10}{prev.n_states:>10}{a:>10.4f}{first:>15.4f}{b:>12.4f}{a / b:>8.2f}  {same}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller chains")
    args = ap.parse_args()
    loads = list(np.linspace(0.5, 0.95, 8))
    Kj, Kt = (300, 150) if args.quick else (1000, 400)
    print(f"{'model':<18}{'engine':<10}{'states':>10}{'fresh s':>10}{'first reuse s':>15}{'reused s':>12}"
          f"{'ratio':>8}  bit-equal")
    for name, (make, init) in ((f"jsq K={Kj}", jsq(Kj)), (f"tandem K={Kt}", tandem(Kt))):
        for engine in ("auto", "numpy"):
            run(name, make, init, loads, engine)


if __name__ == "__main__":
    main()
