"""Supermarket (power-of-d) model: exact occupancy chain against independent answers.

Published numbers are from N. Gast, L. Bortolussi, M. Tribastone, "Size expansions
of mean field approximation: transient and steady-state analysis", Performance
Evaluation 2018 (IFIP Performance 2018); LaTeX source github.com/ngast/sizeExpansionMeanField,
paper/sizeExpansionMeanField.tex: Table "tab:SIS" (malware model) and Table
"tab:supermarket" (steady-state average queue length; simulations sample the d
queues with replacement; no confidence interval is printed, each value is the
average of 1000 independent time averages).

The mean-field functions of ``models.supermarket`` go through ``ctmc.meanfield``
(the supermarket declared as a population model); ``reference_supermarket_mf``
holds the hand-derived tail-coordinate code they replaced, the independent answer
the generic route must match to 1e-10.
"""
import itertools
import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import ctmc
from ctmc.models import supermarket as smk
from ctmc.models.supermarket import (Supermarket, join_probabilities, lump_per_queue,
                                     mean_field_derivatives, mean_field_drift, mean_field_fixed_point,
                                     mean_field_ode, n_occupancy_states, occupancy_generator,
                                     occupancy_rank, occupancy_states, per_queue_model, population_model,
                                     refined_correction, refined_mean_field)

import reference_supermarket_mf as hand
from supermarket_cases import MALWARE, PUBLISHED_RMF


# ---------------------------------------------------------------------------
# state space and sampling
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n,B", [(1, 1), (1, 5), (2, 3), (5, 1), (4, 4), (7, 3), (3, 9)])
def test_occupancy_states_are_all_tail_vectors_in_rank_order(n, B):
    M = occupancy_states(n, B)
    brute = [t for t in itertools.product(range(n + 1), repeat=B)
             if all(t[i] >= t[i + 1] for i in range(B - 1))]
    assert M.shape == (len(brute), B) == (math.comb(n + B, B), B) == (n_occupancy_states(n, B), B)
    assert {tuple(r) for r in M.tolist()} == set(brute)
    assert np.array_equal(occupancy_rank(M, n), np.arange(M.shape[0]))


def _join_brute(m, d, replacement):
    """Law of the joined queue's length by enumerating labelled queues and samples."""
    q = np.repeat(np.arange(len(m)), m)
    n = q.size
    samples = itertools.product(range(n), repeat=d) if replacement else itertools.combinations(range(n), d)
    p = np.zeros(len(m))
    count = 0
    for smp in samples:
        p[min(q[list(smp)])] += 1
        count += 1
    return p / count


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("m", [(1, 1, 0), (0, 2, 3), (3, 0, 1, 1), (2, 2, 2, 0, 1), (0, 0, 4)])
def test_join_probabilities_match_enumeration(m, d, replacement):
    if not replacement and d > sum(m):
        with pytest.raises(ValueError, match="d"):
            join_probabilities(m, d, replacement)
        return
    p = join_probabilities(m, d, replacement)
    assert np.allclose(p, _join_brute(m, d, replacement), rtol=1e-13, atol=1e-15)
    assert p.sum() == pytest.approx(1.0, rel=1e-14)


# ---------------------------------------------------------------------------
# lumping: per-queue chain (ctmc.Model) vs occupancy chain
# ---------------------------------------------------------------------------
LUMP_CASES = [  # n, d, lam, B, replacement
    (2, 2, 0.9, 4, True), (3, 2, 0.9, 3, True), (3, 2, 0.9, 3, False), (3, 3, 1.3, 2, True),
    (4, 2, 0.7, 2, False), (3, 1, 0.8, 3, True), (4, 4, 0.9, 2, False), (2, 3, 0.5, 5, True),
]


@pytest.mark.parametrize("n,d,lam,B,repl", LUMP_CASES)
def test_per_queue_chain_lumps_onto_occupancy_chain(n, d, lam, B, repl):
    pq = per_queue_model(n, d, lam, B, repl).build(initial={f"q{i}": 0 for i in range(n)})
    assert pq.n_states == (B + 1) ** n
    Qo = occupancy_generator(n, d, lam, B, repl)
    # strong lumpability: from every labelled state, the rate into each occupancy class
    # equals the occupancy generator's rate (brute-force routing vs combinatorial rates)
    q = pq.states.as_array()
    M = np.stack([(q >= k).sum(axis=1) for k in range(1, B + 1)], axis=1)
    cls = occupancy_rank(M, n)
    L = sp.csr_matrix((np.ones(cls.size), (np.arange(cls.size), cls)), shape=(cls.size, Qo.shape[0]))
    agg = (pq.Q @ L).toarray()
    assert np.allclose(agg, Qo.toarray()[cls], rtol=1e-12, atol=1e-12)
    # and the stationary laws agree (GTH on both chains)
    pi_pq = pq.stationary("gth").pi
    pi_occ = ctmc.CTMC(Qo).stationary("gth").pi
    assert np.allclose(lump_per_queue(pq, pi_pq, B), pi_occ, rtol=1e-9, atol=0)


