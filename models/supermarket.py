r"""Supermarket model: exact finite-n power-of-d systems versus mean-field limits.

The model
---------
:math:`n` single-server queues, each served at rate 1 (exponential). Jobs
arrive in a Poisson stream of rate :math:`\lambda n`; each arrival samples
:math:`d` queues uniformly (with replacement, the default, or without) and
joins a shortest sampled one (ties broken uniformly). With a per-queue
capacity :math:`B`, an arrival whose chosen queue already holds :math:`B` jobs
is lost. :math:`d = 1` is random routing (independent M/M/1 queues),
:math:`d = n` without replacement is join-the-shortest-queue.

Occupancy (lumped) representation
---------------------------------
Let :math:`m_k` be the number of queues holding exactly :math:`k` jobs
(:math:`0 \le k \le B`, :math:`\sum_k m_k = n`) and :math:`M_k = \sum_{j \ge k}
m_j` the number holding at least :math:`k` (:math:`M_0 = n`). The queues are
exchangeable, so :math:`(m_0, \dots, m_B)` is itself a Markov chain with
:math:`\binom{n + B}{B}` states (instead of :math:`(B + 1)^n`):

* an arrival joins a queue with :math:`k - 1` jobs (:math:`M_k \mathrel{+}= 1`)
  at rate :math:`\lambda n (S_{k-1} - S_k)`, where :math:`S_k` is the
  probability that all :math:`d` sampled queues hold at least :math:`k` jobs:

  .. math::

      S_k = (M_k / n)^d \ \text{(with replacement)}, \qquad
      S_k = \binom{M_k}{d} \Big/ \binom{n}{d}
      = \prod_{j < d} \frac{M_k - j}{n - j} \ \text{(without)};

  the arrival is lost with probability :math:`S_B` (see
  :func:`join_probabilities`);
* a departure from a queue with :math:`k \ge 1` jobs (:math:`M_k \mathrel{-}= 1`)
  happens at rate :math:`m_k`.

The state :math:`n \ge M_1 \ge \dots \ge M_B \ge 0` is ranked in colex order
of the :math:`B`-subset :math:`\{M_k + B - k\}` of :math:`\{0, \dots, n+B-1\}`:

.. math::

    \operatorname{rank}(M) = \sum_{k=1}^{B} \binom{M_k + B - k}{B - k + 1},

so a move :math:`M_k \to M_k \pm 1` changes one term and the target index is
the source index plus or minus :math:`\binom{M_k + B - k}{B - k}` (resp.
:math:`\binom{M_k - 1 + B - k}{B - k}`): the generator is assembled without
any search (:func:`occupancy_states`, :func:`occupancy_generator`).

Measures
--------
Tails :math:`u_k = E[M_k] / n` (the fraction of queues with at least
:math:`k` jobs, also the law of a tagged queue: :math:`P(q \ge k)`), the
tagged-queue law :math:`f_k = u_k - u_{k+1}`, the mean number of jobs per
server :math:`\sum_{k \ge 1} u_k`, the loss probability :math:`P_{loss} =
E[S_B]` (PASTA) and the mean sojourn time of an accepted job
:math:`\sum_k u_k / (\lambda (1 - P_{loss}))` (Little). Flow balance gives the
exact check :math:`u_1 = \lambda (1 - P_{loss})`.

Truncation
----------
With ``capacity=None`` the infinite-buffer system is approximated by the
smallest capacity :math:`B` whose *boundary mass*
:math:`\beta_B = P(M_B \ge 1)` (the stationary probability that some queue
is full, i.e. that the truncation can act at all) is at most ``tol``. The
truncated and the infinite chains have the same rates outside these states,
so :math:`\beta_B` measures the neglected mass; it is estimated in the
truncated chain itself, and the loss probability (always smaller) is reported
next to it (:class:`Truncation`). The search solves a few small capacities
first, extrapolates the geometric decay of the boundary mass to jump ahead
(each jump at most multiplies the state count by 8), then bisects back to the
smallest capacity meeting ``tol``. This is an estimate measured in the
truncated chain, not a proven bound: blocking makes the truncated chain
slightly lighter than the infinite one, and the tests check it against larger
capacities.

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

Examples
--------
>>> from models.supermarket import Supermarket, mean_field_fixed_point
>>> s = Supermarket(4, 2, 0.9, capacity=10)
>>> s.chain().n_states                       # C(14, 10)
1001
>>> round(s.mean_jobs_per_server(), 4) > round(float(mean_field_fixed_point(2, 0.9)[1:].sum()), 4)
True
"""
from __future__ import annotations

import itertools
import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import scipy.sparse as sp

import ctmc

__all__ = [
    "Supermarket", "Truncation", "TruncationWarning", "level_stationary", "n_occupancy_states",
    "occupancy_states", "occupancy_rank",
    "occupancy_generator", "join_probabilities", "sample_all_at_least", "per_queue_model",
    "lump_per_queue", "mean_field_drift", "mean_field_fixed_point", "mean_field_ode",
    "mean_field_derivatives", "refined_correction", "refined_mean_field", "RefinedMeanField",
    "add_arguments", "run", "report",
]

