"""The benchmark gallery (ctmc.models.gallery): published sizes, measures, independent checks.

Sizes are PRISM's (states / transitions after merging transitions that reach
the same state, which is ctmc's count of off-diagonal non-zeros of Q).
Measures are checked against an independent computation where one exists
(a hand-assembled dense generator for tandem, flow balances and symmetry for
the others) and against published values where a solve takes seconds.
"""
import importlib

import numpy as np
import pytest

from ctmc.models.gallery import GALLERY, cluster, embedded, fms, kanban, parse_spec, peer2peer, polling, tandem

polling_mod = importlib.import_module("ctmc.models.gallery.polling")  # the package's `polling` is the builder
tandem_mod = importlib.import_module("ctmc.models.gallery.tandem")
embedded_mod = importlib.import_module("ctmc.models.gallery.embedded")
peer2peer_mod = importlib.import_module("ctmc.models.gallery.peer2peer")
from ctmc.models.gallery._base import prism_expr

# ---------------------------------------------------------------- sizes
PUBLISHED = [  # (spec, states, transitions): PRISM case-study tables / benchmarks.md
    ("kanban:1", 160, 616), ("kanban:2", 4_600, 28_120), ("kanban:3", 58_400, 446_400),
    ("fms:1", 54, 155), ("fms:2", 810, 3_699), ("fms:3", 6_520, 37_394), ("fms:4", 35_910, 237_120),
    ("fms:5", 152_712, 1_111_482),
    ("polling:15", 737_280, 6_144_000),
    ("cluster:2", 276, 1_120), ("cluster:4", 820, 3_616), ("cluster:8", 2_772, 12_832),
    ("cluster:64", 151_060, 733_216),
    ("tandem:511", 523_776, 1_829_379),
]


@pytest.mark.parametrize("spec, states, transitions", PUBLISHED)
def test_published_sizes(spec, states, transitions):
    chain = parse_spec(spec).chain()
    assert (chain.n_states, chain.n_transitions) == (states, transitions)


@pytest.mark.parametrize("N", [5, 6, 7, 8])
def test_polling_sizes_closed_form(N):
    chain = polling(N).chain()
    assert chain.n_states == polling_mod.n_states(N) == 3 * N * 2 ** N // 2
    assert chain.n_transitions == polling_mod.n_transitions(N)


@pytest.mark.parametrize("c", [1, 2, 3, 10, 31])
def test_tandem_sizes_closed_form(c):
    chain = tandem(c).chain()
    assert (chain.n_states, chain.n_transitions) == (tandem_mod.n_states(c), tandem_mod.n_transitions(c))


def test_closed_forms_give_the_published_large_sizes():
    assert (polling_mod.n_states(18), polling_mod.n_transitions(18)) == (7_077_888, 69_599_232)
    assert (polling_mod.n_states(20), polling_mod.n_transitions(20)) == (31_457_280, 340_787_200)
    assert (tandem_mod.n_states(4095), tandem_mod.n_transitions(4095)) == (33_550_336, 117_395_459)


# ---------------------------------------------------------------- measures
def _tandem_dense(c):
    """Mean customers of tandem(c) from a generator assembled by hand (no ctmc.Model)."""
    states = [(sc, ph, sm) for sc in range(c + 1) for ph in (1, 2) for sm in range(c + 1)
              if not (ph == 2 and sc == 0)]
    idx = {s: i for i, s in enumerate(states)}
    Q = np.zeros((len(states), len(states)))
    for (sc, ph, sm), i in idx.items():
        moves = []
        if sc < c:
            moves.append(((sc + 1, ph, sm), 4.0 * c))
        if sc > 0 and ph == 1:
            moves.append(((sc, 2, sm), 0.2))
            if sm < c:
                moves.append(((sc - 1, 1, sm + 1), 1.8))
        if sc > 0 and ph == 2 and sm < c:
            moves.append(((sc - 1, 1, sm + 1), 2.0))
        if sm > 0:
            moves.append(((sc, ph, sm - 1), 4.0))
        for dst, rate in moves:
            Q[i, idx[dst]] += rate
            Q[i, i] -= rate
    A = np.vstack([Q.T, np.ones(len(states))])
    b = np.zeros(len(states) + 1)
    b[-1] = 1
    pi = np.linalg.lstsq(A, b, rcond=None)[0]
    return pi @ np.array([sc + sm for sc, _, sm in states], dtype=float)


