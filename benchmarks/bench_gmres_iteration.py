"""What one GMRES + symmetric Gauss-Seidel iteration costs, in matrix-vector products: compiled kernels against their fallbacks.

    .venv/bin/python benchmarks/bench_gmres_iteration.py                      # kanban:3,kanban:4
    .venv/bin/python benchmarks/bench_gmres_iteration.py --models kanban:3,kanban:4 --repeat 3
    .venv/bin/python benchmarks/bench_gmres_iteration.py --models kanban:4,fms:5 --stationary
    .venv/bin/python benchmarks/bench_gmres_iteration.py --models kanban:4,fms:6 --baseline /tmp/base --repeat 3
    .venv/bin/python benchmarks/bench_gmres_iteration.py --models kanban:4,tandem:511 --ssor-blocks 1,2,4,16
    .venv/bin/python benchmarks/bench_gmres_iteration.py --models kanban:4,fms:6 --baseline /tmp/base --step --repeat 20

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
* ``gmres``: :func:`ctmc.krylov.gmres` (restart 50, rtol 1e-12) given the
  matrix (as the scipy backend gives it) and the preconditioner of that
  configuration (compiled: SSOR(1) and the product in one kernel,
  ``ssor_ap``), time per iteration
  (``ms/it``) and that in matvec units (``it/mv``), and its CPU time per
  iteration (``cpu ms/it``: all the process's threads, OpenBLAS's and
  OpenMP's included; less disturbed than wall-clock by other jobs on a
  shared machine);
* ``rel.diff``: the largest relative difference of its solution from the
  fallback's.

With ``--stationary``, also the default ``chain.stationary()`` (the GMRES
solve and the error bound's solve) in each configuration, with its status and
its measure's relative difference from the fallback's.

With ``--baseline DIR`` (another checkout, its C extensions built in
place), this tree against that one instead: one process per measure
(``PYTHONPATH`` set to the tree, ``CTMC_THREADS`` to each of ``--threads``),
the two trees interleaved in each of ``--repeat`` rounds, the fastest kept:
after a warm-up solve (kanban:2), the GMRES solve of the pinned system with
SSOR(1) (iterations, ms an iteration and in matvec units, CPU ms an
iteration, minor page faults an iteration: first touches of fresh memory),
then the default ``chain.stationary()`` (seconds, status, and the largest
difference of the two trees' distributions relative to its largest entry).

With ``--baseline DIR --step``, the product ``A P v`` of one step in one
process: the baseline's extension (loaded from its file) making SSOR(1) then
the product into fresh arrays, as its step did, against this tree's fused
kernel (``ssor_ap``) and its two kernels into reused buffers; thread CPU time
on 1 thread (the measure least disturbed by other jobs), wall time on 2.

With ``--ssor-blocks 1,2,4,16``, block SSOR(1) against the sequential one
(:func:`ctmc._relax.symmetric_gauss_seidel`, ``blocks=``): GMRES iterations,
one application and the whole solve on 1 and 2 threads.

The machine may be shared and loaded: read the ratios, not the times.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

#: (kernels, compiled, threads, orthogonalisation)
CONFIGS = (("fallback", False, 1, "cgs2"), ("compiled", True, 1, "cgs2"), ("compiled", True, 1, "dcgs2"),
           ("compiled", True, 2, "dcgs2"))



def pinned_system(spec: str):
    """The stationary system of a gallery model pinned at its slowest state: ``(chain, A, b, ||A||_inf)``
    with ``A = -Q_XX^T`` in CSR and ``b`` the rates into the pin (what the scipy backend solves)."""
    from bench_gallery import model_spec

    from ctmc.backends.scipy_backend import operator

    chain = model_spec(spec).chain()
    op = operator(chain)
    pin = int(np.argmin(op.exit_rates))
    keep = np.ones(op.n, bool)
    keep[pin] = False
    A = (-op.Q[keep][:, keep]).T.tocsr()
    b = np.asarray(op.R[pin].toarray()).ravel()[keep]
    return chain, A, b, float(abs(A).sum(axis=1).max())

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
    from ctmc.backends.scipy_backend import ssor1
    from ctmc.krylov import gmres
    from ctmc.progress import set_progress

    set_progress(False)
    chain, A, b, norm_a = pinned_system(spec)
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
            # the matrix itself, as the scipy backend passes it: its product (compiled or scipy's by the
            # configuration) or, compiled, the product fused with SSOR(1) (ssor_ap)
            t, c, (x, rep) = _cpu(lambda: gmres(A, b, P, rtol=1e-12, restart=50, maxiter=2000, norm_a=norm_a,
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


def child(spec: str, out: str) -> None:
    """One process of ``--baseline``: the pinned system's GMRES solve and the default ``stationary()`` (JSON on stdout)."""
    import json
    import resource

    from bench_gallery import model_spec
    from ctmc import _relax
    from ctmc.backends.scipy_backend import ssor1
    from ctmc.krylov import gmres
    from ctmc.progress import set_progress

    set_progress(False)
    model_spec("kanban:2").chain().stationary()                   # warm-up: imports, first calls
    chain, A, b, norm_a = pinned_system(spec)
    v = np.random.default_rng(0).random(A.shape[0])
    unit = min(_time(lambda: A @ v)[0] for _ in range(5))
    P = ssor1(A)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    t, c, (x, rep) = _cpu(lambda: gmres(A, b, P, rtol=1e-12, restart=50, maxiter=2000, norm_a=norm_a))
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
    del A, P, op
    ts, res = _time(lambda: chain.stationary())
    np.save(out, res.pi)
    print(json.dumps(dict(its=rep.iterations, gmres=t, cpu=c, unit=unit, faults=faults, stationary=ts,
                          status=res.status.value, threads=_relax.threads(), bound=res.error_bound)))


