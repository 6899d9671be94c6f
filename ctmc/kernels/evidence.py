r"""Evidence of an answer, its error bounds, and the one rule that grades it.

Stationary laws
---------------
Every stationary result carries ``residual`` :math:`= \|\pi Q\|_1` and
``balance_error`` :math:`= \max_j |(\pi Q)_j| / (\pi_j |q_{jj}|)`, the
relative mismatch between the probability flow into and out of each state,
both recomputed from the generator (:func:`stationary_evidence`). The grading
(:func:`grade`) is the same for every method and backend: significant
negative entries make the answer ``INACCURATE``; round-off negatives are set
to 0 and, like a large balance error or a zero probability with a positive
inflow, make it ``TAIL_INACCURATE`` (a warning), so a wrong tail is never
silent. The balance check is necessary, not sufficient: an error that varies
smoothly from state to state can pass it.

The error bound of a stationary law (:func:`error_bound`) comes from the mean
times :math:`m` to reach a pin state :math:`k`: with :math:`r = \hat\pi Q`,
:math:`\beta = 2\sum_i |r_i| m_i/\hat\pi_k \le 2\|r\|_1\|m\|_\infty/\hat\pi_k` and
:math:`\|\hat\pi - \pi\|_1 \le \hat\pi_k\beta/(1-\beta)`; :math:`m` is bounded
entrywise from a computed solution and its residual (:func:`return_time_bound`).

Passage systems
---------------
For :math:`M x = b` with :math:`M = sI - Q_{XX}` (an M-matrix), the normwise
backward error ``err`` and :math:`\mathrm{cond} = \|M\|_\infty\|M^{-1}\|_\infty`
give :math:`\|\hat x - x\|/\|\hat x\| \le 2e/(1-e)`,
:math:`e = \mathrm{cond}\,(\mathrm{err} + \gamma)` (:func:`passage_bound`);
:math:`\|M^{-1}\|_\infty` is bounded by the rule of the return times (:func:`inverse_norm_bound_of`);
:func:`grade_passage` grades them.

Dense GTH elimination gets the entrywise estimate :math:`2n^2u` (:func:`gth_bound`),
whatever the conditioning, where its elimination stayed in range (its answer balances to the
estimate: :func:`ctmc.kernels.sweeps.gth_dense`, else ``INACCURATE`` and no estimate).

Grading
-------
One rule (:func:`judge`) for every analysis and backend: a method reports a
status and a message; the evidence is a list of findings ``(holds, status,
text)`` in order of severity. The first finding that holds decides: an
``INACCURATE`` finding applies to a usable answer (``SUCCESS`` or
``TAIL_INACCURATE``), a ``TAIL_INACCURATE`` finding to a ``SUCCESS`` only, and
its text is appended to the message; an answer whose findings all fail keeps
the method's status and message. :func:`grade` (stationary laws),
:func:`grade_passage` (passage systems) and :func:`grade_bound` (an error bound
against ``error_tol``) list their findings and call it; the transient analysis
and the measures call it with theirs.

References
----------
G. E. Cho, C. D. Meyer, "Markov chain sensitivity measured by mean first
passage times", Linear Algebra Appl. 316 (2000).
C. A. O'Cinneide, "Entrywise perturbation theory and error analysis for Markov
chains", Numer. Math. 65 (1993).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .._util import amax, blocks
from ..backends.base import UNIT_ROUNDOFF, LinearSpec
from ..linalg import inverse_norm_bound
from ..results import Status
from ..sets import unit_mask

__all__ = ["stationary_evidence", "balance_error", "NEGATIVE_TOL", "ROUNDOFF", "judge", "grade",
           "grade_passage", "grade_bound", "value_at", "return_time_bound", "error_bound",
           "correction_estimate", "iterative_bound", "inverse_norm_bound_of", "gth_bound", "passage_bound",
           "RETURN_SPEC", "RETURN_GMRES",
           "RETURN_RESIDUAL", "BOUND_RESIDUAL", "BOUND_BRACKET", "RETURN_STEPS", "RETURN_TIGHT",
           "BOUND_LU_STATES", "COND_RTOL", "MASS_TOL", "mass_defect"]

_TINY = np.finfo(float).tiny
_U = UNIT_ROUNDOFF
_EPS = np.finfo(float).eps
#: a solution entry below -NEGATIVE_TOL * max is a failed solve, not round-off
NEGATIVE_TOL = 1e-8
#: negatives below this share of the max are round-off of a direct solve: set to 0 silently
ROUNDOFF = 1e-13
#: eps * condition above this: a sparse passage solve may have lost every digit
COND_RTOL = 1e-8
#: largest accepted violation of a probability invariant
MASS_TOL = 1e-6
_USABLE = (Status.SUCCESS, Status.TAIL_INACCURATE)


# --------------------------------------------------------------------------
# the one grading rule
# --------------------------------------------------------------------------
def judge(status: Status, msg: str, findings) -> tuple:
    """The status and message of an answer from the method's own and its evidence's findings.

    ``findings`` is an ordered iterable of ``(holds, status, text)``; the first
    that holds and applies decides (an ``INACCURATE`` finding applies to a
    ``SUCCESS`` or ``TAIL_INACCURATE`` answer, a ``TAIL_INACCURATE`` one to a
    ``SUCCESS`` only) and ``text`` is appended to ``msg``.

    Examples
    --------
    >>> judge(Status.SUCCESS, "lu", [(False, Status.INACCURATE, "; bad"), (True, Status.TAIL_INACCURATE, "; tail")])
    (<Status.TAIL_INACCURATE: 'tail_inaccurate'>, 'lu; tail')
    >>> judge(Status.MAX_ITERATIONS, "gmres", [(True, Status.INACCURATE, "; bad")])
    (<Status.MAX_ITERATIONS: 'max_iterations'>, 'gmres')
    """
    for holds, worse, text in findings:
        if holds and (status is Status.SUCCESS or (worse is Status.INACCURATE and status in _USABLE)):
            return worse, msg + text
    return status, msg


def grade(status: Status, msg: str, *, rel_residual: float, balance: float, lost: int, negative: float,
          opts):
    """The status of a stationary answer from its evidence (every method, every backend).

    Parameters
    ----------
    status, msg
        What the method itself reported.
    rel_residual : float
        ``||pi Q||_1 / max|q_ii|``.
    balance : float
        The balance error.
    lost : int
        Zero probabilities with a positive inflow.
    negative : float
        ``-min(x) / max(x)`` of the raw solution (0 if none was negative).
    opts : ctmc.options.Tolerances
        ``tol`` and ``tail_tol``.

    Examples
    --------
    >>> from ctmc.options import Tolerances
    >>> o = Tolerances()
    >>> grade(Status.SUCCESS, "lu", rel_residual=1e-16, balance=1e-12, lost=0, negative=0.0, opts=o)[0]
    <Status.SUCCESS: 'success'>
    >>> grade(Status.SUCCESS, "gmres", rel_residual=1e-12, balance=1e-12, lost=0, negative=1e-10, opts=o)[0]
    <Status.TAIL_INACCURATE: 'tail_inaccurate'>
    >>> grade(Status.SUCCESS, "arpack", rel_residual=1e-12, balance=0.0, lost=0, negative=1e-3, opts=o)[0]
    <Status.INACCURATE: 'inaccurate'>
    """
    return judge(status, msg, [
        (negative > NEGATIVE_TOL, Status.INACCURATE,
         f"; negative probabilities (down to {-negative:.1e} of the max)"),
        (rel_residual > opts.tol, Status.INACCURATE, f"; residual {rel_residual:.2e} above tol {opts.tol:.1e}"),
        (negative > ROUNDOFF, Status.TAIL_INACCURATE,
         f"; negative values of round-off size (down to {-negative:.1e} of the max) set to 0: the "
         "small probabilities are noise (try 'gth' on small chains, or 'lu')"),
        (balance > opts.tail_tol, Status.TAIL_INACCURATE,
         f"; component-wise balance error {balance:.2e} exceeds tail_tol {opts.tail_tol:.1e}: "
         "small probabilities are unreliable (use 'lu' or 'gth')"),
        (bool(lost), Status.TAIL_INACCURATE,
         f"; {lost} states have probability 0 although their inflow is positive: small "
         "probabilities were lost (use 'lu' or 'gth')"),
    ])


_KIND_TEXT = {"gth": "dense subtraction-free elimination", "lu": "sparse LU",
              "gmres": "GMRES", "bicgstab": "BiCGStab", "lu-regenerative": "sparse LU through a regeneration state",
              "gmres-regenerative": "GMRES through a regeneration state",
              "bicgstab-regenerative": "BiCGStab through a regeneration state"}


def grade_passage(kind, *, err, bal, opts, cond=1.0, solve_status=Status.SUCCESS, reason="",
                  cond_status=Status.SUCCESS, cond_reason="", defect=0.0, what="probabilities"):
    """The status of a passage answer from its evidence (one rule for every method and backend).

    Examples
    --------
    >>> from ctmc.options import Tolerances
    >>> o = Tolerances()
    >>> grade_passage("lu", err=1e-16, bal=1e-12, opts=o)[0]
    <Status.SUCCESS: 'success'>
    >>> grade_passage("lu", err=1e-16, bal=1e-12, opts=o, defect=float("inf"), what="moments")[0]
    <Status.INACCURATE: 'inaccurate'>
    >>> grade_passage("lu", err=1e-16, bal=1e-12, opts=o, cond=1e12)[0]
    <Status.INACCURATE: 'inaccurate'>
    """
    text = _KIND_TEXT.get(kind, kind)
    msg = text + (f" ({reason})" if reason and reason != text else "")
    rule = ("they must be finite and >= 0" if what == "moments" else
            "finite, 0 <= p <= 1, total 1 where the target is reached almost surely")
    return judge(solve_status, msg, [
        (cond_status is not Status.SUCCESS, Status.INACCURATE,
         f": the condition number could not be estimated ({cond_reason}); "
         "the solves cannot be vouched for (a badly conditioned system)"),
        (not np.isfinite(defect), Status.INACCURATE,
         f": {what} are not finite: they overflow the double range (about 1.8e308) or the solve broke down"),
        (not defect <= MASS_TOL, Status.INACCURATE, f": {what} violate their invariant ({rule}) by {defect:.1e}"),
        (kind != "gth" and _EPS * cond > COND_RTOL, Status.INACCURATE,
         f": condition number about {cond:.1e}, so the solve may have lost all "
         "digits (the target is too rare); use method='gth' (dense, up to a few thousand states)"),
        (err > opts.tol, Status.INACCURATE, f": backward error {err:.2e} above tol {opts.tol:.1e}"),
        (bal > opts.tail_tol, Status.TAIL_INACCURATE,
         f": component-wise balance error {bal:.2e} above tail_tol {opts.tail_tol:.1e}; very large or "
         "very small values are unreliable (try method='gth')"),
    ])


def mass_defect(op, values, sure):
    """Largest violation of ``0 <= values <= 1`` and of ``values == 1`` where ``sure`` (global; inf for NaN).

    The probability invariant of passage answers, graded against :data:`MASS_TOL` by :func:`grade_passage`.
    """
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return op.allmax(0.0)
    with np.errstate(invalid="ignore"):
        out = np.maximum(np.maximum(-values, values - 1.0), 0.0)
        out = np.where(sure, np.abs(values - 1.0), out)
    d = float(out.max()) if np.all(np.isfinite(values)) else np.inf
    return op.allmax(d if np.isfinite(d) else np.inf)


def grade_bound(status, msg: str, bound: float, opts) -> tuple:
    """``INACCURATE`` when the error bound exceeds ``error_tol`` (every analysis, every backend).

    Examples
    --------
    >>> from ctmc.options import Tolerances
    >>> o = Tolerances()
    >>> grade_bound(Status.SUCCESS, "lu", 1e-12, o)[0]
    <Status.SUCCESS: 'success'>
    >>> print(grade_bound(Status.TAIL_INACCURATE, "lu", 3e-4, o)[1])    # doctest: +ELLIPSIS
    lu; error bound 3.0e-04 exceeds error_tol 1.0e-06: the answer as a whole...
    """
    what = ("could not be bounded" if not np.isfinite(bound)
            else f"error bound {bound:.1e} exceeds error_tol {opts.error_tol:.1e}")
    return judge(status, msg, [
        (not bound <= opts.error_tol, Status.INACCURATE,
         f"; {what}: the answer as a whole (not only its small entries) may be "
         "wrong by that much; the chain is ill-conditioned (nearly decomposable, or with "
         "very long passage times, or a very rare target); try 'gth' on small chains, or a tighter tol"),
    ])


# --------------------------------------------------------------------------
# stationary evidence
# --------------------------------------------------------------------------
def stationary_evidence(op, pi: np.ndarray):
    """Residual ``||pi Q||_1``, balance error, underflow and lost counts of ``pi`` (owned part).

    The balance error is ``max_j |(pi Q)_j| / (pi_j |q_jj|)`` over states with
    a normal (non-denormal) ``pi_j``; states below the smallest normal double
    are counted in ``underflow``; ``lost`` counts states whose probability is
    0 although their inflow implies a representable one.

    Returns
    -------
    residual, balance_error, underflow, lost
    """
    r = op.apply(pi, transpose=True)
    q = op.exit_rates
    inflow = op.rates(pi, transpose=True)
    bal = balance_error(op, pi, r)
    under = np.count_nonzero(((pi < _TINY) & (pi > 0)) | ((pi == 0) & (r != 0)))
    with np.errstate(divide="ignore", invalid="ignore"):
        lost = np.count_nonzero((pi == 0) & (q > 0) & (inflow / q >= _TINY))
    s = op.allsum(np.array([np.abs(r).sum(), under, lost], dtype=float))
    return float(s[0]), bal, int(s[1]), int(s[2])


def balance_error(op, x, r=None, floor: float = _TINY) -> float:
    """``max_j |r_j| / (x_j q_j)`` over states with ``x_j >= floor`` and an exit (global).

    ``r`` is ``(x Q)`` on the owned rows: the relative imbalance of flow in and out of each state;
    None: made here by blocks of rows (:meth:`~ctmc.backends.base.Operator.apply_blocks`; a maximum,
    the same number), not a vector beside ``x`` (the polish's, where ``Q^T`` is held).
    """
    tops, q, step = [], op.exit_rates, 1 << 13      # block by block: no vector temporaries
    blocks = [(0, r)] if r is not None else op.apply_blocks(x, transpose=True)
    for first, rb in blocks:
        for s in range(first, first + rb.size, step):
            e = min(s + step, first + rb.size)
            out = x[s:e] * q[s:e]
            ok = (x[s:e] >= floor) & (out > 0)
            tops.append(np.max(np.abs(rb[s - first:e - first][ok]) / out[ok], initial=0.0))
    return op.allmax(float(np.max(tops, initial=0.0)))          # (a NaN stays one)




# --------------------------------------------------------------------------
# error bounds: a condition estimate by mean times to reach a pin
# --------------------------------------------------------------------------
#: the looseness the stationary error bound settles for when it is still below ``error_tol``
#: (:func:`return_time_bound`): the solve stops at the first iterate :math:`\hat m` whose residual
#: :math:`\rho = 1 - M\hat m` proves :math:`m \le \hat m/(1-\rho_+) \le m(1+\rho_-)/(1-\rho_+)` with
#: :math:`(1+\rho_-)/(1-\rho_+) \le` ``BOUND_BRACKET`` (:func:`ctmc.krylov.bracket_factor`), so the bound
#: reported is within that factor of the one the exact ``m`` would give (the iterate's own factor, at
#: most this, is ``info["return_time_bracketed"]``; False when the solve went on to ``BOUND_RESIDUAL``).
#: 16, a digit of the bound, which only ever stands below ``error_tol`` this way: on cluster N=128
#: BiCGStab's fourth iterate brackets m within 13x and the next within 4x is its nineteenth (polling
#: N=15: 6 iterations, not 7; kanban t=4, fms n=6, tandem c=511 the same at 4 or 16). The BiCGStab of
#: :data:`RETURN_SPEC` is given it (``LinearSpec.bracket``) and tests it on its recurred residual each step
#: (a product only where that passes)
BOUND_BRACKET = 16.0
#: the Krylov solve of the return times when no factorisation is at hand: BiCGStab, whose short
#: recurrence has no basis to orthogonalise (GMRES spent half its time there and needed 1.5-3x the
#: time to the same residual on the gallery; on tandem networks it did not converge at all), to
#: ``rtol`` 3e-3 (on scipy an RMS residual; on eight gallery models the largest residual entry was
#: then 0.0003-0.034, a third of :data:`BOUND_RESIDUAL` at most, 0-3 iterations after the first
#: iterate below it; ``rtol`` 1e-2 stopped a hair early on fms n=5 (0.069 against 0.05), and
#: the refinement, a BiCGStab from scratch, cost 14 iterations more than the 4 it saved), then
#: checked and refined on the true residual (:func:`return_time_bound`)
RETURN_SPEC = LinearSpec(kind="bicgstab", ordering="auto", preconditioner="sgs", rtol=3e-3, maxiter=200,
                          restart=50)
#: the fallback when BiCGStab and its refinements stay above ``BOUND_RESIDUAL``: GMRES to a backward error of 1e-6
RETURN_GMRES = LinearSpec(kind="gmres", ordering="auto", preconditioner="sgs", rtol=1e-6, maxiter=200,
                          restart=50)
#: the residual of ``M y = 1`` that :func:`inverse_norm_bound_of` settles for by default (the passage
#: condition numbers): ``||M^{-1}||_inf`` is then bounded within ``1 / (1 - RETURN_RESIDUAL)`` (5 %) of its estimate
RETURN_RESIDUAL = 0.05
#: the return-time residual the stationary error bound settles for (:func:`return_time_bound`):
#: ``||m||_inf`` is bounded within ``1 / (1 - BOUND_RESIDUAL)`` (11 %) of its estimate; a bound that
#: this looseness may have pushed above ``error_tol`` is computed again to :data:`RETURN_TIGHT`
BOUND_RESIDUAL = 0.1
#: solves of the return-time system at most (the first and its refinements on the residual; tandem
#: c=511 needs 4: BiCGStab's first answer there has a residual of 3e6, the refinements 8e3, 16, 0.009)
RETURN_STEPS = 5
#: the residual of the return times when a bound just above ``error_tol`` is computed again
RETURN_TIGHT = 1e-4


def value_at(op, x, i: int) -> float:
    """``x[i]`` for a global index ``i`` of an owned vector, on every process (a collective)."""
    return op.allmax(float(x[i - op.start]) if op.start <= i < op.stop else -np.inf)


def _residual_1norm(op, support, pi) -> tuple:
    """``(r, ||r||_1 on the class, round-off bound of computing it)`` for ``r = pi Q`` (owned part); the sums
    over the class's entries taken in one vector of them beside ``r``, made again for the second (the
    numbers of ``np.abs(r[support]).sum()`` and ``(pi * q)[support].sum()``)."""
    r = op.apply(pi, transpose=True)
    a = _on(r, support)
    r1 = op.allsum(float(np.abs(a, out=a).sum()))
    a = _on(pi, support, a)
    for part, on, at in _runs(support):                 # times q, a block of the states at a time
        a[at] *= op.exit_rates[part][on]
    return r, r1, 2 * op.product_roundoff() * op.allsum(float(a.sum()))


#: states :func:`_runs` takes at a time at most (:func:`ctmc._util.blocks`)
_RUN_BLOCK = 1 << 16


def _runs(support):
    """``(part, on, at)`` for blocks ``part`` of the states: ``on`` the block's members, ``at`` their places
    in the array of the members (``v[support]``)."""
    o = 0
    for part in blocks(support.size, _RUN_BLOCK):
        on = support[part]
        k = int(np.count_nonzero(on))
        yield part, on, slice(o, o + k)
        o += k


def _on(v, support, out=None):
    """``v[support]`` (a copy), into ``out`` when given (of the members' size), by blocks: no index vector
    (``np.compress`` takes the indices of the members, then a buffered copy)."""
    if out is None:
        return v[support]
    for part, on, at in _runs(support):
        out[at] = v[part][on]
    return out


def _unit_residual(op, X, m, shift: float = 0.0) -> tuple:
    r"""``(rho, rho_plus, top)`` of ``m`` (zero off ``X``): :math:`\rho = 1 - M m` on ``X``,
    :math:`M = sI - Q_{XX}`, an upper bound ``rho_plus`` on its largest entry (the round-off of
    computing it added, never below 0), and :math:`\max_X m` (``-inf`` if ``X`` is empty). ``rho`` is the only
    vector made: ``M m`` by blocks of rows (:meth:`~ctmc.backends.base.Operator.apply_blocks`), the maxima
    without copies of ``m`` or ``|m|`` (the numbers of the whole product and of ``np.where``)."""
    rho = np.zeros(np.shape(m))
    for s, block in op.apply_blocks(m, transpose=False):
        part, on = slice(s, s + block.size), X[s:s + block.size]
        np.copyto(rho[part], 1.0 - shift * m[part] + block, where=on)
    size = op.allmax(amax(m))
    top = op.allmax(float(np.max(m, where=X, initial=-np.inf)))
    rplus = max(op.allmax(float(np.max(rho, where=X, initial=0.0))), 0.0)
    return rho, rplus + op.product_roundoff() * (2 * (op.qmax + abs(shift)) * size + 1.0), top


def _bracket(op, X, rho, rplus: float) -> float:
    r""":math:`(1+\rho_-)/(1-\rho_+)` on ``X`` (global): the bound :math:`\hat y/(1-\rho_+)` is within
    this factor of :math:`y` entrywise (:func:`ctmc.krylov.bracket_factor`; ``rplus < 1``)."""
    rminus = max(op.allmax(float(-np.min(rho, where=X, initial=0.0))), 0.0)
    return (1.0 + rminus) / (1.0 - rplus)


def inverse_norm_bound_of(op, X, system, shift: float = 0.0, target: float = RETURN_RESIDUAL,
                          steps: int = RETURN_STEPS, info=None, start=None, bracket=None, enough=None,
                          settle=None) -> tuple:
    r"""An upper bound on :math:`\|M^{-1}\|_\infty`, :math:`M = sI - Q_{XX}` a nonsingular M-matrix
    (``s = shift >= 0``), from loose solves of :math:`M y = 1` on one set-up ``system`` of ``M``.

    :math:`M^{-1} \ge 0`, so :math:`\|M^{-1}\|_\infty = \|y\|_\infty`, :math:`y = M^{-1}1`.
    For any computed :math:`\hat y` with residual :math:`\rho = 1 - M\hat y`
    (recomputed, its round-off added) and :math:`\rho_+ \ge \max_i \rho_i`,
    :math:`y - \hat y = M^{-1}\rho \le \rho_+ y` entrywise, so
    :math:`\|y\|_\infty \le \max_i \hat y_i / (1 - \rho_+)`: proven whatever
    solver produced :math:`\hat y` (``inf`` if :math:`\rho_+ \ge 1`). Only
    entries where :math:`M\hat y` falls short of 1 count; an overshoot costs
    nothing. The solves stop when :math:`\rho_+ \le` ``target`` (the bound is
    then within :math:`1/(1 -` ``target``:math:`)` of the estimate); until then,
    up to ``steps`` solves in all, :math:`\hat y` is refined by solving
    :math:`M\delta = \rho`, while each solve halves :math:`\rho_+` (every iterate
    gives a proven bound: the least is kept). With ``bracket``, they also stop at an
    iterate whose residual brackets :math:`y` within that factor,
    :math:`\hat y/(1-\rho_+) \le y(1+\rho_-)/(1-\rho_+)` with
    :math:`(1+\rho_-)/(1-\rho_+) \le` ``bracket``, :math:`\rho_- = \max(0, -\min_i\rho_i)`
    (:func:`ctmc.krylov.bracket_factor`), if ``enough(y_hat, f, top)`` says so
    (None: always). A first solve whose iterate did not halve the residual of :math:`\hat y = 0`
    (:math:`\rho = 1`), the rule of the refinements below, is not refined either when ``settle()``
    says another route serves (the levels of :mod:`ctmc.kernels.levels`; tandem c=2047: 200
    BiCGStab iterations more without a bound, then the levels anyway; ``info["settled"]``).
    ``start`` (a solution of
    :math:`M y = 1` at hand) is checked first, then refined by at most ``steps`` solves (0: none).
    ``system`` needs only ``solve(b, transpose=False) -> (x, SolveReport)``.

    ``info`` (optional dict) receives ``iterations`` (of each solve), ``report``
    (the last solve's report, None without a solve), ``residual`` (the
    :math:`\rho_+` of the bound, or of the last iterate without one) and
    ``upper``: ``(y_hat, f)`` with the entrywise bound :math:`y \le f\hat y`,
    :math:`f = 1/(1-\rho_+)` (the same argument, entry by entry), of the iterate
    that gave the bound (None without a bound).

    Returns
    -------
    (bound, estimate)
        The proven bound and :math:`\max_i \hat y_i` of the iterate that gave it
        (without a bound: the last, an unproven lower estimate).
    """
    info = {} if info is None else info
    info.setdefault("iterations", [])
    info["report"] = None
    best, last = (np.inf, np.inf), np.inf
    # (no iterate of zeros held beside the first solve's vectors: its answer is the first iterate)
    y, rhs = (None, X.astype(float)) if start is None else (np.where(X, start, 0.0), None)
    for _ in range(max(int(steps), start is None) + (start is not None)):
        solved = rhs is not None
        if solved:
            d, rep = system.solve(rhs, transpose=False)
            rhs = None                      # (not held beside the checks of the answer below)
            info["iterations"].append(rep.iterations)
            info["report"] = rep
            d = np.where(X, d, 0.0)
            y = d if y is None else y + d
        if not np.all(np.isfinite(y)):
            break
        rho, rplus, top = _unit_residual(op, X, y, shift)
        bound = inverse_norm_bound(top, rplus) if top > 0 else np.inf
        factor = _bracket(op, X, rho, rplus) if bracket is not None and np.isfinite(bound) else np.inf
        bracketed = bool(bracket is not None and factor <= bracket and (enough is None or enough(y, 1.0 / (1.0 - rplus), top)))
        if bound < best[0] or not np.isfinite(best[0]):
            best = (bound, top)      # without a bound, the last estimate (a lower one, unproven)
            info["residual"] = rplus
            # the entrywise bound y <= y_hat / (1 - rho_+) of this iterate (zero off X)
            info["upper"] = (y, 1.0 / (1.0 - rplus)) if np.isfinite(bound) else None
        # refine while it pays: a solve that did not halve the residual would only restart
        if bracketed and bound <= best[0]:
            info["bracketed"] = factor
            break
        if rplus <= target or (solved and info["report"].status is Status.BREAKDOWN) \
                or not rplus < last / 2:
            break
        if solved and start is None and last == np.inf and not rplus < 0.5 and settle is not None \
                and settle():
            info["settled"] = True          # the first solve did not halve the residual 1 of y = 0
            break
        rhs, last = rho, rplus
    return best


def return_time_bound(op, support, pin: int, system=None, backend_options=None, target: float = BOUND_RESIDUAL,
                      steps: int = RETURN_STEPS, specs=None, info=None, bracket=None,
                      enough=None, settle=None) -> tuple:
    r"""An upper bound on :math:`\|m\|_\infty`, ``m`` the mean times to reach ``pin`` from the class.

    ``m = M^{-1} 1`` with ``M = -Q_XX`` on ``X = support - {pin}``, a
    nonsingular M-matrix, so :math:`M^{-1} \ge 0` and :math:`\|M^{-1}\|_\infty = \|m\|_\infty`.
    For any computed :math:`\hat m` with residual :math:`\rho = 1 - M\hat m`
    (recomputed, its round-off added) and :math:`\rho_+ \ge \max_i \rho_i`,
    :math:`m - \hat m = M^{-1}\rho \le \rho_+ M^{-1}1 = \rho_+ m` entrywise, so
    :math:`m \le \hat m / (1 - \rho_+)` and
    :math:`\|m\|_\infty \le \max_i \hat m_i / (1 - \rho_+)`: proven
    whatever solver produced :math:`\hat m` (``inf`` if :math:`\rho_+ \ge 1`): the rule of
    :func:`inverse_norm_bound_of` (shift 0), which the passage condition numbers use too.
    Only entries where :math:`M\hat m` falls short of 1 count; an overshoot costs nothing.
    The bound needs :math:`\hat m` to a digit or two, so the solve stops when
    :math:`\rho_+ \le` ``target`` (the bound is then within :math:`1/(1 -` ``target``:math:`)`
    of the estimate); until then, up to ``steps`` solves in all, it is refined by
    solving :math:`M\delta = \rho` (every iterate gives a proven bound: the least is kept).
    With ``bracket`` (e.g. :data:`BOUND_BRACKET`) it also stops earlier, at an
    iterate proven within that factor of :math:`m` entrywise (a Krylov solve is told to stop there too), if ``enough(m_hat, f, top)``
    says its bound is good enough (see :func:`inverse_norm_bound_of`).
    Without a ``system``, the solvers of ``specs`` run in turn until one
    reaches ``target`` or the bracket (a direct solve ends the list).

    Parameters
    ----------
    system : optional
        A set-up system of ``M`` (the pinned stationary factorisation, solved
        untransposed).
    target : float
        The residual :math:`\rho_+` to stop at.
    steps : int
        Solves of one system at most.
    bracket : float or None
        The factor of an earlier stop (see above).
    enough : callable, optional
        ``(m_hat, f, top) -> bool``, for a stop at the bracket.
    specs : sequence of LinearSpec, optional
        The solvers to try without a ``system`` (default: BiCGStab with the
        Gauss-Seidel preconditioner, :data:`RETURN_SPEC`, then GMRES, :data:`RETURN_GMRES`); an
        entry may also be a callable that sets up a system of ``M`` on demand (None: skipped). A first
        solve that does not halve the residual is not refined where such an entry follows it and gives
        a system (it is then called twice: :func:`ctmc.kernels.levels.return_time_systems` keeps its own).
    settle : callable, optional
        For ``system``: whether another route serves where its first solve does not halve the residual (see
        :func:`inverse_norm_bound_of`; ``info["return_time_settled"]`` says it did).
    info : dict, optional
        Receives ``return_time_solver``, the kind of the last solver run,
        ``return_time_iterations``, the iterations of each solve, and
        ``return_time_upper``, ``(m_hat, f)`` with :math:`m \le f\hat m`
        entrywise for the bound returned (None without one; for :func:`error_bound`).

    Returns
    -------
    (bound, estimate)
        The proven bound and :math:`\max_i \hat m_i` of the iterate that gave it
        (without a bound: the largest seen, an unproven lower estimate).

    Examples
    --------
    M/M/1/K: the mean time to empty from the full queue is known in closed form.

    >>> import ctmc
    >>> from ctmc.backends import operator_for
    >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 30)
    >>> m.event("a", guard=n < 30, rate=1.0, update={n: n + 1})
    >>> m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> op = operator_for(m.build(initial={"n": 0}), "scipy")
    >>> bound, est = return_time_bound(op, np.ones(31, dtype=bool), 0)
    >>> # from the full queue: the sum over k of the mean passage times k -> k-1
    >>> exact = sum(sum(0.5 ** i for i in range(31 - k)) / 2.0 for k in range(1, 31))
    >>> bool(exact <= bound <= exact / (1 - BOUND_RESIDUAL) ** 2)
    True
    """
    X = support & ~unit_mask(op, pin)
    info = {} if info is None else info

    def times(system, settle):
        sub = {}
        try:
            out = inverse_norm_bound_of(op, X, system, 0.0, target, steps, sub, bracket=bracket,
                                        enough=enough, settle=settle)
        finally:
            info.setdefault("return_time_iterations", []).extend(sub.get("iterations", []))
            if sub.get("settled"):
                info["return_time_settled"] = True
        if out[0] < best[0] or "return_time_upper" not in info:
            info["return_time_upper"] = sub.get("upper")
        info["return_time_bracketed"] = sub.get("bracketed", False)
        return out

    best = (np.inf, 0.0)
    if system is not None:
        return times(system, settle)
    specs = (RETURN_SPEC, RETURN_GMRES) if specs is None else tuple(specs)
    for i, spec in enumerate(specs):
        # (a route set up on demand after this solver: tried at once where this one does not converge)
        later = [s for s in specs[i + 1:] if callable(s)]
        settle = (lambda later=later: any(s() is not None for s in later)) if later else None
        if callable(spec):                      # a system set up on demand (levels), or None
            system = spec()
            if system is None:
                continue
            spec = LinearSpec(kind=getattr(system, "kind", "given"))
        else:
            try:
                system = op.system(X, 0.0, spec if bracket is None or spec.kind == "lu"
                                   else dataclasses.replace(spec, bracket=float(bracket)), backend_options or {})
            except MemoryError:
                continue
        try:
            bound, est = times(system, settle)
        except MemoryError as exc:              # a Krylov basis or a factor beyond memory: the next solver
            info.setdefault("return_time_out_of_memory", []).append(f"{spec.kind}: {exc}")
            continue
        finally:
            system.close()
        info["return_time_solver"] = spec.kind
        if np.isnan(est):
            est = np.inf                        # the solve overflowed
        if bound < best[0] or not np.isfinite(best[0]):
            best = (bound, est if np.isfinite(bound) else max(est, best[1]))
        if bound <= est / (1 - target) or info["return_time_bracketed"] or spec.kind == "lu":
            break
    return best


def error_bound(op, support, pi, pin: int, m_bound: float, residual=None, upper=None) -> float:
    r"""Proven bound on :math:`\|\hat\pi - \pi\|_1` from the residual and the mean times to reach ``pin``.

    With :math:`r = \hat\pi Q` (recomputed) and ``k = pin``, the pinned
    equations give the row vector :math:`e = \hat\pi_{-k}/\hat\pi_k - \pi_{-k}/\pi_k =
    s M^{-1}`, :math:`s = r_{-k}/\hat\pi_k`, :math:`M = -Q_{kk'}` (the class without
    ``k``). :math:`M^{-1} \ge 0`, so :math:`|e| \le |s| M^{-1}` entrywise and

    .. math:: \|e\|_1 \le |s| M^{-1} 1 = \sum_i |s_i| m_i \le \|s\|_1 \|m\|_\infty,

    :math:`m = M^{-1}1` the mean times to reach ``k``. The weighted sum
    counts each state's residual at its own mean time: the residual of a
    Krylov answer sits mostly on the probable states, near ``k``, where
    :math:`m` is small, so it is often far below the product of norms.
    With an entrywise bound :math:`m \le f\hat m` (``upper = (m_hat, f)``, from
    :func:`return_time_bound`) and ``m_bound`` :math:`\ge \|m\|_\infty`,
    :math:`\hat\pi_k\|e\|_1 \le w = \min(f\sum_i |r_i|\hat m_i + \delta\,m_{bound},\;
    (\|r\|_1 + \delta)\,m_{bound})`, :math:`\delta` the round-off of computing
    :math:`r` (a bound on its 1-norm); without ``upper`` the second term alone.
    Normalising doubles the error at most and multiplies it by :math:`\pi_k`: with
    :math:`\beta = 2w/\hat\pi_k`,
    :math:`\|\hat\pi - \pi\|_1 \le \hat\pi_k\beta/(1-\beta)`, ``inf`` if
    :math:`\beta \ge 1`. :math:`\|m\|_\infty` (the largest mean time to reach
    ``k``) is the chain's condition number in this bound, in the spirit of Cho &
    Meyer, "Markov chain sensitivity measured by mean first passage times",
    Linear Algebra Appl. 316 (2000): it is huge exactly on nearly
    decomposable chains. ``residual`` is ``_residual_1norm(op, support, pi)`` when at hand.
    """
    r, r1, rounding = _residual_1norm(op, support, pi) if residual is None else residual
    pik = value_at(op, pi, pin)
    if not (pik > 0 and np.isfinite(m_bound)):
        return np.inf
    w = (r1 + rounding) * m_bound
    if upper is not None:
        m_hat, f = upper
        # m_hat >= (1 - rho_+) m > 0 on the class whenever the bound holds: a negative entry
        # would say the premises failed, and then only the product of norms is used
        if op.allmin(float(np.min(m_hat, where=support, initial=0.0))) >= 0:
            a = r[support]                              # (|r| in its own copy; on a whole chain m_hat as it
            whole = a.size == m_hat.size                # is, else its members' copy: the same numbers)
            weighted = op.allsum(float(np.abs(a, out=a) @ (m_hat if whole else m_hat[support])))
            w = min(w, f * weighted + rounding * m_bound)
    beta = 2 * w / pik
    return pik * beta / (1 - beta) if beta < 1 else np.inf


def correction_estimate(op, support, pi, pin: int, backend_options=None, residual=None) -> tuple:
    r"""First-order estimate of :math:`\|\hat\pi - \pi\|_1` by one correction solve (iterative methods).

    The error of the pinned solution is :math:`\hat x - x = M^{-T}(r_{-k}/\hat\pi_k)`
    (see :func:`error_bound`): one more solve of the transposed pinned system,
    with the residual as its right-hand side, computes it, and normalising gives
    :math:`\|\hat\pi - \pi\|_1 \approx 2\hat\pi_k\|d\|_1`. The residual's
    own round-off is added in proportion (:math:`\|d\|/\|r\|` estimates
    :math:`\|M^{-T}\|`). It is an estimate, not a proof: it assumes the
    correction solve is right to its first digit, which its own backward error
    (``rtol`` 1e-8) vouches for while the chain's condition stays below 1e7
    (:func:`iterative_bound` checks a lower estimate of it first). ``residual`` is
    ``_residual_1norm(op, support, pi)`` when at hand.

    Returns
    -------
    (estimate, iterations)
    """
    X = support & ~unit_mask(op, pin)
    r, r1, rounding = _residual_1norm(op, support, pi) if residual is None else residual
    pik = value_at(op, pi, pin)
    if not pik > 0:
        return np.inf, 0
    if r1 == 0:       # the residual is round-off through and through: nothing to scale it by
        return np.inf, 0
    spec = dataclasses.replace(RETURN_GMRES, rtol=1e-8)
    sysm = op.system(X, 0.0, spec, backend_options or {})
    try:
        d, rep = sysm.solve(np.where(X, r / pik, 0.0), transpose=True)
    finally:
        sysm.close()
    if rep.status is not Status.SUCCESS or not np.all(np.isfinite(d)):
        return np.inf, rep.iterations
    d1 = op.allsum(float(np.abs(d[X]).sum()))
    return 2 * pik * d1 * (1 + rounding / r1), rep.iterations


#: classes up to this many states get a proven bound from a sparse LU of the return-time system
BOUND_LU_STATES = 5000


def iterative_bound(op, support, pi, pin, size: int, backend_options, info: dict,
                    error_tol: float = np.inf, system=None, later=None) -> tuple:
    """The error bound of an iterative method's answer: ``(bound, kind)``; evidence into ``info``.

    Proven (:func:`error_bound`) when the return-time system is solved well
    enough to bound its solution (whatever solved it): by BiCGStab
    (:data:`RETURN_SPEC`), else by GMRES (:data:`RETURN_GMRES`), else, on
    classes up to :data:`BOUND_LU_STATES` states, by sparse LU (``inf`` if
    even that cannot); the next solver runs only while no solve reached
    :data:`BOUND_RESIDUAL`, and the least bound is kept. The return times stop
    earlier at an iterate that brackets them within :data:`BOUND_BRACKET` when
    the bound it gives is within ``error_tol`` (so that looseness never costs a status). A bound above
    ``error_tol`` by no more than that residual's looseness is computed again
    from return times refined to a residual of :data:`RETURN_TIGHT` (so the
    loose stop never costs an answer its status). On larger classes
    without a bound, the first-order :func:`correction_estimate`, accepted only
    where the condition (from the unconverged return times, a lower estimate)
    leaves its own 1e-8 solve a digit: ``inf`` otherwise. That estimate rests on a lower estimate of
    the condition (3-D product form, found by review: 9.8e-6 beside a true error of 7.7e-2), so
    :mod:`ctmc.stationary` reports it but grades the answer as one that could not be bounded.

    A ``system`` of the return-time system ``M = -Q_XX`` (``X`` the class without
    ``pin``; e.g. :class:`ctmc.kernels.levels.LevelSystem`, which knows the chain's
    structure) is tried first; the bound from it is proven by the same residual
    check, whatever it is; the route above runs only when it gives none. ``later``
    (a callable setting up such a system, or returning None) is tried after BiCGStab,
    before GMRES (:func:`ctmc.kernels.levels.return_time_systems`: levels found from the
    chain's variables, where BiCGStab stalls: tandem networks from c = 2047), at once where the
    first BiCGStab solve (``system``'s too) does not halve the residual: it is not refined then.
    """
    # (a system that ran RETURN_SPEC's own solver, as a solve made ahead did, is not run again)
    specs = ([] if getattr(system, "kind", None) == RETURN_SPEC.kind else [RETURN_SPEC]) \
        + ([later] if later is not None else []) + [RETURN_GMRES] \
        + ([dataclasses.replace(RETURN_SPEC, kind="lu")] if size <= BOUND_LU_STATES else [])
    held = []

    def residual():
        """``pi Q`` (:func:`_residual_1norm`), made when first needed: after the return-time solve, not a
        vector beside its own (from ``Q``'s rows once ``Q^T`` is released: the same numbers)."""
        if not held:
            held.append(_residual_1norm(op, support, pi))
        return held[0]

    def enough(m_hat, f, top):
        """Whether the bound from this iterate keeps the answer within ``error_tol`` (then its looseness is harmless)."""
        return error_bound(op, support, pi, pin, f * top, residual(), (m_hat, f)) <= error_tol

    m_bound = np.inf
    if system is not None:
        m_bound, m_est = return_time_bound(op, support, pin, system=system, info=info, bracket=BOUND_BRACKET,
                                           enough=enough, settle=later and (lambda: later() is not None))
        info["return_time_solver"] = getattr(system, "kind", "given")
    if not np.isfinite(m_bound):
        # (without a bound, the estimate is the largest seen: the system's iterate counts too)
        seen = m_est if system is not None else 0.0
        system = None
        m_bound, m_est = return_time_bound(op, support, pin, backend_options=backend_options, specs=specs,
                                           info=info, bracket=BOUND_BRACKET, enough=enough)
        if not np.isfinite(m_bound):
            m_est = max(m_est, seen)
    upper = info.pop("return_time_upper", None)
    info["condition"] = m_est * op.qmax
    if np.isfinite(m_bound):
        bound = error_bound(op, support, pi, pin, m_bound, residual(), upper)
        if error_tol < bound <= error_tol / (1 - BOUND_RESIDUAL) ** 2:
            tight, _ = return_time_bound(op, support, pin, system=system, backend_options=backend_options,
                                         specs=specs, info=info, target=RETURN_TIGHT, steps=2 * RETURN_STEPS)
            info["return_time_refined"] = True
            bound = min(bound, error_bound(op, support, pi, pin, tight, residual(),
                                           info.pop("return_time_upper", None)))
        return bound, "proven"
    if info.get("return_time_solver") == "lu":
        return np.inf, "proven"
    if not m_est * op.qmax * 1e-8 < 0.1:
        return np.inf, "estimate"
    est, its = correction_estimate(op, support, pi, pin, backend_options, residual())
    info["correction_iterations"] = its
    return est, "estimate"


def gth_bound(n: int) -> float:
    """GTH's entrywise error estimate on the 1-norm: ``2 n^2 u``.

    Subtraction-free elimination computes every probability to a small
    relative error, independently of the chain's conditioning (O'Cinneide,
    "Entrywise perturbation theory and error analysis for Markov chains",
    Numer. Math. 65, 1993, proves a bound growing like ``n^3 u``); ``n``
    elimination steps of sums of up to ``n`` terms give the first-order count
    ``2 n^2 u`` used here, an estimate (``error_bound_kind`` says so), far
    above the errors seen in practice.
    """
    return 2.0 * n * n * _U




def passage_bound(kind: str, cond: float, err: float, n: int, gamma: float = 0.0) -> tuple:
    r"""Bound on the relative normwise error of a passage answer: ``(bound, kind)``.

    With the backward error ``err`` of ``M x = b`` (relative to
    :math:`\|M\|\|x\| + \|b\|`) and ``cond`` :math:`= \|M\|_\infty\|M^{-1}\|_\infty`
    (an upper bound, proven by :meth:`PassageSetup.condition`): with
    :math:`e = \mathrm{cond}\,(\mathrm{err} + \gamma)`,
    :math:`\|\hat x - x\|/\|\hat x\| \le 2e/(1 - e)` (``"proven"``;
    ``inf`` when :math:`e \ge 1`), since :math:`\|b\| \le \|M\|(\|\hat x\| +
    \|x - \hat x\|)`. The dense subtraction-free elimination gets the
    entrywise estimate of :func:`gth_bound` (``"estimate"``),
    which does not depend on the conditioning; a mean computed through a
    regeneration state is bounded in :func:`hitting_times` itself (normwise,
    not used for its status: that method keeps each mean's relative accuracy
    where the normwise bound is astronomically loose).
    ``gamma`` (the round-off of recomputing the residual, :math:`(k+1)u` for
    ``k`` entries a row) is added to ``err``: a residual that happens to
    cancel exactly proves nothing.

    >>> b, kind = passage_bound("lu", 1e3, 1e-16, 100)
    >>> kind, abs(b / 2e-13 - 1) < 1e-9
    ('proven', True)
    >>> passage_bound("lu", float("inf"), 1e-16, 100)[0]
    inf
    """
    if kind == "gth":
        return gth_bound(n), "estimate"
    e = cond * (err + gamma)
    return (2.0 * e / (1.0 - e) if e < 1.0 else np.inf), "proven"
