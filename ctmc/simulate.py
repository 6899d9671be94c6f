r"""Stochastic simulation of a :class:`ctmc.Model` without building its chain.

Gillespie's direct method: in state :math:`x` the enabled events give the
transitions :math:`x \to y_k` at rates :math:`r_k(x)` (rate 0 and self-loops
dropped, as in the generator); with :math:`R(x) = \sum_k r_k(x)` the path
stays an :math:`\mathrm{Exp}(R(x))` time, then takes transition :math:`k`
with probability :math:`r_k(x)/R(x)`. The events are evaluated one state at
a time by the compiled builder's engine (:mod:`ctmc._compiled`: the model's
guards, rates and updates as bytecode, and the same C expansion of a state
that builds the chain), so a model of :math:`10^9` states runs as fast as
one of ten; the GIL is released while paths are drawn.

Random numbers are xoshiro256** in C; run :math:`r` of a call with seed
:math:`s` has its own generator seeded from :math:`(s, r)` (splitmix64), so
results depend on the seed only, not on ``threads``.

**Estimators** (``confidence`` :math:`c`, :math:`t_{\nu}` Student's
quantile of order :math:`(1 + c)/2`):

- transient, :meth:`Simulator.transient`: :math:`\mathbb{E}[f(X_t)]` over
  :math:`n` independent runs, :math:`\bar f \pm t_{n-1} s/\sqrt{n}`;
- long-run average, :meth:`Simulator.long_run` (batch means): one path,
  its first ``warmup`` time units dropped, then ``batches`` batches of equal
  length :math:`L`; batch :math:`b` gives the time average
  :math:`Y_b = L^{-1}\int f(X_t)\,dt` over its window, and the estimate is
  :math:`\bar Y \pm t_{B-1} s_Y/\sqrt{B}`, valid when the batches are long
  enough to be nearly independent and normal. The status is ``"ok"`` (and
  ``reliable`` True) only when none of these fires: fewer than 10 batches;
  a batch with fewer than :data:`MIN_BATCH_EVENTS` jumps; batch means whose
  spread is below :data:`DEGENERATE_RTOL` times their size (constant up to
  rounding); a lag-1 autocorrelation above :math:`z_{0.99}/\sqrt{B}`; pairs
  of merged batches giving a variance of the mean larger than the batches'
  beyond the :math:`F` quantile of order 0.99; a start far from
  stationarity: MSER's truncation point (the leading :math:`d \le B/2`
  batches whose removal minimises :math:`\sum (Y_i - \bar Y)^2/(B - d)^2`)
  with the first :math:`d` batches differing from the rest significantly
  (``mser``; they stay in the estimate: dropping rare spikes would bias it
  low). On M/M/1/K
  near saturation, the "ok" intervals cover at their level
  (tests/test_simulate.py);
- hitting times, :meth:`Simulator.hitting_times`: :math:`\tau = \inf\{t
  \ge 0 : X_t \in A\}` per run, censored at ``max_time`` or
  ``max_events``; the mean is over the runs that hit, and the status says
  how many were censored (the mean is then biased low) or absorbed outside
  the target (:math:`\tau = \infty`). :meth:`HittingTimes.cdf` gives
  :math:`P(\tau \le t)` for :math:`t \le` ``max_time``, unbiased under
  censoring by time.

Every estimate has a free-text ``status`` and a machine-readable
``reliable`` (True exactly when the status is ``"ok"``). A transient
estimate is not reliable where the runs do not vary (up to rounding), a
hitting-time one where a run was censored or never hits.

Measures are strings over the model's variables, labels and rewards
(parsed safely by :mod:`ctmc.exprparse`, as ``ctmc solve --expect`` reads
them: ``"n"``, ``"full"``, ``"full & (n > 2)"``, ``"2 * queue"``; a label is
1 where it holds, and a name that is both a variable and a label is the
variable), or :class:`ctmc.Expr` objects; they are compiled with the model.
What the engine cannot run is refused before any path is drawn: a model
that does not compile (a user function, immediate moves, ...; there is no
slower numpy fallback), a measure that does not (named), a hitting target
that is a number rather than a condition, results beyond :data:`MAX_VALUES`
values (``batches``, ``runs``, ``n_events``: named with their range) or
the C extension missing raise a ``ValueError`` naming the reason. The branch
of :func:`~ctmc.expr.where` not taken, and the operand of ``&``/``|`` not
needed, are not evaluated (as :mod:`ctmc.expr` ignores their faults). A
state where the engine stops (an integer reaching :math:`2^{53}`, a
division by zero, a negative or NaN rate, an update out of bounds, rates
whose sum overflows to inf) raises :class:`~ctmc.results.ModelError`
naming the state, with the vectorised builder's message (or the measure's,
naming its sub-expression) where it has one.

Examples
--------
>>> import ctmc
>>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 5)
>>> m.event("arrival", guard=n < 5, rate=1.0, update={n: n + 1})
>>> m.event("departure", guard=n > 0, rate=2.0, update={n: n - 1})
>>> sim = ctmc.simulate(m, initial={"n": 0}, seed=1)
>>> est = sim.long_run("n", time=2e4)
>>> exact = sum(k * 0.5 ** k for k in range(6)) / sum(0.5 ** k for k in range(6))
>>> abs(est.estimate - exact) <= est.half_width
True
"""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ._compiled import NotCompilable, compile_model
from .expr import Expr
from .exprparse import parse_expr
from .options import integer_in
from .results import ModelError

