"""Multi-server phase-type stations (ctmc.ph.add_service(servers=c), ctmc.ph_servers) and
throughput over several events, against independent answers.

* M/M/c/K: p_n proportional to a^n / n! (n <= c) and a^n / (c! c^(n - c)) (n > c), a = lam/mu,
  in exact Fractions; the Erlang loss (B) and delay (C) formulas.
* M/G/c/c: the blocking probability is Erlang B for any service law of the same mean
  (insensitivity), so the E_k, H2 and Coxian stations must give it too.
* M/PH/c/K: the unlumped chain of c distinguishable servers, each with its own phase (0 idle),
  built here by hand (phase moves as a Kronecker sum, arrivals and completions by loops): its
  generator Q satisfies Q V = V Q' with V the 0/1 map from (n, j_1..j_c) to (n, x_1..x_m) and Q'
  ctmc's generator (strong lumpability, entry by entry), and its stationary law, lumped, is
  ctmc's.
* state counts: compositions counted by brute force.
* one server: the counter representation at c = 1 gives the old single-server generator to
  the bit.
"""
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

import ctmc
from ctmc import ph
from ctmc import ph_servers


def station(law, lam, c, K, *, name="srv", **kw):
    """An M/PH/c/K queue: ``(chain, station, model)``."""
    m = ctmc.Model("mphck")
    n = m.var("n", 0, K)
    st = ph.add_service(m, law, n, name=name, servers=c, **kw)
    st.arrival("arrive", rate=lam)
    return m.build(initial={**st.empty}, progress=False), st, m


def law_of_n(chain, K):
    n = chain.states["n"]
    pi = chain.stationary().pi
    return np.array([pi[n == k].sum() for k in range(K + 1)])


def mmck_exact(lam, mu, c, K):
    """Exact M/M/c/K law of the number in system (Fractions)."""
    a = Fraction(lam) / Fraction(mu)
    w = [a ** k / math.factorial(k) if k <= c else a ** k / (math.factorial(c) * c ** (k - c))
         for k in range(K + 1)]
    tot = sum(w)
    return [x / tot for x in w]


def erlang_b(a, c):
    a = Fraction(a)
    return (a ** c / math.factorial(c)) / sum(a ** k / math.factorial(k) for k in range(c + 1))


def erlang_c(a, c):
    a = Fraction(a)
    top = a ** c / math.factorial(c) * c / (c - a)
    return top / (sum(a ** k / math.factorial(k) for k in range(c)) + top)


# ---------------------------------------------------------------------------
# closed forms
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("c, K, lam, mu", [(2, 5, 1.5, 1.0), (3, 3, 2.0, 1.0), (4, 10, 3.0, 1.25),
                                           (5, 12, 6.5, 1.0)])
def test_mmck_matches_the_closed_form(c, K, lam, mu):
    chain, st, _ = station(ph.exponential(mu), lam, c, K)
    got = law_of_n(chain, K)
    want = np.array([float(p) for p in mmck_exact(lam, mu, c, K)])
    assert np.max(np.abs(got - want) / want) < 1e-12
    # the counter of the one phase is the number of busy servers
    assert np.array_equal(chain.states["srv_busy_1"], np.minimum(chain.states["n"], c))


@pytest.mark.parametrize("c, lam", [(1, 0.7), (2, 1.5), (4, 3.0), (6, 7.0)])
@pytest.mark.parametrize("law", [ph.exponential(mean=1.0), ph.erlang(3, mean=1.0), ph.fit(1.0, 4.0),
                                 ph.fit_coxian2(1.0, 0.8)], ids=["M", "E3", "H2", "Cox2"])
def test_erlang_loss_is_insensitive_to_the_service_law(law, c, lam):
    chain, _, _ = station(law, lam, c, c)
    got = law_of_n(chain, c)[c]
    want = float(erlang_b(Fraction(lam) * Fraction(law.mean), c))
    assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("c, lam", [(2, 1.2), (3, 1.8), (5, 3.5)])
