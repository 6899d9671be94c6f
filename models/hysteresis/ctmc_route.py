r"""Route (a) of :class:`~models.hysteresis.queue.HysteresisQueue`: the exact CTMC on (mode, n, phase).

For phase-type service :math:`PH(\alpha, S)` the process
:math:`(s, n, j)` (:math:`j` the service phase) is a CTMC, built with
:class:`ctmc.Model` and solved exactly; passage-time measures come from
:meth:`ctmc.CTMC.hitting_times` and :meth:`ctmc.CTMC.first_passage`.

Mode changes follow the single decision rule
:func:`models.hysteresis.law.decide`, written here on :mod:`ctmc.expr`
expressions (the embedded route applies it to arrays). Passage times start
from the stationary entrance law into a set of modes: the stationary flow
across its boundary.

Every function takes the :class:`~models.hysteresis.queue.HysteresisQueue`
``q`` (its parameters, and its cached chain and stationary law).
"""
from __future__ import annotations

import time

import numpy as np

import ctmc
from ctmc.expr import minimum, where

from .law import HysteresisLaw, decide

__all__ = ["build_model", "build_chain", "stationary_law", "mode_mask", "entrance", "mean_stay",
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
        col = off[:, jj].copy()
        m.event(f"phase_to_{jj}", guard=(n >= 1) & (j != int(jj)),
                rate=lambda env, c=col: c[env["phase"]], update={j: int(jj)})
    m.event("departure_last", guard=n == 1, rate=lambda env: S0[env["phase"]],
            update={n: 0, j: 0, s: decide(where, s, 0, L, H, R)})
    for jj in starts:
        m.event(f"departure_start_{jj}", guard=n >= 2,
                rate=lambda env, a=alpha[jj]: S0[env["phase"]] * a,
                update={n: n - 1, j: int(jj), s: decide(where, s, n - 1, L, H, R)})
    return m


def build_chain(q) -> ctmc.CTMC:
    """The CTMC of :func:`build_model`, restricted to the states reachable from the empty system."""
    return q.model().build(initial={"mode": 0, "n": 0, "phase": 0}, progress=False)


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
                               "balance_error": res.balance_error})


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
    """Mean time from entering ``inside`` (stationary entrance law) until leaving it."""
    f = entrance(q, inside)
    if f.sum() <= 0:
        return float("nan")
    h = q.chain().hitting_times(~inside)
    return float(f @ h.mean / f.sum())


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
