"""Phase-type laws at scale (issue 25): sparse sub-generators and tails with relative accuracy.

Independent answers:
* Erlang-k: k/lam, k/lam^2, and its tails as Poisson sums
  P(T > x) = P(Poisson(lam x) < k), summed in 60-digit ``decimal`` arithmetic from the
  term nearest the tail (ln n! exact below 200, by the Stirling series above);
* exponential and hyperexponential: sums of exponentials in ``decimal``;
* Coxian-2: (1 - p) Exp(a) + p (Exp(a) + Exp(b)), the hypoexponential closed form in ``decimal``;
* a Coxian with distinct rates and continuation 1: mean sum 1/r_i, variance sum 1/r_i^2;
* small general laws: scipy's dense ``expm`` of S x;
* a station's merged phase events: the generator written by hand, one event per phase move.
"""
import math
import tracemalloc
from decimal import Decimal, getcontext

import numpy as np
import pytest
import scipy.linalg as sl
import scipy.sparse as sp

import ctmc
from ctmc import ph

getcontext().prec = 60
_PI = Decimal("3.14159265358979323846264338327950288419716939937510582097494")
_B = [Decimal(1) / 12, -Decimal(1) / 360, Decimal(1) / 1260, -Decimal(1) / 1680, Decimal(1) / 1188]


# ---------------------------------------------------------------------------
# 60-digit references
# ---------------------------------------------------------------------------
def _ln_fact(n):
    if n < 200:
        return Decimal(math.factorial(n)).ln()
    N = Decimal(n)
    return (N + Decimal("0.5")) * N.ln() - N + (2 * _PI).ln() / 2 + sum(b / N ** (2 * j + 1)
                                                                        for j, b in enumerate(_B))


def _poisson(j, mu):
    return (-mu).exp() if j == 0 else (-mu + j * mu.ln() - _ln_fact(j)).exp()


def erlang_ref(k, rate, x):
    """(sf, cdf, pdf) of Erlang(k, rate) at x: Poisson sums from the term p(k-1) outward."""
    mu = Decimal(rate) * Decimal(x)
    top = _poisson(k - 1, mu)
    below, t, j = top, top, k - 1              # sum_{j < k} p(j), backwards
    while j > 0:
        t = t * j / mu
        j -= 1
        below += t
        if t < below * Decimal("1e-40"):
            break
    above, t, j = Decimal(0), top, k - 1       # sum_{j >= k} p(j), forwards
    while True:
        t = t * mu / (j + 1)
        j += 1
        above += t
        if j > mu and t < above * Decimal("1e-40"):
            break
    return float(below), float(above), float(Decimal(rate) * top)


def exp_mix_ref(probs, rates, x):
    x = Decimal(x)
    e = [(-Decimal(r) * x).exp() for r in rates]
    return (float(sum(Decimal(p) * v for p, v in zip(probs, e))),
            float(sum(Decimal(p) * (1 - v) for p, v in zip(probs, e))),
            float(sum(Decimal(p) * Decimal(r) * v for p, r, v in zip(probs, rates, e))))


def coxian2_ref(a, b, p, x):
    """(sf, pdf) of Coxian([a, b], [p]) with a != b: Exp(a), or with probability p Exp(a) + Exp(b)."""
    a, b, p, x = Decimal(a), Decimal(b), Decimal(p), Decimal(x)
    ea, eb = (-a * x).exp(), (-b * x).exp()
    hypo_sf = (b * ea - a * eb) / (b - a)
    hypo_pdf = a * b * (ea - eb) / (b - a)
    return float((1 - p) * ea + p * hypo_sf), float((1 - p) * a * ea + p * hypo_pdf)


def rel(got, want):
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return float(np.max(np.abs(got - want) / np.abs(want)))


