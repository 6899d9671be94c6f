r"""The questions a model checker answers in one line, with the evidence of every analysis.

Notation: :math:`Q` the generator, :math:`A` a set of states,
:math:`T_A = \inf\{t \ge 0 : X_t \in A\}`, :math:`p_0` an initial law (by
default the uniform law on the chain's initial states), :math:`r` a reward
rate per state.

``prob_within(A, t)``
    :math:`u_i(t) = P_i(T_A \le t)` from every state, and :math:`p_0 u(t)`
    (Storm: ``P=? [F<=t "A"]``). With :math:`Q'` equal to :math:`Q` with the
    rows of :math:`A` set to zero (``A`` made absorbing),
    :math:`u(t) = e^{Q't} 1_A`, computed by uniformisation
    (:func:`ctmc.transient.uniformize_operator`): non-negative terms, so small
    probabilities keep their relative accuracy; ``error_bound`` is the
    neglected Poisson mass, an absolute bound.
``cumulative_reward(r, t)``
    :math:`v_i(t) = E_i[\int_0^t r(X_s)\,ds] = \int_0^t (e^{Qs} r)_i\,ds
    = \sum_k \Lambda^{-1} P(N_{\Lambda t} > k) (P^k r)_i` and :math:`p_0 v(t)`
    (Storm: ``R=? [C<=t]``); ``error_bound`` is :math:`\max|r|` times the
    neglected weight, exact accounting of the truncated series.
``long_run(p0)``
    The long-run law :math:`\lim_{t\to\infty} p_0 e^{Qt}` of a chain with
    several closed classes :math:`C_1, \dots, C_m`:
    :math:`\sum_c a_c \pi^{(c)}`, with :math:`a_c = p_0 h^{(c)}` the
    probability of ever entering :math:`C_c` (a hitting transform at
    :math:`s = 0`) and :math:`\pi^{(c)}` the stationary law of the class
    (Storm: ``LRA``/``S`` from the initial state). The bound adds the
    classes' stationary bounds weighted by :math:`a_c` and the absolute
    errors of the :math:`a_c`.
``throughput(event)``
    :math:`\sum_i \pi_i \lambda_e(i)`, the long-run rate at which a model
    event fires (blocked firings that leave the state unchanged count), with
    :math:`\pi` the long-run law from :math:`p_0`; bound
    :math:`\|\hat\pi - \pi\|_1 \max_i \lambda_e(i)`. For a set :math:`E` of events
    (a list, tuple or set of names) :math:`\lambda_e` is :math:`\sum_{e \in E} \lambda_e`
    throughout, value and bound (e.g. the completions of a phase-type station).

Every function is written once on the backend primitives or on the chain's
analyses, so it serves every backend.
"""
from __future__ import annotations

import time

import numpy as np

from ._util import as_points
from .backends import operator_for
from .backends.base import worst
from .kernels.evidence import grade_bound, judge
from .options import Tolerances
from .results import MeasureResult, StationaryResult, Status
from .sets import owned_mask, owned_values
from .transient import TAIL_EPS, backward, check_uniformization, initial_law

__all__ = ["prob_within", "expected_at", "cumulative_reward", "long_run", "throughput"]


def _start_law(op, p0, chain=None):
    """Owned initial law: ``p0``, else the chain's :attr:`~ctmc.CTMC.initial_law`, else uniform on
    the operator's initial states (a distributed chain), else None."""
    if p0 is not None:
        return initial_law(op, p0)
    law = getattr(chain, "initial_law", None)
    if law is not None:
        return initial_law(op, law)
    if op.initial is None or len(op.initial) == 0:
        return None
    return initial_law(op, set(int(i) for i in op.initial))


def _tolerances(error_tol) -> Tolerances:
    """The options a measure is graded with: ``error_tol`` (> 0, checked before any work), or the default."""
    return Tolerances() if error_tol is None else Tolerances(error_tol=error_tol)


