r"""Route (a) of :class:`~models.hysteresis.queue.HysteresisQueue`: the exact CTMC on (mode, n, phase).

For phase-type service :math:`PH(\alpha, S)` the process
:math:`(s, n, j)` (:math:`j` the service phase) is a CTMC. :func:`build_model`
writes it as a :class:`ctmc.Model`; :func:`assemble` builds the same generator
(to the bit, states in the same order) by levels with numpy, which is what
:meth:`HysteresisQueue.chain` uses. Its stationary law comes from the
subtraction-free elimination over the levels of :mod:`models.hysteresis.levels`
(default, backend "scipy") or from :meth:`ctmc.CTMC.stationary` (any method,
and the PETSc backend). Mean stays in a set of modes follow from the
stationary law by renewal-reward; state-wise return times and their law come
from :meth:`ctmc.CTMC.hitting_times` and :meth:`ctmc.CTMC.first_passage`.

Mode changes follow the single decision rule
:func:`models.hysteresis.law.decide`, written here on :mod:`ctmc.expr`
expressions (the embedded route applies it to arrays). Passage times start
from the stationary entrance law into a set of modes: the stationary flow
across its boundary.

Every function takes the :class:`~models.hysteresis.queue.HysteresisQueue`
``q`` (its parameters, and its cached chain and stationary law).
"""
from __future__ import annotations

import dataclasses
import time

import numpy as np
import scipy.sparse as sp

import ctmc
from ctmc.expr import minimum, table, where

from .law import HysteresisLaw, decide
from .levels import level_law, top_level
from .levels import memory_bytes as level_memory

__all__ = ["build_model", "assemble", "box_index", "build_chain", "level_stationary", "solve_stationary",
           "stationary_law", "mode_mask", "entrance", "mean_stay",
           "switch_rates", "return_times", "return_time_cdf", "return_time_laplace"]


# ---------------------------------------------------------------------------
# the chain
# ---------------------------------------------------------------------------
def build_model(q) -> ctmc.Model:
    """The :class:`ctmc.Model` on ``(mode, n, phase)`` of ``q`` (phase-type service)."""
    ph = q.service
    L, H, R, r = q.L, q.H, q.R, q.capacity
    m = ctmc.Model("hysteresis")
    # level first: states of neighbouring levels get neighbouring numbers (a
    # banded generator, which keeps the sparse LU fill small)
    n = m.var("n", 0, r)
    s = m.var("mode", 0, 2)
    j = m.var("phase", 0, ph.n_phases - 1)
    lam_s = where(s == 0, q.lam, where(s == 1, q.lam_overload, 0.0))
    alpha, S0 = ph.alpha, ph.exit_rates
    starts = np.flatnonzero(alpha > 0)
    for k, gk in enumerate(q.batch_pmf(), start=1):
        if gk == 0:
            continue
        n_new, ok = q.acceptance.admit(n, k, r, minimum)
        s_new = decide(where, s, n_new, L, H, R) if q.policy.on_arrival else s
        m.event(f"arrival_{k}", guard=ok & (n >= 1), rate=lam_s * gk, update={s: s_new, n: n_new})
        for jj in starts:
            m.event(f"arrival_{k}_start_{jj}", guard=ok & (n == 0), rate=lam_s * (gk * alpha[jj]),
                    update={s: s_new, n: n_new, j: int(jj)})
    off = ph.S - np.diag(np.diag(ph.S))
    for jj in np.flatnonzero(off.any(axis=0)):
        m.event(f"phase_to_{jj}", guard=(n >= 1) & (j != int(jj)), rate=per_phase(off[:, jj], j),
                update={j: int(jj)})
    m.event("departure_last", guard=n == 1, rate=per_phase(S0, j),
            update={n: 0, j: 0, s: decide(where, s, 0, L, H, R)})
    for jj in starts:
        m.event(f"departure_start_{jj}", guard=n >= 2, rate=per_phase(S0 * alpha[jj], j),
                update={n: n - 1, j: int(jj), s: decide(where, s, n - 1, L, H, R)})
    return m


def per_phase(values, j):
    """The rate ``values[j]`` in phase ``j``: :func:`ctmc.expr.table`, or the number itself where every
    phase has it (exponential service: a constant rate, no program for the compiled engine to run)."""
    values = np.asarray(values, dtype=float)
    return float(values[0]) if np.all(values == values[0]) else table(values, j)


def box_index(n, s, j, m):
    """Index of ``(n, mode, phase)`` in the box: level 0 holds phase 0 only, then level-major."""
    return np.where(n == 0, s, 3 + ((n - 1) * 3 + s) * m + j)


