"""Every backend's primitives (ctmc.backends.base.Operator) against dense numpy/scipy references.

A table of small chains crossed with the backends. Each check compares
whole (gathered) vectors with a dense reference, and records its failures
instead of raising on the first one, so that the same checks can run under
``mpirun -n 2`` (every rank makes the same collective calls even when one
comparison fails): run as a script, this file runs the PETSc part on the
processes it is started on and each rank writes its failures to
``<out>.<rank>.json``; tests/test_petsc_mpi.py starts that job.
"""
import json
import sys

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

import ctmc
from ctmc.backends import operator_for
from ctmc.backends.base import LinearSpec, SolveReport
from ctmc.linalg import gth_solve
from ctmc.results import Status

BACKENDS = ["scipy", "petsc"]


# --------------------------------------------------------------------------
# reference chains (dense off-diagonal rates R)
# --------------------------------------------------------------------------
def _random(n=10, seed=7, density=0.3):
    rng = np.random.default_rng(seed)
    R = rng.random((n, n)) * (rng.random((n, n)) < density)
    R[np.arange(n), (np.arange(n) + 1) % n] += rng.random(n) + 0.1  # a cycle: irreducible
    np.fill_diagonal(R, 0.0)
    return R


def _two_classes():
    """States 0-2 transient, closed classes {3, 4} and {5, 6, 7}."""
    R = np.zeros((8, 8))
    for i, j, r in [(0, 1, 1.0), (0, 3, 0.5), (1, 2, 2.0), (1, 0, 0.3), (2, 5, 1.0), (2, 0, 0.7),
                    (3, 4, 1.0), (4, 3, 2.0), (5, 6, 1.5), (6, 7, 0.4), (7, 5, 3.0), (6, 5, 0.2)]:
        R[i, j] = r
    return R


def _mm1k(K=20, lam=0.7, mu=1.0):
    R = np.diag(np.full(K, lam), 1) + np.diag(np.full(K, mu), -1)
    return R


CASES = {
    "random10": (_random, 0),          # (rates, target state of the linear systems)
    "two_classes": (_two_classes, 3),
    "mm1k20": (_mm1k, 0),
    "two_state": (lambda: np.array([[0.0, 1.0], [2.0, 0.0]]), 0),
}


class Case:
    def __init__(self, name):
        rates, self.target = CASES[name]
        self.name = name
        self.R = rates()
        self.n = self.R.shape[0]
        self.q = self.R.sum(axis=1)
        self.Q = self.R - np.diag(self.q)
        self.chain = ctmc.CTMC(sp.csr_matrix(self.Q))
        rng = np.random.default_rng(len(name))
        self.x = rng.standard_normal(self.n)
        self.X = rng.standard_normal((self.n, 3))


def dense_reach(R, seeds, within=None, forward=False):
    """Seeds plus the states of ``within`` joined to a seed through states of ``within`` (BFS)."""
    allowed = np.ones(len(seeds), bool) if within is None else within
    marked = seeds.copy()
    todo = list(np.flatnonzero(seeds))
    while todo:
        j = todo.pop()
        for i in np.flatnonzero(R[j] > 0 if forward else R[:, j] > 0):
            if allowed[i] and not marked[i]:
                marked[i] = True
                todo.append(i)
    return marked


def closed_classes(R):
    k, lab = connected_components(sp.csr_matrix(R > 0), directed=True, connection="strong")
    out = []
    for c in range(k):
        m = lab == c
        if not (R[np.ix_(m, ~m)] > 0).any():
            out.append(m)
    return out


# --------------------------------------------------------------------------
# the checks: check(op, case, ck) records failures in ck
# --------------------------------------------------------------------------
class Checker:
    def __init__(self):
        self.failures = []

    def true(self, cond, msg):
        if not bool(cond):
            self.failures.append(msg)

    def close(self, got, want, tol, what):
        got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
        if got.shape != want.shape:
            self.failures.append(f"{what}: shape {got.shape} != {want.shape}")
            return
        scale = max(float(np.abs(want).max(initial=0.0)), 1e-300)
        err = float(np.abs(got - want).max(initial=0.0)) / scale
        if not err <= tol:
            self.failures.append(f"{what}: relative error {err:.2e} > {tol:.0e}")


def _own(op, v):
    return v[op.start:op.stop]


