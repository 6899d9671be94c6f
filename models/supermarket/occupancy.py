r"""Occupancy chain of the supermarket model: states, ranking, generator, sampling.

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
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

__all__ = ["n_occupancy_states", "occupancy_states", "occupancy_rank", "occupancy_generator",
           "occupancy_model", "join_probabilities", "sample_all_at_least"]


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
# the same chain declared as a ctmc.Model (any backend, distributed build)
# ---------------------------------------------------------------------------
def _check_caps(n, B, caps):
    """``caps`` as a tuple ``(c_1, ..., c_B)``: non-increasing integers in [1, n] (None: all n)."""
    if caps is None:
        return (n,) * B
    try:
        caps = tuple(caps)
    except TypeError:
        raise ValueError(f"caps: expected a sequence of {B} integers, got {caps!r}") from None
    if len(caps) != B or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) for c in caps):
        raise ValueError(f"caps: expected {B} integers (one per level 1..B), got {caps!r}")
    caps = tuple(int(c) for c in caps)
    if any(not 1 <= c <= n for c in caps) or any(a < b for a, b in zip(caps, caps[1:])):
        raise ValueError(f"caps: expected non-increasing integers in [1, n={n}], got {caps}")
    return caps


def occupancy_model(n, d, lam, B, replacement=True, caps=None):
    r"""The occupancy chain declared as a :class:`ctmc.Model` over the tail counts ``M1..MB``.

    The same generator as :func:`occupancy_generator` (state by state, once
    the states are matched by :func:`occupancy_rank`), declared with
    expressions only, so that :meth:`ctmc.Model.build` explores it in compiled
    code and :meth:`ctmc.backends.petsc_backend.DistributedChain.from_model`
    assembles it over MPI processes without any process holding the whole
    generator.

    Parameters
    ----------
    n, d, lam, B, replacement
        As for :func:`occupancy_generator` (``B`` the per-queue capacity).
    caps : sequence of int, optional
        Occupancy caps ``(c_1, ..., c_B)``, non-increasing in ``[1, n]``: at
        most ``c_k`` queues may hold ``k`` jobs or more (:math:`M_k \le c_k`);
        an arrival that would break a cap is lost, as one that finds its
        queue full. Default ``c_k = n`` (only the capacity truncates). Small
        caps on the deep levels keep the state count near the mass: at
        ``n = 20`` most of the :math:`\binom{n + B}{B}` states have many
        queues at improbable lengths.

    Returns
    -------
    ctmc.Model
        Variables ``M1..MB``; build it from ``initial={"M1": 0, ...}`` (empty
        queues). Labels ``"truncated"`` (some cap or the capacity blocks an
        arrival: :math:`M_k = c_k < M_{k-1}` for some ``k``, or
        :math:`M_B \ge 1`); rewards ``m0..mB`` (queues holding exactly ``k``
        jobs).

    Examples
    --------
    >>> m = occupancy_model(4, 2, 0.9, 3)
    >>> chain = m.build(initial={"M1": 0, "M2": 0, "M3": 0})
    >>> chain.n_states == n_occupancy_states(4, 3)
    True
    >>> occupancy_model(20, 2, 0.9, 4, caps=(20, 20, 6, 2)).build(
    ...     initial={f"M{k}": 0 for k in range(1, 5)}).n_states
    2961
    """
    import ctmc
    n, d, B = int(n), int(d), int(B)
    caps = _check_caps(n, B, caps)
    lam = float(lam)
    m = ctmc.Model(f"supermarket-occupancy(n={n}, d={d}, lam={lam:g}, B={B}"
                   + ("" if caps == (n,) * B else f", caps={caps}") + ")")
    M = [None] + [m.var(f"M{k}", 0, caps[k - 1]) for k in range(1, B + 1)]

    def tail(k):
        return n if k == 0 else (0 if k > B else M[k])

    def S(k):
        # probability that all d sampled queues hold >= k jobs (as sample_all_at_least)
        t = tail(k)
        if isinstance(t, int):
            return float(sample_all_at_least(t, n, d, replacement))
        if replacement:
            return t ** d / float(n) ** d   # integer power: the compiled engine takes it
        out = t / n
        for j in range(1, d):
            out = out * ((t - j) / (n - j))   # a zero factor once t < d: no clipping needed
        return out

    blocked = None
    for k in range(1, B + 1):
        room = (M[k] < n) if k == 1 else (M[k] < M[k - 1])
        m.event(f"arrival{k}", guard=room & (M[k] < caps[k - 1]), rate=lam * n * (S(k - 1) - S(k)),
                update={M[k]: M[k] + 1})
        m.event(f"departure{k}", guard=(M[k] > tail(k + 1)), rate=M[k] - tail(k + 1),
                update={M[k]: M[k] - 1})
        if caps[k - 1] < n:
            cut = room & (M[k] >= caps[k - 1])
            blocked = cut if blocked is None else (blocked | cut)
    full = M[B] >= 1
    m.label("truncated", full if blocked is None else (blocked | full))
    m.reward("m0", n - M[1])
    for k in range(1, B + 1):
        m.reward(f"m{k}", M[k] - tail(k + 1))
    return m
