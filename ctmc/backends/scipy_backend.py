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
from scipy.sparse.csgraph import breadth_first_order

from .._relax import product
from .._sparse_lu import splu
from ..results import Status
from .base import LinearSpec, Operator, SolveReport, System

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

    Parameters
    ----------
    Q : scipy.sparse.csr_matrix
        The generator.
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
        self.exit_rates = -np.asarray(Q.diagonal(), dtype=float)
        self.qmax = float(self.exit_rates.max()) if n else 0.0
        R = Q.tocsr(copy=True)
        R.setdiag(0.0)
        R.eliminate_zeros()
        self.R = R
        self._RT = None
        self._QT = None

    # --- collectives ---------------------------------------------------------
    def allsum(self, x):
        return np.array(x, dtype=float) if np.ndim(x) else float(x)

    def allmax(self, x) -> float:
        return float(x)

    def gather(self, local, mode="all"):
        return np.asarray(local)

    def gather_rows(self, members):
        return self.R[np.flatnonzero(members)]

    # --- the generator -------------------------------------------------------
    @property
    def RT(self) -> sp.csr_matrix:
        if self._RT is None:
            self._RT = self.R.T.tocsr()
        return self._RT

    def rates(self, x, transpose=False):
        return (self.RT if transpose else self.R) @ x

    def apply(self, x, transpose=False):
        # the generator itself (the same rounding as a user's own Q.T @ pi)
        if transpose:
            if self._QT is None:
                self._QT = self.Q.T.tocsr()
            return product(self._QT, x)
        return product(self.Q, x)

    def local_rows(self, transpose=False):
        return self.RT if transpose else self.R

    # --- structure -----------------------------------------------------------
    def reach(self, seeds, within=None, forward=False):
        n = self.n
        A = self.R if forward else self.RT       # row = where the search comes from
        indptr, indices = A.indptr, A.indices
        seeds = np.asarray(seeds, dtype=bool)
        if within is not None:
            ok = np.asarray(within, dtype=bool) | seeds
            keep = ok[indices]                   # the search only enters allowed states (and seeds)
            indices = indices[keep]
            rows = np.repeat(np.arange(n), np.diff(indptr))
            indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=n))])
        s = np.flatnonzero(seeds)
        # a virtual root (row n) joined to every seed
        G = sp.csr_matrix((np.ones(indices.size + s.size, dtype=np.int8), np.concatenate([indices, s]),
                           np.concatenate([indptr, [indices.size + s.size]])), shape=(n + 1, n + 1))
        order = breadth_first_order(G, n, directed=True, return_predecessors=False)
        mask = np.zeros(n + 1, dtype=bool)
        mask[order] = True
        return mask[:n]

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
        if self._QT is None:
            self._QT = self.Q.T.tocsr()
        out = sla.expm_multiply(self._QT * float(dt), np.asarray(p, dtype=float))
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


