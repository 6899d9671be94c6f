"""Hysteresis width: fewer mode oscillations against more loss.

With the onset threshold H and the discard threshold R fixed, lowering the
abatement threshold L widens the hysteresis loop <L, H>: once throttled, the
source stays throttled longer, so the control switches less often (longer
mean control cycle, longer mean time between mode changes) but more customers
are rejected. The script tabulates, for L = H-1 (no hysteresis) down to 0,
the mean cycle, the switching rate, the loss and its split by cause, for the
SIP-server-like queue of hysteresis_sip_thresholds.py (exact CTMC route), and
checks the renewal identity P(normal) = E[normal period] / E[cycle] on each row.

Run: python examples/hysteresis_width.py [--plots DIR]
"""
import argparse
import pathlib
import tempfile

import numpy as np

from ctmc.models.hysteresis import HysteresisQueue, erlang, geometric_batch
from ctmc.report import format_table

H, R = 24, 40
PARAMS = dict(lam=0.8, lam_overload=0.4, batch=geometric_batch(1 / 1.5), service=erlang(4, 1.0))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plots", help="directory for the figure (default: a temporary one)")
    args = ap.parse_args(argv)
    rows, table = [], []
    worst = 0.0
    for L in range(H - 1, -1, -3):
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
    out = pathlib.Path(args.plots or tempfile.mkdtemp(prefix="hysteresis_"))
    out.mkdir(parents=True, exist_ok=True)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = np.array(rows)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(H - a[:, 0], a[:, 2], "o-", label="mode switches per 1000 time units")
    ax.set_xlabel("hysteresis width H - L")
    ax.set_ylabel("switches per 1000 time units")
    ax2 = ax.twinx()
    ax2.plot(H - a[:, 0], a[:, 3], "s--", color="C1", label="loss probability")
    ax2.set_ylabel("loss probability")
    fig.legend(loc="center right")
    fig.tight_layout()
    path = out / "hysteresis_width.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"figure: {path}")
    return a


if __name__ == "__main__":
    main()
