r"""PETSc/SLEPc backend: the analyses of ctmc on a generator distributed over MPI.

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
  ``chain.stationary(backend="petsc")`` and the other ``CTMC`` methods do.

Stationary distribution (the registry :data:`STATIONARY_METHODS`)
-----------------------------------------------------------------
All methods except ``eps`` solve the *pinned* system: with :math:`x_p = 1`
for a pin state :math:`p`, row and column :math:`p` of :math:`Q^T` are
replaced by the unit vector, giving the nonsingular system

.. math::

    (Q^T)_{-p,-p}\, x_{-p} = -(Q_{p,-p})^T, \qquad x_p = 1,

solved in place by ``MatZeroRowsColumns`` (same numbering on every process).
States outside the closed class are pinned to 0 the same way.

``lu``
    Direct solve, ``KSPPREONLY`` + ``PCLU`` with MUMPS (else SuperLU_dist,
    else PETSc's own sequential LU on one process); ``info["factor_package"]``
    says which.
``gmres``, ``bicgstab``
    Krylov solvers with block Jacobi and ILU(0) on each process's block
    (``pc="asm"`` for an additive Schwarz overlap instead); GMRES is
    preconditioned on the right, so PETSc monitors the unpreconditioned residual.
``eps``
    SLEPc eigensolver (Krylov-Schur) for the eigenvalue 1 of the uniformised
    :math:`P^T = I + Q^T/\Lambda`, :math:`\Lambda = 1.02 \max_i q_i`: the left
    null vector of :math:`Q` without any factorisation.
``auto``
    ``lu`` up to :data:`AUTO_DIRECT` states, else ``gmres``; falls back to
    ``gmres`` when the factorisation fails.

Options database
----------------
Every PETSc object gets the prefix ``ctmc_``: command-line options such as
``-ctmc_ksp_type fgmres -ctmc_pc_type asm -ctmc_ksp_monitor`` or
``-ctmc_eps_ncv 64`` override the defaults, and ``petsc_options={"ksp_type":
"bcgs"}`` does the same from Python (the prefix is added for you). Options are
applied after ctmc's defaults, so any PETSc option wins.

Evidence
--------
The converged reason of KSP/EPS/MFN is mapped to a
:class:`~ctmc.results.Status`, and the residual is always recomputed by ctmc
from :math:`R` and :math:`q` with the same definitions as the scipy backend
(``||pi Q||_1`` and the component-wise ``balance_error`` for stationary laws,
normwise backward errors, balance checks, a condition estimate (itself a
solve whose status counts) and probability invariants for hitting problems,
the mass defect for transient laws). ``info["reason"]`` keeps PETSc's own reason.

Results
-------
``gather="all"`` returns full vectors on every process, ``gather="root"``
only on rank 0 (other ranks get empty arrays; scalars such as the status and
residual are global everywhere), ``gather="none"`` keeps each process's own
block (``info["rows"] = (start, stop)``). Chains given as a ``CTMC`` default
to ``"all"``, distributed chains to ``"root"``.

Hitting times and first passage
-------------------------------
The sets of :mod:`ctmc.passage` (states that can reach the target, states
reaching it almost surely) are found by a distributed reachability sweep:
a breadth-first closure inside each process's block alternates with one
matrix-vector product that carries the marks across blocks, so the number of
sweeps is the number of block crossings of the longest path, not its length.
The systems :math:`(sI - Q_{XX}) x = b` are solved in the full numbering,
rows and columns outside :math:`X` replaced by the identity. The joint
distribution function of first passage and transient laws use uniformisation
on PETSc vectors; ``method="expm"`` for transient laws uses SLEPc's MFN
(Krylov approximation of :math:`e^{tQ^T} p_0`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import resource
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from ..passage import _as_points
from ..stationary import NEGATIVE_TOL, next_pin
from ..transient import check_transient_args, uniformize_operator
from ..results import (FirstPassageResult, HittingResult, LaplaceResult, ReducibleChainError,
                       StationaryResult, Status, TransientResult)
from ._petsc_env import INSTALL_HELP, load_petsc, load_slepc

__all__ = ["DistributedChain", "STATIONARY_METHODS", "AUTO_DIRECT", "PREFIX", "stationary",
           "hitting_times", "hitting_laplace", "first_passage", "transient", "available",
           "slepc_available", "INSTALL_HELP"]

#: options-database prefix of every PETSc/SLEPc object made by this backend
PREFIX = "ctmc_"
#: ``method="auto"`` factorises up to this many states, else uses GMRES
AUTO_DIRECT = 500_000
_TINY = np.finfo(float).tiny
_EPS = np.finfo(float).eps
_GATHER = ("all", "root", "none")


def available() -> bool:
    """True when petsc4py can be imported (no exception, no side effect on failure)."""
    try:
        load_petsc()
    except ImportError:
        return False
    return True


def slepc_available() -> bool:
    """True when slepc4py can be imported too (``method="eps"``, transient ``method="expm"``)."""
    try:
        load_slepc()
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------
# options
# --------------------------------------------------------------------------
def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value > 0:
        raise ValueError(f"{name}: expected a positive number, got {value!r}")


def _check_petsc_options(opts):
    if opts is None:
        return
    if not isinstance(opts, dict) or not all(isinstance(k, str) for k in opts):
        raise ValueError("petsc_options: expected a dict {option name: value}, e.g. {'ksp_type': 'bcgs'}")


@dataclass(frozen=True)
class StationaryOptions:
    """Options of the PETSc stationary solvers.

    Attributes
    ----------
    tol : float
        Accept when ``||pi Q||_1 / max|q_ii| <= tol`` (KSP ``rtol`` and EPS
        tolerance too).
    tail_tol : float
        Flag :attr:`~ctmc.results.Status.TAIL_INACCURATE` above this balance error.
    maxiter : int
        Iteration limit of KSP/EPS.
    restart : int
        GMRES restart length.
    pc : {"bjacobi", "asm", "none"}
        Preconditioner of the Krylov methods (ILU(0) on each block).
    pin : int, optional
        Pinned state (default: the initial state, else the slowest exit).
    repin : float
        Solve again pinned at the most probable state when ``pi[pin] < repin * max(pi)``.
    petsc_options : dict, optional
        PETSc options, names without the ``-ctmc_`` prefix.
    gather : {"all", "root", "none"}, optional
        Where the vector goes (default: "all" for a CTMC, "root" for a DistributedChain).
    """

    tol: float = 1e-10
    tail_tol: float = 1e-6
    maxiter: int = 10_000
    restart: int = 30
    pc: str = "bjacobi"
    pin: Optional[int] = None
    repin: float = 1e-3
    petsc_options: Optional[dict] = None
    gather: Optional[str] = None

    def __post_init__(self):
        for k in ("tol", "tail_tol", "maxiter", "restart", "repin"):
            _positive(k, getattr(self, k))
        if self.pc not in ("bjacobi", "asm", "none"):
            raise ValueError(f"pc: expected 'bjacobi', 'asm' or 'none', got {self.pc!r}")
        if self.pin is not None and (isinstance(self.pin, bool) or not isinstance(self.pin, (int, np.integer))
                                     or self.pin < 0):
            raise ValueError(f"pin: expected a state index >= 0, got {self.pin!r}")
        _check_petsc_options(self.petsc_options)
        if self.gather is not None and self.gather not in _GATHER:
            raise ValueError(f"gather: expected one of {_GATHER}, got {self.gather!r}")


@dataclass(frozen=True)
class PassageOptions:
    """Options of the PETSc hitting-time, first-passage and transient solvers.

    Attributes
    ----------
    solver : {"auto", "lu", "gmres", "bicgstab"}
        Linear solver (``"auto"`` = ``"lu"``: MUMPS).
    tol, tail_tol : float
        Backward-error and balance tolerances (as in :mod:`ctmc.passage`).
    maxiter : int
        KSP iteration limit.
    eps : float
        Uniformisation: neglected Poisson mass per time point.
    max_terms : int
        Refuse uniformisation needing more steps than this.
    petsc_options : dict, optional
    gather : {"all", "root", "none"}, optional
    """

    solver: str = "auto"
    tol: float = 1e-10
    tail_tol: float = 1e-6
    maxiter: int = 10_000
    eps: float = 1e-13
    max_terms: int = 10_000_000
    petsc_options: Optional[dict] = None
    gather: Optional[str] = None

    def __post_init__(self):
        if self.solver not in ("auto", "lu", "gmres", "bicgstab"):
            raise ValueError(f"solver: expected 'auto', 'lu', 'gmres' or 'bicgstab', got {self.solver!r}")
        for k in ("tol", "tail_tol", "maxiter", "max_terms"):
            _positive(k, getattr(self, k))
        if not (isinstance(self.eps, float) and 0 < self.eps < 1):
            raise ValueError(f"eps: expected 0 < eps < 1, got {self.eps!r}")
        _check_petsc_options(self.petsc_options)
        if self.gather is not None and self.gather not in _GATHER:
            raise ValueError(f"gather: expected one of {_GATHER}, got {self.gather!r}")


def _make(cls, options):
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(options) - names
    if unknown:
        raise ValueError(f"options: {sorted(unknown)} not understood by the petsc backend; "
                         f"valid options are {sorted(names)}")
    return cls(**options)


_ABSENT = object()


@contextlib.contextmanager
def _options(petsc_options):
    """Insert ``petsc_options`` under the ctmc prefix for the duration of a setFromOptions.

    Options already in the database (command line, ``PETSC_OPTIONS``) are
    overridden for this call only: their old values are put back afterwards.
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


