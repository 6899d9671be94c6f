r"""The reduced chain of the two-queue JSQ model (:class:`JSQ2`) and its measures.

The chain and the model are described in :mod:`models.jsq`; the closed forms
the measures are checked against are in :mod:`models.jsq.closed_forms`.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

import ctmc

from .closed_forms import blocking_probability, saturation_mean
from .tibi import saturation_laplace as tibi_saturation_laplace
from .parameters import check_backend, check_parameters

__all__ = ["JSQ2", "JSQMeasures"]


@dataclass(frozen=True)
class JSQMeasures:
    """Main stationary measures of :class:`JSQ2` (see :meth:`JSQ2.measures`).

    Attributes
    ----------
    blocking_probability : float
        :math:`P(x = y = K)`, by PASTA the fraction of arrivals lost.
    mean_shortest, mean_longest, mean_total : float
        :math:`E[x]`, :math:`E[y]`, :math:`E[N]`.
    throughput : float
        :math:`\\rho(1 - P_{\\mathrm{block}})`.
    mean_sojourn_time : float
        Of accepted customers, by Little's law :math:`E[N]/\\text{throughput}`.
    residual : float
        :math:`\\|\\pi Q\\|_1` of the stationary solve.
    status : ctmc.Status
        Status of the stationary solve (a member equals its value:
        ``status == "success"``).
    """

    blocking_probability: float
    mean_shortest: float
    mean_longest: float
    mean_total: float
    throughput: float
    mean_sojourn_time: float
    residual: float
    status: ctmc.Status


#: :meth:`JSQ2.start_vector` keeps the product-form guess unless a fitted log decay rate differs from it
#: by more than this (rho = 0.7, mu2 = 0.2: 0.60; rho = 0.4, mu2 = 0.5: 1.2). Its domain is this start
#: alone (no other family fits a start). At K = 300 the fitted start never cost more than 1 % of the
#: guess's level_iad iterations over 8 parameter sets (gaps 0.08-1.2) and halved them where mu2 is small
#: (rho 0.7/0.8, mu2 0.2/0.1: 626 -> 306, 1296 -> 614); the threshold guards the one case where the fit
#: cost more, rho = 0.95, mu2 = 0.5 at K = 1500 (gap 0.08: 418 against 279). On the supermarket's
#: level_iad the same kind of start (log pi linear in the occupancy counts, fitted at capacity B - 1)
#: saved 3-8 % of the iterations at n = 8-10 (a start fitted on the level law alone changes nothing:
#: the first aggregation sets the level masses)
START_FIT_GAP = 0.3


class JSQ2:
    r"""Two-queue join-the-shortest-queue system with capacity ``K`` per queue.

    Parameters
    ----------
    K : int
        Capacity of each queue, :math:`K \ge 1` (thousands are fine: the
        reduced chain has :math:`(K+1)(K+2)/2` states).
    rho : float
        Total Poisson arrival rate :math:`\rho > 0`.
    mu2 : float
        :math:`\mu_2 \in [0, 1]`, service rate of the longest queue while the
        queues differ; the shortest is served at :math:`\mu_1 = 1 - \mu_2`,
        equal queues at 1/2 each.
    idle_rate : float, optional
        :math:`\nu \in [0, 1]`, service rate of the longest queue while the
        shortest is empty. ``None`` (default) means :math:`\nu = \mu_2`, the
        standard model; larger values mean the idle server helps, smaller
        that it disturbs.

    backend : {"scipy", "petsc"}, optional
        Where the chain lives and is solved. ``"petsc"`` builds it with
        :meth:`ctmc.backends.petsc_backend.DistributedChain.from_model` (each
        MPI process assembles its own block of rows; run the script under
        ``mpirun``) and every analysis runs on PETSc; results are gathered on
        every process, so the measures below are the same calls on both
        backends.

    Notes
    -----
    All stationary measures share one stationary solve (:meth:`stationary`,
    cached on the instance). The default method is ``"auto"`` up to
    :attr:`LEVEL_STATES` states and beyond, where a direct solve's fill no
    longer fits a machine (SuperLU: 5.4 GB at 4.5 million states),
    ``"level_iad"`` on the level :math:`N = x + y`, which every transition
    moves by one, from a start near the answer (:meth:`start_vector`).
    ``solver`` options of the ctmc analyses are passed through ``**options``.
    The saturation means take the same turn (:meth:`saturation_analysis`): beyond
    :attr:`LEVEL_STATES` Kac's formula at :math:`(K, K)` on the cached stationary law and one
    sparse LU on the top levels (``"lu-kac"``), where the regenerative LU of the whole chain
    no longer fits.

    Examples
    --------
    >>> q = JSQ2(K=4, rho=1.3, mu2=0.25, idle_rate=0.6)
    >>> chain = q.chain()
    >>> chain.n_states, chain.states.names
    (15, ('s', 'l'))
    >>> m = q.measures()
    >>> abs(m.blocking_probability / blocking_probability(4, 1.3, 0.25, 0.6) - 1) < 1e-12
    True
    >>> abs(m.mean_sojourn_time * m.throughput - m.mean_total) < 1e-12
    True
    """

    #: beyond this many states :meth:`stationary` uses ``level_iad`` by default (K = 2000: 2.0e6 states)
    LEVEL_STATES = 2_100_000
    #: the floor of :meth:`start_vector`: a subnormal far below the smallest normal double (2.2e-308),
    #: whose plateau the sweeps need not wear down before the balance of the normal states settles,
    #: and still positive after the start is normalised (its sum is below 1e3)
    START_FLOOR = 1e-318
    #: the balance error (``tail_tol``) the level route goes on to by default: the relative imbalance
    #: of every normal state; 1e-11 puts every probability above 2.2e-308 within 1.1e-10 of a sparse
    #: LU solve at K = 1500 (279 iterations); the shared default 1e-6 stopped with 7.6e-6 errors
    LEVEL_TAIL_TOL = 1e-11
    #: :meth:`start_vector`'s two decay rates are fitted to the law of the same queue with this capacity
    #: (at most; one sparse LU of 3321 states)
    START_FIT_K = 80

    def __init__(self, K: int, rho: float, mu2: float, idle_rate: float | None = None, *,
                 backend: str = "scipy"):
        self.K, self.rho, self.mu2, self.nu = check_parameters(K, rho, mu2, idle_rate)
        self.backend = check_backend(backend)
        self.mu1 = 1.0 - self.mu2
        self.idle_rate = idle_rate

    def __repr__(self) -> str:
        tail = "" if self.backend == "scipy" else f", backend={self.backend!r}"
        return f"JSQ2(K={self.K}, rho={self.rho}, mu2={self.mu2}, idle_rate={self.nu}{tail})"

    @property
    def n_states(self) -> int:
        """:math:`(K+1)(K+2)/2`, known before any build."""
        return (self.K + 1) * (self.K + 2) // 2

    # -- chains --------------------------------------------------------------
    def model(self) -> ctmc.Model:
        """The declarative :class:`ctmc.Model` of the reduced chain (variables ``s``, ``l``)."""
        K, rho, mu1, mu2, nu = self.K, self.rho, self.mu1, self.mu2, self.nu
        m = ctmc.Model(f"jsq2(K={K})")
        s = m.var("s", 0, K)
        l = m.var("l", 0, K)
        m.event("arrive_short", guard=s < l, rate=rho, update={s: s + 1})
        m.event("arrive_equal", guard=(s == l) & (l < K), rate=rho, update={l: l + 1})
        m.event("blocked", guard=(s == K) & (l == K), rate=rho, update={})
        m.event("serve_short", guard=(s >= 1) & (s < l), rate=mu1, update={s: s - 1})
        m.event("serve_long", guard=(s >= 1) & (s < l), rate=mu2, update={l: l - 1})
        m.event("serve_equal", guard=(s == l) & (s >= 1), rate=1.0, update={s: s - 1})
        m.event("serve_alone", guard=(s == 0) & (l >= 1), rate=nu, update={l: l - 1})
        return m

    @cached_property
    def _chain(self):
        # every (x, y) is reachable from some (0, y) by arrivals (also when
        # mu1 = 0, where (0, 0) alone reaches only |x - y| <= 1)
        initial = [{"s": 0, "l": y} for y in range(self.K + 1)]
        if self.backend == "petsc":
            from ctmc.backends.petsc_backend import DistributedChain
            return DistributedChain.from_model(self.model(), initial, gather="all")
        return self.model().build(initial=initial)

    def chain(self):
        """The reduced chain on ``(s, l)`` = (shortest, longest), built once and cached.

        All :math:`(K+1)(K+2)/2` states :math:`0 \\le s \\le l \\le K`, ordered
        by ``s`` then ``l``. With :math:`\\mu_2 = 1` the states with
        :math:`l - s \\ge 2` are transient (left, never re-entered). On the
        PETSc backend a :class:`~ctmc.backends.petsc_backend.DistributedChain`
        (this process's rows; the state table and the analyses' results on
        every process).
        """
        return self._chain

    def full_model(self) -> ctmc.Model:
        """The unreduced model on ``(q1, q2)``; ties send an arrival to each queue with probability 1/2.

        Lumping ``(q1, q2) -> (min, max)`` gives :meth:`chain`; the tests
        check this reduction.
        """
        K, rho, mu1, mu2, nu = self.K, self.rho, self.mu1, self.mu2, self.nu
        m = ctmc.Model(f"jsq2-full(K={K})")
        q1 = m.var("q1", 0, K)
        q2 = m.var("q2", 0, K)
        m.event("arrive_1", guard=(q1 < q2) | ((q1 == q2) & (q1 < K)),
                rate=ctmc.where(q1 == q2, rho / 2, rho), update={q1: q1 + 1})
        m.event("arrive_2", guard=(q2 < q1) | ((q1 == q2) & (q2 < K)),
                rate=ctmc.where(q1 == q2, rho / 2, rho), update={q2: q2 + 1})
        # queue 1 is served at mu1 when shorter, mu2 (nu if q2 empty) when longer, 1/2 on ties
        rate1 = ctmc.where(q1 == q2, 0.5, ctmc.where(q1 < q2, mu1, ctmc.where(q2 == 0, nu, mu2)))
        rate2 = ctmc.where(q1 == q2, 0.5, ctmc.where(q2 < q1, mu1, ctmc.where(q1 == 0, nu, mu2)))
        m.event("serve_1", guard=q1 >= 1, rate=rate1, update={q1: q1 - 1})
        m.event("serve_2", guard=q2 >= 1, rate=rate2, update={q2: q2 - 1})
        return m

    def full_chain(self) -> ctmc.CTMC:
        """The unreduced chain on ``(q1, q2)`` (``(K+1)**2`` states)."""
        init = [{"q1": 0, "q2": y} for y in range(self.K + 1)] + [{"q1": y, "q2": 0} for y in range(1, self.K + 1)]
        return self.full_model().build(initial=init)

    # -- stationary measures ---------------------------------------------------
    def levels(self) -> np.ndarray:
        """The level :math:`N = x + y` of every state, in chain order (every transition moves it by one)."""
        st = self.chain().states
        return (st["s"] + st["l"]).astype(np.int64)

    def start_vector(self) -> np.ndarray:
        r"""A positive start for the iterative stationary solves, near the answer in shape.

        :math:`\alpha^{N} \beta^{d}` (normalised) with :math:`N = x + y`, :math:`d = y - x`;
        :math:`\log\alpha, \log\beta` are the least squares fit of :math:`\log \pi` on the law of
        the same queue with capacity :math:`K_0 = \min(K,` :attr:`START_FIT_K` :math:`)` (one sparse
        LU), over its states below :math:`K_0 - 2` and above 1e-280. Where that falls below the
        normal range, the product-form guess :math:`\rho^N (\mu_1/(\rho + \mu_2))^d` (heavier
        there), floored at :attr:`START_FLOOR` (positive on every state). The guess alone
        is far off when the long queue is slow:
        at :math:`\rho = 0.7, \mu_2 = 0.2` the law falls by 0.347 per step of :math:`y` along
        :math:`x = 0`, the guess by 0.62, so the start was 1e152 too heavy in that corner at
        :math:`K = 600`, and the sweeps, which wear such a region down from its edges only, left
        errors of 1e16 after 1000 iterations (fitted: :math:`\beta = 0.49`, 514 iterations, 1.3e-10
        from LU). A constant is locally stationary in the interior (the in-rates of a
        state add up to its exit rate), so the sweeps wear a floor plateau
        down only from its edges, one level per sweep; the states just above
        the smallest normal double, where the balance check starts, take
        their in-flow from it: a floor of 1e-310 left them 2e-4 off at
        K = 1500 (balance 1.8e-6 after 461 iterations), one at 1e-318 (deep
        in the subnormals) 1e-10 off after 279. The uniform start of
        the solvers puts a mass of :math:`1/n` on states whose probability is
        :math:`10^{-200}`, which Gauss-Seidel sweeps then take hundreds of
        sweeps to remove; the level masses are recomputed by the first
        aggregation either way.
        """
        st = self.chain().states
        x, y = st["s"].astype(float), st["l"].astype(float)
        def shape(log_a, log_b):
            logx = (x + y) * log_a + (y - x) * log_b
            return np.exp(logx - logx.max())

        rates, guess = self._start_rates(), self._start_guess()
        g = shape(*guess)
        if rates == guess:
            return np.maximum(g, self.START_FLOOR)
        f = shape(*rates)
        f, g = f / f.sum(), g / g.sum()
        # below the normal range the product-form guess (heavier there): the balance is checked on normal
        # states only, and the lighter fitted start feeding them left the states just above 2.2e-308
        # 2.3e-9 off when the check was met (K = 600, rho = 0.4)
        return np.where(f < np.finfo(float).tiny, np.maximum(g, self.START_FLOOR), f)

    def _start_guess(self) -> tuple:
        """``(log rho, log(mu1 / (rho + mu2)))``: the product-form guess of the start's decay rates."""
        return np.log(self.rho), np.log(max(self.mu1, 1e-300) / (self.rho + self.mu2))

    def _start_rates(self) -> tuple:
        """``(log alpha, log beta)`` of :meth:`start_vector`: fitted on the law at capacity
        ``min(K, START_FIT_K)``; the product-form guess where too few states are in range or the fit
        is within :data:`START_FIT_GAP` of it (rho = 0.95, mu2 = 0.5: 0.08; the fitted start took 418
        iterations at K = 1500 and put the edge 1.6e-9 off, the guess 279 and 1.1e-10)."""
        guess = self._start_guess()
        k0 = min(self.K, self.START_FIT_K)
        if k0 < 4:
            return guess
        small = JSQ2(k0, self.rho, self.mu2, self.idle_rate)
        p = small.stationary("lu").pi
        st = small.chain().states
        s, l = st["s"].astype(float), st["l"].astype(float)
        ok = (p > 1e-280) & (l <= k0 - 3)
        if np.count_nonzero(ok) < 3:
            return guess
        A = np.column_stack([np.ones(int(ok.sum())), (s + l)[ok], (l - s)[ok]])
        coef = np.linalg.lstsq(A, np.log(p[ok]), rcond=None)[0]
        gap = max(abs(coef[1] - guess[0]), abs(coef[2] - guess[1]))
        if not np.all(np.isfinite(coef)) or gap <= START_FIT_GAP:
            return guess
        return float(coef[1]), float(coef[2])

    def stationary(self, method: str | None = None, **options):
        """Stationary law of the reduced chain (a :class:`ctmc.StationaryResult`, cached per method).

        ``method=None`` (default) is ``"auto"`` up to :attr:`LEVEL_STATES` states and
        ``"level_iad"`` on the levels :meth:`levels` from :meth:`start_vector` beyond, to the balance
        error :attr:`LEVEL_TAIL_TOL` unless ``tail_tol`` is given;
        any ctmc stationary method and its options may be given (``check=False``: the law is returned
        whatever its status, and cached once either way).
        """
        if method is None:
            method = "auto" if self.n_states <= self.LEVEL_STATES else "level_iad"
        check = options.pop("check", True)              # one law, checked or not: cached once
        key = (method, tuple(sorted((k, v if np.isscalar(v) or v is None else id(v))
                                    for k, v in options.items())))
        cache = self.__dict__.setdefault("_stationary_cache", {})
        if key not in cache:
            if method == "level_iad":
                options.setdefault("levels", self.levels())
                options.setdefault("x0", self.start_vector())
                options.setdefault("tail_tol", self.LEVEL_TAIL_TOL)
            cache[key] = self.chain().stationary(method, check=False, **options)
        res = cache[key]
        return res.check(True) if check and not res.status.ok else res

    def blocking_probability(self, source: str = "chain") -> float:
        """Stationary probability that both queues are full (= fraction of arrivals lost, PASTA).

        Parameters
        ----------
        source : {"chain", "closed_form"}
            ``"chain"`` solves the chain with ctmc (relative accuracy down to
            the double range); ``"closed_form"`` evaluates
            :func:`blocking_probability`.
        """
        if source == "closed_form":
            return blocking_probability(self.K, self.rho, self.mu2, self.nu)
        if source != "chain":
            raise ValueError(f"source: expected 'chain' or 'closed_form', got {source!r}")
        res = self.stationary()
        return float(res.pi[self.chain().index(s=self.K, l=self.K)])

    def measures(self) -> JSQMeasures:
        """Blocking, mean queue lengths, throughput and mean sojourn time (Little)."""
        res = self.stationary()
        st = self.chain().states
        x, y = st["s"].astype(float), st["l"].astype(float)
        pb = float(res.pi[self.chain().index(s=self.K, l=self.K)])
        ex, ey = res.expect(x), res.expect(y)
        thr = self.rho * (1.0 - pb)
        return JSQMeasures(blocking_probability=pb, mean_shortest=ex, mean_longest=ey,
                           mean_total=ex + ey, throughput=thr, mean_sojourn_time=(ex + ey) / thr,
                           residual=res.residual, status=res.status)

    def total_number_law(self) -> np.ndarray:
        """Stationary law of :math:`N = x + y` on ``0..2K`` from the chain."""
        res = self.stationary()
        st = self.chain().states
        return np.bincount(st["s"] + st["l"], weights=res.pi, minlength=2 * self.K + 1)

    def longest_queue_law(self) -> np.ndarray:
        """Stationary law of the longest queue on ``0..K`` from the chain."""
        res = self.stationary()
        return np.bincount(self.chain().states["l"], weights=res.pi, minlength=self.K + 1)

    # -- saturation ----------------------------------------------------------
    def _saturated(self):
        K = self.K
        return lambda env: (env["s"] == K) & (env["l"] == K)

    def saturation_times(self, moments: int = 1, source: str = "chain", **options) -> np.ndarray:
        """Mean hitting time of saturation ``(K, K)`` from every state.

        Parameters
        ----------
        moments : int
            1 returns the means, shape ``(n_states,)``; ``k > 1`` returns the
            first ``k`` moments, shape ``(k, n_states)`` (chain only).
        source : {"chain", "closed_form"}
            ``"chain"``: ctmc's hitting-time analysis; ``"closed_form"``:
            :func:`saturation_mean`.

        Returns
        -------
        ndarray aligned with ``chain().states``.
        """
        if source == "closed_form":
            if moments != 1:
                raise ValueError("moments: the closed form gives the mean only (moments=1)")
            if options:
                raise ValueError(f"options: {sorted(options)} apply to source='chain' only")
            st = self.chain().states
            return saturation_mean(self.K, self.rho, self.mu2, self.nu,
                                   states=np.column_stack([st["s"], st["l"]]))
        if source != "chain":
            raise ValueError(f"source: expected 'chain' or 'closed_form', got {source!r}")
        res = self.saturation_analysis(moments, **options)
        return res.mean if moments == 1 else res.moments

    def saturation_analysis(self, moments: int = 1, **options):
        """The full :class:`ctmc.HittingResult` (status, residual, method) for saturation.

        The route, on both backends: up to :attr:`LEVEL_STATES` states (or with ``moments > 1`` or
        options other than ``check``), ctmc's hitting-time analysis (a sparse LU through a regeneration
        state); beyond, where that factorisation no longer fits a machine, ``"lu-kac"``
        (:func:`ctmc.passage_levels.level_hitting_mean`): the means from the stationary law
        (:meth:`stationary`, cached: Kac's formula at ``(K, K)``) and one sparse LU on the top levels
        of :meth:`levels`, where saturation is not far (on PETSc the band is gathered on every process and
        solved there). ``method="lu-kac"`` asks for it at any size (options ``band_states``, ``check``).

        Examples
        --------
        >>> q = JSQ2(K=30, rho=0.9, mu2=0.3)
        >>> a = q.saturation_analysis(method="lu-kac")
        >>> b = q.saturation_times(source="closed_form")
        >>> a.method, a.status.value, bool(np.allclose(a.mean, b, rtol=1e-9, atol=0))
        ('lu-kac', 'success', True)
        """
        auto = set(options) <= {"check"} and moments == 1 and self.n_states > self.LEVEL_STATES
        if auto or options.get("method") == "lu-kac":
            return self._kac_saturation(moments, auto, **options)
        return self.chain().hitting_times(self._saturated(), moments=moments, **options)

    def _kac_saturation(self, moments, auto, method="lu-kac", check=True, **band):
        """:meth:`saturation_analysis` by ``"lu-kac"`` (the auto route falls back to ctmc's analysis where
        the target's probability is not a normal double: means beyond the double range)."""
        from ctmc.passage_levels import PI_ERROR_PER_BALANCE, level_hitting_mean
        if moments != 1:
            raise ValueError(f"method: 'lu-kac' gives the means (moments=1), got moments={moments}")
        res = self.stationary(check=False)         # its status is passed on (pi_status)
        a = self.chain().index(s=self.K, l=self.K)
        if auto and not res.pi[a] >= np.finfo(float).tiny:
            return self.chain().hitting_times(self._saturated())
        return level_hitting_mean(self.chain(), a, res.pi, self.levels(), check=check,
                                  pi_error=PI_ERROR_PER_BALANCE * res.balance_error, pi_status=res.status,
                                  **band)

    def saturation_laplace(self, s, source: str = "chain", **options):
        r"""Laplace transform :math:`E_{(x,y)}[e^{-s\tau}]` from every state.

        Parameters
        ----------
        s : float or array_like
            Transform points, ``>= 0``.
        source : {"chain", "closed_form"}
            ``"chain"``: ctmc's hitting-time transform on the chain (a
            :class:`ctmc.LaplaceResult`); ``"closed_form"``: the level recursion
            :func:`models.jsq.tibi.saturation_laplace` (a ``SaturationLaplace``
            in log space, :math:`O(K^2)` per point, any K), in chain order.

        Examples
        --------
        >>> q = JSQ2(K=12, rho=0.9, mu2=0.3)
        >>> a = q.saturation_laplace([0.05]).values
        >>> b = q.saturation_laplace([0.05], source="closed_form").values
        >>> bool(np.allclose(a, b, rtol=1e-10, atol=0))
        True
        """
        if source == "closed_form":
            if options:
                raise ValueError(f"options: {sorted(options)} apply to source='chain' only")
            st = self.chain().states
            return tibi_saturation_laplace(self.K, self.rho, self.mu2, self.nu, s,
                                           states=np.column_stack([st["s"], st["l"]]))
        if source != "chain":
            raise ValueError(f"source: expected 'chain' or 'closed_form', got {source!r}")
        return self.chain().hitting_laplace(self._saturated(), s, **options)

    def first_equality(self, s=None, t=None, sources=None, levels=None, **options):
        r"""Joint law of (time, common length) at the first queue-length equality.

        From unequal states :math:`x < y`, the time
        :math:`T = \inf\{t: x_t = y_t\}` and the common length :math:`x_T`:
        transform :math:`E_{(x,y)}[e^{-sT}; x_T = k]` at points ``s`` and/or
        the joint CDF :math:`P_{(x,y)}(T \le t, x_T = k)` at times ``t``
        (:func:`models.jsq.first_equality.first_equality`, where the cost and
        the shape of the answer are argued).

        Parameters
        ----------
        s, t : float or array_like, optional
            Transform points and times.
        sources : dict, list of dict, expression or callable, optional
            Starting states (default: every unequal state). One transposed
            solve per source, on the states it can visit (``l`` at most its
            own): a source at ``K = 2000`` is one sparse factorisation.
        levels : int or iterable of int, optional
            The common lengths whose columns are computed (default all): one
            solve per level gives its column from every source. The law from
            every unequal state over every level has about :math:`K^3/3`
            numbers; ask for it level block by level block
            (:func:`models.jsq.first_equality.level_blocks`).
        **options
            Of :meth:`ctmc.CTMC.first_passage` (``method``, ``backend``, ...).

        Returns
        -------
        ctmc.FirstPassageResult
            Rows are the starting states (``result.sources``), columns the
            equal states ``(k, k)`` (``result.targets``), in chain order.

        Examples
        --------
        >>> q = JSQ2(K=30, rho=0.9, mu2=0.3)
        >>> fp = q.first_equality(s=[0.0], sources={"s": 2, "l": 7})
        >>> fp.probabilities.shape, round(float(fp.probabilities.sum()), 12)
        ((1, 31), 1.0)
        """
        from .first_equality import first_equality
        return first_equality(self, s=s, t=t, sources=sources, levels=levels, **options)
