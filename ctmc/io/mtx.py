"""Matrix Market: :func:`write_mtx` and :func:`read_mtx`, the generator alone.

Through :func:`scipy.io.mmwrite` and :func:`scipy.io.mmread`.
"""
from __future__ import annotations

from pathlib import Path

import scipy.sparse as sp

from ..chain import CTMC
from ._common import PathLike

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
    scipy.io.mmwrite(str(p), chain.Q.tocoo(), comment="generator Q of a CTMC (rows sum to 0), written by ctmc",
                     field="real", symmetry="general")
    if not p.exists() and p.with_name(p.name + ".mtx").exists():
        p = p.with_name(p.name + ".mtx")
    return p


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
        If the file cannot be read or its matrix is not a generator.
    """
    import scipy.io
    try:
        A = scipy.io.mmread(str(path))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable Matrix Market file ({exc})") from None
    try:
        if rates:
            return CTMC.from_rates(sp.csr_matrix(A))
        return CTMC(sp.csr_matrix(A))
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
