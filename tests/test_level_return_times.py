"""Return times of the stationary error bound solved on levels found from the chain's own variables.

On a tandem network (the gallery's, with a slower second server so that its mean times are long) the
slow part of the mean times to reach the pin is their growth with the second queue ``sm``;
:func:`ctmc.kernels.levels.structured_levels` must find that variable and the two-level cycles on it
(:class:`ctmc.kernels.levels.LevelSystem`) must bracket the mean times where GMRES(50), the old
route's fallback after BiCGStab (both stalled on the gallery's tandem c=2047), does not. Every answer is checked
against a sparse LU solve: the mean times entrywise, the stationary law's error against its bound.
"""
import dataclasses

import numpy as np
import pytest
import scipy.sparse.linalg as sla

import ctmc
from ctmc.backends import operator_for
from ctmc.kernels.evidence import BOUND_BRACKET, RETURN_GMRES, return_time_bound
from ctmc.kernels import evidence
from ctmc.kernels import levels as levels_module
from ctmc.kernels.levels import level_chain, return_time_systems, structured_levels


def _tandem(c, kappa):
    """The gallery's tandem network (arrivals at 4c) with service rate ``kappa`` at the second queue."""
    m = ctmc.Model("tandem")
    sc, ph, sm = m.var("sc", 0, c), m.var("ph", 1, 2), m.var("sm", 0, c)
    m.event("arrive", guard=sc < c, rate=4.0 * c, update={sc: sc + 1})
    m.event("phase", guard=(sc > 0) & (ph == 1), rate=0.2, update={ph: 2})
    m.event("route1", guard=(sc > 0) & (ph == 1) & (sm < c), rate=1.8, update={sc: sc - 1, sm: sm + 1})
    m.event("route2", guard=(sc > 0) & (ph == 2) & (sm < c), rate=2.0, update={sc: sc - 1, ph: 1, sm: sm + 1})
    m.event("depart", guard=sm > 0, rate=kappa, update={sm: sm - 1})
    return m.build(initial={"sc": 0, "ph": 1, "sm": 0})


@pytest.fixture(scope="module")
def tandem():
    chain = _tandem(100, 2.1)
    op = operator_for(chain, "scipy")
    lu = chain.stationary("lu")
    pin = int(np.argmax(lu.pi))
    X = np.ones(op.n, dtype=bool)
    X[pin] = False
    m = np.zeros(op.n)
    m[X] = sla.spsolve((-chain.Q[X][:, X]).tocsc(), np.ones(int(X.sum())))
    return chain, op, lu, pin, X, m


@pytest.mark.parametrize("chunk", [None, 7])
def test_the_level_chain_is_the_galerkin_product_of_the_levels(chunk, monkeypatch):
    if chunk is not None:                   # Q read a few rows at a time, as on large chains
        monkeypatch.setattr(levels_module, "_CHUNK", chunk)
    chain = _tandem(6, 2.1)
    op = operator_for(chain, "scipy")
    X = np.ones(op.n, dtype=bool)
    X[3] = False
    lev = op.states["sm"]
    w = np.random.default_rng(0).uniform(0.5, 2.0, op.n)
    group, share, ab = level_chain(op.generator_rows(False), X, lev, w)
    # dense: T^T diag(s) M T with s = w / (w summed over the level), M = -Q_XX
    M = -chain.Q.toarray()[np.ix_(X, X)]
    levels = np.unique(lev[X])
    T = (lev[X][:, None] == levels[None, :]).astype(float)
    s = w[X] / (T @ (T.T @ w[X]))
    Ac = T.T @ (s[:, None] * M) @ T
    # solve_banded's form (1, 1): superdiagonal, diagonal, subdiagonal
    dense = np.diag(ab[0, 1:], 1) + np.diag(ab[1]) + np.diag(ab[2, :-1], -1)
    assert np.allclose(dense, Ac)           # nothing beyond the three diagonals either
    assert np.allclose(share[X], s) and np.all(group[~X] == -1)


def test_structured_levels_picks_the_variable_the_mean_times_grow_along(tandem):
    chain, op, lu, pin, X, m = tandem
    name, lev = structured_levels(op, X)
    assert name == "sm" and np.array_equal(lev, op.states["sm"])
    # the LU mean times: they vary across the levels of sm far more than within them
    sm = op.states["sm"]
    within = max(np.ptp(m[X & (sm == k)]) for k in range(1, 101))
    assert within < 0.02 * np.ptp(m[X])
    # no candidate on a chain with too few levels
    assert structured_levels(operator_for(_tandem(20, 2.1), "scipy"), np.ones(21 * 41, dtype=bool)) is None


