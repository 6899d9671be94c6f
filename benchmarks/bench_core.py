"""Speed and accuracy of ctmc's core on the two-queue join-the-shortest-queue chain.

Run from the repository root::

    .venv/bin/python benchmarks/bench_core.py            # full run (a few minutes)
    .venv/bin/python benchmarks/bench_core.py --quick    # small sizes only (< 30 s)

Three plain-text tables, each with a naive baseline measured in the same run:

1. exploration + assembly rate of :meth:`ctmc.Model.build` (strategies "box" and
   "bfs") against a dict-based pure-Python breadth-first search;
2. stationary solve times and accuracy per method against
   ``scipy.sparse.linalg.spsolve`` on ``Q^T`` with one row replaced by ones,
   checked against the closed form of the blocking probability;
3. mean hitting times of the saturated state ``(K, K)`` from every state.

The chain is the one of :class:`ctmc.models.jsq.JSQ2`: states ``(s, l)`` with
``0 <= s <= l <= K`` (shortest and longest queue), arrivals at rate ``rho``
joining the shorter queue, two servers of rate 1/2. It has
``(K + 1)(K + 2)/2`` states and about three times as many transitions.

See ``benchmarks/README.md`` for the meaning of every column.
"""
from __future__ import annotations

import argparse
import gc
import math
import platform
import sys
import time
import warnings
from collections import deque

import numpy as np
import scipy
import scipy.sparse as sp
import scipy.sparse.linalg as sla

import ctmc
from ctmc.report import format_table
from ctmc.results import TailAccuracyWarning
from ctmc.models.jsq import JSQ2, blocking_probability

RHO = 0.9
TARGET_RATE = 1.0e7  # project target: transitions/s on a 2-D queueing chain


# ---------------------------------------------------------------------------
# the chain
# ---------------------------------------------------------------------------
def jsq_model(K: int, rho: float = RHO) -> ctmc.Model:
    """The two-queue JSQ model of :mod:`ctmc.models.jsq` (symmetric rates 1/2)."""
    return JSQ2(K, rho, 0.5).model()


def jsq_chain(K: int) -> ctmc.CTMC:
    return jsq_model(K).build(initial={"s": 0, "l": 0}, progress=False)


def n_states_of(K: int) -> int:
    return (K + 1) * (K + 2) // 2


def blocking_exact(K: int, rho: float = RHO) -> float:
    """Closed form of pi(K, K) (:func:`ctmc.models.jsq.blocking_probability`)."""
    return blocking_probability(K, rho, 0.5)


# ---------------------------------------------------------------------------
# naive baselines
# ---------------------------------------------------------------------------
def naive_events(K: int, rho: float = RHO):
    """(guard, rate, update) Python callables, one per event of :func:`jsq_model`."""
    return [
        (lambda s, l: s < l, lambda s, l: rho, lambda s, l: (s + 1, l)),
        (lambda s, l: s == l and l < K, lambda s, l: rho, lambda s, l: (s, l + 1)),
        (lambda s, l: 1 <= s < l, lambda s, l: 0.5, lambda s, l: (s - 1, l)),
        (lambda s, l: 1 <= s < l, lambda s, l: 0.5, lambda s, l: (s, l - 1)),
        (lambda s, l: s == l and s >= 1, lambda s, l: 1.0, lambda s, l: (s - 1, l)),
        (lambda s, l: s == 0 and l >= 1, lambda s, l: 0.5, lambda s, l: (s, l - 1)),
    ]


