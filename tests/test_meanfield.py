"""ctmc.meanfield against independent answers.

- the supermarket model declared as a population process against the hand-derived
  tail-coordinate code (``tests/reference_supermarket_mf.py``; fixed point, V, W to 1e-10)
  and the published table of Gast, Bortolussi & Tribastone (2018) that test_supermarket
  checks (numbers from tests/supermarket_cases.py, shared with it, not retyped);
- the malware/SIS example of the same paper (Table tab:SIS: exact E[X] and x* + V/N);
- SIS closed-form fixed point and a birth-death product-form exact law;
- the order of the expansions: errors against the exact finite-N answer fall like
  1/N, 1/N^2 and 1/N^3 (fitted log-log slopes) on a 2- and a 3-species model;
- the transient expansion: its shape rule, its long-time limit (= refined()), and
  E[X_N(t)/N] from the exact chain's transient law;
- bad inputs are refused naming the parameter.
"""
import functools
import math

import numpy as np

import ctmc
import pytest

from ctmc.meanfield import MeanFieldError, PopulationModel
from ctmc.models.supermarket import refined_mean_field
import reference_supermarket_mf as hand         # the hand-derived tail-coordinate code (independent)
from supermarket_cases import MALWARE, PUBLISHED_RMF    # the published tables test_supermarket checks too

# ---------------------------------------------------------------------------
# reference models
# ---------------------------------------------------------------------------


def supermarket(d, lam, B):
    """Power-of-d with buffer B: species x_k = servers with k jobs, k = 0..B (tails s_k = sum_{j>=k} x_j)."""
    sp = [f"x{k}" for k in range(B + 1)]
    m = PopulationModel(f"supermarket(d={d}, lam={lam}, B={B})", sp)

    def tail(x, k):
        return sum(x[s] for s in sp[k:]) if k <= B else 0

    for k in range(B):
        m.transition(f"arrival{k}", {sp[k]: -1, sp[k + 1]: +1},
                     lambda x, k=k: lam * (tail(x, k) ** d - tail(x, k + 1) ** d))
    for k in range(1, B + 1):
        m.transition(f"departure{k}", {sp[k]: -1, sp[k - 1]: +1}, lambda x, k=k: x[sp[k]])
    return m


def _tails(v):
    """(x_0..x_B) -> (u_1..u_B), u_k = sum_{j>=k} x_j (linear, so it maps V and W too)."""
    return np.cumsum(np.asarray(v)[::-1])[::-1][1:]


def sis(beta=2.0, eps=0.1, gamma=1.0):
    m = PopulationModel("sis", ["S", "I"])
    m.transition("infection", {"S": -1, "I": +1}, lambda x: beta * x["S"] * x["I"] + eps * x["S"])
    m.transition("recovery", {"I": -1, "S": +1}, lambda x: gamma * x["I"])
    return m


def sis_fixed_point(beta, eps, gamma):
    # beta x (1 - x) + eps (1 - x) = gamma x
    b = beta - gamma - eps
    return (b + math.sqrt(b * b + 4 * beta * eps)) / (2 * beta)


def sirs():
    m = PopulationModel("sirs", ["S", "I", "R"])
    m.transition("infection", {"S": -1, "I": +1}, "3*S*I + 0.05*S")   # a string rate
    m.transition("recovery", {"I": -1, "R": +1}, lambda x: x["I"])
    m.transition("loss", {"R": -1, "S": +1}, lambda x: 0.5 * x["R"])
    return m


def slope(Ns, errors):
    return float(np.polyfit(np.log(Ns), np.log(errors), 1)[0])


# ---------------------------------------------------------------------------
# 1. supermarket against the hand-derived code
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("d,lam,B", [(2, 0.9, 6), (3, 0.8, 5), (2, 0.95, 10), (1, 0.7, 4), (2, 1.3, 4)])
def test_supermarket_matches_hand_derived_mean_field_and_V(d, lam, B):
    m = supermarket(d, lam, B)
    pi, V, W = hand.refined(d, lam, capacity=B)
    r = m.refined(10)
    assert m.mean_field().stable
    assert abs(r.fixed_point.sum() - 1) < 1e-14
    assert np.abs(_tails(r.fixed_point) - pi).max() < 1e-10
    assert np.abs(_tails(r.V) - V).max() < 1e-10
    T = np.triu(np.ones((B + 1, B + 1)))[1:]          # x -> (u_1..u_B)
    assert np.abs(T @ r.W @ T.T - W).max() < 1e-10
    assert abs(r.V.sum()) < 1e-13                      # V lies in the tangent space
    assert r.residual < 1e-12 and m.refined(10, order=2).residual < 1e-10


