"""Frozen options classes shared by the analyses, and the one check that builds them.

Every method of every analysis has one frozen options dataclass, the same on
every backend; a typo or a bad value fails at construction, before any heavy
work (:func:`make_options`). The classes here hold what several analyses
share: the tolerances, the dense solver's size limit, the direct solver's
ordering and the Krylov settings; :mod:`ctmc.stationary`, :mod:`ctmc.passage`
and :mod:`ctmc.transient` extend them.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

import math

import numpy as np

from ._sparse_lu import ORDERINGS
from .backends.base import PRECONDITIONERS, LinearSpec
from .kernels.evidence import grade_bound  # noqa: F401  (its home before ctmc.kernels)

__all__ = ["positive", "integer_in", "flag", "tail_bound_flag", "Tolerances", "GTHOptions", "DirectOptions",
           "KrylovSolverOptions", "make_options", "linear_spec"]


def positive(name: str, value, integer: bool = False) -> None:
    """Raise ValueError naming ``name`` unless ``value`` is a positive number (integer).

    >>> positive("tol", 1e-10)
    >>> positive("maxiter", 2.5, integer=True)
    Traceback (most recent call last):
    ...
    ValueError: maxiter: expected a positive integer, got 2.5
    """
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if isinstance(value, bool) or not isinstance(value, kinds) or not value > 0:
        raise ValueError(f"{name}: expected a positive {'integer' if integer else 'number'}, got {value!r}")


def positive_number(name: str, value) -> float:
    """``value`` as a float, or ValueError naming ``name`` unless it is a finite number > 0.

    >>> positive_number("mean", "2.5")
    2.5
    >>> positive_number("rate", 0)
    Traceback (most recent call last):
    ...
    ValueError: rate: must be finite and > 0, got 0
    """
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a positive number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name}: must be finite and > 0, got {value!r}")
    return v


def integer_in(name: str, value, lo: int = 0, hi=None) -> None:
    """Raise ValueError naming ``name`` unless ``value`` is an integer in ``lo..hi`` (``hi`` None: no bound).

    >>> integer_in("polish", 0)
    >>> integer_in("coarse_size", 1, 2, 5000)
    Traceback (most recent call last):
    ...
    ValueError: coarse_size: expected an integer in 2..5000, got 1
    """
    if (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo
            or (hi is not None and value > hi)):
        allowed = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        raise ValueError(f"{name}: expected an integer {allowed}, got {value!r}")


def flag(name: str, value) -> None:
    """Raise ValueError naming ``name`` unless ``value`` is True or False.

    >>> flag("tail_bound", 1)
    Traceback (most recent call last):
    ...
    ValueError: tail_bound: expected True or False, got 1
    """
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}: expected True or False, got {value!r}")


def tail_bound_flag(tail_bound, opts) -> None:
    """Check ``stationary``'s ``tail_bound`` against the method's options ``opts``: a flag, and not
    with ``"given"``'s ``bound=False`` (the tail bound needs the evidence that option skips)."""
    flag("tail_bound", tail_bound)
    if tail_bound and getattr(opts, "bound", True) is False:
        raise ValueError("tail_bound: True needs the error bound's evidence, which bound=False skips; "
                         "drop one of them")


@dataclass(frozen=True)
class Tolerances:
    """Options every stationary and passage method takes.

    Attributes
    ----------
    tol : float
        Acceptance tolerance: on ``||pi Q||_1 / max|q_ii|`` for stationary
        laws, on the normwise backward error for passage systems.
    tail_tol : float
        Largest accepted component-wise balance error before ``TAIL_INACCURATE``; on a class of up to
        5000 states also the largest accepted relative error of the small probabilities where the balance
        error times the condition does not show it (:func:`ctmc.kernels.tail.tail_evidence`).
    error_tol : float
        Largest accepted ``error_bound`` (the proven bound on the normwise
        error of the answer, from a condition estimate) before ``INACCURATE``.
    progress : bool, optional
        Show progress with an estimate of the time left on stderr while the
        analysis runs longer than two seconds (factorisations, iterations,
        many right-hand sides): True or False; None (default) follows
        :func:`ctmc.progress.set_progress`, ``CTMC_PROGRESS``, and is on only
        when stderr is a terminal (:mod:`ctmc.progress`).
    """

    tol: float = 1e-10
    tail_tol: float = 1e-6
    error_tol: float = 1e-6
    progress: Optional[bool] = None

    def __post_init__(self):
        positive("tol", self.tol)
        positive("tail_tol", self.tail_tol)
        positive("error_tol", self.error_tol)
        if self.progress is not None and not isinstance(self.progress, (bool, np.bool_)):
            raise ValueError(f"progress: expected True, False or None, got {self.progress!r}")


@dataclass(frozen=True)
class GTHOptions(Tolerances):
    """Options of ``gth``: refuse more than ``max_states`` unknowns (dense, O(n^3))."""

    max_states: int = 5000

    def __post_init__(self):
        super().__post_init__()
        positive("max_states", self.max_states, integer=True)


@dataclass(frozen=True)
class DirectOptions(Tolerances):
    """Options of a sparse direct solve (``lu``).

    Attributes
    ----------
    ordering : str
        Fill-reducing ordering: ``"auto"`` (default: the natural state order
        when the matrix is nearly banded in it, else minimum degree; see
        :mod:`ctmc._sparse_lu`), ``"MMD_AT_PLUS_A"``, ``"COLAMD"``,
        ``"MMD_ATA"`` or ``"NATURAL"`` (the PETSc backend leaves the scipy
        names to its factor package).
    """

    ordering: str = "auto"

    def __post_init__(self):
        super().__post_init__()
        if self.ordering not in ORDERINGS:
            raise ValueError(f"ordering: expected one of {ORDERINGS}, got {self.ordering!r}")


