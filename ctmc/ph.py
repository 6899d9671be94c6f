r"""Phase-type laws and phase-type service stations for :class:`ctmc.Model`.

A *phase-type* law :math:`PH(\alpha, S)` of order :math:`m` is the time to
absorption of a CTMC on the transient phases :math:`1..m` plus one absorbing
state, started in phase :math:`i` with probability :math:`\alpha_i`
(:math:`\sum_i \alpha_i = 1`: no atom at zero). The *sub-generator*
:math:`S` has a negative diagonal, a non-negative off-diagonal and row sums
:math:`\le 0`; the *exit rates* are :math:`s = -S\mathbf 1`. With
absorption reachable from every phase (:math:`S` nonsingular),

.. math::

    \bar F(x) = \alpha e^{Sx}\mathbf 1, \qquad
    f(x) = \alpha e^{Sx} s, \qquad
    E[T^k] = k!\, \alpha (-S)^{-k} \mathbf 1 .

:class:`PhaseType` holds a validated law; :func:`exponential`,
:func:`erlang`, :func:`hyperexponential` and :func:`coxian` build the usual
ones ([Neuts81]_), and :func:`fit`, :func:`fit_h2` and :func:`fit_coxian2`
match a mean and a squared coefficient of variation (scv, :math:`c^2 = \mathrm{Var}\,T /
(E\,T)^2`):

=====================  ====================  ==========================================
function               scv                   law
=====================  ====================  ==========================================
:func:`fit`            :math:`0 < c^2 < 1`   Erlang(k-1) and Erlang(k) mixed, one rate [Tijms03]_
:func:`fit`            :math:`c^2 = 1`       exponential
:func:`fit`            :math:`c^2 > 1`       :func:`fit_h2`
:func:`fit_h2`         :math:`c^2 \ge 1`     H2 with balanced means [Tijms03]_
:func:`fit_coxian2`    :math:`c^2 \ge 1/2`   Coxian-2 [Marie80]_
=====================  ====================  ==========================================

Large laws and accuracy
-----------------------
The builders keep :math:`S` as a CSR matrix above 512 phases
(:attr:`PhaseType.is_sparse`, :attr:`PhaseType.S_dense`, :attr:`PhaseType.phase_moves`):
an Erlang-:math:`10^6` is a bidiagonal matrix of 2e6 entries. Moments take one (sparse)
LU of :math:`-S`, the variance is a sum of non-negative terms, and :meth:`PhaseType.sf`,
:meth:`PhaseType.cdf` and :meth:`PhaseType.pdf` keep their relative accuracy down to the
smallest doubles (closed forms where :math:`S` is diagonal or one rate along a chain,
log-scaled uniformisation otherwise; the numerics live in ``ctmc/_phnum.py``). :func:`erlang` and
:func:`fit` refuse laws of more than :data:`MAX_PHASES` (:math:`10^7`) phases, naming the parameter,
rather than run out of memory.

Service stations
----------------
:func:`add_service` declares the service of a single-server station of a
model (a queue variable ``n``, jobs at the station, served one at a time) as
events of the CTMC on :math:`(n, j)`, where the *phase variable* :math:`j`
follows this convention:

* :math:`j = 0` when the station is empty (:math:`n = 0`), and
  :math:`j \in 1..m` is the phase of the job in service when :math:`n > 0`;
* ``{name}_phase_{i}_{k}``: phase :math:`i \to k` at rate :math:`S_{ik}` (a run of equal
  moves :math:`i \to i + d`, :math:`i = i_0..i_1`, is one event
  ``{name}_phase_{i0}_{k0}_through_{i1}_{k1}``);
* ``{name}_done_{i}...``: completion from phase :math:`i` at rate
  :math:`s_i`; :math:`n \to n - 1`, and the next job, if any, starts in phase
  :math:`k` with probability :math:`\alpha_k` (suffix ``_next_{k}``, one
  event per starting phase, its rate multiplied by :math:`\alpha_k`), else
  :math:`j \to 0`;
* a job joining the empty station starts in phase :math:`k` with probability
  :math:`\alpha_k`: :meth:`~ctmc.ph_servers.StationBase.arrival` declares such arrival events,
  and ``to=`` sends completed jobs to a downstream station with the same choice.

With ``servers=c`` (:math:`c > 1`) the station has :math:`c` servers and keeps, instead of a
phase variable, one counter per phase: the number of servers busy in it (the exact lumped
representation of :mod:`ctmc.ph_servers`, which also holds what both kinds of station share).

Every random choice of phase is one event per outcome, so all rates stay
constants and the generator is exactly that of the queue. See
:func:`add_service` for an M/PH/1/K queue checked against the
Pollaczek-Khinchine formula, and a tandem of two stations.

References
----------
.. [Neuts81] M. F. Neuts, *Matrix-Geometric Solutions in Stochastic Models*,
   Johns Hopkins University Press, 1981, ch. 2 (phase-type laws).
.. [Tijms03] H. C. Tijms, *A First Course in Stochastic Models*, Wiley, 2003,
   appendix on useful probability distributions: the two-moment fits by a
   mixture of Erlang laws with a common rate (:math:`c^2 < 1`) and by an H2
   law with balanced means (:math:`c^2 \ge 1`).
.. [Marie80] R. Marie, "Calculating equilibrium probabilities for
   :math:`\lambda(n)/C_k/1/N` queues", *ACM SIGMETRICS Performance Evaluation
   Review* 9(2), 1980, 117-125; also G. Bolch, S. Greiner, H. de Meer,
   K. S. Trivedi, *Queueing Networks and Markov Chains*, 2nd ed., Wiley, 2006,
   ch. 1 (the Coxian-2 fit).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import numpy as np
import scipy.sparse as sp

from ._phnum import (DENSE_MAX, SPARSE_FROM, Solver, chain_tails, check_subgenerator, diagonal_tails, runs,
                     structure, uniformised_tails)
from .expr import Var
from .model import Model
from .options import positive_number
from .ph_servers import StationBase, add_servers, check_servers, check_update, declare_completions, speed_rule

__all__ = ["PhaseType", "exponential", "erlang", "hyperexponential", "coxian", "phase_type",
           "fit", "fit_h2", "fit_coxian2", "Station", "add_service", "MAX_PHASES"]


#: the builders (:func:`erlang`, :func:`fit`) refuse laws of more phases (an Erlang-10^7 takes about
#: 1 GB to build and 5 GB for its moments)
MAX_PHASES = 10 ** 7
#: a dense law's points with ``q x`` above this are evaluated by stochastic_exp (see :meth:`PhaseType.sf`)
_UNIFORMIZE_MAX = 1000.0


# ---------------------------------------------------------------------------
# the law
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False, repr=False)
class PhaseType:
    r"""The phase-type law :math:`PH(\alpha, S)`, validated on construction.

    Parameters
    ----------
    alpha : array_like, shape (m,)
        Initial phase law: entries in [0, 1] summing to 1 (to 1e-12).
    S : array_like, shape (m, m)
        Sub-generator: diagonal < 0, off-diagonal >= 0, row sums <= 0, and
        absorption reachable from every phase (else :math:`S` is singular).
    name : str
        A label for reports.

    Raises
    ------
    ValueError
        Naming ``alpha`` or ``S`` and the condition violated.

    Examples
    --------
    >>> import numpy as np
    >>> from ctmc import ph
    >>> law = ph.PhaseType([0.5, 0.5], [[-2.0, 1.0], [0.0, -1.0]])
    >>> law.n_phases, law.exit_rates.tolist(), round(law.mean, 12)
    (2, [1.0, 1.0], 1.0)
    >>> ph.erlang(4, mean=2.0)
    PhaseType(E4(mean=2): 4 phases, mean=2, scv=0.25)
    """

    alpha: np.ndarray
    S: np.ndarray
    name: str = "PH"

    def __post_init__(self):
        try:
            a = np.atleast_1d(np.asarray(self.alpha, dtype=float))
        except (TypeError, ValueError):
            raise ValueError("alpha, S: expected a vector and a square matrix of numbers") from None
        m = a.size
        if a.ndim != 1 or m == 0:
            raise ValueError(f"alpha: expected a non-empty 1-D array, got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"alpha: entries must be finite, got {_short(a)}")
        if (a < 0).any() or abs(a.sum() - 1) > 1e-12:
            raise ValueError(f"alpha: entries must be >= 0 and sum to 1 (no atom at 0), got {_short(a)} "
                             f"summing to {a.sum()!r}")
        S, csr = check_subgenerator(a, self.S)
        object.__setattr__(self, "alpha", a)
        object.__setattr__(self, "S", S)
        object.__setattr__(self, "name", str(self.name))
        object.__setattr__(self, "_csr", csr)
        object.__setattr__(self, "_solver", None)

    def __getstate__(self):
        """For pickling: the cached factorisation of ``-S`` is rebuilt when needed."""
        return {**self.__dict__, "_solver": None}

    def __repr__(self) -> str:
        return (f"PhaseType({self.name}: {self.n_phases} phase{'s' if self.n_phases > 1 else ''}, "
                f"mean={self.mean:.6g}, scv={self.scv:.6g})")

    # representation -----------------------------------------------------------
    @property
    def n_phases(self) -> int:
        """The order :math:`m`."""
        return self.alpha.size

    @property
    def is_sparse(self) -> bool:
        """Whether ``S`` is stored as a ``scipy.sparse`` CSR matrix (the builders do so above
        512 phases; any law given a sparse ``S`` keeps it)."""
        return sp.issparse(self.S)

    @property
    def S_dense(self) -> np.ndarray:
        """``S`` as a dense array (a copy when stored sparse).

        Raises
        ------
        ValueError
            For more than 8192 phases (512 MiB): use ``S`` (sparse) instead.
        """
        if not self.is_sparse:
            return self.S
        m = self.n_phases
        if m > DENSE_MAX:
            raise ValueError(f"S_dense: {self.name} has {m} phases; a dense S would take {8.0 * m * m:.3g} "
                             f"bytes (allowed up to {DENSE_MAX} phases): use the sparse S")
        return self.S.toarray()

    @property
    def phase_moves(self) -> tuple:
        """The phase moves of ``S`` as maximal runs ``(first, last, shift, rate)``, phases
        numbered from 1: every phase ``i`` in ``first..last`` moves to ``i + shift`` at ``rate``
        (an Erlang-k is the single run ``(1, k - 1, 1, k/mean)``)."""
        return tuple((i0 + 1, i1 + 1, d, r) for i0, i1, d, r in runs(self._csr))

    # moments ------------------------------------------------------------------
    @property
    def exit_rates(self) -> np.ndarray:
        r"""The exit rates :math:`s = -S\mathbf 1` (shape (m,))."""
        return np.maximum(-np.asarray(self._csr.sum(axis=1)).ravel(), 0.0)

    def _solve(self):
        if self._solver is None:
            object.__setattr__(self, "_solver", Solver(self._csr, dense=not self.is_sparse))
        return self._solver

    def moment(self, k: int = 1) -> float:
        r"""The moment :math:`E[T^k] = k!\,\alpha(-S)^{-k}\mathbf 1` (Neuts 1981, thm. 2.2.1).

        By :math:`k` solves with one LU factorisation of :math:`-S` (sparse when ``S`` is).

        Parameters
        ----------
        k : int, >= 0
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"k: the order of a moment must be an integer >= 0, got {k!r}")
        x = np.ones(self.n_phases)
        f = 1.0
        for i in range(1, int(k) + 1):
            x = self._solve().solve(x)
            f *= i
        return float(f * self.alpha @ x)

    @property
    def mean(self) -> float:
        """:math:`E[T]`."""
        return self.moment(1)

    @property
    def variance(self) -> float:
        """:math:`\\operatorname{Var} T`, as a sum of non-negative terms (``ctmc._phnum``):
        no cancellation of :math:`E[T^2] - E[T]^2` (an Erlang-:math:`10^6` keeps all digits)."""
        return self._solve().variance(self._csr, self.alpha, self.exit_rates)

    @property
    def scv(self) -> float:
        """The squared coefficient of variation :math:`\\mathrm{Var}\\,T / E[T]^2`."""
        return self.variance / self.mean ** 2

    # distribution -------------------------------------------------------------
    def _at(self, x):
        """``(sf, cdf, pdf)`` at the points ``x``, each of the shape of ``x`` (method: :meth:`sf`)."""
        try:
            x = np.asarray(x, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"x: expected numbers, got {x!r}") from None
        if np.isnan(x).any():
            raise ValueError("x: must not contain NaN")
        s = self.exit_rates
        flat = x.reshape(-1)
        sf = np.where(flat <= 0, 1.0, 0.0)
        cdf = np.where(flat <= 0, 0.0, 1.0)
        pdf = np.where(flat == 0, float(self.alpha @ s), 0.0)      # at 0: the right limit alpha s
        live = np.flatnonzero((flat > 0) & np.isfinite(flat))
        if live.size:
            pts, inv = np.unique(flat[live], return_inverse=True)
            out = self._tails(pts, s)
            for arr, val in zip((sf, cdf, pdf), out):
                arr[live] = val[inv.reshape(-1)]
        return sf.reshape(x.shape), cdf.reshape(x.shape), pdf.reshape(x.shape)

    def _tails(self, pts, s):
        """``(sf, cdf, pdf)`` at the distinct points ``pts > 0`` (see :meth:`sf`)."""
        kind, r = structure(self._csr)
        if kind == "diagonal":
            return diagonal_tails(self.alpha, -self._csr.diagonal(), s, pts)
        if kind == "chain":
            return chain_tails(self.alpha, r, pts)
        q = float(np.max(-self._csr.diagonal()))
        far = (q * pts > _UNIFORMIZE_MAX) & (not self.is_sparse)
        out = [np.empty(pts.size) for _ in range(3)]
        if (~far).any():
            for arr, val in zip(out, uniformised_tails(self.alpha, self._csr, s, pts[~far], what=self.name)):
                arr[~far] = val
        if far.any():
            from .transient import stochastic_exp
            m = self.n_phases
            G = np.zeros((m + 1, m + 1))
            G[:m, :m] = self.S
            G[:m, m] = s
            for i in np.flatnonzero(far):
                row = self.alpha @ stochastic_exp(G, pts[i])[:m]
                out[0][i], out[1][i], out[2][i] = row[:m].sum(), row[m], row[:m] @ s
        return tuple(out)

    def cdf(self, x) -> np.ndarray:
        r"""The distribution function :math:`F(x) = 1 - \alpha e^{Sx}\mathbf 1` (0 for ``x <= 0``).

        Vectorised over ``x`` (the result has its shape). Computed directly,
        not as :math:`1 - \bar F`, so a tiny :math:`F(x)` near 0 keeps its
        relative accuracy; method and cost in :meth:`sf`.
        """
        return self._at(x)[1]

    def sf(self, x) -> np.ndarray:
        r"""The survival function :math:`\bar F(x) = \alpha e^{Sx}\mathbf 1` (1 for ``x <= 0``).

        It, :meth:`cdf` and :meth:`pdf` are each computed directly, not as one minus the
        other, as sums of non-negative terms, so both tails keep their relative accuracy down
        to the smallest doubles (``ctmc._phnum``):

        * ``S`` diagonal (exponential, hyperexponential): sums of exponentials;
        * one rate along a chain of phases (Erlang, the fits of :func:`fit` below scv 1):
          Poisson probabilities, :math:`\bar F(x) = \sum_i \alpha_i P(N < m - i + 1)` for
          :math:`N \sim \mathrm{Poisson}(rx)`, at any number of phases;
        * otherwise, where :math:`qx \le 1000` (:math:`q = \max_i |S_{ii}|`) or ``S`` is
          sparse, by uniformisation summed from its first term in log scale
          (:math:`\alpha e^{Gx} = \sum_n e^{-qx}(qx)^n/n!\; \alpha P^n` for the generator
          :math:`G` of the absorbing chain, :math:`P = I + G/q \ge 0`); a sparse law whose
          sum would need more than 4e9 multiply-adds raises :class:`~ctmc.SolverError`;
        * a dense law far in its tail by :func:`ctmc.transient.stochastic_exp` of
          :math:`Gx` (squarings of non-negative matrices), one :math:`(m+1)`-square
          exponential per distinct point.

        Examples
        --------
        >>> from ctmc import ph
        >>> float(ph.exponential(1.0).sf(700.0))      # e^-700, not 0
        9.85967654375977e-305
        """
        return self._at(x)[0]

    def pdf(self, x) -> np.ndarray:
        r"""The density :math:`f(x) = \alpha e^{Sx} s` for ``x >= 0`` (0 for ``x < 0``)."""
        return self._at(x)[2]


