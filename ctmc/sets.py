"""Sets of states and per-state vectors given by the user, resolved once for every chain kind.

A set of states may be given as a boolean mask over all states, an array of
state indices, an expression of the model's variables (``n1 == 5``), a
callable ``f(states) -> mask``, or one state as ``{var: value}``. The
resolution below serves :meth:`ctmc.CTMC.where` and every analysis on every
backend: it returns the part owned by the calling process (rows
``start:stop``), the whole mask on the scipy backend.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .expr import Expr

__all__ = ["owned_mask", "global_indices", "unit_mask"]


def owned_mask(spec, states, n: int, start: int = 0, stop: int | None = None, name: str = "target") -> np.ndarray:
    """Owned part ``[start, stop)`` of the set of states described by ``spec``.

    Parameters
    ----------
    spec : mask, indices, Expr, callable or dict
    states : StateTable or None
        Needed for expressions, callables and dicts.
    n : int
        Number of states.
    start, stop : int
        The owned rows (default: all).
    name : str
        Parameter name for error messages.

    Examples
    --------
    >>> import numpy as np
    >>> owned_mask([0, 2], None, 4).tolist()
    [True, False, True, False]
    >>> owned_mask(np.array([True, False, True, True]), None, 4, 2, 4).tolist()
    [True, True]
    """
    stop = n if stop is None else stop
    if isinstance(spec, (set, frozenset, range)):      # the unambiguous spelling of a set of indices
        spec = np.fromiter(sorted(spec), dtype=np.int64, count=len(spec))
    if isinstance(spec, Mapping):
        if states is None:
            raise ValueError(f"{name}: this chain has no state table; give a mask or indices")
        full = np.zeros(n, dtype=bool)
        try:
            full[states.index(**spec)] = True
        except ValueError as exc:           # name the parameter, not the helper
            raise ValueError(f"{name}: {str(exc).removeprefix('index: ')}") from None
        return full[start:stop].copy()
    if isinstance(spec, Expr) or callable(spec):
        if states is None:
            raise ValueError(f"{name}: this chain has no state table; give a mask or indices")
        env = {k: v[start:stop] for k, v in states.as_dict().items()}
        with np.errstate(all="ignore"):
            val = spec.evaluate(env) if isinstance(spec, Expr) else spec(env)
        return np.broadcast_to(np.asarray(val, dtype=bool), (stop - start,)).copy()
    a = np.asarray(spec)
    if a.dtype == bool:
        if a.shape != (n,):
            raise ValueError(f"{name}: boolean mask must have shape ({n},), got {a.shape}")
        return a[start:stop].copy()
    if a.dtype.kind in "iu" or a.size == 0:
        a = a.ravel().astype(np.int64)
        if a.size and (a.min() < 0 or a.max() >= n):
            raise ValueError(f"{name}: state indices must lie in [0, {n - 1}]")
        full = np.zeros(n, dtype=bool)
        full[a] = True
        return full[start:stop].copy()
    raise ValueError(f"{name}: expected a mask, expression, callable, dict or state indices, got {a.dtype}")


def global_indices(op, owned: np.ndarray) -> np.ndarray:
    """Sorted global indices of an owned mask, on every process."""
    full = op.gather(np.asarray(owned, dtype=float), "all")
    return np.flatnonzero(full > 0.5)


def unit_mask(op, i: int) -> np.ndarray:
    """Owned part of the one-state set ``{i}`` (``i`` a global index)."""
    e = np.zeros(op.stop - op.start, dtype=bool)
    if op.start <= i < op.stop:
        e[i - op.start] = True
    return e
