"""``ctmc solve FILE``: every option against independent answers, every format parsed, the errors.

The model file is a tandem of two M/M/1 stations: station 1 has capacity K
(arrivals lost when full) and is never blocked, because a customer finding
station 2 full is lost there. So ``n1`` alone is the birth-death chain of an
M/M/1/K queue, whose closed forms are the references:

- stationary law of ``n1``: ``(1 - r) r^k / (1 - r^(K+1))``, ``r = lam / mu1``;
- mean time from empty to ``n1 == K``: ``sum_{k<K} m_k``, ``m_k = sum_{j<=k} (mu1/lam)^j / lam``;
- throughput of arrivals: ``lam (1 - pi_K)``;
- transient law and ``P(T <= t)`` of ``n1``: the matrix exponential of the
  (K+1)-state birth-death generator (scipy.linalg.expm, not ctmc).

Per-state answers on the whole 2-variable chain are checked against direct
calls of ctmc's API on the same model.
"""
import csv
import io
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

import ctmc
import ctmc.io
from ctmc.cli import main
from ctmc.exprparse import eval_on_chain, parse_expr

K, K2, LAM, MU1, MU2 = 4, 3, 1.0, 2.0, 1.5

MODEL = textwrap.dedent(f"""
    import ctmc

    K, K2 = {K}, {K2}
    model = ctmc.Model("tandem")
    n1 = model.var("n1", 0, K)
    n2 = model.var("n2", 0, K2)
    model.event("arrive", guard=n1 < K, rate={LAM}, update={{n1: n1 + 1}})
    # station 1 is never blocked: a customer finding station 2 full is lost
    model.event("move", guard=n1 > 0, rate={MU1}, update={{n1: n1 - 1, n2: ctmc.minimum(n2 + 1, K2)}})
    model.event("depart", guard=n2 > 0, rate={MU2}, update={{n2: n2 - 1}})
    model.label("full", n1 == K)
    model.reward("queue", n1 + n2)
    initial = {{"n1": 0, "n2": 0}}
    """)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("solve") / "tandem.py"
    path.write_text(MODEL)
    return path


@pytest.fixture(scope="module")
def chain(model_file):
    ns = {}
    exec(compile(MODEL, str(model_file), "exec"), ns)
    return ns["model"].build(initial=ns["initial"])


def solve(capsys, *argv):
    """Run ``ctmc solve`` in-process; return (exit status, stdout, stderr)."""
    try:
        status = main(["solve", *map(str, argv)])
    except SystemExit as exc:
        status = exc.code
    out = capsys.readouterr()
    return status, out.out, out.err


def solve_json(capsys, *argv):
    status, out, err = solve(capsys, *argv, "--format", "json")
    assert status == 0, err
    return json.loads(out)


# closed forms of the M/M/1/K queue n1 ------------------------------------------------

def mm1k_law():
    r = LAM / MU1
    return np.array([(1 - r) * r ** k / (1 - r ** (K + 1)) for k in range(K + 1)])


def birth_death(absorbing_top=False):
    G = np.zeros((K + 1, K + 1))
    for k in range(K):
        G[k, k + 1] = LAM
        G[k + 1, k] = MU1
    if absorbing_top:
        G[K, :] = 0.0
    return G - np.diag(G.sum(axis=1))


def column(doc, name):
    return np.array([np.inf if r[name] is None else r[name] for r in doc["rows"]])


# ---------------------------------------------------------------------------
# the analyses against independent answers

def test_stationary_table_shows_most_probable_states_and_evidence(capsys, model_file, chain):
    status, out, err = solve(capsys, model_file, "--rows", "3", "--expect", "n1", "--marginal", "n1")
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"tandem: {chain.n_states} states")
    assert lines[2].split() == ["n1", "n2", "probability"]
    pi = chain.stationary().pi
    top = np.argsort(-pi)[:3]
    shown = [tuple(int(x) for x in ln.split()[:2]) for ln in lines[4:7]]
    assert shown == [(int(chain.states["n1"][i]), int(chain.states["n2"][i])) for i in top]
    assert f"showing the 3 most probable of {chain.n_states} rows" in out
    E = float(out.split("E[n1] = ")[1].split()[0])
    assert E == pytest.approx(mm1k_law() @ np.arange(K + 1), rel=1e-9)
    ev = lines[-1]
    assert ev.startswith("evidence: method ") and "status success" in ev and "residual" in ev
    assert "error bound" in ev and ev.endswith(" s")


