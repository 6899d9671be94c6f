r"""Exact recursions and large-K expansions of the two-queue JSQ model (Tibi 2019).

The chain on :math:`(x, y)` = (shortest, longest) and its rate table are
described in :mod:`models.jsq`. Tibi's
paper states that the Laplace transform of the saturation time
:math:`\tau` (hitting of :math:`(K, K)`) is explicit from every state, that
:math:`E[\tau]` has explicit large-K asymptotics, and that the joint law of
(time, common length) at the first queue-length equality is a function of the
inverse of a simple explicit matrix. The paper's full text is not among our
sources: **everything in this module is derived here** from the rate table,
and checked against ctmc's generic chain analyses and exact rational
arithmetic (``tests/test_jsq_formulas.py``). What is cited is only the model
and the statement that such formulas exist.

The structure used
------------------
While the queues differ (:math:`x < y`) the longest queue only decreases:
:math:`y` is a pure-death coordinate (rate :math:`\mu_2`, or :math:`\nu` when
:math:`x = 0`), and on a *level* :math:`y = m` the shortest queue is a
birth-death process on :math:`\{0, \dots, m-1\}` (up :math:`\rho`, down
:math:`\mu_1`) that leaves the level up into the diagonal state :math:`(m, m)`
or down into level :math:`m - 1`. Discounted at rate :math:`s`, a level is
governed by the tridiagonal M-matrix

.. math::
    A_m = \operatorname{tridiag}\big(-\mu_1,\;
          \rho + \mu_1 1_{x \ge 1} + r(x) + s,\; -\rho\big)_{0 \le x < m},
    \qquad r(0) = \nu,\; r(x \ge 1) = \mu_2,

and :math:`A_m` is the leading :math:`m \times m` block of **one** infinite
matrix :math:`A_\infty`. Its LU factors are therefore computed once (per
:math:`s`), and every level reuses their leading blocks. The pivots are
formed subtraction-free (the GTH form of Gaussian elimination for
M-matrices): with the row excess :math:`\sigma_x = r(x) + s`,

.. math::
    \sigma'_0 = \sigma_0, \quad
    \sigma'_x = \sigma_x + \mu_1 \sigma'_{x-1}/d'_{x-1}, \quad
    d'_x = \sigma'_x + \rho, \quad l_x = \mu_1 / d'_{x-1},

so :math:`A_\infty = L U` with :math:`L` unit lower bidiagonal
(:math:`-l_x`) and :math:`U` upper bidiagonal (:math:`d'_x`, :math:`-\rho`).
Both triangular solves with a non-negative right-hand side then only add
non-negative numbers.

First-equality law
~~~~~~~~~~~~~~~~~~
:math:`H_s((x, y), k) = E_{(x,y)}[e^{-sT}; x_T = k]` with
:math:`T = \inf\{t: x_t = y_t\}`. From one source the discounted occupation
row vector :math:`v_m` of level :math:`m` solves
:math:`v_m A_m = e_{x_0} 1_{m = y_0} + (r \circ v_{m+1})|_{x < m}`, and
:math:`H_s(\cdot, m) = \rho\, v_m(m-1) + r(m)\, v_{m+1}(m)` (enter
:math:`(m, m)` by an arrival from :math:`(m-1, m)` or by a departure of the
longest queue from :math:`(m, m+1)`). This is the law through the explicit
matrix inverse :math:`A_m^{-1}` (:math:`A_m` is tridiagonal Toeplitz but for
its first row, so its inverse is explicit in the roots of
:math:`\rho w^2 - (\rho + 1 + s) w + \mu_1 = 0`); we apply it through the
factors above, level by level: :math:`O(y_0^2)` operations
from a source on level :math:`y_0`, independent of :math:`K` (the strip
:math:`x < y` never reaches the capacity).

Saturation transform
~~~~~~~~~~~~~~~~~~~~
:math:`f(x, y) = E_{(x,y)}[e^{-s\tau}]`. Above level :math:`y` the chain
can only get through :math:`(y, y)`, and the diagonal index moves up by at
most one at a time, so

.. math::
    f(x, y) = p_y(x) \prod_{j=y}^{K-1} g_j, \qquad
    p_m(x) = E_{(x,m)}[e^{-s\tau_{(m,m)}}], \quad
    g_j = E_{(j,j)}[e^{-s\tau_{(j+1,j+1)}}].

Level :math:`m` gives :math:`p_m = u + g_{m-1} w` with
:math:`u = \rho A_m^{-1} e_{m-1}` (explicit: :math:`u_x =
\prod_{i=x}^{m-1}\rho/d'_i`) and :math:`w = A_m^{-1}(r \circ p_{m-1})`;
the diagonal equation at :math:`(m-1, m-1)`,
:math:`(\rho + 1 + s) g_{m-1} = \rho\,p_m(m-1) + p_{m-1}(m-2)\,g_{m-1}`,
closes it:

.. math::
    g_{m-1} = \frac{\rho u_{m-1}}{\rho u_{m-1} + E}, \qquad
    E = s + c_{m-1}(m-2) + \rho z_{m-1},

where :math:`c = 1 - p` is carried along directly (never as a difference):
:math:`z = A_m^{-1}(s + r \circ c_{m-1}) = 1 - u - w` and
:math:`c_m = z + (1 - g_{m-1}) w`. Every quantity is a sum of non-negative
terms; the cost is :math:`O(K^2)` (linear in the number of states), three
bidiagonal BLAS solves per level. (Shooting upwards from :math:`f(0, 0)`
instead is unstable: the rounding grows like the second harmonic function
:math:`\rho^{-N}` of the total, by :math:`\rho^{-2}` per level.)

Scaling: :math:`f` spans thousands of orders of magnitude at large K and
:math:`s` (:math:`10^{-2000}` is ordinary). :math:`w` is solved for
:math:`w / p_{m-1}` (a diagonal similarity of :math:`A_m`, which keeps the
pivots and rescales the off-diagonal factors), :math:`u` and :math:`p` are
kept as logarithms, and the results are returned through logarithms.

Accuracy: every balance equation is re-checked on the result
(``residual``, relative to the non-negative sums on each side). That is a
consistency check, not an error bound: the problem's normwise condition
grows like :math:`E[\tau]`. The accuracy rests on the subtraction-free
construction; the tests find :math:`10^{-13}` relative against exact rational
arithmetic, the chain and the M/M/1 case.

Large-K expansion of the mean
-----------------------------
From the mean formula of the design notes (:func:`models.jsq.saturation_mean`),
summing its geometric sums in closed form (derived here; valid for
:math:`x + y \le K`, :math:`\rho \ne 1`, :math:`\mu_1 \ne \rho`; for
:math:`\mu_1 = \rho` take the limit, see :func:`saturation_mean_expansion`):

.. math::
    E_{(x,y)}[\tau] = C\rho^{-2K} + a\,(\mu_1/\rho)^K
      - \frac{2K - n}{1 - \rho} - \frac{\rho^{-n}}{(1-\rho)^2}
      - \frac{1-\nu}{(1-\rho)(\mu_1-\rho)} + (1-\nu)\Delta(x, y),

.. math::
    C = \frac{\rho\mu_2 + \nu(1-\rho)}{(1-\rho)^2(1-\rho\mu_1)}, \qquad
    a = \frac{(1-\nu)(1+\mu_1)}{(1-\rho\mu_1)(\mu_1-\rho)}, \qquad
    \Delta = \sum_{j=2}^{n}\rho^{-j}\sum_{i=0}^{\min(L_j, j-1)-1}\mu_1^i,

:math:`n = x + y`, :math:`L_j = \max(0, x - \max(0, j-y-1))`. For
:math:`\rho < 1` the leading term is :math:`C\rho^{-2K}`, the same from
every fixed state, and its relative error is
:math:`a(\mu_1\rho)^K/C - 2K\rho^{2K}/((1-\rho)C) + O(\rho^{2K})`: it
decays like :math:`\max(\mu_1\rho, \rho^2)^K`. (The :math:`\rho^{-K}` terms
of the two halves of the double sum cancel.) With
:math:`P_{\mathrm{block}} = \rho^{2K}/D`,
:math:`D = D_\infty - \rho^{2K+1}/(1-\rho) + (1-\nu)(\mu_1\rho)^K/(1-\mu_1\rho)`
and :math:`D_\infty = (\rho\mu_2 + \nu(1-\rho))/((1-\rho)(1-\rho\mu_1))`,
so :math:`C = D_\infty/(1-\rho)` and
:math:`E_{(0,0)}[\tau] \sim 1/((1-\rho)P_{\mathrm{block}})`. Full pooling
(:math:`\nu = 1`) gives the M/M/1 constant :math:`1/(1-\rho)^2`. For
:math:`\rho > 1` the leading term is :math:`2K/(\rho-1)`.

References
----------
D. Tibi, "Martingales and buffer overflow for the symmetric shortest queue
model", Queueing Systems 93 (2019) (the model and the existence of these
formulas). D. Dester, C. Fricker, D. Tibi, "Stationary analysis of the
shortest queue problem", Queueing Systems (2017).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from .parameters import check_parameters

__all__ = [
    "SaturationLaplace",
    "FirstEqualityLaw",
    "MeanExpansion",
    "saturation_laplace",
    "first_equality_law",
    "saturation_mean_expansion",
    "blocking_expansion",
]


# ---------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SaturationLaplace:
    r"""Laplace transform :math:`E_{(x,y)}[e^{-s\tau}]` of the saturation time.

    Attributes
    ----------
    s : ndarray, shape (p,)
        Transform points.
    states : ndarray, shape (m, 2)
        The states ``(x, y)``, rows of the values.
    log_values : ndarray, shape (p, m)
        Natural logarithms (exact far below the double range).
    values : ndarray, shape (p, m)
        ``exp(log_values)`` (0.0 below about 1e-308).
    residual : float
        Largest relative defect over every balance equation of the chain,
        :math:`|\mathrm{in} - \mathrm{out}| / \mathrm{out}` with each side a
        sum of non-negative terms, recomputed from the result (a consistency
        check; see the module docstring on accuracy).
    status : str
        ``"success"``, or ``"inaccurate"`` when ``residual`` exceeds 1e-10.
    wall_time : float
        Seconds.
    """

    s: np.ndarray
    states: np.ndarray
    log_values: np.ndarray
    values: np.ndarray
    residual: float
    status: str
    wall_time: float


@dataclass(frozen=True)
class FirstEqualityLaw:
    r"""Law of (time, common length) at the first queue-length equality.

    Attributes
    ----------
    s : ndarray, shape (p,)
        Transform points.
    sources : ndarray, shape (q, 2)
        Starting states ``(x, y)``, ``x < y``.
    log_laplace : ndarray, shape (p, q, c)
        :math:`\log E_{(x,y)}[e^{-sT}; x_T = k]` for ``k = 0..c-1``,
        ``c = max y + 1`` (``-inf`` where impossible).
    laplace : ndarray
        ``exp(log_laplace)``; at ``s = 0`` the law of the common length.
    residual : float
        Largest defect of the mass identity
        :math:`\sum_k E[e^{-sT}; x_T = k] + s\,E[\int_0^T e^{-st}dt] = 1`,
        the second term from the same occupation measures (a check of the
        solves, not an input).
    status : str
        ``"success"`` or ``"inaccurate"`` (residual above 1e-10).
    wall_time : float
        Seconds.
    """

    s: np.ndarray
    sources: np.ndarray
    log_laplace: np.ndarray
    laplace: np.ndarray
    residual: float
    status: str
    wall_time: float


@dataclass(frozen=True)
class MeanExpansion:
    r"""Terms of the exact large-K form of :math:`E_{(x,y)}[\tau]` (module docstring).

    ``E = C rho**(-2K) + a (mu1/rho)**K + slope * K + const`` for
    :math:`x + y \le K`. ``log_leading`` is :math:`\log C - 2K\log\rho`
    (:math:`\rho < 1`) or :math:`\log(2K/(\rho-1))` (:math:`\rho > 1`);
    ``predicted_relative_error`` is (exact - leading) / leading from the
    other terms, evaluated without overflow.
    """

    C: float
    a: float
    slope: float
    const: float
    log_leading: float
    predicted_relative_error: float


# ---------------------------------------------------------------------------
# the level factorisation
# ---------------------------------------------------------------------------
def _pivots(n, rho, mu1, mu2, nu, s):
    """GTH pivots ``d'`` and multipliers ``l`` of the leading n x n block of A_inf."""
    d = np.empty(n)
    lm = np.zeros(n)
    sig = nu + s
    d[0] = sig + rho
    ex = mu2 + s
    for x in range(1, n):
        lm[x] = mu1 / d[x - 1]
        sig = ex + lm[x] * sig
        d[x] = sig + rho
    return d, lm


