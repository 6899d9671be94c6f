r"""CSL on a built chain: each property of :class:`~ctmc.prism.parser.PropertyParser` on an analysis.

Notation: :math:`Q` the generator, :math:`p_0` the chain's initial law,
:math:`\Phi, \Psi` the states satisfying ``phi``, ``psi``, :math:`r` a reward
rate per state, :math:`Q[\bar S]` the generator with the rows of the states
outside :math:`S` set to zero (those states made absorbing).
Every property gives a value per state :math:`v` (and :math:`p_0 v`):

``P=? [ phi U[t1,t2] psi ]`` (``F psi`` is ``true U psi``)
    ``t1 = 0``, ``t2`` finite: :math:`v = e^{Q' t_2} 1_\Psi`,
    :math:`Q' = Q` with :math:`\Psi` and :math:`\overline{\Phi \cup \Psi}` absorbing
    (:meth:`ctmc.CTMC.prob_within` on that chain: uniformisation, non-negative
    terms, so small probabilities keep their relative accuracy);
    ``t2`` infinite: the probability of ever reaching :math:`\Psi` on the same
    chain (:meth:`ctmc.CTMC.hitting_laplace` at :math:`s = 0`);
    ``t1 > 0``: :math:`v = e^{Q'' t_1} (1_\Phi\, u)` with :math:`u` the value of
    ``phi U[0, t2-t1] psi`` and :math:`Q''` the generator with
    :math:`\overline\Phi` absorbing (uniformisation of a non-negative vector).
``R{"r"}=? [ C<=t ]``
    :math:`\int_0^t e^{Qs} r\,ds` (:meth:`ctmc.CTMC.cumulative_reward`).
``R{"r"}=? [ I=t ]``
    :math:`e^{Qt} r_s` (uniformisation), :math:`r_s` the structure's state
    items alone: PRISM leaves action items out of an instantaneous reward
    (``C<=t``, ``F``, ``S`` read them as the rate :math:`\sum_a v_a q_a`).
``R{"r"}=? [ F phi ]``, ``T=? [ F phi ]``
    :math:`E_i[\int_0^{T_\Phi} r(X_s)\,ds]` (:math:`r = 1` for ``T``):
    :meth:`ctmc.CTMC.hitting_times` with ``reward``; infinite where
    :math:`\Phi` is not reached with probability 1 (as PRISM).
``S=? [ phi ]``, ``R{"r"}=? [ S ]``
    the long-run mean of :math:`1_\Phi` or :math:`r` (:meth:`ctmc.CTMC.long_run`); from
    every state, the same number on an irreducible chain, else one long-run law per state asked for.
``P~p [ ... ]`` (and ``S``, ``R``, ``T`` with a bound)
    the bool :math:`v \sim p` per state.
``a + b``, ``a - b``, ``a * b``, ``a / b``, ``-a`` (``1 - P=? [...]``)
    state by state, of properties and numbers at a property's top level; the
    bound :math:`e_a + e_b`, :math:`|a| e_b + |b| e_a + e_a e_b` or
    :math:`(e_a + |a/b| e_b) / (|b| - e_b)` over the states read.
``filter(op, prop, states)``
    ``op`` over the values of ``prop`` in ``states`` (PRISM's manual,
    "Filters"): ``min``, ``max``, ``sum``, ``avg``, ``count`` and
    ``forall``/``exists`` (of a bool property: 1.0 for true), ``first`` (the
    lowest-indexed state), ``state`` (the one state of ``states``).

**Error bounds** are absolute bounds on every value: the analysis' own
(uniformisation: the neglected Poisson mass times :math:`\max|v_0|`; a linear
solve's relative normwise bound times :math:`\max|v|`; the long-run law's
:math:`\ell_1` bound times :math:`\max|r|`); ``phi U[t1,t2] psi`` adds the
bounds of its two stages (:math:`e^{Q''t}` does not expand the max-norm). Every
property kind is graded against the options' ``error_tol`` by the rule of every analysis,
:func:`~ctmc.kernels.evidence.grade_bound` (a uniformised bound relative to :math:`\max|v_0|`, or
:math:`\max|r|\,t` for ``C<=t``; the two stages' sum as it is): ``inaccurate`` above it, or refused
(:class:`ctmc.SolverError`) where the analysis checks its own result.
A bool answer is 0 or 1 with bound 0; its status is ``inaccurate`` when a
value lies within its bound of ``p``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import scipy.sparse as sp

from ..backends.base import worst
from ..kernels.evidence import grade_bound
from ..options import Tolerances
from ..results import Status
from ..sets import owned_values
from ..measures import expected_at
from .syntax import Node, PrismError
from .translate import as_bool, is_const

__all__ = ["Answer", "Context", "evaluate", "state_values"]

_PER_STATE_LONG_RUN_LIMIT = 2000    # long-run laws computed one start state at a time (reducible chains)


@dataclass
class Answer:
    """A property's values in every state (``nan`` where not computed) and its evidence."""

    values: np.ndarray
    status: Status = Status.SUCCESS
    error_bound: float = 0.0
    method: str = "expression"
    result: Any = None
    kind: str = "double"              # "bool", "int" or "double"
    value: Optional[float] = None      # from the initial law, when the analysis gave it


