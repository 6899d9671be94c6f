"""The declaration of a population model and its analyses: :class:`PopulationModel`."""
from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model import Model
from .comparison import error_slopes, plot_comparison
from .kernels import (System, check_times, find_fixed_point, load_sympy, stationary_coefficients,
                      transient_moments)
from .results import ExactResult, MeanFieldError, MeanFieldResult, RefinedResult, RefinedTransientResult

__all__ = ["PopulationModel"]


@dataclass(frozen=True)
class _Transition:
    name: str
    change: dict
    expr: Any
    correction: Any = 0


class PopulationModel:
    r"""A density-dependent population process on a closed population of ``N`` individuals.

    Parameters
    ----------
    name : str
    species : sequence of str
        Distinct Python identifiers (they name the chain's variables too).

    Raises
    ------
    ValueError
        For fewer than two species, a duplicate or a name that is not an identifier.
    ImportError
        When sympy (the ``meanfield`` extra: ``pip install 'ctmc-exact[meanfield]'``) is
        not installed: every declaration is compiled with it.

    Notes
    -----
    The mean-field and refined computations are done in the reduced
    coordinates obtained by eliminating the **last** species (see the module
    docstring); the results are reported in full coordinates, species order.
    """

    def __init__(self, name: str, species):
        load_sympy()            # before any work: every analysis below compiles the declaration with it
        self.name = str(name)
        if isinstance(species, str) or not hasattr(species, "__iter__"):
            raise ValueError(f"species: expected a list of names, got {species!r}")
        species = tuple(species)
        if len(species) < 2:
            raise ValueError(f"species: a closed population needs at least two species, got {list(species)}")
        for s in species:
            if not isinstance(s, str) or not s.isidentifier():
                raise ValueError(f"species: each name must be a Python identifier, got {s!r}")
        dup = sorted({s for s in species if species.count(s) > 1})
        if dup:
            raise ValueError(f"species: duplicate names {dup}")
        self.species = species
        self._transitions: list[_Transition] = []
        self._cache: dict = {}

    # declaration ---------------------------------------------------------------
    @property
    def symbols(self) -> dict:
        """``{species: sympy.Symbol}``: the symbols a sympy-expression rate may use."""
        sympy = load_sympy()
        return dict(zip(self.species, sympy.symbols(list(self.species), real=True)))

    def transition(self, name: str, change: Mapping, rate, correction=None) -> None:
        """Declare a transition: counts change by ``change`` at total rate ``N * rate(X / N)``
        (plus ``correction(X / N)`` when given).

        Parameters
        ----------
        name : str
            Unique among the transitions.
        change : dict
            ``{species: integer change}``; the changes must sum to 0 (the
            population is closed: individuals change species, none is born or dies).
        rate : callable, sympy expression, str or number
            The rate divided by ``N`` as a function of the densities: a callable of a
            mapping ``x`` (species -> density) using ordinary arithmetic (it is called
            once with sympy symbols), a sympy expression of :attr:`symbols`, or a
            string such as ``"beta * S * I"`` with numbers substituted.
        correction : same kinds as ``rate``, optional
            A rate term of order one in the N-system, ``N * rate(X/N) + correction(X/N)``
            (e.g. sampling without replacement): it shifts the drift by ``1/N`` and so
            enters the refined coefficient ``V``; ``refined(order=2)`` refuses it.

        Raises
        ------
        ValueError
            Naming the parameter: duplicate ``name``, unknown species, non-integer or
            non-zero-sum ``change``, a ``rate`` that is not a function of the species.
        """
        name = str(name)
        if any(t.name == name for t in self._transitions):
            raise ValueError(f"name: transition {name!r} is already declared")
        if not isinstance(change, Mapping) or not change:
            raise ValueError(f"change: transition {name!r}: expected a non-empty dict {{species: int}}, "
                             f"got {change!r}")
        full = {s: 0 for s in self.species}
        for s, c in change.items():
            if s not in full:
                raise ValueError(f"change: transition {name!r} names unknown species {s!r}; "
                                 f"species are {list(self.species)}")
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)) and not (
                    isinstance(c, (float, np.floating)) and float(c).is_integer()):
                raise ValueError(f"change: transition {name!r}: the change of {s!r} must be an integer, "
                                 f"got {c!r}")
            full[s] = int(c)
        if sum(full.values()) != 0:
            raise ValueError(f"change: transition {name!r}: changes sum to {sum(full.values())}, not 0; "
                             "the population is closed (counts sum to N), so what one species loses "
                             "another gains")
        if all(v == 0 for v in full.values()):
            raise ValueError(f"change: transition {name!r} changes nothing")
        expr = self._symbolic(rate, "rate", name)
        corr = 0 if correction is None else self._symbolic(correction, "correction", name)
        self._transitions.append(_Transition(name=name, change=full, expr=expr, correction=corr))
        self._cache.clear()

    def _symbolic(self, value, what, name):
        """A rate-like declaration as a sympy expression of the species (ValueError naming ``what``)."""
        sympy = load_sympy()
        syms = self.symbols
        try:
            if callable(value) and not isinstance(value, sympy.Basic):
                expr = value(dict(syms))
            elif isinstance(value, str):
                expr = sympy.sympify(value, locals=dict(syms))
            else:
                expr = value
            expr = sympy.sympify(expr)
            # symbols of the same name as a species are that species
            expr = expr.subs({sympy.Symbol(s): syms[s] for s in self.species})
        except Exception as exc:
            raise ValueError(f"{what}: transition {name!r}: cannot evaluate it on symbolic densities "
                             f"({type(exc).__name__}: {exc}); write it with ordinary arithmetic "
                             "(+, -, *, /, **) or as a sympy expression") from None
        if expr.has(sympy.Heaviside, sympy.sign, sympy.DiracDelta):
            raise ValueError(f"{what}: transition {name!r} uses Heaviside, sign or DiracDelta, whose derivatives "
                             "are distributions; write the rate as a Piecewise smooth near the fixed point")
        if expr.has(sympy.Min, sympy.Max, sympy.Abs):
            # derivatives of Min/Max/Abs contain DiracDelta; as a Piecewise they are the one-sided ones,
            # right wherever the drift is smooth (the expansions need the fixed point off the kinks)
            expr = expr.rewrite(sympy.Piecewise)
        unknown = sorted(str(s) for s in expr.free_symbols if str(s) not in syms or s != syms[str(s)])
        if unknown:
            raise ValueError(f"{what}: transition {name!r} uses unknown symbols {unknown}; "
                             f"species are {list(self.species)}")
        return expr

    @property
    def transitions(self) -> tuple:
        """The declared transitions (name, change, rate expression)."""
        return tuple(self._transitions)

    def _system(self) -> System:
        if "system" not in self._cache:
            if not self._transitions:
                raise ValueError("transition: the model has no transitions; declare some first")
            self._cache["system"] = System(self.species, self._transitions)
        return self._cache["system"]

    # mean field ----------------------------------------------------------------
    def drift(self, y) -> np.ndarray:
        """The mean-field drift in reduced coordinates, from the symbolic declaration.

        ``y`` holds the densities of every species but the last (the last is
        ``1 - sum(y)``), shape ``(S - 1,)`` or ``(..., S - 1)``; the result is
        ``dy/dt`` of the same shape.

        >>> p = PopulationModel("si", ["S", "I"])
        >>> p.transition("infect", {"S": -1, "I": +1}, lambda x: 2.0 * x["S"] * x["I"])
        >>> p.transition("recover", {"I": -1, "S": +1}, lambda x: x["I"])
        >>> p.drift([0.5])                 # dS/dt = -2 S I + I at S = I = 1/2
        array([0.])
        """
        sysm = self._system()
        y = np.asarray(y, dtype=float)
        if y.shape[-1:] != (sysm.m,):
            raise ValueError(f"y: expected the densities of the first {sysm.m} species (the last is 1 - "
                             f"their sum), shape (..., {sysm.m}); got shape {y.shape}")
        return np.apply_along_axis(sysm.g_num, -1, y) if y.ndim > 1 else sysm.g_num(y)

    def derivatives(self, y) -> tuple:
        """``(J, H, Q)`` at the reduced coordinates ``y`` (see :meth:`drift`): the drift's Jacobian
        ``(m, m)`` and Hessian ``(m, m, m)``, ``H[i, j, k] = d^2 f_i / dy_j dy_k``, and the jump
        covariance ``Q = sum_l l l^T beta_l(y)`` ``(m, m)``; ``m = S - 1``. Symbolic derivatives
        of the declaration, compiled once."""
        sysm = self._system()
        y = np.asarray(y, dtype=float)
        if y.shape != (sysm.m,):
            raise ValueError(f"y: expected the densities of the first {sysm.m} species, shape ({sysm.m},); "
                             f"got shape {y.shape}")
        return sysm.jac(y), sysm.F(y, 2), sysm.Q(y)

    def mean_field(self, x0=None, *, tol: float = 1e-12, t_max: float = 1e6) -> MeanFieldResult:
        """Fixed point of the mean-field ODE, found from ``x0`` (default uniform).

        ``x0`` holds densities in species order or is a dict ``{species: density}`` naming
        every species; either way they are >= 0, finite and sum to 1 (ValueError naming
        ``x0`` and the species at fault otherwise).

        The ODE is integrated until the drift is below ``1e-6`` times the
        total rate per individual (or up to ``t_max`` in units of the inverse
        rate at the start), then Newton's method with the symbolic Jacobian on the
        tangent space polishes the point to ``max|f| <= tol`` times the total
        rate per individual there (at least 1). A componentwise polish then
        refines the small densities to relative accuracy (Newton in log
        coordinates on each species' inflow against outflow, from a start in
        which densities at noise level, 1e-12 and below, are rebuilt from the
        larger ones: :func:`ctmc.meanfield.kernels.polish_componentwise`); its
        point is kept only where its residual in all species is no larger than
        Newton's and no density is more negative. The ODE phase picks the basin
        of attraction (the point it finds from a start inside the basin of a
        stable fixed point is that point); a start exactly on an unstable fixed
        point stays there, and ``stable`` says so.

        Raises
        ------
        MeanFieldError
            If Newton does not reach ``tol`` (the result's evidence is in the message).
        """
        sysm = self._system()
        xs = None if x0 is None else sysm.check_x0(x0)
        key = ("mf", None if xs is None else tuple(xs), tol)
        if key in self._cache:
            return self._cache[key]
        t0 = time.perf_counter()
        xs = np.full(sysm.S, 1.0 / sysm.S) if xs is None else xs
        x, res, it = find_fixed_point(sysm, xs, tol, t_max)
        Jr = sysm.jac(x[:-1])
        eig = np.linalg.eigvals(Jr)
        # full Jacobian: d f_s / d x_u, from the reduced one is not unique; evaluate f symbolically in x
        out = MeanFieldResult(species=self.species, fixed_point=x, jacobian=sysm.full_jacobian(x),
                              jacobian_reduced=Jr, eigenvalues=eig, stable=bool((eig.real < 0).all()),
                              residual=res, iterations=it, wall_time=time.perf_counter() - t0, _system=sysm)
        self._cache[key] = out
        return out

    def _stable_point(self, x0=None):
        mf = self.mean_field(x0)
        if not mf.stable:
            raise MeanFieldError(f"refined: the fixed point {mf.fixed_point} is not stable (eigenvalues on "
                                 f"the tangent space {mf.eigenvalues})"
                                 "; the expansion needs a Hurwitz Jacobian")
        return mf

    def _coefficients(self, order, x0=None):
        x0 = None if x0 is None else self._system().check_x0(x0)
        key = ("coef", order, None if x0 is None else tuple(x0))
        if key in self._cache:
            return self._cache[key]
        mf = self._stable_point(x0)
        sysm = self._system()
        _check_expansion(sysm, order)
        V, W, A, res = stationary_coefficients(sysm, mf.fixed_point[:-1], mf.jacobian_reduced, order)
        out = (mf, V, W, A, res)
        self._cache[key] = out
        return out

    def refined(self, N, order: int = 1, *, x0=None) -> RefinedResult:
        """Refined mean field at the fixed point for ``N`` individuals (order 1 or 2).

        Parameters
        ----------
        N : int >= 1
            The number of individuals (a whole number; 50.0 is taken as 50).
        order : {1, 2}
        x0 : array_like or dict, optional
            Where the fixed point search starts (:meth:`mean_field`): picks the
            fixed point when there are several.

        Raises
        ------
        ValueError
            For ``N`` not a positive number or ``order`` not 1 or 2.
        MeanFieldError
            If the fixed point is not found or not stable.
        """
        N = _check_N(N)
        order = _check_order(order)
        mf, V, W, A, res = self._coefficients(order, x0)
        sysm = self._system()
        Vf = sysm.full(V)
        Af = None if A is None else sysm.full(A)
        dens = mf.fixed_point + Vf / N + (0 if Af is None else Af / N ** 2)
        return RefinedResult(N=N, order=order, densities=dens, fixed_point=mf.fixed_point, V=Vf, A=Af,
                             W=sysm.full_matrix(W), residual=res)

    def refined_transient(self, t, x0, N, order: int = 1) -> RefinedTransientResult:
        """Refined mean field along the ODE from ``x0`` at the times ``t`` (see the module docstring).

        Integrates :math:`x, V, W` (and for order 2 :math:`C, B, A`) from
        :math:`V = W = \\dots = 0` at :math:`t = 0`. For one number ``t`` the arrays
        have no time axis; for an array, the time axis comes first.
        """
        N = _check_N(N)
        order = _check_order(order)
        sysm = self._system()
        _check_expansion(sysm, order)
        x0 = sysm.check_x0(x0)
        ts, scalar = check_times(t)
        x, V, W, A = transient_moments(sysm, x0, ts, order)
        dens = x + V / N + (0 if A is None else A / N ** 2)
        if scalar:
            x, V, W, dens = x[0], V[0], W[0], dens[0]
            A = None if A is None else A[0]
        return RefinedTransientResult(t=float(ts[0]) if scalar else ts, N=N, order=order, densities=dens, x=x,
                                      V=V, A=A, W=W)

    # exact finite N --------------------------------------------------------------
    def chain(self, N, initial=None, **build_options):
        """The exact CTMC on counts for ``N`` individuals, built with :class:`ctmc.Model`.

        One variable per species (named after it, ``0..N``); transition ``l`` fires
        where no count would go negative, at rate ``N * rate(X / N)`` evaluated on
        the count arrays. Without ``initial`` the chain starts from the counts nearest
        ``N * fixed_point`` (largest remainders, summing to ``N``).
        """
        N = _check_N(N)
        sysm = self._system()
        m = Model(f"{self.name}[N={N}]")
        v = {s: m.var(s, 0, N) for s in self.species}
        for tr, fn, cfn in zip(self._transitions, sysm.full_rate_fns, sysm.full_corr_fns):
            guard = True
            for s, c in tr.change.items():
                if c < 0:
                    guard = (v[s] >= -c) if guard is True else (guard & (v[s] >= -c))
            names = self.species

            def rate(env, fn=fn, cfn=cfn):
                x = [np.asarray(env[s], dtype=float) / N for s in names]
                return N * np.asarray(fn(*x), dtype=float) + np.asarray(cfn(*x), dtype=float)
            rate.__name__ = tr.name
            m.event(tr.name, guard=guard, rate=rate,
                    update={v[s]: v[s] + c for s, c in tr.change.items() if c})
        if initial is None:
            initial = _nearest_counts(self.mean_field().fixed_point, N, self.species)
        elif isinstance(initial, Mapping):
            initial = dict(initial)
            if set(initial) != set(self.species) or sum(int(c) for c in initial.values()) != N:
                raise ValueError(f"initial: expected counts of every species {list(self.species)} summing "
                                 f"to N = {N}, got {initial!r}")
        else:
            raise ValueError(f"initial: expected a dict of counts {{species: count}} summing to N = {N}, "
                             f"got {initial!r}")
        return m.build(initial=initial, **build_options)

    def exact(self, N, method: str = "auto", **options) -> ExactResult:
        """Expected densities under the stationary law of the chain for ``N`` individuals.

        ``method`` and ``options`` go to :meth:`ctmc.CTMC.stationary` (which raises
        on a failed solve, the result attached).

        A chain with an absorbing state (an SIS without external infection) has it
        as its stationary law; the mean field's endemic point then describes the
        quasi-stationary regime, not this answer.
        """
        ch = self.chain(N)
        st = ch.stationary(method, **options)
        dens = np.array([float(st.pi @ ch.states[s]) for s in self.species]) / int(N)
        return ExactResult(N=int(N), densities=dens, stationary=st, n_states=ch.n_states)

    # comparison -----------------------------------------------------------------
    def compare(self, Ns, orders=(1, 2), *, quantity=None, x0=None, plot=None, ax=None, method: str = "auto"):
        """Exact, mean-field and refined values against ``N``, with their errors and fitted slopes.

        Parameters
        ----------
        Ns : sequence of int
        orders : sequence of {1, 2}
        x0 : densities, optional
            Start of the fixed-point search (a model with several stable points).
        quantity : callable, optional
            Compare ``quantity(x)`` instead of the whole density vector: ``x``
            maps each species to its density (``lambda x: x["I"]``, or a mean
            such as ``lambda x: sum(k * x[f"x{k}"] for k in range(4))``); the
            errors are then absolute differences of that number.
        plot : str or path, optional
            Write a log-log plot of the errors against ``N`` to this file (needs matplotlib).
        ax : matplotlib Axes, optional
            Draw the plot on it instead.

        Returns
        -------
        pandas.DataFrame or list of dict
            Columns ``N``, ``states``, ``exact``, ``mean_field``, ``refined_<k>``,
            ``error_mean_field``, ``error_refined_<k>`` (density vectors in species
            order and max-over-species errors, or numbers with ``quantity``). A
            DataFrame when pandas is installed; its ``attrs["slopes"]`` (and the
            list's rows' shared ``slopes`` key otherwise) hold the fitted log-log
            slopes of each error. :func:`format_comparison` prints it.
        """
        try:
            orders = tuple(_check_order(o) for o in orders)
        except ValueError as exc:
            raise ValueError(f"orders: {str(exc).removeprefix('order: ')}") from None
        if any(isinstance(n, bool) or not float(n).is_integer() for n in Ns):
            raise ValueError(f"Ns: expected whole population sizes, got {list(Ns)}")
        Ns = [int(_check_N(n)) for n in Ns]
        if quantity is not None and not callable(quantity):
            raise ValueError(f"quantity: expected a function of the densities x (a mapping species -> density), "
                             f"got {quantity!r}")

        def value(v):
            v = np.asarray(v, dtype=float)
            return v if quantity is None else float(quantity(dict(zip(self.species, v))))

        def err(a, b):
            return float(np.abs(np.asarray(a) - np.asarray(b)).max())

        mf = value(self.mean_field(x0).fixed_point)
        rows = []
        for N in Ns:
            exr = self.exact(N, method)
            ex = value(exr.densities)
            row = {"N": N, "states": exr.n_states, "exact": ex, "mean_field": mf,
                   "error_mean_field": err(ex, mf)}
            for k in orders:
                r = value(self.refined(N, k, x0=x0).densities)
                row[f"refined_{k}"] = r
                row[f"error_refined_{k}"] = err(ex, r)
            rows.append(row)
        slopes = error_slopes(rows, Ns, orders)
        if plot is not None or ax is not None:
            what = getattr(quantity, "__name__", "quantity").replace("<lambda>", "quantity")
            plot_comparison(rows, orders, slopes, plot, ax, self.name,
                            "E[X/N], max over species" if quantity is None else f"E[{what}]")
        try:
            import pandas as pd
        except ImportError:
            for r in rows:
                r["slopes"] = slopes
            return rows
        df = pd.DataFrame(rows)
        df.attrs["slopes"] = slopes
        return df


