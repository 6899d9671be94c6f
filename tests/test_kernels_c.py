"""The compiled Krylov kernels (ctmc._kernels) against their fallbacks and against independent answers.

Each kernel is checked three ways: the compiled version against the fallback
(the same algorithm: equal to round-off), both against an independent answer
(scipy's triangular solves and products, the definition of the projection,
LU), and the compiled one on 1 and 2 threads (equal to the last bit: fixed
blocks, fixed-order sums). The fallback tests force the fallback path, so
they run where the extension is built too.
"""
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from ctmc import _relax
from ctmc.backends.scipy_backend import ssor1
from ctmc.krylov import dcgs2_project, dcgs2_update, gmres, orthogonalise

@pytest.fixture
def fallback():
    """Run with the fallbacks (numpy, pyamg, scipy), restoring the choice after."""
    before = _relax.use_compiled(False)
    yield
    _relax.use_compiled(before)


@pytest.fixture
def ext():
    """The compiled extension (skip where it is not built), on its default threads after the test."""
    mod = pytest.importorskip("ctmc._kernels")
    before, threads = _relax.use_compiled(True), _relax.threads()
    yield mod
    _relax.use_compiled(before)
    _relax.set_threads(threads)


def _matrix(n, seed, zero_row=None, missing_diagonal=None, index=np.int32, shuffle=False):
    """A random non-symmetric sparse M-matrix; optionally a zero row, a row without a stored diagonal,
    64-bit indices, rows in random order (unsorted)."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=min(1.0, 6.0 / n), random_state=rng,
                  data_rvs=lambda k: rng.uniform(0.1, 1.0, k)).tolil()
    R.setdiag(0.0)
    A = (sp.diags(np.asarray(R.sum(axis=1)).ravel() + rng.uniform(0.01, 1.0, n)) - R).tolil()
    if zero_row is not None:
        A[zero_row, :] = 0.0
    A = sp.csr_matrix(A)
    if missing_diagonal is not None:
        A = A.tolil()
        A[missing_diagonal, missing_diagonal] = 0.0
        A = sp.csr_matrix(A)
        A.eliminate_zeros()
    A = sp.csr_matrix((A.data, A.indices.astype(index), A.indptr.astype(index)), shape=A.shape)
    if shuffle:
        indices, data = A.indices.copy(), A.data.copy()
        for i in range(n):
            s, e = A.indptr[i], A.indptr[i + 1]
            p = s + rng.permutation(e - s)
            indices[s:e], data[s:e] = A.indices[p], A.data[p]
        A = sp.csr_matrix((data, indices, A.indptr), shape=A.shape)
        A.has_sorted_indices = False
    return A


def _ssor_by_scipy(A, v):
    """(D - U)^{-1} D (D - L)^{-1} v by scipy's sparse triangular solves (nonzero diagonal)."""
    lower, upper = sp.tril(A, format="csr"), sp.triu(A, format="csr")
    y = sla.spsolve_triangular(lower, v, lower=True)
    return sla.spsolve_triangular(upper, A.diagonal() * y, lower=False)


# --- SSOR(1) ---------------------------------------------------------------------------------

@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("shuffle", [False, True])
def test_compiled_ssor_equals_the_pyamg_sweeps_and_scipy_triangular_solves(ext, index, shuffle):
    A = _matrix(500, 1, index=index, shuffle=shuffle)
    v = np.random.default_rng(2).uniform(-1, 1, 500)
    compiled = ssor1(A)(v)
    _relax.use_compiled(False)
    fallback = ssor1(A)(v)
    assert np.allclose(compiled, fallback, rtol=1e-14, atol=0)
    assert np.allclose(compiled, _ssor_by_scipy(A.sorted_indices(), v), rtol=1e-12, atol=0)


def test_compiled_ssor_leaves_zero_and_missing_diagonal_unknowns_at_zero_as_the_sweeps(ext):
    A = _matrix(300, 4, zero_row=7, missing_diagonal=11)
    assert A[11, 11] == 0 and A[7].nnz == 0 and A[11].nnz > 0
    v = np.random.default_rng(5).uniform(0, 1, 300)
    compiled = ssor1(A)(v)
    _relax.use_compiled(False)
    fallback = ssor1(A)(v)
    assert compiled[7] == 0.0 and compiled[11] == 0.0
    assert np.allclose(compiled, fallback, rtol=1e-14, atol=0)


