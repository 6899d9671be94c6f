r"""Mean field, refined mean field (1/N and 1/N^2) and exact finite N for population models.

Problem
-------
A *density-dependent population process* (Kurtz 1970) has :math:`S` species and
:math:`N` individuals; its state is the vector of counts :math:`X_N \in
\{0..N\}^S`, :math:`\sum_s X_{N,s} = N` (the population is closed). Transition
:math:`\ell` changes the counts by an integer vector :math:`\ell` (summing to 0)
at total rate :math:`N\, \beta_\ell(X_N / N)`. With the densities :math:`x`,

.. math::

    f(x) = \sum_\ell \ell\, \beta_\ell(x), \qquad
    Q(x) = \sum_\ell \ell \ell^T \beta_\ell(x), \qquad
    R(x) = \sum_\ell \ell \otimes \ell \otimes \ell\, \beta_\ell(x)

are the drift, the jump covariance and the third jump moment. The mean field is
the ODE :math:`\dot x = f(x)` and, at stationarity, its fixed point
:math:`x^*` (:meth:`PopulationModel.mean_field`).

Refined mean field
------------------
Write :math:`Y = X_N/N - x(t)` and expand its moments in :math:`1/N`:
:math:`E[Y] = V/N + A/N^2`, :math:`E[Y Y^T] = W/N + B/N^2`,
:math:`E[Y^{\otimes 3}] = C/N^2`, :math:`E[Y^{\otimes 4}] = D/N^2 + O(N^{-3})`
with the Gaussian :math:`D_{abcd} = W_{ab}W_{cd} + W_{ac}W_{bd} + W_{ad}W_{bc}`.
Applying the generator to :math:`Y`, :math:`Y^{\otimes 2}` and
:math:`Y^{\otimes 3}`, Taylor-expanding :math:`f` and :math:`Q` around
:math:`x` and matching powers of :math:`1/N` gives, with :math:`F = Df`,
:math:`F_k = D^k f` (Gast & Van Houdt 2017; Gast, Bortolussi & Tribastone
2019, Theorems 1 and 2):

.. math::

    \dot V &= F V + \tfrac12 F_2 : W, \\
    \dot W &= F W + W F^T + Q, \\
    \dot C_{ijk} &= \operatorname{sym}_3\big[(F C)_{ijk} + \tfrac12 (F_2)_{iab} D_{abjk}
                    + Q_{ij} V_k + (DQ)_{ija} W_{ak}\big] + R_{ijk}, \\
    \dot B &= F B + B F^T + S + S^T + DQ\cdot V + \tfrac12 D^2Q : W,
        \quad S_{ij} = \tfrac12 (F_2)_{iab} C_{abj} + \tfrac16 (F_3)_{iabc} D_{abcj}, \\
    \dot A &= F A + \tfrac12 F_2 : B + \tfrac16 F_3 : C + \tfrac1{24} F_4 : D,

all from zero at :math:`t = 0` (a deterministic start), where
:math:`\operatorname{sym}_3` sums the three placements of the free index
:math:`i` (the ``f`` factor) among :math:`i, j, k`. At stationarity the left
sides are 0 and, :math:`F` being Hurwitz, each line is a linear solve:
a Lyapunov equation for :math:`W` (and :math:`B`), a solve with :math:`F`
for :math:`V` (and :math:`A`), and a solve with the Kronecker sum
:math:`F \oplus F \oplus F` for :math:`C` (done in the eigenbasis of
:math:`F`, with its residual checked). The densities are then
:math:`x^* + V/N` (order 1) and :math:`x^* + V/N + A/N^2` (order 2), and
:math:`\operatorname{Cov}(X_N/N) \approx W/N`.

The conservation law
--------------------
Since :math:`\sum_s x_s = 1`, every :math:`\ell` sums to 0: :math:`\mathbf 1^T
f = 0`, :math:`\mathbf 1^T Q = 0`, and the full Jacobian :math:`Df(x^*)` has
the left null vector :math:`\mathbf 1` — it is singular and the Lyapunov and
linear solves above have no unique solution in full coordinates. All of them
are therefore done in the **reduced coordinates** :math:`y = (x_1, \dots,
x_{S-1})`, :math:`x_S = 1 - \sum_{s<S} y_s` (the simplex's tangent space):
the reduced drift is :math:`g(y) = f_{1..S-1}(y, 1 - \mathbf 1^T y)`,
differentiated symbolically (:mod:`sympy`, once per model, then
:func:`sympy.lambdify` to numpy; never by finite differences), and the reduced
jumps are :math:`\ell_{1..S-1}`. The map :math:`y \mapsto x` is affine,
:math:`x = e_S + L y` with :math:`L = [I; -\mathbf 1^T]`, so moments map
exactly: :math:`V = L V_y`, :math:`W = L W_y L^T`, :math:`A = L A_y`.
``stable`` tests the eigenvalues of :math:`Dg(y^*)`, the Jacobian restricted
to the tangent space.

References
----------
T. G. Kurtz, "Solutions of ordinary differential equations as limits of pure
jump Markov processes", J. Appl. Prob. 7(1), 1970.
N. Gast, B. Van Houdt, "A refined mean field approximation", Proc. ACM
Meas. Anal. Comput. Syst. (POMACS) 1(2), 2017 (SIGMETRICS 2018).
N. Gast, L. Bortolussi, M. Tribastone, "Size expansions of mean field
approximation: transient and steady-state analysis", Performance Evaluation
129, 2019 (Performance 2018).

Examples
--------
An SIS epidemic: infection at rate :math:`N\beta x_S x_I`, recovery at
:math:`N x_I`; the fixed point is :math:`x_I^* = 1 - 1/\beta`.

>>> from ctmc.meanfield import PopulationModel
>>> m = PopulationModel("sis", ["S", "I"])
>>> m.transition("infection", {"S": -1, "I": +1}, lambda x: 2.0 * x["S"] * x["I"] + 0.1 * x["S"])
>>> m.transition("recovery", {"I": -1, "S": +1}, lambda x: x["I"])
>>> mf = m.mean_field()
>>> mf.stable
True
>>> r = m.refined(50, order=2)
>>> e = m.exact(50)
>>> bool(abs(e.densities - r.densities).max() < abs(e.densities - mf.fixed_point).max() / 100)
True
"""
from __future__ import annotations

import itertools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from ._util import as_points

__all__ = ["PopulationModel", "MeanFieldResult", "RefinedResult", "RefinedTransientResult", "ExactResult",
           "MeanFieldError", "format_comparison", "comparison_records"]


class MeanFieldError(RuntimeError):
    """The fixed point search did not converge (or the fixed point is not stable where needed)."""


