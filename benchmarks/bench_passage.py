"""Passage analyses at scale: hitting times and Laplace transforms on the benchmark gallery.

    .venv/bin/python benchmarks/bench_passage.py
    .venv/bin/python benchmarks/bench_passage.py --cases kanban:3,tandem:511 --s 0.5

For each gallery model (:mod:`ctmc.models.gallery`) the target is "the first
state variable at its largest reachable value" (kanban: ``w1``, fms:
``P1``, polling: the server's station ``s`` at the last one, cluster:
``left_n``, the working workstations on the left, all up; tandem: ``sc``,
queue C full). The chain is built once; then, one after the other and timed,
``hitting_times(target)`` and ``hitting_laplace(target, s)`` with ``auto``
(on these many-variable chains: GMRES with the Gauss-Seidel preconditioner
and the Gauss-Seidel polish of the small values) and with a reference: the
same analysis by GMRES at ``tol=1e-13`` (at most 3000 iterations). The table gives time, method,
status, balance error and the largest relative difference, state by state,
between ``auto``'s answer and the reference (``rel.diff``; states with
infinite means are left out).

With ``--first-equality`` it times instead the joint law of the first queue
equality of JSQ (``JSQ2(K, 0.9, 0.3).first_equality(s=[0.0], sources=...)``) from
one source, K = 500, 1000, 2000 by default, sources (2, 7) (the README's) and
(0, K) (the worst: it sees every unequal state), each route in its own process
(wall time and peak resident memory of that process):

* ``auto``: ``first_equality`` as shipped (sparse in-rates, the solve on the
  source's corner, block-triangular along the levels on one process);
* ``lu``: the same with ``method="lu"``: one sparse LU of the whole corner;
* ``petsc`` (with ``--petsc``): ``backend="petsc"`` on two MPI ranks
  (``mpirun -n 2``; a set that splits into components gathered and solved
  block-triangularly on each rank when it fits the memory, a small corner
  factorised on each rank; peak memory: the larger rank's);
* ``petsc-lu`` (with ``--petsc``): the same with ``method="lu"``: one
  distributed (MUMPS) factorisation of the corner, the route before;
* ``dense (old)``: the route before, rebuilt here: the target columns as a dense
  ``states x (K+1)`` array, ``Q_RA`` by products with it, one LU of every
  state that reaches the target. Run only where its two dense arrays fit in
  ``--dense-max-gib`` (default 3 GiB).

``rel.diff`` is the largest relative difference from ``auto`` over the
entrances of probability above 1e-300.

    .venv/bin/python benchmarks/bench_passage.py --first-equality
    .venv/bin/python benchmarks/bench_passage.py --first-equality --K 300 500 --petsc
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np

from ctmc.report import format_table

DEFAULT = "kanban:4,fms:5,polling:15,cluster:64,tandem:511"


def rel_diff(a, b):
    ok = np.isfinite(a) & np.isfinite(b) & (np.abs(b) > 0)
    return float(np.max(np.abs(a[ok] / b[ok] - 1))) if ok.any() else 0.0


# --------------------------------------------------------------------------
# --first-equality: JSQ's first equality law from one source
# --------------------------------------------------------------------------
RHO, MU2 = 0.9, 0.3
ROUTES = ("auto", "lu", "dense (old)")


def _dense_route(q, source):
    """The route before the sparse one: dense target columns, Q_RA from them, one LU of all of R."""
    from ctmc.backends import operator_for
    from ctmc.passage import PassageSetup
    ch = q.chain()
    st = ch.states
    tgt = np.asarray(st["s"] == st["l"])
    op = operator_for(ch, "scipy")
    ps = PassageSetup(op, tgt, "lu")
    targets = np.flatnonzero(tgt)
    E = np.zeros((ch.n_states, targets.size))
    E[targets, np.arange(targets.size)] = 1.0
    B = np.where(ps.reach[:, None], op.rates(E), 0.0)        # Q_RA, states x targets, dense
    e = np.zeros(ch.n_states)
    e[ch.index(**source)] = 1.0
    y, rep = ps.solve(0.0, "reach", e, transpose=True)
    row = B.T @ y
    n = ps.count("reach")
    ps.close()
    return row, rep.status.value, n, "lu"


def _one(K, route, source):
    """Child process: one route, printed as JSON (its own wall time and peak RSS; under MPI the
    largest over the ranks, printed by rank 0)."""
    from ctmc.models.jsq import JSQ2
    warnings.simplefilter("ignore")
    q = JSQ2(K, RHO, MU2)
    q.chain()
    t0 = time.perf_counter()
    rank, peak = 0, None
    if route == "dense (old)":
        row, status, n, method = _dense_route(q, source)
    else:
        kw = ({"backend": "petsc"} if route == "petsc" else {"backend": "petsc", "method": "lu"}
              if route == "petsc-lu" else {} if route == "auto" else {"method": route})
        fp = q.first_equality(s=[0.0], sources=source, check=False, **kw)
        row, status, n, method = fp.probabilities[0], fp.status.value, fp.info["n_reach"], fp.method
        if route.startswith("petsc"):
            from ctmc.backends import operator_for
            op = operator_for(q.chain(), "petsc")
            rank, peak = op.rank, max(op.memory()["peak_mib_per_rank"]) / 2 ** 10
            method = f"{method}, {op.size} ranks"
    t = time.perf_counter() - t0
    if peak is None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    if rank == 0:
        print(json.dumps({"seconds": t, "peak_gib": peak, "status": status, "n": int(n), "method": method,
                          "row": [float(v) for v in row]}))


def first_equality_table(Ks, dense_max_gib, timeout, petsc=False):
    rows = []
    routes = ROUTES + (("petsc", "petsc-lu") if petsc else ())
    for K in Ks:
        n_states = (K + 1) * (K + 2) // 2
        for source in ({"s": 2, "l": 7}, {"s": 0, "l": K}):
            ref = None
            for route in routes:
                label = f"({source['s']}, {source['l']})"
                if route == "dense (old)":
                    need = 2 * 8 * n_states * (K + 1) / 2 ** 30
                    if need > dense_max_gib:
                        rows.append([K, n_states, label, route, "-", "-", "-", f"not run: needs > {need:.1f} GiB",
                                     "-", "-"])
                        continue
                cmd = [sys.executable, os.path.abspath(__file__), "--one", str(K), route, json.dumps(source)]
                if route.startswith("petsc"):
                    cmd = [shutil.which("mpirun") or "mpirun", "-n", "2"] + cmd
                try:
                    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                               OMPI_MCA_rmaps_base_oversubscribe="1")
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
                    r = json.loads(out.stdout.strip().splitlines()[-1])
                except Exception as exc:  # a child killed or out of time: say so, go on
                    rows.append([K, n_states, label, route, "-", "-", "-", f"failed: {type(exc).__name__}", "-", "-"])
                    continue
                row = np.array(r["row"])
                if ref is None:
                    ref = row
                ok = ref > 1e-300
                diff = float(np.max(np.abs(row[ok] / ref[ok] - 1))) if ok.any() else 0.0
                rows.append([K, n_states, label, route, r["method"], r["n"], f"{r['seconds']:.2f}",
                             r["status"], f"{r['peak_gib']:.2f}",
                             "ref" if route == "auto" else f"{diff:.1e}"])
                print(" | ".join(map(str, rows[-1])), flush=True)
    print(format_table(rows, ["K", "states", "source", "route", "method", "solved on", "seconds", "status",
                              "peak GiB", "rel.diff"]))


def main(argv=None):
    from ctmc.models.gallery import parse_spec

    if argv is None and sys.argv[1:2] == ["--one"]:
        K, route, source = sys.argv[2:5]
        return _one(int(K), route, json.loads(source))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=DEFAULT, help=f"comma-separated name:value (default {DEFAULT})")
    p.add_argument("--s", type=float, default=0.5, help="Laplace argument (default 0.5)")
    p.add_argument("--first-equality", action="store_true", help="JSQ's first-equality law from one source")
    p.add_argument("--K", type=int, nargs="*", default=[500, 1000, 2000], help="with --first-equality")
    p.add_argument("--dense-max-gib", type=float, default=3.0,
                   help="run the old dense route only where its dense arrays need at most this")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per route and case")
    p.add_argument("--petsc", action="store_true",
                   help="with --first-equality: also the PETSc backend on two MPI ranks (mpirun -n 2)")
    args = p.parse_args(argv)
    if args.first_equality:
        print(f"load: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} {os.getloadavg()[2]:.1f} (1, 5, 15 min)")
        return first_equality_table(args.K, args.dense_max_gib, args.timeout, args.petsc)
    warnings.simplefilter("ignore")
    rows = []
    for spec in args.cases.split(","):
        chain = parse_spec(spec).chain()
        col = chain.states[chain.states.names[0]]
        target = col == col.max()
        for what, run in (("hitting_times", lambda **kw: chain.hitting_times(target, check=False, **kw)),
                          ("hitting_laplace", lambda **kw: chain.hitting_laplace(target, args.s, check=False, **kw))):
            out = {}
            for route, kw in (("auto", {}), ("gmres tol=1e-13", {"method": "gmres", "tol": 1e-13, "maxiter": 3000})):
                t0 = time.perf_counter()
                res = run(**kw)
                out[route] = (res, time.perf_counter() - t0)
            ref = out["gmres tol=1e-13"][0]
            ref_vals = ref.mean if what == "hitting_times" else ref.values
            for route, (res, t) in out.items():
                vals = res.mean if what == "hitting_times" else res.values
                rows.append([spec, chain.n_states, what, route, res.method, f"{t:.2f}", res.status.value,
                             f"{res.info.get('balance_error', float('nan')):.1e}",
                             "ref" if res is ref else f"{rel_diff(np.ravel(vals), np.ravel(ref_vals)):.1e}"])
    print(format_table(rows, ["model", "states", "analysis", "route", "method", "seconds", "status",
                              "balance err", "rel.diff"]))


if __name__ == "__main__":
    main()
