r"""Restarted GMRES that stops on an attainable, normwise backward error.

For :math:`Ax = b` with a right preconditioner :math:`P \approx A^{-1}`,
GMRES(m) builds an orthonormal basis :math:`V_k` of the Krylov space
:math:`\mathcal K_k(AP, r_0)` by the Arnoldi relation
:math:`APV_k = V_{k+1}\bar H_k` and takes the iterate
:math:`x_k = x_0 + PV_k y_k` whose residual
:math:`\lVert \beta e_1 - \bar H_k y\rVert_2` is least (Saad & Schultz,
1986). Givens rotations keep :math:`\bar H_k` triangular, so the residual
norm of every step is known without forming :math:`x_k`.

Two choices make it suit stationary and passage systems of Markov chains:

* **The stopping test is attainable.** Pinned stationary systems are
  ill-conditioned and their right-hand side is small beside
  :math:`\lVert A\rVert\lVert x\rVert` (one column of the generator against
  a vector of ratios :math:`\pi_i/\pi_{pin}`), so the usual
  :math:`\lVert r\rVert \le \mathrm{rtol}\,\lVert b\rVert` may never be met
  in floating point. We stop on the normwise backward error
  :math:`\lVert b - Ax\rVert_\infty \le
  \mathrm{rtol}\,(\lVert A\rVert_\infty \lVert x\rVert_\infty +
  \lVert b\rVert_\infty)` (Rigal & Gaches, 1967), which a backward stable
  solver attains; the test is made on the true residual, recomputed.
* **The basis is orthogonalised by blocks.** Classical Gram-Schmidt done
  twice ("twice is enough", Giraud, Langou & Rozložník, 2005): with
  :math:`h_1 = V_j^T w`, :math:`w' = w - V_j h_1`,
  :math:`h_2 = V_j^T w'`, the new vector is :math:`w' - V_j h_2` and its
  Hessenberg column :math:`h_1 + h_2`. Memory-bound work on the stored basis
  (it is read, not computed): numpy makes it four BLAS-2 passes over
  :math:`V_j`; the compiled kernel (:mod:`ctmc._relax`) three, the update by
  :math:`h_1` and the projection :math:`h_2` made block of rows by block of
  rows while the block is in cache, and the norm of the result in the last
  pass. Its sums are made per fixed block of rows and added in block order,
  so its threads never change a result.

The algorithm sees the matrix and the preconditioner only through two
functions (``matvec``, ``psolve``), like :func:`ctmc.transient.uniformize_operator`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

from ._relax import extension, into, spmv
from ._util import amax

__all__ = ["gmres", "GMRESReport", "Stall", "bicgstab", "BiCGStabReport", "bracket_factor", "backward_error", "orthogonalise", "dcgs2_project", "dcgs2_update", "ARNOLDI"]


@dataclass(frozen=True)
class GMRESReport:
    """What :func:`gmres` did.

    Attributes
    ----------
    converged : bool
        The backward error met ``rtol``.
    iterations : int
        Arnoldi steps over all cycles (matrix-vector products with ``A``).
    backward_error : float
        ``||b - A x||_inf / (norm_a ||x||_inf + ||b||_inf)`` of the returned
        ``x``, recomputed from the true residual (``nan`` if not finite).
    breakdown : bool
        The iteration produced a non-finite number.
    stalled : bool
        The stagnation test (``stall``) stopped the iteration.
    """

    converged: bool
    iterations: int
    backward_error: float
    breakdown: bool = False
    stalled: bool = False


#: a Givens pivot below this share of its column is a singular step
_SINGULAR = 16 * np.finfo(float).eps


class Stall:
    r"""The stagnation test of a Krylov probe, one rule for GMRES and BiCGStab.

    With ``k > 0`` it says "give up" at the first iteration :math:`i \ge k` where the smallest
    residual norm so far is not a tenth of the smallest up to iteration :math:`i - k`: a
    solve that is not converging stops after about :math:`k` iterations, not ``maxiter``. On a
    shuffled 20000-state cycle with one rate of :math:`10^8` BiCGStab's residual never fell below
    its start in 150 iterations and GMRES(50)'s fell 3 % in 25 after its first ten, while the
    gallery's converging solves fall 78-fold (BiCGStab) and :math:`10^5`-fold (GMRES) or more in
    every 25 (:data:`ctmc.kernels.plan.BICGSTAB_STALL`). ``k = 0``: never.

    Examples
    --------
    >>> s = Stall(2, 1.0)
    >>> [s(r) for r in (0.5, 0.09, 0.05, 0.04)]
    [False, False, False, True]
    """

    def __init__(self, k: int, start: float):
        self.k = int(k)
        self.best = [float(start)]          # the smallest residual after each iteration

    def __call__(self, rnorm: float) -> bool:
        """Record one iteration's residual norm; True where the solve stagnates."""
        if not self.k:
            return False
        best = self.best
        best.append(min(best[-1], float(rnorm)))
        i = len(best) - 1
        return i >= self.k and best[-1] > 0.1 * best[i - self.k]


