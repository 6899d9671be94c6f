"""Tables and figures for reports, command lines, examples and benchmarks.

One table printer for the whole project, on top of :mod:`tabulate` (a small,
well-kept library), so every table ctmc prints has the same look; and one way
to ask for figures and to write them: the option ``--plots DIR``
(:func:`add_plots_argument`), a matplotlib figure that needs no GUI and leaves
pyplot's state alone (:func:`new_figure`), and :func:`save_figure`, which
writes the figure into ``DIR`` (created if missing) and says where. Without
``--plots`` nothing is drawn, and matplotlib (the ``plot`` extra) is not needed.

Examples
--------
>>> from ctmc.report import format_table
>>> print(format_table([["a", 1.5], ["bb", 2.25]], ["name", "value"]))
name      value
------  -------
a           1.5
bb         2.25

A script that draws figures only when asked::

    ap = argparse.ArgumentParser()
    add_plots_argument(ap)
    args = ap.parse_args()
    ...
    if args.plots:
        fig = new_figure(figsize=(5, 4))
        fig.subplots().plot(x, y)
        save_figure(fig, args.plots, "curve.png")   # prints "figure written: DIR/curve.png"
"""
from __future__ import annotations

import pathlib
from typing import Callable, Iterable, Sequence

__all__ = ["format_table", "add_plots_argument", "new_figure", "save_figure", "PLOT_INSTALL_HELP"]

#: What to do when matplotlib is missing.
PLOT_INSTALL_HELP = "figures need matplotlib: pip install 'ctmc-exact[plot]' (or pip install matplotlib)"


def _fmt(value, floatfmt):
    if isinstance(value, float):
        return format(value, floatfmt)
    return str(value)


def _numeric(text: str) -> bool:
    try:
        float(text.replace("%", "").replace(",", ""))
    except ValueError:
        return text.strip() in ("-", "nan", "inf", "-inf")
    return True


def format_table(rows: Iterable[Sequence], headers: Sequence[str], *, floatfmt: str = "g",
                 title: str | None = None) -> str:
    """Format ``rows`` under ``headers`` as an aligned plain-text table.

    Parameters
    ----------
    rows : iterable of sequences
        One sequence of cells per row; numbers are right-aligned, text left.
    headers : sequence of str
    floatfmt : str
        Format of float cells that are not already strings (``"g"``, ``".3e"``, ...).
    title : str, optional
        A line printed above the table.

    Returns
    -------
    str
    """
    from tabulate import tabulate

    cells = [[c if isinstance(c, str) else _fmt(c, floatfmt) for c in r] for r in rows]
    ncol = len(headers)
    align = ["right" if cells and all(_numeric(r[j]) for r in cells if j < len(r) and r[j] != "") else "left"
             for j in range(ncol)]
    # cells are strings already: no re-parsing, so pre-formatted numbers keep their digits
    out = tabulate(cells, headers=list(headers), tablefmt="simple", disable_numparse=True, colalign=align)
    return out if title is None else f"{title}\n{out}"


def add_plots_argument(parser, *, what: str = "the figures") -> None:
    """Add the option ``--plots DIR`` to an :mod:`argparse` parser.

    The one spelling of the option for ``ctmc report``, the model families'
    commands and the examples; ``args.plots`` is ``None`` when it is not given,
    and then no figure should be made.

    Parameters
    ----------
    parser : argparse.ArgumentParser
    what : str
        What is written, for the help text (``"the figures"``, ``"jsq_ordering.png"``).

    Examples
    --------
    >>> import argparse
    >>> ap = argparse.ArgumentParser()
    >>> add_plots_argument(ap)
    >>> ap.parse_args(["--plots", "figs"]).plots, ap.parse_args([]).plots
    ('figs', None)
    """
    parser.add_argument("--plots", metavar="DIR", default=None,
                        help=f"write {what} to DIR (created if missing; needs matplotlib); "
                             "without it no figure is made")


def new_figure(**kwargs):
    """Return a new :class:`matplotlib.figure.Figure`, detached from pyplot.

    The figure has no window and no global state: it works on a machine
    without a display, does not switch the user's matplotlib backend, and is
    freed with its last reference (there is nothing to close). Keyword
    arguments go to ``Figure`` (``figsize``, ``layout``, ...); draw with
    ``fig.subplots()`` and write with :func:`save_figure`.

    Raises
    ------
    ImportError
        When matplotlib is not installed, saying how to install it.
    """
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ImportError(PLOT_INSTALL_HELP) from exc
    return Figure(**kwargs)


def figure_for(plots_dir, **kwargs):
    """``(fig, ax)``: a detached figure with one axes when ``--plots`` gave a folder, else ``(None, None)``."""
    if not plots_dir:
        return None, None
    fig = new_figure(**kwargs)
    return fig, fig.subplots()


def save_figure(fig, plots_dir, name: str, *, dpi: int = 110,
                say: Callable[[str], object] | None = print) -> pathlib.Path:
    """Write ``fig`` to ``plots_dir/name``, creating the directory, and say where.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        Typically from :func:`new_figure`; the format follows the extension of
        ``name``. A figure made with pyplot is closed once written.
    plots_dir : str or path-like
        The directory given to ``--plots``; created with its parents if missing.
    name : str
        A file name (no directory part), such as ``"jsq_ordering.png"``.
    dpi : int
    say : callable or None
        Receives the line ``"figure written: <path>"`` (default :func:`print`;
        ``lines.append`` for code that returns its text; ``None`` for silence).

    Returns
    -------
    pathlib.Path
        The file written.
    """
    if not name or pathlib.PurePath(name).name != name:
        raise ValueError(f"name: a file name without a directory part, got {name!r}")
    path = pathlib.Path(plots_dir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    if getattr(getattr(fig, "canvas", None), "manager", None) is not None:   # a pyplot figure: free it
        import matplotlib.pyplot as plt
        plt.close(fig)
    if say is not None:
        say(f"figure written: {path}")
    return path
