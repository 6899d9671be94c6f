r"""The return times of the error bound, solved on a second core while the stationary solve runs.

The error bound of an iterative answer (:func:`ctmc.kernels.evidence.iterative_bound`) needs
the mean times :math:`m = M^{-1}1` to reach a pin :math:`k`, :math:`M = -Q_{XX}` on the
class without :math:`k`: a system that does not involve :math:`\pi` at all. A Krylov
solve of :math:`\pi` is pinned on a probable state before it starts
(:func:`ctmc.kernels.classes.walk_pin`), so :math:`m` for that pin can be solved beside it,
on a thread of its own: both solves spend their time in compiled kernels that release
the interpreter lock, and where two cores are free the bound then costs the
wall time of what is left of its solve after the stationary one (none on the gallery
models, where it takes half the iterations).

:class:`ReturnTimesAhead` is the return-time *system* :func:`iterative_bound` takes
(``system=``): its first solve of :math:`M y = 1` is the one made ahead, every
other solve (the refinements on the residual) runs on the same set-up system, in
the caller's thread. The bound is proven exactly as for any other solver: from the
residual :math:`1 - M\hat m` recomputed by the caller, whatever computed
:math:`\hat m`; a pin other than the argmax of :math:`\pi` is used only while
:math:`\pi_k` is at least :data:`AHEAD_PIN_SHARE` of the largest probability (the bound
divides by it), and a bound that misses ``error_tol`` is computed again the usual
way at the argmax (:func:`bound_ahead`).
"""
from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np

from .._util import available_memory, cores
from ..progress import progress_scope
from ..sets import unit_mask
from .classes import global_argmax
from . import evidence
from .evidence import BOUND_BRACKET, iterative_bound, value_at
from .levels import return_time_systems
from .plan import BUDGET_FRACTION, beside_fits

__all__ = ["ReturnTimesAhead", "bound_ahead", "close_ahead", "AHEAD_STATES", "AHEAD_PIN_SHARE"]

#: classes from this many states get their return times ahead (below, a solve takes milliseconds and a
#: thread is not worth its start)
AHEAD_STATES = 20_000
#: the pin of the solve serves the bound while its probability is at least this share of the largest
AHEAD_PIN_SHARE = 0.25


class ReturnTimesAhead:
    """The solve of :math:`M y = 1` (``M = -Q_XX``, ``X`` the class without ``pin``) on a thread of its own.

    Made by :meth:`start`; ``solve(b, transpose=False)`` returns the solve made ahead for the
    right-hand side of ones on ``X`` (waiting for it) and solves any other on the same system
    in the caller's thread; :meth:`close` waits for the thread and frees the system.
    ``cpu_seconds`` is the thread's CPU time (``info["return_time_ahead_cpu"]`` of the result);
    ``error`` what its solve raised, if it did (the solve is then made again in the caller's thread,
    where the error, if it holds, is raised; ``info["return_time_ahead_error"]``).
    """

    def __init__(self, op, support, pin: int, backend_options=None):
        self.pin, self.members = int(pin), support & ~unit_mask(op, pin)
        # (read at each start: the bound's own solver, however it is set at the time)
        spec = dataclasses.replace(evidence.RETURN_SPEC, bracket=BOUND_BRACKET)
        self.kind = spec.kind                   # (iterative_bound does not run this solver again)
        self.system = op.system(self.members, 0.0, spec, backend_options or {})
        # the set-up (which may release the operator's Q^T) here, in the caller's thread: the thread
        # below touches only the system's own matrix and vectors
        self.system.solve(np.zeros(self.members.shape), transpose=False)
        # its right-hand side and its solver's vectors made here too: from the memory the caller's thread
        # freed (Q^T's, after the search for closed classes), not beside it in the thread's own allocator
        self._b = self.members.astype(float)
        self.system.reserve()
        self._out, self.error, self.cpu_seconds = None, None, 0.0
        self._thread = threading.Thread(target=self._run, name=f"ctmc return times to {self.pin}",
                                        daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, op, support, pin: int, size: int, backend_options=None):
        """A :class:`ReturnTimesAhead` where it can pay (the scipy backend on one process, two cores,
        ``size`` states from :data:`AHEAD_STATES`) and fits: the plan's rule for the peak
        (:func:`ctmc.kernels.plan.beside_fits`: what both solves add within
        :data:`~ctmc.kernels.plan.BUDGET_FRACTION` of the available memory, and the generator and it within
        :data:`~ctmc.kernels.plan.PEAK_BYTES_PER_TRANSITION` a transition), else None."""
        if op.size != 1 or op.backend != "scipy" or cores() < 2 or size < AHEAD_STATES:
            return None
        from ..backends.scipy_backend import MASKED_STATES
        budget, matrices = BUDGET_FRACTION * available_memory(), op.n - size > MASKED_STATES
        # the class's stored entries are at most Q's (a state of a class of many has its diagonal stored), and
        # without the systems' matrices the rule is monotone in them: where even Q's do not fit, the class's
        # are not counted (its row counts, a vector and a half, beside Q^T just before the solve)
        if not matrices and not beside_fits(op.n, op.Q.nnz, size, op.Q.nnz, budget):
            return None
        entries = size + int(np.sum(op.offdiagonal_counts(), where=support))
        if not beside_fits(op.n, op.Q.nnz, size, entries, budget, matrices=matrices):
            return None
        try:
            return cls(op, support, pin, backend_options)
        except MemoryError:
            return None

    def _run(self):
        t0 = time.thread_time()
        try:
            with progress_scope(False):          # one progress line: the stationary solve's
                self._out = self.system.solve(self._b, transpose=False)
        except Exception as exc:                 # kept for the record; solve() makes it again
            self.error = exc
        finally:
            self.cpu_seconds = time.thread_time() - t0

    def solve(self, b, transpose=False):
        """``(x, SolveReport)`` of ``M x = b``: the solve made ahead when ``b`` is the ones on ``X`` (its own
        ``x``, to be read only; a failed one is made again here, where its error is raised)."""
        self._thread.join()
        if self._out is not None and not transpose and np.array_equal(b, self._b):
            return self._out                   # (not a copy: the caller reads it, as return_time_bound does)
        return self.system.solve(b, transpose=transpose)

    def close(self):
        """Wait for the thread; free the system."""
        self._thread.join()
        self._out = self._b = None
        self.system.close()


