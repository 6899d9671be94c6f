r"""From a parsed PRISM program to a :class:`ctmc.Model` (PRISM's CTMC semantics).

**Values.** Every expression has a PRISM type, ``int``, ``double`` or
``bool``; constants are evaluated at load time (and folded into the
expressions that use them), the rest becomes a :mod:`ctmc.expr` expression.
``/`` is real division, as in PRISM; ``floor`` and ``ceil`` give ints;
``mod`` takes ints and gives a value in ``0..n-1`` (a constant divisor
``n <= 0`` is refused, as PRISM does; a divisor that varies raises in a state
where it is ``<= 0``, naming the expression and the state: :func:`ctmc.expr.mod`);
``min``/``max`` take two or more arguments; ``log(x, b)`` is the logarithm
to base ``b``. A bool variable is an integer variable in ``0..1`` (false = 0).
Formulas are expanded where they are used (after a renamed module's renaming
applies to them, as in PRISM).

**Transitions.** An unlabelled command ``[] g -> r_1 : u_1 + ... + r_k : u_k``
is one event per branch (guard ``g``, rate ``r_j``, update ``u_j``). An action
``a`` is shared by every module that has a command labelled ``a`` (its
alphabet); each combination of one ``a``-command per such module, and of one
branch per command, is one event whose guard is the conjunction of the
commands' guards, whose rate is the product of the branches' rates and whose
update is the union of their updates, so with :math:`C_m` the ``a``-commands
of module :math:`m`:

.. math::

    Q_{xy} \mathrel{+}= \sum_{(c_m) \in \prod_m C_m} \prod_m g_{c_m}(x)\, r_{c_m}(x)
    \quad\text{where } y = \bigcup_m u_{c_m}(x).

Transitions reaching the same state add up (as ctmc's assembly does).

**Rewards.** A state item ``g : v`` adds ``v`` where ``g`` holds; an action
item ``[a] g : v`` adds, in each state, ``v`` times the rate of every
``a``-transition enabled there where ``g`` holds (``[]`` for the unlabelled
commands): the rate at which the action accrues reward, so a stationary
mean or an accumulated reward of the chain's reward is PRISM's ``R=? [S]`` /
``R=? [C<=t]`` / ``R=? [F phi]`` of the structure. PRISM's instantaneous
reward ``R=? [I=t]`` counts the state items only: for a structure with action
items, their sum (0 where there are none) is kept apart in
``PrismModel.state_rewards``. Unnamed structures are named by their position,
``"1"``, ``"2"``, ...
"""
from __future__ import annotations

import itertools
import math
from numbers import Integral, Real
from pathlib import Path

import numpy as np

from ..expr import Expr, Var, as_expr, maximum, minimum, mod, where
from ..results import ModelError
from .model import PrismModel
from .syntax import Pos, PrismError, Program

__all__ = ["translate", "Scope", "as_bool", "is_const"]

_INIT_BOX_LIMIT = 10 ** 7     # points of the box an init ... endinit block is evaluated on


def _a(t: str) -> str:
    """``"a bool"``, ``"an int"``."""
    return f"an {t}" if t == "int" else f"a {t}"


def is_const(v) -> bool:
    return not isinstance(v, Expr)


def as_bool(v):
    """A boolean expression of a bool value (a bare bool variable is an integer in 0..1)."""
    return (v == 1) if isinstance(v, Var) else v


def _land(a, b):
    if is_const(a):
        return b if a else False
    if is_const(b):
        return a if b else False
    return a & b


def _lor(a, b):
    if is_const(a):
        return True if a else b
    if is_const(b):
        return True if b else a
    return a | b


def _mul(a, b):
    if is_const(a) and a == 1:
        return b
    if is_const(b) and b == 1:
        return a
    return a * b


