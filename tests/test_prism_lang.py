"""ctmc.prism.load: PRISM programs give the chains of the hand-written models.

The gallery models' PRISM programs (and two hand-written ones using renamed
modules, formulas and bool variables) must build the same chain as the gallery's
``ctmc.Model``: same states (matched by their variable values), same generator,
same rewards and labels, and PRISM's published state and transition counts.
Small programs check each feature against a ``ctmc.Model`` built by hand or
against values computed in Python, and every refused feature or syntax error
must name ``file:line:column``.
"""
import math
import os
from pathlib import Path

import numpy as np
import pytest

import ctmc
import ctmc.prism
from ctmc.models.gallery import cluster, embedded, fms, kanban, peer2peer, polling, tandem
from ctmc.prism import PrismError

DATA = Path(__file__).resolve().parent / "data" / "prism"


def _columns(chain, names):
    """The states' variable values (one row per state), and the order sorting them."""
    cols = np.stack([np.asarray(chain.states[n], dtype=np.int64) for n in names], axis=1)
    return cols, np.lexsort(cols.T[::-1])


def assert_same_chain(ours, ref):
    """Same states (by variable values), same generator, same labels and rewards where both have them."""
    names = [v.name for v in ref.model.variables]
    assert sorted(names) == sorted(v.name for v in ours.model.variables)
    a, pa = _columns(ours, names)
    b, pb = _columns(ref, names)
    assert ours.n_states == ref.n_states and ours.n_transitions == ref.n_transitions
    np.testing.assert_array_equal(a[pa], b[pb])
    assert_same_generator(ours.Q[pa][:, pa], ref.Q[pb][:, pb])
    return pa, pb


def assert_same_generator(A, B, rtol=1e-14):
    """Entrywise ``|A - B| <= rtol |B|`` (sparse)."""
    excess = (abs(A - B) - rtol * abs(B)).tocsr()
    assert excess.nnz == 0 or excess.max() <= 0, f"generators differ by up to {abs(A - B).max()}"


# ---------------------------------------------------------------- the gallery through PRISM
GALLERY = [(kanban, 2, {"throughput": "reward"}, {}), (fms, 2, {"productivity": "reward"}, {}),
           (polling, 3, {}, {}), (cluster, 3, {}, {"premium": "premium"}),
           (tandem, 6, {"customers": "reward"}, {}), (embedded, 3, {"up": "reward"}, {"down": "down"}),
           (peer2peer, 1, {}, {"done": "done"})]


@pytest.mark.parametrize("make, size, rewards, labels", GALLERY, ids=[g[0].__name__ for g in GALLERY])
def test_gallery_program_gives_the_gallery_chain(make, size, rewards, labels):
    gm = make(size)
    ref = gm.chain()
    model = ctmc.prism.load(gm.prism_program(), constants=gm.prism_constants)
    ours = model.build()                              # from the program's init values
    pa, pb = assert_same_chain(ours, ref)
    np.testing.assert_array_equal(np.argsort(pa)[ours.initial], np.argsort(pb)[ref.initial])
    for name, how in rewards.items():
        want = gm.reward(ref)
        np.testing.assert_allclose(ours.rewards[name][pa], want[pb], rtol=1e-13, atol=1e-300)
    for name, how in labels.items():
        np.testing.assert_array_equal(ours.labels[name][pa], np.asarray(getattr(gm, how)(ref.states))[pb])


PUBLISHED = [(kanban, 1, 160, 616), (kanban, 2, 4_600, 28_120), (fms, 1, 54, 155), (fms, 2, 810, 3_699),
             (cluster, 2, 276, 1_120), (cluster, 4, 820, 3_616)]


@pytest.mark.parametrize("make, size, states, transitions", PUBLISHED,
                         ids=[f"{p[0].__name__}:{p[1]}" for p in PUBLISHED])
def test_gallery_program_builds_the_published_counts(make, size, states, transitions):
    gm = make(size)
    chain = ctmc.prism.load(gm.prism_program(), constants=gm.prism_constants).build()
    assert (chain.n_states, chain.n_transitions) == (states, transitions)