def test_compiled_ssor_shares_the_matrix_and_sorts_a_copy_only_when_it_must(ext):
    A = _matrix(200, 6)
    data = A.data.copy()
    v = np.ones(200)
    x = ssor1(A)(v)
    B = _matrix(200, 6, shuffle=True)
    before = (B.indices.copy(), B.data.copy())
    y = ssor1(B)(v)
    assert np.array_equal(A.data, data)
    assert np.array_equal(B.indices, before[0]) and np.array_equal(B.data, before[1])   # untouched
    assert np.allclose(x, y, rtol=1e-14, atol=0)


def test_fallback_ssor_matches_scipy_triangular_solves(fallback):
    A = _matrix(400, 8, shuffle=True)
    v = np.random.default_rng(9).uniform(-1, 1, 400)
    assert np.allclose(ssor1(A)(v), _ssor_by_scipy(A.sorted_indices(), v), rtol=1e-12, atol=0)


# --- SSOR(1) with the product after it (Eisenstat) --------------------------------------------

@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("shuffle", [False, True])
def test_ssor_with_product_is_ssor_to_the_bit_and_a_times_it(ext, index, shuffle):
    """x = P v is ssor's to the last bit; y = A x (from the lower triangle: A x = D x1 - L x) equals scipy's
    product to round-off, also on rows with a zero or missing diagonal (taken whole)."""
    A = _matrix(600, 13, zero_row=4, missing_diagonal=10, index=index, shuffle=shuffle)
    v = np.random.default_rng(3).uniform(-1, 1, 600)
    P = ssor1(A)
    source, f = P.with_product
    assert source is A
    x, y = np.empty(600), np.empty(600)
    assert f(v, x, y) is y
    assert np.array_equal(x, P(v))
    scale = np.abs(A).sum(axis=1).max() * np.abs(x).max()
    assert np.abs(y - A @ x).max() <= 1e-14 * scale


def test_ssor_with_product_does_not_depend_on_the_thread_count(ext):
    A = _matrix(80_000, 19)
    v = np.random.default_rng(6).uniform(-1, 1, 80_000)
    f = ssor1(A).with_product[1]
    got = []
    for t in (1, 2):
        _relax.set_threads(t)
        x, y = np.empty(80_000), np.empty(80_000)
        f(v, x, y)
        got.append((x, y))
    assert np.array_equal(got[0][0], got[1][0]) and np.array_equal(got[0][1], got[1][1])


def test_gmres_takes_the_fused_product_only_for_the_preconditioners_own_matrix(ext):
    """With the matrix itself as the product, GMRES runs the fused kernel; with a function (or another
    matrix) the two kernels; the answers agree with LU either way, to the same tolerance."""
    from ctmc.krylov import _fused
    A, b = _pinned_stationary_system(1500, 5)
    P = ssor1(A)
    assert _fused(A, P) is P.with_product[1]
    assert _fused(A.dot, P) is None and _fused(A.copy(), P) is None and _fused(A, None) is None
    lu = sla.spsolve(A.tocsc(), b)
    norm_a = float(abs(A).sum(axis=1).max())
    for mv in (A, _relax.spmv(A)):
        x, rep = gmres(mv, b, P, rtol=1e-13, restart=20, maxiter=4000, norm_a=norm_a)
        assert rep.converged and rep.backward_error <= 1e-13
        assert np.max(np.abs(x - lu) / np.abs(lu)) < 1e-8


# --- block SSOR(1) ---------------------------------------------------------------------------

def _block_ssor_dense(A, bounds):
    """The block SSOR(1) operator as a dense matrix, built from its definition: with A_B the block diagonal
    part of A on the row blocks [bounds[c], bounds[c+1]) and A_o = A - A_B, P = triu(A_B)^-1 (D - A_o) tril(A_B)^-1."""
    M = A.toarray()
    blk = np.searchsorted(bounds, np.arange(M.shape[0]), side="right")
    AB = np.where(blk[:, None] == blk[None, :], M, 0.0)
    Ao, D = M - AB, np.diag(np.diag(M))
    return np.linalg.solve(np.triu(AB), (D - Ao) @ np.linalg.inv(np.tril(AB)))