def _check_s(s):
    sv = np.atleast_1d(np.asarray(s, dtype=float))
    if sv.ndim != 1 or sv.size == 0 or not np.all(np.isfinite(sv)) or (sv < 0).any():
        raise ValueError(f"s: transform points must be finite reals >= 0, got {s!r}")
    return sv


def _states(K, states):
    if states is None:                           # chain order: x major, then y = x..K
        counts = K + 1 - np.arange(K + 1)
        st = np.empty((int(counts.sum()), 2), dtype=np.int64)
        st[:, 0] = np.repeat(np.arange(K + 1), counts)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        st[:, 1] = np.arange(st.shape[0]) - np.repeat(start, counts) + st[:, 0]
        return st
    raw = np.asarray(states)
    if (raw.size % 2 or raw.dtype.kind not in "iuf"
            or (raw.dtype.kind == "f" and (raw != np.round(raw)).any())):
        raise ValueError("states: expected integer pairs (x, y)")
    st = raw.astype(np.int64).reshape(-1, 2)
    if ((st[:, 0] < 0) | (st[:, 0] > st[:, 1]) | (st[:, 1] > K)).any():
        raise ValueError(f"states: need 0 <= x <= y <= K = {K}")
    return st


def _level_sat(K, rho, mu1, mu2, nu, s):
    """log f(x, m) per level m (list of arrays, level m has m + 1 entries, last = diagonal).

    Level m carries p_m(x) = E_(x,m)[exp(-s tau_(m,m))] (in logs) and its
    complement c_m = 1 - p_m (directly, never as a difference); the passage
    transforms g_{m-1} = E_(m-1,m-1)[exp(-s tau_(m,m))] chain the levels.
    """
    from scipy.linalg.blas import dtbsv

    d, lm = _pivots(max(K, 1), rho, mu1, mu2, nu, s)
    r = np.full(K, mu2)
    r[0] = nu
    lrd = np.log(rho / d)
    Lband = np.empty((2, K))                     # L: unit lower, sub -l_x
    Lband[0] = 1.0
    Lband[1, :K - 1] = -lm[1:K]
    Lband[1, K - 1] = 0.0
    Uband = np.empty((2, K))                     # U: diag d', super -rho
    Uband[1] = d[:K]
    Uband[0, 0] = 0.0
    Uband[0, 1:] = -rho
    lp, c = np.zeros(0), np.zeros(0)             # level 0 has no off-diagonal state
    lps = [lp]
    lg = np.empty(K)                             # log g_{m-1}, m = 1..K
    bad = 0
    for m in range(1, K + 1):
        lv = np.concatenate([lp, [0.0]])         # scaling profile: p_{m-1}, then p_{m-1}(m-1) = 1
        cx = np.concatenate([c, [0.0]])
        # w = A_m^{-1}(r o p_{m-1}), solved for w / p_{m-1} (diagonal similarity)
        if m >= 2:
            q = np.exp(lv[:m - 1] - lv[1:m])    # v_{x-1}/v_x, x = 1..m-1
            band = np.empty((2, m))
            band[0] = 1.0
            band[1, :m - 1] = -lm[1:m] * q
            band[1, m - 1] = 0.0
            bp = dtbsv(1, band, r[:m].copy(), lower=1, diag=1)
            band = np.empty((2, m))
            band[1] = d[:m]
            band[0, 0] = 0.0
            band[0, 1:] = -rho / q
            w = dtbsv(1, band, bp, lower=0)
            # z = A_m^{-1}(s + r o c_{m-1}) = 1 - u - w, from non-negative data
            z = dtbsv(1, Lband[:, :m].copy(), s + r[:m] * cx, lower=1, diag=1)
            z = dtbsv(1, Uband[:, :m].copy(), z, lower=0)
        else:
            w = r[:1] / d[0]
            z = (s + r[:1] * cx) / d[0]
        if (w < 0).any() or (z < 0).any():
            bad += 1
            w, z = np.maximum(w, 0.0), np.maximum(z, 0.0)
        with np.errstate(divide="ignore"):
            lw = lv + np.log(w)
        lu = np.cumsum(lrd[m - 1::-1])[::-1]    # u = A_m^{-1} rho e_{m-1}: prod_{i=x}^{m-1} rho/d'_i
        # (rho + 1 + s) g = rho p_m(m-1) + p_{m-1}(m-2) g, with p_m = u + g w:
        # g = rho u_{m-1} / (rho u_{m-1} + E), E = s + c_{m-1}(m-2) + rho z_{m-1} >= 0
        E = s + (c[m - 2] if m >= 2 else 0.0) + rho * z[m - 1]
        ru = rho * math.exp(lu[m - 1])
        lg[m - 1] = math.log(ru) - math.log(ru + E)
        one_minus_g = E / (ru + E)
        lp = np.logaddexp(lu, lg[m - 1] + lw)
        c = z + one_minus_g * np.exp(lw)         # 1 - p_m = (1 - u - w) + (1 - g) w
        lps.append(lp)
    # f(x, m) = p_m(x) prod_{j=m}^{K-1} g_j
    tail = np.concatenate([np.cumsum(lg[::-1])[::-1], [0.0]])   # tail[m] = sum_{j >= m} log g_j
    levels = [np.concatenate([lps[m], [0.0]]) + tail[m] for m in range(K + 1)]
    return levels, bad


