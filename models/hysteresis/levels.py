r"""Route (a) solved by its level structure: a subtraction-free elimination over the levels.

The chain
---------
The CTMC of :mod:`models.hysteresis.ctmc_route` on :math:`(n, s, j)` (level,
mode, service phase of :math:`PH(\alpha, S)`, exit rates :math:`s_0`) is a
*level process* with three kinds of moves:

* arrivals move **up** (to any level above, the batch law) and keep the phase
  (:math:`n \ge 1`; from :math:`n = 0` the phase is drawn from :math:`\alpha`);
* phase changes stay in the level (:math:`S`, the mode is kept);
* service completions move **down one level** and restart the phase from
  :math:`\alpha`: the down block is :math:`s_0\,\alpha` (rank one in the
  phase), the mode decided at the new level.

So the process enters level :math:`n` from above only at the *restart states*
:math:`(n, s, \alpha)`, one per mode.

Censoring from the top
----------------------
Let :math:`h_{l-1}(y)` be the law of the mode in which the process first
reaches level :math:`l - 1` from state :math:`y` of level :math:`l`, and
:math:`H_l` the same from the restart state of each mode (a 3 x 3 stochastic
matrix). From :math:`y` above :math:`n` the mode on reaching :math:`n` has the
law :math:`h_n(y) = h_{l-1}(y)\,\Pi_{l,n}`, :math:`\Pi_{l,n} = H_{l-1}\cdots
H_{n+1}`. In the chain censored on levels :math:`0..n` (Stewart 1994, ch. 6;
the law restricted to those levels is the stationary law of the censored
chain), an arrival from :math:`(n, s, j)` to :math:`y` above is a move to the
restart state :math:`(n, s', \alpha)` with probability :math:`h_n(y)_{s'}`:
its rates are the *fold* :math:`F_n[(s,j), s'] = \sum_k \lambda_s g_k\,
h_n(y_k)_{s'}`. In level :math:`n` of that chain, let :math:`M_s = a_{s,n} I -
S` (:math:`a_{s,n}` the admitted arrival rate) hold the time until the first
arrival or completion; with :math:`B[s, \cdot] = \alpha M_s^{-1} F_n[s]`
(restart to restart) and :math:`\beta[s, \cdot] = \alpha M_s^{-1} s_0\,
e_{d(s)}` (down, to the mode :math:`d(s)` decided at :math:`n - 1`),

.. math::

    H_n = (I - B)^{-1}\beta, \qquad
    h_{n-1}(n, s, j) = [M_s^{-1} s_0]_j\, e_{d(s)} + [M_s^{-1} F_n[s]]_j\, H_n .

This runs from :math:`n = r` down to 1 (at the top no arrival is admitted).

The law, bottom up
------------------
Level 0 holds mode 0 only (every completion that empties the system decides
at :math:`n = 0 \le L`). Going up, with :math:`J_n` the flow into the states of
level :math:`n` from the levels below (arrivals that land there) and
:math:`\Phi_n = \sum_{l > n} w_l \Pi_{l,n}` the flow from below that jumps
over :math:`n` (:math:`w_l` the flow into level :math:`l` weighted by
:math:`h_{l-1}`), the censored chain on :math:`0..n` gives

.. math::

    p_n[s] = u_s + z_s\, \alpha M_s^{-1}, \qquad u_s = J_n[s] M_s^{-1}, \qquad
    z = \Big(\Phi_n + \sum_s u_s F_n[s]\Big)(I - B)^{-1} .

Every step adds and multiplies non-negative numbers: :math:`M_s^{-1}` and
:math:`(I - B)^{-1}` are M-matrix inverses formed without subtractions
(:class:`ctmc.linalg.TripletLU`, its row sums being the exit and departure
probabilities), so every probability, however small (1e-300), keeps its
relative accuracy, as in GTH elimination. The law is exact: nothing is
truncated (the batch tail beyond the capacity is lumped, which is exact).

Cost
----
With :math:`K` batch sizes, :math:`m` phases and :math:`r` levels: one
:math:`m \times m` inverse per distinct admitted rate (a handful), then per
level :math:`O(m^2)` for the products with :math:`M_s^{-1}` and
:math:`O(K m)` for the folds and flows; memory :math:`O(r m)` plus :math:`r K`
3 x 3 products (72 r K bytes: 4 MB at r = 1000 with 57 batch sizes, but
2 GB for batches spanning 4000 levels at r = 8000). Batch arrivals cost no fill-in, unlike a sparse LU of the
generator, whose bandwidth grows with :math:`K m`.
"""
from __future__ import annotations

import numpy as np

from ctmc.linalg import TripletLU

from .law import decide

__all__ = ["level_law", "memory_bytes", "top_level", "level_moves"]

_RESCALE = 1e150          # keep the unnormalised flows inside the double range


