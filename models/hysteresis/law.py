r"""The mode-decision rule of the hysteresis queue and the law its routes return.

A decision at level :math:`n` from mode :math:`s` applies the two loops
:math:`\langle L,H\rangle|\langle H,R\rangle` in turn: up,
:math:`s \mapsto 2` if :math:`n \ge R` and :math:`0 \mapsto 1` if
:math:`n \ge H`; then down, :math:`2 \mapsto 1` if :math:`n \le H` and
:math:`1 \mapsto 0` if :math:`n \le L`. One decision may thus cross both
loops (:math:`0 \to 2` on a large batch, :math:`2 \to 1 \to 0` on a deep
departure).

:func:`decide` is that rule, written once for both representations: arrays
(:func:`numpy.where`, the embedded chain of
:mod:`models.hysteresis.embedded`) and :mod:`ctmc.expr` expressions
(:func:`ctmc.expr.where`, the CTMC of :mod:`models.hysteresis.ctmc_route`).
:class:`HysteresisLaw` is the time-stationary law :math:`p(s, n)` either route
returns. Neither depends on the queue, so the routes and the queue
(:mod:`models.hysteresis.queue`) import them from here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import ctmc

__all__ = ["decide", "HysteresisLaw"]


def decide(where, s, n, L, H, R):
    """Mode after a decision at level ``n`` from mode ``s`` (both loops, in turn).

    ``where`` is :func:`numpy.where` or :func:`ctmc.expr.where`, so the same
    rule serves the CTMC builder and the embedded chain.

    Parameters
    ----------
    where : callable
        ``where(condition, a, b)``: :func:`numpy.where` for arrays,
        :func:`ctmc.expr.where` for model expressions.
    s, n : int, array or expression
        Mode before the decision (0 normal, 1 overload, 2 discard) and the
        number of customers the decision is taken at.
    L, H, R : int
        The thresholds, counted in the system.

    Returns
    -------
    The mode after the decision, of the kind of ``where``'s result.

    Examples
    --------
    >>> import numpy as np
    >>> from ctmc.models.hysteresis.law import decide
    >>> s = np.array([0, 0, 1, 2, 2])
    >>> n = np.array([5, 8, 2, 5, 1])
    >>> decide(np.where, s, n, 2, 5, 8)   # onset, both loops up, abatement, H, both loops down
    array([1, 2, 0, 1, 0])
    """
    up = where(n >= R, 2, where((s == 0) & (n >= H), 1, s))
    down = where((up == 2) & (n <= H), 1, up)
    return where((down == 1) & (n <= L), 0, down)


@dataclass(frozen=True, eq=False)
class HysteresisLaw:
    """Time-stationary law of (mode, number in system).

    Attributes
    ----------
    p : ndarray, shape (3, top + 1)
        ``p[s, n]``: probability of mode ``s`` (0 normal, 1 overload, 2
        discard) with ``n`` customers in the system. Route "ctmc" stores the
        levels up to the highest one reachable from the empty system
        (``top <= r``; above it every probability is 0, and a capacity far
        beyond reach costs nothing); route "embedded" (reachable states within
        ``embedded.MEMORY_BUDGET``) stores
        every level, ``top = r``. :meth:`levels` gives either on a common width.
    route : str
        ``"ctmc"`` or ``"embedded"``.
    status : ctmc.Status
        :attr:`ctmc.Status.SUCCESS` or the reason it is not (a member equals
        its value: ``status == "success"``).
    residual : float
        ``||pi Q||_1`` of the CTMC (route ctmc) or ``||pi (P - I)||_1`` of the
        embedded chain (route embedded).
    wall_time : float
    info : dict
        ``n_states``, solver method, truncation mass of the Poisson mixing,
        ``accuracy`` (``"relative"`` or ``"absolute"``), ...
    message : str
        How the law was computed and how small probabilities can be trusted:
        route "ctmc" and route "embedded" with phase-type or deterministic
        service resolve probabilities far below 1e-16 in relative terms; a
        general law given by a CDF (quadrature) only to about 1e-13 absolute.
    """

    p: np.ndarray
    route: str
    status: ctmc.Status
    residual: float
    wall_time: float
    info: dict = field(default_factory=dict, repr=False)
    message: str = ""

    def levels(self, width: int) -> np.ndarray:
        """``p`` on levels ``0..width-1``: zeros above the stored levels (which must fit)."""
        if width < self.p.shape[1]:
            raise ValueError(f"width: the law stores {self.p.shape[1]} levels, got width={width}")
        return np.pad(self.p, ((0, 0), (0, width - self.p.shape[1])))

    @property
    def marginal_n(self) -> np.ndarray:
        """``P(N = n)``, ``n = 0..top``."""
        return self.p.sum(axis=0)

    @property
    def modes(self) -> np.ndarray:
        """``P(mode = s)``, ``s = 0, 1, 2``."""
        return self.p.sum(axis=1)
