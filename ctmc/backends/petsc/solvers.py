r"""The PETSc backend's heavy linear algebra: KSP systems, SLEPc eigen and exponential solvers.

* :class:`PetscSystem`: :math:`M = sI - Q_{XX}` in the full numbering, rows
  and columns outside :math:`X` replaced by the identity (``MatZeroRowsColumns``,
  same numbering on every process), solved by a KSP configured from a
  :class:`~ctmc.backends.base.LinearSpec`;
* :func:`null_vector`: SLEPc Krylov-Schur for the eigenvalue 1 of the
  uniformised :math:`P^T = I + Q^T/\Lambda` on a closed class;
* :func:`expm_action`: SLEPc MFN, :math:`e^{Q^T t} p`.

Every object gets the options prefix ``ctmc_``; per-call ``petsc_options``
are applied after ctmc's defaults, so any PETSc option wins.
"""
from __future__ import annotations

import numpy as np

from ...krylov import Stall
from ...results import Status
from ..base import SolveReport, System, stalled_report, worst
from ._env import load_petsc, load_slepc
from .options import PCTYPE, PRECONDITIONERS, PREFIX, ksp_status, scoped_options, slepc_status

__all__ = ["PetscSystem", "null_vector", "expm_action", "factor_package"]

#: PETSC_ERR_MEM: a failed allocation
_ERR_MEM = 55
#: PETSc's own ordering names, accepted in LinearSpec.ordering (others leave the package's default)
_PETSC_ORDERINGS = {"natural": "natural", "NATURAL": "natural", "nd": "nd", "1wd": "1wd", "rcm": "rcm",
                    "qmd": "qmd", "rowlength": "rowlength", "amd": "amd"}


#: MUMPS ICNTL(7) used when no ordering is asked for: 6, approximate minimum degree with
#: quasi-dense row detection (measured against 0 AMD, 2 AMF, 3 SCOTCH, 4 PORD, 5 METIS on JSQ
#: K=2000: 5.5 s against 11.8, 7.3, 10.0, 10.0, 15.7 s, build and evidence included)
_MUMPS_ORDERING = 6

#: MUMPS options of ctmc's factorisations: diagonal pivots, as with SuperLU on scipy. ctmc factorises
#: M-matrices (``s I - Q_XX`` and the pinned stationary system), where elimination in any symmetric
#: order keeps the signs (off-diagonal entries <= 0, pivots > 0), so the triangular solves of a
#: non-negative right-hand side add only non-negative terms and the small entries of the answer keep
#: their relative accuracy. A row interchange breaks that: its rounding, of the size of the largest
#: entries, lands on the smallest ones. On one process MUMPS's threshold pivoting (CNTL(1) = 0.01)
#: rarely swaps on these matrices, but on several processes the root front is factorised by
#: ScaLAPACK with partial pivoting (ICNTL(13) = 0): JSQ K=1000 on two processes gave P_block
#: 7.8e-8 off and 41,416 negative probabilities, against 2.9e-12 with ICNTL(13) = 1 (the root front
#: on one process, by MUMPS's own kernel) and CNTL(1) = 0 (no interchange).
_MUMPS_DIAGONAL_PIVOTS = {"mat_mumps_icntl_13": 1, "mat_mumps_cntl_1": 0.0}


def _petsc_options(backend_options):
    return (backend_options or {}).get("petsc_options") or {}


def _raise_if_memory(PETSc, exc):
    if getattr(exc, "ierr", None) == _ERR_MEM:
        raise MemoryError(f"PETSc could not allocate memory ({exc})") from exc


def factor_package(PETSc, size):
    """The direct solver package: MUMPS, else SuperLU_dist, else PETSc's own on one process."""
    for pkg in ("mumps", "superlu_dist"):
        if PETSc.Sys.hasExternalPackage(pkg):
            return pkg
    if size == 1:
        return "petsc"
    raise RuntimeError("no parallel direct solver (MUMPS or SuperLU_dist) in this PETSc build; "
                       "use a Krylov method (gmres or bicgstab)")


