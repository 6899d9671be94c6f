"""The stagnation test of ``auto``'s Krylov probes on the PETSc backend: the rule of the scipy backend.

:class:`ctmc.backends.petsc.solvers.StallTest` is the KSP's convergence test
when a :class:`~ctmc.backends.base.LinearSpec` asks for ``stall``: PETSc's default
test, then :class:`ctmc.krylov.Stall` on the residual norms the KSP reports. The
tests judge it against the rule applied to PETSc's own residual history of the
full solve, iterations counted (not time), and the answers against a direct solve;
one ``mpirun -n 2`` job runs the same probes on two ranks (this file as a script).
Skipped, with the reason, without petsc4py (or mpirun).
"""
import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from mpi_jobs import needs_mpi, run_job

HERE = Path(__file__).resolve().parent


def _petsc():
    from ctmc.backends.petsc_backend import available, load_petsc
    if not available():
        pytest.skip("petsc4py not installed (scripts/bootstrap.sh)")
    return load_petsc()


def _shift_ksp(PETSc, kind, maxiter, n=1000):
    """A KSP on ``I - 0.999 S`` (``S`` a cyclic shift; no preconditioner): residuals fall slowly."""
    import scipy.sparse as sp
    S = sp.csr_matrix((np.ones(n), (np.arange(n), (np.arange(n) + 1) % n)), shape=(n, n))
    A = (sp.identity(n) - 0.999 * S).tocsr()
    M = PETSc.Mat().createAIJ(size=A.shape, csr=(A.indptr, A.indices, A.data), comm=PETSc.COMM_SELF)
    b = M.createVecLeft()
    b.getArray()[:] = np.random.default_rng(0).uniform(0, 1, n)
    ksp = PETSc.KSP().create(PETSc.COMM_SELF)
    ksp.setOperators(M)
    ksp.setType(kind)
    ksp.getPC().setType("none")
    if kind == "gmres":
        ksp.setGMRESRestart(20)
    ksp.setTolerances(rtol=1e-10, atol=0.0, max_it=maxiter)
    return ksp, b, M.createVecRight()


def _stop_by_the_rule(history, k):
    """The first iteration i >= k where min(r_0..r_i) > min(r_0..r_{i-k}) / 10 (None: never)."""
    h = np.asarray(history)
    return next((i for i in range(k, h.size) if h[:i + 1].min() > 0.1 * h[:i - k + 1].min()), None)


@pytest.mark.parametrize("kind", ["bcgs", "gmres"])
@pytest.mark.parametrize("k", [10, 25])
def test_stall_test_stops_a_ksp_where_the_rule_says(kind, k):
    """On PETSc's own residual history of the full solve (300 iterations, not converged) the rule
    stops at iteration i; with :class:`StallTest` the KSP stops there, says so, and its iterate is
    the one of a solve limited to i iterations (was: no test, 300 iterations always)."""
    PETSc = _petsc()
    from ctmc.backends.petsc.solvers import StallTest
    ksp, b, x = _shift_ksp(PETSc, kind, 300)
    ksp.setConvergenceHistory()
    ksp.solve(b, x)
    want = _stop_by_the_rule(ksp.getConvergenceHistory(), k)
    assert ksp.getIterationNumber() == 300 and want is not None and want < 300
    ksp, b, x = _shift_ksp(PETSc, kind, 300)
    test = StallTest(k)
    ksp.setConvergenceTest(test)
    ksp.solve(b, x)
    assert test.stalled and ksp.getIterationNumber() == want
    assert ksp.getConvergedReason() == PETSc.KSP.ConvergedReason.DIVERGED_MAX_IT
    ksp2, b2, y = _shift_ksp(PETSc, kind, want)
    ksp2.solve(b2, y)
    np.testing.assert_allclose(x.getArray(), y.getArray(), rtol=1e-12, atol=0)


@pytest.mark.parametrize("spec", ["kanban:2", "fms:3"])
@pytest.mark.parametrize("kind", ["bicgstab", "gmres"])
def test_stall_test_leaves_a_converging_petsc_solve_alone(spec, kind):
    """Where PETSc's BiCGStab and GMRES converge (the gallery), the stall test changes nothing: the same
    iterations and the same law, bit for bit, as PETSc's default test, and that law is LU's."""
    _petsc()
    from ctmc.models.gallery import parse_spec
    chain = parse_spec(spec).chain()
    kw = dict(backend="petsc", preconditioner="sgs", maxiter=150, check=False)
    with_test = chain.stationary(kind, stall=25, **kw)
    without = chain.stationary(kind, stall=0, **kw)
    assert with_test.status.value == "success" and with_test.iterations == without.iterations
    assert np.array_equal(with_test.pi, without.pi)
    np.testing.assert_allclose(with_test.pi, chain.stationary("lu").pi, rtol=1e-6, atol=1e-12)