def naive_build(K: int, rho: float = RHO):
    """Dict-based BFS, one Python call per state and event, COO lists -> CSR generator.

    Returns ``(states, Q)`` with ``states`` in discovery order.
    """
    events = naive_events(K, rho)
    index = {(0, 0): 0}
    states = [(0, 0)]
    queue = deque([(0, 0)])
    rows, cols, vals = [], [], []
    while queue:
        st = queue.popleft()
        i = index[st]
        s, l = st  # noqa: E741
        for guard, rate, update in events:
            if not guard(s, l):
                continue
            r = rate(s, l)
            if r == 0:
                continue
            nxt = update(s, l)
            if nxt == st:
                continue
            j = index.get(nxt)
            if j is None:
                j = len(states)
                index[nxt] = j
                states.append(nxt)
                queue.append(nxt)
            rows.append(i)
            cols.append(j)
            vals.append(r)
    n = len(states)
    off = sp.coo_matrix((vals, (rows, cols)), shape=(n, n)).tocsr()
    off.sum_duplicates()
    Q = (off - sp.diags(np.asarray(off.sum(axis=1)).ravel())).tocsr()
    return states, Q


def naive_matches(chain: ctmc.CTMC, states, Qn) -> float:
    """Largest |difference| between the naive generator (re-ordered) and ctmc's."""
    perm = np.array([chain.index(s=s, l=l) for s, l in states])  # naive i -> ctmc perm[i]
    P = sp.csr_matrix((np.ones(perm.size), (perm, np.arange(perm.size))), shape=(perm.size,) * 2)
    D = (P @ Qn @ P.T - chain.Q).tocsr()
    return float(np.abs(D.data).max()) if D.nnz else 0.0


def naive_stationary(Q: sp.csr_matrix) -> np.ndarray:
    """Textbook approach: solve Q^T pi = 0 with the last equation replaced by sum(pi) = 1."""
    n = Q.shape[0]
    A = Q.T.tocsr()
    A = sp.vstack([A[:-1], sp.csr_matrix(np.ones((1, n)))], format="csc")
    b = np.zeros(n)
    b[-1] = 1.0
    return sla.spsolve(A, b)


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------
def timed(fn, *args, **kw):
    t0 = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t0


def g(x, digits=2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}e}"


def secs(x) -> str:
    return "-" if x is None else (f"{x:.3f}" if x < 100 else f"{x:.1f}")


def projected(last, n_last, n_next, alpha) -> float:
    """Time projected for size ``n_next`` from a run of ``last`` seconds at ``n_last``."""
    return last * (n_next / n_last) ** alpha


def git_state() -> str:
    """Commit and dirtiness of the working tree, so quoted numbers can be traced."""
    import subprocess
    try:
        root = __file__.rsplit("/benchmarks/", 1)[0] if "/benchmarks/" in __file__ else "."
        head = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "ctmc"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        n = len(dirty.splitlines()) if dirty else 0
        return f"git {head or '?'}" + (f" + uncommitted changes in {n} file(s) under ctmc/" if n else "")
    except Exception:  # not a git checkout
        return "git: unknown"


def warm_up():
    """Pay one-time costs (lazy imports, first SuperLU call) outside every timing."""
    c = jsq_chain(5)
    c.structure
    for m in ("lu", "gth", "gmres", "bicgstab", "gauss_seidel", "power"):
        c.stationary(m, check=False)
    c.hitting_times(c.where({"s": 5, "l": 5}), check=False)
    c.hitting_times(c.where({"s": 5, "l": 5}), check=False, method="lu")
    naive_stationary(c.Q)
    naive_build(5)


