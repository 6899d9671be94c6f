"""Loading and building a PRISM program against building the hand-written model.

    .venv/bin/python benchmarks/bench_prism.py                          # kanban:3, fms:4
    .venv/bin/python benchmarks/bench_prism.py --models kanban:4,fms:5 --repeat 3
    .venv/bin/python benchmarks/bench_prism.py --examples /path/to/prism/prism-examples/ctmcs

For each gallery model, in the same process and alternating the two routes
(so the machine's load falls on both alike), the best of ``--repeat`` times of

* hand: ``gm.model().build(initial=gm.initial)``, the gallery's ``ctmc.Model``;
* prism: ``ctmc.prism.load(gm.prism_program(), constants=...)`` (parse and
  translate: the "load" column) then ``.build()``;

and the ratio prism / hand of the totals (the target is at most 2). The two
chains must have the same number of states and transitions (checked). With
``--examples`` the PRISM route reads PRISM's own case-study file
(``<dir>/<name>/<name>.sm``, the size as its constant) instead of the
program the gallery generates.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import ctmc.prism
from ctmc.models.gallery import parse_spec


def _timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="kanban:3,fms:4",
                    help="comma-separated name:size (default %(default)s)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs per route (default 3)")
    ap.add_argument("--examples", default="", help="a prism-examples/ctmcs folder: time PRISM's own files")
    args = ap.parse_args(argv)
    print(f"{'model':<12} {'states':>10} {'transitions':>12} {'hand s':>8} {'load s':>8} {'build s':>8} "
          f"{'prism s':>8} {'ratio':>6}")
    for spec in args.models.split(","):
        gm = parse_spec(spec)
        text, consts = gm.prism_program(), gm.prism_constants
        if args.examples:
            text = Path(args.examples) / gm.name / f"{gm.name}.sm"
            consts = {{"fms": "n"}.get(gm.name, gm.parameter): gm.value}
        hand = load = build = float("inf")
        for _ in range(args.repeat):            # alternate the routes
            t_hand, ref = _timed(lambda: gm.model().build(initial=gm.initial))
            t_load, model = _timed(lambda: ctmc.prism.load(text, constants=consts))
            t_build, chain = _timed(model.build)
            hand, load, build = min(hand, t_hand), min(load, t_load), min(build, t_build)
        if (chain.n_states, chain.n_transitions) != (ref.n_states, ref.n_transitions):
            raise SystemExit(f"{spec}: the PRISM program built {chain.n_states} states / "
                             f"{chain.n_transitions} transitions, the hand-written model {ref.n_states} / "
                             f"{ref.n_transitions}")
        print(f"{spec:<12} {ref.n_states:>10,} {ref.n_transitions:>12,} {hand:>8.3f} {load:>8.3f} "
              f"{build:>8.3f} {load + build:>8.3f} {(load + build) / hand:>6.2f}")


if __name__ == "__main__":
    main()
