"""The stationary law does not depend on the unit of time: a chain whose rates are all tiny (or huge) is
solved as well as the same chain in a unit where its rates are near 1.

An M/M/1/100 queue with lambda/mu = 1/100 has an exact law down to 1e-200 (exact rationals). With
every rate multiplied by 1e-160, the flows pi_j q_ij of its tail underflow where pi_j does not:
before the generator was normalised (:func:`ctmc.backends.base.rate_scale`), sparse LU returned a
tail 100 % off graded ``success`` (the balance check skips states whose outflow is 0) and the power
method a tail 1e76 off graded ``success``. Every method and backend is checked against the exact law
state by state, where it grades its answer a success, and its reported residual is in the chain's own
unit of time.
"""
import warnings
from fractions import Fraction

import numpy as np
import pytest

import ctmc
from ctmc.backends.base import RATE_RANGE, rate_scale

from reference import bd_pi, mm1k

_TINY = np.finfo(float).tiny
K, RHO = 100, Fraction(1, 100)
EXACT = bd_pi(K, lambda n: RHO, lambda n: 1)
SCALES = [1.0, 1e-160, 1e-300, 1e200]
METHODS = {"lu": {}, "gth": {}, "gmres": {"tol": 1e-12}, "bicgstab": {"tol": 1e-12}, "gauss_seidel": {},
           "power": {}, "auto": {}}


def _solve(scale, method, backend="scipy"):
    chain = mm1k(K, float(RHO) * scale, 1.0 * scale)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return chain, chain.stationary(method, backend=backend, check=False, **METHODS[method])


def _true_relative(pi):
    ok = EXACT >= _TINY
    return float(np.max(np.abs(pi[ok] - EXACT[ok]) / EXACT[ok]))


@pytest.mark.parametrize("method", list(METHODS))
@pytest.mark.parametrize("scale", SCALES)
def test_a_success_is_accurate_in_the_tail_whatever_the_unit_of_time(scale, method):
    chain, res = _solve(scale, method)
    if res.status is ctmc.Status.SUCCESS:
        # a success has a balance error within tail_tol (1e-6): the relative error of the tail is about
        # that times a modest condition (Gauss-Seidel: 1.7e-6 in every unit), not 100 % or 1e76
        assert _true_relative(res.pi) <= 1e-4, (scale, method, res.message)
    # the residual is ||pi Q||_1 in the chain's own unit of time, however it was solved
    qmax = float(-chain.Q.diagonal().min())
    assert res.residual == pytest.approx(res.info["relative_residual"] * qmax, rel=1e-12, abs=1e-300 * qmax)
    assert res.info["rate_scale"] == rate_scale(qmax)


@pytest.mark.parametrize("scale", [1e-160, 1e200])
def test_direct_methods_give_the_same_law_in_every_unit(scale):
    """A power of two is exact to multiply by: LU's answer on the normalised chain is the one it
    gives where the rates are near 1 (to a few units of round-off: the normalised unit differs)."""
    for method in ("lu", "gth"):
        ref = _solve(1.0, method)[1].pi
        pi = _solve(scale, method)[1].pi
        ok = EXACT >= _TINY
        assert np.max(np.abs(pi[ok] - ref[ok]) / ref[ok]) < 1e-12, method


def test_the_petsc_backend_normalises_too(backend):
    chain, res = _solve(1e-160, "auto", backend)
    assert res.status is ctmc.Status.SUCCESS
    assert _true_relative(np.asarray(res.pi)) <= 1e-6
    assert res.info["rate_scale"] == rate_scale(1e-160)


def test_the_rule():
    lo, hi = RATE_RANGE
    assert rate_scale(lo) == rate_scale(hi) == rate_scale(1.0) == 1.0
    for q in (lo / 3, 1e-160, 1e-300):
        s = rate_scale(q)
        assert 0.5 <= q * s < 1.0 and np.log2(s) == int(np.log2(s))
    for q in (hi * 3, 1e300):                         # down: into the range, as little as needed
        s = rate_scale(q)
        assert hi / 2 <= q * s < hi and np.log2(s) == int(np.log2(s))
    assert rate_scale(5e-324) == 2.0 ** 1023          # the largest power of two a double holds


def test_scaling_down_keeps_every_rate_a_normal_double():
    """A power of two is exact to multiply by only while the product stays normal: scaled down by rates of
    1e154, a rate of 1e-169 would lose its digits and the chain be solved exactly balanced on rounded rates
    (2 % off, graded success: found by review). Scaled down as little as needed, and not at all where the
    smallest rate would still become a denormal number; the balance check then sees the truth."""
    R = np.array([[0, 2e154, 0.0], [2e154, 0, 1.4e-169], [4.1e-169, 0, 0]])
    exact = np.array([1.0, 1.0, 1.4 / 4.1])
    exact /= exact.sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ctmc.CTMC.from_rates(R).stationary("auto", check=False)
    ok = np.max(np.abs(res.pi - exact) / exact) <= 1e-6
    assert ok or res.status is not ctmc.Status.SUCCESS
    R[1, 2], R[2, 0] = 3e-308, 9e-308          # halved, 3e-308 would be a denormal: no scaling
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = ctmc.CTMC.from_rates(R).stationary("auto", check=False)
    assert res.info["rate_scale"] == 1.0


def test_the_uniformization_rate_is_in_the_chains_unit():
    chain = mm1k(K, float(RHO) * 1e-200, 1e-200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = chain.stationary("power", check=False)
    qmax = float(-chain.Q.diagonal().min())
    assert qmax <= res.info["uniformization_rate"] <= 1.1 * qmax
