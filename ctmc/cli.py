"""The ``ctmc`` command line.

``ctmc report``
    Run the study of every available model family (the main job) and print
    its tables; ``--plots DIR`` also writes figures (needs matplotlib).
``ctmc solve FILE``
    Solve a model file: a Python file defining a :class:`ctmc.Model`, or a
    PRISM/Storm/NumPy export (:mod:`ctmc.solve_cli`).
``ctmc demo``
    The core study: reference chains built with :class:`ctmc.Model`, solved,
    compared with closed forms, with residuals and timings.
``ctmc <family> ...``
    Study of one model family. Families register themselves as entry points
    of the group ``ctmc.families`` (:data:`ENTRY_POINT_GROUP`; the families
    shipped with ctmc-exact are declared in its ``pyproject.toml``), each a
    module with ``add_arguments(parser)``, ``run(args) -> str`` and
    ``report(plots_dir) -> str``, whose docstring's first line is the help
    text. The core never imports a family by name.
``ctmc --version``
    The installed version (:data:`ctmc.__version__`).

Run as a command (the ``ctmc`` script, ``python -m ctmc``: :func:`main`
called without ``argv``), two signals end it quietly:

* Ctrl-C prints one line, :data:`INTERRUPTED_MESSAGE`, on standard error and
  exits with status 130 (128 + SIGINT) at once, also inside a sparse
  factorisation: the handler is C's (``exit_on_sigint`` in ``ctmc/_kernels.c``),
  because Python's own runs only when SuperLU returns. Without the compiled
  extension a Python handler does the same when the call returns.
  :func:`arm_interrupt` installs it; importing ctmc never does, nor does
  ``main(argv)`` called from Python.
* A closed pipe (``ctmc solve ... | head``) ends the command with exit
  status 141 (128 + SIGPIPE, what the shell reports for a program killed by
  it) and no traceback.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

__all__ = ["main", "run_command", "core_study", "load_families", "arm_interrupt", "ENTRY_POINT_GROUP",
           "INTERRUPTED_MESSAGE", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]

#: the one line (on standard error) of a command ended by Ctrl-C
INTERRUPTED_MESSAGE = "ctmc: interrupted"
#: exit status after Ctrl-C (128 + SIGINT) and after a closed pipe on standard output (128 + SIGPIPE)
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 128 + 2, 128 + 13

#: entry-point group of model families: name -> module with ``add_arguments``,
#: ``run`` and ``report``.
ENTRY_POINT_GROUP = "ctmc.families"


def core_study(K_mm1: int = 1000, N_cyclic: int = 150) -> str:
    """Build, solve and check three reference chains; return a printable table.

    Rows compare ctmc's answers with closed forms: the M/M/1/K tail
    probability (ratio 1/2, K = 1000, about 1e-301), the mean hitting time of a
    birth-death chain (about 1e100), and, on a two-dimensional chain, the
    probability that all ``N_cyclic`` customers of a closed cyclic network of
    three exponential queues (rates 1, 2, 4) wait at the fastest queue, against
    the product form (about 1e-91 for N = 150).
    """
    import ctmc
    from ctmc.report import format_table

    def row(quantity, n_states, res, value, exact):
        return [quantity, n_states, res.method, f"{value:.10e}", f"{exact:.10e}",
                f"{abs(value / exact - 1):.1e}", f"{res.residual:.1e}", f"{res.wall_time:.3f}"]

    rows = []
    # 1. M/M/1/K tail
    m = ctmc.Model("mm1k")
    n = m.var("n", 0, K_mm1)
    m.event("arrival", guard=n < K_mm1, rate=0.5, update={n: n + 1})
    m.event("departure", guard=n > 0, rate=1.0, update={n: n - 1})
    chain = m.build(initial={"n": 0})
    res = chain.stationary()
    exact = 0.5 ** K_mm1 * 0.5 / (1 - 0.5 ** (K_mm1 + 1))
    rows.append(row("M/M/1/K pi_K", chain.n_states, res, res.pi[-1], exact))
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
    rows.append(row("birth-death E_0[T_K]", bd.n_states, h, h.mean[0], ex))
    # 3. closed cyclic network 1 -> 2 -> 3 -> 1 of exponential queues with
    #    rates mu = (1, 2, 4) and N customers; state (n1, n2), n3 = N - n1 - n2.
    #    Product form: pi(n) = prod_i (1/mu_i)^(n_i) / G(N) on n1 + n2 + n3 = N.
    N, (mu1, mu2, mu3) = N_cyclic, (1.0, 2.0, 4.0)
    t0 = time.perf_counter()
    m = ctmc.Model("cyclic network")
    n1, n2 = m.var("n1", 0, N), m.var("n2", 0, N)
    m.event("service 1", guard=n1 > 0, rate=mu1, update={n1: n1 - 1, n2: n2 + 1})
    m.event("service 2", guard=n2 > 0, rate=mu2, update={n2: n2 - 1})
    m.event("service 3", guard=n1 + n2 < N, rate=mu3, update={n1: n1 + 1})
    cyc = m.build(initial={"n1": N, "n2": 0})
    tb = time.perf_counter() - t0
    res = cyc.stationary()
    value = res.pi[cyc.index(n1=0, n2=0)]
    # G(N) = sum over n2 + n3 <= N of (mu1/mu2)^n2 (mu1/mu3)^n3 (mu1 = 1), geometric in n2
    a, b = mu1 / mu2, mu1 / mu3
    G = sum(b ** k * (1 - a ** (N - k + 1)) / (1 - a) for k in range(N + 1))
    rows.append(row(f"cyclic N={N} P(all at 3)", cyc.n_states, res, value, b ** N / G))
    title = (f"ctmc core study (build of the {cyc.n_states}-state cyclic-network chain: {tb:.3f} s, "
             f"{cyc.n_transitions / max(tb, 1e-9):.3g} transitions/s)")
    return format_table(rows, ["quantity", "states", "method", "ctmc", "closed form",
                               "rel. error", "residual", "seconds"], title=title)


def load_families() -> dict:
    """The model families registered under :data:`ENTRY_POINT_GROUP`, by name.

    A registered family whose module cannot be imported is skipped with a
    one-line note on standard error (the other families and ``ctmc demo``
    keep working).
    """
    from importlib.metadata import entry_points

    out = {}
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        if ep.name in out:      # the same distribution seen twice on sys.path
            continue
        try:
            out[ep.name] = ep.load()
        except ImportError as exc:
            print(f"ctmc: family {ep.name!r} ({ep.value}) not loaded: {exc}", file=sys.stderr)
    return out


def _help(mod, name: str) -> str:
    doc = (mod.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else name


def run_command(parser, name: str, run, args) -> int:
    """Run one subcommand, ``run(args) -> str``, print its text; return the exit status.

    The one error policy of the command line (model families and ``ctmc
    solve``): a :class:`ValueError` (bad parameters, a bad file) is a usage
    error, one line and exit status 2 (``SystemExit(2)``, as argparse's own
    errors); a memory guard, an out-of-memory, a missing optional dependency (an
    :class:`ImportError` says how to install it) and a :class:`SolverError`
    (an answer that is not accurate) are one line on standard error and exit
    status 1. :class:`ModelError` and :class:`ReducibleChainError` are
    ValueErrors raised by a family's own code, not by its user: their
    traceback is kept.
    """
    from .results import ModelError, ReducibleChainError, SolverError, StateSpaceTooLarge
    try:
        out = run(args)
    except (ModelError, ReducibleChainError):
        raise       # ValueError subclasses, but not a usage error: keep the traceback
    except ValueError as exc:   # bad parameters: one line (no usage block), exit status 2
        msg = str(exc) if parser.prog.endswith(f" {name}") else f"{name}: {exc}"
        parser.exit(2, f"{parser.prog}: error: {msg}\n")
    except StateSpaceTooLarge as exc:   # a memory guard: one line, exit status 1
        msg = str(exc).replace("or raise max_memory", "(the command line allows the least of the free "
                               "memory, ulimit -v and the cgroup limit)")
        print(f"ctmc {name}: error: {msg}", file=sys.stderr)
        return 1
    except MemoryError as exc:
        print(f"ctmc {name}: error: out of memory ({exc or 'numpy could not allocate'}); "
              "try smaller parameters", file=sys.stderr)
        return 1
    except ImportError as exc:          # an optional backend or extra: the message says how to install it
        print(f"ctmc {name}: error: {exc}", file=sys.stderr)
        return 1
    except SolverError as exc:          # an answer that is not accurate: one line, exit status 1
        print(f"ctmc {name}: error: {exc}", file=sys.stderr)
        return 1
    print(out)
    return 0


#: subcommands of the core; a family registered under one of these names is skipped
BUILTIN_COMMANDS = ("demo", "report", "solve")


def _interrupt_line() -> bytes:
    # on a terminal, first erase the line (a progress bar, the echoed ^C)
    return ("\r\033[K" if os.isatty(2) else "").encode() + f"{INTERRUPTED_MESSAGE}\n".encode()


def _exit_on_sigint(signum, frame):   # the fallback without the compiled handler
    os.write(2, _interrupt_line())
    os._exit(EXIT_INTERRUPTED)


def arm_interrupt() -> str:
    """Make Ctrl-C (SIGINT) end the process at once: one line, exit status 130.

    Only the command line calls this (the process ends without unwinding:
    no ``finally`` block runs, buffered standard output is dropped).

    Returns
    -------
    str
        ``"c"``: the compiled handler, which acts even while a C call (a
        SuperLU factorisation) runs; ``"python"``: the fallback when the
        extension ``ctmc._kernels`` is absent or older than the handler,
        which acts when the running C call returns; ``"ignored"``: the
        process was started with SIGINT ignored and is left so.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return "ignored"        # started with Ctrl-C ignored (a background job of a script): keep it so
    try:
        import ctmc._relax  # noqa: F401  (sets OMP_WAIT_POLICY before the extension's OpenMP loads)
        import ctmc._kernels as kernels
        kernels.arm_sigint(_interrupt_line())
        return "c"
    except (ImportError, AttributeError):
        signal.signal(signal.SIGINT, _exit_on_sigint)
        return "python"


