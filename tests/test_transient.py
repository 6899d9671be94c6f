"""Transient laws by uniformisation: the adaptive cut and the stochastic step against independent answers.

References: the Poisson law of a pure-birth line (closed form, entries down to 1e-250), and a matrix
exponential in 200-digit arithmetic (mpmath) on small random chains whose laws span 1e-90 and less.
The adaptive cut stops the sum early; these tests check that every probability it returns keeps the
relative accuracy it promises, that the absolute bound still covers the 1-norm error, and that it
stops earlier than the 1e-300 window (else it would be pointless).
"""
import math

import mpmath
import numpy as np
import pytest

import ctmc
from ctmc.backends import operator_for
from ctmc.transient import ENTRY_RTOL, TAIL_EPS, stochastic_step, uniformize_operator


def birth_line(k, mu):
    """0 -> 1 -> ... -> k at rate mu, k absorbing (no stored diagonal)."""
    m = ctmc.Model("line")
    n = m.var("n", 0, k)
    m.event("up", guard=n < k, rate=mu, update={n: n + 1})
    return m.build(initial={"n": 0})


def poisson_line_law(k, x):
    """Law at time t of the line from 0, x = mu t: Poisson(x) on 0..k-1, the rest of the mass at k."""
    with mpmath.workdps(60):
        p = [mpmath.exp(-x) * mpmath.mpf(x) ** j / mpmath.factorial(j) for j in range(k)]
        last = mpmath.nsum(lambda j: mpmath.exp(-x) * mpmath.mpf(x) ** j / mpmath.factorial(j), [k, mpmath.inf])
        return np.array([float(v) for v in p + [last]])


def exact_law(Q, p0, t, dps=200):
    """p0 exp(Q t) in ``dps`` digits: every entry to full relative accuracy, however small."""
    with mpmath.workdps(dps):
        E = mpmath.expm(mpmath.matrix(Q.tolist()) * mpmath.mpf(t))
        row = mpmath.matrix([p0.tolist()]) * E
        return np.array([float(row[0, j]) for j in range(Q.shape[0])])


@pytest.mark.parametrize("t", [0.002, 0.05, 0.5])
def test_every_probability_of_a_line_keeps_its_relative_accuracy(t):
    # mu t small: the law of 0..40 falls from about 1 to below 1e-200 (Poisson terms)
    k, mu = 40, 4.0
    chain = birth_line(k, mu)
    res = chain.transient({"n": 0}, t)
    exact = poisson_line_law(k, mu * t)
    got = np.asarray(res.p)
    big = exact > 1e-280
    assert exact[big].min() < (1e-90 if t < 0.01 else 1e-20)
    rel = np.abs(got[big] / exact[big] - 1)
    assert rel.max() < 1e-11, rel.max()
    assert np.abs(got - exact).sum() <= res.error_bound
    assert res.status.ok and res.method == "uniformization"


def test_the_cut_stops_before_the_window_and_agrees_with_it():
    """A law whose probabilities stay above 1e-40 needs nowhere near the 1e-300 window."""
    rng = np.random.default_rng(5)
    n = 20
    R = rng.random((n, n)) * (rng.random((n, n)) < 0.2) * 5.0
    R[np.arange(n), (np.arange(n) + 1) % n] += 1.0          # irreducible
    chain = ctmc.CTMC.from_rates(R)
    p0 = np.zeros(n)
    p0[0] = 1.0
    t = [0.7, 3.0]
    cut = chain.transient(p0, t)
    full = chain.transient(p0, t, rtol=0.0)
    assert cut.info["uniformization_steps"] < 0.7 * full.info["uniformization_steps"]
    assert full.info["uniformization_steps"] > 0
    np.testing.assert_allclose(cut.p, full.p, rtol=1e-12, atol=0)
    Q = chain.Q.toarray()
    for row, tt in zip(cut.p, t):
        exact = exact_law(Q, p0, tt, dps=60)
        np.testing.assert_allclose(row, exact, rtol=1e-11, atol=0)
        assert np.abs(row - exact).sum() <= cut.error_bound


def _random_stiff_chain(rng, n):
    """Rates over six orders of magnitude, sparse: a law spanning 1e-90 and below at small times."""
    R = rng.random((n, n)) * 10.0 ** rng.uniform(-3, 3, (n, n)) * (rng.random((n, n)) < 0.3)
    R[np.arange(n - 1), np.arange(1, n)] += 0.01             # a path through every state
    np.fill_diagonal(R, 0.0)
    return R


