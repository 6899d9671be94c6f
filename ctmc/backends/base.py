r"""The backend protocol: the primitives every analysis of ctmc is written on.

A chain's generator is split as :math:`Q = R - \operatorname{diag}(q)`, with
:math:`R \ge 0` the off-diagonal rates (zero diagonal) and :math:`q_i = -Q_{ii}`
the exit rates. A backend holds :math:`R` and :math:`q` distributed by
contiguous blocks of rows over its processes (the scipy backend: one process
owning every row) and offers the primitives below; the analyses
(:mod:`ctmc.stationary`, :mod:`ctmc.passage`, :mod:`ctmc.transient`) are
written once, in SPMD style, against them:

* every per-state vector an analysis handles is the *owned part*, rows
  ``start:stop`` (numpy arrays, shape ``(stop - start,)`` or
  ``(stop - start, k)``);
* global quantities go through the collectives (:meth:`Operator.allsum`, ...),
  which every process calls in the same order;
* the heavy linear algebra (factorisations, Krylov solves, eigen and
  matrix-exponential solvers) is the backend's.

A new backend (a GPU sparse library, say) is a module with a function
``operator(chain)`` returning an :class:`Operator`, and nothing more.

Linear systems
--------------
:meth:`Operator.system` sets up :math:`M = sI - Q_{XX}` on a set :math:`X`
of states (``members``), a nonsingular M-matrix in every use ctmc makes of it
(hitting times and transforms, the pinned stationary system). Right-hand sides
and solutions are full owned vectors, zero outside :math:`X`. Its
:class:`LinearSpec` says how: ``"lu"`` (sparse direct, diagonal pivots),
``"gmres"`` or ``"bicgstab"`` (Krylov, with a preconditioner).
"""
from __future__ import annotations

import abc
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import scipy.sparse as sp

from ..results import Status

#: unit round-off of double precision
UNIT_ROUNDOFF = np.finfo(float).eps / 2

__all__ = ["LinearSpec", "SolveReport", "System", "Operator", "worst", "stalled_report", "PRECONDITIONERS",
           "RATE_RANGE", "rate_scale"]

#: the range of the largest exit rate ``qmax`` in which a scale-free analysis (the stationary law) takes
#: the generator as it is; beyond, it works on :math:`sQ` (:func:`rate_scale`, :meth:`Operator.normalised`).
#: Below: the flows :math:`\pi_j q_{ij}` of a tail underflow where :math:`\pi` does not (rates of
#: 1e-160 and a law down to 1e-200: every product is 0, a balance check sees nothing and sparse LU returns
#: a tail 100 % off); above: sums of rates overflow
RATE_RANGE = (2.0 ** -8, 2.0 ** 512)

#: preconditioners of the Krylov solves, on every backend: a symmetric Gauss-Seidel sweep
#: (on each process's block), incomplete LU (likewise), point Jacobi, none; "multilevel" (an
#: aggregation V-cycle, :mod:`ctmc.multigrid`) and "ilu0" (ILU(0) on Q's pattern read from Q's
#: rows, :meth:`ctmc.backends.csr.MaskedTranspose.ilu0`) on the scipy backend only
PRECONDITIONERS = ("sgs", "ilu0", "ilu", "jacobi", "none", "multilevel")

#: severity order of statuses (the worst of several solves is reported)
_ORDER = (Status.SUCCESS, Status.TAIL_INACCURATE, Status.INACCURATE, Status.MAX_ITERATIONS,
          Status.BREAKDOWN)


def rate_scale(qmax: float) -> float:
    r"""The power of two :math:`s` (exact to multiply by) that brings ``qmax`` into :data:`RATE_RANGE`: from
    below to :math:`s\,q_{max} \in [1/2, 1)` (:math:`s \le 2^{1023}`), from above to
    :math:`[2^{511}, 2^{512})` (as little as needed: the smaller rates shrink with it); 1 where ``qmax`` is 0
    or within the range.

    >>> rate_scale(3.0), rate_scale(1e-160) * 1e-160, 2.0 ** 511 <= rate_scale(1e200) * 1e200 < 2.0 ** 512
    (1.0, 0.7029..., True)
    """
    if qmax == 0 or not np.isfinite(qmax) or RATE_RANGE[0] <= qmax <= RATE_RANGE[1]:
        return 1.0
    e = math.frexp(qmax)[1]
    return math.ldexp(1.0, min(-e, 1023) if qmax < RATE_RANGE[0] else math.frexp(RATE_RANGE[1])[1] - 1 - e)


