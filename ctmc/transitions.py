r"""The transitions out of a batch of states: a model's events evaluated on their codes.

For a batch of state codes :math:`c` (decoded by the model's
:class:`~ctmc.encoding.StateLayout`), each event :math:`e` enabled where its
guard :math:`g_e(x)` holds gives the transitions :math:`c \to c + \delta_e(x)`
at rate :math:`r_e(x)`, where the code moves by
:math:`\delta_e(x) = \sum_{v} (u_{e,v}(x) - x_v)\, w_v` over the updated
variables (:math:`w_v` the variable's stride): no per-state Python work, one
array operation per event and expression. A state where an immediate move is
enabled with a positive weight is *vanishing*: its transitions are its
immediate moves, with their weights (:mod:`ctmc.immediate` eliminates them).
Used by the exploration (:mod:`ctmc.exploration`), the distributed rows and
the event rates of :class:`ctmc.Model`.
"""
from __future__ import annotations

import numpy as np

from .encoding import LazyEnv
from .results import ModelError

__all__ = ["expand", "fire", "guard", "values", "kind", "state_text", "rate_where"]


def expand(model, codes, layout, strict: bool, detail: bool = False):
    """All transitions out of a batch of states: ``codes`` in ``layout``, the events of ``model`` (a :class:`ctmc.Model`).

    Returns ``(src_pos, dst_code, rate, oob_pos, vanishing)``: positions
    into ``codes``; with ``strict`` an out-of-bounds update or an invalid
    rate raises, otherwise the sources of out-of-bounds updates and of
    invalid rates (also of events that change nothing) are returned in
    ``oob_pos`` (to be checked once reachability is known).

    ``vanishing`` is ``None`` for a model without immediate moves. With
    them it is a boolean mask over ``codes`` (an immediate move enabled
    with a positive weight); a vanishing state's transitions are its
    immediate moves with their *weights* (self-loops kept: they count for
    the probabilities), a tangible state's are its timed events. With
    ``detail`` the mask is a pair ``(mask, move)``: ``move`` gives, for
    each transition, the index of its immediate move (-1 for a timed event).
    """
    # a user function gets the documented plain dict of every variable (and its own copy
    # for each event); expressions of operators only decode and gather what they read
    eager = model.calls_function
    env = layout.decode_all(codes) if eager else layout.decode(codes)
    n = codes.shape[0]
    srcs, dsts, rates, oobs, moves = [], [], [], [], []
    vanishing = None
    with np.errstate(all="ignore"):
        if model.immediates:
            vanishing = np.zeros(n, dtype=bool)
            for k, ev in enumerate(model.immediates):
                out = fire(ev, env, n, codes, layout, strict, eager, None)
                if out is None:
                    continue
                pos, w, dcode, live, oob, _ = out
                vanishing[pos[live | oob]] = True       # enabled; an out-of-bounds move is an error later
                if not strict:
                    oobs.append(pos[oob])
                srcs.append(pos[live])
                dsts.append(dcode[live])
                rates.append(np.array(w[live], dtype=float))
                if detail:
                    moves.append(np.full(int(live.sum()), k, dtype=np.int64))
            tangible = ~vanishing
        for ev in model.events:
            out = fire(ev, env, n, codes, layout, strict, eager, None if vanishing is None else tangible)
            if out is None:
                continue
            pos, r, dcode, live, oob, delta = out
            if not strict:
                oobs.append(pos[oob])
            keep = live & (delta != 0)
            srcs.append(pos[keep])
            dsts.append(dcode[keep])
            rates.append(np.array(r[keep], dtype=float))
            if detail:
                moves.append(np.full(int(keep.sum()), -1, dtype=np.int64))
    cat = (lambda xs, dt: np.concatenate(xs) if xs else np.empty(0, dt))
    if detail and vanishing is not None:
        vanishing = (vanishing, cat(moves, np.int64))
    return (cat(srcs, np.int64), cat(dsts, np.int64), cat(rates, float),
            cat(oobs, np.int64), vanishing)


