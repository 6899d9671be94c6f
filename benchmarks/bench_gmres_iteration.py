"""What one GMRES + symmetric Gauss-Seidel iteration costs, in matrix-vector products: compiled kernels against their fallbacks.

    .venv/bin/python benchmarks/bench_gmres_iteration.py                      # kanban:3,kanban:4
    .venv/bin/python benchmarks/bench_gmres_iteration.py --models kanban:3,kanban:4 --repeat 3
    .venv/bin/python benchmarks/bench_gmres_iteration.py --models kanban:4,fms:5 --stationary

For each gallery model (``benchmarks/bench_gallery.py::model_spec``), on the
pinned stationary system of the scipy backend (``M^T`` with ``M = -Q_XX``,
``X`` all states but the slowest-exit one, as ``stationary("gmres")`` builds it)
and in the same process, in four configurations (:data:`CONFIGS`): the base, ``fallback`` with
``cgs2`` (numpy's classical Gram-Schmidt twice, pyamg's sweeps on copied
triangles, scipy's product: the code before the compiled kernels, selected by
``ctmc._relax.use_compiled(False)``), then the compiled kernels
(``ctmc._kernels``) with ``cgs2`` on 1 thread and with ``dcgs2`` (the
default orthogonalisation, :data:`ctmc.krylov.ARNOLDI`) on 1 and 2 threads. Every timing is the fastest of ``--repeat`` rounds,
the configurations interleaved in each round:

* ``matvec``: scipy's ``A @ v``, the unit of the table (the same in every row);
* ``spmv``: the product GMRES uses (:func:`ctmc._relax.spmv`);
* ``pc``: one application of the preconditioner
  (:func:`ctmc.backends.scipy_backend.ssor1`, SSOR(1));
* ``orth``: one Arnoldi orthogonalisation at ``j = 22`` (the middle of a
  45-step cycle) of a random vector (:func:`ctmc.krylov.orthogonalise`, or the
  two passes :func:`ctmc.krylov.dcgs2_project` and :func:`ctmc.krylov.dcgs2_update`);
* ``gmres``: :func:`ctmc.krylov.gmres` (restart 50, rtol 1e-12) with the
  product and preconditioner of that configuration, time per iteration
  (``ms/it``) and that in matvec units (``it/mv``), and its CPU time per
  iteration (``cpu ms/it``: all the process's threads, OpenBLAS's and
  OpenMP's included; less disturbed than wall-clock by other jobs on a
  shared machine);
* ``rel.diff``: the largest relative difference of its solution from the
  fallback's.

With ``--stationary``, also the default ``chain.stationary()`` (the GMRES
solve and the error bound's solve) in each configuration, with its status and
its measure's relative difference from the fallback's.

The machine may be shared and loaded: read the ratios, not the times.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (kernels, compiled, threads, orthogonalisation)
CONFIGS = (("fallback", False, 1, "cgs2"), ("compiled", True, 1, "cgs2"), ("compiled", True, 1, "dcgs2"),
           ("compiled", True, 2, "dcgs2"))


def _time(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def _cpu(f):
    """``(wall seconds, CPU seconds of the process, f())``."""
    c, t = time.process_time(), time.perf_counter()
    out = f()
    return time.perf_counter() - t, time.process_time() - c, out


def _configure(on, threads):
    from ctmc import _relax
    _relax.use_compiled(on)
    _relax.set_threads(threads)


def _orth(V, w0, ext, orth):
    """One orthogonalisation step at j = 22 (DCGS2: its two passes on V[22] and w)."""
    from ctmc.krylov import dcgs2_project, dcgs2_update, orthogonalise
    w = w0.copy()
    if orth == "cgs2":
        return lambda: orthogonalise(V, 22, w, ext)

    def step():
        s, t, vv, vz = dcgs2_project(V, 22, w, ext)
        alpha = float(np.sqrt(vv - s @ s))
        return dcgs2_update(V, 22, w, s, t, alpha, (vz - s @ t) / alpha, ext)
    return step


def run(spec: str, repeat: int, stationary: bool) -> list:
    from bench_gallery import model_spec
    from ctmc import _relax
    from ctmc.backends.scipy_backend import operator, ssor1
    from ctmc.krylov import gmres
    from ctmc.progress import set_progress

    set_progress(False)
    chain = model_spec(spec).chain()
    op = operator(chain)
    pin = int(np.argmin(op.exit_rates))
    keep = np.ones(op.n, bool)
    keep[pin] = False
    A = (-op.Q[keep][:, keep]).T.tocsr()
    b = np.asarray(op.R[pin].toarray()).ravel()[keep]
    norm_a = float(abs(A).sum(axis=1).max())
    n = A.shape[0]
    rng = np.random.default_rng(0)
    v = rng.random(n)
    V = np.ascontiguousarray(np.vstack([np.linalg.qr(rng.standard_normal((n, 23)))[0].T, np.zeros((1, n))]))
    w0 = rng.standard_normal(n)
    kit = {}
    for cfg in CONFIGS:
        _configure(cfg[1], cfg[2])
        kit[cfg] = (_relax.spmv(A), ssor1(A), _relax.extension())
    best = {cfg: {} for cfg in CONFIGS}
    out = {}

    def keep_best(cfg, key, t):
        best[cfg][key] = min(best[cfg].get(key, np.inf), t)

    for _ in range(repeat):
        for cfg in CONFIGS:
            _configure(cfg[1], cfg[2])
            mv, P, ext = kit[cfg]
            for _ in range(3):
                keep_best(cfg, "matvec", _time(lambda: A @ v)[0])
                keep_best(cfg, "spmv", _time(lambda: mv(v))[0])
                keep_best(cfg, "pc", _time(lambda: P(v))[0])
                keep_best(cfg, "orth", _time(_orth(V, w0, ext, cfg[3]))[0])
            t, c, (x, rep) = _cpu(lambda: gmres(mv, b, P, rtol=1e-12, restart=50, maxiter=2000, norm_a=norm_a,
                                                orthogonalisation=cfg[3]))
            keep_best(cfg, "gmres", t / max(rep.iterations, 1))
            keep_best(cfg, "gmres cpu", c / max(rep.iterations, 1))
            out[cfg] = (x, rep)
            if stationary:
                t, res = _time(lambda: chain.stationary())
                keep_best(cfg, "stationary", t)
                out[cfg + ("st",)] = res
    _configure(True, _relax.set_threads(2))
    unit = min(best[cfg]["matvec"] for cfg in CONFIGS)       # scipy's A @ v, the fastest of all rounds
    base = out[CONFIGS[0]][0]
    rows = []
    for cfg in CONFIGS:
        bt = best[cfg]
        x, rep = out[cfg]
        row = [spec, n, A.nnz, cfg[0], cfg[3], cfg[2], 1e3 * unit, bt["spmv"] / unit, bt["pc"] / unit, bt["orth"] / unit,
               rep.iterations, 1e3 * bt["gmres"], bt["gmres"] / unit, 1e3 * bt["gmres cpu"],
               float(np.max(np.abs(x - base) / np.abs(base)))]
        if stationary:
            res, ref = out[cfg + ("st",)], out[CONFIGS[0] + ("st",)]
            m, mref = res.pi, ref.pi
            row += [bt["stationary"], f"{res.status.value}", float(np.max(np.abs(m - mref)) / np.max(np.abs(mref)))]
        rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="kanban:3,kanban:4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stationary", action="store_true", help="also time the default chain.stationary()")
    a = ap.parse_args(argv)
    from ctmc import _relax
    if _relax.extension() is None:
        print("ctmc._kernels is not built (or CTMC_KERNELS=0): every row runs the fallback")
    head = ["model", "states", "nnz", "kernels", "orth", "threads", "matvec ms", "spmv/mv", "pc/mv", "orth(j=22)/mv", "its",
            "gmres ms/it", "it/mv", "cpu ms/it", "rel.diff"]
    if a.stationary:
        head += ["stationary s", "status", "pi diff"]
    print(" | ".join(head))
    for spec in a.models.split(","):
        for r in run(spec, a.repeat, a.stationary):
            line = (f"{r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.2f} | {r[7]:.2f} | {r[8]:.2f} | "
                    f"{r[9]:.2f} | {r[10]} | {r[11]:.2f} | {r[12]:.2f} | {r[13]:.2f} | {r[14]:.1e}")
            if a.stationary:
                line += f" | {r[15]:.2f} | {r[16]} | {r[17]:.1e}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