# ---------------------------------------------------------------------------
# table 1: exploration + assembly
# ---------------------------------------------------------------------------
def bench_build(sizes, repeats, baseline_budget):
    rows, best_rate, check_lines = [], {}, []
    spent = 0.0
    last_rate = None
    speedup = None
    for K in sizes:
        for strategy in ("box", "bfs"):
            times = []
            for _ in range(repeats):
                gc.collect()
                chain, dt = timed(jsq_model(K).build, initial={"s": 0, "l": 0}, strategy=strategy,
                                  progress=False)
                times.append(dt)
                nt, n = chain.n_transitions, chain.n_states
                del chain
            best = min(times)
            rows.append([K, n, nt, strategy, secs(times[0]), secs(best), g(nt / times[0]), g(nt / best)])
            best_rate[strategy] = (K, nt / best, nt / times[0])
        # naive baseline, within its time budget (projected from the last rate)
        if last_rate is not None and spent + nt / last_rate > baseline_budget:
            rows.append([K, n, nt, "naive dict BFS", "skipped", "", "",
                         f"(projected {nt / last_rate:.0f} s, budget left {baseline_budget - spent:.0f} s)"])
            continue
        gc.collect()
        (states, Qn), dt = timed(naive_build, K)
        spent += dt
        nt_naive = int(Qn.nnz - np.count_nonzero(Qn.diagonal()))
        last_rate = nt_naive / dt
        rows.append([K, len(states), nt_naive, "naive dict BFS", secs(dt), secs(dt), g(last_rate), g(last_rate)])
        speedup = (K, best_rate["box"][1] / last_rate, best_rate["bfs"][1] / last_rate)
        diff = naive_matches(jsq_chain(K), states, Qn)
        check_lines.append(f"K={K}: naive generator vs ctmc generator, max |difference| = {diff:.1e}")
        del states, Qn
    out = format_table(rows, ["K", "states", "transitions", "strategy", "first s", "best s",
                              "trans/s (first)", "trans/s (best)"])
    lines = [out, "", *check_lines, ""]
    for strategy, (K, rate, rate_first) in best_rate.items():
        verdict = "MET" if rate >= TARGET_RATE else "NOT MET"
        verdict_first = "met" if rate_first >= TARGET_RATE else "not met"
        lines.append(f"target >= {TARGET_RATE:.0e} transitions/s, strategy={strategy!r} at K={K}: "
                     f"{verdict} on the best of {repeats} builds ({rate:.2e}/s); "
                     f"{verdict_first} on the first build ({rate_first:.2e}/s)")
    if speedup is not None:
        lines.append(f"naive baseline: {spent:.1f} s in total (budget {baseline_budget:.0f} s); at K={speedup[0]} "
                     f"(largest size it ran) ctmc is {speedup[1]:.1f}x (box) and {speedup[2]:.2f}x (bfs) "
                     "its rate (best builds)")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# table 2: stationary solves
# ---------------------------------------------------------------------------
METHODS = [
    # name, options, max states, time limit per solve (s), scaling exponent for projection
    ("lu", {}, None, 60.0, 1.5),
    ("gth", {}, 2000, 30.0, 3.0),
    ("gmres", {"maxiter": 200}, None, 60.0, 1.3),
    ("bicgstab", {"maxiter": 2000}, None, 60.0, 1.3),
    ("gauss_seidel", {"maxiter": 1000}, None, 60.0, 1.0),
    ("power", {"maxiter": 10000}, None, 60.0, 1.0),
]
BASELINE_LIMIT = 60.0


def bench_stationary(sizes):
    rows = []
    last = {}  # method -> (seconds, n)
    for K in sizes:
        gc.collect()
        chain = jsq_chain(K)
        n = chain.n_states
        chain.structure  # communicating classes: computed once per chain, cached
        ib = chain.index(s=K, l=K)
        exact = blocking_exact(K)
        for name, opts, max_states, limit, alpha in METHODS + [("baseline spsolve", None, None,
                                                                 BASELINE_LIMIT, 1.5)]:
            label = name if opts is None else name + "".join(f" {k}={v}" for k, v in opts.items())
            if max_states is not None and n > max_states:
                continue
            if name in last:
                t_last, n_last = last[name]
                p = projected(t_last, n_last, n, alpha)
                if t_last > limit or p > limit:
                    rows.append([n, label, "-", f"skipped (projected {p:.0f} s > {limit:.0f} s)",
                                 "-", "-", "-", "-"])
                    continue
            gc.collect()
            try:
                if opts is None:
                    pi, dt = timed(naive_stationary, chain.Q)
                    residual = float(np.abs(chain.Q.T @ pi).sum())
                    status = "-"
                    bal = "-"
                else:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", TailAccuracyWarning)
                        res, dt = timed(chain.stationary, name, check=False, **opts)
                    pi, residual, status = res.pi, res.residual, res.status.value
                    if res.iterations:
                        status += f" ({res.iterations} it)"
                    bal = g(res.balance_error)
                pb = float(pi[ib])
                err = abs(pb / exact - 1) if math.isfinite(pb) else float("nan")
                rows.append([n, label, secs(dt), status, g(residual), bal, g(pb, 3), g(err)])
                last[name] = (dt, n)
            except Exception as exc:  # report, do not stop the benchmark
                rows.append([n, label, "-", f"error: {type(exc).__name__}: {str(exc)[:60]}",
                             "-", "-", "-", "-"])
                last[name] = (float("inf"), n)
        rows.append([""] * 8)
        del chain
    rows.pop()
    return format_table(rows, ["states", "method", "seconds", "status", "residual", "balance_error",
                               "pi(K,K)", "rel.err pi(K,K)"])


