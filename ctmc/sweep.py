r"""Parameter sweeps: a model factory over a grid, measures at every point, tidy records with their evidence.

A study is a family of chains :math:`X^{(\theta)}`, :math:`\theta` running
over a grid :math:`\Theta`, and measures :math:`m_k(\theta)` of each:
:func:`sweep` evaluates ``build(**theta)`` at every point of :math:`\Theta`
and each measure on its chain, and returns one record per pair
:math:`(\theta, k)`: the parameters, ``measure``, ``value`` and the evidence
``error_bound`` (a bound on :math:`|value - m_k(\theta)|`), ``status``,
``method`` and ``seconds`` (plus ``states``, ``build_seconds``, ``reused`` and
``message``).

The grid
    ``mode="product"``: the Cartesian product
    :math:`\Theta = A_1 \times \dots \times A_d` of the given sequences, the
    first parameter varying slowest (:func:`itertools.product`);
    ``mode="zip"``: the points :math:`(a_{1,i}, \dots, a_{d,i})`, the
    sequences of equal length.

The measures (a dict name -> measure, or a list of strings named by themselves)
    * a callable ``f(chain)`` returning a number (``error_bound`` NaN: none
      stated, and status :data:`UNCHECKED`, never ``"success"``) or a result
      with a ``value`` (:class:`ctmc.MeasureResult`,
      :class:`ctmc.prism.PropertyResult`), whose ``error_bound``, ``status``
      and ``method`` fill the record (a success without a finite bound is
      :data:`UNCHECKED` too);
    * a PRISM property, a string with brackets (``'S=? [ n = 10 ]'``,
      ``'R{"r"}=? [ S ]'``), answered with the point's other properties as
      one properties file (:func:`ctmc.prism.check_file`: they share their
      long-run law), one by one (:func:`ctmc.prism.check`) where that fails;
    * any other string, an expression of the chain's variables, labels and
      rewards (:mod:`ctmc.exprparse`): its expectation :math:`\sum_i \pi_i
      f(i)` under the long-run law :math:`\pi` (:meth:`ctmc.CTMC.long_run`,
      as ``ctmc solve --expect`` computes it), bounded by
      :math:`\|\pi - \pi^*\|_1 \max_i |f(i)|` (the rule of
      :meth:`ctmc.CTMC.throughput` and of :mod:`ctmc.prism.csl`). The law is
      solved once per point for all such measures, or taken from the
      properties' where they solved it (the same call).

``method``, ``backend`` and the solver options go to those solves, with
``check=False``: a result short of its tolerance is recorded with its status
(``inaccurate``, ``max_iterations``...) rather than raised.

Chains rebuilt only when the state space changes
    Where ``build`` returns a :class:`ctmc.Model`, each point's chain is built
    with ``reuse=`` the previous point's chain (:meth:`ctmc.Model.build`):
    when only rates changed, the states and their numbering are kept and
    only the rates evaluated anew (:func:`ctmc.exploration.rebuild`, checked:
    the chain is the one a fresh build gives). In product mode, list the
    parameters that change the state space (a capacity) first, so that
    consecutive points share it.

Failures
    A point whose build or measure raises becomes a record of status
    ``"error"`` with the message (``errors="raise"`` raises instead, the
    point named in a note).

Parallel runs
    ``jobs`` processes (started by ``spawn``) evaluate contiguous runs of the
    grid; the records come back in grid order and, the reused chains being
    the fresh ones, do not depend on ``jobs`` (only the timings do). The
    build function and the callable measures then travel by :mod:`pickle`:
    functions defined at module level (in a script, under
    ``if __name__ == "__main__":``) do, lambdas and local functions do not;
    then the sweep runs serially (with a warning when ``jobs`` was asked for).
    ``jobs=None`` uses the cores available (:func:`os.sched_getaffinity`)
    once the points run so far show that the rest of the grid takes longer
    than starting them (a few seconds).

Examples
--------
An M/M/1/K queue; the probability that it is full against the load, from a
property, an expression and a callable:

>>> import ctmc
>>> def mm1k(rho, K):
...     m = ctmc.Model("mm1k")
...     n = m.var("n", 0, K)
...     m.event("arrival", guard=n < K, rate=rho, update={n: n + 1})
...     m.event("departure", guard=n > 0, rate=1.0, update={n: n - 1})
...     m.label("full", n == K)
...     return m
>>> res = ctmc.sweep(mm1k, {"K": [5], "rho": [0.5, 1.5]},
...                  {"block": 'S=? [ "full" ]', "mean": "n"}, initial={"n": 0}, jobs=1)
>>> len(res)
4
>>> r = res.records[0]
>>> r["K"], r["rho"], r["measure"], round(r["value"], 12), r["status"]
(5, 0.5, 'block', 0.015873015873, 'success')
>>> round(0.5 ** 5 * 0.5 / (1 - 0.5 ** 6), 12)          # (1 - rho) rho^K / (1 - rho^(K+1))
0.015873015873
>>> [rec["reused"] for rec in res]                       # the second load kept the states of the first
[False, False, True, True]
"""
from __future__ import annotations

