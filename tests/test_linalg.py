"""ctmc.linalg.gth_solve: the envelope-restricted elimination against closed forms and reorderings."""
from fractions import Fraction

import numpy as np
import pytest

from ctmc.linalg import gth_solve
from reference import fraction_solve


def test_gth_solve_on_banded_and_sparse_chains_is_exact_in_relative_terms():
    # gth_solve updates only the envelope of each step: a birth-death chain against its closed form
    # (probabilities down to 1e-190), and a sparse irregular chain against the same chain reordered
    k = 200
    up, down = 1.0, 9.0
    A = np.diag(np.full(k, up), 1) + np.diag(np.full(k, down), -1)
    np.fill_diagonal(A, -A.sum(axis=1))
    w = [Fraction(1, 9) ** j for j in range(k + 1)]
    exact = np.array([float(x / sum(w)) for x in w])
    np.testing.assert_allclose(gth_solve(A), exact, rtol=1e-12)
    rng = np.random.default_rng(7)
    n = 120
    R = rng.random((n, n)) * (rng.random((n, n)) < 0.04) * 10.0 ** rng.integers(-40, 40, (n, n))
    R += np.diag(np.ones(n - 1), 1) + np.diag(np.ones(1), -(n - 1))        # a cycle: irreducible
    np.fill_diagonal(R, 0.0)
    Q = R - np.diag(R.sum(axis=1))
    perm = rng.permutation(n)
    x, y = gth_solve(Q), gth_solve(Q[np.ix_(perm, perm)])
    np.testing.assert_allclose(y, x[perm], rtol=1e-11)


def _generator(R):
    R = np.array(R, dtype=float)
    np.fill_diagonal(R, 0.0)
    return R - np.diag(R.sum(axis=1))


def _chains(rng, n):
    """Irreducible generators of n states: banded, sparse random, dense random, nearly decomposable."""
    ring = np.diag(np.ones(n - 1), 1) + np.diag(np.ones(1), -(n - 1)) if n > 1 else np.zeros((1, 1))
    b = int(rng.integers(1, 6))
    band = np.triu(np.tril(rng.random((n, n)), b), -b) * 10.0 ** rng.integers(-30, 30, (n, n))
    sparse = rng.random((n, n)) * (rng.random((n, n)) < 3.0 / n) * 10.0 ** rng.integers(-40, 40, (n, n))
    dense = rng.random((n, n)) * 10.0 ** rng.integers(-3, 3, (n, n))
    blocks = np.kron(np.eye(4), np.ones((n // 4 + 1, n // 4 + 1)))[:n, :n] * rng.random((n, n))
    nearly = blocks + 1e-13 * rng.random((n, n)) * (rng.random((n, n)) < 0.05)
    return [_generator(band + ring), _generator(sparse + ring), _generator(dense + ring),
            _generator(nearly + ring)]


def _both_routes(Q):
    from ctmc._relax import use_compiled
    before = use_compiled(False)
    try:
        slow = gth_solve(Q)
    finally:
        use_compiled(before)
    return gth_solve(Q), slow


def _compiled_gth():
    from ctmc._relax import extension
    if getattr(extension(), "gth", None) is None:
        pytest.skip("the compiled extension (with its gth kernel) is not built or not in use")


class _Counted:
    """The extension with its gth kernel's calls counted."""

    def __init__(self, ext):
        self._ext, self.calls = ext, 0

    def __getattr__(self, name):
        return getattr(self._ext, name)

    def gth(self, *args):
        self.calls += 1
        return self._ext.gth(*args)


def test_gth_compiled_route_gives_the_numpy_routes_numbers_to_the_bit(monkeypatch):
    # the C kernel repeats the numpy route's operations in its order (numpy's pairwise sums
    # included): banded, sparse, dense and nearly decomposable chains of 1-600 states, compared with ==
    _compiled_gth()
    from ctmc import _relax
    spy = _Counted(_relax.extension())
    monkeypatch.setattr(_relax, "_ext", spy)
    rng = np.random.default_rng(11)
    for n in (1, 2, 3, 5, 8, 9, 17, 64, 129, 130, 257, 600):
        for Q in _chains(rng, n):
            fast, slow = _both_routes(Q)
            assert np.array_equal(fast, slow), (n, np.max(np.abs(fast - slow) / slow))
            assert np.all(fast > 0) or n > 100     # tails may underflow only on the large sparse chains
    assert spy.calls == 12 * 4                      # the compiled route ran (the numpy one: use_compiled off)


def _exact_stationary(Q):
    """pi Q = 0, sum(pi) = 1 in exact rationals (`fraction_solve` on Q^T with the last row made the sum);
    Q's diagonal made exactly minus its row's other rates (the chain GTH reads)."""
    n = len(Q)
    E = [[Fraction(Q[i][j]) if i != j else Fraction(0) for j in range(n)] for i in range(n)]
    for i in range(n):
        E[i][i] = -sum(E[i])
    A = [[E[j][i] for j in range(n)] for i in range(n)]       # Q^T, its last row made the sum
    A[n - 1] = [Fraction(1)] * n
    return fraction_solve(A, [Fraction(0)] * (n - 1) + [Fraction(1)])


def test_gth_both_routes_are_exact_in_relative_terms_down_to_tiny_tails():
    # against exact rationals: chains whose stationary probabilities span 1e0..1e-200, every one
    # of them (however small) to a relative 1e-12, by the compiled and the numpy route alike
    rng = np.random.default_rng(5)
    smallest = 1.0
    for trial in range(12):
        # up one state at a rate below 1e-25, down to any state at rates 1e-5..1e5: pi_j falls like 1e-25^j
        n = int(rng.integers(2, 11)) if trial else 10
        R = np.tril(rng.random((n, n)) * (rng.random((n, n)) < 0.5) * 10.0 ** rng.integers(-5, 5, (n, n)))
        R += np.diag(rng.random(n - 1) * 1e-25, 1) + np.diag(np.ones(1), -(n - 1))
        Q = _generator(R)
        exact = np.array([float(p) for p in _exact_stationary(Q.tolist())])
        keep = exact > 1e-290
        for x in _both_routes(Q):
            np.testing.assert_allclose(x[keep], exact[keep], rtol=1e-12)
        smallest = min(smallest, exact[keep].min())
    assert smallest < 1e-200


def test_gth_reducible_chain_names_the_state_in_both_routes():
    Q = _generator(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0]]))   # state 2 is transient
    for route in (True, False):
        from ctmc._relax import use_compiled
        before = use_compiled(route)
        try:
            with pytest.raises(ValueError, match="zero pivot at state 1"):
                gth_solve(Q)
        finally:
            use_compiled(before)
    with pytest.raises(ValueError, match="square matrix"):
        gth_solve(np.ones((2, 3)))
