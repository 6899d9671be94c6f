"""Integer expressions are exact or refused: never numpy's silent wrap-around or division by zero.

The independent answer is Python's own unbounded integers: a reference
evaluator (:func:`exact`) computes each random expression state by state and
marks a state *faulty* where a value that is used leaves the 64-bit range or
an integer ``//``/``%`` divides by zero (the branch :func:`ctmc.where` does not
take is not used). Every way an expression is evaluated must then give the
exact value in every other state and report exactly the faulty ones:

- :meth:`ctmc.Expr.evaluate_faults` / ``evaluate`` (the rule in ``ctmc/expr.py``);
- the model builders, numpy's (both strategies) and the compiled one, with the
  expression in a guard, a rate and an update: a faulty reachable state is a
  :class:`ctmc.ModelError`, otherwise the generator holds the exact values;
- the command line's parser (:mod:`ctmc.exprparse`, the text of the same
  expression) and :func:`ctmc.exprparse.eval_on_chain`.

Then the cases seen in the issue, one by one, and ``ctmc solve`` refusing in
one line on standard error.
"""
import itertools
import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import ctmc
from ctmc import _compiled
from ctmc.cli import main
from ctmc.expr import ExpressionError, as_expr, maximum, minimum, where
from ctmc.exprparse import eval_on_chain, parse_expr

LO, HI = -2 ** 63, 2 ** 63 - 1
XS, YS = range(0, 4), range(-2, 3)                       # the variables' ranges in the property tests
GRID = list(itertools.product(XS, YS))
FAULT = "fault"
BIG = [2 ** 31, 2 ** 32 - 1, 2 ** 53, 2 ** 53 + 1, 2 ** 62, -2 ** 62, HI, LO, 3 ** 39, 10 ** 18, -(10 ** 18)]


# ---- random expressions: trees, their Expr, their text, their exact value -------------------------

def trees():
    leaf = st.one_of(st.just(("x",)), st.just(("y",)), st.builds(lambda v: ("c", v), st.integers(-3, 3)),
                     st.builds(lambda v: ("c", v), st.sampled_from(BIG)))

    def grow(sub):
        return st.one_of(
            st.builds(lambda s, a, b: ("bin", s, a, b), st.sampled_from(["+", "-", "*", "//", "%"]),
                      sub, sub),
            st.builds(lambda a, k: ("pow", a, k), sub, st.integers(0, 70)),
            st.builds(lambda k, a: (k, a), st.sampled_from(["neg", "abs"]), sub),
            st.builds(lambda s, a, b, c, d: ("where", s, a, b, c, d), st.sampled_from(["<", "==", ">="]),
                      sub, sub, sub, sub),
            st.builds(lambda k, a, b: (k, a, b), st.sampled_from(["min", "max"]), sub, sub))
    return st.recursive(leaf, grow, max_leaves=10)


_CMP = {"<": lambda a, b: a < b, "==": lambda a, b: a == b, ">=": lambda a, b: a >= b}


def to_expr(t, x, y):
    """The tree as a :class:`ctmc.Expr` over the expressions ``x`` and ``y``."""
    k = t[0]
    if k in ("x", "y"):
        return x if k == "x" else y
    if k == "c":
        return as_expr(t[1])
    if k == "bin":
        a, b = to_expr(t[2], x, y), to_expr(t[3], x, y)
        return {"+": a.__add__, "-": a.__sub__, "*": a.__mul__, "//": a.__floordiv__, "%": a.__mod__}[t[1]](b)
    if k == "pow":
        return to_expr(t[1], x, y) ** t[2]
    if k == "neg":
        return -to_expr(t[1], x, y)
    if k == "abs":
        return abs(to_expr(t[1], x, y))
    if k == "where":
        c = _CMP[t[1]](to_expr(t[2], x, y), to_expr(t[3], x, y))
        return where(c, to_expr(t[4], x, y), to_expr(t[5], x, y))
    return (minimum if k == "min" else maximum)(to_expr(t[1], x, y), to_expr(t[2], x, y))


