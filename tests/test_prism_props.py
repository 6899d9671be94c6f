"""ctmc.prism.check / check_file and ``ctmc solve --prop``: each CSL operator against an independent answer.

The chain is built once from a PRISM program; every expected value is computed
here from its generator with dense linear algebra (``scipy.linalg.expm`` on the
generator with the right states made absorbing, ``numpy.linalg.solve``,
``scipy.integrate.quad`` of the transient law, ``mpmath`` at 40 digits for a
small probability), never by the analyses the properties map onto.
"""
import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import scipy.integrate
import scipy.linalg

import ctmc
import ctmc.cli
import ctmc.prism
from ctmc.prism import PrismError

PROGRAM = """
ctmc
const int K;
module m
    n : [0..K] init 0;
    d : bool init false;
    [] !d & n<K   -> 1.0 : (n'=n+1);
    [] !d & n<K-1 -> 0.5 : (n'=n+2);
    [] !d & n>0   -> 2.0 : (n'=n-1);
    [] !d & n=1   -> 0.3 : (d'=true);
endmodule
label "full" = n=K;
label "dead" = d;
rewards "size" true : n; endrewards
rewards "busy" n>0 : 1; endrewards
rewards "moves" [] n>0 : 2; endrewards
"""


@pytest.fixture(scope="module")
def chain():
    return ctmc.prism.load(PROGRAM, constants={"K": 4}).build()


def _dense(chain):
    Q = chain.Q.toarray()
    n = np.asarray(chain.states["n"])
    d = np.asarray(chain.states["d"]).astype(bool)
    return Q, n, d


def _absorbing(Q, keep):
    out = Q.copy()
    out[~keep] = 0.0
    return out


def _i0(chain):
    return int(chain.initial[0])


def _reach_within(Q, phi, psi, t):
    """P_i(phi U<=t psi) for every i: expm with psi and !phi&!psi absorbing."""
    return scipy.linalg.expm(_absorbing(Q, phi & ~psi) * t)[:, psi].sum(axis=1)


def test_bounded_reachability_matches_expm_with_the_target_absorbing(chain):
    Q, n, d = _dense(chain)
    full = n == 4
    for t in (0.1, 1.0, 7.5):
        r = ctmc.prism.check(chain, f'P=? [ F<={t} "full" ]')
        ref = _reach_within(Q, np.ones_like(full), full, t)
        assert r.value == pytest.approx(ref[_i0(chain)], rel=1e-10)
        np.testing.assert_allclose(r.values, ref, rtol=1e-10, atol=1e-14)
        assert r.status == ctmc.Status.SUCCESS and r.error_bound < 1e-9
        assert r.method.startswith("prob_within")


def test_bounded_until_makes_the_states_outside_phi_absorbing(chain):
    Q, n, d = _dense(chain)
    phi, psi = n != 2, n == 4                 # the +2 jumps go round n = 2
    r = ctmc.prism.check(chain, "P=? [ n!=2 U<=1.5 n=4 ]")
    ref = _reach_within(Q, phi, psi, 1.5)
    assert r.value == pytest.approx(ref[_i0(chain)], rel=1e-10)
    assert 0 < r.value < ctmc.prism.check(chain, "P=? [ F<=1.5 n=4 ]").value


def test_interval_reachability_is_a_transient_law_then_a_bounded_reachability(chain):
    Q, n, d = _dense(chain)
    full = n == 4
    t1, t2 = 0.5, 2.0
    u = _reach_within(Q, np.ones_like(full), full, t2 - t1)
    ref = scipy.linalg.expm(Q * t1) @ u          # phi = true: nothing absorbing on [0, t1]
    r = ctmc.prism.check(chain, f'P=? [ F[{t1},{t2}] "full" ]')
    assert r.value == pytest.approx(ref[_i0(chain)], rel=1e-10)
    # phi U[t1,t2] psi: phi must hold on [0, t1] too
    phi = n != 1
    u = _reach_within(Q, phi, full, t2 - t1)
    ref = scipy.linalg.expm(_absorbing(Q, phi) * t1) @ np.where(phi, u, 0.0)
    r = ctmc.prism.check(chain, f'P=? [ n!=1 U[{t1},{t2}] "full" ]')
    assert r.value == pytest.approx(ref[_i0(chain)], rel=1e-10)
    # F>=t1: the probability of ever reaching "full" (a dense solve), from the law at t1
    h = np.where(full, 1.0, 0.0)
    T = ~full & ~d
    h[T] = np.linalg.solve(Q[np.ix_(T, T)], -Q[np.ix_(T, full)].sum(axis=1))
    ref = scipy.linalg.expm(Q * t1) @ h
    assert ctmc.prism.check(chain, f'P=? [ F>={t1} "full" ]').value == pytest.approx(ref[_i0(chain)], rel=1e-10)


