"""ctmc.models.jsq: the two-queue JSQ chain against closed forms, exact rational
arithmetic, the unreduced chain, and the ordering results of Tibi (2019).

Independent answers used here:
* the design notes' formulas as printed (direct sums, exact rationals);
* a generator written out from the rate table of the design notes in exact
  rational arithmetic, solved by Fraction Gaussian elimination (K <= 4);
* the M/M/1/2K queue (full pooling, nu = 1);
* consistency relations (P_block = 1/(1 + E_(K-1,K)[tau]); minus the
  derivative of the transform at 0 equals the mean; mass one).
"""
from fractions import Fraction as Fr
import itertools
import math

import numpy as np
import pytest

from reference import fraction_solve as fr_solve

from ctmc.models.jsq import (JSQ2, blocking_probability, log_blocking_probability, log_saturation_mean,
                             saturation_mean, total_number_law)

MU2 = [0.0, 0.25, 0.5, 0.75, 1.0]
RHO = [0.5, 0.9, 1.0, 1.3]


def nu_cases(mu2):
    """Standard model, help (towards full pooling) and disturbance."""
    return [None, min(1.0, mu2 + 0.5), mu2 / 2]


# ---------------------------------------------------------------------------
# independent references
# ---------------------------------------------------------------------------
def design_saturation_mean(K, rho, mu1, nu, x, y):
    """E_(x,y)[tau] exactly as printed in the design notes (any number type)."""
    one = type(rho)(1)
    T = [0 * one]
    for j in range(1, 2 * K + 1):
        T.append(T[-1] + one / rho ** j)
    n = x + y
    W = sum((T[m] for m in range(n + 1, 2 * K + 1)), 0 * one)
    corr = 0 * one
    for j in range(2, 2 * K + 1):
        U = min(j - 2, 2 * K - j)
        L = max(0, x - max(0, j - y - 1))
        if L <= U:
            corr += sum((mu1 ** i for i in range(L, U + 1)), 0 * one) / rho ** j
    return W - (1 - nu) * corr


def design_blocking(K, rho, mu1, nu):
    den = sum(rho ** j for j in range(2 * K + 1)) - (1 - nu) * sum((mu1 * rho) ** m for m in range(K))
    return rho ** (2 * K) / den


def rational_generator(K, rho, mu1, nu):
    """Rate table of the design notes, states (x, y) with x <= y, in Fractions."""
    states = [(x, y) for x in range(K + 1) for y in range(x, K + 1)]
    pos = {s: i for i, s in enumerate(states)}
    n = len(states)
    Q = [[Fr(0)] * n for _ in range(n)]

    def add(a, b, r):
        if r:
            Q[pos[a]][pos[b]] += r
            Q[pos[a]][pos[a]] -= r

    for (x, y) in states:
        if x < y:
            add((x, y), (x + 1, y), rho)
            if x >= 1:
                add((x, y), (x - 1, y), mu1)
                add((x, y), (x, y - 1), 1 - mu1)
        elif x < K:
            add((x, y), (x, y + 1), rho)
        if x == y and x >= 1:
            add((x, y), (x - 1, y), Fr(1))
        if x == 0 and y >= 1:
            add((x, y), (x, y - 1), nu)
    return states, Q


def rational_hitting(Q, states, target, s=Fr(0), reward=None):
    """E_i[exp(-s T)] (reward None, s given) or E_i[T] (reward='time') exactly."""
    F = [i for i, st in enumerate(states) if not target(st)]
    A = [[(s if i == j else Fr(0)) - Q[i][j] for j in F] for i in F]
    if reward == "time":
        b = [Fr(1)] * len(F)
    else:
        b = [sum((Q[i][j] for j, st in enumerate(states) if target(st)), Fr(0)) for i in F]
    x = fr_solve(A, b)
    out = [Fr(0) if reward == "time" else Fr(1)] * len(states)
    for k, i in enumerate(F):
        out[i] = x[k]
    return out


