r"""Local sparse kernels in compiled code, for any backend: sweeps, SSOR(1), products.

The stationary iterations (Gauss-Seidel, SOR) and the tail polish sweep the
rows a process owns; the sweep itself is plain local linear algebra, done by
the extension's kernel ``gs`` when it is built (:func:`sweep`; pyamg's
arithmetic, the GIL released), else by pyamg's compiled CSR Gauss-Seidel/SOR
kernels, the same numbers to the bit (about 1e8 entries per second, against
about 1e6 for a Python-level triangular solve).

The Krylov solvers need two more local kernels, taken from the optional C
extension ``ctmc._kernels`` when it is built (:func:`compiled`):

* :func:`symmetric_gauss_seidel`, SSOR(1) with :math:`A = D - L - U`:
  :math:`v \mapsto (D-U)^{-1} D (D-L)^{-1} v`. With sorted rows and the
  position of each row's diagonal, the forward solve reads the entries of
  row :math:`i` before its diagonal and the backward solve those after it:
  each triangle is read once, and no copy of the matrix is made (the
  fallback, pyamg's sweeps on the two triangles, copies them once);
* :func:`spmv`, :math:`v \mapsto Av` with the rows split among the threads
  (scipy's product uses one).

The extension's threads (OpenMP; :func:`set_threads`, by default the cores
this process may run on, or ``CTMC_THREADS``) never change a result: its
reductions are made per fixed block of rows and summed in block order. They
wait for work asleep (``OMP_WAIT_POLICY=PASSIVE`` unless set otherwise).
``CTMC_KERNELS=0`` in the environment, or :func:`use_compiled`, selects the
fallbacks (the same algorithms, equal to round-off).
"""
from __future__ import annotations

import os

import numpy as np
import scipy.sparse as sp

from ._util import cores

__all__ = ["sweep", "sweep_rows", "one_index_type", "symmetric_gauss_seidel", "spmv", "product", "product_rows",
           "product_listed",
           "compiled", "use_compiled",
           "extension", "set_threads", "threads", "into", "writes_into", "ssor_blocks", "block_bounds",
           "SSOR_BLOCKS"]

# OpenMP's threads wait for work asleep, not spinning, unless the user chose otherwise: on a machine
# shared with other jobs, spinning threads took the cores the others (and the serial Python between
# the kernels) needed; measured on kanban:4, GMRES with 2 threads went from 52 to 25 ms an iteration.
# (Read by the OpenMP runtime when it loads, with the extension below.)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
try:
    import ctmc._kernels as _ext           # the extension module (optional: built where a compiler is)
except ImportError:
    _ext = None

_STATE = {"on": _ext is not None and os.environ.get("CTMC_KERNELS", "1") != "0"}


def _default_threads() -> int:
    env = os.environ.get("CTMC_THREADS")
    return max(1, int(env)) if env else cores()


def compiled() -> bool:
    """Whether the compiled kernels are built and in use (see :func:`use_compiled`)."""
    return _STATE["on"]


def use_compiled(on: bool) -> bool:
    """Use the compiled kernels (``on``, if they are built) or the fallbacks; returns the previous choice.

    The choice applies to the preconditioners, products and GMRES solves set up after it.

    >>> before = use_compiled(False); compiled()
    False
    >>> _ = use_compiled(before)
    """
    before = _STATE["on"]
    _STATE["on"] = bool(on) and _ext is not None
    return before


def extension():
    """The compiled extension ``ctmc._kernels`` if it is in use, else None."""
    return _ext if _STATE["on"] else None


def set_threads(t: int) -> int:
    """Let the compiled kernels use ``t`` threads; returns the count in effect (1 without OpenMP)."""
    return _ext.set_threads(int(t)) if _ext is not None else 1


def threads() -> int:
    """The threads of the compiled kernels (1 if they are not built or have no OpenMP)."""
    return _ext.get_threads() if _ext is not None else 1


if _ext is not None:
    set_threads(_default_threads())


