"""Model declaration, exploration, assembly, and a 2-D chain against closed forms."""
import numpy as np
import pytest
import scipy.sparse as sp

import ctmc
from ctmc.cli import core_study, main

from chains import jsq, saturation_mean_closed_form


def test_jsq_published_design_numbers():
    # rho = 0.9, mu1 = mu2 = nu = 1/2, K = 10 (design notes: 0.0152027282106 and 460.2416647)
    m, s, l = jsq(10)
    chain = m.build(initial={"s": 0, "l": 0})
    assert chain.n_states == 66
    pi = chain.stationary().pi
    assert pi[chain.index(s=10, l=10)] == pytest.approx(0.0152027282106, rel=1e-11)
    h = chain.hitting_times((s == 10) & (l == 10))
    assert h.mean[chain.index(s=0, l=0)] == pytest.approx(460.2416647, rel=1e-9)


@pytest.mark.parametrize("solver", ["gth", "lu"])
@pytest.mark.parametrize("K,rho,mu1,nu", [(8, 0.9, 0.5, 0.5), (12, 1.3, 0.3, 0.7), (20, 0.5, 0.8, 1.0),
                                          (60, 0.8, 0.5, 0.2)])
def test_jsq_saturation_times_every_state(solver, K, rho, mu1, nu):
    m, s, l = jsq(K, rho, mu1, nu)
    chain = m.build(initial={"s": 0, "l": 0})
    h = chain.hitting_times((s == K) & (l == K), method=solver)
    xs, ys = chain.states["s"], chain.states["l"]
    exact = np.array([saturation_mean_closed_form(K, rho, mu1, nu, x, y) for x, y in zip(xs, ys)])
    assert np.allclose(h.mean, exact, rtol=1e-9, atol=0)


def test_rare_target_sparse_lu_goes_regenerative_and_stays_accurate():
    # E_(0,0)[tau] ~ 1e28: plain sparse LU loses every digit here
    K, rho = 300, 0.9
    m, s, l = jsq(K, rho)
    chain = m.build(initial={"s": 0, "l": 0})
    h = chain.hitting_times((s == K) & (l == K), method="lu")
    assert h.method == "lu-regenerative" and h.status is ctmc.Status.SUCCESS
    for x, y in [(0, 0), (100, 200), (K - 1, K)]:
        ex = saturation_mean_closed_form(K, rho, 0.5, 0.5, x, y)
        assert h.mean[chain.index(s=x, l=y)] == pytest.approx(ex, rel=1e-9)
    # blocking probability: P_block = 1 / (1 + E_(K-1,K)[tau])  (rate-1 check of the design notes)
    pb = chain.stationary().pi[chain.index(s=K, l=K)]
    assert pb == pytest.approx(1 / (1 + h.mean[chain.index(s=K - 1, l=K)]), rel=1e-9)


def test_event_rates_give_throughputs():
    m, s, l = jsq(10)
    chain = m.build(initial={"s": 0, "l": 0})
    pi = chain.stationary().pi
    blocked = pi @ chain.event_rate("blocked")
    assert blocked == pytest.approx(0.9 * pi[chain.index(s=10, l=10)], rel=1e-14)
    # flow balance: accepted arrivals = departures
    arr = pi @ (chain.event_rate("arrive_short") + chain.event_rate("arrive_equal"))
    dep = pi @ sum(chain.event_rate(e) for e in ["serve_short", "serve_long", "serve_equal", "serve_alone"])
    assert arr == pytest.approx(dep, rel=1e-12)


def test_box_and_bfs_build_the_same_chain():
    m, s, l = jsq(30)
    a = m.build(initial={"s": 0, "l": 0}, strategy="box")
    b = m.build(initial={"s": 0, "l": 0}, strategy="bfs")
    assert a.n_states == b.n_states == 31 * 32 // 2
    assert (a.Q != b.Q).nnz == 0
    assert np.array_equal(a.states.as_array(), b.states.as_array())
    # rows sum to zero, off-diagonals non-negative
    assert np.allclose(np.asarray(a.Q.sum(axis=1)).ravel(), 0, atol=1e-15)
    off = a.Q - sp.diags(a.Q.diagonal())
    assert off.min() >= 0


