"""NumPy archives: :func:`save_npz` and :func:`load_npz`.

The generator in CSR form, the state variables, labels, rewards, initial
states and initial law of a chain in one compressed ``.npz`` file, read back
without pickle: the exact chain, bit for bit. The reader opens the archive
itself (not through :func:`numpy.load`): each member's ``.npy`` header is
checked against the member's size before its data is read, object arrays
are refused, and every member must have the kind and shape of the layout.
"""
from __future__ import annotations

import zipfile
import zlib
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import scipy.sparse as sp

from ..chain import CTMC
from ._common import PathLike, distinct_states, make_chain, unique_names

__all__ = ["save_npz", "load_npz"]

#: Version of the layout of :func:`save_npz` archives.
NPZ_VERSION = 1


def save_npz(chain: CTMC, path: PathLike) -> Path:
    """Save a chain (generator, states, labels, rewards, initial states) to a compressed ``.npz``.

    Parameters
    ----------
    chain : CTMC
    path : path
        The archive to write (NumPy adds ``.npz`` if the name lacks it).

    Returns
    -------
    pathlib.Path
        The file written.

    Examples
    --------
    >>> import os, tempfile, ctmc, ctmc.io
    >>> chain = ctmc.CTMC.from_rates([[0, 2.0], [1.0, 0]])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     back = ctmc.io.load_npz(ctmc.io.save_npz(chain, os.path.join(d, "two")))
    >>> (back.Q != chain.Q).nnz
    0
    """
    Q = chain.Q.tocsr()
    arrays = {
        "format": np.array("ctmc-chain"), "version": np.array(NPZ_VERSION),
        "Q_data": Q.data, "Q_indices": Q.indices, "Q_indptr": Q.indptr, "Q_shape": np.array(Q.shape),
        "state_names": np.array(list(chain.states.names), dtype=str),
        "label_names": np.array(list(chain.labels), dtype=str),
        "reward_names": np.array(list(chain.rewards), dtype=str),
    }
    for c, k in enumerate(chain.states.names):
        arrays[f"state_{c}"] = np.asarray(chain.states[k])
    for c, v in enumerate(chain.labels.values()):
        arrays[f"label_{c}"] = np.asarray(v, dtype=bool)
    for c, v in enumerate(chain.rewards.values()):
        arrays[f"reward_{c}"] = np.asarray(v, dtype=float)
    if chain.initial is not None:
        arrays["initial"] = np.asarray(chain.initial, dtype=np.int64)
    law = chain.initial_law
    if law is not None and np.ptp(law[chain.initial]) > 0:
        # a law that is not uniform on the initial states (a uniform one is what `initial` restores)
        arrays["initial_law"] = np.asarray(law, dtype=float)
    p = Path(path)
    if p.suffix != ".npz":
        p = p.with_name(p.name + ".npz")
    np.savez_compressed(p, **arrays)
    return p


# ---------------------------------------------------------------------------
# reading: each member's header checked against its real size before its data is read

_DEFLATE_RATIO = 1100   # deflate expands at most ~1032 times: a larger declared size is not in the file


def _member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path, key: str) -> np.ndarray:
    """The array of one member, its ``.npy`` header (shape, dtype) checked against the member's size."""
    if info.file_size > _DEFLATE_RATIO * info.compress_size + 4096:
        raise _fail(path, key, f"declares {info.file_size} bytes, more than its {info.compress_size} "
                    "compressed bytes can hold")
    with zf.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        if version not in ((1, 0), (2, 0)):
            raise _fail(path, key, f"unknown .npy format version {version}")
        reader = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                  np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = reader(fh)
        if dtype.hasobject:
            raise _fail(path, key, "holds Python objects (pickle): refused")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if nbytes != info.file_size - fh.tell():
            raise _fail(path, key, f"its header declares shape {shape} of {dtype} ({nbytes} bytes), "
                        f"the member holds {info.file_size - fh.tell()} bytes")
        data = fh.read(nbytes)
    if len(data) != nbytes:
        raise _fail(path, key, f"{len(data)} of its {nbytes} bytes could be read")
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()


def _fail(path, key: str, msg: str) -> ValueError:
    """The error ``path: member 'key': msg`` (an archive has members, not lines)."""
    return ValueError(f"{path}: member {key!r}: {msg}")


def _members(path) -> Dict[str, np.ndarray]:
    """Every member of the archive ``path`` as an array; a ValueError naming the file (and member)."""
    key = None
    try:
        with zipfile.ZipFile(path) as zf:
            out: Dict[str, np.ndarray] = {}
            for info in zf.infolist():
                key = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if not info.filename.endswith(".npy") or key in out:
                    raise _fail(path, key, "not an array of the layout (or a second member of that name)")
                out[key] = _member(zf, info, path, key)
            return out
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError, ValueError, NotImplementedError) as exc:
        if str(exc).startswith(f"{path}: "):
            raise
        where = f"{path}: member {key!r}" if key is not None else f"{path}"
        raise ValueError(f"{where}: not a readable .npz archive ({type(exc).__name__}: {exc})") from None


