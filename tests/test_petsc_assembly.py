"""The distributed-assembly hooks of ``ctmc.Model`` against the serial build.

``Model.state_space`` must give the numbering of ``Model.build`` and the row
blocks of ``Model.generator_rows`` must stack to exactly the serial generator,
whatever the split (this is what makes the PETSc assembly deterministic). No
PETSc needed here.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from reference import birth_death
from chains import jsq

import ctmc
from ctmc.results import ModelError


def _mm1k():
    m, _ = birth_death(30, lambda n: 0.7, lambda n: 1.0)
    return m, {"n": 0}


def _jsq():
    m, _, _ = jsq(25, 0.9, 0.5, 0.5)
    return m, {"s": 0, "l": 0}


def _unreachable():
    # a tandem with a capacity constraint: most of the box is unreachable
    m = ctmc.Model("tandem")
    a = m.var("a", 0, 12)
    b = m.var("b", 0, 12)
    m.event("arrive", guard=a + b < 12, rate=1.0, update={a: a + 1})
    m.event("move", guard=a > 0, rate=2.0, update={a: a - 1, b: b + 1})
    m.event("leave", guard=b > 0, rate=1.5, update={b: b - 1})
    return m, {"a": 0, "b": 0}


def _two_initial():
    # two closed classes, both initial states given
    m = ctmc.Model("two")
    x = m.var("x", 0, 9)
    m.event("up", guard=(x < 4) | ((x >= 5) & (x < 9)), rate=1.0, update={x: x + 1})
    m.event("down", guard=((x > 0) & (x <= 4)) | (x > 5), rate=2.0, update={x: x - 1})
    return m, [{"x": 0}, {"x": 7}]


MODELS = {"mm1k": _mm1k, "jsq": _jsq, "unreachable": _unreachable, "two_initial": _two_initial}


@pytest.mark.parametrize("strategy", ["box", "bfs"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_state_space_is_the_build_numbering(name, strategy):
    m, init = MODELS[name]()
    chain = m.build(initial=init, strategy=strategy)
    table = m.state_space(initial=init)
    assert len(table) == chain.n_states
    for v in chain.states.names:
        assert np.array_equal(table[v], chain.states[v])


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_generator_rows_stack_to_the_serial_generator(name, parts):
    m, init = MODELS[name]()
    chain = m.build(initial=init)
    table = m.state_space(initial=init)
    n = len(table)
    cuts = np.linspace(0, n, parts + 1).astype(int)
    blocks = [m.generator_rows(table, int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]
    assert all(blk.shape == (b - a, n) for blk, a, b in zip(blocks, cuts[:-1], cuts[1:]))
    Q = sp.vstack(blocks).tocsr()
    assert (Q != chain.Q).nnz == 0
    assert np.allclose(np.asarray(Q.sum(axis=1)).ravel(), 0.0, atol=1e-12)


def test_generator_rows_rejects_bad_input():
    m, init = _mm1k()
    table = m.state_space(initial=init)
    with pytest.raises(ValueError, match="start, stop"):
        m.generator_rows(table, 5, 2)
    with pytest.raises(ValueError, match="start, stop"):
        m.generator_rows(table, 0, len(table) + 1)
    other, _ = _unreachable()
    with pytest.raises(ValueError, match="states"):
        other.generator_rows(table, 0, 1)


def test_state_space_checks_like_build():
    m = ctmc.Model("bad")
    x = m.var("x", 0, 3)
    m.event("up", rate=1.0, update={x: x + 1})  # leaves the bounds at x = 3
    with pytest.raises(ModelError, match="bounds"):
        m.state_space(initial={"x": 0})
    m2, init = _mm1k()
    with pytest.raises(ModelError, match="max_states"):
        m2.state_space(initial=init, max_states=10)
    with pytest.raises(ValueError, match="initial"):
        m2.state_space(initial=None)


@pytest.mark.parametrize("path", ["box", "bitmap", "index"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_state_space_every_exploration_path(name, path, monkeypatch):
    # small boxes: build's compiled box exploration; larger ones: a frontier
    # search with a one-byte bitmap, or with the sorted-run index when even
    # the bitmap is too big. Each must give build's numbering.
    import ctmc.exploration as cm
    m, init = MODELS[name]()
    chain = m.build(initial=init)
    if path != "box":
        monkeypatch.setattr(cm, "_BOX_LIMIT", 0)
    if path == "index":
        monkeypatch.setattr(cm, "_BITMAP_SHARE", 0.0)
    table = m.state_space(initial=init)
    for v in chain.states.names:
        assert np.array_equal(table[v], chain.states[v])


def test_state_space_memory_guard():
    from ctmc.results import StateSpaceTooLarge
    m, init = _mm1k()
    with pytest.raises(StateSpaceTooLarge):
        m.state_space(initial=init, max_memory=1)
