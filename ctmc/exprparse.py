r"""Safe parsing of expressions typed on a command line (``n1 + n2``, ``n1 == 5``, ``full & (n2 > 0)``).

A user's text becomes a :class:`ctmc.Expr` without :func:`eval`: the text is
parsed with :mod:`ast` and every node is checked against a short list of what
an expression of a model's variables may contain, then mapped to the
operators of :mod:`ctmc.expr`:

- names of the model's state variables, and any other names the caller
  allows (a chain's labels, which are sets of states, and its rewards);
- numbers and ``True``/``False``;
- arithmetic ``+ - * / // % **`` and unary ``-``/``+``;
- comparisons ``< <= == != > >=`` (chained ones, ``0 < n < 5``, mean
  ``(0 < n) & (n < 5)``); a comparison with an unparenthesised ``&``/``|``
  operand (``n > 2 & n < 5``, which Python reads as ``n > (2 & n) < 5``)
  is refused: write ``(n > 2) & (n < 5)`` or ``and``;
- the logical ``& | ~``, and ``and``/``or``/``not``, which mean the same
  element-wise operators (Python's own would ask a whole array for one truth
  value);
- the functions ``min``, ``max`` (two or more arguments, element-wise:
  :func:`ctmc.minimum`/:func:`ctmc.maximum`), ``where(cond, a, b)``
  (:func:`ctmc.where`) and ``abs``.

Anything else (attribute access, subscripts, calls of other functions,
lambdas, strings, ...) raises a :class:`ValueError` of one line naming the
offending part of the text. Nothing of the text is ever executed.

Arithmetic is :mod:`ctmc.expr`'s: integers are exact or refused (an integer
constant beyond the 64-bit range, a value leaving it, ``//`` or ``%`` by zero
raise :class:`ctmc.expr.ExpressionError`, a :class:`ValueError`, naming the
part and the state), and :func:`eval_on_chain` refuses a value that is not a
finite number (``nan``, ``inf``): a measure of it would be no number.

Examples
--------
>>> import numpy as np
>>> from ctmc.exprparse import parse_expr
>>> e = parse_expr("max(n1, n2) + (n1 == 0 and not n2 > 1)", ["n1", "n2"])
>>> e.evaluate({"n1": np.array([0, 3]), "n2": np.array([1, 1])})
array([2, 3])
>>> parse_expr("__import__('os')", ["n1"])
Traceback (most recent call last):
    ...
ValueError: expression "__import__('os')": call of '__import__' is not allowed (functions: ...)
>>> parse_expr("n3 + 1", ["n1", "n2"])
Traceback (most recent call last):
    ...
ValueError: expression 'n3 + 1': unknown name 'n3' (names: n1, n2)
"""
from __future__ import annotations

import ast
import functools
import operator
from typing import Iterable, Mapping, Optional

import numpy as np

from .expr import Expr, ExpressionError, as_expr, maximum, minimum, where

__all__ = ["parse_expr", "eval_on_chain", "FUNCTIONS"]

_BINARY = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
}
_COMPARE = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}


def _min(*args):
    return functools.reduce(minimum, args)


def _max(*args):
    return functools.reduce(maximum, args)


#: The functions an expression may call: name -> (function, least and most arguments).
FUNCTIONS = {
    "min": (_min, 2, None),
    "max": (_max, 2, None),
    "where": (where, 3, 3),
    "abs": (abs, 1, 1),
}

_WHAT = {   # what a refused node is, for the message
    ast.Attribute: "attribute access", ast.Subscript: "subscript", ast.Lambda: "lambda",
    ast.IfExp: "conditional expression (use where(cond, a, b))", ast.Starred: "starred argument",
    ast.ListComp: "comprehension", ast.GeneratorExp: "comprehension", ast.SetComp: "comprehension",
    ast.DictComp: "comprehension", ast.List: "list", ast.Tuple: "tuple", ast.Dict: "dict", ast.Set: "set",
    ast.JoinedStr: "f-string", ast.NamedExpr: "assignment", ast.Await: "await", ast.Yield: "yield",
}


def _leaf(name: str) -> Expr:
    """An expression reading ``env[name]`` (a state variable, a label or a reward)."""
    def get(env):
        try:
            return env[name]
        except KeyError:
            raise ValueError(f"name {name!r} is not defined here (names: {', '.join(sorted(env))})") from None
    return Expr(get, name, ("var", name))


