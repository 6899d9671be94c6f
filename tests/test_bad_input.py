"""Findings of the bad-input probe (issue "Trustworthy answers"): each refused early and clearly,
or read the one documented way. Each test failed on the code before the fix."""
import numpy as np
import pytest

import ctmc


def _mm1k(K=5):
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, K)
    m.event("a", guard=n < K, rate=1.0, update={n: n + 1})
    m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    return m


def _cycle3():
    return ctmc.CTMC([[-1.0, 1.0, 0.0], [0.0, -1.0, 1.0], [1.0, 0.0, -1.0]])


@pytest.mark.parametrize("p0", [np.array([0, 0, 1]), [0, 0, 1], [0, 0.0, 1], (0, 0, 1), np.array([0, 0, 1], np.int8)])
def test_an_integer_one_hot_vector_is_a_law(p0):
    # it was read as the set of states {0, 1} (p = [0.5, 0.5, 0])
    p = _cycle3().transient(p0, t=[0.0]).p
    assert p[0].tolist() == [0.0, 0.0, 1.0]


def test_index_sets_are_spelled_as_sets_and_a_non_law_vector_is_refused():
    c = _cycle3()
    assert c.transient({0, 1}, t=[0.0]).p[0].tolist() == [0.5, 0.5, 0.0]
    assert c.transient(range(3), t=[0.0]).p[0].tolist() == pytest.approx([1 / 3] * 3)
    assert c.transient([2], t=[0.0]).p[0].tolist() == [0.0, 0.0, 1.0]      # not of length n: indices
    with pytest.raises(ValueError, match="p0: a numeric vector of length 3 is read as a law"):
        c.transient([0, 1, 1], t=[0.0])
    with pytest.raises(ValueError, match="p0: a law must have shape"):
        c.transient([0.5, 0.5], t=[0.0])


def test_duplicate_event_names_are_refused():
    m = _mm1k()
    n = m.variables[0]
    with pytest.raises(ctmc.ModelError, match="'a': an event or immediate move of that name is already declared"):
        m.event("a", guard=n > 0, rate=3.0, update={n: n - 1})


def test_a_non_integer_initial_value_is_refused():
    with pytest.raises(ValueError, match="initial: n must be an integer, got 2.7"):
        _mm1k().build(initial={"n": 2.7})
    assert _mm1k().build(initial={"n": 2.0}).n_states == 6          # an integral float is fine


def test_a_non_boolean_guard_is_refused():
    m = ctmc.Model("g")
    n = m.var("n", 0, 5)
    m.event("a", guard=n - 4, rate=1.0, update={n: n + 1})
    with pytest.raises(ctmc.ModelError, match="'a': guard must be boolean"):
        m.build(initial={"n": 0})


def test_a_complex_generator_and_a_complex_s_are_refused():
    with pytest.raises(ValueError, match="Q: expected a real matrix"):
        ctmc.CTMC(np.array([[-1, 1], [1j, -1j]]))
    with pytest.raises(ValueError, match="s: expected real numbers >= 0"):
        _mm1k().build(initial={"n": 0}).hitting_laplace([0], s=1 + 1j)


def test_the_memory_guard_sees_the_address_space_limit():
    """Finding 8: the guard read only MemAvailable; under ``ulimit -v`` it must see the limit."""
    import subprocess
    import sys
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "
            "from ctmc._util import available_memory; print(available_memory())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert 0 < int(out.stdout) < 3 << 30


