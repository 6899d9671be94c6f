"""The PETSc backend in one process: the same answers as exact laws and the scipy backend.

Skipped, with the reason, where petsc4py is not installed; the two-process
runs are in ``test_petsc_mpi.py``.
"""
import builtins
import warnings

import numpy as np
import pytest
import reference as ref
from chains import jsq, saturation_mean_closed_form, trap_chain

import ctmc
from ctmc.backends.petsc import _env as _petsc_env
from ctmc.backends.petsc_backend import INSTALL_HELP, available, slepc_available
from ctmc.results import SolverError, Status

needs_petsc = pytest.mark.skipif(not available(), reason=f"petsc4py not installed: {INSTALL_HELP}")
needs_slepc = pytest.mark.skipif(not slepc_available(), reason=f"slepc4py not installed: {INSTALL_HELP}")
pytestmark = pytest.mark.petsc

METHODS = ["lu", "gmres", "bicgstab", pytest.param("eig", marks=needs_slepc)]
TRANSIENT = ["uniformization", pytest.param("expm", marks=needs_slepc)]
CASES = {c.name: c for c in ref.CASES}


def relative_error(a, b, floor=1e-250):
    """Largest relative error over the entries of ``b`` above ``floor``."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    big = np.abs(b) > floor
    return float(np.max(np.abs(a[big] - b[big]) / np.abs(b[big]))) if big.any() else 0.0


def stationary(chain, method, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
        return chain.stationary(method, backend="petsc", check=False, **kw)


@needs_petsc
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_stationary_reference_chains(name, method):
    case = CASES[name]
    chain = case.build()
    exact = case.exact_pi()
    res = stationary(chain, method)
    assert res.backend == "petsc" and res.method == method
    assert res.status in (Status.SUCCESS, Status.TAIL_INACCURATE), res.message
    assert np.abs(res.pi - exact).sum() < 1e-8
    assert res.residual < 1e-8 and res.pi.min() >= 0
    # the residual is recomputed, not PETSc's estimate
    assert res.residual == pytest.approx(np.abs(res.pi @ chain.Q.toarray()).sum(), rel=1e-6, abs=1e-15)
    if res.status is Status.SUCCESS:
        # a success holds component-wise: small probabilities are not noise (the
        # balance check bounds each state's imbalance by tail_tol = 1e-6; the
        # error accumulates along the chain, hence the looser bound)
        assert relative_error(res.pi, exact) < 1e-4
    if method == "lu":
        assert res.status is Status.SUCCESS
        assert relative_error(res.pi, exact) < 1e-9
        assert res.info["factor_package"] == "mumps"


@needs_petsc
@pytest.mark.parametrize("name", sorted(CASES))
def test_stationary_auto_matches_scipy(name):
    chain = CASES[name].build()
    a = chain.stationary()
    b = stationary(chain, "auto")
    assert b.status is Status.SUCCESS
    assert relative_error(b.pi, a.pi) < 1e-9


@needs_petsc
@pytest.mark.parametrize("method", ["lu", "gmres"])
@pytest.mark.parametrize("K,rho,mu1,nu", [(8, 0.9, 0.5, 0.5), (12, 1.3, 0.3, 0.7)])
def test_hitting_times_against_closed_form(K, rho, mu1, nu, method):
    m, s, l = jsq(K, rho, mu1, nu)
    chain = m.build(initial={"s": 0, "l": 0})
    target = (s == K) & (l == K)
    h = chain.hitting_times(target, moments=2, backend="petsc", method=method)
    exact = np.array([saturation_mean_closed_form(K, rho, mu1, nu, x, y)
                      for x, y in zip(chain.states["s"], chain.states["l"])])
    assert h.status is Status.SUCCESS and h.backend == "petsc"
    assert np.allclose(h.mean, exact, rtol=1e-8, atol=0)
    ref2 = chain.hitting_times(target, moments=2)
    assert relative_error(h.moments[1], ref2.moments[1]) < 1e-8
    assert h.residual < 1e-10 and h.info["balance_error"] < 1e-6


@needs_petsc
@pytest.mark.parametrize("method", ["lu", "gmres"])
def test_rare_target_is_exact_or_flagged(method):
    # means about 4e12 (rho = 0.5, K = 20): a plain sparse solve loses the digits.
    # Both backends now recompute the mean through a regeneration state, so LU
    # is a success matching the closed form; a Krylov answer is exact or flagged.
    K, rho, mu1, nu = 20, 0.5, 0.8, 1.0
    m, s, l = jsq(K, rho, mu1, nu)
    chain = m.build(initial={"s": 0, "l": 0})
    h = chain.hitting_times((s == K) & (l == K), backend="petsc", method=method, check=False)
    exact = np.array([saturation_mean_closed_form(K, rho, mu1, nu, x, y)
                      for x, y in zip(chain.states["s"], chain.states["l"])])
    if method == "lu":
        assert h.status is Status.SUCCESS and h.method == "lu-regenerative", h.message
        assert h.info["condition"] < 1e8 and "regeneration_state" in h.info
    if h.status is Status.SUCCESS:
        assert relative_error(h.mean, exact) < 1e-9
    else:
        assert h.status in (Status.INACCURATE, Status.BREAKDOWN, Status.MAX_ITERATIONS)
        assert h.info["condition"] > 1e8 or h.status is not Status.INACCURATE


@needs_petsc
def test_hitting_times_birth_death_and_reward():
    K, lam, mu = 30, 0.7, 1.0
    chain = ref.mm1k(K, lam, mu)
    n = chain.states["n"]
    h = chain.hitting_times(n == K, backend="petsc")
    exact = np.array([float(ref.hitting_mean_bd(K, lam, mu, i)) for i in range(K + 1)])
    assert relative_error(h.mean, exact) < 1e-10
    r = np.linspace(0.5, 2.0, K + 1)
    a = chain.hitting_times(n == 0, moments=3, reward=r)
    b = chain.hitting_times(n == 0, moments=3, reward=r, backend="petsc")
    assert relative_error(b.moments, a.moments) < 1e-9


@needs_petsc
def test_hitting_sets_with_unreachable_target():
    chain, x = trap_chain()
    a = chain.hitting_times(x == 0)
    b = chain.hitting_times(x == 0, backend="petsc")
    assert np.array_equal(np.isinf(a.mean), np.isinf(b.mean)) and np.isinf(b.mean).sum() > 0
    assert np.array_equal(a.finite, b.finite)
    fin = np.isfinite(a.mean)
    assert relative_error(b.mean[fin], a.mean[fin]) < 1e-10
    la = chain.hitting_laplace(x == 0, [0.0, 0.7])
    lb = chain.hitting_laplace(x == 0, [0.0, 0.7], backend="petsc")
    assert np.allclose(lb.values, la.values, rtol=1e-10, atol=1e-15)
    # the closed class is the absorbing state x = 10; the others are transient
    pa, pb = chain.stationary(), chain.stationary(backend="petsc")
    assert np.allclose(pb.pi, pa.pi, rtol=1e-10, atol=1e-300) and pb.pi[chain.index(x=10)] == 1.0


@needs_petsc
@pytest.mark.parametrize("method", ["lu", "gmres"])
def test_laplace_and_first_passage_match_scipy(method):
    m, s, l = jsq(12, 0.9, 0.5, 0.5)
    chain = m.build(initial={"s": 0, "l": 0})
    a = chain.hitting_laplace(s == 0, [0.0, 0.5, 2.0])
    b = chain.hitting_laplace(s == 0, [0.0, 0.5, 2.0], backend="petsc", method=method)
    # entry by entry as accurate as the result's own component-wise balance error says
    assert relative_error(b.values, a.values) < max(1e-8, 10 * b.info["balance_error"])
    assert b.info["balance_error"] <= 1e-6 and b.status is Status.SUCCESS
    tgt = (l == 0) | (l == 12)
    for src in ({"s": 3, "l": 5}, l <= 2):  # fewer sources than targets, then more
        fa = chain.first_passage(tgt, s=[0.3], t=[1.0, 5.0], sources=src)
        fb = chain.first_passage(tgt, s=[0.3], t=[1.0, 5.0], sources=src, backend="petsc", method=method)
        assert np.array_equal(fa.targets, fb.targets) and np.array_equal(fa.sources, fb.sources)
        assert fb.status is Status.SUCCESS and fb.residual < 1e-10
        # a direct solve is accurate entry by entry; GMRES's (one adjoint solve per
        # source, as on scipy) to its normwise tolerance: tiny entries less
        tol = dict(rtol=1e-9, atol=1e-14) if method == "lu" else dict(rtol=1e-9, atol=1e-12)
        assert np.allclose(fb.probabilities, fa.probabilities, **tol)
        assert np.allclose(fb.probabilities.sum(axis=1), 1.0, atol=1e-9)
        assert np.allclose(fb.laplace, fa.laplace, **tol)
        assert np.allclose(fb.cdf, fa.cdf, rtol=1e-9, atol=1e-13)
        assert fb.error_bound <= 1e-12


@needs_petsc
@pytest.mark.parametrize("method", TRANSIENT)
def test_transient_two_state_closed_form(method):
    a, b = 2.0, 3.0
    chain = ref.two_state(a, b)
    t = np.array([0.0, 0.1, 1.0, 4.0])
    res = chain.transient(np.array([1.0, 0.0]), t, backend="petsc", method=method)
    exact = b / (a + b) + a / (a + b) * np.exp(-(a + b) * t)
    assert res.status is Status.SUCCESS
    assert np.allclose(res.p[:, 0], exact, rtol=1e-10, atol=1e-14)


@needs_petsc
@pytest.mark.parametrize("method", TRANSIENT)
def test_transient_matches_scipy(method):
    m, s, l = jsq(12, 0.9, 0.5, 0.5)
    chain = m.build(initial={"s": 0, "l": 0})
    a = chain.transient({"s": 0, "l": 0}, [0.5, 3.0, 10.0])
    b = chain.transient({"s": 0, "l": 0}, [0.5, 3.0, 10.0], backend="petsc", method=method)
    assert np.abs(b.p - a.p).max() < 1e-10 and b.residual < 1e-10


@needs_petsc
def test_distributed_chain_from_model_equals_serial():
    from ctmc.backends.petsc_backend import DistributedChain
    m, s, l = jsq(15, 1.1, 0.5, 0.5)
    chain = m.build(initial={"s": 0, "l": 0})
    dc = DistributedChain.from_model(m, {"s": 0, "l": 0})
    assert dc.n_states == chain.n_states and (dc.start, dc.stop) == (0, chain.n_states)
    r = dc.stationary("lu", backend_options={"gather": "all"})
    assert relative_error(r.pi, chain.stationary().pi) < 1e-10
    thr = dc.allsum(float(r.pi @ dc.event_rate("blocked")))
    assert thr == pytest.approx(chain.stationary().pi @ chain.event_rate("blocked"), rel=1e-10)
    h = dc.hitting_times((s == 15) & (l == 15), backend_options={"gather": "all"})
    assert relative_error(h.mean, chain.hitting_times((s == 15) & (l == 15)).mean) < 1e-9
    fa = chain.first_passage((l == 0) | (l == 15), t=[2.0], sources={"s": 2, "l": 4})
    fb = dc.first_passage((l == 0) | (l == 15), t=[2.0], sources={"s": 2, "l": 4})
    assert np.allclose(fb.cdf, fa.cdf, rtol=1e-9, atol=1e-14) and np.array_equal(fb.sources, fa.sources)
    ta = chain.transient(lambda env: env["s"] + env["l"] == 0, [1.0])
    tb = dc.transient(lambda env: env["s"] + env["l"] == 0, [1.0], backend_options={"gather": "all"})
    assert np.abs(tb.p - ta.p).max() < 1e-12
    with pytest.raises(ValueError, match="target"):
        dc.hitting_times(np.array([0.5]))
    none = dc.stationary("gmres", backend_options={"gather": "none"})
    assert none.info["rows"] == (0, chain.n_states) and none.pi.shape == (chain.n_states,)
    root = dc.stationary("lu")  # default for a distributed chain: rank 0 (this one) gets it all
    assert root.pi.shape == (chain.n_states,)
    assert dc.memory()["local_nnz"] >= chain.Q.nnz


@needs_petsc
def test_status_mapping_and_options_database():
    chain = ref.mmck(40, 3, 2.5, 1.0)
    # a PETSc option (under the ctmc_ prefix) reaches the KSP: one iteration is not enough
    res = chain.stationary("gmres", backend="petsc", check=False,
                           backend_options={"petsc_options": {"ksp_max_it": 1, "pc_type": "none"}})
    assert res.status is Status.MAX_ITERATIONS and "DIVERGED_MAX_IT" in res.message, res.message
    with pytest.raises(SolverError) as err:
        chain.stationary("gmres", backend="petsc", maxiter=1, preconditioner="none")
    assert err.value.result.status is Status.MAX_ITERATIONS
    # the options are removed afterwards
    assert stationary(chain, "gmres").status is Status.SUCCESS


@needs_petsc
@pytest.mark.parametrize("method", ["lu", "bicgstab"])
def test_negligible_initial_pin_is_moved(method):
    # JSQ rho = 0.5 started at the full corner (K, K): pinned there, the system
    # is useless (LU gives relative errors ~50); the solve is redone pinned at
    # the most probable state, and the answer matches the scipy backend
    K = 30
    chain = jsq(K, 0.5, 0.5, 0.5)[0].build(initial={"s": K, "l": K})
    exact = chain.stationary()
    res = stationary(chain, method)
    if method == "lu":
        assert res.info["pins"] == [chain.index(s=K, l=K), int(np.argmax(exact.pi))]
        assert res.status is Status.SUCCESS, res.message
        assert relative_error(res.pi, exact.pi) < 1e-9
    else:   # Krylov methods start at the slowest-exit state, never at the initial corner
        assert res.info["pins"][0] != chain.index(s=K, l=K)
        assert np.abs(res.pi - exact.pi).sum() < 1e-8   # normwise accurate
        # a Krylov tail is accurate or flagged, never silently wrong
        assert res.status in (Status.SUCCESS, Status.TAIL_INACCURATE), res.message
        if res.status is Status.SUCCESS:
            assert relative_error(res.pi, exact.pi) < 1e-4
        else:       # flagged by its balance or by its tail's error (one correction solve), and truly off
            assert res.balance_error > 1e-6 or res.info["tail_error_corrected"] > 1e-6
            assert relative_error(res.pi, exact.pi) > 1e-6


@needs_petsc
@pytest.mark.parametrize("method", ["gmres", "bicgstab", "lu"])
def test_krylov_does_not_stall_on_a_negligible_initial_pin(method):
    # JSQ with rho = 1.3 starts at (0, 0), of probability ~1e-48: pinned there
    # GMRES breaks down after its whole iteration budget (2000 iterations in
    # 0.7 s at K = 80; 10 000 iterations and minutes on larger chains). The
    # Krylov methods now start at the slowest-exit state, LU moves off a pin
    # whose solution has significant negatives.
    from ctmc.models.jsq import JSQ2, blocking_probability
    K, rho = 80, 1.3
    chain = JSQ2(K, rho, 0.5).chain()
    res = stationary(chain, method)
    assert res.iterations < 200
    pb = res.pi[chain.index(s=K, l=K)]
    assert abs(pb / blocking_probability(K, rho, 0.5) - 1) < 1e-8
    assert res.info["pins"][-1] == chain.index(s=K, l=K)


@needs_petsc
@pytest.mark.parametrize("method", ["gmres", "bicgstab"])
def test_passage_tail_error_is_flagged(method):
    # E_(0,0)[exp(-s T)] for the far corner of JSQ(20) is ~1e-25 at s = 2, 5: norm-wise
    # converged Krylov solves get such tails wrong; a success must hold component-wise
    K = 20
    m, s, l = jsq(K, 0.9, 0.5, 0.5)
    chain = m.build(initial={"s": 0, "l": 0})
    tgt = (s == K) & (l == K)
    a = chain.hitting_laplace(tgt, [2.0, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
        b = chain.hitting_laplace(tgt, [2.0, 5.0], backend="petsc", method=method, check=False)
    assert b.status in (Status.SUCCESS, Status.TAIL_INACCURATE), b.message
    assert np.abs(b.values - a.values).max() < 1e-8  # norm-wise accurate either way
    rel = relative_error(b.values, a.values)
    assert (b.status is Status.TAIL_INACCURATE) == (b.info["balance_error"] > 1e-6)
    if b.status is Status.SUCCESS:
        assert rel < 1e-5, rel
    if method == "gmres":
        # the Gauss-Seidel polish after GMRES keeps the tail; without it this instance
        # loses it (rel ~1e-4 at s = 2) and says so
        assert b.status is Status.SUCCESS and b.info["polish_sweeps"] > 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
            raw = chain.hitting_laplace(tgt, [2.0, 5.0], backend="petsc", method=method, check=False, polish=0)
        assert relative_error(raw.values, a.values) > 1e-5 and raw.status is Status.TAIL_INACCURATE


@needs_slepc
@pytest.mark.parametrize("opts", [{"mfn_max_it": 1}, {"mfn_max_it": 1, "mfn_ncv": 3}])
def test_expm_unconverged_mfn_is_not_success(opts):
    chain = jsq(12, 0.9, 0.5, 0.5)[0].build(initial={"s": 0, "l": 0})
    a = chain.transient({"s": 0, "l": 0}, [3.0, 20.0])
    b = chain.transient({"s": 0, "l": 0}, [3.0, 20.0], backend="petsc", method="expm", check=False,
                        backend_options={"petsc_options": opts})
    assert b.info["reason"] == "DIVERGED_ITS" and b.status is Status.MAX_ITERATIONS, b.message
    # the truncated Krylov answer is indeed not the transient law
    assert np.abs(b.p - a.p).max() > 1e-11  # scipy: error bound 2.5e-14


@needs_slepc
@pytest.mark.parametrize("name", ["mm1k_K1000", "bd_1e-200"])
def test_eig_negative_entries_are_reported(name):
    # tails far below the eigensolver's accuracy come back as noise of both signs;
    # the zeros left by clipping the negative ones must be reported, not hidden
    case = CASES[name]
    exact = case.exact_pi()
    res = stationary(case.build(), "eig", polish=0)   # the grading alone, without the repairing sweeps
    lost = (res.pi == 0) & (exact > 1e-250)
    assert lost.any()  # the instance does lose tail probabilities
    assert res.info.get("negative_states", 0) > 0
    assert res.status is Status.TAIL_INACCURATE


@needs_petsc
def test_index_overflow_raises_instead_of_wrapping(monkeypatch):
    import ctmc.backends.petsc.distributed as pb
    chain = ref.mm1k(50, 0.7, 1.0)  # 51 states, 151 stored entries with the diagonal slots
    monkeypatch.setattr(pb, "_INDEX_MAX", 100)
    with pytest.raises(ValueError, match="stored entries.*64-bit-indices"):
        pb.DistributedChain.from_chain(chain)
    monkeypatch.setattr(pb, "_INDEX_MAX", 50)
    with pytest.raises(ValueError, match="n_states: 51 exceeds"):
        pb.DistributedChain.from_chain(chain)
    monkeypatch.setattr(pb, "_INDEX_MAX", 151)
    assert pb.DistributedChain.from_chain(chain).memory()["local_nnz"] == 151


def _far_first_passage():
    """JSQ2(30) from the empty state to {the full state, the state n // 3}: badly conditioned."""
    from ctmc.models.jsq import JSQ2
    chain = JSQ2(30, 0.6, 0.3).chain()
    tgt = np.zeros(chain.n_states, bool)
    tgt[[-1, chain.n_states // 3]] = True
    return chain, tgt


@needs_petsc
def test_first_passage_invariant_alone_flags_a_wrong_answer(monkeypatch):
    # with the condition estimate made useless and GMRES's own breakdown report
    # turned into a success, the row-sum invariant (the chain is irreducible: the
    # targets are reached almost surely, rows sum to 1) must still catch its wrong answer
    from ctmc.backends.petsc.solvers import PetscSystem
    from ctmc.backends.base import SolveReport
    chain, tgt = _far_first_passage()
    exact = chain.first_passage(tgt, sources=[0])
    monkeypatch.setattr(ctmc.passage.PassageSetup, "condition", lambda self, s, on: (1.0, Status.SUCCESS, ""))
    real_solve = PetscSystem.solve

    def solve_claiming_success(self, b, transpose=False):
        x, rep = real_solve(self, b, transpose)
        return x, SolveReport(Status.SUCCESS, "CONVERGED_RTOL", rep.iterations)
    monkeypatch.setattr(PetscSystem, "solve", solve_claiming_success)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = chain.first_passage(tgt, sources=[0], backend="petsc", method="gmres", check=False)
    assert exact.probabilities.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.abs(res.probabilities - exact.probabilities).max() > 1e-6   # GMRES is wrong here
    assert res.status is Status.INACCURATE and "invariant" in res.message, res.message


@needs_petsc
def test_unconverged_condition_solve_gives_no_estimate():
    # the estimate ||M|| ||M^-1 1|| is a lower bound only if M y = 1 is solved:
    # two GMRES iterations do not, so there is no estimate and no vouching
    import ctmc.passage
    chain, tgt = _far_first_passage()
    op = ctmc.backends.operator_for(chain, "petsc")
    opts = ctmc.options.KrylovSolverOptions(maxiter=2)
    ps = ctmc.passage.PassageSetup(op, tgt, "gmres", opts, {})
    cond, st, why = ps.condition(0.0, "reach")
    ps.close()
    assert cond == np.inf and st is Status.MAX_ITERATIONS and "DIVERGED_MAX_IT" in why
    status, msg = ctmc.passage.grade_passage("gmres", err=0.0, bal=0.0, opts=opts, cond=cond,
                                             solve_status=Status.SUCCESS, reason="CONVERGED_RTOL",
                                             cond_status=st, cond_reason=why)
    assert status is Status.INACCURATE and "could not be estimated" in msg


@pytest.fixture
def ambient_options():
    """Options already in the database, as from the command line or PETSC_OPTIONS."""
    from ctmc.backends.petsc_backend import load_petsc
    db = load_petsc().Options()
    names = ("ctmc_ksp_max_it", "ctmc_pc_type", "ctmc_ksp_gmres_modifiedgramschmidt")
    assert not any(db.hasName(n) for n in names)
    db.setValue("ctmc_ksp_max_it", "1")
    db.setValue("ctmc_pc_type", "none")
    db.setValue("ctmc_ksp_gmres_modifiedgramschmidt", "")
    yield db
    for n in names:
        if db.hasName(n):
            db.delValue(n)


@needs_petsc
def test_per_call_options_do_not_overwrite_ambient_options(ambient_options):
    db = ambient_options
    chain = ref.mmck(40, 3, 2.5, 1.0)
    # the ambient options act: one unpreconditioned iteration is not enough
    assert stationary(chain, "gmres").status is Status.MAX_ITERATIONS
    # a per-call value wins for that call only ...
    res = stationary(chain, "gmres", backend_options={"petsc_options": {
        "ksp_max_it": 5000, "pc_type": "bjacobi", "ksp_gmres_modifiedgramschmidt": None}})
    assert res.status is Status.SUCCESS
    # ... and the ambient values are back afterwards, flags included
    assert db.getString("ctmc_ksp_max_it", None) == "1" and db.getString("ctmc_pc_type", None) == "none"
    assert db.hasName("ctmc_ksp_gmres_modifiedgramschmidt")
    assert stationary(chain, "gmres").status is Status.MAX_ITERATIONS


@needs_petsc
@pytest.mark.parametrize("kw,match", [
    ({"tol": -1}, "tol"), ({"backend_options": {"gather": "some"}}, "gather"),
    ({"preconditioner": "amg"}, "preconditioner"), ({"bogus": 1}, "options"),
    # the scipy backend's multilevel V-cycle is not PETSc's (named, refused before any work)
    ({"preconditioner": "multilevel"}, "preconditioner: backend 'petsc' has"),
    # the old keywords: backend settings belong in backend_options, pc is preconditioner
    ({"gather": "all"}, "options"), ({"pc": "none"}, "options"), ({"petsc_options": {}}, "options"),
    ({"backend_options": {"petsc_options": "ksp_type gmres"}}, "petsc_options"),
    ({"backend_options": {"ilu_drop_tol": 1e-4}}, "backend_options")])
def test_bad_options_raise_before_work(kw, match):
    with pytest.raises(ValueError, match=match):
        ref.two_state(1.0, 2.0).stationary("gmres", backend="petsc", **kw)


@needs_petsc
def test_bad_method_and_reducible_chain():
    # the old PETSc-only name is gone: one name per algorithm on every backend
    with pytest.raises(ValueError, match="method.*'eps'.*valid methods"):
        ref.two_state(1.0, 2.0).stationary("eps", backend="petsc")
    # ... and gth, once scipy-only, runs on PETSc too
    assert ref.two_state(1.0, 2.0).stationary("gth", backend="petsc").pi == pytest.approx([2 / 3, 1 / 3])
    two = ctmc.CTMC([[-1.0, 1.0, 0, 0], [1.0, -1.0, 0, 0], [0, 0, -2.0, 2.0], [0, 0, 1.0, -1.0]])
    with pytest.raises(ctmc.ReducibleChainError):
        two.stationary(backend="petsc")
    with pytest.raises(ValueError, match="method.*'eps'.*valid methods"):
        two.hitting_times([0], backend="petsc", method="eps")
    with pytest.raises(ValueError, match="options.*solver"):
        two.hitting_times([0], backend="petsc", solver="gmres")
    h = two.hitting_times([0], backend="petsc", method="gth")
    assert h.method == "gth" and h.mean[1] == pytest.approx(1.0) and np.isinf(h.mean[2:]).all()


def test_missing_petsc4py_raises_import_error_with_install_help(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kw):
        if name.startswith(("petsc4py", "slepc4py")):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kw)
    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.setattr(_petsc_env, "_STATE", {})
    with pytest.raises(ImportError, match="apt-get install python3-petsc4py-real"):
        ref.two_state(1.0, 2.0).stationary(backend="petsc")


@needs_petsc
def test_per_call_options_reach_the_factorisation():
    # MUMPS reads its options when it factorises, after KSPSetFromOptions
    from ctmc.backends.base import LinearSpec
    from ctmc.backends.petsc import DistributedChain
    dc = DistributedChain.from_chain(ref.mm1k(50, 0.7, 1.0))
    members = np.ones(dc.stop - dc.start, dtype=bool)
    members[0] = False
    system = dc.system(members, 0.0, LinearSpec("lu"), {"petsc_options": {"mat_mumps_icntl_14": 57}})
    ksp, info = system.ksp, system.info
    assert ksp.getPC().getFactorMatrix().getMumpsIcntl(14) == 57 and info["factor_package"] == "mumps"
    system.close()


@needs_petsc
def test_per_call_factor_package_superlu_dist():
    chain = ref.mm1k(1000, 0.5, 1.0)
    res = chain.stationary("lu", backend="petsc",
                           backend_options={"petsc_options": {"pc_factor_mat_solver_type": "superlu_dist"}})
    assert res.info["factor_package"] == "superlu_dist"
    assert relative_error(res.pi, CASES["mm1k_K1000"].exact_pi()) < 1e-9


def test_example_without_petsc_says_how_to_install(monkeypatch, capsys):
    import runpy
    from pathlib import Path

    import ctmc.backends.petsc_backend as pb
    monkeypatch.setattr(pb, "available", lambda: False)
    path = Path(__file__).resolve().parents[1] / "examples" / "petsc_jsq_blocking.py"
    monkeypatch.setattr("sys.argv", [str(path)])
    runpy.run_path(str(path), run_name="__main__")
    assert "apt-get install python3-petsc4py-real" in capsys.readouterr().out


@needs_petsc
def test_mumps_orders_by_qamd_unless_told_otherwise():
    """Without an ordering, MUMPS factorises with QAMD (ICNTL(7)=6); the user's petsc_options win;
    both give scipy's answer to the last digits (tail included)."""
    m, s, l = jsq(30, 0.9, 0.5, 0.5)
    chain = m.build(initial={"s": 0, "l": 0})
    ref = chain.stationary("lu")
    a = chain.stationary("lu", backend="petsc")
    if a.info.get("factor_package") != "mumps":
        pytest.skip("PETSc without MUMPS")
    assert a.info["ordering"] == "mumps QAMD (icntl_7=6)"
    b = chain.stationary("lu", backend="petsc", backend_options={"petsc_options": {"mat_mumps_icntl_7": 0}})
    assert b.info["ordering"] == "mumps default"
    for r in (a, b):
        assert relative_error(r.pi, ref.pi) < 1e-10
