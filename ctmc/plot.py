r"""Figures of ctmc's answers, sized for a paper, each axis saying what it shows and how exact it is.

Five figures, each drawn on a matplotlib Axes (``ax=``, or a new figure) and
returning it:

:func:`law`
    A marginal law :math:`k \mapsto P(X = k)` (``StationaryResult.marginal``,
    a ``{value: probability}`` dict), on a log axis for tails down to 1e-300.
:func:`transient`
    A curve :math:`t \mapsto m(t)` (``prob_within``, ``expected_at``,
    ``cumulative_reward``, ``TransientResult.expect``) with the band
    :math:`m(t) \pm \varepsilon` of the result's absolute error bound.
:func:`passage_cdf`
    A first-passage distribution :math:`t \mapsto P(T_A \le t)` (a
    ``FirstPassageResult`` row, ``prob_within``, a phase-type law) with its band.
:func:`sweep`
    A measure against a parameter of a sweep (long format: one row per grid
    point and measure) with error bars from the bounds, one line per value of
    a second parameter; rows that are not a success are drawn hollow.
:func:`meanfield_error`
    :math:`|E_N - \hat E|` against :math:`N` on log-log axes with the
    least-squares line :math:`\log e = a + b \log N` of each series
    (:func:`loglog_fit`), the slope :math:`b` in the legend.

A new figure is one column of a paper (3.4 x 2.4 in, 8-9 pt text), drawn
under :func:`style` (a matplotlib ``rc_context``: the user's global settings
are neither read for the size nor changed); on a given ``ax`` the figure is
drawn with the settings in force. :func:`save` writes vector files (pdf or
svg by the extension; png only when the path asks for it).

matplotlib is imported when a figure is drawn (the ``plot`` extra:
``pip install 'ctmc-exact[plot]'``); ``import ctmc.plot`` does not need it.
"""
from __future__ import annotations

import contextlib
import math
import numbers
import pathlib

import numpy as np

from .report import PLOT_INSTALL_HELP, new_figure, save_figure
from .sweep import COLUMNS as _SWEEP_COLUMNS

__all__ = ["law", "transient", "passage_cdf", "sweep", "meanfield_error", "loglog_fit", "save", "style",
           "STYLE"]

#: matplotlib settings of a new figure: one column of a paper, 8-9 pt text, thin lines;
#: fonts embedded as TrueType in pdf (editable) and kept as text in svg.
STYLE = {
    "figure.figsize": (3.4, 2.4), "font.size": 8, "axes.labelsize": 8, "axes.titlesize": 9,
    "xtick.labelsize": 8, "ytick.labelsize": 8, "legend.fontsize": 8, "legend.frameon": False,
    "lines.linewidth": 1.0, "lines.markersize": 3.0, "axes.linewidth": 0.6, "errorbar.capsize": 2.0,
    "pdf.fonttype": 42, "svg.fonttype": "none",
}
#: file types :func:`save` writes: vector by default, png only when asked by the extension
VECTOR = (".pdf", ".svg", ".eps", ".ps")
RASTER = (".png",)
#: the evidence columns of a sweep in long format (those of :func:`ctmc.sweep`); every other column
#: is a parameter
SWEEP_COLUMNS = _SWEEP_COLUMNS
#: axis labels of the measures of ctmc.measures, by the name their message starts with
_MEASURE_LABELS = {"prob_within": "P(T_A ≤ t)", "expected_at": "E[v(X_t)]",
                   "cumulative_reward": "E[∫₀ᵗ r(X_s) ds]"}


def _matplotlib():
    """matplotlib, or the ImportError that says how to install it."""
    try:
        import matplotlib
        from matplotlib import rc_context
    except ImportError as exc:
        raise ImportError(PLOT_INSTALL_HELP) from exc
    return matplotlib, rc_context


def style():
    """The context of a new figure (:data:`STYLE`): ``with ctmc.plot.style(): ...``.

    Returns
    -------
    contextlib.AbstractContextManager
        matplotlib's ``rc_context(STYLE)``; the global settings are restored on exit.
    """
    return _matplotlib()[1](STYLE)


