"""Tests of ctmc.ph against independent answers.

References used here:
* closed forms: exponential; Erlang = gamma law (scipy.stats.gamma, moments
  Gamma(k + j) / Gamma(k) theta^j); hyperexponential = mixture of
  exponentials; Coxian-2 = exponential or, with probability p, the sum of two
  exponentials (hypoexponential survival function, moments of a sum of
  independent variables).
* the CDF by a second route: the Kolmogorov forward equations of the
  absorbing chain integrated by scipy's DOP853, and the mean as the integral
  of the survival function (quadrature).
* M/M/1/K: p_n proportional to rho^n.
* M/G/1/K: the departure-epoch embedded chain with the Niu-Cooper relation
  (Gross & Harris), its a_k in closed form (Erlang: negative binomial; H2:
  mixture of geometric laws) or by quadrature of the closed-form density.
* M/G/1 for a large capacity: Pollaczek-Khinchine mean number in system
  rho + rho^2 (1 + scv) / (2 (1 - rho)).
* a tandem of two phase-type stations against a generator written by hand.
"""
import math
import re

import numpy as np
import pytest
import scipy.stats as st
from scipy.integrate import quad, solve_ivp

import ctmc
from ctmc import ph


# ---------------------------------------------------------------------------
# laws with closed forms
# ---------------------------------------------------------------------------
def _hypo_sf(x, a, b):
    """P(X1 + X2 > x), X1 ~ exp(a), X2 ~ exp(b), a != b."""
    return (b * np.exp(-a * x) - a * np.exp(-b * x)) / (b - a)


def _hypo_pdf(x, a, b):
    return a * b * (np.exp(-a * x) - np.exp(-b * x)) / (b - a)


def _exp_moment(r, k):
    return math.factorial(k) / r ** k


def _sum_moment(a, b, k):
    """E[(X1 + X2)^k] for independent exponentials of rates a, b."""
    return sum(math.comb(k, i) * _exp_moment(a, i) * _exp_moment(b, k - i) for i in range(k + 1))


class Case:
    def __init__(self, id, law, moment, sf, pdf):
        self.id, self.law, self.moment, self.sf, self.pdf = id, law, moment, sf, pdf


def _cases():
    out = []
    r = 2.5
    out.append(Case("exp", ph.exponential(r), lambda k: _exp_moment(r, k),
                    lambda x: np.exp(-r * x), lambda x: r * np.exp(-r * x)))
    out.append(Case("exp-mean", ph.exponential(mean=0.4), lambda k: _exp_moment(r, k),
                    lambda x: np.exp(-r * x), lambda x: r * np.exp(-r * x)))
    for k, mean in ((1, 2.0), (4, 2.0), (12, 0.5)):
        th = mean / k
        out.append(Case(f"erlang{k}", ph.erlang(k, mean),
                        lambda j, k=k, th=th: math.gamma(k + j) / math.gamma(k) * th ** j,
                        lambda x, k=k, th=th: st.gamma.sf(x, k, scale=th),
                        lambda x, k=k, th=th: st.gamma.pdf(x, k, scale=th)))
    p, rates = np.array([0.1, 0.3, 0.6]), np.array([0.2, 1.0, 7.0])
    out.append(Case("h3", ph.hyperexponential(p, rates),
                    lambda k: float(sum(pi * _exp_moment(ri, k) for pi, ri in zip(p, rates))),
                    lambda x: sum(pi * np.exp(-ri * x) for pi, ri in zip(p, rates)),
                    lambda x: sum(pi * ri * np.exp(-ri * x) for pi, ri in zip(p, rates))))
    a, b, q = 3.0, 0.7, 0.4
    out.append(Case("cox2", ph.coxian([a, b], [q]),
                    lambda k: (1 - q) * _exp_moment(a, k) + q * _sum_moment(a, b, k),
                    lambda x: (1 - q) * np.exp(-a * x) + q * _hypo_sf(x, a, b),
                    lambda x: (1 - q) * a * np.exp(-a * x) + q * _hypo_pdf(x, a, b)))
    return out


