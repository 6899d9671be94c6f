"""The PETSc backend's settings: the options database, ``backend_options``, converged reasons.

Every PETSc/SLEPc object made by the backend has the options prefix
:data:`PREFIX`; per-call ``petsc_options`` are inserted under that prefix for
the duration of one ``setFromOptions`` (:func:`scoped_options`) and the
ambient values (command line, ``PETSC_OPTIONS``) are put back afterwards.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ...results import Status
from ._env import load_petsc

__all__ = ["PREFIX", "BACKEND_OPTIONS", "PCTYPE", "PRECONDITIONERS", "GATHER", "check_backend_options", "scoped_options",
           "ksp_status", "slepc_status"]

#: options-database prefix of every PETSc/SLEPc object made by this backend
PREFIX = "ctmc_"
#: settings of the ``backend_options`` mapping that exist on this backend
BACKEND_OPTIONS = ("petsc_options", "gather")
#: each preconditioner of ``LinearSpec`` this backend has, as a PETSc ``PCType``
#: ("sgs": PCSOR, whose default is a symmetric Gauss-Seidel sweep on each process's block).
#: "multilevel" (ctmc.multigrid) is the scipy backend's only: PETSc's GAMG by plain
#: aggregation needed 8-11x the GMRES iterations of "sor" on kanban t=2 and fms n=3 and
#: did not converge on tandem c=63, so it is refused rather than mapped.
PCTYPE = {"ilu": "bjacobi", "sgs": "sor", "jacobi": "jacobi", "none": "none"}
PRECONDITIONERS = tuple(PCTYPE)
#: values of the ``gather`` setting
GATHER = ("all", "root", "none")

_SCALARS = (str, bool, int, float, np.integer, np.floating)


def check_backend_options(opts) -> None:
    """Validate the PETSc ``backend_options`` (names already checked by the registry).

    ``petsc_options``: a dict ``{option name: value}`` (names without the
    ``-ctmc_`` prefix, values str, number, bool or None for a flag);
    ``gather``: one of :data:`GATHER`.

    Raises
    ------
    ValueError
        Naming the setting and what it accepts.
    """
    opts = {} if opts is None else opts
    po = opts.get("petsc_options")
    if po is not None and (not isinstance(po, dict) or not all(isinstance(k, str) and k for k in po)
                           or not all(v is None or isinstance(v, _SCALARS) for v in po.values())):
        raise ValueError("petsc_options: expected a dict {option name: value} with str names and str, "
                         f"number, bool or None values, e.g. {{'ksp_type': 'bcgs'}}; got {po!r}")
    g = opts.get("gather")
    if g is not None and g not in GATHER:
        raise ValueError(f"gather: expected one of {GATHER}, got {g!r}")


_ABSENT = object()


@contextlib.contextmanager
def scoped_options(petsc_options):
    """Insert ``petsc_options`` under the ctmc prefix for the duration of a setFromOptions.

    Options already in the database (command line, ``PETSC_OPTIONS``) are
    overridden for this call only: their old values are put back afterwards.
    A value of None or True sets a flag.
    """
    PETSc = load_petsc()
    db = PETSc.Options()
    saved = {}
    try:
        for k, v in (petsc_options or {}).items():
            name = PREFIX + k.lstrip("-")
            if name not in saved:
                saved[name] = db.getString(name, None) if db.hasName(name) else _ABSENT
            db.setValue(name, "" if v is None or v is True else str(v))
        yield
    finally:
        for name, old in saved.items():
            if old is _ABSENT:
                db.delValue(name)
            else:
                db.setValue(name, old)


def _reason_names(cls):
    return {v: k for k, v in vars(cls).items() if not k.startswith("_")
            and k not in ("ITERATING", "CONVERGED_ITERATING")}


def ksp_status(reason: int):
    """A KSP converged reason -> ``(Status, reason name)``."""
    PETSc = load_petsc()
    name = _reason_names(PETSc.KSP.ConvergedReason).get(int(reason), str(reason))
    if reason > 0:
        return Status.SUCCESS, name
    if reason == PETSc.KSP.ConvergedReason.DIVERGED_MAX_IT:
        return Status.MAX_ITERATIONS, name
    return Status.BREAKDOWN, name


def slepc_status(cls, reason: int):
    """An EPS or MFN (``cls``) converged reason -> ``(Status, reason name)``."""
    name = _reason_names(cls.ConvergedReason).get(int(reason), str(reason))
    if reason > 0:
        return Status.SUCCESS, name
    if reason == cls.ConvergedReason.DIVERGED_ITS:
        return Status.MAX_ITERATIONS, name
    return Status.BREAKDOWN, name
