"""The tail polish: compiled Gauss-Seidel sweeps and the rule that stops them.

References: pyamg's own CSR sweeps (the kernel the polish ran on before; the
compiled one must give its numbers to the bit), dense GTH on a tandem network
whose tail falls to 1e-135 (every state compared relatively), and measures
with a known course for the stopping rule (the first sweep that meets the
tolerance is known in closed form).
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import ctmc
from ctmc import _relax
from ctmc.kernels.sweeps import POLISH_GAP, POLISH_MARGIN, POLISH_PATIENCE, polish_sweeps

ext = _relax.extension()
needs_ext = pytest.mark.skipif(ext is None or not hasattr(ext, "gs"), reason="compiled kernels not built")


def _matrix(n, seed, itype, holes=False):
    """A random square CSR matrix with sorted rows; ``holes``: some rows without a diagonal, one zero."""
    rng = np.random.default_rng(seed)
    A = (sp.random(n, n, density=min(1.0, 6.0 / n), random_state=seed, format="csr")
         + sp.diags(rng.uniform(1.0, 3.0, n))).tocsr()
    if holes and n > 3:
        A = A.tolil()
        A[1, 1] = 0.0                       # removed: no diagonal stored
        A = A.tocsr()
        A.eliminate_zeros()
        A = A + sp.csr_matrix(([0.0], ([2], [2])), shape=A.shape)   # a stored zero diagonal
        A.data[A.indptr[2]:A.indptr[3]][A.indices[A.indptr[2]:A.indptr[3]] == 2] = 0.0
    A.sort_indices()
    A.indices, A.indptr = A.indices.astype(itype), A.indptr.astype(itype)   # scipy's constructor would choose
    assert A.indices.dtype == itype
    return A


@needs_ext
@pytest.mark.parametrize("itype", [np.int32, np.int64])
@pytest.mark.parametrize("omega", [1.0, 1.3, 0.7])
@pytest.mark.parametrize("direction", ["forward", "backward"])
@pytest.mark.parametrize("n,holes", [(1, False), (7, True), (400, False), (400, True)])
def test_compiled_sweep_gives_pyamgs_numbers_to_the_bit(itype, omega, direction, n, holes):
    from pyamg import amg_core

    A = _matrix(n, 3 + n, itype, holes)
    rng = np.random.default_rng(n)
    b, x0 = rng.normal(size=n), rng.normal(size=n)
    for _ in range(3):                      # three sweeps in a row: the state carries over
        got, ref = x0.copy(), x0.copy()
        _relax.sweep(A, got, b, omega, direction)
        start, stop, step = (0, n, 1) if direction == "forward" else (n - 1, -1, -1)
        if omega == 1.0:
            amg_core.gauss_seidel(A.indptr, A.indices, A.data, ref, b, start, stop, step)
        else:
            amg_core.sor_gauss_seidel(A.indptr, A.indices, A.data, ref, b, start, stop, step, omega)
        assert np.array_equal(got, ref)
        assert not np.array_equal(got, x0) or n == 1 and b[0] == x0[0] * A[0, 0]
        x0 = got


@needs_ext
def test_compiled_sweep_refuses_wrong_sizes_by_name():
    A = _matrix(5, 1, np.int64)
    with pytest.raises(ValueError, match="gs: x and b"):
        ext.gs(A.indptr, A.indices, A.data, np.zeros(4), np.zeros(5), 1.0, False)
    x = np.zeros(5)
    with pytest.raises(ValueError, match="gs: x and b"):
        ext.gs(A.indptr, A.indices, A.data, x, x, 1.0, False)
    with pytest.raises(ValueError, match="one integer type"):
        ext.gs(A.indptr.astype(np.int32), A.indices, A.data, x, np.zeros(5), 1.0, False)
    with pytest.raises(ValueError, match="beyond the stored entries"):
        ext.gs(A.indptr, A.indices[:-1], A.data[:-1], x, np.zeros(5), 1.0, False)


# ---- the stopping rule, on measures with a known course ------------------------------------------

class _Course:
    """A balance error that is ``f(k)`` after ``k`` symmetric sweeps; counts sweeps and measurements."""

    def __init__(self, f, fail_at=None):
        self.f, self.k, self.measured, self.fail_at = f, 0, 0, fail_at

    def sweep_pair(self):
        self.k += 1
        return self.k != self.fail_at

    def measure(self):
        self.measured += 1
        return self.f(self.k)


def _first(f, tol, most=100000):
    return next(k for k in range(most) if f(k) <= tol)


@pytest.mark.parametrize("rate,start", [(0.8, 10.0), (0.95, 300.0), (0.5, 2.0)])
def test_polish_stops_within_two_sweeps_of_meeting_the_tail(rate, start):
    f = lambda k: start * rate ** k                           # noqa: E731
    c = _Course(f)
    run = polish_sweeps(c.sweep_pair, c.measure, 2000, 1e-6)
    first = _first(f, 1e-6 * POLISH_MARGIN)                   # on to the margin below tail_tol
    assert run.outcome == "met" and run.met and run.balance == f(run.sweeps) <= 1e-6 * POLISH_MARGIN
    assert first <= run.sweeps <= first + 2
    assert c.measured < run.sweeps                            # measured sparsely, not after every sweep


def test_polish_rides_a_front_and_stops_where_it_passes():
    # the tandem shape: near 100 while the correction travels (falling 18 % per 100 sweeps, wobbling),
    # then a geometric fall
    f = lambda k: 100.0 * 0.998 ** k * (1 + 1e-3 * math.sin(k)) if k < 150 else 74.0 * 0.9 ** (k - 150)   # noqa
    c = _Course(f)
    run = polish_sweeps(c.sweep_pair, c.measure, 2000, 1e-6)
    first = _first(f, 1e-6 * POLISH_MARGIN)
    assert run.met and first <= run.sweeps <= first + 2
    assert c.measured <= 150 // POLISH_GAP + 30


def test_polish_says_when_the_tail_is_not_met():
    tol = 1e-6
    flat = _Course(lambda k: 5.0)
    run = polish_sweeps(flat.sweep_pair, flat.measure, 2000, tol)
    assert run.outcome == "stalled" and not run.met
    assert POLISH_PATIENCE <= run.sweeps <= POLISH_PATIENCE + POLISH_GAP
    assert "fell by less than 10 %" in run.describe(tol) and "5.00e+00 > tail_tol" in run.describe(tol)
    slow = _Course(lambda k: 0.998 ** k)                      # 18 % per 100 sweeps: goes on, too slowly
    run = polish_sweeps(slow.sweep_pair, slow.measure, 300, tol)
    assert run.outcome == "budget" and run.sweeps == 300 and run.balance == 0.998 ** 300
    assert "budget" in run.describe(tol)
    short = _Course(lambda k: 0.5 ** k)           # the budget ends with tail_tol met, not its margin
    run = polish_sweeps(short.sweep_pair, short.measure, 25, tol)
    assert run.met and run.sweeps == 25 and tol * POLISH_MARGIN < run.balance <= tol
    broken = _Course(lambda k: 1.0, fail_at=7)
    run = polish_sweeps(broken.sweep_pair, broken.measure, 300, tol)
    assert run.outcome == "breakdown" and run.sweeps == 6
    done = _Course(lambda k: 1e-9)
    run = polish_sweeps(done.sweep_pair, done.measure, 300, tol)
    assert run.met and run.sweeps == 0 and done.k == 0


# ---- the polish in the solver: against GTH, state by state ---------------------------------------

def _tandem(c=40, lam=0.02, mu=1.0, kappa=1.0):
    """Two queues in tandem, blocking; pi falls by about lam/mu per customer: 1e-135 at c = 40."""
    m = ctmc.Model("tandem-tail")
    a, b = m.var("a", 0, c), m.var("b", 0, c)
    m.event("arrive", guard=a < c, rate=lam, update={a: a + 1})
    m.event("move", guard=(a > 0) & (b < c), rate=mu, update={a: a - 1, b: b + 1})
    m.event("leave", guard=b > 0, rate=kappa, update={b: b - 1})
    return m.build(initial={"a": 0, "b": 0})


def _gmres(chain, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
        return chain.stationary("gmres", preconditioner="sgs", check=False, **kw)


@pytest.fixture(scope="module")
def tail_case():
    chain = _tandem()
    exact = chain.stationary("gth").pi
    assert exact.min() < 1e-130 and exact.min() > 0
    return chain, exact


@pytest.mark.parametrize("tail_tol,rel", [(1e-6, 1e-5), (1e-10, 1e-8)])
def test_polished_tail_matches_gth_state_by_state(tail_case, tail_tol, rel):
    chain, exact = tail_case
    raw = _gmres(chain, polish=0, tail_tol=tail_tol)
    res = _gmres(chain, tail_tol=tail_tol)
    assert raw.status is ctmc.Status.TAIL_INACCURATE and np.max(np.abs(raw.pi / exact - 1)) > 0.5
    assert res.status is ctmc.Status.SUCCESS, res.message
    assert res.balance_error <= tail_tol and res.info["polish_sweeps"] > 0
    assert res.info["polish_stop"].endswith(f"<= tail_tol {tail_tol:.1e}")
    assert np.max(np.abs(res.pi / exact - 1)) < rel           # every state, down to 1e-135, relatively


@needs_ext
def test_compiled_polish_gives_the_fallbacks_law(tail_case):
    chain, exact = tail_case
    new = _gmres(chain, tail_tol=1e-10)
    before = _relax.use_compiled(False)
    try:
        old = _gmres(chain, tail_tol=1e-10)
    finally:
        _relax.use_compiled(before)
    assert new.info["polish_sweeps"] == old.info["polish_sweeps"] > 0
    np.testing.assert_allclose(new.pi, old.pi, rtol=1e-12, atol=0)   # relative in every state


def test_a_short_budget_is_reported_not_hidden(tail_case):
    chain, exact = tail_case
    res = _gmres(chain, tail_tol=1e-10, polish=3)
    assert res.info["polish_sweeps"] == 3 and "budget" in res.info["polish_stop"]
    assert res.status is ctmc.Status.TAIL_INACCURATE


@pytest.mark.parametrize("K, rhos", [(20, (0.1, 0.2, 0.05)), (40, (0.01, 0.3, 0.5))])
def test_the_default_law_is_relative_to_tail_tol_against_the_product_form(K, rhos):
    """Three independent M/M/1/K queues: the law is a product of geometric laws (tails to 1e-114).
    A balance error just at tail_tol left states 10-30 tail_tol off relatively (found by review:
    1e-5 and 3e-5 at tail_tol 1e-6); the polish sweeps on to POLISH_MARGIN below it."""
    m = ctmc.Model("three")
    qs = [m.var(f"q{i}", 0, K) for i in range(3)]
    for q, rho in zip(qs, rhos):
        m.event(f"a{q.name}", guard=q < K, rate=rho, update={q: q + 1})
        m.event(f"d{q.name}", guard=q > 0, rate=1.0, update={q: q - 1})
    c = m.build(initial={q.name: 0 for q in qs})
    res = c.stationary()
    exact = np.ones(c.n_states)
    for q, rho in zip(qs, rhos):
        n = np.asarray(c.states[q.name])
        exact *= rho ** n * (1 - rho) / (1 - rho ** (K + 1))
    assert res.status is ctmc.Status.SUCCESS and "polish_stop" in res.info
    assert np.max(np.abs(res.pi / exact - 1)) <= 1e-6