@pytest.mark.parametrize("dense_index", [True, False])
def test_box_and_bfs_agree_on_a_gallery_model(monkeypatch, dense_index):
    """Both search indexes (a table over the box, the sorted runs) give the box strategy's chain."""
    from ctmc import exploration as model_mod
    from ctmc.models.gallery import GALLERY
    g = GALLERY["cluster"](3)
    a = g.model().build(initial=g.initial, strategy="box")
    if not dense_index:
        monkeypatch.setattr(model_mod, "_BITMAP_SHARE", 0.0)
    b = g.model().build(initial=g.initial, strategy="bfs")
    assert a.n_states == b.n_states and (a.Q != b.Q).nnz == 0
    assert np.array_equal(a.states.as_array(), b.states.as_array())


def test_auto_strategy_says_why():
    from ctmc.models.gallery import GALLERY
    g = GALLERY["cluster"](16)
    info = g.chain().build_info
    assert info["strategy"] in ("box", "bfs") and str(info["box"]) in info["strategy_reason"]


def test_generator_matches_hand_built_matrix():
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, 3)
    m.event("a", guard=n < 3, rate=2.0, update={n: n + 1})
    m.event("d", guard=n > 0, rate=n * 1.0, update={n: n - 1})  # state-dependent rate
    chain = m.build(initial={"n": 0})
    Q = np.array([[-2, 2, 0, 0], [1, -3, 2, 0], [0, 2, -4, 2], [0, 0, 3, -3]], dtype=float)
    assert np.array_equal(chain.Q.toarray(), Q)


def test_only_reachable_states_are_kept():
    m = ctmc.Model("even")
    x = m.var("x", 0, 10)
    m.event("up2", guard=x <= 8, rate=1.0, update={x: x + 2})
    m.event("down2", guard=x >= 2, rate=1.0, update={x: x - 2})
    chain = m.build(initial={"x": 0})
    assert chain.states["x"].tolist() == [0, 2, 4, 6, 8, 10]
    with pytest.raises(ValueError, match="not a .*state"):
        chain.index(x=3)


def test_zero_rate_transitions_do_not_make_states_reachable():
    m = ctmc.Model("z")
    x = m.var("x", 0, 5)
    m.event("up", guard=x < 5, rate=ctmc.where(x < 2, 1.0, 0.0), update={x: x + 1})
    m.event("down", guard=x > 0, rate=1.0, update={x: x - 1})
    for strategy in ["box", "bfs"]:
        assert m.build(initial={"x": 0}, strategy=strategy).n_states == 3


def test_out_of_bounds_update_names_event_and_state():
    m = ctmc.Model("bad")
    n = m.var("n", 0, 4)
    m.event("arrival", guard=n >= 0, rate=1.0, update={n: n + 1})
    for strategy in ["box", "bfs"]:
        with pytest.raises(ctmc.ModelError, match=r"'arrival'.*n=4"):
            m.build(initial={"n": 0}, strategy=strategy)


def test_invalid_declarations():
    m = ctmc.Model("bad")
    with pytest.raises(ctmc.ModelError, match="lo <= hi"):
        m.var("n", 3, 1)
    n = m.var("n", 0, 3)
    with pytest.raises(ctmc.ModelError, match="already declared"):
        m.var("n", 0, 3)
    with pytest.raises(ctmc.ModelError, match="rate"):
        m.event("neg", rate=-1.0, update={n: n + 1})
    m.event("nan", guard=n < 3, rate=ctmc.where(n == 1, np.nan, 1.0), update={n: n + 1})
    with pytest.raises(ctmc.ModelError, match="invalid rate"):
        m.build(initial={"n": 0})
    with pytest.raises(ValueError, match="initial"):
        m.build(initial={"n": 7})
    with pytest.raises(ValueError, match="missing"):
        m.build(initial={})
    with pytest.raises(TypeError, match="truth value"):
        bool(n < 3)


def test_memory_guard_refuses_before_building():
    m, s, l = jsq(2000)
    with pytest.raises(ctmc.StateSpaceTooLarge, match="max_memory"):
        m.build(initial={"s": 0, "l": 0}, max_memory=10_000_000)
    with pytest.raises(ctmc.StateSpaceTooLarge):
        m.build(initial={"s": 0, "l": 0}, strategy="bfs", max_memory=1_000_000)


