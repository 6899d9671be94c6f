"""Every stationary result carries a status and an error estimate that hold: two ways they did not.

Rates beyond the double range. A star whose hub exits at 1e160 to one leaf and at 1e-170 to the
other (detailed balance: the law in closed form, exact rationals of the float rates) has a law of
ordinary numbers, but GTH's first step divides 1e-170 by 1e160: the quotient underflows, the leaf is cut
off, and GTH returned [0, 0, 1] for (1/3, 1/3, 1/3), graded ``tail_inaccurate`` with an error estimate of
2e-15 (the 1-norm error was 4/3). Its estimate rests on an elimination in range: the answer now shows
when it was not (its balance error beyond GTH's round-off), the elimination is redone in extended
precision, and where that is not available the answer is ``inaccurate`` without an estimate.

Tails graded on the balance error alone. A balance error within ``tail_tol`` is necessary, not
sufficient, for relative accuracy: Gauss-Seidel, SOR, the power method and multilevel graded
``success`` with tails of 1e-69 off by 1e-6 to 1e-3 relatively (birth-death chains, the law in exact
rationals). Where the cheap estimate (balance error x condition) does not show the tail within
``tail_tol``, one correction solve (a sparse LU, on a class small enough) measures the tail's error and
grades the answer; on a larger class the answer says its tail is unproven.
"""
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp

import ctmc

from reference import bd_pi, birth_death, product_form, true_relative



def star(rates):
    """A hub (state 0) and leaves ``1..k`` with rates ``(out, back)`` to and from each; its law by
    detailed balance in exact rationals of the float rates: ``pi_i / pi_0 = out_i / back_i``."""
    k = len(rates)
    R = sp.lil_matrix((k + 1, k + 1))
    w = [Fraction(1)]
    for i, (out, back) in enumerate(rates, 1):
        R[0, i], R[i, 0] = out, back
        w.append(Fraction(out) / Fraction(back))
    return ctmc.CTMC.from_rates(R.tocsr()), np.array([float(x / sum(w)) for x in w])


RANGE_PROBLEMS = {
    # rates spanning 1e330: the law (1/3, 1/3, 1/3); before: [0, 0, 1], estimated 2e-15
    "star_1e160_1e-170": lambda: star([(1e160, 1e160), (1e-170, 1e-170)]),
    # denormal rates beside 1e300 (no rescaling can help: the smallest rate would vanish)
    "star_1e300_1e-310": lambda: star([(1e300, 1e300), (1e-310, 1e-310)]),
    # a law that is not uniform: (1, 1/2, 1/4) / (7/4)
    "star_uneven": lambda: star([(1e160, 2e160), (1e-170, 4e-170)]),
    # four leaves, two of them far below the rest
    "star_four": lambda: star([(1e150, 1e150), (1.0, 2.0), (1e-160, 1e-160), (1e-170, 3e-170)]),
}
RANGE_METHODS = ["gth", "lu", "auto", "gauss_seidel", "power", "gmres", "multilevel"]
# a normal probability whose flows underflow in doubles (1e-250 x 1e-100): a double GTH returned the leaf
# as 0 graded success, its balance check blind to it (rates spanning 1e300: extended precision first)
UNDERFLOW_PROBLEMS = {
    "star_flow_1e-350": lambda: star([(1e-250, 1e-100), (1e50, 1e-50)]),
    "star_flow_1e-350_four": lambda: star([(1e-250, 1e-100), (1e50, 1e-50), (1e-120, 1e-150)]),
}


