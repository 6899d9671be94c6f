r"""Mean field, refined mean field (1/N and 1/N^2) and exact finite N for population models.

Problem
-------
A *density-dependent population process* (Kurtz 1970) has :math:`S` species and
:math:`N` individuals; its state is the vector of counts :math:`X_N \in
\{0..N\}^S`, :math:`\sum_s X_{N,s} = N` (the population is closed). Transition
:math:`\ell` changes the counts by an integer vector :math:`\ell` (summing to 0)
at total rate :math:`N\, \beta_\ell(X_N / N)`. With the densities :math:`x`,

.. math::

    f(x) = \sum_\ell \ell\, \beta_\ell(x), \qquad
    Q(x) = \sum_\ell \ell \ell^T \beta_\ell(x), \qquad
    R(x) = \sum_\ell \ell \otimes \ell \otimes \ell\, \beta_\ell(x)

are the drift, the jump covariance and the third jump moment. The mean field is
the ODE :math:`\dot x = f(x)` and, at stationarity, its fixed point
:math:`x^*` (:meth:`PopulationModel.mean_field`).

Refined mean field
------------------
Write :math:`Y = X_N/N - x(t)` and expand its moments in :math:`1/N`:
:math:`E[Y] = V/N + A/N^2`, :math:`E[Y Y^T] = W/N + B/N^2`,
:math:`E[Y^{\otimes 3}] = C/N^2`, :math:`E[Y^{\otimes 4}] = D/N^2 + O(N^{-3})`
with the Gaussian :math:`D_{abcd} = W_{ab}W_{cd} + W_{ac}W_{bd} + W_{ad}W_{bc}`.
Applying the generator to :math:`Y`, :math:`Y^{\otimes 2}` and
:math:`Y^{\otimes 3}`, Taylor-expanding :math:`f` and :math:`Q` around
:math:`x` and matching powers of :math:`1/N` gives, with :math:`F = Df`,
:math:`F_k = D^k f` (Gast & Van Houdt 2017; Gast, Bortolussi & Tribastone
2019, Theorems 1 and 2):

.. math::

    \dot V &= F V + \tfrac12 F_2 : W, \\
    \dot W &= F W + W F^T + Q, \\
    \dot C_{ijk} &= \operatorname{sym}_3\big[(F C)_{ijk} + \tfrac12 (F_2)_{iab} D_{abjk}
                    + Q_{ij} V_k + (DQ)_{ija} W_{ak}\big] + R_{ijk}, \\
    \dot B &= F B + B F^T + S + S^T + DQ\cdot V + \tfrac12 D^2Q : W,
        \quad S_{ij} = \tfrac12 (F_2)_{iab} C_{abj} + \tfrac16 (F_3)_{iabc} D_{abcj}, \\
    \dot A &= F A + \tfrac12 F_2 : B + \tfrac16 F_3 : C + \tfrac1{24} F_4 : D,

all from zero at :math:`t = 0` (a deterministic start), where
:math:`\operatorname{sym}_3` sums the three placements of the free index
:math:`i` (the ``f`` factor) among :math:`i, j, k`. At stationarity the left
sides are 0 and, :math:`F` being Hurwitz, each line is a linear solve:
a Lyapunov equation for :math:`W` (and :math:`B`), a solve with :math:`F`
for :math:`V` (and :math:`A`), and a solve with the Kronecker sum
:math:`F \oplus F \oplus F` for :math:`C` (done in the eigenbasis of
:math:`F`, with its residual checked). The densities are then
:math:`x^* + V/N` (order 1) and :math:`x^* + V/N + A/N^2` (order 2), and
:math:`\operatorname{Cov}(X_N/N) \approx W/N`.

The conservation law
--------------------
Since :math:`\sum_s x_s = 1`, every :math:`\ell` sums to 0: :math:`\mathbf 1^T
f = 0`, :math:`\mathbf 1^T Q = 0`, and the full Jacobian :math:`Df(x^*)` has
the left null vector :math:`\mathbf 1` — it is singular and the Lyapunov and
linear solves above have no unique solution in full coordinates. All of them
are therefore done in the **reduced coordinates** :math:`y = (x_1, \dots,
x_{S-1})`, :math:`x_S = 1 - \sum_{s<S} y_s` (the simplex's tangent space):
the reduced drift is :math:`g(y) = f_{1..S-1}(y, 1 - \mathbf 1^T y)`,
differentiated symbolically (:mod:`sympy`, once per model, then
:func:`sympy.lambdify` to numpy; never by finite differences), and the reduced
jumps are :math:`\ell_{1..S-1}`. The map :math:`y \mapsto x` is affine,
:math:`x = e_S + L y` with :math:`L = [I; -\mathbf 1^T]`, so moments map
exactly: :math:`V = L V_y`, :math:`W = L W_y L^T`, :math:`A = L A_y`.
``stable`` tests the eigenvalues of :math:`Dg(y^*)`, the Jacobian restricted
to the tangent space.

Layout
------
:mod:`.results`
    The result types (:class:`MeanFieldResult`, :class:`RefinedResult`,
    :class:`RefinedTransientResult`, :class:`ExactResult`) and
    :class:`MeanFieldError`.
:mod:`.kernels`
    The numerical kernels: the declaration compiled from sympy to numpy
    (drift, Jacobian, the derivative tensors of :math:`f` and :math:`Q`,
    :math:`R`), the fixed-point search (ODE, Newton, componentwise polish),
    the moment equations above (right-hand sides, steady-state solves,
    transient integration).
:mod:`.model`
    :class:`PopulationModel`: the declaration, its mean field, refined mean
    field and exact finite-:math:`N` chain, and their comparison.
:mod:`.comparison`
    The comparison table as text (:func:`format_comparison`), as records
    (:func:`comparison_records`) and as a log-log plot of the errors.

References
----------
T. G. Kurtz, "Solutions of ordinary differential equations as limits of pure
jump Markov processes", J. Appl. Prob. 7(1), 1970.
N. Gast, B. Van Houdt, "A refined mean field approximation", Proc. ACM
Meas. Anal. Comput. Syst. (POMACS) 1(2), 2017 (SIGMETRICS 2018).
N. Gast, L. Bortolussi, M. Tribastone, "Size expansions of mean field
approximation: transient and steady-state analysis", Performance Evaluation
129, 2019 (Performance 2018).

Examples
--------
An SIS epidemic: infection at rate :math:`N\beta x_S x_I`, recovery at
:math:`N x_I`; the fixed point is :math:`x_I^* = 1 - 1/\beta`.

>>> from ctmc.meanfield import PopulationModel
>>> m = PopulationModel("sis", ["S", "I"])
>>> m.transition("infection", {"S": -1, "I": +1}, lambda x: 2.0 * x["S"] * x["I"] + 0.1 * x["S"])
>>> m.transition("recovery", {"I": -1, "S": +1}, lambda x: x["I"])
>>> mf = m.mean_field()
>>> mf.stable
True
>>> r = m.refined(50, order=2)
>>> e = m.exact(50)
>>> bool(abs(e.densities - r.densities).max() < abs(e.densities - mf.fixed_point).max() / 100)
True
"""
from __future__ import annotations

from .results import ExactResult, MeanFieldError, MeanFieldResult, RefinedResult, RefinedTransientResult
from .model import PopulationModel
from .comparison import comparison_records, format_comparison

__all__ = ["PopulationModel", "MeanFieldResult", "RefinedResult", "RefinedTransientResult", "ExactResult",
           "MeanFieldError", "format_comparison", "comparison_records"]