# ---------------------------------------------------------------------------
# closed forms: d = 1 (independent M/M/1/B queues) and n = 1
# ---------------------------------------------------------------------------
def _mm1b(lam, B):
    p = lam ** np.arange(B + 1, dtype=float)
    return p / p.sum()


@pytest.mark.parametrize("method", ["ctmc-auto", "level-iad", "lu"])
@pytest.mark.parametrize("n,lam,B", [(3, 0.5, 6), (2, 0.3, 30), (5, 1.5, 5), (2, 0.9, 40)])
def test_random_routing_is_product_form(n, lam, B, method):
    s = Supermarket(n, 1, lam, capacity=B, method=method)
    f = _mm1b(lam, B)
    # tagged-queue law, including tails near 1e-16 (relative accuracy; the iterative
    # solver's balance tolerance is 1e-8)
    rtol = 1e-6 if method == "level-iad" else 1e-9
    assert np.allclose(s.tagged_law(), f, rtol=rtol, atol=0)
    assert s.loss_probability() == pytest.approx(f[B], rel=rtol)
    # the whole occupancy law is multinomial(n; f)
    ch = s.chain()
    m = np.column_stack([ch.states[f"m{k}"] for k in range(B + 1)])
    logp = (math.lgamma(n + 1) - sum(_lg(m[:, k]) for k in range(B + 1)) + m @ np.log(f))
    assert np.allclose(s.stationary().pi, np.exp(logp), rtol=10 * rtol, atol=0)


def _lg(a):
    from scipy.special import gammaln
    return gammaln(a + 1.0)


@pytest.mark.parametrize("d,repl", [(1, True), (2, True), (5, True), (1, False)])
def test_single_queue_is_mm1b(d, repl):
    s = Supermarket(1, d, 0.8, capacity=12, replacement=repl)
    assert np.allclose(s.tagged_law(), _mm1b(0.8, 12), rtol=1e-10, atol=0)


@pytest.mark.parametrize("n,lam", [(2, 0.6), (5, 0.3)])
def test_random_routing_infinite_buffer_tails(n, lam):
    tol = 1e-9
    s = Supermarket(n, 1, lam, tol=tol)
    tr = s.truncation
    assert tr.automatic and tr.status == "ok" and tr.boundary_mass <= tol
    # boundary mass of independent M/M/1/B queues: 1 - (1 - f_B)^n
    fB = _mm1b(lam, tr.capacity)[-1]
    assert tr.boundary_mass == pytest.approx(-math.expm1(n * math.log1p(-fB)), rel=1e-8)
    # minimal capacity: one level less would miss the tolerance
    fB1 = _mm1b(lam, tr.capacity - 1)[-1]
    assert -math.expm1(n * math.log1p(-fB1)) > tol
    k = np.arange(6)
    assert np.allclose(s.tail()[:6], lam ** k, rtol=10 * tol / lam ** 5)
    assert s.mean_sojourn_time() == pytest.approx(1 / (1 - lam), rel=1e-6)


# ---------------------------------------------------------------------------
# exact identities of the finite system
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n,d,lam,B,repl", [(4, 2, 0.9, 6, True), (5, 3, 0.95, 5, False),
                                            (6, 2, 1.4, 4, True), (3, 2, 0.5, 9, False)])
def test_flow_balance_and_little(n, d, lam, B, repl):
    s = Supermarket(n, d, lam, capacity=B, replacement=repl)
    u = s.tail()
    assert u[0] == pytest.approx(1.0, rel=1e-14)
    assert np.all(np.diff(u) <= 1e-15) and np.all(u >= 0)
    assert u[1] == pytest.approx(lam * (1 - s.loss_probability()), rel=1e-9)   # busy = accepted load
    assert s.tagged_law().sum() == pytest.approx(1.0, rel=1e-12)
    assert s.mean_sojourn_time() * s.throughput() == pytest.approx(s.mean_jobs_per_server(), rel=1e-12)


@pytest.mark.parametrize("method", ["level-iad", "gmres"])
def test_level_solver_agrees_with_direct_solver(method):
    s = Supermarket(6, 2, 0.9, capacity=6, method=method)
    ref = Supermarket(6, 2, 0.9, capacity=6, method="lu")
    assert np.allclose(s.stationary().pi, ref.stationary().pi, rtol=1e-7, atol=1e-15)
    assert s.stationary().residual < 1e-9


