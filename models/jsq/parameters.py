r"""Parameter checks of the two-queue JSQ model, shared by the chain and the closed forms.

A system is :math:`(K, \rho, \mu_2, \nu)`: capacity :math:`K \ge 1` per
queue, arrival rate :math:`\rho > 0`, service rate :math:`\mu_2 \in [0, 1]`
of the longest queue (:math:`\mu_1 = 1 - \mu_2`) and rate :math:`\nu \in
[0, 1]` of the lone busy server (``None``: :math:`\nu = \mu_2`).
:func:`check_parameters` validates them before any heavy work, for
:class:`~models.jsq.model.JSQ2` and every function of
:mod:`models.jsq.closed_forms`, so both report a bad value in the same words.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["check_parameters", "check_backend", "BACKENDS"]

#: where a :class:`~models.jsq.model.JSQ2` chain lives and is solved
BACKENDS = ("scipy", "petsc")


def _real(name, v, allow_none=False):
    if v is None and allow_none:
        return None
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(float(v)):
        raise ValueError(f"{name}: must be a finite real number, got {v!r}")
    return float(v)


def check_parameters(K, rho, mu2, idle_rate):
    """Validate ``(K, rho, mu2, idle_rate)`` and return ``(K, rho, mu2, nu)``.

    Parameters
    ----------
    K : int
        Capacity of each queue, ``>= 1``.
    rho : float
        Total arrival rate, ``> 0``.
    mu2 : float
        Service rate of the longest queue, in ``[0, 1]``.
    idle_rate : float or None
        Rate of the lone busy server, in ``[0, 1]``; None means ``mu2``.

    Returns
    -------
    tuple
        ``(int K, float rho, float mu2, float nu)``, ``nu`` the idle rate
        with the default filled in.

    Raises
    ------
    ValueError
        A value out of range or not a finite real number; the message starts
        with the parameter's name.

    Examples
    --------
    >>> from ctmc.models.jsq.parameters import check_parameters
    >>> check_parameters(10, 0.9, 0.5, None)
    (10, 0.9, 0.5, 0.5)
    """
    if isinstance(K, bool) or not isinstance(K, (int, np.integer)) or K < 1:
        raise ValueError(f"K: capacity must be an integer >= 1, got {K!r}")
    rho, mu2 = _real("rho", rho), _real("mu2", mu2)
    if not rho > 0:
        raise ValueError(f"rho: arrival rate must be > 0, got {rho!r}")
    if not 0 <= mu2 <= 1:
        raise ValueError(f"mu2: service rate of the longest queue must lie in [0, 1] (mu1 = 1 - mu2), got {mu2!r}")
    nu = _real("idle_rate", idle_rate, allow_none=True)
    nu = mu2 if nu is None else nu
    if not 0 <= nu <= 1:
        raise ValueError("idle_rate: rate of the lone busy server must lie in [0, 1] "
                         f"(1 = full pooling of both servers), got {idle_rate!r}")
    return int(K), rho, mu2, nu


def check_backend(backend) -> str:
    """Validate the ``backend`` of :class:`~models.jsq.model.JSQ2` (one of :data:`BACKENDS`).

    >>> from ctmc.models.jsq.parameters import check_backend
    >>> check_backend("petsc")
    'petsc'
    """
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
    return backend
