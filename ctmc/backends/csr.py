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
* the rates into each state, :math:`R^T x` and :math:`Q^T x` from the rows of
  :math:`Q` (:func:`offdiagonal_column_counts`, ``transpose=True`` of
  :func:`offdiagonal_product` and :func:`generator_product`): the same terms
  in the same order as a product with the rows of :math:`Q^T`, so the same
  numbers without making the transpose;
* the states a breadth-first search reaches (:func:`graph_reach`), the
  closed classes (:func:`closed_components`: strongly connected components no
  edge leaves, from the rows alone, where a search backwards needs the
  transpose), the smallest column of each row or column (:func:`lowest_columns`)
  and a walk of the jump chain (:func:`jump_chain`).

Each pass is a loop of the optional compiled extension (``ctmc/_kernels_graph.h``:
one pass over the arrays, rows split among its threads where they split) when
it is in use (:func:`ctmc._relax.compiled`), else numpy/scipy on blocks of
about :data:`BLOCK` stored entries at a time, so that its temporaries stay a
few tens of megabytes whatever the size of the chain; both give the same
results to the bit (``tests/test_csr_passes.py`` runs each test both ways).
"""
from __future__ import annotations

import bisect

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, connected_components

from .._relax import extension

__all__ = ["BLOCK", "row_blocks", "masked_block", "offdiagonal_rows", "offdiagonal_product", "offdiagonal_counts",
           "offdiagonal_column_counts", "generator_product", "principal_block", "inf_norm", "graph_reach",
           "lowest_columns", "closed_components", "jump_chain", "stores_zero_rates", "index_dtype",
           "rate_columns",
           "MaskedTranspose", "masked_transpose"]

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
    n, last, kind = indptr.size - 1, int(indptr[-1]), indptr.dtype.type
    r = 0
    while r < n:        # (the key in indptr's own type: for any other numpy casts all of indptr, a copy a block)
        r1 = int(np.searchsorted(indptr, kind(min(int(indptr[r]) + block, last)), side="right")) - 1
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


def _compiled(A, *vectors):
    """The compiled extension if it is in use and takes ``A`` (float64 values, one index type, contiguous
    arrays) and the float64 ``vectors``; else None (the numpy fallback runs)."""
    ext = extension()
    if ext is None or A.data.dtype != np.float64 or A.indices.dtype != A.indptr.dtype \
            or A.indices.dtype not in (np.int32, np.int64):
        return None
    if not (A.data.flags.c_contiguous and A.indices.flags.c_contiguous and A.indptr.flags.c_contiguous):
        return None
    if any(v.dtype != np.float64 or not v.flags.c_contiguous for v in vectors):
        return None
    return ext


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
    ext = _compiled(A)
    if ext is not None:
        ptr = np.empty(A.shape[0] + 1, dtype=A.indptr.dtype)
        ext.select(A.indptr, A.indices, A.data, int(first), None, None, None, ptr, None, None, False)
        out = np.empty(A.shape[0], dtype=np.int64)
        return np.subtract(ptr[1:], ptr[:-1], out=out)        # (the row pointers and the counts alone)
    out = np.zeros(A.shape[0], dtype=np.int64)
    for r0, r1 in row_blocks(A.indptr):
        keep = _offdiagonal_keep(A, r0, r1, first)
        out[r0:r1] = np.diff(_kept_pointer(keep, A.indptr[r0:r1 + 1] - A.indptr[r0]))
    return out


def offdiagonal_column_counts(A: sp.csr_matrix, first: int = 0) -> np.ndarray:
    """Rates in each column of ``A`` (its rates' transpose's row counts), from ``A``'s rows.

    ``offdiagonal_counts(A.T.tocsr())`` of a square ``A`` without making the transpose.

    >>> Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 0.0, 0.0]]))
    >>> offdiagonal_column_counts(Q).tolist()
    [1, 1, 1]
    """
    out = np.zeros(A.shape[1], dtype=np.int64)
    ext = _compiled(A)
    if ext is not None:
        ext.colcount(A.indptr, A.indices, A.data, int(first), out)
        return out
    for r0, r1 in row_blocks(A.indptr):
        a, b = A.indptr[r0], A.indptr[r1]
        out += np.bincount(A.indices[a:b][_offdiagonal_keep(A, r0, r1, first)], minlength=A.shape[1])
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
    ext = _compiled(A)
    if ext is not None:                   # a count pass (the row pointer), then a fill pass
        indptr = np.empty(A.shape[0] + 1, dtype=A.indptr.dtype)
        nnz = ext.select(A.indptr, A.indices, A.data, int(first), None, None, None, indptr, None, None, False)
        indices = np.empty(nnz, dtype=A.indices.dtype)
        data = np.empty(nnz, dtype=A.data.dtype)
        ext.select(A.indptr, A.indices, A.data, int(first), None, None, None, indptr, indices, data, False)
        out = sp.csr_matrix((data, indices, indptr), shape=A.shape)
        out.has_sorted_indices = A.has_sorted_indices
        return out
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


def offdiagonal_product(A: sp.csr_matrix, x, first: int = 0, transpose: bool = False):
    """``R x`` (or ``R^T x``) for ``R`` the rates of ``A`` (:func:`offdiagonal_rows`), to the bit.

    ``R x`` sums each row's rates in stored order, like ``R @ x``; ``R^T x``
    (``transpose``, ``A`` square) adds the rates of ``A``'s rows into their
    columns, row after row: each sum takes the same terms in the same order
    as ``R.T.tocsr() @ x``, from ``A``'s own arrays (no transpose made).

    >>> Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 4.0, -4.0]]))
    >>> offdiagonal_product(Q, np.array([1.0, 2.0, 3.0])).tolist()
    [2.0, 5.0, 8.0]
    >>> offdiagonal_product(Q, np.array([1.0, 2.0, 3.0]), transpose=True).tolist()
    [4.0, 13.0, 2.0]
    """
    return _product(A, x, first, True, transpose)


def generator_product(A: sp.csr_matrix, x, transpose: bool = False):
    """``A x`` or ``A^T x`` (``transpose``) from ``A``'s rows, stored zeros and diagonal included, to the bit.

    ``A^T x`` adds each row's entries into their columns, row after row: the
    same numbers as ``A.T.tocsr() @ x`` (and as scipy's ``A.T @ x``, which
    runs the same loop), without making the transpose.

    >>> Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [2.0, -3.0, 1.0], [0.0, 4.0, -4.0]]))
    >>> generator_product(Q, np.array([1.0, 2.0, 3.0]), transpose=True).tolist()
    [3.0, 7.0, -10.0]
    """
    return _product(A, x, 0, False, transpose)


def _product(A, x, first, offdiag, transpose):
    x = np.asarray(x)
    n_out = A.shape[1] if transpose else A.shape[0]
    ext = _compiled(A)
    if ext is not None and x.dtype == np.float64 and x.ndim in (1, 2):
        if x.ndim == 1:
            y = np.empty(n_out)
            ext.product(A.indptr, A.indices, A.data, int(first), offdiag, transpose, np.ascontiguousarray(x), y)
            return y
        y = np.empty((n_out, x.shape[1]))          # column by column: each sum in the same order
        col = np.empty(n_out)
        for c in range(x.shape[1]):
            ext.product(A.indptr, A.indices, A.data, int(first), offdiag, transpose,
                        np.ascontiguousarray(x[:, c]), col)
            y[:, c] = col
        return y
    if not offdiag:
        return A.T @ x if transpose else A @ x     # scipy: A^T x by A's rows (csc_matvec), the same loop
    y = np.zeros((n_out,) + x.shape[1:], dtype=np.result_type(A.data, x))
    for r0, r1 in row_blocks(A.indptr):
        a, b = A.indptr[r0], A.indptr[r1]
        keep = _offdiagonal_keep(A, r0, r1, first)
        ptr = _kept_pointer(keep, A.indptr[r0:r1 + 1] - a)
        blk = sp.csr_matrix((A.data[a:b][keep], A.indices[a:b][keep], ptr), shape=(r1 - r0, A.shape[1]))
        if transpose:
            # y += (this block's terms, summed from 0): a sum from 0 adds its first term exactly, so the
            # running sums of y are those of one pass over every row in order
            y += blk.T @ x[r0:r1]
        else:
            y[r0:r1] = blk @ x
    return y


def rate_columns(A: sp.csr_matrix, rows, cols, first: int = 0) -> sp.csr_matrix:
    r"""The rates :math:`R_{XC}` of ``A``'s rows in ``X = rows`` (mask) and the columns ``cols``, in CSR.

    ``cols`` are sorted global column numbers; column ``k`` of the result is
    column ``cols[k]`` of ``A``. Rows outside ``X`` are empty (the result keeps
    ``A``'s row numbering: shape ``(A.shape[0], len(cols))``); the diagonal
    (column ``first + row``) and stored zeros are dropped, as in
    :func:`offdiagonal_rows`. One pass of blocks of rows; only the kept entries
    are stored (a target set's in-rates: a few per target state), so a
    rectangular block of :math:`Q` is never made dense.

    >>> Q = sp.csr_matrix(np.array([[-3.0, 1.0, 2.0], [2.0, -2.0, 0.0], [0.0, 4.0, -4.0]]))
    >>> rate_columns(Q, np.array([True, False, True]), np.array([1, 2])).toarray().tolist()
    [[1.0, 2.0], [0.0, 0.0], [4.0, 0.0]]
    """
    rows = np.asarray(rows, dtype=bool)
    cols = np.asarray(cols, dtype=np.int64)
    m = cols.size
    r_out, c_out, v_out = [], [], []
    if m and rows.any():
        for r0, r1 in row_blocks(A.indptr):
            if not rows[r0:r1].any():
                continue
            a, b = A.indptr[r0], A.indptr[r1]
            ind = A.indices[a:b].astype(np.int64, copy=False)
            rid = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(A.indptr[r0:r1 + 1]))
            pos = np.minimum(np.searchsorted(cols, ind), m - 1)
            keep = (cols[pos] == ind) & rows[rid] & (ind != rid + first) & (A.data[a:b] != 0)
            if keep.any():
                r_out.append(rid[keep])
                c_out.append(pos[keep])
                v_out.append(A.data[a:b][keep])
    cat = (lambda parts, dt: np.concatenate(parts) if parts else np.zeros(0, dtype=dt))
    out = sp.csr_matrix((cat(v_out, float), (cat(r_out, np.int64), cat(c_out, np.int64))), shape=(A.shape[0], m))
    out.sum_duplicates()
    return out


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
    members = np.ascontiguousarray(members, dtype=bool)
    diag = np.ascontiguousarray(diag, dtype=float)
    m = int(np.count_nonzero(members))
    if m == 0:
        return sp.csr_matrix((0, 0))
    n = A.shape[0]
    itype = index_dtype(A.nnz, n)
    newpos = np.cumsum(members, dtype=itype) - 1          # the new number of each member
    ext = _compiled(A)
    if ext is not None and A.shape[1] == n and diag.size == m:
        # a count pass (the row pointer; -1: a member's row stores no diagonal entry) and a fill pass
        indptr = np.empty(m + 1, dtype=itype)
        k = ext.select(A.indptr, A.indices, A.data, int(first), members, diag, newpos, indptr, None, None, True)
        if k >= 0:
            indices = np.empty(k, dtype=itype)
            data = np.empty(k)
            ext.select(A.indptr, A.indices, A.data, int(first), members, diag, newpos, indptr, indices, data, True)
            out = sp.csr_matrix((data, indices, indptr), shape=(m, m))
            out.has_sorted_indices = A.has_sorted_indices
            return out
        return _principal_block_summed(A, members, diag, first)
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
    return _principal_block_summed(A, members, diag, first)


def _principal_block_summed(A, members, diag, first):
    """:func:`principal_block` by scipy's sum (a member's row stores no diagonal entry)."""
    idx = np.flatnonzero(members)
    out = (sp.diags(diag) - offdiagonal_rows(A, idx, first)[:, idx]).tocsr()
    out.sort_indices()
    return out


def masked_block(A: sp.csr_matrix, members, fill: float):
    r""":math:`M_{XX} \oplus` ``fill`` :math:`I` in ``A``'s own numbering and pattern, for ``A`` the rows of ``Q`` (or ``Q^T``).

    The values are :math:`-A_{ij}` for :math:`i, j \in X` (``members``), 0 in the
    rows and columns of the other states, and ``fill`` on their diagonal: the
    block-diagonal matrix of :math:`M = -Q_{XX}` (of :math:`M^T` from ``Q^T``) and
    of ``fill`` times the identity. A Krylov solve with it of a right-hand side zero
    off :math:`X` computes :math:`M`'s solution on :math:`X` and zero elsewhere,
    and its Gauss-Seidel sweeps are :math:`M`'s: the block is never extracted.
    Only the values are new (8 bytes an entry); the indices and row pointers are
    ``A``'s, shared. Made in a few passes over the values, against the
    compaction of every row by :func:`principal_block` (7-13x the time on polling
    N=15). For a few states left out (a pin): ``None`` when a left-out state's row
    stores no diagonal entry. ``fill`` at most the largest :math:`|M_{ii}|` keeps
    :math:`\|\cdot\|_\infty` that of :math:`M`.

    >>> Q = sp.csr_matrix(np.array([[-3.0, 1.0, 2.0], [2.0, -2.0, 0.0], [0.0, 4.0, -4.0]]))
    >>> masked_block(Q, np.array([True, False, True]), 4.0).toarray().tolist()
    [[3.0, 0.0, -2.0], [0.0, 4.0, 0.0], [0.0, 0.0, 4.0]]
    """
    members = np.asarray(members, dtype=bool)
    data = np.negative(A.data)
    out = np.flatnonzero(~members)
    if out.size:
        data[~members[A.indices]] = 0.0
        for p in out:
            a, b = int(A.indptr[p]), int(A.indptr[p + 1])
            data[a:b] = 0.0
            k = np.flatnonzero(A.indices[a:b] == p)
            if k.size != 1:
                return None
            data[a + k[0]] = fill
    M = sp.csr_matrix((data, A.indices, A.indptr), shape=A.shape)
    M.has_sorted_indices = A.has_sorted_indices
    return M


def masked_transpose(Q: sp.csr_matrix, members, fill: float, transpose: bool = True):
    """:func:`masked_block` of ``Q^T`` (of ``Q`` with ``transpose=False``) as a :class:`MaskedTranspose` on
    ``Q``'s own rows, or None when the compiled kernels are off or do not take ``Q`` as it is (unsorted rows,
    mixed index types)."""
    ext = _compiled(Q)
    if ext is None or not getattr(ext, "tr", None) or not Q.has_sorted_indices:
        return None
    return MaskedTranspose(Q, members, fill, ext, transpose)


class MaskedTranspose:
    r"""The Krylov system :math:`A = (M_{XX} \oplus f I)^T` of :func:`masked_block` on ``Q^T``, without ``Q^T``.

    :math:`a_{ij} = -q_{ji}` for :math:`i, j \in X`, :math:`a_{jj} = f` off
    :math:`X`, 0 elsewhere: the matrix ``masked_block(Q.T.tocsr(), members, f)``
    holds (8 bytes a stored entry of new values, 4 of ``Q^T``'s indices), read
    instead from ``Q``'s rows, which are :math:`A`'s columns. What GMRES with
    SSOR(1) needs of it is compiled (``ctmc/_kernels_tr.h``), each a pass over
    ``Q``'s rows scattering into :math:`A`'s: the product ``A @ v`` (each entry
    summed in the order of a product with :math:`A`'s sorted rows: the same
    numbers), :math:`\|A\|_\infty` (:meth:`inf_norm`, rows summed in order:
    to round-off that of :func:`inf_norm`), and SSOR(1) with Eisenstat's product
    after it (:meth:`ssor`; the forward solve to the bit that of the rows, the
    backward one summed in the other order). The memory held is ``Q``'s, one
    integer a row (the diagonal's position) and one byte a row (``X``).
    Sequential (the scatters would collide between threads).

    With ``transpose=False`` it is ``masked_block(Q, members, f)`` itself (the
    return-time system of the error bound), read from ``Q``'s rows as its own:
    the product and SSOR(1) gather each row in stored order, the left-out columns
    skipped, the row kernels' numbers on that matrix to the bit; SSOR(1) with the
    product after it (Eisenstat's, the lower halves gathered once more) reads ``Q``
    1.5 times where the two apart read it twice.

    >>> Q = sp.csr_matrix(np.array([[-3.0, 1.0, 2.0], [2.0, -2.0, 0.0], [0.0, 4.0, -4.0]]))
    >>> A = masked_transpose(Q, np.array([True, False, True]), 4.0)
    >>> A is None or (A @ np.ones(3)).tolist() == (masked_block(Q.T.tocsr(), [True, False, True], 4.0)
    ...                                           @ np.ones(3)).tolist()
    True
    """

    dtype = np.dtype(float)

    def __init__(self, Q: sp.csr_matrix, members, fill: float, ext, transpose: bool = True):
        n = Q.shape[0]
        self.Q, self.shape, self.fill, self._ext = Q, Q.shape, float(fill), ext
        self._base = 0 if transpose else 4             # the kernel's modes: 0-3 of M^T, 4-6 of M
        self.keep = np.ascontiguousarray(np.asarray(members, dtype=bool).view(np.uint8))
        if self.keep.size != n:
            raise ValueError(f"members must have one entry a state ({n}), got {self.keep.size}")
        self.out = np.flatnonzero(self.keep == 0).astype(Q.indptr.dtype)
        self.dpos = np.empty(n, dtype=Q.indptr.dtype)
        ext.ssor_setup(Q.indptr, Q.indices, self.dpos)

    def _run(self, mode, v, x, y):
        Q = self.Q
        self._ext.tr(mode, Q.indptr, Q.indices, self.dpos, Q.data, self.keep, self.out, self.fill, v, x, y)
        return y

    def product(self, v, out=None) -> np.ndarray:
        """``A @ v`` for one vector, into ``out`` if given (a float array that is not ``v``)."""
        v = np.ascontiguousarray(v, dtype=float).ravel()
        return self._run(2 if self._base == 0 else 5, v, v, np.empty(self.shape[0]) if out is None else out)
    product.writes_into = True

    #: ``A @ v`` for one vector (a new array; into ``out=`` if given)
    dot = product
    __matmul__ = product

    def inf_norm(self) -> float:
        r""":math:`\max_i \sum_j |a_{ij}|` (0 for no rows)."""
        n = self.shape[0]
        if n == 0:
            return 0.0
        z = np.zeros(n)
        return float(self._run(3 if self._base == 0 else 6, z, z, np.empty(n)).max())

    def ssor(self):
        """SSOR(1) of ``A`` as :func:`ctmc._relax.symmetric_gauss_seidel` gives it for one block: ``v -> P v``
        (writes into ``out=``), with ``with_product = (self, f)``, ``f(v, x, y)`` making ``x = P v``,
        ``y = A x`` in one kernel."""
        from .._relax import writes_into
        n = self.shape[0]
        scratch = []                # M^T's SSOR alone needs one vector of scratch: made on its first use (the
        # fused product, all the Krylov solves run, needs none)

        def apply(v, out=None):
            x = np.empty(n) if out is None else out
            if self._base == 0 and not scratch:
                scratch.append(np.empty(n))
            self._run(self._base, np.ascontiguousarray(v, dtype=float).ravel(), x, scratch[0] if scratch else x)
            return x
        fused = 1 if self._base == 0 else 7

        def and_product(v, x, y):
            return self._run(fused, np.ascontiguousarray(v, dtype=float).ravel(), x, y)
        apply.with_product = (self, and_product)
        return writes_into(apply)

    def ilu0(self):
        r"""ILU(0) of the system on ``Q``'s pattern, as :meth:`ssor` gives SSOR(1), or None where a pivot is
        not positive (not an M-matrix there: SSOR(1) serves instead).

        :math:`M = \mathrm{masked}(-Q) \approx L U` row by row with no fill outside
        ``Q``'s stored pattern (``ctmc/_kernels_ilu.h``; 8 bytes a stored entry and
        one a state): ``v -> (L U)^{-1} v`` for ``M``, and for ``A = M^T`` its
        transpose ``v -> L^{-T} U^{-T} v`` (the ILU(0) of ``M^T``, which is
        unique, is the transposed factor), with the product ``A x`` made in the
        same backward pass (``with_product``, as :meth:`ssor`)."""
        from .._relax import writes_into
        Q, n = self.Q, self.shape[0]
        lu, dinv = np.empty(Q.data.size), np.empty(n)
        if self._ext.ilu0(0, Q.indptr, Q.indices, self.dpos, Q.data, self.keep, self.out, self.fill, lu, dinv,
                          dinv, dinv, dinv, dinv) >= 0:
            return None
        scratch = np.empty(n)

        def run(mode, v, x, y):
            v = np.ascontiguousarray(v, dtype=float).ravel()
            self._ext.ilu0(mode, Q.indptr, Q.indices, self.dpos, Q.data, self.keep, self.out, self.fill, lu, dinv,
                           v, x, y, scratch)
            return x

        def apply(v, out=None):
            x = np.empty(n) if out is None else out
            return run(1 if self._base == 0 else 3, v, x, scratch)
        if self._base == 0:
            def and_product(v, x, y):
                run(2, v, x, y)
                return y
            apply.with_product = (self, and_product)
        return writes_into(apply)


def inf_norm(A: sp.csr_matrix) -> float:
    r""":math:`\max_i \sum_j |A_{ij}|` without a copy of ``A``: ``abs(A).sum(axis=1).max()`` to round-off.

    Each row is summed as ``np.add.reduceat`` sums it (its first entry plus
    numpy's pairwise sum of the others), compiled or a block at a time in
    numpy: the same number both ways. (scipy's ``sum(axis=1)`` of a CSR
    matrix adds a row's entries in order instead: it differs in the last
    bits on rows of three entries or more.)

    >>> inf_norm(sp.csr_matrix(np.array([[1.0, -2.0], [0.5, 0.0]])))
    3.0
    """
    ext = _compiled(A)
    if ext is not None:                  # the same sums (numpy's pairwise order), rows split among threads
        return ext.absmax(A.indptr, A.data)
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


def graph_reach(A: sp.csr_matrix, seeds, within=None, skip_zeros: bool = False) -> np.ndarray:
    """States joined to a seed by a path along ``A``'s rows (row ``i`` lists where ``i`` leads), as a mask.

    Every stored entry is an edge; with ``skip_zeros``, stored zeros are not
    (a user's generator may store zero rates: see :func:`stores_zero_rates`).
    With ``within``, the path's states but the seed lie in ``within``.

    Compiled: one breadth-first search from every seed at once, on ``A``
    itself. Fallback: one search per seed not yet reached, on ``A`` itself
    (no copy: seeds of one communicating class need one search); with
    ``within``, or when the seeds are many and scattered, one search from a
    virtual root joined to every seed, on a filtered copy of the pattern
    (and of ``A`` without its stored zeros, if it has some and ``skip_zeros``).

    >>> A = sp.csr_matrix(np.array([[0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 0], [1, 0, 0, 0]], dtype=float))
    >>> graph_reach(A, np.array([False, False, False, True])).tolist()
    [True, True, True, True]
    >>> graph_reach(A, np.array([True, False, False, False]), within=np.array([True, False, True, True])).tolist()
    [True, False, False, False]
    """
    n = A.shape[0]
    seeds = np.asarray(seeds, dtype=bool)
    ext = _compiled(A)
    if ext is not None:
        mark = seeds.copy()
        ext.reach(A.indptr, A.indices, A.data if skip_zeros else None, mark,
                  None if within is None else np.ascontiguousarray(within, dtype=bool))
        return mark
    if skip_zeros and stores_zero_rates(A):
        A = A.copy()                         # (the fallback alone: the compiled search skips them in place)
        A.eliminate_zeros()
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


def lowest_columns(A: sp.csr_matrix, first: int = 0, out=None, transpose: bool = False) -> np.ndarray:
    """``min(first + i, the smallest column of a non-zero entry of row i)`` for each row ``i`` of ``A`` (int64).

    With ``A`` the rows of ``Q`` and of ``Q^T``, the smaller of the two is
    the first column of row ``i`` of the symmetrised pattern (the envelope of
    :func:`ctmc.kernels.plan.structure_facts`). ``out`` (int64, one entry a row,
    optional): lowered in place to the smaller of its own entry and the row's, and
    returned: the two orientations' minimum in one vector. ``transpose`` (``A``
    square, ``first`` 0): those of ``A^T``'s rows, read from ``A``'s (the smallest
    row of a non-zero entry of each column; the transpose is not made).

    >>> A = sp.csr_matrix(np.array([[0.0, 0.0, 1.0], [1.0, -1.0, 0.0], [0.0, 0.0, 0.0]]))
    >>> lowest_columns(A).tolist()
    [0, 0, 2]
    >>> lowest_columns(A, out=np.array([1, 2, 1])).tolist()
    [1, 0, 1]
    >>> lowest_columns(A, transpose=True).tolist() == lowest_columns(A.T.tocsr()).tolist() == [0, 1, 0]
    True
    """
    if transpose and (first != 0 or A.shape[0] != A.shape[1]):
        raise ValueError(f"transpose: A must be square and first 0, got shape {A.shape} and first {first}")
    if out is None:
        low = np.arange(first, first + A.shape[0], dtype=np.int64)
    else:
        low = out
        if low.dtype != np.int64 or low.shape != (A.shape[0],):
            raise ValueError(f"out: expected int64 of one entry a row ({A.shape[0]}), got {low.dtype} {low.shape}")
    ext = _compiled(A)
    if ext is not None:
        ext.lowcols(A.indptr, A.indices, A.data, low, transpose)
        return low
    if transpose:
        for r0, r1 in row_blocks(A.indptr):           # each column's least row: minima scattered by blocks
            a, b = A.indptr[r0], A.indptr[r1]
            keep = A.data[a:b] != 0
            rows = np.repeat(np.arange(r0, r1, dtype=np.int64), np.diff(A.indptr[r0:r1 + 1]))
            np.minimum.at(low, A.indices[a:b][keep], rows[keep])
        return low
    lead = np.flatnonzero(np.diff(A.indptr))                 # non-empty rows
    if lead.size:
        if A.has_sorted_indices and np.all(A.data != 0):
            cols = A.indices[A.indptr[lead]]
        else:
            cols = np.minimum.reduceat(np.where(A.data != 0, A.indices, first + A.shape[0]), A.indptr[lead])
        low[lead] = np.minimum(low[lead], cols)
    return low


def closed_components(A: sp.csr_matrix, skip_zeros: bool = False) -> tuple:
    """``(labels, closed)``: the strongly connected components of the graph of ``A``'s rows (square; an edge
    ``i -> j`` for each stored entry off the diagonal, not the stored zeros with ``skip_zeros``) and which of
    them no edge leaves (bool, one entry a component): the closed classes of a generator from its rows.

    ``labels`` of ``A``'s index type. Compiled: Pearce's variant of Tarjan's search on ``A`` itself, its work
    four integers of that type and one byte a row. Fallback: scipy's
    :func:`~scipy.sparse.csgraph.connected_components` on a copy of the pattern. The labels' numbering
    differs between the two; the components do not.

    >>> A = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [0.0, -1.0, 1.0], [0.0, 1.0, -1.0]]))
    >>> labels, closed = closed_components(A)
    >>> [np.flatnonzero(labels == c).tolist() for c in np.flatnonzero(closed)]
    [[1, 2]]
    """
    n = A.shape[0]
    if A.shape[1] != n:
        raise ValueError(f"A: expected a square matrix, got shape {A.shape}")
    ext = _compiled(A)
    if ext is not None and getattr(ext, "scc", None) is not None:
        labels = np.empty(n, dtype=A.indptr.dtype)
        closed = np.empty(n, dtype=bool)
        k = ext.scc(A.indptr, A.indices, A.data if skip_zeros else None, labels, closed)
        return labels, closed[:k].copy()
    keep = (A.data != 0) if skip_zeros else np.ones(A.nnz, dtype=bool)
    rows = np.repeat(np.arange(n), np.diff(A.indptr))
    keep &= A.indices != rows                                    # (a copy: A's own arrays are not touched)
    P = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.int8), (rows[keep], A.indices[keep])), shape=A.shape)
    k, labels = connected_components(P, directed=True, connection="strong")
    coo = P.tocoo()
    closed = np.ones(k, dtype=bool)
    closed[labels[coo.row[labels[coo.row] != labels[coo.col]]]] = False
    return labels.astype(A.indptr.dtype, copy=False), closed


def jump_chain(G, first: int, q, s: int, u, path) -> int:
    """Jumps of the chain of ``G``'s rows from row ``s``, one per draw ``u[k]`` in ``[0, 1)``; returns their number.

    ``path[k]`` is the row before jump ``k``. The next state is the column of
    the first entry whose running sum ``c`` of the row's entries (numpy's
    cumsum, in stored order, the diagonal ``first + s`` weighing 0) exceeds
    ``u[k] * c[-1]``, or of the last entry, moved back past entries that add
    nothing to ``c``: the state ``j`` with probability ``R_sj / q_s``. Stops
    early (returns ``k < len(u)``) at a row ``path[k]`` without rates out
    (``q <= 0`` or no entry). The walk of
    :func:`ctmc.kernels.classes.walk_pin`; compiled when the extension is in
    use, else the same rule in Python (the same path).

    >>> import scipy.sparse as sp
    >>> Q = sp.csr_matrix(np.array([[-1.0, 1.0, 0.0], [1.0, -3.0, 2.0], [0.0, 0.0, 0.0]]))
    >>> path = np.empty(5, dtype=np.int64)
    >>> k = jump_chain(Q, 0, np.array([1.0, 3.0, 0.0]), 0, np.array([0.5, 0.2, 0.9, 0.9, 0.5]), path)
    >>> k, path[:k + 1].tolist()                  # 0 -> 1 -> 0 -> 1 -> 2, which has no rate out
    (4, [0, 1, 0, 1, 2])
    """
    ext = _compiled(G)
    u = np.ascontiguousarray(u, dtype=float)
    if ext is not None:
        return ext.walk(G.indptr, G.indices, G.data, int(first), q, int(s), u, path)
    # every row's running sums at once, as numpy's cumsum of each row gives them (c[a] = w[a], then
    # c[e] = c[e - 1] + w[e]: one vectorised step per position in the rows), then the walk on them
    lens = np.diff(G.indptr)
    own = np.repeat(np.arange(first, first + lens.size, dtype=G.indices.dtype), lens)
    w = np.where(G.indices == own, 0.0, G.data)
    del own
    c = w.copy()
    rows = np.flatnonzero(lens > 1)
    k = 1
    while rows.size:
        at = G.indptr[rows] + k
        c[at] = c[at - 1] + w[at]
        k += 1
        rows = rows[lens[rows] > k]
    del w
    indptr, indices, cm = memoryview(G.indptr), memoryview(G.indices), memoryview(c)
    qm, um, pm = memoryview(np.ascontiguousarray(q, dtype=float)), memoryview(u), memoryview(path)
    for k in range(u.size):
        pm[k] = s
        a, b = indptr[s], indptr[s + 1]
        if b == a or not qm[s] > 0:
            return k
        j = min(bisect.bisect_right(cm, um[k] * cm[b - 1], a, b), b - 1)
        while j > a and not cm[j] > cm[j - 1]:
            j -= 1
        s = indices[j] - first
    return u.size