# ---------------------------------------------------------------------------
# sparse storage at a million phases
# ---------------------------------------------------------------------------
def test_erlang_of_a_million_phases_is_sparse_small_and_exact_in_its_moments():
    k, mean = 10 ** 6, 3.0
    tracemalloc.start()
    try:
        law = ph.erlang(k, mean=mean)
        m1, var = law.mean, law.variance
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 400e6            # a dense S would be 8e12 bytes
    assert law.is_sparse and law.S.nnz == 2 * k - 1
    lam = k / mean
    assert m1 == pytest.approx(k / lam, rel=1e-10)
    assert var == pytest.approx(k / lam ** 2, rel=1e-10)
    assert law.scv == pytest.approx(1 / k, rel=1e-10)
    assert law.phase_moves == ((1, k - 1, 1, lam),)
    with pytest.raises(ValueError, match=r"S_dense: .*1000000 phases.*use the sparse S"):
        law.S_dense


def test_a_law_with_its_factorisation_cached_still_pickles():
    import pickle
    law = ph.erlang(1000, mean=2.0)
    mean = law.mean                       # caches the LU of -S
    back = pickle.loads(pickle.dumps(law))
    assert back.is_sparse and back.mean == mean and back.variance == law.variance


def test_hypoexponential_chain_moments_by_sparse_lu():
    rates = np.linspace(1.0, 50.0, 20000)
    law = ph.coxian(rates, np.ones(rates.size - 1))
    assert law.is_sparse
    assert law.mean == pytest.approx(np.sum(1 / rates), rel=1e-12)
    assert law.variance == pytest.approx(np.sum(1 / rates ** 2), rel=1e-12)
    assert law.moment(2) == pytest.approx(np.sum(1 / rates ** 2) + np.sum(1 / rates) ** 2, rel=1e-12)


def test_variance_has_no_cancellation_where_the_second_moment_would():
    # E[T^2] - E[T]^2 for an Erlang-10^5 loses about 5 digits; the sum of non-negative terms none
    law = ph.erlang(10 ** 5, mean=1.0)
    assert law.variance == pytest.approx(1e-5, rel=1e-11)


@pytest.mark.parametrize("make", [
    lambda: ph.erlang(600, mean=2.0),
    lambda: ph.coxian(np.linspace(1, 3, 700), np.linspace(0.2, 0.9, 699)),
    lambda: ph.hyperexponential(np.full(600, 1 / 600), np.linspace(0.5, 5, 600)),
    lambda: ph.fit(1.0, 1 / 700.5, max_phases=1000),
], ids=["erlang", "coxian", "hyperexp", "fit"])
def test_builders_store_large_laws_sparse_and_they_agree_with_the_dense_law(make):
    law = make()
    dense = ph.PhaseType(law.alpha, law.S_dense)
    assert law.is_sparse and not dense.is_sparse
    assert np.array_equal(law.S.toarray(), dense.S)
    for k in (1, 2, 3):
        assert law.moment(k) == pytest.approx(dense.moment(k), rel=1e-12)
    assert law.variance == pytest.approx(dense.variance, rel=1e-12)
    x = law.mean * np.array([0.3, 0.9, 1.0, 1.2, 3.0])
    for f in ("sf", "cdf", "pdf"):
        assert getattr(law, f)(x) == pytest.approx(getattr(dense, f)(x), rel=1e-12, abs=1e-300)


def _random_ph(seed, m):
    rng = np.random.default_rng(seed)
    S = rng.uniform(0, 1, (m, m)) * (rng.uniform(size=(m, m)) < 0.5)
    np.fill_diagonal(S, 0)
    np.fill_diagonal(S, -(S.sum(axis=1) + rng.uniform(0.1, 2.0, m)))
    a = rng.uniform(size=m)
    return ph.PhaseType(a / a.sum(), S)


