r"""Numbering and assembly: code -> index maps, and a generator from transition triplets.

The states of a chain are numbered by increasing code (:mod:`ctmc.encoding`).
While a search runs, :class:`DenseIndex` (one array over the box) or
:class:`CodeIndex` (sorted runs, for a box too large for memory) map a code to
its discovery index. :func:`assemble` turns triplets :math:`(i, j, r)` into
rows of a generator,

.. math::

    Q_{ij} = \sum_{(i, j, r)} r \quad (i \ne j), \qquad Q_{ii} = -\sum_{j \ne i} Q_{ij},

the duplicates summed in the order given (the order of the events), so that
the rows are the compiled builder's to the bit.
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["assemble", "DenseIndex", "CodeIndex"]


def assemble(src, dst, rate, shape, first=0):
    """Rows ``first:first + shape[0]`` of a generator, CSR, from transition triplets.

    Duplicates (events of one state leading to the same state) are summed in
    the order given (the order of the events, for a chain without immediate
    moves: the compiled builder's order); the diagonal (column ``first +
    row``) is minus the row sum. scipy sums duplicates after sorting each
    row, stably in rows of at most 16 entries (its sort is then an insertion
    sort) but not in longer ones: their duplicates are summed here first, in
    order, so that every row's sums are the compiled builder's to the bit.
    """
    m, n = shape
    counts = np.bincount(src, minlength=m) if src.size else np.zeros(m, np.int64)
    long = counts > 16
    if long.any():
        sel = long[src]
        key = src[sel] * np.int64(n) + dst[sel]
        uniq, inv = np.unique(key, return_inverse=True)
        sums = np.zeros(uniq.size)
        np.add.at(sums, inv, rate[sel])                  # in the order given
        src = np.concatenate([src[~sel], uniq // n])
        dst = np.concatenate([dst[~sel], uniq % n])
        rate = np.concatenate([rate[~sel], sums])
    off = sp.csr_matrix((rate, (src, dst)), shape=shape)
    off.sum_duplicates()
    out = np.asarray(off.sum(axis=1)).ravel()
    diag = sp.csr_matrix((-out, (np.arange(m), np.arange(first, first + m))), shape=shape)
    Q = (off + diag).tocsr()
    Q.sort_indices()
    return Q


class DenseIndex:
    """Code -> index in one array over the whole box (-1: not seen): O(1) per lookup."""

    def __init__(self, box):
        self.table = np.full(box, -1, dtype=np.int64)

    def add(self, codes, idx):
        self.table[codes] = idx

    def lookup(self, q):
        return self.table[q]


class CodeIndex:
    """Sorted runs of (code, index) merged like a binary counter (LSM style).

    Lookup costs one ``searchsorted`` per run (O(log n) runs); insertion is
    amortised O(log n) per code.
    """

    def __init__(self):
        self.runs: list = []

    def add(self, codes, idx):
        if codes.size == 0:
            return
        o = np.argsort(codes, kind="stable")
        self.runs.append((codes[o], np.asarray(idx)[o]))
        while len(self.runs) >= 2 and self.runs[-1][0].size >= self.runs[-2][0].size // 2:
            (c2, i2), (c1, i1) = self.runs.pop(), self.runs.pop()
            c = np.concatenate([c1, c2])
            i = np.concatenate([i1, i2])
            o = np.argsort(c, kind="stable")
            self.runs.append((c[o], i[o]))

    def lookup(self, q):
        res = np.full(q.shape, -1, dtype=np.int64)
        for c, i in self.runs:
            pos = np.searchsorted(c, q)
            pos[pos >= c.size] = c.size - 1
            hit = c[pos] == q
            res[hit] = i[pos[hit]]
        return res
