"""What the file formats of :mod:`ctmc.io` share.

Reading a text file (a :class:`ValueError` naming the file, and the line when
it is not UTF-8), its data lines without blanks and comments, the one number
rule of every reader (ASCII integers within int64, decimal floats, rationals;
no ``_``, no other scripts' digits) with the file and line in each message
(``path:line: message``), indices in ``0..n-1`` (never negative), names and
states declared once, the vectorised reading of ``i j x`` lines, the shortest
text of a float that reads back the same, and the chain-side pieces the PRISM
and DRN files have in common: the ``init`` label, the generator from rate
triples, the labels as sets, the chain from what a reader found.
"""
from __future__ import annotations

import contextlib
import gc
import math
import os
import re
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
# text: bytes, lines, fields, numbers, messages
#
# One number rule for every reader: ASCII only (no '_' separators, no other
# scripts' digits, no Unicode blanks), an integer is ``[+-]?[0-9]+`` within
# int64, a number is a decimal float (``1``, ``-2.5``, ``.5``, ``3e-4``),
# ``inf``/``nan`` (refused by the checks that need a finite value) or a
# rational ``p/q`` of integers, ``q > 0`` (Storm's ``@value_type: rational``),
# rounded once to the nearest double.

_INT = re.compile(r"[+-]?[0-9]+")
_RATIONAL = re.compile(r"([+-]?[0-9]+)/([0-9]+)")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:inf|infinity|nan)",
                    re.IGNORECASE)
BLANKS = " \t\r\f\v"                           # the blanks between fields (ASCII only)
_FIELD_SEP = re.compile(r"[ \t\r\f\v]+")
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1


def fail(path, lineno: Optional[int], msg: str) -> ValueError:
    """The error ``path:lineno: msg`` (``path: msg`` without a line), to raise."""
    where = f"{path}:{lineno}" if lineno is not None else f"{path}"
    return ValueError(f"{where}: {msg}")


def read_bytes(path) -> bytes:
    """The content of the file ``path``, or a ValueError naming the file."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the file ({exc.strerror or exc})") from None


def decode(data: bytes, path, first_line: int = 1) -> str:
    """``data`` (``path`` from line ``first_line`` on) as UTF-8 text, or a ValueError naming the line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = first_line + data.count(b"\n", 0, exc.start)
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise fail(path, line, f"not UTF-8 text (byte 0x{data[exc.start]:02x} in column {col}: "
                   f"{exc.reason})") from None


