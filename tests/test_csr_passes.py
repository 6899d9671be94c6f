"""The copy-free passes over a stored generator (ctmc.backends.csr) against scipy's own operations.

Each pass is compared with the scipy expression it replaces, entry for entry
and bit for bit (the matrices' arrays, the products' values), on random
generators with the awkward cases: stored zeros, rows without a diagonal
entry, empty rows, 64-bit indices, and blocks of a few entries (so that every
pass crosses many block boundaries). Every test runs twice: on the compiled
passes (``ctmc/_kernels_graph.h``, where the extension is built) and on their
numpy fallbacks; both must give scipy's answer, hence each other's.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components

import ctmc
from ctmc import _relax
from ctmc.backends import csr
from ctmc.backends import operator_for
from ctmc.backends.base import LinearSpec
from ctmc.backends.csr import jump_chain
from ctmc.kernels.classes import closed_classes, sole_closed_class, walk_pin
from ctmc.kernels.plan import structure_facts


@pytest.fixture(autouse=True, params=["compiled", "numpy"])
def passes(request):
    """Each test on the compiled passes and on the numpy fallbacks."""
    if request.param == "compiled":
        pytest.importorskip("ctmc._kernels")
    before = _relax.use_compiled(request.param == "compiled")
    yield request.param
    _relax.use_compiled(before)


@pytest.fixture(params=[csr.BLOCK, 7], ids=["one block", "blocks of 7"])
def block(request, monkeypatch):
    monkeypatch.setattr(csr, "BLOCK", request.param)
    return request.param


def _generator(n=40, seed=0, zeros=True, missing_diag=True, wide=False):
    rng = np.random.default_rng(seed)
    R = sp.random(n, n, density=0.15, random_state=rng, format="csr")
    R.setdiag(0)
    R.eliminate_zeros()
    R.data *= 3
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    Q.sort_indices()
    if zeros:                                     # stored zeros off and on the diagonal
        Q.data[rng.random(Q.nnz) < 0.1] = 0.0
    if missing_diag:                              # rows that store no diagonal entry
        coo = Q.tocoo()
        drop = (coo.row == coo.col) & (coo.row % 5 == 0)
        Q = sp.csr_matrix((coo.data[~drop], (coo.row[~drop], coo.col[~drop])), shape=Q.shape)
        Q.sort_indices()
    if wide:
        Q.indices, Q.indptr = Q.indices.astype(np.int64), Q.indptr.astype(np.int64)
    return Q


def _rates(A, rows=None, first=0):
    B = (A if rows is None else A[rows]).tocoo()
    keep = (B.col != (np.arange(A.shape[0])[rows] if rows is not None else np.arange(A.shape[0]))[B.row] + first) \
        & (B.data != 0)
    out = sp.csr_matrix((B.data[keep], (B.row[keep], B.col[keep])), shape=B.shape)
    out.sort_indices()
    return out


def _same(A, B):
    A, B = A.tocsr(), B.tocsr()
    return (A.shape == B.shape and np.array_equal(A.indptr, B.indptr) and np.array_equal(A.indices, B.indices)
            and np.array_equal(A.data, B.data))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("wide", [False, True])
def test_rates_are_q_without_its_diagonal_and_zeros(block, seed, wide):
    Q = _generator(seed=seed, wide=wide)
    ref = Q.copy()
    ref.setdiag(0)
    ref.eliminate_zeros()
    R = csr.offdiagonal_rows(Q)
    assert _same(R, ref) and R.indices.dtype == np.int32        # 32-bit indices where they fit
    assert np.array_equal(csr.offdiagonal_counts(Q), np.diff(ref.indptr))
    rows = np.array([3, 0, 17, 17, 39])
    assert _same(csr.offdiagonal_rows(Q, rows), _rates(Q, rows))
    x = np.random.default_rng(seed).standard_normal(40)
    X = np.random.default_rng(seed + 1).standard_normal((40, 3))
    x[5] = np.inf                                 # a non-finite entry: the same NaNs and infinities
    assert np.array_equal(csr.offdiagonal_product(Q, x), ref @ x, equal_nan=True)
    assert np.array_equal(csr.offdiagonal_product(Q, X), ref @ X)
    QT = Q.T.tocsr()
    assert _same(csr.offdiagonal_rows(QT), ref.T.tocsr())
    # the transposed products and counts from Q's rows: R^T's and Q^T's own, to the bit
    assert np.array_equal(csr.offdiagonal_product(Q, x, transpose=True), ref.T.tocsr() @ x, equal_nan=True)
    assert np.array_equal(csr.offdiagonal_product(Q, X, transpose=True), ref.T.tocsr() @ X)
    assert np.array_equal(csr.generator_product(Q, x, transpose=True), QT @ x, equal_nan=True)
    assert np.array_equal(csr.generator_product(Q, X), Q @ X)
    assert np.array_equal(csr.offdiagonal_column_counts(Q), np.diff(ref.T.tocsr().indptr))


def test_rates_of_a_block_of_rows_use_its_global_diagonal(block):
    Q = _generator(seed=3, missing_diag=False)
    rows = Q[10:25]
    ref = Q.copy()
    ref.setdiag(0)
    ref.eliminate_zeros()
    assert _same(csr.offdiagonal_rows(rows, first=10), ref[10:25])


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("shift", [0.0, 0.5])
@pytest.mark.parametrize("missing_diag", [False, True])
def test_principal_block_is_scipys_shifted_submatrix(block, seed, shift, missing_diag):
    Q = _generator(seed=seed, missing_diag=missing_diag)
    rng = np.random.default_rng(seed)
    X = rng.random(40) < 0.8
    q = -Q.diagonal()
    d = shift + q[X]
    R = Q.copy()
    R.setdiag(0)
    R.eliminate_zeros()
    idx = np.flatnonzero(X)
    M = (sp.diags(d) - R[idx][:, idx]).tocsc()     # the matrix of the former ScipySystem
    ref_t = M.T.tocsr()
    ref = M.tocsr()
    assert _same(csr.principal_block(Q.T.tocsr(), X, d), ref_t)
    assert _same(csr.principal_block(Q, X, d), ref)
    assert csr.inf_norm(ref_t) == float(abs(ref_t).sum(axis=1).max())


@pytest.mark.parametrize("wide", [False, True])
def test_inf_norm_sums_rows_like_scipy(block, wide):
    """Rows of 0 to 400 entries of magnitudes 1e-8 to 1e8, each the largest in turn: numpy's reduceat
    sums to the bit (the first entry plus a pairwise sum of the others: in order below 8 terms, by
    eight running sums up to 128, by halves beyond), scipy's row sums (in order) to round-off."""
    rng = np.random.default_rng(11)
    lens = np.array([0, 1, 2, 7, 8, 9, 15, 16, 17, 64, 127, 128, 129, 130, 200, 257, 400])
    for top in range(lens.size):
        rows = [rng.choice(500, k, replace=False) for k in lens]
        data = [rng.standard_normal(k) * 10.0 ** rng.uniform(-8, 8, k) for k in lens]
        data[top] = data[top] * 1e12
        A = sp.csr_matrix((np.concatenate(data), np.concatenate(rows),
                           np.concatenate([[0], np.cumsum(lens)])), shape=(lens.size, 500))
        if wide:
            A.indices, A.indptr = A.indices.astype(np.int64), A.indptr.astype(np.int64)
        starts = A.indptr[:-1][lens > 0]
        ref = float(np.add.reduceat(np.abs(A.data), starts).max())
        assert csr.inf_norm(A) == ref                               # numpy's sums, to the bit
        assert csr.inf_norm(A) == pytest.approx(float(abs(A).sum(axis=1).max()), rel=1e-14)   # scipy's


