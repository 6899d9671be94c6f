"""Events per second of ctmc's simulator against plain numpy Gillespie loops on the same models, one run.

For each model: ``ctmc.simulate`` (the compiled engine, one thread) draws
``--events`` events (two paths censored at half of them each, by a target
that never holds, so the count is exact); two plain numpy loops of the
direct method draw fewer (``--numpy-events``) on the same model:

- ``numpy (model)``: per event, every event's rate evaluated by ctmc's numpy
  evaluation (:meth:`ctmc.Model.event_rate`) and the chosen update by its
  expressions, on one-state arrays: what one writes without building the chain;
- ``numpy (CSR)``: the chain built first (not timed), then per event the row of
  the generator, ``cumsum``, ``searchsorted`` and an exponential draw: the
  fastest plain loop, where the chain can be built.

Columns: events per second of each and the ratio of ctmc's to each.
Run: .venv/bin/python benchmarks/bench_simulate.py [--events 4000000] [--numpy-events 20000]
"""
import argparse
import time

import numpy as np

import ctmc
from ctmc.models.gallery import tandem
from ctmc.models.jsq import JSQ2
from ctmc.models.supermarket import occupancy_model
from ctmc.report import format_table


def mm1k(K=10):
    m = ctmc.Model("mm1k(K=10)")
    n = m.var("n", 0, K)
    m.event("arrival", guard=n < K, rate=0.9, update={n: n + 1})
    m.event("departure", guard=n > 0, rate=1.0, update={n: n - 1})
    return m, {"n": 0}


def models():
    g = tandem(10)
    sm = occupancy_model(20, 2, 0.9, 6)
    return [mm1k(), (g.model(), g.initial), (JSQ2(50, 0.9, 0.3).model(), {"s": 0, "l": 0}),
            (sm, {f"M{k}": 0 for k in range(1, 7)})]


def ctmc_rate(model, initial, events):
    sim = ctmc.simulate(model, initial, seed=1, max_events=events // 2)
    never = f"{model.variables[0].name} < 0"
    t0 = time.perf_counter()
    h = sim.hitting_times(never, runs=2)
    return h.events / (time.perf_counter() - t0)


def numpy_model_rate(model, initial, events, rng):
    """The direct method with ctmc's numpy evaluation of the model, one state at a time."""
    state = {k: np.array([v]) for k, v in initial.items()}
    evs = model.events
    t0 = time.perf_counter()
    for _ in range(events):
        rates = np.array([model.event_rate(ev.name, state)[0] for ev in evs])
        total = rates.sum()
        _ = rng.exponential(1.0 / total)
        ev = evs[int(np.searchsorted(np.cumsum(rates), rng.random() * total, side="right"))]
        new = {var.name: np.asarray(expr.evaluate(state)).reshape(1) for var, expr in ev.update}
        state = {**state, **new}
    return events / (time.perf_counter() - t0)


def numpy_csr_rate(model, initial, events, rng):
    """The direct method on the built generator's rows (the build not timed)."""
    chain = model.build(initial=initial)
    Q = chain.Q.tocsr()
    Q.setdiag(0)
    Q.eliminate_zeros()
    ip, ix, data = Q.indptr, Q.indices, Q.data
    i = chain.index(**initial)
    t0 = time.perf_counter()
    for _ in range(events):
        r = data[ip[i]:ip[i + 1]]
        c = np.cumsum(r)
        _ = rng.exponential(1.0 / c[-1])
        i = int(ix[ip[i] + int(np.searchsorted(c, rng.random() * c[-1], side="right"))])
    return events / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--numpy-events", type=int, default=20_000)
    args = ap.parse_args()
    rows = []
    for model, initial in models():
        rng = np.random.default_rng(1)
        c = ctmc_rate(model, initial, args.events)
        a = numpy_model_rate(model, initial, max(args.numpy_events // 10, 100), rng)
        b = numpy_csr_rate(model, initial, args.numpy_events, rng)
        rows.append([model.name, len(model.events), f"{c:.3g}", f"{a:.3g}", f"{b:.3g}", f"{c / a:.0f}",
                     f"{c / b:.0f}"])
    print(format_table(rows, ["model", "events", "ctmc ev/s", "numpy (model) ev/s", "numpy (CSR) ev/s",
                              "ratio (model)", "ratio (CSR)"]))


if __name__ == "__main__":
    main()
