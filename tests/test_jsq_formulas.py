"""ctmc.models.jsq.tibi: the level recursions and large-K expansions of the JSQ model.

Independent answers used here:
* the rate table of the design notes written out in exact rational arithmetic
  and solved by Fraction Gauss-Jordan elimination (K <= 4);
* ctmc's generic chain analyses (``JSQ2.saturation_laplace``,
  ``JSQ2.first_equality``, ``JSQ2.saturation_times``);
* full pooling (nu = 1): N is an M/M/1/2K queue, whose passage transforms
  follow from the continued fraction g_n = rho / (rho + 1 + s - g_{n-1});
* mu2 = nu = 1: before the first equality x only grows (rate rho) and y only
  falls (rate 1), so T is Gamma(y - x, rho + 1) and x_T - x is
  Binomial(y - x, rho / (1 + rho)), independent of T;
* the subtraction-free closed forms of the design notes (closed_forms.py).
"""
from fractions import Fraction as Fr
import math

import numpy as np
import pytest

from reference import fraction_solve

from ctmc.models.jsq import JSQ2, log_blocking_probability, log_saturation_mean, saturation_mean
from ctmc.models.jsq.tibi import (blocking_expansion, first_equality_law, saturation_laplace,
                                  saturation_mean_expansion)


def rational_table(K, rho, mu1, nu):
    """Off-diagonal rates of the design notes' table, states (x, y), x <= y <= K."""
    states = [(x, y) for x in range(K + 1) for y in range(x, K + 1)]
    rates = {st: [] for st in states}
    for (x, y) in states:
        if x < y:
            rates[(x, y)].append(((x + 1, y), rho))
            if x >= 1:
                rates[(x, y)] += [((x - 1, y), mu1), ((x, y - 1), 1 - mu1)]
            else:
                rates[(x, y)].append(((x, y - 1), nu))
        else:
            if x < K:
                rates[(x, y)].append(((x, y + 1), rho))
            if x >= 1:
                rates[(x, y)].append(((x - 1, y), Fr(1)))
    return states, rates


def rational_transform(states, rates, target, s, gain=None):
    """E_i[exp(-s T_target) gain(X_T)] for every state off the target, exactly (``gain`` 1 by default)."""
    free = [st for st in states if not target(st)]
    pos = {st: i for i, st in enumerate(free)}
    A = [[Fr(0)] * len(free) for _ in free]
    b = [Fr(0)] * len(free)
    for st in free:
        i = pos[st]
        A[i][i] = s + sum((r for _, r in rates[st]), Fr(0))
        for nb, r in rates[st]:
            if target(nb):
                b[i] += r * (1 if gain is None else gain(nb))
            else:
                A[i][pos[nb]] -= r
    sol = fraction_solve(A, b)
    return {st: sol[pos[st]] for st in free}


CASES = [(Fr(1, 2), Fr(1, 2), None), (Fr(9, 10), Fr(1, 4), Fr(3, 5)), (Fr(13, 10), Fr(0), Fr(0)),
         (Fr(9, 10), Fr(1), None), (Fr(7, 10), Fr(3, 4), Fr(1, 10))]


@pytest.mark.parametrize("rho,mu2,nu", CASES)
def test_saturation_laplace_exact_rational(rho, mu2, nu):
    nu = mu2 if nu is None else nu
    for K in (1, 3, 4):
        states, rates = rational_table(K, rho, 1 - mu2, nu)
        for s in (Fr(0), Fr(1, 100), Fr(3, 2), Fr(40)):
            exact = rational_transform(states, rates, lambda st: st == (K, K), s)
            exact[(K, K)] = Fr(1)
            r = saturation_laplace(K, float(rho), float(mu2), float(nu), s=float(s), states=states)
            ref = np.array([float(exact[st]) for st in states])
            assert r.status == "success"
            assert np.allclose(r.values[0], ref, rtol=1e-13, atol=0)


@pytest.mark.parametrize("K,rho,mu2,nu", [(25, 0.9, 0.5, None), (20, 0.5, 0.3, 0.8), (25, 1.3, 0.0, 0.0),
                                          (20, 0.9, 1.0, None), (20, 0.7, 0.25, 0.1)])
