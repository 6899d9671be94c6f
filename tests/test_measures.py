"""One-liners (prob_within, cumulative_reward, long_run, throughput) against independent answers."""
import numpy as np
import pytest
import scipy.linalg as sla
from scipy import stats

import ctmc


def erlang_line(k, lam):
    """0 -> 1 -> ... -> k at rate lam, k absorbing: T_k from 0 is Erlang(k, lam)."""
    m = ctmc.Model("line")
    n = m.var("n", 0, k)
    m.event("step", guard=n < k, rate=lam, update={n: n + 1})
    m.label("end", n == k)
    return m.build(initial={"n": 0}), n


def test_prob_within_is_the_erlang_cdf_with_relative_accuracy_in_the_tail():
    ch, n = erlang_line(60, 2.0)
    t = np.array([0.01, 0.5, 10.0, 40.0])
    r = ch.prob_within("end", t)
    exact = stats.gamma.cdf(t, 60, scale=0.5)          # down to ~1e-150
    assert exact[0] < 1e-140
    np.testing.assert_allclose(r.value, exact, rtol=1e-10, atol=0)
    # per state: from n = j the remaining time is Erlang(60 - j)
    j = 40
    np.testing.assert_allclose(r.values[:, ch.index(n=j)], stats.gamma.cdf(t, 60 - j, scale=0.5), rtol=1e-10)
    assert r.status.ok and r.error_bound < 1e-12
    assert r.at(n=j).shape == (4,)


def test_one_small_time_keeps_relative_accuracy():
    """Alone, t = 0.01 needs terms up to k = 60: a truncation at 1e-13 mass stops near k = 3 and gives 0."""
    ch, n = erlang_line(60, 2.0)
    r = ch.prob_within("end", 0.01)
    exact = stats.gamma.cdf(0.01, 60, scale=0.5)
    assert 0 < exact < 1e-180
    assert float(r.value) == pytest.approx(exact, rel=1e-10)
    assert float(ch.prob_within("end", 0.01, eps=1e-13).value) == 0.0      # what the coarse cut gives
    # the same for an accumulated reward: the time spent in the last state by t
    c = ch.cumulative_reward(n == 60, 0.01)
    t, k, th = 0.01, 60, 0.5
    ref = t * stats.gamma.cdf(t, k, scale=th) - k * th * stats.gamma.cdf(t, k + 1, scale=th)  # E[(t - T)^+]
    assert float(c.value) == pytest.approx(ref, rel=1e-6)


def _cycle():
    m = ctmc.Model("tandem")
    a, b = m.var("a", 0, 4), m.var("b", 0, 3)
    m.event("arr", guard=a < 4, rate=1.3, update={a: a + 1})
    m.event("move", guard=(a > 0) & (b < 3), rate=2.0, update={a: a - 1, b: b + 1})
    m.event("dep", guard=b > 0, rate=1.1 + 0.2 * b, update={b: b - 1})
    return m.build(initial={"a": 0, "b": 0}), a, b


def test_prob_within_matches_first_passage_cdf_and_an_absorbed_transient():
    ch, a, b = _cycle()
    A = (a == 4) & (b == 3)
    t = [0.3, 2.0, 7.5]
    r = ch.prob_within(A, t)
    fp = ch.first_passage(A, t=t)
    np.testing.assert_allclose(r.values, fp.cdf.sum(axis=2), rtol=1e-9, atol=1e-14)
    # from the initial state: dense expm of the absorbed generator
    Q = ch.Q.toarray()
    mask = ch.where(A)
    Q[mask] = 0.0
    e0 = np.zeros(ch.n_states)
    e0[ch.initial[0]] = 1
    ref = [float(e0 @ sla.expm(Q * s) @ mask) for s in t]
    np.testing.assert_allclose(r.value, ref, rtol=1e-9)


def test_cumulative_reward_against_the_augmented_matrix_exponential():
    ch, a, b = _cycle()
    rew = (a + 2 * b) ** 2
    r = ch.cumulative_reward(rew, [0.5, 3.0])
    rv = ch.eval(rew)
    n = ch.n_states
    B = np.zeros((n + 1, n + 1))
    B[:n, :n] = ch.Q.toarray()
    B[:n, n] = rv
    for k, t in enumerate([0.5, 3.0]):
        v = sla.expm(B * t)[:n, n]        # int_0^t exp(Qs) r ds
        np.testing.assert_allclose(r.values[k], v, rtol=1e-10)
        assert r.value[k] == pytest.approx(v[ch.initial[0]], rel=1e-10)
    assert r.status.ok


