r"""Gauss-Seidel sweeps, the stopping rule of the stationary iterations, dense GTH on a class.

The sweeps solve :math:`(sI - Q_{XX})\,x = b` (passage systems) or
:math:`Q^T x = 0` on a class (stationary laws, renormalised after each sweep)
state by state: with :math:`Q = R - \mathrm{diag}(q)`,

.. math::

    x_j \leftarrow (1 - \omega)\, x_j + \omega\,
    \frac{b_j + \sum_{i \ne j} R_{ij} x_i}{s + q_j}

in the current values (compiled kernels, :mod:`ctmc._relax`; on each process's
block when distributed, the other blocks from the previous sweep). The
iterations stop by :class:`Stop`: normwise first, then component-wise, so the
small entries are right where the method converges (:func:`polish_sweeps`
applies the same rule to the answer of a Krylov solve).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._relax import sweep
from ..expr import Expr
from ..linalg import gth_solve
from ..results import Status
from .evidence import balance_error

__all__ = ["start_vector", "Stop", "Sweeper", "polish_sweeps", "gth_dense", "state_levels"]

_TINY = np.finfo(float).tiny


def start_vector(op, support, x0):
    """The first iterate of a stationary iteration on ``support`` (owned part, summing to one): ``x0``
    restricted to the class and normalised, or uniform on it (``x0`` None)."""
    if x0 is None:
        x = support.astype(float)
        return x / op.allsum(float(x.sum()))
    x = np.array(x0, dtype=float)
    if x.shape != (op.n,) or (x < 0).any() or not x.sum() > 0:
        raise ValueError(f"x0: expected a non-negative vector of shape ({op.n},)")
    x = np.where(support, x[op.start:op.stop], 0.0)
    tot = op.allsum(float(x.sum()))
    if not tot > 0:
        raise ValueError("x0: no mass on the closed class")
    return x / tot


class Stop:
    """The stopping rule of the stationary iterations: normwise, then component-wise.

    An iteration is converged in norm when ``||x Q||_1 / (sum(x) max|q_ii|) <= tol``;
    it then goes on (for at most as many iterations again, plus 10) until the
    balance error is at most ``tail_tol`` too, so that where the method
    converges the small probabilities are right as well, and the grading says
    so when they are not.
    """

    def __init__(self, op, opts):
        self.op, self.opts = op, opts
        self.norm_it = None
        self.rel = np.inf

    def __call__(self, it, x, r) -> bool:
        op = self.op
        g = op.allsum(np.array([np.abs(r).sum(), x.sum()]))
        self.rel = g[0] / (g[1] * op.qmax)
        if not self.rel <= self.opts.tol:
            return False
        if self.norm_it is None:
            self.norm_it = it
        bal = balance_error(op, x, r, floor=_TINY * g[1])   # x is normalised only every few steps
        return bal <= self.opts.tail_tol or it >= 2 * self.norm_it + 10


class Sweeper:
    """Gauss-Seidel / SOR sweeps over the owned block (compiled kernels, :mod:`ctmc._relax`);
    the other processes' blocks are taken from the previous sweep.

    Calling it sweeps ``Q^T x = 0`` on the set ``support`` and renormalises
    (the stationary iterations); :meth:`relax` sweeps the passage system
    ``(shift I - Q_XX) x = b`` (``transpose=False``) or its transpose on
    ``X = support``, without renormalising.
    """

    def __init__(self, op, support, shift: float = 0.0, transpose: bool = True):
        self.op, self.support = op, support
        A = op.local_rows(transpose=transpose).tocsr()     # rates R (or R^T): owned rows, global columns
        keep = support.astype(float)
        full_support = op.gather(keep, "all") if op.size > 1 else keep
        A = (sp.diags(keep) @ A @ sp.diags(full_support)).tocsr()
        # R_XX - diag(shift + q) on the owned block (unit rows outside the set keep x = 0 there)
        local = (A[:, op.start:op.stop] - sp.diags(np.where(support, float(shift) + op.exit_rates, -1.0))).tocsr()
        local.sort_indices()
        local.data = np.ascontiguousarray(local.data, dtype=float)
        self.local = local
        self.ghosts = None
        if op.size > 1:
            g = A.tolil()
            g[:, op.start:op.stop] = 0.0
            self.ghosts = g.tocsr()

    def __call__(self, x, omega=1.0, direction="forward"):
        """One sweep on ``x`` (owned, contiguous), in place; then ``x`` is renormalised.

        Returns False when the iterate stopped being a positive finite vector.
        """
        self.relax(x, None, omega, direction)
        s = self.op.allsum(float(x.sum()))
        if not np.isfinite(s) or s <= 0:
            return False
        x /= s
        return True

    def relax(self, x, b=None, omega=1.0, direction="forward"):
        """One sweep on ``(shift I - Q_XX) x = b`` (owned parts; ``b = None``: 0), ``x`` in place."""
        op = self.op
        rhs = np.zeros_like(x) if b is None else -np.where(self.support, b, 0.0)
        if self.ghosts is not None:
            rhs -= self.ghosts @ op.gather(x, "all")
        sweep(self.local, x, rhs, omega, direction)


def polish_sweeps(sweep_pair, measure, budget: int, tail_tol: float):
    """Symmetric sweeps until the balance error ``measure()`` meets ``tail_tol`` or stalls.

    ``sweep_pair()`` runs one forward and one backward sweep (False: the
    iterate broke down). Sweeps go in blocks of 25; the loop stops when the
    balance error is at most ``tail_tol`` or has fallen by less than 10 %
    over the last 100 sweeps, or after ``budget`` sweeps. Returns
    ``(sweeps, last balance error)``; one rule for stationary laws and
    passage systems.
    """
    history = [measure()]
    k = 0
    while k < budget and not history[-1] <= tail_tol:
        for _ in range(min(25, budget - k)):
            if not sweep_pair():
                return k, history[-1]
            k += 1
        history.append(measure())
        if len(history) > 4 and not history[-1] <= 0.9 * history[-5]:
            break
    return k, history[-1]


def gth_dense(op, support):
    """The stationary law of the class ``support`` by dense GTH elimination (gathered on every process).

    Returns ``(x owned or None, 0, status, message)``, a stationary method's result.
    """
    idx = np.flatnonzero(op.gather(support.astype(float), "all") > 0.5)
    rows = op.gather_rows(support)
    A = rows[:, idx].toarray()
    xs = gth_solve(A) if idx.size > 1 else np.ones(1)
    if not np.all(np.isfinite(xs)):
        return None, 0, Status.BREAKDOWN, "GTH produced non-finite values (rates spanning > 1e300?)"
    x = np.zeros(op.stop - op.start)
    own = (idx >= op.start) & (idx < op.stop)
    x[idx[own] - op.start] = xs[own]
    return x, 0, Status.SUCCESS, "GTH elimination"


def state_levels(op, spec, name: str = "levels") -> np.ndarray:
    """The level of every state (replicated), from a variable name, an expression or an array
    (errors name the option ``name``)."""
    if isinstance(spec, str) or isinstance(spec, Expr):
        if op.states is None:
            raise ValueError(f"{name}: this chain has no state table; give one integer per state")
        env = op.states.as_dict()
        lev = env[spec] if isinstance(spec, str) and spec in env else None
        if lev is None:
            if isinstance(spec, str):
                raise ValueError(f"{name}: no state variable {spec!r}; variables are {list(env)}")
            lev = spec.evaluate(env)
    else:
        lev = spec
    lev = np.asarray(lev)
    if lev.shape != (op.n,) or lev.dtype.kind not in "iub":
        raise ValueError(f"{name}: expected one integer per state ({op.n}), got shape {lev.shape} and "
                         f"dtype {lev.dtype}")
    return lev.astype(np.int64) - int(lev.min())