def _ksp(dc, A, spec, petsc_options, info):
    """A KSP on ``A`` configured from ``spec``; set up inside the per-call options."""
    PETSc = load_petsc()
    ksp = PETSc.KSP().create(comm=dc.comm)
    ksp.setOperators(A)
    ksp.setOptionsPrefix(PREFIX)
    pc = ksp.getPC()
    if spec.kind == "lu":
        pkg = factor_package(PETSc, dc.size)
        ksp.setType("preonly")
        pc.setType("lu")
        pc.setFactorSolverType(pkg)
        if pkg == "mumps":
            # diagonal pivots, as the scipy route's SuperLU (see _MUMPS_DIAGONAL_PIVOTS); the
            # user's petsc_options still decide
            given = {k.lstrip("-") for k in petsc_options}
            petsc_options = dict(petsc_options, **{
                k: v for k, v in _MUMPS_DIAGONAL_PIVOTS.items()
                if k not in given and not PETSc.Options().hasName(PREFIX + k)})
            info["pivots"] = "diagonal"
        order = _PETSC_ORDERINGS.get(spec.ordering)
        if order is not None:
            pc.setFactorOrderingType(order)
            info["ordering"] = order
        elif (pkg == "mumps" and not any(k.lstrip("-") == "mat_mumps_icntl_7" for k in petsc_options)
              and not PETSc.Options().hasName(PREFIX + "mat_mumps_icntl_7")):
            # MUMPS's own choice (METIS here) takes 21 s on JSQ K=2000 (2e6 states), its
            # approximate minimum degree with quasi-dense rows (QAMD) 5.5 s (with an
            # optimised BLAS); the user's petsc_options still decide
            petsc_options = dict(petsc_options, **{"mat_mumps_icntl_7": _MUMPS_ORDERING})
            info["ordering"] = "mumps QAMD (icntl_7=6)"
        else:
            info["ordering"] = f"{pkg} default"
    else:
        ksp.setType({"gmres": "gmres", "bicgstab": "bcgs"}[spec.kind])
        # "sgs": PCSOR, whose default is a symmetric Gauss-Seidel sweep on each process's block
        pc.setType(PCTYPE[spec.preconditioner])
        if spec.kind == "gmres":
            # right preconditioning: GMRES monitors the unpreconditioned residual
            # (BiCGStab breaks down more often on the right)
            ksp.setPCSide(PETSc.PC.Side.RIGHT)
            ksp.setGMRESRestart(int(spec.restart))
        ksp.setTolerances(rtol=float(spec.rtol), atol=0.0, max_it=int(spec.maxiter))
        if spec.stall:
            ksp.setConvergenceTest(StallTest(int(spec.stall)))
        info["preconditioner"] = {"ilu": "bjacobi+ilu(0)", "sgs": "sor (local symmetric)"}.get(
            spec.preconditioner, spec.preconditioner)
    with scoped_options(petsc_options):
        ksp.setFromOptions()
        # factorisations (MUMPS) and block solvers (sub_ options) read their
        # options at set-up: do it while the per-call options are in place
        try:
            ksp.setUp()
        except PETSc.Error as exc:
            _raise_if_memory(PETSc, exc)
            # a numerical failure is raised again, and mapped to a status, by the solve
    if spec.kind == "lu":
        info["factor_package"] = pc.getFactorSolverType()
        try:
            _check_mumps_memory(PETSc, pc, info)
        except MemoryError:
            ksp.destroy()
            raise
    info["ksp_type"] = ksp.getType()
    info["pc_type"] = pc.getType()
    return ksp


