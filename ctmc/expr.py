r"""Vectorised expressions over arrays of states.

A model's guards, rates and updates are *expressions*: small trees built with
ordinary Python operators from state variables (:class:`Var`) and constants.
An expression is never evaluated state by state; :meth:`Expr.evaluate` takes
an *environment* ``{name: int64 array}`` holding one entry per state variable
for a whole batch of states and returns one numpy array for the batch.

Supported operators: ``+ - * / // % **``, unary ``-``, ``abs``, comparisons
``< <= == != > >=`` (which return boolean expressions) and the logical
``& | ~`` (use parentheses: ``(x > 0) & (y < K)``). :func:`where`,
:func:`minimum` and :func:`maximum` cover conditional values.

Wherever an expression is expected a plain callable ``f(env) -> array`` is also
accepted, for rates that are awkward to write with operators (for instance a
hypergeometric sampling probability); it receives the same environment.

Examples
--------
>>> import numpy as np
>>> from ctmc.expr import Var, where
>>> x, y = Var("x", 0, 3), Var("y", 0, 3)
>>> e = where(x < y, x + 1, 2 * y)
>>> e.evaluate({"x": np.array([0, 2]), "y": np.array([1, 1])})
array([1, 2])
"""
from __future__ import annotations

import operator
from typing import Any, Callable, Mapping

import numpy as np

__all__ = ["Expr", "Var", "where", "minimum", "maximum", "as_expr", "calls_function"]

Env = Mapping[str, np.ndarray]


class Expr:
    """A lazily evaluated, vectorised expression over state variables.

    Instances are built by operators on :class:`Var` objects and constants;
    users rarely construct them directly.

    Parameters
    ----------
    fn : callable
        ``fn(env) -> array`` evaluating the expression on a batch of states.
    text : str
        Human-readable form used in error messages.
    node : tuple, optional
        The expression's structure, ``(kind, *operands)``, for the compiled
        builder (:mod:`ctmc._compiled`): ``("var", name)``, ``("const",
        value)``, ``("bin", symbol, a, b)``, ``("neg" | "abs" | "not", a)``,
        ``("where", c, a, b)``, ``("min" | "max", a, b)``; ``None`` for a user
        function (evaluated by numpy only).
    """

    __slots__ = ("_fn", "_text", "_node")

    def __init__(self, fn: Callable[[Env], Any], text: str, node: Any = None):
        self._fn = fn
        self._text = text
        self._node = node

    def evaluate(self, env: Env) -> np.ndarray:
        """Evaluate on a batch of states.

        Parameters
        ----------
        env : mapping of str to ndarray
            One integer array per state variable, all of the same length.

        Returns
        -------
        ndarray
            The value for every state of the batch (scalars are broadcast).
        """
        return self._fn(env)

    def __repr__(self) -> str:
        return self._text

    # Expressions must not be used as truth values: ``if x < 3`` would
    # silently take one branch for every state.
    def __bool__(self):
        raise TypeError(
            f"the expression {self._text!r} has no single truth value; combine "
            "conditions with & | ~ and pass the expression to the model")

    __hash__ = object.__hash__

    # arithmetic ---------------------------------------------------------
    def _bin(self, other, op, sym, reflected=False):
        o = as_expr(other)
        a, b = (o, self) if reflected else (self, o)
        fa, fb = a._fn, b._fn
        return Expr(lambda env: op(fa(env), fb(env)), f"({a._text} {sym} {b._text})", ("bin", sym, a, b))

    def __add__(self, o): return self._bin(o, operator.add, "+")
    def __radd__(self, o): return self._bin(o, operator.add, "+", True)
    def __sub__(self, o): return self._bin(o, operator.sub, "-")
    def __rsub__(self, o): return self._bin(o, operator.sub, "-", True)
    def __mul__(self, o): return self._bin(o, operator.mul, "*")
    def __rmul__(self, o): return self._bin(o, operator.mul, "*", True)
    def __truediv__(self, o): return self._bin(o, np.true_divide, "/")
    def __rtruediv__(self, o): return self._bin(o, np.true_divide, "/", True)
    def __floordiv__(self, o): return self._bin(o, np.floor_divide, "//")
    def __rfloordiv__(self, o): return self._bin(o, np.floor_divide, "//", True)
    def __mod__(self, o): return self._bin(o, np.mod, "%")
    def __rmod__(self, o): return self._bin(o, np.mod, "%", True)
    def __pow__(self, o): return self._bin(o, np.power, "**")
    def __rpow__(self, o): return self._bin(o, np.power, "**", True)

    def __neg__(self):
        f = self._fn
        return Expr(lambda env: -f(env), f"-{self._text}", ("neg", self))

    def __abs__(self):
        f = self._fn
        return Expr(lambda env: np.abs(f(env)), f"abs({self._text})", ("abs", self))

    # comparisons --------------------------------------------------------
    def __lt__(self, o): return self._bin(o, operator.lt, "<")
    def __le__(self, o): return self._bin(o, operator.le, "<=")
    def __gt__(self, o): return self._bin(o, operator.gt, ">")
    def __ge__(self, o): return self._bin(o, operator.ge, ">=")
    def __eq__(self, o): return self._bin(o, operator.eq, "==")  # type: ignore[override]
    def __ne__(self, o): return self._bin(o, operator.ne, "!=")  # type: ignore[override]

    # logic ----------------------------------------------------------------
    def __and__(self, o): return self._bin(o, np.logical_and, "&")
    def __rand__(self, o): return self._bin(o, np.logical_and, "&", True)
    def __or__(self, o): return self._bin(o, np.logical_or, "|")
    def __ror__(self, o): return self._bin(o, np.logical_or, "|", True)

    def __invert__(self):
        f = self._fn
        return Expr(lambda env: np.logical_not(f(env)), f"~{self._text}", ("not", self))


