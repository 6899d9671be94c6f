"""The five analyses as methods, with one call shape for every chain and backend.

:class:`Analyses` is mixed into :class:`ctmc.CTMC` (default backend
``"scipy"``) and into the PETSc backend's ``DistributedChain`` (backend
``"petsc"`` only). Every analysis takes its problem's own arguments first,
then ``method`` (the algorithm, one name per algorithm on every backend, ``"auto"``
by default), then keyword-only ``backend``, ``check``, ``backend_options``
(settings that exist on one backend only, such as PETSc's options database or
where result vectors are gathered) and the method's options, validated before
any heavy work against the method's frozen options class.
"""
from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["Analyses"]


def _drop_point_axes(res, fields: dict):
    """The shape convention of :mod:`ctmc.results`: a scalar ``t`` or ``s`` gives no leading axis."""
    change = {f: getattr(res, f)[0] for f, pts in fields.items()
              if pts is not None and np.ndim(pts) == 0 and getattr(res, f) is not None}
    return dataclasses.replace(res, **change) if change else res


class Analyses:
    """Mixin giving a chain ``stationary``, ``hitting_times``, ``hitting_laplace``,
    ``first_passage`` and ``transient``."""

    #: backend used when ``backend=None``
    default_backend = "scipy"
    #: backends this kind of chain can run on (None: every registered one)
    allowed_backends = None

    def _named_set(self, spec, name="target"):
        """A label name as its set of states; anything else unchanged."""
        if isinstance(spec, str):
            labels = getattr(self, "labels", None) or {}
            if spec not in labels:
                raise ValueError(f"{name}: no label {spec!r}; this chain has {sorted(labels)}")
            return labels[spec]
        return spec

    def _values(self, spec, name="reward"):
        """Per-state values from an array, a constant, an expression or a reward name (whole vector)."""
        from .sets import owned_values
        return owned_values(spec, getattr(self, "states", None), self.n_states, name=name,
                            named=self.named_vectors(), finite=True)

    def named_vectors(self) -> dict:
        """Names usable as per-state values: the rewards, and the labels as 0/1 indicators."""
        out = {k: np.asarray(v, dtype=float) for k, v in (getattr(self, "labels", None) or {}).items()}
        out.update(getattr(self, "rewards", None) or {})
        return out

    def _bind(self, res):
        if isinstance(res, list):
            return [self._bind(r) for r in res]
        return res._bind(self)

    def resolve_backend(self, backend) -> str:
        """The backend an analysis of this chain runs on: ``backend``, or the chain's default for None;
        a backend this kind of chain cannot run on is refused by name."""
        name = self.default_backend if backend is None else backend
        if self.allowed_backends is not None and name not in self.allowed_backends:
            raise ValueError(f"backend: a {type(self).__name__} runs on {list(self.allowed_backends)} only, "
                             f"got {name!r}")
        return name

    def stationary(self, method: str = "auto", *, backend=None, check: bool = True, per_class: bool = False,
                   backend_options=None, **options):
        """Stationary distribution: solve ``pi Q = 0``, ``sum(pi) = 1``.

        Parameters
        ----------
        method : str
            A key of :data:`ctmc.stationary.METHODS`: ``"auto"``, ``"gth"``,
            ``"lu"``, ``"power"``, ``"gauss_seidel"``, ``"sor"``, ``"gmres"``,
            ``"bicgstab"``, ``"eig"``, ``"level_iad"``, ``"multilevel"``, ``"given"`` (a law
            computed elsewhere, ``x0=``, graded and bounded); see
            :mod:`ctmc.stationary` for what each does and its options class.
        backend : str, optional
            ``"scipy"`` (default for a :class:`~ctmc.CTMC`) or ``"petsc"``.
        check : bool
            Raise :class:`~ctmc.results.SolverError` if the result is not a
            success (the result is attached); False returns it with its status.
        per_class : bool
            For a chain with several closed classes, return a list with the
            stationary law of each class instead of raising.
        backend_options : dict, optional
            Settings of the backend (``ctmc.backends.<name>.BACKEND_OPTIONS``).
        **options
            Options of the method (e.g. ``tol``, ``maxiter``), validated up front; and
            ``tail_bound=True`` (any method): a proven bound on the relative error of every
            probability, ``info["tail_error_bound"]``, graded against ``tail_tol``
            (:mod:`ctmc.kernels.tail`; one more solve).

        Returns
        -------
        StationaryResult (or a list of them with ``per_class``)

        Raises
        ------
        ReducibleChainError
            Several closed classes (the message lists them).
        """
        from . import stationary as _st
        return self._bind(_st.stationary(self, method, backend=self.resolve_backend(backend), check=check,
                                         per_class=per_class, backend_options=backend_options, **options))

    def hitting_times(self, target, moments: int = 1, method: str = "auto", *, reward=None, backend=None,
                      check: bool = True, backend_options=None, **options):
        """Moments of the hitting time of ``target`` from every state.

        ``T_A = inf{t >= 0 : X_t in A}``; with ``reward`` r, the moments are
        those of the accumulated reward ``int_0^T r(X_s) ds`` instead.

        Parameters
        ----------
        target : mask, expression, callable, dict or indices
            The set ``A`` (non-empty).
        moments : int
            Number of moments ``E[T^m]``, ``m = 1..moments``.
        method : str
            A key of :data:`ctmc.passage.METHODS` (``"auto"``, ``"gth"``,
            ``"lu"``, ``"gmres"``, ``"bicgstab"``).
        reward : array_like, expression or str, optional
            Non-negative per-state reward rates (default 1: the time itself):
            values, an expression of the model's variables (``n1 + 1``) or the
            name of one of the chain's rewards.

        Returns
        -------
        HittingResult
            ``mean`` is ``inf`` where ``A`` is not reached with probability 1.
        """
        from . import passage
        if reward is not None:
            reward = self._values(reward)           # arrays, constants, expressions and names alike
        return self._bind(passage.hitting_times(self, self._named_set(target), moments, method, reward=reward,
                                                backend=self.resolve_backend(backend), check=check,
                                                backend_options=backend_options, **options))

    def hitting_laplace(self, target, s, method: str = "auto", *, backend=None, check: bool = True,
                        backend_options=None, **options):
        """Laplace-Stieltjes transform ``E_i[exp(-s T_A)]`` from every state.

        Parameters
        ----------
        target : mask, expression, callable, dict or indices
        s : float or array_like of float, each >= 0
            With ``s = 0`` this is the probability of ever reaching ``A``.
        method : str
            As for :meth:`hitting_times`.

        Returns
        -------
        LaplaceResult
        """
        from . import passage
        res = passage.hitting_laplace(self, self._named_set(target), s, method, backend=self.resolve_backend(backend),
                                      check=check, backend_options=backend_options, **options)
        return self._bind(_drop_point_axes(res, {"values": s}))

    def first_passage(self, target, s=None, t=None, method: str = "auto", *, sources=None, targets=None,
                      eps: float = 1e-300, max_terms: int = 10_000_000, backend=None, check: bool = True,
                      backend_options=None, **options):
        """Joint law of the time and place of the first entrance into ``target``.

        Parameters
        ----------
        target : mask, expression, callable, dict or indices
        s : float or array_like, optional
            Transform points (>= 0) for ``E_i[exp(-s T); X_T = j]``.
        t : float or array_like, optional
            Times (>= 0) for the joint CDF ``P_i(T <= t, X_T = j)`` (uniformisation).
        method : str
            Linear solver of the transform systems, as for :meth:`hitting_times`.
        sources : mask, expression, dict or indices, optional
            Starting states (rows of the answer); default all states.
        targets : mask, expression, dict or indices, optional
            The states of ``target`` whose columns are computed (default all);
            with many sources, ask for the columns needed (one solve each).
        eps : float
            Uniformisation: neglected Poisson mass per time point (default
            :data:`ctmc.transient.TAIL_EPS`: small CDF values keep their relative accuracy).
        max_terms : int
            Refuse a CDF needing more uniformisation steps than this.

        Returns
        -------
        FirstPassageResult
        """
        from . import passage
        res = passage.first_passage(self, self._named_set(target), s, t, method,
                                    sources=self._named_set(sources, "sources"),
                                    targets=self._named_set(targets, "targets"), eps=eps, max_terms=max_terms,
                                    backend=self.resolve_backend(backend), check=check,
                                    backend_options=backend_options, **options)
        return self._bind(_drop_point_axes(res, {"laplace": s, "cdf": t}))

    def transient(self, p0, t, method: str = "auto", *, backend=None, check: bool = True, backend_options=None,
                  **options):
        """Transient distribution ``p(t) = p0 exp(Q t)`` for one or many ``t``.

        Parameters
        ----------
        p0 : array_like, mask, expression, label name or dict
            Initial law (non-negative, summing to 1), or a set of states
            (uniform law on it: a set of indices, a boolean expression, a
            label), or one state as ``{var: value}``, or a numeric expression
            of the variables (weights, normalised).
        t : float or array_like of float >= 0
        method : str
            A key of :data:`ctmc.transient.METHODS`: ``"auto"``,
            ``"uniformization"``, ``"expm"``.

        Returns
        -------
        TransientResult
        """
        from . import transient
        res = transient.transient(self, self._named_set(p0, "p0"), t, method, backend=self.resolve_backend(backend),
                                  check=check, backend_options=backend_options, **options)
        return self._bind(_drop_point_axes(res, {"p": t}))

    # one-liners (Storm's usual questions) -------------------------------------
    def prob_within(self, target, t, p0=None, *, eps: float = 1e-300, max_terms: int = 10_000_000,
                    backend=None, check: bool = True, error_tol=None):
        """Probability of reaching ``target`` within time ``t``: ``P(T_A <= t)``.

        Parameters
        ----------
        target : mask, expression, label name, callable, dict or indices
        t : float or array_like of float >= 0
        p0 : initial law or set of states, optional
            Default: the chain's initial state(s) (uniform over them).
        eps : float
            Poisson mass left out of the uniformisation sum; the default
            (:data:`ctmc.transient.TAIL_EPS`) keeps relative accuracy for
            probabilities far below 1.
        error_tol : float, optional
            Largest accepted ``error_bound`` (relative to the largest value possible)
            before ``INACCURATE``; default :class:`ctmc.options.Tolerances`' ``error_tol``.

        Returns
        -------
        MeasureResult
            ``value``: from ``p0``; ``values``: from every state
            (``result.at(n=3)``); ``error_bound``: absolute (uniformisation).
            See :mod:`ctmc.measures`.
        """
        from . import measures
        res = measures.prob_within(self, self._named_set(target), t, self._named_set(p0, "p0"), eps=eps,
                                   max_terms=max_terms, backend=self.resolve_backend(backend), check=check,
                                   error_tol=error_tol)
        return self._bind(_drop_point_axes(res, {"value": t, "values": t}))

    def cumulative_reward(self, reward, t, p0=None, *, eps: float = 1e-300, max_terms: int = 10_000_000,
                          backend=None, check: bool = True, error_tol=None):
        """Expected reward accumulated up to ``t``: ``E[int_0^t r(X_s) ds]``.

        Parameters
        ----------
        reward : array_like, number, expression or reward name
        t : float or array_like of float >= 0
        p0 : initial law or set of states, optional (default: the chain's initial states)
        error_tol : float, optional
            Largest accepted ``error_bound`` relative to ``max|r| t`` before ``INACCURATE``
            (default :class:`ctmc.options.Tolerances`' ``error_tol``).

        Returns
        -------
        MeasureResult
            ``value`` from ``p0``, ``values`` from every state; see :mod:`ctmc.measures`.
        """
        from . import measures
        res = measures.cumulative_reward(self, reward, t, self._named_set(p0, "p0"), eps=eps,
                                         max_terms=max_terms, backend=self.resolve_backend(backend), check=check,
                                         error_tol=error_tol)
        return self._bind(_drop_point_axes(res, {"value": t, "values": t}))

    def long_run(self, p0=None, method: str = "auto", *, backend=None, check: bool = True, **options):
        """Long-run law ``lim p0 exp(Qt)``, also for chains with several closed classes.

        Each closed class's stationary law, weighted by the probability of
        entering the class from ``p0`` (default: the chain's initial
        states). On an irreducible chain this is :meth:`stationary`.

        Returns
        -------
        StationaryResult
            ``info["absorption"]``: the class weights; see :mod:`ctmc.measures`.
        """
        from . import measures
        return self._bind(measures.long_run(self, self._named_set(p0, "p0"), method, backend=backend,
                                            check=check, **options))

    def throughput(self, event, p0=None, method: str = "auto", *, backend=None, check: bool = True,
                   **options):
        """Long-run rate at which a model event fires, under :meth:`long_run`'s law.

        Parameters
        ----------
        event : str, or list, tuple or set of str
            An event name, or several: their rates summed (e.g. ``station.completion_events``
            of :func:`ctmc.ph.add_service`); an unknown name is refused naming it.

        Returns
        -------
        MeasureResult
            ``value`` (also ``float(result)``), with the stationary evidence.
        """
        from . import measures
        return self._bind(measures.throughput(self, event, self._named_set(p0, "p0"), method, backend=backend,
                                              check=check, **options))
