"""ctmc.linalg.gth_solve: the envelope-restricted elimination against closed forms and reorderings."""
from fractions import Fraction

import numpy as np

from ctmc.linalg import gth_solve


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