@pytest.mark.parametrize("c", [3, 10])
def test_tandem_measure_against_dense_solve(c):
    g = tandem(c)
    assert g.measure(g.chain().stationary()) == pytest.approx(_tandem_dense(c), rel=1e-10)


def _throughput(chain, pi, *names):
    return sum(float(pi @ chain.event_rate(n)) for n in names)


def test_kanban_flow_balance():
    g = kanban(2)
    chain = g.chain()
    pi = chain.stationary().pi
    thr = g.measure(pi)
    # every part that enters cell 1 is split once, joined once and leaves once
    for ev in ("s1", "s2", "out"):
        assert _throughput(chain, pi, ev) == pytest.approx(thr, rel=1e-9)
    assert thr == pytest.approx(0.1738717, abs=1e-6)  # Storm (gmm++) on the PRISM twin


def test_polling_symmetry_and_flow_balance():
    N = 5
    g = polling(N)
    chain = g.chain()
    pi = chain.stationary().pi
    full = [float(pi @ chain.states[f"s{i}"]) for i in range(1, N + 1)]
    assert np.allclose(full, full[0], rtol=1e-9)  # the stations are exchangeable in the long run
    for i in (1, 3):  # services of station i = arrivals at station i
        assert _throughput(chain, pi, f"serve{i}") == pytest.approx(
            _throughput(chain, pi, f"arrive{i}"), rel=1e-9)
    # waiting = full minus being served
    served = float(pi @ ((chain.states["s"] == 1) & (chain.states["a"] == 1)))
    assert g.measure(pi) == pytest.approx(full[0] - served, rel=1e-12)
    assert g.measure(pi) == pytest.approx(0.144927, abs=1e-6)  # Storm (gmm++) on the PRISM twin


def test_cluster_flow_balance_and_premium():
    g = cluster(4)
    chain = g.chain()
    pi = chain.stationary().pi
    for part in ("left", "right", "line", "toleft", "toright"):
        # each failure is inspected once and repaired once (workstations: one at a time)
        assert _throughput(chain, pi, f"fail_{part}") == pytest.approx(
            _throughput(chain, pi, f"start_{part}"), rel=1e-9)
        assert _throughput(chain, pi, f"start_{part}") == pytest.approx(
            _throughput(chain, pi, f"repair_{part}"), rel=1e-9)
    premium = g.premium(chain.states)
    assert premium[chain.initial[0]]
    assert g.measure(pi) == pytest.approx(0.99992124, abs=1e-7)  # Storm (gmm++): 0.9999211541


def test_fms_flow_balance():
    g = fms(2)
    chain = g.chain()
    pi = chain.stationary().pi
    # type-3 parts: loaded = finished on M2
    assert _throughput(chain, pi, "t3_load") == pytest.approx(_throughput(chain, pi, "p2p3"), rel=1e-9)
    # productivity is the weighted sum of the load throughputs
    t = {a: _throughput(chain, pi, *(f"{a}_{w}" for w in ("machine", "queue"))) for a in ("t1", "t2", "t12")}
    t["t3"] = _throughput(chain, pi, "t3_load")
    assert g.measure(pi) == pytest.approx(400 * t["t1"] + 600 * t["t2"] + 100 * t["t3"] + 1100 * t["t12"])
    # an assembled part consumes one part of type 1 and one of type 2
    assert t["t12"] <= min(t["t1"], t["t2"])
    assert g.measure(pi) == pytest.approx(29.1547, rel=2e-4)  # Storm (gmm++, rel. stop 1e-6): 29.1501