def test_saturation_laplace_against_chain(K, rho, mu2, nu):
    q = JSQ2(K=K, rho=rho, mu2=mu2, idle_rate=nu)
    S = [0.0, 1e-3, 0.5, 5.0]
    ch = q.saturation_laplace(S)
    st = q.chain().states
    r = saturation_laplace(K, rho, mu2, nu, s=S, states=np.column_stack([st["s"], st["l"]]))
    assert r.status == "success" and r.residual < 1e-12
    ok = ch.values > 1e-280               # the chain's doubles; tails reach 1e-70 here
    assert ok.mean() > 0.99
    assert np.allclose(r.values[ok], ch.values[ok], rtol=1e-10, atol=0)


def test_saturation_laplace_tails_against_chain():
    # large s: the transform falls to 1e-280 inside the chain's double range (and to e^-900 beyond it)
    K, rho, mu2, nu = 120, 1.2, 0.6, 0.2
    q = JSQ2(K=K, rho=rho, mu2=mu2, idle_rate=nu)
    ch = q.saturation_laplace([0.5, 50.0])
    st = q.chain().states
    r = saturation_laplace(K, rho, mu2, nu, s=[0.5, 50.0], states=np.column_stack([st["s"], st["l"]]))
    ok = ch.values > 1e-280
    assert ch.values[ok].min() < 1e-270 and r.log_values.min() < -800
    assert np.allclose(r.values[ok], ch.values[ok], rtol=1e-10, atol=0)


def mm1_log_transform(K, rho, s):
    """log E_n[exp(-s T_2K)], n = 0..2K, for the birth-death chain (rho up, 1 down)."""
    lg = np.empty(2 * K)
    g = rho / (rho + s)
    lg[0] = math.log(g)
    for n in range(1, 2 * K):
        g = rho / (rho + 1.0 + s - g)
        lg[n] = math.log(g)
    return np.concatenate([np.cumsum(lg[::-1])[::-1], [0.0]])


@pytest.mark.parametrize("K,rho,mu2,s", [(1000, 0.9, 0.3, 10.0), (600, 1.5, 0.0, 0.2), (800, 0.5, 1.0, 1e-4)])
def test_saturation_laplace_log_tails_full_pooling(K, rho, mu2, s):
    # nu = 1: N is M/M/1/2K whatever mu2, so f depends on x + y only; values to exp(-30000)
    r = saturation_laplace(K, rho, mu2, 1.0, s=s)
    ref = mm1_log_transform(K, rho, s)[r.states.sum(axis=1)]
    assert np.allclose(r.log_values[0], ref, rtol=1e-12, atol=1e-12)
    assert r.status == "success"


def test_saturation_laplace_mean_by_small_s():
    # minus the slope at 0 is the mean (closed form)
    K, rho, mu2 = 12, 0.9, 0.4
    h = 1e-6
    r = saturation_laplace(K, rho, mu2, s=[h, 2 * h])
    mean = saturation_mean(K, rho, mu2, states=r.states)
    # 1 - f(h) = h E - h^2 E2/2 + ..., Richardson on two steps
    est = 2 * (1 - r.values[0]) / h - (1 - r.values[1]) / (2 * h)
    assert np.allclose(est, mean, rtol=1e-5)


# ---------------------------------------------------------------------------
# first equality
# ---------------------------------------------------------------------------
def rational_first_equality(states, rates, s, k):
    """E_i[exp(-s T); x_T = k], T the first time x = y, for every unequal state, exactly."""
    return rational_transform(states, rates, lambda st: st[0] == st[1], s, gain=lambda st: int(st == (k, k)))


@pytest.mark.parametrize("rho,mu2,nu", CASES)
def test_first_equality_exact_rational(rho, mu2, nu):
    nu = mu2 if nu is None else nu
    K = 5
    states, rates = rational_table(K, rho, 1 - mu2, nu)
    sources = [(x, y) for (x, y) in states if x < y]
    for s in (Fr(0), Fr(7, 10)):
        law = first_equality_law(float(rho), float(mu2), float(nu), sources=sources, s=float(s))
        assert law.status == "success" and law.laplace.shape == (1, len(sources), K + 1)
        for k in range(K + 1):
            exact = rational_first_equality(states, rates, s, k)
            ref = np.array([float(exact[st]) for st in sources])
            assert np.array_equal(ref > 0, law.laplace[0, :, k] > 0)
            assert np.allclose(law.laplace[0, :, k], ref, rtol=1e-13, atol=0)


