r"""Closed forms of the two-queue JSQ model (Tibi 2019), subtraction-free and scaled.

Closed forms (derived in the design notes from the martingales of the paper,
re-derived here in subtraction-free form; the paper's full text is not among
our sources):

* blocking probability
  :math:`P_{\mathrm{block}} = \rho^{2K} / \big[\sum_{j=0}^{2K}\rho^j
  - (1-\nu)\sum_{m=0}^{K-1}(\mu_1\rho)^m\big]`,
  and :math:`P_{\mathrm{block}} = 1/(1 + E_{(K-1,K)}[\tau])`;
* :math:`P(N = n) = P(N = K)\,\rho^{n-K}` for :math:`K \le n \le 2K`;
* the mean time to saturation from every state (:func:`saturation_mean`).

The Laplace transform of :math:`\tau`, the joint law of (time, common
length) at the first queue-length equality and the large-K expansions of
:math:`E[\tau]` and :math:`P_{\mathrm{block}}` are in :mod:`models.jsq.tibi`
(exact level recursions derived from the model's structure, checked against
ctmc's generic analyses :meth:`JSQ2.saturation_laplace` and
:meth:`JSQ2.first_equality`).

Numerics for large K
--------------------
:math:`\rho^{-2K}` overflows a double for :math:`\rho < 1` and
:math:`K` in the thousands, and the formulas as printed subtract large
numbers. Every closed form below is rewritten as a sum of non-negative terms
(no cancellation), evaluated on scaled terms and returned through logarithms
(``log_blocking_probability``, ``log_saturation_mean``); the plain versions
exponentiate (0.0 or ``inf`` only when the value itself is not representable).

References
----------
D. Tibi, "Martingales and buffer overflow for the symmetric shortest queue
model", Queueing Systems 93 (2019). D. Dester, C. Fricker, D. Tibi,
"Stationary analysis of the shortest queue problem", Queueing Systems (2017).
"""
from __future__ import annotations

import math

import numpy as np

from .parameters import check_parameters

__all__ = [
    "blocking_probability",
    "log_blocking_probability",
    "saturation_mean",
    "log_saturation_mean",
    "total_number_law",
]


# ---------------------------------------------------------------------------
# closed forms, subtraction-free and scaled
# ---------------------------------------------------------------------------
def _log_mu1(mu2: float) -> float:
    """``log(1 - mu2)`` without rounding ``1 - mu2`` first (``-inf`` for mu2 = 1)."""
    return math.log1p(-mu2) if mu2 < 1 else -math.inf


def _one_minus_pow(mu2: float, i):
    """``1 - mu1**i`` (``mu1 = 1 - mu2``, integer ``i >= 0``) without cancellation."""
    i = np.asarray(i, dtype=float)
    if mu2 == 1.0:
        return np.where(i > 0, 1.0, 0.0)
    return -np.expm1(i * math.log1p(-mu2))


def log_blocking_probability(K: int, rho: float, mu2: float, idle_rate: float | None = None) -> float:
    r"""Natural logarithm of the stationary blocking probability.

    Uses :math:`P_{\mathrm{block}} = \rho^{2K}/D` with the denominator
    rewritten as a sum of non-negative terms,

    .. math::
        D = \sum_{j=K}^{2K} \rho^j + \sum_{m=0}^{K-1} \rho^m
            \big[\nu + (1-\nu)(1 - \mu_1^m)\big],

    summed in log space, so it is accurate to a few ulps for any K (values
    below 1e-308 included).

    Examples
    --------
    >>> import math
    >>> lp = log_blocking_probability(5000, 0.5, 0.5)   # far below the double range
    >>> round(lp / math.log(10), 3)
    -3010.425
    """
    K, rho, mu2, nu = check_parameters(K, rho, mu2, idle_rate)
    lr = math.log(rho)
    j = np.arange(K, 2 * K + 1, dtype=float)
    m = np.arange(K, dtype=float)
    coef = nu + (1.0 - nu) * _one_minus_pow(mu2, m)
    with np.errstate(divide="ignore"):
        logs = np.concatenate([j * lr, m * lr + np.log(coef)])
    logD = float(np.logaddexp.reduce(logs[np.isfinite(logs)]))
    return 2 * K * lr - logD


def blocking_probability(K: int, rho: float, mu2: float, idle_rate: float | None = None) -> float:
    r"""Stationary blocking probability :math:`P(x = y = K)` in closed form.

    Parameters
    ----------
    K : int
        Capacity of each queue (>= 1).
    rho : float
        Total arrival rate (> 0).
    mu2 : float
        Service rate of the longest queue, in [0, 1]; :math:`\mu_1 = 1 - \mu_2`.
    idle_rate : float, optional
        :math:`\nu`, rate of the lone busy server; default ``mu2``.

    Returns
    -------
    float
        ``exp(log_blocking_probability(...))`` (0.0 only below the double range).

    Examples
    --------
    >>> round(blocking_probability(10, 0.9, 0.5), 13)
    0.0152027282106
    >>> # full pooling: the total is an M/M/1/2K queue
    >>> rho, K = 0.8, 7
    >>> mm1 = rho ** (2 * K) * (1 - rho) / (1 - rho ** (2 * K + 1))
    >>> abs(blocking_probability(K, rho, 0.3, idle_rate=1.0) / mm1 - 1) < 1e-13
    True
    """
    return math.exp(log_blocking_probability(K, rho, mu2, idle_rate))