@pytest.mark.parametrize("blocks", [1, 2, 3, 7])
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("kernels", ["compiled", "fallback"])
def test_block_ssor_is_its_dense_definition(blocks, index, kernels):
    """Compiled and fallback, unsorted rows, int32/int64: P v against the dense construction of the same
    operator; one block is SSOR(1) itself (scipy's triangular solves)."""
    if kernels == "compiled":
        pytest.importorskip("ctmc._kernels")
    before = _relax.use_compiled(kernels == "compiled")
    try:
        A = _matrix(240, 21, index=index, shuffle=True)
        v = np.random.default_rng(5).uniform(-1, 1, 240)
        P = _relax.symmetric_gauss_seidel(A, blocks=blocks)
        got = P(v)
        out = np.full(240, np.nan)
        assert P(v, out=out) is out and np.array_equal(out, got)       # into a given buffer: the same numbers
    finally:
        _relax.use_compiled(before)
    bounds = _relax.block_bounds(A.sorted_indices().indptr, blocks)
    assert bounds[0] == 0 and bounds[-1] == 240 and np.all(np.diff(bounds) > 0)
    ref = _block_ssor_dense(A, bounds) @ v
    assert np.allclose(got, ref, rtol=1e-11, atol=1e-13 * np.abs(ref).max())
    if blocks == 1:
        assert np.allclose(got, _ssor_by_scipy(A.sorted_indices(), v), rtol=1e-12, atol=0)


def test_compiled_block_ssor_equals_the_fallback_and_does_not_depend_on_the_thread_count(ext):
    n = 80_000                       # above the size where the kernels split the work
    A = _matrix(n, 17, zero_row=5, missing_diagonal=9)
    v = np.random.default_rng(4).uniform(-1, 1, n)
    _relax.set_threads(1)
    one = _relax.symmetric_gauss_seidel(A, blocks=16)(v)
    _relax.set_threads(2)
    two = _relax.symmetric_gauss_seidel(A, blocks=16)(v)
    assert np.array_equal(one, two)
    assert one[5] == 0.0 and one[9] == 0.0                       # a zero diagonal leaves its unknown at 0
    _relax.use_compiled(False)
    fb = _relax.symmetric_gauss_seidel(A, blocks=16)(v)
    assert np.allclose(one, fb, rtol=1e-12, atol=1e-14 * np.abs(fb).max())
    # a different operator than SSOR(1) (the couplings between blocks are lagged), not a copy of it
    assert not np.allclose(one, _relax.symmetric_gauss_seidel(A, blocks=1)(v), rtol=1e-6)


def test_block_ssor_rejects_bad_blocks_and_bounds(ext):
    A = _matrix(50, 3)
    with pytest.raises(ValueError, match="blocks"):
        _relax.symmetric_gauss_seidel(A, blocks=0)
    S = _relax._canonical(A)
    dpos = np.empty(50, S.indptr.dtype)
    ext.ssor_setup(S.indptr, S.indices, dpos)
    v, out, scratch = np.ones(50), np.empty(50), np.empty(50)
    with pytest.raises(ValueError, match="bounds"):
        ext.bssor(S.indptr, S.indices, dpos, np.array([0, 30, 20, 50], S.indptr.dtype), S.data, v, out, scratch)
    with pytest.raises(ValueError, match="bounds"):
        ext.bssor(S.indptr, S.indices, dpos, np.array([0, 49], S.indptr.dtype), S.data, v, out, scratch)
    with pytest.raises(ValueError, match="different"):
        ext.bssor(S.indptr, S.indices, dpos, np.array([0, 50], S.indptr.dtype), S.data, v, v, scratch)


def test_the_default_ssor_is_sequential_unless_the_rule_says_blocks():
    """symmetric_gauss_seidel(A) is the operator of blocks=ssor_blocks(n)."""
    A = _matrix(300, 4)
    v = np.random.default_rng(2).uniform(-1, 1, 300)
    want = _relax.symmetric_gauss_seidel(A, blocks=_relax.ssor_blocks(300))(v)
    assert np.array_equal(_relax.symmetric_gauss_seidel(A)(v), want)


# --- writing into given buffers ---------------------------------------------------------------

