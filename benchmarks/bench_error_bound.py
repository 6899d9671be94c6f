"""What the stationary error bound costs: its seconds against the rest of the solve, same call.

    .venv/bin/python benchmarks/bench_error_bound.py                  # jsq:1000, hysteresis:8000 and the gallery
    .venv/bin/python benchmarks/bench_error_bound.py --cases jsq:300 --repeat 3

Every stationary result carries ``error_bound`` (``ctmc.stationary.error_bound``):
direct solves reuse their factors for the return-time system (one more pair of
triangular solves), iterative methods solve it (BiCGStab refined on its true
residual or stopped where it brackets the mean times within ``BOUND_BRACKET``, then
GMRES, then sparse LU up to 5000 states) or estimate the error by
one correction solve. The time spent on it is recorded in
``info["error_bound_seconds"]``; the table prints it beside the rest of the call
(``overhead`` = bound / rest), for the fastest of ``--repeat`` calls. The
machine is shared and loaded, so a wall time waits for a core: the CPU seconds
of the call (``call cpu``) and of the iterative bound (``bound cpu``,
``iterative_bound`` timed by a wrapper; 0 for direct solves, whose bound is a
pair of triangular solves) give ``cpu overhead``, the steadier figure.
``rt solver`` is the return-time solver that gave the bound and ``rt its`` the
iterations of each of its solves. The issue's target: at most 10-15 % of the
solve on the gallery.

With ``--base PATH`` (a tree of another commit, its C extensions built in place), each
case runs in fresh processes, one per tree, the trees taking turns for ``--repeat``
rounds; every process builds the chain, makes one warm-up call (first-touch page
faults, the operator's transposes) and times one more; the round of least CPU of
each tree is kept. The table then puts the two trees side by side: the CPU seconds
of the whole call and of ``iterative_bound``, the bound's share of the rest of the
call (``share`` = bound / (call - bound), in CPU seconds; ``wall share`` the same
in wall seconds, ``info["error_bound_seconds"]``), and branch over base for the
call and the bound (``call ratio``, ``bound ratio``, CPU). Measure this way on a
shared machine: the ratios of one run, not the absolute seconds, are what compare,
and CPU seconds wait less for a core than wall seconds do.

Where the return times were solved ahead, on a thread beside the stationary solve
(``ctmc.kernels.ahead``; ``info["return_time_ahead"]``), ``bound cpu`` adds that
thread's own CPU seconds (``info["return_time_ahead_cpu"]``, also shown alone as
``ahead cpu``): the share in CPU seconds is then still the bound's work over the
rest (roughly: the thread's CPU while the caller waited for it is counted twice,
that of its kernels' second OpenMP thread not at all), while ``wall share`` is
what the caller waited for it (the thread's solve overlaps the stationary one).

With ``--compare``, a second table times the return-time bound alone on the
same operator and pin, interleaved ``--repeat`` times (fastest kept): the
solve the bound used before this change (one GMRES(50) solve with the
Gauss-Seidel preconditioner to a backward error of 1e-6, ``RETURN_GMRES``)
against the default (BiCGStab stopped at the bracket ``BOUND_BRACKET`` or refined on its
true residual; without ``error_tol``, the bracket always suffices), with each one's
CPU seconds, iterations and bound over estimate.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

from bench_auto import cases  # noqa: E402  (the same cases and option as bench_auto)

import ctmc.stationary  # noqa: E402
from ctmc.backends import operator_for  # noqa: E402
from ctmc.kernels.classes import closed_classes  # noqa: E402
from ctmc.kernels.evidence import RETURN_GMRES, return_time_bound  # noqa: E402
try:   # --base may be a tree from before the bracket stop
    from ctmc.kernels.evidence import BOUND_BRACKET  # noqa: E402
except ImportError:
    BOUND_BRACKET = None
from ctmc.report import format_table  # noqa: E402

_CPU = []


def _timed(f):
    """``f`` with the CPU seconds of each call appended to ``_CPU``."""
    def run(*args, **kwargs):
        c0 = time.process_time()
        try:
            return f(*args, **kwargs)
        finally:
            _CPU.append(time.process_time() - c0)
    return run

def _time_the_bound():
    """Time every call of the bound: ``stationary`` reaches ``iterative_bound`` through
    :func:`ctmc.kernels.ahead.bound_ahead`, which looks it up in its own module."""
    import ctmc.kernels.ahead as ahead
    ahead.iterative_bound = _timed(ahead.iterative_bound)


DEFAULT = "jsq:1000,hysteresis:8000,kanban:3,fms:5,cluster:64,polling:15,tandem:511"


def main(argv=None):
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--repeat", type=int, default=1, help="calls per case, the fastest kept (default 1)")
    p.add_argument("--compare", action="store_true", help="the return-time solve before and after, same run")
    p.add_argument("--base", default=None, help="another tree to run side by side (fresh processes, turns)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args, rest = p.parse_known_args(argv)
    if args.child:
        return child(rest)
    if args.base:
        return side_by_side(rest, args.base, args.repeat)
    _time_the_bound()
    rows, compared = [], []
    for spec, chain, _ in cases(rest, __doc__.splitlines()[0], DEFAULT):
        runs = []
        for _ in range(max(1, args.repeat)):
            _CPU.clear()
            t0, c0 = time.perf_counter(), time.process_time()
            res = chain.stationary(check=False)
            runs.append((time.perf_counter() - t0, time.process_time() - c0,
                         sum(_CPU) + res.info.get("return_time_ahead_cpu", 0.0), res))
        wall, cpu, bcpu, res = min(runs, key=lambda r: r[1])
        tb = res.info.get("error_bound_seconds", float("nan"))
        rows.append([spec, chain.n_states, res.method, res.status.value, f"{wall:.2f}", f"{tb:.3f}",
                     f"{100 * tb / max(wall - tb, 1e-12):.0f} %", f"{cpu:.2f}", f"{bcpu:.3f}",
                     f"{100 * bcpu / max(cpu - bcpu, 1e-12):.0f} %", f"{res.error_bound:.1e}",
                     res.info.get("error_bound_kind", ""), res.info.get("return_time_solver", ""),
                     "+".join(str(i) for i in res.info.get("return_time_iterations", []))])
        if args.compare and "return_time_solver" in res.info:
            compared.append(compare(spec, chain, res, args.repeat))
    print(format_table(rows, ["case", "states", "method", "status", "call s", "bound s", "overhead", "call cpu",
                              "bound cpu", "cpu overhead", "error_bound", "kind", "rt solver", "rt its"]))
    if compared:
        print()
        print(format_table(compared, ["case", "before cpu", "its", "bound/est", "after cpu", "its", "bound/est",
                                      "after/before"]))


def compare(spec, chain, res, repeat):
    """The return-time bound of ``res``'s pin by the solve used before (GMRES) and now, interleaved."""
    op = operator_for(chain, "scipy")
    support, pin = closed_classes(op, None, limit=1)[0], res.info["return_time_state"]
    best = {}
    for _ in range(max(1, repeat)):
        for name, kw in (("before", {"specs": [RETURN_GMRES], "steps": 1, "target": 0.99}), ("after", {"bracket": BOUND_BRACKET})):
            info = {}
            c0 = time.process_time()
            bound, est = return_time_bound(op, support, pin, info=info, **kw)
            cpu = time.process_time() - c0
            if name not in best or cpu < best[name][0]:
                best[name] = (cpu, "+".join(map(str, info["return_time_iterations"])), bound / est)
    (cb, ib, rb), (ca, ia, ra) = best["before"], best["after"]
    return [spec, f"{cb:.3f}", ib, f"{rb:.4f}", f"{ca:.3f}", ia, f"{ra:.4f}", f"{ca / cb:.2f}"]