@pytest.mark.parametrize("K,rho,mu2,nu", [(25, 0.9, 0.5, None), (20, 0.5, 0.3, 0.8), (25, 1.3, 0.0, 0.0),
                                          (20, 0.9, 1.0, None), (20, 2.0, 0.9, 0.0), (20, 0.3, 0.0, 0.7)])
def test_first_equality_against_chain(K, rho, mu2, nu):
    q = JSQ2(K=K, rho=rho, mu2=mu2, idle_rate=nu)
    ch = q.chain()
    src = [(0, 1), (2, 7), (1, K), (K - 1, K), (0, K)]
    S = [0.0, 0.3, 2.0]
    law = first_equality_law(rho, mu2, nu, sources=src, s=S)
    assert law.status == "success"
    fp = q.first_equality(s=S, sources=[{"s": x, "l": y} for x, y in src])
    rows = {int(i): j for j, i in enumerate(np.asarray(fp.sources))}
    ref = np.asarray(fp.laplace)
    for i, (x, y) in enumerate(src):
        c = ref[:, rows[ch.index(s=x, l=y)], :]
        mine = law.laplace[:, i, :]
        assert np.all(c[:, mine.shape[1]:] == 0)
        c = c[:, :mine.shape[1]]
        assert np.array_equal(c > 0, mine > 0)
        pos = c > 0
        assert np.allclose(mine[pos], c[pos], rtol=1e-10, atol=0)
    assert np.allclose(law.laplace[0].sum(axis=1), 1.0, rtol=1e-13)


def test_first_equality_log_tails_binomial():
    # mu2 = nu = 1: T ~ Gamma(D, rho + 1), x_T - x ~ Binomial(D, rho / (1 + rho)), independent
    rho, s = 0.7, 3.0
    src = [(0, 1500), (100, 1200), (5, 6)]
    law = first_equality_law(rho, 1.0, 1.0, sources=src, s=[0.0, s])
    assert law.status == "success"
    p = rho / (1 + rho)
    for i, (x, y) in enumerate(src):
        D = y - x
        j = np.arange(D + 1)
        lbin = (math.lgamma(D + 1) - np.array([math.lgamma(a + 1) + math.lgamma(D - a + 1) for a in j])
                + j * math.log(p) + (D - j) * math.log1p(-p))
        for si, lt in ((0, 0.0), (1, D * math.log((rho + 1) / (rho + 1 + s)))):
            got = law.log_laplace[si, i, x:y + 1]
            assert np.allclose(got, lbin + lt, rtol=1e-11, atol=1e-9)
            assert np.all(np.isneginf(law.log_laplace[si, i, :x]))
    assert law.log_laplace[1, 0].min() < -1000        # far below the double range


def test_first_equality_independent_of_K_and_bad_input():
    a = first_equality_law(0.9, 0.3, 0.5, sources=[(3, 9)], s=0.2)
    q = JSQ2(K=9, rho=0.9, mu2=0.3, idle_rate=0.5)
    b = np.asarray(q.first_equality(s=[0.2], sources={"s": 3, "l": 9}).laplace)[0, 0]
    assert np.allclose(a.laplace[0, 0], b, rtol=1e-12, atol=1e-300)
    with pytest.raises(ValueError, match="sources"):
        first_equality_law(0.9, 0.3, sources=[(3, 3)])
    with pytest.raises(ValueError, match="^s:"):
        first_equality_law(0.9, 0.3, sources=[(0, 3)], s=-1.0)
    with pytest.raises(ValueError, match="^rho:"):
        first_equality_law(-0.9, 0.3, sources=[(0, 3)])
    with pytest.raises(ValueError, match="^states:"):
        saturation_laplace(5, 0.9, 0.3, s=1.0, states=[(4, 6)])
    with pytest.raises(ValueError, match="^K:"):
        saturation_laplace(0, 0.9, 0.3, s=1.0)


# ---------------------------------------------------------------------------
# large-K expansions
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("rho,mu2,nu", [(0.9, 0.3, None), (0.5, 0.5, 0.8), (1.3, 0.25, 0.1), (0.7, 0.0, 0.0),
                                        (0.8, 1.0, None), (2.0, 0.6, 1.0), (0.75, 0.25, 0.5)])
