r"""Join-idle-queue by sampling, JIQ(d): exact finite-N values beside the mean field and its refinements.

N servers of rate 1, each with a buffer of K jobs; jobs arrive at rate
:math:`\lambda N`. An arrival probes d servers (with replacement) and joins an
idle one if it finds one; otherwise it joins a random probed server (lost when
that server is full). With :math:`x_k` the fraction of servers holding k jobs,
the transitions, per N and as functions of the densities, are

- :math:`0 \to 1` at :math:`\lambda\,(1 - (1 - x_0)^d)`,
- :math:`k \to k+1` at :math:`\lambda\, x_k (1 - x_0)^{d-1}` for
  :math:`1 \le k < K`,
- :math:`k \to k-1` at :math:`x_k` (service).

Unlike power-of-d it does not compare queue lengths: it only looks for idle
servers (the pull idea of join-idle-queue, with the dispatcher's idle list
replaced by d probes, which keeps the drift smooth, so the refined expansions
apply; the plain join-idle-queue drift jumps at :math:`x_0 = 0`). Declared once
with :class:`ctmc.meanfield.PopulationModel`, the model gives the exact
stationary mean queue length :math:`E[\sum_k k X_k / N]` (a CTMC on the counts
with :math:`\binom{N+K}{K}` states), the mean field (N = infinity) and the
refined mean field of order 1 (Gast & Van Houdt 2017) and 2 (Gast,
Bortolussi & Tribastone 2019); their errors fall like :math:`1/N`,
:math:`1/N^2` and :math:`1/N^3` (the fitted log-log slopes are printed: about
-1, -2 and -3).

Run::

    python examples/meanfield_load_balancing.py                     # K = 3, N = 10, 20, 30, 40, 60: a few seconds
    python examples/meanfield_load_balancing.py --K 4 --N 10 20 30  # other buffers and sizes
    python examples/meanfield_load_balancing.py --plots DIR         # also write the log-log error plot to DIR

With ``--plots DIR`` the errors against N go to
``DIR/meanfield_load_balancing_error.png`` (the path is printed); without it no
figure is made and matplotlib is not needed.
"""
from __future__ import annotations

import argparse

import numpy as np

from ctmc.meanfield import PopulationModel, comparison_records, format_comparison
from ctmc.report import add_plots_argument, figure_for, save_figure

LAM, D = 0.9, 2


def jiq_model(K, lam=LAM, d=D):
    """JIQ(d) with buffer K: species x0..xK, the fraction of servers holding k jobs."""
    m = PopulationModel(f"jiq{d}-K{K}", [f"x{k}" for k in range(K + 1)])
    m.transition("arrive0", {"x0": -1, "x1": +1}, lambda x: lam * (1 - (1 - x["x0"]) ** d))
    for k in range(1, K):
        m.transition(f"arrive{k}", {f"x{k}": -1, f"x{k + 1}": +1},
                     lambda x, k=k: lam * x[f"x{k}"] * (1 - x["x0"]) ** (d - 1))
    for k in range(1, K + 1):
        m.transition(f"serve{k}", {f"x{k}": -1, f"x{k - 1}": +1}, lambda x, k=k: x[f"x{k}"])
    return m


def mean_queue(x, index):
    """Mean number of jobs per server, sum_k k x_k."""
    return float(np.dot(index, x))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, default=3, help="buffer per server (K + 1 species)")
    ap.add_argument("--N", type=int, nargs="+", default=[10, 20, 30, 40, 60], help="numbers of servers")
    add_plots_argument(ap, what="the error plot (meanfield_load_balancing_error.png)")
    a = ap.parse_args(argv)
    if len(a.N) < 2 or min(a.N) < 2:
        ap.error("--N: give at least two sizes, each >= 2")
    if a.K < 2:
        ap.error(f"--K: must be >= 2, got {a.K}")
    Ns = sorted(a.N)
    model = jiq_model(a.K)
    mf = model.mean_field()
    print(f"JIQ(d) load balancing: lambda = {LAM}, d = {D}, buffer K = {a.K}")
    print("mean-field fixed point: " + ", ".join(f"x{k} = {v:.6f}" for k, v in enumerate(mf.fixed_point)))
    fig, ax = figure_for(a.plots, figsize=(5.5, 4), layout="constrained")
    table = model.compare(Ns, orders=(1, 2), quantity=lambda x: sum(k * x[f"x{k}"] for k in range(a.K + 1)), ax=ax)
    print(format_comparison(table, title="\nmean number of jobs per server, stationary"))
    rows, slopes = comparison_records(table)
    # the point of the expansions: each order beats the one before at the largest N
    last = rows[-1]
    assert last["error_mean_field"] > last["error_refined_1"] > last["error_refined_2"], last
    if fig is not None:
        save_figure(fig, a.plots, "meanfield_load_balancing_error.png")
    return rows, slopes


if __name__ == "__main__":
    main()
