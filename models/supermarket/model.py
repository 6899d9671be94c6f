r"""The exact finite-n supermarket system (:class:`Supermarket`) and its automatic capacity.

Measures
--------
Tails :math:`u_k = E[M_k] / n` (the fraction of queues with at least
:math:`k` jobs, also the law of a tagged queue: :math:`P(q \ge k)`), the
tagged-queue law :math:`f_k = u_k - u_{k+1}`, the mean number of jobs per
server :math:`\sum_{k \ge 1} u_k`, the loss probability :math:`P_{loss} =
E[S_B]` (PASTA) and the mean sojourn time of an accepted job
:math:`\sum_k u_k / (\lambda (1 - P_{loss}))` (Little). Flow balance gives the
exact check :math:`u_1 = \lambda (1 - P_{loss})`.

Truncation
----------
With ``capacity=None`` the infinite-buffer system is approximated by the
smallest capacity :math:`B` whose *boundary mass*
:math:`\beta_B = P(M_B \ge 1)` (the stationary probability that some queue
is full, i.e. that the truncation can act at all) is at most ``tol``. The
truncated and the infinite chains have the same rates outside these states,
so :math:`\beta_B` measures the neglected mass; it is estimated in the
truncated chain itself, and the loss probability (always smaller) is reported
next to it (:class:`Truncation`). The search solves a few small capacities
first, extrapolates the geometric decay of the boundary mass to jump ahead
(each jump at most multiplies the state count by 8), then bisects back to the
smallest capacity meeting ``tol``. This is an estimate measured in the
truncated chain, not a proven bound: blocking makes the truncated chain
slightly lighter than the infinite one, and the tests check it against larger
capacities.
"""
from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np

import ctmc
from ctmc.progress import CtmcWarning, Progress

from .params import check_model, int_param
from .occupancy import (n_occupancy_states, occupancy_generator, occupancy_model, occupancy_states,
                        sample_all_at_least)

__all__ = ["Supermarket", "Truncation", "TruncationWarning", "MAX_STATES", "BACKENDS"]

#: where :class:`Supermarket` builds and solves its chain
BACKENDS = ("scipy", "petsc")
#: stationary methods of the distributed route ("auto": "lu", the direct solve by MUMPS)
_PETSC_METHODS = ("lu", "gmres", "bicgstab", "eig")

#: Largest occupancy chain :class:`Supermarket` builds unless told otherwise.
MAX_STATES = 4_000_000


class TruncationWarning(CtmcWarning, UserWarning):
    """The automatic capacity could not reach the boundary-mass tolerance (printed as one line)."""


# ---------------------------------------------------------------------------
# the exact finite-n system
# ---------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Truncation:
    """How the capacity was chosen and what it neglects.

    Attributes
    ----------
    capacity : int
        Per-queue capacity ``B`` of the chain.
    automatic : bool
        True when chosen by :class:`Supermarket` (``capacity=None``).
    tol : float
        Target for ``boundary_mass`` (automatic choice only).
    boundary_mass : float
        :math:`P(M_B \\ge 1)`: stationary probability that some queue is full
        (the states where the truncation acts).
    loss_probability : float
        Fraction of arrivals lost, :math:`E[S_B]`.
    decay : float
        Ratio :math:`P(M_B \\ge 1) / P(M_{B-1} \\ge 1)` (geometric decay of
        the maximum queue length near the boundary; nan if B = 1).
    tried : tuple
        ``(capacity, boundary_mass, n_states, seconds)`` of each chain solved.
    status : str
        ``"ok"``, ``"tolerance not met"`` (automatic choice stopped by
        ``max_states``) or ``"fixed"`` (capacity given by the user).
    """

    capacity: int
    automatic: bool
    tol: float
    boundary_mass: float
    loss_probability: float
    decay: float
    tried: tuple = ()
    status: str = "ok"


