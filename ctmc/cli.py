"""The ``ctmc`` command line.

``ctmc report``
    Run the study of every available model family (the main job) and print
    its tables; ``--plots DIR`` also writes figures (needs matplotlib).
``ctmc demo``
    The core study: reference chains built with :class:`ctmc.Model`, solved,
    compared with closed forms, with residuals and timings.
``ctmc <family> ...``
    Study of one model family, registered in :data:`FAMILIES` (each model
    issue adds its own).
"""
from __future__ import annotations

import argparse
import importlib
import sys
import time

__all__ = ["main", "FAMILIES", "core_study"]

#: family name -> module with ``add_arguments(parser)``, ``run(args)`` and
#: ``report(plots_dir)``; modules that are not installed are skipped.
FAMILIES: dict = {
    "jsq": "models.jsq",
    "hysteresis": "models.hysteresis",
    "supermarket": "models.supermarket",
}


def _table(rows, headers):
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).ljust(w) for h, w in zip(headers, widths))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def core_study(K_mm1: int = 1000, K_jsq: int = 150) -> str:
    """Build, solve and check three reference chains; return a printable table.

    Rows compare ctmc's answers with closed forms: the M/M/1/K tail
    probability (ratio 1/2, K = 1000, about 1e-301), the mean hitting time of a
    birth-death chain (about 1e100), and the blocking probability of a
    two-queue join-the-shortest-queue chain against its closed form.
    """
    import ctmc

    rows = []
    # 1. M/M/1/K tail
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, K_mm1)
    m.event("arrival", guard=n < K_mm1, rate=0.5, update={n: n + 1})
    m.event("departure", guard=n > 0, rate=1.0, update={n: n - 1})
    chain = m.build(initial={"n": 0})
    res = chain.stationary()
    exact = 0.5 ** K_mm1 * 0.5 / (1 - 0.5 ** (K_mm1 + 1))
    rows.append(["M/M/1/K pi_K", f"{chain.n_states}", res.method, f"{res.pi[-1]:.10e}", f"{exact:.10e}",
                 f"{abs(res.pi[-1] / exact - 1):.1e}", f"{res.residual:.1e}", f"{res.wall_time:.3f}"])
    # 2. birth-death mean hitting time ~ 1e100
    Kb = 330
    m = ctmc.Model("birth-death")
    n = m.var("n", 0, Kb)
    m.event("up", guard=n < Kb, rate=1.0, update={n: n + 1})
    m.event("down", guard=n > 0, rate=2.0, update={n: n - 1})
    bd = m.build(initial={"n": 0})
    h = bd.hitting_times(n == Kb)
    # E_0[T_K] = sum_{k<K} sum_{j<=k} 2^(k-j) (rates 1 up, 2 down)
    ex = float(sum(sum(2 ** (k - j) for j in range(k + 1)) for k in range(Kb)))
    rows.append(["birth-death E_0[T_K]", f"{bd.n_states}", h.method, f"{h.mean[0]:.10e}", f"{ex:.10e}",
                 f"{abs(h.mean[0] / ex - 1):.1e}", f"{h.residual:.1e}", f"{h.wall_time:.3f}"])
    # 3. two-queue JSQ (shortest s, longest l), symmetric rates 1/2: the
    #    model family of models.jsq, against its closed form
    from models.jsq import JSQ2, blocking_probability
    K, rho = K_jsq, 0.9
    q = JSQ2(K, rho, 0.5)
    t0 = time.perf_counter()
    jsq = q.chain()
    tb = time.perf_counter() - t0
    res = q.stationary()
    pb = res.pi[jsq.index(s=K, l=K)]
    exact = blocking_probability(K, rho, 0.5)
    rows.append([f"JSQ K={K} P_block", f"{jsq.n_states}", res.method, f"{pb:.10e}", f"{exact:.10e}",
                 f"{abs(pb / exact - 1):.1e}", f"{res.residual:.1e}", f"{res.wall_time:.3f}"])
    head = (f"ctmc core study (build of the {jsq.n_states}-state JSQ chain: {tb:.3f} s, "
            f"{jsq.n_transitions / max(tb, 1e-9):.3g} transitions/s)")
    return head + "\n" + _table(rows, ["quantity", "states", "method", "ctmc", "closed form",
                                       "rel. error", "residual", "seconds"])


def _load_families():
    out = {}
    for name, modname in FAMILIES.items():
        try:
            out[name] = importlib.import_module(modname)
        except ImportError:  # pragma: no cover - family not installed
            continue
    return out


def main(argv=None) -> int:
    """Entry point of the ``ctmc`` command."""
    parser = argparse.ArgumentParser(prog="ctmc", description="Exact numerical analysis of CTMCs.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="core study: reference chains against closed forms")
    rep = sub.add_parser("report", help="studies of every model family (the main job)")
    rep.add_argument("--plots", metavar="DIR", help="also write figures to DIR (needs matplotlib)")
    fams = _load_families()
    for name, mod in fams.items():
        p = sub.add_parser(name, help=mod.__doc__.strip().splitlines()[0] if mod.__doc__ else name)
        mod.add_arguments(p)
    args = parser.parse_args(argv)
    if args.command == "demo":
        print(core_study())
    elif args.command == "report":
        print(core_study())
        for name, mod in fams.items():
            print()
            print(mod.report(args.plots))
    else:
        from .results import ModelError, ReducibleChainError
        try:
            out = fams[args.command].run(args)
        except (ModelError, ReducibleChainError):
            raise       # ValueError subclasses, but not a usage error: keep the traceback
        except ValueError as exc:   # bad parameters: one line, exit status 2
            parser.error(f"{args.command}: {exc}")
        print(out)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
