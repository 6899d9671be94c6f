r"""Hitting times and first passage: moments, transforms and joint laws.

Problem
-------
For a target set :math:`A` let :math:`T_A = \inf\{t \ge 0 : X_t \in A\}` and
split the other states :math:`T = A^c` into

* :math:`R`: states of :math:`T` from which :math:`A` can be reached;
* :math:`F \subseteq R`: states from which :math:`A` is reached *with
  probability one* (no path to a state that cannot reach :math:`A`).

With :math:`M = -Q_{FF}` (a nonsingular M-matrix), the moments of
:math:`T_A` solve (Kolmogorov backward equations)

.. math::

    M\, m_k = k\, m_{k-1}, \qquad m_0 = \mathbf 1, \qquad m_k = 0 \text{ on } A,

and :math:`m_k = \infty` on :math:`T \setminus F`. A reward rate :math:`r`
replaces :math:`k\, m_{k-1}` by :math:`k\, r \circ m_{k-1}` and gives the
moments of :math:`\int_0^{T_A} r(X_s)\,ds`. For :math:`s \ge 0`,

.. math::

    (sI - Q_{RR})\, \phi(s) = Q_{RA} \mathbf 1, \qquad
    \phi_i(s) = E_i[e^{-s T_A}]

(0 on :math:`T \setminus R`, 1 on :math:`A`), and with one column per target
state :math:`j`,

.. math::

    (sI - Q_{RR})\, \Phi(s) = Q_{RA}, \qquad
    \Phi_{ij}(s) = E_i[e^{-sT_A};\, X_{T_A} = j],

whose value at :math:`s = 0` is the absorption law :math:`P_i(X_{T_A} = j)`.
The joint distribution function :math:`P_i(T_A \le t, X_{T_A} = j)` is the
transient probability of :math:`j` in the chain where :math:`A` is made
absorbing, computed by uniformisation (:mod:`ctmc.transient`).

Setup is separated from solve: :class:`PassageSetup` finds the sets (by the
backend's reachability primitive) and keeps one set-up system per shift
:math:`s`, reused for every right-hand side (moments, rewards, target
columns). Everything here is written once on the primitives of
:mod:`ctmc.backends.base`, so every method runs on every backend.

Methods (the registry :data:`METHODS`)
--------------------------------------
``gth``
    Dense subtraction-free elimination (:class:`ctmc.linalg.TripletLU`):
    every component keeps relative accuracy, for means of :math:`10^{300}` or
    probabilities of :math:`10^{-200}`; :math:`O(n^3)`.
``lu``
    Sparse direct solve with diagonal pivots (the matrices are diagonally
    dominant M-matrices).
``gmres``, ``bicgstab``
    Krylov solves with a preconditioner.
``auto``
    By the structure of each set (the stationary plan,
    :func:`ctmc.kernels.plan.auto_plan`): ``gth`` up to 1000 unknowns, ``lu``
    on banded or two-dimensional chains, else GMRES with a Gauss-Seidel
    preconditioner; a stalled GMRES is redone by ``lu``, a failed sparse
    factorisation of up to :data:`~ctmc.kernels.plan.DENSE_FALLBACK` (4000)
    unknowns by ``gth``. In :func:`~ctmc.joint_passage.first_passage`,
    a set whose strongly connected components are each at most a quarter
    of it is solved block-triangularly along them (``btf``,
    :class:`~ctmc.passage_systems.BlockTriangularSystem`: one small factorisation per block, no
    fill between blocks; on several processes gathered and solved on each when it fits the
    memory), redone by ``lu`` if a block fails.

A method is a function returning the :class:`Route` of the solves on a set
(solver, imposed preconditioner, fallbacks), an options class and a line of
:data:`METHODS`; :class:`PassageSetup` applies the route.

Evidence
--------
Residuals are normwise backward errors
:math:`\|Mx-b\|_\infty / (\|M\|_\infty \|x\|_\infty + \|b\|_\infty)`, which
stay meaningful when means reach :math:`10^{100}`; ``info["balance_error"]``
is a component-wise check; for sparse solves ``info["condition"]`` is
:math:`\|M\|_\infty \|M^{-1}\|_\infty` (exact for an M-matrix, from one more
solve whose own status counts). Probability invariants (values in
:math:`[0, 1]`, rows summing to one where the target is reached almost
surely, non-negative finite moments) are checked on every answer. When a
sparse solve of hitting times is too ill-conditioned (a rare target), the
mean is recomputed through a regeneration state
(:func:`ctmc.passage_means.regenerative_mean`). Means beyond the double range
are solved in a scale of a power of two (:mod:`ctmc.passage_means`): the status
is ``INACCURATE``, the message names the overflow, ``mean`` is ``inf`` where it
overflows and ``info["log10_mean"]`` holds log10 of every mean.
"""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional

import numpy as np

from .backends import check_backend_options, operator_for
from .backends.base import SolveReport, System, worst
from .linalg import inverse_norm_bound
from .kernels.evidence import (COND_RTOL, grade_bound, grade_passage, inverse_norm_bound_of, mass_defect,
                               passage_bound)
