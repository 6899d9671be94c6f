"""The ``multilevel`` stationary method (ctmc.aggregation) on reference problems, on every backend.

Each answer is compared with an independent one: GTH (subtraction-free, exact to
round-off in every component) or the sparse direct solve.
"""
import warnings

import numpy as np
import pytest

import ctmc
from ctmc.aggregation import MultilevelOptions, _match, _pairwise
from chains import ncd_chain
from ctmc.results import Status


def gallery(name, value):
    from ctmc.models.gallery import GALLERY
    return GALLERY[name](value).chain()


def solve(chain, backend, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return chain.stationary("multilevel", backend=backend, check=False, **kw)


# --------------------------------------------------------------------------
# nearly completely decomposable: relative accuracy of every probability
# --------------------------------------------------------------------------
@pytest.mark.parametrize("aggregates", ["b", None], ids=["by-block", "automatic"])
def test_ncd_chain_against_gth_componentwise(backend, aggregates):
    chain = ncd_chain(K=12)
    ref = chain.stationary("gth").pi
    res = solve(chain, backend, aggregates=aggregates, tol=1e-14, coarse_size=8)
    # the residual-based bound cannot vouch for it (condition ~1e9), and says so
    assert res.status in (Status.SUCCESS, Status.INACCURATE), res.message
    assert np.abs(res.pi - ref).sum() <= res.error_bound
    assert (res.status is Status.SUCCESS) == (res.error_bound <= 1e-6)
    # every probability (down to 0.5^12 / 4 of the largest) with relative accuracy
    assert np.max(np.abs(res.pi / ref - 1)) < 1e-6
    # the weak coupling fixes the split between the blocks: 1/4 in block 1
    assert abs(res.pi[chain.states["b"] == 1].sum() - 0.25) < 1e-10
    assert res.info["levels"] >= 2 and res.info["cycles"] == res.iterations


def test_gauss_seidel_stalls_where_multilevel_does_not():
    # the reason the method exists: plain sweeps do not move mass across the weak coupling
    chain = ncd_chain(K=12)
    gs = chain.stationary("gauss_seidel", maxiter=300, check=False)
    ml = chain.stationary("multilevel", aggregates="b", check=False)
    assert abs(gs.pi[chain.states["b"] == 1].sum() - 0.25) > 0.1
    assert abs(ml.pi[chain.states["b"] == 1].sum() - 0.25) < 1e-8


# --------------------------------------------------------------------------
# gallery models against a direct solve
# --------------------------------------------------------------------------
GALLERY_CASES = [("tandem", 15, {}), ("kanban", 1, {}), ("kanban", 2, {}), ("cluster", 4, {}),
                 ("fms", 1, {"coarse_size": 16}), ("tandem", 15, {"cycle": "W", "coarse_size": 20}),
                 ("kanban", 2, {"cycle": "F", "smoother": "forward", "pre_sweeps": 2}),
                 ("kanban", 2, {"aggregation": "standard"}), ("tandem", 15, {"aggregation": "standard"})]


@pytest.mark.parametrize("name,value,kw", GALLERY_CASES,
                         ids=[f"{n}{v}-{'-'.join(map(str, k.values())) or 'default'}" for n, v, k in GALLERY_CASES])
def test_gallery_against_direct_solve(backend, name, value, kw):
    chain = gallery(name, value)
    ref = chain.stationary("lu" if chain.n_states > 1500 else "gth").pi
    kw = dict({"coarse_size": 64}, **kw)
    res = solve(chain, backend, tol=1e-12, **kw)
    assert res.status is Status.SUCCESS, res.message
    assert np.abs(res.pi - ref).sum() < 1e-9
    big = ref > 1e-12 * ref.max()
    assert np.max(np.abs(res.pi[big] / ref[big] - 1)) < 1e-5
    assert res.info["levels"] >= 2 and res.info["coarse_sizes"][-1] <= kw["coarse_size"]
    if chain.n_states > kw["coarse_size"]:
        assert res.iterations >= 1


def test_explicit_levels_by_expression(backend):
    # tandem: level 1 groups by (sc, sm), level 2 by sc + sm: nested expressions
    chain = gallery("tandem", 15)
    sc, sm = ctmc.expr.Var("sc", 0, 15), ctmc.expr.Var("sm", 0, 15)
    ref = chain.stationary("lu").pi
    res = solve(chain, backend, aggregates=[sc * 16 + sm, sc + sm], coarse_size=40, tol=1e-12)
    assert res.status is Status.SUCCESS, res.message
    assert res.info["coarse_sizes"] == [256, 31]
    assert np.abs(res.pi - ref).sum() < 1e-9


def test_explicit_levels_by_arrays(backend):
    # level 1 per state (an integer array), level 2 per level-1 aggregate
    chain = gallery("kanban", 2)
    ref = chain.stationary("lu").pi
    first = np.arange(chain.n_states) // 4
    m1 = int(first.max()) + 1
    second = np.arange(m1) // 8
    res = solve(chain, backend, aggregates=[first, second], coarse_size=300, tol=1e-12)
    assert res.status is Status.SUCCESS, res.message
    assert res.info["coarse_sizes"][:2] == [m1, int(second.max()) + 1]
    assert np.abs(res.pi - ref).sum() < 1e-9


def test_explicit_level_is_coarsened_further_automatically():
    chain = gallery("kanban", 2)
    res = solve(chain, "scipy", aggregates=np.arange(chain.n_states) // 2, coarse_size=50, tol=1e-12)
    sizes = res.info["coarse_sizes"]
    assert sizes[0] == chain.n_states // 2 and sizes[-1] <= 50 and len(sizes) >= 2
    assert np.abs(res.pi - chain.stationary("lu").pi).sum() < 1e-9


def test_small_chain_is_solved_directly():
    chain = gallery("cluster", 1)
    res = solve(chain, "scipy", coarse_size=5000)
    assert res.info["levels"] == 1 and res.iterations == 0
    assert np.allclose(res.pi, chain.stationary("gth").pi, rtol=1e-12, atol=0)


# --------------------------------------------------------------------------
# the automatic aggregates
# --------------------------------------------------------------------------
def test_matching_pairs_the_strongest_flows():
    import scipy.sparse as sp
    # a path 0-1-2-3-4-5 with strong links 0-1, 2-3, 4-5 and weak ones between
    w = {(0, 1): 5.0, (1, 2): 1e-6, (2, 3): 7.0, (3, 4): 1e-6, (4, 5): 3.0}
    S = sp.lil_matrix((6, 6))
    for (i, j), v in w.items():
        S[i, j] = S[j, i] = v
    agg = _match(S.tocsr())
    assert agg.tolist() == [0, 0, 1, 1, 2, 2]


def test_pairwise_coarsens_a_uniform_grid_about_fourfold():
    import scipy.sparse as sp
    k = 40
    T = sp.diags([np.ones(k - 1), np.ones(k - 1)], [-1, 1])
    S = (sp.kron(T, sp.eye(k)) + sp.kron(sp.eye(k), T)).tocsr()
    agg = _pairwise(S)
    m = int(agg.max()) + 1
    assert 0.15 * k * k < m < 0.4 * k * k
    # aggregates are connected in the grid: every aggregate of two or more has an inner edge
    A = S.tocoo()
    inner = np.bincount(agg[A.row][agg[A.row] == agg[A.col]], minlength=m)
    assert np.all(inner[np.bincount(agg, minlength=m) > 1] > 0)


# --------------------------------------------------------------------------
# bad input: clear errors before any heavy work
# --------------------------------------------------------------------------
@pytest.mark.parametrize("kw,match", [
    ({"coarse_size": 1}, "coarse_size: expected an integer in 2..5000"),
    ({"coarse_size": 10**6}, "coarse_size"),
    ({"cycle": "X"}, "cycle: expected one of"),
    ({"pre_sweeps": -1}, "pre_sweeps: expected an integer in 0..100"),
    ({"pre_sweeps": 0, "post_sweeps": 0}, "at least one sweep"),
    ({"smoother": "jacobi"}, "smoother"),
    ({"aggregation": "lloyd"}, "aggregation: expected one of"),
    ({"maxiter": 0}, "maxiter"),
    ({"aggregates": 3.5}, "aggregates: expected None"),
    ({"aggregates": []}, "aggregates: expected None"),
])
def test_bad_options(kw, match):
    with pytest.raises(ValueError, match=match):
        MultilevelOptions(**kw)
    with pytest.raises(ValueError, match=match):
        ncd_chain().stationary("multilevel", **kw)


def test_standard_aggregation_gets_the_split_of_weakly_coupled_blocks():
    # nearly decomposable (coupling 1e-9): the split between the blocks is right (the doctest of
    # ctmc.multigrid.standard_aggregates: the weak coupling is never aggregated across)
    chain = ncd_chain(K=12)
    res = solve(chain, "scipy", aggregation="standard", coarse_size=4, tol=1e-14)
    assert abs(res.pi[chain.states["b"] == 1].sum() - 0.25) < 1e-10
    assert np.abs(res.pi - chain.stationary("gth").pi).sum() <= res.error_bound


def test_bad_aggregates_for_the_chain():
    chain = ncd_chain(K=5)
    with pytest.raises(ValueError, match="aggregates: no state variable 'q'"):
        chain.stationary("multilevel", aggregates="q")
    with pytest.raises(ValueError, match=r"aggregates: level 1 gives 5 ids; expected one per state \(12\)"):
        chain.stationary("multilevel", aggregates=np.arange(5))
    with pytest.raises(ValueError, match="does not nest"):
        chain.stationary("multilevel", aggregates=["b", "n"])
    with pytest.raises(ValueError, match="x0: expected a non-negative vector"):
        chain.stationary("multilevel", x0=np.ones(3))


def test_registered_and_documented():
    from ctmc.stationary import METHODS
    assert METHODS["multilevel"].options is MultilevelOptions
    assert '"multilevel"' in ctmc.CTMC.stationary.__doc__


def test_automatic_levels_do_not_merge_across_weakly_coupled_blocks():
    """Three M/M/1/40 modes switched at rates ~1e-7: after a given level, the automatic coarsening
    must keep the modes apart (merging across them made the cycles stall at 12 % error), and
    must not coarsen down to a single aggregate."""
    m = ctmc.Model("ncd3")
    b, n = m.var("b", 0, 2), m.var("n", 0, 40)
    m.event("arrive", guard=n < 40, rate=0.5 + 0.1 * b, update={n: n + 1})
    m.event("serve", guard=n > 0, rate=1.0, update={n: n - 1})
    m.event("up", guard=b < 2, rate=1e-7 * (1 + n), update={b: b + 1})
    m.event("down", guard=b > 0, rate=3e-7, update={b: b - 1})
    c = m.build(initial={"b": 0, "n": 0})
    ref = c.stationary("gth").pi
    for cs in (20, 3):
        r = c.stationary("multilevel", aggregates=[b * 100 + n // 2], coarse_size=cs, check=False)
        assert r.status in (ctmc.Status.SUCCESS, ctmc.Status.INACCURATE), r.message   # see error_bound
        assert np.abs(r.pi - ref).sum() < min(1e-6, r.error_bound)
        assert min(r.info["coarse_sizes"]) >= 2


def test_level_factors_solve_the_birth_death_chain_and_cut_where_the_masses_underflow():
    """``level_factors`` against GTH on the aggregated birth-death chain: the rescaled masses are its
    law on the levels with a mass in range, and the levels past the first underflowed one keep their
    scale (factor 1), finite, where the law in logs gave 0/0."""
    from ctmc.aggregation import LEVEL_MASS_FLOOR, level_factors
    from ctmc.linalg import gth_solve
    rng = np.random.default_rng(7)
    n, k = 12, 8
    X = rng.uniform(0.5, 2.0, n)
    X[k:] = [1e-300, 0.0, 1e-310, 0.0]             # below LEVEL_MASS_FLOOR of the total, or underflowed
    a, d = rng.uniform(0.2, 3.0, n), rng.uniform(0.2, 3.0, n)
    f = level_factors(X, a * X, d * X)
    assert np.isfinite(f).all() and (f[k:] == 1.0).all() and X[k] < LEVEL_MASS_FLOOR * X.sum()
    Q = np.zeros((k, k))
    Q[np.arange(k - 1), np.arange(1, k)] = a[:k - 1]
    Q[np.arange(1, k), np.arange(k - 1)] = d[1:k]
    p = gth_solve(Q)
    np.testing.assert_allclose(f[:k] * X[:k] / X[:k].sum(), p, rtol=1e-13, atol=0)