def total_number_law(K: int, rho: float, mu2: float, idle_rate: float | None = None) -> np.ndarray:
    r"""Conditional law of :math:`N` on :math:`\{K, ..., 2K\}`: geometric.

    :math:`P(N = n \mid N \ge K) = \rho^{n-K} / \sum_{m=0}^{K} \rho^m`
    (the design notes' :math:`P(N = n) = P(N = K)\rho^{n-K}`), for every
    :math:`\mu_1` and :math:`\nu`. Index ``i`` of the result is ``n = K + i``.

    Examples
    --------
    >>> total_number_law(3, 2.0, 0.5) * 15
    array([1., 2., 4., 8.])
    """
    K, rho, mu2, nu = check_parameters(K, rho, mu2, idle_rate)
    lr = math.log(rho)
    w = np.arange(K + 1) * lr
    w -= w.max()
    p = np.exp(w)
    return p / p.sum()


def _log_seg(a, b, lr: float):
    r"""``log sum_{j=a}^{b} rho**-j`` (``-inf`` where a > b), ``lr = log rho``.

    Closed geometric sum, :math:`\rho^{-a} g(c)` with ``c = b - a + 1`` and
    :math:`g(c) = \sum_{k<c} \rho^{-k}` written with ``expm1`` so that it is
    accurate to a few ulps for every :math:`\rho` and ``c``.
    """
    a = np.asarray(a, dtype=float)
    c = np.asarray(b, dtype=float) - a + 1
    ok = c >= 1
    c = np.where(ok, c, 1.0)
    if lr == 0.0:
        lg = np.log(c)
    else:
        al = abs(lr)
        lg = np.log(-np.expm1(-c * al)) - math.log(-math.expm1(-al))
        if lr < 0:      # growing terms: factor out the largest one
            lg = lg + (c - 1) * al
    return np.where(ok, -a * lr + lg, -np.inf)


def _log_anchor(K, nu, x, y, lr, PD):
    r"""``log E_(x,y)[tau]`` for one state by the positive-term sum.

    :math:`E = \sum_{j=1}^{2K} \rho^{-j}\beta_j` with
    :math:`\beta_j = (c_j - \#_j) + (1-\nu) D_j + \nu\,\#_j \ge 0`, where
    :math:`c_j = 2K + 1 - \max(j, n+1)` (the M/M/1 part :math:`W(n)`),
    :math:`[L_j, U_j]` the inner range of the design formula
    (:math:`U_j = \min(j-2, 2K-j)`, :math:`L_j = \min(x, (n+1-j)^+)`),
    :math:`\#_j = (U_j - L_j + 1)^+` and :math:`D_j = \sum_{i=L_j}^{U_j}(1-\mu_1^i)`.
    One checks :math:`c_j \ge \#_j` term by term, so nothing cancels.
    """
    n = x + y
    j = np.arange(1, 2 * K + 1)
    c = 2 * K + 1 - np.maximum(j, n + 1)
    U = np.minimum(j - 2, 2 * K - j)
    L = np.minimum(x, np.maximum(0, n + 1 - j))
    cnt = np.maximum(U - L + 1, 0)
    Uc = np.maximum(U, 0)
    D = np.where(cnt > 0, PD[Uc + 1] - PD[np.minimum(L, Uc)], 0.0)
    beta = (c - cnt) + (1.0 - nu) * np.maximum(D, 0.0) + nu * cnt
    pos = beta > 0
    if not pos.any():
        return -np.inf
    t = -j[pos] * lr + np.log(beta[pos])
    return float(np.logaddexp.reduce(t))


def _log_cumsum(lv):
    """``log(cumsum(exp(lv)))`` without overflow or underflow."""
    M = float(np.max(lv))
    with np.errstate(divide="ignore", under="ignore"):
        v = np.cumsum(np.exp(lv - M))
        out = np.log(v) + M
    small = v < 1e-280          # prefix far below the level's maximum: go through logs
    if small.any():
        out[small] = np.logaddexp.accumulate(lv)[small]
    return out


