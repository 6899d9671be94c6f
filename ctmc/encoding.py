r"""The state encoding of a model: each state as one mixed-radix integer.

A model's variables :math:`x_1, \dots, x_d` (declaration order) have bounds
:math:`lo_i \le x_i \le hi_i`, so spans :math:`s_i = hi_i - lo_i + 1`. A
state is encoded as the integer

.. math::

    c(x) = \sum_{i=1}^{d} (x_i - lo_i)\, w_i, \qquad
    w_d = 1, \quad w_i = w_{i+1}\, s_{i+1},

(the first declared variable most significant) and decoded by
:math:`x_i = \lfloor c / w_i \rfloor \bmod s_i + lo_i`. The codes run over
the bounding box :math:`0 \le c < B = \prod_i s_i` and their order is the
lexicographic order of the states, so a chain whose states are sorted by code
has a numbering independent of how they were found. :math:`B < 2^{62}` is
required (codes are int64, with room for the sums of the search).

:class:`StateLayout` holds the encoding (the names, :math:`lo`, :math:`s`,
:math:`w` and :math:`B`) with its :meth:`~StateLayout.encode` and
:meth:`~StateLayout.decode`; :class:`LazyEnv` is the decoded environment of a
batch of codes, each variable decoded when an expression first reads it.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .results import ModelError

__all__ = ["StateLayout", "LazyEnv"]


@dataclass(frozen=True, eq=False)
class StateLayout:
    """The mixed-radix encoding of a model's states (see the module docstring).

    Attributes
    ----------
    names : tuple of str
        The variables, in declaration order (the first is most significant).
    lo : numpy.ndarray of int64
        Lower bounds :math:`lo_i`.
    span : numpy.ndarray of int64
        Spans :math:`s_i = hi_i - lo_i + 1` (the radices).
    strides : numpy.ndarray of int64
        Place values :math:`w_i` (the last variable's is 1).
    box : int
        Points of the bounding box, :math:`B = \\prod_i s_i` (codes lie in ``[0, box)``).

    Examples
    --------
    >>> import ctmc
    >>> m = ctmc.Model("grid"); x, y = m.var("x", 0, 2), m.var("y", 1, 4)
    >>> layout = StateLayout.of(m.variables, "grid")
    >>> layout.strides.tolist(), layout.box
    ([4, 1], 12)
    >>> codes = layout.encode({"x": [0, 2], "y": [1, 3]})
    >>> codes.tolist()
    [0, 10]
    >>> layout.decode(codes)["y"].tolist()
    [1, 3]
    """

    names: tuple
    lo: np.ndarray
    span: np.ndarray
    strides: np.ndarray
    box: int

    @classmethod
    def of(cls, variables, name: str = "model") -> "StateLayout":
        """The encoding of ``variables`` (:class:`~ctmc.expr.Var`, declaration order) of model ``name``.

        Raises
        ------
        ModelError
            Without variables, or when the box has :math:`2^{62}` points or more.
        """
        if not variables:
            raise ModelError(f"model {name!r}: declare at least one variable")
        names = [v.name for v in variables]
        lo = np.array([v.lo for v in variables], dtype=np.int64)
        span = np.array([v.hi - v.lo + 1 for v in variables], dtype=object)
        box = 1
        for s in span:
            box *= int(s)
        if box >= 2**62:
            raise ModelError(
                f"model {name!r}: the bounding box of the variables has {box:.3g} "
                "points, more than a 64-bit code can index; tighten the bounds")
        strides = np.ones(len(names), dtype=np.int64)
        for i in range(len(names) - 2, -1, -1):
            strides[i] = strides[i + 1] * int(span[i + 1])
        return cls(names=tuple(names), lo=lo, span=np.array(span, dtype=np.int64), strides=strides, box=box)

    @property
    def hi(self) -> np.ndarray:
        """Upper bounds :math:`hi_i = lo_i + s_i - 1`."""
        return self.lo + self.span - 1

    def encode(self, columns: Mapping) -> np.ndarray:
        """The codes of the states ``{name: values}`` (every variable, values within their bounds)."""
        codes = np.zeros(len(np.atleast_1d(columns[self.names[0]])), dtype=np.int64)
        for i, nm in enumerate(self.names):
            codes += (np.asarray(columns[nm], dtype=np.int64) - self.lo[i]) * self.strides[i]
        return codes

    def code(self, values: Mapping):
        """The code of one state ``{name: value}``, or ``None`` when it lies outside the box."""
        code = 0
        for i, nm in enumerate(self.names):
            v = int(values[nm])
            if not self.lo[i] <= v < self.lo[i] + self.span[i]:
                return None
            code += (v - int(self.lo[i])) * int(self.strides[i])
        return code

    def decode(self, codes) -> "LazyEnv":
        """The environment ``{name: values}`` of a batch of codes, each variable decoded when first read."""
        col = {nm: i for i, nm in enumerate(self.names)}
        lo, span, strides = self.lo, self.span, self.strides
        return LazyEnv(self.names, lambda nm: (codes // strides[col[nm]]) % span[col[nm]] + lo[col[nm]])

    def decode_all(self, codes) -> dict:
        """``{variable: values}`` of a batch of codes, every variable decoded."""
        return dict(self.decode(codes))

    def initial_codes(self, initial) -> np.ndarray:
        """The sorted distinct codes of the initial state(s) ``initial`` (a dict or a list of dicts).

        Raises
        ------
        ValueError
            When no state is given, a variable is missing, unknown, not an
            integer or out of its bounds.
        """
        names = self.names
        if initial is None:
            raise ValueError("initial: give the initial state(s), e.g. initial={'n': 0}")
        items = [initial] if isinstance(initial, Mapping) else list(initial)
        if not items:
            raise ValueError("initial: no initial state given")
        cols = {}
        for nm in names:
            vals = []
            for it in items:
                if nm not in it:
                    raise ValueError(f"initial: missing value for variable {nm!r}")
                raw = np.atleast_1d(np.asarray(it[nm]))
                if raw.dtype.kind not in "iub" and not (raw.dtype.kind == "f" and np.all(raw == np.round(raw))):
                    raise ValueError(f"initial: {nm} must be an integer, got {it[nm]!r}")
                vals.append(raw.astype(np.int64))
            cols[nm] = np.concatenate(vals)
        for it in items:
            extra = set(it) - set(names)
            if extra:
                raise ValueError(f"initial: unknown variables {sorted(extra)}")
        for i, nm in enumerate(names):
            lo, hi = int(self.lo[i]), int(self.lo[i] + self.span[i] - 1)
            if ((cols[nm] < lo) | (cols[nm] > hi)).any():
                raise ValueError(f"initial: {nm} must lie in [{lo}, {hi}], got {cols[nm]}")
        return np.unique(self.encode(cols))


class LazyEnv(Mapping):
    """A read-only ``{variable: array}`` whose entries are computed on first access.

    Expressions read only the variables they name, so a guard, rate or update
    of a model with many variables decodes (or gathers) only those.
    """

    __slots__ = ("_names", "_get", "_cache")

    def __init__(self, names, get):
        self._names, self._get, self._cache = names, get, {}

    def __getitem__(self, name):
        try:
            return self._cache[name]
        except KeyError:
            if name not in self._names:
                raise
        value = self._cache[name] = self._get(name)
        return value

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)
