"""The shape of every analysis' method registry: name -> :class:`Method`.

A method of an analysis is one function, one frozen options class and one
registry line; ``auto`` is an entry like the others. What ``run`` takes and
returns is the analysis' own contract (:mod:`ctmc.stationary`,
:mod:`ctmc.passage`, :mod:`ctmc.transient` say it); the options are validated by
:func:`ctmc.options.make_options` before any work.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["Method"]


@dataclass(frozen=True)
class Method:
    """A registered method: its function, its options class and a one-line description."""

    run: Callable
    options: type
    summary: str