@pytest.mark.parametrize("prop", ['P=? [ F<=2 "full" ]', 'P=? [ F[0.5,2] "full" ]',
                                  'P=? [ n!=1 U[0.5,2] "full" ]'])
def test_bounded_reachability_is_graded_against_the_error_tol_given(chain, prop):
    """One grading rule for every analysis: a time-bounded probability is ``inaccurate`` where its
    bound exceeds the ``error_tol`` passed (as a long-run property is), a success under the default;
    the value is the same either way (was: success beside a bound of 1e-13 > error_tol 1e-30)."""
    ok = ctmc.prism.check(chain, prop)
    assert ok.status == ctmc.Status.SUCCESS and 0 < ok.error_bound < 1e-6
    tight = ctmc.prism.check(chain, prop, error_tol=ok.error_bound / 2)
    assert tight.status == ctmc.Status.INACCURATE and tight.value == ok.value
    assert ctmc.prism.check(chain, prop, error_tol=ok.error_bound * 2).status == ctmc.Status.SUCCESS


def test_small_bounded_probability_keeps_its_relative_accuracy():
    c = ctmc.prism.load(PROGRAM, constants={"K": 8}).build()
    Q, n, _ = _dense(c)
    t = 0.01
    mpmath.mp.dps = 40
    E = mpmath.expm(mpmath.matrix((_absorbing(Q, n != 8) * t).tolist()))
    ref = float(sum(E[_i0(c), j] for j in np.flatnonzero(n == 8)))
    r = ctmc.prism.check(c, f"P=? [ F<={t} n=8 ]")
    assert ref < 1e-9
    assert r.value == pytest.approx(ref, rel=1e-9)


def test_unbounded_reachability_and_until_match_a_dense_linear_solve(chain):
    Q, n, d = _dense(chain)
    for prop, phi, psi in (('P=? [ F "full" ]', np.ones(len(n), bool), n == 4),
                           ("P=? [ n!=2 U n=4 ]", n != 2, n == 4)):
        h = np.where(psi, 1.0, 0.0)
        T = phi & ~psi & ~d                    # the dead state is absorbing: h = 0 there
        h[T] = np.linalg.solve(Q[np.ix_(T, T)], -Q[np.ix_(T, psi)].sum(axis=1))
        r = ctmc.prism.check(chain, prop)
        assert 0 < r.value < 1
        assert r.value == pytest.approx(h[_i0(chain)], rel=1e-10)
        np.testing.assert_allclose(r.values, h, rtol=1e-10, atol=1e-15)
        assert r.method.startswith("hitting_laplace")


def test_small_unbounded_probability_keeps_its_relative_accuracy():
    # gambler's ruin: from 1, reach K before 0 at up rate 1, down rate 10: (1 - q) / (1 - q^K), q = 10
    K = 14
    c = ctmc.prism.load(f"""ctmc
    module g n : [0..{K}] init 1;
        [] n>0 & n<{K} -> 1 : (n'=n+1); [] n>0 & n<{K} -> 10 : (n'=n-1);
    endmodule""").build()
    exact = (1 - Fraction(10)) / (1 - Fraction(10) ** K)
    r = ctmc.prism.check(c, f"P=? [ F n={K} ]")
    assert float(exact) < 1e-12
    assert r.value == pytest.approx(float(exact), rel=1e-12)


def test_expected_time_and_reward_to_a_target_match_a_dense_solve(chain):
    Q, n, d = _dense(chain)
    target = (n == 4) | d
    T = ~target
    for prop, r in (('T=? [ F "full" | "dead" ]', np.ones(len(n))),
                    ('R{"size"}=? [ F "full" | "dead" ]', n.astype(float))):
        m = np.zeros(len(n))
        m[T] = np.linalg.solve(-Q[np.ix_(T, T)], r[T])
        res = ctmc.prism.check(chain, prop)
        assert res.value == pytest.approx(m[_i0(chain)], rel=1e-10)
        np.testing.assert_allclose(res.values, m, rtol=1e-10)
    # PRISM: infinite where the target is missed with positive probability
    assert ctmc.prism.check(chain, 'T=? [ F "full" ]').value == np.inf


