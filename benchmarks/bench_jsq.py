"""ctmc.models.jsq at scale: K = 1000 .. 4500 (5e5 .. 1.0e7 states), answers against the closed forms.

For each K, in a process of its own (so that its peak resident memory is its
own), times the public calls of :class:`ctmc.models.jsq.JSQ2`: the build, the
stationary law by the model's default route (``auto``, a pinned sparse LU, up
to ``JSQ2.LEVEL_STATES`` states; ``level_iad`` on the level N = x + y beyond),
with the part of it spent on the error bound, the blocking probability (from
the cached law: no second solve) and the mean time to saturation from every
state (both on PETSc too: the saturation means by ``lu-kac``, the band gathered on every process).
Each answer is compared with the closed forms of
:mod:`ctmc.models.jsq` (the baseline in the same run, with their own time):
the relative error of P_block and the largest relative error of E[tau] over
all states, with the route's own error estimate. Saturation means are run up to
``--saturation-max-states`` (default: every K). Their route is the model's: a sparse LU through
a regeneration state up to ``JSQ2.LEVEL_STATES`` states (fill 5.4 GB at K = 3000), ``lu-kac``
beyond (Kac's formula on the cached stationary law and a sparse LU on the top levels:
:func:`ctmc.passage_levels.level_hitting_mean`); ``--saturation-method auto`` asks for the LU route
at every K (the baseline). The saturation time counts the call alone, the stationary law
being cached by then. A law or mean graded short of success is reported with its status (``check=False``).
Peak memory is that of the process (the largest over the processes on PETSc).

rho defaults to 0.95: P_block ~ rho^(2K) must stay a double at K = 4500
(0.9^9000 underflows; 0.95^9000 = 1e-200).

``--method-only`` times the level route's iterations alone (``level_iad`` on
N = x + y from the model's start, to the model's ``LEVEL_TAIL_TOL``, without
the error bound that the public call adds), with P_block against the closed
form, at every K, and up to ``--lu-max-states`` (default 1.2e6, K = 1500) the
largest relative difference from a sparse LU solve over every state whose
probability is a normal double (>= 2.2e-308): the tail, state by state.

``--law-identity`` checks a candidate bound of P_block's relative error (:func:`law_identity`).

The stationary law and the saturation means are timed in wall and CPU seconds (this process's: on a
shared machine the CPU time is what compares; a base commit in the same run with ``PYTHONPATH``).

Run: .venv/bin/python benchmarks/bench_jsq.py [--quick] [--K 1000 2000 3000 4500] [--rho 0.95] [--method-only]
     mpirun -n 2 .venv/bin/python benchmarks/bench_jsq.py --backend petsc --K 1000   (in-process)
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import git_state, warm_up  # noqa: E402

from ctmc.models.jsq import JSQ2  # noqa: E402
from ctmc.report import format_table  # noqa: E402

MU2 = 0.5


CPU = {}


def timed(fn, *a, **kw):
    """Call ``fn``; return (result, wall seconds); its CPU seconds (this process's) into ``CPU[fn name]``."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*a, **kw)
    CPU[getattr(fn, "__name__", "")] = time.process_time() - c0
    return out, time.perf_counter() - t0


def rss_gib(chain=None) -> float:
    """Peak resident memory (GiB) of this process, or on PETSc the largest over the processes (a
    collective: ``DistributedChain.memory``)."""
    if chain is not None and hasattr(chain, "memory"):
        return max(chain.memory()["peak_mib_per_rank"]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20


def one(K, rho, backend="scipy", saturation_max_states=20_000_000, saturation_method=None, method=None):
    """The measurements of one K (a dict)."""
    import warnings

    import ctmc
    warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
    q = JSQ2(K, rho, MU2, backend=backend)
    chain, t_build = timed(q.chain)
    res, t_stat = timed(q.stationary, method, check=False)    # a law short of success is reported, not raised
    cpu_stat = CPU["stationary"]
    if res.status.ok and method is None:
        pb, t_pb = timed(q.blocking_probability)
    else:
        pb, t_pb = float(res.pi[chain.index(s=K, l=K)]), float("nan")
    pb_cf, t_pbcf = timed(q.blocking_probability, "closed_form")
    row = dict(K=K, states=int(q.n_states), build=t_build, stationary=t_stat, stationary_cpu=cpu_stat,
               method=res.method,
               status=res.status.value, iterations=int(res.iterations),
               bound_s=float(res.info.get("error_bound_seconds", 0.0)), balance=float(res.balance_error),
               pb=float(pb), pb_err=abs(pb / pb_cf - 1), pb_s=t_pb, rss_stationary=rss_gib(chain))
    if q.n_states <= saturation_max_states:
        kw = {} if saturation_method is None else {"method": saturation_method}
        sat, t_sat = timed(q.saturation_analysis, check=False, **kw)
        cf, t_cf = timed(q.saturation_times, source="closed_form")
        fin = cf > 0
        row.update(saturation=t_sat, saturation_cpu=CPU["saturation_analysis"], sat_method=sat.method,
                   sat_status=sat.status.value, closed_form_s=t_cf,
                   tau_bound=float(sat.error_bound), tau_bound_kind=str(sat.info.get("error_bound_kind", "")),
                   tau_err=float(np.max(np.abs(sat.mean[fin] / cf[fin] - 1))),
                   tau0=float(sat.mean[chain.index(s=0, l=0)]))
    row["rss"] = rss_gib(chain)
    return row


def method_only(K, rho, lu_max_states=1_200_000):
    """The level route's iterations alone (``level_iad`` from the model's start, no error bound):
    what the public call costs beyond its bound."""
    import ctmc.stationary as cs
    from ctmc.backends import operator_for
    from ctmc.kernels.evidence import stationary_evidence
    q = JSQ2(K, rho, MU2)
    chain, t_build = timed(q.chain)
    t0 = time.perf_counter()
    op = operator_for(chain, "scipy")
    opts = cs.LevelIADOptions(levels=q.levels(), x0=q.start_vector(), tail_tol=q.LEVEL_TAIL_TOL)
    x, it, status, _ = cs._level_iad(op, np.ones(chain.n_states, bool), opts, None,
                                     cs._Context(info={}, backend_options={}, size=chain.n_states))
    t_solve = time.perf_counter() - t0
    pi = x / x.sum()
    residual, balance, _, _ = stationary_evidence(op, pi)
    pb_cf = q.blocking_probability("closed_form")
    row = dict(K=K, states=int(q.n_states), build=t_build, solve=t_solve, iterations=int(it),
               residual=float(residual), balance=float(balance), pb=float(pi[-1]),
               pb_err=abs(pi[-1] / pb_cf - 1), rss=rss_gib())
    if q.n_states <= lu_max_states:
        lu = chain.stationary("lu").pi
        normal = lu >= np.finfo(float).tiny
        row.update(lu_err=float(np.max(np.abs(pi[normal] / lu[normal] - 1))), lu_min=float(lu[normal].min()))
    return row


def law_identity(K, rho):
    r"""P_block's error from the law's residual: with :math:`r = \hat\pi Q` (``level_iad``'s law, summing to
    one) and :math:`h_j = E_j[T_a]`, :math:`\hat\pi - \pi = r Q^\#` and :math:`Q^\#_{ja} - Q^\#_{aa} =
    \pi_a h_j` give :math:`\hat\pi_a/\pi_a - 1 = \sum_j r_j (h_j - H)` exactly (:math:`\sum_j r_j = 0`,
    :math:`H = E_z[T_a]`); ``lu-kac``'s means stand in for :math:`h` (:math:`h_j = H` below its band).
    Reported beside the error against the closed form and the calibrated ``PI_ERROR_PER_BALANCE`` x the
    balance error: the identity (signed) and the bound :math:`\sum_j |r_j|\,|h_j - H|`."""
    from ctmc.passage_levels import PI_ERROR_PER_BALANCE
    q = JSQ2(K, rho, MU2)
    law = q.stationary("level_iad", check=False)
    a = q.chain().index(s=K, l=K)
    sat = q.saturation_analysis(method="lu-kac", check=False)
    d = sat.mean - sat.info["cycle_mean"]
    d[a] = -sat.info["cycle_mean"]
    r = q.chain().Q.T @ law.pi
    return dict(K=K, states=int(q.n_states), band=int(sat.info["band_states"]),
                balance=float(law.balance_error),
                calibrated=PI_ERROR_PER_BALANCE * float(law.balance_error),
                actual=float(law.pi[a] / q.blocking_probability("closed_form") - 1),
                identity=float(r @ d), bound=float(np.abs(r) @ np.abs(d)))


def table(rows):
    out = []
    for r in rows:
        sat = (f"{r['saturation']:.1f} / {r.get('saturation_cpu', float('nan')):.1f} ({r['sat_method']}, "
               f"{r['sat_status']})" if "saturation" in r else "not run (LU fill beyond memory)")
        out.append([r["K"], f"{r['states']:.3g}", f"{r['build']:.1f}",
                    f"{r['stationary']:.1f} / {r.get('stationary_cpu', float('nan')):.1f} ({r['method']}, "
                    f"{r['status']}, {r['iterations']} it.)",
                    f"{r['bound_s']:.1f}", f"{r['pb']:.3e}", f"{r['pb_err']:.1e}", f"{r['pb_s']:.4f}", sat,
                    f"{r['tau_err']:.1e}" if "tau_err" in r else "-",
                    f"{r['tau_bound']:.1e} ({r['tau_bound_kind']})" if "tau_bound" in r else "-",
                    f"{r['closed_form_s']:.1f}" if "closed_form_s" in r else "-",
                    f"{r['rss_stationary']:.2f} / {r['rss']:.2f}"])
    return format_table(out, ["K", "states", "build s", "stationary wall / CPU s (route)", "of which bound s",
                              "P_block", "rel.err P_block", "P_block s (cached)",
                              "saturation wall / CPU s (route)",
                              "max rel.err E[tau]", "its error bound (kind)", "closed forms s",
                              "peak RSS GiB (a process) after stationary / saturation"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="K = 100, 300 only (< 20 s)")
    ap.add_argument("--K", type=int, nargs="*", default=None)
    ap.add_argument("--rho", type=float, default=0.95)
    ap.add_argument("--backend", default="scipy", help="scipy (one process per K) or petsc (in this process, "
                                                       "run under mpirun)")
    ap.add_argument("--saturation-max-states", type=int, default=20_000_000,
                    help="run the saturation means up to this many states (default 2e7: every K)")
    ap.add_argument("--saturation-method", default=None,
                    help="the saturation means by this method (default: the model's route; 'auto': "
                         "ctmc's hitting-time analysis, the sparse LU, at every K)")
    ap.add_argument("--stationary-method", default=None,
                    help="the stationary law by this method (default: the model's route; 'level_iad': its "
                         "route beyond LEVEL_STATES at every K; P_block then read off that law)")
    ap.add_argument("--method-only", action="store_true",
                    help="time level_iad's iterations alone (no error bound, no saturation), every K")
    ap.add_argument("--lu-max-states", type=int, default=1_200_000,
                    help="with --method-only, compare with sparse LU state by state up to this many states")
    ap.add_argument("--law-identity", action="store_true",
                    help="P_block's error from the law's residual and lu-kac's means (one process), every K")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.law_identity:
        rows = [law_identity(K, a.rho) for K in (a.K or [100, 300])]
        print(format_table([[r["K"], r["states"], r["band"], f"{r['balance']:.1e}", f"{r['calibrated']:.1e}",
                             f"{r['actual']:.2e}", f"{r['identity']:.2e}", f"{r['bound']:.1e}"]
                            for r in rows],
                           ["K", "states", "band", "balance", "20 x balance", "P_block rel.err (closed form)",
                            "sum r (h - H)", "sum |r| |h - H|"]))
        return 0
    if a.one is not None:                          # a child: one K, JSON on stdout
        warm_up()
        out = method_only(a.one, a.rho, a.lu_max_states) if a.method_only else one(
            a.one, a.rho, a.backend, a.saturation_max_states, a.saturation_method, a.stationary_method)
        print(json.dumps(out))
        return 0
    Ks = a.K or ([100, 300] if a.quick else [1000, 2000, 3000, 4500])
    print(git_state())
    print(f"backend {a.backend}; JSQ2(K, rho={a.rho}, mu2={MU2}); load {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores at the start")
    rows = []
    for K in Ks:
        if a.backend == "petsc":
            warm_up()
            rows.append(one(K, a.rho, "petsc", a.saturation_max_states, a.saturation_method,
                            a.stationary_method))
        else:
            cmd = [sys.executable, __file__, "--one", str(K), "--rho", str(a.rho),
                   "--saturation-max-states", str(a.saturation_max_states),
                   "--lu-max-states", str(a.lu_max_states)] + (["--method-only"] if a.method_only else []) \
                + (["--saturation-method", a.saturation_method] if a.saturation_method else []) \
                + (["--stationary-method", a.stationary_method] if a.stationary_method else [])
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"  K={K} failed: {proc.stderr.strip().splitlines()[-1:]}", flush=True)
                continue
            rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"  done K={K} (load {os.getloadavg()[0]:.1f})", flush=True)
    from ctmc.backends import petsc
    if a.method_only:
        print(format_table([[r["K"], f"{r['states']:.3g}", f"{r['build']:.1f}", f"{r['solve']:.1f}",
                             r["iterations"], f"{r['residual']:.1e}", f"{r['balance']:.1e}", f"{r['pb']:.3e}",
                             f"{r['pb_err']:.1e}",
                             f"{r['lu_err']:.1e} (down to {r['lu_min']:.1e})" if "lu_err" in r else "-",
                             f"{r['rss']:.2f}"] for r in rows],
                           ["K", "states", "build s", "level_iad s (no bound)", "it.", "residual",
                            "balance error", "P_block", "rel.err P_block", "max rel.diff from LU (normal pi)",
                            "peak RSS GiB"]))
    elif a.backend != "petsc" or not petsc.available() or petsc.load_petsc().COMM_WORLD.getRank() == 0:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
