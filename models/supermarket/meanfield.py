r"""Mean-field limit of the supermarket model and its refined :math:`1/n` correction.

Mean field
----------
As :math:`n \to \infty` (with replacement), :math:`u(t)` follows the ODE
(Mitzenmacher 1996; Vvedenskaya, Dobrushin & Karpelevich 1996)

.. math::

    \dot u_k = \lambda (u_{k-1}^d - u_k^d) - (u_k - u_{k+1}), \qquad u_0 = 1,

whose fixed point is :math:`u_k = \lambda^{(d^k - 1)/(d - 1)}` for
:math:`d \ge 2` and :math:`u_k = \lambda^k` for :math:`d = 1`
(:func:`mean_field_fixed_point`, :func:`mean_field_ode`). With a capacity
:math:`B` (:math:`u_{B+1} = 0`) the fixed point solves
:math:`u_k = \lambda (u_{k-1}^d - u_B^d)`, found by shooting on :math:`u_B`.

The *refined* mean field (Gast & Van Houdt 2017) adds the :math:`1/n` term
:math:`E[u^{(n)}] = \pi + V / n + o(1/n)`: with the drift :math:`f`, its
Jacobian :math:`A = Df(\pi)`, Hessian :math:`H_{jkl} = \partial^2 f_j /
\partial x_k \partial x_l` and :math:`Q = \sum_\ell \ell \ell^T
\beta_\ell(\pi)` (diagonal here),

.. math::

    A W + W A^T + Q = 0, \qquad V = -\tfrac12 A^{-1} (H : W) - A^{-1} g,

where :math:`g` is the :math:`1/n` part of the finite-n drift: zero with
replacement; without replacement
:math:`\prod_{j<d}(x - j/n)/(1 - j/n) = x^d + \tfrac{d(d-1)}{2n}(x^d -
x^{d-1}) + O(n^{-2})` (:func:`refined_mean_field`, :func:`refined_correction`).
Sign convention: :math:`W` is the (positive semi-definite) limit of
:math:`n \operatorname{Cov}`, hence the minus sign (Gast, Bortolussi &
Tribastone 2018, Theorem 1 at stationarity).

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

import math
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ._params import _int_param

__all__ = ["mean_field_drift", "mean_field_fixed_point", "mean_field_ode", "mean_field_derivatives",
           "refined_correction", "refined_mean_field", "RefinedMeanField"]


# ---------------------------------------------------------------------------
# mean field
# ---------------------------------------------------------------------------
def _check_mf(d, lam, capacity):
    d = _int_param("d", d, 1)
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.integer, np.floating)) \
            or not math.isfinite(lam) or lam <= 0:
        raise ValueError(f"lam: expected a finite arrival rate per server > 0, got {lam!r}")
    if capacity is None and not lam < 1:
        raise ValueError(f"lam: the infinite-buffer mean field needs 0 < lam < 1, got {lam}")
    if capacity is not None:
        capacity = _int_param("capacity", capacity, 1)
    return d, float(lam), capacity


def _default_levels(d, lam):
    # levels kept for the infinite-buffer mean field: u_k below 1e-30 (d = 1 geometric)
    if d == 1:
        return max(2, int(math.ceil(math.log(1e-30) / math.log(lam))) + 1)
    return 40


def mean_field_fixed_point(d, lam, capacity=None, levels=None) -> np.ndarray:
    r"""Fixed point ``u_0..u_K`` of the mean-field ODE (``u_0 = 1``).

    Parameters
    ----------
    d : int >= 1
    lam : float
        ``0 < lam < 1`` without capacity; any ``lam > 0`` with one.
    capacity : int, optional
        ``B``: the fixed point of the truncated ODE (``u_{B+1} = 0``), found
        by shooting on ``u_B``; ``K = B``.
    levels : int, optional
        ``K`` for the infinite-buffer closed form
        :math:`\lambda^{(d^k - 1)/(d - 1)}` (default: 40 for d >= 2, enough
        for ``u_k`` to underflow; for d = 1 until :math:`\lambda^k < 10^{-30}`).

    Examples
    --------
    >>> mean_field_fixed_point(2, 0.9)[:4]
    array([1.       , 0.9      , 0.729    , 0.4782969])
    >>> mean_field_fixed_point(1, 0.5, capacity=2)        # M/M/1/2: P(q >= k)
    array([1.        , 0.42857143, 0.14285714])
    """
    d, lam, capacity = _check_mf(d, lam, capacity)
    if capacity is None:
        K = _default_levels(d, lam) if levels is None else _int_param("levels", levels, 1)
        k = np.arange(K + 1, dtype=float)
        if d == 1:
            return lam ** k
        with np.errstate(over="ignore"):
            expo = (float(d) ** k - 1) / (d - 1)
        return lam ** expo
    B = capacity

    def shoot(t):
        # u_B(t) - t along u_k = lam (u_{k-1}^d - t^d); decreasing in t while u_k >= t
        u = 1.0
        for _ in range(B):
            u = lam * (u ** d - t ** d)
            if u < t:
                return u - t
        return u - t

    from scipy.optimize import brentq
    t = 0.0
    if shoot(0.0) > 0:
        t = brentq(shoot, 0.0, 1.0, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
    u = np.empty(B + 1)
    u[0] = 1.0
    for k in range(1, B + 1):
        u[k] = lam * (u[k - 1] ** d - t ** d)
    u[B] = t
    return u


def mean_field_drift(x, d, lam):
    r"""Mean-field drift :math:`f_k(x) = \lambda (x_{k-1}^d - x_k^d) - (x_k - x_{k+1})`.

    ``x = (u_1, ..., u_K)`` with ``u_0 = 1`` and ``u_{K+1} = 0`` (capacity K).
    Works on a trailing axis (``x`` of shape (..., K)).
    """
    x = np.asarray(x, dtype=float)
    ones = np.ones_like(x[..., :1])
    prev = np.concatenate([ones, x[..., :-1]], axis=-1)
    nxt = np.concatenate([x[..., 1:], 0 * ones], axis=-1)
    return lam * (prev ** d - x ** d) - (x - nxt)


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
    """
    from scipy.integrate import solve_ivp
    d, lam, capacity = _check_mf(d, lam, capacity)
    K = capacity if capacity is not None else (_default_levels(d, lam) if levels is None else levels)
    x0 = np.zeros(K) if u0 is None else np.asarray(u0, dtype=float)
    if x0.shape != (K,) or (x0 < 0).any() or (x0 > 1).any():
        raise ValueError(f"u0: expected {K} tail values in [0, 1], got shape {x0.shape}")
    ts = np.atleast_1d(np.asarray(t, dtype=float))
    if (ts < 0).any() or (np.diff(ts) <= 0).any():
        raise ValueError("t: expected increasing times >= 0")
    sol = solve_ivp(lambda _, x: mean_field_drift(x, d, lam), (0.0, float(ts[-1])), x0, t_eval=ts,
                    method="LSODA", rtol=rtol, atol=atol,
                    jac=lambda _, x: mean_field_derivatives(x, d, lam)[0])
    if not sol.success:  # pragma: no cover - LSODA on a smooth, bounded system
        raise RuntimeError(f"mean_field_ode: integration failed: {sol.message}")
    u = np.vstack([np.ones(ts.size), sol.y])
    return sol.t, u


