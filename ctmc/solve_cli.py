r"""``ctmc solve FILE``: solve a model file from the command line.

``FILE`` is one of

- a Python file defining a :class:`ctmc.Model`: a module-level ``Model``
  instance, a variable named ``model``, or a function ``model()`` or
  ``build()`` returning a ``Model`` (or a built :class:`ctmc.CTMC`);
  ``--model NAME`` picks one when the file defines several. The file is run
  as a module (its ``if __name__ == "__main__":`` block is not). The chain is
  built from ``--initial "n1=0,n2=0"`` if given, else from the file's
  module-level ``initial`` dict, else from a chain the file built from the
  model;
- a PRISM program (``.sm``, ``.prism``, ``.pm``: :func:`ctmc.prism.load`),
  its undefined constants from ``--const N=3``;
- an interchange file: Storm's ``.drn`` (:func:`ctmc.io.read_drn`), PRISM's
  ``.tra`` with the ``.sta``, ``.lab`` and ``.srew``/``.trew`` files of the
  same base name beside it (:func:`ctmc.io.read_prism`), or a ``.npz``
  archive (:func:`ctmc.io.load_npz`).

One analysis per run (the stationary law by default):

``--stationary``
    The stationary law :math:`\pi Q = 0` (for a chain with several closed
    classes, the long-run law from the initial state, :meth:`ctmc.CTMC.long_run`),
    with ``--expect EXPR`` (:math:`\sum_i \pi_i\, \mathrm{EXPR}(i)`) and
    ``--marginal VAR`` (the law of one variable or integer expression).
``--hitting EXPR``
    Moments :math:`E_i[T_A^m]`, :math:`m \le` ``--moments``, of the hitting
    time of :math:`A = \{i : \mathrm{EXPR}(i)\}` from every state, and their
    value from the initial state.
``--transient T [T ...]``
    The law :math:`p_0 e^{Qt}` from the initial state at each time, with
    ``--expect``/``--marginal`` at each time.
``--prob-within EXPR T``
    :math:`P(T_A \le t)` from the initial state and from every state (``T``
    may be a comma-separated list of times).
``--throughput EVENT``
    The long-run rate of a model event (repeatable).
``--prop PROPERTY``, ``--props FILE``
    Properties in PRISM's syntax, one row each with value, error bound,
    status and method (:mod:`ctmc.prism.properties`, :mod:`ctmc.prism.cli`);
    ``--const`` also gives the constants of the properties file.

``EXPR`` is an expression of the model's variables, labels (sets of states)
and rewards, parsed safely by :mod:`ctmc.exprparse`. Output formats: ``table``
(the state variables as columns and the values beside them, at most
``--rows`` rows, then a one-line evidence summary), ``csv`` (the per-state
table, every row) and ``json`` (everything, with the evidence: method,
status, residual, error bound, wall time). Usage errors exit with status 2
and solver failures with status 1, each as one line (:func:`ctmc.cli.run_command`).

Examples
--------
>>> import ctmc.cli, os, tempfile, textwrap
>>> src = textwrap.dedent('''
...     import ctmc
...     model = ctmc.Model("mm1k")
...     n = model.var("n", 0, 3)
...     model.event("arrive", guard=n < 3, rate=1.0, update={n: n + 1})
...     model.event("depart", guard=n > 0, rate=2.0, update={n: n - 1})
...     initial = {"n": 0}
... ''')
>>> with tempfile.TemporaryDirectory() as d:
...     path = os.path.join(d, "mm1k.py")
...     with open(path, "w") as fh:
...         _ = fh.write(src)
...     status = ctmc.cli.main(["solve", path, "--stationary", "--format", "csv"])
n,probability
0,0.5333333333333333
1,0.26666666666666666
2,0.13333333333333333
3,0.06666666666666667
>>> status
0
"""
from __future__ import annotations

import csv
import io
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from .exprparse import eval_on_chain

