"""Multilevel aggregation as a GMRES preconditioner and as a solver, against GMRES + Gauss-Seidel.

    .venv/bin/python benchmarks/bench_multilevel.py                           # the default cases
    .venv/bin/python benchmarks/bench_multilevel.py --cases kanban:3,fms:5 --repeat 3
    .venv/bin/python benchmarks/bench_multilevel.py --cases ncd:2000 --routes multilevel,gauss_seidel,lu

Each chain is built once; every route then runs on it (``check=False``, so a
failure is a row, not an exception), ``--repeat`` rounds interleaved (the
order of the routes turns every round) and the fastest call kept, CPU time
and wall time (OpenBLAS is held to one thread unless ``OPENBLAS_NUM_THREADS``
is set, so CPU time is the work: the machine is shared). Routes:

========================  ==============================================================
``gmres+sgs``             ``stationary("gmres", preconditioner="sgs")`` (the default's solve)
``gmres+multilevel``      ``stationary("gmres", preconditioner="multilevel")`` (:mod:`ctmc.multigrid`)
``multilevel``            the aggregation-disaggregation solver (:mod:`ctmc.aggregation`)
``gauss_seidel``, ``lu``  for comparison (``lu`` is skipped on the many-dimensional gallery)
========================  ==============================================================

Columns: the whole call (CPU and wall s); ``setup s``: the multilevel
hierarchy's set-up (inside ``solve s``); ``solve s``: the pinned Krylov solve
(wall); ``bound s``: the error bound; GMRES iterations (cycles of the
solver); the status; the model's measure and its relative error against a
reference solved tightly in the same run (``gmres+sgs`` at ``tol=1e-13``,
not timed); the levels' sizes.

A second table (``--krylov``, on by default; ``--no-krylov`` skips it) isolates
the preconditioner: on the pinned system ``A x = b`` of the scipy backend
(``A = -Q_XX^T`` without the pin that ``stationary("gmres")`` takes, a
probable state found by a random walk, :func:`ctmc.kernels.classes.walk_pin`),
``ctmc.krylov.gmres`` (restart 50, rtol 1e-12)
with ``ssor1`` (``sgs``) and with ``ctmc.multigrid.setup`` (``multilevel``),
``--repeat`` rounds interleaved, fastest CPU time kept: set-up s, GMRES s,
iterations, their sum against sgs's, and the relative difference of the two
solutions (1-norm).

Cases: any gallery model ``name:value`` (``kanban:3``, ``tandem:511``,
``fms:5``, ``cluster:64``, ``polling:15``) and ``ncd:K``: two M/M/1/K queues
(arrival 0.5, service 1) whose server switches between them at rate 1e-9
when idle (nearly completely decomposable: Gauss-Seidel stalls).
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

from ctmc.report import format_table  # noqa: E402

DEFAULT_CASES = "kanban:2,kanban:3,kanban:4,fms:4,fms:5,fms:6,tandem:255,tandem:511,tandem:1023"
DEFAULT_ROUTES = "gmres+sgs,gmres+multilevel,multilevel"
#: the options of each route
ROUTES = {"gmres+sgs": ("gmres", {"preconditioner": "sgs"}),
          "gmres+multilevel": ("gmres", {"preconditioner": "multilevel"}),
          "multilevel": ("multilevel", {}),
          "gauss_seidel": ("gauss_seidel", {"maxiter": 20_000}),
          "lu": ("lu", {})}
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


def run(chain, route, **extra):
    method, kw = ROUTES[route]
    c0, t0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = chain.stationary(method, check=False, **dict(kw, **extra))
    return res, time.process_time() - c0, time.perf_counter() - t0


def krylov_rows(spec, chain, repeat):
    """The preconditioners alone on the pinned system: set-up and GMRES CPU seconds, iterations."""
    import scipy.sparse as sp

    from ctmc import multigrid
    from ctmc.backends.scipy_backend import operator, ssor1
    from ctmc.kernels.classes import walk_pin
    from ctmc.krylov import gmres

    op = operator(chain)
    # the pin of stationary("gmres") on an irreducible chain: a probable state found by a walk
    pin = walk_pin(op, np.ones(op.n, dtype=bool), None if op.initial is None else int(op.initial[0]))
    keep = np.ones(op.n, dtype=bool)
    keep[pin] = False
    A = sp.csr_matrix((-op.Q[keep][:, keep]).T)
    b = np.asarray(op.R[pin].toarray()).ravel()[keep]
    norm_a = float(abs(A).sum(axis=1).max())
    setups = {"sgs": ssor1, "multilevel": multigrid.setup}
    best, sol = {}, {}
    for k in range(repeat):
        for name in (list(setups) if k % 2 == 0 else list(setups)[::-1]):
            c0 = time.process_time()
            P = setups[name](A)
            c1 = time.process_time()
            x, rep = gmres(A.dot, b, P, rtol=1e-12, restart=50, maxiter=2000, norm_a=norm_a)
            c2 = time.process_time()
            sol[name] = x
            if name not in best or c2 - c0 < sum(best[name][:2]):
                best[name] = (c1 - c0, c2 - c1, rep, getattr(P, "sizes", None))
    ref = best["sgs"][0] + best["sgs"][1]
    d = float(np.abs(sol["multilevel"] - sol["sgs"]).sum() / np.abs(sol["sgs"]).sum())
    rows = []
    for name, (t_set, t_gm, rep, sizes) in best.items():
        rows.append([spec, A.shape[0], A.nnz, name, f"{t_set:.3f}", f"{t_gm:.3f}", rep.iterations,
                     "yes" if rep.converged else "no", f"{(t_set + t_gm) / ref:.2f}", f"{d:.1e}",
                     "" if sizes is None else str(sizes)])
        print("  " + " | ".join(str(v) for v in rows[-1]), flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--routes", default=DEFAULT_ROUTES)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--krylov", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--calls", action=argparse.BooleanOptionalAction, default=True,
                    help="the whole stationary calls (--no-calls: the Krylov table only)")
    args = ap.parse_args(argv)
    from ctmc.progress import set_progress
    set_progress(False)
    rows, krows = [], []
    for spec in args.cases.split(","):
        t0 = time.perf_counter()
        chain, measure = build(spec)
        print(f"{spec}: {chain.n_states} states, built in {time.perf_counter() - t0:.1f} s", flush=True)
        if args.krylov:
            krows += krylov_rows(spec, chain, args.repeat)
        if not args.calls:
            continue
        ref, _, _ = run(chain, "gmres+sgs", tol=1e-13)
        ref_value = measure(ref, chain)
        routes = [r for r in args.routes.split(",") if not (r == "lu" and spec.split(":")[0] in LU_SKIP)]
        best = {}
        for k in range(args.repeat):
            for route in routes[k % len(routes):] + routes[:k % len(routes)]:
                res, cpu, wall = run(chain, route)
                if route not in best or cpu < best[route][1]:
                    best[route] = (res, cpu, wall)
        for route in routes:
            res, cpu, wall = best[route]
            info = res.info
            value = measure(res, chain) if np.all(np.isfinite(res.pi)) else float("nan")
            sizes = info.get("multilevel_sizes") or ([chain.n_states] + info["coarse_sizes"]
                                                     if "coarse_sizes" in info else None)
            setup = info.get("multilevel_setup_seconds")
            solve = info.get("solve_seconds")
            bound = info.get("error_bound_seconds")
            rows.append([spec, chain.n_states, route, f"{cpu:.2f}", f"{wall:.2f}",
                         "-" if setup is None else f"{setup:.2f}", "-" if solve is None else f"{solve:.2f}",
                         "-" if bound is None else f"{bound:.2f}", res.iterations, res.status.value,
                         f"{value:.10g}", f"{abs(value / ref_value - 1):.1e}",
                         "" if sizes is None else str(sizes)])
            print("  " + " | ".join(str(v) for v in rows[-1]), flush=True)
    if krows:
        print()
        print(format_table(krows, ["case", "unknowns", "nnz", "preconditioner", "setup cpu s", "gmres cpu s",
                                   "its", "conv", "total / sgs", "L1 rel.diff", "levels"]))
    if not rows:
        return
    print()
    print(format_table(rows, ["case", "states", "route", "call cpu s", "call s", "setup s", "solve s",
                              "bound s", "its", "status", "measure", "rel.err", "levels"]))


if __name__ == "__main__":
    main()
