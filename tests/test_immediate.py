"""Immediate (zero-time) moves, eliminated exactly at build time.

Each case is checked against an answer obtained without the elimination code:
a generator reduced by hand, the same model with the immediate moves made
timed at a large rate R (the laws must converge like 1/R), or dense linear
algebra on the jump chain written out in the test. Every built chain is
checked for the invariants of a generator (non-negative off-diagonal, zero
row sums) and for the same result from both exploration strategies.
"""

import numpy as np
import scipy.linalg
import pytest

import ctmc
from ctmc.results import ModelError

STRATEGIES = ("box", "bfs")


def _check_generator(chain):
    Q = chain.Q.toarray()
    off = Q - np.diag(np.diag(Q))
    assert (off >= 0).all()
    assert np.allclose(Q.sum(axis=1), 0.0, atol=1e-12 * max(1.0, np.abs(Q).max()))


def _dense(chain, order):
    """The generator as a dense matrix, states in ``order`` (tuples of the variables)."""
    idx = {tuple(int(x) for x in row): i for i, row in enumerate(chain.states.as_array())}
    assert set(idx) == set(order), (sorted(idx), sorted(order))
    p = [idx[s] for s in order]
    return chain.Q.toarray()[np.ix_(p, p)]


# ---------------------------------------------------------------------------
# (1) polling: two queues, exhaustive service, switch-over immediate or at rate R

def polling(K1, K2, lam1, lam2, mu1, mu2, R=None):
    """Server at queue s serves it until empty, then moves to the other queue if that one is not empty.

    ``R=None``: the switch-over is immediate; otherwise it is a timed event of rate ``R``.
    """
    m = ctmc.Model("polling2")
    a, b, s = m.var("a", 0, K1), m.var("b", 0, K2), m.var("s", 0, 1)
    m.event("arrive_a", guard=a < K1, rate=lam1, update={a: a + 1})
    m.event("arrive_b", guard=b < K2, rate=lam2, update={b: b + 1})
    m.event("serve_a", guard=(s == 0) & (a > 0), rate=mu1, update={a: a - 1})
    m.event("serve_b", guard=(s == 1) & (b > 0), rate=mu2, update={b: b - 1})
    for name, guard, to in (("switch_ab", (s == 0) & (a == 0) & (b > 0), 1),
                            ("switch_ba", (s == 1) & (b == 0) & (a > 0), 0)):
        if R is None:
            m.immediate(name, guard=guard, update={s: to})
        else:
            m.event(name, guard=guard, rate=R, update={s: to})
    m.label("a_empty", a == 0)
    m.reward("queue", a + b)
    return m


INIT = {"a": 0, "b": 0, "s": 0}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_polling_tiny_against_hand_reduced_generator(strategy):
    l1, l2, m1, m2 = 1.0, 1.5, 2.0, 3.0
    chain = polling(1, 1, l1, l2, m1, m2).build(initial=INIT, strategy=strategy, progress=False)
    # tangible states (a, b, s); (0,1,0) and (1,0,1) are vanishing (the server moves on at once)
    order = [(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 1, 0), (0, 1, 1), (1, 1, 1)]
    i = {st: k for k, st in enumerate(order)}
    H = np.zeros((6, 6))
    H[i[0, 0, 0], i[1, 0, 0]] = l1
    H[i[0, 0, 0], i[0, 1, 1]] = l2          # arrival at b, then (0,1,0) -> (0,1,1)
    H[i[0, 0, 1], i[1, 0, 0]] = l1          # arrival at a, then (1,0,1) -> (1,0,0)
    H[i[0, 0, 1], i[0, 1, 1]] = l2
    H[i[1, 0, 0], i[1, 1, 0]] = l2
    H[i[1, 0, 0], i[0, 0, 0]] = m1
    H[i[1, 1, 0], i[0, 1, 1]] = m1          # a served, then (0,1,0) -> (0,1,1)
    H[i[0, 1, 1], i[1, 1, 1]] = l1
    H[i[0, 1, 1], i[0, 0, 1]] = m2
    H[i[1, 1, 1], i[1, 0, 0]] = m2          # b served, then (1,0,1) -> (1,0,0)
    np.fill_diagonal(H, -H.sum(axis=1))
    np.testing.assert_allclose(_dense(chain, order), H, rtol=1e-15, atol=0)
    assert chain.build_info["vanishing"] == 2
    assert chain.build_info["n_states"] == 6
    _check_generator(chain)