from .kernels.plan import DENSE_FALLBACK, auto_plan, structure_facts
from .kernels.sweeps import Sweeper, polish_sweeps
from .kernels.registry import Method, deprecated_aliases
from .options import DirectOptions, GTHOptions, KrylovSolverOptions, Tolerances, linear_spec
from .options import make_options as _make_options
from .joint_passage import BLOCK_MEMORY, RESULT_MEMORY, RHS_BLOCK, block_width, rows_and_columns, solve_joint
from .transient import TAIL_EPS
from ._util import as_points
from .progress import Progress, scoped
from .results import FirstPassageResult, HittingResult, LaplaceResult, Status
from .passage_systems import BlockTriangularSystem, DenseSystem, ReplicatedSystem
from .passage_means import Scaled, overflow_text, regenerative_mean, scaled_solve
from .passage_means import row_norms as _row_norms
from .sets import owned_mask

__all__ = ["METHODS", "Route", "passage_bound", "PassageSetup", "hitting_times", "hitting_laplace",
           "first_passage", "grade_passage"]

_EPS = np.finfo(float).eps
#: why a failed solver was replaced (:class:`Route`)
_FALLBACK_TEXT = {"gmres": "GMRES: {status} ({reason}); used the sparse direct solver",
                  "lu": "sparse LU failed ({reason}); used the dense subtraction-free solver",
                  "btf": "block-triangular solve failed ({reason}); used the sparse direct solver"}


# --------------------------------------------------------------------------
# methods: each chooses the route of the solves on a set (PassageSetup applies it)
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    """How a passage method solves on a set.

    Attributes
    ----------
    kind : str
        The solver: ``"gth"``, ``"lu"``, ``"gmres"`` or ``"bicgstab"``.
    preconditioner : str, optional
        Imposed on a Krylov solve (None: the options' own).
    fallback : tuple of (str, str)
        ``(failed kind, next kind)``: a solve that breaks down or stalls is redone by the next
        solver (the dense one only for untransposed solves of up to 4000 unknowns).
    """

    kind: str
    preconditioner: Optional[str] = None
    fallback: tuple = ()


def _fixed(kind: str):
    """The method that solves every set by ``kind``."""
    def run(ps, on: str) -> Route:
        return Route(kind)
    return run


#: steps of the stationary ``auto`` plan (:func:`ctmc.kernels.plan.auto_plan`) -> passage solvers
_PLAN_KIND = {"gth": "gth", "lu": "lu", "gmres-probe": "gmres"}


def _auto(ps, on: str) -> Route:
    """``auto``: the first step of the stationary plan that a passage system has (no Gauss-Seidel
    solver here), by the structure of the set (:func:`ctmc.kernels.plan.structure_facts`): ``gth``
    up to 1000 unknowns, a sparse direct solve for banded or two-dimensional chains, else GMRES
    with a Gauss-Seidel preconditioner; a stalled GMRES is redone by the direct solver, a
    failed direct solve by the dense one."""
    facts = structure_facts(ps.op, ps.members(on))
    steps, reason = auto_plan(facts)
    k = next(_PLAN_KIND[p] for p in steps if p in _PLAN_KIND)
    if k == "gth" and ps.transposed:
        # adjoint solves, one per source, need a transposed solve: the sparse one (a small set); the
        # dense elimination would solve one system per target column on vectors of every state. On
        # several processes the small set is gathered and factorised on each (a distributed
        # factorisation there spans every state)
        k = "lu" if ps.op.size == 1 else "lu-replicated"
        reason = f"{reason}; few sources: adjoint solves by sparse LU (gth has no transposed solve)"
    if k != "gth" and ps.triangular:
        plan = BlockTriangularSystem.plan(ps.op, ps.members(on))
        if plan is not None:
            ps.btf[on] = plan
            reason = (f"{plan.n_components} strongly connected components, the largest "
                      f"{plan.largest} of {plan.n} states: block-triangular solve (instead of {k}: {reason})")
            k = "btf"
    ps.info.setdefault("auto", {})[on] = dict(facts, choice=k, reason=reason)
    return Route(k, preconditioner="sgs", fallback=(("gmres", "lu"), ("lu", "gth"), ("btf", "lu")))


#: passage methods by name (shared by the three passage analyses); ``auto`` is an entry like the others
METHODS = {
    "auto": Method(_auto, Tolerances, "chosen by the structure of each set (auto_plan), with fallbacks"),
    "gth": Method(_fixed("gth"), GTHOptions, "dense subtraction-free elimination"),
    "lu": Method(_fixed("lu"), DirectOptions, "sparse direct solve with diagonal pivots"),
    "gmres": Method(_fixed("gmres"), KrylovSolverOptions, "GMRES with a preconditioner"),
    "bicgstab": Method(_fixed("bicgstab"), KrylovSolverOptions, "BiCGStab with a preconditioner"),
}

#: old names, reachable with a DeprecationWarning naming the one name
__getattr__ = deprecated_aliases(__name__, {
    "PassageOptions": ("ctmc.options.Tolerances", Tolerances),
    "PassageGTHOptions": ("ctmc.options.GTHOptions", GTHOptions),
    "PassageLUOptions": ("ctmc.options.DirectOptions", DirectOptions),
    "PassageKrylovOptions": ("ctmc.options.KrylovSolverOptions", KrylovSolverOptions),
    "make_options": ("ctmc.options.make_options('passage', ctmc.passage.METHODS, method, options)",
                     lambda method, options: _make_options("passage", METHODS, method, options))})