@contextlib.contextmanager
def _axes(ax):
    """Yield ``ax``, or the axes of a new one-column figure; drawn under :func:`style` when the
    figure is one of ctmc.plot's (a second curve on it gets the same sizes), else under the
    settings in force (the user's own figure)."""
    if ax is not None and (not hasattr(ax, "plot") or not hasattr(ax, "figure")):
        raise ValueError(f"ax: expected a matplotlib Axes, got {type(ax).__name__}")
    if ax is not None and not getattr(ax.figure, "ctmc_plot_style", False):
        yield ax
        return
    with style():
        if ax is None:
            fig = new_figure(layout="constrained")
            fig.ctmc_plot_style = True
            ax = fig.subplots()
        yield ax
        # ticks made at draw time (outside this context) take their size from here
        ax.tick_params(which="both", labelsize=STYLE["xtick.labelsize"])


def _vector(values, name: str, *, n=None, positive=False) -> np.ndarray:
    """``values`` as a finite 1-D float array (of length ``n``), or a ValueError naming ``name``."""
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected numbers, got {type(values).__name__}") from None
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D sequence of numbers, got shape {a.shape}")
    if n is not None and a.size != n:
        raise ValueError(f"{name}: expected {n} values (one per point), got {a.size}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: values must be finite, got {a[~np.isfinite(a)][:3]}")
    if positive and (a <= 0).any():
        raise ValueError(f"{name}: values must be > 0, got {a[a <= 0][:3]}")
    return a


def _bound(bound, n: int) -> np.ndarray | None:
    """An absolute error bound as an array of ``n`` values >= 0 (None: no band). ``inf`` is a point
    without accuracy, as is ``nan`` among numbers (all ``nan``: a result that computed no bound)."""
    if bound is None:
        return None
    try:
        b = np.asarray(bound, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"bound: expected a number or one number per point, "
                         f"got {type(bound).__name__}") from None
    if b.ndim == 0:
        b = np.full(n, float(b))
    elif b.shape != (n,):
        raise ValueError(f"bound: expected a number or {n} numbers (one per point), got shape {b.shape}")
    if np.isnan(b).all():
        return None
    if (b < 0).any():
        raise ValueError(f"bound: an error bound is a number >= 0 (inf: no accuracy), got {b[b < 0][:3]}")
    return np.where(np.isnan(b), np.inf, b)


def _band(ax, x, y, b, log: bool, what: str = "error bound"):
    """The absolute error bound ``b`` of ``y``: the band ``y ± b`` on a linear axis; on a log axis
    the curve of ``b`` itself (dotted), below which a value is not certified by it (a band
    reaching to 0 would fill the plot)."""
    label = f"{what} (absolute) ≤ {b.max():.1e}"
    if log:
        return ax.plot(x, b, ":", color="0.4", linewidth=0.8, label=label)[0]
    # an infinite bound (no accuracy) leaves the band out there; the label says "≤ inf"
    return ax.fill_between(x, y - b, y + b, where=np.isfinite(b), alpha=0.25, linewidth=0, label=label)


def _log_y(ax, y):
    """A logarithmic y axis where zeros leave a gap (not a line to -inf), with a margin of about a
    fifth of a decade (matplotlib's 5% of 300 decades would be 15 decades above a probability)."""
    ax.set_yscale("log", nonpositive="mask")
    pos = y[y > 0]
    decades = math.log10(pos.max() / pos.min()) if pos.size else 0.0
    ax.set_ymargin(min(0.05, 0.2 / decades) if decades > 0 else 0.05)


def _check_log(log: bool, y, name: str) -> bool:
    """``log`` as a bool, after checking that ``y`` has a value a log axis can show."""
    if log and not (y > 0).any():
        raise ValueError(f"{name}: no value > 0 to draw on a log axis (log=True)")
    return bool(log)


