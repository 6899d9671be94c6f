"""Reference problems with exact answers, crossed with every method of each analysis and every backend.

Every analysis is written once (ctmc.stationary, ctmc.passage, ctmc.transient)
on the backend primitives, so each method must give the exact answer, with the
same status, on scipy and on PETSc. Each check: the status, the invariants
(non-negative, sums to one, the residual recomputed here) and the exact answer
to a tolerance fitting the method (direct: 1e-9 relative; iterative: the
normwise tolerance). The last tests are the three behaviours that used to differ
between the backends (mass lost by expm, negative stationary entries, passage
probabilities above one).
"""
import math
import warnings
from fractions import Fraction

import numpy as np
import pytest
import reference as ref
import scipy.linalg

import ctmc
import ctmc.passage
import ctmc.stationary
import ctmc.transient
from ctmc.backends.base import SolveReport
from ctmc.results import Status

DIRECT = ("auto", "gth", "lu")
#: cases whose stationary tails (1e-8 .. 1e-301 of the max) are below an iterative method's reach
TAIL_HEAVY = ("mm1k_K50", "mm1k_K1000", "bd_1e-200")
CASES = {c.name: c for c in ref.CASES}
#: the level of each state for level_iad (every transition moves it by one); None: not applicable
LEVELS = {"two_state": np.array([0, 1]), "mm1k_K50": "n", "mm1k_K1000": "n", "bd_1e-200": "n",
          "mmck_c3_K40": "n", "erlang_loss_c8": "n", "random_30": None, "random_120_sparse": None}



def relative_error(a, b, floor=1e-250):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    big = np.abs(b) > floor
    return float(np.max(np.abs(a[big] - b[big]) / np.abs(b[big]))) if big.any() else 0.0


def normwise_error(a, b):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.abs(a - b).max() / np.abs(b).max())


def needs_slepc(backend, method):
    if backend == "petsc" and method in ("eig", "expm"):
        from ctmc.backends.petsc import INSTALL_HELP, slepc_available
        if not slepc_available():
            pytest.skip(f"slepc4py not installed: {INSTALL_HELP}")


def quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ctmc.TailAccuracyWarning)
        return fn(*args, check=False, **kw)


# --------------------------------------------------------------------------
# small closed forms
# --------------------------------------------------------------------------
def gamblers_ruin(N, p, q):
    """Birth-death chain on 0..N, 0 and N absorbing; P_i(reach N before 0) exactly."""
    m = ctmc.Model("ruin")
    n = m.var("n", 0, N)
    m.event("up", guard=(n > 0) & (n < N), rate=p, update={n: n + 1})
    m.event("down", guard=(n > 0) & (n < N), rate=q, update={n: n - 1})
    r = Fraction(q) / Fraction(p)
    win = np.array([float((1 - r ** i) / (1 - r ** N)) for i in range(N + 1)])
    return m.build(initial={"n": 1}), n, win


def erlang_chain(k, mu):
    """Pure birth 0 -> 1 -> ... -> k at rate mu: the time to reach k from i is Erlang(k - i, mu)."""
    m = ctmc.Model("erlang")
    n = m.var("n", 0, k)
    m.event("up", guard=n < k, rate=mu, update={n: n + 1})
    return m.build(initial={"n": 0}), n


def mm1k_mean_to_zero(K, lam, mu):
    """Exact E_i[T_0] of M/M/1/K: f_k = E_k[T_{k-1}] = 1/mu + (lam/mu) f_{k+1}, f_K = 1/mu."""
    lam, mu = Fraction(lam), Fraction(mu)
    f = [Fraction(0)] * (K + 2)
    for k in range(K, 0, -1):
        f[k] = 1 / mu + (lam / mu * f[k + 1] if k < K else 0)
    return np.array([float(sum(f[1:i + 1])) for i in range(K + 1)])