def child(rest):
    """One case in this process: a warm-up call, then one timed; a JSON line on stdout."""
    _time_the_bound()
    for spec, chain, _ in cases(rest, __doc__.splitlines()[0], DEFAULT):
        chain.stationary(check=False)
        _CPU.clear()
        t0, c0 = time.perf_counter(), time.process_time()
        res = chain.stationary(check=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(json.dumps({"tree": os.path.dirname(os.path.dirname(ctmc.stationary.__file__)), "spec": spec, "states": chain.n_states, "wall": wall, "cpu": cpu,
                          "bound": res.info.get("error_bound_seconds", float("nan")),
                          "bound_cpu": sum(_CPU) + res.info.get("return_time_ahead_cpu", 0.0),
                          "ahead_cpu": res.info.get("return_time_ahead_cpu", 0.0),
                          "status": res.status.value, "method": res.method, "error_bound": res.error_bound,
                          "kind": res.info.get("error_bound_kind", ""), "its": res.iterations,
                          "rt": "+".join(str(i) for i in res.info.get("return_time_iterations", []))}))


def side_by_side(rest, base, repeat):
    """Each case in fresh processes of this tree and of ``base``, taking turns; the fastest of each kept."""
    specs = cases_of(rest)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"branch": here, "base": os.path.abspath(base)}
    rows = []
    for spec in specs:
        best = {}
        for k in range(max(1, repeat)):
            for name in (list(trees) if k % 2 == 0 else list(trees)[::-1]):
                env = dict(os.environ, PYTHONPATH=trees[name])
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "--cases", spec],
                                     env=env, capture_output=True, text=True, check=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                if os.path.realpath(r["tree"]) != os.path.realpath(trees[name]):
                    raise RuntimeError(f"{name}: imported ctmc from {r['tree']}, not {trees[name]}")
                if name not in best or r["cpu"] < best[name]["cpu"]:
                    best[name] = r
        b, a = best["base"], best["branch"]
        row = [spec, a["states"], a["method"]]
        for r in (b, a):
            row += [f"{r['cpu']:.2f}", f"{r['bound_cpu']:.3f}", f"{r.get('ahead_cpu', 0.0):.3f}",
                    f"{100 * r['bound_cpu'] / max(r['cpu'] - r['bound_cpu'], 1e-12):.0f} %",
                    f"{100 * r['bound'] / max(r['wall'] - r['bound'], 1e-12):.0f} %", f"{r['error_bound']:.1e}", r["rt"]]
        row += [f"{a['cpu'] / b['cpu']:.2f}", f"{a['bound_cpu'] / b['bound_cpu']:.2f}", a["status"]]
        rows.append(row)
        print(f"# {spec} done", file=sys.stderr, flush=True)
    print(format_table(rows, ["case", "states", "method", "base cpu s", "bound cpu", "ahead cpu", "share",
                              "wall share", "error_bound", "rt its", "branch cpu s", "bound cpu", "ahead cpu", "share",
                              "wall share", "error_bound", "rt its", "call ratio", "bound ratio", "status"]))


def cases_of(rest):
    p = argparse.ArgumentParser()
    p.add_argument("--cases", default=DEFAULT)
    return p.parse_args(rest).cases.split(",")


if __name__ == "__main__":
    main()