def _sat_residual(levels, K, rho, mu1, mu2, nu, s):
    """Largest relative defect of the balance equations (log-space, non-negative sides)."""
    worst = 0.0
    for m in range(K + 1):
        cur = levels[m]
        up = levels[m + 1] if m < K else None
        dn = levels[m - 1] if m >= 1 else None
        # off-diagonal states (x, m), x < m
        if m >= 1:
            x = np.arange(m)
            rx = np.where(x == 0, nu, mu2)
            terms = [np.log(rho) + cur[1:m + 1]]                       # to (x+1, m)
            with np.errstate(divide="ignore"):
                lrx = np.log(rx)
                if mu1 > 0:
                    left = np.full(m, -np.inf)
                    left[1:] = math.log(mu1) + cur[:m - 1]
                    terms.append(left)
                terms.append(lrx + dn[:m])                            # to (x, m-1)
            lin = np.logaddexp.reduce(np.vstack(terms), axis=0)
            out = np.log(rho + np.where(x >= 1, mu1, 0.0) + rx + s) + cur[:m]
            worst = max(worst, float(np.max(np.abs(np.expm1(lin - out)))))
        # diagonal (m, m), m < K
        if m < K:
            lin = math.log(rho) + up[m]
            tot = rho + s
            if m >= 1:
                lin = np.logaddexp(lin, cur[m - 1])
                tot += 1.0
            out = math.log(tot) + cur[m]
            worst = max(worst, abs(math.expm1(lin - out)))
    return worst


