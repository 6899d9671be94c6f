"""The default backend: SciPy sparse linear algebra in one process.

Stationary methods live in :mod:`ctmc.stationary`, hitting and first-passage
analyses in :mod:`ctmc.passage`, transient ones in :mod:`ctmc.transient`;
this module binds them to the backend interface.
"""
from __future__ import annotations

from ..passage import first_passage, hitting_laplace, hitting_times
from ..stationary import solve_stationary as stationary
from ..transient import transient

__all__ = ["stationary", "hitting_times", "hitting_laplace", "first_passage", "transient"]
