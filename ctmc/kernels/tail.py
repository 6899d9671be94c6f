r"""A proven bound on the relative error of every probability: the tail bound of a stationary law.

The balance error :math:`\max_j |(\hat\pi Q)_j|/(\hat\pi_j|q_{jj}|)` is necessary, not
sufficient, for relative accuracy, and the 1-norm bound of
:func:`ctmc.kernels.evidence.error_bound` says nothing of a probability of 1e-90. This
module bounds :math:`\max_j |\hat\pi_j - \pi_j|/\pi_j` over the states whose true
probability is normal (not denormal), including those whose computed one underflowed.

Maths
-----
Pin a state :math:`z` (the most probable one), :math:`X` the class without it,
:math:`M = -Q_{XX}` (a nonsingular M-matrix, :math:`M^{-1} \ge 0`), :math:`r = \hat\pi Q`.
The law :math:`x` with :math:`x_z = \hat\pi_z` solves :math:`x_X M = x_z Q_{zX}`, so
:math:`d = \hat\pi - x` has :math:`d_z = 0`, :math:`d_X = -r_X M^{-1}` and

.. math:: |d_X| \le |r_X| M^{-1} \le c\, b M^{-1} = c\, y^T,\qquad M^T y = b,

for any :math:`b \ge 0` with :math:`|r_j| \le c\, b_j`: :math:`b = \hat\pi_X` and
:math:`c = \max_j |r_j|/\hat\pi_j` (the balance error in units of rate, the round-off of
computing :math:`r` added entry by entry), :math:`b_j` raised to :math:`|r_j|/c` on the
states of denormal or zero probability. :math:`y_j/\hat\pi_j` is, to first order, the mean
time :math:`\hat m_j` of the *time-reversed* chain
(:math:`\hat Q_{ji} = \pi_i Q_{ij}/\pi_j`) to reach :math:`z` from :math:`j`: the
relative error :math:`e` of :math:`\hat\pi = \pi\circ(1+e)` solves the reversed
chain's Poisson equation :math:`\hat Q e = \rho`, :math:`\rho_j = r_j/\pi_j`.

:math:`y` is computed, not known: for any :math:`u` with the componentwise residual
:math:`s = b - M^T u \le \sigma b` (recomputed, its round-off added; :math:`\sigma < 1`),
:math:`M^T u \ge (1-\sigma) b`, so :math:`y \le u/(1-\sigma)` entrywise, whatever solver
produced :math:`u`. Hence, with :math:`\varepsilon_j = c\,u_j/((1-\sigma)\hat\pi_j)`,
:math:`|\hat\pi_j - x_j| \le \varepsilon_j \hat\pi_j`; normalising changes the sum by
at most :math:`\Delta = c\sum_X u/((1-\sigma)\sum\hat\pi)` relatively, and

.. math:: \max_j \frac{|\hat\pi_j - \pi_j|}{\pi_j} \le \frac{\varepsilon + \Delta}{1 - \varepsilon},
   \qquad \varepsilon = \max_j \varepsilon_j

(``inf`` when :math:`\varepsilon \ge 1`): proven, with no first-order term left out
(the computed :math:`\hat\pi` enters only where it is known exactly). The bound's
condition, :math:`q_{max}(\max_j \hat m_j + \sum_k \pi_k \hat m_k)`, is
``info["tail_condition"]``: the bound is about ``balance_error`` times it.

Solving :math:`M^T u = b` to a componentwise residual of one digit is the same task as the
stationary solve's tail: a sparse LU on classes up to
:data:`~ctmc.kernels.evidence.BOUND_LU_STATES` states, else GMRES (:data:`TAIL_SPEC`)
followed by symmetric Gauss-Seidel sweeps (:func:`ctmc.kernels.sweeps.polish_sweeps`) until
:math:`\sigma \le` :data:`TAIL_RESIDUAL`. (This module, not
:mod:`ctmc.kernels.evidence`, holds it because it sweeps: the sweeps' module imports the
evidence.)
"""
from __future__ import annotations

import time

import numpy as np