def backward_error(r, x, b, norm_a) -> float:
    """``||r||_inf / (norm_a ||x||_inf + ||b||_inf)`` for the residual ``r = b - A x`` (``inf`` if undefined)."""
    den = norm_a * amax(x) + amax(b)
    res = amax(r)
    return res / den if den else (0.0 if res == 0 else np.inf)


def gmres(matvec: Callable, b: np.ndarray, psolve: Optional[Callable] = None, *, x0=None,
          rtol: float = 1e-10, restart: int = 50, maxiter: int = 10_000, norm_a: float,
          check_every: int = 10, orthogonalisation: str = "dcgs2", stall: int = 0) -> tuple:
    r"""Solve ``A x = b`` by right-preconditioned GMRES(``restart``).

    Parameters
    ----------
    matvec : callable or scipy.sparse CSR matrix
        ``v -> A v`` on 1-D float arrays; a CSR matrix ``A`` means its
        product :func:`ctmc._relax.spmv` (compiled and threaded where built).
    b : ndarray, shape (n,)
        Right-hand side.
    psolve : callable, optional
        ``v -> P v`` with ``P`` approximating ``A^{-1}`` (identity if None).
    x0 : ndarray, optional
        Starting iterate (zero if None).
    rtol : float
        Normwise backward error to reach (see the module docstring).
    restart : int
        Arnoldi steps per cycle (the basis holds ``restart + 1`` vectors).
    maxiter : int
        Arnoldi steps in all.
    norm_a : float
        ``||A||_inf`` (or an upper estimate), for the backward error.
    check_every : int
        Within a cycle, the iterate is formed every ``check_every`` steps to
        refresh ``||x||_inf`` in the stopping test (one ``psolve`` each).
    orthogonalisation : {"cgs2", "dcgs2"}
        Classical Gram-Schmidt twice, or DCGS2 (its second pass delayed by
        one step: half the reads of the basis; a column is final one step
        late, so a cycle that stops early has made one step more).
    stall : int
        Give up (``stalled``) where the residual estimate :math:`|g_{j+1}|` of the
        least-squares problem (the true residual's 2-norm at each restart) falls less than
        tenfold in that many steps, by the rule :class:`Stall`; 0 (default): never.

    Returns
    -------
    x : ndarray
    report : GMRESReport

    Examples
    --------
    A tridiagonal M-matrix, against a dense solve:

    >>> import numpy as np, scipy.sparse as sp
    >>> n = 200
    >>> A = sp.diags([-np.ones(n - 1), 2.1 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1]).tocsr()
    >>> b = np.ones(n)
    >>> x, rep = gmres(A.dot, b, rtol=1e-13, restart=30, norm_a=4.1)
    >>> rep.converged, rep.backward_error <= 1e-13
    (True, True)
    >>> bool(np.allclose(x, np.linalg.solve(A.toarray(), b), rtol=1e-10))
    True
    """
    from .progress import Progress
    with Progress(f"GMRES({restart}) on {np.size(b)} unknowns") as prog:
        if orthogonalisation not in ARNOLDI:
            raise ValueError(f"orthogonalisation must be one of {sorted(ARNOLDI)}, got {orthogonalisation!r}")
        return _gmres(matvec, b, psolve, x0, rtol, restart, maxiter, norm_a, check_every, prog,
                      orthogonalisation, int(stall))


def orthogonalise(V: np.ndarray, j: int, w: np.ndarray, ext=None) -> tuple:
    r"""One Arnoldi step's classical Gram-Schmidt twice: ``w`` against the rows ``V[:j+1]``, in place.

    Parameters
    ----------
    V : ndarray, shape (rows, n), C-contiguous float64
        The basis, one vector a row (orthonormal rows ``V[:j+1]``).
    j : int
    w : ndarray, shape (n,), contiguous float64
        Overwritten by :math:`(I - V_j V_j^T)^2 w` (computed as two projections).
    ext : module, optional
        The compiled kernels (:func:`ctmc._relax.extension`); None for numpy.

    Returns
    -------
    h : ndarray, shape (j + 1,)
        The coefficients :math:`h_1 + h_2`.
    norm : float
        :math:`\lVert w\rVert_2` after.

    Examples
    --------
    >>> import numpy as np
    >>> V = np.zeros((3, 4)); V[0, 0] = V[1, 1] = 1.0
    >>> w = np.array([1.0, 2.0, 3.0, 4.0])
    >>> h, norm = orthogonalise(V, 1, w)
    >>> h, norm, w
    (array([1., 2.]), 5.0, array([0., 0., 3., 4.]))
    """
    if ext is None:
        Vj = V[:j + 1]
        h = Vj @ w
        w -= h @ Vj
        h2 = Vj @ w           # the second pass ("twice is enough")
        w -= h2 @ Vj
        return h + h2, float(np.linalg.norm(w))
    h = np.empty(j + 1)
    return h, _norm(ext.cgs2(V, j, w, h), w)     # cgs2 fills h, then returns ||w||^2


def _combination(V, k, y, ext, out=None):
    """``y @ V[:k]`` (into ``out`` if given), compiled when ``ext`` is given."""
    if out is None:
        out = np.empty(V.shape[1])
    if ext is None:
        return np.matmul(y, V[:k], out=out)
    ext.combine(V, k, np.ascontiguousarray(y, dtype=float), out)
    return out