def test_the_level_route_brackets_the_return_times_where_gmres_stalls(tandem):
    chain, op, lu, pin, X, m = tandem
    support = np.ones(op.n, dtype=bool)
    old = return_time_bound(op, support, pin, specs=[RETURN_GMRES], bracket=BOUND_BRACKET)
    assert not np.isfinite(old[0])           # GMRES(50): no residual below 1 in its 2 x 200 iterations
    info = {}
    first, later = return_time_systems(op, X, info=info)
    assert first is None                    # no levels given: found only when asked (after BiCGStab)
    bound, est = return_time_bound(op, support, pin, specs=[later], info=info, bracket=BOUND_BRACKET)
    m_hat, f = info["return_time_upper"]
    assert info["return_time_levels"] == "sm" and info["return_time_solver"] == "level" and np.all(m[X] <= f * m_hat[X] * (1 + 1e-12))      # the proven entrywise bound
    assert np.max(np.abs(m_hat[X] / m[X] - 1)) < 0.05                       # and close to m
    assert m.max() <= bound <= 1.1 * m.max()


def test_where_bicgstab_stalls_the_default_bound_comes_from_the_levels_and_holds(tandem, monkeypatch):
    chain, op, lu, pin, X, m = tandem
    # BiCGStab stalled on the gallery's tandem c=2047 (200 iterations, residual 0.82), far beyond a
    # test's size: here its budget is cut to 3 iterations; GMRES(50) stalls on this chain as it is
    monkeypatch.setattr(evidence, "RETURN_SPEC", dataclasses.replace(evidence.RETURN_SPEC, maxiter=3))
    res = chain.stationary(error_tol=1e-9)
    assert res.info["return_time_iterations"][0] == 3 and res.info["error_bound_kind"] == "proven"
    assert res.status is ctmc.Status.SUCCESS
    assert res.info["return_time_solver"] == "level" and res.info["return_time_levels"] == "sm"
    err = np.abs(res.pi - lu.pi).sum()
    assert err <= res.error_bound + lu.error_bound and res.error_bound <= 1e-9


def test_a_bicgstab_that_does_not_halve_the_residual_is_not_refined_where_levels_serve(tandem, monkeypatch):
    """One BiCGStab solve cut at 3 iterations (its unit residual far above 1/2), then the levels at once:
    no refinement round on the same solver (tandem c=2047: 200 iterations more, without a bound).
    Counted; the bound still holds against LU."""
    chain, op, lu, pin, X, m = tandem
    monkeypatch.setattr(evidence, "RETURN_SPEC", dataclasses.replace(evidence.RETURN_SPEC, maxiter=3))
    res = chain.stationary(error_tol=1e-9)
    its = res.info["return_time_iterations"]
    assert its[0] == 3 and len(its) == 2 and its[1] <= levels_module.LEVEL_PROBE, its
    assert res.info["return_time_settled"] and res.info["return_time_solver"] == "level"
    assert res.status is ctmc.Status.SUCCESS and res.info["error_bound_kind"] == "proven"
    assert np.abs(res.pi - lu.pi).sum() <= res.error_bound + lu.error_bound and res.error_bound <= 1e-9


def test_the_solve_made_ahead_is_not_refined_either_where_levels_serve(tandem, monkeypatch):
    """The same with the first solve made ahead on a second thread (:class:`ReturnTimesAhead`), the
    system the default hands the bound on two cores: its refinements would run on that system."""
    from ctmc.kernels.ahead import ReturnTimesAhead
    chain, op, lu, pin, X, m = tandem
    monkeypatch.setattr(evidence, "RETURN_SPEC", dataclasses.replace(evidence.RETURN_SPEC, maxiter=3))
    support = np.ones(op.n, dtype=bool)
    ahead = ReturnTimesAhead(op, support, pin)
    info = {}
    later = return_time_systems(op, X, info=info)[1]
    try:
        bound, kind = evidence.iterative_bound(op, support, lu.pi, pin, op.n, {}, info, error_tol=1e-9,
                                               system=ahead, later=later)
    finally:
        ahead.close()
    its = info["return_time_iterations"]
    assert its[0] == 3 and len(its) == 2 and its[1] <= levels_module.LEVEL_PROBE, its
    assert info["return_time_settled"] and info["return_time_solver"] == "level" and kind == "proven"
    assert 0 < bound <= 1e-9 and info["return_time_levels"] == "sm"


def test_a_bicgstab_that_halves_the_residual_is_kept(tandem):
    """Where BiCGStab's first solve halves the unit residual the levels are not asked for."""
    chain, op, lu, pin, X, m = tandem
    info = {}
    first, later = return_time_systems(op, X, info=info)
    spec = dataclasses.replace(evidence.RETURN_SPEC, maxiter=5000)
    bound, est = return_time_bound(op, np.ones(op.n, dtype=bool), pin, specs=[spec, later], info=info)
    assert "return_time_settled" not in info and info["return_time_solver"] == "bicgstab"
    assert "return_time_levels" not in info and m.max() <= bound
