r"""The compiled builder: a model's expressions as bytecode, explored in C.

:meth:`ctmc.Model.build` spends its time, on models of many variables and a
deep search (the PRISM benchmarks kanban, fms, cluster), in numpy's per-call
overhead: every event is a dozen array operations per breadth-first level,
whatever the level's size. This module compiles the guards, rates and
updates of a model to a small stack bytecode over doubles and hands them to
the C extension ``ctmc._explore``, which explores the reachable states one
by one and assembles the generator in the numbering of the vectorised builder
(states sorted by code, rows with sorted columns, duplicates summed in the
order of the events, the diagonal minus the row sum as ``np.add.reduceat``
sums it). :meth:`ctmc.Model.state_space` and
:meth:`ctmc.Model.generator_rows` (the distributed assembly) use it too.

Semantics are numpy's (1.x), checked at compile time where they can be and at
run time where they cannot. At compile time: types (boolean, integer, float)
promoted as numpy promotes its int64 and float64 arrays with Python scalars
and int64/float64/bool constants (other widths, such as ``np.int8`` or
``np.float32``, are not compiled: numpy would compute in that width);
integer results are never ``-0.0``; a power needs a constant exponent that
is a non-negative integer (numpy raises for a negative one, and its float
power is not libm's ``pow`` to the last bit). At run time: integer
arithmetic reaching :math:`\pm 2^{53}` (where doubles stop being exact), an
integer division or remainder by zero. There the engine stops and the
vectorised builder, whose integers are exact or refused (:mod:`ctmc.expr`),
gives the exact value or the error. Updates are evaluated wherever the guard
holds, also where the rate is 0, as the vectorised builder evaluates them (so
a fault there is an error for both). The engine answers only on the happy
path. An expression it cannot compile (a user function, the cases above,
arithmetic on two booleans, ...) means the vectorised builder builds the
model; anything the vectorised builder reports or treats specially at run
time (an invalid rate, an update out of bounds or not an integer, the cases
above, ``max_states``) stops the engine and the vectorised builder builds it
again, with its own rules and messages. On a chain the cost model would
explore as a box, heavy expressions (more than :data:`HEAVY_OPS` opcodes an
event) are left to numpy's box strategy, faster there.

One documented difference remains: ``max_memory`` is applied by each
builder to its own use (the compiled one counts what it holds, 27-65 bytes a
transition on the benchmark gallery, most of it per state on models of many
variables; the vectorised one estimates 56 bytes a transition and 64 a
state), so a build may pass one and not the other.
Duplicates (events of one state leading to the same state) are summed by
both in the order of the events, also in rows longer than scipy's stable
sort threshold (:func:`ctmc.assembly.assemble`).
"""
from __future__ import annotations

import numpy as np

from .expr import where

__all__ = ["available", "compile_model", "explore", "rows", "NotCompilable"]

try:
    import ctmc._explore as _engine      # the extension module (not the package: no import circle)
except ImportError:         # the extension was not built (no compiler at install): numpy builds everything
    _engine = None

# the engine's opcodes and limits, read from the engine itself (one definition, in ctmc/_explore.c)
OP = {name: k for k, name in enumerate(_engine.OPS)} if _engine else {}
_STACK = _engine.STACK if _engine else 0
_MAX_VARS = _engine.MAX_VARS if _engine else 0
_MAX_EVENTS = _engine.MAX_EVENTS if _engine else 0
ATOM_VV = _engine.ATOM_VV if _engine else 0
_EXACT = 2.0 ** 53
_CMP = {"<": "LT", "<=": "LE", ">": "GT", ">=": "GE", "==": "EQ", "!=": "NE"}
_RANK = {"b": 0, "i": 1, "f": 2}
_SCALARS = (bool, int, float, np.bool_, np.int64, np.float64)


class NotCompilable(Exception):
    """The model (or one expression) is outside what the compiled builder handles."""


def available() -> bool:
    """Whether the C extension ``ctmc._explore`` is installed."""
    return _engine is not None


