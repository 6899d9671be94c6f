"""Supermarket model at lambda = 0.9: the seed's mean-field table, exact finite-n values, refined mean field.

1. The table of the seed: f_k (fraction of queues with exactly k jobs) at
   lambda = 0.9 for random routing (d = 1, f_k = (1 - lambda) lambda^k) and for
   two choices (d = 2, mean field, f_k = u_k - u_{k+1}, u_k = lambda^(2^k - 1)),
   beside the exact f_k of finite systems and the refined (1/n) mean field.
2. Mean jobs per server for n = 2..20: exact (occupancy chain), mean field,
   refined mean field, and their errors; a log-log plot of the errors
   against n (slopes -1 and -2).

The exact infinite-buffer value is approached through capacities B1 < B2 < B3
(each an exact chain); the table shows the value at the largest capacity, its
boundary mass P(some queue full), and a geometric (Aitken) extrapolation in B
whose last increment is printed as the truncation-error estimate.

Run::

    python examples/supermarket_meanfield.py              # n = 2..4, seconds
    python examples/supermarket_meanfield.py --full       # n = 2..20, about half an hour
    python examples/supermarket_meanfield.py --plots DIR  # also write the error plot to DIR

With ``--plots DIR`` the log-log plot of the errors goes to
``DIR/supermarket_error.png`` (the path is printed); without it no figure is
made and matplotlib is not needed.
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from ctmc.models.supermarket import (Supermarket, plot_errors, mean_field_fixed_point, n_occupancy_states,
                                     refined_mean_field)
from ctmc.report import add_plots_argument, format_table

LAM, D = 0.9, 2


def seed_table(ns=(2, 3), n_refined=10, kmax=8, tol=1e-8):
    """Rows k, f_k (d=1), f_k (d=2 MF), exact f_k for each n in ns, refined f_k at n_refined."""
    u1 = mean_field_fixed_point(1, LAM)
    u2 = mean_field_fixed_point(D, LAM)
    f1 = u1[:-1] - u1[1:]
    f2 = u2[:-1] - u2[1:]
    rmf = refined_mean_field(D, LAM)
    fr = rmf.tagged_law(n_refined)
    exact = [Supermarket(n, D, LAM, tol=tol).tagged_law() for n in ns]
    rows = []
    for k in range(kmax + 1):
        ex = [f"{f[k]:.6f}" if k < f.size else "-" for f in exact]
        rows.append([k, f"{f1[k]:.6f}", f"{f2[k]:.6f}", *ex, f"{fr[k]:.6f}"])
    head = ["k", "d=1 (seed)", "d=2 MF (seed)", *[f"exact n={n}" for n in ns], f"refined n={n_refined}"]
    return head, rows, (f1, f2)


def exact_mean(n, budget):
    """Exact means at the three largest capacities within ``budget`` states, and an extrapolation."""
    B = 1
    while B < 40 and n_occupancy_states(n, B + 1) <= budget:
        B += 1
    caps = [b for b in (B - 2, B - 1, B) if b >= 1]
    vals, masses = [], []
    for b in caps:
        s = Supermarket(n, D, LAM, capacity=b)
        vals.append(s.mean_jobs_per_server())
        masses.append(s.truncation.boundary_mass)
    est, err = vals[-1], float("nan")
    if len(vals) == 3:
        d1, d2 = vals[1] - vals[0], vals[2] - vals[1]
        r = d2 / d1 if d1 != 0 else 0.0
        if 0 < r < 1:
            est = vals[-1] + d2 * r / (1 - r)
            err = abs(est - vals[-1])
    return caps[-1], n_occupancy_states(n, caps[-1]), vals[-1], masses[-1], est, err


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="n = 2..20 (about half an hour)")
    ap.add_argument("--nmax", type=int, default=None, help="largest n (default 4, 20 with --full)")
    ap.add_argument("--budget", type=int, default=None,
                    help="states per chain (default 2e4, 3.2e6 with --full)")
    ap.add_argument("--tol", type=float, default=None,
                    help="boundary mass of the exact f_k columns (default 1e-8, 1e-5 with --full)")
    add_plots_argument(ap, what="the error plot (supermarket_error.png)")
    a = ap.parse_args(argv)
    nmax = a.nmax if a.nmax is not None else (20 if a.full else 4)
    if nmax < 2:
        ap.error(f"--nmax: must be >= 2, got {nmax}")
    seed_ns = tuple(n for n in ((2, 5, 10) if a.full else (2, 3)) if n <= nmax)
    tol = a.tol if a.tol is not None else (1e-5 if a.full else 1e-8)
    head, rows, (f1, f2) = seed_table(seed_ns, tol=tol)
    print(f"f_k at lambda = {LAM}: the seed's mean-field table (d = 1, d = 2) with exact and refined values")
    print(format_table(rows, head))
    # cross-checks of the seed's closed forms
    assert np.allclose(f1[:9], (1 - LAM) * LAM ** np.arange(9), rtol=1e-14)
    k = np.arange(9)
    assert np.allclose(f2[:9], LAM ** (2.0 ** k - 1) - LAM ** (2.0 ** (k + 1) - 1), rtol=1e-12)

    ns = list(range(2, nmax + 1))
    budget = a.budget or (3_200_000 if a.full else 20_000)
    rmf = refined_mean_field(D, LAM)
    mf = rmf.mean_jobs_per_server()
    rows, err_mf, err_rmf, used = [], [], [], []
    for n in ns:
        B, states, val, mass, est, err = exact_mean(n, budget)
        ref = rmf.mean_jobs_per_server(n)
        rows.append([n, B, states, f"{val:.6f}", f"{mass:.1e}", f"{est:.6f}", f"{err:.1e}", f"{mf:.6f}",
                     f"{ref:.6f}", f"{abs(est - mf):.3e}", f"{abs(est - ref):.3e}"])
        if math.isfinite(err) and err < 0.2 * abs(est - ref):
            used.append(n)
            err_mf.append(abs(est - mf))
            err_rmf.append(abs(est - ref))
    print(f"\nmean jobs per server, d = {D}, lambda = {LAM} (sampling with replacement)")
    print(format_table(rows, ["n", "B", "states", "exact at B", "P(full)", "extrapolated", "+-",
                              "mean field", "refined", "|err MF|", "|err refined|"]))
    if len(used) >= 3:
        s1 = np.polyfit(np.log(used), np.log(err_mf), 1)[0]
        s2 = np.polyfit(np.log(used), np.log(err_rmf), 1)[0]
        print(f"log-log slopes over n = {used[0]}..{used[-1]} (where the truncation error is < 20 % of the "
              f"refined error): mean field {s1:.2f}, refined {s2:.2f}")
        assert all(b < a for a, b in zip(err_mf, err_rmf)), "refined mean field should beat mean field"
    if a.plots and used:
        plot_errors(used, err_mf, err_rmf, a.plots)
    elif a.plots:
        print("no figure: no n where the truncation error is small enough (raise --budget)")
    return rows


if __name__ == "__main__":
    main()
