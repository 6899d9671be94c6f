"""The stopping rule checked sparsely (ctmc.kernels.sweeps.checked_sweeps) stops where checking it
after every iteration stops: the same iteration, status and iterate, on real chains and on planted
sequences of the measure (a dip, a plateau, a rule that never holds)."""
from types import SimpleNamespace

import numpy as np
import pytest

import ctmc
from ctmc.backends import operator_for
from ctmc.kernels.sweeps import CHECK_GAP, Stop, Sweeper, checked_sweeps, start_vector
from ctmc.options import Tolerances

from reference import CASES, random_chain


def _gallery(spec):
    from ctmc.models.gallery import parse_spec
    g = parse_spec(spec)
    return g.model().build(initial=g.initial)


def _tandem():
    return _gallery("tandem:15")


def _every_sweep_sor(chain, omega=1.0, maxiter=100_000, **tol):
    """The rule checked after every sweep (the loop the methods ran before): (x, sweeps, outcome)."""
    op = operator_for(chain, "scipy")
    support = np.ones(op.n, dtype=bool)
    sweeper, x = Sweeper(op, support), np.ascontiguousarray(start_vector(op, support, None))
    stop = Stop(op, Tolerances(**tol))
    for it in range(1, maxiter + 1):
        if not sweeper(x, omega):
            return None, it, "breakdown"
        if stop(it, x, op.apply(x, transpose=True)):
            return x, it, "success"
    return x, maxiter, "max_iterations"


def _every_step_power(chain, maxiter=100_000, **tol):
    op = operator_for(chain, "scipy")
    x = start_vector(op, np.ones(op.n, dtype=bool), None)
    lam, stop = 1.02 * op.qmax, Stop(op, Tolerances(**tol))
    for it in range(maxiter):
        r = op.apply(x, transpose=True)
        if stop(it, x, r):
            return x, it, "success"
        x = x + r / lam
        if it % 10 == 9:
            x /= x.sum()
    return x, maxiter, "max_iterations"


CHAINS = [("tandem", _tandem), ("kanban", lambda: _gallery("kanban:1")),
          ("random", lambda: ctmc.CTMC.from_rates(random_chain(300, 4, 0.05))), ("case1", lambda: CASES[1].build()),
          ("case4", lambda: CASES[4].build())]


@pytest.mark.parametrize("name,build", CHAINS)
@pytest.mark.parametrize("method,omega,tol", [("gauss_seidel", 1.0, {}), ("gauss_seidel", 1.0, {"tol": 1e-13}),
                                              ("sor", 0.8, {"tail_tol": 1e-9}), ("sor", 1.9, {})])
def test_sweeps_stop_where_the_every_sweep_rule_stops(name, build, method, omega, tol):
    chain = build()
    x_ref, its, status = _every_sweep_sor(chain, omega, maxiter=20_000, **tol)
    kw = {"omega": omega} if method == "sor" else {}
    res = chain.stationary(method, check=False, maxiter=20_000, **kw, **tol)
    # no earlier (the rule did not hold before), no later (nor up to CHECK_GAP sweeps later)
    assert res.iterations == its
    assert res.message.startswith({"success": f"converged in {its} sweeps", "breakdown": "iteration diverged",
                                   "max_iterations": f"not converged after {its} sweeps"}[status])
    if x_ref is not None and status != "breakdown":
        np.testing.assert_array_equal(res.pi, np.maximum(x_ref, 0) / np.maximum(x_ref, 0).sum())


@pytest.mark.parametrize("name,build", CHAINS[:3])
def test_power_stops_where_the_every_step_rule_stops(name, build):
    chain = build()
    x_ref, its, status = _every_step_power(chain, maxiter=30_000)
    res = chain.stationary("power", check=False, maxiter=30_000)
    assert res.iterations == its and status == "success"
    assert res.message.startswith(f"power: converged in {its} iterations")
    np.testing.assert_array_equal(res.pi, x_ref / x_ref.sum())


@pytest.mark.parametrize("maxiter", [1, 2, 7, 16, 17, 40])
def test_the_iteration_cap_returns_the_same_iterate(maxiter):
    chain = _tandem()
    for method, ref in (("gauss_seidel", lambda: _every_sweep_sor(chain, maxiter=maxiter)),
                        ("power", lambda: _every_step_power(chain, maxiter=maxiter))):
        x_ref, its, status = ref()
        res = chain.stationary(method, check=False, maxiter=maxiter)
        assert (status, its) == ("max_iterations", maxiter) and res.iterations == maxiter
        assert "not converged after" in res.message
        np.testing.assert_array_equal(res.pi, x_ref / x_ref.sum())


# --- planted sequences: the measure as a function of the iteration -------------------------
def _planted(rels, tail_tol=1e300, last=200, most=CHECK_GAP):
    """Run checked_sweeps on an iterate whose only content is its iteration number, the rule's
    normwise measure at iteration k being ``rels(k)``; returns (iteration, outcome, iterations run)."""
    op = SimpleNamespace(allsum=lambda v: np.asarray(v, dtype=float) if np.ndim(v) else float(v),
                         allmax=float, qmax=1.0, exit_rates=np.array([1.0, 0.0]))
    stop = Stop(op, Tolerances(tol=1e-10, tail_tol=tail_tol))
    ran = []

    def step(it, x):
        x[1] += 1.0
        ran.append(it)
        return True

    def check(it, x):
        assert int(x[1]) == it                   # the iterate is the one of iteration it, replayed or not
        return stop(it, x / x.sum(), np.array([rels(it) * 1.0, 0.0]))

    x = np.array([1.0, 0.0])
    it, out = checked_sweeps(step, x, check, stop, 1, last, most=most)
    return it, out, ran


def _first(rels, last=200):
    return next((k for k in range(1, last + 1) if rels(k) <= 1e-10), None)


@pytest.mark.parametrize("rate", [0.5, 0.8, 0.95, 0.999])
def test_a_geometric_measure_stops_at_its_first_iteration_below_tol(rate):
    rels = lambda k: rate ** k
    it, out, ran = _planted(rels, last=30_000)
    assert (it, out) == (_first(rels, 30_000), True)
    assert len(ran) <= it + 2 * CHECK_GAP           # replays cost at most a block or two


def test_a_sudden_drop_is_found_by_replay_not_overshot():
    rels = lambda k: 1e-3 if k < 57 else 1e-12     # a plateau, then the rule holds from 57 on
    it, out, ran = _planted(rels)
    assert (it, out) == (57, True)
    assert ran.count(57) >= 1 and len(ran) < 57 + 2 * CHECK_GAP


def test_the_rule_never_stops_where_it_does_not_hold():
    # a dip below tol at 33 only: the answer where it stops must meet the rule, never earlier than 33
    rels = lambda k: 1e-12 if k in (33,) or k >= 90 else 1e-3
    it, out, _ = _planted(rels)
    assert out is True and rels(it) <= 1e-10 and it >= 33


def test_a_rule_that_never_holds_runs_to_the_cap_with_the_last_iterate():
    it, out, ran = _planted(lambda k: 1e-3, last=123)
    assert (it, out) == (123, None) and ran[-1] == 123 and len(ran) == 123


def test_the_cap_after_norm_convergence_is_kept():
    # converged in norm at 20, the balance never met: stops at 2 * 20 + 10 exactly, as before
    rels = lambda k: 1e-12 if k >= 20 else 10.0 ** (-k / 2)
    it, out, _ = _planted(rels, tail_tol=1e-300)
    assert (it, out) == (50, True)