@pytest.mark.parametrize("pieces", [1, 20])
def test_reach_matches_breadth_first_search(block, pieces):
    # one random generator, or 20 separate ones (3 states each): seeds in many pieces
    Q = _generator(n=60, seed=5, zeros=False) if pieces == 1 else \
        sp.block_diag([_generator(n=3, seed=s, zeros=False, missing_diag=False) for s in range(20)], format="csr")
    rng = np.random.default_rng(1)
    for k in (1, 3, 6, 12):
        seeds = np.zeros(60, dtype=bool)
        seeds[rng.choice(60, k, replace=False)] = True
        ref = np.zeros(60, dtype=bool)
        for z in np.flatnonzero(seeds):
            ref[breadth_first_order(Q, z, directed=True, return_predecessors=False)] = True
        assert np.array_equal(csr.graph_reach(Q, seeds), ref)
        within = rng.random(60) < 0.6
        # the reference: the search on the graph without the entries into states outside `within`
        ok = within | seeds
        coo = Q.tocoo()
        keep = ok[coo.col]
        H = sp.csr_matrix((np.ones(keep.sum()), (coo.row[keep], coo.col[keep])), shape=Q.shape)
        ref = np.zeros(60, dtype=bool)
        for z in np.flatnonzero(seeds):
            ref[breadth_first_order(H, z, directed=True, return_predecessors=False)] = True
        assert np.array_equal(csr.graph_reach(Q, seeds, within), ref)