def _uniformized_measure(op, absorbing, V0, tv, p, *, eps, max_terms, integrate, scale, lo, hi, name, t0,
                         tols):
    """Shared tail of prob_within and cumulative_reward: uniformise (``absorbing``: the states made
    absorbing, or None), check the range, weigh by p0."""
    run = {}
    U, trunc = backward(op, V0, tv, absorbing=absorbing, eps=eps, max_terms=max_terms, integrate=integrate,
                        info=run)
    lam = run["rate"]
    # an invariant as residual: every value lies in [lo(t), hi(t)] exactly; round-off only moves it out
    viol = np.maximum(lo[:, None] - U, U - hi[:, None]) if U.size else np.zeros((tv.size, 0))
    resid = max(0.0, op.allmax(float(viol.max())) if viol.size else 0.0)
    bound = scale * trunc + resid
    value = None if p is None else np.array([op.allsum(float(p @ row)) for row in U])
    # a NaN/inf measure is never a success: values beyond the double range on any process
    overflow = op.allmax(float(not np.all(np.isfinite(U)))
                         + float(value is not None and not np.all(np.isfinite(value))))
    status, msg = judge(Status.SUCCESS, (
        f"{name}: uniformisation, rate {lam:.4g}; truncation and round-off {scale * trunc:.1e}, range check "
        f"{resid:.1e}" + ("" if p is not None else "; no initial law (the chain has no initial state): value is None")),
        [(overflow > 0, Status.INACCURATE, "; values beyond the double range (overflow): not a number")])
    # graded like every bound (grade_bound, the error_tol given), relative to the largest value possible
    ref = max(scale * float(tv.max()) if integrate else scale, 1e-300)
    status, msg = grade_bound(status, msg + f"; bound relative to {ref:.3g}", bound / ref, tols)
    values = np.array([op.gather(row, op.default_gather) for row in U])
    return MeasureResult(method="uniformization", backend=op.backend, status=status, message=msg, iterations=0,
                         residual=resid, wall_time=time.perf_counter() - t0,
                         info={"uniformization_rate": lam, "uniformization_bound": scale * trunc,
                               "uniformization_steps": run["steps"]}, value=value,
                         values=values,
                         t=tv, error_bound=bound)


def prob_within(chain, target, t, p0=None, *, eps=TAIL_EPS, max_terms=10_000_000, backend="scipy", check=True,
                error_tol=None):
    """``P(T_A <= t)`` from every state and from the initial law; see :meth:`ctmc.CTMC.prob_within`.

    Examples
    --------
    Exponential time to reach state 1 at rate 2: ``1 - exp(-2t)``.

    >>> import ctmc
    >>> c = ctmc.CTMC([[-2.0, 2.0], [0.0, 0.0]], initial=0)
    >>> r = c.prob_within({1}, 0.5)
    >>> round(float(r.value), 12), round(1 - 2.718281828459045 ** -1, 12)
    (0.632120558829, 0.632120558829)
    """
    check_uniformization(eps, max_terms)
    tols = _tolerances(error_tol)
    tv = as_points(t, "t")
    t0 = time.perf_counter()
    op = operator_for(chain, backend)
    A = owned_mask(target, op.states, op.n, op.start, op.stop, "target")
    if op.allsum(float(A.sum())) == 0:
        raise ValueError("target: the set of states is empty")
    p = _start_law(op, p0, chain)
    res = _uniformized_measure(op, A, A.astype(float), tv, p, eps=eps, max_terms=max_terms,
                               integrate=False, scale=1.0, lo=np.zeros(tv.size), hi=np.ones(tv.size),
                               name="prob_within", t0=t0, tols=tols)
    return res.check(check)


def expected_at(chain, values, t, p0=None, *, absorbing=None, eps=TAIL_EPS, max_terms=10_000_000,
                backend="scipy", check=True, error_tol=None):
    """``E_i[v(X_t)]`` from every state ``i`` and from the initial law, the states of ``absorbing``
    (a set, or None) made absorbing: :func:`prob_within` is the indicator of its target with the
    target absorbing; an instantaneous reward is a reward with nothing absorbing. Every value lies
    in ``[min v, max v]`` (the range check); the bound is graded against ``max |v|``.

    Examples
    --------
    State 0 left at rate 2 for state 1, value 1 in state 0: ``exp(-2t)``.

    >>> import ctmc
    >>> from ctmc.measures import expected_at
    >>> c = ctmc.CTMC([[-2.0, 2.0], [0.0, 0.0]], initial=0)
    >>> round(float(expected_at(c, [1.0, 0.0], 0.5).value[0]), 12), round(2.718281828459045 ** -1, 12)
    (0.367879441171, 0.367879441171)
    """
    check_uniformization(eps, max_terms)
    tols = _tolerances(error_tol)
    tv = as_points(t, "t")
    t0 = time.perf_counter()
    op = operator_for(chain, backend)
    v = owned_values(values, op.states, op.n, op.start, op.stop, "values", chain.named_vectors(), finite=True)
    A = None if absorbing is None else owned_mask(absorbing, op.states, op.n, op.start, op.stop, "absorbing")
    p = _start_law(op, p0, chain)
    hi = op.allmax(float(v.max()) if v.size else -np.inf)
    lo = -op.allmax(float(-v.min()) if v.size else -np.inf)
    res = _uniformized_measure(op, A, v.astype(float), tv, p, eps=eps, max_terms=max_terms, integrate=False,
                               scale=max(abs(lo), abs(hi)), lo=np.full(tv.size, lo), hi=np.full(tv.size, hi),
                               name="expected_at", t0=t0, tols=tols)
    return res.check(check)