@pytest.mark.parametrize("N,d,rho,mf,rmf", PUBLISHED_RMF)
def test_supermarket_reproduces_published_table(N, d, rho, mf, rmf):
    # Gast, Bortolussi & Tribastone (2018), tab:supermarket; infinite buffers, here B = 10 (u_10 < 1e-20)
    m = supermarket(d, rho, 10)
    k = np.arange(11)
    r = m.refined(N)
    assert r.fixed_point @ k == pytest.approx(mf, abs=5e-5)
    assert r.densities @ k == pytest.approx(rmf, abs=5e-5)
    assert r.densities @ k == pytest.approx(refined_mean_field(d, rho).mean_jobs_per_server(N), abs=1e-10)


# the malware model of the same paper: (N, exact E[X], x* + V/N), MALWARE of tests/supermarket_cases.py
@pytest.mark.parametrize("N,exact,expansion", MALWARE)
def test_published_one_dimensional_example(N, exact, expansion):
    # up at N (1 - x)(1 + x), down at N x (x = density of I)
    m = PopulationModel("malware", ["S", "I"])
    m.transition("up", {"S": -1, "I": +1}, lambda x: x["S"] * (1 + x["I"]))
    m.transition("down", {"I": -1, "S": +1}, lambda x: x["I"])
    assert m.mean_field().fixed_point[1] == pytest.approx((math.sqrt(5) - 1) / 2, abs=1e-14)
    assert m.refined(N).densities[1] == pytest.approx(expansion, abs=6e-8)
    e = m.exact(N)
    assert e.densities[1] == pytest.approx(exact, abs=6e-8)
    assert e.stationary.error_bound < 1e-9


# ---------------------------------------------------------------------------
# 2. SIS: closed form, product-form exact law, error slopes
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("beta,eps,gamma", [(2.0, 0.1, 1.0), (0.5, 0.2, 1.0), (4.0, 0.0, 1.5)])
def test_sis_fixed_point_closed_form(beta, eps, gamma):
    mf = sis(beta, eps, gamma).mean_field(x0=[0.5, 0.5])
    x = sis_fixed_point(beta, eps, gamma)
    assert mf.fixed_point == pytest.approx([1 - x, x], abs=1e-12)
    assert mf.stable and mf.residual < 1e-12
    # f_I = beta S I + eps S - gamma I: the full Jacobian's I row, and 1^T Df = 0
    assert mf.jacobian[1] == pytest.approx([beta * x + eps, beta * (1 - x) - gamma], abs=1e-12)
    assert np.abs(mf.jacobian.sum(axis=0)).max() < 1e-12
    # on the tangent space (I = 1 - S eliminated): d/dI [beta (1 - I) I + eps (1 - I) - gamma I]
    assert mf.eigenvalues[0].real == pytest.approx(beta * (1 - 2 * x) - eps - gamma, abs=1e-12)


@pytest.mark.parametrize("N", [5, 17, 60])
def test_sis_exact_against_birth_death_product_form(N):
    beta, eps, gamma = 2.0, 0.1, 1.0
    i = np.arange(N + 1)
    up = N * (beta * (1 - i / N) * (i / N) + eps * (1 - i / N))
    down = gamma * i
    logp = np.concatenate([[0.0], np.cumsum(np.log(up[:-1]) - np.log(down[1:]))])
    p = np.exp(logp - logp.max())
    p /= p.sum()
    e = sis(beta, eps, gamma).exact(N)
    assert e.n_states == N + 1
    assert e.densities == pytest.approx([1 - p @ i / N, p @ i / N], abs=1e-12)


def test_sis_error_slopes_are_1_2_3():
    Ns = [20, 40, 80, 160]
    df = sis().compare(Ns)
    rows = df.to_dict("records") if hasattr(df, "to_dict") else df
    for col, expected in [("error_mean_field", -1), ("error_refined_1", -2), ("error_refined_2", -3)]:
        s = slope(Ns, [r[col] for r in rows])
        assert abs(s - expected) < 0.3, (col, s)
    assert all(r["error_refined_2"] < r["error_refined_1"] < r["error_mean_field"] for r in rows)


def test_three_species_error_slopes_are_1_2_3():
    # SIRS: the reduced system is 2-dimensional, so the cross terms of the 1/N^2 coefficient count
    m = sirs()
    Ns = [80, 160, 320]
    exact = [m.exact(N).densities for N in Ns]
    x = m.mean_field().fixed_point
    errs = {0: [], 1: [], 2: []}
    for N, ex in zip(Ns, exact):
        errs[0].append(np.abs(ex - x).max())
        errs[1].append(np.abs(ex - m.refined(N, 1).densities).max())
        errs[2].append(np.abs(ex - m.refined(N, 2).densities).max())
    for k in (0, 1, 2):
        assert abs(slope(Ns, errs[k]) + (k + 1)) < 0.3, (k, errs[k])