def assemble(q):
    r"""The generator of route (a) assembled by levels with numpy, and its states.

    The states form a box ordered level first, ``(n, mode, phase)``
    lexicographically (level 0 holds phase 0 only: the phase is set when a
    service starts). The transitions are those of :func:`build_model`, event by
    event in its order, as whole arrays over the box:

    * a batch of size :math:`k` (probability :math:`g_k`) in mode :math:`s`,
      rate :math:`\lambda_s g_k`, to level ``admit(n, k)`` and mode
      :func:`~models.hysteresis.law.decide` (instant policy) with the phase kept
      (:math:`n \ge 1`) or drawn from :math:`\alpha` (:math:`n = 0`);
    * a phase change :math:`j \to j'` at rate :math:`S_{jj'}` (:math:`n \ge 1`);
    * a service completion at rate :math:`s_{0,j}`, to level :math:`n - 1`,
      phase drawn from :math:`\alpha` (phase 0 when the system empties) and the
      mode decided at :math:`n - 1`.

    The box holds the levels up to the highest reachable one
    (:func:`models.hysteresis.levels.top_level`: a capacity far beyond reach
    costs nothing); the states reachable from the empty system
    (breadth-first search on the transition graph) are kept, in box order. The rules (admission, decision)
    are evaluated once per level and mode, the phases added as a range: seconds
    for :math:`10^5`-:math:`10^6` states, where a state-by-state exploration of
    the same events takes minutes (every batch size is an event evaluated per state).

    Returns
    -------
    Q : scipy.sparse.csr_matrix
        The generator on the reachable states (duplicates summed in event order,
        :func:`ctmc.assembly.assemble`).
    states : dict
        ``"n"``, ``"mode"``, ``"phase"`` arrays over the reachable states.
    """
    from scipy.sparse.csgraph import breadth_first_order

    ph = q.service
    m, r, cap = ph.n_phases, top_level(q), q.capacity     # r: the highest reachable level
    L, H, R = q.L, q.H, q.R
    size = 3 + 3 * r * m
    lam = q.rates
    alpha, S0 = ph.alpha, ph.exit_rates
    starts = np.flatnonzero(alpha > 0)
    jm = np.arange(m)
    lev = np.arange(r + 1)
    modes = np.arange(3)
    base = box_index(lev[:, None], modes[None, :], 0, m)          # first index of (n, s)
    src, dst, val = [], [], []

    itype = np.int32 if size < 2**31 else np.int64

    def emit(rows, cols, rates):
        keep = rates != 0                                          # zero rates are no transitions
        src.append(rows[keep].astype(itype, copy=False))
        dst.append(cols[keep].astype(itype, copy=False))
        val.append(rates[keep])

    # arrivals: batch sizes that lead to the same level (the top, beyond the room) are one
    # transition whose rate is summed in increasing size, as the events' duplicates are
    cur_ok = np.zeros(r + 1, bool)
    cur_l = np.zeros(r + 1, np.int64)
    cur_s = np.zeros((r + 1, 3), np.int64)
    cur = np.zeros((r + 1, 3))                                     # levels >= 1, per mode
    cur0 = np.zeros((3, starts.size))                              # level 0, per mode and first phase

    def flush(rows):
        busy = rows & (lev >= 1)
        nn, ss = np.nonzero(busy[:, None] & (cur > 0))
        emit((base[nn, ss][:, None] + jm).ravel(), (base[cur_l[nn], cur_s[nn, ss]][:, None] + jm).ravel(),
             np.repeat(cur[nn, ss], m))
        if rows[0]:
            for i, jj in enumerate(starts):
                emit(modes, base[cur_l[0], cur_s[0]] + jj, cur0[:, i])

    for k, gk in enumerate(q.batch_pmf(), start=1):
        if gk == 0:
            continue
        n_new, ok = q.acceptance.admit(lev, k, cap)
        n_new, ok = np.broadcast_arrays(n_new, ok)
        ok = ok & (n_new <= r)                 # beyond the top: only from unreachable states
        n_new = np.where(ok, n_new, 0)
        s_new = (decide(np.where, modes[None, :], n_new[:, None], L, H, R) if q.policy.on_arrival
                 else np.broadcast_to(modes[None, :], (r + 1, 3)))
        same = cur_ok & ok & (n_new == cur_l)
        flush(cur_ok & ~same)
        rate = lam * gk
        cur = np.where(same[:, None], cur + rate, rate)
        rate0 = lam[:, None] * (gk * alpha[starts])[None, :]
        cur0 = cur0 + rate0 if same[0] else rate0
        cur_ok, cur_l, cur_s = ok.copy(), np.where(ok, n_new, 0), np.where(ok[:, None], s_new, 0)
    flush(cur_ok)
    # phase changes (levels >= 1)
    busy = base[1:].ravel()
    off = ph.S - np.diag(np.diag(ph.S))
    a, b = np.nonzero(off)
    emit((busy[:, None] + a).ravel(), (busy[:, None] + b).ravel(), np.tile(off[a, b], busy.size))
    # service completions: to level n - 1, the mode decided there, a new service from alpha
    s_down = decide(np.where, modes[None, :], np.maximum(lev - 1, 0)[:, None], L, H, R)
    emit((base[1][:, None] + jm).ravel(), np.repeat(s_down[1], m), np.tile(S0, 3))
    for jj in starts:
        to = base[lev[1:-1, None], s_down[2:]] + jj                      # from level n = 2..r
        emit((base[2:].ravel()[:, None] + jm).ravel(), np.repeat(to.ravel(), m), np.tile(S0 * alpha[jj], 3 * (r - 1)))
    src, dst, val = (np.concatenate(x) for x in (src, dst, val))
    R_box = sp.csr_matrix((val, (src, dst)), shape=(size, size))
    del src, dst, val
    R_box.sum_duplicates()
    # the states reachable from the empty system, in box order
    reach = np.sort(breadth_first_order(R_box, 0, directed=True, return_predecessors=False))
    off = R_box[reach][:, reach]
    del R_box
    off.sum_duplicates()
    # Q = R - diag(R 1), as ctmc.assembly.assemble forms it
    out = np.asarray(off.sum(axis=1)).ravel()
    n_r = reach.size
    Q = (off + sp.csr_matrix((-out, (np.arange(n_r), np.arange(n_r))), shape=(n_r, n_r))).tocsr()
    Q.sort_indices()
    n_box = np.concatenate([np.zeros(3, np.int64), np.repeat(lev[1:], 3 * m)])
    s_box = np.concatenate([modes, np.tile(np.repeat(modes, m), r)])
    j_box = np.concatenate([np.zeros(3, np.int64), np.tile(jm, 3 * r)])
    return Q, {"n": n_box[reach], "mode": s_box[reach], "phase": j_box[reach]}