def test_erlang_delay_formula_for_a_long_buffer(c, lam):
    K = 220                                    # the truncated mass (lam / c)^(K - c) is below 1e-30
    chain, _, _ = station(ph.exponential(1.0), lam, c, K)
    p = law_of_n(chain, K)
    C = erlang_c(Fraction(lam), c)
    assert p[c:].sum() == pytest.approx(float(C), rel=1e-12)
    rho = Fraction(lam) / c
    Lq = float(C * rho / (1 - rho))
    assert float(p @ np.maximum(np.arange(K + 1) - c, 0)) == pytest.approx(Lq, rel=1e-11)


# ---------------------------------------------------------------------------
# the unlumped chain of distinguishable servers
# ---------------------------------------------------------------------------
def unlumped(law, lam, c, K):
    """Generator (CSR) and states ``(n, j_1..j_c)`` of the chain with distinguishable servers; a job
    that finds servers idle goes to the idle server of lowest index."""
    m = law.n_phases
    S = np.asarray(law.S_dense, dtype=float)
    alpha, s = np.asarray(law.alpha), -S.sum(axis=1)
    base = m + 1
    A = np.zeros((base, base))                  # one server's phase moves, 0 = idle
    A[1:, 1:] = S - np.diag(np.diag(S))
    moves = sp.csr_matrix((base ** c, base ** c))
    for k in range(c):                          # Kronecker sum over the servers
        moves = moves + sp.kron(sp.kron(sp.identity(base ** k), sp.csr_matrix(A)),
                                sp.identity(base ** (c - k - 1)))
    Q = sp.lil_matrix(sp.kron(sp.identity(K + 1), moves))
    states = list(itertools.product(range(K + 1), *([range(base)] * c)))

    def index(n, js):
        return n * base ** c + sum(j * base ** (c - 1 - k) for k, j in enumerate(js))

    for n, *js in states:
        src = index(n, js)
        if n < K:
            idle = [k for k, j in enumerate(js) if j == 0]
            if n < c and idle:
                for ph_k in range(m):
                    if alpha[ph_k] > 0:
                        new = list(js)
                        new[idle[0]] = ph_k + 1
                        Q[src, index(n + 1, new)] += lam * alpha[ph_k]
            elif n >= c:
                Q[src, index(n + 1, js)] += lam
        for k, j in enumerate(js):
            if j == 0 or s[j - 1] <= 0:
                continue
            if n > c:                           # the server takes the first waiting job
                for ph_k in range(m):
                    new = list(js)
                    new[k] = ph_k + 1
                    Q[src, index(n - 1, new)] += s[j - 1] * alpha[ph_k]
            else:
                new = list(js)
                new[k] = 0
                Q[src, index(n - 1, new)] += s[j - 1]
    Q = Q.tocsr()
    Q = Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())
    reach = np.sort(breadth_first_order(Q, index(0, [0] * c), return_predecessors=False))
    return Q[reach][:, reach].tocsr(), [states[i] for i in reach]


def _random_law(seed, m):
    rng = np.random.default_rng(seed)
    S = rng.uniform(0.2, 1.0, (m, m))
    np.fill_diagonal(S, 0.0)
    np.fill_diagonal(S, -(S.sum(axis=1) + rng.uniform(0.5, 2.0, m)))
    a = rng.uniform(0.2, 1.0, m)
    return ph.phase_type(a / a.sum(), S)


UNLUMPED = [("E3", ph.erlang(3, mean=1.0), 2.0, 3, 6), ("H2", ph.fit(1.0, 4.0), 1.4, 2, 5),
            ("Cox2", ph.fit_coxian2(0.8, 0.7), 2.5, 3, 5), ("PH3", _random_law(7, 3), 1.1, 2, 4),
            ("E2,3", ph.fit(1.0, 0.4), 1.7, 2, 6)]


