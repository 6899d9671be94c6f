"""Parameter sweeps (ctmc.sweep) and the reuse of a chain's states when only rates change.

The values are judged against the M/M/1/K closed form in exact rational
arithmetic (within each record's stated error bound); the reused chains against
a fresh build, to the bit; the parallel run against the serial one.
"""
from __future__ import annotations

import importlib
import itertools
import math
import os
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

import ctmc
from ctmc import exploration
from ctmc.expr import as_expr

SWEEP = importlib.import_module("ctmc.sweep")     # the module (ctmc.sweep is the function)


# ---- models (module level: they travel to other processes by pickle) -----------------------------

def mm1k(rho, K, mu=1.0):
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, K)
    m.event("arrival", guard=n < K, rate=rho * mu, update={n: n + 1})
    m.event("departure", guard=n > 0, rate=mu, update={n: n - 1})
    m.label("full", n == K)
    m.reward("queue", n)
    return m


def departures(chain):
    return chain.throughput("departure")


def exact_mm1k(rho, K, mu=1.0):
    """(P(N = K), E[N], throughput) exactly, from pi_k proportional to rho^k (rho as the float given)."""
    r = Fraction(rho * mu) / Fraction(mu)
    w = [r ** k for k in range(K + 1)]
    tot = sum(w)
    pi = [x / tot for x in w]
    return pi[K], sum(k * p for k, p in enumerate(pi)), Fraction(mu) * (1 - pi[0])


def tandem(lam, mu1=1.0, mu2=1.5, K1=6, K2=5, T=None, gate=True):
    """Two queues in tandem; two arrival events into the same state (their rates are summed);
    with ``T`` arrivals only below T, with ``gate`` only where it holds (guards that change the states)."""
    m = ctmc.Model("tandem")
    a, b = m.var("a", 0, K1), m.var("b", 0, K2)
    room = (a < (K1 if T is None else T)) & gate
    m.event("arrive", guard=room, rate=lam, update={a: a + 1})
    m.event("arrive_batch", guard=room, rate=lam / 3, update={a: a + 1})
    m.event("serve1", guard=(a > 0) & (b < K2), rate=mu1 * ctmc.minimum(a, 2), update={a: a - 1, b: b + 1})
    m.event("serve2", guard=b > 0, rate=mu2, update={b: b - 1})
    return m


def _same_chain(c, f):
    """The chain ``c`` is the fresh build ``f``: states, initial states and generator to the bit."""
    assert np.array_equal(c.states.codes, f.states.codes)
    assert np.array_equal(c.initial, f.initial)
    for part in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(c.Q, part), getattr(f.Q, part)), part
    assert c.labels.keys() == f.labels.keys()


@pytest.fixture
def count_builds(monkeypatch):
    """The number of explorations (full builds) run since the fixture started."""
    calls = []
    real = exploration.build

    def counting(*args, **kwargs):
        calls.append(args[0].name)
        return real(*args, **kwargs)

    monkeypatch.setattr(exploration, "build", counting)
    return calls


# ---- values against the closed form --------------------------------------------------------------

@pytest.mark.parametrize("method", ["auto", "gth", "lu"])
def test_mm1k_sweep_matches_the_closed_form_within_each_bound(method):
    grid = {"K": [5, 40], "rho": [0.3, 0.9, 1.0, 1.7]}
    res = ctmc.sweep(mm1k, grid, {"block": 'S=? [ "full" ]', "mean": "n", "throughput": departures},
                     initial={"n": 0}, jobs=1, method=method)
    assert len(res) == 8 * 3
    for r in res:
        exact = dict(zip(("block", "mean", "throughput"), exact_mm1k(r["rho"], r["K"])))[r["measure"]]
        assert r["status"] == "success", r
        assert 0 <= r["error_bound"] < 1e-9 * max(1.0, abs(float(exact)))
        assert abs(Fraction(r["value"]) - exact) <= Fraction(r["error_bound"]), r
        assert r["states"] == r["K"] + 1


def test_the_closed_form_check_can_fail():
    # the judge itself: a record at the wrong load is far outside its bound
    res = ctmc.sweep(mm1k, {"K": [5], "rho": [0.9]}, {"block": 'S=? [ "full" ]'}, initial={"n": 0}, jobs=1)
    r = res.records[0]
    assert abs(Fraction(r["value"]) - exact_mm1k(0.8, 5)[0]) > Fraction(r["error_bound"])


