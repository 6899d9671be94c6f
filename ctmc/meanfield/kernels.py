"""The numerical kernels of :mod:`ctmc.meanfield` (its module docstring has the equations).

:class:`System` is a declaration compiled once from sympy to numpy: the drift
and its Jacobian in reduced coordinates, the derivative tensors of the drift
and of the jump covariance, the third jump moment, and the map back to full
coordinates. The functions below it search the fixed point (ODE, Newton,
componentwise polish), solve the moment equations at stationarity and
integrate them along the ODE.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping

import numpy as np

from .._util import as_points
from .results import MeanFieldError

__all__ = ["System", "load_sympy", "SYMPY_INSTALL_HELP", "find_fixed_point", "polish_componentwise",
           "plain_residual", "stationary_coefficients", "transient_moments", "integrate", "check_times",
           "solve_kron3", "op3", "sym3", "rhs_A", "rhs_B", "rhs_C", "rel"]


#: how to get sympy, the one dependency of :mod:`ctmc.meanfield` that the core does not have
SYMPY_INSTALL_HELP = ("ctmc.meanfield (PopulationModel: the mean field, its refinements and the exact "
                      "chain from a declaration) compiles its rates with sympy, which is not installed: "
                      "pip install 'ctmc-exact[meanfield]' (or pip install 'sympy>=1.12')")


def load_sympy():
    """The :mod:`sympy` module, imported on first use (an optional dependency: the ``meanfield`` extra).

    Raises
    ------
    ImportError
        When sympy is not installed, naming the extra that installs it.
    """
    try:
        import sympy
    except ImportError as exc:
        raise ImportError(SYMPY_INSTALL_HELP, name="sympy") from exc
    return sympy


# ---------------------------------------------------------------------------
# the compiled system (symbolic once, numeric after)
# ---------------------------------------------------------------------------
def sym3(X):
    """Sum of the three placements of the first index of ``X_{ijk}`` (symmetric in ``jk``)."""
    return X + np.transpose(X, (1, 0, 2)) + np.transpose(X, (1, 2, 0))


class System:
    """Reduced-coordinate drift, jump moments and their derivatives, compiled to numpy."""

    def __init__(self, species, transitions):
        sympy = load_sympy()
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
        self.full_rate_fns = [sympy.lambdify(syms, e, "numpy") for e in self.rates_full]
        # rate terms of order one in the N-system (N beta(x) + gamma(x)): a 1/N shift of the drift
        corr = [sympy.sympify(tr.correction).subs(sub) for tr in transitions]
        self.has_correction = any(c != 0 for c in corr)
        self.full_corr_fns = [sympy.lambdify(syms, sympy.sympify(tr.correction), "numpy") for tr in transitions]
        gc = [sum((int(Lr[t, i]) * corr[t] for t in range(len(corr)) if Lr[t, i]), sympy.Integer(0))
              for i in range(m)]
        self._gc_fn = sympy.lambdify(y, gc, "numpy")
        self._tensor_cache = {}
        self._rate_jac_fn = None

    # numeric evaluation ---------------------------------------------------
    def rates_at(self, x):
        """The transitions' density rates at the densities ``x`` of all ``S`` species."""
        return np.array([np.broadcast_to(f(*x), ()) for f in self.full_rate_fns], dtype=float)

    def rates(self, yv):
        return np.array([np.broadcast_to(r, ()) for r in self._rate_fns(*yv)], dtype=float)

    def g_num(self, yv):
        return np.array(self._g_fn(*yv), dtype=float).reshape(self.m)

    def gc_num(self, yv):
        """The drift's 1/N term from the transitions' corrections (reduced coordinates)."""
        return np.array([np.broadcast_to(v, ()) for v in self._gc_fn(*yv)], dtype=float).reshape(self.m)

    def jac(self, yv):
        return np.array(self._jac_fn(*yv), dtype=float).reshape(self.m, self.m)

    def rate_jacobian(self, x):
        """``d beta_t / d x_s`` of every transition's rate in all ``S`` densities, ``(T, S)`` (compiled once)."""
        if self._rate_jac_fn is None:
            sympy = load_sympy()
            J = [[sympy.diff(e, s) for s in self.full_symbols] for e in self.rates_full]
            self._rate_jac_fn = sympy.lambdify(self.full_symbols, J, "numpy")
        T = len(self.rates_full)
        return np.array([[np.broadcast_to(v, ()) for v in row] for row in self._rate_jac_fn(*x)],
                        dtype=float).reshape(T, self.S)

    def full_jacobian(self, x):
        """:math:`Df(x)` in all ``S`` densities: the changes times :meth:`rate_jacobian`."""
        return self.changes.T.astype(float) @ self.rate_jacobian(x)

    def _tensor(self, which, order):
        """Compiled ``D^order`` of the drift (``which='f'``) or of ``Q`` (``'Q'``) as a dense-array maker."""
        key = (which, order)
        if key not in self._tensor_cache:
            sympy = load_sympy()
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
        """``x0`` (densities in species order, or a dict ``{species: density}``) as a checked array.

        Raises ValueError naming ``x0`` and the species at fault: unknown or missing
        species in a dict, a non-finite or negative density, a sum other than 1.
        """
        species = list(self.species)
        if isinstance(x0, Mapping):
            unknown = sorted(str(k) for k in x0 if k not in species)
            if unknown:
                raise ValueError(f"x0: unknown species {unknown}; species are {species}")
            missing = [s for s in species if s not in x0]
            if missing:
                raise ValueError(f"x0: missing the densities of species {missing} (give every one of "
                                 f"{species}, summing to 1)")
            x0 = [x0[s] for s in species]
        try:
            x = np.asarray(x0, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"x0: expected {self.S} densities (species {species}) or a dict "
                             f"{{species: density}}, got {x0!r}") from None
        if x.shape != (self.S,):
            raise ValueError(f"x0: expected {self.S} densities (species {species}), got shape {x.shape}")
        bad = [s for s, v in zip(species, x) if not math.isfinite(v)]
        if bad:
            raise ValueError(f"x0: the densities of {bad} are not finite, got {x.tolist()}")
        neg = [s for s, v in zip(species, x) if v < 0]
        if neg:
            raise ValueError(f"x0: the densities of {neg} are negative (allowed: 0..1), got {x.tolist()}")
        if abs(x.sum() - 1) > 1e-9:
            raise ValueError(f"x0: the densities must sum to 1 (a closed population), got {x.tolist()} "
                             f"summing to {x.sum()!r}")
        return x

    def ode(self, t, x0):
        x0 = self.check_x0(x0)
        ts, scalar = check_times(t)
        Z = integrate(lambda _, yv: self.g_num(yv), x0[:-1], ts, jac=lambda _, yv: self.jac(yv))
        x = self.full(Z, affine=True)
        return x[0] if scalar else x


