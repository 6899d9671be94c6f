"""``multilevel`` (aggregation-disaggregation cycles) against Gauss-Seidel, GMRES and LU.

    .venv/bin/python benchmarks/bench_multilevel.py                      # the default cases
    .venv/bin/python benchmarks/bench_multilevel.py --cases kanban:3,ncd:2000 --methods multilevel,gmres

Each chain is built once; every method then runs on it in turn (``check=False``,
so a failure is a row, not an exception). Columns: time, iterations (sweeps,
Krylov iterations or cycles), status, balance error, the model's published
measure (gallery models) or ``P(block 1)`` (``ncd``), and for ``multilevel``
the sizes of its levels.

Cases: any gallery model ``name:value`` (``kanban:3``, ``tandem:511``,
``fms:5``, ``cluster:64``, ``polling:15``) and ``ncd:K``: two M/M/1/K queues
(arrival 0.5, service 1) whose server switches between them at rate 1e-9
when idle (nearly completely decomposable: Gauss-Seidel stalls).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from ctmc.report import format_table

DEFAULT_CASES = "ncd:2000,kanban:3,fms:5,cluster:64,polling:15,tandem:511"
DEFAULT_METHODS = "multilevel,gauss_seidel,gmres,lu"
#: the options of each method
OPTIONS = {"gmres": {"preconditioner": "sgs"}, "gauss_seidel": {"maxiter": 20_000}}
#: no direct solve on these many-dimensional chains (LU fills in: kanban t=3 ran > 15 min here)
LU_SKIP = {"polling", "kanban", "fms", "cluster"}


def ncd_chain(K: int):
    """Two M/M/1/K queues coupled at rate 1e-9 (rate 3e-9 back) when empty."""
    import ctmc
    m = ctmc.Model(f"ncd(K={K})")
    b, n = m.var("b", 0, 1), m.var("n", 0, K)
    m.event("arrive", guard=n < K, rate=0.5, update={n: n + 1})
    m.event("serve", guard=n > 0, rate=1.0, update={n: n - 1})
    m.event("on", guard=(n == 0) & (b == 0), rate=1e-9, update={b: 1})
    m.event("off", guard=(n == 0) & (b == 1), rate=3e-9, update={b: 0})
    chain = m.build(initial={"b": 0, "n": 0})
    return chain, (lambda res, c: float(res.pi[c.states["b"] == 1].sum()))


def build(spec: str):
    name, value = spec.split(":")
    if name == "ncd":
        return ncd_chain(int(value))
    from ctmc.models.gallery import GALLERY
    g = GALLERY[name](int(value))
    return g.chain(), g.measure


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--methods", default=DEFAULT_METHODS)
    ap.add_argument("--backend", default="scipy")
    args = ap.parse_args(argv)
    rows = []
    for spec in args.cases.split(","):
        t0 = time.perf_counter()
        chain, measure = build(spec)
        print(f"{spec}: {chain.n_states} states, built in {time.perf_counter() - t0:.1f} s", flush=True)
        for method in args.methods.split(","):
            if method == "lu" and spec.split(":")[0] in LU_SKIP:
                continue
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = chain.stationary(method, backend=args.backend, check=False, **OPTIONS.get(method, {}))
            dt = time.perf_counter() - t
            value = measure(res, chain) if np.all(np.isfinite(res.pi)) else float("nan")
            sizes = res.info.get("coarse_sizes") if method == "multilevel" else None
            rows.append([spec, chain.n_states, method, f"{dt:.2f}", res.iterations, res.status.value,
                         f"{res.balance_error:.1e}", f"{value:.10g}", "" if sizes is None else str(sizes)])
            print("  " + " | ".join(str(v) for v in rows[-1]), flush=True)
    print()
    print(format_table(rows, ["case", "states", "method", "seconds", "iterations", "status", "balance",
                              "measure", "coarse sizes"]))


if __name__ == "__main__":
    main()
