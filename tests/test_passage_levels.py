"""Mean hitting times of a rare state by Kac's formula and a band of levels (``ctmc.passage_levels``), and
the JSQ saturation means that use them beyond ``JSQ2.LEVEL_STATES`` (issue 24, item 3).

Checked against independent answers: the dense subtraction-free solve (GTH) of the same chain, the
closed forms of :mod:`ctmc.models.jsq` (level recursions, in logs) and ctmc's regenerative LU route.
"""
import numpy as np
import pytest

import ctmc
from ctmc.models.jsq import JSQ2, log_saturation_mean


def level_hitting_mean(*args, **kw):
    from ctmc.passage_levels import level_hitting_mean as f     # here: each test fails on its own without it
    return f(*args, **kw)


def _birth_death(K, up, down):
    m = ctmc.Model("bd")
    n = m.var("n", 0, K)
    m.event("a", guard=n < K, rate=up, update={n: n + 1})
    m.event("d", guard=n > 0, rate=down, update={n: n - 1})
    return m.build(initial={"n": 0}), n


def _closed_form_error(q, mean):
    st = q.chain().states
    logs = log_saturation_mean(q.K, q.rho, q.mu2, q.nu, states=np.column_stack([st["s"], st["l"]]))
    fin = np.isfinite(logs)
    return float(np.max(np.abs(np.expm1(np.log(mean[fin]) - logs[fin]))))


@pytest.mark.parametrize("band", [None, 60])
def test_birth_death_means_against_gth(band):
    """Means of 3^100 / 2: the whole chain, and a band of the top 60 levels (q falls by 3 a level)."""
    c, n = _birth_death(100, 1.0, 3.0)
    pi = c.stationary("gth").pi
    kw = {} if band is None else {"band_states": band}
    res = level_hitting_mean(c, 100, pi, np.arange(101), pi_error=1e-14, **kw)
    ref = c.hitting_times(n == 100, method="gth").mean
    assert res.status == "success" and res.method == "lu-kac"
    err = np.max(np.abs(res.mean[:100] / ref[:100] - 1))
    assert err < 1e-11 and res.mean[100] == 0.0
    assert err <= res.error_bound <= 1e-9
    assert (res.info["band_floor"] is None) == (band is None)


@pytest.mark.parametrize("K,rho,mu2,nu,band", [(150, 0.9, 0.5, None, None), (120, 1.3, 0.25, 0.6, None),
                                              (200, 0.7, 0.8, 0.2, None), (300, 0.9, 0.3, 0.7, 30_000),
                                              (400, 0.95, 0.5, None, 60_000)])
def test_jsq_saturation_means_against_closed_form_and_lu(K, rho, mu2, nu, band):
    """``method="lu-kac"`` (the route beyond LEVEL_STATES) on the whole chain and on a band of the top
    levels: every mean within 1e-9 of the closed form and of the regenerative LU, inside its estimate."""
    q = JSQ2(K, rho, mu2, nu)
    kw = {} if band is None else {"band_states": band}
    res = q.saturation_analysis(method="lu-kac", **kw)
    assert res.method == "lu-kac" and res.status == "success"
    err = _closed_form_error(q, res.mean)
    assert err < 1e-9 and err <= res.error_bound <= 1e-6
    lu = q.saturation_analysis()
    assert lu.method == "lu-regenerative"
    fin = lu.mean > 0
    assert np.max(np.abs(res.mean[fin] / lu.mean[fin] - 1)) < 1e-9


def test_a_band_too_thin_is_flagged_by_its_estimate():
    """K = 300, rho = 0.95: q falls by 0.95 a level, so 280 levels leave 5e-7 (the estimate says 1e-6,
    above error_tol: inaccurate); 350 levels leave 1e-8 (success)."""
    q = JSQ2(300, 0.95, 0.5)
    thin = q.saturation_analysis(method="lu-kac", band_states=20_000, check=False)
    err = _closed_form_error(q, thin.mean)
    assert thin.status == "inaccurate" and "band_states" in thin.message
    assert 1e-7 < err <= thin.info["truncation"] * 4 and err <= thin.error_bound
    wide = q.saturation_analysis(method="lu-kac", band_states=32_000)
    assert _closed_form_error(q, wide.mean) < 1e-8