def test_embedded_program_builds_storms_state_count():
    gm = embedded(2)            # Storm's build: 3,478 states (tests/test_gallery.py)
    assert ctmc.prism.load(gm.prism_program(), constants=gm.prism_constants).build().n_states == 3_478


@pytest.mark.parametrize("file, make, size", [("polling3.sm", polling, 3), ("cluster.sm", cluster, 2),
                                              ("cluster.sm", cluster, 4)])
def test_renamed_modules_file_gives_the_gallery_chain(file, make, size):
    gm = make(size)
    model = ctmc.prism.load(DATA / file, constants=gm.prism_constants)
    ours, ref = model.build(), gm.chain()
    pa, pb = assert_same_chain(ours, ref)
    if file == "cluster.sm":
        np.testing.assert_array_equal(ours.labels["premium"][pa], gm.premium(ref.states)[pb])
        # [repairLeft] and [repairRight] fire at rate 2 (the repairman) * 1 (the sub-cluster)
        s = ours.states
        want = 2.0 * ((s["r"] == 1) & (s["left"] == 1) & (s["left_n"] < size)) \
            + 2.0 * ((s["r"] == 1) & (s["right"] == 1) & (s["right_n"] < size))
        np.testing.assert_allclose(ours.rewards["repairs"], want)


# ---------------------------------------------------------------- features against hand-built models
def _dense(chain, names):
    cols, p = _columns(chain, names)
    return cols[p], chain.Q[p][:, p].toarray()


def test_synchronisation_multiplies_rates_over_every_combination():
    # a: module A has two a-commands, module B one with two branches -> 4 transitions
    prog = """ctmc
    module A
      x : [0..2] init 0;
      [a] x<2 -> 2 : (x'=x+1);
      [a] x>0 -> 3 : (x'=0);
      [] x=2 -> 7 : (x'=1);
    endmodule
    module B
      y : [0..1] init 0;
      [a] true -> 0.5 : (y'=1) + 0.25 : (y'=0);
      [b] y=1 -> 5 : (y'=0);
    endmodule
    """
    m = ctmc.Model("hand")
    x, y = m.var("x", 0, 2), m.var("y", 0, 1)
    m.event("a11", guard=x < 2, rate=2 * 0.5, update={x: x + 1, y: 1})
    m.event("a12", guard=x < 2, rate=2 * 0.25, update={x: x + 1, y: 0})
    m.event("a21", guard=x > 0, rate=3 * 0.5, update={x: 0, y: 1})
    m.event("a22", guard=x > 0, rate=3 * 0.25, update={x: 0, y: 0})
    m.event("t", guard=x == 2, rate=7.0, update={x: 1})
    m.event("b", guard=y == 1, rate=5.0, update={y: 0})     # b is B's alone: no partner needed
    ours = ctmc.prism.load(prog).build()
    ref = m.build(initial={"x": 0, "y": 0})
    sa, qa = _dense(ours, ["x", "y"])
    sb, qb = _dense(ref, ["x", "y"])
    np.testing.assert_array_equal(sa, sb)
    np.testing.assert_allclose(qa, qb, rtol=1e-15)


def test_an_action_waits_for_every_module_of_its_alphabet():
    prog = """ctmc
    module A x : [0..1] init 0; [go] x=0 -> 4 : (x'=1); endmodule
    module B y : [0..1] init 0; [go] y=1 -> 1 : (y'=0); [] y=0 -> 1 : (y'=1); endmodule
    """
    chain = ctmc.prism.load(prog).build()
    # go needs y=1 (B) and x=0 (A): from (0,1) to (1,0) at rate 4; nothing leaves x=1
    i, j = chain.index(x=0, y=1), chain.index(x=1, y=0)
    assert chain.Q[i, j] == 4.0 and chain.n_transitions == 3