# --------------------------------------------------------------------------
# sets and systems
# --------------------------------------------------------------------------
class PassageSetup:
    """Sets and set-up systems for first-passage problems into ``target``.

    Parameters
    ----------
    op : Operator
        The chain's primitives on one backend.
    target : ndarray of bool
        Owned part of the set ``A`` (non-empty).
    method : str
        A key of :data:`METHODS`.
    opts : ctmc.options.Tolerances
        The method's options (:data:`METHODS`).
    backend_options : dict

    Attributes
    ----------
    reach : ndarray of bool
        ``R``: non-target states that can reach ``A`` (owned part).
    finite : ndarray of bool
        ``F``: non-target states reaching ``A`` with probability one.
    """

    def __init__(self, op, target, method="auto", opts: Optional[Tolerances] = None, backend_options=None,
                 sources=None, triangular: bool = False):
        self.op, self.method = op, method
        self.triangular, self.btf = bool(triangular), {}
        self.transposed = False     # the solves asked for are transposed ones (auto avoids gth)
        self.opts = opts if opts is not None else METHODS[method].options()
        self.bo = backend_options or {}
        self.target = np.asarray(target, dtype=bool)
        other = ~self.target
        found = op.reach_by_products(self.target)      # a target a few events away from everywhere
        self.reach = (op.reach(self.target) if found is None else found) & other
        stuck = other & ~self.reach
        if op.allsum(float(stuck.sum())) > 0:
            doomed = op.reach(stuck, within=other) & other
        else:
            doomed = np.zeros_like(other)
        self.finite = other & ~doomed
        if sources is not None:
            # only the states the sources can visit before A: closed under the moves inside R, so the
            # solves restricted to it give the sources' rows exactly (a source deep in a
            # level-structured chain sees a small corner of it)
            seeds = np.asarray(sources, dtype=bool) & self.reach
            seen = op.reach(seeds, within=self.reach, forward=True) & self.reach
            self.reach, self.finite = seen, self.finite & seen
        op.product_roundoff()    # counted now: it reads Q^T (scipy), here now, released by a Krylov solve
        self._sys, self._route, self._kind, self._norms = {}, {}, {}, {}
        self._seen = {}       # (s, on) -> (largest ||x|| / ||b|| of its solves, its solve of M y = 1 or None)
        self._checked = None  # the last errors() computed: (key, x, b, result)
        self.info = {"processes": op.size}
        self.fallback = None

    def members(self, on: str) -> np.ndarray:
        return self.finite if on == "finite" else self.reach

    def count(self, on: str) -> int:
        return int(round(self.op.allsum(float(self.members(on).sum()))))

    def kind(self, on: str) -> str:
        """The solver used on the set ``on`` (``"gth"``, ``"lu"``, ``"gmres"`` or ``"bicgstab"``):
        the method's :class:`Route` (:data:`METHODS`), until a fallback replaces it."""
        if on not in self._kind:
            self._route[on] = route = METHODS[self.method].run(self, on)
            k = route.kind
            if k == "gth" and self.count(on) > getattr(self.opts, "max_states", DENSE_FALLBACK + 1000):
                raise ValueError(f"method: gth is dense O(n^3) and limited to max_states={self.opts.max_states}; "
                                 f"this system has {self.count(on)} unknowns (use 'lu' or raise max_states)")
            self._kind[on] = k
        return self._kind[on]

    def _spec(self, kind, on):
        spec = linear_spec(kind, self.opts, "passage")
        pc = self._route[on].preconditioner
        if pc is not None and kind == "gmres":      # auto's Krylov choice: Gauss-Seidel preconditioned
            spec = dataclasses.replace(spec, preconditioner=pc)
        return spec

    def system(self, s: float, on: str) -> System:
        key = (float(s), on)
        if key not in self._sys:
            kind = self.kind(on)
            if kind == "gth":
                self._sys[key] = DenseSystem(self.op, self.members(on), s)
            elif kind == "lu-replicated":
                self._sys[key] = ReplicatedSystem(self.op, self.members(on), s)
            elif kind == "btf":
                self._sys[key] = BlockTriangularSystem(self.op, self.members(on), s, self.btf[on])
            else:
                self._sys[key] = self.op.system(self.members(on), s, self._spec(kind, on), self.bo)
            self.info.update(self._sys[key].info)
        return self._sys[key]

    def release(self, s: float, on: str) -> None:
        """Close the set-up system of shift ``s`` on ``on`` (made again if asked for): one point's
        factorisation is not kept while the next point's is made."""
        sysm = self._sys.pop((float(s), on), None)
        if sysm is not None:
            sysm.close()

    def _switch(self, on, kind, why):
        self.fallback = why
        for key in [k for k in self._sys if k[1] == on]:
            self._sys.pop(key).close()
        self._kind[on] = kind

    def solve(self, s: float, on: str, b, transpose: bool = False, polish: bool = True):
        """Solve ``(sI - Q_XX) x = b`` (or the transpose) on the set ``on``; returns ``(x, SolveReport)``.

        Many right-hand sides (columns of ``b``) are solved in blocks of
        :data:`ctmc.joint_passage.RHS_BLOCK`, with progress between blocks (:class:`~ctmc.progress.Progress`).
        ``polish=False`` skips the Gauss-Seidel polish of a Krylov answer's small entries
        (for a solve whose norm alone is used, as :meth:`condition`'s).
        """
        b = np.asarray(b, dtype=float)
        ncols = b.shape[1] if b.ndim == 2 else 1
        if ncols <= RHS_BLOCK:
            return self._solve(s, on, b, transpose, polish)
        x = np.empty_like(b)
        reps = []
        with Progress(f"passage solves, {ncols} right-hand sides", total=ncols) as prog:
            for c0 in range(0, ncols, RHS_BLOCK):
                c1 = min(ncols, c0 + RHS_BLOCK)
                x[:, c0:c1], rep = self._solve(s, on, b[:, c0:c1], transpose)
                reps.append(rep)
                prog.update(done=c1)
        return x, SolveReport(worst(*(r.status for r in reps)), next((r.reason for r in reps[::-1] if r.reason), ""),
                              sum(r.iterations for r in reps))

    def _solve(self, s: float, on: str, b, transpose: bool = False, polish: bool = True):
        """:meth:`solve` on one block of right-hand sides.

        Under ``auto``, a Krylov solve that stalls or breaks down is redone by
        the direct solver, and a direct solve that meets an exactly singular
        pivot (cancellation on a nearly singular M-matrix: huge means) by the
        dense subtraction-free one, up to 4000 unknowns.
        """
        x, rep = self.system(s, on).solve(b, transpose)
        kind = self.kind(on)
        if polish and rep.status is Status.SUCCESS and kind in ("gmres", "bicgstab"):
            x = self._polish(s, on, x, b, transpose)
        if rep.status is Status.SUCCESS and not transpose and b.ndim == 1:
            self._note(s, on, x, b, rep)
        if rep.status in (Status.BREAKDOWN, Status.MAX_ITERATIONS):
            nxt = dict(self._route[on].fallback).get(kind)
            if nxt == "gth" and (transpose or self.count(on) > DENSE_FALLBACK):
                nxt = None                # the dense solver has no transposed solve, and a size limit
            if nxt is not None:
                self._switch(on, nxt, _FALLBACK_TEXT[kind].format(status=rep.status.value, reason=rep.reason))
                return self.solve(s, on, b, transpose, polish)
        return x, rep

    def _polish(self, s, on, x, b, transpose: bool = False):
        """Gauss-Seidel sweeps from a Krylov answer until its small entries balance too.

        ``M = sI - Q_XX`` (and ``M^T``: the adjoint solves of :func:`~ctmc.joint_passage.first_passage`) is an
        M-matrix and ``b >= 0``, so the answer is non-negative and each sweep corrects it
        state by state; the rule of :func:`ctmc.kernels.sweeps.polish_sweeps` (budget: the
        ``polish`` option).
        """
        budget = getattr(self.opts, "polish", KrylovSolverOptions.polish)
        if not budget:
            return x
        op, X = self.op, self.members(on)
        x = np.array(x, dtype=float)
        cols, bcols = x.reshape(x.shape[0], -1), np.asarray(b, dtype=float).reshape(x.shape[0], -1)
        made = []          # the sweeper, made at the first sweep: most Krylov answers need none
        done = 0
        for c in range(cols.shape[1]):
            xc = np.ascontiguousarray(np.where(X, np.maximum(cols[:, c], 0.0), 0.0))
            bc = bcols[:, c]

            def pair():
                if not made:
                    made.append(Sweeper(op, X, shift=s, transpose=transpose))
                made[0].relax(xc, bc, 1.0, "forward")
                made[0].relax(xc, bc, 1.0, "backward")
                return op.allmin(float(np.isfinite(xc).all())) > 0

            k = polish_sweeps(pair, lambda: self.errors(s, on, xc, bc, transpose)[1], budget, self.opts.tail_tol).sweeps
            cols[:, c] = xc
            done = max(done, k)
        self.info["polish_sweeps"] = max(done, self.info.get("polish_sweeps", 0))
        return x

    def rates_in(self, on: str, x, transpose: bool = False):
        """``R_XX x`` (or ``R_XX^T x``) on the owned part of ``X = on`` (zero elsewhere), by the operator's
        product with its rates (compiled on the scipy backend: :func:`ctmc.backends.csr.offdiagonal_product`)."""
        X = self.members(on)
        Xc = X if np.ndim(x) == 1 else X[:, None]
        return np.where(Xc, self.op.rates(np.where(Xc, x, 0.0), transpose), 0.0)

    def errors(self, s, on, x, b, transpose: bool = False):
        """Normwise backward error and component-wise balance error of a solution (global); the
        last answer checked is kept (the polish and the analysis check the same one)."""
        key, last = (float(s), on, bool(transpose)), self._checked
        if last is not None and last[0] == key and np.array_equal(last[1], x) and np.array_equal(last[2], b):
            return last[3]
        out = self._errors(s, on, x, b, transpose)
        self._checked = (key, np.array(x, dtype=float), np.array(b, dtype=float), out)
        return out

    def _errors(self, s, on, x, b, transpose: bool = False):
        op = self.op
        X = self.members(on)
        Xc = X if np.ndim(x) == 1 else X[:, None]
        x = np.where(Xc, x, 0.0)
        b = np.where(Xc, np.asarray(b, dtype=float), 0.0)
        d = float(s) + op.exit_rates
        d = d if np.ndim(x) == 1 else d[:, None]
        rx = self.rates_in(on, x, transpose)
        with np.errstate(invalid="ignore"):      # inf - inf of an overflowing answer: err = inf below
            r = d * x - rx - b
        norm_rows = self.row_norms(s, on, transpose)
        with np.errstate(invalid="ignore"):
            g = np.array([np.abs(r).max(initial=0.0), norm_rows.max(initial=0.0), np.abs(x).max(initial=0.0),
                          np.abs(b).max(initial=0.0)])
        g = np.array([op.allmax(v) for v in g])
        den = g[1] * g[2] + g[3]
        err = float(g[0] / den) if den > 0 else 0.0
        if not np.isfinite(err):
            err = np.inf
        # the component-wise balance d x = b + R x (or R^T x): subtraction-free for the M-matrix and
        # b >= 0 of every passage system, so each entry, however small, is checked on its own
        lhs, rhs = (d * x)[X], (b + rx)[X]
        den2 = np.maximum(np.abs(lhs), np.abs(rhs))
        # values below the smallest normal double carry no relative accuracy (as for stationary
        # laws): a transform of 1e-310 from a far state is not a failed balance
        ok = den2 >= np.finfo(float).tiny
        with np.errstate(invalid="ignore"):
            bal = float((np.abs(lhs - rhs)[ok] / den2[ok]).max()) if ok.any() else 0.0
        if not np.isfinite(bal):
            bal = np.inf
        return err, op.allmax(bal)

    def row_norms(self, s, on, transpose: bool = False) -> np.ndarray:
        """Absolute row sums of ``M = sI - Q_XX`` (or ``M^T``) on the owned part of ``X = on``, 0
        elsewhere; computed once per system (one product with the whole rate matrix)."""
        key = (float(s), on, bool(transpose))
        if key not in self._norms:
            self._norms[key] = _row_norms(self.op, self.members(on), s, transpose)
        return self._norms[key]

    def _note(self, s, on, x, b, rep):
        """Keep for :meth:`condition` ``||x|| / ||b||`` (``<= ||M^-1||``) and a solve of ``M y = 1``."""
        op, X = self.op, self.members(on)
        bn, xn = (op.allmax(float(np.abs(np.where(X, v, 0.0)).max(initial=0.0))) for v in (b, x))
        ratio, unit = self._seen.get((float(s), on), (0.0, None))
        if op.allmin(float(np.all(b[X] == 1.0))) > 0:
            unit = (x, rep)
        self._seen[(float(s), on)] = (max(ratio, xn / bn if bn > 0 else 0.0), unit)

    def condition(self, s, on):
        """An upper bound on ``||M||_inf ||M^-1||_inf`` on the set; ``(cond, status, reason)``.

        ``||M^-1||_inf`` by :func:`~ctmc.kernels.evidence.inverse_norm_bound_of` (proven, one-sided on the
        residual of ``M y = 1``): from the solve of ``M y = 1`` made before on the set (checked again),
        else from one more, stopped at the backward error ``1e-2 / hint`` (``hint = ||M|| ||x|| / ||b||`` of
        the set's solves, a lower estimate; a residual near 1e-2) and refined on its residual, and from
        the set's own solver if that leaves a residual above 1/2; an unconverged solve gives ``inf``.
        """
        op, X = self.op, self.members(on)
        if self.count(on) == 0:
            return 1.0, Status.SUCCESS, ""
        norm_m = op.allmax(self.row_norms(s, on).max(initial=0.0))
        ratio, solved = self._seen.get((float(s), on), (0.0, None))
        kind, hint = self.kind(on), ratio * norm_m
        rtol = min(1e-2 / hint, 1e-6) if hint > 0 else 0.0
        if solved is None and kind in ("gmres", "bicgstab") and rtol > 10 * self._spec(kind, on).rtol:
            sysm, info = self.system(s, on).loosened(rtol), {}     # its matrix and preconditioner, once
            own = sysm is not None
            if not own:          # a new system, the tight ones closed first (memory)
                for key in [k for k in self._sys if k[1] == on]:
                    self._sys.pop(key).close()
                sysm = op.system(X, s, dataclasses.replace(self._spec(kind, on), rtol=rtol), self.bo)
            try:
                inv, est = inverse_norm_bound_of(op, X, sysm, s, info=info)
            finally:
                if not own:
                    sysm.close()
            self.info["condition_solve"] = {"rtol": rtol, "iterations": sum(info["iterations"])}
            if np.isfinite(inv) and inv <= 2 * est:               # a residual below 1/2
                return norm_m * inv, Status.SUCCESS, info["report"].reason
        own, info = SimpleNamespace(solve=lambda b, transpose=False: self.solve(s, on, b, polish=False)), {}
        inv, _ = inverse_norm_bound_of(op, X, own, s, steps=int(solved is None), info=info,
                                       start=solved and solved[0])
        rep = info["report"] or solved[1]
        if np.isfinite(inv) and rep.status is Status.SUCCESS:
            return norm_m * inv, Status.SUCCESS, rep.reason
        st = rep.status if rep.status is not Status.SUCCESS else Status.INACCURATE
        return np.inf, st, f"condition estimate: {rep.reason}, residual {info.get('residual', np.inf):.1e}"

    def close(self):
        for sysm in self._sys.values():
            sysm.close()
        self._sys.clear()
        self._norms.clear()
        self._seen.clear()
        self._checked = None


