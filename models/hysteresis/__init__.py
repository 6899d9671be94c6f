r"""M^X|G|1|r queue with hysteretic overload control (SIP-server load control).

The model and its measures are defined in :mod:`models.hysteresis.queue`,
its two solution routes in :mod:`models.hysteresis.ctmc_route` (the exact
CTMC, solved by the elimination over the levels of
:mod:`models.hysteresis.levels`) and :mod:`models.hysteresis.embedded` (the
departure-epoch embedded chain), the mode-decision rule both routes share and the law they return in
:mod:`models.hysteresis.law`; service and batch laws in
:mod:`models.hysteresis.service`. This package also registers the
``ctmc hysteresis`` command (:func:`add_arguments`, :func:`run`,
:func:`report`).
"""
from __future__ import annotations

from .queue import ACCEPTANCE, POLICIES, ROUTES, HysteresisLaw, HysteresisQueue
from .service import (BatchSize, Deterministic, GeneralService, PhaseType, coxian, deterministic,
                      erlang, exponential, fixed_batch, general, geometric_batch, hyperexponential,
                      phase_type)
from .cli import add_arguments, report, run

__all__ = [
    "HysteresisQueue", "HysteresisLaw", "POLICIES", "ACCEPTANCE", "ROUTES",
    "PhaseType", "Deterministic", "GeneralService", "BatchSize",
    "exponential", "erlang", "hyperexponential", "coxian", "phase_type", "deterministic", "general",
    "fixed_batch", "geometric_batch", "add_arguments", "run", "report",
]
