"""Peak memory per transition of build and of build + default solve, on the gallery.

    .venv/bin/python benchmarks/bench_memory.py                                   # the gallery's default sizes
    .venv/bin/python benchmarks/bench_memory.py --base /tmp/base                  # and a base tree, same run
    .venv/bin/python benchmarks/bench_memory.py --models kanban:6 --repeat 1      # one large instance
    .venv/bin/python benchmarks/bench_memory.py --inventory kanban:4              # where the bytes go
    .venv/bin/python benchmarks/bench_memory.py --models kanban:6 --repeat 1 --options tol=1e-12,error_tol=1e-9

Each measurement runs in a fresh subprocess: ``Model.build`` (the gallery's
published model, ``ctmc.models.gallery.parse_spec(spec).chain()``), then the
default ``chain.stationary()``. The process's peak resident set
(``ru_maxrss``) is read after the build and after the solve; the resident set
after the imports (the interpreter, numpy, scipy: about 0.1 GiB) is
subtracted (read after a warm-up solve of kanban t=1, which imports what a
solve imports on first use), and the rest is divided by the chain's
transitions (off-diagonal entries of ``Q``). For scale: the generator itself in CSR takes 12 bytes per
stored entry (float64 value, int32 column index) plus the row pointers.

With ``--base PATH`` every model is also run with ``PYTHONPATH=PATH`` (a copy
of the library at another commit, its C extension built in place:
``git archive BASE | tar -x -C PATH && python setup.py build_ext --inplace``),
the two interleaved ``--repeat`` times, the smallest peak and time kept.

``--inventory SPEC`` prints, in one process under :mod:`tracemalloc` (numpy
reports its buffers to it), the bytes allocated and still held after each stage
of the default solve and the peak within each stage, per transition: which
stage holds what. With ``--rss`` the same stages are measured by the resident
set (``VmRSS``, and ``VmHWM`` reset at each stage through
``/proc/self/clear_refs``): what the machine sees, C extensions included.
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
DEFAULT_MODELS = "kanban:3,polling:15,fms:5,cluster:64,tandem:511"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def parse_options(text: str) -> dict:
    """``"tol=1e-12,error_tol=1e-9,method=gmres"`` as keyword arguments (numbers where they parse)."""
    out = {}
    for item in filter(None, (text or "").split(",")):
        k, _, v = item.partition("=")
        try:
            out[k.strip()] = int(v) if v.strip().isdigit() else float(v)
        except ValueError:
            out[k.strip()] = v.strip()
    return out


def set_ahead(mode: str) -> None:
    """The error bound's return times beside the solve: ``rule`` (the plan's, the default), ``on`` (wherever
    the thread can pay: no peak rule) or ``off`` (after the solve, never beside it); ``short`` and
    ``short-off``: the plan's rule and off, as where memory is short (``COPY_SHARE`` 0: no copy of
    ``Q``; the polish and level sweeps from ``Q``'s rows)."""
    from ctmc.kernels import ahead, plan
    if mode.startswith("short"):
        plan.COPY_SHARE = 0.0
    if mode == "on":
        plan.PEAK_BYTES_PER_TRANSITION = float("inf")
    elif mode.endswith("off"):
        ahead.AHEAD_STATES = 1 << 62


def worker(spec: str, options: str = "", ahead: str = "rule") -> None:
    """Build and solve one model; print a JSON line of peaks (bytes) and times."""
    import resource

    import numpy as np  # noqa: F401  (imported before the baseline is read)
    import scipy.sparse  # noqa: F401
    import ctmc  # noqa: F401
    from ctmc.models.gallery import parse_spec

    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    set_ahead(ahead)
    parse_spec("kanban:1").chain().stationary()     # the modules a solve imports on first use
    base = _rss_bytes()
    t = time.perf_counter()
    chain = parse_spec(spec).chain()
    build_s, build_peak = time.perf_counter() - t, peak()
    t, c = time.perf_counter(), time.process_time()
    res = chain.stationary(check=False, **parse_options(options))
    solve_s, solve_cpu, solve_peak = time.perf_counter() - t, time.process_time() - c, peak()
    print("@@" + json.dumps({"states": chain.n_states, "transitions": chain.n_transitions, "nnz": chain.Q.nnz,
                             "base": base, "build_peak": build_peak, "solve_peak": solve_peak,
                             "build_s": build_s, "solve_s": solve_s, "solve_cpu": solve_cpu,
                             "ahead": bool(res.info.get("return_time_ahead")), "status": res.status.value,
                             "method": str(getattr(res, "method", "")), "iterations": int(res.iterations),
                             "bound_s": float(res.info.get("error_bound_seconds", 0.0)),
                             "restart": res.info.get("auto", {}).get("probe_restart"),
                             "memory_plan": res.info.get("auto", {}).get("memory_plan"),
                             "polish": res.info.get("polish_stop"),
                             "return_time": {k: res.info[k] for k in ("return_time_solver", "return_time_levels",
                                                                      "return_time_iterations") if k in res.info},
                             "bound": float(res.error_bound)}))


