r"""Service-time and batch-size laws for :mod:`models.hysteresis`.

Service times
-------------
A *phase-type* law :math:`PH(\alpha, S)` is the time to absorption of a CTMC
on phases :math:`1..m` started with law :math:`\alpha` (:math:`\sum_j
\alpha_j = 1`) with sub-generator :math:`S` (off-diagonal :math:`\ge 0`, row
sums :math:`\le 0`, nonsingular) and exit rates :math:`s_0 = -S\mathbf 1`:

.. math::

    G(t) = 1 - \alpha e^{St}\mathbf 1, \qquad E[T] = \alpha(-S)^{-1}\mathbf 1 .

The law itself (validation, moments, CDF) is :class:`ctmc.ph.PhaseType`;
:class:`PhaseType` here adds the Poisson mixing below, and any
:class:`ctmc.ph.PhaseType` (e.g. :func:`ctmc.ph.fit`) is accepted as service.
Helpers: :func:`exponential`, :func:`erlang` (deterministic service is its
limit :math:`k \to \infty` at fixed mean), :func:`hyperexponential`,
:func:`coxian`, :func:`phase_type`. Phase-type laws work on both routes of
:class:`~models.hysteresis.HysteresisQueue`; :func:`deterministic` and
:func:`general` (a CDF or a ``scipy.stats`` distribution) only on the
embedded-chain route.

Every law provides the *Poisson mixing* coefficients used by the embedded
chain: for a rate :math:`\Lambda > 0` and :math:`p_k(x) = e^{-x}x^k/k!`,

.. math::

    a_k = \int_0^\infty p_k(\Lambda t)\, dG(t), \qquad
    b_k = \int_0^\infty p_k(\Lambda t)\, (1 - G(t))\, dt
        = \frac{1}{\Lambda}\sum_{j > k} a_j .

For :math:`PH(\alpha, S)`, with :math:`U = (\Lambda I - S)^{-1}`:
:math:`a_k = \alpha (\Lambda U)^k U s_0` and :math:`b_k = \alpha (\Lambda
U)^k U \mathbf 1` (exact). For deterministic service :math:`d`:
:math:`a_k = p_k(\Lambda d)`. For a general :math:`G`, integration by parts
gives :math:`a_0 = 1 - \Lambda b_0` and :math:`a_k = \Lambda(b_{k-1} - b_k)`,
and the :math:`b_k` are computed by adaptive vector quadrature
(:func:`scipy.integrate.quad_vec`) of :math:`(1 - G(t)) p_k(\Lambda t)`.

Batch sizes
-----------
A batch size :math:`X \ge 1` has a finite pmf :math:`g_k = P(X = k)`
(:class:`BatchSize`); helpers :func:`fixed_batch` and :func:`geometric_batch`
(the geometric tail beyond ``kmax`` is lumped at ``kmax``: exact for the
queue whenever ``kmax`` exceeds the capacity, since all larger batches are
treated alike).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

import ctmc
from ctmc import ph as _ph
from ctmc.options import positive_number

__all__ = [
    "PhaseType", "Deterministic", "GeneralService", "BatchSize",
    "exponential", "erlang", "hyperexponential", "coxian", "phase_type",
    "deterministic", "general", "fixed_batch", "geometric_batch", "as_service", "as_batch",
]

_TAIL = 1e-15  # mass of the Poisson mixing left out of the sums
_KMAX = 200_000


def _truncation_status(converged: bool) -> ctmc.Status:
    """SUCCESS when the mixing series' tail is below its tolerance, else INACCURATE (truncated)."""
    return ctmc.Status.SUCCESS if converged else ctmc.Status.INACCURATE


@dataclass(frozen=True, eq=False)
class MixingResult:
    """Poisson mixing coefficients ``a_k``, ``b_k`` (``k = 0..len-1``) of a service law.

    ``tail`` is the mass ``1 - sum(a)`` left out by the truncation; ``status``
    is :attr:`ctmc.Status.SUCCESS` (equal to ``"success"``) when it is below
    the requested tolerance, :attr:`ctmc.Status.INACCURATE` when the series
    was cut off before (it was the string ``"truncated"``).
    """

    a: np.ndarray
    b: np.ndarray
    rate: float
    tail: float
    status: ctmc.Status
    info: dict = field(default_factory=dict, repr=False)


