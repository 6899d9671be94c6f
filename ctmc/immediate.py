r"""Immediate moves eliminated exactly: the tangible chain of a model with zero-time moves.

A state where an immediate move (:meth:`ctmc.Model.immediate`) is enabled
with a positive weight :math:`w_k(x)` is *vanishing* (the set :math:`V`),
the others are *tangible* (:math:`T`). With :math:`R` the timed rates out of
the tangible states and :math:`P'` the jump chain of the vanishing states,
self-loops divided out (:math:`P'_{vy} = w_{vy} / \sum_{z \ne v} w_{vz}`),
the absorption probabilities :math:`X = (I - P'_{VV})^{-1} P'_{VT}` give the
tangible generator

.. math::

    Q_{ij} = R_{ij} + \sum_{v \in V} R_{iv} X_{vj} \quad (i \ne j \in T).

:math:`X` is found level by level of the vanishing graph (:func:`eliminate`;
exact sparse products when it is acyclic, a sparse LU per strong component
otherwise). A set of vanishing states the moves cannot leave is a timeless
trap (:func:`trap_error`). :func:`flow` gives a move's expected firings per
unit time from each tangible state, :func:`vanishing` the vanishing states of
a batch. The module docstring of :mod:`ctmc.model` tells the whole story.
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from .results import ModelError, ModelWarning
from .transitions import expand, guard, rate_where, state_text

__all__ = ["eliminate", "trap_error", "vanishing", "flow"]


def eliminate(model, codes, layout, src, dst, val, van, initial):
    """The tangible chain: vanishing states eliminated (the module docstring's equations).

    Returns ``(codes, src, dst, rate, initial, info)`` of the tangible
    states, the transitions with ``Q_TT + R_TV X`` (self-loops dropped),
    and the build information (``vanishing``, ``initial_law``).
    """
    n = codes.size
    V = np.flatnonzero(van)
    T = np.flatnonzero(~van)
    info = {"vanishing": int(V.size), "n_explored": int(n)}
    if V.size == 0:
        return codes, src, dst, val, initial, info
    if T.size == 0:
        raise trap_error(model, codes[V[:1]], layout)
    local = np.empty(n, dtype=np.int64)
    local[T] = np.arange(T.size)
    local[V] = np.arange(V.size)
    from_v = van[src]
    to_v = van[dst]
    # timed rates out of tangible states: R_TT and R_TV
    ft = ~from_v
    tt, tv = ft & ~to_v, ft & to_v
    R_TV = sp.csr_matrix((val[tv], (local[src[tv]], local[dst[tv]])), shape=(T.size, V.size))
    # the jump chain on the vanishing states, self-loops divided out: P' = W_off^-1 W_off-diagonal
    P_VV, P_VT = _jump_chain(local[src[from_v]], dst[from_v], val[from_v], van, local, V.size, T.size,
                             self_loops=(src[from_v] == dst[from_v]))
    trapped = _trapped(P_VV, P_VT)
    if trapped.size:
        raise trap_error(model, codes[V[trapped[:1]]], layout)
    X = _absorb(P_VV, P_VT)
    # Q_TT + R_TV X, self-loops i -> v -> i dropped (they do not change the law)
    add = (R_TV @ X).tocoo()
    s2 = np.concatenate([local[src[tt]], add.row.astype(np.int64)])
    d2 = np.concatenate([local[dst[tt]], add.col.astype(np.int64)])
    r2 = np.concatenate([val[tt], add.data])
    keep = s2 != d2
    # the initial states: each vanishing one replaced by the tangible states it leads to
    iv = van[initial]
    if iv.any():
        law = X[local[initial[iv]]].tocsr()
        law.eliminate_zeros()
        rows = [local[initial[~iv]]] + [law.indices]
        initial_t = np.unique(np.concatenate(rows))
        deterministic = bool(np.all(np.diff(law.indptr) == 1))
        if not deterministic:
            full = sp.vstack([sp.csr_matrix((np.ones(int((~iv).sum())),
                                             (np.arange(int((~iv).sum())), local[initial[~iv]])),
                                            shape=(int((~iv).sum()), T.size)), law]).tocsr()
            order = np.argsort(np.concatenate([np.flatnonzero(~iv), np.flatnonzero(iv)]), kind="stable")
            full = full[order]
            # one law: uniform over the given initial states, each replaced by where it leads
            info["initial_rows"] = full       # one row per given initial state (code order)
            info["initial_law"] = np.asarray(full.mean(axis=0)).ravel()
            warnings.warn(
                f"model {model.name!r}: the initial state is vanishing and leads at once to "
                f"{initial_t.size} tangible states at random; chain.initial holds them as a set and "
                "chain.initial_law their law (where the one-liners start; give it as p0 to the other "
                "analyses)", ModelWarning, stacklevel=4)
    else:
        initial_t = local[initial]
    return codes[T], s2[keep], d2[keep], r2[keep], initial_t, info


def trap_error(model, code, layout):
    """The :class:`~ctmc.results.ModelError` of a timeless trap met at state ``code``."""
    env = layout.decode_all(np.asarray(code, dtype=np.int64))
    return ModelError(
        f"model {model.name!r}: timeless trap: from state {state_text(env, 0)} the immediate moves "
        "never reach a tangible state (every state they lead to has an immediate move enabled, so time "
        "would stop); give the immediate moves a way out, or make one of them a timed event")


def vanishing(model, env, n):
    """Mask of the states of ``env`` where an immediate move is enabled with a non-zero weight."""
    van = np.zeros(n, dtype=bool)
    for ev in model.immediates:
        g = guard(ev, env, n)
        van |= g & (rate_where(ev, env, n, g) != 0)
    return van


def flow(model, k, env, n):
    """Expected firings per unit time of immediate move ``k`` from each state of ``env`` (see event_rate)."""
    layout = model.layout
    codes = layout.encode(env)
    s, d, r, _, (van0, move) = expand(model, codes, layout, strict=True, detail=True)
    timed = move < 0
    s, d, r = s[timed], d[timed], r[timed]
    # the vanishing states the timed events lead to, and all those their immediate moves reach
    vcodes, vsrc, vdst, vw, vmove = [], [], [], [], []
    known = np.empty(0, dtype=np.int64)
    frontier = np.unique(d)
    while frontier.size:
        s2, d2, w2, _, (v2, m2) = expand(model, frontier, layout, strict=True, detail=True)
        imm = m2 >= 0
        vcodes.append(frontier[v2])
        vsrc.append(frontier[s2[imm]]), vdst.append(d2[imm]), vw.append(w2[imm]), vmove.append(m2[imm])
        known = np.union1d(known, frontier)
        frontier = np.setdiff1d(np.unique(d2[imm]), known, assume_unique=True)
    Vc = np.sort(np.concatenate(vcodes))
    flow = np.zeros(n)
    if Vc.size == 0:
        return flow
    vsrc, vdst, vw, vmove = (np.concatenate(x) for x in (vsrc, vdst, vw, vmove))
    allc = np.union1d(Vc, vdst)
    van = np.isin(allc, Vc)
    local = np.empty(allc.size, dtype=np.int64)
    local[van] = np.arange(Vc.size)
    local[~van] = np.arange(int((~van).sum()))
    src_l = np.searchsorted(Vc, vsrc)
    loops = vsrc == vdst
    P_VV, P_VT = _jump_chain(src_l, np.searchsorted(allc, vdst), vw, van, local, Vc.size,
                             int((~van).sum()), self_loops=loops)
    trapped = _trapped(P_VV, P_VT)
    if trapped.size:
        raise trap_error(model, Vc[trapped[:1]], layout)
    # f_v: the move's weight (self-loops included) over the weight of the moves leaving v
    leave = np.bincount(src_l[~loops], weights=vw[~loops], minlength=Vc.size)
    mine = vmove == k
    f = np.bincount(src_l[mine], weights=vw[mine], minlength=Vc.size) / leave
    N = _absorb(P_VV, sp.csr_matrix(f[:, None])).toarray().ravel()
    pos = np.searchsorted(Vc, d)
    hit = (pos < Vc.size) & (Vc[np.minimum(pos, Vc.size - 1)] == d)
    flow += np.bincount(s[hit], weights=r[hit] * N[pos[hit]], minlength=n)
    return flow


def _jump_chain(src, dst, w, van, local, nv, nt, self_loops):
    """``(P_VV, P_VT)``: the embedded jump chain on the vanishing states, self-loops divided out.

    ``src`` are local vanishing indices, ``dst`` global state indices, ``w``
    weights. A self-loop of probability :math:`p_{vv}` only repeats the
    choice, so row :math:`v` is divided by :math:`1 - p_{vv}`: the weights of
    the moves that leave :math:`v` divided by their sum. A state whose every
    move is a self-loop gets an empty row (a trap, found by :func:`_trapped`).
    """
    off = ~self_loops
    s, d, w = src[off], dst[off], w[off]
    total = np.bincount(s, weights=w, minlength=nv)
    p = w / total[s]
    to_v = van[d]
    P_VV = sp.csr_matrix((p[to_v], (s[to_v], local[d[to_v]])), shape=(nv, nv))
    P_VT = sp.csr_matrix((p[~to_v], (s[~to_v], local[d[~to_v]])), shape=(nv, nt))
    P_VV.sum_duplicates()
    P_VT.sum_duplicates()
    return P_VV, P_VT


def _trapped(P_VV, P_VT):
    """Local indices of the vanishing states from which no tangible state can be reached."""
    from scipy.sparse.csgraph import breadth_first_order
    nv = P_VV.shape[0]
    exits = np.flatnonzero(np.diff(P_VT.indptr))
    A = P_VV.tocoo()
    # reversed edges, plus a root (index nv) linked to every state with a move to a tangible state
    G = sp.csr_matrix((np.ones(A.nnz + exits.size, dtype=np.int8),
                       (np.concatenate([A.col, np.full(exits.size, nv)]), np.concatenate([A.row, exits]))),
                      shape=(nv + 1, nv + 1))
    seen = np.zeros(nv + 1, dtype=bool)
    seen[breadth_first_order(G, nv, directed=True, return_predecessors=False)] = True
    return np.flatnonzero(~seen[:nv])


def _gather(indptr, indices, cols):
    """The concatenated ``indices[indptr[c]:indptr[c + 1]]`` of the columns (or rows) ``cols``."""
    starts, stops = indptr[cols], indptr[cols + 1]
    lens = stops - starts
    if not lens.sum():
        return np.empty(0, dtype=indices.dtype)
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    return indices[offs + np.arange(lens.sum())]


def _levels(P):
    """Strong components of the graph of ``P`` and their level in the condensation.

    The level of a component is the length of the longest path from it to a
    component with no successor (level 0), found by peeling sinks (Kahn's
    algorithm, one vectorised step per level). Returns ``(comp, level)``,
    ``comp[i]`` the component of state ``i``.
    """
    from scipy.sparse.csgraph import connected_components
    nv = P.shape[0]
    nc, comp = connected_components(P, directed=True, connection="strong")
    A = P.tocoo()
    cr, cc = comp[A.row], comp[A.col]
    between = cr != cc
    C = sp.csr_matrix((np.ones(int(between.sum()), dtype=np.int8), (cr[between], cc[between])), shape=(nc, nc))
    C.sum_duplicates()
    outdeg = np.diff(C.indptr).astype(np.int64)
    Ct = C.tocsc()
    level = np.full(nc, -1, dtype=np.int64)
    ready, depth = np.flatnonzero(outdeg == 0), 0
    while ready.size:
        level[ready] = depth
        preds, counts = np.unique(_gather(Ct.indptr, Ct.indices, ready), return_counts=True)
        outdeg[preds] -= counts
        ready = preds[outdeg[preds] == 0]
        depth += 1
    assert (level >= 0).all() and nv == comp.size
    return comp, level


def _absorb(P, B):
    r"""``X = (I - P)^{-1} B``, sparse, for a jump chain ``P`` on vanishing states that all reach an exit.

    The states are taken level by level of the condensation of the graph of
    ``P`` (:func:`_levels`), lowest first: at level :math:`\ell` the rows
    :math:`L` satisfy :math:`(I - P_{LL}) X_L = B_L + P_{L,<\ell} X_{<\ell}`
    where :math:`P_{LL}` is block diagonal (one block per strong component:
    different components of a level have no move between them). When the
    graph is acyclic (the usual case) :math:`P_{LL} = 0` and no system is
    solved: each level is one sparse product, exact. A cycle's block is
    solved by a sparse LU (:func:`_solve_cycles`).
    """
    nv, k = B.shape
    comp, level = _levels(P)
    lv = level[comp]
    perm = np.lexsort((comp, lv))
    inv = np.empty_like(perm)
    inv[perm] = np.arange(nv)
    Pp = P[perm][:, perm].tocsr()
    Bp = B.tocsr()[perm]
    bounds = np.searchsorted(lv[perm], np.arange(int(level.max()) + 2))
    cp = comp[perm]
    X = _Rows(k)
    for a, b in zip(bounds[:-1], bounds[1:]):
        rhs = Bp[a:b]
        if a:
            lower = Pp[a:b, :a]
            if lower.nnz:
                rhs = rhs + lower @ X.matrix()
        D = Pp[a:b, a:b]
        if D.nnz:
            rhs = _solve_cycles(D, rhs.tocsr(), cp[a:b])
        X.append(rhs.tocsr())
    return X.matrix()[inv]


#: dense right-hand side entries per sparse-LU solve of :func:`_solve_cycles`
_DENSE_RHS = 1 << 22


def _solve_cycles(D, rhs, comp):
    """``(I - D)^{-1} rhs`` for a block-diagonal ``D`` (blocks: runs of equal ``comp``)."""
    from scipy.sparse.linalg import splu
    m, k = rhs.shape
    starts = np.flatnonzero(np.r_[True, comp[1:] != comp[:-1]])
    sizes = np.diff(np.r_[starts, m])
    cyc = np.repeat(sizes > 1, sizes)                 # rows of components with a cycle
    out_r, out_c, out_v = [], [], []
    triv = np.flatnonzero(~cyc)
    t = rhs[triv].tocoo()
    out_r.append(triv[t.row]), out_c.append(t.col), out_v.append(t.data)
    # components with a cycle, grouped (whole components) into batches of about 2048 rows
    rows = np.flatnonzero(cyc)
    offs = np.r_[0, np.cumsum(sizes[sizes > 1])]
    idx = np.searchsorted(offs, np.arange(0, rows.size, 2048), side="right") - 1
    cuts = np.unique(np.r_[offs[idx], rows.size])
    for a, b in zip(cuts[:-1], cuts[1:]):
        r = rows[a:b]
        A = (sp.identity(r.size, format="csc") - D[r][:, r]).tocsc()
        lu = splu(A)
        R = rhs[r]
        cols = np.unique(R.indices)
        step = max(1, _DENSE_RHS // max(r.size, 1))
        for c0 in range(0, cols.size, step):
            cc = cols[c0:c0 + step]
            Y = lu.solve(np.asarray(R[:, cc].toarray(), dtype=float))
            np.maximum(Y, 0.0, out=Y)                 # (I - D)^{-1} >= 0: clip round-off
            i, j = np.nonzero(Y)
            out_r.append(r[i]), out_c.append(cc[j]), out_v.append(Y[i, j])
    return sp.csr_matrix((np.concatenate(out_v), (np.concatenate(out_r), np.concatenate(out_c))), shape=(m, k))


class _Rows:
    """A CSR matrix grown by appending rows, in amortised O(1) per entry."""

    def __init__(self, k):
        self.k, self.m, self.nnz = k, 0, 0
        self.indptr = [np.zeros(1, dtype=np.int64)]
        self.indices = np.empty(1024, dtype=np.int64)
        self.data = np.empty(1024)

    def append(self, A):
        A.sum_duplicates()
        need = self.nnz + A.nnz
        if need > self.data.size:
            cap = max(need, 2 * self.data.size)
            self.indices = np.resize(self.indices, cap)
            self.data = np.resize(self.data, cap)
        self.indices[self.nnz:need] = A.indices
        self.data[self.nnz:need] = A.data
        self.indptr.append(A.indptr[1:] + self.nnz)
        self.m += A.shape[0]
        self.nnz = need

    def matrix(self):
        if len(self.indptr) > 1:
            self.indptr = [np.concatenate(self.indptr)]
        return sp.csr_matrix((self.data[:self.nnz], self.indices[:self.nnz], self.indptr[0]),
                             shape=(self.m, self.k))
