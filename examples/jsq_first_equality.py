"""First passage on a two-queue join-the-shortest-queue chain.

States (s, l): shortest and longest queue, 0 <= s <= l <= K; arrivals at rate
rho join the shortest queue; the shortest queue is served at mu1, the longest
at 1 - mu1, equal queues at 1/2 each. Starting from an unequal state, when do
the queues first become equal, and at which common length?

ctmc answers with the generic first-passage analysis: the law of the common
length at the first equality (absorption probabilities, which sum to one),
its transform E[exp(-sT); X_T = j] and the joint CDF P(T <= t, X_T = j).
The mean time, minus the derivative of the transform at 0, is checked
against the hitting-time solver.

Run: python examples/jsq_first_equality.py [--K 40] [--rho 0.9] [--mu1 0.3]
"""
import argparse

import numpy as np

from ctmc.models.jsq import JSQ2


def main(K=40, rho=0.9, mu1=0.3):
    q = JSQ2(K, rho, mu2=1 - mu1)
    chain = q.chain()
    start = {"s": 2, "l": 7}
    i = chain.index(**start)
    fp = q.first_equality(s=[0.0, 1e-6], t=[1.0, 5.0, 20.0, 100.0])
    r = int(np.searchsorted(fp.sources, i))          # row of the starting state
    j = chain.states["l"][fp.targets]
    law = fp.probabilities[r]
    print(f"JSQ K={K}, rho={rho}, mu1={mu1}: {chain.n_states} states; start {start}")
    print(f"P(first equality at common length j), total mass {law.sum():.15f}:")
    for jj, p in zip(j, law):
        if p > 1e-6:
            print(f"  j = {jj:3d}: {p:.10f}")
    h = chain.hitting_times(lambda e: e["s"] == e["l"])
    deriv = (fp.laplace[0, r].sum() - fp.laplace[1, r].sum()) / 1e-6
    print(f"mean time to equality: {h.mean[i]:.8f} (hitting times), {deriv:.8f} (transform slope)")
    print("P(T <= t) for t = 1, 5, 20, 100:", np.round(fp.cdf[:, r, :].sum(axis=1), 8))
    return law, h.mean[i], deriv


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--K", type=int, default=40, help="capacity of each queue (default 40)")
    ap.add_argument("--rho", type=float, default=0.9, help="total arrival rate (default 0.9)")
    ap.add_argument("--mu1", type=float, default=0.3, help="service rate of the shortest queue (default 0.3)")
    a = ap.parse_args()
    main(a.K, a.rho, a.mu1)