@dataclass(frozen=True, eq=False, repr=False)
class PhaseType(_ph.PhaseType):
    r"""Phase-type service law :math:`PH(\alpha, S)`: the law of :class:`ctmc.ph.PhaseType`
    (validation, moments, CDF) plus the Poisson mixing of the embedded-chain route.

    Any :class:`ctmc.ph.PhaseType` (e.g. :func:`ctmc.ph.fit`) given as the
    service of a :class:`~models.hysteresis.HysteresisQueue` is taken as this
    class (:meth:`of`).

    Examples
    --------
    >>> from ctmc.models.hysteresis.service import erlang
    >>> e = erlang(4, mean=2.0)
    >>> e.n_phases, round(e.mean, 12), round(e.scv, 12)
    (4, 2.0, 0.25)
    """

    @classmethod
    def of(cls, law: _ph.PhaseType) -> "PhaseType":
        """The same law (``alpha``, ``S``, ``name``) as this class."""
        return law if isinstance(law, cls) else cls(law.alpha, law.S_dense, name=law.name)

    def mixing(self, rate: float, tol: float = _TAIL) -> MixingResult:
        """Exact Poisson mixing ``a_k``, ``b_k`` (see the module docstring)."""
        lam = positive_number("rate", rate)
        m = self.n_phases
        U = np.linalg.inv(lam * np.eye(m) - self.S)
        LU = lam * U
        ua, ub = U @ self.exit_rates, U @ np.ones(m)
        x = self.alpha.copy()
        a, b, tot = [], [], 0.0
        mean = self.mean
        sb = 0.0
        for _ in range(_KMAX):
            ak, bk = float(x @ ua), float(x @ ub)
            a.append(ak)
            b.append(bk)
            tot += ak
            sb += bk
            if 1 - tot < tol and mean - sb < tol * max(mean, 1.0):
                break
            x = x @ LU
        tail = max(1 - tot, 0.0)
        return MixingResult(a=np.array(a), b=np.array(b), rate=lam, tail=tail,
                            status=_truncation_status(tail < max(tol, 1e-14)))


@dataclass(frozen=True, eq=False)
class Deterministic:
    """Constant service time ``d`` (embedded-chain route only)."""

    d: float
    name: str = "D"

    def __post_init__(self):
        object.__setattr__(self, "d", positive_number("d", self.d))

    @property
    def mean(self) -> float:
        return self.d

    @property
    def scv(self) -> float:
        return 0.0

    def mixing(self, rate: float, tol: float = 1e-300) -> MixingResult:
        """Poisson probabilities ``a_k = p_k(rate d)`` up to where the tail falls below ``tol``.

        The default keeps every term down to 1e-300: ``a_k`` and the powers
        of the uniformised matrix are non-negative, so the embedded chain's
        transition probabilities then have *relative* accuracy, however small.
        """
        from scipy.stats import poisson
        lam = positive_number("rate", rate)
        x = lam * self.d
        # first k with P(Poisson(x) > k) < tol (log scale: isf fails near 1e-300)
        k = np.arange(int(x + 40 * np.sqrt(x) + 1000))
        below = poisson.logsf(k, x) < np.log(tol)
        kmax = int(np.argmax(below)) + 1 if below.any() else k.size
        k = np.arange(kmax + 1)
        a = poisson.pmf(k, x)
        b = poisson.sf(k, x) / lam
        return MixingResult(a=a, b=b, rate=lam, tail=float(poisson.sf(kmax, x)), status=ctmc.Status.SUCCESS)


