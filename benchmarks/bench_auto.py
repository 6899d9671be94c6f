"""``auto`` against the best ctmc method, in the same run, on the model families and the gallery.

    .venv/bin/python benchmarks/bench_auto.py                  # the default cases below
    .venv/bin/python benchmarks/bench_auto.py --cases jsq:1000,tandem:511 --repeat 3 --each \
        --skip tandem:511=gauss_seidel       # a route left out of a case

Every call runs in a process of its own (``--worker``: the chain built, then one
``chain.stationary(route)`` timed), so no route inherits another's operator,
transposes, caches or heap. The routes of a case take turns in ``--repeat``
rounds (default 3), the order turned every round, and each route keeps its
fastest wall time and, separately, its least **process CPU time** (user + system
of all its threads, ``resource.getrusage(RUSAGE_SELF)``, plus any child process,
``RUSAGE_CHILDREN``, over the call alone). The compiled kernels use two threads, so
CPU can exceed wall on an idle machine; on a shared one wall time carries the
other processes' load and CPU time much less of it. The table shows what ``auto``
chose and why, each route's wall and CPU seconds and status, the L1 distance of
its law from ``auto``'s, and ``auto`` over the best route that succeeded (statuses
other than ``success`` are never the best), by wall and by CPU. The issue's
target is ``auto`` within 1.5x of that best.

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
import json
import os
import resource
import subprocess
import sys
import tempfile
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
        c = JSQ2(value, 0.9, 0.5).chain()
    elif name == "hysteresis":
        from ctmc.models.hysteresis import HysteresisQueue, erlang
        c = HysteresisQueue(value // 4, value * 5 // 8, value, 1.2, 0.6, service=erlang(20, 1.0)).chain()
    elif name == "supermarket":
        from ctmc.models.supermarket import Supermarket
        c = Supermarket(value, 2, 0.7).chain()
    elif name == "cycle":
        import scipy.sparse as sp
        import ctmc
        perm = np.random.default_rng(0).permutation(value)
        rate = np.ones(value)
        rate[value // 2] = 1e8
        R = sp.csr_matrix((rate, (perm, perm[(np.arange(value) + 1) % value])), shape=(value, value))
        k = np.arange(value)
        side = max(int(round(value ** (1 / 3))), 2)
        states = {"a": k % side, "b": (k // side) % side, "c": k // (side * side)}
        c = ctmc.CTMC.from_rates(R, states)
    else:
        from ctmc.models.gallery import GALLERY
        c = GALLERY[name](value).chain()
    return c, references(name, c)


def references(name: str, chain=None) -> dict:
    """The reference methods of a case and their options (their names alone without the ``chain``)."""
    if name == "jsq":
        return {"lu": {}, "gmres": {"preconditioner": "ilu"}, "multilevel": {}}
    if name in ("hysteresis", "cycle"):
        return {"lu": {}}
    if name == "supermarket":
        if chain is None:
            return {"level_iad": {}, "multilevel": {}}
        B = max(int(k[1:]) for k in chain.states.names if k.startswith("m"))
        level = sum(k * chain.states[f"m{k}"].astype(np.int64) for k in range(1, B + 1))
        return {"level_iad": {"levels": level}, "multilevel": {"aggregates": level}}
    return {"gmres": {"preconditioner": "sgs"}, "gmres+multilevel": {"preconditioner": "multilevel"},
            "bicgstab": {"preconditioner": "sgs"}, "gauss_seidel": {"maxiter": 20_000}, "multilevel": {}}


def cases(argv, description: str, default: str):
    """``[(spec, chain, reference options)]`` of the ``--cases`` option (warnings silenced)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--cases", default=default, help=f"comma-separated name:value (default {default})")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    for spec in args.cases.split(","):
        name, _, value = spec.partition(":")
        yield (spec, *build(name, int(value)))


def routes_of(refs) -> dict:
    """route name -> (stationary method, its options): ``auto`` and a case's references."""
    return {"auto": ("auto", {}), **{m: (m.split("+")[0], kw) for m, kw in refs.items()}}