def dcgs2_project(V: np.ndarray, j: int, z: np.ndarray, ext=None) -> tuple:
    """The first pass of a DCGS2 step: ``(Q^T v, Q^T z, v.v, v.z)`` for ``Q = V[:j]``, ``v = V[j]`` (one read of ``Q``).

    >>> import numpy as np
    >>> V = np.array([[1.0, 0.0], [0.6, 0.8]])
    >>> dcgs2_project(V, 1, np.array([1.0, 1.0]))
    (array([0.6]), array([1.]), 1.0, 1.4)
    """
    v = V[j]
    if ext is None:
        Q = V[:j]
        return Q @ v, Q @ z, float(v @ v), float(v @ z)
    out = np.empty(2 * j + 2)
    ext.project2(V, j, v, z, out)
    return out[:j], out[j:2 * j], float(out[2 * j]), float(out[2 * j + 1])


def dcgs2_update(V: np.ndarray, j: int, z: np.ndarray, s, t, alpha: float, tau: float, ext=None) -> float:
    """The second pass of a DCGS2 step, in place: ``V[j] = (V[j] - Q^T s) / alpha``,
    ``z = ((z - Q^T t) - tau V[j]) / alpha`` with ``Q = V[:j]`` (one read of ``Q``); returns ``||z||^2``.

    >>> import numpy as np
    >>> V = np.array([[1.0, 0.0], [0.6, 0.8]]); z = np.array([1.0, 1.0])
    >>> dcgs2_update(V, 1, z, np.array([0.6]), np.array([1.0]), 0.8, 1.0), V[1], z
    (0.0, array([0., 1.]), array([0., 0.]))
    """
    v = V[j]
    if ext is not None:
        return ext.update2(V, j, v, z, np.ascontiguousarray(s), np.ascontiguousarray(t), alpha, tau)
    Q = V[:j]
    v -= s @ Q
    v /= alpha
    z -= t @ Q
    z -= tau * v
    z /= alpha
    return float(z @ z)


def _triangular(R, g, k) -> np.ndarray:
    """``y`` with ``R[:k, :k] y = g[:k]`` (upper triangular), by back substitution in numpy.

    The small dense algebra of the cycle stays out of BLAS/LAPACK: a threaded
    BLAS wakes its threads for each call, which on a loaded machine cost
    milliseconds for a 50 x 50 system.
    """
    y = np.empty(k)
    for i in range(k - 1, -1, -1):
        y[i] = (g[i] - float(np.dot(R[i, i + 1:k], y[i + 1:k]))) / R[i, i] if i + 1 < k else g[i] / R[i, i]
    return y


def _norm(norm2: float, w: np.ndarray) -> float:
    """``sqrt(norm2)``, or a scaled norm of ``w`` where the sum of squares under- or overflowed."""
    return float(np.sqrt(norm2)) if 1e-280 < norm2 < 1e280 else float(np.linalg.norm(w))


class _Step:
    """``V[j+1] = A P V[j]``, written in place: the product writes into the basis row it fills.

    ``matvec`` and ``psolve`` are wrapped by :func:`ctmc._relax.into`; the
    preconditioned vector goes to the work vector ``work`` (one for all
    steps), so a step allocates no vector and touches no fresh memory but
    the basis row it fills.
    """

    def __init__(self, V, matvec, psolve, work=None, fused=None):
        self.V, self.matvec, self.fused = V, into(matvec), fused
        self.psolve = None if psolve is None else into(psolve)
        self.work = np.empty(V.shape[1]) if work is None and psolve is not None else work

    def __call__(self, j: int) -> np.ndarray:
        V = self.V
        if self.fused is not None:            # P v and A P v in one kernel (see _fused)
            self.fused(V[j], self.work, V[j + 1])
        elif self.psolve is None:
            self.matvec(V[j], V[j + 1])
        else:
            self.psolve(V[j], self.work)
            self.matvec(self.work, V[j + 1])
        return V[j + 1]


class _CGS2(_Step):
    """Arnoldi by classical Gram-Schmidt twice: each step's Hessenberg column is final at once."""

    def __init__(self, V, matvec, psolve, ext, work=None, fused=None):
        super().__init__(V, matvec, psolve, work, fused)
        self.ext = ext

    def step(self, j: int) -> list:
        """``[(j, h, hn)]``: step ``j``'s column; ``V[j+1]`` set when ``hn > 0``."""
        w = self(j)
        h, hn = orthogonalise(self.V, j, w, self.ext)
        if hn > 0:
            np.divide(w, hn, out=w)
        return [(j, h, hn)]

    def finish(self) -> list:
        return []