import ast
import inspect
import itertools
import math
import pickle
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ._util import cores
from .exprparse import FUNCTIONS, eval_on_chain, parse_expr
from .progress import CtmcWarning, Progress, progress_scope
from .results import Status

__all__ = ["sweep", "SweepResult", "COLUMNS", "UNCHECKED"]

#: The status of a value that states no error bound (a callable returning a plain number): not graded,
#: so never ``"success"``, whose records carry a bound a plot or a check may rely on.
UNCHECKED = "unchecked"

#: the columns of every record after the parameters, in order (plots read them by name)
COLUMNS = ("measure", "value", "error_bound", "status", "method", "seconds", "states", "build_seconds",
           "reused", "message")
#: ``jobs=None`` goes parallel when the rest of the grid would take longer than this serially
#: (seconds): starting a process and importing ctmc in it takes about a second
_PARALLEL_AFTER = 2.0
#: contiguous runs per process (a run reuses its chains; more runs balance the load)
_RUNS_PER_JOB = 4


@dataclass(frozen=True)
class _Measure:
    """One measure: its name, its kind (``callable``, ``expression``, ``property``) and the object."""

    name: str
    kind: str
    spec: object


@dataclass(frozen=True)
class _Spec:
    """Everything a process needs to evaluate points (sent by pickle)."""

    build: object
    measures: tuple
    initial: object
    build_options: dict
    solve: dict
    errors: str


