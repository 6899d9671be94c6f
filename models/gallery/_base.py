"""What every gallery model provides: the ctmc model, its chain, its measure, its PRISM twin.

A gallery model is a small object holding its size parameter. Subclasses
write :meth:`GalleryModel.model` (the :class:`ctmc.Model`),
:attr:`GalleryModel.initial`, :meth:`GalleryModel.reward` (the per-state
quantity whose stationary mean is the published measure) and
:meth:`GalleryModel.prism_program` (an equivalent PRISM program, generated
from the same facts, for the comparison with Storm).

PRISM's semantics of a CTMC, which the models reproduce event by event: a
synchronised action fires one transition per combination of enabled commands
of the modules that share it, with the conjunction of their guards, the
product of their rates and the union of their updates; transitions reaching
the same state add their rates (ctmc's assembly sums them too); an action
reward ``[a] true : w`` weights the rate of every transition of ``a``, so
its stationary value is ``w * sum_x pi_x * rate_a(x)``.
"""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np

import ctmc

__all__ = ["GalleryModel", "flat_prism_program", "prism_expr"]


class GalleryModel:
    """Base class of the gallery models (one size parameter each).

    Attributes
    ----------
    name : str
        Registry name (``"kanban"``, ...).
    parameter : str
        Name of the size parameter (PRISM's constant: ``"t"``, ``"N"``, ...).
    prism_property : str
        The published property, in PRISM's syntax.
    analysis : str
        The analysis of the measure: ``"stationary"`` (the default: :meth:`measure` of a
        stationary law), ``"hitting"`` (an accumulated reward until a set) or ``"transient"``
        (a time-bounded probability); :meth:`solve` runs it.
    """

    name = "model"
    parameter = "n"
    prism_property = ""
    analysis = "stationary"

    def __init__(self, value: int):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{self.parameter}: expected a positive integer, got {value!r}")
        self.value = int(value)
        self._chain: Optional[ctmc.CTMC] = None

    def __repr__(self) -> str:
        return f"{self.name}({self.parameter}={self.value})"

    # to be written by each model -------------------------------------------
    def model(self) -> ctmc.Model:
        """The :class:`ctmc.Model` (a new one at each call)."""
        raise NotImplementedError

    @property
    def initial(self) -> Dict[str, int]:
        """The initial state, ``{variable: value}``."""
        raise NotImplementedError

    def reward(self, chain: ctmc.CTMC) -> np.ndarray:
        """Per-state reward whose stationary mean is the measure."""
        raise NotImplementedError

    def prism_program(self) -> str:
        """Text of an equivalent PRISM program (constants in :attr:`prism_constants`)."""
        raise NotImplementedError

    # shared ------------------------------------------------------------------
    @property
    def prism_constants(self) -> Dict[str, int]:
        """Undefined constants of :meth:`prism_program` and their values."""
        return {self.parameter: self.value}

    def chain(self, **build_options) -> ctmc.CTMC:
        """The built chain (built once and kept; options go to :meth:`ctmc.Model.build`)."""
        if self._chain is None or build_options:
            chain = self.model().build(initial=self.initial, **build_options)
            if build_options:
                return chain
            self._chain = chain
        return self._chain

    def solve(self, chain: Optional[ctmc.CTMC] = None, **options):
        """The analysis whose result :meth:`measure` reads (here ``chain.stationary(**options)``)."""
        chain = self.chain() if chain is None else chain
        return chain.stationary(**options)

    def measure(self, pi, chain: Optional[ctmc.CTMC] = None) -> float:
        """The published measure from a stationary law ``pi`` (array or result).

        Parameters
        ----------
        pi : ndarray or StationaryResult
            Stationary probabilities indexed like ``chain``'s states.
        chain : CTMC, optional
            The chain ``pi`` belongs to; default :meth:`chain`.
        """
        chain = self.chain() if chain is None else chain
        p = np.asarray(getattr(pi, "pi", pi), dtype=float)
        return float(p @ self.reward(chain))


def prism_expr(expr) -> str:
    """PRISM text of a ctmc expression built from variables, constants, arithmetic, comparisons,
    ``& | ~`` and ``minimum``/``maximum`` (``where`` and callables have no PRISM form here)."""
    text = repr(ctmc.expr.as_expr(expr)) if not isinstance(expr, ctmc.Var) else expr.name
    if "where(" in text or "(state)" in text:
        raise ValueError(f"no PRISM form for {text!r}")
    return text.replace("==", "=").replace("~", "!")


def flat_prism_program(model: ctmc.Model, initial: Dict[str, int], *, actions=None, rewards: str = "",
                       labels: str = "", title: str = "") -> str:
    """A one-module PRISM program with one command per event of ``model``.

    Every event becomes an (unsynchronised) command; an event named in the
    dict ``actions`` (event name -> action) carries that action label, so
    PRISM's action rewards ``[action] true : w`` weight its rate. Bounds and the initial
    state come from the model's variables and ``initial``; ``rewards`` and
    ``labels`` are PRISM text appended as given. The chain is the one
    :meth:`ctmc.Model.build` assembles (same guards, rates, updates; PRISM
    adds the rates of commands reaching the same state, as ctmc does).
    """
    L = [f"// {title or model.name}: one command per event of the ctmc model", "ctmc", "", "module flat"]
    for v in model.variables:
        L.append(f"\t{v.name} : [{v.lo}..{v.hi}] init {int(initial[v.name])};")
    for ev in model.events:
        upd = " & ".join(f"({var.name}'={prism_expr(e)})" for var, e in ev.update) or "true"
        act = (actions or {}).get(ev.name, "")
        L.append(f"\t[{act}] {prism_expr(ev.guard)} -> {prism_expr(ev.rate)} : {upd};")
    L += ["endmodule", "", rewards, labels, ""]
    return "\n".join(L)