# ---------------------------------------------------------------------------
# a marginal law
# ---------------------------------------------------------------------------
def law(result_or_marginal, by=None, *, log: bool = False, ax=None, label=None, bound=None,
        xlabel=None, ylabel=None):
    r"""Draw a discrete law :math:`k \mapsto P(X = k)`.

    Parameters
    ----------
    result_or_marginal : dict, array_like or result
        ``{value: probability}`` (what ``StationaryResult.marginal`` returns),
        the probabilities of the values 0, 1, ..., or a result with a
        ``marginal`` method (a :class:`~ctmc.StationaryResult`, a
        :class:`~ctmc.TransientResult` at one time) together with ``by``.
    by : str or expression, optional
        The variable of the law; required with a result, a name for the axes
        otherwise.
    log : bool
        Logarithmic probability axis, for tails (values down to the smallest
        doubles are drawn; zero probabilities leave a gap).
    ax : matplotlib Axes, optional
        Draw here; default a new one-column figure (:func:`style`).
    label : str, optional
        Legend entry of the law.
    bound : float, optional
        Absolute error bound of each probability, drawn as a band. Default:
        the result's ``error_bound`` (a bound on the 1-norm error of the whole
        law, hence on each probability of a marginal); none for a dict.
    xlabel, ylabel : str, optional
        Replace the axis labels (default the variable and ``P(name = x)``).

    Returns
    -------
    matplotlib.axes.Axes
    """
    name = None if by is None else str(by)
    if hasattr(result_or_marginal, "marginal"):
        if by is None:
            raise ValueError(f"by: a {type(result_or_marginal).__name__} needs the variable of its "
                             "marginal law")
        marg = result_or_marginal.marginal(by)
        if isinstance(marg, list):
            raise ValueError(f"result_or_marginal: a TransientResult at {len(marg)} times has one law per "
                             "time; "
                             "pass result.marginal(by)[k] for one of them")
        if bound is None:
            bound = getattr(result_or_marginal, "error_bound", None)
        result_or_marginal = marg
    if isinstance(result_or_marginal, dict):
        if not result_or_marginal:
            raise ValueError("result_or_marginal: the law is empty")
        if not all(isinstance(k, numbers.Real) for k in result_or_marginal):
            raise ValueError("result_or_marginal: the values of a law must be numbers, got "
                             f"{[k for k in result_or_marginal if not isinstance(k, numbers.Real)][:3]}")
        x = np.array(sorted(result_or_marginal), dtype=float)
        p = _vector([result_or_marginal[k] for k in sorted(result_or_marginal)], "result_or_marginal")
    else:
        p = _vector(result_or_marginal, "result_or_marginal")
        x = np.arange(p.size, dtype=float)
    b = _bound(bound, p.size)
    log = _check_log(log, p, "result_or_marginal")
    with _axes(ax) as ax:
        if log:
            _log_y(ax, p)
        ax.plot(x, p, "o-" if p.size <= 60 else "-", markersize=2.5, label=label)
        if b is not None and (b > 0).any():
            _band(ax, x, p, b, log)
        ax.set_xlabel(xlabel or (f"x (value of {name})" if name else "x"))
        ax.set_ylabel(ylabel or (f"P({name} = x)" if name else "probability P(X = x)"))
        if label is not None or b is not None:
            ax.legend()
    return ax


# ---------------------------------------------------------------------------
# curves against time: a transient measure, a first-passage distribution
# ---------------------------------------------------------------------------
def _same_times(times, t, what: str) -> np.ndarray:
    t = np.atleast_1d(np.asarray(t, dtype=float))
    if times is not None:
        given = _vector(np.atleast_1d(times), "times")
        if given.shape != t.shape or not np.array_equal(given, t):
            raise ValueError(f"times: differ from the times of the {what} ({t.size} points from {t[0]:g}); "
                             "pass times=None to use the result's")
    return t


def _measure_curve(times, res, what: str):
    """``(t, values, bound, default label)`` of a measure result over several times."""
    if res.value is None:
        raise ValueError(f"{what}: the result has no value from an initial law (the chain has no "
                         "initial state)")
    t = _same_times(times, res.t, "result")
    v = _vector(np.atleast_1d(res.value), what, n=t.size)
    return t, v, res.error_bound, _MEASURE_LABELS.get(str(res.message).split(":")[0], "measure")