def build_chain(q) -> ctmc.CTMC:
    """The CTMC of :func:`build_model` on the states reachable from the empty system, by
    :func:`assemble` (the same generator; ``build_model(q).build(...)`` explores it state by state)."""
    Q, states = assemble(q)
    chain = ctmc.CTMC(Q, states=states, initial=0)
    chain.build_info.update(strategy="bfs", builder="models.hysteresis.ctmc_route.assemble",
                            levels=int(states["n"].max()) + 1)
    return chain


def level_stationary(q, bound: bool = False) -> ctmc.StationaryResult:
    r"""The stationary law of :meth:`HysteresisQueue.chain` by :func:`models.hysteresis.levels.level_law`.

    The law is evaluated by ctmc's stationary method ``"given"`` (:mod:`ctmc.given`):
    ``residual`` :math:`\|\pi Q\|_1`, ``balance_error`` (the largest relative
    imbalance of one state, :math:`|(\pi Q)_j| / (\pi_j |q_{jj}|)`), recomputed from the
    generator and graded by the rule of every ctmc method, with the tolerances of
    :class:`ctmc.options.Tolerances`. By default no normwise error bound is computed
    (``error_bound`` is NaN): the elimination is subtraction-free, and the balance error is
    the state-by-state evidence. ``bound=True`` computes ctmc's proven bound on
    :math:`\|\hat\pi - \pi\|_1` (the mean times to reach the most probable state, solved
    on the levels when arrivals are single, :class:`ctmc.kernels.levels.LevelSystem`), and
    grades it against ``error_tol``. ``info["mass_outside"]`` is the mass the elimination
    left on unreachable states of its box (0 in exact arithmetic).
    """
    t0 = time.perf_counter()
    chain = q.chain()
    p0, p = level_law(q)
    st = chain.states
    n, s, j = st["n"], st["mode"], st["phase"]
    x = np.where(n == 0, p0[s], p[n, s, j])
    outside = max(0.0, 1.0 - float(x.sum()))          # mass on unreachable box states: 0 in exact arithmetic
    # single arrivals move the level n by one at most: the bound's return times are solved on the levels
    levels = "n" if bound and q.batch_pmf().size == 1 else None
    res = chain.stationary("given", x0=x, bound=bound, levels=levels, check=False)
    info = dict(res.info, mass_outside=outside, levels=q.capacity + 1)
    if not bound:
        info["error_bound_kind"] = ("none (subtraction-free elimination; see balance_error; "
                                    "bound=True proves one)")
    return dataclasses.replace(
        res, method="levels", wall_time=time.perf_counter() - t0, info=info,
        message=res.message.replace("given law", "levels: subtraction-free elimination over the levels", 1))


#: the default method is ``"levels"`` while it holds at most this many bytes (batches spanning
#: thousands of levels at capacities of thousands need more; ctmc's "auto" then)
LEVELS_MEMORY = 2 * 2 ** 30