@dataclass(frozen=True, eq=False)
class SweepResult:
    """The records of :func:`sweep`: one per (grid point, measure), in grid order.

    Attributes
    ----------
    records : list of dict
        Each with the parameters, then :data:`COLUMNS`: ``measure``, ``value``,
        ``error_bound``, ``status`` (a :class:`ctmc.Status` value or
        ``"error"``), ``method``, ``seconds`` (the measure's own time; the
        first expression measure of a point also pays its long-run solve),
        ``states`` (None where the build failed), ``build_seconds``,
        ``reused`` (the chain kept the previous point's states) and
        ``message`` (empty on success).
    parameters : tuple of str
        The grid's parameter names, in order.
    measures : tuple of str
        The measure names, in order.
    jobs : int
        The processes used (1: serial).
    seconds : float
        Wall time of the whole sweep.
    """

    records: list
    parameters: tuple
    measures: tuple
    jobs: int = 1
    seconds: float = 0.0
    columns: tuple = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "columns", tuple(self.parameters) + COLUMNS)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    @property
    def errors(self) -> list:
        """The records of status ``"error"``."""
        return [r for r in self.records if r["status"] == "error"]

    def to_frame(self):
        """The records as a :class:`pandas.DataFrame` (long format: one row per point and measure).

        Needs pandas, the optional extra ``frame``: ``pip install 'ctmc-exact[frame]'``.
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("SweepResult.to_frame needs pandas: pip install 'ctmc-exact[frame]' "
                              "(or pandas); SweepResult.records holds the same rows as dicts") from None
        return pd.DataFrame(self.records, columns=list(self.columns))

    def __repr__(self) -> str:
        points = len(self.records) // max(len(self.measures), 1)
        return (f"SweepResult({len(self.records)} records: {points} points x {len(self.measures)} measures, "
                f"{len(self.errors)} errors, jobs={self.jobs}, {self.seconds:.3g} s)")


# ---- checks, before any work ----------------------------------------------------------------------

def _points(grid, mode) -> tuple:
    """``(names, points)``: the grid's parameter names and its points as dicts, in grid order."""
    if mode not in ("product", "zip"):
        raise ValueError(f"mode: expected 'product' or 'zip', got {mode!r}")
    if not isinstance(grid, Mapping):
        raise TypeError(f"grid: expected a dict {{parameter: values}}, got {type(grid).__name__}")
    if not grid:
        raise ValueError("grid: empty; give at least one parameter and its values, e.g. {'rho': [0.5, 0.9]}")
    names, columns = [], []
    for name, values in grid.items():
        if not isinstance(name, str) or not name.isidentifier():
            raise ValueError(f"grid: parameter {name!r} is not an identifier (build(**point) receives it)")
        if name in COLUMNS:
            raise ValueError(f"grid: parameter {name!r} is the name of a record column; rename it "
                             f"(reserved: {', '.join(COLUMNS)})")
        if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
            raise TypeError(f"grid: parameter {name!r}: expected a sequence of values, got {values!r}")
        values = list(values.tolist() if isinstance(values, np.ndarray) else values)
        if not values:
            raise ValueError(f"grid: parameter {name!r} has no values")
        names.append(name)
        columns.append(values)
    if mode == "zip":
        lengths = {n: len(v) for n, v in zip(names, columns)}
        if len(set(lengths.values())) > 1:
            raise ValueError("grid: mode='zip' needs sequences of one length, got "
                             + ", ".join(f"{n}: {k}" for n, k in lengths.items()))
        rows = zip(*columns)
    else:
        rows = itertools.product(*columns)
    return tuple(names), [dict(zip(names, row)) for row in rows]


def _is_property(text: str) -> bool:
    """A PRISM property holds brackets (``S=? [ ... ]``); an expression of the variables never does."""
    return "[" in text


def _measure(name, spec) -> _Measure:
    if not isinstance(name, str) or not name:
        raise ValueError(f"measures: a name must be a non-empty string, got {name!r}")
    if isinstance(spec, str):
        if _is_property(spec):
            from .prism.parser import PropertyParser
            try:
                PropertyParser(spec, "<property>").single()
            except ValueError as exc:
                raise ValueError(f"measures[{name!r}]: {exc}") from None
            return _Measure(name, "property", spec)
        try:
            tree = ast.parse(spec.strip(), mode="eval")
            names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(FUNCTIONS)
        except SyntaxError:
            names = set()
        try:
            parse_expr(spec, names)          # the chain's names are known per point: the form only here
        except ValueError as exc:
            raise ValueError(f"measures[{name!r}]: {exc}") from None
        return _Measure(name, "expression", spec)
    if callable(spec):
        return _Measure(name, "callable", spec)
    raise TypeError(f"measures[{name!r}]: expected a callable f(chain), an expression or a PRISM property "
                    f"string, got {type(spec).__name__}")


def _measures(measures) -> tuple:
    if isinstance(measures, Mapping):
        items = list(measures.items())
    elif isinstance(measures, (list, tuple)) and all(isinstance(m, str) for m in measures):
        items = [(m, m) for m in measures]
    else:
        raise TypeError("measures: expected a dict {name: measure} or a list of expression/property strings, "
                        f"got {type(measures).__name__}")
    if not items:
        raise ValueError("measures: empty; give at least one, e.g. {'mean': 'n'}")
    return tuple(_measure(n, s) for n, s in items)