def _sympy():
    try:
        import sympy
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError("ctmc.meanfield needs sympy: pip install 'sympy>=1.12'") from exc
    return sympy


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class MeanFieldResult:
    """Fixed point of the mean-field ODE and its stability.

    Attributes
    ----------
    species : tuple of str
    fixed_point : ndarray (S,)
        :math:`x^*`, densities in species order (sum 1).
    jacobian : ndarray (S, S)
        :math:`Df(x^*)` in full coordinates, differentiating the rates as written
        (singular: :math:`\\mathbf 1^T Df = 0`; off the simplex the rates are not
        unique, so only its action on the tangent space is intrinsic).
    jacobian_reduced : ndarray (S-1, S-1)
        The Jacobian on the simplex's tangent space (last species eliminated).
    eigenvalues : ndarray (S-1,)
        Its eigenvalues.
    stable : bool
        All of them have a negative real part.
    residual : float
        :math:`\\max_s |f_s(x^*)|`, recomputed.
    iterations : int
        Newton steps after the ODE phase.
    wall_time : float
    """

    species: tuple
    fixed_point: np.ndarray = field(repr=False)
    jacobian: np.ndarray = field(repr=False)
    jacobian_reduced: np.ndarray = field(repr=False)
    eigenvalues: np.ndarray = field(repr=False)
    stable: bool = True
    residual: float = 0.0
    iterations: int = 0
    wall_time: float = 0.0
    _system: Any = field(default=None, repr=False, compare=False)

    def ode(self, t, x0=None):
        """Integrate :math:`\\dot x = f(x)` from ``x0`` (default: the fixed point).

        Parameters
        ----------
        t : float or array_like
            Time(s) >= 0, increasing.
        x0 : array_like (S,), optional
            Initial densities (non-negative, summing to 1).

        Returns
        -------
        ndarray
            ``(S,)`` for one time, ``(len(t), S)`` for several (the shape rule).
        """
        x0 = self.fixed_point if x0 is None else x0
        return self._system.ode(t, x0)


@dataclass(frozen=True)
class RefinedResult:
    """Refined mean field at the fixed point for one population size ``N``.

    Attributes
    ----------
    N : int
    order : int
        1 or 2.
    densities : ndarray (S,)
        :math:`x^* + V/N` (order 1) or :math:`x^* + V/N + A/N^2` (order 2).
    fixed_point, V : ndarray (S,)
    A : ndarray (S,) or None
        The :math:`1/N^2` coefficient (order 2 only).
    W : ndarray (S, S)
        :math:`\\operatorname{Cov}(X_N/N) \\approx W/N`.
    residual : float
        The largest relative residual of the linear equations solved (W, V and for
        order 2 C, B, A; reduced coordinates), recomputed.
    """

    N: int
    order: int
    densities: np.ndarray = field(repr=False)
    fixed_point: np.ndarray = field(repr=False)
    V: np.ndarray = field(repr=False)
    A: Optional[np.ndarray] = field(repr=False)
    W: np.ndarray = field(repr=False)
    residual: float = 0.0


@dataclass(frozen=True)
class RefinedTransientResult:
    """Refined mean field along the ODE; arrays carry a leading time axis unless ``t`` was one number.

    Attributes
    ----------
    t : float or ndarray
    N, order : int
    densities : ndarray
        :math:`x(t) + V(t)/N (+ A(t)/N^2)`, shape ``(S,)`` or ``(len(t), S)``.
    x, V, A, W : ndarray
        Mean field, coefficients (``A`` None for order 1), ``W`` of shape ``(..., S, S)``.
    """

    t: Any
    N: int
    order: int
    densities: np.ndarray = field(repr=False)
    x: np.ndarray = field(repr=False)
    V: np.ndarray = field(repr=False)
    A: Optional[np.ndarray] = field(repr=False)
    W: np.ndarray = field(repr=False)


@dataclass(frozen=True)
class ExactResult:
    """Expected densities under the exact stationary law of the finite-``N`` chain.

    Attributes
    ----------
    N : int
    densities : ndarray (S,)
        :math:`E[X_{N,s}/N]` in species order.
    stationary : ctmc.StationaryResult
        The solver's answer with its evidence (status, residual, error_bound).
    n_states : int
    """

    N: int
    densities: np.ndarray = field(repr=False)
    stationary: Any = field(repr=False)
    n_states: int = 0


# ---------------------------------------------------------------------------
# the compiled system (symbolic once, numeric after)
# ---------------------------------------------------------------------------
def _sym3(X):
    """Sum of the three placements of the first index of ``X_{ijk}`` (symmetric in ``jk``)."""
    return X + np.transpose(X, (1, 0, 2)) + np.transpose(X, (1, 2, 0))


def _gauss4(W):
    return (np.einsum("ab,cd->abcd", W, W) + np.einsum("ac,bd->abcd", W, W)
            + np.einsum("ad,bc->abcd", W, W))