# ---------------------------------------------------------------------------
# the fixed point
# ---------------------------------------------------------------------------
def find_fixed_point(sysm, xs, tol, t_max):
    """A fixed point of the drift of ``sysm`` from the densities ``xs``: ``(x, max|f(x)|, Newton steps)``.

    The ODE phase, Newton on the tangent space and the componentwise polish that
    :meth:`ctmc.meanfield.PopulationModel.mean_field` describes.

    Raises
    ------
    MeanFieldError
        If the point reached is not a fixed point on the simplex to ``tol`` times the total rate.
    """
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
    res_newton = plain_residual(sysm, x_newton)
    x = polish_componentwise(sysm, x_newton)
    res = plain_residual(sysm, x)
    if not (res <= max(res_newton, tol * scale * 1e-3) and x.min() >= min(x_newton.min(), 0.0)):
        x, res = x_newton, res_newton
    if not res <= tol * scale or not np.isfinite(x).all() or (x < -1e-9).any():
        raise MeanFieldError(f"mean_field: no fixed point found on the simplex: max|f(x)| = {res:.3g} "
                             f"(tol {tol:g} x total rate {scale:.3g}) at x = {x} after the ODE up to "
                             f"t = {T:g} and {it} Newton steps; try another x0")
    return x, res, it


