"""The PETSc backend on two MPI processes gives the answers of scipy and of one process.

One ``mpirun -n 2`` job runs this file as a script: every check is computed
on both ranks (each owns half of the rows) and rank 0 writes the numbers to a
JSON file, which the tests below judge. Skipped, with the reason, without
petsc4py or mpirun.
"""
import importlib
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: stationary methods run on two ranks (gth: the class gathered on every rank, solved densely)
METHODS = ["lu", "gmres", "bicgstab", "eig", "gth"]

#: built-in model families: (module, small instance); the test uses those that exist
MODELS = {
    "jsq": ("ctmc.models.jsq", lambda mod: mod.JSQ2(10, 0.9, 0.5)),
    "jsq_overloaded": ("ctmc.models.jsq", lambda mod: mod.JSQ2(12, 1.3, 0.25, 0.6)),
    "hysteresis": ("ctmc.models.hysteresis",
                   lambda mod: mod.HysteresisQueue(5, 20, 40, lam=1.1, lam_overload=0.5)),
    "supermarket": ("ctmc.models.supermarket", lambda mod: mod.Supermarket(4, 2, 0.7, capacity=6)),
}


def relative_error(a, b, floor=1e-250):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    big = np.abs(b) > floor
    return float(np.max(np.abs(a[big] - b[big]) / np.abs(b[big]))) if big.any() else 0.0


def _model_chain(name):
    modname, make = MODELS[name]
    try:
        mod = importlib.import_module(modname)
    except ImportError as exc:
        return None, f"{modname} not available ({exc})"
    return make(mod).chain(), None  # a changed constructor must fail here, not skip


