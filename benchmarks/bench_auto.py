"""``auto`` against the best ctmc method, in the same run, on the model families and the gallery.

    .venv/bin/python benchmarks/bench_auto.py                  # the default cases below
    .venv/bin/python benchmarks/bench_auto.py --cases jsq:1000,tandem:511

For each case the chain is built once, then ``chain.stationary()`` (``auto``)
and the named reference methods are timed in ``--repeat`` rounds (default 2),
the order turned every round and the fastest call kept (the first call on a
chain also builds its operator and transposes, which used to fall on
``auto``, always first); the table
shows what ``auto`` chose and why, its time, each other method's time and
status, and the largest difference between the laws. The issue's target is
``auto`` within 1.5x of the best method that succeeded.

Cases: ``jsq:K`` (JSQ2(K, 0.9, 0.5)), ``hysteresis:r`` (thresholds r/4, 5r/8,
r, lam 1.2 / 0.6, Erlang-20 service), ``supermarket:n`` (n queues, d = 2,
lam = 0.7, the automatic capacity), ``cycle:n`` (n states in a shuffled cycle of rate 1 with one
rate of 1e8, labelled by three variables: BiCGStab, which ``auto`` tries first there, does not
converge; reference ``lu``), and any gallery model ``name:value``
(references ``gmres`` with the Gauss-Seidel preconditioner and, as
``gmres+multilevel``, with the multilevel one (:mod:`ctmc.multigrid`), ``bicgstab``
with the Gauss-Seidel preconditioner (the lean method of a tight memory budget), ``gauss_seidel``
capped at 20,000 sweeps, which it needs on tandem c=511 without converging, and
``multilevel`` with automatic aggregates). The families' references are
``lu``, ``gmres`` with ILU and ``multilevel`` (JSQ), ``lu`` (hysteresis),
``level_iad`` and ``multilevel`` on the total number of jobs (supermarket).
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from ctmc.report import format_table

DEFAULT = ("jsq:1000,hysteresis:8000,supermarket:10,kanban:3,polling:15,fms:5,cluster:64,tandem:511,"
           "kanban:4,fms:6,cluster:128")


def build(name: str, value: int):
    """The chain of a case, and the extra options of its reference methods."""
    if name == "jsq":
        from ctmc.models.jsq import JSQ2
        return JSQ2(value, 0.9, 0.5).chain(), {"lu": {}, "gmres": {"preconditioner": "ilu"}, "multilevel": {}}
    if name == "hysteresis":
        from ctmc.models.hysteresis import HysteresisQueue, erlang
        q = HysteresisQueue(value // 4, value * 5 // 8, value, 1.2, 0.6, service=erlang(20, 1.0))
        return q.chain(), {"lu": {}}
    if name == "supermarket":
        from ctmc.models.supermarket import Supermarket
        s = Supermarket(value, 2, 0.7)
        c, B = s.chain(), s.capacity
        level = sum(k * c.states[f"m{k}"].astype(np.int64) for k in range(1, B + 1))
        return c, {"level_iad": {"levels": level}, "multilevel": {"aggregates": level}}
    if name == "cycle":
        import scipy.sparse as sp
        import ctmc
        perm = np.random.default_rng(0).permutation(value)
        rate = np.ones(value)
        rate[value // 2] = 1e8
        R = sp.csr_matrix((rate, (perm, perm[(np.arange(value) + 1) % value])), shape=(value, value))
        k = np.arange(value)
        side = max(int(round(value ** (1 / 3))), 2)
        states = {"a": k % side, "b": (k // side) % side, "c": k // (side * side)}
        return ctmc.CTMC.from_rates(R, states), {"lu": {}}
    from ctmc.models.gallery import GALLERY
    return GALLERY[name](value).chain(), {"gmres": {"preconditioner": "sgs"},
                                          "gmres+multilevel": {"preconditioner": "multilevel"},
                                          "bicgstab": {"preconditioner": "sgs"},
                                          "gauss_seidel": {"maxiter": 20_000}, "multilevel": {}}


def timed(f):
    t0 = time.perf_counter()
    out = f()
    return out, time.perf_counter() - t0


def cases(argv, description: str, default: str):
    """``[(spec, chain, reference options)]`` of the ``--cases`` option (warnings silenced)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--cases", default=default, help=f"comma-separated name:value (default {default})")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    for spec in args.cases.split(","):
        name, _, value = spec.partition(":")
        yield (spec, *build(name, int(value)))


def main(argv=None):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--each", action="store_true", help="print each case's rows as soon as it is done")
    known, rest = p.parse_known_args(argv)
    rows = []
    for spec, chain, refs in cases(rest, __doc__.splitlines()[0], DEFAULT):
        routes = {"auto": ("auto", {}), **{m: (m.split("+")[0], kw) for m, kw in refs.items()}}
        names = list(routes)
        best_of = {}
        for k in range(known.repeat):         # interleaved rounds, the order turned each round
            for r in names[k % len(names):] + names[:k % len(names)]:
                res, t = timed(lambda: chain.stationary(routes[r][0], check=False, **routes[r][1]))
                if r not in best_of or t < best_of[r][1]:
                    best_of[r] = (res, t)
        auto, ta = best_of["auto"]
        plan = auto.info.get("auto", {})
        rows.append([spec, chain.n_states, "auto", auto.method, f"{ta:.2f}", auto.status.value, "",
                     plan.get("reason", "")[:60]])
        best = ta
        for m in refs:
            res, t = best_of[m]
            best = min(best, t) if res.status.value == "success" else best
            diff = float(np.abs(res.pi - auto.pi).sum()) if res.pi is not None else float("nan")
            rows.append([spec, chain.n_states, m, res.method, f"{t:.2f}", res.status.value, f"{diff:.1e}",
                         ""])
        rows[-1 - len(refs)][6] = f"{ta / best:.1f}x best"
        if known.each:          # a table per case as it finishes (long runs on a loaded machine)
            print(format_table(rows[-1 - len(refs):], HEADER), flush=True)
    if not known.each:
        print(format_table(rows, HEADER))


HEADER = ["case", "states", "route", "method", "seconds", "status", "L1 vs auto / ratio", "why (auto)"]


if __name__ == "__main__":
    main()