def test_bool_variables_globals_formulas_and_default_init():
    prog = """ctmc
    const bool start = true;
    global g : [0..3];
    formula full = g=3;
    module M
      on : bool init start;
      [] on & !full -> 1.5 : (g'=g+1);
      [] full -> 2 : (on'=!on) & (g'=0);
      [] !on -> 3 : (on'=true);
    endmodule
    """
    model = ctmc.prism.load(prog)
    assert model.initial == {"g": 0, "on": 1} and model.bool_variables == ("on",)
    m = ctmc.Model("hand")
    g, on = m.var("g", 0, 3), m.var("on", 0, 1)
    m.event("up", guard=(on == 1) & (g != 3), rate=1.5, update={g: g + 1})
    m.event("flip", guard=g == 3, rate=2.0, update={on: 1 - on, g: 0})
    m.event("wake", guard=on == 0, rate=3.0, update={on: 1})
    sa, qa = _dense(model.build(), ["g", "on"])
    sb, qb = _dense(m.build(initial={"g": 0, "on": 1}), ["g", "on"])
    np.testing.assert_array_equal(sa, sb)
    np.testing.assert_allclose(qa, qb, rtol=1e-15)


def test_init_endinit_block_gives_every_initial_state():
    prog = """ctmc
    module M
      x : [0..3]; y : [0..2];
      [] x<3 -> 1 : (x'=x+1);
      [] y<2 -> 1 : (y'=y+1);
    endmodule
    init x + y = 2 & x != 1 endinit
    """
    model = ctmc.prism.load(prog)
    chain = model.build()
    starts = sorted((int(chain.states["x"][i]), int(chain.states["y"][i])) for i in chain.initial)
    assert starts == sorted((x, y) for x in range(4) for y in range(3) if x + y == 2 and x != 1)
    # reachable: x, y only grow, from (0, 2) and (2, 0)
    assert chain.n_states == sum(1 for x in range(4) for y in range(3) if x >= 2 or y == 2)


def test_functions_and_operators_against_python():
    # each reward / label evaluates one construct on x = 0..6; Python computes the same
    prog = """ctmc
    const double h = 0.5;
    module M x : [0..6] init 0; [] x<6 -> 1 : (x'=x+1); endmodule
    rewards "div" true : x/4; endrewards
    rewards "floor" true : floor(x/4) + ceil(x/4); endrewards
    rewards "minmax" true : min(x, 4, 5) * 10 + max(2, x); endrewards
    rewards "pow" true : pow(x, 2) + pow(2.0, x*h); endrewards
    rewards "mod" true : mod(x, 3); endrewards
    rewards "log" true : log(x + 1, 2); endrewards
    rewards "cond" true : x > 2 ? x * 1.5 : -x; endrewards
    rewards "guarded" x >= 3 : 2; x = 5 : 1; endrewards
    label "imp" = x > 2 => mod(x, 2) = 0;
    label "iff" = (x > 3) <=> (x != 1 & x >= 4);
    label "ne" = !(x = 2) & x != 3 | x = 6;
    """
    chain = ctmc.prism.load(prog).build()
    xs = np.asarray(chain.states["x"])
    want = {"div": [x / 4 for x in xs], "floor": [math.floor(x / 4) + math.ceil(x / 4) for x in xs],
            "minmax": [min(x, 4, 5) * 10 + max(2, x) for x in xs],
            "pow": [x ** 2 + 2.0 ** (x * 0.5) for x in xs],
            "mod": [x % 3 for x in xs], "log": [math.log(x + 1, 2) for x in xs],
            "cond": [x * 1.5 if x > 2 else -x for x in xs], "guarded": [2 * (x >= 3) + (x == 5) for x in xs]}
    for name, values in want.items():
        np.testing.assert_allclose(chain.rewards[name], values, rtol=1e-15, err_msg=name)
    assert chain.labels["imp"].tolist() == [(not x > 2) or x % 2 == 0 for x in xs]
    assert chain.labels["iff"].tolist() == [(x > 3) == (x != 1 and x >= 4) for x in xs]
    assert chain.labels["ne"].tolist() == [(not x == 2 and x != 3) or x == 6 for x in xs]