@dataclass(frozen=True, eq=False)
class GeneralService:
    """A general service law given by its CDF (embedded-chain route only).

    Use :func:`general` to make one from a ``scipy.stats`` frozen distribution
    or from a CDF callable.
    """

    cdf: Callable
    mean: float
    name: str = "G"
    sf: Optional[Callable] = None
    points: tuple = ()

    def survival(self, t):
        if self.sf is not None:
            return self.sf(t)
        return 1.0 - self.cdf(t)

    def mixing(self, rate: float, tol: float = 1e-13) -> MixingResult:
        from scipy.integrate import quad_vec
        from scipy.stats import poisson
        lam = positive_number("rate", rate)
        x = lam * self.mean
        kmax = max(int(x + 12 * np.sqrt(x + 1) + 30), 40)
        kcap = 16 * kmax  # a valid law's series is done long before: stop and report the truncation
        while True:
            k = np.arange(kmax + 1)

            def f(t):
                return float(self.survival(t)) * poisson.pmf(k, lam * t)

            b = np.zeros(kmax + 1)
            edges = [0.0, *sorted(p for p in self.points if p > 0), np.inf]
            nev = 0
            for lo, hi in zip(edges[:-1], edges[1:]):
                val, _err, inf = quad_vec(f, lo, hi, epsabs=tol / (10 * lam), epsrel=1e-12,
                                          full_output=True, limit=20000)
                b += val
                nev += inf.neval
            tail = lam * b[-1]
            if tail < tol or kmax >= kcap:
                break
            kmax *= 2
        a = np.empty_like(b)
        a[0] = 1 - lam * b[0]
        a[1:] = lam * (b[:-1] - b[1:])
        a = np.maximum(a, 0.0)
        return MixingResult(a=a, b=b, rate=lam, tail=float(tail), status=_truncation_status(tail < tol),
                            info={"neval": nev, "mean_check": float(b.sum())})


def exponential(rate: float = 1.0) -> PhaseType:
    """Exponential service with the given rate (one phase); :func:`ctmc.ph.exponential`."""
    return PhaseType.of(_ph.exponential(rate))


def erlang(k: int, mean: float = 1.0) -> PhaseType:
    """Erlang-k service with the given mean; :func:`ctmc.ph.erlang`.

    As ``k`` grows it tends to deterministic service with the same mean
    (squared coefficient of variation 1/k).
    """
    return PhaseType.of(_ph.erlang(k, mean))


def hyperexponential(probs, rates) -> PhaseType:
    """Mixture of exponentials: rate ``rates[i]`` with probability ``probs[i]``; :func:`ctmc.ph.hyperexponential`."""
    return PhaseType.of(_ph.hyperexponential(probs, rates))


def coxian(rates, continue_probs) -> PhaseType:
    """Coxian law: phase ``i`` (rate ``rates[i]``) moves on to ``i+1`` with
    probability ``continue_probs[i]``, else service ends; :func:`ctmc.ph.coxian`.
    """
    try:
        law = _ph.coxian(rates, continue_probs)
    except ValueError as exc:  # the core names the argument probs_continue
        raise ValueError(str(exc).replace("probs_continue", "continue_probs")) from None
    return PhaseType.of(law)


def phase_type(alpha, S) -> PhaseType:
    """General phase-type law from ``(alpha, S)`` (validated); :func:`ctmc.ph.phase_type`."""
    return PhaseType.of(_ph.phase_type(alpha, S))


def deterministic(d: float = 1.0) -> Deterministic:
    """Constant service time ``d`` (embedded-chain route; use :func:`erlang` for the CTMC route)."""
    return Deterministic(d)