@pytest.mark.parametrize("law, lam, c, K", [u[1:] for u in UNLUMPED], ids=[u[0] for u in UNLUMPED])
def test_the_counters_are_the_exact_lumping_of_distinguishable_servers(law, lam, c, K):
    chain, st, _ = station(law, lam, c, K)
    Qu, ustates = unlumped(law, lam, c, K)
    m = law.n_phases
    cols = np.column_stack([chain.states["n"]] + [chain.states[v.name] for v in st.busy])
    where = {tuple(int(v) for v in row): i for i, row in enumerate(cols)}
    lumped = [(n, *[sum(1 for j in js if j == i) for i in range(1, m + 1)]) for n, *js in ustates]
    assert set(lumped) == set(where)            # every lumped state is reached, and no other
    V = sp.csr_matrix((np.ones(len(lumped)), ([*range(len(lumped))], [where[x] for x in lumped])),
                      shape=(len(lumped), chain.n_states))
    QV, VQ = (Qu @ V).toarray(), (V @ chain.Q).toarray()
    scale = np.abs(VQ).max()
    assert np.max(np.abs(QV - VQ)) <= 1e-13 * scale          # Q V = V Q': strong lumpability
    # the stationary laws: the unlumped one by a dense solve, then lumped
    A = Qu.toarray().T.copy()
    A[-1, :] = 1.0
    b = np.zeros(A.shape[0])
    b[-1] = 1.0
    pu = np.linalg.solve(A, b)
    assert np.max(np.abs(pu @ V - chain.stationary().pi)) < 1e-12


# ---------------------------------------------------------------------------
# one server, state counts
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("law", [ph.fit(1.0, 4.0), ph.erlang(4), ph.fit_coxian2(1.0, 0.7), _random_law(3, 3)],
                         ids=["H2", "E4", "Cox2", "PH3"])
def test_counters_at_one_server_give_the_single_server_generator_to_the_bit(law):
    K, lam = 7, 0.9
    one, st1, m1 = station(law, lam, 1, K)
    md = ctmc.Model("default")                # servers left out: the same events and generator
    sd = ph.add_service(md, law, md.var("n", 0, K), name="srv")
    sd.arrival("arrive", rate=lam)
    dflt = md.build(initial=sd.empty, progress=False)
    assert [e.name for e in md.events] == [e.name for e in m1.events] and "srv_phase" in sd.empty
    assert (dflt.Q != one.Q).nnz == 0 and np.array_equal(dflt.Q.data, one.Q.data)
    m = ctmc.Model("counters")
    n = m.var("n", 0, K)
    st = ph_servers.add_servers(m, law, n, 1, name="srv", guard=True, speed=1.0, update=None, to=None)
    st.arrival("arrive", rate=lam)
    cnt = m.build(initial=st.empty, progress=False)
    # the state (n, j) of one server is (n, x) with x_i = [j == i]
    j = one.states["srv_phase"]
    x = np.column_stack([cnt.states[v.name] for v in st.busy])
    key_one = [(int(a), int(b)) for a, b in zip(one.states["n"], j)]
    key_cnt = [(int(a), int(np.argmax(r)) + 1 if r.any() else 0) for a, r in zip(cnt.states["n"], x)]
    perm = [key_cnt.index(k) for k in key_one]
    Q1, Qc = one.Q.toarray(), cnt.Q.toarray()[np.ix_(perm, perm)]
    off = ~np.eye(Q1.shape[0], dtype=bool)
    assert np.array_equal(Q1[off], Qc[off])                  # every rate, bit for bit
    # a diagonal is minus a sum of the same rates, possibly added in another order: a few ulps
    assert np.max(np.abs(np.diag(Q1) - np.diag(Qc)) / np.abs(np.diag(Q1))) <= 4 * np.finfo(float).eps


def _compositions(total, parts):
    return sum(1 for x in itertools.product(range(total + 1), repeat=parts) if sum(x) == total)


@pytest.mark.parametrize("law, c, K", [(ph.exponential(1.0), 3, 7), (ph.erlang(3), 3, 6),
                                       (ph.fit(1.0, 4.0), 4, 9),
                                       (ph.erlang(5), 2, 2), (_random_law(1, 4), 3, 5)])
def test_state_count_is_the_number_of_compositions(law, c, K):
    chain, _, _ = station(law, 1.0, c, K)
    m = law.n_phases
    brute = sum(_compositions(min(n, c), m) for n in range(K + 1))
    assert chain.n_states == brute == ph_servers.station_states(c, m, K)
    assert brute == sum(math.comb(min(n, c) + m - 1, m - 1) for n in range(K + 1))