@pytest.mark.parametrize("seed", range(6))
def test_reach_and_closed_classes_on_reducible_generators(seed):
    """A chain of random blocks, some joined one way: the searches against scipy's breadth-first
    order and strong components (closed = a component no transition leaves), zeros stored."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, size=8)

    def block(k):                        # a cycle and random chords: one communicating class
        B = sp.random(k, k, density=0.2, random_state=rng).tolil()
        for i in range(k):
            B[i, (i + 1) % k] = 1.0
        return B
    Q = sp.block_diag([block(int(k)) for k in sizes], format="lil")
    n = Q.shape[0]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    for b in rng.choice(len(sizes), 4, replace=False):        # one-way links out of 4 blocks
        to = int(rng.integers(0, n))
        if not starts[b] <= to < starts[b] + sizes[b]:
            Q[int(starts[b]), to] = 1.5
    Q = sp.csr_matrix(Q)
    Q.setdiag(0)
    Q = (Q - sp.diags(np.asarray(Q.sum(axis=1)).ravel())).tocsr()
    Q.sort_indices()
    zero = (Q.tocoo().row == Q.tocoo().col)
    Q.data[~zero & (rng.random(Q.nnz) < 0.05)] = 0.0           # stored zero rates: no transitions
    pattern = Q.copy()
    pattern.eliminate_zeros()
    chain = ctmc.CTMC(Q, check=False)
    op = operator_for(chain, "scipy")
    for k in (1, 3):
        seeds = np.zeros(n, dtype=bool)
        seeds[rng.choice(n, k, replace=False)] = True
        for forward, G in ((True, pattern), (False, pattern.T.tocsr())):
            ref = np.zeros(n, dtype=bool)
            for z in np.flatnonzero(seeds):
                ref[breadth_first_order(G, z, directed=True, return_predecessors=False)] = True
            assert np.array_equal(op.reach(seeds, forward=forward), ref)
    _, label = connected_components(pattern, directed=True, connection="strong")
    coo = pattern.tocoo()
    leaves = np.zeros(label.max() + 1, dtype=bool)
    leaves[label[coo.row][label[coo.row] != label[coo.col]]] = True
    ref = sorted((np.flatnonzero(label == c).tolist() for c in np.flatnonzero(~leaves)), key=lambda c: c[0])
    assert [np.flatnonzero(C).tolist() for C in closed_classes(op)] == ref        # (strong components of Q)
    sole = sole_closed_class(op)
    assert (sole is None) if len(ref) > 1 else np.flatnonzero(sole).tolist() == ref[0]
    # the two-way search of a backend without them (PETSc) finds the same classes
    op.closed_class_masks = lambda most=None: None
    assert [np.flatnonzero(C).tolist() for C in closed_classes(op)] == ref
    sole = sole_closed_class(op)
    assert (sole is None) if len(ref) > 1 else np.flatnonzero(sole).tolist() == ref[0]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("wide", [False, True])
def test_closed_components_and_lowest_rows_from_the_rows_alone(block, seed, wide):
    """The strong components no edge leaves (stored zeros are no edges, with skip_zeros) against a
    closure of the reach relation in dense booleans; the lowest row of each column against the lowest
    column of Q^T's rows."""
    Q = _generator(n=30, seed=seed, wide=wide)
    QT = Q.T.tocsr()
    QT.sort_indices()
    assert np.array_equal(csr.lowest_columns(Q, transpose=True), csr.lowest_columns(QT))
    assert np.array_equal(csr.lowest_columns(Q, transpose=True, out=np.full(30, 3, dtype=np.int64)),
                          csr.lowest_columns(QT, out=np.full(30, 3, dtype=np.int64)))
    with pytest.raises(ValueError, match="transpose"):
        csr.lowest_columns(Q, first=2, transpose=True)
    n = Q.shape[0]
    for skip in (False, True):
        coo = Q.tocoo()
        edge = (coo.row != coo.col) & ((coo.data != 0) | (not skip))
        reach = np.eye(n, dtype=bool)
        reach[coo.row[edge], coo.col[edge]] = True
        for _ in range(n.bit_length() + 1):                  # the transitive closure by squaring
            reach = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
        comps = {tuple(np.flatnonzero(reach[i] & reach[:, i])) for i in range(n)}
        ref = sorted(c for c in comps if not reach[list(c)][:, [j for j in range(n) if j not in c]].any())
        labels, closed = csr.closed_components(Q, skip_zeros=skip)
        assert labels.dtype == Q.indptr.dtype and len(closed) == len(comps)
        assert sorted(tuple(np.flatnonzero(labels == c)) for c in np.flatnonzero(closed)) == ref