def _cpu(who) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def worker(spec: str, route: str, out: str):
    """One timed call in this process: prints a JSON line, writes the law to ``out`` (``.npy``)."""
    warnings.simplefilter("ignore")
    name, _, value = spec.partition(":")
    chain, refs = build(name, int(value))
    method, kw = routes_of(refs)[route]
    c0, k0, t0 = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    res = chain.stationary(method, check=False, **kw)
    wall = time.perf_counter() - t0
    cpu = _cpu(resource.RUSAGE_SELF) - c0 + _cpu(resource.RUSAGE_CHILDREN) - k0
    if res.pi is not None:
        np.save(out, res.pi)
    plan = res.info.get("auto", {})
    print(json.dumps({"states": chain.n_states, "method": res.method, "status": res.status.value,
                      "wall": wall, "cpu": cpu, "iterations": int(res.iterations or 0),
                      "reason": plan.get("reason", ""), "chosen": res.info.get("chosen", ""),
                      "fallbacks": res.info.get("fallbacks", [])}), flush=True)


def run_case(spec: str, repeat: int, skip=(), tmp: str = None) -> list:
    """The rows of one case: every route in fresh processes, interleaved rounds, best of ``repeat``."""
    name, _, value = spec.partition(":")
    names = [r for r in routes_of(references(name)) if r not in skip]
    best, law = {}, {}
    for k in range(repeat):                 # interleaved rounds, the order turned each round
        for r in names[k % len(names):] + names[:k % len(names)]:
            out = os.path.join(tmp, f"{r}.npy")
            p = subprocess.run([sys.executable, __file__, "--worker", spec, r, out], capture_output=True,
                               text=True)
            if p.returncode:
                got = {"status": f"error {p.returncode}", "method": "", "wall": np.nan, "cpu": np.nan,
                       "states": 0, "iterations": 0, "reason": p.stderr.strip().splitlines()[-1:]}
            else:
                got = json.loads(p.stdout.strip().splitlines()[-1])
            b = best.setdefault(r, dict(got))
            b["wall"], b["cpu"] = np.nanmin([b["wall"], got["wall"]]), np.nanmin([b["cpu"], got["cpu"]])
            if r not in law and os.path.exists(out):
                law[r] = np.load(out)
    a = best["auto"]
    ok = [best[r] for r in names if best[r]["status"] == "success"]
    bw = min(b["wall"] for b in ok) if ok else np.nan
    bc = min(b["cpu"] for b in ok) if ok else np.nan
    rows = []
    for r in names:
        b = best[r]
        diff = float(np.abs(law[r] - law["auto"]).sum()) if r in law and "auto" in law else float("nan")
        ratio = f"{a['wall'] / bw:.2f}x / {a['cpu'] / bc:.2f}x" if r == "auto" else f"{diff:.1e}"
        why = str(b.get("reason", ""))[:50] if r == "auto" else ""
        rows.append([spec, b["states"], r, b["method"], b["iterations"], f"{b['wall']:.2f}",
                     f"{b['cpu']:.2f}", b["status"], ratio, why])
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=DEFAULT, help=f"comma-separated name:value (default {DEFAULT})")
    p.add_argument("--repeat", type=int, default=3, help="interleaved rounds, the best kept (default 3)")
    p.add_argument("--skip", default="", help="routes left out: case=route, comma-separated")
    p.add_argument("--each", action="store_true", help="print each case's rows as soon as it is done")
    p.add_argument("--worker", nargs=3, metavar=("CASE", "ROUTE", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(*args.worker)
    skip = {}
    for item in filter(None, args.skip.split(",")):
        case, _, route = item.partition("=")
        skip.setdefault(case, set()).add(route)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for spec in args.cases.split(","):
            t0 = time.strftime("%H:%M:%S", time.gmtime())
            got = run_case(spec, max(1, args.repeat), skip.get(spec, ()), tmp)
            rows += got
            if args.each:          # a table per case as it finishes (long runs on a loaded machine)
                print(f"{spec}: {t0}-{time.strftime('%H:%M:%S', time.gmtime())} UTC, load "
                      f"{os.getloadavg()[0]:.1f}", flush=True)
                print(format_table(got, HEADER), flush=True)
    if not args.each:
        print(format_table(rows, HEADER))


HEADER = ["case", "states", "route", "method", "its", "wall s", "cpu s", "status",
          "L1 vs auto / auto:best wall / cpu", "why (auto)"]


if __name__ == "__main__":
    main()
