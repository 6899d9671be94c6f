r"""Mean-field limit of the supermarket model and its refined :math:`1/n` correction.

Everything here is computed by the generic module :mod:`ctmc.meanfield`, from the
supermarket declared as a population process (:func:`population_model`); the
hand-derived drift, derivatives and closed forms that this module held before
live on as the independent reference of the tests (``tests/reference_supermarket_mf.py``),
which check that both routes agree to 1e-10.

Mean field
----------
As :math:`n \to \infty` (with replacement), the tails :math:`u_k` (fraction of
queues with at least :math:`k` jobs) follow the ODE (Mitzenmacher 1996;
Vvedenskaya, Dobrushin & Karpelevich 1996)

.. math::

    \dot u_k = \lambda (u_{k-1}^d - u_k^d) - (u_k - u_{k+1}), \qquad u_0 = 1,

whose fixed point is :math:`u_k = \lambda^{(d^k - 1)/(d - 1)}` for
:math:`d \ge 2` and :math:`u_k = \lambda^k` for :math:`d = 1`
(:func:`mean_field_fixed_point`, :func:`mean_field_ode`; the ODE is integrated
with a tolerance relative to each fraction, so its deep tails keep their digits
too). With a capacity
:math:`B` (:math:`u_{B+1} = 0`) the fixed point solves
:math:`u_k = \lambda (u_{k-1}^d - u_B^d)`.

The population model
--------------------
Species ``x1, ..., xK, x0``: the fractions of queues holding exactly
:math:`k` jobs, with a capacity of :math:`K` levels. An arrival moves a queue
from :math:`k` to :math:`k + 1` at rate :math:`n \lambda (u_k^d - u_{k+1}^d)`
(:math:`u_k = \sum_{j \ge k} x_j`), a departure from :math:`k` to
:math:`k - 1` at rate :math:`n x_k`. ``x0`` is last, so it is the species
:mod:`ctmc.meanfield` eliminates: the reduced coordinates are
:math:`(x_1, \dots, x_K)`, every tail is a sum of small positive numbers (no
:math:`1 - \sum` cancellation): measured against the closed form, the tails
keep a relative accuracy of about :math:`10^{-13}` at moderate loads
(:math:`3 \times 10^{-10}` at :math:`\lambda = 0.999`, where the Jacobian is
nearly singular) and, after the generic module's componentwise polish of the
fixed point, better than :math:`10^{-9}` all the way down to
:math:`10^{-287}` (tests against the closed form). Without replacement the
:math:`1/n` part of the hypergeometric sampling law,
:math:`\prod_{j<d}(s - j/n)/(1 - j/n) = s^d + \tfrac{d(d-1)}{2n}(s^d -
s^{d-1}) + O(n^{-2})`, is declared as a rate correction
(``transition(..., correction=...)``): it shifts :math:`V`.

Levels. The fixed point with or without a capacity is below the closed form
:math:`\lambda^{(d^k - 1)/(d - 1)}` (from :math:`u_k \le \lambda u_{k-1}^d`),
and :math:`V_{k+1}`, :math:`W_{kk}` are of the order of :math:`u_k`. The
model is therefore declared with one level more than the first :math:`k`
whose bound is below :math:`10^{-300}` (14 levels at :math:`d = 2`,
:math:`\lambda = 0.9`; 24 at :math:`\lambda = 0.9999`), or the capacity if that
is smaller; deeper levels, below the range of doubles, are reported as 0. The
generic module balances each level's flows to round-off (its componentwise
polish), so the tails keep their relative accuracy down there (1e-11 or better
against the closed form). The symbolic set-up (a fraction of a second) is done
once per ``(d, lam, levels, replacement)``.

:math:`d = 1` (random routing) is linear: independent M/M/1(/B) queues, no
:math:`1/n` term (:math:`V = 0`), :math:`W_{jk} = u_{\max(j,k)} - u_j u_k`;
those closed forms are used, since the geometric tail would need hundreds of
levels in the generic route (the tests check that it agrees where it is cheap).

Refined mean field
------------------
:math:`E[u^{(n)}] = \pi + V / n + o(1/n)` and :math:`n \operatorname{Cov}(u^{(n)})
\to W` (Gast & Van Houdt 2017; Gast, Bortolussi & Tribastone 2018):
:meth:`ctmc.meanfield.PopulationModel.refined` in the coordinates ``x``, mapped
to the tails by the triangular matrix :math:`u = T x`
(:func:`refined_mean_field`).

References
----------
M. Mitzenmacher, "The power of two choices in randomized load balancing",
IEEE TPDS 12(10), 2001. N. D. Vvedenskaya, R. L. Dobrushin, F. I. Karpelevich,
Problems of Information Transmission 32(1), 1996. N. Gast, B. Van Houdt,
"A refined mean field approximation", POMACS 1(2), 2017. N. Gast,
L. Bortolussi, M. Tribastone, "Size expansions of mean field approximation:
transient and steady-state analysis", Performance Evaluation 2018.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from .params import check_mean_field, int_param

__all__ = ["mean_field_drift", "mean_field_fixed_point", "mean_field_ode", "mean_field_derivatives",
           "refined_correction", "refined_mean_field", "RefinedMeanField", "population_model"]

#: tails below this bound are left out of the declared model (see the module docstring)
_TAIL = 1e-300


# ---------------------------------------------------------------------------
# levels
# ---------------------------------------------------------------------------
def _default_levels(d, lam):
    # levels reported for the infinite-buffer mean field: 40 for d >= 2, until lam^k < 1e-30 for d = 1
    if d == 1:
        return max(2, int(math.ceil(math.log(1e-30) / math.log(lam))) + 1)
    return 40


def _levels(d, lam, K, capacity=True):
    """Levels to declare (d >= 2): one more than the first k with lam^((d^k-1)/(d-1)) < _TAIL, at
    most K where K is a capacity; without one (``capacity=False``) K only says how many are reported,
    and the declared model is not cut there (it would be the capacity-K queue)."""
    if lam >= 1:
        return K
    if not capacity:
        K = 10 ** 6
    need = math.log(_TAIL) / math.log(lam)          # (d^k - 1)/(d - 1) > need  <=>  bound(k) < _TAIL
    k = 1
    while k <= K and (d ** k - 1) / (d - 1) <= need:
        k += 1
    return min(K, k + 1)


def _levels_arg(d, lam, capacity, levels):
    if capacity is not None:
        return capacity
    return _default_levels(d, lam) if levels is None else int_param("levels", levels, 1)


# ---------------------------------------------------------------------------
# the population model and the coordinates
# ---------------------------------------------------------------------------
def population_model(d, lam, levels, replacement=True):
    r"""The supermarket with capacity ``levels`` declared as a :class:`ctmc.meanfield.PopulationModel`.

    Species ``x1, ..., x<levels>, x0`` (fractions of queues with exactly ``k``
    jobs; ``x0`` last, the species :mod:`ctmc.meanfield` eliminates). With
    replacement its :meth:`~ctmc.meanfield.PopulationModel.chain` is the
    occupancy chain of :class:`Supermarket` (same rates); without replacement
    the arrival rates carry the :math:`1/n` term of the hypergeometric law as a
    rate correction (its chain uses that two-term expansion, not the exact law).

    Examples
    --------
    >>> m = population_model(2, 0.9, 10)
    >>> m.species[:3], m.species[-1]
    (('x1', 'x2', 'x3'), 'x0')
    >>> round(float(m.mean_field().fixed_point[:10].sum()), 6)     # u_1 = lam
    0.9
    """
    d = int_param("d", d, 1)
    levels = int_param("levels", levels, 1)
    lam = float(lam)
    from ctmc.meanfield import PopulationModel
    K = levels
    sp = [f"x{k}" for k in range(1, K + 1)] + ["x0"]
    m = PopulationModel(f"supermarket(d={d}, lam={lam:g}, levels={K}, "
                        f"{'with' if replacement else 'without'} replacement)", sp)

    def tail(x, k):
        # u_k as a sum of the deeper species (u_0 = 1, u_{K+1} = 0)
        return 1 if k == 0 else (sum(x[f"x{j}"] for j in range(k, K + 1)) if k <= K else 0)

    def h(s):
        return 0.5 * d * (d - 1) * (s ** d - s ** (d - 1))

    for k in range(K):
        corr = None
        if not replacement and d >= 2:
            corr = (lambda x, k=k: lam * (h(tail(x, k)) - h(tail(x, k + 1))))
        m.transition(f"arrival{k}", {f"x{k}": -1, f"x{k + 1}": +1},
                     lambda x, k=k: lam * (tail(x, k) ** d - tail(x, k + 1) ** d), correction=corr)
    for k in range(1, K + 1):
        m.transition(f"departure{k}", {f"x{k}": -1, f"x{k - 1}": +1}, lambda x, k=k: x[f"x{k}"])
    return m


@functools.lru_cache(maxsize=32)
def _model(d, lam, K, replacement):
    # shared, so never handed out: population_model() builds a fresh one
    return population_model(d, lam, K, replacement)


def _tails(v):
    """(x_1..x_K[, x_0]) -> (u_1..u_K), u_k = sum_{j >= k} x_j (small terms first); trailing axis."""
    v = np.asarray(v, dtype=float)
    return np.flip(np.cumsum(np.flip(v, -1), axis=-1), -1)


def _from_tails(u):
    """(u_1..u_K) -> (x_1..x_K), x_k = u_k - u_{k+1}; trailing axis."""
    u = np.asarray(u, dtype=float)
    return u - np.concatenate([u[..., 1:], np.zeros_like(u[..., :1])], axis=-1)


def _T(K):
    return np.triu(np.ones((K, K)))


def _pad(v, K):
    """The first ``K`` entries of ``v``, zeros after its end."""
    out = np.zeros(K)
    k = min(K, v.size)
    out[:k] = v[:k]
    return out


def _mm1_tails(lam, K, capacity):
    """P(q >= k), k = 0..K, of an M/M/1 (capacity None) or M/M/1/B queue."""
    k = np.arange(K + 1, dtype=float)
    if capacity is None:
        return lam ** k
    logp = k * math.log(lam)
    p = np.exp(logp - logp.max())
    u = np.flip(np.cumsum(np.flip(p)))
    return u / u[0]


# ---------------------------------------------------------------------------
# mean field
# ---------------------------------------------------------------------------
def mean_field_fixed_point(d, lam, capacity=None, levels=None) -> np.ndarray:
    r"""Fixed point ``u_0..u_K`` of the mean-field ODE (``u_0 = 1``).

    Computed by :meth:`ctmc.meanfield.PopulationModel.mean_field` on
    :func:`population_model` (:math:`d \ge 2`; tails below the module's
    level cut are 0) and in closed form for :math:`d = 1` (independent
    M/M/1 queues).

    Parameters
    ----------
    d : int >= 1
    lam : float
        ``0 < lam < 1`` without capacity; any ``lam > 0`` with one.
    capacity : int, optional
        ``B``: the fixed point of the truncated ODE (``u_{B+1} = 0``); ``K = B``.
    levels : int, optional
        ``K`` without a capacity (default: 40 for d >= 2; for d = 1 until
        :math:`\lambda^k < 10^{-30}`).

    Examples
    --------
    >>> mean_field_fixed_point(2, 0.9)[:4]
    array([1.       , 0.9      , 0.729    , 0.4782969])
    >>> mean_field_fixed_point(1, 0.5, capacity=2)        # M/M/1/2: P(q >= k)
    array([1.        , 0.42857143, 0.14285714])
    """
    d, lam, capacity = check_mean_field(d, lam, capacity)
    K = _levels_arg(d, lam, capacity, levels)
    if d == 1:
        return _mm1_tails(lam, K, capacity)
    Ke = _levels(d, lam, K, capacity is not None)
    x = _model(d, lam, Ke, True).mean_field().fixed_point
    return np.concatenate([[1.0], _pad(np.maximum(_tails(x[:Ke]), 0.0), K)])


def _compiled(d, lam, K):
    # the population model: its drift and derivatives in reduced coordinates (x_1..x_K)
    return _model(d, lam, K, True)


def mean_field_drift(x, d, lam):
    r"""Mean-field drift :math:`f_k(x) = \lambda (x_{k-1}^d - x_k^d) - (x_k - x_{k+1})`.

    ``x = (u_1, ..., u_K)`` with ``u_0 = 1`` and ``u_{K+1} = 0`` (capacity K).
    Works on a trailing axis (``x`` of shape (..., K)). Evaluated by the
    compiled drift of :func:`population_model` (built once per ``d, lam, K``).
    """
    x = np.asarray(x, dtype=float)
    d = int_param("d", d, 1)
    y = _from_tails(x)
    return _tails(_compiled(d, float(lam), x.shape[-1]).drift(y))


def mean_field_derivatives(x, d, lam):
    r"""Jacobian ``A``, Hessian ``H`` and jump covariance ``Q`` of the drift at ``x`` (tails).

    The symbolic derivatives of :func:`population_model` (in the coordinates
    :math:`x_1..x_K`), mapped to the tails :math:`u = T x`: :math:`A = T\,Dg\,T^{-1}`,
    :math:`H_{jkl} = T_{ja} (D^2 g)_{abc} T^{-1}_{bk} T^{-1}_{cl}`, :math:`Q = T Q_x T^T`.

    Returns
    -------
    A : ndarray (K, K)
        :math:`A_{jk} = \partial f_j / \partial u_k`.
    H : ndarray (K, K, K)
        :math:`H_{jkl} = \partial^2 f_j / \partial u_k \partial u_l` (only
        :math:`H_{j,j-1,j-1}` and :math:`H_{jjj}` are non-zero).
    Q : ndarray (K, K)
        :math:`\sum_\ell \ell \ell^T \beta_\ell(x)`: diagonal, arrival plus
        departure rate at each level.
    """
    x = np.asarray(x, dtype=float)
    d = int_param("d", d, 1)
    K = x.size
    J, D2, Qx = _compiled(d, float(lam), K).derivatives(_from_tails(x))
    T = _T(K)
    Ti = np.eye(K) - np.eye(K, k=1)
    A = T @ J @ Ti
    H = np.einsum("ja,abc,bk,cl->jkl", T, D2, Ti, Ti)
    Q = T @ Qx @ T.T
    return A, H, Q


def mean_field_ode(d, lam, t, u0=None, capacity=None, levels=None, rtol=1e-10, atol=1e-13):
    """Integrate the mean-field ODE; returns ``(t, u)`` with ``u[:, i] = (u_0..u_K)(t_i)``.

    Parameters
    ----------
    t : float or array_like
        Final time, or the increasing times at which to report.
    u0 : array_like, optional
        Initial ``(u_1, ..., u_K)`` (non-increasing in [0, 1]); default empty queues.
    capacity, levels
        As for :func:`mean_field_fixed_point` (default K = 40 for d >= 2).
    rtol, atol
        Tolerances of the integration. For d = 1 (a linear system) both are used.
        For d >= 2 the drift of :func:`population_model` is integrated with
        ``rtol`` *relative* to each fraction (the absolute tolerance is 1e-300,
        ``atol`` is not used): a tail of 1e-200 gets its digits as one of 0.5
        does (about 1e-9 relative at the default, measured against an
        integration of the log-tails). From empty queues the tails stay below
        the fixed point (the system is monotone), so the levels beyond the
        module's cut are 0; from another ``u0`` all ``K`` levels are declared.
    """
    from scipy.integrate import solve_ivp
    d, lam, capacity = check_mean_field(d, lam, capacity)
    K = capacity if capacity is not None else (_default_levels(d, lam) if levels is None else levels)
    x0 = np.zeros(K) if u0 is None else np.asarray(u0, dtype=float)
    if x0.shape != (K,) or (x0 < 0).any() or (x0 > 1).any():
        raise ValueError(f"u0: expected {K} tail values in [0, 1], got shape {x0.shape}")
    ts = np.atleast_1d(np.asarray(t, dtype=float))
    if (ts < 0).any() or (np.diff(ts) <= 0).any():
        raise ValueError("t: expected increasing times >= 0")
    if d == 1:
        # independent M/M/1(/K) queues: u' = lam (u_{k-1} - u_k) - (u_k - u_{k+1}), linear
        import scipy.sparse as sps
        M = sps.diags([np.full(K - 1, lam), np.full(K, -lam - 1.0), np.ones(K - 1)], [-1, 0, 1], format="csr")
        b = np.zeros(K)
        b[0] = lam
        sol = solve_ivp(lambda _, x: M @ x + b, (0.0, float(ts[-1])), x0, t_eval=ts, method="LSODA",
                        rtol=rtol, atol=atol, jac=lambda *_: M.toarray())
        if not sol.success:  # pragma: no cover - a stable linear system
            raise RuntimeError(f"mean_field_ode: integration failed: {sol.message}")
        return sol.t, np.vstack([np.ones(ts.size), sol.y])
    Ke = _levels(d, lam, K, capacity is not None) if not x0.any() else K
    m = _model(d, lam, Ke, True)
    # absolute tolerance per fraction: a small part of the least size it keeps. The system is monotone,
    # so the tails stay between the fixed point and u0 when u0 lies above it (below when below); from
    # empty queues they grow to the fixed point, and relative control starts once they are within 1e-6
    fp = _from_tails(_pad(mean_field_fixed_point(d, lam, capacity, levels=Ke)[1:], Ke))
    xs = _from_tails(_pad(x0, Ke))
    low = np.minimum(fp, xs)
    scale = np.where(low > 0, low, fp)
    X = _integrate_relative(m, xs, ts, rtol, np.maximum(1e-6 * rtol * scale, _TAIL))
    k = min(K, Ke)
    u = np.zeros((K + 1, ts.size))
    u[0] = 1.0
    u[1:k + 1] = np.maximum(_tails(X), 0.0).T[:k]
    return ts, u


def _integrate_relative(m, x0, ts, rtol, atol):
    r"""``x(t)`` (rows) of the population model ``m`` in its reduced coordinates, each component to
    ``rtol`` relative once it exceeds its own ``atol`` (a vector scaled to the size that component
    reaches): a fraction of 1e-40 is then controlled as tightly as one of 0.5, where one absolute
    tolerance (1e-13 in :meth:`ctmc.meanfield.MeanFieldResult.ode`) leaves the deep tails with no
    correct digit. The drift and its Jacobian are the model's
    (:meth:`ctmc.meanfield.PopulationModel.drift`, :meth:`~ctmc.meanfield.PopulationModel.derivatives`)."""
    from scipy.integrate import solve_ivp
    if ts[-1] == 0:
        return np.tile(x0, (ts.size, 1))
    sol = solve_ivp(lambda _, y: m.drift(np.maximum(y, 0.0)), (0.0, float(ts[-1])), x0, t_eval=ts,
                    method="LSODA", rtol=rtol, atol=atol,
                    jac=lambda _, y: m.derivatives(np.maximum(y, 0.0))[0])
    if not sol.success:  # pragma: no cover - a smooth monotone system
        raise RuntimeError(f"mean_field_ode: integration failed: {sol.message}")
    return sol.y.T


# ---------------------------------------------------------------------------
# refined mean field
# ---------------------------------------------------------------------------
def refined_correction(A, H, Q, g=None):
    r"""Solve :math:`A W + W A^T + Q = 0` and :math:`A V + \tfrac12 H:W + g = 0`.

    Generic refined-mean-field step (Gast & Van Houdt 2017) for a
    density-dependent chain with drift Jacobian ``A`` (Hurwitz), Hessian
    ``H`` (``H[j, k, l]``, or a callable ``W -> H:W``), jump covariance ``Q`` and optional :math:`1/n`
    part ``g`` of the drift. Returns ``(V, W)``. (The supermarket itself goes
    through :mod:`ctmc.meanfield`; this stand-alone step is kept for given
    matrices.)

    Examples
    --------
    One-dimensional check (Gast, Bortolussi & Tribastone 2018, Sec. 5):
    drift :math:`1 - x - x^2`, :math:`\pi = (\sqrt5 - 1)/2`, ``V = -(sqrt5 - 1)/10``.

    >>> import numpy as np
    >>> p = (np.sqrt(5) - 1) / 2
    >>> V, W = refined_correction(np.array([[-1 - 2 * p]]), np.array([[[-2.0]]]),
    ...                           np.array([[(1 - p) * (1 + p) + p]]))
    >>> bool(abs(V[0] + (np.sqrt(5) - 1) / 10) < 1e-14)
    True
    """
    from scipy.linalg import solve, solve_continuous_lyapunov
    A = np.asarray(A, dtype=float)
    W = solve_continuous_lyapunov(A, -np.asarray(Q, dtype=float))
    W = 0.5 * (W + W.T)
    HW = H(W) if callable(H) else np.tensordot(np.asarray(H, dtype=float), W, axes=2)
    rhs = 0.5 * HW
    if g is not None:
        rhs = rhs + np.asarray(g, dtype=float)
    V = -solve(A, rhs)
    return V, W


@dataclass(frozen=True, kw_only=True)
class RefinedMeanField:
    r"""Mean field ``pi`` and its :math:`1/n` correction ``V`` (tails u_1..u_K).

    Attributes
    ----------
    d, lam, capacity, replacement
        Model parameters (``capacity`` None: infinite buffers, reported on
        ``K = pi.size`` levels; those beyond the module's level cut are 0).
    pi, V : ndarray (K,)
        ``E[u_k^{(n)}] = pi_k + V_k / n + o(1/n)``, k = 1..K.
    W : ndarray (K, K)
        Limit of ``n Cov(u^{(n)})``.
    residual : float
        The largest relative residual of the equations solved by
        :meth:`ctmc.meanfield.PopulationModel.refined` (0 for d = 1: closed forms).
    """

    d: int
    lam: float
    capacity: Optional[int]
    replacement: bool
    pi: np.ndarray = field(repr=False)
    V: np.ndarray = field(repr=False)
    W: np.ndarray = field(repr=False)
    residual: float = 0.0

    def tail(self, n=None) -> np.ndarray:
        """``u_0..u_K``: the mean field (``n`` None) or ``pi + V / n``."""
        x = self.pi if n is None else self.pi + self.V / n
        return np.concatenate([[1.0], x])

    def mean_jobs_per_server(self, n=None) -> float:
        """``sum_k u_k``: mean field (``n`` None) or refined at ``n`` queues."""
        return float(self.tail(n)[1:].sum())

    def tagged_law(self, n=None) -> np.ndarray:
        """``f_k = u_k - u_{k+1}``, k = 0..K."""
        u = self.tail(n)
        return u - np.append(u[1:], 0.0)


def refined_mean_field(d, lam, capacity=None, replacement=True, levels=None) -> RefinedMeanField:
    r"""Refined mean field of the supermarket model (see the module docstring).

    :meth:`ctmc.meanfield.PopulationModel.refined` on :func:`population_model`
    for :math:`d \ge 2` (the symbolic model is cached per ``d, lam, levels,
    replacement``); closed forms for :math:`d = 1`.

    Examples
    --------
    Gast, Bortolussi & Tribastone (2018), Table 3: d = 2, rho = 0.9, mean
    queue length 2.3527 (mean field) and 2.7513 (1/N expansion, N = 10):

    >>> r = refined_mean_field(2, 0.9)
    >>> round(r.mean_jobs_per_server(), 4), round(r.mean_jobs_per_server(10), 4)
    (2.3527, 2.7513)
    """
    d, lam, capacity = check_mean_field(d, lam, capacity)
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement: expected True or False, got {replacement!r}")
    K = _levels_arg(d, lam, capacity, levels)
    if d == 1:
        pi = _mm1_tails(lam, K, capacity)[1:]
        j = np.arange(K)
        W = pi[np.maximum.outer(j, j)] - np.outer(pi, pi)
        return RefinedMeanField(d=d, lam=lam, capacity=capacity, replacement=bool(replacement), pi=pi,
                                V=np.zeros(K), W=W, residual=0.0)
    Ke = _levels(d, lam, K, capacity is not None)
    r = _model(d, lam, Ke, bool(replacement)).refined(1)
    T = _T(Ke)
    pi = _pad(np.maximum(_tails(r.fixed_point[:Ke]), 0.0), K)
    V = _pad(_tails(r.V[:Ke]), K)
    k = min(K, Ke)
    W = np.zeros((K, K))
    W[:k, :k] = (T @ r.W[:Ke, :Ke] @ T.T)[:k, :k]
    return RefinedMeanField(d=d, lam=lam, capacity=capacity, replacement=bool(replacement), pi=pi, V=V, W=W,
                            residual=float(r.residual))
