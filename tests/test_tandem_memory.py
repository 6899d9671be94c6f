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
from tracing import traced_peak


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

    Its own: the two vectors of terms of :class:`~ctmc.kernels.sweeps.RowSweeper` (2; its zero right-hand
    side is an empty array), the aggregation's flows up and down and its levels in 32 bits (2.5), the level
    search at its peak (one candidate's int32 column and ranks and its shares, its chunks' temporaries:
    about 2.5), the balance error's block: 6.7 measured. On a5f0500 11.1 (a zero right-hand side, the 1/q
    weights, two candidates' columns, ranks and shares held at once, the kept chain); at c00b217 it held
    ``Q^T`` (7.2 vectors here) and the level search's temporaries of 4M entries: 47.
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
    assert peak <= 8.0, f"the polish held {peak:.1f} vectors (a copy of Q is 7.2)"


def test_the_level_system_holds_no_copy_of_q(tandem, short):
    r""":class:`~ctmc.kernels.levels.LevelSystem` on ``sm``: its set-up holds the rows in level order and the
    level ranks (int32) and the shares: 2 vectors; a solve adds the caller's right-hand side, its own (``-b``
    in order), the iterate in order and beside it in every state's place, the residual (the product over the
    listed rows) and the answer, the coarse step by chunks: 7.3 at the peak, 7.0 with the residual reduced
    by blocks and the operator's exit rates released for the cycles (made again when asked). On a5f0500
    2.5 and 11.5 (the rows in int64, ``b`` beside ``-b``, a right-hand side of every state and the whole
    product, the coarse step's vectors); at c00b217 the set-up held the masked, permuted copy of ``Q``
    (11.2 vectors) and peaked at 43.9 while making it.
    """
    op = operator_for(tandem, "scipy")
    X = np.ones(op.n, dtype=bool)
    X[int(np.argmax(tandem.stationary("lu").pi))] = False    # the bound's pin
    lev = np.asarray(tandem.states["sm"])
    LevelSystem(op, X, lev).solve(X.astype(float))          # first-use caches
    op.exit_rates                                            # (made again: a solve releases them)
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
    assert _vectors(held, tandem) <= 2.25, f"the set-up held {_vectors(held, tandem):.2f} vectors"
    assert _vectors(peak, tandem) <= 7.15, f"the peak was {_vectors(peak, tandem):.2f} vectors"
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
@pytest.mark.parametrize("index, listed", [(np.int64, False), (np.int32, False), (np.int32, True)])
def test_sweep_rows_is_the_sweep_of_the_permuted_copy(seed, index, listed):
    """:func:`ctmc._relax.sweep_rows` over a subset in a shuffled order against pyamg's sweep of the permuted
    copy (rows and columns in that order; round-off: the terms are summed in another order) and the
    compiled kernel against pyamg's indexed sweep (to the bit); the rows not listed are left as they are.
    The order in 32 or 64 bits, the right-hand side of every row or (``listed``) of the listed rows in order
    (what :class:`~ctmc.kernels.sweeps.RowOrderSweeps` holds: no vector of every state for it)."""
    from pyamg import amg_core
    Q = _generator(60, seed)
    rng = np.random.default_rng(seed + 10)
    rows = rng.permutation(60)[:50].astype(index)
    rest = np.setdiff1d(np.arange(60), rows)
    b = rng.standard_normal(60)
    x0 = rng.standard_normal(60)
    x0[rest] = 0.0                                   # off the rows, x is zero: the copy leaves them out
    x = x0.copy()
    given = b[rows] if listed else b
    for d in ("forward", "backward", "forward"):
        _relax.sweep_rows(Q, x, given, rows, d, listed=listed)
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
            _relax.sweep_rows(Q, z, given, rows, d, listed=listed)
        fallback = _relax.product_listed(Q, x, rows)
    finally:
        _relax.use_compiled(before)
    assert np.array_equal(x, z)
    # the product over the listed rows: each row's sum in stored order, the whole product's numbers
    assert np.array_equal(_relax.product_listed(Q, x, rows), _relax.product(Q, x)[rows])
    assert np.array_equal(fallback, (Q @ x)[rows])


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
    """The default solve with the copies (memory plentiful, the peak rule off: on tandem the copies do not fit
    in 40 bytes a transition) and without (short): the laws within round-off of each other (the sweeps' sums
    in another order) and the level system's return times too."""
    _compiled_or_skip()
    monkeypatch.setattr(ahead, "AHEAD_STATES", 1 << 62)
    op = operator_for(tandem, "scipy")
    X = np.ones(op.n, dtype=bool)
    X[int(np.argmax(tandem.stationary("lu").pi))] = False
    lev = np.asarray(tandem.states["sm"])
    out = []
    for share in (plan.COPY_SHARE, 0.0):
        monkeypatch.setattr(plan, "COPY_SHARE", share)
        monkeypatch.setattr(plan, "PEAK_BYTES_PER_TRANSITION", np.inf if share else 40.0)
        system = LevelSystem(op, X, lev, rtol=1e-12)
        assert isinstance(system.sweeper, RowOrderSweeps) == (share == 0)
        out.append((tandem.stationary(), system.solve(X.astype(float))[0]))
    (a, ma), (b, mb) = out
    assert a.info["polish_sweeps"] > 0 and b.info["polish_sweeps"] > 0
    assert np.abs(a.pi - b.pi).sum() <= 1e-14 and a.error_bound < 1e-9 and b.error_bound < 1e-9
    assert np.allclose(ma, mb, rtol=1e-10, atol=0)


