"""Hysteresis width: fewer mode oscillations against more loss.

With the onset threshold H and the discard threshold R fixed, lowering the
abatement threshold L widens the hysteresis loop <L, H>: once throttled, the
source stays throttled longer, so the control switches less often (longer
mean control cycle, longer mean time between mode changes) but more customers
are rejected. The script tabulates, for L = H-1 (no hysteresis) down to 0,
the mean cycle, the switching rate, the loss and its split by cause, for the
SIP-server-like queue of hysteresis_sip_thresholds.py (exact CTMC route), and
checks the renewal identity P(normal) = E[normal period] / E[cycle] on each row.

Run::

    python examples/hysteresis_width.py                 # L = H-1, H-4, ..., seconds
    python examples/hysteresis_width.py --step 1        # every L
    python examples/hysteresis_width.py --plots DIR     # also draw switches and loss against the width

With ``--plots DIR`` the figure goes to ``DIR/hysteresis_width.png`` (the path
is printed); without it no figure is made and matplotlib is not needed.
"""
import argparse

import numpy as np

from ctmc.models.hysteresis import HysteresisQueue, erlang, geometric_batch
from ctmc.report import add_plots_argument, format_table, new_figure, save_figure

H, R = 24, 40
PARAMS = dict(lam=0.8, lam_overload=0.4, batch=geometric_batch(1 / 1.5), service=erlang(4, 1.0))


def plot(a, plots_dir):
    """Mode switches and loss against the width H - L (rows of ``a``: L, cycle, switches, loss)."""
    fig = new_figure(figsize=(6, 4))
    ax = fig.subplots()
    ax.plot(H - a[:, 0], a[:, 2], "o-", label="mode switches per 1000 time units")
    ax.set_xlabel("hysteresis width H - L")
    ax.set_ylabel("switches per 1000 time units")
    ax2 = ax.twinx()
    ax2.plot(H - a[:, 0], a[:, 3], "s--", color="C1", label="loss probability")
    ax2.set_ylabel("loss probability")
    fig.legend(loc="center right")
    fig.tight_layout()
    return save_figure(fig, plots_dir, "hysteresis_width.png")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--step", type=int, default=3, help="decrease of L from one row to the next (default 3)")
    add_plots_argument(ap, what="the figure (hysteresis_width.png)")
    args = ap.parse_args(argv)
    if args.step < 1:
        ap.error(f"--step: must be >= 1, got {args.step}")
    rows, table = [], []
    worst = 0.0
    for L in range(H - 1, -1, -args.step):
        q = HysteresisQueue(L, H, R, **PARAMS)
        cyc, ret, norm = q.mean_cycle(), q.mean_return_time(), q.mean_normal_period()
        sw = 1000.0 / q.mean_time_between_mode_changes()
        br = q.loss_breakdown()
        err = abs(q.mode_probabilities()[0] - norm / cyc)
        worst = max(worst, err)
        rows.append((L, cyc, sw, br["total"]))
        table.append([L, H - L, f"{cyc:.2f}", f"{sw:.3f}", f"{ret:.2f}", f"{br['total']:.4f}",
                      f"{br['throttled']:.4f}", f"{br['discarded']:.4f}", f"{br['overflow']:.2e}",
                      f"{err:.1e}"])
    print(format_table(table, ["L", "width", "E[cycle]", "switches/1000", "E[overload]", "loss", "throttled",
                               "discarded", "overflow", "renewal err"],
                       title=f"H = {H}, R = {R}; width = H - L"))
    print(f"largest renewal-identity error: {worst:.1e}")
    a = np.array(rows)
    if args.plots:
        plot(a, args.plots)
    return a


if __name__ == "__main__":
    main()