def worst(*statuses: Status) -> Status:
    """The most severe of ``statuses``.

    >>> worst(Status.SUCCESS, Status.MAX_ITERATIONS, Status.INACCURATE)
    <Status.MAX_ITERATIONS: 'max_iterations'>
    """
    return max(statuses, key=_ORDER.index)


@dataclass(frozen=True)
class LinearSpec:
    """How :meth:`Operator.system` solves.

    Attributes
    ----------
    kind : {"lu", "gmres", "bicgstab"}
    ordering : str
        Fill-reducing ordering of a direct solve (``"auto"`` or a backend's name;
        see :mod:`ctmc._sparse_lu`). Ignored by Krylov solves.
    preconditioner : {"sgs", "ilu0", "ilu", "jacobi", "none", "multilevel"}
        Krylov preconditioner: one symmetric Gauss-Seidel sweep, ILU(0) on the
        generator's pattern (scipy backend, a system read from ``Q``'s rows;
        else the sweep), incomplete LU
        (both on each process's diagonal block when distributed), point
        Jacobi, none, or one aggregation V-cycle (:mod:`ctmc.multigrid`,
        scipy backend only).
    rtol : float
        Krylov stopping tolerance on the relative (unpreconditioned) residual.
    maxiter : int
        Krylov iteration limit (total iterations, restarts included).
    restart : int
        GMRES restart length.
    bracket : float
        BiCGStab (scipy backend) on a right-hand side ``b >= 0`` also stops at the first
        iterate proven within this factor of the solution, entrywise, by its componentwise
        residual (:func:`ctmc.krylov.bracket_factor`); 0: off. Other solvers ignore it.
    stall : int
        GMRES and BiCGStab give up when their residual has not fallen tenfold over that many
        iterations (:class:`ctmc.krylov.Stall`; on PETSc through the KSP's convergence test,
        :class:`ctmc.backends.petsc.solvers.StallTest`); 0: off. Other solvers ignore it.
    """

    kind: str = "lu"
    ordering: str = "auto"
    preconditioner: str = "sgs"
    rtol: float = 1e-12
    maxiter: int = 10_000
    restart: int = 50
    bracket: float = 0.0
    stall: int = 0


@dataclass
class SolveReport:
    """Outcome of one :meth:`System.solve`: status, backend reason, iterations."""

    status: Status = Status.SUCCESS
    reason: str = ""
    iterations: int = 0
    info: dict = field(default_factory=dict)


def stalled_report(spec: LinearSpec, iterations: int, where: str) -> SolveReport:
    """The report of a Krylov solve that the stagnation test (:class:`ctmc.krylov.Stall`,
    ``spec.stall``) stopped, on any backend; ``where`` says where its residual stood.

    >>> stalled_report(LinearSpec("gmres", stall=25), 26, "backward error 1.0e-03").reason
    'gmres stalled: its residual fell less than tenfold in 25 iterations (backward error 1.0e-03 after 26)'
    """
    return SolveReport(Status.MAX_ITERATIONS, f"{spec.kind} stalled: its residual fell less than tenfold "
                       f"in {spec.stall} iterations ({where} after {iterations})", iterations)


class System(abc.ABC):
    """A set-up linear system ``M = sI - Q_XX`` (see :meth:`Operator.system`).

    Attributes
    ----------
    info : dict
        What the backend chose (``factor_package``, ``ordering``, ``fill``,
        ``preconditioner``, ...), merged into the result's ``info``.
    """

    info: dict

    @abc.abstractmethod
    def solve(self, b: np.ndarray, transpose: bool = False, overwrite_b: bool = False):
        """Solve ``M x = b`` (``M^T x = b`` with ``transpose``).

        Parameters
        ----------
        b : ndarray, shape (m,) or (m, k)
            Owned rows; entries outside ``X`` are ignored.
        overwrite_b : bool
            The caller does not read ``b`` again: a backend may write it (the scipy backend's
            BiCGStab takes its vector for the iterate's where ``b`` has few non-zeros), and the
            ``x`` returned may be ``b``'s array.

        Returns
        -------
        x : ndarray, same shape as ``b`` (zero outside ``X``)
        report : SolveReport
            The worst status over the columns. A direct solve that could not
            factorise returns ``Status.BREAKDOWN`` (never raises for a
            numerical failure); a failed allocation raises ``MemoryError``.
        """

    def loosened(self, rtol: float) -> Optional["System"]:
        """This system solving to the looser tolerance ``rtol``, sharing what is set up (matrix,
        preconditioner), or None where a backend cannot (a new system is then set up).

        For solves whose answer only needs a digit or two (an estimate of ``||M^-1||``): the
        matrix is not extracted twice. Closing the returned system closes this one's too.
        """
        return None

    def prepare(self, transpose: bool = False) -> None:
        """Set up what a solve of this orientation needs (a Krylov system's matrix, or its view of ``Q``'s
        rows, and its preconditioner) now, before the caller makes its right-hand side: what the set-up
        frees (the scipy operator's ``Q^T``) is then not held beside it. Nothing by default (a solve sets
        itself up)."""

    def reserve(self) -> None:
        """Make the vectors of the next solve's iteration now, in the caller's thread (a solve run on
        another thread then takes them: memory the caller's thread freed is reused, not held beside a
        second allocator's); nothing where a backend makes its own."""

    def close(self) -> None:
        """Free the backend's objects (factors, KSPs)."""