def test_the_cli_turns_a_memory_guard_into_one_line(monkeypatch, capsys):
    """Finding 7: StateSpaceTooLarge ended in a traceback naming an option the CLI lacks."""
    import ctmc._util
    from ctmc.cli import main
    monkeypatch.setattr(ctmc._util, "available_memory", lambda: 20 << 20)     # 20 MiB
    assert main(["jsq", "--K", "3000"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ctmc jsq: error:") and "GiB" in err[0]
    assert "raise max_memory" not in err[0]


def test_a_variable_of_another_model_is_named():
    c = _mm1k().build(initial={"n": 0})
    other = ctmc.Model("other").var("z", 0, 3)
    with pytest.raises(ValueError, match="variable 'z' is not a state variable here \\(variables: \\['n'\\]\\)"):
        c.hitting_times(other == 3)


def test_a_rate_function_of_the_wrong_length_is_named():
    m = ctmc.Model("r")
    k = m.var("k", 0, 5)
    m.event("grow", guard=k < 5, rate=lambda env: np.ones(3), update={k: k + 1})
    m.event("d", guard=k > 0, rate=1.0, update={k: k - 1})
    with pytest.raises(ctmc.ModelError, match="event 'grow': its rate gave 3 values for"):
        m.build(initial={"k": 0})


@pytest.mark.parametrize("call,name", [(lambda c: c.transient([0], t=[]), "t"),
                                       (lambda c: c.hitting_laplace([0], s=[]), "s"),
                                       (lambda c: c.first_passage([0], t=np.array([])), "t")])
def test_empty_time_and_transform_lists_say_so(call, name):
    c = _mm1k().build(initial={"n": 0})
    with pytest.raises(ValueError, match=f"{name}: no values given"):
        call(c)


def test_saturation_mean_refuses_to_overflow_and_points_at_the_log_form():
    from ctmc.models.jsq import log_saturation_mean, saturation_mean
    with pytest.raises(OverflowError, match="use log_saturation_mean"):
        saturation_mean(5000, 0.9, 0.5, states=[(0, 0)])
    assert np.isfinite(log_saturation_mean(5000, 0.9, 0.5, states=[(0, 0)])).all()


def test_a_capacity_beyond_reach_costs_nothing():
    """Finding 6: capacity=30_000_000 used 1.7 GB for 49 states and capacity=1e9 died of
    MemoryError. Under a 2 GiB address-space limit, capacity=1e9 must give the measures
    of capacity=R (levels above R + 1 are unreachable under the instant policy)."""
    import subprocess
    import sys
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30)); "
            "from ctmc.models.hysteresis import HysteresisQueue; "
            "q = HysteresisQueue(10, 20, 30, 1.2, 0.6, capacity=10**9); s = q.summary(); "
            "print(q.chain().n_states, q.chain().build_info['strategy'], repr(s['loss']), repr(s['E[N]']))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-500:]
    n, strategy, loss, en = out.stdout.split()
    from ctmc.models.hysteresis import HysteresisQueue
    ref = HysteresisQueue(10, 20, 30, 1.2, 0.6).summary()
    assert int(n) == 49 and strategy == "bfs"
    assert float(loss) == pytest.approx(ref["loss"], rel=1e-12)
    assert float(en) == pytest.approx(ref["E[N]"], rel=1e-12)


def test_build_auto_takes_a_short_search_before_a_huge_box():
    m = ctmc.Model("far")
    n, k = m.var("n", 0, 5), m.var("k", 0, 10**7)          # k never moves: the box is 6e7 points
    m.event("a", guard=n < 5, rate=1.0, update={n: n + 1})
    m.event("d", guard=n > 0, rate=1.0, update={n: n - 1})
    c = m.build(initial={"n": 0, "k": 0}, engine="numpy")
    assert c.n_states == 6 and c.build_info["strategy"] == "bfs"
    assert "ended within" in c.build_info["strategy_reason"] or "box x events" in c.build_info["strategy_reason"]
    c = m.build(initial={"n": 0, "k": 0})           # the compiled search never expands the box either
    assert c.n_states == 6 and c.build_info["strategy"] == "bfs"
    assert c.build_info["engine"] == ("compiled" if ctmc._compiled.available() else "numpy")


def test_the_cli_ends_an_overflowing_answer_with_one_line(capsys):
    """Finding 1: ``ctmc jsq --K 20 --rho 1e-300`` printed nan and exited 0."""
    from ctmc.cli import main
    assert main(["jsq", "--K", "20", "--rho", "1e-300"]) == 1
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ctmc jsq: error:") and "inaccurate" in err[0]
    assert "nan" not in captured.out