# --------------------------------------------------------------------------
# converged reasons -> Status
# --------------------------------------------------------------------------
def _ksp_status(reason: int):
    PETSc = load_petsc()
    names = {v: k for k, v in vars(PETSc.KSP.ConvergedReason).items() if not k.startswith("_")
             and k not in ("ITERATING", "CONVERGED_ITERATING")}
    name = names.get(int(reason), str(reason))
    if reason > 0:
        return Status.SUCCESS, name
    if reason == PETSc.KSP.ConvergedReason.DIVERGED_MAX_IT:
        return Status.MAX_ITERATIONS, name
    return Status.BREAKDOWN, name


def _slepc_status(cls, reason: int):
    names = {v: k for k, v in vars(cls.ConvergedReason).items() if not k.startswith("_")
             and k not in ("ITERATING", "CONVERGED_ITERATING")}
    name = names.get(int(reason), str(reason))
    if reason > 0:
        return Status.SUCCESS, name
    if reason == cls.ConvergedReason.DIVERGED_ITS:
        return Status.MAX_ITERATIONS, name
    return Status.BREAKDOWN, name


# --------------------------------------------------------------------------
# the distributed chain
# --------------------------------------------------------------------------
def _split(n, size, rank):
    base, extra = divmod(n, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


_ROW_CHUNK = 1 << 18
#: largest index of the PETSc build (None: that of PETSc.IntType; a smaller value in tests)
_INDEX_MAX = None


def _index_max(IT):
    return int(np.iinfo(IT).max) if _INDEX_MAX is None else int(_INDEX_MAX)


def _too_many(what, count, limit, IT):
    return ValueError(f"{what}: {count} exceeds the largest index {limit} of this PETSc build "
                      f"({np.dtype(IT).itemsize * 8}-bit PetscInt); use a PETSc configured with "
                      "--with-64-bit-indices (Debian: python3-petsc4py-64-real with PETSC_DIR set to "
                      "its /usr/lib/petscdir/petsc64-* build), or more processes "
                      "when only one process's share is too large")


def _r_block(blk, a):
    """Rows of ``Q`` (CSR, first row ``a``) -> R rows with a stored diagonal slot, and exit rates.

    Returns ``(entries per row, column indices, values, exit rates)``.
    """
    blk = sp.csr_matrix(blk, dtype=float)
    m = blk.shape[0]
    coo = blk.tocoo()
    diag = coo.col == coo.row + a
    exit_rates = np.zeros(m)
    np.add.at(exit_rates, coo.row[diag], -coo.data[diag])
    r = np.concatenate([coo.row[~diag], np.arange(m)])
    c = np.concatenate([coo.col[~diag], np.arange(a, a + m)])
    v = np.concatenate([coo.data[~diag], np.zeros(m)])
    loc = sp.csr_matrix((v, (r, c)), shape=blk.shape)
    loc.sum_duplicates()
    loc.sort_indices()
    if loc.data.size and not (np.all(np.isfinite(loc.data)) and loc.data.min() >= 0):
        raise ValueError("rows: off-diagonal rates must be finite and >= 0")
    return np.diff(loc.indptr), loc.indices, loc.data, exit_rates


class DistributedChain:
    """A CTMC generator distributed by blocks of rows over MPI processes.

    Parameters
    ----------
    rows : scipy.sparse.csr_matrix, shape (stop - start, n), or callable
        This process's rows of ``Q`` (global column numbers, diagonal
        included), or a function ``rows(a, b)`` returning rows ``a:b`` of ``Q``,
        called on blocks of 262144 rows so that only the compact form of the
        owned rows is ever held (then ``n_states`` is required).
    start : int
        Global index of the first row.
    states : StateTable
        The (replicated) state table, for targets given as expressions.
    initial : ndarray of int, optional
        Initial states (pin hint).
    comm : PETSc.Comm, optional
        Default ``PETSc.COMM_WORLD``.
    gather : {"all", "root", "none"}
        Default of the ``gather`` option of the analyses.
    model : Model, optional
        For :meth:`event_rate`.
    n_states : int, optional
        Number of states (with a callable ``rows``).

    Attributes
    ----------
    R : PETSc.Mat
        Off-diagonal rates (``MPIAIJ``, diagonal slot stored as 0).
    exit_rates : ndarray
        ``q_i = -Q_ii`` for the owned rows.
    start, stop, n_states, rank, size
    """

    def __init__(self, rows, start, states=None, initial=None, comm=None, gather="root", model=None,
                 n_states=None):
        PETSc = load_petsc()
        self.comm = comm if comm is not None else PETSc.COMM_WORLD
        self.rank, self.size = self.comm.getRank(), self.comm.getSize()
        if callable(rows):
            if n_states is None:
                raise ValueError("n_states: required when rows is a function of (start, stop)")
            n, m = int(n_states), _split(int(n_states), self.size, self.rank)[1] - int(start)
            source = rows
        else:
            mat = sp.csr_matrix(rows, dtype=float)
            m, n = mat.shape
            source = (lambda a, b: mat[a - int(start):b - int(start)])
        self.n_states, self.start, self.stop = n, int(start), int(start) + m
        if _split(n, self.size, self.rank) != (self.start, self.stop):
            raise ValueError(f"rows: process {self.rank} must own rows {_split(n, self.size, self.rank)}, "
                             f"got {(self.start, self.stop)}")
        if gather not in _GATHER:
            raise ValueError(f"gather: expected one of {_GATHER}, got {gather!r}")
        self.gather = gather
        self.states, self.initial, self.model = states, initial, model
        # assemble block by block: only the compact CSR of the owned rows is kept
        IT = PETSc.IntType
        limit = _index_max(IT)
        if n > limit:
            raise _too_many("n_states", n, limit, IT)
        counts, cols, vals, exits = [], [], [], []
        total = 0  # running number of stored entries (Python int: no wrap-around)
        for a in range(self.start, self.stop, _ROW_CHUNK):
            b = min(self.stop, a + _ROW_CHUNK)
            c, ind, dat, ex = _r_block(source(a, b), a)
            total += int(np.sum(c, dtype=np.int64))
            if total > limit:  # the row offsets would wrap around silently
                raise _too_many(f"rows: stored entries of process {self.rank}", total, limit, IT)
            counts.append(c), cols.append(ind.astype(IT)), vals.append(dat), exits.append(ex)
        cat = (lambda xs, dt: np.concatenate(xs) if xs else np.empty(0, dt))
        indptr = np.zeros(m + 1, dtype=IT)
        np.cumsum(cat(counts, IT), out=indptr[1:])
        indices, data = cat(cols, IT), cat(vals, float)
        del cols, vals
        self.exit_rates = cat(exits, float)
        self._nnz = int(indices.size)
        self.R = PETSc.Mat().createAIJ(size=((m, n), (m, n)), csr=(indptr, indices, data), comm=self.comm)
        self.R.assemble()
        del indptr, indices, data
        self.qmax = self.allmax(self.exit_rates.max() if m else 0.0)
        self.sweeps = 0  # reachability sweeps run so far (each: block BFS + one mat-vec)

    # construction ---------------------------------------------------------
    @classmethod
    def from_model(cls, model, initial, *, comm=None, max_states=None, progress=None, gather="root"):
        """Explore ``model`` (state codes only) and assemble this process's rows.

        Every process computes the same sorted state table; process ``p``
        then evaluates the events of its block only.
        """
        PETSc = load_petsc()
        comm = comm if comm is not None else PETSc.COMM_WORLD
        t0 = time.perf_counter()
        states = model.state_space(initial=initial, max_states=max_states, progress=progress)
        n = len(states)
        start = _split(n, comm.getSize(), comm.getRank())[0]
        init = np.searchsorted(states._codes, model._initial_codes(initial, states._layout))
        dc = cls(lambda a, b: model.generator_rows(states, a, b), start, states=states, initial=init,
                 comm=comm, gather=gather, model=model, n_states=n)
        dc.build_seconds = dc.allmax(time.perf_counter() - t0)
        return dc

    @classmethod
    def from_chain(cls, chain, *, comm=None, gather="all"):
        """Distribute a (replicated) :class:`~ctmc.CTMC`: each process keeps its rows."""
        PETSc = load_petsc()
        comm = comm if comm is not None else PETSc.COMM_WORLD
        start, stop = _split(chain.n_states, comm.getSize(), comm.getRank())
        return cls(lambda a, b: chain.Q[a:b], start, states=chain.states, initial=chain.initial, comm=comm,
                   gather=gather, model=chain._model, n_states=chain.n_states)

    def __repr__(self):
        return (f"<DistributedChain: {self.n_states} states on {self.size} processes, "
                f"rows {self.start}:{self.stop} here>")

    # small collective helpers ---------------------------------------------
    def vec(self, local=None):
        """A PETSc vector with this chain's layout (filled with ``local`` if given)."""
        PETSc = load_petsc()
        v = PETSc.Vec().createMPI((self.stop - self.start, self.n_states), comm=self.comm)
        if local is not None:
            v.getArray()[:] = local
        else:
            v.set(0.0)
        return v

    def allgather(self, values) -> np.ndarray:
        """Stack a same-sized 1-D array from every process: shape ``(size, k)``."""
        PETSc = load_petsc()
        a = np.atleast_1d(np.asarray(values, dtype=float)).ravel()
        v = PETSc.Vec().createMPI((a.size, a.size * self.size), comm=self.comm)
        v.getArray()[:] = a
        sc, full = PETSc.Scatter.toAll(v)
        sc.scatter(v, full, PETSc.InsertMode.INSERT, PETSc.ScatterMode.FORWARD)
        out = full.getArray().copy().reshape(self.size, a.size)
        sc.destroy(), full.destroy(), v.destroy()
        return out

    def allsum(self, x):
        """Sum over processes (element-wise for an array).

        Implemented with :meth:`allgather`: every process holds ``size * len(x)``
        numbers for a moment, so use it for short arrays (per-source results),
        not for vectors of the chain's size.
        """
        return self.allgather(x).sum(axis=0) if np.ndim(x) else float(self.allgather(x).sum())

    def allmax(self, x):
        return float(self.allgather(x).max())

    def gather_vector(self, local: np.ndarray, mode: str) -> np.ndarray:
        """Full vector on every process (``all``), on rank 0 (``root``) or the own block (``none``)."""
        PETSc = load_petsc()
        if mode == "none":
            return np.asarray(local)
        v = self.vec(np.asarray(local, dtype=float))
        sc, full = (PETSc.Scatter.toAll if mode == "all" else PETSc.Scatter.toZero)(v)
        sc.scatter(v, full, PETSc.InsertMode.INSERT, PETSc.ScatterMode.FORWARD)
        out = full.getArray().copy()
        sc.destroy(), full.destroy(), v.destroy()
        return out.astype(np.asarray(local).dtype)

    def mask(self, spec, name="target") -> np.ndarray:
        """Owned part of a set of states given as mask, indices, dict, expression or callable."""
        from ..expr import Expr
        n = self.n_states
        if isinstance(spec, np.ndarray) and spec.dtype == bool and spec.shape == (n,):
            return spec[self.start:self.stop].copy()
        if isinstance(spec, (dict, Expr)) or callable(spec):
            if self.states is None:
                raise ValueError(f"{name}: this chain has no state table; give a mask or indices")
            if isinstance(spec, dict):
                full = np.zeros(n, dtype=bool)
                full[self.states.index(**spec)] = True
            else:
                env = {k: v[self.start:self.stop] for k, v in self.states.as_dict().items()}
                with np.errstate(all="ignore"):
                    val = spec.evaluate(env) if isinstance(spec, Expr) else spec(env)
                return np.broadcast_to(np.asarray(val, dtype=bool), (self.stop - self.start,)).copy()
        else:
            a = np.asarray(spec)
            if a.dtype == bool:
                raise ValueError(f"{name}: boolean mask must have shape ({n},), got {a.shape}")
            if a.dtype.kind not in "iu":
                raise ValueError(f"{name}: expected a mask, expression, callable, dict or indices, got {a.dtype}")
            a = a.ravel().astype(np.int64)
            if a.size and (a.min() < 0 or a.max() >= n):
                raise ValueError(f"{name}: state indices must lie in [0, {n - 1}]")
            full = np.zeros(n, dtype=bool)
            full[a] = True
        return np.array(full[self.start:self.stop], dtype=bool)

    def memory(self) -> dict:
        """Peak resident memory (MiB) of every process and the matrix entries held here."""
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        return {"peak_mib_per_rank": self.allgather(peak).ravel().tolist(), "local_nnz": self._nnz}

    # reachability -----------------------------------------------------------
    def can_reach(self, seeds, within=None, forward=False) -> np.ndarray:
        """Owned part of the set of states that can reach ``seeds`` (or, with
        ``forward``, that can be reached from them), through states of ``within``.

        Closure inside the block by breadth-first search, then one product with
        ``R`` (or ``R^T``) carries the marks across blocks; repeated until no
        process marks a new state.
        """
        m = self.stop - self.start
        ip, ind, dat = self.R.getValuesCSR()  # owned rows (a temporary copy)
        loc = sp.csr_matrix((dat, ind, ip), shape=(m, self.n_states))
        del ip, ind, dat
        inner = (loc.indices >= self.start) & (loc.indices < self.stop)
        rows = np.repeat(np.arange(m), np.diff(loc.indptr))
        keep = inner & (loc.data > 0)
        Gi = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.int8),
                            (rows[keep], loc.indices[keep] - self.start)), shape=(m, m))
        allowed = np.ones(m, dtype=bool) if within is None else np.asarray(within, dtype=bool)
        # BFS graph (row = from): reversed edges when marking the states that can reach
        G = ((Gi if forward else Gi.T) @ sp.diags(allowed.astype(np.int8), dtype=np.int8)).tocsr()
        marked = np.asarray(seeds, dtype=bool).copy()
        x, y = self.vec(), self.vec()
        try:
            while True:
                self.sweeps += 1
                marked = self._closure(G, marked)
                x.getArray()[:] = marked
                (self.R.multTranspose if forward else self.R.mult)(x, y)
                new = (y.getArray() > 0) & allowed & ~marked
                if self.allsum(float(new.sum())) == 0:
                    return marked
                marked |= new
        finally:
            x.destroy(), y.destroy()

    @staticmethod
    def _closure(G, marked):
        """Add every state reached from ``marked`` along ``G`` (rows = from)."""
        m = G.shape[0]
        if not marked.any() or m == 0:
            return marked
        seeds = np.flatnonzero(marked)
        root = sp.csr_matrix((np.ones(seeds.size, dtype=np.int8),
                              (np.zeros(seeds.size, dtype=np.int64), seeds)), shape=(1, m + 1))
        B = sp.vstack([sp.hstack([G, sp.csr_matrix((m, 1), dtype=np.int8)]), root]).tocsr()
        order = breadth_first_order(B, m, directed=True, return_predecessors=False)
        out = marked.copy()
        out[order[order < m]] = True
        return out


