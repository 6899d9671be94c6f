"""A Krylov system of all states but a few runs on the masked generator (``csr.masked_block``), not on
an extracted principal block: the same matrix on the members, decoupled elsewhere; the solves against
dense ones."""
import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

import ctmc
from ctmc.backends import operator_for
from ctmc.backends.base import LinearSpec
from ctmc.backends.csr import masked_block, principal_block


def _generator(n, seed, density=0.4, absorbing=()):
    rng = np.random.default_rng(seed)
    Q = np.where(rng.uniform(size=(n, n)) < density, 10.0 ** rng.uniform(-2, 2, (n, n)), 0.0)
    Q[np.arange(n), (np.arange(n) + 1) % n] += 0.5              # a ring: irreducible
    for a in absorbing:
        Q[a] = 0.0
    np.fill_diagonal(Q, 0.0)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return Q


@pytest.mark.parametrize("left_out", [[0], [7], [3, 11], [0, 5, 19]])
def test_the_masked_block_is_the_principal_block_on_the_members_and_decoupled_elsewhere(left_out):
    Q = _generator(20, len(left_out) + left_out[-1])
    members = np.ones(20, dtype=bool)
    members[left_out] = False
    for A in (sp.csr_matrix(Q), sp.csr_matrix(Q.T)):
        M = masked_block(A, members, 4.5).toarray()
        dense = A.toarray()
        assert np.array_equal(M[np.ix_(members, members)], -dense[np.ix_(members, members)])
        block = principal_block(A, members, -np.diag(dense)[members]).toarray()
        assert np.array_equal(M[np.ix_(members, members)], block)
        out = ~members
        assert np.array_equal(M[out], 4.5 * np.eye(20)[out]) and np.array_equal(M[:, out], 4.5 * np.eye(20)[:, out])
    # a left-out state storing no diagonal entry (absorbing, its row empty): no masked block
    Q = _generator(20, 1, absorbing=[4])
    members = np.ones(20, dtype=bool)
    members[4] = False
    assert masked_block(sp.csr_matrix(Q), members, 1.0) is None


@pytest.mark.parametrize("kind,pre", [("gmres", "sgs"), ("bicgstab", "sgs"), ("gmres", "jacobi"), ("gmres", "ilu")])
@pytest.mark.parametrize("left_out,absorbing", [([6], []), ([2, 9, 30], []), ([4], [4]), (list(range(20)), [])])
def test_a_system_of_nearly_every_state_solves_as_the_dense_block(kind, pre, left_out, absorbing):
    """Masked (a few states left out), extracted (many left out, ILU, or a left-out state without a
    stored diagonal entry): the same answers as the dense solves of M and M^T, zero off the members
    whatever the right-hand side holds there, one column or several."""
    n = 40
    Q = _generator(n, 3, density=0.15, absorbing=absorbing)
    op = operator_for(ctmc.CTMC(Q), "scipy")
    members = np.ones(n, dtype=bool)
    members[left_out] = False
    M = -Q[np.ix_(members, members)]
    spec = LinearSpec(kind=kind, preconditioner=pre, rtol=1e-13, maxiter=500, restart=60)
    sysm = op.system(members, 0.0, spec, {})
    rng = np.random.default_rng(0)
    b = rng.uniform(1, 2, (n, 2))
    for transpose in (False, True):
        x, rep = sysm.solve(b[:, 0], transpose=transpose)
        exact = np.linalg.solve(M.T if transpose else M, b[members, 0])
        assert rep.status is ctmc.Status.SUCCESS
        assert np.allclose(x[members], exact, rtol=1e-9) and not np.any(x[~members])
        X, _ = sysm.solve(b, transpose=transpose)
        assert np.allclose(X[members], np.linalg.solve(M.T if transpose else M, b[members]), rtol=1e-9)
        assert not np.any(X[~members])
    masked = sysm._masked            # (set when the first matrix is made)
    sysm.close()
    # a left-out state without a stored diagonal entry has no masked block; BiCGStab reads both of its
    # systems from Q's rows (csr.MaskedTranspose, which needs none), GMRES reads M^T only
    assert masked == (len(left_out) <= 16 and pre != "ilu" and not (absorbing and kind == "gmres"))


def test_the_error_bound_of_a_masked_return_time_system_is_the_extracted_ones():
    """The return-time bound of a gallery model (its system masked) against the one of the block
    extracted (the masked path switched off): the same proven bound to the solves' looseness."""
    from ctmc.backends import scipy_backend
    from ctmc.kernels.classes import closed_classes
    from ctmc.kernels.evidence import RETURN_SPEC, return_time_bound
    from ctmc.models.gallery import GALLERY
    chain = GALLERY["kanban"](2).chain()
    op = operator_for(chain, "scipy")
    support = closed_classes(op, None, limit=1)[0]
    pin = int(np.argmax(chain.stationary("lu").pi))
    tight = dataclasses.replace(RETURN_SPEC, rtol=1e-12)
    bounds = {}
    for limit in (scipy_backend.MASKED_STATES, -1):
        old = scipy_backend.MASKED_STATES
        scipy_backend.MASKED_STATES = limit
        try:
            bounds[limit] = return_time_bound(op, support, pin, specs=[tight])
        finally:
            scipy_backend.MASKED_STATES = old
    (b1, e1), (b2, e2) = bounds.values()
    assert b1 == pytest.approx(b2, rel=1e-9) and e1 == pytest.approx(e2, rel=1e-9)