def check_attributes(op, case, ck):
    ck.true(op.n == case.n, f"n {op.n} != {case.n}")
    ck.true(0 <= op.start <= op.stop <= op.n, f"rows {op.start}:{op.stop}")
    ck.true(op.allsum(float(op.stop - op.start)) == case.n, "owned blocks do not cover the states")
    ck.true(op.size >= 1 and 0 <= op.rank < op.size, f"rank {op.rank} of {op.size}")
    ck.close(op.exit_rates, _own(op, case.q), 1e-15, "exit_rates")
    ck.close(op.qmax, case.q.max(), 1e-15, "qmax")
    ck.true(op.default_gather in ("all", "root", "none"), f"default_gather {op.default_gather!r}")


def check_rates_apply(op, case, ck):
    for transpose in (False, True):
        A = case.R.T if transpose else case.R
        B = case.Q.T if transpose else case.Q
        for name, v in (("1-D", case.x), ("2-D", case.X)):
            r = op.rates(_own(op, v), transpose)
            a = op.apply(_own(op, v), transpose)
            ck.true(r.shape == _own(op, v).shape, f"rates {name} shape {r.shape}")
            full_r = op.gather(r, "all")
            full_a = op.gather(a, "all")
            ck.close(full_r, A @ v, 1e-14, f"rates {name} transpose={transpose}")
            ck.close(full_a, B @ v, 1e-14, f"apply {name} transpose={transpose}")


def check_local_rows(op, case, ck):
    for transpose in (False, True):
        A = case.R.T if transpose else case.R
        L = op.local_rows(transpose)
        ck.true(sp.issparse(L) and L.shape == (op.stop - op.start, case.n), f"local_rows shape {L.shape}")
        ck.close(L.toarray(), A[op.start:op.stop], 0.0, f"local_rows transpose={transpose}")


def check_generator_rows(op, case, ck):
    """The owned rows of Q (Q^T) with their diagonal, and the rates in each row (the protocol's
    copy-free views of the generator: structure facts, walks and round-off are read from them)."""
    for transpose in (False, True):
        B = case.Q.T if transpose else case.Q
        G = op.generator_rows(transpose)
        ck.true(sp.issparse(G) and G.shape == (op.stop - op.start, case.n), f"generator_rows shape {G.shape}")
        ck.close(G.toarray(), B[op.start:op.stop], 0.0, f"generator_rows transpose={transpose}")
        A = case.R.T if transpose else case.R
        counts = np.asarray(op.offdiagonal_counts(transpose))
        ck.true(np.array_equal(counts, np.count_nonzero(A[op.start:op.stop], axis=1)),
                f"offdiagonal_counts transpose={transpose}: {counts.tolist()}")
    op.release()                         # what it drops is made again on demand
    ck.close(op.gather(op.apply(_own(op, case.x), True), "all"), case.Q.T @ case.x, 1e-14, "apply after release")


def check_gather(op, case, ck):
    own = _own(op, case.x)
    full = op.gather(own, "all")
    ck.close(full, case.x, 0.0, "gather all")
    root = op.gather(own, "root")
    if op.rank == 0:
        ck.close(root, case.x, 0.0, "gather root (rank 0)")
    else:
        ck.true(root.size == 0, f"gather root: rank {op.rank} got {root.size} values")
    ck.close(op.gather(own, "none"), own, 0.0, "gather none")
    ck.close(op.gather(_own(op, case.X), "all"), case.X, 0.0, "gather all, 2-D")
    # pieces of any length are concatenated in process order (the analyses gather small tables)
    table = op.gather(np.array([op.rank, op.start], dtype=float), "all").reshape(-1, 2)
    ck.true(table.shape == (op.size, 2) and np.array_equal(table[:, 0], np.arange(op.size))
            and np.array_equal(table[op.rank], [op.rank, op.start]) and table[0, 1] == 0,
            f"gather of per-process pieces: {table.tolist()}")
    mask = op.gather(_own(op, case.x > 0), "all")
    ck.true(mask.dtype == bool and np.array_equal(mask, case.x > 0), "gather keeps a boolean mask")


def check_gather_rows(op, case, ck):
    members = np.arange(case.n) % 2 == 1
    G = op.gather_rows(_own(op, members))
    ck.true(sp.issparse(G) and G.shape == (int(members.sum()), case.n), f"gather_rows shape {G.shape}")
    ck.close(G.toarray(), case.R[members], 0.0, "gather_rows")
    G0 = op.gather_rows(_own(op, np.zeros(case.n, bool)))
    ck.true(G0.shape == (0, case.n), f"gather_rows of no state: shape {G0.shape}")


