"""Independent references for the hysteresis tests, shared by test modules (not collected).

The M/M/1/r and classic M/G/1/r laws (the latter also checks ctmc.ph in
tests/test_ph.py), Poisson mixing by quadrature, a hand-built generator of the
M|M|1 hysteretic queue, and dense, exact-rational and GTH solves written
independently of ctmc (see the docstring of tests/test_hysteresis.py for the
sources).
"""
from fractions import Fraction

import numpy as np
import scipy.stats as st
from scipy.integrate import quad

from reference import fraction_solve


def full_width(q, route):
    """The law on every level 0..capacity: the stored levels (route ctmc: up to the highest
    reachable one), zeros above; the references compute every level, so unreachable ones are
    checked too."""
    law = q.stationary(route)
    assert law.p.shape[0] == 3 and law.p.shape[1] <= q.capacity + 1
    return law.levels(q.capacity + 1)

def mm1r(lam, mu, r):
    rho = lam / mu
    p = rho ** np.arange(r + 1)
    return p / p.sum()


def mg1r_classic(lam, r, a, mean_s):
    """Classic M/G/1/r: embedded chain at departures on 0..r-1 plus the Niu-Cooper relation."""
    P = np.zeros((r, r))
    for i in range(r):
        base = max(i - 1, 0)
        for jj in range(r - 1):
            k = jj - base
            if k >= 0:
                P[i, jj] = a[k] if k < a.size else 0.0
        P[i, r - 1] = 1 - P[i, : r - 1].sum()
    # stationary law of the DTMC by a dense solve
    M = np.vstack([(P.T - np.eye(r))[:-1], np.ones(r)])
    b = np.zeros(r)
    b[-1] = 1
    pid = np.linalg.solve(M, b)
    rho = lam * mean_s
    p = np.empty(r + 1)
    p[:r] = pid / (pid[0] + rho)
    p[r] = 1 - 1 / (pid[0] + rho)
    return p


def poisson_mixing_quad(lam, dist, kmax):
    """a_k = int pmf_k(lam t) g(t) dt over the support, by scipy.integrate.quad per k (test-only route)."""
    lo, hi = dist.support()
    return np.array([quad(lambda t: st.poisson.pmf(k, lam * t) * dist.pdf(t), lo, hi, limit=200,
                          epsabs=1e-14)[0] for k in range(kmax)])


def hand_built_mm1(L, H, R, l0, l1, mu, dtype=float):
    """Dense generator of the M|M|1 hysteretic queue (instant policy), written state by state.

    ``dtype=object`` with :class:`fractions.Fraction` rates gives an exact generator.
    """
    states = [(0, n) for n in range(H)] + [(1, n) for n in range(L + 1, R)] + \
             [(2, n) for n in range(H + 1, R + 1)]
    idx = {x: i for i, x in enumerate(states)}
    Q = np.zeros((len(states), len(states)), dtype=dtype)
    if dtype is object:
        Q[:] = Fraction(0)

    def add(x, y, rate):
        Q[idx[x], idx[y]] += rate

    for n in range(H):
        add((0, n), (0, n + 1) if n + 1 < H else (1, H), l0)
        if n >= 1:
            add((0, n), (0, n - 1), mu)
    for n in range(L + 1, R):
        add((1, n), (1, n + 1) if n + 1 < R else (2, R), l1)
        add((1, n), (1, n - 1) if n - 1 > L else (0, L), mu)
    for n in range(H + 1, R + 1):
        add((2, n), (2, n - 1) if n - 1 > H else (1, H), mu)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return states, idx, Q


def dense_stationary(Q):
    n = Q.shape[0]
    M = np.vstack([Q.T[:-1], np.ones(n)])
    b = np.zeros(n)
    b[-1] = 1
    return np.linalg.solve(M, b)


def exact_stationary(Q):
    """Stationary law of a generator with Fraction entries (Gaussian elimination in rationals)."""
    n = Q.shape[0]
    A = [list(Q[:, i]) for i in range(n - 1)] + [[Fraction(1)] * n]
    return fraction_solve(A, [Fraction(0)] * (n - 1) + [Fraction(1)])


def gth_stationary(P):
    """Stationary law of a stochastic matrix by GTH elimination (no subtractions: relative accuracy)."""
    A = np.array(P, dtype=float)
    n = A.shape[0]
    for k in range(n - 1, 0, -1):
        out = A[k, :k].sum()
        A[:k, :k] += np.outer(A[:k, k], A[k, :k]) / out
        A[:k, k] /= out
    x = np.ones(n)
    for k in range(1, n):
        x[k] = x[:k] @ A[:k, k]
    return x / x.sum()


def dense_hitting(Q, target):
    out = ~target
    m = np.zeros(Q.shape[0])
    m[out] = np.linalg.solve(-Q[np.ix_(out, out)], np.ones(out.sum()))
    return m


# ---------------------------------------------------------------------------
# the PETSc job: ``mpirun -n 2 python tests/hysteresis_cases.py OUT.json``
# ---------------------------------------------------------------------------
def petsc_queue(backend):
    """The queue of the MPI test: Erlang-4 service, batches {1, 2, 4}, about 1900 states (beyond
    the dense methods), light load: the probabilities near the capacity fall to about 1e-60."""
    from ctmc.models.hysteresis import HysteresisQueue, erlang
    return HysteresisQueue(20, 100, 250, lam=0.45, lam_overload=0.3,
                           batch={1: 0.5, 2: 0.3, 4: 0.2}, service=erlang(4, 1.0), backend=backend)


def petsc_job(out_path):
    """On every rank: the law and the measures from the PETSc backend; rank 0 writes them."""
    import json
    from pathlib import Path
    from ctmc.backends.petsc_backend import load_petsc
    comm = load_petsc().COMM_WORLD
    q = petsc_queue("petsc")
    res = q.stationary_ctmc()
    out = {"size": comm.getSize(), "status": res.status.value, "method": res.method, "backend": res.backend,
           "pi": res.pi.tolist(), "summary": {k: v for k, v in q.summary().items()
                                              if isinstance(v, float)}}
    if comm.getRank() == 0:
        Path(out_path).write_text(json.dumps(out))


if __name__ == "__main__":
    import sys
    petsc_job(sys.argv[1])