# ---------------------------------------------------------------------------
# 3. transient expansion
# ---------------------------------------------------------------------------
def test_refined_transient_shape_rule():
    m = sirs()
    x0 = [0.9, 0.1, 0.0]
    one = m.refined_transient(1.5, x0, 50, order=2)
    many = m.refined_transient([0.0, 1.5, 3.0], x0, 50, order=2)
    assert one.densities.shape == (3,) and one.W.shape == (3, 3) and one.A.shape == (3,)
    assert many.densities.shape == (3, 3) and many.W.shape == (3, 3, 3) and many.x.shape == (3, 3)
    assert np.allclose(many.densities[1], one.densities, atol=1e-9)
    assert np.allclose(many.densities[0], x0) and np.abs(many.V[0]).max() == 0
    assert m.refined_transient(1.5, x0, 50).A is None
    assert np.allclose(m.mean_field().ode([0.0, 1.5], x0)[1], one.x, atol=1e-8)
    assert m.mean_field().ode(1.5, x0).shape == (3,)
    at0 = m.refined_transient(0.0, x0, 50, order=2)
    assert at0.densities == pytest.approx(x0) and at0.t == 0.0 and at0.W.shape == (3, 3)
    rep = m.refined_transient([1.5, 1.5], x0, 50, order=2)
    assert rep.densities.shape == (2, 3) and np.allclose(rep.densities[0], rep.densities[1])


@pytest.mark.parametrize("order", [1, 2])
def test_refined_transient_converges_to_refined(order):
    m = sirs()
    tr = m.refined_transient(200.0, [0.9, 0.1, 0.0], 30, order=order)
    st = m.refined(30, order=order)
    assert np.abs(tr.x - st.fixed_point).max() < 1e-8
    assert np.abs(tr.V - st.V).max() < 1e-7
    assert np.abs(tr.W - st.W).max() < 1e-7
    assert np.abs(tr.densities - st.densities).max() < 1e-8
    if order == 2:
        assert np.abs(tr.A - st.A).max() < 1e-6


def test_refined_transient_against_exact_transient():
    # E[X_N(t)/N] from the exact chain's transient law: errors fall like 1/N, 1/N^2, 1/N^3
    m = sis()
    t, Ns = 2.0, [20, 40, 80, 160]
    errs = {0: [], 1: [], 2: []}
    for N in Ns:
        x0 = [0.8, 0.2]
        start = {"S": int(0.8 * N), "I": int(0.2 * N)}
        ch = m.chain(N, initial=start)
        p = ch.transient(start, t).p
        ex = np.array([p @ ch.states["S"], p @ ch.states["I"]]) / N
        r2 = m.refined_transient(t, x0, N, order=2)
        errs[0].append(np.abs(ex - r2.x).max())
        errs[1].append(np.abs(ex - m.refined_transient(t, x0, N).densities).max())
        errs[2].append(np.abs(ex - r2.densities).max())
    for k in (0, 1, 2):
        assert abs(slope(Ns, errs[k]) + (k + 1)) < 0.3, (k, errs[k])


# ---------------------------------------------------------------------------
# 4. the chain, compare, bad inputs
# ---------------------------------------------------------------------------
def test_chain_is_named_after_species_and_starts_near_the_fixed_point():
    m = sirs()
    ch = m.chain(30)
    assert ch.states.names == ("S", "I", "R")
    assert ch.n_states == math.comb(32, 2)
    assert np.all(ch.states["S"] + ch.states["I"] + ch.states["R"] == 30)
    x = m.mean_field().fixed_point
    (start,) = ch.initial
    got = np.array([ch.states[s][start] for s in "SIR"])
    assert got.sum() == 30 and np.abs(got - 30 * x).max() < 1
    e = m.exact(30)
    assert e.stationary.status.name == "SUCCESS" and e.densities.sum() == pytest.approx(1, abs=1e-12)


def test_compare_table_and_plot(tmp_path):
    pytest.importorskip("matplotlib")
    df = sis().compare([10, 20], orders=(1,), plot=tmp_path / "errors.png")
    assert (tmp_path / "errors.png").stat().st_size > 0
    rows = df.to_dict("records") if hasattr(df, "to_dict") else df
    assert [r["N"] for r in rows] == [10, 20] and "refined_2" not in rows[0]
    assert rows[1]["error_refined_1"] < rows[1]["error_mean_field"]
    import matplotlib.figure
    ax = matplotlib.figure.Figure().subplots()
    df = sis().compare([10, 20, 40], orders=(1,), ax=ax)       # the figure says what it shows
    slopes = df.attrs["slopes"] if hasattr(df, "attrs") else df[0]["slopes"]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == [f"mean field (slope {slopes['error_mean_field']:.2f})",
                      f"refined order 1 (slope {slopes['error_refined_1']:.2f})"]
    assert "(absolute)" in ax.get_ylabel() and "E[X/N]" in ax.get_ylabel()