# ---------------------------------------------------------------------------
# closed forms
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("K", [1, 2, 3, 4])
@pytest.mark.parametrize("rho", [Fr(1, 2), Fr(9, 10), Fr(1), Fr(13, 10)])
@pytest.mark.parametrize("mu2", [Fr(0), Fr(1, 4), Fr(1, 2), Fr(1)])
@pytest.mark.parametrize("nu", ["std", Fr(1), Fr(0)])
def test_closed_forms_against_exact_rational_chain(K, rho, mu2, nu):
    nu = mu2 if nu == "std" else nu
    mu1 = 1 - mu2
    states, Q = rational_generator(K, rho, mu1, nu)
    exact = rational_hitting(Q, states, lambda st: st == (K, K), reward="time")
    # the printed formula is exact (rational arithmetic, every state)
    for st, e in zip(states, exact):
        assert design_saturation_mean(K, rho, mu1, nu, *st) == e
    # our subtraction-free float closed form, to a few ulps
    ours = saturation_mean(K, float(rho), float(mu2), float(nu), states=states)
    ex = np.array([float(e) for e in exact])
    assert np.allclose(ours, ex, rtol=1e-14, atol=0)
    # blocking: exact stationary law of the rational chain (pi Q = 0, sum 1)
    n = len(states)
    A = [[Q[j][i] for j in range(n)] for i in range(n - 1)] + [[Fr(1)] * n]
    if mu2 == 1:   # states with y - x >= 2 are transient; the law still solves pi Q = 0
        pass
    pi = fr_solve(A, [Fr(0)] * (n - 1) + [Fr(1)])
    pb = pi[states.index((K, K))]
    assert design_blocking(K, rho, mu1, nu) == pb
    assert abs(blocking_probability(K, float(rho), float(mu2), float(nu)) / float(pb) - 1) < 1e-14
    # P_block = 1 / (1 + E_(K-1,K)[tau])
    assert pb == 1 / (1 + exact[states.index((K - 1, K))])
    # the law of N given N >= K is geometric
    lawN = [sum((p for st, p in zip(states, pi) if sum(st) == n), Fr(0)) for n in range(K, 2 * K + 1)]
    tot = sum(lawN)
    assert np.allclose(total_number_law(K, float(rho), float(mu2), float(nu)),
                       [float(p / tot) for p in lawN], rtol=1e-14, atol=0)


def test_design_notes_example():
    # design notes (models.md, JSQ): rho = 0.9, mu1 = mu2 = nu = 1/2, K = 10
    assert abs(blocking_probability(10, 0.9, 0.5) - 0.0152027282106) < 1e-13
    e00 = saturation_mean(10, 0.9, 0.5, states=[(0, 0)])[0]
    assert abs(e00 - 460.2416647) < 1e-7


@pytest.mark.parametrize("K", [30, 80])
@pytest.mark.parametrize("rho,mu2,nu", [(0.5, 0.5, None), (0.9, 0.25, 0.0), (1.0, 1.0, None),
                                        (1.3, 0.0, 0.7), (0.9, 0.75, 1.0)])
def test_closed_form_against_printed_formula_in_floats(K, rho, mu2, nu):
    # K moderate: the printed formula (differences of sums) is still accurate
    # enough in long double to check the regrouped one
    nuv = mu2 if nu is None else nu
    st = [(x, y) for x in range(0, K + 1, 7) for y in range(x, K + 1, 5)]
    ours = saturation_mean(K, rho, mu2, nu, states=st)
    ref = np.array([float(design_saturation_mean(K, np.longdouble(rho), np.longdouble(1 - mu2),
                                                  np.longdouble(nuv), x, y)) for x, y in st])
    assert np.allclose(ours, ref, rtol=1e-9, atol=0)


def test_log_forms_beyond_the_double_range():
    # full pooling (nu = 1): N is an M/M/1/2K queue, whose blocking is known in logs
    for K, rho in [(5000, 0.5), (3000, 0.8), (4000, 1.4)]:
        lp = log_blocking_probability(K, rho, 0.3, idle_rate=1.0)
        lr = math.log(rho)
        # pi_2K = rho^2K (1 - rho) / (1 - rho^(2K+1))
        if rho < 1:
            ref = 2 * K * lr + math.log1p(-rho) - math.log1p(-rho ** (2 * K + 1))
        else:   # divide through by rho^(2K+1)
            ref = math.log(rho - 1) - lr - math.log1p(-rho ** -(2 * K + 1))
        assert abs(lp - ref) < 1e-12 * abs(ref) + 1e-13
    # P_block = 1 / (1 + E_(K-1,K)[tau]), both far below/above the double range
    for K, rho, mu2, nu in [(3000, 0.5, 0.5, None), (3000, 0.7, 0.0, 0.0), (2500, 0.6, 1.0, None)]:
        lp = log_blocking_probability(K, rho, mu2, nu)
        le = log_saturation_mean(K, rho, mu2, nu, states=[(K - 1, K)])[0]
        assert lp < -700 and le > 700
        assert abs(lp + le) < 1e-12 * abs(lp)     # log(1 + E) = log E here
    with pytest.raises(OverflowError, match="log_saturation_mean"):   # not a silent inf
        saturation_mean(3000, 0.5, 0.5, states=[(0, 0)])
    assert blocking_probability(3000, 0.5, 0.5) == 0.0