def test_action_rewards_weight_the_action_rate():
    prog = """ctmc
    const int K = 3;
    module Q n : [0..K] init 0;
      [arr] n<K -> 2 : (n'=n+1);
      [dep] n>0 -> n : (n'=n-1);
    endmodule
    module Count c : [0..1] init 0; [arr] true -> 0.5 : (c'=1-c); endmodule
    rewards "r" [arr] n < 2 : 10; [dep] true : 1; true : 0.25; endrewards
    rewards [] true : 1; endrewards
    """
    chain = ctmc.prism.load(prog).build()
    n = np.asarray(chain.states["n"])
    want = 10 * (2 * 0.5) * ((n < 3) & (n < 2)) + 1 * n * (n > 0) + 0.25
    np.testing.assert_allclose(chain.rewards["r"], want, rtol=1e-15)
    np.testing.assert_allclose(chain.rewards["2"], 0.0)       # unnamed: by position; no [] command


def test_constants_given_defined_and_missing():
    prog = ("ctmc\nconst int N;\nconst double r = N / 2;\n"
            "module M x : [0..N] init N; [] x>0 -> r : (x'=x-1); endmodule\n")
    model = ctmc.prism.load(prog, constants={"N": "4"})
    assert model.constants == {"N": 4, "r": 2.0} and model.initial == {"x": 4}
    assert model.build().n_states == 5
    with pytest.raises(PrismError, match=r"<string>:2:11: constant 'N' is not defined"):
        ctmc.prism.load(prog)
    with pytest.raises(PrismError, match=r"names \['M'\], which the program does not declare"):
        ctmc.prism.load(prog, constants={"N": 2, "M": 1})
    with pytest.raises(PrismError, match=r"constant 'N' is declared int, got 2.5"):
        ctmc.prism.load(prog, constants={"N": 2.5})


def test_an_update_leaving_the_range_is_an_error_at_build():
    prog = "ctmc\nmodule M x : [0..2] init 0; [] true -> 1 : (x'=x+1); endmodule\n"
    with pytest.raises(ctmc.ModelError, match=r"event 'M \(line 2\)': update leaves the declared bounds "
                                               r"from state \(x=2\)"):
        ctmc.prism.load(prog).build()


def test_load_from_a_path_names_the_file_in_errors(tmp_path):
    f = tmp_path / "bad.sm"
    f.write_text("ctmc\nmodule M\n  x : [0..2] init 0;\n  [] x<2 -> 1 (x'=x+1);\nendmodule\n")
    with pytest.raises(PrismError, match=rf"{f}:4:15: expected ':' after the rate"):
        ctmc.prism.load(f)
    with pytest.raises(FileNotFoundError, match="no PRISM file"):
        ctmc.prism.load(str(tmp_path / "missing.sm"))


