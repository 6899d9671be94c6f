"""Labelled results: reprs, tables, marginals, expressions wherever per-state values are expected, one shape rule."""
import numpy as np
import pytest

import ctmc


@pytest.fixture(scope="module")
def three():
    """A 3-variable model: tandem of two queues plus an on/off modulating phase."""
    m = ctmc.Model("three")
    n1, n2, on = m.var("n1", 0, 5), m.var("n2", 0, 4), m.var("on", 0, 1)
    m.event("arr", guard=(n1 < 5) & (on == 1), rate=1.5, update={n1: n1 + 1})
    m.event("move", guard=(n1 > 0) & (n2 < 4), rate=2.0, update={n1: n1 - 1, n2: n2 + 1})
    m.event("dep", guard=n2 > 0, rate=1.7, update={n2: n2 - 1})
    m.event("switch", rate=ctmc.where(on == 1, 0.4, 0.9), update={on: 1 - on})
    m.label("full", n1 == 5)
    m.reward("jobs", n1 + n2)
    ch = m.build(initial={"n1": 0, "n2": 0, "on": 1})
    return ch, n1, n2, on


def test_marginal_and_table_in_one_call_each(three):
    ch, n1, n2, on = three
    res = ch.stationary()
    S = ch.states
    ref = np.bincount(S["n2"], weights=res.pi)           # the by-hand way
    marg = res.marginal("n2")
    assert list(marg) == [0, 1, 2, 3, 4]
    np.testing.assert_allclose(list(marg.values()), ref, rtol=1e-14)
    # a marginal of an integer expression
    tot = res.marginal(n1 + n2)
    np.testing.assert_allclose(list(tot.values()), np.bincount(S["n1"] + S["n2"], weights=res.pi), rtol=1e-14)
    pytest.importorskip("pandas")
    df = res.to_frame()
    assert list(df.columns) == ["n1", "n2", "on", "pi"]
    assert len(df) == ch.n_states
    np.testing.assert_array_equal(df["n1"].to_numpy(), S["n1"])
    np.testing.assert_array_equal(df["pi"].to_numpy(), res.pi)
    assert df.groupby("n2")["pi"].sum().to_numpy() == pytest.approx(ref, rel=1e-14)
    assert list(ch.states.to_frame().columns) == ["n1", "n2", "on"]
    assert "full" in ch.to_frame().columns and "load" in ch.to_frame(load=n1 + n2).columns


def test_expectations_take_expressions_names_and_arrays(three):
    ch, n1, n2, on = three
    res = ch.stationary()
    S = ch.states
    by_hand = float(res.pi @ (S["n1"] + S["n2"]))
    assert res.expect(n1 + n2) == pytest.approx(by_hand, rel=1e-14)
    assert res.expect("jobs") == pytest.approx(by_hand, rel=1e-14)
    assert res.expect(S["n1"] + S["n2"]) == pytest.approx(by_hand, rel=1e-14)
    assert res.expect(n1 == 5) == pytest.approx(float(res.pi[S["n1"] == 5].sum()), rel=1e-14)
    np.testing.assert_array_equal(ch.eval(n1 * 2 + on), 2 * S["n1"] + S["on"])
    tr = ch.transient({"n1": 0, "n2": 0, "on": 1}, [0.5, 2.0])
    np.testing.assert_allclose(tr.expect(n2), tr.p @ S["n2"], rtol=1e-14)
    assert isinstance(ch.transient({"n1": 0, "n2": 0, "on": 1}, 0.5).expect(n2), float)


def test_rewards_and_initial_laws_take_expressions(three):
    ch, n1, n2, on = three
    S = ch.states
    r_expr = ch.hitting_times(n1 == 5, reward=n2 + 1)
    r_arr = ch.hitting_times(n1 == 5, reward=S["n2"] + 1.0)
    np.testing.assert_array_equal(r_expr.mean, r_arr.mean)
    np.testing.assert_array_equal(ch.hitting_times("full", reward="jobs").mean,
                                  ch.hitting_times(n1 == 5, reward=S["n1"] + S["n2"]).mean)
    # a numeric expression as initial law: weights, normalised
    w = (S["n1"] + 1.0) * (S["on"] == 1)
    a = ch.transient((n1 + 1) * (on == 1), [0.0, 1.0])
    b = ch.transient(w / w.sum(), [0.0, 1.0])
    np.testing.assert_allclose(a.p, b.p, rtol=1e-14)
    # a boolean expression and a label are uniform laws on their sets
    np.testing.assert_allclose(ch.transient("full", 0.0).p, ch.transient(n1 == 5, 0.0).p)
    with pytest.raises(ValueError, match="p0"):
        ch.transient(n1 - 10, 1.0)