def _law_by_state(chain, pi):
    return {tuple(int(x) for x in row): p for row, p in zip(chain.states.as_array(), pi)}


def test_polling_rate_R_converges_to_immediate_like_one_over_R():
    args = (3, 2, 0.7, 0.9, 1.6, 2.1)
    imm = polling(*args).build(initial=INIT, progress=False)
    pi = imm.stationary(method="lu").pi
    law = _law_by_state(imm, pi)
    flow = pi @ imm.event_rate("switch_ab")
    gaps, flow_gaps = [], []
    for R in (1e4, 1e6, 1e8):
        timed = polling(*args, R=R).build(initial=INIT, progress=False)
        piR = timed.stationary(method="lu").pi
        lawR = _law_by_state(timed, piR)
        assert set(law) < set(lawR)          # the timed chain also has the "vanishing" states
        gaps.append(sum(abs(lawR.get(st, 0.0) - law.get(st, 0.0)) for st in lawR))
        flow_gaps.append(abs(piR @ timed.event_rate("switch_ab") - flow))
    # first order in 1/R: each factor 100 in R divides the gap by about 100
    assert 30 < gaps[0] / gaps[1] < 300, gaps
    assert 30 < gaps[1] / gaps[2] < 300, gaps
    assert gaps[2] < 1e-6
    assert flow > 0.05 and flow_gaps[2] < 1e-6 * flow and flow_gaps[0] / flow_gaps[1] > 30


def test_polling_both_empty_is_a_timeless_trap():
    # the server switches whenever its queue is empty: with both queues empty it would switch forever
    m = ctmc.Model("pingpong")
    a, b, s = m.var("a", 0, 1), m.var("b", 0, 1), m.var("s", 0, 1)
    m.event("arrive_a", guard=a < 1, rate=1.0, update={a: 1})
    m.event("arrive_b", guard=b < 1, rate=1.0, update={b: 1})
    m.event("serve_a", guard=(s == 0) & (a > 0), rate=2.0, update={a: 0})
    m.event("serve_b", guard=(s == 1) & (b > 0), rate=2.0, update={b: 0})
    m.immediate("switch_ab", guard=(s == 0) & (a == 0), update={s: 1})
    m.immediate("switch_ba", guard=(s == 1) & (b == 0), update={s: 0})
    for strategy in STRATEGIES:
        with pytest.raises(ModelError, match=r"timeless trap.*\(a=0, b=0, s=[01]\)"):
            m.build(initial={"a": 1, "b": 1, "s": 0}, strategy=strategy, progress=False)


def test_self_loop_only_is_a_timeless_trap():
    m = ctmc.Model("stuck")
    x = m.var("x", 0, 2)
    m.event("go", guard=x == 0, rate=1.0, update={x: 1})
    m.event("back", guard=x == 2, rate=1.0, update={x: 0})
    m.immediate("spin", guard=x == 1, update={x: x})
    with pytest.raises(ModelError, match=r"timeless trap.*\(x=1\)"):
        m.build(initial={"x": 0}, progress=False)


# ---------------------------------------------------------------------------
# (2) a branching immediate choice with state-dependent weights