CASES = _cases()
IDS = [c.id for c in CASES]
# a general law with a cycle between its phases (no closed form: checked by the ODE route)
CYCLIC = ph.PhaseType([0.6, 0.4, 0.0], [[-3.0, 2.0, 0.5], [1.0, -1.5, 0.0], [0.0, 4.0, -5.0]])
ALL_LAWS = [c.law for c in CASES] + [CYCLIC, ph.fit(1.0, 0.3), ph.fit_h2(2.0, 6.0), ph.fit_coxian2(1.0, 0.7)]


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("k", [0, 1, 2, 3, 4])
def test_moments_match_closed_forms(case, k):
    assert case.law.moment(k) == pytest.approx(case.moment(k), rel=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_mean_variance_scv(case):
    m1, m2 = case.moment(1), case.moment(2)
    law = case.law
    assert law.mean == pytest.approx(m1, rel=1e-13)
    assert law.variance == pytest.approx(m2 - m1 ** 2, rel=1e-11)
    assert law.scv == pytest.approx(m2 / m1 ** 2 - 1, rel=1e-11)
    assert law.exit_rates == pytest.approx(-law.S.sum(axis=1), abs=1e-15)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_sf_cdf_pdf_match_closed_forms_into_the_tails(case):
    m = case.moment(1)
    x = m * np.array([1e-3, 0.05, 0.3, 1.0, 2.0, 5.0, 20.0, 60.0])
    sf, pdf = case.sf(x), case.pdf(x)
    keep = sf > 1e-250  # where the reference itself is representable
    assert case.law.sf(x)[keep] == pytest.approx(sf[keep], rel=1e-10)
    keep = pdf > 1e-250
    assert case.law.pdf(x)[keep] == pytest.approx(pdf[keep], rel=1e-10)
    # the CDF near 0 keeps relative accuracy (it is not 1 - sf); reference: 1 - sf where that is
    # accurate, else the closed form's own small-x value by quadrature of the density
    cdf_ref = np.array([quad(case.pdf, 0, xi, epsabs=0, epsrel=1e-13)[0] if s > 0.5 else 1 - s
                        for xi, s in zip(x, sf)])
    assert case.law.cdf(x) == pytest.approx(cdf_ref, rel=1e-9)


@pytest.mark.parametrize("case", [c for c in CASES if c.id.startswith(("erlang", "h3", "exp"))],
                         ids=lambda c: c.id)
def test_cdf_keeps_relative_accuracy_near_zero(case):
    x = case.moment(1) * np.array([1e-9, 1e-6, 1e-3, 0.1])
    if case.id.startswith("erlang"):
        k, th = case.law.n_phases, case.moment(1) / case.law.n_phases
        ref = st.gamma.cdf(x, k, scale=th)
    else:
        p, r = case.law.alpha, -np.diag(case.law.S)
        ref = sum(pi * -np.expm1(-ri * x) for pi, ri in zip(p, r))
    assert case.law.cdf(x) == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize("law", ALL_LAWS, ids=lambda law: law.name)
def test_uniformization_and_expm_agree(law, monkeypatch):
    x = law.mean * np.array([1e-3, 0.1, 0.5, 1.0, 3.0, 10.0, 30.0])
    monkeypatch.setattr(ph, "_UNIFORMIZE_MAX", 1e9)
    uni = [law.sf(x), law.cdf(x), law.pdf(x)]
    monkeypatch.setattr(ph, "_UNIFORMIZE_MAX", 0.0)
    exm = [law.sf(x), law.cdf(x), law.pdf(x)]
    # expm is accurate relative to 1, not to a tiny CDF near 0 (E12 at x = mean/1000: 4 % off
    # at 1e-32; uniformisation matches the gamma law there, see the test above)
    assert uni[0] == pytest.approx(exm[0], rel=1e-9, abs=1e-300)  # the right tail: both accurate
    for u, e in (uni[1], exm[1]), (uni[2], exm[2]):
        big = e > 1e-6 * e.max()
        assert u[big] == pytest.approx(e[big], rel=1e-9)


def _ode_sf(law, x):
    """alpha exp(S x) 1 by integrating p' = p S (DOP853, tight tolerances): a second route."""
    sol = solve_ivp(lambda t, p: p @ law.S, (0, float(np.max(x))), law.alpha, method="DOP853",
                    t_eval=np.sort(x), rtol=1e-12, atol=1e-15)
    assert sol.success
    return sol.y.sum(axis=0)


@pytest.mark.parametrize("law", ALL_LAWS, ids=lambda law: law.name)
def test_cdf_by_two_routes(law):
    x = np.sort(law.mean * np.array([0.01, 0.2, 0.7, 1.0, 1.5, 3.0, 6.0]))
    assert law.cdf(x) == pytest.approx(1 - _ode_sf(law, x), abs=1e-10)
    # mass conservation, up to the round-off of a few hundred uniformisation terms
    assert law.sf(x) + law.cdf(x) == pytest.approx(np.ones(x.size), abs=5e-14)
    # the mean is the integral of the survival function; the density integrates to the CDF
    assert quad(lambda t: float(law.sf(t)), 0, np.inf, epsrel=1e-11, limit=200)[0] == pytest.approx(
        law.mean, rel=1e-8)
    assert quad(lambda t: float(law.pdf(t)), 0, x[3], epsrel=1e-12)[0] == pytest.approx(
        float(law.cdf(x[3])), rel=1e-9)


def test_cdf_is_vectorised_with_the_shape_of_x():
    law = ph.fit(1.0, 0.5)
    x = np.array([[-1.0, 0.0, 0.5], [1.0, np.inf, 2.0]])
    c = law.cdf(x)
    assert c.shape == x.shape
    assert c[0, 0] == 0 and c[0, 1] == 0 and c[1, 1] == 1
    assert law.sf(x)[0, 0] == 1 and law.pdf(x)[0, 0] == 0
    assert float(law.cdf(0.5)) == c[0, 2]
    assert np.all(np.diff(law.cdf(np.linspace(0, 5, 50))) >= 0)


# ---------------------------------------------------------------------------
# two-moment fits
# ---------------------------------------------------------------------------
FITS = ([(ph.fit, c2) for c2 in (0.02, 0.1, 0.25, 0.3, 1 / 3, 0.5, 0.55, 0.9, 1.0, 1.5, 4.0, 30.0)]
        + [(ph.fit_h2, c2) for c2 in (1.0, 1.2, 5.0, 100.0)]
        + [(ph.fit_coxian2, c2) for c2 in (0.5, 0.6, 1.0, 3.0, 50.0)])


@pytest.mark.parametrize("mean", [1.0, 0.037, 250.0])
@pytest.mark.parametrize("fitter,scv", FITS, ids=[f"{f.__name__}-{c:.3g}" for f, c in FITS])
def test_fits_reproduce_mean_and_scv(fitter, scv, mean):
    law = fitter(mean, scv)
    assert law.mean == pytest.approx(mean, rel=1e-12)
    assert law.scv == pytest.approx(scv, rel=1e-12, abs=1e-13)
    # the same two moments from the law's own parameters (structure-specific closed forms)
    if fitter is ph.fit_coxian2:
        a, b = -law.S[0, 0], -law.S[1, 1]
        q = law.S[0, 1] / a
        m1, m2 = 1 / a + q / b, (1 - q) * 2 / a ** 2 + q * _sum_moment(a, b, 2)
    elif fitter is ph.fit_h2 or (fitter is ph.fit and scv > 1):
        p, r = law.alpha, -np.diag(law.S)
        assert np.allclose(law.S, np.diag(np.diag(law.S)))
        assert p[0] / r[0] == pytest.approx(p[1] / r[1], rel=1e-12)  # balanced means
        m1, m2 = p @ (1 / r), p @ (2 / r ** 2)
    else:  # Erlang(k) from phase 1, Erlang(k-1) from phase 2, common rate
        k, mu, p = law.n_phases, -law.S[0, 0], law.alpha[1] if law.n_phases > 1 else 0.0
        assert np.all(law.alpha[2:] == 0) and np.allclose(np.diag(law.S), -mu)
        m1 = (p * (k - 1) + (1 - p) * k) / mu
        m2 = (p * (k - 1) * k + (1 - p) * k * (k + 1)) / mu ** 2
    assert m1 == pytest.approx(mean, rel=1e-12)
    assert m2 / m1 ** 2 - 1 == pytest.approx(scv, rel=1e-12, abs=1e-13)


def test_fit_picks_the_documented_family():
    assert ph.fit(2.0, 1.0).n_phases == 1
    e3 = ph.fit(2.0, 1 / 3)  # scv = 1/k exactly: the Erlang-k law
    assert e3.n_phases == 3 and e3.alpha.tolist() == [1.0, 0.0, 0.0]
    assert np.allclose(ph.fit_coxian2(2.0, 0.5).S, ph.erlang(2, 2.0).S)
    assert np.allclose(ph.fit_h2(2.0, 1.0).S, -0.5 * np.eye(2))
    assert ph.fit(1.0, 0.3).n_phases == 4 and ph.fit(1.0, 7.0).n_phases == 2


# ---------------------------------------------------------------------------
# bad input: the message names the parameter
# ---------------------------------------------------------------------------
def _model_with_queue():
    m = ctmc.Model("q")
    return m, m.var("n", 0, 3)


BAD = [
    (lambda: ph.PhaseType([0.5, 0.4], [[-1.0, 0.0], [0.0, -1.0]]), "alpha"),
    (lambda: ph.PhaseType([1.1, -0.1], [[-1.0, 0.0], [0.0, -1.0]]), "alpha"),
    (lambda: ph.PhaseType([1.0], [[-1.0, 0.0]]), "S"),
    (lambda: ph.PhaseType([1.0, 0.0], [[-1.0, 1.0], [1.0, -1.0]]), "S"),  # never absorbs
    (lambda: ph.PhaseType([1.0], [[0.0]]), "S"),
    (lambda: ph.PhaseType([1.0, 0.0], [[-1.0, -0.5], [0.0, -1.0]]), "S"),
    (lambda: ph.PhaseType([1.0, 0.0], [[-1.0, 2.0], [0.0, -1.0]]), "S"),  # row sum > 0
    (lambda: ph.PhaseType([np.nan], [[-1.0]]), "alpha"),
    (lambda: ph.exponential(), "rate, mean"),
    (lambda: ph.exponential(1.0, mean=1.0), "rate, mean"),
    (lambda: ph.exponential(-1.0), "rate"),
    (lambda: ph.exponential(mean=0.0), "mean"),
    (lambda: ph.erlang(0), "k"),
    (lambda: ph.erlang(2.5), "k"),
    (lambda: ph.erlang(2, mean=-1), "mean"),
    (lambda: ph.hyperexponential([0.5, 0.5], [1.0, 0.0]), "rates"),
    (lambda: ph.hyperexponential([0.5, 0.6], [1.0, 2.0]), "probs"),
    (lambda: ph.hyperexponential([0.5, 0.5], [1.0]), "rates"),
    (lambda: ph.coxian([1.0, 2.0], [1.5]), "probs_continue"),
    (lambda: ph.coxian([1.0, 2.0], [0.5, 0.5]), "probs_continue"),
    (lambda: ph.coxian([1.0, np.inf], [0.5]), "rates"),
    (lambda: ph.fit(1.0, 0.0), "scv"),
    (lambda: ph.fit(1.0, -2.0), "scv"),
    (lambda: ph.fit(1.0, np.nan), "scv"),
    (lambda: ph.fit(1.0, "big"), "scv"),
    (lambda: ph.fit(0.0, 1.0), "mean"),
    (lambda: ph.fit(1.0, 1e-6), "scv"),  # a million phases
    (lambda: ph.fit(1.0, 0.5, max_phases=0), "max_phases"),
    (lambda: ph.fit_h2(1.0, 0.9), "scv"),
    (lambda: ph.fit_coxian2(1.0, 0.4), "scv"),
    (lambda: ph.erlang(2).moment(-1), "k"),
    (lambda: ph.erlang(2).cdf([0.0, np.nan]), "x"),
    (lambda: ph.add_service(object(), ph.erlang(2), ctmc.expr.Var("n", 0, 3)), "model"),
    (lambda: ph.add_service(_model_with_queue()[0], "exp", _model_with_queue()[1]), "law"),
    (lambda: ph.add_service(ctmc.Model(), ph.erlang(2), ctmc.expr.Var("n", 0, 3)), "queue"),
    (lambda: (lambda m, n: ph.add_service(m, ph.erlang(2), n))(*_queue_with_lo(1)), "queue"),
    (lambda: _with_phase(0, 1), "phase"),
    (lambda: _with_phase(0, 2, name="bad name"), "name"),
    (lambda: _station(update={"n": 0}), "update"),
    (lambda: _station(to="s2"), "to"),
]


def _queue_with_lo(lo):
    m = ctmc.Model("q")
    n = m.var("n", lo, 3)
    return m, n


def _with_phase(lo, hi, name="s"):
    m, n = _model_with_queue()
    j = m.var("j", lo, hi)
    return ph.add_service(m, ph.erlang(2), n, j, name=name)


def _station(**kw):
    m, n = _model_with_queue()
    return ph.add_service(m, ph.erlang(2), n, **kw)


@pytest.mark.parametrize("make,name", BAD, ids=[f"{i}-{n}" for i, (_, n) in enumerate(BAD)])
def test_bad_input_names_the_parameter(make, name):
    with pytest.raises(ValueError, match=f"^{re.escape(name)}:"):
        make()


def _queue_with_arrivals(taken: bool):
    m = ctmc.Model("q")
    n = m.var("n", 0, 3)
    m.event("arrival", guard=n < 3, rate=1.0, update={n: n + 1})
    if taken:
        m.event("s_done_2", guard=n > 0, rate=0.5, update={n: n - 1})
    return m, n


@pytest.mark.parametrize("servers", [1, 2])
@pytest.mark.parametrize("spoil", ["event name taken", "guard not a condition"])
def test_a_refused_station_leaves_the_model_as_it_was(servers, spoil):
    """A station refused half-way (its completion event's name taken; a guard that is no expression)
    declares nothing: no phase variable or counter, no event; the model then builds the chain of a
    model that never saw the call."""
    m, n = _queue_with_arrivals(spoil == "event name taken")
    before = ([v.name for v in m.variables], [e.name for e in m.events])
    bad = {"guard": object()} if spoil == "guard not a condition" else {}
    with pytest.raises((ValueError, TypeError)):
        ph.add_service(m, ph.erlang(2), n, name="s", servers=servers, **bad)
    assert ([v.name for v in m.variables], [e.name for e in m.events]) == before
    ref, n_ref = _queue_with_arrivals(spoil == "event name taken")
    for model, q in ((m, n), (ref, n_ref)):
        ph.add_service(model, ph.erlang(2), q, name="t", servers=servers)
    init = {v.name: 0 for v in ref.variables}
    a, b = m.build(initial=init), ref.build(initial=init)
    assert a.n_states == b.n_states and abs(a.Q - b.Q).max() == 0


@pytest.mark.parametrize("servers", [1, 2])
def test_a_refused_arrival_declares_none_of_its_events(servers):
    """The arrival's second event (a job starting service) has a taken name: its first is undone."""
    m, n = _queue_with_arrivals(False)
    s = ph.add_service(m, ph.erlang(2), n, name="s", servers=servers)
    m.event("a_s_start_1", guard=n > 0, rate=0.5, update={n: n - 1})
    before = [e.name for e in m.events]
    with pytest.raises(ValueError, match="'a_s_start_1'"):
        s.arrival("a", rate=1.0)
    assert [e.name for e in m.events] == before


# ---------------------------------------------------------------------------
# stations: M/PH/1/K against independent answers
# ---------------------------------------------------------------------------
def mph1k(law, lam, K, **kw):
    m = ctmc.Model("mph1k")
    n = m.var("n", 0, K)
    server = ph.add_service(m, law, n, name="server", **kw)
    server.arrival("arrival", rate=lam)
    chain = m.build(initial={"n": 0, "server_phase": 0}, progress=False)
    res = chain.stationary()
    return chain, res, server


def queue_law(chain, res, K):
    return np.bincount(chain.states["n"], weights=res.pi, minlength=K + 1)


def mg1k_niu_cooper(lam, K, a, mean):
    """M/G/1/K by the departure-epoch chain and the Niu-Cooper relation (tests/hysteresis_cases.py)."""
    from hysteresis_cases import mg1r_classic
    return mg1r_classic(lam, K, a, mean)


def _a_erlang(lam, k, mean, n):
    """Negative binomial: arrivals during an Erlang-k service."""
    mu = k / mean
    j = np.arange(n)
    return st.nbinom.pmf(j, k, mu / (lam + mu))


def _a_hyper(lam, p, rates, n):
    j = np.arange(n)
    return sum(pi * ri / (lam + ri) * (lam / (lam + ri)) ** j for pi, ri in zip(p, rates))


def _a_quad(lam, pdf, n):
    return np.array([quad(lambda t: st.poisson.pmf(j, lam * t) * pdf(t), 0, np.inf,
                          epsabs=1e-14, epsrel=1e-12, limit=200)[0] for j in range(n)])


MG1K = [
    ("erlang3", ph.erlang(3, 0.8), lambda lam, n: _a_erlang(lam, 3, 0.8, n)),
    ("h2", ph.hyperexponential([0.25, 0.75], [0.4, 3.0]),
     lambda lam, n: _a_hyper(lam, [0.25, 0.75], [0.4, 3.0], n)),
    ("cox2", ph.coxian([3.0, 0.7], [0.4]),
     lambda lam, n: _a_quad(lam, lambda t: 0.6 * 3.0 * math.exp(-3.0 * t) + 0.4 * _hypo_pdf(t, 3.0, 0.7), n)),
]


@pytest.mark.parametrize("lam", [0.6, 1.7])
@pytest.mark.parametrize("id,law,a", MG1K, ids=[c[0] for c in MG1K])
def test_mph1k_matches_the_embedded_chain(id, law, a, lam):
    K = 7
    chain, res, _ = mph1k(law, lam, K)
    ref = mg1k_niu_cooper(lam, K, a(lam, K + 1), law.mean)
    got = queue_law(chain, res, K)
    assert got.sum() == pytest.approx(1, abs=1e-14)
    assert got == pytest.approx(ref, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("K,lam,mu", [(1, 1.0, 1.0), (6, 2.0, 3.0), (9, 1.3, 0.9)])
def test_mm1k_closed_form(K, lam, mu):
    chain, res, server = mph1k(ph.exponential(mu), lam, K)
    p = (lam / mu) ** np.arange(K + 1)
    assert queue_law(chain, res, K) == pytest.approx(p / p.sum(), rel=1e-12)
    assert server.completion_events == ("server_done_1", "server_done_1_next_1")
    thr = sum(chain.event_rate(e) @ res.pi for e in server.completion_events)
    assert thr == pytest.approx(lam * (1 - p[-1] / p.sum()), rel=1e-12)


@pytest.mark.parametrize("scv", [0.3, 0.5, 1.0, 2.0, 5.0])
def test_pollaczek_khinchine_mean_for_a_large_capacity(scv):
    lam, mean = 0.5, 1.0
    K = 150 if scv <= 2 else 260
    chain, res, _ = mph1k(ph.fit(mean, scv), lam, K)
    law = queue_law(chain, res, K)
    assert law[-1] < 1e-12  # the capacity does not matter at this accuracy
    rho = lam * mean
    assert law @ np.arange(K + 1) == pytest.approx(rho + rho ** 2 * (1 + scv) / (2 * (1 - rho)), abs=1e-6)


def test_phase_is_zero_exactly_when_the_station_is_empty():
    chain, res, _ = mph1k(ph.fit(1.0, 0.3), 0.8, 5)
    n, j = chain.states["n"], chain.states["server_phase"]
    assert np.array_equal(n == 0, j == 0)
    assert set(j[n > 0]) == {1, 2, 3, 4}
    # a job always starts in phase 1 or 2 (alpha), so an arrival to the empty station is split
    assert chain.n_states == 1 + 5 * 4


def test_speed_and_guard():
    # speed 2 on rate 1 is the M/M/1/K queue with mu = 2
    chain, res, _ = mph1k(ph.exponential(1.0), 1.5, 5, speed=2.0)
    p = 0.75 ** np.arange(6)
    assert queue_law(chain, res, 5) == pytest.approx(p / p.sum(), rel=1e-12)
    # a server working only in mode 1 of a two-mode environment: with a fast environment
    # it is the M/M/1/K queue at half speed
    m = ctmc.Model("modes")
    n, mode = m.var("n", 0, 5), m.var("mode", 0, 1)
    s = ph.add_service(m, ph.exponential(3.0), n, name="s", guard=mode == 1)
    s.arrival("arrival", rate=1.5)
    m.event("flip", rate=1e6, update={mode: 1 - mode})
    chain = m.build(initial={"n": 0, "mode": 0, "s_phase": 0}, progress=False)
    got = np.bincount(chain.states["n"], weights=chain.stationary().pi)
    p = (1.5 / 1.5) ** np.arange(6)
    assert got == pytest.approx(p / p.sum(), rel=1e-4)


def test_arrival_update_and_completion_update():
    # jobs counted on arrival and departure: counters wrap modulo 2
    m = ctmc.Model("count")
    n, a, d = m.var("n", 0, 3), m.var("a", 0, 1), m.var("d", 0, 1)
    s = ph.add_service(m, ph.erlang(2), n, name="s", update={d: 1 - d})
    names = s.arrival("arr", rate=1.0, update={a: 1 - a})
    assert names == ("arr", "arr_s_start_1")
    chain = m.build(initial={"n": 0, "a": 0, "d": 0, "s_phase": 0}, progress=False)
    S = chain.states
    assert set(zip(S["n"], S["a"], S["d"])) >= {(1, 1, 0), (0, 1, 1), (2, 0, 0)}
    assert np.all((S["a"] - S["d"] - S["n"]) % 2 == 0)


# ---------------------------------------------------------------------------
# a tandem of two PH stations against a generator written by hand
# ---------------------------------------------------------------------------
def tandem_by_hand(lam, A, B, K1, K2):
    """Generator on (n1, j1, n2, j2), j = 0 when empty, else the phase (1-based)."""
    states = [(n1, j1, n2, j2)
              for n1 in range(K1 + 1) for j1 in ([0] if n1 == 0 else range(1, A.n_phases + 1))
              for n2 in range(K2 + 1) for j2 in ([0] if n2 == 0 else range(1, B.n_phases + 1))]
    idx = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))

    def add(src, dst, rate):
        if rate > 0:
            Q[idx[src], idx[dst]] += rate

    sA, sB = A.exit_rates, B.exit_rates
    for s in states:
        n1, j1, n2, j2 = s
        if n1 < K1:  # arrival
            if n1 == 0:
                for k in range(A.n_phases):
                    add(s, (1, k + 1, n2, j2), lam * A.alpha[k])
            else:
                add(s, (n1 + 1, j1, n2, j2), lam)
        if n1 > 0:
            for k in range(A.n_phases):
                if k + 1 != j1:
                    add(s, (n1, k + 1, n2, j2), A.S[j1 - 1, k])
            if n2 < K2:  # completion at 1 moves the job to 2 (blocked when 2 is full)
                nxt = [(0, 1.0)] if n1 == 1 else [(k + 1, A.alpha[k]) for k in range(A.n_phases)]
                down = ([(k + 1, B.alpha[k]) for k in range(B.n_phases)] if n2 == 0 else [(j2, 1.0)])
                for jj1, p1 in nxt:
                    for jj2, p2 in down:
                        add(s, (n1 - 1, jj1, n2 + 1, jj2), sA[j1 - 1] * p1 * p2)
        if n2 > 0:
            for k in range(B.n_phases):
                if k + 1 != j2:
                    add(s, (n1, j1, n2, k + 1), B.S[j2 - 1, k])
            nxt = [(0, 1.0)] if n2 == 1 else [(k + 1, B.alpha[k]) for k in range(B.n_phases)]
            for jj2, p2 in nxt:
                add(s, (n1, j1, n2 - 1, jj2), sB[j2 - 1] * p2)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    M = np.vstack([Q.T[:-1], np.ones(len(states))])
    b = np.zeros(len(states))
    b[-1] = 1
    return states, np.linalg.solve(M, b)


