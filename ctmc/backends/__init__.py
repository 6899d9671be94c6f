"""Linear-algebra backends: where the analyses run.

A backend is a module exposing ``stationary``, ``hitting_times``,
``hitting_laplace``, ``first_passage`` and ``transient`` with the call shapes
of :mod:`ctmc.backends.scipy_backend`, returning the result types of
:mod:`ctmc.results`. Backends are named in :data:`BACKENDS` and imported
lazily on first use, so a heavy optional backend (PETSc/SLEPc over MPI) costs
nothing until it is asked for, and a missing one raises an ImportError that
says how to install it.
"""
from __future__ import annotations

import importlib

__all__ = ["BACKENDS", "get_backend"]

#: backend name -> module implementing it (imported on first use)
BACKENDS = {
    "scipy": "ctmc.backends.scipy_backend",
    "petsc": "ctmc.backends.petsc_backend",
}


def get_backend(name: str):
    """Import and return the backend module called ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones).
    """
    if name not in BACKENDS:
        raise ValueError(f"backend: unknown backend {name!r}; valid backends are {sorted(BACKENDS)}")
    return importlib.import_module(BACKENDS[name])
