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
from ctmc.kernels import ahead, plan
from ctmc.kernels.registry import Method
from ctmc.kernels.sweeps import Sweeper
from ctmc.models.gallery import parse_spec
from tracing import traced_peak


@pytest.fixture(autouse=True)
def _no_solve_ahead(monkeypatch):
    """Each stage's memory measured alone: the bound's solve made ahead holds its vectors beside the
    stationary solve's by design (:mod:`ctmc.kernels.ahead`, only where the plan's rule
    :func:`~ctmc.kernels.plan.beside_fits` lets it; tests/test_error_bound_ahead.py and the tests below)."""
    monkeypatch.setattr(ahead, "AHEAD_STATES", 1 << 62)


@pytest.fixture(scope="module")
def kanban():
    """kanban t=2: 4600 states, four dimensions: auto plans a GMRES probe."""
    chain = parse_spec("kanban:2").chain()
    exact = chain.stationary("lu")
    return chain, exact


def _sizes(chain):
    return chain.n_states, chain.Q.nnz


def _released(chain):
    """What the scipy operator holds at the plan and frees before a Krylov basis (its
    :meth:`releasable`): the exit rates (8 bytes a state) and, where the compiled passes do not read the
    closed class and the structure facts from Q's rows, its Q^T, as many bytes as Q."""
    from ctmc import _relax
    exits = 8 * chain.n_states
    if _relax.extension() is not None:
        return exits
    return exits + chain.Q.data.nbytes + chain.Q.indices.nbytes + chain.Q.indptr.nbytes


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


def test_a_budget_below_the_default_basis_takes_the_restart_that_fits(kanban, monkeypatch):
    chain, exact = kanban
    monkeypatch.setattr(plan, "BICGSTAB_FIRST_ITERATIONS", 1)     # BiCGStab first fails: GMRES runs
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


def test_the_lean_plan_runs_bicgstab_once():
    """auto's plan on many-dimensional chains starts with a short BiCGStab; where no GMRES basis fits, the
    lean plan's BiCGStab takes the whole probe budget instead, and the short one is not run before it."""
    steps = plan.auto_plan({"states": 10**5, "envelope_per_nnz": 300.0, "dimensions": 16})[0]
    n, e = 10**5, 9 * 10**5
    assert steps[:2] == ["bicgstab-first-probe", "gmres-probe"]
    assert plan.memory_plan(steps, n, e, 1e12)[0] == steps
    lean = plan.solve_bytes("gmres", n, e, plan.LEAN_MIN_RESTART) - 1.0
    assert plan.memory_plan(steps, n, e, lean)[0] == ["bicgstab-probe", "gauss_seidel-probe", "gauss_seidel",
                                                      "power"]


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


# --- the stationary GMRES system read from Q's rows (csr.MaskedTranspose) --------------------------------
def _random_generator(n, seed, wide=False):
    """A generator with stored zero rates, rows without a stored diagonal, sorted rows."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=0.15, random_state=rng, format="csr")
    R.setdiag(0)
    R.eliminate_zeros()
    Q = (R * 3 - sp.diags(np.asarray(R.sum(axis=1)).ravel() * 3)).tocoo()
    data = np.where(rng.random(Q.nnz) < 0.1, 0.0, Q.data)
    drop = (Q.row == Q.col) & (Q.row % 7 == 3)
    Q = sp.csr_matrix((data[~drop], (Q.row[~drop], Q.col[~drop])), shape=(n, n))
    Q.sort_indices()
    if wide:
        Q.indices, Q.indptr = Q.indices.astype(np.int64), Q.indptr.astype(np.int64)
    return Q


def _masked_dense(Q, members, fill):
    """masked_block of Q^T written out: -Q^T on the members, fill on the others' diagonal, 0 elsewhere."""
    A = -Q.toarray().T
    A[~members, :] = 0.0
    A[:, ~members] = 0.0
    out = np.flatnonzero(~members)
    A[out, out] = fill
    return A