def test_cumulative_reward_of_a_constant_is_time():
    ch, a, b = _cycle()
    r = ch.cumulative_reward(3.0, 2.5)
    np.testing.assert_allclose(r.values, 7.5, rtol=1e-12)
    assert float(r) == pytest.approx(7.5, rel=1e-12)


def gambler(N=6, p=0.4):
    """Gambler's ruin on 0..N with two absorbing ends, plus a flip-flop class hung off state 0? no: ends only."""
    m = ctmc.Model("ruin")
    x = m.var("x", 0, N)
    m.event("up", guard=(x > 0) & (x < N), rate=p, update={x: x + 1})
    m.event("down", guard=(x > 0) & (x < N), rate=1 - p, update={x: x - 1})
    return m, x


def test_long_run_weights_closed_classes_by_absorption_probabilities():
    N, p = 6, 0.4
    m, x = gambler(N, p)
    # the top end is a closed class of two states (x = N, a flip-flop y) to test the class law too
    y = m.var("y", 0, 1)
    m.event("flip", guard=(x == N) & (y == 0), rate=1.0, update={y: 1})
    m.event("flop", guard=(x == N) & (y == 1), rate=3.0, update={y: 0})
    ch = m.build(initial={"x": 2, "y": 0})
    res = ch.long_run()
    rho = (1 - p) / p
    win = (1 - rho ** 2) / (1 - rho ** N)           # P(reach N from 2), gambler's ruin
    assert res.pi[ch.index(x=0, y=0)] == pytest.approx(1 - win, rel=1e-12)
    assert res.pi[ch.index(x=N, y=0)] == pytest.approx(win * 0.75, rel=1e-12)
    assert res.pi[ch.index(x=N, y=1)] == pytest.approx(win * 0.25, rel=1e-12)
    assert res.status.ok and res.error_bound < 1e-10
    # independent: the transient law at a late time
    late = ch.transient({"x": 2, "y": 0}, 400.0).p
    np.testing.assert_allclose(res.pi, late, atol=1e-10)
    # another initial law
    r3 = ch.long_run({"x": 3, "y": 0})
    assert r3.pi[ch.index(x=0, y=0)] == pytest.approx(1 - (1 - rho ** 3) / (1 - rho ** N), rel=1e-12)


def test_long_run_on_an_irreducible_chain_is_the_stationary_law():
    ch, a, b = _cycle()
    np.testing.assert_allclose(ch.long_run().pi, ch.stationary().pi, rtol=1e-12)


def test_long_run_without_initial_law_names_p0():
    ch = ctmc.CTMC([[-2.0, 1.0, 1.0], [0, 0, 0], [0, 0, 0]])
    with pytest.raises(ValueError, match="p0"):
        ch.long_run()
    assert ch.long_run({0}).pi[1] == pytest.approx(0.5)


@pytest.mark.parametrize("K", [3, 40])
def test_throughput_of_mm1k_departures_is_lambda_times_not_blocked(K):
    lam, mu = 0.7, 1.0
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, K)
    m.event("arrive", guard=n < K, rate=lam, update={n: n + 1})
    m.event("lost", guard=n == K, rate=lam, update={})
    m.event("depart", guard=n > 0, rate=mu, update={n: n - 1})
    ch = m.build(initial={"n": 0})
    r = lam / mu
    piK = r ** K * (1 - r) / (1 - r ** (K + 1))
    assert float(ch.throughput("depart")) == pytest.approx(lam * (1 - piK), rel=1e-12)
    assert float(ch.throughput("lost")) == pytest.approx(lam * piK, rel=1e-10)
    t = ch.throughput("depart")
    assert t.status.ok and t.error_bound < 1e-10


def test_bad_arguments_are_named():
    ch, n = erlang_line(5, 1.0)
    with pytest.raises(ValueError, match="eps"):
        ch.prob_within("end", 1.0, eps=2.0)
    with pytest.raises(ValueError, match="t:"):
        ch.prob_within("end", -1.0)
    with pytest.raises(ValueError, match="no label 'nope'"):
        ch.prob_within("nope", 1.0)
    with pytest.raises(ValueError, match="reward"):
        ch.cumulative_reward(np.ones(3), 1.0)


