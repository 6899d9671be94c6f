r"""Compute a population model's refined mean-field coefficients with rmftool.

Run with the interpreter of ``.venv-rmf`` (``scripts/rmf_venv.sh``), never with
ctmc's: this script imports only rmftool (Gast and Van Houdt's refined
mean-field tool, PyPI ``rmftool``, import name ``rmftool``) and its
dependencies, and cannot import ctmc. ``tests/test_meanfield_rmftool.py``
feeds it a job on stdin and compares the answer with :mod:`ctmc.meanfield`.

Mathematics
-----------
A density-dependent population process over species :math:`1..n` has
transitions :math:`\ell` with change vectors :math:`c_\ell \in \mathbb{Z}^n`
and rates :math:`N\beta_\ell(X/N)`. Its drift is
:math:`F(x) = \sum_\ell c_\ell \beta_\ell(x)`, the mean field is
:math:`\dot x = F(x)` with fixed point :math:`x^*`, and in steady state
(Gast and Van Houdt, SIGMETRICS 2018; Gast, Bortolussi and Tribastone 2019)

.. math:: E[X/N] = x^* + V/N + A/N^2 + O(1/N^3),
          \quad \mathrm{Cov}[X/N] = W/N + O(1/N^2),

where :math:`W` solves :math:`F'W + WF'^\top + Q = 0` with
:math:`Q = \sum_\ell c_\ell c_\ell^\top \beta_\ell(x^*)` and
:math:`V = -F'^{-1}\,(F''\!:\!W)/2`. rmftool returns these from
``DDPP.meanFieldExpansionSteadyState(order)`` as ``(pi, V, (V, W))`` for
order 1 and ``(pi, V, A, (V, W, A, B, C, D))`` for order 2, and along the ODE
from ``DDPP.meanFieldExpansionTransient(order, time)``.

Coordinates: rmftool works in the species order it is given (the job's).
When the change vectors conserve the total (a closed population) and the job
asks ``"reduction": "eliminate"`` (the default), this worker declares the
model to rmftool without the last species, replaced in every rate by the
total (that of ``x0``) minus the others, and maps back with
:math:`x = E y + t e_n`, :math:`E = [I; -\mathbf 1^\top]`: :math:`V = E V_y`,
:math:`A = E A_y`, :math:`W = E W_y E^\top`. Reason: rmftool 0.5 would
otherwise project onto the range of the Jacobian itself
(``DDPP.reduceDimensionFppFppppQpQppR``), and that projection contracts the
wrong tensor axes for the third and fourth derivatives of the drift, the
second derivative of Q and the tensor R (one index is transformed twice,
another not at all), so its order-2 steady-state ``A`` is wrong whenever the
population is closed (the SIR of the test: :math:`A_S` = 15.929 instead of
15.416; rmftool's own transient :math:`A(t)`, which never projects, tends to
15.416, and so do exact finite-N solutions extrapolated in N). The fixed
point, V and W are unaffected. ``"reduction": "rmftool"`` keeps rmftool's
projection. Either way the answer is in all species, in the job's order.

Precision: rmftool 0.5 symmetrises tensors in float32
(``refinedRefined_fixedPoint.symetric_tensor``), solves the order-2
tensor equations with ``lgmres(atol=1e-7)``, integrates the transient with
``solve_ivp(rtol=1e-6)`` and finds :math:`x^*` by ``odeint`` up to
:math:`t = 10^4`. With ``"strict": true`` (the default) this worker keeps
rmftool's formulas but (i) polishes :math:`x^*` by Newton's method on
rmftool's own drift and Jacobian, within the span of the change vectors,
(ii) symmetrises in float64, (iii) solves the tensor equations with a sparse
direct solver and (iv) integrates with ``rtol=1e-11, atol=1e-13``. With
``"strict": false`` rmftool runs unmodified (order-2 coefficients then agree
with exact arithmetic only to about 1e-6 relative).

Job (JSON on stdin)::

    {"species": ["S", "I", "R"],
     "transitions": [{"name": "infection", "change": {"S": -1, "I": 1},
                      "rate": "3.0*S*I"}, ...],
     "x0": [0.9, 0.1, 0.0],        # start of the ODE (densities)
     "order": 2,                   # 1 or 2
     "strict": true,               # see above
     "reduction": "eliminate",     # or "rmftool" (see Coordinates)
     "transient_time": 1.5}        # optional: also the coefficients at t

Rates are expressions in the species names with numbers only (``+ - * /
**``), parsed by sympy with every species name bound to a symbol (so ``S``,
``I``, ``E``, ``N`` mean species, not sympy's constants).

Answer: one JSON line on stdout with ``species``, ``eliminated`` (the species
left out of rmftool's model, or null), ``fixed_point``,
``fixed_point_ode`` (rmftool's own, before polishing), ``drift_at_fixed_point``
(max norm), ``V``, ``W`` and for order 2 ``A``, and with ``transient_time``
also ``transient`` = {``t``, ``x``, ``V``, ``W``, ``A``}. rmftool's own
progress prints go to stderr. Errors: a message on stderr and exit status 1.
"""