class _System:
    """Reduced-coordinate drift, jump moments and their derivatives, compiled to numpy."""

    def __init__(self, species, transitions):
        sympy = _sympy()
        self.species = tuple(species)
        S = len(species)
        self.S, self.m = S, S - 1
        syms = sympy.symbols(list(species), real=True)
        self.full_symbols = syms
        y = syms[:-1]
        self.y = y
        sub = {syms[-1]: 1 - sum(y)}
        self.rates_full = [tr.expr for tr in transitions]
        rates = [e.subs(sub) for e in self.rates_full]
        L = np.array([[tr.change[s] for s in species] for tr in transitions], dtype=int)   # (T, S)
        self.changes = L
        Lr = L[:, :-1]
        m = self.m
        self.g = [sum((int(Lr[t, i]) * rates[t] for t in range(len(rates)) if Lr[t, i]), sympy.Integer(0))
                  for i in range(m)]
        self.Qsym = [[sum((int(Lr[t, i] * Lr[t, j]) * rates[t] for t in range(len(rates))
                           if Lr[t, i] * Lr[t, j]), sympy.Integer(0)) for j in range(m)] for i in range(m)]
        self.Lr = Lr.astype(float)
        self._rate_fns = sympy.lambdify(y, rates, "numpy")
        self._g_fn = sympy.lambdify(y, self.g, "numpy")
        self._jac_sym = [[sympy.diff(gi, yj) for yj in y] for gi in self.g]
        self._jac_fn = sympy.lambdify(y, self._jac_sym, "numpy")
        self._full_rate_fns = [sympy.lambdify(syms, e, "numpy") for e in self.rates_full]
        # rate terms of order one in the N-system (N beta(x) + gamma(x)): a 1/N shift of the drift
        corr = [sympy.sympify(tr.correction).subs(sub) for tr in transitions]
        self.has_correction = any(c != 0 for c in corr)
        self._full_corr_fns = [sympy.lambdify(syms, sympy.sympify(tr.correction), "numpy") for tr in transitions]
        gc = [sum((int(Lr[t, i]) * corr[t] for t in range(len(corr)) if Lr[t, i]), sympy.Integer(0))
              for i in range(m)]
        self._gc_fn = sympy.lambdify(y, gc, "numpy")
        self._tensor_cache = {}

    # numeric evaluation ---------------------------------------------------
    def rates_at(self, x):
        """The transitions' density rates at the densities ``x`` of all ``S`` species."""
        return np.array([np.broadcast_to(f(*x), ()) for f in self._full_rate_fns], dtype=float)

    def rates(self, yv):
        return np.array([np.broadcast_to(r, ()) for r in self._rate_fns(*yv)], dtype=float)

    def g_num(self, yv):
        return np.array(self._g_fn(*yv), dtype=float).reshape(self.m)

    def gc_num(self, yv):
        """The drift's 1/N term from the transitions' corrections (reduced coordinates)."""
        return np.array([np.broadcast_to(v, ()) for v in self._gc_fn(*yv)], dtype=float).reshape(self.m)

    def jac(self, yv):
        return np.array(self._jac_fn(*yv), dtype=float).reshape(self.m, self.m)

    def _tensor(self, which, order):
        """Compiled ``D^order`` of the drift (``which='f'``) or of ``Q`` (``'Q'``) as a dense-array maker."""
        key = (which, order)
        if key not in self._tensor_cache:
            sympy = _sympy()
            comps = [(i,) for i in range(self.m)] if which == "f" else \
                [(i, j) for i in range(self.m) for j in range(i, self.m)]
            base = {(i,): self.g[i] for i in range(self.m)} if which == "f" else \
                {(i, j): self.Qsym[i][j] for (i, j) in comps}
            # derivatives over sorted index tuples only (symmetry), nonzero entries only
            entries = {c: {(): base[c]} for c in comps}
            for _ in range(order):
                for c in comps:
                    nxt = {}
                    for idx, e in entries[c].items():
                        start = idx[-1] if idx else 0
                        for k in range(start, self.m):
                            d = sympy.diff(e, self.y[k])
                            if d != 0:
                                nxt[idx + (k,)] = d
                    entries[c] = nxt
            keys, exprs = [], []
            for c in comps:
                for idx, e in entries[c].items():
                    keys.append((c, idx))
                    exprs.append(e)
            fn = sympy.lambdify(self.y, exprs, "numpy") if exprs else None
            self._tensor_cache[key] = (keys, fn)
            # scatter plan: every symmetric copy of each computed entry, as flat indices
            shape = (self.m,) * ((1 if which == "f" else 2) + order)
            flat, pos = [], []
            for n, (c, idx) in enumerate(keys):
                heads = [c] if which == "f" or c[0] == c[1] else [c, (c[1], c[0])]
                for p in set(itertools.permutations(idx)):
                    for h in heads:
                        flat.append(np.ravel_multi_index(h + p, shape))
                        pos.append(n)
            self._tensor_cache[key] = (shape, fn, np.array(flat, dtype=np.intp), np.array(pos, dtype=np.intp))
        shape, fn, flat, pos = self._tensor_cache[key]

        def make(yv):
            out = np.zeros(shape)
            if fn is not None:
                vals = np.array(fn(*yv), dtype=float).reshape(-1)
                out.flat[flat] = vals[pos]
            return out
        return make

    def F(self, yv, order):
        return self._tensor("f", order)(yv)

    def Qd(self, yv, order):
        return self._tensor("Q", order)(yv)

    def Q(self, yv):
        r = self.rates(yv)
        return np.einsum("t,ti,tj->ij", r, self.Lr, self.Lr)

    def R(self, yv):
        r = self.rates(yv)
        return np.einsum("t,ti,tj,tk->ijk", r, self.Lr, self.Lr, self.Lr)

    # coordinates ---------------------------------------------------------------
    def full(self, v, affine=False):
        v = np.asarray(v, dtype=float)
        last = -v.sum(axis=-1, keepdims=True) + (1.0 if affine else 0.0)
        return np.concatenate([v, last], axis=-1)

    def full_matrix(self, W):
        m = self.m
        L = np.vstack([np.eye(m), -np.ones((1, m))])
        return L @ W @ L.T

    def check_x0(self, x0):
        x0 = np.asarray(x0, dtype=float)
        if x0.shape != (self.S,) or not np.isfinite(x0).all() or (x0 < 0).any() \
                or abs(x0.sum() - 1) > 1e-9:
            raise ValueError(f"x0: expected {self.S} non-negative densities summing to 1 "
                             f"(species {list(self.species)}), got {x0!r}")
        return x0

    def ode(self, t, x0):
        x0 = self.check_x0(x0)
        ts, scalar = _times(t)
        Z = _integrate(lambda _, yv: self.g_num(yv), x0[:-1], ts, jac=lambda _, yv: self.jac(yv))
        x = self.full(Z, affine=True)
        return x[0] if scalar else x


def _polish_componentwise(sysm, x, jac, steps=None):
    """Newton steps in all ``S`` densities, each balance scaled by its own flow: small densities
    to relative accuracy.

    Newton on the reduced drift stops on a residual that is small next to the
    total rate, and the eliminated species is ``1 - sum`` of the others: a
    density of 1e-47 (a deep tail) comes out as noise of about 1e-17 to
    1e-30. Here the unknowns are all ``S`` densities ``x`` (``jac`` gives the
    Jacobian of the full drift); the balance of species ``s`` is divided by
    ``a_s``, the total rate of the transitions that move it (at least
    1e-300), and the balance of the most populated species, implied by the
    others, is replaced by ``sum x = 1``. Each density then comes out to about
    the relative accuracy with which its own flows are computed (the
    supermarket's tails match their closed form to 1e-11 down to 1e-287). The
    steps may pass through worse points on the way (a tail of noise falls by
    many orders of magnitude, and a chain of small levels settles about one
    level a step: ``S + 8`` steps at most); the point kept is the one with
    the smallest largest scaled residual ``|f_s| / a_s`` among those whose
    plain residual ``max |f_s|`` is no larger than at the start.
    """
    L = sysm.changes.astype(float)                  # (T, S)
    flows = np.abs(L).T
    steps = sysm.S + 8 if steps is None else steps

    def scaled(v):
        r = sysm.rates_at(v)
        return L.T @ r, np.maximum(flows @ np.abs(r), 1e-300)

    with np.errstate(all="ignore"):         # a step may overshoot (overflow): it is then not kept
        f, a = scaled(x)
        plain = float(np.max(np.abs(f), initial=0.0))
        best, best_worst = x, float(np.max(np.abs(f) / a, initial=0.0))
        top = int(np.argmax(x))
        for _ in range(steps):
            if best_worst <= 8 * np.finfo(float).eps:
                break
            M = jac(x) / a[:, None]
            rhs = -f / a
            M[top], rhs[top] = 1.0, 1.0 - x.sum()
            try:
                x = x + np.linalg.solve(M, rhs)
            except np.linalg.LinAlgError:
                break
            if not np.isfinite(x).all():
                break
            f, a = scaled(x)
            worst = float(np.max(np.abs(f) / a, initial=0.0))
            if worst < best_worst and float(np.max(np.abs(f), initial=0.0)) <= max(plain, 1e-300):
                best, best_worst = x, worst
    return best