def test_jump_chain_draws_by_the_running_sum_of_each_row():
    """Each jump of the walk against a direct construction: the first entry whose running sum of the
    row's rates (diagonal 0) exceeds u times their sum, past weightless entries; and the jump
    frequencies against the embedded chain's probabilities R_sj / q_s."""
    Q = _generator(n=30, seed=4, zeros=True, missing_diag=False)
    R = Q.copy(); R.setdiag(0); R.eliminate_zeros()
    q = np.asarray(R.sum(axis=1)).ravel()
    Q = (R - sp.diags(q)).tocsr(); Q.sort_indices()
    Q.data[(Q.tocoo().row != Q.tocoo().col) & (np.random.default_rng(1).random(Q.nnz) < 0.1)] = 0.0
    q = np.asarray(-Q.diagonal(), dtype=float)
    s0 = int(np.flatnonzero(q > 0)[0])
    u = np.random.default_rng(2).random(20000)
    path = np.empty(u.size, dtype=np.int64)
    k = jump_chain(Q, 0, q, s0, u, path)
    s = s0
    for i in range(k):
        assert path[i] == s
        a, b = Q.indptr[s], Q.indptr[s + 1]
        c = np.cumsum(np.where(Q.indices[a:b] == s, 0.0, Q.data[a:b]))
        j = min(int(np.searchsorted(c, u[i] * c[-1], "right")), b - a - 1)
        while j > 0 and not c[j] > c[j - 1]:
            j -= 1
        s = int(Q.indices[a + j])
    if k == u.size:                      # a long walk: the jumps from its most visited state
        top = np.bincount(path[:-1]).argmax()
        nxt = path[1:][path[:-1] == top]
        freq = np.bincount(nxt, minlength=30) / nxt.size
        P = Q.getrow(top).toarray().ravel() / q[top]
        P[top] = 0.0
        assert np.abs(freq - P).max() < 4 * np.sqrt(0.25 / nxt.size)
    else:                                # stopped at a state with no rate out
        assert q[path[k]] <= 0 or Q.indptr[path[k] + 1] == Q.indptr[path[k]]


def test_walk_pin_finds_the_probable_end_of_a_birth_death_chain():
    """From the least probable state of an M/M/1/K queue (pi_n ~ 2^-n): the pin is among the most
    probable states (the closed form), the same compiled and in Python."""
    m = ctmc.Model("mm1"); n = m.var("n", 0, 300)
    m.event("a", guard=n < 300, rate=1.0, update={n: n + 1})
    m.event("s", guard=n > 0, rate=2.0, update={n: n - 1})
    c = m.build(initial={"n": 300})
    op = operator_for(c, "scipy")
    pin = walk_pin(op, np.ones(c.n_states, dtype=bool), hint=int(c.states.index(n=300)))
    assert 0.5 ** int(c.states["n"][pin]) >= 0.1          # pi_pin / pi_max >= 0.1