# ---------------------------------------------------------------------------
# saturation transform
# ---------------------------------------------------------------------------
def saturation_laplace(K: int, rho: float, mu2: float, idle_rate: float | None = None, s=1.0,
                       states=None, residual: bool = True) -> SaturationLaplace:
    r"""Laplace transform of the saturation time from every state, by the level recursion.

    Parameters
    ----------
    K, rho, mu2, idle_rate
        As in :func:`models.jsq.blocking_probability`.
    s : float or array_like
        Transform points, ``>= 0``.
    states : (m, 2) array_like of int, optional
        States ``(x, y)``; default all, in the order of ``JSQ2.chain()``.
    residual : bool
        Recompute every balance equation from the result (another
        :math:`O(K^2)` pass); ``False`` reports ``nan``.

    Returns
    -------
    SaturationLaplace
        Values in log space; cost :math:`O(K^2)` per point (module docstring).

    Examples
    --------
    >>> from ctmc.models.jsq import JSQ2
    >>> r = saturation_laplace(10, 0.9, 0.5, s=[0.0, 0.01])      # every state, chain order
    >>> r.status, bool(np.allclose(r.values[0], 1.0, rtol=1e-14))
    ('success', True)
    >>> chain = JSQ2(K=10, rho=0.9, mu2=0.5).saturation_laplace([0.0, 0.01]).values
    >>> bool(np.allclose(r.values, chain, rtol=1e-12, atol=0))
    True
    >>> # far below the double range: log space
    >>> big = saturation_laplace(3000, 0.9, 0.5, s=1.0, states=[(0, 0)], residual=False)
    >>> float(big.values[0, 0]), bool(big.log_values[0, 0] < -3000)
    (0.0, True)
    """
    t0 = time.perf_counter()
    K, rho, mu2, nu = check_parameters(K, rho, mu2, idle_rate)
    sv = _check_s(s)
    st = _states(K, states)
    mu1 = 1.0 - mu2
    out = np.empty((sv.size, st.shape[0]))
    worst, bad = 0.0, 0
    if states is None:                           # all states: through a padded (y, x) table
        grid = np.empty((K + 1, K + 1))
        upper = np.triu(np.ones((K + 1, K + 1), dtype=bool))
    else:
        ys, xs = st[:, 1], st[:, 0]
        order = np.argsort(ys, kind="stable")
        bounds = np.searchsorted(ys[order], np.arange(K + 2))
    for i, si in enumerate(sv):
        levels, b = _level_sat(K, rho, mu1, mu2, nu, float(si))
        bad += b
        if residual:
            worst = max(worst, _sat_residual(levels, K, rho, mu1, mu2, nu, float(si)))
        if states is None:
            for y in range(K + 1):
                grid[y, :y + 1] = levels[y]
            out[i] = grid.T[upper]               # row-major over (x, y), y >= x: chain order
        else:
            for y in range(K + 1):
                sel = order[bounds[y]:bounds[y + 1]]
                if sel.size:
                    out[i, sel] = levels[y][xs[sel]]
        del levels
    res = worst if residual else float("nan")
    status = "inaccurate" if bad or (residual and not res <= 1e-10) else "success"
    return SaturationLaplace(s=sv, states=st, log_values=out, values=np.exp(out), residual=res,
                             status=status, wall_time=time.perf_counter() - t0)