def test_cumulative_reward_matches_the_integral_of_the_transient_law(chain):
    Q, n, d = _dense(chain)
    p0 = np.eye(len(n))[_i0(chain)]
    for name, r in (("size", n.astype(float)), ("busy", (n > 0).astype(float))):
        ref, _ = scipy.integrate.quad(lambda s: p0 @ scipy.linalg.expm(Q * s) @ r, 0, 2.0, epsabs=1e-13,
                                      epsrel=1e-12)
        res = ctmc.prism.check(chain, f'R{{"{name}"}}=? [ C<=2 ]')
        assert res.value == pytest.approx(ref, rel=1e-9)


def test_cumulative_reward_of_a_two_state_chain_has_its_closed_form():
    c = ctmc.prism.load("""ctmc
    module a s : [0..1] init 0; [] s=0 -> 3 : (s'=1); [] s=1 -> 1 : (s'=0); endmodule
    rewards "on" s=0 : 1; endrewards""").build()
    a, b, t = 3.0, 1.0, 0.7          # P_0(s=0 at u) = b/(a+b) + a/(a+b) e^{-(a+b)u}
    ref = b / (a + b) * t + a / (a + b) ** 2 * (1 - np.exp(-(a + b) * t))
    assert ctmc.prism.check(c, 'R{"on"}=? [ C<=0.7 ]').value == pytest.approx(ref, rel=1e-12)
    inst = b / (a + b) + a / (a + b) * np.exp(-(a + b) * t)
    assert ctmc.prism.check(c, 'R{"on"}=? [ I=0.7 ]').value == pytest.approx(inst, rel=1e-12)


def test_instantaneous_reward_matches_expm(chain):
    Q, n, d = _dense(chain)
    ref = scipy.linalg.expm(Q * 1.3) @ n.astype(float)
    r = ctmc.prism.check(chain, 'R{"size"}=? [ I=1.3 ]')
    assert r.value == pytest.approx(ref[_i0(chain)], rel=1e-10)
    np.testing.assert_allclose(r.values, ref, rtol=1e-10)
    assert r.error_bound < 1e-9


MIXED = """
ctmc
module m
    n : [0..3] init 1;
    [up]   n<3 -> 1.5 : (n'=n+1);
    [down] n>0 -> 2.0 : (n'=n-1);
endmodule
rewards "mixed" true : n; [up] true : 4; n=2 : 0.5; endrewards
rewards "acts" [down] n>1 : 3; endrewards
"""


@pytest.fixture(scope="module")
def mixed():
    c = ctmc.prism.load(MIXED).build()
    n = np.asarray(c.states["n"])
    # by hand: the state items, and the rate PRISM accrues (an action item v on a rate q: v q per unit time)
    state = n + 0.5 * (n == 2)
    return c, c.Q.toarray(), state, {"mixed": state + 4 * 1.5 * (n < 3), "acts": 3 * 2.0 * (n > 1)}


def test_instantaneous_reward_reads_the_state_items_only(mixed):
    c, Q, state, _ = mixed
    ref = scipy.linalg.expm(Q * 0.8) @ state           # PRISM: action items are left out of I=t
    r = ctmc.prism.check(c, 'R{"mixed"}=? [ I=0.8 ]')
    assert r.value == pytest.approx(ref[int(c.initial[0])], rel=1e-10)
    np.testing.assert_allclose(r.values, ref, rtol=1e-10)
    assert ctmc.prism.check(c, 'R{1}=? [ I=0.8 ]').value == r.value


def test_instantaneous_reward_of_an_action_structure_is_zero(chain, mixed):
    c = mixed[0]
    for ch, prop in ((c, 'R{"acts"}=? [ I=0.8 ]'), (chain, 'R{"moves"}=? [ I=1 ]')):
        r = ctmc.prism.check(ch, prop)
        assert r.value == 0.0
        assert not r.values.any()


def test_action_rewards_stay_rates_for_cumulative_and_long_run(mixed):
    c, Q, _, rate = mixed
    p0 = np.eye(len(Q))[int(c.initial[0])]
    pi = scipy.linalg.null_space(Q.T)[:, 0]
    pi /= pi.sum()
    for name, r in rate.items():
        np.testing.assert_allclose(c.rewards[name], r, rtol=1e-14)
        ref, _ = scipy.integrate.quad(lambda s: p0 @ scipy.linalg.expm(Q * s) @ r, 0, 0.8, epsabs=1e-13,
                                      epsrel=1e-12)
        assert ctmc.prism.check(c, f'R{{"{name}"}}=? [ C<=0.8 ]').value == pytest.approx(ref, rel=1e-9)
        assert ctmc.prism.check(c, f'R{{"{name}"}}=? [ S ]').value == pytest.approx(pi @ r, rel=1e-10)


