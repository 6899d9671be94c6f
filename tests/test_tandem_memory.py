"""What the tandem network's solve holds beyond the chain where memory is short: the polish and the level
set-up hold vectors, no second matrix (issue 23: 40 bytes a transition, where a copy of ``Q`` is 16.6 of
them on tandem). Where a copy is plentiful (:func:`ctmc.kernels.sweeps.copy_plentiful`) the faster routes
keep it; the tests make memory short (``COPY_SHARE`` 0) and check both routes give the same answers.

tracemalloc counts numpy's buffers; the bounds are in float64 vectors of ``8 n`` bytes, each set below
what the stage held with a copy of ``Q`` (7.2 vectors at c = 127: 3.5 stored entries a state), and each
compared with the base's count in the docstring. The kernels that make it possible are checked against
independent answers: the sweep of a permuted copy of the matrix, pyamg's indexed Gauss-Seidel, the
Gauss-Seidel sweep on ``Q^T`` itself.
"""
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

from ctmc import _relax
from ctmc import stationary as st
from ctmc.backends import operator_for
from ctmc.kernels import ahead, plan
from ctmc.kernels.levels import LevelSystem
from ctmc.kernels.sweeps import RowOrderSweeps, RowSweeper, Sweeper
from ctmc.models.gallery import parse_spec


@pytest.fixture
def short(monkeypatch):
    """Memory short: no second matrix of Q's size is plentiful."""
    monkeypatch.setattr(plan, "COPY_SHARE", 0.0)


@pytest.fixture(scope="module")
def tandem():
    """tandem c=127: 32,640 states, 145,923 stored entries; its default solve polishes along ``sm``."""
    return parse_spec("tandem:127").chain()


def _vectors(nbytes, chain):
    return nbytes / (8.0 * chain.n_states)


def _compiled_or_skip():
    if not (_relax.compiled() and hasattr(_relax.extension(), "gst")):
        pytest.skip("the compiled kernels are off: the polish sweeps Q^T")


def test_the_polish_holds_vectors_not_a_second_matrix(tandem, monkeypatch, short):
    r"""The peak of the stationary polish above what was traced when it began, on tandem c=127.

    Its own: the two vectors of terms of :class:`~ctmc.kernels.sweeps.RowSweeper` and its zero
    right-hand side (3), the aggregation's flows up and down and its levels in 32 bits (2.5), the level
    search at its peak (the 1/q weights, one decoded column, two candidates' ranks and shares, the shares'
    temporaries: about 4), the balance error's product and its temporaries (2): 11.5, measured 11.1. At
    c00b217 it held ``Q^T`` (7.2 vectors here) and the level search's temporaries of 4M entries: 47.
    """
    _compiled_or_skip()
    monkeypatch.setattr(ahead, "AHEAD_STATES", 1 << 62)        # the polish alone in the main thread
    inner, seen = st._polish, []

    def measured(*a, **k):
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        try:
            return inner(*a, **k)
        finally:
            seen.append(tracemalloc.get_traced_memory()[1] - before)
    monkeypatch.setattr(st, "_polish", measured)
    tracemalloc.start()
    try:
        res = tandem.stationary()
    finally:
        tracemalloc.stop()
    assert res.info.get("polish_levels", "").startswith("sm:") and len(seen) == 1
    peak = _vectors(seen[0], tandem)
    assert peak <= 14.0, f"the polish held {peak:.1f} vectors (a copy of Q is 7.2)"


def test_the_level_system_holds_no_copy_of_q(tandem, short):
    r""":class:`~ctmc.kernels.levels.LevelSystem` on ``sm``: its set-up holds the rows in level order (int64),
    the level ranks (int32) and the shares: 2.5 vectors; a solve adds its right-hand sides, iterate,
    products and the coarse step's temporaries: 10.5 at the peak. At c00b217 the set-up held the masked,
    permuted copy of ``Q`` (11.2 vectors) and peaked at 43.9 while making it.
    """
    op = operator_for(tandem, "scipy")
    X = np.ones(op.n, dtype=bool)
    X[int(np.argmax(tandem.stationary("lu").pi))] = False    # the bound's pin
    lev = np.asarray(tandem.states["sm"])
    LevelSystem(op, X, lev).solve(X.astype(float))          # first-use caches
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        system = LevelSystem(op, X, lev)
        held = tracemalloc.get_traced_memory()[0] - before
        m, rep = system.solve(X.astype(float))
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert rep.status.value == "success"
    assert _vectors(held, tandem) <= 3.5, f"the set-up held {_vectors(held, tandem):.1f} vectors"
    assert _vectors(peak, tandem) <= 12.0, f"the peak was {_vectors(peak, tandem):.1f} vectors"
    # the answer: the residual of M m = 1 on X (M = -Q_XX) within the solve's stop, recomputed here
    r = (1.0 + tandem.Q @ m)[X]
    assert np.abs(r).max() <= system.rtol