def _probes(chain):
    """The two Krylov probes of ``auto`` as it runs them, with the stall test and without (the full
    probe), on PETSc: ``{name: (status, iterations)}``; and ``auto`` itself."""
    from ctmc.kernels import plan
    out = {}
    for kind, cap in (("bicgstab", plan.BICGSTAB_FIRST_ITERATIONS), ("gmres", plan.PROBE_ITERATIONS)):
        for stall in (plan.BICGSTAB_STALL, 0):
            r = chain.stationary(kind, backend="petsc", preconditioner="sgs", maxiter=cap, stall=stall,
                                 restart=50, check=False)
            out[f"{kind}/{stall}"] = (r.status.value, int(r.iterations), r.message)
    return out


def _check_probes(probes, stall):
    for kind, cap in (("bicgstab", 150), ("gmres", 300)):
        status, its, why = probes[f"{kind}/{stall}"]
        full_status, full_its, _ = probes[f"{kind}/0"]
        assert full_status == "max_iterations" and full_its >= cap          # the full probe runs out
        assert status == "max_iterations" and "stalled" in why and stall <= its <= 3 * stall + 3, (kind, its)
        assert its < full_its / 2


def test_auto_on_petsc_gives_up_its_stagnating_probes():
    """On an 80 x 80 drifting torus PETSc's BiCGStab and GMRES(50) with the SOR sweep do not converge in
    their probe budgets (150, 300 iterations); with the stall test each stops within a few multiples of
    ``BICGSTAB_STALL`` iterations, reported stalled, and ``auto``'s answer (after its probes) is LU's."""
    _petsc()
    from chains import drifting_torus
    from ctmc.kernels import plan
    chain = drifting_torus(80)
    _check_probes(_probes(chain), plan.BICGSTAB_STALL)
    res = chain.stationary(backend="petsc", check=False)
    tried = res.info.get("fallbacks", [])
    assert any(t.startswith("bicgstab-first-probe") and "stalled" in t for t in tried), tried
    assert any(t.startswith("gmres-probe") and "stalled" in t for t in tried), tried
    lu = chain.stationary("lu", check=False).pi
    assert res.status.value == "success" and np.abs(res.pi - lu).sum() <= max(res.error_bound, 1e-12)


@needs_mpi
def test_auto_on_two_petsc_ranks_gives_up_its_stagnating_probes(tmp_path):
    """The same probes on two ranks (each owning half of the rows; the SOR sweep on each one's block):
    stopped by the stall test, and ``auto``'s law gathered equal to one process's LU."""
    from chains import drifting_torus
    out = run_job(__file__, tmp_path / "stall.json", timeout=600)
    _check_probes({k: tuple(v) for k, v in out["probes"].items()}, out["stall"])
    assert any(t.startswith("bicgstab-first-probe") and "stalled" in t for t in out["fallbacks"])
    lu = drifting_torus(80).stationary("lu", check=False).pi
    assert out["status"] == "success" and np.abs(np.array(out["pi"]) - lu).sum() <= max(out["bound"], 1e-12)


def _job(out_path):
    import faulthandler
    faulthandler.dump_traceback_later(500, exit=True)   # a collective left unmatched would hang
    sys.path.insert(0, str(HERE))
    from chains import drifting_torus
    from ctmc.backends.petsc_backend import load_petsc
    from ctmc.kernels import plan
    warnings.simplefilter("ignore")
    comm = load_petsc().COMM_WORLD
    chain = drifting_torus(80)                 # each rank owns half of its rows on backend="petsc"
    probes = _probes(chain)
    res = chain.stationary(backend="petsc", check=False)
    pi = res.pi
    if comm.getRank() == 0:
        Path(out_path).write_text(json.dumps({
            "size": comm.getSize(), "stall": plan.BICGSTAB_STALL, "probes": probes,
            "fallbacks": res.info.get("fallbacks", []), "status": res.status.value,
            "bound": float(res.error_bound), "pi": pi.tolist()}))


if __name__ == "__main__":
    _job(sys.argv[1])
