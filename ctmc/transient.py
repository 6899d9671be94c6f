r"""Transient distributions by uniformisation or Krylov matrix exponentials.

Problem
-------
Given an initial law :math:`p_0`, compute :math:`p(t) = p_0 e^{Qt}` for one
or many :math:`t \ge 0`.

Uniformisation
--------------
With :math:`\Lambda \ge \max_i |q_{ii}|` and :math:`P = I + Q/\Lambda`
(a stochastic matrix),

.. math::

    p(t) = \sum_{k \ge 0} e^{-\Lambda t} \frac{(\Lambda t)^k}{k!}\, p_0 P^k .

All terms are non-negative, so there is no cancellation and small
probabilities keep their relative accuracy. The sum is cut at the smallest
:math:`k` whose Poisson tail is below ``eps`` (the reported ``error_bound``
on the 1-norm), and leading terms whose Poisson weight is negligible are
skipped. All requested times share the same vectors :math:`p_0 P^k`.

``method="expm"`` uses a Krylov approximation of the matrix-exponential action
instead (the backend's: :func:`scipy.sparse.linalg.expm_multiply`, SLEPc's MFN),
stepping from one requested time to the next; ``method="auto"`` is
uniformisation unless it would need more than ``max_terms`` steps.

Everything here is written once on the primitives of :mod:`ctmc.backends.base`.
"""
from __future__ import annotations

import bisect
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ._poisson import poisson_logpmf
from ._util import as_points
from .backends import check_backend_options, operator_for
from .backends.base import UNIT_ROUNDOFF, worst
from .kernels.evidence import judge
from .kernels.registry import Method
from .options import make_options, positive
from .progress import Progress
from .expr import Expr
from .results import Status, TransientResult
from .sets import as_law, owned_mask, owned_values

__all__ = ["METHODS", "UniformizationOptions", "ExpmOptions", "TransientAutoOptions", "ENTRY_RTOL",
           "uniformize_operator", "stochastic_step", "backward", "check_steps", "poisson_window",
           "poisson_weights", "stochastic_exp", "TAIL_EPS", "check_uniformization", "initial_law", "transient"]


def check_uniformization(eps, max_terms) -> None:
    """Validate the uniformisation parameters (ValueError naming the bad one)."""
    if not (isinstance(eps, float) and 0 < eps < 1):
        raise ValueError(f"eps: expected 0 < eps < 1, got {eps!r}")
    if isinstance(max_terms, bool) or not isinstance(max_terms, (int, np.integer)) or max_terms < 1:
        raise ValueError(f"max_terms: expected a positive integer, got {max_terms!r}")


def check_steps(steps: float, max_terms) -> None:
    """Refuse (ValueError) a uniformisation needing about ``steps`` > ``max_terms`` steps (None: no limit)."""
    if max_terms is not None and steps > max_terms:
        raise ValueError(f"t: the largest time needs about {steps:.3g} uniformisation steps, above "
                         f"max_terms={max_terms}; raise max_terms or ask for smaller times")


#: Largest chain whose transient law ``auto`` computes by a dense exponential when uniformisation
#: would need more than ``max_terms`` steps (scaling and squaring costs O(n^3 log(||Q|| t))).
DENSE_EXPM_MAX = 1000


def stochastic_exp(Q: np.ndarray, t: float) -> np.ndarray:
    r""":math:`e^{Qt}` of a dense generator for any :math:`t`, by squaring stochastic matrices.

    :math:`E = e^{Q\tau}` with :math:`\tau = t/2^s` and :math:`\|Q\tau\|_\infty \le 1/2` (Padé),
    its round-off negatives set to 0 and its rows renormalised, then squared :math:`s` times:
    products of non-negative matrices, so no cancellation and rows that keep summing to one
    (scipy's ``expm`` of :math:`Qt` itself loses mass: 2e-5 at :math:`t = 10^{12}` on 8 states).

    >>> import numpy as np
    >>> E = stochastic_exp(np.array([[-1.0, 1.0], [2.0, -2.0]]), 1e12)
    >>> np.round(E, 12).tolist(), abs(E.sum(axis=1) - 1).max() < 1e-14
    ([[0.666666666667, 0.333333333333], [0.666666666667, 0.333333333333]], True)
    """
    import scipy.linalg as sla
    s = squarings(Q, t)
    E = np.maximum(sla.expm(Q * (t / 2.0 ** s)), 0.0)
    E /= E.sum(axis=1, keepdims=True)
    for _ in range(s):
        E = E @ E
        E /= E.sum(axis=1, keepdims=True)
    return E


def squarings(Q: np.ndarray, t: float) -> int:
    r"""The squarings :math:`s` of :func:`stochastic_exp`: the least with :math:`\|Qt\|_\infty / 2^s \le 1/2`.

    >>> squarings(np.array([[-1.0, 1.0], [2.0, -2.0]]), 1e12)
    43
    """
    norm = float(np.abs(Q).sum(axis=1).max()) * t
    return max(0, int(math.ceil(math.log2(norm / 0.5)))) if norm > 0.5 else 0