def compare(models, baseline: str, rounds: int, threads) -> None:
    """This tree against ``baseline`` (another checkout, its extensions built), one process per measure,
    the trees interleaved in each round; the fastest of ``rounds``."""
    import json
    import os
    import tempfile

    here = str(Path(__file__).resolve().parent.parent)
    trees = (("base", baseline), ("this", here))
    print("model | threads | its base/this | gmres ms/it base | this | ratio | it/mv base | this | "
          "cpu ms/it base | this | faults/it base | this | stationary s base | this | ratio | status | pi diff")
    with tempfile.TemporaryDirectory() as tmp:
        for spec in models:
            for th in threads:
                best = {}
                for _ in range(rounds):
                    for name, tree in trees:
                        env = dict(os.environ, PYTHONPATH=tree, CTMC_THREADS=str(th))
                        out = f"{tmp}/{name}.npy"
                        p = subprocess.run([sys.executable, __file__, "--child", spec, "--out", out], env=env,
                                           capture_output=True, text=True, check=True)
                        r = json.loads(p.stdout.strip().splitlines()[-1])
                        b = best.setdefault(name, dict(r))
                        for k in ("gmres", "cpu", "unit", "stationary"):
                            b[k] = min(b[k], r[k])
                pi = {name: np.load(f"{tmp}/{name}.npy") for name, _ in trees}
                B, T = best["base"], best["this"]
                per = {k: (v["gmres"] / v["its"], v["cpu"] / v["its"]) for k, v in best.items()}
                print(f"{spec} | {th} | {B['its']}/{T['its']} | {1e3 * per['base'][0]:.2f} | {1e3 * per['this'][0]:.2f} | "
                      f"{per['this'][0] / per['base'][0]:.2f} | {per['base'][0] / B['unit']:.2f} | "
                      f"{per['this'][0] / T['unit']:.2f} | {1e3 * per['base'][1]:.2f} | {1e3 * per['this'][1]:.2f} | "
                      f"{B['faults'] / B['its']:.0f} | {T['faults'] / T['its']:.0f} | {B['stationary']:.2f} | "
                      f"{T['stationary']:.2f} | {T['stationary'] / B['stationary']:.2f} | {B['status']}/{T['status']} | "
                      f"{float(np.max(np.abs(pi['this'] - pi['base'])) / np.max(np.abs(pi['base']))):.1e}",
                      flush=True)


