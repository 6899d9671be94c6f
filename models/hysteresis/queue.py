r"""The :math:`M^X|G|1|r` queue with hysteretic (two-loop) overload control.

Model
-----
One server, capacity :math:`r` customers *in the system* (the one in service
included; ``capacity``, default :math:`R`). The state is :math:`(s, n)`:
:math:`n` customers present and the control mode :math:`s \in \{0, 1, 2\}`
(normal, overload, discard). Three thresholds :math:`0 \le L < H < R \le r`
form two hysteresis loops, written :math:`\langle L,H\rangle|\langle
H,R\rangle` in the literature:

* loop :math:`\langle L,H\rangle`: normal :math:`\to` overload when :math:`n`
  reaches :math:`H` (overload *onset*); overload :math:`\to` normal when
  :math:`n` falls to :math:`L` (overload *abatement*);
* loop :math:`\langle H,R\rangle`: overload :math:`\to` discard when :math:`n`
  reaches :math:`R` (*discard* threshold); discard :math:`\to` overload when
  :math:`n` falls to :math:`H`.

Batches arrive as a Poisson process of rate :math:`\lambda_0` (``lam``) in
normal mode and :math:`\lambda_1 \le \lambda_0` (``lam_overload``, the
throttled rate) in overload; nothing is admitted in discard mode. Batch sizes
:math:`X \ge 1` are i.i.d. with pmf :math:`g_k`. A batch meeting :math:`n`
customers is accepted *partially* (``acceptance="partial"``:
:math:`\min(X, r - n)` customers enter, the rest are lost) or *whole*
(``acceptance="whole"``: lost entirely unless :math:`n + X \le r`).
Service times are i.i.d. with law :math:`G` (phase-type on the CTMC route,
general on the embedded-chain route, see :mod:`models.hysteresis.service`).

Mode-decision policies (``policy``)
-----------------------------------
``"instant"`` (default)
    The mode follows the path of :math:`n`: upward switches at the arrival
    that makes :math:`n` reach :math:`H` or :math:`R` (a batch may cross both
    thresholds at once), downward ones at the departure that makes :math:`n`
    fall to :math:`L` or :math:`H`. With single arrivals the reachable states
    are :math:`(0, 0..H-1)`, :math:`(1, L+1..R-1)`, :math:`(2, H+1..R)`: the
    Markov models of Abaev, Gaidamaka, Pechinkin, Razumchik and co-authors.
``"departure-epoch"``
    Every switch is decided at a service completion, from the number of
    customers the departing one leaves behind, :math:`n^+`:
    :math:`s \mapsto 2` if :math:`n^+ \ge R`; :math:`0 \mapsto 1` if
    :math:`n^+ \ge H`; :math:`2 \mapsto 1` if :math:`n^+ \le H`;
    :math:`1 \mapsto 0` if :math:`n^+ \le L`; in between the mode is frozen
    (arrivals keep coming at the mode's rate up to the capacity). This is the
    rule "the switching can occur only on service completions" of the papers
    on :math:`M_2^{[X]}|G|1|R`. Since :math:`n^+ \le r - 1`, the discard
    mode is reached only when ``capacity > R``.

Both policies apply the two loops in sequence, so a single decision may move
:math:`2 \to 1 \to 0`.

Routes
------
``"ctmc"`` (route (a), :mod:`models.hysteresis.ctmc_route`)
    For phase-type service :math:`PH(\alpha, S)` the process
    :math:`(s, n, j)` (:math:`j` the service phase) is a CTMC, assembled by
    levels and solved exactly by the subtraction-free elimination over the
    levels of :mod:`models.hysteresis.levels` (or by any method of
    :meth:`ctmc.CTMC.stationary`, on scipy or PETSc); mean periods by
    renewal-reward from its law, state-wise return times and their law from
    :meth:`ctmc.CTMC.hitting_times` and :meth:`ctmc.CTMC.first_passage`.
``"embedded"`` (route (b), :mod:`models.hysteresis.embedded`)
    For any service law, the chain :math:`(s, n^+)` embedded at departure
    epochs, with the time-stationary law by the Markov-renewal argument and
    mean periods by renewal-reward (see that module for the maths and the
    accuracy of each service law). State-wise return times, their
    distribution (:meth:`HysteresisQueue.return_times`,
    :meth:`HysteresisQueue.return_time_cdf`) and the CTMC itself are route (a)
    only; for deterministic service use
    :func:`~models.hysteresis.service.erlang` with many phases there.

Both routes take their mode changes from one decision rule
(:func:`~models.hysteresis.law.decide`), written once for arrays and for
:mod:`ctmc.expr` expressions, and return a
:class:`~models.hysteresis.law.HysteresisLaw`; both live in
:mod:`models.hysteresis.law`. This module holds the contract: validation, the
public measures, and the dispatch to the routes (the registry of route
solvers).

Measures
--------
From the time-stationary law :math:`p(s, n)` (Poisson arrivals see time
averages):

    * customer loss: the source offers :math:`\lambda_0 E[X]` customers per
      unit time in every mode; a customer is lost if throttled (overload),
      discarded, or rejected for lack of room. The loss is summed from the
      lost customers state by state, :math:`\sum_{s,n} p(s,n)(\lambda_0 E[X]
      - \lambda_s E[\text{admitted} \mid n]) / (\lambda_0 E[X])` with the
      bracket computed from the lost amounts themselves, never as :math:`1 -
      \text{accepted}/\text{offered}`: losses of :math:`10^{-30}` keep their
      relative accuracy (:meth:`HysteresisQueue.loss_breakdown`);
    * batch loss: fraction of offered batches not admitted in full (summed
      the same way);
    * mean number in system, mean sojourn time of accepted customers (Little);
    * return time: from entering the overload set :math:`\{s \ne 0\}` (the
      entrance law is the stationary flow across its boundary) until the
      normal mode again, discard excursions included; normal period; control
      cycle :math:`=` normal period :math:`+` return time; time in discard.

References
----------
Yu. Gaidamaka, A. Pechinkin, R. Razumchik, K. Samouylov, E. Sopin, "Analysis
of an M|G|1|R queue with batch arrivals and two hysteretic overload control
policies", Int. J. Appl. Math. Comput. Sci. 24(3):519-534 (2014),
doi:10.2478/amcs-2014-0038. E. S. Sopin, "Analysis of the M|G|1|r model with
batch arrivals and hysteretic load control", Bulletin of PFUR (Mathematics,
Information Sciences, Physics). P. Abaev, A. Pechinkin, R. Razumchik, papers
on :math:`M_2|M|1|R` and :math:`M_2|D|1|R` with bi-level hysteretic control
(ICUMT 2012; CCIS 356, 2013). See ``docs/literature/hysteresis.md`` for what
could and could not be checked against them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import ctmc_route, embedded
from .law import HysteresisLaw
from .service import BatchSize, PhaseType, as_batch, as_service

__all__ = ["HysteresisQueue", "HysteresisLaw", "POLICIES", "ACCEPTANCE", "ROUTES"]

MODES = ("normal", "overload", "discard")
BACKENDS = ("scipy", "petsc")


# ---------------------------------------------------------------------------
# registries: policies, acceptance rules, routes
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Policy:
    """A mode-decision policy: whether arrivals trigger (upward) decisions.

    Departures always trigger a decision (:func:`~models.hysteresis.law.decide` on the level left).
    """

    name: str
    on_arrival: bool
    doc: str


POLICIES = {
    "instant": Policy(name="instant", on_arrival=True,
                      doc="switch at the arrival or departure that crosses a threshold"),
    "departure-epoch": Policy(name="departure-epoch", on_arrival=False,
                              doc="switch only at service completions"),
}
_POLICY_ALIASES = {"departure": "departure-epoch", "departure_epoch": "departure-epoch"}


@dataclass(frozen=True)
class Acceptance:
    """Batch acceptance: ``admit(n, k, r) -> (new level, admitted?)`` (vectorised)."""

    name: str
    admit: Callable
    doc: str


def _partial(n, k, r, minimum=np.minimum):
    return minimum(n + k, r), n < r


def _whole(n, k, r, minimum=None):
    return n + k, n + k <= r


ACCEPTANCE = {
    "partial": Acceptance(name="partial", admit=_partial, doc="accept min(X, r - n), lose the rest"),
    "whole": Acceptance(name="whole", admit=_whole, doc="lose the whole batch unless it fits"),
}
_ACCEPT_ALIASES = {"whole-batch": "whole", "whole_batch": "whole", "complete": "whole"}


@dataclass(frozen=True)
class Route:
    """A solution route: what the queue's measures ask of it.

    ``stationary_law(q)`` returns the :class:`~models.hysteresis.law.HysteresisLaw`,
    ``switch_rates(q)`` the stationary rates of mode changes, ``mean_stay(q, modes)``
    the mean time from entering the set of ``modes`` until leaving it; ``q``
    is the :class:`HysteresisQueue`.
    """

    name: str
    stationary_law: Callable
    switch_rates: Callable
    mean_stay: Callable
    doc: str


def _ctmc_mean_stay(q, modes):
    return ctmc_route.mean_stay(q, ctmc_route.mode_mask(q, modes))


_SOLVERS = {
    "ctmc": Route(name="ctmc", stationary_law=ctmc_route.stationary_law,
                  switch_rates=ctmc_route.switch_rates, mean_stay=_ctmc_mean_stay,
                  doc="the exact CTMC on (mode, n, phase), phase-type service"),
    "embedded": Route(name="embedded", stationary_law=embedded.stationary_law,
                      switch_rates=embedded.switch_rates, mean_stay=embedded.mean_stay,
                      doc="the chain embedded at departure epochs, any service law"),
}
ROUTES = ("auto", *_SOLVERS)


def _int(name, v, lo=None):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{name}: expected an integer, got {v!r}")
    v = int(v)
    if lo is not None and v < lo:
        raise ValueError(f"{name}: must be >= {lo}, got {v}")
    return v


def _rate(name, v, allow_zero=False):
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a rate (number), got {v!r}") from None
    ok = np.isfinite(x) and (x >= 0 if allow_zero else x > 0)
    if not ok:
        raise ValueError(f"{name}: must be finite and {'>= 0' if allow_zero else '> 0'}, got {v!r}")
    return x


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------
class HysteresisQueue:
    r"""The :math:`M^X|G|1|r` queue with hysteretic overload control.

    The literature's symbol for each parameter is given in brackets.

    Parameters
    ----------
    L : int
        Overload abatement threshold [:math:`L`]: overload ends when the
        number in system falls to ``L``. ``0 <= L < H``.
    H : int
        Overload onset threshold [:math:`H`]; also the level at which discard
        mode returns to overload. ``L < H < R``.
    R : int
        Discard threshold [:math:`R`]: discard mode starts when the number in
        system reaches ``R``. ``R <= capacity``.
    lam : float
        Batch arrival rate in normal mode [:math:`\lambda_0`, or
        :math:`\lambda_1 + \lambda_2` in the two-flow papers], > 0.
    lam_overload : float
        Batch arrival rate in overload mode (throttled) [:math:`\lambda_1`],
        ``0 <= lam_overload <= lam``. Discard mode admits nothing. In the
        two-flow variant (only the priority flow admitted in overload) this is
        the priority flow's rate; see :meth:`loss_by_flow`.
    mu : float, default 1.0
        Service rate [:math:`\mu`] used when ``service`` is None.
    capacity : int, optional
        Maximal number in the system including the one in service
        [:math:`r`; the papers' :math:`R`, "a queue of size R - 1"]. Default
        ``R``.
    batch : None, BatchSize, dict or array, optional
        Batch-size law [:math:`g_k = P(X = k)`]: None (single arrivals), a
        :class:`~models.hysteresis.service.BatchSize`, ``{size: prob}`` or a
        pmf over sizes ``1, 2, ...``. Must sum to 1.
    service : optional
        Service law [:math:`G`, :math:`B(x)` in the papers]: None
        (exponential, rate ``mu``), a phase-type law (both routes) or a
        deterministic / general law (embedded route only); see
        :mod:`models.hysteresis.service`.
    policy : {"instant", "departure-epoch"}
        When the mode is decided (see the module docstring).
    acceptance : {"partial", "whole"}
        Batch acceptance when the batch does not fit.
    counting : {"system", "queue"}, keyword-only
        What ``L``, ``H``, ``R`` and ``capacity`` count: customers in the
        system (default) or waiting places (the one in service excluded;
        internally each value is then increased by 1).
    backend : {"scipy", "petsc"}, keyword-only
        Where route (a) solves its chain. ``"scipy"`` (default): the exact
        elimination over the levels (:mod:`models.hysteresis.levels`).
        ``"petsc"``: :meth:`ctmc.CTMC.stationary` on the PETSc backend
        (run the script under ``mpirun -n P``; each process holds a block of
        rows, the law is gathered on every process, so every measure comes out
        on every process); the embedded route is unaffected.

    Attributes
    ----------
    L, H, R, capacity : int
        The thresholds and capacity counted *in the system*, as the model
        uses them: with ``counting="queue"`` each is the given value plus 1
        (``repr`` shows the given values and the convention).

    Raises
    ------
    ValueError
        Thresholds out of order or above the capacity, a rate out of range,
        a pmf that does not sum to 1, an invalid phase-type representation,
        an unknown policy, acceptance rule or convention.

    Examples
    --------
    M|M|1 with hysteresis, thresholds L = 2, H = 5, R = 8:

    >>> from ctmc.models.hysteresis import HysteresisQueue
    >>> q = HysteresisQueue(2, 5, 8, lam=1.2, lam_overload=0.6, mu=1.0)
    >>> q.chain().n_states            # (0, 0..4), (1, 3..7), (2, 6..8)
    13
    >>> normal, overload, discard = q.mode_probabilities()
    >>> round(normal + overload + discard, 12)
    1.0
    >>> q.mean_cycle() > q.mean_return_time() > 0
    True
    """

    def __init__(self, L, H, R, lam, lam_overload, mu=1.0, capacity=None, batch=None, service=None,
                 policy="instant", acceptance="partial", *, counting="system", backend="scipy"):
        L = _int("L", L, 0)
        H = _int("H", H)
        R = _int("R", R)
        if counting not in ("system", "queue"):
            raise ValueError(f"counting: expected 'system' or 'queue', got {counting!r}")
        cap = R if capacity is None else _int("capacity", capacity)
        if not L < H:
            raise ValueError(f"H: overload onset threshold must exceed L = {L}, got H = {H}")
        if not H < R:
            raise ValueError(f"R: discard threshold must exceed H = {H}, got R = {R}")
        if cap < R:
            raise ValueError(f"capacity: must be >= R = {R}, got {cap}")
        shift = 1 if counting == "queue" else 0
        self.L, self.H, self.R, self.capacity = L + shift, H + shift, R + shift, cap + shift
        self.counting = counting
        self.lam = _rate("lam", lam)
        self.lam_overload = _rate("lam_overload", lam_overload, allow_zero=True)
        if self.lam_overload > self.lam:
            raise ValueError(f"lam_overload: the throttled rate must be <= lam = {self.lam}, "
                             f"got {self.lam_overload}")
        self.mu = _rate("mu", mu)
        pol = _POLICY_ALIASES.get(policy, policy)
        if pol not in POLICIES:
            raise ValueError(f"policy: expected one of {sorted(POLICIES)}, got {policy!r}")
        acc = _ACCEPT_ALIASES.get(acceptance, acceptance)
        if acc not in ACCEPTANCE:
            raise ValueError(f"acceptance: expected one of {sorted(ACCEPTANCE)}, got {acceptance!r}")
        self.policy = POLICIES[pol]
        self.acceptance = ACCEPTANCE[acc]
        self.batch: BatchSize = as_batch(batch)
        self.service = as_service(service, self.mu)
        if backend not in BACKENDS:
            raise ValueError(f"backend: expected one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        self._chain = None
        self._laws = {}
        self._pi = None

    # -- basic quantities ----------------------------------------------------
    @property
    def rates(self) -> np.ndarray:
        """Batch arrival rate per mode ``(lam, lam_overload, 0)``."""
        return np.array([self.lam, self.lam_overload, 0.0])

    @property
    def is_phase_type(self) -> bool:
        return isinstance(self.service, PhaseType)

    def __repr__(self) -> str:
        # the user's values: with counting="queue" the attributes are shifted by one
        k = 1 if self.counting == "queue" else 0
        extra = ", counting='queue'" if k else ""
        return (f"HysteresisQueue(L={self.L - k}, H={self.H - k}, R={self.R - k}, "
                f"capacity={self.capacity - k}, lam={self.lam:g}, lam_overload={self.lam_overload:g}, "
                f"batch={self.batch.name}, service={self.service.name}, policy={self.policy.name!r}, "
                f"acceptance={self.acceptance.name!r}{extra})")

    def batch_pmf(self) -> np.ndarray:
        """Batch pmf over 1..r+1 (larger batches behave like r + 1 under both rules).

        Returns
        -------
        ndarray
            ``g[k - 1] = P(X = k)`` for ``k = 1..m``, ``m`` the smaller of the
            largest batch size and ``r + 1``, the mass of the larger sizes
            lumped into the last entry; both routes build their arrivals from it.
        """
        return self.batch.lumped(min(self.batch.pmf.size, self.capacity + 1))

    def _route(self, route: str) -> str:
        if route not in ROUTES:
            raise ValueError(f"route: expected one of {ROUTES}, got {route!r}")
        if route == "auto":
            return "ctmc" if self.is_phase_type else "embedded"
        if route == "ctmc" and not self.is_phase_type:
            raise ValueError(f"route: 'ctmc' needs phase-type service, got {self.service.name}; use "
                             "route='embedded', or erlang(k) to approximate deterministic service")
        return route

    # -- route (a): the CTMC (models.hysteresis.ctmc_route) ----------------------
    def model(self):
        """The :class:`ctmc.Model` on ``(mode, n, phase)`` (phase-type service only)."""
        self._route("ctmc")
        return ctmc_route.build_model(self)

    def chain(self):
        """The exact CTMC of route (a) (built once, cached).

        States are ``(mode, n, phase)``; only states reachable from the empty
        system are kept.

        Returns
        -------
        ctmc.CTMC
        """
        if self._chain is None:
            self._route("ctmc")
            self._chain = ctmc_route.build_chain(self)
        return self._chain

    def stationary_ctmc(self, method=None, *, bound: bool = False):
        """The stationary law of :meth:`chain` (solved once per method, cached).

        Parameters
        ----------
        method : str, optional
            ``"levels"`` (the default on the scipy backend): the
            subtraction-free elimination over the levels of
            :mod:`models.hysteresis.levels`, exact, seconds for :math:`10^5`-:math:`10^6`
            states with any batch law; or a method of :meth:`ctmc.CTMC.stationary`,
            run on the queue's ``backend`` (default ``"auto"`` on PETSc).
            The measures use the default method's law.
        bound : bool, keyword-only
            With ``"levels"``: also compute ctmc's proven bound on the 1-norm error of the
            law (``error_bound``, graded against ``error_tol``; see
            :func:`~models.hysteresis.ctmc_route.level_stationary`). Default False:
            ``error_bound`` is NaN, the balance error is the evidence. A result with the
            bound also serves later calls without it (the law is the same).

        Returns
        -------
        ctmc.StationaryResult
            On the states ``(mode, n, phase)`` of the CTMC; :meth:`stationary`
            sums it to ``(mode, n)``.
        """
        if not isinstance(bound, (bool, np.bool_)):
            raise ValueError(f"bound: expected True or False, got {bound!r}")
        key = "default" if method is None else method
        if self._pi is None:
            self._pi = {}
        if (key, True) in self._pi and not bound:
            return self._pi[key, True]
        if (key, bool(bound)) not in self._pi:
            self._pi[key, bool(bound)] = ctmc_route.solve_stationary(self, method, bound=bool(bound))
        return self._pi[key, bool(bound)]

    # -- the law -------------------------------------------------------------------
    def stationary(self, route: str = "auto") -> HysteresisLaw:
        """Time-stationary law of (mode, number in system) by the chosen route.

        Parameters
        ----------
        route : {"auto", "ctmc", "embedded"}
            "auto": the CTMC for phase-type service, else the embedded chain.
        """
        route = self._route(route)
        if route not in self._laws:
            self._laws[route] = _SOLVERS[route].stationary_law(self)
        return self._laws[route]

    def distribution(self, route: str = "auto") -> np.ndarray:
        """``p[s, n]``, shape ``(3, top + 1)``, ``top <= capacity`` (see :class:`HysteresisLaw`)."""
        return self.stationary(route).p

    def mode_probabilities(self, route: str = "auto") -> np.ndarray:
        """Stationary probabilities of the (normal, overload, discard) modes."""
        return self.stationary(route).modes

    # -- customer measures ---------------------------------------------------------
    def _admission(self, levels):
        """Per level n < ``levels``, for one batch arriving in a mode that admits: mean customers
        admitted, mean customers lost for lack of room, P(batch not admitted in full).

        The last two are summed from the lost customers themselves (no ``1 - ...``),
        so small losses keep their relative accuracy.
        """
        r = self.capacity
        n = np.arange(levels)
        g = self.batch_pmf()
        mean_in = np.zeros(levels)
        mean_lost = np.zeros(levels)
        cut = np.zeros(levels)
        for k, gk in enumerate(g, start=1):
            n_new, ok = self.acceptance.admit(n, k, r)
            enter = np.where(ok, n_new - n, 0)
            mean_in += gk * enter
            mean_lost += gk * (k - enter)
            cut += gk * (enter < k)
        return mean_in, mean_lost, cut

    def offered_rate(self) -> float:
        """Customers offered per unit time, ``lam * E[X]`` (the source's rate in every mode)."""
        return self.lam * self.batch.mean

    def accepted_rate(self, route: str = "auto") -> float:
        """Customers admitted per unit time (equals the throughput)."""
        p = self.distribution(route)
        mean_in, _, _ = self._admission(p.shape[1])
        return float(self.rates @ p @ mean_in)

    def throughput(self, route: str = "auto") -> float:
        """Service completions per unit time, ``P(N >= 1) / E[service]``."""
        pn = self.distribution(route).sum(axis=0)
        return float((1 - pn[0]) / self.service.mean)

    def loss_probability(self, route: str = "auto") -> float:
        """Fraction of offered customers lost (throttled, discarded or rejected for room).

        Summed from the lost customers state by state (:meth:`loss_breakdown`),
        not as ``1 - accepted/offered``: small losses keep their relative accuracy.
        """
        return self.loss_breakdown(route)["total"]

    def loss_breakdown(self, route: str = "auto") -> dict:
        r"""Loss probability split by cause (fractions of the offered customers).

        Keys: ``"throttled"`` (overload mode, rate ``lam - lam_overload``),
        ``"discarded"`` (discard mode), ``"overflow"`` (admitted batch without
        room), ``"total"``. Every term is a sum of non-negative per-state lost
        amounts, :math:`\sum_{s,n} p(s,n)\,(\lambda_0 E[X] - \lambda_s\,
        E[\text{admitted} \mid n]) / (\lambda_0 E[X])`.
        """
        p = self.distribution(route)
        _, mean_lost, _ = self._admission(p.shape[1])
        pm = p.sum(axis=1)
        thr = pm[1] * (self.lam - self.lam_overload) / self.lam
        dis = pm[2]
        over = float(self.rates @ p @ mean_lost) / self.lam / self.batch.mean
        return {"throttled": float(thr), "discarded": float(dis), "overflow": over,
                "total": float(thr + dis + over)}

    def loss_by_flow(self, route: str = "auto") -> dict:
        """Customer loss of each flow in the two-flow reading of the model.

        In the :math:`M_2` papers two Poisson flows share the server: in normal
        mode both are admitted, in overload only the priority flow, in discard
        neither. This is the same chain with ``lam_overload`` the priority
        flow's batch rate and ``lam - lam_overload`` the other flow's (same
        batch law). Returns ``{"priority": ..., "other": ...}``, each summed
        from that flow's lost customers (modes that refuse it, plus batches cut
        for lack of room).
        """
        p = self.distribution(route)
        _, mean_lost, _ = self._admission(p.shape[1])
        ex = self.batch.mean
        pm = p.sum(axis=1)
        over0 = float(p[0] @ mean_lost) / ex
        over1 = float(p[1] @ mean_lost) / ex
        return {"priority": float(pm[2] + over0 + over1), "other": float(pm[1] + pm[2] + over0)}

    def batch_loss_probability(self, route: str = "auto") -> float:
        """Fraction of offered batches not admitted in full (summed from the refused ones)."""
        p = self.distribution(route)
        _, _, cut = self._admission(p.shape[1])
        pm = p.sum(axis=1)
        refused = pm[1] * (self.lam - self.lam_overload) / self.lam + pm[2]
        return float(refused + self.rates @ p @ cut / self.lam)

    def mean_number_in_system(self, route: str = "auto") -> float:
        """``E[N]``, the mean number of customers in the system."""
        pn = self.distribution(route).sum(axis=0)
        return float(np.arange(pn.size) @ pn)

    def mean_queue_length(self, route: str = "auto") -> float:
        """``E[(N - 1)^+]``, the mean number of customers waiting (not in service)."""
        pn = self.distribution(route).sum(axis=0)
        return float(np.maximum(np.arange(pn.size) - 1, 0) @ pn)

    def mean_sojourn_time(self, route: str = "auto") -> float:
        """Mean time an admitted customer spends in the system (Little's law)."""
        return self.mean_number_in_system(route) / self.accepted_rate(route)

    # -- passage-time measures ---------------------------------------------------
    # Route "ctmc": renewal-reward from the law and the flows of the generator.
    # Route "embedded": renewal-reward, E[period in a set] = P(set) / (rate of
    # exits from the set); exits from the overload and discard sets happen only
    # at departures, whose rates the embedded chain gives.
    def switch_rates(self, route: str = "auto") -> np.ndarray:
        """Stationary rates of mode changes: ``[a, b]`` = changes from mode a to mode b per unit time.

        Route "ctmc": from the stationary law and the generator. Route
        "embedded": changes at departures from the embedded chain, plus (instant
        policy) the upward changes at arrivals from the time-stationary law.
        """
        return _SOLVERS[self._route(route)].switch_rates(self)

    def _stay(self, modes, route):
        return _SOLVERS[self._route(route)].mean_stay(self, modes)

    def mean_return_time(self, route: str = "auto") -> float:
        """Mean time from entering overload until the normal mode again (discard excursions included).

        Route "ctmc" (default for phase-type service): the mean of the hitting
        times of the normal set under the stationary entrance law into
        ``{overload, discard}``, by renewal-reward ``P(overload or discard) /
        (stationary flow into it)``. Route "embedded" (any service law):
        ``P(overload or discard) / (rate of returns to normal)``.
        """
        return self._stay([1, 2], route)

    def mean_overload_period(self, route: str = "auto") -> float:
        """Alias of :meth:`mean_return_time` (the overload period of the papers)."""
        return self.mean_return_time(route)

    def mean_normal_period(self, route: str = "auto") -> float:
        """Mean time from returning to normal mode until the next overload onset."""
        return self._stay([0], route)

    def mean_discard_time(self, route: str = "auto") -> float:
        """Mean length of a discard period (NaN if discard mode is never entered).

        With ``policy="departure-epoch"`` and ``capacity == R`` the discard
        mode is unreachable (a departure leaves at most ``R - 1`` customers,
        below the discard threshold), so its probability is 0 and this is NaN;
        give ``capacity > R`` for a reachable discard mode.
        """
        return self._stay([2], route)

    def mean_cycle(self, route: str = "auto") -> float:
        """Mean control cycle: a normal period plus the following overload period."""
        return self.mean_normal_period(route) + self.mean_return_time(route)

    def mean_time_between_mode_changes(self, route: str = "auto") -> float:
        """``1 / (stationary rate of mode changes)``; a jump across both loops counts once."""
        return float(1.0 / self.switch_rates(route).sum())

    def return_times(self):
        """Mean return time to normal mode from every overload/discard state.

        Returns
        -------
        dict
            ``mode``, ``n``, ``phase`` and ``mean`` arrays over the states with
            mode 1 or 2 (from :meth:`ctmc.CTMC.hitting_times`).
        """
        return ctmc_route.return_times(self)

    def return_time_cdf(self, t) -> np.ndarray:
        """``P(T_return <= t)`` from the stationary entrance law into overload.

        Uses :meth:`ctmc.CTMC.first_passage` (uniformisation).
        """
        return ctmc_route.return_time_cdf(self, t)

    def return_time_laplace(self, s) -> np.ndarray:
        """Laplace-Stieltjes transform ``E[exp(-s T_return)]`` from the entrance law into overload.

        Uses :meth:`ctmc.CTMC.hitting_laplace` (route "ctmc"); ``s`` is a
        number or an array of numbers >= 0.
        """
        return ctmc_route.return_time_laplace(self, s)

    def summary(self, route: str = "auto") -> dict:
        """The main measures as a dict."""
        route = self._route(route)
        law = self.stationary(route)
        out = {"route": route, "status": law.status, "residual": law.residual,
               "P(normal)": law.modes[0], "P(overload)": law.modes[1], "P(discard)": law.modes[2],
               "loss": self.loss_probability(route), "batch loss": self.batch_loss_probability(route),
               "E[N]": self.mean_number_in_system(route),
               "E[queue]": self.mean_queue_length(route), "E[sojourn]": self.mean_sojourn_time(route)}
        out.update({"E[return time]": self.mean_return_time(route),
                    "E[normal period]": self.mean_normal_period(route),
                    "E[cycle]": self.mean_cycle(route),
                    "E[discard time]": self.mean_discard_time(route)})
        return out