def test_mean_expansion_is_exact(rho, mu2, nu):
    # the expansion sums the design formula's geometric sums: exact for x + y <= K
    mu1 = 1 - mu2
    for K in (3, 6, 10, 20):
        for st in [(0, 0), (0, 3), (1, 2), (2, 2), (1, K - 1), (0, K)]:
            if st[0] + st[1] > K:
                continue
            e = saturation_mean_expansion(K, rho, mu2, nu, state=st)
            full = e.C * rho ** (-2 * K) + e.a * (mu1 / rho) ** K + e.slope * K + e.const
            assert abs(full / saturation_mean(K, rho, mu2, nu, states=[st])[0] - 1) < 1e-13


def test_mean_expansion_against_chain():
    q = JSQ2(K=60, rho=0.95, mu2=0.35, idle_rate=0.2)
    m = q.saturation_times()
    idx = q.chain().index(s=3, l=9)
    e = saturation_mean_expansion(60, 0.95, 0.35, 0.2, state=(3, 9))
    full = e.C * 0.95 ** -120 + e.a * (0.65 / 0.95) ** 60 + e.slope * 60 + e.const
    assert abs(full / m[idx] - 1) < 1e-10


@pytest.mark.parametrize("rho,mu2,nu", [(0.999, 0.3, None), (0.998, 0.1, 0.05), (0.999, 0.6, 0.0),
                                        (1.001, 0.3, None)])
def test_leading_terms_to_K4500(rho, mu2, nu):
    # relative error of the leading term, from the exact log-space closed forms, equals
    # the prediction and decreases with K (like max(mu1 rho, rho^2)^K for rho < 1, 1/K above)
    errs = []
    for K in (100, 500, 1500, 4500):
        e = saturation_mean_expansion(K, rho, mu2, nu, state=(0, 0))
        act = math.expm1(log_saturation_mean(K, rho, mu2, nu, states=[(0, 0)])[0] - e.log_leading)
        assert abs(act - e.predicted_relative_error) <= 1e-9 * max(abs(act), 1e-3)
        lb, eb = blocking_expansion(K, rho, mu2, nu)
        actb = math.expm1(log_blocking_probability(K, rho, mu2, nu) - lb)
        assert abs(actb - eb) <= 1e-9 * max(abs(actb), 1e-3)
        errs.append(abs(act))
    assert errs == sorted(errs, reverse=True)
    assert errs[-1] < (0.05 if rho < 1 else 0.2) * errs[0]
    if rho < 1:
        nu_ = mu2 if nu is None else nu
        C = saturation_mean_expansion(10, rho, mu2, nu).C
        assert C == pytest.approx((rho * mu2 + nu_ * (1 - rho)) / ((1 - rho) ** 2 * (1 - rho * (1 - mu2))))


def test_full_pooling_constant_and_kac():
    # nu = 1: the M/M/1 constant 1/(1-rho)^2; E_(0,0)[tau] ~ 1/((1-rho) P_block)
    assert saturation_mean_expansion(50, 0.8, 0.3, 1.0).C == pytest.approx(1 / 0.2 ** 2, rel=1e-14)
    K, rho, mu2 = 300, 0.9, 0.3
    lm = log_saturation_mean(K, rho, mu2, states=[(0, 0)])[0]
    assert abs(math.expm1(lm + log_blocking_probability(K, rho, mu2) + math.log(1 - rho))) < 1e-12
    with pytest.raises(ValueError, match="^rho:"):
        saturation_mean_expansion(10, 1.0, 0.3)
    with pytest.raises(ValueError, match="^state:"):
        saturation_mean_expansion(10, 0.9, 0.3, state=(5, 6))


@pytest.mark.parametrize("K, rho, mu2, nu", [(9, 0.9, 0.3, None), (15, 1.3, 0.5, 0.8)])
def test_jsq2_saturation_laplace_closed_form_route_is_the_chains(K, rho, mu2, nu):
    """``JSQ2.saturation_laplace(source="closed_form")`` gives the chain's transform, state by state."""
    q = JSQ2(K=K, rho=rho, mu2=mu2, idle_rate=nu)
    s = [0.0, 0.02, 3.0]
    chain = q.saturation_laplace(s).values
    formula = q.saturation_laplace(s, source="closed_form")
    assert formula.status == "success"
    np.testing.assert_allclose(formula.values, chain, rtol=1e-10, atol=0)
    with pytest.raises(ValueError, match="source"):
        q.saturation_laplace(s, source="tibi")
    with pytest.raises(ValueError, match="options"):
        q.saturation_laplace(s, source="closed_form", method="lu")
