"""Speed of ctmc.models.hysteresis at scale: r in the thousands with Erlang-20 service.

Run from the repository root::

    .venv/bin/python benchmarks/bench_hysteresis.py            # r up to 8000 (about a minute)
    .venv/bin/python benchmarks/bench_hysteresis.py --quick    # r up to 1000 (a few seconds)

The queue: single arrivals, lam = 1.05 (normal), lam_overload = 0.8, Erlang-20
service of mean 1, thresholds L = r/3, H = 2r/3, R = r (capacity r), instant
policy. Route (a), the exact CTMC on (mode, n, phase), has about 20 x 5r/3
states.

Table 1 (route (a)) times, for every r, the public calls
``HysteresisQueue.chain()`` (build with ctmc.Model), ``stationary("ctmc")``
(ctmc's "auto" stationary solver) and ``mean_return_time()`` (ctmc hitting
times), against the **baseline** measured in the same run on the same
generator: ``scipy.sparse.linalg.spsolve`` of ``Q^T pi = 0`` with the last
equation replaced by ``sum(pi) = 1`` (the textbook approach; it is skipped
when its projected time exceeds ``--budget`` seconds). ``max |diff|`` is
the largest difference between the two stationary vectors, ``loss`` the
customer loss probability.

Table 2 (route (b)) times the embedded chain at departure epochs for the same
queue with deterministic service (the Erlang-k limit; dense matrices of
order 3(r+1), so r stays small) and the distance of route (a) with Erlang-20
to it: the Erlang-k approximation error of deterministic service, about 1/k.
"""
from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from ctmc.models.hysteresis import HysteresisQueue, deterministic, erlang
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds allowed to one baseline solve (projected); larger sizes skip it")
    args = ap.parse_args(argv)
    sizes = [300, 1000] if args.quick else [1000, 2000, 4000, 8000]
    emb_sizes = [50, 100] if args.quick else [100, 200, 400]
    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}")
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