def _plain_residual(sysm, x):
    """``max_s |f_s(x)|`` of the drift in all ``S`` densities."""
    with np.errstate(all="ignore"):
        return float(np.max(np.abs(sysm.changes.T.astype(float) @ sysm.rates_at(x)), initial=0.0))


def _integrate(rhs, z0, ts, jac=None):
    """``z(t)`` at the (non-decreasing) times ``ts`` as rows; LSODA at tight tolerances."""
    from scipy.integrate import solve_ivp
    uniq, back = np.unique(ts, return_inverse=True)
    if uniq[-1] == 0:
        return np.tile(z0, (ts.size, 1))
    kw = {} if jac is None else {"jac": jac}
    sol = solve_ivp(rhs, (0.0, float(uniq[-1])), z0, t_eval=uniq, method="LSODA", rtol=1e-11, atol=1e-13,
                    **kw)
    if not sol.success:  # pragma: no cover - smooth bounded systems
        raise MeanFieldError(f"ODE integration failed: {sol.message}")
    return sol.y.T[back]


def _times(t):
    """``(times, one number?)``: the core's check of time points (:func:`ctmc._util.as_points`), non-decreasing."""
    ts = as_points(t, "t")
    if (np.diff(ts) < 0).any():
        raise ValueError(f"t: expected a time >= 0 or non-decreasing times >= 0, got {t!r}")
    return ts, np.ndim(t) == 0


# ---------------------------------------------------------------------------
# steady-state expansion
# ---------------------------------------------------------------------------
def _rel(r, ref):
    return float(np.abs(r).max() / max(np.abs(ref).max(), 1e-300))


def _solve_kron3(F, rhs):
    """Solve ``_op3(F, C) = rhs`` (the Kronecker sum F + F + F) as one Sylvester equation.

    With ``X[(i, j), k] = C[i, j, k]`` it reads ``(F (+) F) X + X F^T = R``, ``F (+) F = F x I + I x F``:
    Bartels-Stewart on the Schur forms (:func:`scipy.linalg.solve_sylvester`), backward stable
    whatever the conditioning of F's eigenvectors (review: the eigenbasis solve overflowed at 30
    species, where the eigenvector matrix has condition 8e17), then refined on its residual.
    """
    from scipy.linalg import solve_sylvester
    m = F.shape[0]
    eye = np.eye(m)
    L = np.kron(F, eye) + np.kron(eye, F)

    def solve(r):
        return solve_sylvester(L, F.T, r.reshape(m * m, m)).reshape(m, m, m)

    scale = max(np.abs(rhs).max(), 1e-300)
    C = solve(rhs)
    for _ in range(2):
        res = rhs - _op3(F, C)
        if not np.all(np.isfinite(res)) or np.abs(res).max() <= 1e-14 * scale:
            break
        C = C + solve(res)
    if not np.all(np.isfinite(C)):
        raise MeanFieldError("refined(order=2): the third-moment equation could not be solved (the Jacobian "
                             "at the fixed point is too close to singular)")
    return C


def _op3(F, C):
    return (np.einsum("ia,ajk->ijk", F, C) + np.einsum("ja,iak->ijk", F, C)
            + np.einsum("ka,ija->ijk", F, C))


def _rhs_C(F2, V, W, Q, DQ, R):
    h = np.einsum("iab,ab->i", F2, W)
    T = 0.5 * np.einsum("i,jk->ijk", h, W) + np.einsum("aj,iab,bk->ijk", W, F2, W)
    U = np.einsum("ij,k->ijk", Q, V) + np.einsum("ija,ak->ijk", DQ, W)
    # U is symmetric in (i, j): its three placements are U_ijk + U_ikj + U_jki
    return _sym3(T) + U + np.transpose(U, (0, 2, 1)) + np.transpose(U, (1, 2, 0)) + R


def _rhs_B(F2, F3, C, V, W, DQ, D2Q):
    G = np.einsum("ikmn,km->in", F3, W)
    S = 0.5 * np.einsum("ikm,kmj->ij", F2, C) + 0.5 * G @ W
    return S + S.T + np.einsum("ija,a->ij", DQ, V) + 0.5 * np.einsum("ijab,ab->ij", D2Q, W)


def _rhs_A(F2, F3, F4, B, C, W):
    return (0.5 * np.einsum("iab,ab->i", F2, B) + np.einsum("iabc,abc->i", F3, C) / 6.0
            + 3.0 * np.einsum("iabcd,ab,cd->i", F4, W, W) / 24.0)


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class _Transition:
    name: str
    change: dict
    expr: Any
    correction: Any = 0


