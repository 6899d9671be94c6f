r"""Vectorised expressions over arrays of states.

A model's guards, rates and updates are *expressions*: small trees built with
ordinary Python operators from state variables (:class:`Var`) and constants.
An expression is never evaluated state by state; :meth:`Expr.evaluate` takes
an *environment* ``{name: int64 array}`` holding one entry per state variable
for a whole batch of states and returns one numpy array for the batch.

Supported operators: ``+ - * / // % **``, unary ``-``, ``abs``, comparisons
``< <= == != > >=`` (which return boolean expressions) and the logical
``& | ~`` (use parentheses: ``(x > 0) & (y < K)``). :func:`where`,
:func:`minimum` and :func:`maximum` cover conditional values, :func:`table`
a constant table read at an integer expression (a rate per service phase).

Wherever an expression is expected a plain callable ``f(env) -> array`` is also
accepted, for rates that are awkward to write with operators (for instance a
hypergeometric sampling probability); it receives the same environment.

**Integers are exact or refused.** Integer arithmetic means the exact value of
Python's unbounded integers, which must lie in the 64-bit range
:math:`[-2^{63}, 2^{63} - 1]`; numpy's wrap-around is never used silently. Each
integer sub-expression's range is bounded by interval arithmetic with exact
integers: over the variables' declared bounds once per expression (when the
bound stays in range and no divisor can be 0, numpy's int64 arithmetic is exact
and runs as is), else over the values of the batch. Where a bound leaves the
64-bit range the sub-expression is computed exactly, state by state, with
Python integers, and a state whose value leaves the range raises
:class:`ExpressionError` naming the sub-expression, its exact value and the
state; so does an integer ``//`` or ``%`` by zero, and PRISM's :func:`mod` by a divisor
:math:`\le 0`. A value that is not used
does not count: the branch :func:`where` does not take, an operand of ``&``
where the other is false, of ``|`` where the other is true. An integer
constant beyond the 64-bit range is refused where it is written. Expressions
deeper than :data:`DEEP` levels are evaluated by a loop (no recursion limit).

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
from typing import Any, Callable, Mapping, Optional

import numpy as np

__all__ = ["Expr", "Var", "where", "minimum", "maximum", "table", "mod", "as_expr", "calls_function",
           "ExpressionError"]

Env = Mapping[str, np.ndarray]

#: The 64-bit range of integer values.
INT64 = (-2 ** 63, 2 ** 63 - 1)
#: Expressions deeper than this are evaluated by a loop, not by nested calls.
DEEP = 100


class ExpressionError(ValueError):
    """An integer expression has no exact 64-bit value in a state (overflow, ``//`` or ``%`` by zero)."""


class Expr:
    """A lazily evaluated, vectorised expression over state variables.

    Instances are built by operators on :class:`Var` objects and constants;
    users rarely construct them directly.

    Parameters
    ----------
    fn : callable
        ``fn(env) -> array`` evaluating the expression on a batch of states
        with numpy's arithmetic (used as is where it is exact).
    text : str or None
        Human-readable form used in error messages; ``None``: written from
        ``node`` when asked (a deep expression's text is long).
    node : tuple, optional
        The expression's structure, ``(kind, *operands)``, for the compiled
        builder (:mod:`ctmc._compiled`) and the exact evaluation:
        ``("var", name)``, ``("const", value)``, ``("bin", symbol, a, b)``,
        ``("neg" | "abs" | "not", a)``, ``("where", c, a, b)``,
        ``("min" | "max", a, b)``, ``("table", index, values)`` (values: a
        read-only float64 array); ``None`` for a user function.
    """

    __slots__ = ("_fn", "_txt", "_node", "_fast")

    def __init__(self, fn: Callable[[Env], Any], text: Optional[str], node: Any = None):
        self._fn = fn
        self._txt = text
        self._node = node
        self._fast = None                   # numpy's arithmetic is exact on every batch (found once)

    @property
    def _text(self) -> str:
        if self._txt is None:
            self._txt = _render(self)
        return self._txt

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

        Raises
        ------
        ExpressionError
            An integer value used by the expression leaves the 64-bit range, or
            an integer ``//`` or ``%`` divides by zero, in some state (named).
        """
        value, faults = self.evaluate_faults(env)
        if faults is not None:
            faults.throw(env)
        return value

    def evaluate_faults(self, env: Env):
        """``(value, faults)``: :meth:`evaluate` that reports its faults instead of raising.

        ``faults`` is ``None``, or a :class:`Faults` whose ``mask`` marks the
        states without an exact value (their ``value`` is meaningless).
        """
        fast = self._fast
        if fast is None:
            fast = self._fast = _exact_by_bounds(self)
        if fast:
            return self._fn(env), None
        return _checked(self, env)

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
        return Expr(lambda env: op(fa(env), fb(env)), None, ("bin", sym, a, b))

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
        return Expr(lambda env: -f(env), None, ("neg", self))

    def __abs__(self):
        f = self._fn
        return Expr(lambda env: np.abs(f(env)), None, ("abs", self))

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
        node = self._node
        if node is not None and (
                (node[0] == "var" and isinstance(self, Var) and not 0 <= self.lo <= self.hi <= 1)
                or node[0] in ("neg", "abs", "table") or (node[0] == "bin" and node[1] in _ARITH + ("/",))
                or (node[0] == "const" and not isinstance(node[1], (bool, np.bool_)))):
            raise ExpressionError(f"'~' of the number {_render(self)}: '~' is the logical not of a condition, "
                                  "not Python's bitwise ~ (write e.g. (n == 0) or -n - 1)")
        f = self._fn
        return Expr(lambda env: np.logical_not(f(env)), None, ("not", self))


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
    return any(e._node is None for e in _nodes(expr))


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
    ExpressionError
        For an integer beyond the 64-bit range.
    """
    if isinstance(value, Expr):
        return value
    if callable(value):
        name = getattr(value, "__name__", "callable")
        return Expr(lambda env: value(env), f"{name}(state)")
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) \
            and not INT64[0] <= int(value) <= INT64[1]:
        raise ExpressionError(f"the integer constant {value!r} is beyond the 64-bit range "
                              f"[-2**63, 2**63 - 1]")
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
                None, ("where", c, x, y))