# ---------------------------------------------------------------- refusals and errors
M = "module M x : [0..2] init 0; [] x<2 -> 1 : (x'=x+1); endmodule\n"
ERRORS = [
    ("dtmc\n" + M, r"<string>:1:1: model type 'dtmc' is not supported"),
    ("mdp\n" + M, r"<string>:1:1: model type 'mdp' is not supported"),
    ("nondeterministic\n" + M, r"<string>:1:1: model type 'nondeterministic'"),
    ("ctmc\n" + M + "invariant x < 2 endinvariant\n", r"<string>:3:1: invariants"),
    ("ctmc\nmodule M\n  c : clock;\nendmodule\n",
     r"<string>:3:7: variable 'c': clock variables are not supported"),
    ("ctmc\nobservables x endobservables\n" + M, r"<string>:2:1: observables"),
    ("ctmc\nmodule M\n  x : int init 0;\nendmodule\n", r"<string>:3:7: variable 'x': unbounded int"),
    ("ctmc\n" + M + "module N = M [x=y] endmodule\nsystem M |[a]| N endsystem\n",
     r"<string>:4:10: system \.\.\. endsystem: '\|' is not supported"),
    ("ctmc\n" + M + "module N = M [x=y] endmodule\nsystem M ||| N endsystem\n",
     r"<string>:4:12: system \.\.\. endsystem: '\|\|\|' \(interleaving"),
    ("ctmc\n" + M + "module N = M [x=y] endmodule\nsystem M endsystem\n",
     r"<string>:4:1: system \.\.\. endsystem: only the default composition"),
    (M, r"<string>:1:1: no model type"),
    ("ctmc\nmodule M x : [0..2] init 0; [] x<2 -> 1 : (x'=x+1) endmodule\n",
     r"<string>:2:52: expected ';' at the end of the command, found 'endmodule'"),
    ("ctmc\nconst int N = 3 $\n", r"<string>:2:17: unexpected character '\$'"),
    ("ctmc\nmodule M x : [0..2] init 0; [] y<2 -> 1 : (x'=x+1); endmodule\n",
     r"<string>:2:32: unknown identifier 'y'"),
    ("ctmc\nmodule M x : [0..2] init 0; [] x<2 -> 1 : (x'=x/2); endmodule\n",
     r"<string>:2:48: update of 'x': an int variable cannot take a double value"),
    ("ctmc\nmodule M x : [0..2] init 0; [] x+1 -> 1 : (x'=1); endmodule\n",
     r"<string>:2:33: the guard: expected a bool expression, got an int"),
    ("ctmc\nmodule M x : [0..2] init 3; endmodule\n",
     r"<string>:2:26: variable 'x': init value 3 is outside"),
    ("ctmc\n" + M + "module N y : [0..1]; [] true -> 1 : (x'=0); endmodule\n",
     r"<string>:3:37: module 'N' updates 'x', a variable of module 'M'"),
    ("ctmc\n" + M + "module N = M [a=b] endmodule\n", r"<string>:3:1: module 'N' = 'M': every variable"),
    ("ctmc\n" + M + "module N = P [x=y] endmodule\n", r"<string>:3:1: module 'N' renames 'P'"),
    ("ctmc\nmodule M x : [0..2]; [] sqrt(x) > 1 -> 1 : (x'=0); endmodule\n",
     r"<string>:2:25: unknown function 'sqrt'"),
    ("ctmc\nformula f = f + 1;\nmodule M x : [0..2]; [] f > 1 -> 1 : (x'=0); endmodule\n",
     r"<string>:2:13: formula 'f' is defined in terms of itself"),
    ("ctmc\nmodule M x : [0..2]; [] x < 1 < 2 -> 1 : (x'=0); endmodule\n",
     r"<string>:2:31: comparisons do not chain"),
    ("ctmc\nmodule A x : [0..2]; [a] true -> 1 : (x'=0); endmodule\n"
     "module B y : [0..2]; [a] true -> 1 : (x'=1); endmodule\n", r"<string>:3:38: module 'B' updates 'x'"),
    ("ctmc\nmodule M x : [0..2]; [] true -> -1 : (x'=0); endmodule\n", r"<string>:2:33: rate -1"),
    ("ctmc\nmodule M x : [0..2]; endmodule\ninit x = 0 endinit\nmodule N y : [0..1] init 1; endmodule\n",
     r"<string>:4:26: variable 'y' has an init value and the program an init"),
    ("ctmc\nmodule M x : [0..2]; [] mod(7, -3) = 1 -> 1 : (x'=0); endmodule\n",    # PRISM refuses it too
     r"<string>:2:25: mod: the divisor must be a positive int, got -3"),
    ("ctmc\nmodule M x : [0..2]; [] mod(x, 0) = 1 -> 1 : (x'=0); endmodule\n",
     r"<string>:2:25: mod: the divisor must be a positive int, got 0"),
]


@pytest.mark.parametrize("text, message", ERRORS, ids=[f"e{k}" for k in range(len(ERRORS))])
def test_refused_features_and_errors_name_the_line_and_column(text, message):
    with pytest.raises(PrismError, match=message):
        ctmc.prism.load(text).build()


def test_prism_error_is_a_model_error_with_its_position():
    with pytest.raises(ctmc.ModelError) as info:
        ctmc.prism.load("ctmc\n\n  pta\n")
    assert (info.value.file, info.value.line, info.value.column) == ("<string>", 3, 3)


MOD_PROGRAM = """ctmc
module M
  x : [0..4] init 0;
  y : [LO..3] init 3;
  [] mod(x + 6, 2*y - 3) = 0 & x < 4 -> 1 : (x'=x+1);
  [] y > LO -> 2 : (y'=y-1);
endmodule
"""