def test_the_level_search_holds_one_candidate_at_a_time(tandem):
    r"""The search of a level variable (:func:`~ctmc.kernels.levels.structured_levels`: ``sc`` then ``sm`` on
    tandem c=127) holds one candidate at a time, its column (int32, decoded by blocks), ranks (int32) and
    shares, the 1/q weights made in the shares' vector, the level sums by chunks: 3.9 float64 vectors at its
    peak with the answer (2 of them). On a5f0500 7.9 (the weights beside, the best candidate's column, ranks
    and shares kept while the next was made, the int64 decode's two vectors, the bins' ``intp`` copies).
    The chain it returns is the Galerkin product :math:`T^T \mathrm{diag}(s) M T`, made here by sparse
    products, :math:`s = (1/q) / W_L`.
    """
    from ctmc.kernels import levels
    op = operator_for(tandem, "scipy")
    X = np.ones(op.n, dtype=bool)
    X[int(np.argmax(tandem.stationary("lu").pi))] = False
    levels._structured(op, X)                              # first-use caches
    (name, lev, (group, share, ab)), peak = traced_peak(lambda: levels._structured(op, X))
    assert _vectors(peak, tandem) <= 5.0, f"the search peaked at {_vectors(peak, tandem):.1f} vectors"
    assert name == "sm" and np.array_equal(lev, tandem.states["sm"]) and lev.dtype == np.int32
    sm = np.asarray(tandem.states["sm"])
    vals, g = np.unique(sm[X], return_inverse=True)
    nc = vals.size
    T = sp.csr_matrix((np.ones(g.size), (np.arange(g.size), g)), shape=(g.size, nc))
    w = 1.0 / -tandem.Q.diagonal()[X]
    s = w / np.bincount(g, weights=w)[g]
    M = -tandem.Q[X][:, X]
    A = (T.T @ sp.diags(s) @ M @ T).toarray()
    banded = np.zeros((3, nc))
    for k in (-1, 0, 1):                                   # solve_banded's (1, 1) layout: ab[1 + i - j, j]
        d = np.diagonal(A, k)
        banded[1 - k, max(k, 0):nc + min(k, 0)] = d
    assert np.allclose(ab, banded, rtol=1e-12, atol=1e-12 * np.abs(banded).max())
    assert np.array_equal(group[X], g) and np.all(group[~X] == -1)
    assert np.allclose(share[X], s, rtol=1e-14, atol=0)


def test_a_column_is_decoded_by_blocks_in_32_bits(tandem):
    """:meth:`~ctmc.chain.StateTable.column` (the level search reads each candidate by it) decodes a block of
    codes at a time into int32 where the variable's bounds fit: at most a float64 vector of the states at its
    peak with the answer (half of one). On a5f0500 2.0 (the whole decode's quotients and remainders, int64).
    The values are those the layout decodes from the codes."""
    table = tandem.states
    for name in table.names:
        col, peak = traced_peak(lambda: table.column(name))
        assert _vectors(peak, tandem) <= 1.0 and col.dtype == np.int32, f"{name}: {_vectors(peak, tandem)}"
        assert np.array_equal(col, table.layout.decode(table.codes)[name])


def test_an_aggregation_step_holds_no_vector(tandem):
    r"""A step of the polish's level aggregation (:class:`~ctmc.kernels.levels.LevelAggregation` on ``sm``)
    sums the level masses and flows by chunks and rescales ``x`` in place: at most half a float64 vector
    (on a5f0500 2.0: ``x * up``, the bins' ``intp`` copy, ``f[lev]``), and gives the numbers of the whole
    sums (``np.bincount``) and of the factors of :func:`~ctmc.kernels.levels.level_factors`, to the bit."""
    from ctmc.kernels.levels import LevelAggregation, level_factors, level_flows
    op = operator_for(tandem, "scipy")
    every = np.ones(op.n, dtype=bool)
    sm = np.asarray(tandem.states["sm"])
    agg = LevelAggregation(op.generator_rows(False), every, tandem.states.column("sm"))
    x = np.random.default_rng(4).random(op.n)
    up, down = level_flows(op.generator_rows(False), every, sm)
    f = level_factors(np.bincount(sm, weights=x), np.bincount(sm, weights=x * up),
                      np.bincount(sm, weights=x * down))
    expected = x * f[sm]
    _, peak = traced_peak(lambda: agg(x))
    assert agg.steps == 1 and np.array_equal(x, expected)
    assert _vectors(peak, tandem) <= 0.5, f"the step peaked at {_vectors(peak, tandem):.2f} vectors"