#: Largest occupancy chain :class:`Supermarket` builds unless told otherwise.
MAX_STATES = 4_000_000
_TINY = np.finfo(float).tiny


class TruncationWarning(UserWarning):
    """The automatic capacity could not reach the boundary-mass tolerance."""


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
def _int_param(name, value, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer >= {lo}, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name}: expected an integer {rng}, got {value}")
    return int(value)


def _check_model(n, d, lam, capacity, replacement, *, need_stable=True):
    n = _int_param("n", n, 1)
    d = _int_param("d", d, 1, None if replacement else n)
    if isinstance(lam, bool) or not isinstance(lam, (int, float, np.integer, np.floating)) \
            or not math.isfinite(lam) or lam <= 0:
        raise ValueError(f"lam: expected a finite arrival rate per server > 0, got {lam!r}")
    if capacity is not None:
        capacity = _int_param("capacity", capacity, 1)
    elif need_stable and not lam < 1:
        raise ValueError(f"lam: without a capacity the system is stable only for 0 < lam < 1, got {lam}")
    if not isinstance(replacement, (bool, np.bool_)):
        raise ValueError(f"replacement: expected True or False, got {replacement!r}")
    return n, d, float(lam), capacity, bool(replacement)


# ---------------------------------------------------------------------------
# sampling: which queue an arrival joins
# ---------------------------------------------------------------------------
def sample_all_at_least(M, n, d, replacement=True):
    r"""Probability :math:`S` that all ``d`` sampled queues hold at least ``k`` jobs.

    Parameters
    ----------
    M : array_like of int
        Number of queues with at least ``k`` jobs (any shape).
    n, d : int
        Number of queues and of samples.
    replacement : bool
        ``True``: :math:`(M/n)^d`; ``False``: :math:`\binom{M}{d}/\binom{n}{d}`
        (exact hypergeometric, computed as a product to stay in floating point).

    Examples
    --------
    >>> sample_all_at_least([0, 1, 2, 4], 4, 2)
    array([0.    , 0.0625, 0.25  , 1.    ])
    >>> sample_all_at_least([0, 1, 2, 4], 4, 2, replacement=False)
    array([0.        , 0.        , 0.16666667, 1.        ])
    """
    x = np.asarray(M, dtype=float)
    if replacement:
        return (x / n) ** d
    out = np.ones_like(x)
    for j in range(d):
        out *= np.maximum(x - j, 0.0) / (n - j)
    return out


def join_probabilities(m, d, replacement=True):
    r"""Law of the length of the queue an arrival joins, from the occupancy vector.

    Parameters
    ----------
    m : array_like of int, shape (..., B + 1)
        Occupancy vectors: ``m[..., k]`` queues hold ``k`` jobs.
    d : int
        Number of sampled queues.
    replacement : bool
        Sampling with (default) or without replacement.

    Returns
    -------
    ndarray, shape (..., B + 1)
        ``p[..., k]`` = probability that the arrival joins a queue holding
        ``k`` jobs, :math:`S_k - S_{k+1}`; ``p[..., B]`` is the probability
        that it is lost (its queue is full).

    Examples
    --------
    Two queues, one empty and one with a job, d = 2:

    >>> join_probabilities([1, 1, 0], 2)             # both picks hit the busy queue w.p. 1/4
    array([0.75, 0.25, 0.  ])
    >>> join_probabilities([1, 1, 0], 2, replacement=False)
    array([1., 0., 0.])
    """
    m = np.asarray(m)
    n = m.sum(axis=-1, keepdims=True)
    if (m < 0).any() or (n <= 0).any():
        raise ValueError("m: occupancy counts must be >= 0 with a positive total")
    if not replacement and (n < d).any():
        raise ValueError(f"d: without replacement d must be <= n, got d={d}")
    M = np.flip(np.cumsum(np.flip(m, -1), axis=-1), -1)          # M_k, k = 0..B
    S = sample_all_at_least(M, n, d, replacement)
    S_next = np.concatenate([S[..., 1:], np.zeros_like(S[..., :1])], axis=-1)
    p = S - S_next
    p[..., -1] = S[..., -1]
    return p


# ---------------------------------------------------------------------------
# occupancy state space: enumeration and ranking
# ---------------------------------------------------------------------------
def n_occupancy_states(n: int, B: int) -> int:
    """Number of occupancy vectors of ``n`` queues with capacity ``B``: C(n + B, B).

    >>> [n_occupancy_states(20, B) for B in (6, 7, 8, 9)]
    [230230, 888030, 3108105, 10015005]
    """
    return math.comb(n + B, B)


def _binom_table(n, B):
    # C(a, j) for 0 <= a <= n + B, 0 <= j <= B + 1 with a - j <= n (the only entries the
    # ranking uses; they are <= C(n + B, n), so exact in int64 once the caller capped the size)
    T = np.zeros((n + B + 1, B + 2), dtype=np.int64)
    for a in range(n + B + 1):
        for j in range(max(0, a - n), min(a, B + 1) + 1):
            T[a, j] = math.comb(a, j)
    return T