def test_ctmc_from_matrix_validation():
    with pytest.raises(ValueError, match="square"):
        ctmc.CTMC(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="sum to 0"):
        ctmc.CTMC([[-1.0, 2.0], [1.0, -1.0]])
    with pytest.raises(ValueError, match=">= 0"):
        ctmc.CTMC([[1.0, -1.0], [1.0, -1.0]])
    with pytest.raises(ValueError, match="NaN"):
        ctmc.CTMC([[np.nan, 0.0], [0.0, 0.0]])
    c = ctmc.CTMC([[-1.0, 1.0], [2.0, -2.0]], states={"up": np.array([0, 1])})
    assert c.index(up=1) == 1 and c.where(lambda st: st["up"] == 1).tolist() == [False, True]


def test_transient_against_dense_expm_and_stationary_limit():
    import scipy.linalg as sla
    m, s, l = jsq(6)
    chain = m.build(initial={"s": 0, "l": 0})
    times = [0.0, 0.5, 3.0, 20.0]
    p0 = {"s": 0, "l": 0}
    for method in ["uniformization", "expm"]:
        r = chain.transient(p0, times, method=method)
        e0 = np.zeros(chain.n_states)
        e0[0] = 1.0
        for k, t in enumerate(times):
            assert np.allclose(r.p[k], e0 @ sla.expm(chain.Q.toarray() * t), atol=1e-11)
    late = chain.transient(p0, [400.0])
    assert np.allclose(late.p[0], chain.stationary().pi, atol=1e-10)
    assert late.expect(chain.states["l"])[0] == pytest.approx(chain.stationary().expect(chain.states["l"]), rel=1e-8)
    with pytest.raises(ValueError, match="p0"):
        chain.transient(np.full(chain.n_states, 0.5), [1.0])


def test_core_study_and_cli_run(capsys):
    table = core_study(K_mm1=200, N_cyclic=20)
    # every row reports a relative error against its closed form: all tiny
    errs = [float(line.split()[-3]) for line in table.splitlines()[3:]]
    assert len(errs) == 3 and max(errs) < 1e-9
    assert main(["demo"]) == 0
    assert "closed form" in capsys.readouterr().out


def _fake_family(run):
    import types
    fam = types.ModuleType("fake_family", "A family that only fails (tests of the CLI's error handling).")
    fam.add_arguments = lambda parser: None
    fam.run = run
    fam.report = lambda plots_dir: "fake report"
    return fam


def test_cli_keeps_model_errors_as_errors(monkeypatch):
    # a ModelError from a family is a bug in a model, not a usage error: it must
    # surface with its traceback, not become "exit 2" like a bad parameter
    import ctmc.cli
    from ctmc.results import ModelError

    def broken(args):
        raise ModelError("event 'x': update leaves the bounds")

    monkeypatch.setattr(ctmc.cli, "load_families", lambda: {"fake": _fake_family(broken)})
    with pytest.raises(ModelError):
        main(["fake"])


