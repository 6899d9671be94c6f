"""Stationary laws: reference chains x methods, invariants, tails, structure."""
import warnings
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import ctmc
from ctmc.stationary import METHODS

import reference as ref
from reference import CASES, dense_pi, erlang_b, log_ratio_error, mmck, random_chain

DIRECT = ["auto", "gth", "lu"]
ITERATIVE = ["power", "gauss_seidel", "sor", "gmres", "bicgstab", "eig"]
ITER_OPTS = {"sor": {"omega": 1.2}}


def _check_invariants(res, chain, tol=1e-9):
    pi = res.pi
    assert pi.shape == (chain.n_states,)
    assert np.all(pi >= 0)
    assert abs(pi.sum() - 1) < 1e-12
    # residual recomputed independently here
    r = np.abs(chain.Q.T @ pi).sum()
    assert r <= tol * np.abs(chain.Q.diagonal()).max()
    assert res.residual == pytest.approx(r, rel=1e-6, abs=1e-300)
    assert res.wall_time >= 0 and isinstance(res.status, ctmc.Status)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("method", DIRECT)
def test_direct_methods_match_exact_law_relatively(case, method):
    chain = case.build()
    exact = case.exact_pi()
    res = chain.stationary(method)
    assert res.status is ctmc.Status.SUCCESS
    _check_invariants(res, chain)
    # every component, down to 1e-301, to 1e-10 relative
    tol = 1e-8 if case.name.startswith("random") else 1e-10
    assert log_ratio_error(res.pi, exact) < tol
    assert res.balance_error < 1e-8


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("method", ITERATIVE)
def test_iterative_methods_bulk_and_honest_tails(case, method):
    chain = case.build()
    exact = case.exact_pi()
    opts = dict(ITER_OPTS.get(method, {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
        res = chain.stationary(method, check=False, tol=1e-11, **opts)
    if method == "sor" and res.status is ctmc.Status.BREAKDOWN:
        # over-relaxation may diverge on a singular system: it must say so
        assert np.isnan(res.pi).all()
        return
    assert res.status in (ctmc.Status.SUCCESS, ctmc.Status.TAIL_INACCURATE), res.message
    _check_invariants(res, chain, tol=1e-10)
    big = exact > 1e-6 * exact.max()
    assert np.max(np.abs(res.pi[big] / exact[big] - 1)) < 1e-4
    if res.status is ctmc.Status.SUCCESS:
        # a success claims the small probabilities too
        assert log_ratio_error(res.pi, exact) < 1e-3, "tail wrong but not flagged"


def test_tail_inaccuracy_is_flagged_not_silent():
    chain = CASES[2].build()  # M/M/1/K, pi_K ~ 1e-301
    with pytest.warns(ctmc.TailAccuracyWarning):
        res = chain.stationary("power", tol=1e-10)
    assert res.status is ctmc.Status.TAIL_INACCURATE
    assert res.balance_error > 1e-6


def test_erlang_b_blocking():
    c, a = 8, 5.0
    chain = mmck(c, c, a, 1.0)
    res = chain.stationary("lu")
    assert res.pi[-1] == pytest.approx(erlang_b(c, a), rel=1e-12)


def test_nonconvergence_raises_with_partial_result():
    chain = CASES[1].build()
    with pytest.raises(ctmc.SolverError) as err:
        chain.stationary("power", maxiter=3)
    assert err.value.result is not None
    assert err.value.result.status is ctmc.Status.MAX_ITERATIONS
    res = chain.stationary("power", maxiter=3, check=False)
    assert res.status is ctmc.Status.MAX_ITERATIONS and res.iterations == 3


def test_bad_method_and_options_fail_before_work():
    chain = CASES[0].build()
    with pytest.raises(ValueError, match="method.*valid methods"):
        chain.stationary("nope")
    with pytest.raises(ValueError, match="options.*valid options"):
        chain.stationary("lu", omega=1.5)
    with pytest.raises(ValueError, match="omega"):
        chain.stationary("sor", omega=2.5)
    with pytest.raises(ValueError, match="tol"):
        chain.stationary("gth", tol=-1)
    with pytest.raises(ValueError, match="backend"):
        chain.stationary(backend="cuda")


def test_registry_lists_all_methods():
    assert {"gth", "lu", "power", "gauss_seidel", "sor", "gmres", "bicgstab", "eig", "auto"} <= set(METHODS)


def test_lu_repins_away_from_low_probability_state():
    chain = CASES[2].build()
    res = chain.stationary("lu", pin=1000)  # pi_1000 ~ 1e-301: a terrible pin
    assert res.info["pins"][0] == 1000 and res.info["pins"][-1] == 0
    exact = CASES[2].exact_pi()
    assert log_ratio_error(res.pi, exact) < 1e-10


def test_reducible_chain_lists_closed_classes():
    # 0 -> {1,2} and 0 -> {3}: two closed classes
    R = np.zeros((4, 4))
    R[0, 1] = R[0, 3] = 1.0
    R[1, 2] = R[2, 1] = 2.0
    chain = ctmc.CTMC.from_rates(R)
    with pytest.raises(ctmc.ReducibleChainError, match="2 closed classes") as err:
        chain.stationary()
    assert [c.tolist() for c in err.value.closed_classes] == [[1, 2], [3]]
    res = chain.stationary(per_class=True)
    assert np.allclose(res[0].pi, [0, 0.5, 0.5, 0]) and np.allclose(res[1].pi, [0, 0, 0, 1])


def test_single_closed_class_with_transient_states():
    R = np.zeros((3, 3))
    R[0, 1] = 1.0
    R[1, 2] = 1.0
    R[2, 1] = 3.0
    chain = ctmc.CTMC.from_rates(R)
    for method in ["gth", "lu", "power"]:
        res = chain.stationary(method)
        assert np.allclose(res.pi, [0, 0.75, 0.25], atol=1e-9)
        assert res.info["transient_states"] == 1


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 25), seed=st.integers(0, 10_000), density=st.floats(0.05, 1.0))
def test_methods_agree_on_random_chains(n, seed, density):
    chain = ctmc.CTMC.from_rates(random_chain(n, seed, density))
    ref = dense_pi(chain.Q)
    for method in ["gth", "lu", "gmres"]:
        res = chain.stationary(method, check=False)
        assert np.allclose(res.pi, ref, rtol=1e-7, atol=1e-12), method
    assert log_ratio_error(chain.stationary("gth").pi, chain.stationary("lu").pi) < 1e-9


def test_stationary_reward_expectation():
    chain = CASES[1].build()
    res = chain.stationary()
    n = chain.states["n"]
    assert res.expect(n) == pytest.approx(np.dot(CASES[1].exact_pi(), n), rel=1e-12)
    with pytest.raises(ValueError, match="reward"):
        res.expect(np.ones(3))


def test_progress_reports_long_iterations(capsys):
    import ctmc.progress as util
    chain = CASES[1].build()
    res = chain.stationary("power", progress=True, tol=1e-12)
    # a short run stays below the 2 s delay: silent
    assert res.status is ctmc.Status.SUCCESS and capsys.readouterr().err == ""
    p = util.Progress("x", True, delay=0.0, every=0.0)
    p.update("step 1")
    p.close("done")
    assert "[ctmc] x: step 1" in capsys.readouterr().err
    # every method takes progress= now (the LU factorisation shows a spinner); a bad value fails at once
    assert chain.stationary("lu", progress=False).status is ctmc.Status.SUCCESS
    with pytest.raises(ValueError, match="progress"):
        chain.stationary("lu", progress="yes")


@pytest.mark.parametrize("eps", [1e-100, 1e-160, 1e-200])
def test_gth_probabilities_beyond_the_double_range_underflow_not_nan(eps):
    # pi = (1, 1, eps, eps^2) / (2 + eps + eps^2): the last one is below the
    # double range for eps = 1e-200; GTH must give 0 there, not NaN everywhere
    R = np.zeros((4, 4))
    R[0, 1] = R[1, 0] = R[2, 1] = R[3, 2] = 1.0
    R[1, 2] = R[2, 3] = eps
    res = ctmc.CTMC.from_rates(R).stationary(method="gth")
    exact = np.array([1.0, 1.0, eps, eps * eps]) / 2.0
    assert np.all(np.isfinite(res.pi)) and res.status.value == "success"
    assert np.allclose(res.pi[:3], exact[:3], rtol=1e-14, atol=0)
    if eps * eps > 1e-300:
        assert res.pi[3] == pytest.approx(exact[3], rel=1e-14)
    else:
        assert res.pi[3] < 1e-300


def test_auto_ordering_natural_for_banded_minimum_degree_for_grids():
    from ctmc._sparse_lu import choose_ordering, envelope
    from ctmc.models.jsq import JSQ2
    bd = ctmc.CTMC.from_rates(np.diag(np.ones(199), 1) + 2 * np.diag(np.ones(199), -1))
    assert envelope(bd.Q) == 199 and choose_ordering(bd.Q) == "NATURAL"
    # a grid whose natural-order work bound (sum of squared row widths, ~1e10) is too large
    assert choose_ordering(JSQ2(400, 0.9, 0.5).chain().Q) == "MMD_AT_PLUS_A"
    # a smaller one is cheap enough in state order (bound ~3e8 <= NATURAL_FLOPS)
    grid = JSQ2(150, 0.9, 0.5).chain()
    assert choose_ordering(grid.Q) == "NATURAL"
    # the answer does not depend on the ordering (to rounding, tails included)
    pis = [grid.stationary("lu", ordering=o).pi for o in ("auto", "NATURAL", "COLAMD", "MMD_AT_PLUS_A")]
    for p in pis[1:]:
        assert np.allclose(p, pis[0], rtol=1e-10, atol=0)
    with pytest.raises(ValueError, match="ordering"):
        grid.stationary("lu", ordering="AMD")


@pytest.mark.parametrize("K,rho", [(80, 1.3), (60, 1.5)])
def test_lu_recovers_from_an_improbable_first_pin(K, rho):
    # JSQ with rho > 1: the initial state (0, 0) has probability ~1e-39..1e-48,
    # so the first pinned solve can be round-off with mixed signs and a
    # meaningless argmax (K = 80 raised SolverError before the pin moved to
    # the slowest-exit state). The result must then agree, tails included,
    # with a solve pinned at (K, K) from the start and with the closed form.
    from ctmc.models.jsq import JSQ2, blocking_probability
    ch = JSQ2(K, rho, 0.5).chain()
    res = ch.stationary("lu")
    ref = ch.stationary("lu", pin=ch.index(s=K, l=K))
    assert res.status.value == "success" and res.pi.min() > 0 and res.balance_error < 1e-12
    assert res.pi.min() < 1e-35
    assert np.allclose(res.pi, ref.pi, rtol=1e-10, atol=0)
    pb = res.pi[ch.index(s=K, l=K)]
    assert abs(pb / blocking_probability(K, rho, 0.5) - 1) < 1e-12


def test_lu_out_of_memory_falls_back_instead_of_crashing(monkeypatch):
    # SuperLU reports a failed allocation as SystemError; 'auto' must treat it
    # as "lu could not run" and fall back to an iterative method
    from ctmc import _sparse_lu

    def no_memory(A, **kw):
        raise SystemError("<built-in function gstrf> returned NULL without setting an exception")

    monkeypatch.setattr(_sparse_lu.sla, "splu", no_memory)
    chain = ctmc.CTMC.from_rates(np.diag(np.ones(1499), 1) + 2 * np.diag(np.ones(1499), -1))
    res = chain.stationary(check=False)
    assert res.method == "gmres"
    assert any(f.startswith("lu: breakdown") and "out of memory" in f for f in res.info["fallbacks"])
    assert res.residual < 1e-8 and abs(res.pi.sum() - 1) < 1e-12
    with pytest.raises(ctmc.SolverError, match="out of memory"):
        chain.stationary("lu")


# --------------------------------------------------------------------------
# level_iad: aggregation on a level moved by +-1 (from models.supermarket, now a core method)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("K,rho", [(50, 0.5), (400, 0.9), (60, 1.7)])
def test_level_iad_on_a_birth_death_chain(K, rho):
    # every state is its own level: the aggregation step alone is exact (M/M/1/K closed form)
    chain = ref.mm1k(K, rho, 1.0)
    res = chain.stationary("level_iad", levels="n")
    assert res.status.ok and res.iterations <= 2
    exact = ref.bd_pi(K, lambda n: rho, lambda n: 1)
    assert np.allclose(res.pi, exact, rtol=1e-12, atol=0)


def test_level_iad_two_dimensional_levels_against_gth():
    # two independent M/M/1/6 queues: every event moves the total number of jobs by +-1
    m = ctmc.Model("two")
    a, b = m.var("a", 0, 6), m.var("b", 0, 6)
    m.event("a_in", guard=a < 6, rate=0.8, update={a: a + 1})
    m.event("b_in", guard=b < 6, rate=0.5, update={b: b + 1})
    m.event("a_out", guard=a > 0, rate=1.0, update={a: a - 1})
    m.event("b_out", guard=b > 0, rate=1.3, update={b: b - 1})
    chain = m.build(initial={"a": 0, "b": 0})
    res = chain.stationary("level_iad", levels=a + b, tol=1e-13)
    exact = chain.stationary("gth").pi
    assert res.status.ok
    assert log_ratio_error(res.pi, exact) < 1e-8


def test_level_iad_rejects_chains_without_level_structure():
    chain = ctmc.CTMC([[-1.0, 1.0, 0.0], [0.0, -1.0, 1.0], [1.0, 0.0, -1.0]])
    with pytest.raises(ValueError, match="level"):
        chain.stationary("level_iad", levels=np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="levels"):
        chain.stationary("level_iad")


# --------------------------------------------------------------------------
# polish: Gauss-Seidel sweeps after a Krylov answer repair its tail
# --------------------------------------------------------------------------
def _tandem_with_blocking(c=40):
    m = ctmc.Model("tandem2")
    a, b = m.var("a", 0, c), m.var("b", 0, c)
    m.event("arrive", guard=a < c, rate=0.9, update={a: a + 1})
    m.event("move", guard=(a > 0) & (b < c), rate=2.0, update={a: a - 1, b: b + 1})
    m.event("leave", guard=b > 0, rate=1.0, update={b: b - 1})
    return m.build(initial={"a": 0, "b": 0})


@pytest.mark.parametrize("method,opts", [("gmres", {"preconditioner": "sgs"}), ("eig", {})])
def test_polish_repairs_the_tail_of_a_krylov_answer(method, opts):
    chain = _tandem_with_blocking()            # probabilities from 0.2 down to 6e-16
    exact = chain.stationary("gth").pi
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
        raw = chain.stationary(method, check=False, polish=0, **opts)
        res = chain.stationary(method, check=False, **opts)
    # without sweeps the tail is noise (and flagged); with them it balances and is right
    assert raw.status is ctmc.Status.TAIL_INACCURATE and log_ratio_error(raw.pi, exact) > 1e-3
    assert res.status is ctmc.Status.SUCCESS, res.message
    assert res.info["polish_sweeps"] > 0 and res.info["balance_before_polish"] > res.balance_error
    assert log_ratio_error(res.pi, exact) < 1e-5


def test_polish_deep_tail_is_right_or_flagged():
    # M/M/1/1000 (pi_K about 1e-301): the sweeps carry the correction 1000 states deep; whatever
    # the budget, the answer is either right in the tail or not called a success
    case = next(c for c in CASES if c.name == "mm1k_K1000")
    exact = case.exact_pi()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
        for budget in (50, 2000):
            res = case.build().stationary("gmres", preconditioner="sgs", polish=budget, check=False)
            assert res.info["polish_sweeps"] <= budget
            if res.status is ctmc.Status.SUCCESS:
                assert log_ratio_error(res.pi, exact) < 1e-3
            else:
                assert res.status is ctmc.Status.TAIL_INACCURATE
    assert res.status is ctmc.Status.SUCCESS      # the default budget is enough here


# --------------------------------------------------------------------------
# auto: chooses by structure, records why, falls back when a probe stalls
# --------------------------------------------------------------------------
def test_auto_on_a_many_dimensional_chain_goes_iterative_and_is_right():
    from ctmc.models.gallery import GALLERY
    g = GALLERY["kanban"](2)                        # 4,600 states, 16 variables
    chain = g.chain()
    res = chain.stationary()
    assert res.status is ctmc.Status.SUCCESS
    assert res.info["auto"]["dimensions"] == 16
    assert res.info["auto"]["plan"][:2] == ["bicgstab-first-probe", "gmres-probe"]
    assert res.method in ("gauss_seidel", "gmres", "bicgstab")
    exact = chain.stationary("lu").pi                # a direct solve: the reference
    assert g.measure(res.pi) == pytest.approx(g.measure(exact), rel=1e-9)
    assert log_ratio_error(res.pi, exact) < 1e-5


def test_auto_falls_back_when_the_probes_stall(monkeypatch):
    from ctmc.kernels import plan
    from ctmc.models.gallery import GALLERY
    g = GALLERY["tandem"](150)                      # 45,451 states, 3 variables; sweeps converge slowly
    chain = g.chain()
    monkeypatch.setattr(plan, "PROBE_ITERATIONS", 3)     # GMRES cannot converge in 3 steps
    monkeypatch.setattr(plan, "BICGSTAB_FIRST_ITERATIONS", 2)     # nor BiCGStab in 2
    res = chain.stationary()
    assert res.info["auto"]["plan"][:4] == ["bicgstab-first-probe", "gmres-probe", "gauss_seidel-probe", "lu"]
    assert [f.split(":")[0] for f in res.info["fallbacks"]] == ["bicgstab-first-probe", "gmres-probe",
                                                                 "gauss_seidel-probe"]
    assert res.method == "lu" and res.status is ctmc.Status.SUCCESS
    exact = chain.stationary("lu", ordering="COLAMD").pi
    assert g.measure(res.pi) == pytest.approx(g.measure(exact), rel=1e-9)


def test_auto_gives_up_a_factorisation_that_outgrows_the_memory(monkeypatch):
    """The fill is unknown until the factorisation ends: SuperLU runs under an address-space cap
    and its failed allocation is a MemoryError that auto answers with GMRES's whole budget (it
    used to grow until the kernel killed the process: a 2.4e6-state 4-species chain)."""
    from ctmc import _sparse_lu
    from ctmc.kernels import plan
    from ctmc.models.gallery import GALLERY
    g = GALLERY["tandem"](150)
    chain = g.model().build(initial=g.initial)         # its own chain: no factors cached by other tests

    def capped(A, **kw):                               # what SuperLU does when malloc fails under the cap
        raise SystemError("Can't expand MemType 0")
    monkeypatch.setattr(plan, "PROBE_ITERATIONS", 3)
    monkeypatch.setattr(plan, "BICGSTAB_FIRST_ITERATIONS", 2)
    monkeypatch.setattr(_sparse_lu.sla, "splu", capped)
    res = chain.stationary()
    assert [f.split(":")[0] for f in res.info["fallbacks"]] == ["bicgstab-first-probe", "gmres-probe",
                                                                 "gauss_seidel-probe", "lu"]
    assert "out of memory" in res.info["fallbacks"][-1]
    assert res.method == "gmres" and res.status is ctmc.Status.SUCCESS
    monkeypatch.undo()
    exact = chain.stationary("lu", ordering="COLAMD").pi
    assert g.measure(res.pi) == pytest.approx(g.measure(exact), rel=1e-9)


def test_address_space_cap_makes_allocations_fail_inside_only():
    from ctmc._util import address_space_cap
    with address_space_cap(64 * 2 ** 20):
        with pytest.raises(MemoryError):
            np.ones(2 ** 30)                   # 8 GiB
        np.ones(2 ** 20)                       # 8 MiB fit
    assert np.ones(2 ** 27).sum() == 2 ** 27   # 1 GiB again after the block


def test_auto_takes_bicgstab_first_on_many_dimensional_chains():
    from ctmc.models.gallery import GALLERY
    g = GALLERY["tandem"](150)
    chain = g.chain()
    res = chain.stationary()
    assert res.method == "bicgstab" and res.status is ctmc.Status.SUCCESS and "fallbacks" not in res.info
    exact = chain.stationary("lu", ordering="COLAMD").pi
    assert g.measure(res.pi) == pytest.approx(g.measure(exact), rel=1e-9)
    normal = exact > 1e-280          # the tail reaches the denormals (underflow): compare above them
    assert log_ratio_error(res.pi[normal], exact[normal]) < 1e-5


def _jiq3(lam=0.9):
    """Join-idle-queue by sampling two servers, buffer 3: a 4-species population model."""
    from ctmc.meanfield import PopulationModel
    p = PopulationModel("jiq3", ["x0", "x1", "x2", "x3"])
    p.transition("arrive0", {"x0": -1, "x1": +1}, lambda x: lam * (1 - (1 - x["x0"]) ** 2))
    for k in (1, 2):
        p.transition(f"arrive{k}", {f"x{k}": -1, f"x{k + 1}": +1},
                     lambda x, k=k: lam * x[f"x{k}"] * (1 - x["x0"]))
    for k in (1, 2, 3):
        p.transition(f"serve{k}", {f"x{k}": -1, f"x{k - 1}": +1}, lambda x, k=k: x[f"x{k}"])
    return p


def test_auto_probe_takes_a_long_arnoldi_basis():
    """GMRES(50) stagnated on 4-species population chains (before the walked pin); the probe's basis is
    sized to the generator (40 bytes per stored entry: 31 vectors here), and converges."""
    res = _jiq3().chain(40).stationary()          # 12,341 states, 3 dimensions
    assert res.info["auto"]["plan"][1] == "gmres-probe" and res.info["auto"]["probe_restart"] == 31
    assert res.status is ctmc.Status.SUCCESS


@pytest.mark.slow
def test_auto_solves_a_4_species_population_chain_with_its_probe():
    """N = 120 (302,621 states): the first probe, BiCGStab, converges (GMRES(50) stalled, LU took 334 s);
    the densities agree with the order-2 refined mean field (error O(1/N^3), about 1e-7 here)."""
    p = _jiq3()
    ex = p.exact(120)
    assert ex.stationary.method == "bicgstab" and ex.stationary.status is ctmc.Status.SUCCESS   # 46 steps
    assert "fallbacks" not in ex.stationary.info
    assert np.allclose(ex.densities, p.refined(120, order=2).densities, atol=2e-6)


def test_auto_keeps_the_direct_solve_for_two_dimensional_and_banded_chains():
    from ctmc.models.jsq import JSQ2
    res = JSQ2(60, 0.9, 0.5).chain().stationary()
    assert res.method == "lu" and res.info["auto"]["dimensions"] == 2
    banded = next(c for c in CASES if c.name == "mm1k_K1000").build().stationary()
    assert banded.method == "lu" and banded.info["auto"]["envelope_per_nnz"] <= 10


def test_lu_repins_when_the_first_solve_is_garbage():
    # hysteresis queue, r = 8000, Erlang-20 service (279,961 states): the initial state (empty
    # system) is also the slowest-exit state and its probability is negligible, so the solve
    # pinned there is garbage (entries of -6e9 beside the pin's 1) and both usual candidates
    # are that same state; the pin must move to the largest entry in magnitude
    from ctmc.models.hysteresis import HysteresisQueue, erlang
    chain = HysteresisQueue(2000, 5000, 8000, 1.2, 0.6, service=erlang(20, 1.0)).chain()
    res = chain.stationary("lu")
    assert res.info["pins"][0] == 0 and len(res.info["pins"]) >= 2
    assert res.status is ctmc.Status.SUCCESS and res.balance_error < 1e-9
    # the same law from a solve pinned directly at another probable state (the iterative
    # methods do not converge on this chain in reasonable time)
    probable = int(np.argsort(res.pi)[-50])
    other = chain.stationary("lu", pin=probable)
    assert other.info["pins"] == [probable]
    big = res.pi > 1e-200
    assert np.max(np.abs(np.log(res.pi[big] / other.pi[big]))) < 1e-8


def test_krylov_pin_is_a_probable_state_found_by_a_short_walk():
    """Pinned on the slowest-exit state (1e-20 of the largest probability here; 1e-57 at N = 120)
    GMRES cannot converge; the walk's pin carries a large probability, from the worst start."""
    from ctmc.backends import operator_for
    from ctmc.kernels.classes import slowest_exit as _slowest_exit, walk_pin
    chain = _jiq3().chain(40)
    op, support = operator_for(chain, "scipy"), np.ones(chain.n_states, dtype=bool)
    pi = chain.stationary("lu").pi
    slowest = _slowest_exit(op, support)
    assert pi[slowest] < 1e-10 * pi.max()
    pin = walk_pin(op, support, hint=slowest)
    assert pi[pin] > 0.1 * pi.max()
    res = chain.stationary("gmres")
    assert res.info["pin_rule"] == "random walk" and res.info["pins"][0] == walk_pin(op, support, chain.initial[0])


def test_walked_pin_also_walks_from_the_slowest_exit_state():
    """Review: an M/M/1/K queue started full drifts about a third of a state a jump, so a walk from
    there alone ends at pi ~ 2^-559 of the largest and GMRES stalls; walking from the slowest-exit
    state too finds the empty queue."""
    m = ctmc.Model("mm1k"); n = m.var("n", 0, 2000)
    m.event("a", guard=n < 2000, rate=1.0, update={n: n + 1})
    m.event("s", guard=n > 0, rate=2.0, update={n: n - 1})
    chain = m.build(initial={"n": 2000})
    res = chain.stationary("gmres")
    assert res.status is ctmc.Status.SUCCESS and res.info["pins"] == [chain.index(n=0)]
    assert res.pi[chain.index(n=0)] == pytest.approx(0.5, rel=1e-9)


def test_old_stationary_names_warn_and_serve_the_one_class():
    import ctmc.options
    import ctmc.stationary
    with pytest.warns(DeprecationWarning, match="use ctmc.options.Tolerances"):
        assert ctmc.stationary.StationaryOptions is ctmc.options.Tolerances
    with pytest.warns(DeprecationWarning, match="make_options"):
        assert ctmc.stationary.make_options("lu", {"pin": 3}).pin == 3
    assert "StationaryOptions" not in ctmc.stationary.__all__
    with pytest.raises(AttributeError):
        ctmc.stationary.NoSuchName


# --------------------------------------------------------------------------
# "given": a law computed elsewhere, graded and bounded by the same evidence
# --------------------------------------------------------------------------
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_given_exact_law_succeeds_within_its_proven_bound(case):
    chain, exact = case.build(), case.exact_pi()
    gth = chain.stationary("gth")
    res = chain.stationary("given", x0=gth.pi)
    assert res.method == "given" and res.status is ctmc.Status.SUCCESS, res.message
    _check_invariants(res, chain)
    assert np.max(np.abs(res.pi - gth.pi) / np.maximum(gth.pi, 1e-300)) < 1e-14   # graded, not changed
    # the exact law (Fractions) is the independent reference: the bound holds for what was given
    assert np.abs(res.pi - exact).sum() <= res.error_bound <= 1e-6
    if chain.n_states > 1:
        assert res.info["error_bound_kind"] == "proven"
    assert res.balance_error < 1e-8 and res.iterations == 0


def test_given_perturbed_tail_is_flagged_and_its_bound_holds():
    case = CASES[3]                         # pi down to 1e-200: a wrong tail leaves the residual tiny
    chain, exact = case.build(), case.exact_pi()
    x = exact.copy()
    x[exact < 1e-100] *= 2.0
    with pytest.warns(ctmc.TailAccuracyWarning):
        res = chain.stationary("given", x0=x, check=False)
    assert res.status is ctmc.Status.TAIL_INACCURATE and res.balance_error > 1e-6, res.message
    assert np.isfinite(res.error_bound) and np.abs(res.pi - exact).sum() <= res.error_bound


def test_given_perturbed_bulk_is_not_success_and_its_bound_holds():
    case = CASES[4]                                    # M/M/3/40
    chain, exact = case.build(), case.exact_pi()
    rng = np.random.default_rng(3)
    x = exact * (1 + 1e-4 * rng.standard_normal(exact.size))
    res = chain.stationary("given", x0=x, check=False)
    assert res.status is ctmc.Status.INACCURATE and "residual" in res.message
    # a looser tol lets the bound be computed: it holds, and it exceeds error_tol, so still not a success
    loose = chain.stationary("given", x0=x, check=False, tol=1e-2, tail_tol=1.0, error_tol=1e-8)
    err = np.abs(loose.pi - exact).sum()
    assert err <= loose.error_bound and loose.error_bound > 1e-8
    assert loose.status is ctmc.Status.INACCURATE and "error bound" in loose.message


def test_given_without_bound_skips_its_solve_and_says_so():
    chain, exact = CASES[4].build(), CASES[4].exact_pi()
    with_bound = chain.stationary("given", x0=exact)
    res = chain.stationary("given", x0=exact, bound=False)
    assert np.isnan(res.error_bound) and "not computed" in res.info["error_bound_kind"]
    assert "return_time_solver" not in res.info and "return_time_solver" in with_bound.info
    assert res.status is with_bound.status and np.array_equal(res.pi, with_bound.pi)
    assert res.balance_error == with_bound.balance_error


def test_given_levels_serve_the_bound_and_are_checked():
    chain, exact = CASES[1].build(), CASES[1].exact_pi()          # M/M/1/50: n moves by one
    res = chain.stationary("given", x0=exact, levels="n")
    assert res.info["return_time_solver"] == "level" and res.status is ctmc.Status.SUCCESS
    assert np.abs(res.pi - exact).sum() <= res.error_bound <= 1e-6
    with pytest.raises(ValueError, match="levels: .*at most one"):
        chain.stationary("given", x0=exact, levels=2 * chain.states["n"])


def test_given_reports_mass_off_the_closed_class():
    R = np.zeros((3, 3))
    R[0, 1], R[1, 2], R[2, 1] = 1.0, 1.0, 3.0                     # state 0 transient; law (0, 3/4, 1/4)
    chain = ctmc.CTMC.from_rates(R)
    res = chain.stationary("given", x0=[2.0, 1.5, 0.5])
    assert res.info["mass_off_class"] == pytest.approx(0.5) and "outside the closed class" in res.message
    assert res.pi.tolist() == [0.0, 0.75, 0.25] and res.status is ctmc.Status.SUCCESS
    assert "mass_off_class" not in chain.stationary("given", x0=[0.0, 1.5, 0.5]).info
    with pytest.raises(ValueError, match="x0: .*no mass on the closed class"):
        chain.stationary("given", x0=[1.0, 0.0, 0.0])


@pytest.mark.parametrize("x0, match", [
    (None, "x0: the 'given' method needs"), (np.ones(3), r"x0: expected one value per state \(41\), got 3"),
    (np.r_[-1e-3, np.ones(40)], "x0: expected values >= 0, got -1.000e-03 at state 0"),
    (np.r_[np.ones(40), np.nan], "x0: expected finite values, got nan at state 40"),
    (np.zeros(41), "x0: expected a positive total"),
    (np.ones((41, 1)), r"x0: expected a vector .*shape \(41, 1\)"),
    ("abc", "x0: expected one finite value"), (np.ones(41), None)])
def test_given_refuses_bad_x0_before_any_work(monkeypatch, x0, match):
    import ctmc.stationary as st_mod
    chain = CASES[4].build()
    calls = []
    monkeypatch.setattr(st_mod, "stationary_evidence", lambda *a: calls.append(a) or 1 / 0)
    if match is None:                                  # a good x0 reaches the evidence (the spy works)
        with pytest.raises(ZeroDivisionError):
            chain.stationary("given", x0=x0)
        assert calls
        return
    with pytest.raises(ValueError, match=match):
        chain.stationary("given", x0=x0)
    assert not calls
    if x0 is not None and np.ndim(x0) == 1 and np.size(x0) == 41:
        # everything but the length is refused when the options are made: no operator is even built
        monkeypatch.setattr(st_mod, "operator_for", lambda *a: 1 / 0)
        with pytest.raises(ValueError, match=match):
            chain.stationary("given", x0=x0)


def test_given_option_errors_name_the_option():
    chain = CASES[0].build()
    with pytest.raises(ValueError, match="bound: expected True or False"):
        chain.stationary("given", x0=[0.6, 0.4], bound="yes")
    assert "given" in METHODS and METHODS["given"].options.__name__ == "GivenOptions"


def test_given_law_is_checked_on_a_single_state_class_too():
    chain = ctmc.CTMC.from_rates(np.array([[0.0, 2.0], [0.0, 0.0]]))      # 0 -> 1, state 1 absorbing
    res = chain.stationary("given", x0=[1.0, 3.0])
    assert res.pi.tolist() == [0.0, 1.0] and res.error_bound == 0.0
    assert res.info["mass_off_class"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="x0: .*no mass on the closed class"):
        chain.stationary("given", x0=[1.0, 0.0])
    with pytest.raises(ValueError, match=r"x0: expected one value per state \(1\), got 2"):
        ctmc.CTMC([[0.0]]).stationary("given", x0=[1.0, 1.0])


@pytest.mark.parametrize("solver, step, slack", [("bicgstab", "bicgstab-first-probe", 0), ("gmres", "gmres-probe", 1)])
def test_auto_gives_up_a_stagnating_probe_early(monkeypatch, solver, step, slack):
    """A shuffled cycle of 3000 states (three variables, so auto tries BiCGStab first, then GMRES(50)) with
    one rate of 1e8: neither residual falls tenfold in 25 steps, and each probe gives up by the same
    stagnation test (:class:`ctmc.krylov.Stall`, plan.BICGSTAB_STALL steps) on each pin instead of
    running plan.BICGSTAB_FIRST_ITERATIONS = 150 (BiCGStab) or plan.PROBE_ITERATIONS = 300 (GMRES); the
    answer is the direct solve's, against the closed form."""
    from ctmc import krylov
    from ctmc.kernels import plan
    n = 3000
    perm = np.random.default_rng(0).permutation(n)
    rate = np.ones(n)
    rate[n // 2] = 1e8
    R = sp.csr_matrix((rate, (perm, perm[(np.arange(n) + 1) % n])), shape=(n, n))
    k = np.arange(n)
    chain = ctmc.CTMC.from_rates(R, {"a": k % 10, "b": (k // 10) % 10, "c": k // 100})
    calls = []
    real = getattr(krylov, solver)

    def counted(*args, **kw):
        x, rep = real(*args, **kw)
        calls.append((kw.get("stall", 0), rep.iterations, rep.stalled))
        return x, rep
    monkeypatch.setattr(krylov, solver, counted)
    res = chain.stationary()
    probe = [c for c in calls if c[0] == plan.BICGSTAB_STALL]
    assert probe and all(its <= plan.BICGSTAB_STALL + slack for _, its, _ in probe) and probe[0][2]
    failed = [f for f in res.info["fallbacks"] if f.startswith(step)]
    assert failed and "stalled" in failed[0] and res.method == "lu"
    exact = 1.0 / -chain.Q.diagonal()              # a cycle: pi proportional to the mean holding times
    assert log_ratio_error(res.pi, exact / exact.sum()) < 1e-8
