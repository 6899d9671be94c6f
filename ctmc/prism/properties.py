r"""Long-run properties in PRISM's syntax: ``S=? [phi]`` and ``R{"r"}=? [S]``.

:func:`check` answers a property on a built chain with the existing
analyses, keeping their evidence:

``S=? [ phi ]``
    the long-run probability of the states satisfying ``phi``,
    :math:`\sum_{x \models \phi} \pi_x`, with :math:`\pi` the long-run law
    from the chain's initial law (:meth:`ctmc.CTMC.long_run`: the stationary
    law of an irreducible chain; the closed classes weighted by the
    probability of entering each otherwise);
``R{"r"}=? [ S ]`` (``R=? [ S ]``: the first reward structure)
    the long-run reward rate :math:`\sum_x \pi_x r_x` of the chain's reward
    ``r`` (a PRISM action reward is already a rate there, see
    :mod:`ctmc.prism.translate`).

``phi`` is a PRISM expression of the model's variables, constants and
formulas (when the chain was built from :func:`ctmc.prism.load`) and of the
chain's labels, written ``"name"`` (``"init"``: the initial states, when
the chain has no label of that name). The error bound is the law's proven
:math:`\ell_1` bound times :math:`\max_x |r_x|` (1 for a probability):
:math:`|\pi r - \tilde\pi r| \le \|\pi - \tilde\pi\|_1 \max|r|`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..expr import Var
from ..results import Status
from .parser import Parser
from .syntax import PrismError, Program
from .translate import as_bool, is_const, Scope

__all__ = ["check", "PropertyResult"]


@dataclass(frozen=True)
class PropertyResult:
    """The answer to a property, with its evidence.

    Attributes
    ----------
    property : str
        The property as given.
    value : float
        Its value (from the chain's initial law).
    status : Status
        The analysis' status (:class:`ctmc.Status`).
    error_bound : float
        A bound on ``|value - exact value|`` (see the module docstring).
    method : str
        The analysis and its method, e.g. ``"long_run(gth)"``.
    result : object
        The analysis result it came from (:class:`ctmc.StationaryResult`).
    """

    property: str
    value: float
    status: Status
    error_bound: float
    method: str
    result: Any = field(repr=False, default=None)


def _scope(chain):
    """The names a property may use: the PRISM program's, or the chain's variables (as ints)."""
    tr = getattr(getattr(chain, "model", None), "scope", None)
    if isinstance(tr, Scope):
        return tr
    tr = Scope(Program(file="<property>", model_type="ctmc"), None)
    for name in chain.states.names:
        tr.vars[name] = (Var(name, 0, 0), "int", None)     # the bounds play no part in evaluating
    return tr


def _parse(text: str):
    """``("S", phi)`` or ``("R", reward name or None)``."""
    p = Parser(text, "<property>")
    kind, value, pos = p.peek()
    if kind == "ident" and value == "S":
        p.next()
        p.expect("=")
        p.expect("?")
        p.expect("[")
        phi = p.expr()
        p.expect("]")
        out = ("S", phi)
    elif kind == "ident" and value == "R":
        p.next()
        name = None
        if p.at("{"):
            p.next()
            name, _ = p.string("a reward structure's name")
            p.expect("}")
        p.expect("=")
        p.expect("?")
        p.expect("[")
        if not (p.peek()[0] == "ident" and p.peek()[1] == "S"):
            raise p.error(f"R=? [ ... ]: only the long-run reward R=? [ S ] is supported, found {p.found()}")
        p.next()
        p.expect("]")
        out = ("R", name)
    else:
        raise p.error(f"expected S=? [ ... ] or R{{\"r\"}}=? [ S ] (the properties supported), "
                      f"found {p.found()}")
    if p.peek()[0] != "eof":
        raise p.error(f"unexpected {p.found()} after the property")
    return out


def check(chain, prop: str, **options) -> PropertyResult:
    """Answer ``S=? [phi]`` or ``R{"r"}=? [S]`` on ``chain``.

    Parameters
    ----------
    chain : CTMC
        A built chain (labels and rewards from :func:`ctmc.prism.load` or its own).
    prop : str
        The property.
    **options
        Passed to :meth:`ctmc.CTMC.long_run` (``method=``, ...).

    Returns
    -------
    PropertyResult

    Raises
    ------
    PrismError
        For a property that does not parse, is not supported, or names an
        unknown label, reward or identifier (``<property>:line:column``).

    Examples
    --------
    >>> import ctmc.prism
    >>> m = ctmc.prism.load('''ctmc
    ... module q n : [0..2] init 0; [] n<2 -> 1 : (n'=n+1); [] n>0 -> 2 : (n'=n-1); endmodule
    ... label "full" = n = 2;''')
    >>> r = ctmc.prism.check(m.build(), 'S=? [ "full" ]')   # (1/2)^2 / (1 + 1/2 + 1/4)
    >>> round(r.value, 12), r.status.name
    (0.142857142857, 'SUCCESS')
    """
    kind, arg = _parse(prop)
    if kind == "S":
        tr = _scope(chain)
        tr.labels = dict(chain.labels)
        if "init" not in tr.labels and chain.initial is not None:     # PRISM's built-in label
            tr.labels["init"] = np.isin(np.arange(chain.n_states), chain.initial)
        try:
            v, t = tr.value(arg, {})
        except PrismError as exc:
            raise PrismError(exc.reason, "<property>", exc.line, exc.column) from None
        finally:
            tr.labels = {}
        if t != "bool":
            raise PrismError(f"S=? [ phi ]: phi must be a bool expression, got {t}", "<property>",
                             arg.pos.line, arg.pos.col)
        env = {name: np.asarray(chain.states[name]) for name in chain.states.names}
        v = as_bool(v)
        values = np.broadcast_to(np.asarray(v if is_const(v) else v.evaluate(env), dtype=float),
                                 (chain.n_states,))
    else:
        if not chain.rewards:
            raise PrismError("R=? [ S ]: the chain has no reward structure", "<property>", 1, 1)
        name = arg if arg is not None else next(iter(chain.rewards))
        if name not in chain.rewards:
            raise PrismError(f"R{{{name!r}}}: no reward structure of that name; the chain has "
                             f"{sorted(chain.rewards)}", "<property>", 1, 1)
        values = np.asarray(chain.rewards[name], dtype=float)
    res = chain.long_run(**options)
    scale = float(np.max(np.abs(values))) if values.size else 0.0
    bound = float(res.error_bound) * scale if scale else 0.0
    return PropertyResult(prop, float(res.pi @ values), res.status, bound, f"long_run({res.method})", res)