def _scatter_add(out, idx, vals):
    """``out[idx] += vals`` row by row, repeated indices summed (a sort and one reduceat)."""
    order = np.argsort(idx, kind="stable")
    idx = idx[order]
    starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
    out[idx[starts]] += np.add.reduceat(vals[order], starts, axis=0)


def _dot(spec, *ops):
    """Small products in numpy's own loops: a threaded BLAS call costs more than it saves at this
    size, and far more on a loaded machine."""
    return np.einsum(spec, *ops, optimize=False)


def level_moves(q, top):
    """The arrivals on levels ``0..top``, rules evaluated once per level, size and mode.

    Returns ``(ks, gk, n_new, ok, s_new)``: the batch sizes with positive
    probability and their probabilities; per level ``n`` and size ``k`` the
    level after the arrival (shape ``(top + 1, K)``) and whether the batch is
    admitted (arrivals that would land above ``top`` are dropped: only states
    not reachable from the empty system make them, see :func:`top_level`); per
    mode the mode after it (shape ``(top + 1, K, 3)``).
    """
    r = q.capacity
    g = q.batch_pmf()
    ks = np.flatnonzero(g > 0) + 1
    n = np.arange(top + 1)[:, None]
    n_new, ok = q.acceptance.admit(n, ks[None, :], r)
    n_new, ok = np.broadcast_arrays(n_new, ok)
    ok = ok & (n_new <= top)
    n_new = np.where(ok, n_new, n)
    modes = np.arange(3)[None, None, :]
    s_new = (decide(np.where, modes, n_new[:, :, None], q.L, q.H, q.R) if q.policy.on_arrival
             else np.broadcast_to(modes, n_new.shape + (3,)))
    return ks, g[ks - 1], n_new, ok, s_new