import contextlib
import json
import sys
from importlib.metadata import version

import numpy as np
import scipy.integrate
import scipy.sparse
import scipy.sparse.linalg
import sympy


def _rate_functions(species, transitions, eliminate=None, total=1.0):
    """Return rmftool rate callables built from the expression strings.

    With ``eliminate`` (a species name) that species is replaced in every rate
    by ``total`` minus the others, and the callables take the other species
    only. rmftool calls a rate with a list of sympy symbols (for derivatives)
    or with a numpy vector (for the ODE and Q at the fixed point).
    """
    symbols = [sympy.Symbol(f"_sp{i}") for i in range(len(species))]
    local = dict(zip(species, symbols))
    kept = list(symbols)
    subs = {}
    if eliminate is not None:
        gone = local[eliminate]
        kept.remove(gone)
        subs = {gone: total - sum(kept)}
    rates = []
    for t in transitions:
        expr = sympy.parse_expr(t["rate"], local_dict=local, evaluate=True)
        unknown = expr.free_symbols - set(symbols)
        if unknown:
            raise ValueError(f"transition {t['name']!r}: rate {t['rate']!r} "
                             f"uses names that are not species: {sorted(map(str, unknown))}")
        expr = sympy.expand(expr.xreplace(subs)) if subs else expr
        numeric = sympy.lambdify(kept, expr, modules="numpy")

        def rate(x, expr=expr, numeric=numeric):
            if any(isinstance(xi, sympy.Basic) for xi in x):
                return expr.xreplace(dict(zip(kept, x)))
            return float(numeric(*[float(xi) for xi in x]))

        rates.append(rate)
    return rates


def _change_vector(species, change):
    unknown = set(change) - set(species)
    if unknown:
        raise ValueError(f"change {change} names unknown species {sorted(unknown)}")
    return [int(change.get(s, 0)) for s in species]


def _make_strict(rmf_modules):
    """Patch rmftool 0.5's precision-limiting helpers (see module docstring)."""
    from itertools import permutations
    from math import factorial

    def symetric_tensor(T):
        newT = np.zeros(T.shape, dtype=float)
        for sigma in permutations(range(T.ndim)):
            newT += np.transpose(T, axes=list(sigma))
        return newT / factorial(T.ndim)

    for mod in rmf_modules:
        mod.symetric_tensor = symetric_tensor

    def lgmres_direct(M, b, **_):
        return scipy.sparse.linalg.spsolve(scipy.sparse.csc_matrix(M), b), 0

    scipy.sparse.linalg.lgmres = lgmres_direct

    solve_ivp = scipy.integrate.solve_ivp

    def solve_ivp_tight(*args, **kwargs):
        kwargs.update(rtol=1e-11, atol=1e-13)
        kwargs.setdefault("method", "LSODA")
        return solve_ivp(*args, **kwargs)

    scipy.integrate.solve_ivp = solve_ivp_tight


def _newton_polish(ddpp, x, steps=20):
    """Refine the fixed point with Newton steps in the span of the change vectors."""
    F = ddpp.defineDrift()
    Fp, _, _ = ddpp.defineDriftDerivativeQ()
    C = np.array(ddpp._list_of_transitions, dtype=float).T        # n x (#transitions)
    U, s, _ = np.linalg.svd(C, full_matrices=False)
    Z = U[:, s > 1e-10 * s[0]]                                      # basis of the span
    for _ in range(steps):
        f = np.asarray(F(x), dtype=float)
        if np.max(np.abs(f)) < 1e-15:
            break
        J = np.asarray(Fp(x), dtype=float)
        y = np.linalg.lstsq(J @ Z, -f, rcond=None)[0]
        x = x + Z @ y
    return x, float(np.max(np.abs(np.asarray(F(x), dtype=float))))