# ---------------------------------------------------------------------------
# first-equality law
# ---------------------------------------------------------------------------
def _log_first_level(d, lm, rho, x0, m):
    """log of v = e_{x0} A_m^{-1} (row x0 of the inverse), in log space."""
    # U^T w = e_{x0}: w_x = 0 (x < x0), w_{x0} = 1/d_{x0}, w_x = rho w_{x-1} / d_x
    lw = np.full(m, -np.inf)
    lw[x0:] = -np.log(d[x0]) + np.concatenate([[0.0], np.cumsum(np.log(rho / d[x0 + 1:m]))])
    # L^T v = w: v_x = w_x + l_{x+1} v_{x+1}
    lv = np.empty(m)
    lv[m - 1] = lw[m - 1]
    llm = np.full(m, -np.inf)
    with np.errstate(divide="ignore"):
        llm[1:] = np.log(lm[1:m])
    for x in range(m - 2, -1, -1):
        a, b = lw[x], llm[x + 1] + lv[x + 1]
        lv[x] = max(a, b) + math.log1p(math.exp(-abs(a - b))) if (a > -np.inf or b > -np.inf) else -np.inf
    return lv


def _first_equality_one(x0, y0, rho, mu1, mu2, nu, s, d, lm, ncols):
    """log E[e^{-sT}; x_T = k] (k < ncols) and log of the discounted occupation total."""
    from scipy.linalg.blas import dtbsv

    lout = np.full(ncols, -np.inf)
    lr = np.full(max(y0, 1), math.log(mu2) if mu2 > 0 else -np.inf)
    lr[0] = math.log(nu) if nu > 0 else -np.inf
    lrho = math.log(rho)
    lv = _log_first_level(d, lm, rho, x0, y0)
    lo = x0 if mu1 == 0 else 0               # mu1 = 0: x never decreases, support x >= x0
    occ = [np.logaddexp.reduce(lv[lo:])]
    m = y0
    while True:
        # lv: log v_m on x = lo..m-1 (entries below lo are -inf)
        lout[m] = np.logaddexp(lout[m], lrho + lv[m - 1])
        lout[m - 1] = np.logaddexp(lout[m - 1], lr[m - 1] + lv[m - 1])
        if m - 1 <= lo or m == 1:
            break
        n = m - 1                              # next level: x = lo..n-1
        prof = lv[lo:n]                        # scale by v_m on those x
        r = np.exp(lr[lo:n])
        if not (r > 0).any():
            break
        k = n - lo
        if k >= 2:
            q = np.exp(prof[:-1] - prof[1:])   # v_{x-1}/v_x
            band = np.empty((2, k))            # U^T: diag d', sub -rho q
            band[0] = d[lo:n]
            band[1, :k - 1] = -rho * q
            band[1, k - 1] = 0.0
            w = dtbsv(1, band, r.copy(), lower=1)
            if mu1 > 0:                        # L^T: unit, super -l_{x+1} p
                band = np.empty((2, k))
                band[1] = 1.0
                band[0, 0] = 0.0
                band[0, 1:] = -lm[lo + 1:n] / q
                w = dtbsv(1, band, w, lower=0, diag=1)
        else:
            w = r / d[lo:n]
        with np.errstate(divide="ignore"):
            new = np.full(n, -np.inf)
            new[lo:n] = prof + np.log(np.maximum(w, 0.0))
        lv = new
        occ.append(np.logaddexp.reduce(lv[lo:]))
        m = n
    return lout, float(np.logaddexp.reduce(occ))