def test_reward_by_index_and_the_default_structure(chain):
    first = ctmc.prism.check(chain, 'R=? [ C<=1 ]').value
    assert first == ctmc.prism.check(chain, 'R{"size"}=? [ C<=1 ]').value
    busy = ctmc.prism.check(chain, 'R{"busy"}=? [ C<=1 ]').value
    assert ctmc.prism.check(chain, 'R{2}=? [ C<=1 ]').value == busy
    with pytest.raises(PrismError, match=r"3 reward structure\(s\), 1..3"):
        ctmc.prism.check(chain, 'R{4}=? [ C<=1 ]')


def test_filters_follow_prisms_semantics(chain):
    Q, n, d = _dense(chain)
    u = _reach_within(Q, np.ones(len(n), bool), n == 4, 1.0)
    low = (n < 3) & ~d
    def f(op, states="n<3 & !d"):
        return ctmc.prism.check(chain, f'filter({op}, P=? [ F<=1 "full" ], {states})').value
    assert f("max") == pytest.approx(u[low].max(), rel=1e-10)
    assert f("min") == pytest.approx(u[low].min(), rel=1e-10)
    assert f("avg") == pytest.approx(u[low].mean(), rel=1e-10)
    assert f("sum") == pytest.approx(u[low].sum(), rel=1e-10)
    assert f("first") == pytest.approx(u[np.flatnonzero(low)[0]], rel=1e-10)
    two = int(np.flatnonzero((n == 2) & ~d)[0])
    assert f("state", "n=2 & !d") == pytest.approx(u[two], rel=1e-10)
    # bool properties: count, forall, exists; P>=p per state
    p = float(np.sort(u[low])[1])
    count = ctmc.prism.check(chain, f'filter(count, P>={p!r} [ F<=1 "full" ], n<3 & !d)').value
    assert count == int((u[low] >= p).sum())
    assert ctmc.prism.check(chain, 'filter(forall, n<=4)').value == 1.0
    assert ctmc.prism.check(chain, 'filter(exists, "dead")').value == 1.0
    assert ctmc.prism.check(chain, 'filter(forall, !"dead")').value == 0.0
    with pytest.raises(PrismError, match="exactly one state, got 3"):
        f("state", "n<3 & !d")
    with pytest.raises(PrismError, match="no state satisfies"):
        f("max", "n>4")
    with pytest.raises(PrismError, match="expected a bool property"):
        ctmc.prism.check(chain, 'filter(forall, P=? [ F<=1 "full" ])')


def test_long_run_filter_on_a_reducible_chain_computes_each_start(chain):
    # the dead state is absorbing; the rest is transient, so the long-run law depends on the start
    Q, n, d = _dense(chain)
    h = ctmc.prism.check(chain, 'P=? [ F "dead" ]').values      # absorption probability
    for s in (0, 3):
        i = int(np.flatnonzero((n == s) & ~d)[0])
        v = ctmc.prism.check(chain, f'filter(state, S=? [ "dead" ], n={s} & !d)').value
        assert v == pytest.approx(h[i], rel=1e-9)


def test_several_initial_states_give_the_law_over_them():
    prog = PROGRAM.replace("n : [0..K] init 0;", "n : [0..K];").replace("d : bool init false;", "d : bool;") \
        + "init n<=1 & !d endinit\n"
    c = ctmc.prism.load(prog, constants={"K": 4}).build()
    assert len(c.initial) == 2
    r = ctmc.prism.check(c, 'P=? [ F<=1 "full" ]')
    assert r.value == pytest.approx(r.values[c.initial].mean(), rel=1e-12)
    # a bool property holds "from the initial state" when it holds in each (PRISM's default)
    u = r.values[c.initial]
    assert ctmc.prism.check(c, f'P>={u.min()!r} [ F<=1 "full" ]').value == 1.0
    assert ctmc.prism.check(c, f'P>={u.max()!r} [ F<=1 "full" ]').value == (u.min() == u.max())


def test_instant_and_cumulative_rewards_from_several_initial_states_are_their_mean():
    # docs: .value is the mean over the initial law, uniform over the states of init ... endinit
    prog = MIXED.replace("n : [0..3] init 1;", "n : [0..3];") + "init n>=1 & n<=2 endinit\n"
    c = ctmc.prism.load(prog).build()
    Q, n = c.Q.toarray(), np.asarray(c.states["n"])
    p0 = ((n >= 1) & (n <= 2)) / 2.0
    state, rate = n + 0.5 * (n == 2), n + 0.5 * (n == 2) + 6.0 * (n < 3)
    inst = ctmc.prism.check(c, 'R{"mixed"}=? [ I=0.8 ]').value
    assert inst == pytest.approx(p0 @ scipy.linalg.expm(Q * 0.8) @ state, rel=1e-10)
    ref, _ = scipy.integrate.quad(lambda s: p0 @ scipy.linalg.expm(Q * s) @ rate, 0, 0.8, epsabs=1e-13,
                                  epsrel=1e-12)
    assert ctmc.prism.check(c, 'R{"mixed"}=? [ C<=0.8 ]').value == pytest.approx(ref, rel=1e-9)


