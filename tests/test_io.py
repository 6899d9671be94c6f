"""ctmc.io: round trips, hand-written PRISM and DRN files, malformed input, and Storm both ways.

Every reader is checked against an answer that does not come from ctmc's own
writer: hand-computed stationary laws of small files written here, and Storm
(through stormpy, run in its own interpreter) on files ctmc writes and files
Storm writes. The Storm tests are skipped, with the reason, when no
interpreter with stormpy is found (``CTMC_STORMPY_PYTHON``, else the repo's
``.venv-storm/bin/python``; ``scripts/storm_venv.sh`` makes it).
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

import ctmc
import ctmc.io as cio
from helpers_io import model_chain, storm


# ---------------------------------------------------------------------------
# chains (model_chain, the tandem model, is in helpers_io: test_measures uses it too)

def matrix_chain():
    rng = np.random.default_rng(7)
    R = rng.random((6, 6)) * (rng.random((6, 6)) < 0.6)
    R[np.arange(6), (np.arange(6) + 1) % 6] += rng.random(6)  # a cycle: irreducible
    return ctmc.CTMC(ctmc.CTMC.from_rates(R).Q, labels={"odd": np.arange(6) % 2 == 1},
                     rewards={"r": rng.random(6)}, initial=[2, 3])


def bare_chain():
    return ctmc.CTMC.from_rates([[0, 1.5, 0.25], [3.0, 0, 1e-3], [0, 7.0, 0]])


CHAINS = {"model": model_chain, "matrix": matrix_chain, "bare": bare_chain}


def _same_chain(a, b, *, states=True, extras=True):
    assert a.Q.shape == b.Q.shape
    assert (a.Q != b.Q).nnz == 0, "generators differ"
    if states:
        assert a.states.names == b.states.names
        for k in a.states.names:
            np.testing.assert_array_equal(a.states[k], b.states[k])
    if extras:
        assert a.labels.keys() == b.labels.keys()
        for k in a.labels:
            np.testing.assert_array_equal(a.labels[k], b.labels[k])
        assert a.rewards.keys() == b.rewards.keys()
        for k in a.rewards:
            np.testing.assert_array_equal(a.rewards[k], b.rewards[k])
        if a.initial is None:
            assert b.initial is None
        else:
            np.testing.assert_array_equal(a.initial, b.initial)
    np.testing.assert_allclose(b.stationary().pi, a.stationary().pi, rtol=1e-12, atol=0)


# ---------------------------------------------------------------------------
# round trips

def _via_prism(chain, d):
    paths = cio.write_prism(chain, d / "m")
    return cio.read_prism(paths[0], paths[1], paths[2], srew=paths[3:])


def _via_drn(chain, d):
    return cio.read_drn(cio.write_drn(chain, d / "m.drn"))


def _via_npz(chain, d):
    return cio.load_npz(cio.save_npz(chain, d / "m.npz"))


ROUTES = {"prism": _via_prism, "drn": _via_drn, "npz": _via_npz}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("which", CHAINS)
def test_round_trip(route, which, tmp_path):
    chain = CHAINS[which]()
    _same_chain(chain, ROUTES[route](chain, tmp_path))


@pytest.mark.parametrize("which", CHAINS)
def test_round_trip_matrix_market(which, tmp_path):
    chain = CHAINS[which]()
    back = cio.read_mtx(cio.write_mtx(chain, tmp_path / "q.mtx"))
    _same_chain(chain, back, states=False, extras=False)


def test_written_prism_files_are_prisms_layout(tmp_path):
    chain = model_chain()
    tra, sta, lab, *rew = cio.write_prism(chain, tmp_path / "t")
    head, *lines = tra.read_text().splitlines()
    assert head == f"{chain.n_states} {chain.n_transitions}" and len(lines) == chain.n_transitions
    pairs = [tuple(map(int, s.split()[:2])) for s in lines]
    assert pairs == sorted(pairs) and all(i != j for i, j in pairs)
    assert sta.read_text().splitlines()[:2] == ["(n1,n2,ph)", "0:(0,0,0)"]
    assert lab.read_text().splitlines()[0] == '0="init" 1="full" 2="idle"'
    assert [p.name for p in rew] == ["t.load.srew", "t.cost.srew"]
    load = rew[0].read_text().splitlines()
    assert load[2] == f"{chain.n_states} {int(np.count_nonzero(chain.rewards['load']))}"


def test_init_is_reserved(tmp_path):
    chain = bare_chain()
    chain.add_label("init", [0])
    with pytest.raises(ValueError, match="reserved"):
        cio.write_prism(chain, tmp_path / "x")
    with pytest.raises(ValueError, match="reserved"):
        cio.write_drn(chain, tmp_path / "x.drn")


# ---------------------------------------------------------------------------
# hand-written PRISM files: answers known by hand

def _write(d, name, text):
    p = Path(d) / name
    p.write_text(textwrap.dedent(text).lstrip("\n"))
    return p


def test_read_hand_written_prism_cycle(tmp_path):
    # cycle 0 -> 1 -> 2 -> 0 with rates 1, 2, 4: pi proportional to the mean holding times 1, 1/2, 1/4
    tra = _write(tmp_path, "c.tra", """
        # a comment, then the header
        3 3

        0 1 1
        1 2 2.0
        2 0 4e0
        """)
    sta = _write(tmp_path, "c.sta", """
        (x,busy)
        0:(-1,false)
        1:(0,true)
        2:(7,false)
        """)
    lab = _write(tmp_path, "c.lab", """
        0="init" 1="deadlock" 2="busy_state"
        1: 2
        0: 0
        """)
    srew = _write(tmp_path, "c1.srew", """
        # Reward structure "r"
        # State rewards
        3 2
        0 1
        2 3.0
        """)
    trew = _write(tmp_path, "c.trew", """
        3 1
        0 1 2
        """)
    chain = cio.read_prism(tra, sta, lab, srew=srew, trew={"hops": trew})
    np.testing.assert_allclose(chain.stationary().pi, np.array([4, 2, 1]) / 7, rtol=1e-14)
    np.testing.assert_allclose(chain.Q.toarray(), [[-1, 1, 0], [0, -2, 2], [4, 0, -4]])
    assert chain.states["x"].tolist() == [-1, 0, 7] and chain.states["busy"].tolist() == [0, 1, 0]
    assert chain.initial.tolist() == [0]
    assert set(chain.labels) == {"deadlock", "busy_state"} and chain.labels["busy_state"].tolist() == [0, 1, 0]
    assert not chain.labels["deadlock"].any()
    pi = chain.stationary().pi
    assert pi @ chain.rewards["r"] == pytest.approx((4 * 1 + 1 * 3) / 7, rel=1e-14)
    # an impulse 2 on each 0 -> 1 firing; those fire at the rate pi_0 * q_01 = 4/7
    assert pi @ chain.rewards["hops"] == pytest.approx(2 * 4 / 7, rel=1e-14)


def test_read_prism_sums_duplicates_and_ignores_self_loops(tmp_path):
    tra = _write(tmp_path, "d.tra", """
        2 5
        0 1 0.5
        0 0 9
        0 1 1.5
        1 0 1 actionname
        1 1 3
        """)
    chain = cio.read_prism(tra)
    np.testing.assert_array_equal(chain.Q.toarray(), [[-2.0, 2.0], [1.0, -1.0]])
    assert chain.states.names == ("state",) and chain.initial is None and not chain.labels


def test_read_storm_explicit_dialect(tmp_path):
    tra = _write(tmp_path, "s.tra", """
        ctmc
        0 1 3
        1 0 1
        """)
    lab = _write(tmp_path, "s.lab", """
        #DECLARATION
        init up
        #END
        0 init
        1 up
        """)
    srew = _write(tmp_path, "s.srew", """
        1 2.5
        """)
    chain = cio.read_prism(tra, lab=lab, srew={"r": srew})
    np.testing.assert_allclose(chain.stationary().pi, [0.25, 0.75], rtol=1e-14)
    assert chain.initial.tolist() == [0] and chain.labels["up"].tolist() == [False, True]
    assert chain.rewards["r"].tolist() == [0.0, 2.5]


def test_read_hand_written_drn(tmp_path):
    # Storm's layout: exit rates, rewards, labels, valuations as comments, an action reward.
    drn = _write(tmp_path, "c.drn", """
        // Exported by storm
        // Original model type: CTMC
        @type: CTMC
        @parameters

        @reward_models
        imp st
        @nr_states
        3
        @nr_choices
        3
        @model
        state 0 !1 [0, 1] init
        //[!b	& x=0]
        	action __NOLABEL__ [2, 0]
        		1 : 1
        state 1 !2 [0, 0] "two words" odd
        //[	& x=1]
        	action __NOLABEL__ [0, 0]
        		2 : 2
        state 2 !4 [0, 3]
        //[!b	& x=-2]
        	action __NOLABEL__ [0, 0]
        		0 : 4
        """)
    chain = cio.read_drn(drn)
    pi = chain.stationary().pi
    np.testing.assert_allclose(pi, np.array([4, 2, 1]) / 7, rtol=1e-14)
    assert chain.initial.tolist() == [0]
    assert chain.labels["two words"].tolist() == [False, True, False]
    assert chain.states["x"].tolist() == [0, 1, -2] and chain.states["b"].tolist() == [0, 1, 0]
    assert pi @ chain.rewards["st"] == pytest.approx(7 / 7, rel=1e-14)
    # action reward 2 earned on each exit from state 0 (exit rate 1): rate pi_0 * 1 * 2
    assert pi @ chain.rewards["imp"] == pytest.approx(8 / 7, rel=1e-14)


# ---------------------------------------------------------------------------
# malformed input: ValueError naming the file and the line

GOOD_TRA = "3 3\n0 1 1\n1 2 2\n2 0 4\n"
BAD = [
    # (case, {file: text}, file that is wrong, line, message fragment)
    ("tra index out of range", {"tra": "3 3\n0 1 1\n1 3 2\n2 0 4\n"}, "tra", 3, "out of range"),
    ("tra negative rate", {"tra": "3 3\n0 1 1\n1 2 -2\n2 0 4\n"}, "tra", 3, "> 0"),
    ("tra not a number", {"tra": "3 3\n0 1 fast\n1 2 2\n2 0 4\n"}, "tra", 2, "expected a number"),
    ("tra short line", {"tra": "3 3\n0 1\n1 2 2\n2 0 4\n"}, "tra", 2, "'i j rate'"),
    ("tra count", {"tra": "3 4\n0 1 1\n1 2 2\n2 0 4\n"}, "tra", 1, "announces 4"),
    ("tra mdp", {"tra": "3 3 3\n0 0 1 1\n1 0 2 1\n2 0 0 1\n"}, "tra", 1, "MDP"),
    ("tra dtmc hint", {"tra": "dtmc\n0 1 1\n"}, "tra", 1, "not a CTMC"),
    ("sta too few values", {"tra": GOOD_TRA, "sta": "(a,b)\n0:(0,0)\n1:(1)\n2:(2,2)\n"}, "sta", 3, "values"),
    ("sta float", {"tra": GOOD_TRA, "sta": "(a)\n0:(0)\n1:(0.5)\n2:(2)\n"}, "sta", 3, "integer"),
    ("sta index", {"tra": GOOD_TRA, "sta": "(a)\n0:(0)\n1:(1)\n5:(2)\n"}, "sta", 4, "out of range"),
    ("sta twice", {"tra": GOOD_TRA, "sta": "(a)\n0:(0)\n0:(1)\n2:(2)\n"}, "sta", 3, "twice"),
    ("lab undeclared", {"tra": GOOD_TRA, "lab": '0="init"\n0: 0\n2: 1\n'}, "lab", 3, "not declared"),
    ("lab header", {"tra": GOOD_TRA, "lab": "init deadlock\n0: 0\n"}, "lab", 1, "header"),
    ("lab index", {"tra": GOOD_TRA, "lab": '0="init"\n9: 0\n'}, "lab", 2, "out of range"),
    ("srew index", {"tra": GOOD_TRA, "srew": "3 1\n3 1.0\n"}, "srew", 2, "out of range"),
    ("srew states", {"tra": GOOD_TRA, "srew": "4 1\n0 1.0\n"}, "srew", 1, "out of range"),
    ("trew absent transition", {"tra": GOOD_TRA, "trew": "3 1\n1 0 1.0\n"}, "trew", 2, "does not have"),
]


def _read_case(files, d):
    paths = {k: _write(d, f"m.{k}", v) for k, v in files.items()}
    if "drn" in paths:
        return cio.read_drn(paths["drn"]), paths
    return cio.read_prism(paths["tra"], paths.get("sta"), paths.get("lab"),
                          srew=paths.get("srew"), trew=paths.get("trew")), paths


@pytest.mark.parametrize("case, files, wrong, line, fragment", BAD, ids=[b[0] for b in BAD])
def test_malformed_prism(case, files, wrong, line, fragment, tmp_path):
    with pytest.raises(ValueError) as err:
        _read_case(files, tmp_path)
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / ('m.' + wrong)}:{line}:"), msg
    assert fragment in msg, msg


DRN_HEAD = "@type: CTMC\n@parameters\n\n@nr_states\n2\n@nr_choices\n2\n@model\n"
BAD_DRN = [
    ("target out of range", DRN_HEAD + "state 0 !1\n\taction 0\n\t\t2 : 1\nstate 1 !1\n\taction 0\n\t\t0 : 1\n",
     11, "out of range"),
    ("no exit rate", DRN_HEAD + "state 0\n\taction 0\n\t\t1 : 1\n", 9, "exit rate"),
    ("states out of order", DRN_HEAD + "state 1 !1\n\taction 0\n\t\t0 : 1\n", 9, "in order"),
    ("two actions", DRN_HEAD + "state 0 !1\n\taction 0\n\t\t1 : 1\n\taction 1\n\t\t1 : 1\n", 12, "second action"),
    ("exit rate mismatch", DRN_HEAD + "state 0 !2\n\taction 0\n\t\t1 : 1\nstate 1 !1\n\taction 0\n\t\t0 : 1\n",
     9, "not the sum"),
    ("dtmc", DRN_HEAD.replace("CTMC", "DTMC"), 1, "only CTMC"),
    ("bad rate", DRN_HEAD + "state 0 !1\n\taction 0\n\t\t1 : x\n", 11, "expected a number"),
    ("parametric", "@type: CTMC\n@parameters\np q\n@nr_states\n1\n@model\n", 3, "parametric"),
    ("nr_states", "@type: CTMC\n@nr_states\nmany\n@model\n", 3, "expected an integer"),
    ("no model", "@type: CTMC\n@nr_states\n1\n", None, "no '@model'"),
    ("too few states", DRN_HEAD + "state 0 !1\n\taction 0\n\t\t1 : 1\n", 5, "lists 1 states"),
]


@pytest.mark.parametrize("case, text, line, fragment", BAD_DRN, ids=[b[0] for b in BAD_DRN])
def test_malformed_drn(case, text, line, fragment, tmp_path):
    p = _write(tmp_path, "m.drn", text)
    with pytest.raises(ValueError) as err:
        cio.read_drn(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}:{line}:" if line else f"{p}: "), msg
    assert fragment in msg, msg


def test_malformed_npz_and_mtx(tmp_path):
    p = tmp_path / "x.npz"
    np.savez(p, a=np.arange(3))
    with pytest.raises(ValueError, match="not a chain saved"):
        cio.load_npz(p)
    q = tmp_path / "x.mtx"
    q.write_text("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 2 1.0\n2 1 1.0\n")
    with pytest.raises(ValueError, match=re.escape(str(q)) + ".*sum to 0"):
        cio.read_mtx(q)
    np.testing.assert_array_equal(cio.read_mtx(q, rates=True).Q.toarray(), [[-1, 1], [1, -1]])


# ---------------------------------------------------------------------------
# Storm, both ways (skipped without stormpy; storm(job) is in helpers_io)

def _ctmc_measures(chain):
    pi = chain.stationary().pi
    return [float(pi @ chain.labels["full"]), float(pi @ chain.rewards["load"]), float(pi @ chain.rewards["cost"])]


STORM_PROPS_OURS = ['S=? ["full"]', 'R{"load"}=? [ LRA ]', 'R{"cost"}=? [ LRA ]']


def test_storm_reads_our_drn(tmp_path):
    chain = model_chain()
    path = cio.write_drn(chain, tmp_path / "t.drn")
    got = storm({"kind": "drn", "path": str(path), "properties": STORM_PROPS_OURS})
    assert got["type"] == "ModelType.CTMC"
    assert (got["states"], got["transitions"]) == (chain.n_states, chain.n_transitions)
    np.testing.assert_allclose(got["values"], _ctmc_measures(chain), rtol=1e-8)


def test_storm_reads_our_prism_files(tmp_path):
    """Storm's explicit parser takes PRISM's transition lines; only the headers differ."""
    chain = model_chain()
    tra, sta, lab, load, cost = cio.write_prism(chain, tmp_path / "t")
    # Storm's dialect: a 'ctmc' hint for the 'n m' header, '#DECLARATION' labels, reward files without header
    (tmp_path / "s.tra").write_text("ctmc\n" + tra.read_text().split("\n", 1)[1])
    back = cio.read_prism(tra, sta, lab)
    decl = ["init"] + list(back.labels)
    rows = {}
    for i in back.initial.tolist():
        rows.setdefault(i, []).append("init")
    for name, mask in back.labels.items():
        for i in np.flatnonzero(mask).tolist():
            rows.setdefault(i, []).append(name)
    (tmp_path / "s.lab").write_text("#DECLARATION\n" + " ".join(decl) + "\n#END\n"
                                    + "".join(f"{i} {' '.join(v)}\n" for i, v in sorted(rows.items())))
    lines = [s for s in load.read_text().splitlines() if not s.startswith("#")]
    (tmp_path / "s.srew").write_text("\n".join(lines[1:]) + "\n")
    got = storm({"kind": "explicit", "tra": str(tmp_path / "s.tra"), "lab": str(tmp_path / "s.lab"),
                 "srew": str(tmp_path / "s.srew"), "properties": ['S=? ["full"]', 'R=? [ LRA ]']})
    assert (got["states"], got["transitions"]) == (chain.n_states, chain.n_transitions)
    np.testing.assert_allclose(got["values"], _ctmc_measures(chain)[:2], rtol=1e-8)
    # and ctmc reads Storm's dialect back to the same chain
    again = cio.read_prism(tmp_path / "s.tra", sta, tmp_path / "s.lab", srew={"load": tmp_path / "s.srew"})
    assert (again.Q != chain.Q).nnz == 0 and again.initial.tolist() == chain.initial.tolist()
    np.testing.assert_array_equal(again.rewards["load"], chain.rewards["load"])


PRISM_TANDEM = """
ctmc
module tandem3
  n1 : [0..3] init 0;
  n2 : [0..2] init 0;
  ph : [0..1] init 0;
  [arrive] n1<3 -> 0.7 : (n1'=n1+1);
  [move] n1>0 & n2<2 -> 1/3 : (n1'=n1-1) & (n2'=n2+1);
  [phase] n2>0 & ph=0 -> 2.5 : (ph'=1);
  [leave] n2>0 & ph=1 -> 1.1 : (n2'=n2-1) & (ph'=0);
endmodule
label "full" = n1=3;
rewards "load"
  true : n1+n2;
endrewards
rewards "departures"
  [leave] true : 1;
endrewards
"""


def test_ctmc_reads_storms_drn(tmp_path):
    """Storm builds a PRISM program and exports DRN; ctmc reads it: same law state by state, same measures."""
    src = _write(tmp_path, "tandem.sm", PRISM_TANDEM)
    drn = tmp_path / "storm.drn"
    props = ['S=? ["full"]', 'R{"load"}=? [ S ]', 'R{"departures"}=? [ S ]']
    got = storm({"kind": "prism", "path": str(src), "export": str(drn), "properties": props})
    theirs = cio.read_drn(drn)
    ours = model_chain()
    assert theirs.n_states == ours.n_states == got["states"]
    assert sorted(theirs.states.names) == ["n1", "n2", "ph"]
    # Storm numbers states its own way: match them through the valuations read from the comments
    perm = [ours.index(**{k: int(theirs.states[k][i]) for k in ours.states.names}) for i in range(theirs.n_states)]
    pi_t, pi_o = theirs.stationary().pi, ours.stationary().pi
    # Storm's DRN writer prints 10 significant digits (the rate 1/3 becomes 0.3333333333): agreement to ~1e-9
    np.testing.assert_allclose(pi_t, pi_o[perm], rtol=1e-8)
    assert ours.initial.tolist() == [perm[i] for i in theirs.initial.tolist()]
    # measures: from the DRN's labels and rewards, from Storm, and independently from ctmc's own model
    departures = float(pi_o @ ours.event_rate("leave"))
    mine = [float(pi_t @ theirs.labels["full"]), float(pi_t @ theirs.rewards["load"]),
            float(pi_t @ theirs.rewards["departures"])]
    np.testing.assert_allclose(mine, got["values"], rtol=1e-8)
    np.testing.assert_allclose(mine, [pi_o @ ours.labels["full"], pi_o @ ours.rewards["load"], departures],
                               rtol=1e-8)


def test_kanban_from_storm(tmp_path):
    """PRISM's kanban benchmark (t=1), built and exported by Storm, read by ctmc: the published measure agrees."""
    from ctmc.models.gallery import kanban
    k = kanban(1)
    src = _write(tmp_path, "kanban.sm", k.prism_program())
    drn = tmp_path / "kanban.drn"
    got = storm({"kind": "prism", "path": str(src), "export": str(drn), "constants": k.prism_constants,
                 "properties": [k.prism_property]})
    theirs = cio.read_drn(drn)
    assert theirs.n_states == got["states"] == k.chain().n_states
    (name,) = re.findall(r'R\{"(\w+)"\}', k.prism_property)
    value = float(theirs.stationary().pi @ theirs.rewards[name])
    assert value == pytest.approx(got["values"][0], rel=1e-8)
    assert value == pytest.approx(k.measure(k.chain().stationary()), rel=1e-8)


# (the worked example of docs/io.rst runs with every docs page: tests/test_docs.py)


def test_an_initial_law_survives_npz_and_is_announced_by_prism_and_drn(tmp_path):
    """Review finding: exports dropped the law a vanishing initial state leaves (a uniform law came back)."""
    from ctmc.progress import CtmcWarning
    Q = ctmc.CTMC.from_rates([[0, 1.0, 2.0], [3.0, 0, 1.0], [1.0, 1.0, 0]]).Q
    chain = ctmc.CTMC(Q, initial=np.array([0.0, 0.9, 0.1]))
    assert chain.initial.tolist() == [1, 2]
    back = cio.load_npz(cio.save_npz(chain, tmp_path / "c"))
    np.testing.assert_array_equal(back.initial_law, chain.initial_law)
    assert float(back.prob_within({0}, 1.0).value) == float(chain.prob_within({0}, 1.0).value)
    with pytest.warns(CtmcWarning, match="initial law"):
        cio.write_drn(chain, tmp_path / "c.drn")
    with pytest.warns(CtmcWarning, match="initial law"):
        cio.write_prism(chain, tmp_path / "c")
    with pytest.raises(ValueError, match="initial: a numeric vector of length 3 is read as a law"):
        ctmc.CTMC(Q, initial=np.array([0.5, 0.6, 0.1]))


def test_sta_with_two_states_of_the_same_values_is_refused(tmp_path):
    (tmp_path / "d.tra").write_text("2 2\n0 1 1\n1 0 1\n")
    (tmp_path / "d.sta").write_text("(x)\n0:(3)\n1:(3)\n")
    with pytest.raises(ValueError, match=r"d\.sta.*states 0 and 1 have the same values \(3,\)"):
        cio.read_prism(tmp_path / "d.tra", tmp_path / "d.sta")
