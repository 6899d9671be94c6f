"""What the file formats of :mod:`ctmc.io` share.

Reading a text file (a :class:`ValueError` naming the file when it cannot be
read or decoded), its data lines without blanks and comments, numbers parsed
with the file and line in the message (``path:line: message``), the shortest
text of a float that reads back the same, and the chain-side pieces the PRISM
and DRN files have in common: the ``init`` label, the generator from rate
triples, the labels as sets, the chain from what a reader found.
"""
from __future__ import annotations

import os
import warnings
from typing import List, Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

from ..chain import CTMC
from ..progress import CtmcWarning

PathLike = Union[str, os.PathLike]

#: Label name that PRISM and Storm give the initial states.
INIT = "init"


# ---------------------------------------------------------------------------
# text: lines, numbers, messages

def fail(path, lineno: Optional[int], msg: str) -> ValueError:
    """The error ``path:lineno: msg`` (``path: msg`` without a line), to raise."""
    where = f"{path}:{lineno}" if lineno is not None else f"{path}"
    return ValueError(f"{where}: {msg}")


def read_lines(path) -> List[str]:
    """The lines of the UTF-8 text file ``path``, or a ValueError naming the file."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: cannot read the file (not UTF-8 text: byte {exc.start} {exc.reason})") from None


def data_lines(raw: List[str]) -> List[Tuple[int, str]]:
    """Non-blank, non-comment lines of a text file as ``(line number, stripped text)``.

    ``raw`` is the file's lines (:func:`read_lines`); ``#`` and ``//`` start comments.
    """
    out = []
    for k, line in enumerate(raw, start=1):
        s = line.strip()
        if s and not s.startswith("#") and not s.startswith("//"):
            out.append((k, s))
    return out


def parse_float(tok: str, path, lineno, what: str) -> float:
    """The number ``tok`` (a float, or a rational ``p/q``)."""
    try:
        if "/" in tok:  # Storm may write rationals as p/q
            p, q = tok.split("/")
            return float(p) / float(q)
        return float(tok)
    except (ValueError, ZeroDivisionError):
        raise fail(path, lineno, f"{what}: expected a number, got {tok!r}") from None


def parse_int(tok: str, path, lineno, what: str) -> int:
    """The integer ``tok``."""
    try:
        return int(tok)
    except ValueError:
        raise fail(path, lineno, f"{what}: expected an integer, got {tok!r}") from None


def parse_index(tok: str, n: int, path, lineno, what: str = "state index") -> int:
    """The state index ``tok``, in ``0..n-1``."""
    i = parse_int(tok, path, lineno, what)
    if not 0 <= i < n:
        raise fail(path, lineno, f"{what} {i} out of range: the chain has {n} states (0..{n - 1})")
    return i


def parse_rate(tok: str, path, lineno, what: str = "rate") -> float:
    """The rate ``tok``: a finite number >= 0."""
    x = parse_float(tok, path, lineno, what)
    if not np.isfinite(x) or x < 0:
        raise fail(path, lineno, f"{what} must be finite and >= 0, got {tok}")
    return x


def parse_reward(tok: str, path, lineno) -> float:
    """The reward ``tok``: a finite number of either sign."""
    x = parse_float(tok, path, lineno, "reward")
    if not np.isfinite(x):
        raise fail(path, lineno, f"reward must be finite, got {tok}")
    return x


def fmt(x) -> str:
    """Shortest text that reads back as the same float (integers without '.0')."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 2 ** 53 else repr(x)


# ---------------------------------------------------------------------------
# chains: what the PRISM and DRN readers and writers share

def generator_from_rates(rows, cols, rates, n: int) -> sp.csr_matrix:
    """Generator from rate triples: duplicates summed, self-loops dropped."""
    rows, cols, rates = (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64),
                         np.asarray(rates, dtype=float))
    keep = rows != cols
    R = sp.csr_matrix((rates[keep], (rows[keep], cols[keep])), shape=(n, n))
    R.sum_duplicates()
    R.eliminate_zeros()
    exit_rates = np.asarray(R.sum(axis=1)).ravel()
    Q = (R - sp.diags(exit_rates)).tocsr()
    Q.sort_indices()
    return Q


def check_label_names(chain: CTMC) -> None:
    """Refuse label names a PRISM or DRN file cannot hold (``init``, quotes, tabs, newlines)."""
    for name in chain.labels:
        if name == INIT:
            raise ValueError(f"labels: the name {INIT!r} is reserved for the initial states in PRISM and "
                             "Storm files (set them with initial=...); rename the label")
        if '"' in name or any(ch.isspace() and ch != " " for ch in name):
            raise ValueError(f"labels: a label name cannot hold quotes, tabs or newlines, got {name!r}")


def warn_initial_law(chain: CTMC, kind: str) -> None:
    """PRISM and DRN files hold initial states, not an initial law: say so when the chain has one."""
    law = chain.initial_law      # the law given, or uniform on the initial states (never warned about)
    if law is not None and not np.allclose(law[law > 0], law[law > 0].max(), rtol=1e-12, atol=0):
        warnings.warn(f"{kind} files hold initial states, not an initial law: the chain's law (non-uniform "
                      f"over {int((law > 0).sum())} states) is written as the set of its states; save_npz "
                      "keeps it", CtmcWarning, stacklevel=3)


def label_sets(chain: CTMC) -> list:
    """``[(name, mask)]``: the initial states as ``init``, then the chain's labels (both writers)."""
    sets = []
    if chain.initial is not None:
        mask = np.zeros(chain.n_states, dtype=bool)
        mask[chain.initial] = True
        sets.append((INIT, mask))
    return sets + [(k, np.asarray(v, dtype=bool)) for k, v in chain.labels.items()]


def make_chain(Q, columns, labels, rewards, initial_mask) -> CTMC:
    """The chain a reader found; ``initial_mask`` (None or no state) leaves it without initial states."""
    init = initial_mask if initial_mask is not None and initial_mask.any() else None
    return CTMC(Q, columns, labels=labels, rewards=rewards, initial=init)