def test_one_shape_rule_for_points(three):
    ch, n1, n2, on = three
    n = ch.n_states
    A = n1 == 5
    start = {"n1": 0, "n2": 0, "on": 1}
    assert ch.transient(start, 1.0).p.shape == (n,)
    assert ch.transient(start, [1.0]).p.shape == (1, n)
    assert ch.transient(start, [1.0, 2.0]).p.shape == (2, n)
    assert ch.hitting_laplace(A, 0.5).values.shape == (n,)
    assert ch.hitting_laplace(A, [0.5, 1.0]).values.shape == (2, n)
    fp1 = ch.first_passage(A, s=0.5, t=1.0)
    fp2 = ch.first_passage(A, s=[0.5], t=[1.0])
    m = int(ch.where(A).sum())
    assert fp1.laplace.shape == (n, m) and fp1.cdf.shape == (n, m)
    assert fp2.laplace.shape == (1, n, m) and fp2.cdf.shape == (1, n, m)
    np.testing.assert_array_equal(fp1.cdf, fp2.cdf[0])
    assert ch.prob_within(A, 1.0).values.shape == (n,)
    assert ch.prob_within(A, [1.0, 2.0]).values.shape == (2, n)
    # the same numbers whichever spelling
    np.testing.assert_array_equal(ch.transient(start, 1.0).p, ch.transient(start, [1.0]).p[0])


def test_reading_a_per_state_answer_at_a_state(three):
    ch, n1, n2, on = three
    h = ch.hitting_times("full")
    i = ch.index(n1=0, n2=0, on=1)
    assert h.at_initial() == h.mean[i] == h.at(n1=0, n2=0, on=1) == h.at(i)
    lap = ch.hitting_laplace("full", [0.1, 1.0])
    np.testing.assert_array_equal(lap.at_initial(), lap.values[:, i])
    with pytest.raises(ValueError, match="no state"):
        h.at(n1=9, n2=0, on=1)
    no_init = ctmc.CTMC(ch.Q, ch.states.as_dict())
    with pytest.raises(ValueError, match="no initial state"):
        no_init.hitting_times(np.asarray(ch.labels["full"])).at_initial()


def test_reprs_are_short(three):
    ch, *_ = three
    big = ctmc.Model("big")
    k = big.var("k", 0, 999)
    big.event("up", guard=k < 999, rate=1.0, update={k: k + 1})
    big.event("down", guard=k > 0, rate=2.0, update={k: k - 1})
    c = big.build(initial={"k": 0})
    for obj in (c.states, c.stationary(), c.hitting_times(k == 999), c.hitting_laplace(k == 999, [0.1, 1.0]),
                c.transient({"k": 0}, [0.5, 1.0]), c.first_passage(k == 999, s=0.5), c.prob_within(k == 999, 1.0)):
        text = repr(obj)
        assert len(text) < 400, text
        assert "\n" not in text
        assert "<table>" in obj._repr_html_()
    assert "k in [0, 999]" in repr(c.states)
    assert "success" in repr(c.stationary())


def test_first_passage_table_rows_are_sources(three):
    pytest.importorskip("pandas")
    ch, n1, n2, on = three
    fp = ch.first_passage("full", sources={0, 3})
    df = fp.to_frame()
    assert list(df["n1"]) == [ch.states["n1"][0], ch.states["n1"][3]]
    np.testing.assert_allclose(df["P(reach)"], fp.probabilities.sum(axis=1))


def test_labels_of_a_matrix_chain():
    Q = [[-1.0, 1.0, 0], [0, -2.0, 2.0], [3.0, 0, -3.0]]
    ch = ctmc.CTMC(Q, labels={"last": {2}, "first": [True, False, False]}, rewards={"r": [1.0, 0.0, 2.0]},
                   initial=0)
    assert ch.labels["last"].tolist() == [False, False, True]
    assert ch.initial.tolist() == [0]
    pi = ch.stationary()
    assert pi.expect("r") == pytest.approx(pi.pi[0] + 2 * pi.pi[2])
    assert ch.hitting_times("last").at_initial() == pytest.approx(1.0 + 0.5)
    with pytest.raises(ValueError, match="reward 'bad'"):
        ctmc.CTMC(Q, rewards={"bad": [1.0, 2.0]})
    with pytest.raises(ValueError, match="label 'x'"):
        ctmc.CTMC(Q, labels={"x": [5]})


def test_initial_of_a_chain_follows_the_rule_of_p0():
    """Review finding: initial=[1, 0, 0] was read as the set {0, 1} while p0=[1, 0, 0] is the law of state 0."""
    Q = [[-1.0, 1.0, 0], [0, -1.0, 1.0], [1.0, 0, -1.0]]
    for spec, law in (([1, 0, 0], [1, 0, 0]), ([0, 0, 1], [0, 0, 1]), (0, [1, 0, 0]), ({0, 1}, [0.5, 0.5, 0]),
                      ([2], [0, 0, 1]), (np.array([0.25, 0.75, 0.0]), [0.25, 0.75, 0])):
        c = ctmc.CTMC(Q, initial=spec)
        np.testing.assert_allclose(c.initial_law, law)
        assert float(c.prob_within({2}, 1.0).value) == pytest.approx(
            float(c.prob_within({2}, 1.0, p0=np.asarray(law, dtype=float)).value), rel=1e-15)
    c = ctmc.CTMC(Q, initial=[0.5, 0.5, 0.0])
    with pytest.raises(ValueError, match="read-only"):
        c.initial_law[0] = 3.0           # the chain's law cannot be changed through the view
