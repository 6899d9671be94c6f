r"""Properties in PRISM's syntax (CSL for CTMCs), answered on a built chain with their evidence.

:func:`check` answers one property, :func:`check_file` a properties file
(``const``, ``formula`` and ``label`` lines, then properties, optionally
named ``"name": prop``). The grammar is :class:`~ctmc.prism.parser.PropertyParser`
(PRISM's expression grammar with the ``P``, ``S``, ``R``, ``T`` operators and
``filter``); what each property maps onto, and its error bound, is
:mod:`ctmc.prism.csl`:

=================================  ==================================================
``S=? [phi]``, ``R{"r"}=? [S]``    :meth:`ctmc.CTMC.long_run`
``P=? [F phi]``, ``[phi U psi]``   :meth:`ctmc.CTMC.hitting_laplace` at ``s = 0``
``P=? [F<=t phi]``, ``U<=t``       :meth:`ctmc.CTMC.prob_within` (``!phi & !psi`` absorbing)
``P=? [F[t1,t2] phi]``, ``U[..]``  the above, then uniformisation on ``[0, t1]``
``R{"r"}=? [C<=t]``                :meth:`ctmc.CTMC.cumulative_reward`
``R{"r"}=? [I=t]``                 uniformisation of :math:`e^{Qt} r`
``R{"r"}=? [F phi]``, ``T=?``      :meth:`ctmc.CTMC.hitting_times` (with ``reward``)
``filter(op, prop, states)``       ``op`` over the values of ``prop`` in ``states``
=================================  ==================================================

The value of a property without a filter is the one "from the initial
state": :math:`p_0 v`, :math:`p_0` the chain's initial law (uniform over
several initial states; PRISM asks for one); for a bool property, whether it
holds in every initial state (PRISM's default). Names are the model's
variables, constants and formulas (for a chain from :func:`ctmc.prism.load`,
else the chain's state variables) and the chain's labels as ``"name"``
(``"init"``: the initial states, ``"deadlock"``: the states where no command is
enabled, each when the chain has no label of that name).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Optional

import numpy as np

from ..expr import Var
from ..results import Status
from .csl import Context, evaluate, state_values
from .parser import PropertyParser
from .syntax import PrismError, Program, read_source
from .translate import Scope

__all__ = ["check", "check_file", "PropertyResult"]


@dataclass(frozen=True)
class PropertyResult:
    """The answer to a property, with its evidence.

    Attributes
    ----------
    property : str
        The property as given.
    value : float
        Its value: from the chain's initial law, or the filter's (a bool as 1.0 / 0.0).
    status : Status
        The analysis' status (:class:`ctmc.Status`).
    error_bound : float
        A bound on ``|value - exact value|`` (see :mod:`ctmc.prism.csl`).
    method : str
        The analysis and its method, e.g. ``"long_run(gth)"``.
    result : object
        The analysis result it came from (e.g. :class:`ctmc.StationaryResult`), or None.
    values : ndarray or None
        The value from every state (``nan`` where it was not computed), for a property without filter.
    name : str or None
        The property's name in a properties file (``"name": prop``).
    """

    property: str
    value: float
    status: Status
    error_bound: float
    method: str
    result: Any = field(repr=False, default=None)
    values: Optional[np.ndarray] = field(repr=False, default=None)
    name: Optional[str] = None


def _deadlock(chain) -> np.ndarray:
    """PRISM's ``"deadlock"``: the states where no command is enabled with a positive rate.

    For a chain built from a model, from its events' rates (an event that leaves the state
    unchanged, dropped from ``Q``, still counts, as in PRISM); else the states without a rate
    out of them in ``Q``.
    """
    model = getattr(chain, "model", None)
    if model is None:
        return np.asarray(chain.Q.diagonal()) == 0
    live = np.zeros(chain.n_states, dtype=bool)
    for ev in model.events:
        live |= np.asarray(chain.event_rate(ev.name)) > 0
    return ~live


def _scope(chain, decls: Optional[Program], constants, file: str, uses_deadlock: bool = False) -> Scope:
    """The names a property may use: the program's (or the chain's variables) and the file's declarations."""
    base = getattr(getattr(chain, "model", None), "scope", None)
    if not isinstance(base, Scope):
        base = Scope(Program(file=file, model_type="ctmc"), None)
        for name in chain.states.names:
            base.vars[name] = (Var(name, 0, 0), "int", None)     # the bounds play no part in evaluating
    decls = decls or Program(file=file)
    for name, (_, _, pos) in decls.constants.items():
        if name in base.prog.constants or name in base.vars or name in base.prog.formulas:
            raise PrismError(f"constant {name!r} is already a name of the model", file, pos.line, pos.col)
    given = dict(constants or {})
    unknown = sorted(set(given) - set(decls.constants))
    if unknown:
        raise PrismError(f"constants={{...}} names {unknown}, which the properties do not declare "
                         f"(their constants: {sorted(decls.constants) or 'none'})", file)
    tr = copy.copy(base)
    tr.prog = replace(base.prog, file=file, constants={**base.prog.constants, **decls.constants},
                      formulas={**base.prog.formulas, **decls.formulas})
    tr.given = {**base.given, **given}
    tr.consts, tr.busy, tr.formula_cache = dict(base.consts), set(), {}
    tr.labels = dict(chain.labels)
    if "init" not in tr.labels and chain.initial is not None:     # PRISM's built-in labels
        tr.labels["init"] = np.isin(np.arange(chain.n_states), chain.initial)
    if "deadlock" not in tr.labels and uses_deadlock:
        tr.labels["deadlock"] = _deadlock(chain)
    for name, node in decls.labels.items():
        if name in tr.labels:       # a second meaning for a name the model or PRISM already gives
            raise PrismError(f"label {name!r} is already a label of the model (or a built-in one): "
                             "give the property file's label another name", file, node.pos.line, node.pos.col)
        v, t = state_values(Context(chain, tr, file), node)
        if t != "bool":
            raise PrismError(f"label {name!r}: expected a bool expression, got {t}", file, node.pos.line,
                             node.pos.col)
        tr.labels[name] = v != 0
    return tr