@pytest.mark.parametrize("kernels", ["compiled", "fallback"])
def test_kernels_write_into_the_given_buffer_the_numbers_they_return(kernels):
    before = _relax.use_compiled(kernels == "compiled")
    try:
        A = _matrix(500, 6)
        v = np.random.default_rng(8).uniform(-1, 1, 500)
        for f in (_relax.spmv(A), _relax.symmetric_gauss_seidel(A)):
            out = np.full(500, np.nan)
            assert f(v, out=out) is out and np.array_equal(out, f(v))
        assert np.array_equal(_relax.spmv(A)(v), A @ v)
    finally:
        _relax.use_compiled(before)
    g = _relax.into(lambda x: 3.0 * x)                  # a plain function: its result copied in
    out = np.empty(500)
    assert g(v, out) is out and np.array_equal(out, 3.0 * v) and np.array_equal(g(v), 3.0 * v)


# --- products ---------------------------------------------------------------------------------

@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_compiled_spmv_is_scipys_product_on_any_thread_count(ext, index):
    n = 80_000                       # above the size where the kernels split the rows
    A = _matrix(n, 3, index=index)
    v = np.random.default_rng(1).uniform(-1, 1, n)
    _relax.set_threads(1)
    one = _relax.spmv(A)(v)
    _relax.set_threads(2)
    two = _relax.spmv(A)(v)
    assert np.array_equal(one, two)
    assert np.allclose(one, A @ v, rtol=1e-13, atol=1e-13 * np.abs(A).sum(axis=1).max())


def test_compiled_product_is_scipys_to_the_bit_and_leaves_other_operands_to_scipy(ext):
    """The residual checks' product (``ScipyOperator.apply``): the same sums in the same order as scipy's."""
    A = _matrix(5000, 12)
    x = np.random.default_rng(3).uniform(0, 1, 5000)
    assert np.array_equal(_relax.product(A, x), A @ x)
    assert np.array_equal(_relax.product(A.T.tocsr(), x), A.T.tocsr() @ x)
    z = x + 1j * x                                           # complex: scipy's product, not a cast
    assert np.array_equal(_relax.product(A, z), A @ z) and np.array_equal(_relax.spmv(A)(z), A @ z)
    X = np.stack([x, 2 * x], 1)
    assert np.array_equal(_relax.product(A, X), A @ X)
    B = sp.csr_matrix((A.data, A.indices.astype(np.int64), A.indptr), shape=A.shape)   # mixed index types
    assert np.array_equal(_relax.product(B, x), A @ x)


def test_fallback_spmv_is_the_matrix_product(fallback):
    A = _matrix(300, 2)
    v = np.arange(300.0)
    assert np.array_equal(_relax.spmv(A)(v), A @ v)


# --- Gram-Schmidt -----------------------------------------------------------------------------

def _basis(n, k, seed):
    rng = np.random.default_rng(seed)
    V = np.zeros((k + 2, n))
    V[:k] = np.linalg.qr(rng.standard_normal((n, k)))[0].T
    return V, rng.standard_normal(n)


@pytest.mark.parametrize("n", [13, 4096, 70_001])        # a partial block; one block; many, threaded
def test_compiled_cgs2_equals_numpy_cgs2_and_projects_out_the_basis(ext, n):
    k = 9
    V, w = _basis(n, k, n)
    j = k - 1
    ref = w - V[:k].T @ (V[:k] @ w)             # the projection, from its definition (V orthonormal)
    wn = w.copy()
    h_np, norm_np = orthogonalise(V, j, wn)
    wc = w.copy()
    h_c, norm_c = orthogonalise(V, j, wc, ext)
    assert np.allclose(h_c, h_np, rtol=1e-13, atol=1e-13 * np.linalg.norm(w))
    assert norm_c == pytest.approx(norm_np, rel=1e-13)
    assert np.allclose(wc, wn, rtol=0, atol=1e-13 * np.linalg.norm(w))
    assert np.allclose(wc, ref, rtol=0, atol=1e-12 * np.linalg.norm(w))
    assert np.allclose(h_c, V[:k] @ w, rtol=1e-12, atol=1e-13 * np.linalg.norm(w))
    assert np.abs(V[:k] @ wc).max() <= 1e-14 * np.linalg.norm(w)      # orthogonal to round-off
    assert norm_c == pytest.approx(np.linalg.norm(wc), rel=1e-14)


