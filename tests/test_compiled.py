"""The compiled builder (ctmc._compiled, ctmc/_explore.c) against the vectorised one.

The independent answer is numpy's builder (``engine="numpy"``): on random
models made of every operator the expressions have, the compiled search must
give the same chain bit for bit (codes, CSR arrays, transition count), or the
same error with the same message; and it must actually have built most of
them (a test that always fell back to numpy would prove nothing).
"""
import numpy as np
import pytest

import ctmc
from ctmc import _compiled
from ctmc.expr import as_expr, maximum, minimum, where

pytestmark = pytest.mark.skipif(not _compiled.available(), reason="the C extension ctmc._explore is not built")


def _same(a, b):
    """Assert two chains are the same bit for bit."""
    assert a.n_states == b.n_states
    assert np.array_equal(a.states.codes, b.states.codes)
    assert a.Q.shape == b.Q.shape
    assert np.array_equal(a.Q.indptr, b.Q.indptr) and np.array_equal(a.Q.indices, b.Q.indices)
    assert np.array_equal(a.Q.data, b.Q.data)
    assert a.build_info["n_transitions"] == b.build_info["n_transitions"]
    assert np.array_equal(a.initial, b.initial)


class _Random:
    """Random expressions over a model's variables, every operator of ctmc.expr."""

    def __init__(self, rng, xs):
        self.rng, self.xs = rng, xs

    def num(self, depth=0):
        r = self.rng
        k = r.integers(0, 14 if depth < 3 else 3)
        if k == 0:
            return self.xs[r.integers(len(self.xs))]
        if k == 1:
            return as_expr(int(r.integers(-3, 4)))
        if k == 2:
            return as_expr(float(r.choice([0.5, 1.25, -2.0, 3.0])))
        a, b = self.num(depth + 1), self.num(depth + 1)
        ops = [lambda: a + b, lambda: a - b, lambda: a * b, lambda: a / (b * b + 1),
               lambda: a // b, lambda: a % b, lambda: abs(a) ** as_expr(int(r.integers(0, 3))),
               lambda: -a, lambda: minimum(a, b), lambda: maximum(a, b),
               lambda: where(self.cond(depth + 1), a, b)]
        return ops[k - 3]()

    def cond(self, depth=0):
        r = self.rng
        k = r.integers(0, 9 if depth < 3 else 6)
        a, b = self.num(depth + 1), self.num(depth + 1)
        cmps = [a < b, a <= b, a > b, a >= b, a == b, a != b]
        if k < 6:
            return cmps[k]
        c, d = self.cond(depth + 1), self.cond(depth + 1)
        return [c & d, c | d, ~c][k - 6]


def _random_model(seed):
    rng = np.random.default_rng(seed)
    m = ctmc.Model(f"random{seed}")
    xs = []
    for k in range(int(rng.integers(1, 4))):
        lo = int(rng.integers(-2, 1))
        xs.append(m.var(f"x{k}", lo, lo + int(rng.integers(1, 6))))
    R = _Random(rng, xs)
    for e in range(int(rng.integers(1, 6))):
        x = xs[rng.integers(len(xs))]
        step = int(rng.choice([-1, 1, 2]))
        guard = (x + step >= x.lo) & (x + step <= x.hi)
        if rng.random() < 0.7:
            guard = guard & R.cond(1)
        rate = R.num(1) if rng.random() < 0.5 else float(rng.choice([0.5, 1.0, 2.0]))
        if rng.random() < 0.5:
            rate = abs(as_expr(rate)) + 0.25           # mostly valid rates; some invalid ones stay
        update = {x: x + step}
        if rng.random() < 0.3:
            y = xs[rng.integers(len(xs))]
            if y is not x:
                update[y] = minimum(maximum(R.num(2), y.lo), y.hi) if rng.random() < 0.8 else R.num(2)
        m.event(f"e{e}", guard=guard, rate=rate, update=update)
    init = {x.name: int(rng.integers(x.lo, x.hi + 1)) for x in xs}
    return m, init


def _build(m, init, engine):
    try:
        return m.build(initial=init, engine=engine), None
    except Exception as exc:       # noqa: BLE001 - the two builders must fail alike
        return None, (type(exc), str(exc))


def _same_rows(a, b):
    assert a.shape == b.shape
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert np.array_equal(a.data, b.data)


def test_random_models_are_built_alike():
    compiled = errors = 0
    for seed in range(400):
        m, init = _random_model(seed)
        a, ea = _build(m, init, "compiled")
        if ea is not None and ea[0] is ValueError and "cannot be compiled" in ea[1]:
            a, ea = _build(m, init, "auto")
        b, eb = _build(m, init, "numpy")
        assert ea == eb, seed
        if a is None:
            errors += 1
            continue
        _same(a, b)
        compiled += a.build_info["engine"] == "compiled"
        # the distributed assembly's two halves: the state table, then rows of any block
        S, T = m.state_space(init), m.state_space(init, engine="numpy")
        assert np.array_equal(S.codes, T.codes) and np.array_equal(S.codes, a.states.codes)
        lo, hi = a.n_states // 3, a.n_states - a.n_states // 4
        _same_rows(m.generator_rows(S, lo, hi), m.generator_rows(S, lo, hi, engine="numpy"))
        _same_rows(m.generator_rows(S, 0, a.n_states), a.Q)
    # most random models compile and run to the end; some stop on an error (the same one)
    assert compiled >= 200 and errors >= 10, (compiled, errors)


