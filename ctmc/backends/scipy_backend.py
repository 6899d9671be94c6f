"""The default backend: SciPy sparse linear algebra in one process.

Primitives only (the protocol of :mod:`ctmc.backends.base`): the process
owns every row, collectives are the identity, direct solves use SuperLU with
diagonal pivots and a profile-based ordering (:mod:`ctmc._sparse_lu`), Krylov
solves GMRES (:func:`ctmc.krylov.gmres`: it stops on an attainable backward
error) or :func:`scipy.sparse.linalg.bicgstab` with a symmetric
Gauss-Seidel sweep (compiled, :mod:`ctmc._relax`), an incomplete LU
(:func:`scipy.sparse.linalg.spilu`) or a Jacobi preconditioner, the null vector
ARPACK (:func:`scipy.sparse.linalg.eigs`) and the matrix-exponential action
:func:`scipy.sparse.linalg.expm_multiply`.

Backend settings (``backend_options``): ``ilu_drop_tol`` (default 1e-6) and
``ilu_fill_factor`` (default 20), the parameters of ``spilu``.
"""
from __future__ import annotations

import weakref

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from .._relax import product, product_rows
from .._sparse_lu import splu
from .._util import trim_heap
from ..results import Status
from .base import LinearSpec, Operator, SolveReport, System, stalled_report
from .csr import (closed_components, generator_product, graph_reach, inf_norm, lowest_columns, masked_block,
                  masked_transpose, offdiagonal_column_counts, offdiagonal_counts, offdiagonal_product,
                  offdiagonal_rows, principal_block, rate_columns)

__all__ = ["ScipyOperator", "operator", "ssor1", "BACKEND_OPTIONS", "check_backend_options"]

#: settings of this backend in ``backend_options``
BACKEND_OPTIONS = ("ilu_drop_tol", "ilu_fill_factor")


def check_backend_options(opts: dict) -> None:
    """Validate the scipy backend's settings (ValueError naming the bad one)."""
    for k in BACKEND_OPTIONS:
        if k in opts:
            v = opts[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"backend_options: {k} must be a positive number, got {v!r}")


_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def operator(chain) -> "ScipyOperator":
    """The scipy operator of ``chain`` (made once per chain and generator)."""
    op = _CACHE.get(chain)
    if op is None or op.Q is not chain.Q:
        op = ScipyOperator(chain.Q, states=chain.states, initial=chain.initial)
        _CACHE[chain] = op
    return op