def _check_signature(build, point):
    try:
        sig = inspect.signature(build)
    except (TypeError, ValueError):          # a builtin or a callable without a signature: it will say
        return
    try:
        sig.bind(**point)
    except TypeError as exc:
        raise TypeError(f"grid: build{sig} cannot take the point {point}: {exc}") from None


def _jobs(jobs) -> int:
    if jobs is None:
        return cores()
    if isinstance(jobs, bool) or not isinstance(jobs, (int, np.integer)) or jobs < 1:
        raise ValueError(f"jobs: expected a positive integer or None (the cores available), got {jobs!r}")
    return int(jobs)


# ---- one point --------------------------------------------------------------------------------------

def _chain(spec: _Spec, params: dict, previous):
    """The chain at ``params``: ``build(**params)``, built (reusing ``previous``'s states) if a model."""
    from .chain import CTMC
    from .model import Model
    obj = spec.build(**params)
    if isinstance(obj, Model):
        if spec.initial is None and type(obj).build is Model.build:     # (a PRISM model has its own)
            names = ", ".join(f"'{v.name}': ..." for v in obj.variables)
            raise ValueError(f"initial: model {obj.name!r} needs its initial state(s): give "
                             f"ctmc.sweep(..., initial={{{names}}})")
        opts = dict(spec.build_options)
        if previous is not None:
            opts["reuse"] = previous
        return obj.build(spec.initial, **opts) if spec.initial is not None else obj.build(**opts)
    if isinstance(obj, CTMC):
        return obj
    raise TypeError(f"build returned {type(obj).__name__}: expected a ctmc.Model or a built ctmc.CTMC")


def _status(value) -> str:
    try:
        return Status(value).value
    except ValueError:
        return str(value)


_NO_BOUND = ("the measure states no finite error bound, so its value is not graded: return a result with "
             "one (a MeasureResult, e.g. res.expect('n') or chain.throughput(...); a PropertyResult)")


def _from_result(m: _Measure, r) -> tuple:
    """``(value, error_bound, status, method, message)`` of what a callable measure returned."""
    if isinstance(r, (bool, int, float, np.integer, np.floating)):
        return float(r), math.nan, UNCHECKED, "callable", _NO_BOUND
    if hasattr(r, "value"):
        if np.ndim(r.value) != 0:
            raise TypeError(f"measure {m.name!r}: the result's value has shape {np.shape(r.value)}; a sweep "
                            "measure is one number (ask for one time t, or return a number)")
        status = _status(getattr(r, "status", Status.SUCCESS))
        message = "" if status == Status.SUCCESS.value else str(     # a property's is on its solver's result
            getattr(r, "message", None) or getattr(getattr(r, "result", None), "message", None) or "")
        bound = float(getattr(r, "error_bound", math.nan))
        if status == Status.SUCCESS.value and not math.isfinite(bound):
            status, message = UNCHECKED, _NO_BOUND
        return float(r.value), bound, status, str(getattr(r, "method", "callable")), message
    raise TypeError(f"measure {m.name!r}: returned {type(r).__name__}; return a number or a result with a "
                    "value (a MeasureResult, a PropertyResult; from a StationaryResult, res.expect('n'))")


def _properties(chain, spec: _Spec, cache: dict) -> dict:
    """The property measures at this point, name -> result or exception: one properties file, so that
    they share their long-run law (:func:`ctmc.prism.check_file`); one by one where that fails."""
    if "properties" not in cache:
        from .prism import check, check_file
        props = [m for m in spec.measures if m.kind == "property"]
        text = "".join(f'"p{k}": {m.spec.strip().rstrip(";")};\n' for k, m in enumerate(props))
        try:
            out = dict(zip((m.name for m in props), check_file(chain, text, **spec.solve)))
        except Exception:                        # noqa: BLE001 - each then reports its own error
            out = {}
            for m in props:
                try:
                    out[m.name] = check(chain, m.spec, **spec.solve)
                except Exception as exc:         # noqa: BLE001
                    out[m.name] = exc
        cache["properties"] = out
    return cache["properties"]