def _short(a) -> str:
    """A vector for an error message: its entries, or the first ten of a long one."""
    if a.size <= 10:
        return str(a.tolist())
    return f"[{', '.join(map(str, a[:10].tolist()))}, ...] ({a.size} entries)"


# ---------------------------------------------------------------------------
# constructors
# ---------------------------------------------------------------------------
def _count(name, k, what, limit=None):
    """``k`` as an int >= 1 (and <= ``limit``), else ValueError naming ``name`` and the range."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"{name}: {what} must be an integer >= 1, got {k!r}")
    if limit is not None and k > limit:
        raise ValueError(f"{name}: {what} must lie in 1..{limit} (ctmc.ph.MAX_PHASES: about 100 bytes a "
                         f"phase to build, 500 for the moments), got {k!r}")
    return int(k)


def exponential(rate: Optional[float] = None, *, mean: Optional[float] = None) -> PhaseType:
    """The exponential law of the given ``rate`` or ``mean`` (one phase).

    Examples
    --------
    >>> from ctmc import ph
    >>> ph.exponential(mean=0.5).S.tolist()
    [[-2.0]]
    """
    if (rate is None) == (mean is None):
        raise ValueError("rate, mean: give exactly one of them")
    r = positive_number("rate", rate) if mean is None else 1.0 / positive_number("mean", mean)
    return PhaseType(np.ones(1), np.array([[-r]]), name=f"M(rate={r:g})")


def erlang(k: int, mean: float = 1.0) -> PhaseType:
    """The Erlang-``k`` law of the given ``mean``: ``k`` phases in series, each of rate ``k / mean``.

    Its scv is ``1/k``; as ``k`` grows it tends to the constant ``mean``. ``k`` lies in
    ``1..MAX_PHASES`` (ValueError naming ``k`` otherwise).
    """
    k = _count("k", k, "the number of Erlang phases", MAX_PHASES)
    mean = positive_number("mean", mean)
    a = np.zeros(k)
    a[0] = 1.0
    return PhaseType(a, _chain(np.full(k, k / mean), np.full(k - 1, k / mean)), name=f"E{k}(mean={mean:g})")


def _chain(rates, moves):
    """The sub-generator with diagonal ``-rates`` and superdiagonal ``moves``: dense, or CSR above
    ``SPARSE_FROM`` phases (an Erlang-10^6 takes 2e6 entries, not 1e12)."""
    m = rates.size
    if m <= SPARSE_FROM:
        return -np.diag(rates) + np.diag(moves, k=1)
    return sp.diags([-rates, moves], [0, 1], shape=(m, m), format="csr")


def hyperexponential(probs, rates) -> PhaseType:
    """The mixture of exponentials: rate ``rates[i]`` with probability ``probs[i]``."""
    p = np.atleast_1d(np.asarray(probs, dtype=float))
    r = np.atleast_1d(np.asarray(rates, dtype=float))
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"probs: expected a non-empty 1-D array, got shape {p.shape}")
    if r.shape != p.shape:
        raise ValueError(f"rates: expected shape {p.shape} to match probs, got {r.shape}")
    if not (np.all(np.isfinite(r)) and (r > 0).all()):
        raise ValueError(f"rates: must be finite and > 0, got {r.tolist()}")
    if not np.all(np.isfinite(p)) or (p < 0).any() or abs(p.sum() - 1) > 1e-12:
        raise ValueError(f"probs: must be >= 0 and sum to 1, got {p.tolist()}")
    return PhaseType(p, _chain(r, np.zeros(r.size - 1)), name=f"H{p.size}")


def coxian(rates, probs_continue) -> PhaseType:
    """The Coxian law: phase ``i`` (rate ``rates[i]``) moves on to phase ``i+1`` with
    probability ``probs_continue[i]``, else the time ends; the last phase ends.

    Parameters
    ----------
    rates : array_like, shape (m,)
        Rates > 0.
    probs_continue : array_like, shape (m-1,)
        Values in [0, 1].
    """
    r = np.atleast_1d(np.asarray(rates, dtype=float))
    c = np.asarray(probs_continue, dtype=float).reshape(-1)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"rates: expected a non-empty 1-D array, got shape {r.shape}")
    if c.shape != (r.size - 1,):
        raise ValueError(f"probs_continue: expected {r.size - 1} values (one per phase but the last), "
                         f"got {c.size}")
    if not (np.all(np.isfinite(r)) and (r > 0).all()):
        raise ValueError(f"rates: must be finite and > 0, got {r.tolist()}")
    if not np.all(np.isfinite(c)) or ((c < 0) | (c > 1)).any():
        raise ValueError(f"probs_continue: must lie in [0, 1], got {c.tolist()}")
    a = np.zeros(r.size)
    a[0] = 1.0
    return PhaseType(a, _chain(r, r[:-1] * c), name=f"Cox{r.size}")


def phase_type(alpha, S) -> PhaseType:
    """A general law ``PH(alpha, S)`` (the same as :class:`PhaseType`, with a default name)."""
    return PhaseType(alpha, S, name=f"PH{np.size(alpha)}")


# ---------------------------------------------------------------------------
# two-moment fits
# ---------------------------------------------------------------------------
def _mean_scv(mean, scv):
    m = positive_number("mean", mean)
    try:
        c2 = float(scv)
    except (TypeError, ValueError):
        raise ValueError(f"scv: expected a number > 0, got {scv!r}") from None
    if not math.isfinite(c2) or c2 <= 0:
        raise ValueError(f"scv: the squared coefficient of variation must be finite and > 0 "
                         f"(only a constant has scv 0, and it is not phase-type), got {scv!r}")
    return m, c2


def fit_h2(mean: float, scv: float) -> PhaseType:
    r"""The two-phase hyperexponential with balanced means matching ``mean`` and ``scv >= 1``.

    Balanced means (Tijms 2003, see :mod:`ctmc.ph`): :math:`p_1/\mu_1 = p_2/\mu_2`, which gives

    .. math::

        p_{1,2} = \tfrac12\Bigl(1 \pm \sqrt{\tfrac{c^2 - 1}{c^2 + 1}}\Bigr), \qquad
        \mu_i = \frac{2 p_i}{m}.

    At ``scv == 1`` both phases have rate ``1/mean`` (the exponential law).

    Examples
    --------
    >>> from ctmc import ph
    >>> law = ph.fit_h2(2.0, 3.0)
    >>> round(law.mean, 12), round(law.scv, 12)
    (2.0, 3.0)
    """
    m, c2 = _mean_scv(mean, scv)
    if c2 < 1:
        raise ValueError(f"scv: an H2 law has scv >= 1, got {scv!r} (use fit or fit_coxian2)")
    d = math.sqrt((c2 - 1) / (c2 + 1))
    p1 = 0.5 * (1 + d)
    p2 = 0.5 * (1 - d)
    law = hyperexponential([p1, p2], [2 * p1 / m, 2 * p2 / m])
    return PhaseType(law.alpha, law.S, name=f"H2(mean={m:g}, scv={c2:g})")


def fit_coxian2(mean: float, scv: float) -> PhaseType:
    r"""The Coxian-2 law of Marie matching ``mean`` and ``scv >= 1/2``.

    Marie (1980), see :mod:`ctmc.ph`: the first phase has rate :math:`\mu_1 = 2/m`, the job moves on
    with probability :math:`p = 1/(2c^2)` to a second phase of rate
    :math:`\mu_2 = 1/(m c^2)`. Then :math:`E[T] = 1/\mu_1 + p/\mu_2 = m` and
    :math:`E[T^2] = 2/\mu_1^2 + 2p/(\mu_1\mu_2) + 2p/\mu_2^2 = m^2(1 + c^2)`.
    At ``scv == 1/2`` it is the Erlang-2 law.

    Examples
    --------
    >>> from ctmc import ph
    >>> law = ph.fit_coxian2(1.0, 0.8)
    >>> round(law.mean, 12), round(law.scv, 12)
    (1.0, 0.8)
    """
    m, c2 = _mean_scv(mean, scv)
    if c2 < 0.5:
        raise ValueError(f"scv: a Coxian-2 law has scv >= 1/2, got {scv!r} (use fit for smaller scv)")
    law = coxian([2.0 / m, 1.0 / (m * c2)], [1.0 / (2.0 * c2)])
    return PhaseType(law.alpha, law.S, name=f"Cox2(mean={m:g}, scv={c2:g})")


def fit(mean: float, scv: float, *, max_phases: int = 1000) -> PhaseType:
    r"""A phase-type law with the given ``mean`` and ``scv > 0`` (Tijms 2003, see :mod:`ctmc.ph`).

    * ``scv < 1``: with :math:`k = \lceil 1/c^2 \rceil` (so that
      :math:`1/k \le c^2 \le 1/(k-1)`), the mixture of Erlang(k-1) (probability
      :math:`p`) and Erlang(k) (probability :math:`1-p`) with the common
      rate :math:`\mu = (k - p)/m`, where

      .. math::

          p = \frac{k c^2 - \sqrt{k(1 + c^2) - k^2 c^2}}{1 + c^2}.

      It is written as one chain of :math:`k` phases of rate :math:`\mu`,
      entered in phase 1 with probability :math:`1 - p` and in phase 2 with
      probability :math:`p`.
    * ``scv == 1``: the exponential law.
    * ``scv > 1``: :func:`fit_h2` (balanced means).

    Parameters
    ----------
    mean, scv : float
        Both > 0.
    max_phases : int
        Refuse a fit needing more phases (``1/scv`` large): the station's
        state space grows with them.

    Examples
    --------
    >>> from ctmc import ph
    >>> [ph.fit(1.0, c2).n_phases for c2 in (0.3, 0.5, 0.7, 1.0, 4.0)]
    [4, 2, 2, 1, 2]
    >>> law = ph.fit(3.0, 0.3)
    >>> round(law.mean, 12), round(law.scv, 12)
    (3.0, 0.3)
    """
    m, c2 = _mean_scv(mean, scv)
    if c2 == 1:
        return PhaseType(np.ones(1), np.array([[-1.0 / m]]), name=f"M(mean={m:g})")
    if c2 > 1:
        return fit_h2(m, c2)
    k = max(2, math.ceil(1.0 / c2 - 1e-12))  # an exact 1/k gives p = 0, the Erlang-k law
    max_phases = _count("max_phases", max_phases, "the largest number of phases")
    if k > max_phases:
        raise ValueError(f"scv: matching scv={c2!r} needs {k} phases, more than max_phases={max_phases} "
                         "(raise max_phases, or use erlang(k) for an almost constant time)")
    _count("scv", k, f"the number of phases matching scv={c2!r}", MAX_PHASES)
    p = (k * c2 - math.sqrt(max(k * (1 + c2) - k * k * c2, 0.0))) / (1 + c2)
    p = min(max(p, 0.0), 1.0)
    mu = (k - p) / m
    a = np.zeros(k)
    a[0], a[1] = 1.0 - p, p
    S = _chain(np.full(k, mu), np.full(k - 1, mu))
    return PhaseType(a, S, name=f"E{k - 1},{k}(mean={m:g}, scv={c2:g})")


# ---------------------------------------------------------------------------
# stations
# ---------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class Station(StationBase):
    r"""A single-server station whose service events were declared by :func:`add_service`.

    Arrivals: :meth:`~ctmc.ph_servers.StationBase.arrival`; its part of an initial state:
    :attr:`~ctmc.ph_servers.StationBase.empty`.

    Attributes
    ----------
    model : Model
    law : PhaseType
    queue, phase : Var
        Jobs at the station; phase of the job in service (0 when empty).
    name : str
        Prefix of the station's event names.
    phase_events, completion_events : tuple of str
        Names of the declared events (for :meth:`ctmc.CTMC.event_rate`: the
        station's throughput is the sum over ``completion_events``).
    """

    model: Model
    law: PhaseType
    queue: Var
    phase: Var
    name: str
    phase_events: tuple
    completion_events: tuple

    def own_variables(self) -> tuple:
        return (self.queue, self.phase)

    def joins(self) -> list:
        """``(guard, probability, update, suffix)`` for a job joining the station: on an empty
        station one branch per starting phase ``k`` (probability ``alpha_k``)."""
        n, j = self.queue, self.phase
        out = [((n >= 1) & (n < n.hi), 1.0, {n: n + 1}, "")]
        for k in np.flatnonzero(self.law.alpha > 0):
            out.append((n == 0, float(self.law.alpha[k]), {n: 1, j: int(k) + 1}, f"_{self.name}_start_{k + 1}"))
        return out


def add_service(model: Model, law: PhaseType, queue: Var, phase: Optional[Var] = None, *,
                name: str = "service", guard: Any = True, speed: Any = 1.0,
                update: Optional[Mapping] = None, to: Optional[StationBase] = None,
                servers: int = 1) -> StationBase:
    r"""Declare the phase-type service of a station of one or ``servers`` servers on ``model``.

    The phase convention is the one of the module docstring: ``phase`` is 0
    when ``queue == 0`` and the phase (1..m) of the job in service otherwise.
    Declared events, all with constant rates (times ``speed``):

    * ``{name}_phase_{i}_{k}`` (:math:`S_{ik} > 0`): phase :math:`i \to k`; a run of
      phases :math:`i_0..i_1` all moving by the same shift :math:`d` at the same rate
      (:attr:`PhaseType.phase_moves`) is one event
      ``{name}_phase_{i0}_{k0}_through_{i1}_{k1}`` (:math:`k = i + d`), so an Erlang-10^4
      service declares one phase event, not 10^4;
    * ``{name}_done_{i}`` (``queue == 1``): completion from phase :math:`i`
      at rate :math:`s_i`, the station empties (``phase = 0``);
    * ``{name}_done_{i}_next_{k}`` (``queue >= 2``): completion, the next job
      starts in phase :math:`k` (rate :math:`s_i \alpha_k`);
    * with ``to``, each completion also puts the job into the downstream
      station ``to``: when that is empty, one event per starting phase
      :math:`l` (suffix ``_{to.name}_start_{l}``, rate times
      :math:`\alpha'_l`); completions are disabled while ``to.queue`` is at
      its upper bound: the job keeps its phase and its service ends only
      once there is room. For exponential service this is blocking after
      service; for other laws a job that has finished and waits (blocking
      after service proper) needs a state of its own, e.g. a flag variable
      set by ``update`` on a completion routed elsewhere.

    Arrivals are declared by :meth:`~ctmc.ph_servers.StationBase.arrival` of the returned station.

    With ``servers=c > 1`` the station has ``c`` servers: counters ``{name}_busy_{i}`` (busy
    servers in phase ``i``) replace the phase variable, phase moves and completions have rates
    ``x_i S_ik`` and ``x_i s_i``, the events keep the names above (no ``_through_`` runs);
    :mod:`ctmc.ph_servers` gives them and the station's state count.

    Parameters
    ----------
    model : Model
    law : PhaseType
        The service-time law.
    queue : Var
        Jobs at the station (in service and waiting); bounds ``0..K``.
    phase : Var, optional
        The phase variable, with bounds covering ``0..m``; by default declared
        here as ``{name}_phase`` with bounds ``0..m``.
    name : str
        Prefix of the event names (and of the phase variable).
    guard : Expr or bool
        Where the server works (e.g. a mode in which it is switched off); the
        phase moves and completions are disabled elsewhere, the job keeping
        its phase.
    speed : Expr or float
        Multiplies every service rate (e.g. a mode-dependent service speed).
    update : dict, optional
        Further updates at a completion (other variables than the station's
        own), e.g. a counter or a job sent to a station that is not
        phase-type.
    to : Station or MultiServerStation, optional
        A downstream phase-type station receiving the completed jobs.
    servers : int
        The number of servers, ``1..K`` (default 1, the single-server station above). Refused
        where the station alone would exceed :data:`ctmc.ph_servers.MAX_STATES` states, or its
        counters the state encoding (:func:`ctmc.ph_servers.check_servers`).

    Returns
    -------
    Station or MultiServerStation
        :class:`Station` for one server, :class:`~ctmc.ph_servers.MultiServerStation` for more.

    Raises
    ------
    ValueError
        For an invalid argument, naming it.

    Examples
    --------
    An M/PH/1/K queue with H2 service (mean 1, scv 3) and arrival rate 0.5;
    for a large capacity its mean number of jobs is the Pollaczek-Khinchine
    value :math:`\rho + \rho^2(1 + c^2)/(2(1-\rho))`:

    >>> import ctmc
    >>> from ctmc import ph
    >>> lam, K = 0.5, 120
    >>> m = ctmc.Model("mph1k")
    >>> n = m.var("n", 0, K)
    >>> server = ph.add_service(m, ph.fit(1.0, 3.0), n, name="server")
    >>> server.arrival("arrival", rate=lam)
    ('arrival', 'arrival_server_start_1', 'arrival_server_start_2')
    >>> chain = m.build(initial={"n": 0, "server_phase": 0})
    >>> pi = chain.stationary().pi
    >>> L = float(pi @ chain.states["n"])
    >>> rho = lam * 1.0
    >>> round(L, 8), round(rho + rho ** 2 * (1 + 3.0) / (2 * (1 - rho)), 8)
    (1.5, 1.5)

    A tandem of two stations, the second with a finite buffer that blocks
    the first:

    >>> m = ctmc.Model("tandem")
    >>> n1, n2 = m.var("n1", 0, 10), m.var("n2", 0, 3)
    >>> s2 = ph.add_service(m, ph.erlang(2, mean=0.5), n2, name="s2")
    >>> s1 = ph.add_service(m, ph.fit(0.8, 2.0), n1, name="s1", to=s2)
    >>> _ = s1.arrival("arrival", rate=1.0)
    >>> chain = m.build(initial={"n1": 0, "n2": 0, "s1_phase": 0, "s2_phase": 0})
    >>> res = chain.stationary()
    >>> thr = sum(chain.event_rate(e) @ res.pi for e in s2.completion_events)
    >>> bool(abs(thr - 1.0 * (1 - res.pi[chain.states["n1"] == 10].sum())) < 1e-10)
    True
    """
    if not isinstance(model, Model):
        raise ValueError(f"model: expected a ctmc.Model, got {type(model).__name__}")
    if not isinstance(law, PhaseType):
        raise ValueError(f"law: expected a ctmc.ph.PhaseType (e.g. ph.fit(mean, scv)), got "
                         f"{type(law).__name__}")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"name: expected an identifier (it prefixes event and variable names), got {name!r}")
    if isinstance(speed, (int, float, np.integer, np.floating)) and not isinstance(speed, bool):
        positive_number("speed", speed)
    if not isinstance(queue, Var) or queue.lo != 0 or queue.hi < 1:
        raise ValueError(f"queue: expected a variable of the model with bounds 0..K, K >= 1, got {queue!r}")
    declared = {v.name: v for v in model.variables}
    if declared.get(queue.name) is not queue:
        raise ValueError(f"queue: {queue!r} is not a variable of model {model.name!r}")
    if to is not None and (not isinstance(to, StationBase) or to.model is not model):
        raise ValueError("to: expected a station of the same model (returned by add_service)")
    if to is not None and to.queue is queue:
        raise ValueError("to: a station cannot send its jobs to itself")
    c = check_servers(servers, queue, law)
    if to is not None:
        to.check_update(update, "update")
    if c > 1:
        if phase is not None:
            raise ValueError(f"phase: a station of {c} servers keeps one counter per phase "
                             f"({name}_busy_1..), not a phase variable: leave phase out")
        with model._all_or_nothing():       # a refused event: no counter or event of the station is left
            return add_servers(model, law, queue, c, name=name, guard=guard, speed=speed, update=update,
                               to=to)
    with model._all_or_nothing():           # a refused event: no phase variable or event is left
        return _one_server(model, law, queue, phase, declared, name, guard, speed, update, to)


def _one_server(model, law, queue, phase, declared, name, guard, speed, update, to) -> Station:
    """The single-server part of :func:`add_service` (its arguments checked there)."""
    mph = law.n_phases
    if phase is not None and (not isinstance(phase, Var) or declared.get(phase.name) is not phase):
        raise ValueError(f"phase: expected a variable of model {model.name!r}, got {phase!r}")
    if phase is not None and (phase.lo > 0 or phase.hi < mph):
        raise ValueError(f"phase: bounds must cover 0..{mph} (0 = empty, 1..{mph} = phase in service), "
                         f"got {phase.lo}..{phase.hi}")
    user = check_update(update, [queue.name, f"{name}_phase" if phase is None else phase.name], "update")
    if phase is None:
        phase = model.var(f"{name}_phase", 0, mph)
    n, j = queue, phase
    work = (n > 0) & guard
    scaled = speed_rule(speed)
    moves = []
    for i0, i1, d, rate in law.phase_moves:
        if i0 == i1:
            nm, at = f"{name}_phase_{i0}_{i0 + d}", (j == i0)
        else:
            nm, at = f"{name}_phase_{i0}_{i0 + d}_through_{i1}_{i1 + d}", (j >= i0) & (j <= i1)
        model.event(nm, guard=work & at, rate=scaled(rate), update={j: j + d})
        moves.append(nm)
    own = [(n == 1, 1.0, {n: 0, j: 0}, "")]
    for k in np.flatnonzero(law.alpha > 0):
        own.append((n >= 2, float(law.alpha[k]), {n: n - 1, j: int(k) + 1}, f"_next_{k + 1}"))
    st = Station(model, law, queue, phase, name, (), ())
    done = declare_completions(st, lambda i: (j == i + 1, None, own), work, user, scaled, to)
    return Station(model, law, queue, phase, name, tuple(moves), done)