class ScipyOperator(Operator):
    """Primitives on a generator held whole by one process.

    The chain's own ``Q`` (CSR, shared, never copied) and, made once when
    first needed, its transpose ``Q^T`` (CSR) and the exit rates (a vector) are all this holds: the rates
    ``R`` (``Q`` without its diagonal) are read from them in passes over
    their arrays (:mod:`ctmc.backends.csr`), and a linear system extracts its
    matrix from the one of the two that has its rows (:class:`ScipySystem`).

    ``Q^T`` is made for what needs its rows (a backward search, a transposed
    system's matrix, ``R^T`` as a matrix); the products with ``R^T`` and
    ``Q^T`` and the counts of ``R^T``'s rows are read from it while it is
    held and from ``Q``'s rows otherwise (the same numbers: the same terms
    added in the same order), so that after :meth:`release` (a Krylov solve
    holding its basis) the stationary answer's residual and error bound do
    not make the transpose again.

    Parameters
    ----------
    Q : scipy.sparse.csr_matrix
        The generator (canonical: sorted indices, no duplicates).
    states : StateTable, optional
    initial : ndarray of int, optional
    """

    backend = "scipy"

    def __init__(self, Q: sp.csr_matrix, states=None, initial=None):
        self.Q = Q
        n = Q.shape[0]
        self.n, self.start, self.stop = n, 0, n
        self.rank, self.size = 0, 1
        self.states, self.initial = states, initial
        self._exit = None
        self.qmax = float(self.exit_rates.max()) if n else 0.0
        self._QT = None
        self._rates = {}           # R, R^T as matrices, made only when local_rows asks for them
        self._zeros = None         # whether Q stores a zero (a zero rate, or an absorbing state's diagonal)

    # --- collectives ---------------------------------------------------------
    def allsum(self, x):
        return np.array(x, dtype=float) if np.ndim(x) else float(x)

    def allmax(self, x) -> float:
        return float(x)

    def gather(self, local, mode="all"):
        return np.asarray(local)

    def gather_rows(self, members):
        return offdiagonal_rows(self.Q, np.flatnonzero(members))

    # --- the generator -------------------------------------------------------
    @property
    def exit_rates(self) -> np.ndarray:
        """``q_i = -Q_ii``, made from ``Q``'s diagonal when first asked (and again after :meth:`release`:
        the same numbers)."""
        q = self._exit
        if q is None:
            q = self._exit = -np.asarray(self.Q.diagonal(), dtype=float)
        return q

    @property
    def QT(self) -> sp.csr_matrix:
        """``Q^T`` in CSR, made once (and again after :meth:`release`)."""
        if self._QT is None:
            self._QT = self.Q.T.tocsr()
        return self._QT

    def generator_rows(self, transpose=False):
        return self.QT if transpose else self.Q

    @property
    def R(self) -> sp.csr_matrix:
        """The rates ``R``: ``Q`` without its diagonal (a matrix of its own, kept once made)."""
        return self.local_rows(False)

    @property
    def RT(self) -> sp.csr_matrix:
        return self.local_rows(True)

    def local_rows(self, transpose=False):
        A = self._rates.get(transpose)
        if A is None:
            A = self._rates[transpose] = offdiagonal_rows(self.generator_rows(transpose))
        return A

    def rate_columns(self, rows, cols):
        # from Q's own rows (its diagonal dropped by the pass): R is not made for a few columns
        return rate_columns(self.Q, rows, cols)

    def rates(self, x, transpose=False):
        A = self._rates.get(transpose)
        if A is not None:
            return A @ x
        if transpose and self._QT is None:       # R^T x from Q's rows: the same sums, no transpose made
            return offdiagonal_product(self.Q, x, transpose=True)
        return offdiagonal_product(self.generator_rows(transpose), x)

    def apply(self, x, transpose=False):
        # the generator itself (the same rounding as a user's own Q.T @ pi)
        if transpose and self._QT is None:
            return generator_product(self.Q, np.asarray(x, dtype=float), transpose=True)
        return product(self.QT if transpose else self.Q, x)

    def apply_blocks(self, x, transpose=False):
        A = self.Q if not transpose else self._QT
        if A is None or np.ndim(x) != 1:                  # Q^T x from Q's rows (a scatter): one block
            yield 0, self.apply(x, transpose)
            return
        buf = np.empty(min(APPLY_BLOCK, self.n))          # one block, written again for each (read in turn)
        for s in range(0, self.n, APPLY_BLOCK):           # the rows of the matrix held, a block at a time
            e = min(s + APPLY_BLOCK, self.n)
            yield s, product_rows(A, x, s, e, out=buf[:e - s])

    def offdiagonal_counts(self, transpose=False):
        if transpose and self._QT is None:
            # counted from Q's columns: Q^T is not made again for a count (the error bound asks
            # for it while its own system fills the memory Q^T was released from)
            return offdiagonal_column_counts(self.Q)
        return offdiagonal_counts(self.generator_rows(transpose))

    def lowest_columns(self, transpose=False, out=None):
        if transpose and self._QT is None:       # from Q's columns: Q^T is not made for a structure fact
            return lowest_columns(self.Q, 0, out=out, transpose=True)
        return lowest_columns(self.generator_rows(transpose), 0, out=out)

    def release(self):
        """Drop what is made again on demand (``Q^T``, ``R``, ``R^T``, the exit rates): before a large
        solve."""
        self._QT = None
        self._exit = None
        self._rates.clear()

    def rescaled(self, factor: float) -> "ScipyOperator":
        Q = self.Q.copy()
        Q.data *= factor
        return ScipyOperator(Q, states=self.states, initial=self.initial)

    def releasable(self) -> int:
        """Bytes :meth:`release` frees now (what it drops, as made so far)."""
        held = [self._QT, *self._rates.values()]
        return int(sum(A.data.nbytes + A.indices.nbytes + A.indptr.nbytes for A in held if A is not None)
                   + (0 if self._exit is None else self._exit.nbytes))

    # --- structure -----------------------------------------------------------
    def _stores_zeros(self) -> bool:
        # a stored zero rate (a user's generator may hold some) is not a transition: the searches read
        # the values too where Q stores a zero
        if self._zeros is None:
            self._zeros = bool(np.any(self.Q.data == 0))
        return self._zeros

    def reach(self, seeds, within=None, forward=False):
        # row = where the search comes from; the diagonal's self-loops change nothing
        return graph_reach(self.generator_rows(not forward), seeds, within, skip_zeros=self._stores_zeros())

    def closed_class_masks(self, most=None):
        # the strongly connected components of Q's rows that no rate leaves (csr.closed_components): Q^T,
        # which a search backwards reads, is not made; a mask a class (none beyond ``most`` classes: a mask
        # of every state each, 15,000 of them on a chain of 30,000 states), the labels freed in between
        labels, closed = closed_components(self.Q, skip_zeros=self._stores_zeros())
        found = np.flatnonzero(closed)
        masks = [labels == c for c in found] if most is None or found.size <= most else []
        del labels
        trim_heap()                             # (the search's work, freed in the heap's middle)
        return sorted(masks, key=lambda C: int(np.argmax(C)))

    # --- linear algebra ------------------------------------------------------
    def system(self, members, shift, spec: LinearSpec, backend_options=None):
        return ScipySystem(self, np.asarray(members, dtype=bool), float(shift), spec, backend_options or {})

    def null_vector(self, support, *, tol, maxiter=None, ncv=None, backend_options=None):
        idx = np.flatnonzero(support)
        lam = 1.02 * self.qmax
        sub = self.Q[idx][:, idx]
        PT = (sp.identity(idx.size, format="csr") + sub.T.tocsr() / lam).tocsr()
        info = {"uniformization_rate": lam}
        x = np.zeros(self.n)
        if idx.size < 3:   # ARPACK needs k < n - 1: a dense eigensolve
            w, V = np.linalg.eig(PT.toarray())
            j = int(np.argmin(np.abs(w - 1.0)))
            info["eigenvalue"] = complex(w[j])
            x[idx] = np.real(V[:, j])
            return x, SolveReport(Status.SUCCESS, "dense eigensolve", 0, info)
        try:
            vals, vecs = sla.eigs(PT, k=1, which="LM", v0=np.full(idx.size, 1.0 / idx.size), tol=tol,
                                  maxiter=maxiter, ncv=ncv)
        except sla.ArpackNoConvergence as exc:
            if exc.eigenvectors.size:
                x[idx] = np.real(exc.eigenvectors[:, 0])
                return x, SolveReport(Status.MAX_ITERATIONS, "ARPACK did not converge", 0, info)
            return None, SolveReport(Status.MAX_ITERATIONS, "ARPACK did not converge", 0, info)
        info["eigenvalue"] = complex(vals[0])
        x[idx] = np.real(vecs[:, 0])
        return x, SolveReport(Status.SUCCESS, f"ARPACK eigenvalue {complex(vals[0]).real:.15g}", 0, info)

    def expm_action(self, p, dt, *, tol, backend_options=None):
        out = sla.expm_multiply(self.QT * float(dt), np.asarray(p, dtype=float))
        return out, SolveReport(Status.SUCCESS, "expm_multiply (Al-Mohy and Higham)", 0, {})