def _solve(chain, method, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return chain.stationary(method, check=False, **kw)
        except ctmc.SolverError as e:       # auto: every method failed (nothing claimed)
            return e.result


@pytest.mark.parametrize("method", RANGE_METHODS)
@pytest.mark.parametrize("name", list(RANGE_PROBLEMS))
def test_across_the_double_range_an_estimate_holds_and_a_success_is_right(name, method):
    chain, exact = RANGE_PROBLEMS[name]()
    res = _solve(chain, method)
    if res is None or not np.all(np.isfinite(res.pi)):
        return                                              # no law claimed
    err = float(np.abs(np.asarray(res.pi) - exact).sum())
    # the 1-norm error bound (or estimate) holds, whatever the status
    assert err <= res.error_bound + 1e-15, (name, method, res.status, res.pi, res.error_bound)
    if res.status is ctmc.Status.SUCCESS:
        assert true_relative(np.asarray(res.pi), exact) <= 1e-6, (name, method, res.pi)


@pytest.mark.parametrize("method", ["gth", "auto"])
@pytest.mark.parametrize("name", list(RANGE_PROBLEMS))
def test_gth_computes_the_law_across_the_double_range(name, method):
    chain, exact = RANGE_PROBLEMS[name]()
    res = _solve(chain, method)
    assert res.status is ctmc.Status.SUCCESS, res.message
    assert true_relative(np.asarray(res.pi), exact) <= 1e-14
    assert res.info["gth_precision"] == "extended"


def test_without_extended_precision_gth_is_inaccurate_and_says_why(monkeypatch):
    from ctmc.kernels import sweeps
    monkeypatch.setattr(sweeps, "EXTENDED_RANGE", False)
    chain, exact = RANGE_PROBLEMS["star_1e160_1e-170"]()
    res = _solve(chain, "gth")
    assert res.status is ctmc.Status.INACCURATE and res.error_bound == np.inf
    assert "left the double range" in res.info["gth_range"] and "gth_precision" not in res.info


def _bd(K, lam, mu):
    m, _ = birth_death(K, lambda n: lam, lambda n: mu)
    return m.build(initial={"n": 0}), bd_pi(K, lambda n: Fraction(lam), lambda n: Fraction(mu))


TAIL_PROBLEMS = {
    # M/M/1/K chains with tails near 1e-69 to 1e-71 (the balance check passed, the tail was off)
    "mm1k_100_0.2": lambda: _bd(100, 1, 5),
    "mm1k_60_1/14": lambda: _bd(60, 1, 14),
    "mm1k_200_1/2.2": lambda: _bd(200, 1, 2.2),
    "mm1k_400_1/1.5": lambda: _bd(400, 1, 1.5),
    # a 2-D product form, 3721 states, tails to 1e-138
    "product2": lambda: product_form([(60, 1, 10), (60, 1, 20)]),
}
TAIL_METHODS = ["gauss_seidel", "sor", "power", "multilevel"]
_CACHE = {}


def _tail_problem(name):
    if name not in _CACHE:
        _CACHE[name] = TAIL_PROBLEMS[name]()
    return _CACHE[name]


@pytest.mark.parametrize("method", TAIL_METHODS)
@pytest.mark.parametrize("name", list(TAIL_PROBLEMS))
def test_a_success_has_its_small_probabilities_within_tail_tol(name, method):
    chain, exact = _tail_problem(name)
    res = _solve(chain, method)
    true = true_relative(np.asarray(res.pi), exact)
    if res.status is ctmc.Status.SUCCESS:
        # the default tail_tol, and a little of the reference's own rounding
        assert true <= 1e-6 + 1e-13, (name, method, true, res.balance_error, res.message)
    if "tail_error_corrected" in res.info:      # run where the estimate did not show the tail: it is sharp
        assert abs(res.info["tail_error_corrected"] - true) <= 0.01 * true + 1e-13, (name, method, true)


def test_a_large_class_says_its_tail_is_unproven():
    """10201 states (above the sparse LU of the bound): BiCGStab at a loose tol balances within
    tail_tol, its tail is 1e-5 off; the status stays success (tail_tol bounds the balance error) and the
    answer says the tail is unproven, which the tail bound then refutes."""
    chain, exact = product_form([(100, 1.0, 1.1), (100, 1.0, 1.2)])
    kw = dict(tol=1e-8, preconditioner="jacobi")
    plain = _solve(chain, "bicgstab", **kw)
    assert plain.status is ctmc.Status.SUCCESS and true_relative(plain.pi, exact) > 1e-6
    assert plain.info["tail_accuracy"] == "unproven" and "unproven" in plain.message
    assert "tail_error_bound" not in plain.info                     # (no solve added on a large class)
    bounded = _solve(chain, "bicgstab", tail_bound=True, **kw)
    assert bounded.status is ctmc.Status.TAIL_INACCURATE and "tail_accuracy" not in bounded.info


@pytest.mark.parametrize("name", list(UNDERFLOW_PROBLEMS))
def test_gth_keeps_a_normal_probability_whose_flows_underflow(name):
    chain, exact = UNDERFLOW_PROBLEMS[name]()
    res = _solve(chain, "gth")
    ok = exact >= np.finfo(float).tiny
    err = float(np.max(np.abs(np.asarray(res.pi)[ok] - exact[ok]) / exact[ok]))
    assert res.status is ctmc.Status.SUCCESS and err <= 1e-13, (res.status, err)


@pytest.mark.parametrize("method", ["gth", "lu"])
def test_a_tail_tol_below_the_correction_s_resolution_is_unproven_not_inaccurate(method):
    """At ``tail_tol=1e-14`` an 801-state birth-death chain's GTH and LU laws are right to 6e-16, but one
    correction step measured 5e-14 and 1.4e-14, its own rounding, and graded them ``tail_inaccurate``. The
    step taken again from its answer gives that resolution: an error within ten times it is unmeasured,
    and the answer a success whose tail is unproven (its true error checked here in exact rationals)."""
    K = 800
    chain = birth_death(K, lambda n: 2.0, lambda n: 1.0 * (1 + n % 3), "bd")[0].build(initial={"n": 0})
    exact = bd_pi(K, lambda n: 2.0, lambda n: 1.0 * (1 + n % 3))
    res = _solve(chain, method, tail_tol=1e-14)
    assert true_relative(np.asarray(res.pi), exact) < 1e-14
    assert res.status is ctmc.Status.SUCCESS and res.info["tail_accuracy"] == "unproven"
    assert res.info["tail_error_corrected"] <= 10 * res.info["tail_correction_noise"]
