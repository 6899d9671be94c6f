"""The scipy backend's preconditioners and Krylov path: the symmetric Gauss-Seidel
preconditioner (split into its two triangles) against SSOR(1) by scipy's triangular
solves and against the two whole-matrix sweeps it replaces; GMRES and BiCGStab through
it against a direct solve."""
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from ctmc._relax import sweep
from ctmc.backends.base import LinearSpec
from ctmc.backends.scipy_backend import ScipyOperator, ssor1
from ctmc.results import Status


def _m_matrix(n, seed):
    """A random non-symmetric sparse M-matrix, strictly diagonally dominant by rows."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=6.0 / n, random_state=rng, data_rvs=lambda k: rng.uniform(0.1, 1.0, k))
    R = sp.csr_matrix(R - sp.diags(R.diagonal()))
    return (sp.diags(np.asarray(R.sum(axis=1)).ravel() + rng.uniform(0.01, 1.0, n)) - R).tocsr()


def _ssor_by_triangular_solves(A, v):
    """(D - U)^{-1} D (D - L)^{-1} v with scipy's sparse triangular solves."""
    lower, upper = sp.tril(A, format="csr"), sp.triu(A, format="csr")
    y = sla.spsolve_triangular(lower, v, lower=True)
    return sla.spsolve_triangular(upper, A.diagonal() * y, lower=False)


def _two_sweeps(A, v):
    """The former preconditioner: a forward and a backward Gauss-Seidel sweep on the whole matrix, from 0."""
    x = np.zeros_like(v)
    sweep(A, x, v, 1.0, "forward")
    sweep(A, x, v, 1.0, "backward")
    return x


@pytest.mark.parametrize("seed", range(3))
def test_sgs_is_ssor1_by_triangular_solves_and_the_two_sweeps(seed):
    A = _m_matrix(400, seed)
    v = np.random.default_rng(seed + 7).uniform(-1, 1, 400)
    P = ssor1(A)
    ref = _ssor_by_triangular_solves(A, v)
    assert np.allclose(P(v), ref, rtol=1e-12, atol=0)
    assert np.allclose(P(v), _two_sweeps(A, v), rtol=1e-12, atol=0)
    assert np.array_equal(P(v), P(v.copy())) and P(v) is not P(v)      # a new array each call


def test_sgs_takes_mixed_index_types_unsorted_rows_and_a_zero_diagonal():
    A = _m_matrix(200, 11).tolil()
    A[5, :] = 0.0                      # a zero row: its unknown stays 0, as in the sweeps
    B = sp.csr_matrix(A)
    indices, data = B.indices.copy(), B.data.copy()
    perm = np.random.default_rng(1).permutation   # shuffle the entries within each row
    for i in range(B.shape[0]):
        s, e = B.indptr[i], B.indptr[i + 1]
        p = s + perm(e - s)
        indices[s:e], data[s:e] = B.indices[p], B.data[p]
    A = sp.csr_matrix((data, indices.astype(np.int32), B.indptr.astype(np.int32)), shape=B.shape)
    A.indptr = A.indptr.astype(np.int64)          # int32 indices, int64 pointers
    A.has_sorted_indices = False
    assert A.indices.dtype != A.indptr.dtype and not np.array_equal(A.indices, B.indices)
    v = np.random.default_rng(3).uniform(0, 1, 200)
    x = ssor1(A)(v)
    assert x[5] == 0.0
    assert (A != B).nnz == 0          # the set-up sorts its own copy: the caller's matrix is unchanged
    assert np.allclose(x, _two_sweeps(B, v), rtol=1e-12, atol=0)


@pytest.mark.parametrize("kind", ["gmres", "bicgstab"])
@pytest.mark.parametrize("pc", ["sgs", "ilu", "jacobi", "none"])
def test_krylov_solves_through_each_preconditioner_match_a_direct_solve(kind, pc):
    n = 300
    Q = _m_matrix(n, 5)
    Q = sp.csr_matrix(-(Q - sp.diags(Q.diagonal())))          # the off-diagonal rates
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()
    op = ScipyOperator(Q)
    members = np.ones(n, bool)
    members[0] = False
    spec = LinearSpec(kind=kind, ordering="auto", preconditioner=pc, rtol=1e-13, maxiter=5000, restart=30)
    sysm = op.system(members, 0.5, spec)
    b = np.random.default_rng(2).uniform(0, 1, n)
    for transpose in (False, True):
        x, rep = sysm.solve(b, transpose=transpose)
        M = (0.5 * sp.identity(n - 1) - Q[1:, 1:]).toarray()
        exact = np.linalg.solve(M.T if transpose else M, b[1:])
        assert rep.status is Status.SUCCESS and rep.reason == f"{kind} converged in {rep.iterations} iterations"
        assert x[0] == 0.0 and np.max(np.abs(x[1:] - exact) / np.abs(exact)) < 1e-9