def cumulative_reward(chain, reward, t, p0=None, *, eps=TAIL_EPS, max_terms=10_000_000, backend="scipy",
                      check=True, error_tol=None):
    """``E[int_0^t r(X_s) ds]`` from every state and from the initial law; see :meth:`ctmc.CTMC.cumulative_reward`.

    Examples
    --------
    Reward 1 in state 0, left at rate 2 for an absorbing state: ``(1 - exp(-2t)) / 2``.

    >>> import ctmc
    >>> c = ctmc.CTMC([[-2.0, 2.0], [0.0, 0.0]], initial=0)
    >>> round(float(c.cumulative_reward([1.0, 0.0], 0.5).value), 12)
    0.316060279414
    """
    check_uniformization(eps, max_terms)
    tols = _tolerances(error_tol)
    tv = as_points(t, "t")
    t0 = time.perf_counter()
    op = operator_for(chain, backend)
    r = owned_values(reward, op.states, op.n, op.start, op.stop, "reward", chain.named_vectors(), finite=True)
    p = _start_law(op, p0, chain)
    rmax = op.allmax(float(np.abs(r).max()) if r.size else 0.0)
    rlo = -op.allmax(float(-r.min()) if r.size else 0.0)
    res = _uniformized_measure(op, None, r.astype(float), tv, p, eps=eps, max_terms=max_terms,
                               integrate=True, scale=rmax, lo=rlo * tv, hi=rmax * tv,
                               name="cumulative_reward", t0=t0, tols=tols)
    return res.check(check)


def _everywhere(chain, backend):
    """``backend_options`` gathering whole vectors on every process (PETSc; the scipy backend has them)."""
    return {"gather": "all"} if chain.resolve_backend(backend) == "petsc" else None


def long_run(chain, p0=None, method="auto", *, backend=None, check=True, **options) -> StationaryResult:
    """Long-run law from ``p0`` of a chain with one or several closed classes; see :meth:`ctmc.CTMC.long_run`.

    Examples
    --------
    From state 0, absorbed in state 1 w.p. 1/3 and in state 2 w.p. 2/3:

    >>> import ctmc
    >>> c = ctmc.CTMC([[-3.0, 1.0, 2.0], [0, 0, 0], [0, 0, 0]], initial=0)
    >>> [round(float(x), 12) for x in c.long_run().pi]
    [0.0, 0.333333333333, 0.666666666667]
    """
    t0 = time.perf_counter()
    bo = _everywhere(chain, backend)
    laws = chain.stationary(method, backend=backend, check=check, per_class=True, backend_options=bo, **options)
    if len(laws) == 1:
        return laws[0]
    op = operator_for(chain, chain.resolve_backend(backend))
    p = _start_law(op, p0, chain)
    if p is None:
        raise ValueError("p0: the chain has several closed classes and no initial state: give the initial law")
    pi = np.zeros(chain.n_states)
    status, bound, iters, resid, bal, under = Status.SUCCESS, 0.0, 0, 0.0, 0.0, 0
    weights, methods, sizes = [], [], []
    for law in laws:
        support = np.flatnonzero(law.pi > 0)       # the class (pi gathered on every process)
        sizes.append(int(support.size))
        hit = chain.hitting_laplace(set(support.tolist()), 0.0, backend=backend, check=check, backend_options=bo)
        a = op.allsum(float(p @ np.asarray(hit.values)[op.start:op.stop]))
        weights.append(a)
        methods.append(law.method)
        pi += a * law.pi
        status = worst(worst(status, law.status), hit.status)
        bound += a * law.error_bound + (hit.error_bound if np.isfinite(hit.error_bound) else np.inf)
        iters += law.iterations + hit.iterations
        resid = max(resid, law.residual)
        bal, under = max(bal, law.balance_error), under + law.underflow
    msg = (f"long-run law over {len(laws)} closed classes, entered with probabilities "
           + ", ".join(f"{a:.6g}" for a in weights))
    res = StationaryResult(method=f"long_run({'/'.join(sorted(set(methods)))})", backend=laws[0].backend,
                           status=status, message=msg, iterations=iters, residual=resid,
                           wall_time=time.perf_counter() - t0,
                           info={"absorption": np.array(weights), "class_sizes": sizes}, pi=pi, balance_error=bal, underflow=under, error_bound=bound)
    return res.check(check)


