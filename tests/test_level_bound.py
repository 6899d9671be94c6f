"""The error bound of ``level_iad`` answers from return times solved on the levels.

The bound must stay an upper bound on the true error (GTH / a direct solve), and
be close to the bound the exact mean return times give (the looseness of an
inexact solve is small).
"""
import numpy as np
import pytest

import ctmc
from ctmc.backends import operator_for
from ctmc.kernels.evidence import error_bound, iterative_bound
from ctmc.kernels.levels import LevelSystem
from ctmc.models.jsq import JSQ2


def _birth_death(n):
    """A birth-death chain with level-dependent rates (the level is the state)."""
    i = np.arange(n - 1)
    up, down = 1.0 + 0.5 * np.sin(i), 1.3 + 0.2 * np.cos(i)
    Q = np.diag(up, 1) + np.diag(down, -1)
    Q -= np.diag(Q.sum(axis=1))
    return ctmc.CTMC(Q), np.arange(n)


def _mm1k(K):
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, K)
    m.event("a", guard=n < K, rate=1.0, update={n: n + 1})
    m.event("d", guard=n > 0, rate=1.1, update={n: n - 1})
    return m.build(initial={"n": 0}), np.arange(K + 1)


def _jsq(K):
    q = JSQ2(K, 0.95, 0.5)
    return q.chain(), q.levels()


CHAINS = [pytest.param(lambda: _jsq(K), id=f"jsq{K}") for K in (20, 40)] + [
    pytest.param(lambda: _birth_death(120), id="birth-death"), pytest.param(lambda: _mm1k(80), id="mm1k")]


@pytest.mark.parametrize("make", CHAINS)
def test_the_level_bound_holds_and_is_close_to_the_exact_one(make):
    chain, levels = make()
    op = operator_for(chain, "scipy")
    n = op.n
    support = np.ones(n, dtype=bool)
    pi = chain.stationary("gth").pi
    rng = np.random.default_rng(1)
    pin = int(np.argmax(pi))
    X = support.copy()
    X[pin] = False
    # the exact mean times to reach the pin, by a dense solve
    M = -chain.Q.toarray()[np.ix_(X, X)]
    m = np.zeros(n)
    m[X] = np.linalg.solve(M, np.ones(X.sum()))
    for scale in (1e-9, 1e-6):
        hat = pi * (1 + scale * rng.standard_normal(n))
        hat /= hat.sum()
        info = {}
        bound, kind = iterative_bound(op, support, hat, pin, n, {}, info, error_tol=1e-6,
                                      system=LevelSystem(op, X, levels, hat))
        assert kind == "proven" and info["return_time_solver"] == "level"
        true = np.abs(hat - pi).sum()
        exact = error_bound(op, support, hat, pin, m.max(), upper=(m, 1.0))
        assert true <= bound <= 1.2 * exact, (true, bound, exact)


def test_level_system_solves_the_mean_times_of_a_birth_death_chain():
    chain, levels = _birth_death(60)
    op = operator_for(chain, "scipy")
    X = np.arange(60) > 0                    # the pin: state 0, a level of its own
    s = LevelSystem(op, X, levels, np.ones(60), rtol=1e-10)
    t, rep = s.solve(X.astype(float))
    M = -chain.Q.toarray()[1:, 1:]
    exact = np.linalg.solve(M, np.ones(59))
    assert rep.status is ctmc.Status.SUCCESS
    np.testing.assert_allclose(t[1:], exact, rtol=1e-8)
    assert t[0] == 0
    with pytest.raises(NotImplementedError):
        s.solve(X.astype(float), transpose=True)


def test_jsq_level_iad_gets_a_proven_bound_that_covers_its_error():
    q = JSQ2(300, 0.95, 0.5)
    ch = q.chain()
    ref = ch.stationary("lu")
    for tol in (1e-6, 1e-8):
        # a loose stop (no tail check, a loose error_tol), so the error is far above the reference's
        res = ch.stationary("level_iad", levels=q.levels(), x0=q.start_vector(), tol=tol, tail_tol=1.0,
                             error_tol=0.5)
        assert res.status is ctmc.Status.SUCCESS, res.message
        assert res.info["error_bound_kind"] == "proven" and res.info["return_time_solver"] == "level"
        err = np.abs(res.pi - ref.pi).sum()
        assert ref.error_bound < 0.1 * err
        assert err <= res.error_bound + ref.error_bound <= 1e4 * err, (err, res.error_bound)
