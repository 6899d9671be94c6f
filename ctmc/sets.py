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

__all__ = ["owned_mask", "owned_values", "as_law", "global_indices", "unit_mask"]


def _evaluate(spec, states, start, stop, name, instead) -> np.ndarray:
    """An expression or callable of the state variables on the owned states ``[start, stop)``."""
    if states is None:
        raise ValueError(f"{name}: this chain has no state table; give {instead}")
    env = {k: v[start:stop] for k, v in states.as_dict().items()}
    with np.errstate(all="ignore"):
        return np.asarray(spec.evaluate(env) if isinstance(spec, Expr) else spec(env))


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
        val = _evaluate(spec, states, start, stop, name, "a mask or indices")
        if val.dtype != bool and not (val.dtype.kind in "iuf" and np.isin(val, (0, 1)).all()):
            raise ValueError(f"{name}: expected a condition (a boolean expression such as n1 == 5), got "
                             f"{val.dtype} values such as {val.ravel()[:3].tolist()}")
        return np.broadcast_to(val.astype(bool), (stop - start,)).copy()
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


def owned_values(spec, states, n: int, start: int = 0, stop: int | None = None, name: str = "reward",
                 named: Mapping | None = None, finite: bool = False) -> np.ndarray:
    """Owned part ``[start, stop)`` of a per-state vector described by ``spec`` (rewards, expectations).

    Parameters
    ----------
    spec : number, array_like of shape (n,), Expr, callable or str
        A constant, the values over all states, an expression of the model's
        variables (``n1 + n2``; a boolean one counts 1 where it holds), a
        callable ``f(states) -> values``, or the name of a vector in ``named``
        (a chain's rewards, such as those read from a PRISM reward file).
    states : StateTable or None
        Needed for expressions and callables.
    named : mapping of str to array, optional
        Vectors that a string may name.
    finite : bool
        Refuse NaN and infinite values (rewards and expectations: a reward of
        ``n / 0`` is a mistake, not an answer).

    Examples
    --------
    >>> import numpy as np
    >>> from ctmc.chain import StateTable
    >>> from ctmc.expr import Var
    >>> S = StateTable({"n": np.arange(4)})
    >>> owned_values(Var("n", 0, 3) ** 2 + 1, S, 4).tolist()
    [1.0, 2.0, 5.0, 10.0]
    >>> owned_values(2, S, 4, 1, 3).tolist()
    [2.0, 2.0]
    """
    stop = n if stop is None else stop
    if isinstance(spec, str):
        if not named or spec not in named:
            raise ValueError(f"{name}: no reward or label named {spec!r}; this chain has {sorted(named or {})}")
        spec = named[spec]
    if isinstance(spec, Expr) or (callable(spec) and not isinstance(spec, np.ndarray)):
        a = _evaluate(spec, states, start, stop, name, "the values as an array")
        if a.dtype.kind not in "biuf":
            raise ValueError(f"{name}: the expression gives {a.dtype} values, expected real numbers")
        return _finite(np.broadcast_to(a.astype(float), (stop - start,)).copy(), finite, name, start)
    a = np.asarray(spec)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name}: expected a number, {n} values, an expression or a callable, got {spec!r}")
    if a.ndim == 0:
        return _finite(np.full(stop - start, float(a)), finite, name, start)
    if a.shape != (n,):
        raise ValueError(f"{name}: expected {n} values (one per state), got shape {a.shape}")
    return _finite(a[start:stop].astype(float), finite, name, start)


def _finite(v: np.ndarray, finite: bool, name: str, start: int) -> np.ndarray:
    if finite and not np.all(np.isfinite(v)):
        k = int(np.flatnonzero(~np.isfinite(v))[0])
        raise ValueError(f"{name}: values must be finite, got {v[k]} at state {start + k}")
    return v


def as_law(spec, n: int, name: str = "p0"):
    """The law a numeric vector of length ``n`` spells, or None when ``spec`` is a set of states.

    One rule for initial laws everywhere (``p0`` of the analyses, ``initial`` of a chain): a
    numeric vector of length ``n``, integers included (``[0, 0, 1]`` is the law of state 2), is a
    law and must be finite, >= 0 and sum to 1; a set of states is spelled unambiguously (a Python
    ``set`` or ``range``, a boolean mask, an expression, a dict), and a list of indices is read as
    a set only when it cannot be a law (its length is not ``n``).

    >>> as_law([0, 0, 1], 3).tolist(), as_law([2], 3), as_law({0, 1}, 3)
    ([0.0, 0.0, 1.0], None, None)
    """
    if isinstance(spec, (np.ndarray, list, tuple)) and not isinstance(spec, str):
        a = np.asarray(spec)
        if a.dtype.kind in "iuf" and a.shape == (n,):
            p = a.astype(float)
            if not np.all(np.isfinite(p)) or (p < 0).any() or abs(p.sum() - 1) > 1e-9:
                raise ValueError(f"{name}: a numeric vector of length {n} is read as a law and must be finite, "
                                 f">= 0 and sum to 1 (it sums to {p.sum():.6g}); for a set of states give a "
                                 "Python set of indices such as {0, 2}, or a boolean mask")
            return p
        if a.dtype.kind == "f":
            raise ValueError(f"{name}: a law must have shape ({n},), got {a.shape}")
    return None


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
