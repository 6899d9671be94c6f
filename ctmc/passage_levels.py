r"""Mean hitting times of a rare state from the stationary law and one sparse solve near it.

The formula
-----------
For an irreducible chain with stationary law :math:`\pi`, a target state :math:`a` and a
regeneration state :math:`z \ne a` (a probable one), split at :math:`B = \{a, z\}`:

.. math::

    h_i = E_i[T_a] = u_i + w_i H, \qquad M u = 1, \quad M q = R_{Xa}, \quad w = 1 - q, \quad H = E_z[T_a],

:math:`M = -Q_{XX}` on :math:`X = S \setminus B`, :math:`u_i = E_i[T_B]`,
:math:`q_i = P_i(T_a < T_z)`. The system is well conditioned (the chain meets :math:`B` quickly
from everywhere, since :math:`z` is probable). The huge part, :math:`H` (of order
:math:`1/\pi_a`), comes from Kac's formula: the mean return time to :math:`a` is
:math:`1/(\pi_a q_a)`, a holding time :math:`1/q_a` and then :math:`h` from the state entered, so
:math:`\sum_j R_{aj} h_j = 1/\pi_a - 1` and

.. math::

    H = \frac{1/\pi_a - 1 - (Ru)_a}{(Rw)_a}.

So the means keep the relative accuracy of :math:`\pi_a` (an aggregation solve on the levels keeps
it for probabilities of :math:`10^{-200}`: ``level_iad`` in :mod:`ctmc.aggregation`), where a
direct solve of :math:`M_F h = 1` on :math:`F = S \setminus \{a\}` has a condition number of
order :math:`1/\pi_a`, and a factorisation of the whole chain (ten million states) does not fit.

The band
--------
When every transition moves a level by one and the chain is larger than :data:`BAND_START` states,
the system is solved on the *band* of the levels above :math:`L_0`, the largest band of at most
that many states (widened fourfold while its truncation estimate below is above
:data:`TRUNC_TOL`, up to ``band_states``), with the states of levels :math:`\le L_0` joined to
:math:`z` (absorbing with :math:`w = 1`). Below the band :math:`q` is tiny (:math:`a` is reached
from there only across every level in between) and :math:`u \le U`, the mean time to reach
:math:`z`, is small beside :math:`H`: there :math:`h = H` is taken, in the band
:math:`\tilde u + \tilde w H`. With :math:`c = \max q` on level :math:`L_0` the answer is off by
at most :math:`c + U/H` relatively (every path that leaves the band meets
:math:`h \in [H(1-c), H + U]`). Both are *estimated*: :math:`c` from the geometric decay of
:math:`\max \tilde q` per level in the upper half of the band (:func:`_escape_estimate`),
:math:`U` by the mean time of the levels' birth-death chain (rates averaged by :math:`\pi` within a
level) to reach the level of :math:`z` from its farthest level.

Several processes
-----------------
The same steps on a distributed chain (PETSc; call on every process): the band is small, so its rows
of :math:`R` and exit rates are gathered and factorised on every process
(:class:`ctmc.passage_systems.ReplicatedSystem`, which on one process reads the chain's own rows);
:math:`(Rv)_a` comes from the process owning :math:`a` (an ``allsum``), the residuals' and the band's
per-level maxima by ``allmax``/``gather``, and the level chain of :math:`U` is summed over the
processes' rows. The law and the levels may be given whole or as each process's owned part (gathered:
the level averages weigh every state of a level); the means are gathered as the chain's
``default_gather`` says.

The error
---------
:math:`M^{-1} \ge 0` and :math:`M^{-1}1 = \tilde u`, so a residual :math:`r` of :math:`\hat u` or
:math:`\hat q` (recomputed; :math:`\epsilon` its largest entry plus the round-off of computing it,
``op.product_roundoff()``) bounds the errors entrywise: :math:`|\hat u - \tilde u| \le \epsilon_u
\tilde u`, :math:`\tilde u \le \hat u/(1-\epsilon_u)`, :math:`|\hat q - \tilde q| \le \epsilon_q
\tilde u`. With :math:`\delta_\pi` the relative error of :math:`\hat\pi_a`, to first order,

.. math::

    \frac{|\delta H|}{H} \le \frac{\delta_\pi/\hat\pi_a + (R|\delta u|)_a}{1/\hat\pi_a - 1 - (R\hat u)_a}
        + \frac{(R|\delta q|)_a}{(R\hat w)_a} + c + \frac{U}{H}, \qquad
    \frac{|\delta h_i|}{h_i} \le \frac{|\delta u_i| + |\delta q_i| H + \hat w_i H (|\delta H|/H + c + U/H)}
        {\hat h_i}.

The solve's part is proven (``info["solve_bound"]``).

The law's part
--------------
With :math:`r = \hat\pi Q` (:math:`\sum_j r_j = 0`, :math:`s = \sum_j \hat\pi_j`) and the group
inverse, :math:`\hat\pi - s\pi = r Q^\#`, and :math:`Q^\#_{ja} - Q^\#_{aa} = \pi_a h_j`, so exactly

.. math::

    \frac{\hat\pi_a}{s\pi_a} - 1 = \frac1s \sum_j r_j (h_j - H) = \frac1s \sum_j r_j (u_j - q_j H)

(:math:`u_a = 0, q_a = 1`; :math:`u_z = q_z = 0`). Where the band is the whole chain, :math:`u` and
:math:`q` are the band's, within the residual bounds above, and :math:`H \le \hat H (1 + |\delta|) f`
(:math:`f` from those bounds), so :math:`|\delta| \le (A + B)/(1 - B)` with
:math:`A = \sum_j |r_j|(\hat u_j + |\delta u_j|)/s`, :math:`B = f \hat H \sum_j |r_j|(\hat q_j +
|\delta q_j|)/s` (:math:`|r|` with the round-off of computing it): :math:`\delta_\pi` is then proven,
from the law itself, whatever solved it (``info["pi_error_kind"] = "proven"``, and the result's
``error_bound_kind``). With a band of the top levels the states below carry :math:`q \le c` only, and
:math:`c \hat H` is huge: :math:`\delta_\pi` is the caller's ``pi_error`` (an iterative law gives no
proven entrywise bound: estimated from its balance error, :data:`PI_ERROR_PER_BALANCE`), and the bound
of the whole is an ``estimate``. (JSQ, rho = 0.95, the level_iad law: :math:`1.8\cdot10^{-14}`,
:math:`2.8\cdot10^{-13}` off the closed form at K = 100, 300; proven :math:`9\cdot10^{-12}`,
:math:`5\cdot10^{-11}`, mostly the round-off of :math:`r`; :data:`PI_ERROR_PER_BALANCE` says
:math:`10^{-10}`.)
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.linalg import solve_banded

from .backends import operator_for
from .backends.base import LinearSpec, worst
from .kernels.evidence import judge
from .kernels.levels import csr_entries, level_chain
from .options import Tolerances
from .passage_systems import ReplicatedSystem
from .results import HittingResult, Status

__all__ = ["BAND_START", "BAND_STATES", "PI_ERROR_PER_BALANCE", "TRUNC_TOL", "level_hitting_mean"]

#: the first band's states (JSQ at rho = 0.95: the top 630 levels, where q falls to 1e-14)
BAND_START = 100_000
#: the band's states at most (one sparse LU; 1.2e6 states of JSQ's two-dimensional chain: about 1.5 GB)
BAND_STATES = 1_200_000
#: a band is widened (4x its states) while its truncation estimate ``c + U/H`` is above this
TRUNC_TOL = 1e-13
#: the relative error of a stationary probability estimated as this many times the law's balance error
#: (``level_iad`` at tail_tol 1e-11, JSQ rho = 0.95: P_block 2e-12 (K = 1500) .. 7.4e-11 (K = 4500) off the
#: closed form, every normal probability within 1.1e-10 of a sparse LU at K = 1500 (balance 7.9e-12))
PI_ERROR_PER_BALANCE = 20.0


def _check(op, target, pi, levels, regeneration, pi_error, band_states):
    """Checks made before any heavy work (the same answer on every process); returns
    ``(a, z, pi, levels)``, ``pi`` and ``levels`` whole (gathered when given as owned parts)."""
    n = op.n
    if isinstance(target, bool) or not isinstance(target, (int, np.integer)) or not 0 <= target < n:
        raise ValueError(f"target: expected the index of one state in 0..{n - 1}, got {target!r}")
    pi, levels = (_whole(op, np.asarray(v), name) for v, name in ((pi, "pi"), (levels, "levels")))
    pi = pi.astype(float)
    if not np.all(np.isfinite(pi)) or (pi < 0).any():
        raise ValueError(f"pi: expected {n} finite probabilities >= 0 (the stationary law)")
    if not np.issubdtype(levels.dtype, np.integer):
        raise ValueError(f"levels: expected {n} integers (the level of every state)")
    if not (np.isfinite(pi_error) and pi_error >= 0):
        raise ValueError(f"pi_error: expected a relative error >= 0, got {pi_error!r}")
    if isinstance(band_states, bool) or not isinstance(band_states, (int, np.integer)) or band_states < 1:
        raise ValueError(f"band_states: expected an integer >= 1, got {band_states!r}")
    a = int(target)
    if not pi[a] >= np.finfo(float).tiny:
        raise ValueError(f"pi: the target's probability {pi[a]:.3g} is not a normal double (below 2.2e-308): "
                         "its mean hitting times (about 1/pi) overflow the double range")
    z = int(np.argmax(np.where(np.arange(n) == a, -1.0, pi))) if regeneration is None else regeneration
    if isinstance(z, bool) or not isinstance(z, (int, np.integer)) or not 0 <= z < n or z == a:
        raise ValueError(f"regeneration: expected a state index in 0..{n - 1} other than the target {a}, "
                         f"got {z!r}")
    return a, int(z), pi, levels


def _whole(op, v, name):
    """``v`` on every state, on every process: as given (``n`` entries, replicated) or gathered from the
    owned parts (``stop - start`` entries on each process of several; a collective)."""
    n, m = op.n, op.stop - op.start
    kind = 1.0 if v.shape == (n,) else 2.0 if op.size > 1 and v.shape == (m,) else 0.0
    if op.size > 1 and op.allmin(kind) != op.allmax(kind):
        kind = 0.0
    if kind == 0.0:
        alt = " or each process's owned part" if op.size > 1 else ""
        raise ValueError(f"{name}: expected {n} entries (every state){alt}, got shape {v.shape}")
    return v if kind == 1.0 else op.gather(v, "all")


def _global_rows(op):
    """The owned rows of ``Q`` as an ``n x n`` CSR matrix whose other rows are empty (no copy of the
    entries): what :func:`ctmc.kernels.levels.level_chain` reads, indexed by global state numbers."""
    G = op.generator_rows(False)
    if G.shape[0] == op.n:
        return G
    ip = G.indptr
    ip = np.concatenate([np.zeros(op.start, ip.dtype), ip, np.full(op.n - op.stop, ip[-1], ip.dtype)])
    return sp.csr_matrix((G.data, G.indices, ip), shape=(op.n, op.n))


def _check_levels(op, levels) -> None:
    """``ValueError`` (on every process) unless every transition of the owned rows moves ``levels`` (whole)
    by one (read a chunk of entries at a time, :func:`ctmc.kernels.levels.csr_entries`)."""
    hit = [-1.0, -1.0]
    for rows, cols, vals in csr_entries(op.generator_rows(False)):
        src = rows + op.start
        bad = (cols != src) & (vals != 0) & (np.abs(levels[cols] - levels[src]) != 1)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            hit = [float(src[i]), float(cols[i])]
            break
    hits = op.gather(np.array(hit), "all").reshape(-1, 2)
    hits = hits[hits[:, 0] >= 0].astype(np.int64)
    if hits.size:
        i, j = (int(v) for v in hits[0])
        raise ValueError(f"levels: the transition {i} -> {j} moves the level from {int(levels[i])} to "
                         f"{int(levels[j])}; every transition must move it by one")


def _band_floor(levels, a, band_states):
    """The largest level ``L0`` below the target's whose states above number at most ``band_states``
    (``min - 1``: no truncation when the whole chain fits)."""
    lo, top = int(levels.min()), int(levels[a])
    counts = np.bincount(levels - lo)
    above = np.cumsum(counts[::-1])[::-1]             # above[k] = states with level >= lo + k
    fits = np.flatnonzero(above <= band_states)
    if fits.size == 0 or fits[0] == 0:
        return lo - 1
    return min(lo + int(fits[0]) - 1, top - 1)


def _level_time(op, pi, levels, home) -> float:
    """Mean time of the levels' birth-death chain (rates averaged by ``pi`` in a level:
    :func:`ctmc.kernels.levels.level_chain`, each process's rows summed over the processes) to reach level
    ``home`` from the farthest level: the estimate ``U`` of the mean time to reach the regeneration state
    (inf if a level cannot reach it)."""
    X = levels != home
    if not X.any():
        return 0.0
    ab = op.allsum(level_chain(_global_rows(op), X, levels, pi)[2])
    try:
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            m = solve_banded((1, 1), ab, np.ones(ab.shape[1]), check_finite=False)
    except (ValueError, np.linalg.LinAlgError):         # a level that never moves towards home
        return np.inf
    return float(m.max()) if np.all(np.isfinite(m)) and np.all(m > 0) else np.inf


def _escape_estimate(op, q, levels, X, L0, top) -> float:
    r"""The estimate ``c`` of ``max q`` on level ``L0``: the band's largest ``q`` per level decays
    geometrically (as :math:`\rho^{\,\text{top} - L}` in a queue of load :math:`\rho`); its rate is read
    between the levels at a half and three quarters of the way up, where the band's boundary (``q = 0``
    below ``L0 + 1``) has not pulled ``q`` down, and carried down to ``L0``. ``q``, ``X``: owned parts;
    ``levels``: whole."""
    m = np.zeros(int(levels.max()) + 1)
    own = levels[op.start:op.stop]
    np.maximum.at(m, own[X], q[X])
    m = op.gather(m, "all").reshape(op.size, -1).max(axis=0)
    l2 = (L0 + top) // 2
    l1 = (l2 + top) // 2
    near = float(m[L0 + 1])
    if not (l2 > L0 and l1 > l2 and m[l1] > 0 and m[l2] > 0):
        return max(near, float(m[l2]) if l2 > L0 else 1.0)
    with np.errstate(over="ignore", under="ignore"):
        far = float(np.exp(np.log(m[l2]) + (l2 - L0) / (l1 - l2) * np.log(m[l2] / m[l1])))
    return max(near, min(far, 1.0))


def _band(op, a, z, levels, L0):
    """The band's solve: ``(X, D, u, q, eps_u, eps_q, report)`` (owned parts), ``D`` the states joined to
    ``z`` (levels ``<= L0``), ``eps`` the residuals' bounds (the module's "The error"). The band is gathered
    on every process and factorised there (:class:`ctmc.passage_systems.ReplicatedSystem`: on one process
    the gather is the chain's own rows)."""
    ea = np.arange(op.start, op.stop) == a
    D = levels[op.start:op.stop] <= L0
    if op.start <= z < op.stop:
        D[z - op.start] = True
    X = ~(ea | D)
    system = ReplicatedSystem(op, X, 0.0)
    B = np.column_stack([X.astype(float), np.where(X, op.rates(ea.astype(float)), 0.0)])
    x, rep = system.solve(B)
    rep.info.update(system.info)
    system.close()
    sol = np.where(X[:, None], x, 0.0)
    r = np.where(X[:, None], B - (op.exit_rates[:, None] * sol - op.rates(sol)), 0.0)   # B - M x on X
    # |fl(r) - r| <= gam (|b| + |M||x|), |M||x| <= 2 q_max ||x|| on X
    gam, norm_m = op.product_roundoff(), 2.0 * op.allmax(float(np.max(op.exit_rates[X], initial=0.0)))

    def top(v):
        return op.allmax(float(np.abs(v).max(initial=0.0)))
    eps_u, eps_q = (top(r[:, k]) + gam * (top(B[:, k]) + norm_m * top(sol[:, k])) for k in (0, 1))
    return X, D, sol[:, 0], sol[:, 1], eps_u, eps_q, rep


def _law_error(op, pi, X, ea, u, q, du, dq, H, f) -> float:
    r"""The relative error of :math:`\hat\pi_a` from the law's residual (the module's "The law's part"):
    :math:`(A + B)/(1 - B)` plus the normalisation's, or inf (``B >= 1/2``). ``pi`` owned; ``u, q, du, dq``
    the band's solutions and their bounds (owned; the band is the whole chain but ``a`` and ``z``); ``f``
    bounds :math:`H/\hat H` over :math:`1 + |\delta|`."""
    p = pi[op.start:op.stop]
    into = op.rates(p, transpose=True)                             # (pi R)_j
    r = np.abs(into - op.exit_rates * p) + op.product_roundoff() * (into + op.exit_rates * p)
    total = op.allsum(float(p.sum()))
    A = op.allsum(float(r @ np.where(X, u + du, 0.0))) / total
    B = f * H * op.allsum(float(r @ np.where(X, q + dq, np.where(ea, 1.0, 0.0)))) / total
    if not (np.isfinite(A) and np.isfinite(B) and B < 0.5):
        return np.inf
    return (A + B) / (1.0 - B) + abs(total - 1.0) + (np.log2(max(op.n, 2)) + 2) * np.finfo(float).eps


def level_hitting_mean(chain, target, pi, levels, *, pi_error: float, regeneration=None,
                       pi_status=Status.SUCCESS, band_states: int = BAND_STATES,
                       error_tol: float = Tolerances.error_tol, check: bool = True) -> HittingResult:
    """Mean hitting times of one state ``target`` from every state (the module's formula).

    Parameters
    ----------
    chain : ctmc.CTMC or ctmc.backends.petsc_backend.DistributedChain
        Irreducible; a distributed chain is solved on its processes (call on every one of them).
    target : int
        The index of the target state :math:`a`.
    pi : array_like
        The stationary law (its entry at ``target`` a normal double): every state's on every process,
        or, on several processes, each one's owned part.
    levels : array_like of int
        The level of every state (or, likewise, the owned part); every transition moves it by one
        (used when the chain has more than ``band_states`` states).
    pi_error : float
        The relative error of ``pi[target]`` (an estimate: e.g. :data:`PI_ERROR_PER_BALANCE` times a
        stationary result's ``balance_error``), used where the band is not the whole chain (on the whole
        chain it is proven from the law's residual: the module's "The law's part").
    regeneration : int, optional
        The state :math:`z`; default the most probable state other than the target.
    pi_status : ctmc.Status
        The stationary solve's status (the result's status is no better).
    band_states : int
        The states of the band solved (:data:`BAND_STATES`).
    error_tol : float
        The result is ``inaccurate`` when its error estimate exceeds this.
    check : bool
        Raise unless the status is a success (as every analysis).

    Returns
    -------
    ctmc.HittingResult
        ``method = "lu-kac"``; ``error_bound`` bounds the relative error of every mean
        (``info["error_bound_kind"] = "estimate"``: the solve's part proven, ``info["solve_bound"]``;
        ``pi[target]``'s ``info["pi_error"]`` and the band's ``info["truncation"]`` estimated; ``"proven"``
        where the band is the whole chain: ``info["pi_error_kind"]``).
        Its vectors are gathered as the chain's ``default_gather`` says (every process, process 0, or
        the owned part: then ``info["rows"]``).

    Examples
    --------
    An M/M/1/K queue: the mean time to fill it, against a direct solve, whole and in a band of levels.

    >>> import numpy as np, ctmc
    >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 60)
    >>> m.event("a", guard=n < 60, rate=1.0, update={n: n + 1})
    >>> m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> c = m.build(initial={"n": 0})
    >>> pi = c.stationary("lu").pi
    >>> ref = c.hitting_times(n == 60, method="gth").mean
    >>> res = level_hitting_mean(c, 60, pi, np.arange(61), pi_error=1e-14)
    >>> res.status.value, bool(np.allclose(res.mean, ref, rtol=1e-11, atol=0))
    ('success', True)
    >>> res = level_hitting_mean(c, 60, pi, np.arange(61), pi_error=1e-14, band_states=40)
    >>> bool(np.allclose(res.mean, ref, rtol=1e-9, atol=0)), res.info["band_floor"]
    (True, 20)
    """
    t0 = time.perf_counter()
    op = operator_for(chain, getattr(chain, "default_backend", "scipy"))
    n = op.n
    a, z, pi, levels = _check(op, target, pi, levels, regeneration, pi_error, band_states)

    def row(v):                                       # (R v)_a, from the process owning a
        Rv = op.rates(v)                              # a collective: on every process
        return op.allsum(float(Rv[a - op.start]) if op.start <= a < op.stop else 0.0)

    lo, size, U, sizes = int(levels.min()), min(BAND_START, band_states), None, []
    while True:                 # bands of BAND_START, 4x, 16x, ... states up to band_states
        L0 = _band_floor(levels, a, size) if n > size else lo - 1
        truncated = L0 >= lo
        if truncated and U is None:
            _check_levels(op, levels)
            U = _level_time(op, pi, levels, int(levels[z]))
        X, D, u, qq, eps_u, eps_q, rep = _band(op, a, z, levels, L0)
        sizes.append(int(round(op.allsum(float(X.sum())))))
        w = np.where(X, 1.0 - qq, np.where(D, 1.0, 0.0))
        num = 1.0 / pi[a] - 1.0 - row(u)
        H = num / row(w)
        c = _escape_estimate(op, qq, levels, X, L0, int(levels[a])) if truncated else 0.0
        trunc = (c + U / H if H > 0 else np.inf) if truncated else 0.0
        if trunc <= TRUNC_TOL or size >= band_states or not truncated:
            break
        size = min(4 * size, band_states)
    ea = np.arange(op.start, op.stop) == a
    status = worst(pi_status, rep.status)
    up = u / max(1.0 - eps_u, 0.5)                    # u <= up (when eps_u < 1/2)
    du, dq = eps_u * up, eps_q * up                   # entrywise error bounds of u and q
    r_du, r_dq, r_w = row(du), row(dq), row(w)

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        mean = np.where(ea, 0.0, np.where(X, u + w * H, H))
        finite = op.allmin(float(np.all(np.isfinite(mean)))) > 0

        def bound_of(pi_part, tr):     # the largest relative error of the means (the module's formula)
            rel_h = (pi_part / pi[a] + r_du) / num + r_dq / r_w + tr
            e = np.where(X, du + dq * H + w * H * (rel_h + tr), H * (rel_h + tr)) / np.where(ea, 1.0, mean)
            if not (finite and num > 0):
                return np.inf
            return op.allmax(float(np.max(np.where(ea, 0.0, e), initial=0.0)))

        solve_bound = bound_of(0.0, 0.0)
        law = np.inf
        if not truncated and num > 0 and r_w > r_dq:      # the whole chain: pi_a's error from its residual
            law = _law_error(op, pi, X, ea, u, qq, du, dq, H, (1.0 + r_du / num) / (1.0 - r_dq / r_w))
        bound = bound_of(law if np.isfinite(law) else pi_error, trunc)
    if not eps_u < 0.5:
        status = worst(status, Status.INACCURATE)
    msg = (f"sparse LU on {sizes[-1]} states{f' (levels > {L0})' if truncated else ''}, residuals "
           f"{eps_u:.1e}, {eps_q:.1e}, and Kac's formula at pi_target = {pi[a]:.6g}")
    status, msg = judge(status, msg, [
        (not finite, Status.INACCURATE, "; the means overflow the double range"),
        (not bound <= error_tol, Status.INACCURATE,
         f"; error estimate {bound:.1e} exceeds error_tol {error_tol:.1e}"
         + (f" (band truncation {trunc:.1e}: raise band_states)" if trunc >= 0.1 * bound else "")),
    ])
    if status is not Status.SUCCESS and pi_status is not Status.SUCCESS:
        msg += f"; the stationary law's status: {pi_status.value}"
    proven = bool(np.isfinite(law))
    info = dict(regeneration_state=z, cycle_mean=float(H), pi_target=float(pi[a]),
                pi_error=float(law if proven else pi_error), pi_error_kind="proven" if proven else "estimate",
                solve_bound=solve_bound, truncation=trunc, band_floor=L0 if truncated else None,
                band_states=sizes[-1], level_time=U, error_bound_kind="proven" if proven else "estimate",
                solve_residuals=(eps_u, eps_q), band_sizes=sizes, **rep.info)
    mode = op.default_gather
    if mode == "none":
        info["rows"] = (op.start, op.stop)
    mean = op.gather(mean, mode)
    res = HittingResult(method="lu-kac", backend=op.backend, status=status, message=msg, iterations=0,
                        residual=max(eps_u, eps_q), wall_time=time.perf_counter() - t0, info=info, mean=mean,
                        moments=mean[None, :], finite=np.ones(mean.size, dtype=bool),
                        target=op.gather(ea, mode).astype(bool), error_bound=bound)
    return res.check(check)