def _scalar_kind(v):
    """``"b" | "i" | "f"`` of a constant, as numpy treats it next to int64/float64 arrays."""
    if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype in (np.bool_, np.int64, np.float64):
        v = v[()]                                    # a 0-d array (np.where of constants): its scalar
    if type(v) not in _SCALARS:
        raise NotCompilable(f"a constant of type {type(v).__name__} (numpy computes in its width)")
    if isinstance(v, (bool, np.bool_)):
        return "b"
    if isinstance(v, (int, np.int64)):
        if abs(int(v)) >= _EXACT:
            raise NotCompilable(f"the integer {v!r} is beyond 2**53")
        return "i"
    return "f"


def _children(e) -> list:
    node = e._node
    if node is None:
        raise NotCompilable(f"{e!r} calls a user function")
    return [] if node[0] in ("var", "const") else [x for x in node[1:] if hasattr(x, "_node")]


def _has_vars(e) -> bool:
    """Whether ``e`` reads a state variable (without recursion: expressions may be thousands deep)."""
    stack, seen = [e], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if x._node is not None and x._node[0] == "var":
            return True
        stack += _children(x)
    return False


def _fold(e):
    """``(kind, value)`` of an expression without variables, by its own evaluation (numpy's or
    Python's scalar rules, numpy's warnings off as in the vectorised builder: the very value it
    computes)."""
    try:
        with np.errstate(all="ignore"):
            v = e.evaluate({})
    except Exception as exc:                         # noqa: BLE001 - numpy decides at run time
        raise NotCompilable(f"{e!r}: {exc}") from None
    return _scalar_kind(v), v