# --------------------------------------------------------------------------
# linear solves
# --------------------------------------------------------------------------
def _factor_package(PETSc, size):
    for pkg in ("mumps", "superlu_dist"):
        if PETSc.Sys.hasExternalPackage(pkg):
            return pkg
    if size == 1:
        return "petsc"
    raise RuntimeError("no parallel direct solver (MUMPS or SuperLU_dist) in this PETSc build; "
                       "use method='gmres'")


def _ksp(dc, A, kind, opts, extra_info):
    """A configured KSP for ``A`` (``kind``: lu, gmres or bicgstab)."""
    PETSc = load_petsc()
    ksp = PETSc.KSP().create(comm=dc.comm)
    ksp.setOperators(A)
    ksp.setOptionsPrefix(PREFIX)
    pc = ksp.getPC()
    if kind == "lu":
        pkg = _factor_package(PETSc, dc.size)
        ksp.setType("preonly")
        pc.setType("lu")
        pc.setFactorSolverType(pkg)
        extra_info["factor_package"] = pkg
    else:
        ksp.setType({"gmres": "gmres", "bicgstab": "bcgs"}[kind])
        pctype = getattr(opts, "pc", "bjacobi")
        pc.setType(pctype)
        # right preconditioning: GMRES monitors the unpreconditioned residual
        # (BiCGStab breaks down more often on the right)
        if kind == "gmres":
            ksp.setPCSide(PETSc.PC.Side.RIGHT)
        if kind == "gmres":
            ksp.setGMRESRestart(getattr(opts, "restart", 30))
        ksp.setTolerances(rtol=opts.tol * 1e-2, atol=0.0, max_it=int(opts.maxiter))
        extra_info["preconditioner"] = pctype
    with _options(opts.petsc_options):
        ksp.setFromOptions()
        # factorisations (MUMPS) and block solvers (sub_ options) read their
        # options at set-up: do it while the per-call options are in place
        try:
            ksp.setUp()
        except PETSc.Error:
            pass  # raised again, and mapped to a status, by the solve
    if kind == "lu":
        extra_info["factor_package"] = pc.getFactorSolverType()
    return ksp