def table(values, index) -> Expr:
    """Element-wise ``values[index]``: a constant table of numbers read at an integer expression.

    The value is the table's entry itself (no arithmetic), in one step where a chain of
    :func:`where` on the index would take one per distinct value: a rate per service phase.

    Parameters
    ----------
    values : sequence of float
        The table, one-dimensional, not empty (stored as float64).
    index : Expr or int
        An integer expression; an index outside ``0..len(values) - 1`` in a state where the
        value is used raises :class:`ExpressionError` naming it and the state.

    Examples
    --------
    >>> import numpy as np
    >>> from ctmc.expr import Var, table
    >>> j = Var("phase", 0, 2)
    >>> table([2.0, 0.5, 1.0], j).evaluate({"phase": np.array([2, 0, 1])})
    array([1. , 2. , 0.5])
    """
    try:
        vals = np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"table: values must be numbers, got {values!r}") from None
    if vals.ndim != 1 or not 0 < vals.size < 2 ** 31:
        raise ValueError(f"table: values must be a non-empty one-dimensional sequence, "
                         f"got shape {vals.shape}")
    vals.setflags(write=False)
    ix = as_expr(index)
    return Expr(lambda env: vals[ix._fn(env)], None, ("table", ix, vals))


def mod(a, b) -> Expr:
    """Element-wise PRISM ``mod(a, b)``: the remainder in ``0..b-1`` of integers, for a divisor ``b > 0``.

    A state where ``b <= 0`` in which the value is used raises :class:`ExpressionError` naming the
    expression, the divisor and the state (PRISM refuses such a divisor; Python's ``a % b`` would
    give a remainder in ``b+1..0`` for a negative one).

    Examples
    --------
    >>> import numpy as np
    >>> from ctmc.expr import Var, mod
    >>> x, n = Var("x", -3, 3), Var("n", -1, 3)
    >>> mod(x, n).evaluate({"x": np.array([-3, 3]), "n": np.array([2, 3])})
    array([1, 0])
    >>> mod(x, n).evaluate({"x": np.array([1]), "n": np.array([-1])})
    Traceback (most recent call last):
    ...
    ctmc.expr.ExpressionError: mod(x, n) has the divisor -1, not > 0, in state (x=1, n=-1)
    """
    x, y = as_expr(a), as_expr(b)
    return Expr(lambda env: np.mod(x._fn(env), y._fn(env)), None, ("bin", "mod", x, y))


def minimum(a, b) -> Expr:
    """Element-wise minimum of two expressions."""
    x, y = as_expr(a), as_expr(b)
    return Expr(lambda env: np.minimum(x._fn(env), y._fn(env)), None, ("min", x, y))