def _bound_and_grade(op, kind, cond, err, n, status, msg, opts) -> tuple:
    """:func:`passage_bound` of an answer and its grade against ``error_tol`` (:func:`ctmc.options.grade_bound`).

    Returns ``(status, message, bound, bound kind)``.
    """
    bound, bkind = passage_bound(kind, cond, err, n, op.product_roundoff())
    status, msg = grade_bound(status, msg, bound, opts)
    return status, msg, bound, bkind


def _prepare(chain, target, method, options, backend, backend_options):
    """Checks made before any heavy work; returns ``(op, opts, backend options, gather mode, target)``."""
    opts = _make_options("passage", METHODS, method, options)
    bo = check_backend_options(backend, backend_options, getattr(opts, "preconditioner", None))
    mode = bo.pop("gather", None)
    op = operator_for(chain, backend)
    tgt = owned_mask(target, op.states, op.n, op.start, op.stop, "target")
    if op.allsum(float(tgt.sum())) == 0:
        raise ValueError("target: the set of states is empty")
    return op, opts, bo, mode or op.default_gather, tgt


def _gather_rows(op, arrays, mode):
    return np.array([op.gather(np.asarray(a), mode) for a in arrays])


# --------------------------------------------------------------------------
# hitting times
# --------------------------------------------------------------------------
@scoped
def hitting_times(chain, target, moments=1, method="auto", *, reward=None, backend="scipy", check=True,
                  backend_options=None, **options):
    """Moments of the hitting time (or accumulated reward) of ``target``; see :meth:`ctmc.CTMC.hitting_times`.

    Examples
    --------
    Birth-death chain 0..3, rates up 1, down 2; mean time from 0 to 3:

    >>> import ctmc
    >>> m = ctmc.Model("bd"); n = m.var("n", 0, 3)
    >>> m.event("up", guard=n < 3, rate=1.0, update={n: n + 1})
    >>> m.event("down", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> c = m.build(initial={"n": 0})
    >>> float(c.hitting_times(n == 3).mean[0])
    11.0
    """
    if isinstance(moments, bool) or not isinstance(moments, (int, np.integer)) or moments < 1:
        raise ValueError(f"moments: expected an integer >= 1, got {moments!r}")
    n = chain.n_states
    if reward is not None:
        rr = np.asarray(reward, dtype=float)
        if rr.shape != (n,) or not np.all(np.isfinite(rr)) or (rr < 0).any():
            raise ValueError(f"reward: expected {n} finite values >= 0")
    op, opts, bo, mode, tgt = _prepare(chain, target, method, options, backend, backend_options)
    r = np.ones(op.stop - op.start) if reward is None else rr[op.start:op.stop]
    t0 = time.perf_counter()
    ps = PassageSetup(op, tgt, method, opts, bo)
    F = ps.finite
    out = np.zeros((moments, F.size))
    out[:, ~tgt & ~F] = np.inf
    prev = np.ones(F.size)
    err = bal = 0.0
    st, reason, iters = Status.SUCCESS, "", 0
    regen = scaled = None      # scaled: the means as y 2^j when they leave the double range
    if moments == 1 and ps.kind("finite") == "lu" and ps.count("finite") > 1:
        # the mean through a regeneration state is exact for any target, keeps relative
        # accuracy when the mean is huge (rare target) and costs one factorisation, where
        # the direct solve would need a second one to find out it is ill-conditioned
        regen = regenerative_mean(op, ps, r, "lu")
        if regen[3].status is not Status.SUCCESS:
            regen = None
    computed = moments
    for k in range(1, moments + 1 if regen is None else 1):
        b = np.where(F, k * r * prev, 0.0)
        x, rep = ps.solve(0.0, "finite", b)
        if k == 1 and rep.status is Status.SUCCESS and op.allmin(float(np.isfinite(x[F]).all())) < 1:
            trial, rep = scaled_solve(ps, b)          # means beyond the double range: y 2^j
            if rep.status is Status.SUCCESS:
                scaled, x, b = trial, trial.y, trial.scale(b)
        iters += rep.iterations
        st, reason = worst(st, rep.status), rep.reason
        e, bl = ps.errors(0.0, "finite", x, b)
        err, bal = max(err, e), max(bal, bl)
        if scaled is not None:
            out[0, F] = scaled.values[F]
            if scaled.overflows(op, F):    # no moment k >= 2 in this scale: not computed
                out[1:, F], computed = np.nan, 1
                break
            x = out[0]
        else:
            out[k - 1, F] = x[F]
        prev = x
    kind = ps.kind("finite")
    info = dict(ps.info, n_finite=ps.count("finite"))
    cond, cst, creason = 1.0, Status.SUCCESS, ""
    if regen is None and kind != "gth" and ps.count("finite"):
        cond, cst, creason = ps.condition(0.0, "finite")
        if st is Status.SUCCESS and (_EPS * cond > COND_RTOL or cst is not Status.SUCCESS):
            # ill-conditioned (rare target): the mean through a regeneration
            # state z, whose cycle is measured by an accurate stationary-type solve
            regen = regenerative_mean(op, ps, r, kind)
            if regen[3].status is not Status.SUCCESS:
                info.update(regen[2])
                cond, st, reason = regen[1], regen[3].status, regen[3].reason
                regen = None
    rF = np.where(F, r, 0.0)
    if regen is not None:
        # the mean through the regeneration state replaces the direct one
        scaled, cond, rinfo, _ = regen
        info.update(rinfo)
        out[0, F] = scaled.values[F]
        err, bal = ps.errors(0.0, "finite", scaled.y, scaled.scale(rF))
        cst, creason = Status.SUCCESS, ""
        kind = f"{kind}-regenerative"
    sc = scaled if scaled is not None else Scaled(out[0])
    finite_vals = np.vstack([sc.y[F], out[1:computed, F]])
    defect = op.allmax(0.0 if (np.all(np.isfinite(finite_vals)) and (finite_vals >= 0).all()) else np.inf)
    status, msg = grade_passage(kind, err=err, bal=bal, opts=opts, cond=cond, solve_status=st, reason=reason,
                                cond_status=cst, cond_reason=creason, defect=defect, what="moments")
    if kind.endswith("-regenerative"):
        # a proven but normwise bound for a mean kept accurate entrywise by another argument:
        # ||M^-1|| <= ||h|| / min r on F (M h = r), from the computed h and its residual (in h's scale)
        Fm, rs = ps.finite, sc.scale(r)
        rmin = op.allmin(float(rs[Fm].min()) if Fm.any() else np.inf)
        hn = op.allmax(float(np.abs(sc.y[Fm]).max(initial=0.0)))
        norm_m = op.allmax(ps.row_norms(0.0, "finite").max(initial=0.0))
        gam = op.product_roundoff()
        rho = (err + gam) * (norm_m * hn + op.allmax(float(np.abs(rs[Fm]).max(initial=0.0))))
        bound = passage_bound("lu", norm_m * inverse_norm_bound(hn, rho, rmin), err, ps.count("finite"),
                              gam)[0]
        bkind = "normwise"
    else:
        status, msg, bound, bkind = _bound_and_grade(op, kind, cond, err, ps.count("finite"), status, msg, opts)
    if sc.exponent:
        with np.errstate(divide="ignore"):
            info["log10_mean"] = op.gather(np.where(F, sc.log10(), np.log10(out[0])), mode)
        if sc.overflows(op, F):
            status, msg = worst(status, Status.INACCURATE), f"{overflow_text(op, sc, F)}; {msg}"
            if out.shape[0] > 1:       # nor kept from a direct solve that the regenerative mean replaced
                out[1:, F] = np.nan
                msg += "; moments >= 2 are not computed (nan)"
    if moments > 1 and kind.endswith("-regenerative") and status is Status.SUCCESS:
        status = Status.INACCURATE
        msg += ("; moments >= 2 of this ill-conditioned problem are not reliable from sparse solves "
                "(use method='gth' on up to a few thousand states)")
    n_doomed = int(round(op.allsum(float((~F & ~tgt).sum()))))
    if n_doomed:
        msg += f"; {n_doomed} states do not reach the target almost surely (infinite moments)"
    info.update({k: v for k, v in ps.info.items() if k not in info}, balance_error=bal, condition=cond,
                fallback=ps.fallback, error_bound_kind=bkind)
    ps.close()
    if mode == "none":
        info["rows"] = (op.start, op.stop)
    mom = _gather_rows(op, out, mode)
    res = HittingResult(method=kind, backend=op.backend, status=status, message=msg, iterations=iters,
                        residual=err, wall_time=time.perf_counter() - t0, info=info, mean=mom[0], moments=mom, finite=op.gather(F | tgt, mode).astype(bool),
                        target=op.gather(tgt, mode).astype(bool), error_bound=bound)
    return res.check(check)


