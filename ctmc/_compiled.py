r"""The compiled builder: a model's expressions as bytecode, explored in C.

:meth:`ctmc.Model.build` spends its time, on models of many variables and a
deep search (the PRISM benchmarks kanban, fms, cluster), in numpy's per-call
overhead: every event is a dozen array operations per breadth-first level,
whatever the level's size. This module compiles the guards, rates and
updates of a model to a small stack bytecode over doubles and hands them to
the C extension :mod:`ctmc._explore`, which explores the reachable states one
by one and assembles the generator in the numbering of the vectorised builder
(states sorted by code, rows with sorted columns, duplicates summed, the
diagonal minus the row sum).

Semantics are numpy's, checked at compile time where they can be (types:
boolean, integer, float, promoted as numpy promotes its int64 and float64
arrays and Python scalars) and at run time where they cannot: integer
arithmetic leaving :math:`\pm 2^{53}` (where doubles stop being exact), an
integer division or remainder by zero, a negative integer power. The engine
answers only on the happy path. An expression it cannot compile (a user
function, a float32 constant, arithmetic on two booleans, ...) means the
vectorised builder builds the model; anything the vectorised builder reports
or treats specially at run time (an invalid rate, an update out of bounds or
not an integer, the cases above, ``max_states``, memory) stops the engine and
the vectorised builder builds it again, with its own rules and messages. So a
model is never built differently, only faster.
"""
from __future__ import annotations

import numpy as np

__all__ = ["available", "compile_model", "explore", "NotCompilable"]

_OPS = ("END VAR CONST ADD SUB MUL IADD ISUB IMUL DIV IFLOORDIV IMOD FFLOORDIV FMOD IPOW FPOW "
        "NEG ABS LT LE GT GE EQ NE AND OR NOT WHERE MIN MAX").split()
