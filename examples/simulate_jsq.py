"""The two-queue JSQ system beyond exact reach, by simulation, checked where it is in reach.

The reduced JSQ chain (:class:`ctmc.models.jsq.JSQ2`: ``s`` the shortest and
``l`` the longest queue, each with room for ``K`` jobs) has
(K + 1)(K + 2)/2 states: K = 20000 is 2e8 states, past what the exact
solvers hold in memory here (K = 4500, 1e7 states, is the largest in
``benchmarks/README.md``). ``ctmc.simulate`` runs the same ``ctmc.Model``
without building it: long-run averages by batch means with 99.9 % intervals.

First a check: at K = 60 (1891 states) the same estimates against the exact
stationary law, each inside its interval. Then K = 20000 near saturation
(rho = 0.95): the mean number in the system, the mean imbalance ``l - s``
and the probability of more than 60 jobs.

Run::

    python examples/simulate_jsq.py                     # K = 20000, rho = 0.95, a few seconds
    python examples/simulate_jsq.py --K 50000 --time 1e7 --seed 2
"""
import argparse

import ctmc
from ctmc.exprparse import eval_on_chain
from ctmc.models.jsq import JSQ2
from ctmc.report import format_table

MEASURES = ["s + l", "l - s", "s + l > 60", "l - s >= 2"]


def estimate(K, rho, mu2, time, seed):
    q = JSQ2(K, rho, mu2)
    sim = ctmc.simulate(q.model(), {"s": 0, "l": 0}, seed=seed)
    return q, sim.long_run(MEASURES, time=time, confidence=0.999)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, default=20000)
    ap.add_argument("--rho", type=float, default=0.95)
    ap.add_argument("--mu2", type=float, default=0.3)
    ap.add_argument("--time", type=float, default=2e6, help="simulated time after the warm-up")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    q, ests = estimate(60, args.rho, args.mu2, args.time, args.seed)
    chain = q.chain()
    pi = q.stationary().pi
    rows, ok = [], True
    for text, e in zip(MEASURES, ests):
        exact = float(pi @ eval_on_chain(text, chain))
        inside = abs(e.estimate - exact) <= e.half_width
        ok &= inside
        rows.append([text, f"{exact:.5g}", f"{e.estimate:.5g}", f"{e.half_width:.2g}", inside])
    print(f"check at K = 60 ({q.n_states} states), rho = {args.rho}, mu2 = {args.mu2}, 99.9 % intervals:")
    print(format_table(rows, ["measure", "exact", "simulated", "+-", "inside"]))
    print(f"every exact value inside its interval: {ok}\n")

    q, ests = estimate(args.K, args.rho, args.mu2, args.time, args.seed)
    print(f"K = {args.K} ({q.n_states:.3g} states, not built), rho = {args.rho}, mu2 = {args.mu2}; "
          f"{ests[0].events:.3g} events, {ests[0].batches} batches of {ests[0].batch_time:.3g} time units, "
          f"seed {args.seed}:")
    print(format_table([[e.expression, f"{e.estimate:.5g}", f"{e.half_width:.2g}", e.status] for e in ests],
                       ["measure", "long-run average", "+- (99.9 %)", "status"]))


if __name__ == "__main__":
    main()
