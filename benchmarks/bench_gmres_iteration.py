"""What one GMRES + symmetric Gauss-Seidel iteration costs, in matrix-vector products.

    .venv/bin/python benchmarks/bench_gmres_iteration.py                      # kanban:3,kanban:4
    .venv/bin/python benchmarks/bench_gmres_iteration.py --models kanban:3,polling:12 --repeat 5

For each gallery model (``benchmarks/bench_gallery.py::model_spec``), on the
pinned stationary system of the scipy backend (``M^T`` with ``M = -Q_XX``,
``X`` all states but the slowest-exit one, as ``stationary("gmres")`` builds it)
and in the same process, the fastest of ``--repeat`` runs of:

* ``matvec``: ``A @ v``, the unit of the table;
* ``sgs``: one application of the preconditioner, as the backend sets it up
  (:func:`ctmc.backends.scipy_backend.ssor1`: the two triangular solves of
  SSOR(1)), and as it was (``old sgs``: a forward and a backward pyamg
  Gauss-Seidel sweep on the whole matrix from 0, through a ``LinearOperator``);
* ``gmres``: :func:`ctmc.krylov.gmres` (restart 50, rtol 1e-12) with each
  preconditioner, total time over its iterations (``ms/it``) and that in
  matvec units (``it/mv``).

The machine may be shared and loaded: read the ratios, not the times.
The last column is the largest relative difference of the two solutions.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse.linalg as sla

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _best(f, repeat):
    best, out = np.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def _old_sgs(A):
    """The preconditioner before the split: two whole-matrix sweeps from 0, behind a LinearOperator."""
    from ctmc._relax import sweep
    S = A.tocsr()
    S.sort_indices()

    def sgs(v):
        v = np.asarray(v, dtype=float).ravel()
        x = np.zeros_like(v)
        sweep(S, x, v, 1.0, "forward")
        sweep(S, x, v, 1.0, "backward")
        return x
    return sla.LinearOperator(A.shape, sgs).matvec


def run(spec: str, repeat: int) -> list:
    from bench_gallery import model_spec
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
    v = np.random.default_rng(0).random(A.shape[0])
    t_mv, _ = _best(lambda: A @ v, 3 * repeat)
    rows = []
    sol = {}
    for name, P in (("sgs", ssor1(A)), ("old sgs", _old_sgs(A))):
        t_pc, _ = _best(lambda: P(v), 3 * repeat)
        t_g, (x, rep) = _best(lambda: gmres(A.dot, b, P, rtol=1e-12, restart=50, maxiter=2000, norm_a=norm_a),
                              repeat)
        sol[name] = x
        per = t_g / max(rep.iterations, 1)
        rows.append([spec, A.shape[0], A.nnz, name, 1e3 * t_mv, 1e3 * t_pc, t_pc / t_mv, rep.iterations,
                     1e3 * per, per / t_mv])
    d = float(np.max(np.abs(sol["sgs"] - sol["old sgs"]) / np.abs(sol["old sgs"])))
    for r in rows:
        r.append(d)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="kanban:3,kanban:4")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    head = ("model", "states", "nnz", "preconditioner", "matvec ms", "pc ms", "pc/mv", "its", "gmres ms/it",
            "it/mv", "rel.diff")
    print(" | ".join(head))
    for spec in a.models.split(","):
        for r in run(spec, a.repeat):
            print(f"{r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.2f} | {r[5]:.2f} | {r[6]:.2f} | {r[7]} | "
                  f"{r[8]:.2f} | {r[9]:.2f} | {r[10]:.1e}", flush=True)


if __name__ == "__main__":
    main()
