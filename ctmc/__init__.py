"""ctmc: exact numerical analysis of continuous-time Markov chains.

Declare a model (:class:`Model`), build its chain (:class:`CTMC`), and ask
for stationary laws, hitting times (moments, transforms), first-passage joint
laws and transient distributions; every answer comes as a result object with
its status, residual and timing (:mod:`ctmc.results`).

>>> import ctmc
>>> m = ctmc.Model("mm1k")
>>> n = m.var("n", 0, 10)
>>> m.event("arrival", guard=n < 10, rate=0.5, update={n: n + 1})
>>> m.event("departure", guard=n > 0, rate=1.0, update={n: n - 1})
>>> chain = m.build(initial={"n": 0})
>>> res = chain.stationary()
>>> float(res.pi[chain.index(n=10)] / res.pi[0])  # 0.5 ** 10
0.0009765625
"""
from .chain import CTMC, StateTable
from .expr import Expr, Var, maximum, minimum, where
from .model import Model
from .simulate import simulate
from . import io, ph, plot, prism  # noqa: F401  (ctmc.io, ctmc.ph, ... after a plain "import ctmc")
from .progress import CtmcWarning, set_progress
from .results import (FirstPassageResult, HittingResult, LaplaceResult, MeasureResult, ModelError, ModelWarning,
                      ReducibleChainError, SolverError, StateSpaceTooLarge, StationaryResult,
                      Status, TailAccuracyWarning, TransientResult)
from .sweep import SweepResult, sweep

from ._version import __version__

__all__ = [
    "CTMC", "StateTable", "Model", "Expr", "Var", "where", "minimum", "maximum",
    "Status", "SolverError", "ReducibleChainError", "ModelError", "ModelWarning", "StateSpaceTooLarge",
    "TailAccuracyWarning", "StationaryResult", "HittingResult", "LaplaceResult",
    "FirstPassageResult", "TransientResult", "MeasureResult", "CtmcWarning", "set_progress", "simulate",
    "sweep", "SweepResult",
]
