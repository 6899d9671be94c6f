"""Linear-algebra backends: where the analyses run.

A backend is a module of *primitives* (:mod:`ctmc.backends.base` defines the
protocol): a function ``operator(chain)`` returning an
:class:`~ctmc.backends.base.Operator` bound to the chain, and
``BACKEND_OPTIONS``, the names of the settings that exist on that backend
only (they travel in the analyses' ``backend_options`` mapping and are checked
by the backend's ``check_backend_options``). Every analysis is written once,
in :mod:`ctmc.stationary`, :mod:`ctmc.passage` and :mod:`ctmc.transient`, on
those primitives.

Backends are named in :data:`BACKENDS` and imported lazily on first use, so a
heavy optional backend (PETSc/SLEPc over MPI) costs nothing until it is asked
for, and a missing one raises an ImportError that says how to install it.
"""
from __future__ import annotations

import importlib

__all__ = ["BACKENDS", "get_backend", "operator_for", "check_backend_options"]

#: backend name -> module implementing it (imported on first use)
BACKENDS = {
    "scipy": "ctmc.backends.scipy_backend",
    "petsc": "ctmc.backends.petsc",
}


def get_backend(name: str):
    """Import and return the backend module called ``name``.

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones).
    """
    if not isinstance(name, str) or name not in BACKENDS:
        raise ValueError(f"backend: unknown backend {name!r}; valid backends are {sorted(BACKENDS)}")
    return importlib.import_module(BACKENDS[name])


def check_backend_options(name: str, backend_options, preconditioner=None) -> dict:
    """Validate the ``backend_options`` mapping of backend ``name`` before any work.

    A ``preconditioner`` asked for is checked too, against the backend's
    ``PRECONDITIONERS`` (all of :data:`~ctmc.backends.base.PRECONDITIONERS`
    where the backend does not say).

    Raises
    ------
    ValueError
        For a setting the backend does not have (the message lists the valid
        ones) or a bad value.
    """
    mod = get_backend(name)
    opts = {} if backend_options is None else backend_options
    if not isinstance(opts, dict) or not all(isinstance(k, str) for k in opts):
        raise ValueError(f"backend_options: expected a dict of settings of backend {name!r}, got "
                         f"{backend_options!r}")
    unknown = sorted(set(opts) - set(mod.BACKEND_OPTIONS))
    if unknown:
        raise ValueError(f"backend_options: {unknown} not understood by backend {name!r}; valid settings "
                         f"are {sorted(mod.BACKEND_OPTIONS)}")
    mod.check_backend_options(opts)
    have = getattr(mod, "PRECONDITIONERS", None)
    if preconditioner is not None and have is not None and preconditioner not in have:
        raise ValueError(f"preconditioner: backend {name!r} has {tuple(have)}, got {preconditioner!r}")
    return dict(opts)


def operator_for(chain, name: str):
    """The :class:`~ctmc.backends.base.Operator` of ``chain`` on backend ``name``."""
    return get_backend(name).operator(chain)
