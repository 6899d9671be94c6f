"""A recursive-descent parser for the CTMC part of the PRISM language.

The grammar (PRISM manual, "The PRISM Language"), one function per rule::

    program   := item*
    item      := "ctmc" | "stochastic" | const | formula | label | global | module | rewards
                 | "init" expr "endinit" | "system" parallel "endsystem"
    const     := ("const" ["int" | "double" | "bool"] | "rate" | "prob") IDENT ["=" expr] ";"
    module    := "module" IDENT (vardecl* command* | "=" IDENT "[" IDENT "=" IDENT ("," ...)* "]") "endmodule"
    vardecl   := IDENT ":" ("[" expr ".." expr "]" | "bool") ["init" expr] ";"
    command   := "[" [IDENT] "]" expr "->" branch ("+" branch)* ";"
    branch    := [expr ":"] ("true" | assign ("&" assign)*)      assign := "(" IDENT "'" "=" expr ")"
    rewards   := "rewards" [STRING] ("[" [IDENT] "]" expr ":" expr ";" | expr ":" expr ";")* "endrewards"

and the expressions, loosest binding first: ``c ? a : b``, ``<=>``, ``=>``,
``|``, ``&``, ``!``, ``= !=``, ``< <= > >=``, ``+ -``, ``* /``, unary ``-``,
then literals, identifiers, ``f(a, ...)`` / ``func(f, a, ...)`` and parentheses.

Every error is a :class:`~ctmc.prism.syntax.PrismError` naming the file,
line and column; the features of PRISM this front end does not translate
(other model types, ``invariant``, ``clock`` variables, ``observables``,
unbounded ``int`` variables, ``system`` blocks other than the default
parallel composition) are refused by name where they are met.
"""
from __future__ import annotations

import re

from .syntax import Command, Module, Node, Pos, PrismError, Program, RewardItem, VarDecl

__all__ = ["parse", "tokenize", "Parser", "PropertyParser", "FILTER_OPS"]

OTHER_TYPES = {"dtmc", "probabilistic", "mdp", "nondeterministic", "pta", "pomdp", "popta", "smg", "lts",
               "csg", "tsg", "ma"}
REFUSED = {"invariant": "invariants (a PTA feature)", "observables": "observables (a POMDP feature)",
           "observable": "observables (a POMDP feature)", "player": "players (an SMG feature)",
           "endinvariant": "invariants (a PTA feature)", "clock": "clock variables (a PTA feature)"}
KEYWORDS = {"ctmc", "stochastic", "const", "int", "double", "bool", "rate", "prob", "formula", "label",
            "global",
            "module", "endmodule", "rewards", "endrewards", "init", "endinit", "system", "endsystem", "true",
            "false", "func", *OTHER_TYPES, *REFUSED}