try:
    import ctmc._explore as _eng          # the compiled engine (its sim_* entry points: ctmc/_explore_sim.h)
except ImportError:                       # not built: the simulator refuses (Simulator._engine)
    _eng = None

__all__ = ["simulate", "Simulator", "TransientEstimate", "LongRunEstimate", "HittingTimes", "Path"]

_ST_OK, _ST_FALLBACK, _ST_MAX_EVENTS, _ST_INF_RATE = 0, 1, 2, 11
_OUTCOMES = ("hit", "censored at max_time", "censored at max_events", "absorbed outside the target")


def _quantile(confidence: float, dof: int) -> float:
    from scipy.stats import t
    return float(t.ppf(0.5 + confidence / 2, dof)) if dof > 0 else math.inf


#: The fewest jumps a batch may hold for an "ok" long-run estimate. A batch mean is a time average
#: over the sojourns of its batch; the t interval needs it nearly normal and nearly independent of
#: its neighbours, i.e. the batch must span many excursions of the chain, and jumps are the one
#: model-free count of them. The lag-1 and merged-batch tests below cannot see it from 30 batches:
#: on M/M/1/K (K=30, rho=0.95, from n=0), T=2000 (~127 jumps a batch) gave estimated lag-1 of
#: 0.2-0.4 (under the test's 0.43) and intervals covering 85 % at a nominal 99.9 %; 100 jumps a batch
#: still let 30 of 300 seeds through, 5 of them missing. With 1000 no seed at T <= 16500 is "ok";
#: at T=2e4 (~1270 a batch) 1850 of 2000 are, missing 3 (Binomial(1850, 0.001): mean 1.85). The cost
#: is small: 30 batches of 1000 jumps are 3e4 events, milliseconds.
MIN_BATCH_EVENTS = 1000

#: Batch means are degenerate when their standard deviation is at most this times their largest
#: magnitude: a constant measure up to rounding (sd == 0 is beaten by rounding: 1 - x summed over
#: batches of length 33.3 gives an sd of 1e-16, not 0).
DEGENERATE_RTOL = 1e-9

#: Level of the tests behind a long-run "ok": the lag-1 autocorrelation and the variance of the
#: mean from pairs of merged batches against the one from the batches (both one-sided).
BATCH_TEST_LEVEL = 0.99