class _DCGS2(_Step):
    r"""Arnoldi by DCGS2: Gram-Schmidt twice, the second pass of each vector delayed to the next step.

    At step :math:`j` the basis :math:`Q = V_j` is final and :math:`v = V[j]`
    is orthogonalised once. One read of :math:`Q` gives :math:`s = Q^Tv`,
    :math:`t = Q^Tz` for :math:`z = APv`, :math:`v^Tv` and :math:`v^Tz`; then
    :math:`q_j = (v - Qs)/\alpha` with :math:`\alpha^2 = v^Tv - s^Ts`
    corrects the previous column (:math:`h \mathrel{+}= \nu s`, its
    subdiagonal :math:`\nu\alpha`), and, since :math:`APq_j = (z - Q_{j+1}\bar H s)/\alpha`,
    the new column is :math:`c = ([t; \tau] - \bar H s)/\alpha` with
    :math:`\tau = q_j^Tz = (v^Tz - s^Tt)/\alpha`, and the next vector
    :math:`u = (z - Qt - \tau q_j)/\alpha`: one more read of :math:`Q` makes
    :math:`q_j` and :math:`u` together. Two reads of the basis a step, against
    three or four for CGS2 (Świrydowicz, Langou, Ananthan, Yang & Thomas,
    *Numer. Linear Algebra Appl.* 28, 2021; Bielich et al., *Parallel
    Computing* 112, 2022). A column is final one step late; the last one of
    a cycle keeps its single pass (it only enters the residual estimate).
    """

    def __init__(self, V, matvec, psolve, ext, work=None, fused=None):
        super().__init__(V, matvec, psolve, work, fused)
        self.ext = ext
        m = V.shape[0] - 1
        self.H = np.zeros((m + 1, m))       # the Hessenberg matrix, unrotated
        self.nu = 0.0                        # the norm of the pending vector before its scaling
        self.pending = None                  # the step whose column waits for its second pass

    def step(self, j: int) -> list:
        V, H, ext = self.V, self.H, self.ext
        v = V[j]
        z = self(j)                 # V[j+1], orthogonalised and scaled in place below
        s, t, vv, vz = dcgs2_project(V, j, z, ext)
        alpha2 = vv - float(s @ s)
        # v was scaled to norm 1 and its single pass left s small; if not, measure alpha outright
        alpha = float(np.sqrt(alpha2)) if alpha2 > 0.25 else float(np.linalg.norm(v - s @ V[:j]))
        done = []
        if j > 0:
            H[:j, j - 1] += self.nu * s
            H[j, j - 1] = self.nu * alpha
            done.append((j - 1, H[:j, j - 1].copy(), float(H[j, j - 1])))
        if not alpha > 0:            # v in the span of the basis: the step before was singular
            return done + [(j, np.zeros(j + 1), 0.0)]
        tau = (vz - float(s @ t)) / alpha
        norm2 = dcgs2_update(V, j, z, s, t, alpha, tau, ext)
        H[:j + 1, j] = (np.append(t, tau) - (H[:j + 1, :j] * s).sum(axis=1)) / alpha   # no BLAS call: see _triangular
        nu = _norm(norm2, z)
        H[j + 1, j] = nu
        if nu > 0:
            self.nu = nu
            np.divide(z, nu, out=z)
            self.pending = j
            return done
        self.pending = None
        return done + [(j, H[:j + 1, j].copy(), 0.0)]

    def finish(self) -> list:
        j = self.pending
        return [] if j is None else [(j, self.H[:j + 1, j].copy(), float(self.H[j + 1, j]))]


#: the Arnoldi orthogonalisations of :func:`gmres` (``orthogonalisation``)
ARNOLDI = {"cgs2": _CGS2, "dcgs2": _DCGS2}


def _fused(matvec, psolve):
    """``f(v, x, y)`` making ``x = P v``, ``y = A x`` in one kernel, if ``psolve`` offers it for the matrix ``matvec`` is.

    :func:`ctmc._relax.symmetric_gauss_seidel` offers it (``with_product``,
    Eisenstat's trick: the product from the lower triangle only); used when
    GMRES is given that very matrix as ``matvec``.
    """
    pair = getattr(psolve, "with_product", None)
    return pair[1] if pair is not None and not callable(matvec) and pair[0] is matvec else None


