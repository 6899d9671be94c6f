"""ctmc and Storm side by side on PRISM's standard CTMC benchmarks (ctmc.models.gallery).

    .venv/bin/python benchmarks/bench_gallery.py                       # the five default sizes
    .venv/bin/python benchmarks/bench_gallery.py --models kanban:2,tandem:31 --methods gmres,power
    .venv/bin/python benchmarks/bench_gallery.py --storm .venv-storm/bin/python --timeout 300
    .venv/bin/python benchmarks/bench_gallery.py --models kanban:5 --methods "gmres/tol=1e-14" --storm ""

For each model, in the same run and each route in a fresh subprocess (so every
ctmc build is a first build in its process, and a route that overruns
``--timeout`` is stopped and reported as ``timeout``):

* ctmc: ``Model.build`` (cold) then ``chain.stationary()`` (the default,
  ``auto``) and ``chain.stationary(method, check=False)`` for each of
  ``--methods``; the measure is the model's published one (``.measure(pi)``);
* Storm (when ``--storm`` names stormpy's python, see ``scripts/storm_venv.sh``):
  ``parse_prism_program(prism_compatibility=True)``, ``instantiate_constants``,
  ``build_model`` with ``BuilderOptions`` (build s), then ``model_checking``
  of the published property with ``Environment()`` (Storm's command-line
  defaults) and with the gmm++ linear equation solver, on the PRISM program
  the gallery generates (``.prism_program()``).

A method may carry options after a slash, ``;``-separated (``gmres/tol=1e-14;maxiter=50000``).
The reference of each model is the answer of a successful route with a
``tol=`` option (a tightly converged one, for sizes where no direct solve
fits), else of ``lu`` (or ``gth``), else the first successful ctmc route;
``rel.diff`` is ``|measure / reference - 1|``. The ctmc routes also report
the balance error of the answer (its largest relative imbalance of flow in
and out of one state: small probabilities are right to about that much) and
the peak resident memory of the process.

With ``--build-repeat K`` a second table times the cold builds alone (ctmc's
``Model.build``, Storm's parse + build), the fastest of ``K`` fresh processes
each, side by side with the ratio: single cold builds vary up to 2x between
processes on a shared machine, for both tools.

    .venv/bin/python benchmarks/bench_gallery.py --models kanban:3,fms:5 --methods "" --build-repeat 5
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = "kanban:3,polling:15,fms:5,cluster:64,tandem:511"
DEFAULT_STORM = ROOT / ".venv-storm" / "bin" / "python"


def model_spec(spec: str):
    """A gallery model from ``name:size``; ``jsq:K`` is the JSQ family's chain as a gallery model."""
    from ctmc.models.gallery import GalleryModel, parse_spec
    from ctmc.models.gallery._base import flat_prism_program

    if not spec.startswith("jsq:"):
        return parse_spec(spec)
    from ctmc.models.jsq import JSQ2

    class JSQ(GalleryModel):
        """JSQ2(K, rho=0.9, mu2=0.5) from the empty state; measure: the blocking probability."""
        name, parameter, prism_property = "jsq", "K", 'S=? [ "full" ]'

        @property
        def initial(self):
            return {"s": 0, "l": 0}

        def model(self):
            return JSQ2(self.value, 0.9, 0.5).model()

        def reward(self, chain):
            return ((chain.states["s"] == self.value) & (chain.states["l"] == self.value)).astype(float)

        def prism_program(self):
            return flat_prism_program(self.model(), self.initial, title=f"JSQ2 K={self.value}",
                                      labels='label "full" = s=K & l=K;').replace("ctmc\n", "ctmc\nconst int K;\n", 1)

    return JSQ(int(spec.split(":", 1)[1]))


def worker(spec: str, method: str) -> None:
    """One ctmc route: cold build, one stationary solve; one JSON line on stdout."""
    import ctmc
    g = model_spec(spec)
    t0 = time.perf_counter()
    chain = g.chain()
    build_s = time.perf_counter() - t0
    import resource
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    if method == "none":             # the build alone
        print("@@" + json.dumps({"states": chain.n_states, "build_s": build_s, "peak_gib": peak,
                                 "engine": chain.build_info.get("engine")}), flush=True)
        return
    t0 = time.perf_counter()
    name, _, opts = method.partition("/")
    kw = {k: (float(v) if any(ch in v for ch in ".e") else int(v))
          for k, v in (item.split("=") for item in opts.split(";") if item)}
    res = chain.stationary() if method == "default" else chain.stationary(name, check=False, **kw)
    solve_s = time.perf_counter() - t0
    import resource
    print("@@" + json.dumps({"states": chain.n_states, "transitions": chain.n_transitions, "build_s": build_s,
                             "solve_s": solve_s, "value": g.measure(res, chain), "status": res.status.value,
                             "method": res.method,
                             "residual": float(res.residual), "balance": float(res.balance_error),
                             "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20,
                             "ctmc": ctmc.__version__}), flush=True)