def fire(ev, env, n, codes, layout, strict, eager, where):
    """One event (or immediate move) on a batch: ``(pos, rate, dst_code, live, oob, delta)`` or ``None``.

    ``pos`` are the positions where the guard holds (and ``where``, if
    given); ``live`` marks the transitions with a non-zero rate (or
    weight) that stay in bounds, ``oob`` those that leave them; ``delta``
    is ``dst_code - code`` (0 where nothing changes; meaningless where
    ``oob``).
    """
    names, strides = layout.names, layout.strides
    what = "weight" if ev.immediate else "rate"
    faulty = None if strict else []
    g = guard(ev, env, n, faulty)
    if where is not None:
        g = g & where
    pos = np.flatnonzero(g)
    if pos.size == 0:
        return None
    # lenient pass: states whose guard, rate or update has no exact integer value (an error if reachable)
    err = faulty[0][pos] if faulty else None
    # the enabled states' values, each variable taken when first read
    if eager:
        sub = {k: v[pos] for k, v in env.items()}
    else:
        sub = env if pos.size == n else LazyEnv(names, lambda nm, pos=pos: env[nm][pos])
    rv, err = _evaluate(ev, what, ev.rate, sub, pos.size, err, not strict)
    bad = None
    if err is None and type(rv) in (int, float) and rv > 0 and rv < np.inf:
        # a constant rate (most events): every enabled state is live, nothing to check per state
        r, live = np.full(pos.size, float(rv)), np.ones(pos.size, dtype=bool)
    else:
        if err is None and type(rv) in (int, float) and rv == 0:
            return None
        r = values(ev, what, rv, pos.size, float)
        live = r != 0  # NaN stays live and is caught below
        bad = ~((r >= 0) & (r < np.inf))
        if not bad.any():
            bad = None
        elif strict:
            k = int(np.flatnonzero(bad)[0])
            raise ModelError(
                f"{kind(ev)} {ev.name!r}: invalid {what} {r[k]!r} in state "
                f"{state_text(sub, k)} ({what}s must be finite and >= 0)")
    # the code moves by (new - old) * stride per updated variable; a transition that
    # leaves the bounds is marked (an error, or dropped) and its code never used
    delta = 0
    oob = np.zeros(pos.shape, dtype=bool)
    for var, expr in ev.update:
        old = sub[var.name]
        new, err = _evaluate(ev, f"update of {var.name!r}", expr, sub, pos.size, err, not strict)
        if type(new) is int:
            # a constant value: one bounds test for the whole batch
            if not var.lo <= new <= var.hi:
                oob |= True
            delta = delta + (new - old) * strides[names.index(var.name)]
            continue
        new = values(ev, f"update of {var.name!r}", new, pos.size)
        if new.dtype.kind not in "iub":
            newi = np.rint(new)
            nonint = ~(newi == new) & live
            if strict and nonint.any():
                k = int(np.flatnonzero(nonint)[0])
                raise ModelError(
                    f"{kind(ev)} {ev.name!r}: update of {var.name!r} gives the "
                    f"non-integer {new[k]!r} in state {state_text(sub, k)}")
            oob |= nonint
            new = np.where(nonint, old, np.nan_to_num(newi)).astype(np.int64)
        elif new.dtype.kind != "i":
            new = new.astype(np.int64)
        oob |= (new < var.lo) | (new > var.hi)
        delta = delta + (new - old) * strides[names.index(var.name)]
    if bad is not None:
        # lenient pass: an invalid rate is flagged like a move out of bounds (an error if the
        # state is reachable), also for an event that leaves the state as it is
        oob |= bad
    oob &= live
    if err is not None:
        oob |= err                      # faults count wherever the guard holds, as in strict mode
    if strict and oob.any():
        k = int(np.flatnonzero(oob)[0])
        raise ModelError(
            f"{kind(ev)} {ev.name!r}: update leaves the declared bounds from state "
            f"{state_text(sub, k)}; bounds are "
            + ", ".join(f"{v.lo} <= {v.name} <= {v.hi}" for v, _ in ev.update))
    if not strict:
        live &= ~oob
    return pos, r, codes[pos] + delta, live, oob, delta