def check_collectives(op, case, ck):
    s = op.size
    ck.close(op.allsum(float(op.rank + 1)), s * (s + 1) / 2, 0.0, "allsum scalar")
    ck.close(op.allsum(np.array([1.0, op.rank])), [s, s * (s - 1) / 2], 0.0, "allsum array")
    ck.close(op.allmax(float(op.rank)), s - 1, 0.0, "allmax")
    ck.close(op.allmin(float(op.rank) + 2), 2, 0.0, "allmin")
    ck.close(op.allmax(-np.inf if op.rank else 3.0), 3.0, 0.0, "allmax with -inf")


def check_reach(op, case, ck):
    rng = np.random.default_rng(3)
    n = case.n
    seeds = np.zeros(n, bool)
    seeds[case.target] = True
    within = rng.random(n) < 0.6
    for forward in (False, True):
        for w in (None, within):
            got = op.reach(_own(op, seeds), None if w is None else _own(op, w), forward=forward)
            got = op.gather(got, "all")
            want = dense_reach(case.R, seeds, w, forward)
            ck.true(np.array_equal(got, want), f"reach forward={forward} within={w is not None}: "
                    f"{np.flatnonzero(got)} != {np.flatnonzero(want)}")
    last = np.zeros(n, bool)
    last[-1] = True
    got = op.gather(op.reach(_own(op, last)), "all")
    ck.true(np.array_equal(got, dense_reach(case.R, last)), "reach backward from the last state")


SPECS = [LinearSpec("lu")] + [LinearSpec(kind, preconditioner=pc, rtol=1e-13)
                              for kind in ("gmres", "bicgstab") for pc in ("ilu", "jacobi", "none")]


def passage_members(case):
    seeds = np.zeros(case.n, bool)
    seeds[case.target] = True
    return dense_reach(case.R, seeds) & ~seeds


def check_system(op, case, ck, spec):
    X = passage_members(case)
    if not X.any():
        return
    rng = np.random.default_rng(11)
    for shift in (0.0, 0.7):
        M = shift * np.eye(case.n) - case.Q
        MX = M[np.ix_(X, X)]
        system = op.system(_own(op, X), shift, spec)
        try:
            ck.true(isinstance(system.info, dict), "system.info")
            for transpose in (False, True):
                A = MX.T if transpose else MX
                for k in (None, 2):
                    b = rng.random(case.n) if k is None else rng.random((case.n, k))
                    b_out = b.copy()
                    b_out[~X] = 7.0  # ignored
                    x, rep = system.solve(_own(op, b_out), transpose=transpose)
                    what = f"{spec.kind}/{spec.preconditioner} shift={shift} transpose={transpose} k={k}"
                    ck.true(isinstance(rep, SolveReport) and rep.status is Status.SUCCESS,
                            f"{what}: status {getattr(rep, 'status', rep)} ({getattr(rep, 'reason', '')})")
                    ck.true(x.shape == _own(op, b).shape, f"{what}: shape {x.shape}")
                    full = op.gather(x, "all")
                    want = np.zeros_like(b)
                    want[X] = np.linalg.solve(A, b[X])
                    ck.close(full, want, 1e-9, what)
        finally:
            system.close()


def check_max_iterations(op, case, ck):
    X = passage_members(case)
    if X.sum() < 5:
        return
    for kind in ("gmres", "bicgstab"):
        system = op.system(_own(op, X), 0.0, LinearSpec(kind, preconditioner="none", rtol=1e-14, maxiter=1))
        try:
            b = np.where(X, 1.0 + np.arange(case.n) % 3, 0.0)
            _, rep = system.solve(_own(op, b))
            ck.true(rep.status is Status.MAX_ITERATIONS,
                    f"{kind} maxiter=1: status {rep.status} ({rep.reason})")
        finally:
            system.close()


def check_null_vector(op, case, ck):
    cls = closed_classes(case.R)[-1]
    x, rep = op.null_vector(_own(op, cls), tol=1e-13, maxiter=None, ncv=None)
    ck.true(rep.status is Status.SUCCESS and x is not None, f"null_vector status {rep.status} ({rep.reason})")
    ck.true("eigenvalue" in rep.info and "uniformization_rate" in rep.info, f"null_vector info {rep.info}")
    if x is None:
        return
    full = op.gather(x, "all")
    ck.true(full.sum() != 0, "null_vector: zero sum")  # any scale and sign (base.Operator)
    want = np.zeros(case.n)
    want[cls] = gth_solve(case.Q[np.ix_(cls, cls)])
    ck.close(full / full.sum(), want, 1e-9, "null_vector")


def check_expm_action(op, case, ck):
    p = np.linspace(1.0, 2.0, case.n)
    p /= p.sum()
    for dt in (0.8, 0.0):
        got, rep = op.expm_action(_own(op, p), dt, tol=1e-13)
        ck.true(rep.status is Status.SUCCESS, f"expm_action dt={dt}: status {rep.status} ({rep.reason})")
        ck.close(op.gather(got, "all"), p @ sla.expm(case.Q * dt), 1e-10, f"expm_action dt={dt}")