@dataclass(frozen=True)
class KrylovSolverOptions(Tolerances):
    """Options of a Krylov solve (``gmres``, ``bicgstab``).

    Attributes
    ----------
    maxiter : int
        Iteration limit (total iterations, restarts included).
    restart : int
        GMRES restart length.
    preconditioner : {"sgs", "ilu0", "ilu", "jacobi", "none", "multilevel"}, optional
        A symmetric Gauss-Seidel sweep (on each process's block when
        distributed: no set-up, and on the benchmark gallery faster than ILU
        wherever both converge), ILU(0) on the generator's own pattern (the
        scipy backend's stationary GMRES and BiCGStab, read from ``Q``'s rows
        with the compiled kernels; elsewhere the Gauss-Seidel sweep serves and
        ``info["preconditioner"]`` says so; on the gallery it takes as many
        iterations as the sweep at 1.3-1.6x its cost: benchmarks/README.md),
        incomplete LU (scipy's ``spilu`` or PETSc's
        ILU(0)), point Jacobi, none, or an aggregation multigrid V-cycle
        (:mod:`ctmc.multigrid`; scipy backend only). Default (None): :data:`DEFAULT_PRECONDITIONER`,
        ``"sgs"`` for stationary GMRES, ``"ilu"`` for passage systems and for
        BiCGStab (``auto``'s BiCGStab takes ``"sgs"``: its breakdowns with the
        sweep on the polling chains came from a shadow residual of the pinned
        right-hand side's few entries, filled since).
    polish : int
        At most that many symmetric Gauss-Seidel sweeps after convergence,
        until the small entries balance too (``tail_tol``; 0: none): a Krylov
        method stops on a normwise residual, which leaves small probabilities
        and small passage values as noise.
    stall : int
        GMRES and BiCGStab (scipy and PETSc backends) give up when their residual has not fallen
        tenfold in that many iterations (:class:`ctmc.krylov.Stall`; 0, the default: never; ``auto``'s
        Krylov probes take :data:`ctmc.kernels.plan.BICGSTAB_STALL`). Other methods ignore it.
    """

    maxiter: int = 10_000
    restart: int = 50
    preconditioner: Optional[str] = None
    polish: int = 2000
    stall: int = 0

    def __post_init__(self):
        super().__post_init__()
        positive("maxiter", self.maxiter, integer=True)
        positive("restart", self.restart, integer=True)
        integer_in("polish", self.polish)
        integer_in("stall", self.stall)
        if self.preconditioner is not None and self.preconditioner not in PRECONDITIONERS:
            raise ValueError(f"preconditioner: expected one of {PRECONDITIONERS}, got {self.preconditioner!r}")


#: (analysis, Krylov method) -> its preconditioner when none is asked for. Stationary GMRES:
#: the Gauss-Seidel sweep (scipy's ILU was the bottleneck on the gallery, kanban t=3 58 s);
#: passage systems keep ILU, with which GMRES's own stopping test and the backward error
#: agree (with the sweep, an adjoint first passage on a 3721-state tandem took 47 s
#: against 2 s and ended inaccurate); BiCGStab breaks down with the sweep on stiff chains.
#: ``auto`` picks its own (the Gauss-Seidel sweep on many-dimensional chains).
DEFAULT_PRECONDITIONER = {("stationary", "gmres"): "sgs", ("stationary", "bicgstab"): "ilu",
                          ("passage", "gmres"): "ilu", ("passage", "bicgstab"): "ilu"}


def linear_spec(kind: str, opts, analysis: str = "stationary") -> LinearSpec:
    """The :class:`~ctmc.backends.base.LinearSpec` of a solve of ``kind`` with a method's options.

    The Krylov stopping tolerance is ``tol / 100`` of the analysis' own
    acceptance tolerance, which is then checked on the recomputed evidence.
    """
    pc = getattr(opts, "preconditioner", None) or DEFAULT_PRECONDITIONER.get((analysis, kind), "ilu")
    return LinearSpec(kind=kind, ordering=getattr(opts, "ordering", "auto"), preconditioner=pc,
                      rtol=opts.tol * 1e-2, maxiter=getattr(opts, "maxiter", 10_000),
                      restart=getattr(opts, "restart", 50), stall=getattr(opts, "stall", 0))


def make_options(analysis: str, registry: dict, method: str, options: dict):
    """Validate ``options`` of ``method`` into its frozen options class, before any work.

    Parameters
    ----------
    analysis : str
        Name for messages (``"stationary"``, ``"passage"``, ``"transient"``).
    registry : dict
        Method name -> :class:`ctmc.kernels.registry.Method` (the analysis' ``METHODS``).

    Raises
    ------
    ValueError
        For an unknown method or option (the message lists the valid ones).
    """
    if method not in registry:
        raise ValueError(f"method: unknown {analysis} method {method!r}; valid methods are {sorted(registry)}")
    cls = registry[method].options
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(options) - names
    if unknown:
        raise ValueError(f"options: {sorted(unknown)} not understood by {analysis} method {method!r}; "
                         f"valid options are {sorted(names)}")
    return cls(**options)