# --------------------------------------------------------------------------
# Laplace-Stieltjes transform
# --------------------------------------------------------------------------
@scoped
def hitting_laplace(chain, target, s, method="auto", *, backend="scipy", check=True, backend_options=None,
                    **options):
    """Laplace-Stieltjes transform ``E_i[exp(-s T_A)]``; see :meth:`ctmc.CTMC.hitting_laplace`.

    Examples
    --------
    Exponential time to leave state 0 at rate 2: ``E[exp(-s T)] = 2 / (2 + s)``.

    >>> import ctmc
    >>> c = ctmc.CTMC([[-2.0, 2.0], [0.0, 0.0]])
    >>> c.hitting_laplace([1], [0.0, 1.0]).values[:, 0]
    array([1.        , 0.66666667])
    """
    svals = as_points(s, "s")
    op, opts, bo, mode, tgt = _prepare(chain, target, method, options, backend, backend_options)
    t0 = time.perf_counter()
    ps = PassageSetup(op, tgt, method, opts, bo)
    Rm = ps.reach
    b = np.where(Rm, op.rates(tgt.astype(float)), 0.0)  # Q_RA 1
    vals = np.zeros((svals.size, tgt.size))
    vals[:, tgt] = 1.0
    err = bal = 0.0
    st, reason, iters = Status.SUCCESS, "", 0
    with Progress(f"hitting_laplace, {svals.size} points", total=svals.size) as prog:
        for k, sk in enumerate(svals):
            x, rep = ps.solve(sk, "reach", b)
            iters += rep.iterations
            st, reason = worst(st, rep.status), rep.reason
            e, bl = ps.errors(sk, "reach", x, b)
            err, bal = max(err, e), max(bal, bl)
            vals[k, Rm] = x[Rm]
            prog.update(f"s = {sk:g}", done=k + 1)
    kind = ps.kind("reach")
    cond, cst, creason = (1.0, Status.SUCCESS, "") if kind == "gth" else ps.condition(float(svals.min()), "reach")
    # E[exp(-s T)] lies in [0, 1], and is 1 at s = 0 where the target is reached a.s.
    sure = (ps.finite | tgt)[None, :] & (svals == 0.0)[:, None]
    defect = mass_defect(op, vals, sure)
    status, msg = grade_passage(kind, err=err, bal=bal, opts=opts, cond=cond, solve_status=st, reason=reason,
                                cond_status=cst, cond_reason=creason, defect=defect, what="transform values")
    status, msg, bound, bkind = _bound_and_grade(op, kind, cond, err, ps.count("reach"), status, msg, opts)
    info = dict(ps.info, balance_error=bal, condition=cond, fallback=ps.fallback, error_bound_kind=bkind)
    ps.close()
    if mode == "none":
        info["rows"] = (op.start, op.stop)
    full = _gather_rows(op, vals, mode)
    res = LaplaceResult(method=kind, backend=op.backend, status=status, message=msg, iterations=iters,
                        residual=err, wall_time=time.perf_counter() - t0, info=info, s=svals, values=full,
                        target=op.gather(tgt, mode).astype(bool), error_bound=bound)
    return res.check(check)