def main(argv=None) -> int:
    """Entry point of the ``ctmc`` command.

    With ``argv`` (a call from Python) the arguments are parsed and the
    command runs; without it (the ``ctmc`` script, ``python -m ctmc``) Ctrl-C
    is armed first (:func:`arm_interrupt`) and a closed standard output ends
    the command with :data:`EXIT_BROKEN_PIPE`, no traceback. Under ``mpirun``
    (``--backend petsc``) an error status of one process aborts the job
    (:func:`ctmc.backends.petsc.abort_job`): the others would wait for ever.
    """
    if argv is not None:
        return _main(argv)
    from .backends.petsc import abort_job
    arm_interrupt()
    try:
        status = _main(None)
        sys.stdout.flush()          # a closed pipe shows here at the latest, not at interpreter exit
    except BrokenPipeError:
        # Python would flush stdout again at exit and print a second error: point it at /dev/null
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        status = EXIT_BROKEN_PIPE
    except SystemExit as exc:       # a usage error (status 2) of this process alone, under mpirun
        abort_job(exc.code if isinstance(exc.code, int) else int(exc.code is not None))   # --help: 0
        raise
    abort_job(status)               # under mpirun, an error status ends every process
    return status


def _main(argv) -> int:
    from . import solve_cli
    from ._version import __version__
    from .report import add_plots_argument

    parser = argparse.ArgumentParser(prog="ctmc", description="Exact numerical analysis of CTMCs.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="core study: reference chains against closed forms")
    rep = sub.add_parser("report", help="studies of every model family (the main job)")
    add_plots_argument(rep, what="the figures of every family")
    solve = sub.add_parser("solve", help="solve a model file (.py defining a ctmc.Model, .drn, .tra, .npz)",
                           description=solve_cli.__doc__.split("\n\n")[0].replace("``", ""))
    solve_cli.add_arguments(solve)
    fams = load_families()
    for name in BUILTIN_COMMANDS:
        if fams.pop(name, None) is not None:
            print(f"ctmc: family {name!r} not loaded: the name is a core command", file=sys.stderr)
    subparsers = {"solve": solve}
    for name, mod in fams.items():
        subparsers[name] = p = sub.add_parser(name, help=_help(mod, name))
        mod.add_arguments(p)
    args = parser.parse_args(argv)
    if args.command == "demo":
        print(core_study())
    elif args.command == "report":
        print(core_study())
        for name, mod in fams.items():
            print()
            print(mod.report(args.plots))
    elif args.command == "solve":
        return run_command(solve, "solve", solve_cli.run, args)
    else:
        return run_command(subparsers[args.command], args.command, fams[args.command].run, args)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
