"""The model a PRISM program translates to: a :class:`ctmc.Model` that knows its initial states."""
from __future__ import annotations

from ..model import Model

__all__ = ["PrismModel"]


class PrismModel(Model):
    """A :class:`ctmc.Model` read from a PRISM program (made by :func:`ctmc.prism.load`).

    The same model API; :meth:`build` and :meth:`state_space` start, when no
    ``initial`` is given, from the program's initial state(s): the variables'
    ``init`` values (the lower bound of a range, ``false`` for a bool, when
    not given) or the states satisfying its ``init ... endinit`` block.

    Attributes
    ----------
    initial : dict
        ``{variable: value}`` (one state), or ``{variable: int array}`` (the
        states of an ``init ... endinit`` block, one entry per state).
    constants : dict
        The value of every constant of the program (given or defined).
    bool_variables : tuple of str
        The program's bool variables (0 for false, 1 for true in the chain's states).
    state_rewards : dict
        ``{structure: expression}`` for each reward structure with action items:
        its state items alone (0 without any), which PRISM's instantaneous
        reward ``R=? [I=t]`` reads; the chain's reward of that name is the
        structure's full rate (state items plus action items times their rates).
    file : str
        Where the program came from (``"<string>"`` for text).
    """

    def __init__(self, name: str, file: str = "<string>"):
        super().__init__(name)
        self.file = file
        self.initial: dict = {}
        self.constants: dict = {}
        self.bool_variables: tuple = ()
        self.state_rewards: dict = {}
        self.scope = None      # the program's names (constants, formulas, variables) for properties

    def build(self, initial=None, **options):
        """:meth:`ctmc.Model.build` from ``initial``, by default the program's initial state(s)."""
        return super().build(self.initial if initial is None else initial, **options)

    def state_space(self, initial=None, **options):
        """:meth:`ctmc.Model.state_space` from ``initial``, by default the program's initial state(s)."""
        return super().state_space(self.initial if initial is None else initial, **options)
