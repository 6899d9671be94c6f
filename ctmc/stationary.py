r"""Stationary distribution of a finite CTMC.

Problem
-------
Given a generator :math:`Q` with one closed class, find the row vector
:math:`\pi \ge 0` with

.. math::

    \pi Q = 0, \qquad \sum_i \pi_i = 1 .

:math:`\pi` vanishes on transient states, so every method works on the closed
class :math:`C` (the whole chain when it is irreducible) and embeds the answer.

Methods (the registry :data:`METHODS`)
--------------------------------------
``gth``
    Grassmann-Taksar-Heyman elimination on a dense copy. Subtraction-free:
    every probability, however small, comes out with relative accuracy near
    machine precision. :math:`O(n^3)`; for chains up to a few thousand states.
``lu``
    Sparse LU of the *pinned* system. Fix :math:`\pi_p = 1` for one state
    :math:`p` and solve :math:`Q_{-p,-p}^T x = -Q_{p,-p}^T` (a nonsingular
    M-matrix for an irreducible chain), then normalise. Removing one row and
    column keeps the sparsity (replacing a row by the normalisation would add a
    dense row and ruin the factorisation). The factor uses SuperLU with the
    ``MMD_AT_PLUS_A`` ordering and *no* numerical pivoting
    (``diag_pivot_thresh=0``): the transposed generator is column diagonally
    dominant, so diagonal pivots are safe and the fill-reducing order is kept.
    The pin matters for tail accuracy: the computed :math:`x` carries errors
    of the order of :math:`\epsilon \max x`, so pinning a low-probability state
    drowns the other small probabilities. ctmc pins the model's initial state
    (or the state with the slowest exit rate) and, if the solve shows that
    the pinned state's probability is below ``repin`` times the largest, solves
    again pinned at the most probable state.
``power``
    Power iteration on the uniformised chain :math:`P = I + Q/\Lambda`,
    :math:`\Lambda = 1.02 \max_i |q_{ii}|`.
``gauss_seidel``, ``sor``
    (Successive over-)relaxation on :math:`Q^T x = 0`, renormalised each sweep.
``gmres``, ``bicgstab``
    Krylov solvers on the pinned system with an incomplete-LU preconditioner.
``arpack``
    ARPACK (implicitly restarted Arnoldi) for the eigenvector of :math:`P^T`
    with eigenvalue 1.
``auto``
    ``gth`` up to 1000 states, else ``lu``; if ``lu`` cannot run (out of
    memory, breakdown) it falls back to ``gmres``.

Evidence
--------
Every result carries ``residual`` :math:`= \|\pi Q\|_1` and
``balance_error`` :math:`= \max_j |(\pi Q)_j| / (\pi_j |q_{jj}|)`, the
relative mismatch between the probability flow into and out of each state.
Iterative methods stopped on a norm-wise residual usually leave the small
probabilities dominated by noise: the balance check catches this and the
status becomes :attr:`~ctmc.results.Status.TAIL_INACCURATE` (a warning), so a
wrong tail is never silent. The check is necessary, not sufficient: an error
that varies smoothly from state to state can pass it.

References
----------
W. K. Grassmann, M. I. Taksar, D. P. Heyman, "Regenerative analysis and
steady state distributions for Markov chains", Operations Research 33 (1985).
W. J. Stewart, *Introduction to the Numerical Solution of Markov Chains*,
Princeton University Press (1994), chapters 2-4.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from ._sparse_lu import ORDERINGS, splu
from ._util import Progress
from .linalg import gth_solve
from .results import ReducibleChainError, SolverError, StationaryResult, Status

__all__ = ["METHODS", "GTHOptions", "LUOptions", "IterativeOptions", "KrylovOptions",
           "ArpackOptions", "solve_stationary", "gth_solve", "stationary_evidence"]

_TINY = np.finfo(float).tiny


# --------------------------------------------------------------------------
# options
# --------------------------------------------------------------------------
def _positive(name, value, allow_none=False):
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value > 0:
        raise ValueError(f"{name}: expected a positive number, got {value!r}")


@dataclass(frozen=True)
class _Common:
    #: accept the answer when ||pi Q||_1 / max|q_ii| <= tol
    tol: float = 1e-10
    #: flag TAIL_INACCURATE when the balance error exceeds this
    tail_tol: float = 1e-6

    def __post_init__(self):
        _positive("tol", self.tol)
        _positive("tail_tol", self.tail_tol)


@dataclass(frozen=True)
class GTHOptions(_Common):
    """Options of ``gth``: refuse chains above ``max_states`` (dense O(n^3))."""

    max_states: int = 5000

    def __post_init__(self):
        super().__post_init__()
        _positive("max_states", self.max_states)


@dataclass(frozen=True)
class LUOptions(_Common):
    """Options of ``lu``.

    Attributes
    ----------
    ordering : str
        SuperLU column ordering: ``"auto"`` (default: the natural state order
        when the matrix is nearly banded in it, else ``"MMD_AT_PLUS_A"``; see
        :mod:`ctmc._sparse_lu`), ``"MMD_AT_PLUS_A"``, ``"COLAMD"``,
        ``"MMD_ATA"`` or ``"NATURAL"``.
    pin : int, optional
        State whose probability is fixed before normalising (default: the
        model's initial state, else the state with the slowest exit rate).
    repin : float
        Solve again pinned at the most probable state when
        ``pi[pin] < repin * max(pi)``.
    """

    ordering: str = "auto"
    pin: Optional[int] = None
    repin: float = 1e-3

    def __post_init__(self):
        super().__post_init__()
        orders = ORDERINGS
        if self.ordering not in orders:
            raise ValueError(f"ordering: expected one of {orders}, got {self.ordering!r}")
        if self.pin is not None and (isinstance(self.pin, bool) or not isinstance(self.pin, (int, np.integer))
                                     or self.pin < 0):
            raise ValueError(f"pin: expected a state index >= 0, got {self.pin!r}")
        _positive("repin", self.repin)


@dataclass(frozen=True)
class IterativeOptions(_Common):
    """Options of ``power``, ``gauss_seidel`` and ``sor``.

    Attributes
    ----------
    maxiter : int
        Iteration limit.
    omega : float
        Relaxation factor of ``sor`` (0 < omega < 2; 1 is Gauss-Seidel).
    x0 : array_like, optional
        Initial guess (default uniform).
    progress : bool, optional
        Report the residual on stderr during long runs (default: when stderr
        is a terminal); False silences it.
    """

    maxiter: int = 100_000
    omega: float = 1.0
    x0: Optional[np.ndarray] = None
    progress: Optional[bool] = None

    def __post_init__(self):
        super().__post_init__()
        _positive("maxiter", self.maxiter)
        if not 0 < self.omega < 2:
            raise ValueError(f"omega: expected 0 < omega < 2, got {self.omega!r}")


@dataclass(frozen=True)
class KrylovOptions(_Common):
    """Options of ``gmres`` and ``bicgstab``.

    Attributes
    ----------
    maxiter : int
        Iteration limit (outer iterations for GMRES).
    restart : int
        GMRES restart length.
    preconditioner : {"ilu", "jacobi", "none"}
    drop_tol, fill_factor : float
        Incomplete-LU parameters (:func:`scipy.sparse.linalg.spilu`).
    pin : int, optional
        As for ``lu``.
    """

    maxiter: int = 2000
    restart: int = 50
    preconditioner: str = "ilu"
    drop_tol: float = 1e-6
    fill_factor: float = 20.0
    pin: Optional[int] = None

    def __post_init__(self):
        super().__post_init__()
        _positive("maxiter", self.maxiter)
        _positive("restart", self.restart)
        if self.preconditioner not in ("ilu", "jacobi", "none"):
            raise ValueError(f"preconditioner: expected 'ilu', 'jacobi' or 'none', got {self.preconditioner!r}")


@dataclass(frozen=True)
class ArpackOptions(_Common):
    """Options of ``arpack``: ``maxiter`` (Arnoldi restarts), ``ncv`` (basis size)."""

    maxiter: Optional[int] = None
    ncv: Optional[int] = None


# --------------------------------------------------------------------------
# evidence
# --------------------------------------------------------------------------
def stationary_evidence(Q: sp.csr_matrix, pi: np.ndarray):
    """Residual ``||pi Q||_1``, balance error and underflow count of ``pi``.

    The balance error is ``max_j |(pi Q)_j| / (pi_j |q_jj|)`` over states with
    a normal (non-denormal) ``pi_j``; states below the smallest normal double
    are counted in ``underflow`` instead.
    """
    r = Q.T @ pi
    residual = float(np.abs(r).sum())
    out = pi * np.abs(Q.diagonal())
    ok = (pi >= _TINY) & (out > 0)
    bal = float(np.max(np.abs(r[ok]) / out[ok])) if ok.any() else 0.0
    underflow = int(np.count_nonzero((pi < _TINY) & (pi > 0) | ((pi == 0) & (r != 0))))
    return residual, bal, underflow


# --------------------------------------------------------------------------
# methods: each takes (Q, opts, hint) on an irreducible Q and returns
# (x, iterations, status, message, info); x need not be normalised
# --------------------------------------------------------------------------
def _gth(Q, opts: GTHOptions, hint):
    n = Q.shape[0]
    if n > opts.max_states:
        raise ValueError(f"method: gth is dense O(n^3) and limited to max_states={opts.max_states}; "
                         f"this chain has {n} states (use 'lu' or raise max_states)")
    x = gth_solve(Q.toarray())
    if not np.all(np.isfinite(x)):
        return None, 0, Status.BREAKDOWN, "GTH produced non-finite values (rates spanning > 1e300?)", {}
    return x, 0, Status.SUCCESS, "GTH elimination", {}


def _pin_hint(Q, hint):
    if hint is not None:
        return int(hint)
    return int(np.argmin(np.abs(Q.diagonal())))


def _pinned_system(Q, pin):
    n = Q.shape[0]
    keep = np.ones(n, dtype=bool)
    keep[pin] = False
    Qk = Q[keep]
    A = Qk[:, keep].T.tocsc()
    b = -np.asarray(Q[pin].toarray()).ravel()[keep]
    return keep, A, b


def _embed(x_sub, keep, pin):
    x = np.empty(keep.size)
    x[keep] = x_sub
    x[pin] = 1.0
    return x


#: a solution entry below -NEGATIVE_TOL * max is a failed solve, not round-off
NEGATIVE_TOL = 1e-8


def next_pin(x_max: float, argmax: int, x_min: float, x_pin: float, pins, slowest: int,
             repin: float) -> Optional[int]:
    """Where a pinned stationary solve should be repeated, or ``None`` to keep it.

    Shared by the backends. A pin on a state of negligible probability gives a
    solution of size ``1/pi_pin`` that is round-off with mixed signs and a
    meaningless argmax: significant negatives move the pin to the
    slowest-exit state (then to the argmax). A pin carrying less than
    ``repin`` of the largest entry moves to the argmax. A state already tried
    is never tried again.

    Examples
    --------
    >>> next_pin(1.0, 7, -0.5, 1e-3, [0], slowest=3, repin=1e-3)   # garbage: slowest exit
    3
    >>> next_pin(1.0, 7, 0.0, 1e-9, [0], slowest=3, repin=1e-3)    # improbable pin: argmax
    7
    >>> next_pin(1.0, 7, 0.0, 0.5, [0], slowest=3, repin=1e-3) is None
    True
    """
    if x_min < -NEGATIVE_TOL * x_max:
        nxt = slowest if slowest not in pins else argmax
    elif x_pin < repin * x_max:
        nxt = argmax
    else:
        return None
    return None if nxt in pins else int(nxt)


def _lu(Q, opts: LUOptions, hint, keep_factor: bool = False):
    """Pinned sparse LU; with ``keep_factor`` the SuperLU object of the last
    pin is returned in ``info["factor"]`` (its matrix is ``(Q^T)`` without
    the pinned row and column), for callers that reuse it."""
    n = Q.shape[0]
    if n == 1:
        return np.ones(1), 0, Status.SUCCESS, "single state", {}
    pin = _pin_hint(Q, opts.pin if opts.pin is not None else hint)
    if pin >= n:
        raise ValueError(f"pin: state index must be < {n}, got {pin}")
    info = {"ordering": opts.ordering, "pins": []}
    slowest = _pin_hint(Q, None)
    x = None
    for attempt in range(3):
        keep, A, b = _pinned_system(Q, pin)
        t0 = time.perf_counter()
        info["pins"].append(pin)
        try:
            lu, info["ordering"] = splu(A, opts.ordering)
        except (MemoryError, SystemError) as exc:
            # SuperLU reports a failed allocation as SystemError
            return None, 0, Status.BREAKDOWN, f"SuperLU ran out of memory ({type(exc).__name__}: {exc})", info
        except RuntimeError as exc:  # singular factor
            # a numerically singular pinned system: typical of a pin on a
            # state of negligible probability; retry at the slowest-exit state
            info["failed_pin"] = f"state {pin}: {exc}"
            if attempt < 2 and slowest not in info["pins"]:
                pin = slowest
                continue
            return None, 0, Status.BREAKDOWN, f"SuperLU failed: {exc}", info
        x = _embed(lu.solve(b), keep, pin)
        info["factor_seconds"] = time.perf_counter() - t0
        info["fill"] = int(lu.L.nnz + lu.U.nnz)
        if keep_factor:
            info["factor"] = lu
        if not np.all(np.isfinite(x)):
            nxt = slowest if slowest not in info["pins"] else None
        else:
            top = int(np.argmax(x))
            nxt = next_pin(float(x[top]), top, float(np.min(x)), float(x[pin]), info["pins"], slowest,
                           opts.repin)
        if attempt == 2 or nxt is None:
            break
        pin = nxt
    if not np.all(np.isfinite(x)):
        return None, 0, Status.BREAKDOWN, "non-finite solution", info
    neg = x < 0
    msg = f"sparse LU pinned at state {pin}"
    if neg.any():
        worst = -float(np.min(x)) / x.max()
        info["negative_states"] = int(neg.sum())
        if worst > NEGATIVE_TOL:
            return x, 0, Status.INACCURATE, f"negative probabilities (down to {-worst:.1e} of the max)", info
        x[neg] = 0.0
        if worst > 1e-13:
            # round-off noise of the size of eps * max(pi): the small
            # probabilities of this chain are below what LU resolved
            return x, 0, Status.TAIL_INACCURATE, (
                f"{msg}; {int(neg.sum())} negative values of round-off size (down to {-worst:.1e} of "
                "the max) set to 0: the small probabilities are noise (try 'gth' on small chains)"), info
    return x, 0, Status.SUCCESS, msg, info


def _start(n, x0):
    if x0 is None:
        return np.full(n, 1.0 / n)
    x = np.array(x0, dtype=float)
    if x.shape != (n,) or (x < 0).any() or not x.sum() > 0:
        raise ValueError(f"x0: expected a non-negative vector of shape ({n},)")
    return x / x.sum()


def _power(Q, opts: IterativeOptions, hint):
    n = Q.shape[0]
    QT = Q.T.tocsr()
    lam = 1.02 * np.abs(Q.diagonal()).max()
    x = _start(n, opts.x0)
    qmax = np.abs(Q.diagonal()).max()
    prog = Progress("stationary (power)", opts.progress)
    for it in range(opts.maxiter):
        r = QT @ x
        # the acceptance test of _run: ||x Q||_1 / (sum(x) max|q_ii|) <= tol
        rel = np.abs(r).sum() / (x.sum() * qmax)
        prog.update(f"iteration {it}, residual {rel:.2e}")
        if rel <= opts.tol:
            prog.close(f"converged in {it} iterations")
            return x, it, Status.SUCCESS, f"converged in {it} iterations", {"uniformization_rate": lam}
        x = x + r / lam
        if it % 10 == 9:
            x /= x.sum()
    return x, opts.maxiter, Status.MAX_ITERATIONS, f"not converged after {opts.maxiter} iterations", {}


def _sor(Q, opts: IterativeOptions, hint, omega=None):
    omega = opts.omega if omega is None else omega
    n = Q.shape[0]
    A = Q.T.tocsr()
    d = A.diagonal()
    Lo = sp.tril(A, k=-1, format="csr")
    Up = sp.triu(A, k=1, format="csr")
    M = (sp.diags(d) + omega * Lo).tocsr()
    M.sort_indices()
    x = _start(n, opts.x0)
    scale = np.abs(d).max()
    prog = Progress(f"stationary (sor, omega={omega})", opts.progress)
    for it in range(1, opts.maxiter + 1):
        rhs = (1 - omega) * d * x - omega * (Up @ x)
        x = sla.spsolve_triangular(M, rhs, lower=True)
        s = x.sum()
        if not np.isfinite(s) or s <= 0:
            return None, it, Status.BREAKDOWN, "iteration diverged", {}
        x /= s
        rel = np.abs(A @ x).sum() / scale
        prog.update(f"sweep {it}, residual {rel:.2e}")
        if rel <= opts.tol:
            prog.close(f"converged in {it} sweeps")
            return x, it, Status.SUCCESS, f"converged in {it} sweeps", {"omega": omega}
    return x, opts.maxiter, Status.MAX_ITERATIONS, f"not converged after {opts.maxiter} sweeps", {"omega": omega}


def _gauss_seidel(Q, opts: IterativeOptions, hint):
    return _sor(Q, opts, hint, omega=1.0)


def _krylov(solver: Callable, name: str):
    def run(Q, opts: KrylovOptions, hint):
        n = Q.shape[0]
        if n == 1:
            return np.ones(1), 0, Status.SUCCESS, "single state", {}
        pin = _pin_hint(Q, opts.pin if opts.pin is not None else hint)
        keep, A, b = _pinned_system(Q, pin)
        info = {"pin": pin, "preconditioner": opts.preconditioner}
        if opts.preconditioner == "ilu":
            try:
                ilu = sla.spilu(A, drop_tol=opts.drop_tol, fill_factor=opts.fill_factor)
            except RuntimeError as exc:
                return None, 0, Status.BREAKDOWN, f"incomplete LU failed: {exc}", info
            M = sla.LinearOperator(A.shape, ilu.solve)
        elif opts.preconditioner == "jacobi":
            dinv = 1.0 / A.diagonal()
            M = sla.LinearOperator(A.shape, lambda v: dinv * v)
        else:
            M = None
        count = [0]

        def cb(_):
            count[0] += 1
        kw = dict(rtol=opts.tol, atol=0.0, maxiter=opts.maxiter, M=M, callback=cb)
        if name == "gmres":
            kw.update(restart=opts.restart, callback_type="pr_norm")
        y, code = solver(A, b, **kw)
        x = _embed(y, keep, pin)
        x[x < 0] = 0.0
        if code > 0:
            return x, count[0], Status.MAX_ITERATIONS, f"{name} stopped at its iteration limit", info
        if code < 0 or not np.all(np.isfinite(x)):
            return None, count[0], Status.BREAKDOWN, f"{name} broke down", info
        return x, count[0], Status.SUCCESS, f"{name} converged in {count[0]} iterations", info
    return run


def _arpack(Q, opts: ArpackOptions, hint):
    n = Q.shape[0]
    if n < 3:
        return gth_solve(Q.toarray()), 0, Status.SUCCESS, "tiny chain: GTH", {}
    lam = 1.02 * np.abs(Q.diagonal()).max()
    PT = (sp.identity(n, format="csr") + Q.T.tocsr() / lam).tocsr()
    try:
        vals, vecs = sla.eigs(PT, k=1, which="LM", v0=np.full(n, 1.0 / n), tol=opts.tol * 1e-2,
                              maxiter=opts.maxiter, ncv=opts.ncv)
    except sla.ArpackNoConvergence as exc:
        x = np.abs(np.real(exc.eigenvectors[:, 0])) if exc.eigenvectors.size else None
        return x, 0, Status.MAX_ITERATIONS, "ARPACK did not converge", {}
    x = np.real(vecs[:, 0])
    x = x * np.sign(x.sum())
    x[x < 0] = 0.0
    return x, 0, Status.SUCCESS, f"ARPACK eigenvalue {complex(vals[0]).real:.15g}", {"eigenvalue": complex(vals[0])}


#: name -> (function, options class); ``auto`` is handled by :func:`solve_stationary`
METHODS = {
    "gth": (_gth, GTHOptions),
    "lu": (_lu, LUOptions),
    "power": (_power, IterativeOptions),
    "gauss_seidel": (_gauss_seidel, IterativeOptions),
    "sor": (_sor, IterativeOptions),
    "gmres": (_krylov(sla.gmres, "gmres"), KrylovOptions),
    "bicgstab": (_krylov(sla.bicgstab, "bicgstab"), KrylovOptions),
    "arpack": (_arpack, ArpackOptions),
}

_AUTO_GTH = 1000


def make_options(method: str, options: dict):
    """Validate ``options`` for ``method`` into its frozen options dataclass."""
    cls = METHODS[method][1]
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(options) - names
    if unknown:
        raise ValueError(f"options: {sorted(unknown)} not understood by method {method!r}; "
                         f"valid options are {sorted(names)}")
    return cls(**options)


def _solve_irreducible(Q, method, options, hint):
    """Run one method (or the auto chain) on an irreducible generator."""
    t0 = time.perf_counter()
    if method == "auto":
        order = ["gth"] if Q.shape[0] <= _AUTO_GTH else ["lu", "gmres"]
        common = {k: v for k, v in options.items() if k in ("tol", "tail_tol")}
        tried = []
        for i, m in enumerate(order):
            opts = make_options(m, options if len(order) == 1 else common)
            try:
                res = _run(Q, m, opts, hint, t0)
            except MemoryError as exc:
                tried.append(f"{m}: out of memory ({exc})")
                continue
            # fall back only when a method could not run at all; an
            # inaccurate direct solve is not improved by an iterative one
            if res.status is not Status.BREAKDOWN or i == len(order) - 1:
                if tried:
                    res.info["fallbacks"] = tried
                return res
            tried.append(f"{m}: {res.status.value}")
        raise SolverError("auto: every method failed: " + "; ".join(tried))
    opts = make_options(method, options)
    return _run(Q, method, opts, hint, t0)


def _run(Q, method, opts, hint, t0):
    fn = METHODS[method][0]
    if Q.shape[0] == 1:
        x, iters, status, msg, info = np.ones(1), 0, Status.SUCCESS, "single absorbing state", {}
    else:
        x, iters, status, msg, info = fn(Q, opts, hint)
    n = Q.shape[0]
    if x is None:
        pi = np.full(n, np.nan)
        return StationaryResult(method, "scipy", status, msg, iters, float("nan"),
                                time.perf_counter() - t0, info, pi=pi, balance_error=float("inf"))
    pi = x / x.sum()
    residual, bal, under = stationary_evidence(Q, pi)
    rel = residual / max(np.abs(Q.diagonal()).max(), _TINY)
    if status in (Status.SUCCESS, Status.TAIL_INACCURATE) and rel > opts.tol:
        status, msg = Status.INACCURATE, f"{msg}; residual {rel:.2e} above tol {opts.tol:.1e}"
    if status is Status.SUCCESS and bal > opts.tail_tol:
        status = Status.TAIL_INACCURATE
        msg = (f"{msg}; component-wise balance error {bal:.2e} exceeds tail_tol "
               f"{opts.tail_tol:.1e}: small probabilities are unreliable (use 'lu' or 'gth')")
    info["relative_residual"] = rel
    return StationaryResult(method, "scipy", status, msg, iters, residual, time.perf_counter() - t0,
                            info, pi=pi, balance_error=bal, underflow=under)


def _describe_classes(chain, classes, limit=5):
    parts = []
    for c in classes[:limit]:
        first = [_state_name(chain, i) for i in c[:3]]
        more = f" and {c.size - 3} more" if c.size > 3 else ""
        parts.append("{" + ", ".join(first) + more + "}")
    if len(classes) > limit:
        parts.append(f"... ({len(classes) - limit} more classes)")
    return "; ".join(parts)


def _state_name(chain, i):
    st = chain.states
    return "(" + ", ".join(f"{k}={int(st[k][i])}" for k in st.names) + ")"


def solve_stationary(chain, method="auto", *, check=True, per_class=False, **options):
    """Stationary distribution of ``chain`` on the scipy backend.

    See :meth:`ctmc.CTMC.stationary` for the parameters and the module
    docstring for the methods.
    """
    if method != "auto" and method not in METHODS:
        raise ValueError(f"method: unknown stationary method {method!r}; valid methods are "
                         f"{['auto'] + sorted(METHODS)}")
    # validate the options before any heavy work
    if method != "auto":
        make_options(method, options)
    else:
        make_options("lu", {k: v for k, v in options.items() if k in ("tol", "tail_tol")})
    t0 = time.perf_counter()
    Q = chain.Q
    n = Q.shape[0]
    cs = chain.structure
    classes = cs.closed_classes
    if len(classes) > 1 and not per_class:
        raise ReducibleChainError(
            f"the chain has {len(classes)} closed classes, so its stationary distribution is not "
            f"unique: {_describe_classes(chain, classes)}. Pass per_class=True for one law per "
            "class.", classes)
    hint = None if chain.initial is None or chain.initial.size == 0 else int(chain.initial[0])
    results = []
    for c in classes:
        if c.size == n:
            res = _solve_irreducible(Q, method, options, hint)
        else:
            sub = Q[c][:, c].tocsr()
            h = None if hint is None or hint not in c else int(np.searchsorted(c, hint))
            r = _solve_irreducible(sub, method, options, h)
            pi = np.zeros(n)
            pi[c] = r.pi
            info = dict(r.info, closed_class_size=int(c.size), transient_states=int(n - c.size))
            res = dataclasses.replace(r, pi=pi, info=info, wall_time=time.perf_counter() - t0)
        results.append(res.check(check))
    return results if per_class else results[0]