@pytest.mark.parametrize("mu2", [1e-8, 1e-12, 5e-17])
def test_closed_forms_keep_accuracy_for_tiny_mu2(mu2):
    # mu1 = 1 - mu2 must not be rounded before its powers are taken
    K, rho, nu = 40, 0.5, 0.0
    r, m1 = Fr(rho), 1 - Fr(mu2)
    exact = design_blocking(K, r, m1, Fr(nu))
    assert abs(blocking_probability(K, rho, mu2, nu) / float(exact) - 1) < 1e-13
    for st in [(K - 1, K), (0, K), (3, 17)]:
        e = design_saturation_mean(K, r, m1, Fr(nu), *st)
        assert abs(saturation_mean(K, rho, mu2, nu, states=[st])[0] / float(e) - 1) < 1e-13


# ---------------------------------------------------------------------------
# the chain against the closed forms
# ---------------------------------------------------------------------------
GRID = ([(K, rho, mu2, nu) for K in (1, 2, 7, 25) for rho in RHO for mu2 in MU2 for nu in nu_cases(mu2)]
        + [(100, rho, mu2, nu) for rho in RHO for mu2 in (0.0, 0.5, 1.0) for nu in (None, 0.75)
           if (mu2, nu) != (0.0, None)])   # mu2 = nu = 0: test_nonreturning_longest_queue...


@pytest.mark.parametrize("K,rho,mu2,nu", GRID)
def test_chain_against_closed_forms_grid(K, rho, mu2, nu):
    q = JSQ2(K, rho, mu2, nu)
    res = q.stationary()
    assert res.residual < 1e-12 and (res.pi >= 0).all() and abs(res.pi.sum() - 1) < 1e-12
    assert abs(q.blocking_probability() / blocking_probability(K, rho, mu2, nu) - 1) < 1e-9
    cf = q.saturation_times(source="closed_form")
    ch = q.saturation_times()
    fin = cf > 0
    assert np.allclose(ch[fin], cf[fin], rtol=1e-9, atol=0) and (ch[~fin] == 0).all()
    # geometric law of N on {K..2K}
    lawN = q.total_number_law()[K:]
    assert np.allclose(lawN / lawN.sum(), total_number_law(K, rho, mu2, nu), rtol=1e-9)


@pytest.mark.parametrize("K,rho,mu2,nu", [(300, 0.5, 0.5, None), (300, 0.9, 0.25, 0.75),
                                          (200, 1.0, 0.0, 0.0), (200, 1.3, 1.0, None),
                                          (250, 0.9, 0.75, 1.0), (300, 0.5, 0.0, 0.25),
                                          (80, 1.3, 0.5, None), (300, 1.1, 0.5, None),
                                          (200, 1.3, 0.75, 1.0), (150, 2.0, 0.25, 0.0)])
def test_large_K_tails_relative(K, rho, mu2, nu):
    # tail probabilities far below 1e-16 (1e-181 at rho = 0.5) to 1e-9 relative
    q = JSQ2(K, rho, mu2, nu)
    pb, cf = q.blocking_probability(), blocking_probability(K, rho, mu2, nu)
    assert abs(pb / cf - 1) < 1e-9
    res = q.saturation_analysis()
    exact = q.saturation_times(source="closed_form")
    fin = exact > 0
    assert np.allclose(res.mean[fin], exact[fin], rtol=1e-9, atol=0)
    assert res.status.value == "success"


def test_nonreturning_longest_queue_is_flagged_yet_accurate():
    # mu2 = nu = 0: the longest queue never decreases; the hitting times span
    # ten orders of magnitude and the normwise condition estimate exceeds
    # 1/eps. ctmc reports INACCURATE instead of claiming success; the numbers
    # it returns are still checked against the closed form.
    q = JSQ2(300, 0.9, 0.0)
    with pytest.raises(Exception, match="inaccurate"):
        q.saturation_analysis()
    res = q.saturation_analysis(check=False)
    assert res.status.value == "inaccurate"
    exact = q.saturation_times(source="closed_form")
    fin = exact > 0
    assert np.allclose(res.mean[fin], exact[fin], rtol=1e-9, atol=0)


