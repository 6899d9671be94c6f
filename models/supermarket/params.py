"""Parameter checks shared by the supermarket modules (before any heavy work): each raises a
ValueError naming the parameter."""
from __future__ import annotations

import math

import numpy as np

__all__ = ["int_param", "arrival_rate", "check_model", "check_mean_field"]


def int_param(name, value, lo, hi=None):
    """``value`` as an int in ``[lo, hi]`` (no upper bound for ``hi`` None)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer >= {lo}, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name}: expected an integer {rng}, got {value}")
    return int(value)


def arrival_rate(lam):
    """``lam`` as a float: a finite arrival rate per server > 0."""
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.integer, np.floating)) \
            or not math.isfinite(lam) or lam <= 0:
        raise ValueError(f"lam: expected a finite arrival rate per server > 0, got {lam!r}")
    return float(lam)


def check_model(n, d, lam, capacity, replacement, *, need_stable=True):
    """``(n, d, lam, capacity, replacement)`` of the finite-n system, checked."""
    n = int_param("n", n, 1)
    d = int_param("d", d, 1, None if replacement else n)
    rate = arrival_rate(lam)
    if capacity is not None:
        capacity = int_param("capacity", capacity, 1)
    elif need_stable and not lam < 1:
        raise ValueError(f"lam: without a capacity the system is stable only for 0 < lam < 1, got {lam}")
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement: expected True or False, got {replacement!r}")
    return n, d, rate, capacity, bool(replacement)


def check_mean_field(d, lam, capacity):
    """``(d, lam, capacity)`` of the mean-field limit, checked (no capacity: ``lam < 1``)."""
    d = int_param("d", d, 1)
    rate = arrival_rate(lam)
    if capacity is None and not lam < 1:
        raise ValueError(f"lam: the infinite-buffer mean field needs 0 < lam < 1, got {lam}")
    if capacity is not None:
        capacity = int_param("capacity", capacity, 1)
    return d, rate, capacity