def _curve_data(times, values, reward, what: str):
    """``(t, values, bound, default label)`` from the inputs of :func:`transient`."""
    if hasattr(values, "p") and hasattr(values, "expect"):                 # a TransientResult
        if reward is None:
            raise ValueError("reward: a TransientResult needs the reward r whose E[r(X_t)] is drawn")
        from .sets import owned_values
        t = _same_times(times, values.t, "result")
        v = _vector(np.atleast_1d(values.expect(reward)), what, n=t.size)
        bound = None
        # |E err| <= ||p err||_1 max|r| (a chain's named reward: no band)
        if not isinstance(reward, str):
            r = owned_values(reward, values.states, np.shape(values.p)[-1], name="reward", finite=True)
            bound = values.error_bound * float(np.abs(r).max(initial=0.0))
        return t, v, bound, r"$E[r(X_t)]$"
    if reward is not None:
        raise ValueError("reward: only for a TransientResult (a measure result is already a number per time)")
    if hasattr(values, "value") and hasattr(values, "error_bound"):        # a MeasureResult
        return _measure_curve(times, values, what)
    if isinstance(values, (list, tuple)) and values and all(hasattr(r, "error_bound") for r in values):
        if times is None:
            raise ValueError(f"times: required with a list of results (one per time); got {what} only")
        t = _vector(times, "times", n=len(values))
        return t, _vector([float(r) for r in values], what), [r.error_bound for r in values], "measure"
    if times is None:
        raise ValueError(f"times: required with an array of {what}")
    t = _vector(times, "times")
    return t, _vector(values, what, n=t.size), None, "value"


def _draw_curve(ax, t, v, b, *, log, label, xlabel, ylabel):
    with _axes(ax) as ax:
        if log:
            _log_y(ax, v)
        ax.plot(t, v, "-", label=label)
        if b is not None and (b > 0).any():
            _band(ax, t, v, b, log)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        if label is not None or (b is not None and (b > 0).any()):
            ax.legend()
    return ax


def transient(times, values_or_results, *, reward=None, bound=None, quantity=None, log: bool = False, ax=None,
              label=None, xlabel=None):
    r"""Draw a measure against time, :math:`t \mapsto m(t)`, with its error band.

    Parameters
    ----------
    times : array_like or None
        The times; None to take them from a result.
    values_or_results : array_like, result or list of results
        The values at ``times``; a :class:`~ctmc.MeasureResult` over several
        times (``chain.prob_within(A, t)``, ``chain.cumulative_reward(r, t)``,
        :func:`ctmc.measures.expected_at`); a :class:`~ctmc.TransientResult`
        with ``reward`` (draws :math:`E[r(X_t)]`); or one result per time
        (anything with ``float(r)`` and ``r.error_bound``).
    reward : array_like, number or expression, optional
        With a TransientResult: the reward :math:`r`; its band is the 1-norm
        bound of the law times :math:`\max|r|` (no band for a reward given by
        name).
    bound : float or array_like, optional
        Absolute error bound per time (default: the results' ``error_bound``).
    quantity : str, optional
        The y label (default from the result: :math:`P(T_A \le t)`, ...).
    log : bool
        Logarithmic y axis.
    ax : matplotlib Axes, optional
    label : str, optional
        Legend entry of the curve.
    xlabel : str, optional
        Default ``"time t"``.

    Returns
    -------
    matplotlib.axes.Axes
    """
    t, v, b0, default = _curve_data(times, values_or_results, reward, "values_or_results")
    b = _bound(b0 if bound is None else bound, t.size)
    log = _check_log(log, v, "values_or_results")
    return _draw_curve(ax, t, v, b, log=log, label=label, xlabel=xlabel or "time t",
                       ylabel=quantity or default)