class PopulationModel:
    r"""A density-dependent population process on a closed population of ``N`` individuals.

    Parameters
    ----------
    name : str
    species : sequence of str
        Distinct Python identifiers (they name the chain's variables too).

    Raises
    ------
    ValueError
        For fewer than two species, a duplicate or a name that is not an identifier.

    Notes
    -----
    The mean-field and refined computations are done in the reduced
    coordinates obtained by eliminating the **last** species (see the module
    docstring); the results are reported in full coordinates, species order.
    """

    def __init__(self, name: str, species):
        self.name = str(name)
        if isinstance(species, str) or not hasattr(species, "__iter__"):
            raise ValueError(f"species: expected a list of names, got {species!r}")
        species = tuple(species)
        if len(species) < 2:
            raise ValueError(f"species: a closed population needs at least two species, got {list(species)}")
        for s in species:
            if not isinstance(s, str) or not s.isidentifier():
                raise ValueError(f"species: each name must be a Python identifier, got {s!r}")
        dup = sorted({s for s in species if species.count(s) > 1})
        if dup:
            raise ValueError(f"species: duplicate names {dup}")
        self.species = species
        self._transitions: list[_Transition] = []
        self._cache: dict = {}

    # declaration ---------------------------------------------------------------
    @property
    def symbols(self) -> dict:
        """``{species: sympy.Symbol}``: the symbols a sympy-expression rate may use."""
        sympy = _sympy()
        return dict(zip(self.species, sympy.symbols(list(self.species), real=True)))

    def transition(self, name: str, change: Mapping, rate, correction=None) -> None:
        """Declare a transition: counts change by ``change`` at total rate ``N * rate(X / N)``
        (plus ``correction(X / N)`` when given).

        Parameters
        ----------
        name : str
            Unique among the transitions.
        change : dict
            ``{species: integer change}``; the changes must sum to 0 (the
            population is closed: individuals change species, none is born or dies).
        rate : callable, sympy expression, str or number
            The rate divided by ``N`` as a function of the densities: a callable of a
            mapping ``x`` (species -> density) using ordinary arithmetic (it is called
            once with sympy symbols), a sympy expression of :attr:`symbols`, or a
            string such as ``"beta * S * I"`` with numbers substituted.
        correction : same kinds as ``rate``, optional
            A rate term of order one in the N-system, ``N * rate(X/N) + correction(X/N)``
            (e.g. sampling without replacement): it shifts the drift by ``1/N`` and so
            enters the refined coefficient ``V``; ``refined(order=2)`` refuses it.

        Raises
        ------
        ValueError
            Naming the parameter: duplicate ``name``, unknown species, non-integer or
            non-zero-sum ``change``, a ``rate`` that is not a function of the species.
        """
        name = str(name)
        if any(t.name == name for t in self._transitions):
            raise ValueError(f"name: transition {name!r} is already declared")
        if not isinstance(change, Mapping) or not change:
            raise ValueError(f"change: transition {name!r}: expected a non-empty dict {{species: int}}, "
                             f"got {change!r}")
        full = {s: 0 for s in self.species}
        for s, c in change.items():
            if s not in full:
                raise ValueError(f"change: transition {name!r} names unknown species {s!r}; "
                                 f"species are {list(self.species)}")
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)) and not (
                    isinstance(c, (float, np.floating)) and float(c).is_integer()):
                raise ValueError(f"change: transition {name!r}: the change of {s!r} must be an integer, "
                                 f"got {c!r}")
            full[s] = int(c)
        if sum(full.values()) != 0:
            raise ValueError(f"change: transition {name!r}: changes sum to {sum(full.values())}, not 0; "
                             "the population is closed (counts sum to N), so what one species loses "
                             "another gains")
        if all(v == 0 for v in full.values()):
            raise ValueError(f"change: transition {name!r} changes nothing")
        expr = self._symbolic(rate, "rate", name)
        corr = 0 if correction is None else self._symbolic(correction, "correction", name)
        self._transitions.append(_Transition(name, full, expr, corr))
        self._cache.clear()

    def _symbolic(self, value, what, name):
        """A rate-like declaration as a sympy expression of the species (ValueError naming ``what``)."""
        sympy = _sympy()
        syms = self.symbols
        try:
            if callable(value) and not isinstance(value, sympy.Basic):
                expr = value(dict(syms))
            elif isinstance(value, str):
                expr = sympy.sympify(value, locals=dict(syms))
            else:
                expr = value
            expr = sympy.sympify(expr)
            # symbols of the same name as a species are that species
            expr = expr.subs({sympy.Symbol(s): syms[s] for s in self.species})
        except Exception as exc:
            raise ValueError(f"{what}: transition {name!r}: cannot evaluate it on symbolic densities "
                             f"({type(exc).__name__}: {exc}); write it with ordinary arithmetic "
                             "(+, -, *, /, **) or as a sympy expression") from None
        if expr.has(sympy.Heaviside, sympy.sign, sympy.DiracDelta):
            raise ValueError(f"{what}: transition {name!r} uses Heaviside, sign or DiracDelta, whose derivatives "
                             "are distributions; write the rate as a Piecewise smooth near the fixed point")
        if expr.has(sympy.Min, sympy.Max, sympy.Abs):
            # derivatives of Min/Max/Abs contain DiracDelta; as a Piecewise they are the one-sided ones,
            # right wherever the drift is smooth (the expansions need the fixed point off the kinks)
            expr = expr.rewrite(sympy.Piecewise)
        unknown = sorted(str(s) for s in expr.free_symbols if str(s) not in syms or s != syms[str(s)])
        if unknown:
            raise ValueError(f"{what}: transition {name!r} uses unknown symbols {unknown}; "
                             f"species are {list(self.species)}")
        return expr

    @property
    def transitions(self) -> tuple:
        """The declared transitions (name, change, rate expression)."""
        return tuple(self._transitions)

    def _system(self) -> _System:
        if "system" not in self._cache:
            if not self._transitions:
                raise ValueError("transition: the model has no transitions; declare some first")
            self._cache["system"] = _System(self.species, self._transitions)
        return self._cache["system"]

    # mean field ----------------------------------------------------------------
    def drift(self, y) -> np.ndarray:
        """The mean-field drift in reduced coordinates, from the symbolic declaration.

        ``y`` holds the densities of every species but the last (the last is
        ``1 - sum(y)``), shape ``(S - 1,)`` or ``(..., S - 1)``; the result is
        ``dy/dt`` of the same shape.

        >>> p = PopulationModel("si", ["S", "I"])
        >>> p.transition("infect", {"S": -1, "I": +1}, lambda x: 2.0 * x["S"] * x["I"])
        >>> p.transition("recover", {"I": -1, "S": +1}, lambda x: x["I"])
        >>> p.drift([0.5])                 # dS/dt = -2 S I + I at S = I = 1/2
        array([0.])
        """
        sysm = self._system()
        y = np.asarray(y, dtype=float)
        if y.shape[-1:] != (sysm.m,):
            raise ValueError(f"y: expected the densities of the first {sysm.m} species (the last is 1 - "
                             f"their sum), shape (..., {sysm.m}); got shape {y.shape}")
        return np.apply_along_axis(sysm.g_num, -1, y) if y.ndim > 1 else sysm.g_num(y)

    def derivatives(self, y) -> tuple:
        """``(J, H, Q)`` at the reduced coordinates ``y`` (see :meth:`drift`): the drift's Jacobian
        ``(m, m)`` and Hessian ``(m, m, m)``, ``H[i, j, k] = d^2 f_i / dy_j dy_k``, and the jump
        covariance ``Q = sum_l l l^T beta_l(y)`` ``(m, m)``; ``m = S - 1``. Symbolic derivatives
        of the declaration, compiled once."""
        sysm = self._system()
        y = np.asarray(y, dtype=float)
        if y.shape != (sysm.m,):
            raise ValueError(f"y: expected the densities of the first {sysm.m} species, shape ({sysm.m},); "
                             f"got shape {y.shape}")
        return sysm.jac(y), sysm.F(y, 2), sysm.Q(y)

    def mean_field(self, x0=None, *, tol: float = 1e-12, t_max: float = 1e6) -> MeanFieldResult:
        """Fixed point of the mean-field ODE, found from ``x0`` (default uniform).

        The ODE is integrated until the drift is below ``1e-6`` times the
        total rate per individual (or up to ``t_max`` in units of the inverse
        rate at the start), then Newton's method with the symbolic Jacobian on the
        tangent space polishes the point to ``max|f| <= tol`` times the total
        rate per individual there (at least 1). The ODE phase picks the basin
        of attraction (the point it finds from a start inside the basin of a
        stable fixed point is that point); a start exactly on an unstable fixed
        point stays there, and ``stable`` says so.

        Raises
        ------
        MeanFieldError
            If Newton does not reach ``tol`` (the result's evidence is in the message).
        """
        key = ("mf", None if x0 is None else tuple(np.asarray(x0, float)), tol)
        if key in self._cache:
            return self._cache[key]
        t0 = time.perf_counter()
        sysm = self._system()
        xs = np.full(sysm.S, 1.0 / sysm.S) if x0 is None else sysm.check_x0(x0)
        yv = xs[:-1].copy()
        from scipy.integrate import solve_ivp
        # times and the stopping test in units of the model's own rates (review: with rates scaled by 1e-4
        # an absolute test stopped at once and Newton found the unstable point between two stable ones)
        rate0 = float(np.abs(sysm.rates(yv)).sum()) or 1.0
        T = 10.0 / rate0
        while True:
            sol = solve_ivp(lambda _, v: sysm.g_num(v), (0.0, T), yv, method="LSODA", rtol=1e-10,
                            atol=1e-12 * min(1.0, rate0), jac=lambda _, v: sysm.jac(v))
            yv = sol.y[:, -1]
            rate = float(np.abs(sysm.rates(yv)).sum()) or rate0
            if np.abs(sysm.g_num(yv)).max() < 1e-6 * rate or T * rate0 >= t_max:
                break
            T *= 4
        # tol is relative to the total rate per individual there (a model in other time units converges alike)
        scale = max(1.0, float(np.abs(sysm.rates(yv)).sum()))
        it = 0
        for it in range(1, 51):
            step = np.linalg.lstsq(sysm.jac(yv), -sysm.g_num(yv), rcond=None)[0]
            yv = yv + step
            if np.abs(sysm.g_num(yv)).max() <= tol * scale * 1e-3 or (
                    np.abs(step).max() < 1e-15 and np.abs(sysm.g_num(yv)).max() <= tol * scale):
                break
        # the componentwise polish is kept only where it does not undo what Newton reached: its plain
        # residual (in all S densities, where a small last density is not 1 - sum) no larger, and no
        # density more negative (review: an absorbing species made a scaled residual of 1 "improve"
        # to 0.99 at a point with max|f| = 0.86)
        x_newton = sysm.full(yv, affine=True)
        res_newton = _plain_residual(sysm, x_newton)
        x = _polish_componentwise(sysm, x_newton, self._full_jacobian)
        res = _plain_residual(sysm, x)
        if not (res <= max(res_newton, tol * scale * 1e-3) and x.min() >= min(x_newton.min(), 0.0)):
            x, res = x_newton, res_newton
        yv = x[:-1].copy()
        if not res <= tol * scale or not np.isfinite(x).all() or (x < -1e-9).any():
            raise MeanFieldError(f"mean_field: no fixed point found on the simplex: max|f(x)| = {res:.3g} "
                                 f"(tol {tol:g} x total rate {scale:.3g}) at x = {x} after the ODE up to "
                                 f"t = {T:g} and {it} Newton steps; try another x0")
        Jr = sysm.jac(yv)
        eig = np.linalg.eigvals(Jr)
        # full Jacobian: d f_s / d x_u, from the reduced one is not unique; evaluate f symbolically in x
        out = MeanFieldResult(self.species, x, self._full_jacobian(x), Jr, eig, bool((eig.real < 0).all()),
                              res, it, time.perf_counter() - t0, sysm)
        self._cache[key] = out
        return out

    def _full_jacobian(self, x):
        if "fulljac" not in self._cache:
            sympy = _sympy()
            sysm = self._system()
            f = [sum((int(sysm.changes[t, i]) * e for t, e in enumerate(sysm.rates_full)), sympy.Integer(0))
                 for i in range(sysm.S)]
            J = [[sympy.diff(fi, s) for s in sysm.full_symbols] for fi in f]
            self._cache["fulljac"] = sympy.lambdify(sysm.full_symbols, J, "numpy")
        return np.array(self._cache["fulljac"](*x), dtype=float).reshape(len(x), len(x))

    def _stable_point(self, x0=None):
        mf = self.mean_field(x0)
        if not mf.stable:
            raise MeanFieldError(f"refined: the fixed point {mf.fixed_point} is not stable (eigenvalues on "
                                 f"the tangent space {mf.eigenvalues})"
                                 "; the expansion needs a Hurwitz Jacobian")
        return mf

    def _coefficients(self, order, x0=None):
        key = ("coef", order, None if x0 is None else tuple(np.asarray(x0, float)))
        if key in self._cache:
            return self._cache[key]
        from scipy.linalg import solve_continuous_lyapunov
        mf = self._stable_point(x0)
        sysm = self._system()
        yv = mf.fixed_point[:-1]
        F = mf.jacobian_reduced
        F2 = sysm.F(yv, 2)
        Q = sysm.Q(yv)
        W = solve_continuous_lyapunov(F, -Q)
        W = 0.5 * (W + W.T)
        if order == 2 and sysm.has_correction:
            raise ValueError("order: the 1/N^2 expansion of a model with rate corrections is not available; "
                             "use order=1")
        rhsV = 0.5 * np.einsum("iab,ab->i", F2, W) + sysm.gc_num(yv)
        V = np.linalg.solve(F, -rhsV)
        res = [_rel(F @ W + W @ F.T + Q, Q), _rel(F @ V + rhsV, rhsV)]
        A = None
        if order == 2:
            DQ, D2Q = sysm.Qd(yv, 1), sysm.Qd(yv, 2)
            F3, F4 = sysm.F(yv, 3), sysm.F(yv, 4)
            rhsC = _rhs_C(F2, V, W, Q, DQ, sysm.R(yv))
            C = _solve_kron3(F, -rhsC)
            rhsB = _rhs_B(F2, F3, C, V, W, DQ, D2Q)
            B = solve_continuous_lyapunov(F, -rhsB)
            rhsA = _rhs_A(F2, F3, F4, B, C, W)
            A = np.linalg.solve(F, -rhsA)
            res += [_rel(_op3(F, C) + rhsC, rhsC), _rel(F @ B + B @ F.T + rhsB, rhsB),
                    _rel(F @ A + rhsA, rhsA)]
        out = (mf, V, W, A, float(max(res)))
        self._cache[key] = out
        return out

    def refined(self, N, order: int = 1, *, x0=None) -> RefinedResult:
        """Refined mean field at the fixed point for ``N`` individuals (order 1 or 2).

        Parameters
        ----------
        N : number > 0
        order : {1, 2}
        x0 : array_like, optional
            Where the fixed point search starts (:meth:`mean_field`): picks the
            fixed point when there are several.

        Raises
        ------
        ValueError
            For ``N`` not a positive number or ``order`` not 1 or 2.
        MeanFieldError
            If the fixed point is not found or not stable.
        """
        N = _check_N(N)
        order = _check_order(order)
        mf, V, W, A, res = self._coefficients(order, x0)
        sysm = self._system()
        Vf = sysm.full(V)
        Af = None if A is None else sysm.full(A)
        dens = mf.fixed_point + Vf / N + (0 if Af is None else Af / N ** 2)
        return RefinedResult(N, order, dens, mf.fixed_point, Vf, Af, sysm.full_matrix(W), res)

    def refined_transient(self, t, x0, N, order: int = 1) -> RefinedTransientResult:
        """Refined mean field along the ODE from ``x0`` at the times ``t`` (see the module docstring).

        Integrates :math:`x, V, W` (and for order 2 :math:`C, B, A`) from
        :math:`V = W = \\dots = 0` at :math:`t = 0`. For one number ``t`` the arrays
        have no time axis; for an array, the time axis comes first.
        """
        N = _check_N(N)
        order = _check_order(order)
        sysm = self._system()
        if order == 2 and sysm.has_correction:
            raise ValueError("order: the 1/N^2 expansion of a model with rate corrections is not available; "
                             "use order=1")
        x0 = sysm.check_x0(x0)
        ts, scalar = _times(t)
        m = sysm.m
        sizes = [m, m, m * m] + ([m ** 3, m * m, m] if order == 2 else [])
        cuts = np.cumsum(sizes)[:-1]

        def rhs(_, z):
            parts = np.split(z, cuts)
            yv, V, W = parts[0], parts[1], parts[2].reshape(m, m)
            F, F2, Q = sysm.jac(yv), sysm.F(yv, 2), sysm.Q(yv)
            out = [sysm.g_num(yv), F @ V + 0.5 * np.einsum("iab,ab->i", F2, W) + sysm.gc_num(yv),
                   F @ W + W @ F.T + Q]
            if order == 2:
                C, B, A = parts[3].reshape(m, m, m), parts[4].reshape(m, m), parts[5]
                DQ, D2Q, F3, F4 = sysm.Qd(yv, 1), sysm.Qd(yv, 2), sysm.F(yv, 3), sysm.F(yv, 4)
                dC = _op3(F, C) + _rhs_C(F2, V, W, Q, DQ, sysm.R(yv))
                dB = F @ B + B @ F.T + _rhs_B(F2, F3, C, V, W, DQ, D2Q)
                dA = F @ A + _rhs_A(F2, F3, F4, B, C, W)
                out += [dC, dB, dA]
            return np.concatenate([np.ravel(o) for o in out])

        z0 = np.zeros(int(sum(sizes)))
        z0[:m] = x0[:-1]
        Z = _integrate(rhs, z0, ts)
        parts = np.split(Z, cuts, axis=1)
        x = sysm.full(parts[0], affine=True)
        V = sysm.full(parts[1])
        W = np.array([sysm.full_matrix(w.reshape(m, m)) for w in parts[2]])
        A = sysm.full(parts[5]) if order == 2 else None
        dens = x + V / N + (0 if A is None else A / N ** 2)
        if scalar:
            x, V, W, dens = x[0], V[0], W[0], dens[0]
            A = None if A is None else A[0]
        return RefinedTransientResult(float(ts[0]) if scalar else ts, N, order, dens, x, V, A, W)

    # exact finite N --------------------------------------------------------------
    def chain(self, N, initial=None, **build_options):
        """The exact CTMC on counts for ``N`` individuals, built with :class:`ctmc.Model`.

        One variable per species (named after it, ``0..N``); transition ``l`` fires
        where no count would go negative, at rate ``N * rate(X / N)`` evaluated on
        the count arrays. Without ``initial`` the chain starts from the counts nearest
        ``N * fixed_point`` (largest remainders, summing to ``N``).
        """
        from .model import Model
        N = _check_N(N)
        if int(N) != N:
            raise ValueError(f"N: the chain needs an integer population, got {N!r}")
        N = int(N)
        sysm = self._system()
        m = Model(f"{self.name}[N={N}]")
        v = {s: m.var(s, 0, N) for s in self.species}
        for tr, fn, cfn in zip(self._transitions, sysm._full_rate_fns, sysm._full_corr_fns):
            guard = True
            for s, c in tr.change.items():
                if c < 0:
                    guard = (v[s] >= -c) if guard is True else (guard & (v[s] >= -c))
            names = self.species

            def rate(env, fn=fn, cfn=cfn):
                x = [np.asarray(env[s], dtype=float) / N for s in names]
                return N * np.asarray(fn(*x), dtype=float) + np.asarray(cfn(*x), dtype=float)
            rate.__name__ = tr.name
            m.event(tr.name, guard=guard, rate=rate,
                    update={v[s]: v[s] + c for s, c in tr.change.items() if c})
        if initial is None:
            initial = _nearest_counts(self.mean_field().fixed_point, N, self.species)
        elif isinstance(initial, Mapping):
            initial = dict(initial)
            if set(initial) != set(self.species) or sum(int(c) for c in initial.values()) != N:
                raise ValueError(f"initial: expected counts of every species {list(self.species)} summing "
                                 f"to N = {N}, got {initial!r}")
        else:
            raise ValueError(f"initial: expected a dict of counts {{species: count}} summing to N = {N}, "
                             f"got {initial!r}")
        return m.build(initial=initial, **build_options)

    def exact(self, N, method: str = "auto", **options) -> ExactResult:
        """Expected densities under the stationary law of the chain for ``N`` individuals.

        ``method`` and ``options`` go to :meth:`ctmc.CTMC.stationary` (which raises
        on a failed solve, the result attached).

        A chain with an absorbing state (an SIS without external infection) has it
        as its stationary law; the mean field's endemic point then describes the
        quasi-stationary regime, not this answer.
        """
        ch = self.chain(N)
        st = ch.stationary(method, **options)
        dens = np.array([float(st.pi @ ch.states[s]) for s in self.species]) / int(N)
        return ExactResult(int(N), dens, st, ch.n_states)

    # comparison -----------------------------------------------------------------
    def compare(self, Ns, orders=(1, 2), *, quantity=None, x0=None, plot=None, ax=None, method: str = "auto"):
        """Exact, mean-field and refined values against ``N``, with their errors and fitted slopes.

        Parameters
        ----------
        Ns : sequence of int
        orders : sequence of {1, 2}
        x0 : densities, optional
            Start of the fixed-point search (a model with several stable points).
        quantity : callable, optional
            Compare ``quantity(x)`` instead of the whole density vector: ``x``
            maps each species to its density (``lambda x: x["I"]``, or a mean
            such as ``lambda x: sum(k * x[f"x{k}"] for k in range(4))``); the
            errors are then absolute differences of that number.
        plot : str or path, optional
            Write a log-log plot of the errors against ``N`` to this file (needs matplotlib).
        ax : matplotlib Axes, optional
            Draw the plot on it instead.

        Returns
        -------
        pandas.DataFrame or list of dict
            Columns ``N``, ``states``, ``exact``, ``mean_field``, ``refined_<k>``,
            ``error_mean_field``, ``error_refined_<k>`` (density vectors in species
            order and max-over-species errors, or numbers with ``quantity``). A
            DataFrame when pandas is installed; its ``attrs["slopes"]`` (and the
            list's rows' shared ``slopes`` key otherwise) hold the fitted log-log
            slopes of each error. :func:`format_comparison` prints it.
        """
        try:
            orders = tuple(_check_order(o) for o in orders)
        except ValueError as exc:
            raise ValueError(f"orders: {str(exc).removeprefix('order: ')}") from None
        if any(isinstance(n, bool) or not float(n).is_integer() for n in Ns):
            raise ValueError(f"Ns: expected whole population sizes, got {list(Ns)}")
        Ns = [int(_check_N(n)) for n in Ns]
        if quantity is not None and not callable(quantity):
            raise ValueError(f"quantity: expected a function of the densities x (a mapping species -> density), "
                             f"got {quantity!r}")

        def value(v):
            v = np.asarray(v, dtype=float)
            return v if quantity is None else float(quantity(dict(zip(self.species, v))))

        def err(a, b):
            return float(np.abs(np.asarray(a) - np.asarray(b)).max())

        mf = value(self.mean_field(x0).fixed_point)
        rows = []
        for N in Ns:
            exr = self.exact(N, method)
            ex = value(exr.densities)
            row = {"N": N, "states": exr.n_states, "exact": ex, "mean_field": mf,
                   "error_mean_field": err(ex, mf)}
            for k in orders:
                r = value(self.refined(N, k, x0=x0).densities)
                row[f"refined_{k}"] = r
                row[f"error_refined_{k}"] = err(ex, r)
            rows.append(row)
        slopes = {}
        if len(Ns) >= 2:
            for col in ["error_mean_field"] + [f"error_refined_{k}" for k in orders]:
                e = np.array([r[col] for r in rows])
                if (e > 0).all():
                    slopes[col] = float(np.polyfit(np.log(Ns), np.log(e), 1)[0])
        if plot is not None or ax is not None:
            _plot(rows, orders, slopes, plot, ax, self.name, "error" if quantity is not None else "max error of E[X/N]")
        try:
            import pandas as pd
        except ImportError:
            for r in rows:
                r["slopes"] = slopes
            return rows
        df = pd.DataFrame(rows)
        df.attrs["slopes"] = slopes
        return df