def test_one_liners_agree_across_backends(backend):
    ch, a, b = _cycle()
    A = (a == 4) & (b == 3)
    s = ch.prob_within(A, [0.5, 2.0])
    p = ch.prob_within(A, [0.5, 2.0], backend=backend)
    np.testing.assert_allclose(p.value, s.value, rtol=1e-12)
    np.testing.assert_allclose(p.values, s.values, rtol=1e-12, atol=1e-300)
    c1, c2 = ch.cumulative_reward(a + b, 1.5), ch.cumulative_reward(a + b, 1.5, backend=backend)
    assert float(c2.value) == pytest.approx(float(c1.value), rel=1e-12)
    t = ch.throughput("dep", backend=backend)
    assert float(t) == pytest.approx(float(ch.stationary().pi @ ch.event_rate("dep")), rel=1e-10)


def test_one_liners_against_storm(tmp_path):
    """The same questions asked of Storm on ctmc's DRN export (skipped without stormpy)."""
    import ctmc.io as cio
    from helpers_io import model_chain, storm
    chain = model_chain()
    path = cio.write_drn(chain, tmp_path / "t.drn")
    props = ['P=? [F<=5 "full"]', 'R{"load"}=? [C<=5]', 'T=? [F "full"]', 'R{"cost"}=? [LRA]',
             'P=? [F<=0.2 "full"]']
    got = storm({"kind": "drn", "path": str(path), "properties": props})["values"]
    ours = [float(chain.prob_within("full", 5.0).value), float(chain.cumulative_reward("load", 5.0).value),
            chain.hitting_times("full").at_initial(), chain.long_run().expect("cost"),
            float(chain.prob_within("full", 0.2).value)]
    # measured: all five agree to 2.4e-15 relative (Storm with its direct solver)
    np.testing.assert_allclose(ours, got, rtol=1e-9)