class _Archive:
    """The members of a :func:`save_npz` archive, each taken with its expected kind and shape."""

    def __init__(self, members: Dict[str, np.ndarray], path):
        self.members, self.path, self.taken = members, path, set()

    def get(self, key: str, kinds: str, ndim: int, size: Optional[int] = None, required: bool = True):
        """The member ``key``: dtype kind in ``kinds``, ``ndim`` dimensions, ``size`` entries (1-D)."""
        if key not in self.members:
            if required:
                raise ValueError(f"{self.path}: incomplete archive: no member {key!r}")
            return None
        a = self.members[key]
        self.taken.add(key)
        if a.dtype.kind not in kinds or a.ndim != ndim or (size is not None and a.shape != (size,)):
            want = f"{ndim}-d" + (f" of {size} entries" if size is not None else "")
            raise _fail(self.path, key, f"expected a {want} array of kind {kinds!r}, got shape {a.shape} "
                        f"of {a.dtype}")
        if a.dtype.kind == "u":     # unsigned integers: within the signed 64-bit range, then read as such
            if a.size and int(a.max()) > np.iinfo(np.int64).max:
                raise _fail(self.path, key, f"value {int(a.max())} beyond the 64-bit integer range")
            a = a.astype(np.int64)
        return a

    def names(self, key: str) -> List[str]:
        """A list of names (state variables, labels, rewards), each once."""
        names = [str(s) for s in self.get(key, "U", 1).tolist()]
        unique_names(names, self.path, None, f"member {key!r}: name")
        return names


def _generator(z: _Archive) -> sp.csr_matrix:
    """The CSR generator, its arrays checked (sizes, index ranges, no entry twice) before it is made."""
    path = z.path
    shape = z.get("Q_shape", "iu", 1, 2)
    n = int(shape[0])
    indptr = z.get("Q_indptr", "iu", 1)
    if n < 1 or int(shape[1]) != n or indptr.size != n + 1:
        raise _fail(path, "Q_shape", f"expected a square shape n x n with n >= 1 and n + 1 row pointers, "
                    f"got {shape.tolist()} and {indptr.size} pointers")
    nnz = int(indptr[-1])
    data, indices = z.get("Q_data", "f", 1, nnz), z.get("Q_indices", "iu", 1, nnz)
    if indptr[0] != 0 or (np.diff(indptr.astype(np.int64)) < 0).any():
        raise _fail(path, "Q_indptr", "row pointers must start at 0 and never decrease")
    if nnz and not ((indices >= 0).all() and (indices < n).all()):
        raise _fail(path, "Q_indices", f"column indices must be in 0..{n - 1}")
    Q = sp.csr_matrix((data, indices.astype(np.int64), indptr.astype(np.int64)), shape=(n, n))
    C = Q.copy()
    C.sum_duplicates()
    if C.nnz != Q.nnz:
        raise _fail(path, "Q_indices", "an entry of Q is given twice")
    return C


def load_npz(path: PathLike) -> CTMC:
    """Load a chain saved by :func:`save_npz` (no pickle is ever loaded).

    Every member's ``.npy`` header (shape and dtype) is checked against the
    member's real size before its data is read, so a small file cannot make
    the reader allocate what it only declares.

    Raises
    ------
    ValueError
        If the file is not such an archive or is inconsistent, naming the
        file and the member: a member of the wrong kind or shape, an index
        out of range, an initial state listed twice, two states with the
        same values, a name given twice, a member the layout does not have.
    """
    z = _Archive(_members(path), path)
    fmt_ = z.get("format", "U", 0, required=False)
    if fmt_ is None or str(fmt_) != "ctmc-chain":
        raise ValueError(f"{path}: not a chain saved by ctmc.io.save_npz")
    version = int(z.get("version", "iu", 0))
    if not 1 <= version <= NPZ_VERSION:
        raise _fail(path, "version", f"archive version {version}: this ctmc reads versions 1..{NPZ_VERSION}")
    Q = _generator(z)
    n = Q.shape[0]
    states = {k: z.get(f"state_{c}", "iu", 1, n) for c, k in enumerate(z.names("state_names"))}
    if states:
        distinct_states(np.column_stack([v.astype(np.int64) for v in states.values()]), path)
    labels = {k: z.get(f"label_{c}", "b", 1, n) for c, k in enumerate(z.names("label_names"))}
    rewards = {k: z.get(f"reward_{c}", "f", 1, n) for c, k in enumerate(z.names("reward_names"))}
    initial = z.get("initial", "iu", 1, required=False)
    law = z.get("initial_law", "f", 1, n, required=False)
    extra = sorted(set(z.members) - z.taken)
    if extra:
        raise _fail(path, extra[0], "not part of the layout of a save_npz archive")
    mask = None
    if initial is not None:
        if not ((initial >= 0).all() and (initial < n).all()):
            raise _fail(path, "initial", f"initial states must be in 0..{n - 1}, got "
                        f"{int(initial[(initial < 0) | (initial >= n)][0])}")
        mask = np.zeros(n, dtype=bool)
        mask[initial] = True
        if int(mask.sum()) != initial.size:
            raise _fail(path, "initial", "an initial state is listed twice")
    try:
        chain = make_chain(Q, states or None, labels, rewards, mask)
        if law is not None:
            chain.set_initial_law(law)
        return chain
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
