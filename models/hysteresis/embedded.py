r"""Route (b) of :class:`~models.hysteresis.queue.HysteresisQueue`: the chain embedded at departure epochs.

For any service law, the chain :math:`(s, n^+)` embedded at departure
epochs. During a service the process moves only up (arrivals, and for the
instant policy upward mode switches) with generator :math:`A`; by
uniformisation at rate :math:`\Lambda = \max(\lambda_0, \lambda_1)`,
:math:`P = I + A/\Lambda`,

.. math::

    \int_0^\infty e^{At} dG(t) = \sum_k a_k P^k, \qquad
    \int_0^\infty e^{At} (1 - G(t))\, dt = \sum_k b_k P^k

with the Poisson mixing coefficients :math:`a_k, b_k` of :math:`G`. The
first gives the transitions (then one departure, and the policy's
decision), the second the expected time spent in each :math:`(s, n)`
during a service. For phase-type service both integrals are computed
exactly instead, by a block back-substitution over the levels (see
:func:`ph_service_matrices`); for deterministic service
the series runs until its tail is below 1e-300. All terms being
non-negative, and the embedded chain being solved by GTH, probabilities
far below 1e-16 then keep their relative accuracy. For a general law
given by a CDF the :math:`b_k` come from quadrature and the accuracy is
absolute only (about 1e-13; :attr:`~models.hysteresis.law.HysteresisLaw.message` says so).

Only the states reachable from the empty system are kept, in level order
(:math:`K` of them). Arrivals only raise the level during a service and a
departure lowers it by one, so the embedded matrix :math:`P^d` is upper
Hessenberg by levels: :math:`P^d_{xy} = 0` when
:math:`\text{level}(y) < \text{level}(x) - 1`. GTH eliminating the states from
the top (:func:`gth_hessenberg`) then updates, for each pivot, only the
columns of its own level and the level below: the censored chain keeps the
Hessenberg shape, the cost is :math:`O(K^2)` instead of :math:`O(K^3)`, and
the arithmetic stays subtraction-free (pivots are sums of the remaining row,
never :math:`1 - P_{kk}`), so probabilities far below 1e-16, and laws that
grow by more than 1e308 up the levels, keep their relative accuracy. The
route holds one dense :math:`K \times K` matrix: the rows "end of the next
service" are formed, their columns merged in place by the departure map
(every column moves one level down), and the occupation matrix is never
formed: only its product with the departure law is needed, which a forward
pass gives (:func:`ph_weighted_rows`, :func:`mixed_weighted_rows`).
:func:`check_size` refuses, with a ``ValueError`` naming ``capacity``, a
queue whose matrix would exceed :data:`MEMORY_BUDGET`, before any heavy work.
:func:`dense_departure_law` is the plain :math:`O(N^3)` construction on all
:math:`3(r+1)` states, kept as the reference for tests and benchmarks.

By the Markov-renewal argument the time-stationary law is

.. math::

    p(y) = \frac{\sum_x \pi^d(x)\, E_x[\text{time in } y \text{ before the next departure}]}
                {\sum_x \pi^d(x)\, E_x[\text{time to the next departure}]},

where from :math:`n^+ = 0` the interval holds an idle period of mean
:math:`1/(\lambda_0 P(\text{batch admitted}))` followed by a service. It
supports both policies and both acceptance rules. Mean periods come from
renewal-reward: the overload and discard periods end only at departures,
so :math:`E[\text{period}] = P(\text{set}) / \nu`, with :math:`\nu`
the rate of departures that take the mode out of the set. State-wise
return times, their distribution (:meth:`~models.hysteresis.queue.HysteresisQueue.return_times`,
:meth:`~models.hysteresis.queue.HysteresisQueue.return_time_cdf`) and the CTMC itself are route (a)
only; for deterministic service use
:func:`~models.hysteresis.service.erlang` with many phases there.

Mode changes follow the single decision rule
:func:`models.hysteresis.law.decide`, applied here to arrays (the CTMC
route applies it to :mod:`ctmc.expr` expressions).

Every function takes the :class:`~models.hysteresis.queue.HysteresisQueue`
``q`` (or only its service law).
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

import ctmc
from ctmc.linalg import TripletLU

from .law import HysteresisLaw, decide
from .service import Deterministic

__all__ = ["service_period", "ph_service_matrices", "mixed_service_matrices", "ph_weighted_rows",
           "mixed_weighted_rows", "gth_hessenberg", "check_size", "stationary_law",
           "dense_departure_law", "switch_rates", "mean_stay", "MEMORY_BUDGET"]


# ---------------------------------------------------------------------------
# one service period: the matrices of the embedded chain
# ---------------------------------------------------------------------------
def service_period(q):
    """Generator ``A`` of the level/mode process during one service, on index s*(r+1)+n."""
    r = q.capacity
    N = 3 * (r + 1)
    s = np.repeat(np.arange(3), r + 1)
    n = np.tile(np.arange(r + 1), 3)
    lam_s = q.rates[s]
    rows, cols, vals = [], [], []
    for k, gk in enumerate(q.batch_pmf(), start=1):
        if gk == 0:
            continue
        n_new, ok = q.acceptance.admit(n, k, r)
        s_new = decide(np.where, s, n_new, q.L, q.H, q.R) if q.policy.on_arrival else s
        dst = s_new * (r + 1) + n_new
        sel = ok & (lam_s > 0) & (n >= 1) & (dst != np.arange(N))
        rows.append(np.flatnonzero(sel))
        cols.append(dst[sel])
        vals.append(lam_s[sel] * gk)
    R = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(N, N))
    A = R - sp.diags(np.asarray(R.sum(axis=1)).ravel())
    return A.tocsr(), s, n

def ph_service_matrices(ph, A, level, occupation=True):
    r"""Exact :math:`\int e^{At} dG(t)` and :math:`\int e^{At}(1 - G(t)) dt` for PH service.

    With :math:`W_x = \int_0^\infty e^{St}c \otimes e_x e^{At}\,dt`
    (:math:`c = s_0` or :math:`\mathbf 1`), the backward equation gives
    :math:`(d_x I - S) W_x = c\, e_x^T + \sum_{y \ne x} A_{xy} W_y`
    (:math:`d_x = -A_{xx}`), and the matrices have rows :math:`\alpha W_x`.
    Every arrival raises the level, so the :math:`W_x` follow from the top
    level down; :math:`(d_x I - S)^{-1} \ge 0` is formed without
    subtractions (:class:`ctmc.linalg.TripletLU`) and every other step adds
    non-negative terms, so even the smallest entries keep their relative
    accuracy (a truncated Poisson series gives them only to about 1e-15
    absolute). Columns are done in blocks to bound the memory; a block of
    columns is reached only from its own and lower levels, so the states
    above it are skipped. With ``occupation=False`` only the first matrix
    is formed (the second is returned as None).
    """
    m, N = ph.n_phases, A.shape[0]
    A = A.tocsr()
    diag = -A.diagonal()
    c = (np.stack([ph.exit_rates, np.ones(m)], axis=1) if occupation
         else ph.exit_rates[:, None])                            # (m, nc)
    nc = c.shape[1]
    order = np.argsort(-level, kind="stable")                    # top level first
    Ma = np.empty((N, N))
    Mb = np.empty((N, N)) if occupation else None
    width = max(1, min(N, int(2.5e7 // (N * m * nc))))          # about 200 MB of W
    for c0 in range(0, N, width):
        cols = np.arange(c0, min(N, c0 + width))
        top = level[cols].max()
        W = np.zeros((N, m, nc, cols.size))
        for x in order[level[order] <= top]:
            lo, hi = A.indptr[x], A.indptr[x + 1]
            nb, rates = A.indices[lo:hi], A.data[lo:hi]
            off = nb != x
            rhs = (np.tensordot(rates[off], W[nb[off]], axes=1) if off.any()
                   else np.zeros((m, nc, cols.size)))
            if c0 <= x < c0 + cols.size:
                rhs[:, :, x - c0] += c
            W[x] = np.tensordot(_ph_inverse(ph, float(diag[x])), rhs, axes=1)
        out = np.tensordot(ph.alpha, W, axes=([0], [1]))         # (N, nc, cols)
        Ma[:, cols] = out[:, 0]
        if occupation:
            Mb[:, cols] = out[:, 1]
    return Ma, Mb


def _ph_inverse(ph, d, _cache={}):
    """(d I - S)^{-1} >= 0: the M-matrix with off-diagonal rates S and row sums s_0 + d,
    inverted column by column without subtractions (cached per law and d)."""
    key = (id(ph), d)
    if key not in _cache:
        if len(_cache) > 4096:
            _cache.clear()
        _cache[key] = (ph, TripletLU(ph.S, ph.exit_rates + d).solve(np.eye(ph.n_phases)))
    return _cache[key][1]


def ph_weighted_rows(ph, A, w):
    r"""``(w Ma, w Mb)`` for PH service without the matrices: the forward equation.

    :math:`z_y = \int_0^\infty (w\,e^{At})_y\, \alpha e^{St} dt` solves
    :math:`z_y (d_y I - S) = w_y \alpha + \sum_{x \ne y} z_x A_{xy}`; arrivals
    only raise the level, so the :math:`z_y` follow from the bottom level up,
    with non-negative terms only. Then :math:`(w M_a)_y = z_y s_0` and
    :math:`(w M_b)_y = z_y \mathbf 1`. ``A``'s states must be in level order.
    """
    N = A.shape[0]
    AT = A.T.tocsr()
    diag = -A.diagonal()
    z = np.zeros((N, ph.n_phases))
    for y in range(N):
        lo, hi = AT.indptr[y], AT.indptr[y + 1]
        nb, rates = AT.indices[lo:hi], AT.data[lo:hi]
        off = nb != y
        rhs = w[y] * ph.alpha + rates[off] @ z[nb[off]]
        z[y] = rhs @ _ph_inverse(ph, float(diag[y]))
    return z @ ph.exit_rates, z.sum(axis=1)


def _window(level, reach_levels):
    """Index just past the states of level <= ``reach_levels`` (states in level order)."""
    return int(np.searchsorted(level, reach_levels, side="right"))


def mixed_service_matrices(service, A, Lam, level=None, occupation=True, block=512):
    """The same matrices by uniformisation and the service law's Poisson mixing series.

    Rows are formed in blocks (memory: the result plus ``block`` rows per term).
    With ``level`` (states in level order), a row of :math:`P^k` from level
    :math:`\\ell` reaches at most level :math:`\\ell + k b` (:math:`b` the
    largest level step of ``A``), so each term works on that window only.
    With ``occupation=False`` only the first matrix is formed.
    """
    N = A.shape[0]
    P = (sp.identity(N, format="csr") + A / Lam).tocsr()
    PT = P.T.tocsr()
    mix = service.mixing(Lam)
    Ma = np.zeros((N, N))
    Mb = np.zeros((N, N)) if occupation else None
    if level is None:
        level = np.zeros(N, dtype=int)
        step = 0
    else:
        Ac = A.tocoo()
        step = int((level[Ac.col] - level[Ac.row]).max(initial=0))
    big = level.max() + 1 if step > 0 else None
    for r0 in range(0, N, block):
        rows = np.arange(r0, min(N, r0 + block))
        lo = r0
        XT = np.zeros((N - lo, rows.size))                      # (P^T)^k[lo:, rows]
        XT[rows - lo, np.arange(rows.size)] = 1.0
        hi = N if big is None else _window(level, level[rows[-1]])
        for ak, bk in zip(mix.a, mix.b):
            Ma[r0:r0 + rows.size, lo:hi] += ak * XT[:hi - lo].T
            if occupation:
                Mb[r0:r0 + rows.size, lo:hi] += bk * XT[:hi - lo].T
            nhi = N if big is None else _window(level, min(level[hi - 1] + step, big))
            XT[:nhi - lo] = PT[lo:nhi, lo:hi] @ XT[:hi - lo]
            hi = nhi
    return Ma, Mb, mix


def mixed_weighted_rows(service, A, Lam, w):
    """``(w Ma, w Mb)`` by the mixing series applied to the vector ``w``."""
    N = A.shape[0]
    P = (sp.identity(N, format="csr") + A / Lam).tocsr()
    mix = service.mixing(Lam)
    ea, eb, v = np.zeros(N), np.zeros(N), np.asarray(w, dtype=float).copy()
    for ak, bk in zip(mix.a, mix.b):
        ea += ak * v
        eb += bk * v
        v = P.T @ v
    return ea, eb, mix

# ---------------------------------------------------------------------------
# the embedded chain and the time-stationary law (Markov renewal)
# ---------------------------------------------------------------------------
MEMORY_BUDGET = 5.0e9
"""Bytes the embedded route may hold: one dense matrix on the reachable
states and the working blocks; :func:`check_size` refuses larger queues
before any heavy work."""


def _structure(q):
    """The service-period generator, the departure map and the busy-period starts,
    restricted to the states reachable from the empty system, in level-major order.

    Returns ``(A, s, n, idx, dep, start, idle_rate)`` on the kept states: ``idx`` their
    index ``s*(r+1)+n`` in the full space, ``dep`` the (kept) index of the state a
    departure leaves, ``start[sm]`` the law of the first state of a busy period begun in
    mode ``sm`` (dense over the kept states), ``idle_rate[sm]`` the rate of admitted batches.
    """
    r = q.capacity
    N = 3 * (r + 1)
    A, s, n = service_period(q)
    m_ = np.maximum(n - 1, 0)
    s_dep = decide(np.where, s, m_, q.L, q.H, q.R)
    dep = np.where(n >= 1, s_dep * (r + 1) + m_, np.arange(N))
    start = np.zeros((3, N))
    idle_rate = np.zeros(3)
    for k, gk in enumerate(q.batch_pmf(), start=1):
        n_new, ok = q.acceptance.admit(0, k, r)
        if not ok or gk == 0:
            continue
        for sm in range(3):
            s_new = (int(decide(np.where, sm, n_new, q.L, q.H, q.R))
                     if q.policy.on_arrival else sm)
            start[sm, s_new * (r + 1) + n_new] += gk
    for sm in range(3):
        acc = start[sm].sum()
        idle_rate[sm] = q.rates[sm] * acc
        if acc > 0:
            start[sm] /= acc
    # the graph of the whole process: arrivals in service, departures, busy-period starts
    off = A.copy()
    off.setdiag(0)
    off.eliminate_zeros()
    busy = np.flatnonzero(n >= 1)
    s0 = np.flatnonzero(n == 0)
    st_r, st_c = np.nonzero(start[s[s0]])
    G = (off + sp.csr_matrix((np.ones(busy.size), (busy, dep[busy])), shape=(N, N))
         + sp.csr_matrix((np.ones(st_r.size), (s0[st_r], st_c)), shape=(N, N)))
    keep = breadth_first_order(G.tocsr(), 0, directed=True, return_predecessors=False)
    idx = keep[np.lexsort((s[keep], n[keep]))]                # level-major
    pos = np.full(N, -1)
    pos[idx] = np.arange(idx.size)
    return (A[idx][:, idx].tocsr(), s[idx], n[idx], idx, pos[dep[idx]],
            start[:, idx], idle_rate, s_dep[idx])


def _memory_need(K):
    """Bytes of the dense embedded chain on ``K`` states plus the working blocks."""
    return 8.0 * K * K + 1.0e9


def check_size(q, K=None):
    """Raise ``ValueError`` (naming ``capacity``) when the dense embedded chain on the
    reachable states would exceed :data:`MEMORY_BUDGET`; return the number of kept states."""
    if K is None:
        K = _structure(q)[0].shape[0]
    need = _memory_need(K)
    if need > MEMORY_BUDGET:
        top = int(np.sqrt((MEMORY_BUDGET - 1.0e9) / 8.0))
        raise ValueError(
            f"capacity: route 'embedded' holds one dense matrix on the {K} states reachable "
            f"from the empty system (about {need / 1e9:.1f} GB > MEMORY_BUDGET = "
            f"{MEMORY_BUDGET / 1e9:.1f} GB); it allows at most {top} such states (capacity up "
            f"to about {top // 3} when the three modes reach every level, {top // 2} with "
            f"two); got capacity={q.capacity}. Use route='ctmc' for phase-type service")
    return K


def _reach_dense(P, root=0, chunk=256):
    """Sorted states reachable from ``root`` along the positive entries of dense ``P``
    (breadth first, each row read once: O(K^2) time, O(K) extra memory)."""
    seen = np.zeros(P.shape[0], dtype=bool)
    seen[root] = True
    frontier = np.array([root])
    while frontier.size:
        hit = np.zeros(P.shape[0], dtype=bool)
        for c0 in range(0, frontier.size, chunk):
            hit |= (P[frontier[c0:c0 + chunk]] > 0).any(axis=0)
        frontier = np.flatnonzero(hit & ~seen)
        seen[frontier] = True
    return np.flatnonzero(seen)


def gth_hessenberg(P, level):
    r"""Stationary law of a stochastic matrix that is upper Hessenberg by levels, by GTH.

    ``P`` (dense, overwritten) has its states in non-decreasing ``level`` and
    :math:`P_{ij} = 0` when ``level[j] < level[i] - 1`` (down by at most one
    level per step). The states are eliminated from the last one (GTH: the
    pivot is the sum of the pivot row's remaining entries, never
    :math:`1 - P_{kk}`). The pivot row reaches only its own and the level
    below, so every update is a rank-one change of the columns of those two
    levels, the band keeps its shape, and the cost is :math:`O(N^2 w)`
    (:math:`w` the width of two levels) instead of :math:`O(N^3)`. Only
    additions of non-negative terms, products and divisions occur: small
    probabilities keep their relative accuracy.

    Returns ``(pi, ok)``; ``ok`` is False when a pivot vanishes (the chain is
    not irreducible on these states).
    """
    N = P.shape[0]
    level = np.asarray(level)
    lo = np.searchsorted(level, level - 1, side="left")
    piv = np.empty(N)
    ok = True
    for k in range(N - 1, 0, -1):
        a = lo[k]
        row = P[k, a:k]
        sk = row.sum()
        piv[k] = sk
        if not sk > 0:
            ok = False
            break
        col = P[:k, k]
        nz = np.flatnonzero(col)
        if nz.size:
            P[nz[:, None], np.arange(a, k)[None, :]] += np.outer(col[nz] / sk, row)
    pi = np.zeros(N)
    if not ok:
        return pi, False
    pi[0] = 1.0
    for k in range(1, N):
        pi[k] = (pi[:k] @ P[:k, k]) / piv[k]
        if pi[k] > 1e250:            # the law grows up the levels: rescale, never overflow
            pi[:k + 1] /= pi[k]
    return pi / pi.sum(), True


def stationary_law(q) -> HysteresisLaw:
    t0 = time.perf_counter()
    r = q.capacity
    N = 3 * (r + 1)
    A, s, n, idx, dep, start, idle_rate, s_dep = _structure(q)
    K = check_size(q, idx.size)
    Lam = float(max(q.lam, q.lam_overload))
    # rows "end of the service begun in x": one dense matrix, level-upper-triangular
    if q.is_phase_type:
        Ma, _ = ph_service_matrices(q.service, A, n, occupation=False)
    else:
        Ma, _, mix = mixed_service_matrices(q.service, A, Lam, level=n, occupation=False)
    # from (s, 0) a busy period starts with the first admitted batch
    idle = np.flatnonzero(n == 0)
    for i0 in idle:
        Ma[i0] = start[s[i0]] @ Ma
    leak = np.abs(Ma.sum(axis=1) - 1)
    # then the departure (s, m) -> (decide(s, m - 1), m - 1): merge the columns in
    # place; dep[j] lies one level below j, so the columns still to be read are intact
    targets = np.zeros(K, dtype=bool)
    busy_idx = np.flatnonzero(n >= 1)
    order = np.argsort(dep[busy_idx], kind="stable")
    by_target = np.split(busy_idx[order], np.flatnonzero(np.diff(dep[busy_idx][order])) + 1)
    for group in by_target:
        c = dep[group[0]]
        Ma[:, c] = Ma[:, group].sum(axis=1) if group.size > 1 else Ma[:, group[0]]
        targets[c] = True
    Ma[:, ~targets] = 0.0
    Pd = Ma
    del Ma
    # embedded states reachable from the empty system, compacted in place (level order kept)
    reach = _reach_dense(Pd)
    Kr = reach.size
    if Kr < K:
        for i, ri in enumerate(reach):
            Pd[i, :Kr] = Pd[ri, reach]
    # upper Hessenberg by levels: GTH from the top level, O(K^2), subtraction-free
    pid, ok = gth_hessenberg(Pd[:Kr, :Kr], n[reach])
    del Pd
    # one service from the departure law: its end (-> residual, switches) and occupation
    w = np.zeros(K)
    w[reach] = pid
    for i0 in idle:
        if w[i0] > 0:
            w += w[i0] * start[s[i0]] * (np.arange(K) != i0)
            w[i0] *= start[s[i0], i0]
    if q.is_phase_type:
        end, occ = ph_weighted_rows(q.service, A, w)
        mix = None
    else:
        end, occ, mix = mixed_weighted_rows(q.service, A, Lam, w)
    for e, pe in zip(reach, pid):
        if n[e] == 0:
            occ[e] += pe / idle_rate[s[e]]
    step = np.zeros(K)
    np.add.at(step, dep[busy_idx], end[busy_idx])
    res = float(np.abs(step[reach] - pid).sum() + np.delete(step, reach).sum())
    dep_rate = 1.0 / occ.sum()  # departures per unit time (Markov-renewal)
    # mode changes decided at departures: rate of (mode at the end of a
    # service) -> (mode after the decision), per pair of modes
    at_dep = np.zeros((3, 3))
    busy = n >= 1
    np.add.at(at_dep, (s[busy], s_dep[busy]), end[busy])
    at_dep *= dep_rate
    full = np.zeros(N)
    full[idx] = occ / occ.sum()
    p = full.reshape(3, r + 1)
    o_full = np.argsort(idx[reach])        # the departure law in the order s*(r+1)+n
    emb_status = ctmc.Status.SUCCESS if ok else ctmc.Status.BREAKDOWN
    if mix is None:
        status = emb_status
        message = "phase-type service: exact service matrices (relative accuracy)"
        terms, tail = 0, 0.0
    else:
        status = emb_status if mix.status.ok else mix.status
        terms, tail = mix.a.size, mix.tail
        if isinstance(q.service, Deterministic):
            message = f"deterministic service: Poisson mixing to tail {tail:.1e} (relative accuracy)"
        else:
            message = (f"general service by quadrature: accuracy is absolute only (about "
                       f"{max(tail, 1e-13):.0e}); probabilities below that are not resolved")
    if not ok:
        message += "; the embedded chain is not irreducible on the reachable states"
    return HysteresisLaw(p=p, route="embedded", status=status, residual=res,
                         wall_time=time.perf_counter() - t0,
                         info={"n_embedded": Kr, "mixing_terms": terms,
                               "mixing_tail": tail, "embedded_method": "gth-hessenberg",
                               "departure_law": (idx[reach][o_full], pid[o_full]), "departure_rate": dep_rate,
                               "switches_at_departures": at_dep,
                               "leak": float(leak[reach].max()),
                               "accuracy": "absolute" if mix is not None and not isinstance(
                                   q.service, Deterministic) else "relative"},
                         message=message)


def dense_departure_law(q):
    """Reference: the departure law by dense GTH on all :math:`3(r+1)` states, :math:`O(N^3)`.

    The plain construction (every state, the full service matrix, the
    departure map as a matrix product, :meth:`ctmc.CTMC.stationary` with
    ``method="gth"``); :func:`stationary_law` must give the same law. For
    tests and benchmarks only (small capacities).

    Returns ``(states, pi)``: indices ``s*(r+1)+n`` and their probabilities.
    """
    r = q.capacity
    N = 3 * (r + 1)
    A, s, n = service_period(q)
    if q.is_phase_type:
        Ma, _ = ph_service_matrices(q.service, A, n, occupation=False)
    else:
        Ma, _, _ = mixed_service_matrices(q.service, A, float(max(q.lam, q.lam_overload)),
                                          occupation=False)
    m_ = np.maximum(n - 1, 0)
    dep = np.where(n >= 1, decide(np.where, s, m_, q.L, q.H, q.R) * (r + 1) + m_, np.arange(N))
    Dm = sp.csr_matrix((np.ones(N), (np.arange(N), dep)), shape=(N, N))
    for sm in range(3):
        start = np.zeros(N)
        for k, gk in enumerate(q.batch_pmf(), start=1):
            n_new, ok = q.acceptance.admit(0, k, r)
            if ok and gk > 0:
                s_new = (int(decide(np.where, sm, n_new, q.L, q.H, q.R))
                         if q.policy.on_arrival else sm)
                start[s_new * (r + 1) + n_new] += gk
        if start.sum() > 0:
            Ma[sm * (r + 1)] = (start / start.sum()) @ Ma
    Pd = np.asarray((Dm.T @ Ma.T).T)
    reach = np.sort(breadth_first_order(sp.csr_matrix(Pd > 0), 0, directed=True,
                                        return_predecessors=False))
    return reach, ctmc.CTMC.from_rates(Pd[np.ix_(reach, reach)]).stationary(method="gth").pi


# ---------------------------------------------------------------------------
# passage-time measures: renewal-reward
# ---------------------------------------------------------------------------
# E[period in a set] = P(set) / (rate of exits from the set); exits from the
# overload and discard sets happen only at departures, whose rates the
# embedded chain gives.
def switch_rates(q) -> np.ndarray:
    """Stationary rates of mode changes ``[a, b]``: changes at departures from the embedded
    chain, plus (instant policy) the upward changes at arrivals from the time-stationary law."""
    law = q.stationary("embedded")
    out = law.info["switches_at_departures"].copy()
    np.fill_diagonal(out, 0.0)
    if q.policy.on_arrival:
        r = q.capacity
        lev = np.arange(law.p.shape[1])         # the stored (reachable) levels
        for k, gk in enumerate(q.batch_pmf(), start=1):
            n_new, ok = q.acceptance.admit(lev, k, r)
            for a in range(3):
                b = decide(np.where, a, n_new, q.L, q.H, q.R)
                hit = ok & (b != a)
                np.add.at(out[a], b[hit], law.p[a, hit] * q.rates[a] * gk)
    return out


def mean_stay(q, modes) -> float:
    """``P(modes) / (rate of leaving modes)`` from :meth:`HysteresisQueue.switch_rates
    <models.hysteresis.queue.HysteresisQueue.switch_rates>`."""
    S = q.switch_rates("embedded")
    inside = np.zeros(3, dtype=bool)
    inside[modes] = True
    rate = S[np.ix_(inside, ~inside)].sum()
    pm = q.mode_probabilities("embedded")[inside].sum()
    return float(pm / rate) if rate > 0 else float("nan")
