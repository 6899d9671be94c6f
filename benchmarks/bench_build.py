"""The two model builders side by side: ``Model.build``, ``state_space`` and ``generator_rows`` per engine.

    .venv/bin/python benchmarks/bench_build.py                                  # the gallery and JSQ
    .venv/bin/python benchmarks/bench_build.py --models kanban:3,jsq:2000 --repeat 5

For each model (``name:size`` as in ``bench_gallery.py``) and each engine
(``numpy``, the vectorised builder; ``auto``, the compiled one where the model
compiles), every timing is the fastest of ``--repeat`` fresh processes:

* ``build s``: ``Model.build(initial, engine=...)``, the first call of the
  process (cold, as a user's would be);
* ``state_space s`` and ``rows s``: the two halves of the distributed
  assembly, ``Model.state_space`` then ``Model.generator_rows`` of the first
  half of the states, timed separately after the build in the same process.

The last column checks that the engines agree: the chains' generators and
codes are compared bit for bit in one extra process per model.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = "kanban:3,polling:15,fms:5,cluster:64,tandem:511,jsq:1000,jsq:2000"
ENGINES = ("numpy", "auto")


def _model(spec):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_gallery import model_spec
    return model_spec(spec)


def worker(spec: str, engine: str) -> None:
    """One fresh process: the three timings, one JSON line."""
    g = _model(spec)
    m = g.model()
    t0 = time.perf_counter()
    chain = m.build(initial=g.initial, engine=engine)
    build_s = time.perf_counter() - t0
    m = g.model()
    t0 = time.perf_counter()
    S = m.state_space(initial=g.initial, engine=engine)
    space_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    m.generator_rows(S, 0, len(S) // 2, engine=engine)
    rows_s = time.perf_counter() - t0
    print("@@" + json.dumps({"states": chain.n_states, "build": build_s, "space": space_s, "rows": rows_s,
                             "engine": chain.build_info["engine"]}), flush=True)


def agree(spec: str) -> None:
    """One fresh process: the engines' chains compared bit for bit."""
    g = _model(spec)
    a, b = (g.model().build(initial=g.initial, engine=e) for e in ENGINES)
    same = (np.array_equal(a.states.codes, b.states.codes) and a.Q.shape == b.Q.shape
            and all(np.array_equal(getattr(a.Q, f), getattr(b.Q, f)) for f in ("indptr", "indices", "data")))
    print("@@" + json.dumps({"same": bool(same)}), flush=True)


def _run(args):
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, cwd=ROOT)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
    if p.returncode or not lines:
        raise RuntimeError(f"{' '.join(args)}: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(lines[-1][2:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"name:size,... (default {DEFAULT_MODELS})")
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per timing (the fastest is kept)")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--agree", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(*args.worker)
    if args.agree:
        return agree(args.agree)
    from ctmc.report import format_table
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    print(f"commit {commit or '?'}, fastest of {args.repeat} fresh processes per timing", flush=True)
    rows = []
    for spec in args.models.split(","):
        runs = {e: [_run(["--worker", spec, e]) for _ in range(args.repeat)] for e in ENGINES}
        best = {e: {k: min(r[k] for r in runs[e]) for k in ("build", "space", "rows")} for e in ENGINES}
        same = _run(["--agree", spec])["same"]
        for e in ENGINES:
            b = best[e]
            rows.append([spec, runs[e][0]["states"], e, runs[e][0]["engine"], f"{b['build']:.3f}",
                         f"{b['space']:.3f}", f"{b['rows']:.3f}",
                         "" if e == "numpy" else f"{best['numpy']['build'] / b['build']:.1f}x",
                         "" if e == "numpy" else ("yes" if same else "NO")])
        print(f"  {spec} done", file=sys.stderr, flush=True)
    print(format_table(rows, ["model", "states", "engine asked", "built by", "build s", "state_space s",
                              "rows s", "build speed-up", "same chain"]))


if __name__ == "__main__":
    main()