def run_worker(spec: str, tree, timeout: float, options: str = "", ahead: str = "rule") -> dict:
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = str(tree) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    try:
        cmd = [sys.executable, __file__, "--worker", spec, "--options", options, "--ahead", ahead]
        p = subprocess.run(cmd,
                           capture_output=True, text=True,
                           timeout=timeout, env=env, cwd="/tmp" if tree else None)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    for line in p.stdout.splitlines():
        if line.startswith("@@"):
            return json.loads(line[2:])
    return {"error": (p.stderr.strip().splitlines() or ["no output"])[-1][:60]}


# --- the inventory ---------------------------------------------------------------------------------------
#: the stages of the default solve, as (module, attribute) of the functions wrapped
STAGES = [
    ("ctmc.backends.scipy_backend", "operator"),
    ("ctmc.kernels.classes", "closed_classes"),
    ("ctmc.stationary", "sole_closed_class"),
    ("ctmc.stationary", "structure_facts"),
    ("ctmc.kernels.classes", "walk_pin"),
    ("ctmc.stationary", "walk_pin"),
    ("ctmc.backends.scipy_backend.ScipyOperator", "system"),
    ("ctmc.backends.scipy_backend.ScipySystem", "_solve_krylov"),
    ("ctmc.backends.scipy_backend", "ssor1"),
    ("ctmc.backends.scipy_backend", "masked_transpose"),
    ("ctmc.krylov", "gmres"),
    ("ctmc.stationary", "_polish"),
    ("ctmc.kernels.sweeps.Sweeper", "__init__"),
    ("ctmc.kernels.levels", "_structured"),
    ("ctmc.kernels.levels", "level_chain"),
    ("ctmc.kernels.levels", "level_flows"),
    ("ctmc.kernels.levels.LevelSystem", "__init__"),
    ("ctmc.kernels.levels.LevelSystem", "solve"),
    ("ctmc.stationary", "stationary_evidence"),
    ("ctmc.stationary", "iterative_bound"),
    ("ctmc.backends.scipy_backend.ScipySystem", "close"),
    ("ctmc.krylov._Vectors", "update"),          # (each BiCGStab step, either thread: a sample)
]


class _RSS:
    """The resident set as a tracemalloc look-alike: (now, peak since the last reset), from
    /proc/self/status (VmRSS, VmHWM); the peak is reset through /proc/self/clear_refs. It sees
    what tracemalloc does not (C extensions' own allocations, the allocator's slack)."""

    @staticmethod
    def _status():
        out = {}
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
        return out

    def start(self):
        self.base = self._status()["VmRSS"]

    def get_traced_memory(self):
        st = self._status()
        return st["VmRSS"] - self.base, st["VmHWM"] - self.base

    def reset_peak(self):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")