def general(dist=None, *, cdf=None, mean=None, points=()) -> GeneralService:
    """General service law for the embedded-chain route.

    Parameters
    ----------
    dist : scipy.stats frozen distribution, optional
        E.g. ``scipy.stats.lognorm(0.5, scale=1.0)``; support must be in [0, inf).
    cdf : callable, optional
        ``G(t)`` for ``t >= 0`` (instead of ``dist``); ``mean`` is then computed
        by quadrature of ``1 - G`` unless given. It is checked: values in
        [0, 1], non-decreasing, tending to 1.
    mean : float, optional
        With ``cdf``: must agree with the quadrature of ``1 - G`` to 1e-6
        (relative), else ValueError.
    points : sequence of float
        Breakpoints (jumps or kinks of ``G``) to help the quadrature.
    """
    if (dist is None) == (cdf is None):
        raise ValueError("dist, cdf: give exactly one of a scipy.stats distribution or a CDF")
    if dist is not None:
        if not (hasattr(dist, "cdf") and hasattr(dist, "mean")):
            raise ValueError("dist: expected a frozen scipy.stats distribution")
        lo = float(dist.support()[0]) if hasattr(dist, "support") else 0.0
        if lo < 0:
            raise ValueError(f"dist: service times must be >= 0, the support starts at {lo}")
        m = positive_number("mean", dist.mean())
        sup = [float(x) for x in dist.support() if np.isfinite(x) and x > 0]
        pts = tuple(points) or tuple(float(q) for q in dist.ppf([0.5, 0.9, 0.99]) if np.isfinite(q))
        pts = tuple(sorted(set(pts) | set(sup)))
        return GeneralService(cdf=dist.cdf, mean=m, name=getattr(dist.dist, "name", "G"),
                              sf=dist.sf, points=pts)
    if not callable(cdf):
        raise ValueError("cdf: expected a callable G(t)")
    pts = tuple(sorted(float(p) for p in points if np.isfinite(p) and p > 0))
    _check_cdf(cdf, mean, pts)
    m = positive_number("mean", _cdf_mean(cdf, pts) if mean is None else mean)
    if mean is not None:
        mq = _cdf_mean(cdf, pts)
        if not abs(mq - m) <= _MEAN_RTOL * m:
            raise ValueError(f"mean: the given mean {m!r} contradicts the CDF, whose mean "
                             f"(quadrature of 1 - G) is {mq!r}")
    return GeneralService(cdf=cdf, mean=m, name="G", points=pts)


_MEAN_RTOL = 1e-6


def _cdf_mean(cdf, points):
    """``int_0^inf (1 - G(t)) dt`` by quadrature, split at the breakpoints."""
    from scipy.integrate import quad
    edges = [0.0, *points, np.inf]
    return float(sum(quad(lambda t: 1.0 - cdf(t), lo, hi, limit=500)[0]
                     for lo, hi in zip(edges[:-1], edges[1:])))


def _check_cdf(cdf, mean, points):
    """A CDF must lie in [0, 1], not decrease, and tend to 1.

    By Markov's inequality a law of mean ``m`` has ``1 - G(t) <= m / t``, so
    ``G`` must exceed ``1 - 1e-9`` at ``t = 1e9 m`` (``t = 1e12`` when the
    mean is not given).
    """
    try:
        m = None if mean is None else float(mean)
    except (TypeError, ValueError):
        raise ValueError(f"mean: expected a positive number, got {mean!r}") from None
    far = 1e12 if m is None or not np.isfinite(m) or m <= 0 else 1e9 * max(m, *points, 1e-300)
    grid = np.concatenate([[0.0], np.geomspace(1e-6, far, 200), points])
    grid.sort()
    try:
        vals = np.array([float(cdf(t)) for t in grid])
    except Exception as exc:  # the user's callable failed
        raise ValueError(f"cdf: could not evaluate G(t): {exc}") from None
    if not (np.isfinite(vals).all() and (vals >= 0).all() and (vals <= 1).all()):
        raise ValueError("cdf: G(t) must lie in [0, 1]")
    if (np.diff(vals) < -1e-12).any():
        raise ValueError("cdf: G(t) must be non-decreasing")
    if vals[-1] < 1 - 1e-9:
        raise ValueError(f"cdf: G(t) must tend to 1 (a defective law would leave some services "
                         f"unfinished): G({far:.3g}) = {vals[-1]!r}")


def as_service(service, mu: float):
    """Normalise the ``service`` argument (None: exponential with rate ``mu``)."""
    if service is None:
        return exponential(positive_number("mu", mu))
    if isinstance(service, _ph.PhaseType):
        return PhaseType.of(service)
    if isinstance(service, (Deterministic, GeneralService)):
        return service
    if hasattr(service, "cdf") and hasattr(service, "dist"):
        return general(service)
    raise ValueError("service: expected None, a PhaseType (exponential, erlang, hyperexponential, "
                     "coxian, phase_type), deterministic(d), general(...) or a scipy.stats "
                     f"frozen distribution, got {type(service).__name__}")