FUNCTIONS = {"min", "max", "floor", "ceil", "pow", "mod", "log"}

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\n]+|//[^\n]*|/\*.*?\*/)
  | (?P<double>\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)
  | (?P<int>\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<string>"[^"\n]*")
  | (?P<op><=>|=>|->|\.\.|<=|>=|!=|\|\||[-+*/=<>!&|?:;,()\[\]{}'])
""", re.VERBOSE | re.DOTALL)


def tokenize(text: str, file: str = "<string>"):
    """The tokens of ``text``: a list of ``(kind, value, Pos)``, ending with ``("eof", "", pos)``.

    ``kind`` is ``"int" | "double" | "ident" | "keyword" | "string" | "op"``.
    """
    out, i, line, start = [], 0, 1, 0
    while i < len(text):
        m = _TOKEN.match(text, i)
        if m is None:
            raise PrismError(f"unexpected character {text[i]!r}", file, line, i - start + 1)
        kind, value = m.lastgroup, m.group()
        pos = Pos(line, i - start + 1)
        if kind == "ws":
            n = value.count("\n")
            if n:
                line += n
                start = i + value.rindex("\n") + 1
        else:
            if kind == "ident" and value in KEYWORDS:
                kind = "keyword"
            out.append((kind, value, pos))
        i = m.end()
    out.append(("eof", "", Pos(line, i - start + 1)))
    return out


class Parser:
    """The parser's state: the tokens, the position, the program being filled (see :func:`parse`)."""

    #: ``name (`` is a name then a parenthesis, not a call, unless ``name`` is a function
    #: (PRISM's time bounds: ``F<=T (n=N)``)
    bare_names = False

    def __init__(self, text: str, file: str):
        self.file = file
        self.toks = tokenize(text, file)
        self.i = 0
        self.prog = Program(file=file)

    # tokens -------------------------------------------------------------------
    def peek(self, k: int = 0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, *values, k: int = 0) -> bool:
        kind, value, _ = self.peek(k)
        return kind in ("op", "keyword") and value in values

    def next(self):
        tok = self.toks[self.i]
        if tok[0] != "eof":
            self.i += 1
        return tok

    def error(self, message: str, pos: Pos = None) -> PrismError:
        pos = pos or self.peek()[2]
        return PrismError(message, self.file, pos.line, pos.col)

    def found(self) -> str:
        kind, value, _ = self.peek()
        return "the end of the file" if kind == "eof" else f"{value!r}"

    def expect(self, value: str, what: str = ""):
        if not self.at(value):
            raise self.error(f"expected {value!r}{what}, found {self.found()}")
        return self.next()

    def ident(self, what: str) -> tuple:
        kind, value, pos = self.peek()
        if kind == "keyword" and value in REFUSED:
            raise self.error(f"{REFUSED[value]} are not supported (ctmc reads CTMCs)")
        if kind != "ident":
            raise self.error(f"expected {what}, found {self.found()}")
        self.next()
        return value, pos

    # program ------------------------------------------------------------------
    def program(self) -> Program:
        while self.peek()[0] != "eof":
            self.item()
        if not self.prog.model_type:
            raise PrismError("no model type: the program must say 'ctmc'", self.file, 1, 1)
        return self.prog

    def item(self):
        kind, value, pos = self.peek()
        if kind == "keyword" and value in ("ctmc", "stochastic"):
            self.next()
            self.prog.model_type = "ctmc"
        elif kind == "keyword" and value in OTHER_TYPES:
            raise self.error(f"model type {value!r} is not supported: ctmc.prism reads 'ctmc' models only")
        elif kind == "keyword" and value in REFUSED:
            raise self.error(f"{REFUSED[value]} are not supported (ctmc reads CTMCs)")
        elif self.at("const", "rate", "prob"):
            self.constant()
        elif self.at("formula"):
            self.next()
            name, npos = self.ident("a formula name")
            self.expect("=")
            self.declare(name, npos)
            self.prog.formulas[name] = self.expr()
            self.expect(";")
        elif self.at("label"):
            self.next()
            name, npos = self.string("a label name")
            if name in self.prog.labels:
                raise self.error(f"label {name!r} is defined twice", npos)
            self.expect("=")
            self.prog.labels[name] = self.expr()
            self.expect(";")
        elif self.at("global"):
            self.next()
            self.prog.globals.append(self.vardecl())
        elif self.at("module"):
            self.module()
        elif self.at("rewards"):
            self.rewards()
        elif self.at("init"):
            self.next()
            if self.prog.init is not None:
                raise self.error("a second init ... endinit block", pos)
            self.prog.init = self.expr()
            self.expect("endinit")
        elif self.at("system"):
            self.system()
        else:
            raise self.error(f"expected a declaration (ctmc, const, formula, label, global, module, rewards, "
                             f"init, system), found {self.found()}")

    def declare(self, name: str, pos: Pos):
        """Refuse a second constant or formula of the same name."""
        if name in self.prog.constants or name in self.prog.formulas:
            raise self.error(f"{name!r} is declared twice", pos)

    def string(self, what: str):
        kind, value, pos = self.peek()
        if kind != "string":
            raise self.error(f"expected {what} in double quotes, found {self.found()}")
        self.next()
        return value[1:-1], pos

    def constant(self):
        _, head, _ = self.next()
        ctype = {"rate": "double", "prob": "double"}.get(head, "int")
        if head == "const" and self.at("int", "double", "bool"):
            ctype = self.next()[1]
        name, pos = self.ident("a constant name")
        self.declare(name, pos)
        value = None
        if self.at("="):
            self.next()
            value = self.expr()
        self.expect(";", " after the constant's declaration")
        self.prog.constants[name] = (ctype, value, pos)

    def vardecl(self) -> VarDecl:
        name, pos = self.ident("a variable name")
        self.expect(":", f" after variable {name!r}")
        if self.at("bool"):
            self.next()
            lo = hi = None
        elif self.at("["):
            self.next()
            lo = self.expr()
            self.expect("..", " in the variable's range [lo..hi]")
            hi = self.expr()
            self.expect("]")
        elif self.at("int"):
            raise self.error(f"variable {name!r}: unbounded int variables are not supported "
                             "(give a range [lo..hi])")
        elif self.at("clock", "double"):
            raise self.error(f"variable {name!r}: {self.peek()[1]} variables are not supported "
                             "(ctmc reads CTMCs: int ranges [lo..hi] and bool)")
        else:
            raise self.error(f"expected a range [lo..hi] or 'bool' for variable {name!r}, "
                             f"found {self.found()}")
        init = None
        if self.at("init"):
            self.next()
            init = self.expr()
        self.expect(";", f" after the declaration of {name!r}")
        return VarDecl(name, lo, hi, init, pos)

    def module(self):
        mpos = self.next()[2]
        name, _ = self.ident("a module name")
        if self.at("="):
            self.next()
            source, _ = self.ident("the name of the module to rename")
            self.expect("[")
            renames = []
            while True:
                old, opos = self.ident("an identifier to rename")
                self.expect("=")
                new, _ = self.ident("its new name")
                if any(o == old for o, _ in renames):
                    raise self.error(f"{old!r} is renamed twice", opos)
                renames.append((old, new))
                if not self.at(","):
                    break
                self.next()
            self.expect("]")
            self.expect("endmodule")
            self.prog.modules.append(Module(name, source=source, renames=tuple(renames), pos=mpos))
            return
        variables, commands = [], []
        while not self.at("endmodule"):
            if self.peek()[0] == "eof":
                raise self.error(f"module {name!r} has no 'endmodule'")
            if self.at("["):
                commands.append(self.command())
            elif self.at("invariant"):
                raise self.error("invariants (a PTA feature) are not supported (ctmc reads CTMCs)")
            else:
                variables.append(self.vardecl())
        self.next()
        self.prog.modules.append(Module(name, tuple(variables), tuple(commands), pos=mpos))

    def action(self) -> str:
        self.expect("[")
        action = ""
        if not self.at("]"):
            action, _ = self.ident("an action name")
        self.expect("]")
        return action

    def command(self) -> Command:
        pos = self.peek()[2]
        action = self.action()
        guard = self.expr()
        self.expect("->", " between the guard and the updates")
        branches = [self.branch()]
        while self.at("+"):
            self.next()
            branches.append(self.branch())
        self.expect(";", " at the end of the command")
        return Command(action, guard, tuple(branches), pos)

    def branch(self):
        if not self.starts_assignments():
            rate = self.expr()
            self.expect(":", " after the rate")
        else:
            rate = Node("double", (1.0,), self.peek()[2])
        if self.at("true"):
            self.next()
            return rate, ()
        assigns = [self.assign()]
        while self.at("&"):
            self.next()
            assigns.append(self.assign())
        return rate, tuple(assigns)

    def starts_assignments(self) -> bool:
        if self.at("true") and self.at(";", "+", k=1):
            return True
        return self.at("(") and self.peek(1)[0] == "ident" and self.at("'", k=2)

    def assign(self):
        pos = self.expect("(", " opening an update (x'=...)")[2]
        name, _ = self.ident("a variable name")
        self.expect("'", f" after {name!r} in an update (x'=...)")
        self.expect("=")
        value = self.expr()
        self.expect(")")
        return name, value, pos

    def rewards(self):
        pos = self.next()[2]
        name = None
        if self.peek()[0] == "string":
            name, _ = self.string("a reward name")
        items = []
        while not self.at("endrewards"):
            if self.peek()[0] == "eof":
                raise self.error("rewards block has no 'endrewards'")
            ipos = self.peek()[2]
            action = self.action() if self.at("[") else None
            guard = self.expr()
            self.expect(":", " between the reward's guard and its value")
            value = self.expr()
            self.expect(";", " at the end of the reward item")
            items.append(RewardItem(action, guard, value, ipos))
        self.next()
        self.prog.rewards.append((name, tuple(items), pos))

    def system(self):
        pos = self.next()[2]
        names = []
        while True:
            name, _ = self.ident("a module name")
            names.append(name)
            if self.at("endsystem"):
                break
            if not self.at("||"):
                raise self.error(f"system ... endsystem: {self.found()} is not supported (only the default "
                                 "parallel composition M1 || M2 || ... of every module)")
            self.next()
            if self.at("|"):        # '|||' reads as '||' then '|'
                raise self.error("system ... endsystem: '|||' (interleaving without synchronisation) is not "
                                 "supported (only the default parallel composition M1 || M2 || ... of every "
                                 "module)")
        self.next()
        self.prog.system = (tuple(names), pos)

    # expressions --------------------------------------------------------------
    def expr(self) -> Node:
        cond = self.binary(0)
        if self.at("?"):
            pos = self.next()[2]
            a = self.expr()
            self.expect(":", " in a conditional c ? a : b")
            b = self.expr()
            return Node("?", (cond, a, b), pos)
        return cond

    _LEVELS = (("<=>",), ("=>",), ("|",), ("&",), None, ("=", "!="), ("<", "<=", ">", ">="), ("+", "-"),
               ("*", "/"))

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        ops = self._LEVELS[level]
        if ops is None:                              # "!" binds between & and the comparisons
            if self.at("!"):
                pos = self.next()[2]
                return Node("!", (self.binary(level),), pos)
            return self.binary(level + 1)
        left = self.binary(level + 1)
        while self.at(*ops):
            _, op, pos = self.next()
            right = self.binary(level if op == "=>" else level + 1)
            left = Node(op, (left, right), pos)
            if op == "=>":
                break
            if ops[0] in ("=", "<") and self.at(*ops):
                raise self.error("comparisons do not chain: parenthesise them (a < b) & (b < c)")
        return left

    def unary(self) -> Node:
        if self.at("-"):
            pos = self.next()[2]
            return Node("neg", (self.unary(),), pos)
        return self.primary()

    def primary(self) -> Node:
        kind, value, pos = self.peek()
        if kind == "int":
            self.next()
            return Node("int", (int(value),), pos)
        if kind == "double":
            self.next()
            return Node("double", (float(value),), pos)
        if self.at("true", "false"):
            self.next()
            return Node("bool", (value == "true",), pos)
        if self.at("("):
            self.next()
            e = self.expr()
            self.expect(")", " closing the parenthesis")
            return e
        if self.at("func"):
            self.next()
            self.expect("(")
            fname, fpos = self.ident("a function name")
            args = [fname]
            while self.at(","):
                self.next()
                args.append(self.expr())
            self.expect(")")
            return self.call(args, fpos)
        if kind == "ident":
            self.next()
            if self.at("(") and not (self.bare_names and value not in FUNCTIONS):
                if value not in FUNCTIONS:
                    raise self.error(f"unknown function {value!r} (PRISM's are "
                                     f"{', '.join(sorted(FUNCTIONS))})", pos)
                self.next()
                args = [value, self.expr()]
                while self.at(","):
                    self.next()
                    args.append(self.expr())
                self.expect(")", f" closing the call of {value}")
                return self.call(args, pos)
            return Node("ident", (value,), pos)
        if kind == "string":
            self.next()
            return Node("label", (value[1:-1],), pos)
        if kind == "keyword" and value in REFUSED:
            raise self.error(f"{REFUSED[value]} are not supported (ctmc reads CTMCs)")
        raise self.error(f"expected an expression, found {self.found()}")

    def call(self, args, pos) -> Node:
        fname, n = args[0], len(args) - 1
        if fname not in FUNCTIONS:
            raise self.error(f"unknown function {fname!r} (PRISM's are {', '.join(sorted(FUNCTIONS))})", pos)
        want = {"min": (2, None), "max": (2, None), "floor": (1, 1), "ceil": (1, 1), "pow": (2, 2),
                "mod": (2, 2), "log": (2, 2)}[fname]
        if n < want[0] or (want[1] is not None and n > want[1]):
            count = f"{want[0]}" if want[0] == want[1] else f"at least {want[0]}"
            raise self.error(f"{fname} takes {count} argument(s), got {n}", pos)
        return Node("call", tuple(args), pos)


def parse(text: str, file: str = "<string>") -> Program:
    """Parse a PRISM program.

    Parameters
    ----------
    text : str
        The program.
    file : str
        Its name, for the messages.

    Returns
    -------
    Program

    Raises
    ------
    PrismError
        For a syntax error or a refused feature, naming ``file:line:column``.
    """
    return Parser(text, file).program()


# properties ------------------------------------------------------------------
#: the filter operators supported (PRISM's manual, "Filters"), and those refused by name
FILTER_OPS = ("min", "max", "sum", "avg", "count", "forall", "exists", "first", "state")
FILTER_REFUSED = ("argmin", "argmax", "range", "print", "printall")
_ARITH = 7          # Parser._LEVELS index of "+ -": a time bound or probability bound is arithmetic


class PropertyParser(Parser):
    r"""The CSL properties of a CTMC, on the expression grammar of :class:`Parser`::

        file     := (const | formula | label | [STRING ":"] prop [";"])*
        prop     := "filter" "(" FOP "," prop ["," expr] ")" | expr (with operators as primaries)
        operator := "P" bound "[" path "]" | "S" bound "[" expr "]" | "T" "=" "?" "[" "F" expr "]"
                  | "R" ["{" (STRING | INT) "}"] bound "[" rpath "]"
        rpath    := "S" | "C" "<=" arith | "I" "=" arith | "F" expr
                  | expr
        bound    := "=" "?" | ("<" | "<=" | ">" | ">=") arith
        path     := "F" [time] expr | expr "U" [time] expr
        time     := ("<=" | "<") arith | (">=" | ">") arith | "[" arith "," arith "]"

    ``P``, ``S`` and ``R`` are PRISM's reserved words; ``T`` (ctmc's
    shorthand for the expected time ``R=? [F phi]`` of PRISM's time reward)
    is an operator only as ``T=?``, so ``T`` stays usable as a constant. The
    nodes are :class:`~ctmc.prism.syntax.Node` of kind ``"P"`` (``(bound,
    phi, psi, t1, t2)``: ``phi U[t1,t2] psi``, ``F psi`` being ``true U psi``),
    ``"S"`` (``(bound, phi)``), ``"R"`` (``(bound, reward, what, arg)``),
    ``"T"`` (``(None, phi)``), ``"filter"`` (``(op, prop, states)``), or
    an expression, whose operands may be operators at a property's top level
    (``1 - P=? [...]``, ``P=? [...] / P=? [...]``; not inside an operator's path).
    ``bound`` is None for ``=?``, else ``(op, Node)``.
    """

    def properties(self) -> list:
        """``[(name or None, Node, start, end)]`` of a properties file (``end``: just after its last
        token); its ``const``/``formula``/``label``
        declarations go to ``self.prog``."""
        out = []
        while self.peek()[0] != "eof":
            if self.at("const", "formula", "label", "rate", "prob"):
                self.item()
                continue
            name = None
            if self.peek()[0] == "string" and self.at(":", k=1):
                name, _ = self.string("a property name")
                self.next()
            start = self.peek()[2]
            node = self.prop()
            _, last, lpos = self.toks[self.i - 1]
            out.append((name, node, start, Pos(lpos.line, lpos.col + len(last))))
            if self.at(";"):
                self.next()
        return out

    def single(self) -> Node:
        """One property, the whole text."""
        node = self.prop()
        if self.at(";"):
            self.next()
        if self.peek()[0] != "eof":
            raise self.error(f"unexpected {self.found()} after the property")
        return node

    def word(self, *words, k: int = 0) -> bool:
        kind, value, _ = self.peek(k)
        return kind == "ident" and value in words

    #: an operator may be an operand (``1 - P=? [...]``): at a property's top level, not in a path
    arithmetic = False

    def at_operator(self) -> bool:
        return self.word("P", "S", "R") or (self.word("T") and self.at("=", k=1) and self.at("?", k=2))

    def primary(self) -> Node:
        if self.arithmetic and self.at_operator():
            return self.operator()
        return super().primary()

    def prop(self) -> Node:
        value = self.peek()[1]
        if self.word("filter") and self.at("(", k=1):
            return self.filter()
        if self.word("E", "A", "Pmin", "Pmax", "Rmin", "Rmax", "LRA"):
            raise self.error(f"{value!r} is not supported (ctmc checks CTMCs: P, S, R, T and filter)")
        was, self.arithmetic = self.arithmetic, True
        try:
            return self.expr()
        finally:
            self.arithmetic = was

    def operator(self) -> Node:
        """``P``, ``S``, ``R`` or ``T=?`` and its path (where no operator is an operand)."""
        was, self.arithmetic = self.arithmetic, False
        try:
            _, value, pos = self.next()
            if value == "R":
                return self.reward(pos)
            bound = self.bound(value)
            self.expect("[", f" opening the path of {value}")
            if value == "S":
                node = Node("S", (bound, self.expr()), pos)
            elif value == "P":
                node = Node("P", (bound, *self.path()), pos)
            else:
                self.time_word("F", "T=? [ F phi ]: the expected time to reach phi")
                node = Node("T", (None, self.expr()), pos)
            return self.close(node, f" closing the path of {value}")
        finally:
            self.arithmetic = was

    def close(self, node, what) -> Node:
        """``]`` after an operator's path, with PRISM's old-style filter ``{states}{min}{max}`` before it:
        ``filter(op, node, states)``, ``op`` min, max or state (``forall`` for a bool property)."""
        if self.at("{"):
            pos = self.next()[2]
            states = self.expr()
            self.expect("}", " closing the filter's states {phi}")
            ops = set()
            while self.at("{"):
                self.next()
                if not self.word("min", "max"):
                    raise self.error(f"old-style filter: expected {{min}} or {{max}}, found {self.found()}")
                ops.add(self.next()[1])
                self.expect("}")
            if len(ops) == 2:
                raise self.error("old-style filter {min}{max} (PRISM's range) is not supported", pos)
            op = ops.pop() if ops else ("forall" if node.args[0] is not None else "state")
            node = Node("filter", (op, node, states), pos)
        self.expect("]", what)
        return node

    def time_word(self, word, what):
        if not self.word(word):
            raise self.error(f"{what}: expected {word!r}, found {self.found()}")
        self.next()

    def bound(self, op) -> tuple:
        if self.at("="):
            self.next()
            self.expect("?", f" after {op}= (a query {op}=? [ ... ])")
            return None
        if self.at("<", "<=", ">", ">="):
            cmp_ = self.next()[1]
            return cmp_, self.binary(_ARITH)
        raise self.error(f"expected =? or a bound (<, <=, >, >= p) after {op}, found {self.found()}")

    def time(self) -> tuple:
        """``(t1, t2)`` of a time bound (None: 0, resp. infinity)."""
        if self.at("<=", "<", ">=", ">"):
            upper = self.next()[1][0] == "<"
            self.bare_names = True          # as PRISM: ``U<=T (n=N)`` is the bound T, then (n=N)
            try:
                bound = self.binary(_ARITH)
            finally:
                self.bare_names = False
            return (None, bound) if upper else (bound, None)
        if self.at("["):
            self.next()
            t1 = self.expr()
            self.expect(",", " in a time interval [t1, t2]")
            t2 = self.expr()
            self.expect("]", " closing the time interval [t1, t2]")
            return t1, t2
        if self.at("="):
            raise self.error("a time bound =t is not a path bound (use [t, t])")
        return None, None

    def path(self) -> tuple:
        """``(phi, psi, t1, t2)`` of ``F[t] psi`` (phi None: true) or ``phi U[t] psi``."""
        for word, why in (("G", "G (globally) is not supported (1 - P=? [F !phi] loses the relative "
                                "accuracy of a small probability)"),
                          ("X", "X (next) is not supported"), ("W", "W (weak until) is not supported")):
            if self.word(word):
                raise self.error(why)
        if self.word("F"):
            self.next()
            t1, t2 = self.time()
            return None, self.expr(), t1, t2
        phi = self.expr()
        if self.word("R", "W"):
            raise self.error(f"{self.peek()[1]} (release / weak until) is not supported; use U")
        self.time_word("U", "P=? [ ... ]: the path is F psi or phi U psi")
        t1, t2 = self.time()
        return phi, self.expr(), t1, t2

    def reward(self, pos) -> Node:
        name = None
        if self.at("{"):
            self.next()
            if self.peek()[0] == "int":
                name = int(self.next()[1])
            else:
                name, _ = self.string("a reward structure's name or index")
            self.expect("}")
        bound = self.bound("R")
        self.expect("[", " opening the reward's path")
        kind, what, wpos = self.peek()
        arg = None
        if self.word("S"):
            self.next()
        elif self.word("C"):
            cpos = self.next()[2]
            if not self.at("<=", "<"):
                raise self.error("R=? [ C ] (reward accumulated for ever) is not supported; give C<=t", cpos)
            self.next()
            arg = self.binary(_ARITH)
        elif self.word("I"):
            self.next()
            self.expect("=", " in R=? [ I=t ]")
            arg = self.binary(_ARITH)
        elif self.word("F"):
            self.next()
            arg = self.expr()
        else:
            raise self.error(f"R=? [ ... ]: expected S, C<=t, I=t or F phi, found {self.found()}")
        return self.close(Node("R", (bound, name, what, arg), pos), " closing the reward's path")

    def filter(self) -> Node:
        pos = self.next()[2]
        self.expect("(")
        kind, op, opos = self.peek()
        if op in FILTER_REFUSED:
            raise self.error(f"filter operator {op!r} is not supported (supported: {', '.join(FILTER_OPS)})")
        if op not in FILTER_OPS:
            raise self.error(f"expected a filter operator ({', '.join(FILTER_OPS)}), found {self.found()}")
        self.next()
        self.expect(",", " after the filter operator")
        prop = self.prop()
        states = Node("bool", (True,), pos)
        if self.at(","):
            self.next()
            states = self.expr()
        self.expect(")", " closing the filter")
        return Node("filter", (op, prop, states), pos)