@pytest.mark.parametrize("engine", ["auto", "numpy"])
def test_mod_by_a_variable_divisor_below_one_is_refused_naming_the_state(engine):
    """PRISM's mod refuses a divisor <= 0: here ``2*y - 3`` is -1 at y=1 (never 0, so no division
    by zero hides it), in both builders; Python's ``%`` would give a remainder in ``-1..0``."""
    model = ctmc.prism.load(MOD_PROGRAM.replace("LO", "0"))
    with pytest.raises(ctmc.ModelError, match=r"mod\(\(x \+ 6\), \(\(2 \* y\) - 3\)\) has the divisor "
                                              r"-(1|3), not > 0, in state \(x=[0-4], y=[01]\)"):
        model.build(engine=engine)


def test_mod_by_a_positive_variable_divisor_is_pythons_remainder():
    """Where the divisor stays positive (y in 2..3: divisors 1 and 3) both builders give the rates
    that Python's integers give."""
    model = ctmc.prism.load(MOD_PROGRAM.replace("LO", "2"))
    a, b = model.build(engine="auto"), model.build(engine="numpy")
    assert a.build_info["engine"] == "compiled"
    for chain in (a, b):
        at = {(int(x), int(y)): i for i, (x, y) in enumerate(zip(chain.states["x"], chain.states["y"]))}
        for (x, y), i in at.items():
            want = 1.0 if (x + 6) % (2 * y - 3) == 0 and x < 4 else 0.0
            j = at.get((x + 1, y))                  # unreached where the guard never holds
            assert (chain.Q[i, j] if j is not None else 0.0) == want


# ---------------------------------------------------------------- properties: S=? and R=? [S]
@pytest.mark.parametrize("make, size", [(kanban, 1), (tandem, 5), (cluster, 2), (polling, 3), (fms, 1)],
                         ids=["kanban:1", "tandem:5", "cluster:2", "polling:3", "fms:1"])
def test_check_long_run_property_against_a_dense_solve(make, size):
    gm = make(size)
    chain = ctmc.prism.load(gm.prism_program(), constants=gm.prism_constants).build()
    res = ctmc.prism.check(chain, gm.prism_property)
    # independent: pi from a dense least-squares solve of pi Q = 0, sum pi = 1, and the gallery's own reward
    Q = chain.Q.toarray()
    A = np.vstack([Q.T, np.ones(chain.n_states)])
    pi = np.linalg.lstsq(A, np.r_[np.zeros(chain.n_states), 1.0], rcond=None)[0]
    ref = gm.chain()
    pa, pb = assert_same_chain(chain, ref)
    want = float(pi[pa] @ np.asarray(gm.reward(ref), dtype=float)[pb])
    assert res.status == ctmc.Status.SUCCESS and res.method.startswith("long_run(")
    assert res.value == pytest.approx(want, rel=1e-9, abs=1e-12)
    assert res.error_bound < 1e-6


def test_check_on_a_hand_built_chain_reads_its_variables_and_labels():
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, 4)
    m.event("arrival", guard=n < 4, rate=1.0, update={n: n + 1})
    m.event("departure", guard=n > 0, rate=2.0, update={n: n - 1})
    m.label("empty", n == 0)
    m.reward("size", n)
    chain = m.build(initial={"n": 0})
    pi = np.array([0.5 ** k for k in range(5)]) / sum(0.5 ** k for k in range(5))
    assert ctmc.prism.check(chain, 'S=? [ n >= 3 | "empty" ]').value == pytest.approx(pi[3] + pi[4] + pi[0])
    assert ctmc.prism.check(chain, 'R{"size"}=? [ S ]').value == pytest.approx(pi @ np.arange(5))
    assert ctmc.prism.check(chain, 'R=? [ S ]').value == pytest.approx(pi @ np.arange(5))


