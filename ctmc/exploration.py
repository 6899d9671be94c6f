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
states of a chain built before, :math:`S_0`, and its moves can be kept:
:func:`rebuild` evaluates each event's guard and update once over
:math:`S_0` (a :class:`Structure`: the moves :math:`(i, j)` with their targets,
:math:`j = -1` outside :math:`S_0` or the bounds), then, for each new set of
rates, the rates alone on those moves. It keeps :math:`S_0` when (a) no move
of positive rate has :math:`j = -1` (:math:`S_0` is closed, so the new
reachable set :math:`S \subseteq S_0`) and (b) every state of :math:`S_0` is
reached from the initial states (:math:`S_0 \subseteq S`): then :math:`S =
S_0`, numbered alike, and the generator is :func:`build`'s to the bit
(duplicates summed in the order of the events, the diagonal as
:func:`ctmc.assembly.assemble` sums it). When the moves of positive rate are
those of the chain before, (b) holds without a search and the values are
poured into the known sparsity pattern. :func:`structure_key` (variables,
bounds, initial states, events' guards and updates) tells when to try; the
checks, not the key, make the answer right.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np
import scipy.sparse as sp

from . import _compiled as compiled_builder
from ._util import Timer, check_memory, memory_limit
from .assembly import CodeIndex, DenseIndex, assemble
from .encoding import StateLayout
from .expr import as_expr, calls_function, exact_text
from .immediate import eliminate
from .progress import Progress
from .results import ModelError, StateSpaceTooLarge
from .transitions import expand, fire, rate_where

__all__ = ["Built", "build", "reachable", "generator_rows", "check_engine", "Structure", "structure_key",
           "rebuild"]

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
    own = model.layout
    if np.array_equal(layout.lo, own.lo) and np.array_equal(layout.span, own.span):
        # (a table of other bounds: numpy checks the updates against the model's own)
        rows = _compiled_or_none(model, engine, lambda c: c.rows(model, layout, codes, start, stop, memory_limit(None)))
        if rows is not None:
            return rows
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
    return assemble(cat(srcs, np.int64), cat(dsts, np.int64), cat(rates, float), (stop - start, n), start)


# ---- rates on known states (module docstring) --------------------------------------------------------

@dataclass(frozen=True, eq=False, repr=False)
class Structure:
    """The moves of a model over known states, without their rates (see :func:`rebuild`).

    ``src``, ``dst``: for each event in the model's order (``stops`` bound
    them), the states where its guard holds and the move changes the state,
    and the target's index (-1: outside the states or the bounds, allowed at
    rate 0 only). ``pattern``: for the chain these were last used for, which
    moves had a positive rate and where their values go in its generator,
    or None. ``loops``, ``loop_stops``: the states where an event's guard
    holds and its move leaves the state as it is (no transition, but its
    rate is still checked, as a fresh build checks it).
    """

    key: str
    src: np.ndarray
    dst: np.ndarray
    stops: tuple
    pattern: Optional[dict] = None
    loops: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    loop_stops: tuple = ()

    def __repr__(self) -> str:
        return f"Structure({self.src.size} moves of {len(self.stops) - 1} events)"


def structure_key(model, layout, init) -> Optional[str]:
    """A digest of what decides the reachable states of ``model`` besides its rates, or None.

    The variables and their bounds (``layout``), the initial codes ``init``,
    and each event's name, guard and update as text (constants written
    exactly). None for a model with immediate moves (eliminated with their
    weights) or a guard or update calling a user function (known by its name
    only).
    """
    if model.immediates or any(calls_function(e) for ev in model.events
                               for e in (ev.guard, *(u for _, u in ev.update))):
        return None
    h = hashlib.sha256(repr((layout.names, layout.lo.tolist(), layout.span.tolist(),
                             np.asarray(init).tolist())).encode())
    for ev in model.events:
        h.update(repr((ev.name, exact_text(ev.guard),
                       [(v.name, exact_text(u)) for v, u in ev.update])).encode())
    return h.hexdigest()


def rebuild(model, initial, previous, *, max_states: Optional[int] = None,
            max_memory=None) -> Optional["Built"]:
    """The :class:`Built` of ``model`` on the states of chain ``previous``, its rates evaluated anew; or None.

    Where ``previous`` was built from a model of the same
    :func:`structure_key`, its states and moves are kept when the checks (a)
    and (b) of the module docstring pass: the very chain :func:`build` would
    give (``info["reused"]`` is True, ``info["structure"]`` the moves, for
    the next call). None otherwise (another structure, a move leaving the
    states, a state no longer reached, an invalid rate): then :func:`build`
    decides, with its own messages. A bad ``initial`` raises as for
    :func:`build`.

    Examples
    --------
    Through :meth:`ctmc.Model.build`: another arrival rate keeps the states;
    another capacity does not.

    >>> import ctmc
    >>> def mm1k(lam, K=5):
    ...     m = ctmc.Model("mm1k"); n = m.var("n", 0, K)
    ...     m.event("arrival", guard=n < K, rate=lam, update={n: n + 1})
    ...     m.event("departure", guard=n > 0, rate=1.0, update={n: n - 1})
    ...     return m
    >>> first = mm1k(0.5).build(initial={"n": 0})
    >>> again = mm1k(0.8).build(initial={"n": 0}, reuse=first)
    >>> again.build_info["reused"], (again.Q != mm1k(0.8).build(initial={"n": 0}).Q).nnz
    (True, 0)
    >>> mm1k(0.8, K=6).build(initial={"n": 0}, reuse=first).build_info.get("reused")
    """
    layout, limit, init, box, _ = _prepare(model, initial, max_states, max_memory)
    old, states = getattr(previous, "model", None), getattr(previous, "states", None)
    codes = getattr(states, "codes", None)
    if old is None or codes is None or previous.initial is None:
        return None
    key = structure_key(model, layout, init)
    if key is None or key != structure_key(old, states.layout, codes[previous.initial]):
        return None
    if max_states is not None and codes.size > max_states:
        return None
    n = codes.size
    with Timer() as timer:
        known = previous.build_info.get("structure")
        mv = known if isinstance(known, Structure) and known.key == key else _structure(model, codes, layout,
                                                                                         key, limit)
        rate = _rates(model, codes, layout, mv)
        if rate is None or (mv.loops.size and _rates(model, codes, layout, mv, loops=True) is None):
            return None                              # an invalid rate: build names it
        live = rate > 0
        if (mv.dst[live] < 0).any():
            return None                              # (a) fails: a move of positive rate leaves the states
        start = np.searchsorted(codes, init)
        pat = mv.pattern
        if pat is None:
            # the chain before (a build of the same structure: its graph reaches every state) by its own rates
            before = _rates(old, codes, layout, mv)
            if before is not None and not (mv.dst[before > 0] < 0).any():
                pat = _pattern(previous.Q, mv.src, mv.dst, before > 0)
        if pat is not None and np.array_equal(pat["live"], live):
            Q = _refill(pat, rate[live], n)          # the same graph: (b) holds as before
        else:
            Q = assemble(mv.src[live], mv.dst[live], rate[live], (n, n))
            if not _all_reached(Q, start):
                return None                          # (b) fails
            pat = _pattern(Q, mv.src, mv.dst, live)
        mv = replace(mv, pattern=pat)
    info = {"strategy": "reuse", "n_states": int(n), "n_transitions": int(live.sum()),
            "seconds": timer.elapsed, "box": box, "engine": "numpy", "reused": True, "structure": mv,
            "strategy_reason": "same structure as the chain given: its states and moves kept, the rates "
                               "evaluated anew"}
    return Built(codes=codes, layout=layout, Q=Q, initial=start, info=info)


def _structure(model, codes, layout, key, limit) -> Structure:
    """The moves of ``model`` over the states ``codes``: :func:`ctmc.transitions.fire` at rate 1."""
    n, eager = codes.size, model.calls_function
    env = layout.decode_all(codes) if eager else layout.decode(codes)
    if layout.box * 8 <= _BITMAP_SHARE * limit:
        index = DenseIndex(layout.box)
        index.add(codes, np.arange(n))
    else:
        index = CodeIndex()
        index.add(codes, np.arange(n))
    one = as_expr(1.0)
    srcs, dsts, stops, loops, loop_stops = [], [], [0], [], [0]
    with np.errstate(all="ignore"):
        for ev in model.events:
            out = fire(replace(ev, rate=one), env, n, codes, layout, False, eager, None)
            if out is not None:
                pos, _, dcode, _, oob, delta = out
                keep = oob | (delta != 0)                    # self-loops are no transitions
                loops.append(pos[~keep])
                pos, dcode, oob = pos[keep], dcode[keep], oob[keep]
                srcs.append(pos)
                dsts.append(np.where(oob, -1, index.lookup(np.where(oob, codes[0], dcode))))
            stops.append(stops[-1] + (srcs[-1].size if out is not None else 0))
            loop_stops.append(loop_stops[-1] + (loops[-1].size if out is not None else 0))
    cat = (lambda xs: np.concatenate(xs) if xs else np.empty(0, np.int64))
    return Structure(key, cat(srcs), cat(dsts), tuple(stops), None, cat(loops), tuple(loop_stops))


def _rates(model, codes, layout, mv, loops: bool = False) -> Optional[np.ndarray]:
    """The rate of every move of ``mv`` under ``model`` (of its self-loops if ``loops``); None where
    one is invalid (build names it)."""
    src, stops = (mv.loops, mv.loop_stops) if loops else (mv.src, mv.stops)
    rate = np.empty(src.size)
    for k, ev in enumerate(model.events):
        a, b = stops[k], stops[k + 1]
        if a == b:
            continue
        c = codes[src[a:b]]
        env = layout.decode_all(c) if model.calls_function else layout.decode(c)
        try:
            with np.errstate(all="ignore"):
                rate[a:b] = rate_where(ev, env, b - a, np.ones(b - a, dtype=bool))
        except ModelError:
            return None
    return rate if np.all((rate >= 0) & (rate < np.inf)) else None


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


def _pattern(Q, src, dst, live) -> Optional[dict]:
    """Where the values of the moves ``(src, dst)`` marked ``live`` go in ``Q``; None unless ``Q`` is their
    generator's pattern (its off-diagonal entries those moves, its diagonal the rows with one).

    ``slot``: each live move's entry among the off-diagonal ones; ``by_rank``
    (empty when no two moves share an entry): the live moves by their place
    among those to the same entry (duplicates are summed in the order of the
    events, as :func:`ctmc.assembly.assemble` sums them).
    """
    n = Q.shape[0]
    s, d = (src, dst) if live.all() else (src[live], dst[live])
    keys = s * n + d                             # sorted within each event: a stable sort merges the runs
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    first = np.r_[True, sk[1:] != sk[:-1]] if sk.size else np.zeros(0, dtype=bool)
    entries = sk[first]
    slot = np.empty(keys.size, dtype=np.int64)
    slot[order] = np.cumsum(first) - 1
    by_rank = []
    if entries.size < keys.size:                 # moves sharing an entry: their order among them
        starts = np.flatnonzero(first)
        rank = np.empty(keys.size, dtype=np.int64)
        rank[order] = np.arange(keys.size) - np.repeat(starts, np.diff(np.r_[starts, keys.size]))
        by_rank = [np.flatnonzero(rank == r) for r in range(int(rank.max()) + 1)]
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(Q.indptr))
    diag = Q.indices == rows
    off = np.flatnonzero(~diag)
    busy = entries // n                              # sorted: the rows with a move, each once
    if not (np.array_equal(rows[off] * n + Q.indices[off], entries)
            and np.array_equal(rows[diag], busy[np.r_[True, busy[1:] != busy[:-1]]] if busy.size else busy)):
        return None
    return {"live": live, "slot": slot, "by_rank": by_rank,
            "off": off, "diag": np.flatnonzero(diag), "diag_rows": rows[diag],
            "off_indptr": np.r_[0, np.cumsum(np.bincount(rows[off], minlength=n))],
            "off_indices": Q.indices[off], "indptr": Q.indptr.copy(), "indices": Q.indices.copy()}


def _refill(pat, rate, n) -> sp.csr_matrix:
    """The generator of pattern ``pat`` with the rates ``rate`` of its moves, as :func:`assemble` gives it."""
    vals = np.zeros(pat["off"].size)
    if not pat["by_rank"]:                      # no two moves to one entry
        vals[pat["slot"]] = rate
    for r, sel in enumerate(pat["by_rank"]):
        if r == 0:                              # duplicates summed in order: ((r0 + r1) + r2) ...
            vals[pat["slot"][sel]] = rate[sel]
        else:
            vals[pat["slot"][sel]] += rate[sel]
    off = sp.csr_matrix((vals, pat["off_indices"], pat["off_indptr"]), shape=(n, n))
    out = np.asarray(off.sum(axis=1)).ravel()        # the row sums as assemble takes them
    data = np.empty(pat["indices"].size)
    data[pat["off"]] = vals
    data[pat["diag"]] = -out[pat["diag_rows"]]
    Q = sp.csr_matrix((data, pat["indices"].copy(), pat["indptr"].copy()), shape=(n, n))
    Q.has_sorted_indices = True
    return Q