def _source_row(res, source) -> int:
    """Row of ``res.sources`` for ``source`` (a state index or ``{var: value}``)."""
    sources = np.asarray(res.sources)
    if source is None:
        if sources.size == 1:
            return 0
        raise ValueError(f"source: the result has {sources.size} source states; name one (an index or "
                         "{var: value}), or ask first_passage(..., sources=...) for one")
    if isinstance(source, dict):
        if res.states is None:
            raise ValueError("source: this result has no state table; give a state index")
        source = res.states.index(**source)
    if not isinstance(source, (int, np.integer)) or isinstance(source, bool):
        raise ValueError(f"source: expected a state index or {{var: value}}, got {source!r}")
    rows = np.flatnonzero(sources == int(source))
    if rows.size == 0:
        raise ValueError(f"source: state {int(source)} is not one of the result's {sources.size} sources")
    return int(rows[0])


def passage_cdf(result_or_law, times=None, *, source=None, survival: bool = False, bound=None, quantity=None,
                log: bool = False, ax=None, label=None, xlabel=None):
    r"""Draw the distribution of a first-passage time, :math:`t \mapsto P(T_A \le t)`, with its error band.

    Parameters
    ----------
    result_or_law : result, phase-type law or array_like
        A :class:`~ctmc.FirstPassageResult` computed with ``t=`` (the row of
        ``source``, summed over the entrance states: :math:`P_i(T_A \le t)`);
        a :class:`~ctmc.MeasureResult` of ``chain.prob_within(A, t)`` (from the
        initial law); a :class:`ctmc.ph.PhaseType` evaluated at ``times``; or
        the CDF values at ``times``.
    times : array_like, optional
        Required for a law or values; must equal a result's times if given.
    source : int or dict, optional
        The starting state of a FirstPassageResult with several sources.
    survival : bool
        Draw :math:`P(T > t)` instead: only for a phase-type law, whose
        :meth:`~ctmc.ph.PhaseType.sf` keeps relative accuracy deep in the tail
        (``1 - F`` would not).
    bound : float or array_like, optional
        Absolute error bound (default the result's ``error_bound``, the
        uniformisation truncation: none for a law, computed exactly).
    quantity : str, optional
        The y label (default :math:`P(T_A \le t)`).
    log : bool
        Logarithmic y axis (small probabilities at short times, or tails).
    ax, label, xlabel
        As for :func:`transient`.

    Returns
    -------
    matplotlib.axes.Axes
    """
    what = "result_or_law"
    if survival and not hasattr(result_or_law, "sf"):
        raise ValueError("survival: only for a phase-type law (its sf is computed directly); 1 - F of a "
                         "result loses the relative accuracy of a small tail")
    default = r"$P(T_A > t)$" if survival else r"$P(T_A \leq t)$"
    if hasattr(result_or_law, "cdf") and hasattr(result_or_law, "sources"):     # a FirstPassageResult
        if result_or_law.cdf is None:
            raise ValueError(f"{what}: the FirstPassageResult has no CDF; compute it with "
                             "first_passage(..., t=...)")
        t = _same_times(times, result_or_law.t, "result")
        cdf = np.asarray(result_or_law.cdf, dtype=float).reshape(t.size, len(result_or_law.sources), -1)
        v = cdf[:, _source_row(result_or_law, source), :].sum(axis=-1)
        b0 = result_or_law.error_bound
    elif hasattr(result_or_law, "sf") and hasattr(result_or_law, "n_phases"):  # a phase-type law
        if times is None:
            raise ValueError("times: required to evaluate a phase-type law")
        t = _vector(times, "times")
        v = result_or_law.sf(t) if survival else result_or_law.cdf(t)
        b0 = None
    else:
        t, v, b0, _ = _curve_data(times, result_or_law, None, what)
    if source is not None and not hasattr(result_or_law, "sources"):
        raise ValueError("source: only for a FirstPassageResult (a result with several source states)")
    b = _bound(b0 if bound is None else bound, t.size)
    log = _check_log(log, v, what)
    return _draw_curve(ax, t, v, b, log=log, label=label, xlabel=xlabel or "time t",
                       ylabel=quantity or default)