@pytest.mark.parametrize("seed", range(6))
def test_random_chains_against_a_200_digit_exponential(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(6, 12))
    chain = ctmc.CTMC.from_rates(_random_stiff_chain(rng, n))
    Q = chain.Q.toarray()
    p0 = np.zeros(n)
    p0[0] = 1.0
    for t in (1e-4, 0.03, 2.0):
        res = chain.transient(p0, t)
        exact = exact_law(Q, p0, t)
        got = np.asarray(res.p)
        assert np.abs(got - exact).sum() <= res.error_bound <= 1e-10
        big = exact > 1e-280
        # the promise: every probability above the window's reach to rtol, plus the sum's round-off
        rel = np.abs(got[big] / exact[big] - 1)
        assert rel.max() < 1e-10, (t, rel.max(), exact[big][rel.argmax()])


def test_states_the_initial_law_cannot_reach_do_not_hold_the_cut_back():
    """Two separate lines: the law from the first never reaches the second (zeros that stay zero)."""
    k = 8
    R = np.zeros((2 * k, 2 * k))
    for i in range(k - 1):
        R[i, i + 1] = 3.0
        R[k + i, k + i + 1] = 3.0
    R[k - 1, 0] = 1.0
    R[2 * k - 1, k] = 1.0
    chain = ctmc.CTMC.from_rates(R)
    p0 = np.zeros(2 * k)
    p0[0] = 1.0
    res = chain.transient(p0, 2.0)
    full = chain.transient(p0, 2.0, rtol=0.0)
    assert res.info["uniformization_steps"] < full.info["uniformization_steps"]
    assert np.all(np.asarray(res.p)[k:] == 0.0)
    exact = exact_law(chain.Q.toarray(), p0, 2.0, dps=60)
    np.testing.assert_allclose(np.asarray(res.p)[:k], exact[:k], rtol=1e-12, atol=0)


def test_the_stochastic_step_is_the_uniformised_product():
    """One step on P = I + Q/lam (absorbing states without a stored diagonal) against the dense product."""
    rng = np.random.default_rng(2)
    n = 30
    R = rng.random((n, n)) * (rng.random((n, n)) < 0.2)
    R[:3] = 0.0                                                # three absorbing states
    chain = ctmc.CTMC.from_rates(R)
    op = operator_for(chain, "scipy")
    lam = 1.02 * op.qmax
    step, roundoff = stochastic_step(op, lam)
    V = rng.random(n)
    out = np.empty(n)
    step(V, out)
    P = np.eye(n) + chain.Q.toarray() / lam
    assert P.min() >= 0
    np.testing.assert_allclose(out, P.T @ V, rtol=1e-14, atol=0)
    assert roundoff < 1e-13


def test_uniformize_operator_cut_is_proven_entrywise():
    """The returned cut: S_K <= p <= S_K + T_K entrywise, with T_K <= rtol min S_K (the rule itself)."""
    Q = np.array([[-3.0, 2.0, 1.0, 0.0], [0.0, -1.0, 0.5, 0.5], [1.0, 0.0, -1.5, 0.5], [0.0, 0.0, 0.0, 0.0]])
    p0 = np.array([1.0, 0.0, 0.0, 0.0])
    info = {}
    out, bound = uniformize_operator(lambda V: Q.T @ V, p0, np.array([0.4]), 3.06, rtol=1e-6, info=info)
    exact = exact_law(Q, p0, 0.4, dps=40)
    _, full_info = uniformize_operator(lambda V: Q.T @ V, p0, np.array([0.4]), 3.06, info=(fi := {})), fi
    assert info["steps"] < fi["steps"]
    assert np.all(out[0] <= exact * (1 + 1e-14))
    assert np.all(np.abs(out[0] / exact - 1) <= 1e-6 + 1e-13)
    assert np.abs(out[0] - exact).sum() <= bound
    with pytest.raises(ValueError, match="rtol"):
        uniformize_operator(lambda V: Q.T @ V, p0, np.array([0.4]), 3.06, rtol=1.5)


def test_defaults():
    assert TAIL_EPS == 1e-300 and 0 < ENTRY_RTOL <= 1e-12
    with pytest.raises(ValueError, match="rtol"):
        birth_line(3, 1.0).transient({"n": 0}, 1.0, rtol=-1.0)
    assert math.isclose(float(birth_line(1, 2.0).transient({"n": 0}, 1.0).p[0]), math.exp(-2.0), rel_tol=1e-14)


def birth_death(k, up, down):
    m = ctmc.Model("bd")
    n = m.var("n", 0, k)
    m.event("up", guard=n < k, rate=up, update={n: n + 1})
    m.event("down", guard=n > 0, rate=down, update={n: n - 1})
    return m.build(initial={"n": 0})