def run_route(cmd, timeout):
    """Run a route; its JSON result, or {"status": "timeout" | "error: ..."}."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"status": "timeout"}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
    if p.returncode or not lines:
        last = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"status": f"error: {last[:80]}"}
    return json.loads(lines[-1][2:])


def storm_routes(g, storm, timeout) -> list:
    """Storm's rows ``(name, result)`` on gallery model ``g``: its default environment, then gmm++."""
    out = []
    with tempfile.NamedTemporaryFile("w", suffix=".prism", delete=False) as f:
        f.write(g.prism_program())
    try:
        for solver in ("default", "gmm"):
            cmd = [str(storm), str(ROOT / "models" / "gallery" / "storm_worker.py"), f.name,
                   "--property", g.prism_property, "--constants", json.dumps(g.prism_constants),
                   "--solver", solver]
            r = run_route(cmd, timeout)
            if "value" in r:
                r["status"], r["solve_s"] = "done", r.pop("check_s")
            out.append((f"storm {'gmm++' if solver == 'gmm' else 'default env'}", r))
    finally:
        os.unlink(f.name)
    return out


def bench_model(spec, methods, storm, timeout):
    """Rows of one model: ctmc routes, then Storm's."""
    routes = []
    for method in ["default"] + [m for m in methods if m != "default"]:
        r = run_route([sys.executable, __file__, "--worker", spec, method], timeout)
        routes.append((f"ctmc {method}", r))
    if storm:
        routes += storm_routes(model_spec(spec), storm, timeout)
    ok = {name: r for name, r in routes if r.get("status") == "success"}
    tight = [f"ctmc {m}" for m in methods if "tol=" in m]      # a tightly converged route is the reference
    ref_name = next((n for n in tight + ["ctmc lu", "ctmc gth", "ctmc default"] if n in ok),
                    next(iter(ok), None))
    ref = ok[ref_name]["value"] if ref_name else None
    sizes = next(((r["states"], r["transitions"]) for _, r in routes if "states" in r), ("", ""))
    rows = []
    for name, r in routes:
        v = r.get("value")
        if v is None:
            diff = ""
        elif name == ref_name:
            diff = "ref"
        else:
            diff = f"{abs(v / ref - 1):.1e}" if ref else ""
        rows.append([spec, sizes[0], sizes[1], name,
                     f"{r['build_s']:.2f}" if "build_s" in r else "",
                     f"{r['solve_s']:.2f}" if "solve_s" in r else "",
                     f"{v:.10g}" if v is not None else "", diff,
                     r.get("status", "") + (f" ({r['method']})" if r.get("method") else ""),
                     f"{r['balance']:.1e}" if "balance" in r else "",
                     f"{r['peak_gib']:.1f}" if "peak_gib" in r else ""])
    return rows


def bench_builds(spec, storm, repeat, timeout):
    """One row: the fastest cold build of ``repeat`` fresh processes, ctmc and Storm."""
    ours = [run_route([sys.executable, __file__, "--worker", spec, "none"], timeout) for _ in range(repeat)]
    theirs = []
    if storm:
        g = model_spec(spec)
        with tempfile.NamedTemporaryFile("w", suffix=".prism", delete=False) as f:
            f.write(g.prism_program())
        try:
            cmd = [str(storm), str(ROOT / "models" / "gallery" / "storm_worker.py"), f.name,
                   "--property", g.prism_property, "--constants", json.dumps(g.prism_constants), "--solver", "none"]
            theirs = [run_route(cmd, timeout) for _ in range(repeat)]
        finally:
            os.unlink(f.name)
    a = min((r["build_s"] for r in ours if "build_s" in r), default=None)
    b = min((r["build_s"] for r in theirs if "build_s" in r), default=None)
    engine = next((r.get("engine") for r in ours if "engine" in r), "")
    return [spec, next((r["states"] for r in ours if "states" in r), ""), engine,
            f"{a:.3f}" if a is not None else "", f"{b:.3f}" if b is not None else "",
            f"{b / a:.1f}x" if a and b else ""]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"name:size,... (default {DEFAULT_MODELS})")
    ap.add_argument("--methods", default="gmres", help="ctmc methods besides the default (comma-separated)")
    ap.add_argument("--storm", default=str(DEFAULT_STORM) if DEFAULT_STORM.exists() else "",
                    help="python of a venv with stormpy (default .venv-storm/bin/python if present; '' = no Storm)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per route (build + solve)")
    ap.add_argument("--build-repeat", type=int, default=0, metavar="K",
                    help="also time cold builds alone, fastest of K fresh processes (ctmc and Storm)")
    ap.add_argument("--worker", nargs=2, metavar=("SPEC", "METHOD"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(*args.worker)

    from ctmc.report import format_table

    import numpy
    import scipy
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    print(f"python {sys.version.split()[0]}, numpy {numpy.__version__}, scipy {scipy.__version__}, "
          f"commit {commit or '?'}, {os.cpu_count()} cpus, timeout {args.timeout:g} s per route", flush=True)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    rows = []
    for spec in args.models.split(","):
        t0 = time.perf_counter()
        rows += bench_model(spec.strip(), methods, args.storm, args.timeout)
        print(f"  {spec}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    print(format_table(rows, ["model", "states", "transitions", "route", "build s", "solve s", "measure",
                              "rel.diff", "status", "balance err", "peak GiB"]))
    if args.build_repeat > 0:
        builds = [bench_builds(spec.strip(), args.storm, args.build_repeat, args.timeout)
                  for spec in args.models.split(",")]
        print(f"\ncold builds alone, fastest of {args.build_repeat} fresh processes each")
        print(format_table(builds, ["model", "states", "ctmc engine", "ctmc build s", "storm build s",
                                    "storm / ctmc"]))


if __name__ == "__main__":
    main()