def test_stationary_json_closed_form_and_api(capsys, model_file, chain):
    doc = solve_json(capsys, model_file, "--stationary", "--expect", "n1", "--expect", "queue",
                     "--marginal", "n1", "--marginal", "n1 + n2")
    law = mm1k_law()
    marg = doc["marginals"]["n1"][""]
    assert [marg[str(k)] for k in range(K + 1)] == pytest.approx(law, rel=1e-10)
    assert doc["values"]["E[n1]"] == pytest.approx(law @ np.arange(K + 1), rel=1e-10)
    res = chain.stationary()
    assert len(doc["rows"]) == chain.n_states
    assert column(doc, "probability") == pytest.approx(res.pi, rel=1e-10, abs=1e-300)
    assert doc["values"]["E[queue]"] == pytest.approx(res.expect("queue"), rel=1e-12)
    assert sum(doc["marginals"]["n1 + n2"][""].values()) == pytest.approx(1.0)
    ev = doc["evidence"]
    assert set(ev) >= {"method", "status", "residual", "error_bound", "wall_time"}
    assert ev["status"] == "success" and ev["residual"] < 1e-12 and ev["error_bound"] < 1e-8


def test_csv_has_every_state_and_parses(capsys, model_file, chain):
    status, out, err = solve(capsys, model_file, "--format", "csv", "--rows", "2")
    assert status == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == chain.n_states
    pi = np.array([float(r["probability"]) for r in rows])
    assert pi == pytest.approx(chain.stationary().pi, rel=1e-12)
    assert [int(r["n2"]) for r in rows] == chain.states["n2"].tolist()
    assert pi.sum() == pytest.approx(1.0)


def test_hitting_times_closed_form_and_moments(capsys, model_file, chain):
    doc = solve_json(capsys, model_file, "--hitting", "full", "--moments", "2")
    m = [sum((MU1 / LAM) ** j / LAM for j in range(k + 1)) for k in range(K)]
    assert doc["values"]["E[T] from (n1=0, n2=0)"] == pytest.approx(sum(m), rel=1e-10)
    h = chain.hitting_times(chain.states["n1"] == K, moments=2)
    assert column(doc, "E[T]") == pytest.approx(h.mean, rel=1e-10)
    assert column(doc, "E[T^2]") == pytest.approx(h.moments[1], rel=1e-10)
    # the same set written as an expression of the variables and as a label: one answer
    doc2 = solve_json(capsys, model_file, "--hitting", "n1 == 4 and not n1 < 4")
    assert column(doc2, "E[T]") == pytest.approx(h.mean, rel=1e-12)


def test_transient_against_expm(capsys, model_file):
    ts = [0.5, 2.0]
    doc = solve_json(capsys, model_file, "--transient", *ts, "--expect", "n1", "--marginal", "n1")
    G = birth_death()
    for t in ts:
        p = scipy.linalg.expm(G * t)[0]
        marg = doc["marginals"]["n1"][f"t={t:g}"]
        assert [marg[str(k)] for k in range(K + 1)] == pytest.approx(p, rel=1e-9, abs=1e-14)
        assert doc["values"][f"E[n1] at t={t:g}"] == pytest.approx(p @ np.arange(K + 1), rel=1e-9)
        assert sum(column(doc, f"P(t={t:g})")) == pytest.approx(1.0, abs=1e-12)


def test_transient_from_initial_option(capsys, model_file, chain):
    doc = solve_json(capsys, model_file, "--transient", "1", "--initial", "n1=2,n2=1")
    ref = chain.transient({"n1": 2, "n2": 1}, 1.0).p
    assert column(doc, "P(t=1)") == pytest.approx(ref, rel=1e-10, abs=1e-15)


def test_prob_within_against_expm(capsys, model_file, chain):
    doc = solve_json(capsys, model_file, "--prob-within", "n1 >= 4", "1,3")
    E = scipy.linalg.expm
    G = birth_death(absorbing_top=True)
    for t in (1.0, 3.0):
        exact = E(G * t)[0, K]
        assert doc["values"][f"P(T<={t:g}) from (n1=0, n2=0)"] == pytest.approx(exact, rel=1e-9)
    per_state = chain.prob_within(chain.states["n1"] == K, 3.0).values
    assert column(doc, "P(T<=3)") == pytest.approx(per_state, rel=1e-12, abs=1e-15)


def test_throughput_closed_form(capsys, model_file):
    doc = solve_json(capsys, model_file, "--throughput", "arrive", "--throughput", "move")
    exact = LAM * (1 - mm1k_law()[K])
    values = {r["event"]: r["throughput"] for r in doc["rows"]}
    assert values["arrive"] == pytest.approx(exact, rel=1e-10)
    assert values["move"] == pytest.approx(exact, rel=1e-10)       # flow conservation at station 1
    status, out, err = solve(capsys, model_file, "--throughput", "arrive")
    assert status == 0 and out.splitlines()[-1].startswith("evidence:") and "0.967742" in out


