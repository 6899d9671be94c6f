r"""PETSc/SLEPc backend: the primitives of :mod:`ctmc.backends.base` on a generator distributed over MPI.

The analyses themselves are written once in :mod:`ctmc.stationary`,
:mod:`ctmc.passage` and :mod:`ctmc.transient`; this package provides the
distributed data, the collectives and the heavy linear algebra they run on.

Distribution
------------
With :math:`P` MPI processes the states :math:`0..n-1` (the sorted-code
numbering of :meth:`ctmc.Model.build`) are split into contiguous blocks, the
first :math:`n \bmod P` blocks one state longer (PETSc's default split).
Process :math:`p` owns the rows of its block: the off-diagonal rates
:math:`R` (a PETSc ``MPIAIJ`` matrix, with a stored diagonal slot) and the exit
rates :math:`q_i = -Q_{ii}`, so :math:`Q = R - \operatorname{diag}(q)`.
:class:`DistributedChain` builds them

* from a :class:`~ctmc.Model` (:meth:`DistributedChain.from_model`): every
  process explores the state *codes* (:meth:`ctmc.Model.state_space`, small)
  and assembles only its own rows (:meth:`ctmc.Model.generator_rows`), so no
  process ever holds the whole generator;
* from a :class:`~ctmc.CTMC` (:meth:`DistributedChain.from_chain`), taking the
  rows of ``chain.Q`` that the process owns. This is what
  ``chain.stationary(backend="petsc")`` and the other ``CTMC`` methods do,
  through :func:`operator`, which keeps the distributed copy beside the chain
  (not on it) for as long as the chain lives and its ``Q`` is unchanged.

A :class:`DistributedChain` has the analyses of a ``CTMC`` as methods
(``dc.stationary("lu")``, ``dc.hitting_times(target)``, ...), on this backend
only. Indices above the 32-bit ``PetscInt`` range (states, or stored entries
of one process) raise a ValueError saying which PETSc build to use, instead
of wrapping around.

Linear algebra
--------------
``"lu"`` is ``KSPPREONLY`` + ``PCLU`` with MUMPS (else SuperLU_dist, else
PETSc's own sequential LU on one process; ``info["factor_package"]`` says
which). ``"gmres"`` and ``"bicgstab"`` are PETSc's GMRES (preconditioned on
the right, so PETSc monitors the unpreconditioned residual) and BiCGStab,
with local symmetric SOR on each process's block (``"sgs"``, the default),
block Jacobi and ILU(0) on each process's block (``"ilu"``), point Jacobi or
nothing. Eigenvectors use SLEPc's Krylov-Schur on the uniformised
:math:`P^T = I + Q^T/\Lambda`, :math:`\Lambda = 1.02 \max_i q_i` (no
factorisation); matrix exponentials SLEPc's MFN. The converged reason of
KSP/EPS/MFN is mapped to a :class:`~ctmc.results.Status`; PETSc's own name
is kept in the result's ``message`` (and ``info["reason"]`` of transient
results).

Options database
----------------
Every PETSc object gets the prefix ``ctmc_``: command-line options such as
``-ctmc_ksp_type fgmres -ctmc_pc_type asm -ctmc_ksp_monitor`` or
``-ctmc_eps_ncv 64`` override the defaults, and
``backend_options={"petsc_options": {"ksp_type": "bcgs"}}`` does the same from
Python for one call (the prefix is added for you; the ambient values are put
back afterwards). Options are applied after ctmc's defaults, so any PETSc
option wins.

Results (the ``gather`` setting)
--------------------------------
``backend_options={"gather": "all"}`` returns full vectors on every process,
``"root"`` only on rank 0 (other ranks get empty arrays; scalars such as the
status and residual are global everywhere), ``"none"`` keeps each process's
own block (``info["rows"] = (start, stop)``). Chains given as a ``CTMC``
default to ``"all"``, distributed chains to ``"root"``.

Reachability
------------
The sets of first-passage problems (states that can reach a target, states
reaching it almost surely) and the closed classes are found by a distributed
sweep (:meth:`DistributedChain.reach`): a breadth-first closure inside each
process's block alternates with one matrix-vector product that carries the
marks across blocks, so the number of sweeps is the number of block
crossings of the longest path, not its length.
"""
from __future__ import annotations

from ._env import ABORT_ENV, INSTALL_HELP, abort_job, load_petsc, load_slepc, mpi_abort
from .distributed import DistributedChain, operator
from .options import BACKEND_OPTIONS, PRECONDITIONERS, PREFIX, check_backend_options

__all__ = ["DistributedChain", "operator", "BACKEND_OPTIONS", "PRECONDITIONERS", "check_backend_options",
           "PREFIX", "INSTALL_HELP", "load_petsc", "load_slepc", "mpi_abort", "abort_job", "ABORT_ENV",
           "available", "slepc_available"]


def available() -> bool:
    """True when petsc4py can be imported (no exception, no side effect on failure)."""
    try:
        load_petsc()
    except ImportError:
        return False
    return True


def slepc_available() -> bool:
    """True when slepc4py can be imported too (eigenvector and matrix-exponential solvers)."""
    try:
        load_slepc()
    except ImportError:
        return False
    return True
