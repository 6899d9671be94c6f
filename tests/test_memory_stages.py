"""Memory of the stages before and in the stationary Krylov solve, on the path where memory is short.

:mod:`tracemalloc` (numpy reports its buffers to it) measures, from the start of
``stationary()`` on a built chain, what each stage holds and the peak it reaches,
in vectors of ``8 n`` bytes (``n`` states): the closed class is found from ``Q``'s
rows (its strongly connected components) and the structure facts read ``Q^T``'s
rows as ``Q``'s columns, so no transpose of ``Q`` (about seven vectors on a
tandem network) is made before the solve; the Krylov set-up releases the exit
rates (made again when next read), and BiCGStab takes the vector of its
right-hand side (a row of rates: a few non-zeros kept apart) for its iterate.
The bounds are the stages' own vectors with a margin; what the old code held
beside them (the transpose, the exit rates, the right-hand side) exceeds them.
The compiled search's work (four integers and a byte a state, freed on return) is
``malloc``'s, not numpy's: it is not counted here.
"""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import ctmc
from ctmc import stationary as st
from ctmc.backends import scipy_backend
from ctmc.kernels import plan
from ctmc.models.gallery import parse_spec

pytest.importorskip("ctmc._kernels")


def _measured(monkeypatch, spec, stages):
    """``stationary()`` of a fresh build of ``spec`` (no copy of ``Q``), with ``{label: (held at the
    stage's start, held at its end, peak in it, peak since the solve's start)}`` in vectors."""
    monkeypatch.setattr(plan, "COPY_SHARE", 0.0)
    parse_spec("tandem:127").chain().stationary()          # the modules this solve imports, imported
    chain = parse_spec(spec).chain()
    vec = 8.0 * chain.n_states
    rows, top = {}, [0]

    def wrap(label, fn):
        def inner(*a, **k):
            before, pk = tracemalloc.get_traced_memory()
            top[0] = max(top[0], pk)
            tracemalloc.reset_peak()
            try:
                return fn(*a, **k)
            finally:
                now, pk = tracemalloc.get_traced_memory()
                top[0] = max(top[0], pk)
                rows.setdefault(label, (before / vec, now / vec, pk / vec, top[0] / vec))
        return inner

    for owner, name in stages:
        monkeypatch.setattr(owner, name, wrap(name, getattr(owner, name)))
    tracemalloc.start()
    try:
        res = chain.stationary()
    finally:
        tracemalloc.stop()
    assert res.status is ctmc.Status.SUCCESS and res.method == "bicgstab"
    return res, rows


def test_no_transpose_is_held_before_the_solve(monkeypatch):
    """The closed class and the structure facts hold no transpose of Q: at the end of the facts, the
    exit rates and the class's mask (the old search held Q^T, 7.2 vectors, from here to the solve)."""
    _, rows = _measured(monkeypatch, "tandem:255", [(st, "structure_facts"), (st, "walk_pin")])
    _, held, peak, since = rows["structure_facts"]
    assert held <= 1.5 and since <= 3.5, rows
    assert rows["walk_pin"][2] <= 3.5, rows


def test_the_krylov_solve_holds_its_own_vectors_and_q_alone(monkeypatch):
    """BiCGStab's seven vectors (the right-hand side's vector among them), the diagonal's positions
    (half a vector) and two masks: the exit rates and a separate right-hand side are not held beside
    them (measured: 8.0 vectors; the old solve's peak: 10.3)."""
    res, rows = _measured(monkeypatch, "tandem:255", [(scipy_backend.ScipySystem, "_solve_krylov")])
    before, after, peak, _ = rows["_solve_krylov"]
    assert peak <= 8.5, rows
    assert np.isfinite(res.error_bound)
