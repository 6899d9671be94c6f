"""The shape of every analysis' method registry: name -> :class:`Method`.

A method of an analysis is one function, one frozen options class and one
registry line; ``auto`` is an entry like the others. What ``run`` takes and
returns is the analysis' own contract (:mod:`ctmc.stationary`,
:mod:`ctmc.passage`, :mod:`ctmc.transient` say it); the options are validated by
:func:`ctmc.options.make_options` before any work.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

__all__ = ["Method", "deprecated_aliases"]


@dataclass(frozen=True)
class Method:
    """A registered method: its function, its options class and a one-line description."""

    run: Callable
    options: type
    summary: str


def deprecated_aliases(module: str, aliases: dict):
    """A module ``__getattr__`` serving old names with a ``DeprecationWarning`` naming the new one.

    ``aliases`` maps an old name to ``(new name, object)``.

    >>> import warnings
    >>> getattr_ = deprecated_aliases("ctmc.x", {"OldOptions": ("ctmc.options.NewOptions", int)})
    >>> with warnings.catch_warnings(record=True) as w:
    ...     warnings.simplefilter("always")
    ...     getattr_("OldOptions") is int, str(w[0].message)
    (True, 'ctmc.x.OldOptions is deprecated: use ctmc.options.NewOptions')
    """
    def __getattr__(name):
        if name in aliases:
            new, obj = aliases[name]
            warnings.warn(f"{module}.{name} is deprecated: use {new}", DeprecationWarning, stacklevel=2)
            return obj
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return __getattr__
