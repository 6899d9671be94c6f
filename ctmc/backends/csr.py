r"""Passes over a stored CSR generator that make no copy of it: rates, principal blocks, norms, reach.

A backend holds the generator :math:`Q = R - \operatorname{diag}(q)` as the
user gave it (CSR, diagonal stored) and, at most, its transpose. Everything
else is read from those arrays:

* the rates :math:`R` (:func:`offdiagonal_rows`, :func:`offdiagonal_product`,
  :func:`offdiagonal_counts`): the rows of :math:`Q` without their diagonal
  entry (column ``first + row``) and without stored zeros, entry for entry the
  matrix ``Q.copy(); setdiag(0); eliminate_zeros()``, so that a product
  :math:`Rx` sums the same terms in the same order, to the bit;
* the matrix :math:`M = \operatorname{diag}(d) - R_{XX}` of a linear system on a
  set :math:`X` (:func:`principal_block`), from the rows of :math:`Q` (for
  :math:`M`) or of :math:`Q^T` (for :math:`M^T`), in one pass;
* :math:`\|A\|_\infty = \max_i \sum_j |A_{ij}|` (:func:`inf_norm`), summed
  row by row in storage order like ``abs(A).sum(axis=1)``;
* the states a breadth-first search reaches (:func:`graph_reach`).

They work on blocks of about :data:`BLOCK` stored entries at a time, so their
temporaries stay a few tens of megabytes whatever the size of the chain.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order

__all__ = ["BLOCK", "row_blocks", "offdiagonal_rows", "offdiagonal_product", "offdiagonal_counts", "offdiagonal_column_counts",
           "principal_block", "inf_norm", "graph_reach", "stores_zero_rates", "index_dtype"]

#: stored entries per block of rows in the passes of this module (a row longer than that is a block)
BLOCK = 1 << 21


def index_dtype(*sizes) -> type:
    """``int32`` when every size (entries, columns) fits below ``2**31``, else ``int64``."""
    return np.int32 if max(sizes, default=0) < 2 ** 31 - 1 else np.int64


def row_blocks(indptr, block=None):
    """``(r0, r1)`` ranges of rows covering ``indptr`` with about ``block`` (default :data:`BLOCK`) entries each.

    >>> list(row_blocks(np.array([0, 2, 4, 9, 10]), block=4))
    [(0, 2), (2, 3), (3, 4)]
    """
    block = BLOCK if block is None else int(block)
    n = indptr.size - 1
    r = 0
    while r < n:
        r1 = int(np.searchsorted(indptr, indptr[r] + block, side="right")) - 1
        r1 = min(max(r1, r + 1), n)
        yield r, r1
        r = r1


def _row_ids(indptr, r0, r1, first, dtype):
    """The row number (``first + row``) of every stored entry of rows ``r0:r1``."""
    return np.repeat(np.arange(first + r0, first + r1, dtype=dtype), np.diff(indptr[r0:r1 + 1]))


def _offdiagonal_keep(A, r0, r1, first):
    """Mask of the stored entries of rows ``r0:r1`` that are rates (off the diagonal, non-zero)."""
    a, b = A.indptr[r0], A.indptr[r1]
    ind = A.indices[a:b]
    return (ind != _row_ids(A.indptr, r0, r1, first, ind.dtype)) & (A.data[a:b] != 0)


def _kept_pointer(keep, indptr_block):
    """Row pointer of the kept entries of a block whose row pointer (from 0) is ``indptr_block``."""
    cs = np.zeros(keep.size + 1, dtype=np.int64)
    np.cumsum(keep, out=cs[1:])
    return cs[indptr_block]


def offdiagonal_counts(A: sp.csr_matrix, first: int = 0) -> np.ndarray:
    """Rates in each row of ``A`` (entries off the diagonal, column ``first + row``, and non-zero).

    >>> Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 0.0, 0.0]]))
    >>> offdiagonal_counts(Q).tolist()
    [1, 2, 0]
    """
    out = np.zeros(A.shape[0], dtype=np.int64)
    for r0, r1 in row_blocks(A.indptr):
        keep = _offdiagonal_keep(A, r0, r1, first)
        out[r0:r1] = np.diff(_kept_pointer(keep, A.indptr[r0:r1 + 1] - A.indptr[r0]))
    return out


def offdiagonal_column_counts(A: sp.csr_matrix, first: int = 0) -> np.ndarray:
    """Rates in each column of ``A`` (the rows of ``A^T``): :func:`offdiagonal_counts` of the
    transpose, counted block by block from ``A``'s own rows, no transpose made.

    >>> Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 0.0, 0.0]]))
    >>> offdiagonal_column_counts(Q).tolist() == offdiagonal_counts(Q.T.tocsr()).tolist()
    True
    """
    out = np.zeros(A.shape[1], dtype=np.int64)
    for r0, r1 in row_blocks(A.indptr):
        keep = _offdiagonal_keep(A, r0, r1, first)
        out += np.bincount(A.indices[A.indptr[r0]:A.indptr[r1]][keep], minlength=A.shape[1])
    return out


def offdiagonal_rows(A: sp.csr_matrix, rows=None, first: int = 0) -> sp.csr_matrix:
    """The rates of ``A``'s rows (all, or ``rows``, in that order): ``A`` without diagonal and zeros.

    Entry for entry ``B = A[rows].copy(); B.setdiag(0); B.eliminate_zeros()``
    (the diagonal of row ``i`` of ``A`` being column ``first + i``), the same
    index types as ``A``; made in one pass of blocks (a count, then a fill).

    >>> Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 4.0, -4.0]]))
    >>> offdiagonal_rows(Q).toarray().tolist()
    [[0.0, 1.0, 0.0], [2.0, 0.0, 1.0], [0.0, 4.0, 0.0]]
    >>> offdiagonal_rows(Q, np.array([2, 0])).toarray().tolist()
    [[0.0, 4.0, 0.0], [0.0, 1.0, 0.0]]
    """
    if rows is not None:
        rows = np.asarray(rows, dtype=np.int64)
        sub = A[rows] if rows.size else sp.csr_matrix((0, A.shape[1]), dtype=A.dtype)
        ind = sub.indices
        keep = (ind != np.repeat(rows + first, np.diff(sub.indptr)).astype(ind.dtype, copy=False)) & (sub.data != 0)
        ptr = _kept_pointer(keep, sub.indptr)
        return sp.csr_matrix((sub.data[keep], ind[keep], ptr.astype(sub.indptr.dtype)), shape=sub.shape)
    counts = offdiagonal_counts(A, first)
    indptr = np.zeros(A.shape[0] + 1, dtype=A.indptr.dtype)
    np.cumsum(counts, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), dtype=A.indices.dtype)
    data = np.empty(int(indptr[-1]), dtype=A.data.dtype)
    for r0, r1 in row_blocks(A.indptr):
        a, b = A.indptr[r0], A.indptr[r1]
        keep = _offdiagonal_keep(A, r0, r1, first)
        indices[indptr[r0]:indptr[r1]] = A.indices[a:b][keep]
        data[indptr[r0]:indptr[r1]] = A.data[a:b][keep]
    out = sp.csr_matrix((data, indices, indptr), shape=A.shape)
    out.has_sorted_indices = A.has_sorted_indices
    return out


def offdiagonal_product(A: sp.csr_matrix, x, first: int = 0):
    """``R x`` for ``R`` the rates of ``A`` (:func:`offdiagonal_rows`), block by block, to the bit.

    >>> Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 4.0, -4.0]]))
    >>> offdiagonal_product(Q, np.array([1.0, 2.0, 3.0])).tolist()
    [2.0, 5.0, 8.0]
    """
    x = np.asarray(x)
    y = np.zeros((A.shape[0],) + x.shape[1:], dtype=np.result_type(A.data, x))
    for r0, r1 in row_blocks(A.indptr):
        a, b = A.indptr[r0], A.indptr[r1]
        keep = _offdiagonal_keep(A, r0, r1, first)
        ptr = _kept_pointer(keep, A.indptr[r0:r1 + 1] - a)
        blk = sp.csr_matrix((A.data[a:b][keep], A.indices[a:b][keep], ptr), shape=(r1 - r0, A.shape[1]))
        y[r0:r1] = blk @ x
    return y


def principal_block(A: sp.csr_matrix, members, diag, first: int = 0) -> sp.csr_matrix:
    r"""``M = diag(d) - R_XX`` in CSR, for ``R`` the rates of ``A`` and ``X = members``.

    ``A`` holds the rows of ``Q`` (``M``'s rows) or of ``Q^T`` (then the result
    is :math:`M^T`, whose rows are what a transposed solve multiplies by);
    ``diag`` holds :math:`d_i` for the members, in order. Entry for entry the
    canonical ``(sp.diags(d) - R[X][:, X]).tocsr()`` (zeros dropped), in one
    pass: the diagonal takes the place of the stored diagonal entry of ``A``
    (when a member's row stores none and its :math:`d_i \ne 0`, scipy's sum
    makes the matrix instead).

    >>> Q = sp.csr_matrix(np.array([[-3.0, 1.0, 2.0], [2.0, -2.0, 0.0], [0.0, 4.0, -4.0]]))
    >>> X = np.array([True, False, True])
    >>> principal_block(Q, X, np.array([3.5, 4.5])).toarray().tolist()
    [[3.5, -2.0], [0.0, 4.5]]
    """
    members = np.asarray(members, dtype=bool)
    diag = np.asarray(diag, dtype=float)
    m = int(np.count_nonzero(members))
    if m == 0:
        return sp.csr_matrix((0, 0))
    n = A.shape[0]
    itype = index_dtype(A.nnz, n)
    newpos = np.cumsum(members, dtype=itype) - 1          # the new number of each member
    lens = np.diff(A.indptr)
    room = int(lens[members].sum())                      # the entries of the members' rows: room enough
    indptr = np.zeros(m + 1, dtype=itype)
    indices = np.empty(room, dtype=itype)
    data = np.empty(room, dtype=float)
    at = 0
    for r0, r1 in row_blocks(A.indptr):
        a, b = A.indptr[r0], A.indptr[r1]
        ind, dat = A.indices[a:b], A.data[a:b]
        mine = members[r0:r1]
        on = members[ind] & np.repeat(mine, lens[r0:r1])
        keep = on & (dat != 0)
        # the diagonal entries of the members: kept where d is not zero, whatever the stored value
        isdiag = ind == _row_ids(A.indptr, r0, r1, first, ind.dtype)
        dpos = np.flatnonzero(on & isdiag)
        d = diag[newpos[r0:r1][mine]]                     # d of this block's members, in order
        if dpos.size != mine.sum():
            break                                        # a member's row stores no diagonal entry
        keep[dpos] = d != 0
        ptr = _kept_pointer(keep, A.indptr[r0:r1 + 1] - a)
        k = int(ptr[-1])
        lo = int(newpos[r0 - 1]) + 1 if r0 else 0
        indptr[lo + 1:lo + 1 + d.size] = at + ptr[1:][mine]
        out = data[at:at + k]
        out[:] = dat[keep]
        np.negative(out, out=out)
        out[np.flatnonzero(isdiag[keep])] = d[d != 0]
        indices[at:at + k] = newpos[ind[keep]]
        at += k
    else:
        if at < 0.9 * room:                              # (columns outside X left much room unused)
            indices, data = indices[:at].copy(), data[:at].copy()
        out = sp.csr_matrix((data[:at], indices[:at], indptr), shape=(m, m))
        out.has_sorted_indices = A.has_sorted_indices
        return out
    # a member's row stores no diagonal entry: scipy's sum places it
    del indices, data
    idx = np.flatnonzero(members)
    out = (sp.diags(diag) - offdiagonal_rows(A, idx, first)[:, idx]).tocsr()
    out.sort_indices()
    return out


def inf_norm(A: sp.csr_matrix) -> float:
    r""":math:`\max_i \sum_j |A_{ij}|` without a copy of ``A``: ``abs(A).sum(axis=1).max()`` to the bit
    (scipy sums a row by ``np.add.reduceat`` over its stored entries, as here, a block at a time).

    >>> inf_norm(sp.csr_matrix(np.array([[1.0, -2.0], [0.5, 0.0]])))
    3.0
    """
    best = 0.0
    for r0, r1 in row_blocks(A.indptr):
        a, b = A.indptr[r0], A.indptr[r1]
        starts = A.indptr[r0:r1]
        starts = starts[starts < A.indptr[r0 + 1:r1 + 1]] - a          # rows with entries
        if starts.size:
            best = max(best, float(np.add.reduceat(np.abs(A.data[a:b]), starts).max()))
    return best


def stores_zero_rates(A: sp.csr_matrix, first: int = 0) -> bool:
    """Whether ``A`` stores a zero off its diagonal (a user's generator may: a search must skip it).

    >>> stores_zero_rates(sp.csr_matrix((np.array([-1.0, 1.0, 0.0]), np.array([0, 1, 1]), np.array([0, 2, 3]))))
    False
    >>> stores_zero_rates(sp.csr_matrix((np.array([0.0, 0.0]), np.array([0, 1]), np.array([0, 2, 2]))))
    True
    """
    for r0, r1 in row_blocks(A.indptr):
        a, b = A.indptr[r0], A.indptr[r1]
        zero = A.data[a:b] == 0
        if zero.any() and (A.indices[a:b][zero] != _row_ids(A.indptr, r0, r1, first, A.indices.dtype)[zero]).any():
            return True
    return False


def graph_reach(A: sp.csr_matrix, seeds, within=None) -> np.ndarray:
    """States joined to a seed by a path along ``A``'s rows (row ``i`` lists where ``i`` leads), as a mask.

    Every stored entry is an edge (a stored zero too: see :func:`stores_zero_rates`).

    With ``within``, the path's states but the seed lie in ``within``.
    Without it, one breadth-first search per seed not yet reached, on ``A``
    itself (no copy: seeds of one communicating class need one search); with
    it, or when the seeds are many and scattered, one search from a virtual
    root joined to every seed, on a filtered copy of the pattern.

    >>> A = sp.csr_matrix(np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]], dtype=float))
    >>> graph_reach(A, np.array([False, False, False, True])).tolist()
    [True, True, True, True]
    >>> graph_reach(A, np.array([True, False, False, False]), within=np.array([True, False, True, True])).tolist()
    [True, False, False, False]
    """
    n = A.shape[0]
    seeds = np.asarray(seeds, dtype=bool)
    s = np.flatnonzero(seeds)
    if within is None:
        found = np.zeros(n, dtype=bool)
        searches = 0
        for z in s:
            if found[z]:
                continue       # reached from an earlier seed: so is all it reaches
            if searches == 4:
                break          # many separate seeds: the virtual root below
            found[breadth_first_order(A, int(z), directed=True, return_predecessors=False)] = True
            searches += 1
        else:
            return found
    indptr, indices = A.indptr, A.indices
    if within is not None:
        ok = np.asarray(within, dtype=bool) | seeds
        keep = ok[indices]                   # the search only enters allowed states (and seeds)
        indices = indices[keep]
        rows = np.repeat(np.arange(n), np.diff(indptr))
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[keep], minlength=n))])
    # a virtual root (row n) joined to every seed
    G = sp.csr_matrix((np.ones(indices.size + s.size, dtype=np.int8), np.concatenate([indices, s]),
                       np.concatenate([indptr, [indices.size + s.size]])), shape=(n + 1, n + 1))
    order = breadth_first_order(G, n, directed=True, return_predecessors=False)
    mask = np.zeros(n + 1, dtype=bool)
    mask[order] = True
    return mask[:n]