CHECKS = {
    "attributes": check_attributes, "rates_apply": check_rates_apply, "local_rows": check_local_rows,
    "generator_rows": check_generator_rows,
    "gather": check_gather, "gather_rows": check_gather_rows, "collectives": check_collectives,
    "reach": check_reach, "max_iterations": check_max_iterations, "null_vector": check_null_vector,
    "expm_action": check_expm_action,
}
for _spec in SPECS:
    CHECKS[f"system_{_spec.kind}_{_spec.preconditioner}"] = (
        lambda op, case, ck, spec=_spec: check_system(op, case, ck, spec))
_NEEDS_SLEPC = ("null_vector", "expm_action")


def run_all(backend, slepc=True):
    """Run every check on every case; ``{case/check: [failures]}`` (the MPI job's entry point)."""
    out = {}
    for name in CASES:
        case = Case(name)
        op = operator_for(case.chain, backend)
        for cname, fn in CHECKS.items():
            if cname in _NEEDS_SLEPC and not slepc:
                continue
            ck = Checker()
            fn(op, case, ck)
            out[f"{name}/{cname}"] = ck.failures
    return out


if __name__ == "__main__":
    from ctmc.backends.petsc import load_petsc, slepc_available
    rank = load_petsc().COMM_WORLD.getRank()
    res = run_all("petsc", slepc_available())
    with open(f"{sys.argv[1]}.{rank}.json", "w") as fh:
        json.dump({"rank": rank, "size": load_petsc().COMM_WORLD.getSize(), "results": res}, fh)
    sys.exit(0)


# --------------------------------------------------------------------------
# pytest
# --------------------------------------------------------------------------
def _operator(backend, case):
    if backend == "petsc":
        from ctmc.backends.petsc import INSTALL_HELP, available
        if not available():
            pytest.skip(f"petsc4py not installed: {INSTALL_HELP}")
    else:
        from ctmc.backends import scipy_backend
        if not hasattr(scipy_backend, "operator"):
            pytest.skip("scipy operator not written yet")
    return operator_for(case.chain, backend)


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    return Case(request.param)


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_primitive(backend, case, check):
    op = _operator(backend, case)
    if check in _NEEDS_SLEPC and backend == "petsc":
        from ctmc.backends.petsc import slepc_available
        if not slepc_available():
            pytest.skip("slepc4py not installed")
    ck = Checker()
    CHECKS[check](op, case, ck)
    assert not ck.failures, "\n".join(ck.failures)


@pytest.mark.parametrize("backend", BACKENDS)
def test_operator_is_cached_per_chain_and_generator(backend):
    case = Case("two_state")
    op = _operator(backend, case)
    assert operator_for(case.chain, backend) is op and op.backend == backend
    case.chain.Q = case.chain.Q.copy()  # a new generator object: a new operator
    assert operator_for(case.chain, backend) is not op


def test_petsc_operator_is_not_stored_on_the_chain():
    case = Case("two_state")
    _operator("petsc", case)
    assert not any("petsc" in k for k in vars(case.chain))
    from ctmc.backends.petsc import DistributedChain
    dc = DistributedChain.from_chain(case.chain)
    assert operator_for(dc, "petsc") is dc and dc.default_gather == "all"


@pytest.mark.parametrize("opts,match", [({"gather": "some"}, "gather"),
                                        ({"petsc_options": "ksp_type gmres"}, "petsc_options"),
                                        ({"petsc_options": {"ksp_type": [1]}}, "petsc_options"),
                                        ({"bogus": 1}, "bogus")])
def test_petsc_backend_options_are_checked(opts, match):
    from ctmc.backends import check_backend_options
    with pytest.raises(ValueError, match=match):
        check_backend_options("petsc", opts)
    assert check_backend_options("petsc", {"gather": "root", "petsc_options": {"ksp_monitor": None}})


def test_petsc_factorisation_without_memory_raises_memory_error():
    case = Case("mm1k20")
    op = _operator("petsc", case)
    # ICNTL(23) = 1 MB per process with 1e6 % workspace growth: MUMPS cannot allocate
    tiny = {"petsc_options": {"mat_mumps_icntl_23": 1, "mat_mumps_icntl_14": 1000000}}
    with pytest.raises(MemoryError, match="INFOG"):
        op.system(_own(op, passage_members(case)), 0.0, LinearSpec("lu"), tiny)
