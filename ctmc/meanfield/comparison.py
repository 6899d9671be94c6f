"""The comparison of :meth:`ctmc.meanfield.PopulationModel.compare`: its slopes, its table as text
and as records, its log-log plot of the errors (matplotlib, imported when drawing)."""
from __future__ import annotations

import numpy as np

from ..plot import loglog_fit, meanfield_error
from ..report import format_table, save_figure

__all__ = ["comparison_records", "format_comparison", "error_slopes", "plot_comparison"]


def error_slopes(rows, Ns, orders) -> dict:
    """The fitted log-log slopes against ``Ns`` of the errors of ``rows`` (none with fewer than two
    sizes; none for a column with a zero error)."""
    slopes = {}
    if len(Ns) >= 2:
        for col in ["error_mean_field"] + [f"error_refined_{k}" for k in orders]:
            e = np.array([r[col] for r in rows])
            if (e > 0).all():
                slopes[col] = loglog_fit(Ns, e)[0]
    return slopes


def comparison_records(table) -> tuple:
    """``(rows, slopes)`` of a :meth:`PopulationModel.compare` table, whether a DataFrame or a list of dicts."""
    rows = table.to_dict("records") if hasattr(table, "to_dict") else list(table)
    slopes = table.attrs["slopes"] if hasattr(table, "attrs") else (rows[0].get("slopes", {}) if rows else {})
    return rows, slopes


def format_comparison(table, title: str = "") -> str:
    """The table of :meth:`PopulationModel.compare` as text, slopes below it (values shown for a
    ``quantity``; for whole density vectors the max-over-species errors only)."""
    rows, slopes = comparison_records(table)
    keys = ["exact", "mean_field"] + sorted(k for k in rows[0] if k.startswith("refined_")) if rows else []
    errs = [f"error_{k}" for k in keys[1:]]
    scalar = bool(rows) and np.ndim(rows[0]["exact"]) == 0
    shown = keys if scalar else []
    body = [[r["N"], r["states"], *(f"{float(r[k]):.8f}" for k in shown), *(f"{r[e]:.2e}" for e in errs)]
            for r in rows]
    heads = ["N", "states", *(k.replace("_", " ") for k in shown), *(e.replace("error_", "err ").replace("_", " ")
                                                                     for e in errs)]
    text = format_table(body, heads, title=title)
    if slopes:
        text += "\nlog-log slopes of the errors: " + ", ".join(
            f"{k.replace('error_', '').replace('_', ' ')} {v:.2f}" for k, v in slopes.items())
    return text


def plot_comparison(rows, orders, slopes, path, ax, name, quantity):
    """Draw the errors of the comparison ``rows`` against ``N`` on log-log axes (``ax``, or a new
    figure written to ``path``) with :func:`ctmc.plot.meanfield_error`: the legend gives the fitted
    slopes (``slopes``, the same fit, is what the table reports)."""
    series = {"mean field": [r["error_mean_field"] for r in rows]}
    series.update({f"refined order {k}": [r[f"error_refined_{k}"] for r in rows] for k in orders})
    series = {k: e for k, e in series.items() if any(x > 0 for x in e)}    # an exact series has no log
    ax = meanfield_error([r["N"] for r in rows], series, quantity=quantity, ax=ax, fit=len(rows) >= 2)
    ax.set_title(name)
    if path is not None:
        import pathlib
        path = pathlib.Path(path)
        save_figure(ax.figure, path.parent, path.name, say=None)