def maximum(a, b) -> Expr:
    """Element-wise maximum of two expressions."""
    x, y = as_expr(a), as_expr(b)
    return Expr(lambda env: np.maximum(x._fn(env), y._fn(env)), None, ("max", x, y))


# ---- structure: operands, text ----------------------------------------------------------------

def _kids(e: Expr) -> list:
    """The operands of ``e`` (none for a variable, a constant or a user function)."""
    node = e._node
    if node is None or node[0] in ("var", "const"):
        return []
    return [x for x in node[1:] if isinstance(x, Expr)]


def _nodes(root: Expr):
    """Every distinct sub-expression of ``root`` (a loop: expressions may be thousands deep)."""
    stack, seen = [root], set()
    while stack:
        e = stack.pop()
        if id(e) not in seen:
            seen.add(id(e))
            yield e
            stack += _kids(e)


def exact_text(root: Expr) -> str:
    """The text of ``root`` with every table value written (``repr`` shortens tables beyond 8):
    two expressions of the same exact text compute the same values (what a structure key hashes)."""
    return _render(root, full=True)


def _render(root: Expr, full: bool = False) -> str:
    """The text of ``root``, written piece by piece from its nodes (linear in its size); tables
    beyond 8 values shortened unless ``full``."""
    out, stack = [], [root]
    while stack:
        e = stack.pop()
        if isinstance(e, str):
            out.append(e)
            continue
        node = e._node
        if e._txt is not None or node is None:
            out.append(e._txt if e._txt is not None else "?")
            continue
        kind = node[0]
        if kind == "bin" and node[1] == "mod":
            parts = ["mod(", node[2], ", ", node[3], ")"]
        elif kind == "bin":
            parts = ["(", node[2], f" {node[1]} ", node[3], ")"]
        elif kind in ("neg", "not"):
            parts = ["-" if kind == "neg" else "~", node[1]]
        elif kind == "abs":
            parts = ["abs(", node[1], ")"]
        elif kind == "table":
            v = [repr(float(x)) for x in node[2]]
            vals = ", ".join(v if len(v) <= 8 or full else v[:3] + ["..."] + v[-3:])
            parts = [f"table([{vals}], ", node[1], ")"]
        else:                                        # where, min, max
            args = list(node[1:])
            parts = [f"{kind}("] + [x for a in args for x in (a, ", ")][:-1] + [")"]
        stack += reversed(parts)
    return "".join(out)


# ---- integer ranges -----------------------------------------------------------------------------

def _pow_exponent(e):
    """Exponents above 64 cut to 64 or 65 (same parity): the same value for a base of -1, 0 or 1,
    and beyond the 64-bit range for any other base, as the exact power."""
    return e if e <= 64 else 64 + e % 2