__all__ = ["add_arguments", "run", "load_chain", "parse_initial", "ANALYSES", "LOADERS", "FORMATS"]

#: number formats of the table output (csv and json keep every digit)
_FMT = ".6g"


# ---------------------------------------------------------------------------
# arguments

def add_arguments(parser) -> None:
    """Arguments of ``ctmc solve``."""
    parser.add_argument("file", metavar="FILE",
                        help="a Python file defining a ctmc.Model, a PRISM program (.sm, .prism, .pm), "
                             "or a .drn, .tra (PRISM) or .npz file")
    parser.add_argument("--model", metavar="NAME", help="which model of the file (when it defines several)")
    parser.add_argument("--initial", metavar="STATE",
                        help='initial state, e.g. "n1=0,n2=0" (default: the file\'s)')
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--stationary", action="store_true",
                      help="the stationary (long-run) law (the default analysis)")
    what.add_argument("--hitting", metavar="EXPR", help="mean hitting times of the set where EXPR holds")
    what.add_argument("--transient", metavar="T", nargs="+", type=_time,
                      help="the law at time(s) T from the initial state")
    what.add_argument("--prob-within", metavar=("EXPR", "T"), nargs=2,
                      help="probability of reaching the set EXPR within time T (T may be t1,t2,...)")
    what.add_argument("--throughput", metavar="EVENT", action="append",
                      help="long-run rate of a model event (repeatable)")
    parser.add_argument("--const", metavar="NAME=VALUE", action="append", default=[],
                        help="a constant of the PRISM program or properties file (repeatable, or N=3,T=1.5)")
    parser.add_argument("--prop", metavar="PROPERTY", action="append", default=[],
                        help="a property in PRISM's syntax, e.g. 'P=? [ F<=10 \"full\" ]' (repeatable)")
    parser.add_argument("--props", metavar="FILE", help="a PRISM properties file (.csl, .props)")
    parser.add_argument("--expect", metavar="EXPR", action="append", default=[],
                        help="also the expectation of EXPR (--stationary, --transient; repeatable)")
    parser.add_argument("--marginal", metavar="VAR", action="append", default=[],
                        help="also the law of a variable or integer expression (--stationary, --transient)")
    parser.add_argument("--moments", metavar="K", type=int, default=1,
                        help="moments of the hitting time (--hitting; default 1)")
    parser.add_argument("--method", metavar="NAME", default="auto",
                        help="the analysis's method (default auto; an unknown name lists the valid ones)")
    parser.add_argument("--backend", choices=["scipy", "petsc"], default="scipy",
                        help="linear-algebra backend (default scipy)")
    parser.add_argument("--format", choices=list(FORMATS), default="table",
                        help="output format (default table)")
    parser.add_argument("--rows", metavar="N", type=int, default=20,
                        help="rows of the table format (default 20; 0 for all)")


def _time(text: str) -> float:
    import argparse
    try:
        t = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r}") from None
    if not (t >= 0 and math.isfinite(t)):
        raise argparse.ArgumentTypeError(f"a time must be finite and >= 0, got {text!r}")
    return t


def _times(text: str, what: str) -> list:
    out = []
    for part in text.split(","):
        try:
            t = float(part)
        except ValueError:
            raise ValueError(f"{what}: not a time: {part!r}") from None
        if not (t >= 0 and math.isfinite(t)):
            raise ValueError(f"{what}: a time must be finite and >= 0, got {part!r}")
        out.append(t)
    return out


def parse_initial(text: str) -> dict:
    """``"n1=0,n2=3"`` as ``{"n1": 0, "n2": 3}``.

    >>> parse_initial("n1=0, n2=3")
    {'n1': 0, 'n2': 3}
    """
    out = {}
    for part in text.split(","):
        name, eq, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not eq or not name.isidentifier():
            raise ValueError("--initial: expected NAME=VALUE pairs separated by commas, "
                             f"got {part.strip()!r}")
        try:
            out[name] = int(value)
        except ValueError:
            raise ValueError(f"--initial: {name} must be an integer, got {value!r}") from None
    return out