@dataclass(frozen=True, eq=False)
class BatchSize:
    """Batch-size law ``P(X = k) = pmf[k - 1]``, ``k = 1..len(pmf)``.

    Examples
    --------
    >>> from ctmc.models.hysteresis.service import BatchSize
    >>> b = BatchSize([0.5, 0.3, 0.2])
    >>> round(b.mean, 12)
    1.7
    """

    pmf: np.ndarray
    name: str = "X"

    def __post_init__(self):
        p = np.atleast_1d(np.asarray(self.pmf, dtype=float))
        if p.ndim != 1 or p.size == 0:
            raise ValueError("batch: expected a non-empty pmf over sizes 1, 2, ...")
        if not np.all(np.isfinite(p)) or (p < 0).any():
            raise ValueError("batch: pmf entries must be finite and >= 0")
        if abs(p.sum() - 1) > 1e-10:
            raise ValueError(f"batch: pmf must sum to 1, sums to {p.sum()!r}")
        nz = np.flatnonzero(p)
        p = p[: nz[-1] + 1] / p.sum()
        object.__setattr__(self, "pmf", p)

    @property
    def sizes(self) -> np.ndarray:
        return np.arange(1, self.pmf.size + 1)

    @property
    def mean(self) -> float:
        return float(self.sizes @ self.pmf)

    def tail(self, j) -> np.ndarray:
        """``P(X > j)`` for integer ``j >= 0`` (array-valued)."""
        j = np.asarray(j)
        c = np.concatenate([[1.0], 1.0 - np.cumsum(self.pmf)])
        return np.where(j >= self.pmf.size, 0.0, c[np.clip(j, 0, self.pmf.size)])

    def lumped(self, kmax: int) -> np.ndarray:
        """pmf over ``1..kmax`` with the mass of sizes > kmax put at ``kmax``."""
        p = np.zeros(kmax)
        n = min(kmax, self.pmf.size)
        p[:n] = self.pmf[:n]
        p[kmax - 1] += self.pmf[kmax:].sum()
        return p


def fixed_batch(k: int) -> BatchSize:
    """Every batch has exactly ``k`` customers."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k: batch size must be an integer >= 1, got {k!r}")
    p = np.zeros(k)
    p[-1] = 1.0
    return BatchSize(p, name=f"fixed({k})")


def geometric_batch(p: float, kmax: Optional[int] = None) -> BatchSize:
    """Geometric batch size ``P(X = k) = (1 - p)^(k-1) p``, ``k >= 1`` (mean ``1/p``).

    The tail ``P(X >= kmax)`` is lumped at ``kmax`` (default: where the tail
    falls below 1e-17). The queue sees the exact geometric law whenever
    ``kmax`` exceeds its capacity.
    """
    try:
        q = float(p)
    except (TypeError, ValueError):
        raise ValueError(f"p: expected a number in (0, 1], got {p!r}") from None
    if not (0 < q <= 1):
        raise ValueError(f"p: success probability must lie in (0, 1], got {p!r}")
    if kmax is None:
        kmax = 1 if q == 1 else int(np.ceil(np.log(1e-17) / np.log1p(-q))) + 1
    if isinstance(kmax, bool) or not isinstance(kmax, (int, np.integer)) or kmax < 1:
        raise ValueError(f"kmax: expected an integer >= 1, got {kmax!r}")
    k = np.arange(1, kmax + 1)
    pmf = (1 - q) ** (k - 1) * q
    pmf[-1] = (1 - q) ** (kmax - 1)
    return BatchSize(pmf, name=f"geom({q:g})")


def as_batch(batch) -> BatchSize:
    """Normalise the ``batch`` argument (None: single arrivals; dict ``{size: prob}``; pmf array)."""
    if batch is None:
        return BatchSize(np.ones(1), name="1")
    if isinstance(batch, BatchSize):
        return batch
    if isinstance(batch, dict):
        if not batch:
            raise ValueError("batch: the dict {size: probability} is empty")
        sizes = list(batch)
        if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1 for s in sizes):
            raise ValueError(f"batch: sizes must be integers >= 1, got {sizes}")
        pmf = np.zeros(max(sizes))
        for s, v in batch.items():
            pmf[s - 1] = v
        return BatchSize(pmf)
    try:
        return BatchSize(np.asarray(batch, dtype=float))
    except (TypeError, ValueError) as e:
        if str(e).startswith("batch"):
            raise
        raise ValueError(f"batch: expected None, a BatchSize, a dict or a pmf array, got {batch!r}") from None