class ScipySystem(System):
    """``M = s I - Q_XX`` extracted on ``X`` and factorised (SuperLU) or Krylov-solved."""

    def __init__(self, op: ScipyOperator, members, shift, spec: LinearSpec, backend_options: dict):
        self.op, self.spec, self.bo = op, spec, backend_options
        self.idx = np.flatnonzero(members)
        self.info = {}
        idx = self.idx
        Rxx = op.R[idx][:, idx]
        self.M = (sp.diags(shift + op.exit_rates[idx]) - Rxx).tocsc()
        self._lu = None
        self._failure = None
        self._krylov = {}
        if spec.kind == "lu" and idx.size:
            try:
                self._lu, self.info["ordering"] = splu(self.M, spec.ordering)
            except MemoryError as exc:      # splu turns SuperLU's failed allocation into one
                raise MemoryError(f"SuperLU ran out of memory on {idx.size} unknowns ({exc})") from exc
            except RuntimeError as exc:  # an exactly singular pivot
                self._failure = f"SuperLU failed: {exc}"
            else:
                self.info["fill"] = int(self._lu.L.nnz + self._lu.U.nnz)
        elif spec.kind in ("gmres", "bicgstab"):
            self.info["preconditioner"] = spec.preconditioner

    def _preconditioner(self, A):
        """The function ``v -> P v`` of the preconditioner of ``A`` (None for none); made once per matrix."""
        kind = self.spec.preconditioner
        if kind == "sgs":
            return ssor1(A)
        if kind == "ilu":
            ilu = sla.spilu(A.tocsc(), drop_tol=self.bo.get("ilu_drop_tol", 1e-6),
                            fill_factor=self.bo.get("ilu_fill_factor", 20.0))
            return ilu.solve
        if kind == "jacobi":
            dinv = 1.0 / A.diagonal()
            return lambda v: dinv * v
        return None

    def _solve_krylov(self, b, transpose):
        if transpose not in self._krylov:
            A = (self.M.T if transpose else self.M).tocsr()
            try:
                P = self._preconditioner(A)
            except RuntimeError as exc:
                self._krylov[transpose] = (A, f"incomplete LU failed: {exc}", 0.0)
            else:
                # ||A||_inf for the backward error, once per matrix (abs(A) is a copy of A)
                self._krylov[transpose] = (A, P, float(abs(A).sum(axis=1).max()) if A.nnz else 0.0)
        A, P, normA = self._krylov[transpose]
        if isinstance(P, str):
            return np.zeros_like(b), SolveReport(Status.BREAKDOWN, P, 0)
        spec = self.spec
        if spec.kind == "gmres":
            from ..krylov import gmres
            y, rep = gmres(A, b, P, rtol=spec.rtol,
                           restart=spec.restart, maxiter=spec.maxiter, norm_a=normA)
            if rep.breakdown:
                return y, SolveReport(Status.BREAKDOWN, "gmres broke down", rep.iterations)
            if rep.converged:
                return y, SolveReport(Status.SUCCESS, f"gmres converged in {rep.iterations} iterations",
                                      rep.iterations)
            return y, SolveReport(Status.MAX_ITERATIONS, "gmres stopped at its iteration limit "
                                  f"(backward error {rep.backward_error:.1e})", rep.iterations)
        count = [0]

        def cb(_):
            count[0] += 1
        # Stop on the normwise backward error ||b - A y|| <= rtol (||A|| ||y|| + ||b||), which
        # is attainable (scipy's own test ||b - A y|| <= rtol ||b|| may not be, on
        # ill-conditioned systems): run in chunks, check, go on from the iterate.
        from ..krylov import backward_error
        from ..progress import Progress
        y = np.zeros_like(b)
        chunk = 10 * spec.restart
        P = sla.LinearOperator(A.shape, P) if P is not None else None
        with Progress(f"BiCGStab on {np.size(b)} unknowns") as prog:
            while True:
                before = count[0]
                left = spec.maxiter - count[0]
                y, code = sla.bicgstab(A, b, x0=y, rtol=spec.rtol, atol=0.0, maxiter=min(chunk, left), M=P,
                                       callback=cb)
                if code < 0 or not np.all(np.isfinite(y)):
                    return y, SolveReport(Status.BREAKDOWN, f"{spec.kind} broke down", count[0])
                be = backward_error(b - A @ y, y, b, normA)
                if code == 0 or be <= spec.rtol:
                    return y, SolveReport(Status.SUCCESS, f"{spec.kind} converged in {count[0]} iterations",
                                          count[0])
                if count[0] >= spec.maxiter or count[0] == before:
                    return y, SolveReport(Status.MAX_ITERATIONS, f"{spec.kind} stopped at its iteration limit "
                                          f"(backward error {be:.1e})", count[0])
                prog.residual(be, spec.rtol, f"step {count[0]}", name="backward error")

    def solve(self, b, transpose=False):
        b = np.asarray(b, dtype=float)
        x = np.zeros_like(b)
        idx = self.idx
        if idx.size == 0:
            return x, SolveReport()
        if self._failure is not None:
            return x, SolveReport(Status.BREAKDOWN, self._failure)
        bx = np.ascontiguousarray(b[idx])
        if self._lu is not None:
            x[idx] = self._lu.solve(bx, trans="T" if transpose else "N")
            return x, SolveReport(Status.SUCCESS, "sparse LU (SuperLU)")
        rep = SolveReport()
        if bx.ndim == 1:
            x[idx], rep = self._solve_krylov(bx, transpose)
            return x, rep
        reports = []
        for c in range(bx.shape[1]):
            x[idx, c], r = self._solve_krylov(bx[:, c], transpose)
            reports.append(r)
        from .base import worst
        st = worst(*(r.status for r in reports))
        return x, SolveReport(st, reports[-1].reason, sum(r.iterations for r in reports))

    def close(self):
        self._lu = None
        self._krylov.clear()
