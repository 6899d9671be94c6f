"""The error bound's return times solved ahead, on another core (ctmc.kernels.ahead), stay a proven bound.

The bound of a Krylov answer is computed from mean times to reach a pin solved on a thread
while the stationary solve runs, pinned where that solve is pinned. Checked against
independent answers: GTH's law on random chains (nearly decomposable and stiff ones among
them), return times from a sparse LU, and the bound computed the usual way at each pin.
"""
import threading
import warnings

import numpy as np
import pytest
import scipy.sparse.linalg as sla
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctmc
from ctmc.backends import operator_for
from ctmc.kernels import ahead as ah
from ctmc.kernels import plan
from ctmc.kernels.classes import closed_classes, global_argmax
from ctmc.kernels.evidence import BOUND_BRACKET, inverse_norm_bound_of, iterative_bound

from helpers_chains import chains


@pytest.fixture
def always_ahead(monkeypatch):
    """Every class gets its return times ahead (the test chains are far below AHEAD_STATES, and their vectors
    are many bytes a transition: the plan's peak rule lifted)."""
    monkeypatch.setattr(ah, "AHEAD_STATES", 0)
    monkeypatch.setattr(ah, "cores", lambda: 2)
    monkeypatch.setattr(plan, "PEAK_BYTES_PER_TRANSITION", np.inf, raising=False)


def _grid(n=30, m=25):
    """Two queues in tandem with blocking: n * m states, a Krylov solve's size for a test."""
    mod = ctmc.Model("tandem")
    a, b = mod.var("a", 0, n - 1), mod.var("b", 0, m - 1)
    mod.event("arr", guard=a < n - 1, rate=1.0, update={a: a + 1})
    mod.event("move", guard=(a > 0) & (b < m - 1), rate=1.3, update={a: a - 1, b: b + 1})
    mod.event("dep", guard=b > 0, rate=1.1, update={b: b - 1})
    return mod.build(initial={"a": 0, "b": 0})


def _exact_return_times(op, support, pin):
    """``m = (-Q_XX)^{-1} 1`` by sparse LU (zero off ``X``)."""
    X = support.copy()
    X[pin] = False
    idx = np.flatnonzero(X)
    M = -op.Q[idx][:, idx].tocsc()
    m = np.zeros(X.size)
    m[idx] = sla.spsolve(M, np.ones(idx.size))
    return X, m


def test_the_return_times_solved_ahead_bound_the_exact_ones(always_ahead):
    c = _grid()
    op = operator_for(c, "scipy")
    support = closed_classes(op, None, limit=1)[0]
    pin = int(c.stationary("lu").pi.argmax())
    X, exact = _exact_return_times(op, support, pin)
    a = ah.ReturnTimesAhead.start(op, support, pin, int(support.sum()))
    assert a is not None
    try:
        m_hat, rep = a.solve(X.astype(float))
        again, _ = a.solve(X.astype(float))                    # the one made ahead, each time
        assert np.array_equal(m_hat, again) and rep.iterations > 0
        info = {}
        bound, est = inverse_norm_bound_of(op, X, a, 0.0, 0.1, 5, info, bracket=BOUND_BRACKET)
    finally:
        a.close()
    top = exact.max()
    assert top <= bound <= BOUND_BRACKET * top               # proven, and within the bracket
    y, f = info["upper"]
    assert np.all(exact[X] <= f * y[X] * (1 + 1e-12))        # entrywise, as error_bound uses it


def test_a_krylov_answer_is_within_its_bound_with_the_return_times_ahead(always_ahead):
    c = _grid()
    exact = c.stationary("gth" if c.n_states <= 1000 else "lu").pi
    for method in ("bicgstab", "gmres"):
        res = c.stationary(method, tol=1e-9, check=False)
        assert res.info.get("return_time_ahead") is True
        assert res.info["return_time_state"] == res.info["pins"][-1] or \
            res.pi[res.info["return_time_state"]] == res.pi.max()
        err = np.abs(res.pi - exact).sum()
        assert res.status is ctmc.Status.SUCCESS, (method, res.message)
        assert err <= res.error_bound <= 1e-6, (method, err, res.error_bound)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(chain=chains(), method=st.sampled_from(["gmres", "bicgstab"]))
def test_every_krylov_answer_is_within_its_bound_or_not_success(always_ahead, chain, method):
    gth = chain.stationary("gth")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = chain.stationary(method, check=False)
        except ctmc.SolverError:
            return
    if res.status is ctmc.Status.SUCCESS:
        err = np.abs(res.pi - gth.pi).sum()
        assert err <= res.error_bound + gth.error_bound, (method, err, res.error_bound)


def _bounds_at(op, support, pi, pins, error_tol):
    """The bound computed the usual way (no system given) at each pin."""
    size = int(support.sum())
    return {p: iterative_bound(op, support, pi, p, size, {}, {}, error_tol=error_tol)[0] for p in pins}


def _grid_answer():
    """The grid's operator, class, a BiCGStab answer, its largest probability and where it is."""
    c = _grid()
    op = operator_for(c, "scipy")
    support = closed_classes(op, None, limit=1)[0]
    pi = c.stationary("bicgstab", tol=1e-8, check=False).pi
    return (op, support, pi) + tuple(global_argmax(op, pi))