@pytest.mark.parametrize("call,match", [
    (lambda: PopulationModel("m", ["S"]), "species"),
    (lambda: PopulationModel("m", ["S", "S"]), "species: duplicate"),
    (lambda: PopulationModel("m", ["S", "not valid"]), "species"),
    (lambda: sis().transition("recovery", {"I": -1, "S": 1}, 1.0), "name: transition 'recovery'"),
    (lambda: sis().transition("t", {"Z": -1, "S": 1}, 1.0), "change: .*unknown species 'Z'"),
    (lambda: sis().transition("t", {"I": -0.5, "S": 0.5}, 1.0), "change: .*must be an integer"),
    (lambda: sis().transition("t", {"I": -1}, 1.0), "change: .*closed"),
    (lambda: sis().transition("t", {"I": -1, "S": 1}, "k * I"), "rate: .*unknown symbols"),
    (lambda: sis().transition("t", {"I": -1, "S": 1}, lambda x: x["Q"]), "rate: "),
    (lambda: sis().refined(0), "N: "),
    (lambda: sis().refined(10, order=3), "order: "),
    (lambda: sis().refined_transient([1.0, 0.5], [0.5, 0.5], 10), "t: "),
    (lambda: sis().refined_transient(1.0, [0.5, 0.6], 10), "x0: "),
    (lambda: sis().chain(10.5), "N: "),
    (lambda: PopulationModel("m", ["A", "B"]).mean_field(), "transition: .*no transitions"),
])
def test_bad_inputs_are_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_fixed_point_tolerance_is_relative_to_the_rates():
    # the same SIS in a time unit 1e6 times shorter: same fixed point, rates of order 1e6
    fast = PopulationModel("sis-fast", ["S", "I"])
    fast.transition("infection", {"S": -1, "I": +1}, lambda x: 2e6 * x["S"] * x["I"] + 1e5 * x["S"])
    fast.transition("recovery", {"I": -1, "S": +1}, lambda x: 1e6 * x["I"])
    assert fast.mean_field().fixed_point[1] == pytest.approx(sis_fixed_point(2.0, 0.1, 1.0), abs=1e-12)
    assert fast.refined(40).V == pytest.approx(sis().refined(40).V, abs=1e-10)


def test_unstable_fixed_point_is_refused_by_refined():
    # f_A = 3 A B (A - B): the uniform start is the unstable fixed point (f' = +3/2 there)
    m = PopulationModel("bistable", ["A", "B"])
    m.transition("up", {"B": -1, "A": +1}, lambda x: 3 * x["A"] ** 2 * x["B"])
    m.transition("down", {"A": -1, "B": +1}, lambda x: 3 * x["A"] * x["B"] ** 2)
    mf = m.mean_field()
    assert mf.fixed_point == pytest.approx([0.5, 0.5]) and not mf.stable
    assert mf.eigenvalues[0].real == pytest.approx(1.5)
    with pytest.raises(MeanFieldError, match="not stable"):
        m.refined(10)
    assert m.mean_field(x0=[0.9, 0.1]).stable
    assert m.refined(10, x0=[0.9, 0.1]).densities == pytest.approx([1.0, 0.0], abs=1e-12)   # A wins


def test_supermarket_order_two_against_exact_chain():
    # power-of-2 with buffer 2 (3 species, a load balancer rather than an epidemic):
    # errors against the exact chain fall like 1/N, 1/N^2, 1/N^3 (measured -0.98, -2.03, -2.93 up to N = 160)
    m = supermarket(2, 0.9, 2)
    Ns = [20, 40, 80]
    df = m.compare(Ns)
    rows = df.to_dict("records") if hasattr(df, "to_dict") else df
    for col, expected in [("error_mean_field", -1), ("error_refined_1", -2), ("error_refined_2", -3)]:
        assert abs(slope(Ns, [r[col] for r in rows]) - expected) < 0.3, col


def test_W_is_the_limit_of_N_times_the_exact_covariance():
    m = sirs()
    W = m.refined(100).W
    gaps = []
    for N in (50, 100, 200):
        ch = m.chain(N)
        pi = ch.stationary().pi
        X = np.column_stack([ch.states[s] for s in ("S", "I", "R")]) / N
        mean = pi @ X
        cov = (X - mean).T @ (pi[:, None] * (X - mean))
        gaps.append(np.abs(N * cov - W).max())
    assert gaps[2] < 0.1 * np.abs(W).max()        # 0.027 for max|W| = 0.51
    assert abs(slope([50, 100, 200], gaps) + 1) < 0.3, gaps


def quartic():
    """SIS-like with a quartic drift, so the 1/N^2 term uses F3 : C and F4 : D (zero for quadratic drifts)."""
    m = PopulationModel("quartic", ["S", "I"])
    m.transition("infection", {"S": -1, "I": +1}, lambda x: x["S"] * (0.2 + 3 * x["I"] ** 3))
    m.transition("recovery", {"I": -1, "S": +1}, lambda x: x["I"])
    return m