class _Compiler:
    """Emits programs into one code array; constants into one table."""

    def __init__(self, names):
        self.col = {nm: k for k, nm in enumerate(names)}
        self.code: list = []
        self.consts: list = []
        self._const_at: dict = {}
        self.last_ops = 0                            # opcodes of the last program
        self.last_kind = None                        # and its kind

    def const_index(self, value) -> int:
        key = (float(value), bool(np.signbit(float(value))))
        at = self._const_at.get(key)
        if at is None:
            at = self._const_at[key] = len(self.consts)
            self.consts.append(float(value))
        return at

    def program(self, e) -> tuple:
        """``(kind, start)``: ``e`` emitted as a program ended by END."""
        start = len(self.code)
        try:
            kind = self.emit(e)[0]
        except RecursionError:
            raise NotCompilable("an expression nested too deeply") from None
        self.code.append(OP["END"])
        depth = top = self.last_ops = 0
        pc = start
        while self.code[pc] != OP["END"]:
            op = self.code[pc]
            self.last_ops += 1
            if op in (OP["VAR"], OP["CONST"]):
                top += 1
                pc += 2
                depth = max(depth, top)
                continue
            if op == OP["TABLE"]:                    # the index replaced by its entry
                pc += 3
                continue
            if op in (OP["JUMPZ"], OP["JUMP"]):       # pops the condition; the else branch replaces the then
                top -= 1
                pc += 2
                continue
            top -= {OP["NEG"]: 0, OP["INEG"]: 0, OP["ABS"]: 0, OP["NOT"]: 0}.get(op, 1)
            pc += 1
        if depth > _STACK:
            raise NotCompilable(f"{e!r} is nested too deeply")
        return kind, start

    def emit(self, e) -> tuple:
        """``(kind, reads variables)``; a part without variables is folded to its constant."""
        node = e._node
        if node is None:
            raise NotCompilable(f"{e!r} calls a user function")
        op = node[0]
        start = len(self.code)
        if op == "var":
            if node[1] not in self.col:
                raise NotCompilable(f"{node[1]!r} is not a state variable")
            self.code += [OP["VAR"], self.col[node[1]]]
            return "i", True
        if op == "const":
            kind, v = _fold(e)
            self.code += [OP["CONST"], self.const_index(v)]
            return kind, False
        if op == "where" or (op == "bin" and node[1] in ("&", "|")):   # lazy: see emit_lazy
            return self.emit_lazy(e, start)
        if op == "bin" and node[1] == "mod":         # a divisor <= 0 as 0: the engine stops there
            return self.emit(node[2] % where(node[3] > 0, node[3], 0))
        parts = [self.emit(x) for x in _children(e)]
        if not any(reads for _, reads in parts):
            del self.code[start:]
            kind, v = _fold(e)
            self.code += [OP["CONST"], self.const_index(v)]
            return kind, False
        kinds = [k for k, _ in parts]
        if op in ("neg", "abs"):
            k = kinds[0]
            if k == "b":
                if op == "neg":
                    raise NotCompilable("negation of a boolean")
                return "b", True                     # numpy's abs of a boolean is itself
            self.code.append(OP["INEG" if (op, k) == ("neg", "i") else op.upper()])
            return k, True
        if op == "not":
            self.code.append(OP["NOT"])
            return "b", True
        if op == "table":                            # the entries, in a row of the constants
            if kinds[0] != "i":
                raise NotCompilable(f"{e!r}: the table index is not an integer")
            values = node[2]
            self.code += [OP["TABLE"], len(self.consts), values.size]
            self.consts += [float(v) for v in values]
            return "f", True
        if op in ("min", "max"):
            self.code.append(OP[op.upper()])
            return max(kinds[-2:], key=_RANK.get), True
        if op != "bin":
            raise NotCompilable(f"unknown node {op!r}")
        sym, (ka, kb) = node[1], kinds
        if sym in _CMP:
            self.code.append(OP[_CMP[sym]])
            return "b", True
        if sym == "/":
            self.code.append(OP["DIV"])
            return "f", True
        if ka == "b" and kb == "b":
            raise NotCompilable(f"arithmetic {sym!r} on two booleans")
        flt = "f" in (ka, kb)
        if sym == "**":
            # numpy raises for a negative integer power, and its float power is not libm's pow
            # to the last bit: only a constant, non-negative integer exponent of an integer
            if flt or parts[1][1] or _fold(node[3])[1] < 0:
                raise NotCompilable("a power other than integer ** constant non-negative integer")
            self.code.append(OP["IPOW"])
            return "i", True
        ops = {"+": ("ADD", "IADD"), "-": ("SUB", "ISUB"), "*": ("MUL", "IMUL"), "//": ("FFLOORDIV", "IFLOORDIV"),
               "%": ("FMOD", "IMOD")}
        if sym not in ops:
            raise NotCompilable(f"operator {sym!r}")
        self.code.append(OP[ops[sym][0 if flt else 1]])
        return ("f" if flt else "i"), True


    def emit_lazy(self, e, start) -> tuple:
        """``where(c, x, y)`` as ``c JUMPZ(->y) x JUMP(->end) y`` (offsets from the next opcode), and
        ``a & b`` as ``where(a, b != 0, False)``, ``a | b`` as ``where(a, True, b != 0)``: the operand
        not used is not evaluated (ctmc.expr ignores its faults too, and numpy builds such a chain)."""
        node = e._node
        kids = _children(e)

        def truth(x):                                # x != 0 as 1.0 / 0.0
            reads = self.emit(x)[1]
            self.code += [OP["NOT"], OP["NOT"]]
            return "b", reads

        def const(v):
            self.code += [OP["CONST"], self.const_index(v)]
            return "b", False

        if node[0] == "where":
            cond, then, other = kids[0], (lambda: self.emit(kids[1])), (lambda: self.emit(kids[2]))
        elif node[1] == "&":
            cond, then, other = kids[0], (lambda: truth(kids[1])), (lambda: const(0.0))
        else:
            cond, then, other = kids[0], (lambda: const(1.0)), (lambda: truth(kids[1]))
        reads = self.emit(cond)[1]
        jz = len(self.code)
        self.code += [OP["JUMPZ"], 0]
        kx, rx = then()
        jmp = len(self.code)
        self.code += [OP["JUMP"], 0]
        ky, ry = other()
        self.code[jz + 1] = jmp + 2 - (jz + 2)
        self.code[jmp + 1] = len(self.code) - (jmp + 2)
        if not (reads or rx or ry):
            del self.code[start:]
            kind, v = _fold(e)
            self.code += [OP["CONST"], self.const_index(v)]
            return kind, False
        return ("b" if node[0] == "bin" else max((kx, ky), key=_RANK.get)), True