def _event_rates(chain, event):
    """``(label, owned per-state rate)`` of one event name, or of the sum over a list, tuple or set
    of names (a set in sorted order); unknown, repeated or non-string names are refused first."""
    if isinstance(event, str):
        return repr(event), np.asarray(chain.event_rate(event), dtype=float)
    if not isinstance(event, (list, tuple, set, frozenset)) or not event:
        raise ValueError(f"event: expected an event name or a non-empty list, tuple or set of names, "
                         f"got {event!r}")
    names = sorted(event) if isinstance(event, (set, frozenset)) else list(event)
    bad = [e for e in names if not isinstance(e, str)]
    if bad:
        raise ValueError(f"event: the event names must be strings, got {bad!r}")
    twice = sorted({e for e in names if names.count(e) > 1})
    if twice:
        raise ValueError(f"event: {twice} named more than once (each event counts once)")
    model = getattr(chain, "model", None)
    if model is not None:
        known = {e.name for e in (*model.events, *model.immediates)}
        unknown = [e for e in names if e not in known]
        if unknown:
            some = sorted(known)
            raise ValueError(f"event: no events {unknown} in model {model.name!r}; events are "
                             f"{some[:12]}{' and more' if len(some) > 12 else ''}")
    return repr(names), sum(np.asarray(chain.event_rate(e), dtype=float) for e in names)


def throughput(chain, event, p0=None, method="auto", *, backend=None, check=True, **options) -> MeasureResult:
    """Long-run rate at which the model event ``event`` fires, or the events of a list, tuple or set
    of names together (the sum of their rates weighted by the law, one bound for the sum); see
    :meth:`ctmc.CTMC.throughput`.

    Examples
    --------
    M/M/1/3 with arrival rate 1, service rate 2: the departures' throughput
    is ``1 - pi_3`` (arrivals not lost), ``pi_3 = 1/15``; with the lost arrivals it is the
    arrival rate.

    >>> import ctmc
    >>> m = ctmc.Model("mm13"); n = m.var("n", 0, 3)
    >>> m.event("arrive", guard=n < 3, rate=1.0, update={n: n + 1})
    >>> m.event("lost", guard=n == 3, rate=1.0, update={})
    >>> m.event("depart", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> chain = m.build(initial={"n": 0})
    >>> round(float(chain.throughput("depart")), 12), round(1 - 1 / 15, 12)
    (0.933333333333, 0.933333333333)
    >>> round(float(chain.throughput(["arrive", "lost"])), 12)
    1.0
    """
    t0 = time.perf_counter()
    label, rate = _event_rates(chain, event)       # the owned states' rates
    law = long_run(chain, p0, method, backend=backend, check=check, **options)
    op = operator_for(chain, chain.resolve_backend(backend))
    value = op.allsum(float(law.pi[op.start:op.stop] @ rate))
    rmax = op.allmax(float(rate.max()) if rate.size else 0.0)
    res = MeasureResult(method=law.method, backend=law.backend, status=law.status,
                        message=f"throughput of {label} under the long-run law ({law.message})",
                        iterations=law.iterations, residual=law.residual, wall_time=time.perf_counter() - t0,
                        info={"law": law}, value=value, values=None,
                        t=None, error_bound=law.error_bound * rmax)
    return res.check(check)