def test_without_replacement_d_equals_n_is_jsq():
    # d = n without replacement samples every queue: join the shortest queue. For n = 2 the
    # (shortest, longest) chain has a closed-form blocking probability
    # (ctmc.models.jsq.blocking_probability): rho^(2K) / (sum_{j<=2K} rho^j - 0.5 sum_{m<K} (rho/2)^m) with
    # total rate rho and two servers of rate 1/2, i.e. lam = rho (time scaled by 2).
    K, rho = 8, 0.9
    s = Supermarket(2, 2, rho, capacity=K, replacement=False)
    ch = s.chain()
    both_full = s.stationary().pi[ch.index(**{f"m{k}": (2 if k == K else 0) for k in range(K + 1)})]
    den = (1 - rho ** (2 * K + 1)) / (1 - rho) - 0.5 * (1 - (0.5 * rho) ** K) / (1 - 0.5 * rho)
    assert both_full == pytest.approx(rho ** (2 * K) / den, rel=1e-10)


# ---------------------------------------------------------------------------
# mean field
# ---------------------------------------------------------------------------
def _close_tails(u, ref):
    """Relative 1e-9 wherever the reference tail is a normal double above 1e-300 (a tail of 1e-47 is
    a number to get right, not noise), absolute 1e-300 below (the generic route declares the levels
    down to there; the closed forms are exact to the last digit)."""
    u, ref = np.asarray(u), np.asarray(ref)
    big = ref > 1e-300
    return u.shape == ref.shape and np.allclose(u[big], ref[big], rtol=1e-9, atol=0) \
        and np.abs(u[~big] - ref[~big]).max(initial=0) < 1e-300


@pytest.mark.parametrize("d,lam", [(1, 0.5), (2, 0.9), (3, 0.7), (2, 0.3), (4, 0.95), (2, 0.999)])
def test_fixed_point_formula_matches_ode_equilibrium(d, lam):
    K = 40 if d > 1 else 200
    u = mean_field_fixed_point(d, lam, levels=K)
    assert _close_tails(u, hand.fixed_point(d, lam, levels=K))     # closed form
    big = u > 1e-12      # near lam = 1 the Jacobian is nearly singular: Newton leaves 3e-10 relative
    assert np.allclose(u[big], hand.fixed_point(d, lam, levels=K)[big], rtol=1e-12 if lam <= 0.95 else 1e-9,
                       atol=0)
    t, traj = mean_field_ode(d, lam, [50.0, 4000.0 if lam <= 0.95 else 4e5], levels=K)   # slow near lam = 1
    assert traj.shape == (K + 1, 2)
    assert np.allclose(traj[:, -1], u, atol=1e-8)
    assert np.abs(hand.drift(u[1:], d, lam)).max() < 1e-14            # a zero of the hand-derived drift
    assert np.abs(mean_field_drift(u[1:13], d, lam)[:-1]).max() < 1e-14   # and of the generic one


@pytest.mark.parametrize("d,lam,B", [(2, 0.9, 5), (1, 0.5, 4), (3, 1.5, 6), (2, 0.9, 60), (2, 1.3, 12)])
def test_fixed_point_with_capacity(d, lam, B):
    u = mean_field_fixed_point(d, lam, capacity=B)
    assert np.abs(u - hand.fixed_point(d, lam, capacity=B)).max() < 1e-12     # shooting on u_B
    assert np.abs(hand.drift(u[1:], d, lam)).max() < 1e-11
    _, traj = mean_field_ode(d, lam, 3000.0, capacity=B)
    assert np.allclose(traj[:, -1], u, atol=1e-8)
    if d == 1:   # M/M/1/B tails
        assert np.allclose(u, _mm1b(lam, B)[::-1].cumsum()[::-1], rtol=1e-12)


def test_drift_derivatives_against_finite_differences_and_hand_derivation():
    rng = np.random.default_rng(5)
    for d in (1, 2, 3):
        x = np.sort(rng.uniform(0.05, 0.95, 6))[::-1]
        A, H, Q = mean_field_derivatives(x, d, 0.8)
        assert np.abs(mean_field_drift(x, d, 0.8) - hand.drift(x, d, 0.8)).max() < 1e-14
        assert np.abs(A - hand.jacobian(x, d, 0.8)).max() < 1e-13
        assert np.abs(H - hand.hessian(x, d, 0.8)).max() < 1e-13
        assert np.abs(Q - hand.jump_covariance(x, d, 0.8)).max() < 1e-14
        X = np.stack([x, x[::-1] / 2])                                  # trailing axis
        assert np.abs(mean_field_drift(X, d, 0.8) - hand.drift(X, d, 0.8)).max() < 1e-14
        h = 1e-6
        E = np.eye(x.size)
        A_fd = np.column_stack([(mean_field_drift(x + h * e, d, 0.8)
                                 - mean_field_drift(x - h * e, d, 0.8)) / (2 * h) for e in E])
        assert np.allclose(A, A_fd, atol=1e-8)
        H_fd = np.stack([np.column_stack([(mean_field_derivatives(x + h * e, d, 0.8)[0][:, j]
                                           - mean_field_derivatives(x - h * e, d, 0.8)[0][:, j]) / (2 * h)
                                          for e in E]) for j in range(x.size)], axis=1)
        assert np.allclose(H, H_fd, atol=1e-7)