@dataclass
class Context:
    """What evaluating a property needs: the chain, the scope of names, the file for the messages."""

    chain: Any
    scope: Any
    file: str = "<property>"
    options: dict = field(default_factory=dict)
    #: analyses that several properties share (the long-run laws), shared by the contexts of one
    #: properties file: ``key -> result``
    cache: dict = field(default_factory=dict)

    def err(self, message, pos) -> PrismError:
        return PrismError(message, self.file, pos.line if pos else 0, pos.col if pos else 0)

    def once(self, key, compute):
        """``compute()``, computed once per ``key`` for the properties that share this context's cache."""
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]


def _error_tol(ctx) -> dict:
    """The ``error_tol`` the options give (every analysis grades its bound against it), as keywords."""
    return {"error_tol": ctx.options.get("error_tol", Tolerances.error_tol)}


def _graded(ctx, status: Status, bound: float) -> Status:
    """``status``, ``inaccurate`` where the absolute ``bound`` of a probability (of two stages added)
    exceeds the options' ``error_tol``: :func:`~ctmc.kernels.evidence.grade_bound`, the rule of every
    analysis."""
    return grade_bound(status, "", bound, Tolerances(**_error_tol(ctx)))[0]


def _constant(ctx, node, what):
    """A constant number (a time, a probability bound), or an error naming it."""
    v, t = ctx.scope.value(node, {}, constant=True)
    if t == "bool" or not isinstance(v, (int, float)):
        raise ctx.err(f"{what}: expected a number, got {t}", node.pos)
    v = float(v)
    if not np.isfinite(v) or v < 0:
        raise ctx.err(f"{what}: expected a finite number >= 0, got {v}", node.pos)
    return v


def state_values(ctx, node):
    """``(values over the states, type)`` of an expression of the variables, constants, formulas, labels."""
    chain = ctx.chain
    v, t = ctx.scope.value(node, {})
    if t == "bool":
        v = as_bool(v)
    if not is_const(v):
        env = {name: np.asarray(chain.states[name]) for name in chain.states.names}
        v = v.evaluate(env)
    return np.broadcast_to(np.asarray(v, dtype=float), (chain.n_states,)).copy(), t


def _mask(ctx, node, what) -> np.ndarray:
    v, t = state_values(ctx, node)
    if t != "bool":
        raise ctx.err(f"{what} must be a bool expression, got {t}", node.pos)
    return v != 0


def _absorbing(chain, keep: np.ndarray):
    """``chain`` with the rows of the states outside ``keep`` set to zero (absorbing), same initial law."""
    from ..chain import CTMC
    if keep.all():
        return chain
    Q = sp.diags(keep.astype(float)) @ chain.Q
    law = chain.initial_law
    return CTMC(sp.csr_matrix(Q), chain.states, initial=None if law is None else np.array(law), check=False)


def _at(ctx, v0: np.ndarray, t: float, absorbing=None):
    """:func:`ctmc.measures.expected_at` at one time ``t``: ``(e^{Q't} v0 in every state, its result)``,
    :math:`Q'` with the states of ``absorbing`` (a mask, or None) absorbing; graded against the options'
    ``error_tol``."""
    res = expected_at(ctx.chain, v0, t, absorbing=absorbing, check=False, **_error_tol(ctx))
    return np.asarray(res.values, dtype=float).reshape(-1), res