def test_method_is_passed_through(capsys, model_file, chain):
    doc = solve_json(capsys, model_file, "--method", "lu")
    assert doc["evidence"]["method"] == "lu"
    assert column(doc, "probability") == pytest.approx(chain.stationary().pi, rel=1e-9)


# ---------------------------------------------------------------------------
# the expression parser

@pytest.mark.parametrize("text, bad", [
    ("__import__('os')", "call of '__import__'"),
    ("n1.real", "attribute access 'n1.real'"),
    ("open('x')", "call of 'open'"),
    ("n1 + n3", "unknown name 'n3'"),
    ("n1[0]", "subscript"),
    ("(lambda: 1)()", "call of 'lambda: 1'"),
    ("'n1'", "str constant"),
    ("n1 +", "expression 'n1 +'"),
])
def test_bad_expressions_are_one_line_usage_errors(capsys, model_file, text, bad):
    status, out, err = solve(capsys, model_file, "--hitting", text)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and bad in err, err


def test_parser_operators(chain):
    S = chain.states
    n1, n2 = S["n1"], S["n2"]
    cases = {
        "n1 + 2 * n2 - n1 // 2 + n1 % 2 + n2 ** 2 / 4": n1 + 2 * n2 - n1 // 2 + n1 % 2 + n2 ** 2 / 4,
        "min(n1, n2, 2) + max(n1, n2)": np.minimum(np.minimum(n1, n2), 2) + np.maximum(n1, n2),
        "where(n1 > n2, n1, -n2) + abs(n1 - n2)": np.where(n1 > n2, n1, -n2) + np.abs(n1 - n2),
    }
    for text, ref in cases.items():
        assert eval_on_chain(text, chain).tolist() == ref.astype(float).tolist(), text
    masks = {
        "1 <= n1 < 3": (1 <= n1) & (n1 < 3),
        "n1 == 0 or n2 == 0 and not full": (n1 == 0) | ((n2 == 0) & ~(n1 == K)),
        "(n1 > 0) & ~(n2 > 0) | full": ((n1 > 0) & ~(n2 > 0)) | (n1 == K),
        "full": n1 == K,
    }
    for text, ref in masks.items():
        assert eval_on_chain(text, chain, boolean=True).tolist() == ref.tolist(), text
    with pytest.raises(ValueError, match="needs a condition"):
        eval_on_chain("n1 + 1", chain, boolean=True)
    with pytest.raises(ValueError, match="unknown name 'os'"):
        parse_expr("os", ["n1"])


# ---------------------------------------------------------------------------
# exit statuses and the model file's shapes

def test_exit_statuses(capsys, model_file, tmp_path):
    assert solve(capsys, model_file, "--transient", "1")[0] == 0
    # usage errors: 2, one line
    for argv in ([model_file, "--method", "nope"], [model_file, "--throughput", "nope"],
                 [model_file, "--hitting", "n1 > 99"], [model_file, "--transient", "1", "--moments", "2"],
                 [model_file, "--format", "csv", "--expect", "n1"], [tmp_path / "missing.py"],
                 [model_file, "--initial", "n1=99,n2=0"]):
        status, out, err = solve(capsys, *argv)
        assert status == 2 and err.count("\n") == 1 and err.startswith("ctmc solve: error: "), (argv, err)
    # a solver failure: 1, one line (power iteration on a nearly decomposable chain)
    slow = tmp_path / "slow.py"
    slow.write_text(textwrap.dedent("""
        import ctmc
        model = ctmc.Model("nearly decomposable")
        x = model.var("x", 0, 3)
        model.event("up", guard=x < 3, rate=ctmc.where(x == 1, 1e-9, 1.0), update={x: x + 1})
        model.event("down", guard=x > 0, rate=ctmc.where(x == 2, 1e-9, 1.0), update={x: x - 1})
        initial = {"x": 0}
        """))
    status, out, err = solve(capsys, slow, "--method", "power")
    assert status == 1 and out == "" and err.count("\n") == 1 and "power" in err, err


def test_model_file_errors_name_the_line(capsys, tmp_path):
    crash = tmp_path / "crash.py"
    crash.write_text("import ctmc\n\nx = 1 / 0\n")
    status, _, err = solve(capsys, crash)
    assert status == 2 and f"{crash}:3: ZeroDivisionError" in err
    out_of_bounds = tmp_path / "oob.py"
    out_of_bounds.write_text(textwrap.dedent("""
        import ctmc
        m = ctmc.Model("oob")
        n = m.var("n", 0, 3)
        m.event("a", guard=n < 3, rate=1.0, update={n: n + 2})
        initial = {"n": 0}
        """))
    status, _, err = solve(capsys, out_of_bounds)
    assert status == 2 and "update leaves the declared bounds" in err and err.count("\n") == 1