def dense_exp_estimate(n: int, s: int) -> float:
    r"""First-order round-off of :func:`stochastic_exp` on a law, in the 1-norm: :math:`(s + 1)(n + 2)u`.

    Each of the :math:`s` squarings (and the Padé step) sums :math:`n` non-negative products a
    row and renormalises it: a relative error of about :math:`(n + 2)u` an entry, so at most that
    much of the law's mass moves a step (an estimate: the Padé step's own error is taken as round-off,
    and the errors of the steps are added, not compounded). The rows are renormalised, so the
    mass defect of the answer says nothing of it.

    >>> dense_exp_estimate(30, 43) > 30 * 43 * 2.0 ** -53
    True
    """
    return (s + 1) * (n + 2) * UNIT_ROUNDOFF


#: Steps between two tests of :func:`uniformize_operator`'s settling (two passes over the vector each).
SETTLE_EVERY = 32

#: Poisson mass left out of every uniformisation sum by default. The terms are non-negative and
#: the vectors summed are probabilities (at most 1), so a probability far below 1 keeps its
#: relative accuracy: P(T <= 0.01) of an Erlang-60 time, 1.36e-184, comes out to 10 digits,
#: where a cut at 1e-13 (the mass a 1-norm needs) gives 0. The cost: the window grows from about
#: +-7.5 to +-37 standard deviations of the Poisson count; measured on a 1e5-state chain,
#: 3.7x the time of a 1e-13 cut for Lambda t <= 100, 2.1x at 1e3, 1.4x at 1e4. Pass eps=1e-13
#: where only the 1-norm matters.
TAIL_EPS = 1e-300


def poisson_window(eps: float, mu: float) -> tuple:
    r"""Terms ``kmin..kmax`` of Poisson(``mu``) outside which each tail holds mass ``<= eps``.

    Exact-enough for any ``eps`` down to the smallest doubles (scipy's
    ``poisson.isf`` returns NaN below about 1e-30), from the log-probabilities
    (:func:`ctmc._poisson.poisson_logpmf`) and the geometric tail bounds
    :math:`P(N > K) \le p_{K+1} / (1 - \mu/(K+2))`
    and :math:`P(N < k) \le p_{k-1} / (1 - (k-1)/\mu)`.

    >>> poisson_window(1e-13, 0.0)
    (0, 0)
    >>> poisson_window(1e-13, 50.0), poisson_window(1e-300, 0.5)     # scipy: isf(1e-13, 50) = 110
    ((8, 110), (0, 146))
    """
    if mu <= 0:
        return 0, 0
    le = math.log(eps)

    def logpmf(k):                 # a few ulps of the log: the tails' terms keep their digits
        return poisson_logpmf(k, mu)

    def right(K):                  # log of the bound on P(N > K), K + 2 > mu
        return logpmf(K + 1) - math.log1p(-mu / (K + 2))

    lo = int(math.floor(mu))
    hi = lo + 1
    while right(hi) > le:
        hi = 2 * hi - lo + 1
    while lo < hi:                 # smallest K with right(K) <= le
        mid = (lo + hi) // 2
        if right(mid) <= le:
            hi = mid
        else:
            lo = mid + 1
    kmax = lo

    def left(k):                   # log of the bound on P(N < k), k - 1 < mu
        return logpmf(k - 1) - math.log1p(-(k - 1) / mu)

    a, b = 0, max(int(math.ceil(mu)) - 1, 0)   # largest k in [0, b] with left(k) <= le (left grows with k)
    if b == 0 or left(1) > le:
        return 0, kmax
    a = 1
    while a < b:
        mid = (a + b + 1) // 2
        if left(mid) <= le:
            a = mid
        else:
            b = mid - 1
    return min(a, kmax), kmax


def poisson_weights(eps: float, mu: float) -> tuple:
    r"""``(kmin, w)``: the Poisson(``mu``) probabilities of ``kmin .. kmin + len(w) - 1``, accurate to a few ``u``.

    The terms of :func:`poisson_window` are computed from the mode outwards by the ratios
    :math:`p_{k+1}/p_k = \mu/(k+1)` and normalised to sum to one, so each carries a relative
    error of about :math:`|k - \mu|\,u` (scipy's ``poisson.pmf`` goes through
    :math:`\exp(k\log\mu - \mu - \log k!)` and loses :math:`\mu \log\mu\, u` relative:
    1e-9 at :math:`\mu = 10^6`). The mass outside is at most ``2 eps``.

    >>> kmin, w = poisson_weights(1e-300, 3.0)
    >>> kmin, round(float(w[3] / w[2]), 15), abs(float(w.sum()) - 1) < 1e-15      # p_3 / p_2 = mu / 3
    (0, 1.0, True)
    """
    if mu <= 0:
        return 0, np.ones(1)
    kmin, kmax = poisson_window(eps, mu)
    m = min(max(int(math.floor(mu)), kmin), kmax)
    up = np.cumprod(mu / np.arange(m + 1, kmax + 1, dtype=float))               # p_k / p_m, k > m
    down = np.cumprod(np.arange(m, kmin, -1, dtype=float) / mu)[::-1]          # p_k / p_m, k < m
    w = np.concatenate([down, [1.0], up])
    return kmin, w / w.sum()          # numpy sums pairwise: error about log2(len(w)) u