def _stiff_birth_death(n=40, seed=3):
    rng = np.random.default_rng(seed)
    Q = np.zeros((n, n))
    for i in range(n - 1):
        Q[i, i + 1] = 1.0 + rng.random()
        Q[i + 1, i] = 1.2 + rng.random()
    Q[0, n // 2] = 50.0
    np.fill_diagonal(Q, -Q.sum(1))
    return Q


@pytest.mark.parametrize("t", [10.0, 1000.0, pytest.param(20000.0, marks=pytest.mark.slow)])  # 1e6 steps: 12 s
def test_error_bounds_cover_the_round_off_of_long_sums(t):
    """Up to 1e6 uniformisation steps: the round-off grows with them and the bound must follow.

    Reference for the accumulated reward: int_0^t exp(Qs) ds r = t Pi r + (I - exp(Qt)) D r, with the
    deviation matrix D = (Pi - Q)^-1 - Pi (an algebraic route, no time stepping). Before the bound
    counted round-off, t = 20000 reported 6e-9 for an error of 1.2e-5.
    """
    Q = _stiff_birth_death()
    n = Q.shape[0]
    c = ctmc.CTMC(Q, initial=0)
    r = np.arange(n, dtype=float)
    A = np.vstack([Q.T, np.ones(n)])
    b = np.zeros(n + 1)
    b[-1] = 1
    pi = np.linalg.lstsq(A, b, rcond=None)[0]
    Pi = np.outer(np.ones(n), pi)
    D = np.linalg.inv(Pi - Q) - Pi
    ref = t * Pi @ r + (np.eye(n) - sla.expm(Q * t)) @ D @ r
    cr = c.cumulative_reward(r, t)
    err = np.abs(cr.values - ref).max()
    assert err <= cr.error_bound <= 1e-6 * t * r.max()
    Qa = Q.copy()
    Qa[n - 1] = 0.0
    pw = c.prob_within({n - 1}, t)
    assert np.abs(pw.values - sla.expm(Qa * t)[:, n - 1]).max() <= pw.error_bound <= 1e-6


def test_prob_within_bound_holds_on_random_chains():
    rng = np.random.default_rng(11)
    for _ in range(30):
        n = int(rng.integers(3, 13))
        R = rng.random((n, n)) * 10.0 ** rng.uniform(-2, 2, (n, n)) * (rng.random((n, n)) < 0.5)
        R[np.arange(n), (np.arange(n) + 1) % n] += 0.1
        c = ctmc.CTMC.from_rates(R)
        A = np.zeros(n, dtype=bool)
        A[rng.integers(n)] = True
        Qa = c.Q.toarray()
        Qa[A] = 0.0
        for t in (0.01, 1.0, 30.0):
            got = c.prob_within(A, t)
            ref = sla.expm(Qa * t)[:, A].sum(axis=1)
            assert np.abs(got.values - ref).max() <= got.error_bound


def test_transient_at_a_huge_time_is_dense_or_refused_not_a_hang():
    """Review finding: ctmc solve --transient 1e12 ran for minutes (a Krylov exponential of 1e12 steps)."""
    ch, a, b = _cycle()
    r = ch.transient({"a": 0, "b": 0}, 1e12)
    assert r.method == "expm" and r.status.ok
    np.testing.assert_allclose(r.p, ch.stationary().pi, atol=1e-9)
    big = ctmc.Model("big")
    k = big.var("k", 0, 1500)
    big.event("up", guard=k < 1500, rate=1.0, update={k: k + 1})
    big.event("down", guard=k > 0, rate=2.0, update={k: k - 1})
    with pytest.raises(ValueError, match="t: the largest time needs about"):
        big.build(initial={"k": 0}).transient({"k": 0}, 1e12)


@pytest.mark.parametrize("absorbing", [None, {3}, {0, 2}])
def test_expected_at_is_expm_of_the_generator_with_the_absorbing_rows_zero(absorbing):
    # E_i[v(X_t)] = (e^{Q't} v)_i with Q' = Q with the rows of the absorbing states zero; prob_within is
    # the case v = 1_A, A absorbing
    from ctmc.measures import expected_at
    rng = np.random.default_rng(3)
    Q = rng.uniform(0.2, 2.0, (4, 4))
    np.fill_diagonal(Q, 0.0)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    chain = ctmc.CTMC(Q, initial=1)
    v = np.array([2.0, -1.0, 0.5, 3.0])
    Qa = Q.copy()
    if absorbing:
        Qa[sorted(absorbing)] = 0.0
    res = expected_at(chain, v, 0.7, absorbing=absorbing)
    want = sla.expm(Qa * 0.7) @ v
    np.testing.assert_allclose(np.asarray(res.values).reshape(-1), want, rtol=1e-12, atol=1e-14)
    assert res.status is ctmc.Status.SUCCESS and res.error_bound < 1e-9
    assert float(res.value[0]) == pytest.approx(want[1], rel=1e-12)


@pytest.mark.parametrize("measure", ["prob_within", "expected_at", "cumulative_reward"])
def test_uniformised_measures_are_graded_against_the_error_tol_given(measure):
    """The uniformised measures grade their bound (relative to the largest value possible) against
    the ``error_tol`` passed, by the rule of every analysis (were: the default ``error_tol`` only);
    the values are the closed forms of a 2-state chain either way, and ``error_tol <= 0`` is refused."""
    from ctmc import measures
    a, b, t = 3.0, 1.0, 0.7            # P_0(X_u = 0) = b/(a+b) + a/(a+b) e^{-(a+b)u}
    c = ctmc.CTMC([[-a, a], [b, -b]], initial=0)
    f = getattr(measures, measure)
    arg = {"prob_within": {1}, "expected_at": [1.0, 0.0], "cumulative_reward": [1.0, 0.0]}[measure]
    ref = {"prob_within": 1 - np.exp(-a * t),
           "expected_at": b / (a + b) + a / (a + b) * np.exp(-(a + b) * t),
           "cumulative_reward": b / (a + b) * t + a / (a + b) ** 2 * (1 - np.exp(-(a + b) * t))}[measure]
    ok = f(c, arg, t)
    tight = f(c, arg, t, check=False, error_tol=1e-30)
    assert ok.status == ctmc.Status.SUCCESS and 0 < ok.error_bound < 1e-9
    value = float(np.ravel(ok.value)[0])
    assert value == pytest.approx(ref, rel=1e-12) and float(np.ravel(tight.value)[0]) == value
    assert tight.status == ctmc.Status.INACCURATE and "exceeds error_tol 1.0e-30" in tight.message
    with pytest.raises(ctmc.SolverError, match="error_tol"):
        f(c, arg, t, error_tol=1e-30)
    with pytest.raises(ValueError, match="error_tol"):
        f(c, arg, t, error_tol=0.0)