def _gmres(matvec, b, psolve, x0, rtol, restart, maxiter, norm_a, check_every, prog, orthogonalisation, stall):
    """The iteration of :func:`gmres`, reporting the backward-error estimate of each step to ``prog``.

    Its vectors are made once: the basis ``V`` (each row first touched by
    the product that fills it, so a short solve never touches the rows it
    does not use) and two work vectors for the preconditioned vector of a
    step and the combinations; the products and the preconditioner write
    into them (:func:`ctmc._relax.into`), or one kernel makes both
    (:func:`_fused`). The Givens rotations are done on Python floats.
    """
    b = np.asarray(b, dtype=float)
    fused = _fused(matvec, psolve)
    matvec = into(matvec if callable(matvec) else spmv(matvec))
    psolve = None if psolve is None else into(psolve)
    n, m = b.size, max(1, int(restart))
    x = np.zeros(n) if x0 is None else np.array(x0, dtype=float)
    nb = amax(b)
    V = np.empty((m + 1, n))
    work, comb = np.empty(n), np.empty(n)
    ext = extension()
    its = 0
    stalls = None                   # the stagnation test, from the first residual

    def correction(k, R, g):
        """``P V_k y`` for the least-squares ``y`` of the first ``k`` steps, in ``work``."""
        y = _triangular(R, g, k)
        if psolve is None:
            _combination(V, k, y, ext, work)
        else:
            psolve(_combination(V, k, y, ext, comb), work)
        return work

    def residual():
        """``b - A x``, in ``work``."""
        matvec(x, work)
        return np.subtract(b, work, out=work)

    while True:
        r = residual()
        be = backward_error(r, x, b, norm_a)
        if not np.isfinite(be):
            return x, GMRESReport(False, its, float("nan"), True)
        if be <= rtol or its >= maxiter:
            return x, GMRESReport(be <= rtol, its, be)
        beta = float(np.linalg.norm(r))
        if not (0.0 < beta < np.inf):    # a residual of denormals: its norm underflows
            return x, GMRESReport(be <= rtol, its, be)
        np.divide(r, beta, out=V[0])
        if stalls is None:
            stalls = Stall(stall, beta)
        R = np.zeros((m, m))      # the rotated (upper triangular) Hessenberg matrix
        g = [0.0] * (m + 1)
        g[0] = beta
        cs, sn = [0.0] * m, [0.0] * m
        den = norm_a * amax(x) + nb
        k = 0
        arnoldi = ARNOLDI[orthogonalisation](V, matvec, psolve, ext, work, fused)
        stop = False
        steps = min(m, maxiter - its)
        for j in range(steps + 1):
            if j < steps:
                columns = arnoldi.step(j)
                its += 1
            else:
                columns = arnoldi.finish()      # the column still waiting for its second pass
            for jj, h, hn in columns:
                col = h.tolist()
                col.append(float(hn))
                size = math.hypot(*col)         # ||A P v_jj||
                for i in range(jj):    # the rotations so far
                    c, s_ = cs[i], sn[i]
                    col[i], col[i + 1] = c * col[i] + s_ * col[i + 1], -s_ * col[i] + c * col[i + 1]
                d = math.hypot(col[jj], col[jj + 1])
                if not (math.isfinite(d) and d > _SINGULAR * size):
                    # a singular step (A P v_jj in the span of the earlier ones, to round-off): keep the
                    # progress of the steps before it, and say the iteration broke down
                    if k:
                        x += correction(k, R, g)
                    return x, GMRESReport(False, its, backward_error(residual(), x, b, norm_a), True)
                cs[jj], sn[jj] = col[jj] / d, col[jj + 1] / d
                col[jj] = d
                g[jj + 1], g[jj] = -sn[jj] * g[jj], cs[jj] * g[jj]
                R[:jj + 1, jj] = col[:jj + 1]
                k = jj + 1
                res = abs(g[jj + 1])
                prog.residual(res / den if den else np.inf, rtol, f"iteration {its}")
                if not math.isfinite(res):
                    return x, GMRESReport(False, its, float("nan"), True)
                # ||r||_inf <= ||r||_2 = |g[jj+1]|: a conservative test, then the true one at the cycle's end
                if hn == 0.0 or res <= rtol * den:
                    stop = True
                    break
                if stalls(res):
                    x += correction(k, R, g)
                    be = backward_error(residual(), x, b, norm_a)
                    return x, GMRESReport(be <= rtol, its, be, not np.isfinite(be), be > rtol)
                if k % check_every == 0:
                    xc = np.add(x, correction(k, R, g), out=work)
                    den = norm_a * amax(xc) + nb
                    if res <= rtol * den:
                        stop = True
                        break
            if stop:
                break
        if k:
            x += correction(k, R, g)


# --------------------------------------------------------------------------
# BiCGStab
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class BiCGStabReport:
    """What :func:`bicgstab` did.

    Attributes
    ----------
    converged : bool
        The recurred residual met ``rtol`` (``||r||_2 <= rtol ||b||_2``), or the iterate met the bracket.
    iterations : int
        Iterations (two products with ``A`` and two applications of ``P`` each; a half step counts one).
    backward_error : float
        ``||b - A x||_inf / (norm_a ||x||_inf + ||b||_inf)`` of the returned ``x``, recomputed.
    breakdown : bool
        A zero or non-finite inner product stopped the recurrence.
    accepted : bool
        The bracket (``bracket``) stopped the iteration.
    stalled : bool
        The stagnation test (``stall``) stopped the iteration.
    """

    converged: bool
    iterations: int
    backward_error: float
    breakdown: bool = False
    accepted: bool = False
    stalled: bool = False


