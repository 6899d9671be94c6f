r"""Hand-derived mean field of the supermarket model: the independent reference of the tests.

This is the code that ``models/supermarket/meanfield.py`` ran until the model was
declared to :class:`ctmc.meanfield.PopulationModel` (issue 14): tail coordinates
:math:`u_k` (fraction of queues with at least :math:`k` jobs, :math:`u_0 = 1`), the
drift :math:`f_k = \lambda (u_{k-1}^d - u_k^d) - (u_k - u_{k+1})` differentiated by
hand, the closed-form fixed point :math:`u_k = \lambda^{(d^k - 1)/(d - 1)}` (Mitzenmacher
1996; Vvedenskaya, Dobrushin & Karpelevich 1996), shooting on :math:`u_B` with a
capacity, and the refined step :math:`A W + W A^T + Q = 0`,
:math:`V = -\tfrac12 A^{-1} (H : W) - A^{-1} g` (Gast & Van Houdt 2017), with
:math:`g` the :math:`1/n` part of the hypergeometric sampling law without replacement,
:math:`\tfrac{d(d-1)}{2n}(x^d - x^{d-1})`. Nothing here imports ctmc: it shares no
code with the generic route it checks.
"""
from __future__ import annotations

import math

import numpy as np
from scipy.linalg import solve, solve_continuous_lyapunov
from scipy.optimize import brentq


def default_levels(d, lam):
    """Levels the hand code kept without a capacity: 40 for d >= 2, until lam^k < 1e-30 for d = 1."""
    if d == 1:
        return max(2, int(math.ceil(math.log(1e-30) / math.log(lam))) + 1)
    return 40


def fixed_point(d, lam, capacity=None, levels=None):
    """``u_0..u_K``: closed form without capacity, shooting on ``u_B`` with one."""
    if capacity is None:
        K = default_levels(d, lam) if levels is None else levels
        k = np.arange(K + 1, dtype=float)
        if d == 1:
            return lam ** k
        with np.errstate(over="ignore"):
            expo = (float(d) ** k - 1) / (d - 1)
        return lam ** expo
    B = capacity

    def shoot(t):
        u = 1.0
        for _ in range(B):
            u = lam * (u ** d - t ** d)
            if u < t:
                return u - t
            if u > 1:   # t too small (the old module overflowed here for lam > 1 and B >~ 10)
                return 1.0
        return u - t

    t = 0.0
    if shoot(0.0) > 0:
        t = brentq(shoot, 0.0, 1.0, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)
    u = np.empty(B + 1)
    u[0] = 1.0
    for k in range(1, B + 1):
        u[k] = lam * (u[k - 1] ** d - t ** d)
    u[B] = t
    return u


def drift(x, d, lam):
    """``f_k(x)`` for ``x = (u_1..u_K)``, ``u_0 = 1``, ``u_{K+1} = 0``; trailing axis."""
    x = np.asarray(x, dtype=float)
    ones = np.ones_like(x[..., :1])
    prev = np.concatenate([ones, x[..., :-1]], axis=-1)
    nxt = np.concatenate([x[..., 1:], 0 * ones], axis=-1)
    return lam * (prev ** d - x ** d) - (x - nxt)


def jacobian(x, d, lam):
    x = np.asarray(x, dtype=float)
    K = x.size
    A = np.zeros((K, K))
    j = np.arange(K)
    A[j, j] = -d * lam * x ** (d - 1) - 1.0
    A[j[:-1], j[1:]] = 1.0
    A[j[1:], j[:-1]] = d * lam * x[:-1] ** (d - 1)
    return A


def hessian(x, d, lam):
    """``H[j, k, l]``: only ``H[j, j, j]`` and ``H[j, j-1, j-1]`` are non-zero."""
    x = np.asarray(x, dtype=float)
    K = x.size
    H = np.zeros((K, K, K))
    j = np.arange(K)
    if d >= 2:
        H[j, j, j] = -d * (d - 1) * lam * x ** (d - 2)
        H[j[1:], j[:-1], j[:-1]] = d * (d - 1) * lam * x[:-1] ** (d - 2)
    return H


def jump_covariance(x, d, lam):
    """Diagonal: arrival plus departure rate at each level."""
    x = np.asarray(x, dtype=float)
    prev = np.concatenate([[1.0], x[:-1]])
    nxt = np.concatenate([x[1:], [0.0]])
    return np.diag(lam * (prev ** d - x ** d) + (x - nxt))


def refined(d, lam, capacity=None, replacement=True, levels=None):
    """``(pi, V, W)`` in tail coordinates ``u_1..u_K`` (K = capacity, or the default levels)."""
    pi = fixed_point(d, lam, capacity, levels)[1:]
    A, Q = jacobian(pi, d, lam), jump_covariance(pi, d, lam)
    g = np.zeros(pi.size)
    if not replacement and d >= 2:
        def h(x):
            return 0.5 * d * (d - 1) * (x ** d - x ** (d - 1))
        prev = np.concatenate([[1.0], pi[:-1]])
        g = lam * (h(prev) - h(pi))
    W = solve_continuous_lyapunov(A, -Q)
    W = 0.5 * (W + W.T)
    V = -solve(A, 0.5 * hessian_dot(pi, d, lam, W) + g)
    return pi, V, W


def hessian_dot(x, d, lam, W):
    """``(H:W)_j = H_jjj W_jj + H_{j,j-1,j-1} W_{j-1,j-1}`` without the K^3 tensor of :func:`hessian`."""
    out = np.zeros(x.size)
    if d >= 2:
        w = np.diag(W)
        c = d * (d - 1) * lam * x ** (d - 2)
        out -= c * w
        out[1:] += (c * w)[:-1]
    return out