def occupancy_rank(M, n):
    r"""Colex rank of tail vectors ``M = (M_1, ..., M_B)`` (rows, non-increasing).

    Examples
    --------
    >>> occupancy_rank([[0, 0], [1, 0], [1, 1], [2, 0]], 2)
    array([0, 1, 2, 3])
    """
    M = np.atleast_2d(np.asarray(M, dtype=np.int64))
    B = M.shape[1]
    T = _binom_table(n, B)
    k = np.arange(1, B + 1)
    return T[M + (B - k), B - k + 1].sum(axis=1)


def occupancy_states(n: int, B: int) -> np.ndarray:
    r"""All tail vectors :math:`n \ge M_1 \ge \dots \ge M_B \ge 0`, row ``i`` of rank ``i``.

    Returns
    -------
    ndarray of int32, shape (C(n + B, B), B)

    Examples
    --------
    >>> occupancy_states(2, 2).tolist()
    [[0, 0], [1, 0], [1, 1], [2, 0], [2, 1], [2, 2]]
    """
    rows = np.arange(n + 1, dtype=np.int32)[:, None]
    for _ in range(1, B):
        prev = rows[:, -1].astype(np.int64)
        counts = prev + 1
        starts = np.cumsum(counts) - counts
        rep = np.repeat(rows, counts, axis=0)
        new = (np.arange(int(counts.sum())) - np.repeat(starts, counts)).astype(np.int32)
        rows = np.concatenate([rep, new[:, None]], axis=1)
        del rep, new
    out = np.empty_like(rows)
    out[occupancy_rank(rows, n)] = rows
    return out


def occupancy_generator(n, d, lam, B, replacement=True, M=None):
    r"""Generator of the occupancy chain on the states of :func:`occupancy_states`.

    Parameters
    ----------
    n, d, lam, B, replacement
        Model parameters (see :class:`Supermarket`); ``B`` is the capacity.
    M : ndarray, optional
        The states, as returned by ``occupancy_states(n, B)``.

    Returns
    -------
    scipy.sparse.csr_matrix
    """
    if M is None:
        M = occupancy_states(n, B)
    N = M.shape[0]
    T = _binom_table(n, B)
    src_all, dst_all, rate_all = [], [], []
    idx = np.arange(N, dtype=np.int64)
    col = [np.full(N, n, dtype=np.int64)] + [M[:, k].astype(np.int64) for k in range(B)] \
        + [np.zeros(N, dtype=np.int64)]                       # col[k] = M_k, k = 0..B+1
    S = [sample_all_at_least(c, n, d, replacement) for c in col[:B + 1]]
    for k in range(1, B + 1):
        # arrival joins a queue with k-1 jobs: M_k += 1
        rate = lam * n * (S[k - 1] - S[k])
        ok = (col[k - 1] > col[k]) & (rate > 0)
        src = idx[ok]
        src_all.append(src)
        dst_all.append(src + T[col[k][ok] + B - k, B - k])
        rate_all.append(rate[ok])
        # departure from a queue with k jobs: M_k -= 1, rate m_k
        mk = col[k] - col[k + 1]
        ok = mk > 0
        src = idx[ok]
        src_all.append(src)
        dst_all.append(src - T[col[k][ok] - 1 + B - k, B - k])
        rate_all.append(mk[ok].astype(float))
    src = np.concatenate(src_all)
    dst = np.concatenate(dst_all)
    rate = np.concatenate(rate_all)
    del src_all, dst_all, rate_all
    off = sp.csr_matrix((rate, (src, dst)), shape=(N, N))
    out = np.asarray(off.sum(axis=1)).ravel()
    return (off - sp.diags(out, format="csr")).tocsr()