def test_cli_bad_parameters_are_one_line_usage_errors(monkeypatch, capsys):
    import ctmc.cli

    def bad(args):
        raise ValueError("K: must be >= 1, got 0")

    monkeypatch.setattr(ctmc.cli, "load_families", lambda: {"fake": _fake_family(bad)})
    with pytest.raises(SystemExit) as exc:
        main(["fake"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.strip() == "ctmc fake: error: K: must be >= 1, got 0"      # one line, no usage block


def test_cli_families_come_from_entry_points(capsys):
    # the families shipped with ctmc-exact, found through the entry-point group
    # (the core never imports them by name); the help text is the docstring's first line
    from ctmc.cli import load_families
    fams = load_families()
    assert {"jsq", "hysteresis", "supermarket"} <= set(fams)
    for name, mod in fams.items():
        assert mod.__name__.startswith("ctmc.models."), name
        assert callable(mod.add_arguments) and callable(mod.run) and callable(mod.report)
        assert (mod.__doc__ or "").strip(), f"family {name}: no docstring for the help text"
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert all(name in out for name in fams)


def test_cli_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"ctmc {ctmc.__version__}"


@pytest.mark.parametrize("strategy", ["box", "bfs"])
def test_a_rate_function_gets_a_plain_dict_of_every_variable(strategy):
    """User functions receive the documented ``{name: array}`` dict (copyable, every variable),
    while operator expressions are evaluated lazily; both give the same generator."""
    seen = []

    def rate(env):
        seen.append((type(env), sorted(env)))
        d = env.copy()
        return d["x"] * 1.0 + 1.0

    def build(r):
        m = ctmc.Model("t")
        x, y = m.var("x", 0, 5), m.var("y", 0, 2)
        m.event("up", guard=x < 5, rate=r(x), update={x: x + 1})
        m.event("down", guard=x > 0, rate=2.0, update={x: x - 1, y: (y + 1) % 3})
        return m.build(initial={"x": 0, "y": 0}, strategy=strategy)

    a, b = build(lambda x: rate), build(lambda x: x * 1.0 + 1.0)
    assert all(t is dict and names == ["x", "y"] for t, names in seen) and seen
    assert a.n_states == b.n_states and (a.Q != b.Q).nnz == 0


@pytest.mark.parametrize("bad", [np.nan, -1.0, np.inf])
def test_box_checks_rates_on_reachable_states_only(bad):
    """The box strategy expands every point once, leniently; an invalid rate is an error only
    where the state is reachable (named like the search's strict expansion names it)."""
    def model(where_bad):
        m = ctmc.Model("r")
        x = m.var("x", 0, 6)
        m.event("up", guard=(x != 4) & (x < 6), rate=ctmc.where(x == where_bad, bad, 1.0), update={x: x + 1})
        m.event("down", guard=(x > 0) & (x <= 4), rate=1.0, update={x: x - 1})
        return m
    for strategy in ("box", "bfs", "auto"):
        assert model(5).build(initial={"x": 0}, strategy=strategy).n_states == 5    # x = 5 (up enabled there) never reached
        with pytest.raises(ctmc.ModelError, match=r"'up': invalid rate .* \(x=2\)"):
            model(2).build(initial={"x": 0}, strategy=strategy)
        # an event that changes nothing is no transition, but its invalid rate is still an error
        m = model(5)
        m.event("tick", guard=m.variables[0] == 3, rate=ctmc.where(m.variables[0] == 3, bad, 1.0), update={})
        with pytest.raises(ctmc.ModelError, match=r"'tick': invalid rate .* \(x=3\)"):
            m.build(initial={"x": 0}, strategy=strategy)


@pytest.mark.parametrize("strategy", ["box", "bfs"])
def test_constant_rates_and_updates_take_the_batch_path_with_the_same_checks(strategy):
    """A constant rate or update is checked once per batch: a zero rate is no transition, a
    constant outside the bounds is an error naming the event and a state, a constant inside
    builds the same chain as the same value written as an expression."""
    def model(rate, target):
        m = ctmc.Model("c")
        x = m.var("x", 0, 5)
        m.event("up", guard=x < 3, rate=1.0, update={x: x + 1})
        m.event("jump", guard=x == 3, rate=rate, update={x: target(x)})
        m.event("down", guard=x > 0, rate=2.0, update={x: x - 1})
        return m
    assert model(0.0, lambda x: 5).build(initial={"x": 0}, strategy=strategy).n_states == 4
    a = model(0.5, lambda x: 5).build(initial={"x": 0}, strategy=strategy)
    b = model(ctmc.where(x_is(3), 0.5, 0.5), lambda x: x + 2).build(initial={"x": 0}, strategy=strategy)
    assert a.n_states == b.n_states == 6 and abs(a.Q - b.Q).max() == 0
    with pytest.raises(ctmc.ModelError, match=r"'jump': update leaves the declared bounds from state \(x=3\)"):
        model(0.5, lambda x: 7).build(initial={"x": 0}, strategy=strategy)


def x_is(v):
    """A rate expression equal to a constant but not written as one (the per-state path)."""
    return ctmc.expr.as_expr(lambda env: env["x"] * 0 + v) == v