def _law(chain, spec: _Spec, cache: dict):
    """The long-run law of the expression measures, solved once per point (a failure too); the one
    the properties solved where they did (the same call, from the chain's initial law)."""
    if "law" not in cache:
        from .results import StationaryResult
        law = None
        if chain.initial_law is not None and any(m.kind == "property" for m in spec.measures):
            law = next((r.result for r in _properties(chain, spec, cache).values()
                        if isinstance(getattr(r, "result", None), StationaryResult)), None)
        if law is None:
            try:
                law = chain.long_run(**spec.solve)
            except Exception as exc:             # noqa: BLE001 - each expression measure reports it
                law = exc
        cache["law"] = law
    if isinstance(cache["law"], Exception):
        raise cache["law"]
    return cache["law"]


def _evaluate(m: _Measure, chain, spec: _Spec, cache: dict) -> tuple:
    """``(value, error_bound, status, method, message)`` of measure ``m`` on ``chain``."""
    if m.kind == "callable":
        out = _from_result(m, m.spec(chain))
    elif m.kind == "property":
        r = _properties(chain, spec, cache)[m.name]
        if isinstance(r, Exception):
            raise r
        out = _from_result(m, r)
    else:
        law = _law(chain, spec, cache)
        f = eval_on_chain(m.spec, chain)
        value = float(law.pi @ f)
        scale = float(np.max(np.abs(f))) if f.size else 0.0
        status = _status(law.status)
        method = law.method if law.method.startswith("long_run") else f"long_run({law.method})"
        out = (value, float(law.error_bound) * scale if scale else 0.0, status, method,
               "" if status == Status.SUCCESS.value else law.message)
    if math.isnan(out[0]):
        raise ValueError(f"measure {m.name!r}: the value is NaN")
    return out


def _record(params, name, value, bound, status, method, seconds, states, build_seconds, reused, message):
    return {**params, "measure": name, "value": value, "error_bound": bound, "status": status,
            "method": method, "seconds": seconds, "states": states, "build_seconds": build_seconds,
            "reused": reused, "message": message}


def _failed(exc) -> str:
    return f"{type(exc).__name__}: {exc}"


def _point(spec: _Spec, params: dict, previous) -> tuple:
    """``(records, chain or None)`` at ``params``."""
    t0 = time.perf_counter()
    try:
        chain = _chain(spec, params, previous)
    except Exception as exc:                                 # noqa: BLE001 - a failed point is a record
        if spec.errors == "raise":
            _note(exc, params)
            raise
        spent = time.perf_counter() - t0
        return [_record(params, m.name, math.nan, math.nan, "error", "", 0.0, None, spent, False,
                        f"build: {_failed(exc)}") for m in spec.measures], None
    built = time.perf_counter() - t0
    info = getattr(chain, "build_info", {}) or {}
    n, reused = int(chain.n_states), bool(info.get("reused", False))
    rows, cache = [], {}
    for m in spec.measures:
        t1 = time.perf_counter()
        try:
            value, bound, status, method, message = _evaluate(m, chain, spec, cache)
        except Exception as exc:                             # noqa: BLE001
            if spec.errors == "raise":
                _note(exc, params, m.name)
                raise
            value, bound, status, method, message = math.nan, math.nan, "error", "", _failed(exc)
        rows.append(_record(params, m.name, value, bound, status, method, time.perf_counter() - t1, n,
                            built, reused, message))
    return rows, chain


