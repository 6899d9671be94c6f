"""Labelled views of per-state values: short reprs, HTML for notebooks, tables.

One place turns "state variables plus values over the states" into what a
user reads: :func:`frame` (a :class:`pandas.DataFrame`, pandas being the
optional extra ``ctmc-exact[frame]``), :func:`marginal` (the law of one
variable or expression under a per-state law) and :func:`summary` (a short
one-line description of an array for reprs). The chain's state table and
every result use them, so every table has the same columns: the state
variables first, in declaration order, then the values.
"""
from __future__ import annotations

import html as _html

import numpy as np

__all__ = ["frame", "marginal", "summary", "html_table"]


def _pandas():
    try:
        import pandas
    except ImportError:                      # pragma: no cover - depends on the environment
        raise ImportError("to_frame needs pandas: pip install 'ctmc-exact[frame]' (or pandas)") from None
    return pandas


def frame(states, values: dict | None = None, index_name: str = "state"):
    """A DataFrame with one row per state: the state variables, then ``values``.

    Parameters
    ----------
    states : StateTable or None
    values : dict of str to array, optional
        Columns appended after the variables; 2-D arrays ``(k, n)`` become
        ``k`` columns named ``name[0] .. name[k-1]``.
    """
    pd = _pandas()
    cols = {} if states is None else {k: np.asarray(states[k]) for k in states.names}
    for name, v in (values or {}).items():
        v = np.asarray(v)
        if v.ndim == 1:
            cols[name] = v
        else:
            for j in range(v.shape[0]):
                cols[f"{name}[{j}]"] = v[j]
    df = pd.DataFrame(cols)
    df.index.name = index_name
    return df


def marginal(law: np.ndarray, states, by) -> dict:
    """Law of a variable (or integer expression) under the per-state law ``law``.

    Returns ``{value: probability}`` sorted by value; values of zero
    probability that occur in the states are kept.

    >>> import numpy as np
    >>> from ctmc.chain import StateTable
    >>> S = StateTable({"a": np.array([0, 0, 1, 1]), "b": np.array([0, 1, 0, 1])})
    >>> marginal(np.array([0.1, 0.2, 0.3, 0.4]), S, "a")
    {0: 0.30000000000000004, 1: 0.7}
    """
    from .sets import owned_values
    if states is None:
        raise ValueError("by: this chain has no state variables")
    if isinstance(by, str) and by in states.names:
        x = np.asarray(states[by])
    else:
        x = owned_values(by, states, len(states), name="by")
        if not np.all(x == np.round(x)):
            raise ValueError("by: a marginal needs an integer-valued variable or expression")
        x = x.astype(np.int64)
    keys, inv = np.unique(x, return_inverse=True)
    mass = np.bincount(inv, weights=np.asarray(law, dtype=float), minlength=keys.size)
    return {int(k): float(m) for k, m in zip(keys, mass)}


def summary(a) -> str:
    """Short description of an array for a repr: ``shape (3,), 0.25 .. 0.5``."""
    if a is None:
        return "None"
    a = np.asarray(a)
    if a.size == 0:
        return f"shape {a.shape}"
    if a.size <= 4 and a.ndim <= 1:
        return np.array2string(a, precision=6, separator=", ")
    if a.dtype == bool:
        return f"{int(a.sum())} of {a.size} states"
    fin = a[np.isfinite(a)] if a.dtype.kind == "f" else a
    rng = f", {fin.min():.4g} .. {fin.max():.4g}" if fin.size else ""
    return f"shape {a.shape}{rng}"


def html_table(title: str, rows) -> str:
    """A small two-column HTML table (``_repr_html_`` of chains and results)."""
    body = "".join(f"<tr><th style='text-align:left'>{_html.escape(str(k))}</th>"
                   f"<td style='text-align:left'>{_html.escape(str(v))}</td></tr>" for k, v in rows)
    return f"<b>{_html.escape(title)}</b><table>{body}</table>"