from ..backends.base import LinearSpec
from ..results import Status
from ..sets import unit_mask
from .classes import global_argmax
from .evidence import BOUND_LU_STATES, judge
from .sweeps import POLISH_BUDGET, POLISH_MARGIN, Sweeper, polish_sweeps

__all__ = ["tail_error_bound", "tail_bound", "tail_correction", "grade_tail", "tail_evidence", "residual_share",
           "TAIL_SPEC", "TAIL_RESIDUAL", "TAIL_SCALE", "CORRECTION_NOISE"]

_TINY = np.finfo(float).tiny
#: :func:`tail_evidence` grades an answer ``tail_inaccurate`` by its measured error only where that error is
#: more than this many times the correction's own resolution (the same step taken again from its answer):
#: below it, a tight ``tail_tol`` (1e-14 on an 801-state birth-death chain: GTH's true error 6e-16, the
#: correction's rounding 5e-14) is beyond what one correction can measure, and the tail is unproven
CORRECTION_NOISE = 10.0
#: the componentwise residual :math:`\sigma` of :math:`M^T u = b` the sweeps settle for: the bound is
#: then within :math:`1/(1-\sigma)` (11 %) of the one the exact :math:`y` gives
TAIL_RESIDUAL = 0.1
#: :math:`M^T u = b` is solved scaled by this power of two, :math:`2^{500}`: the floor of ``b`` (the
#: smallest normal double, where a probability underflowed) is then 7e-158, and :math:`u` near it
#: is no denormal number that has lost its digits (tandem c=511: 84 % of the states underflow)
TAIL_SCALE = 2.0 ** 500
#: the Krylov solve of :math:`M^T u = b` on classes above ``BOUND_LU_STATES`` states (its tail is then swept
#: where :math:`\sigma` is above :data:`TAIL_RESIDUAL`): BiCGStab with the Gauss-Seidel preconditioner to
#: ``rtol`` 1e-6, where the gallery's :math:`\sigma` was 9e-5 (kanban t=3), 4e-3 (fms n=5), 4e-4
#: (polling N=15) with the same bound as at 1e-10, in 0.4-0.7 of the time
TAIL_SPEC = LinearSpec(kind="bicgstab", ordering="auto", preconditioner="sgs", rtol=1e-6, maxiter=300,
                       restart=50)


def _rhs(op, X, pi):
    """``(c, b)``: :math:`|r_j| \\le c b_j` on ``X`` for the exact :math:`r = \\hat\\pi Q` (global ``c``)."""
    r = op.apply(pi, transpose=True)
    # |fl(r_j) - r_j| <= (k+1) u sum_i |pi_i Q_ij| (twice that: the subtraction of the diagonal's
    # term too, as for the 1-norm bound): the exact residual's size bounded entry by entry
    size = np.abs(r) + 2 * op.product_roundoff() * (op.rates(pi, transpose=True) + pi * op.exit_rates)
    normal = X & (pi >= _TINY)
    c = op.allmax(float(np.max(size[normal] / pi[normal], initial=0.0)))
    if c == 0:                  # pi balances exactly on its normal states: the others decide
        c = np.inf if op.allmax(float(np.max(size[X], initial=0.0))) > 0 else 0.0
    # at least the smallest normal double everywhere on X: a state whose probability underflowed then
    # needs no exact cancellation of its residual (the bound holds for any larger b)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = np.where(X, np.maximum(np.where(normal, pi, np.maximum(pi, size / c)), _TINY), 0.0)
    return c, b