def _ssor_dense(A, v):
    D, L, U = np.diag(np.diag(A)), np.tril(A, -1), np.triu(A, 1)
    x1 = np.zeros(len(v))
    for i in range(len(v)):                     # a zero diagonal leaves its unknown at 0 (the kernels' rule)
        x1[i] = (v[i] - L[i] @ x1) / A[i, i] if A[i, i] != 0 else 0.0
    x = x1.copy()
    for i in reversed(range(len(v))):
        if A[i, i] != 0:
            x[i] = (A[i, i] * x1[i] - U[i] @ x) / A[i, i]
    return x


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("left_out", [(), (0,), (5, 39), (2, 3, 17, 38)])
@pytest.mark.parametrize("wide", [False, True])
def test_the_masked_transpose_from_q_rows_is_masked_block_of_q_transpose(seed, left_out, wide):
    """Product (to the bit), norm, SSOR(1) and Eisenstat's product of the system read from Q's rows, against
    the matrix made from Q^T (csr.masked_block) and its row kernels, and a dense SSOR(1) in Python."""
    from ctmc import _relax
    from ctmc.backends.csr import inf_norm, masked_block, masked_transpose
    Q = _random_generator(40, seed, wide)
    members = np.ones(40, dtype=bool)
    members[list(left_out)] = False
    fill = 2.5
    A = masked_transpose(Q, members, fill)
    if A is None:
        pytest.skip("the compiled kernels are off")
    dense = _masked_dense(Q, members, fill)
    v = np.random.default_rng(seed + 100).standard_normal(40)
    B = masked_block(_relax.one_index_type(Q.T.tocsr()), members, fill)
    if B is not None:                          # (None: a left-out row stores no diagonal entry)
        assert np.array_equal(B.toarray(), dense)
        assert np.array_equal(A @ v, _relax.spmv(B)(v))          # each row summed in the same order
        x, y = np.empty(40), np.empty(40)
        B.has_sorted_indices = True
        _relax.symmetric_gauss_seidel(B).with_product[1](v, x, y)
    else:
        x = _ssor_dense(dense, v)
        y = dense @ x
    np.testing.assert_allclose(A @ v, dense @ v, rtol=1e-13, atol=1e-13 * np.abs(dense).sum(axis=1).max())
    assert A.inf_norm() == pytest.approx(np.abs(dense).sum(axis=1).max(), rel=1e-14)
    if B is not None:
        assert A.inf_norm() == pytest.approx(inf_norm(B), rel=1e-14)
    P = A.ssor()
    xt, xf, yf = P(v), np.empty(40), np.empty(40)
    assert P.with_product[0] is A
    P.with_product[1](v, xf, yf)
    assert np.array_equal(xt, xf)                                   # the fused kernel's x is the plain one's
    scale = np.abs(x).max()
    np.testing.assert_allclose(xt, _ssor_dense(dense, v), rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(xt, x, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(yf, dense @ xf, rtol=0, atol=1e-12 * np.abs(dense).sum(axis=1).max() * scale)
    np.testing.assert_allclose(yf, y, rtol=0, atol=1e-12 * np.abs(dense).sum(axis=1).max() * scale)
    if B is not None:                          # the left-out rows, decoupled, to the bit
        assert np.array_equal(xf[list(left_out)], x[list(left_out)])
        assert np.array_equal(yf[list(left_out)], y[list(left_out)])


def test_the_default_solve_holds_no_second_matrix():
    r"""The peak of ``stationary()`` beyond the chain (tracemalloc: numpy reports its buffers) is vectors only.

    On kanban t=3 (58,400 states, 504,800 stored entries) ``auto`` runs GMRES(m) with SSOR(1) on the
    pinned transposed system of nearly every state. What it must hold at its peak, in float64 vectors of
    ``8 n`` bytes: the Arnoldi basis, ``m + 1``; GMRES's own iterate and two work vectors, 3; outside it
    the right-hand side, the answer in the chain's numbering, the exit rates, the system's diagonal, the
    set's index arrays (int64: a vector each), the mask and the preconditioner's scratch: at most 12 in
    all. The bound allows those ``m + 16`` vectors and 4 bytes a stored entry (a third of a matrix): a
    matrix of the system (values and indices, 12 bytes an entry, or the 8 of a negated copy of the values
    plus ``Q^T``'s 4 of indices) held beside the basis exceeds it. The error bound's BiCGStab after the
    solve holds a matrix of 8 bytes an entry but 20 vectors, not ``m + 1``: below the bound too.
    """
    import tracemalloc
    chain = parse_spec("kanban:3").chain()
    chain.stationary()                                     # imports, first-use caches
    from ctmc import _relax
    if not _relax.compiled():
        pytest.skip("the compiled kernels are off: the system is a matrix")
    n, e = chain.n_states, chain.Q.nnz
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        res = chain.stationary()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    m = res.info["auto"]["probe_restart"]
    assert res.status is ctmc.Status.SUCCESS and m >= plan.PROBE_MIN_RESTART
    bound = (m + 16) * 8.0 * n + 4.0 * e
    assert peak <= bound, f"peak {peak / e:.1f} B/entry above {bound / e:.1f} (m={m})"


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("left_out", [(), (0,), (5, 39), (2, 3, 17, 38)])
def test_the_masked_system_from_q_rows_is_masked_block_of_q_to_the_bit(seed, left_out):
    """``transpose=False`` (the error bound's return-time system): product, SSOR(1) and norm against the row
    kernels on the matrix csr.masked_block makes (the same numbers), and the dense masked -Q."""
    from ctmc import _relax
    from ctmc.backends.csr import masked_block, masked_transpose
    Q = _random_generator(40, seed)
    members = np.ones(40, dtype=bool)
    members[list(left_out)] = False
    A = masked_transpose(Q, members, 2.5, transpose=False)
    if A is None:
        pytest.skip("the compiled kernels are off")
    dense = _masked_dense(Q, members, 2.5).T
    v = np.random.default_rng(seed + 200).standard_normal(40)
    x = A.ssor()(v)
    owner, fused = A.ssor().with_product             # SSOR(1) then the product (Eisenstat's), one kernel
    xf, y = np.empty(40), np.empty(40)
    fused(v, xf, y)
    assert owner is A and np.array_equal(xf, x)
    np.testing.assert_allclose(y, dense @ x, rtol=0, atol=1e-13 * np.abs(dense).sum(axis=1).max() * np.abs(x).max())
    np.testing.assert_allclose(x, _ssor_dense(dense, v), rtol=0, atol=1e-12 * np.abs(x).max())
    np.testing.assert_allclose(A @ v, dense @ v, rtol=0, atol=1e-13 * np.abs(dense).sum(axis=1).max())
    assert A.inf_norm() == pytest.approx(np.abs(dense).sum(axis=1).max(), rel=1e-14)
    B = masked_block(Q, members, 2.5)
    if B is not None:
        assert np.array_equal(A @ v, _relax.spmv(B)(v))
        assert np.array_equal(x, _relax.symmetric_gauss_seidel(B)(v))
        out = np.empty(40)
        assert A.product(v, out=out) is out and np.array_equal(out, A @ v)


def _peaks_during(monkeypatch, module, name: str, chain, from_call_start: bool, main_thread_only=False,
                  held=False):
    """``(result, peaks)``: ``chain.stationary()`` with ``module.name`` wrapped; ``peaks`` the traced peak
    (tracemalloc: numpy reports its buffers) during each call of it, above the memory traced when that
    call began or, with ``from_call_start``, when ``stationary()`` began; with ``main_thread_only``, only
    the calls made in the main thread (the bound's solve on its own thread runs the same function); with
    ``held``, each a pair ``(held, peak)``, ``held`` what was traced when the call began, above the same."""
    import threading
    import tracemalloc
    inner, seen, start = getattr(module, name), [], [0]

    def measured(*a, **k):
        if main_thread_only and threading.current_thread() is not threading.main_thread():
            return inner(*a, **k)
        now = tracemalloc.get_traced_memory()[0]
        before = start[0] if from_call_start else now
        tracemalloc.reset_peak()
        try:
            return inner(*a, **k)
        finally:
            peak = tracemalloc.get_traced_memory()[1] - before
            seen.append((now - before, peak) if held else peak)
    monkeypatch.setattr(module, name, measured)
    tracemalloc.start()
    try:
        start[0] = tracemalloc.get_traced_memory()[0]
        res = chain.stationary()
    finally:
        tracemalloc.stop()
    return res, seen


def test_the_error_bound_holds_no_matrix_of_its_own(monkeypatch):
    r"""The peak of the error bound's return-time solve (BiCGStab with SSOR(1) on the pinned ``M``) is vectors.

    The plan counts :data:`~ctmc.kernels.plan.BICGSTAB_VECTORS` and :data:`~ctmc.kernels.plan.WORK_VECTORS`
    float64 vectors for it beside the generator; the bound allows those and 4 bytes a stored entry. A
    matrix of the system (a negated copy of ``Q``'s values, 8 bytes an entry, sharing ``Q``'s indices, or a
    block extracted with 12) exceeds it.
    """
    from ctmc import _relax
    chain = parse_spec("kanban:3").chain()
    chain.stationary()
    if not _relax.compiled():
        pytest.skip("the compiled kernels are off: the system is a matrix")
    n, e = chain.n_states, chain.Q.nnz
    res, seen = _peaks_during(monkeypatch, ahead, "iterative_bound", chain, False)
    assert res.status is ctmc.Status.SUCCESS and len(seen) == 1
    bound = (plan.BICGSTAB_VECTORS + plan.WORK_VECTORS) * 8.0 * n + 4.0 * e
    assert seen[0] <= bound, f"the bound's peak {seen[0] / e:.1f} B/entry above {bound / e:.1f}"


def test_the_error_bound_s_solve_runs_beside_the_law_alone(monkeypatch):
    r"""The peak of ``stationary()`` while its error bound solves (BiCGStab, kanban t=3), counted in float64
    vectors of ``8 n`` bytes from the start of the call (tracemalloc: numpy reports its buffers).

    What that phase must hold: BiCGStab's seven vectors (iterate, residual with the half step in it, shadow,
    direction, the two products, the preconditioned direction with the preconditioned half step in it);
    beside them the law ``pi``, the exit rates, the return-time system's right-hand side, its mask (a byte
    a state) and the diagonal positions it reads ``Q`` by (int32): 7 + 3 + 5/8, at most 11 with the set
    masks of the caller. ``pi Q`` (made after the solve), an iterate of zeros, a second copy of the answer
    (the raw solve's, the masked or the clipped one), the system's int64 index set, diagonal or rows, or a
    copy of the right-hand side held beside it is a vector more each (14.7 on 7f11814).
    """
    from ctmc import _relax, krylov
    if not _relax.compiled():
        pytest.skip("the compiled kernels are off: the system is a matrix")
    chain = parse_spec("kanban:3").chain()
    chain.stationary()                                     # imports, first-use caches
    n = chain.n_states
    res, seen = _peaks_during(monkeypatch, krylov, "_bicgstab", chain, True)
    assert res.status is ctmc.Status.SUCCESS and res.method == "bicgstab" and len(seen) >= 2
    assert seen[-1] <= 11 * 8.0 * n, f"the bound's solve peaks at {seen[-1] / (8.0 * n):.1f} vectors"


def test_the_compiled_build_frees_its_index_before_the_generator():
    r"""The compiled search's resident peak (kanban t=3, hashed: its box of 2^32 points is beyond a table)
    is the generator it returns, the transitions it kept for it and per-state arrays, not its hash index.

    Measured in a fresh process by the resident set's high-water mark (``VmHWM``, reset through
    ``/proc/self/clear_refs``: the engine's buffers are C allocations tracemalloc does not see) less the
    resident set before the build. At the peak (the generator made from the kept rows, permuted into code
    order): ``Q``'s arrays (12 bytes a stored entry, 4 a row), the kept transitions (12 bytes each: an
    int32 column, a float64 rate), their row starts (8 bytes a state), the permutation and its inverse (4
    and 4), the sorted codes (8) and 16 bytes a state of slack (pages, the Python objects): ``Q`` + 12 a
    transition + 40 a state. The hashed index (16-byte slots, 2-4 a state) and the discovery order (8 a
    state) held on through that pass exceed it.
    """
    import subprocess
    import sys
    code = r'''
import os, sys
from ctmc.models.gallery import parse_spec
parse_spec("kanban:1").chain()
def status(key):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(key))
try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    print("skip"); sys.exit()
before = status("VmRSS")
c = parse_spec("kanban:3").chain()
Q = c.Q
print(status("VmHWM") - before, Q.data.nbytes + Q.indices.nbytes + Q.indptr.nbytes, c.n_states,
      c.build_info["engine"], c.n_transitions)
'''
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    if out == ["skip"]:
        pytest.skip("/proc/self/clear_refs is not writable here")
    growth, qbytes, n, engine, transitions = int(out[0]), int(out[1]), int(out[2]), out[3], int(out[4])
    if engine != "compiled":
        pytest.skip("the compiled builder is not built")
    bound = qbytes + 12 * transitions + 40 * n
    assert growth <= bound, (f"the build's peak {growth / 1e6:.1f} MB above {bound / 1e6:.1f} MB "
                             f"(Q {qbytes / 1e6:.1f})")


def test_the_polish_holds_q_transpose_and_three_vectors(monkeypatch):
    r"""The peak of ``stationary()`` during the tail polish (cluster N=64: BiCGStab's answer is swept), from
    the start of the call (tracemalloc), is ``Q^T`` (its sweeps read its rows: 12 bytes a stored entry, 4 a
    row) and, in float64 vectors of ``8 n`` bytes: the iterate (the solve's own answer, swept in place), the
    sweep's zero right-hand side and the balance measurement's product ``x Q``, plus the masks and a
    block's temporaries: at most 4. The solve's raw answer and its clipped copy, the pinned right-hand side,
    or the balance error's vector temporaries held beside them are a vector more each (11.5 on 9058792).
    """
    chain = parse_spec("cluster:64").chain()
    chain.stationary()                                     # imports, first-use caches
    n, e = chain.n_states, chain.Q.nnz
    res, seen = _peaks_during(monkeypatch, st, "_polish", chain, True)
    assert res.status is ctmc.Status.SUCCESS and len(seen) == 1 and res.info.get("polish_sweeps", 0) > 0
    qt = 12.0 * e + 4.0 * (n + 1)
    assert seen[0] <= qt + 4 * 8.0 * n, f"the polish peaks at Q^T + {(seen[0] - qt) / (8.0 * n):.1f} vectors"


# --- the bound's return times beside the solve within 40 bytes a transition (issue 23, item 4) ------------
def _beside(monkeypatch):
    """The bound's solve ahead where the plan's rule lets it (the fixture above turns it off; two cores)."""
    monkeypatch.setattr(ahead, "AHEAD_STATES", 20_000)
    monkeypatch.setattr(ahead, "cores", lambda: 2)


def _generator_bytes(chain):
    return chain.Q.data.nbytes + chain.Q.indices.nbytes + chain.Q.indptr.nbytes


def test_bicgstab_holds_seven_vectors():
    r"""``krylov.bicgstab`` with SSOR(1) on a system read from ``Q``'s rows (the error bound's return times on
    kanban t=2: the fused kernel) allocates seven float64 vectors of the unknowns' size: the iterate, the
    residual (the half step made in it), the shadow, the direction, the two products and the preconditioned
    direction (the preconditioned half step made in it once the iterate has taken its step), and the
    shadow's zero masks (a byte an unknown). Given them (``work=``, :func:`ctmc.krylov.bicgstab_work`), it
    allocates only the masks and returns one of them. The answer is checked against a sparse LU solve of
    the same matrix (:func:`ctmc.backends.csr.masked_block`). Nine vectors on 7f11814 (no ``work=`` there).
    """
    import scipy.sparse.linalg as sla
    from ctmc import krylov
    from ctmc.backends.csr import masked_block, masked_transpose
    Q = parse_spec("kanban:2").chain().Q
    n = Q.shape[0]
    members = np.ones(n, dtype=bool)
    members[0] = False
    fill = float(-Q.diagonal().min())
    A = masked_transpose(Q, members, fill, transpose=False)
    if A is None:
        pytest.skip("the compiled kernels are off")
    b, P, norm = members.astype(float), A.ssor(), A.inf_norm()
    exact = sla.spsolve(masked_block(Q, members, fill).tocsc(), b)
    for work in (None, krylov.bicgstab_work(n)):
        (x, rep), peak = traced_peak(lambda: krylov.bicgstab(A, b, P, rtol=1e-12, norm_a=norm, work=work))
        assert rep.converged and np.allclose(x, exact, rtol=1e-8, atol=0)
        allowed = (7 if work is None else 0) * 8.0 * n + 2.25 * n + 16_384
        assert peak <= allowed, f"{peak / (8.0 * n):.2f} vectors (work given: {work is not None})"
        if work is not None:
            assert any(x is w for w in work)


def test_the_solve_and_the_bound_beside_it_hold_the_vectors_the_plan_counts(monkeypatch):
    r"""While the stationary BiCGStab runs with the bound's beside it (kanban t=3: the plan's rule lets it,
    :func:`ctmc.kernels.plan.beside_fits`), the memory traced from the start of ``stationary()`` is at most
    :data:`~ctmc.kernels.plan.BESIDE_VECTORS` float64 vectors of ``8 n`` bytes and one of masks and
    slack: each solve's seven and its right-hand side, the exit rates, both systems' int32 diagonal positions.
    ``Q^T`` (released before the solves) or a vector more of either solve exceeds it (23.5 vectors on
    7f11814); the generator and those vectors are then within 40 bytes a transition.
    """
    from ctmc import _relax, krylov
    if not _relax.compiled():
        pytest.skip("the compiled kernels are off: the systems are matrices")
    _beside(monkeypatch)
    chain = parse_spec("kanban:3").chain()
    chain.stationary()                                     # imports, first-use caches
    n = chain.n_states
    res, seen = _peaks_during(monkeypatch, krylov, "_bicgstab", chain, True, main_thread_only=True)
    assert res.status is ctmc.Status.SUCCESS and res.method == "bicgstab"
    assert res.info.get("return_time_ahead") is True
    solve = max(seen)                                      # (the other: the ahead system's set-up, b = 0)
    assert solve <= (plan.BESIDE_VECTORS + 1) * 8.0 * n, f"{solve / (8.0 * n):.2f} vectors"
    assert _generator_bytes(chain) + solve <= plan.PEAK_BYTES_PER_TRANSITION * chain.n_transitions


def test_the_peak_rule_keeps_the_bound_after_the_solve_where_both_would_not_fit(monkeypatch):
    r"""Cluster N=64 (4.9 transitions a state: a vector is 1.65 bytes a transition) where memory is short (1 GB
    available): the plan's count (the generator and 18 vectors, 45 bytes a transition) is above 40, so the bound's return times are solved
    after the solve, not beside it; measured with the rule lifted, the generator and the traced peak of the
    solve with the bound beside it are above 40 bytes a transition indeed, and with the rule below.
    On 7f11814 the thread runs there (the bound's solve is below a tenth of the available memory).
    """
    from ctmc import _relax, krylov
    if not _relax.compiled():
        pytest.skip("the compiled kernels are off: the systems are matrices")
    _beside(monkeypatch)
    monkeypatch.setattr(ahead, "available_memory", lambda: 10 ** 9)
    chain = parse_spec("cluster:64").chain()
    chain.stationary()
    n, e, T = chain.n_states, chain.Q.nnz, chain.n_transitions
    assert not plan.beside_fits(n, e, n, e, plan.BUDGET_FRACTION * 1e9)
    limit = plan.PEAK_BYTES_PER_TRANSITION * T - _generator_bytes(chain)
    solver = krylov._bicgstab
    res, seen = _peaks_during(monkeypatch, krylov, "_bicgstab", chain, True, main_thread_only=True)
    assert res.status is ctmc.Status.SUCCESS and not res.info.get("return_time_ahead")
    assert max(seen) <= limit
    monkeypatch.setattr(plan, "PEAK_BYTES_PER_TRANSITION", np.inf)
    monkeypatch.setattr(krylov, "_bicgstab", solver)
    forced, seen_beside = _peaks_during(monkeypatch, krylov, "_bicgstab", chain, True, main_thread_only=True)
    assert forced.info.get("return_time_ahead") is True
    assert max(seen_beside) > limit
    assert np.array_equal(forced.pi, res.pi)                # the bound's place changes no law


def test_structure_facts_hold_one_and_a_half_vectors_beside_q_and_its_transpose():
    r"""``structure_facts`` (the envelope of the symmetrised pattern) holds at most one and a half vectors at
    a time beside ``Q`` and ``Q^T`` (cluster N=64): the row counts (int32 row pointers, then int64 counts),
    then one int64 vector lowered by both orientations' first columns and turned into the float widths in
    place; its facts are those of the direct formula (the smallest column of each row of ``Q`` and ``Q^T``,
    written out here). Four vectors on 7f11814, two on c00b217 (a second first-column vector, the counts'
    int32 difference beside the pointers).
    """
    from ctmc.backends.csr import lowest_columns
    from ctmc.kernels.classes import closed_classes
    chain = parse_spec("cluster:64").chain()
    op = operator_for(chain, "scipy")
    support = closed_classes(op, None, limit=1)[0]
    n = op.n
    QT = op.QT                                               # held, as after the search for closed classes
    facts, peak = traced_peak(lambda: plan.structure_facts(op, support))
    assert peak <= 1.6 * 8.0 * n, f"{peak / (8.0 * n):.2f} vectors"
    Q = chain.Q
    first = np.minimum(lowest_columns(Q), lowest_columns(QT))
    w = np.where(support, np.arange(n) - first, 0).astype(float)
    R = Q - sp.diags(Q.diagonal())
    R.eliminate_zeros()
    assert facts["transitions"] == int(np.diff(R.indptr)[support].sum())
    assert facts["envelope_per_nnz"] == w.sum() / facts["transitions"] and facts["profile_flops"] == w @ w


# --- 40 bytes a transition where a state has few transitions (issue 23, item 4; cluster N=64) -------------
def test_the_peak_rule_holds_with_memory_to_spare(monkeypatch):
    r"""The bound's return times are solved beside the stationary solve only where the generator and both
    solves' vectors fit in 40 bytes a transition, however much memory is free: on cluster N=64 (4.85
    transitions a state) 40 bytes a transition are 24.3 float64 vectors of the states, the generator and the
    state codes take 10.3 and the two BiCGStab solves 7 each, so with 1 TB available the bound is solved
    after the law (the same law and bound as beside it), and its traced peak with the generator is within
    40 bytes a transition. On c00b217 the thread ran there (what it adds below 1 % of the available memory).
    """
    from ctmc import _relax
    if not _relax.compiled():
        pytest.skip("the compiled kernels are off: the systems are matrices")
    _beside(monkeypatch)
    monkeypatch.setattr(ahead, "available_memory", lambda: 10 ** 12)
    chain = parse_spec("cluster:64").chain()
    chain.stationary()                                     # imports, first-use caches
    n, e, T = chain.n_states, chain.Q.nnz, chain.n_transitions
    codes = 8.0 * n                                        # the state table's int64 codes
    assert 10.0 <= (_generator_bytes(chain) + codes) / (8.0 * n) <= 10.5
    assert (_generator_bytes(chain) + codes + 14 * 8.0 * n) > plan.PEAK_BYTES_PER_TRANSITION * T
    assert not plan.beside_fits(n, e, n, e, plan.BUDGET_FRACTION * 1e12)
    res, seen = _peaks_during(monkeypatch, st, "_polish", chain, True)
    assert res.status is ctmc.Status.SUCCESS and not res.info.get("return_time_ahead") and len(seen) == 1
    assert _generator_bytes(chain) + codes + seen[0] <= plan.PEAK_BYTES_PER_TRANSITION * T
    monkeypatch.setattr(plan, "PEAK_BYTES_PER_TRANSITION", np.inf)
    forced = chain.stationary()
    assert forced.info.get("return_time_ahead") is True
    assert np.array_equal(forced.pi, res.pi) and forced.error_bound == res.error_bound


def test_the_polish_s_balance_error_holds_no_vector(monkeypatch):
    r"""The balance error the polish measures after each sweep (cluster N=64, ``Q^T`` held for the sweeps) is
    a maximum over the states of ``|(x Q)_j| / (x_j q_j)``: ``x Q`` is made by blocks of ``Q^T``'s rows
    (:meth:`~ctmc.backends.base.Operator.apply_blocks`), a block at a time, so the measurement holds at most
    half a float64 vector of the states (tracemalloc), and gives the number of the whole product, to the bit.
    On c00b217 ``x Q`` was a vector (and its temporaries): 1.2 vectors.
    """
    from ctmc.kernels.evidence import balance_error
    chain = parse_spec("cluster:64").chain()
    chain.stationary()                                     # imports, first-use caches
    n = chain.n_states
    res, seen = _peaks_during(monkeypatch, st, "_balance", chain, False)
    assert res.status is ctmc.Status.SUCCESS and res.info.get("polish_sweeps", 0) > 0 and len(seen) >= 2
    assert max(seen[1:]) <= 0.5 * 8.0 * n, f"{max(seen[1:]) / (8.0 * n):.2f} vectors"
    op = operator_for(chain, "scipy")
    op.QT                                                   # held, as during the sweeps
    x = np.random.default_rng(5).random(n)
    x /= x.sum()
    whole = op.apply(x, transpose=True)
    assert np.array_equal(np.concatenate([b.copy() for _, b in op.apply_blocks(x, transpose=True)]), whole)
    assert balance_error(op, x) == balance_error(op, x, whole)
    op.release()                                            # Q^T x from Q's rows: one block, the same numbers
    assert balance_error(op, x) == balance_error(op, x, whole)


def test_the_slowest_exit_holds_one_vector():
    r"""The slowest-exit state of a set (the closed-class search's start, ``walk_pin``'s second start) is the
    argmax of ``-q`` on the set, made in one float64 vector (``-q``, then ``-inf`` off the set in place), not
    two (``np.where``'s operands: 2 vectors on c00b217); the state is the first of the smallest exit rate on
    the set, as a direct search finds it.
    """
    from ctmc.kernels.classes import slowest_exit
    chain = parse_spec("cluster:64").chain()
    op = operator_for(chain, "scipy")
    n = op.n
    support = np.random.default_rng(3).random(n) < 0.5
    k, peak = traced_peak(lambda: slowest_exit(op, support))
    assert peak <= 1.25 * 8.0 * n, f"{peak / (8.0 * n):.2f} vectors"
    q = -chain.Q.diagonal()
    idx = np.flatnonzero(support)
    assert k == idx[np.argmin(q[idx])]


def test_the_krylov_solve_frees_q_transpose_before_its_right_hand_side(monkeypatch):
    r"""A pinned Krylov solve reading its system from ``Q``'s rows (cluster N=64, BiCGStab with SSOR(1)) is set
    up (:meth:`~ctmc.backends.base.System.prepare`) before its right-hand side is made: the operator's ``Q^T``
    (9.3 float64 vectors of the states here), which that set-up frees, is not held while the row of ``R``
    and its masked copy are made (three vectors at most). Traced from the start of ``stationary()`` (the
    operator and its exit rates made by an earlier call): at most 2 vectors held when the row is made and 4
    at its peak. On c00b217 ``Q^T`` was freed only by the solve: 9.8 and 11.8 vectors.
    """
    from ctmc import _relax
    if not _relax.compiled():
        pytest.skip("the compiled kernels are off: the system is a matrix")
    chain = parse_spec("cluster:64").chain()
    chain.stationary()                                     # the operator, imports, first-use caches
    n = chain.n_states
    res, seen = _peaks_during(monkeypatch, st, "_row_of_R", chain, True, held=True)
    assert res.status is ctmc.Status.SUCCESS and res.method == "bicgstab" and len(seen) == 1
    held, peak = seen[0]
    assert held <= 2 * 8.0 * n and peak <= 4 * 8.0 * n, f"{held / (8.0 * n):.2f}, {peak / (8.0 * n):.2f} vectors"


def test_a_variable_s_range_is_decoded_by_blocks():
    r"""``StateTable.value_range`` over a class's rows (``structure_facts`` counts the dimensions by it) decodes
    the codes a block at a time: on cluster N=128 (597,012 states) a variable's range over every state holds
    at most half a float64 vector of the states (tracemalloc), where the whole decode (the codes of the rows,
    the quotient by the stride, the remainder, the offset) held three beside the rows (structure_facts' peak
    on c00b217: 41 bytes a transition). The ranges are those of the decoded columns (``states[name]``).
    """
    chain = parse_spec("cluster:128").chain()
    st_ = chain.states
    if st_.layout is None:
        pytest.skip("the chain's states are not codes")
    n = chain.n_states
    rows = np.arange(n)
    for name in list(st_.names)[:3]:
        got, peak = traced_peak(lambda: st_.value_range(name, rows))
        assert peak <= 0.5 * 8.0 * n, f"{name}: {peak / (8.0 * n):.2f} vectors"
        col = st_[name]                                    # the decoded column (kept from here on)
        assert got == (int(col.min()), int(col.max()))
        odd = rows[1::2]
        assert st_.value_range(name, odd) == (int(col[odd].min()), int(col[odd].max()))
    assert st_.value_range(list(st_.names)[0], rows[:0]) is None


# --- a copy of Q that only buys speed, within 40 bytes a transition (issue 23, item 4) --------------------
def test_a_copy_of_q_is_made_only_where_the_peak_stays_within_40_bytes(monkeypatch):
    r"""The copies of ``Q`` that buy speed (``Q^T`` for the polish, ``Q_XX`` in level order for the return
    times on levels: :func:`~ctmc.kernels.sweeps.copy_plentiful`) follow the bound's thread's rule
    (:func:`~ctmc.kernels.plan.peak_fits`): with 1 TB available, on tandem c=127 (3.5 transitions a state) the
    generator and the copy take 33 bytes a transition and the polish's 5 vectors of the states 11.5 more, so
    both routes read ``Q``'s rows (on a5f0500 both copied); on cluster N=64 (4.85 a state) 30.6 and 8.2, so
    the polish keeps its ``Q^T`` and, traced from the start of ``stationary()`` with the generator and the
    state codes, stays within 40 bytes a transition. Where memory is short (the copy above
    :data:`~ctmc.kernels.plan.COPY_SHARE` of the budget), no copy either.
    """
    from ctmc.kernels import sweeps
    from ctmc.kernels.sweeps import RowOrderSweeps
    monkeypatch.setattr(sweeps, "available_memory", lambda: 10 ** 12)
    for spec, fits in (("tandem:127", False), ("cluster:64", True)):
        chain = parse_spec(spec).chain()
        op = operator_for(chain, "scipy")
        n, e, T = op.n, chain.Q.nnz, chain.n_transitions
        copy = _generator_bytes(chain)
        assert sweeps.copy_plentiful(op) == fits
        # the rule, in bytes: the generator (12 a stored entry, 4 a row), the copy and the stage's vectors
        for vectors in (plan.POLISH_COPY_VECTORS, plan.LEVEL_COPY_VECTORS):
            within = 12.0 * e + 4.0 * n + copy + vectors * 8.0 * n <= plan.PEAK_BYTES_PER_TRANSITION * T
            assert sweeps.copy_plentiful(op, vectors) == within
        every = np.ones(n, dtype=bool)
        made = sweeps.ordered_sweeper(op, every, np.arange(n))
        assert isinstance(made, RowOrderSweeps) == (not sweeps.copy_plentiful(op, plan.LEVEL_COPY_VECTORS))
    assert not sweeps.copy_plentiful(op, plan.LEVEL_COPY_VECTORS)     # cluster: the level cycles' 9 don't fit
    monkeypatch.setattr(sweeps, "available_memory", lambda: 1e9)        # cluster's Q: 11.2 MB, above 1 %
    assert not sweeps.copy_plentiful(op)
    monkeypatch.setattr(sweeps, "available_memory", lambda: 10 ** 12)
    chain.stationary()                                     # imports, first-use caches
    codes = 8.0 * n
    res, seen = _peaks_during(monkeypatch, st, "_polish", chain, True)
    assert res.status is ctmc.Status.SUCCESS and res.info.get("polish_sweeps", 0) > 0
    assert _generator_bytes(chain) + codes + seen[0] <= plan.PEAK_BYTES_PER_TRANSITION * T
    assert seen[0] >= copy                                 # the polish held Q^T: the copy was made