# ---------------------------------------------------------------------------
# loading a file

@dataclass
class Loaded:
    """A chain read or built from ``FILE``, with what the command says about it."""

    chain: object
    name: str
    build_seconds: float = 0.0
    p0: Optional[dict] = None       # --initial for a chain the command did not build


def _file_line(exc, path: Path) -> str:
    """``path:line`` of the deepest frame of the traceback inside ``path`` (else ``path``)."""
    import traceback
    line = None
    for fr in traceback.extract_tb(exc.__traceback__):
        if Path(fr.filename).resolve() == path.resolve():
            line = fr.lineno
    if isinstance(exc, SyntaxError) and exc.lineno:
        line = exc.lineno
    return f"{path}:{line}" if line else str(path)


def _run_python(path: Path) -> dict:
    import runpy
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)              # the file's own imports of its neighbours work
    try:
        return runpy.run_path(str(path), run_name="__ctmc_model__")
    except Exception as exc:                # the user's file failed: where, and why, in one line
        msg = exc.msg if isinstance(exc, SyntaxError) else exc
        raise ValueError(f"{_file_line(exc, path)}: {type(exc).__name__}: {msg}") from None
    finally:
        try:
            sys.path.remove(folder)
        except ValueError:                  # pragma: no cover - the file removed it itself
            pass


def _candidates(ns: dict) -> dict:
    """Module-level Models and chains, and functions ``model``/``build``, by name."""
    import ctmc
    found = {k: v for k, v in ns.items()
             if not k.startswith("_") and isinstance(v, (ctmc.Model, ctmc.CTMC))}
    models = [v for v in found.values() if isinstance(v, ctmc.Model)]
    # a chain the file built from one of its models is that model (its initial state is remembered)
    found = {k: v for k, v in found.items()
             if not (isinstance(v, ctmc.CTMC) and any(v.model is m for m in models))}
    for k in ("model", "build"):
        f = ns.get(k)
        if k not in found and callable(f) and not isinstance(f, type):
            found[k] = f
    return found


def _describe(found: dict) -> str:
    import ctmc
    parts = []
    for k, v in found.items():
        kind = ("Model" if isinstance(v, ctmc.Model) else "CTMC" if isinstance(v, ctmc.CTMC) else "function")
        parts.append(f"{k}() (function)" if kind == "function" else f"{k} ({kind})")
    return ", ".join(parts)


def _call(f, name: str, path: Path):
    import inspect
    try:
        sig = inspect.signature(f)
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                 inspect.Parameter.KEYWORD_ONLY)
        need = [p.name for p in sig.parameters.values() if p.default is p.empty and p.kind in kinds]
    except (TypeError, ValueError):         # pragma: no cover - builtins without a signature
        need = []
    if need:
        raise ValueError(f"{path}: {name}() needs the arguments {need}; give them default values")
    try:
        return f()
    except Exception as exc:
        raise ValueError(f"{_file_line(exc, path)}: {name}(): {type(exc).__name__}: {exc}") from None


