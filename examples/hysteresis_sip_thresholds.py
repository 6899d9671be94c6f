"""Loss probability and mean overload duration as functions of the thresholds (L, H).

A SIP-server-like parameter set (time unit: one mean message-processing time):
offered load 1.2 (a 20 % overload: lam = 0.8 batches per unit time of mean
size 1.5, the NOTIFY-style bursts that motivate batch arrivals), throttled to
lam_overload = 0.4 in overload (half the batches rejected at the source),
low-variability processing (Erlang-4 service, scv 1/4), a buffer of capacity
r = R = 40 (the discard threshold) with partial batch acceptance, instant
mode decisions. For every admissible pair L < H < R the script computes, on
the exact CTMC, the customer loss probability and the mean overload period
(entering overload until normal again, discard excursions included), and draws
both as heat maps.

Run::

    python examples/hysteresis_sip_thresholds.py                 # grid step 6, seconds
    python examples/hysteresis_sip_thresholds.py --full          # every pair (L, H)
    python examples/hysteresis_sip_thresholds.py --plots DIR     # also write the heat maps to DIR

With ``--plots DIR`` the heat maps go to ``DIR/hysteresis_sip_thresholds.png``
(the path is printed); without it no figure is made and matplotlib is not needed.
"""
import argparse

import numpy as np

from ctmc.models.hysteresis import HysteresisQueue, erlang, geometric_batch
from ctmc.report import add_plots_argument, format_table, new_figure, save_figure

R = 40
PARAMS = dict(lam=0.8, lam_overload=0.4, batch=geometric_batch(1 / 1.5), service=erlang(4, 1.0))


def grid(step):
    Hs = list(range(4, R, step))
    Ls = list(range(0, R - 1, step))
    loss = np.full((len(Ls), len(Hs)), np.nan)
    ret = np.full_like(loss, np.nan)
    for j, H in enumerate(Hs):
        for i, L in enumerate(Ls):
            if L >= H:
                continue
            q = HysteresisQueue(L, H, R, **PARAMS)
            loss[i, j] = q.loss_probability()
            ret[i, j] = q.mean_return_time()
    return Ls, Hs, loss, ret


def plot(Ls, Hs, loss, ret, plots_dir):
    """Heat maps of the loss and of the mean overload period over (L, H); the path written."""
    fig = new_figure(figsize=(11, 4.5))
    axes = fig.subplots(1, 2)
    for ax, z, title in ((axes[0], loss, "customer loss probability"),
                         (axes[1], ret, "mean overload period")):
        im = ax.pcolormesh(Hs, Ls, z, shading="nearest")
        fig.colorbar(im, ax=ax)
        ax.set_xlabel("H (overload onset)")
        ax.set_ylabel("L (overload abatement)")
        ax.set_title(title)
    fig.suptitle(f"M^X|E4|1|{R} with hysteretic control (lam=0.8, E[X]=1.5, lam_overload=0.4)")
    fig.tight_layout()
    return save_figure(fig, plots_dir, "hysteresis_sip_thresholds.png")


def grid_table(Ls, Hs, values, fmt, title):
    """A table of ``values[i, j]`` at (L = Ls[i], H = Hs[j]); "-" where undefined (L >= H)."""
    rows = [[L, *("-" if np.isnan(v) else format(v, fmt) for v in row)] for L, row in zip(Ls, values)]
    return format_table(rows, ["L\\H", *map(str, Hs)], title=title)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="every integer pair (L, H), the same as --step 1")
    ap.add_argument("--step", type=int, default=6, help="spacing of the grid of thresholds (default 6)")
    add_plots_argument(ap, what="the heat maps (hysteresis_sip_thresholds.png)")
    args = ap.parse_args(argv)
    if args.step < 1:
        ap.error(f"--step: must be >= 1, got {args.step}")
    Ls, Hs, loss, ret = grid(1 if args.full else args.step)
    print(grid_table(Ls, Hs, loss, ".4f", f"loss probability (rows L, columns H), R = {R}"))
    print(grid_table(Ls, Hs, ret, ".2f", "mean overload period (rows L, columns H)"))
    i, j = np.unravel_index(np.nanargmin(loss), loss.shape)
    print(f"smallest loss {loss[i, j]:.5f} at L = {Ls[i]}, H = {Hs[j]} "
          f"(mean overload period {ret[i, j]:.2f})")
    if args.plots:
        plot(Ls, Hs, loss, ret, args.plots)
    return loss, ret


if __name__ == "__main__":
    main()