class _Builder:
    def __init__(self, text: str, names, symbols=None):
        self.text, self.names = text, list(dict.fromkeys(names))
        self.symbols = dict(symbols or {})

    def fail(self, node, what: str):
        part = ast.get_source_segment(self.text, node) or ast.dump(node)
        return ValueError(f"expression {self.text!r}: {what} {part!r} is not allowed")

    def _parenthesised(self, node) -> bool:
        """Whether the text of ``node`` is written inside its own parentheses."""
        lines = self.text.strip().splitlines()
        before = "".join(lines[:node.lineno - 1]) + lines[node.lineno - 1][:node.col_offset]
        after = lines[node.end_lineno - 1][node.end_col_offset:] + "".join(lines[node.end_lineno:])
        return before.rstrip().endswith("(") and after.lstrip().startswith(")")

    def build(self, node):
        meth = getattr(self, f"_{type(node).__name__}", None)
        if meth is None:
            raise self.fail(node, _WHAT.get(type(node), type(node).__name__))
        return meth(node)

    def _Expression(self, node):
        return as_expr(self.build(node.body))

    def _Constant(self, node):
        if isinstance(node.value, (bool, int, float)):
            try:
                return as_expr(node.value)
            except ExpressionError as exc:      # an integer beyond 64 bits, refused where written
                raise ValueError(f"expression {self.text!r}: {exc}") from None
        raise self.fail(node, f"{type(node.value).__name__} constant")

    def _Name(self, node):
        if node.id in self.names:
            return _leaf(node.id)
        if node.id in self.symbols:
            return as_expr(self.symbols[node.id])
        if node.id in FUNCTIONS:
            raise ValueError(f"expression {self.text!r}: {node.id!r} is a function: call it, e.g. "
                             f"{node.id}(a, b)")
        known = self.names + [k for k in self.symbols if k not in self.names]
        raise ValueError(f"expression {self.text!r}: unknown name {node.id!r} "
                         f"(names: {', '.join(known)})")

    def _BinOp(self, node):
        op = _BINARY.get(type(node.op))
        if op is None:
            raise self.fail(node, f"operator {type(node.op).__name__} in")
        return op(as_expr(self.build(node.left)), as_expr(self.build(node.right)))

    def _UnaryOp(self, node):
        arg = node.operand
        if isinstance(node.op, ast.USub) and isinstance(arg, ast.Constant) and type(arg.value) is int:
            return self._Constant(ast.Constant(-arg.value))     # -9223372036854775808 is one constant
        x = as_expr(self.build(arg))
        if isinstance(node.op, ast.USub):
            return -x
        if isinstance(node.op, ast.UAdd):
            return x
        return ~x                                   # Not and Invert: element-wise negation

    def _BoolOp(self, node):
        op = operator.and_ if isinstance(node.op, ast.And) else operator.or_
        return functools.reduce(op, [as_expr(self.build(v)) for v in node.values])

    def _Compare(self, node):
        for side in (node.left, *node.comparators):     # n > 2 & n < 5 is n > (2 & n) < 5 in Python
            if isinstance(side, ast.BinOp) and isinstance(side.op, (ast.BitAnd, ast.BitOr)) \
                    and not self._parenthesised(side):
                sym = "&" if isinstance(side.op, ast.BitAnd) else "|"
                raise ValueError(f"expression {self.text!r}: {sym!r} binds tighter than a comparison, so "
                                 f"{ast.get_source_segment(self.text, node)!r} compares "
                                 f"{ast.get_source_segment(self.text, side)!r}: put each comparison in "
                                 f"parentheses, (a > 2) {sym} (a < 5), or write 'and'/'or'")
        terms = [as_expr(self.build(node.left))] + [as_expr(self.build(c)) for c in node.comparators]
        parts = []
        for k, cmp in enumerate(node.ops):
            op = _COMPARE.get(type(cmp))
            if op is None:
                raise self.fail(node, f"comparison {type(cmp).__name__} in")
            parts.append(op(terms[k], terms[k + 1]))
        return functools.reduce(operator.and_, parts)

    def _Call(self, node):
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            part = ast.get_source_segment(self.text, node.func) or ast.dump(node.func)
            raise ValueError(f"expression {self.text!r}: call of {part!r} is not allowed "
                             f"(functions: {', '.join(FUNCTIONS)})")
        if node.keywords:
            raise self.fail(node, "keyword argument in")
        fn, lo, hi = FUNCTIONS[node.func.id]
        n = len(node.args)
        if n < lo or (hi is not None and n > hi):
            want = f"{lo}" if lo == hi else f"at least {lo}"
            raise ValueError(f"expression {self.text!r}: {node.func.id}() takes {want} arguments, got {n}")
        return fn(*[as_expr(self.build(a)) for a in node.args])