def first_equality_law(rho: float, mu2: float, idle_rate: float | None = None, sources=((0, 1),),
                       s=0.0) -> FirstEqualityLaw:
    r"""Transform of (time, common length) at the first equality, by the level recursion.

    Parameters
    ----------
    rho, mu2, idle_rate
        As in :func:`models.jsq.blocking_probability`. The law does not
        depend on :math:`K` (before the first equality the longest queue
        only decreases).
    sources : (q, 2) array_like of int
        Starting states ``(x, y)`` with ``0 <= x < y``.
    s : float or array_like
        Transform points ``>= 0``; ``s = 0`` gives the law of the common
        length :math:`x_T`.

    Returns
    -------
    FirstEqualityLaw
        ``laplace[p, i, k]`` :math:`= E_{\mathrm{source}_i}[e^{-s_p T}; x_T = k]`;
        cost :math:`O(y^2)` per source and point.

    Examples
    --------
    >>> law = first_equality_law(0.9, 0.3, sources=[(2, 7)], s=[0.0, 0.5])
    >>> law.laplace.shape, round(float(law.laplace[0, 0].sum()), 12)
    ((2, 1, 8), 1.0)
    """
    t0 = time.perf_counter()
    _, rho, mu2, nu = check_parameters(1, rho, mu2, idle_rate)
    sv = _check_s(s)
    raw = np.asarray(sources)
    if raw.size == 0 or raw.size % 2 or raw.dtype.kind not in "iu":
        raise ValueError(f"sources: expected integer pairs (x, y) with 0 <= x < y, got {sources!r}")
    src = raw.astype(np.int64).reshape(-1, 2)
    if ((src[:, 0] < 0) | (src[:, 0] >= src[:, 1])).any():
        raise ValueError("sources: need 0 <= x < y (unequal queues) for every source")
    mu1 = 1.0 - mu2
    ymax = int(src[:, 1].max())
    out = np.full((sv.size, src.shape[0], ymax + 1), -np.inf)
    worst = 0.0
    for p, si in enumerate(sv):
        d, lm = _pivots(ymax, rho, mu1, mu2, nu, float(si))
        for i, (x0, y0) in enumerate(src):
            lo, locc = _first_equality_one(int(x0), int(y0), rho, mu1, mu2, nu, float(si), d, lm, ymax + 1)
            out[p, i] = lo
            mass = float(np.exp(np.logaddexp.reduce(lo)))
            if si > 0:
                mass += float(si) * math.exp(locc)
            worst = max(worst, abs(mass - 1.0))
    status = "success" if worst <= 1e-10 else "inaccurate"
    return FirstEqualityLaw(s=sv, sources=src, log_laplace=out, laplace=np.exp(out), residual=worst,
                            status=status, wall_time=time.perf_counter() - t0)