OP = {name: k for k, name in enumerate(_OPS)}
_EXACT = 2.0 ** 53
_STACK = 64            # the engine's evaluation stack (ctmc/_explore.c)
_MAX_VARS = 256
_CMP = {"<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "==": "EQ", "!=": "NE"}
_RANK = {"b": 0, "i": 1, "f": 2}

try:
    from . import _explore as _engine
except ImportError:         # the extension was not built (no compiler at install): numpy builds everything
    _engine = None


class NotCompilable(Exception):
    """The model (or one expression) is outside what the compiled builder handles."""


def available() -> bool:
    """Whether the C extension :mod:`ctmc._explore` is installed."""
    return _engine is not None


def _scalar_kind(v):
    """``"b" | "i" | "f"`` of a constant, as numpy treats it next to int64/float64 arrays."""
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype in (np.bool_, np.int64, np.float64):
        v = v[()]                                    # a 0-d array (np.where of constants): its scalar
    if isinstance(v, (bool, np.bool_)):
        return "b"
    if isinstance(v, (int, np.signedinteger)) and not isinstance(v, bool):
        if abs(int(v)) >= _EXACT:
            raise NotCompilable(f"the integer {v!r} is beyond 2**53")
        return "i"
    if isinstance(v, float) or (isinstance(v, np.floating) and np.asarray(v).dtype == np.float64):
        return "f"
    raise NotCompilable(f"a constant of type {type(v).__name__}")


def _has_vars(e) -> bool:
    node = e._node
    if node is None:
        raise NotCompilable(f"{e!r} calls a user function")
    kind = node[0]
    if kind == "var":
        return True
    if kind == "const":
        return False
    return any(_has_vars(x) for x in node[1:] if not isinstance(x, str))


class _Compiler:
    """Emits programs into one code array; constants into one table."""

    def __init__(self, names):
        self.col = {nm: k for k, nm in enumerate(names)}
        self.code: list = []
        self.consts: list = []
        self._const_at: dict = {}

    def const(self, value: float) -> None:
        key = (float(value), np.signbit(float(value)))
        at = self._const_at.get(key)
        if at is None:
            at = self._const_at[key] = len(self.consts)
            self.consts.append(float(value))
        self.code += [OP["CONST"], at]

    def program(self, e) -> tuple:
        """``(kind, start)``: ``e`` emitted as a program ended by END."""
        start = len(self.code)
        kind = self.emit(e)
        self.code.append(OP["END"])
        depth = top = 0
        pc = start
        while self.code[pc] != OP["END"]:
            op = self.code[pc]
            if op in (OP["VAR"], OP["CONST"]):
                top += 1
                pc += 2
                depth = max(depth, top)
                continue
            top -= {OP["NEG"]: 0, OP["ABS"]: 0, OP["NOT"]: 0, OP["WHERE"]: 2}.get(op, 1)
            pc += 1
        if depth > _STACK:
            raise NotCompilable(f"{e!r} is nested too deeply")
        return kind, start

    def emit(self, e) -> str:
        node = e._node
        if node is None:
            raise NotCompilable(f"{e!r} calls a user function")
        if not _has_vars(e):
            # constants folded by the expression's own evaluation (Python's or numpy's scalar rules,
            # numpy's warnings off as in the vectorised builder: the very value it computes)
            try:
                with np.errstate(all="ignore"):
                    v = e.evaluate({})
            except Exception as exc:                 # noqa: BLE001 - numpy decides at run time
                raise NotCompilable(f"{e!r}: {exc}") from None
            kind = _scalar_kind(v)
            self.const(float(v))
            return kind
        op = node[0]
        if op == "var":
            if node[1] not in self.col:
                raise NotCompilable(f"{node[1]!r} is not a state variable")
            self.code += [OP["VAR"], self.col[node[1]]]
            return "i"
        if op in ("neg", "abs"):
            k = self.emit(node[1])
            if k == "b":
                if op == "neg":
                    raise NotCompilable("negation of a boolean")
                return "b"                           # numpy's abs of a boolean is itself
            self.code.append(OP[op.upper()])
            return k
        if op == "not":
            self.emit(node[1])
            self.code.append(OP["NOT"])
            return "b"
        if op == "where":
            self.emit(node[1])
            ka, kb = self.emit(node[2]), self.emit(node[3])
            self.code.append(OP["WHERE"])
            return max(ka, kb, key=_RANK.get)
        if op in ("min", "max"):
            ka, kb = self.emit(node[1]), self.emit(node[2])
            self.code.append(OP[op.upper()])
            return max(ka, kb, key=_RANK.get)
        if op != "bin":
            raise NotCompilable(f"unknown node {op!r}")
        sym, a, b = node[1:]
        ka, kb = self.emit(a), self.emit(b)
        if sym in _CMP:
            self.code.append(OP[_CMP[sym]])
            return "b"
        if sym in ("&", "|"):
            self.code.append(OP["AND" if sym == "&" else "OR"])
            return "b"
        if sym == "/":
            self.code.append(OP["DIV"])
            return "f"
        if ka == "b" and kb == "b":
            raise NotCompilable(f"arithmetic {sym!r} on two booleans")
        flt = "f" in (ka, kb)
        ops = {"+": ("ADD", "IADD"), "-": ("SUB", "ISUB"), "*": ("MUL", "IMUL"), "//": ("FFLOORDIV", "IFLOORDIV"),
               "%": ("FMOD", "IMOD"), "**": ("FPOW", "IPOW")}
        if sym not in ops:
            raise NotCompilable(f"operator {sym!r}")
        if sym == "**" and flt:
            # numpy's float power is not libm's pow to the last bit (SIMD loops, scalar fast paths)
            raise NotCompilable("a power of floats")
        self.code.append(OP[ops[sym][0 if flt else 1]])
        return "f" if flt else "i"


def _conjuncts(e) -> list:
    """The top-level operands of ``a & b & ...`` (``e`` itself if it is no conjunction)."""
    node = e._node
    if node is not None and node[0] == "bin" and node[1] == "&":
        return _conjuncts(node[2]) + _conjuncts(node[3])
    return [e]


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _const_value(e):
    """The value of a constant expression (numbers only), or ``None``."""
    try:
        if _has_vars(e):
            return None
        with np.errstate(all="ignore"):
            v = e.evaluate({})
        _scalar_kind(v)
    except Exception:                                # noqa: BLE001 - then not a constant we take
        return None
    return v


#: added to a comparison's code in a guard conjunct comparing two variables (ctmc/_explore.c)
ATOM_VV = 64


def _is_var(e, col) -> bool:
    return e._node is not None and e._node[0] == "var" and e._node[1] in col


def _atom(e, col):
    """``(var, cmp, value, False)`` if ``e`` compares a state variable with a constant,
    ``(var, cmp + ATOM_VV, other var, True)`` if with another variable, else ``None``."""
    node = e._node
    if node is None or node[0] != "bin" or node[1] not in _CMP:
        return None
    sym, a, b = node[1:]
    if _is_var(a, col) and _is_var(b, col):
        return col[a._node[1]], OP[_CMP[sym]] + ATOM_VV, col[b._node[1]], True
    if _is_var(a, col):
        v = _const_value(b)
        return None if v is None else (col[a._node[1]], OP[_CMP[sym]], float(v), False)
    if _is_var(b, col):
        v = _const_value(a)
        return None if v is None else (col[b._node[1]], OP[_CMP[_FLIP[sym]]], float(v), False)
    return None


def _step(var, e):
    """``(mode, value)`` for an update ``var := var + k`` (1) or ``var := c`` (2), integers; else ``None``."""
    node = e._node
    if node is None:
        return None
    c = _const_value(e)
    if c is not None:
        return (2, int(c)) if _scalar_kind(c) == "i" else None
    if node[0] == "var" and node[1] == var.name:
        return 1, 0
    if node[0] == "bin" and node[1] in ("+", "-"):
        sym, a, b = node[1:]
        if a._node is not None and a._node[0] == "var" and a._node[1] == var.name:
            k = _const_value(b)
            if k is not None and _scalar_kind(k) == "i":
                return 1, int(k) if sym == "+" else -int(k)
        if sym == "+" and b._node is not None and b._node[0] == "var" and b._node[1] == var.name:
            k = _const_value(a)
            if k is not None and _scalar_kind(k) == "i":
                return 1, int(k)
    return None


def compile_model(model, layout):
    """The arguments of the engine for ``model``'s events, or :class:`NotCompilable`.

    Returns ``(code, consts, events)`` as numpy arrays (int32, float64, int32);
    the layout of ``events`` is described in ``ctmc/_explore.c``. Guards are
    split into their conjuncts, and those comparing a variable with a
    constant, constant rates and updates ``x := x + k`` or ``x := c`` are
    given to the engine as such (no program to run); every other part is a
    program.
    """
    names, lo, span, _strides, _box = layout
    if model._immediates:
        raise NotCompilable("immediate moves")
    if len(names) > _MAX_VARS:
        raise NotCompilable(f"more than {_MAX_VARS} variables")
    if lo.min() < -2 ** 31 or (lo + span - 1).max() >= 2 ** 31:
        raise NotCompilable("a variable's bounds beyond 32 bits")
    c = _Compiler(names)

    def const_at(v):
        c.const(float(v))
        at = c.code.pop()                        # const() emitted CONST, index: keep the index only
        c.code.pop()
        return at

    events = []
    for ev in model._events:
        # the guard must be boolean as a whole (numpy refuses another), then it is taken apart
        kg, _ = c.program(ev.guard)
        if kg != "b":
            raise NotCompilable(f"event {ev.name!r}: the guard is not boolean")
        atoms, progs = [], []
        for part in _conjuncts(ev.guard):
            at = _atom(part, c.col)
            if at is not None:
                atoms += [at[0], at[1], at[2] if at[3] else const_at(at[2])]
            else:
                progs.append(c.program(part)[1])
        rv = _const_value(ev.rate)
        if rv is not None and _scalar_kind(rv) != "b" and 0 < float(rv) < np.inf:
            rate = [const_at(rv), -1]
        else:
            rate = [-1, c.program(ev.rate)[1]]
        ups = []
        for var, expr in ev.update:
            if var.name not in c.col:
                raise NotCompilable(f"{var.name!r} is not a state variable")
            st = _step(var, expr)
            if st is not None and abs(st[1]) < _EXACT:
                ups += [c.col[var.name], st[0], const_at(st[1])]
            else:
                ups += [c.col[var.name], 0, c.program(expr)[1]]
        events += [len(atoms) // 3, *atoms, len(progs), *progs, *rate, len(ev.update), *ups]
    return (np.asarray(c.code, dtype=np.int32), np.asarray(c.consts or [0.0], dtype=np.float64),
            np.asarray(events, dtype=np.int32))


#: The box (points) up to which the engine indexes states in one array over it, else a hash table.
DENSE_POINTS = 1 << 24


def _model_args(model, layout):
    """The engine's first arguments for ``model``: programs, constants, events, bounds, strides."""
    if _engine is None:
        raise NotCompilable("the C extension ctmc._explore is not installed")
    code, consts, events = compile_model(model, layout)
    _, lo, span, strides, _ = layout
    as64 = (lambda a: np.ascontiguousarray(a, dtype=np.int64))
    return code, consts, events, as64(lo), as64(span), as64(strides)


def _dense(box, limit) -> bool:
    """Whether to index states by one int32 table over the box (else a hash table or a search)."""
    return box <= DENSE_POINTS and (limit is None or box * 4 <= 0.1 * limit)


def explore(model, layout, init, *, max_states=None, limit=None, progress=None, codes_only=False):
    """``(codes, Q, n_transitions)`` by the compiled engine, or ``None`` where numpy must build.

    With ``codes_only``, ``(codes,)``: the reachable states only (for
    :meth:`ctmc.Model.state_space`). ``None`` also when the engine stopped
    (see the module docstring); :class:`NotCompilable` when the model cannot
    be compiled.
    """
    import scipy.sparse as sp
    args = _model_args(model, layout)
    box = layout[4]
    status, n, ntrans, arrays = _engine.explore(
        *args, int(box), np.ascontiguousarray(init, dtype=np.int64), _dense(box, limit),
        -1 if max_states is None else int(max_states), -1 if limit is None else int(limit), progress,
        bool(codes_only))
    if status != 0:
        return None
    if codes_only:
        return (np.frombuffer(arrays[0], dtype=np.int64),)
    codes, indptr, indices, data = (np.frombuffer(a, dtype=t) for a, t in
                                    zip(arrays, (np.int64, np.int32, np.int32, np.float64)))
    Q = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    Q.has_sorted_indices = True
    return codes, Q, ntrans


def rows(model, layout, codes, start, stop, limit=None):
    """Rows ``start:stop`` of the generator over the sorted state ``codes``, or ``None``: numpy decides.

    The rows of :meth:`ctmc.Model.generator_rows`, bit for bit; ``None``
    where the engine stops (as :func:`explore`, and when a transition leaves
    ``codes``). :class:`NotCompilable` when the model cannot be compiled.
    """
    import scipy.sparse as sp
    args = _model_args(model, layout)
    box, n = layout[4], codes.size
    # a table over the box pays for itself when the states fill a good part of it
    dense = _dense(box, limit) and box <= 8 * max(n, 1)
    status, arrays = _engine.rows(*args, int(box), np.ascontiguousarray(codes, dtype=np.int64), int(start),
                                  int(stop), dense)
    if status != 0:
        return None
    indptr, indices, data = (np.frombuffer(a, dtype=t) for a, t in zip(arrays, (np.int32, np.int32, np.float64)))
    R = sp.csr_matrix((data, indices, indptr), shape=(stop - start, n))
    R.has_sorted_indices = True
    return R