@pytest.mark.slow
def test_tandem_511_direct_solve():
    g = tandem(511)
    assert g.measure(g.chain().stationary("lu")) == pytest.approx(511.82899236, rel=1e-9)


#: (model, size, stormpy 2.0's answer on the PRISM twin, run here with benchmarks/bench_gallery.py
#: --storm ..., relative tolerance: stormpy stops on a 1e-6 relative change). Storm 2018's published
#: values are off: kanban t=4 0.2762966549 by 1.5e-3 (like its t=5 value, 2e-3 off PRISM's),
#: cluster N=64 0.9986761964 by 2.7e-5 (stormpy's gmm++ and default environments agree here)
STORMPY = [(kanban, 4, 0.2758898007, 1e-6), (cluster, 64, 0.9987027803, 1e-8)]


@pytest.mark.slow
@pytest.mark.parametrize("make, size, stormpy, rel", STORMPY, ids=["kanban:4", "cluster:64"])
def test_measure_against_stormpy(make, size, stormpy, rel):
    g = make(size)
    res = g.chain().stationary(tol=1e-12)
    assert res.status.ok
    assert g.measure(res) == pytest.approx(stormpy, rel=rel)


# ---------------------------------------------------------------- API
def test_registry_and_prism_twins():
    assert sorted(GALLERY) == ["cluster", "embedded", "fms", "kanban", "peer2peer", "polling", "tandem"]
    for name, make in GALLERY.items():
        g = make(2)
        text = g.prism_program()
        assert text.lstrip().startswith("//") and "\nctmc\n" in text and "endmodule" in text
        assert g.prism_property
        for const in g.prism_constants:
            assert f"const int {const};" in text
        assert g.chain() is g.chain()  # built once
    with pytest.raises(ValueError):
        parse_spec("kanban")
    with pytest.raises(ValueError):
        kanban(0)


def test_prism_expr():
    m = fms(1).model()
    ev = m.events[0]
    text = prism_expr(ev.guard)
    assert "==" not in text and "~" not in text


@pytest.mark.parametrize("spec", ["kanban:2", "tandem:40"])
def test_passage_auto_on_many_dimensional_models_against_lu(spec, monkeypatch):
    """auto's plan for >2 dimensions starts with Gauss-Seidel, which passage systems do not have:
    it must take the next step (GMRES + Gauss-Seidel preconditioner) and agree with the direct solve.
    (The models are made to look expensive to factor in state order, as they are at full size.)"""
    from ctmc import _sparse_lu
    monkeypatch.setattr(_sparse_lu, "NATURAL_FLOPS", 0.0)
    monkeypatch.setattr(_sparse_lu, "ENVELOPE_FACTOR", 0.0)
    g = parse_spec(spec)
    c = g.chain()
    first = c.states.names[0]
    col = c.states[first]
    target = col == col.max()
    auto = c.hitting_times(target)
    assert auto.method == "gmres" and auto.info["auto"]["finite"]["choice"] == "gmres"
    lu = c.hitting_times(target, method="lu")
    assert np.allclose(auto.mean, lu.mean, rtol=1e-9, atol=0)
    la, ll = c.hitting_laplace(target, 0.3), c.hitting_laplace(target, 0.3, method="lu")
    assert la.method == "gmres" and np.allclose(la.values, ll.values, rtol=1e-9, atol=1e-300)


# ---------------------------------------------------------------- the non-stationary models
#: Storm 2.0's build of each generated program (stormpy, no property: the whole chain), which counts
#: the 435 self-loops of embedded's capped skip counter as transitions; ctmc drops them
STORM_EMBEDDED = [(2, 3_478, 14_639), (8, 8_548, 36_041)]


@pytest.mark.parametrize("K, states, storm_transitions", STORM_EMBEDDED)
def test_embedded_sizes(K, states, storm_transitions):
    chain = embedded(K).chain()
    assert chain.n_states == states == embedded_mod.n_states(K)
    assert chain.n_transitions == storm_transitions - 435 == embedded_mod.n_transitions(K)