def polish_componentwise(sysm, x, steps=None, noise=1e-12):
    """Newton in log coordinates on each species' balance of inflow and outflow: small densities to
    relative accuracy.

    Newton on the reduced drift stops on a residual that is small next to the
    total rate, and the eliminated species is ``1 - sum`` of the others: a
    density of 1e-47 (a deep tail) comes out as noise of about 1e-17, or 0.
    Here, with ``in_s(x)`` and ``out_s(x)`` the total rates of the
    transitions that raise and lower species ``s`` (``f_s = in_s - out_s``),
    the most populated species ``t`` is ``1 - sum`` of the others and every
    other species with ``x_s, in_s, out_s > 0`` solves

        ``log in_s(x) - log out_s(x) = 0``  in the unknowns ``y_s = log x_s``

    by Newton's method (``x_s <- x_s exp(dy_s)``; a step may raise a
    density by a factor ``e^2`` at most). No step makes a density negative,
    and a balance in logarithms is nearly linear where flows
    are products of densities (``x_k ~ lam x_{k-1}^2``), so tails of 1e-287
    are reached in a few steps. Densities stay fixed where a logarithm is not
    defined (a species with no inflow or no outflow at the point).

    The start. Densities ``<= noise`` (not the top one) are not trusted: a
    chain of noise levels can balance itself (each fed by the departures of
    the next), a state from which Newton does not find the tail. They are set
    to 0 and rebuilt from the larger ones, one generation a pass (at most one
    pass per such density): a zero species with an inflow starts at its local
    balance ``in_s / (d out_s / d x_s)``; the transitions out of zero species
    have rate 0 in a population model, so only flows from the trusted
    densities count. Those with no inflow then stay 0, unless the zero state
    of the group is unstable (an eigenvalue of ``Df`` restricted to them with
    positive real part: a self-sustaining rare species, such as an epidemic
    just above threshold), in which case they keep their start values.

    At most ``S + 8`` Newton steps (default), each one evaluation of the
    rates and of their Jacobian (:meth:`System.rate_jacobian`) and a dense
    solve, stopping once no log-density moves by more than 1e-10. The point
    returned is the one with the smallest largest scaled residual
    ``|f_s| / (in_s + out_s)`` among the start and the steps whose plain
    residual ``max |f_s|`` is no larger than at the start (or the rounding of
    the largest flows) and whose densities move from the start by no more
    than ``1e-6 |x_s| + noise`` each (a polish, not a search for another
    fixed point). What it reaches: each density to about the relative
    accuracy with which its own flows are computed, the supermarket's tails
    to 1e-10 against their closed form down to 1e-287, from noisy starts too.
    Densities below about 1e-300 (where flows underflow) are not resolved.
    """
    L = sysm.changes.astype(float)                  # (T, S)
    Lin, Lout = np.where(L > 0, L, 0.0).T, np.where(L < 0, -L, 0.0).T
    S = sysm.S
    steps = S + 8 if steps is None else steps
    x0 = np.asarray(x, dtype=float)
    top = int(np.argmax(x0))
    others = np.arange(S) != top

    def settle(v):
        v = v.copy()
        v[top] = 1.0 - v[others].sum()
        return v

    def flows(v):
        r = sysm.rates_at(v)
        return Lin @ r, Lout @ r

    def local(v):
        R = sysm.rate_jacobian(v)
        return Lin @ R, Lout @ R

    def merit(v):
        i, o = flows(v)
        f = i - o
        return (float(np.max(np.abs(f[others]) / np.maximum(i + o, 1e-300)[others], initial=0.0)),
                float(np.max(np.abs(f), initial=0.0)), float(np.max(i + o, initial=0.0)))

    with np.errstate(all="ignore"):         # a step may overflow: it is then not kept
        best_worst, plain, big = merit(x0)
        plain = max(plain, 8 * np.finfo(float).eps * big)     # the rounding of the largest flows
        reach = 1e-6 * np.abs(x0) + noise
        best = x0
        # the start: densities at noise level are rebuilt from the larger ones
        zero = others & (x0 <= noise)
        x = settle(np.where(zero, 0.0, x0))
        for _ in range(int(zero.sum())):
            inn, _out = flows(x)
            c = np.diag(local(x)[1])
            born = zero & (x == 0) & (inn > 0) & (c > 0)
            if not born.any():
                break
            x[born] = inn[born] / c[born]
            x = settle(x)
        unborn = zero & (x == 0) & (x0 > 0)
        if unborn.any():
            Jin, Jout = local(x)
            if np.linalg.eigvals((Jin - Jout)[np.ix_(unborn, unborn)]).real.max() > 0:
                x[unborn] = x0[unborn]
                x = settle(x)
        for _ in range(steps + 1):
            worst, pl, _big = merit(x)
            if worst < best_worst and pl <= plain and (np.abs(x - x0) <= reach).all():
                best, best_worst = x, worst
            inn, out = flows(x)
            free = others & (x > 0) & (inn > 0) & (out > 0)
            if not free.any():
                break
            Jin, Jout = local(x)
            g = np.log(inn[free]) - np.log(out[free])
            Jg = Jin[free] / inn[free, None] - Jout[free] / out[free, None]
            M = (Jg[:, free] - Jg[:, [top]]) * x[free]      # d/dy_u, x_top = 1 - sum of the others
            try:
                dy = np.linalg.solve(M, -g)
            except np.linalg.LinAlgError:
                break
            if not np.isfinite(dy).all():
                break
            x = x.copy()
            x[free] = x[free] * np.exp(np.minimum(dy, 2.0))
            x = settle(x)
            if np.abs(dy).max() <= 1e-10:
                worst, pl, _big = merit(x)
                if worst < best_worst and pl <= plain and (np.abs(x - x0) <= reach).all():
                    best = x
                break
    return best


