"""The tail polish along levels: an aggregation step on a level variable between symmetric sweeps.

References: dense GTH on the gallery's tandem networks (subtraction-free, every probability to a
small relative error: tails of 1e-89 and 1e-150 compared state by state), the rates of the level
chain counted entry by entry from the dense generator, the M/M/1/K law in closed form, and the plain
polish (the same solver with the levels taken away) for the count of sweeps.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import ctmc
from ctmc import stationary as stationary_module
from ctmc.backends import operator_for
from ctmc.kernels import levels as levels_module
from ctmc.kernels.levels import LEVEL_MIN
from models.gallery import parse_spec
from reference import bd_pi, mm1k


def _gallery_tandem(c):
    return parse_spec(f"tandem:{c}").chain()


@pytest.mark.parametrize("chunk", [None, 5])
def test_level_flows_count_every_rate_to_the_next_level(chunk, monkeypatch):
    if chunk is not None:                   # Q read a few rows at a time, as on large chains
        monkeypatch.setattr(levels_module, "_CHUNK", chunk)
    chain = _gallery_tandem(5)
    Q = chain.Q.toarray()
    lev = np.asarray(chain.states["sm"])
    X = np.ones(Q.shape[0], dtype=bool)
    X[7] = False
    up, down = levels_module.level_flows(chain.Q.tocsr(), X, lev)
    want_up, want_down = np.zeros(Q.shape[0]), np.zeros(Q.shape[0])
    for i, j in zip(*np.nonzero(Q)):
        if i != j and X[i] and X[j]:
            if lev[j] == lev[i] + 1:
                want_up[i] += Q[i, j]
            elif lev[j] == lev[i] - 1:
                want_down[i] += Q[i, j]
    assert np.array_equal(up, want_up) and np.array_equal(down, want_down) and up.sum() > 0
    assert levels_module.level_flows(chain.Q.tocsr(), X, lev * 2) is None      # steps of two


def test_level_flows_count_each_chunk_over_its_own_rows(monkeypatch):
    """``level_flows`` reads ``Q`` a chunk at a time; its counts were full-length per chunk (two vectors of
    all states for each of 2300 chunks at tandem c=4095: 308 million page faults, 537 s of system time).
    The entries counted (the bincounts' lengths) are now about twice the states however many chunks."""
    chain = _gallery_tandem(63)
    n = chain.n_states
    monkeypatch.setattr(levels_module, "_CHUNK", 64)

    class Counting:                                   # numpy, with the bincounts' lengths added up
        total = 0

        def __getattr__(self, name):
            return getattr(np, name)

        def bincount(self, *a, **k):
            out = np.bincount(*a, **k)
            Counting.total += out.size
            return out
    monkeypatch.setattr(levels_module, "np", Counting())
    lev = np.asarray(chain.states["sm"])
    up, down = levels_module.level_flows(chain.Q.tocsr(), np.ones(n, dtype=bool), lev)
    assert up.sum() > 0 and Counting.total <= 3 * n, Counting.total / n


def test_q_is_read_by_chunks_without_a_copy_of_its_row_pointers(monkeypatch):
    """``csr_entries`` finds each chunk's end in ``Q.indptr`` (int32) by ``searchsorted``: its key was an
    int64, and numpy cast the whole array to compare: a copy of the row pointers per chunk (at tandem
    c=4095 4600 of 268 MB, a third of the solve's CPU in page faults). Held or passing, the chunks now
    take a few chunk-sized arrays, and they still cover every entry once."""
    import tracemalloc
    Q = _gallery_tandem(63).Q.tocsr()
    assert Q.indptr.dtype == np.int32
    monkeypatch.setattr(levels_module, "_CHUNK", 64)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        seen = sum(rows.size for rows, cols, vals in levels_module.csr_entries(Q))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seen == Q.nnz and peak < Q.indptr.nbytes / 4, (peak, Q.indptr.nbytes)


def test_one_aggregation_step_gives_a_birth_death_law_and_leaves_the_law_fixed():
    K, lam, mu = 40, 1.0, 2.0
    chain, exact = mm1k(K, lam, mu), bd_pi(K, lambda n: lam, lambda n: mu)     # (exact fractions)
    Q, X, lev = chain.Q.tocsr(), np.ones(K + 1, dtype=bool), np.asarray(chain.states["n"])
    agg = levels_module.LevelAggregation(Q, X, lev, gap=2)
    x = np.random.default_rng(1).uniform(0.5, 2.0, K + 1)
    agg(x)
    assert agg.steps == 1 and np.max(np.abs(x / x.sum() / exact - 1)) < 1e-13   # to 5e-13, relatively
    y = x.copy()
    agg(y)                                   # the second call of a gap of 2: no step
    assert agg.steps == 1 and np.array_equal(x, y)
    agg(y)
    assert agg.steps == 2 and np.max(np.abs(y / x - 1)) < 1e-13                 # the law is a fixed point
    with pytest.raises(ValueError, match="gap: expected an integer >= 1"):
        levels_module.LevelAggregation(Q, X, lev, gap=0)


def _quiet(chain, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
        return chain.stationary("gmres", preconditioner="sgs", check=False, **kw)


@pytest.mark.parametrize("c", [15, 31, 47])
@pytest.mark.parametrize("tail_tol,rel", [(1e-6, 1e-4), (1e-10, 1e-8)])
def test_the_polish_along_levels_matches_gth_state_by_state(c, tail_tol, rel):
    chain = _gallery_tandem(c)
    exact = chain.stationary("gth").pi
    assert exact.min() > 0 and (exact.min() < 1e-85 or c < LEVEL_MIN)
    raw = _quiet(chain, polish=0, tail_tol=tail_tol)
    res = _quiet(chain, tail_tol=tail_tol)
    assert np.max(np.abs(raw.pi / exact - 1)) > (0.5 if c + 1 >= LEVEL_MIN else 0.0)   # the Krylov tail
    assert res.status is ctmc.Status.SUCCESS and res.balance_error <= tail_tol
    assert res.info["polish_stop"].endswith(f"<= tail_tol {tail_tol:.1e}")
    # sm has c + 1 levels: found from LEVEL_MIN levels on (c = 15: the plain polish)
    assert ("polish_levels" in res.info) == (c + 1 >= LEVEL_MIN)
    if c + 1 >= LEVEL_MIN:
        assert res.info["polish_levels"].startswith("sm: ")
    assert np.max(np.abs(res.pi / exact - 1)) < rel                   # every state, down to 1e-150


@pytest.mark.parametrize("c", [127, 255])
def test_the_levels_cut_the_sweeps_of_the_polish(c, monkeypatch):
    """The count of symmetric sweeps to the tail against the plain polish (the levels taken away), same
    chain, same Krylov answer: the correction no longer crosses the chain a level a sweep."""
    chain = _gallery_tandem(c)
    fast = _quiet(chain, tail_tol=1e-10)
    monkeypatch.setattr(stationary_module, "polish_levels", lambda *a: None, raising=False)
    plain = _quiet(chain, tail_tol=1e-10)
    assert "polish_levels" in fast.info and "polish_levels" not in plain.info
    assert fast.info["balance_before_polish"] == plain.info["balance_before_polish"]     # the same start
    assert fast.status is plain.status is ctmc.Status.SUCCESS
    assert 3 * fast.info["polish_sweeps"] <= plain.info["polish_sweeps"]
    on = plain.pi > 0                                          # (below 1e-308: zero in both)
    assert np.array_equal(on, fast.pi > 0) and np.max(np.abs(fast.pi[on] / plain.pi[on] - 1)) < 1e-6


def test_the_bound_reuses_the_polishs_search_of_levels(monkeypatch):
    """The search of a level variable runs once for the polish and the bound's levels at the same pin,
    and only when the polish reaches its ``start``-th sweep: the bound makes the chosen variable's level
    chain again (one more, not held through the polish), not the search's over every variable."""
    chain = _gallery_tandem(63)
    op = operator_for(chain, "scipy")
    calls = []
    real = levels_module.level_chain
    monkeypatch.setattr(levels_module, "level_chain", lambda *a: calls.append(1) or real(*a))
    support = np.ones(op.n, dtype=bool)
    x = chain.stationary("lu").pi
    step = levels_module.polish_levels(op, support)
    for _ in range(levels_module.POLISH_LEVEL_START):
        step(x)
    assert not calls and step.name is None and step.info() == {}          # the plain sweeps first
    step(x)
    searched = len(calls)
    assert step.name == "sm" and step.steps == 1
    assert step.info() == {"polish_levels": "sm: 1 aggregation steps"}
    X = support.copy()
    X[int(np.argmax(x))] = False
    info = {}
    first, later = levels_module.return_time_systems(op, X, info=info)
    # the polish needed the levels: the bound tries them first, with the polish's search
    assert later is None and isinstance(first, levels_module.LevelSystem)
    assert info["return_time_levels"] == "sm" and searched == 2 and len(calls) == searched + 1
    first, later = levels_module.return_time_systems(op, X, info={})   # kept once only: searched again,
    assert first is None                                                  # after BiCGStab
    system = later()
    assert system is not None and len(calls) == 2 * searched + 1
    assert later() is system and len(calls) == 2 * searched + 1        # set up once, however often asked


def test_the_bound_takes_the_polishs_levels_before_bicgstab(monkeypatch):
    """Where the polish searched the levels (a slow tail), the bound's return times are solved on them
    first: tandem c=511 with the bound after the solve took 142 BiCGStab iterations before, c=4095 200
    diverging ones (700 s) before the levels' 15 cycles. The bound stays proven from the residual."""
    from ctmc.kernels import ahead
    monkeypatch.setattr(ahead, "AHEAD_STATES", 1 << 62)            # the bound after the solve
    res = _quiet(_gallery_tandem(511), error_tol=1e-9)
    assert res.status is ctmc.Status.SUCCESS and res.info["polish_levels"].startswith("sm")
    assert res.info["return_time_solver"] == "level" and res.info["error_bound_kind"] == "proven"
    assert len(res.info["return_time_iterations"]) == 1 and res.error_bound <= 1e-9


def test_an_aggregation_step_is_numpys_to_the_bit_without_a_state_sized_temporary(monkeypatch):
    """The aggregation step's level sums and scaling are compiled (``level_sums``, ``level_scale``): the
    numpy step (three ``bincount`` over an int32 ``lev``, each casting it, two products and ``f[lev]``)
    made six state-sized temporaries a step, 618 vectors of the polish at tandem c=1023. Same numbers to
    the bit as numpy's route (the extension taken away), and a step now allocates only level-sized arrays."""
    import tracemalloc
    from ctmc import _relax
    if _relax.extension() is None:
        pytest.skip("the compiled kernels are not built")
    chain = _gallery_tandem(63)
    Q, n = chain.Q.tocsr(), chain.n_states
    X, lev = np.ones(n, dtype=bool), np.asarray(chain.states["sm"])
    x0 = np.random.default_rng(5).uniform(0.5, 2.0, n)
    agg = levels_module.LevelAggregation(Q, X, lev, gap=1)
    x = x0.copy()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        agg(x)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert agg.steps == 1 and peak < x.nbytes / 4, (peak, x.nbytes)
    monkeypatch.setattr(levels_module, "extension", lambda: None)          # numpy's route
    y = x0.copy()
    levels_module.LevelAggregation(Q, X, lev, gap=1)(y)
    assert np.array_equal(x, y) and not np.array_equal(x, x0)
    with pytest.raises(ValueError, match="level out of"):                  # a level beyond nl: refused
        _relax.extension().level_scale(np.full(3, 7, dtype=np.int32), np.ones(2), np.ones(3))