def test_compiled_cgs2_does_not_depend_on_the_thread_count(ext):
    V, w = _basis(100_003, 13, 3)
    out = []
    for t in (1, 2, 3):
        _relax.set_threads(t)
        x = w.copy()
        h, norm = orthogonalise(V, 12, x, ext)
        out.append((h, norm, x))
    for h, norm, x in out[1:]:
        assert np.array_equal(h, out[0][0]) and norm == out[0][1] and np.array_equal(x, out[0][2])


@pytest.mark.parametrize("n", [13, 70_001])
def test_compiled_dcgs2_passes_equal_numpys_and_the_definitions(ext, n):
    k = 9
    V, z = _basis(n, k + 1, n + 1)
    V[k] += 1e-9 * V[0]                               # a pending vector that needs its second pass
    V[k] /= np.linalg.norm(V[k])
    outs = []
    for e in (None, ext):
        for t in ((1, 2) if e is not None else (1,)):
            _relax.set_threads(t)
            W, w = V.copy(), z.copy()
            s, t_, vv, vz = dcgs2_project(W, k, w, e)
            alpha = float(np.sqrt(vv - s @ s))
            tau = (vz - s @ t_) / alpha
            norm2 = dcgs2_update(W, k, w, s, t_, alpha, tau, e)
            outs.append((s, t_, vv, vz, norm2, W[k].copy(), w))
    s, t_, vv, vz, norm2, q, u = outs[0]
    assert np.allclose(s, V[:k] @ V[k], rtol=1e-12, atol=1e-15) and np.allclose(t_, V[:k] @ z, rtol=1e-12, atol=1e-13)
    assert np.abs(V[:k] @ q).max() < 1e-14 and np.linalg.norm(q) == pytest.approx(1.0, abs=1e-14)
    assert np.abs(np.vstack([V[:k], q]) @ u).max() < 1e-13 * np.linalg.norm(z)
    assert norm2 == pytest.approx(u @ u, rel=1e-13)
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            assert np.allclose(a, b, rtol=1e-13, atol=1e-14 * np.linalg.norm(z))
    assert all(np.array_equal(a, b) for a, b in zip(outs[1], outs[2]))   # 1 and 2 threads: to the bit


def test_compiled_combination_is_the_basis_times_the_coefficients(ext):
    V, _ = _basis(70_001, 6, 4)
    y = np.random.default_rng(0).standard_normal(5)
    out = np.empty(V.shape[1])
    ext.combine(V, 5, y, out)
    assert np.allclose(out, y @ V[:5], rtol=0, atol=1e-14 * np.abs(y).sum())


def test_compiled_kernels_reject_wrong_shapes_and_types(ext):
    V, w = _basis(100, 3, 1)
    with pytest.raises(ValueError):
        ext.cgs2(V, V.shape[0], w, np.empty(10))          # j beyond the basis
    with pytest.raises(TypeError):
        ext.cgs2(V.astype(np.float32), 1, w, np.empty(10))
    with pytest.raises(ValueError):
        ext.cgs2(V[:, ::2], 1, w[::2].copy(), np.empty(10))  # not contiguous


# --- GMRES, compiled and not, against LU ------------------------------------------------------