@pytest.mark.parametrize("name,value", [("kanban", 2), ("polling", 4), ("fms", 2), ("cluster", 4),
                                        ("tandem", 15)])
def test_gallery_models_are_built_alike(name, value):
    from ctmc.models.gallery import GALLERY
    g = GALLERY[name](value)
    m = g.model()
    a = m.build(initial=g.initial, engine="compiled")
    b = m.build(initial=g.initial, engine="numpy")
    assert a.build_info["engine"] == "compiled" and b.build_info["engine"] == "numpy"
    _same(a, b)
    S = m.state_space(initial=g.initial, engine="compiled")
    assert np.array_equal(S.codes, b.states.codes)
    half = a.n_states // 2
    _same_rows(m.generator_rows(S, half, a.n_states, engine="compiled"), b.Q[half:])


def test_a_hashed_and_a_dense_index_give_the_same_chain(monkeypatch):
    from ctmc.models.gallery import GALLERY
    g = GALLERY["cluster"](4)
    a = g.model().build(initial=g.initial, engine="compiled")
    monkeypatch.setattr(_compiled, "DENSE_POINTS", 0)
    b = g.model().build(initial=g.initial, engine="compiled")
    _same(a, b)


def _mm1k():
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, 5)
    m.event("arrive", guard=n < 5, rate=2.0, update={n: n + 1})
    m.event("serve", guard=n > 0, rate=3.0, update={n: n - 1})
    return m, n


def test_errors_on_the_way_are_numpys():
    m, n = _mm1k()
    m.event("leak", guard=n == 3, rate=n - 4.0, update={n: n - 1})      # negative rate at n = 3
    with pytest.raises(ctmc.ModelError, match="invalid rate") as a:
        m.build(initial={"n": 0})
    with pytest.raises(ctmc.ModelError) as b:
        m.build(initial={"n": 0}, engine="numpy")
    assert str(a.value) == str(b.value)
    m, n = _mm1k()
    m.event("jump", guard=n == 4, rate=1.0, update={n: n + 2})          # out of bounds from n = 4
    with pytest.raises(ctmc.ModelError, match="leaves the declared bounds"):
        m.build(initial={"n": 0})
    with pytest.raises(ctmc.ModelError, match="max_states"):
        _mm1k()[0].build(initial={"n": 0}, max_states=3)