def _solve(ksp, b, x, transpose=False):
    """Run the KSP; return (status, reason name, iterations)."""
    PETSc = load_petsc()
    try:
        (ksp.solveTranspose if transpose else ksp.solve)(b, x)
    except PETSc.Error as exc:
        return Status.BREAKDOWN, f"PETSc error {exc}", 0
    st, name = _ksp_status(ksp.getConvergedReason())
    return st, name, int(ksp.getIterationNumber())


# --------------------------------------------------------------------------
# stationary
# --------------------------------------------------------------------------
def _transposed_generator(dc):
    """``Q^T`` as a new PETSc matrix."""
    PETSc = load_petsc()
    A = dc.R.transpose(PETSc.Mat())
    d = dc.vec(-dc.exit_rates)
    A.setDiagonal(d)
    return A


def _pin_choice(dc, opts, support):
    if opts.pin is not None:
        if opts.pin >= dc.n_states:
            raise ValueError(f"pin: state index must be < {dc.n_states}, got {opts.pin}")
        return int(opts.pin)
    if dc.initial is not None and len(dc.initial):
        cand = int(dc.initial[0])
        own = dc.start <= cand < dc.stop
        ok = dc.allsum(float(own and support[cand - dc.start]))
        if ok > 0:
            return cand
    return _slowest_exit(dc, support)


def _slowest_exit(dc, support):
    """Global index of the supported state with the smallest exit rate."""
    q = np.where(support, dc.exit_rates, np.inf)
    k = int(np.argmin(q)) if q.size else 0
    best = q[k] if q.size else np.inf
    table = dc.allgather([best, dc.start + k])
    return int(table[int(np.argmin(table[:, 0])), 1])


def _stationary_pinned(dc, kind, opts, pin, support, info):
    """Solve the pinned system; returns (x local, status, reason, iterations)."""
    PETSc = load_petsc()
    A = _transposed_generator(dc)
    x = dc.vec()
    b = dc.vec()
    zero = np.flatnonzero(~support) + dc.start
    if dc.start <= pin < dc.stop:
        x.getArray()[pin - dc.start] = 1.0
        zero = np.append(zero, pin)
    A.zeroRowsColumns(zero.astype(PETSc.IntType), 1.0, x, b)
    ksp = _ksp(dc, A, kind, opts, info)
    x.set(0.0)
    status, reason, its = _solve(ksp, b, x)
    out = x.getArray().copy()
    ksp.destroy(), A.destroy(), x.destroy(), b.destroy()
    return out, status, reason, its


def _stationary_eps(dc, opts, pin, support, info):
    SLEPc = load_slepc()
    lam = 1.02 * dc.qmax
    A = _transposed_generator(dc)
    A.scale(1.0 / lam)
    A.shift(1.0)
    zero = (np.flatnonzero(~support) + dc.start).astype(load_petsc().IntType)
    if dc.allsum(float(zero.size)) > 0:
        A.zeroRowsColumns(zero, 0.0)
    eps = SLEPc.EPS().create(comm=dc.comm)
    eps.setOperators(A)
    eps.setProblemType(SLEPc.EPS.ProblemType.NHEP)
    eps.setWhichEigenpairs(SLEPc.EPS.Which.LARGEST_REAL)
    eps.setDimensions(nev=1)
    eps.setTolerances(tol=opts.tol * 1e-2, max_it=int(opts.maxiter))
    eps.setOptionsPrefix(PREFIX)
    v0 = dc.vec(support / max(dc.allsum(float(support.sum())), 1.0))
    eps.setInitialSpace([v0])
    with _options(opts.petsc_options):
        eps.setFromOptions()
    eps.solve()
    status, reason = _slepc_status(SLEPc.EPS, eps.getConvergedReason())
    its = int(eps.getIterationNumber())
    info.update(uniformization_rate=lam, eps_type=eps.getType())
    if eps.getConverged() < 1:
        out = None
        if status is Status.SUCCESS:
            status = Status.BREAKDOWN
    else:
        vr = dc.vec()
        val = eps.getEigenpair(0, vr)
        info["eigenvalue"] = complex(val)
        out = vr.getArray().copy()
        sign = np.sign(dc.allsum(float(out.sum()))) or 1.0
        out = out * sign  # negative entries are left to the common check (clipped_negative)
        vr.destroy()
    eps.destroy(), A.destroy(), v0.destroy()
    return out, status, reason, its


#: stationary methods of the PETSc backend (``auto`` is resolved by :func:`stationary`)
STATIONARY_METHODS = {
    "lu": lambda dc, o, p, s, i: _stationary_pinned(dc, "lu", o, p, s, i),
    "gmres": lambda dc, o, p, s, i: _stationary_pinned(dc, "gmres", o, p, s, i),
    "bicgstab": lambda dc, o, p, s, i: _stationary_pinned(dc, "bicgstab", o, p, s, i),
    "eps": _stationary_eps,
}


def _stationary_evidence(dc, pi):
    """Global residual ``||pi Q||_1``, balance error and underflow count (owned part of pi)."""
    v = dc.vec(pi)
    y = dc.vec()
    dc.R.multTranspose(v, y)
    r = y.getArray() - dc.exit_rates * pi
    out = pi * dc.exit_rates
    ok = (pi >= _TINY) & (out > 0)
    bal = float(np.max(np.abs(r[ok]) / out[ok])) if ok.any() else 0.0
    under = float(np.count_nonzero(((pi < _TINY) & (pi > 0)) | ((pi == 0) & (r != 0))))
    # zeros where the inflow implies a representable probability: lost, not underflowed
    with np.errstate(divide="ignore", invalid="ignore"):
        lost = float(np.count_nonzero((pi == 0) & (y.getArray() / dc.exit_rates >= _TINY)))
    s = dc.allgather([np.abs(r).sum(), under, lost])
    v.destroy(), y.destroy()
    return float(s[:, 0].sum()), dc.allmax(bal), int(s[:, 1].sum()), int(s[:, 2].sum())