def test_the_transpose_is_never_made_by_a_default_solve(monkeypatch, passes):
    """The closed class (strongly connected components of Q's rows), the structure facts (Q's columns),
    the GMRES solve, the polish, the residual and the error bound read Q's rows (the same numbers as
    Q^T's): Q^T is never made (by the fallbacks once, for GMRES's extracted matrix M^T), and
    the answer's products equal the ones with Q^T held."""
    from ctmc.backends.scipy_backend import ScipyOperator
    from ctmc.models.gallery import parse_spec

    made = []
    orig = ScipyOperator.QT.fget

    def counted(self):
        if self._QT is None:
            made.append(1)
        return orig(self)

    chain = parse_spec("kanban:1").chain()
    monkeypatch.setattr(ScipyOperator, "QT", property(counted))
    res = chain.stationary("gmres")
    assert len(made) == (0 if passes == "compiled" else 1) and res.status.value == "success"
    made.clear()
    assert chain.stationary().status.value == "success" and not made           # (auto, its plan and bound)
    op = operator_for(chain, "scipy")
    assert op._QT is None
    x = res.pi
    R = chain.Q.copy(); R.setdiag(0); R.eliminate_zeros()
    released = op.apply(x, transpose=True), op.rates(x, transpose=True), op.offdiagonal_counts(True)
    assert op._QT is None
    held = op.apply(x, transpose=(op.QT is not None)), op.rates(x, transpose=True), op.offdiagonal_counts(True)
    for a, b in zip(released, held):
        assert np.array_equal(a, b)
    assert np.array_equal(released[0], chain.Q.T.tocsr() @ x) and np.array_equal(released[1], R.T.tocsr() @ x)


def test_reach_skips_stored_zero_rates():
    Q = sp.csr_matrix((np.array([-1.0, 1.0, 0.0, 1.0, -1.0, 2.0, -2.0]), np.array([0, 1, 2, 0, 1, 1, 2]),
                       np.array([0, 3, 5, 7])), shape=(3, 3))     # a stored zero: no transition from 0 to 2
    assert Q.nnz == 7
    chain = ctmc.CTMC(Q)
    op = operator_for(chain, "scipy")
    assert op.reach(np.array([True, False, False]), forward=True).tolist() == [True, True, False]
    assert op.reach(np.array([False, False, True])).tolist() == [False, False, True]


def test_operator_holds_q_and_makes_its_transpose_once():
    m = ctmc.Model("mm1k"); n = m.var("n", 0, 30)
    m.event("a", guard=n < 30, rate=1.0, update={n: n + 1})
    m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    chain = m.build(initial={"n": 0})
    op = operator_for(chain, "scipy")
    assert op.generator_rows() is chain.Q
    assert op.generator_rows(True) is op.generator_rows(True)
    R = chain.Q.copy(); R.setdiag(0); R.eliminate_zeros()
    x = np.linspace(0, 1, 31)
    assert np.array_equal(op.rates(x), R @ x) and np.array_equal(op.rates(x, True), R.T.tocsr() @ x)
    assert _same(op.local_rows(True), R.T.tocsr())
    # a Krylov system releases the transpose while it holds its own matrix; it is made again after
    sysm = op.system(np.arange(31) > 0, 0.0, LinearSpec("gmres"))
    y, rep = sysm.solve(np.where(np.arange(31) > 0, 1.0, 0.0), transpose=True)
    assert op._QT is None and rep.status.value == "success"
    assert np.array_equal(op.apply(x, transpose=True), chain.Q.T.tocsr() @ x)


def test_structure_facts_count_rates_and_envelope_without_decoding_for_good():
    m = ctmc.Model("grid"); a = m.var("a", 0, 6); b = m.var("b", 0, 5); c = m.var("c", 0, 0)
    m.event("up", guard=a < 6, rate=1.0, update={a: a + 1})
    m.event("down", guard=a > 0, rate=2.0, update={a: a - 1})
    m.event("right", guard=b < 5, rate=0.5, update={b: b + 1})
    m.event("left", guard=b > 0, rate=1.5, update={b: b - 1})
    chain = m.build(initial={"a": 0, "b": 0, "c": 0})
    op = operator_for(chain, "scipy")
    support = np.ones(chain.n_states, dtype=bool)
    f = structure_facts(op, support)
    R = chain.Q.copy(); R.setdiag(0); R.eliminate_zeros()
    S = (R + R.T).tocoo()
    first = np.arange(chain.n_states)
    np.minimum.at(first, S.row, S.col)
    w = np.arange(chain.n_states) - first
    assert f["transitions"] == R.nnz == chain.n_transitions
    assert f["envelope_per_nnz"] == pytest.approx(w.sum() / R.nnz) and f["profile_flops"] == pytest.approx(w @ w)
    assert f["dimensions"] == 2
    assert chain.states.value_range("a") == (0, 6) and chain.states.value_range("c") == (0, 0)


