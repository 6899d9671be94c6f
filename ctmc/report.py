"""Plain-text tables for reports, command lines, examples and benchmarks.

One table printer for the whole project, on top of :mod:`tabulate` (a small,
well-kept library), so every table ctmc prints has the same look.

Examples
--------
>>> from ctmc.report import format_table
>>> print(format_table([["a", 1.5], ["bb", 2.25]], ["name", "value"]))
name      value
------  -------
a           1.5
bb         2.25
"""
from __future__ import annotations

from typing import Iterable, Sequence

__all__ = ["format_table"]


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