@pytest.mark.parametrize("prop, message", [
    ('P=? [ G "full" ]', r"<property>:1:7: G \(globally\) is not supported"),
    ('R{"size"}=? [ C ]', r"<property>:1:15: R=\? \[ C \] \(reward accumulated for ever\) is not supported"),
    ('S=? [ "nope" ]', r"<property>:1:7: label 'nope' is not a label of the chain"),
    ('S=? [ n + 1 ]', r"<property>:1:9: S=\? \[ phi \]: phi must be a bool expression"),
    ('S=? [ n > 1 ] x', r"<property>:1:15: unexpected 'x' after the property"),
    ('R{"other"}=? [ S ]', r"R\{'other'\}: no reward structure of that name"),
])
def test_check_refuses_unsupported_and_wrong_properties(prop, message):
    chain = ctmc.prism.load("""ctmc
    module q n : [0..2] init 0; [] n<2 -> 1 : (n'=n+1); [] n>0 -> 2 : (n'=n-1); endmodule
    label "full" = n = 2;
    rewards "size" true : n; endrewards""").build()
    with pytest.raises(PrismError, match=message):
        ctmc.prism.check(chain, prop)


def test_check_knows_prisms_init_label():
    chain = ctmc.prism.load("""ctmc
    module q n : [0..2] init 1; [] n<2 -> 1 : (n'=n+1); [] n>0 -> 2 : (n'=n-1); endmodule""").build()
    pi = np.array([4.0, 2.0, 1.0]) / 7.0          # detailed balance: pi_{k+1} = pi_k / 2
    assert ctmc.prism.check(chain, 'S=? [ "init" ]').value == pytest.approx(pi[1], rel=1e-12)


# ---------------------------------------------------------------- PRISM's own case-study files (optional)
#: PRISM's prism-examples/ctmcs files are GPL-2.0 and not copied here: point CTMC_PRISM_EXAMPLES at a
#: checkout's ``prism-examples/ctmcs`` folder to run these (file, constants, gallery model, unused variables)
EXAMPLES = os.environ.get("CTMC_PRISM_EXAMPLES", "")
PRISM_FILES = [("kanban/kanban.sm", {"t": 2}, kanban, 2, ()), ("fms/fms.sm", {"n": 2}, fms, 2, ("P1d",)),
               ("cluster/cluster.sm", {"N": 2}, cluster, 2, ()),
               ("tandem/tandem.sm", {"c": 5}, tandem, 5, ()),
               ("embedded/embedded.sm", {"MAX_COUNT": 2}, embedded, 2, ()),
               ("polling/poll3.sm", {}, polling, 3, ()), ("polling/poll5.sm", {}, polling, 5, ()),
               ("peer2peer/peer2peer4_4.sm", {}, peer2peer, 4, ())]


@pytest.mark.skipif(not EXAMPLES, reason="CTMC_PRISM_EXAMPLES (a prism-examples/ctmcs folder) is not set")
@pytest.mark.parametrize("file, constants, make, size, unused", PRISM_FILES, ids=[f[0] for f in PRISM_FILES])
def test_prisms_case_study_file_gives_the_gallery_chain(file, constants, make, size, unused):
    model = ctmc.prism.load(Path(EXAMPLES) / file, constants=constants)
    ours, ref = model.build(), make(size).chain()
    for name in unused:                       # a variable the gallery leaves out must be constant
        assert np.unique(ours.states[name]).size == 1
    names = [v.name for v in ref.model.variables]
    a, pa = _columns(ours, names)
    b, pb = _columns(ref, names)
    assert (ours.n_states, ours.n_transitions) == (ref.n_states, ref.n_transitions)
    np.testing.assert_array_equal(a[pa], b[pb])
    assert_same_generator(ours.Q[pa][:, pa], ref.Q[pb][:, pb])


def test_bool_and_double_constants_given_at_load():
    prog = """ctmc
    const bool fast; const double r;
    module M x : [0..1] init 0; [] x=0 -> (fast ? 10 * r : r) : (x'=1); [] x=1 -> 1 : (x'=0); endmodule"""
    for fast, want in ((True, 25.0), ("false", 2.5)):
        chain = ctmc.prism.load(prog, constants={"fast": fast, "r": 2.5}).build()
        assert chain.Q[chain.index(x=0), chain.index(x=1)] == want
    with pytest.raises(PrismError, match=r"constant 'fast' is declared bool, got 1"):
        ctmc.prism.load(prog, constants={"fast": 1, "r": 2})