def _load_python(path: Path, args) -> Loaded:
    import ctmc
    ns = _run_python(path)
    found = _candidates(ns)
    if args.model is not None:
        if args.model not in ns:
            raise ValueError(f"--model: {path} defines no {args.model!r}"
                             + (f"; it defines {_describe(found)}" if found else ""))
        name, obj = args.model, ns[args.model]
    elif len(found) == 1:
        name, obj = next(iter(found.items()))
    elif "model" in found:
        name, obj = "model", found["model"]
    elif not found:
        raise ValueError(f"{path} defines no ctmc.Model: expected a module-level Model, a variable named "
                         "model, or a function model() or build() returning a Model or a CTMC")
    else:
        raise ValueError(f"{path} defines several models: {_describe(found)}; choose one with --model NAME")
    if callable(obj) and not isinstance(obj, (ctmc.Model, ctmc.CTMC)):
        obj = _call(obj, name, path)
    if not isinstance(obj, (ctmc.Model, ctmc.CTMC)):
        raise ValueError(f"{path}: {name} is a {type(obj).__name__}, not a ctmc.Model or ctmc.CTMC")
    initial = parse_initial(args.initial) if args.initial else None
    if isinstance(obj, ctmc.CTMC):
        if initial is not None and obj.model is not None:
            obj = obj.model                # rebuild from the model at the state asked for
        else:
            return Loaded(obj, name, 0.0, p0=initial)
    model = obj
    if initial is None:
        initial = ns.get("initial")
        if initial is not None and not isinstance(initial, (dict, list, tuple)):
            raise ValueError(f"{path}: initial must be a dict such as {{'n1': 0}}, "
                             f"got {type(initial).__name__}")
    if initial is None:
        initial = getattr(model, "initial", None)
    if initial is None:
        built = [v for v in ns.values() if isinstance(v, ctmc.CTMC) and v.model is model]
        if built:
            return Loaded(built[0], model.name, built[0].build_info.get("seconds", 0.0))
        names = ",".join(f"{v.name}={v.lo}" for v in model.variables)
        raise ValueError(f"{path}: no initial state: define initial = {{...}} in the file or give "
                         f"--initial \"{names}\"")
    t0 = time.perf_counter()
    try:
        chain = model.build(initial=initial)
    except ctmc.ModelError as exc:          # the user's model is the input here: one line
        raise ValueError(f"{path}: model {model.name!r}: {exc}") from None
    except ValueError as exc:
        where = "--initial" if args.initial else f"{path}: initial"
        raise ValueError(f"{where}: {str(exc).removeprefix('initial: ')}") from None
    return Loaded(chain, model.name, time.perf_counter() - t0)


def _interchange(reader: Callable) -> Callable:
    def load(path: Path, args) -> Loaded:
        if args.model is not None:
            raise ValueError(f"--model: {path.suffix} files hold one chain; --model is for Python files")
        t0 = time.perf_counter()
        chain = reader(path)
        return Loaded(chain, path.stem, time.perf_counter() - t0,
                      p0=parse_initial(args.initial) if args.initial else None)
    return load


def _read_prism_beside(tra: Path):
    """read_prism with the .sta, .lab, .srew and .trew files of the same base name."""
    from .io import read_prism
    base = tra.with_suffix("")

    def beside(ext):
        p = base.with_suffix(ext)
        return p if p.exists() else None

    def rewards(ext):       # base.srew and base.<name>.srew (ctmc.io.write_prism's naming)
        files = sorted(tra.parent.glob(f"{base.name}*{ext}"))
        return [p for p in files if p.name == base.name + ext or p.name.startswith(base.name + ".")] or None

    return read_prism(tra, sta=beside(".sta"), lab=beside(".lab"), srew=rewards(".srew"),
                      trew=rewards(".trew"))


def _load_program(path: Path, args) -> Loaded:
    from .prism.cli import load_program, split_constants
    if args.model is not None:
        raise ValueError(f"--model: {path.suffix} files hold one model; --model is for Python files")
    chain, name, seconds, rest = load_program(path, split_constants(args.const),
                                              parse_initial(args.initial) if args.initial else None)
    if rest and not args.props:
        raise ValueError(f"--const: {sorted(rest)} are not constants of {path.name}"
                         + ("" if args.prop else " (a --props file may declare them)"))
    args.props_constants = rest
    return Loaded(chain, name, seconds)


def _read_drn(path):
    from .io import read_drn
    return read_drn(path)


def _load_npz(path):
    from .io import load_npz
    return load_npz(path)


#: file suffix -> loader(path, args) -> Loaded
LOADERS = {
    ".py": _load_python,
    ".drn": _interchange(_read_drn),
    ".tra": _interchange(_read_prism_beside),
    ".npz": _interchange(_load_npz),
    ".sm": _load_program, ".prism": _load_program, ".pm": _load_program,
}