def test_the_protocol_defaults_agree_with_the_scipy_operator():
    """A backend without its own generator_rows / offdiagonal_counts (PETSc) gets them from local_rows."""
    from ctmc.backends.base import Operator
    from ctmc.backends.scipy_backend import ScipyOperator

    class Plain(ScipyOperator):          # R as a matrix of its own, the protocol's defaults from it
        generator_rows = Operator.generator_rows
        offdiagonal_counts = Operator.offdiagonal_counts
        lowest_columns = Operator.lowest_columns              # (Q^T's rows made: the scipy one reads Q's)
        closed_class_masks = Operator.closed_class_masks      # (the two-way search)

        def local_rows(self, transpose=False):
            R = self.Q.copy()
            R.setdiag(0)
            R.eliminate_zeros()
            return R.T.tocsr() if transpose else R

    Q = _generator(n=30, seed=2, zeros=False, missing_diag=False)
    chain = ctmc.CTMC(Q, check=False)
    op, plain = operator_for(chain, "scipy"), Plain(chain.Q, states=chain.states)
    for t in (False, True):
        assert _same(plain.generator_rows(t), op.generator_rows(t))
        assert np.array_equal(plain.offdiagonal_counts(t), op.offdiagonal_counts(t))
    support = np.ones(30, dtype=bool)
    assert structure_facts(plain, support) == structure_facts(op, support)
    assert [C.tolist() for C in closed_classes(plain)] == [C.tolist() for C in closed_classes(op)]
    assert plain.product_roundoff() == op.product_roundoff()


def test_the_threaded_passes_give_the_same_arrays_on_one_and_two_threads(passes):
    """Above the extension's threshold for threads (65,536 rows) the count, fill, product and
    first-column passes split the rows: the results on 1 and 2 threads are the fallback's."""
    if passes != "compiled":
        pytest.skip("the threads of the compiled passes")
    rng = np.random.default_rng(7)
    n = 70_000
    R = sp.random(n, n, density=6.0 / n, random_state=rng, format="csr")
    R.setdiag(0)
    R.eliminate_zeros()
    Q = (R - sp.diags(np.asarray(R.sum(axis=1)).ravel())).tocsr()
    Q.sort_indices()
    Q.data[rng.random(Q.nnz) < 0.02] = 0.0
    X = rng.random(n) < 0.9
    d = 0.25 + (-Q.diagonal())[X]
    x = rng.standard_normal(n)
    threads = _relax.threads()

    def run():
        return (csr.principal_block(Q, X, d), csr.offdiagonal_rows(Q), csr.offdiagonal_product(Q, x),
                csr.lowest_columns(Q), csr.offdiagonal_counts(Q), csr.inf_norm(Q))

    try:
        results = []
        for t in (1, 2):
            _relax.set_threads(t)
            results.append(run())
        _relax.use_compiled(False)
        results.append(run())
    finally:
        _relax.set_threads(threads)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert _same(a, b) if sp.issparse(a) else np.array_equal(a, b)


def test_the_sole_closed_class_test_makes_no_mask_where_there_are_many():
    """``stationary()`` asks whether the chain has exactly one closed class: the scipy backend made a mask of
    every state for each closed class first (a chain of 20,000 states with 10,000 absorbing ones: 200 MB,
    1.8 GB at 60,000 states, before its ReducibleChainError). Now no mask beyond the one asked for, and
    the classes found are the same when all are asked."""
    from ctmc.kernels.classes import closed_classes, sole_closed_class
    from tracing import traced_peak
    n = 20_000
    half = np.arange(n // 2)
    R = sp.csr_matrix((np.ones(half.size), (half, n // 2 + half)), shape=(n, n))   # each into its own sink
    op = operator_for(ctmc.CTMC.from_rates(R), "scipy")
    sole, peak = traced_peak(lambda: sole_closed_class(op))
    assert sole is None and peak < 40 * n, peak                   # a few vectors, not 10,000 masks
    every = closed_classes(op)
    assert len(every) == n // 2 and all(np.flatnonzero(C).tolist() == [n // 2 + i] for i, C in enumerate(every))
    with pytest.raises(ctmc.ReducibleChainError):
        ctmc.CTMC.from_rates(R).stationary()