# ---- grid shapes ---------------------------------------------------------------------------------

def test_product_is_every_combination_first_parameter_slowest():
    res = ctmc.sweep(mm1k, {"K": [3, 4], "rho": [0.5, 1.5, 2.0]}, ["n"], initial={"n": 0}, jobs=1)
    assert [(r["K"], r["rho"]) for r in res] == [(3, 0.5), (3, 1.5), (3, 2.0), (4, 0.5), (4, 1.5), (4, 2.0)]
    assert res.parameters == ("K", "rho") and res.measures == ("n",)


def test_zip_takes_the_ith_values_together():
    res = ctmc.sweep(mm1k, {"K": [3, 4, 6], "rho": [0.5, 1.5, 2.0]}, {"m": "n", "p": "n == 0"}, mode="zip",
                     initial={"n": 0}, jobs=1)
    assert [(r["K"], r["rho"], r["measure"]) for r in res] == [
        (3, 0.5, "m"), (3, 0.5, "p"), (4, 1.5, "m"), (4, 1.5, "p"), (6, 2.0, "m"), (6, 2.0, "p")]
    assert [r["states"] for r in res] == [4, 4, 5, 5, 7, 7]


# ---- failures are records ------------------------------------------------------------------------

def test_a_failing_point_is_a_record_and_the_others_are_answered():
    # a negative load is refused by Model.event: that point only fails
    res = ctmc.sweep(mm1k, {"K": [4], "rho": [0.5, -1.0, 2.0]}, {"mean": "n", "thr": departures},
                     initial={"n": 0}, jobs=1)
    status = [(r["rho"], r["measure"], r["status"]) for r in res]
    assert status == [(0.5, "mean", "success"), (0.5, "thr", "success"), (-1.0, "mean", "error"),
                      (-1.0, "thr", "error"), (2.0, "mean", "success"), (2.0, "thr", "success")]
    bad = res.errors
    assert len(bad) == 2 and all("ModelError" in r["message"] and "rate" in r["message"] for r in bad)
    assert all(math.isnan(r["value"]) and r["states"] is None for r in bad)
    # the point after the failure is right (it does not reuse a failed chain)
    r = res.records[4]
    assert abs(Fraction(r["value"]) - exact_mm1k(2.0, 4)[1]) <= Fraction(r["error_bound"])


def test_a_model_without_initial_states_says_where_to_give_them():
    res = ctmc.sweep(mm1k, {"K": [3], "rho": [0.5]}, ["n"], jobs=1)
    assert res.records[0]["status"] == "error"
    assert "initial={'n': ...}" in res.records[0]["message"]


def test_a_failing_measure_is_a_record_and_errors_raise_raises():
    def rate_of_unknown_event(chain):
        return chain.throughput("no_such_event")

    res = ctmc.sweep(mm1k, {"K": [4], "rho": [0.5]}, {"bad": rate_of_unknown_event, "ok": "n"},
                     initial={"n": 0}, jobs=1)
    assert [r["status"] for r in res] == ["error", "success"]
    assert "no_such_event" in res.records[0]["message"]
    with pytest.raises(ValueError, match="no_such_event"):
        ctmc.sweep(mm1k, {"K": [4], "rho": [0.5]}, {"bad": rate_of_unknown_event}, initial={"n": 0}, jobs=1,
                   errors="raise")
    with pytest.raises(ctmc.ModelError, match="rate"):
        ctmc.sweep(mm1k, {"K": [4], "rho": [-1.0]}, ["n"], initial={"n": 0}, jobs=1, errors="raise")


def test_a_value_without_a_bound_is_never_graded_success():
    """A callable returning a plain number, or a result whose value has no finite bound, states no
    error bound: its record is ``unchecked`` with a message (was ``success`` beside a NaN bound), while
    a MeasureResult keeps its own status and bound."""
    class Bare:                                      # a result with a value and nothing else
        def __init__(self, value):
            self.value = value

    res = ctmc.sweep(mm1k, {"K": [4], "rho": [0.5]},
                     {"number": lambda c: float(c.throughput("departure").value),
                      "numpy": lambda c: np.float64(1.0), "bare": lambda c: Bare(2.0),
                      "result": departures}, initial={"n": 0}, jobs=1)
    by = {r["measure"]: r for r in res}
    for name in ("number", "numpy", "bare"):
        assert by[name]["status"] == "unchecked", by[name]
        assert math.isnan(by[name]["error_bound"]) and "no finite error bound" in by[name]["message"]
    assert by["result"]["status"] == "success" and by["result"]["message"] == ""
    want = exact_mm1k(0.5, 4)[2]
    assert abs(Fraction(by["number"]["value"]) - want) <= Fraction(by["result"]["error_bound"])