@pytest.mark.parametrize("A,B", [
    (ph.hyperexponential([0.3, 0.7], [0.5, 4.0]), ph.erlang(2, 0.6)),
    (ph.fit(1.0, 0.4), ph.PhaseType([0.5, 0.5], [[-2.0, 1.0], [0.5, -3.0]])),
], ids=["h2-e2", "mixture-cyclic"])
def test_tandem_matches_a_hand_built_generator(A, B):
    lam, K1, K2 = 0.9, 3, 2
    m = ctmc.Model("tandem")
    n1, n2 = m.var("n1", 0, K1), m.var("n2", 0, K2)
    s2 = ph.add_service(m, B, n2, name="s2")
    s1 = ph.add_service(m, A, n1, name="s1", to=s2)
    s1.arrival("arrival", rate=lam)
    chain = m.build(initial={"n1": 0, "n2": 0, "s1_phase": 0, "s2_phase": 0}, progress=False)
    pi = chain.stationary().pi
    states, ref = tandem_by_hand(lam, A, B, K1, K2)
    assert chain.n_states == len(states)
    S = chain.states
    got = {(a, b, c, d): p for a, b, c, d, p in zip(S["n1"], S["s1_phase"], S["n2"], S["s2_phase"], pi)}
    assert np.array([got[s] for s in states]) == pytest.approx(ref, rel=1e-10, abs=1e-15)
    names = [e.name for e in m.events]
    assert len(names) == len(set(names))
    # flow balance: what leaves station 1 enters station 2, and leaves it
    t1 = sum(chain.event_rate(e) @ pi for e in s1.completion_events)
    t2 = sum(chain.event_rate(e) @ pi for e in s2.completion_events)
    assert t1 == pytest.approx(t2, rel=1e-10)