def _until(ctx, phi, psi, t1, t2) -> Answer:
    chain = ctx.chain
    if t1 > 0:
        u = _until(ctx, phi, psi, 0.0, None if t2 is None else t2 - t1)
        v0 = np.where(phi, u.values, 0.0)
        v, res = _at(ctx, v0, t1, None if phi.all() else ~phi)
        bound = u.error_bound + float(res.error_bound)
        return Answer(v, _graded(ctx, u.status, bound), bound,
                      f"{u.method} then uniformization({res.info['uniformization_steps']} steps) on [0, {t1:g}]",
                      u.result)
    if not psi.any():
        return Answer(np.zeros(chain.n_states), method="empty target: 0")
    if t2 is None:
        res = _absorbing(chain, phi | psi).hitting_laplace(psi, 0.0, **_error_tol(ctx))
        v = np.asarray(res.values, dtype=float)
        bound = float(res.error_bound) * float(v.max())
        return Answer(v, res.status, bound, f"hitting_laplace(s=0, {res.method})", res)
    # P(phi U<=t2 psi) = E[1_psi(X_t2)] with psi and the states outside phi absorbing (no copy of Q)
    v, res = _at(ctx, psi.astype(float), t2, psi | ~phi)
    value = None if res.value is None else float(np.asarray(res.value).reshape(-1)[0])
    return Answer(v, res.status, float(np.max(res.error_bound)), f"prob_within({res.method})", res, value=value)


def _reward_vector(ctx, name, pos, what):
    chain = ctx.chain
    if not chain.rewards:
        raise ctx.err(f"{what}: the chain has no reward structure", pos)
    names = list(chain.rewards)
    if name is None:
        name = names[0]
    elif isinstance(name, int):
        if not 1 <= name <= len(names):
            raise ctx.err(f"R{{{name}}}: the chain has {len(names)} reward structure(s), "
                          f"1..{len(names)}", pos)
        name = names[name - 1]
    elif name not in chain.rewards:
        raise ctx.err(f"R{{{name!r}}}: no reward structure of that name; the chain has {sorted(names)}", pos)
    return name, np.asarray(chain.rewards[name], dtype=float)


def _instant_vector(ctx, name, r) -> np.ndarray:
    """The reward ``I=t`` reads: a PRISM structure's state items alone when it has action items.

    The chain's reward ``r`` of such a structure is its full rate (the action
    items times their transitions' rates); PRISM leaves action items out of an
    instantaneous reward, so ``I=t`` reads ``PrismModel.state_rewards`` (0 for
    a structure of action items only). Any other reward is ``r`` itself.
    """
    part = getattr(getattr(ctx.chain, "model", None), "state_rewards", {}).get(name)
    if part is None:
        return r
    return owned_values(part, ctx.chain.states, ctx.chain.n_states, name=f"reward {name!r} (state items)",
                        finite=True)


def _long_run(ctx, values, what, need) -> Answer:
    """The long-run mean of ``values`` from the initial law and, in the states of ``need``, from each."""
    chain, opts = ctx.chain, ctx.options
    scale = float(np.max(np.abs(values))) if values.size else 0.0
    out = np.full(chain.n_states, np.nan)
    res, bound = None, 0.0
    if chain.initial_law is not None:
        res = ctx.once("long_run", lambda: chain.long_run(**opts))
    elif chain.is_irreducible:
        res = ctx.once("stationary", lambda: chain.stationary(**opts))
    if res is not None:
        bound = float(res.error_bound) * scale
    if res is not None and chain.is_irreducible:
        out[:] = res.pi @ values
    elif need is not None and need.any():
        idx = np.flatnonzero(need)
        if idx.size > _PER_STATE_LONG_RUN_LIMIT:
            raise ValueError(f"{what} in {idx.size} states of a reducible chain: one long-run law per "
                             f"state; at most {_PER_STATE_LONG_RUN_LIMIT} (narrow the filter's states)")
        for i in idx:
            r = ctx.once(("long_run", int(i)), lambda: chain.long_run({int(i)}, **opts))
            out[i] = r.pi @ values
            bound = max(bound, float(r.error_bound) * scale)
            res = res or r
    if res is None:
        raise ValueError(f"{what}: the chain has no initial state; use filter(..., states)")
    value = float(res.pi @ values) if chain.initial_law is not None else None
    return Answer(out, res.status, bound, f"long_run({res.method})", res, value=value)