# ---------------------------------------------------------------------------
# large-K expansions
# ---------------------------------------------------------------------------
def saturation_mean_expansion(K: int, rho: float, mu2: float, idle_rate: float | None = None,
                              state=(0, 0)) -> MeanExpansion:
    r"""Terms of the exact large-K form of :math:`E_{(x,y)}[\tau]` (module docstring).

    Parameters
    ----------
    K, rho, mu2, idle_rate
        As in :func:`models.jsq.blocking_probability`; :math:`\rho \ne 1`.
        For :math:`\mu_1 = \rho` exactly the two geometric terms merge
        (``a = 0``, ``slope`` gains :math:`(1-\nu)/(\rho(1-\rho))`); close
        to it the split into ``a`` and ``const`` cancels (digits lost in
        proportion to :math:`1/|\mu_1 - \rho|`).
    state : (x, y)
        With :math:`x + y \le K`.

    Returns
    -------
    MeanExpansion

    Examples
    --------
    >>> e = saturation_mean_expansion(10, 0.9, 0.3)
    >>> exact = e.C * 0.9 ** -20 + e.a * (0.7 / 0.9) ** 10 + e.slope * 10 + e.const
    >>> from ctmc.models.jsq.closed_forms import saturation_mean
    >>> abs(exact / saturation_mean(10, 0.9, 0.3, states=[(0, 0)])[0] - 1) < 1e-12
    True
    """
    K, rho, mu2, nu = check_parameters(K, rho, mu2, idle_rate)
    mu1 = 1.0 - mu2
    x, y = (int(v) for v in state)
    n = x + y
    if not (0 <= x <= y and n <= K):
        raise ValueError(f"state: need 0 <= x <= y and x + y <= K = {K}, got {state!r}")
    if rho == 1.0:
        raise ValueError("rho: the expansion needs rho != 1 (rho = 1 has polynomial growth)")
    C = (rho * mu2 + nu * (1 - rho)) / ((1 - rho) ** 2 * (1 - rho * mu1))
    coincide = mu1 == rho
    a = 0.0 if coincide else (1 - nu) * (1 + mu1) / ((1 - rho * mu1) * (mu1 - rho))
    delta = 0.0
    for j in range(2, n + 1):
        Lj = max(0, x - max(0, j - y - 1))
        mj = min(Lj, j - 1)
        delta += rho ** -j * (mj if mu1 == 1 else (1 - mu1 ** mj) / (1 - mu1))
    slope = -2.0 / (1 - rho)
    const = n / (1 - rho) - rho ** -n / (1 - rho) ** 2 + (1 - nu) * delta
    if coincide:    # limit mu1 -> rho of a (mu1/rho)^K - (1-nu)/((1-rho)(mu1-rho))
        slope += (1 - nu) / (rho * (1 - rho))
        const += (1 - nu) / ((1 - rho) * (1 - rho * rho))
    else:
        const -= (1 - nu) / ((1 - rho) * (mu1 - rho))
    lr = math.log(rho)
    if rho < 1:
        logL = math.log(C) - 2 * K * lr if C > 0 else -math.inf
        # (a (mu1/rho)^K + slope K + const) / (C rho^-2K), without overflow
        t1 = a * math.exp(K * (math.log(mu1) + lr)) / C if mu1 > 0 and C > 0 else 0.0
        t2 = (slope * K + const) * math.exp(2 * K * lr) / C if C > 0 else math.inf
        pred = t1 + t2
    else:
        lead = slope * K
        logL = math.log(lead)
        rest = C * math.exp(-2 * K * lr) + const
        if mu1 > 0:
            rest += a * math.exp(K * (math.log(mu1) - lr))
        pred = rest / lead
    return MeanExpansion(C=C, a=a, slope=slope, const=const, log_leading=logL, predicted_relative_error=pred)