# ---------------------------------------------------------------------------
# stationary solver exploiting the level (total number of jobs) structure
# ---------------------------------------------------------------------------
def level_stationary(Q, level, *, tol: float = 1e-12, maxiter: int = 1000, x0=None,
                     tail_tol: float = 1e-6) -> ctmc.StationaryResult:
    r"""Stationary law of a chain whose transitions change a *level* by exactly +-1.

    In the occupancy chain every arrival raises the total number of jobs
    :math:`L = \sum_k M_k` by one and every departure lowers it by one, so
    :math:`Q` is block tridiagonal in :math:`L` with empty diagonal blocks.
    The slow mode of the chain is the fluctuation of :math:`L` (relaxation
    time of order :math:`(1 - \lambda)^{-2}`), which makes plain power or
    Gauss-Seidel iterations crawl; the queue *profile* at fixed :math:`L`
    mixes fast. Each iteration here therefore

    1. *aggregates* the current iterate into the birth-death chain of
       :math:`L` (birth rate :math:`a_L = E[\text{up rate} \mid L]`, death
       rate :math:`d_L = E[\text{down rate} \mid L]`), solves it exactly
       (:math:`p_{L+1}/p_L = a_L / d_{L+1}`) and rescales the iterate level by
       level to these masses (iterative aggregation-disaggregation, Takahashi
       1975; Stewart 1994, ch. 6), then
    2. runs a forward and a backward Gauss-Seidel sweep ordered by level: the
       states of a level only exchange probability with the two neighbouring
       levels, so each level is updated in one vectorised sparse product.

    It stops when :math:`\|x Q\|_1 / \max_i |q_{ii}| \le` ``tol`` and
    reports the residual and the balance error like :mod:`ctmc.stationary`.

    Parameters
    ----------
    Q : scipy.sparse matrix
        Irreducible generator.
    level : int array
        Level of each state; every transition must change it by +-1.
    tol, maxiter, x0, tail_tol
        Stopping tolerance, iteration limit, initial guess (positive),
        balance-error threshold of the TAIL_INACCURATE status.

    Returns
    -------
    ctmc.StationaryResult
        ``method == "level-iad"``.
    """
    from ctmc.results import Status
    from ctmc.stationary import stationary_evidence
    t0 = time.perf_counter()
    Q = sp.csr_matrix(Q)
    N = Q.shape[0]
    level = np.asarray(level, dtype=np.int64)
    if level.shape != (N,):
        raise ValueError(f"level: expected one level per state ({N}), got shape {level.shape}")
    level = level - level.min()
    coo = Q.tocoo()
    off = coo.row != coo.col
    step = level[coo.col[off]] - level[coo.row[off]]
    if np.any(np.abs(step) != 1):
        raise ValueError("level: every transition must change the level by exactly +-1")
    order = np.argsort(level, kind="stable")
    inv = np.empty(N, dtype=np.int64)
    inv[order] = np.arange(N)
    lv = level[order]
    n_lev = int(lv[-1]) + 1
    bounds = np.searchsorted(lv, np.arange(n_lev + 1))
    rows, cols, vals = inv[coo.row[off]], inv[coo.col[off]], coo.data[off]
    del coo, off
    up = np.bincount(rows[step > 0], weights=vals[step > 0], minlength=N)
    down = np.bincount(rows[step < 0], weights=vals[step < 0], minlength=N)
    out = up + down
    # in-flow matrix: IN[j, i] = q_ij (i != j), cut into level blocks once
    IN = sp.csr_matrix((vals, (cols, rows)), shape=(N, N))
    del rows, cols, vals, step
    blocks = [IN[bounds[L]:bounds[L + 1]] for L in range(n_lev)]
    scale = float(out.max())
    x = np.full(N, 1.0 / N) if x0 is None else np.asarray(x0, dtype=float)[order].copy()
    if x.shape != (N,) or not np.all(x > 0):
        raise ValueError("x0: expected a positive vector with one entry per state")
    status, resid, it, norm_it, bal = Status.MAX_ITERATIONS, np.inf, 0, None, np.inf
    for it in range(1, maxiter + 1):
        # 1. aggregation-disaggregation on the level
        X = np.bincount(lv, weights=x, minlength=n_lev)
        a = np.bincount(lv, weights=x * up, minlength=n_lev) / X
        dn = np.bincount(lv, weights=x * down, minlength=n_lev) / X
        with np.errstate(divide="ignore"):
            logp = np.concatenate([[0.0], np.cumsum(np.log(a[:-1]) - np.log(dn[1:]))])
        p = np.exp(logp - logp.max())
        p /= p.sum()
        x *= (p / X)[lv]
        # 2. symmetric Gauss-Seidel by levels
        for L in itertools.chain(range(n_lev), range(n_lev - 1, -1, -1)):
            s, e = bounds[L], bounds[L + 1]
            x[s:e] = (blocks[L] @ x) / out[s:e]
        x /= x.sum()
        r = IN @ x - out * x
        resid = float(np.abs(r).sum()) / scale
        if not np.isfinite(resid):
            status = Status.BREAKDOWN
            break
        if resid <= tol:
            # converged in norm: go on (at most as long again) until the small
            # probabilities balance too
            norm_it = it if norm_it is None else norm_it
            ok = x >= _TINY
            bal = float(np.max(np.abs(r[ok]) / (out[ok] * x[ok])))
            if bal <= tail_tol:
                status = Status.SUCCESS
                break
            if it >= 2 * norm_it:
                status = Status.SUCCESS   # re-graded to TAIL_INACCURATE below
                break
    pi = x[inv]
    residual, bal, underflow = stationary_evidence(Q, pi)
    msg = f"level aggregation + Gauss-Seidel, {it} iterations, scaled residual {resid:.1e}"
    if status is Status.SUCCESS and bal > tail_tol:
        status = Status.TAIL_INACCURATE
        msg += f"; balance error {bal:.1e} > {tail_tol:.0e}"
    return ctmc.StationaryResult(method="level-iad", backend="scipy", status=status, message=msg,
                                 iterations=it, residual=residual, wall_time=time.perf_counter() - t0,
                                 info={"levels": n_lev, "scaled_residual": resid}, pi=pi,
                                 balance_error=bal, underflow=underflow)


# ---------------------------------------------------------------------------
# the per-queue (unlumped) chain, for tiny n
# ---------------------------------------------------------------------------
def _choice_law(q, d, replacement):
    """P(queue i is joined) for each state row of ``q`` (shape (S, n)), by brute force.

    Enumerates every ordered d-sample (with replacement) or every d-subset
    (without), finds the shortest sampled length and splits the sample's
    weight uniformly over the distinct sampled queues attaining it.
    """
    S, n = q.shape
    samples = list(itertools.product(range(n), repeat=d)) if replacement \
        else list(itertools.combinations(range(n), d))
    P = np.zeros((S, n))
    w = 1.0 / len(samples)
    for smp in samples:
        idx = sorted(set(smp))
        sub = q[:, idx]
        best = sub == sub.min(axis=1, keepdims=True)
        share = w / best.sum(axis=1)
        for j, i in enumerate(idx):
            P[:, i] += np.where(best[:, j], share, 0.0)
    return P