@pytest.mark.parametrize("make,Ns", [(quartic, (100, 200, 400)),
                                     (lambda: supermarket(4, 0.9, 2), (50, 100, 200))],
                         ids=["quartic-SIS", "power-of-4-B2"])
def test_A_is_the_richardson_limit_of_the_exact_second_order_gap(make, Ns):
    # e_N = N^2 (E[X_N/N] - x* - V/N) = A + a/N + b/N^2 + ...: two Richardson steps leave O(1/N^3)
    # measured relative gaps 2.5e-4 (quartic) and 8.2e-4 (power-of-4); dropping F4 : D or F3 : C
    # moves A by more (checked by mutation)
    m = make()
    r = m.refined(1, order=2)
    e = [N ** 2 * (m.exact(N).densities - r.fixed_point - r.V / N) for N in Ns]
    r1, r2 = 2 * e[1] - e[0], 2 * e[2] - e[1]
    limit = (4 * r2 - r1) / 3
    assert np.abs(limit - r.A).max() < 5e-3 * np.abs(r.A).max(), (limit, r.A)


def test_supermarket_ode_matches_hand_derived_ode():
    from ctmc.models.supermarket import mean_field_ode
    d, lam, B = 2, 0.9, 6
    ts = np.array([0.5, 2.0, 10.0])
    _, u = mean_field_ode(d, lam, ts, capacity=B)            # from empty queues; rows u_0..u_B
    x = supermarket(d, lam, B).mean_field().ode(ts, np.eye(B + 1)[0])
    assert x.shape == (3, B + 1)
    assert np.abs(np.array([_tails(row) for row in x]) - u[1:].T).max() < 1e-8


def test_fixed_point_basin_does_not_depend_on_the_time_unit():
    """Rates in a slow time unit (review finding) made the ODE stop at once and Newton land on the
    unstable point between two stable ones: each start must reach the stable point of its basin."""
    for c in (1.0, 1e-4, 1e-7):
        m = PopulationModel("bistable", ["S", "I"])
        # drift of I: -c (I - 0.2)(I - 0.5)(I - 0.8), as an up and a down rate, both >= 0 on [0, 1]
        up = (lambda x, c=c: c * x["S"] * (0.08 + 2.0 * x["I"] ** 2))
        m.transition("up", {"S": -1, "I": +1}, up)
        m.transition("down", {"I": -1, "S": +1}, lambda x, c=c, up=up: up(x) + c * (x["I"] - 0.2) * (x["I"] - 0.5)
                     * (x["I"] - 0.8))
        for start, want in ((0.45, 0.2), (0.55, 0.8)):
            mf = m.mean_field(x0=[1 - start, start])
            assert mf.stable and mf.fixed_point[1] == pytest.approx(want, abs=1e-9), (c, start)


def test_min_rates_expand_to_order_two_and_heaviside_is_refused():
    """Min/Abs rates crashed (DiracDelta) in refined() (review finding): they are differentiated as
    a Piecewise; Heaviside, whose derivative is a distribution, is refused naming the transition."""
    import sympy
    m = PopulationModel("kink", ["S", "I"])
    m.transition("in", {"S": -1, "I": +1}, lambda x: 2 * sympy.Min(x["S"], 0.3) + 0 * x["I"])
    m.transition("out", {"I": -1, "S": +1}, lambda x: x["I"])
    r = m.refined(50, order=2)
    assert np.isfinite(r.A).all() and r.densities[1] == pytest.approx(0.6 + r.V[1] / 50 + r.A[1] / 2500)
    with pytest.raises(ValueError, match="rate: transition 'h'"):
        m.transition("h", {"S": -1, "I": +1}, lambda x: sympy.Heaviside(x["S"] - 0.5))


def test_order_two_solves_the_third_moments_of_many_species():
    """Order 2 overflowed at 30 species (review finding: eigenbasis solve of the third moments);
    at 22 species the coefficients are finite and the equations solved to 1e-10."""
    big = supermarket(2, 0.9, 21)                      # 22 species
    r2 = big.refined(100, order=2)
    assert np.isfinite(r2.A).all() and r2.residual < 1e-10


