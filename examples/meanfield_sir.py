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


from ctmc.meanfield import PopulationModel, comparison_records, format_comparison
from ctmc.report import add_plots_argument, figure_for, save_figure

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
    fig, ax = figure_for(a.plots, figsize=(5.5, 4), layout="constrained")
    table = model.compare(Ns, orders=(1, 2), quantity=lambda x: x[WATCH], ax=ax)
    print(format_comparison(table, title=f"\nE[X_{WATCH} / N], stationary"))
    rows, slopes = comparison_records(table)
    # the point of the expansions: each order beats the one before at the largest N
    last = rows[-1]
    assert last["error_mean_field"] > last["error_refined_1"] > last["error_refined_2"], last
    if fig is not None:
        save_figure(fig, a.plots, "meanfield_sir_error.png")
    return rows, slopes


if __name__ == "__main__":
    main()