def _bound(sym: str, a: tuple, b: tuple):
    """``(lo, hi, divides_by_zero)``: exact bounds of ``x <sym> y`` for integers ``x`` in ``a``, ``y`` in
    ``b`` (closed intervals), and whether ``y`` may be 0 in a ``//`` or ``%`` (``<= 0`` in a ``mod``)."""
    (alo, ahi), (blo, bhi) = a, b
    if sym in ("+", "-", "*"):
        f = {"+": operator.add, "-": operator.sub, "*": operator.mul}[sym]
        c = [f(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(c), max(c), False
    zero = blo <= 0 <= bhi or (sym == "mod" and blo <= 0)
    if sym in ("%", "mod"):
        return min(0, blo + 1), max(0, bhi - 1), zero
    if sym == "//":
        ys = [y for y in (blo, bhi, -1, 1) if blo <= y <= bhi and y != 0]
        c = [x // y for x in (alo, ahi) for y in ys] or [0]
        return min(c), max(c), zero
    # ** with a non-negative exponent: extremes at the ends of the base (and -1, 0, 1) and at the
    # exponents of both parities next to the ends of the exponent
    xs = {alo, ahi} | {x for x in (-1, 0, 1) if alo <= x <= ahi}
    es = {e for e in (blo, blo + 1, bhi - 1, bhi) if blo <= e <= bhi}
    c = [x ** _pow_exponent(e) for x in xs for e in es]
    return min(c), max(c), False


def _unary_range(op: str, a: tuple) -> tuple:
    """Exact bounds of ``-x`` (``op`` "neg") or ``abs(x)`` for integers ``x`` in ``a``."""
    lo, hi = a
    if op == "neg":
        return -hi, -lo
    return (0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))


_ARITH = ("+", "-", "*", "//", "%", "mod", "**")


def _exact_by_bounds(root: Expr) -> bool:
    """Whether numpy's arithmetic is exact for ``root`` on any batch of the declared bounds.

    Kinds ``b`` (boolean), ``i`` (integer, with its range), ``f`` (float) and ``?`` (unknown: a
    user function, a name that is not a :class:`Var`) are followed as numpy promotes them; any
    integer operation on an unknown kind, whose range may leave 64 bits or whose divisor may be
    0, and any expression deeper than :data:`DEEP`, ask for the checked evaluation.
    """
    info: dict = {}
    stack = [(root, False)]
    while stack:
        e, ready = stack.pop()
        if id(e) in info:
            continue
        kids = _kids(e)
        if not ready:
            stack.append((e, True))
            stack += [(k, False) for k in kids if id(k) not in info]
            continue
        parts = [info[id(k)] for k in kids]
        depth = 1 + max((p[2] for p in parts), default=0)
        if depth > DEEP:
            return False
        kind, rng = _kind_of(e, parts)
        if kind is None:
            return False
        info[id(e)] = (kind, rng, depth)
    return True


def _kind_of(e: Expr, parts: list):
    """``(kind, range)`` of ``e`` from its operands' (see :func:`_exact_by_bounds`); ``(None, None)``:
    numpy's arithmetic may not be exact."""
    node = e._node
    if node is None:
        return "?", None
    op = node[0]
    if op == "var":
        return ("i", (e.lo, e.hi)) if isinstance(e, Var) else ("?", None)
    if op == "const":
        v = node[1]
        if isinstance(v, (bool, np.bool_)):
            return "b", (0, 1)
        if type(v) in (int, np.int64):
            return "i", (int(v), int(v))
        return ("f", None) if type(v) in (float, np.float64) else ("?", None)
    kinds = [p[0] for p in parts]
    rngs = [p[1] if p[0] != "b" else (0, 1) for p in parts]
    if op == "not" or (op == "bin" and node[1] not in _ARITH and node[1] != "/"):
        return "b", (0, 1)
    if op == "table":           # numpy's indexing is exact where the index stays in the table
        inside = kinds[0] == "i" and 0 <= rngs[0][0] and rngs[0][1] < node[2].size
        return ("f", None) if inside else (None, None)
    if op in ("where", "min", "max"):
        ks, rs = (kinds[1:], rngs[1:]) if op == "where" else (kinds, rngs)
        if "?" in ks:
            return "?", None
        if "f" in ks:
            return "f", None
        if ks == ["b", "b"]:
            return "b", (0, 1)
        return "i", (min(r[0] for r in rs), max(r[1] for r in rs))
    if "?" in kinds:
        return None, None
    if "f" in kinds or (op == "bin" and node[1] == "/"):
        return "f", None
    if op in ("neg", "abs"):
        if kinds[0] == "b":
            return (None, None) if op == "neg" else ("b", (0, 1))
        lo, hi = _unary_range(op, rngs[0])
    else:
        if kinds == ["b", "b"] or (node[1] == "**" and rngs[1][0] < 0):
            return None, None
        lo, hi, zero = _bound(node[1], rngs[0], rngs[1])
        if zero:
            return None, None
    if lo < INT64[0] or hi > INT64[1]:
        return None, None
    return "i", (lo, hi)


# ---- the checked evaluation ----------------------------------------------------------------------

def _is_int(v) -> bool:
    if isinstance(v, np.ndarray):
        return v.dtype.kind in "iu"
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _limits(v) -> tuple:
    dt = getattr(v, "dtype", None)
    if dt is not None and dt.kind in "iu":
        info = np.iinfo(dt)
        return int(info.min), int(info.max)
    return INT64


def _range_of(v):
    """The range of the integer (or boolean) values ``v``, ``None`` for other values."""
    if isinstance(v, (bool, np.bool_)) or getattr(v, "dtype", None) == bool:
        return 0, 1
    if not _is_int(v):
        return None
    a = np.asarray(v)
    if a.size == 0:
        return 0, 0
    return int(a.min()), int(a.max())


class Faults:
    """The states of a batch where an expression has no exact 64-bit integer value.

    Attributes
    ----------
    mask : ndarray of bool or bool
        Per state of the batch (a scalar when no state variable is involved).
    """

    __slots__ = ("_items",)

    def __init__(self, items):
        self._items = items                          # [(mask, sub-expression, what, exact values)]

    @property
    def mask(self):
        m = False
        for item in self._items:
            m = np.logical_or(m, item[0])
        return m

    def message(self, env, k=None) -> str:
        """One line naming the first fault (at state ``k``, or the first state with one)."""
        for mask, e, what, exact in self._items:
            m = np.asarray(mask)
            if m.ndim == 0:
                if not m:
                    continue
                at = k
            elif k is None:
                if not m.any():
                    continue
                at = int(np.flatnonzero(m)[0])
            elif not m[k]:
                continue
            else:
                at = k
            state = _state(e, env, at)
            x = exact if np.ndim(exact) == 0 else exact[at if at is not None else 0]
            if what == "zero":
                why = "divides an integer by zero"
            elif what == "divisor":
                why = f"has the divisor {x}, not > 0,"
            elif what == "index":
                why = f"reads index {x}, outside the table's 0..{e._node[2].size - 1}"
            else:
                why = f"is {x}, beyond the 64-bit integer range [-2**63, 2**63 - 1]"
            return f"{e._text} {why}{state}"
        return "no fault"

    def throw(self, env, k=None):
        """Raise :class:`ExpressionError` with :meth:`message`."""
        raise ExpressionError(self.message(env, k))

    def restrict(self, keep):
        """Only the faults where ``keep`` holds (``None`` when none is left)."""
        items = [(np.logical_and(m, keep), *rest) for m, *rest in self._items]
        items = [it for it in items if np.any(it[0])]
        return Faults(items) if items else None


def _state(e: Expr, env, k) -> str:
    """`` in state (x=1, y=2)``: the values at position ``k`` (0 if ``None``) of the names ``e`` reads."""
    names = {x._node[1] for x in _nodes(e) if x._node is not None and x._node[0] == "var"}
    try:
        names = [nm for nm in env if nm in names]    # in the environment's order (the variables')
    except TypeError:
        names = sorted(names)
    vals = []
    for nm in names:
        try:
            v = np.asarray(env[nm]).reshape(-1)
        except (KeyError, TypeError, ValueError):
            continue
        if v.size:
            vals.append(f"{nm}={v[min(k or 0, v.size - 1)].item()!r}")
    return f" in state ({', '.join(vals)})" if vals else ""


_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": np.true_divide,
        "//": np.floor_divide, "%": np.mod, "mod": np.mod, "**": np.power, "<": operator.lt,
        "<=": operator.le,
        ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
        "&": np.logical_and, "|": np.logical_or}
_EXACT_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv,
              "%": operator.mod, "mod": operator.mod, "**": operator.pow}