def inventory(spec: str, rss: bool = False, ahead: bool = True, top: int = 14) -> None:
    import importlib
    import threading
    import tracemalloc
    snapshots = not rss
    if not ahead:
        from ctmc.kernels import ahead as _ahead
        _ahead.AHEAD_STATES = 1 << 62            # the bound's return times after the solve, not beside it
    if rss:
        from ctmc.models.gallery import parse_spec as _warm
        _warm("kanban:1").chain().stationary()     # the modules a solve imports on first use
        tracemalloc = _RSS()

    import numpy as np  # noqa: F401
    from ctmc.models.gallery import parse_spec

    rows = []
    peaks = []                   # the running peak of each open stage (an inner stage resets the counter)

    main = threading.main_thread()
    best = [0, None]             # the largest sampled traced size and what was alive then (tracemalloc only)

    def sample():
        now = tracemalloc.get_traced_memory()[0]
        if snapshots and now > 1.02 * best[0]:
            best[:] = now, tracemalloc.take_snapshot()

    def wrap(label, fn):
        def inner(*a, **k):
            sample()
            if label.endswith(".update"):                  # a BiCGStab step: a sample, not a stage
                return fn(*a, **k)
            if threading.current_thread() is not main:     # another thread's stage: no nesting, no peak
                before = tracemalloc.get_traced_memory()[0]
                try:
                    return fn(*a, **k)
                finally:
                    sample()
                    now = tracemalloc.get_traced_memory()[0]
                    rows.append((0, f"[thread] {label}", before, now, float("nan")))
            before, pk = tracemalloc.get_traced_memory()
            if peaks:
                peaks[-1] = max(peaks[-1], pk)
            tracemalloc.reset_peak()
            peaks.append(0)
            try:
                return fn(*a, **k)
            finally:
                sample()
                now, pk = tracemalloc.get_traced_memory()
                pk = max(pk, peaks.pop())
                rows.append((len(peaks), label, before, now, pk))
                if peaks:
                    peaks[-1] = max(peaks[-1], pk)
        return inner

    tracemalloc.start()
    t = time.perf_counter()
    chain = parse_spec(spec).chain()
    now, pk = tracemalloc.get_traced_memory()
    rows.append((0, "Model.build", 0, now, pk))
    for mod, attr in STAGES:
        parts = mod.split(".")
        try:
            obj = importlib.import_module(mod)
        except ImportError:
            obj = importlib.import_module(".".join(parts[:-1]))
            obj = getattr(obj, parts[-1])
        fn = getattr(obj, attr, None)
        if fn is not None:
            setattr(obj, attr, wrap(f"{parts[-1]}.{attr}", fn))
    tracemalloc.reset_peak()
    res = chain.stationary()
    now, pk = tracemalloc.get_traced_memory()
    rows.append((0, "stationary() returned", rows[0][3], now, max([pk] + [r[4] for r in rows[1:]])))
    nt = chain.n_transitions
    print(f"{spec}: {chain.n_states} states, {nt} transitions, {chain.Q.nnz} stored entries; "
          f"{time.perf_counter() - t:.1f} s under tracemalloc; {res.status.value}")
    print(f"{'stage':<44} {'held before':>12} {'held after':>11} {'peak in stage':>14}   (bytes per transition)")
    for d, label, before, now, pk in rows:
        print(f"{'  ' * d + label:<44} {before / nt:>12.1f} {now / nt:>11.1f} {pk / nt:>14.1f}")
    if best[1] is not None:
        vec = 8.0 * chain.n_states / nt
        print(f"alive at the largest sampled point, {best[0] / nt:.1f} B/tr (a float64 vector is "
              f"{vec:.2f} B/tr; by the line that allocated it):")
        for st in best[1].statistics("lineno")[:top]:
            f = st.traceback[0]
            where = f"{Path(f.filename).parent.name}/{Path(f.filename).name}:{f.lineno}"
            nv = st.size / (8.0 * chain.n_states)
            print(f"  {where:<40} {st.size / nt:>6.1f} B/tr  {nv:>5.2f} vectors  "
                  f"{st.count:>4} blocks")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS)
    ap.add_argument("--base", default=None, help="a base tree run with PYTHONPATH (side by side)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--inventory", default=None)
    ap.add_argument("--rss", action="store_true", help="the inventory by the resident set, not tracemalloc")
    ap.add_argument("--no-ahead", action="store_true",
                    help="the inventory with the error bound's return times after the solve, not beside it")
    ap.add_argument("--ahead", default="rule", choices=("rule", "on", "off", "short", "short-off"),
                    help="the return times beside the solve by the plan's rule, wherever they can pay, or never; "
                         "short: as where memory is short (both trees)")
    ap.add_argument("--options", default="", help="keyword options of stationary: tol=1e-12,error_tol=1e-9")
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a.worker, a.options, a.ahead)
    if a.inventory:
        return inventory(a.inventory, a.rss, not a.no_ahead)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "ctmc"], capture_output=True,
                           text=True).stdout.strip()
    print(f"commit {head}{' (ctmc/ modified)' if dirty else ''}; base: {a.base or '-'}; "
          f"options: {a.options or '-'}; load {os.getloadavg()[0]:.1f}")
    trees = [("base", a.base)] if a.base else []
    trees.append(("now", None))
    cols = ["model", "states", "transitions", "tree", "build s", "solve s", "solve cpu", "build B/tr",
            "total B/tr", "peak GiB", "status", "bound"]
    out, printed = [], False
    for spec in a.models.split(","):
        best = {}
        for _ in range(a.repeat):
            for name, tree in trees:
                r = run_worker(spec, tree, a.timeout, a.options, a.ahead)
                b = best.get(name)
                if "error" in r:
                    best.setdefault(name, r)
                    continue
                if b is None or "error" in b:
                    best[name] = r
                else:
                    for k in ("build_peak", "solve_peak", "build_s", "solve_s", "solve_cpu"):
                        b[k] = min(b[k], r[k])
        for name, _ in trees:
            r = best[name]
            if "error" in r:
                out.append([spec, "", "", name, "", "", "", "", "", "", r["error"], ""])
                continue
            nt = r["transitions"]
            out.append([spec, r["states"], nt, name, f"{r['build_s']:.2f}", f"{r['solve_s']:.2f}",
                        f"{r['solve_cpu']:.2f}" if "solve_cpu" in r else "",
                        f"{(r['build_peak'] - r['base']) / nt:.1f}", f"{(r['solve_peak'] - r['base']) / nt:.1f}",
                        f"{r['solve_peak'] / 2 ** 30:.2f}",
                        f"{r['status']} ({r['method']}{', ahead' if r.get('ahead') else ''})", f"{r['bound']:.1e}"])
        print_table(cols, out, header=not printed)
        printed, out = True, []


WIDTHS = (12, 9, 11, 4, 7, 8, 9, 10, 10, 8, 28, 7)


def print_table(cols, rows, header=True):
    w = [max(WIDTHS[i], len(str(c)), *(len(str(r[i])) for r in rows)) for i, c in enumerate(cols)]
    if header:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(cols)))
    for r in rows:
        print("  ".join(str(v).rjust(w[i]) if i else str(v).ljust(w[i]) for i, v in enumerate(r)))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
