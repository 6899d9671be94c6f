"""Supermarket model: exact finite-n power-of-d systems versus mean-field limits.

The ``ctmc supermarket`` command (:func:`add_arguments`, :func:`run`,
:func:`study`) and the supermarket part of ``ctmc report`` (:func:`report`,
:func:`~ctmc.models.supermarket.plot.plot_errors`): one exact system against its mean-field
approximations. The first line above is the command's help text.
"""
from __future__ import annotations

from ctmc.report import format_table

from .meanfield import refined_mean_field
from .model import MAX_STATES, Supermarket
from .plot import plot_errors

__all__ = ["add_arguments", "run", "study", "report"]


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def add_arguments(parser) -> None:
    """Options of ``ctmc supermarket``."""
    parser.add_argument("--n", type=int, default=10, help="number of queues (default 10)")
    parser.add_argument("--d", type=int, default=2, help="queues sampled per arrival (default 2)")
    parser.add_argument("--lam", type=float, default=0.9, help="arrival rate per server (default 0.9)")
    parser.add_argument("--capacity", type=int, default=None,
                        help="per-queue capacity B (default: automatic, boundary mass <= --tol)")
    parser.add_argument("--tol", type=float, default=1e-8, help="boundary-mass target (default 1e-8)")
    parser.add_argument("--without-replacement", action="store_true",
                        help="sample the d queues without replacement")
    parser.add_argument("--max-states", type=int, default=1_000_000,
                        help="largest occupancy chain the capacity search may build (default 1e6)")


def study(n, d, lam, capacity=None, replacement=True, tol=1e-8, max_states=MAX_STATES) -> str:
    """Printable comparison of the exact system with the mean field and its refinement."""
    s = Supermarket(n, d, lam, capacity, replacement, tol=tol, max_states=max_states)
    res, tr, ch = s.stationary(), s.truncation, s.chain()
    mf = refined_mean_field(d, lam, None if capacity is None else capacity, replacement) \
        if (capacity is not None or lam < 1) else None
    how = f"automatic, tol {tr.tol:.0e}" if tr.automatic else "given"
    lines = [f"supermarket n={n} d={d} lam={lam} ({'with' if replacement else 'without'} replacement)",
             f"truncation status: {tr.status}",
             f"capacity B={tr.capacity} ({how}): {ch.n_states} occupancy states, "
             f"{ch.n_transitions} transitions, build "
             f"{s.build_seconds:.2f} s; stationary {res.method} {res.wall_time:.2f} s, residual "
             f"{res.residual:.1e}, balance error {res.balance_error:.1e}",
             f"boundary mass P(some queue full) = {tr.boundary_mass:.3e}, loss probability = "
             f"{tr.loss_probability:.3e}, decay of P(max >= k) at the boundary = {tr.decay:.3g}"]
    if len(tr.tried) > 1:
        lines.append("capacity search: " + ", ".join(f"B={b}: {bm:.1e} ({ns} states, {sec:.1f} s)"
                                                      for b, bm, ns, sec in tr.tried))
    u1 = s.tail()[1]
    lines.append(f"check u_1 = lam (1 - loss): {u1:.12f} vs {s.throughput():.12f}")
    f = s.tagged_law()
    rows = []
    fm = mf.tagged_law() if mf else None
    fr = mf.tagged_law(n) if mf else None
    for k in range(f.size):
        rows.append([k, f"{f[k]:.6e}", f"{fm[k]:.6e}" if mf is not None and k < fm.size else "-",
                     f"{fr[k]:.6e}" if mf is not None and k < fr.size else "-"])
    lines.append(format_table(rows, ["k", "exact f_k", "mean field", "refined (1/n)"]))
    mj = s.mean_jobs_per_server()
    if mf is not None:
        lines.append(f"mean jobs per server: exact {mj:.6f}, mean field {mf.mean_jobs_per_server():.6f}, "
                     f"refined {mf.mean_jobs_per_server(n):.6f}")
    else:
        lines.append(f"mean jobs per server: exact {mj:.6f}")
    lines.append(f"mean sojourn time: {s.mean_sojourn_time():.6f}")
    return "\n".join(lines)


def run(args) -> str:
    """``ctmc supermarket``: one exact system against its mean-field approximations."""
    return study(args.n, args.d, args.lam, args.capacity, not args.without_replacement, args.tol,
                 args.max_states)


def report(plots_dir=None) -> str:
    """Study for ``ctmc report``: exact vs mean field vs refined at lambda = 0.9, d = 2."""
    rmf = refined_mean_field(2, 0.9)
    rows, ns, err_mf, err_rmf = [], [], [], []
    for n in (2, 3, 4, 5):   # heavier systems: examples/supermarket_meanfield.py --full
        s = Supermarket(n, 2, 0.9, tol=1e-6)
        e = s.mean_jobs_per_server()
        a, b = rmf.mean_jobs_per_server(), rmf.mean_jobs_per_server(n)
        ns.append(n)
        err_mf.append(abs(e - a))
        err_rmf.append(abs(e - b))
        rows.append([n, s.capacity, s.chain().n_states, f"{e:.6f}", f"{a:.6f}", f"{b:.6f}",
                     f"{abs(e - a):.2e}", f"{abs(e - b):.2e}", f"{s.truncation.boundary_mass:.1e}"])
    out = [format_table(rows, ["n", "B", "states", "exact", "mean field", "refined", "|err MF|",
                               "|err refined|", "boundary mass"],
                        title="supermarket d=2, lam=0.9 (with replacement): mean jobs per server "
                              "(capacity: boundary mass <= 1e-6)")]
    if plots_dir:
        plot_errors(ns, err_mf, err_rmf, plots_dir, say=out.append)
    return "\n".join(out)
