r"""Numerics of phase-type laws (:mod:`ctmc.ph`): sparse checks, moments and tails.

A law :math:`PH(\alpha, S)` of order :math:`m` is kept with :math:`S` dense or in CSR form (an
Erlang-:math:`10^6` is a bidiagonal matrix: 2e6 entries, not 1e12). Everything here works on
both, in :math:`O(\mathrm{nnz})` memory:

* moments by one sparse LU of :math:`-S` (:math:`E[T^k] = k!\,\alpha(-S)^{-k}\mathbf 1`), never
  an inverse; the variance as a sum of non-negative terms, from the phase means
  :math:`\mu = (-S)^{-1}\mathbf 1` and the first-step decomposition of :math:`T`:

  .. math::

      (-S)\,v = q^{-1} + q\,c, \qquad
      c_i = \sum_{k \ne i} \frac{S_{ik}}{q_i}(\mu_k - \bar\mu_i)^2 + \frac{s_i}{q_i}\bar\mu_i^2, \qquad
      \operatorname{Var} T = \alpha v + \sum_i \alpha_i (\mu_i - \alpha\mu)^2,

  where :math:`q_i = -S_{ii}`, :math:`\bar\mu_i = \mu_i - 1/q_i` is the mean time left after the
  first sojourn and :math:`v_i = \operatorname{Var}_i T` (an Erlang's variance is then exactly
  :math:`k/\lambda^2`, not :math:`E[T^2] - E[T]^2` with its cancellation);
* the survival function, distribution function and density with *relative* accuracy down to
  the smallest doubles, each a sum of non-negative terms:

  - no phase moves (:math:`S` diagonal: exponential, hyperexponential):
    :math:`\bar F(x) = \sum_i \alpha_i e^{-q_i x}`, :math:`F(x) = -\sum_i \alpha_i
    \operatorname{expm1}(-q_i x)`;
  - one rate :math:`r` along a chain :math:`1 \to 2 \to \dots \to m` (Erlang, the Erlang
    mixtures of :func:`ctmc.ph.fit`): from phase :math:`i` the time is Erlang(:math:`m - i + 1`),
    so :math:`\bar F(x) = \sum_i \alpha_i P(N < m - i + 1)` for :math:`N \sim
    \mathrm{Poisson}(rx)`, by scipy's regularised incomplete gamma functions (a few 1e-13
    relative in the far tails, checked against 60-digit sums in the tests) and the density by
    Loader's saddle-point Poisson probability [Loader00]_ (:func:`ctmc._poisson.poisson_logpmf`);
  - otherwise uniformisation summed from the first term, in log scale
    (:func:`uniformised_tails`): no Fox-Glynn left cut, which is what lost
    :math:`e^{-700}`; a dense law far in its tail (:math:`qx > 1000`) is left to
    :func:`ctmc.transient.stochastic_exp` by the caller.

References
----------
.. [Loader00] C. Loader, "Fast and accurate computation of binomial probabilities", 2000
   (the saddle-point form :math:`p(n;\mu) = e^{-\delta(n) - \mathrm{bd}_0(n, \mu)}/\sqrt{2\pi n}`
   used by R's ``dpois``).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from ._poisson import poisson_logpmf
from .results import SolverError

__all__ = ["SPARSE_FROM", "DENSE_MAX", "WORK_MAX", "check_subgenerator", "Solver", "structure",
           "diagonal_tails", "chain_tails", "uniformised_tails", "runs"]

#: builders store ``S`` in CSR form above this many phases
SPARSE_FROM = 512
#: :attr:`ctmc.ph.PhaseType.S_dense` refuses laws with more phases (8192^2 doubles are 512 MiB)
DENSE_MAX = 8192
#: a uniformisation needing more multiply-adds than this is refused (SolverError) before it starts
WORK_MAX = 4e9


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------
def check_subgenerator(a: np.ndarray, S):
    """``S`` (dense or sparse) as float, checked against ``alpha = a``; ValueError naming ``S``.

    Returns ``(S, csr)``: ``S`` as stored (a float ndarray, or a CSR matrix with sorted
    indices and no explicit zeros) and its CSR form.
    """
    m = a.size
    if sp.issparse(S):
        csr = sp.csr_matrix(S, dtype=float)
        csr.sum_duplicates()
        csr.eliminate_zeros()
        csr.sort_indices()
        stored = csr
    else:
        try:
            S = np.atleast_2d(np.asarray(S, dtype=float))
        except (TypeError, ValueError):
            raise ValueError("alpha, S: expected a vector and a square matrix of numbers") from None
        stored = S
        csr = None
    if stored.shape != (m, m):
        raise ValueError(f"S: expected shape ({m}, {m}) to match alpha, got {stored.shape}")
    if csr is None:
        if not np.all(np.isfinite(S)):
            raise ValueError("S: entries must be finite")
        csr = sp.csr_matrix(S)
        csr.eliminate_zeros()
        csr.sort_indices()
    elif not np.all(np.isfinite(csr.data)):
        raise ValueError("S: entries must be finite")
    rows = np.repeat(np.arange(m), np.diff(csr.indptr))
    off = rows != csr.indices
    if (csr.data[off] < 0).any():
        raise ValueError("S: off-diagonal entries must be >= 0")
    diag = csr.diagonal()
    if (diag >= 0).any():
        raise ValueError("S: diagonal entries must be < 0")
    exit_ = -np.asarray(csr.sum(axis=1)).ravel()
    if (exit_ < -1e-12 * np.abs(diag)).any():
        raise ValueError("S: row sums must be <= 0 (exit rates s = -S 1 >= 0)")
    # phases from which absorption is reachable: search backwards from the absorbing state m
    from scipy.sparse.csgraph import breadth_first_order
    src = np.concatenate([rows[off], np.flatnonzero(exit_ > 0)])
    dst = np.concatenate([csr.indices[off], np.full(int((exit_ > 0).sum()), m)])
    back = sp.csr_matrix((np.ones(src.size), (dst, src)), shape=(m + 1, m + 1))
    seen = np.zeros(m + 1, dtype=bool)
    seen[breadth_first_order(back, m, directed=True, return_predecessors=False)] = True
    if not seen[:m].all():
        bad = (np.flatnonzero(~seen[:m]) + 1).tolist()
        more = f" and {len(bad) - 20} more" if len(bad) > 20 else ""
        raise ValueError(f"S: phases {bad[:20]}{more} (numbered from 1) never reach absorption (S is "
                         "singular: not a phase-type law)")
    return stored, csr


# ---------------------------------------------------------------------------
# moments
# ---------------------------------------------------------------------------
class Solver:
    """Solves ``(-S) x = b`` for a checked sub-generator (CSR): a dense LU for small laws, a
    sparse LU (natural order when ``S`` is upper triangular: no fill-in) otherwise."""

    def __init__(self, csr, dense: bool):
        import scipy.linalg as sl
        if dense:
            lu = sl.lu_factor(-csr.toarray())
            self.solve = lambda b: sl.lu_solve(lu, b)
        else:
            from scipy.sparse.linalg import splu
            rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
            upper = bool((csr.indices >= rows).all())
            self.solve = splu((-csr).tocsc(), permc_spec="NATURAL" if upper else "COLAMD").solve

    def variance(self, csr, alpha, exit_):
        """``Var T`` as the sum of non-negative terms of the module docstring."""
        m = alpha.size
        q = -csr.diagonal()
        mu = self.solve(np.ones(m))
        rows = np.repeat(np.arange(m), np.diff(csr.indptr))
        off = rows != csr.indices
        r, k, w = rows[off], csr.indices[off], csr.data[off] / q[rows[off]]
        after = np.bincount(r, w * mu[k], minlength=m)          # mean time left after the first sojourn
        c = np.bincount(r, w * (mu[k] - after[r]) ** 2, minlength=m) + exit_ / q * after ** 2
        v = self.solve(1.0 / q + q * c)
        mean = float(alpha @ mu)
        return float(alpha @ v + alpha @ (mu - mean) ** 2)


# ---------------------------------------------------------------------------
# structure
# ---------------------------------------------------------------------------
def structure(csr) -> tuple:
    """``("diagonal", None)`` (no phase moves), ``("chain", r)`` (one rate ``r`` along
    ``1 -> 2 -> ... -> m``, absorbing from ``m`` only) or ``("general", None)``."""
    m = csr.shape[0]
    rows = np.repeat(np.arange(m), np.diff(csr.indptr))
    off = rows != csr.indices
    if not off.any():
        return "diagonal", None
    diag = csr.diagonal()
    r = -diag[0]
    if off.sum() == m - 1 and (csr.indices[off] == rows[off] + 1).all() and (diag == -r).all() \
            and (csr.data[off] == r).all():
        return "chain", float(r)
    return "general", None


def runs(csr) -> tuple:
    """The phase moves as runs ``(first, last, shift, rate)`` (0-based phases): every phase
    ``i`` in ``first..last`` moves to ``i + shift`` at ``rate``, the runs maximal in row order."""
    m = csr.shape[0]
    rows = np.repeat(np.arange(m), np.diff(csr.indptr))
    off = rows != csr.indices
    r, k, w = rows[off], csr.indices[off], csr.data[off]
    d = k - r
    order = np.lexsort((r, d))            # by shift, then by row: a run is consecutive rows
    r, d, w = r[order], d[order], w[order]
    if r.size == 0:
        return ()
    brk = np.flatnonzero((np.diff(r) != 1) | (np.diff(d) != 0) | (np.diff(w) != 0)) + 1
    starts = np.concatenate([[0], brk])
    ends = np.concatenate([brk - 1, [r.size - 1]])
    out = [(int(r[a]), int(r[b]), int(d[a]), float(w[a])) for a, b in zip(starts, ends)]
    return tuple(sorted(out))


# ---------------------------------------------------------------------------
# tails
# ---------------------------------------------------------------------------
def diagonal_tails(alpha, q, s, pts):
    """``(sf, cdf, pdf)`` at ``pts > 0`` when no phase moves: sums of exponentials."""
    nz = np.flatnonzero(alpha > 0)
    a, qn, sn = alpha[nz], q[nz], s[nz]
    sf, cdf, pdf = (np.empty(pts.size) for _ in range(3))
    for i, x in enumerate(pts):
        e = np.exp(-qn * x)
        sf[i], cdf[i], pdf[i] = a @ e, a @ -np.expm1(-qn * x), a @ (sn * e)
    return sf, cdf, pdf


def chain_tails(alpha, r, pts):
    """``(sf, cdf, pdf)`` at ``pts > 0`` for one rate ``r`` along the chain of phases: from phase
    ``i`` (0-based) the time is Erlang(``m - i``, ``r``)."""
    from scipy.special import gammainc, gammaincc
    m = alpha.size
    nz = np.flatnonzero(alpha > 0)
    a, stages = alpha[nz], (m - nz).astype(float)
    sf, cdf, pdf = (np.empty(pts.size) for _ in range(3))
    for i, x in enumerate(pts):
        mu = r * x
        sf[i] = a @ gammaincc(stages, mu)
        cdf[i] = a @ gammainc(stages, mu)
        pdf[i] = r * (a @ np.exp(poisson_logpmf(stages - 1, mu)))
    return sf, cdf, pdf


def _logsum(terms):
    """``log(sum(exp(terms)))`` along the last axis, without overflow or underflow."""
    top = np.max(terms, axis=-1, keepdims=True)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return (safe + np.log(np.sum(np.exp(terms - safe), axis=-1, keepdims=True)))[..., 0]


def _sums(mus, logs):
    """For each point ``mu``: ``log sum_n p(n; mu) exp(logs[:, n])`` (rows of ``logs``), shape (3, points)."""
    n = np.arange(logs.shape[1])
    out = np.empty((logs.shape[0], mus.size))
    for i, mu in enumerate(mus):
        out[:, i] = _logsum(poisson_logpmf(n, mu)[None, :] + logs)
    return out


def uniformised_tails(alpha, csr, s, pts, *, what: str = "PH"):
    r"""``(sf, cdf, pdf)`` at ``pts > 0`` by uniformisation from the first term, in log scale.

    With :math:`q = \max_i q_i`, :math:`P = I + S/q \ge 0` and :math:`v_n = \alpha P^n`:
    :math:`\bar F(x) = \sum_n w_n\, v_n\mathbf 1`, :math:`f(x) = \sum_n w_n\, v_n s` and
    :math:`F(x) = \sum_n w_n c_n` with :math:`c_{n+1} = c_n + v_n s/q` (the mass absorbed
    within :math:`n` steps), :math:`w_n` the Poisson(:math:`qx`) probabilities (Loader). Every
    term is non-negative; :math:`v_n` is rescaled by powers of two as it decays and each sum is
    kept as a logarithm, so nothing underflows before the result itself does. The sum stops
    once the terms left, bounded by the Poisson tail times the current :math:`v_n\mathbf 1`
    (non-increasing in :math:`n`), are below 1e-17 of every point's sums.

    Raises
    ------
    SolverError
        Before any step, when about :math:`(qx + 40\sqrt{qx} + 100)(\mathrm{nnz} + m)` exceeds
        :data:`WORK_MAX`.
    """
    m = alpha.size
    q = float(np.max(-csr.diagonal()))
    mus = q * np.asarray(pts, dtype=float)
    big = float(mus.max())
    steps = big + 40 * math.sqrt(big) + 100
    work = steps * (csr.nnz + m)
    if work > WORK_MAX:
        raise SolverError(f"x: the tail of {what} at x = {float(np.max(pts)):.6g} needs about {steps:.3g} "
                          f"uniformisation steps on {m} phases ({work:.2g} multiply-adds, above the "
                          f"{WORK_MAX:.0e} allowed); its sub-generator has no closed form here (not "
                          "diagonal, not a one-rate chain)")
    P_T = (sp.identity(m, format="csr") + csr / q).T.tocsr()
    P_T.data = np.maximum(P_T.data, 0.0)          # a diagonal 1 - q_i/q may round to -0
    if m <= SPARSE_FROM:
        P_T = P_T.toarray()                        # small: a dense product costs less per step
    v = alpha.copy()
    scale = 0.0                                    # v_n = exp(scale) * v
    logc = -np.inf
    la, lb, lc = [], [], []                        # log of v_n 1, v_n s, c_n
    lsmax, lq = (math.log(float(s.max())) if s.max() > 0 else -np.inf), math.log(q)
    block, log_tol, n = 256, math.log(1e-17), 0
    check = int(big) + 1
    with np.errstate(divide="ignore"):
        while True:
            tot, out = float(v.sum()), float(v @ s)
            la.append(scale + math.log(tot) if tot > 0 else -np.inf)
            lb.append(scale + math.log(out) if out > 0 else -np.inf)
            lc.append(logc)
            if lb[-1] > -np.inf:
                d = lb[-1] - lq
                logc = d if logc == -np.inf else max(logc, d) + math.log1p(math.exp(-abs(logc - d)))
            if tot == 0:                           # all absorbed: c = 1 from here on
                from scipy.special import gammainc
                logs = _sums(mus, np.array([la, lb, lc]))
                logs[2] = np.logaddexp(logs[2], np.log(gammainc(n + 1, mus)))
                break
            if n >= check:                         # a check sums every term so far: space them out
                check = n + max(block, n // 8)
                # terms after n: at most P(N > n) * {v_n 1, max(s) v_n 1, 1},
                # with P(N > n) <= p(n+1) / (1 - mu/(n+2))
                logs = _sums(mus, np.array([la, lb, lc]))
                tail = poisson_logpmf(n + 1, mus) - np.log1p(-mus / (n + 2))
                lim = np.array([la[-1], la[-1] + lsmax, 0.0])[:, None]
                if ((tail[None, :] + lim) <= log_tol + logs).all():
                    break
                if n > 4 * steps:
                    raise SolverError(f"x: the uniformisation of the tail of {what} did not reach its "
                                      f"truncation bound in {n} steps (4 times the estimate)")
            v = P_T @ v
            top = float(v.max())
            if 0 < top < 2.0 ** -300:
                v *= 2.0 ** 300
                scale -= 300 * math.log(2.0)
            n += 1
    sf, pdf, cdf = np.exp(logs)
    return sf, np.minimum(cdf, 1.0), pdf