def _conjuncts(e) -> list:
    """The top-level operands of ``a & b & ...``, left to right (``[e]`` if it is no conjunction)."""
    out, stack = [], [e]
    while stack:
        x = stack.pop()
        node = x._node
        if node is not None and node[0] == "bin" and node[1] == "&":
            stack += [node[3], node[2]]
        else:
            out.append(x)
    return out


_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def _const_value(e):
    """The value of a constant expression (numbers only), or ``None``."""
    try:
        return None if _has_vars(e) else _fold(e)[1]
    except NotCompilable:
        return None


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
    own = {var.name: 0}                              # _is_var's column table, for this variable only
    if _is_var(e, own):
        return 1, 0
    if node[0] == "bin" and node[1] in ("+", "-"):
        sym, a, b = node[1:]
        if _is_var(a, own):                          # var + k, var - k
            k, sign = _const_value(b), 1 if sym == "+" else -1
        elif sym == "+" and _is_var(b, own):         # k + var
            k, sign = _const_value(a), 1
        else:
            return None
        if k is not None and _scalar_kind(k) == "i":
            return 1, sign * int(k)
    return None


def compile_model(model, layout, programs=()):
    """The arguments of the engine for ``model``'s events, or :class:`NotCompilable`.

    Returns ``(code, consts, events, ops)``: three numpy arrays (int32,
    float64, int32) and the mean number of opcodes an event's programs hold;
    with ``programs`` (expressions of the variables: the simulator's measures,
    :mod:`ctmc.simulate`), ``(code, consts, events, ops, starts)``: they are
    compiled into the same arrays, ``starts`` where each begins in ``code``;
    the layout of ``events`` is described in ``ctmc/_explore.c``. Guards are
    split into their conjuncts, and those comparing a variable with a
    constant, constant rates and updates ``x := x + k`` or ``x := c`` are
    given to the engine as such (no program to run); every other part is a
    program.
    """
    names, lo, span = layout.names, layout.lo, layout.span
    if model.immediates:
        raise NotCompilable("immediate moves")
    if len(names) > _MAX_VARS:
        raise NotCompilable(f"more than {_MAX_VARS} variables")
    if len(model.events) > _MAX_EVENTS:
        raise NotCompilable(f"more than {_MAX_EVENTS} events")
    if lo.min() < -2 ** 31 or (lo + span - 1).max() >= 2 ** 31:
        raise NotCompilable("a variable's bounds beyond 32 bits")
    c = _Compiler(names)
    const_at = c.const_index
    events, ops = [], 0

    def program(e):
        nonlocal ops
        c.last_kind, start = c.program(e)
        ops += c.last_ops
        return start

    for ev in model.events:
        # the guard taken apart; it must be boolean (numpy refuses another guard): a conjunction
        # and a comparison are, a single other part must be
        parts = _conjuncts(ev.guard)
        atoms, progs = [], []
        for part in parts:
            at = _atom(part, c.col)
            if at is not None:
                atoms += [at[0], at[1], at[2] if at[3] else const_at(at[2])]
            else:
                progs.append(program(part))
                if len(parts) == 1 and c.last_kind != "b":
                    raise NotCompilable(f"event {ev.name!r}: the guard is not boolean")
        rv = _const_value(ev.rate)
        if rv is not None and _scalar_kind(rv) != "b" and 0 < float(rv) < np.inf:
            rate = [const_at(rv), -1]
        else:
            rate = [-1, program(ev.rate)]
        ups = []
        for var, expr in ev.update:
            if var.name not in c.col:
                raise NotCompilable(f"{var.name!r} is not a state variable")
            st = _step(var, expr)
            if st is not None and abs(st[1]) < _EXACT:
                ups += [c.col[var.name], st[0], const_at(st[1])]
            else:
                ups += [c.col[var.name], 0, program(expr)]
        events += [len(atoms) // 3, *atoms, len(progs), *progs, *rate, len(ev.update), *ups]
    starts = [c.program(e)[1] for e in programs]
    out = (np.asarray(c.code, dtype=np.int32), np.asarray(c.consts or [0.0], dtype=np.float64),
           np.asarray(events, dtype=np.int32), ops / max(len(model.events), 1))
    return out + (np.asarray(starts, dtype=np.int32),) if programs else out



#: The box (points) up to which the engine may index states by one array over it (once they fill
#: 1/64 of it; a hash table before) and make the rows in a second pass in code order; the table
#: takes at most a tenth of the memory limit too (:func:`_dense`). 2^28 (a table of 1 GiB at most):
#: on polling N=17 (box 4.5 M, 3.3 M states) the table built in 4.2 s at 0.52 GiB where the hash
#: table and the kept transitions took 9-11 s and 1.03 GiB; polling N=20 (box 42 M) was past 2^24,
#: and its hashed build (kept transitions, their doubling room) did not fit 16 GiB. Beyond the table
#: the transitions are kept (expanding every state again instead cost 15-45 % more CPU on kanban
#: and fms), and the hash index is freed before the generator is made from them.
DENSE_POINTS = 1 << 28

#: Opcodes per event above which a box-shaped chain (numpy's box strategy chosen by the cost model)
#: is left to numpy: its box evaluates each operation once per point in one array call, the engine
#: interprets it per state, twice with the second pass (measured: break-even at 15-30 opcodes).
HEAVY_OPS = 16


def _model_args(model, layout, box_alternative=False):
    """The engine's first arguments for ``model``: programs, constants, events, bounds, strides."""
    if _engine is None:
        raise NotCompilable("the C extension ctmc._explore is not installed")
    code, consts, events, ops = compile_model(model, layout)
    if box_alternative and ops > HEAVY_OPS:
        raise NotCompilable(f"{ops:.0f} opcodes an event on a box-shaped chain: numpy's box is faster")
    as64 = (lambda a: np.ascontiguousarray(a, dtype=np.int64))
    return code, consts, events, as64(layout.lo), as64(layout.span), as64(layout.strides)


def _dense(box, limit) -> bool:
    """Whether to index states by one int32 table over the box (else a hash table or a search)."""
    return box <= DENSE_POINTS and (limit is None or box * 4 <= 0.1 * limit)


def explore(model, layout, init, *, max_states=None, limit=None, progress=None, codes_only=False,
            box_alternative=False):
    """``(codes, Q, n_transitions)`` by the compiled engine, or ``None`` where numpy must build.

    With ``codes_only``, ``(codes,)``: the reachable states only (for
    :meth:`ctmc.Model.state_space`). ``None`` also when the engine stopped
    (see the module docstring); :class:`NotCompilable` when the model cannot
    be compiled, or (``box_alternative``: numpy's box strategy is the other
    choice) when its programs are heavy (:data:`HEAVY_OPS`).
    :class:`~ctmc.results.StateSpaceTooLarge` when the engine's own memory
    outgrows ``limit`` (the rule of the vectorised builder, applied to this
    engine's use).
    """
    import scipy.sparse as sp
    from ._util import check_memory
    args = _model_args(model, layout, box_alternative)
    box = layout.box
    status, n, ntrans, used, arrays = _engine.explore(
        *args, int(box), np.ascontiguousarray(init, dtype=np.int64), _dense(box, limit),
        -1 if max_states is None else int(max_states), -1 if limit is None else int(limit), progress,
        bool(codes_only))
    if status == _engine.ST_MEMORY and limit is not None:
        check_memory(used, limit, f"{'exploring' if codes_only else 'building'} {model.name!r} ({n} states so far)")
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
    box, n = layout.box, codes.size
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