class StallTest:
    r"""A KSP convergence test: PETSc's default one (``KSPConvergedDefault`` with a zero initial
    guess) and the stagnation rule of the scipy backend's Krylov solves, :class:`ctmc.krylov.Stall`.

    At every iteration ``its`` with residual norm :math:`r` (the norm the KSP monitors:
    unpreconditioned for ctmc's right-preconditioned GMRES, preconditioned for BiCGStab), as
    PETSc's: not finite, ``DIVERGED_NANORINF``; :math:`r \le \max(\mathrm{rtol}\, r_0,
    \mathrm{atol})`, converged; :math:`r \ge \mathrm{dtol}\, r_0`, ``DIVERGED_DTOL`` (the
    tolerances read from the KSP, so ``petsc_options`` still decide); then ``Stall(k, r_0)``
    on each new iteration (a GMRES restart tests its iteration again: counted once), and where
    it says so, ``DIVERGED_MAX_IT`` with :attr:`stalled` set. Reset by each solve (``its = 0``).
    """

    def __init__(self, k: int):
        self.k = int(k)
        self.rule, self.r0, self.last, self.stalled = None, 0.0, 0, False

    def __call__(self, ksp, its, rnorm):
        R = load_petsc().KSP.ConvergedReason
        rnorm = float(rnorm)
        if its == 0:
            self.rule, self.r0, self.last, self.stalled = Stall(self.k, rnorm), rnorm, 0, False
        if not np.isfinite(rnorm):
            return R.DIVERGED_NANORINF
        rtol, atol, dtol, _ = ksp.getTolerances()
        if rnorm <= atol:
            return R.CONVERGED_ATOL
        if rnorm <= rtol * self.r0:
            return R.CONVERGED_RTOL
        if its and dtol > 0 and rnorm >= dtol * self.r0:
            return R.DIVERGED_DTOL
        if its > self.last:
            self.last = its
            if self.rule(rnorm):
                self.stalled = True
                return R.DIVERGED_MAX_IT
        return R.ITERATING


#: MUMPS INFOG(1) of failed allocations (-13: allocate failed, -19: above ICNTL(23) MB per process)
_MUMPS_NO_MEMORY = (-13, -19)


def _check_mumps_memory(PETSc, pc, info):
    """Raise MemoryError when MUMPS could not allocate its factors.

    PETSc records such a failure as a PC set-up failure (the solve would only
    say DIVERGED_PC_FAILED); INFOG(1) is the same on every process.
    """
    if info.get("factor_package") != "mumps":
        return
    try:
        code = int(pc.getFactorMatrix().getMumpsInfog(1))
    except PETSc.Error:
        return
    if code in _MUMPS_NO_MEMORY:
        raise MemoryError(f"MUMPS could not allocate the LU factors (INFOG(1) = {code}); use a Krylov "
                          "method or more processes")


