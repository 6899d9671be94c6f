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

__all__ = ["Analyses"]


class Analyses:
    """Mixin giving a chain ``stationary``, ``hitting_times``, ``hitting_laplace``,
    ``first_passage`` and ``transient``."""

    #: backend used when ``backend=None``
    default_backend = "scipy"
    #: backends this kind of chain can run on (None: every registered one)
    allowed_backends = None

    def _backend(self, backend):
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
            ``"bicgstab"``, ``"eig"``, ``"level_iad"``, ``"multilevel"``; see
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
            Options of the method (e.g. ``tol``, ``maxiter``), validated up front.

        Returns
        -------
        StationaryResult (or a list of them with ``per_class``)

        Raises
        ------
        ReducibleChainError
            Several closed classes (the message lists them).
        """
        from . import stationary as _st
        return _st.stationary(self, method, backend=self._backend(backend), check=check, per_class=per_class,
                              backend_options=backend_options, **options)

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
        reward : array_like, optional
            Non-negative per-state reward rates (default 1: the time itself).

        Returns
        -------
        HittingResult
            ``mean`` is ``inf`` where ``A`` is not reached with probability 1.
        """
        from . import passage
        return passage.hitting_times(self, target, moments, method, reward=reward,
                                     backend=self._backend(backend), check=check,
                                     backend_options=backend_options, **options)

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
        return passage.hitting_laplace(self, target, s, method, backend=self._backend(backend), check=check,
                                       backend_options=backend_options, **options)

    def first_passage(self, target, s=None, t=None, method: str = "auto", *, sources=None,
                      eps: float = 1e-13, max_terms: int = 10_000_000, backend=None, check: bool = True,
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
        eps : float
            Uniformisation: neglected Poisson mass per time point.
        max_terms : int
            Refuse a CDF needing more uniformisation steps than this.

        Returns
        -------
        FirstPassageResult
        """
        from . import passage
        return passage.first_passage(self, target, s, t, method, sources=sources, eps=eps, max_terms=max_terms,
                                     backend=self._backend(backend), check=check,
                                     backend_options=backend_options, **options)

    def transient(self, p0, t, method: str = "auto", *, backend=None, check: bool = True, backend_options=None,
                  **options):
        """Transient distribution ``p(t) = p0 exp(Q t)`` for one or many ``t``.

        Parameters
        ----------
        p0 : array_like, mask, expression or dict
            Initial law (non-negative, summing to 1), or a set of states
            (uniform law on it), or one state as ``{var: value}``.
        t : float or array_like of float >= 0
        method : str
            A key of :data:`ctmc.transient.METHODS`: ``"auto"``,
            ``"uniformization"``, ``"expm"``.

        Returns
        -------
        TransientResult
        """
        from . import transient
        return transient.transient(self, p0, t, method, backend=self._backend(backend), check=check,
                                   backend_options=backend_options, **options)
