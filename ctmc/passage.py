r"""Hitting times and first passage: moments, transforms and joint laws.

Problem
-------
For a target set :math:`A` let :math:`T_A = \inf\{t \ge 0 : X_t \in A\}` and
split the other states :math:`T = A^c` into

* :math:`R`: states of :math:`T` from which :math:`A` can be reached;
* :math:`F \subseteq R`: states from which :math:`A` is reached *with
  probability one* (no path to a state that cannot reach :math:`A`).

With :math:`M = -Q_{FF}` (a nonsingular M-matrix), the moments of
:math:`T_A` solve (Kolmogorov backward equations)

.. math::

    M\, m_k = k\, m_{k-1}, \qquad m_0 = \mathbf 1, \qquad m_k = 0 \text{ on } A,

and :math:`m_k = \infty` on :math:`T \setminus F`. A reward rate :math:`r`
replaces :math:`k\, m_{k-1}` by :math:`k\, r \circ m_{k-1}` and gives the
moments of :math:`\int_0^{T_A} r(X_s)\,ds`. For :math:`s \ge 0`,

.. math::

    (sI - Q_{RR})\, \phi(s) = Q_{RA} \mathbf 1, \qquad
    \phi_i(s) = E_i[e^{-s T_A}]

(0 on :math:`T \setminus R`, 1 on :math:`A`), and with one column per target
state :math:`j`,

.. math::

    (sI - Q_{RR})\, \Phi(s) = Q_{RA}, \qquad
    \Phi_{ij}(s) = E_i[e^{-sT_A};\, X_{T_A} = j],

whose value at :math:`s = 0` is the absorption law :math:`P_i(X_{T_A} = j)`.
The joint distribution function :math:`P_i(T_A \le t, X_{T_A} = j)` is the
transient probability of :math:`j` in the chain where :math:`A` is made
absorbing, computed by uniformisation (:mod:`ctmc.transient`).

Setup is separated from solve: :class:`PassageSetup` finds the sets and keeps
one sparse LU per shift :math:`s`, reused for every right-hand side (moments,
rewards, target columns).

Numerics
--------
Factorisations use SuperLU with diagonal pivots and a profile-based ordering (:mod:`ctmc._sparse_lu`)
(the matrices are diagonally dominant M-matrices). Residuals are reported as
normwise backward errors
:math:`\|Mx-b\|_\infty / (\|M\|_\infty \|x\|_\infty + \|b\|_\infty)`, which
stay meaningful when means reach :math:`10^{100}`.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from .results import SolverError, FirstPassageResult, HittingResult, LaplaceResult, Status
from ._sparse_lu import splu
from .linalg import TripletLU
from .structure import can_reach

__all__ = ["PassageSetup", "hitting_times", "hitting_laplace", "first_passage"]


def _as_points(x, name):
    a = np.atleast_1d(np.asarray(x, dtype=float))
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: expected a number or a 1-D array of numbers")
    if not np.all(np.isfinite(a)) or (a < 0).any():
        raise ValueError(f"{name}: values must be finite and >= 0, got {a[~(np.isfinite(a) & (a >= 0))][:3]}")
    return a


_DENSE_AUTO = 1000
_DENSE_FALLBACK = 4000
SOLVERS = ("auto", "lu", "gth")


class PassageSetup:
    """Sets and factorisations for first-passage problems into ``target``.

    Parameters
    ----------
    Q : scipy.sparse.csr_matrix
        Generator.
    target : ndarray of bool
        The set ``A`` (non-empty).
    solver : {"auto", "lu", "gth"}
        ``"gth"``: dense subtraction-free elimination (:mod:`ctmc.linalg`),
        relative accuracy for every component, O(n^3); ``"lu"``: SuperLU;
        ``"auto"``: ``"gth"`` up to 1000 unknowns, else ``"lu"``.

    Attributes
    ----------
    reach : ndarray of bool
        ``R``: non-target states that can reach ``A``.
    finite : ndarray of bool
        ``F``: non-target states reaching ``A`` with probability one.
    """

    def __init__(self, Q: sp.csr_matrix, target: np.ndarray, solver: str = "auto"):
        if solver not in SOLVERS:
            raise ValueError(f"solver: expected one of {SOLVERS}, got {solver!r}")
        self.Q = Q
        self.solver = solver
        self.target = np.asarray(target, dtype=bool)
        if not self.target.any():
            raise ValueError("target: the set of states is empty")
        other = ~self.target
        self.reach = can_reach(Q, self.target) & other
        stuck = other & ~self.reach
        if stuck.any():
            doomed = can_reach(Q, stuck, within=other) & other
        else:
            doomed = np.zeros_like(other)
        self.finite = other & ~doomed
        self._fac = {}
        self._mats = {}
        self._kinds = {}
        self._fallback = None
        self.out_rate = -Q.diagonal()

    def indices(self, on: str) -> np.ndarray:
        return np.flatnonzero(self.finite if on == "finite" else self.reach)

    def kind(self, on: str) -> str:
        """Solver actually used on the set ``on`` ("gth" or "lu")."""
        if self.solver != "auto":
            return self.solver
        if on not in self._kinds:
            self._kinds[on] = "gth" if self.indices(on).size <= _DENSE_AUTO else "lu"
        return self._kinds[on]

    def matrix(self, s: float, on: str = "finite"):
        """``(idx, sI - Q_XX)`` on ``F`` (``on="finite"``) or ``R`` (``on="reach"``)."""
        key = (float(s), on)
        if key not in self._mats:
            idx = self.indices(on)
            B = self.Q[idx][:, idx]
            M = (float(s) * sp.identity(idx.size, format="csr") - B).tocsc()
            self._mats[key] = (idx, M)
        return self._mats[key]

    def factor(self, s: float, on: str = "finite"):
        """Cached factorisation of :meth:`matrix` (SuperLU or :class:`TripletLU`)."""
        key = (float(s), on)
        if key not in self._fac:
            idx, M = self.matrix(s, on)
            if idx.size == 0:
                self._fac[key] = None
            elif self.kind(on) == "gth":
                R = -M.toarray()
                np.fill_diagonal(R, 0.0)
                # row sums of M: s plus the rates leaving the set (no subtraction)
                v = float(s) + self._leak(idx)
                self._fac[key] = TripletLU(R, v)
            else:
                try:
                    self._fac[key] = splu(M)[0]
                except RuntimeError as exc:
                    # an exactly singular pivot: cancellation on a nearly
                    # singular M-matrix (huge means); retry subtraction-free
                    if self.solver == "auto" and idx.size <= _DENSE_FALLBACK:
                        self._fallback = f"SuperLU failed ({exc}); used the dense subtraction-free solver"
                        self._kinds[on] = "gth"
                        return self.factor(s, on)
                    raise SolverError(f"SuperLU failed on {idx.size} unknowns ({exc}): the system is "
                                      "numerically singular (means beyond ~1e16 x the fastest rate); "
                                      "use solver='gth' on a smaller chain") from exc
        return self._fac[key]

    def _leak(self, idx):
        """Total rate from each state of ``idx`` to states outside ``idx``."""
        inside = np.zeros(self.Q.shape[0], dtype=bool)
        inside[idx] = True
        Qr = self.Q[idx].tocoo()
        out = (~inside[Qr.col]) & (Qr.col != idx[Qr.row])
        return np.bincount(Qr.row[out], weights=Qr.data[out], minlength=idx.size)

    def solve(self, s: float, on: str, b: np.ndarray, trans: str = "N"):
        """Solve ``(sI - Q_XX) x = b`` (``trans="T"``: transpose, LU only) on set ``on``."""
        fac = self.factor(s, on)
        if fac is None:
            return np.zeros_like(b, dtype=float)
        if isinstance(fac, TripletLU):
            if trans != "N":
                raise ValueError("trans: the subtraction-free solver has no transposed solve")
            return fac.solve(b)
        return fac.solve(np.ascontiguousarray(b, dtype=float), trans=trans)

    def condition(self, s: float, on: str) -> float:
        """``||M||_inf ||M^-1||_inf`` (exact for an M-matrix: ``||M^-1||_inf = max(M^-1 1)``)."""
        idx, M = self.matrix(s, on)
        if idx.size == 0:
            return 1.0
        ones = self.solve(s, on, np.ones(idx.size))
        return float(abs(M).sum(axis=1).max() * np.abs(ones).max())

    def backward_error(self, s, on, x, b, trans="N"):
        """Normwise backward error of a solution."""
        idx, M = self.matrix(s, on)
        if idx.size == 0:
            return 0.0
        A = M.T if trans == "T" else M
        r = A @ x - b
        normA = abs(A).sum(axis=1).max()
        den = normA * np.abs(x).max() + np.abs(b).max()
        return float(np.abs(r).max() / den) if den > 0 else 0.0

    def balance_error(self, s, on, x, b):
        """Component-wise check ``(s + q_i) x_i = b_i + sum_j q_ij x_j`` (all terms >= 0).

        Returns ``max_i |lhs_i - rhs_i| / max(lhs_i, rhs_i)``: a relative
        error per state that stays meaningful for tiny or huge ``x_i``.
        """
        idx, M = self.matrix(s, on)
        if idx.size == 0:
            return 0.0
        x2 = x.reshape(idx.size, -1)
        b2 = np.asarray(b, dtype=float).reshape(idx.size, -1)
        off = -(M - sp.diags(M.diagonal()))
        lhs = (float(s) + self.out_rate[idx])[:, None] * x2
        rhs = b2 + off @ x2
        den = np.maximum(np.abs(lhs), np.abs(rhs))
        ok = den > 0
        return float((np.abs(lhs - rhs)[ok] / den[ok]).max()) if ok.any() else 0.0

    def into_target(self, on: str) -> sp.csr_matrix:
        """``Q_{X A}``: rates from the set ``on`` into each target state."""
        idx = self.indices(on)
        return self.Q[idx][:, np.flatnonzero(self.target)].tocsr()


_EPS = np.finfo(float).eps
_COND_RTOL = 1e-8


def _status(kind, err, bal, tol, tail_tol, cond=1.0):
    msg = {"gth": "dense subtraction-free elimination", "lu": "sparse LU (SuperLU)",
           "lu-regenerative": "sparse LU through a regeneration state"}[kind]
    if kind != "gth" and _EPS * cond > _COND_RTOL:
        return Status.INACCURATE, (
            f"{msg}: condition number about {cond:.1e}, so sparse LU may have lost all "
            "digits (the target is too rare); use solver='gth' (dense, up to a few thousand states)")
    if err > tol:
        return Status.INACCURATE, f"{msg}: backward error {err:.2e} above tol {tol:.1e}"
    if bal > tail_tol:
        return Status.TAIL_INACCURATE, (
            f"{msg}: component-wise balance error {bal:.2e} above tail_tol {tail_tol:.1e}; "
            "very large or very small values are unreliable (try solver='gth')")
    return Status.SUCCESS, msg


def _check_tol(tol, name="tol"):
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0:
        raise ValueError(f"{name}: expected a positive number, got {tol!r}")


def hitting_times(chain, target, moments=1, *, reward=None, check=True, solver="auto", tol=1e-10,
                  tail_tol=1e-6):
    """Moments of the hitting time (or accumulated reward) of ``target``.

    See :meth:`ctmc.CTMC.hitting_times`.

    Examples
    --------
    Birth-death chain 0..3, rates up 1, down 2; mean time from 0 to 3:

    >>> import ctmc
    >>> m = ctmc.Model("bd"); n = m.var("n", 0, 3)
    >>> m.event("up", guard=n < 3, rate=1.0, update={n: n + 1})
    >>> m.event("down", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> c = m.build(initial={"n": 0})
    >>> float(c.hitting_times(n == 3).mean[0])
    11.0
    """
    if isinstance(moments, bool) or not isinstance(moments, (int, np.integer)) or moments < 1:
        raise ValueError(f"moments: expected an integer >= 1, got {moments!r}")
    _check_tol(tol)
    _check_tol(tail_tol, "tail_tol")
    n = chain.n_states
    if reward is None:
        r = np.ones(n)
    else:
        r = np.asarray(reward, dtype=float)
        if r.shape != (n,) or not np.all(np.isfinite(r)) or (r < 0).any():
            raise ValueError(f"reward: expected {n} finite values >= 0")
    t0 = time.perf_counter()
    setup = PassageSetup(chain.Q, target, solver)
    idx, M = setup.matrix(0.0, "finite")
    out = np.zeros((moments, n))
    out[:, ~setup.target & ~setup.finite] = np.inf
    prev = np.ones(idx.size)
    err = bal = 0.0
    rf = r[idx]
    singular = None
    try:
        for k in range(1, moments + 1):
            b = k * rf * prev
            x = setup.solve(0.0, "finite", b)
            err = max(err, setup.backward_error(0.0, "finite", x, b))
            bal = max(bal, setup.balance_error(0.0, "finite", x, b))
            out[k - 1, idx] = x
            prev = x
    except SolverError as exc:  # numerically singular sparse LU: rare target
        singular = str(exc)
        out[:, idx] = np.nan
    kind = setup.kind("finite")
    info = {"n_finite": int(idx.size), "fallback": setup._fallback, "lu_failure": singular}
    cond = 1.0
    if kind == "lu" and idx.size:
        cond = np.inf if singular else setup.condition(0.0, "finite")
        if _EPS * cond > _COND_RTOL:
            # ill-conditioned (rare target): the mean through a regeneration
            # state z, whose cycle is measured by an accurate stationary solve
            mean, cond, rinfo = _regenerative_mean(chain, setup, r, idx)
            out[0, idx] = mean
            info.update(rinfo)
            bal = setup.balance_error(0.0, "finite", mean, rf)
            err = setup.backward_error(0.0, "finite", mean, rf)
            kind = "lu-regenerative"
    info.update(balance_error=bal, condition=cond)
    status, msg = _status(kind, err, bal, tol, tail_tol, cond)
    if moments > 1 and kind == "lu-regenerative" and status is Status.SUCCESS:
        status = Status.INACCURATE
        msg += ("; moments >= 2 of this ill-conditioned problem are not reliable from sparse LU "
                "(use solver='gth' on up to a few thousand states)")
    if (~setup.finite & ~setup.target).any():
        msg += (f"; {int((~setup.finite & ~setup.target).sum())} states do not reach the target "
                "almost surely (infinite moments)")
    res = HittingResult(kind, "scipy", status, msg, 0, err, time.perf_counter() - t0, info,
                        mean=out[0], moments=out, finite=setup.finite | setup.target,
                        target=setup.target)
    return res.check(check)


def _regenerative_mean(chain, setup, r, idx):
    r"""Mean accumulated reward until ``A`` through a regeneration state ``z``.

    With ``B = A + {z}``, ``E_i[R_A] = E_i[R_B] + P_i(T_z < T_A) E_z[R_A]``;
    the first two terms come from a well-conditioned system (``z`` is a
    recurrent, high-probability state) and ``E_z[R_A] = sum_F pi_j r_j / pi_a``
    from the stationary law of the chain restarted at ``z`` from ``A`` (rate
    1), solved by the pinned LU that keeps relative accuracy on ``pi_a``.
    """
    from .stationary import LUOptions, _lu

    Q = chain.Q
    nF = idx.size
    QFF = Q[idx][:, idx].tocsr()
    into_a = np.asarray(setup.into_target("finite").sum(axis=1)).ravel()
    hint = None
    if chain.initial is not None and chain.initial.size:
        pos = np.searchsorted(idx, chain.initial[0])
        hint = int(pos) if pos < nF and idx[pos] == chain.initial[0] else None
    z = hint if hint is not None else int(np.argmin(-QFF.diagonal()))
    info = {}
    for attempt in range(2):
        Qz = sp.bmat([[QFF, sp.csr_matrix(into_a[:, None])],
                      [sp.csr_matrix(([1.0], ([0], [z])), shape=(1, nF)), sp.csr_matrix([[-1.0]])]],
                     format="csr")
        x, _, st, msg, linfo = _lu(Qz, LUOptions(), z, keep_factor=True)
        if x is None or st is not Status.SUCCESS:
            raise SolverError(f"regenerative hitting-time solve failed: {msg}")
        top = int(np.argmax(x[:nF]))
        if attempt == 0 and x[z] < 1e-3 * x[top]:
            z = top
            continue
        break
    H = float(np.dot(x[:nF], r[idx]) / x[nF])
    keep = np.ones(nF, dtype=bool)
    keep[z] = False
    Mp = (-QFF[keep][:, keep])
    rhs = np.column_stack([r[idx][keep], np.asarray(QFF[keep][:, [z]].toarray()).ravel(), np.ones(nF - 1)])
    factor = linfo.pop("factor", None)
    if nF <= 1:
        sol = np.zeros((0, 3))
    elif factor is not None and linfo["pins"][-1] == z:
        # The pinned restart matrix, transposed, is block triangular:
        #   [[Q_F'F', into_a], [0, -1]]  (F' = F - {z}; the last row is the
        # restart from A to z, whose entry at z was pinned away), so its
        # factor also solves  -Q_F'F' x = rhs  with no new factorisation.
        full = np.vstack([-rhs, np.zeros((1, 3))])
        sol = factor.solve(full, trans="T")[:nF - 1]
        info["reused_factor"] = True
    else:
        sol = splu(Mp)[0].solve(rhs)
        info["reused_factor"] = False
    del factor
    mean = np.empty(nF)
    mean[keep] = sol[:, 0] + sol[:, 1] * H
    mean[z] = H
    normM = float(abs(Mp).sum(axis=1).max()) if nF > 1 else 0.0
    cond = normM * float(sol[:, 2].max()) if nF > 1 else 1.0
    info.update(regeneration_state=int(idx[z]), cycle_mean=H)
    return mean, cond, info


def hitting_laplace(chain, target, s, *, check=True, solver="auto", tol=1e-10, tail_tol=1e-6):
    """Laplace-Stieltjes transform ``E_i[exp(-s T_A)]``; see :meth:`ctmc.CTMC.hitting_laplace`.

    Examples
    --------
    Exponential time to leave state 0 at rate 2: ``E[exp(-s T)] = 2 / (2 + s)``.

    >>> import ctmc
    >>> c = ctmc.CTMC([[-2.0, 2.0], [0.0, 0.0]])
    >>> c.hitting_laplace([1], [0.0, 1.0]).values[:, 0]
    array([1.        , 0.66666667])
    """
    svals = _as_points(s, "s")
    _check_tol(tol)
    _check_tol(tail_tol, "tail_tol")
    t0 = time.perf_counter()
    setup = PassageSetup(chain.Q, target, solver)
    n = chain.n_states
    vals = np.zeros((svals.size, n))
    vals[:, setup.target] = 1.0
    idx = np.flatnonzero(setup.reach)
    b = np.asarray(setup.into_target("reach").sum(axis=1)).ravel()
    err = bal = 0.0
    for k, sk in enumerate(svals):
        x = setup.solve(sk, "reach", b)
        err = max(err, setup.backward_error(sk, "reach", x, b))
        bal = max(bal, setup.balance_error(sk, "reach", x, b))
        vals[k, idx] = x
    kind = setup.kind("reach")
    cond = setup.condition(float(svals.min()), "reach") if kind == "lu" else 1.0
    status, msg = _status(kind, err, bal, tol, tail_tol, cond)
    res = LaplaceResult(kind, "scipy", status, msg, 0, err, time.perf_counter() - t0,
                        {"balance_error": bal, "fallback": setup._fallback, "condition": cond},
                        s=svals, values=vals[0] if np.ndim(s) == 0 else vals, target=setup.target)
    return res.check(check)


def first_passage(chain, target, *, s=None, t=None, sources=None, check=True, solver="auto",
                  tol=1e-10, tail_tol=1e-6, eps=1e-13, max_terms=10_000_000):
    """Joint law of ``(T_A, X_{T_A})``; see :meth:`ctmc.CTMC.first_passage`.

    Parameters
    ----------
    eps : float
        Uniformisation truncation: neglected Poisson mass per time point.
    max_terms : int
        Refuse a CDF needing more uniformisation steps than this.

    Examples
    --------
    From state 0, leave at rate 3 to state 1 (prob. 1/3) or state 2 (2/3):

    >>> import ctmc
    >>> c = ctmc.CTMC([[-3.0, 1.0, 2.0], [0, 0, 0], [0, 0, 0]])
    >>> fp = c.first_passage([1, 2], t=[1.0])
    >>> fp.probabilities[0]
    array([0.33333333, 0.66666667])
    >>> round(float(fp.cdf[0, 0, 1]), 10)  # (2/3) (1 - exp(-3))
    0.6334752878
    """
    from .transient import uniformize

    _check_tol(tol)
    _check_tol(tail_tol, "tail_tol")
    svals = None if s is None else _as_points(s, "s")
    tvals = None if t is None else _as_points(t, "t")
    if not (isinstance(eps, float) and 0 < eps < 1):
        raise ValueError(f"eps: expected 0 < eps < 1, got {eps!r}")
    t0 = time.perf_counter()
    n = chain.n_states
    Q = chain.Q
    tgt = np.asarray(target, dtype=bool)
    targets = np.flatnonzero(tgt)
    src = np.arange(n) if sources is None else np.asarray(sources, dtype=np.int64)
    if tvals is not None:
        lam = float(np.abs(Q.diagonal()[~tgt]).max()) if (~tgt).any() else 0.0
        steps = lam * 1.02 * tvals.max()
        if steps > max_terms:
            raise ValueError(f"t: the largest time needs about {steps:.3g} uniformisation steps, above "
                             f"max_terms={max_terms}; raise max_terms or use smaller times")
    setup = PassageSetup(Q, tgt, solver)
    setup.factor(0.0, "reach")  # may fall back to the dense solver before choosing a path
    kind = setup.kind("reach")
    idx = np.flatnonzero(setup.reach)
    pos_in_reach = np.full(n, -1)
    pos_in_reach[idx] = np.arange(idx.size)
    B = setup.into_target("reach")  # |R| x m
    rows_r = pos_in_reach[src]  # -1 for sources outside R
    in_r = rows_r >= 0
    m, r = targets.size, src.size
    # sources inside A: X_T = X_0 at T = 0
    at_target = np.zeros((r, m))
    src_in_a = tgt[src]
    at_target[np.flatnonzero(src_in_a), np.searchsorted(targets, src[src_in_a])] = 1.0

    def joint(sv):
        """E_i[exp(-s T); X_T = j] for the sources (rows) and targets (columns)."""
        out = at_target.copy()
        bal = 0.0
        if idx.size and in_r.any():
            if kind == "lu" and in_r.sum() <= m:  # adjoint solves: one per source
                E = np.zeros((idx.size, int(in_r.sum())))
                E[rows_r[in_r], np.arange(E.shape[1])] = 1.0
                Y = setup.solve(sv, "reach", E, trans="T")
                out[in_r] = (B.T @ Y).T
                err = setup.backward_error(sv, "reach", Y, E, trans="T")
            else:  # one solve per target column
                Bd = B.toarray()
                X = setup.solve(sv, "reach", Bd)
                out[in_r] = X[rows_r[in_r]]
                err = setup.backward_error(sv, "reach", X, Bd)
                bal = setup.balance_error(sv, "reach", X, Bd)
        else:
            err = 0.0
        return out, err, bal

    probs, err, bal = joint(0.0)
    lap = None
    if svals is not None:
        lap = np.empty((svals.size, r, m))
        for k, sv in enumerate(svals):
            lap[k], e, b2 = joint(sv)
            err, bal = max(err, e), max(bal, b2)
    cdf, bound = None, 0.0
    if tvals is not None:
        # make A absorbing; propagate the smaller side (sources or targets)
        keep = (~tgt).astype(float)
        Qa = sp.diags(keep) @ Q
        if r <= m:
            V0 = np.zeros((n, r))
            V0[src, np.arange(r)] = 1.0
            Pt, bound = uniformize(Qa.T.tocsr(), V0, tvals, eps=eps)
            cdf = np.transpose(Pt[:, targets, :], (0, 2, 1))
        else:
            V0 = np.zeros((n, m))
            V0[targets, np.arange(m)] = 1.0
            Pt, bound = uniformize(Qa.tocsr(), V0, tvals, eps=eps)
            cdf = Pt[:, src, :]
    cond = setup.condition(0.0, "reach") if kind == "lu" else 1.0
    status, msg = _status(kind, err, bal, tol, tail_tol, cond)
    res = FirstPassageResult(kind, "scipy", status, msg, 0, err, time.perf_counter() - t0,
                             {"n_reach": int(idx.size), "balance_error": bal, "fallback": setup._fallback,
                              "condition": cond}, targets=targets, sources=src,
                             probabilities=probs, s=svals, laplace=lap, t=tvals, cdf=cdf,
                             error_bound=bound)
    return res.check(check)