def _pinned_stationary_system(n, seed):
    """A random irreducible generator's pinned stationary system ``A x = b`` (the scipy backend's shape)."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=4.0 / n, random_state=rng, data_rvs=lambda k: rng.uniform(0.1, 1.0, k)).tolil()
    for i in range(n):                                    # a cycle: irreducible
        R[i, (i + 1) % n] = rng.uniform(0.1, 1.0)
    R.setdiag(0.0)
    R = sp.csr_matrix(R)
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    QT = Q.T.tocsr()
    return (-QT[1:, 1:]).tocsr(), QT[1:, 0].toarray().ravel()


@pytest.mark.parametrize("seed", range(3))
def test_gmres_compiled_and_fallback_agree_with_lu(seed):
    A, b = _pinned_stationary_system(2000, seed)
    lu = sla.spsolve(A.tocsc(), b)
    norm_a = float(abs(A).sum(axis=1).max())
    answers = {}
    for on in (False, True):
        before = _relax.use_compiled(on)
        try:
            x, rep = gmres(A, b, ssor1(A), rtol=1e-13, restart=20, maxiter=4000, norm_a=norm_a)
        finally:
            _relax.use_compiled(before)
        assert rep.converged and rep.backward_error <= 1e-13
        assert np.max(np.abs(x - lu) / np.abs(lu)) < 1e-8
        answers[on] = (x, rep.iterations)
    if _relax.extension() is not None:
        assert abs(answers[True][1] - answers[False][1]) <= 1
        assert np.max(np.abs(answers[True][0] - answers[False][0]) / np.abs(lu)) < 1e-10


def test_the_default_stationary_solve_is_the_same_with_and_without_the_kernels():
    import ctmc
    from ctmc.models.gallery import parse_spec
    chain = parse_spec("kanban:2").chain()
    before = _relax.use_compiled(False)
    try:
        ref = chain.stationary()
    finally:
        _relax.use_compiled(before)
    res = chain.stationary()
    assert res.status is ref.status is ctmc.Status.SUCCESS
    assert np.allclose(res.pi, ref.pi, rtol=1e-9, atol=0)
    assert res.error_bound <= 10 * ref.error_bound + 1e-15


def test_without_the_extension_everything_runs_on_the_fallbacks():
    """As on a machine without a compiler: ctmc._kernels cannot be imported; a default stationary solve
    (GMRES + SSOR(1) + the products) still runs, on the fallbacks, and finds the birth-death law (L1)."""
    import subprocess
    import sys
    code = (
        "import sys; sys.modules['ctmc._kernels'] = None\n"
        "import numpy as np, scipy.sparse as sp, ctmc\n"
        "from ctmc import _relax\n"
        "assert _relax.extension() is None and not _relax.compiled() and _relax.threads() == 1\n"
        "n = 300; up, down = np.full(n - 1, 1.0), np.full(n - 1, 1.25)\n"
        "Q = sp.diags([up, down], [1, -1]).tolil(); Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())\n"
        "res = ctmc.CTMC(sp.csr_matrix(Q)).stationary('gmres')\n"
        "exact = 0.8 ** np.arange(n); exact /= exact.sum()\n"
        "assert res.status is ctmc.Status.SUCCESS, res.status\n"
        "assert np.abs(res.pi - exact).sum() < 1e-9 and res.error_bound < 1e-6\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_graph_kernels_refuse_rows_beyond_the_stored_entries(ext, dtype):
    """``lowcols`` (and the graph kernels sharing its check) and ``scc`` checked the column indices over the
    stored entries but walked the rows to ``indptr[-1]``: an ``indptr`` whose last entry is beyond them read
    and wrote out of bounds (a segmentation fault). Refused now, before any work."""
    ip = np.array([0, 2, 4, 50_000_000], dtype=dtype)
    ix = np.array([0, 1, 0, 1, 1, 2], dtype=dtype)
    d = np.array([-1.0, 1, 1, -2, 1, -1])
    for transpose in (False, True):
        with pytest.raises(ValueError, match=r"indptr\[-1\] beyond"):
            ext.lowcols(ip, ix, d, np.arange(3, dtype=np.int64), transpose)
    with pytest.raises(ValueError, match=r"indptr\[-1\] beyond"):
        ext.scc(ip, ix, None, np.zeros(3, dtype=dtype), np.zeros(3, dtype=np.uint8))
    good = ip.copy()
    good[-1] = 6                                                   # the same rows, in range: accepted
    low = np.arange(3, dtype=np.int64)
    ext.lowcols(good, ix, d, low, False)
    assert low.tolist() == [0, 0, 1]


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("bad", [-1, 3])
def test_listed_row_kernels_refuse_a_row_out_of_range(ext, dtype, bad):
    """``gs_rows`` and ``spmv_rows`` read the rows they are given as they are (int32 or int64): one check of
    the listed rows (``rows_out_of_range``) refuses a row below 0 or beyond the last before any work, and
    the rows in range give the product over those rows."""
    A = sp.csr_matrix(np.array([[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]))
    x = np.array([1.0, 2.0, 3.0])
    rows = np.array([2, bad, 0], dtype=dtype)
    with pytest.raises(ValueError, match="row number out of range"):
        ext.gs_rows(A.indptr, A.indices, A.data, x.copy(), np.zeros(3), rows, 1.0, False, True)
    with pytest.raises(ValueError, match="row number out of range"):
        ext.spmv_rows(A.indptr, A.indices, A.data, x, rows, np.empty(3))
    good, out = np.array([2, 0], dtype=dtype), np.empty(2)
    ext.spmv_rows(A.indptr, A.indices, A.data, x, good, out)
    assert out.tolist() == (A @ x)[[2, 0]].tolist()