def per_queue_model(n, d, lam, capacity, replacement=True) -> ctmc.Model:
    """The unlumped chain (one variable per queue) as a :class:`ctmc.Model`.

    ``(capacity + 1) ** n`` states: for tiny ``n`` only (it checks the
    lumping of :func:`occupancy_generator`). Arrivals are routed by brute-force
    enumeration of the samples (:func:`_choice_law`), an independent
    derivation of the occupancy rates.
    """
    n, d, lam, B, replacement = _check_model(n, d, lam, capacity, replacement)
    if B is None:
        raise ValueError("capacity: the per-queue chain needs a finite capacity >= 1")
    if (B + 1) ** n > 200_000:
        raise ValueError(f"n: the per-queue chain has (capacity+1)**n = {(B + 1) ** n} states; "
                         "keep it below 200000")
    m = ctmc.Model(f"supermarket-per-queue-n{n}")
    qs = [m.var(f"q{i}", 0, B) for i in range(n)]
    names = [f"q{i}" for i in range(n)]

    def arrival_rate(i):
        def f(env):
            q = np.column_stack([np.asarray(env[nm]) for nm in names])
            return lam * n * _choice_law(q, d, replacement)[:, i]
        return f

    for i, q in enumerate(qs):
        m.event(f"arrive{i}", guard=q < B, rate=arrival_rate(i), update={q: q + 1})
        m.event(f"serve{i}", guard=q > 0, rate=1.0, update={q: q - 1})
    return m


def lump_per_queue(chain, pi, capacity):
    """Map a per-queue stationary law onto occupancy states (rank order).

    Returns the lumped probability vector indexed like ``occupancy_states``.
    """
    q = chain.states.as_array()
    n = q.shape[1]
    M = np.stack([(q >= k).sum(axis=1) for k in range(1, capacity + 1)], axis=1)
    r = occupancy_rank(M, n)
    return np.bincount(r, weights=pi, minlength=n_occupancy_states(n, capacity))


# ---------------------------------------------------------------------------
# the exact finite-n system
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Truncation:
    """How the capacity was chosen and what it neglects.

    Attributes
    ----------
    capacity : int
        Per-queue capacity ``B`` of the chain.
    automatic : bool
        True when chosen by :class:`Supermarket` (``capacity=None``).
    tol : float
        Target for ``boundary_mass`` (automatic choice only).
    boundary_mass : float
        :math:`P(M_B \\ge 1)`: stationary probability that some queue is full
        (the states where the truncation acts).
    loss_probability : float
        Fraction of arrivals lost, :math:`E[S_B]`.
    decay : float
        Ratio :math:`P(M_B \\ge 1) / P(M_{B-1} \\ge 1)` (geometric decay of
        the maximum queue length near the boundary; nan if B = 1).
    tried : tuple
        ``(capacity, boundary_mass, n_states, seconds)`` of each chain solved.
    status : str
        ``"ok"``, ``"tolerance not met"`` (automatic choice stopped by
        ``max_states``) or ``"fixed"`` (capacity given by the user).
    """

    capacity: int
    automatic: bool
    tol: float
    boundary_mass: float
    loss_probability: float
    decay: float
    tried: tuple = ()
    status: str = "ok"