def _answer(chain, tr, node, text, file, name, options, cache) -> PropertyResult:
    need = None
    if node.kind in ("P", "S", "R", "T") and node.args[0] is not None and chain.initial_law is not None:
        # a bounded operator (P>p, S<p...) is read in the initial states: their own values, not the
        # initial law's mean (on a reducible chain the long run differs from state to state)
        need = np.asarray(chain.initial_law) > 0
    ans = evaluate(Context(chain, tr, file, options, cache), node, need)
    values = ans.values
    if node.kind == "filter":
        value = ans.value
    elif ans.value is not None and ans.kind != "bool":
        value = ans.value
    else:
        law = chain.initial_law
        if law is None:
            raise PrismError("the chain has no initial state: give one, or ask filter(op, prop, states)",
                             file,
                             node.pos.line, node.pos.col)
        sel = np.asarray(law) > 0
        if ans.kind == "bool":
            if np.isnan(values[sel]).any():
                raise PrismError(f"{text}: no value in an initial state (a NaN cannot be compared)", file,
                                 node.pos.line, node.pos.col)
            value = float((values[sel] != 0).all())
        else:
            value = float(np.asarray(law)[sel] @ values[sel])
    return PropertyResult(text, float(value), ans.status, float(ans.error_bound), ans.method, ans.result,
                          None if node.kind == "filter" else values, name)


def check(chain, prop: str, constants=None, **options) -> PropertyResult:
    """Answer one property on ``chain``.

    Parameters
    ----------
    chain : CTMC
        A built chain (labels and rewards from :func:`ctmc.prism.load` or its own).
    prop : str
        The property, e.g. ``'P=? [ F<=10 "full" ]'`` (the table of :mod:`ctmc.prism.properties`).
    constants : dict, optional
        Unused by a single property (its constants are the model's); see :func:`check_file`.
    **options
        Passed to the linear analyses (:meth:`ctmc.CTMC.long_run`, :meth:`ctmc.CTMC.hitting_times`:
        ``method=``, ...).

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
    >>> round(ctmc.prism.check(m.build(), 'T=? [ F "full" ]').value, 12)   # 1 + (1 + 2 * 1) / 1
    4.0
    """
    if not isinstance(prop, str):
        raise TypeError(f"prop: expected the property as a string, got {type(prop).__name__}")
    if constants:
        raise ValueError("constants: a single property declares none; give the model's constants to "
                         "ctmc.prism.load, or use check_file for a properties file with const lines")
    node = PropertyParser(prop, "<property>").single()
    return _answer(chain, _scope(chain, None, None, "<property>", '"deadlock"' in prop), node, prop.strip(),
                   "<property>", None, options, {})


def check_file(chain, path_or_text, constants=None, **options) -> list:
    """Answer every property of a properties file on ``chain``.

    A properties file (PRISM's ``.csl``/``.props``) holds ``const``,
    ``formula`` and ``label`` declarations and properties, one after the
    other (optionally ``"name": prop`` and a ``;``). A list of results, not
    one, since a file holds several properties: :func:`check` keeps its
    single :class:`PropertyResult`. What several properties share is computed
    once per call: the long-run law (the ``S`` and ``R [S]`` properties' results
    are then the same :class:`ctmc.StationaryResult`).

    Parameters
    ----------
    chain : CTMC
    path_or_text : str or os.PathLike
        A file name (a path, or a one-line string naming an existing file), or the text.
    constants : dict, optional
        Values of the file's undefined constants, ``{"T": 10}``.
    **options
        As for :func:`check`.

    Returns
    -------
    list of PropertyResult
        In the file's order, each with its ``property`` text and ``name``.

    Raises
    ------
    PrismError
        Naming ``file:line:column``.
    """
    text, file = read_source(path_or_text, "properties", "<properties>", (".csl", ".props", ".pctl"))
    p = PropertyParser(text, file)
    props = p.properties()
    if not props:
        raise PrismError("no property in the file", file)
    tr = _scope(chain, p.prog, constants, file, '"deadlock"' in text)
    starts = np.cumsum([0] + [len(x) for x in text.splitlines(keepends=True)])
    out, cache = [], {}          # the analyses the properties share (a long-run law), made once
    for name, node, start, end in props:
        source = text[starts[start.line - 1] + start.col - 1:starts[end.line - 1] + end.col - 1]
        out.append(_answer(chain, tr, node, " ".join(source.split()), file, name, options, cache))
    return out