def test_measures_and_little():
    q = JSQ2(12, 1.1, 0.3, idle_rate=0.8)
    m = q.measures()
    pi = q.stationary().pi
    st = q.chain().states
    assert abs(m.mean_total - pi @ (st["s"] + st["l"])) < 1e-12
    # flow balance: accepted rate = departure rate (event throughputs of the chain)
    ch = q.chain()
    served = sum(pi @ ch.event_rate(e) for e in ("serve_short", "serve_long", "serve_equal", "serve_alone"))
    assert abs(served - m.throughput) < 1e-12
    assert abs(pi @ ch.event_rate("blocked") / q.rho - m.blocking_probability) < 1e-14


# ---------------------------------------------------------------------------
# the reduction (q1, q2) -> (min, max)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("K,rho,mu2,nu", [(6, 0.9, 0.3, None), (5, 1.3, 0.0, 0.5), (7, 0.5, 1.0, 0.2)])
def test_full_chain_lumps_to_reduced_chain(K, rho, mu2, nu):
    q = JSQ2(K, rho, mu2, nu)
    full = q.full_chain()
    assert full.n_states == (K + 1) ** 2
    pf = full.stationary().pi
    q1, q2 = full.states["q1"], full.states["q2"]
    red = q.chain()
    lo, hi = np.minimum(q1, q2), np.maximum(q1, q2)
    idx = np.array([red.index(s=a, l=b) for a, b in zip(lo, hi)])
    agg = np.bincount(idx, weights=pf, minlength=red.n_states)
    pr = q.stationary().pi
    assert np.allclose(agg, pr, rtol=1e-10, atol=1e-15)
    # hitting times of saturation are functions of (min, max)
    hf = full.hitting_times(lambda e: (e["q1"] == K) & (e["q2"] == K)).mean
    hr = q.saturation_times()
    assert np.allclose(hf, hr[idx], rtol=1e-10, atol=0)


# ---------------------------------------------------------------------------
# Laplace transform of the saturation time, first queue-length equality
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("K,rho,mu2,nu", [(3, Fr(9, 10), Fr(1, 4), Fr(1, 4)), (4, Fr(13, 10), Fr(1, 2), Fr(1)),
                                          (2, Fr(1, 2), Fr(1), Fr(0))])
def test_saturation_laplace_exact_rational(K, rho, mu2, nu):
    q = JSQ2(K, float(rho), float(mu2), float(nu))
    states, Q = rational_generator(K, rho, 1 - mu2, nu)
    order = [q.chain().index(s=x, l=y) for x, y in states]
    for s in [Fr(0), Fr(1, 10), Fr(3, 2)]:
        exact = rational_hitting(Q, states, lambda st: st == (K, K), s=s)
        got = q.saturation_laplace(float(s)).values[order]
        assert np.allclose(got, [float(e) for e in exact], rtol=1e-13, atol=0)


@pytest.mark.parametrize("K,rho,mu2,nu", [(10, 0.9, 0.5, None), (20, 1.3, 0.25, 0.0), (15, 0.7, 1.0, None)])
def test_minus_transform_derivative_is_the_mean(K, rho, mu2, nu):
    q = JSQ2(K, rho, mu2, nu)
    mom = q.saturation_times(moments=2)
    m1, m2 = mom
    i = q.chain().index(s=0, l=0)
    h = 1e-4 / m1[i]
    phi = q.saturation_laplace([h, 2 * h, 3 * h]).values[:, i]
    # one-sided differences from phi(0) = 1 (second and third order)
    d1 = (-3 + 4 * phi[0] - phi[1]) / (2 * h)
    d2 = (2 - 5 * phi[0] + 4 * phi[1] - phi[2]) / h ** 2
    assert abs(-d1 / m1[i] - 1) < 1e-6
    assert abs(d2 / m2[i] - 1) < 1e-3
    assert abs(m1[i] / saturation_mean(K, rho, mu2, nu, states=[(0, 0)])[0] - 1) < 1e-10


@pytest.mark.parametrize("K,rho,mu2,nu", [(3, Fr(9, 10), Fr(1, 4), Fr(1, 2)), (4, Fr(1, 2), Fr(3, 4), Fr(0)),
                                          (3, Fr(13, 10), Fr(1), Fr(1))])