def plain_residual(sysm, x):
    """``max_s |f_s(x)|`` of the drift in all ``S`` densities."""
    with np.errstate(all="ignore"):
        return float(np.max(np.abs(sysm.changes.T.astype(float) @ sysm.rates_at(x)), initial=0.0))


def integrate(rhs, z0, ts, jac=None):
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


def check_times(t):
    """``(times, one number?)``: the core's check of time points (:func:`ctmc._util.as_points`), non-decreasing."""
    ts = as_points(t, "t")
    if (np.diff(ts) < 0).any():
        raise ValueError(f"t: expected a time >= 0 or non-decreasing times >= 0, got {t!r}")
    return ts, np.ndim(t) == 0


# ---------------------------------------------------------------------------
# steady-state expansion
# ---------------------------------------------------------------------------
def rel(r, ref):
    return float(np.abs(r).max() / max(np.abs(ref).max(), 1e-300))


def solve_kron3(F, rhs):
    """Solve ``op3(F, C) = rhs`` (the Kronecker sum F + F + F) as one Sylvester equation.

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
        res = rhs - op3(F, C)
        if not np.all(np.isfinite(res)) or np.abs(res).max() <= 1e-14 * scale:
            break
        C = C + solve(res)
    if not np.all(np.isfinite(C)):
        raise MeanFieldError("refined(order=2): the third-moment equation could not be solved (the Jacobian "
                             "at the fixed point is too close to singular)")
    return C


def op3(F, C):
    return (np.einsum("ia,ajk->ijk", F, C) + np.einsum("ja,iak->ijk", F, C)
            + np.einsum("ka,ija->ijk", F, C))


def rhs_C(F2, V, W, Q, DQ, R):
    h = np.einsum("iab,ab->i", F2, W)
    T = 0.5 * np.einsum("i,jk->ijk", h, W) + np.einsum("aj,iab,bk->ijk", W, F2, W)
    U = np.einsum("ij,k->ijk", Q, V) + np.einsum("ija,ak->ijk", DQ, W)
    # U is symmetric in (i, j): its three placements are U_ijk + U_ikj + U_jki
    return sym3(T) + U + np.transpose(U, (0, 2, 1)) + np.transpose(U, (1, 2, 0)) + R


def rhs_B(F2, F3, C, V, W, DQ, D2Q):
    G = np.einsum("ikmn,km->in", F3, W)
    S = 0.5 * np.einsum("ikm,kmj->ij", F2, C) + 0.5 * G @ W
    return S + S.T + np.einsum("ija,a->ij", DQ, V) + 0.5 * np.einsum("ijab,ab->ij", D2Q, W)


def rhs_A(F2, F3, F4, B, C, W):
    return (0.5 * np.einsum("iab,ab->i", F2, B) + np.einsum("iabc,abc->i", F3, C) / 6.0
            + 3.0 * np.einsum("iabcd,ab,cd->i", F4, W, W) / 24.0)


def stationary_coefficients(sysm, yv, F, order):
    """``(V, W, A, residual)`` at the stable fixed point ``yv`` (reduced coordinates, ``F = Dg(yv)``).

    The stationary moment equations of the module docstring, each a linear
    solve: Lyapunov for ``W`` (and ``B``), ``F`` for ``V`` (and ``A``), the
    Kronecker sum for ``C``; ``A`` is None for order 1. ``residual`` is the
    largest relative residual of the equations solved.
    """
    from scipy.linalg import solve_continuous_lyapunov
    F2 = sysm.F(yv, 2)
    Q = sysm.Q(yv)
    W = solve_continuous_lyapunov(F, -Q)
    W = 0.5 * (W + W.T)
    rhsV = 0.5 * np.einsum("iab,ab->i", F2, W) + sysm.gc_num(yv)
    V = np.linalg.solve(F, -rhsV)
    res = [rel(F @ W + W @ F.T + Q, Q), rel(F @ V + rhsV, rhsV)]
    A = None
    if order == 2:
        DQ, D2Q = sysm.Qd(yv, 1), sysm.Qd(yv, 2)
        F3, F4 = sysm.F(yv, 3), sysm.F(yv, 4)
        rhsC = rhs_C(F2, V, W, Q, DQ, sysm.R(yv))
        C = solve_kron3(F, -rhsC)
        rhsB = rhs_B(F2, F3, C, V, W, DQ, D2Q)
        B = solve_continuous_lyapunov(F, -rhsB)
        rhsA = rhs_A(F2, F3, F4, B, C, W)
        A = np.linalg.solve(F, -rhsA)
        res += [rel(op3(F, C) + rhsC, rhsC), rel(F @ B + B @ F.T + rhsB, rhsB),
                rel(F @ A + rhsA, rhsA)]
    return V, W, A, float(max(res))


# ---------------------------------------------------------------------------
# transient expansion
# ---------------------------------------------------------------------------
def transient_moments(sysm, x0, ts, order):
    """``(x, V, W, A)`` at the times ``ts`` (rows), integrated from ``x0`` with zero moments.

    The transient moment equations of the module docstring in reduced
    coordinates (``C, B, A`` for order 2 only; ``A`` is None for order 1),
    returned in full coordinates.
    """
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
            dC = op3(F, C) + rhs_C(F2, V, W, Q, DQ, sysm.R(yv))
            dB = F @ B + B @ F.T + rhs_B(F2, F3, C, V, W, DQ, D2Q)
            dA = F @ A + rhs_A(F2, F3, F4, B, C, W)
            out += [dC, dB, dA]
        return np.concatenate([np.ravel(o) for o in out])

    z0 = np.zeros(int(sum(sizes)))
    z0[:m] = x0[:-1]
    Z = integrate(rhs, z0, ts)
    parts = np.split(Z, cuts, axis=1)
    x = sysm.full(parts[0], affine=True)
    V = sysm.full(parts[1])
    W = np.array([sysm.full_matrix(w.reshape(m, m)) for w in parts[2]])
    A = sysm.full(parts[5]) if order == 2 else None
    return x, V, W, A