def dispatcher(K=2, lam=1.3, mu1=0.8, mu2=1.1):
    """Arrivals wait in a dispatch state d = 1, sent at once to queue 1 or 2 with weights 1 + n2, 2 + n1."""
    m = ctmc.Model("dispatch")
    n1, n2, d = m.var("n1", 0, K), m.var("n2", 0, K), m.var("d", 0, 1)
    m.event("arrival", guard=d == 0, rate=lam, update={d: 1})
    m.immediate("to1", guard=(d == 1) & (n1 < K), weight=1 + n2, update={n1: n1 + 1, d: 0})
    m.immediate("to2", guard=(d == 1) & (n2 < K), weight=lambda env: 2.0 + env["n1"], update={n2: n2 + 1, d: 0})
    m.immediate("drop", guard=(d == 1) & (n1 == K) & (n2 == K), update={d: 0})
    m.event("serve1", guard=n1 > 0, rate=mu1, update={n1: n1 - 1})
    m.event("serve2", guard=n2 > 0, rate=mu2, update={n2: n2 - 1})
    return m


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_state_dependent_weights_against_hand_generator(strategy):
    K, lam, mu1, mu2 = 2, 1.3, 0.8, 1.1
    chain = dispatcher(K, lam, mu1, mu2).build(initial={"n1": 0, "n2": 0, "d": 0}, strategy=strategy,
                                               progress=False)
    order = [(i, j, 0) for i in range(K + 1) for j in range(K + 1)]
    k = {st: t for t, st in enumerate(order)}
    H = np.zeros((len(order), len(order)))
    to1, to2, drop = np.zeros(len(order)), np.zeros(len(order)), np.zeros(len(order))
    for (i, j, _), t in k.items():
        w1 = (1 + j) if i < K else 0.0
        w2 = (2 + i) if j < K else 0.0
        if w1 + w2:
            if w1:
                H[t, k[i + 1, j, 0]] += lam * w1 / (w1 + w2)
            if w2:
                H[t, k[i, j + 1, 0]] += lam * w2 / (w1 + w2)
            to1[t], to2[t] = lam * w1 / (w1 + w2), lam * w2 / (w1 + w2)
        else:
            drop[t] = lam                      # arrival dropped: i -> v -> i, no transition in Q
        if i:
            H[t, k[i - 1, j, 0]] += mu1
        if j:
            H[t, k[i, j - 1, 0]] += mu2
    np.fill_diagonal(H, -H.sum(axis=1))
    np.testing.assert_allclose(_dense(chain, order), H, rtol=1e-14, atol=0)
    _check_generator(chain)
    assert chain.build_info["vanishing"] == (K + 1) ** 2
    # event_rate: timed events at their rate (the dropped arrival counts), immediate moves as flows
    p = [chain.index(n1=i, n2=j, d=0) for (i, j, _) in order]
    np.testing.assert_allclose(chain.event_rate("arrival")[p], lam)
    np.testing.assert_allclose(chain.event_rate("to1")[p], to1, rtol=1e-14)
    np.testing.assert_allclose(chain.event_rate("to2")[p], to2, rtol=1e-14)
    np.testing.assert_allclose(chain.event_rate("drop")[p], drop, rtol=1e-14)
    # conservation: every arrival leaves the dispatch state by exactly one move
    pi = chain.stationary().pi
    thr = {e: pi @ chain.event_rate(e) for e in ("arrival", "to1", "to2", "drop", "serve1", "serve2")}
    assert thr["to1"] + thr["to2"] + thr["drop"] == pytest.approx(thr["arrival"], rel=1e-12)
    assert thr["to1"] == pytest.approx(thr["serve1"], rel=1e-10)
    assert thr["to2"] == pytest.approx(thr["serve2"], rel=1e-10)


# ---------------------------------------------------------------------------
# (3) chains of immediate moves and a vanishing cycle with an exit

@pytest.mark.parametrize("strategy", STRATEGIES)
def test_chain_of_immediate_moves(strategy):
    m = ctmc.Model("relay")
    x = m.var("x", 0, 3)
    m.event("start", guard=x == 0, rate=2.0, update={x: 1})
    m.immediate("hop1", guard=x == 1, update={x: 2})
    m.immediate("hop2", guard=x == 2, weight=5.0, update={x: 3})
    m.event("back", guard=x == 3, rate=0.5, update={x: 0})
    chain = m.build(initial={"x": 0}, strategy=strategy, progress=False)
    np.testing.assert_array_equal(chain.states["x"], [0, 3])
    np.testing.assert_allclose(chain.Q.toarray(), [[-2.0, 2.0], [0.5, -0.5]], rtol=1e-15)
    assert chain.build_info["vanishing"] == 2
    np.testing.assert_allclose(chain.event_rate("hop1"), [2.0, 0.0])
    np.testing.assert_allclose(chain.event_rate("hop2"), [2.0, 0.0])
    np.testing.assert_allclose(chain.event_rate("back"), [0.0, 0.5])