def _note(exc, params, measure=None):
    add = getattr(exc, "add_note", None)           # Python >= 3.11
    if add is not None:
        add(f"ctmc.sweep: at the point {params}" + (f", measure {measure!r}" if measure else ""))


def _run(spec: _Spec, points, on_point=None, previous=None) -> tuple:
    """``(records, last chain)`` of ``points``, in order, each chain reusing the previous one's states."""
    out = []
    with progress_scope(False):                    # the sweep's own bar is the one report
        for params in points:
            rows, chain = _point(spec, params, previous)
            previous = chain if chain is not None else previous
            out += rows
            if on_point is not None:
                on_point()
    return out, previous


def _run_chunk(payload: bytes, points: list) -> tuple:
    """In a process: ``("ok", records)``, or ``("unpicklable", why)`` when the sweep cannot be read here."""
    try:
        spec = pickle.loads(payload)
    except Exception as exc:             # noqa: BLE001 - e.g. a function of an interactive __main__
        return "unpicklable", _failed(exc)
    try:
        return "ok", _run(spec, points)[0]
    except Exception as exc:             # errors="raise": the exception travels back, by pickle too
        try:
            pickle.loads(pickle.dumps(exc))
        except Exception:                # noqa: BLE001 - an exception that does not travel: its text does
            notes = " ".join(getattr(exc, "__notes__", []))
            raise RuntimeError(f"{_failed(exc)} {notes}".strip()) from None
        raise


# ---- the grid -----------------------------------------------------------------------------------------

def _runs(n: int, k: int) -> list:
    """``k`` contiguous runs ``(start, stop)`` covering ``range(n)``, as even as can be."""
    bounds = [round(i * n / k) for i in range(k + 1)]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


