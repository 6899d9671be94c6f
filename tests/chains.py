"""Chains shared by several test files (not collected: the name does not start with ``test_``).

``tests/conftest.py`` puts ``tests/`` on ``sys.path``, and the MPI worker of
``test_petsc_mpi.py`` does the same, so test files import these as ``from
chains import jsq``; test files never import one another.
"""
import ctmc
from ctmc.models.jsq import JSQ2, saturation_mean


def jsq(K, rho=0.9, mu1=0.5, nu=0.5):
    """Two-queue JSQ in (shortest, longest) coordinates: the model of :mod:`ctmc.models.jsq`."""
    m = JSQ2(K, rho, 1 - mu1, nu).model()
    s, l = m.variables
    return m, s, l


def saturation_mean_closed_form(K, rho, mu1, nu, x, y):
    """E_(x,y)[time to (K,K)] (closed form; checked against exact rationals in test_jsq.py)."""
    return float(saturation_mean(K, rho, 1 - mu1, nu, states=[(x, y)])[0])


def trap_chain():
    # state 3 jumps to 9 from where 0 is never reached: infinite means, LST 0
    m = ctmc.Model("trap")
    x = m.var("x", 0, 10)
    m.event("up", guard=(x < 10) & (x != 3), rate=1.0, update={x: x + 1})
    m.event("down", guard=(x > 0) & (x < 8), rate=2.0, update={x: x - 1})
    m.event("trap", guard=x == 3, rate=0.5, update={x: 9})
    return m.build(initial={"x": 0}), x


def ncd_chain(K=5, coupling=1e-9):
    """Two M/M/1/K queues (rates 0.5, 1) whose idle server switches between them at rates
    ``coupling`` and ``3 coupling``: nearly completely decomposable, P(block 1) = 1/4."""
    m = ctmc.Model("ncd")
    b, n = m.var("b", 0, 1), m.var("n", 0, K)
    m.event("arrive", guard=n < K, rate=0.5, update={n: n + 1})
    m.event("serve", guard=n > 0, rate=1.0, update={n: n - 1})
    m.event("on", guard=(n == 0) & (b == 0), rate=coupling, update={b: 1})
    m.event("off", guard=(n == 0) & (b == 1), rate=3 * coupling, update={b: 0})
    return m.build(initial={"b": 0, "n": 0})


def drifting_torus(n, drift=0.8, seed=0):
    """A random walk on an ``n x n`` torus, drifting along ``a`` (rates ``1 + drift`` and ``1 - drift``)
    and at random rates in [0.5, 1.5] along ``b``, labelled ``a``, ``b`` and ``c = (a + b) mod 3``: three
    dimensions, so ``auto`` tries its Krylov probes; at ``n = 80`` PETSc's BiCGStab and GMRES(50) with
    its SOR sweep do not converge in 150 iterations."""
    import numpy as np
    import scipy.sparse as sp
    k = np.arange(n * n)
    a, b = k % n, k // n
    cols = np.concatenate([(a + 1) % n + n * b, (a - 1) % n + n * b,
                           a + n * ((b + 1) % n), a + n * ((b - 1) % n)])
    rng = np.random.default_rng(seed)
    rates = np.concatenate([np.full(n * n, 1 + drift), np.full(n * n, 1 - drift),
                            rng.uniform(0.5, 1.5, 2 * n * n)])
    R = sp.csr_matrix((rates, (np.tile(k, 4), cols)), shape=(n * n, n * n))
    return ctmc.CTMC.from_rates(R, {"a": a, "b": b, "c": (a + b) % 3})