@pytest.mark.parametrize("seed", [0, 1, 2, "coxian"])
def test_a_sparse_general_law_equals_its_dense_self_and_expm(seed):
    dense = ph.coxian([4.0, 1.0, 2.5, 0.7], [0.9, 0.6, 0.8]) if seed == "coxian" else _random_ph(seed, 6)
    sparse = ph.PhaseType(dense.alpha, sp.csr_matrix(dense.S))
    assert sparse.is_sparse
    assert sparse.mean == pytest.approx(dense.mean, rel=1e-13)
    assert sparse.variance == pytest.approx(dense.variance, rel=1e-12)
    x = dense.mean * np.array([0.01, 0.5, 1.0, 4.0])
    s = dense.exit_rates
    E = [dense.alpha @ sl.expm(dense.S * xi) for xi in x]
    assert sparse.sf(x) == pytest.approx([e.sum() for e in E], rel=1e-11)
    assert sparse.pdf(x) == pytest.approx([e @ s for e in E], rel=1e-11)
    assert sparse.cdf(x) == pytest.approx(dense.cdf(x), rel=1e-11)
    for f in ("sf", "cdf", "pdf"):
        assert getattr(sparse, f)(x) == pytest.approx(getattr(dense, f)(x), rel=1e-11)


def test_a_sparse_general_law_too_large_to_uniformise_is_refused_before_the_work():
    rates = np.linspace(1.0, 2.0, 200000)
    law = ph.coxian(rates, np.full(rates.size - 1, 0.999))
    with pytest.raises(ctmc.SolverError, match=r"x: the tail of Cox200000 at x = 1e\+06 .*uniformisation"):
        law.sf(1e6)


# ---------------------------------------------------------------------------
# tails with relative accuracy
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("mu", [0.5, 3.0, 50.0, 1e3, 1e4, 1e5, 1e6, 1e7])
def test_poisson_logpmf_keeps_relative_accuracy_down_to_1e_300(mu):
    """The one Poisson log-probability (uniformisation windows and phase-type densities) against
    60-digit sums: the log right to a few ulps, so a probability of 1e-300 keeps 12 digits; at the
    window's ends (where the probabilities are about 1e-300), the mode, 5 sd out, small counts.
    Scalars and arrays give the same values; the window holds all but 1e-300 on each side."""
    from ctmc._poisson import poisson_logpmf
    from ctmc.transient import poisson_window
    kmin, kmax = poisson_window(1e-300, mu)
    sd = math.sqrt(mu)
    ks = sorted({0, 1, 2, 15, 16, int(mu), int(mu) + 1, int(mu + 5 * sd), max(int(mu - 5 * sd), 0),
                 kmin, kmax, kmax + 1} - ({kmin} if kmin == 0 else set()))
    m = Decimal(mu)
    ref = [-m if k == 0 else -m + k * m.ln() - _ln_fact(k) for k in ks]
    got = poisson_logpmf(np.array(ks), mu)
    one = [poisson_logpmf(k, mu) for k in ks]            # one at a time, as the window asks
    assert got.shape == (len(ks),) and all(type(x) is float for x in one)
    for k, r, g, x in zip(ks, ref, got, one):
        for v in (g, x):
            assert abs(Decimal(float(v)) - r) <= Decimal(8.9e-16) * max(1, abs(r)), (k, float(r), v)
    assert -700 < float(ref[ks.index(kmax)]) < -680             # the right end is near 1e-300
    # the mass beyond each end, summed in 60 digits from the end outwards
    tail, t, k = Decimal(0), (ref[ks.index(kmax + 1)]).exp(), kmax + 1
    while t > tail * Decimal("1e-30"):
        tail, t, k = tail + t, t * m / (k + 1), k + 1
    assert 0 < tail <= Decimal("1e-300")
    if kmin > 0:
        head, t, k = Decimal(0), (-m + (kmin - 1) * m.ln() - _ln_fact(kmin - 1)).exp(), kmin - 1
        while k >= 0 and t > head * Decimal("1e-30"):
            head, t, k = head + t, t * k / m, k - 1
        assert 0 < head <= Decimal("1e-300")


def test_exponential_far_tail_is_e_to_the_minus_x():
    law = ph.exponential(1.0)
    x = np.array([1.0, 50.0, 300.0, 700.0, 708.0])
    want = [float((-Decimal(v)).exp()) for v in x]
    assert rel(law.sf(x), want) < 1e-14
    assert rel(law.pdf(x), want) < 1e-14
    tiny = np.array([1e-300, 1e-20, 1e-8])
    # 1 - e^-x = x - x^2/2 + x^3/6 - ..., summed in decimal (1 - exp would cancel at 60 digits)
    want = [float(sum((-1) ** (j + 1) * Decimal(v) ** j / math.factorial(j) for j in range(1, 12)))
            for v in tiny]
    assert rel(law.cdf(tiny), want) < 1e-14