def mean_field_derivatives(x, d, lam):
    r"""Jacobian ``A``, Hessian ``H`` and jump covariance ``Q`` of the drift at ``x``.

    Returns
    -------
    A : ndarray (K, K)
        :math:`A_{jk} = \partial f_j / \partial x_k`.
    H : ndarray (K, K, K)
        :math:`H_{jkl} = \partial^2 f_j / \partial x_k \partial x_l` (only
        :math:`H_{j,j-1,j-1}` and :math:`H_{jjj}` are non-zero).
    Q : ndarray (K, K)
        :math:`\sum_\ell \ell \ell^T \beta_\ell(x)`: diagonal, arrival plus
        departure rate at each level.
    """
    x = np.asarray(x, dtype=float)
    K = x.size
    H = np.zeros((K, K, K))
    j = np.arange(K)
    if d >= 2:
        H[j, j, j] = -d * (d - 1) * lam * x ** (d - 2)
        H[j[1:], j[:-1], j[:-1]] = d * (d - 1) * lam * x[:-1] ** (d - 2)
    return _jacobian(x, d, lam), H, _jump_covariance(x, d, lam)


def _jacobian(x, d, lam):
    K = x.size
    A = np.zeros((K, K))
    j = np.arange(K)
    A[j, j] = -d * lam * x ** (d - 1) - 1.0
    A[j[:-1], j[1:]] = 1.0
    A[j[1:], j[:-1]] = d * lam * x[:-1] ** (d - 1)
    return A