def tail_error_bound(op, support, pi, pin: int, u, rhs=None, scale: float = 1.0) -> tuple:
    r"""The proven bound on :math:`\max_j |\hat\pi_j - \pi_j|/\pi_j` (normal :math:`\pi_j`) from ``u``.

    ``u`` (owned, zero off ``X``) is any approximation of :math:`M^{-T}(\mathrm{scale}\,b)`,
    ``M = -Q_XX``, ``X = support - {pin}``, ``b`` the right-hand side of :func:`_rhs` (``rhs = (c, b)``
    when at hand); see the module's docstring.

    Returns
    -------
    (bound, sigma, condition)
        The bound (``inf`` without one), the componentwise residual :math:`\sigma` of ``u``, and
        :math:`q_{max}(\max_j u_j/\hat\pi_j + \sum u/\sum\hat\pi)/(1-\sigma)`.
    """
    X = support & ~unit_mask(op, pin)
    c, b = _rhs(op, X, pi) if rhs is None else rhs
    if c == 0:
        return 0.0, 0.0, 0.0
    sigma = residual_share(op, X, u, scale * b)
    if not (sigma < 1 and np.isfinite(c)):
        return np.inf, sigma, np.inf
    normal = X & (pi >= _TINY)
    top = op.allmax(float(np.max(u[normal] / (scale * pi[normal]), initial=0.0)))
    share = op.allsum(float(u[X].sum())) / scale / op.allsum(float(pi[support].sum()))
    eps, delta = c * top / (1 - sigma), c * share / (1 - sigma)
    eps = max(eps, _underflowed_eps(op, X & ~normal, pi, c * u / (scale * (1 - sigma)), delta))
    bound = (eps + delta) / (1 - eps) * (1 + 1e-12) if eps < 1 else np.inf
    return bound, sigma, op.qmax * (top + share) / (1 - sigma)


def _underflowed_eps(op, under, pi, absolute, delta: float) -> float:
    r"""The :math:`\varepsilon` of the states whose computed probability underflowed (``under``) but
    whose true one may be normal: there :math:`|\hat\pi_j - x_j| \le a_j` (``absolute``), and where
    :math:`\pi_j = x_j/S \ge` tiny, :math:`|\hat\pi_j - \pi_j|/\pi_j \le a_j/\mathrm{tiny} + |S - 1|`:
    covered by the bound's formula with :math:`\varepsilon \ge a_j/\mathrm{tiny}`. States where
    :math:`(\hat\pi_j + a_j)/(1 - \Delta) <` tiny cannot be normal and are left out (global)."""
    with np.errstate(over="ignore", invalid="ignore"):
        reach = (pi + absolute) / max(1.0 - delta, 0.0)
        may = under & ~(reach < _TINY)                  # NaN or inf: may be normal
        worst = float(np.max(absolute[may] / _TINY, initial=0.0))
    return op.allmax(worst if np.isfinite(worst) else np.inf)


