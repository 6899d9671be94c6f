"""NumPy archives: :func:`save_npz` and :func:`load_npz`.

The generator in CSR form, the state variables, labels, rewards, initial
states and initial law of a chain in one compressed ``.npz`` file, read back
without pickle: the exact chain, bit for bit.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..chain import CTMC
from ._common import PathLike, make_chain

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


def load_npz(path: PathLike) -> CTMC:
    """Load a chain saved by :func:`save_npz` (no pickle is ever loaded).

    Raises
    ------
    ValueError
        If the file is not such an archive or is inconsistent.
    """
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path}: not a readable .npz archive ({exc})") from None
    with z:
        if "format" not in z.files or str(z["format"]) != "ctmc-chain":
            raise ValueError(f"{path}: not a chain saved by ctmc.io.save_npz")
        if int(z["version"]) > NPZ_VERSION:
            raise ValueError(f"{path}: archive version {int(z['version'])} is newer than this ctmc "
                             f"reads ({NPZ_VERSION})")
        try:
            shape = tuple(int(s) for s in z["Q_shape"])
            Q = sp.csr_matrix((z["Q_data"], z["Q_indices"], z["Q_indptr"]), shape=shape)
            states = {str(k): z[f"state_{c}"] for c, k in enumerate(z["state_names"].tolist())}
            labels = {str(k): z[f"label_{c}"] for c, k in enumerate(z["label_names"].tolist())}
            rewards = {str(k): z[f"reward_{c}"] for c, k in enumerate(z["reward_names"].tolist())}
            initial = z["initial"] if "initial" in z.files else None
            law = z["initial_law"] if "initial_law" in z.files else None
        except (KeyError, ValueError) as exc:
            raise ValueError(f"{path}: incomplete or inconsistent archive ({exc})") from None
    try:
        mask = None
        if initial is not None:
            mask = np.zeros(shape[0], dtype=bool)
            mask[initial] = True
        chain = make_chain(Q, states or None, labels, rewards, mask)
        if law is not None:
            chain.set_initial_law(law)
        return chain
    except (ValueError, IndexError) as exc:
        raise ValueError(f"{path}: {exc}") from None