def cycle_model():
    """x = 0 tangible; 1 (a) and 2 (b) vanishing with a cycle a <-> b and a self-loop at a; 3, 4 tangible."""
    m = ctmc.Model("cycle")
    x = m.var("x", 0, 4)
    m.event("enter", guard=x == 0, rate=3.0, update={x: 1})
    m.event("back3", guard=x == 3, rate=1.0, update={x: 0})
    m.event("back4", guard=x == 4, rate=5.0, update={x: 0})
    m.immediate("a_stay", guard=x == 1, weight=2.0, update={x: x})
    m.immediate("a_to_b", guard=x == 1, weight=1.0, update={x: 2})
    m.immediate("a_out", guard=x == 1, weight=1.0, update={x: 3})
    m.immediate("b_to_a", guard=x == 2, weight=2.0, update={x: 1})
    m.immediate("b_out", guard=x == 2, weight=1.0, update={x: 4})
    return m


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_vanishing_cycle_with_exit_against_hand_computation(strategy):
    chain = cycle_model().build(initial={"x": 0}, strategy=strategy, progress=False)
    np.testing.assert_array_equal(chain.states["x"], [0, 3, 4])
    # from a: X_a3 = 1/2 + 1/2 X_b3, X_b3 = 2/3 X_a3 (the self-loop only repeats the draw): X_a = (3/4, 1/4)
    Q = np.array([[-3.0, 9 / 4, 3 / 4], [1.0, -1.0, 0.0], [5.0, 0.0, -5.0]])
    np.testing.assert_allclose(chain.Q.toarray(), Q, rtol=1e-14)
    # expected firings per entry into a: arrivals at a 3/2, draws at a 3, at b 3/4
    firings = {"a_stay": 3 / 2, "a_to_b": 3 / 4, "a_out": 3 / 4, "b_to_a": 1 / 2, "b_out": 1 / 4}
    for name, f in firings.items():
        np.testing.assert_allclose(chain.event_rate(name), [3.0 * f, 0.0, 0.0], rtol=1e-14, err_msg=name)


def random_vanishing_model(seed, n=60, nv=40, moves=3):
    """States x < n - nv tangible, the rest vanishing with random immediate moves (cycles likely)."""
    rng = np.random.default_rng(seed)
    nt = n - nv
    succ = rng.integers(0, n, size=(moves, n))
    weight = rng.uniform(0.1, 2.0, size=(moves, n))
    exit_to = rng.integers(0, nt, size=n)              # a small-weight way out from every vanishing state
    tsucc = rng.integers(0, n, size=(2, n))
    trate = rng.uniform(0.5, 3.0, size=(2, n))
    m = ctmc.Model(f"random{seed}")
    x = m.var("x", 0, n - 1)
    for k in range(2):
        m.event(f"t{k}", guard=x < nt, rate=lambda env, k=k: trate[k][env["x"]],
                update={x: lambda env, k=k: tsucc[k][env["x"]]})
    for k in range(moves):
        m.immediate(f"i{k}", guard=x >= nt, weight=lambda env, k=k: weight[k][env["x"]],
                    update={x: lambda env, k=k: succ[k][env["x"]]})
    m.immediate("exit", guard=x >= nt, weight=0.05, update={x: lambda env: exit_to[env["x"]]})
    # the reference: dense jump chain, X = (I - P_VV)^-1 P_VT, Q = R_TT + R_TV X
    R = np.zeros((n, n))
    for k in range(2):
        np.add.at(R, (np.arange(nt), tsucc[k][:nt]), trate[k][:nt])
    W = np.zeros((n, n))
    for k in range(moves):
        np.add.at(W, (np.arange(nt, n), succ[k][nt:]), weight[k][nt:])
    np.add.at(W, (np.arange(nt, n), exit_to[nt:]), 0.05)
    P = W[nt:] / W[nt:].sum(axis=1, keepdims=True)       # self-loops kept: (I - P) handles them
    X = np.linalg.solve(np.eye(nv) - P[:, nt:], P[:, :nt])
    Qt = R[:nt, :nt] + R[:nt, nt:] @ X
    np.fill_diagonal(Qt, 0.0)
    np.fill_diagonal(Qt, -Qt.sum(axis=1))
    return m, Qt, nt


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_vanishing_graphs_against_dense_solve(seed):
    m, Qt, nt = random_vanishing_model(seed)
    chains = [m.build(initial={"x": 0}, strategy=s, progress=False) for s in STRATEGIES]
    for chain in chains:
        reach = chain.states["x"]
        assert (reach < nt).all()
        np.testing.assert_allclose(chain.Q.toarray(), Qt[np.ix_(reach, reach)], rtol=1e-10, atol=1e-12)
        _check_generator(chain)
    assert (chains[0].Q != chains[1].Q).nnz == 0 or np.allclose(chains[0].Q.toarray(), chains[1].Q.toarray())


