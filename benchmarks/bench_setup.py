"""The set-up around the default stationary solve, piece by piece, against a baseline tree in the same run.

    .venv/bin/python benchmarks/bench_setup.py --base /tmp/base-setup              # the five default models
    .venv/bin/python benchmarks/bench_setup.py --base /tmp/base-setup --models kanban:4 --repeat 3

The pieces of ``chain.stationary()`` that are not the solve itself (scipy
backend, one process), each timed on its own on a fresh operator of the same
chain (so that nothing made by an earlier piece is held, as in a first call),
the fastest of ``--repeat`` runs in one process:

* ``classes``: ``closed_classes(op, hint, limit=1)`` and the check that every
  state reaches it (the driver's reach), including the transpose ``Q^T`` they
  make;
* ``facts``: ``structure_facts`` (``auto``'s envelope, transitions, dimensions);
* ``pin``: ``walk_pin`` (the random walk to a probable pin);
* ``matrices``: the two principal blocks a default solve extracts (``M^T`` of
  the pinned solve from ``Q^T``'s rows, ``M`` of the return times from
  ``Q``'s rows) and the right-hand side (a row of ``R``);
* ``evidence``: after ``op.release()`` (a Krylov solve releases ``Q^T``),
  ``stationary_evidence`` of a law and ``product_roundoff`` (what the
  residual and the error bound read of ``Q^T``);
* ``setup``: their sum, and ``ratio`` = base / now.

Then ``chain.stationary()`` whole (``solve s``, in another fresh process per
tree, after a warm-up solve of kanban t=2, build excluded) and that process's
peak resident set (``peak MiB``: ``ru_maxrss`` after the solve, build included;
``rss0`` is the resident set after imports and warm-up). Base and now alternate,
``--repeat`` times for the pieces and ``--solve-repeat`` times for the solve
(fastest kept). The machine is shared: compare the ratios of one run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = "kanban:4,fms:6,polling:15,cluster:128,kanban:5"
PIECES = ("classes", "facts", "pin", "matrices", "evidence")


def _warm():
    from ctmc.models.gallery import parse_spec
    parse_spec("kanban:2").chain().stationary()


def pieces(spec: str, repeat: int) -> dict:
    import numpy as np
    from ctmc.backends.base import LinearSpec
    from ctmc.backends.scipy_backend import ScipyOperator
    from ctmc.kernels.classes import closed_classes, count, walk_pin
    from ctmc.kernels.evidence import RETURN_SPEC, stationary_evidence
    from ctmc.kernels.plan import structure_facts
    from ctmc.models.gallery import parse_spec

    _warm()
    chain = parse_spec(spec).chain()
    best = {k: float("inf") for k in PIECES}
    for _ in range(repeat):
        op = ScipyOperator(chain.Q, states=chain.states, initial=chain.initial)
        hint = None if op.initial is None or len(op.initial) == 0 else int(op.initial[0])
        t = time.perf_counter()
        C = closed_classes(op, hint, limit=1)[0]
        assert count(op, op.reach(C)) == op.n
        t1 = time.perf_counter()
        structure_facts(op, C)
        t2 = time.perf_counter()
        pin = walk_pin(op, C, hint)
        t3 = time.perf_counter()
        e = np.zeros(op.n, dtype=bool)
        e[pin] = True
        X = C & ~e
        b = np.where(X, op.rates(e.astype(float), transpose=True), 0.0)
        MT = op.system(X, 0.0, LinearSpec("gmres")).matrix(True)
        M = op.system(X, 0.0, RETURN_SPEC).matrix(False)
        t4 = time.perf_counter()
        del MT, M, b
        pi = np.where(C, 1.0 / count(op, C), 0.0)
        op.release()
        t5 = time.perf_counter()
        stationary_evidence(op, pi)
        op.product_roundoff()
        t6 = time.perf_counter()
        for k, v in zip(PIECES, (t1 - t, t2 - t1, t3 - t2, t4 - t3, t6 - t5)):
            best[k] = min(best[k], v)
    return {"states": chain.n_states, "nnz": int(chain.Q.nnz), **best}


def solve(spec: str) -> dict:
    import resource
    from ctmc.models.gallery import parse_spec

    _warm()
    with open("/proc/self/statm") as f:
        rss0 = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    chain = parse_spec(spec).chain()
    t = time.perf_counter()
    res = chain.stationary()
    s = time.perf_counter() - t
    import hashlib
    return {"solve": s, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "rss0": rss0,
            "status": res.status.value, "bound": float(res.error_bound), "iterations": int(res.iterations),
            "pi": hashlib.sha1(res.pi.tobytes()).hexdigest()[:8]}


def run(kind: str, spec: str, tree, repeat: int, timeout: float) -> dict:
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        p = subprocess.run([sys.executable, __file__, "--worker", kind, spec, str(repeat)], capture_output=True,
                           text=True, timeout=timeout, env=env, cwd="/tmp" if tree else str(ROOT))
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    for line in p.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:80]}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--base", help="a baseline tree (git archive, extensions built in place)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the pieces per process (fastest kept)")
    ap.add_argument("--solve-repeat", type=int, default=1, help="processes of the whole solve per tree")
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        kind, spec, repeat = a.worker
        out = pieces(spec, int(repeat)) if kind == "pieces" else solve(spec)
        print("@@" + json.dumps(out))
        return
    if not a.base:
        ap.error("--base: a baseline tree is required")
    from ctmc.report import format_table

    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    print(f"now = {ROOT} at {head}; base = {a.base}; load average {os.getloadavg()[0]:.1f}")
    trees = (("base", a.base), ("now", None))
    prow, srow = [], []
    for spec in a.models.split(","):
        got = {}
        for name, tree in trees:
            got[name] = run("pieces", spec, tree, a.repeat, a.timeout)
        for name, _ in trees:
            r = got[name]
            if "error" in r:
                prow.append([spec, name] + [r["error"]] + [""] * (len(PIECES) + 1))
                continue
            prow.append([spec, name] + [f"{r[k]:.3f}" for k in PIECES] + [f"{sum(r[k] for k in PIECES):.3f}", ""])
        if all("error" not in got[n] for n, _ in trees):
            tot = {n: sum(got[n][k] for k in PIECES) for n, _ in trees}
            prow[-1][-1] = f"{tot['base'] / tot['now']:.2f}x"
        sol = {n: [] for n, _ in trees}
        for _ in range(a.solve_repeat):
            for name, tree in trees:
                sol[name].append(run("solve", spec, tree, 1, a.timeout))
        for name, _ in trees:
            ok = [r for r in sol[name] if "error" not in r]
            if not ok:
                srow.append([spec, name, sol[name][0]["error"], "", "", "", "", "", ""])
                continue
            r = min(ok, key=lambda r: r["solve"])
            srow.append([spec, name, f"{r['solve']:.2f}", f"{r['peak'] / 2**20:.0f}", f"{r['rss0'] / 2**20:.0f}",
                         f"{r['status']} ({r['iterations']} it.)", f"{r['bound']:.1e}", r["pi"], ""])
        if all(any("error" not in r for r in sol[n]) for n, _ in trees):
            b = min(r["solve"] for r in sol["base"] if "error" not in r)
            w = min(r["solve"] for r in sol["now"] if "error" not in r)
            srow[-1][-1] = f"{b / w:.2f}x"
        print(f"  {spec} done (load {os.getloadavg()[0]:.1f})", flush=True)
    print(format_table(prow, ["model", "tree"] + [f"{k} s" for k in PIECES] + ["setup s", "ratio"],
                       title="set-up pieces (fastest of --repeat, seconds)"))
    print()
    print(format_table(srow, ["model", "tree", "solve s", "peak MiB", "rss0 MiB", "status", "bound", "sha1(pi)", "ratio"],
                       title="chain.stationary() whole (fresh process, build excluded from the time, included "
                             "in the peak)"))


if __name__ == "__main__":
    main()