def split_lines(text: str) -> List[str]:
    r"""The lines of ``text``, cut at ``\n`` only (so line numbers are an editor's)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_lines(path) -> List[str]:
    """The lines of the UTF-8 text file ``path``; a ValueError naming the file (and line) otherwise."""
    return split_lines(decode(read_bytes(path), path))


def data_lines(raw: List[str]) -> List[Tuple[int, str]]:
    """Non-blank, non-comment lines of a text file as ``(line number, stripped text)``.

    ``raw`` is the file's lines (:func:`read_lines`); ``#`` and ``//`` start
    comments; blanks are ASCII blanks only.
    """
    out = []
    for k, line in enumerate(raw, start=1):
        s = line.strip(BLANKS)
        if s and not s.startswith("#") and not s.startswith("//"):
            out.append((k, s))
    return out


def fields(line: str, maxsplit: int = 0) -> List[str]:
    """The blank-separated fields of a stripped line (ASCII blanks only; at most ``maxsplit`` cuts if > 0)."""
    return _FIELD_SEP.split(line, maxsplit) if line else []


def is_int(tok: str) -> bool:
    """Whether ``tok`` is an integer of the rule (``[+-]?[0-9]+``, any size)."""
    return _INT.fullmatch(tok) is not None


def _int(tok: str) -> Optional[int]:
    """The integer ``tok``, None when it is not one; beyond 19 digits, a value past int64 (not parsed)."""
    if len(tok) <= 18 and tok.isascii() and tok.isdigit():     # the common case, at once
        return int(tok)
    if not _INT.fullmatch(tok):
        return None
    digits = tok.lstrip("+-").lstrip("0")
    return int(tok) if len(digits) <= 19 else (INT64_MAX + 1) * (-1 if tok.startswith("-") else 1) * 2


def parse_int(tok: str, path, lineno, what: str, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """The integer ``tok`` (``[+-]?[0-9]+``), in ``lo..hi`` (by default the int64 range)."""
    v = _int(tok)
    if v is None:
        raise fail(path, lineno, f"{what}: expected an integer, got {tok!r}")
    if not lo <= v <= hi:
        raise fail(path, lineno, f"{what} {tok} out of range: expected {lo}..{hi}")
    return v


def parse_count(tok: str, path, lineno, what: str, lo: int = 0) -> int:
    """A count (a number of states, transitions...): an integer ``>= lo`` within int64."""
    return parse_int(tok, path, lineno, what, lo=lo)


def parse_index(tok: str, n: int, path, lineno, what: str = "state index") -> int:
    """The state index ``tok``, in ``0..n-1`` (never negative: ``-1`` is not the last state)."""
    i = _int(tok)
    if i is None:
        raise fail(path, lineno, f"{what}: expected an integer, got {tok!r}")
    if not 0 <= i < n:
        raise fail(path, lineno, f"{what} {tok} out of range: the chain has {n} states (0..{n - 1})")
    return i


def parse_float(tok: str, path, lineno, what: str) -> float:
    """The number ``tok``: a decimal float, or a rational ``p/q`` of integers with ``q > 0``."""
    if _FLOAT.fullmatch(tok):
        return float(tok)
    mq = _RATIONAL.fullmatch(tok)
    if mq and int(mq.group(2)) > 0 and max(len(mq.group(1)), len(mq.group(2))) <= 4000:
        try:
            return int(mq.group(1)) / int(mq.group(2))      # correctly rounded
        except OverflowError:
            return float("inf") if not tok.startswith("-") else float("-inf")
    raise fail(path, lineno, f"{what}: expected a number, got {tok!r}")


def parse_rate(tok: str, path, lineno, what: str = "rate", zero: bool = False) -> float:
    """The rate ``tok``: finite and > 0 (>= 0 with ``zero``: an exit rate)."""
    x = parse_float(tok, path, lineno, what)
    if not (math.isfinite(x) and (x > 0 or (zero and x == 0))):
        raise fail(path, lineno, f"{what} must be finite and {'>=' if zero else '>'} 0, got {tok}")
    return x


def parse_reward(tok: str, path, lineno) -> float:
    """The reward ``tok``: a finite number of either sign."""
    x = parse_float(tok, path, lineno, "reward")
    if not math.isfinite(x):
        raise fail(path, lineno, f"reward must be finite, got {tok}")
    return x


def unique_names(names, path, lineno, what: str) -> list:
    """``names`` as a list, refused (naming the first one) when a name occurs twice."""
    seen = set()
    for name in names:
        if name in seen:
            raise fail(path, lineno, f"{what} {name!r} is declared twice")
        seen.add(name)
    return list(names)


def distinct_states(table: np.ndarray, path, lines=None) -> None:
    """Refuse two rows of ``table`` (states x variables) with the same values.

    ``lines[i]`` (optional) is the line of state ``i``: the message names the
    later of the two lines. Two such states could not be told apart by
    their values (``chain.index(...)``).
    """
    n = table.shape[0]
    if n < 2 or table.shape[1] == 0:
        return
    order = np.lexsort(table.T[::-1])
    same = (table[order[1:]] == table[order[:-1]]).all(axis=1)
    if same.any():
        a, b = sorted(order[[int(np.flatnonzero(same)[0]), int(np.flatnonzero(same)[0]) + 1]].tolist())
        raise fail(path, None if lines is None else max(int(lines[a]), int(lines[b])),
                   f"states {a} and {b} have the same values {tuple(int(v) for v in table[a])}")


# the fast route for 'i j x' lines: one pass of numpy over the bytes, then numpy's own conversions

_KIND = np.full(256, 3, dtype=np.uint8)        # 0: a number's byte, 1: blank, 2: newline, 3: other
_KIND[list(b"0123456789+-.eE")] = 0
_KIND[list(b" \t\r")] = 1
_KIND[ord("\n")] = 2


_TOKEN_MAX = 40     # digits of the widest number the fast route takes (the exact shortest double: 24)


def fast_triples(body: bytes):
    """``(i, j, x)`` arrays of a body made only of lines ``int int number``, or None.

    None when the body holds anything else (a comment, a blank line, a
    fourth field, a byte that is not a digit, sign, point, exponent or
    blank, a token that is not a number of the rule above): the caller then
    reads the lines one by one, with the same rule, and names the line at
    fault. On these bytes numpy's conversions accept exactly the rule's
    integers and decimal floats (no '_', no letters but the exponent's).
    """
    if not body:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    kind = _KIND[np.frombuffer(body, dtype=np.uint8)]
    if (kind == 3).any():
        return None
    tok = kind == 0
    edge = np.flatnonzero(tok[1:] != tok[:-1]) + 1     # where a token starts or ends
    edge = np.concatenate([[0] if tok[0] else [], edge, [tok.size] if tok[-1] else []]).astype(np.int64)
    starts, stops = edge[0::2], edge[1::2]
    ends = np.flatnonzero(kind == 2)
    if not body.endswith(b"\n"):
        ends = np.concatenate([ends, [len(body)]])
    del kind, tok, edge
    L = ends.size                       # exactly three tokens on every line
    if starts.size != 3 * L or not ((starts[2::3] < ends).all() and (starts[3::3] > ends[:-1]).all()):
        return None
    if L and (stops - starts).max() > _TOKEN_MAX:
        return None                     # numpy's arrays of tokens are as wide as the widest one
    toks = body.split()
    try:
        i = np.array(toks[0::3]).astype(np.int64)
        j = np.array(toks[1::3]).astype(np.int64)
        x = np.array(toks[2::3]).astype(float)
    except (ValueError, OverflowError):
        return None
    return i, j, x


_DIGITS = re.compile(r"[0-9\n]*")           # one class: a loop in C, no backtracking
_DECIMAL_BYTES = re.compile(r"[0-9.eE+\n-]*")


def batch_indices(tokens: List[str], n: int) -> Optional[np.ndarray]:
    """The state indices ``tokens`` (each in ``0..n-1``) at C speed, or None when one is not.

    Tokens of ASCII digits only (at most 18): ``int`` then takes exactly the
    rule's integers. None sends the caller to :func:`parse_index` token by
    token, which names the line at fault.
    """
    if not tokens:
        return np.zeros(0, dtype=np.int64)
    if not _DIGITS.fullmatch("\n".join(tokens)) or max(map(len, tokens)) > 18:
        return None
    try:
        out = np.array(list(map(int, tokens)), dtype=np.int64)
    except ValueError:          # an empty token
        return None
    return out if (out < n).all() else None


def batch_rates(tokens: List[str]) -> Optional[np.ndarray]:
    """The rates ``tokens`` (decimal floats, finite and > 0) at C speed, or None when one is not.

    On tokens made of ``0-9 . e E + -`` only, ``float`` takes exactly the
    rule's decimal floats (no ``_``, no ``inf``). None sends the caller to
    :func:`parse_rate` token by token (rationals ``p/q`` too go that way).
    """
    if not tokens:
        return np.zeros(0)
    if not _DECIMAL_BYTES.fullmatch("\n".join(tokens)) or max(map(len, tokens)) > _TOKEN_MAX:
        return None
    try:
        out = np.array(list(map(float, tokens)), dtype=float)
    except ValueError:
        return None
    return out if (np.isfinite(out) & (out > 0)).all() else None


@contextlib.contextmanager
def gc_paused():
    """Python's cyclic garbage collector off for a bulk read (one small container a state or line).

    The containers a reader makes hold no cycles; with the collector on, its
    passes walk all of them again and again (reading the DRN file of 5e5
    states took twice as long). Restored on the way out (an error included).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def fmt(x) -> str:
    """Shortest text that reads back as the same float (integers without '.0')."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 2 ** 53 else repr(x)


# ---------------------------------------------------------------------------
# chains: what the PRISM and DRN readers and writers share

def generator_from_rates(rows, cols, rates, n: int, path=None, line_of=None) -> sp.csr_matrix:
    """Generator from rate triples: duplicates summed, self-loops dropped.

    Rates whose sum out of a state passes the largest double are refused
    naming the file, the state and (``line_of(state)``, when given) the line
    of its first transition.
    """
    rows, cols, rates = (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64),
                         np.asarray(rates, dtype=float))
    keep = rows != cols
    with np.errstate(over="ignore"):
        R = sp.csr_matrix((rates[keep], (rows[keep], cols[keep])), shape=(n, n))
        R.sum_duplicates()
        R.eliminate_zeros()
        exit_rates = np.asarray(R.sum(axis=1)).ravel()
    if not np.isfinite(exit_rates).all():
        i = int(np.flatnonzero(~np.isfinite(exit_rates))[0])
        raise fail(path, line_of(i) if line_of else None, f"the rates out of state {i} sum beyond the "
                   "largest double (1.8e308): scale the rates (the time unit) down")
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