class Scope:
    """The names of a program (constants, formulas, variables) and the translation of its expressions.

    :meth:`value` gives ``(value, type)`` of an expression node: a Python
    number or bool when it is constant, else a :class:`ctmc.expr.Expr`. Kept
    on the model (``PrismModel.scope``) so properties can use the program's
    names; ``labels`` holds a chain's labels while a property is evaluated.
    """

    def __init__(self, prog: Program, constants):
        self.prog = prog
        self.given = dict(constants or {})
        self.consts: dict = {}         # name -> (value, type)
        self.vars: dict = {}           # name -> (Var, type, owner module or None)
        self.busy: set = set()         # constants and formulas being evaluated (cycle detection)
        self.formula_cache: dict = {}
        self.labels: dict = {}         # name -> boolean mask over a chain's states (properties only)
        unknown = sorted(set(self.given) - set(prog.constants))
        if unknown:
            raise PrismError(f"constants={{...}} names {unknown}, which the program does not declare "
                             f"(its constants: {sorted(prog.constants) or 'none'})", prog.file)

    def err(self, message: str, pos: Pos) -> PrismError:
        return self.prog.error(message, pos)

    # constants ---------------------------------------------------------------
    def constant(self, name: str):
        if name in self.consts:
            return self.consts[name]
        ctype, node, pos = self.prog.constants[name]
        if node is None:
            if name not in self.given:
                raise self.err(f"constant {name!r} is not defined: give its value, e.g. "
                               f"constants={{{name!r}: ...}}", pos)
            value = self.coerce(name, ctype, self.given[name], pos)
        else:
            if name in self.given:
                raise self.err(f"constant {name!r} is defined in the program; it cannot be given "
                               "in constants=", pos)
            if name in self.busy:
                raise self.err(f"constant {name!r} is defined in terms of itself", pos)
            self.busy.add(name)
            value, vtype = self.value(node, {}, constant=True)
            self.busy.discard(name)
            value = self.coerce(name, ctype, value, pos, vtype)
        self.consts[name] = (value, ctype)
        return value, ctype

    def coerce(self, name, ctype, value, pos, vtype=None):
        """``value`` as a constant of type ``ctype``, or an error naming the constant."""
        if isinstance(value, str):
            text = value.strip()
            try:
                value = {"true": True, "false": False}[text] if ctype == "bool" else \
                    int(text) if ctype == "int" else float(text)
            except (KeyError, ValueError):
                raise self.err(f"constant {name!r}: {value!r} is not a {ctype}", pos) from None
        is_bool = isinstance(value, (bool, np.bool_))
        if ctype == "bool" and is_bool:
            return bool(value)
        if ctype == "int" and not is_bool and isinstance(value, Integral) and vtype in (None, "int"):
            return int(value)
        if ctype == "double" and not is_bool and isinstance(value, Real) and vtype in (None, "int", "double"):
            return float(value)
        raise self.err(f"constant {name!r} is declared {ctype}, got {value!r}", pos)

    # expressions ---------------------------------------------------------------
    def value(self, node, ren, constant=False):
        """``(value, type)`` of expression ``node``: a Python number/bool for a constant, else an Expr."""
        kind, args, pos = node.kind, node.args, node.pos
        if kind in ("int", "double", "bool"):
            return args[0], kind
        if kind == "ident":
            return self.ident(ren.get(args[0], args[0]), ren, pos, constant)
        if kind == "label":
            if args[0] not in self.labels:
                where_ = "the chain" if self.labels else "the model (labels belong in properties)"
                raise self.err(f"label {args[0]!r} is not a label of {where_}; labels: {sorted(self.labels)}",
                               pos)
            mask = self.labels[args[0]]

            def label(env):
                return mask
            return as_expr(label), "bool"
        if kind == "call":
            return self.call(args[0], [self.value(a, ren, constant) for a in args[1:]], pos)
        if kind == "?":
            c = self.typed(args[0], ren, constant, "bool", "the condition of ?:")
            a, ta = self.value(args[1], ren, constant)
            b, tb = self.value(args[2], ren, constant)
            t = self.join(ta, tb, pos, "the branches of ?:")
            if is_const(c):
                return (a if c else b), t
            if t == "bool":
                a, b = as_bool(a), as_bool(b)
            return where(as_bool(c), a, b), t
        if kind == "neg":
            a, t = self.value(args[0], ren, constant)
            self.numeric(t, pos, "unary -")
            return -a, t
        if kind == "!":
            a = self.typed(args[0], ren, constant, "bool", "!")
            return (not a) if is_const(a) else ~a, "bool"
        a, ta = self.value(args[0], ren, constant)
        b, tb = self.value(args[1], ren, constant)
        return self.binary(kind, a, ta, b, tb, pos)

    def typed(self, node, ren, constant, want, what):
        v, t = self.value(node, ren, constant)
        if t != want and not (want == "double" and t == "int"):
            raise self.err(f"{what}: expected {_a(want)} expression, got {_a(t)}", node.pos)
        return v

    def numeric(self, t, pos, what):
        if t == "bool":
            raise self.err(f"{what}: expected a number, got a bool", pos)

    def join(self, ta, tb, pos, what):
        if ta == tb:
            return ta
        if "bool" in (ta, tb):
            raise self.err(f"{what}: {_a(ta)} and {_a(tb)} do not mix", pos)
        return "double"

    def ident(self, name, ren, pos, constant):
        if name in self.vars:
            if constant:
                raise self.err(f"variable {name!r} in an expression that must be constant", pos)
            var, vtype, _ = self.vars[name]
            return var, vtype
        if name in self.prog.constants:
            return self.constant(name)
        if name in self.prog.formulas:
            key = (name, tuple(sorted(ren.items())), constant)
            if key not in self.formula_cache:
                if name in self.busy:
                    raise self.err(f"formula {name!r} is defined in terms of itself", pos)
                self.busy.add(name)
                self.formula_cache[key] = self.value(self.prog.formulas[name], ren, constant)
                self.busy.discard(name)
            return self.formula_cache[key]
        raise self.err(f"unknown identifier {name!r} (not a variable, constant or formula)", pos)

    def binary(self, op, a, ta, b, tb, pos):
        both = is_const(a) and is_const(b)
        if op in ("&", "|", "=>", "<=>"):
            for t in (ta, tb):
                if t != "bool":
                    raise self.err(f"{op}: expected bool operands, got {_a(t)}", pos)
            if op == "&":
                return _land(a, b), "bool"
            if op == "|":
                return _lor(a, b), "bool"
            if op == "=>":
                return _lor((not a) if is_const(a) else ~a, b), "bool"
            return (a == b if both else as_bool(a) == as_bool(b)), "bool"
        if op in ("=", "!="):
            if (ta == "bool") != (tb == "bool"):
                raise self.err(f"{op}: {_a(ta)} and {_a(tb)} cannot be compared", pos)
            return ((a == b) if op == "=" else (a != b)), "bool"
        self.numeric(ta, pos, op)
        self.numeric(tb, pos, op)
        if op in ("<", "<=", ">", ">="):
            f = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
                 ">=": lambda x, y: x >= y}[op]
            return f(a, b), "bool"
        if op == "/":
            if both and b == 0:
                raise self.err("division by zero in a constant expression", pos)
            return a / b, "double"
        t = "int" if ta == tb == "int" else "double"
        if op == "+":
            return a + b, t
        if op == "-":
            return a - b, t
        return _mul(a, b), t

    def call(self, fname, vals, pos):
        types = [t for _, t in vals]
        for t in types:
            self.numeric(t, pos, fname)
        xs = [v for v, _ in vals]
        allint = all(t == "int" for t in types)
        if fname in ("min", "max"):
            out = xs[0]
            for x in xs[1:]:
                if is_const(out) and is_const(x):
                    out = min(out, x) if fname == "min" else max(out, x)
                else:
                    out = minimum(out, x) if fname == "min" else maximum(out, x)
            return out, ("int" if allint else "double")
        if fname in ("floor", "ceil"):
            x = xs[0]
            if types[0] == "int":
                return x, "int"
            if is_const(x):
                return (math.floor(x) if fname == "floor" else math.ceil(x)), "int"
            return (x // 1 if fname == "floor" else -((-x) // 1)), "int"
        if fname == "mod":
            if not allint:
                raise self.err("mod: expected int arguments", pos)
            if is_const(xs[1]) and xs[1] <= 0:      # PRISM refuses a divisor <= 0 too
                raise self.err(f"mod: the divisor must be a positive int, got {xs[1]}", pos)
            return (xs[0] % xs[1] if is_const(xs[0]) and is_const(xs[1]) else mod(xs[0], xs[1])), "int"
        if fname == "pow":
            if allint and is_const(xs[1]) and xs[1] < 0:
                raise self.err("pow: a negative int exponent of an int (write a double base)", pos)
            return xs[0] ** xs[1], ("int" if allint else "double")
        # log(x, b)
        if is_const(xs[0]) and is_const(xs[1]):
            if xs[0] <= 0 or xs[1] <= 0 or xs[1] == 1:
                raise self.err(f"log({xs[0]}, {xs[1]}) is undefined", pos)
            return math.log(xs[0], xs[1]), "double"
        ex, eb = as_expr(xs[0]), as_expr(xs[1])

        def log(env):
            with np.errstate(all="ignore"):
                return np.log(ex.evaluate(env)) / np.log(eb.evaluate(env))
        return as_expr(log), "double"

    # variables -----------------------------------------------------------------
    def bound(self, node, ren, what):
        return self.typed(node, ren, True, "int", what)

    def declare(self, model, decl, ren, owner):
        name = ren.get(decl.name, decl.name)
        if name in self.vars or name in self.prog.constants or name in self.prog.formulas:
            raise self.err(f"{name!r} is declared twice", decl.pos)
        if decl.is_bool:
            lo, hi, vtype = 0, 1, "bool"
        else:
            lo = self.bound(decl.lo, ren, f"the lower bound of {name!r}")
            hi = self.bound(decl.hi, ren, f"the upper bound of {name!r}")
            vtype = "int"
            if lo > hi:
                raise self.err(f"variable {name!r}: empty range [{lo}..{hi}]", decl.pos)
        init = lo
        if decl.init is not None:
            if self.prog.init is not None:
                raise self.err(f"variable {name!r} has an init value and the program an init ... endinit "
                               "block: give one or the other", decl.init.pos)
            init = self.typed(decl.init, ren, True, vtype, f"the init value of {name!r}")
            if not lo <= init <= hi:
                raise self.err(f"variable {name!r}: init value {init} is outside its range [{lo}..{hi}]",
                               decl.init.pos)
        var = model.var(name, lo, hi)
        self.vars[name] = (var, vtype, owner)
        return name, int(init)


def _instances(prog: Program):
    """``(name, module holding the text, renaming, pos)`` for each module, renamed ones resolved."""
    plain = {m.name: m for m in prog.modules if not m.source}
    seen, out = set(), []
    for m in prog.modules:
        if m.name in seen:
            raise prog.error(f"module {m.name!r} is declared twice", m.pos)
        seen.add(m.name)
        if not m.source:
            out.append((m.name, m, {}, m.pos))
            continue
        base = plain.get(m.source)
        if base is None:
            raise prog.error(f"module {m.name!r} renames {m.source!r}, which is not a module declared "
                             "in full", m.pos)
        ren = dict(m.renames)
        missing = [v.name for v in base.variables if v.name not in ren]
        if missing:
            raise prog.error(f"module {m.name!r} = {m.source!r}: every variable of {m.source!r} must be "
                             f"renamed; {missing} are not", m.pos)
        out.append((m.name, base, ren, m.pos))
    if prog.system is not None:
        names, pos = prog.system
        if sorted(names) != sorted(seen):
            raise prog.error(f"system ... endsystem: only the default composition of every module once "
                             f"(M1 || M2 || ...) is supported; it names {list(names)}, the modules are "
                             f"{sorted(seen)}", pos)
    return out


def translate(prog: Program, constants=None) -> PrismModel:
    """The :class:`~ctmc.prism.model.PrismModel` of a parsed program (see the module docstring)."""
    tr = Scope(prog, constants)
    for name in prog.constants:
        tr.constant(name)
    instances = _instances(prog)
    model = PrismModel(Path(prog.file).stem if prog.file != "<string>" else "prism", prog.file)
    initial = {}
    for decl in prog.globals:
        name, init = tr.declare(model, decl, {}, None)
        initial[name] = init
    for mname, mod, ren, _ in instances:
        for decl in mod.variables:
            name, init = tr.declare(model, decl, ren, mname)
            initial[name] = init
    events = _events(tr, instances)
    for name, _, guard, rate, update in events:
        model.event(name, guard=guard, rate=rate, update=update)
    for name, node in prog.labels.items():
        model.label(name, _state_expr(as_bool(tr.typed(node, {}, False, "bool", f"label {name!r}"))))
    for k, (name, items, _) in enumerate(prog.rewards, start=1):
        rname = name if name is not None else str(k)
        model.reward(rname, _state_expr(_reward(tr, items, events)))
        if any(item.action is not None for item in items):     # no events: the state items alone
            model.state_rewards[rname] = _state_expr(_reward(tr, items, ()))
    model.initial = _init_block(tr, model) if prog.init is not None else initial
    model.constants = {k: v for k, (v, _) in tr.consts.items()}
    model.bool_variables = tuple(k for k, (_, t, _) in tr.vars.items() if t == "bool")
    model.scope = tr
    return model


def _state_expr(v):
    """An expression of the state for a label or reward (a constant as an array)."""
    if is_const(v):
        c = v

        def constant(env):
            return np.full(len(next(iter(env.values()))), c)
        return as_expr(constant)
    return v


def _update_value(value, vtype):
    """A new value as the integer ctmc stores (a bool as 0 or 1)."""
    if vtype != "bool" or isinstance(value, Var):
        return value
    return int(value) if is_const(value) else where(value, 1, 0)


def _commands(tr, instances):
    """Per module: ``(name, [(action, guard, [(rate, {var: value}), ...], pos), ...])``."""
    out = []
    for mname, mod, ren, _ in instances:
        cmds = []
        for cmd in mod.commands:
            action = ren.get(cmd.action, cmd.action) if cmd.action else ""
            guard = as_bool(tr.typed(cmd.guard, ren, False, "bool", "the guard"))
            branches = []
            for rate_node, assigns in cmd.branches:
                rate = tr.typed(rate_node, ren, False, "double", "the rate")
                if is_const(rate) and not (rate >= 0 and math.isfinite(rate)):
                    raise tr.err(f"rate {rate!r}: rates must be finite and >= 0", rate_node.pos)
                update = {}
                for vname, vnode, apos in assigns:
                    vname = ren.get(vname, vname)
                    if vname not in tr.vars:
                        raise tr.err(f"update of {vname!r}, which is not a variable", apos)
                    var, vtype, owner = tr.vars[vname]
                    if owner is not None and owner != mname:
                        raise tr.err(f"module {mname!r} updates {vname!r}, a variable of module {owner!r}",
                                     apos)
                    if owner is None and action:
                        raise tr.err(f"global variable {vname!r} is updated by a command labelled [{action}] "
                                     "(PRISM allows it in unlabelled commands only)", apos)
                    if vname in update:
                        raise tr.err(f"{vname!r} is updated twice in one update", apos)
                    val, t = tr.value(vnode, ren)
                    if t != vtype:
                        raise tr.err(f"update of {vname!r}: {_a(vtype)} variable cannot take {_a(t)} value",
                                     vnode.pos)
                    update[vname] = _update_value(val, vtype)
                branches.append((rate, update))
            cmds.append((action, guard, branches, cmd.pos))
        out.append((mname, cmds))
    return out


def _tag(module, pos, branch, n_branches):
    """How an event names a command: ``"M (line 12)"``, ``"M (line 12, branch 2)"``."""
    return f"{module} (line {pos.line}" + (f", branch {branch + 1})" if n_branches > 1 else ")")


def _events(tr, instances):
    """``(name, action, guard, rate, update)`` of every event: unlabelled branches, then each action's
    products over the modules sharing it."""
    modules = _commands(tr, instances)
    events, names = [], set()

    def add(name, action, guard, rate, update):
        base, k = name, 1
        while name in names:
            k += 1
            name = f"{base}#{k}"
        names.add(name)
        if not (is_const(guard) and not guard) and not (is_const(rate) and rate == 0):
            events.append((name, action, True if is_const(guard) else guard, rate, update))

    actions = []
    for mname, cmds in modules:
        for action, guard, branches, pos in cmds:
            if not action:
                for b, (rate, update) in enumerate(branches):
                    add(_tag(mname, pos, b, len(branches)), "", guard, rate, update)
            elif action not in actions:
                actions.append(action)
    for action in actions:
        parts = [[(mname, c) for c in cmds if c[0] == action] for mname, cmds in modules]
        parts = [p for p in parts if p]
        for combo in itertools.product(*parts):
            for bs in itertools.product(*(range(len(c[2])) for _, c in combo)):
                guard, rate, update, tags = True, 1.0, {}, []
                for (mname, (_, g, branches, pos)), b in zip(combo, bs):
                    r, u = branches[b]
                    guard, rate = _land(guard, g), _mul(rate, r)
                    clash = set(update) & set(u)
                    if clash:
                        raise tr.err(f"action [{action}]: variable(s) {sorted(clash)} updated by two modules",
                                     pos)
                    update.update(u)
                    tags.append(_tag(mname, pos, b, len(branches)))
                add(f"[{action}] " + " * ".join(tags), action, guard, rate, update)
    return events


def _reward(tr, items, events):
    """The reward rate of a structure in each state (see the module docstring)."""
    total = 0.0
    for item in items:
        g = tr.typed(item.guard, {}, False, "bool", "the reward's guard")
        v = tr.typed(item.value, {}, False, "double", "the reward's value")
        if item.action is None:
            part = _mul(1.0, v) if is_const(g) and g else (0.0 if is_const(g) else where(as_bool(g), v, 0.0))
            total = part if is_const(total) and total == 0 else total + part
            continue
        for _, action, eg, rate, _ in events:
            if action != item.action:
                continue
            cond = _land(eg, g)
            if is_const(cond) and not cond:
                continue
            amount = _mul(rate, v)
            part = amount if is_const(cond) else where(as_bool(cond), amount, 0.0)
            total = part if is_const(total) and total == 0 else total + part
    return total


def _init_block(tr, model):
    """The states of the box satisfying the program's ``init ... endinit`` block (as arrays)."""
    prog = tr.prog
    cond = tr.typed(prog.init, {}, False, "bool", "init ... endinit")
    vars_ = model.variables
    size = math.prod(v.hi - v.lo + 1 for v in vars_)
    if size > _INIT_BOX_LIMIT:
        raise tr.err(f"init ... endinit: the variables' box has {size} points, more than the "
                     f"{_INIT_BOX_LIMIT} this front end evaluates the block on", prog.init.pos)
    grids = np.meshgrid(*(np.arange(v.lo, v.hi + 1, dtype=np.int64) for v in vars_), indexing="ij")
    env = {v.name: g.ravel() for v, g in zip(vars_, grids)}
    try:
        mask = np.broadcast_to(np.asarray(as_bool(cond) if is_const(cond) else as_bool(cond).evaluate(env),
                                          dtype=bool), (size,))
    except (ModelError, ValueError, ArithmeticError) as exc:
        raise tr.err(f"init ... endinit: {exc}", prog.init.pos) from None
    if not mask.any():
        raise tr.err("init ... endinit: no state satisfies the block", prog.init.pos)
    return {k: a[mask] for k, a in env.items()}