def _nearest_counts(x, N, species):
    raw = np.asarray(x) * N
    c = np.floor(raw).astype(int)
    short = N - int(c.sum())
    order = np.argsort(-(raw - c), kind="stable")
    c[order[:short]] += 1
    return {s: int(k) for s, k in zip(species, c)}


def _check_N(N) -> int:
    """The population size ``N`` as an int: a whole number >= 1 (ValueError naming ``N`` otherwise).

    ``N`` counts individuals, so 0.001 or 10.5 are refused rather than expanded in 1/N (a
    float that is a whole number, e.g. 50.0, is accepted).
    """
    ok = not isinstance(N, bool) and isinstance(N, (int, float, np.integer, np.floating)) \
        and math.isfinite(N) and N >= 1 and int(N) == N
    if not ok:
        raise ValueError(f"N: expected a whole number of individuals >= 1, got {N!r}")
    return int(N)


def _check_order(order):
    if isinstance(order, bool) or order not in (1, 2):
        raise ValueError(f"order: expected 1 (x* + V/N) or 2 (x* + V/N + A/N^2), got {order!r}")
    return int(order)


def _check_expansion(sysm, order):
    if order == 2 and sysm.has_correction:
        raise ValueError("order: the 1/N^2 expansion of a model with rate corrections is not available; "
                         "use order=1")