def comparison_records(table) -> tuple:
    """``(rows, slopes)`` of a :meth:`PopulationModel.compare` table, whether a DataFrame or a list of dicts."""
    rows = table.to_dict("records") if hasattr(table, "to_dict") else list(table)
    slopes = table.attrs["slopes"] if hasattr(table, "attrs") else (rows[0].get("slopes", {}) if rows else {})
    return rows, slopes


def format_comparison(table, title: str = "") -> str:
    """The table of :meth:`PopulationModel.compare` as text, slopes below it (values shown for a
    ``quantity``; for whole density vectors the max-over-species errors only)."""
    from .report import format_table
    rows, slopes = comparison_records(table)
    keys = ["exact", "mean_field"] + sorted(k for k in rows[0] if k.startswith("refined_")) if rows else []
    errs = [f"error_{k}" for k in keys[1:]]
    scalar = bool(rows) and np.ndim(rows[0]["exact"]) == 0
    shown = keys if scalar else []
    body = [[r["N"], r["states"], *(f"{float(r[k]):.8f}" for k in shown), *(f"{r[e]:.2e}" for e in errs)]
            for r in rows]
    heads = ["N", "states", *(k.replace("_", " ") for k in shown), *(e.replace("error_", "err ").replace("_", " ")
                                                                     for e in errs)]
    text = format_table(body, heads, title=title)
    if slopes:
        text += "\nlog-log slopes of the errors: " + ", ".join(
            f"{k.replace('error_', '').replace('_', ' ')} {v:.2f}" for k, v in slopes.items())
    return text


