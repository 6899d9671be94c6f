r"""Poisson probabilities with relative accuracy down to the smallest doubles (Loader 2000).

For :math:`N \sim \mathrm{Poisson}(\mu)` and an integer :math:`n \ge 1`, Loader's saddle-point form

.. math::

    \log P(N = n) = -\delta(n) - \mathrm{bd}_0(n, \mu) - \tfrac12 \log(2\pi n),
    \qquad \log P(N = 0) = -\mu,

with :math:`\delta(n) = \ln n! - (n + \frac12)\ln n + n - \ln\sqrt{2\pi}` (Stirling's error, a
short series above 15, ``lgamma`` below) and :math:`\mathrm{bd}_0(n, \mu) = n\ln(n/\mu) + \mu - n`
(a series for :math:`\mu/2 < n < 2\mu`, where the direct form cancels), takes no logarithm of a
large factorial: the result's logarithm is right to a few ulps, so a probability of
:math:`10^{-300}` keeps about 13 digits. The direct :math:`n\ln\mu - \mu - \ln\Gamma(n + 1)`
subtracts terms of size :math:`\mu\ln\mu` (:math:`1.6\cdot 10^8` at :math:`\mu = 10^7`: about 8
digits left). One implementation for the uniformisation window of :mod:`ctmc.transient` (one term
at a time, on Python floats) and the phase-type tails of :mod:`ctmc._phnum` (on arrays).

References
----------
C. Loader, "Fast and accurate computation of binomial probabilities", 2000 (the form used by
R's ``dpois``).
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["poisson_logpmf"]

_LOG_2PI = math.log(2 * math.pi)
_LN2 = math.log(2.0)
_SCALARS = (int, float)
#: :math:`\mathrm{bd}_0` by its series where :math:`|v| = |x - \mu|/(x + \mu)` is below this
#: (:math:`\mu/2 < x < 2\mu`): the direct form loses :math:`x/\mathrm{bd}_0` ulps of its logarithm
#: there (10 at a Poisson(1e4) probability of 1e-300), the series none (20 terms at the edge).
_NEAR = 1 / 3


def _stirlerr_series(n):
    """Stirling's error above 15 by its series (``n`` a float or an array)."""
    nn = n * n
    return (1 / 12 - (1 / 360 - (1 / 1260 - (1 / 1680 - 1 / 1188 / nn) / nn) / nn) / nn) / n


def _stirlerr_small(v: float) -> float:
    """Stirling's error of an integer ``1 <= v <= 15`` from ``lgamma``."""
    return math.lgamma(v + 1) - (v + 0.5) * math.log(v) + v - 0.5 * _LOG_2PI


def _bd0_series(x, mu, terms: int = 30):
    r""":math:`\mathrm{bd}_0` near :math:`x = \mu` (:math:`|v| <` :data:`_NEAR`) by its series in
    :math:`v = (x - \mu)/(x + \mu)`: 30 terms are past convergence (:math:`3^{-60} < 10^{-28}`),
    fewer where the caller knows :math:`v` (:func:`_series_terms`)."""
    v = (x - mu) / (x + mu)
    s = (x - mu) * v
    ej = 2 * x * v
    v2 = v * v
    for j in range(1, terms):
        ej = ej * v2
        s = s + ej / (2 * j + 1)
    return s


def _series_terms(v: float) -> int:
    """Terms of :func:`_bd0_series` after which the next is below ``2**-60`` of the first:
    :math:`|v|^{2j} < 2^{-60}`."""
    av = abs(v)
    return 1 if av == 0.0 else min(30, 2 + int(-30 * _LN2 / math.log(av)))


def _logpmf_scalar(n: float, mu: float) -> float:
    """:func:`poisson_logpmf` of one ``n`` and ``mu`` (Python floats: no array per call)."""
    if n == 0:
        return -mu
    d = _stirlerr_small(n) if n <= 15 else _stirlerr_series(n)
    if abs(n - mu) < _NEAR * (n + mu):
        b = _bd0_series(n, mu, _series_terms((n - mu) / (n + mu)))
    else:
        b = n * math.log(n / mu) + mu - n
    return -d - b - 0.5 * (_LOG_2PI + math.log(n))


def _logpmf_array(n, mu):
    """:func:`poisson_logpmf` of flat arrays ``n``, ``mu`` of one length."""
    out = -mu.copy()
    pos = n > 0
    if not pos.any():
        return out
    n, mu = n[pos], mu[pos]
    d = np.empty_like(n)
    small = n <= 15
    d[small] = [_stirlerr_small(v) for v in n[small]]
    d[~small] = _stirlerr_series(n[~small])
    b = n * np.log(n / mu) + mu - n
    near = np.abs(n - mu) < _NEAR * (n + mu)
    b[near] = _bd0_series(n[near], mu[near])
    out[pos] = -d - b - 0.5 * (_LOG_2PI + np.log(n))
    return out


def poisson_logpmf(n, mu):
    """``log P(N = n)`` for ``N ~ Poisson(mu)``, integers ``n >= 0`` and ``mu > 0`` (broadcast).

    Accurate to a few ulps of the result's logarithm (no ``lgamma`` of a large number). Scalars give
    a float (without arrays: the window search of :mod:`ctmc.transient` asks one term at a time),
    arrays an array of their broadcast shape.

    >>> import math
    >>> round(math.exp(poisson_logpmf(3, 2.0)) / (2.0 ** 3 * math.exp(-2.0) / 6), 14)
    1.0
    """
    if (type(n) in _SCALARS and type(mu) in _SCALARS) or (np.ndim(n) == 0 and np.ndim(mu) == 0):
        return _logpmf_scalar(float(n), float(mu))
    n_, mu_ = np.broadcast_arrays(np.asarray(n, dtype=float), np.asarray(mu, dtype=float))
    return _logpmf_array(n_.reshape(-1), mu_.reshape(-1)).reshape(n_.shape)