# ---------------------------------------------------------------------------
# a sweep: one measure against a parameter
# ---------------------------------------------------------------------------
def _records(frame_or_records) -> list:
    if isinstance(getattr(frame_or_records, "records", None), list):     # what ctmc.sweep returns
        frame_or_records = frame_or_records.records
    if hasattr(frame_or_records, "to_dict") and hasattr(frame_or_records, "columns"):
        return frame_or_records.to_dict("records")
    if isinstance(frame_or_records, (list, tuple)) and all(isinstance(r, dict) for r in frame_or_records):
        return list(frame_or_records)
    raise ValueError("frame_or_records: expected what ctmc.sweep returns, a pandas DataFrame or a list of "
                     f"dicts (one per grid point and measure), got {type(frame_or_records).__name__}")


def _sweep_lines(rows, x, y, by) -> tuple:
    """``(y, {by value: rows sorted by x})`` after checking the columns; errors name the argument."""
    if not rows:
        raise ValueError("frame_or_records: the sweep has no rows")
    columns = set().union(*rows)
    params = sorted(columns - set(SWEEP_COLUMNS))
    for need in ("measure", "value"):
        if need not in columns:
            raise ValueError(f"frame_or_records: no column {need!r} (long format: the parameters and "
                             f"{', '.join(SWEEP_COLUMNS)})")
    for arg, name in (("x", x), ("by", by)):
        if name is not None and name not in params:
            raise ValueError(f"{arg}: {name!r} is not a parameter of the sweep; its parameters are {params}")
    measures = list(dict.fromkeys(r["measure"] for r in rows))
    if y is None:
        if len(measures) != 1:
            raise ValueError(f"y: the sweep has {len(measures)} measures {measures}; choose one")
        y = measures[0]
    elif y not in measures:
        raise ValueError(f"y: {y!r} is not a measure of the sweep; its measures are {measures}")
    rows = [r for r in rows if r["measure"] == y]
    lines = {}
    for r in rows:
        lines.setdefault(None if by is None else r[by], []).append(r)
    for key, group in lines.items():
        xs = [r[x] for r in group]
        if not all(isinstance(v, numbers.Real) for v in xs):
            raise ValueError(f"x: the parameter {x!r} must be numeric, got {[v for v in xs][:3]}")
        if len(set(xs)) != len(xs):
            varying = [p for p in params if p not in (x, by) and len({repr(r.get(p)) for r in group}) > 1]
            raise ValueError(f"by: several rows of measure {y!r} at the same {x}" +
                             ("" if by is None else f" and {by} = {key!r}") +
                             f"; the parameters {varying} also vary: give one of them as by= or select rows")
        group.sort(key=lambda r: r[x])
    return y, dict(sorted(lines.items(), key=lambda kv: (kv[0] is None, kv[0])))