def _mser(y) -> int:
    """The leading batches MSER would drop (White 1997), 0 unless they differ significantly from the rest.

    MSER's truncation point is the :math:`d \\le B/2` minimising :math:`\\sum_{i \\ge d} (Y_i - \\bar
    Y_{d:})^2/(B - d)^2`, the variance of the mean of the rest. On a stationary path that minimum is
    flat and lands on :math:`d > 0` by chance (a third of the time on M/M/1/K), so ``d`` counts only
    when the dropped batches' mean differs from the rest's beyond a two-sided normal test at
    :data:`BATCH_TEST_LEVEL`: a start far from stationarity (or rare spikes early in the path).
    """
    from scipy.stats import norm
    B = y.size
    if B < 10:
        return 0
    d = int(np.argmin([np.sum((y[k:] - y[k:].mean()) ** 2) / (B - k) ** 2 for k in range(B // 2 + 1)]))
    if not d:
        return 0
    rest = y[d:]
    gap, spread = abs(y[:d].mean() - rest.mean()), rest.std(ddof=1) * math.sqrt(1 / d + 1 / rest.size)
    return d if gap > norm.ppf(0.5 + BATCH_TEST_LEVEL / 2) * spread else 0


def _batch_means(y, jumps, confidence) -> tuple:
    """``(estimate, half_width, lag1, mser, status)`` of batch means ``y`` over all the batches (status
    rules: module docstring); the status is "ok" when the interval is to be trusted."""
    from scipy.stats import f as fdist, norm
    B = y.size
    notes = []
    mser = _mser(y)
    sd, d = y.std(ddof=1), y - y.mean()
    lag1 = float(np.dot(d[1:], d[:-1]) / np.dot(d, d)) if np.dot(d, d) > 0 else 0.0
    if B < 10:
        notes.append(f"too few batches ({B} < 10): the t interval is wide and fragile")
    if mser:         # not dropped from the estimate: under rare spikes, dropping them biases it low
        notes.append(f"the first {mser} of {B} batches differ from the rest (MSER truncation point; a start "
                     "far from stationarity or rare spikes): take a longer warmup or time")
    if jumps.min() < MIN_BATCH_EVENTS:
        notes.append(f"too few jumps per batch (fewest {int(jumps.min())} < {MIN_BATCH_EVENTS}): take a "
                     "longer time")
    if not sd > DEGENERATE_RTOL * np.max(np.abs(y)):
        notes.append("no variation among the batches (up to rounding): the interval is degenerate")
    elif B >= 10:
        if lag1 > norm.ppf(BATCH_TEST_LEVEL) / math.sqrt(B):
            notes.append(f"batch means correlated (lag-1 autocorrelation {lag1:.2f}): take a longer time")
        m = y[B % 2:].reshape(-1, 2).mean(axis=1)
        ratio = (m.var(ddof=1) / m.size) / (sd ** 2 / B)
        if ratio > fdist.ppf(BATCH_TEST_LEVEL, m.size - 1, B - 1):
            notes.append(f"half-width unstable: merging pairs of batches widens it by {math.sqrt(ratio):.2f}x "
                         "(batches not independent): take a longer time")
    hw = _quantile(confidence, B - 1) * sd / math.sqrt(B)
    return float(y.mean()), float(hw), lag1, mser, "; ".join(notes) or "ok"


def _check_confidence(confidence) -> float:
    if not (isinstance(confidence, (int, float)) and 0 < confidence < 1):
        raise ValueError(f"confidence: expected a number in (0, 1), got {confidence!r}")
    return float(confidence)


def _check_count(name, value, least=1) -> int:
    integer_in(name, value, least)          # the options' rule: an integer >= least, named
    return int(value)


#: The most threads a call may start (one per chunk of runs; more than the cores gain nothing).
MAX_THREADS = 1024

#: The most float64 values a call may allocate for its results (800 MB), checked before any is.
MAX_VALUES = 10 ** 8


def _check_size(name, value, per, of=None):
    """Refuse ``value * per`` result values beyond :data:`MAX_VALUES`, naming ``name`` and its range."""
    if value * per > MAX_VALUES:
        each = f" ({per} values each, for the {of})" if of else ""
        raise ValueError(f"{name}: at most {MAX_VALUES // per} here{each}, got {value} (the results would "
                         f"take {value * per * 8 / 2 ** 30:.1f} GiB)")


def _check_time(name, value, *, positive=False, infinite=False) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    ok = ok and (value > 0 if positive else value >= 0) and (math.isfinite(value) or (infinite and value > 0))
    if not ok:
        kind = "> 0" if positive else ">= 0"
        raise ValueError(f"{name}: expected a number {kind}{' (or inf)' if infinite else ''}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class TransientEstimate:
    """:math:`\\mathbb{E}[f(X_t)]` at ``times`` over ``runs`` independent runs (:meth:`Simulator.transient`).

    ``estimate`` and ``half_width`` are arrays over ``times``: the interval
    ``estimate +- half_width`` holds the mean with probability ``confidence``.
    """

    expression: str
    times: np.ndarray
    estimate: np.ndarray
    half_width: np.ndarray
    confidence: float
    runs: int
    events: int
    seed: int
    status: str
    reliable: bool           # status "ok": no rule of the status rules (module docstring) fired


@dataclass(frozen=True)
class LongRunEstimate:
    """The long-run (stationary) average of ``expression`` by batch means (:meth:`Simulator.long_run`)."""

    expression: str
    estimate: float
    half_width: float
    confidence: float
    batches: int
    batch_time: float
    warmup: float
    lag1: float              # lag-1 autocorrelation of the batch means
    batch_means: np.ndarray
    events: int
    seed: int
    status: str
    reliable: bool           # status "ok": the interval passed every check of the status rules
    batch_events: np.ndarray = None   # jumps of the path in each batch
    mser: int = 0            # leading batches MSER would drop, when they differ significantly (status)


@dataclass(frozen=True)
class HittingTimes:
    """Hitting times of ``target`` from the initial state (:meth:`Simulator.hitting_times`).

    ``times`` holds one entry per run (its hitting time; for a censored run
    the time reached, for an absorbed one the absorption time) and
    ``outcome`` its fate: 0 hit, 1 censored at ``max_time``, 2 censored at
    ``max_events``, 3 absorbed outside the target (never hits).
    ``estimate +- half_width`` is the mean over the runs that hit.
    """

    target: str
    times: np.ndarray
    outcome: np.ndarray
    estimate: float
    half_width: float
    confidence: float
    runs: int
    hits: int
    censored: int
    never: int
    max_time: float
    events: int
    seed: int
    status: str
    reliable: bool           # status "ok": every run hit

    def cdf(self, t: float) -> tuple:
        """``(estimate, half_width)`` of :math:`P(\\tau \\le t)` (normal approximation), ``t <= max_time``."""
        t = _check_time("t", t)
        if t > self.max_time or self.outcome[self.outcome == 2].size:
            if t > self.max_time:
                raise ValueError(f"t: the runs were censored at max_time={self.max_time}, got t={t}")
            raise ValueError("cdf: some runs were censored at max_events (their time is unknown); "
                             "raise max_events")
        p = float(np.mean((self.outcome == 0) & (self.times <= t)))
        return p, _quantile(self.confidence, self.runs - 1) * math.sqrt(p * (1 - p) / max(self.runs - 1, 1))


@dataclass(frozen=True)
class Path:
    """One simulated path (:meth:`Simulator.path`): the state entered at each jump time."""

    times: np.ndarray        # jump times, the first 0.0
    states: dict             # variable -> values (the initial state first)
    events: tuple            # the event fired at each jump (None for the start)
    seed: int


class Simulator:
    """Simulation of ``model`` from ``initial`` with ``seed`` (made by :func:`simulate`)."""

    def __init__(self, model, initial, seed: int, max_events: int):
        self.model, self.seed, self.max_events = model, seed, max_events
        self.layout = model.layout
        if initial is None:
            initial = getattr(model, "initial", None)      # a PRISM model's own initial state(s)
        self.initial = initial
        self._init = np.ascontiguousarray(model.initial_codes(initial), dtype=np.int64)
        self._engine()                                       # refuse what the engine cannot run, now

    # compilation ----------------------------------------------------------------
    def _engine(self, measures=(), what="expression"):
        """The engine's model arguments (and the measures' starts), or a ValueError naming why not:
        the model, or the measure ``(text, Expr)`` that does not compile."""
        if _eng is None:
            raise ValueError("simulate: the C extension ctmc._explore is not installed (the simulator runs "
                             "on the compiled engine; reinstall ctmc with a C compiler)")
        try:
            out = compile_model(self.model, self.layout, [e for _, e in measures])
        except NotCompilable as exc:
            self._which_measure(measures, what)
            raise ValueError(f"simulate: model {self.model.name!r} does not compile ({exc}); the simulator "
                             "runs on the compiled engine only (there is no numpy fallback)") from None
        lay = self.layout
        as64 = (lambda a: np.ascontiguousarray(a, dtype=np.int64))
        args = (*out[:3], as64(lay.lo), as64(lay.span), as64(lay.strides), self._init, self.seed)
        return (args, out[4]) if measures else (args, None)

    def _which_measure(self, measures, what):
        """Raise a ValueError naming the first measure that does not compile, if the model alone does."""
        if not measures:
            return
        try:
            compile_model(self.model, self.layout)
        except NotCompilable:
            return                                           # the model is the problem
        for text, e in measures:
            try:
                compile_model(self.model, self.layout, [e])
            except NotCompilable as exc:
                raise ValueError(f"{what} {text!r}: does not compile ({exc}); a measure is an expression of "
                                 f"the variables of model {self.model.name!r} (module docstring)") from None

    def _measure(self, expr, what="expression") -> tuple:
        """``(text, Expr)`` of a measure: a string over the variables, a label's or reward's name, an Expr."""
        if isinstance(expr, Expr):
            return repr(expr), expr
        if not isinstance(expr, str):
            raise ValueError(f"{what}: expected text or a ctmc.Expr, got {type(expr).__name__}")
        # the model's labels and rewards are symbols of the text, put in as their expressions; a
        # variable, then a label, then a reward, where a name is several (as ctmc.exprparse.eval_on_chain)
        named = {**self.model.rewards, **self.model.labels}
        return expr.strip(), parse_expr(expr, [v.name for v in self.model.variables], named)

    def _measures(self, exprs):
        """The measures ``[(text, Expr), ...]`` and whether one was given alone (not in a list)."""
        alone = isinstance(exprs, (str, Expr))
        exprs = [exprs] if alone else list(exprs)
        if not exprs:
            raise ValueError("expressions: none given")
        if len(exprs) > 64:
            raise ValueError(f"expressions: at most 64 at a time, got {len(exprs)}")
        return [self._measure(e) for e in exprs], alone

    def _stopped(self, status, code, what, measures=()):
        """The error for a path the engine stopped (status, the state's code, the measures evaluated)."""
        from . import transitions
        codes = np.array([code], dtype=np.int64)
        env = self.layout.decode(codes)
        state = ", ".join(f"{k}={int(v[0])}" for k, v in env.items())
        if status == _ST_MAX_EVENTS:
            return ValueError(f"{what}: a path reached max_events={self.max_events} (in state ({state})); "
                              "raise max_events in ctmc.simulate")
        if status == _ST_INF_RATE:
            return ModelError(f"model {self.model.name!r}: in state ({state}) the rates of the events sum to "
                              "inf (each is finite, their sum overflows the float range): no event can be "
                              "drawn; rescale the rates (a time unit in which they are smaller)")
        # the vectorised builder's own message, where it has one (an invalid rate, an update out of
        # bounds), then the measures' (numpy's evaluation names the sub-expression and the state)
        transitions.expand(self.model, codes, self.layout, strict=True)
        for text, e in measures:
            try:
                e.evaluate(env)
            except ValueError as exc:
                return ModelError(f"{what} {text!r}: {exc}")
        return ModelError(f"model {self.model.name!r}: the simulation stopped in state ({state}): the "
                          "compiled engine stops at integer arithmetic reaching 2**53, a division by zero, "
                          f"an invalid rate or an update out of bounds, in an event or in the {what}")

    def _runs(self, call, runs, threads):
        """``call(run0, run1)`` over ``range(runs)`` split into ``threads`` chunks, in order."""
        threads = _check_count("threads", threads)
        if threads > MAX_THREADS:
            raise ValueError(f"threads: expected an integer in [1, {MAX_THREADS}], got {threads}")
        cuts = np.linspace(0, runs, min(threads, runs) + 1).astype(int)
        if len(cuts) == 2:
            return [call(0, runs)]
        with ThreadPoolExecutor(len(cuts) - 1) as pool:
            return list(pool.map(call, cuts[:-1], cuts[1:]))

    # measures -------------------------------------------------------------------
    def transient(self, expressions, times, *, runs: int = 1000, confidence: float = 0.999,
                  threads: int = 1) -> list:
        """:math:`\\mathbb{E}[f(X_t)]` at each of ``times`` for each expression, over ``runs`` runs.

        Parameters
        ----------
        expressions : str, Expr or list of them
            The functions :math:`f` (module docstring: what a measure may be).
        times : float or sequence of float
            Times :math:`\\ge 0` in increasing order; the path is right-continuous
            (at a jump time, the state entered).
        runs : int
            Independent runs, >= 2; run ``r`` draws from the generator of ``(seed, r)``.
        confidence : float
            Level of the Student-t intervals, in (0, 1).
        threads : int
            Threads the runs are spread over (the GIL is released); the result is the same.

        Returns
        -------
        TransientEstimate or list of TransientEstimate
            One per expression (a list when a list was given).
        """
        measures, alone = self._measures(expressions)
        tt = np.atleast_1d(np.asarray(times, dtype=float))
        if tt.ndim != 1 or not tt.size or not np.all(np.isfinite(tt)) or np.any(tt < 0) \
                or np.any(np.diff(tt) < 0):
            raise ValueError(f"times: expected finite times >= 0 in increasing order, got {times!r}")
        runs, confidence = _check_count("runs", runs, 2), _check_confidence(confidence)
        _check_size("runs", runs, tt.size * len(measures), "times and expressions")
        args, starts = self._engine(measures)
        def call(r0, r1):
            return _eng.sim_transient(*args, int(r0), int(r1), tt, starts, self.max_events)

        parts = self._runs(call, runs, threads)
        for status, _, _, code in parts:
            if status != _ST_OK:
                raise self._stopped(status, code, "transient expressions", measures)
        vals = np.concatenate([np.frombuffer(p[1], dtype=float) for p in parts]).reshape(runs, tt.size,
                                                                                         len(measures))
        events = sum(p[2] for p in parts)
        q = _quantile(confidence, runs - 1)
        out = []
        for k, (text, _) in enumerate(measures):
            v = vals[:, :, k]
            self._finite(v, text)
            sd = v.std(axis=0, ddof=1)
            flat = sd <= DEGENERATE_RTOL * np.max(np.abs(v), axis=0)
            status = "ok" if not np.any(flat) else ("no variation among the runs at some time (up to "
                                                    "rounding): the interval there is degenerate (a rare "
                                                    "event needs more runs)")
            out.append(TransientEstimate(text, tt, v.mean(axis=0), q * sd / math.sqrt(runs), confidence, runs,
                                         events, self.seed, status, status == "ok"))
        return out[0] if alone else out

    @staticmethod
    def _finite(v, text):
        if not np.all(np.isfinite(v)):
            raise ValueError(f"expression {text!r}: gives a value that is not a finite number on the path")

    def long_run(self, expressions, *, time: float, warmup: Optional[float] = None, batches: int = 30,
                 confidence: float = 0.999) -> list:
        """Long-run averages by batch means over one path (module docstring).

        Parameters
        ----------
        expressions : str, Expr or list of them
        time : float
            Simulated time after the warm-up, split into ``batches`` equal batches.
        warmup : float, optional
            Time dropped at the start; default ``time / 10``.
        batches : int
            Number of batches, >= 2 (a status warns below 10).
        confidence : float
            Level of the batch-means interval, in (0, 1).

        Returns
        -------
        LongRunEstimate or list of LongRunEstimate
            One per expression (a list when a list was given).
        """
        measures, alone = self._measures(expressions)
        time = _check_time("time", time, positive=True)
        warmup = time / 10 if warmup is None else _check_time("warmup", warmup)
        batches, confidence = _check_count("batches", batches, 2), _check_confidence(confidence)
        _check_size("batches", batches, len(measures) + 1, "expressions")
        args, starts = self._engine(measures)
        status, data, events, code = _eng.sim_batches(*args, warmup, time / batches, batches, starts,
                                                                    self.max_events)
        if status != _ST_OK:
            raise self._stopped(status, code, "long-run expressions", measures)
        rows = np.frombuffer(data, dtype=float).reshape(batches, len(measures) + 1)
        means, jumps = rows[:, :-1] / (time / batches), rows[:, -1].astype(np.int64)
        out = []
        for k, (text, _) in enumerate(measures):
            y = means[:, k].copy()
            self._finite(y, text)
            est, hw, lag1, mser, status = _batch_means(y, jumps, confidence)
            out.append(LongRunEstimate(text, est, hw, confidence, batches, time / batches, warmup, lag1, y,
                                       events, self.seed, status, status == "ok", jumps, mser))
        return out[0] if alone else out

    def hitting_times(self, target, *, runs: int = 1000, max_time: float = math.inf,
                      confidence: float = 0.999, threads: int = 1) -> HittingTimes:
        """Samples of the hitting time of ``target`` (a condition) from the initial state, one per run.

        Parameters
        ----------
        target : str or Expr
            The set :math:`A`, a condition (a label's name too); 0 when the initial state is in it.
        runs : int
            Independent runs, >= 2.
        max_time : float
            Runs not in :math:`A` by then are censored there (counted in the status). Without it,
            a run that never meets :math:`A` (and is not absorbed) goes on to ``max_events``.
        confidence : float
            Level of the interval of the mean, in (0, 1).
        threads : int
            Threads the runs are spread over; the result is the same.

        Returns
        -------
        HittingTimes
        """
        text, expr = self._measure(target, "target")
        runs, confidence = _check_count("runs", runs, 2), _check_confidence(confidence)
        max_time = _check_time("max_time", max_time, positive=True, infinite=True)
        _check_size("runs", runs, 1)
        args, starts = self._engine([(text, expr)], "target")
        self._condition(text, expr)
        def call(r0, r1):
            return _eng.sim_hitting(*args, int(r0), int(r1), int(starts[0]), max_time, self.max_events)

        parts = self._runs(call, runs, threads)
        for status, _, _, code in parts:
            if status != _ST_OK:
                raise self._stopped(status, code, "target", [(text, expr)])
        times = np.concatenate([np.frombuffer(p[1][0], dtype=float) for p in parts])
        outcome = np.concatenate([np.frombuffer(p[1][1], dtype=np.int8) for p in parts])
        times = np.where(outcome == 1, max_time, times)
        hit = times[outcome == 0]
        counts = np.bincount(outcome, minlength=4)
        notes = [f"{counts[k]} of {runs} runs {_OUTCOMES[k]}" for k in (1, 2, 3) if counts[k]]
        if notes:
            notes.append("the mean is over the runs that hit (biased low when runs were censored)")
        est = float(hit.mean()) if hit.size else math.nan
        hw = _quantile(confidence, hit.size - 1) * float(hit.std(ddof=1)) / math.sqrt(hit.size) \
            if hit.size > 1 else math.inf
        return HittingTimes(text, times, outcome, est, hw, confidence, runs, int(counts[0]),
                            int(counts[1] + counts[2]), int(counts[3]), max_time, sum(p[2] for p in parts),
                            self.seed, "; ".join(notes) or "ok", not notes)

    def _condition(self, text, expr):
        """Refuse a target that is a number, not a condition (numpy's evaluation at the initial states)."""
        value = np.asarray(expr.evaluate(self.layout.decode(self._init)))
        if value.dtype != np.bool_:
            raise ValueError(f"target {text!r}: expected a condition (a comparison, a label, '&', '|', '~'), "
                             f"got a number ({value.dtype} values)")

    def path(self, n_events: int = 1000, *, max_time: float = math.inf, run: int = 0) -> Path:
        """Run ``run``'s path: up to ``n_events`` jumps, none after ``max_time``.

        The path of run ``run`` of :meth:`transient` and :meth:`hitting_times` (the same numbers).
        Events that would leave the state unchanged (self-loops) are not drawn: they change
        nothing in the process.
        """
        n_events, run = _check_count("n_events", n_events), _check_count("run", run, 0)
        _check_size("n_events", n_events, 3)
        max_time = _check_time("max_time", max_time, positive=True, infinite=True)
        args, _ = self._engine()
        status, (t, c, e), _, code = _eng.sim_path(*args, run, n_events, max_time)
        if status != _ST_OK:
            raise self._stopped(status, code, "path")
        codes = np.frombuffer(c, dtype=np.int64)
        names = [ev.name for ev in self.model.events]
        return Path(np.frombuffer(t, dtype=float).copy(), {k: np.asarray(v) for k, v in
                                                            self.layout.decode(codes).items()},
                    tuple(None if k < 0 else names[k] for k in np.frombuffer(e, dtype=np.int32)), self.seed)


def simulate(model, initial=None, *, seed: int, max_events: int = 10 ** 9) -> Simulator:
    """A :class:`Simulator` of ``model`` (a :class:`ctmc.Model`, or a PRISM model) from ``initial``.

    Parameters
    ----------
    model : ctmc.Model
        Also a :class:`ctmc.prism.PrismModel`, which starts by default from
        its program's initial state(s).
    initial : dict or list of dict, optional
        The initial state (as for :meth:`ctmc.Model.build`); several: each
        run starts from one of them, uniformly.
    seed : int
        In ``[0, 2**64)``; the same seed gives the same paths.
    max_events : int
        The most events one path (one run, or the long-run path) may take.

    Raises
    ------
    ValueError
        A bad argument; a model the compiled engine cannot run (named).
    """
    from .model import Model
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a ctmc.Model, got {type(model).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 64:
        raise ValueError(f"seed: expected an integer in [0, 2**64), got {seed!r}")
    return Simulator(model, initial, int(seed), _check_count("max_events", max_events))