# the generic route (ctmc.meanfield on population_model) against the hand derivation: pi, V, W
GENERIC_CASES = [(d, lam, None) for d in (1, 2, 3) for lam in ((0.5, 0.9) if d == 1 else (0.5, 0.9, 0.95))] + [
    (2, 0.99, None), (4, 0.95, None), (2, 0.9, 6), (3, 0.8, 5), (2, 0.95, 10), (1, 0.7, 4), (2, 1.3, 4),
    (3, 2.0, 8), (2, 0.6, 30)]


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("d,lam,B", GENERIC_CASES)
def test_generic_route_matches_hand_derivation(d, lam, B, replacement):
    # d = 1 without capacity: the hand code's default (tails to 1e-30) is 1348 levels at lam = 0.95; to 1e-17
    K = B if B is not None else (math.ceil(math.log(1e-17) / math.log(lam)) if d == 1 else 40)
    r = refined_mean_field(d, lam, capacity=B, replacement=replacement, levels=K)
    pi, V, W = hand.refined(d, lam, capacity=B, replacement=replacement, levels=K)
    if B is None and d >= 2:
        assert np.array_equal(refined_mean_field(d, lam, replacement=replacement).V, r.V)   # default 40 levels
    assert r.pi.shape == r.V.shape == (K,) and r.W.shape == (K, K)
    scale = max(1.0, np.abs(V).max())                       # |V| reaches 18 at lam = 0.99
    assert np.abs(r.pi - pi).max() < 1e-10
    assert np.abs(r.V - V).max() < 1e-10 * scale
    assert np.abs(r.W - W).max() < 1e-10 * scale
    assert r.residual < 1e-10
    with_r = refined_mean_field(d, lam, B, levels=K)   # sampling without replacement moves V (d >= 2)
    assert (d >= 2 and not replacement) == (np.abs(r.V - with_r.V).max() > 1e-3)


@pytest.mark.parametrize("lam,B", [(0.7, 4), (1.4, 6), (0.5, 60)])
def test_random_routing_closed_forms_are_the_generic_route(lam, B):
    # d = 1 is answered in closed form (independent M/M/1/B queues: V = 0, W = u_max - u u^T);
    # ctmc.meanfield on the same declaration must agree
    r = population_model(1, lam, B).refined(10)
    T = np.triu(np.ones((B, B)))
    cf = refined_mean_field(1, lam, capacity=B)
    assert np.abs(T @ r.fixed_point[:B] - cf.pi).max() < 1e-12
    assert np.abs(T @ r.V[:B]).max() < 1e-12 and not cf.V.any()
    assert np.abs(T @ r.W[:B, :B] @ T.T - cf.W).max() < 1e-12


def test_population_model_chain_is_the_occupancy_chain():
    # the declaration's exact finite-n chain (ctmc.meanfield.chain) against the combinatorial occupancy
    # chain of Supermarket at the same capacity (with replacement): the same law of the tails
    for n, d, lam, B in [(4, 2, 0.9, 4), (3, 3, 1.2, 3)]:
        e = population_model(d, lam, B).exact(n)
        s = Supermarket(n, d, lam, capacity=B)
        u = np.cumsum(e.densities[:B][::-1])[::-1]             # species x1..xB, x0
        assert np.allclose(u, s.tail()[1:], rtol=1e-10, atol=1e-14)


def _malware_exact(N):
    # birth-death on X = i/N: up at N(1-x)(1+x), down at N x (Gast-Bortolussi-Tribastone 2018, Sec. 5)
    m = ctmc.Model("malware")
    i = m.var("i", 0, N)
    m.event("up", guard=i < N, rate=lambda e: N * (1 - e["i"] / N) * (1 + e["i"] / N), update={i: i + 1})
    m.event("down", guard=i > 0, rate=lambda e: 1.0 * e["i"], update={i: i - 1})
    ch = m.build(initial={"i": 0})
    return float(ch.stationary().expect(ch.states["i"] / N))


@pytest.mark.parametrize("N,exact,expansion", MALWARE)
def test_refined_correction_on_published_one_dimensional_example(N, exact, expansion):
    # Table tab:SIS of Gast, Bortolussi & Tribastone (2018): exact E[X] and pi + V/N
    p = (math.sqrt(5) - 1) / 2
    V, W = refined_correction([[-1 - 2 * p]], [[[-2.0]]], [[(1 - p) * (1 + p) + p]])
    assert p + V[0] / N == pytest.approx(expansion, abs=6e-8)
    assert W[0, 0] > 0
    assert _malware_exact(N) == pytest.approx(exact, abs=6e-8)