def ssor1(A: sp.spmatrix):
    r"""The symmetric Gauss-Seidel preconditioner of ``A``: ``v -> (D - U)^{-1} D (D - L)^{-1} v``.

    With :math:`A = D - L - U` (diagonal, strictly lower, strictly upper
    parts), one forward Gauss-Seidel sweep on :math:`Ax = v` from
    :math:`x = 0` gives :math:`x_1 = (D-L)^{-1}v`, and the backward sweep
    after it solves :math:`(D-U)x_2 = v + Lx_1 = Dx_1`: so the two sweeps
    are the triangular solves with :math:`D - L` and :math:`D - U`, SSOR(1)
    (Saad, *Iterative Methods for Sparse Linear Systems*, 2003, §10.2).
    Done that way each triangle is read once, about one matrix-vector
    product in all, instead of twice the whole matrix (a forward sweep from
    0 multiplies the upper triangle by zeros). The compiled kernel
    (:func:`ctmc._relax.symmetric_gauss_seidel`) makes both solves on the
    matrix's own sorted rows, knowing where each row's diagonal is: no copy
    of the triangles (the fallback, pyamg's sweeps, copies them once).
    A zero diagonal entry leaves its unknown at 0, as the sweeps do.

    Parameters
    ----------
    A : scipy.sparse matrix, square, float64

    Returns
    -------
    callable
        ``v -> P v`` on 1-D arrays (a new array each call).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[4.0, -1.0, 0.0], [-2.0, 4.0, -1.0], [0.0, -1.0, 3.0]]))
    >>> D, L, U = np.diag(np.diag(A.toarray())), -np.tril(A.toarray(), -1), -np.triu(A.toarray(), 1)
    >>> v = np.array([1.0, 2.0, 3.0])
    >>> bool(np.allclose(ssor1(A)(v), np.linalg.solve(D - U, D @ np.linalg.solve(D - L, v))))
    True
    """
    from .._relax import symmetric_gauss_seidel

    return symmetric_gauss_seidel(A)


