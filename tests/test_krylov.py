"""ctmc.krylov.gmres: against dense solves, its stopping test, its limits and breakdowns."""
import numpy as np
import pytest
import scipy.sparse as sp

from ctmc import _relax
from ctmc.krylov import ARNOLDI, gmres


def _m_matrix(n, seed, spread=1.0):
    """A random sparse nonsingular M-matrix (row sums ``spread``-scaled, strictly positive)."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=5.0 / n, random_state=rng, data_rvs=lambda k: rng.uniform(0.1, 1.0, k))
    R = sp.csr_matrix(R - sp.diags(R.diagonal()))
    v = rng.uniform(0.01, 1.0, n) * spread
    return (sp.diags(np.asarray(R.sum(axis=1)).ravel() + v) - R).tocsr()


@pytest.fixture(params=["compiled", "fallback"])
def kernels(request):
    """Each test twice: with the compiled kernels (where built) and with the numpy fallbacks."""
    before = _relax.use_compiled(request.param == "compiled")
    yield request.param
    _relax.use_compiled(before)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("restart", [5, 30])
@pytest.mark.parametrize("precondition", [False, True])
@pytest.mark.parametrize("orth", sorted(ARNOLDI))
def test_gmres_matches_a_dense_solve(seed, restart, precondition, orth, kernels):
    A = _m_matrix(300, seed)
    b = np.random.default_rng(seed + 10).uniform(0, 1, 300)
    dinv = 1.0 / A.diagonal()
    x, rep = gmres(A.dot, b, (lambda v: dinv * v) if precondition else None, rtol=1e-13,
                   restart=restart, maxiter=5000, norm_a=abs(A).sum(axis=1).max(), orthogonalisation=orth)
    exact = np.linalg.solve(A.toarray(), b)
    assert rep.converged and not rep.breakdown
    true_be = np.abs(b - A @ x).max() / (abs(A).sum(axis=1).max() * np.abs(x).max() + np.abs(b).max())
    assert rep.backward_error == pytest.approx(true_be, rel=1e-6) and true_be <= 1e-13
    assert np.max(np.abs(x - exact) / np.abs(exact)) < 1e-8


def test_gmres_on_a_pinned_stationary_system_meets_its_backward_and_forward_bounds():
    """A pinned birth-death stationary system (ill-conditioned): the backward error
    is met, and the answer is within condition number x backward error of a direct solve."""
    n, lam, mu = 400, 1.0, 1.05
    up, down = np.full(n - 1, lam), np.full(n - 1, mu)
    Q = sp.diags([up, down], [1, -1]).tolil()
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    QT = Q.T.tocsr()
    A, b = QT[1:, 1:], -QT[1:, 0].toarray().ravel()       # pin state 0
    x, rep = gmres(A.dot, b, rtol=1e-12, restart=40, maxiter=20_000, norm_a=abs(A).sum(axis=1).max())
    assert rep.converged and rep.backward_error <= 1e-12
    D = A.toarray()
    lu = np.linalg.solve(D, b)
    kappa = np.linalg.cond(D, np.inf)                        # forward error <= kappa x backward error
    assert np.abs(x - lu).max() / np.abs(lu).max() <= 4 * kappa * 1e-12


def test_gmres_reports_its_limit_and_the_true_backward_error():
    A = _m_matrix(500, 7, spread=1e-4)                      # nearly singular: slow without a preconditioner
    b = np.ones(500)
    na = abs(A).sum(axis=1).max()
    x, rep = gmres(A.dot, b, rtol=1e-15, restart=3, maxiter=7, norm_a=na)
    assert not rep.converged and rep.iterations == 7
    assert rep.backward_error == pytest.approx(np.abs(b - A @ x).max() / (na * np.abs(x).max() + 1.0), rel=1e-9)


def test_gmres_reports_a_breakdown_on_non_finite_numbers():
    A = _m_matrix(50, 3)
    x, rep = gmres(lambda v: A @ v * np.nan, np.ones(50), rtol=1e-10, norm_a=10.0)
    assert rep.breakdown and not rep.converged


def test_gmres_reports_a_singular_system_as_a_breakdown_keeping_its_progress():
    """diag(0, 1) x = (1, 1) has no solution; the backward error test alone was met by x ~ -5e15."""
    A = np.array([[0.0, 0.0], [0.0, 1.0]])
    x, rep = gmres(lambda v: A @ v, np.array([1.0, 1.0]), rtol=1e-12, restart=5, maxiter=10, norm_a=1.0)
    assert rep.breakdown and not rep.converged
    assert np.abs(x).max() < 10 and x[1] == pytest.approx(1.0)     # the least-squares step before it


@pytest.mark.parametrize("orth", sorted(ARNOLDI))
def test_arnoldi_keeps_the_basis_orthonormal_and_the_arnoldi_relation(orth, kernels):
    """On the ill-conditioned pinned birth-death system (no preconditioner, 60 steps from a random vector):
    the basis stays orthonormal to round-off, ||I - Q^T Q|| ~ eps (a single Gram-Schmidt pass loses
    1.7e-12 here), and A Q_k = Q_{k+1} H_k holds for the columns GMRES gets."""
    n, lam, mu = 3000, 1.0, 1.05
    Q = sp.diags([np.full(n - 1, lam), np.full(n - 1, mu)], [1, -1]).tolil()
    Q.setdiag(-np.asarray(Q.sum(axis=1)).ravel())
    QT = Q.T.tocsr()
    A, b = QT[1:, 1:].tocsr(), np.random.default_rng(0).uniform(0, 1, n - 1)
    k = 60
    V = np.empty((k + 1, n - 1))
    V[0] = b / np.linalg.norm(b)
    arnoldi = ARNOLDI[orth](V, A.dot, lambda v: v, _relax.extension())
    H = np.zeros((k + 1, k))
    for j in range(k):
        for jj, h, hn in arnoldi.step(j):
            H[:jj + 1, jj], H[jj + 1, jj] = h, hn
    for jj, h, hn in arnoldi.finish():
        H[:jj + 1, jj], H[jj + 1, jj] = h, hn
    Qk = V[:k]
    assert np.linalg.norm(np.eye(k) - Qk @ Qk.T) < 1e-13
    # the relation for the columns before the last (the last one's next vector has one pass only)
    lhs = (A @ Qk[:k - 1].T)
    rhs = Qk.T @ H[:k, :k - 1]
    assert np.abs(lhs - rhs).max() <= 1e-12 * abs(A).sum(axis=1).max()


def test_gmres_rejects_an_unknown_orthogonalisation():
    with pytest.raises(ValueError, match="orthogonalisation"):
        gmres(np.eye(3).dot, np.ones(3), norm_a=1.0, orthogonalisation="mgs")


@pytest.mark.parametrize("orth", sorted(ARNOLDI))
def test_gmres_makes_full_cycles_up_to_its_iteration_limit(orth):
    """maxiter=7, restart=3: cycles of 3, 3 and 1 steps, each cycle's start a true residual, so 3 calls
    of the product on x besides the 7 Arnoldi products (and one for the final backward error)."""
    A = _m_matrix(500, 7, spread=1e-4)
    calls = []

    def matvec(v):
        calls.append(v)
        return A @ v
    x, rep = gmres(matvec, np.ones(500), rtol=1e-15, restart=3, maxiter=7, norm_a=abs(A).sum(axis=1).max(),
                   orthogonalisation=orth)
    assert not rep.converged and rep.iterations == 7
    assert len(calls) == 7 + 4          # 7 steps, 3 cycle starts and the last residual


@pytest.mark.parametrize("orth", sorted(ARNOLDI))
def test_gmres_steps_write_into_its_own_buffers_and_give_the_numbers_of_plain_functions(orth, kernels):
    """Given products that write into a buffer (ctmc._relax.into), every call of GMRES passes one: the
    preconditioner always the same work vector, the product a row of the basis or a work vector (no vector
    made per step). The answer is the one of the same functions returning new arrays, to the last bit."""
    A = _m_matrix(400, 3)
    b = np.random.default_rng(4).uniform(0, 1, 400)
    dinv = 1.0 / A.diagonal()
    seen = {"mv": [], "pc": []}

    def mv(v, out=None):
        seen["mv"].append(out)
        if out is None:
            return A @ v
        np.copyto(out, A @ v)
        return out
    mv.writes_into = True

    def pc(v, out=None):
        seen["pc"].append(out)
        return np.multiply(dinv, v, out=out)
    pc.writes_into = True
    kw = dict(rtol=1e-13, restart=12, maxiter=2000, norm_a=abs(A).sum(axis=1).max(), orthogonalisation=orth)
    x, rep = gmres(mv, b, pc, **kw)
    x_plain, rep_plain = gmres(lambda v: A @ v, b, lambda v: dinv * v, **kw)
    assert rep.converged and rep.iterations == rep_plain.iterations and np.array_equal(x, x_plain)
    assert rep.iterations > 12                                     # restarted: the buffers serve every cycle
    assert all(o is not None for o in seen["mv"] + seen["pc"])
    bases = {id(o.base) for o in seen["mv"] if o.base is not None}  # rows of one basis array
    assert len(bases) == 1
    assert len({id(o) for o in seen["pc"]}) == 1 and seen["pc"][0].base is None    # one work vector
    exact = np.linalg.solve(A.toarray(), b)
    assert np.max(np.abs(x - exact) / np.abs(exact)) < 1e-8


# --------------------------------------------------------------------------
# BiCGStab
# --------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("precondition", ["none", "jacobi", "sgs"])
def test_bicgstab_matches_a_dense_solve(seed, precondition, kernels):
    from ctmc.krylov import bicgstab
    A = _m_matrix(300, seed)
    b = np.random.default_rng(seed + 10).uniform(0, 1, 300)
    dinv = 1.0 / A.diagonal()
    P = {"none": None, "jacobi": lambda v: dinv * v, "sgs": _relax.symmetric_gauss_seidel(A)}[precondition]
    norm_a = abs(A).sum(axis=1).max()
    x, rep = bicgstab(A, b, P, rtol=1e-12, maxiter=2000, norm_a=norm_a)
    exact = np.linalg.solve(A.toarray(), b)
    assert rep.converged and not rep.breakdown and not rep.accepted
    true_be = np.abs(b - A @ x).max() / (norm_a * np.abs(x).max() + np.abs(b).max())
    assert rep.backward_error == pytest.approx(true_be, rel=1e-6)
    assert np.linalg.norm(b - A @ x) <= 1e-12 * np.linalg.norm(b) * 10     # rtol on the recurred residual
    assert np.allclose(x, exact, rtol=1e-8, atol=0)


def test_bicgstab_compiled_and_fallback_agree():
    """The compiled vector passes compute the fallback's formulas: the same iterations, the same answer
    to round-off."""
    from ctmc.krylov import bicgstab
    if _relax.extension() is None:
        pytest.skip("compiled kernels not built")
    A = _m_matrix(400, 7)
    b = np.random.default_rng(1).uniform(0, 1, 400)
    out = {}
    for on in (True, False):
        before = _relax.use_compiled(on)
        try:
            out[on] = bicgstab(A, b, _relax.symmetric_gauss_seidel(A), rtol=1e-10, norm_a=10.0)
        finally:
            _relax.use_compiled(before)
    (xc, rc), (xf, rf) = out[True], out[False]
    assert rc.iterations == rf.iterations and rc.converged and rf.converged
    assert np.allclose(xc, xf, rtol=1e-9, atol=0)


@pytest.mark.parametrize("bracket", [1.5, 4.0])
@pytest.mark.parametrize("seed", range(3))
def test_bicgstab_stops_at_a_bracketing_iterate(bracket, seed, kernels):
    """With ``bracket``, on an M-matrix and b >= 0: the iterate returned brackets the dense solution,
    x <= x_hat / (1 - rho_+) <= bracket * x entrywise, and it came before the rtol stop."""
    from ctmc.krylov import bicgstab, bracket_factor
    A = _m_matrix(300, seed, spread=0.01)            # nearly singular: many iterations to rtol
    b = np.random.default_rng(seed).uniform(0.5, 2.0, 300)     # > 0: a row with b_i = 0 would need r_i = 0
    norm_a = abs(A).sum(axis=1).max()
    x, rep = bicgstab(A, b, _relax.symmetric_gauss_seidel(A), rtol=1e-12, norm_a=norm_a, bracket=bracket)
    full, rep_full = bicgstab(A, b, _relax.symmetric_gauss_seidel(A), rtol=1e-12, norm_a=norm_a)
    exact = np.linalg.solve(A.toarray(), b)
    r = b - A @ x
    f = bracket_factor(r, b)
    assert rep.accepted and f <= bracket and rep.iterations < rep_full.iterations
    hi = max(float((r[b > 0] / b[b > 0]).max()), 0.0)
    upper = x / (1 - hi)
    assert np.all(exact <= upper * (1 + 1e-9)) and np.all(upper <= bracket * exact * (1 + 1e-9))


def _shift_system(n=1000):
    """``I - 0.999 S``, ``S`` a cyclic shift: BiCGStab's residual falls 26-fold in 300 iterations."""
    S = sp.csr_matrix((np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n))
    return (sp.identity(n) - 0.999 * S).tocsr(), np.random.default_rng(0).uniform(0, 1, n)