# ---------------------------------------------------------------------------
# table 3: hitting times
# ---------------------------------------------------------------------------
def bench_hitting(sizes, gth_check_max=2000):
    rows = []
    for K in sizes:
        gc.collect()
        chain = jsq_chain(K)
        target = chain.where({"s": K, "l": K})
        i0 = chain.index(s=0, l=0)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", TailAccuracyWarning)
                h, dt = timed(chain.hitting_times, target, check=False)
            mean0 = float(h.mean[i0])
            check = "-"
            if chain.n_states - 1 <= gth_check_max:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", TailAccuracyWarning)
                    other = "lu" if h.method == "gth" else "gth"
                    h2 = chain.hitting_times(target, check=False, method=other)
                d = np.abs(h2.mean / np.where(h.mean > 0, h.mean, 1) - 1)[~target]
                check = f"{g(float(d.max()))} ({other})"
            rows.append([K, chain.n_states, h.method, secs(dt), h.status.value, g(h.residual),
                         g(h.info.get("balance_error")), g(mean0, 4), g(float(h.mean.max()), 4), check])
        except Exception as exc:
            rows.append([K, chain.n_states, "-", "-", f"error: {type(exc).__name__}: {str(exc)[:60]}",
                         "-", "-", "-", "-", "-"])
        del chain
    return format_table(rows, ["K", "states", "solver", "seconds", "status", "backward err", "balance_error",
                               "E_(0,0)[T]", "max_i E_i[T]", "max rel.diff vs other solver"])


# ---------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes only (finishes in < 30 s)")
    args = ap.parse_args(argv)
    if args.quick:
        build_sizes, repeats, baseline_budget = [30, 60, 100, 150], 3, 5.0
        stat_sizes, hit_sizes = [30, 60, 100], [30, 60, 100]
    else:
        build_sizes, repeats, baseline_budget = [100, 300, 700, 1000, 1400], 3, 20.0
        stat_sizes = [30, 60, 150, 300, 700, 1000, 1400]
        hit_sizes = [30, 60, 150, 300, 700, 1000, 1400]
    t_start = time.perf_counter()
    print(f"ctmc core benchmark ({'quick' if args.quick else 'full'}): python {platform.python_version()}, "
          f"numpy {np.__version__}, scipy {scipy.__version__}, {platform.machine()}, {git_state()}")
    print(f"chain: two-queue JSQ (s <= l <= K), rho = {RHO}, states = (K+1)(K+2)/2")
    warm_up()

    print("\n== 1. Exploration + assembly: ctmc.Model.build vs a naive dict-based BFS ==")
    print(f"(ctmc: {repeats} builds per size and strategy, the first one in a fresh-memory state; "
          f"baseline: one build, {baseline_budget:.0f} s budget)")
    print(bench_build(build_sizes, repeats, baseline_budget), flush=True)

    print("\n== 2. Stationary solve per method (check=False) vs naive spsolve with a row of ones ==")
    print("(relative error of pi(K,K) against the closed form; a size is skipped when the time projected "
          "from the previous size exceeds the method's limit)")
    print(bench_stationary(stat_sizes), flush=True)

    print("\n== 3. Hitting times: mean time to saturation (K, K) from every state ==")
    print(bench_hitting(hit_sizes), flush=True)
    print(f"\ntotal benchmark time: {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