def log_saturation_mean(K: int, rho: float, mu2: float, idle_rate: float | None = None,
                        states=None) -> np.ndarray:
    r"""Natural log of the mean time to saturation :math:`E_{(x,y)}[\tau]`.

    Parameters
    ----------
    K, rho, mu2, idle_rate
        As in :func:`blocking_probability`.
    states : (m, 2) array_like of int, optional
        States ``(x, y)`` with ``0 <= x <= y <= K``; default all of them in
        the order of :meth:`JSQ2.chain` (``x`` major, then ``y``).

    Returns
    -------
    ndarray, shape (m,)
        ``-inf`` at ``(K, K)`` (the time is 0 there).

    Notes
    -----
    The design notes give :math:`E_{(x,y)}[\tau] = W(n) - (1-\nu)G(x,y)`
    with :math:`W` the M/M/1 time from :math:`n` to :math:`2K`. Both terms
    are of size :math:`\rho^{-2K}`, so we never form the difference:

    * for one *anchor* state per level :math:`n`, :math:`(\max(0, n-K),
      \min(n, K))`, the difference is regrouped term by term into a sum of
      non-negative terms (see ``_log_anchor``);
    * along a level, :math:`G(x+1, y-1) = G(x, y) - \mu_1^x
      \sum_{j=x+2}^{n-x}\rho^{-j}`, so
      :math:`E_{(x+1,y-1)} = E_{(x,y)} + (1-\nu)\mu_1^x \sum_{j=x+2}^{n-x}\rho^{-j}`,
      again a sum of non-negative terms (:math:`\nu \le 1`).

    Sums run in log space or on terms scaled by their level's largest one;
    the cost is :math:`O(K^2)` for the anchors plus :math:`O(1)` per state.

    Examples
    --------
    >>> import math
    >>> round(math.exp(log_saturation_mean(10, 0.9, 0.5, states=[(0, 0)])[0]), 7)
    460.2416647
    """
    K, rho, mu2, nu = check_parameters(K, rho, mu2, idle_rate)
    lr = math.log(rho)
    if states is None:
        xs, ys = np.triu_indices(K + 1)
    else:
        raw = np.asarray(states)
        if raw.size % 2 or raw.dtype.kind not in "iuf" or (raw.dtype.kind == "f" and (raw != np.round(raw)).any()):
            raise ValueError("states: expected integer pairs (x, y)")
        st = raw.astype(np.int64).reshape(-1, 2)
        xs, ys = st[:, 0], st[:, 1]
        if ((xs < 0) | (xs > ys) | (ys > K)).any():
            raise ValueError(f"states: need 0 <= x <= y <= K = {K}")
    PD = np.concatenate([[0.0], np.cumsum(_one_minus_pow(mu2, np.arange(K + 1)))])  # PD[u+1] = sum_{i<=u}
    lmu1 = _log_mu1(mu2)
    ns = xs + ys
    out = np.full(xs.shape, -np.inf)
    order = np.argsort(ns, kind="stable")
    bounds = np.searchsorted(ns[order], np.arange(2 * K + 2))
    for n in range(2 * K):
        sel = order[bounds[n]:bounds[n + 1]]
        if sel.size == 0:
            continue
        x0, y0 = max(0, n - K), min(n, K)
        xm = int(xs[sel].max())
        lv = [_log_anchor(K, nu, x0, y0, lr, PD)]
        if xm > x0 and nu < 1.0:
            t = np.arange(x0, xm)
            with np.errstate(invalid="ignore"):
                lpow = np.where(t == 0, 0.0, t * lmu1)
            lv = np.concatenate([lv, math.log1p(-nu) + lpow + _log_seg(t + 2, n - t, lr)])
            level = _log_cumsum(np.asarray(lv))
        else:
            level = np.full(xm - x0 + 1, lv[0])
        out[sel] = level[xs[sel] - x0]
    return out


def saturation_mean(K: int, rho: float, mu2: float, idle_rate: float | None = None,
                    states=None) -> np.ndarray:
    r"""Mean time to saturation :math:`E_{(x,y)}[\tau]` in closed form.

    ``exp`` of :func:`log_saturation_mean`.

    Raises
    ------
    OverflowError
        Where a mean exceeds the double range (about 1.8e308): use
        :func:`log_saturation_mean` there.

    Examples
    --------
    >>> m = saturation_mean(10, 0.9, 0.5)          # all states, chain order
    >>> round(float(m[0]), 7), float(m[-1])        # from (0, 0); at (K, K)
    (460.2416647, 0.0)
    >>> # P_block = 1 / (1 + E_(K-1,K)[tau])
    >>> e = saturation_mean(10, 0.9, 0.5, states=[(9, 10)])[0]
    >>> abs(1 / (1 + e) / blocking_probability(10, 0.9, 0.5) - 1) < 1e-12
    True
    """
    logs = log_saturation_mean(K, rho, mu2, idle_rate, states)
    big = logs > np.log(np.finfo(float).max)
    if big.any():
        raise OverflowError(f"saturation_mean: {int(big.sum())} means exceed the double range (up to "
                            f"exp({float(logs.max()):.1f})); use log_saturation_mean")
    return np.exp(logs)