def step_table(models, baseline: str, repeat: int) -> None:
    """``A P v`` of one GMRES step in one process: the baseline's extension (loaded from its file) making
    ``ssor`` then ``spmv`` into fresh arrays, as its step did, against this tree's ``ssor_ap`` and its two
    kernels into reused buffers; the thread CPU time on 1 thread (least disturbed by other jobs) and the
    wall time on 2, the fastest of ``repeat`` interleaved rounds."""
    import glob
    import importlib.util

    from bench_gallery import model_spec
    from ctmc import _relax

    spec_ = importlib.util.spec_from_file_location("_kernels", glob.glob(f"{baseline}/ctmc/_kernels*.so")[0])
    base = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(base)
    new = _relax.extension()
    print("model | base ssor+spmv ms | this ssor_ap | ratio | this ssor+spmv into buffers | ratio | "
          "2 threads (wall): base | ssor_ap | ratio")
    for spec in models:
        S = _relax._canonical(pinned_system(spec)[1])
        n, ip, ix, d = S.shape[0], S.indptr, S.indices, S.data
        dpos = np.empty(n, ip.dtype)
        new.ssor_setup(ip, ix, dpos)
        v = np.random.default_rng(0).random(n)
        V = np.zeros((3, n))
        work = np.empty(n)

        def base_step():
            x = np.empty(n)
            base.ssor(ip, ix, dpos, d, v, x)
            y = np.empty(n)
            base.spmv(ip, ix, d, x, y)
            np.divide(y, 2.0, out=V[0])

        def fused():
            new.ssor_ap(ip, ix, dpos, d, v, work, V[1])
            np.divide(V[1], 2.0, out=V[1])

        def two():
            new.ssor(ip, ix, dpos, d, v, work)
            new.spmv(ip, ix, d, work, V[2])
            np.divide(V[2], 2.0, out=V[2])
        best = {}
        for th, clock in ((1, time.thread_time), (2, time.perf_counter)):
            base.set_threads(th)
            new.set_threads(th)
            for _ in range(repeat):
                for name, f in (("base", base_step), ("fused", fused), ("two", two)):
                    t = clock()
                    f()
                    best[name, th] = min(best.get((name, th), np.inf), clock() - t)
        b1, b2 = best["base", 1], best["base", 2]
        print(f"{spec} | {1e3 * b1:.2f} | {1e3 * best['fused', 1]:.2f} | {best['fused', 1] / b1:.2f} | "
              f"{1e3 * best['two', 1]:.2f} | {best['two', 1] / b1:.2f} | {1e3 * b2:.2f} | {1e3 * best['fused', 2]:.2f} | "
              f"{best['fused', 2] / b2:.2f}", flush=True)
    new.set_threads(_relax.threads())


def blocks_table(models, blocks, repeat: int) -> None:
    """Block SSOR(1) (``ctmc._relax.symmetric_gauss_seidel(A, blocks=k)``) against the sequential one (k = 1):
    GMRES iterations, and on 1 and 2 threads one application (fastest of ``5 * repeat``) and the whole solve
    (fastest of ``repeat``), the thread counts interleaved."""
    from bench_gallery import model_spec
    from ctmc import _relax
    from ctmc.krylov import gmres
    from ctmc.progress import set_progress

    set_progress(False)
    print("model | states | blocks | its | pc ms 1t | pc ms 2t | gmres s 1t | gmres s 2t | gmres 2t vs sequential 2t")
    for spec in models:
        _, A, b, norm_a = pinned_system(spec)
        v = np.random.default_rng(0).random(A.shape[0])
        out = np.empty_like(v)
        seq = None
        for k in blocks:
            P = _relax.symmetric_gauss_seidel(A, blocks=k)
            pc, solve = {}, {}
            for _ in range(repeat):
                for th in (1, 2):
                    _relax.set_threads(th)
                    for _ in range(5):
                        pc[th] = min(pc.get(th, np.inf), _time(lambda: P(v, out))[0])
                    t, (x, rep) = _time(lambda: gmres(A, b, P, rtol=1e-12, restart=50, maxiter=3000, norm_a=norm_a))
                    solve[th] = min(solve.get(th, np.inf), t)
            seq = solve[2] if seq is None else seq
            print(f"{spec} | {A.shape[0]} | {k} | {rep.iterations}{'' if rep.converged else ' (not converged)'} | "
                  f"{1e3 * pc[1]:.2f} | {1e3 * pc[2]:.2f} | {solve[1]:.2f} | {solve[2]:.2f} | {solve[2] / seq:.2f}",
                  flush=True)
    _relax.set_threads(2)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="kanban:3,kanban:4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--stationary", action="store_true", help="also time the default chain.stationary()")
    ap.add_argument("--baseline", help="a checkout to compare with (its C extensions built in place)")
    ap.add_argument("--threads", default="1,2", help="with --baseline: the thread counts")
    ap.add_argument("--ssor-blocks", help="block SSOR(1) with these block counts (e.g. 1,2,4,16) instead")
    ap.add_argument("--step", action="store_true", help="with --baseline: A P v of one step, in one process")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child, a.out)
    if a.ssor_blocks:
        return blocks_table(a.models.split(","), [int(k) for k in a.ssor_blocks.split(",")], a.repeat)
    if a.baseline and a.step:
        return step_table(a.models.split(","), a.baseline, a.repeat)
    if a.baseline:
        return compare(a.models.split(","), a.baseline, a.repeat, [int(t) for t in a.threads.split(",")])
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