def bicgstab(matvec, b: np.ndarray, psolve: Optional[Callable] = None, *, x0=None, rtol: float = 1e-10,
             maxiter: int = 10_000, norm_a: float, bracket: float = 0.0, stall: int = 0, work=None,
             overwrite_b: bool = False) -> tuple:
    r"""Solve ``A x = b`` by right-preconditioned BiCGStab (van der Vorst, *SIAM J. Sci. Stat. Comput.* 13, 1992).

    With :math:`\hat r = r_0`, each iteration makes the direction
    :math:`p = r + \beta(p - \omega v)`, :math:`\hat p = Pp`, :math:`v = A\hat p`,
    :math:`\alpha = (\hat r\cdot r)/(\hat r\cdot v)`, :math:`s = r - \alpha v`,
    :math:`\hat s = Ps`, :math:`t = A\hat s`, :math:`\omega = (t\cdot s)/(t\cdot t)`,
    :math:`x \mathrel{+}= \alpha\hat p + \omega\hat s`, :math:`r = s - \omega t`:
    a short recurrence, no basis. The iteration is scipy's, with the same
    stopping test on the recurred residual, :math:`\|r\|_2 \le \mathrm{rtol}\|b\|_2`,
    checked after each half step, but for the shadow residual :math:`\hat r`:
    :math:`r_0` scaled entrywise by fixed pseudo-random factors in :math:`[0.5, 1.5]`
    (the same every call), not :math:`r_0` itself. On the return-time system of a tandem
    network (c = 511) with :math:`\hat r = r_0` the recurred residual grew to
    :math:`10^{16}\|b\|` and back, leaving the iterate's true residual at :math:`6\cdot 10^5`
    after 200 iterations; with the scaled one, 143-149 iterations (three seeds)
    reached a residual of 0.3, and the gallery's other systems took the same counts. Its vectors are made once; the
    preconditioner and the product write into them, and where ``psolve`` is
    the Gauss-Seidel preconditioner of the very matrix ``matvec`` one kernel
    makes :math:`\hat p` and :math:`v` (and :math:`\hat s`, :math:`t`):
    Eisenstat's product from the lower triangle only (see :func:`_fused`).
    The vector work is four compiled passes an iteration where the kernels are
    built (:mod:`ctmc._relax`), numpy otherwise.

    With ``bracket > 0``, for an M-matrix ``A`` and ``b >= 0``, it also stops at
    the first iterate whose residual proves it within that factor of the
    solution entrywise (:func:`bracket_factor` of the residual ``<= bracket``):
    tested on the recurred residual each step, in the pass that updates it,
    and where that passes on the true residual (one product).

    With ``stall = k > 0`` it gives up (``stalled``) by the rule :class:`Stall` on the recurred
    residual: a probe that is not converging stops after about :math:`k` iterations, not ``maxiter``.

    Parameters
    ----------
    matvec : callable or scipy.sparse CSR matrix
    b : ndarray, shape (n,)
    psolve : callable, optional
        ``v -> P v``, ``P`` approximating ``A^{-1}`` (identity if None).
    x0 : ndarray, optional
    rtol : float
    maxiter : int
    norm_a : float
        ``||A||_inf`` (or an upper estimate), for the reported backward error.
    bracket : float
        0: off.
    stall : int
        Iterations without a tenfold fall of the residual before giving up; 0: off.
    work : list of ndarray, optional
        Float64 vectors of ``b``'s size the iteration takes its own from (:func:`bicgstab_work`, made
        by the caller: in its thread's allocator, where freed memory of that thread is reused); the
        iterate returned is one of them. None: made here.
    overwrite_b : bool
        ``b``'s vector may be written (the caller does not read it again): where ``b`` has at most one
        entry in :data:`SPARSE_RHS` that is not ``+0.0`` (a pinned stationary system's row of rates) and
        there is no bracket, those entries are kept apart and ``b``'s vector becomes the iterate's (it may
        be the ``x`` returned): one vector fewer beside the iteration, the same numbers (the residual
        ``b - A x`` is ``0.0 - (Ax)_i`` off them, as it is with ``b`` whole).

    Returns
    -------
    x : ndarray
    report : BiCGStabReport

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> n = 200
    >>> A = sp.diags([-np.ones(n - 1), 2.1 * np.ones(n), -np.ones(n - 1)], [-1, 0, 1]).tocsr()
    >>> x, rep = bicgstab(A, np.ones(n), rtol=1e-12, norm_a=4.1)
    >>> rep.converged, bool(np.allclose(x, np.linalg.solve(A.toarray(), np.ones(n)), rtol=1e-9))
    (True, True)
    >>> x, rep = bicgstab(A, np.ones(n), rtol=1e-12, norm_a=4.1, bracket=2.0)
    >>> rep.accepted, rep.iterations < 20, bracket_factor(np.ones(n) - A @ x, np.ones(n)) <= 2.0
    (True, True, True)
    """
    from .progress import Progress
    with Progress(f"BiCGStab on {np.size(b)} unknowns") as prog:
        return _bicgstab(matvec, b, psolve, x0, rtol, maxiter, norm_a, float(bracket), int(stall), prog, work,
                         bool(overwrite_b))


def bicgstab_work(n: int, preconditioned: bool = True) -> list:
    """The vectors :func:`bicgstab` takes for ``n`` unknowns (``work=``): seven, six without a preconditioner."""
    return [np.empty(n) for _ in range(7 if preconditioned else 6)]