@pytest.mark.parametrize("k,xs", [
    (1, [1e-200, 0.5, 30.0, 690.0]),
    (2, [1e-150, 1e-3, 1.0, 200.0, 700.0]),
    (10, [1e-30, 0.01, 1.0, 5.0, 60.0, 600.0]),
    (100, [0.05, 0.5, 1.0, 2.0, 7.0]),
    (1000, [0.5, 0.7, 1.0, 1.2, 1.6]),
    (10 ** 4, [0.85, 0.97, 1.0, 1.02, 1.25]),
    (10 ** 6, [0.98, 0.999, 1.0, 1.001, 1.02]),
], ids=lambda v: str(v) if isinstance(v, int) else "")
def test_erlang_tails_have_relative_accuracy_down_to_the_float_range(k, xs):
    law = ph.erlang(k, mean=1.0)
    ref = np.array([erlang_ref(k, float(k), x) for x in xs])
    got = np.array([law.sf(xs), law.cdf(xs), law.pdf(xs)]).T
    keep = ref > 1e-305                    # below: the value itself is not a normal double
    assert keep.sum() >= len(xs) + 2
    assert rel(got[keep], ref[keep]) < 3e-12
    assert ref[keep].min() < 1e-60         # the points reach far into a tail


def test_erlang_mixture_of_fit_has_relative_tails():
    law = ph.fit(2.0, 0.3)              # E3/E4 mixture with one rate
    p, mu = law.alpha[1], -law.S[0, 0]
    for x in (1e-6, 0.2, 2.0, 40.0, 150.0):
        a, b = erlang_ref(law.n_phases, mu, x), erlang_ref(law.n_phases - 1, mu, x)
        want = [(1 - p) * u + p * v for u, v in zip(a, b)]
        assert rel([law.sf(x), law.cdf(x), law.pdf(x)], want) < 1e-12


@pytest.mark.parametrize("probs,rates", [
    ([0.3, 0.7], [1.0, 5.0]),
    ([0.999, 0.001], [10.0, 0.1]),
    (list(np.full(600, 1 / 600)), list(np.linspace(0.5, 5.0, 600))),
])
def test_hyperexponential_tails_are_sums_of_exponentials(probs, rates):
    law = ph.hyperexponential(probs, rates)
    for x in (1e-250, 1e-6, 1.0, 100.0, 1000.0, 6000.0):
        want = exp_mix_ref(probs, rates, x)
        got = [law.sf(x), law.cdf(x), law.pdf(x)]
        for g, w in zip(got, want):
            if w > 1e-305:
                assert g == pytest.approx(w, rel=1e-13)


@pytest.mark.parametrize("a,b,p", [(3.0, 1.0, 0.4), (100.0, 0.5, 0.3), (0.2, 7.0, 0.9)])
def test_coxian2_tails_against_the_hypoexponential_closed_form(a, b, p):
    law = ph.coxian([a, b], [p])
    slow = min(a, b)
    xs = np.array([0.5, 5.0, 50.0, 300.0, 650.0]) / slow
    want = np.array([coxian2_ref(a, b, p, x) for x in xs])
    keep = want[:, 0] > 1e-300
    assert want[keep, 0].min() < 1e-200
    # both routes: uniformisation (q x <= 1000) and stochastic_exp (beyond, dense)
    assert (max(a, b) * xs[keep] > 1000).any() and (max(a, b) * xs[keep] <= 1000).any()
    got = np.array([law.sf(xs), law.pdf(xs)]).T
    assert rel(got[keep], want[keep]) < 1e-12
    # the sparse copy goes through uniformisation everywhere
    sparse = ph.PhaseType(law.alpha, sp.csr_matrix(law.S))
    got = np.array([sparse.sf(xs), sparse.pdf(xs)]).T
    assert rel(got[keep], want[keep]) < 1e-12