def test_first_equality_exact_rational(K, rho, mu2, nu):
    q = JSQ2(K, float(rho), float(mu2), float(nu))
    s_pts = [Fr(0), Fr(1, 3)]
    res = q.first_equality(s=[float(v) for v in s_pts])
    states, Q = rational_generator(K, rho, 1 - mu2, nu)
    ch = q.chain()
    xy = list(zip(ch.states["s"].tolist(), ch.states["l"].tolist()))
    src = [xy[i] for i in res.sources]
    tgt = [xy[j] for j in res.targets]
    assert all(x < y for x, y in src) and all(x == y for x, y in tgt)
    for k, s in enumerate(s_pts):
        for c, t in enumerate(tgt):
            # E[exp(-sT); X_T = t]: hit the equal states, reward 1 only at t
            F = [i for i, st in enumerate(states) if st[0] != st[1]]
            A = [[(s if i == j else Fr(0)) - Q[i][j] for j in F] for i in F]
            b = [Q[i][states.index(t)] for i in F]
            x = fr_solve(A, b)
            for r, st in enumerate(src):
                assert abs(res.laplace[k, r, c] - float(x[F.index(states.index(st))])) < 1e-14
    # mass one: the equal states are reached almost surely
    assert np.allclose(res.probabilities.sum(axis=1), 1.0, rtol=1e-13)
    assert np.allclose(res.laplace[0], res.probabilities, rtol=1e-13, atol=1e-16)


def test_first_equality_cdf_and_mean():
    q = JSQ2(12, 0.9, 0.3, idle_rate=0.6)
    t = np.array([0.5, 2.0, 10.0, 60.0, 400.0])
    res = q.first_equality(t=t)
    cdf = res.cdf.sum(axis=2)                       # P(T <= t), per source
    assert (np.diff(cdf, axis=0) >= -1e-12).all() and (cdf <= 1 + 1e-12).all()
    assert np.allclose(res.cdf[-1], res.probabilities, atol=1e-9)
    assert res.error_bound < 1e-9
    # mean time to equality: integral of the survival function vs hitting times
    tt = np.concatenate([[0.0], np.geomspace(1e-3, 400.0, 600)])
    dense = q.first_equality(t=tt).cdf.sum(axis=2)
    integral = np.trapz(1 - dense, tt, axis=0)
    h = q.chain().hitting_times(lambda e: e["s"] == e["l"]).mean[res.sources]
    assert np.allclose(integral, h, rtol=2e-3)


# ---------------------------------------------------------------------------
# ordering (Tibi 2019): monotone in mu2, bounded by the extreme cases
# ---------------------------------------------------------------------------
def ccdf(p):
    return np.cumsum(p[::-1])[::-1]


@pytest.mark.parametrize("rho", [0.5, 0.9, 1.3])
def test_stochastic_ordering_in_mu2(rho):
    K = 12
    mus = np.linspace(0, 1, 9)
    N = np.array([ccdf(JSQ2(K, rho, m).total_number_law()) for m in mus])
    L = np.array([ccdf(JSQ2(K, rho, m).longest_queue_law()) for m in mus])
    # P(N >= n) and P(longest >= n) decrease as mu2 increases (standard model)
    assert (np.diff(N, axis=0) <= 1e-14).all()
    assert (np.diff(L, axis=0) <= 1e-14).all()
    # mu2 = 1 is full pooling: N is an M/M/1/2K queue
    mm1 = rho ** np.arange(2 * K + 1)
    assert np.allclose(N[-1], ccdf(mm1 / mm1.sum()), rtol=1e-12)
    # the extreme cases bound the extended model too (help or disturbance)
    for mu2, nu in itertools.product([0.2, 0.6], [0.0, 0.4, 1.0]):
        c = ccdf(JSQ2(K, rho, mu2, nu).total_number_law())
        assert (c >= N[-1] - 1e-14).all() and (c <= N[0] + 1e-14).all()


# ---------------------------------------------------------------------------
# input validation and command line
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,name", [
    (dict(K=0, rho=0.9, mu2=0.5), "K"), (dict(K=2.5, rho=0.9, mu2=0.5), "K"),
    (dict(K=5, rho=0.0, mu2=0.5), "rho"), (dict(K=5, rho=float("nan"), mu2=0.5), "rho"),
    (dict(K=5, rho=0.9, mu2=1.5), "mu2"), (dict(K=5, rho=0.9, mu2=-0.1), "mu2"),
    (dict(K=5, rho=0.9, mu2=0.5, idle_rate=1.2), "idle_rate"),
    (dict(K=5, rho=0.9, mu2=0.5, idle_rate=-0.1), "idle_rate"),
    (dict(K=5, rho=0.9, mu2=0.5, idle_rate=float("nan")), "idle_rate"),
    (dict(K=5, rho=float("inf"), mu2=0.5), "rho"), (dict(K=5, rho=0.9, mu2=float("nan")), "mu2"),
    (dict(K=True, rho=0.9, mu2=0.5), "K"), (dict(K=5, rho=True, mu2=0.5), "rho"),
    (dict(K=5, rho=0.9, mu2=True), "mu2"), (dict(K=5, rho=0.9, mu2=0.5, idle_rate=True), "idle_rate"),
])
def test_invalid_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        JSQ2(**kwargs)
    with pytest.raises(ValueError, match=name):
        blocking_probability(**kwargs)


