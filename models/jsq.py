r"""Two queues under join-the-shortest-queue with asymmetric service (Tibi 2019).

The model
---------
Two queues of capacity :math:`K` each receive a Poisson stream of rate
:math:`\rho`; every arrival joins the shorter queue (ties: either one) and is
lost only when both queues are full. While the queues are unequal the shorter
one is served at rate :math:`\mu_1` and the longer one at
:math:`\mu_2 = 1 - \mu_1`; equal queues are each served at rate 1/2. In the
extended model the lone busy server (shorter queue empty, longer one not)
works at rate :math:`\nu`: :math:`\nu = \mu_2` is the standard model,
:math:`\nu > \mu_2` means the idle server helps (:math:`\nu = 1`: full
pooling), :math:`\nu < \mu_2` that it disturbs.

The reduced state is :math:`(x, y)` = (shortest, longest),
:math:`0 \le x \le y \le K`, :math:`N = x + y`:

=====================  ===============  ================
from                   to               rate
=====================  ===============  ================
(x, y), x < y          (x+1, y)         :math:`\rho`
(n, n), n < K          (n, n+1)         :math:`\rho`
(x, y), 1 <= x < y     (x-1, y)         :math:`\mu_1`
(x, y), 1 <= x < y     (x, y-1)         :math:`\mu_2`
(n, n), n >= 1         (n-1, n)         1
(0, y), y >= 1         (0, y-1)         :math:`\nu`
=====================  ===============  ================

Saturation is the hitting of :math:`(K, K)`. JSQ sends an arrival to a full
queue only when both are full, so the finite-:math:`K` process equals the
infinite-capacity one until saturation.

Closed forms (derived in the design notes from the martingales of the paper,
re-derived here in subtraction-free form; the paper's full text is not among
our sources):

* blocking probability
  :math:`P_{\mathrm{block}} = \rho^{2K} / \big[\sum_{j=0}^{2K}\rho^j
  - (1-\nu)\sum_{m=0}^{K-1}(\mu_1\rho)^m\big]`,
  and :math:`P_{\mathrm{block}} = 1/(1 + E_{(K-1,K)}[\tau])`;
* :math:`P(N = n) = P(N = K)\,\rho^{n-K}` for :math:`K \le n \le 2K`;
* the mean time to saturation from every state (:func:`saturation_mean`).

The Laplace transform of :math:`\tau` and the joint law of (time, common
length) at the first queue-length equality are not in closed form for us:
they come from ctmc's generic first-passage analyses
(:meth:`JSQ2.saturation_laplace`, :meth:`JSQ2.first_equality`).

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

Examples
--------
>>> from models.jsq import JSQ2, blocking_probability
>>> q = JSQ2(K=10, rho=0.9, mu2=0.5)
>>> round(q.blocking_probability(), 13)       # design notes: 0.0152027282106
0.0152027282106
>>> abs(q.blocking_probability() / blocking_probability(10, 0.9, 0.5) - 1) < 1e-12
True
>>> round(float(q.saturation_times()[q.chain().index(s=0, l=0)]), 7)   # 460.2416647
460.2416647
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from functools import cached_property

import numpy as np

import ctmc

__all__ = [
    "JSQ2",
    "JSQMeasures",
    "blocking_probability",
    "log_blocking_probability",
    "saturation_mean",
    "log_saturation_mean",
    "total_number_law",
]


# ---------------------------------------------------------------------------
# parameter checks (before any heavy work)
# ---------------------------------------------------------------------------
def _real(name, v, allow_none=False):
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
        raise ValueError(f"{name}: must be a finite real number, got {v!r}")
    return float(v)


def _check(K, rho, mu2, idle_rate):
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"K: capacity must be an integer >= 1, got {K!r}")
    rho, mu2 = _real("rho", rho), _real("mu2", mu2)
    if not rho > 0:
        raise ValueError(f"rho: arrival rate must be > 0, got {rho!r}")
    if not 0 <= mu2 <= 1:
        raise ValueError(f"mu2: service rate of the longest queue must lie in [0, 1] (mu1 = 1 - mu2), got {mu2!r}")
    nu = _real("idle_rate", idle_rate, allow_none=True)
    nu = mu2 if nu is None else nu
    if not 0 <= nu <= 1:
        raise ValueError("idle_rate: rate of the lone busy server must lie in [0, 1] "
                         f"(1 = full pooling of both servers), got {idle_rate!r}")
    return int(K), rho, mu2, nu


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
    K, rho, mu2, nu = _check(K, rho, mu2, idle_rate)
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
    K, rho, mu2, nu = _check(K, rho, mu2, idle_rate)
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
    K, rho, mu2, nu = _check(K, rho, mu2, idle_rate)
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

    ``exp`` of :func:`log_saturation_mean` (``inf`` only where the value
    exceeds the double range).

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
    with np.errstate(over="ignore"):
        return np.exp(log_saturation_mean(K, rho, mu2, idle_rate, states))


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class JSQMeasures:
    """Main stationary measures of :class:`JSQ2` (see :meth:`JSQ2.measures`).

    Attributes
    ----------
    blocking_probability : float
        :math:`P(x = y = K)`, by PASTA the fraction of arrivals lost.
    mean_shortest, mean_longest, mean_total : float
        :math:`E[x]`, :math:`E[y]`, :math:`E[N]`.
    throughput : float
        :math:`\\rho(1 - P_{\\mathrm{block}})`.
    mean_sojourn_time : float
        Of accepted customers, by Little's law :math:`E[N]/\\text{throughput}`.
    residual : float
        :math:`\\|\\pi Q\\|_1` of the stationary solve.
    status : str
        Status of the stationary solve.
    """

    blocking_probability: float
    mean_shortest: float
    mean_longest: float
    mean_total: float
    throughput: float
    mean_sojourn_time: float
    residual: float
    status: str


class JSQ2:
    r"""Two-queue join-the-shortest-queue system with capacity ``K`` per queue.

    Parameters
    ----------
    K : int
        Capacity of each queue, :math:`K \ge 1` (thousands are fine: the
        reduced chain has :math:`(K+1)(K+2)/2` states).
    rho : float
        Total Poisson arrival rate :math:`\rho > 0`.
    mu2 : float
        :math:`\mu_2 \in [0, 1]`, service rate of the longest queue while the
        queues differ; the shortest is served at :math:`\mu_1 = 1 - \mu_2`,
        equal queues at 1/2 each.
    idle_rate : float, optional
        :math:`\nu \in [0, 1]`, service rate of the longest queue while the
        shortest is empty. ``None`` (default) means :math:`\nu = \mu_2`, the
        standard model; larger values mean the idle server helps, smaller
        that it disturbs.

    Notes
    -----
    All stationary measures share one stationary solve, and the saturation
    analyses one factorisation, cached on the instance. ``solver`` options of
    the ctmc analyses are passed through ``**options``.

    Examples
    --------
    >>> q = JSQ2(K=4, rho=1.3, mu2=0.25, idle_rate=0.6)
    >>> chain = q.chain()
    >>> chain.n_states, chain.states.names
    (15, ('s', 'l'))
    >>> m = q.measures()
    >>> abs(m.blocking_probability / blocking_probability(4, 1.3, 0.25, 0.6) - 1) < 1e-12
    True
    >>> abs(m.mean_sojourn_time * m.throughput - m.mean_total) < 1e-12
    True
    """

    def __init__(self, K: int, rho: float, mu2: float, idle_rate: float | None = None):
        self.K, self.rho, self.mu2, self.nu = _check(K, rho, mu2, idle_rate)
        self.mu1 = 1.0 - self.mu2
        self.idle_rate = idle_rate

    def __repr__(self) -> str:
        return f"JSQ2(K={self.K}, rho={self.rho}, mu2={self.mu2}, idle_rate={self.nu})"

    # -- chains --------------------------------------------------------------
    def model(self) -> ctmc.Model:
        """The declarative :class:`ctmc.Model` of the reduced chain (variables ``s``, ``l``)."""
        K, rho, mu1, mu2, nu = self.K, self.rho, self.mu1, self.mu2, self.nu
        m = ctmc.Model(f"jsq2(K={K})")
        s = m.var("s", 0, K)
        l = m.var("l", 0, K)
        m.event("arrive_short", guard=s < l, rate=rho, update={s: s + 1})
        m.event("arrive_equal", guard=(s == l) & (l < K), rate=rho, update={l: l + 1})
        m.event("blocked", guard=(s == K) & (l == K), rate=rho, update={})
        m.event("serve_short", guard=(s >= 1) & (s < l), rate=mu1, update={s: s - 1})
        m.event("serve_long", guard=(s >= 1) & (s < l), rate=mu2, update={l: l - 1})
        m.event("serve_equal", guard=(s == l) & (s >= 1), rate=1.0, update={s: s - 1})
        m.event("serve_alone", guard=(s == 0) & (l >= 1), rate=nu, update={l: l - 1})
        return m

    @cached_property
    def _chain(self) -> ctmc.CTMC:
        # every (x, y) is reachable from some (0, y) by arrivals (also when
        # mu1 = 0, where (0, 0) alone reaches only |x - y| <= 1)
        return self.model().build(initial=[{"s": 0, "l": y} for y in range(self.K + 1)])

    def chain(self) -> ctmc.CTMC:
        """The reduced chain on ``(s, l)`` = (shortest, longest), built once and cached.

        All :math:`(K+1)(K+2)/2` states :math:`0 \\le s \\le l \\le K`, ordered
        by ``s`` then ``l``. With :math:`\\mu_2 = 1` the states with
        :math:`l - s \\ge 2` are transient (left, never re-entered).
        """
        return self._chain

    def full_model(self) -> ctmc.Model:
        """The unreduced model on ``(q1, q2)``; ties send an arrival to each queue with probability 1/2.

        Lumping ``(q1, q2) -> (min, max)`` gives :meth:`chain`; the tests
        check this reduction.
        """
        K, rho, mu1, mu2, nu = self.K, self.rho, self.mu1, self.mu2, self.nu
        m = ctmc.Model(f"jsq2-full(K={K})")
        q1 = m.var("q1", 0, K)
        q2 = m.var("q2", 0, K)
        m.event("arrive_1", guard=(q1 < q2) | ((q1 == q2) & (q1 < K)),
                rate=ctmc.where(q1 == q2, rho / 2, rho), update={q1: q1 + 1})
        m.event("arrive_2", guard=(q2 < q1) | ((q1 == q2) & (q2 < K)),
                rate=ctmc.where(q1 == q2, rho / 2, rho), update={q2: q2 + 1})
        # queue 1 is served at mu1 when shorter, mu2 (nu if q2 empty) when longer, 1/2 on ties
        rate1 = ctmc.where(q1 == q2, 0.5, ctmc.where(q1 < q2, mu1, ctmc.where(q2 == 0, nu, mu2)))
        rate2 = ctmc.where(q1 == q2, 0.5, ctmc.where(q2 < q1, mu1, ctmc.where(q1 == 0, nu, mu2)))
        m.event("serve_1", guard=q1 >= 1, rate=rate1, update={q1: q1 - 1})
        m.event("serve_2", guard=q2 >= 1, rate=rate2, update={q2: q2 - 1})
        return m

    def full_chain(self) -> ctmc.CTMC:
        """The unreduced chain on ``(q1, q2)`` (``(K+1)**2`` states)."""
        init = [{"q1": 0, "q2": y} for y in range(self.K + 1)] + [{"q1": y, "q2": 0} for y in range(1, self.K + 1)]
        return self.full_model().build(initial=init)

    # -- stationary measures ---------------------------------------------------
    def stationary(self, method: str = "auto", **options):
        """Stationary law of the reduced chain (a :class:`ctmc.StationaryResult`, cached per method)."""
        key = (method, tuple(sorted(options.items())))
        cache = self.__dict__.setdefault("_stationary_cache", {})
        if key not in cache:
            cache[key] = self.chain().stationary(method, **options)
        return cache[key]

    def blocking_probability(self, source: str = "chain") -> float:
        """Stationary probability that both queues are full (= fraction of arrivals lost, PASTA).

        Parameters
        ----------
        source : {"chain", "closed_form"}
            ``"chain"`` solves the chain with ctmc (relative accuracy down to
            the double range); ``"closed_form"`` evaluates
            :func:`blocking_probability`.
        """
        if source == "closed_form":
            return blocking_probability(self.K, self.rho, self.mu2, self.nu)
        if source != "chain":
            raise ValueError(f"source: expected 'chain' or 'closed_form', got {source!r}")
        res = self.stationary()
        return float(res.pi[self.chain().index(s=self.K, l=self.K)])

    def measures(self) -> JSQMeasures:
        """Blocking, mean queue lengths, throughput and mean sojourn time (Little)."""
        res = self.stationary()
        st = self.chain().states
        x, y = st["s"].astype(float), st["l"].astype(float)
        pb = float(res.pi[self.chain().index(s=self.K, l=self.K)])
        ex, ey = res.expect(x), res.expect(y)
        thr = self.rho * (1.0 - pb)
        return JSQMeasures(blocking_probability=pb, mean_shortest=ex, mean_longest=ey,
                           mean_total=ex + ey, throughput=thr, mean_sojourn_time=(ex + ey) / thr,
                           residual=res.residual, status=str(res.status.value))

    def total_number_law(self) -> np.ndarray:
        """Stationary law of :math:`N = x + y` on ``0..2K`` from the chain."""
        res = self.stationary()
        st = self.chain().states
        return np.bincount(st["s"] + st["l"], weights=res.pi, minlength=2 * self.K + 1)

    def longest_queue_law(self) -> np.ndarray:
        """Stationary law of the longest queue on ``0..K`` from the chain."""
        res = self.stationary()
        return np.bincount(self.chain().states["l"], weights=res.pi, minlength=self.K + 1)

    # -- saturation ----------------------------------------------------------
    def _saturated(self):
        K = self.K
        return lambda env: (env["s"] == K) & (env["l"] == K)

    def saturation_times(self, moments: int = 1, source: str = "chain", **options) -> np.ndarray:
        """Mean hitting time of saturation ``(K, K)`` from every state.

        Parameters
        ----------
        moments : int
            1 returns the means, shape ``(n_states,)``; ``k > 1`` returns the
            first ``k`` moments, shape ``(k, n_states)`` (chain only).
        source : {"chain", "closed_form"}
            ``"chain"``: ctmc's hitting-time analysis; ``"closed_form"``:
            :func:`saturation_mean`.

        Returns
        -------
        ndarray aligned with ``chain().states``.
        """
        if source == "closed_form":
            if moments != 1:
                raise ValueError("moments: the closed form gives the mean only (moments=1)")
            if options:
                raise ValueError(f"options: {sorted(options)} apply to source='chain' only")
            st = self.chain().states
            return saturation_mean(self.K, self.rho, self.mu2, self.nu,
                                   states=np.column_stack([st["s"], st["l"]]))
        if source != "chain":
            raise ValueError(f"source: expected 'chain' or 'closed_form', got {source!r}")
        res = self.saturation_analysis(moments, **options)
        return res.mean if moments == 1 else res.moments

    def saturation_analysis(self, moments: int = 1, **options):
        """The full :class:`ctmc.HittingResult` (status, residual, method) for saturation."""
        return self.chain().hitting_times(self._saturated(), moments=moments, **options)

    def saturation_laplace(self, s, **options):
        r"""Laplace transform :math:`E_{(x,y)}[e^{-s\tau}]` from every state (a :class:`ctmc.LaplaceResult`)."""
        return self.chain().hitting_laplace(self._saturated(), s, **options)

    def first_equality(self, s=None, t=None, sources=None, **options):
        r"""Joint law of (time, common length) at the first queue-length equality.

        From unequal states :math:`x < y`, the time
        :math:`T = \inf\{t: x_t = y_t\}` and the common length :math:`x_T`:
        transform :math:`E_{(x,y)}[e^{-sT}; x_T = k]` at points ``s`` and/or
        the joint CDF :math:`P_{(x,y)}(T \le t, x_T = k)` at times ``t``.

        Parameters
        ----------
        s, t : float or array_like, optional
            Transform points and times.
        sources : dict, list of dict, expression or callable, optional
            Starting states (default: every unequal state). The answer is
            dense, ``len(sources) x (K + 1)`` per point: with every unequal
            state that is about :math:`K^3/2` numbers, fine for K of a few
            hundred; pass the starting states you need beyond that.

        Returns
        -------
        ctmc.FirstPassageResult
            Rows are the starting states (``result.sources``), columns the
            equal states ``(k, k)`` (``result.targets``), in chain order.

        Examples
        --------
        >>> q = JSQ2(K=30, rho=0.9, mu2=0.3)
        >>> fp = q.first_equality(s=[0.0], sources={"s": 2, "l": 7})
        >>> fp.probabilities.shape, round(float(fp.probabilities.sum()), 12)
        ((1, 31), 1.0)
        """
        ch = self.chain()
        if sources is None:
            src = lambda e: e["s"] < e["l"]  # noqa: E731
        elif isinstance(sources, dict):
            src = [ch.index(**sources)]
        elif isinstance(sources, (list, tuple)) and sources and isinstance(sources[0], dict):
            src = [ch.index(**d) for d in sources]
        else:
            src = sources
        return ch.first_passage(lambda e: e["s"] == e["l"], s=s, t=t, sources=src, **options)


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def add_arguments(parser) -> None:
    """Arguments of ``ctmc jsq``."""
    parser.add_argument("--K", type=int, default=100, help="capacity of each queue (default 100)")
    parser.add_argument("--rho", type=float, default=0.9, help="total arrival rate (default 0.9)")
    parser.add_argument("--mu2", type=float, default=0.5, help="service rate of the longest queue (default 0.5)")
    parser.add_argument("--idle-rate", type=float, default=None,
                        help="rate of the lone busy server when the shortest queue is empty (default mu2)")


def run(args) -> str:
    """Main measures of one JSQ system, chain against closed forms."""
    import time

    t0 = time.perf_counter()
    q = JSQ2(args.K, args.rho, args.mu2, args.idle_rate)
    chain = q.chain()
    tb = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = q.measures()
    ts = time.perf_counter() - t0
    t0 = time.perf_counter()
    sat = q.saturation_analysis(check=False)    # status printed below
    th = time.perf_counter() - t0
    i00 = chain.index(s=0, l=0)
    pb_cf = q.blocking_probability("closed_form")
    e_cf = float(saturation_mean(q.K, q.rho, q.mu2, q.nu, states=[(0, 0)])[0])
    lines = [
        f"{q!r}: {chain.n_states} states, {chain.n_transitions} transitions (built in {tb:.2f} s)",
        f"  stationary solve ({m.status}, residual {m.residual:.1e}, {ts:.2f} s)",
        f"  blocking probability     {m.blocking_probability:.12e}   closed form {pb_cf:.12e}"
        f"   rel. diff {_rel(m.blocking_probability, pb_cf):.1e}",
        f"  mean shortest / longest  {m.mean_shortest:.6f} / {m.mean_longest:.6f}",
        f"  mean number in system    {m.mean_total:.6f}",
        f"  throughput               {m.throughput:.6f}",
        f"  mean sojourn time        {m.mean_sojourn_time:.6f}",
        f"  E_(0,0)[time to (K,K)]   {sat.mean[i00]:.12e}   closed form {e_cf:.12e}"
        f"   rel. diff {_rel(sat.mean[i00], e_cf):.1e}",
        f"  saturation analysis ({sat.method}, {sat.status.value}, residual {sat.residual:.1e}, {th:.2f} s)",
    ]
    return "\n".join(lines)


def _rel(a, b) -> float:
    if a == b:
        return 0.0
    return abs(a / b - 1) if b else float("inf")


def report(plots_dir=None) -> str:
    """The JSQ part of ``ctmc report``: chain against closed forms over a parameter grid."""
    import time

    rows = []
    for K, rho, mu2, nu in [(10, 0.9, 0.5, None), (200, 0.9, 0.3, None), (200, 1.3, 0.75, 1.0),
                            (300, 0.5, 0.0, None), (300, 0.9, 1.0, 0.2)]:
        q = JSQ2(K, rho, mu2, nu)
        t0 = time.perf_counter()
        pb = q.blocking_probability()
        sat = q.saturation_analysis(check=False)    # status printed in the table
        dt = time.perf_counter() - t0
        i00 = q.chain().index(s=0, l=0)
        pb_cf = q.blocking_probability("closed_form")
        e_cf = float(saturation_mean(K, rho, mu2, q.nu, states=[(0, 0)])[0])
        rows.append([K, rho, mu2, q.nu, q.chain().n_states, f"{pb:.6e}", f"{_rel(pb, pb_cf):.1e}",
                     f"{sat.mean[i00]:.6e}", f"{_rel(sat.mean[i00], e_cf):.1e}", sat.status.value, f"{dt:.2f}"])
    from ctmc.cli import _table
    out = "Two-queue JSQ (Tibi 2019): chain vs closed forms\n" + _table(
        rows, ["K", "rho", "mu2", "nu", "states", "P_block", "rel.err", "E_(0,0)[tau]", "rel.err", "status", "s"])
    if plots_dir:
        from pathlib import Path
        import importlib.util
        ex = Path(__file__).resolve().parents[1] / "examples" / "jsq_ordering.py"
        if ex.exists():
            spec = importlib.util.spec_from_file_location("jsq_ordering", ex)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            out += "\n" + mod.main(["--plots", str(plots_dir)])
    return out