class Supermarket:
    r"""Exact power-of-d supermarket model with ``n`` queues (occupancy chain).

    Parameters
    ----------
    n : int >= 1
        Number of queues.
    d : int >= 1
        Queues sampled per arrival (``d <= n`` without replacement).
    lam : float > 0
        Arrival rate per server (total rate ``lam * n``; service rate 1).
        Must be < 1 when ``capacity`` is None.
    capacity : int >= 1, optional
        Per-queue capacity ``B``. None: the smallest ``B`` whose boundary
        mass :math:`P(M_B \ge 1)` is at most ``tol`` (see the module
        docstring and :attr:`truncation`).
    replacement : bool, default True
        Sample with replacement (the convention of the refined-mean-field
        literature) or without.
    tol : float, default 1e-8
        Boundary-mass target of the automatic capacity.
    method : str, default "auto"
        ``"level-iad"`` (ctmc's ``"level_iad"`` with the total number of jobs as the level) or any method of
        :meth:`ctmc.CTMC.stationary`; ``"auto"`` uses ctmc's ``"auto"`` (GTH or
        sparse LU) up to 2000 states and ``"level-iad"`` above (sparse LU
        fills in badly on these many-dimensional chains).
    max_states : int
        Refuse to build a larger chain (ValueError before any heavy work;
        the automatic search stops below it and reports the tolerance as not met).
    backend : {"scipy", "petsc"}, default "scipy"
        ``"scipy"``: the chain is assembled by the combinatorial ranking of
        :func:`~ctmc.models.supermarket.occupancy_generator` in one process.
        ``"petsc"``: the same chain declared as a :class:`ctmc.Model`
        (:func:`~ctmc.models.supermarket.occupancy_model`) is assembled by
        :meth:`ctmc.backends.petsc_backend.DistributedChain.from_model` over the
        MPI processes (run under ``mpirun``; each process holds its block of
        rows only) and solved there (``method`` ``"auto"`` is ``"lu"``, MUMPS;
        or ``"gmres"``, ``"bicgstab"``, ``"eig"``); the measures are sums over
        the blocks, the same on every process.

    Examples
    --------
    d = 1 is a set of independent M/M/1/B queues:

    >>> s = Supermarket(3, 1, 0.5, capacity=6)
    >>> abs(s.tail()[2] - 0.5 ** 2 * (1 - 0.5 ** 5) / (1 - 0.5 ** 7)) < 1e-12
    True
    >>> s.truncation.status
    'fixed'
    """

    def __init__(self, n, d, lam, capacity=None, replacement=True, *, tol: float = 1e-8,
                 method: str = "auto", max_states: int = MAX_STATES, backend: str = "scipy"):
        self.n, self.d, self.lam, capacity, self.replacement = check_model(n, d, lam, capacity, replacement)
        if backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0 < tol < 1:
            raise ValueError(f"tol: expected a boundary-mass tolerance in (0, 1), got {tol!r}")
        self.tol = float(tol)
        self.max_states = int_param("max_states", max_states, 1)
        from ctmc.stationary import METHODS
        valid = (["auto", "ctmc-auto", *_SOLVERS, *sorted(METHODS)] if backend == "scipy"
                 else ["auto", *_PETSC_METHODS])
        if method not in valid:
            raise ValueError(f"method: expected one of {valid}, got {method!r}")
        self.method = method
        self.level_tol = 1e-12
        if capacity is not None and n_occupancy_states(self.n, capacity) > self.max_states:
            raise ValueError(f"capacity: C(n+B, B) = {n_occupancy_states(self.n, capacity)} states "
                             f"exceed max_states={self.max_states}")
        self._capacity = capacity
        self._chain = None
        self._res = None
        self._trunc = None
        self.build_seconds = None

    def __repr__(self):
        B = self._capacity if self._capacity is not None else "auto"
        return (f"Supermarket(n={self.n}, d={self.d}, lam={self.lam}, capacity={B}, "
                f"replacement={self.replacement})")

    # building and solving -------------------------------------------------
    def _solve(self, B):
        if self.backend == "petsc":
            return self._solve_distributed(B)
        t0 = time.perf_counter()
        M = occupancy_states(self.n, B)
        Q = occupancy_generator(self.n, self.d, self.lam, B, self.replacement, M=M)
        m = np.empty((M.shape[0], B + 1), dtype=np.int32)
        m[:, 0] = self.n - M[:, 0]
        for k in range(1, B):
            m[:, k] = M[:, k - 1] - M[:, k]
        m[:, B] = M[:, B - 1]
        del M
        chain = ctmc.CTMC(Q, {f"m{k}": m[:, k] for k in range(B + 1)})
        build = time.perf_counter() - t0
        chain.build_info = {"strategy": "occupancy ranking", "n_states": chain.n_states,
                            "n_transitions": chain.n_transitions, "seconds": build}
        method = self.method
        if method == "auto":
            method = "ctmc-auto" if chain.n_states <= _SMALL_CHAIN else "level-iad"
        res = _SOLVERS.get(method, _solve_ctmc)(self, chain, B, method)
        return chain, res, build, time.perf_counter() - t0

    def _solve_distributed(self, B):
        # the declared chain assembled over the MPI processes: each holds its block of rows only
        from ctmc.backends.petsc_backend import DistributedChain
        t0 = time.perf_counter()
        dc = DistributedChain.from_model(occupancy_model(self.n, self.d, self.lam, B, self.replacement),
                                         {f"M{k}": 0 for k in range(1, B + 1)}, max_states=self.max_states)
        build = dc.build_seconds
        method = "lu" if self.method == "auto" else self.method
        res = dc.stationary(method, backend_options={"gather": "none"})
        return dc, res, build, time.perf_counter() - t0

    def _tail_counts(self, chain, B):
        """``[M_0, ..., M_B]`` on the states whose probabilities ``res.pi`` holds (a process's own rows
        of a distributed chain)."""
        names = chain.states.names
        if "M1" in names:            # the declared model (occupancy_model)
            lo, hi = (chain.start, chain.stop) if self.backend == "petsc" else (0, chain.n_states)
            M = [np.asarray(chain.states[f"M{k}"][lo:hi], dtype=np.int64) for k in range(1, B + 1)]
            return [np.full(hi - lo, self.n, dtype=np.int64)] + M
        M = [np.full(chain.n_states, self.n, dtype=np.int64)]
        acc = np.zeros(chain.n_states, dtype=np.int64)
        for k in range(B, 0, -1):
            acc = acc + chain.states[f"m{k}"]
            M.insert(1, acc.copy())
        return M

    def _measures(self, chain, res, B):
        pi = res.pi
        M = self._tail_counts(chain, B)
        parts = [pi @ Mk for Mk in M] + [pi[M[k] >= 1].sum() for k in range(B + 1)] \
            + [pi @ sample_all_at_least(M[B], self.n, self.d, self.replacement)]
        parts = np.array(parts, dtype=float)
        if self.backend == "petsc":       # sums over the processes' blocks
            parts = np.asarray(chain.allsum(parts), dtype=float)
        EM, reach, loss = parts[:B + 1], parts[B + 1:2 * B + 2], float(parts[-1])
        return EM, float(reach[B]), reach, loss

    def _run(self):
        if self._res is not None:
            return
        if self._capacity is not None:
            chain, res, build, secs = self._solve(self._capacity)
            EM, boundary, reach, loss = self._measures(chain, res, self._capacity)
            decay = reach[-1] / reach[-2] if self._capacity >= 2 and reach[-2] > 0 else float("nan")
            self._trunc = Truncation(capacity=self._capacity, automatic=False, tol=self.tol,
                                     boundary_mass=boundary, loss_probability=loss, decay=decay,
                                     tried=((self._capacity, boundary, chain.n_states, secs),), status="fixed")
        else:
            # the boundary mass falls geometrically in the capacity: its fall towards tol gives the time left
            with Progress(f"supermarket n={self.n} d={self.d}: capacity search") as prog:
                chain, res, build, EM, loss, self._trunc = self._auto(prog)
        self._chain, self._res, self.build_seconds = chain, res, build
        self._EM = EM
        self._loss = loss

    def _auto(self, prog=None):
        tried = []
        B = 2
        while True:
            chain, res, build, secs = self._solve(B)
            EM, boundary, reach, loss = self._measures(chain, res, B)
            tried.append((B, boundary, chain.n_states, secs))
            if prog is not None:
                prog.residual(boundary, self.tol, f"capacity {B} ({chain.n_states} states)", name="boundary mass")
            decay = reach[B] / reach[B - 1] if reach[B - 1] > 0 else 0.0
            if boundary <= self.tol:
                best = (B, chain, res, build, EM, loss, boundary, decay)
                # the jump may have overshot: bisect down to the smallest capacity meeting tol
                lo = max([b for b, bm, _, _ in tried if bm > self.tol], default=B - 1)
                hi = B
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    chain, res, build, secs = self._solve(mid)
                    EM, boundary, reach, loss = self._measures(chain, res, mid)
                    tried.append((mid, boundary, chain.n_states, secs))
                    if boundary <= self.tol:
                        hi = mid
                        decay = reach[mid] / reach[mid - 1] if reach[mid - 1] > 0 else 0.0
                        best = (mid, chain, res, build, EM, loss, boundary, decay)
                    else:
                        lo = mid
                B, chain, res, build, EM, loss, boundary, decay = best
                trunc = Truncation(capacity=B, automatic=True, tol=self.tol, boundary_mass=boundary,
                                   loss_probability=loss, decay=decay, tried=tuple(tried), status="ok")
                return chain, res, build, EM, loss, trunc
            # predict the capacity meeting tol from the geometric decay of the boundary mass:
            # across the capacities already solved when there are two, else from the decay of
            # P(M_k >= 1) inside the chain below the (blocking-inflated) boundary level
            if len(tried) >= 2 and tried[-2][1] > boundary > 0:
                r = (boundary / tried[-2][1]) ** (1.0 / (B - tried[-2][0]))
            else:
                r = reach[B - 1] / reach[B - 2] if B >= 3 and reach[B - 2] > 0 else decay
            r = min(max(r, 1e-6), 0.999)
            jump = math.ceil(math.log(self.tol / boundary) / math.log(r)) if boundary > 0 else 1
            nxt = B + max(1, jump)
            grow = max(8 * chain.n_states, 50_000)   # keep each step's cost bounded
            while nxt > B + 1 and n_occupancy_states(self.n, nxt) > min(self.max_states, grow):
                nxt -= 1
            if n_occupancy_states(self.n, nxt) > self.max_states:
                warnings.warn(f"Supermarket(n={self.n}, d={self.d}, lam={self.lam}): capacity {B} leaves a "
                              f"boundary mass {boundary:.2e} > tol={self.tol:.0e}, and capacity {B + 1} "
                              f"would need {n_occupancy_states(self.n, B + 1)} states > "
                              f"max_states={self.max_states}", TruncationWarning, stacklevel=4)
                trunc = Truncation(capacity=B, automatic=True, tol=self.tol, boundary_mass=boundary,
                                   loss_probability=loss, decay=decay, tried=tuple(tried),
                                   status="tolerance not met")
                return chain, res, build, EM, loss, trunc
            del chain, res
            B = nxt

    # public measures ------------------------------------------------------
    @property
    def capacity(self) -> int:
        """Per-queue capacity ``B`` of the chain (solves if chosen automatically)."""
        self._run()
        return self._trunc.capacity

    @property
    def truncation(self) -> Truncation:
        """:class:`Truncation` report: capacity, boundary mass, loss, search history."""
        self._run()
        return self._trunc

    def chain(self):
        """The occupancy chain: a :class:`ctmc.CTMC` with states ``m0 .. mB`` (number of queues with
        k jobs), or with ``backend="petsc"`` the
        :class:`~ctmc.backends.petsc_backend.DistributedChain` of :meth:`model` (states ``M1 .. MB``)."""
        self._run()
        return self._chain

    def model(self) -> ctmc.Model:
        """The chain declared as a :class:`ctmc.Model` (:func:`~ctmc.models.supermarket.occupancy_model`
        at :attr:`capacity`): build it on any backend from ``{"M1": 0, ..., "MB": 0}``.

        >>> s = Supermarket(3, 2, 0.8, capacity=4)
        >>> s.model().build(initial={f"M{k}": 0 for k in range(1, 5)}).n_states == s.chain().n_states
        True
        """
        return occupancy_model(self.n, self.d, self.lam, self.capacity, self.replacement)

    def stationary(self) -> ctmc.StationaryResult:
        """Stationary result of :meth:`chain` (residual, balance error, timing; with
        ``backend="petsc"``, ``pi`` holds this process's block of states)."""
        self._run()
        return self._res

    def tail(self) -> np.ndarray:
        """``u_k = E[M_k] / n``, k = 0..B: fraction of queues with at least k jobs."""
        self._run()
        return self._EM / self.n

    def tagged_law(self) -> np.ndarray:
        """``f_k = P(a tagged queue holds k jobs)`` = E[m_k] / n, k = 0..B."""
        u = self.tail()
        return u - np.append(u[1:], 0.0)

    def mean_jobs_per_server(self) -> float:
        """``sum_{k >= 1} u_k``: mean number of jobs per queue."""
        return float(self.tail()[1:].sum())

    def loss_probability(self) -> float:
        """Fraction of arrivals lost because their chosen queue is full (PASTA)."""
        self._run()
        return self._loss

    def throughput(self) -> float:
        """Accepted jobs per unit time and per server, ``lam * (1 - loss)``."""
        return self.lam * (1.0 - self.loss_probability())

    def mean_sojourn_time(self) -> float:
        """Mean time an accepted job spends in the system (Little's law)."""
        return self.mean_jobs_per_server() / self.throughput()


def _solve_ctmc(model, chain, B, method):
    # any method of ctmc.CTMC.stationary ("ctmc-auto" is its "auto")
    return chain.stationary("auto" if method == "ctmc-auto" else method)


def _solve_levels(model, chain, B, method):
    level = sum(k * chain.states[f"m{k}"].astype(np.int64) for k in range(1, B + 1))
    res = chain.stationary("level_iad", levels=level, tol=model.level_tol, tail_tol=1e-8, check=False)
    return res.check(True)


#: stationary solvers of :class:`Supermarket` besides ctmc's own methods
_SOLVERS = {"level-iad": _solve_levels, "level_iad": _solve_levels}
#: chains up to this size are solved by ctmc's "auto" (GTH / sparse LU), larger by "level-iad"
_SMALL_CHAIN = 2000