class Supermarket:
    r"""Exact power-of-d supermarket model with ``n`` queues (occupancy chain).

    Parameters
    ----------
    n : int >= 1
        Number of queues.
    d : int >= 1
        Queues sampled per arrival (``d <= n`` without replacement).
    lam : float > 0
        Arrival rate per server (total rate ``lam * n``; service rate 1).
        Must be < 1 when ``capacity`` is None.
    capacity : int >= 1, optional
        Per-queue capacity ``B``. None: the smallest ``B`` whose boundary
        mass :math:`P(M_B \ge 1)` is at most ``tol`` (see the module
        docstring and :attr:`truncation`).
    replacement : bool, default True
        Sample with replacement (the convention of the refined-mean-field
        literature) or without.
    tol : float, default 1e-8
        Boundary-mass target of the automatic capacity.
    method : str, default "auto"
        ``"level-iad"`` (:func:`level_stationary`) or any method of
        :meth:`ctmc.CTMC.stationary`; ``"auto"`` uses ctmc's ``"auto"`` (GTH or
        sparse LU) up to 2000 states and ``"level-iad"`` above (sparse LU
        fills in badly on these many-dimensional chains).
    max_states : int
        Refuse to build a larger chain (ValueError before any heavy work;
        the automatic search stops below it and reports the tolerance as not met).

    Examples
    --------
    d = 1 is a set of independent M/M/1/B queues:

    >>> s = Supermarket(3, 1, 0.5, capacity=6)
    >>> abs(s.tail()[2] - 0.5 ** 2 * (1 - 0.5 ** 5) / (1 - 0.5 ** 7)) < 1e-12
    True
    >>> s.truncation.status
    'fixed'
    """

    def __init__(self, n, d, lam, capacity=None, replacement=True, *, tol: float = 1e-8,
                 method: str = "auto", max_states: int = MAX_STATES):
        self.n, self.d, self.lam, capacity, self.replacement = _check_model(n, d, lam, capacity, replacement)
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
            raise ValueError(f"tol: expected a boundary-mass tolerance in (0, 1), got {tol!r}")
        self.tol = float(tol)
        self.max_states = _int_param("max_states", max_states, 1)
        from ctmc.stationary import METHODS
        valid = ["auto", "ctmc-auto", *_SOLVERS, *sorted(METHODS)]
        if method not in valid:
            raise ValueError(f"method: expected one of {valid}, got {method!r}")
        self.method = method
        self.level_tol = 1e-12
        if capacity is not None and n_occupancy_states(self.n, capacity) > self.max_states:
            raise ValueError(f"capacity: C(n+B, B) = {n_occupancy_states(self.n, capacity)} states "
                             f"exceed max_states={self.max_states}")
        self._capacity = capacity
        self._chain = None
        self._res = None
        self._trunc = None
        self.build_seconds = None

    def __repr__(self):
        B = self._capacity if self._capacity is not None else "auto"
        return (f"Supermarket(n={self.n}, d={self.d}, lam={self.lam}, capacity={B}, "
                f"replacement={self.replacement})")

    # building and solving -------------------------------------------------
    def _solve(self, B):
        t0 = time.perf_counter()
        M = occupancy_states(self.n, B)
        Q = occupancy_generator(self.n, self.d, self.lam, B, self.replacement, M=M)
        m = np.empty((M.shape[0], B + 1), dtype=np.int32)
        m[:, 0] = self.n - M[:, 0]
        for k in range(1, B):
            m[:, k] = M[:, k - 1] - M[:, k]
        m[:, B] = M[:, B - 1]
        del M
        chain = ctmc.CTMC(Q, {f"m{k}": m[:, k] for k in range(B + 1)})
        build = time.perf_counter() - t0
        chain.build_info = {"strategy": "occupancy ranking", "n_states": chain.n_states,
                            "n_transitions": chain.n_transitions, "seconds": build}
        method = self.method
        if method == "auto":
            method = "ctmc-auto" if chain.n_states <= _SMALL_CHAIN else "level-iad"
        res = _SOLVERS.get(method, _solve_ctmc)(self, chain, B, method)
        return chain, res, build, time.perf_counter() - t0

    def _measures(self, chain, res, B):
        pi = res.pi
        M = [np.full(chain.n_states, self.n)]
        acc = np.zeros(chain.n_states, dtype=np.int64)
        for k in range(B, 0, -1):
            acc = acc + chain.states[f"m{k}"]
            M.insert(1, acc.copy())
        EM = np.array([pi @ Mk for Mk in M], dtype=float)
        boundary = float(pi[M[B] >= 1].sum())
        reach = np.array([float(pi[M[k] >= 1].sum()) for k in range(B + 1)])
        loss = float(pi @ sample_all_at_least(M[B], self.n, self.d, self.replacement))
        return EM, boundary, reach, loss

    def _run(self):
        if self._res is not None:
            return
        if self._capacity is not None:
            chain, res, build, secs = self._solve(self._capacity)
            EM, boundary, reach, loss = self._measures(chain, res, self._capacity)
            decay = reach[-1] / reach[-2] if self._capacity >= 2 and reach[-2] > 0 else float("nan")
            self._trunc = Truncation(self._capacity, False, self.tol, boundary, loss, decay,
                                     ((self._capacity, boundary, chain.n_states, secs),), "fixed")
        else:
            chain, res, build, EM, loss, self._trunc = self._auto()
        self._chain, self._res, self.build_seconds = chain, res, build
        self._EM = EM
        self._loss = loss

    def _auto(self):
        tried = []
        B = 2
        while True:
            chain, res, build, secs = self._solve(B)
            EM, boundary, reach, loss = self._measures(chain, res, B)
            tried.append((B, boundary, chain.n_states, secs))
            decay = reach[B] / reach[B - 1] if reach[B - 1] > 0 else 0.0
            if boundary <= self.tol:
                best = (B, chain, res, build, EM, loss, boundary, decay)
                # the jump may have overshot: bisect down to the smallest capacity meeting tol
                lo = max([b for b, bm, _, _ in tried if bm > self.tol], default=B - 1)
                hi = B
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    chain, res, build, secs = self._solve(mid)
                    EM, boundary, reach, loss = self._measures(chain, res, mid)
                    tried.append((mid, boundary, chain.n_states, secs))
                    if boundary <= self.tol:
                        hi = mid
                        decay = reach[mid] / reach[mid - 1] if reach[mid - 1] > 0 else 0.0
                        best = (mid, chain, res, build, EM, loss, boundary, decay)
                    else:
                        lo = mid
                B, chain, res, build, EM, loss, boundary, decay = best
                trunc = Truncation(B, True, self.tol, boundary, loss, decay, tuple(tried), "ok")
                return chain, res, build, EM, loss, trunc
            # predict the capacity meeting tol from the geometric decay of the boundary mass:
            # across the capacities already solved when there are two, else from the decay of
            # P(M_k >= 1) inside the chain below the (blocking-inflated) boundary level
            if len(tried) >= 2 and tried[-2][1] > boundary > 0:
                r = (boundary / tried[-2][1]) ** (1.0 / (B - tried[-2][0]))
            else:
                r = reach[B - 1] / reach[B - 2] if B >= 3 and reach[B - 2] > 0 else decay
            r = min(max(r, 1e-6), 0.999)
            jump = math.ceil(math.log(self.tol / boundary) / math.log(r)) if boundary > 0 else 1
            nxt = B + max(1, jump)
            grow = max(8 * chain.n_states, 50_000)   # keep each step's cost bounded
            while nxt > B + 1 and n_occupancy_states(self.n, nxt) > min(self.max_states, grow):
                nxt -= 1
            if n_occupancy_states(self.n, nxt) > self.max_states:
                warnings.warn(f"Supermarket(n={self.n}, d={self.d}, lam={self.lam}): capacity {B} leaves a "
                              f"boundary mass {boundary:.2e} > tol={self.tol:.0e}, and capacity {B + 1} "
                              f"would need {n_occupancy_states(self.n, B + 1)} states > "
                              f"max_states={self.max_states}", TruncationWarning, stacklevel=4)
                trunc = Truncation(B, True, self.tol, boundary, loss, decay, tuple(tried),
                                   "tolerance not met")
                return chain, res, build, EM, loss, trunc
            del chain, res
            B = nxt

    # public measures ------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Per-queue capacity ``B`` of the chain (solves if chosen automatically)."""
        self._run()
        return self._trunc.capacity

    @property
    def truncation(self) -> Truncation:
        """:class:`Truncation` report: capacity, boundary mass, loss, search history."""
        self._run()
        return self._trunc

    def chain(self) -> ctmc.CTMC:
        """The occupancy chain (states ``m0 .. mB``: number of queues with k jobs)."""
        self._run()
        return self._chain

    def stationary(self) -> ctmc.StationaryResult:
        """Stationary result of :meth:`chain` (residual, balance error, timing)."""
        self._run()
        return self._res

    def tail(self) -> np.ndarray:
        """``u_k = E[M_k] / n``, k = 0..B: fraction of queues with at least k jobs."""
        self._run()
        return self._EM / self.n

    def tagged_law(self) -> np.ndarray:
        """``f_k = P(a tagged queue holds k jobs)`` = E[m_k] / n, k = 0..B."""
        u = self.tail()
        return u - np.append(u[1:], 0.0)

    def mean_jobs_per_server(self) -> float:
        """``sum_{k >= 1} u_k``: mean number of jobs per queue."""
        return float(self.tail()[1:].sum())

    def loss_probability(self) -> float:
        """Fraction of arrivals lost because their chosen queue is full (PASTA)."""
        self._run()
        return self._loss

    def throughput(self) -> float:
        """Accepted jobs per unit time and per server, ``lam * (1 - loss)``."""
        return self.lam * (1.0 - self.loss_probability())

    def mean_sojourn_time(self) -> float:
        """Mean time an accepted job spends in the system (Little's law)."""
        return self.mean_jobs_per_server() / self.throughput()