# ---------------------------------------------------------------------------
# throughput of several events
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("c, K, lam, mu", [(2, 5, 1.5, 1.0), (3, 8, 4.0, 1.0)])
def test_throughput_of_several_events(c, K, lam, mu):
    chain, st, _ = station(ph.erlang(2, mean=1.0 / mu), lam, c, K)
    pK = law_of_n(chain, K)[K]
    names = list(st.completion_events)
    assert len(names) >= 2
    total = chain.throughput(names)
    singles = [float(chain.throughput(e)) for e in names]
    assert float(total) == pytest.approx(sum(singles), rel=1e-13)
    assert float(total) == pytest.approx(lam * (1 - pK), rel=1e-12)      # what enters leaves
    arrivals = chain.throughput(("arrive", "arrive_srv_start_1"))
    assert float(arrivals) == pytest.approx(lam * (1 - pK), rel=1e-12)
    assert float(chain.throughput(set(names))) == float(ctmc.measures.throughput(chain, tuple(sorted(names))))
    assert total.status == ctmc.Status.SUCCESS and 0 <= total.error_bound < 1e-9
    assert total.error_bound == pytest.approx(total.info["law"].error_bound * max(
        sum(chain.event_rate(e) for e in names)), rel=1e-12)
    assert names[0] in total.message


def test_throughput_of_mmck_against_the_closed_form():
    c, K, lam = 3, 6, 2.5
    chain, st, _ = station(ph.exponential(1.0), lam, c, K)
    exact = lam * (1 - mmck_exact(lam, 1.0, c, K)[K])
    assert float(chain.throughput(st.completion_events)) == pytest.approx(float(exact), rel=1e-12)


@pytest.mark.parametrize("event, match", [(["arrive", "nope", "gone"],
                                           r"event: no events \['nope', 'gone'\]"),
                                          ([], "non-empty"), (["arrive", "arrive"], "more than once"),
                                          (["arrive", 3], "strings"), (7, "event name"),
                                          ("nope", "no event 'nope'")])
def test_throughput_refuses_bad_event_lists_naming_them(event, match):
    chain, _, _ = station(ph.exponential(1.0), 1.0, 2, 3)
    with pytest.raises(ValueError, match=match):
        chain.throughput(event)


# ---------------------------------------------------------------------------
# networks, guard and speed
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("c1, c2", [(2, 3), (1, 2), (3, 1)])
def test_tandem_of_multi_server_stations_conserves_jobs(c1, c2):
    m = ctmc.Model("tandem")
    n1, n2 = m.var("n1", 0, 5), m.var("n2", 0, 4)
    s2 = ph.add_service(m, ph.erlang(2, mean=0.9), n2, name="s2", servers=c2)
    s1 = ph.add_service(m, ph.fit(0.8, 2.0), n1, name="s1", servers=c1, to=s2)
    s1.arrival("arrive", rate=2.0)
    chain = m.build(initial={**s1.empty, **s2.empty}, progress=False)
    pi = chain.stationary().pi
    accepted = 2.0 * pi[chain.states["n1"] < 5].sum()
    assert float(chain.throughput(s1.completion_events)) == pytest.approx(accepted, rel=1e-11)
    assert float(chain.throughput(s2.completion_events)) == pytest.approx(accepted, rel=1e-11)
    blocked = chain.states["n2"] == 4        # no completion at s1 while s2 is full
    for e in s1.completion_events:
        assert not chain.event_rate(e)[blocked].any()


def test_speed_scales_every_service_rate():
    c, K, lam = 3, 6, 2.0
    chain, _, _ = station(ph.exponential(1.0), lam, c, K, speed=2.0)
    want = np.array([float(p) for p in mmck_exact(lam, 2.0, c, K)])
    assert np.max(np.abs(law_of_n(chain, K) - want) / want) < 1e-12