def test_a_dict_naming_unknown_variables_names_the_parameter():
    c = _mm1k().build(initial={"n": 0})
    with pytest.raises(ValueError, match="p0: give exactly the variables \\['n'\\], got \\['m'\\]"):
        c.transient({"m": 1}, t=1.0)
    with pytest.raises(ValueError, match="target: give exactly the variables"):
        c.hitting_times({"m": 1})


def test_the_cgroup_limit_counts_reclaimable_cache_as_free(tmp_path, monkeypatch):
    """The tightest limit of the cgroup and its ancestors, inactive file cache not counted as used."""
    import ctmc._util as u
    leaf, parent = tmp_path / "leaf", tmp_path
    leaf.mkdir()
    (leaf / "memory.max").write_text("max\n")                 # no limit at the leaf ...
    (parent / "memory.max").write_text("1000000000\n")        # ... its parent has one
    (parent / "memory.current").write_text("600000000\n")
    (parent / "memory.stat").write_text("anon 400000000\ninactive_file 100000000\n")
    monkeypatch.setattr(u, "_cgroup_dirs", lambda: [(2, str(leaf)), (2, str(parent))])
    assert u._cgroup_left() == 1000000000 - (600000000 - 100000000)
    monkeypatch.setattr(u, "_cgroup_dirs", lambda: [(2, str(leaf))])
    assert u._cgroup_left() is None


def test_the_short_search_before_the_box_never_refuses_what_the_box_builds():
    """The probe's memory guard is stricter than the box's: under a limit between the two,
    auto must still build (review finding on the probe)."""
    m = ctmc.Model("cube")
    vs = [m.var(f"x{i}", 0, 20) for i in range(3)]
    for i, v in enumerate(vs):
        m.event(f"up{i}", guard=v < 20, rate=1.0, update={v: v + 1})
        m.event(f"dn{i}", guard=v > 0, rate=2.0, update={v: v - 1})
    init = {f"x{i}": 0 for i in range(3)}
    box = m.build(init, strategy="box", max_memory=3_000_000)
    auto = m.build(init, max_memory=3_000_000)
    assert auto.n_states == box.n_states == 21 ** 3
    assert (auto.Q != box.Q).nnz == 0


def test_rewards_and_expectations_must_be_finite():
    m = _mm1k()
    n = m.variables[0]
    c = m.build(initial={"n": 0})
    with pytest.raises(ValueError, match="reward 'r': values must be finite, got nan at state 0"):
        ctmc.CTMC(c.Q, rewards={"r": np.r_[np.nan, np.ones(c.n_states - 1)]})
    with pytest.raises(ValueError, match="reward: values must be finite"):
        c.stationary().expect(n / 0)


def test_a_target_must_be_a_condition():
    m = _mm1k()
    n = m.variables[0]
    c = m.build(initial={"n": 0})
    with pytest.raises(ValueError, match="target: expected a condition"):
        c.prob_within(n + 1, 1.0)


def test_an_immediate_weight_must_be_a_number_and_the_move_is_named():
    m = _mm1k()
    n = m.variables[0]
    with pytest.raises(ctmc.ModelError, match="immediate move 'w': weight: cannot use str"):
        m.immediate("w", guard=n == 0, update={n: 1}, weight="a")


def test_a_service_speed_must_be_finite_and_positive():
    from ctmc import ph
    m = _mm1k()
    n = m.variables[0]
    with pytest.raises(ValueError, match="speed: must be finite and > 0"):
        ph.add_service(m, ph.erlang(2, 1.0), n, speed=-1)


def test_an_update_naming_a_variable_twice_is_refused():
    m = ctmc.Model("twice")
    x = m.var("x", 0, 3)
    with pytest.raises(ctmc.ModelError, match="names variable 'x' twice"):
        m.event("e", guard=x == 0, rate=1.0, update={x: 3, "x": 3})