@pytest.mark.parametrize("stall", [10, 25])
def test_bicgstab_gives_up_where_its_residual_stagnates(stall, kernels):
    """With ``stall=k`` a solve whose residual does not fall tenfold in k iterations stops there: the
    very iterate of ``maxiter=k``, reported ``stalled`` (not converged), instead of running on."""
    from ctmc.krylov import bicgstab
    A, b = _shift_system()
    x, rep = bicgstab(A, b, None, rtol=1e-10, maxiter=300, norm_a=2.0, stall=stall)
    y, ref = bicgstab(A, b, None, rtol=1e-10, maxiter=stall, norm_a=2.0)
    assert rep.stalled and not rep.converged and rep.iterations == stall and not ref.stalled
    assert np.array_equal(x, y) and rep.backward_error == ref.backward_error
    _, full = bicgstab(A, b, None, rtol=1e-10, maxiter=300, norm_a=2.0)
    assert full.iterations == 300 and not full.converged and not full.stalled


@pytest.mark.parametrize("seed", range(3))
def test_bicgstab_stall_test_leaves_a_converging_solve_alone(seed, kernels):
    """A solve that converges (its residual falls tenfold in fewer than 10 iterations throughout) is the
    same iterate for iterate with the stagnation test on."""
    from ctmc.krylov import bicgstab
    A = _m_matrix(300, seed, spread=0.01)             # nearly singular: many iterations
    b = np.random.default_rng(seed).uniform(0.5, 2.0, 300)
    norm_a = abs(A).sum(axis=1).max()
    x, rep = bicgstab(A, b, _relax.symmetric_gauss_seidel(A), rtol=1e-12, norm_a=norm_a, stall=10)
    y, ref = bicgstab(A, b, _relax.symmetric_gauss_seidel(A), rtol=1e-12, norm_a=norm_a)
    assert rep.converged and ref.converged and not rep.stalled and rep.iterations == ref.iterations
    assert np.array_equal(x, y)


