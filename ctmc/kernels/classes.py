r"""Closed classes, pin states and global reductions of owned vectors (every backend).

A stationary law lives on a closed class :math:`C` (a set that cannot be left
and whose states all reach each other), found by reachability from a seed
state: the forward-reachable set of :math:`z` is closed exactly when every
state in it reaches :math:`z` back (:func:`closed_classes`). The search back
reads the rows of :math:`Q^T`; a backend that finds the closed classes from
:math:`Q`'s rows alone (the scipy backend: the strongly connected components
that no rate leaves, :func:`ctmc.backends.csr.closed_components`) gives them
instead, and :func:`sole_closed_class` the one class of a chain that has one.

A pinned solve fixes :math:`\pi_p = 1` for one state :math:`p` and solves for
:math:`x = \pi / \pi_p`; its computed entries carry errors of the order of
:math:`\epsilon \max x`, so the pin must be a probable state: the model's
initial state, the state with the slowest exit rate, or a state where a short
random walk spends most time (:func:`walk_pin`), re-pinned by
:func:`next_pin`.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..backends.csr import jump_chain
from ..sets import unit_mask
from .evidence import NEGATIVE_TOL

__all__ = ["count", "global_argmax", "walk_pin", "slowest_exit", "closed_classes", "sole_closed_class",
           "describe_classes", "state_name", "pin_hint", "next_pin", "WALK_STEPS"]


def count(op, mask) -> int:
    """Number of ``True`` entries of an owned mask over every process."""
    return int(round(op.allsum(float(np.count_nonzero(mask)))))


def global_argmax(op, x):
    """``(max, global index)`` of an owned vector over every process (the first index on ties)."""
    k = int(np.argmax(x)) if x.size else 0
    val = float(x[k]) if x.size else -np.inf
    if op.size == 1:
        return val, op.start + k
    table = op.gather(np.array([val, op.start + k]), "all").reshape(op.size, 2)
    j = int(np.argmax(table[:, 0]))
    return float(table[j, 0]), int(table[j, 1])


#: jumps of :func:`walk_pin` at most (about 0.05 s; a quarter of the class size, at least 5,000);
#: the holding times of the second half are counted
WALK_STEPS = 50_000


def walk_pin(op, support, hint=None, steps=None, seed: int = 0) -> int:
    """A probable state of the closed class ``support``, to pin a Krylov solve on (one process).

    A pinned solve computes ``x = pi / pi_pin``: pinned on a state of
    probability 1e-57 relative to the largest (the slowest-exit state of a
    4-species population chain), GMRES cannot converge. This walks the jump
    chain for ``steps`` jumps (default: a quarter of the class size, between
    5,000 and :data:`WALK_STEPS`; seeded: reproducible) from ``hint`` (the
    initial state, if in the class) and again from the slowest-exit state,
    and returns the state with the most expected holding time in the second
    halves of the walks: a long-run time average, i.e. a state where ``pi``
    is large. Two starts, because a walk that starts far from the probable
    region may not reach it in time (an M/M/1/K queue started full, review),
    while the slowest-exit state is the old pin and often probable itself.
    Measured on that chain: probability 0.78-0.84 of the largest, and GMRES
    converges (2.4e6 states: 100 iterations; pinned at the slowest exit it
    stopped at its limit).

    >>> import ctmc
    >>> m = ctmc.Model("mm1"); n = m.var("n", 0, 400)
    >>> m.event("a", guard=n < 400, rate=1.0, update={n: n + 1})
    >>> m.event("s", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> c = m.build(initial={"n": 400})              # the least probable state as a start
    >>> from ctmc.backends import operator_for
    >>> int(c.states["n"][walk_pin(operator_for(c, "scipy"), np.ones(c.n_states, bool), 400)]) <= 3
    True
    """
    G = op.generator_rows()              # Q's rows: the rates and the diagonal, which the walk never takes
    q = np.ascontiguousarray(op.exit_rates, dtype=float)
    if steps is None:
        steps = min(WALK_STEPS, max(5_000, int(support.sum()) // 4))
    slowest = slowest_exit(op, support)
    starts = [slowest]
    if hint is not None and 0 <= int(hint) < op.n and support[int(hint)] and int(hint) != slowest:
        starts.insert(0, int(hint))
    rng = np.random.default_rng(seed)
    path = np.empty(steps, dtype=np.int64)
    second = []                          # the states of the second halves, in the order visited
    for s in starts:
        k = jump_chain(G, op.start, q, s - op.start, rng.random(steps), path)     # (ctmc.backends.csr)
        if k < steps:
            return int(path[k]) + op.start   # an absorbing state: the class is that state
        second.append(path[(steps + 1) // 2:].copy())
    visited = np.concatenate(second)
    if not visited.size:
        return starts[0]
    # the expected holding time 1/q_s summed per state in the order visited (bincount adds in input
    # order); the most held state, the first visited among equals
    states, first_seen, inv = np.unique(visited, return_index=True, return_inverse=True)
    hold = np.bincount(inv, weights=1.0 / q[visited])
    best = np.flatnonzero(hold == hold.max())
    return int(states[best[np.argmin(first_seen[best])]]) + op.start


def slowest_exit(op, support) -> int:
    """Global index of the supported state with the smallest exit rate (the first on ties)."""
    v = np.negative(op.exit_rates)              # np.where(support, -q, -inf) in one vector, not two
    np.copyto(v, -np.inf, where=~np.asarray(support, dtype=bool))
    return global_argmax(op, v)[1]


def _closed_class_from(op, z):
    """The closed class reached from state ``z`` (owned mask)."""
    for _ in range(op.n + 1):
        seed = unit_mask(op, z)
        fwd = op.reach(seed, forward=True)
        back = op.reach(seed)
        escape = fwd & ~back
        if count(op, escape) == 0:
            return fwd
        z = slowest_exit(op, escape)  # a state z cannot be reached back from: go deeper
    raise RuntimeError("closed class search did not terminate")  # pragma: no cover


def closed_classes(op, hint: Optional[int] = None, limit: Optional[int] = None) -> list:
    """Closed classes of the chain as owned masks, sorted by their smallest state.

    The first search starts at ``hint`` (default: the slowest-exit state);
    each further one at a state that cannot reach a class found so far.
    ``limit`` stops after that many classes. Every class (no ``limit``): the
    backend's own :meth:`~ctmc.backends.base.Operator.closed_class_masks` where it has them
    (the same set of classes: a chain's closed classes are its closed strongly
    connected components, whatever finds them).
    """
    if limit is None:
        every = op.closed_class_masks()
        if every is not None:
            return every
    found = []
    accounted = np.zeros(op.stop - op.start, dtype=bool)
    everything = np.ones_like(accounted)
    z = slowest_exit(op, everything) if hint is None else int(hint)
    while True:
        C = _closed_class_from(op, z)
        found.append(C)
        accounted |= op.reach(C)
        if limit is not None and len(found) >= limit:
            break
        rest = ~accounted
        if count(op, rest) == 0:
            break
        z = slowest_exit(op, rest)
    # every process takes part in each reduction, owning states of the class or not
    first = [op.allmin(float(np.flatnonzero(C)[0] + op.start) if C.any() else np.inf) for C in found]
    return [C for _, C in sorted(zip(first, found), key=lambda t: t[0])]


def sole_closed_class(op, hint: Optional[int] = None):
    """The closed class of the chain as an owned mask if it has exactly one, else None.

    From the backend's :meth:`~ctmc.backends.base.Operator.closed_class_masks` where it has them (the scipy
    backend: from ``Q``'s rows, no ``Q^T`` made before the solve); else the class found from ``hint``
    (:func:`closed_classes`), the only one exactly when every state reaches it.

    >>> import ctmc
    >>> from ctmc.backends import operator_for
    >>> op = operator_for(ctmc.CTMC([[-1.0, 1.0, 0.0], [0.0, -1.0, 1.0], [0.0, 1.0, -1.0]]), "scipy")
    >>> sole_closed_class(op).tolist()
    [False, True, True]
    >>> sole_closed_class(operator_for(ctmc.CTMC([[-1.0, 1.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]),
    ...                                "scipy")) is None
    True
    """
    every = op.closed_class_masks(most=1)           # (no mask made where there are more)
    if every is not None:
        return every[0] if len(every) == 1 else None
    C = closed_classes(op, hint, limit=1)[0]
    return C if count(op, op.reach(C)) == op.n else None


def describe_classes(op, classes, limit=5):
    """The first states of the first ``limit`` classes, for a message."""
    parts = []
    for C in classes[:limit]:
        idx = np.flatnonzero(op.gather(C.astype(float), "all") > 0.5)
        first = [state_name(op, i) for i in idx[:3]]
        more = f" and {idx.size - 3} more" if idx.size > 3 else ""
        parts.append("{" + ", ".join(first) + more + "}")
    if len(classes) > limit:
        parts.append("... (more classes)")
    return "; ".join(parts)


def state_name(op, i):
    """State ``i`` by its variables' values, ``(n=3, m=0)``, else ``state i``."""
    st = op.states
    if st is None:
        return f"state {i}"
    return "(" + ", ".join(f"{k}={int(st[k][i])}" for k in st.names) + ")"


def pin_hint(op, support, hint):
    """The initial state if it lies in the class, else the slowest-exit state."""
    if hint is not None:
        inside = count(op, support & unit_mask(op, hint))
        if inside:
            return int(hint)
    return slowest_exit(op, support)


def next_pin(x_max: float, argmax: int, x_min: float, x_pin: float, pins, slowest: int,
             repin: float, argabs: Optional[int] = None) -> Optional[int]:
    """Where a pinned stationary solve should be repeated, or ``None`` to keep it.

    A pin on a state of negligible probability gives a solution of size
    ``1/pi_pin`` that is round-off with mixed signs and a meaningless argmax:
    significant negatives move the pin to the slowest-exit state (then to the
    argmax, then to ``argabs``, the largest entry in magnitude: where the
    garbage is largest, the pinned system is most nearly singular, i.e. the
    probability is high). A pin carrying less than ``repin`` of the largest
    entry moves to the argmax. A state already tried is never tried again.

    Examples
    --------
    >>> next_pin(1.0, 7, -0.5, 1e-3, [0], slowest=3, repin=1e-3)   # garbage: slowest exit
    3
    >>> next_pin(1.0, 7, 0.0, 1e-9, [0], slowest=3, repin=1e-3)    # improbable pin: argmax
    7
    >>> next_pin(1.0, 7, 0.0, 0.5, [0], slowest=3, repin=1e-3) is None
    True
    >>> next_pin(1.0, 0, -6e9, 1.0, [0], slowest=0, repin=1e-3, argabs=4242)   # garbage at the pin
    4242
    """
    if x_min < -NEGATIVE_TOL * x_max:
        nxt = next((c for c in (slowest, argmax, argabs) if c is not None and c not in pins), None)
    elif x_pin < repin * x_max:
        nxt = argmax
    else:
        return None
    return None if nxt is None or nxt in pins else int(nxt)