def top_level(q) -> int:
    """The highest level reachable from the empty system (at most the capacity).

    Levels, modes and their moves do not depend on the phase, so a search on
    :math:`(n, s)` finds them: within levels ``0..limit``, doubled while an
    admitted arrival from a reachable pair leaves them. Under the instant
    policy nothing is admitted in discard mode, so the top is at most
    :math:`R - 1 + K` (``K`` the largest batch) whatever the capacity, and a
    capacity far beyond reach costs nothing.
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order
    r = q.capacity
    K = int(np.flatnonzero(q.batch_pmf() > 0).max()) + 1
    limit = min(r, q.R + K)
    modes = np.arange(3)
    while True:
        lev = np.arange(limit + 1)
        src, dst = [], []
        for k in np.flatnonzero(q.batch_pmf() > 0) + 1:
            n_new, ok = q.acceptance.admit(lev, k, r)
            n_new, ok = np.broadcast_arrays(n_new, ok)
            s_new = (decide(np.where, modes[None, :], n_new[:, None], q.L, q.H, q.R) if q.policy.on_arrival
                     else np.broadcast_to(modes[None, :], (limit + 1, 3)))
            sel = ok[:, None] & (q.rates[None, :] > 0)
            nn, ss = np.nonzero(sel)
            src.append(nn * 3 + ss)
            dst.append(np.minimum(n_new[nn], limit + 1) * 3 + s_new[nn, ss])   # limit + 1: "above"
        down = decide(np.where, modes[None, :], np.maximum(lev - 1, 0)[:, None], q.L, q.H, q.R)
        nn, ss = np.nonzero(np.broadcast_to(lev[:, None] >= 1, (limit + 1, 3)))
        src.append(nn * 3 + ss)
        dst.append((nn - 1) * 3 + down[nn, ss])
        src, dst = np.concatenate(src), np.concatenate(dst)
        size = 3 * (limit + 2)
        G = sp.csr_matrix((np.ones(src.size, np.int8), (src, dst)), shape=(size, size))
        reach = breadth_first_order(G, 0, directed=True, return_predecessors=False)
        top = int(reach.max()) // 3
        if top <= limit or limit == r:
            return min(top, r)
        limit = min(r, 2 * limit)


def memory_bytes(q) -> int:
    r"""Bytes :func:`level_law` holds for ``q``: the folds, landing laws and flows per state of the
    box, and the ``r K`` products :math:`\Pi_{l,n}` (``K`` the largest batch size kept)."""
    r, m = top_level(q), q.service.n_phases
    K = int(np.flatnonzero(q.batch_pmf() > 0).max()) + 1
    return 8 * ((r + 2) * K * 9 + (r + 1) * 3 * m * (3 + 3 + 1 + 1))


def level_law(q):
    """The stationary law of route (a) on the box ``(n, s, j)``, by the elimination of the module docstring.

    Returns
    -------
    p0 : ndarray, shape (3,)
        Level 0, per mode (phase 0).
    p : ndarray, shape (top + 1, 3, m)
        ``p[n, s, j]`` for ``n >= 1`` (row 0 unused), ``top`` the highest
        reachable level (:func:`top_level`); zero on the states not
        reachable from the empty system. Both normalised together.
    """
    ph = q.service
    m, r = ph.n_phases, top_level(q)                    # levels above the top are never reached
    alpha, S, s0 = ph.alpha, ph.S, ph.exit_rates
    lam = q.rates
    ks, gk, n_new, ok, s_new = level_moves(q, r)
    K = int(ks.max())                                   # a jump spans at most K levels
    rate = lam[None, :] * gk[:, None]                   # (k, s)
    adm = np.where(ok[:, :, None], rate[None, :, :], 0.0).sum(axis=1)   # (n, s) admitted rate
    inv_cache = {}

    def minv(a):
        key = float(a)
        if key not in inv_cache:
            Mi = TripletLU(S, s0 + key).solve(np.eye(m))
            inv_cache[key] = (Mi, Mi @ s0, alpha @ Mi)
        return inv_cache[key]

    I3 = np.eye(3)
    hdown = np.zeros((r + 1, 3, m, 3))                  # h_{n-1}(n, s, j)
    fold = np.zeros((r + 1, 3, m, 3))
    ImB_inv = np.zeros((r + 1, 3, 3))
    Pi = np.zeros((r + 2, K, 3, 3))                     # Pi[n, d] = Pi_{n+1+d, n}: r K 3 x 3 products
    H = np.zeros((r + 2, 3, 3))
    down = decide(np.where, np.arange(3)[None, :], np.maximum(np.arange(r + 1) - 1, 0)[:, None],
                  q.L, q.H, q.R)                        # mode decided on completion at level n
    for n in range(r, 0, -1):
        Pi[n, 0] = I3
        if n < r:
            Pi[n, 1:] = (Pi[n + 1, :-1].reshape(-1, 3) @ H[n + 1]).reshape(K - 1, 3, 3)
        i = np.flatnonzero(ok[n])
        if i.size:
            l = n_new[n, i]
            hy = np.matmul(hdown[l[:, None], s_new[n, i]].reshape(i.size, 3 * m, 3), Pi[n, l - n - 1])
            fold[n] = _dot("ks,ksju->sju", rate[i], hy.reshape(i.size, 3, m, 3))     # h_n(y), weighted
        F = fold[n]
        B = np.zeros((3, 3))
        beta = np.zeros((3, 3))
        mf = np.empty((3, m, 3))
        md = np.empty((3, m))
        for s in range(3):
            Mi, Ms0, aM = minv(adm[n, s])
            mf[s] = Mi @ F[s]
            md[s] = Ms0
            B[s] = _dot("j,jt->t", alpha, mf[s])
            beta[s, down[n, s]] = alpha @ Ms0
        ImB = TripletLU(B, beta.sum(axis=1))              # I - B, its diagonal 1 - B_ss from the row sums
        ImB_inv[n] = ImB.solve(I3)
        H[n] = ImB_inv[n] @ beta
        hd = (mf.reshape(3 * m, 3) @ H[n]).reshape(3, m, 3)                                # restart, then the landing law
        hd[np.arange(3), :, down[n]] += md
        hdown[n] = hd
    # -- bottom up: the law ----------------------------------------------------------
    p = np.zeros((r + 1, 3, m))
    p0 = np.array([1.0, 0.0, 0.0])                      # level 0 holds mode 0 only
    J = np.zeros((r + 1, 3, m))
    w = np.zeros((r + 2 + K, 3))

    def spread(n, flows):
        """Add the arrivals out of level ``n`` (flows per (s, j)) to the flows ``J``, ``w`` of their targets."""
        i = np.flatnonzero(ok[n])
        if i.size == 0:
            return
        l, t = n_new[n, i][:, None], s_new[n, i]                 # (k, 1), (k, s)
        f = rate[i][:, :, None] * flows[None]                     # (k, s, j)
        k = i.size
        _scatter_add(J.reshape(-1, m), (l * 3 + t).ravel(), f.reshape(-1, m))
        hw = np.matmul(f.reshape(k, 1, 3 * m), hdown[l, t].reshape(k, 3 * m, 3))[:, 0]
        _scatter_add(w, l[:, 0], hw)

    spread(0, p0[:, None] * alpha[None, :])
    for n in range(1, r + 1):
        top = min(n + K, r)
        Phi = np.einsum("ds,dst->t", w[n + 1:top + 1], Pi[n, :top - n]) if top > n else np.zeros(3)
        u = np.empty((3, m))
        aM = np.empty((3, m))
        for s in range(3):
            Mi, _, aM[s] = minv(adm[n, s])
            u[s] = _dot("j,jk->k", J[n, s], Mi)
        z = (Phi + np.einsum("sj,sjt->t", u, fold[n])) @ ImB_inv[n]
        p[n] = u + z[:, None] * aM
        spread(n, p[n])
        big = p[n].max()
        if big > _RESCALE:                              # rescale everything linear in the law
            p[:n + 1] /= big
            p0 /= big
            J /= big
            w /= big
    tot = p0.sum() + p.sum()
    return p0 / tot, p / tot