@pytest.mark.parametrize("N, K", [(1, 1), (2, 2), (2, 3), (3, 3), (4, 4)])
def test_peer2peer_sizes(N, K):
    chain = peer2peer(K, N).chain()
    assert (chain.n_states, chain.n_transitions) == (2 ** (N * K), N * K * 2 ** (N * K - 1))
    assert (peer2peer_mod.n_states(N, K), peer2peer_mod.n_transitions(N, K)) == (2 ** (N * K), N * K * 2 ** (N * K - 1))
    assert peer2peer_mod.n_states(4, 5) == 1_048_576 and peer2peer_mod.n_transitions(4, 5) == 10_485_760


def _dense_hitting_reward(chain, target, reward):
    """sum of the reward until the target, from a dense solve of (-Q_FF) h = r (no ctmc solver)."""
    Q = chain.Q.toarray()
    F = ~np.asarray(target)
    h = np.zeros(chain.n_states)
    h[F] = np.linalg.solve(-Q[np.ix_(F, F)], reward[F])
    return h


@pytest.mark.parametrize("K", [2, 3])
def test_embedded_measure_against_a_dense_solve(K):
    g = embedded(K)
    c = g.chain()
    down = g.target(c)
    res = g.solve(c)
    assert res.status.ok and res.error_bound < 1e-6
    ref = _dense_hitting_reward(c, down, g.reward(c))[int(c.initial[0])]
    assert g.measure(res, c) == pytest.approx(ref, rel=1e-9)
    # the reward is 1/3600 an hour on the up states, 0 on the others
    assert set(np.unique(g.reward(c) * 3600)) == {0.0, 1.0}
    assert g.reward(c)[down].max() == 0.0


def test_embedded_measure_against_stormpy_and_the_chain_stopped_at_down():
    # stormpy 2.0 on the generated program, MAX_COUNT = 2 (default environment): 423.84431728654266
    g, h = embedded(2), embedded(2, stop_at_down=True)
    full, cut = g.chain(), h.chain()
    assert (cut.n_states, full.n_states) == (2_076, 3_478)     # Storm's property-driven build: 2,076
    a, b = g.measure(g.solve(full), full), h.measure(h.solve(cut), cut)
    assert a == pytest.approx(423.84431728654266, rel=1e-9)
    assert b == pytest.approx(a, rel=1e-12)
    # the down states of the stopped chain are absorbing
    assert (cut.Q[np.flatnonzero(h.target(cut))].nnz) == 0


def test_embedded_prism_program_names_the_published_property():
    text = embedded(3).prism_program()
    assert 'label "down"' in text and 'rewards "up"' in text and "const int MAX_COUNT;" in text
    assert embedded(3).prism_property == 'R{"up"}=? [ F "down" ]'


def test_peer2peer_closed_forms():
    t = peer2peer_mod.T
    # one client, one block: downloaded at rate mu (1 + 0) = 2
    g = peer2peer(1, 1)
    assert g.measure(g.solve()) == pytest.approx(1 - np.exp(-2.0 * t), rel=1e-13)
    # two clients, one block: the first at rate 2 + 2 (each from the seed), the second at 2 (1 + 1):
    # an Erlang(2, 4) time
    g = peer2peer(1, 2)
    assert g.measure(g.solve()) == pytest.approx(1 - np.exp(-4 * t) * (1 + 4 * t), rel=1e-13)


def test_peer2peer_measure_against_a_dense_exponential():
    import scipy.linalg as sla
    g = peer2peer(2, 3)               # 64 states
    c = g.chain()
    res = g.solve(c)
    assert res.status.ok and res.error_bound < 1e-12
    p0 = np.zeros(c.n_states)
    p0[int(c.initial[0])] = 1.0
    ref = (p0 @ sla.expm(c.Q.toarray() * peer2peer_mod.T))[g.target(c)].sum()
    assert g.measure(res, c) == pytest.approx(ref, rel=1e-11)
    assert g.target(c).sum() == 1 and c.Q[np.flatnonzero(g.target(c))].nnz == 0   # done is absorbing
