"""What tests/test_error_bound.py and tests/test_error_bound_ahead.py share: random chains that test a bound.

``chains`` draws an irreducible generator of one to three blocks, weakly coupled (down to
1e-12) and with rates spread over up to 12 orders of magnitude. Not collected by pytest (no
``test_`` prefix); ``tests/conftest.py`` puts ``tests/`` on ``sys.path``.
"""
import numpy as np
from hypothesis import strategies as st

import ctmc


@st.composite
def chains(draw):
    """A random irreducible generator: one or several blocks, weak couplings, spread rates."""
    blocks = draw(st.integers(1, 3))
    sizes = [draw(st.integers(2, 7)) for _ in range(blocks)]
    n = sum(sizes)
    spread = draw(st.sampled_from([0.0, 3.0, 12.0]))            # log10 spread of the rates
    coupling = draw(st.sampled_from([1.0, 1e-3, 1e-6, 1e-9, 1e-12]))
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    Q = np.zeros((n, n))
    starts = np.cumsum([0] + sizes)
    for a, b in zip(starts[:-1], starts[1:]):
        k = b - a
        dense = rng.uniform(size=(k, k)) < 0.6
        ring = np.roll(np.eye(k, dtype=bool), 1, axis=1)        # keeps the block irreducible
        rates = 10.0 ** rng.uniform(-spread / 2, spread / 2, (k, k))
        Q[a:b, a:b] = np.where(dense | ring, rates, 0.0)
    for i in range(blocks):                                   # blocks in a weakly coupled ring
        a, b = starts[i], starts[(i + 1) % blocks]
        if blocks > 1:
            Q[a, b] += coupling * rng.uniform(0.5, 2.0)
            Q[b, a] += coupling * rng.uniform(0.5, 2.0)
    np.fill_diagonal(Q, 0.0)
    np.fill_diagonal(Q, -Q.sum(axis=1))
    return ctmc.CTMC(Q)