def residual_share(op, X, u, b, count: bool = False):
    r""":math:`\sigma`: the largest :math:`s_j/b_j` of :math:`s = b - M^T u` on ``X`` (its round-off added;
    ``inf`` where :math:`b_j = 0 < s_j`, never below 0; global); with ``count``, also the number of
    states where it exceeds :data:`TAIL_RESIDUAL`."""
    v = np.where(X, u, 0.0)
    s = np.where(X, b + op.apply(v, transpose=True), 0.0)       # b - M^T u: (u Q)_X = -(M^T u)
    # (the round-off of computing s)
    with np.errstate(over="ignore"):
        terms = op.rates(np.abs(v), transpose=True) + np.abs(v) * op.exit_rates + np.abs(b)
    s += 2 * op.product_roundoff() * np.where(X, terms, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ratio = np.where((s > 0) | np.isnan(s), s / b, 0.0)      # (an overflowed residual is NaN: inf)
    ratio = np.where(np.isnan(ratio), np.inf, ratio)
    sigma = max(op.allmax(float(ratio.max(initial=0.0))), 0.0)
    return (sigma, op.allsum(float(np.count_nonzero(ratio > TAIL_RESIDUAL)))) if count else sigma


def _progress(op, X, u, b) -> float:
    r"""What the sweeps of :func:`tail_bound` drive down: :math:`\sigma` once it is within
    :data:`TAIL_RESIDUAL`, before that ``TAIL_RESIDUAL`` times one more than the states above it (a
    front travelling the chain leaves the largest share flat for hundreds of sweeps: tandem c=511)."""
    sigma, above = residual_share(op, X, u, b, count=True)
    return sigma if sigma <= TAIL_RESIDUAL else TAIL_RESIDUAL * (1.0 + above)


def tail_bound(op, support, pi, size: int, backend_options, info: dict) -> float:
    """The tail bound of ``pi`` (normalised, owned), its solve and sweeps; evidence into ``info``.

    ``info`` receives ``tail_error_bound``, ``tail_condition``, ``tail_bound_state`` (the pin),
    ``tail_bound_residual`` (:math:`\\sigma`), ``tail_bound_solver``, ``tail_bound_sweeps`` and
    ``tail_bound_seconds``.
    """
    t0 = time.perf_counter()
    pin = global_argmax(op, np.where(support, pi, -np.inf))[1]
    X = support & ~unit_mask(op, pin)
    rhs = _rhs(op, X, pi)
    c, b = rhs
    b = TAIL_SCALE * b          # (exact: a power of two)
    u, sweeps, kind = np.zeros_like(pi), 0, "none"
    if 0 < c < np.inf:
        spec = TAIL_SPEC if size > BOUND_LU_STATES else LinearSpec(kind="lu")
        kind = spec.kind
        sysm = op.system(X, 0.0, spec, backend_options or {})
        try:
            u, _ = sysm.solve(b, transpose=True)
        finally:
            sysm.close()
        u = np.where(X & np.isfinite(u), u, 0.0)
        if residual_share(op, X, u, b) > TAIL_RESIDUAL:
            sweeper = Sweeper(op, X, 0.0, transpose=True)

            def pair():
                sweeper.relax(u, b, 1.0, "forward")
                sweeper.relax(u, b, 1.0, "backward")
                return True
            # (to TAIL_RESIDUAL itself: polish_sweeps aims at a hundredth of its tolerance)
            run = polish_sweeps(pair, lambda: _progress(op, X, u, b), POLISH_BUDGET,
                                TAIL_RESIDUAL / POLISH_MARGIN)
            sweeps = run.sweeps
    bound, sigma, cond = tail_error_bound(op, support, pi, pin, u, rhs, TAIL_SCALE)
    info.update(tail_error_bound=bound, tail_condition=cond, tail_bound_state=int(pin),
                tail_bound_residual=sigma, tail_bound_solver=kind, tail_bound_sweeps=sweeps,
                tail_bound_seconds=time.perf_counter() - t0)
    return bound


def grade_tail(status, msg: str, bound: float, opts) -> tuple:
    """``TAIL_INACCURATE`` when the tail bound exceeds ``tail_tol`` (a ``SUCCESS`` only; :func:`judge`).

    >>> from ctmc.options import Tolerances
    >>> grade_tail(Status.SUCCESS, "gmres", 3e-5, Tolerances())[0]
    <Status.TAIL_INACCURATE: 'tail_inaccurate'>
    """
    what = ("could not be bounded" if not np.isfinite(bound)
            else f"bound {bound:.1e} exceeds tail_tol {opts.tail_tol:.1e}")
    return judge(status, msg, [(not bound <= opts.tail_tol, Status.TAIL_INACCURATE,
                                f"; relative error of the small probabilities {what} (use 'lu' or "
                                "'gth', or a tighter tol)")])


def tail_correction(op, support, pi, backend_options, info: dict, tol: float = 0.0) -> float:
    r"""The error :math:`\max_j |\hat\pi_j - \pi_j|/\pi_j` (normal :math:`\pi_j`) measured by one
    correction solve, sharp where the tail bound is 4-650x loose: with :math:`z` the most probable state,
    :math:`r = \hat\pi Q` and :math:`M = -Q_{XX}`, the law :math:`x` with :math:`x_z = \hat\pi_z` is
    :math:`x_X = \hat\pi_X + \delta`, :math:`M^T\delta = r_X` (exactly: :math:`\hat\pi_X M =
    \hat\pi_z Q_{zX} - r_X`), solved by sparse LU (scaled by :data:`TAIL_SCALE` against underflow), then
    normalised: :math:`\hat\pi` against the law of an LU pinned at its largest probability, whose tail is
    accurate to about 1e-11 relatively (the tail bound of such answers), wrong only by the rounding of
    :math:`r` and of the solve. Not a proof (the LU's own tail is not bounded here). Where that error is
    finite and above ``tol``, the step's own resolution too: the same step taken from its answer, on the same
    factors (what it measures there is its rounding). Into ``info``: ``tail_error_corrected``,
    ``tail_correction_noise`` (where measured) and ``tail_correction_seconds``. ``inf`` where the solve gives
    no finite answer, None where the factors do not fit (``info["tail_correction_failed"]`` says why)."""
    t0 = time.perf_counter()
    pin = global_argmax(op, np.where(support, pi, -np.inf))[1]
    X = support & ~unit_mask(op, pin)
    try:
        sysm = op.system(X, 0.0, LinearSpec(kind="lu"), backend_options or {})
    except MemoryError as exc:                    # (SuperLU's failed allocation)
        info["tail_correction_failed"] = str(exc)
        return None

    def corrected(y):               # the law one correction step from y, and y's error against it
        delta, _ = sysm.solve(TAIL_SCALE * np.where(X, op.apply(y, transpose=True), 0.0), transpose=True)
        x = y + np.where(X, delta / TAIL_SCALE, 0.0)
        x /= op.allsum(float(x[support].sum()))
        normal = support & (x >= _TINY)
        with np.errstate(invalid="ignore"):
            e = op.allmax(float(np.max(np.abs(y[normal] - x[normal]) / x[normal], initial=0.0)))
        return x, (e if np.isfinite(e) else np.inf)

    try:
        x, err = corrected(pi)
        if np.isfinite(err) and err > tol:         # (only where the grade turns on it: a second solve)
            info["tail_correction_noise"] = corrected(x)[1]
    finally:
        sysm.close()
    info.update(tail_error_corrected=err, tail_correction_seconds=time.perf_counter() - t0)
    return err


def tail_evidence(op, support, pi, balance: float, info: dict, opts, status, msg: str, size: int,
                  backend_options=None, asked: bool = False) -> tuple:
    """The tail evidence of a stationary answer on a class of ``size`` states, for every method and backend:
    ``(status, msg)``.

    The cheap ``info["tail_error_estimate"]`` = ``balance`` times ``info["condition"]`` (where the
    error bound gave a condition; GTH's entrywise estimate where it set one): an estimate of the bound,
    not a proof. With ``asked`` (the tail bound asked for), :func:`tail_bound` into ``info`` and
    :func:`grade_tail`, for an answer still usable after the 1-norm bound's grading. A ``SUCCESS`` whose
    estimate does not show its tail within ``tail_tol`` (above it, or none) is checked where that is cheap
    (a class up to :data:`~ctmc.kernels.evidence.BOUND_LU_STATES` states: one sparse LU) by
    :func:`tail_correction` and graded ``TAIL_INACCURATE`` above ``tail_tol``; on a larger class it stays a
    ``SUCCESS`` (``tail_tol`` bounds the balance error) that says so: ``info["tail_accuracy"] =
    "unproven"`` and its message.
    """
    if np.isfinite(info.get("condition", np.nan)):
        info["tail_error_estimate"] = balance * info["condition"]
    if asked and status in (Status.SUCCESS, Status.TAIL_INACCURATE):    # (a usable answer)
        return grade_tail(status, msg, tail_bound(op, support, pi, size, backend_options, info), opts)
    est = info.get("tail_error_estimate", np.inf)
    if status is not Status.SUCCESS or size <= 1 or est <= opts.tail_tol:
        return status, msg
    err = (tail_correction(op, support, pi, backend_options, info, opts.tail_tol) if size <= BOUND_LU_STATES
           else None)
    noise = info.get("tail_correction_noise")          # (measured where err is finite and above tail_tol)
    if noise is not None and not err > CORRECTION_NOISE * noise:
        err = None                  # above tail_tol but within the correction's own rounding: unmeasured
    if err is not None:
        return judge(status, msg, [(not err <= opts.tail_tol, Status.TAIL_INACCURATE,
                                    f"; relative error of the small probabilities {err:.1e} (one correction "
                                    f"solve) exceeds tail_tol {opts.tail_tol:.1e} (use 'lu' or 'gth', or a "
                                    "tighter tol)")])
    info["tail_accuracy"] = "unproven"
    return status, msg + (f"; the small probabilities' relative error is unproven (estimate {est:.1e} above "
                          f"tail_tol {opts.tail_tol:.1e}; tail_bound=True proves or refutes it)")