# ---- the three kinds of measure agree ------------------------------------------------------------

def test_property_and_expression_measures_agree_with_callables():
    K = 12

    def block(chain):
        return float(chain.stationary("gth").pi[chain.index(n=K)])

    def mean(chain):
        return float(chain.stationary("gth").pi @ chain.states["n"])

    res = ctmc.sweep(mm1k, {"K": [K], "rho": [0.4, 1.1, 3.0]},
                     {"p_prop": 'S=? [ "full" ]', "p_expr": f"n == {K}", "p_call": block,
                      "m_prop": 'R{"queue"}=? [ S ]', "m_expr": "n", "m_call": mean,
                      "missing": 'R{"none"}=? [ S ]'},
                     initial={"n": 0}, jobs=1, method="gth", build_options={})
    by = {(r["rho"], r["measure"]): r for r in res}
    for rho in (0.4, 1.1, 3.0):
        for kind in ("p", "m"):
            want = by[(rho, f"{kind}_call")]["value"]
            for other in ("expr", "prop"):
                assert by[(rho, f"{kind}_{other}")]["value"] == pytest.approx(want, rel=1e-12, abs=1e-300)
        assert by[(rho, "p_prop")]["method"] == by[(rho, "p_expr")]["method"] == "long_run(gth)"
        assert math.isnan(by[(rho, "p_call")]["error_bound"])      # a plain number states no bound
        assert by[(rho, "p_call")]["status"] == "unchecked"
        bounds = by[(rho, "m_prop")]["error_bound"], by[(rho, "m_expr")]["error_bound"]
        assert bounds[0] == pytest.approx(bounds[1], rel=1e-12)
    # a reward the chain does not have: an error record naming it, the other measures answered
    assert all(r["status"] == "error" and "none" in r["message"] for r in res if r["measure"] == "missing")


