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
``"ctmc"`` (route (a))
    For phase-type service :math:`PH(\alpha, S)` the process
    :math:`(s, n, j)` (:math:`j` the service phase) is a CTMC, built with
    :class:`ctmc.Model` and solved exactly; passage-time measures come from
    :meth:`ctmc.CTMC.hitting_times` and :meth:`ctmc.CTMC.first_passage`.
``"embedded"`` (route (b))
    For any service law, the chain :math:`(s, n^+)` embedded at departure
    epochs. During a service the process moves only up (arrivals, and for the
    instant policy upward mode switches) with generator :math:`A`; by
    uniformisation at rate :math:`\Lambda = \max(\lambda_0, \lambda_1)`,
    :math:`P = I + A/\Lambda`,

    .. math::

        \int_0^\infty e^{At} dG(t) = \sum_k a_k P^k, \qquad
        \int_0^\infty e^{At} (1 - G(t))\, dt = \sum_k b_k P^k

    with the Poisson mixing coefficients :math:`a_k, b_k` of :math:`G`. The
    first gives the transitions (then one departure, and the policy's
    decision), the second the expected time spent in each :math:`(s, n)`
    during a service. For phase-type service both integrals are computed
    exactly instead, by a block back-substitution over the levels (see
    :meth:`HysteresisQueue._ph_service_matrices`); for deterministic service
    the series runs until its tail is below 1e-300. All terms being
    non-negative, and the embedded chain being solved by GTH, probabilities
    far below 1e-16 then keep their relative accuracy. For a general law
    given by a CDF the :math:`b_k` come from quadrature and the accuracy is
    absolute only (about 1e-13; :attr:`HysteresisLaw.message` says so).

    By the Markov-renewal argument the time-stationary law is

    .. math::

        p(y) = \frac{\sum_x \pi^d(x)\, E_x[\text{time in } y \text{ before the next departure}]}
                    {\sum_x \pi^d(x)\, E_x[\text{time to the next departure}]},

    where from :math:`n^+ = 0` the interval holds an idle period of mean
    :math:`1/(\lambda_0 P(\text{batch admitted}))` followed by a service. It
    supports both policies and both acceptance rules. Mean periods come from
    renewal-reward: the overload and discard periods end only at departures,
    so :math:`E[\text{period}] = P(\text{set}) / \nu`, with :math:`\nu`
    the rate of departures that take the mode out of the set. State-wise
    return times, their distribution (:meth:`HysteresisQueue.return_times`,
    :meth:`HysteresisQueue.return_time_cdf`) and the CTMC itself are route (a)
    only; for deterministic service use
    :func:`~models.hysteresis.service.erlang` with many phases there.

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

import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import scipy.sparse as sp

from .service import BatchSize, Deterministic, PhaseType, as_batch, as_service

__all__ = ["HysteresisQueue", "HysteresisLaw", "POLICIES", "ACCEPTANCE", "ROUTES"]

MODES = ("normal", "overload", "discard")
_EMBEDDED_MAX_CAPACITY = 1000


# ---------------------------------------------------------------------------
# registries: policies, acceptance rules, routes
# ---------------------------------------------------------------------------
def _decide(where, s, n, L, H, R):
    """Mode after a decision at level ``n`` from mode ``s`` (both loops, in turn).

    ``where`` is :func:`numpy.where` or :func:`ctmc.expr.where`, so the same
    rule serves the CTMC builder and the embedded chain.
    """
    up = where(n >= R, 2, where((s == 0) & (n >= H), 1, s))
    down = where((up == 2) & (n <= H), 1, up)
    return where((down == 1) & (n <= L), 0, down)


def _mmatrix_inverse(B, slack):
    """Inverse of a row-diagonally-dominant M-matrix without subtractions.

    ``B`` has non-positive off-diagonal entries and row sums ``slack >= 0``
    (given, not recomputed). Gaussian elimination without pivoting keeps the
    sign pattern; each pivot is recomputed as the row's slack plus its
    remaining off-diagonal magnitudes (the GTH trick), so every entry of the
    inverse is a sum of non-negative terms, accurate in relative terms.
    """
    B = np.array(B, dtype=float)
    m = B.shape[0]
    slack = np.array(slack, dtype=float)
    Linv = np.eye(m)                       # accumulates the row operations
    for k in range(m):
        off = -np.delete(B[k, k:], 0).sum() if k + 1 < m else 0.0
        B[k, k] = slack[k] + off
        for i in range(k + 1, m):
            if B[i, k] != 0:
                f = -B[i, k] / B[k, k]     # >= 0
                B[i, k + 1:] += f * B[k, k + 1:]
                B[i, k] = 0.0
                slack[i] += f * slack[k]
                Linv[i] += f * Linv[k]
    # back substitution of U X = Linv, with U upper triangular (off-diagonal <= 0)
    X = np.zeros((m, m))
    for k in range(m - 1, -1, -1):
        X[k] = (Linv[k] - B[k, k + 1:] @ X[k + 1:]) / B[k, k]
    return X