def test_properties_file_with_const_formula_and_label_lines(chain, tmp_path):
    text = """// a properties file
const double T;
const double U = 2 * T;
formula high = n >= 3;
label "low" = n <= 1;
"reach": P=? [ F<=T "full" ];
P=? [ F<=U high ]
"stay": S=? [ "low" & !"dead" ]
"""
    out = ctmc.prism.check_file(chain, text, constants={"T": 0.5})
    assert [r.name for r in out] == ["reach", None, "stay"]
    assert [r.property for r in out] == ['P=? [ F<=T "full" ]', "P=? [ F<=U high ]",
                                         'S=? [ "low" & !"dead" ]']
    assert out[0].value == ctmc.prism.check(chain, 'P=? [ F<=0.5 "full" ]').value
    assert out[1].value == ctmc.prism.check(chain, "P=? [ F<=1.0 n>=3 ]").value
    assert out[2].value == ctmc.prism.check(chain, 'S=? [ n<=1 & !d ]').value
    path = tmp_path / "q.csl"
    path.write_text(text)
    again = ctmc.prism.check_file(chain, path, constants={"T": "0.5"})      # as --const gives it
    assert [r.value for r in again] == [r.value for r in out]
    with pytest.raises(PrismError, match=r"q.csl:2:14: constant 'T' is not defined"):
        ctmc.prism.check_file(chain, path)
    with pytest.raises(PrismError, match=r"names \['V'\], which the properties do not declare"):
        ctmc.prism.check_file(chain, text, constants={"T": 1, "V": 2})
    for name in ("full", "init"):       # the model's own label, PRISM's built-in one: not redefined
        with pytest.raises(PrismError, match=rf"<properties>:1:18: label '{name}' is already a label of"):
            ctmc.prism.check_file(chain, f'label "{name}" = n <= 1;\nP=? [ F<=1 "{name}" ]\n')
    with pytest.raises(PrismError, match="constant 'K' is already a name of the model"):
        ctmc.prism.check_file(chain, "const int K = 2;\nP=? [ F n=K ]")


@pytest.mark.parametrize("prop, where, message", [
    ('P=? [ G "full" ]', "1:7", r"G \(globally\) is not supported"),
    ('P=? [ X "full" ]', "1:7", r"X \(next\) is not supported"),
    ('R{"size"}=? [ C ]', "1:15", "give C<=t"),
    ('filter(argmax, n)', "1:8", "filter operator 'argmax' is not supported"),
    ('P=? [ F<=2 "nope" ]', "1:12", "label 'nope' is not a label of the chain"),
    ('P=? [ F[3,1] "full" ]', "1:11", r"\[3, 1\] is empty"),
    ('P=? [ F<=1 n ]', "1:12", "must be a bool expression"),
    ('S=? [ n>1 ] ; 1', "1:15", "unexpected '1' after the property"),
    ('S=? [ n>1 ] < 1', "1:13", r"only \+, -, \* and / of properties"),
    ('Pmax=? [ F n=1 ]', "1:1", "'Pmax' is not supported"),
    ('P=? [ "full" ]', "1:14", "expected 'U'"),
])
def test_property_errors_name_line_and_column(chain, prop, where, message):
    with pytest.raises(PrismError, match=message) as exc:
        ctmc.prism.check(chain, prop)
    assert str(exc.value).startswith(f"<property>:{where}:")


def test_properties_file_error_names_its_line(chain):
    with pytest.raises(PrismError, match=r"^<properties>:3:10: expected an expression"):
        ctmc.prism.check_file(chain, 'const double T = 1;\nP=? [ F<=T "full" ]\nS=? [ n> ]')


def test_a_chain_not_from_prism_uses_its_variables_and_labels():
    c = ctmc.CTMC([[-2.0, 2.0], [0.0, 0.0]], initial=0, labels={"done": [False, True]})
    r = ctmc.prism.check(c, 'P=? [ F<=0.5 "done" ]')
    assert r.value == pytest.approx(1 - np.exp(-1.0), rel=1e-12)
    assert ctmc.prism.check(c, "T=? [ F state=1 ]").value == pytest.approx(0.5, rel=1e-12)