def _solve_ctmc(model, chain, B, method):
    # any method of ctmc.CTMC.stationary ("ctmc-auto" is its "auto")
    return chain.stationary("auto" if method == "ctmc-auto" else method)


def _solve_levels(model, chain, B, method):
    level = sum(k * chain.states[f"m{k}"].astype(np.int64) for k in range(1, B + 1))
    res = level_stationary(chain.Q, level, tol=model.level_tol, tail_tol=1e-8)
    return res.check(True)


#: stationary solvers of :class:`Supermarket` besides ctmc's own methods
_SOLVERS = {"level-iad": _solve_levels}
#: chains up to this size are solved by ctmc's "auto" (GTH / sparse LU), larger by "level-iad"
_SMALL_CHAIN = 2000


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


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------
def add_arguments(parser) -> None:
    """Options of ``ctmc supermarket``."""
    parser.add_argument("--n", type=int, default=10, help="number of queues (default 10)")
    parser.add_argument("--d", type=int, default=2, help="queues sampled per arrival (default 2)")
    parser.add_argument("--lam", type=float, default=0.9, help="arrival rate per server (default 0.9)")
    parser.add_argument("--capacity", type=int, default=None,
                        help="per-queue capacity B (default: automatic, boundary mass <= --tol)")
    parser.add_argument("--tol", type=float, default=1e-8, help="boundary-mass target (default 1e-8)")
    parser.add_argument("--without-replacement", action="store_true",
                        help="sample the d queues without replacement")
    parser.add_argument("--max-states", type=int, default=1_000_000,
                        help="largest occupancy chain the capacity search may build (default 1e6)")


def _fmt_table(rows, headers):
    cells = [[str(c) for c in r] for r in rows]
    w = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    out = ["  ".join(h.rjust(x) for h, x in zip(headers, w)), "  ".join("-" * x for x in w)]
    out += ["  ".join(c.rjust(x) for c, x in zip(r, w)) for r in cells]
    return "\n".join(out)


