r"""How large N goes for the exact side of a mean-field cross-check (3, 4 and 6 species).

A density-dependent population process with S species and N individuals is a
CTMC on the counts :math:`X \in \{0..N\}^S`, :math:`\sum_s X_s = N`: it has
:math:`\binom{N+S-1}{S-1}` states. This script declares such chains directly
with :class:`ctmc.Model` (variables: the counts of the first S-1 species; the
last is N minus their sum; a transition with change :math:`c` and density rate
:math:`r(x)` fires at :math:`N\,r(X/N)` where every count it decreases stays
non-negative), then measures, for growing N, the build, the stationary solve
``chain.stationary()`` (``method="auto"``, scipy backend) and the peak memory.

Models (the same as the examples ``meanfield_sir.py`` and
``meanfield_load_balancing.py``):

``sir`` (S = 3)
    SIR with waning immunity and a small external infection:
    S -> I at :math:`(\beta x_I + \varepsilon) x_S`, I -> R at
    :math:`\gamma x_I`, R -> S at :math:`\nu x_R`.
``jiq3`` (S = 4), ``jiq5`` (S = 6)
    Join-idle-queue by sampling, JIQ(d): N servers of rate 1 with buffer K
    (3 or 5), species = servers holding k = 0..K jobs; an arrival (rate
    :math:`\lambda N`) probes d servers and joins an idle one if it finds one,
    otherwise a random busy one (lost at K).

Each (model, N) runs in a child process, so that its peak resident memory
(``ru_maxrss``) is its own; the sweep over N stops for a model once a run
takes more than ``--budget`` seconds (build + solve), peaks above
``--max-mib``, fails, or would exceed ``--max-states``.

Run from the repository root::

    .venv/bin/python benchmarks/bench_meanfield_scaling.py             # full sweep, budget 90 s: ~10 min
    .venv/bin/python benchmarks/bench_meanfield_scaling.py --quick     # small N only, < 30 s
    .venv/bin/python benchmarks/bench_meanfield_scaling.py --models sir --budget 30
    .venv/bin/python benchmarks/bench_meanfield_scaling.py --models jiq3 --Ns 120 240 \
        --method gmres --option restart=100                                   # another method, its options
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time

import numpy as np

#: model -> (species, transitions, N sequence); a transition is (name, change, rate of densities)
BETA, EPS, GAMMA, NU = 4.0, 0.5, 1.0, 1.0
LAM, D = 0.9, 2


def sir():
    species = ["S", "I", "R"]
    trans = [("infection", {"S": -1, "I": +1}, lambda x: (BETA * x["I"] + EPS) * x["S"]),
             ("recovery", {"I": -1, "R": +1}, lambda x: GAMMA * x["I"]),
             ("waning", {"R": -1, "S": +1}, lambda x: NU * x["R"])]
    return species, trans


def jiq(K):
    species = [f"x{k}" for k in range(K + 1)]
    trans = [("arrive0", {"x0": -1, "x1": +1}, lambda x: LAM * (1 - (1 - x["x0"]) ** D))]
    for k in range(1, K):
        trans.append((f"arrive{k}", {f"x{k}": -1, f"x{k + 1}": +1},
                      lambda x, k=k: LAM * x[f"x{k}"] * (1 - x["x0"]) ** (D - 1)))
    for k in range(1, K + 1):
        trans.append((f"serve{k}", {f"x{k}": -1, f"x{k - 1}": +1}, lambda x, k=k: x[f"x{k}"]))
    return species, trans


MODELS = {
    "sir": (sir, [50, 100, 200, 400, 800, 1200, 1600, 2400, 3200, 4800, 6400]),
    "jiq3": (lambda: jiq(3), [20, 40, 80, 120, 160, 240, 320, 400, 480, 560]),
    "jiq5": (lambda: jiq(5), [10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 70, 80]),
}
QUICK = {"sir": [50, 100, 200], "jiq3": [20, 40], "jiq5": [10, 15]}


def n_states(S, N):
    return math.comb(N + S - 1, S - 1)


def build_model(species, trans, N):
    """The ctmc.Model on counts (first S-1 species as variables, the last implied)."""
    import ctmc

    m = ctmc.Model(f"population-{len(species)}-N{N}")
    v = {s: m.var(s, 0, N) for s in species[:-1]}
    last = N - sum(v.values())
    count = {**v, species[-1]: last}
    x = {s: count[s] / N for s in species}
    for name, change, rate in trans:
        guard = True
        for s, c in change.items():
            if c < 0:
                guard = guard & (count[s] >= -c)
        update = {v[s]: v[s] + c for s, c in change.items() if s in v}
        m.event(name, guard=guard, rate=N * rate(x), update=update)
    return m


def one(name, N, method="auto", options=None):
    """Build and solve one chain in this process; a dict of measurements."""
    import ctmc  # noqa: F401  (import time is not build time)

    species, trans = MODELS[name][0]()
    m = build_model(species, trans, N)
    init = {s: 0 for s in species[:-1]}
    init[species[0]] = N                        # everyone in the first species (S, or idle servers)
    t0 = time.perf_counter()
    chain = m.build(initial=init, progress=False)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    res = chain.stationary(method, **(options or {}))
    t_solve = time.perf_counter() - t0
    pi = res.pi
    dens = [float(pi @ chain.states[s]) / N for s in species[:-1]]
    return {"states": chain.n_states, "transitions": int(chain.Q.nnz - chain.n_states), "build": t_build,
            "solve": t_solve, "method": res.method, "status": getattr(res.status, "name", str(res.status)), "residual": float(res.residual),
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "x0": dens[0]}


def run_child(name, N, timeout, method="auto", options=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--one", name, str(N), method, json.dumps(options or {})]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout ({timeout:.0f} s)", "wall": time.perf_counter() - t0}
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024   # max over children so far
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"status": f"failed: {tail[:80]}", "wall": time.perf_counter() - t0, "peak_mib": peak}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", choices=sorted(MODELS), default=list(MODELS))
    ap.add_argument("--budget", type=float, default=90.0, help="stop a model after a run over this (s)")
    ap.add_argument("--max-mib", type=float, default=8192.0, help="stop a model after a run above this peak")
    ap.add_argument("--max-states", type=int, default=30_000_000)
    ap.add_argument("--quick", action="store_true", help="small N only")
    ap.add_argument("--Ns", type=int, nargs="+", help="these N instead of the default sequence (one model)")
    ap.add_argument("--method", default="auto", help="stationary method (default auto)")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="an option of the method, e.g. --option restart=100 (integers and floats parsed)")
    ap.add_argument("--one", nargs=4, metavar=("MODEL", "N", "METHOD", "OPTIONS"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.one:
        print(json.dumps(one(a.one[0], int(a.one[1]), a.one[2], json.loads(a.one[3]))))
        return None

    if a.Ns and len(a.models) != 1:
        ap.error("--Ns: give one model with --models")
    options = {}
    for item in a.option:
        key, sep, value = item.partition("=")
        if not sep:
            ap.error(f"--option: expected KEY=VALUE, got {item!r}")
        for conv in (int, float, str):
            try:
                options[key] = conv(value)
                break
            except ValueError:
                continue
    import scipy

    from ctmc.report import format_table
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    except OSError:
        commit = "?"
    print(f"python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, "
          f"{os.cpu_count()} cpus, commit {commit}; stationary method {a.method!r} {options or ''}")
    rows = []
    for name in a.models:
        species, _ = MODELS[name][0]()
        S = len(species)
        for N in (a.Ns or (QUICK[name] if a.quick else MODELS[name][1])):
            if n_states(S, N) > a.max_states:
                rows.append([name, S, N, n_states(S, N), "", "", "", "", "", f"skipped (> {a.max_states} states)"])
                break
            r = run_child(name, N, timeout=max(3 * a.budget, 60), method=a.method, options=options)
            if "states" not in r:
                rows.append([name, S, N, n_states(S, N), "", "", "", (f"{r['peak_mib']:.0f}" if "peak_mib" in r else "-"),
                             "", r["status"]])
                print("  ", *rows[-1], flush=True)
                break
            assert r["states"] == n_states(S, N), (r["states"], n_states(S, N))
            rows.append([name, S, N, r["states"], r["transitions"], f"{r['build']:.2f}", f"{r['solve']:.2f}",
                         f"{r['peak_mib']:.0f}", r["method"], f"{r['status']} (res {r['residual']:.0e})"])
            print("  ", *rows[-1], flush=True)
            if r["build"] + r["solve"] > a.budget or r["peak_mib"] > a.max_mib:
                break
    print()
    print(format_table(rows, HEAD, title="exact population chains: build, stationary (auto), peak memory"))
    return rows


HEAD = ["model", "species", "N", "states", "transitions", "build s", "solve s", "peak MiB", "method", "status"]

if __name__ == "__main__":
    main()