def solve_stationary(q, method=None, bound: bool = False) -> ctmc.StationaryResult:
    """The stationary law of the chain: ``"levels"`` (default on scipy, while it needs at most
    :data:`LEVELS_MEMORY` bytes, :func:`models.hysteresis.levels.memory_bytes`) or a method of
    :meth:`ctmc.CTMC.stationary` on the queue's backend (default ``"auto"`` on PETSc).
    ``bound`` asks ``"levels"`` for ctmc's proven error bound (:func:`level_stationary`); the
    other methods compute theirs anyway."""
    if method is None:
        method = "levels" if q.backend == "scipy" and level_memory(q) <= LEVELS_MEMORY else "auto"
    if method == "levels":
        if q.backend != "scipy":
            raise ValueError(f"method: 'levels' runs on the scipy backend, the queue's backend is {q.backend!r}")
        return level_stationary(q, bound=bound)
    return q.chain().stationary(method, backend=q.backend)


def stationary_law(q) -> HysteresisLaw:
    """Time-stationary law of (mode, n) from the stationary law of the CTMC."""
    t0 = time.perf_counter()
    chain = q.chain()
    res = q.stationary_ctmc()
    st = chain.states
    p = np.zeros((3, int(st["n"].max()) + 1))      # up to the highest reachable level
    np.add.at(p, (st["mode"], st["n"]), res.pi)
    return HysteresisLaw(p=p, route="ctmc", status=res.status, residual=res.residual,
                         wall_time=time.perf_counter() - t0,
                         info={"n_states": chain.n_states, "method": res.method,
                               "balance_error": res.balance_error, "error_bound": res.error_bound})


# ---------------------------------------------------------------------------
# passage-time measures: hitting times from the stationary entrance law
# ---------------------------------------------------------------------------
def mode_mask(q, modes) -> np.ndarray:
    """States of the chain whose mode is in ``modes``."""
    chain = q.chain()
    return np.isin(chain.states["mode"], modes)


def entrance(q, inside) -> np.ndarray:
    """Stationary flow into the set ``inside`` from outside, per state of ``inside``."""
    chain = q.chain()
    pi = q.stationary_ctmc().pi
    flow = (pi * ~inside) @ chain.Q
    return np.where(inside, flow, 0.0)


def mean_stay(q, inside) -> float:
    r"""Mean time from entering ``inside`` (stationary entrance law) until leaving it.

    By renewal-reward (the stays in ``inside`` alternate with the stays out of
    it), :math:`E[\text{stay}] = \pi(\text{inside}) / \sum_j f_j`, with
    :math:`f` the stationary flow into ``inside`` (:func:`entrance`): the mean
    of the hitting times of the complement under the entrance law, without a
    linear solve. NaN when ``inside`` is never entered.
    """
    f = entrance(q, inside)
    if f.sum() <= 0:
        return float("nan")
    pi = q.stationary_ctmc().pi
    return float(pi[inside].sum() / f.sum())


def switch_rates(q) -> np.ndarray:
    """Stationary rates of mode changes ``[a, b]``, from the stationary law and the generator."""
    chain = q.chain()
    pi = q.stationary_ctmc().pi
    Q = chain.Q.tocoo()
    mode = chain.states["mode"]
    out = np.zeros((3, 3))
    sw = mode[Q.row] != mode[Q.col]
    np.add.at(out, (mode[Q.row[sw]], mode[Q.col[sw]]), pi[Q.row[sw]] * Q.data[sw])
    return out


def return_times(q) -> dict:
    """Mean return time to normal mode from every overload/discard state (see
    :meth:`HysteresisQueue.return_times <models.hysteresis.queue.HysteresisQueue.return_times>`)."""
    chain = q.chain()
    out = mode_mask(q, [1, 2])
    h = chain.hitting_times(~out)
    st = chain.states
    return {"mode": st["mode"][out], "n": st["n"][out], "phase": st["phase"][out], "mean": h.mean[out]}


def return_time_cdf(q, t) -> np.ndarray:
    """``P(T_return <= t)`` from the stationary entrance law into overload (uniformisation)."""
    chain = q.chain()
    inside = mode_mask(q, [1, 2])
    f = entrance(q, inside)
    src = np.flatnonzero(f > 0)
    fp = chain.first_passage(~inside, t=t, sources=src)
    w = f[fp.sources] / f[fp.sources].sum()
    return np.einsum("r,...rm->...", w, fp.cdf)          # a number for one t (ctmc's shape rule)


def return_time_laplace(q, s) -> np.ndarray:
    """``E[exp(-s T_return)]`` from the entrance law into overload (:meth:`ctmc.CTMC.hitting_laplace`)."""
    chain = q.chain()
    inside = mode_mask(q, [1, 2])
    f = entrance(q, inside)
    res = chain.hitting_laplace(~inside, s)
    return res.values @ f / f.sum()                      # a number for one s (ctmc's shape rule)