def test_bad_source_and_states():
    q = JSQ2(3, 0.9, 0.5)
    with pytest.raises(ValueError, match="source"):
        q.blocking_probability("magic")
    with pytest.raises(ValueError, match="states"):
        saturation_mean(3, 0.9, 0.5, states=[(2, 1)])
    with pytest.raises(ValueError, match="states"):
        saturation_mean(3, 0.9, 0.5, states=[(0.7, 1.9)])
    with pytest.raises(ValueError, match="options"):
        q.saturation_times(source="closed_form", solver="gth")


def test_exact_rationals_are_accepted_as_parameters():
    assert blocking_probability(4, Fr(9, 10), Fr(1, 2)) == blocking_probability(4, 0.9, 0.5)
    assert JSQ2(4, Fr(9, 10), Fr(1, 4), Fr(1, 2)).nu == 0.5


def test_first_equality_from_chosen_sources_matches_all_sources():
    q = JSQ2(15, 1.1, 0.4, idle_rate=0.7)
    full = q.first_equality(s=[0.0, 0.5], t=[3.0])
    some = q.first_equality(s=[0.0, 0.5], t=[3.0], sources=[{"s": 2, "l": 9}, {"s": 0, "l": 15}])
    ch = q.chain()
    assert sorted(some.sources) == sorted([ch.index(s=2, l=9), ch.index(s=0, l=15)])
    rows = np.searchsorted(full.sources, some.sources)
    assert np.allclose(some.laplace, full.laplace[:, rows], rtol=1e-13, atol=1e-300)
    assert np.allclose(some.cdf, full.cdf[:, rows], rtol=1e-10, atol=1e-14)


def test_report_rows_agree_with_closed_forms():
    from ctmc.models.jsq import report
    out = report()
    rows = [line.split() for line in out.splitlines()[3:]]
    assert len(rows) == 5
    for r in rows:
        status = r[-2]
        if status == "success":
            assert float(r[6]) < 1e-9 and float(r[8]) < 1e-9
        else:   # mu2 = nu = 0: flagged by ctmc's condition estimate, numbers still printed
            assert status == "inaccurate" and float(r[2]) == 0.0


def test_cli_rejects_bad_parameters_in_one_line(capsys):
    from ctmc.cli import main
    with pytest.raises(SystemExit) as exc:
        main(["jsq", "--K", "0"])
    assert exc.value.code == 2 and "K: capacity" in capsys.readouterr().err


def test_cli_prints_main_measures(capsys):
    from ctmc.cli import main
    assert main(["jsq", "--K", "30", "--rho", "0.9", "--mu2", "0.3"]) == 0
    out = capsys.readouterr().out
    assert "blocking probability" in out and "mean sojourn time" in out
    # the CLI prints the relative differences to the closed forms: all tiny
    diffs = [float(tok) for line in out.splitlines() if "rel. diff" in line
             for tok in [line.split("rel. diff")[1].split()[0]]]
    assert len(diffs) == 2 and max(diffs) < 1e-9


# ---------------------------------------------------------------------------
# large K: the level route of the stationary law
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("K,rho,mu2,nu", [(150, 0.9, 0.5, None), (120, 1.3, 0.25, 0.6), (150, 0.7, 0.8, 0.2)])
def test_level_route_keeps_the_tail(K, rho, mu2, nu):
    """``level_iad`` from the model's start (the default beyond LEVEL_STATES) against the closed form
    of P_block and the law of N, and against LU state by state down to the smallest probabilities."""
    q = JSQ2(K, rho, mu2, nu)
    lvl = q.stationary("level_iad", tol=1e-13)
    assert lvl.method == "level_iad" and lvl.status == "success"
    pb = lvl.pi[q.chain().index(s=K, l=K)]
    assert abs(pb / blocking_probability(K, rho, mu2, nu) - 1) < 1e-9
    law = np.bincount(q.levels(), weights=lvl.pi)[K:]
    law /= law.sum()
    ref = total_number_law(K, rho, mu2, nu)         # the law of N given N >= K
    assert np.max(np.abs(law / ref - 1)) < 1e-9
    # the far corners (1e-100 and below) converge after the level law, as a front: level_iad goes
    # on while it advances, to the model's tail_tol (LEVEL_TAIL_TOL), every normal double in reach
    lu = q.stationary("lu")
    normal = lu.pi >= np.finfo(float).tiny
    assert np.max(np.abs(lvl.pi[normal] / lu.pi[normal] - 1)) < 1e-9
    assert q.stationary("level_iad", tol=1e-13) is lvl      # cached, not solved again