# Table tab:supermarket: PUBLISHED_RMF (tests/supermarket_cases.py)
@pytest.mark.parametrize("N,d,rho,mf,rmf", PUBLISHED_RMF)
def test_refined_mean_field_reproduces_published_expansion(N, d, rho, mf, rmf):
    r = refined_mean_field(d, rho)                 # the generic route (ctmc.meanfield)
    assert r.residual < 1e-10
    assert r.mean_jobs_per_server() == pytest.approx(mf, abs=5e-5)
    assert r.mean_jobs_per_server(N) == pytest.approx(rmf, abs=5e-5)
    assert abs(r.V[0]) < 1e-12   # u_1 = rho exactly at every n (flow balance)
    pi, V, _ = hand.refined(d, rho)                # the hand derivation, independently
    assert pi.sum() == pytest.approx(mf, abs=5e-5) and (pi + V / N).sum() == pytest.approx(rmf, abs=5e-5)
    assert abs(r.mean_jobs_per_server(N) - (pi + V / N).sum()) < 1e-10


# Same table: simulation column (with replacement); we ask the exact value to lie within 1e-3
# (the table prints 4 decimals and no confidence interval), and refined to beat mean field.
PUBLISHED_SIM = [pytest.param(10, 2, 0.7, 1.2193, 1e-6, id="N10-d2-rho0.7"),
                 pytest.param(20, 2, 0.7, 1.1737, 2e-6, id="N20-d2-rho0.7", marks=pytest.mark.slow),
                 pytest.param(10, 3, 0.9, 2.3143, 1e-5, id="N10-d3-rho0.9", marks=pytest.mark.slow)]


@pytest.mark.parametrize("N,d,rho,sim,tol", PUBLISHED_SIM)
def test_exact_finite_n_matches_published_simulation(N, d, rho, sim, tol):
    s = Supermarket(N, d, rho, tol=tol)
    assert s.truncation.status == "ok" and s.truncation.boundary_mass <= tol
    exact = s.mean_jobs_per_server()
    assert exact == pytest.approx(sim, abs=1e-3)
    r = refined_mean_field(d, rho)
    assert abs(r.mean_jobs_per_server(N) - exact) < abs(r.mean_jobs_per_server() - exact)


@pytest.mark.slow
def test_exact_n10_two_choice_rho09_against_published_simulation():
    # N = 10, d = 2, rho = 0.9: simulation 2.8002, 1/N^2 expansion 2.8045 (Table tab:supermarket).
    # The tail is heavy: capacities 12 and 14 bracket the value from below; their geometric
    # extrapolation is compared with the simulation.
    a, b = (Supermarket(10, 2, 0.9, capacity=B).mean_jobs_per_server() for B in (12, 14))
    assert a < b < 2.8002 + 3e-3
    c = Supermarket(10, 2, 0.9, capacity=10).mean_jobs_per_server()
    r = (b - a) / (a - c)
    assert b + (b - a) * r / (1 - r) == pytest.approx(2.8002, abs=3e-3)


# ---------------------------------------------------------------------------
# exact finite n approaching the mean field
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("d,lam,repl", [(2, 0.9, True), (2, 0.7, False), (3, 0.8, True)])
def test_error_decreases_with_n_and_refined_is_closer(d, lam, repl):
    tol = 1e-6
    rmf = refined_mean_field(d, lam, replacement=repl)
    err_mf, err_rmf = [], []
    for n in sorted({max(2, d), 3, 4}):
        if not repl and n < d:
            continue
        e = Supermarket(n, d, lam, replacement=repl, tol=tol).mean_jobs_per_server()
        err_mf.append(abs(e - rmf.mean_jobs_per_server()))
        err_rmf.append(abs(e - rmf.mean_jobs_per_server(n)))
    assert all(b < a for a, b in zip(err_mf, err_mf[1:])), err_mf
    assert all(r < m for m, r in zip(err_mf, err_rmf)), (err_mf, err_rmf)


def test_refined_error_is_second_order_at_fixed_capacity():
    # at a fixed capacity B the mean field of the truncated system is the limit; away from
    # heavy load the refined error decays like 1/n^2 and the plain one like 1/n
    B, lam = 4, 0.6
    rmf = refined_mean_field(2, lam, capacity=B)
    ns = np.array([8, 12, 16, 24])
    e = np.array([Supermarket(int(n), 2, lam, capacity=B).mean_jobs_per_server() for n in ns])
    s_mf = np.polyfit(np.log(ns), np.log(np.abs(e - rmf.mean_jobs_per_server())), 1)[0]
    s_rmf = np.polyfit(np.log(ns), np.log(np.abs(e - np.array([rmf.mean_jobs_per_server(int(n))
                                                               for n in ns]))), 1)[0]
    assert -1.3 < s_mf < -0.8 and s_rmf < -1.6, (s_mf, s_rmf)


