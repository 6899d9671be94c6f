"""The default solve of the gallery's tandem networks, stage by stage, against another tree in the same run.

    .venv/bin/python benchmarks/bench_tandem_polish.py --c 511 1023 --base /tmp/base

Each capacity ``c`` (``models.gallery``, ``tandem:c``) is solved by ``chain.stationary(error_tol=1e-9)``
in a fresh process of each tree (this one and ``--base``, a tree of another commit with its C
extensions built in place, imported by ``PYTHONPATH``), the trees taking turns. The table gives the
CPU and wall seconds of the call (build excluded), its status and proven bound, the symmetric sweeps
of the tail polish (and its aggregation steps on levels, ``info["polish_levels"]``), and the
return-time solves of the bound (iterations of each, the solver that gave it). On a shared machine
the CPU seconds of one run, and the counts, are what compare.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child(c: int) -> dict:
    import ctmc                  # (from the tree PYTHONPATH names)
    from models.gallery import parse_spec
    chain = parse_spec(f"tandem:{c}").chain()
    c0, w0 = time.process_time(), time.perf_counter()
    res = chain.stationary(error_tol=1e-9)
    info = res.info
    return {"tree": os.path.dirname(os.path.dirname(os.path.abspath(ctmc.__file__))),
            "cpu": time.process_time() - c0, "wall": time.perf_counter() - w0, "status": res.status.value,
            "bound": res.error_bound, "sweeps": info.get("polish_sweeps", 0),
            "levels": info.get("polish_levels", ""), "rt": info.get("return_time_iterations", []),
            "solver": info.get("return_time_solver", ""), "bound_s": info.get("error_bound_seconds", 0.0)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--c", type=int, nargs="+", default=[511], help="capacities (default 511)")
    p.add_argument("--base", default=None, help="another tree (its extensions built), run by PYTHONPATH")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child)))
        return
    trees = {"branch": HERE} | ({"base": os.path.abspath(args.base)} if args.base else {})
    print(f"{'c':>5} {'tree':6} {'cpu s':>7} {'wall s':>7} {'status':8} {'bound':>8} {'sweeps':>6}  "
          f"{'levels':24} {'bound s':>7}  return-time iterations (solver)")
    for k, c in enumerate(args.c):
        for name in list(trees) if k % 2 == 0 else list(trees)[::-1]:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", str(c)],
                                 env=dict(os.environ, PYTHONPATH=trees[name]), capture_output=True,
                                 text=True, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            if os.path.realpath(r["tree"]) != os.path.realpath(trees[name]):
                raise RuntimeError(f"{name}: imported ctmc from {r['tree']}, not {trees[name]}")
            print(f"{c:>5} {name:6} {r['cpu']:>7.1f} {r['wall']:>7.1f} {r['status']:8} {r['bound']:>8.1e} "
                  f"{r['sweeps']:>6}  {r['levels']:24} {r['bound_s']:>7.1f}  "
                  f"{'+'.join(map(str, r['rt']))} ({r['solver']})", flush=True)


if __name__ == "__main__":
    main()