def test_long_acyclic_drain_is_exact():
    # a vanishing chain of depth 200: x drains to 0 one immediate step at a time, then is tangible
    m = ctmc.Model("drain")
    x, f = m.var("x", 0, 200), m.var("f", 0, 1)
    m.event("fill", guard=(f == 0) & (x == 0), rate=1.0, update={x: 200, f: 1})
    m.immediate("drain", guard=(f == 1) & (x > 0), update={x: x - 1})
    m.immediate("done", guard=(f == 1) & (x == 0), update={f: 0})
    chain = m.build(initial={"x": 0, "f": 0}, progress=False)
    assert chain.n_states == 1 and chain.build_info["vanishing"] == 201
    np.testing.assert_allclose(chain.event_rate("drain"), [200.0])
    np.testing.assert_allclose(chain.event_rate("done"), [1.0])


# ---------------------------------------------------------------------------
# (5) a vanishing initial state

def test_initial_vanishing_deterministic():
    chain = polling(1, 1, 1.0, 1.0, 2.0, 2.0).build(initial={"a": 0, "b": 1, "s": 0}, progress=False)
    np.testing.assert_array_equal(chain.initial, [chain.index(a=0, b=1, s=1)])
    assert "initial_law" not in chain.build_info


def test_initial_vanishing_random_records_the_law():
    with pytest.warns(UserWarning, match="initial_law"):
        chain = cycle_model().build(initial={"x": 1}, progress=False)
    np.testing.assert_array_equal(chain.states["x"], [0, 3, 4])
    np.testing.assert_array_equal(chain.initial, [1, 2])
    np.testing.assert_allclose(chain.build_info["initial_law"], [0.0, 0.75, 0.25], rtol=1e-14)
    np.testing.assert_allclose(chain.initial_law, [0.0, 0.75, 0.25], rtol=1e-14)
    # several initial states: one row each, in code order, and the law is uniform over them
    with pytest.warns(UserWarning):
        chain = cycle_model().build(initial=[{"x": 2}, {"x": 0}], progress=False)
    np.testing.assert_allclose(chain.build_info["initial_rows"].toarray(), [[1, 0, 0], [0, 0.5, 0.5]],
                               rtol=1e-14)
    np.testing.assert_allclose(chain.initial_law, [0.5, 0.25, 0.25], rtol=1e-14)
    np.testing.assert_array_equal(chain.initial, [0, 1, 2])


def test_one_liners_start_from_the_law_a_vanishing_initial_state_leaves():
    """Review finding: with several initial states the one-liners started uniform on the union."""
    m = ctmc.Model("v")
    x = m.var("x", 0, 3)
    m.event("up", guard=x < 2, rate=1.0, update={x: x + 1})
    m.event("down", guard=(x > 0) & (x < 3), rate=2.0, update={x: x - 1})
    m.immediate("to1", guard=x == 3, weight=9.0, update={x: 1})
    m.immediate("to2", guard=x == 3, weight=1.0, update={x: 2})
    with pytest.warns(UserWarning, match="initial_law"):
        chain = m.build(initial=[{"x": 3}, {"x": 0}])
    p0 = np.array([0.5, 0.45, 0.05])                      # half from x=0, half split 9:1
    np.testing.assert_allclose(chain.initial_law, p0, rtol=1e-14)
    Qa = chain.Q.toarray()
    Qa[0] = 0.0                                           # x = 0 made absorbing
    ref = float(p0 @ scipy.linalg.expm(Qa * 0.7)[:, 0])
    assert float(chain.prob_within(x == 0, 0.7).value) == pytest.approx(ref, rel=1e-12)