def _support(dc, pin_opts):
    """The closed class to solve on: (support mask, pin) or raise for several classes."""
    n = dc.n_states
    own = np.ones(dc.stop - dc.start, dtype=bool)
    pin = _pin_choice(dc, pin_opts, own)
    for _ in range(4):
        seed = np.zeros_like(own)
        if dc.start <= pin < dc.stop:
            seed[pin - dc.start] = True
        fwd = dc.can_reach(seed, forward=True)
        back = dc.can_reach(seed)
        if dc.allsum(float((fwd & ~back).sum())) == 0:  # pin is recurrent
            if dc.allsum(float(back.sum())) < n:
                raise ReducibleChainError(
                    "the chain has several closed classes, so its stationary distribution is not "
                    "unique (the petsc backend does not list them; use the scipy backend's "
                    "per_class=True on a chain that fits one process)", [])
            return fwd, pin
        # pin transient: move it into its forward set, at the slowest exit there
        pin = _pin_choice(dc, dataclasses.replace(pin_opts, pin=None), fwd & ~back)
    raise ReducibleChainError("could not locate a recurrent state to pin", [])


def _stationary_dc(dc, method, opts):
    if method == "auto":
        order = ["lu", "gmres"] if dc.n_states <= AUTO_DIRECT else ["gmres"]
    else:
        order = [method]
    t0 = time.perf_counter()
    support, pin = _support(dc, opts)
    t_support = time.perf_counter() - t0
    tried = []
    for k, m in enumerate(order):
        res = _stationary_once(dc, m, opts, pin, support)
        # fall back only when a method could not run (as the scipy backend):
        # an inaccurate direct solve is not improved by an iterative one
        if res[2] is not Status.BREAKDOWN or k == len(order) - 1:
            if tried:
                res[-1]["fallbacks"] = tried
            res[-1]["closed_class_seconds"] = t_support
            res[-1]["reachability_sweeps"] = dc.sweeps
            return res + (m,)
        tried.append(f"{m}: {res[2].value}")


def _stationary_once(dc, method, opts, pin, support):
    info = {"pins": [], "processes": dc.size, "prefix": PREFIX}
    fn = STATIONARY_METHODS[method]
    slowest = _slowest_exit(dc, support)
    if opts.pin is None and method in ("gmres", "bicgstab"):
        # a Krylov solve pinned on a negligible-probability state (a user's
        # initial state often is one) stalls for its whole iteration budget
        # before any re-pin can help; the slowest-exit state is a cheap guess
        # at a probable one
        pin = slowest
    for attempt in range(3):
        info["pins"].append(pin)
        try:
            x, status, reason, its = fn(dc, opts, pin, support, info)
        except RuntimeError as exc:
            x, status, reason, its = None, Status.BREAKDOWN, str(exc), 0
        info["reason"] = reason
        if x is None or method == "eps" or opts.pin is not None or attempt == 2:
            break
        top = dc.allgather([x.max() if x.size else -np.inf, dc.start + (int(np.argmax(x)) if x.size else 0)])
        j = int(np.argmax(top[:, 0]))
        xmin = -dc.allmax(-(x.min() if x.size else np.inf))
        xp = dc.allmax(x[pin - dc.start] if dc.start <= pin < dc.stop else -np.inf)
        nxt = next_pin(float(top[j, 0]), int(top[j, 1]), xmin, xp, info["pins"], slowest, opts.repin)
        if nxt is None:
            break
        pin = nxt
    if x is None:
        return None, its, status, f"{method}: {reason}", info
    tot = dc.allsum(float(x.sum()))
    if not np.isfinite(tot) or tot <= 0:
        return None, its, Status.BREAKDOWN, f"{method}: {reason}; non-finite or zero solution", info
    xmin = -dc.allmax(-(x.min() if x.size else np.inf))
    pi = x / tot
    if xmin < 0:
        pi[pi < 0] = 0.0
        info["clipped_negative"] = True
        worst = -xmin / dc.allmax(x.max() if x.size else -np.inf)
        if worst > NEGATIVE_TOL and status in (Status.SUCCESS, Status.TAIL_INACCURATE):
            # beyond round-off: a failed solve (same rule as the scipy backend)
            status = Status.INACCURATE
            reason = f"{reason}; negative probabilities (down to {-worst:.1e} of the max)"
    return pi, its, status, f"{method}: {reason}", info


def stationary(chain, method="auto", *, check=True, per_class=False, **options):
    """Stationary distribution on the PETSc backend; see :meth:`ctmc.CTMC.stationary`.

    ``chain`` is a :class:`~ctmc.CTMC` (each process keeps its rows) or a
    :class:`DistributedChain`. Methods: ``"auto"``, ``"lu"`` (MUMPS),
    ``"gmres"``, ``"bicgstab"``, ``"eps"``; options in :class:`StationaryOptions`.
    """
    if method != "auto" and method not in STATIONARY_METHODS:
        raise ValueError(f"method: unknown stationary method {method!r} for the petsc backend; valid "
                         f"methods are {['auto'] + sorted(STATIONARY_METHODS)}")
    opts = _make(StationaryOptions, options)
    if per_class:
        raise ValueError("per_class: not supported by the petsc backend; use backend='scipy'")
    t0 = time.perf_counter()
    dc = _as_dc(chain)
    if method == "eps":
        load_slepc()
    pi, its, status, msg, info, used = _stationary_dc(dc, method, opts)
    mode = opts.gather or dc.gather
    if pi is None:
        res = StationaryResult(used, "petsc", status, msg, its, float("nan"), time.perf_counter() - t0, info,
                               pi=dc.gather_vector(np.full(dc.stop - dc.start, np.nan), mode),
                               balance_error=float("inf"))
        return res.check(check)
    residual, bal, under, lost = _stationary_evidence(dc, pi)
    rel = residual / max(dc.qmax, _TINY)
    if status is Status.SUCCESS and rel > opts.tol:
        status, msg = Status.INACCURATE, f"{msg}; residual {rel:.2e} above tol {opts.tol:.1e}"
    if status is Status.SUCCESS and bal > opts.tail_tol:
        status = Status.TAIL_INACCURATE
        msg = (f"{msg}; component-wise balance error {bal:.2e} exceeds tail_tol {opts.tail_tol:.1e}: "
               "small probabilities are unreliable (use 'lu')")
    if status is Status.SUCCESS and lost:
        status = Status.TAIL_INACCURATE
        msg = (f"{msg}; {lost} states have probability 0 although their inflow is positive: small "
               "probabilities were lost (use 'lu')")
    info["zero_with_inflow"] = lost
    if status is Status.SUCCESS and info.get("clipped_negative"):
        # negative entries are noise in place of small probabilities, and the
        # zeros they leave escape the balance check
        status = Status.TAIL_INACCURATE
        msg = (f"{msg}; negative entries of the solution were set to 0: small probabilities are "
               "unreliable (use 'lu')")
    info["relative_residual"] = rel
    if mode == "none":
        info["rows"] = (dc.start, dc.stop)
    res = StationaryResult(used, "petsc", status, msg, its, residual, time.perf_counter() - t0, info,
                           pi=dc.gather_vector(pi, mode), balance_error=bal, underflow=under)
    return res.check(check)


def _as_dc(chain):
    if isinstance(chain, DistributedChain):
        return chain
    cached = getattr(chain, "_petsc_dc", None)
    if cached is None:
        cached = DistributedChain.from_chain(chain)
        chain._petsc_dc = cached
    return cached