def run(job):
    """Compute fixed point and coefficients for one job (a dict); return a dict."""
    species = list(job["species"])
    n = len(species)
    order = int(job.get("order", 1))
    if order not in (1, 2):
        raise ValueError(f"order must be 1 or 2, not {order}")
    strict = bool(job.get("strict", True))
    reduction = job.get("reduction", "eliminate")
    if reduction not in ("eliminate", "rmftool"):
        raise ValueError(f"reduction must be 'eliminate' or 'rmftool', not {reduction!r}")
    changes = np.array([_change_vector(species, t["change"]) for t in job["transitions"]])
    x0 = np.array(job["x0"], dtype=float)
    if x0.shape != (n,):
        raise ValueError(f"x0 has shape {x0.shape}, expected ({n},)")

    # E maps rmftool's coordinates to all species: x = E y + offset.
    closed = bool(np.all(changes.sum(axis=1) == 0))
    if reduction == "eliminate" and closed:
        eliminate, total = species[-1], float(x0.sum())
        E = np.vstack([np.eye(n - 1), -np.ones((1, n - 1))])
        offset = np.zeros(n)
        offset[-1] = total
        changes_rmf = changes[:, :-1]
    else:
        eliminate, total = None, None
        E, offset, changes_rmf = np.eye(n), np.zeros(n), changes

    def to_species(y, affine=False):
        y = np.asarray(y, dtype=float)
        return (E @ y + (offset if affine else 0)).tolist()

    with contextlib.redirect_stdout(sys.stderr):
        from rmftool import population_processes as pp
        rmf_modules = [sys.modules["refinedRefined_fixedPoint"],
                       sys.modules["refinedRefined_transientRegime"]]
        if strict:
            _make_strict(rmf_modules)

        ddpp = pp.DDPP()
        rates = _rate_functions(species, job["transitions"], eliminate, total)
        for c, rate in zip(changes_rmf, rates):
            ddpp.add_transition(c.tolist(), rate)
        ddpp.set_initial_state(x0[:E.shape[1]] if eliminate else x0)

        y_ode = np.asarray(ddpp.fixed_point(), dtype=float)
        if strict:
            y_star, residual = _newton_polish(ddpp, y_ode.copy())
            ddpp.fixed_point = lambda: y_star          # used by the expansion below
        else:
            y_star = y_ode
            residual = float(np.max(np.abs(ddpp.defineDrift()(y_star))))

        out = dict(species=species, order=order, strict=strict, reduction=reduction,
                   eliminated=eliminate, rmftool_version=version("rmftool"),
                   fixed_point=to_species(y_star, True), fixed_point_ode=to_species(y_ode, True),
                   drift_at_fixed_point=residual)
        if order == 1:
            _, V, (_, W) = ddpp.meanFieldExpansionSteadyState(order=1)
        else:
            _, V, A, (_, W, *_rest) = ddpp.meanFieldExpansionSteadyState(order=2)
            out["A"] = to_species(A)
        out["V"] = to_species(V)
        out["W"] = (E @ np.asarray(W, dtype=float) @ E.T).tolist()

        if job.get("transient_time") is not None:
            m = E.shape[1]
            res = ddpp.meanFieldExpansionTransient(order=order, time=float(job["transient_time"]))
            T, X, V_t, XVW = res[0], res[1], res[2], res[-1]
            W_t = XVW[-1, 2 * m:2 * m + m * m].reshape(m, m)
            tr = dict(t=float(T[-1]), x=to_species(X[-1], True), V=to_species(V_t[-1]),
                      W=(E @ W_t @ E.T).tolist())
            if order == 2:
                tr["A"] = to_species(res[3][-1])
            out["transient"] = tr
    return out


def main():
    try:
        job = json.load(sys.stdin)
        out = run(job)
    except Exception as exc:  # one clear line for the calling test
        print(f"rmf_worker: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