@pytest.mark.parametrize("d,lam,B", [(2, 0.9, 6), (3, 0.7, 5)])
def test_rate_corrections_reproduce_sampling_without_replacement(d, lam, B):
    """Sampling d of N servers without replacement: P(all d hold >= k jobs) = C(N s_k, d) / C(N, d)
    = s_k^d + h(s_k)/N + O(1/N^2), h(s) = d(d-1)(s^d - s^(d-1))/2: a rate correction of order one.
    V against the hand-derived code's replacement=False variant; the chain's rates against the
    exact hypergeometric ones at N = 12."""
    sp = [f"x{k}" for k in range(B + 1)]
    m = PopulationModel("no-replacement", sp)

    def tail(x, k):
        return sum(x[s] for s in sp[k:]) if k <= B else 0

    def h(s):
        return 0.5 * d * (d - 1) * (s ** d - s ** (d - 1))

    for k in range(B):
        m.transition(f"arrival{k}", {sp[k]: -1, sp[k + 1]: +1},
                     lambda x, k=k: lam * (tail(x, k) ** d - tail(x, k + 1) ** d),
                     correction=lambda x, k=k: lam * (h(tail(x, k)) - h(tail(x, k + 1))))
    for k in range(1, B + 1):
        m.transition(f"departure{k}", {sp[k]: -1, sp[k - 1]: +1}, lambda x, k=k: x[sp[k]])
    pi, V, _ = hand.refined(d, lam, capacity=B, replacement=False)
    r = m.refined(10)
    assert np.abs(_tails(r.V) - V).max() < 1e-10
    assert np.abs(_tails(r.fixed_point) - pi).max() < 1e-10
    with pytest.raises(ValueError, match="order: the 1/N\\^2 expansion of a model with rate corrections"):
        m.refined(10, order=2)
    if d != 2:
        # N beta + gamma, the two-term expansion, goes negative at small N for d = 3: the chain refuses it
        with pytest.raises(ctmc.ModelError, match="invalid rate"):
            m.chain(12)
        return
    # the chain carries N beta + gamma: the leading two terms of the hypergeometric rate
    ch = m.chain(12)
    S = ch.states
    st = np.column_stack([S[s] for s in sp]).astype(float)
    tails = np.cumsum(st[:, ::-1], axis=1)[:, ::-1] / 12
    rate0 = ch.event_rate("arrival0")
    want = 12 * lam * (tails[:, 0] ** d - tails[:, 1] ** d) + lam * (h(tails[:, 0]) - h(tails[:, 1]))
    np.testing.assert_allclose(rate0, np.maximum(want, 0) * (st[:, 0] >= 1), rtol=1e-12, atol=1e-12)


# the default suite keeps one case of each depth (the machine-independent noisy-start test below covers the
# same polish in a few seconds); the other truncations run with -m slow
_KEPT = {(2, 0.9, 14), (3, 0.95, 10), (2, 0.99, 17), (2, 0.99, 20), (3, 0.99, 12), (2, 0.995, 20)}
KEEPS_SMALL = [c if c in _KEPT else pytest.param(*c, marks=pytest.mark.slow)
               for c in [(2, 0.9, 14), (3, 0.95, 10)] + [(2, 0.99, B) for B in range(14, 21)]
               + [(3, 0.99, B) for B in range(8, 13)] + [(2, 0.995, 20)]]


@pytest.mark.parametrize("d,lam,B", KEEPS_SMALL)
def test_fixed_point_keeps_small_densities_relative_accurate(d, lam, B):
    """Tails of 1e-15 .. 1e-287 are numbers, not noise: the fixed point's componentwise polish
    balances each species' own flows, so every tail matches the closed form lam^((d^k-1)/(d-1))
    (Mitzenmacher 2001; the truncation at B changes nothing representable) to 1e-9 relative.
    Without it the deep tails came out as +-1e-30 noise, or 0 after clipping; with a linear
    polish (2, 0.99, 17) kept the noise on one machine and not on another."""
    x = supermarket(d, lam, B).mean_field().fixed_point
    k = np.arange(1, B + 1)
    closed = lam ** ((d ** k - 1) / (d - 1))
    normal = closed > 1e-300
    assert closed[normal].min() < 1e-14                 # below the noise Newton leaves
    assert np.allclose(_tails(x)[normal], closed[normal], rtol=1e-9, atol=0)


@functools.lru_cache(maxsize=None)
def _compiled_supermarket(d, lam, B):
    """The compiled system of supermarket(d, lam, B), built once for the 9 starts of each."""
    return supermarket(d, lam, B).mean_field()._system


