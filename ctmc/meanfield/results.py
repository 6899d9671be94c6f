"""The results of :mod:`ctmc.meanfield` and its error: frozen dataclasses built by keyword."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

__all__ = ["MeanFieldResult", "RefinedResult", "RefinedTransientResult", "ExactResult", "MeanFieldError"]


class MeanFieldError(RuntimeError):
    """The fixed point search did not converge (or the fixed point is not stable where needed)."""


@dataclass(frozen=True, kw_only=True)
class MeanFieldResult:
    """Fixed point of the mean-field ODE and its stability.

    Attributes
    ----------
    species : tuple of str
    fixed_point : ndarray (S,)
        :math:`x^*`, densities in species order (sum 1).
    jacobian : ndarray (S, S)
        :math:`Df(x^*)` in full coordinates, differentiating the rates as written
        (singular: :math:`\\mathbf 1^T Df = 0`; off the simplex the rates are not
        unique, so only its action on the tangent space is intrinsic).
    jacobian_reduced : ndarray (S-1, S-1)
        The Jacobian on the simplex's tangent space (last species eliminated).
    eigenvalues : ndarray (S-1,)
        Its eigenvalues.
    stable : bool
        All of them have a negative real part.
    residual : float
        :math:`\\max_s |f_s(x^*)|`, recomputed.
    iterations : int
        Newton steps after the ODE phase.
    wall_time : float
    """

    species: tuple
    fixed_point: np.ndarray = field(repr=False)
    jacobian: np.ndarray = field(repr=False)
    jacobian_reduced: np.ndarray = field(repr=False)
    eigenvalues: np.ndarray = field(repr=False)
    stable: bool = True
    residual: float = 0.0
    iterations: int = 0
    wall_time: float = 0.0
    _system: Any = field(default=None, repr=False, compare=False)

    def ode(self, t, x0=None):
        """Integrate :math:`\\dot x = f(x)` from ``x0`` (default: the fixed point).

        Parameters
        ----------
        t : float or array_like
            Time(s) >= 0, increasing.
        x0 : array_like (S,), optional
            Initial densities (non-negative, summing to 1).

        Returns
        -------
        ndarray
            ``(S,)`` for one time, ``(len(t), S)`` for several (the shape rule).
        """
        x0 = self.fixed_point if x0 is None else x0
        return self._system.ode(t, x0)


@dataclass(frozen=True, kw_only=True)
class RefinedResult:
    """Refined mean field at the fixed point for one population size ``N``.

    Attributes
    ----------
    N : int
    order : int
        1 or 2.
    densities : ndarray (S,)
        :math:`x^* + V/N` (order 1) or :math:`x^* + V/N + A/N^2` (order 2).
    fixed_point, V : ndarray (S,)
    A : ndarray (S,) or None
        The :math:`1/N^2` coefficient (order 2 only).
    W : ndarray (S, S)
        :math:`\\operatorname{Cov}(X_N/N) \\approx W/N`.
    residual : float
        The largest relative residual of the linear equations solved (W, V and for
        order 2 C, B, A; reduced coordinates), recomputed.
    """

    N: int
    order: int
    densities: np.ndarray = field(repr=False)
    fixed_point: np.ndarray = field(repr=False)
    V: np.ndarray = field(repr=False)
    A: Optional[np.ndarray] = field(repr=False)
    W: np.ndarray = field(repr=False)
    residual: float = 0.0


@dataclass(frozen=True, kw_only=True)
class RefinedTransientResult:
    """Refined mean field along the ODE; arrays carry a leading time axis unless ``t`` was one number.

    Attributes
    ----------
    t : float or ndarray
    N, order : int
    densities : ndarray
        :math:`x(t) + V(t)/N (+ A(t)/N^2)`, shape ``(S,)`` or ``(len(t), S)``.
    x, V, A, W : ndarray
        Mean field, coefficients (``A`` None for order 1), ``W`` of shape ``(..., S, S)``.
    """

    t: Any
    N: int
    order: int
    densities: np.ndarray = field(repr=False)
    x: np.ndarray = field(repr=False)
    V: np.ndarray = field(repr=False)
    A: Optional[np.ndarray] = field(repr=False)
    W: np.ndarray = field(repr=False)


@dataclass(frozen=True, kw_only=True)
class ExactResult:
    """Expected densities under the exact stationary law of the finite-``N`` chain.

    Attributes
    ----------
    N : int
    densities : ndarray (S,)
        :math:`E[X_{N,s}/N]` in species order.
    stationary : ctmc.StationaryResult
        The solver's answer with its evidence (status, residual, error_bound).
    n_states : int
    """

    N: int
    densities: np.ndarray = field(repr=False)
    stationary: Any = field(repr=False)
    n_states: int = 0