def close_ahead(ahead) -> None:
    """:meth:`ReturnTimesAhead.close` of ``ahead`` (None: nothing)."""
    if ahead is not None:
        ahead.close()


def bound_ahead(ahead, op, support, pi, size: int, backend_options, info: dict, error_tol: float,
                solver=None, levels=None) -> tuple:
    """``(bound, kind, pin)``: :func:`iterative_bound` (or ``solver``, a function of its signature) of
    ``pi`` with the return-time system ``ahead`` where its pin serves (None: at the argmax of ``pi``).

    A :class:`ReturnTimesAhead`'s pin serves while its probability is at least
    :data:`AHEAD_PIN_SHARE` of the largest; a bound from it above ``error_tol`` is computed
    again at the argmax, as is one that is only an estimate (a proven bound is kept before an estimate,
    else the smaller, with its evidence in ``info``).
    Without ``ahead``, the return-time systems on levels of
    :func:`ctmc.kernels.levels.return_time_systems` (``levels``: ``level_iad``'s or ``"given"``'s,
    tried first; else levels found from the chain's variables, tried after BiCGStab) serve each pin.
    """
    top, pin = global_argmax(op, pi)
    mine = getattr(ahead, "pin", pin)
    if mine != pin and not value_at(op, pi, mine) >= AHEAD_PIN_SHARE * top:
        ahead, mine = None, pin

    def bound_at(k, system, out):
        first, later = return_time_systems(op, support & ~unit_mask(op, k), levels, out)
        try:
            return (solver or iterative_bound)(op, support, pi, k, size, backend_options, out,
                                               error_tol=error_tol, system=first if system is None else system,
                                               later=later)
        finally:
            if first is not None:               # (PETSc's sweeps: freed here, on every process alike)
                first.close()

    first = {}
    bound, kind = bound_at(mine, ahead, first)
    if isinstance(ahead, ReturnTimesAhead):      # (its thread's CPU seconds, beside the caller's)
        first.update(return_time_ahead=True, return_time_ahead_cpu=ahead.cpu_seconds)
        if ahead.error is not None:
            first["return_time_ahead_error"] = f"{type(ahead.error).__name__}: {ahead.error}"
    if (bound <= error_tol and kind == "proven") or mine == pin:
        info.update(first)
        return bound, kind, mine
    again = {}
    other, other_kind = bound_at(pin, None, again)
    proven = (other_kind == "proven", kind == "proven")
    if not np.isfinite(bound) or proven[0] > proven[1] or (proven[0] == proven[1] and other <= bound):
        info.update(again)
        return other, other_kind, pin
    info.update(first)
    return bound, kind, mine