def sweep(frame_or_records, x, y=None, by=None, *, relative: bool = False, log: bool = False,
          logx: bool = False, ax=None, quantity=None):
    """Draw a measure of a sweep against one parameter, with error bars from the bounds.

    Parameters
    ----------
    frame_or_records : pandas.DataFrame or list of dict
        The sweep in long format: a column per parameter and the columns
        ``measure``, ``value``, ``error_bound``, ``status``, ``method``,
        ``seconds`` (one row per grid point and measure; what
        :func:`ctmc.sweep` returns).
    x : str
        The parameter on the horizontal axis (numeric).
    y : str, optional
        The measure drawn (required when the sweep has several).
    by : str, optional
        A parameter with one line per value; the rows must then be one per
        ``(x, by)`` point (other varying parameters are refused, naming them).
    relative : bool
        The ``error_bound`` column bounds the relative error (bars
        ``|value| * error_bound``); default absolute (bars ``error_bound``).
    log, logx : bool
        Logarithmic y, x axis.
    ax : matplotlib Axes, optional
    quantity : str, optional
        The y label (default the measure's name).

    Returns
    -------
    matplotlib.axes.Axes
        One errorbar line per value of ``by``: filled markers for the rows
        whose ``status`` is ``"success"``, hollow markers for the others,
        and a cross at the foot of the axes for a row without a finite value.
    """
    rows = _records(frame_or_records)
    if not isinstance(x, str):
        raise ValueError(f"x: expected the name of a parameter column, got {x!r}")
    y, lines = _sweep_lines(rows, x, y, by)
    kind = "relative" if relative else "absolute"
    with _axes(ax) as ax:
        if log:
            _log_y(ax, np.array([r["value"] for g in lines.values() for r in g if r["value"] is not None],
                                dtype=float))
        if logx:
            ax.set_xscale("log")
        failed_label = "not a success (hollow)"
        for key, group in lines.items():
            xv = np.array([r[x] for r in group], dtype=float)
            v = np.array([np.nan if r["value"] is None else r["value"] for r in group], dtype=float)
            eb = np.array([np.nan if r.get("error_bound") is None else r["error_bound"] for r in group],
                          dtype=float)
            err = np.abs(v) * eb if relative else eb
            err = np.where(np.isfinite(err) & (err >= 0), err, np.nan)
            ok = np.array([str(getattr(r.get("status", "success"), "value", r.get("status"))) == "success"
                           for r in group])
            label = None if by is None else f"{by} = {key}"
            cont = ax.errorbar(xv, v, yerr=None if np.isnan(err).all() else err, fmt="-", label=label)
            color = cont.lines[0].get_color()
            ax.plot(xv[ok], v[ok], "o", color=color)
            bad = ~ok & np.isfinite(v)
            if bad.any():
                ax.plot(xv[bad], v[bad], "o", mfc="none", mec=color, label=failed_label)
                failed_label = None
            missing = ~np.isfinite(v)
            if missing.any():       # no value to place: a cross at the foot of the axes, at its x
                ax.plot(xv[missing], np.full(missing.sum(), 0.03), "x", color=color, clip_on=False,
                        transform=ax.get_xaxis_transform(), label="no value")
        ax.set_xlabel(x)
        ax.set_ylabel(f"{quantity or y} ± {kind} bound")
        if by is not None or failed_label is None or any(h.get_label() == "no value" for h in ax.lines):
            ax.legend()
    return ax


# ---------------------------------------------------------------------------
# the mean-field error against N
# ---------------------------------------------------------------------------
def loglog_fit(N, errors) -> tuple:
    r"""Least-squares line of :math:`\log e` against :math:`\log N`: ``(slope, intercept)``.

    :math:`e \approx e^{a} N^{b}`, with :math:`(a, b)` minimising
    :math:`\sum_k (\log e_k - a - b \log N_k)^2` over the points with
    :math:`e_k > 0` (a zero error, an exact answer, has no logarithm).

    Examples
    --------
    >>> slope, intercept = loglog_fit([10, 20, 40], [0.3, 0.15, 0.075])
    >>> round(slope, 12), round(float(np.exp(intercept)), 12)
    (-1.0, 3.0)
    """
    n = _vector(N, "N", positive=True)
    e = np.asarray(_vector(errors, "errors", n=n.size))
    keep = e > 0
    if np.unique(n[keep]).size < 2:
        raise ValueError(f"errors: a slope needs errors > 0 at two sizes N or more, got {e.tolist()}")
    u, w = np.log(n[keep]), np.log(e[keep])
    du = u - u.mean()
    slope = float(du @ (w - w.mean()) / (du @ du))
    return slope, float(w.mean() - slope * u.mean())