def test_properties_and_expressions_share_one_long_run_solve_per_point(monkeypatch):
    calls = []
    real = ctmc.CTMC.long_run
    monkeypatch.setattr(ctmc.CTMC, "long_run", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    ms = {"block": 'S=? [ "full" ]', "queue": 'R{"queue"}=? [ S ]', "mean": "n", "empty": "n == 0",
          "typo": 'R{"none"}=? [ S ]'}
    res = ctmc.sweep(mm1k, {"K": [6], "rho": [0.5, 1.5]}, ms, initial={"n": 0}, jobs=1)
    by = {(r["rho"], r["measure"]): r for r in res}
    for rho in (0.5, 1.5):
        block, mean, _ = exact_mm1k(rho, 6)
        for name, want in (("block", block), ("queue", mean), ("mean", mean)):
            r = by[(rho, name)]
            assert r["status"] == "success" and abs(Fraction(r["value"]) - want) <= Fraction(r["error_bound"])
        assert by[(rho, "typo")]["status"] == "error" and "none" in by[(rho, "typo")]["message"]
    # per point: the file of properties (one solve, then the typo fails it), then one by one (a solve
    # each but the typo's), the expressions taking the law of the first property: 3, not 5
    assert len(calls) == 2 * 3
    good = {k: v for k, v in ms.items() if k != "typo"}
    calls.clear()
    ctmc.sweep(mm1k, {"K": [6], "rho": [0.5, 1.5]}, good, initial={"n": 0}, jobs=1)
    assert len(calls) == 2                         # one solve a point for all four measures


def test_a_callable_returning_a_law_is_refused_by_name():
    res = ctmc.sweep(mm1k, {"K": [3], "rho": [0.5]}, {"law": lambda c: c.stationary()}, initial={"n": 0},
                     jobs=1)
    assert res.records[0]["status"] == "error" and "'law'" in res.records[0]["message"]
    assert "StationaryResult" in res.records[0]["message"]


def test_a_long_run_law_that_cannot_be_found_fails_each_expression_measure(monkeypatch):
    def two_traps(a):              # from state 0 to one of two absorbing states, no initial state given
        return ctmc.CTMC([[-3.0, a, 3.0 - a], [0, 0, 0], [0, 0, 0]])

    calls = []
    real = ctmc.CTMC.long_run
    monkeypatch.setattr(ctmc.CTMC, "long_run", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    res = ctmc.sweep(two_traps, {"a": [1.0]}, ["state", "state == 2"], jobs=1)
    assert [r["status"] for r in res] == ["error", "error"] and len(calls) == 1      # solved once
    assert all("initial" in r["message"] for r in res)


def test_a_chain_from_build_is_used_as_is():
    def chain_of(rho):
        return mm1k(rho, 6).build(initial={"n": 0})

    res = ctmc.sweep(chain_of, {"rho": [0.5, 0.7]}, ["n"], jobs=1)
    for r in res:
        assert abs(Fraction(r["value"]) - exact_mm1k(r["rho"], 6)[1]) <= Fraction(r["error_bound"])
        assert r["reused"] is False


def test_a_prism_model_from_build_starts_from_its_own_initial_state():
    def prism(rate):
        return ctmc.prism.load(f"ctmc\nmodule q n : [0..3] init 0; [] n<3 -> {rate} : (n'=n+1); "
                               "[] n>0 -> 1 : (n'=n-1); endmodule\nlabel \"full\" = n = 3;")

    res = ctmc.sweep(prism, {"rate": [0.5, 2.0]}, {"full": 'S=? [ "full" ]'}, jobs=1)
    for r in res:
        assert abs(Fraction(r["value"]) - exact_mm1k(r["rate"], 3)[0]) <= Fraction(r["error_bound"])
    assert [r["reused"] for r in res] == [False, True]


# ---- the table -----------------------------------------------------------------------------------

COLUMNS = ["K", "rho", "measure", "value", "error_bound", "status", "method", "seconds", "states",
           "build_seconds", "reused", "message"]


def test_frame_has_the_parameters_then_the_evidence_columns():
    res = ctmc.sweep(mm1k, {"K": [3, 5], "rho": [0.5, 1.5]}, {"a": "n", "b": departures}, initial={"n": 0},
                     jobs=1)
    df = res.to_frame()
    assert list(df.columns) == COLUMNS and list(res.columns) == COLUMNS
    assert df.shape == (8, len(COLUMNS))
    assert df["value"].tolist() == [r["value"] for r in res]
    assert df["value"].dtype == float and df["error_bound"].dtype == float and df["seconds"].dtype == float
    assert set(df["status"]) == {"success"} and (df["seconds"] >= 0).all()
    assert list(iter(res)) == res.records and len(res) == 8


def test_frame_without_pandas_names_the_extra(monkeypatch):
    res = ctmc.sweep(mm1k, {"K": [3], "rho": [0.5]}, ["n"], initial={"n": 0}, jobs=1)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"ctmc-exact\[frame\]"):
        res.to_frame()
    assert res.records[0]["measure"] == "n"          # the records need no pandas


# ---- bad input: refused before any work, naming the parameter ------------------------------------

@pytest.mark.parametrize("kwargs, error, match", [
    (dict(grid={}), ValueError, "grid: empty"),
    (dict(grid={"K": [3, 4], "rho": [0.5]}, mode="zip"), ValueError, "K: 2, rho: 1"),
    (dict(grid={"K": [3], "rho": []}), ValueError, "'rho' has no values"),
    (dict(grid={"K": [3], "rho": 0.5}), TypeError, "'rho': expected a sequence"),
    (dict(grid={"K": [3], "rho": "0.5"}), TypeError, "'rho': expected a sequence"),
    (dict(grid={"K": [3], "value": [0.5]}), ValueError, "'value' is the name of a record column"),
    (dict(grid={"K": [3], "load": [0.5]}), TypeError, "load"),
    (dict(grid=[("K", [3])]), TypeError, "grid: expected a dict"),
    (dict(mode="outer"), ValueError, "mode"),
    (dict(jobs=0), ValueError, "jobs"),
    (dict(errors="ignore"), ValueError, "errors"),
    (dict(measures={}), ValueError, "measures: empty"),
    (dict(measures={"x": 3}), TypeError, r"measures\['x'\]"),
    (dict(measures={"x": "n +"}), ValueError, r"measures\['x'\]"),
    (dict(measures={"x": "n.real"}), ValueError, r"measures\['x'\].*attribute"),
    (dict(measures={"x": 'S=? [ "full" '}), ValueError, r"measures\['x'\]"),
    (dict(build=3), TypeError, "build"),
    (dict(build_options=[1]), TypeError, "build_options"),
    (dict(method="fastest"), ValueError, "method: unknown stationary method 'fastest'"),
    (dict(method="gth", tolerance=1e-9), ValueError, r"options: \['tolerance'\]"),
])
def test_bad_input_is_refused_naming_the_parameter(kwargs, error, match, count_builds):
    args = dict(build=mm1k, grid={"K": [3], "rho": [0.5]}, measures=["n"])
    args.update(kwargs)
    with pytest.raises(error, match=match):
        ctmc.sweep(args.pop("build"), args.pop("grid"), args.pop("measures"), initial={"n": 0}, **args)
    assert count_builds == []                         # before any work


# ---- parallel ------------------------------------------------------------------------------------

def _without_timings(records):
    return [{k: v for k, v in r.items() if k not in ("seconds", "build_seconds", "reused")} for r in records]


def test_two_processes_give_the_serial_records_in_grid_order():
    grid = {"K": [8, 30], "rho": [0.5, 0.8, 1.2, 2.0, 3.5]}
    ms = {"block": 'S=? [ "full" ]', "mean": "n", "thr": departures}
    serial = ctmc.sweep(mm1k, grid, ms, initial={"n": 0}, jobs=1)
    parallel = ctmc.sweep(mm1k, grid, ms, initial={"n": 0}, jobs=2)
    assert parallel.jobs == 2 and serial.jobs == 1
    assert _without_timings(parallel.records) == _without_timings(serial.records)
    assert [r["value"] for r in parallel] == [r["value"] for r in serial]     # to the bit
    # a failure in a process: a record, or with errors="raise" the exception, here
    bad = {"K": [8], "rho": [0.5, 0.8, -1.0, 2.0]}
    rec = ctmc.sweep(mm1k, bad, ["n"], initial={"n": 0}, jobs=2)
    assert [r["status"] for r in rec] == ["success", "success", "error", "success"] and rec.jobs == 2
    with pytest.raises(ctmc.ModelError, match="rate") as info:
        ctmc.sweep(mm1k, bad, ["n"], initial={"n": 0}, jobs=2, errors="raise")
    assert "'rho': -1.0" in "".join(getattr(info.value, "__notes__", ["'rho': -1.0"]))


def test_default_jobs_go_parallel_after_two_points_when_the_rest_is_long(monkeypatch):
    # a threshold of 0 s: the rest of the grid is "long" after the second point
    monkeypatch.setattr(SWEEP, "_PARALLEL_AFTER", 0.0)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)   # ctmc._util.cores
    grid = {"K": [8], "rho": [0.5, 0.8, 1.2, 2.0, 3.5, 4.0]}
    serial = ctmc.sweep(mm1k, grid, ["n"], initial={"n": 0}, jobs=1)
    mixed = ctmc.sweep(mm1k, grid, ["n"], initial={"n": 0})
    assert mixed.jobs == 3                            # min(cores, points left)
    assert [r["reused"] for r in mixed][:2] == [False, True]      # the two serial points
    assert _without_timings(mixed.records) == _without_timings(serial.records)


