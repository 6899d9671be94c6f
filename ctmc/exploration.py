r"""Exploration: the reachable states of a model, by the box, a breadth-first search or the compiled engine.

From the initial codes :math:`I`, the reachable set is the closure
:math:`S = \bigcup_{k \ge 0} S_k`, :math:`S_0 = I`, :math:`S_{k+1} = \{c + \delta_e(x) :
c \in S_k,\ g_e(x),\ r_e(x) > 0\}` (:mod:`ctmc.transitions`), numbered by
increasing code (:mod:`ctmc.encoding`). Three routes find it, all giving
the same chain (same numbering, same values to the bit): the *box* (every
event on every point of the bounding box, then a compiled breadth-first
search of the graph), the *search* (one vectorised expansion per frontier)
and the *compiled* search of :mod:`ctmc._compiled`; :func:`_choose_strategy`
weighs the first two by the cost model told in the :mod:`ctmc.model`
docstring, and the compiled engine goes first wherever it may. :func:`build`
then eliminates vanishing states (:mod:`ctmc.immediate`) and assembles the
generator (:mod:`ctmc.assembly`); :func:`reachable` finds the states only
and :func:`generator_rows` assembles a block of rows over a given numbering
(the distributed build).

**Rates on known states.** When only rates change (a parameter sweep), the
states of a chain built before can be kept: :func:`rebuild` assembles the
rows of the new model over the old states :math:`S_0` and keeps them when
(a) no transition leaves :math:`S_0` (it is closed, so :math:`S \subseteq
S_0`) and (b) every state of :math:`S_0` is reached from the initial states
in the new generator (:math:`S_0 \subseteq S`): then :math:`S = S_0`, in the
same numbering, and the rows are :func:`build`'s. :func:`structure_key` (the
variables, bounds, initial states, events' guards and updates) tells when to
try; the checks (a) and (b), not the key, make the answer right.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import hashlib

import numpy as np
import scipy.sparse as sp

from . import _compiled as compiled_builder
from ._util import Timer, check_memory, memory_limit
from .assembly import CodeIndex, DenseIndex, assemble
from .encoding import StateLayout
from .immediate import eliminate
from .progress import Progress
from .results import ModelError, StateSpaceTooLarge
from .transitions import expand

__all__ = ["Built", "build", "reachable", "generator_rows", "check_engine", "structure_key", "rebuild"]

_CHUNK = 1 << 18
_BOX_LIMIT = 6.0e7  # box points x events evaluated by the box strategy at most
#: box points whose expansion costs about as much as the fixed cost of one breadth-first level
#: (fit on JSQ K=2000, tandem c=511, polling N=15, cluster N=64: level 2-3e-5 s per event,
#: a point 1-2e-8 s per event)
_LEVEL_POINTS = 1500
_PROBE_LEVELS = 64  # build(strategy="auto"): a breadth-first search this deep before the box
_BITMAP_SHARE = 0.1  # state_space: a box bitmap when the box is at most this share of the memory limit


@dataclass(frozen=True, eq=False)
class Built:
    """What :func:`build` found: the chain's parts, before they become a :class:`~ctmc.CTMC`.

    ``codes`` are the sorted state codes in ``layout``, ``Q`` the generator,
    ``initial`` the indices of the initial states and ``info`` the chain's
    ``build_info`` (with ``initial_law`` when a vanishing initial state leads
    to several tangible ones).
    """

    codes: np.ndarray
    layout: StateLayout
    Q: sp.csr_matrix
    initial: np.ndarray
    info: dict


def check_engine(engine):
    """A ``ValueError`` unless ``engine`` is one of ``auto``, ``compiled``, ``numpy``."""
    engines = {"auto", "compiled", "numpy"}
    if engine not in engines:
        raise ValueError(f"engine: expected one of {sorted(engines)}, got {engine!r}")


def _choose_strategy(box: int, n_events: int, span_sum: int) -> tuple:
    """``("box" | "bfs", why)`` for ``build(strategy="auto")`` (the cost model of the :mod:`ctmc.model` docstring).

    >>> _choose_strategy(4_004_001, 7, 4002)[0]       # JSQ K=2000: a deep grid, box twice the reachable set
    'box'
    >>> _choose_strategy(2_163_200, 15, 148)[0]       # cluster N=64: box 14 x the reachable set, shallow
    'bfs'
    """
    if box * n_events > _BOX_LIMIT:
        return "bfs", f"box x events = {box * n_events:.3g} > {_BOX_LIMIT:.3g}"
    if box > _LEVEL_POINTS * span_sum:
        return "bfs", (f"box of {box} points > {_LEVEL_POINTS} x {span_sum} (sum of spans, a bound on the "
                       "search depth): the search is cheaper")
    return "box", f"box of {box} points <= {_LEVEL_POINTS} x {span_sum} (sum of spans): a deep, dense chain"


def build(model, initial=None, *, strategy: str = "auto", max_memory=None, max_states: Optional[int] = None,
          progress=None, engine: str = "auto") -> "Built":
    """The reachable states and the generator of :meth:`ctmc.Model.build` (same parameters, same errors).

    The route (box, search, compiled search) is chosen as the module
    docstring says; a model with immediate moves has its vanishing states
    eliminated (:func:`ctmc.immediate.eliminate`).
    """
    strategies = {"auto", "box", "bfs"}
    if strategy not in strategies:
        raise ValueError(f"strategy: expected one of {sorted(strategies)}, got {strategy!r}")
    check_engine(engine)
    if engine == "compiled" and strategy == "box":
        raise ValueError("engine='compiled' searches breadth-first: give strategy='bfs' or 'auto'")
    layout, limit, init, box, n_ev = _prepare(model, initial, max_states, max_memory)
    reason = "asked for"
    probed = compiled = None
    auto = strategy == "auto"
    with Timer() as timer:
        prog = Progress(f"building {model.name}", progress)
        if auto:
            strategy, reason = _choose_strategy(box, n_ev, int(layout.span.sum()))
            chosen = strategy
        if auto or strategy == "bfs":
            # the compiled search first (numpy's box stays the choice for heavy expressions on
            # a box-shaped chain, where it is faster)
            compiled = _compiled_or_none(model, engine, lambda c: c.explore(
                model, layout, init, max_states=max_states, limit=limit,
                progress=lambda n: prog.update(f"{n} states found"),
                box_alternative=engine == "auto" and strategy == "box"))
        if compiled is not None:
            codes, Q, n_trans = compiled
            prog.update(f"{codes.size} states found")
            if auto:
                strategy, reason = "bfs", (f"compiled breadth-first search (the cost model chose {chosen}: "
                                           f"{reason})")
            initial, extra = np.searchsorted(codes, init), {}
        else:
            if strategy == "box" and auto:
                # a box far larger than the reachable set (a capacity beyond reach) costs
                # its size: a short breadth-first search finds a small chain first
                try:
                    probed = _build_bfs(model, init, layout, prog, limit, max_states, max_levels=_PROBE_LEVELS)
                except (StateSpaceTooLarge, ModelError):
                    probed = None       # the box decides (its own guards apply), as before the probe
                if probed is not None:
                    strategy, reason = "bfs", (f"the search ended within {_PROBE_LEVELS} levels "
                                               f"(the box of {box} points was not needed)")
            if probed is not None:
                codes, src, dst, rate, van = probed
            elif strategy == "box":
                check_memory(box * (n_ev * 40 + 16), limit, f"exploring the {box}-point box of {model.name!r}")
                codes, src, dst, rate, van = _build_box(model, init, layout, prog, max_states)
            else:
                codes, src, dst, rate, van = _build_bfs(model, init, layout, prog, limit, max_states)
            initial, extra = np.searchsorted(codes, init), {}
            if van is not None:
                codes, src, dst, rate, initial, extra = eliminate(model, codes, layout, src, dst, rate, van, initial)
            Q = assemble(src, dst, rate, (codes.size, codes.size))
            n_trans = src.size
        n = codes.size
        prog.close(f"{n} states, {n_trans} transitions")
    info = {"strategy": strategy, "n_states": n, "n_transitions": int(n_trans),
            "seconds": timer.elapsed, "box": box, "strategy_reason": reason,
            "engine": "numpy" if compiled is None else "compiled", **extra}
    return Built(codes=codes, layout=layout, Q=Q, initial=initial, info=info)


def _compiled_or_none(model, engine, call):
    """``call(ctmc._compiled)`` where ``engine`` lets the compiled engine work, else ``None`` (numpy).

    ``None`` also where it cannot or does not finish; with
    ``engine="compiled"`` a model it cannot compile is a ``ValueError``.
    """
    if engine == "numpy":
        return None
    required = engine == "compiled"
    if model.calls_function and not required:
        return None
    try:
        return call(compiled_builder)
    except compiled_builder.NotCompilable as exc:
        if required:
            raise ValueError(f"engine='compiled': model {model.name!r} cannot be compiled: {exc}") from None
        return None


def _prepare(model, initial, max_states, max_memory):
    """Checks and layout shared by :func:`build` and :func:`reachable`.

    Returns ``(layout, memory limit, initial codes, box size, number of events)``.
    """
    if max_states is not None and not (isinstance(max_states, (int, np.integer)) and max_states > 0):
        raise ValueError(f"max_states: expected a positive integer, got {max_states!r}")
    if not model.events and not model.immediates:
        raise ModelError(f"model {model.name!r}: declare at least one event")
    layout = model.layout
    limit = memory_limit(max_memory)
    init = layout.initial_codes(initial)
    return layout, limit, init, layout.box, len(model.events) + len(model.immediates)


def _build_box(model, init, layout, prog, max_states):
    """``(codes, src, dst, rate, vanishing)``: the box expanded once, its reachable part kept."""
    codes, (src, dst, rate, van) = _reachable_box(model, init, layout, prog, max_states, keep=True)
    index = np.full(layout.box, -1, dtype=np.int64)
    index[codes] = np.arange(codes.size)
    src = index[src]
    mine = src >= 0                      # transitions out of reachable states (their targets are)
    return codes, src[mine], index[dst[mine]], rate[mine], (None if van is None else van[codes])


def _reachable_box(model, init, layout, prog, max_states, keep=False):
    """Sorted codes of the reachable states: the whole box expanded, then a compiled BFS.

    With ``keep``, also the box's transitions ``(src_code, dst_code, rate,
    vanishing over the box)``, checked on the reachable states as a strict
    expansion would have (the first offending state is expanded strictly
    for its message), so that the reachable ones need no second expansion.
    """
    box = layout.box
    srcs, dsts, rates, vans, oob_src = [], [], [], [], []
    for start in range(0, box, _CHUNK):
        codes = np.arange(start, min(box, start + _CHUNK), dtype=np.int64)
        s, d, r, oob, v = expand(model, codes, layout, strict=False)
        srcs.append(codes[s])
        dsts.append(d)
        if keep:
            rates.append(r)
            vans.append(v)
        oob_src.append(codes[oob])
        prog.update(f"box {min(box, start + _CHUNK)}/{box}")
    src = np.concatenate(srcs)
    dst = np.concatenate(dsts)
    del srcs, dsts
    # virtual root (index box) linked to every initial state; float data: csgraph's own type
    G = sp.csr_matrix((np.ones(src.size + init.size),
                       (np.concatenate([src, np.full(init.size, box, dtype=np.int64)]),
                        np.concatenate([dst, init]))), shape=(box + 1, box + 1))
    from scipy.sparse.csgraph import breadth_first_order
    order = breadth_first_order(G, box, directed=True, return_predecessors=False)
    del G
    reach = np.zeros(box + 1, dtype=bool)
    reach[order] = True
    reach[box] = False
    codes = np.flatnonzero(reach)
    if max_states is not None and codes.size > max_states:
        raise ModelError(f"model {model.name!r}: {codes.size} reachable states exceed max_states={max_states}")
    oob = np.concatenate(oob_src)
    bad = oob[reach[oob]]          # out-of-bounds moves and invalid rates, flagged by the lenient pass
    if keep:
        rate = np.concatenate(rates)
    if bad.size:
        # re-expand the first offending reachable state strictly, for the message
        expand(model, np.sort(bad)[:1], layout, strict=True)
    if not keep:
        return codes
    van = np.concatenate(vans) if model.immediates else None
    return codes, (src, dst, rate, van)


def _build_bfs(model, init, layout, prog, limit, max_states, max_levels=None):
    """Breadth-first exploration; ``None`` if it has not ended after ``max_levels`` frontiers."""
    # a sorted index while few states are known; a dense code -> index table over the
    # box once the states found are at least 1/64 of it (8 bytes a point: at most 512
    # bytes a state) and the box is small next to the memory limit
    box = layout.box
    dense_ok = box * 8 <= _BITMAP_SHARE * limit
    index = CodeIndex()
    index.add(init, np.arange(init.size))
    found = [init]
    n = init.size
    frontier, f0, n_trans, levels = init, 0, 0, 0
    srcs, dsts, rates, vans = [], [], [], []
    while frontier.size:
        levels += 1
        if max_levels is not None and levels > max_levels:
            return None
        if dense_ok and not isinstance(index, DenseIndex) and 64 * n >= box:
            index = DenseIndex(box)
            index.add(np.concatenate(found), np.arange(n))
        nxt = []
        for start in range(0, frontier.size, _CHUNK):
            c = frontier[start:start + _CHUNK]
            s, d, r, _, v = expand(model, c, layout, strict=True)
            srcs.append(s + f0 + start)
            rates.append(r)
            vans.append(v)
            nxt.append(d)
            n_trans += s.size
        f0 += frontier.size
        d_all = np.concatenate(nxt)
        if isinstance(index, DenseIndex):
            # one gather finds the new targets; their codes are mapped through the table at the end
            new = np.unique(d_all[index.lookup(d_all) < 0])
            index.add(new, np.arange(n, n + new.size))
            dsts.append((False, d_all))
        else:
            # the targets' discovery indices, found once per level (no search over all codes at the end)
            cand, inv = np.unique(d_all, return_inverse=True)
            idx = index.lookup(cand)
            fresh = idx < 0
            new = cand[fresh]
            idx[fresh] = np.arange(n, n + new.size)
            index.add(new, idx[fresh])
            dsts.append((True, idx[inv]))
        found.append(new)
        n += new.size
        frontier = new
        if max_states is not None and n > max_states:
            raise ModelError(f"model {model.name!r}: more than max_states={max_states} reachable states")
        # triplets of the transitions found so far, extrapolated to the states found, and
        # their CSR assembly (about 56 bytes a transition in all), plus codes and index
        check_memory(n * (64 + 56 * n_trans / max(f0, 1)), limit,
                     f"building {model.name!r} ({n} states so far)")
        prog.update(f"{n} states found")
    codes_disc = np.concatenate(found)
    if isinstance(index, DenseIndex):
        codes = np.flatnonzero(index.table >= 0)
        index.table[codes] = np.arange(codes.size)        # renumbered in code order
        rank = index.table[codes_disc]
    else:
        order = np.argsort(codes_disc, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        codes = codes_disc[order]
    # targets by discovery index (rank: to code order) or by code (the table, now in code order)
    dst = np.concatenate([rank[a] if disc else index.table[a] for disc, a in dsts]) if dsts \
        else np.empty(0, np.int64)
    src = rank[np.concatenate(srcs)] if srcs else np.empty(0, np.int64)
    rate = np.concatenate(rates) if rates else np.empty(0)
    van = None
    if model.immediates:            # in discovery order (each state expanded once), then by code
        van = np.zeros(codes.size, dtype=bool)
        van[rank] = np.concatenate(vans)
    return codes, src, dst, rate, van


def reachable(model, initial=None, *, max_states: Optional[int] = None, max_memory=None, progress=None,
              engine: str = "auto") -> tuple:
    """``(codes, layout)`` of :meth:`ctmc.Model.state_space` for a model without immediate moves.

    The sorted codes of the reachable states, by the compiled search, the box
    (a small one) or a frontier search that keeps codes only.
    """
    layout, limit, init, box, n_ev = _prepare(model, initial, max_states, max_memory)
    prog = Progress(f"exploring {model.name}", progress)
    found = _compiled_or_none(model, engine, lambda c: c.explore(
        model, layout, init, max_states=max_states, limit=limit, codes_only=True,
        progress=lambda n: prog.update(f"{n} states found")))
    if found is not None:
        codes = found[0]
        prog.close(f"{codes.size} states")
        return codes, layout
    if box * n_ev <= _BOX_LIMIT // 8:
        # small box: the compiled exploration of build's box strategy
        # (its edge list is at most a few hundred MB on every process)
        check_memory(box * (n_ev * 40 + 16), limit, f"exploring the {box}-point box of {model.name!r}")
        codes = _reachable_box(model, init, layout, prog, max_states)
        prog.close(f"{codes.size} states")
        return codes, layout
    # frontier by frontier; a one-byte-per-point bitmap when the box is
    # small next to the memory limit (every process of a node holds one)
    bitmap = box <= _BITMAP_SHARE * limit
    seen = np.zeros(box, dtype=bool) if bitmap else None
    if bitmap:
        seen[init] = True
    else:
        index = CodeIndex()
        index.add(init, np.arange(init.size))
        found = [init]
    n, frontier = init.size, init
    while frontier.size:
        nxt = []
        for start in range(0, frontier.size, _CHUNK):
            _, d, _, _, _ = expand(model, frontier[start:start + _CHUNK], layout, strict=True)
            nxt.append(d)
        cand = np.unique(np.concatenate(nxt)) if nxt else np.empty(0, np.int64)
        if bitmap:
            frontier = cand[~seen[cand]]
            seen[frontier] = True
        else:
            frontier = cand[index.lookup(cand) < 0]
            index.add(frontier, np.arange(n, n + frontier.size))
            found.append(frontier)
        n += frontier.size
        if max_states is not None and n > max_states:
            raise ModelError(f"model {model.name!r}: more than max_states={max_states} reachable states")
        if not bitmap:
            check_memory(n * 64, limit, f"exploring {model.name!r} ({n} states so far)")
        prog.update(f"{n} states found")
    codes = np.flatnonzero(seen).astype(np.int64) if bitmap else np.sort(np.concatenate(found))
    prog.close(f"{codes.size} states")
    return codes, layout


def generator_rows(model, states, start: int, stop: int, *, engine: str = "auto") -> sp.csr_matrix:
    """Rows ``start:stop`` of :meth:`ctmc.Model.generator_rows` (a model without immediate moves)."""
    codes, layout = getattr(states, "codes", None), getattr(states, "layout", None)
    if codes is None or layout is None or list(layout.names) != [v.name for v in model.variables]:
        raise ValueError("states: expected the state table of this model (from state_space or build)")
    n = codes.size
    if not (isinstance(start, (int, np.integer)) and isinstance(stop, (int, np.integer))
            and 0 <= start <= stop <= n):
        raise ValueError(f"start, stop: expected 0 <= start <= stop <= {n}, got {start!r}, {stop!r}")
    check_engine(engine)
    return _rows(model, codes, layout, start, stop, engine)[0]


def _rows(model, codes, layout, start, stop, engine) -> tuple:
    """``(rows, engine used)``: rows ``start:stop`` of the generator over the sorted ``codes``."""
    n = codes.size
    own = model.layout
    if np.array_equal(layout.lo, own.lo) and np.array_equal(layout.span, own.span):
        # (a table of other bounds: numpy checks the updates against the model's own)
        rows = _compiled_or_none(model, engine,
                                 lambda c: c.rows(model, layout, codes, start, stop, memory_limit(None)))
        if rows is not None:
            return rows, "compiled"
    srcs, dsts, rates = [], [], []
    for a in range(start, stop, _CHUNK):
        b = min(stop, a + _CHUNK)
        s, d, r, _, _ = expand(model, codes[a:b], layout, strict=True)
        col = np.searchsorted(codes, d)
        if col.size and ((col >= n) | (codes[np.minimum(col, n - 1)] != d)).any():
            raise ValueError("states: a transition leaves the given state table (not this model's "
                             "reachable set)")
        srcs.append(s + (a - start))
        dsts.append(col)
        rates.append(r)
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.empty(0, dt))
    Q = assemble(cat(srcs, np.int64), cat(dsts, np.int64), cat(rates, float), (stop - start, n), start)
    return Q, "numpy"


def structure_key(model, layout, init) -> Optional[str]:
    """A digest of what decides the reachable states of ``model`` besides its rates, or None.

    The variables and their bounds (``layout``), the initial codes ``init``,
    and each event's name, guard and update as text (constants written
    exactly, a user function by its name). Two models of one key usually
    have the same reachable states: :func:`rebuild` tries to keep them and
    checks. None for a model with immediate moves (their elimination mixes
    rows: no rows over known states).
    """
    if model.immediates:
        return None
    h = hashlib.sha256(repr((layout.names, layout.lo.tolist(), layout.span.tolist(),
                             np.asarray(init).tolist())).encode())
    for ev in model.events:
        h.update(repr((ev.name, repr(ev.guard), [(v.name, repr(u)) for v, u in ev.update])).encode())
    return h.hexdigest()


def rebuild(model, initial, previous, *, max_states: Optional[int] = None, max_memory=None,
            engine: str = "auto") -> Optional["Built"]:
    """The :class:`Built` of ``model`` on the states of chain ``previous``, its rates evaluated anew; or None.

    Where ``previous`` was built from a model of the same
    :func:`structure_key`, the rows of ``model`` over its states are
    assembled and kept when the checks (a) and (b) of the module docstring
    pass: the very chain :func:`build` would give (``info["reused"]`` is
    True). None otherwise (another structure, a transition leaving the
    states, a state no longer reached, anything raised on the way): then
    :func:`build` decides, with its own messages. A bad ``initial`` raises as
    for :func:`build`.
    """
    layout, limit, init, box, _ = _prepare(model, initial, max_states, max_memory)
    check_engine(engine)
    old, states = getattr(previous, "model", None), getattr(previous, "states", None)
    codes = getattr(states, "codes", None)
    if old is None or codes is None or previous.initial is None or model.immediates:
        return None
    if structure_key(model, layout, init) != structure_key(old, states.layout, codes[previous.initial]):
        return None
    if max_states is not None and codes.size > max_states:
        return None
    with Timer() as timer:
        try:
            Q, used = _rows(model, codes, layout, 0, codes.size, engine)
        except Exception:           # noqa: BLE001 - a transition leaving the states, a fault: build decides
            return None
        start = np.searchsorted(codes, init)
        if not _all_reached(Q, start):
            return None
    info = {"strategy": "reuse", "n_states": int(codes.size), "n_transitions": int(Q.nnz - np.count_nonzero(
            Q.diagonal())), "seconds": timer.elapsed, "box": box, "engine": used, "reused": True,
            "strategy_reason": "same structure as the chain given: its states kept, the rates evaluated anew"}
    return Built(codes=codes, layout=layout, Q=Q, initial=start, info=info)


def _all_reached(Q, start) -> bool:
    """Whether every state of ``Q`` is reached from the states ``start`` (by positive rates)."""
    from scipy.sparse.csgraph import breadth_first_order
    n = Q.shape[0]
    A = Q.tocoo()
    keep = (A.data > 0) & (A.row != A.col)
    G = sp.csr_matrix((np.ones(int(keep.sum()) + start.size),
                       (np.concatenate([A.row[keep], np.full(start.size, n)]),
                        np.concatenate([A.col[keep], start]))), shape=(n + 1, n + 1))
    return breadth_first_order(G, n, directed=True, return_predecessors=False).size == n + 1