def test_without_replacement_refinement_uses_the_finite_n_drift():
    # the 1/n part of the hypergeometric sampling probability shifts V; check the shift is right
    # by comparing with exact values at moderate n
    lam, B = 0.6, 4
    with_r = refined_mean_field(2, lam, capacity=B, replacement=True)
    wo = refined_mean_field(2, lam, capacity=B, replacement=False)
    for n in (10, 16):
        e = Supermarket(n, 2, lam, capacity=B, replacement=False).mean_jobs_per_server()
        assert abs(wo.mean_jobs_per_server(n) - e) < 0.3 * abs(with_r.mean_jobs_per_server(n) - e)


# ---------------------------------------------------------------------------
# truncation search and validation
# ---------------------------------------------------------------------------
def test_automatic_capacity_is_minimal_and_reported():
    s = Supermarket(3, 2, 0.8, tol=1e-6)
    tr = s.truncation
    assert tr.automatic and tr.status == "ok" and tr.boundary_mass <= 1e-6
    below = Supermarket(3, 2, 0.8, capacity=tr.capacity - 1).truncation
    assert below.boundary_mass > 1e-6
    assert 0 < tr.loss_probability < tr.boundary_mass
    bigger = Supermarket(3, 2, 0.8, capacity=tr.capacity + 15)
    # the boundary mass bounds what the extra levels add to the tail law
    assert np.abs(bigger.tail()[:tr.capacity + 1] - s.tail()).max() < 10 * tr.boundary_mass
    assert bigger.truncation.boundary_mass < 1e-3 * tr.boundary_mass


def test_automatic_capacity_reports_unmet_tolerance():
    s = Supermarket(6, 2, 0.9, tol=1e-12, max_states=3000)
    with pytest.warns(smk.TruncationWarning, match="boundary mass"):
        tr = s.truncation
    assert tr.status == "tolerance not met" and tr.boundary_mass > 1e-12
    assert s.chain().n_states <= 3000


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=0, d=1, lam=0.5), "n"), (dict(n=3, d=0, lam=0.5), "d"), (dict(n=3, d=2, lam=0.0), "lam"),
    (dict(n=3, d=2, lam=1.0), "lam"), (dict(n=3, d=2, lam=float("nan")), "lam"),
    (dict(n=3, d=4, lam=0.5, replacement=False), "d"), (dict(n=3, d=2, lam=0.5, capacity=0), "capacity"),
    (dict(n=2.5, d=2, lam=0.5), "n"), (dict(n=3, d=2, lam=0.5, tol=0.0), "tol"),
    (dict(n=3, d=2, lam=0.5, replacement="yes"), "replacement"),
    (dict(n=1000, d=2, lam=0.9, capacity=50), "capacity"),   # refused before any heavy work
    (dict(n=3, d=2, lam=0.5, method="cholesky"), "method"),
])
def test_bad_parameters_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Supermarket(**kwargs)


def test_mean_field_bad_parameters():
    with pytest.raises(ValueError, match="lam"):
        mean_field_fixed_point(2, 1.2)
    with pytest.raises(ValueError, match="d"):
        refined_mean_field(0, 0.5)
    with pytest.raises(ValueError, match="u0"):
        mean_field_ode(2, 0.5, 1.0, u0=np.ones(3))


def test_cli_runs_and_reports_checks(capsys):
    from ctmc.cli import load_families, main
    assert load_families()["supermarket"].__name__ == "ctmc.models.supermarket.cli"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        main(["supermarket", "--n", "3", "--d", "2", "--lam", "0.9", "--tol", "1e-6"])
    out = capsys.readouterr().out
    assert "boundary mass" in out and "refined" in out and "check u_1" in out


@pytest.mark.parametrize("K,rho", [(6, 0.7), (9, 1.2)])
def test_n2_d2_without_replacement_is_the_jsq_chain_state_by_state(K, rho):
    # the two builders are independent: ctmc.models.jsq on (shortest, longest), the
    # supermarket on occupancies. With time scaled by 2 (arrivals 2 rho, rate-1
    # servers here; rho and rate-1/2 servers there) the stationary laws coincide.
    from ctmc.models.jsq import JSQ2
    s = Supermarket(2, 2, rho, capacity=K, replacement=False)
    ch = s.chain()
    pi = s.stationary().pi
    q = JSQ2(K, rho, 0.5)
    ref = q.stationary().pi
    m = np.column_stack([ch.states[f"m{k}"] for k in range(K + 1)])
    for i in range(ch.n_states):
        lengths = sorted(np.repeat(np.arange(K + 1), m[i]))
        j = q.chain().index(s=int(lengths[0]), l=int(lengths[1]))
        assert pi[i] == pytest.approx(ref[j], rel=1e-10)


