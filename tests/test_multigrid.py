"""The multilevel preconditioner (ctmc.multigrid): a fixed linear operator, and GMRES with it
agrees with the direct solve.

Independent answers: the pinned sparse LU (``method="lu"``), GTH on small
chains, and the algebraic identities of the Galerkin product.
"""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import ctmc
from ctmc import multigrid
from ctmc.krylov import gmres
from ctmc.results import Status
from chains import ncd_chain


def gallery(name, value):
    from ctmc.models.gallery import GALLERY
    return GALLERY[name](value).chain()


def pinned_system(chain, pin=None):
    """``A = -Q_XX^T`` without the pin (the slowest state), and ``b`` = the pin's row of R."""
    Q = sp.csr_matrix(chain.Q)
    pin = int(np.argmin(-Q.diagonal())) if pin is None else pin
    keep = np.ones(Q.shape[0], dtype=bool)
    keep[pin] = False
    A = (-Q[keep][:, keep]).T.tocsr()
    R = Q.copy()
    R.setdiag(0.0)
    b = np.asarray(R[pin].toarray()).ravel()[keep]
    return A, b


def stationary(chain, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return chain.stationary(check=False, **kw)


# --------------------------------------------------------------------------
# a fixed linear operator
# --------------------------------------------------------------------------
@pytest.mark.parametrize("aggregation", sorted(multigrid.AGGREGATIONS))
def test_the_preconditioner_is_linear(aggregation):
    A, _ = pinned_system(gallery("kanban", 2))
    H = multigrid.setup(A, coarse_size=100, aggregation=aggregation)
    assert len(H.sizes) >= 3                         # a real V-cycle: several levels
    rng = np.random.default_rng(1)
    u, v = rng.standard_normal(A.shape[0]), rng.random(A.shape[0])
    a, b = 2.5, -0.75
    lhs, rhs = H(a * u + b * v), a * H(u) + b * H(v)
    scale = np.abs(a * H(u)).max() + np.abs(b * H(v)).max()
    assert np.abs(lhs - rhs).max() <= 1e-12 * scale
    # the same input twice gives the same output: nothing is adapted between calls
    assert np.array_equal(H(u), H(u))


def test_a_two_level_cycle_is_the_textbook_formula():
    # P v = x2 with x1 = (D - L)^{-1} v, x1' = x1 + S Ac^{-1} T^T (v - A x1), x2 = backward sweep
    A, _ = pinned_system(gallery("kanban", 1))
    H = multigrid.setup(A, coarse_size=A.shape[0] // 3, max_levels=2)
    assert len(H.sizes) == 2
    L = H.levels[0]
    Ad = A.toarray()
    n, m = Ad.shape[0], L.m
    T = np.zeros((n, m))
    T[np.arange(n), L.agg] = 1.0
    S = L.share[:, None] * T
    Ac = T.T @ Ad @ S
    v = np.random.default_rng(2).random(n)
    x = np.linalg.solve(np.tril(Ad), v)
    x = x + S @ np.linalg.solve(Ac, T.T @ (v - Ad @ x))
    x = np.linalg.solve(np.triu(Ad), v - np.tril(Ad, -1) @ x)
    assert np.allclose(H(v), x, rtol=1e-10, atol=1e-12 * np.abs(x).max())


# --------------------------------------------------------------------------
# the coarse operators
# --------------------------------------------------------------------------
def test_galerkin_keeps_the_m_matrix_and_the_flows():
    A, _ = pinned_system(gallery("kanban", 2))
    w = multigrid.near_null(A, 3)
    F = sp.csr_matrix(A @ sp.diags(w))
    agg = multigrid.pairwise_aggregates(F, 2)
    m = int(agg.max()) + 1
    W = np.bincount(agg, weights=w, minlength=m)
    share = w / W[agg]
    Ac = multigrid.galerkin(A, agg, share, m).toarray()
    off = Ac - np.diag(np.diag(Ac))
    assert (off <= 0).all() and (np.diag(Ac) > 0).all()
    assert (Ac.sum(axis=0) >= -1e-12 * np.abs(Ac).max()).all()     # column sums: rates into the pin
    # the flows between aggregates are the sums of the flows between their states
    T = sp.csr_matrix((np.ones(agg.size), (np.arange(agg.size), agg)), shape=(agg.size, m))
    flows = (T.T @ F @ T).toarray()
    assert np.allclose(Ac * W[None, :], flows, rtol=1e-12, atol=1e-14 * np.abs(flows).max())


def test_weights_follow_the_solution():
    # pinned at an improbable state the system is nearly singular, and its slowest mode,
    # which the weights approximate, is the stationary law: geometric on this birth-death chain
    chain = ctmc.Model("bd")
    n = chain.var("n", 0, 30)
    chain.event("a", guard=n < 30, rate=1.0, update={n: n + 1})
    chain.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    c = chain.build(initial={"n": 0})
    A, _ = pinned_system(c, pin=30)
    w = multigrid.near_null(A, 200)
    ratio = w[1:10] / w[:9]
    assert np.allclose(ratio, 0.5, rtol=0.05)


# --------------------------------------------------------------------------
# GMRES with it agrees with LU
# --------------------------------------------------------------------------
CASES = [("kanban", 1), ("kanban", 2), ("tandem", 15), ("tandem", 63), ("fms", 3), ("cluster", 16)]


@pytest.mark.parametrize("name,value", CASES, ids=[f"{n}:{v}" for n, v in CASES])
def test_gmres_with_multilevel_agrees_with_lu(name, value):
    chain = gallery(name, value)
    ref = stationary(chain, method="lu")
    res = stationary(chain, method="gmres", preconditioner="multilevel", tol=1e-10)
    assert res.status is Status.SUCCESS, res.message
    err = np.abs(res.pi - ref.pi).sum()
    assert err <= 1e-8
    assert err <= res.error_bound
    sizes = res.info["multilevel_sizes"]
    assert sizes[0] == chain.n_states - 1 and res.iterations > 0
    assert (len(sizes) > 1) == (chain.n_states > 1001)        # coarse_size 1000: below it, one LU
    print(f"{name}:{value}: {chain.n_states} states, levels {sizes}, {res.iterations} GMRES iterations, "
          f"|pi - lu|_1 = {err:.1e}")


def test_nearly_decomposable_chain_agrees_with_gth():
    chain = ncd_chain(K=700, coupling=1e-6)                   # 1402 states: two levels at least
    ref = stationary(chain, method="gth").pi
    res = stationary(chain, method="gmres", preconditioner="multilevel", tol=1e-10)
    assert len(res.info["multilevel_sizes"]) > 1
    # the queue's tail falls to 1e-186: GMRES leaves it noisy with either preconditioner, and
    # the status says so (tail_inaccurate); the law itself is right, within its bound
    assert res.status in (Status.SUCCESS, Status.TAIL_INACCURATE, Status.INACCURATE), res.message
    assert np.abs(res.pi - ref).sum() <= res.error_bound
    assert abs(res.pi[chain.states["b"] == 1].sum() - 0.25) < 1e-8
    sgs = stationary(chain, method="gmres", preconditioner="sgs", tol=1e-10)
    assert res.iterations < sgs.iterations


def test_fewer_iterations_than_the_gauss_seidel_preconditioner():
    # not a timing: the count of Krylov steps, deterministic
    A, b = pinned_system(gallery("kanban", 2))
    norm = float(abs(A).sum(axis=1).max())
    from ctmc.backends.scipy_backend import ssor1
    x1, r1 = gmres(A.dot, b, ssor1(A), rtol=1e-12, norm_a=norm)
    x2, r2 = gmres(A.dot, b, multigrid.setup(A, coarse_size=200), rtol=1e-12, norm_a=norm)
    assert r1.converged and r2.converged
    assert r2.iterations < 0.8 * r1.iterations
    assert np.abs(x1 - x2).sum() <= 1e-8 * np.abs(x1).sum()


def test_hitting_times_with_multilevel_agree_with_lu():
    # a passage system (M = -Q_XX on the states outside the target) is an M-matrix too
    chain = gallery("kanban", 2)
    target = np.zeros(chain.n_states, dtype=bool)
    target[-1] = True
    ref = chain.hitting_times(target, method="lu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = chain.hitting_times(target, method="gmres", preconditioner="multilevel", check=False)
    assert res.status is Status.SUCCESS, res.message
    ok = ref.mean > 0
    assert np.max(np.abs(res.mean[ok] / ref.mean[ok] - 1)) < 1e-8


@pytest.mark.parametrize("kw, match", [({"coarse_size": 0}, "coarse_size"), ({"matchings": 1.5}, "matchings"),
                                       ({"weight_sweeps": -1}, "weight_sweeps"), ({"theta": 1.0}, "theta"),
                                       ({"aggregation": "lloyd"}, "aggregation")])
def test_bad_settings(kw, match):
    with pytest.raises(ValueError, match=match):
        multigrid.Settings(**kw)


def test_the_name_is_accepted_by_the_options():
    from ctmc.backends.base import PRECONDITIONERS
    assert "multilevel" in PRECONDITIONERS
    with pytest.raises(ValueError, match="preconditioner"):
        gallery("kanban", 1).stationary("gmres", preconditioner="amg")
