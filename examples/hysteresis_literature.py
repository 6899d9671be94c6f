"""Hysteretic overload control: checks against published values and the papers' own methods.

What the literature on M|G|1|<L,H>|<H,R> (Sopin; Gaidamaka, Pechinkin,
Razumchik, Samouylov, Sopin, AMCS 24(3) 2014, doi:10.2478/amcs-2014-0038)
publishes could not be read here: only abstracts are available, so none of
their tables is reproduced. This script reproduces what can be cited:

1. The M/M/1/K example of the LINE solver (qsys_mm1k_loss / qsys_mg1k_loss,
   after Niu & Cooper, Math. Oper. Res. 18(2), 1993): lambda = 2, mu = 3,
   K = 5, loss = (1 - rho) rho^K / (1 - rho^(K+1)) = 32/665, with the control
   switched off (lam_overload = lam, H = R - 1), by both routes, and with
   deterministic service against the Niu-Cooper relation p_K = 1 - 1/(pi_0 + rho).
2. The M|M|1|<L,H>|<H,R> paper (Gaidamaka et al., Inform. Primen. 7(4), 2013,
   https://m.mathnet.ru/eng/ia282) computes the return time from the overload
   states to the normal states with "a system of equations with the return
   times of each overload state as unknowns". We write that system by hand
   (first-step analysis on the overload and discard states) and compare with
   ctmc's hitting times, state by state; the mean discard period is (R - H)/mu.
   With constant service the same return time comes from the embedded chain
   and is compared with its Erlang-k approximations.
3. The reachable states listed in the papers for single arrivals and
   exponential service: (0, 0..H-1), (1, L+1..R-1), (2, H+1..R).

Run: python examples/hysteresis_literature.py
"""
import argparse
import textwrap
from fractions import Fraction

import numpy as np
import scipy.stats as st

from ctmc.models.hysteresis import HysteresisQueue, deterministic, erlang
from ctmc.report import format_table


def niu_cooper_md1k(lam, d, K):
    """Loss of M/D/1/K from the departure-epoch chain and p_K = 1 - 1/(pi_0 + rho)."""
    a = st.poisson.pmf(np.arange(K + 60), lam * d)
    P = np.zeros((K, K))
    for i in range(K):
        for j in range(K - 1):
            k = j - max(i - 1, 0)
            P[i, j] = a[k] if k >= 0 else 0.0
        P[i, K - 1] = 1 - P[i, :K - 1].sum()
    M = np.vstack([(P.T - np.eye(K))[:-1], np.ones(K)])
    b = np.zeros(K)
    b[-1] = 1.0
    pid = np.linalg.solve(M, b)
    return 1 - 1 / (pid[0] + lam * d)


def return_time_system(L, H, R, l1, mu):
    """First-step equations for T(s, n), the mean return time from overload/discard state (s, n).

    Written directly from the transition rules (independent of the model code):
    overload (1, n), L < n < R: T = 1/(l1 + mu) + [l1 T(next up) + mu T(next down)]/(l1 + mu);
    discard (2, n), H < n <= R: T = 1/mu + T(next down). T = 0 on the normal states.
    """
    states = [(1, n) for n in range(L + 1, R)] + [(2, n) for n in range(H + 1, R + 1)]
    idx = {x: i for i, x in enumerate(states)}
    A = np.zeros((len(states), len(states)))
    b = np.zeros(len(states))
    for (s, n), i in idx.items():
        if s == 1:
            up = (1, n + 1) if n + 1 < R else (2, R)
            down = (1, n - 1) if n - 1 > L else None          # None: back to normal
            A[i, i] = l1 + mu
            A[i, idx[up]] -= l1
            if down is not None:
                A[i, idx[down]] -= mu
        else:
            down = (2, n - 1) if n - 1 > H else (1, H)
            A[i, i] = mu
            A[i, idx[down]] -= mu
        b[i] = 1.0
    return states, np.linalg.solve(A, b)