class PetscSystem(System):
    """``M = shift * I - Q_XX`` on ``X = members`` (owned mask) of a DistributedChain.

    Transposed solves: ``KSPSolveTranspose`` with the LU factors of MUMPS or
    PETSc's own LU; a second KSP on ``M^T`` (built on first use) for Krylov
    methods and other factor packages.
    """

    def __init__(self, dc, members, shift, spec, backend_options=None):
        PETSc = load_petsc()
        if spec.kind not in ("lu", "gmres", "bicgstab"):
            raise ValueError(f"kind: expected 'lu', 'gmres' or 'bicgstab', got {spec.kind!r}")
        if spec.kind != "lu" and spec.preconditioner not in PRECONDITIONERS:
            raise ValueError(f"preconditioner: the petsc backend has {PRECONDITIONERS}, got "
                             f"{spec.preconditioner!r}")
        self.dc, self.spec = dc, spec
        self.members = np.asarray(members, dtype=bool).copy()
        self.shift = float(shift)
        self._opts = _petsc_options(backend_options)
        self.info = {"kind": spec.kind, "processes": dc.size, "prefix": PREFIX}
        self._ksp_t = self._MT = None
        dc.release()        # the scipy copies of the owned rows wait outside while the solver is held
        try:
            M = dc.R.copy()
            M.scale(-1.0)
            d = dc.vec(self.shift + dc.exit_rates)
            M.setDiagonal(d)
            d.destroy()
            out = (np.flatnonzero(~self.members) + dc.start).astype(PETSc.IntType)
            M.zeroRowsColumns(out, 1.0)
        except PETSc.Error as exc:
            _raise_if_memory(PETSc, exc)
            raise
        self.M = M
        try:
            self.ksp = _ksp(dc, M, spec, self._opts, self.info)
        except BaseException:
            M.destroy()
            raise

    def _transposed_ksp(self):
        # KSPSolveTranspose with the factors is right with MUMPS and PETSc's own LU;
        # SuperLU_dist's transposed solve is not (measured: a wrong pinned stationary
        # law), so other packages factorise M^T itself, like the Krylov methods
        if self.spec.kind == "lu" and self.info.get("factor_package") in ("mumps", "petsc"):
            return self._normal_ksp(), True
        if self._ksp_t is None:
            if self.spec.kind == "lu" and self.ksp is not None:
                # one factorisation alive at a time: two live SuperLU_dist factors
                # corrupted the heap (an abort at PETSc's finalisation)
                self.ksp.destroy()
                self.ksp = None
            self._MT = self.M.transpose(load_petsc().Mat())
            self._ksp_t = _ksp(self.dc, self._MT, self.spec, self._opts, {})
        return self._ksp_t, False

    def _normal_ksp(self):
        if self.ksp is None:
            for obj in (self._ksp_t, self._MT):
                if obj is not None:
                    obj.destroy()
            self._ksp_t = self._MT = None
            self.ksp = _ksp(self.dc, self.M, self.spec, self._opts, self.info)
        return self.ksp

    def solve(self, b, transpose=False, overwrite_b=False):
        """Solve ``M x = b`` (``M^T x = b``) for an owned vector or block ``b`` (copied into PETSc's own
        vector: ``overwrite_b`` changes nothing)."""
        PETSc = load_petsc()
        b = np.asarray(b, dtype=float)
        cols = b[:, None] if b.ndim == 1 else b
        out = np.zeros_like(cols)
        ksp, use_transpose = self._transposed_ksp() if transpose else (self._normal_ksp(), False)
        bv, xv = self.dc.vec(), self.dc.vec()
        status, reason, its = Status.SUCCESS, "", 0
        try:
            for j in range(cols.shape[1]):
                bv.getArray()[:] = np.where(self.members, cols[:, j], 0.0)
                xv.set(0.0)
                try:
                    (ksp.solveTranspose if use_transpose else ksp.solve)(bv, xv)
                except PETSc.Error as exc:
                    _raise_if_memory(PETSc, exc)
                    st, name, k = Status.BREAKDOWN, f"PETSc error {exc}", 0
                else:
                    st, name = ksp_status(ksp.getConvergedReason())
                    k = int(ksp.getIterationNumber())
                    test = (ksp.getConvergenceTest() or (None,))[0]
                    if isinstance(test, StallTest) and test.stalled:
                        rep = stalled_report(self.spec, k, f"residual norm {min(test.rule.best):.1e} "
                                                           f"from {test.r0:.1e}")
                        st, name = rep.status, rep.reason
                    # a numerically singular factorisation can "succeed" with overflowed values
                    # (a global test: every process must report the same status)
                    bad = float(np.count_nonzero(~np.isfinite(xv.getArray()[self.members])))
                    if st is Status.SUCCESS and self.dc.allsum(bad) > 0:
                        st, name = Status.BREAKDOWN, f"{name}; non-finite solution"
                its += k
                if worst(status, st) is not status or not reason:
                    reason = name
                status = worst(status, st)
                out[:, j] = np.where(self.members, xv.getArray(), 0.0)
        finally:
            bv.destroy(), xv.destroy()
        return (out[:, 0] if b.ndim == 1 else out), SolveReport(status, reason, its)

    def close(self):
        for obj in (self.ksp, self.M, self._ksp_t, self._MT):
            if obj is not None:
                obj.destroy()
        self.ksp = self.M = self._ksp_t = self._MT = None


def _generator_T(dc):
    """``Q^T`` as a new PETSc matrix (a copy of the cached ``R^T`` with ``-q`` on the diagonal)."""
    A = dc.transposed_rates().duplicate(copy=True)
    d = dc.vec(-dc.exit_rates)
    A.setDiagonal(d)
    d.destroy()
    return A