def _plot(rows, orders, slopes, path, ax, name, ylabel):
    from .report import new_figure, save_figure
    fig = None
    if ax is None:
        fig = new_figure(figsize=(5, 4), layout="constrained")
        ax = fig.subplots()
    Ns = [r["N"] for r in rows]
    for col, lab in [("error_mean_field", "mean field")] + [(f"error_refined_{k}", f"refined order {k}")
                                                            for k in orders]:
        s = slopes.get(col)
        ax.loglog(Ns, [r[col] for r in rows], "o-", label=lab + ("" if s is None else f" (slope {s:.2f})"))
    ax.set_xlabel("N")
    ax.set_ylabel(ylabel)
    ax.set_title(name)
    ax.legend()
    if fig is not None and path is not None:
        import pathlib
        path = pathlib.Path(path)
        save_figure(fig, path.parent, path.name, say=None)


def _nearest_counts(x, N, species):
    raw = np.asarray(x) * N
    c = np.floor(raw).astype(int)
    short = N - int(c.sum())
    order = np.argsort(-(raw - c), kind="stable")
    c[order[:short]] += 1
    return {s: int(k) for s, k in zip(species, c)}


def _check_N(N):
    if isinstance(N, bool) or not isinstance(N, (int, float, np.integer, np.floating)) \
            or not math.isfinite(N) or N <= 0:
        raise ValueError(f"N: expected a positive population size, got {N!r}")
    return N


def _check_order(order):
    if isinstance(order, bool) or order not in (1, 2):
        raise ValueError(f"order: expected 1 (x* + V/N) or 2 (x* + V/N + A/N^2), got {order!r}")
    return int(order)