class Operator(abc.ABC):
    """The primitives of one backend bound to one chain.

    Attributes
    ----------
    backend : str
        ``"scipy"`` or ``"petsc"``.
    n : int
        Number of states.
    start, stop : int
        The owned rows ``start:stop``.
    rank, size : int
        This process and the number of processes.
    exit_rates : ndarray
        ``q_i = -Q_ii`` on the owned rows.
    qmax : float
        ``max_i q_i`` over all states.
    states : StateTable or None
        The state table (replicated on every process).
    initial : ndarray of int or None
        Global indices of the model's initial states.
    default_gather : str
        Default of the ``gather`` backend option (where result vectors go).
    """

    backend: str
    n: int
    start: int
    stop: int
    rank: int = 0
    size: int = 1
    exit_rates: np.ndarray
    qmax: float
    states = None
    initial: Optional[np.ndarray] = None
    default_gather: str = "all"

    # --- collectives -------------------------------------------------------
    @abc.abstractmethod
    def allsum(self, x):
        """Sum of a scalar or a short array over the processes (every process gets it)."""

    @abc.abstractmethod
    def allmax(self, x) -> float:
        """Largest value of a scalar over the processes."""

    def allmin(self, x) -> float:
        """Smallest value of a scalar over the processes."""
        return -self.allmax(-float(x))

    @abc.abstractmethod
    def gather(self, local: np.ndarray, mode: str = "all") -> np.ndarray:
        """The concatenation, in process order, of every process's ``local``.

        ``local`` is usually the owned part of a vector (the result is then the
        full vector), but pieces of any length are allowed (small per-process
        tables); a 2-D ``local`` is stacked by rows. ``mode``: ``"all"`` (on
        every process), ``"root"`` (on process 0; others get an empty array),
        ``"none"`` (``local`` itself). On one process it returns ``local``.
        """

    @abc.abstractmethod
    def gather_rows(self, members: np.ndarray):
        """Rows of ``R`` for the states of a set, on every process.

        Parameters
        ----------
        members : ndarray of bool, owned part

        Returns
        -------
        scipy.sparse.csr_matrix, shape (k, n)
            Row ``r`` is row ``idx[r]`` of ``R`` (global column numbers), where
            ``idx`` lists the k members in increasing order. Meant for small sets
            (dense solvers); it is replicated on every process.
        """

    # --- the generator -----------------------------------------------------
    @abc.abstractmethod
    def rates(self, x: np.ndarray, transpose: bool = False) -> np.ndarray:
        """``R x`` (or ``R^T x``) for an owned vector or block ``x``; returns the owned part."""

    def apply(self, x: np.ndarray, transpose: bool = False) -> np.ndarray:
        """``Q x`` (or ``Q^T x``, i.e. ``(x^T Q)^T``) on owned parts."""
        q = self.exit_rates if np.ndim(x) == 1 else self.exit_rates[:, None]
        return self.rates(x, transpose) - q * x

    def apply_blocks(self, x: np.ndarray, transpose: bool = False):
        """``(s, block)``: the entries ``s`` to ``s + len(block)`` of :meth:`apply` of an owned vector, in
        order (the same numbers). By default one block, the whole product; a backend that can make it
        by blocks of rows holds a block at a time, not a vector (a balance error, a maximum, needs no more),
        and may write each into the last one's array: read a block before taking the next.
        """
        yield 0, self.apply(x, transpose)

    def rate_columns(self, rows: np.ndarray, cols: np.ndarray):
        """The rates ``R[rows][:, cols]`` on the owned rows, sparse: shape ``(stop - start, len(cols))``.

        ``rows`` is an owned mask (other rows are empty), ``cols`` sorted global
        state numbers (column ``k`` is state ``cols[k]``). The rates into a
        target set (``Q_RA``), never a dense states x targets block; by
        default read from :meth:`local_rows` (:func:`ctmc.backends.csr.rate_columns`).
        """
        from .csr import rate_columns
        return rate_columns(self.local_rows(), rows, cols, self.start)

    @abc.abstractmethod
    def local_rows(self, transpose: bool = False):
        """The owned rows of ``R`` (or of ``R^T``) as a CSR matrix with global columns.

        Shape ``(stop - start, n)``. With ``transpose`` the rows are the
        in-flow rates: row ``j`` holds ``R_ij`` at column ``i``.
        """

    def generator_rows(self, transpose: bool = False):
        """The owned rows of ``Q`` (or of ``Q^T``) as a CSR matrix with global columns, diagonal included.

        Shape ``(stop - start, n)``; row ``i``'s diagonal entry (``-q_i``) is at
        column ``start + i``. A backend may return its own storage (the scipy
        backend: the chain's ``Q`` itself): read it, never write it. By default
        a new matrix made from :meth:`local_rows`.
        """
        A = self.local_rows(transpose).tocsr()
        m = self.stop - self.start
        D = sp.csr_matrix((-self.exit_rates, (np.arange(m), np.arange(self.start, self.stop))), shape=A.shape)
        out = (A + D).tocsr()
        out.sort_indices()
        return out

    def offdiagonal_counts(self, transpose: bool = False) -> np.ndarray:
        """The number of rates (entries of :meth:`local_rows`) in each owned row of ``R`` (or ``R^T``)."""
        return np.diff(self.local_rows(transpose).indptr)

    def lowest_columns(self, transpose: bool = False, out: Optional[np.ndarray] = None) -> np.ndarray:
        """:func:`~ctmc.backends.csr.lowest_columns` of the owned rows of ``Q`` (or ``Q^T``), global columns:
        ``min(start + i, the first column of a non-zero entry of row i)``, int64; ``out`` lowered in place."""
        from .csr import lowest_columns
        return lowest_columns(self.generator_rows(transpose), self.start, out=out)

    def closed_class_masks(self, most: Optional[int] = None) -> Optional[list]:
        """Every closed class of the chain as an owned mask, sorted by its smallest state, where the
        backend finds them from ``Q``'s rows alone (the scipy backend: strongly connected components);
        None elsewhere (:func:`ctmc.kernels.classes.closed_classes` then searches both ways). With
        ``most``, an empty list where the chain has more closed classes than that (it has one at least):
        no mask is made then."""
        return None

    def release(self) -> None:
        """Drop what the backend makes again on demand (transposes, copies), before a large solve."""

    def releasable(self) -> int:
        """Bytes :meth:`release` would free now (0 where it frees nothing)."""
        return 0

    def product_roundoff(self) -> float:
        """``(k + 1) u`` with ``k`` the most entries in a row or column of ``Q`` (``u`` the unit round-off):
        the relative round-off of a product with ``Q`` or ``Q^T``.

        Computed once per operator (a collective, and on PETSc a conversion of both rate matrices).
        """
        g = getattr(self, "_product_roundoff", None)
        if g is None:
            k = 0
            for transpose in (False, True):
                k = max(k, int(self.offdiagonal_counts(transpose).max(initial=0)))
            g = (self.allmax(float(k)) + 1) * UNIT_ROUNDOFF
            self._product_roundoff = g
        return g

    #: whether :meth:`ordered_sweeps` gives the backend's own sweeps (PETSc's ``MatSOR``) instead of None;
    #: where it does, ``level_iad`` sweeps every state in its order (no live-state ordering: that needs
    #: ctmc's compiled kernels on one process)
    own_ordered_sweeps = False

    def ordered_sweeps(self, members: np.ndarray, order: np.ndarray, transpose: bool = False):
        """The backend's Gauss-Seidel sweeps on ``Q_XX`` (``Q^T_XX``) with the owned members of ``X`` in
        ``order`` (see :func:`ctmc.kernels.sweeps.ordered_sweeper`), or None: the compiled kernels then."""
        return None

    # --- structure ---------------------------------------------------------
    @abc.abstractmethod
    def reach(self, seeds: np.ndarray, within: Optional[np.ndarray] = None,
              forward: bool = False) -> np.ndarray:
        """States that can reach ``seeds`` (``forward``: that ``seeds`` can reach).

        With ``within``, the result is the seeds plus the states of ``within``
        joined to a seed by a path all of whose states, but the seed, lie in
        ``within`` (default: all states). ``seeds`` and the returned mask are
        owned parts.
        """

    def reach_by_products(self, seeds: np.ndarray, rounds: int = 4) -> Optional[np.ndarray]:
        """``reach(seeds)`` when every state that can reach ``seeds`` does so in at most ``rounds``
        steps, found by ``rounds + 1`` products with ``Q``; else None (then search: :meth:`reach`).

        ``(Q 1_S)_i > 0`` for ``i`` outside ``S`` exactly when ``i`` has a rate into ``S`` (rates are
        non-negative: no cancellation; the diagonal meets a 0). A target one event away from every
        state (a failure that can always happen) is found in two products, where a search towards
        the seeds needs the transposed generator (the scipy backend: a transposition, then a search).

        >>> import ctmc
        >>> from ctmc.backends import operator_for
        >>> op = operator_for(ctmc.CTMC([[-1.0, 1.0, 0.0], [0.0, -1.0, 1.0], [0.0, 0.0, 0.0]]), "scipy")
        >>> op.reach_by_products(np.array([False, False, True])).tolist()
        [True, True, True]
        >>> op.reach_by_products(np.array([False, False, True]), rounds=1) is None     # two steps away
        True
        """
        cur = np.array(seeds, dtype=bool)
        for _ in range(int(rounds) + 1):
            new = ~cur & (self.apply(cur.astype(float)) > 0)
            if self.allmax(float(new.any())) == 0:
                return cur
            cur |= new
        return None

    # --- linear algebra ----------------------------------------------------
    @abc.abstractmethod
    def system(self, members: np.ndarray, shift: float, spec: LinearSpec,
               backend_options: Optional[dict] = None) -> System:
        """Set up ``M = shift * I - Q_XX`` on ``X = members`` (owned mask).

        Raises
        ------
        MemoryError
            When a factorisation cannot be allocated.
        """

    @abc.abstractmethod
    def null_vector(self, support: np.ndarray, *, tol: float, maxiter: Optional[int],
                    ncv: Optional[int], backend_options: Optional[dict] = None):
        """Eigenvector of ``P^T = I + Q^T / L`` for the eigenvalue 1 on a closed class.

        ``L = 1.02 * qmax``; rows and columns outside ``support`` are left out.

        Returns
        -------
        x : ndarray or None
            Owned part (any scale and sign), None when nothing converged.
        report : SolveReport
            ``info`` has ``eigenvalue`` and ``uniformization_rate``.
        """

    @abc.abstractmethod
    def expm_action(self, p: np.ndarray, dt: float, *, tol: float,
                    backend_options: Optional[dict] = None):
        """``p exp(Q dt)`` for an owned row vector ``p`` (Krylov approximation).

        Returns ``(owned result, SolveReport)``.
        """

    # --- the time unit ---------------------------------------------------------
    def rescaled(self, factor: float) -> "Operator":
        """The operator of ``factor * Q`` (a copy of the rates; ``factor`` a power of two, so exact)."""
        raise NotImplementedError(f"{type(self).__name__}.rescaled")

    def normalised(self) -> tuple:
        """``(op, s)``: the operator of :math:`sQ`, :math:`s` = :func:`rate_scale` of ``qmax`` (made once and
        kept; this operator itself where :math:`s = 1`, or where scaling down would make the smallest rate
        a denormal number: not exact then), for an analysis whose answer does not depend on the unit of
        time. Quantities in rates that it reports are divided by :math:`s` again."""
        s = rate_scale(self.qmax)
        if s < 1.0:         # down: exact only while the smallest rate stays a normal double
            # (the smallest non-zero entry of Q is its smallest rate: q_i is at least each rate of row i;
            # Q's own entries on scipy, where local_rows would make and keep R)
            small = self.generator_rows(False).data
            small = self.allmin(float(np.abs(small[small != 0]).min(initial=np.inf)))
            s = s if small * s >= np.finfo(float).tiny else 1.0
        if s == 1.0:
            return self, 1.0
        kept = getattr(self, "_normalised", None)
        if kept is None:
            kept = self._normalised = self.rescaled(s)
        return kept, s

    # --- housekeeping ------------------------------------------------------
    def memory(self) -> dict:
        """Peak resident memory of each process (MiB) and matrix entries held here."""
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        return {"peak_mib_per_rank": [peak], "local_nnz": None}