def test_backward_stops_once_the_vector_has_settled_and_keeps_relative_accuracy():
    # e^{Qt} 1_{K}: at t = 2000 every start has mixed to within e^{-4 t} of pi_K = 0.9 * 10^-30
    from fractions import Fraction
    from ctmc.transient import backward
    k = 30
    chain = birth_death(k, 1.0, 10.0)
    w = [Fraction(1, 10) ** j for j in range(k + 1)]
    pi_k = float(w[k] / sum(w))
    op = operator_for(chain, "scipy")
    v0 = (np.arange(k + 1) == k).astype(float)
    info = {}
    out, bound = backward(op, v0, np.array([2000.0]), info=info)
    np.testing.assert_allclose(out[0], pi_k, rtol=1e-12)
    assert 0 <= info["settled"][0] < 0.2 * 1.02 * 11.0 * 2000       # long before the Poisson window
    assert info["steps"] == info["settled"][0]
    assert np.abs(out[0] - pi_k).max() <= bound


def test_backward_does_not_settle_a_vector_that_converges_to_different_values():
    # two absorbing ends: e^{Qt} 1_{top} tends to the absorption probabilities, not a constant
    m = ctmc.Model("gambler")
    n = m.var("n", 0, 6)
    m.event("up", guard=(n > 0) & (n < 6), rate=1.0, update={n: n + 1})
    m.event("down", guard=(n > 0) & (n < 6), rate=2.0, update={n: n - 1})
    chain = m.build(initial={"n": 3})
    from ctmc.transient import backward
    import scipy.linalg
    v0 = (np.arange(7) == 6).astype(float)
    info = {}
    out, bound = backward(operator_for(chain, "scipy"), v0, np.array([40.0]), info=info)
    ref = scipy.linalg.expm(chain.Q.toarray() * 40.0) @ v0
    assert info["settled"][0] == -1
    np.testing.assert_allclose(out[0], ref, rtol=1e-11, atol=1e-15)
    # a state made absorbing by the mask: its row of Q zero (the chain's own absorbing ends stay)
    keep = np.arange(7) != 3
    out2, _ = backward(operator_for(chain, "scipy"), v0, np.array([40.0]), absorbing=~keep)
    Q = chain.Q.toarray()
    Q[~keep] = 0.0
    np.testing.assert_allclose(out2[0], scipy.linalg.expm(Q * 40.0) @ v0, rtol=1e-11, atol=1e-15)


def test_cumulative_reward_settles_and_matches_the_closed_form():
    # two states, rates a = 1 (0 -> 1) and b = 2: int_0^t P_0(X_s = 0) ds = b t/(a+b) + a (1 - e^{-(a+b)t})/(a+b)^2
    a, b, t = 1.0, 2.0, 1e4
    chain = ctmc.CTMC([[-a, a], [b, -b]], initial=0)
    r = chain.cumulative_reward([1.0, 0.0], t)
    exact = b * t / (a + b) + a * (1 - math.exp(-(a + b) * t)) / (a + b) ** 2
    assert float(r.value) == pytest.approx(exact, rel=1e-12)
    assert abs(float(r.value) - exact) <= r.error_bound and r.status == ctmc.Status.SUCCESS
    assert r.info["uniformization_steps"] < 0.1 * 1.02 * 2.0 * t          # settled, not 2e4 steps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_dense_route_s_estimate_is_not_below_its_error(seed):
    """Beyond ``max_terms`` steps ``auto`` squares a dense stochastic matrix and renormalises its rows, so
    its mass defect is 0 whatever its round-off; the estimate it reports (the squarings' round-off, the
    larger of that and the defect) must not be below the true error. At t = 2e4 a chain with rates
    1e-2..1e3 has mixed: the answer is the stationary law (GTH, entrywise accurate), within 1e-15."""
    rng = np.random.default_rng(seed)
    n = 30
    R = np.where(rng.random((n, n)) < 0.3, 10.0 ** rng.uniform(-2, 3, (n, n)), 0.0)
    np.fill_diagonal(R, 0.0)
    R[np.arange(n), (np.arange(n) + 1) % n] += 1.0              # irreducible
    c = ctmc.CTMC.from_rates(R)
    res = c.transient(np.eye(n)[0], 2e4)
    assert res.method == "expm" and res.info["error_bound_kind"] == "estimate"
    pi = c.stationary("gth").pi
    err = float(np.abs(res.p - pi).sum())
    assert res.error_bound >= err and res.error_bound > 0 and res.error_bound < 1e-10