def test_default_saturation_route_switches_beyond_level_states(monkeypatch):
    """Beyond LEVEL_STATES the public call takes lu-kac on the cached level_iad law (the regenerative LU
    of the whole chain does not fit at K = 4500); moments and options keep ctmc's analysis."""
    monkeypatch.setattr(JSQ2, "LEVEL_STATES", 1000)
    q = JSQ2(60, 0.9, 0.5)
    res = q.saturation_analysis()
    assert res.method == "lu-kac" and q.stationary().method == "level_iad"
    assert _closed_form_error(q, res.mean) < 1e-9
    assert _closed_form_error(q, q.saturation_times()) < 1e-9
    assert q.saturation_analysis(check=False).method == "lu-kac"          # as the command line asks
    assert q.saturation_analysis(moments=2, check=False).method == "lu-regenerative"
    with pytest.raises(ValueError, match="moments=1"):
        q.saturation_analysis(moments=2, method="lu-kac")


def test_bad_arguments_are_named_before_any_solve():
    c, n = _birth_death(20, 1.0, 2.0)
    pi = c.stationary("lu").pi
    lev = np.arange(21)
    with pytest.raises(ValueError, match="target"):
        level_hitting_mean(c, 21, pi, lev, pi_error=0.0)
    with pytest.raises(ValueError, match="pi_error"):
        level_hitting_mean(c, 20, pi, lev, pi_error=-1.0)
    with pytest.raises(ValueError, match="regeneration"):
        level_hitting_mean(c, 20, pi, lev, pi_error=0.0, regeneration=20)
    tiny = pi.copy()
    tiny[20] = 1e-320
    with pytest.raises(ValueError, match="not a normal double"):
        level_hitting_mean(c, 20, tiny, lev, pi_error=0.0)
    with pytest.raises(ValueError, match="every transition must move it by one"):
        level_hitting_mean(c, 20, pi, lev // 2, pi_error=0.0, band_states=10)


def test_the_band_is_widened_until_its_truncation_is_negligible(monkeypatch):
    """From a first band of 5000 states (K = 300, rho = 0.95: q is 1e-4 at its floor) the band is widened
    fourfold while its truncation estimate exceeds TRUNC_TOL: 5000, 20000, then the whole chain."""
    import ctmc.passage_levels as pl
    monkeypatch.setattr(pl, "BAND_START", 5000)
    q = JSQ2(300, 0.95, 0.5)
    res = q.saturation_analysis(method="lu-kac")
    sizes = res.info["band_sizes"]
    assert len(sizes) == 3 and sizes[0] <= 5000 < sizes[1] <= 20000 < sizes[2] == q.n_states - 2
    assert res.info["band_floor"] is None and res.info["truncation"] == 0.0
    assert _closed_form_error(q, res.mean) < 1e-9


@pytest.mark.parametrize("where,eps", [("everywhere", 1e-6), ("top levels", 1e-6), ("bulk", 1e-5),
                                       (None, 0.0)])
def test_the_laws_part_is_proven_from_its_residual(where, eps):
    """On the whole chain pi_target's error comes from the law's own residual (the exact identity
    pi_hat_a / pi_a - 1 = sum_j r_j (h_j - H)), whatever solved the law: laws perturbed on purpose (P_block
    then off by 1e-10 .. 1e-6 against the closed form) stay within it; level_iad's law (1e-14 off) gets
    a proven bound below the calibrated 20 x its balance error."""
    q = JSQ2(100, 0.95, 0.5)
    lev, a = q.levels(), q.chain().index(s=100, l=100)
    if where is None:
        law = q.stationary("level_iad", check=False)
        pi, calibrated = law.pi, 20 * law.balance_error
    else:
        m = {"everywhere": lev >= 0, "top levels": lev > 180, "bulk": lev < 40}[where]
        noise = eps * np.random.default_rng(3).uniform(-1, 1, lev.size)
        pi = q.stationary("lu").pi * (1 + np.where(m, noise, 0.0))
        pi, calibrated = pi / pi.sum(), np.inf
    res = level_hitting_mean(q.chain(), a, pi, lev, pi_error=0.0, check=False)
    actual = abs(pi[a] / q.blocking_probability("closed_form") - 1)
    assert res.info["pi_error_kind"] == "proven" and res.info["error_bound_kind"] == "proven"
    assert actual <= res.info["pi_error"] < min(calibrated, 0.1)   # random errors: no cancellation counted
    assert _closed_form_error(q, res.mean) <= res.error_bound
    banded = level_hitting_mean(q.chain(), a, pi, lev, pi_error=0.5, band_states=3000, check=False)
    assert banded.info["pi_error_kind"] == "estimate" and banded.info["pi_error"] == 0.5     # the caller's


# ---------------------------------------------------------------------------
# two MPI processes: the band gathered on every process, Kac's sums by collectives
# ---------------------------------------------------------------------------
#: (K, rho, mu2, nu, band_states) of the MPI job: a band of the top 110 levels of K = 150 that both
#: processes hold rows of (q falls by 0.5 a level: 1e-33 at its floor), and the whole chain at rho = 0.95
KAC_MPI_CASES = {"band": (150, 0.5, 0.3, 0.7, 6000), "whole": (60, 0.95, 0.5, None, None)}


def _kac_mpi_job(out_path):
    """On every process: the saturation means of ``JSQ2(..., backend="petsc")`` by lu-kac (by the public
    call beyond a lowered ``LEVEL_STATES``, on the level_iad law, and by ``method="lu-kac"``), and
    :func:`level_hitting_mean` on a chain distributed with ``gather="none"`` from owned parts of the law
    and the levels; process 0 writes their relative errors against the scipy route and the closed forms."""
    import json
    import warnings

    from ctmc.backends.petsc_backend import DistributedChain, load_petsc
    warnings.simplefilter("ignore")
    comm = load_petsc().COMM_WORLD
    out = {"size": comm.getSize()}
    for name, (K, rho, mu2, nu, band) in KAC_MPI_CASES.items():
        kw = {} if band is None else {"band_states": band}
        q, ref = JSQ2(K, rho, mu2, nu, backend="petsc"), JSQ2(K, rho, mu2, nu)
        sat = q.saturation_analysis(method="lu-kac", **kw)
        sat_ref = ref.saturation_analysis(method="lu-kac", **kw)
        keep = sat_ref.mean > 0                                      # all but the target
        lev = ref.levels()
        floor = sat.info["band_floor"]
        inband = lev > (-1 if floor is None else floor)
        dc = q.chain()
        out[name] = {"status": sat.status.value, "method": sat.method, "backend": sat.backend,
                     "band_floor": floor, "bound": sat.error_bound, "pi_error": sat.info["pi_error"],
                     "pi_error_scipy": sat_ref.info["pi_error"], "pi_error_kind": sat.info["pi_error_kind"],
                     "band_rows": [int(inband[:dc.stop].sum() - inband[:dc.start].sum())],
                     "rel_scipy": float(np.max(np.abs(sat.mean[keep] / sat_ref.mean[keep] - 1))),
                     "rel_closed_form": _closed_form_error(ref, sat.mean),
                     "min_pi": float(ref.stationary().pi.min()),
                     "target_zero": bool(sat.mean[~keep].tolist() == [0.0])}
        out[name]["band_rows"] = dc.allgather(out[name]["band_rows"][0]).ravel().astype(int).tolist()
        if name == "band":                          # the owned parts in, the owned part out
            part = DistributedChain.from_chain(ref.chain(), gather="none")
            pi = ref.stationary().pi
            a = ref.chain().index(s=K, l=K)
            own = level_hitting_mean(part, a, pi[part.start:part.stop], lev[part.start:part.stop],
                                     pi_error=1e-12, **kw)
            loc = sat_ref.mean[part.start:part.stop]
            ok = loc > 0
            out["owned"] = {"status": own.status.value, "rows": list(own.info["rows"]),
                            "size": int(own.mean.size),       # the largest over the processes' parts
                            "rel_scipy": part.allmax(float(np.max(np.abs(own.mean[ok] / loc[ok] - 1))))}
            bad = lev.copy()
            bad[a] += 1             # the moves to and from (K, K): in the last process's rows only
            try:
                level_hitting_mean(part, a, pi, bad, pi_error=0.0, band_states=100)
            except ValueError as exc:
                out["owned"]["bad_levels"] = part.allsum(1.0), str(exc)
        old = JSQ2.LEVEL_STATES
        JSQ2.LEVEL_STATES = 1000              # the public call's route beyond it, on the level_iad law
        try:
            q2 = JSQ2(K, rho, mu2, nu, backend="petsc")
            pub = q2.saturation_analysis()
            st = q2.stationary(check=False)
            out[name]["public"] = {"method": pub.method, "stationary": st.method, "status": pub.status.value,
                                   "stationary_status": st.status.value,
                                   "tail_error": st.info.get("tail_error_corrected", 0.0),
                                   "rel_closed_form": _closed_form_error(ref, pub.mean)}
        finally:
            JSQ2.LEVEL_STATES = old
    if comm.getRank() == 0:
        with open(out_path, "w") as f:
            json.dump(out, f)


@pytest.mark.petsc
def test_two_processes_lu_kac_matches_scipy_and_the_closed_forms(tmp_path):
    """``lu-kac`` on two MPI processes: the band (rows on both processes) gathered and factorised on each,
    P_block and Kac's sums by collectives: every mean within 1e-9 of the scipy route and of the closed
    forms, state by state, both for a band of the top levels (means to 1e90) and for the whole chain;
    the public call takes it beyond LEVEL_STATES on the distributed level_iad law; from owned parts of the
    law and the levels on a chain that keeps its answers distributed, the owned part of the means."""
    from mpi_jobs import mpi_ready, run_job
    if not mpi_ready():
        pytest.skip("petsc4py or mpirun not installed (scripts/bootstrap.sh)")
    data = run_job(__file__, tmp_path / "kac.json", timeout=400)
    for name in KAC_MPI_CASES:
        r = data[name]
        assert r["status"] == "success" and r["method"] == "lu-kac" and r["backend"] == "petsc", r
        assert r["rel_scipy"] < 1e-9 and r["rel_closed_form"] < 1e-9 and r["target_zero"], r
        assert r["rel_closed_form"] <= r["bound"], r
        assert r["public"]["method"] == "lu-kac" and r["public"]["stationary"] == "level_iad", r
        # the means to 1e-9 whatever the law's grade; the law is graded by its tail as measured (one
        # correction solve on this small class): a success exactly where that is within the tail_tol asked
        pub = r["public"]
        assert pub["rel_closed_form"] < 1e-9 and pub["status"] == pub["stationary_status"], r
        assert (pub["status"] == "success") == (pub["tail_error"] <= JSQ2.LEVEL_TAIL_TOL), r
        assert pub["status"] in ("success", "tail_inaccurate"), r
    band = data["band"]
    assert band["band_floor"] is not None and min(band["band_rows"]) > 0, band      # both processes hold it
    assert data["whole"]["band_floor"] is None
    whole = data["whole"]                           # the law's part from its residual, by collectives
    assert whole["pi_error_kind"] == "proven" and band["pi_error_kind"] == "estimate"
    assert whole["pi_error"] == pytest.approx(whole["pi_error_scipy"], rel=0.1)
    own = data["owned"]
    assert own["status"] == "success" and own["size"] == own["rows"][1] - own["rows"][0] < 11476, own
    assert own["rel_scipy"] < 1e-9, own
    assert own["bad_levels"][0] == 2                  # raised on both processes (one saw the move)
    assert "every transition must move it by one" in own["bad_levels"][1]


if __name__ == "__main__":          # the MPI job: python tests/test_passage_levels.py OUT.json (under mpirun)
    import sys
    _kac_mpi_job(sys.argv[1])
