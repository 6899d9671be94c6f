"""Reference chains with exact answers, shared by the test modules.

Each case gives a chain and its exact stationary law (closed forms or exact
rational arithmetic), so every stationary method can be judged against it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Callable

import numpy as np

import ctmc

_TINY = np.finfo(float).tiny


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[], ctmc.CTMC]
    exact_pi: Callable[[], np.ndarray]


def birth_death(K, up, down, name="bd"):
    """Birth-death chain on 0..K with state-dependent rates up(n), down(n)."""
    m = ctmc.Model(name)
    n = m.var("n", 0, K)
    m.event("up", guard=n < K, rate=up(n), update={n: n + 1})
    m.event("down", guard=n > 0, rate=down(n), update={n: n - 1})
    return m, n


def bd_pi(K, up, down):
    """Exact stationary law of a birth-death chain (rates as Python callables on ints)."""
    w = [Fraction(1)]
    for k in range(1, K + 1):
        w.append(w[-1] * Fraction(up(k - 1)) / Fraction(down(k)))
    tot = sum(w)
    return np.array([float(x / tot) for x in w])


def mm1k(K, lam, mu):
    m, _ = birth_death(K, lambda n: lam, lambda n: mu, "mm1k")
    return m.build(initial={"n": 0})


def mmck(K, c, lam, mu):
    m, _ = birth_death(K, lambda n: lam, lambda n: mu * ctmc.minimum(n, c), "mmck")
    return m.build(initial={"n": 0})


def erlang_b(c, a):
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return b


def two_state(a, b):
    return ctmc.CTMC([[-a, a], [b, -b]])


def random_chain(n, seed, density=0.3):
    rng = np.random.default_rng(seed)
    R = rng.random((n, n)) * (rng.random((n, n)) < density)
    # a cycle makes it irreducible
    R[np.arange(n), (np.arange(n) + 1) % n] += rng.random(n) + 0.1
    np.fill_diagonal(R, 0.0)
    return R


def dense_pi(Q):
    """Stationary law from a dense null-space computation (independent of ctmc)."""
    Q = np.asarray(Q.toarray() if hasattr(Q, "toarray") else Q)
    n = Q.shape[0]
    A = np.vstack([Q.T, np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1.0
    return np.linalg.lstsq(A, b, rcond=None)[0]


CASES = [
    Case("two_state", lambda: two_state(2.0, 3.0), lambda: np.array([0.6, 0.4])),
    Case("mm1k_K50", lambda: mm1k(50, 0.7, 1.0), lambda: bd_pi(50, lambda n: 0.7, lambda n: 1.0)),
    # pi_K about 1e-301: tail accuracy
    Case("mm1k_K1000", lambda: mm1k(1000, 0.5, 1.0),
         lambda: np.array([0.5 ** k * 0.5 / (1 - 0.5 ** 1001) for k in range(1001)])),
    # ratios spanning 1e-200
    Case("bd_1e-200", lambda: mm1k(100, 1e-2, 1.0), lambda: bd_pi(100, lambda n: Fraction(1, 100), lambda n: 1)),
    Case("mmck_c3_K40", lambda: mmck(40, 3, 2.5, 1.0),
         lambda: bd_pi(40, lambda n: Fraction(5, 2), lambda n: min(n, 3))),
    Case("erlang_loss_c8", lambda: mmck(8, 8, 5.0, 1.0),
         lambda: bd_pi(8, lambda n: 5, lambda n: n)),
    Case("random_30", lambda: ctmc.CTMC.from_rates(random_chain(30, 1)),
         lambda: dense_pi(ctmc.CTMC.from_rates(random_chain(30, 1)).Q)),
    Case("random_120_sparse", lambda: ctmc.CTMC.from_rates(random_chain(120, 2, 0.05)),
         lambda: dense_pi(ctmc.CTMC.from_rates(random_chain(120, 2, 0.05)).Q)),
]


def log_ratio_error(a, b):
    """max |log(a/b)| over positive entries (relative error in the tails)."""
    a, b = np.asarray(a), np.asarray(b)
    pos = b > 0
    with np.errstate(divide="ignore"):
        return float(np.max(np.abs(np.log(a[pos]) - np.log(b[pos]))))


def hitting_mean_bd(K, lam, mu, start):
    """Exact E_start[T_K] for the birth-death chain with constant rates (Fractions)."""
    lam, mu = Fraction(lam), Fraction(mu)
    e_prev = Fraction(0)
    steps = []
    for k in range(K):  # e_k = E_k[T_{k+1}] = 1/lam + (mu/lam) e_{k-1}
        e = 1 / lam + (mu / lam) * e_prev if k > 0 else 1 / lam
        steps.append(e)
        e_prev = e
    return sum(steps[start:])


assert math.isclose(erlang_b(1, 1.0), 0.5)


def fraction_solve(A, b):
    """Solve ``A x = b`` exactly: Gauss-Jordan elimination on lists of Fractions.

    The reference for tests that compare float results with exact rational
    answers (A square and nonsingular; entries Fractions or ints).
    """
    n = len(A)
    M = [list(row) + [bi] for row, bi in zip(A, b)]
    for c in range(n):
        p = next(r for r in range(c, n) if M[r][c] != 0)
        M[c], M[p] = M[p], M[c]
        for r in range(n):
            if r != c and M[r][c] != 0:
                f = M[r][c] / M[c][c]
                M[r] = [a - f * bb for a, bb in zip(M[r], M[c])]
    return [M[i][n] / M[i][i] for i in range(n)]


def product_form(rates):
    """Independent M/M/1/K queues ``[(K, lam, mu), ...]`` and their exact law (exact rationals)."""
    m = ctmc.Model("pf")
    vs = [m.var(f"n{i}", 0, K) for i, (K, _, _) in enumerate(rates)]
    for v, (K, lam, mu) in zip(vs, rates):
        m.event(f"{v.name}+", guard=v < K, rate=lam, update={v: v + 1})
        m.event(f"{v.name}-", guard=v > 0, rate=mu, update={v: v - 1})
    chain = m.build(initial={v.name: 0 for v in vs})
    pi = np.ones(chain.n_states, dtype=object)
    for v, (K, lam, mu) in zip(vs, rates):
        rho = Fraction(lam) / Fraction(mu)
        w = [rho ** k for k in range(K + 1)]
        tot = sum(w)
        marg = [x / tot for x in w]
        pi = pi * np.array([marg[int(k)] for k in chain.eval(v)], dtype=object)
    return chain, np.array([float(x) for x in pi])


def true_relative(pi, exact):
    """The largest relative error of ``pi`` over the states whose exact probability is a normal double."""
    ok = exact >= _TINY
    return float(np.max(np.abs(pi[ok] - exact[ok]) / exact[ok]))