def load_chain(path, args) -> Loaded:
    """Read or build the chain of ``path`` (a Python model file or an interchange file)."""
    path = Path(path)
    loader = LOADERS.get(path.suffix.lower())
    if loader is None:
        raise ValueError(f"{path}: unknown kind of file {path.suffix or '(no suffix)'!r}; "
                         f"expected one of {', '.join(LOADERS)}")
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    return loader(path, args)


# ---------------------------------------------------------------------------
# analyses: each returns a Report

@dataclass
class Report:
    """What an analysis gives, before formatting.

    ``headers``/``rows``: the main table, every row in its natural order
    (one per state, the state variables first, for per-state answers);
    ``order``: the order of rows in the truncated table format and
    ``order_note`` what it is; ``values``: single numbers (name -> number or
    list); ``marginals``: name -> {label: {value: probability}}.
    """

    analysis: str
    title: str
    headers: list
    rows: list
    evidence: dict
    order: Optional[np.ndarray] = None
    order_note: str = ""
    values: dict = field(default_factory=dict)
    marginals: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)


def _evidence(res) -> dict:
    return {"method": res.method, "backend": res.backend, "status": res.status.value, "message": res.message,
            "iterations": int(res.iterations), "residual": float(res.residual),
            "error_bound": float(getattr(res, "error_bound", float("nan"))),
            "wall_time": float(res.wall_time)}


def _state_rows(chain, columns: list) -> list:
    names = chain.states.names
    st = [np.asarray(chain.states[k]).tolist() for k in names]
    vals = [np.asarray(c, dtype=float).tolist() for c in columns]
    return [list(r) for r in zip(*st, *vals)]


def _initial_law(chain, p0: Optional[dict]) -> Optional[np.ndarray]:
    """The initial law as a vector: --initial, else the chain's initial state(s), else None."""
    n = chain.n_states
    if p0 is not None:
        try:
            i = chain.index(**p0)
        except ValueError as exc:
            raise ValueError(f"--initial: {str(exc).removeprefix('index: ')}") from None
        e = np.zeros(n)
        e[i] = 1.0
        return e
    law = chain.initial_law
    return None if law is None else np.asarray(law, dtype=float)


def _start_text(chain, p0vec) -> str:
    k = np.flatnonzero(p0vec)
    if k.size == 1:
        return "(" + ", ".join(f"{nm}={int(chain.states[nm][k[0]])}" for nm in chain.states.names) + ")"
    return f"the initial law ({k.size} states)"


def _need_start(p0vec, what):
    if p0vec is None:
        raise ValueError(f"{what}: the chain has no initial state; give --initial NAME=VALUE,...")


def _weighted(p0vec, col) -> float:
    """``p0 @ col``, with ``inf`` (not ``nan``) when an infinite value has positive weight."""
    sel = p0vec > 0
    return float(p0vec[sel] @ np.asarray(col)[sel])


def _finite(value: float, expr: str) -> float:
    """``value``, an expectation of ``--expect expr``, refused when it is no finite number: never a
    ``nan`` or ``inf`` beside a status of success (its values are finite: the sum overflowed)."""
    if not np.isfinite(value):
        raise ValueError(f"--expect {expr!r}: the expectation is {value} (beyond the float range)")
    return value


def _marginals(res, chain, specs, key):
    out = {}
    for spec in specs:
        by = spec if spec in chain.states.names else eval_on_chain(spec, chain)
        try:
            out[spec] = key(res.marginal(by))
        except ValueError as exc:
            raise ValueError(f"--marginal {spec!r}: {str(exc).removeprefix('by: ')}") from None
    return out