def _merge(*faults):
    items = [it for f in faults if f is not None for it in f._items]
    return Faults(items) if items else None


def _checked(root: Expr, env):
    """``(value, faults)`` of ``root`` node by node (a loop), integers exact or faulted."""
    memo: dict = {}
    uses: dict = {}                                  # parents yet to read each result: freed after the last
    for e in _nodes(root):
        for k in _kids(e):
            uses[id(k)] = uses.get(id(k), 0) + 1
    stack = [(root, False)]
    with np.errstate(all="ignore"):
        while stack:
            e, ready = stack.pop()
            if id(e) in memo:
                continue
            kids = _kids(e)
            if not ready and kids:
                stack.append((e, True))
                stack += [(k, False) for k in kids if id(k) not in memo]
                continue
            memo[id(e)] = _step(e, [memo[id(k)] for k in kids], env)
            for k in kids:
                uses[id(k)] -= 1
                if not uses[id(k)]:
                    del memo[id(k)]
    value, _, faults = memo[id(root)]
    return value, faults


def _truth(v, faults):
    """Where ``v`` is surely false (a fault leaves it unknown)."""
    false = np.logical_not(v)
    return false if faults is None else np.logical_and(false, np.logical_not(faults.mask))


def _step(e: Expr, parts: list, env):
    """``(value, range, faults)`` of ``e`` from its operands'."""
    node = e._node
    if node is None or node[0] in ("var", "const"):
        v = e._fn(env)
        return v, _range_of(v), None
    op = node[0]
    vals = [p[0] for p in parts]
    faults = [p[2] for p in parts]
    if op == "where":
        c = vals[0]
        cf = faults[0]
        xf = faults[1].restrict(np.asarray(c, dtype=bool)) if faults[1] else None
        yf = faults[2].restrict(np.logical_not(c)) if faults[2] else None
        v = np.where(c, vals[1], vals[2])
        return v, _range_of(v), _merge(cf, xf, yf)
    if op == "not":
        v = np.logical_not(vals[0])
        return v, (0, 1), faults[0]
    if op == "table":
        return _checked_table(e, vals[0], faults[0], env)
    if op in ("min", "max"):
        v = (np.minimum if op == "min" else np.maximum)(vals[0], vals[1])
        return v, _range_of(v), _merge(*faults)
    if op in ("neg", "abs"):
        v = -vals[0] if op == "neg" else np.abs(vals[0])
        if not _is_int(v):
            return v, _range_of(v), faults[0]
        return _checked_int(e, v, _unary_range(op, parts[0][1]), [vals[0]], faults[0],
                            (lambda x: -x) if op == "neg" else abs, None)
    sym = node[1]
    fa, fb = faults
    if sym == "&":
        fa = fa.restrict(np.logical_not(_truth(vals[1], fb))) if fa else None
        fb = fb.restrict(np.logical_not(_truth(vals[0], faults[0]))) if fb else None
    elif sym == "|":
        fa = fa.restrict(np.logical_not(_truth(np.logical_not(vals[1]), fb))) if fa else None
        fb = fb.restrict(np.logical_not(_truth(np.logical_not(vals[0]), faults[0]))) if fb else None
    try:
        v = _OPS[sym](vals[0], vals[1])
    except (ValueError, ZeroDivisionError) as exc:  # numpy: an integer to a negative integer power
        raise ExpressionError(f"{e._text}: {exc}{_state(e, env, None)}") from None
    prior = _merge(fa, fb)
    if sym not in _EXACT_OPS or not _is_int(v):
        return v, _range_of(v), prior
    ra, rb = parts[0][1], parts[1][1]
    lo, hi, zero = _bound(sym, ra, rb)
    return _checked_int(e, v, (lo, hi), vals, prior, _EXACT_OPS[sym], sym if zero else None)