@pytest.mark.parametrize("d,lam,B", [(2, 0.99, 17), (2, 0.9, 14), (3, 0.99, 10)])
@pytest.mark.parametrize("noise", [3.5e-17, 8.9e-18, 1e-15])
@pytest.mark.parametrize("last", ["zero", "negative", "noise"])
def test_polish_finds_the_tails_from_a_noisy_start(d, lam, B, noise, last):
    """The polish from the starts Newton leaves, independent of this machine's rounding: the closed
    form with every level below 1e-16 replaced by one noise value (such a chain balances itself:
    each level is fed by the departures of the next) and the last level 0, -1.2e-33 or noise.
    The linear scaled polish failed 5 of these 27 (the tails stayed noise or blew up to 1e+95)."""
    from ctmc.meanfield.kernels import polish_componentwise
    sysm = _compiled_supermarket(d, lam, B)
    u = lam ** ((d ** np.arange(B + 2) - 1) / (d - 1))
    u[-1] = 0.0
    x = u[:-1] - u[1:]                                  # x_0 .. x_B from the closed-form tails
    start = np.where(x < 1e-16, noise, x)
    start[-1] = {"zero": 0.0, "negative": -1.2e-33, "noise": noise}[last]
    start[0] = 1 - start[1:].sum()
    got = _tails(polish_componentwise(sysm, start))
    normal = u[1:-1] > 1e-300
    assert np.allclose(got[normal], u[1:-1][normal], rtol=1e-9, atol=0)


def mutation_chain(mu=1e-30, levels=3):
    """SIS (infection 3 S I, recovery I) whose infecteds pair up into a rare mutant M1 at mu I^2,
    M_k pairs into M_{k+1} at mu M_k^2, every mutant recovers at rate 1: M1 ~ 4e-31, M2 ~ 2e-91,
    M3 ~ 4e-212 (a model of rare species that is not a queue)."""
    sp = ["S", "I"] + [f"M{k}" for k in range(1, levels + 1)]
    m = PopulationModel("mutation-chain", sp)
    m.transition("infection", {"S": -1, "I": +1}, lambda x: 3 * x["S"] * x["I"])
    m.transition("recovery", {"I": -1, "S": +1}, lambda x: x["I"])
    for k in range(1, levels + 1):
        src = "I" if k == 1 else f"M{k - 1}"
        m.transition(f"mutation{k}", {src: -2, f"M{k}": +1, "S": +1}, lambda x, s=src: mu * x[s] ** 2)
        m.transition(f"cure{k}", {f"M{k}": -1, "S": +1}, lambda x, k=k: x[f"M{k}"])
    return m


def test_rare_species_of_a_non_queue_model_are_relative_accurate():
    """The mutation chain against an independent 60-digit solve (mpmath): given I, each M_k is the
    positive root of its own balance mu M_{k-1}^2 = M_k + 2 mu M_k^2 (the last: = M_k), S = 1 - I
    - sum M, and I solves beta S = gamma + 2 mu I (bisection)."""
    mpmath = pytest.importorskip("mpmath")
    mu, levels = 1e-30, 3
    mpmath.mp.dps = 60
    m_mu = mpmath.mpf(mu)

    def chain(i):
        feed, out = i, []
        for k in range(1, levels + 1):
            a = 2 * m_mu if k < levels else mpmath.mpf(0)       # M_k's own pairing away
            inflow = m_mu * feed ** 2
            mk = 2 * inflow / (1 + mpmath.sqrt(1 + 4 * a * inflow))
            out.append(mk)
            feed = mk
        return out

    def h(i):
        return 3 * (1 - i - sum(chain(i))) - 1 - 2 * m_mu * i

    lo, hi = mpmath.mpf("0.5"), mpmath.mpf("0.9")
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if h(mid) > 0 else (lo, mid)
    want = [1 - lo - sum(chain(lo)), lo] + chain(lo)
    want = np.array([float(w) for w in want])
    x = mutation_chain(mu, levels).mean_field().fixed_point
    assert want[-1] < 1e-200
    assert np.allclose(x, want, rtol=1e-9, atol=0), (x, want)


def _two_species(seed):
    """A random 2-species model whose species B is rare (fed at 1e-5 .. 1e-250), self-sustaining, or
    never fed (A absorbing: B = 0)."""
    rng = np.random.default_rng(seed)
    tiny = 10.0 ** -rng.uniform(5, 250)
    p, q, r, s, c = rng.uniform(0.1, 2, 5)
    up = [f"{tiny!r}*A*({p!r} + {q!r}*A)", f"{tiny!r}*A**2*({p!r} + {q!r}*B)",
          f"{c + 2!r}*A*B + {tiny!r}*A", "0*A"][seed % 4]
    return up, f"B*({r!r} + {s!r}*A)"