def parse_expr(text: str, names: Iterable[str], symbols: Optional[Mapping[str, Expr]] = None) -> Expr:
    """Parse ``text`` into a :class:`ctmc.Expr` over the allowed ``names``.

    Parameters
    ----------
    text : str
        A Python expression (see the module docstring for what it may hold).
    names : iterable of str
        The names it may use: the model's variables, labels, rewards. The
        expression reads them from the environment it is evaluated in
        (:meth:`ctmc.Expr.evaluate`, :func:`eval_on_chain`).
    symbols : mapping of str to Expr, optional
        Names that stand for expressions, put in their place (a
        :class:`ctmc.Model`'s labels and rewards, :attr:`ctmc.Model.labels`,
        for the simulator: ``"full & (n > 2)"``, ``"2 * queue"``); a name in
        ``names`` too is the one of ``names``.

    Returns
    -------
    Expr

    Raises
    ------
    ValueError
        One line naming what is wrong: a syntax error, an unknown name, a
        call of a function other than ``min``/``max``/``where``/``abs``, an
        attribute access or any other construct outside the list.
    """
    if not isinstance(text, str):
        raise ValueError(f"expression: expected text, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("expression: empty")
    try:
        tree = ast.parse(text.strip(), mode="eval")
        return _Builder(text.strip(), names, symbols).build(tree)
    except SyntaxError as exc:
        raise ValueError(f"expression {text!r}: {exc.msg}") from None
    except (RecursionError, MemoryError):
        # Python's parser and this builder recurse once per level: refuse, do not crash
        short = text.strip() if len(text.strip()) <= 60 else text.strip()[:57] + "..."
        raise ValueError(f"expression {short!r}: nested too deeply for a command-line expression "
                         f"(write it in the model file, where deep expressions are evaluated by a loop)") from None


def eval_on_chain(text: str, chain, *, boolean: bool = False) -> np.ndarray:
    """Values of the expression ``text`` on every state of ``chain`` (a mask with ``boolean``).

    The names allowed are the chain's state variables, its labels (sets of
    states: 1 where they hold) and its rewards, in that order of precedence
    when a name is both.

    Raises
    ------
    ValueError
        What :func:`parse_expr` refuses; an integer fault
        (:class:`ctmc.expr.ExpressionError`); a value that is not a finite
        number in some state (named); numbers where ``boolean`` asks for a
        condition.

    Examples
    --------
    >>> import ctmc
    >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 3)
    >>> m.event("a", guard=n < 3, rate=1.0, update={n: n + 1})
    >>> m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> m.label("full", n == 3)
    >>> chain = m.build(initial={"n": 0})
    >>> eval_on_chain("full or n == 0", chain, boolean=True).tolist()
    [True, False, False, True]
    >>> eval_on_chain("n ** 2 / 2", chain).tolist()
    [0.0, 0.5, 2.0, 4.5]
    """
    env: dict = {}
    for group in (getattr(chain, "rewards", {}) or {}, getattr(chain, "labels", {}) or {},
                  chain.states.as_dict()):
        env.update(group)                            # later groups take precedence
    expr = parse_expr(text, env)
    with np.errstate(all="ignore"):
        try:
            val = np.asarray(expr.evaluate(env))
        except ExpressionError as exc:
            raise ValueError(f"expression {text!r}: {exc}") from None
    if val.dtype.kind not in "biuf":
        raise ValueError(f"expression {text!r}: gives {val.dtype} values, expected numbers")
    val = np.broadcast_to(val, (chain.n_states,))
    if val.dtype.kind == "f" and not np.all(np.isfinite(val)):
        k = int(np.flatnonzero(~np.isfinite(val))[0])
        state = ", ".join(f"{nm}={int(v[k])}" for nm, v in chain.states.as_dict().items())
        raise ValueError(f"expression {text!r}: gives {val[k]} in state ({state}), not a finite number")
    if boolean:
        if val.dtype.kind != "b" and not np.all((val == 0) | (val == 1)):
            raise ValueError(f"expression {text!r}: a set of states needs a condition (such as n1 == 5), "
                             "got numbers")
        return val.astype(bool)
    return val.astype(float)