SCRIPT_WITHOUT_GUARD = """
import ctmc
def mm1k(K, rho):
    m = ctmc.Model("mm1k"); n = m.var("n", 0, K)
    m.event("a", guard=n < K, rate=rho, update={n: n + 1})
    m.event("d", guard=n > 0, rate=1.0, update={n: n - 1})
    return m
res = ctmc.sweep(mm1k, {"K": [5], "rho": [0.5, 2.0]}, ["n"], initial={"n": 0}, jobs=2)
print("values", [r["value"] for r in res], res.jobs)
"""


def test_a_script_without_main_guard_runs_serially_with_a_warning(tmp_path):
    # the processes import the script, which starts a sweep again: they stop, the sweep goes on here
    import subprocess
    path = tmp_path / "noguard.py"
    path.write_text(SCRIPT_WITHOUT_GUARD)
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "if __name__ == '__main__'" in out.stderr and "runs serially" in out.stderr
    line = next(x for x in out.stdout.splitlines() if x.startswith("values"))
    values = [float(v) for v in line.split("[")[1].split("]")[0].split(",")]
    assert values == pytest.approx([float(exact_mm1k(0.5, 5)[1]), float(exact_mm1k(2.0, 5)[1])], rel=1e-12)
    assert line.endswith(" 1")


