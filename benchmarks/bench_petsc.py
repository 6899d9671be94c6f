"""PETSc backend at 1e7 states: stationary JSQ chain on 1 and 2 MPI processes, next to scipy.

The chain is the reduced two-queue JSQ of :mod:`ctmc.models.jsq` (``(K+1)(K+2)/2``
states; ``K = 4500`` gives 10.1 million). Each PETSc run is a separate
``mpirun -n P`` job that explores the state codes, assembles only its own
rows (:meth:`ctmc.backends.petsc_backend.DistributedChain.from_model`) and
solves with GMRES + block Jacobi/ILU(0). The baseline is the scipy backend
(``method="auto"``: pinned sparse LU) in one process on the largest chain it
handles here. Every row reports wall times, the peak resident memory of
each process, the residual ``||pi Q||_1`` recomputed by ctmc and the relative
error of the blocking probability against the closed form of
:func:`ctmc.models.jsq.blocking_probability`.

With ``rho > 1`` the full state ``(K, K)`` is the most probable one, so the
pinned system is pinned there (``pin="last"``; the default pin, the initial
state, carries a probability near 0 and slows GMRES down by orders of
magnitude).

Usage::

    python benchmarks/bench_petsc.py            # K = 4500 (1.0e7 states) on 1 and 2 ranks
    python benchmarks/bench_petsc.py --quick    # K = 300, seconds

As root, mpirun needs OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
(set here for the child jobs).
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def worker(args):
    import numpy as np

    from ctmc.models.jsq import JSQ2, blocking_probability
    q = JSQ2(args.K, args.rho, args.mu2)
    init = [{"s": 0, "l": y} for y in range(args.K + 1)]
    out = {"K": args.K}
    if args.worker == "scipy":
        t = time.perf_counter()
        chain = q.model().build(initial=init)
        out["build_s"] = time.perf_counter() - t
        t = time.perf_counter()
        res = chain.stationary("auto", check=False)
        out["solve_s"] = time.perf_counter() - t
        out.update(states=chain.n_states, nnz=int(chain.Q.nnz), ranks=1, backend="scipy",
                   method=res.method, iterations=res.iterations)
        rank, pi_last, mem = 0, float(res.pi[-1]), [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]
    else:
        from ctmc.backends.petsc_backend import DistributedChain
        t = time.perf_counter()
        dc = DistributedChain.from_model(q.model(), init)
        out["build_s"] = time.perf_counter() - t
        pin = dc.n_states - 1 if args.pin == "last" else None
        t = time.perf_counter()
        res = dc.stationary(args.method, check=False, pin=pin, tol=args.tol, backend_options={"gather": "none"})
        out["solve_s"] = time.perf_counter() - t
        rank = dc.rank
        last = float(res.pi[-1]) if dc.stop == dc.n_states and res.pi.size else 0.0
        pi_last = dc.allmax(last)
        mem = dc.memory()["peak_mib_per_rank"]
        out.update(states=dc.n_states, nnz=int(dc.allsum(float(dc._nnz))), ranks=dc.size, backend="petsc",
                   method=res.method, iterations=res.iterations, reason=res.info.get("reason"))
    exact = blocking_probability(args.K, args.rho, args.mu2)
    out.update(status=res.status.value, residual=res.residual, rel_residual=res.info.get("relative_residual"),
               blocking=pi_last, blocking_rel_err=abs(pi_last / exact - 1) if exact > 0 else float("nan"),
               peak_mib=[round(m) for m in np.atleast_1d(mem)])
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


def run(kind, K, ranks, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", kind, "--K", str(K), "--rho", str(args.rho),
           "--mu2", str(args.mu2), "--method", args.method, "--pin", args.pin, "--tol", str(args.tol)]
    if kind == "petsc":
        cmd = [shutil.which("mpirun") or "mpirun", "-n", str(ranks)] + cmd
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r["job_s"] = wall
            return r
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes (K = 300), seconds")
    p.add_argument("--K", type=int, default=4500, help="JSQ capacity for PETSc (states = (K+1)(K+2)/2)")
    p.add_argument("--K-scipy", type=int, default=1500, help="JSQ capacity for the scipy baseline")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rho", type=float, default=1.2)
    p.add_argument("--mu2", type=float, default=0.5)
    p.add_argument("--method", default="gmres")
    p.add_argument("--pin", choices=["last", "default"], default="last")
    p.add_argument("--tol", type=float, default=1e-9)
    p.add_argument("--worker", choices=["scipy", "petsc"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    from ctmc.backends.petsc_backend import available
    if not available():
        from ctmc.backends.petsc_backend import INSTALL_HELP
        print(f"petsc4py not found: {INSTALL_HELP}")
        return 0
    if args.quick:
        args.K, args.K_scipy = 300, 300
    rows = [run("scipy", args.K_scipy, 1, args)]
    if args.K != args.K_scipy:
        rows.append(run("petsc", args.K_scipy, 1, args))
    rows += [run("petsc", args.K, P, args) for P in args.ranks]
    from ctmc.report import format_table
    table = [[r["backend"], r["ranks"], r["K"], r["states"], r["nnz"], f"{r['build_s']:.1f}",
              f"{r['solve_s']:.1f}", f"{r['job_s']:.1f}", r["iterations"],
              "/".join(str(m) for m in r["peak_mib"]), f"{r['residual']:.1e}", f"{r['blocking_rel_err']:.1e}",
              r["status"]] for r in rows]
    print(format_table(table, ["backend", "ranks", "K", "states", "nnz", "build s", "solve s", "job s", "its",
                               "peak MiB/rank", "||piQ||_1", "block. rel err", "status"],
                       title=f"JSQ2 stationary, rho={args.rho}, mu2={args.mu2}, petsc method={args.method}, "
                             f"tol={args.tol}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