def main():
    print("1. M/M/1/K example of the LINE solver: lambda = 2, mu = 3, K = 5")
    exact = Fraction(1, 3) / (1 - Fraction(2, 3) ** 6) * Fraction(2, 3) ** 5
    print(f"   published closed form: loss = {exact} = {float(exact):.15f}")
    for route in ("ctmc", "embedded"):
        for policy in ("instant", "departure-epoch"):
            q = HysteresisQueue(1, 4, 5, 2.0, 2.0, mu=3.0, policy=policy)
            v = q.loss_probability(route)
            err = abs(v / float(exact) - 1)
            print(f"   route {route:<9} policy {policy:<16} loss = {v:.15f}  rel. error {err:.1e}")
    for lam, K in ((2.0 / 3.0, 5), (0.9, 10)):
        q = HysteresisQueue(1, K - 1, K, lam, lam, service=deterministic(1.0))
        ref = niu_cooper_md1k(lam, 1.0, K)
        v = q.loss_probability()
        print(f"   M/D/1/{K}, lambda = {lam:.4f}: embedded route {v:.15f}, Niu-Cooper {ref:.15f}, "
              f"rel. error {abs(v / ref - 1):.1e}")

    print("\n2. M|M|1|<L,H>|<H,R>: return times from each overload state (L=3, H=8, R=12, "
          "lam=1.3, lam_overload=0.7, mu=1)")
    L, H, R, l0, l1, mu = 3, 8, 12, 1.3, 0.7, 1.0
    q = HysteresisQueue(L, H, R, l0, l1, mu=mu)
    states, T = return_time_system(L, H, R, l1, mu)
    rt = q.return_times()
    ours = {(int(s), int(n)): v for s, n, v in zip(rt["mode"], rt["n"], rt["mean"])}
    worst = max(abs(ours[x] / t - 1) for x, t in zip(states, T))
    shown = [[str(x), f"{t:.12f}", f"{ours[x]:.12f}"] for x, t in zip(states, T)
             if x[0] == 2 or x[1] in (L + 1, H, R - 1)]
    print(textwrap.indent(format_table(shown, ["state", "first-step system", "ctmc hitting times"]), "   "))
    print(f"   largest relative difference over all {len(states)} states: {worst:.1e}")
    print(f"   mean return time from the entrance (1, H): {q.mean_return_time():.12f}")
    print(f"   mean discard period {q.mean_discard_time():.12f}  ((R - H)/mu = {(R - H) / mu})")
    pm = q.mode_probabilities()
    print(f"   P(normal, overload, discard) = {pm.round(10)}; E[cycle] = {q.mean_cycle():.10f}")

    print("\n   the same with constant service time 1 (the M|D|1 case of the CCIS 356 papers, whose")
    print("   values we could not read): embedded route against Erlang-k on the CTMC route")
    qd = HysteresisQueue(L, H, R, l0, l1, service=deterministic(1.0))
    print(f"   deterministic (embedded chain): E[return] = {qd.mean_return_time():.10f}")
    for k in (4, 16, 64):
        qe = HysteresisQueue(L, H, R, l0, l1, service=erlang(k, 1.0))
        print(f"   Erlang-{k:<3} (CTMC hitting times): E[return] = {qe.mean_return_time():.10f}")

    print("\n3. reachable states (single arrivals, exponential service, instant policy)")
    c = q.chain()
    got = sorted(set(zip(c.states["mode"].tolist(), c.states["n"].tolist())))
    want = sorted([(0, n) for n in range(H)] + [(1, n) for n in range(L + 1, R)]
                  + [(2, n) for n in range(H + 1, R + 1)])
    print(f"   {len(got)} states; matches (0, 0..H-1), (1, L+1..R-1), (2, H+1..R): {got == want}")
    return worst


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args()     # --help only: the checks take no options
    main()
