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

With ``--storm PYTHON`` (stormpy's python, ``scripts/storm_venv.sh``) a second
table runs PRISM case studies outside the gallery with their published
properties, ctmc against Storm (through ``models/gallery/storm_worker.py``, one
process per property, as ``bench_gallery.py``):

    .venv/bin/python benchmarks/bench_prism.py --models "" --storm .venv-storm/bin/python \\
        --examples /path/to/prism/prism-examples/ctmcs

* ctmc: ``load`` + ``build`` once, then ``check_file`` of the ``.csl`` (every
  property), best of ``--repeat``;
* Storm: parse + build (the fastest of its per-property processes) and the sum
  of its model-checking times; ``storm/ctmc`` is the ratio of the totals and
  ``max rel diff`` the largest relative difference of the answers, with the
  property (its number in the file) and the two values (old-style filters
  ``{phi}{max}`` left out: the worker reports the initial state's value). ctmc's
  answers are within their error bounds (``tests/test_prism_cases.py`` checks
  them against a dense reference); a huge relative difference on a probability
  far below 1e-16 is Storm's absolute rounding error.

Without ``--examples`` only ``tests/data/prism/cell.sm`` and ``salt.sm``
(ctmc's own texts of the wireless cell and of the Na/Cl reaction) run; with it
PRISM's ``cell``, ``nacl``, ``knacl`` and
``mc`` files (the molecules from ``../simple/molecules``) at the sizes below.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench_gallery import DEFAULT_STORM, ROOT, run_route

import ctmc.prism
from ctmc.models.gallery import parse_spec

#: (name, program, properties, model constants, property constants); paths relative to the
#: prism-examples folder (the parent of ``--examples``), or absolute
CASES = [("cell:500", "ctmcs/cell/cell.sm", "ctmcs/cell/cell.csl", {"N": 500}, {"T": 0.5}),
         ("nacl:1000", "simple/molecules/nacl.sm", "simple/molecules/nacl.csl", {"N1": 1000, "N2": 1000},
          {"T": 0.004, "i": 4}),
         ("knacl:40", "simple/molecules/knacl.sm", "simple/molecules/knacl.csl",
          {"N1": 40, "N2": 40, "N3": 40}, {"T": 0.004, "i": 4}),
         ("mc:60", "simple/molecules/mc.sm", "simple/molecules/mc.csl", {"N1": 60, "N2": 60},
          {"T": 0.004, "i": 4})]
_OWN = ROOT / "tests" / "data" / "prism"
OWN_CASES = [("own cell:500", str(_OWN / "cell.sm"), str(_OWN / "cell.csl"), {"N": 500}, {}),
             ("own salt:300", str(_OWN / "salt.sm"), str(_OWN / "salt.csl"),
              {"SODIUM": 300, "CHLORINE": 300}, {})]


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
    ap.add_argument("--storm", default=str(DEFAULT_STORM) if DEFAULT_STORM.exists() else "",
                    help="python of a venv with stormpy: the case-study table ('' = none)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per Storm process")
    args = ap.parse_args(argv)
    if args.models:
        gallery_table(args)
    if args.storm:
        base = Path(args.examples).parent if args.examples else ROOT
        cases = OWN_CASES + (CASES if args.examples else [])
        print(f"\n{'case':<14} {'states':>9} {'trans.':>9} {'props':>5} {'ctmc load+build':>15} "
              f"{'ctmc check':>10} {'storm build':>11} {'storm check':>11} {'storm/ctmc':>10} "
              f"{'max rel diff':>12}  worst property (storm vs ctmc)")
        for case in cases:
            storm_row(case, base, args)


def storm_row(case, base, args):
    """One line of the case-study table: ctmc and Storm on every property of the case's .csl."""
    name, program, props, consts, pconsts = case
    program, props = base / program, base / props
    build = check = float("inf")
    for _ in range(args.repeat):
        t_build, chain = _timed(lambda: ctmc.prism.load(program, constants=consts).build())
        t_check, results = _timed(lambda: ctmc.prism.check_file(chain, props, constants=pconsts))
        build, check = min(build, t_build), min(check, t_check)
    decl = "".join(f"const {'int' if isinstance(v, int) else 'double'} {c} = {v}; "
                   for c, v in pconsts.items())
    s_build, s_check, diff, worst = float("inf"), 0.0, 0.0, ""
    for k, r in enumerate(results, 1):
        if r.method.startswith("filter("):       # a filter's value is not the initial state's
            continue
        out = run_route([args.storm, str(ROOT / "models" / "gallery" / "storm_worker.py"), str(program),
                         "--property", decl + r.property, "--constants", json.dumps(consts)], args.timeout)
        if "value" not in out:
            raise SystemExit(f"{name}: Storm on {r.property}: {out.get('status')}")
        if (out["states"], out["transitions"]) != (chain.n_states, chain.n_transitions):
            raise SystemExit(f"{name}: Storm built {out['states']} states / {out['transitions']} "
                             f"transitions, ctmc {chain.n_states} / {chain.n_transitions}")
        s_build, s_check = min(s_build, out["build_s"]), s_check + out["check_s"]
        d = abs(out["value"] - r.value) / abs(r.value) if r.value else abs(out["value"])
        if d >= diff:
            diff, worst = d, f"#{k} ({out['value']:.4g} vs {r.value:.4g})"
    print(f"{name:<14} {chain.n_states:>9,} {chain.n_transitions:>9,} {len(results):>5} {build:>15.3f} "
          f"{check:>10.3f} {s_build:>11.3f} {s_check:>11.3f} {(s_build + s_check) / (build + check):>10.2f} "
          f"{diff:>12.1e}  {worst}")


def gallery_table(args):
    """The gallery models: PRISM program against the hand-written model."""
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