def null_vector(dc, support, *, tol, maxiter=None, ncv=None, backend_options=None):
    """Eigenvector of ``P^T = I + Q^T / L`` (``L = 1.02 qmax``) for its largest real eigenvalue.

    Rows and columns outside ``support`` (owned mask) are zeroed; SLEPc's
    Krylov-Schur starts from the uniform vector on the support. Returns
    ``(owned x or None, SolveReport)``; ``x`` is signed to a non-negative sum
    (negative entries are left for the caller to judge).
    """
    SLEPc = load_slepc()
    PETSc = load_petsc()
    support = np.asarray(support, dtype=bool)
    lam = 1.02 * dc.qmax
    A = _generator_T(dc)
    A.scale(1.0 / lam)
    A.shift(1.0)
    zero = (np.flatnonzero(~support) + dc.start).astype(PETSc.IntType)
    if dc.allsum(float(zero.size)) > 0:
        A.zeroRowsColumns(zero, 0.0)
    eps = SLEPc.EPS().create(comm=dc.comm)
    eps.setOperators(A)
    eps.setProblemType(SLEPc.EPS.ProblemType.NHEP)
    eps.setWhichEigenpairs(SLEPc.EPS.Which.LARGEST_REAL)
    if ncv is not None:
        eps.setDimensions(nev=1, ncv=int(ncv))
    else:
        eps.setDimensions(nev=1)
    eps.setTolerances(tol=float(tol), max_it=None if maxiter is None else int(maxiter))
    eps.setOptionsPrefix(PREFIX)
    v0 = dc.vec(support / max(dc.allsum(float(support.sum())), 1.0))
    eps.setInitialSpace([v0])
    info = {"uniformization_rate": lam}
    try:
        with scoped_options(_petsc_options(backend_options)):
            eps.setFromOptions()
        info["eps_type"] = eps.getType()
        try:
            eps.solve()
        except PETSc.Error as exc:
            _raise_if_memory(PETSc, exc)
            return None, SolveReport(Status.BREAKDOWN, f"PETSc error {exc}", 0, info)
        status, reason = slepc_status(SLEPc.EPS, eps.getConvergedReason())
        its = int(eps.getIterationNumber())
        if eps.getConverged() < 1:
            status = Status.BREAKDOWN if status is Status.SUCCESS else status
            return None, SolveReport(status, reason, its, info)
        vr = dc.vec()
        info["eigenvalue"] = complex(eps.getEigenpair(0, vr))
        out = vr.getArray().copy()
        vr.destroy()
        sign = np.sign(dc.allsum(float(out.sum()))) or 1.0
        return out * sign, SolveReport(status, reason, its, info)
    finally:
        eps.destroy(), A.destroy(), v0.destroy()


def expm_action(dc, p, dt, *, tol, backend_options=None):
    """``p exp(Q dt)`` for an owned row vector ``p`` by SLEPc's MFN on ``Q^T`` (FN exp scaled by dt).

    Returns ``(owned result, SolveReport)``; nothing is clipped or normalised.
    """
    p = np.asarray(p, dtype=float)
    if dt == 0:
        return p.copy(), SolveReport(Status.SUCCESS, "no step", 0)
    SLEPc = load_slepc()
    PETSc = load_petsc()
    A = _generator_T(dc)
    mfn = SLEPc.MFN().create(comm=dc.comm)
    mfn.setOperator(A)
    fn = mfn.getFN()
    fn.setType(SLEPc.FN.Type.EXP)
    fn.setScale(float(dt))
    mfn.setTolerances(tol=float(tol))
    mfn.setOptionsPrefix(PREFIX)
    src, dst = dc.vec(p), dc.vec()
    try:
        with scoped_options(_petsc_options(backend_options)):
            mfn.setFromOptions()
        try:
            mfn.solve(src, dst)
        except PETSc.Error as exc:
            _raise_if_memory(PETSc, exc)
            return np.full_like(p, np.nan), SolveReport(Status.BREAKDOWN, f"PETSc error {exc}", 0)
        status, reason = slepc_status(SLEPc.MFN, mfn.getConvergedReason())
        return dst.getArray().copy(), SolveReport(status, reason, int(mfn.getIterationNumber()))
    finally:
        mfn.destroy(), A.destroy(), src.destroy(), dst.destroy()