# ---------------------------------------------------------------------------
# (6) strategies, state_space, generator_rows; (7) labels and rewards

@pytest.mark.parametrize("make", [lambda: polling(4, 3, 0.7, 0.9, 1.6, 2.1), dispatcher, cycle_model])
def test_box_and_bfs_give_the_same_chain(make):
    m = make()
    init = {v.name: 0 for v in m.variables}
    box, bfs = (m.build(initial=init, strategy=s, progress=False) for s in STRATEGIES)
    assert box.build_info["strategy"] == "box" and bfs.build_info["strategy"] == "bfs"
    np.testing.assert_array_equal(box.states.as_array(), bfs.states.as_array())
    np.testing.assert_allclose(box.Q.toarray(), bfs.Q.toarray(), rtol=1e-15, atol=0)
    assert box.build_info["vanishing"] == bfs.build_info["vanishing"] > 0
    np.testing.assert_array_equal(m.state_space(initial=init).as_array(), box.states.as_array())


def test_generator_rows_refuses_immediate_moves():
    m = cycle_model()
    table = m.state_space(initial={"x": 0})
    with pytest.raises(ModelError, match="immediate moves"):
        m.generator_rows(table, 0, len(table))


def test_labels_and_rewards_are_restricted_to_tangible_states():
    chain = polling(2, 2, 1.0, 1.0, 2.0, 2.0).build(initial=INIT, progress=False)
    S = chain.states
    assert chain.build_info["n_explored"] == chain.n_states + chain.build_info["vanishing"]
    np.testing.assert_array_equal(chain.labels["a_empty"], S["a"] == 0)
    np.testing.assert_array_equal(chain.rewards["queue"], S["a"] + S["b"])
    # no vanishing state left: the server never idles at an empty queue while the other has work
    assert not (((S["s"] == 0) & (S["a"] == 0) & (S["b"] > 0)) | ((S["s"] == 1) & (S["b"] == 0) & (S["a"] > 0))).any()


def test_timed_event_rate_is_zero_in_a_vanishing_state():
    m = polling(1, 1, 1.0, 1.0, 2.0, 2.0)
    env = {"a": np.array([0, 0]), "b": np.array([1, 0]), "s": np.array([0, 0])}    # (0,1,0) is vanishing
    np.testing.assert_array_equal(m.event_rate("arrive_a", env), [0.0, 1.0])


def test_models_without_immediate_moves_are_unchanged():
    m = polling(3, 3, 1.0, 1.0, 2.0, 2.0, R=7.0)
    chain = m.build(initial=INIT, progress=False)
    assert "vanishing" not in chain.build_info and m.immediates == ()


# ---------------------------------------------------------------------------
# (8) bad input

def test_bad_input_names_the_move():
    m = ctmc.Model("bad")
    x = m.var("x", 0, 3)
    m.event("up", guard=x < 3, rate=1.0, update={x: x + 1})
    with pytest.raises(ModelError, match="'neg'.*weight"):
        m.immediate("neg", weight=-1.0, update={x: 0})
    with pytest.raises(ModelError, match="'ghost'.*unknown variable 'y'"):
        m.immediate("ghost", update={"y": 0})
    with pytest.raises(ModelError, match="'up'.*already declared"):
        m.immediate("up", update={x: 0})
    with pytest.raises(ModelError, match="'up'.*already declared"):
        m.event("up", rate=1.0, update={x: 0})
    m.immediate("reset", guard=x == 3, weight=2.0 - x, update={x: 0})     # -1 in x = 3
    for strategy in STRATEGIES:
        with pytest.raises(ModelError, match=r"immediate move 'reset': invalid weight -1\.0 in state \(x=3\)"):
            m.build(initial={"x": 0}, strategy=strategy, progress=False)


def test_out_of_bounds_immediate_update_names_the_move():
    m = ctmc.Model("oob")
    x = m.var("x", 0, 3)
    m.event("up", guard=x < 3, rate=1.0, update={x: x + 1})
    m.immediate("jump", guard=x == 2, update={x: x + 5})
    for strategy in STRATEGIES:
        with pytest.raises(ModelError, match=r"immediate move 'jump': update leaves the declared bounds"):
            m.build(initial={"x": 0}, strategy=strategy, progress=False)