@dataclass(frozen=True)
class Policy:
    """A mode-decision policy: whether arrivals trigger (upward) decisions.

    Departures always trigger a decision (:func:`_decide` on the level left).
    """

    name: str
    on_arrival: bool
    doc: str


POLICIES = {
    "instant": Policy("instant", True, "switch at the arrival or departure that crosses a threshold"),
    "departure-epoch": Policy("departure-epoch", False, "switch only at service completions"),
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
    "partial": Acceptance("partial", _partial, "accept min(X, r - n), lose the rest"),
    "whole": Acceptance("whole", _whole, "lose the whole batch unless it fits"),
}
_ACCEPT_ALIASES = {"whole-batch": "whole", "whole_batch": "whole", "complete": "whole"}

ROUTES = ("auto", "ctmc", "embedded")


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
# results
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class HysteresisLaw:
    """Time-stationary law of (mode, number in system).

    Attributes
    ----------
    p : ndarray, shape (3, r + 1)
        ``p[s, n]``: probability of mode ``s`` (0 normal, 1 overload, 2
        discard) with ``n`` customers in the system.
    route : str
        ``"ctmc"`` or ``"embedded"``.
    status : str
        ``"success"`` or the reason it is not.
    residual : float
        ``||pi Q||_1`` of the CTMC (route ctmc) or ``||pi (P - I)||_1`` of the
        embedded chain (route embedded).
    wall_time : float
    info : dict
        ``n_states``, solver method, truncation mass of the Poisson mixing,
        ``accuracy`` (``"relative"`` or ``"absolute"``), ...
    message : str
        How the law was computed and how small probabilities can be trusted:
        route "ctmc" and route "embedded" with phase-type or deterministic
        service resolve probabilities far below 1e-16 in relative terms; a
        general law given by a CDF (quadrature) only to about 1e-13 absolute.
    """

    p: np.ndarray
    route: str
    status: str
    residual: float
    wall_time: float
    info: dict = field(default_factory=dict, repr=False)
    message: str = ""

    @property
    def marginal_n(self) -> np.ndarray:
        """``P(N = n)``, ``n = 0..r``."""
        return self.p.sum(axis=0)

    @property
    def modes(self) -> np.ndarray:
        """``P(mode = s)``, ``s = 0, 1, 2``."""
        return self.p.sum(axis=1)


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

    >>> from models.hysteresis import HysteresisQueue
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
                 policy="instant", acceptance="partial", *, counting="system"):
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

    def _batch_pmf(self) -> np.ndarray:
        """Batch pmf over 1..r+1 (larger batches behave like r + 1 under both rules)."""
        return self.batch.lumped(min(self.batch.pmf.size, self.capacity + 1))

    def _route(self, route: str) -> str:
        if route not in ROUTES:
            raise ValueError(f"route: expected one of {ROUTES}, got {route!r}")
        if route == "auto":
            return "ctmc" if self.is_phase_type else "embedded"
        if route == "ctmc" and not self.is_phase_type:
            raise ValueError(f"route: 'ctmc' needs phase-type service, got {self.service.name}; use "
                             "route='embedded', or erlang(k) to approximate deterministic service")
        if route == "embedded" and self.capacity > _EMBEDDED_MAX_CAPACITY:
            raise ValueError(f"route: 'embedded' uses dense matrices of order 3(r+1); capacity must be "
                             f"<= {_EMBEDDED_MAX_CAPACITY}, got {self.capacity} (use route='ctmc')")
        return route

    # -- route (a): the CTMC ---------------------------------------------------
    def model(self):
        """The :class:`ctmc.Model` on ``(mode, n, phase)`` (phase-type service only)."""
        import ctmc
        from ctmc.expr import minimum, where

        self._route("ctmc")
        ph = self.service
        L, H, R, r = self.L, self.H, self.R, self.capacity
        m = ctmc.Model("hysteresis")
        # level first: states of neighbouring levels get neighbouring numbers (a
        # banded generator, which keeps the sparse LU fill small)
        n = m.var("n", 0, r)
        s = m.var("mode", 0, 2)
        j = m.var("phase", 0, ph.n_phases - 1)
        lam_s = where(s == 0, self.lam, where(s == 1, self.lam_overload, 0.0))
        alpha, S0 = ph.alpha, ph.exit_rates
        starts = np.flatnonzero(alpha > 0)
        for k, gk in enumerate(self._batch_pmf(), start=1):
            if gk == 0:
                continue
            n_new, ok = self.acceptance.admit(n, k, r, minimum)
            s_new = _decide(where, s, n_new, L, H, R) if self.policy.on_arrival else s
            m.event(f"arrival_{k}", guard=ok & (n >= 1), rate=lam_s * gk, update={s: s_new, n: n_new})
            for jj in starts:
                m.event(f"arrival_{k}_start_{jj}", guard=ok & (n == 0), rate=lam_s * (gk * alpha[jj]),
                        update={s: s_new, n: n_new, j: int(jj)})
        off = ph.S - np.diag(np.diag(ph.S))
        for jj in np.flatnonzero(off.any(axis=0)):
            col = off[:, jj].copy()
            m.event(f"phase_to_{jj}", guard=(n >= 1) & (j != int(jj)),
                    rate=lambda env, c=col: c[env["phase"]], update={j: int(jj)})
        m.event("departure_last", guard=n == 1, rate=lambda env: S0[env["phase"]],
                update={n: 0, j: 0, s: _decide(where, s, 0, L, H, R)})
        for jj in starts:
            m.event(f"departure_start_{jj}", guard=n >= 2,
                    rate=lambda env, a=alpha[jj]: S0[env["phase"]] * a,
                    update={n: n - 1, j: int(jj), s: _decide(where, s, n - 1, L, H, R)})
        return m

    def chain(self):
        """The exact CTMC of route (a) (built once, cached).

        States are ``(mode, n, phase)``; only states reachable from the empty
        system are kept.

        Returns
        -------
        ctmc.CTMC
        """
        if self._chain is None:
            self._chain = self.model().build(initial={"mode": 0, "n": 0, "phase": 0}, progress=False)
        return self._chain

    def _stationary_ctmc(self):
        if self._pi is None:
            self._pi = self.chain().stationary()
        return self._pi

    # -- route (b): the embedded chain -----------------------------------------
    def _service_period(self):
        """Generator ``A`` of the level/mode process during one service, on index s*(r+1)+n."""
        r = self.capacity
        N = 3 * (r + 1)
        s = np.repeat(np.arange(3), r + 1)
        n = np.tile(np.arange(r + 1), 3)
        lam_s = self.rates[s]
        rows, cols, vals = [], [], []
        for k, gk in enumerate(self._batch_pmf(), start=1):
            if gk == 0:
                continue
            n_new, ok = self.acceptance.admit(n, k, r)
            s_new = _decide(np.where, s, n_new, self.L, self.H, self.R) if self.policy.on_arrival else s
            dst = s_new * (r + 1) + n_new
            sel = ok & (lam_s > 0) & (n >= 1) & (dst != np.arange(N))
            rows.append(np.flatnonzero(sel))
            cols.append(dst[sel])
            vals.append(lam_s[sel] * gk)
        R = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(N, N))
        A = R - sp.diags(np.asarray(R.sum(axis=1)).ravel())
        return A.tocsr(), s, n

    def _ph_service_matrices(self, A, level):
        r"""Exact :math:`\int e^{At} dG(t)` and :math:`\int e^{At}(1 - G(t)) dt` for PH service.

        With :math:`W_x = \int_0^\infty e^{St}c \otimes e_x e^{At}\,dt`
        (:math:`c = s_0` or :math:`\mathbf 1`), the backward equation gives
        :math:`(d_x I - S) W_x = c\, e_x^T + \sum_{y \ne x} A_{xy} W_y`
        (:math:`d_x = -A_{xx}`), and the matrices have rows :math:`\alpha W_x`.
        Every arrival raises the level, so the :math:`W_x` follow from the top
        level down; :math:`(d_x I - S)^{-1} \ge 0` is formed without
        subtractions (:func:`_mmatrix_inverse`) and every other step adds
        non-negative terms, so even the smallest entries keep their relative
        accuracy (a truncated Poisson series gives them only to about 1e-15
        absolute). Columns are done in blocks to bound the memory.
        """
        ph = self.service
        m, N = ph.n_phases, A.shape[0]
        A = A.tocsr()
        diag = -A.diagonal()
        c = np.stack([ph.exit_rates, np.ones(m)], axis=1)          # (m, 2)
        inverses = {}
        order = np.argsort(-level, kind="stable")                    # top level first
        Ma = np.empty((N, N))
        Mb = np.empty((N, N))
        width = max(1, min(N, int(2.5e7 // (N * m * 2))))           # about 200 MB of W
        for c0 in range(0, N, width):
            cols = np.arange(c0, min(N, c0 + width))
            W = np.zeros((N, m, 2, cols.size))
            for x in order:
                lo, hi = A.indptr[x], A.indptr[x + 1]
                nb, rates = A.indices[lo:hi], A.data[lo:hi]
                off = nb != x
                rhs = (np.tensordot(rates[off], W[nb[off]], axes=1) if off.any()
                       else np.zeros((m, 2, cols.size)))
                if c0 <= x < c0 + cols.size:
                    rhs[:, :, x - c0] += c
                key = float(diag[x])
                if key not in inverses:
                    inverses[key] = _mmatrix_inverse(key * np.eye(m) - ph.S, ph.exit_rates + key)
                W[x] = np.tensordot(inverses[key], rhs, axes=1)
            out = np.tensordot(ph.alpha, W, axes=([0], [1]))         # (N, 2, cols)
            Ma[:, cols] = out[:, 0]
            Mb[:, cols] = out[:, 1]
        return Ma, Mb

    def _mixed_service_matrices(self, A, Lam):
        """The same matrices by uniformisation and the service law's Poisson mixing series."""
        N = A.shape[0]
        P = (sp.identity(N, format="csr") + A / Lam).tocsr()
        mix = self.service.mixing(Lam)
        Ma = np.zeros((N, N))
        Mb = np.zeros((N, N))
        X = np.eye(N)
        PT = P.T.tocsr()
        for ak, bk in zip(mix.a, mix.b):
            Ma += ak * X
            Mb += bk * X
            X = (PT @ X.T).T
        return Ma, Mb, mix

    def _stationary_embedded(self):
        import ctmc
        from scipy.sparse.csgraph import breadth_first_order

        t0 = time.perf_counter()
        r = self.capacity
        N = 3 * (r + 1)
        A, s, n = self._service_period()
        Lam = float(max(self.lam, self.lam_overload))
        if self.is_phase_type:
            Ma, Mb = self._ph_service_matrices(A, n)
            mix = None
        else:
            Ma, Mb, mix = self._mixed_service_matrices(A, Lam)
        # departure map (s, m) -> (decide(s, m - 1), m - 1), m >= 1
        m_ = np.maximum(n - 1, 0)
        s_dep = _decide(np.where, s, m_, self.L, self.H, self.R)
        dep = np.where(n >= 1, s_dep * (r + 1) + m_, np.arange(N))
        Dm = sp.csr_matrix((np.ones(N), (np.arange(N), dep)), shape=(N, N))
        # start of a busy period from (s, 0): first admitted batch
        g = self._batch_pmf()
        start = np.zeros((3, N))
        idle_rate = np.zeros(3)
        for k, gk in enumerate(g, start=1):
            n_new, ok = self.acceptance.admit(0, k, r)
            if not ok or gk == 0:
                continue
            for sm in range(3):
                s_new = (int(_decide(np.where, sm, n_new, self.L, self.H, self.R))
                         if self.policy.on_arrival else sm)
                start[sm, s_new * (r + 1) + n_new] += gk
        for sm in range(3):
            acc = start[sm].sum()
            idle_rate[sm] = self.rates[sm] * acc
            if acc > 0:
                start[sm] /= acc
        rows_a = Ma.copy()
        rows_b = Mb.copy()
        for sm in range(3):
            i0 = sm * (r + 1)
            rows_a[i0] = start[sm] @ Ma
            rows_b[i0] = start[sm] @ Mb
        Pd = np.asarray((Dm.T @ rows_a.T).T)
        # embedded states reachable from the empty system
        pattern = sp.csr_matrix(Pd > 0)
        reach = np.sort(breadth_first_order(pattern, 0, directed=True, return_predecessors=False))
        sub = Pd[np.ix_(reach, reach)]
        # dense chain with entries down to 1e-300: GTH (no subtractions) keeps
        # its small probabilities; LU may return negative ones there
        emb = ctmc.CTMC.from_rates(sub).stationary(method="gth")
        pid = emb.pi
        occ = pid @ rows_b[reach]
        for e, pe in zip(reach, pid):
            if n[e] == 0:
                occ[e] += pe / idle_rate[s[e]]
        res = float(np.abs(pid @ sub - pid).sum())
        dep_rate = 1.0 / occ.sum()  # departures per unit time (Markov-renewal)
        # mode changes decided at departures: rate of (mode at the end of a
        # service) -> (mode after the decision), per pair of modes
        end = pid @ rows_a[reach]
        at_dep = np.zeros((3, 3))
        busy = n >= 1
        np.add.at(at_dep, (s[busy], s_dep[busy]), end[busy])
        at_dep *= dep_rate
        p = (occ / occ.sum()).reshape(3, r + 1)
        if mix is None:
            status = emb.status.value
            message = "phase-type service: exact service matrices (relative accuracy)"
            terms, tail = 0, 0.0
        else:
            status = emb.status.value if mix.status == "success" else mix.status
            terms, tail = mix.a.size, mix.tail
            if isinstance(self.service, Deterministic):
                message = f"deterministic service: Poisson mixing to tail {tail:.1e} (relative accuracy)"
            else:
                message = (f"general service by quadrature: accuracy is absolute only (about "
                           f"{max(tail, 1e-13):.0e}); probabilities below that are not resolved")
        return HysteresisLaw(p, "embedded", status, res, time.perf_counter() - t0,
                             {"n_embedded": reach.size, "mixing_terms": terms,
                              "mixing_tail": tail, "embedded_method": emb.method,
                              "departure_law": (reach, pid), "departure_rate": dep_rate,
                              "switches_at_departures": at_dep,
                              "leak": float(np.abs(Pd.sum(axis=1) - 1)[reach].max()),
                              "accuracy": "absolute" if mix is not None and not isinstance(
                                  self.service, Deterministic) else "relative"},
                             message)

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
            if route == "ctmc":
                t0 = time.perf_counter()
                chain = self.chain()
                res = self._stationary_ctmc()
                st = chain.states
                p = np.zeros((3, self.capacity + 1))
                np.add.at(p, (st["mode"], st["n"]), res.pi)
                self._laws[route] = HysteresisLaw(p, "ctmc", res.status.value, res.residual,
                                                  time.perf_counter() - t0,
                                                  {"n_states": chain.n_states, "method": res.method,
                                                   "balance_error": res.balance_error})
            else:
                self._laws[route] = self._stationary_embedded()
        return self._laws[route]

    def distribution(self, route: str = "auto") -> np.ndarray:
        """``p[s, n]``, shape ``(3, capacity + 1)`` (see :class:`HysteresisLaw`)."""
        return self.stationary(route).p

    def mode_probabilities(self, route: str = "auto") -> np.ndarray:
        """Stationary probabilities of the (normal, overload, discard) modes."""
        return self.stationary(route).modes

    # -- customer measures ---------------------------------------------------------
    def _admission(self):
        """Per level n, for one batch arriving in a mode that admits: mean customers
        admitted, mean customers lost for lack of room, P(batch not admitted in full).

        The last two are summed from the lost customers themselves (no ``1 - ...``),
        so small losses keep their relative accuracy.
        """
        r = self.capacity
        n = np.arange(r + 1)
        g = self._batch_pmf()
        mean_in = np.zeros(r + 1)
        mean_lost = np.zeros(r + 1)
        cut = np.zeros(r + 1)
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
        mean_in, _, _ = self._admission()
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
        _, mean_lost, _ = self._admission()
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
        _, mean_lost, _ = self._admission()
        ex = self.batch.mean
        pm = p.sum(axis=1)
        over0 = float(p[0] @ mean_lost) / ex
        over1 = float(p[1] @ mean_lost) / ex
        return {"priority": float(pm[2] + over0 + over1), "other": float(pm[1] + pm[2] + over0)}

    def batch_loss_probability(self, route: str = "auto") -> float:
        """Fraction of offered batches not admitted in full (summed from the refused ones)."""
        p = self.distribution(route)
        _, _, cut = self._admission()
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
    # Route "ctmc": hitting times of ctmc from the stationary entrance law.
    # Route "embedded": renewal-reward, E[period in a set] = P(set) / (rate of
    # exits from the set); exits from the overload and discard sets happen only
    # at departures, whose rates the embedded chain gives.
    def _mode_mask(self, modes):
        chain = self.chain()
        return np.isin(chain.states["mode"], modes)

    def _entrance(self, inside):
        """Stationary flow into the set ``inside`` from outside, per state of ``inside``."""
        chain = self.chain()
        pi = self._stationary_ctmc().pi
        flow = (pi * ~inside) @ chain.Q
        return np.where(inside, flow, 0.0)

    def _mean_stay(self, inside):
        """Mean time from entering ``inside`` (stationary entrance law) until leaving it."""
        f = self._entrance(inside)
        if f.sum() <= 0:
            return float("nan")
        h = self.chain().hitting_times(~inside)
        return float(f @ h.mean / f.sum())

    def switch_rates(self, route: str = "auto") -> np.ndarray:
        """Stationary rates of mode changes: ``[a, b]`` = changes from mode a to mode b per unit time.

        Route "ctmc": from the stationary law and the generator. Route
        "embedded": changes at departures from the embedded chain, plus (instant
        policy) the upward changes at arrivals from the time-stationary law.
        """
        route = self._route(route)
        if route == "ctmc":
            chain = self.chain()
            pi = self._stationary_ctmc().pi
            Q = chain.Q.tocoo()
            mode = chain.states["mode"]
            out = np.zeros((3, 3))
            sw = mode[Q.row] != mode[Q.col]
            np.add.at(out, (mode[Q.row[sw]], mode[Q.col[sw]]), pi[Q.row[sw]] * Q.data[sw])
            return out
        law = self.stationary("embedded")
        out = law.info["switches_at_departures"].copy()
        np.fill_diagonal(out, 0.0)
        if self.policy.on_arrival:
            r = self.capacity
            lev = np.arange(r + 1)
            for k, gk in enumerate(self._batch_pmf(), start=1):
                n_new, ok = self.acceptance.admit(lev, k, r)
                for a in range(3):
                    b = _decide(np.where, a, n_new, self.L, self.H, self.R)
                    hit = ok & (b != a)
                    np.add.at(out[a], b[hit], law.p[a, hit] * self.rates[a] * gk)
        return out

    def _renewal_stay(self, modes, route):
        """``P(modes) / (rate of leaving modes)`` from :meth:`switch_rates`."""
        S = self.switch_rates(route)
        inside = np.zeros(3, dtype=bool)
        inside[modes] = True
        rate = S[np.ix_(inside, ~inside)].sum()
        pm = self.mode_probabilities(route)[inside].sum()
        return float(pm / rate) if rate > 0 else float("nan")

    def _stay(self, modes, route):
        route = self._route(route)
        if route == "ctmc":
            return self._mean_stay(self._mode_mask(modes))
        return self._renewal_stay(modes, route)

    def mean_return_time(self, route: str = "auto") -> float:
        """Mean time from entering overload until the normal mode again (discard excursions included).

        Route "ctmc" (default for phase-type service): :meth:`ctmc.CTMC.hitting_times`
        of the normal set from the stationary entrance law into
        ``{overload, discard}``. Route "embedded" (any service law):
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
        chain = self.chain()
        out = self._mode_mask([1, 2])
        h = chain.hitting_times(~out)
        st = chain.states
        return {"mode": st["mode"][out], "n": st["n"][out], "phase": st["phase"][out], "mean": h.mean[out]}

    def return_time_cdf(self, t) -> np.ndarray:
        """``P(T_return <= t)`` from the stationary entrance law into overload.

        Uses :meth:`ctmc.CTMC.first_passage` (uniformisation).
        """
        chain = self.chain()
        inside = self._mode_mask([1, 2])
        f = self._entrance(inside)
        src = np.flatnonzero(f > 0)
        fp = chain.first_passage(~inside, t=t, sources=src)
        w = f[fp.sources] / f[fp.sources].sum()
        return np.einsum("r,trm->t", w, fp.cdf)

    def return_time_laplace(self, s) -> np.ndarray:
        """Laplace-Stieltjes transform ``E[exp(-s T_return)]`` from the entrance law into overload.

        Uses :meth:`ctmc.CTMC.hitting_laplace` (route "ctmc"); ``s`` is a
        number or an array of numbers >= 0.
        """
        chain = self.chain()
        inside = self._mode_mask([1, 2])
        f = self._entrance(inside)
        res = chain.hitting_laplace(~inside, s)
        vals = np.atleast_2d(res.values)
        return vals @ f / f.sum()

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