def meanfield_error(N, errors, *, relative: bool = False, quantity=None, ax=None, xlabel=None,
                    fit: bool = True):
    r"""Draw :math:`|E_N - \hat E|` against :math:`N` on log-log axes, with fitted slopes.

    Parameters
    ----------
    N : array_like of numbers > 0
        The system sizes.
    errors : array_like or dict of str to array_like
        The errors at each ``N`` (one series, called ``"mean field"``), or one
        series per approximation (``{"mean field": e1, "refined": e2}``).
        Zero errors leave a gap (they have no logarithm).
    relative : bool
        The errors are relative (``|E_N - mean field| / |E_N|``); default absolute.
    quantity : str, optional
        What ``E_N`` is (``"mean jobs per server"``), put before the y label.
    ax : matplotlib Axes, optional
    xlabel : str, optional
        Default ``"N"``.
    fit : bool
        Draw the least-squares line of each series (:func:`loglog_fit`,
        dashed) and give its slope in the legend.

    Returns
    -------
    matplotlib.axes.Axes
    """
    n = _vector(N, "N", positive=True)
    series = dict(errors) if isinstance(errors, dict) else {"mean field": errors}
    if not series:
        raise ValueError("errors: no series given")
    series = {str(k): _vector(e, f"errors[{k!r}]" if isinstance(errors, dict) else "errors", n=n.size)
              for k, e in series.items()}
    for k, e in series.items():
        if (e < 0).any() or not (e > 0).any():
            raise ValueError(f"errors: the series {k!r} needs errors >= 0 with one > 0 at least, "
                             f"got {e.tolist()}")
    fits = {k: loglog_fit(n, e) if fit and np.unique(n[e > 0]).size >= 2 else None for k, e in series.items()}
    what = next(iter(series)) if len(series) == 1 else "approx."
    ylabel = f"|E_N - {what}| / |E_N| (relative)" if relative else f"|E_N - {what}| (absolute)"
    with _axes(ax) as ax:
        ax.set_xscale("log")
        ax.set_yscale("log", nonpositive="mask")
        for k, e in series.items():
            line, = ax.plot(n, e, "o-", label=k if fits[k] is None else f"{k} (slope {fits[k][0]:.2f})")
            if fits[k] is not None:
                slope, icpt = fits[k]
                ax.plot(n, np.exp(icpt) * n ** slope, "--", color=line.get_color(), linewidth=0.7)
        if n.size <= 8:     # the sizes themselves as ticks, not 2x10^1 3x10^1 ... on top of each other
            ax.set_xticks(n, [f"{v:g}" for v in n])
            ax.xaxis.set_minor_formatter("")
        ax.set_xlabel(xlabel or "N")
        ax.set_ylabel(ylabel if quantity is None else f"{quantity}\n{ylabel}")
        ax.legend()
    return ax


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def save(fig_or_ax, path, *, dpi: int = 300) -> pathlib.Path:
    """Write the figure of ``fig_or_ax`` to ``path``: vector by default.

    Parameters
    ----------
    fig_or_ax : matplotlib Figure or Axes
    path : str or path-like
        The file; its extension chooses the format: ``.pdf``, ``.svg``,
        ``.eps``, ``.ps`` (vector), ``.png`` (raster, at ``dpi``); without an
        extension ``.pdf`` is added. The folder is created if missing.
    dpi : int
        Resolution of a png (and of images inside a vector file).

    Returns
    -------
    pathlib.Path
        The file written.
    """
    fig = getattr(fig_or_ax, "figure", None) if not hasattr(fig_or_ax, "savefig") else fig_or_ax
    if fig is None or not hasattr(fig, "savefig"):
        raise ValueError(f"fig_or_ax: expected a matplotlib Figure or Axes, got {type(fig_or_ax).__name__}")
    path = pathlib.Path(path)
    if path.suffix == "":
        path = path.with_suffix(".pdf")
    if path.suffix.lower() not in VECTOR + RASTER:
        raise ValueError(f"path: {str(path)!r} has the extension {path.suffix!r}; expected one of "
                         f"{', '.join(VECTOR + RASTER)} (vector unless .png)")
    if isinstance(dpi, bool) or not isinstance(dpi, numbers.Integral) or dpi <= 0:
        raise ValueError(f"dpi: expected a whole number > 0, got {dpi!r}")
    if getattr(fig, "ctmc_plot_style", False):     # fonts embedded as TrueType, SVG text as text: set
        with style():                               # when the file is written, not when drawn
            return save_figure(fig, path.parent, path.name, dpi=int(dpi), say=None)
    return save_figure(fig, path.parent, path.name, dpi=int(dpi), say=None)
