r"""Means of hitting times: through a regeneration state, and beyond the double range.

Scaled values
-------------
A birth-death chain of :math:`N` levels whose down rate is twice its up rate
has means of order :math:`2^N`: beyond the largest double
(:math:`2^{1024} \approx 1.8 \cdot 10^{308}`) from :math:`N \approx 1024`. The
equations are linear, so a mean is kept as :math:`m = y \cdot 2^j`
(:class:`Scaled`): ``y`` in the double range, ``j`` a common integer exponent,
both exact to the last bit (powers of two scale without rounding). The
analysis reports ``mean = inf`` where :math:`m` overflows, ``log10`` of every
mean (``info["log10_mean"]``, accurate to the solve's own relative error) and
a status that is not a success (:func:`overflow_text`).

* A direct solve (:func:`scaled_solve`): :math:`M y = b\, 2^{-j}`, first with
  :math:`j =` :data:`SCALE` (so means up to about :math:`2^{2000}` fit), then
  again with the :math:`j` that puts the largest :math:`y` near
  :math:`2^{960}` (the small means keep normal doubles); the factorisation is
  reused.
* Through a regeneration state :math:`z` (:func:`regenerative_mean`):
  :math:`E_i[R_A] = E_i[R_B] + P_i(T_z < T_A)\, H` with :math:`B = A \cup \{z\}`
  and :math:`H = S / x_A`, :math:`x` the stationary-type flow of the chain
  restarted at :math:`z` (pinned :math:`x_z = 1`), :math:`S = \sum_F x_j r_j`,
  :math:`x_A` its flow into :math:`A`. When :math:`x_A` is below
  :data:`FLOW_FLOOR` (it underflows for means beyond the double range), the
  flow is solved again scaled by :math:`2^k` (:math:`k =` :data:`SCALE`) and so
  is the column of :math:`P_i(T_z < T_A)`: the product
  :math:`(w\, 2^{-k})(h\, 2^k)` needs no power of two, and only the final
  :math:`j` scales it into the double range.

Residuals and balance errors are computed on the scaled pair
:math:`(y, b\, 2^{-j})`: backward errors do not depend on the scale.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .backends.base import SolveReport
from .kernels.classes import global_argmax, slowest_exit
from .results import Status
from .sets import unit_mask as _unit

__all__ = ["FLOW_FLOOR", "SCALE", "Scaled", "overflow_text", "regenerative_mean", "row_norms", "scaled_solve"]

#: the first scaling of a direct solve whose means overflow, and of a regenerative flow that underflows
SCALE = 1000
#: a regenerative flow into the target below this (with x_z = 1) is solved again scaled by 2^SCALE
FLOW_FLOOR = 2.0 ** -900
#: scaled values are brought to at most 2^TOP (room for the solver's own sums)
TOP = 960
_LOG10_2 = math.log10(2.0)


@dataclass(frozen=True)
class Scaled:
    """Values ``y * 2**exponent`` (the owned part of a vector over the states).

    Attributes
    ----------
    y : ndarray
        In the double range.
    exponent : int
        ``>= 0``; 0 when the values themselves are in range.
    """

    y: np.ndarray
    exponent: int = 0

    @property
    def values(self) -> np.ndarray:
        """``y * 2**exponent``: ``inf`` where beyond the double range."""
        with np.errstate(over="ignore"):
            return np.ldexp(self.y, self.exponent)

    def scale(self, b) -> np.ndarray:
        """``b * 2**-exponent``: a right-hand side in the scale of ``y``."""
        return np.ldexp(np.asarray(b, dtype=float), -self.exponent)

    def log10(self) -> np.ndarray:
        """``log10`` of every value (``-inf`` for 0), from ``y`` and the exponent."""
        with np.errstate(divide="ignore"):
            return np.log10(self.y) + self.exponent * _LOG10_2

    def overflows(self, op, mask) -> bool:
        """Whether some value on ``mask`` (owned part) is beyond the double range (global)."""
        return self.exponent > 0 and op.allmax(float(np.isinf(self.values[mask]).any())) > 0


def _exponent(log2_top: float) -> int:
    """The scale exponent ``j >= 0`` that brings a largest value of ``2**log2_top`` to at most ``2**TOP``."""
    return max(0, int(math.ceil(log2_top)) - TOP) if np.isfinite(log2_top) else 0


def overflow_text(op, scaled: Scaled, mask, what: str = "means") -> str:
    """The reason of a result whose values overflow: the largest, in log10, and where the rest is."""
    top = op.allmax(float(np.max(scaled.log10()[mask], initial=-np.inf)))
    return (f"the {what} overflow the double range (about 1.8e308): the largest is about 10^{top:.2f}; "
            f"{what[:-1]} = inf where it overflows and info['log10_{what[:-1]}'] gives log10 of every "
            f"{what[:-1]} (solved as y * 2^{scaled.exponent})")


def scaled_solve(ps, b):
    """``M x = b`` on ``ps``'s set of finite means when ``x`` overflows: ``(Scaled, SolveReport)``.

    Solved as ``M y = b 2^-j``, first with ``j = SCALE``, then with the ``j`` that puts the
    largest ``y`` near ``2^TOP`` (one more solve on the same factorisation); a report that is not a
    success when even ``2^-SCALE`` leaves an overflow.
    """
    op, F = ps.op, ps.finite
    b = np.asarray(b, dtype=float)
    y, rep = ps.solve(0.0, "finite", np.ldexp(b, -SCALE))
    if rep.status is not Status.SUCCESS:
        return Scaled(y, SCALE), rep
    top = op.allmax(float(np.abs(y[F]).max(initial=0.0)))
    if not np.isfinite(top):
        return Scaled(y, SCALE), SolveReport(Status.INACCURATE, f"the means exceed about 2^{SCALE + 1024} "
                                             f"(10^{(SCALE + 1024) * _LOG10_2:.0f}), beyond a scaled solve")
    j = _exponent(SCALE + math.log2(top)) if top > 0 else 0
    if j < SCALE:
        y, rep = ps.solve(0.0, "finite", np.ldexp(b, -j))
    return Scaled(y, min(j, SCALE)), rep


def row_norms(op, X, s, transpose: bool = False) -> np.ndarray:
    """Absolute row sums of ``M = sI - Q_XX`` (or of ``M^T``) on the owned part of ``X``; 0 elsewhere."""
    one = X.astype(float)
    return np.where(X, (float(s) + op.exit_rates) + one * op.rates(one, transpose), 0.0)


def regenerative_mean(op, ps, r, kind):
    r"""Mean accumulated reward until ``A`` through a regeneration state ``z``.

    With ``B = A + {z}``, ``E_i[R_A] = E_i[R_B] + P_i(T_z < T_A) E_z[R_A]``;
    the first two terms come from the well-conditioned system on
    ``F' = F - {z}`` (``z`` a high-probability state), and
    ``E_z[R_A] = sum_F x_j r_j / x_a`` from the stationary law ``x`` of the
    chain restarted at ``z`` from ``A`` (rate 1), which is the transposed
    solve on the same ``F'`` pinned at ``x_z = 1`` and keeps relative
    accuracy on ``x_a``. One set-up system serves both; a flow ``x_a`` below
    :data:`FLOW_FLOOR` is solved again scaled (the module's docstring).

    Returns ``(Scaled mean (owned), condition of the F' system, info, SolveReport)``.
    """
    F = ps.finite
    hint = None
    if op.initial is not None and len(op.initial):
        i0 = int(op.initial[0])
        if op.allsum(float((F & _unit(op, i0)).sum())) > 0:
            hint = i0
    z = hint if hint is not None else slowest_exit(op, F)
    into_a = np.where(F, op.rates(ps.target.astype(float)), 0.0)
    spec = ps._spec(kind, "finite")
    info = {}
    for attempt in range(2):
        e = _unit(op, z)
        Fp = F & ~e
        sysm = op.system(Fp, 0.0, spec, ps.bo)
        info.update(sysm.info)
        bz = np.where(Fp, op.rates(e.astype(float), transpose=True), 0.0)      # R_{z, F'}
        x, rep = sysm.solve(bz, transpose=True)
        x[e] = 1.0
        if rep.status is not Status.SUCCESS:
            sysm.close()
            return None, np.inf, info, SolveReport(rep.status, f"regenerative solve: {rep.reason}")
        xmax = op.allmax(float(x.max(initial=0.0)))
        xz = op.allmax(float(x[e].max(initial=-np.inf)))
        if attempt == 0 and xz < 1e-3 * xmax:
            z = global_argmax(op, np.where(F, x, -np.inf))[1]
            sysm.close()
            continue
        break
    x_a = op.allsum(float(np.dot(x, into_a)))
    S = op.allsum(float(np.dot(np.where(F, x, 0.0), r)))
    k = 0
    if not x_a >= FLOW_FLOOR:
        # the flow into A underflows (a mean beyond about 2^900): again with x_z = 2^k
        k = SCALE
        xs, rep = sysm.solve(np.ldexp(bz, k), transpose=True)
        xs[e] = np.ldexp(1.0, k)
        x_a = op.allsum(float(np.dot(xs, into_a))) if rep.status is Status.SUCCESS else 0.0
        if not x_a >= FLOW_FLOOR:
            sysm.close()
            why = rep.reason if rep.status is not Status.SUCCESS else (
                f"the flow into the target is below 2^-{SCALE + 900} even scaled: means beyond about "
                f"10^{(SCALE + 900) * _LOG10_2:.0f}")
            st = rep.status if rep.status is not Status.SUCCESS else Status.INACCURATE
            return None, np.inf, info, SolveReport(st, f"regenerative solve: {why}")
    h = S / x_a                      # H 2^-k, H = E_z[R_A]
    if not 0 < h < np.inf:
        sysm.close()
        return None, np.inf, info, SolveReport(Status.INACCURATE, f"regenerative solve: cycle mean {h} 2^{k}")
    rz = np.where(Fp, op.rates(e.astype(float)), 0.0)
    rhs = np.column_stack([np.where(Fp, r, 0.0), np.ldexp(rz, k), Fp.astype(float)])
    sol, rep = sysm.solve(rhs)
    sysm.close()
    if rep.status is not Status.SUCCESS:
        return None, np.inf, info, SolveReport(rep.status, f"regenerative solve: {rep.reason}")
    w = sol[:, 1]                    # P_i(T_z < T_A) 2^k: the mean is sol0 + w h, no power of two left
    wmax = op.allmax(float(np.abs(w[Fp]).max(initial=0.0)))
    j = _exponent(math.log2(h) + max(k, math.log2(wmax) if wmax > 0 else -np.inf)) if h > 0 else 0
    y = np.where(Fp, np.ldexp(sol[:, 0], -j) + w * np.ldexp(h, -j), 0.0)
    y[e] = np.ldexp(h, k - j)
    cond = (op.allmax(row_norms(op, Fp, 0.0).max(initial=0.0))
            * op.allmax(float(np.abs(sol[:, 2]).max(initial=0.0))))
    with np.errstate(over="ignore"):
        info.update(regeneration_state=int(z), cycle_mean=float(np.ldexp(h, k)))
    return Scaled(y, j), cond, info, SolveReport()