def test_guard_stops_the_servers_and_update_counts_completions():
    m = ctmc.Model("guarded")
    n, on, done = m.var("n", 0, 4), m.var("on", 0, 1), m.var("done", 0, 1)
    st = ph.add_service(m, ph.erlang(2), n, name="srv", servers=2, guard=on == 1, update={done: 1})
    st.arrival("arrive", rate=1.0)
    m.event("switch", rate=0.5, update={on: 1 - on})
    m.event("reset", guard=done == 1, rate=3.0, update={done: 0})
    chain = m.build(initial={**st.empty, "on": 1, "done": 0}, progress=False)
    off = chain.states["on"] == 0
    for e in st.phase_events + st.completion_events:
        assert not chain.event_rate(e)[off].any()
    accepted = chain.throughput(["arrive", "arrive_srv_start_1"])
    assert float(chain.throughput(st.completion_events)) == pytest.approx(float(accepted), rel=1e-11)
    # a completion sets done, reset clears it: resets balance the completions made while done == 0
    pi, clear = chain.stationary().pi, chain.states["done"] == 0
    setting = sum(float(pi[clear] @ chain.event_rate(e)[clear]) for e in st.completion_events)
    assert float(chain.throughput("reset")) == pytest.approx(setting, rel=1e-11) and setting > 0.05


# ---------------------------------------------------------------------------
# bad input, refused before anything is declared
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("servers", [0, -1, 2.5, True, "2", 7, None])
def test_servers_out_of_range_is_refused_naming_the_range(servers):
    m = ctmc.Model("bad")
    n = m.var("n", 0, 6)
    with pytest.raises(ValueError, match=r"servers: expected an integer in 1\.\.6"):
        ph.add_service(m, ph.erlang(2), n, servers=servers)
    assert [v.name for v in m.variables] == ["n"] and not m.events


@pytest.mark.parametrize("law, c, K, match", [
    (ph.erlang(10), 30, 40,
     r"servers: 30 servers with 10 phases and capacity 40 make .* states \(allowed up to"),
    (ph.erlang(40), 2, 2, r"servers: 2 servers with 40 phases .* fewer than 2\^62")])
def test_a_station_too_large_is_refused_before_declaring(law, c, K, match):
    m = ctmc.Model("big")
    n = m.var("n", 0, K)
    with pytest.raises(ValueError, match=match):
        ph.add_service(m, law, n, servers=c)
    assert [v.name for v in m.variables] == ["n"] and not m.events


def test_the_limits_are_where_the_counts_say():
    assert ph_servers.station_states(30, 10, 40) > ph_servers.MAX_STATES
    assert (40 + 1) * 31 ** 10 < 2 ** 62 and 3 * 3 ** 40 >= 2 ** 62
    m = ctmc.Model("ok")
    n = m.var("n", 0, 2)
    ph.add_service(m, ph.erlang(30), n, servers=2)         # 3^31 * 3 codes: accepted


def test_other_bad_input_names_the_parameter():
    m = ctmc.Model("bad")
    n = m.var("n", 0, 5)
    p = m.var("p", 0, 3)
    with pytest.raises(ValueError, match="phase: a station of 2 servers"):
        ph.add_service(m, ph.erlang(2), n, p, servers=2)
    with pytest.raises(ValueError, match="update: must not change the station's own variables"):
        ph.add_service(m, ph.erlang(2), n, servers=2, update={"service_busy_1": 0})
    assert [v.name for v in m.variables] == ["n", "p"] and not m.events
    ph.add_service(m, ph.erlang(2), n, name="a", servers=2)
    k = m.var("k", 0, 5)
    with pytest.raises(ValueError, match="name: the counters"):
        ph.add_service(m, ph.erlang(2), k, name="a", servers=2)


@pytest.mark.parametrize("make, match", [
    (lambda: ph.erlang(10 ** 12), r"k: .* must lie in 1\.\.10000000"),
    (lambda: ph.erlang(ph.MAX_PHASES + 1), r"k: .* must lie in 1\.\.10000000"),
    (lambda: ph.fit(1.0, 1e-12, max_phases=10 ** 13), r"scv: .* must lie in 1\.\.10000000")])
def test_huge_phase_counts_are_refused_not_a_memory_error(make, match):
    with pytest.raises(ValueError, match=match):
        make()