def study(n, d, lam, capacity=None, replacement=True, tol=1e-8, max_states=MAX_STATES) -> str:
    """Printable comparison of the exact system with the mean field and its refinement."""
    s = Supermarket(n, d, lam, capacity, replacement, tol=tol, max_states=max_states)
    res, tr, ch = s.stationary(), s.truncation, s.chain()
    mf = refined_mean_field(d, lam, None if capacity is None else capacity, replacement) \
        if (capacity is not None or lam < 1) else None
    how = f"automatic, tol {tr.tol:.0e}" if tr.automatic else "given"
    lines = [f"supermarket n={n} d={d} lam={lam} ({'with' if replacement else 'without'} replacement)",
             f"truncation status: {tr.status}",
             f"capacity B={tr.capacity} ({how}): {ch.n_states} occupancy states, "
             f"{ch.n_transitions} transitions, build "
             f"{s.build_seconds:.2f} s; stationary {res.method} {res.wall_time:.2f} s, residual "
             f"{res.residual:.1e}, balance error {res.balance_error:.1e}",
             f"boundary mass P(some queue full) = {tr.boundary_mass:.3e}, loss probability = "
             f"{tr.loss_probability:.3e}, decay of P(max >= k) at the boundary = {tr.decay:.3g}"]
    if len(tr.tried) > 1:
        lines.append("capacity search: " + ", ".join(f"B={b}: {bm:.1e} ({ns} states, {sec:.1f} s)"
                                                      for b, bm, ns, sec in tr.tried))
    u1 = s.tail()[1]
    lines.append(f"check u_1 = lam (1 - loss): {u1:.12f} vs {s.throughput():.12f}")
    f = s.tagged_law()
    rows = []
    fm = mf.tagged_law() if mf else None
    fr = mf.tagged_law(n) if mf else None
    for k in range(f.size):
        rows.append([k, f"{f[k]:.6e}", f"{fm[k]:.6e}" if mf is not None and k < fm.size else "-",
                     f"{fr[k]:.6e}" if mf is not None and k < fr.size else "-"])
    lines.append(_fmt_table(rows, ["k", "exact f_k", "mean field", "refined (1/n)"]))
    mj = s.mean_jobs_per_server()
    if mf is not None:
        lines.append(f"mean jobs per server: exact {mj:.6f}, mean field {mf.mean_jobs_per_server():.6f}, "
                     f"refined {mf.mean_jobs_per_server(n):.6f}")
    else:
        lines.append(f"mean jobs per server: exact {mj:.6f}")
    lines.append(f"mean sojourn time: {s.mean_sojourn_time():.6f}")
    return "\n".join(lines)


def run(args) -> str:
    """``ctmc supermarket``: one exact system against its mean-field approximations."""
    return study(args.n, args.d, args.lam, args.capacity, not args.without_replacement, args.tol,
                 args.max_states)


def report(plots_dir=None) -> str:
    """Study for ``ctmc report``: exact vs mean field vs refined at lambda = 0.9, d = 2."""
    rmf = refined_mean_field(2, 0.9)
    rows, ns, err_mf, err_rmf = [], [], [], []
    for n in (2, 3, 4, 5):   # heavier systems: examples/supermarket_meanfield.py --full
        s = Supermarket(n, 2, 0.9, tol=1e-6)
        e = s.mean_jobs_per_server()
        a, b = rmf.mean_jobs_per_server(), rmf.mean_jobs_per_server(n)
        ns.append(n)
        err_mf.append(abs(e - a))
        err_rmf.append(abs(e - b))
        rows.append([n, s.capacity, s.chain().n_states, f"{e:.6f}", f"{a:.6f}", f"{b:.6f}",
                     f"{abs(e - a):.2e}", f"{abs(e - b):.2e}", f"{s.truncation.boundary_mass:.1e}"])
    out = ["supermarket d=2, lam=0.9 (with replacement): mean jobs per server "
           "(capacity: boundary mass <= 1e-6)",
           _fmt_table(rows, ["n", "B", "states", "exact", "mean field", "refined", "|err MF|",
                             "|err refined|", "boundary mass"])]
    if plots_dir:
        out.append(_plot_errors(ns, err_mf, err_rmf, plots_dir))
    return "\n".join(out)


def _plot_errors(ns, err_mf, err_rmf, plots_dir, name="supermarket_error.png") -> str:
    import os

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(plots_dir, exist_ok=True)
    ns = np.asarray(ns, dtype=float)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.loglog(ns, err_mf, "o-", label="|exact - mean field|")
    ax.loglog(ns, err_rmf, "s-", label="|exact - refined|")
    ax.loglog(ns, err_mf[-1] * ns[-1] / ns, "k--", lw=0.8, label="slope -1")
    ax.loglog(ns, err_rmf[-1] * ns[-1] ** 2 / ns ** 2, "k:", lw=0.8, label="slope -2")
    ax.set_xlabel("n (queues)")
    ax.set_ylabel("error of the mean jobs per server")
    ax.set_title("supermarket, d = 2, lambda = 0.9")
    ax.legend()
    fig.tight_layout()
    path = os.path.join(plots_dir, name)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"plot written to {path}"
