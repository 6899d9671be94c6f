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

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

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

__all__ = ["METHODS", "UniformizationOptions", "ExpmOptions", "TransientAutoOptions",
           "uniformize_operator", "poisson_window", "poisson_weights", "stochastic_exp", "TAIL_EPS", "check_uniformization", "initial_law", "transient"]


def check_uniformization(eps, max_terms) -> None:
    """Validate the uniformisation parameters (ValueError naming the bad one)."""
    if not (isinstance(eps, float) and 0 < eps < 1):
        raise ValueError(f"eps: expected 0 < eps < 1, got {eps!r}")
    if isinstance(max_terms, bool) or not isinstance(max_terms, (int, np.integer)) or max_terms < 1:
        raise ValueError(f"max_terms: expected a positive integer, got {max_terms!r}")


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
    norm = float(np.abs(Q).sum(axis=1).max()) * t
    s = max(0, int(math.ceil(math.log2(norm / 0.5)))) if norm > 0.5 else 0
    E = np.maximum(sla.expm(Q * (t / 2.0 ** s)), 0.0)
    E /= E.sum(axis=1, keepdims=True)
    for _ in range(s):
        E = E @ E
        E /= E.sum(axis=1, keepdims=True)
    return E

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
    and the geometric tail bounds :math:`P(N > K) \le p_{K+1} / (1 - \mu/(K+2))`
    and :math:`P(N < k) \le p_{k-1} / (1 - (k-1)/\mu)`.

    >>> poisson_window(1e-13, 0.0)
    (0, 0)
    >>> poisson_window(1e-13, 50.0), poisson_window(1e-300, 0.5)     # scipy: isf(1e-13, 50) = 110
    ((8, 110), (0, 146))
    """
    if mu <= 0:
        return 0, 0
    from scipy.special import gammaln
    lm, le = math.log(mu), math.log(eps)

    def logpmf(k):
        return k * lm - mu - gammaln(k + 1.0)

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
                        roundoff: float = 0.0):
    r"""``exp(A t) V0`` by uniformisation, with ``A`` given only through products.

    :math:`e^{At}V_0 = \sum_k \mathrm{Poisson}(k; \Lambda t)\,(I + A/\Lambda)^k V_0`
    for a rate :math:`\Lambda \ge \max_i |a_{ii}|`; the sum is truncated left
    and right where the Poisson weights fall below ``eps`` (:func:`poisson_weights`).
    The analyses pass the backend's product on owned parts.

    Parameters
    ----------
    apply : callable
        ``apply(V)`` returns ``A @ V`` for a block ``V`` (``A / lam @ V`` when
        ``scaled``).
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
        :meth:`ctmc.backends.base.Operator.product_roundoff`), for the bound.

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
    out = np.zeros((times.size,) + V0.shape)
    if lam == 0.0:
        out[:] = np.multiply.outer(times, V0) if integrate else V0
        return out, 0.0
    lt = lam * times
    if max_terms is not None and lt.max() > max_terms:
        raise ValueError(f"t: the largest time needs about {lt.max():.3g} uniformisation steps, above "
                         f"max_terms={max_terms}; raise max_terms or ask for smaller times")
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
    kmax = max(r[0] + r[1].size for r in rows) - 1
    V = np.array(V0, dtype=float, order="C")
    total = np.zeros(times.size)
    kw = np.zeros(times.size)
    chunk = 1 << 14
    inv_lam = 1.0 / lam
    scratch = np.empty_like(V)
    prog = Progress(f"uniformisation, {kmax} steps", total=max(kmax, 1))
    for c0 in range(0, kmax + 1, chunk):
        ks = np.arange(c0, min(kmax + 1, c0 + chunk))
        W = np.zeros((times.size, ks.size))
        for i, (k0, w, before) in enumerate(rows):
            if before and c0 < k0:
                W[i, :min(k0, ks[-1] + 1) - c0] = before
            a, b = max(c0, k0), min(ks[-1] + 1, k0 + w.size)
            if a < b:
                W[i, a - c0:b - c0] = w[a - k0:b - k0]
        total += W.sum(axis=1)
        kw += W @ ks.astype(float)
        for j, k in enumerate(ks):
            w = W[:, j]
            for i in np.flatnonzero(w):      # out[i] += w_i V, in place through one scratch vector
                np.multiply(V, w[i], out=scratch)
                out[i] += scratch
            if k < kmax:
                # V <- (I + A / lam) V: the product's own array, scaled and added to in place
                Y = np.asarray(apply(V), dtype=float, order="C")
                if Y is V or not Y.flags.writeable or Y.shape != V.shape:
                    Y = np.array(Y, dtype=float, order="C").reshape(V.shape)
                if not scaled:
                    Y *= inv_lam
                Y += V
                V = Y
                prog.update(f"step {k + 1}", done=k + 1)
    prog.close()
    # round-off: each product adds 3 (roundoff + 4u) relative and I + A/lam does not expand it; the
    # weights carry (span + 4) u relative; the sum over k adds (kmax + 1) u
    step = 3 * (roundoff + 4 * u)
    spans = np.array([r[1].size for r in rows], dtype=float)
    rounding = step * kw + (spans + kmax + 5) * u * total
    bound = float((tail + rounding).max())
    return out, bound


# --------------------------------------------------------------------------
# methods and options
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class UniformizationOptions:
    """Options of ``uniformization``: neglected Poisson mass ``eps`` per time (default
    :data:`TAIL_EPS`: relative accuracy for small probabilities), step limit ``max_terms``."""

    eps: float = TAIL_EPS
    max_terms: int = 10_000_000

    def __post_init__(self):
        check_uniformization(self.eps, self.max_terms)


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
    products). Its ``error_bound`` is then the mass defect, an estimate, not a bound
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
    """Uniformisation at the rate :math:`1.02 \\max_i |q_{ii}|` (:func:`uniformize_operator`)."""
    P, bound = uniformize_operator(lambda x: op.apply(x, transpose=True), p, tv, 1.02 * op.qmax, eps=opts.eps,
                                   max_terms=opts.max_terms, roundoff=op.product_roundoff())
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
    return P, 0.0, "expm", Status.SUCCESS


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
    if used == "expm":
        bound = resid
        info["error_bound_kind"] = "estimate"     # the mass defect: no a priori bound for exponentials
    else:
        info["error_bound_kind"] = "proven"
    if mode == "none":
        info["rows"] = (op.start, op.stop)
    full = np.array([op.gather(row, mode) for row in P])
    res = TransientResult(method=used, backend=op.backend, status=status, message=msg, iterations=0,
                          residual=resid, wall_time=time.perf_counter() - t0, info=info, t=tv, p=full, error_bound=bound)
    return res.check(check)