def test_unknown_event_name_lists_immediate_moves():
    chain = cycle_model().build(initial={"x": 0}, progress=False)
    with pytest.raises(ValueError, match="a_stay"):
        chain.event_rate("nope")


def test_many_vanishing_cycles_in_batches(monkeypatch):
    """2-cycles of vanishing states (over 2048 rows: several LU batches, columns in chunks) and chains into them."""
    import ctmc.immediate as cm
    monkeypatch.setattr(cm, "_DENSE_RHS", 5000)          # a few columns per solve
    rng = np.random.default_rng(7)
    nt, npairs, nextra = 60, 1100, 200
    nv = 2 * npairs + nextra
    n = nt + nv
    v = np.arange(nt, nt + 2 * npairs)
    succ0 = np.zeros(n, np.int64)
    succ0[v] = np.where((v - nt) % 2 == 0, v + 1, v - 1)            # partner in the pair
    ex = np.arange(nt + 2 * npairs, n)                                  # extra states: into a pair or down a chain
    succ0[ex] = np.where(rng.random(ex.size) < 0.5, rng.integers(nt, nt + 2 * npairs, ex.size),
                         np.maximum(ex - 1 - rng.integers(0, 5, ex.size), nt + 2 * npairs))
    succ0[nt + 2 * npairs] = 0
    succ1 = np.r_[np.zeros(nt, np.int64), rng.integers(0, nt, nv)]
    w0, w1 = rng.uniform(0.5, 2, n), rng.uniform(0.01, 0.5, n)
    m = ctmc.Model("pairs")
    x = m.var("x", 0, n - 1)
    m.event("next", guard=x < nt, rate=1.0, update={x: (x + 1) % nt})
    m.event("jump", guard=x < nt, rate=2.0, update={x: nt + (x * 37) % nv})
    m.immediate("i0", guard=x >= nt, weight=lambda e: w0[e["x"]], update={x: lambda e: succ0[e["x"]]})
    m.immediate("i1", guard=x >= nt, weight=lambda e: w1[e["x"]], update={x: lambda e: succ1[e["x"]]})
    with pytest.warns(UserWarning, match="initial_law"):
        chain = m.build(initial=[{"x": i} for i in range(n)], progress=False)    # every state explored
    assert chain.build_info["vanishing"] == nv and chain.n_states == nt
    # reference: dense jump chain
    W = np.zeros((nv, n))
    np.add.at(W, (np.arange(nv), succ0[nt:]), w0[nt:])
    np.add.at(W, (np.arange(nv), succ1[nt:]), w1[nt:])
    P = W / W.sum(axis=1, keepdims=True)
    X = np.linalg.solve(np.eye(nv) - P[:, nt:], P[:, :nt])
    Q = np.zeros((nt, nt))
    np.add.at(Q, (np.arange(nt), (np.arange(nt) + 1) % nt), 1.0)
    Q += 2.0 * X[(np.arange(nt) * 37) % nv]
    np.fill_diagonal(Q, 0.0)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    np.testing.assert_allclose(chain.Q.toarray(), Q, rtol=1e-10, atol=1e-13)
    # initial law of the given vanishing states: their absorption probabilities
    np.testing.assert_allclose(chain.build_info["initial_rows"][nt:].toarray(), X, rtol=1e-10, atol=1e-13)


def test_distributed_build_refuses_immediate_moves_before_exploring():
    from ctmc.backends import petsc
    if not petsc.available():
        pytest.skip("petsc4py not installed")
    from ctmc.backends.petsc_backend import DistributedChain
    m = ctmc.Model("imm")
    x, s = m.var("x", 0, 3), m.var("s", 0, 1)
    m.event("up", guard=x < 3, rate=1.0, update={x: x + 1})
    m.event("down", guard=x > 0, rate=1.0, update={x: x - 1})
    m.immediate("flip", guard=(s == 0) & (x == 3), update={s: 1})
    m.event("back", guard=s == 1, rate=1.0, update={s: 0})
    with pytest.raises(ctmc.ModelError, match="immediate moves"):
        DistributedChain.from_model(m, {"x": 0, "s": 0})