def test_random_two_species_models_with_a_rare_species():
    """The safeguards around the polish on random models: every one has a fixed point (no
    MeanFieldError), B matches an independent 50-digit bisection of log in_B = log out_B on
    log B (mpmath) to 1e-9 relative, and a species nothing feeds is exactly 0."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 50
    for seed in range(32):
        up, down = _two_species(seed)
        m = PopulationModel(f"random{seed}", ["A", "B"])
        m.transition("up", {"A": -1, "B": +1}, up)
        m.transition("down", {"B": -1, "A": +1}, down)
        mf = m.mean_field()
        x = mf.fixed_point
        assert mf.residual <= 1e-12 and x.min() >= 0, (seed, x)
        if seed % 4 == 3:
            assert x[1] == 0, (seed, x)
            continue

        def h(t):
            B = mpmath.exp(t)
            ns = {"A": 1 - B, "B": B}
            return mpmath.log(eval(up, ns)) - mpmath.log(eval(down, ns))   # decreasing in B here

        lo, hi = mpmath.mpf(-2000), mpmath.log(1 - mpmath.mpf(10) ** -40)
        assert h(lo) > 0 > h(hi)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if h(mid) > 0 else (lo, mid)
        want = float(mpmath.exp(lo))
        assert x[1] == pytest.approx(want, rel=1e-9, abs=0), (seed, x, want, up, down)


def test_a_rare_self_sustaining_species_is_not_put_to_zero():
    """B catalyses its own production (2 A B) and is removed at B + 1e20 B^2: B* = 1/(1e20 + 2)
    exactly, below the polish's noise level, and B = 0 is a second (unstable) fixed point. The
    polish rebuilds noise-level densities from the larger ones, which cannot rebuild B; its zero
    state is unstable (d f_B / d B = 1 > 0 at B = 0), so it keeps Newton's value and refines it."""
    # B listed first: the stability test works in reduced coordinates, where the last species is
    # 1 - sum of the others and a last B of 1e-20 would be lost (a limitation outside the polish)
    m = PopulationModel("self-sustaining", ["B", "A"])
    m.transition("up", {"A": -1, "B": +1}, lambda x: 2 * x["A"] * x["B"])
    m.transition("down", {"B": -1, "A": +1}, lambda x: x["B"] + 1e20 * x["B"] ** 2)
    mf = m.mean_field(x0=[0.5, 0.5])
    assert mf.fixed_point[0] == pytest.approx(1 / (1e20 + 2), rel=1e-12, abs=0)
    assert mf.stable


# ---------------------------------------------------------------------------
# issue 25: x0 as a dict, N a whole number >= 1
# ---------------------------------------------------------------------------
def test_x0_as_a_dict_is_the_same_start_as_the_array_in_species_order():
    m = sirs()
    # the dict's own order is not the species order: it is mapped by name
    by_name = m.refined_transient(1.5, {"R": 0.0, "I": 0.1, "S": 0.9}, 40, order=2)
    by_order = m.refined_transient(1.5, [0.9, 0.1, 0.0], 40, order=2)
    assert np.array_equal(by_name.densities, by_order.densities)
    mf = sis().mean_field(x0={"I": 0.3, "S": 0.7})
    assert mf.fixed_point[1] == pytest.approx(sis_fixed_point(2.0, 0.1, 1.0), rel=1e-12)
    assert sis().refined(20, x0={"S": 0.5, "I": 0.5}).densities == pytest.approx(sis().refined(20).densities,
                                                                                  abs=1e-12)


@pytest.mark.parametrize("x0,match", [
    ({"S": 0.5, "Q": 0.5}, r"x0: unknown species \['Q'\]"),
    ({"S": 1.0}, r"x0: missing .*\['I'\]"),
    ({"S": 1.2, "I": -0.2}, r"x0: .*\['I'\] are negative"),
    ({"S": float("nan"), "I": 0.5}, r"x0: .*\['S'\] are not finite"),
    ({"S": float("inf"), "I": 0.5}, r"x0: .*\['S'\] are not finite"),
    ({"S": 0.5, "I": 0.6}, "x0: .*sum to 1"),
    ({"S": "a lot", "I": 0.0}, "x0: expected"),
    ([0.5, 0.25, 0.25], r"x0: expected 2 densities .*shape \(3,\)"),
])
@pytest.mark.parametrize("call", ["mean_field", "refined", "refined_transient"])
def test_bad_x0_is_named_for_every_entry_point(call, x0, match):
    m = sis()
    run = {"mean_field": lambda: m.mean_field(x0=x0), "refined": lambda: m.refined(10, x0=x0),
           "refined_transient": lambda: m.refined_transient(1.0, x0, 10)}[call]
    with pytest.raises(ValueError, match=match):
        run()


@pytest.mark.parametrize("N", [0.001, 0.5, 0, -3, 10.5, float("nan"), float("inf"), True, "10"])
@pytest.mark.parametrize("call", ["refined", "refined_transient", "chain"])
def test_N_must_be_a_whole_number_at_least_one(call, N):
    m = sis()
    run = {"refined": lambda: m.refined(N), "chain": lambda: m.chain(N),
           "refined_transient": lambda: m.refined_transient(1.0, [0.5, 0.5], N)}[call]
    with pytest.raises(ValueError, match=r"N: expected a whole number of individuals >= 1"):
        run()


def test_a_whole_float_N_is_that_integer():
    m = sis()
    assert m.refined(40.0).densities == pytest.approx(m.refined(40).densities, abs=0)
    assert m.refined(np.int64(1)).N == 1