def test_general_law_left_tail_cdf_is_relative():
    # near 0, F(x) ~ x^2 a p b / 2 + (1 - p) a x for Coxian-2: compare with the closed form
    law = ph.coxian([3.0, 1.0], [1.0])
    for x in (1e-150, 1e-60, 1e-8):
        sf_ref, _ = coxian2_ref(3.0, 1.0, 1.0, x)
        # F(x) = 1 - sf: in decimal directly, sf_ref rounded would lose it
        X = Decimal(x)
        F = 1 - (3 * (-X).exp() - (-3 * X).exp()) / 2
        assert float(law.cdf(x)) == pytest.approx(float(F), rel=1e-12)


# ---------------------------------------------------------------------------
# stations: runs of equal phase moves are one event
# ---------------------------------------------------------------------------
def _by_hand(law, lam, K):
    """M/PH/1/K on (n, j) with one event per phase move (the convention of ctmc.ph)."""
    m = ctmc.Model("hand")
    n, j = m.var("n", 0, K), m.var("service_phase", 0, law.n_phases)
    S, s, a = law.S_dense, law.exit_rates, law.alpha
    m.event("arrival", guard=(n >= 1) & (n < K), rate=lam, update={n: n + 1})
    for k in np.flatnonzero(a > 0):
        m.event(f"start_{k}", guard=n == 0, rate=lam * a[k], update={n: 1, j: int(k) + 1})
    for i, k in zip(*np.nonzero(S - np.diag(np.diag(S)))):
        m.event(f"move_{i}_{k}", guard=(n > 0) & (j == int(i) + 1), rate=float(S[i, k]),
                update={j: int(k) + 1})
    for i in np.flatnonzero(s > 0):
        m.event(f"last_{i}", guard=(n == 1) & (j == int(i) + 1), rate=float(s[i]), update={n: 0, j: 0})
        for k in np.flatnonzero(a > 0):
            m.event(f"next_{i}_{k}", guard=(n >= 2) & (j == int(i) + 1), rate=float(s[i] * a[k]),
                    update={n: n - 1, j: int(k) + 1})
    return m.build(initial={"n": 0, "service_phase": 0})


def _generator(chain):
    key = list(zip(chain.states["n"].tolist(), chain.states["service_phase"].tolist()))
    Q = chain.Q.tocoo()
    return {(key[i], key[k]): v for i, k, v in zip(Q.row, Q.col, Q.data)}


@pytest.mark.parametrize("law,events", [
    (ph.erlang(5, mean=1.0), ["service_phase_1_2_through_4_5"]),
    (ph.coxian([2.0, 2.0, 2.0, 3.0, 3.0], [1.0, 1.0, 0.5, 1.0]),
     ["service_phase_1_2_through_2_3", "service_phase_3_4", "service_phase_4_5"]),
    (ph.fit(1.0, 3.0), []),
    (ph.phase_type([0.5, 0.5, 0.0], [[-3.0, 1.0, 1.0], [0.0, -2.0, 2.0], [1.0, 0.0, -4.0]]),
     ["service_phase_1_2", "service_phase_1_3", "service_phase_2_3", "service_phase_3_1"]),
], ids=["erlang", "coxian", "h2", "general"])
def test_merged_phase_events_give_the_generator_written_by_hand(law, events):
    lam, K = 0.7, 4
    m = ctmc.Model("station")
    n = m.var("n", 0, K)
    st = ph.add_service(m, law, n)
    st.arrival("arrival", rate=lam)
    assert list(st.phase_events) == events
    got, want = _generator(m.build(initial={"n": 0, "service_phase": 0})), _generator(_by_hand(law, lam, K))
    assert got.keys() == want.keys()
    assert all(got[key] == pytest.approx(want[key], rel=1e-15) for key in want)


def test_an_erlang_of_ten_thousand_phases_is_one_phase_event():
    m = ctmc.Model("big")
    n = m.var("n", 0, 2)
    st = ph.add_service(m, ph.erlang(10 ** 4), n)
    assert st.phase_events == ("service_phase_1_2_through_9999_10000",)
    assert len(st.completion_events) == 2
