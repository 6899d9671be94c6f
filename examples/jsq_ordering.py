"""Ordering in mu2 of the two-queue JSQ system (Tibi 2019), shown numerically.

Tibi proves by coupling that, as the service rate mu2 of the longest queue
varies (mu1 = 1 - mu2 for the shortest), the system is totally ordered: the
total number N(t) and the longest queue decrease stochastically as mu2
grows. The extreme cases bound every other one: mu2 = 1 is full pooling
(N is then an M/M/1/2K queue) and mu2 = 0 the worst case. The bounds stay
valid in the extended model, where the idle server helps or disturbs the
other one at rate nu while the shortest queue is empty.

This script computes the exact stationary laws with ctmc for a grid of mu2
(and of (mu2, nu) for the extended model), checks every ordering claim on the
complementary distribution functions P(N >= n) and P(longest >= n), prints
the largest violation (zero up to rounding) and, with ``--plots DIR``, draws
the curves.

Run::

    python examples/jsq_ordering.py                       # K = 30, rho = 0.9, about a second
    python examples/jsq_ordering.py --K 60 --rho 1.2
    python examples/jsq_ordering.py --plots DIR           # also draw the curves

With ``--plots DIR`` the figure goes to ``DIR/jsq_ordering.png`` (the path is
printed); without it no figure is made and matplotlib is not needed.
"""
import argparse

import numpy as np

from ctmc.models.jsq import JSQ2
from ctmc.report import add_plots_argument, format_table, new_figure, save_figure


def ccdf(p):
    """P(X >= n) for n = 0..len(p)-1."""
    return np.cumsum(p[::-1])[::-1]


def study(K=30, rho=0.9, n_mu=11):
    mus = np.linspace(0.0, 1.0, n_mu)
    N = np.array([ccdf(JSQ2(K, rho, m).total_number_law()) for m in mus])
    L = np.array([ccdf(JSQ2(K, rho, m).longest_queue_law()) for m in mus])
    ext = {}
    for mu2 in (0.25, 0.5, 0.75):
        for nu in (0.0, 0.5, 1.0):
            ext[(mu2, nu)] = ccdf(JSQ2(K, rho, mu2, nu).total_number_law())
    viol = {
        "N decreasing in mu2": float(max(np.diff(N, axis=0).max(), 0.0)),
        "longest decreasing in mu2": float(max(np.diff(L, axis=0).max(), 0.0)),
        "extended model above mu2 = 1": float(max(max((N[-1] - c).max() for c in ext.values()), 0.0)),
        "extended model below mu2 = 0": float(max(max((c - N[0]).max() for c in ext.values()), 0.0)),
    }
    mm1 = rho ** np.arange(2 * K + 1)
    viol["mu2 = 1 is M/M/1/2K (max abs diff)"] = float(np.abs(N[-1] - ccdf(mm1 / mm1.sum())).max())
    return mus, N, L, ext, viol


def plot(K, rho, mus, N, L, ext, plots_dir, say=print):
    """The complementary distribution functions of N and of the longest queue; the path written."""
    import matplotlib

    fig = new_figure(figsize=(15, 4.2))
    ax = fig.subplots(1, 3)
    cmap = matplotlib.colormaps["viridis"]
    n = np.arange(N.shape[1])
    for k, m in enumerate(mus):
        ax[0].semilogy(n, N[k], color=cmap(k / (len(mus) - 1)), label=f"mu2={m:.1f}" if k % 2 == 0 else None)
        ax[1].semilogy(np.arange(L.shape[1]), L[k], color=cmap(k / (len(mus) - 1)))
    ax[0].set(title=f"P(N >= n), K={K}, rho={rho}", xlabel="n")
    ax[0].legend(fontsize=7)
    ax[1].set(title="P(longest >= n)", xlabel="n")
    ax[2].semilogy(n, N[0], "k--", lw=2, label="mu2 = 0 (upper bound)")
    ax[2].semilogy(n, N[-1], "k:", lw=2, label="mu2 = 1 = M/M/1/2K (lower bound)")
    for (mu2, nu), c in ext.items():
        ax[2].semilogy(n, c, lw=0.8, label=f"mu2={mu2}, nu={nu}")
    ax[2].set(title="extended model (idle server helps/disturbs)", xlabel="n")
    ax[2].legend(fontsize=6)
    fig.tight_layout()
    return save_figure(fig, plots_dir, "jsq_ordering.png", say=say)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--K", type=int, default=30, help="capacity of each queue (default 30)")
    p.add_argument("--rho", type=float, default=0.9, help="total arrival rate (default 0.9)")
    add_plots_argument(p, what="the figure (jsq_ordering.png)")
    a = p.parse_args(argv)
    mus, N, L, ext, viol = study(a.K, a.rho)
    title = f"JSQ ordering in mu2 (K = {a.K}, rho = {a.rho}): largest violations of each claim"
    lines = [format_table([[k, f"{v:.1e}"] for k, v in viol.items()], ["claim", "largest violation"],
                          title=title)]
    i = a.K  # P(N >= K) as a summary, decreasing in mu2
    lines.append("  P(N >= K) for mu2 = " + ", ".join(f"{m:.1f}: {N[k, i]:.3e}" for k, m in enumerate(mus)))
    if a.plots:
        plot(a.K, a.rho, mus, N, L, ext, a.plots, say=lines.append)
    return "\n".join(lines)


if __name__ == "__main__":
    print(main())