def _reward(ctx, node, need) -> Answer:
    name, what, arg = (node.args[1:] if node.kind == "R" else (None, "F", None))
    chain = ctx.chain
    if node.kind == "T":
        what, arg, label, r = "F", node.args[1], "time", np.ones(chain.n_states)
    else:
        label, r = _reward_vector(ctx, name, node.pos, f"R=? [ {what} ]")
    if what == "S":
        return _long_run(ctx, r, f'R{{"{label}"}}=? [ S ]', need)
    if what == "C":
        t = _constant(ctx, arg, "R=? [ C<=t ]: t")
        if t == 0:      # an empty integral: exactly 0 (uniformisation would grade its round-off floor)
            return Answer(np.zeros(chain.n_states), Status.SUCCESS, 0.0, "C<=0: empty integral", value=0.0)
        res = chain.cumulative_reward(r, t, **_error_tol(ctx))
        return Answer(np.asarray(res.values, dtype=float), res.status, float(res.error_bound),
                      f"cumulative_reward({res.method})", res,
                      value=None if res.value is None else float(res.value))
    if what == "I":
        t = _constant(ctx, arg, "R=? [ I=t ]: t")
        r = _instant_vector(ctx, label, r)
        v, res = _at(ctx, r, t)
        return Answer(v, res.status, float(res.error_bound),
                      f"uniformization({res.info['uniformization_steps']} steps)", res)
    target = _mask(ctx, arg, "R=? [ F phi ]: phi")
    if not target.any():
        return Answer(np.full(chain.n_states, np.inf), method="empty target: infinite")
    if (r < 0).any():
        raise ctx.err(f"R{{{label!r}}}=? [ F phi ]: the rewards must be >= 0", node.pos)
    res = chain.hitting_times(target, reward=None if label == "time" else r, **ctx.options)
    v = np.asarray(res.mean, dtype=float)
    finite = v[np.isfinite(v)]
    bound = float(res.error_bound) * (float(finite.max()) if finite.size else 0.0)
    return Answer(v, res.status, bound, f"hitting_times({res.method})", res)


def _compare(ans: Answer, bound, ctx) -> Answer:
    op, pnode = bound
    p = _constant(ctx, pnode, f"the bound {op} p")
    v = ans.values
    out = {"<": v < p, "<=": v <= p, ">": v > p, ">=": v >= p}[op].astype(float)
    near = np.isfinite(v) & (np.abs(v - p) <= ans.error_bound)
    status = worst(ans.status, Status.INACCURATE) if near.any() else ans.status
    return Answer(np.where(np.isnan(v), np.nan, out), status, 0.0, f"{ans.method}, compared {op} {p:g}",
                  ans.result, "bool")


def evaluate(ctx, node, need=None) -> Answer:
    """The :class:`Answer` of property ``node``; ``need``: the states whose value a filter reads."""
    kind, chain = node.kind, ctx.chain
    if kind == "filter":
        return _filter(ctx, node)
    if kind in ("P", "S", "R", "T"):
        bound = node.args[0]
        if kind == "P":
            _, phi, psi, t1n, t2n = node.args
            t1 = 0.0 if t1n is None else _constant(ctx, t1n, "the time bound t1")
            t2 = None if t2n is None else _constant(ctx, t2n, "the time bound t2")
            if t2 is not None and t2 < t1:
                raise ctx.err(f"the time interval [{t1:g}, {t2:g}] is empty", (t2n or node).pos)
            phim = np.ones(chain.n_states, bool) if phi is None else _mask(ctx, phi, "phi U psi: phi")
            ans = _until(ctx, phim, _mask(ctx, psi, "the path's target"), t1, t2)
        elif kind == "S":
            phi = _mask(ctx, node.args[1], "S=? [ phi ]: phi")
            ans = _long_run(ctx, phi.astype(float), "S=? [ phi ]", need)
        else:
            ans = _reward(ctx, node, need)
        return ans if bound is None else _compare(ans, bound, ctx)
    if _has_operator(node):
        return _arithmetic(ctx, node, need)
    values, t = state_values(ctx, node)
    return Answer(values, kind=t)