def one_index_type(A: sp.csr_matrix) -> sp.csr_matrix:
    """``A`` with ``indices`` and ``indptr`` of one integer type, which the compiled kernels take.

    ``A`` itself when they agree; else a new matrix of its own arrays (one index
    type, as scipy's constructor chooses it; a copy of the values: sorting it in
    place never touches ``A``).
    Callers that sweep one matrix many times convert it once with this, so
    :func:`sweep` finds nothing to convert.

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.eye(2)); A.indptr = A.indptr.astype(np.int64)
    >>> B = one_index_type(A); (B.indices.dtype == B.indptr.dtype, np.shares_memory(B.data, A.data))
    (True, False)
    """
    if A.indices.dtype == A.indptr.dtype:
        return A
    return sp.csr_matrix((A.data.copy(), A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)


def sweep(A: sp.csr_matrix, x: np.ndarray, b: np.ndarray, omega: float = 1.0, direction: str = "forward"):
    """One Gauss-Seidel (``omega = 1``) or SOR sweep on ``A x = b``, in place.

    Parameters
    ----------
    A : scipy.sparse.csr_matrix, float64, non-zero diagonal
        Square, or the leading rows of a square matrix (its columns all of them): only those
        rows are swept, the other entries of ``x`` are read where the rows reach them.
    x : ndarray of float64, contiguous (updated in place), one entry a column
    b : ndarray of float64, at least one entry a row
    omega : float
    direction : {"forward", "backward"}

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[4.0, -1.0], [-1.0, 4.0]])); x = np.zeros(2)
    >>> for _ in range(30): sweep(A, x, np.array([3.0, 3.0]))
    >>> np.round(x, 12)
    array([1., 1.])
    """
    n = A.shape[0]
    A = one_index_type(A)
    ext = extension()
    if ext is not None and A.dtype == np.float64 and x.dtype == np.float64 and x.flags.c_contiguous:
        # the compiled sweep (pyamg's arithmetic, the GIL released, 32- or 64-bit indices)
        ext.gs(A.indptr, A.indices, A.data, x, np.ascontiguousarray(b, dtype=float), float(omega),
               direction != "forward")
        return
    from pyamg import amg_core

    start, stop, step = (0, n, 1) if direction == "forward" else (n - 1, -1, -1)
    if omega == 1.0:
        amg_core.gauss_seidel(A.indptr, A.indices, A.data, x, b, start, stop, step)
    else:
        amg_core.sor_gauss_seidel(A.indptr, A.indices, A.data, x, b, start, stop, step, omega)


def sweep_rows(A: sp.csr_matrix, x: np.ndarray, b: np.ndarray, rows: np.ndarray, direction: str = "forward",
               listed: bool = False):
    """One Gauss-Seidel sweep on ``A x = b`` over the rows ``rows`` only, in their order (``"forward"``) or
    its reverse, in place; the other entries of ``x`` are left as they are and read as they stand.

    The sweep of a permuted copy of ``A`` (rows and columns in the order ``rows``), without the copy:
    the same updates, each row's terms summed in ``A``'s stored order (pyamg's ``gauss_seidel_indexed``,
    the fallback, to the bit). ``rows`` int32 or int64 (taken as they are: no copy of the order). With
    ``listed``, ``b`` has one entry a listed row (``b[t]`` for row ``rows[t]``: no vector of every row).

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[4.0, -1.0, 0.0], [-1.0, 4.0, 0.0], [0.0, 0.0, 1.0]])); x = np.zeros(3)
    >>> for _ in range(30): sweep_rows(A, x, np.array([3.0, 3.0, 5.0]), np.array([1, 0]))
    >>> np.round(x, 12)                              # row 2 not swept
    array([1., 1., 0.])
    """
    A = one_index_type(A)
    rows = np.asarray(rows)
    rows = np.ascontiguousarray(rows, dtype=rows.dtype if rows.dtype in (np.int32, np.int64) else np.int64)
    b = np.ascontiguousarray(b, dtype=float)
    if x.shape != (A.shape[0],) or b.shape != (rows.shape if listed else x.shape) or rows.ndim != 1:
        raise ValueError(f"sweep_rows: x of shape ({A.shape[0]},), b of x's shape (listed: of rows'), "
                         "rows one-dimensional")
    ext = extension()
    if ext is not None and A.dtype == np.float64 and x.dtype == np.float64 and x.flags.c_contiguous:
        ext.gs_rows(A.indptr, A.indices, A.data, x, b, rows, 1.0, direction != "forward", bool(listed))
        return
    from pyamg import amg_core

    if rows.size and (rows.min() < 0 or rows.max() >= A.shape[0]):
        raise ValueError("sweep_rows: a row number out of range")
    if listed:
        b, listed_b = np.zeros(A.shape[0]), b
        b[rows] = listed_b
    m = rows.size
    start, stop, step = (0, m, 1) if direction == "forward" else (m - 1, -1, -1)
    amg_core.gauss_seidel_indexed(A.indptr, A.indices, A.data, x, b, rows.astype(A.indptr.dtype),
                                  start, stop, step)


def _canonical(A) -> sp.csr_matrix:
    """``A`` as a float CSR matrix with sorted rows, no duplicates, one index type; a copy only if needed."""
    S = one_index_type(sp.csr_matrix(A, dtype=float))
    if not S.has_canonical_format:
        if np.may_share_memory(S.data, getattr(A, "data", None)):
            S = S.copy()                    # sort a copy: the caller's arrays stay as they are
        S.sum_duplicates()
    return S


#: row blocks of the block SSOR(1) (:func:`symmetric_gauss_seidel`): a constant, never the thread count,
#: so that the threads never change a result
SSOR_BLOCKS = 16
#: rows from which :func:`symmetric_gauss_seidel` cuts the rows into :data:`SSOR_BLOCKS` blocks by default:
#: never (None). Measured on the gallery (benchmarks/README.md, "block SSOR"), the couplings the blocks lag
#: cost more GMRES iterations than the second core saves (kanban:4 44 -> 50 iterations with 2 blocks, 88
#: with 16; fms:6 50 -> 84, 150), so the sequential SSOR(1) stays the default on every size.
SSOR_BLOCKED_FROM = None


def ssor_blocks(n: int) -> int:
    """The row blocks :func:`symmetric_gauss_seidel` takes by default for ``n`` rows (1: the sequential SSOR(1)).

    A rule of the size alone (not of the threads: the preconditioner, and so
    every result, is the same on any number of threads); see :data:`SSOR_BLOCKED_FROM`.

    >>> ssor_blocks(1000)
    1
    """
    return SSOR_BLOCKS if SSOR_BLOCKED_FROM is not None and n >= SSOR_BLOCKED_FROM else 1


def block_bounds(indptr: np.ndarray, blocks: int) -> np.ndarray:
    """Row boundaries ``0 = b_0 <= ... <= b_blocks = n`` cutting a CSR matrix into blocks of about equal stored entries.

    >>> block_bounds(np.array([0, 3, 4, 5, 6, 7, 8]), 2)   # rows 0-1 and 2-5: 4 entries each
    array([0, 2, 6])
    """
    indptr = np.asarray(indptr)
    n, nnz = indptr.size - 1, int(indptr[-1])
    b = np.searchsorted(indptr, nnz * np.arange(blocks + 1, dtype=np.int64) // blocks, side="left")
    b[0], b[-1] = 0, n
    return np.maximum.accumulate(np.minimum(b, n)).astype(indptr.dtype)


def symmetric_gauss_seidel(A, blocks=None):
    r"""SSOR(1) of ``A``: ``v -> (D - U)^{-1} D (D - L)^{-1} v`` (see :func:`ctmc.backends.scipy_backend.ssor1`), by blocks of rows.

    With ``blocks = 1``, the sequential SSOR(1). With ``blocks = k > 1``,
    block SSOR(1) on ``k`` fixed blocks of consecutive rows
    (:func:`block_bounds`): with :math:`A_B` the block diagonal part of
    :math:`A` and :math:`A_o = A - A_B`,

    .. math:: t = \operatorname{tril}(A_B)^{-1} v, \qquad
              P v = \operatorname{triu}(A_B)^{-1} (D - A_o)\, t,

    the forward and backward Gauss-Seidel solves inside each block, the
    couplings between blocks taken from the forward solve (Jacobi between
    the blocks, Gauss-Seidel inside, the "hybrid" Gauss-Seidel of parallel
    multigrid smoothers; Baker, Falgout, Kolev & Yang, *SIAM J. Sci. Comput.*
    33, 2011). One block gives SSOR(1) itself. The blocks of each solve are
    independent, so the compiled kernel shares them among the threads; their
    number is fixed (:func:`ssor_blocks`, by the size only), so the operator
    (a fixed linear map, as GMRES needs) does not depend on the threads.
    ``blocks=None`` takes :func:`ssor_blocks`.

    The compiled sequential one also offers the product after it,
    ``apply.with_product = (A, f)`` with ``f(v, x, y)`` making ``x = P v``
    and ``y = A x`` at once (Eisenstat, *SIAM J. Sci. Stat. Comput.* 2,
    1981): with :math:`x_1 = (D-L)^{-1}v`, :math:`(D-U)x = Dx_1` gives
    :math:`Ax = Dx_1 - Lx`, a product with the lower triangle only (half
    the reads of :math:`Ax`, on the threads); :func:`ctmc.krylov.gmres`
    uses it when its product is that same matrix ``A``.

    Compiled: the solves on ``A``'s own arrays (sorted rows; a
    sorted copy only if they are not), with each row's diagonal position
    (one integer a row; the diagonal is read where it is stored), and for
    blocks one scratch vector. Fallback: pyamg's sweeps on the lower and
    upper triangles of the blocks (copied once) and a product with
    :math:`A_o`. A zero diagonal entry leaves its unknown at 0.
    Takes a square float64 sparse matrix and returns ``v -> P v`` on 1-D
    arrays (a new array each call, as ``ssor1``, or written into ``out=``, a
    contiguous float array that is not ``v``: see :func:`into`). The
    blocked function keeps its scratch vector: one call at a time.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[2.0, -1.0], [-1.0, 2.0]]))
    >>> symmetric_gauss_seidel(A)(np.array([1.0, 1.0]))    # (D - U)^-1 D (D - L)^-1 (1, 1)
    array([0.875, 0.75 ])
    >>> symmetric_gauss_seidel(A, blocks=2)(np.array([1.0, 1.0]))   # (D - A_o) t = (1.5, 1.5), t = (0.5, 0.5)
    array([0.75, 0.75])
    """
    S = _canonical(A)
    n = S.shape[0]
    blocks = ssor_blocks(n) if blocks is None else int(blocks)
    if blocks < 1:
        raise ValueError(f"blocks must be a positive integer, got {blocks}")
    bounds = block_bounds(S.indptr, blocks)
    ext = extension()
    if ext is not None:
        dpos = np.empty(n, dtype=S.indptr.dtype)
        ext.ssor_setup(S.indptr, S.indices, dpos)
        if blocks == 1:
            def apply(v, out=None):
                v = np.ascontiguousarray(v, dtype=float).ravel()
                x = np.empty(n) if out is None else out
                ext.ssor(S.indptr, S.indices, dpos, S.data, v, x)
                return x

            def and_product(v, x, y):
                """``x = P v`` and ``y = A x`` (``A`` the matrix given), into ``x`` and ``y``; returns ``y``."""
                ext.ssor_ap(S.indptr, S.indices, dpos, S.data, np.ascontiguousarray(v, dtype=float).ravel(), x, y)
                return y
            apply.with_product = (A, and_product)
            return writes_into(apply)
        scratch = np.empty(n)

        def apply(v, out=None):
            v = np.ascontiguousarray(v, dtype=float).ravel()
            x = np.empty(n) if out is None else out
            ext.bssor(S.indptr, S.indices, dpos, bounds, S.data, v, x, scratch)
            return x
        return writes_into(apply)
    d = S.diagonal()
    inside, outside = S, None          # one block: the triangles of S itself
    if blocks > 1:
        rows = np.repeat(np.arange(n), np.diff(S.indptr))
        within = np.searchsorted(bounds, rows, side="right") == np.searchsorted(bounds, S.indices, side="right")
        inside = sp.csr_matrix((np.where(within, S.data, 0.0), S.indices, S.indptr), shape=S.shape)
        outside = sp.csr_matrix((np.where(within, 0.0, S.data), S.indices, S.indptr), shape=S.shape)
    lower, upper = one_index_type(sp.tril(inside, format="csr")), one_index_type(sp.triu(inside, format="csr"))

    def apply(v, out=None):
        v = np.asarray(v, dtype=float).ravel()
        x = np.zeros(v.size) if out is None else out
        x[:] = 0.0
        sweep(lower, x, v, 1.0, "forward")        # x = tril(A_B)^{-1} v  ((D - L)^{-1} v for one block)
        rhs = d * x if outside is None else d * x - outside @ x
        sweep(upper, x, rhs, 1.0, "backward")     # x = triu(A_B)^{-1} rhs, in place: row i reads x_j, j > i
        return x
    return writes_into(apply)


def _fits(A) -> bool:
    """Whether the compiled product takes ``A`` as it is (float CSR, one index type: nothing to convert)."""
    return sp.issparse(A) and A.format == "csr" and A.dtype == np.float64 and A.indices.dtype == A.indptr.dtype


def _product(ext, A, x, out=None):
    """``A @ x`` by the compiled kernel for a float vector of the right size (into ``out`` if given), else by scipy."""
    x = np.asarray(x)
    if x.ndim != 1 or x.dtype != np.float64 or x.size != A.shape[1]:
        return _copied(A @ x, out)
    if out is None:
        out = np.empty(A.shape[0])
    ext.spmv(A.indptr, A.indices, A.data, np.ascontiguousarray(x), out)
    return out


def _copied(y, out):
    """``y``, copied into ``out`` if that is given."""
    if out is None:
        return y
    np.copyto(out, np.ravel(y))
    return out


def writes_into(f):
    """Mark ``f(v, out=None)`` as a linear map that writes its result into ``out`` when given (returned)."""
    f.writes_into = True
    return f


def into(f):
    """``f`` as a function ``(v, out) -> f(v)`` that writes the result into ``out``.

    The kernels of this module (:func:`spmv`, :func:`symmetric_gauss_seidel`)
    write into the given buffer themselves (no allocation, no first touch of
    fresh memory); any other function's result is copied into it.

    >>> import numpy as np
    >>> out = np.empty(2); g = into(lambda v: 2 * v)
    >>> g(np.array([1.0, 2.0]), out) is out, out
    (True, array([2., 4.]))
    """
    if getattr(f, "writes_into", False):
        return f
    return writes_into(lambda v, out=None: _copied(f(v), out))


def spmv(A):
    """The product ``v -> A v`` of a CSR matrix: compiled on the threads of :func:`set_threads`, else ``A.dot``.

    Each entry of ``A v`` is summed along its row in stored order by one
    thread, as scipy sums it, so the thread count never changes the result.
    The function takes ``out=``, a float array the product is written into
    (see :func:`into`).

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]]))
    >>> spmv(A)(np.array([1.0, 1.0]))
    array([3., 3.])
    """
    ext = extension()
    if ext is None or not sp.issparse(A) or A.format != "csr" or A.dtype != np.float64:
        return into(A.dot)
    S = one_index_type(A)           # once, here (a copy only if the index types differ)
    return writes_into(lambda v, out=None: _product(ext, S, v, out))


def product(A, x):
    """``A @ x`` for one vector: the compiled product of :func:`spmv` where ``A`` needs no conversion, else scipy's.

    Row by row in stored order, as scipy sums it: the same numbers.

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0]]))
    >>> product(A, np.array([1.0, 1.0]))
    array([3., 3.])
    """
    ext = extension()
    if ext is None or not _fits(A):
        return A @ x
    return _product(ext, A, x)


def product_listed(A, x, rows):
    """``(A @ x)[rows]`` without the rest: the product over the listed rows (int32 or int64), each row in
    stored order (the numbers of :func:`product`), one entry a listed row (compiled for a square ``A``).

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0], [4.0, 0.0]]))
    >>> product_listed(A, np.array([1.0, 1.0]), np.array([2, 0], dtype=np.int32))
    array([4., 3.])
    """
    ext = extension()
    rows = np.asarray(rows)
    x = np.asarray(x)
    if (ext is None or not _fits(A) or x.ndim != 1 or x.dtype != np.float64 or x.size != A.shape[1]
            or A.shape[0] != A.shape[1] or rows.dtype not in (np.int32, np.int64)):
        return A[rows] @ x
    out = np.empty(rows.size)
    ext.spmv_rows(A.indptr, A.indices, A.data, np.ascontiguousarray(x), np.ascontiguousarray(rows), out)
    return out


def product_rows(A, x, start: int, stop: int, out=None):
    """``(A @ x)[start:stop]`` without the rest: rows ``start`` to ``stop`` of the product (into ``out``).

    The rows' sums are those of :func:`product` (each row in stored order): a product made block by
    block is the whole one, to the bit, with a block's temporaries only.

    >>> import numpy as np, scipy.sparse as sp
    >>> A = sp.csr_matrix(np.array([[1.0, 2.0], [0.0, 3.0], [4.0, 0.0]]))
    >>> product_rows(A, np.array([1.0, 1.0]), 1, 3)
    array([3., 4.])
    """
    if not 0 <= start <= stop <= A.shape[0]:
        raise ValueError(f"start, stop: expected 0 <= start <= stop <= {A.shape[0]} (rows), got {start}, {stop}")
    ext = extension()
    x = np.asarray(x)
    if ext is None or not _fits(A) or x.ndim != 1 or x.dtype != np.float64 or x.size != A.shape[1]:
        return _copied(A[start:stop] @ x, out)
    if out is None:
        out = np.empty(stop - start)
    # the block's row pointers are offsets into the whole matrix's indices and values: no copy of them
    ext.spmv(A.indptr[start:stop + 1], A.indices, A.data, np.ascontiguousarray(x), out)
    return out