class _Vectors:
    """BiCGStab's vector steps: compiled (one pass each, :mod:`ctmc._kernels`) or numpy (the same formulas)."""

    def __init__(self, ext, n):
        # the numpy steps' scratch vector; the compiled ones need none
        self.ext, self.tmp, self.out = ext, (np.empty(n) if ext is None else None), np.empty(5)

    def direction(self, p, r, v, beta, omega):
        """``p = r + beta (p - omega v)``."""
        if self.ext is not None:
            return self.ext.bicg_dir(p, r, v, beta, omega)
        np.multiply(v, omega, out=self.tmp)
        np.subtract(p, self.tmp, out=p)
        np.multiply(p, beta, out=p)
        np.add(r, p, out=p)

    def half(self, s, r, v, alpha, x, ph) -> float:
        """``s = r - alpha v``, ``x += alpha ph``; returns ``s.s``."""
        if self.ext is not None:
            return self.ext.bicg_half(s, r, v, alpha, x, ph)
        np.multiply(v, alpha, out=self.tmp)
        np.subtract(r, self.tmp, out=s)
        np.multiply(ph, alpha, out=self.tmp)
        x += self.tmp
        return float(np.dot(s, s))

    def dot2(self, a, u, w) -> tuple:
        """``(a.u, a.w)``."""
        if self.ext is not None:
            return self.ext.dot2(a, u, w)
        return float(np.dot(a, u)), float(np.dot(a, w))

    def update(self, x, r, ph, sh, s, t, rhat, b, alpha, omega) -> tuple:
        """``x += alpha ph + omega sh``, ``r = s - omega t``; returns ``(r.r, rhat.r, factor)``, ``factor``
        the :func:`bracket_factor` of ``r`` against ``b`` (None: not computed)."""
        if self.ext is not None:
            out = self.out
            self.ext.bicg_update(x, r, ph, sh, s, t, rhat, b, alpha, omega, out)
            rr, rhr, hi, lo, off = out.tolist()
            factor = None if b is None else ((1.0 + lo) / (1.0 - hi) if hi < 1.0 and off == 0.0 else np.inf)
            return rr, rhr, factor
        if alpha:
            np.multiply(ph, alpha, out=self.tmp)
            x += self.tmp
        np.multiply(sh, omega, out=self.tmp)
        x += self.tmp
        np.multiply(t, omega, out=self.tmp)
        np.subtract(s, self.tmp, out=r)
        return float(np.dot(r, r)), float(np.dot(rhat, r)), None if b is None else bracket_factor(r, b)


#: the seed of :func:`bicgstab`'s shadow residual (fixed: a solve is repeatable)
_SHADOW_SEED = 20231

#: :func:`bicgstab` with ``overwrite_b`` keeps ``b`` apart (its entries other than ``+0.0``, index and
#: value) and takes its vector for the iterate's where at most one entry in this many is one of them
SPARSE_RHS = 16


def _bicgstab(matvec, b, psolve, x0, rtol, maxiter, norm_a, bracket, stall, prog, work=None,
              overwrite_b=False):
    r"""The iteration of :func:`bicgstab`; its vectors made once (seven of ``b``'s size with a preconditioner,
    eight with the numpy steps: :data:`ctmc.kernels.plan.BICGSTAB_VECTORS` counts them).

    The half step :math:`s` is made in :math:`r`'s vector (``r`` is not read again before ``r = s - \omega t``)
    and :math:`\hat s = Ps` in :math:`\hat p`'s, :math:`x \mathrel{+}= \alpha\hat p` made before it: the
    same numbers as ``x = (x + alpha ph) + omega sh`` in one pass (the kernels do not contract to FMA)."""
    b = np.ascontiguousarray(b, dtype=float)
    fused = _fused(matvec, psolve)
    matvec = into(matvec if callable(matvec) else spmv(matvec))
    psolve = None if psolve is None else into(psolve)
    n = b.size
    work = list(work or ())
    bnorm = float(np.linalg.norm(b))
    kept = None                             # (index, value) of b's entries other than +0.0, b kept apart
    if overwrite_b and bracket <= 0 and x0 is None and b.ndim == 1 and b.flags.writeable:
        nz = np.flatnonzero(b.view(np.int64))             # every bit pattern but +0.0's (-0.0 and NaN kept)
        if nz.size <= n // SPARSE_RHS:
            kept = nz, b[nz]
            work.append(b)                  # the iterate's vector (taken first, written with zeros)
            b = None
        del nz

    def vector(fill=None):
        w = work.pop() if work else np.empty(n)
        if fill is not None:
            w.fill(fill)
        return w

    x = vector(0.0) if x0 is None else np.array(x0, dtype=float)
    r, v, t = vector(), vector(0.0), vector()
    s = r                                   # the half step in the residual's vector
    p = vector()
    ph = vector() if psolve is not None else p
    sh = ph if psolve is not None else s    # P s in P p's vector, once x has taken alpha P p
    vec = _Vectors(extension(), n)
    watch = b if bracket > 0 else None

    def apply(w, wh, out):
        """``wh = P w``, ``out = A wh``."""
        if fused is not None:
            fused(w, wh, out)
        else:
            if psolve is not None:
                psolve(w, wh)
            matvec(wh, out)

    def residual(out):
        """``b - A x`` into ``out``."""
        matvec(x, out)
        if kept is None:
            return np.subtract(b, out, out=out)
        at = out[kept[0]]
        np.subtract(0.0, out, out=out)      # b_i - (Ax)_i with b_i = +0.0
        out[kept[0]] = kept[1] - at
        return out

    def report(conv, its, brk=False, acc=False, stalled=False):
        bb = b if kept is None else kept[1]                 # (||b||_inf: the entries kept apart)
        be = backward_error(residual(t), x, bb, norm_a)
        brk = brk or not np.isfinite(be)
        return x, BiCGStabReport(bool(conv), its, be if np.isfinite(be) else float("nan"), brk, acc, stalled)

    residual(r)
    atol = rtol * bnorm
    if bnorm == 0.0:
        x[:] = 0.0
        return report(True, 0)
    rr = float(np.dot(r, r))
    if math.sqrt(rr) <= atol:
        return report(True, 0)
    # the shadow residual: r_0 scaled entrywise by fixed pseudo-random factors in [0.5, 1.5] (not r_0 itself)
    # where r_0 is 0 (a pinned system's unit right-hand side), the shadow takes max |r_0| instead: a shadow
    # with r_0's few entries is orthogonal to r after a step that solves those rows (polling N=15: rho = 0)
    # (made in the factors' vector: no temporary vector beside the nine)
    rhat = np.random.default_rng(_SHADOW_SEED).random(out=vector())     # uniform(0.5, 1.5, n), in place:
    rhat += 0.5                                                          # the same numbers
    top = np.maximum(r.max(), -r.min())
    np.multiply(rhat, r, out=rhat, where=r != 0.0)      # (one mask at a time beside the seven vectors)
    np.multiply(rhat, top, out=rhat, where=r == 0.0)
    rho = float(np.dot(rhat, r))
    alpha = omega = 1.0
    its = 0
    stalls = Stall(stall, math.sqrt(rr))
    while its < maxiter:
        if rho == 0.0 or not np.isfinite(rho):
            return report(False, its, brk=True)
        if its == 0:
            np.copyto(p, r)
        else:
            vec.direction(p, r, v, (rho / rho_old) * (alpha / omega), omega)
        apply(p, ph, v)
        rv = vec.dot2(rhat, v, v)[0]
        if rv == 0.0 or not np.isfinite(rv):
            return report(False, its, brk=True)
        alpha = rho / rv
        ss = vec.half(s, r, v, alpha, x, ph)           # and x += alpha ph: sh takes ph's vector
        its += 1
        if math.sqrt(ss) <= atol:                       # the half step is enough
            return report(True, its)
        apply(s, sh, t)
        tt, ts = vec.dot2(t, t, s)
        if tt == 0.0 or not np.isfinite(tt):
            return report(False, its, brk=True)
        omega = ts / tt
        rho_old = rho
        rr, rho, factor = vec.update(x, r, sh, sh, s, t, rhat, watch, 0.0, omega)    # x + 0 sh = x
        rnorm = math.sqrt(rr) if rr >= 0 else float("nan")
        prog.residual(rnorm / bnorm, rtol, f"iteration {its}", name="relative residual")
        if not np.isfinite(rnorm):
            return report(False, its, brk=True)
        if rnorm <= atol:
            return report(True, its)
        if factor is not None and factor <= bracket and bracket_factor(residual(t), b) <= bracket:
            return report(True, its, acc=True)
        if omega == 0.0:
            return report(False, its, brk=True)
        if stalls(rnorm):
            return report(False, its, stalled=True)
    return report(False, its)


