"""The memory budget of ``auto`` (:func:`ctmc.kernels.plan.memory_plan`) and the lean Gauss-Seidel sweep.

Each answer under a budget is compared with an independent one: the sparse
direct solve of the same chain, within the proven error bounds of both; the
rule itself with the byte counts it claims to respect.
"""
import numpy as np
import pytest
import scipy.sparse as sp

import ctmc
from ctmc import stationary as st
from ctmc.backends import operator_for
from ctmc.kernels import plan
from ctmc.kernels.registry import Method
from ctmc.kernels.sweeps import Sweeper
from ctmc.models.gallery import parse_spec


@pytest.fixture(scope="module")
def kanban():
    """kanban t=2: 4600 states, four dimensions: auto plans a GMRES probe."""
    chain = parse_spec("kanban:2").chain()
    exact = chain.stationary("lu")
    return chain, exact


def _sizes(chain):
    return chain.n_states, chain.Q.nnz


def _released(chain):
    """What the scipy operator frees before a Krylov basis: its Q^T, as many bytes as Q."""
    return chain.Q.data.nbytes + chain.Q.indices.nbytes + chain.Q.indptr.nbytes


def _agrees(res, exact):
    """The two answers within the sum of their proven bounds (and a hair of round-off)."""
    assert res.status is ctmc.Status.SUCCESS
    assert np.isfinite(res.error_bound)
    assert np.abs(res.pi - exact.pi).sum() <= res.error_bound + exact.error_bound + 1e-13


def test_default_budget_keeps_the_generator_sized_restart(kanban):
    chain, exact = kanban
    res = chain.stationary()
    n, e = _sizes(chain)
    assert res.info["auto"]["probe_restart"] == plan.probe_restart(n, None, entries_per_state=e / n)
    assert "memory_plan" not in res.info["auto"]
    _agrees(res, exact)


def test_a_budget_below_the_default_basis_takes_the_restart_that_fits(kanban):
    chain, exact = kanban
    n, e = _sizes(chain)
    default = plan.probe_restart(n, None, entries_per_state=e / n)
    budget = plan.solve_bytes("gmres", n, e, restart=25) - _released(chain)
    res = chain.stationary(memory=budget)
    a = res.info["auto"]
    assert a["probe_restart"] == 25 < default
    assert a["memory_plan"].startswith(f"GMRES({a['probe_restart']})")
    assert res.method == "gmres"
    _agrees(res, exact)


def test_a_budget_no_basis_fits_takes_the_lean_methods(kanban):
    chain, exact = kanban
    n, e = _sizes(chain)
    # room for the error bound's BiCGStab (and its matrix), not for GMRES(10)
    released = _released(chain)
    budget = max(plan.solve_bytes("bound", n, e) - released, plan.MATRIX_ENTRY_BYTES * e + plan.MATRIX_ROW_BYTES * n)
    assert plan.solve_bytes("gmres", n, e, plan.LEAN_MIN_RESTART) - released > budget
    res = chain.stationary(memory=budget)
    a = res.info["auto"]
    assert a["plan"][0] == "bicgstab-probe" and "lu" not in a["plan"] and "gmres-long" not in a["plan"]
    assert "lean" in a["memory_plan"] and "lean" in a["reason"]
    assert res.method in ("bicgstab", "gauss_seidel")
    _agrees(res, exact)


def test_a_budget_too_small_for_any_method_fails_before_any_solve(kanban, monkeypatch):
    chain, _ = kanban

    def boom(*a, **k):
        raise AssertionError("a solve ran")

    for name in ("gmres", "bicgstab", "gauss_seidel", "lu", "power"):
        monkeypatch.setitem(st.METHODS, name, Method(boom, st.METHODS[name].options, "patched"))
    with pytest.raises(ValueError, match=r"memory: a budget of 1000 bytes is below the"):
        chain.stationary(memory=1000.0)


@pytest.mark.parametrize("bad", [0, -1.0, "1GB", True])
def test_the_memory_option_is_validated(kanban, bad):
    chain, _ = kanban
    with pytest.raises(ValueError, match="memory"):
        chain.stationary(memory=bad)


def test_memory_plan_takes_the_largest_restart_that_fits():
    """The invariant the rule promises: GMRES(r) fits the budget, GMRES(r + 1) does not (between the bounds)."""
    steps = ["gmres-probe", "gauss_seidel-probe", "lu", "gmres-long", "power"]
    n, e, released = 10**5, 9 * 10**5, 4e6
    cap = plan.probe_restart(n, None, entries_per_state=e / n)
    for budget in np.linspace(plan.solve_bytes("gmres", n, e, plan.LEAN_MIN_RESTART) - released,
                              plan.solve_bytes("gmres", n, e, cap) - released, 7):
        out, r, _ = plan.memory_plan(steps, n, e, budget, released=released)
        assert out == steps
        assert plan.solve_bytes("gmres", n, e, r) - released <= budget
        assert r == cap or plan.solve_bytes("gmres", n, e, r + 1) - released > budget
    with pytest.raises(MemoryError, match="memory: a budget"):
        plan.memory_plan(steps, n, e, 1e3)
    # plans without a Krylov step are left as they are (a budget for the bound is still needed)
    assert plan.memory_plan(["lu", "power"], n, e, 1e12)[0] == ["lu", "power"]


def test_auto_grades_by_the_error_tol_asked(kanban):
    """auto's answer is graded against the caller's error_tol (it used the default 1e-6 before)."""
    chain, _ = kanban
    res = chain.stationary(error_tol=1e-300, check=False)
    assert res.error_bound > 1e-300 and res.status is ctmc.Status.INACCURATE


def test_the_whole_chain_sweep_is_gauss_seidel_on_q_transpose():
    """One forward sweep of the lean Sweeper (Q^T's own rows) against the textbook loop."""
    rng = np.random.default_rng(3)
    n = 40
    R = sp.random(n, n, density=0.2, random_state=rng, format="csr")
    R.setdiag(0.0)
    R = R + sp.diags(np.ones(n - 1), 1) + sp.diags([1.0], -(n - 1))     # irreducible: a cycle
    R.eliminate_zeros()
    chain = ctmc.CTMC((R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr())
    op = operator_for(chain, "scipy")
    sweeper = Sweeper(op, np.ones(n, dtype=bool))
    assert sweeper.local is op.generator_rows(True) or np.shares_memory(sweeper.local.data, op.QT.data)
    x = rng.random(n) + 0.1
    y = x.copy()
    Rd, q = R.toarray(), np.asarray(R.sum(axis=1)).ravel()
    for i in range(n):                                  # x_i <- sum_{j != i} x_j R_ji / q_i, in order
        y[i] = sum(y[j] * Rd[j, i] for j in range(n) if j != i) / q[i]
    y /= y.sum()
    sweeper(x)
    assert np.allclose(x, y, rtol=1e-13, atol=0)