#: rows of a product :meth:`ScipyOperator.apply_blocks` makes at a time (a 128 KiB block)
APPLY_BLOCK = 1 << 14

#: a Krylov system leaving out at most this many states masks them instead of extracting its block
MASKED_STATES = 16


def _not_converged(spec, rep) -> SolveReport:
    """The report of a Krylov solve (GMRES or BiCGStab) that stopped short of ``rtol``: stalled
    (:class:`ctmc.krylov.Stall`, ``spec.stall``) or at its iteration limit."""
    if rep.stalled:
        return stalled_report(spec, rep.iterations, f"backward error {rep.backward_error:.1e}")
    return SolveReport(Status.MAX_ITERATIONS, f"{spec.kind} stopped at its iteration limit "
                       f"(backward error {rep.backward_error:.1e})", rep.iterations)


class ScipySystem(System):
    """``M = s I - Q_XX`` extracted on ``X`` and factorised (SuperLU) or Krylov-solved.

    The matrix of each orientation is extracted when first solved, from the
    operator's rows of ``Q`` (for ``M``) or of ``Q^T`` (for ``M^T``, which is
    also ``M`` in CSC, SuperLU's input), in one pass (:func:`principal_block`);
    a Krylov system then releases the operator's ``Q^T`` for the length of
    the solve (made again when next needed). A Krylov system (shift 0, the
    Gauss-Seidel, Jacobi or no preconditioner) of all states but at most
    :data:`MASKED_STATES` masks the others in a copy of the generator's values
    instead (:func:`masked_block`) and solves in the chain's numbering.
    """

    def __init__(self, op: ScipyOperator, members, shift, spec: LinearSpec, backend_options: dict):
        self.op, self.spec, self.bo = op, spec, backend_options
        self.members = np.array(members, dtype=bool)
        self.shift = float(shift)
        self._count = int(np.count_nonzero(self.members))
        self.info = {}
        # a Krylov system of all states but a few (a pinned class that is the whole chain) masks them in
        # a copy of the generator's values instead of extracting its block (csr.masked_block): the solve
        # runs in the chain's numbering, the few rows decoupled (a right-hand side zero there); it holds
        # the mask only (the index set, the diagonal and the rows, a vector each, are made if it falls
        # back to the extracted block)
        self._masked = bool(spec.kind in ("gmres", "bicgstab") and shift == 0.0 and self._count
                            and op.n - self._count <= MASKED_STATES
                            and spec.preconditioner in ("sgs", "ilu0", "jacobi", "none"))
        # the largest diagonal entry: the masked rows' fill (shift + max e_i, the max of shift + e_i exactly)
        self._fill = self.shift + float(np.max(op.exit_rates, where=self.members, initial=-np.inf)) \
            if self._count else 0.0
        self._idx = None
        self._lu = None
        self._failure = None
        self._krylov = {}
        self._work = None                 # BiCGStab's vectors made ahead (reserve), taken by the next solve
        if spec.kind == "lu" and self._count:
            MT = self.matrix(transpose=True)
            M = sp.csc_matrix((MT.data, MT.indices, MT.indptr), shape=MT.shape)   # M^T in CSR is M in CSC
            try:
                self._lu, self.info["ordering"] = splu(M, spec.ordering)
            except MemoryError as exc:      # splu turns SuperLU's failed allocation into one
                raise MemoryError(f"SuperLU ran out of memory on {self._count} unknowns ({exc})") from exc
            except RuntimeError as exc:  # an exactly singular pivot
                self._failure = f"SuperLU failed: {exc}"
            else:
                # the factors' entries as SuperLU stores them (supernodes): reading .L and .U would
                # copy both factors into scipy matrices (0.8 GB at 2e6 unknowns) to count them
                self.info["fill"] = int(self._lu.nnz)
        elif spec.kind in ("gmres", "bicgstab"):
            self.info["preconditioner"] = spec.preconditioner

    @property
    def idx(self) -> np.ndarray:
        """The members' indices (int64), made when first asked (an extracted block, a direct solve)."""
        if self._idx is None:
            self._idx = np.flatnonzero(self.members)
        return self._idx

    @property
    def _rows(self):
        """Where the solve's unknowns sit in the chain's numbering: every state (masked) or the members."""
        return slice(None) if self._masked else self.idx

    def matrix(self, transpose=False) -> sp.csr_matrix:
        """``M`` (or ``M^T``) on ``X`` in CSR, a new matrix (:func:`principal_block`), or the masked
        generator of a Krylov system of nearly every state (:func:`masked_block`)."""
        rows = self.op.generator_rows(transpose)
        if self._masked:
            M = masked_block(rows, self.members, self._fill)
            if M is not None:
                return M
            self._masked = False                             # a left-out state stores no diagonal entry
        return principal_block(rows, self.members, self.shift + self.op.exit_rates[self.idx])

    def _preconditioner(self, A):
        """The function ``v -> P v`` of the preconditioner of ``A`` (None for none); made once per matrix."""
        kind = self.spec.preconditioner
        if kind in ("sgs", "ilu0"):       # ilu0 is read from Q's rows (MaskedTranspose) only: SSOR(1) here
            self.info["preconditioner"] = "sgs"
            return ssor1(A)
        if kind == "ilu":
            ilu = sla.spilu(A.tocsc(), drop_tol=self.bo.get("ilu_drop_tol", 1e-6),
                            fill_factor=self.bo.get("ilu_fill_factor", 20.0))
            return ilu.solve
        if kind == "jacobi":
            dinv = 1.0 / A.diagonal()
            return lambda v: dinv * v
        if kind == "multilevel":          # aggregation V-cycle, all of it in ctmc.multigrid
            from ..multigrid import setup
            H = setup(A)
            self.info.update(multilevel_sizes=H.sizes, multilevel_setup_seconds=H.seconds)
            return H
        return None

    def prepare(self, transpose=False):
        if self.spec.kind in ("gmres", "bicgstab") and self._count and transpose not in self._krylov:
            self._krylov_setup(transpose)

    def _krylov_setup(self, transpose):
        A = self._masked_transpose(transpose)
        if A is not None:          # M or M^T read from Q's rows: neither Q^T nor a matrix of the system is held
            self.op.release()
            P = A.ilu0() if self.spec.preconditioner == "ilu0" else None
            self.info["preconditioner"] = "ilu0" if P is not None else "sgs"
            self._krylov[transpose] = (A, P or A.ssor(), A.inf_norm())
            return
        if not transpose:
            self.op.release()    # M comes from Q's rows: Q^T is freed before M is made, not after
        A = self.matrix(transpose)
        self.op.release()        # Q^T (and R, R^T if made) wait outside while the basis is held
        try:
            P = self._preconditioner(A)
        except RuntimeError as exc:
            self._krylov[transpose] = (A, f"incomplete LU failed: {exc}", 0.0)
        else:
            # ||A||_inf for the backward error, once per matrix
            self._krylov[transpose] = (A, P, inf_norm(A) if A.nnz else 0.0)

    def _masked_transpose(self, transpose):
        """GMRES or BiCGStab with SSOR(1) or ILU(0) on the masked ``M^T`` (BiCGStab with them on ``M``) reads
        the system from ``Q``'s rows (:class:`MaskedTranspose`) where the compiled kernels run: None otherwise
        (the matrix is made)."""
        from .._relax import ssor_blocks
        kinds = ("gmres", "bicgstab") if transpose else ("bicgstab",)     # M (the bound's) has no fused product
        if not (self._masked and self.spec.kind in kinds and self.spec.preconditioner in ("sgs", "ilu0")
                and ssor_blocks(self.op.n) == 1):
            return None
        return masked_transpose(self.op.Q, self.members, self._fill, transpose=transpose)

    def _solve_krylov(self, b, transpose, overwrite_b=False):
        if transpose not in self._krylov:
            self._krylov_setup(transpose)
        A, P, normA = self._krylov[transpose]
        if isinstance(P, str):
            return np.zeros_like(b), SolveReport(Status.BREAKDOWN, P, 0)
        spec = self.spec
        if spec.kind == "gmres":
            from ..krylov import gmres
            y, rep = gmres(A, b, P, rtol=spec.rtol,
                           restart=spec.restart, maxiter=spec.maxiter, norm_a=normA, stall=spec.stall)
            if rep.breakdown:
                return y, SolveReport(Status.BREAKDOWN, "gmres broke down", rep.iterations)
            if rep.converged:
                return y, SolveReport(Status.SUCCESS, f"gmres converged in {rep.iterations} iterations",
                                      rep.iterations)
            return y, _not_converged(spec, rep)
        # BiCGStab (ctmc.krylov): the recurred-residual test rtol, and where asked on b >= 0, the
        # componentwise bracket of the M-matrix solution (spec.bracket)
        from ..krylov import bicgstab
        bracket = spec.bracket if b.size and b.min() >= 0 and b.max() > 0 else 0.0
        work, self._work = (self._work if self._work and self._work[0].size == b.size else None), None
        y, rep = bicgstab(A, b, P, rtol=spec.rtol, maxiter=spec.maxiter, norm_a=normA, bracket=bracket,
                          stall=spec.stall, work=work, overwrite_b=overwrite_b)
        if rep.breakdown or not np.all(np.isfinite(y)):
            return y, SolveReport(Status.BREAKDOWN, f"{spec.kind} broke down", rep.iterations)
        if rep.converged or rep.backward_error <= spec.rtol:
            how = "stopped on its bracket" if rep.accepted else "converged"
            return y, SolveReport(Status.SUCCESS, f"{spec.kind} {how} in {rep.iterations} iterations", rep.iterations)
        return y, _not_converged(spec, rep)

    def solve(self, b, transpose=False, overwrite_b=False):
        b = np.asarray(b, dtype=float)
        if self._count == 0 or self._failure is not None:
            return np.zeros_like(b), (SolveReport() if self._count == 0
                                      else SolveReport(Status.BREAKDOWN, self._failure))
        if self._lu is not None:
            idx = self.idx
            x = np.zeros_like(b)
            x[idx] = self._lu.solve(np.ascontiguousarray(b[idx]), trans="T" if transpose else "N")
            return x, SolveReport(Status.SUCCESS, "sparse LU (SuperLU)")
        if self._masked and transpose not in self._krylov:
            self._krylov_setup(transpose)                 # may fall back to the extracted block
        rows = self._rows
        if b.ndim == 1 and self._masked and b.size == self.op.n:
            # the chain's numbering: the solve's own answer is returned (no embedding beside the basis); a
            # right-hand side already zero off the members is solved as it is (the solvers only read it)
            mine = bool(np.any(b, where=~self.members))     # (the others' mask not held beside the solve)
            bm = np.where(self.members, b, 0.0) if mine else b
            y, rep = self._solve_krylov(bm, transpose, overwrite_b=mine or overwrite_b)
            np.copyto(y, 0.0, where=~self.members)
            return y, rep
        keep = self.members if self._masked else None
        bx = np.ascontiguousarray(b[rows] if keep is None else np.where(keep.reshape((-1,) + (1,) * (b.ndim - 1)),
                                                                          b[rows], 0.0))
        rep, x = SolveReport(), np.zeros_like(b)
        if bx.ndim == 1:                                  # (bx is a copy of b's rows: the solve may write it)
            x[rows], rep = self._solve_krylov(bx, transpose, overwrite_b=True)
            if keep is not None:
                x[~self.members] = 0.0
            return x, rep
        reports = []
        for c in range(bx.shape[1]):
            x[rows, c], r = self._solve_krylov(bx[:, c], transpose)
            reports.append(r)
        if keep is not None:
            x[~self.members] = 0.0
        from .base import worst
        st = worst(*(r.status for r in reports))
        return x, SolveReport(st, reports[-1].reason, sum(r.iterations for r in reports))

    def loosened(self, rtol):
        """A Krylov system sharing this one's matrix, preconditioner and norm (the same ``_krylov``)."""
        if self.spec.kind not in ("gmres", "bicgstab"):
            return None
        import copy
        import dataclasses
        other = copy.copy(self)
        other.spec = dataclasses.replace(self.spec, rtol=float(rtol))
        return other

    def reserve(self):
        if self.spec.kind == "bicgstab" and self._count and self._lu is None:
            from ..krylov import bicgstab_work
            self._work = bicgstab_work(self.op.n if self._masked else self._count)

    def close(self):
        self._lu = None
        self._work = None
        self._krylov.clear()