def test_integer_division_by_zero_is_refused_by_both_builders():
    """An integer ``//`` or ``%`` by zero is an error (never numpy's silent 0): the engine stops,
    numpy builds again and names the event and the state; where no divisor is 0 both agree."""
    for engine in ("auto", "numpy"):
        m, n = _mm1k()
        k = m.var("k", 0, 3)
        m.event("odd", guard=(n // (n - 2) == 0) & (k < 3), rate=1.0 + n % 2, update={k: k + 1})
        with pytest.raises(ctmc.ModelError, match=r"event 'odd': guard: \(n // \(n - 2\)\) divides an "
                                                  r"integer by zero in state \(n=2\)"):
            m.build(initial={"n": 0, "k": 0}, engine=engine)
    m, n = _mm1k()
    k = m.var("k", 0, 3)
    m.event("odd", guard=(n // (n - 7) == -1) & (k < 3), rate=1.0 + n % 2, update={k: k + 1})
    a, b = m.build(initial={"n": 0, "k": 0}), m.build(initial={"n": 0, "k": 0}, engine="numpy")
    _same(a, b)
    assert a.build_info["engine"] == "compiled"
    # the rate of "odd" from each state, by Python's integers
    at = {(int(x), int(y)): i for i, (x, y) in enumerate(zip(a.states["n"], a.states["k"]))}
    for (x, y), i in at.items():
        want = 1.0 + x % 2 if x // (x - 7) == -1 and y < 3 else 0.0
        assert (a.Q[i, at[(x, y + 1)]] if y < 3 else 0.0) == want


def test_rows_of_states_that_are_not_the_models_are_refused_by_numpys_rule():
    S = _mm1k()[0].state_space(initial={"n": 0})                         # n = 0..5
    m2 = ctmc.Model("mm1k")
    n2 = m2.var("n", 0, 5)
    m2.event("jump", guard=n2 < 4, rate=1.0, update={n2: n2 + 2})       # reaches n = 0, 2, 4 only
    T = m2.state_space(initial={"n": 1})                                   # 1, 3, 5
    with pytest.raises(ValueError, match="leaves the given state table"):
        m2.generator_rows(S.__class__(None, codes=S.codes[:3], layout=S.layout), 0, 3)
    assert T["n"].tolist() == [1, 3, 5]


def test_engine_option():
    m, n = _mm1k()
    with pytest.raises(ValueError, match="engine: expected one of"):
        m.build(initial={"n": 0}, engine="fast")
    with pytest.raises(ValueError, match="strategy='bfs'"):
        m.build(initial={"n": 0}, engine="compiled", strategy="box")
    assert m.build(initial={"n": 0}, strategy="box").build_info["engine"] == "numpy"
    m.event("user", guard=n > 10, rate=lambda env: env["n"] * 1.0, update={n: n - 1})
    with pytest.raises(ValueError, match="calls a user function"):
        m.build(initial={"n": 0}, engine="compiled")
    assert m.build(initial={"n": 0}).build_info["engine"] == "numpy"


def test_duplicates_in_long_rows_are_summed_in_the_order_of_the_events():
    """17 to 40 events of one state into 3 states: rows longer than scipy's stable-sort threshold (review)."""
    rates = [0.1, 0.2, 0.3, 0.7, 1 / 3, 1.0, 3.3, 1e-17]
    for n_ev in (17, 23, 40):
        for seed in range(20):
            rng = np.random.default_rng(seed)
            m = ctmc.Model("dups")
            x = m.var("x", 0, 3)
            for e, (t, r) in enumerate(zip(rng.integers(1, 4, n_ev), rng.choice(rates, n_ev))):
                m.event(f"e{e}", guard=x == 0, rate=float(r), update={x: int(t)})
            m.event("back", guard=x > 0, rate=1.0, update={x: 0})
            a, b = m.build(initial={"x": 0}), m.build(initial={"x": 0}, engine="numpy")
            assert a.build_info["engine"] == "compiled"
            _same(a, b)
            S = m.state_space(initial={"x": 0})
            _same_rows(m.generator_rows(S, 0, 2), m.generator_rows(S, 0, 2, engine="numpy"))


def _two_vars():
    m = ctmc.Model("xy")
    x, y = m.var("x", 0, 4), m.var("y", -2, 2)
    m.event("up", guard=x < 4, rate=1.0, update={x: x + 1})
    m.event("down", guard=x > 0, rate=2.0, update={x: x - 1})
    return m, x, y


@pytest.mark.parametrize("case", [
    # numpy computes these in a narrow width (wraps around): not compiled
    "rate=1 + (((x > 0) * np.int8(100) + 100) > 0)",
    "guard=(where(x > 1, np.int8(100), np.int8(0)) + 100 > 0) & (y < 2)",
    # integer results are never -0.0 (the sign of an infinity would flip)
    "guard=(1 / (-x) > 0) & (y < 2)",
    "guard=(1 / (x * -1) > 0) & (y < 2)",
    # numpy raises for a negative integer power, also where the guard is false: not compiled
    "guard=(x < 3) & (x >= 1) & (2 ** (x - 1) >= 1) & (y < 2)",
    # a constant non-negative power is compiled
    "rate=1 + x ** 2",
])
def test_numpy_semantics_kept(case):
    """Cases of the review (2026-12-01): the same chain or the same error as numpy's builder."""
    m, x, y = _two_vars()
    kind, expr = case.split("=", 1)
    value = eval(expr, {"np": np, "x": x, "y": y, "where": where})
    kw = {"guard": y < 2, "rate": 1.0} | {kind: value}
    m.event("side", update={y: y + 1}, **kw)
    a, ea = _build(m, {"x": 0, "y": 0}, "auto")
    b, eb = _build(m, {"x": 0, "y": 0}, "numpy")
    assert ea == eb
    if a is not None:
        _same(a, b)


def test_deep_expressions_and_many_initial_states():
    m, x, y = _two_vars()
    r = as_expr(1.0) + x
    for _ in range(900):
        r = r + 0.001
    m.event("side", guard=y < 2, rate=r, update={y: y + 1})
    a, ea = _build(m, {"x": 0, "y": 0}, "auto")          # no RecursionError: numpy builds it
    b, eb = _build(m, {"x": 0, "y": 0}, "numpy")
    assert ea is None and eb is None
    _same(a, b)
    m, x, y = _two_vars()
    init = [{"x": k, "y": 0} for k in range(3)]
    for engine in ("auto", "numpy"):
        with pytest.raises(ctmc.ModelError, match="max_states=2"):
            m.build(initial=init, max_states=2, engine=engine)


def test_rows_over_a_table_of_wider_bounds_are_numpys():
    """A state table of other bounds (review): the updates are checked against the model's own bounds."""
    wide = ctmc.Model("wide")
    n = wide.var("n", 0, 10)
    wide.event("arr", guard=n < 10, rate=1.0, update={n: n + 1})
    S = wide.state_space(initial={"n": 0})
    m = ctmc.Model("narrow")
    k = m.var("n", 0, 4)
    m.event("arr", guard=k < 10, rate=1.0, update={k: k + 1})
    for engine in ("auto", "compiled", "numpy"):
        with pytest.raises(ctmc.ModelError, match="leaves the declared bounds"):
            m.generator_rows(S, 0, 11, engine=engine)