# ---------------------------------------------------------------------------- the command line

@pytest.fixture()
def files(tmp_path):
    sm = tmp_path / "q.sm"
    sm.write_text(PROGRAM)
    csl = tmp_path / "q.csl"
    csl.write_text('const double T;\n"reach": P=? [ F<=T "full" ];\n"busy": R{"busy"}=? [ C<=T ]\n')
    return sm, csl


def _solve(argv, capsys):
    status = ctmc.cli.main(["solve", *argv])
    return status, capsys.readouterr()


def test_cli_prop_props_and_const(chain, files, capsys):
    sm, csl = files
    status, out = _solve([str(sm), "--const", "K=4", "--prop", 'S=? [ "dead" ]',
                          "--prop", 'T=? [ F "full" | "dead" ]',
                          "--props", str(csl), "--const", "T=0.5", "--format", "json"], capsys)
    assert status == 0
    doc = json.loads(out.out)
    rows = doc["rows"]
    assert [r["name"] for r in rows] == ["", "", "reach", "busy"]
    want = [ctmc.prism.check(chain, p).value for p in ('S=? [ "dead" ]', 'T=? [ F "full" | "dead" ]',
                                                      'P=? [ F<=0.5 "full" ]', 'R{"busy"}=? [ C<=0.5 ]')]
    assert [r["value"] for r in rows] == want
    assert doc["evidence"]["status"] == "success" and doc["evidence"]["error_bound"] < 1e-9
    # the same with PRISM's comma-separated --const, as a table
    status, out = _solve([str(sm), "--const", "K=4,T=0.5", "--props", str(csl)], capsys)
    assert status == 0 and "reach" in out.out and "evidence:" in out.out


def test_cli_prop_on_a_python_model_uses_its_variables(tmp_path, capsys):
    py = tmp_path / "mm1.py"
    py.write_text("import ctmc\nmodel = ctmc.Model('mm1')\nn = model.var('n', 0, 3)\n"
                  "model.event('a', guard=n < 3, rate=1.0, update={n: n + 1})\n"
                  "model.event('s', guard=n > 0, rate=2.0, update={n: n - 1})\ninitial = {'n': 0}\n")
    status, out = _solve([str(py), "--prop", "T=? [ F n=3 ]", "--format", "csv"], capsys)
    # birth-death: E_0[T_3] = sum_k (1/lam) sum_{j<=k} (mu/lam)^(k-j) = 1 + 3 + 7 = 11
    assert status == 0 and float(out.out.splitlines()[1].split(",")[2]) == pytest.approx(11.0, rel=1e-12)
    with pytest.raises(SystemExit):
        _solve([str(py), "--const", "N=3"], capsys)
    assert "--const: gives the constants of a PRISM program" in capsys.readouterr().err


def test_cli_errors_are_one_line_usage_errors(files, capsys):
    sm, csl = files
    for argv, message in (([str(sm), "--prop", "S=? [ n>1 ]"], "q.sm:3:11: constant 'K' is not defined"),
                          ([str(sm), "--const", "K=4", "--prop", "P=? [ F<=1 n ]"], "<property>:1:12:"),
                          ([str(sm), "--const", "K=4", "--const", "Z=1"], "['Z'] are not constants of q.sm"),
                          ([str(sm), "--const", "K=4", "--prop", "S=? [ n>1 ]", "--hitting", "n=1"],
                           "do not combine with --hitting"),
                          ([str(sm), "--const", "K"], "expected NAME=VALUE")):
        with pytest.raises(SystemExit) as exc:
            _solve(argv, capsys)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_a_properties_file_solves_the_long_run_law_once_and_each_answer_is_exact():
    # M/M/1/K: pi_k proportional to (2/3)^k, exact in Fractions
    queue = ctmc.prism.load("""ctmc
    module q n : [0..6] init 0; [] n<6 -> 2 : (n'=n+1); [] n>0 -> 3 : (n'=n-1); endmodule
    rewards "size" true : n; endrewards""").build()
    w = [Fraction(2, 3) ** k for k in range(7)]
    pi = [x / sum(w) for x in w]
    text = 'S=? [ n=6 ]\nR{"size"}=? [ S ]\nS=? [ n<2 ]\n'
    first, second = ctmc.prism.check_file(queue, text), ctmc.prism.check_file(queue, text)
    want = [pi[6], sum(k * p for k, p in enumerate(pi)), pi[0] + pi[1]]
    for r, exact in zip(first, want):
        assert r.value == pytest.approx(float(exact), rel=1e-12)
        assert r.error_bound >= 0 and r.status == ctmc.Status.SUCCESS and r.method.startswith("long_run")
    assert first[0].result is first[1].result is first[2].result       # one law for the whole file
    assert second[0].result is not first[0].result                     # made per call, not kept
    for r in first:                    # a fresh solve per property gives the same answers
        fresh = ctmc.prism.check(queue, r.property)
        assert fresh.value == r.value and fresh.error_bound == r.error_bound


