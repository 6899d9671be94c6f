"""The return times of the stationary error bound on tandem networks: BiCGStab against levels, same run.

    .venv/bin/python benchmarks/bench_tandem_bound.py --c 255 511
    .venv/bin/python benchmarks/bench_tandem_bound.py --c 1023 --routes levels

For each gallery tandem network (``models.gallery``, ``tandem:c``) the default solve gives the law
(``error_tol=1``, so its own bound stops early); then the mean times to reach the most probable state
(the pin of the bound) are bounded on the same operator by each route of
:func:`ctmc.kernels.evidence.return_time_bound`: ``bicgstab`` (``RETURN_SPEC``, refined on its
residual, the default's first route), ``gmres`` (``RETURN_GMRES``, its fallback) and ``levels``
(:func:`ctmc.kernels.levels.return_time_systems`: two-level cycles on the variable
:func:`~ctmc.kernels.levels.structured_levels` finds, set-up included). The table gives CPU seconds,
the iterations of each solve, the proven bound on ``max m`` over the estimate (1.0x: tight; ``inf``:
no bound) and whether the iterate bracketed ``m`` within ``BOUND_BRACKET``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from ctmc.backends import operator_for  # noqa: E402
from ctmc.kernels.evidence import BOUND_BRACKET, RETURN_GMRES, RETURN_SPEC, return_time_bound  # noqa: E402
from ctmc.kernels.levels import return_time_systems  # noqa: E402
from models.gallery import parse_spec  # noqa: E402

ROUTES = ("bicgstab", "gmres", "levels")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--c", type=int, nargs="+", default=[255, 511], help="capacities (default 255 511)")
    p.add_argument("--routes", default=",".join(ROUTES), help=f"comma-separated, of {ROUTES}")
    args = p.parse_args(argv)
    routes = args.routes.split(",")
    bad = [r for r in routes if r not in ROUTES]
    if bad:
        p.error(f"--routes: unknown {bad}; expected some of {ROUTES}")
    print(f"{'c':>6} {'states':>10}  {'route':9} {'cpu s':>8}  {'iterations':24} {'bound/est':>10}  bracketed  levels")
    for c in args.c:
        chain = parse_spec(f"tandem:{c}").chain()
        pi = chain.stationary(error_tol=1.0).pi
        op = operator_for(chain, "scipy")
        support = np.ones(op.n, dtype=bool)
        pin = int(np.argmax(pi))
        X = support.copy()
        X[pin] = False
        for route in routes:
            info = {}
            t = time.process_time()
            if route == "levels":
                specs = [return_time_systems(op, X, info=info)[1]]
            else:
                specs = [RETURN_SPEC if route == "bicgstab" else RETURN_GMRES]
            bound, est = return_time_bound(op, support, pin, specs=specs, info=info, bracket=BOUND_BRACKET)
            cpu = time.process_time() - t
            its = "+".join(map(str, info.get("return_time_iterations", [])))
            ratio = f"{bound / est:.3f}x" if np.isfinite(bound) and est > 0 else "inf"
            print(f"{c:>6} {op.n:>10}  {route:9} {cpu:>8.2f}  {its:24} {ratio:>10}  "
                  f"{str(bool(info.get('return_time_bracketed'))):9}  {info.get('return_time_levels', '')}",
                  flush=True)


if __name__ == "__main__":
    main()