def _checked_table(e, index, prior, env):
    """``(value, range, faults)`` of ``table(values, index)``: the states whose index leaves the table
    faulted (their value meaningless), a non-integer index refused."""
    if not _is_int(index):
        raise ExpressionError(f"{e._text}: the index is not an integer{_state(e, env, None)}")
    table_ = e._node[2]
    bad = np.logical_or(np.less(index, 0), np.greater_equal(index, table_.size))
    own = Faults([(bad, e, "index", index)]) if np.any(bad) else None
    return table_[np.where(bad, 0, index)], None, _merge(prior, own)


def _checked_int(e, v, rng, operands, prior, exact_op, divides):
    """``(value, range, faults)`` of an integer operation whose result numpy gave as ``v``: exact where
    its bound ``rng`` stays in range; else recomputed with Python integers, states out of range faulted."""
    lim = _limits(v)
    items = []
    bad = False
    if divides is not None:
        zero = np.less_equal(operands[1], 0) if divides == "mod" else np.equal(operands[1], 0)
        if np.any(zero):
            items.append((zero, e, "divisor" if divides == "mod" else "zero", operands[1]))
            bad = zero
    if lim[0] <= rng[0] and rng[1] <= lim[1]:
        out = rng
    else:
        xs = [np.asarray(x).astype(object) for x in operands]
        if divides is not None and items:
            xs[1] = np.where(bad, 1, xs[1])
        if exact_op is operator.pow:
            big = np.abs(xs[0]) > 1
            xs[1] = np.where(np.logical_and(big, xs[1] > 64), 64, xs[1])
        ex = exact_op(*xs)
        over = np.asarray((ex < lim[0]) | (ex > lim[1]), dtype=bool)
        if np.any(over) and divides is not None and items:
            over = np.logical_and(over, np.logical_not(bad))
        if np.any(over):
            items.append((over, e, "overflow", ex))
        good = np.asarray(v)[np.logical_not(np.logical_or(over, bad))] if np.ndim(v) else (
            np.asarray([v]) if not np.any(over) and not np.any(bad) else np.asarray([0]))
        out = (int(good.min()), int(good.max())) if good.size else (0, 0)
    if type(v) is int and not lim[0] <= v <= lim[1]:
        v = 0                           # Python's exact value of constants (faulted): numpy takes no such int
    own = Faults(items) if items else None
    return v, out, _merge(prior, own)