def test_the_bound_s_residual_check_holds_one_vector(tandem, monkeypatch):
    r"""The residual check of a return-time iterate (:func:`ctmc.kernels.evidence._unit_residual`,
    :math:`\rho = 1 - M\hat m` on ``X``) makes ``rho`` and ``M m`` by blocks of rows, the maxima without
    copies: at most 1.25 float64 vectors with blocks of 2048 rows (the scipy backend's are of 16384: a small
    share of a large chain's), on a5f0500 4 (``s m``, ``1 - s m``, ``Q m``, their sum, ``np.where``, ``|m|``);
    the numbers of the whole formula, to the bit."""
    from ctmc.backends import scipy_backend
    from ctmc.kernels import evidence
    monkeypatch.setattr(scipy_backend, "APPLY_BLOCK", 2048)
    op = operator_for(tandem, "scipy")
    X = np.ones(op.n, dtype=bool)
    X[7] = False
    m = np.where(X, np.random.default_rng(2).random(op.n) * 100.0, 0.0)
    evidence._unit_residual(op, X, m)                      # first-use caches (qmax, the product's round-off)
    for shift in (0.0, 0.25):
        (rho, rplus, top), peak = traced_peak(lambda: evidence._unit_residual(op, X, m, shift))
        direct = np.where(X, 1.0 - shift * m + op.apply(m, transpose=False), 0.0)
        assert np.array_equal(rho, direct) and top == m[X].max()
        size = np.abs(m).max()
        rounding = op.product_roundoff() * (2 * (op.qmax + shift) * size + 1.0)
        assert rplus == max(direct[X].max(), 0.0) + rounding
        assert _vectors(peak, tandem) <= 1.25, f"{_vectors(peak, tandem):.2f} vectors"


def test_the_error_bound_s_sums_hold_one_vector_of_the_class(tandem):
    r"""The sums the error bound takes over the class (:func:`ctmc.kernels.evidence._residual_1norm`:
    :math:`\|\hat\pi Q\|_1` and the round-off's :math:`\sum \hat\pi_i q_i`;
    :func:`~ctmc.kernels.evidence.error_bound`: :math:`\sum |r_i| \hat m_i`) hold one vector of the class
    beside ``r`` (its members' copy, made again for the second sum, times ``q`` by blocks; ``m_hat`` as it is
    on a whole chain): at most 2.25 and 1.25 float64 vectors (on a5f0500 3 and 3: the copies, ``|.|``,
    ``pi * q`` and its members'), with the numbers of the direct formulas, to the bit, on the whole chain and
    on a part of it."""
    from ctmc.kernels import evidence
    op = operator_for(tandem, "scipy")
    pi = tandem.stationary("lu").pi
    m_hat = np.random.default_rng(3).random(op.n) + 1.0
    q = -tandem.Q.diagonal()
    evidence._residual_1norm(op, np.ones(op.n, dtype=bool), pi)          # first-use caches
    for support in (np.ones(op.n, dtype=bool), np.arange(op.n) % 3 > 0):
        (r, r1, rounding), peak = traced_peak(lambda: evidence._residual_1norm(op, support, pi))
        assert _vectors(peak, tandem) <= 2.25, f"{_vectors(peak, tandem):.2f} vectors"
        direct = op.apply(pi, transpose=True)
        assert np.array_equal(r, direct) and r1 == np.abs(direct[support]).sum()
        assert rounding == 2 * op.product_roundoff() * (pi * q)[support].sum()
        pin = int(np.argmax(np.where(support, pi, -1.0)))
        bound, peak = traced_peak(lambda: evidence.error_bound(op, support, pi, pin, 1e3, (r, r1, rounding),
                                                           (m_hat, 1.5)))
        limit = 1.25 if support.all() else 2.25
        assert _vectors(peak, tandem) <= limit, f"{_vectors(peak, tandem):.2f} vectors"
        w = min((r1 + rounding) * 1e3, 1.5 * (np.abs(r[support]) @ m_hat[support]) + rounding * 1e3)
        beta = 2 * w / pi[pin]
        assert bound == (pi[pin] * beta / (1 - beta) if beta < 1 else np.inf)
