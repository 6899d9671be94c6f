"""The figure of the supermarket study: errors of the mean field and of its refinement against n."""
from __future__ import annotations

import numpy as np

from ctmc.report import new_figure, save_figure

__all__ = ["plot_errors"]


def plot_errors(ns, err_mf, err_rmf, plots_dir, name="supermarket_error.png", say=print):
    """Log-log plot of both errors against n, written by :func:`ctmc.report.save_figure`; the path."""
    ns = np.asarray(ns, dtype=float)
    fig = new_figure(figsize=(5, 4))
    ax = fig.subplots()
    ax.loglog(ns, err_mf, "o-", label="|exact - mean field|")
    ax.loglog(ns, err_rmf, "s-", label="|exact - refined|")
    ax.loglog(ns, err_mf[-1] * ns[-1] / ns, "k--", lw=0.8, label="slope -1")
    ax.loglog(ns, err_rmf[-1] * ns[-1] ** 2 / ns ** 2, "k:", lw=0.8, label="slope -2")
    ax.set_xlabel("n (queues)")
    ax.set_ylabel("error of the mean jobs per server")
    ax.set_title("supermarket, d = 2, lambda = 0.9")
    ax.legend()
    fig.tight_layout()
    return save_figure(fig, plots_dir, name, dpi=120, say=say)
