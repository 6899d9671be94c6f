"""Build and check one PRISM program with stormpy; print one JSON line (run by Storm's python).

Run with the interpreter of the stormpy venv (``scripts/storm_venv.sh``), not
ctmc's: this file imports only stormpy and the standard library.

    .venv-storm/bin/python storm_worker.py PROGRAM.sm --property 'R{"throughput"}=? [ S ]' \\
        --constants '{"t": 3}' --solver gmm

``--solver default`` checks with ``stormpy.environments.Environment()`` (the
settings of Storm's command line); ``gmm`` sets the gmm++ linear equation
solver on that environment. Output keys: ``states``, ``transitions``,
``build_s`` (parse, constants, build), ``check_s``, ``value`` (at the initial
state), ``storm`` (version), on the line that starts with ``@@``.
"""
from __future__ import annotations

import argparse
import json
import time


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program")
    ap.add_argument("--property", required=True)
    ap.add_argument("--constants", default="{}", help="JSON object of undefined constants")
    ap.add_argument("--solver", choices=("default", "gmm", "none"), default="default",
                    help="'none': build only")
    args = ap.parse_args(argv)

    import stormpy
    import stormpy.environments as envs

    t0 = time.perf_counter()
    prog = stormpy.parse_prism_program(args.program, prism_compatibility=True)
    consts = json.loads(args.constants)
    if consts:
        prog, _ = stormpy.instantiate_constants(prog, consts)
    props = stormpy.parse_properties(args.property, prog)
    options = stormpy.BuilderOptions(props, prog)  # keeps the labels and reward models the property needs
    model = stormpy.build_model(prog, options=options)
    build_s = time.perf_counter() - t0
    out = {"states": model.nr_states, "transitions": model.nr_transitions, "build_s": build_s,
           "storm": getattr(stormpy, "__version__", "?")}
    if args.solver != "none":
        env = envs.Environment()
        if args.solver == "gmm":
            env.solver().set_linear_equation_solver_type(envs.EquationSolverType.GMMXX)
        t0 = time.perf_counter()
        res = stormpy.model_checking(model, props[0], only_initial_states=True, environment=env)
        out["check_s"] = time.perf_counter() - t0
        out["value"] = float(res.get_value(model.initial_states[0]))
    print("@@" + json.dumps(out), flush=True)  # Storm writes its warnings to stdout too


if __name__ == "__main__":
    main()