def test_a_pin_of_small_probability_is_not_used(always_ahead):
    op, support, pi, top, best = _grid_answer()
    low = int(np.flatnonzero(pi < 0.25 * top)[0])
    a = ah.ReturnTimesAhead.start(op, support, low, int(support.sum()))
    info = {}
    try:
        bound, kind, pin = ah.bound_ahead(a, op, support, pi, int(support.sum()), {}, info, 1e-6)
    finally:
        a.close()
    assert pin == best and "return_time_ahead" not in info and kind == "proven"
    assert bound == _bounds_at(op, support, pi, [best], 1e-6)[best]


def test_a_bound_above_error_tol_at_the_solve_pin_is_computed_again_at_the_argmax(always_ahead):
    op, support, pi, top, best = _grid_answer()
    near = int(np.flatnonzero((pi >= 0.3 * top) & (pi < top))[0])       # probable, not the argmax
    tol = 1e-300                                       # every bound misses it: both pins are tried
    expected = _bounds_at(op, support, pi, [near, best], tol)
    a = ah.ReturnTimesAhead.start(op, support, near, int(support.sum()))
    info = {}
    try:
        bound, _, pin = ah.bound_ahead(a, op, support, pi, int(support.sum()), {}, info, tol)
    finally:
        a.close()
    assert bound == pytest.approx(min(expected.values()), rel=1e-12)
    assert pin == min(expected, key=expected.get)
    assert info.get("return_time_ahead", False) == (pin == near)


def test_a_failed_solve_ahead_is_made_again_in_the_caller(always_ahead, monkeypatch):
    c = _grid()
    op = operator_for(c, "scipy")
    support = closed_classes(op, None, limit=1)[0]
    pi = c.stationary("bicgstab", tol=1e-8, check=False).pi
    best = global_argmax(op, pi)[1]
    real = ah.ReturnTimesAhead._run

    def failing(self):
        self.error = MemoryError("planted")            # as if the thread's vectors did not fit
    monkeypatch.setattr(ah.ReturnTimesAhead, "_run", failing)
    a = ah.ReturnTimesAhead.start(op, support, best, int(support.sum()))
    monkeypatch.setattr(ah.ReturnTimesAhead, "_run", real)
    info = {}
    try:
        bound, kind, pin = ah.bound_ahead(a, op, support, pi, int(support.sum()), {}, info, 1e-6)
    finally:
        a.close()
    assert pin == best and kind == "proven" and "planted" in info["return_time_ahead_error"]
    assert bound == pytest.approx(_bounds_at(op, support, pi, [best], 1e-6)[best], rel=1e-12)


def test_no_thread_outlives_the_call(always_ahead):
    c = _grid()
    res = c.stationary("bicgstab")
    assert res.info.get("return_time_ahead") is True
    assert not [t for t in threading.enumerate() if t.name.startswith("ctmc return times")]
    assert "_ahead" not in res.info


def test_no_thread_where_it_cannot_pay(monkeypatch):
    c = _grid()
    op = operator_for(c, "scipy")
    support = closed_classes(op, None, limit=1)[0]
    assert ah.ReturnTimesAhead.start(op, support, 0, int(support.sum())) is None     # below AHEAD_STATES
    monkeypatch.setattr(ah, "AHEAD_STATES", 0)
    monkeypatch.setattr(ah, "cores", lambda: 1)
    assert ah.ReturnTimesAhead.start(op, support, 0, int(support.sum())) is None     # one core
    monkeypatch.setattr(ah, "cores", lambda: 2)
    # memory short (5 MB: the two solves' 18 vectors, 108 kB, above 1 % of it) and under 3 transitions a
    # state: the two solves' vectors alone are above 40 bytes a transition
    monkeypatch.setattr(ah, "available_memory", lambda: 5 * 10 ** 6)
    assert ah.ReturnTimesAhead.start(op, support, 0, int(support.sum())) is None     # the plan's peak rule
    monkeypatch.setattr(plan, "PEAK_BYTES_PER_TRANSITION", np.inf)
    started = ah.ReturnTimesAhead.start(op, support, 0, int(support.sum()))
    assert started is not None
    started.close()
    monkeypatch.setattr(ah, "available_memory", lambda: 1000)
    assert ah.ReturnTimesAhead.start(op, support, 0, int(support.sum())) is None     # no room beside it


@pytest.mark.parametrize("method", ["gmres", "bicgstab"])
def test_an_unbounded_answer_keeps_the_condition_seen_by_the_solve_ahead(method, always_ahead):
    """Without a proven bound, the condition that admits the correction estimate is the largest seen.

    Three independent queues, one of them a thousand million times slower (nearly decomposable):
    the law is the product of geometric ones. The thread's BiCGStab sees mean times of 1e8 and
    more; GMRES after it, on its unconverged iterate, a few; the estimate accepted on GMRES's
    alone was 0.011 (GMRES) and 0.0036 (BiCGStab) beside true errors of 1.0 and 0.5.
    """
    mod = ctmc.Model("three")
    for k, (lam, mu) in enumerate([(1e-9, 2e-9), (1e4, 2e4), (1e2, 1e3)]):
        v = mod.var(f"x{k}", 0, 20)
        mod.event(f"a{k}", guard=v < 20, rate=lam, update={v: v + 1})
        mod.event(f"d{k}", guard=v > 0, rate=mu, update={v: v - 1})
    c = mod.build(initial={"x0": 0, "x1": 0, "x2": 0})
    st = operator_for(c, "scipy").states
    logw = sum(np.asarray(st[f"x{k}"]) * np.log(r) for k, r in enumerate([0.5, 0.5, 0.1]))
    exact = np.exp(logw - logw.max())
    exact /= exact.sum()
    res = c.stationary(method, check=False)
    assert res.info["return_time_ahead"]
    assert np.abs(res.pi - exact).sum() <= res.error_bound
