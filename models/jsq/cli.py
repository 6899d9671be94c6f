"""Two queues under join-the-shortest-queue with asymmetric service (Tibi 2019).

The ``ctmc jsq`` command (:func:`add_arguments`, :func:`run`) and the JSQ part
of ``ctmc report`` (:func:`report`): the chain against its closed forms. The
first line above is the command's help text.
"""
from __future__ import annotations

import math

from ctmc.report import format_table

from .closed_forms import log_saturation_mean
from .model import JSQ2

__all__ = ["add_arguments", "run", "report"]


def add_arguments(parser) -> None:
    """Arguments of ``ctmc jsq``."""
    parser.add_argument("--K", type=int, default=100, help="capacity of each queue (default 100)")
    parser.add_argument("--rho", type=float, default=0.9, help="total arrival rate (default 0.9)")
    parser.add_argument("--mu2", type=float, default=0.5, help="service rate of the longest queue (default 0.5)")
    parser.add_argument("--idle-rate", type=float, default=None,
                        help="rate of the lone busy server when the shortest queue is empty (default mu2)")
    parser.add_argument("--backend", default="scipy", choices=["scipy", "petsc"],
                        help="scipy (default) or petsc: the chain assembled and solved over the MPI "
                             "processes (run under mpirun; process 0 prints)")


def run(args) -> str:
    """Main measures of one JSQ system, chain against closed forms."""
    import time

    t0 = time.perf_counter()
    q = JSQ2(args.K, args.rho, args.mu2, args.idle_rate, backend=getattr(args, "backend", "scipy"))
    chain = q.chain()
    tb = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = q.measures()
    ts = time.perf_counter() - t0
    t0 = time.perf_counter()
    # an answer that is not accurate (an overflowing mean, say) ends the command: one line, exit 1
    sat = q.saturation_analysis()
    th = time.perf_counter() - t0
    i00 = chain.index(s=0, l=0)
    pb_cf = q.blocking_probability("closed_form")
    le_cf = float(log_saturation_mean(q.K, q.rho, q.mu2, q.nu, states=[(0, 0)])[0])
    transitions = getattr(chain, "n_transitions", None)
    if transitions is None:                       # a distributed chain: the stored rates of every process
        transitions = int(chain.allsum(float(chain.local_rows().nnz)))
    lines = [
        f"{q!r}: {chain.n_states} states, {transitions} transitions (built in {tb:.2f} s)",
        f"  stationary solve ({m.status.value}, residual {m.residual:.1e}, {ts:.2f} s)",
        f"  blocking probability     {m.blocking_probability:.12e}   closed form {pb_cf:.12e}"
        f"   rel. diff {_rel(m.blocking_probability, pb_cf):.1e}",
        f"  mean shortest / longest  {m.mean_shortest:.6f} / {m.mean_longest:.6f}",
        f"  mean number in system    {m.mean_total:.6f}",
        f"  throughput               {m.throughput:.6f}",
        f"  mean sojourn time        {m.mean_sojourn_time:.6f}",
        f"  E_(0,0)[time to (K,K)]   {sat.mean[i00]:.12e}   closed form {_exp(le_cf)}"
        f"   rel. diff {_rel_log(sat.mean[i00], le_cf):.1e}",
        f"  saturation analysis ({sat.method}, {sat.status.value}, residual {sat.residual:.1e}, {th:.2f} s)",
    ]
    if getattr(chain, "rank", 0) != 0:            # PETSc: the same numbers on every process
        return ""
    return "\n".join(lines)


def _exp(log_value: float) -> str:
    """``exp(log_value)`` printed, or ``exp(...)`` beyond the double range."""
    return f"{math.exp(log_value):.12e}" if log_value < 709.0 else f"exp({log_value:.6f})"


def _rel_log(a: float, log_b: float) -> float:
    """``|a / exp(log_b) - 1|`` without forming ``exp(log_b)``."""
    if not (a > 0 and math.isfinite(a)):
        return float("inf")
    return abs(math.expm1(math.log(a) - log_b))


def _rel(a, b) -> float:
    if a == b:
        return 0.0
    return abs(a / b - 1) if b else float("inf")


def report(plots_dir=None) -> str:
    """The JSQ part of ``ctmc report``: chain against closed forms over a parameter grid."""
    import time

    rows = []
    for K, rho, mu2, nu in [(10, 0.9, 0.5, None), (200, 0.9, 0.3, None), (200, 1.3, 0.75, 1.0),
                            (300, 0.5, 0.0, None), (300, 0.9, 1.0, 0.2)]:
        q = JSQ2(K, rho, mu2, nu)
        t0 = time.perf_counter()
        pb = q.blocking_probability()
        sat = q.saturation_analysis(check=False)    # status printed in the table
        dt = time.perf_counter() - t0
        i00 = q.chain().index(s=0, l=0)
        pb_cf = q.blocking_probability("closed_form")
        le_cf = float(log_saturation_mean(K, rho, mu2, q.nu, states=[(0, 0)])[0])
        rows.append([K, rho, mu2, q.nu, q.chain().n_states, f"{pb:.6e}", f"{_rel(pb, pb_cf):.1e}",
                     f"{sat.mean[i00]:.6e}", f"{_rel_log(sat.mean[i00], le_cf):.1e}", sat.status.value,
                     f"{dt:.2f}"])
    out = format_table(rows, ["K", "rho", "mu2", "nu", "states", "P_block", "rel.err", "E_(0,0)[tau]",
                              "rel.err", "status", "s"],
                       title="Two-queue JSQ (Tibi 2019): chain vs closed forms")
    if plots_dir:
        from pathlib import Path
        import importlib.util
        ex = Path(__file__).resolve().parents[2] / "examples" / "jsq_ordering.py"
        if ex.exists():
            spec = importlib.util.spec_from_file_location("jsq_ordering", ex)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            out += "\n" + mod.main(["--plots", str(plots_dir)])
    return out
