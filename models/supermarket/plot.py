"""The figure of the supermarket study: errors of the mean field and of its refinement against n,
drawn by :func:`ctmc.plot.meanfield_error` (log-log, least-squares slopes in the legend)."""
from __future__ import annotations

from ctmc.plot import meanfield_error, style
from ctmc.report import save_figure

__all__ = ["plot_errors"]


def plot_errors(ns, err_mf, err_rmf, plots_dir, name="supermarket_error.png", say=print):
    """Log-log plot of both absolute errors of the mean jobs per server against n, written by
    :func:`ctmc.report.save_figure` (a png at 300 dpi under the default name; the extension of
    ``name`` chooses the format); the path."""
    ax = meanfield_error(ns, {"mean field": err_mf, "refined": err_rmf}, quantity="mean jobs per server",
                         xlabel="n (queues)")
    with style():
        ax.set_title("supermarket, d = 2, lambda = 0.9")
    return save_figure(ax.figure, plots_dir, name, dpi=300, say=say)