def blocking_expansion(K: int, rho: float, mu2: float, idle_rate: float | None = None):
    r"""Leading term of :math:`P_{\mathrm{block}}` for large K and the exact relative error of it.

    With :math:`P_{\mathrm{block}} = \rho^{2K}/D` (design notes),
    :math:`D = \sum_{j=0}^{2K}\rho^j - (1-\nu)\sum_{m<K}(\mu_1\rho)^m`:

    * :math:`\rho < 1`: :math:`P_{\mathrm{block}} \sim \rho^{2K}/D_\infty`,
      :math:`D_\infty = (\rho\mu_2 + \nu(1-\rho))/((1-\rho)(1-\rho\mu_1))`;
      :math:`D = D_\infty(1 + e)` with
      :math:`e = \big[(1-\nu)(\mu_1\rho)^K/(1-\mu_1\rho) - \rho^{2K+1}/(1-\rho)\big]/D_\infty`,
      so the leading term is off by :math:`-e/(1+e)`, of order
      :math:`\max(\mu_1\rho, \rho^2)^K`;
    * :math:`\rho > 1`: :math:`P_{\mathrm{block}} \sim 1 - 1/\rho`, off by
      :math:`y/(1-y)`,
      :math:`y = \rho^{-2K-1}\big(1 + (\rho-1)(1-\nu)\sum_{m<K}(\mu_1\rho)^m\big)`;
    * :math:`\rho = 1`: :math:`P_{\mathrm{block}} = 1/D` exactly, no
      exponential regime (``ValueError``).

    Returns
    -------
    (float, float)
        ``(log of the leading term, relative error of the leading term)``,
        the error as (exact - leading) / leading, evaluated without overflow.

    Examples
    --------
    >>> from ctmc.models.jsq.closed_forms import log_blocking_probability
    >>> lead, err = blocking_expansion(20, 0.9, 0.3)
    >>> exact = log_blocking_probability(20, 0.9, 0.3)
    >>> abs(math.expm1(exact - lead) / err - 1) < 1e-9
    True
    """
    K, rho, mu2, nu = check_parameters(K, rho, mu2, idle_rate)
    mu1 = 1.0 - mu2
    lr = math.log(rho)
    if rho == 1.0:
        raise ValueError("rho: the large-K expansion needs rho != 1 "
                         "(rho = 1: P_block = 1/D is polynomial in K)")
    if rho < 1:
        Dinf = (rho * mu2 + nu * (1 - rho)) / ((1 - rho) * (1 - rho * mu1))
        t = (1 - nu) * math.exp(K * (math.log(mu1) + lr)) / (1 - mu1 * rho) if mu1 > 0 else 0.0
        e = (t - math.exp((2 * K + 1) * lr) / (1 - rho)) / Dinf
        return 2 * K * lr - math.log(Dinf), -e / (1 + e)
    # rho > 1: log of sum_{m<K} (mu1 rho)^m
    if mu1 > 0:
        lq = math.log(mu1) + lr
        lG = float(np.logaddexp.reduce(np.arange(K) * lq))
        ly = -(2 * K + 1) * lr + float(np.logaddexp(0.0, math.log(rho - 1) + math.log1p(-nu) + lG)) \
            if nu < 1 else -(2 * K + 1) * lr
    else:
        ly = -(2 * K + 1) * lr + (math.log1p((rho - 1) * (1 - nu)))
    y = math.exp(ly)
    return math.log1p(-1.0 / rho), y / (1 - y)