def _stationary(chain, args, p0vec) -> Report:
    res = chain.long_run(p0vec, args.method, backend=args.backend)
    classes = res.info.get("class_sizes")
    title = ("stationary law" if classes is None else
             f"long-run law from {_start_text(chain, p0vec)} over {len(classes)} closed classes")
    rep = Report("stationary", title, list(chain.states.names) + ["probability"],
                 _state_rows(chain, [res.pi]), _evidence(res), order=np.argsort(-res.pi, kind="stable"),
                 order_note="most probable")
    for e in args.expect:
        rep.values[f"E[{e}]"] = _finite(float(res.pi @ eval_on_chain(e, chain)), e)
    rep.marginals = _marginals(res, chain, args.marginal, lambda m: {"": m})
    return rep


def _hitting(chain, args, p0vec) -> Report:
    expr = args.hitting
    A = eval_on_chain(expr, chain, boolean=True)
    if not A.any():
        raise ValueError(f"--hitting {expr!r}: holds in no state")
    if args.moments < 1:
        raise ValueError(f"--moments: expected a positive integer, got {args.moments}")
    from .results import SolverError
    try:
        res = chain.hitting_times(A, moments=args.moments, method=args.method, backend=args.backend)
    except SolverError as exc:
        lg = exc.result.info.get("log10_mean") if exc.result is not None else None
        if lg is None or p0vec is None:
            raise
        # means beyond the double range: their log10 from the start, sum_i p_i 10^lg_i in log scale
        sel = p0vec > 0
        top = float(np.max(lg[sel]))
        start = top + math.log10(float(p0vec[sel] @ 10.0 ** (lg[sel] - top))) if np.isfinite(top) else top
        msg = f"{exc}; from {_start_text(chain, p0vec)}: log10 E[T] = {start:.6g}"
        raise SolverError(msg, exc.result) from None
    heads = ["E[T]"] + [f"E[T^{m}]" for m in range(2, args.moments + 1)]
    cols = [res.moments[m] for m in range(args.moments)]
    rep = Report("hitting", f"hitting time T of {{{expr}}} ({int(A.sum())} of {chain.n_states} states)",
                 list(chain.states.names) + heads, _state_rows(chain, cols), _evidence(res))
    if p0vec is not None:
        for h, c in zip(heads, cols):
            rep.values[f"{h} from {_start_text(chain, p0vec)}"] = _weighted(p0vec, c)
    return rep


def _transient(chain, args, p0vec) -> Report:
    _need_start(p0vec, "--transient")
    ts = list(args.transient)
    res = chain.transient(p0vec, ts, args.method, backend=args.backend)
    P = np.asarray(res.p).reshape(len(ts), chain.n_states)
    heads = [f"P(t={t:g})" for t in ts]
    rep = Report("transient", f"law at time t from {_start_text(chain, p0vec)}",
                 list(chain.states.names) + heads, _state_rows(chain, list(P)), _evidence(res),
                 order=np.argsort(-P[-1], kind="stable"), order_note=f"most probable at t={ts[-1]:g}")
    for e in args.expect:
        v = P @ eval_on_chain(e, chain)
        for t, x in zip(ts, v):
            rep.values[f"E[{e}] at t={t:g}"] = _finite(float(x), e)
    rep.marginals = _marginals(res, chain, args.marginal, lambda ms: {
        f"t={t:g}": m for t, m in zip(ts, ms if isinstance(ms, list) else [ms])})
    return rep


def _prob_within(chain, args, p0vec) -> Report:
    expr, ttext = args.prob_within
    ts = _times(ttext, "--prob-within")
    A = eval_on_chain(expr, chain, boolean=True)
    if not A.any():
        raise ValueError(f"--prob-within {expr!r}: holds in no state")
    res = chain.prob_within(A, ts, p0vec, backend=args.backend)
    U = np.asarray(res.values).reshape(len(ts), chain.n_states)
    heads = [f"P(T<={t:g})" for t in ts]
    rep = Report("prob_within", f"probability that T, the hitting time of {{{expr}}}, is at most t",
                 list(chain.states.names) + heads, _state_rows(chain, list(U)), _evidence(res))
    if p0vec is not None:
        for t, v in zip(ts, np.atleast_1d(res.value)):
            rep.values[f"P(T<={t:g}) from {_start_text(chain, p0vec)}"] = float(v)
    else:
        rep.notes.append("the chain has no initial state: give --initial for the value from it")
    return rep


