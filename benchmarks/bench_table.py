"""Simulating the hysteresis queue with its phase rates as ``ctmc.expr.table`` against a tree of ``where``.

The family's model reads a rate per service phase, ``ctmc_route.per_phase`` (:math:`S_{jj'}`,
:math:`s_{0,j}`, :math:`s_{0,j}\\alpha_{j'}`). Written with :func:`ctmc.expr.where` (a balanced tree on
``phase < cut`` over the runs of equal values, :math:`\\lceil\\log_2 m\\rceil` deep) the compiled
engine evaluates every leaf of the tree, :math:`O(m)` opcodes per rate and :math:`O(m^2)` per step
for a dense :math:`m`-phase law; :func:`ctmc.expr.table` is one opcode. Both models give the same
generator to the bit, so the simulator draws the same path: the event counts are equal and the
ratio of the rates is the ratio of the times. Dense PH laws are random (fixed seed); Erlang's
tables are mostly zeros, so its trees are short.

Run: .venv/bin/python benchmarks/bench_table.py [--events 400000]
"""
import argparse
import time

import numpy as np

import ctmc
from ctmc.expr import as_expr, where
from ctmc.models.hysteresis import HysteresisQueue, ctmc_route, erlang, phase_type
from ctmc.report import format_table


def where_tree(values, j):
    """``values[j]`` as a balanced tree of where() over the runs of equal values (the baseline)."""
    values = np.asarray(values, dtype=float)
    cuts = [0] + [k for k in range(1, values.size) if values[k] != values[k - 1]]

    def tree(a, b):
        if b - a == 1:
            return float(values[cuts[a]])
        mid = (a + b) // 2
        return where(j < cuts[mid], tree(a, mid), tree(mid, b))

    return as_expr(tree(0, len(cuts)))


def dense(m, rng):
    S = rng.uniform(0.1, 1.0, (m, m))
    np.fill_diagonal(S, 0.0)
    S[np.diag_indices(m)] = -(S.sum(axis=1) + rng.uniform(0.5, 2.0, m))
    a = rng.uniform(0.0, 1.0, m)
    return phase_type(a / a.sum(), S)


def rate(model, events):
    """Events per second of one censored path of exactly ``events`` events, and the path's end time."""
    sim = ctmc.simulate(model, {"n": 0, "mode": 0, "phase": 0}, seed=1, max_events=events)
    t0 = time.perf_counter()
    h = sim.hitting_times("n < 0", runs=2)
    return h.events / (time.perf_counter() - t0), h.times.tolist()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=400_000)
    args = ap.parse_args()
    rng = np.random.default_rng(2026)
    rows = []
    for name, svc in [("exponential", None), ("Erlang 40", erlang(40, 1.0)), ("dense PH 3", dense(3, rng)),
                      ("dense PH 10", dense(10, rng)), ("dense PH 40", dense(40, rng))]:
        q = HysteresisQueue(5, 20, 30, 1.1, 0.6, service=svc)
        fast, path = rate(q.model(), args.events // 2)
        saved = ctmc_route.per_phase
        ctmc_route.per_phase = where_tree
        try:
            slow, path_tree = rate(q.model(), args.events // 2)
        finally:
            ctmc_route.per_phase = saved
        assert path == path_tree, "the two models drew different paths"
        rows.append([name, q.service.n_phases, len(q.model().events), f"{fast:.3g}", f"{slow:.3g}",
                     f"{fast / slow:.1f}"])
    print(format_table(rows, ["service", "phases", "events", "table ev/s", "where-tree ev/s", "ratio"]))


if __name__ == "__main__":
    main()
