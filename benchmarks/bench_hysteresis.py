"""Speed of ctmc.models.hysteresis at scale: many-phase service, r in the thousands.

Run from the repository root::

    .venv/bin/python benchmarks/bench_hysteresis.py --phases   # Table 0 only: hundreds of phases (a few minutes)
    .venv/bin/python benchmarks/bench_hysteresis.py            # Tables 0-2 (r up to 8000)
    .venv/bin/python benchmarks/bench_hysteresis.py --quick    # small sizes only (seconds)
    .venv/bin/python benchmarks/bench_hysteresis.py --embedded   # Table 3 only: route (b), r to 10000

Table 0 (many phases) runs every row in its own process (peak resident
memory per row): the queue with lam = 1.05, lam_overload = 0.8, thresholds
r/3, 2r/3, r, Erlang-k service of mean 1, and single arrivals, batches
{1: .5, 2: .3, 4: .2} or geometric(0.5) batches (57 sizes). Route **new**:
``HysteresisQueue.chain()`` (the generator assembled by levels),
``stationary_ctmc()`` (the elimination over the levels) and the measures of
``summary()``. Route **old**, in the same run: the chain built state by state
from ``HysteresisQueue.model()`` (``Model.build``), ``chain.stationary()``
(ctmc's "auto") and the mean return, normal and discard periods by
``chain.hitting_times`` from the entrance law, given ``--old-budget`` seconds
(default 120) in all, else "> budget". ``max rel diff`` compares the two laws
state by state where both finished.

Tables 1 and 2, the queue: single arrivals, lam = 1.05 (normal), lam_overload = 0.8, Erlang-20
service of mean 1, thresholds L = r/3, H = 2r/3, R = r (capacity r), instant
policy. Route (a), the exact CTMC on (mode, n, phase), has about 20 x 5r/3
states.

Table 1 (route (a), Erlang-20, single arrivals) times, for every r, the public calls
``HysteresisQueue.chain()`` (assembled by levels), ``stationary("ctmc")``
(the elimination over the levels) and ``mean_return_time()`` (renewal-reward
from the law), against the **baseline** measured in the same run on the same
generator: ``scipy.sparse.linalg.spsolve`` of ``Q^T pi = 0`` with the last
equation replaced by ``sum(pi) = 1`` (the textbook approach; it is skipped
when its projected time exceeds ``--budget`` seconds). ``max |diff|`` is
the largest difference between the two stationary vectors, ``loss`` the
customer loss probability.

Table 2 (route (b)) times the embedded chain at departure epochs for the same
queue with deterministic service (the Erlang-k limit; dense matrices of
order 3(r+1), so r stays small) and the distance of route (a) with Erlang-20
to it: the Erlang-k approximation error of deterministic service, about 1/k.

Table 3 (``--embedded``, route (b) at scale) runs every row in its own
process (peak resident memory per row): the same queue (capacity r = R)
with deterministic service of mean 1, instant policy, and single arrivals
or batches {1: .5, 2: .3, 4: .2}. Route **new**: ``stationary("embedded")``
(one dense level-upper-triangular matrix on the reachable states, GTH from
the top level). Route **old**, in the same run:
``embedded.dense_departure_law`` (every 3(r+1) states, dense GTH, O(N^3)),
run for r <= ``--old-max`` (default 1000). ``max rel diff`` compares the two
departure laws state by state.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from ctmc.models.hysteresis import HysteresisQueue, deterministic, erlang, geometric_batch
from ctmc.models.hysteresis.ctmc_route import entrance, mode_mask
from ctmc.report import format_table

LAM, LAM1, K_PHASES = 1.05, 0.8, 20


def queue(r, service=None):
    return HysteresisQueue(r // 3, 2 * r // 3, r, LAM, LAM1, service=service or erlang(K_PHASES, 1.0))


def naive_stationary(Q):
    n = Q.shape[0]
    A = sp.vstack([Q.T.tocsr()[:-1], sp.csr_matrix(np.ones((1, n)))], format="csc")
    b = np.zeros(n)
    b[-1] = 1.0
    return sla.spsolve(A, b)


def timed(fn, *a, **k):
    t0 = time.perf_counter()
    out = fn(*a, **k)
    return out, time.perf_counter() - t0


BATCHES = {"1": None, "{1,2,4}": {1: 0.5, 2: 0.3, 4: 0.2}, "geom(.5)": geometric_batch(0.5)}
PHASE_ROWS = [(200, 100, "1"), (200, 100, "geom(.5)"), (400, 100, "1"), (400, 100, "geom(.5)"),
              (1000, 200, "1"), (1000, 200, "{1,2,4}"), (1000, 200, "geom(.5)")]
QUICK_PHASE_ROWS = [(60, 20, "1"), (60, 20, "geom(.5)")]


def phase_queue(r, k, batch):
    return HysteresisQueue(r // 3, 2 * r // 3, r, LAM, LAM1, service=erlang(k, 1.0), batch=BATCHES[batch])


def phase_row(r, k, batch, route, out):
    """One row of Table 0 in this process: timings, evidence, the law saved to ``out`` (.npy)."""
    q = phase_queue(r, k, batch)
    t0 = time.perf_counter()
    if route == "new":
        chain = q.chain()
        t1 = time.perf_counter()
        res = q.stationary_ctmc()
        t2 = time.perf_counter()
        summ = q.summary()
        ret = summ["E[return time]"]
    else:
        chain = q.model().build(initial={"mode": 0, "n": 0, "phase": 0}, progress=False)
        t1 = time.perf_counter()
        res = chain.stationary()
        t2 = time.perf_counter()
        means = []
        for modes in ([1, 2], [0], [2]):                 # the mean stays by hitting times (old route)
            inside = np.isin(chain.states["mode"], modes)
            f = np.where(inside, (res.pi * ~inside) @ chain.Q, 0.0)
            means.append(float(f @ chain.hitting_times(~inside).mean / f.sum()))
        ret = means[0]
    t3 = time.perf_counter()
    np.save(out, res.pi)
    return {"states": chain.n_states, "transitions": chain.n_transitions, "build": t1 - t0, "solve": t2 - t1,
            "measures": t3 - t2, "method": res.method, "status": str(res.status.value),
            "balance": res.balance_error, "min_pi": float(res.pi[res.pi > 0].min()), "return": ret,
            "rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20}


def run_phase_table(rows, old_budget):
    out_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r, k, batch in rows:
            got = {}
            for route in ("new", "old"):
                npy = os.path.join(tmp, f"{route}.npy")
                cmd = [sys.executable, __file__, "--row", str(r), str(k), batch, route, npy]
                try:
                    proc = subprocess.run(cmd, capture_output=True, text=True,
                                          timeout=None if route == "new" else old_budget)
                    got[route] = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
                    if got[route] is None:
                        print(proc.stderr[-2000:], file=sys.stderr)
                except subprocess.TimeoutExpired:
                    got[route] = None
            new, old = got["new"], got["old"]
            diff = "-"
            failed = old is not None and "error" in old
            if new and old and not failed:
                a, b = np.load(os.path.join(tmp, "new.npy")), np.load(os.path.join(tmp, "old.npy"))
                big = b > 1e-250
                diff = f"{np.max(np.abs(a[big] - b[big]) / b[big]):.1e}"
            old_s = (f"{old['build']:.1f} + {old['solve']:.1f} + {old['measures']:.1f}"
                     f" ({old['method']}, {old['rss_gb']:.2f} GiB)" if old and not failed
                     else old["error"] if failed else f"> {old_budget:.0f}")
            out_rows.append([r, k, batch, new["states"], new["transitions"], f"{new['build']:.2f}",
                             f"{new['solve']:.2f}", f"{new['measures']:.2f}", f"{new['rss_gb']:.2f}",
                             new["status"], f"{new['balance']:.0e}", f"{new['min_pi']:.1e}", old_s, diff])
            print(f"  done r={r} k={k} batch={batch}", file=sys.stderr, flush=True)
    return out_rows


EMBEDDED_ROWS = [(1000, "1"), (1000, "{1,2,4}"), (3000, "1"), (3000, "{1,2,4}"), (10000, "1")]


def embedded_row(r, batch, route, out):
    """One row of Table 3 in this process: seconds, peak RSS, the departure law saved to ``out``."""
    from ctmc.models.hysteresis.embedded import dense_departure_law
    q = HysteresisQueue(r // 3, 2 * r // 3, r, LAM, LAM1, service=deterministic(1.0), batch=BATCHES[batch])
    t0 = time.perf_counter()
    if route == "new":
        law = q.stationary("embedded")
        states, pid = law.info["departure_law"]
        extra = {"status": str(law.status.value), "residual": law.residual}
    else:
        states, pid = dense_departure_law(q)
        extra = {}
    secs = time.perf_counter() - t0
    np.save(out, np.vstack([states, pid]))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return dict(seconds=secs, rss_gb=rss, states=int(states.size), min_pi=float(pid[pid > 0].min()), **extra)


def run_embedded_table(rows, old_max):
    out_rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for r, batch in rows:
            res = {}
            for route in ("new", "old"):
                if route == "old" and r > old_max:
                    continue
                out = os.path.join(tmp, f"{route}.npy")
                proc = subprocess.run([sys.executable, __file__, "--embedded-row", str(r), batch, route, out],
                                      capture_output=True, text=True)
                res[route] = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else {
                    "error": proc.stderr.strip().splitlines()[-1][:60] if proc.stderr.strip() else "failed"}
                res[route + "_law"] = np.load(out) if proc.returncode == 0 else None
            new, old = res["new"], res.get("old")
            diff = "-"
            if old is not None and "error" not in old and "error" not in new:
                a, b = res["new_law"], res["old_law"]
                if np.array_equal(a[0], b[0]):
                    both = (a[1] > 1e-300) & (b[1] > 1e-300)     # below: subnormal in one of them
                    diff = f"{np.max(np.abs(a[1] - b[1])[both] / b[1][both]):.1e}"
                else:
                    diff = "states differ"
            old_s = ("-" if old is None
                     else old.get("error") or f"{old['seconds']:.2f} / {old['rss_gb']:.2f}")
            if "error" in new:
                out_rows.append([r, batch, "-", new["error"], "-", "-", "-", "-", old_s, diff])
            else:
                out_rows.append([r, batch, new["states"], f"{new['seconds']:.2f}",
                                 f"{new['rss_gb']:.2f}", new["status"], f"{new['residual']:.0e}",
                                 f"{new['min_pi']:.1e}", old_s, diff])
            print(f"  done r={r} batch={batch}", file=sys.stderr, flush=True)
    return out_rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--row"]:
        r, k, batch, route, out = argv[1:6]
        try:
            row = phase_row(int(r), int(k), batch, route, out)
        except Exception as exc:          # the old route may refuse an answer: report it as a row
            row = {"error": f"{type(exc).__name__}: {str(exc)[:60]}"}
        print(json.dumps(row))
        return 0
    if argv[:1] == ["--embedded-row"]:
        r, batch, route, out = argv[1:5]
        print(json.dumps(embedded_row(int(r), batch, route, out)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--phases", action="store_true", help="Table 0 (many phases) only")
    ap.add_argument("--embedded", action="store_true", help="Table 3 (route (b) at scale) only")
    ap.add_argument("--old-max", type=int, default=1000,
                    help="largest r for the old dense embedded route in Table 3")
    ap.add_argument("--old-budget", type=float, default=120.0,
                    help="seconds allowed to the old route (build + solve + measures) per row")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds allowed to one baseline solve (projected); larger sizes skip it")
    args = ap.parse_args(argv)
    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if args.embedded:
        rows = run_embedded_table(EMBEDDED_ROWS, args.old_max)
        print("\nTable 3: route (b), deterministic service; new = stationary('embedded') (banded GTH), "
              "old = dense GTH on all 3(r+1) states (s / peak GiB)")
        print(format_table(rows, ["r", "batch", "departure states", "new s", "new peak GiB", "status",
                                  "residual", "min pi", "old s / GiB", "max rel diff"]))
        return 0
    rows = run_phase_table(QUICK_PHASE_ROWS if args.quick else PHASE_ROWS, args.old_budget)
    print("\nTable 0: route (a) with many phases; new = assembly by levels + elimination over the levels,"
          " old = Model.build + stationary(auto) + hitting times (build + solve + measures s)")
    print(format_table(rows, ["r", "k", "batch", "states", "transitions", "build s", "solve s", "measures s",
                              "peak GiB", "status", "balance", "min pi", "old route s", "max rel diff"]))
    if args.phases:
        return 0
    sizes = [300, 1000] if args.quick else [1000, 2000, 4000, 8000]
    emb_sizes = [50, 100] if args.quick else [100, 200, 400]
    queue(30).stationary()  # warm-up (imports, first SuperLU call)

    rows = []
    last = None  # (states, seconds) of the last baseline run
    for r in sizes:
        q = queue(r)
        chain, tb = timed(q.chain)
        law, ts = timed(q.stationary, "ctmc")
        ret, th = timed(q.mean_return_time)
        pi = q.stationary_ctmc().pi
        # the baseline runs while its projected time (quadratic growth) fits the budget
        if last is None or last[1] * (chain.n_states / last[0]) ** 2 < args.budget:
            pi_naive, tn = timed(naive_stationary, chain.Q)
            last = (chain.n_states, tn)
            tn_s, diff = f"{tn:.2f}", f"{np.abs(pi - pi_naive).max():.1e}"
        else:
            tn_s, diff = f"> {args.budget:.0f} (skipped)", "-"
        rows.append([r, chain.n_states, chain.n_transitions, f"{tb:.2f}", f"{ts:.2f}", f"{th:.2f}",
                     f"{tb + ts + th:.2f}", tn_s, diff,
                     f"{law.residual:.1e}", f"{q.loss_probability():.6f}", f"{ret:.2f}"])
    print("\nTable 1: route (a), exact CTMC, Erlang-20 service")
    print(format_table(rows, ["r", "states", "transitions", "build s", "stationary s", "return s",
                              "total s", "baseline spsolve s", "max |diff|", "residual", "loss", "E[return]"]))

    rows = []
    for r in emb_sizes:
        qd = queue(r, deterministic(1.0))
        lawd, td = timed(qd.stationary, "embedded")
        qe = queue(r)
        lawe, te = timed(qe.stationary, "ctmc")
        rows.append([r, lawd.info["n_embedded"], lawd.info["mixing_terms"], f"{td:.2f}", f"{te:.2f}",
                     f"{np.abs(lawd.p - lawe.p).sum():.2e}", f"{qd.loss_probability():.6f}",
                     f"{qe.loss_probability():.6f}"])
    print("\nTable 2: route (b), embedded chain, deterministic service (vs route (a) with Erlang-20)")
    print(format_table(rows, ["r", "embedded states", "mixing terms", "embedded s", "ctmc E20 s",
                              "sum |p_D - p_E20|", "loss D", "loss E20"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
