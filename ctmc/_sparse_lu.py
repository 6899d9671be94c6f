r"""Sparse LU with a column ordering chosen from the matrix's profile.

SuperLU's minimum-degree ordering (``MMD_AT_PLUS_A``) is the right choice for
two-dimensional chains (a JSQ grid: fill ~8 nnz), but it can be pathological
on chains that are already nearly banded in ctmc's state order (a queue
with a phase and a mode variable: 70 s against 0.1 s for the natural order on
1.6e5 unknowns). Without pivoting (ctmc factorises M-matrices with diagonal
pivots), the fill of the natural order stays inside the *envelope* of
:math:`A + A^T`,

.. math:: \mathrm{env}(A) = \sum_i \big(i - \min\{j \le i : a_{ij} \ne 0 \text{ or } a_{ji} \ne 0\}\big),

so ``ordering="auto"`` keeps the natural order when that envelope is at most
:data:`ENVELOPE_FACTOR` times ``nnz(A)`` or the work it bounds,
:math:`\sum_i w_i^2` over the row widths, is at most :data:`NATURAL_FLOPS`
(:func:`natural_is_cheap`, an O(nnz) test), and falls back to
``MMD_AT_PLUS_A`` otherwise.

SuperLU reports nothing while it factorises, so :func:`splu` shows a spinner
(:meth:`ctmc.progress.Progress.spin`) when it runs longer than two seconds on
a terminal; in state order its estimate of the time left is the profile bound
on the work at :data:`FLOPS_PER_SECOND` (an upper bound: the fill of the
natural order stays inside the envelope).
"""
from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as sla

__all__ = ["ORDERINGS", "ENVELOPE_FACTOR", "NATURAL_FLOPS", "FLOPS_PER_SECOND", "row_widths", "envelope", "natural_is_cheap",
           "choose_ordering", "splu"]

#: orderings accepted by :func:`splu` ("auto" picks one of the others)
ORDERINGS = ("auto", "MMD_AT_PLUS_A", "COLAMD", "MMD_ATA", "NATURAL")
#: natural order kept when envelope(A) <= ENVELOPE_FACTOR * nnz(A) ...
ENVELOPE_FACTOR = 10
#: ... or when the profile bound on the work, sum of squared row widths, is at most this
NATURAL_FLOPS = 1e9
#: rate assumed to turn the profile bound on the work into seconds (progress estimate only)
FLOPS_PER_SECOND = 1e9


def row_widths(A) -> np.ndarray:
    """``i - min{j <= i : a_ij != 0 or a_ji != 0}`` for each row: the profile of ``A + A^T``."""
    A = sp.csr_matrix(A)
    n = A.shape[0]
    coo = A.tocoo()
    first = np.arange(n)
    if coo.nnz:
        np.minimum.at(first, np.maximum(coo.row, coo.col), np.minimum(coo.row, coo.col))
    return np.arange(n) - first


def envelope(A) -> int:
    """Envelope (profile) size of the symmetrised pattern of ``A``, in state order.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> envelope(sp.diags([1.0, 2.0, 1.0], [-1, 0, 1], shape=(5, 5)))   # tridiagonal
    4
    """
    return int(row_widths(A).sum())


def natural_is_cheap(envelope_entries: float, flops: float, nnz: float) -> bool:
    """Whether LU in state order is cheap: fill within ``ENVELOPE_FACTOR * nnz`` or about a second of work.

    Without pivoting the fill stays inside the envelope and the work is at
    most ``sum_i w_i^2`` over the row widths ``w_i``.

    >>> natural_is_cheap(40, 200, 10), natural_is_cheap(4e9, 4e12, 1e6), natural_is_cheap(2e7, 5e8, 1e6)
    (True, False, True)
    """
    return envelope_entries <= ENVELOPE_FACTOR * max(nnz, 1) or flops <= NATURAL_FLOPS


def choose_ordering(A, ordering: str = "auto") -> str:
    """The SuperLU ``permc_spec`` that :func:`splu` uses for ``A``."""
    return _choose(A, ordering)[0]


def _choose(A, ordering):
    """``(permc_spec, profile bound on the work of the natural order or None)``."""
    if ordering not in ORDERINGS:
        raise ValueError(f"ordering: expected one of {ORDERINGS}, got {ordering!r}")
    if ordering not in ("auto", "NATURAL"):
        return ordering, None
    w = row_widths(A).astype(float)
    flops = float(w @ w)
    if ordering == "NATURAL" or natural_is_cheap(w.sum(), flops, A.nnz):
        return "NATURAL", flops
    return "MMD_AT_PLUS_A", None


def splu(A, ordering: str = "auto", max_memory=None):
    """SuperLU factorisation with diagonal pivots; returns ``(factor, ordering_used)``.

    The fill of a factorisation is not known before it ends (a 4-species
    population chain of 2.4e6 states asked for more than the machine's 24
    GB, and the kernel killed the process). So the factorisation runs with
    the process's address space capped at what it maps now plus
    ``max_memory`` bytes (default 80 % of the available memory,
    :func:`ctmc._util.memory_limit`): past that SuperLU's allocations fail
    and this raises :class:`MemoryError`, which ``auto`` answers with its
    next method.

    Raises
    ------
    RuntimeError
        From SuperLU, for an exactly singular pivot.
    MemoryError
        The factors would not fit in ``max_memory``.
    """
    from .progress import Progress
    from ._util import address_space_cap, memory_limit
    spec, flops = _choose(A, ordering)
    A = sp.csc_matrix(A)
    limit = memory_limit(max_memory)
    with Progress(f"sparse LU of {A.shape[0]} unknowns (SuperLU, {spec})") as prog:
        with prog.spin("factorising", None if flops is None else flops / FLOPS_PER_SECOND):
            with address_space_cap(limit):
                try:
                    return sla.splu(A, permc_spec=spec, diag_pivot_thresh=0.0), spec
                except (SystemError, MemoryError) as exc:      # SuperLU reports a failed allocation so
                    raise MemoryError(f"the factors need more than {limit / 2**30:.2g} GiB "
                                      f"(ordering {spec}){f': {exc}' if str(exc) else ''}") from exc
