"""The distributed chain: a CTMC generator split by blocks of rows over MPI processes.

:class:`DistributedChain` holds the owned rows of the off-diagonal rates
:math:`R` (a PETSc ``MPIAIJ`` matrix with a stored diagonal slot) and the
exit rates, and implements the primitives of
:class:`ctmc.backends.base.Operator` on them; the analyses come from the
:class:`ctmc.analyses.Analyses` mixin. :func:`operator` gives the operator of
a chain.
"""
from __future__ import annotations

import copy
import resource
import time
import weakref

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

from ...analyses import Analyses
from ..base import Operator
from ._env import load_petsc
from .options import GATHER

__all__ = ["DistributedChain", "operator"]


def _split(n, size, rank):
    """Rows ``(start, stop)`` of process ``rank`` (PETSc's default split)."""
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


def _csr(mat, m, n):
    """The owned rows of a PETSc AIJ matrix as scipy CSR (global columns, explicit zeros dropped)."""
    ip, ind, dat = mat.getValuesCSR()
    out = sp.csr_matrix((np.array(dat, dtype=float), np.array(ind, dtype=np.int64),
                         np.array(ip, dtype=np.int64)), shape=(m, n))
    out.eliminate_zeros()
    return out


#: :meth:`DistributedChain.allgather` keeps the vectors and scatter of lengths up to this (9,001 levels
#: of JSQ K=4500, three sums each)
_KEPT_GATHER = 1 << 15


