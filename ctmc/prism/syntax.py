"""The syntax tree of a PRISM program, and the error that names where it went wrong.

Every node carries the position (line, column) of its first token, so the
translation (:mod:`ctmc.prism.translate`) can name the place of a type or
range error as the parser names a syntax error.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..results import ModelError

__all__ = ["PrismError", "Pos", "Node", "VarDecl", "Command", "Module", "RewardItem", "Program", "read_source"]


def read_source(path_or_text, what: str, default_file: str, suffixes: tuple = ()) -> tuple:
    """``(text, file name)`` of a program or properties given as a file or as text.

    A :class:`os.PathLike`, or a one-line string naming an existing file or
    ending in one of ``suffixes``, is a file (``FileNotFoundError`` if
    absent); any other string is the text itself, named ``default_file``.
    ``what`` names the text in errors (``"program"``, ``"properties"``).

    >>> read_source("ctmc module m endmodule", "program", "<string>")
    ('ctmc module m endmodule', '<string>')
    """
    if isinstance(path_or_text, os.PathLike) or (
            isinstance(path_or_text, str) and "\n" not in path_or_text
            and (os.path.isfile(path_or_text) or path_or_text.strip().endswith(suffixes))):
        path = Path(path_or_text)
        if not path.is_file():
            raise FileNotFoundError(f"path_or_text: no {what} file {str(path)!r}")
        return path.read_text(encoding="utf-8"), str(path)
    if isinstance(path_or_text, str):
        return path_or_text, default_file
    raise TypeError(f"path_or_text: expected a file name or the {what} text, got {type(path_or_text).__name__}")


class PrismError(ModelError):
    """An error in a PRISM program, named ``file:line:column: message``.

    Attributes
    ----------
    file : str
        The file name (``"<string>"`` for a program given as text).
    line, column : int
        1-based position of the offending token (0 when the error has no place).
    """

    def __init__(self, message: str, file: str = "<string>", line: int = 0, column: int = 0):
        self.file, self.line, self.column, self.reason = file, line, column, message
        super().__init__(f"{file}:{line}:{column}: {message}" if line else f"{file}: {message}")


@dataclass(frozen=True)
class Pos:
    """A position in the source (1-based line and column)."""

    line: int
    col: int


@dataclass(frozen=True)
class Node:
    """An expression: ``kind`` is ``"int" | "double" | "bool"`` (a literal: ``args = (value,)``),
    ``"ident"`` (``args = (name,)``), ``"label"`` (``"name"``, in properties),
    ``"call"`` (``args = (function, arg, ...)``), ``"?"``
    (``args = (cond, a, b)``), ``"neg" | "!"`` (one operand) or a binary operator symbol
    (``"+" "-" "*" "/" "=" "!=" "<" "<=" ">" ">=" "&" "|" "=>" "<=>"``, two operands)."""

    kind: str
    args: tuple
    pos: Pos

    def rename(self, mapping) -> "Node":
        """The same expression with identifiers renamed by ``mapping`` (a dict)."""
        if not mapping:
            return self
        if self.kind == "ident":
            return Node("ident", (mapping.get(self.args[0], self.args[0]),), self.pos)
        if self.kind in ("int", "double", "bool", "label"):
            return self
        if self.kind == "call":
            return Node("call", (self.args[0], *(a.rename(mapping) for a in self.args[1:])), self.pos)
        return Node(self.kind, tuple(a.rename(mapping) for a in self.args), self.pos)


@dataclass(frozen=True)
class VarDecl:
    """``name : [lo..hi] init v;`` (``lo``/``hi`` None for a bool; ``init`` None when not given)."""

    name: str
    lo: Optional[Node]
    hi: Optional[Node]
    init: Optional[Node]
    pos: Pos

    @property
    def is_bool(self) -> bool:
        return self.lo is None


@dataclass(frozen=True)
class Command:
    """``[action] guard -> rate : updates + ...;``.

    ``branches`` is ``((rate, ((var, value, pos), ...)), ...)``.
    """

    action: str
    guard: Node
    branches: tuple
    pos: Pos


@dataclass(frozen=True)
class Module:
    """A module: its variables and commands, or a renaming of another (``source``, ``renames``)."""

    name: str
    variables: tuple = ()
    commands: tuple = ()
    source: str = ""
    renames: tuple = ()     # ((old, new), ...)
    pos: Pos = Pos(0, 0)


@dataclass(frozen=True)
class RewardItem:
    """``[action] guard : value;`` (``action`` None for a state reward, ``""`` for ``[]``)."""

    action: Optional[str]
    guard: Node
    value: Node
    pos: Pos


@dataclass
class Program:
    """A parsed PRISM program (declarations in source order)."""

    file: str = "<string>"
    model_type: str = ""
    constants: dict = field(default_factory=dict)   # name -> (type, Node or None, Pos)
    formulas: dict = field(default_factory=dict)    # name -> Node
    labels: dict = field(default_factory=dict)      # name -> Node
    globals: list = field(default_factory=list)     # VarDecl
    modules: list = field(default_factory=list)     # Module
    rewards: list = field(default_factory=list)     # (name, (RewardItem, ...), Pos)
    init: Optional[Node] = None
    system: Optional[tuple] = None                  # (module names, Pos) of ``system M1 || ... endsystem``

    def error(self, message: str, pos: Optional[Pos] = None) -> PrismError:
        """A :class:`PrismError` at ``pos`` in this program's file."""
        return PrismError(message, self.file, pos.line if pos else 0, pos.col if pos else 0)