def test_fewer_levels_report_the_infinite_buffer_not_a_capacity():
    """``levels`` says how many tails are reported; without a capacity the model is the infinite
    buffer's (review: levels=5 gave the capacity-5 queue's tails, 1.2 % off at u_1)."""
    u = mean_field_fixed_point(2, 0.9, levels=5)
    assert np.allclose(u, hand.fixed_point(2, 0.9, levels=5), rtol=1e-12, atol=0)
    r, (pi, V, W) = refined_mean_field(2, 0.9, levels=5), hand.refined(2, 0.9)     # 40 levels, the first 5
    assert np.allclose(r.pi, pi[:5], rtol=1e-12) and np.allclose(r.V, V[:5], rtol=1e-9, atol=1e-12)
    assert np.allclose(r.W, W[:5, :5], rtol=1e-9, atol=1e-12)
    assert not np.allclose(u, mean_field_fixed_point(2, 0.9, capacity=5), rtol=1e-3)


# ---------------------------------------------------------------------------
# the declared model (ctmc.Model): the builder's chain, on any backend
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("n,d,lam,B,repl", [(4, 2, 0.9, 4, True), (5, 3, 0.7, 4, False), (6, 2, 1.3, 5, True),
                                            (3, 3, 0.5, 6, True), (12, 2, 0.9, 4, True)])
def test_declared_model_is_the_builders_chain(n, d, lam, B, repl):
    ch = smk.occupancy_model(n, d, lam, B, repl).build(initial={f"M{k}": 0 for k in range(1, B + 1)})
    Q = occupancy_generator(n, d, lam, B, repl)
    r = occupancy_rank(np.column_stack([ch.states[f"M{k}"] for k in range(1, B + 1)]), n)
    assert ch.n_states == Q.shape[0] == n_occupancy_states(n, B) and np.unique(r).size == r.size
    P = Q[r][:, r]
    assert (P != 0).nnz == (ch.Q != 0).nnz
    assert abs(P - ch.Q).max() <= 1e-14 * abs(Q).max()
    # the rewards are the occupancy counts of the builder's chain
    s = Supermarket(n, d, lam, capacity=B, replacement=repl)
    for k in range(B + 1):
        assert np.array_equal(ch.rewards[f"m{k}"], s.chain().states[f"m{k}"][r])


def test_declared_model_with_caps_is_the_restricted_chain():
    # caps M_k <= c_k: the builder's chain on the states within the caps, arrivals that would break a cap
    # lost (off the diagonal: the restriction; on it: minus the kept rates)
    n, d, lam, B, caps = 8, 2, 0.9, 5, (8, 6, 3, 2, 1)
    ch = smk.occupancy_model(n, d, lam, B, caps=caps).build(initial={f"M{k}": 0 for k in range(1, B + 1)})
    M = occupancy_states(n, B)
    inside = np.all(M <= np.array(caps), axis=1)
    Q = occupancy_generator(n, d, lam, B, M=M)
    r = occupancy_rank(np.column_stack([ch.states[f"M{k}"] for k in range(1, B + 1)]), n)
    assert ch.n_states == inside.sum() and inside[r].all()
    P = Q[r][:, r].tolil()
    P.setdiag(0)
    P = P.tocsr()
    P = P - sp.diags(np.asarray(P.sum(axis=1)).ravel())
    assert abs(P - ch.Q).max() <= 1e-14 * abs(Q).max()
    # "truncated": the states where a cap or the capacity blocks an arrival
    Mr = M[r]
    Mfull = np.column_stack([np.full(len(r), n), Mr])
    c = np.array(caps)
    blocked = (Mr[:, -1] >= 1) | np.any((Mr >= c) & (Mfull[:, :-1] > Mr) & (c < n), axis=1)
    assert np.array_equal(ch.labels["truncated"], blocked)


@pytest.mark.parametrize("caps,match", [((8, 6, 3), "caps: expected 5"), ((8, 6, 7, 2, 1), "non-increasing"),
                                        ((9, 6, 3, 2, 1), r"\[1, n=8\]"),
                                        ((8, 6, 3, 2, 0), "non-increasing")])
def test_declared_model_bad_caps(caps, match):
    with pytest.raises(ValueError, match=match):
        smk.occupancy_model(8, 2, 0.9, 5, caps=caps)


def test_supermarket_backend_argument_checked():
    with pytest.raises(ValueError, match="backend: expected one of"):
        Supermarket(4, 2, 0.5, capacity=3, backend="mpi")
    with pytest.raises(ValueError, match="method: expected one of"):
        Supermarket(4, 2, 0.5, capacity=3, backend="petsc", method="level-iad")