def _lookup(env, name: str):
    """``env[name]``, or a ValueError naming the variables there (a variable of another model)."""
    try:
        return env[name]
    except KeyError:
        raise ValueError(f"variable {name!r} is not a state variable here (variables: {sorted(env)}); "
                         "was it declared on another model?") from None


class Var(Expr):
    """A bounded integer state variable, usable inside expressions.

    Created by :meth:`ctmc.Model.var`; usable as a key of an event's
    ``update`` dictionary.

    Parameters
    ----------
    name : str
        Variable name (the key of ``chain.states``).
    lo, hi : int
        Inclusive bounds, ``lo <= hi``.
    """

    __slots__ = ("name", "lo", "hi")

    def __init__(self, name: str, lo: int, hi: int):
        super().__init__(lambda env: _lookup(env, name), name, ("var", name))
        self.name = name
        self.lo = int(lo)
        self.hi = int(hi)

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {self.lo}, {self.hi})"

    __hash__ = object.__hash__


def calls_function(expr: Expr) -> bool:
    """Whether ``expr`` calls a user function ``f(env)`` (shown as ``f(state)`` in its text).

    Such a function receives the whole environment as a plain dict, as documented; the
    builder gives expressions made of operators only the variables they read.

    >>> x = Var("x", 0, 3)
    >>> calls_function(x + 1), calls_function(as_expr(lambda env: env["x"] * 2.0) + 1)
    (False, True)
    """
    return "(state)" in expr._text


def as_expr(value: Any) -> Expr:
    """Wrap a constant, an expression or a callable as an :class:`Expr`.

    Parameters
    ----------
    value : Expr, callable, int, float or bool
        A callable is taken as ``f(env) -> array``.

    Returns
    -------
    Expr

    Raises
    ------
    TypeError
        For any other type.
    """
    if isinstance(value, Expr):
        return value
    if callable(value):
        name = getattr(value, "__name__", "callable")
        return Expr(lambda env: value(env), f"{name}(state)")
    if isinstance(value, (bool, np.bool_, int, float, np.integer, np.floating)):
        return Expr(lambda env: value, repr(value), ("const", value))
    raise TypeError(f"cannot use {type(value).__name__} {value!r} in an expression")


def where(cond, a, b) -> Expr:
    """Element-wise ``a if cond else b``.

    Examples
    --------
    >>> import numpy as np
    >>> from ctmc.expr import Var, where
    >>> n = Var("n", 0, 5)
    >>> where(n > 2, 1.0, 0.5).evaluate({"n": np.arange(5)})
    array([0.5, 0.5, 0.5, 1. , 1. ])
    """
    c, x, y = as_expr(cond), as_expr(a), as_expr(b)
    return Expr(lambda env: np.where(c._fn(env), x._fn(env), y._fn(env)),
                f"where({c._text}, {x._text}, {y._text})", ("where", c, x, y))


def minimum(a, b) -> Expr:
    """Element-wise minimum of two expressions."""
    x, y = as_expr(a), as_expr(b)
    return Expr(lambda env: np.minimum(x._fn(env), y._fn(env)), f"min({x._text}, {y._text})", ("min", x, y))


def maximum(a, b) -> Expr:
    """Element-wise maximum of two expressions."""
    x, y = as_expr(a), as_expr(b)
    return Expr(lambda env: np.maximum(x._fn(env), y._fn(env)), f"max({x._text}, {y._text})", ("max", x, y))
