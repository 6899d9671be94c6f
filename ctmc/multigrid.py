r"""Aggregation multigrid as a fixed linear preconditioner for pinned stationary systems.

The system
----------
A pinned stationary solve (:mod:`ctmc.stationary`) asks for :math:`x` with
:math:`A x = b`, :math:`A = -Q_{XX}^T` the generator restricted to the class
without the pin, transposed. :math:`A` is a non-singular M-matrix whose column
sums are non-negative (the rates into the pin), and its solution is
:math:`x = \pi_X / \pi_{pin}`: positive, spread over many orders of magnitude.
Gauss-Seidel sweeps remove the error that varies quickly from a state to its
neighbours; what they leave is smooth *relative to* :math:`\pi`: close to a
multiple of :math:`\pi` on groups of strongly coupled states.

Aggregation and the coarse operator
-----------------------------------
Group the states into aggregates :math:`I` (the 0/1 matrix :math:`T`,
:math:`T_{iI} = [i \in I]`) and give each state its share
:math:`s_i = w_i / W_I` of its aggregate's weight, :math:`W = T^T w`, where
:math:`w > 0` approximates the solution (below). The prolongation
:math:`P = \operatorname{diag}(s)\,T` spreads an aggregate's value over its
states in proportion to :math:`w`, the restriction :math:`T^T` sums, and the
coarse operator is the Galerkin product

.. math::

    A_c = T^T A \operatorname{diag}(s)\, T .

It is the transposed generator of the aggregated chain of iterative
aggregation-disaggregation (:mod:`ctmc.aggregation`, Takahashi 1975) with the
weights frozen at :math:`w`: again a non-singular M-matrix with non-negative
column sums, so it can be aggregated in turn. The flows between aggregates
carry over, :math:`T^T (A\operatorname{diag}(w)) T = A_c \operatorname{diag}(W)`,
so every level is the same problem, with the weights :math:`W`. When
:math:`w = x` the coarse space holds the solution exactly (IAD's fixed point);
this is the Markov-chain multigrid of De Sterck et al. (2010) with the
reweighting by the current iterate replaced by a fixed weight, which keeps
the preconditioner linear, as GMRES needs.

The weights are found once, at set-up, as adaptive multigrid does: a few
symmetric Gauss-Seidel sweeps on the homogeneous system :math:`A w = 0` from
:math:`w = 1`, renormalised, leave the slowest mode of :math:`A`, the error
the sweeps cannot remove, which the coarse levels must represent. When the
pin is improbable, :math:`A` is nearly singular and that mode is close to
:math:`\pi`; pinned at a probable state it is the law conditioned on not
reaching the pin. Aggregates are
chosen on the *flow* matrix :math:`G = \operatorname{diag}(w) A^T`
(:math:`-G_{ij} = w_i Q_{ij}`, the probability flow from state :math:`i` to
:math:`j` under :math:`w`), on its classical strength of connection by rows
(where the flow out of a state goes), by pyamg's standard aggregation
(Vanek, Mandel & Brezina 1996: a greedy pass that makes strong
neighbourhoods aggregates, compiled; from 2 states an aggregate on tandem to
16 on kanban), or by its pairwise matching (Notay 2010: each pass pairs every
state with its strongest neighbour; two passes a level). Pairwise aggregates
give fewer GMRES iterations (fms n=5: 17 against 21) but pyamg's matching
costs 5-10 times the rest of the set-up (benchmarks/README.md).

The cycle
---------
With :math:`A = D + L + U` (diagonal, strictly lower and strictly upper
parts), :math:`v \mapsto Pv` is one V-cycle from zero: a forward Gauss-Seidel sweep on
:math:`A x = v` (from :math:`x = 0` it solves :math:`(D + L)x = v`: only the
lower triangle is read, and the residual is :math:`v - Ax = -Ux`, the strict
upper triangle's product), the
coarse correction :math:`x \leftarrow x + P A_c^{-1} T^T (v - Ax)` (recursively,
by one V-cycle on the coarse level; a sparse LU of the coarsest level, at
most ``coarse_size`` unknowns), then a backward sweep. Every step is linear in
:math:`v` and everything it reads was fixed at set-up, so the preconditioner
is a fixed linear operator. One application costs about two products with
:math:`A` on the fine level (half of one for the forward sweep, half for the
residual, one for the backward sweep) plus that of the coarser levels (the
operator complexity, stored entries of all levels over the finest's, is
1.4 on kanban, 1.6 on fms, 2.2 on tandem).

When it pays
------------
Against the symmetric Gauss-Seidel preconditioner (``"sgs"``), GMRES needs
about half the iterations, and their number hardly grows with the chain
(fms n=4..7: 20-24 against 39-75; tandem c=255..1023: 14 against 25-26;
kanban t=2..5: 15-31 against 23-50), but an application costs about 3.7
products with :math:`A` against 1.4, and the set-up about 60-100. Set-up and
GMRES together take 0.77-0.87 of the time on fms n=5..7, about as long on
kanban t=4..5 (0.96-1.06), longer on tandem (1.1-1.3x) and where
Gauss-Seidel already converges in about ten iterations (polling, cluster:
2.2-2.6x); ``auto`` does not choose it (benchmarks/README.md).

References
----------
H. De Sterck, T. A. Manteuffel, S. F. McCormick, K. Miller, J. Ruge, G. Sanders,
"Algebraic multigrid for Markov chains", SIAM J. Sci. Comput. 32 (2010).
G. Horton, S. T. Leutenegger, "A multi-level solution algorithm for
steady-state Markov chains", ACM SIGMETRICS (1994).
Y. Notay, "An aggregation-based algebraic multigrid method", Electron. Trans.
Numer. Anal. 37 (2010).

Examples
--------
A tandem of two M/M/1/30 queues, pinned at the empty state: GMRES with the
multilevel preconditioner agrees with a direct solve.

>>> import numpy as np, scipy.sparse as sp, scipy.sparse.linalg as sla
>>> from ctmc.krylov import gmres
>>> K = 30; n1, n2 = np.divmod(np.arange((K + 1) ** 2), K + 1)
>>> def idx(a, b): return a * (K + 1) + b
>>> r, c, v = [], [], []
>>> for s in range(n1.size):
...     a, b = n1[s], n2[s]
...     for ok, t, rate in ((a < K, idx(a + 1, b), 1.0), (a > 0 and b < K, idx(a - 1, b + 1), 1.5),
...                         (b > 0, idx(a, b - 1), 2.0)):
...         if ok: r.append(s); c.append(t); v.append(rate)
>>> R = sp.csr_matrix((v, (r, c)), shape=(n1.size, n1.size))
>>> Q = R - sp.diags(np.asarray(R.sum(axis=1)).ravel())
>>> A = (-Q[1:, 1:]).T.tocsr(); b = np.asarray(R[0, 1:].todense()).ravel()
>>> H = setup(A, coarse_size=50)
>>> H.sizes[0], len(H.sizes) > 1
(960, True)
>>> x, rep = gmres(A.dot, b, H, rtol=1e-12, norm_a=float(abs(A).sum(axis=1).max()))
>>> rep.converged, bool(np.allclose(x, sla.spsolve(A.tocsc(), b), rtol=1e-8))
(True, True)
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

from ._relax import one_index_type, sweep

__all__ = ["setup", "Hierarchy", "Level", "Settings", "pairwise_aggregates", "standard_aggregates",
           "galerkin", "near_null", "triangles", "AGGREGATIONS"]

#: smallest share ``w_i / W_I`` a state gets: a state far below its aggregate's weight (or
#: underflowed) still carries its rates, and the coarse operator stays non-singular
SHARE_FLOOR = 1e-150


@dataclass(frozen=True)
class Settings:
    """How :func:`setup` builds the hierarchy.

    Attributes
    ----------
    coarse_size : int
        Coarsen until at most this many unknowns remain (solved by sparse LU).
    matchings : int
        Pairwise matching passes per level (each about halves the unknowns).
    weight_sweeps : int
        Symmetric Gauss-Seidel sweeps on ``A w = 0`` that find the weights.
    theta : float
        Classical strength-of-connection threshold of the matching (pyamg's).
    max_levels : int
        Level limit.
    aggregation : {"standard", "pairwise"}
        How aggregates are found (:data:`AGGREGATIONS`).
    """

    coarse_size: int = 1000
    matchings: int = 2
    weight_sweeps: int = 3
    theta: float = 0.25
    max_levels: int = 25
    aggregation: str = "standard"

    def __post_init__(self):
        for name in ("coarse_size", "matchings", "max_levels"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name}: expected a positive integer, got {v!r}")
        if isinstance(self.weight_sweeps, bool) or not isinstance(self.weight_sweeps, (int, np.integer)) \
                or self.weight_sweeps < 0:
            raise ValueError(f"weight_sweeps: expected an integer >= 0, got {self.weight_sweeps!r}")
        if self.aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation: expected one of {sorted(AGGREGATIONS)}, got {self.aggregation!r}")
        if not 0.0 <= self.theta < 1.0:
            raise ValueError(f"theta: expected 0 <= theta < 1, got {self.theta!r}")


@dataclass(frozen=True)
class Level:
    """One level but the coarsest: its matrix, the aggregate of each unknown and its share."""

    A: sp.csr_matrix
    lower: sp.csr_matrix       # the lower triangle of A with its diagonal (the forward sweep from 0)
    upper: sp.csr_matrix       # the strict upper triangle of A (the residual after that sweep)
    agg: np.ndarray            # aggregate of each unknown, 0..m-1
    share: np.ndarray          # w_i / W_agg(i), floored at SHARE_FLOOR
    m: int                     # unknowns of the next level


def pairwise_aggregates(F: sp.csr_matrix, matchings: int = 2, theta: float = 0.25) -> np.ndarray:
    """Aggregate ids ``0..m-1`` by ``matchings`` passes of pairwise matching on ``F``.

    Each pass takes pyamg's classical strength of connection of the current
    matrix (off-diagonal ``-F_ij >= theta max_k -F_ik``) and pairs each
    unknown with its strongest unpaired neighbour (``amg_core.pairwise_aggregation``,
    compiled); the next pass works on the matrix summed over the pairs.

    >>> F = sp.csr_matrix(np.array([[2., -1, 0, 0], [-1, 2, -1, 0], [0, -1, 2, -1], [0, 0, -1, 2]]))
    >>> pairwise_aggregates(F, 1).tolist()
    [0, 0, 1, 1]
    >>> pairwise_aggregates(F, 2).tolist()
    [0, 0, 0, 0]
    """
    from pyamg import amg_core
    from pyamg.strength import classical_strength_of_connection

    n = F.shape[0]
    agg = np.arange(n, dtype=np.int64)
    C = F
    for k in range(matchings):
        S = classical_strength_of_connection(C, theta=theta, norm="min")
        S = one_index_type(sp.csr_matrix(S))
        ids = np.empty(S.shape[0], dtype=S.indptr.dtype)
        cpts = np.empty(S.shape[0], dtype=S.indptr.dtype)
        m = amg_core.pairwise_aggregation(S.shape[0], S.indptr, S.indices, S.data, ids, cpts)
        if m == 0:
            break
        ids = ids.astype(np.int64) - 1
        agg = ids[agg]
        if k + 1 < matchings:
            C = galerkin(C, ids, np.ones(ids.size), m)
    return agg


def standard_aggregates(F: sp.csr_matrix, matchings: int = 2, theta: float = 0.25) -> np.ndarray:
    """Aggregate ids ``0..m-1``: pyamg's standard aggregation on the strong couplings of ``F``.

    ``F_ij`` is the flow from unknown ``i`` to ``j`` (any sign: its magnitude
    counts; the diagonal is ignored). ``j`` is a strong neighbour of ``i`` when
    ``|F_ij| >= theta max_k |F_ik|`` (classical strength of connection, by
    rows: where the flow out of ``i`` goes). A greedy pass then makes every
    unknown with no aggregated strong neighbour the root of a new aggregate of
    its strong neighbourhood, and the rest join a neighbouring aggregate
    (Vanek, Mandel & Brezina 1996; compiled, ``amg_core.standard_aggregation``).
    Unknowns with no strong coupling stay alone. ``matchings`` is ignored (one
    pass).

    >>> F = sp.csr_matrix(np.array([[2., -1, 0, 0], [-1, 2, -1, 0], [0, -1, 2, -1], [0, 0, -1, 2]]))
    >>> standard_aggregates(F).tolist()
    [0, 0, 1, 1]
    >>> W = sp.csr_matrix(np.array([[0, 5, 1e-9, 0], [5, 0, 0, 0], [1e-9, 0, 0, 2], [0, 0, 2, 0.]]))
    >>> standard_aggregates(W).tolist()     # the weak coupling 1e-9 is never aggregated across
    [0, 0, 1, 1]
    """
    from pyamg import amg_core

    F = one_index_type(sp.csr_matrix(F, dtype=float))
    n = F.shape[0]
    Sp, Sj, Sx = np.empty_like(F.indptr), np.empty_like(F.indices), np.empty_like(F.data)
    amg_core.classical_strength_of_connection_abs(n, theta, F.indptr, F.indices, F.data, Sp, Sj, Sx)
    # by rows only: symmetrising (S + S^T) was a third of the set-up on kanban t=5 and gave
    # 25 GMRES iterations on tandem c=511 against 14 (benchmarks/README.md)
    ids = np.empty(n, dtype=Sp.dtype)
    roots = np.empty(n, dtype=Sp.dtype)
    m = amg_core.standard_aggregation(n, Sp, Sj, ids, roots)
    agg = ids.astype(np.int64)                # -1 marks an unknown left out: it stays alone
    alone = np.flatnonzero(agg < 0)
    agg[alone] = m + np.arange(alone.size)
    return agg


#: how the aggregates of a level are found from its flow matrix
AGGREGATIONS = {"pairwise": pairwise_aggregates, "standard": standard_aggregates}


def galerkin(A: sp.csr_matrix, agg: np.ndarray, share: np.ndarray, m: int) -> sp.csr_matrix:
    """``T^T A diag(share) T`` for the aggregation ``T`` of ``agg`` (``m`` aggregates), as CSR.

    >>> A = sp.csr_matrix(np.array([[3., -1, -2], [-1, 2, 0], [-2, -1, 2]]))
    >>> galerkin(A, np.array([0, 0, 1]), np.array([0.5, 0.5, 1.0]), 2).toarray()
    array([[ 1.5, -2. ],
           [-1.5,  2. ]])
    """
    n = A.shape[0]
    # A P: each column index moved to its aggregate, the value scaled by its share (row i of A P
    # then holds duplicates, which the product with T^T sums along with the rows)
    AP = sp.csr_matrix((A.data * share[A.indices], agg[A.indices], A.indptr), shape=(n, m))
    Tt = sp.csr_matrix((np.ones(n), agg, np.arange(n + 1, dtype=np.int64)), shape=(n, m)).T.tocsr()
    return (Tt @ AP).tocsr()       # the product sums the duplicates (its rows are left unsorted)


def triangles(A: sp.csr_matrix) -> tuple:
    """``(lower, upper)``: the lower triangle of ``A`` with its diagonal, and the strict upper one.

    >>> L, U = triangles(sp.csr_matrix(np.array([[1., 2], [3, 4]])))
    >>> L.toarray().tolist(), U.toarray().tolist()
    ([[1.0, 0.0], [3.0, 4.0]], [[0.0, 2.0], [0.0, 0.0]])
    """
    n = A.shape[0]
    rows = np.repeat(np.arange(n, dtype=A.indices.dtype), np.diff(A.indptr))
    low = A.indices <= rows
    out = []
    for keep in (low, ~low):
        ptr = np.zeros(n + 1, dtype=A.indptr.dtype)
        np.cumsum(np.bincount(rows[keep], minlength=n), out=ptr[1:])
        out.append(sp.csr_matrix((A.data[keep], A.indices[keep], ptr), shape=A.shape))
    return tuple(out)


def near_null(A: sp.csr_matrix, sweeps: int, lower=None) -> np.ndarray:
    """Positive weights shaped like the slowest mode of ``A``: symmetric Gauss-Seidel sweeps on ``A w = 0``.

    From ``w = 1``, renormalised after each sweep (mean 1); entries that
    underflow or turn non-positive get the smallest positive entry.

    >>> A = sp.csr_matrix(np.array([[1.0, -0.5], [-1.0, 0.5 + 1e-3]]))
    >>> w = near_null(A, 20); round(float(w[1] / w[0]), 2)    # A's near-null vector is about (1, 2)
    2.0
    """
    n = A.shape[0]
    w = np.ones(n)
    zero = np.zeros(n)
    for _ in range(sweeps):
        sweep(A, w, zero, 1.0, "forward")
        sweep(A, w, zero, 1.0, "backward")
        s = float(np.abs(w).sum())
        if not np.isfinite(s) or s == 0.0:
            return np.ones(n)
        w *= n / s
    pos = w > 0
    floor = float(w[pos].min()) if pos.any() else 1.0
    return np.where(pos, w, floor)


@dataclass(frozen=True)
class Hierarchy:
    """The levels of :func:`setup`; calling it applies one V-cycle from zero (``v -> P v``).

    Attributes
    ----------
    levels : tuple of Level
    coarse : object
        The sparse LU of the coarsest matrix (``.solve``).
    sizes : list of int
        Unknowns per level, finest first.
    nnz : list of int
        Stored entries per level.
    seconds : float
        Time :func:`setup` took.
    """

    levels: tuple
    coarse: object
    sizes: list = field(default_factory=list)
    nnz: list = field(default_factory=list)
    seconds: float = 0.0

    def __call__(self, v):
        v = np.asarray(v, dtype=float).ravel()
        return self._cycle(0, v)

    def _cycle(self, l, v):
        if l == len(self.levels):
            return self.coarse.solve(v)
        L = self.levels[l]
        x = np.zeros(v.size)
        sweep(L.lower, x, v, 1.0, "forward")       # x = (D + L)^{-1} v: the residual is -U x
        r = -(L.upper @ x)
        e = self._cycle(l + 1, np.bincount(L.agg, weights=r, minlength=L.m))
        x += L.share * e[L.agg]
        sweep(L.A, x, v, 1.0, "backward")
        return x

    @property
    def complexity(self) -> float:
        """Stored entries of all levels over those of the finest (operator complexity)."""
        return float(sum(self.nnz) / max(self.nnz[0], 1))


def setup(A: sp.spmatrix, settings: Settings | None = None, **kw) -> Hierarchy:
    """The multilevel preconditioner of the pinned system matrix ``A`` (see the module docstring).

    Parameters
    ----------
    A : scipy.sparse matrix
        Square non-singular M-matrix with non-negative column sums (``-Q_XX^T``).
    settings : Settings, optional
        Or its fields as keywords.

    Returns
    -------
    Hierarchy
        Callable ``v -> P v`` (a fixed linear operator).
    """
    s = settings if settings is not None else Settings(**kw)
    t0 = time.perf_counter()
    A = one_index_type(sp.csr_matrix(A, dtype=float))
    A.sum_duplicates()
    w = near_null(A, s.weight_sweeps)
    levels, sizes, nnz = [], [A.shape[0]], [A.nnz]
    while A.shape[0] > s.coarse_size and len(levels) + 1 < s.max_levels:
        n = A.shape[0]
        C = A.tocsc()           # its arrays are those of A^T in CSR: G = diag(w) A^T, the flows out
        G = sp.csr_matrix((C.data * np.repeat(w, np.diff(C.indptr)), C.indices, C.indptr), shape=A.shape)
        agg = AGGREGATIONS[s.aggregation](G, s.matchings, s.theta)
        m = int(agg.max()) + 1 if n else 0
        if m > 0.9 * n or m < 1:
            break                      # the graph no longer coarsens
        W = np.bincount(agg, weights=w, minlength=m)
        share = np.maximum(np.divide(w, W[agg], out=np.zeros(n), where=W[agg] > 0), SHARE_FLOOR)
        lower, upper = (one_index_type(T) for T in triangles(A))
        levels.append(Level(A, lower, upper, agg, share, m))
        A = one_index_type(galerkin(A, agg, share, m))
        w = W
        sizes.append(m)
        nnz.append(A.nnz)
    coarse = sla.splu(A.tocsc())
    return Hierarchy(tuple(levels), coarse, sizes, nnz, time.perf_counter() - t0)