def bracket_factor(r, b) -> float:
    r"""``(1 + rho_-) / (1 - rho_+)`` of the componentwise residual ``rho = r / b`` (``inf`` unless ``rho_+ < 1``).

    For :math:`Mx = b`, :math:`M` a nonsingular M-matrix (so :math:`M^{-1} \ge 0`) and
    :math:`b \ge 0`, an approximation :math:`\hat x` with residual :math:`r = b - M\hat x`,
    :math:`\rho_+ = \max(0, \max_i r_i/b_i)` and :math:`\rho_- = \max(0, \max_i -r_i/b_i)`
    (over :math:`b_i > 0`; where :math:`b_i = 0` the residual must be 0) gives
    :math:`-\rho_- b \le r \le \rho_+ b`, so :math:`x - \hat x = M^{-1}r` lies between
    :math:`-\rho_- x` and :math:`\rho_+ x`:

    .. math:: x \le \hat x / (1 - \rho_+) \le x\,(1 + \rho_-)/(1 - \rho_+),

    the upper bound :math:`\hat x/(1-\rho_+)` is within this factor of :math:`x`, entrywise.
    A test for stopping a solve (round-off not counted: the caller proves its
    bound on a residual it recomputes).

    >>> import numpy as np
    >>> bracket_factor(np.array([0.5, -0.25, 0.0]), np.array([1.0, 1.0, 0.0]))
    2.5
    """
    r, b = np.ravel(r), np.ravel(b)
    # block by block: the temporaries of the quotients are a block's, not vectors beside a solve's own
    his, los = [], []
    for s in range(0, r.size, _BLOCK):
        rb, bb = r[s:s + _BLOCK], b[s:s + _BLOCK]
        pos = bb > 0
        if np.any(rb[~pos] != 0):
            return np.inf
        rho = rb[pos] / bb[pos]
        his.append(rho.max(initial=0.0))
        los.append(-rho.min(initial=0.0))
    hi = max(float(np.max(his, initial=0.0)), 0.0)
    lo = max(float(np.max(los, initial=0.0)), 0.0)
    return (1.0 + lo) / (1.0 - hi) if hi < 1.0 else np.inf


#: the entries :func:`bracket_factor` takes at a time
_BLOCK = 1 << 13