_OPERATORS = ("P", "S", "R", "T", "filter")
_ARITHMETIC = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


def _has_operator(node) -> bool:
    return isinstance(node, Node) and (node.kind in _OPERATORS
                                       or any(_has_operator(a) for a in node.args))


def _arithmetic(ctx, node, need) -> Answer:
    r"""``a op b`` (``+ - * /``) or ``-a`` of properties and numbers, state by state, with the bound
    :math:`e_a + e_b`, :math:`|a| e_b + |b| e_a + e_a e_b` or :math:`(e_a + |a/b|\, e_b) / (|b| - e_b)`
    over the states read (``need``, else the initial states, else all)."""
    chain = ctx.chain
    if node.kind not in _ARITHMETIC and node.kind != "neg":
        raise ctx.err(f"a property as an operand of {node.kind!r}: only +, -, * and / of properties and "
                      "numbers are supported", node.pos)
    if need is None:
        law = chain.initial_law
        need = np.ones(chain.n_states, bool) if law is None else np.asarray(law) > 0
    parts = [evaluate(ctx, a, need) for a in node.args]
    for a, part in zip(node.args, parts):
        if part.kind == "bool":
            raise ctx.err(f"an operand of {node.kind!r} must be a number, got a bool property", a.pos)
    if node.kind == "neg":
        a = parts[0]
        return Answer(-a.values, a.status, a.error_bound, f"-({a.method})", a.result)
    a, b = parts
    x, y, ea, eb = a.values[need], b.values[need], a.error_bound, b.error_bound
    with np.errstate(all="ignore"):
        values = _ARITHMETIC[node.kind](a.values, b.values)
        if node.kind in "+-":
            bound = ea + eb
        elif node.kind == "*":
            bound = float(np.max(np.abs(x) * eb + np.abs(y) * ea + ea * eb, initial=0.0))
        else:
            room = np.abs(y) - eb
            each = np.where(room > 0, (ea + np.abs(x / y) * eb) / np.where(room > 0, room, 1.0), np.inf)
            bound = float(np.max(each, initial=0.0))
    bound = bound if np.isfinite(bound) else np.inf
    status = worst(a.status, b.status)
    if not np.all(np.isfinite(values[need])) or not np.isfinite(bound):
        status = worst(status, Status.INACCURATE)
    return Answer(values, status, bound, f"({a.method}) {node.kind} ({b.method})")


def _filter(ctx, node) -> Answer:
    op, prop, states = node.args
    mask = _mask(ctx, states, f"filter({op}, ...): the states")
    if not mask.any():
        raise ctx.err(f"filter({op}, ...): no state satisfies the filter's states", states.pos)
    if op == "state" and mask.sum() != 1:
        raise ctx.err(f"filter(state, ...): the states must be exactly one state, got {int(mask.sum())}",
                      states.pos)
    ans = evaluate(ctx, prop, mask)
    v = ans.values[mask]
    if op in ("count", "forall", "exists") and ans.kind != "bool":
        raise ctx.err(f"filter({op}, ...): expected a bool property (P>=p [...], an expression), "
                      "got a number",
                      prop.pos)
    n = int(mask.sum())
    value, bound, kind = {
        "min": lambda: (v.min(), ans.error_bound, ans.kind),
        "max": lambda: (v.max(), ans.error_bound, ans.kind),
        "sum": lambda: (v.sum(), ans.error_bound * n, ans.kind),
        "avg": lambda: (v.mean(), ans.error_bound, "double"),
        "count": lambda: (float((v != 0).sum()), 0.0, "int"),
        "forall": lambda: (float((v != 0).all()), 0.0, "bool"),
        "exists": lambda: (float((v != 0).any()), 0.0, "bool"),
        "first": lambda: (v[0], ans.error_bound, ans.kind),
        "state": lambda: (v[0], ans.error_bound, ans.kind),
    }[op]()
    out = np.full(ctx.chain.n_states, float(value))
    return Answer(out, ans.status, float(bound), f"filter({op}) of {ans.method}", ans.result, kind,
                  value=float(value))