def _throughput(chain, args, p0vec) -> Report:
    rows, evid = [], None
    for ev in args.throughput:
        try:
            chain.event_rate(ev)            # an unknown event: a usage error naming the events
        except ValueError as exc:
            raise ValueError(f"--throughput: {str(exc).removeprefix('name: ')}") from None
        res = chain.throughput(ev, p0vec, args.method, backend=args.backend)
        rows.append([ev, float(res.value), float(res.error_bound)])
        evid = evid or _evidence(res)
    return Report("throughput", "long-run throughput of events", ["event", "throughput", "error bound"],
                  rows, evid)


@dataclass(frozen=True)
class Analysis:
    """One analysis of ``ctmc solve``: its function, its method registry, what extra options it takes."""

    run: Callable
    methods: Callable          # () -> dict of method names, or None for a single method
    takes: frozenset = frozenset()


def _props(chain, args, p0vec) -> Report:
    from .prism.cli import answer, evidence, split_constants
    t0 = time.perf_counter()
    if p0vec is not None and (chain.initial_law is None or not np.array_equal(p0vec, chain.initial_law)):
        chain.set_initial_law(p0vec)
    rest = args.props_constants if hasattr(args, "props_constants") else split_constants(args.const)
    found = answer(chain, args.prop, args.props, rest)
    rows = [[r.name or "", r.property, r.value, r.error_bound, r.status.value, r.method] for r in found]
    return Report("properties", "properties (value from the initial state, or the filter's)",
                  ["name", "property", "value", "error_bound", "status", "method"], rows,
                  evidence(found, time.perf_counter() - t0))


def _stationary_methods():
    from .stationary import METHODS
    return METHODS


def _passage_methods():
    from .passage import METHODS
    return METHODS


def _transient_methods():
    from .transient import METHODS
    return METHODS


#: analysis name -> Analysis (chosen by the options --stationary, --hitting, ...)
ANALYSES = {
    "stationary": Analysis(_stationary, _stationary_methods, frozenset({"expect", "marginal"})),
    "hitting": Analysis(_hitting, _passage_methods, frozenset({"moments"})),
    "transient": Analysis(_transient, _transient_methods, frozenset({"expect", "marginal"})),
    "prob_within": Analysis(_prob_within, None),
    "throughput": Analysis(_throughput, _stationary_methods),
    "props": Analysis(_props, None),
}


def _which(args) -> str:
    asked = [name for name in ("hitting", "transient", "prob_within", "throughput")
             if getattr(args, name) is not None]
    if args.prop or args.props:
        if asked or args.stationary:
            raise ValueError(f"--prop/--props answer properties; they do not combine with "
                             f"{_option(asked[0] if asked else 'stationary')}")
        return "props"
    return asked[0] if asked else "stationary"


def _option(name):
    return "--" + name.replace("_", "-")


def _validate(args, name: str) -> None:
    """Check the options against the analysis before any work (style: validate, then solve)."""
    an = ANALYSES[name]
    given = {"expect": bool(args.expect), "marginal": bool(args.marginal), "moments": args.moments != 1}
    for opt, on in given.items():
        if on and opt not in an.takes:
            raise ValueError(f"--{opt} does not apply to {_option(name)}")
    if an.methods is None:
        if args.method != "auto":
            raise ValueError(f"--method: {_option(name)} has one method (uniformisation); "
                             f"got {args.method!r}")
    elif args.method not in an.methods():
        raise ValueError(f"--method: unknown method {args.method!r} for {_option(name)}; "
                         f"valid methods are {sorted(an.methods())}")
    if args.rows < 0:
        raise ValueError(f"--rows: expected N >= 0, got {args.rows}")
    if args.const and name != "props" and Path(args.file).suffix.lower() not in (".sm", ".prism", ".pm"):
        raise ValueError("--const: gives the constants of a PRISM program (.sm, .prism, .pm) or of a "
                         "--props file")
    if args.format == "csv" and (args.expect or args.marginal):
        raise ValueError("--format csv writes the per-state table only; use --format json or table "
                         "for --expect and --marginal")