def test_deadlock_is_the_states_where_no_command_is_enabled():
    # n=3 has no command; n=2 has only a self-loop, dropped from Q but a transition for PRISM
    m = ctmc.prism.load("""ctmc
    module q n : [0..3] init 0; [] n<3 -> 1 : (n'=n+1); [] n=2 -> 5 : (n'=n); endmodule""")
    c = m.build()
    n = np.asarray(c.states["n"])
    dead = ctmc.prism.check(c, '"deadlock"').values != 0
    assert dead.tolist() == (n == 3).tolist()
    assert ctmc.prism.check(c, 'filter(state, "deadlock", n=2)').value == 0.0
    assert ctmc.prism.check(c, 'P=? [ F<=1 "deadlock" ]').value == pytest.approx(
        float(mpmath.gammainc(3, 0, 1, regularized=True)), rel=1e-12)         # Erlang(3, 1) <= 1
    # a chain from a generator: the states without a rate out
    g = ctmc.CTMC([[-1.0, 1.0, 0.0], [0.0, -2.0, 2.0], [0.0, 0.0, 0.0]], initial=0)
    assert ctmc.prism.check_file(g, 'filter(count, "deadlock")\n')[0].value == 1.0


def test_properties_inside_arithmetic_combine_state_by_state(chain):
    Q, n, d = _dense(chain)
    i = _i0(chain)
    full = n == 4
    one = _reach_within(Q, np.ones_like(full), full, 1.0)
    two = _reach_within(Q, np.ones_like(full), full, 2.0)
    r = ctmc.prism.check(chain, '1 - P=? [ F<=1 "full" ]')
    assert r.value == pytest.approx(1 - one[i], rel=1e-12)
    assert r.status == ctmc.Status.SUCCESS and abs(r.value - (1 - one[i])) <= r.error_bound
    r = ctmc.prism.check(chain, 'P=? [ F<=1 "full" ] / P=? [ F<=2 "full" ]')
    assert r.value == pytest.approx(one[i] / two[i], rel=1e-10)
    assert 0 < r.error_bound < 1e-9
    live = two > 0                    # 0 / 0 in the dead state, which cannot reach "full"
    np.testing.assert_allclose(r.values[live], one[live] / two[live], rtol=1e-10)
    r = ctmc.prism.check(chain, '-(2 * P=? [ F<=1 "full" ])')
    assert r.value == pytest.approx(-2 * one[i], rel=1e-12)
    with pytest.raises(PrismError, match=r"only \+, -, \* and /"):
        ctmc.prism.check(chain, 'P=? [ F<=1 "full" ] > 0.5')
    with pytest.raises(PrismError, match="must be a number, got a bool"):
        ctmc.prism.check(chain, '1 - P>0.5 [ F<=1 "full" ]')
    with pytest.raises(PrismError):          # not inside an operator's path
        ctmc.prism.check(chain, 'P=? [ F P=? [ F<=1 "full" ] > 0.5 ]')


REDUCIBLE = """
ctmc
module a
    x : [0..4] init 0;
    [] x=0 -> 1 : (x'=1);
    [] x=0 -> 3 : (x'=3);
    [] x=1 -> 2 : (x'=2);
    [] x=2 -> 1 : (x'=1);
    [] x=3 -> 5 : (x'=4);
    [] x=4 -> 1 : (x'=3);
endmodule
rewards "r" x=1 : 1; endrewards
"""


@pytest.mark.parametrize("prop, exact", [("S>0.1 [x=1]", False), ("S<0.1 [x=1]", True),
                                         ("S>=0.99 [x=1]", False), ("S>0.05 [x=1]", True),
                                         ('R{"r"}>1000 [S]', False), ('R{"r"}<=0.09 [S]', True)])
def test_a_bounded_long_run_on_a_reducible_chain_is_compared_in_the_initial_state(prop, exact):
    # from x=0 the chain enters {1, 2} w.p. 1/4, where x=1 holds 1/3 of the time, and {3, 4} w.p. 3/4,
    # where it never does: the long-run probability of x=1 is 1/12 from the initial state (a NaN there,
    # not a value, once read as "true" for every bound)
    chain = ctmc.prism.load(REDUCIBLE).build()
    assert ctmc.prism.check(chain, "S=? [x=1]").value == pytest.approx(1 / 12, rel=1e-12)
    assert ctmc.prism.check(chain, prop).value == float(exact)


