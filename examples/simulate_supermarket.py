"""The supermarket model with n = 20 queues at lambda = 0.9, beyond exact reach, by simulation.

Jobs arrive at rate ``n * lambda`` and join the shortest of ``d = 2`` queues
sampled at random (with replacement); each queue serves at rate 1. The
occupancy chain (:func:`ctmc.models.supermarket.occupancy_model`: ``M_k`` the
number of queues holding at least ``k`` jobs, ``k = 1..B``) with room for
``B = 14`` jobs a queue has C(n + B, B) = 1.4e9 states at n = 20: no exact
solver here holds it. ``ctmc.simulate`` runs the same ``ctmc.Model`` without
building it; the tail fractions ``P(queue >= k) = E[M_k] / n`` come with
99.9 % batch-means intervals, next to the mean-field limit
``lambda ** (2 ** k - 1)`` (n -> infinity).

Checks printed: the busy fraction ``E[M_1] / n`` equals ``lambda`` (every
job is served: the interval must hold it); the fraction of time at the
capacity ``B`` (``M_B >= 1``) is negligible; and at n = 4, B = 8 (495
states) every simulated tail against ctmc's exact stationary law.

Run::

    python examples/simulate_supermarket.py                 # n = 20, lambda = 0.9, a few seconds
    python examples/simulate_supermarket.py --time 2e5 --seed 2
"""
import argparse

import numpy as np

import ctmc
from ctmc.models.supermarket import n_occupancy_states, occupancy_model
from ctmc.report import format_table


def tails(n, d, lam, B, time, seed, kmax):
    model = occupancy_model(n, d, lam, B)
    sim = ctmc.simulate(model, {f"M{k}": 0 for k in range(1, B + 1)}, seed=seed)
    return model, sim.long_run([f"M{k} / {n}" for k in range(1, kmax + 1)] + [f"M{B} >= 1"], time=time,
                               confidence=0.999)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--lam", type=float, default=0.9)
    ap.add_argument("--B", type=int, default=14, help="room for jobs a queue (the chain's truncation)")
    ap.add_argument("--time", type=float, default=5e4, help="simulated time after the warm-up")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    d, shown = 2, 10

    # the check where the chain is in reach
    model, ests = tails(4, d, args.lam, 8, 10 * args.time, args.seed, 6)
    chain = model.build(initial={f"M{k}": 0 for k in range(1, 9)})
    pi = chain.stationary().pi
    exact = [float(pi @ chain.states[f"M{k}"]) / 4 for k in range(1, 7)]
    inside = all(abs(e.estimate - x) <= e.half_width for e, x in zip(ests, exact))
    print(f"check at n = 4, B = 8 ({chain.n_states} states): every simulated P(queue >= k), k = 1..6, "
          f"inside its 99.9 % interval around the exact value: {inside}\n")

    model, ests = tails(args.n, d, args.lam, args.B, args.time, args.seed, args.B)
    *tail, cap = ests
    rows = [[k, f"{e.estimate:.5f}", f"{e.half_width:.2g}", f"{args.lam ** (2 ** k - 1):.5f}", e.status]
            for k, e in enumerate(tail[:shown], start=1)]
    print(f"supermarket n = {args.n}, d = {d}, lambda = {args.lam}, B = {args.B}: "
          f"{n_occupancy_states(args.n, args.B):.3g} states (not built); {tail[0].events:.3g} events, "
          f"{tail[0].batches} batches of {tail[0].batch_time:.3g} time units, seed {args.seed}")
    print(format_table(rows, ["k", "P(queue >= k)", "+- (99.9 %)", "mean field", "status"]))
    mean_jobs = sum(e.estimate for e in tail)
    print(f"\nmean jobs a queue (the sum of the {args.B} tails): {mean_jobs:.4f}, "
          "mean response time (Little) "
          f"{mean_jobs / args.lam:.4f}")
    busy = tail[0]
    print(f"check: busy fraction {busy.estimate:.5f} +- {busy.half_width:.2g} holds lambda = {args.lam}: "
          f"{bool(abs(busy.estimate - args.lam) <= busy.half_width)}")
    print(f"check: fraction of time with a queue at the capacity B = {args.B}: {cap.estimate:.2g} "
          f"(+- {cap.half_width:.2g}); negligible: {bool(cap.estimate + cap.half_width < 1e-3)}")
    assert np.isfinite(mean_jobs)


if __name__ == "__main__":
    main()
