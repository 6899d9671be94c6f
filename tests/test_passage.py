"""Hitting times, transforms, first-passage laws: closed forms and dense references."""
from fractions import Fraction

import numpy as np
import pytest
import scipy.linalg as sla

import ctmc

from reference import birth_death, hitting_mean_bd, random_chain

SOLVERS = ["auto", "gth", "lu"]


def bd_chain(K, lam, mu):
    m, n = birth_death(K, lambda n: lam, lambda n: mu)
    return m.build(initial={"n": 0}), n


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("K,lam,mu", [(10, 1.0, 1.0), (40, 2.0, 1.0), (60, 1.0, 3.0)])
def test_mean_hitting_time_birth_death_closed_form(solver, K, lam, mu):
    chain, n = bd_chain(K, lam, mu)
    h = chain.hitting_times(n == K, method=solver)
    exact = np.array([float(hitting_mean_bd(K, lam, mu, i)) for i in range(K + 1)])
    assert h.status is ctmc.Status.SUCCESS
    assert np.allclose(h.mean, exact, rtol=1e-11, atol=0)
    assert h.finite.all() and h.mean[K] == 0


@pytest.mark.parametrize("K", [330, 1000])
def test_huge_means_keep_relative_accuracy(K):
    # rates up 1, down 2: E_0[T_K] ~ 2^K (1e99 and 1e301)
    chain, n = bd_chain(K, 1.0, 2.0)
    h = chain.hitting_times(n == K)
    for i in [0, K // 2, K - 1]:
        exact = hitting_mean_bd(K, 1, 2, i)
        assert abs(Fraction(h.mean[i]) / exact - 1) < 1e-10
    assert h.info["balance_error"] < 1e-12


def test_sparse_lu_on_huge_means_goes_regenerative_or_says_so():
    chain, n = bd_chain(330, 1.0, 2.0)
    # plain SuperLU loses every digit here (condition ~1e100, or an exactly
    # singular pivot, depending on the ordering); the mean is recovered
    # through a regeneration state with full relative accuracy
    h = chain.hitting_times(n == 330, method="lu")
    assert h.method == "lu-regenerative" and h.info["condition"] < 1e8
    assert abs(Fraction(h.mean[0]) / hitting_mean_bd(330, 1, 2, 0) - 1) < 1e-12
    # higher moments cannot be recovered that way: an error, not a number
    with pytest.raises(ctmc.SolverError, match="moments >= 2"):
        chain.hitting_times(n == 330, moments=2, method="lu")


def test_second_moment_two_state_exponential():
    # leave state 0 at rate 3: T ~ Exp(3), E[T] = 1/3, E[T^2] = 2/9, E[T^3] = 6/27
    chain = ctmc.CTMC([[-3.0, 3.0], [1.0, -1.0]])
    h = chain.hitting_times([1], moments=3)
    assert np.allclose(h.moments[:, 0], [1 / 3, 2 / 9, 6 / 27], rtol=1e-14)
    assert h.variance()[0] == pytest.approx(1 / 9, rel=1e-12)


@pytest.mark.parametrize("solver", SOLVERS)
def test_moments_and_rewards_against_dense_algebra(solver):
    R = random_chain(25, 7, 0.3)
    chain = ctmc.CTMC.from_rates(R)
    A = np.zeros(25, dtype=bool)
    A[[0, 5]] = True
    rew = np.linspace(0.5, 2.0, 25)
    h = chain.hitting_times(A, moments=2, reward=rew, method=solver)
    Q = chain.Q.toarray()
    T = ~A
    M = -Q[np.ix_(T, T)]
    m1 = np.linalg.solve(M, rew[T])
    m2 = np.linalg.solve(M, 2 * rew[T] * m1)
    assert np.allclose(h.moments[0, T], m1, rtol=1e-10)
    assert np.allclose(h.moments[1, T], m2, rtol=1e-10)


def test_unreachable_target_gives_infinite_mean():
    # 0 -> 1 (target) or 0 -> 2 (absorbing trap); 3 -> 0
    R = np.zeros((4, 4))
    R[0, 1], R[0, 2], R[3, 0] = 1.0, 1.0, 1.0
    chain = ctmc.CTMC.from_rates(R)
    h = chain.hitting_times([1])
    assert np.isinf(h.mean[[0, 2, 3]]).all() and h.mean[1] == 0
    assert not h.finite[0] and "almost surely" in h.message
    # but the probability of reaching it is 1/2 from 0 and 3, 0 from 2
    lap = chain.hitting_laplace([1], 0.0)
    assert np.allclose(lap.values, [0.5, 1.0, 0.0, 0.5])


@pytest.mark.parametrize("solver", SOLVERS)
def test_laplace_transform_closed_form_and_derivative(solver):
    chain, n = bd_chain(12, 1.0, 1.5)
    s = np.array([0.0, 1e-6, 0.5, 2.0])
    lst = chain.hitting_laplace(n == 12, s, method=solver)
    assert np.allclose(lst.values[0], 1.0)
    h = chain.hitting_times(n == 12, moments=2)
    # (1 - E[exp(-hT)]) / h = E[T] - h E[T^2] / 2 + O(h^2): minus the derivative at 0 is the mean
    deriv = (lst.values[0] - lst.values[1]) / 1e-6
    assert np.allclose(deriv, h.mean - 0.5e-6 * h.moments[1], rtol=1e-6)
    # exponential sojourn from the last state: E_K[..] = 1; from K-1 via dense solve
    Q = chain.Q.toarray()
    T = np.arange(12)
    for k, sk in enumerate(s):
        M = sk * np.eye(12) - Q[np.ix_(T, T)]
        b = Q[T, 12]
        assert np.allclose(lst.values[k, :12], np.linalg.solve(M, b), rtol=1e-10)


def test_invalid_inputs_raise_value_errors():
    chain, n = bd_chain(5, 1.0, 1.0)
    with pytest.raises(ValueError, match="target.*empty"):
        chain.hitting_times(n > 10)
    with pytest.raises(ValueError, match="s:"):
        chain.hitting_laplace(n == 5, -1.0)
    with pytest.raises(ValueError, match="t:"):
        chain.first_passage(n == 5, t=[-1.0])
    with pytest.raises(ValueError, match="moments"):
        chain.hitting_times(n == 5, moments=0)
    with pytest.raises(ValueError, match="reward"):
        chain.hitting_times(n == 5, reward=-np.ones(6))
    with pytest.raises(ValueError, match="method.*valid methods"):
        chain.hitting_times(n == 5, method="magic")
    with pytest.raises(ValueError, match="options.*valid options"):
        chain.hitting_times(n == 5, maxiter=3)          # an option of no passage method 'auto' has
    with pytest.raises(ValueError, match="options.*valid options"):
        chain.hitting_times(n == 5, method="gth", ordering="COLAMD")


@pytest.mark.parametrize("solver", SOLVERS)
def test_gamblers_ruin_absorption_probabilities(solver):
    # birth-death on 0..K absorbed at 0 and K: P_i(hit K first) = (1 - r^i) / (1 - r^K), r = mu/lam
    K, lam, mu = 20, 1.0, 1.3
    chain, n = bd_chain(K, lam, mu)
    fp = chain.first_passage((n == 0) | (n == K), s=[0.0, 0.7], method=solver)
    r = mu / lam
    i = np.arange(K + 1)
    win = (1 - r ** i) / (1 - r ** K)
    assert np.allclose(fp.probabilities[:, 1], win, rtol=1e-11)
    assert np.allclose(fp.probabilities.sum(axis=1), 1.0, atol=1e-13)
    assert np.allclose(fp.laplace[0], fp.probabilities, atol=1e-15)
    # the transform, summed over places, is the hitting-time transform
    lst = chain.hitting_laplace((n == 0) | (n == K), 0.7)
    assert np.allclose(fp.laplace[1].sum(axis=1), lst.values, rtol=1e-11)


def test_first_passage_sources_and_both_solve_directions():
    R = random_chain(40, 11, 0.2)
    chain = ctmc.CTMC.from_rates(R)
    A = np.zeros(40, dtype=bool)
    A[[3, 17, 29]] = True
    full = chain.first_passage(A, s=[0.3], method="lu")
    few = chain.first_passage(A, s=[0.3], sources=[0, 1], method="lu")  # adjoint path
    assert np.allclose(few.probabilities, full.probabilities[[0, 1]], rtol=1e-10)
    assert np.allclose(few.laplace, full.laplace[:, [0, 1]], rtol=1e-10)
    dense = chain.first_passage(A, s=[0.3], method="gth")
    assert np.allclose(dense.laplace, full.laplace, rtol=1e-10)


def test_joint_cdf_against_dense_matrix_exponential():
    R = random_chain(15, 3, 0.4)
    chain = ctmc.CTMC.from_rates(R)
    A = np.zeros(15, dtype=bool)
    A[[2, 9]] = True
    times = np.array([0.0, 0.3, 1.0, 4.0])
    fp = chain.first_passage(A, t=times)
    Qa = chain.Q.toarray()
    Qa[A] = 0.0
    for k, t in enumerate(times):
        E = sla.expm(Qa * t)
        assert np.allclose(fp.cdf[k], E[:, A], atol=1e-12)
    assert fp.error_bound <= 1e-12
    # as t grows the CDF tends to the absorption law
    late = chain.first_passage(A, t=[200.0])
    assert np.allclose(late.cdf[0], late.probabilities, atol=1e-10)


def test_first_passage_cdf_exponential_example():
    chain = ctmc.CTMC([[-3.0, 1.0, 2.0], [0, 0, 0], [0, 0, 0]])
    fp = chain.first_passage([1, 2], t=[0.5, 2.0], sources=[0])
    for k, t in enumerate([0.5, 2.0]):
        assert np.allclose(fp.cdf[k, 0], np.array([1, 2]) / 3 * (1 - np.exp(-3 * t)), rtol=1e-12)


@pytest.mark.parametrize("ordering", ["COLAMD", "NATURAL", "MMD_AT_PLUS_A"])
def test_every_factorising_passage_analysis_takes_the_ordering(ordering):
    """The ordering reaches the factorisation (info says which) and does not change the answer."""
    from ctmc.models.gallery import GALLERY
    c = GALLERY["tandem"](20).chain()
    tgt = c.states["sc"] == 20
    ref = c.hitting_times(tgt, method="gth")
    h = c.hitting_times(tgt, method="lu", ordering=ordering)
    assert h.info["ordering"] == ordering and np.allclose(h.mean, ref.mean, rtol=1e-10, atol=0)
    la = c.hitting_laplace(tgt, 0.5, method="lu", ordering=ordering)
    assert la.info["ordering"] == ordering
    assert np.allclose(la.values, c.hitting_laplace(tgt, 0.5, method="gth").values, rtol=1e-10, atol=0)
    fp = c.first_passage(tgt, 0.5, [1.0], method="lu", ordering=ordering)
    assert fp.info["ordering"] == ordering


@pytest.mark.parametrize("method", ["gmres", "bicgstab"])
def test_krylov_passage_keeps_the_tail_by_polishing(method):
    """E[exp(-s T)] into the far corner of a JSQ grid spans 1 .. 1e-25: a Krylov answer stopped on a
    normwise residual has the small values wrong; the Gauss-Seidel polish makes them right entry by
    entry (against GTH), and without it the result says TAIL_INACCURATE."""
    from ctmc.models.jsq import JSQ2
    K = 20
    c = JSQ2(K, 0.9, 0.5).chain()
    S = c.states
    tgt = (S["s"] == K) & (S["l"] == K)
    ref = c.hitting_laplace(tgt, [2.0, 5.0], method="gth").values
    assert ref.min() < 1e-20
    res = c.hitting_laplace(tgt, [2.0, 5.0], method=method, tail_tol=1e-9)
    assert res.status is ctmc.Status.SUCCESS
    assert np.max(np.abs(res.values / ref - 1)) < 1e-7
    with pytest.warns(ctmc.TailAccuracyWarning):        # the noisy tail is announced
        raw = c.hitting_laplace(tgt, [2.0, 5.0], method=method, polish=0, tail_tol=1e-9, check=False)
    raw_err = np.max(np.abs(raw.values / ref - 1))
    assert raw.status is ctmc.Status.TAIL_INACCURATE and raw_err > 1e-7   # 8e-3 (GMRES) here
    assert res.info["polish_sweeps"] > 0


def test_underflowing_transform_values_are_not_a_failed_balance():
    """E[exp(-s T)] from far states underflows below the smallest normal double; the
    component-wise check flagged the exact (GTH) answer TAIL_INACCURATE for it."""
    import warnings
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, 1000)
    m.event("a", guard=n < 1000, rate=0.5, update={n: n + 1})
    m.event("d", guard=n > 0, rate=1.0, update={n: n - 1})
    c = m.build(initial={"n": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")                      # no TailAccuracyWarning
        g = c.hitting_laplace(n == 60, s=[0.1, 1.0], method="gth")
    assert g.status is ctmc.Status.SUCCESS
    lu = c.hitting_laplace(n == 60, s=[0.1, 1.0], method="lu", check=False)
    normal = g.values > 1e-300
    assert (~normal).any()                                  # the case: values that underflow
    np.testing.assert_allclose(lu.values[normal], g.values[normal], rtol=1e-8)


@pytest.mark.parametrize("old, new", [("PassageOptions", "Tolerances"), ("PassageGTHOptions", "GTHOptions"),
                                      ("PassageLUOptions", "DirectOptions"),
                                      ("PassageKrylovOptions", "KrylovSolverOptions")])
def test_old_options_names_are_the_one_class_with_a_deprecation_warning(old, new):
    import ctmc.options
    import ctmc.passage
    with pytest.warns(DeprecationWarning, match=f"ctmc.passage.{old} is deprecated: use ctmc.options.{new}"):
        cls = getattr(ctmc.passage, old)
    assert cls is getattr(ctmc.options, new) and old not in ctmc.passage.__all__


def test_passage_methods_are_one_registry_shape():
    from ctmc.kernels.registry import Method
    assert sorted(ctmc.passage.METHODS) == ["auto", "bicgstab", "gmres", "gth", "lu"]
    assert all(isinstance(m, Method) and callable(m.run) for m in ctmc.passage.METHODS.values())
    assert all(isinstance(m, Method) for m in ctmc.transient.METHODS.values())
    with pytest.warns(DeprecationWarning, match="make_options"):
        opts = ctmc.passage.make_options("gmres", {"maxiter": 2})
    assert opts == ctmc.options.KrylovSolverOptions(maxiter=2)


@pytest.mark.parametrize("method", ["gmres", "bicgstab", "lu"])
def test_shifted_condition_bounds_the_dense_condition_number(method):
    """PassageSetup.condition on M = sI - Q_RR (Laplace transforms; the kernel's rule with a shift):
    above the dense ||M||_inf ||M^-1||_inf and within 6 %, for several s."""
    from ctmc.backends import operator_for
    from ctmc.models.gallery import GALLERY
    from ctmc.passage import PassageSetup
    c = GALLERY["tandem"](12).chain()
    tgt = c.states["sc"] == 12
    op = operator_for(c, "scipy")
    for s in (1e-3, 0.5, 20.0):
        ps = PassageSetup(op, tgt, method)
        ps.solve(s, "reach", np.where(ps.reach, 0.5, 0.0))        # a solve, as an analysis makes first
        cond, st, _ = ps.condition(s, "reach")
        ps.close()
        R = ps.reach
        M = s * np.eye(R.sum()) - c.Q.toarray()[np.ix_(R, R)]
        true = np.abs(M).sum(axis=1).max() * np.abs(np.linalg.inv(M)).sum(axis=1).max()
        assert st is ctmc.Status.SUCCESS and true * (1 - 1e-12) <= cond <= true * 1.06, (s, cond, true)


@pytest.mark.parametrize("reward", [False, True])
def test_krylov_condition_estimate_bounds_the_dense_condition_number(reward, monkeypatch):
    """The condition number behind a Krylov answer's error bound is an upper bound of the true
    ||M||_inf ||M^-1||_inf, and tight: with no reward the mean time's own solve of M y = 1 is
    reused (one Krylov solve, not two; within 1e-6), with a reward a second, loose solve of its
    own gives it (stopped near a residual of 1e-2: within 5 %); against the dense inverse."""
    from ctmc import passage
    from ctmc.models.gallery import GALLERY
    c = GALLERY["tandem"](20).chain()
    tgt = c.states["sc"] == 20
    r = np.where(c.states["sm"] > 2, 1.0, 0.0) if reward else None
    calls = []
    real = passage.PassageSetup.solve
    monkeypatch.setattr(passage.PassageSetup, "solve",
                        lambda self, *a, **k: calls.append(k.get("polish", True)) or real(self, *a, **k))
    res = c.hitting_times(tgt, method="gmres", reward=r)
    assert res.status.ok and res.info["error_bound_kind"] == "proven"
    assert calls == [True]
    F = ~tgt
    M = -c.Q.toarray()[np.ix_(F, F)]
    true = np.abs(M).sum(axis=1).max() * np.abs(np.linalg.inv(M)).sum(axis=1).max()
    assert true <= res.info["condition"] <= true * (1.05 if reward else 1 + 1e-6)
    if reward:
        loose = res.info["condition_solve"]
        assert loose["rtol"] > 1e-10 and loose["iterations"] < res.iterations
    else:
        assert "condition_solve" not in res.info
    ref = c.hitting_times(tgt, method="gth", reward=r)
    assert np.allclose(res.mean, ref.mean, rtol=1e-9, atol=0)


def test_reach_by_products_is_the_graph_search_or_declines():
    """Operator.reach_by_products against the backend's graph search, on random chains and targets."""
    from ctmc.backends import operator_for
    rng = np.random.default_rng(8)
    declined = found = 0
    for _ in range(40):
        n = int(rng.integers(2, 60))
        R = rng.random((n, n)) * (rng.random((n, n)) < rng.uniform(0.02, 0.3))
        R[rng.random(n) < 0.2] = 0.0                          # some absorbing states
        op = operator_for(ctmc.CTMC.from_rates(R), "scipy")
        seeds = rng.random(n) < rng.uniform(0.05, 0.5)
        want = op.reach(seeds)
        for rounds in (1, 4, n):
            got = op.reach_by_products(seeds, rounds=rounds)
            if got is None:
                declined += 1
                assert rounds < n
            else:
                found += 1
                np.testing.assert_array_equal(got, want)
    assert declined and found


def test_the_target_behind_a_long_path_is_still_found():
    """A line 0 -> 1 -> ... -> 30: products decline (30 steps), the search answers; means exact."""
    k, mu = 30, 2.0
    m = ctmc.Model("line")
    n = m.var("n", 0, k)
    m.event("up", guard=n < k, rate=mu, update={n: n + 1})
    chain = m.build(initial={"n": 0})
    from ctmc.backends import operator_for
    assert operator_for(chain, "scipy").reach_by_products(np.arange(k + 1) == k) is None
    res = chain.hitting_times(n == k, method="gmres")
    np.testing.assert_allclose(res.mean, (k - np.arange(k + 1)) / mu, rtol=1e-10)