def to_text(t) -> str:
    """The tree as the text a user would type on the command line."""
    k = t[0]
    if k in ("x", "y"):
        return k
    if k == "c":
        return f"({t[1]})"
    if k == "bin":
        return f"({to_text(t[2])} {t[1]} {to_text(t[3])})"
    if k == "pow":
        return f"({to_text(t[1])} ** {t[2]})"
    if k in ("neg", "abs"):
        return f"(-{to_text(t[1])})" if k == "neg" else f"abs({to_text(t[1])})"
    if k == "where":
        return f"where({to_text(t[2])} {t[1]} {to_text(t[3])}, {to_text(t[4])}, {to_text(t[5])})"
    return f"{k}({to_text(t[1])}, {to_text(t[2])})"


def exact(t, x, y):
    """The value of the tree at ``x, y`` by Python's integers, or FAULT."""
    k = t[0]
    if k in ("x", "y"):
        return x if k == "x" else y
    if k == "c":
        return t[1]
    if k == "where":
        a, b = exact(t[2], x, y), exact(t[3], x, y)
        if FAULT in (a, b):
            return FAULT
        return exact(t[4] if _CMP[t[1]](a, b) else t[5], x, y)
    args = [exact(s, x, y) for s in t[1:] if isinstance(s, tuple)]
    if FAULT in args:
        return FAULT
    if k == "bin":
        a, b = args
        if t[1] in ("//", "%") and b == 0:
            return FAULT
        v = {"+": a + b, "-": a - b, "*": a * b}.get(t[1]) if t[1] in "+-*" else (
            a // b if t[1] == "//" else a % b)
    elif k == "pow":
        v = args[0] ** t[2]
    elif k == "neg":
        v = -args[0]
    elif k == "abs":
        v = abs(args[0])
    else:
        v = min(args) if k == "min" else max(args)
    return v if LO <= v <= HI else FAULT


def check_values(got_value, got_mask, t):
    """``got`` (values and fault mask over GRID) against the exact reference."""
    ref = [exact(t, x, y) for x, y in GRID]
    want_mask = np.array([r == FAULT for r in ref])
    got_mask = np.broadcast_to(np.asarray(got_mask, dtype=bool), (len(GRID),))
    assert np.array_equal(got_mask, want_mask)
    vals = np.broadcast_to(np.asarray(got_value), (len(GRID),))
    for r, v, bad in zip(ref, vals, want_mask):
        if not bad:
            assert int(v) == r
    return want_mask.any()


ENV = {"x": np.array([x for x, _ in GRID], dtype=np.int64),
       "y": np.array([y for _, y in GRID], dtype=np.int64)}


@settings(max_examples=200, deadline=None)
@given(trees())
def test_random_integer_expressions_are_exact_or_refused(t):
    m = ctmc.Model("p")
    x, y = m.var("x", XS[0], XS[-1]), m.var("y", YS[0], YS[-1])
    e = to_expr(t, x, y)
    # the rule itself: values where exact, faults exactly where Python's integers leave 64 bits
    value, faults = e.evaluate_faults(ENV)
    any_fault = check_values(value, False if faults is None else faults.mask, t)
    if any_fault:
        with pytest.raises(ExpressionError):
            e.evaluate(ENV)
    # the command line's parser, on the text of the same expression
    pe = parse_expr(to_text(t), ["x", "y"])
    pvalue, pfaults = pe.evaluate_faults(ENV)
    assert check_values(pvalue, False if pfaults is None else pfaults.mask, t) == any_fault
    # the builders: every (x, y) is reachable, the expression is a guard, a rate and an update
    z, w = m.var("z", 0, 1), m.var("w", 0, 2)
    for v, lo, hi in ((x, XS[0], XS[-1]), (y, YS[0], YS[-1])):
        m.event(f"{v.name}+", guard=v < hi, rate=1.0, update={v: v + 1})
        m.event(f"{v.name}-", guard=v > lo, rate=1.0, update={v: v - 1})
    m.event("t", guard=e >= 0, rate=e % 5 + 1, update={z: 1 - z, w: e % 3})
    init = {"x": 0, "y": 0, "z": 0, "w": 0}
    for engine, strategy in (("numpy", "bfs"), ("numpy", "box"), ("auto", "bfs")):
        if any_fault:
            with pytest.raises(ctmc.ModelError, match="event 't'.*(64-bit integer range|by zero)"):
                m.build(initial=init, engine=engine, strategy=strategy)
            continue
        chain = m.build(initial=init, engine=engine, strategy=strategy)
        S = chain.states
        at = {tuple(int(S[n][i]) for n in ("x", "y", "z", "w")): i for i in range(chain.n_states)}
        for (a, b, c, d), i in at.items():
            r = exact(t, a, b)
            if r >= 0:
                j = at[(a, b, 1 - c, r % 3)]
                assert chain.Q[i, j] == float(r % 5 + 1)
    # the command line's evaluation on a chain (all of XS x YS)
    if any_fault:
        with pytest.raises(ValueError, match="64-bit integer range|by zero"):
            eval_on_chain(to_text(t), chain_xy())
    else:
        ch = chain_xy()
        got = eval_on_chain(to_text(t), ch)
        want = [float(exact(t, int(a), int(b))) for a, b in zip(ch.states["x"], ch.states["y"])]
        assert got.tolist() == want


_CHAIN = []


def chain_xy():
    if not _CHAIN:
        m = ctmc.Model("xy")
        x, y = m.var("x", XS[0], XS[-1]), m.var("y", YS[0], YS[-1])
        for v, lo, hi in ((x, XS[0], XS[-1]), (y, YS[0], YS[-1])):
            m.event(f"{v.name}+", guard=v < hi, rate=1.0, update={v: v + 1})
            m.event(f"{v.name}-", guard=v > lo, rate=1.0, update={v: v - 1})
        _CHAIN.append(m.build(initial={"x": 0, "y": 0}))
    return _CHAIN[0]


# ---- the cases of the issue -------------------------------------------------------------------

ENGINES = ["numpy", "auto"] + (["compiled"] if _compiled.available() else [])


def _bd(guard=None, rate=1.0, update=None, hi=4):
    m = ctmc.Model("bd")
    n = m.var("n", 0, hi)
    m.event("up", guard=(n < hi) if guard is None else guard(n), rate=rate(n) if callable(rate) else rate,
            update={n: n + 1 if update is None else update(n)})
    m.event("down", guard=n > 0, rate=2.0, update={n: n - 1})
    return m


def _build(m, engine):
    return m.build(initial={"n": 0}, engine=engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_overflowing_guard_is_refused(engine):
    # n * 2**62 is 2**63 at n = 2: numpy wrapped it to -2**63 and kept 3 of 5 states
    m = _bd(guard=lambda n: (n < 4) & (n * 2 ** 62 >= 0))
    if engine == "compiled":        # 2**62 is beyond the compiled engine's doubles: numpy's case
        with pytest.raises(ValueError, match="cannot be compiled"):
            _build(m, engine)
        return
    with pytest.raises(ctmc.ModelError, match=r"event 'up': guard: \(n \* 4611686018427387904\) is "
                                              r"9223372036854775808, beyond the 64-bit integer "
                                              r"range.*\(n=2\)"):
        _build(m, engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_overflowing_power_is_refused(engine):
    # n ** 40: 3 ** 40 = 12157665459056928801 > 2**63 - 1 (numpy gave 4 states)
    with pytest.raises(ctmc.ModelError, match=rf"guard: \(n \*\* 40\) is {3 ** 40}, beyond.*\(n=3\)"):
        _build(_bd(guard=lambda n: (n < 4) & (n ** 40 >= 0)), engine)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("part", ["rate", "update", "guard"])
def test_division_by_zero_is_refused(engine, part):
    kw = {"rate": dict(rate=lambda n: 1 + n // 0), "update": dict(update=lambda n: n + 1 + n % 0),
          "guard": dict(guard=lambda n: (n < 4) & (n // (n - 3) < 5))}[part]
    what = {"rate": r"rate: \(n // 0\)", "update": r"update of 'n': \(n % 0\)",
            "guard": r"guard: \(n // \(n - 3\)\)"}[part]
    state = {"rate": 0, "update": 0, "guard": 3}[part]
    with pytest.raises(ctmc.ModelError, match=rf"event 'up': {what} divides an integer by zero in state "
                                              rf"\(n={state}\)"):
        _build(_bd(**kw), engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_updates_are_evaluated_where_the_rate_is_zero(engine):
    # the rate is 0 at n = 1, where the update divides by zero: an error for both builders alike
    m = _bd(rate=lambda n: where(n == 1, 0.0, 1.0), update=lambda n: n + 1 + 0 * (n % (n - 1)))
    with pytest.raises(ctmc.ModelError, match=r"update of 'n': \(n % \(n - 1\)\) divides an integer by zero "
                                              r"in state \(n=1\)"):
        _build(m, engine)


def test_unused_values_do_not_count_and_both_builders_agree():
    # 10 // n at n = 0 is in the branch where() does not take, and beside a false operand of &;
    # 2**60 * n leaves the doubles' exact range (the engine hands over) but not 64 bits
    def model():
        m = ctmc.Model("u")
        n = m.var("n", 0, 7)
        m.event("up", guard=(n < 7) & ((n == 0) | (10 // n >= 1)), rate=where(n > 0, 10 // n, 3) + 0.5,
                update={n: (n * 2 ** 60 + 2 ** 60) // 2 ** 60})
        m.event("down", guard=n > 0, rate=1.0, update={n: n - 1})
        return m
    chains = [model().build(initial={"n": 0}, engine=e) for e in ("numpy", "auto")]
    Q = chains[0].Q.toarray()
    for k in range(7):
        assert Q[k, k + 1] == (10 // k if k else 3) + 0.5
    assert np.array_equal(chains[0].Q.data, chains[1].Q.data)
    assert np.array_equal(chains[0].Q.indices, chains[1].Q.indices)


def test_event_rates_and_weights_count_faults_only_where_the_guard_holds():
    # 10 // n at n = 0 is outside the guard: Model.event_rate and the immediate weights do not use it
    m = ctmc.Model("g")
    n = m.var("n", 0, 3)
    m.event("a", guard=(n > 0) & (n < 3), rate=10 // n, update={n: n + 1})
    m.event("b", guard=n > 0, rate=1.0, update={n: n - 1})
    m.event("c", guard=n == 0, rate=1.0, update={n: n + 1})
    m.immediate("i", guard=n == 3, weight=6 // (n - 2), update={n: 0})
    chain = m.build(initial={"n": 0})
    assert chain.n_states == 3                                  # n = 3 is vanishing
    env = {"n": np.arange(4, dtype=np.int64)}
    assert m.event_rate("a", env).tolist() == [0.0, 10.0, 5.0, 0.0]
    m.event("bad", guard=n < 2, rate=10 // n, update={n: n + 1})
    with pytest.raises(ctmc.ModelError, match=r"event 'bad': rate: \(10 // n\) divides an integer by zero"):
        m.event_rate("bad", env)


def test_a_fault_in_an_unreachable_corner_of_the_box_is_not_an_error():
    # y = 4 is never reached (y stays <= 2): 12 // (y - 4) is not evaluated on a reachable state
    m = ctmc.Model("corner")
    x, y = m.var("x", 0, 3), m.var("y", 0, 4)
    m.event("a", guard=x < 3, rate=1.0 + 12 // (y - 4) * 0, update={x: x + 1})
    m.event("b", guard=y < 2, rate=1.0, update={y: y + 1})
    m.event("c", guard=x > 0, rate=1.0, update={x: x - 1})
    for strategy in ("box", "bfs"):
        assert m.build(initial={"x": 0, "y": 0}, strategy=strategy, engine="numpy").n_states == 12


@pytest.mark.parametrize("value", [2 ** 63, -2 ** 63 - 1, 2 ** 64])
def test_integer_constants_beyond_64_bits_are_refused_where_written(value):
    n = ctmc.Model("c").var("n", 0, 3)
    with pytest.raises(ExpressionError, match=f"{value} is beyond the 64-bit range"):
        n + value
    with pytest.raises(ValueError, match=f"expression 'n == {value}': the integer constant {value}"):
        parse_expr(f"n == {value}", ["n"])
    assert parse_expr("-9223372036854775808 + n", ["n"]).evaluate({"n": np.array([1])}).tolist() == [LO + 1]


@pytest.mark.parametrize("lo, hi", [(0, 2 ** 63), (-2 ** 63 - 1, 0)])
def test_variable_bounds_beyond_64_bits_are_refused(lo, hi):
    with pytest.raises(ctmc.ModelError, match="must lie in the 64-bit range"):
        ctmc.Model("v").var("n", lo, hi)


def test_a_10000_deep_expression_builds():
    m = ctmc.Model("deep")
    n = m.var("n", 0, 3)
    e = n
    for k in range(10_000):
        e = e + (k % 3) - (k % 3)                # n again, 10,000 levels of (... + c) - c
    m.event("up", guard=n < 3, rate=e - n + 1.5, update={n: e + 1})
    m.event("down", guard=n > 0, rate=1.0, update={n: n - 1})
    chain = m.build(initial={"n": 0}, engine="numpy")
    Q = chain.Q.toarray()
    assert [Q[k, k + 1] for k in range(3)] == [1.5] * 3 and chain.n_states == 4
    assert len(repr(e)) > 10_000 and repr(e).startswith("(" * 100)


# ---- ctmc solve ------------------------------------------------------------------------------------

MODEL = """
import ctmc
model = ctmc.Model("bd")
n = model.var("n", 0, 4)
model.event("up", guard=n < 4, rate=1.0, update={n: n + 1})
model.event("down", guard=n > 0, rate=2.0, update={n: n - 1})
initial = {"n": 0}
"""


@pytest.mark.parametrize("option, text, why", [
    ("--hitting", "n == 2**64", r"\(2 \*\* 64\) is 18446744073709551616, beyond the 64-bit integer range"),
    ("--hitting", "n == 18446744073709551616", "the integer constant 18446744073709551616 is beyond"),
    ("--expect", "2**63 + n", r"\(2 \*\* 63\) is 9223372036854775808, beyond"),
    ("--expect", "n * 2**62", r"\(n \* \(2 \*\* 62\)\) is 9223372036854775808, beyond.*\(n=2\)"),
    ("--expect", "n ** 40", rf"\(n \*\* 40\) is {3 ** 40}, beyond.*\(n=3\)"),
    ("--expect", "n // 0", r"\(n // 0\) divides an integer by zero in state \(n=0\)"),
    ("--expect", "7 % (n - 2)", r"\(7 % \(n - 2\)\) divides an integer by zero in state \(n=2\)"),
    ("--expect", "1e400 * 0", r"gives nan in state \(n=0\), not a finite number"),
    ("--expect", "1 / n", r"gives inf in state \(n=0\), not a finite number"),
])
def test_solve_refuses_in_one_line(tmp_path, capsys, option, text, why):
    path = tmp_path / "bd.py"
    path.write_text(MODEL)
    try:
        status = main(["solve", str(path), option, text])
    except SystemExit as exc:
        status = exc.code
    out = capsys.readouterr()
    assert status == 2 and out.out == ""
    assert out.err.count("\n") == 1 and out.err.startswith(f"ctmc solve: error: expression {text!r}: ")
    assert re.search(why, out.err), out.err


def test_solve_refuses_a_model_that_divides_by_zero(tmp_path, capsys):
    path = tmp_path / "bd.py"
    path.write_text(MODEL.replace("rate=1.0, update={n: n + 1}", "rate=1.0, update={n: n + 1 + n % (n - 2)}"))
    try:
        status = main(["solve", str(path)])
    except SystemExit as exc:
        status = exc.code
    out = capsys.readouterr()
    assert status == 2 and out.out == "" and out.err.count("\n") == 1
    assert re.search(r"model 'bd': event 'up': update of 'n': \(n % \(n - 2\)\) divides an integer by zero "
                     r"in state \(n=2\)", out.err), out.err


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["+", "-", "*", "//", "%", "**", "neg", "abs"]),
       st.tuples(st.integers(-6, 6), st.integers(0, 6)), st.tuples(st.integers(-6, 6), st.integers(0, 6)),
       st.sampled_from([1, 2 ** 20, 2 ** 61]))
def test_interval_bounds_hold_every_value(sym, a, b, scale):
    """The bounds that let numpy's int64 run unchecked: every exact value lies inside them (brute force)."""
    from ctmc.expr import _bound, _unary_range
    A = range(a[0] * scale, a[0] * scale + a[1] + 1)
    e0 = (b[0] + 6) * 6                                  # exponents 0 .. 78, past 64 where capped
    B = range(e0, e0 + b[1] + 1) if sym == "**" else range(b[0] * scale, b[0] * scale + b[1] + 1)
    if sym in ("neg", "abs"):
        lo, hi = _unary_range(sym, (A[0], A[-1]))
        vals = [-x if sym == "neg" else abs(x) for x in A]
        assert lo <= min(vals) and max(vals) <= hi
        return
    lo, hi, zero = _bound(sym, (A[0], A[-1]), (B[0], B[-1]))
    assert zero == (sym in ("//", "%") and 0 in B)
    f = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y,
         "//": lambda x, y: x // y, "%": lambda x, y: x % y, "**": lambda x, y: x ** y}[sym]
    vals = [f(x, y) for x in A for y in B if not (sym in ("//", "%") and y == 0)]
    if not vals:
        return
    if sym != "**":
        assert lo <= min(vals) and max(vals) <= hi
    elif LO <= lo and hi <= HI:                          # what the unchecked path relies on
        assert lo <= min(vals) and max(vals) <= hi
    else:                                                # beyond: some value is (capping kept that)
        assert min(vals) < LO or max(vals) > HI or lo <= min(vals) and max(vals) <= hi


@pytest.mark.parametrize("text", ["n" + "+1" * 900, "n" + "**1" * 5000])
def test_a_cli_expression_nested_too_deeply_is_refused_in_one_line(text):
    # Python's parser and the expression builder recurse per level: a ValueError naming the
    # expression, not a RecursionError traceback (ctmc solve turns it into one line and exit 2)
    from ctmc.exprparse import parse_expr
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_expr(text, ["n"])


def test_tilde_is_refused_on_numbers_and_kept_on_conditions():
    """``~`` is the logical not of a condition: on a number it would silently not be Python's ``~n``."""
    m = ctmc.Model("tilde")
    n, b = m.var("n", 0, 3), m.var("b", 0, 1)
    for bad in (lambda: ~n, lambda: ~(n + 1), lambda: ~(-n), lambda: ~(n // 2), lambda: ~as_expr(2)):
        with pytest.raises(ValueError, match="'~' of the number"):
            bad()
    env = {"n": np.arange(4), "b": np.array([0, 1, 0, 1])}
    assert (~(n > 1)).evaluate(env).tolist() == [True, True, False, False]
    assert (~b).evaluate(env).tolist() == [True, False, True, False]      # a 0..1 variable is a condition


@pytest.mark.parametrize("text", ["n > 2 & n < 5", "full | n == 0", "n == 0 | full", "m < 1 & n"])
def test_an_and_or_inside_a_comparison_is_refused(text):
    """Python reads ``n > 2 & n < 5`` as ``n > (2 & n) < 5``: a silently other condition, refused."""
    with pytest.raises(ValueError, match="binds tighter than a comparison"):
        parse_expr(text, ["n", "m", "full"])


def test_parenthesised_and_or_keep_their_meaning():
    env = {"n": np.arange(7), "m": np.zeros(7, dtype=np.int64)}
    want = ((env["n"] > 2) & (env["n"] < 5)).tolist()
    for text in ("(n > 2) & (n < 5)", "n > 2 and n < 5", "2 < n < 5", "((n > 2) & (n < 5)) == 1"):
        assert np.asarray(parse_expr(text, ["n", "m"]).evaluate(env), dtype=bool).tolist() == want, text
    assert parse_expr("(n & m) == 0", ["n", "m"]).evaluate(env).all()
