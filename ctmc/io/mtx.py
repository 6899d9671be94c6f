"""Matrix Market: :func:`write_mtx` and :func:`read_mtx`, the generator alone.

Written through :func:`scipy.io.mmwrite`; read here, with the number rule
and the line-numbered messages of every reader of :mod:`ctmc.io` and the
size line checked against the entries before anything of its size is made.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..chain import CTMC
from ._common import (BLANKS, PathLike, decode, fail, fast_triples, fields, parse_count, parse_float,
                      parse_int, read_bytes, split_lines)

__all__ = ["write_mtx", "read_mtx"]


def write_mtx(chain: CTMC, path: PathLike) -> Path:
    """Write the generator ``Q`` in Matrix Market coordinate format.

    Only the matrix is written (no states, labels or rewards: use
    :func:`save_npz` or :func:`write_prism` for those).

    Examples
    --------
    >>> import os, tempfile, ctmc, ctmc.io
    >>> chain = ctmc.CTMC.from_rates([[0, 2.0], [1.0, 0]])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     back = ctmc.io.read_mtx(ctmc.io.write_mtx(chain, os.path.join(d, "two.mtx")))
    >>> back.Q.toarray()
    array([[-2.,  2.],
           [ 1., -1.]])
    """
    import scipy.io
    p = Path(path)
    scipy.io.mmwrite(str(p), chain.Q.tocoo(),
                     comment="generator Q of a CTMC (rows sum to 0), written by ctmc",
                     field="real", symmetry="general")
    if not p.exists() and p.with_name(p.name + ".mtx").exists():
        p = p.with_name(p.name + ".mtx")
    return p


_BANNER = re.compile(r"%%MatrixMarket[ \t]+matrix[ \t]+(coordinate|array)[ \t]+(real|double|integer)"
                     r"[ \t]+(general|symmetric)", re.IGNORECASE)


def _entries(data: bytes, path):
    """``(n, rows, cols, values, line of each entry or None)`` of a Matrix Market file, 0-based.

    The banner, the ``%`` comments and the size line are read first; the
    size line must agree with the entries (``nnz`` lines, or ``n * n`` values
    for the array format) and, in the coordinate format, ``n <= 2 nnz + 1``
    (``nnz`` entries touch at most that many states) before anything of
    size ``n`` is made.
    """
    pos, k, banner, size = 0, 0, None, None
    while size is None:
        if pos >= len(data):
            raise fail(path, None, "no size line: the file ends in its header")
        end = data.find(b"\n", pos)
        end = len(data) if end < 0 else end
        k += 1
        line = decode(data[pos:end], path, k).strip(BLANKS)
        pos = end + 1
        if k == 1:
            banner = _BANNER.fullmatch(line)
            if not banner:
                raise fail(path, 1, "expected a banner '%%MatrixMarket matrix coordinate|array "
                           f"real|double|integer general|symmetric', got {line!r}")
        elif line and not line.startswith("%"):
            size = (k, fields(line))
    layout, symmetric = banner.group(1).lower(), banner.group(3).lower() == "symmetric"
    ks, t = size
    if len(t) != (3 if layout == "coordinate" else 2):
        raise fail(path, ks, f"expected a size line '{'M N NNZ' if layout == 'coordinate' else 'M N'}', "
                   f"got {' '.join(t)!r}")
    n = parse_count(t[0], path, ks, "rows", lo=1)
    if parse_count(t[1], path, ks, "columns", lo=1) != n:
        raise fail(path, ks, f"a generator is square: got {t[0]} x {t[1]}")
    body = data[pos:]
    if layout == "array":
        return _array(body, path, ks, n)
    nnz = parse_count(t[2], path, ks, "entries")
    if n > 2 * nnz + 1:
        raise fail(path, ks, f"{n} states for {nnz} entries: they touch at most {2 * nnz + 1} states")
    got = fast_triples(body)
    if got is not None and got[0].size == nnz and ((got[0] >= 1) & (got[0] <= n) & (got[1] >= 1)
                                                     & (got[1] <= n) & np.isfinite(got[2])).all():
        rows, cols, vals, lines = got[0] - 1, got[1] - 1, got[2], ks + 1 + np.arange(nnz)
    else:
        rows, cols, vals, lines = [], [], [], []
        for kk, line in _body_lines(body, path, ks + 1):
            tt = fields(line)
            if len(tt) != 3:
                raise fail(path, kk, f"expected an entry 'i j value', got {line!r}")
            rows.append(parse_int(tt[0], path, kk, "row", 1, n) - 1)
            cols.append(parse_int(tt[1], path, kk, "column", 1, n) - 1)
            vals.append(_finite(tt[2], path, kk))
            lines.append(kk)
        if len(rows) != nnz:
            raise fail(path, ks, f"the size line announces {nnz} entries, the file has {len(rows)}")
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        vals, lines = np.asarray(vals, dtype=float), np.asarray(lines)
    key = rows * n + cols
    order = np.argsort(key, kind="stable")
    twice = np.flatnonzero(key[order][1:] == key[order][:-1])
    if twice.size:
        a = int(order[twice[0] + 1])
        raise fail(path, int(lines[a]), f"entry ({rows[a] + 1}, {cols[a] + 1}) is given twice")
    if symmetric:
        if (rows < cols).any():
            a = int(np.flatnonzero(rows < cols)[0])
            raise fail(path, int(lines[a]), "a symmetric file lists the lower triangle only (i >= j)")
        off = rows != cols
        rows, cols, vals = (np.concatenate([rows, cols[off]]), np.concatenate([cols, rows[off]]),
                            np.concatenate([vals, vals[off]]))
    return n, rows, cols, vals


def _body_lines(body: bytes, path, first: int):
    """The data lines of the part of the file after the size line (``%`` comments and blanks skipped)."""
    for k, line in enumerate(split_lines(decode(body, path, first)), start=first):
        s = line.strip(BLANKS)
        if s and not s.startswith("%"):
            yield k, s


def _finite(tok: str, path, k) -> float:
    """A finite number (an entry of the matrix)."""
    x = parse_float(tok, path, k, "value")
    if not np.isfinite(x):
        raise fail(path, k, f"value must be finite, got {tok}")
    return x


def _array(body: bytes, path, ks: int, n: int):
    """The array format: ``n * n`` values, column by column, one a line."""
    vals = []
    for k, line in _body_lines(body, path, ks + 1):
        if len(vals) == n * n:
            raise fail(path, k, f"more than the {n * n} values the size line announces")
        vals.append(_finite(line, path, k))
    if len(vals) != n * n:
        raise fail(path, ks, f"the size line announces {n * n} values, the file has {len(vals)}")
    A = np.asarray(vals, dtype=float).reshape((n, n), order="F")
    rows, cols = np.nonzero(A)
    return n, rows, cols, A[rows, cols]


def read_mtx(path: PathLike, *, rates: bool = False) -> CTMC:
    """Read a chain from a Matrix Market file holding its generator.

    Parameters
    ----------
    path : path
    rates : bool, default False
        The file holds a matrix of rates (the diagonal is ignored, as in
        :meth:`ctmc.CTMC.from_rates`) rather than a generator.

    Raises
    ------
    ValueError
        If the file cannot be read, is malformed (naming the file and the
        line: the numbers follow the rule of every reader of
        :mod:`ctmc.io`, an entry may be given once, the size line must agree
        with the entries) or its matrix is not a generator. Real and integer
        matrices, coordinate or array, general or symmetric, are read.
    """
    n, rows, cols, vals = _entries(read_bytes(path), path)
    A = sp.csr_matrix((vals, (rows, cols)), shape=(n, n))
    try:
        if rates:
            return CTMC.from_rates(A)
        return CTMC(A)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