def test_choosing_the_model(capsys, tmp_path):
    path = tmp_path / "two.py"
    path.write_text(textwrap.dedent("""
        import ctmc

        def mm1(name, lam, mu):
            m = ctmc.Model(name)
            n = m.var("n", 0, 2)
            m.event("a", guard=n < 2, rate=lam, update={n: n + 1})
            m.event("d", guard=n > 0, rate=mu, update={n: n - 1})
            return m

        slow = mm1("slow", 1.0, 1.0)
        fast = mm1("fast", 1.0, 2.0)
        chain = fast.build(initial={"n": 1})   # a chain the file built: counts as the model fast
        """))
    status, _, err = solve(capsys, path)
    assert status == 2 and "several models: slow (Model), fast (Model)" in err and "--model NAME" in err
    status, _, err = solve(capsys, path, "--model", "slow")
    assert status == 2 and "no initial state" in err and '--initial "n=0"' in err
    doc = solve_json(capsys, path, "--model", "slow", "--initial", "n=0")
    assert column(doc, "probability") == pytest.approx([1 / 3] * 3)
    doc = solve_json(capsys, path, "--model", "fast", "--transient", "0")   # the file's own chain and initial
    assert column(doc, "P(t=0)").tolist() == [0.0, 1.0, 0.0]
    status, _, err = solve(capsys, path, "--model", "nothing")
    assert status == 2 and "defines no 'nothing'" in err

    built = tmp_path / "built.py"
    built.write_text(textwrap.dedent("""
        import ctmc

        def build(K=3):
            m = ctmc.Model("built")
            n = m.var("n", 0, K)
            m.event("a", guard=n < K, rate=1.0, update={n: n + 1})
            m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
            return m.build(initial={"n": 0})
        """))
    doc = solve_json(capsys, built)
    assert column(doc, "probability") * 15 == pytest.approx([8, 4, 2, 1])
    none = tmp_path / "none.py"
    none.write_text("import ctmc\nx = 1\n")
    status, _, err = solve(capsys, none)
    assert status == 2 and "defines no ctmc.Model" in err


# ---------------------------------------------------------------------------
# interchange files written by ctmc.io

def test_interchange_files(capsys, chain, tmp_path):
    pi = chain.stationary().pi
    h = chain.hitting_times(chain.states["n1"] == K).mean
    paths = {
        "drn": ctmc.io.write_drn(chain, tmp_path / "tandem.drn"),
        "tra": Path(ctmc.io.write_prism(chain, tmp_path / "tandem")[0]),
        "npz": ctmc.io.save_npz(chain, tmp_path / "tandem.npz"),
    }
    for kind, path in paths.items():
        doc = solve_json(capsys, path, "--expect", "queue", "--marginal", "n1")
        assert column(doc, "probability") == pytest.approx(pi, rel=1e-10), kind
        marg = doc["marginals"]["n1"][""]
        assert [marg[str(k)] for k in range(K + 1)] == pytest.approx(mm1k_law(), rel=1e-9)
        queue = chain.states["n1"] + chain.states["n2"]
        assert doc["values"]["E[queue]"] == pytest.approx(float(pi @ queue))
        doc = solve_json(capsys, path, "--hitting", "full")      # the label, read back from the file
        assert column(doc, "E[T]") == pytest.approx(h, rel=1e-10), kind
        assert doc["values"]["E[T] from (n1=0, n2=0)"] == pytest.approx(h[0], rel=1e-10)
    status, _, err = solve(capsys, paths["drn"], "--model", "x")
    assert status == 2 and "--model is for Python files" in err


# ---------------------------------------------------------------------------
# the installed command

def test_installed_command(model_file):
    exe = Path(sys.executable).parent / "ctmc"
    if not exe.exists():
        pytest.skip(f"no installed ctmc command beside {sys.executable}")
    proc = subprocess.run([str(exe), "solve", str(model_file), "--format", "json", "--hitting", "full"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["analysis"] == "hitting" and doc["evidence"]["status"] == "success"
    proc = subprocess.run([str(exe), "solve", str(model_file), "--hitting", "n1.real"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_report_plots_option_is_the_shared_one(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["report", "--help"])
    assert exc.value.code == 0
    assert "without it no figure is made" in " ".join(capsys.readouterr().out.split())
