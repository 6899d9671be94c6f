r"""Transient distributions by uniformisation or Krylov matrix exponentials.

Problem
-------
Given an initial law :math:`p_0`, compute :math:`p(t) = p_0 e^{Qt}` for one
or many :math:`t \ge 0`.

Uniformisation
--------------
With :math:`\Lambda \ge \max_i |q_{ii}|` and :math:`P = I + Q/\Lambda`
(a stochastic matrix),

.. math::

    p(t) = \sum_{k \ge 0} e^{-\Lambda t} \frac{(\Lambda t)^k}{k!}\, p_0 P^k .

All terms are non-negative, so there is no cancellation and small
probabilities keep their relative accuracy. The sum is cut at the smallest
:math:`k` whose Poisson tail is below ``eps`` (the reported ``error_bound``
on the 1-norm), and leading terms whose Poisson weight is negligible are
skipped. All requested times share the same vectors :math:`p_0 P^k`.

``method="expm"`` uses :func:`scipy.sparse.linalg.expm_multiply` instead,
stepping from one requested time to the next.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from scipy.stats import poisson

from .results import Status, TransientResult

__all__ = ["uniformize", "transient"]


def uniformize(A: sp.csr_matrix, V0: np.ndarray, times: np.ndarray, *, eps: float = 1e-13):
    """``exp(A t) V0`` for each ``t`` by uniformisation.

    Parameters
    ----------
    A : sparse matrix, shape (n, n)
        A generator or its transpose (off-diagonal >= 0, diagonal <= 0).
    V0 : ndarray, shape (n,) or (n, c)
    times : ndarray of float >= 0
    eps : float
        Poisson tail neglected per time point.

    Returns
    -------
    out : ndarray, shape (len(times),) + V0.shape
    bound : float
        Neglected Poisson mass (bounds the error for probability vectors).
    """
    lam = 1.02 * float(np.abs(A.diagonal()).max()) if A.shape[0] else 0.0
    Ps = (A / lam).tocsr() if lam > 0 else A
    return uniformize_operator(lambda V: Ps @ V, V0, times, lam, eps=eps, scaled=True)


def uniformize_operator(apply, V0: np.ndarray, times: np.ndarray, lam: float, *, eps: float = 1e-13,
                        scaled: bool = False):
    r"""``exp(A t) V0`` by uniformisation, with ``A`` given only through products.

    :math:`e^{At}V_0 = \sum_k \mathrm{Poisson}(k; \Lambda t)\,(I + A/\Lambda)^k V_0`
    for a rate :math:`\Lambda \ge \max_i |a_{ii}|`; the sum is truncated left
    and right where the Poisson weights fall below ``eps``. Backends that keep
    ``A`` distributed (PETSc) pass ``apply``; :func:`uniformize` passes a
    scipy product.

    Parameters
    ----------
    apply : callable
        ``apply(V)`` returns ``A @ V`` for a block ``V`` (``A / lam @ V`` when
        ``scaled``).
    V0 : ndarray, shape (n,) or (n, c)
    times : ndarray of float >= 0
    lam : float
        Uniformisation rate (0 for ``A = 0``).
    eps : float
        Poisson tail neglected per time point.

    Returns
    -------
    out : ndarray, shape (len(times),) + V0.shape
    bound : float
        Neglected Poisson mass.
    """
    out = np.zeros((times.size,) + V0.shape)
    if lam == 0.0:
        out[:] = V0
        return out, 0.0
    lt = lam * times
    kmax = int(max(poisson.isf(eps, lt.max()), 0)) + 1 if lt.max() > 0 else 0
    # left truncation: first k carrying mass for each time
    kmin = np.where(lt > 0, np.maximum(poisson.ppf(eps, lt), 0), 0).astype(np.int64)
    kmin = np.minimum(kmin, kmax)
    V = np.array(V0, dtype=float)
    total = np.zeros(times.size)
    chunk = 1 << 14
    for c0 in range(0, kmax + 1, chunk):
        ks = np.arange(c0, min(kmax + 1, c0 + chunk))
        W = poisson.pmf(ks[None, :], lt[:, None])
        W[lt == 0] = (ks == 0)[None, :].astype(float)
        W[ks[None, :] < kmin[:, None]] = 0.0
        total += W.sum(axis=1)
        for j, k in enumerate(ks):
            w = W[:, j]
            nz = np.flatnonzero(w)
            if nz.size:
                out[nz] += np.multiply.outer(w[nz], V)
            if k < kmax:
                V = V + (apply(V) if scaled else apply(V) / lam)
    bound = float(max(0.0, 1.0 - total.min()))
    return out, bound


def check_transient_args(method, t, eps) -> np.ndarray:
    """Validate the arguments every backend's ``transient`` takes; return the times as a 1-D array."""
    methods = ("uniformization", "expm")
    if method not in methods:
        raise ValueError(f"method: expected one of {methods}, got {method!r}")
    tv = np.atleast_1d(np.asarray(t, dtype=float))
    if tv.ndim != 1 or tv.size == 0 or not np.all(np.isfinite(tv)) or (tv < 0).any():
        raise ValueError("t: times must be finite and >= 0")
    if not (isinstance(eps, float) and 0 < eps < 1):
        raise ValueError(f"eps: expected 0 < eps < 1, got {eps!r}")
    return tv


def transient(chain, p0, t, *, method="uniformization", check=True, eps=1e-13, max_terms=10_000_000):
    """Transient distribution ``p0 exp(Q t)``; see :meth:`ctmc.CTMC.transient`.

    Examples
    --------
    Two states, rates 1 and 1: ``P_0(X_t = 0) = (1 + exp(-2t)) / 2``.

    >>> import numpy as np, ctmc
    >>> c = ctmc.CTMC([[-1.0, 1.0], [1.0, -1.0]])
    >>> r = c.transient(np.array([1.0, 0.0]), [0.0, 1.0])
    >>> [round(float(x), 10) for x in r.p[:, 0]]
    [1.0, 0.5676676416]
    """
    tv = check_transient_args(method, t, eps)
    Q = chain.Q
    t0 = time.perf_counter()
    QT = Q.T.tocsr()
    if method == "uniformization":
        steps = 1.02 * np.abs(Q.diagonal()).max() * tv.max()
        if steps > max_terms:
            raise ValueError(f"t: the largest time needs about {steps:.3g} uniformisation steps, above "
                             f"max_terms={max_terms}; use method='expm' or raise max_terms")
        P, bound = uniformize(QT, p0, tv, eps=eps)
    else:
        order = np.argsort(tv)
        P = np.empty((tv.size, p0.size))
        cur, tcur = p0.copy(), 0.0
        for i in order:
            dt = tv[i] - tcur
            if dt > 0:
                cur = sla.expm_multiply(QT * dt, cur)
            P[i] = cur
            tcur = tv[i]
        P = np.maximum(P, 0.0)
        bound = float(np.abs(P.sum(axis=1) - 1).max())
    # residual: deviation of the total mass from one
    resid = float(np.abs(P.sum(axis=1) - 1).max())
    status = Status.SUCCESS if resid <= max(10 * eps, 1e-10) + bound else Status.INACCURATE
    msg = f"{method}: mass defect {resid:.1e}"
    res = TransientResult(method, "scipy", status, msg, 0, resid, time.perf_counter() - t0, {},
                          t=tv, p=P, error_bound=bound)
    return res.check(check)