def test_unpicklable_measures_run_serially_with_a_warning():
    grid = {"K": [4], "rho": [0.5, 1.5, 2.5]}
    with pytest.warns(ctmc.CtmcWarning, match="jobs=2.*module level"):
        res = ctmc.sweep(mm1k, grid, {"m": lambda c: c.throughput("arrival")}, initial={"n": 0}, jobs=2)
    assert res.jobs == 1
    ref = ctmc.sweep(mm1k, grid, {"m": "n"}, initial={"n": 0}, jobs=1)
    # throughput of arrivals = departures = 1 - pi_0, the serial answers
    for r, e in zip(res, ref):
        assert r["value"] == pytest.approx(float(exact_mm1k(e["rho"], 4)[2]), rel=1e-12)


def test_default_jobs_stay_serial_on_a_small_grid_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = ctmc.sweep(mm1k, {"K": [4], "rho": [0.5, 1.5]}, {"m": lambda c: departures(c)},
                         initial={"n": 0})
    assert res.jobs == 1 and [r["status"] for r in res] == ["success", "success"]
    assert [r["reused"] for r in res] == [False, True]      # the first point's chain is reused after it


# ---- progress ------------------------------------------------------------------------------------

def test_progress_counts_the_points(monkeypatch):
    seen = []

    class Recorder(SWEEP.Progress):
        def update(self, text="", *, done=None, total=None):
            seen.append((done, self.total))
            super().update(text, done=done, total=total)

    monkeypatch.setattr(SWEEP, "Progress", Recorder)
    ctmc.sweep(mm1k, {"K": [4], "rho": [0.5, 1.5, 2.5]}, ["n"], initial={"n": 0}, jobs=1, progress=False)
    assert seen == [(1, 3), (2, 3), (3, 3)]


# ---- reuse of the states when only rates change --------------------------------------------------

@pytest.mark.parametrize("engine", ["auto", "numpy", "compiled"])
def test_a_reused_chain_is_the_fresh_build_to_the_bit(engine, count_builds):
    first = tandem(0.7).build(initial={"a": 0, "b": 0}, engine=engine)
    prev = first
    # each from the one before (the known moves and pattern), then from the first (moves found anew)
    for lam, before in ((0.3, "prev"), (1.9, "prev"), (1e-3, "prev"), (1.2, "first")):
        kept = tandem(lam, mu2=0.4 + lam).build(initial={"a": 0, "b": 0}, engine=engine,
                                                reuse=prev if before == "prev" else first)
        fresh = tandem(lam, mu2=0.4 + lam).build(initial={"a": 0, "b": 0}, engine=engine)
        assert kept.build_info.get("reused") is True and fresh.build_info.get("reused") is None
        _same_chain(kept, fresh)
        assert kept.model is not prev.model
        prev = kept
    assert len(count_builds) == 1 + 4            # the fresh builds only: the reused ones explored nothing


def test_a_reused_chain_without_shared_entries_is_the_fresh_build_to_the_bit():
    prev = mm1k(0.5, 30).build(initial={"n": 0})
    for rho in (0.7, 1e-4, 3.3, 0.9):
        kept = mm1k(rho, 30, mu=rho + 0.25).build(initial={"n": 0}, reuse=prev)
        assert kept.build_info.get("reused") is True
        _same_chain(kept, mm1k(rho, 30, mu=rho + 0.25).build(initial={"n": 0}))
        prev = kept