# --------------------------------------------------------------------------
# the MPI job
# --------------------------------------------------------------------------
def _job(out_path):
    sys.path.insert(0, str(HERE))
    import reference as ref
    from chains import jsq, trap_chain

    import ctmc
    from ctmc.backends.petsc_backend import DistributedChain, load_petsc, slepc_available

    comm = load_petsc().COMM_WORLD
    slepc = slepc_available()
    warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
    out = {"size": comm.getSize(), "stationary": {}, "models": {}, "passage": {}}
    for case in ref.CASES:
        chain = case.build()
        exact = case.exact_pi()
        serial = chain.stationary()
        for m in METHODS:
            if m == "eig" and not slepc:
                out["stationary"][f"{case.name}/{m}"] = {"skip": "slepc4py not installed"}
                continue
            r = chain.stationary(m, backend="petsc", check=False)
            out["stationary"][f"{case.name}/{m}"] = {
                "status": r.status.value, "l1_exact": float(np.abs(r.pi - exact).sum()),
                "rel_scipy": relative_error(r.pi, serial.pi), "residual": r.residual,
                "recomputed": float(np.abs(r.pi @ chain.Q.toarray()).sum()),
                "error_bound": r.error_bound, "bound_kind": r.info.get("error_bound_kind")}
    for name in MODELS:
        chain, why = _model_chain(name)
        if chain is None:
            out["models"][name] = {"skip": why}
            continue
        serial = chain.stationary()
        entry = {"states": chain.n_states}
        for m in ("lu", "gmres"):
            r = chain.stationary(m, backend="petsc", check=False)
            entry[m] = {"status": r.status.value, "rel_scipy": relative_error(r.pi, serial.pi),
                        "l1_scipy": float(np.abs(r.pi - serial.pi).sum())}
        out["models"][name] = entry
    # passage and transient analyses through the CTMC methods
    mdl, s, l = jsq(12, 0.9, 0.5, 0.5)
    chain = mdl.build(initial={"s": 0, "l": 0})
    P = out["passage"]
    tgt = (s == 12) & (l == 12)
    a, b = chain.hitting_times(tgt, moments=2), chain.hitting_times(tgt, moments=2, backend="petsc")
    P["hitting_moments"] = [b.status.value, relative_error(b.moments, a.moments)]
    a = chain.hitting_laplace(s == 0, [0.0, 0.5])
    b = chain.hitting_laplace(s == 0, [0.0, 0.5], backend="petsc", method="gmres")
    # GMRES: entry by entry as accurate as its own component-wise balance error says
    P["laplace_gmres"] = [b.status.value, relative_error(b.values, a.values),
                          max(1e-8, 10 * b.info["balance_error"])]
    kw = dict(s=[0.3], t=[1.0, 5.0])
    for label, src in (("few_sources", {"s": 3, "l": 5}), ("many_sources", l <= 2)):
        a = chain.first_passage((l == 0) | (l == 12), sources=src, **kw)
        b = chain.first_passage((l == 0) | (l == 12), sources=src, backend="petsc", **kw)
        err = max(float(np.abs(b.probabilities - a.probabilities).max()),
                  float(np.abs(b.laplace - a.laplace).max()), float(np.abs(b.cdf - a.cdf).max()))
        P[f"first_passage_{label}"] = [b.status.value, err]
    a = chain.transient({"s": 0, "l": 0}, [0.5, 3.0])
    for meth in ("uniformization", "expm"):
        if meth == "expm" and not slepc:
            P[f"transient_{meth}"] = "slepc4py not installed"
            continue
        b = chain.transient({"s": 0, "l": 0}, [0.5, 3.0], backend="petsc", method=meth)
        P[f"transient_{meth}"] = [b.status.value, float(np.abs(b.p - a.p).max())]
    # sets split across the two blocks: states that never reach the target, transient states
    trap, x = trap_chain()
    a, b = trap.hitting_times(x == 0), trap.hitting_times(x == 0, backend="petsc")
    fin = np.isfinite(a.mean)
    P["trap_hitting"] = ["success" if np.array_equal(np.isfinite(b.mean), fin) else "different sets",
                         relative_error(b.mean[fin], a.mean[fin])]
    # (the trap chain's stationary law runs in its own job, _closed_class_job: it hangs today)
    # badly conditioned passage problems where GMRES converges on two blocks but the
    # condition-estimate solve does not: the answer must not be vouched for
    from ctmc.models.jsq import JSQ2
    bad = {}
    c = JSQ2(25, 0.7, 0.3).chain()
    t1 = np.zeros(c.n_states, bool)
    t1[-1] = True
    a = c.hitting_laplace(t1, 0.0)
    b = c.hitting_laplace(t1, 0.0, backend="petsc", method="gmres", check=False)
    bad["laplace"] = {"status": b.status.value, "err": float(np.abs(b.values - a.values).max()),
                      "range": [float(b.values.min()), float(b.values.max())]}
    c = JSQ2(30, 0.6, 0.3).chain()
    t2 = np.zeros(c.n_states, bool)
    t2[[-1, c.n_states // 3]] = True
    a = c.first_passage(t2, sources=[0])
    b = c.first_passage(t2, sources=[0], backend="petsc", method="gmres", check=False)
    bad["first_passage"] = {"status": b.status.value,
                            "err": float(np.abs(b.probabilities - a.probabilities).max()),
                            "row_sums": b.probabilities.sum(axis=1).tolist()}
    out["ill_conditioned"] = bad
    # distributed assembly from the model: no rank holds the whole generator; spies
    # record which rows each rank asks the model for, and that nobody builds the chain
    calls = {"build": 0, "rows": []}
    real_build, real_rows = mdl.build, mdl.generator_rows

    def build_spy(*args, **kw):
        calls["build"] += 1
        return real_build(*args, **kw)

    def rows_spy(states, a, b):
        calls["rows"].append((int(a), int(b)))
        return real_rows(states, a, b)
    mdl.build, mdl.generator_rows = build_spy, rows_spy
    try:
        dc = DistributedChain.from_model(mdl, {"s": 0, "l": 0})
    finally:
        del mdl.build, mdl.generator_rows
    rows = np.array(calls["rows"] or [(-1, -1)])
    spy = [calls["build"], len(calls["rows"]), int(rows[:, 0].min()), int(rows[:, 1].max()),
           int((rows[:, 1] - rows[:, 0]).sum()), dc.start, dc.stop]
    r = dc.stationary("lu", backend_options={"gather": "all"})
    h = dc.hitting_times(tgt, backend_options={"gather": "root"})
    none = dc.stationary("gmres", backend_options={"gather": "none"})
    serial = chain.stationary()
    out["distributed"] = {
        "rows": [list(map(int, x)) for x in dc.allgather([dc.start, dc.stop])],
        "local_nnz": dc.allgather(float(dc._nnz)).ravel().tolist(), "total_nnz": int(chain.Q.nnz),
        "rel_scipy": relative_error(r.pi, serial.pi), "status": r.status.value,
        "hitting_rel": relative_error(h.mean, chain.hitting_times(tgt).mean) if comm.getRank() == 0 else None,
        "none_shape": none.pi.shape[0], "none_rows": list(none.info["rows"]),
        "none_rel": relative_error(none.pi, serial.pi[dc.start:dc.stop]),
        "spy": dc.allgather(spy).astype(int).tolist()}
    # gather="root": rank 0 gets every result, the other ranks get empty arrays
    lap = dc.hitting_laplace(tgt, [0.5], backend_options={"gather": "root"})
    tr = dc.transient({"s": 0, "l": 0}, [1.0], backend_options={"gather": "root"})
    st = dc.stationary("lu")  # a DistributedChain gathers to the root by default
    sizes = [r.pi.size, h.mean.size, h.moments.size, h.finite.size, lap.values.size, tr.p.size, st.pi.size]
    out["distributed"]["root_sizes"] = dc.allgather(sizes).astype(int).tolist()
    # the one-liners on two ranks against scipy (review: throughput and a reducible long_run crashed)
    ev = mdl.events[0].name
    ol = {"prob_within": relative_error(dc.prob_within(tgt, [1.0, 5.0]).value, chain.prob_within(tgt, [1.0, 5.0]).value),
          "cumulative": relative_error([float(dc.cumulative_reward(1.0, 2.0).value)],
                                       [float(chain.cumulative_reward(1.0, 2.0).value)]),
          "throughput": relative_error([float(dc.throughput(ev))], [float(chain.throughput(ev))])}
    g = ctmc.Model("ruin")
    gx = g.var("x", 0, 9)
    g.event("up", guard=(gx > 0) & (gx < 9), rate=1.0, update={gx: gx + 1})
    g.event("down", guard=(gx > 0) & (gx < 9), rate=1.5, update={gx: gx - 1})
    gd = DistributedChain.from_model(g, {"x": 3})
    gs = g.build(initial={"x": 3})
    lr = gd.long_run()
    ol["long_run"] = relative_error(lr.pi, gs.long_run().pi)
    ol["long_run_status"] = lr.status.value
    out["one_liners"] = ol
    if comm.getRank() == 0:
        Path(out_path).write_text(json.dumps(out))


def _closed_class_job(out_path):
    """The trap chain's closed class {x = 10} lies in rank 1's block only.

    Each rank gives up after 60 s (a collective left unmatched hangs), so the
    job ends on its own instead of leaving orphan processes.
    """
    import faulthandler
    faulthandler.dump_traceback_later(60, exit=True)
    sys.path.insert(0, str(HERE))
    from chains import trap_chain

    from ctmc.backends.petsc_backend import load_petsc
    comm = load_petsc().COMM_WORLD
    trap, x = trap_chain()
    a, b = trap.stationary(), trap.stationary(backend="petsc")
    if comm.getRank() == 0:
        Path(out_path).write_text(json.dumps([b.status.value, float(np.abs(b.pi - a.pi).max())]))


def _exception_on_one_rank_job(out_path):
    """Rank 1 raises before a collective that rank 0 has entered.

    Without the abort-on-exception hook of the PETSc backend rank 0 waits in the
    barrier for ever; a watchdog (90 s, its "Timeout" dump on standard error) ends
    each rank anyway, so the test can tell an abort from a hang without orphans.
    """
    import faulthandler
    faulthandler.dump_traceback_later(90, exit=True)
    from ctmc.backends.petsc_backend import load_petsc
    comm = load_petsc().COMM_WORLD
    if comm.getRank() == 1:
        if sys.argv[3:] == ["cli"]:     # the ctmc command, failing on this process only: exit status 2
            import ctmc.cli
            sys.argv = ["ctmc", "solve", str(Path(out_path).with_suffix(".missing.drn"))]
            sys.exit(ctmc.cli.main())
        raise RuntimeError("rank 1 fails before the collective")
    comm.barrier()
    Path(out_path).write_text("rank 0 passed the barrier")


def _excepthook_job(out_path):
    """Each rank writes whether ``sys.excepthook`` is still Python's own after the backend loaded."""
    from ctmc.backends.petsc_backend import load_petsc
    comm = load_petsc().COMM_WORLD
    Path(f"{out_path}.{comm.getRank()}").write_text(json.dumps(sys.excepthook is sys.__excepthook__))


JOBS = {"closed_class": _closed_class_job, "exception_on_one_rank": _exception_on_one_rank_job,
        "excepthook": _excepthook_job}

if __name__ == "__main__":
    JOBS.get(sys.argv[2] if len(sys.argv) > 2 else "", _job)(sys.argv[1])
    sys.exit(0)


# --------------------------------------------------------------------------
# the tests (they read the job's numbers)
# --------------------------------------------------------------------------
sys.path.insert(0, str(HERE))
import reference as ref  # noqa: E402
from mpi_jobs import mpirun_env, needs_mpi, run_job  # noqa: E402


pytestmark = [pytest.mark.petsc, needs_mpi]


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return run_job(__file__, tmp_path_factory.mktemp("mpi") / "results.json")


@pytest.fixture(scope="module")
def contract_job(tmp_path_factory):
    """tests/test_backend_contract.py's PETSc checks on two ranks: {rank: {case/check: failures}}."""
    out = tmp_path_factory.mktemp("mpi_contract") / "contract"
    script = HERE / "test_backend_contract.py"
    cmd = [shutil.which("mpirun"), "-n", "2", sys.executable, str(script), str(out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=mpirun_env(), timeout=120,
                              cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:  # a collective left unmatched by one rank hangs
        pytest.fail(f"contract job timed out (unmatched collectives?):\n{exc.stdout}\n{exc.stderr}")
    files = [Path(f"{out}.{r}.json") for r in (0, 1)]
    assert proc.returncode == 0 and all(f.exists() for f in files), (
        f"mpirun contract job failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    data = [json.loads(f.read_text()) for f in files]
    assert [d["size"] for d in data] == [2, 2] and [d["rank"] for d in data] == [0, 1]
    return {d["rank"]: d["results"] for d in data}


def test_two_ranks_backend_contract(contract_job):
    """Every primitive of the PETSc operator, on two blocks of rows, against dense references."""
    assert contract_job[0].keys() == contract_job[1].keys() and len(contract_job[0]) >= 40
    bad = {f"rank {r}: {k}": v for r, res in contract_job.items() for k, v in res.items() if v}
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", sorted(c.name for c in ref.CASES))
def test_two_ranks_reference_chains(job, name, method):
    r = job["stationary"][f"{name}/{method}"]
    if "skip" in r:
        pytest.skip(r["skip"])
    assert r["l1_exact"] < 1e-8, r
    assert r["residual"] < 1e-8 and r["residual"] == pytest.approx(r["recomputed"], rel=1e-6, abs=1e-15)
    if r["status"] == "success":   # the error bound, computed with collectives over both blocks, holds
        assert r["l1_exact"] <= r["error_bound"] + 1e-15 and r["error_bound"] <= 1e-6, r
    if method in ("lu", "gth"):
        assert r["status"] == "success" and r["rel_scipy"] < 1e-9
    elif r["status"] == "success":
        assert r["rel_scipy"] < 1e-4  # component-wise, as the balance check promises
    else:  # an iterative solve may stop short on two blocks, but says so
        assert r["status"] in ("tail_inaccurate", "breakdown", "max_iterations", "inaccurate")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_two_ranks_builtin_models(job, name):
    r = job["models"][name]
    if "skip" in r:
        pytest.skip(r["skip"])
    assert r["lu"]["status"] == "success" and r["lu"]["rel_scipy"] < 1e-9
    assert r["gmres"]["l1_scipy"] < 1e-8


@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_rank_builtin_models(name):
    chain, why = _model_chain(name)
    if chain is None:
        pytest.skip(why)
    serial = chain.stationary()
    r = chain.stationary("lu", backend="petsc")
    assert relative_error(r.pi, serial.pi) < 1e-9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = chain.stationary("gmres", backend="petsc", check=False)
    assert np.abs(g.pi - serial.pi).sum() < 1e-8


@pytest.mark.parametrize("check", ["hitting_moments", "laplace_gmres", "first_passage_few_sources",
                                   "first_passage_many_sources", "transient_uniformization",
                                   "transient_expm", "trap_hitting"])
def test_two_ranks_passage_and_transient(job, check):
    if isinstance(job["passage"][check], str):
        pytest.skip(job["passage"][check])
    status, err, *tol = job["passage"][check]
    assert status == "success"
    assert err < (tol[0] if tol else 1e-8) <= 1e-6


def test_two_ranks_closed_class_in_one_block(tmp_path):
    out = tmp_path / "closed_class.json"
    cmd = [shutil.which("mpirun"), "-n", "2", sys.executable, str(Path(__file__).resolve()), str(out),
           "closed_class"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=mpirun_env(), timeout=120, cwd=str(ROOT))
    assert proc.returncode == 0 and out.exists(), f"mpirun job failed:\n{proc.stderr[-3000:]}"
    status, err = json.loads(out.read_text())
    assert status == "success" and err < 1e-8


@pytest.mark.parametrize("how", ["exception", "cli"])
def test_two_ranks_exception_on_one_rank_aborts_the_job(tmp_path, how):
    """An exception (or the ctmc command's error status) on one process ends the whole job (MPI_Abort).

    Its message is printed first; the other process, waiting in a barrier, is ended instead of hanging.
    """
    out = tmp_path / "passed"
    cmd = [shutil.which("mpirun"), "-n", "2", sys.executable, str(Path(__file__).resolve()), str(out),
           "exception_on_one_rank", how]
    env = {k: v for k, v in mpirun_env().items() if k != "CTMC_MPI_ABORT"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the job hung:\n{exc.stderr}")
    assert proc.returncode != 0 and not out.exists()
    message = ("missing.drn: no such file" if how == "cli" else
               "RuntimeError: rank 1 fails before the collective")
    assert message in proc.stderr, proc.stderr[-3000:]
    assert "Timeout (" not in proc.stderr, f"ended by the watchdog, not by an abort:\n{proc.stderr[-3000:]}"


def test_two_ranks_abort_hook_opt_out(tmp_path):
    """``CTMC_MPI_ABORT=0``: the backend leaves ``sys.excepthook`` alone on every rank."""
    out = tmp_path / "hook"
    cmd = [shutil.which("mpirun"), "-n", "2", sys.executable, str(Path(__file__).resolve()), str(out),
           "excepthook"]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(mpirun_env(), CTMC_MPI_ABORT="0"),
                          timeout=120, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [json.loads(Path(f"{out}.{r}").read_text()) for r in (0, 1)] == [True, True]


def test_mpi_abort_ends_the_process_through_the_mpi_library():
    """One process (no hook there: nothing else to abort): ``mpi_abort`` calls MPI_Abort, not a plain exit."""
    code = ("from ctmc.backends.petsc_backend import load_petsc\n"
            "from ctmc.backends.petsc import mpi_abort\n"
            "import os, sys\n"
            "P = load_petsc()\n"
            "assert sys.excepthook is sys.__excepthook__\n"
            "real_exit = os._exit\n"
            "os._exit = lambda c: (print('fallback exit', flush=True), real_exit(99))\n"
            "mpi_abort(P.COMM_WORLD, 3)\n"
            "print('not aborted')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(ROOT))
    # MPI_Abort never returns: no line from the fallback exit (status 99) or after it
    assert proc.returncode == 3 and proc.stdout == "", (proc.stdout, proc.stderr[-2000:])


def test_two_ranks_distributed_assembly(job):
    d = job["distributed"]
    (a0, b0), (a1, b1) = d["rows"]
    assert a0 == 0 and b0 == a1 and b1 > a1  # contiguous blocks covering every state
    # each rank holds its own rows only (plus a diagonal slot per row)
    assert max(d["local_nnz"]) < d["total_nnz"] and sum(d["local_nnz"]) >= d["total_nnz"]
    assert d["status"] == "success" and d["rel_scipy"] < 1e-9
    assert d["hitting_rel"] < 1e-8
    assert d["none_shape"] == d["none_rows"][1] - d["none_rows"][0] and d["none_rel"] < 1e-6


def test_two_ranks_from_model_assembles_own_rows_only(job):
    d = job["distributed"]
    for rank, (builds, n_calls, lo, hi, rows, start, stop) in enumerate(d["spy"]):
        assert builds == 0, f"rank {rank} built the whole chain"
        assert n_calls >= 1 and lo == start and hi == stop and rows == stop - start, (rank, d["spy"])


def test_two_ranks_gather_root(job):
    root, other = job["distributed"]["root_sizes"]
    n = job["distributed"]["rows"][1][1]
    # pi (gather="all"), hitting mean/moments/finite, laplace, transient, default stationary
    assert root == [n, n, n, n, n, n, n]
    assert other == [n, 0, 0, 0, 0, 0, 0]


@pytest.mark.parametrize("case", ["laplace", "first_passage"])
def test_two_ranks_ill_conditioned_passage_not_vouched_for(job, case):
    """JSQ2 targets at the far corner: GMRES converges, the condition solve does not.

    The chain is irreducible, so the target is reached almost surely: E[exp(-0 T)] = 1
    and each first-passage row sums to 1 (independent invariants). A result sold as
    accurate (success or tail_inaccurate: norm-wise accurate) must agree with scipy.
    """
    r = job["ill_conditioned"][case]
    if r["status"] in ("success", "tail_inaccurate"):
        assert r["err"] < 1e-8, r
        if case == "laplace":
            assert r["range"][0] > 1 - 1e-8 and r["range"][1] < 1 + 1e-8, r
        else:
            assert r["row_sums"] == pytest.approx([1.0], abs=1e-8), r
    else:
        assert r["status"] in ("inaccurate", "max_iterations", "breakdown"), r


def test_one_liners_on_two_ranks_match_scipy(job):
    ol = job["one_liners"]
    assert ol["long_run_status"] == "success"
    for k in ("prob_within", "cumulative", "throughput", "long_run"):
        assert ol[k] < 1e-10, (k, ol[k])
