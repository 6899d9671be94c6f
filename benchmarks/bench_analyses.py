"""ctmc and Storm side by side on the gallery's non-stationary measures: a hitting-time reward and a transient law.

    .venv/bin/python benchmarks/bench_analyses.py                    # the issue's sizes, with Storm
    .venv/bin/python benchmarks/bench_analyses.py --models embedded:40,peer2peer:4 --storm ""

The two models of PRISM's ``prism-examples/ctmcs`` whose published measures
are not stationary (:mod:`ctmc.models.gallery`):

* ``embedded:MAX_COUNT``: ``R{"up"}=? [ F "down" ]``, the expected hours up
  before the system first goes down, ``chain.hitting_times(down, reward=up/3600)``
  (:mod:`ctmc.passage`); MAX_COUNT=4000 is the issue's 3.4 M states;
* ``peer2peer:K`` (N = 4 clients): ``P=? [ true U<=1.5 "done" ]``, the
  transient probability of the absorbing done state at t = 1.5,
  ``chain.transient(initial, 1.5)`` (uniformisation, :mod:`ctmc.transient`);
  K=5 is the issue's 1.05 M states.

Each route runs in its own subprocess (a cold build, first in its process;
a route past ``--timeout`` seconds is reported as ``timeout``):

* ``ctmc default``: ``g.chain()`` then ``g.solve(chain)`` (method ``auto``);
* ``ctmc <route>`` for each of ``--routes``: ``stop`` builds the chain that
  Storm builds for the property (embedded: nothing explored beyond "down",
  ``Embedded(MAX_COUNT, stop_at_down=True)``), and ``key=value;...`` are
  options of the analysis (``method=bicgstab;preconditioner=sgs;tol=1e-12``,
  ``eps=1e-13``), e.g. ``stop/tol=1e-12``; by default embedded's reference is
  BiCGStab at ``tol=1e-12`` (another Krylov method than the default GMRES);
  peer2peer's reference is ``rtol=0``, uniformisation summed to the end of the
  1e-300 Poisson window (635 steps, the default before the adaptive cut), and
  its extra route ``eps=1e-13`` cuts at the Poisson mass a 1-norm needs (171
  steps; small probabilities lose their relative accuracy). The default stops
  where every probability of the law is within ``rtol = 1e-13`` of itself
  (:func:`ctmc.transient.uniformize_operator`; 247 steps here);
* ``baseline default`` (``--baseline DIR``): the default route with the ``ctmc`` of the
  source tree ``DIR`` (a ``git archive`` of another commit, extensions built in place), the
  gallery models included, for a before/after ratio in the same run;
* Storm (``--storm``: stormpy's python, ``scripts/storm_venv.sh``): the
  generated PRISM program (``.prism_program()``) through
  ``models/gallery/storm_worker.py``, with ``Environment()`` (Storm's
  command-line defaults) and with the gmm++ solver; Storm's builder is given
  the property, so it stops exploring at the property's target (embedded:
  2.5 M states of the 3.4 M).

``rel.diff`` is ``|value / reference - 1|``, the reference being the first
successful route with a ``tol=`` option (a tightly converged solve), else the
default route. ``bound`` is the result's ``error_bound`` (relative for a
hitting time, absolute on the law's 1-norm for a transient law),
``status`` ctmc's :class:`ctmc.Status` (Storm reports ``done``), ``it./steps`` the
Krylov iterations (embedded) or the uniformisation steps (peer2peer). The last
table puts ctmc's build + solve over Storm's faster configuration's, per model.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_gallery import ROOT, run_route, storm_routes  # noqa: E402  (written once, there)

DEFAULT_MODELS = "embedded:4000,peer2peer:5"
DEFAULT_ROUTES = {"embedded": "stop,method=bicgstab;preconditioner=sgs;tol=1e-12", "peer2peer": "rtol=0,eps=1e-13"}
DEFAULT_STORM = ROOT / ".venv-storm" / "bin" / "python"


def _model(spec: str, stop: bool = False):
    from ctmc.models.gallery import GALLERY, parse_spec
    if stop:
        name, _, size = spec.partition(":")
        return GALLERY[name](int(size), stop_at_down=True)
    return parse_spec(spec)


def _parse_route(route: str):
    """``(stop, options)`` of a route ``[stop][/]key=value;...``."""
    head, _, rest = route.partition("/")
    stop = head == "stop"
    opts = rest if stop else (route if route not in ("default", "stop") else "")
    kw = {}
    for item in (x for x in opts.split(";") if x):
        k, v = item.split("=")
        for kind in (int, float, str):
            try:
                kw[k] = kind(v)
                break
            except ValueError:
                continue
    return stop, kw


def worker(spec: str, route: str) -> None:
    """One ctmc route: cold build, the measure's analysis; one JSON line on stdout."""
    import resource

    import ctmc
    stop, kw = _parse_route(route)
    g = _model(spec, stop)
    t0 = time.perf_counter()
    chain = g.chain()
    build_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = g.solve(chain, **kw)
    value = g.measure(res, chain)
    solve_s = time.perf_counter() - t0
    print("@@" + json.dumps({"states": chain.n_states, "transitions": chain.n_transitions, "build_s": build_s,
                             "solve_s": solve_s, "value": value, "status": res.status.value, "method": res.method,
                             "bound": float(res.error_bound),
                             "iterations": int(res.info.get("uniformization_steps") or res.iterations),
                             "peak_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20,
                             "ctmc": ctmc.__version__}), flush=True)