def star(scale):
    """One state with 20 moves (rows longer than scipy's stable sort threshold), several to one target,
    and back; rates of many magnitudes, so that the order of the sums shows in the last bit."""
    m = ctmc.Model("star")
    x = m.var("x", 0, 8)
    for k in range(20):
        m.event(f"out{k}", guard=x == 0, rate=scale * (1 + k) ** 1.7 / 3, update={x: k % 8 + 1})
    m.event("back", guard=x > 0, rate=scale * x / 7 + 0.1, update={x: 0})
    m.event("step", guard=(x > 0) & (x < 8), rate=0.3 / scale, update={x: x + 1})
    return m


def test_long_rows_with_duplicates_are_summed_as_a_fresh_build_sums_them():
    prev = star(1.0).build(initial={"x": 0})
    for scale in (0.37, 2.9, 1e-5, 123.0):
        kept = star(scale).build(initial={"x": 0}, reuse=prev)
        assert kept.build_info.get("reused") is True
        for engine in ("numpy", "compiled"):
            _same_chain(kept, star(scale).build(initial={"x": 0}, engine=engine))
        prev = kept


def test_sweep_explores_once_when_only_rates_change(count_builds):
    res = ctmc.sweep(mm1k, {"K": [20], "rho": [0.2, 0.5, 0.9, 1.4]}, ["n"], initial={"n": 0}, jobs=1)
    assert count_builds == ["mm1k"]
    assert [r["reused"] for r in res] == [False, True, True, True]


def test_a_changed_bound_rebuilds(count_builds):
    res = ctmc.sweep(mm1k, {"K": [5, 9], "rho": [0.5, 1.5]}, ["n"], initial={"n": 0}, jobs=1)
    assert len(count_builds) == 2                     # one exploration per capacity
    assert [(r["states"], r["reused"]) for r in res] == [(6, False), (6, True), (10, False), (10, True)]
    for r in res:
        assert abs(Fraction(r["value"]) - exact_mm1k(r["rho"], r["K"])[1]) <= Fraction(r["error_bound"])


@pytest.mark.parametrize("change", ["guard", "initial", "rate_to_zero", "rate_from_zero", "function",
                                    "guard_function"])
def test_a_changed_state_space_is_built_afresh(change, count_builds):
    init = {"a": 0, "b": 0}
    if change == "guard":            # a threshold in a guard: another structure
        before, after, init2 = tandem(0.7, T=5), tandem(0.7, T=2), init
    elif change == "initial":
        before, after, init2 = tandem(0.7), tandem(0.7), {"a": 1, "b": 0}
    elif change == "rate_to_zero":   # the same structure, but nothing arrives: one state is reached
        before, after, init2 = tandem(0.7), tandem(0.0), init
    elif change == "rate_from_zero":
        before, after, init2 = tandem(0.0), tandem(0.7), init
    else:                            # a user function (known by its name only) that cuts the states
        def gate(cap):
            def below(env):
                return np.where(env["a"] < cap, 0.5, 0.0)
            return as_expr(below)
        if change == "function":     # in a rate: the moves are kept, the rates cut the graph
            before, after, init2 = tandem(gate(6)), tandem(gate(3)), init
        else:                        # in a guard: guards known by a name only are not compared
            before, after, init2 = tandem(0.7, gate=gate(6) > 0), tandem(0.7, gate=gate(3) > 0), init
    prev = before.build(initial=init)
    kept = after.build(initial=init2, reuse=prev)
    fresh = after.build(initial=init2)
    assert kept.build_info.get("reused") is None      # not kept: built from scratch
    _same_chain(kept, fresh)
    assert kept.n_states != prev.n_states or change == "initial"
    assert len(count_builds) == 3


def test_a_model_with_immediate_moves_is_built_afresh(count_builds):
    def polling(rate):
        m = ctmc.Model("polling")
        a, s = m.var("a", 0, 2), m.var("s", 0, 1)
        m.event("arrive", guard=a < 2, rate=rate, update={a: a + 1})
        m.event("serve", guard=(s == 1) & (a > 0), rate=1.0, update={a: a - 1})
        m.immediate("wake", guard=(s == 0) & (a > 0), update={s: 1})
        m.immediate("sleep", guard=(s == 1) & (a == 0), update={s: 0})
        return m

    prev = polling(0.5).build(initial={"a": 0, "s": 0})
    kept = polling(0.9).build(initial={"a": 0, "s": 0}, reuse=prev)
    _same_chain(kept, polling(0.9).build(initial={"a": 0, "s": 0}))
    assert kept.build_info.get("reused") is None and len(count_builds) == 3