# --------------------------------------------------------------------------
# stationary: every reference chain x every method x every backend
# --------------------------------------------------------------------------
STATIONARY_METHODS = sorted(ctmc.stationary.METHODS)


@pytest.mark.parametrize("method", STATIONARY_METHODS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_stationary_exact(backend, name, method):
    needs_slepc(backend, method)
    kw = {}
    if method == "level_iad":
        if LEVELS[name] is None:
            pytest.skip("level_iad: the random chains have no level moved by +-1")
        kw["levels"] = LEVELS[name]
    case = CASES[name]
    chain, exact = case.build(), case.exact_pi()
    if method == "given":
        kw["x0"] = exact                  # the law from outside: graded and bounded like the others
    res = quiet(chain.stationary, method, backend=backend, **kw)
    assert res.backend == backend
    iterative = method not in DIRECT
    allowed = (Status.SUCCESS, Status.TAIL_INACCURATE) if iterative and name in TAIL_HEAVY else (Status.SUCCESS,)
    if res.status is Status.TAIL_INACCURATE and name not in TAIL_HEAVY:
        assert res.balance_error > 1e-6   # a flag is only raised on evidence
    assert res.status in allowed, res.message
    # invariants, the residual recomputed here from the dense generator
    pi = res.pi
    # clipped negatives still count in the normalisation (core bug, test_clipped_negatives_leave_a_law)
    assert pi.min() >= 0 and pi.sum() == pytest.approx(1.0, abs=1e-9 if res.info.get("negative_states") else 1e-12)
    Q = chain.Q.toarray()
    assert res.residual == pytest.approx(np.abs(pi @ Q).sum(), rel=1e-6, abs=1e-15)
    assert res.residual / np.abs(Q.diagonal()).max() <= 1e-10
    if iterative:
        # normwise: the residual tol 1e-10 times a condition margin of 1e3 (slow-mixing M/M/c/K)
        assert np.abs(pi - exact).sum() < 1e-7
        if res.status is Status.SUCCESS and name not in TAIL_HEAVY:
            assert relative_error(pi, exact) < 1e-4   # a success holds component-wise (balance check)
    else:
        assert relative_error(pi, exact) < 1e-9


# --------------------------------------------------------------------------
# passage: hitting times, transforms, absorption laws x methods x backends
# --------------------------------------------------------------------------
PASSAGE_METHODS = sorted(ctmc.passage.METHODS)


def passage_tol(method):
    """(relative error for direct methods, normwise error for Krylov ones)."""
    return (relative_error, 1e-9) if method in DIRECT else (normwise_error, 1e-8)


def check_passage(res, method):
    assert res.status is Status.SUCCESS, res.message
    assert res.residual <= 1e-10
    if method in DIRECT:
        # sparse LU means go through a regeneration state (one factorisation, exact for any target)
        assert res.method in ("gth", "lu", "lu-regenerative")
    else:
        assert res.method == method


@pytest.mark.parametrize("method", PASSAGE_METHODS)
def test_hitting_means_birth_death(backend, method):
    K, lam, mu = 30, 0.7, 1.0
    chain = ref.mm1k(K, lam, mu)
    n = chain.states["n"]
    err, tol = passage_tol(method)
    up = chain.hitting_times(n == K, method=method, backend=backend, check=False)
    check_passage(up, method)
    exact_up = np.array([float(ref.hitting_mean_bd(K, lam, mu, i)) for i in range(K + 1)])
    assert up.mean.min() >= 0 and up.mean[K] == 0 and err(up.mean, exact_up) < tol
    down = chain.hitting_times(n == 0, method=method, backend=backend, check=False)
    check_passage(down, method)
    assert err(down.mean, mm1k_mean_to_zero(K, lam, mu)) < tol


@pytest.mark.parametrize("method", PASSAGE_METHODS)
def test_hitting_moments_and_laplace_erlang(backend, method):
    k, mu = 4, 1.5
    chain, n = erlang_chain(k, mu)
    err, tol = passage_tol(method)
    h = chain.hitting_times(n == k, moments=2, method=method, backend=backend, check=False)
    check_passage(h, method)
    left = k - np.arange(k + 1)   # Erlang(k - i, mu) from state i
    assert err(h.moments[0], left / mu) < tol
    assert err(h.moments[1], left * (left + 1) / mu ** 2) < tol
    s = np.array([0.0, 0.5, 3.0])
    lap = chain.hitting_laplace(n == k, s, method=method, backend=backend, check=False)
    check_passage(lap, method)
    exact = (mu / (mu + s[:, None])) ** left[None, :]
    assert lap.values.min() >= 0 and lap.values.max() <= 1 + 1e-12 and np.allclose(lap.values[0], 1.0, atol=1e-12)
    assert err(lap.values, exact) < tol


@pytest.mark.parametrize("method", PASSAGE_METHODS)
def test_gamblers_ruin(backend, method):
    N = 12
    chain, n, win = gamblers_ruin(N, 0.6, 0.4)
    err, tol = passage_tol(method)
    fp = chain.first_passage((n == 0) | (n == N), t=[2.0], method=method, backend=backend, check=False)
    check_passage(fp, method)
    P = fp.probabilities
    assert np.array_equal(fp.targets, [0, N]) and P.min() >= 0
    assert np.allclose(P.sum(axis=1), 1.0, atol=1e-12)   # absorbed almost surely
    assert err(P[:, 1], win) < tol and err(P[:, 0], 1 - win) < tol
    assert fp.cdf.min() >= 0 and (fp.cdf[0] <= P + 1e-12).all()
    # reaching N at all: 0 is absorbing, so the same probabilities
    lap = chain.hitting_laplace(n == N, 0.0, method=method, backend=backend, check=False)
    check_passage(lap, method)
    assert err(lap.values, win) < tol


@pytest.mark.parametrize("method", PASSAGE_METHODS)
def test_first_passage_erlang_cdf(backend, method):
    k, mu = 3, 2.0
    chain, n = erlang_chain(k, mu)
    t = np.array([0.1, 1.0, 4.0])
    fp = chain.first_passage(n == k, s=[0.7], t=t, sources=[0], method=method, backend=backend, check=False)
    check_passage(fp, method)
    err, tol = passage_tol(method)
    cdf = 1 - np.exp(-mu * t) * sum((mu * t) ** j / math.factorial(j) for j in range(k))
    assert np.abs(fp.cdf[:, 0, 0] - cdf).max() < 1e-12 and fp.error_bound <= 1e-12
    assert err(fp.laplace[0], [[(mu / (mu + 0.7)) ** k]]) < tol
    assert fp.probabilities[0, 0] == pytest.approx(1.0, abs=1e-12)


# --------------------------------------------------------------------------
# transient: closed forms and a dense matrix exponential
# --------------------------------------------------------------------------
TRANSIENT_METHODS = sorted(ctmc.transient.METHODS)


@pytest.mark.parametrize("method", TRANSIENT_METHODS)
def test_transient_exact(backend, method):
    needs_slepc(backend, method)
    a, b = 2.0, 3.0
    t = np.array([0.0, 0.1, 1.0, 4.0])
    res = ref.two_state(a, b).transient(np.array([1.0, 0.0]), t, method=method, backend=backend, check=False)
    assert res.status is Status.SUCCESS, res.message
    exact = b / (a + b) + a / (a + b) * np.exp(-(a + b) * t)
    assert res.p.min() >= 0 and np.allclose(res.p.sum(axis=1), 1.0, atol=1e-10) and res.residual <= 1e-10
    assert np.allclose(res.p[:, 0], exact, rtol=1e-10, atol=1e-14)
    chain = ref.mm1k(10, 0.8, 1.0)
    p0 = np.zeros(11)
    p0[3] = 1.0
    res = chain.transient(p0, [0.5, 2.0], method=method, backend=backend, check=False)
    assert res.status is Status.SUCCESS, res.message
    Q = chain.Q.toarray()
    exact = np.array([p0 @ scipy.linalg.expm(Q * tt) for tt in (0.5, 2.0)])
    assert res.p.min() >= 0 and np.allclose(res.p.sum(axis=1), 1.0, atol=1e-10)
    assert np.abs(res.p - exact).max() < 1e-10


# --------------------------------------------------------------------------
# the same call on both backends: the same answer and the same status
# --------------------------------------------------------------------------
def _both(call):
    from ctmc.backends import petsc
    if not petsc.available():
        pytest.skip(f"petsc4py not installed: {petsc.INSTALL_HELP}")
    return call("scipy"), call("petsc")


def _same(a, b, field):
    assert a.status is b.status, (a.message, b.message)
    assert a.method == b.method
    x, y = np.asarray(getattr(a, field), dtype=float), np.asarray(getattr(b, field), dtype=float)
    fin = np.isfinite(x)
    assert np.array_equal(fin, np.isfinite(y))
    assert np.abs(x[fin] - y[fin]).max() <= 1e-8 * max(1.0, np.abs(x[fin]).max())


@pytest.mark.parametrize("method", STATIONARY_METHODS)
def test_same_stationary_on_both_backends(method):
    needs_slepc("petsc", method)
    kw = {"levels": "n"} if method == "level_iad" else {}
    chain = ref.mmck(40, 3, 2.5, 1.0)
    if method == "given":
        kw["x0"] = chain.stationary("gth").pi
    a, b = _both(lambda be: quiet(chain.stationary, method, backend=be, **kw))
    _same(a, b, "pi")


@pytest.mark.parametrize("method", PASSAGE_METHODS)
def test_same_passage_on_both_backends(method):
    chain = ref.mmck(40, 3, 2.5, 1.0)
    n = chain.states["n"]
    a, b = _both(lambda be: quiet(chain.hitting_times, n == 40, moments=2, method=method, backend=be))
    _same(a, b, "moments")
    a, b = _both(lambda be: quiet(chain.hitting_laplace, n == 0, [0.0, 0.4], method=method, backend=be))
    _same(a, b, "values")
    a, b = _both(lambda be: quiet(chain.first_passage, (n == 0) | (n == 40), s=[0.4], t=[1.0], method=method,
                                  sources=n <= 5, backend=be))
    for field in ("probabilities", "laplace", "cdf"):
        _same(a, b, field)


@pytest.mark.parametrize("method", TRANSIENT_METHODS)
def test_same_transient_on_both_backends(method):
    needs_slepc("petsc", method)
    chain = ref.mmck(40, 3, 2.5, 1.0)
    a, b = _both(lambda be: quiet(chain.transient, {"n": 0}, [0.5, 3.0], method=method, backend=be))
    _same(a, b, "p")


# --------------------------------------------------------------------------
# the three behaviours that used to differ between the backends
# --------------------------------------------------------------------------
def operator_class(backend):
    if backend == "scipy":
        from ctmc.backends.scipy_backend import ScipyOperator
        return ScipyOperator
    from ctmc.backends.petsc.distributed import DistributedChain
    return DistributedChain


def test_expm_losing_mass_is_not_success(backend, monkeypatch):
    # (a) a Krylov exponential that loses half the mass must not pass for a transient law
    monkeypatch.setattr(operator_class(backend), "expm_action",
                        lambda self, p, dt, *, tol, backend_options=None: (0.5 * p, SolveReport()))
    res = ref.mm1k(10, 0.8, 1.0).transient({"n": 0}, [0.5, 2.0], method="expm", backend=backend, check=False)
    assert res.status is Status.INACCURATE, res.message
    assert res.residual > 0.4 and res.error_bound > 0.4
    with pytest.raises(ctmc.SolverError):
        ref.mm1k(10, 0.8, 1.0).transient({"n": 0}, [0.5], method="expm", backend=backend)


@pytest.mark.parametrize("share,status", [(1e-10, Status.TAIL_INACCURATE), (1e-6, Status.INACCURATE)])
def test_negative_stationary_entries_graded_alike(backend, monkeypatch, share, status):
    # (b) the raw eigenvector has negatives in the tail (exact value about 1e-18 and below):
    # of round-off size they are set to 0 and flagged; beyond 1e-8 of the max the answer fails
    case = CASES["mm1k_K1000"]
    exact = case.exact_pi()
    raw = exact / exact.max()
    raw[60:63] = -share

    def null_vector(self, support, *, tol, maxiter, ncv, backend_options=None):
        return raw[self.start:self.stop].copy(), SolveReport(Status.SUCCESS, "patched", 1, {"eigenvalue": 1.0})
    monkeypatch.setattr(operator_class(backend), "null_vector", null_vector)
    # polish=0: the grading rule alone (sweeps would repair this tail; see test_stationary.py)
    res = quiet(case.build().stationary, "eig", backend=backend, polish=0)
    assert res.status is status, res.message
    assert res.info["negative_states"] == 3 and res.pi.min() >= 0
    if status is Status.TAIL_INACCURATE:
        assert "round-off" in res.message and (res.pi[60:63] == 0).all()
        assert relative_error(res.pi[:60], exact[:60]) < 1e-9
    else:
        assert "negative probabilities" in res.message


def test_clipped_negatives_leave_a_law(backend, monkeypatch):
    # round-off negatives set to 0: what is left is the exact law, summing to one
    case = CASES["mm1k_K1000"]
    exact = case.exact_pi()
    raw = exact / exact.max()
    raw[60:63] = -1e-10

    def null_vector(self, support, *, tol, maxiter, ncv, backend_options=None):
        return raw[self.start:self.stop].copy(), SolveReport(Status.SUCCESS, "patched", 1, {"eigenvalue": 1.0})
    monkeypatch.setattr(operator_class(backend), "null_vector", null_vector)
    res = quiet(case.build().stationary, "eig", backend=backend)
    assert res.pi.sum() == pytest.approx(1.0, abs=1e-12)
    assert relative_error(res.pi[:60], exact[:60]) < 1e-12


def _inflating_solves(monkeypatch, backend, factor=1.5):
    """Every system solve of the backend returns ``factor`` times the answer, claiming success."""
    cls = operator_class(backend)
    real = cls.system

    def system(self, *args, **kw):
        sysm = real(self, *args, **kw)
        solve = sysm.solve

        def inflated(b, transpose=False):
            x, rep = solve(b, transpose)
            return factor * x, rep
        sysm.solve = inflated
        return sysm
    monkeypatch.setattr(cls, "system", system)
    # the condition estimate would catch it first: make it useless, the invariant must act alone
    monkeypatch.setattr(ctmc.passage.PassageSetup, "condition", lambda self, s, on: (1.0, Status.SUCCESS, ""))


def test_passage_probabilities_above_one_are_inaccurate(backend, monkeypatch):
    # (c) transform values and absorption probabilities above 1 violate their invariant
    chain, n, win = gamblers_ruin(12, 0.6, 0.4)
    _inflating_solves(monkeypatch, backend)
    lap = chain.hitting_laplace(n == 12, [0.0, 0.5], method="lu", backend=backend, check=False)
    assert lap.values.max() > 1 and lap.status is Status.INACCURATE and "invariant" in lap.message, lap.message
    fp = chain.first_passage((n == 0) | (n == 12), method="lu", backend=backend, check=False)
    assert fp.probabilities.sum(axis=1).max() > 1.2
    assert fp.status is Status.INACCURATE and "invariant" in fp.message, fp.message
    with pytest.raises(ctmc.SolverError):
        chain.hitting_laplace(n == 12, 0.0, method="lu", backend=backend)