@pytest.mark.parametrize("K,rho,mu2,nu", [(300, 0.4, 0.5, None), (260, 0.5, 0.3, 0.7), (200, 0.3, 0.6, None),
                                         (600, 0.4, 0.5, None), (600, 0.7, 0.2, None)])
def test_level_route_is_relative_down_to_the_smallest_normal_double(K, rho, mu2, nu):
    """Laws whose tails fall to 1e-219 .. 1e-304 or underflow (K=300, rho=0.4: 2304 states below
    2.2e-308): ``level_iad`` from the model's start meets its balance (status success) and every
    probability above the smallest normal double is within 1e-9 of LU's. The largest balance error
    rides on the front of the tail's convergence and stalls while the front moves on (the count of
    states behind it measures the progress); a start floored just below the normal range left a
    plateau feeding the smallest normal states (3e-7 off at K=200, rho=0.3). At K=600, rho=0.4 the
    level masses underflow (0.4^1200): the level law is cut where they leave the double range (it
    broke down after 2 iterations). At K=600, rho=0.7, mu2=0.2 the law falls by 0.347 per step of y
    along x = 0, the old start's guess by 0.62: 1e152 too heavy there, 1e16 errors after 1000
    iterations (tail_inaccurate); the start's rates are now fitted on the law at K = 80."""
    q = JSQ2(K, rho, mu2, nu)
    lvl = q.stationary("level_iad")
    assert lvl.status == "success"
    lu = q.stationary("lu")
    normal = lu.pi >= np.finfo(float).tiny
    assert np.max(np.abs(lvl.pi[normal] / lu.pi[normal] - 1)) < 1e-9


def test_default_method_switches_to_the_level_route(monkeypatch):
    q = JSQ2(40, 0.9, 0.5)
    monkeypatch.setattr(JSQ2, "LEVEL_STATES", 100)
    assert q.stationary().method == "level_iad"
    assert q.blocking_probability() == q.stationary().pi[-1]      # reuses the cached law
    assert abs(q.blocking_probability() / q.blocking_probability("closed_form") - 1) < 1e-9


def test_start_vector_is_positive_even_without_shortest_service():
    x0 = JSQ2(30, 0.9, 1.0).start_vector()
    assert x0.min() > 0 and np.isfinite(x0).all()


def test_backend_is_checked_before_any_build():
    with pytest.raises(ValueError, match="backend: expected one of"):
        JSQ2(10, 0.9, 0.5, backend="cuda")


# ---------------------------------------------------------------------------
# PETSc: JSQ2(..., backend="petsc") under mpirun -n 2 against the scipy route
# ---------------------------------------------------------------------------
#: the MPI job's cases: (K, rho, mu2, nu, stationary methods); the default suite runs the first
MPI_CASES = {"small": (25, 0.5, 0.3, 0.6, ("lu", "gauss_seidel")),
             # K = 1000: MUMPS's root front is large enough to go to ScaLAPACK, whose row
             # interchanges cost P_block 7.8e-8 (41,416 negative states) before diagonal pivots
             "mumps_root": (1000, 0.9, 0.5, None, ("lu",)),
             # level masses down to 0.02^200 = 1.6e-340: the level law is cut where they underflow
             # (level_factors); the old level law broke down to NaN there
             "level_underflow": (100, 0.02, 0.5, None, ("level_iad",))}