def test_bracket_factor_needs_a_zero_residual_where_b_is_zero():
    from ctmc.krylov import bracket_factor
    assert bracket_factor(np.array([0.1, 0.0]), np.array([1.0, 0.0])) == pytest.approx(1 / 0.9)
    assert bracket_factor(np.array([0.1, 1e-300]), np.array([1.0, 0.0])) == np.inf
    assert bracket_factor(np.array([1.0, 0.0]), np.array([1.0, 1.0])) == np.inf


@pytest.mark.parametrize("signed_zeros", [False, True])
@pytest.mark.parametrize("precondition", [False, True])
def test_bicgstab_taking_a_sparse_b_vector_gives_the_same_bits(precondition, signed_zeros, kernels):
    """overwrite_b with b a few non-zeros (a pinned system's row of rates): b's vector becomes the
    iterate's, and the iterates, residuals and report are those of the solve that keeps b whole, to the
    bit (-0.0 entries of b kept apart like the non-zeros); a dense b or a bracket leaves b alone."""
    from ctmc.krylov import SPARSE_RHS, bicgstab
    A = _m_matrix(400, 3)
    P = _relax.symmetric_gauss_seidel(A) if precondition else None
    b = np.zeros(400)
    b[[7, 150, 151]] = [0.5, 2.0, 1.0]
    if signed_zeros:
        b[[3, 300]] = -0.0
    x0, r0 = bicgstab(A, b.copy(), P, rtol=1e-12, norm_a=10.0)
    given = b.copy()
    x1, r1 = bicgstab(A, given, P, rtol=1e-12, norm_a=10.0, overwrite_b=True)
    assert x1 is given and r0 == r1 and r1.converged
    assert np.array_equal(x0.view(np.int64), x1.view(np.int64))          # (the bits, signs of zeros too)
    dense = np.random.default_rng(2).uniform(0, 1, 400)
    dense[: 400 - 400 // SPARSE_RHS] = 0.0                   # one entry in SPARSE_RHS, and one more
    dense[0] = 1.0
    for kw in ({}, {"bracket": 4.0}):
        for rhs in (dense, b):
            if not kw and rhs is b:
                continue
            kept = rhs.copy()
            x2, r2 = bicgstab(A, kept, P, rtol=1e-12, norm_a=10.0, overwrite_b=True, **kw)
            assert x2 is not kept and np.array_equal(kept, rhs)
            assert (x2, r2)[1] == bicgstab(A, rhs.copy(), P, rtol=1e-12, norm_a=10.0, **kw)[1]


@pytest.mark.parametrize("N", [3, 4, 5, 6, 8])
def test_bicgstab_with_the_sweep_solves_the_pinned_polling_chains(N):
    """The pinned stationary system's right-hand side is one row of R (a few entries): a shadow residual
    made of r_0 alone was orthogonal to r after the first steps there (rho = 0: the polling systems broke
    down at every size); with the shadow filled where r_0 is 0 BiCGStab with the Gauss-Seidel sweep
    converges, and its law is GTH's."""
    from ctmc.models.gallery import parse_spec
    chain = parse_spec(f"polling:{N}").chain()
    res = chain.stationary("bicgstab", preconditioner="sgs", tol=1e-12, check=False)
    ref = chain.stationary("gth").pi
    assert res.status.value == "success" and "failed_pin" not in res.info
    assert np.abs(res.pi - ref).sum() <= res.error_bound
    np.testing.assert_allclose(res.pi, ref, rtol=1e-8, atol=0)


@pytest.mark.parametrize("stall", [10, 25])
def test_gmres_gives_up_where_its_residual_stagnates(stall, kernels):
    """GMRES takes BiCGStab's stagnation test (:class:`ctmc.krylov.Stall`, one rule): on ``I - 0.999 S``
    GMRES(20)'s residual falls about 2 % a step, so with ``stall=k`` it stops after k steps (one more
    where the delayed second pass of DCGS2 makes a column late), ``stalled``, with the true backward
    error of the iterate it returns; without, it runs its 300 steps (was: no test, 300 steps always)."""
    from ctmc.krylov import backward_error, gmres
    A, b = _shift_system()
    x, rep = gmres(A, b, None, rtol=1e-10, restart=20, maxiter=300, norm_a=2.0, stall=stall)
    assert rep.stalled and not rep.converged and stall <= rep.iterations <= stall + 1
    assert rep.backward_error == pytest.approx(backward_error(b - A @ x, x, b, 2.0), rel=1e-12)
    _, full = gmres(A, b, None, rtol=1e-10, restart=20, maxiter=300, norm_a=2.0)
    assert full.iterations == 300 and not full.converged and not full.stalled
    assert full.backward_error < rep.backward_error          # it was making (slow) progress


@pytest.mark.parametrize("seed", range(3))
def test_gmres_stall_test_leaves_a_converging_solve_alone(seed, kernels):
    """A converging GMRES solve is the same iterate, step for step, with the stagnation test on."""
    from ctmc.krylov import gmres
    A = _m_matrix(300, seed, spread=0.01)
    b = np.random.default_rng(seed).uniform(0.5, 2.0, 300)
    norm_a = abs(A).sum(axis=1).max()
    x, rep = gmres(A, b, _relax.symmetric_gauss_seidel(A), rtol=1e-12, restart=10, norm_a=norm_a, stall=10)
    y, ref = gmres(A, b, _relax.symmetric_gauss_seidel(A), rtol=1e-12, restart=10, norm_a=norm_a)
    assert rep.converged and ref.converged and not rep.stalled and rep.iterations == ref.iterations > 20
    assert np.array_equal(x, y)


def test_stall_rule_against_its_definition():
    """:class:`ctmc.krylov.Stall` against the rule written out: stop at the first i >= k where
    min(r_0..r_i) > min(r_0..r_{i-k}) / 10, on random residual sequences."""
    from ctmc.krylov import Stall
    rng = np.random.default_rng(1)
    for _ in range(200):
        k = int(rng.integers(1, 8))
        r = np.exp(np.cumsum(rng.normal(-0.15, 0.6, 60)))
        seq = np.concatenate([[1.0], r])
        want = next((i for i in range(k, seq.size) if seq[:i + 1].min() > 0.1 * seq[:i - k + 1].min()), None)
        s = Stall(k, 1.0)
        got = next((i for i, v in enumerate(r, 1) if s(v)), None)
        assert got == want
    assert not any(Stall(0, 1.0)(1.0) for _ in range(50))
