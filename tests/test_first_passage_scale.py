"""First passage at scale: sparse in-rates, solves on the sources' corner, blocks, and two MPI ranks.

Independent answers: dense absorbing-chain algebra (numpy solves of the
whole ``(sI - Q_RR) X = Q_RA``), exact rational arithmetic on small JSQ
chains, the hitting-time solver (minus the transform's derivative is the
mean), the invariant "rows sum to one", and the scipy backend for two PETSc
ranks. Memory: the numpy allocations of a one-source passage on a JSQ chain
stay far below one states x targets array (tracemalloc).

When run as a script (``mpirun -n 2 python tests/test_first_passage_scale.py OUT``) the
file is the two-rank job: each rank computes, rank 0 writes the numbers to ``OUT``.
"""
import json
import sys
import tracemalloc
from fractions import Fraction as Fr
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: the MPI job's JSQ instance: K = 30 (496 states), tails down to ~1e-18
MPI_K = 30
#: ... and the one solved block-triangularly on two ranks: 2485 unequal states in 70 components
BTF_K = 70


def relative_error(a, b, floor=1e-300):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    big = np.abs(b) > floor
    return float(np.max(np.abs(a[big] - b[big]) / np.abs(b[big]))) if big.any() else 0.0


# --------------------------------------------------------------------------
# the MPI job
# --------------------------------------------------------------------------
def _job(out_path):
    import warnings

    import ctmc
    from ctmc.backends.petsc_backend import load_petsc
    from ctmc.models.jsq import JSQ2

    comm = load_petsc().COMM_WORLD
    warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
    q = JSQ2(MPI_K, 0.9, 0.3)
    cases = {"one_source": dict(sources={"s": 0, "l": MPI_K}),             # adjoint, the whole chain
             "two_sources": dict(sources=[{"s": 2, "l": 7}, {"s": 11, "l": 30}]),
             "levels": dict(levels=[0, 9, MPI_K - 1])}                      # forward, every source
    # auto on a small set, with more target columns than a block holds: adjoint solves, replicated
    cases["corner"] = dict(sources=[{"s": 2, "l": 7}, {"s": 0, "l": 9}], block_memory=30_000)
    out = {"size": comm.getSize()}
    _btf_cases(out)
    for name, kw in cases.items():
        a = q.first_equality(s=[0.0, 0.4], t=[2.0], **kw)
        b = q.first_equality(s=[0.0, 0.4], t=[2.0], backend="petsc", **kw,
                             **({} if name == "corner" else {"method": "lu"}))
        out[name] = {"status": b.status.value, "adjoint": bool(b.info["adjoint"]), "method": b.method,
                     "rel_laplace": relative_error(b.laplace, a.laplace),
                     "rel_probabilities": relative_error(b.probabilities, a.probabilities),
                     "rel_cdf": relative_error(b.cdf, a.cdf),
                     "smallest": float(a.laplace[a.laplace > 0].min()),
                     "n_reach": [int(a.info["n_reach"]), int(b.info["n_reach"])]}
    if comm.getRank() == 0:
        Path(out_path).write_text(json.dumps(out))


def _btf_cases(out):
    """``auto`` on a set of 2485 states in 70 components on two ranks: gathered and solved
    block-triangularly on each; then with the gathering refused by the memory rule (one MUMPS
    factorisation). Against scipy's ``auto`` (one process, block-triangular) and ``lu``."""
    from ctmc import passage_systems
    from ctmc.models.jsq import JSQ2

    q = JSQ2(BTF_K, 0.8, 0.35, idle_rate=0.55)
    both = dict(s=[0.0, 0.6], t=[4.0])
    cases = {"btf_source": dict(sources={"s": 0, "l": BTF_K}), "btf_levels": dict(levels=[0, 35, BTF_K - 1])}
    for name, kw in cases.items():
        a, lu = q.first_equality(**both, **kw), q.first_equality(method="lu", **both, **kw)
        b = q.first_equality(**both, backend="petsc", **kw)
        saved = getattr(passage_systems, "BTF_GATHER_BYTES", None)
        passage_systems.BTF_GATHER_BYTES = 1e30            # nothing fits: the distributed factorisation
        try:
            c = q.first_equality(**both, backend="petsc", **kw)
        finally:
            passage_systems.BTF_GATHER_BYTES = saved
        out[name] = {"methods": [a.method, b.method, c.method], "status": [b.status.value, c.status.value],
                     "components": int(b.info.get("components", 0)), "blocks": int(b.info.get("blocks", 0)),
                     "smallest": float(lu.laplace[lu.laplace > 0].min()),
                     "rel_lu": relative_error(b.laplace, lu.laplace),
                     "rel_scipy": max(relative_error(b.laplace, a.laplace), relative_error(b.cdf, a.cdf),
                                      relative_error(b.probabilities, a.probabilities)),
                     "rel_refused": max(relative_error(c.laplace, a.laplace), relative_error(c.cdf, a.cdf)),
                     "balance": float(b.info["balance_error"])}


