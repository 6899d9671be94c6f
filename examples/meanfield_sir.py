r"""SIR epidemic with waning immunity: exact finite-N values beside the mean field and its refinements.

N individuals are susceptible (S), infected (I) or recovered (R). A susceptible
is infected at rate :math:`\beta x_I + \varepsilon` (contacts with the infected
fraction :math:`x_I`, plus infections brought from outside, which keep the
disease-free state from absorbing the finite system), an infected recovers at
rate :math:`\gamma`, a recovered loses immunity at rate :math:`\nu`. Declared
once with :class:`ctmc.meanfield.PopulationModel`, the model gives

- the exact stationary densities of the N-system (a CTMC on the counts, with
  :math:`\binom{N+2}{2}` states, solved by ctmc),
- the mean-field fixed point :math:`x^*` (N = infinity),
- the refined mean field of order 1, :math:`x^* + V/N` (Gast & Van Houdt
  2017), and of order 2, :math:`x^* + V/N + A/N^2` (Gast, Bortolussi &
  Tribastone 2019),

and the table shows that their errors on the expected infected fraction
:math:`E[X_I/N]` fall like :math:`1/N`, :math:`1/N^2` and :math:`1/N^3`: the
log-log slopes fitted over the Ns are printed below the table (about -1, -2
and -3).

Run::

    python examples/meanfield_sir.py                    # N = 10, 20, 40, 80, 160: a few seconds
    python examples/meanfield_sir.py --N 25 50 100 200  # other population sizes
    python examples/meanfield_sir.py --plots DIR        # also write the log-log error plot to DIR

With ``--plots DIR`` the errors against N go to ``DIR/meanfield_sir_error.png``
(the path is printed); without it no figure is made and matplotlib is not
needed.
"""
from __future__ import annotations

import argparse
import math

import numpy as np

from ctmc.meanfield import PopulationModel
from ctmc.report import add_plots_argument, format_table, new_figure, save_figure

BETA, EPS, GAMMA, NU = 4.0, 0.5, 1.0, 1.0
SPECIES = ["S", "I", "R"]
WATCH = "I"                                      # the density whose expectation is compared


def sir_model():
    """The SIR model with waning immunity and outside infection (rates are per N, of the densities x)."""
    m = PopulationModel("sir-waning", SPECIES)
    m.transition("infection", {"S": -1, "I": +1}, lambda x: (BETA * x["I"] + EPS) * x["S"])
    m.transition("recovery", {"I": -1, "R": +1}, lambda x: GAMMA * x["I"])
    m.transition("waning", {"R": -1, "S": +1}, lambda x: NU * x["R"])
    return m


def error_table(model, Ns, quantity, ax=None):
    """Exact, mean-field and refined values of ``quantity(densities)`` against N, from ``model.compare``.

    Returns the table rows, the errors (one row per N: mean field, refined 1,
    refined 2), their fitted log-log slopes, and the slopes of the max-over-species
    errors that ``compare`` fits itself (the ones its plot on ``ax`` shows).
    """
    mf = model.mean_field()
    if not mf.stable:
        raise SystemExit(f"{model.name}: the mean-field fixed point is not stable; no expansion around it")
    table = model.compare(Ns, orders=(1, 2), ax=ax)
    records = table.to_dict("records") if hasattr(table, "to_dict") else table
    max_slopes = table.attrs["slopes"] if hasattr(table, "attrs") else records[0]["slopes"]
    S = len(model.species)
    rows, errs = [], []
    for r in records:
        ex, x_mf, r1, r2 = (quantity(np.asarray(r[k])) for k in ("exact", "mean_field", "refined_1", "refined_2"))
        e = [abs(ex - x_mf), abs(ex - r1), abs(ex - r2)]
        errs.append(e)
        rows.append([r["N"], math.comb(r["N"] + S - 1, S - 1), f"{ex:.8f}", f"{x_mf:.8f}", f"{r1:.8f}",
                     f"{r2:.8f}", *(f"{v:.2e}" for v in e)])
    errs = np.array(errs)
    slopes = [float(np.polyfit(np.log(Ns), np.log(errs[:, j]), 1)[0]) for j in range(3)]
    return rows, errs, slopes, max_slopes


HEADERS = ["N", "states", "exact", "mean field", "refined 1", "refined 2", "err MF", "err ref 1", "err ref 2"]


def print_results(rows, slopes, max_slopes, Ns, title):
    print(format_table(rows, HEADERS, title=title))
    print(f"log-log slopes of these errors over N = {Ns[0]}..{Ns[-1]}: mean field {slopes[0]:.2f}, "
          f"refined 1/N {slopes[1]:.2f}, refined 1/N^2 {slopes[2]:.2f}")
    print("slopes of the errors on the whole density vector (max over species, as compare() fits them): "
          + ", ".join(f"{k.replace('error_', '')} {v:.2f}" for k, v in max_slopes.items()))


def plotting_axes(plots):
    """A detached figure and its axes when ``--plots`` is given, else (None, None)."""
    if not plots:
        return None, None
    fig = new_figure(figsize=(5.5, 4), layout="constrained")
    return fig, fig.subplots()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--N", type=int, nargs="+", default=[10, 20, 40, 80, 160], help="population sizes")
    add_plots_argument(ap, what="the error plot (meanfield_sir_error.png)")
    a = ap.parse_args(argv)
    if len(a.N) < 2 or min(a.N) < 2:
        ap.error("--N: give at least two sizes, each >= 2")
    Ns = sorted(a.N)
    model = sir_model()
    mf = model.mean_field()
    print(f"SIR with waning: beta = {BETA}, eps = {EPS}, gamma = {GAMMA}, nu = {NU}")
    print("mean-field fixed point: " + ", ".join(f"x_{s} = {v:.6f}" for s, v in zip(SPECIES, mf.fixed_point)))
    fig, ax = plotting_axes(a.plots)
    rows, errs, slopes, max_slopes = error_table(model, Ns, lambda x: float(x[SPECIES.index(WATCH)]), ax=ax)
    print_results(rows, slopes, max_slopes, Ns, f"\nE[X_{WATCH} / N], stationary")
    # the point of the expansions: each order beats the one before at the largest N
    assert errs[-1, 0] > errs[-1, 1] > errs[-1, 2], errs[-1]
    if fig is not None:
        save_figure(fig, a.plots, "meanfield_sir_error.png")
    return rows, slopes


if __name__ == "__main__":
    main()