def _mpi_job(case, out_path):
    import json
    import warnings

    from ctmc.backends.petsc_backend import load_petsc

    warnings.simplefilter("ignore")
    K, rho, mu2, nu, methods = MPI_CASES[case]
    q = JSQ2(K, rho, mu2, nu, backend="petsc")
    ref = JSQ2(K, rho, mu2, nu)
    out = {"size": load_petsc().COMM_WORLD.getSize(), "rows": [q.chain().start, q.chain().stop]}
    tiny = ref.stationary("lu").pi
    big = tiny > 1e-250
    normal = tiny >= np.finfo(float).tiny
    pb = ref.blocking_probability("closed_form")
    for m in methods:
        opts = {"tol": 1e-14, "tail_tol": 1e-12} if m in ("gauss_seidel", "level_iad") else {}
        r = q.stationary(m, **opts)
        out[m] = {"status": r.status.value, "min_pi": float(tiny[big].min()),
                  "tail_tol": opts.get("tail_tol", 1e-6),
                  "rel_pi": float(np.max(np.abs(r.pi[big] / tiny[big] - 1))),
                  "rel_normal": float(np.max(np.abs(r.pi[normal] / tiny[normal] - 1))),
                  "below_normal": int(np.count_nonzero(~normal)), "finite": bool(np.isfinite(r.pi).all()),
                  "pb_closed_form": abs(float(r.pi[-1]) / pb - 1) if pb > 0 else float(r.pi[-1])}
    m, mr = q.measures(), ref.measures()
    out["measures"] = {f: abs(getattr(m, f) / getattr(mr, f) - 1) if getattr(mr, f) else abs(getattr(m, f))
                       for f in ("blocking_probability", "mean_total", "throughput", "mean_sojourn_time")}
    if case == "small":
        sat, sat_ref = q.saturation_analysis(), ref.saturation_analysis()
        pos = sat_ref.mean > 0                       # all but the target itself
        out["saturation"] = {"status": sat.status.value, "states": int(pos.sum()),
                             "rel": float(np.max(np.abs(sat.mean[pos] / sat_ref.mean[pos] - 1)))}
    if load_petsc().COMM_WORLD.getRank() == 0:
        with open(out_path, "w") as f:
            json.dump(out, f)


def _run_mpi(case, tmp_path, timeout):
    from mpi_jobs import mpi_ready, run_job
    if not mpi_ready():
        pytest.skip("petsc4py or mpirun not installed (scripts/bootstrap.sh)")
    return run_job(__file__, tmp_path / f"{case}.json", case, timeout=timeout)


def _check_mpi(data, methods):
    for m in methods:
        r = data[m]
        # success where the tail is within tail_tol, else tail_inaccurate (Gauss-Seidel stops at a balance
        # error of 1e-12, 8e-12 off relatively): the grade says which
        assert r["status"] == ("success" if r["rel_normal"] <= r["tail_tol"] else "tail_inaccurate"), (m, r)
        assert r["rel_pi"] < 1e-9, (m, r)           # down to the smallest probabilities
        assert r["pb_closed_form"] < 1e-9, (m, r)
    assert max(data["measures"].values()) < 1e-9, data["measures"]


@pytest.mark.petsc
def test_petsc_two_ranks_match_scipy(tmp_path):
    """JSQ2(..., backend="petsc") on two MPI processes: the stationary law by MUMPS and by Gauss-Seidel
    sweeps (the other block's ghosts), the measures and the saturation means, against the scipy
    route state by state (smallest probability 2.8e-21)."""
    data = _run_mpi("small", tmp_path, 240)
    assert data["rows"][0] == 0 and 0 < data["rows"][1] < 351      # rank 0 owns the first block only
    _check_mpi(data, MPI_CASES["small"][4])
    assert data["lu"]["min_pi"] < 1e-20
    assert data["saturation"]["status"] == "success" and data["saturation"]["rel"] < 1e-9, data["saturation"]


@pytest.mark.slow
@pytest.mark.petsc
def test_petsc_two_ranks_mumps_keeps_the_tail_at_K1000(tmp_path):
    """MUMPS on two processes with ctmc's diagonal pivots: P_block (3.4e-93) to 1e-9 of the closed form."""
    _check_mpi(_run_mpi("mumps_root", tmp_path, 600), MPI_CASES["mumps_root"][4])


@pytest.mark.petsc
def test_petsc_two_ranks_level_iad_where_the_level_masses_underflow(tmp_path):
    """``level_iad`` on two processes (the distributed loop: level sums over the ranks, the other
    block's entries from the last sweep) where the level masses leave the double range (0.02^200):
    the level law is cut there (``level_factors``) and every probability above the smallest normal
    double is within 1e-9 of scipy's LU (at 1e-307 and below), P_block (1e-340) underflows to 0."""
    data = _run_mpi("level_underflow", tmp_path, 400)
    r = data["level_iad"]
    assert r["status"] == "success" and r["finite"], r
    assert r["below_normal"] > 100 and r["min_pi"] < 1e-249           # the law leaves the double range
    assert r["rel_normal"] < 1e-9, r
    assert r["pb_closed_form"] < np.finfo(float).tiny                 # P_block = 1.6e-340: 0 in doubles
    assert max(data["measures"].values()) < 1e-9, data["measures"]


if __name__ == "__main__":          # the MPI job: python tests/test_jsq.py CASE OUT.json (under mpirun)
    import sys
    _mpi_job(sys.argv[1], sys.argv[2])