def _parallel(spec: _Spec, payload: bytes, points: list, jobs: int, prog, done: int):
    """``(records, why)``: the records of ``points`` from ``jobs`` processes, in grid order; None and why
    where a process cannot read the sweep or stops (then the caller runs it serially)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool
    runs = _runs(len(points), min(len(points), jobs * _RUNS_PER_JOB))
    results = [None] * len(runs)
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=min(jobs, len(runs)), mp_context=ctx) as pool:
        futures = {pool.submit(_run_chunk, payload, points[a:b]): k for k, (a, b) in enumerate(runs)}
        try:
            for fut in as_completed(futures):
                k = futures[fut]
                kind, value = fut.result()
                if kind == "unpicklable":
                    pool.shutdown(wait=False, cancel_futures=True)
                    return None, value
                results[k] = value
                done += runs[k][1] - runs[k][0]
                prog.update(f"{done}/{prog.total} points", done=done)
        except BrokenProcessPool as exc:         # e.g. a script starting sweeps as it is imported
            return None, (f"a process stopped ({exc}); in a script, start the sweep under "
                          "if __name__ == '__main__':")
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return [r for run in results for r in run], None


def sweep(build, grid, measures, *, mode: str = "product", initial=None, build_options=None, jobs=None,
          progress=None, errors: str = "record", method: str = "auto", backend=None,
          **solve_options) -> SweepResult:
    """Evaluate measures of a model over a parameter grid; see :mod:`ctmc.sweep`.

    Parameters
    ----------
    build : callable
        ``build(**point)`` returns a :class:`ctmc.Model` (built here, reusing
        the previous point's states when only rates changed) or a built
        :class:`ctmc.CTMC`.
    grid : dict of str to sequence
        Parameter name -> values.
    measures : dict of str to measure, or list of str
        Callables ``f(chain)``, expressions of the variables (their
        long-run expectation) or PRISM properties (strings with brackets);
        a list of strings names each by itself.
    mode : {"product", "zip"}
        All combinations (the first parameter varying slowest), or the
        i-th values together (sequences of one length).
    initial : dict or list of dict, optional
        The initial state(s) of each :class:`ctmc.Model` (a PRISM model has its own).
    build_options : dict, optional
        Options of :meth:`ctmc.Model.build` (``engine``, ``max_states``...).
    jobs : int, optional
        Processes; 1 runs serially; None: the cores available
        (:func:`os.sched_getaffinity`), used once the points run so far show
        that the rest of the grid takes longer than starting them.
    progress : bool, optional
        A progress bar with the time left over the grid (default: on a terminal).
    errors : {"record", "raise"}
        A failed point (build or measure) as records of status ``"error"``,
        or raised (with a note naming the point).
    method, backend, **solve_options
        For the long-run solves of the expression and property measures
        (:meth:`ctmc.CTMC.long_run`; ``check`` is False unless given).

    Returns
    -------
    SweepResult

    Raises
    ------
    ValueError, TypeError
        Before any work, for a bad grid (empty, a parameter without values,
        ``zip`` of unequal lengths, a parameter ``build`` does not take),
        measure (a malformed expression or property), ``mode``, ``jobs``,
        ``errors``, or (with expression measures) the stationary ``method``
        and its options; each message names the parameter.
    """
    t_start = time.perf_counter()
    if not callable(build):
        raise TypeError(f"build: expected a callable build(**point) -> ctmc.Model, "
                        f"got {type(build).__name__}")
    names, points = _points(grid, mode)
    ms = _measures(measures)
    if errors not in ("record", "raise"):
        raise ValueError(f"errors: expected 'record' or 'raise', got {errors!r}")
    if build_options is not None and not isinstance(build_options, Mapping):
        raise TypeError(f"build_options: expected a dict of Model.build options, got {build_options!r}")
    asked = jobs
    jobs = min(_jobs(jobs), len(points))
    _check_signature(build, points[0])
    if any(m.kind == "expression" for m in ms):      # their long-run solves: the method and its options
        from .options import make_options
        from .stationary import METHODS
        make_options("stationary", METHODS, method, {k: v for k, v in solve_options.items() if k != "check"})
    solve = {"method": method, "backend": backend, **solve_options}
    solve.setdefault("check", False)
    spec = _Spec(build, ms, initial, dict(build_options or {}), solve, errors)
    prog = Progress(f"sweep of {len(points)} points", progress, total=len(points))
    done = [0]

    def step():
        done[0] += 1
        prog.update(f"{done[0]}/{len(points)} points", done=done[0])

    with prog:
        records, last, k = [], None, 0
        while jobs > 1 and asked is None and k < len(points):
            # serially while the rest would take less than starting processes (judged from the
            # second point on: the first pays the imports and first calls)
            t0 = time.perf_counter()
            rows, last = _run(spec, points[k:k + 1], step, last)
            records += rows
            k += 1
            if k >= 2 and (time.perf_counter() - t0) * (len(points) - k) > _PARALLEL_AFTER:
                break
        todo = points[k:]
        used = 1
        if jobs > 1 and len(todo) > 1:
            try:
                payload = pickle.dumps(spec)
                why = None
            except Exception as exc:                         # noqa: BLE001 - lambdas, local functions
                payload, why = None, _failed(exc)
            if payload is not None:
                got, why = _parallel(spec, payload, todo, jobs, prog, done[0])
                if got is not None:
                    records += got
                    todo, used = [], min(jobs, len(todo))
            if todo and why.startswith("a process stopped"):
                warnings.warn(f"jobs={asked}: {why}; the sweep runs serially", CtmcWarning, stacklevel=2)
            elif todo and asked is not None:
                warnings.warn(f"jobs={asked}: the build function or a measure cannot be sent to another "
                              f"process ({why}); the sweep runs serially. Define them at module level "
                              "(not lambdas or local functions) to run in parallel.", CtmcWarning,
                              stacklevel=2)
        if todo:
            records += _run(spec, todo, step, last)[0]
    return SweepResult(records, names, tuple(m.name for m in ms), used, time.perf_counter() - t_start)