# --------------------------------------------------------------------------
# first passage: joint law of (T_A, X_{T_A})
# --------------------------------------------------------------------------
@scoped
def first_passage(chain, target, s=None, t=None, method="auto", *, sources=None, targets=None, eps=TAIL_EPS,
                  max_terms=10_000_000, backend="scipy", check=True, backend_options=None,
                  block_memory=BLOCK_MEMORY, max_result_bytes=RESULT_MEMORY, **options):
    """Joint law of ``(T_A, X_{T_A})``; see :meth:`ctmc.CTMC.first_passage`.

    Nothing of size states x targets is made; the answer (``sources x targets``
    per point ``s`` or ``t``) is replicated on every process. The solves, their
    blocks and their cost: :mod:`ctmc.joint_passage`.

    Parameters
    ----------
    targets : mask, expression, dict or indices, optional
        The columns computed: states of ``target`` (default all). The passage is
        still into all of ``target``; an entrance elsewhere counts in no column.
    block_memory : int
        Bytes per process for a block of dense right-hand sides (256 MiB).
    max_result_bytes : int
        Largest answer accepted (2 GiB), refused before any work above it.

    Examples
    --------
    From state 0, leave at rate 3 to state 1 (prob. 1/3) or state 2 (2/3):

    >>> import ctmc
    >>> c = ctmc.CTMC([[-3.0, 1.0, 2.0], [0, 0, 0], [0, 0, 0]])
    >>> fp = c.first_passage([1, 2], t=[1.0])
    >>> fp.probabilities[0]
    array([0.33333333, 0.66666667])
    >>> round(float(fp.cdf[0, 0, 1]), 10)  # (2/3) (1 - exp(-3))
    0.6334752878
    """
    from .transient import check_uniformization

    svals = None if s is None else as_points(s, "s")
    tvals = None if t is None else as_points(t, "t")
    check_uniformization(eps, max_terms)
    op, opts, bo, _, tgt = _prepare(chain, target, method, options, backend, backend_options)
    width = block_width(op, block_memory)
    points = 1 + (0 if svals is None else svals.size) + (0 if tvals is None else tvals.size)
    src_mask, src, columns = rows_and_columns(op, tgt, sources, targets, points, max_result_bytes)
    lam = 1.02 * op.allmax(float(np.where(tgt, 0.0, op.exit_rates).max(initial=0.0)))
    if tvals is not None and lam * tvals.max() > max_terms:
        raise ValueError(f"t: the largest time needs about {lam * tvals.max():.3g} uniformisation steps, "
                         f"above max_terms={max_terms}; raise max_terms or use smaller times")
    t0 = time.perf_counter()
    ps = PassageSetup(op, tgt, method, opts, bo, sources=src_mask, triangular=True)
    r, m = src.size, columns.size
    own = (src >= op.start) & (src < op.stop)
    lrow = src[own] - op.start
    n_in_r = int(round(op.allsum(float(ps.reach[lrow].sum()))))
    # few sources and more target columns than one block holds: auto then takes a solver with a
    # transposed solve, not gth (whose one solve per column runs on vectors of every state); with
    # one block of columns gth stays, subtraction-free where a small set is badly conditioned
    ps.transposed = n_in_r <= m and width < m
    kind = ps.kind("reach")
    adjoint = kind != "gth" and n_in_r <= m
    probs, lap, cdf, bound, err, bal, state, n_solves = solve_joint(
        op, ps, tgt, src, columns, svals, tvals, adjoint=adjoint, width=width, lam=lam, eps=eps, max_terms=max_terms)
    cond, cst, creason = (1.0, Status.SUCCESS, "") if kind == "gth" else ps.condition(0.0, "reach")
    # rows of P(X_T = j) sum to P(reach) <= 1, to 1 where the target is reached a.s. (all columns asked)
    sure_own = np.zeros(r)
    sure_own[np.flatnonzero(own)] = (ps.finite | tgt)[lrow]
    sure = op.allsum(sure_own) > 0.5
    if m < int(round(op.allsum(float(tgt.sum())))):
        sure = np.zeros(r, dtype=bool)
    entries = np.concatenate([probs.ravel(), probs.sum(axis=1)])
    defect = mass_defect(op, entries, np.concatenate([np.zeros(probs.size, bool), sure]))
    status, msg = grade_passage(kind, err=err, bal=bal, opts=opts, cond=cond, solve_status=state["st"],
                                reason=state["reason"], cond_status=cst, cond_reason=creason, defect=defect)
    if adjoint:
        # the transposed solves' backward error is not in the norm of this condition number
        sbound, skind = float("nan"), "not computed (adjoint solves)"
    else:
        status, msg, sbound, skind = _bound_and_grade(op, kind, cond, err, ps.count("reach"), status, msg, opts)
    info = dict(ps.info, n_reach=ps.count("reach"), balance_error=bal, condition=cond, fallback=ps.fallback,
                adjoint=adjoint, error_bound_kind=skind, block_width=width, blocks=state["blocks"],
                solves_per_point=n_solves)
    ps.close()
    res = FirstPassageResult(method=kind, backend=op.backend, status=status, message=msg,
                             iterations=state["iters"], residual=err, wall_time=time.perf_counter() - t0, info=info,
                             targets=columns, sources=src, probabilities=probs, s=svals, laplace=lap,
                             t=tvals, cdf=cdf, error_bound=bound, solve_error_bound=sbound)
    return res.check(check)
