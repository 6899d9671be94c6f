"""What one iteration of a stationary method costs, against its compiled kernel and the memory bandwidth.

    .venv/bin/python benchmarks/bench_kernels.py                          # the default models
    .venv/bin/python benchmarks/bench_kernels.py --models kanban:4,fms:5 --repeat 5
    .venv/bin/python benchmarks/bench_kernels.py --models kanban:5 --no-gmres

For each model (``name:size`` as in ``bench_gallery.py``), in one process,
every timing the fastest of ``--repeat`` rounds, the timings interleaved in
each round, the kernels' timings over ``k2 - k1`` calls in a row (the machine
is shared: compare the ratios of one run, not absolute times across runs):

* ``copy``: a numpy copy of the generator's stored values (``Q.data``, into
  an allocated array); its
  GB/s (bytes read + written per second) is the bandwidth the other rows are
  measured against;
* ``matvec``: :math:`Q^T x`, the product every residual check of the
  stationary methods uses (``op.apply(x, transpose=True)``);
* ``GS kernel``: one forward Gauss-Seidel sweep of the compiled kernel
  (``ctmc._relax.sweep``) on the matrix and vector ``gauss_seidel`` sweeps;
  ``pyamg GS`` the same sweep by pyamg's kernel (the one the sweeps and the
  tail polish used before), as a ratio to ours;
* ``gauss_seidel``, ``sor`` (omega 0.9), ``power``: one iteration of
  ``chain.stationary(method, maxiter=k, tol=1e-300)`` (a tolerance never
  met: the steady cost of a long run), from two runs of ``k1`` and ``k2``
  iterations, ``(t2 - t1) / (k2 - k1)`` (the set-up and the grading
  cancel); ``vs`` is the ratio to the GS kernel (sweeps) or the matvec (power);
* ``gmres``: one iteration of ``chain.stationary("gmres")`` in matvec units,
  ``total time / iterations / matvec`` (``solve`` counts only the Krylov
  solve, ``info["solve_seconds"]``: the pin search, polish and grading left out).

``GB/s`` of a product or sweep is the bytes it must move at least (values and
column indices once, the row pointers, the vectors) per second; ``of copy`` is
that against the copy's.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = "kanban:4,fms:5,polling:15"


def _model(spec):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_gallery import model_spec
    return model_spec(spec)


def timed(f):
    """Seconds of one call of ``f``, and its result."""
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def fastest(timings, repeat):
    """``{name: (fastest seconds, last result)}`` over ``repeat`` rounds, each round calling every
    ``timings[name]`` once in turn (interleaved, so a busy spell of the machine hits all alike)."""
    out = {}
    for _ in range(repeat):
        for name, f in timings.items():
            t, res = timed(f)
            out[name] = (min(t, out.get(name, (np.inf,))[0]), res)
    return out


def method_run(chain, method, k, **kw):
    """``chain.stationary(method, maxiter=k, tol=1e-300)``: a tolerance never met, so every
    iteration is an ordinary one."""
    return lambda: chain.stationary(method, maxiter=k, tol=1e-300, check=False, progress=False, **kw)


def measure(spec, repeat, k1, k2, gmres=True):
    """The rows of one model."""
    from pyamg import amg_core

    from ctmc._relax import sweep
    from ctmc.backends import operator_for
    from ctmc.kernels.sweeps import Sweeper

    g = _model(spec)
    chain = g.model().build(initial=g.initial)
    Q = chain.Q.tocsr()
    n, nnz = Q.shape[0], Q.nnz
    op = operator_for(chain, "scipy")
    x = np.full(n, 1.0 / n)
    m = k2 - k1                                      # calls per timing, as many as the methods' difference
    buf = np.empty_like(Q.data)                      # into memory already mapped: no page faults timed
    op.apply(x, transpose=True)                      # builds Q^T once
    local = Sweeper(op, np.ones(n, dtype=bool)).local
    y, b = x.copy(), np.zeros(n)
    methods = (("gauss_seidel", {}, "kernel"), ("sor", {"omega": 0.9}, "kernel"), ("power", {}, "matvec"))
    timings = {"copy": lambda: [np.copyto(buf, Q.data) for _ in range(m)],
               "matvec": lambda: [op.apply(x, transpose=True) for _ in range(m)],
               "kernel": lambda: [sweep(local, y, b) for _ in range(m)],
               "pyamg": lambda: [amg_core.gauss_seidel(local.indptr, local.indices, local.data, y, b, 0, n, 1)
                                 for _ in range(m)]}
    for method, kw, _ in methods:
        timings[(method, k1)] = method_run(chain, method, k1, **kw)
        timings[(method, k2)] = method_run(chain, method, k2, **kw)
    got = fastest(timings, repeat)
    t_copy, t_mv, t_gs, t_amg = (got[k][0] / m for k in ("copy", "matvec", "kernel", "pyamg"))
    copy_bw = 2 * Q.data.nbytes / t_copy
    idx = Q.indices.itemsize
    moved = nnz * (8 + idx) + (n + 1) * Q.indptr.itemsize + 2 * n * 8   # values, columns, rows, x, y
    moved_gs = local.nnz * (8 + local.indices.itemsize) + (n + 1) * local.indptr.itemsize + 3 * n * 8
    row = lambda what, t, entries, bytes_, vs="": [spec, n, nnz, what, f"{t * 1e3:.2f}",
                                                   f"{entries / t:.2e}" if entries and t > 0 else "",
                                                   f"{bytes_ / t / 1e9:.1f}" if bytes_ else "",
                                                   f"{bytes_ / t / copy_bw:.2f}" if bytes_ else "", vs]
    rows = [row("copy Q.data", t_copy, 0, 2 * Q.data.nbytes),
            row("matvec Q^T x", t_mv, nnz, moved, "1.00 matvec"),
            row("GS kernel (1 sweep)", t_gs, local.nnz, moved_gs, f"{t_gs / t_mv:.2f} matvec"),
            row("pyamg GS (1 sweep)", t_amg, local.nnz, moved_gs, f"{t_amg / t_gs:.2f} GS kernel")]
    base = {"kernel": t_gs, "matvec": t_mv}
    for method, kw, unit in methods:
        (t1, r1), (t2, r2) = got[(method, k1)], got[(method, k2)]
        if r2.status.value != "max_iterations":  # broke down (SOR diverging): no steady iteration to time
            rows.append(row(f"{method} iteration", np.nan, 0, 0, r2.status.value))
            continue
        t = max(t2 - t1, 0.0) / max(r2.iterations - r1.iterations, 1)
        entries = local.nnz if unit == "kernel" else nnz
        rows.append(row(f"{method} iteration", t, entries, 0, f"{t / base[unit]:.2f} {unit}"))
    if gmres:
        t0 = time.perf_counter()
        r = chain.stationary("gmres", check=False)
        total = time.perf_counter() - t0
        its = max(r.iterations, 1)
        solve = r.info.get("solve_seconds", np.nan)
        rows.append(row(f"gmres iteration ({its} its)", total / its, 0, 0,
                        f"{total / its / t_mv:.2f} matvec (solve {solve / its / t_mv:.2f})"))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"name:size,... (default {DEFAULT_MODELS})")
    ap.add_argument("--repeat", type=int, default=5, help="rounds of every timing (the fastest is kept)")
    ap.add_argument("--k", default="10,110", help="k1,k2: the two iteration counts of a method's runs")
    ap.add_argument("--no-gmres", action="store_true", help="leave out the GMRES row")
    args = ap.parse_args(argv)
    k1, k2 = (int(v) for v in args.k.split(","))
    from ctmc.report import format_table
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    print(f"commit {commit or '?'}, fastest of {args.repeat} per timing, methods at k = {k1}, {k2}",
          flush=True)
    rows = []
    for spec in args.models.split(","):
        rows += measure(spec, args.repeat, k1, k2, gmres=not args.no_gmres)
        print(f"  {spec} done", file=sys.stderr, flush=True)
    print(format_table(rows, ["model", "states", "entries", "what", "ms", "entries/s", "GB/s", "of copy",
                              "vs"]))


if __name__ == "__main__":
    main()