# --------------------------------------------------------------------------
# hitting times and first passage
# --------------------------------------------------------------------------
class _Passage:
    """Sets and solvers of first-passage problems into ``target`` (owned parts)."""

    def __init__(self, dc, target, opts):
        self.dc, self.opts = dc, opts
        self.target = target
        other = ~target
        self.reach = dc.can_reach(target) & other
        stuck = other & ~self.reach
        if dc.allsum(float(stuck.sum())) > 0:
            doomed = dc.can_reach(stuck, within=other) & other
        else:
            doomed = np.zeros_like(other)
        self.finite = other & ~doomed
        self.kind = "lu" if opts.solver == "auto" else opts.solver
        self._ksp = {}
        self.info = {"processes": dc.size}

    def members(self, on):
        return self.finite if on == "finite" else self.reach

    def system(self, s, on):
        """(KSP, M) for ``sI - Q_XX`` in the full numbering (identity outside X)."""
        key = (float(s), on)
        if key not in self._ksp:
            PETSc = load_petsc()
            dc = self.dc
            M = dc.R.copy()
            M.scale(-1.0)
            M.setDiagonal(dc.vec(float(s) + dc.exit_rates))
            out = (np.flatnonzero(~self.members(on)) + dc.start).astype(PETSc.IntType)
            M.zeroRowsColumns(out, 1.0)
            self._ksp[key] = (_ksp(dc, M, self.kind, self.opts, self.info), M)
        return self._ksp[key]

    def solve(self, s, on, b_local, transpose=False):
        dc = self.dc
        ksp, _ = self.system(s, on)
        b = dc.vec(np.where(self.members(on), b_local, 0.0))
        x = dc.vec()
        status, reason, its = _solve(ksp, b, x, transpose)
        out = x.getArray().copy()
        out[~self.members(on)] = 0.0
        b.destroy(), x.destroy()
        return out, status, reason, its

    def rx(self, x_local, transpose=False):
        """``R x`` (or ``R^T x``), owned part."""
        dc = self.dc
        v, y = dc.vec(x_local), dc.vec()
        (dc.R.multTranspose if transpose else dc.R.mult)(v, y)
        out = y.getArray().copy()
        v.destroy(), y.destroy()
        return out

    def errors(self, s, on, x, b):
        """Normwise backward error and component-wise balance error (as in ctmc.passage)."""
        dc = self.dc
        X = self.members(on)
        x = np.where(X, x, 0.0)
        b = np.where(X, b, 0.0)
        d = float(s) + dc.exit_rates
        rx = self.rx(x)
        r = d * x - rx - b
        norm_rows = np.where(X, d + self.rx(X.astype(float)), 0.0)
        g = dc.allgather([np.abs(r[X]).max(initial=0.0), norm_rows.max(initial=0.0),
                          np.abs(x).max(initial=0.0), np.abs(b).max(initial=0.0)]).max(axis=0)
        den = g[1] * g[2] + g[3]
        err = float(g[0] / den) if den > 0 else 0.0
        lhs, rhs = (d * x)[X], (b + rx)[X]
        den2 = np.maximum(np.abs(lhs), np.abs(rhs))
        ok = den2 > 0
        bal = float((np.abs(lhs - rhs)[ok] / den2[ok]).max()) if ok.any() else 0.0
        return err, dc.allmax(bal)

    def condition(self, s, on):
        """``||M||_inf ||M^-1 1||_inf`` on the set (exact for an M-matrix).

        The estimate needs one more solve, ``M y = 1``; it is only a lower
        bound if that solve is inaccurate, so its status and backward error
        count: an unconverged or inaccurate solve gives ``inf`` (the answer
        cannot be vouched for). Returns ``(cond, status, reason)``.
        """
        dc = self.dc
        X = self.members(on)
        if dc.allsum(float(X.sum())) == 0:
            return 1.0, Status.SUCCESS, ""
        b = np.ones(X.size)
        ones, st, reason, _ = self.solve(s, on, b)
        err, _ = self.errors(s, on, ones, b)
        if st is not Status.SUCCESS or not err <= self.opts.tol:
            return np.inf, st if st is not Status.SUCCESS else Status.INACCURATE, (
                f"condition estimate: {reason}, backward error {err:.1e}")
        d = float(s) + dc.exit_rates
        norm_rows = np.where(X, d + self.rx(X.astype(float)), 0.0)
        cond = dc.allmax(norm_rows.max(initial=0.0)) * dc.allmax(np.abs(ones).max(initial=0.0))
        return cond, Status.SUCCESS, reason

    def close(self):
        for ksp, M in self._ksp.values():
            ksp.destroy(), M.destroy()
        self._ksp.clear()


_COND_RTOL = 1e-8


#: largest accepted defect of a probability invariant (mass of a first-passage
#: row, E[exp(-0 T)] = P(reach)) before the answer is called inaccurate
_MASS_TOL = 1e-6