def test_reuse_of_something_else_than_a_chain_is_refused():
    with pytest.raises(TypeError, match="reuse: expected a chain"):
        mm1k(0.5, 3).build(initial={"n": 0}, reuse=mm1k(0.5, 3))
    plain = ctmc.CTMC([[-1.0, 1.0], [2.0, -2.0]])         # a chain without a model: built afresh
    assert mm1k(0.5, 3).build(initial={"n": 0}, reuse=plain).build_info.get("reused") is None


def test_structure_key_sees_bounds_guards_updates_and_initial_states():
    def key(m, init):
        return exploration.structure_key(m, m.layout, m.layout.initial_codes(init))

    base = key(tandem(0.7), {"a": 0, "b": 0})
    assert key(tandem(1.9, mu1=3.0, mu2=0.1), {"a": 0, "b": 0}) == base        # rates only
    assert key(tandem(0.7, K1=7), {"a": 0, "b": 0}) != base
    assert key(tandem(0.7, T=3), {"a": 0, "b": 0}) != base
    assert key(tandem(0.7), {"a": 1, "b": 0}) != base
    assert all(key(tandem(0.7), {"a": 0, "b": 0}) == base for _ in itertools.repeat(None, 2))


def test_a_guard_table_differing_beyond_its_shown_values_is_another_structure():
    """``repr`` shortens a table of more than 8 values: the structure key reads every value, or a
    reused chain would keep the moves of another table (found by review: 15 % off, graded success)."""
    def model(g5):
        g = [1.0] * 11
        g[5] = g5
        m = ctmc.Model("t")
        x = m.var("x", 0, 10)
        m.event("fast", guard=(x < 10) & (ctmc.expr.table(g, x) > 0.5), rate=5.0, update={x: x + 1})
        m.event("slow", guard=(x < 10) & (ctmc.expr.table(g, x) < 0.5), rate=1.0, update={x: x + 1})
        m.event("down", guard=x > 0, rate=3.0, update={x: x - 1})
        return m
    res = ctmc.sweep(model, {"g5": [1.0, 1.0, 0.0]}, {"mean": "x"}, initial={"x": 0}, jobs=1)
    births = [5.0] * 5 + [1.0] + [5.0] * 4            # birth-death closed form at g5 = 0
    w = np.cumprod([1.0] + [b / 3.0 for b in births])
    exact = float(np.arange(11) @ w / w.sum())
    last = res.records[-1]
    assert not last["reused"] and abs(last["value"] - exact) <= last["error_bound"] + 1e-12 * exact


def test_a_reused_chain_checks_the_rates_of_moves_that_leave_the_state_as_it_is():
    """A move to the same state is no transition, but a fresh build refuses its invalid rate: so
    does a reuse (found by review: reuse built it, a sweep row said success where a build fails)."""
    def model(p):
        m = ctmc.Model("noop")
        x = m.var("x", 0, 3)
        m.event("up", guard=x < 3, rate=1.0, update={x: x + 1})
        m.event("down", guard=x > 0, rate=2.0, update={x: x - 1})
        m.event("noop", guard=x >= 0, rate=(x * 0 + 1) * (p - 1.0), update={x: x})
        return m
    first = model(2.0).build(initial={"x": 0})
    for p in (0.5, float("nan")):
        with pytest.raises(ctmc.ModelError, match="invalid rate"):
            model(p).build(initial={"x": 0})
        with pytest.raises(ctmc.ModelError, match="invalid rate"):
            model(p).build(initial={"x": 0}, reuse=first)
    assert model(3.0).build(initial={"x": 0}, reuse=first).build_info["reused"]


def test_a_property_that_is_not_a_success_says_why():
    """A PRISM property row that is not a success carries its solver's message, as an expression row
    at the same point does (found by review: empty)."""
    res = ctmc.sweep(mm1k, {"K": [30], "rho": [0.95]}, {"B": 'S=? [ n=30 ]', "Bx": "n == 30"},
                     initial={"n": 0}, jobs=1, method="gauss_seidel", tol=1e-3, maxiter=3)
    rows = {r["measure"]: r for r in res}
    assert rows["Bx"]["status"] != "success" and rows["Bx"]["message"]
    assert rows["B"]["status"] == rows["Bx"]["status"] and rows["B"]["message"]