# ---------------------------------------------------------------------------
# mean-field tails down to 1e-300, near saturation
# ---------------------------------------------------------------------------
def _fixed_point_mp(d, lam, B, dps=60):
    """Tails u_0..u_B of the capacity-B fixed point in 60-digit arithmetic (an independent answer):
    u_k = lam (u_{k-1}^d - t), t = u_B^d, with t found by bisection on u_B(t)^d - t (no double range
    limit, so 1e-290 is as exact as 0.5)."""
    import mpmath
    with mpmath.workdps(dps):
        lam_ = mpmath.mpf(lam)

        def us(t):
            u = [mpmath.mpf(1)]
            for _ in range(B):
                u.append(lam_ * (u[-1] ** d - t))
            return u
        lo, hi = mpmath.mpf(0), lam_ ** B       # u_B <= lam^B, t = u_B^d < hi
        for _ in range(2000):
            mid = (lo + hi) / 2 if lo == 0 and hi > mpmath.mpf(10) ** -700 else (lo + hi) / 2
            u = us(mid)
            if u[-1] > 0 and u[-1] ** d > mid:
                lo = mid
            else:
                hi = mid
            if lo > 0 and hi / lo - 1 < mpmath.mpf(10) ** -(dps - 10):
                break
        return np.array([float(x) for x in us(lo)])


@pytest.mark.parametrize("d,lam,B", [(3, 0.999, None), (2, 0.999, 18), (3, 0.99, 11)])
def test_fixed_point_keeps_every_tail_above_1e300_to_relative_accuracy(d, lam, B):
    # d = 2, lam = 0.999 without capacity: test_fixed_point_formula_matches_ode_equilibrium
    u = mean_field_fixed_point(d, lam, capacity=B)
    if B is None:
        k = np.arange(u.size, dtype=float)
        ref = np.exp((d ** k - 1) / (d - 1) * math.log(lam))     # closed form, to ~1e-13 relative
    else:
        ref = _fixed_point_mp(d, lam, B)
    keep = ref > 1e-300
    assert keep.sum() >= 11 and ref[keep].min() < 1e-100          # the deep tails are in the test
    assert (u[keep] > 0).all()
    # lam^((d^k - 1)/(d - 1)): a relative error e in u_1 becomes d^k e in u_k, so 1e-9 at k = 20
    assert np.abs(u[keep] / ref[keep] - 1).max() < 1e-9
    assert np.all(u[~keep] < 1e-300)


def test_ode_tails_keep_relative_accuracy():
    # from a start above the fixed point, every tail (down to 1e-20 here) to 1e-9 relative, against an
    # integration of the log-tails w = log u with the hand-derived drift (independent formulation)
    from scipy.integrate import solve_ivp
    d, lam, K = 2, 0.99, 14
    u0 = 0.02 ** np.arange(1, K + 1)
    ts = np.array([0.5, 5.0])
    sol = solve_ivp(lambda _, w: hand.drift(np.exp(w), d, lam) / np.exp(w), (0, ts[-1]), np.log(u0),
                    t_eval=ts, method="Radau", rtol=1e-12, atol=1e-12)
    ref = np.exp(sol.y)
    _, u = mean_field_ode(d, lam, ts, u0=u0, levels=K)
    assert ref.min() < 1e-15
    assert np.abs(u[1:] / ref - 1).max() < 1e-9
    # from empty queues: the tails below the fixed point (monotone system), none lost above 1e-300, and
    # at a time where u_1 has converged every tail has (a gap e in u_1 is about 2^k e in u_k)
    _, u = mean_field_ode(2, 0.9, [1000.0])
    fp = mean_field_fixed_point(2, 0.9)
    keep = fp > 1e-300
    assert keep.sum() == 13 and (u[keep, 0] > 0).all() and (u[:, 0] <= fp * (1 + 1e-9)).all()
    assert np.abs(u[keep, 0] / fp[keep] - 1).max() < 1e-8


def test_refined_correction_keeps_deep_tails():
    # V_k is of the order of u_{k-1}: relative 1e-9 down to 1e-228 against the hand derivation,
    # and V_1 = 0 (E[u_1] = lam exactly at every n without a capacity)
    r = refined_mean_field(2, 0.999)
    pi, V, _ = hand.refined(2, 0.999, levels=r.V.size)
    keep = np.abs(V) > 1e-300
    keep[0] = False
    assert keep.sum() >= 18 and np.abs(V[keep]).min() < 1e-200
    assert np.abs(r.V[keep] / V[keep] - 1).max() < 1e-9
    assert abs(r.V[0]) < 1e-12 * np.abs(r.V).max()