def _mass_defect(dc, values, sure):
    """Largest violation of ``0 <= values <= 1`` and of ``values == 1`` where ``sure`` (all ranks)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return dc.allmax(0.0)
    out = np.maximum(np.maximum(-values, values - 1.0), 0.0)
    out = np.where(sure, np.abs(values - 1.0), out)
    d = float(out.max())
    return dc.allmax(d if np.isfinite(d) else np.inf)


def _passage_status(kind, err, bal, tol, tail_tol, cond, solve_status, reason, cond_status=None,
                    cond_reason="", defect=0.0, what="probabilities"):
    msg = f"{'direct LU' if kind == 'lu' else kind} ({reason})"
    if solve_status is not Status.SUCCESS:
        return solve_status, msg
    if cond_status is not None and cond_status is not Status.SUCCESS:
        return Status.INACCURATE, (f"{msg}: the condition number could not be estimated ({cond_reason}); "
                                   "the solves cannot be vouched for (a badly conditioned system)")
    if not defect <= _MASS_TOL:
        rule = ("they must be >= 0" if what == "moments" else
                "0 <= p <= 1, total 1 where the target is reached almost surely")
        return Status.INACCURATE, f"{msg}: {what} violate their invariant ({rule}) by {defect:.1e}"
    if _EPS * cond > _COND_RTOL:
        return Status.INACCURATE, (f"{msg}: condition number about {cond:.1e}: the solve may have lost "
                                   "all digits (the target is too rare); use the scipy backend's "
                                   "solver='gth' on a smaller chain")
    if err > tol:
        return Status.INACCURATE, f"{msg}: backward error {err:.2e} above tol {tol:.1e}"
    if bal > tail_tol:
        return Status.TAIL_INACCURATE, (f"{msg}: component-wise balance error {bal:.2e} above tail_tol "
                                        f"{tail_tol:.1e}; very large or very small values are unreliable")
    return Status.SUCCESS, msg


def _worst(a, b):
    order = [Status.SUCCESS, Status.TAIL_INACCURATE, Status.INACCURATE, Status.MAX_ITERATIONS,
             Status.BREAKDOWN]
    return a if order.index(a) >= order.index(b) else b


def _local_target(dc, target, name="target"):
    loc = dc.mask(target, name)
    if dc.allsum(float(loc.sum())) == 0:
        raise ValueError(f"{name}: the set of states is empty")
    return loc


def hitting_times(chain, target, moments=1, *, reward=None, check=True, **options):
    """Moments of the hitting time of ``target``; see :meth:`ctmc.CTMC.hitting_times`.

    Options in :class:`PassageOptions` (``solver``, ``tol``, ``petsc_options``, ``gather``).
    """
    if isinstance(moments, bool) or not isinstance(moments, (int, np.integer)) or moments < 1:
        raise ValueError(f"moments: expected an integer >= 1, got {moments!r}")
    opts = _make(PassageOptions, options)
    dc = _as_dc(chain)
    n = dc.n_states
    if reward is None:
        r = np.ones(dc.stop - dc.start)
    else:
        rr = np.asarray(reward, dtype=float)
        if rr.shape != (n,) or not np.all(np.isfinite(rr)) or (rr < 0).any():
            raise ValueError(f"reward: expected {n} finite values >= 0")
        r = rr[dc.start:dc.stop]
    t0 = time.perf_counter()
    tgt = _local_target(dc, target)
    ps = _Passage(dc, tgt, opts)
    F = ps.finite
    out = np.zeros((moments, F.size))
    out[:, ~tgt & ~F] = np.inf
    prev = np.ones(F.size)
    err = bal = 0.0
    st, reason, iters = Status.SUCCESS, "", 0
    for k in range(1, moments + 1):
        b = np.where(F, k * r * prev, 0.0)
        x, s1, reason, its = ps.solve(0.0, "finite", b)
        iters += its
        st = _worst(st, s1)
        e, bl = ps.errors(0.0, "finite", x, b)
        err, bal = max(err, e), max(bal, bl)
        out[k - 1, F] = x[F]
        prev = x
    cond, cst, creason = ps.condition(0.0, "finite")
    status, msg = _passage_status(ps.kind, err, bal, opts.tol, opts.tail_tol, cond, st, reason, cst, creason,
                                  defect=dc.allmax(0.0 if (out[:, F] >= 0).all() else np.inf),
                                  what="moments")
    n_doomed = int(dc.allsum(float((~F & ~tgt).sum())))
    if n_doomed:
        msg += f"; {n_doomed} states do not reach the target almost surely (infinite moments)"
    info = dict(ps.info, balance_error=bal, condition=cond, reason=reason,
                n_finite=int(dc.allsum(float(F.sum()))))
    ps.close()
    mode = opts.gather or dc.gather
    if mode == "none":
        info["rows"] = (dc.start, dc.stop)
    mom = np.array([dc.gather_vector(row, mode) for row in out])
    res = HittingResult(ps.kind, "petsc", status, msg, iters, err, time.perf_counter() - t0, info,
                        mean=mom[0], moments=mom,
                        finite=dc.gather_vector(F | tgt, mode).astype(bool),
                        target=dc.gather_vector(tgt, mode).astype(bool))
    return res.check(check)


def hitting_laplace(chain, target, s, *, check=True, **options):
    """``E_i[exp(-s T_A)]``; see :meth:`ctmc.CTMC.hitting_laplace`."""
    svals = _as_points(s, "s")
    opts = _make(PassageOptions, options)
    dc = _as_dc(chain)
    t0 = time.perf_counter()
    tgt = _local_target(dc, target)
    ps = _Passage(dc, tgt, opts)
    Rm = ps.reach
    b = np.where(Rm, ps.rx(tgt.astype(float)), 0.0)  # Q_RA 1
    vals = np.zeros((svals.size, tgt.size))
    vals[:, tgt] = 1.0
    err = bal = 0.0
    st, reason, iters = Status.SUCCESS, "", 0
    for k, sk in enumerate(svals):
        x, s1, reason, its = ps.solve(sk, "reach", b)
        iters += its
        st = _worst(st, s1)
        e, bl = ps.errors(sk, "reach", x, b)
        err, bal = max(err, e), max(bal, bl)
        vals[k, Rm] = x[Rm]
    cond, cst, creason = ps.condition(float(svals.min()), "reach")
    # E[exp(-s T)] lies in [0, 1], and is 1 at s = 0 where the target is reached a.s.
    sure = (ps.finite | tgt)[None, :] & (svals == 0.0)[:, None]
    defect = _mass_defect(dc, vals, sure)
    status, msg = _passage_status(ps.kind, err, bal, opts.tol, opts.tail_tol, cond, st, reason, cst, creason,
                                  defect=defect, what="transform values")
    info = dict(ps.info, balance_error=bal, condition=cond, reason=reason)
    ps.close()
    mode = opts.gather or dc.gather
    if mode == "none":
        info["rows"] = (dc.start, dc.stop)
    full = np.array([dc.gather_vector(v, mode) for v in vals])
    res = LaplaceResult(ps.kind, "petsc", status, msg, iters, err, time.perf_counter() - t0, info,
                        s=svals, values=full[0] if np.ndim(s) == 0 else full,
                        target=dc.gather_vector(tgt, mode).astype(bool))
    return res.check(check)


def _uniformize(apply, V0, times, lam, eps):
    """``exp(A t) V0`` for each t by uniformisation; ``apply(v)`` = ``A v`` on owned parts.

    ``V0`` has shape (local rows, c); returns (out (n_t, local rows, c), bound).
    The Poisson truncation is :func:`ctmc.transient.uniformize_operator`'s.
    """
    def block(V):
        return np.column_stack([apply(V[:, c]) for c in range(V.shape[1])])

    return uniformize_operator(block, V0, times, lam, eps=eps)


def first_passage(chain, target, *, s=None, t=None, sources=None, check=True, **options):
    """Joint law of ``(T_A, X_{T_A})``; see :meth:`ctmc.CTMC.first_passage`.

    ``sources`` are global state indices (default: all states). The result
    arrays are small (sources x targets) and replicated on every process.
    """
    opts = _make(PassageOptions, options)
    svals = None if s is None else _as_points(s, "s")
    tvals = None if t is None else _as_points(t, "t")
    dc = _as_dc(chain)
    n = dc.n_states
    t0 = time.perf_counter()
    tgt = _local_target(dc, target)
    targets = np.flatnonzero(dc.gather_vector(tgt, "all") > 0.5)
    src = np.arange(n) if sources is None else np.asarray(sources, dtype=np.int64).ravel()
    if src.size and (src.min() < 0 or src.max() >= n):
        raise ValueError(f"sources: state indices must lie in [0, {n - 1}]")
    if tvals is not None:
        lam = 1.02 * dc.allmax(np.where(tgt, 0.0, dc.exit_rates).max(initial=0.0))
        if lam * tvals.max() > opts.max_terms:
            raise ValueError(f"t: the largest time needs about {lam * tvals.max():.3g} uniformisation steps, "
                             f"above max_terms={opts.max_terms}; raise max_terms or use smaller times")
    ps = _Passage(dc, tgt, opts)
    Rm = ps.reach
    m, r = targets.size, src.size
    own = (src >= dc.start) & (src < dc.stop)
    lrow = src - dc.start
    at_target = np.zeros((r, m))
    tg_full = np.zeros(n, dtype=bool)
    tg_full[targets] = True
    a_src = tg_full[src]
    at_target[np.flatnonzero(a_src), np.searchsorted(targets, src[a_src])] = 1.0
    st_all, reason, iters = Status.SUCCESS, "", 0

    def joint(sv):
        nonlocal st_all, reason, iters
        part = np.zeros((r, m))
        err = bal = 0.0
        for j, tj in enumerate(targets):
            e_j = np.zeros(tgt.size)
            if dc.start <= tj < dc.stop:
                e_j[tj - dc.start] = 1.0
            b = np.where(Rm, ps.rx(e_j), 0.0)  # column j of Q_RA
            x, s1, reason, its = ps.solve(sv, "reach", b)
            iters += its
            st_all = _worst(st_all, s1)
            e, bl = ps.errors(sv, "reach", x, b)
            err, bal = max(err, e), max(bal, bl)
            part[own, j] = x[lrow[own]]
        return at_target + dc.allsum(part.ravel()).reshape(r, m), err, bal

    probs, err, bal = joint(0.0)
    lap = None
    if svals is not None:
        lap = np.empty((svals.size, r, m))
        for k, sv in enumerate(svals):
            lap[k], e, b2 = joint(sv)
            err, bal = max(err, e), max(bal, b2)
    cdf, bound = None, 0.0
    if tvals is not None:
        keep = (~tgt).astype(float)
        lam = 1.02 * dc.allmax(np.where(tgt, 0.0, dc.exit_rates).max(initial=0.0))
        if r <= m:  # forward from each source: p Qa, Qa = diag(keep) Q
            def apply(v):
                w = keep * v
                return ps.rx(w, transpose=True) - dc.exit_rates * w
            V0 = np.zeros((tgt.size, r))
            V0[lrow[own], np.flatnonzero(own)] = 1.0
            Pt, bound = _uniformize(apply, V0, tvals, lam, opts.eps)
            tl = (targets >= dc.start) & (targets < dc.stop)
            part = np.zeros((tvals.size, m, r))
            part[:, tl, :] = Pt[:, targets[tl] - dc.start, :]
            cdf = np.transpose(dc.allsum(part.ravel()).reshape(tvals.size, m, r), (0, 2, 1))
        else:  # backward from each target: Qa v
            def apply(v):
                return keep * (ps.rx(v) - dc.exit_rates * v)
            V0 = np.zeros((tgt.size, m))
            tl = (targets >= dc.start) & (targets < dc.stop)
            V0[targets[tl] - dc.start, np.flatnonzero(tl)] = 1.0
            Pt, bound = _uniformize(apply, V0, tvals, lam, opts.eps)
            part = np.zeros((tvals.size, r, m))
            part[:, own, :] = Pt[:, lrow[own], :]
            cdf = dc.allsum(part.ravel()).reshape(tvals.size, r, m)
    cond, cst, creason = ps.condition(0.0, "reach")
    # rows of P(X_T = j) sum to P(reach) <= 1, to 1 where the target is reached a.s.
    sure_own = np.zeros(r, dtype=bool)
    sure_own[own] = (ps.finite | tgt)[lrow[own]]
    sure = dc.allsum(sure_own.astype(float)) > 0.5 if r else sure_own
    entries = np.concatenate([probs.ravel(), probs.sum(axis=1)])
    defect = _mass_defect(dc, entries, np.concatenate([np.zeros(probs.size, bool), sure]))
    status, msg = _passage_status(ps.kind, err, bal, opts.tol, opts.tail_tol, cond, st_all, reason,
                                  cst, creason,
                                  defect=defect)
    info = dict(ps.info, n_reach=int(dc.allsum(float(Rm.sum()))), balance_error=bal, condition=cond,
                reason=reason)
    ps.close()
    res = FirstPassageResult(ps.kind, "petsc", status, msg, iters, err, time.perf_counter() - t0, info,
                             targets=targets, sources=src, probabilities=probs, s=svals, laplace=lap,
                             t=tvals, cdf=cdf, error_bound=bound)
    return res.check(check)


# --------------------------------------------------------------------------
# transient
# --------------------------------------------------------------------------
def _initial_local(dc, p0):
    n = dc.n_states
    if isinstance(p0, np.ndarray) and p0.dtype.kind == "f":
        if p0.shape != (n,):
            raise ValueError(f"p0: expected shape ({n},), got {p0.shape}")
        p = p0[dc.start:dc.stop].astype(float)
        tot = dc.allsum(float(p.sum()))
        bad = dc.allsum(float((~np.isfinite(p) | (p < 0)).sum()))
        if bad or abs(tot - 1) > 1e-9:
            raise ValueError("p0: must be a probability vector (finite, >= 0, sums to 1)")
        return p
    m = dc.mask(p0, "p0")
    cnt = dc.allsum(float(m.sum()))
    if cnt == 0:
        raise ValueError("p0: the set of states is empty")
    return m / cnt


def transient(chain, p0, t, *, method="uniformization", check=True, eps=1e-13, max_terms=10_000_000,
              tol=1e-12, gather=None, petsc_options=None):
    """Transient distribution ``p0 exp(Q t)``; see :meth:`ctmc.CTMC.transient`.

    ``method="uniformization"`` runs on PETSc vectors; ``method="expm"``
    uses SLEPc's MFN (Krylov, tolerance ``tol``), stepping between sorted times.
    """
    tv = check_transient_args(method, t, eps)
    _positive("tol", tol)
    _check_petsc_options(petsc_options)
    if gather is not None and gather not in _GATHER:
        raise ValueError(f"gather: expected one of {_GATHER}, got {gather!r}")
    dc = _as_dc(chain)
    p = _initial_local(dc, p0)
    t0 = time.perf_counter()
    info = {"processes": dc.size}
    status = Status.SUCCESS
    if method == "uniformization":
        lam = 1.02 * dc.qmax
        if lam * tv.max() > max_terms:
            raise ValueError(f"t: the largest time needs about {lam * tv.max():.3g} uniformisation steps, "
                             f"above max_terms={max_terms}; use method='expm' or raise max_terms")
        v, y = dc.vec(), dc.vec()

        def apply(x):
            v.getArray()[:] = x
            dc.R.multTranspose(v, y)
            return y.getArray() - dc.exit_rates * x
        P, bound = _uniformize(apply, p[:, None], tv, lam, eps)
        P = P[:, :, 0]
    else:
        SLEPc = load_slepc()
        A = _transposed_generator(dc)
        mfn = SLEPc.MFN().create(comm=dc.comm)
        mfn.setOperator(A)
        fn = mfn.getFN()
        fn.setType(SLEPc.FN.Type.EXP)
        mfn.setTolerances(tol=tol)
        mfn.setOptionsPrefix(PREFIX)
        with _options(petsc_options):
            mfn.setFromOptions()
        P = np.empty((tv.size, p.size))
        cur, tcur = dc.vec(p), 0.0
        nxt = dc.vec()
        reasons = []
        for i in np.argsort(tv):
            dt = tv[i] - tcur
            if dt > 0:
                fn.setScale(dt)
                mfn.solve(cur, nxt)
                st, name = _slepc_status(SLEPc.MFN, mfn.getConvergedReason())
                status = _worst(status, st)
                reasons.append(name)
                cur, nxt = nxt, cur
            P[i] = cur.getArray()
            tcur = tv[i]
        info["reason"] = reasons[-1] if reasons else "no step"
        mfn.destroy(), A.destroy(), cur.destroy(), nxt.destroy()
        P = np.maximum(P, 0.0)
        bound = float(np.abs(dc.allsum(P.sum(axis=1)) - 1).max())
    resid = float(np.abs(dc.allsum(P.sum(axis=1)) - 1).max())
    # uniformisation drops at most `bound` of the mass by construction; MFN has no
    # a priori bound (its `bound` is the defect itself), so its defect is judged alone
    allowed = max(10 * eps, 1e-10) + (bound if method == "uniformization" else 0.0)
    if status is Status.SUCCESS and resid > allowed:
        status = Status.INACCURATE
    msg = f"{method}: mass defect {resid:.1e}"
    mode = gather or dc.gather
    if mode == "none":
        info["rows"] = (dc.start, dc.stop)
    full = np.array([dc.gather_vector(row, mode) for row in P])
    res = TransientResult(method, "petsc", status, msg, 0, resid, time.perf_counter() - t0, info,
                          t=tv, p=full, error_bound=bound)
    return res.check(check)


def _bind_methods():
    """Give :class:`DistributedChain` the analysis methods of :class:`~ctmc.CTMC`."""
    def st(self, method="auto", *, check=True, **options):
        """Stationary distribution (see :func:`stationary`)."""
        return stationary(self, method, check=check, **options)

    def ht(self, target, moments=1, *, reward=None, check=True, **options):
        """Hitting-time moments (see :func:`hitting_times`)."""
        return hitting_times(self, target, moments, reward=reward, check=check, **options)

    def hl(self, target, s, *, check=True, **options):
        """Laplace-Stieltjes transform of the hitting time (see :func:`hitting_laplace`)."""
        return hitting_laplace(self, target, s, check=check, **options)

    def fp(self, target, s=None, t=None, *, sources=None, check=True, **options):
        """Joint law of the first passage (see :func:`first_passage`)."""
        if sources is not None and not (isinstance(sources, np.ndarray) and sources.dtype.kind in "iu"):
            full = np.zeros(self.n_states, dtype=bool)
            full[self.start:self.stop] = self.mask(sources, "sources")
            sources = np.flatnonzero(self.allsum(full.astype(float)) > 0)
        return first_passage(self, target, s=s, t=t, sources=sources, check=check, **options)

    def tr(self, p0, t, *, method="uniformization", check=True, **options):
        """Transient distribution (see :func:`transient`)."""
        return transient(self, p0, t, method=method, check=check, **options)

    def index(self, **values):
        """Index of a state (needs the state table)."""
        return self.states.index(**values)

    def event_rate(self, name):
        """Owned part of the per-state rate of a model event."""
        if self.model is None:
            raise ValueError("name: this chain was not built from a Model, it has no events")
        env = {k: v[self.start:self.stop] for k, v in self.states.as_dict().items()}
        return self.model.event_rate(name, env)

    for nm, f in (("stationary", st), ("hitting_times", ht), ("hitting_laplace", hl),
                  ("first_passage", fp), ("transient", tr), ("index", index), ("event_rate", event_rate)):
        f.__name__ = nm
        f.__qualname__ = f"DistributedChain.{nm}"
        setattr(DistributedChain, nm, f)


_bind_methods()