def state_text(env, k):
    """``(x=1, y=2)``: state ``k`` of the environment ``env``, for messages."""
    return "(" + ", ".join(f"{nm}={int(v[k])}" for nm, v in env.items()) + ")"


def kind(ev):
    """``"event"`` or ``"immediate move"``, for messages."""
    return "immediate move" if ev.immediate else "event"


def guard(ev, env, n, faulty=None):
    """The guard of ``ev`` on ``env`` as a boolean array of shape ``(n,)``; a non-boolean guard is an error.

    A state where the guard has no exact integer value (:class:`ctmc.expr.ExpressionError`) is an
    error, or with a list ``faulty``, enabled and its mask appended there.
    """
    g, err = _evaluate(ev, "guard", ev.guard, env, n, None, faulty is not None)
    if err is None and type(g) is np.ndarray and g.dtype == bool and g.shape == (n,):
        return g                        # the common case, without the checks' conversions
    g = np.asarray(g)
    if g.dtype != bool:
        raise ModelError(f"{kind(ev)} {ev.name!r}: guard must be boolean (comparisons such as n < 5 combined with "
                         f"&, |, ~), got values of type {g.dtype} (write e.g. n != 4 instead of n - 4)")
    g = values(ev, "guard", g, n)
    if err is not None:
        faulty.append(err)
        g = g | err
    return g


def rate_where(ev, env, n, g):
    """The rate (weight) of ``ev`` on ``env`` as floats of shape ``(n,)``, where the mask ``g`` (its
    guard) holds: an integer fault elsewhere does not count (the rate is not used there)."""
    what = "weight" if ev.immediate else "rate"
    value, faults = ev.rate.evaluate_faults(env)
    if faults is not None:
        faults = faults.restrict(g)
        if faults is not None:
            raise ModelError(f"{kind(ev)} {ev.name!r}: {what}: {faults.message(env)}")
    return values(ev, what, value, n, float)


def _evaluate(ev, what, expr, env, n, err, lenient):
    """``(value, err)``: ``expr`` of event ``ev`` on ``env`` (``n`` states). A state without an exact
    integer value raises :class:`~ctmc.results.ModelError` naming the event, the part ``what`` and the
    state; in the ``lenient`` pass such states are added to the mask ``err`` (``None``: none yet)."""
    value, faults = expr.evaluate_faults(env)
    if faults is None:
        return value, err
    if not lenient:
        raise ModelError(f"{kind(ev)} {ev.name!r}: {what}: {faults.message(env)}")
    mask = np.array(_full(faults.mask, n), dtype=bool)
    return value, mask if err is None else (err | mask)


def values(ev, what, value, n, dtype=None):
    """``_full`` for a value of event ``ev``: a function returning the wrong length is named."""
    if type(value) is np.ndarray and value.shape == (n,) and (dtype is None or value.dtype == dtype):
        return value
    a = np.asarray(value, dtype=dtype)
    if a.ndim and a.shape != (n,):
        raise ModelError(f"{kind(ev)} {ev.name!r}: its {what} gave {a.shape[0] if a.ndim == 1 else a.shape} "
                         f"values for {n} states (a function must return one value per state of the "
                         "variables it is given, or a scalar)")
    return _full(a, n)


def _full(value, n, dtype=None):
    """``value`` as an array of shape ``(n,)`` (scalars broadcast, no copy when it already is one)."""
    a = np.asarray(value, dtype=dtype)
    return a if a.shape == (n,) else np.broadcast_to(a, (n,))