class DistributedChain(Analyses, Operator):
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
        Initial states.
    comm : PETSc.Comm, optional
        Default ``PETSc.COMM_WORLD``.
    gather : {"all", "root", "none"}
        Default of the ``gather`` backend option of the analyses
        (:attr:`default_gather`).
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
    n, n_states : int
        Number of states.
    start, stop, rank, size, qmax, states, initial, default_gather
        As in :class:`ctmc.backends.base.Operator`.
    sweeps : int
        Reachability sweeps run so far (each: block BFS + one mat-vec).
    """

    backend = "petsc"
    default_backend = "petsc"
    allowed_backends = ("petsc",)

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
        self.n = self.n_states = n
        self.start, self.stop = int(start), int(start) + m
        if _split(n, self.size, self.rank) != (self.start, self.stop):
            raise ValueError(f"rows: process {self.rank} must own rows {_split(n, self.size, self.rank)}, "
                             f"got {(self.start, self.stop)}")
        if gather not in GATHER:
            raise ValueError(f"gather: expected one of {GATHER}, got {gather!r}")
        self.default_gather = gather
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
        self._RT = None  # R^T, built on first use (local_rows(transpose=True), Q^T operators)
        self._rows = {}  # local_rows(transpose) as scipy CSR, converted once (dropped by release())
        self._work = None  # two work vectors of rates()
        self._gathers = {}  # allgather's vectors and scatters by length
        self.qmax = self.allmax(self.exit_rates.max() if m else 0.0)
        self.sweeps = 0

    # construction ---------------------------------------------------------
    @classmethod
    def from_model(cls, model, initial, *, comm=None, max_states=None, progress=None, gather="root"):
        """Explore ``model`` (state codes only) and assemble this process's rows.

        Every process computes the same sorted state table; process ``p``
        then evaluates the events of its block only.
        """
        if getattr(model, "immediates", ()):
            from ...results import ModelError
            raise ModelError(f"model {model.name!r}: the distributed build does not support immediate moves "
                             "(their elimination needs the whole chain); build it with Model.build and use the "
                             "scipy backend, or give the moves a rate")
        PETSc = load_petsc()
        comm = comm if comm is not None else PETSc.COMM_WORLD
        t0 = time.perf_counter()
        states = model.state_space(initial=initial, max_states=max_states, progress=progress)
        n = len(states)
        start = _split(n, comm.getSize(), comm.getRank())[0]
        init = np.searchsorted(states.codes, model.initial_codes(initial))
        dc = cls(lambda a, b: model.generator_rows(states, a, b), start, states=states, initial=init,
                 comm=comm, gather=gather, model=model, n_states=n)
        dc.build_seconds = dc.allmax(time.perf_counter() - t0)
        return dc

    @classmethod
    def from_chain(cls, chain, *, comm=None, gather="all"):
        """Distribute a (replicated) :class:`~ctmc.CTMC`: each process keeps its rows.

        The result holds no reference to ``chain``.
        """
        PETSc = load_petsc()
        comm = comm if comm is not None else PETSc.COMM_WORLD
        start, stop = _split(chain.n_states, comm.getSize(), comm.getRank())
        Q = chain.Q
        return cls(lambda a, b: Q[a:b], start, states=chain.states, initial=chain.initial, comm=comm,
                   gather=gather, model=chain.model, n_states=chain.n_states)

    def __repr__(self):
        return (f"<DistributedChain: {self.n_states} states on {self.size} processes, "
                f"rows {self.start}:{self.stop} here>")

    # vectors and collectives ----------------------------------------------
    def vec(self, local=None):
        """A PETSc vector with this chain's layout (filled with ``local`` if given)."""
        PETSc = load_petsc()
        v = PETSc.Vec().createMPI((self.stop - self.start, self.n_states), comm=self.comm)
        if local is not None:
            v.getArray()[:] = local
        else:
            v.set(0.0)
        return v

    def _allgatherv(self, local, root_only=False) -> np.ndarray:
        """Concatenation, in process order, of a float array of any length from every process
        (on process 0 only, others get an empty array, with ``root_only``)."""
        PETSc = load_petsc()
        a = np.asarray(local, dtype=float).ravel()
        v = PETSc.Vec().createMPI((a.size, PETSc.DECIDE), comm=self.comm)
        v.getArray()[:] = a
        sc, full = (PETSc.Scatter.toZero if root_only else PETSc.Scatter.toAll)(v)
        sc.scatter(v, full, PETSc.InsertMode.INSERT, PETSc.ScatterMode.FORWARD)
        out = full.getArray().copy()
        sc.destroy(), full.destroy(), v.destroy()
        return out

    def allgather(self, values) -> np.ndarray:
        """Stack a same-sized 1-D array from every process: shape ``(size, k)``.

        The vectors and scatter of a length up to :data:`_KEPT_GATHER` are made once and kept (the same
        length on every process, so every process keeps them in the same calls): a reduction in every
        iteration of a loop (``level_iad``'s level masses, the stopping rule) costs the scatter alone.
        """
        a = np.atleast_1d(np.asarray(values, dtype=float)).ravel()
        if a.size > _KEPT_GATHER:
            return self._allgatherv(a).reshape(self.size, a.size)
        PETSc = load_petsc()
        kept = self._gathers.get(a.size)
        if kept is None:
            v = PETSc.Vec().createMPI((a.size, PETSc.DECIDE), comm=self.comm)
            kept = self._gathers[a.size] = (v, *PETSc.Scatter.toAll(v))
        v, sc, full = kept
        v.getArray()[:] = a
        sc.scatter(v, full, PETSc.InsertMode.INSERT, PETSc.ScatterMode.FORWARD)
        return full.getArray().copy().reshape(self.size, a.size)

    def allsum(self, x):
        """Sum over processes (element-wise for an array).

        Implemented with :meth:`allgather`: every process holds ``size * len(x)``
        numbers for a moment, so use it for short arrays (per-source results),
        not for vectors of the chain's size.
        """
        if np.ndim(x):
            return self.allgather(x).sum(axis=0).reshape(np.shape(x))
        return float(self.allgather(x).sum())

    def allmax(self, x) -> float:
        return float(self.allgather(x).max())

    def gather(self, local: np.ndarray, mode: str = "all") -> np.ndarray:
        """Full vector on every process (``all``), on rank 0 (``root``; others get an
        empty array) or the own block (``none``).

        The pieces are concatenated in process order, whatever their lengths
        (owned parts give the full vector); a 2-D ``local`` is stacked by rows.
        The dtype of ``local`` is kept (values travel as doubles: integers
        beyond 2**53 do not survive).
        """
        local = np.asarray(local)
        if mode not in GATHER:
            raise ValueError(f"gather: expected one of {GATHER}, got {mode!r}")
        if mode == "none":
            return local
        out = self._allgatherv(local, root_only=(mode == "root")).astype(local.dtype)
        if local.ndim == 2:
            out = out.reshape(-1, local.shape[1])
        return out

    def gather_rows(self, members: np.ndarray):
        """Rows of ``R`` for the members (owned mask), stacked in global order, on every process.

        The variable-sized CSR pieces travel through three all-gathers of
        PETSc vectors (row lengths, column indices, values).
        """
        loc = self.local_rows()[np.asarray(members, dtype=bool)]
        lengths = self._allgatherv(np.diff(loc.indptr))
        indices = self._allgatherv(loc.indices)
        data = self._allgatherv(loc.data)
        indptr = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths.astype(np.int64), out=indptr[1:])
        return sp.csr_matrix((data, indices.astype(np.int64), indptr), shape=(lengths.size, self.n_states))

    def mask(self, spec, name="target") -> np.ndarray:
        """Owned part of a set of states given as mask, indices, dict, expression or callable."""
        from ...expr import Expr
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
                raise ValueError(f"{name}: expected a mask, expression, callable, dict or indices, "
                                 f"got {a.dtype}")
            a = a.ravel().astype(np.int64)
            if a.size and (a.min() < 0 or a.max() >= n):
                raise ValueError(f"{name}: state indices must lie in [0, {n - 1}]")
            full = np.zeros(n, dtype=bool)
            full[a] = True
        return np.array(full[self.start:self.stop], dtype=bool)

    def index(self, **values):
        """Index of a state (needs the state table)."""
        return self.states.index(**values)

    def event_rate(self, name):
        """Owned part of the per-state rate of a model event."""
        if self.model is None:
            raise ValueError("name: this chain was not built from a Model, it has no events")
        env = {k: v[self.start:self.stop] for k, v in self.states.as_dict().items()}
        return self.model.event_rate(name, env)

    def memory(self) -> dict:
        """Peak resident memory (MiB) of every process and the matrix entries held here."""
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        return {"peak_mib_per_rank": self.allgather(peak).ravel().tolist(), "local_nnz": self._nnz}

    # the generator ----------------------------------------------------------
    def transposed_rates(self):
        """``R^T`` as a PETSc matrix, built once and kept (do not modify or destroy it)."""
        if self._RT is None:
            self._RT = self.R.transpose(load_petsc().Mat())
        return self._RT

    def _mult(self, x, transpose):
        if self._work is None:
            self._work = (self.vec(), self.vec())
        v, y = self._work
        v.getArray()[:] = x
        (self.R.multTranspose if transpose else self.R.mult)(v, y)
        return y.getArray().copy()

    def rates(self, x: np.ndarray, transpose: bool = False) -> np.ndarray:
        """``R x`` (``R^T x`` with ``transpose``) for an owned vector or block; the owned part."""
        x = np.asarray(x, dtype=float)
        if x.ndim == 1:
            return self._mult(x, transpose)
        out = np.empty_like(x)
        for j in range(x.shape[1]):
            out[:, j] = self._mult(x[:, j], transpose)
        return out

    def local_rows(self, transpose: bool = False):
        """Owned rows of ``R`` (of ``R^T`` with ``transpose``), scipy CSR with global columns.

        Converted from the PETSc matrix once and kept (read it, never write it): a first-passage
        analysis reads it about ten times (0.3 s a conversion at 1e6 owned states); :meth:`release`
        drops it."""
        A = self._rows.get(bool(transpose))
        if A is None:
            mat = self.transposed_rates() if transpose else self.R
            A = self._rows[bool(transpose)] = _csr(mat, self.stop - self.start, self.n_states)
        return A

    def rescaled(self, factor: float) -> "DistributedChain":
        new = copy.copy(self)              # the same rows, comm and state table; the rates a copy
        new.R = self.R.copy()
        new.R.scale(factor)
        new.exit_rates, new.qmax = self.exit_rates * factor, self.qmax * factor
        new._RT, new._rows, new._work, new._normalised = None, {}, None, None
        return new

    def release(self) -> None:
        """Drop the scipy copies of the owned rows (made again on demand): before a large solve."""
        self._rows.clear()

    def releasable(self) -> int:
        """Bytes :meth:`release` frees now."""
        return int(sum(A.data.nbytes + A.indices.nbytes + A.indptr.nbytes for A in self._rows.values()))

    # reachability -------------------------------------------------------------
    def reach(self, seeds, within=None, forward=False) -> np.ndarray:
        """Owned part of the set of states that can reach ``seeds`` (with ``forward``:
        that can be reached from them) through states of ``within``.

        The result is ``seeds`` plus the states of ``within`` joined to a seed by
        a path whose other states all lie in ``within``. Closure inside the
        block by breadth-first search, then one product with ``R`` (or ``R^T``)
        carries the marks across blocks; repeated until no process marks a new
        state, so the number of sweeps is the number of block crossings of the
        longest path, not its length.
        """
        m = self.stop - self.start
        loc = self.local_rows()
        inner = (loc.indices >= self.start) & (loc.indices < self.stop)
        rows = np.repeat(np.arange(m), np.diff(loc.indptr))
        keep = inner & (loc.data > 0)
        Gi = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.int8),
                            (rows[keep], loc.indices[keep] - self.start)), shape=(m, m))
        del loc, rows, keep, inner
        allowed = np.ones(m, dtype=bool) if within is None else np.asarray(within, dtype=bool)
        # BFS graph (row = from): reversed edges when marking the states that can reach
        G = ((Gi if forward else Gi.T) @ sp.diags(allowed.astype(np.int8), dtype=np.int8)).tocsr()
        marked = np.asarray(seeds, dtype=bool).copy()
        while True:
            self.sweeps += 1
            marked = self._closure(G, marked)
            y = self._mult(marked.astype(float), forward)
            new = (y > 0) & allowed & ~marked
            if self.allsum(float(new.sum())) == 0:
                return marked
            marked |= new


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

    # linear algebra -------------------------------------------------------------
    def system(self, members, shift, spec, backend_options=None):
        """``M = shift * I - Q_XX`` on ``X = members`` (see :class:`~.solvers.PetscSystem`)."""
        from .solvers import PetscSystem
        return PetscSystem(self, members, shift, spec, backend_options)

    own_ordered_sweeps = True

    def ordered_sweeps(self, members, order, transpose=False):
        """``MatSOR`` sweeps with the owned members in ``order`` (see :class:`~.sweeps.OrderedSweeps`)."""
        from .sweeps import OrderedSweeps
        return OrderedSweeps(self, members, order, transpose)

    def null_vector(self, support, *, tol, maxiter, ncv, backend_options=None):
        """Stationary vector of the closed class ``support`` by SLEPc (see :func:`.solvers.null_vector`)."""
        from .solvers import null_vector
        return null_vector(self, support, tol=tol, maxiter=maxiter, ncv=ncv, backend_options=backend_options)

    def expm_action(self, p, dt, *, tol, backend_options=None):
        """``p exp(Q dt)`` by SLEPc's MFN (see :func:`.solvers.expm_action`)."""
        from .solvers import expm_action
        return expm_action(self, p, dt, tol=tol, backend_options=backend_options)


#: CTMC -> (its Q when distributed, the DistributedChain); entries vanish with the chain
_OPERATORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def operator(chain):
    """The PETSc operator of ``chain``.

    A :class:`DistributedChain` is its own operator; a :class:`~ctmc.CTMC` is
    distributed once (:meth:`DistributedChain.from_chain`) and the result is
    kept, beside the chain, until the chain is garbage-collected or its ``Q``
    is replaced.
    """
    if isinstance(chain, DistributedChain):
        return chain
    if not hasattr(chain, "Q"):
        raise TypeError(f"chain: expected a ctmc.CTMC or a DistributedChain, got {type(chain).__name__}")
    hit = _OPERATORS.get(chain)
    if hit is not None and hit[0] is chain.Q:
        return hit[1]
    dc = DistributedChain.from_chain(chain)
    _OPERATORS[chain] = (chain.Q, dc)
    return dc
