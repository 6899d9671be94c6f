"""``ctmc solve`` with PRISM: a ``.sm`` model (``--const``) and properties (``--prop``, ``--props``).

What :mod:`ctmc.solve_cli` calls: :func:`split_constants` reads the
``--const`` options (``N=3``, repeatable, or ``N=3,T=1.5`` as PRISM writes
them), :func:`load_program` loads and builds a program with the constants it
declares, :func:`answer` checks the properties (the rest of the constants go to
the properties file), and :func:`evidence` sums the evidence of several answers
up for the one-line summary of the output.
"""
from __future__ import annotations

import time
from pathlib import Path

from ..backends.base import worst
from .parser import parse
from .properties import check, check_file
from .syntax import PrismError

__all__ = ["SUFFIXES", "split_constants", "load_program", "answer", "evidence"]

#: the file suffixes ``ctmc solve`` reads as PRISM programs
SUFFIXES = (".sm", ".prism", ".pm")


def split_constants(items) -> dict:
    """``{"N": "3", ...}`` of ``--const N=3 --const T=1,K=2`` (values kept as text: each is read as
    its constant's declared type)."""
    out = {}
    for item in items or ():
        for part in item.split(","):
            name, eq, value = part.partition("=")
            name, value = name.strip(), value.strip()
            if not eq or not name.isidentifier() or not value:
                raise ValueError(f"--const: expected NAME=VALUE (e.g. N=3 or N=3,T=1.5), "
                                 f"got {part.strip()!r}")
            if name in out:
                raise ValueError(f"--const: {name!r} is given twice")
            out[name] = value
    return out


def _usage(f):
    """``f`` with a :class:`PrismError` (the user's file or property: ``file:line:column``) as a ValueError,
    the command line's usage error (one line, exit status 2)."""
    def wrapped(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except PrismError as exc:
            raise ValueError(str(exc)) from None
    wrapped.__doc__, wrapped.__name__ = f.__doc__, f.__name__
    return wrapped


@_usage
def load_program(path: Path, constants: dict, initial=None):
    """``(chain, model name, load and build seconds, constants left for the properties)`` of a program."""
    from . import load
    t0 = time.perf_counter()
    text = Path(path).read_text(encoding="utf-8")
    declared = parse(text, str(path)).constants
    mine = {k: v for k, v in constants.items() if k in declared}
    rest = {k: v for k, v in constants.items() if k not in declared}
    model = load(Path(path), constants=mine)
    chain = model.build(initial)
    return chain, model.name, time.perf_counter() - t0, rest


@_usage
def answer(chain, props, props_file, constants) -> list:
    """The :class:`~ctmc.prism.properties.PropertyResult` of each ``--prop`` and of the ``--props`` file."""
    if constants and not props_file:
        raise ValueError(f"--const: {sorted(constants)} are not constants of the model"
                         + " (and there is no --props file to declare them)")
    out = [check(chain, p) for p in props or ()]
    if props_file:
        path = Path(props_file)
        if not path.is_file():
            raise ValueError(f"--props: no such file {props_file!r}")
        out += check_file(chain, path, constants=constants)
    return out


def evidence(results, wall_time: float) -> dict:
    """One evidence dict for several answers: the worst status, the largest bound, the methods."""
    methods = sorted({r.method for r in results})
    return {"method": "; ".join(methods), "backend": "scipy",
            "status": worst(*(r.status for r in results)).value,
            "message": f"{len(results)} propert{'y' if len(results) == 1 else 'ies'}",
            "iterations": 0, "residual": 0.0,
            "error_bound": max(float(r.error_bound) for r in results), "wall_time": wall_time}
