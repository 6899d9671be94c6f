r"""The first queue-length equality of the two-queue JSQ model: time and common length.

Problem
-------
From an unequal state :math:`x < y` of the reduced chain (:mod:`models.jsq`),
let :math:`T = \inf\{t : x_t = y_t\}` and :math:`k = x_T` the common length
at that time. The joint law

.. math::

    E_{(x,y)}[e^{-sT};\, x_T = k], \qquad P_{(x,y)}(T \le t,\, x_T = k)

is a first passage into the equal states :math:`A = \{(k, k)\}`, computed by
:meth:`ctmc.CTMC.first_passage` (:func:`ctmc.passage.first_passage`: sparse
in-rates of :math:`A`, one factorisation per point ``s``, ``min(sources,
levels)`` solves, right-hand sides in blocks).

Shape of the answer
-------------------
While the queues differ the longest one never grows (an arrival joins the
shortest), so from :math:`(x, y)` the common length is at most :math:`y`,
and the states a source visits before :math:`T` are those with
:math:`l \le y`: one source sees :math:`y(y+1)/2` states at most, and a
source near the bottom of the chain very few (the solve is restricted to
them).

The law from *every* unequal state over *every* level :math:`k` has about
:math:`K^3/3` non-zero numbers (:math:`k \le y`, every :math:`k \le y`
possible): 21 GiB at :math:`K = 2000`, whatever the storage. So the answer
is asked for in one of two shapes, each one call:

* **per source** (``sources=``, few rows, every level): one transposed solve
  per source, rows of length :math:`K + 1`;
* **per level** (``levels=``, every source, few columns): one solve per
  level gives the column over every unequal state (the law of that level
  from everywhere, and its transform at ``s``); all levels are obtained
  block of levels by block of levels (:func:`level_blocks`), each block a
  ``states x len(block)`` array, one factorisation per block and point.

An answer above ``max_result_bytes`` (default 2 GiB, an option of
:func:`ctmc.passage.first_passage`) is refused before any work, with a
message naming ``sources`` and ``levels``.
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = ["first_equality", "level_blocks", "check_levels"]


def check_levels(K: int, levels):
    """``levels`` as a sorted array of distinct integers in ``[0, K]`` (None: every level).

    >>> check_levels(5, [3, 0, 3]).tolist()
    [0, 3]
    >>> check_levels(5, None).tolist()
    [0, 1, 2, 3, 4, 5]
    """
    if levels is None:
        return np.arange(K + 1)
    if isinstance(levels, numbers.Integral) and not isinstance(levels, bool):
        levels = [levels]
    try:
        arr = np.asarray(list(levels))
    except TypeError:
        raise ValueError(f"levels: expected an integer or integers in [0, {K}], got {levels!r}") from None
    if arr.size == 0:
        raise ValueError(f"levels: expected at least one integer in [0, {K}]")
    if arr.dtype == bool or arr.dtype.kind not in "iu" or arr.min() < 0 or arr.max() > K:
        raise ValueError(f"levels: expected integers in [0, {K}], got {levels!r}")
    return np.unique(arr.astype(np.int64))


def first_equality(q, s=None, t=None, sources=None, levels=None, **options):
    r"""Joint law of (time, common length) at the first equality of :class:`~models.jsq.JSQ2` ``q``.

    See :meth:`models.jsq.JSQ2.first_equality` (the method calls this).

    Parameters
    ----------
    q : JSQ2
    s, t : float or array_like, optional
        Transform points and times.
    sources : dict, list of dict, expression or callable, optional
        Starting states (default: every unequal state).
    levels : int or iterable of int, optional
        The common lengths :math:`k` whose columns are computed (default all
        :math:`0..K`). The passage is still into every equal state.
    **options
        Passed to :meth:`ctmc.CTMC.first_passage` (``method``, ``backend``,
        ``block_memory``, ``max_result_bytes``, solver options).

    Returns
    -------
    ctmc.FirstPassageResult
        Rows are the starting states (``result.sources``), columns the
        equal states ``(k, k)`` asked for (``result.targets``), in chain order.

    Examples
    --------
    >>> from ctmc.models.jsq import JSQ2
    >>> q = JSQ2(K=30, rho=0.9, mu2=0.3)
    >>> fp = first_equality(q, s=[0.0], sources={"s": 2, "l": 7})
    >>> fp.probabilities.shape, round(float(fp.probabilities.sum()), 12)
    ((1, 31), 1.0)
    >>> fp.info["n_reach"]             # the states with l <= 7, s < l: 28
    28
    >>> col = first_equality(q, levels=[0])       # P(first equality at 0) from every unequal state
    >>> col.probabilities.shape
    (465, 1)
    """
    ch = q.chain()
    lv = check_levels(q.K, levels)
    if sources is None:
        src = lambda e: e["s"] < e["l"]  # noqa: E731
    elif isinstance(sources, dict):
        src = [ch.index(**sources)]
    elif isinstance(sources, (list, tuple)) and sources and isinstance(sources[0], dict):
        src = [ch.index(**d) for d in sources]
    else:
        src = sources
    cols = None if levels is None else [ch.index(s=int(k), l=int(k)) for k in lv]
    return ch.first_passage(lambda e: e["s"] == e["l"], s=s, t=t, sources=src, targets=cols, **options)


def level_blocks(q, block: int, s=None, t=None, sources=None, levels=None, **options):
    """The first-equality law from the sources, ``block`` levels at a time (a generator).

    Yields ``(levels, result)`` pairs, ``result`` a :class:`ctmc.FirstPassageResult` whose
    columns are those levels: every level of ``levels`` (default all) once, in order. Meant
    for the law from every unequal state over every level (about ``K^3/3`` numbers), written
    out block by block (``np.save`` of ``result.probabilities``) instead of held at once.

    >>> from ctmc.models.jsq import JSQ2
    >>> q = JSQ2(K=6, rho=0.9, mu2=0.3)
    >>> parts = [r.probabilities for _, r in level_blocks(q, 4)]
    >>> [p.shape for p in parts]
    [(21, 4), (21, 3)]
    >>> round(float(sum(p.sum(axis=1) for p in parts).max()), 12)
    1.0
    """
    if isinstance(block, bool) or not isinstance(block, numbers.Integral) or block < 1:
        raise ValueError(f"block: expected an integer >= 1, got {block!r}")
    lv = check_levels(q.K, levels)
    for a in range(0, lv.size, int(block)):
        part = lv[a:a + int(block)]
        yield part, first_equality(q, s=s, t=t, sources=sources, levels=part, **options)