def _at_baseline(cmd, timeout, baseline):
    """``run_route`` with the ``ctmc`` package of the tree ``baseline`` first on the path."""
    import os
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(baseline)
    try:
        return run_route(cmd, timeout)
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def bench_model(spec, routes, storm, timeout, baseline=""):
    """Rows of one model (ctmc routes, the baseline's default, then Storm's) and the summary row."""
    out = []
    for route in ["default"] + [r for r in routes if r and r != "default"]:
        out.append((f"ctmc {route}", run_route([sys.executable, __file__, "--worker", spec, route], timeout)))
    if baseline:
        out.append(("baseline default",
                    _at_baseline([sys.executable, __file__, "--worker", spec, "default"], timeout, baseline)))
    if storm:
        out += storm_routes(_model(spec), storm, timeout)
    ok = {name: r for name, r in out if r.get("status") == "success"}
    ref_name = next((n for n in ok if "tol=" in n), "ctmc default" if "ctmc default" in ok else None)
    ref = ok[ref_name]["value"] if ref_name else None
    rows = []
    for name, r in out:
        v = r.get("value")
        diff = "" if v is None else ("ref" if name == ref_name else (f"{abs(v / ref - 1):.1e}" if ref else ""))
        rows.append([spec, r.get("states", ""), r.get("transitions", ""), name,
                     f"{r['build_s']:.2f}" if "build_s" in r else "", f"{r['solve_s']:.2f}" if "solve_s" in r else "",
                     f"{v:.12g}" if v is not None else "", diff,
                     r.get("status", "") + (f" ({r['method']})" if r.get("method") else ""),
                     str(r.get("iterations", "")), f"{r['bound']:.1e}" if "bound" in r else "",
                     f"{r['peak_gib']:.1f}" if "peak_gib" in r else ""])
    total = {name: r["build_s"] + r["solve_s"] for name, r in out if "build_s" in r and "solve_s" in r}
    storm_best = min((t for n, t in total.items() if n.startswith("storm")), default=None)
    return rows, [spec] + [f"{total[n]:.2f}" if n in total else "" for n in ("ctmc default",)] + \
        [f"{storm_best:.2f}" if storm_best else "",
         f"{total['ctmc default'] / storm_best:.2f}" if storm_best and "ctmc default" in total else "",
         min(((n, t) for n, t in total.items() if n.startswith("ctmc")), key=lambda x: x[1], default=("", 0))[0],
         _speedup(dict(out), "baseline default", "ctmc default")]


def _speedup(res, before, after):
    """``before``'s solve time over ``after``'s, when both ran."""
    a, b = res.get(before, {}), res.get(after, {})
    return f"{a['solve_s'] / b['solve_s']:.2f}" if "solve_s" in a and b.get("solve_s") else ""


def _table(header, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda r: "  ".join(str(x).rjust(w) if i in (1, 2, 4, 5, 6) else str(x).ljust(w)  # noqa: E731
                               for i, (x, w) in enumerate(zip(r, widths)))
    print(line(header))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"name:size,... (default {DEFAULT_MODELS})")
    ap.add_argument("--routes", default=None,
                    help="ctmc routes besides the default, comma-separated (default per model: "
                         + "; ".join(f"{k}: {v}" for k, v in DEFAULT_ROUTES.items()) + ")")
    ap.add_argument("--storm", default=str(DEFAULT_STORM) if DEFAULT_STORM.exists() else "",
                    help="python of a venv with stormpy ('' = no Storm)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per route (build + solve)")
    ap.add_argument("--baseline", default="",
                    help="a source tree of ctmc with its extensions built (e.g. a git archive of an older "
                         "commit): its default route runs too, with that tree first on PYTHONPATH")
    ap.add_argument("--worker", nargs=2, metavar=("SPEC", "ROUTE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(*args.worker)
    rows, summary = [], []
    for spec in args.models.split(","):
        routes = (args.routes if args.routes is not None else DEFAULT_ROUTES.get(spec.split(":")[0], "")).split(",")
        r, s = bench_model(spec, routes, args.storm, args.timeout, args.baseline)
        rows += r
        summary.append(s)
    _table(["model", "states", "transitions", "route", "build s", "solve s", "value", "rel.diff", "status",
            "it./steps", "bound", "peak GiB"], rows)
    print()
    _table(["model", "ctmc default build+solve s", "Storm best build+solve s", "ratio", "fastest ctmc route",
            "solve: baseline / ctmc default"], summary)


if __name__ == "__main__":
    main()