def _jump_covariance(x, d, lam):
    prev = np.concatenate([[1.0], x[:-1]])
    nxt = np.concatenate([x[1:], [0.0]])
    return np.diag(lam * (prev ** d - x ** d) + (x - nxt))


def _hessian_dot(x, d, lam, W):
    # (H:W)_j = H_jjj W_jj + H_{j,j-1,j-1} W_{j-1,j-1}, without forming the K^3 tensor
    out = np.zeros(x.size)
    if d >= 2:
        w = np.diag(W)
        c = d * (d - 1) * lam * x ** (d - 2)
        out -= c * w
        out[1:] += (c * w)[:-1]
    return out


def refined_correction(A, H, Q, g=None):
    r"""Solve :math:`A W + W A^T + Q = 0` and :math:`A V + \tfrac12 H:W + g = 0`.

    Generic refined-mean-field step (Gast & Van Houdt 2017) for a
    density-dependent chain with drift Jacobian ``A`` (Hurwitz), Hessian
    ``H`` (``H[j, k, l]``, or a callable ``W -> H:W``), jump covariance ``Q`` and optional :math:`1/n`
    part ``g`` of the drift. Returns ``(V, W)``.

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


@dataclass(frozen=True)
class RefinedMeanField:
    r"""Mean field ``pi`` and its :math:`1/n` correction ``V`` (tails u_1..u_K).

    Attributes
    ----------
    d, lam, capacity, replacement
        Model parameters (``capacity`` None: infinite buffers, truncated at
        ``K = pi.size`` levels where the fixed point has underflowed).
    pi, V : ndarray (K,)
        ``E[u_k^{(n)}] = pi_k + V_k / n + o(1/n)``, k = 1..K.
    W : ndarray (K, K)
        Limit of ``n Cov(u^{(n)})``.
    residual : float
        Max of the Lyapunov and V-equation residuals (relative).
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

    Examples
    --------
    Gast, Bortolussi & Tribastone (2018), Table 3: d = 2, rho = 0.9, mean
    queue length 2.3527 (mean field) and 2.7513 (1/N expansion, N = 10):

    >>> r = refined_mean_field(2, 0.9)
    >>> round(r.mean_jobs_per_server(), 4), round(r.mean_jobs_per_server(10), 4)
    (2.3527, 2.7513)
    """
    d, lam, capacity = _check_mf(d, lam, capacity)
    pi = mean_field_fixed_point(d, lam, capacity, levels)[1:]
    A, Q = _jacobian(pi, d, lam), _jump_covariance(pi, d, lam)
    H = lambda W: _hessian_dot(pi, d, lam, W)  # noqa: E731
    g = None
    if not replacement and d >= 2:
        h = lambda x: 0.5 * d * (d - 1) * (x ** d - x ** (d - 1))  # noqa: E731
        prev = np.concatenate([[1.0], pi[:-1]])
        g = lam * (h(prev) - h(pi))
    V, W = refined_correction(A, H, Q, g)
    res_w = np.abs(A @ W + W @ A.T + Q).max() / max(np.abs(Q).max(), 1e-300)
    lhs = A @ V + 0.5 * H(W) + (0 if g is None else g)
    res_v = np.abs(lhs).max() / max(np.abs(A @ V).max(), 1e-300)
    return RefinedMeanField(d, lam, capacity, bool(replacement), pi, V, W, float(max(res_w, res_v)))