if __name__ == "__main__":
    _job(sys.argv[1])
    sys.exit(0)


import ctmc  # noqa: E402
from ctmc.backends import operator_for  # noqa: E402
from ctmc.backends.csr import rate_columns  # noqa: E402
from ctmc.models.jsq import JSQ2  # noqa: E402
from ctmc.models.jsq.first_equality import level_blocks  # noqa: E402

sys.path.insert(0, str(HERE))
from reference import fraction_solve  # noqa: E402
from mpi_jobs import needs_mpi, run_job  # noqa: E402


def _random_chain(n=60, seed=3, density=0.06):
    """A sparse chain with an absorbing pair of states and states that cannot reach them."""
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=density, random_state=rng, data_rvs=lambda k: rng.uniform(0.1, 3.0, k)).tolil()
    R.setdiag(0)
    R[n - 2:, :] = 0                       # two absorbing targets
    R[: n // 3, n - 2] = 0.5 * rng.uniform(size=(n // 3, 1))
    R[10:14, :] = 0                        # a closed class 10..13 that never reaches the targets
    for i in range(10, 14):
        R[i, 10 + (i - 9) % 4] = 1.0
    R = R.tocsr()
    R.eliminate_zeros()
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    return ctmc.CTMC(Q), Q


def _dense_absorption(Q, target, s):
    """(sI - Q_RR)^-1 Q_RA by a dense solve on every non-target state that can reach A."""
    Qd = Q.toarray()
    n = Qd.shape[0]
    A = np.flatnonzero(target)
    other = np.flatnonzero(~target)
    # states that can reach A: closure by powers of the adjacency
    adj = (Qd != 0) & ~np.eye(n, dtype=bool)
    reach = target.copy()
    for _ in range(n):
        new = reach | (adj[:, reach].any(axis=1))
        if (new == reach).all():
            break
        reach = new
    Rr = np.flatnonzero(reach & ~target)
    out = np.zeros((n, A.size))
    out[A, np.arange(A.size)] = 1.0
    M = s * np.eye(Rr.size) - Qd[np.ix_(Rr, Rr)]
    out[Rr] = np.linalg.solve(M, Qd[np.ix_(Rr, A)])
    return out, other


# --------------------------------------------------------------------------
# the sparse block of in-rates
# --------------------------------------------------------------------------
def test_rate_columns_is_the_dense_block_on_every_route():
    chain, Q = _random_chain()
    n = Q.shape[0]
    rng = np.random.default_rng(0)
    rows = rng.uniform(size=n) < 0.5
    cols = np.sort(rng.choice(n, 9, replace=False))
    R = Q.toarray()
    np.fill_diagonal(R, 0.0)
    want = np.where(rows[:, None], R[:, cols], 0.0)
    assert np.array_equal(rate_columns(Q, rows, cols).toarray(), want)
    assert np.array_equal(operator_for(chain, "scipy").rate_columns(rows, cols).toarray(), want)
    # the protocol's default (from local_rows, the route of the PETSc backend) gives the same
    op = operator_for(chain, "scipy")
    base = type(op).__mro__[1].rate_columns(op, rows, cols)
    assert np.array_equal(base.toarray(), want)
    assert rate_columns(Q, rows, np.zeros(0, dtype=np.int64)).shape == (n, 0)


# --------------------------------------------------------------------------
# first_passage against dense absorbing-chain algebra
# --------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["lu", "gmres"])
@pytest.mark.parametrize("sources", [[0, 5], None])
def test_first_passage_matches_dense_absorption_on_both_solve_directions(method, sources):
    chain, Q = _random_chain()
    n = Q.shape[0]
    tgt = np.zeros(n, dtype=bool)
    tgt[n - 2:] = True
    fp = chain.first_passage(tgt, s=[0.0, 0.8], sources=sources, method=method, check=False)
    assert fp.status in ("success", "tail_inaccurate")
    assert fp.info["adjoint"] == (sources is not None)
    rows = np.arange(n) if sources is None else np.array(sources)
    for k, s in enumerate([0.0, 0.8]):
        want = _dense_absorption(Q, tgt, s)[0][rows]
        # (the dense solve leaves round-off where the law is exactly zero: an absolute floor)
        assert np.allclose(fp.laplace[k], want, rtol=1e-8 if method == "gmres" else 1e-12, atol=1e-14)
    # the closed class 10..13 cannot reach the targets: zero rows, not an error
    if sources is None:
        assert np.all(fp.probabilities[10:14] == 0.0)


def test_blocks_and_column_subsets_give_the_same_numbers():
    chain, Q = _random_chain(n=80, seed=7)
    n = Q.shape[0]
    tgt = np.zeros(n, dtype=bool)
    tgt[[n - 2, n - 1, 20, 30]] = True
    whole = chain.first_passage(tgt, s=[0.5], t=[0.7], method="lu")
    narrow = chain.first_passage(tgt, s=[0.5], t=[0.7], method="lu", block_memory=1)     # one column a block
    assert narrow.info["block_width"] == 1 and narrow.info["blocks"] > whole.info["blocks"]
    for a in ("probabilities", "laplace", "cdf"):
        assert np.allclose(getattr(narrow, a), getattr(whole, a), rtol=1e-13, atol=1e-300)
    cols = [20, n - 1]
    sub = chain.first_passage(tgt, s=[0.5], t=[0.7], method="lu", targets=cols)
    pos = np.searchsorted(whole.targets, cols)
    assert sub.targets.tolist() == cols
    assert np.allclose(sub.laplace, whole.laplace[..., pos], rtol=1e-13, atol=1e-300)
    assert np.allclose(sub.cdf, whole.cdf[..., pos], rtol=1e-12, atol=1e-300)
    few = chain.first_passage(tgt, s=[0.5], t=[0.7], sources=[3, 40], method="lu", block_memory=1)
    assert few.info["adjoint"] and np.allclose(few.laplace, whole.laplace[:, [3, 40]], rtol=1e-13, atol=1e-300)
    assert np.allclose(few.cdf, whole.cdf[:, [3, 40]], rtol=1e-12, atol=1e-300)


def test_bad_columns_and_oversized_answers_are_refused_before_any_work():
    chain, Q = _random_chain()
    n = Q.shape[0]
    tgt = np.zeros(n, dtype=bool)
    tgt[n - 2:] = True
    with pytest.raises(ValueError, match="targets"):
        chain.first_passage(tgt, targets=[0])
    with pytest.raises(ValueError, match="max_result_bytes"):
        chain.first_passage(tgt, s=[0.1, 0.2], max_result_bytes=100)
    with pytest.raises(ValueError, match="block_memory"):
        chain.first_passage(tgt, block_memory=0)
    with pytest.raises(ValueError, match="levels"):
        JSQ2(5, 0.9, 0.3).first_equality(levels=[6])
    with pytest.raises(ValueError, match="levels"):
        JSQ2(5, 0.9, 0.3).first_equality(levels=[])


# --------------------------------------------------------------------------
# JSQ: one source at a size where states x targets would not fit the test's memory
# --------------------------------------------------------------------------
def test_one_source_allocates_nothing_of_states_by_targets():
    q = JSQ2(200, 0.9, 0.3)              # 20 301 states, 201 targets: a dense block is 33 MB
    ch = q.chain()
    n, m = ch.n_states, q.K + 1
    ch.first_passage(lambda e: e["s"] == e["l"], sources=[0])       # warm the chain's caches
    tracemalloc.start()
    fp = q.first_equality(s=[0.0], sources={"s": 0, "l": q.K})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert fp.info["adjoint"] and fp.info["n_reach"] == q.K * (q.K + 1) // 2
    assert peak < 0.25 * 8 * n * m, peak          # numpy's allocations; SuperLU's factors are its own
    law = fp.probabilities[0]
    assert abs(law.sum() - 1.0) < 1e-12                     # equality is reached almost surely
    # minus the transform's slope at 0 is the mean time to equality (the hitting-time solver)
    mean = ch.hitting_times(lambda e: e["s"] == e["l"]).mean[ch.index(s=0, l=q.K)]
    h = 1e-4 / mean
    phi = q.first_equality(s=[h, 2 * h], sources={"s": 0, "l": q.K}).laplace[:, 0].sum(axis=1)
    slope = (-3 + 4 * phi[0] - phi[1]) / (2 * h)          # one-sided, second order, from phi(0) = 1
    assert abs(-slope / mean - 1) < 1e-6


def test_a_low_source_solves_on_its_corner_only():
    q = JSQ2(200, 1.2, 0.4, idle_rate=0.7)
    fp = q.first_equality(s=[0.0, 0.3], sources=[{"s": 2, "l": 7}, {"s": 0, "l": 9}])
    assert fp.info["n_reach"] == 9 * 10 // 2                  # the unequal states with l <= 9
    small = JSQ2(12, 1.2, 0.4, idle_rate=0.7).first_equality(s=[0.0, 0.3], sources=[{"s": 2, "l": 7},
                                                                                      {"s": 0, "l": 9}])
    # below the larger chain's level 12 the two chains have the same rates: the same law
    assert np.allclose(fp.laplace[..., :13], small.laplace, rtol=1e-13, atol=1e-300)
    assert np.all(fp.laplace[..., 13:] == 0.0)


@pytest.mark.parametrize("K,rho,mu2,nu", [(3, 0.9, 0.25, 0.5), (4, 1.3, 1.0, 1.0)])
def test_levels_and_sources_against_exact_rationals(K, rho, mu2, nu):
    # exact arithmetic on the chain's own rates (each float is a rational): the linear algebra of
    # both solve directions against Gauss-Jordan elimination in Fractions
    q = JSQ2(K, rho, mu2, nu)
    ch = q.chain()
    Q = [[Fr(v) for v in row] for row in ch.Q.toarray()]
    eq = (ch.states["s"] == ch.states["l"])
    F = np.flatnonzero(~eq).tolist()
    s = Fr(1, 3)
    A = [[(s if i == j else Fr(0)) - Q[i][j] for j in F] for i in F]
    by_level = q.first_equality(s=[float(s)], levels=[0, K - 1])                    # forward, every source
    by_source = q.first_equality(s=[float(s)], sources=[{"s": 0, "l": K}, {"s": 1, "l": 3}], block_memory=24)
    assert not by_level.info["adjoint"] and by_source.info["adjoint"]
    for res in (by_level, by_source):
        for c, j in enumerate(res.targets):
            x = fraction_solve(A, [Q[i][j] for i in F])
            for r, i in enumerate(res.sources):
                want = float(x[F.index(i)])
                assert abs(res.laplace[0, r, c] - want) <= 1e-14 * want + 1e-300


def test_level_blocks_cover_every_level_once():
    q = JSQ2(20, 0.9, 0.3)
    whole = q.first_equality(s=[0.2])
    got = np.concatenate([r.laplace[0] for _, r in level_blocks(q, 6, s=[0.2])], axis=1)
    assert np.allclose(got, whole.laplace[0], rtol=1e-13, atol=1e-300)
    assert np.allclose(whole.probabilities.sum(axis=1), 1.0, rtol=1e-13)


# --------------------------------------------------------------------------
# two MPI ranks against scipy
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """The numbers of the two-rank job (run once for the tests below)."""
    return run_job(__file__, tmp_path_factory.mktemp("mpi") / "fp.json", timeout=400)


@pytest.mark.petsc
@needs_mpi
def test_two_ranks_first_equality_matches_scipy(two_ranks):
    r = two_ranks
    assert min(r[name]["smallest"] for name in ("one_source", "two_sources", "levels")) < 1e-17
    assert r["corner"]["method"] == "lu-replicated" and r["corner"]["n_reach"] == [45, 45]
    for name in ("one_source", "two_sources", "levels", "corner"):
        c = r[name]
        assert c["status"] == "success", (name, c)
        assert c["adjoint"] == (name != "levels")
        assert c["n_reach"][0] == c["n_reach"][1]
        for k in ("rel_laplace", "rel_probabilities", "rel_cdf"):
            assert c[k] < 1e-9, (name, k, c[k])


@pytest.mark.petsc
@needs_mpi
def test_two_ranks_gather_the_set_and_solve_it_block_triangularly(two_ranks):
    """On two ranks ``auto`` gathers a set that splits into components and solves it block by block on
    each (not one MUMPS factorisation of every state), equal to scipy down to the 1e-25 tail; when the
    gathered set does not fit the memory rule, the distributed factorisation answers the same."""
    r = two_ranks
    for name in ("btf_source", "btf_levels"):
        c = r[name]
        assert c["methods"] == ["btf", "btf", "lu"], (name, c)
        assert c["status"] == ["success", "success"], (name, c)
        assert c["components"] == BTF_K and 1 < c["blocks"] < BTF_K
        assert c["smallest"] < 1e-25
        assert c["rel_scipy"] < 1e-12 and c["rel_lu"] < 1e-9 and c["rel_refused"] < 1e-9, (name, c)
        assert c["balance"] < 1e-13


# --------------------------------------------------------------------------
# the block-triangular solve (auto, one process) against one factorisation of the whole set
# --------------------------------------------------------------------------
def test_block_triangular_solve_agrees_with_the_whole_factorisation_down_to_the_tail():
    q = JSQ2(70, 0.8, 0.35, idle_rate=0.55)          # 2485 unequal states in 70 components
    both = dict(s=[0.0, 0.6], t=[4.0])
    for kw in (dict(sources={"s": 0, "l": 70}), dict(levels=[0, 35, 69])):     # adjoint, forward
        auto = q.first_equality(**both, **kw)
        lu = q.first_equality(method="lu", **both, **kw)
        assert auto.method == "btf" and lu.method == "lu"
        assert auto.info["components"] == 70 and auto.info["blocks"] < 70
        tiny = lu.laplace[lu.laplace > 0].min()
        assert tiny < 1e-25                                  # the tail is in the comparison
        assert relative_error(auto.laplace, lu.laplace) < 1e-12
        assert auto.status == "success" and auto.info["balance_error"] < 1e-13