# ---------------------------------------------------------------------------
# formats

def _cell(x):
    return x if not isinstance(x, float) else format(x, _FMT)


def _evidence_line(ev: dict) -> str:
    return (f"evidence: method {ev['method']}, backend {ev['backend']}, status {ev['status']}, "
            f"residual {ev['residual']:.1e}, error bound {ev['error_bound']:.1e}, {ev['wall_time']:.3f} s")


def _format_table(rep: Report, loaded: Loaded, args) -> str:
    from .report import format_table
    chain = loaded.chain
    head = (f"{loaded.name}: {chain.n_states} states, {chain.n_transitions} transitions"
            + (f" (built in {loaded.build_seconds:.3f} s)" if loaded.build_seconds else ""))
    out = [head, rep.title]
    rows = rep.rows
    n = len(rows)
    order = rep.order if rep.order is not None else np.arange(n)
    shown = order if args.rows == 0 else order[:args.rows]
    out.append(format_table([[_cell(c) for c in rows[i]] for i in shown], rep.headers))
    if len(shown) < n:
        which = f"the {len(shown)} {rep.order_note} " if rep.order_note else f"the first {len(shown)} "
        out.append(f"(showing {which}of {n} rows; --rows N for more, --format csv or json for all)")
    for k, v in rep.values.items():
        out.append(f"{k} = {v:.10g}")
    for spec, laws in rep.marginals.items():
        keys = sorted({v for law in laws.values() for v in law})
        heads = [spec] + [f"P{'' if not lab else f'({lab})'}" for lab in laws]
        rows = [[k] + [_cell(law.get(k, 0.0)) for law in laws.values()] for k in keys]
        out.append(format_table(rows, heads, title=f"law of {spec}"))
    out.extend(rep.notes)
    out.append(_evidence_line(rep.evidence))
    return "\n".join(out)


def _format_csv(rep: Report, loaded: Loaded, args) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(rep.headers)
    for r in rep.rows:
        w.writerow([repr(c) if isinstance(c, float) else c for c in r])
    return buf.getvalue().rstrip("\n")


def _json_num(x):
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None     # JSON has no inf/nan: null
    return x


def _format_json(rep: Report, loaded: Loaded, args) -> str:
    doc = {
        "file": str(args.file), "model": loaded.name, "n_states": int(loaded.chain.n_states),
        "n_transitions": int(loaded.chain.n_transitions), "build_seconds": loaded.build_seconds,
        "analysis": rep.analysis, "title": rep.title,
        "columns": rep.headers,
        "rows": [{h: _json_num(c) for h, c in zip(rep.headers, r)} for r in rep.rows],
        "values": {k: _json_num(v) for k, v in rep.values.items()},
        "marginals": {spec: {lab: {str(k): _json_num(p) for k, p in law.items()} for lab, law in laws.items()}
                      for spec, laws in rep.marginals.items()},
        "notes": rep.notes,
        "evidence": {k: _json_num(v) for k, v in rep.evidence.items()},
    }
    return json.dumps(doc, indent=1, allow_nan=False)


#: --format name -> formatter(report, loaded chain, args) -> str
FORMATS = {"table": _format_table, "csv": _format_csv, "json": _format_json}


# ---------------------------------------------------------------------------

def run(args) -> str:
    """Load ``args.file``, run the analysis asked for, return the formatted answer."""
    name = _which(args)
    _validate(args, name)
    loaded = load_chain(args.file, args)
    chain = loaded.chain
    p0vec = _initial_law(chain, loaded.p0)
    rep = ANALYSES[name].run(chain, args, p0vec)
    return FORMATS[args.format](rep, loaded, args)