def uniformize_operator(apply, V0: np.ndarray, times: np.ndarray, lam: float, *, eps: float = TAIL_EPS,
                        scaled: bool = False, max_terms: int | None = None, integrate: bool = False,
                        roundoff: float = 0.0, step=None, rtol: float = 0.0, smallest=None, entry_bound=None,
                        settle: bool = False, info=None):
    r"""``exp(A t) V0`` by uniformisation, with ``A`` given only through products.

    :math:`e^{At}V_0 = \sum_k \mathrm{Poisson}(k; \Lambda t)\,(I + A/\Lambda)^k V_0`
    for a rate :math:`\Lambda \ge \max_i |a_{ii}|`; the sum is truncated left
    and right where the Poisson weights fall below ``eps`` (:func:`poisson_weights`),
    and with ``rtol`` earlier on the right, as soon as what is left cannot
    change any entry by more than ``rtol`` of itself (below).
    The analyses pass the backend's product on owned parts.

    **The adaptive cut** (``rtol > 0``, not with ``integrate``). The terms are
    non-negative when ``I + A/lam`` is, so the partial sum :math:`S_K` after
    term :math:`K` is a lower bound of every entry, and, every entry of the
    vectors :math:`(I + A/\Lambda)^k V_0` being at most :math:`B` (``entry_bound``:
    :math:`\|V_0\|_1` for a law, :math:`\|V_0\|_\infty` for a vector multiplied
    from the left), :math:`S_K \le e^{At}V_0 \le S_K + T_K B` entrywise,
    :math:`T_K` the Poisson mass after :math:`K`. The sum for a time stops at
    the first :math:`K` with :math:`T_K B \le` ``rtol`` :math:`\cdot \min_j S_{K,j}`
    (the minimum over the entries ``smallest`` reads): every entry then has a
    relative truncation error of at most ``rtol`` (entries still 0 or still
    growing included: the minimum is over all of them); when the minimum stays 0
    or tiny, the cut is the ``eps`` window's end, as without ``rtol``. The number of
    steps follows from what is asked: the law of PRISM's peer2peer (N=4, K=5) at
    t = 1.5, whose least probability is 2.7e-28, needs :math:`T_K \le 2.7 \cdot 10^{-41}`
    for ``rtol = 1e-13``: 247 steps instead of the 1e-300 window's 635.

    **Settling** (``settle``). When ``I + A/lam`` is a stochastic
    matrix multiplying ``V`` from the left (``A`` a generator, absorbing rows allowed: the
    backward equation :math:`e^{Qt} v`), every entry of every later
    :math:`V_j = (I + A/\Lambda)^{j-k} V_k` is a mean of the entries of :math:`V_k`, so lies in
    :math:`[\min V_k, \max V_k]`. Once :math:`\delta_k = \max V_k - \min V_k \le
    \mathrm{rtol} \min V_k` (with :math:`\min V_k > 0`), or once :math:`\delta_k / \min V_k`
    has stopped falling (it is above half its value at step :math:`3k/4`: the floor that
    the rounding of :math:`I + A/\Lambda` leaves, which every later term shares) and is at most
    :math:`k e` (:math:`e` the round-off of a step: the relative error :math:`V_k` may carry
    anyway), the rest of the sum is taken as :math:`T V_k`, :math:`T` the Poisson weight from
    term :math:`k` on (with ``integrate``: the sum of the weights :math:`P(N > j)/\Lambda`,
    :math:`j \ge k`, in time units), with the absolute error :math:`T(\delta_k + (2 k + 1) e \max|V_0|)`
    added to the bound. A chain that mixes long before the Poisson window stops there: on
    PRISM's Na/Cl reaction (1001 states, :math:`\Lambda t = 4 \cdot 10^5`) after about
    :math:`8 \cdot 10^4` steps, the values equal to the whole sum's within :math:`10^{-12}`
    relative. Every entry keeps its relative accuracy (the test is relative to the least one).
    Tested every :data:`SETTLE_EVERY` steps, on one process (the caller's ``V`` holds every state).

    Parameters
    ----------
    apply : callable
        ``apply(V)`` returns ``A @ V`` for a block ``V`` (``A / lam @ V`` when
        ``scaled``). Unused when ``step`` is given.
    V0 : ndarray, shape (n,) or (n, c)
    times : ndarray of float >= 0
    lam : float
        Uniformisation rate (0 for ``A = 0``).
    eps : float
        Poisson tail neglected per time point.
    max_terms : int, optional
        Refuse (ValueError, before any product) a sum needing more steps than this.
    integrate : bool
        Return :math:`\int_0^t e^{As} V_0\,ds = \sum_k \Lambda^{-1} P(N_{\Lambda t} > k)
        (I + A/\Lambda)^k V_0` instead (cumulative rewards); no left truncation.
    roundoff : float
        Relative round-off of one product ``apply`` (for a generator:
        :meth:`ctmc.backends.base.Operator.product_roundoff`), for the bound;
        with ``step``, the relative round-off of one step.
    step : callable, optional
        ``step(V, out)`` writes ``(I + A/lam) V`` into ``out`` (an array like
        ``V``): a product with the stochastic matrix itself (:func:`stochastic_step`),
        no scaling or addition after it and no array made per step.
    rtol : float
        Relative truncation error allowed on every entry (0: the ``eps`` window only).
    smallest : callable, optional
        ``smallest(S)``: the least entry of a partial sum ``S`` (an array like
        ``V0``) whose relative accuracy is promised, on every process (a
        collective); by default ``S.min()``.
    entry_bound : float, optional
        An upper bound of every entry of every ``(I + A/lam)^k V0``, on every process (the
        1-norm of a law, the max-norm of a vector multiplied from the left); default the sum
        of ``|V0|`` (either, on one process).
    settle : bool
        ``I + A/lam`` is stochastic and multiplies ``V`` from the left (see "Settling").
    info : dict, optional
        Receives ``steps`` (products made), ``cut`` (the last term summed, per time) and
        ``settled`` (the step at which the rest of the sum was taken as one term, or -1, per time).

    Returns
    -------
    out : ndarray, shape (len(times),) + V0.shape
    bound : float
        A bound on the error of ``out``, relative to the norm of ``V0`` in which
        ``I + A/lam`` does not expand (the 1-norm for a law times a generator,
        the max-norm for a generator times a vector): the Poisson mass left out
        (with ``integrate``: the weight left out, in time units), the error of
        the weights, and the round-off of the products and of the sum, each
        step adding at most ``3 (roundoff + 4u)`` relative.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[-1.0, 1.0], [0.0, 0.0]])
    >>> out, bound = uniformize_operator(lambda V: A.T @ V, np.array([1.0, 0.0]), np.array([1.0]), 1.0)
    >>> round(float(out[0, 0]), 12), bound < 1e-12   # exp(-1)
    (0.367879441171, True)
    """
    # (not BLAS's axpy: OpenBLAS's threads spin, and on a loaded machine took 2x the whole step)
    info = {} if info is None else info
    out = np.zeros((times.size,) + V0.shape)
    if lam == 0.0:
        out[:] = np.multiply.outer(times, V0) if integrate else V0
        info.update(steps=0, cut=np.zeros(times.size, dtype=int))
        return out, 0.0
    if not (0.0 <= rtol < 1.0):
        raise ValueError(f"rtol: expected 0 <= rtol < 1, got {rtol!r}")
    lt = lam * times
    check_steps(float(lt.max()), max_terms)
    u = UNIT_ROUNDOFF
    # per time: its weights on kmin..kmax (integrate: P(N > k) / lam on 0..kmax), and the bound's terms
    rows, tail = [], np.zeros(times.size)
    for i, mu in enumerate(lt):
        k0, w = poisson_weights(eps, float(mu))
        if integrate:
            # P(N > k) / lam: 1 / lam below the window (off by <= eps, kept implicit: no array of kmax
            # entries per time), the sums of the weights above k in it, 0 at its end
            sf = np.concatenate([np.cumsum(w[::-1])[::-1][1:], [0.0]])
            rows.append((k0, sf / lam, 1.0 / lam))
            K = k0 + w.size - 1          # sum over k >= K of P(N > k) <= eps (K + 2) / (K + 2 - mu)
            tail[i] = eps * (k0 + 2 + (K + 2) / max(K + 2 - mu, 1.0)) / lam
        else:
            rows.append((k0, w, 0.0))                   # mu = 0: the single weight 1 at k = 0
            tail[i] = 0.0 if mu == 0 else 2 * eps
    ends = np.array([k0 + w.size - 1 for k0, w, _ in rows])     # the window's last term, per time
    adaptive = rtol > 0 and not integrate
    if adaptive:
        # the weight after each term of the window (T_K), and where checking the cut can start:
        # the least entry of a sum over c entries is at most its largest / c
        after = [np.concatenate([np.cumsum(w[::-1])[::-1][1:], [0.0]]) for _, w, _ in rows]
        vmax = float(np.abs(V0).sum()) if entry_bound is None else float(entry_bound)
        if smallest is None:
            def smallest(S):
                return float(S.min(initial=np.inf))
        start_at = rtol * vmax / max(V0.size, 1)
        known = np.zeros(times.size)        # a lower bound of the least promised entry of each sum
    cut = ends.copy()
    active = np.ones(times.size, dtype=bool)
    V = np.array(V0, dtype=float, order="C")
    Y = np.empty_like(V) if step is not None else None
    scratch = np.empty_like(V)
    chunk = 1 << 14
    inv_lam = 1.0 / lam
    kmax = int(ends.max())
    step_err = 3 * (roundoff + 4 * u)
    vnorm = float(np.abs(V0).max(initial=0.0)) if entry_bound is None else float(entry_bound)
    settled = np.full(times.size, -1)

    def advance(V, Y):          # V <- (I + A / lam) V; returns (V, Y)
        if step is not None:
            step(V, Y)
            return Y, V
        # the product's own array, scaled and added to in place
        Y = np.asarray(apply(V), dtype=float, order="C")
        if Y is V or not Y.flags.writeable or Y.shape != V.shape:
            Y = np.array(Y, dtype=float, order="C").reshape(V.shape)
        if not scaled:
            Y *= inv_lam
        Y += V
        return Y, None

    history = ([], [])          # (k, max spread / min) at each test

    def try_settle(k, V):
        """At term ``k`` (``V`` = V_k, not yet summed): the rest of each active sum as one term, if settled."""
        lo, hi = V.min(axis=0), V.max(axis=0)
        spread = hi - lo
        if not np.all(lo > 0):
            return False
        rel = float(np.max(spread / lo))
        j = bisect.bisect_left(history[0], (3 * k) // 4)
        stalled = j < len(history[0]) and history[0][j] < k and rel > 0.5 * history[1][j]
        history[0].append(k)
        history[1].append(rel)
        if not (rel <= rtol or (stalled and rel <= k * step_err)):
            return False
        err = float(spread.max()) / max(vnorm, 1e-300) + (2 * k + 1) * step_err
        for i in np.flatnonzero(active):
            k0, w, before = rows[i]             # integrate: the weight before the window, per term
            rest = before * max(k0 - k, 0) + float(w[max(k - k0, 0):].sum())
            out[i] += rest * V
            tail[i] += rest * err
            active[i], cut[i], settled[i] = False, k - 1, k
        return True

    def retire(i, k):
        """Sum ``i`` after its term ``k``: ended at its window's end, or cut once the weight left
        times the largest entry is below ``rtol`` times a lower bound of the sum's least promised
        entry (``known``, looked for again only once the weight left is within reach)."""
        k0 = rows[i][0]
        if k >= ends[i]:
            active[i] = False
        elif adaptive and k >= k0:
            left = after[i][k - k0] * vmax
            if left <= start_at and left > rtol * known[i]:
                known[i] = smallest(out[i])
            if left <= rtol * known[i]:
                active[i], cut[i] = False, k

    steps = 0
    prog = Progress(f"uniformisation, at most {kmax} steps", total=max(kmax, 1))
    # before the first term with a weight (the left truncation), only products: a tight loop
    first = 0 if integrate else int(min(k0 for k0, _, _ in rows))
    done = False
    while steps < first and not done:
        for _ in range(min(SETTLE_EVERY, first - steps)):
            V, Y = advance(V, Y)
            steps += 1
        done = settle and try_settle(steps, V)
        if steps % 4096 < SETTLE_EVERY:
            prog.update(f"step {steps}", done=steps)
    if step is not None and V.ndim == 1 and not done:
        # a block of SETTLE_EVERY terms at a time: the products written into the rows of one
        # buffer, then each sum's weights on them by one matrix-vector product; the cut (the
        # window's end, rtol's) tested at the block's last term, so it may sum up to
        # SETTLE_EVERY - 1 more terms (each exact: the bound counts every term summed)
        buf = np.empty((SETTLE_EVERY, V.size))
        buf[0] = V
        k = first
        while True:
            if settle and k > 0 and try_settle(k, buf[0]):
                break
            m = min(SETTLE_EVERY, kmax + 1 - k)
            for j in range(m - 1):
                step(buf[j], buf[j + 1])
            steps += m - 1
            last = k + m - 1
            for i in np.flatnonzero(active):
                k0, w, before = rows[i]
                idx = np.arange(k, last + 1)
                inside = (idx >= k0) & (idx < k0 + w.size)
                wb = np.where(idx < k0, before, 0.0)
                wb[inside] = w[idx[inside] - k0]
                out[i] += np.einsum("j,jn->n", wb, buf[:m])     # not BLAS: its threads spin against the product's
                retire(i, last)
            if not active.any():
                break
            step(buf[m - 1], buf[0])
            steps += 1
            k = last + 1
            prog.update(f"step {steps}", done=steps)
        done = True
    for c0 in range(first, kmax + 1 if not done else first, chunk):
        ks = np.arange(c0, min(kmax + 1, c0 + chunk))
        W = np.zeros((times.size, ks.size))
        for i, (k0, w, before) in enumerate(rows):
            if before and c0 < k0:
                W[i, :min(k0, ks[-1] + 1) - c0] = before
            a, b = max(c0, k0), min(ks[-1] + 1, k0 + w.size)
            if a < b:
                W[i, a - c0:b - c0] = w[a - k0:b - k0]
        for j, k in enumerate(ks):
            if settle and k % SETTLE_EVERY == 0 and k > 0 and try_settle(k, V):
                break
            for i in np.flatnonzero(W[:, j]):      # out[i] += w_i V, in place through one scratch vector
                if active[i]:
                    np.multiply(V, W[i, j], out=scratch)
                    out[i] += scratch
            for i in np.flatnonzero(active):
                retire(i, k)
            if not active.any():
                break
            V, Y = advance(V, Y)
            steps += 1
            prog.update(f"step {steps}", done=steps)
        if not active.any():
            break
    prog.close()
    # round-off: each product adds 3 (roundoff + 4u) relative and I + A/lam does not expand it; the
    # weights carry (span + 4) u relative; the sum over k adds (K + 1) u. Only the terms summed count.
    total, kw = np.zeros(times.size), np.zeros(times.size)
    for i, (k0, w, before) in enumerate(rows):
        n_used = max(int(cut[i]) - k0 + 1, 0)
        ks = np.arange(k0, k0 + n_used, dtype=float)
        total[i] = w[:n_used].sum() + before * min(k0, cut[i] + 1)
        kw[i] = float(ks @ w[:n_used]) + before * min(k0, cut[i] + 1) * max(min(k0, cut[i] + 1) - 1, 0) / 2
        if adaptive and cut[i] < ends[i] and settled[i] < 0:
            tail[i] += after[i][cut[i] - k0]       # the Poisson mass after the cut
    spans = np.array([r[1].size for r in rows], dtype=float)
    rounding = step_err * kw + (spans + cut + 5) * u * total
    bound = float((tail + rounding).max())
    info.update(steps=steps, cut=cut, settled=settled)
    return out, bound


def stochastic_step(op, lam: float, *, transpose: bool = True, absorbing=None):
    r"""The step of uniformisation on one process: ``(step, roundoff)``, or None on a distributed operator.

    ``step(V, out)`` writes :math:`P^T V` into ``out`` (``transpose``: a law's step) or
    :math:`P V` (a vector's step, the backward equation), :math:`P = I + Q/\Lambda` the
    uniformised (stochastic) matrix, made once here from the rows of :math:`Q^T` or :math:`Q`
    (:meth:`~ctmc.backends.base.Operator.generator_rows`, whose index arrays it shares: only
    the values are new); ``absorbing`` (a mask over the states) makes those states absorbing
    (their rows of :math:`Q` zero: :math:`P_{ii} = 1`). A step is then one product on the compiled threaded kernel
    (:func:`ctmc._relax.spmv`), with no scaling, addition or array made after it, and with
    :math:`\Lambda > \max_i q_i` every entry of :math:`P` is non-negative: no
    cancellation, so each entry of :math:`P^T V` keeps its relative accuracy
    (``V + Q^T V / \Lambda`` cancels on the diagonal). A state whose diagonal is not
    stored (exit rate 0) gets :math:`P_{ii} = 1` by one indexed addition.
    ``roundoff`` is ``(m + 3) u``, ``m`` the most entries in a row of :math:`P^T`: the sum of
    ``m`` non-negative products and the rounding of the entries of :math:`P` (at most 3 ``u``).

    >>> import numpy as np, ctmc
    >>> from ctmc.backends import operator_for
    >>> op = operator_for(ctmc.CTMC([[-2.0, 2.0], [0.0, 0.0]]), "scipy")
    >>> step, _ = stochastic_step(op, 4.0); out = np.empty(2)
    >>> step(np.array([1.0, 0.0]), out); out.tolist()          # (1, 0) (I + Q / 4)
    [0.5, 0.5]
    >>> step, _ = stochastic_step(op, 4.0, transpose=False); step(np.array([0.0, 1.0]), out); out.tolist()
    [0.5, 1.0]
    """
    from ._relax import spmv
    if op.size != 1:
        return None
    G = op.generator_rows(transpose)
    if not (sp.issparse(G) and G.format == "csr" and G.indices.dtype == G.indptr.dtype):
        return None
    n = G.shape[0]
    counts = np.diff(G.indptr)
    data = G.data * (1.0 / lam)
    rows = np.repeat(np.arange(n, dtype=G.indices.dtype), counts)
    if absorbing is not None:           # the rates out of an absorbing state: its row of Q, column of Q^T
        data[np.asarray(absorbing, dtype=bool)[G.indices if transpose else rows]] = 0.0
    pos = np.flatnonzero(G.indices == rows)          # the stored diagonal (canonical: once a row)
    del rows
    data[pos] = np.maximum(data[pos] + 1.0, 0.0)     # 1 - q_i / lam
    has = np.zeros(n, dtype=bool)
    has[np.searchsorted(G.indptr, pos, side="right") - 1] = True
    missing = np.flatnonzero(~has)                   # q_i = 0, no stored diagonal: P_ii = 1
    PT = sp.csr_matrix((data, G.indices, G.indptr), shape=G.shape, copy=False)
    mul = spmv(PT)                                   # compiled and threaded, else scipy

    def step(V, out):
        if V.ndim == 1:
            mul(V, out)
        else:
            out[...] = PT @ V
        if missing.size:
            out[missing] += V[missing]

    return step, (int(counts.max(initial=0)) + 1 + 3) * UNIT_ROUNDOFF


def backward(op, V0: np.ndarray, times: np.ndarray, *, absorbing=None, eps: float = TAIL_EPS,
             max_terms=None, integrate: bool = False, rtol: float = 0.0, info=None):
    r""":math:`e^{Q't} V_0` (or :math:`\int_0^t e^{Q's} V_0\,ds` with ``integrate``) of owned vectors.

    :math:`Q'` is the generator with the rows of ``absorbing`` (a mask over the owned states)
    set to zero. Uniformisation (:func:`uniformize_operator`) at the rate :math:`1.02 \max_i q_i`,
    one compiled product with :math:`P = I + Q'/\Lambda` a step on one process
    (:func:`stochastic_step`), where the sum also stops once the vector has settled;
    ``Q x`` scaled and added elsewhere. The analyses of a vector (:func:`ctmc.measures.prob_within`,
    :func:`ctmc.measures.cumulative_reward`, the CSL operators of :mod:`ctmc.prism`) use it.

    Returns ``(out, bound)`` of :func:`uniformize_operator`, the bound relative to
    :math:`\max|V_0|`; ``info`` receives its ``steps``, ``cut``, ``settled`` and ``rate``.

    >>> import numpy as np, ctmc
    >>> from ctmc.backends import operator_for
    >>> op = operator_for(ctmc.CTMC([[-1.0, 1.0], [0.0, 0.0]]), "scipy")
    >>> out, bound = backward(op, np.array([0.0, 1.0]), np.array([1.0]))    # P_0(X_1 = 1) = 1 - 1/e
    >>> round(float(out[0, 0]), 12), bound < 1e-13
    (0.632120558829, True)
    """
    lam = 1.02 * op.qmax
    check_steps(lam * float(np.max(times, initial=0.0)), max_terms)
    mask = None if absorbing is None else np.asarray(absorbing, dtype=bool)
    made = stochastic_step(op, lam, transpose=False, absorbing=mask) if lam > 0 else None
    step, roundoff = made if made is not None else (None, op.product_roundoff())

    def apply(x):
        y = op.apply(x)
        if mask is not None:
            y[mask] = 0.0
        return y

    run = {} if info is None else info
    out, bound = uniformize_operator(apply, V0, times, lam, eps=eps, max_terms=max_terms, integrate=integrate,
                                     roundoff=roundoff, step=step, rtol=rtol, settle=op.size == 1, info=run,
                                     entry_bound=op.allmax(float(np.abs(V0).max(initial=0.0))))
    run["rate"] = lam
    return out, bound


# --------------------------------------------------------------------------
# methods and options
# --------------------------------------------------------------------------
#: Relative truncation error allowed on every probability of a transient law (the adaptive cut of
#: :func:`uniformize_operator`): below the round-off of the sum itself (a few 1e-13 after hundreds
#: of steps), so the cut never decides the accuracy.
ENTRY_RTOL = 1e-13


@dataclass(frozen=True)
class UniformizationOptions:
    """Options of ``uniformization``: the Poisson mass ``eps`` left out at most per time (default
    :data:`TAIL_EPS`), the relative truncation error ``rtol`` allowed on every probability
    (default :data:`ENTRY_RTOL`; the sum stops as soon as it is met, 0: at the ``eps`` window's
    end), step limit ``max_terms``."""

    eps: float = TAIL_EPS
    max_terms: int = 10_000_000
    rtol: float = ENTRY_RTOL

    def __post_init__(self):
        check_uniformization(self.eps, self.max_terms)
        if isinstance(self.rtol, bool) or not isinstance(self.rtol, (int, float)) or not 0 <= self.rtol < 1:
            raise ValueError(f"rtol: expected 0 <= rtol < 1, got {self.rtol!r}")


@dataclass(frozen=True)
class ExpmOptions:
    """Options of ``expm``: the Krylov tolerance ``tol`` (used by backends that take one)."""

    tol: float = 1e-12

    def __post_init__(self):
        positive("tol", self.tol)


@dataclass(frozen=True)
class TransientAutoOptions(UniformizationOptions):
    """Options of ``auto``: uniformisation's (and ``tol``, accepted for compatibility). Beyond ``max_terms``
    steps ``auto`` takes a dense exponential (:func:`stochastic_exp`) up to :data:`DENSE_EXPM_MAX`
    states on one process, and refuses otherwise (a Krylov exponential would need about as many
    products). Its ``error_bound`` is then an estimate, not a bound: the round-off of the squarings
    (:func:`dense_exp_estimate`) or the mass defect, the larger
    (``info["error_bound_kind"]``)."""

    tol: float = 1e-12

    def __post_init__(self):
        super().__post_init__()
        ExpmOptions(self.tol)


# --------------------------------------------------------------------------
# methods: each takes (op, p owned, times, opts, backend options, info) and returns
# (p(t) owned, one row per time; error bound; the method used; status)
# --------------------------------------------------------------------------
def _uniformization(op, p, tv, opts, bo, info):
    """Uniformisation at the rate :math:`1.02 \\max_i |q_{ii}|` (:func:`uniformize_operator`): one product
    with :math:`P^T` a step on one process (:func:`stochastic_step`), ``Q^T x`` scaled and added
    elsewhere; the sum cut where every probability is within ``rtol`` (the states ``p0`` cannot reach
    left out of that test: found once, when the sum still has zeros)."""
    lam = 1.02 * op.qmax
    check_steps(lam * float(tv.max()), opts.max_terms)      # before the stochastic matrix is made
    made = stochastic_step(op, lam)
    step, roundoff = made if made is not None else (None, op.product_roundoff())
    reach = []

    def smallest(S):
        m = op.allmin(float(S.min(initial=np.inf)))
        if m == 0.0:
            if not reach:
                reach.append(op.reach(p > 0, forward=True))
            m = op.allmin(float(S[reach[0]].min(initial=np.inf)))
        return m

    run = {}
    P, bound = uniformize_operator(lambda x: op.apply(x, transpose=True), p, tv, lam, eps=opts.eps,
                                   max_terms=opts.max_terms, roundoff=roundoff, step=step, rtol=opts.rtol,
                                   smallest=smallest, entry_bound=op.allsum(float(p.sum())), info=run)
    info.update(uniformization_rate=lam, uniformization_steps=run["steps"], entry_rtol=opts.rtol)
    return P, bound, "uniformization", Status.SUCCESS


def _expm(op, p, tv, opts, bo, info):
    """Krylov exponential actions from one requested time to the next (no a priori bound: the mass
    defect is judged alone)."""
    P = np.empty((tv.size, p.size))
    cur, tcur = p.copy(), 0.0
    reasons = []
    status = Status.SUCCESS
    for i in np.argsort(tv, kind="stable"):
        dt = tv[i] - tcur
        if dt > 0:
            cur, rep = op.expm_action(cur, dt, tol=opts.tol, backend_options=bo)
            status = worst(status, rep.status)
            reasons.append(rep.reason)
        P[i] = cur
        tcur = tv[i]
    info["reason"] = reasons[-1] if reasons else "no step"
    return np.maximum(P, 0.0), 0.0, "expm", status


def _dense_expm(op, p, tv, opts, bo, info):
    """A dense exponential by squaring stochastic matrices (:func:`stochastic_exp`), reported as ``expm``."""
    Q = (op.local_rows(False) - sp.diags(op.exit_rates)).toarray()
    P = np.array([p @ stochastic_exp(Q, ti) for ti in tv])
    info["reason"] = "dense exponential by squaring stochastic matrices: too many uniformisation steps"
    return P, dense_exp_estimate(Q.shape[0], max(squarings(Q, ti) for ti in tv)), "expm", Status.SUCCESS


def _auto(op, p, tv, opts, bo, info):
    """Uniformisation up to ``max_terms`` steps, else a dense exponential up to :data:`DENSE_EXPM_MAX`
    states on one process, else refused."""
    steps = 1.02 * op.qmax * tv.max()
    if steps <= opts.max_terms:
        return _uniformization(op, p, tv, opts, bo, info)
    if op.size == 1 and op.n <= DENSE_EXPM_MAX:
        return _dense_expm(op, p, tv, opts, bo, info)
    # a Krylov exponential needs as many products as uniformisation steps: refuse, do not hang
    raise ValueError(f"t: the largest time needs about {steps:.3g} uniformisation steps (max_terms="
                     f"{opts.max_terms}), and a Krylov exponential about as many products; for the "
                     "law in the long run use long_run(), else raise max_terms or ask for smaller times")


#: transient methods by name; ``auto`` is an entry like the others
METHODS = {
    "auto": Method(_auto, TransientAutoOptions, "uniformization, else a dense exponential on small chains"),
    "uniformization": Method(_uniformization, UniformizationOptions, "uniformisation (Poisson-weighted powers)"),
    "expm": Method(_expm, ExpmOptions, "Krylov matrix-exponential actions (the backend's)"),
}


def initial_law(op, p0) -> np.ndarray:
    """Owned part of an initial law given as a vector, a set of states (uniform on it) or one state.

    A numeric vector of length ``n`` (integers included: ``[0, 0, 1]`` is the
    law of state 2) is a law: finite, non-negative, summing to one. A set of
    states is spelled unambiguously: a Python ``set`` or ``range`` of
    indices, a boolean mask, an expression, a callable or a dict of variable
    values; a list of indices is accepted only when it cannot be a law (its
    length is not ``n``). One integer is one state.

    Examples
    --------
    >>> import ctmc
    >>> from ctmc.backends import operator_for
    >>> op = operator_for(ctmc.CTMC([[-1.0, 1.0, 0], [0, -1.0, 1.0], [1.0, 0, -1.0]]), "scipy")
    >>> initial_law(op, [0, 0, 1]).tolist(), initial_law(op, {0, 1}).tolist()
    ([0.0, 0.0, 1.0], [0.5, 0.5, 0.0])
    """
    n = op.n
    law = as_law(p0, n, "p0")
    if law is not None:
        return law[op.start:op.stop].copy()
    if isinstance(p0, Expr) or (callable(p0) and not isinstance(p0, Mapping)):
        # an expression of the variables: weights (a boolean one: uniform on its set)
        w = owned_values(p0, op.states, n, op.start, op.stop, "p0")
        if not np.all(np.isfinite(w)) or (w < 0).any():
            raise ValueError("p0: an expression used as initial weights must be finite and >= 0")
        tot = op.allsum(float(w.sum()))
        if not tot > 0:
            raise ValueError("p0: the expression is 0 on every state")
        return w / tot
    m = owned_mask(p0, op.states, n, op.start, op.stop, "p0")
    cnt = op.allsum(float(m.sum()))
    if cnt == 0:
        raise ValueError("p0: the set of states is empty")
    return m / cnt


def transient(chain, p0, t, method="auto", *, backend="scipy", check=True, backend_options=None, **options):
    """Transient distribution ``p0 exp(Q t)``; see :meth:`ctmc.CTMC.transient`.

    Examples
    --------
    Two states, rates 1 and 1: ``P_0(X_t = 0) = (1 + exp(-2t)) / 2``.

    >>> import numpy as np, ctmc
    >>> c = ctmc.CTMC([[-1.0, 1.0], [1.0, -1.0]])
    >>> r = c.transient(np.array([1.0, 0.0]), [0.0, 1.0])
    >>> [round(float(x), 10) for x in r.p[:, 0]]
    [1.0, 0.5676676416]
    """
    opts = make_options("transient", METHODS, method, options)
    tv = as_points(t, "t")
    bo = check_backend_options(backend, backend_options)
    mode = bo.pop("gather", None)
    op = operator_for(chain, backend)
    mode = mode or op.default_gather
    p = initial_law(op, p0)
    t0 = time.perf_counter()
    info = {"processes": op.size}
    P, bound, used, status = METHODS[method].run(op, p, tv, opts, bo, info)
    resid = float(np.abs(op.allsum(P.sum(axis=1)) - 1).max())
    allowed = max(10 * getattr(opts, "eps", 0.0), 1e-10) + bound
    status, msg = judge(status, f"{used}: mass defect {resid:.1e}", [(not resid <= allowed, Status.INACCURATE, "")])
    if used == "expm":                            # no a priori bound for exponentials: the mass defect,
        bound = max(resid, bound)                 # or the dense route's round-off estimate if larger
        info["error_bound_kind"] = "estimate"
    else:
        info["error_bound_kind"] = "proven"
    if mode == "none":
        info["rows"] = (op.start, op.stop)
    full = np.array([op.gather(row, mode) for row in P])
    res = TransientResult(method=used, backend=op.backend, status=status, message=msg, iterations=0,
                          residual=resid, wall_time=time.perf_counter() - t0, info=info, t=tv, p=full, error_bound=bound)
    return res.check(check)
