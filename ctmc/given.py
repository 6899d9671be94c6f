r"""The stationary method ``"given"``: a law computed elsewhere, graded by ctmc's evidence.

Problem
-------
A stationary law :math:`\hat\pi` of the generator :math:`Q` comes from outside ctmc
(a structured elimination of a model family, a closed form, a file). What
ctmc says of its own answers it should say of this one: the residual
:math:`\|\hat\pi Q\|_1`, the balance error
:math:`\max_j |(\hat\pi Q)_j| / (\hat\pi_j |q_{jj}|)` and the proven bound on
:math:`\|\hat\pi - \pi\|_1`, graded by one rule.

The method
----------
``chain.stationary("given", x0=law)`` (or :func:`ctmc.stationary.stationary`, same arguments)
solves nothing: it restricts ``x0`` to the closed class being solved and hands it to the
driver of :mod:`ctmc.stationary`, which normalises it, recomputes its evidence
(:func:`ctmc.kernels.evidence.stationary_evidence`), grades it
(:func:`ctmc.kernels.evidence.grade`) and bounds its error as it does an iterative
method's answer (:func:`ctmc.kernels.evidence.iterative_bound`: the mean times to
reach the most probable state :math:`k`, solved to a proven residual, give
:math:`\|\hat\pi - \pi\|_1 \le \hat\pi_k\beta/(1-\beta)`), on every backend. With
``levels`` (every transition moves that level by at most one) the return times are
solved by two-level cycles on the levels (:class:`ctmc.kernels.levels.LevelSystem`,
one process), as for ``level_iad``; with ``bound=False`` the bound's solve is skipped
(``error_bound`` is NaN, ``info["error_bound_kind"]`` says so, and ``error_tol`` is
not applied). Mass of ``x0`` outside the class is dropped (``info["mass_off_class"]``,
its share of the total).

Everything the caller can get wrong in ``x0`` (its shape, a NaN, a negative value, a zero
total) is refused by a ``ValueError`` naming ``x0`` when the options are made; its
length, which needs the chain, before any evidence is computed. On PETSc every
process holds the whole ``x0`` (as for the ``x0`` of the iterations) and keeps its rows:
nothing is gathered.

Examples
--------
>>> import numpy as np, ctmc
>>> c = ctmc.CTMC([[-2.0, 2.0], [1.0, -1.0]])
>>> res = c.stationary("given", x0=[1.0, 2.0])
>>> res.status.value, bool(res.error_bound < 1e-12)
('success', True)
>>> c.stationary("given", x0=[2.0, 1.0], check=False).status.value
'inaccurate'
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels.sweeps import state_levels
from .options import Tolerances
from .results import Status

__all__ = ["GivenOptions", "given"]


@dataclass(frozen=True)
class GivenOptions(Tolerances):
    """Options of ``given``: the law, whether to bound its error, and a level for the bound.

    Attributes
    ----------
    x0 : array_like
        The law to evaluate: one finite value >= 0 per state of the chain, total > 0
        (need not be normalised). Required.
    bound : bool
        Compute the proven error bound (default True), as for the other methods; False
        skips its solve: ``error_bound`` is NaN and ``error_tol`` is not applied.
    levels : str, Expr or array_like of int, optional
        A level that every transition moves by at most one (a variable's name, an
        expression or one integer per state): the bound's return times are then solved
        on the levels (:class:`ctmc.kernels.levels.LevelSystem`, one process).
    """

    x0: object = None
    bound: bool = True
    levels: object = None

    def __post_init__(self):
        super().__post_init__()
        if self.x0 is None:
            raise ValueError("x0: the 'given' method needs the law to evaluate (one value >= 0 per state)")
        try:
            x = np.asarray(self.x0, dtype=float)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"x0: expected one finite value >= 0 per state, got {type(self.x0).__name__} "
                             f"({exc})") from None
        if x.ndim != 1:
            raise ValueError(f"x0: expected a vector of one value per state, got shape {x.shape}")
        bad = np.flatnonzero(~np.isfinite(x))
        if bad.size:
            raise ValueError(f"x0: expected finite values, got {x[bad[0]]} at state {bad[0]} "
                             f"({bad.size} non-finite in all)")
        neg = np.flatnonzero(x < 0)
        if neg.size:
            raise ValueError(f"x0: expected values >= 0, got {x[neg[0]]:.3e} at state {neg[0]} "
                             f"({neg.size} negative in all)")
        if not x.sum() > 0:
            raise ValueError("x0: expected a positive total, got a law of total 0")
        if not isinstance(self.bound, (bool, np.bool_)):
            raise ValueError(f"bound: expected True or False, got {self.bound!r}")
        object.__setattr__(self, "x0", x)


def _check_level_steps(op, support, lev):
    """Refuse levels that a transition within the class moves by more than one (before any evidence)."""
    rows = op.generator_rows().tocoo()
    keep = support[rows.row]
    step = lev[rows.col[keep]] - lev[op.start + rows.row[keep]]
    bad = int(op.allsum(float(np.count_nonzero(np.abs(step) > 1))))
    if bad:
        raise ValueError(f"levels: the level bound needs every transition to move the level by at most one; "
                         f"{bad} transitions move it further")


def given(op, support, opts: GivenOptions, hint, ctx):
    """The ``given`` method: ``x0`` on the owned rows of the class, for the driver to grade and bound."""
    x = opts.x0
    if x.shape != (op.n,):
        raise ValueError(f"x0: expected one value per state ({op.n}), got {x.size}")
    own = x[op.start:op.stop]
    total = op.allsum(float(own.sum()))
    off = op.allsum(float(own[~support].sum()))
    if not off < total:
        raise ValueError("x0: the given law has no mass on the closed class being solved")
    if opts.levels is not None:
        lev = state_levels(op, opts.levels)
        _check_level_steps(op, support, lev)
        ctx.info["_levels"] = lev              # the bound's return times by levels (stationary._evaluate)
    if not opts.bound:
        ctx.info["_bound"] = False             # no bound's solve: error_bound NaN
        ctx.info["error_bound_kind"] = "none (bound=False: not computed)"
    msg = "given law"
    if off > 0:
        ctx.info["mass_off_class"] = off / total
        msg += f" ({off / total:.1e} of its mass outside the closed class, dropped)"
    return np.where(support, own, 0.0), 0, Status.SUCCESS, msg
