"""Parameter checks shared by the supermarket modules (before any heavy work)."""
from __future__ import annotations

import math

import numpy as np


def _int_param(name, value, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer >= {lo}, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name}: expected an integer {rng}, got {value}")
    return int(value)


def _check_model(n, d, lam, capacity, replacement, *, need_stable=True):
    n = _int_param("n", n, 1)
    d = _int_param("d", d, 1, None if replacement else n)
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.integer, np.floating)) \
            or not math.isfinite(lam) or lam <= 0:
        raise ValueError(f"lam: expected a finite arrival rate per server > 0, got {lam!r}")
    if capacity is not None:
        capacity = _int_param("capacity", capacity, 1)
    elif need_stable and not lam < 1:
        raise ValueError(f"lam: without a capacity the system is stable only for 0 < lam < 1, got {lam}")
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement: expected True or False, got {replacement!r}")
    return n, d, float(lam), capacity, bool(replacement)
