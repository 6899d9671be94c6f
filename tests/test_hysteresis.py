"""Tests of ctmc.models.hysteresis against independent answers.

References used here:
* M/M/1/r closed form p_n = (1 - rho) rho^n / (1 - rho^(r+1)); the example
  lambda = 2, mu = 3, K = 5 of the LINE solver's qsys_mm1k_loss has loss 32/665.
* M/G/1/r classic embedded chain (Gross & Harris; Niu & Cooper 1993, as coded
  in LINE's qsys_mg1k_loss): p_n = pi^d_n / (pi^d_0 + rho), n < r,
  p_r = 1 - 1 / (pi^d_0 + rho); re-implemented in tests/hysteresis_cases.py with its own a_k.
* level crossing for exponential service (docs/literature/hysteresis.md):
  mu P(N = n+1) = sum_s lambda_s sum_{j <= n} p(s, j) P(X > n - j).
* an independent hand-built generator of the M|M|1 hysteretic queue.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.stats as st

import ctmc

from mpi_jobs import needs_mpi, run_job
from hysteresis_cases import (dense_hitting, dense_stationary, exact_stationary, full_width, gth_stationary,
                              hand_built_mm1, mg1r_classic, mm1r, poisson_mixing_quad)

from ctmc.models.hysteresis import (HysteresisQueue, coxian, deterministic, erlang, exponential,
                                    fixed_batch, general, geometric_batch, hyperexponential, phase_type)
from ctmc.models.hysteresis.ctmc_route import entrance, mode_mask
from ctmc.models.hysteresis.service import BatchSize

ROUTES = ["ctmc", "embedded"]


# ---------------------------------------------------------------------------
# hysteresis disabled: classic queues
# ---------------------------------------------------------------------------
# The control is disabled with lam_overload = lam and H = R - 1: discard mode is
# then the full state n = R only, where nothing could enter anyway.
MM1_CASES = [  # (L, H, R, lam, mu)
    (0, 1, 2, 0.7, 1.0),
    (2, 7, 8, 1.3, 1.0),
    (3, 19, 20, 0.9, 1.1),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", MM1_CASES)
def test_disabled_control_is_mm1r(case, route):
    L, H, R, lam, mu = case
    q = HysteresisQueue(L, H, R, lam, lam, mu=mu)
    pn = q.distribution(route).sum(axis=0)
    ref = mm1r(lam, mu, R)
    np.testing.assert_allclose(pn, ref, rtol=1e-11, atol=0)
    assert q.loss_probability(route) == pytest.approx(ref[-1], rel=1e-11)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("policy", ["instant", "departure-epoch"])
def test_line_solver_mm1k_example(route, policy):
    # LINE solver, qsys_mm1k_loss example: lambda = 2, mu = 3, K = 5 -> loss 32/665
    q = HysteresisQueue(1, 4, 5, 2.0, 2.0, mu=3.0, policy=policy)
    assert q.loss_probability(route) == pytest.approx(32 / 665, rel=1e-12)


def _det_a(lam, d, kmax):
    return st.poisson.pmf(np.arange(kmax), lam * d)


MG1_CASES = [  # (name, service, a_k by an independent route, mean)
    ("D", deterministic(1.0), lambda lam, k: _det_a(lam, 1.0, k), 1.0),
    ("D(0.5)", deterministic(0.5), lambda lam, k: _det_a(lam, 0.5, k), 0.5),
    ("lognormal", general(st.lognorm(0.6, scale=0.8)),
     lambda lam, k: poisson_mixing_quad(lam, st.lognorm(0.6, scale=0.8), k),
     st.lognorm(0.6, scale=0.8).mean()),
    ("uniform", general(st.uniform(0.2, 1.4)),
     lambda lam, k: poisson_mixing_quad(lam, st.uniform(0.2, 1.4), k), 0.9),
]


@pytest.mark.parametrize("policy", ["instant", "departure-epoch"])
@pytest.mark.parametrize("case", MG1_CASES, ids=[c[0] for c in MG1_CASES])
@pytest.mark.parametrize("lam,r", [(0.8, 6), (1.3, 10)])
def test_disabled_control_is_mg1r_classic(case, lam, r, policy):
    _, service, a_of, mean_s = case
    q = HysteresisQueue(1, r - 1, r, lam, lam, service=service, policy=policy)
    ref = mg1r_classic(lam, r, a_of(lam, 80), mean_s)
    pn = q.distribution("embedded").sum(axis=0)
    np.testing.assert_allclose(pn, ref, rtol=1e-8, atol=1e-12)
    assert q.loss_probability() == pytest.approx(ref[-1], rel=1e-8)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("policy", ["instant", "departure-epoch"])
def test_mx_m1k_partial_acceptance_values(route, policy):
    # M^X/M/1/K values recorded in docs/literature/hysteresis.md (batch rate 0.8, mu = 3,
    # K = 6, P(X = 1, 2, 3) = 0.5, 0.3, 0.2, partial acceptance): control disabled
    q = HysteresisQueue(1, 5, 6, 0.8, 0.8, mu=3.0, batch={1: 0.5, 2: 0.3, 3: 0.2}, policy=policy)
    ref = [0.56259415, 0.15002511, 0.11501925, 0.08068017, 0.04485195, 0.02885224, 0.01797713]
    np.testing.assert_allclose(q.distribution(route).sum(axis=0), ref, atol=6e-9)
    assert q.loss_probability(route) == pytest.approx(0.0351341647, abs=1e-10)
    # mean waiting line from the same law
    pn = np.array(ref)
    assert q.mean_queue_length(route) == pytest.approx(pn @ np.maximum(np.arange(7) - 1, 0), abs=1e-7)


# ---------------------------------------------------------------------------
# M|M|1 with hysteresis against a hand-built generator
# ---------------------------------------------------------------------------
HYST_CASES = [  # (L, H, R, lam0, lam1, mu)
    (2, 5, 8, 1.2, 0.6, 1.0),
    (0, 3, 4, 2.0, 0.3, 1.0),
    (4, 10, 15, 1.05, 0.9, 1.0),
    (1, 2, 9, 0.5, 0.1, 0.8),
]


@pytest.mark.parametrize("case", HYST_CASES)
def test_mm1_hysteresis_against_hand_built_generator(case):
    L, H, R, l0, l1, mu = case
    states, idx, Q = hand_built_mm1(L, H, R, l0, l1, mu)
    pi = dense_stationary(Q)
    q = HysteresisQueue(L, H, R, l0, l1, mu=mu)
    assert q.chain().n_states == len(states)
    p = q.distribution("ctmc")
    for (s, n), v in zip(states, pi):
        assert p[s, n] == pytest.approx(v, rel=1e-10)
    mode = np.array([s for s, _ in states])
    # return time: entrance into overload only at (1, H), from (0, H - 1)
    m_ret = dense_hitting(Q, mode == 0)
    assert q.mean_return_time() == pytest.approx(m_ret[idx[(1, H)]], rel=1e-10)
    # normal period: entrance into normal only at (0, L), from (1, L + 1)
    m_norm = dense_hitting(Q, mode != 0)
    assert q.mean_normal_period() == pytest.approx(m_norm[idx[(0, L)]], rel=1e-10)
    # discard period: R - H departures
    assert q.mean_discard_time() == pytest.approx((R - H) / mu, rel=1e-10)
    rt = q.return_times()
    for s, n, v in zip(rt["mode"], rt["n"], rt["mean"]):
        assert v == pytest.approx(m_ret[idx[(s, n)]], rel=1e-10)


# Small losses in relative terms against exact rational answers. The loss is
# (P(overload) (l0 - l1) + P(discard) l0) / l0 here: single arrivals never
# overflow (n = R is a discard state).
# (pytest.approx adds abs=1e-12 to a bare rel=, hence abs=0 below)
EXACT_CASES = [  # (L, H, R, l0, l1); losses from 3e-10 down to 3e-17
    (3, 10, 20, Fraction(1, 10), Fraction(1, 20)),
    (3, 10, 20, Fraction(1, 20), Fraction(1, 40)),
    (3, 10, 20, Fraction(1, 50), Fraction(1, 100)),
    (2, 6, 30, Fraction(1, 5), Fraction(1, 20)),
]


@pytest.fixture(scope="module")
def exact_laws():
    out = {}
    for L, H, R, l0, l1 in EXACT_CASES:
        states, _, Q = hand_built_mm1(L, H, R, l0, l1, Fraction(1), dtype=object)
        pi = exact_stationary(Q)
        pm = [sum((v for (s, _), v in zip(states, pi) if s == m), Fraction(0)) for m in range(3)]
        out[(L, H, R, l0, l1)] = (states, pi, pm)
    return out


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("case", EXACT_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}")
def test_small_losses_relative_to_exact_rationals(case, route, exact_laws):
    L, H, R, l0, l1 = case
    _, _, pm = exact_laws[case]
    loss = float((pm[1] * (l0 - l1) + pm[2] * l0) / l0)
    q = HysteresisQueue(L, H, R, float(l0), float(l1))
    assert q.loss_probability(route) == pytest.approx(loss, rel=1e-11, abs=0)
    assert q.loss_breakdown(route)["total"] == pytest.approx(loss, rel=1e-11, abs=0)
    assert q.batch_loss_probability(route) == pytest.approx(loss, rel=1e-11, abs=0)
    flows = q.loss_by_flow(route)
    assert flows["priority"] == pytest.approx(float(pm[2]), rel=1e-11, abs=0)
    assert flows["other"] == pytest.approx(float(pm[1] + pm[2]), rel=1e-11, abs=0)


# Route (b) resolves small probabilities in relative terms, like route (a):
# probabilities from 1e-11 down to 1e-36 (discard mode at light load).
TAIL_CASES = [
    dict(L=3, H=10, R=30, lam=0.2, lam_overload=0.05),
    dict(L=5, H=20, R=45, lam=0.3, lam_overload=0.1),
    dict(L=2, H=8, R=25, lam=0.15, lam_overload=0.05, capacity=27, service=erlang(3, 1.0),
         batch={1: 0.7, 2: 0.3}, policy="departure-epoch"),
    dict(L=2, H=8, R=25, lam=0.25, lam_overload=0.1, capacity=26, acceptance="whole",
         service=hyperexponential([0.4, 0.6], [0.8, 3.0]), batch=geometric_batch(0.7)),
]


@pytest.mark.parametrize("kw", TAIL_CASES)
def test_embedded_route_small_probabilities_are_relative(kw):
    q = HysteresisQueue(**kw)
    a, b = q.stationary("ctmc"), q.stationary("embedded")
    assert b.status == "success" and b.info["accuracy"] == "relative"
    assert 0 < a.p[a.p > 0].min() < 1e-10
    np.testing.assert_array_equal(a.p > 0, b.p > 0)
    np.testing.assert_allclose(b.p, a.p, rtol=1e-9, atol=0)
    assert q.mode_probabilities("embedded")[2] == pytest.approx(a.modes[2], rel=1e-9, abs=0)


@pytest.mark.parametrize("d,lam,r", [(1.0, 0.05, 14), (0.5, 0.3, 20)])
def test_deterministic_small_probabilities_against_classic_md1r(d, lam, r):
    # control disabled: M/D/1/r; classic departure chain with a_k = Poisson(lam d) pmf,
    # the last column from the Poisson survival function, solved by GTH: p_n, n < r,
    # is pi_n / (pi_0 + rho) (no cancellation)
    x = lam * d
    P = np.zeros((r, r))
    for i in range(r):
        base = max(i - 1, 0)
        k = np.arange(r - 1 - base)
        P[i, base:r - 1] = st.poisson.pmf(k, x)
        P[i, r - 1] = st.poisson.sf(r - 2 - base, x)
    pid = gth_stationary(P)
    ref = pid / (pid[0] + x)
    q = HysteresisQueue(1, r - 1, r, lam, lam, service=deterministic(d))
    law = q.stationary()
    assert law.info["accuracy"] == "relative" and ref[-1] < 1e-20
    np.testing.assert_allclose(law.p.sum(axis=0)[:r], ref, rtol=1e-9, atol=0)


def test_general_service_reports_absolute_accuracy():
    law = HysteresisQueue(2, 5, 8, 1.0, 0.5, service=st.lognorm(0.5)).stationary()
    assert law.status == "success" and law.info["accuracy"] == "absolute"
    assert "absolute" in law.message


# ---------------------------------------------------------------------------
# batches, both policies, both acceptance rules: independent dense references
# ---------------------------------------------------------------------------
# The threshold rules are written out again below, state by state, from the
# model's definition (not through the module's rule functions), so an error in
# the shared rule code shows up here and not only as a disagreement of routes.
def admitted(n, k, r, acceptance):
    """Customers entering when a batch of k meets n customers (capacity r)."""
    if acceptance == "partial":
        return min(k, r - n)
    return k if n + k <= r else 0


def mode_after_arrival(s, n_new, H, R, policy):
    """Instant policy: an arrival raising n to H or R (or past them) switches up."""
    if policy != "instant":
        return s
    if n_new >= R:
        return 2
    if s == 0 and n_new >= H:
        return 1
    return s


def mode_after_departure(s, m, L, H, R, policy):
    """Decision at a departure leaving m customers."""
    if policy == "departure-epoch":
        if m >= R:
            s = 2
        elif s == 0 and m >= H:
            s = 1
    if s == 2 and m <= H:
        s = 1
    if s == 1 and m <= L:
        s = 0
    return s


def reachable(T, start=0):
    seen, todo = {start}, [start]
    while todo:
        x = todo.pop()
        for y in np.flatnonzero(T[x] > 0):
            if y not in seen:
                seen.add(y)
                todo.append(int(y))
    return np.array(sorted(seen))


def dense_batch_generator(L, H, R, r, l0, l1, mu, g, policy, acceptance):
    """Generator of (mode, n) with exponential service, on the states reachable from (0, 0)."""
    rates = (l0, l1, 0.0)
    code = lambda s, n: s * (r + 1) + n  # noqa: E731
    Q = np.zeros((3 * (r + 1),) * 2)
    for s in range(3):
        for n in range(r + 1):
            for k, gk in enumerate(g, start=1):
                a = admitted(n, k, r, acceptance)
                if a > 0 and rates[s] * gk > 0:
                    Q[code(s, n), code(mode_after_arrival(s, n + a, H, R, policy), n + a)] += rates[s] * gk
            if n >= 1:
                Q[code(s, n), code(mode_after_departure(s, n - 1, L, H, R, policy), n - 1)] += mu
    keep = reachable(Q)
    Q = Q[np.ix_(keep, keep)]
    np.fill_diagonal(Q, 0.0)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return keep // (r + 1), keep % (r + 1), Q


def reference_measures(mode, lev, pi, L, H, R, r, l0, l1, g, acceptance, Q=None):
    """Measures from a stationary law of (mode, n), counting lost customers directly."""
    ex = sum(k * gk for k, gk in enumerate(g, start=1))
    lost = lost_batches = lost_pri = lost_oth = 0.0
    for s, n, w in zip(mode, lev, pi):
        for k, gk in enumerate(g, start=1):
            a = admitted(n, k, r, acceptance)
            pri = k if s == 2 else k - a          # priority flow: refused only in discard
            oth = k if s != 0 else k - a          # other flow: admitted only in normal mode
            lost_pri += w * gk * pri
            lost_oth += w * gk * oth
            lost += w * gk * (l1 * pri + (l0 - l1) * oth)
            lost_batches += w * gk * (l1 * (pri > 0) + (l0 - l1) * (oth > 0))
    out = {"modes": np.array([pi[mode == s].sum() for s in range(3)]), "loss": lost / (l0 * ex),
           "batch loss": lost_batches / l0, "priority": lost_pri / ex, "other": lost_oth / ex,
           "E[N]": pi @ lev}
    if Q is not None:
        def stay(inside):
            flow = np.where(inside, (pi * ~inside) @ Q, 0.0)
            if flow.sum() <= 0:
                return np.nan
            return flow @ dense_hitting(Q, ~inside) / flow.sum()
        out["return"], out["normal"], out["discard"] = stay(mode != 0), stay(mode == 0), stay(mode == 2)
        out["cycle"] = out["return"] + out["normal"]
        change = mode[:, None] != mode[None, :]
        out["between changes"] = 1.0 / (pi @ np.where(change, Q, 0.0)).sum()
    return out


def measures_of(q, route, passage=True):
    out = {"modes": q.mode_probabilities(route), "loss": q.loss_probability(route),
           "batch loss": q.batch_loss_probability(route), "E[N]": q.mean_number_in_system(route)}
    out.update({("priority", "other")[i]: v for i, v in enumerate(q.loss_by_flow(route).values())})
    if passage:
        out.update({"return": q.mean_return_time(route), "normal": q.mean_normal_period(route),
                    "discard": q.mean_discard_time(route), "cycle": q.mean_cycle(route),
                    "between changes": q.mean_time_between_mode_changes(route)})
    return out


def assert_measures_match(got, ref, rel):
    for key, want in ref.items():
        want, have = np.atleast_1d(want), np.atleast_1d(got[key])
        np.testing.assert_array_equal(np.isnan(have), np.isnan(want), err_msg=key)
        ok = ~np.isnan(want)
        np.testing.assert_allclose(have[ok], want[ok], rtol=rel, atol=0, err_msg=key)


BATCH_CASES = [  # (L, H, R, capacity, lam0, lam1, mu, batch pmf)
    (1, 3, 5, 7, 1.3, 0.6, 1.0, [0.5, 0.3, 0.2]),      # capacity > R; batches overshoot H and R
    (0, 2, 4, 4, 1.8, 0.5, 1.2, [0.3, 0.7]),           # capacity = R
    (2, 5, 7, 9, 1.0, 0.0, 0.9, [0.6, 0.0, 0.4]),      # nothing admitted in overload
    (1, 2, 4, 8, 0.9, 0.5, 1.0, [0.2, 0.0, 0.0, 0.8]),  # one batch crosses H and R together
    (0, 3, 6, 6, 0.7, 0.4, 1.0, [0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.4]),  # batches larger than r
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("acceptance", ["partial", "whole"])
@pytest.mark.parametrize("policy", ["instant", "departure-epoch"])
@pytest.mark.parametrize("case", BATCH_CASES, ids=lambda c: "-".join(map(str, c[:4])))
def test_batches_against_independent_generator(case, policy, acceptance, route):
    L, H, R, r, l0, l1, mu, g = case
    mode, lev, Q = dense_batch_generator(L, H, R, r, l0, l1, mu, g, policy, acceptance)
    pi = dense_stationary(Q)
    q = HysteresisQueue(L, H, R, l0, l1, mu=mu, capacity=r, batch=g, policy=policy, acceptance=acceptance)
    p = np.zeros((3, r + 1))
    p[mode, lev] = pi
    np.testing.assert_allclose(full_width(q, route), p, rtol=1e-9, atol=1e-15)
    if route == "ctmc":
        assert q.chain().n_states == pi.size
    ref = reference_measures(mode, lev, pi, L, H, R, r, l0, l1, g, acceptance, Q)
    assert_measures_match(measures_of(q, route), ref, rel=1e-9)


def expm_embedded_law(L, H, R, r, l0, l1, g, d, policy, acceptance):
    """Time-stationary law of (mode, n) for deterministic service d, by matrix exponentials.

    Departure-epoch chain: e^{A d} for the arrivals during a service, then the
    departure and its decision; time in each state during a service from the
    block exponential of [[A, I], [0, 0]] (Van Loan); an idle period of mean
    1 / (l0 P(first batch admitted)) before a service started from empty.
    """
    rates = (l0, l1, 0.0)
    N = 3 * (r + 1)
    code = lambda s, n: s * (r + 1) + n  # noqa: E731
    A = np.zeros((N, N))
    for s in range(3):
        for n in range(1, r + 1):
            for k, gk in enumerate(g, start=1):
                a = admitted(n, k, r, acceptance)
                if a > 0 and rates[s] * gk > 0:
                    A[code(s, n), code(mode_after_arrival(s, n + a, H, R, policy), n + a)] += rates[s] * gk
    np.fill_diagonal(A, -A.sum(axis=1))
    E = sla.expm(A * d)
    big = np.zeros((2 * N, 2 * N))
    big[:N, :N], big[:N, N:] = A, np.eye(N)
    occupation = sla.expm(big * d)[:N, N:]
    first = np.zeros(N)                  # state right after the first admitted batch (idle: normal)
    for k, gk in enumerate(g, start=1):
        a = admitted(0, k, r, acceptance)
        if a > 0:
            first[code(mode_after_arrival(0, a, H, R, policy), a)] += gk
    p_start = first.sum()
    first /= p_start
    depart = np.zeros((N, N))
    for s in range(3):
        for n in range(1, r + 1):
            depart[code(s, n), code(mode_after_departure(s, n - 1, L, H, R, policy), n - 1)] = 1.0
    T = np.array([(first if x % (r + 1) == 0 else np.eye(N)[x]) @ E @ depart for x in range(N)])
    occ = np.array([(first if x % (r + 1) == 0 else np.eye(N)[x]) @ occupation for x in range(N)])
    occ[np.arange(0, N, r + 1), np.arange(0, N, r + 1)] += 1.0 / (l0 * p_start)
    keep = reachable(T)
    pid = dense_stationary(T[np.ix_(keep, keep)] - np.eye(keep.size))
    time_in = pid @ occ[keep]
    return (time_in / time_in.sum()).reshape(3, r + 1)


@pytest.mark.parametrize("acceptance", ["partial", "whole"])
@pytest.mark.parametrize("policy", ["instant", "departure-epoch"])
@pytest.mark.parametrize("case", [(1, 3, 5, 5, 1.2, 0.5, [1.0], 1.0),
                                  (2, 4, 7, 9, 1.1, 0.6, [0.5, 0.3, 0.2], 0.9),
                                  (1, 2, 4, 8, 0.9, 0.5, [0.2, 0.0, 0.0, 0.8], 1.0),
                                  (0, 2, 4, 6, 2.0, 0.4, [0.2, 0.8], 0.7)],
                         ids=lambda c: "-".join(map(str, c[:4])))
def test_deterministic_service_against_matrix_exponentials(case, policy, acceptance):
    L, H, R, r, l0, l1, g, d = case
    ref = expm_embedded_law(L, H, R, r, l0, l1, g, d, policy, acceptance)
    q = HysteresisQueue(L, H, R, l0, l1, capacity=r, batch=g, service=deterministic(d), policy=policy,
                        acceptance=acceptance)
    np.testing.assert_allclose(full_width(q, "embedded"), ref, rtol=1e-9, atol=1e-13)
    mode = np.repeat(np.arange(3), r + 1)
    lev = np.tile(np.arange(r + 1), 3)
    want = reference_measures(mode, lev, ref.ravel(), L, H, R, r, l0, l1, g, acceptance)
    assert_measures_match(measures_of(q, "embedded", passage=False), want, rel=1e-8)


# ---------------------------------------------------------------------------
# route (a) against route (b)
# ---------------------------------------------------------------------------
SERVICES = {
    "M": exponential(1.3),
    "E4": erlang(4, 0.9),
    "H2": hyperexponential([0.3, 0.7], [0.5, 2.5]),
    "Cox3": coxian([2.0, 1.5, 3.0], [0.6, 0.4]),
    "PH": phase_type([0.6, 0.4, 0.0], [[-3.0, 1.0, 1.0], [0.5, -2.0, 0.5], [0.0, 1.0, -4.0]]),
}
BATCHES = {"single": None, "pmf": {1: 0.5, 2: 0.3, 3: 0.2}, "geom": geometric_batch(0.6),
           "fixed2": fixed_batch(2)}


@pytest.mark.parametrize("policy", ["instant", "departure-epoch"])
@pytest.mark.parametrize("acceptance", ["partial", "whole"])
@pytest.mark.parametrize("batch", list(BATCHES))
@pytest.mark.parametrize("service", list(SERVICES))
def test_routes_agree(service, batch, acceptance, policy):
    q = HysteresisQueue(3, 6, 9, 1.4, 0.6, capacity=11, service=SERVICES[service], batch=BATCHES[batch],
                        policy=policy, acceptance=acceptance)
    a, b = q.stationary("ctmc"), q.stationary("embedded")
    assert a.status == "success" and b.status == "success"
    np.testing.assert_allclose(b.levels(q.capacity + 1), a.levels(q.capacity + 1), atol=1e-10, rtol=0)
    assert q.loss_probability("embedded") == pytest.approx(q.loss_probability("ctmc"), abs=1e-10)


@pytest.mark.parametrize("k", [2, 3, 5])
def test_general_route_matches_erlang_ctmc(k):
    # a gamma law with integer shape k is Erlang-k: the quadrature route must match the CTMC
    q_ph = HysteresisQueue(2, 5, 8, 1.3, 0.5, capacity=9, service=erlang(k, 1.0), batch={1: 0.7, 2: 0.3})
    q_g = HysteresisQueue(2, 5, 8, 1.3, 0.5, capacity=9, service=st.gamma(k, scale=1.0 / k),
                          batch={1: 0.7, 2: 0.3})
    np.testing.assert_allclose(q_g.distribution(), q_ph.distribution(), atol=1e-9)


def test_cdf_callable_service_matches_hyperexponential():
    h = hyperexponential([0.4, 0.6], [0.7, 3.0])
    q_ph = HysteresisQueue(1, 4, 7, 1.0, 0.4, service=h)
    cdf = lambda t: 1 - 0.4 * math.exp(-0.7 * t) - 0.6 * math.exp(-3.0 * t)  # noqa: E731
    q_g = HysteresisQueue(1, 4, 7, 1.0, 0.4, service=general(cdf=cdf))
    assert q_g.service.mean == pytest.approx(h.mean, rel=1e-9)
    np.testing.assert_allclose(q_g.distribution(), q_ph.distribution(), atol=1e-9)


def test_erlang_converges_to_deterministic():
    kw = dict(L=3, H=7, R=10, lam=1.1, lam_overload=0.6, batch={1: 0.6, 2: 0.4})
    ref = HysteresisQueue(**kw, service=deterministic(1.0))
    p_det = ref.distribution()
    errs = [np.abs(HysteresisQueue(**kw, service=erlang(k, 1.0)).distribution("ctmc") - p_det).sum()
            for k in (1, 2, 4, 8, 16, 32, 64)]
    assert all(e2 < e1 for e1, e2 in zip(errs, errs[1:]))
    assert errs[-1] < 0.03 * errs[0]
    # first-order convergence in 1/k: the error halves when k doubles (roughly)
    assert 1.6 < errs[-2] / errs[-1] < 2.4


# ---------------------------------------------------------------------------
# invariants
# ---------------------------------------------------------------------------
INV_CASES = [
    dict(L=2, H=5, R=8, lam=1.2, lam_overload=0.6),
    dict(L=3, H=6, R=9, lam=0.9, lam_overload=0.4, capacity=12, batch=geometric_batch(0.5),
         service=erlang(3, 1.0)),
    dict(L=1, H=4, R=7, lam=1.5, lam_overload=0.7, batch={1: 0.2, 3: 0.8}, acceptance="whole",
         service=hyperexponential([0.5, 0.5], [0.8, 3.0])),
    dict(L=2, H=6, R=8, lam=1.3, lam_overload=0.5, capacity=10, policy="departure-epoch",
         batch={1: 0.5, 2: 0.5}, service=coxian([2.0, 2.5], [0.5])),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kw", INV_CASES)
def test_flow_balance_and_probabilities(kw, route):
    q = HysteresisQueue(**kw)
    law = q.stationary(route)
    assert (law.p >= 0).all() and law.p.sum() == pytest.approx(1, abs=1e-13)
    assert law.residual < 1e-12
    assert q.accepted_rate(route) == pytest.approx(q.throughput(route), rel=1e-10)
    br = q.loss_breakdown(route)
    assert br["total"] == pytest.approx(q.loss_probability(route), abs=1e-12)
    assert 0 <= q.loss_probability(route) <= 1 and 0 <= q.batch_loss_probability(route) <= 1
    if q.batch.pmf.size == 1:
        assert q.batch_loss_probability(route) == pytest.approx(q.loss_probability(route), rel=1e-12)
    flows = q.loss_by_flow(route)
    assert 0 <= flows["priority"] <= flows["other"] <= 1


@pytest.mark.parametrize("kw", INV_CASES)
def test_renewal_identities(kw):
    q = HysteresisQueue(**kw)
    pm = q.mode_probabilities("ctmc")
    cycle = q.mean_cycle()
    # P(normal) = E[normal period] / E[cycle] (renewal-reward, cycle from hitting times)
    assert pm[0] == pytest.approx(q.mean_normal_period() / cycle, rel=1e-9)
    assert pm[1] + pm[2] == pytest.approx(q.mean_return_time() / cycle, rel=1e-9)
    if pm[2] > 0:
        # discard entries per unit time times the mean discard time is P(discard)
        f = entrance(q, mode_mask(q, [2])).sum()
        assert pm[2] == pytest.approx(f * q.mean_discard_time(), rel=1e-9)
    assert q.mean_time_between_mode_changes() <= cycle / 2 + 1e-12


PASSAGE = ["mean_return_time", "mean_normal_period", "mean_discard_time", "mean_cycle",
           "mean_time_between_mode_changes"]


@pytest.mark.parametrize("measure", PASSAGE)
@pytest.mark.parametrize("kw", INV_CASES)
def test_passage_means_hitting_times_vs_embedded_renewal(kw, measure):
    # route (a): ctmc hitting times from the entrance law; route (b): renewal-reward
    # with exit rates from the embedded chain -- two different algorithms
    q = HysteresisQueue(**kw)
    a, b = getattr(q, measure)("ctmc"), getattr(q, measure)("embedded")
    assert b == pytest.approx(a, rel=1e-9)


def test_deterministic_passage_means_are_erlang_limits():
    kw = dict(L=3, H=7, R=10, lam=1.1, lam_overload=0.6)
    d = HysteresisQueue(**kw, service=deterministic(1.0))
    ret_d, cyc_d = d.mean_return_time(), d.mean_cycle()
    errs = [abs(HysteresisQueue(**kw, service=erlang(k, 1.0)).mean_return_time() - ret_d)
            for k in (4, 16, 64)]
    assert errs[0] > errs[1] > errs[2] and errs[2] < 0.01 * ret_d
    assert d.mode_probabilities()[0] == pytest.approx(d.mean_normal_period() / cyc_d, rel=1e-12)


@pytest.mark.parametrize("policy", ["instant", "departure-epoch"])
@pytest.mark.parametrize("batch", [{1: 0.5, 2: 0.3, 3: 0.2}, geometric_batch(0.4), None])
def test_level_crossing_identity(batch, policy):
    mu = 1.3
    q = HysteresisQueue(2, 6, 9, 1.0, 0.45, mu=mu, capacity=11, batch=batch, policy=policy)
    p = full_width(q, "ctmc")
    rates = q.rates
    pn = p.sum(axis=0)
    for n in range(q.capacity):
        j = np.arange(n + 1)
        up = sum(rates[s] * p[s, j] @ q.batch.tail(n - j) for s in range(3))
        assert mu * pn[n + 1] == pytest.approx(up, rel=1e-10)


def test_return_time_cdf_consistent_with_mean():
    q = HysteresisQueue(2, 5, 8, 1.2, 0.6, service=erlang(2, 1.0))
    t = np.linspace(0, 200, 4001)
    F = q.return_time_cdf(t)
    assert F[0] == pytest.approx(0, abs=1e-14) and F[-1] == pytest.approx(1, abs=1e-9)
    assert (np.diff(F) >= -1e-11).all()
    mean = np.trapz(1 - F, t)
    assert mean == pytest.approx(q.mean_return_time(), rel=1e-4)


@pytest.mark.parametrize("kw", INV_CASES[:2])
def test_return_time_laplace_transform(kw):
    q = HysteresisQueue(**kw)
    h = 1e-6
    phi = q.return_time_laplace([0.0, h, 2 * h])
    assert phi[0] == pytest.approx(1.0, abs=1e-12)
    # -(d/ds) phi at 0 is the mean (second-order one-sided difference)
    deriv = -(-3 * phi[0] + 4 * phi[1] - phi[2]) / (2 * h)
    assert deriv == pytest.approx(q.mean_return_time(), rel=1e-5)
    assert (np.diff(q.return_time_laplace(np.linspace(0, 2, 9))) < 0).all()


def test_queue_counting_convention_shifts_thresholds():
    a = HysteresisQueue(2, 5, 8, 1.2, 0.6, counting="queue")
    b = HysteresisQueue(3, 6, 9, 1.2, 0.6)
    np.testing.assert_allclose(a.distribution(), b.distribution(), rtol=1e-13)
    assert (a.L, a.H, a.R, a.capacity) == (3, 6, 9, 9)
    assert "L=2, H=5, R=8, capacity=8" in repr(a) and "counting='queue'" in repr(a)
    assert "L=3, H=6, R=9, capacity=9" in repr(b) and "counting" not in repr(b)


@pytest.mark.parametrize("route", ROUTES)
def test_departure_epoch_discard_needs_capacity_above_R(route):
    # decisions see n+ <= capacity - 1: with capacity = R discard is unreachable
    kw = dict(L=2, H=5, R=8, lam=1.5, lam_overload=1.2, policy="departure-epoch")
    q = HysteresisQueue(**kw)
    assert q.mode_probabilities(route)[2] == 0 and math.isnan(q.mean_discard_time(route))
    q = HysteresisQueue(**kw, capacity=9)
    assert q.mode_probabilities(route)[2] > 1e-3 and q.mean_discard_time(route) > 0


def test_departure_epoch_modes_change_only_at_departures():
    q = HysteresisQueue(2, 5, 8, 1.2, 0.6, capacity=10, service=erlang(2, 1.0), policy="departure-epoch")
    c = q.chain()
    Q = c.Q.tocoo()
    mode, n = c.states["mode"], c.states["n"]
    switch = mode[Q.row] != mode[Q.col]
    assert switch.any()
    assert (n[Q.col[switch]] == n[Q.row[switch]] - 1).all()


def test_instant_policy_reachable_states():
    L, H, R = 3, 7, 11
    c = HysteresisQueue(L, H, R, 1.0, 0.5).chain()
    got = set(zip(c.states["mode"].tolist(), c.states["n"].tolist()))
    want = ({(0, n) for n in range(H)} | {(1, n) for n in range(L + 1, R)}
            | {(2, n) for n in range(H + 1, R + 1)})
    assert got == want


# ---------------------------------------------------------------------------
# invalid input
# ---------------------------------------------------------------------------
BAD = [
    (dict(L=5, H=5, R=8), "H"),
    (dict(L=2, H=8, R=8), "R"),
    (dict(L=-1, H=3, R=8), "L"),
    (dict(L=1, H=3, R=8, capacity=7), "capacity"),
    (dict(L=1.5, H=3, R=8), "L"),
    (dict(lam=0.0), "lam"),
    (dict(lam=-1.0), "lam"),
    (dict(lam_overload=-0.1), "lam_overload"),
    (dict(lam_overload=5.0), "lam_overload"),
    (dict(mu=0.0), "mu"),
    (dict(batch={1: 0.5, 2: 0.4}), "batch"),
    (dict(batch=[0.5, -0.1, 0.6]), "batch"),
    (dict(batch={0: 1.0}), "batch"),
    (dict(policy="sometimes"), "policy"),
    (dict(acceptance="maybe"), "acceptance"),
    (dict(counting="bytes"), "counting"),
    (dict(service="exp"), "service"),
]


@pytest.mark.parametrize("kw,name", BAD)
def test_invalid_parameters_raise(kw, name):
    args = dict(L=2, H=5, R=8, lam=1.0, lam_overload=0.5)
    args.update(kw)
    with pytest.raises(ValueError, match=name):
        HysteresisQueue(**args)


@pytest.mark.parametrize("make,name", [
    (lambda: phase_type([1.0, 0.0], [[-1.0, 1.0], [1.0, -1.0]]), "S"),   # never absorbs
    (lambda: phase_type([0.5, 0.4], [[-1.0, 0.0], [0.0, -1.0]]), "alpha"),
    (lambda: phase_type([1.0], [[1.0]]), "S"),
    (lambda: phase_type([1.0, 0.0], [[-1.0, -0.5], [0.0, -1.0]]), "S"),
    (lambda: erlang(0), "k"),
    (lambda: hyperexponential([0.5, 0.5], [1.0, 0.0]), "rates"),
    (lambda: coxian([1.0, 2.0], [1.5]), "continue_probs"),
    (lambda: deterministic(-1.0), "d"),
    (lambda: geometric_batch(0.0), "p"),
    (lambda: fixed_batch(0), "k"),
    (lambda: BatchSize([0.3, 0.3]), "batch"),
    (lambda: general(st.norm(0, 1)), "dist"),
    # a defective CDF (tends to 1/2), with and without a mean: used to run for minutes
    (lambda: general(cdf=lambda t: 0.5 * (1 - math.exp(-t)), mean=1.0), "cdf"),
    (lambda: general(cdf=lambda t: 0.5 * (1 - math.exp(-t))), "cdf"),
    # a mean contradicting the CDF (exponential, mean 1): used to be taken as given
    (lambda: general(cdf=lambda t: 1 - math.exp(-t), mean=3.0), "mean"),
    (lambda: general(cdf=lambda t: 1.5 - math.exp(-t)), "cdf"),
    (lambda: general(cdf=lambda t: math.exp(-t)), "cdf"),
])
def test_invalid_laws_raise(make, name):
    with pytest.raises(ValueError, match=name):
        make()


def test_route_errors_are_clear():
    q = HysteresisQueue(2, 5, 8, 1.0, 0.5, service=deterministic(1.0))
    with pytest.raises(ValueError, match="route"):
        q.chain()
    with pytest.raises(ValueError, match="route"):
        q.mean_return_time("ctmc")
    with pytest.raises(ValueError, match="route"):
        q.return_times()
    with pytest.raises(ValueError, match="route"):
        q.stationary("magic")
    big = HysteresisQueue(2, 5, 10, 1.0, 0.5, capacity=40_000, policy="departure-epoch")
    with pytest.raises(ValueError, match="capacity.*MEMORY_BUDGET"):   # refused before heavy work
        big.stationary("embedded")


# ---------------------------------------------------------------------------
# examples
# ---------------------------------------------------------------------------
def test_literature_example_checks_hold(capsys):
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "examples"))
    import hysteresis_literature as ex
    worst = ex.main()
    out = capsys.readouterr().out
    assert worst < 1e-12
    assert "matches (0, 0..H-1), (1, L+1..R-1), (2, H+1..R): True" in out


def test_width_example_shows_the_trade_off(tmp_path, capsys):
    # the example's claim: widening <L, H> (L down, H and R fixed) gives fewer mode
    # switches and a longer cycle, but more loss
    import pathlib
    import sys
    sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "examples"))
    import hysteresis_width as ex
    rows = ex.main(["--plots", str(tmp_path)])   # (L, E[cycle], switches per 1000, loss), width growing
    assert (np.diff(rows[:, 0]) < 0).all() and len(rows) >= 5
    assert (np.diff(rows[:, 1]) > 0).all()
    assert (np.diff(rows[:, 2]) < 0).all()
    assert (np.diff(rows[:, 3]) > 0).all()
    assert rows[0, 2] > 10 * rows[-1, 2]           # not a marginal effect
    assert (tmp_path / "hysteresis_width.png").stat().st_size > 10000


def test_two_flow_single_arrivals_loss_is_discard_probability():
    # single arrivals, instant policy, capacity R: the priority flow is lost only in discard
    # mode (n = R is always discard), the other flow in overload and discard
    q = HysteresisQueue(2, 5, 8, 1.2, 0.7)
    f = q.loss_by_flow()
    pm = q.mode_probabilities()
    assert f["priority"] == pytest.approx(pm[2], rel=1e-12)
    assert f["other"] == pytest.approx(pm[1] + pm[2], rel=1e-12)


try:
    from hypothesis import given, settings
    from hypothesis import strategies as hs
except ImportError:  # pragma: no cover
    given = None

if given is not None:
    @settings(max_examples=25, deadline=None)
    @given(L=hs.integers(0, 4), dH=hs.integers(1, 4), dR=hs.integers(1, 4), extra=hs.integers(0, 3),
           lam=hs.floats(0.2, 3.0), frac=hs.one_of(hs.just(0.0), hs.floats(0.01, 1.0)), k=hs.integers(1, 3),
           pmf=hs.lists(hs.floats(0.05, 1.0), min_size=1, max_size=4),
           policy=hs.sampled_from(["instant", "departure-epoch"]),
           acceptance=hs.sampled_from(["partial", "whole"]))
    def test_random_queues_routes_agree(L, dH, dR, extra, lam, frac, k, pmf, policy, acceptance):
        H = L + dH
        R = H + dR
        batch = np.array(pmf) / sum(pmf)
        q = HysteresisQueue(L, H, R, lam, lam * frac, capacity=R + extra, batch=batch,
                            service=erlang(k, 1.0), policy=policy, acceptance=acceptance)
        a, b = q.stationary("ctmc"), q.stationary("embedded")
        np.testing.assert_allclose(b.levels(q.capacity + 1), a.levels(q.capacity + 1), atol=1e-10)
        assert q.accepted_rate() == pytest.approx(q.throughput(), rel=1e-9)
        assert q.mode_probabilities()[0] == pytest.approx(q.mean_normal_period() / q.mean_cycle(), rel=1e-8)


# ---------------------------------------------------------------------------
# the ``ctmc hysteresis`` command
# ---------------------------------------------------------------------------
def run_cli(argv, capsys):
    from ctmc.cli import main
    assert main(["hysteresis", *argv]) == 0
    out = capsys.readouterr().out.splitlines()
    values = {}
    for line in out[1:]:
        key, _, val = line.strip().rpartition(" ")
        values[key.strip()] = val
    return out[0], values


CLI_CASES = [  # (arguments, the same queue through the API, route)
    (["--L", "2", "--H", "5", "--R", "8", "--lam", "1.2", "--lam-overload", "0.6"],
     lambda: HysteresisQueue(2, 5, 8, 1.2, 0.6), "ctmc"),
    (["--L", "3", "--H", "6", "--R", "9", "--capacity", "11", "--lam", "0.9", "--lam-overload", "0.4",
      "--mu", "1.5", "--erlang", "3", "--batch-geometric", "0.6", "--policy", "departure-epoch",
      "--acceptance", "whole"],
     lambda: HysteresisQueue(3, 6, 9, 0.9, 0.4, capacity=11, service=erlang(3, 1 / 1.5),
                             batch=geometric_batch(0.6), policy="departure-epoch", acceptance="whole"),
     "ctmc"),
    (["--L", "1", "--H", "4", "--R", "7", "--lam", "1.0", "--lam-overload", "0.5", "--deterministic",
      "--batch-fixed", "2"],
     lambda: HysteresisQueue(1, 4, 7, 1.0, 0.5, service=deterministic(1.0), batch=fixed_batch(2)),
     "embedded"),
]


@pytest.mark.parametrize("argv,make,route", CLI_CASES)
def test_cli_prints_the_api_measures(argv, make, route, capsys):
    head, values = run_cli(argv, capsys)
    q = make()
    assert head == repr(q)
    summary = q.summary()
    assert values["route"] == route == summary["route"] and values["status"] == "success"
    for key in ["P(normal)", "P(overload)", "P(discard)", "loss", "batch loss", "E[N]", "E[sojourn]",
                "E[return time]", "E[normal period]", "E[cycle]"]:
        assert float(values[key]) == pytest.approx(summary[key], rel=1e-9), key


@pytest.mark.parametrize("argv,name", [
    (["--L", "5", "--H", "3"], "H"),
    (["--R", "8", "--capacity", "7"], "capacity"),
    (["--lam", "0"], "lam"),
    (["--mu", "0"], "mu"),
    (["--deterministic", "--route", "ctmc"], "route"),
    (["--deterministic", "--erlang", "5"], "not allowed"),
    (["--batch-fixed", "2", "--batch-geometric", "0.5"], "not allowed"),
])
def test_cli_reports_bad_input_in_one_line(argv, name, capsys):
    from ctmc.cli import main
    with pytest.raises(SystemExit) as exc:
        main(["hysteresis", "--L", "2", "--H", "5", "--R", "8", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ctmc hysteresis: error:") and name in err[-1]
    assert not any("Traceback" in line for line in err)


# ---------------------------------------------------------------------------
# the chain at scale: structured assembly, the elimination over the levels, PETSc
# ---------------------------------------------------------------------------
ASSEMBLY_CASES = [  # (service, batch, policy, acceptance, capacity)
    (None, None, "instant", "partial", None),
    (erlang(3, 1.0), {1: 0.5, 2: 0.3, 4: 0.2}, "instant", "partial", 12),
    (hyperexponential([0.3, 0.7], [0.5, 2.0]), geometric_batch(0.4), "departure-epoch", "partial", 12),
    (coxian([2.0, 1.5, 1.0], [0.6, 0.3]), geometric_batch(0.4), "instant", "whole", None),
    (phase_type([0.2, 0.5, 0.3], [[-3, 1, 0.5], [0.2, -2, 1], [0, 0.4, -1.5]]), {1: 0.5, 3: 0.5},
     "departure-epoch", "whole", 12),
    (erlang(2, 1.0), {1: 0.5, 3: 0.5}, "instant", "partial", 40),     # levels 12..40 never reached
]


@pytest.mark.parametrize("service, batch, policy, acceptance, capacity", ASSEMBLY_CASES)
def test_assembled_chain_is_the_model_build_to_the_bit(service, batch, policy, acceptance, capacity):
    q = HysteresisQueue(2, 5, 9, 1.2, 0.6, capacity=capacity, batch=batch, service=service, policy=policy,
                        acceptance=acceptance)
    old = q.model().build(initial={"mode": 0, "n": 0, "phase": 0}, progress=False)
    new = q.chain()
    for v in ("n", "mode", "phase"):
        assert np.array_equal(old.states[v], new.states[v])
    assert abs(old.Q - new.Q).max() == 0.0


@pytest.mark.parametrize("service, batch, policy, acceptance, capacity", ASSEMBLY_CASES)
def test_level_elimination_against_gth(service, batch, policy, acceptance, capacity):
    q = HysteresisQueue(2, 5, 9, 1.2, 0.6, capacity=capacity, batch=batch, service=service, policy=policy,
                        acceptance=acceptance)
    res = q.stationary_ctmc()
    assert res.method == "levels" and res.status == "success" and res.balance_error < 1e-12
    ref = q.chain().stationary("gth").pi
    assert np.max(np.abs(res.pi - ref) / ref) < 1e-12


def test_level_elimination_keeps_far_tails_relative():
    # light load: probabilities down to 6e-154; GTH (dense, subtraction-free) is the reference
    q = HysteresisQueue(3, 60, 140, 0.04, 0.02, batch={1: 0.7, 2: 0.3}, service=erlang(2, 1.0))
    res = q.stationary_ctmc()
    ref = q.chain().stationary("gth").pi
    assert ref.min() < 1e-150 and res.status == "success"
    assert np.max(np.abs(res.pi - ref) / ref) < 1e-11


def test_level_elimination_many_phases_against_lu_and_level_crossing():
    # 40 phases, geometric batches spanning 30 levels: the level crossing identity with PH
    # service, the down-crossing rate being sum_j p(s, n + 1, j) s0_j
    q = HysteresisQueue(30, 90, 150, 1.1, 0.7, batch=geometric_batch(0.5), service=erlang(40, 1.5))
    res = q.stationary_ctmc()
    chain = q.chain()
    lu = chain.stationary("lu").pi
    big = lu > 1e-250
    assert np.max(np.abs(res.pi[big] - lu[big]) / lu[big]) < 1e-9
    st_ = chain.states
    s0 = q.service.exit_rates[st_["phase"]]
    busy = st_["n"] >= 1
    down = np.bincount(st_["n"][busy], weights=res.pi[busy] * s0[busy], minlength=q.capacity + 1)
    p = full_width(q, "ctmc")
    for n in range(q.capacity):
        j = np.arange(n + 1)
        up = sum(q.rates[s] * p[s, j] @ q.batch.tail(n - j) for s in range(3))
        assert down[n + 1] == pytest.approx(up, rel=1e-10)


@pytest.mark.parametrize("kw", [dict(service=erlang(3, 1.0), batch={1: 0.6, 3: 0.4}),
                                dict(service=hyperexponential([0.4, 0.6], [0.6, 2.5]), capacity=12,
                                     policy="departure-epoch")])
def test_renewal_mean_stays_equal_hitting_times_from_the_entrance_law(kw):
    q = HysteresisQueue(2, 5, 9, 1.3, 0.6, **kw)
    chain = q.chain()
    for modes, got in (([1, 2], q.mean_return_time()), ([0], q.mean_normal_period()),
                       ([2], q.mean_discard_time())):
        inside = mode_mask(q, modes)
        f = entrance(q, inside)
        h = chain.hitting_times(~inside).mean
        assert got == pytest.approx(f @ h / f.sum(), rel=1e-11)


def test_backend_and_method_errors_are_clear():
    with pytest.raises(ValueError, match="backend"):
        HysteresisQueue(2, 5, 8, 1.0, 0.5, backend="cuda")
    q = HysteresisQueue(2, 5, 8, 1.0, 0.5, backend="petsc")
    with pytest.raises(ValueError, match="method"):
        q.stationary_ctmc("levels")


@pytest.mark.petsc
@needs_mpi
def test_petsc_backend_on_two_processes_matches_the_level_elimination(tmp_path):
    from pathlib import Path
    from hysteresis_cases import petsc_queue
    job = run_job(Path(__file__).resolve().parent / "hysteresis_cases.py", tmp_path / "hyst.json")
    assert job["backend"] == "petsc" and job["status"] == "success"
    q = petsc_queue("scipy")
    ref = q.stationary_ctmc().pi
    pi = np.array(job["pi"])
    assert ref.min() < 1e-25                      # the smallest probabilities are tested too
    assert np.max(np.abs(pi - ref) / ref) < 1e-9
    ref_summary = q.summary()
    for k, v in job["summary"].items():
        if k != "residual":
            assert v == pytest.approx(ref_summary[k], rel=1e-9), k


def test_levels_hand_over_to_ctmc_beyond_their_memory_budget(monkeypatch):
    from ctmc.models.hysteresis import ctmc_route
    make = lambda: HysteresisQueue(2, 6, 12, 1.1, 0.5, batch={1: 0.5, 3: 0.5}, service=erlang(3, 1.0))
    ref = make().stationary_ctmc()
    monkeypatch.setattr(ctmc_route, "LEVELS_MEMORY", 0)
    res = make().stationary_ctmc()
    assert ref.method == "levels" and res.method != "levels" and res.status == "success"
    assert np.max(np.abs(res.pi - ref.pi) / ref.pi) < 1e-9


# ---------------------------------------------------------------------------
# embedded route: GTH from the top on the level-Hessenberg chain
# ---------------------------------------------------------------------------
def test_hessenberg_gth_against_dense_gth_far_tails():
    # a random chain, down by at most one level per step, entries spread over
    # 1e-20..1 and decaying upwards: the banded elimination must equal ctmc's dense GTH to rounding
    import ctmc
    from ctmc.models.hysteresis.embedded import gth_hessenberg
    rng = np.random.default_rng(7)
    level = np.repeat(np.arange(40), 3)
    K = level.size
    up = np.maximum(level[None, :] - level[:, None], 0)
    P = rng.random((K, K)) * 10.0 ** rng.uniform(-20, 0, (K, K)) * 1e-3 ** up   # tails ~1e-90
    P[level[None, :] < level[:, None] - 1] = 0.0
    P[np.arange(3, K), np.arange(0, K - 3)] += 0.5          # keep it irreducible downwards
    P /= P.sum(axis=1, keepdims=True)
    ref = ctmc.CTMC.from_rates(P.copy()).stationary(method="gth").pi
    pi, ok = gth_hessenberg(P.copy(), level)
    assert ok and ref.min() < 1e-60
    np.testing.assert_allclose(pi, ref, rtol=1e-13, atol=0)


EMBEDDED_DENSE_CASES = [
    dict(L=2, H=6, R=10, lam=1.3, lam_overload=0.7, capacity=14, batch={1: .5, 2: .3, 4: .2},
         service=deterministic(1.0), acceptance="whole"),
    dict(L=3, H=9, R=15, lam=0.4, lam_overload=0.2, capacity=18, batch={1: .6, 3: .4},
         service=erlang(3), policy="departure-epoch"),
    dict(L=10, H=40, R=80, lam=0.9, lam_overload=0.5, capacity=120, batch={1: .5, 2: .5},
         service=deterministic(1.0), policy="departure-epoch"),   # tail ~1e-66
]


@pytest.mark.parametrize("kw", EMBEDDED_DENSE_CASES)
def test_embedded_route_equals_dense_gth_reference(kw):
    from ctmc.models.hysteresis.embedded import dense_departure_law
    q = HysteresisQueue(**kw)
    states, pi = q.stationary("embedded").info["departure_law"]
    ref_states, ref = dense_departure_law(q)
    np.testing.assert_array_equal(states, ref_states)
    np.testing.assert_allclose(pi, ref, rtol=1e-13, atol=0)


def test_embedded_route_medium_capacity_vs_ctmc_and_level_crossing():
    # capacity 400, Erlang-2 service, batches, departure-epoch policy (every level
    # reachable): the embedded route against the CTMC route (another algorithm on
    # another chain), tails included; and for deterministic service, where no CTMC
    # exists, the level-crossing identity of the time-average law
    #   nu P^d(n) = sum_s lam_s sum_{j <= n} p(s, j) P(X > n - j),  n < r
    # (nu the departure rate, P^d the law left by departures; partial acceptance).
    kw = dict(L=50, H=200, R=300, lam=1.1, lam_overload=0.45, capacity=400,
              batch={1: .5, 2: .3, 3: .2}, policy="departure-epoch")
    q = HysteresisQueue(service=erlang(2), **kw)
    a, b = q.stationary("ctmc"), q.stationary("embedded")
    pa, pb = full_width(q, "ctmc"), full_width(q, "embedded")
    assert pa[pa > 0].min() < 1e-40
    np.testing.assert_allclose(pb, pa, rtol=1e-9, atol=0)
    qd = HysteresisQueue(service=deterministic(1.0), **kw)
    law = qd.stationary("embedded")
    r = qd.capacity
    states, pid = law.info["departure_law"]
    pdn = np.zeros(r + 1)
    np.add.at(pdn, states % (r + 1), pid)
    g = qd.batch_pmf()
    tail = np.concatenate([[1.0], 1.0 - np.cumsum(g)])          # P(X > k), k = 0..
    tail = np.concatenate([tail, np.zeros(r + 1)])
    p = law.p
    up = np.array([sum(qd.rates[s] * (p[s, :n + 1] @ tail[n - np.arange(n + 1)]) for s in range(3))
                   for n in range(r)])
    down = law.info["departure_rate"] * pdn[:r]
    assert down[down > 0].min() < 1e-30
    np.testing.assert_allclose(down, up, rtol=1e-10, atol=0)


def test_hessenberg_gth_law_growing_over_1e308_up_the_levels():
    # overloaded: each level ~1e4 likelier than the one below, over 90 levels; the
    # unnormalised back-substitution would overflow, the normalised law must not
    import ctmc
    from ctmc.models.hysteresis.embedded import gth_hessenberg
    rng = np.random.default_rng(3)
    level = np.repeat(np.arange(90), 2)
    K = level.size
    P = rng.random((K, K)) * (level[None, :] >= level[:, None])
    P[level[None, :] == level[:, None] - 1] = 1e-4 * rng.random(np.sum(level[None, :] == level[:, None] - 1))
    P /= P.sum(axis=1, keepdims=True)
    pi, ok = gth_hessenberg(P.copy(), level)
    assert ok and np.isfinite(pi).all() and pi[pi > 0].min() < 1e-300
    # balance pi P = pi, state by state, relative to each state's own probability
    keep = pi > 1e-290
    np.testing.assert_allclose((pi @ P)[keep], pi[keep], rtol=1e-12, atol=0)


# ---------------------------------------------------------------------------
# the level law graded by ctmc's "given" method (the evidence of every ctmc method)
# ---------------------------------------------------------------------------
def _hand_graded(q):
    """The evidence and status of the level law as level_stationary graded it by hand before "given"."""
    from ctmc.models.hysteresis.levels import level_law
    from ctmc.options import Tolerances
    chain = q.chain()
    p0, p = level_law(q)
    st_ = chain.states
    x = np.where(st_["n"] == 0, p0[st_["mode"]], p[st_["n"], st_["mode"], st_["phase"]])
    pi = x / x.sum()
    flow = chain.Q.T @ pi
    out = -chain.Q.diagonal()
    ok = pi >= np.finfo(float).tiny
    bal = float(np.max(np.abs(flow[ok]) / (pi[ok] * out[ok])))
    rel = float(np.abs(flow).sum()) / out.max()
    tol = Tolerances()
    status = ("inaccurate" if not rel <= tol.tol else "tail_inaccurate" if not bal <= tol.tail_tol
              else "success")
    return pi, float(np.abs(flow).sum()), bal, status


GIVEN_CASES = [dict(service=erlang(3, 1.0)), dict(service=erlang(3, 1.0), batch={1: 0.6, 3: 0.4}),
               dict(service=hyperexponential([0.4, 0.6], [0.6, 2.5]), capacity=12, policy="departure-epoch"),
               dict(service=coxian([2.0, 1.5, 1.0], [0.6, 0.3]), batch=geometric_batch(0.4),
                    acceptance="whole")]


@pytest.mark.parametrize("kw", GIVEN_CASES)
def test_level_law_graded_by_given_as_by_the_old_hand_grading(kw):
    q = HysteresisQueue(2, 5, 9, 1.3, 0.6, **kw)
    pi, residual, bal, status = _hand_graded(q)
    res = q.stationary_ctmc()
    assert res.method == "levels" and res.status.value == status
    assert np.max(np.abs(res.pi - pi) / pi) <= 1e-14
    assert res.residual == pytest.approx(residual, rel=1e-9, abs=1e-15)
    assert res.balance_error == pytest.approx(bal, rel=1e-6, abs=1e-14)
    assert np.isnan(res.error_bound) and res.info["error_bound_kind"].startswith("none")
    assert "mass_outside" in res.info and res.info["mass_outside"] < 1e-14


def test_light_load_far_tail_grades_alike():
    # probabilities down to 6e-154: the balance error is graded state by state down there
    q = HysteresisQueue(3, 60, 140, 0.04, 0.02, batch={1: 0.7, 2: 0.3}, service=erlang(2, 1.0))
    pi, residual, bal, status = _hand_graded(q)
    res = q.stationary_ctmc()
    assert res.status.value == status and res.balance_error == pytest.approx(bal, rel=1e-6, abs=1e-14)
    assert np.max(np.abs(res.pi - pi) / pi) <= 1e-14


@pytest.mark.parametrize("kw", [dict(service=erlang(4, 1.0)),
                                dict(service=erlang(3, 1.0), batch={1: 0.6, 3: 0.4})])
def test_level_law_proven_bound_on_request_holds(kw):
    q = HysteresisQueue(3, 8, 14, 1.2, 0.7, **kw)
    res = q.stationary_ctmc(bound=True)
    assert res.method == "levels" and res.status == "success" and res.info["error_bound_kind"] == "proven"
    # single arrivals move the level by one: the return times are solved on the levels
    single = "batch" not in kw
    assert (res.info["return_time_solver"] == "level") == single
    exact = q.chain().stationary("gth").pi
    assert np.abs(res.pi - exact).sum() <= res.error_bound <= 1e-6
    assert q.stationary_ctmc() is res                 # the bounded result serves the measures too
    assert q.stationary("ctmc").info["error_bound"] == res.error_bound
    with pytest.raises(ValueError, match="bound: expected True or False"):
        q.stationary_ctmc(bound="yes")


def test_cli_bound_prints_the_proven_bound_of_the_law(capsys):
    argv = ["--L", "2", "--H", "5", "--R", "8", "--lam", "1.2", "--lam-overload", "0.6", "--erlang", "3"]
    head, values = run_cli([*argv, "--bound"], capsys)
    q = HysteresisQueue(2, 5, 8, 1.2, 0.6, service=erlang(3, 1.0))
    res = q.stationary_ctmc(bound=True)
    exact = q.chain().stationary("gth").pi
    assert float(values["error bound"]) == pytest.approx(res.error_bound, rel=1e-9)
    assert np.abs(res.pi - exact).sum() <= float(values["error bound"]) <= 1e-6
    assert values["status"] == "success"
    assert "error bound" not in run_cli(argv, capsys)[1]
    from ctmc.cli import main
    with pytest.raises(SystemExit):
        main(["hysteresis", *argv[:-2], "--deterministic", "--bound"])
    assert "bound: the proven error bound is of route 'ctmc'" in capsys.readouterr().err


@pytest.mark.parametrize("service, batch, policy, acceptance, capacity", ASSEMBLY_CASES)
def test_model_compiles_and_both_builders_give_the_assembled_chain_to_the_bit(service, batch, policy,
                                                                              acceptance, capacity):
    """The Model's phase-type rates are ctmc expressions (no Python function): the compiled builder
    (which the simulator runs) and the vectorised one both build the generator of the numpy level
    assembly, to the bit, states in the same order."""
    q = HysteresisQueue(2, 5, 9, 1.2, 0.6, capacity=capacity, batch=batch, service=service, policy=policy,
                        acceptance=acceptance)
    model, ref = q.model(), q.chain()
    assert not any(ctmc.expr.calls_function(e) for ev in model.events for e in (ev.guard, ev.rate))
    for engine in ("compiled", "numpy"):
        built = model.build(initial={"mode": 0, "n": 0, "phase": 0}, progress=False, engine=engine)
        assert built.build_info["engine"] == engine
        for v in ("n", "mode", "phase"):
            assert np.array_equal(built.states[v], ref.states[v])
        assert (built.Q != ref.Q).nnz == 0