def _generator(n, seed):
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=0.1, random_state=rng, format="csr")
    R.setdiag(0.0)
    R.eliminate_zeros()
    R = R + sp.diags(np.ones(n - 1), 1) + sp.diags(np.ones(n - 1), -1)     # irreducible
    return (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()


@pytest.mark.parametrize("seed", range(3))
def test_sweep_rows_is_the_sweep_of_the_permuted_copy(seed):
    """:func:`ctmc._relax.sweep_rows` over a subset in a shuffled order against pyamg's sweep of the permuted
    copy (rows and columns in that order; round-off: the terms are summed in another order) and the
    compiled kernel against pyamg's indexed sweep (to the bit); the rows not listed are left as they are."""
    from pyamg import amg_core
    Q = _generator(60, seed)
    rng = np.random.default_rng(seed + 10)
    rows = rng.permutation(60)[:50]
    rest = np.setdiff1d(np.arange(60), rows)
    b = rng.standard_normal(60)
    x0 = rng.standard_normal(60)
    x0[rest] = 0.0                                   # off the rows, x is zero: the copy leaves them out
    x = x0.copy()
    for d in ("forward", "backward", "forward"):
        _relax.sweep_rows(Q, x, b, rows, d)
    P = Q[rows][:, rows].tocsr()
    P.sort_indices()
    y = x0[rows].copy()
    for d in ("forward", "backward", "forward"):
        start, stop, step = (0, 50, 1) if d == "forward" else (49, -1, -1)
        amg_core.gauss_seidel(P.indptr, P.indices, P.data, y, b[rows], start, stop, step)
    assert np.array_equal(x[rest], x0[rest])
    assert np.allclose(x[rows], y, rtol=1e-13, atol=1e-13 * np.abs(y).max())
    before = _relax.use_compiled(False)
    try:
        z = x0.copy()
        for d in ("forward", "backward", "forward"):
            _relax.sweep_rows(Q, z, b, rows, d)
    finally:
        _relax.use_compiled(before)
    assert np.array_equal(x, z)


@pytest.mark.parametrize("seed", range(3))
def test_row_sweeper_is_gauss_seidel_on_q_transposed(seed):
    """:class:`~ctmc.kernels.sweeps.RowSweeper` (from ``Q``'s rows) against :class:`Sweeper` (on ``Q^T``):
    the same iterates to round-off over 30 symmetric pairs, across an outside change of ``x`` (the polish's
    aggregation step: :meth:`~RowSweeper.invalidate`) and at the law they converge to, ``pi Q = 0``."""
    _compiled_or_skip()
    import ctmc
    Q = _generator(80, seed)
    op = operator_for(ctmc.CTMC(Q), "scipy")
    every = np.ones(80, dtype=bool)
    rows, ref = RowSweeper(op), Sweeper(op, every)
    x = np.random.default_rng(seed).random(80)
    x /= x.sum()
    y = x.copy()
    for k in range(30):
        assert rows(x)
        ref.relax(y, None, 1.0, "forward")
        assert ref(y, 1.0, "backward")
        if k == 9:
            f = np.linspace(1.0, 3.0, 80)
            x *= f
            y *= f
            rows.invalidate()
        assert np.allclose(x, y, rtol=1e-12, atol=0)
    pi = ctmc.CTMC(Q).stationary("lu").pi
    for _ in range(200):
        rows(x)
    assert np.allclose(x, pi, rtol=1e-10, atol=0)


def test_both_routes_give_the_same_law_and_return_times(tandem, monkeypatch):
    """The default solve with the copies (memory plentiful) and without (short): the laws within round-off
    of each other (the sweeps' sums in another order) and the level system's return times too."""
    _compiled_or_skip()
    monkeypatch.setattr(ahead, "AHEAD_STATES", 1 << 62)
    op = operator_for(tandem, "scipy")
    X = np.ones(op.n, dtype=bool)
    X[int(np.argmax(tandem.stationary("lu").pi))] = False
    lev = np.asarray(tandem.states["sm"])
    out = []
    for share in (plan.COPY_SHARE, 0.0):
        monkeypatch.setattr(plan, "COPY_SHARE", share)
        system = LevelSystem(op, X, lev, rtol=1e-12)
        assert isinstance(system.sweeper, RowOrderSweeps) == (share == 0)
        out.append((tandem.stationary(), system.solve(X.astype(float))[0]))
    (a, ma), (b, mb) = out
    assert a.info["polish_sweeps"] > 0 and b.info["polish_sweeps"] > 0
    assert np.abs(a.pi - b.pi).sum() <= 1e-14 and a.error_bound < 1e-9 and b.error_bound < 1e-9
    assert np.allclose(ma, mb, rtol=1e-10, atol=0)
