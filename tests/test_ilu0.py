"""ILU(0) of the pinned system read from Q's rows (ctmc/_kernels_ilu.h, ``MaskedTranspose.ilu0``): the factor
against a dense ILU(0) on Q's pattern written out in numpy, its applications to M, to A = M^T and with the
fused product against dense solves with that factor, and stationary solves through it against GTH."""
import numpy as np
import pytest
import scipy.sparse as sp

from ctmc.backends.csr import masked_transpose


def _generator(n, seed, wide=False):
    """A random generator in sorted CSR, every diagonal stored, some stored zero rates."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=0.12, random_state=rng, format="coo")
    keep = R.row != R.col
    rows, cols, rates = R.row[keep], R.col[keep], R.data[keep] * 3 + 0.05
    rates = np.where(rng.random(rates.size) < 0.05, 0.0, rates)
    ring = np.arange(n)                                  # a ring keeps the chain irreducible
    rows, cols = np.r_[rows, ring], np.r_[cols, (ring + 1) % n]
    rates = np.r_[rates, rng.uniform(0.1, 1.0, n)]
    R = sp.csr_matrix((rates, (rows, cols)), shape=(n, n))
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    Q.sort_indices()
    if wide:
        Q.indices, Q.indptr = Q.indices.astype(np.int64), Q.indptr.astype(np.int64)
    return Q


def _dense_ilu0(Q, members, fill):
    """ILU(0) of masked(-Q) on Q's stored pattern (and the diagonal), textbook IKJ on a dense array:
    (L unit lower, U upper) with L U equal to the matrix on the pattern."""
    n = Q.shape[0]
    M = -Q.toarray()
    M[~members, :] = 0.0
    M[:, ~members] = 0.0
    out = np.flatnonzero(~members)
    M[out, out] = fill
    S = Q.toarray() != 0
    S |= sp.csr_matrix((np.ones(Q.nnz), Q.indices, Q.indptr), shape=Q.shape).toarray() != 0
    S |= np.eye(n, dtype=bool)
    a = M.copy()
    for i in range(n):
        for k in range(i):
            if not S[i, k]:
                continue
            a[i, k] /= a[k, k]
            for j in range(k + 1, n):
                if S[i, j] and S[k, j]:
                    a[i, j] -= a[i, k] * a[k, j]
    L, U = np.tril(a, -1) + np.eye(n), np.triu(a)
    return M, L, U, S


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("left_out", [(), (0,), (7, 29), (1, 2, 30, 39)])
@pytest.mark.parametrize("wide", [False, True])
def test_ilu0_from_q_rows_is_the_dense_ilu0(seed, left_out, wide):
    n, fill = 40, 3.5
    Q = _generator(n, seed, wide)
    members = np.ones(n, dtype=bool)
    members[list(left_out)] = False
    A = masked_transpose(Q, members, fill)
    if A is None:
        pytest.skip("the compiled kernels are off")
    M, L, U, S = _dense_ilu0(Q, members, fill)
    LU = L @ U
    assert np.allclose(LU[S], M[S], rtol=0, atol=1e-12 * np.abs(M).max())   # the reference is an ILU(0)
    assert not np.allclose(LU, M)                                             # ... and not exact
    v = np.random.default_rng(seed + 50).standard_normal(n)
    scale = np.abs(np.linalg.solve(LU.T, v)).max()
    P = A.ilu0()
    x = P(v)
    np.testing.assert_allclose(x, np.linalg.solve(LU.T, v), rtol=0, atol=1e-12 * scale)
    xf, yf = np.empty(n), np.empty(n)
    assert P.with_product[0] is A
    assert P.with_product[1](v, xf, yf) is yf
    assert np.array_equal(xf, x)                                      # the fused kernel's x is the plain one's
    np.testing.assert_allclose(yf, M.T @ xf, rtol=0, atol=1e-12 * np.abs(M).sum(axis=0).max() * scale)
    B = masked_transpose(Q, members, fill, transpose=False)
    xm = B.ilu0()(v)
    np.testing.assert_allclose(xm, np.linalg.solve(LU, v), rtol=0,
                               atol=1e-12 * np.abs(np.linalg.solve(LU, v)).max())


def test_ilu0_refuses_a_matrix_with_a_pivot_that_is_not_positive():
    """A kept state with no exit (a zero diagonal in M): no ILU(0) (None), so SSOR(1) serves instead."""
    Q = _generator(30, 3).tolil()
    Q[4, :] = 0.0
    Q[4, 4] = 0.0
    Q = sp.csr_matrix(Q)
    Q.sort_indices()
    members = np.ones(30, dtype=bool)
    members[0] = False
    A = masked_transpose(Q, members, 2.0)
    if A is None:
        pytest.skip("the compiled kernels are off")
    assert A.ilu0() is None


@pytest.mark.parametrize("kind", ["gmres", "bicgstab"])
@pytest.mark.parametrize("seed", range(3))
def test_stationary_solves_through_ilu0_match_gth(kind, seed):
    import ctmc
    if masked_transpose(_generator(5, 0), np.ones(5, dtype=bool), 1.0) is None:
        pytest.skip("the compiled kernels are off")
    Q = _generator(300, seed)
    chain = ctmc.CTMC(Q)
    ref = chain.stationary("gth").pi
    res = chain.stationary(kind, preconditioner="ilu0", tol=1e-13)
    assert res.info["preconditioner"] == "ilu0"                # read from Q's rows (compiled kernels on)
    assert res.status.value == "success"
    np.testing.assert_allclose(res.pi, ref, rtol=1e-9, atol=0)
    assert np.abs(res.pi - ref).sum() <= res.error_bound                 # the proven bound holds
