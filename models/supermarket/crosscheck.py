"""The per-queue (unlumped) supermarket chain for tiny ``n``: an independent check of the lumping."""
from __future__ import annotations

import itertools

import numpy as np

import ctmc

from .params import check_model
from .occupancy import n_occupancy_states, occupancy_rank

__all__ = ["per_queue_model", "lump_per_queue"]


# ---------------------------------------------------------------------------
# the per-queue (unlumped) chain, for tiny n
# ---------------------------------------------------------------------------
def _choice_law(q, d, replacement):
    """P(queue i is joined) for each state row of ``q`` (shape (S, n)), by brute force.

    Enumerates every ordered d-sample (with replacement) or every d-subset
    (without), finds the shortest sampled length and splits the sample's
    weight uniformly over the distinct sampled queues attaining it.
    """
    S, n = q.shape
    samples = list(itertools.product(range(n), repeat=d)) if replacement \
        else list(itertools.combinations(range(n), d))
    P = np.zeros((S, n))
    w = 1.0 / len(samples)
    for smp in samples:
        idx = sorted(set(smp))
        sub = q[:, idx]
        best = sub == sub.min(axis=1, keepdims=True)
        share = w / best.sum(axis=1)
        for j, i in enumerate(idx):
            P[:, i] += np.where(best[:, j], share, 0.0)
    return P


def per_queue_model(n, d, lam, capacity, replacement=True) -> ctmc.Model:
    """The unlumped chain (one variable per queue) as a :class:`ctmc.Model`.

    ``(capacity + 1) ** n`` states: for tiny ``n`` only (it checks the
    lumping of :func:`occupancy_generator`). Arrivals are routed by brute-force
    enumeration of the samples (:func:`_choice_law`), an independent
    derivation of the occupancy rates.
    """
    n, d, lam, B, replacement = check_model(n, d, lam, capacity, replacement)
    if B is None:
        raise ValueError("capacity: the per-queue chain needs a finite capacity >= 1")
    if (B + 1) ** n > 200_000:
        raise ValueError(f"n: the per-queue chain has (capacity+1)**n = {(B + 1) ** n} states; "
                         "keep it below 200000")
    m = ctmc.Model(f"supermarket-per-queue-n{n}")
    qs = [m.var(f"q{i}", 0, B) for i in range(n)]
    names = [f"q{i}" for i in range(n)]

    def arrival_rate(i):
        def f(env):
            q = np.column_stack([np.asarray(env[nm]) for nm in names])
            return lam * n * _choice_law(q, d, replacement)[:, i]
        return f

    for i, q in enumerate(qs):
        m.event(f"arrive{i}", guard=q < B, rate=arrival_rate(i), update={q: q + 1})
        m.event(f"serve{i}", guard=q > 0, rate=1.0, update={q: q - 1})
    return m


def lump_per_queue(chain, pi, capacity):
    """Map a per-queue stationary law onto occupancy states (rank order).

    Returns the lumped probability vector indexed like ``occupancy_states``.
    """
    q = chain.states.as_array()
    n = q.shape[1]
    M = np.stack([(q >= k).sum(axis=1) for k in range(1, capacity + 1)], axis=1)
    r = occupancy_rank(M, n)
    return np.bincount(r, weights=pi, minlength=n_occupancy_states(n, capacity))