def test_cumulative_reward_up_to_time_zero_is_exactly_zero(chain):
    res = ctmc.prism.check(chain, 'R{"size"}=? [ C<=0 ]')
    assert res.value == 0.0 and res.error_bound == 0.0 and res.status == ctmc.Status.SUCCESS


TWO_STATE = """
ctmc
const double p = 0.7;
const double q = 1.9;
module flip
    x : [0..2] init 0;
    [] x=0 -> p : (x'=1);
    [] x=1 -> q : (x'=0);
    [] x=1 -> 0.05 : (x'=2);
endmodule
label "up" = x=1;
label "gone" = x=2;
rewards "up" x=1 : 1; endrewards
"""


def _two_state_reference(kind):
    """Closed forms from state 0 of the chain 0 -> 1 at rate p, 1 -> 0 at q, 1 -> 2 (absorbing) at g."""
    p, q, g, t = 0.7, 1.9, 0.05, 1.3
    Q = np.array([[-p, p, 0.0], [q, -q - g, g], [0.0, 0.0, 0.0]])
    e = scipy.linalg.expm
    if kind == "P<=t":                  # P(F<=t up): 1 - e^{-pt}
        return 1 - np.exp(-p * t)
    if kind == "P[t1,t2]":              # P(F[0.4,t] up) = sum_j P(X_0.4 = j) P_j(F<=t-0.4 up)
        law = e(Q * 0.4)[0]
        return law[1] + law[0] * (1 - np.exp(-p * (t - 0.4)))
    if kind == "I=t":                   # P(X_t = 1), the law at t
        return e(Q * t)[0, 1]
    if kind == "C<=t":                  # int_0^t P(X_s = 1) ds
        return scipy.integrate.quad(lambda s: e(Q * s)[0, 1], 0, t, epsabs=1e-14, epsrel=1e-13)[0]
    if kind == "P U":                   # P(x<2 U up) = 1: "up" is entered before "gone" from state 0
        return 1.0
    if kind == "F gone":                # P(F gone) = 1; E[T_gone] solves the 2x2 system
        return 1.0
    T = np.linalg.solve(Q[:2, :2], -np.ones(2))
    return {"T": T[0], "R F": np.linalg.solve(Q[:2, :2], -np.array([0.0, 1.0]))[0], "S": 0.0}[kind]


@pytest.mark.parametrize("kind, prop", [
    ("P<=t", 'P=? [ F<=1.3 "up" ]'), ("P[t1,t2]", 'P=? [ F[0.4,1.3] "up" ]'),
    ("I=t", 'R{"up"}=? [ I=1.3 ]'), ("C<=t", 'R{"up"}=? [ C<=1.3 ]'),
    ("P U", 'P=? [ x<2 U "up" ]'), ("F gone", 'P=? [ F "gone" ]'),
    ("T", 'T=? [ F "gone" ]'), ("R F", 'R{"up"}=? [ F "gone" ]'), ("S", 'S=? [ "up" ]')])
def test_every_property_kind_is_graded_against_the_error_tol_given(kind, prop):
    """One grading rule for every property kind (:func:`ctmc.kernels.evidence.grade_bound`): with
    ``error_tol=1e-30`` no answer with a non-zero bound is a success, under the default each one is,
    and the value is the closed form either way (was: ``C<=t`` and ``I=t`` graded against the
    default ``error_tol`` only, a bound of 1e-13 a success beside ``error_tol=1e-30``)."""
    c = ctmc.prism.load(TWO_STATE).build()
    ok = ctmc.prism.check(c, prop)
    ref = _two_state_reference(kind)
    assert ok.status == ctmc.Status.SUCCESS and ok.error_bound < 1e-9
    assert ok.value == pytest.approx(ref, rel=1e-10, abs=1e-14)
    try:
        tight = ctmc.prism.check(c, prop, error_tol=1e-30)
    except ctmc.SolverError as e:       # the linear analyses refuse their own inaccurate answer
        assert not e.result.status.ok and "error_tol 1.0e-30" in str(e)
        return
    assert tight.value == pytest.approx(ref, rel=1e-10, abs=1e-14)
    if tight.error_bound > 1e-30:
        assert tight.status != ctmc.Status.SUCCESS, (tight.error_bound, tight.status)
