r"""PRISM's explicit files: ``.tra``, ``.sta``, ``.lab``, ``.srew``, ``.trew``.

:func:`write_prism` and :func:`read_prism` (layout of the files, Storm's
explicit dialect and the folding of transition rewards into state reward
rates: see :mod:`ctmc.io`).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..chain import CTMC
from ._common import (BLANKS, INIT, INT64_MAX, PathLike, check_label_names, data_lines, decode,
                      distinct_states, fail, fast_triples, fields, fmt, generator_from_rates, is_int,
                      label_sets, make_chain, parse_count, parse_index, parse_int, parse_rate, parse_reward,
                      read_bytes, read_lines, split_lines, unique_names, warn_initial_law)

__all__ = ["write_prism", "read_prism"]

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")


def _off_diagonal(Q: sp.csr_matrix):
    """Rows, columns and rates of the non-zero off-diagonal entries of ``Q``, row-major sorted."""
    C = Q.tocoo()
    keep = (C.row != C.col) & (C.data != 0)
    r, c, v = C.row[keep], C.col[keep], C.data[keep]
    order = np.lexsort((c, r))
    return r[order], c[order], v[order]


def write_prism(chain: CTMC, basename: PathLike) -> List[Path]:
    """Write a chain as PRISM explicit files ``.tra``, ``.sta``, ``.lab`` and ``.srew``.

    Parameters
    ----------
    chain : CTMC
        The chain. Its initial states (if any) become the label ``init``.
    basename : path
        Path without extension: ``out`` writes ``out.tra``, ``out.sta``,
        ``out.lab`` and, for each reward ``name`` of ``chain.rewards``,
        ``out.name.srew`` (reward names must be made of letters, digits,
        ``_`` and ``-``).

    Returns
    -------
    list of pathlib.Path
        The files written, in the order ``.tra``, ``.sta``, ``.lab``, then
        the reward files in the order of ``chain.rewards``.

    Raises
    ------
    ValueError
        If a label is called ``init`` (reserved for the initial states) or a
        label or reward name cannot be written.

    Notes
    -----
    ``.tra`` lists the off-diagonal non-zero rates sorted by source then
    target (the order Storm's explicit parser requires). PRISM's own export
    also declares the label ``deadlock``; it is written here only if the
    chain has a label of that name.

    Examples
    --------
    >>> import os, tempfile, ctmc, ctmc.io
    >>> chain = ctmc.CTMC.from_rates([[0, 2.0], [1.0, 0]])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     tra = ctmc.io.write_prism(chain, os.path.join(d, "two"))[0]
    ...     print(open(tra).read(), end="")
    2 2
    0 1 2
    1 0 1
    """
    check_label_names(chain)
    for name in chain.rewards:
        if not _SAFE_NAME.match(name):
            raise ValueError(f"rewards: the name {name!r} cannot be part of a file name "
                             "(use letters, digits, '_' and '-')")
    base = Path(basename)
    n = chain.n_states
    rows, cols, rates = _off_diagonal(chain.Q)
    paths = [base.with_name(base.name + ".tra"), base.with_name(base.name + ".sta"),
             base.with_name(base.name + ".lab")]
    with open(paths[0], "w", encoding="utf-8") as fh:
        fh.write(f"{n} {rows.size}\n")
        fh.writelines(f"{i} {j} {fmt(x)}\n" for i, j, x in zip(rows.tolist(), cols.tolist(), rates.tolist()))
    names = chain.states.names
    cols_ = [np.asarray(chain.states[k]).astype(np.int64).tolist() for k in names]
    with open(paths[1], "w", encoding="utf-8") as fh:
        fh.write("(" + ",".join(names) + ")\n")
        fh.writelines(f"{i}:(" + ",".join(str(c[i]) for c in cols_) + ")\n" for i in range(n))
    warn_initial_law(chain, "PRISM")
    sets = label_sets(chain)
    with open(paths[2], "w", encoding="utf-8") as fh:
        fh.write(" ".join(f'{k}="{name}"' for k, (name, _) in enumerate(sets)) + "\n")
        if sets:
            member = np.column_stack([m for _, m in sets])
            for i in np.flatnonzero(member.any(axis=1)).tolist():
                fh.write(f"{i}: " + " ".join(str(k) for k in np.flatnonzero(member[i]).tolist()) + "\n")
    for name, r in chain.rewards.items():
        p = base.with_name(f"{base.name}.{name}.srew")
        r = np.asarray(r, dtype=float)
        nz = np.flatnonzero(r)
        with open(p, "w", encoding="utf-8") as fh:
            fh.write(f'# Reward structure "{name}"\n# State rewards\n{n} {nz.size}\n')
            fh.writelines(f"{i} {fmt(r[i])}\n" for i in nz.tolist())
        paths.append(p)
    return paths


_HINTS = {"ctmc": True, "dtmc": False, "mdp": False, "ma": False}


@dataclass(frozen=True)
class _Tra:
    """The transitions of a ``.tra`` file: rate triples, the states the header declares, its line."""
    rows: np.ndarray
    cols: np.ndarray
    rates: np.ndarray
    n: Optional[int]            # None: Storm's hint line, no count of states
    line: int                   # the header's line (or the hint's)


def _fast_tra(data: bytes, path) -> Optional[_Tra]:
    """The common case read in one pass of numpy: header ``n m`` on line 1, then only ``i j rate`` lines.

    None when the file is anything else or breaks a rule: :func:`_slow_tra`
    then reads it line by line (with the same rules) and names the line.
    """
    nl = data.find(b"\n")
    nl = len(data) if nl < 0 else nl
    head = fields(decode(data[:nl], path).strip(BLANKS))
    if len(head) != 2 or not all(is_int(t) for t in head):
        return None
    n, m = int(head[0]), int(head[1])
    got = fast_triples(data[nl + 1:])
    if got is None or not 1 <= n <= INT64_MAX or got[0].size != m:
        return None
    i, j, x = got
    if not ((i >= 0).all() and (i < n).all() and (j >= 0).all() and (j < n).all()
            and np.isfinite(x).all() and (x > 0).all()):
        return None
    return _Tra(i, j, x, n, 1)


def _slow_tra(data: bytes, path) -> _Tra:
    """A ``.tra`` file line by line: comments, Storm's hint, action names; each error with its line."""
    lines = data_lines(split_lines(decode(data, path)))
    if not lines:
        raise fail(path, None, "empty file: expected a header 'n m' and transition lines")
    k0, head = lines[0]
    toks = fields(head)
    n = m = None
    if toks[0].lower() in _HINTS:
        if not _HINTS[toks[0].lower()]:
            raise fail(path, k0, f"this is a {toks[0]} file, not a CTMC")
    elif len(toks) == 2:
        n = parse_count(toks[0], path, k0, "number of states", lo=1)
        m = parse_count(toks[1], path, k0, "number of transitions")
    elif len(toks) == 3:
        raise fail(path, k0, "header 'n c m' is an MDP's (states, choices, transitions): not a CTMC")
    else:
        raise fail(path, k0, f"expected a header 'n m' (states, transitions), got {head!r}")
    bound = n if n is not None else INT64_MAX
    rows, cols, rates = [], [], []
    for k, line in lines[1:]:
        t = fields(line)
        if len(t) not in (3, 4):
            raise fail(path, k, f"expected 'i j rate' (and an optional action name), got {line!r}")
        if len(t) == 4 and re.fullmatch(r"[-+.0-9eE]+", t[3]):
            raise fail(path, k, "four numbers 'i k j p' are an MDP's transition: not a CTMC")
        rows.append(parse_index(t[0], bound, path, k, "source"))
        cols.append(parse_index(t[1], bound, path, k, "target"))
        rates.append(parse_rate(t[2], path, k))
    _counted(path, k0, m, len(rows), "transitions")
    return _Tra(np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64),
                np.asarray(rates, dtype=float), n, k0)


def _read_tra(path, sta_lines: int = 0) -> Tuple[sp.csr_matrix, _Tra]:
    """The generator of a ``.tra`` file and its transitions (for the transition rewards).

    The number of states is bounded by what the files hold before anything
    of that size is made: ``m`` transitions touch at most ``2m + 1`` states,
    unless the ``.sta`` file (``sta_lines`` lines) lists more.
    """
    data = read_bytes(path)
    tra = _fast_tra(data, path) or _slow_tra(data, path)
    m = tra.rows.size
    n = tra.n
    if n is None:
        n = int(max(tra.rows.max(initial=-1), tra.cols.max(initial=-1))) + 1
        if n == 0:
            raise fail(path, tra.line, "no transitions and no header: the number of states is unknown")
    if n > max(2 * m + 1, sta_lines):
        raise fail(path, tra.line, f"{n} states for {m} transitions: they touch at most {2 * m + 1} states "
                   "(list every state in a .sta file to have more)")
    return generator_from_rates(tra.rows, tra.cols, tra.rates, n, path,
                                lambda i: _first_line_from(data, path, i)), tra


def _first_line_from(data: bytes, path, i: int) -> Optional[int]:
    """The line of the first transition out of state ``i`` in the text of a ``.tra`` file (for an error)."""
    lines = data_lines(split_lines(decode(data, path)))
    return next((k for k, line in lines[1:] if fields(line)[:1] == [str(i)]), None)


_STA_PUNCT = bytes.maketrans(b":(),", b"    ")


def _read_sta(data: bytes, path, n: int) -> Dict[str, np.ndarray]:
    """The state variables of a ``.sta`` file (its bytes), one integer column a variable."""
    return _fast_sta(data, path, n) or _slow_sta(data_lines(split_lines(decode(data, path))), path, n)


def _fast_sta(data: bytes, path, n: int) -> Optional[Dict[str, np.ndarray]]:
    """The common case in one pass: header ``(a,b)`` on line 1, then only ``i:(1,-2)`` lines, numbers of at
    most 19 digits, each state once; None otherwise (:func:`_slow_sta` then names the line at fault)."""
    nl = data.find(b"\n")
    head = re.fullmatch(rb"\(([A-Za-z_][A-Za-z0-9_]*(?:,[A-Za-z_][A-Za-z0-9_]*)*)\)\r?", data[:max(nl, 0)])
    if nl < 0 or not head:
        return None
    names = head.group(1).decode("ascii").split(",")
    body = data[nl + 1:]
    body = body if not body or body.endswith(b"\n") else body + b"\n"
    k = len(names)
    line = rb"[0-9]{1,19}:\((?:[+-]?[0-9]{1,19},){%d}[+-]?[0-9]{1,19}\)\r?\n" % (k - 1)
    if len(set(names)) != k or not re.fullmatch(rb"(?:%s)*" % line, body):
        return None
    try:
        table = np.array(body.translate(_STA_PUNCT).split()).astype(np.int64).reshape(-1, k + 1)
    except (ValueError, OverflowError):
        return None
    idx = table[:, 0]
    if (table.shape[0] != n or not ((idx >= 0) & (idx < n)).all()
            or (np.bincount(idx, minlength=n) != 1).any()):
        return None
    vals = np.empty((n, k), dtype=np.int64)
    vals[idx] = table[:, 1:]
    at = np.empty(n, dtype=np.int64)
    at[idx] = np.arange(2, n + 2)       # the line of each state, for the message on two equal states
    distinct_states(vals, path, at)
    return {name: vals[:, c].copy() for c, name in enumerate(names)}


def _slow_sta(lines: List[Tuple[int, str]], path, n: int) -> Dict[str, np.ndarray]:
    """A ``.sta`` file line by line (its data lines): blanks, booleans, comments; each error with its line."""
    if not lines:
        raise fail(path, None, "empty file: expected a header '(v1,...,vk)'")
    k0, head = lines[0]
    mh = re.fullmatch(r"\((.*)\)", head)
    if not mh:
        raise fail(path, k0, f"expected a header '(v1,...,vk)', got {head!r}")
    names = [s.strip(BLANKS) for s in mh.group(1).split(",")]
    if not all(names):
        raise fail(path, k0, f"variable names must be non-empty, got {head!r}")
    unique_names(names, path, k0, "variable")
    vals = np.zeros((n, len(names)), dtype=np.int64)
    at = np.zeros(n, dtype=np.int64)            # the line of each state (0: not yet listed)
    for k, line in lines[1:]:
        ml = re.fullmatch(r"([^:]+):\s*\((.*)\)", line)
        if not ml:
            raise fail(path, k, f"expected 'i:(a1,...,ak)', got {line!r}")
        i = parse_index(ml.group(1).strip(BLANKS), n, path, k)
        if at[i]:
            raise fail(path, k, f"state {i} is listed twice (first on line {at[i]})")
        toks = [s.strip(BLANKS) for s in ml.group(2).split(",")]
        if len(toks) != len(names):
            raise fail(path, k, f"{len(toks)} values for the {len(names)} variables {names}")
        for c, tok in enumerate(toks):
            low = tok.lower()
            vals[i, c] = (int(low == "true") if low in ("true", "false") else
                          parse_int(tok, path, k, f"variable {names[c]!r}"))
        at[i] = k
    if not at.all():
        raise fail(path, None, f"{int((at == 0).sum())} of the {n} states have no line "
                   f"(first missing: {int(np.flatnonzero(at == 0)[0])})")
    distinct_states(vals, path, at)
    return {name: vals[:, c].copy() for c, name in enumerate(names)}


_LAB_DECL = re.compile(r'([0-9]+)\s*=\s*"([^"]*)"')


def _read_lab(path, n: int) -> Dict[str, np.ndarray]:
    """The labels of a ``.lab`` file (PRISM's or Storm's), ``init`` among them."""
    raw = read_lines(path)
    if next((s.strip(BLANKS) for s in raw if s.strip(BLANKS)), "") == "#DECLARATION":
        return _read_storm_lab(raw, path, n)
    lines = data_lines(raw)
    if not lines:
        return {}  # no labels (what write_prism writes for a chain without labels or initial states)
    k0, head = lines[0]
    decl = _LAB_DECL.findall(head)
    if not decl or _LAB_DECL.sub("", head).strip(BLANKS):
        raise fail(path, k0, f'expected a header 0="init" 1="deadlock" ..., got {head!r}')
    ids = {}
    for num, name in decl:
        num = parse_int(num, path, k0, "label number")
        if num in ids:
            raise fail(path, k0, f"label number {num} is declared twice")
        ids[num] = name
    unique_names(ids.values(), path, k0, "label")
    return _label_masks(lines[1:], path, n, ids, ":")


def _label_masks(lines, path, n, ids: dict, sep: Optional[str]) -> Dict[str, np.ndarray]:
    """Masks of the labels ``ids`` (number or name -> name).

    From PRISM's ``i: l1 l2`` lines (``sep=':'``, label numbers) or Storm's
    ``i l1 l2`` lines (``sep=None``, label names); each state on one line.
    """
    masks = {name: np.zeros(n, dtype=bool) for name in ids.values()}
    listed = np.zeros(n, dtype=bool)
    for k, line in lines:
        if sep:
            head, found, rest = line.partition(sep)
            if not found:
                raise fail(path, k, f"expected 'i{sep} l1 l2 ...', got {line!r}")
            head, toks = head.strip(BLANKS), fields(rest.strip(BLANKS))
        else:
            head, *toks = fields(line)
        i = parse_index(head, n, path, k)
        if listed[i]:
            raise fail(path, k, f"state {i} is listed twice")
        listed[i] = True
        for tok in toks:
            key = parse_int(tok, path, k, "label number") if sep else tok
            if key not in ids:
                raise fail(path, k, f"label {'number ' if sep else ''}{key!r} is not declared"
                           + (" in the header" if sep else ""))
            masks[ids[key]][i] = True
    return masks


def _read_storm_lab(lines: List[str], path, n: int) -> Dict[str, np.ndarray]:
    """Storm's labelling file: ``#DECLARATION``, the label names, ``#END``, then ``i l1 l2`` lines."""
    raw = [(k, s.strip(BLANKS)) for k, s in enumerate(lines, start=1) if s.strip(BLANKS)]
    try:
        end = next(a for a, (_, s) in enumerate(raw) if s == "#END")
    except StopIteration:
        raise fail(path, raw[0][0], "'#DECLARATION' without '#END'") from None
    names = []
    for k, s in raw[1:end]:
        names += fields(s)
        unique_names(names, path, k, "label")
    return _label_masks(raw[end + 1:], path, n, {name: name for name in names}, None)


def _reward_files(arg, kind: str) -> List[Tuple[Optional[str], PathLike]]:
    """``[(given name or None, path)]`` from a path, a list of paths or a dict name -> path."""
    if arg is None:
        return []
    if isinstance(arg, Mapping):
        return [(str(k), v) for k, v in arg.items()]
    if isinstance(arg, (str, os.PathLike)):
        return [(None, arg)]
    try:
        return [(None, p) for p in arg]
    except TypeError:
        raise TypeError(f"{kind}: expected a path, a list of paths or a dict name -> path, "
                        f"got {arg!r}") from None


def _reward_name(raw: List[str], path, given: Optional[str]) -> Tuple[str, Optional[int]]:
    """A reward's name and the line giving it.

    ``given``, else the file's ``# Reward structure "name"``, else its file name's.
    """
    if given:
        return given, None
    for k, line in enumerate(raw, start=1):
        mm = re.match(r'\s*#\s*Reward structure\s+"([^"]+)"', line)
        if mm:
            return mm.group(1), k
        if line.strip(BLANKS) and not line.lstrip(BLANKS).startswith(("#", "//")):
            break
    stem = Path(path).stem
    return (stem.rsplit(".", 1)[-1] if "." in stem else stem), None


def _counted(path, k0, declared, found: int, what: str) -> None:
    """A header's count of entries (``declared``; None: no header) against the entries the file has."""
    if declared is not None and found != declared:
        raise fail(path, k0, f"the header announces {declared} {what}, the file has {found} (a truncated file?)")


def _read_srew(raw: List[str], path, n: int) -> np.ndarray:
    """The state reward of a ``.srew`` file (its lines ``raw``)."""
    lines = data_lines(raw)
    if not lines:
        raise fail(path, None, "empty file: expected a header 'n nnz'")
    k0, head = lines[0]
    t = fields(head)
    if len(t) != 2:
        raise fail(path, k0, f"expected a header 'n nnz' (states, non-zero rewards), got {head!r}")
    # PRISM's header 'n nnz' starts with n, never a state index; Storm's files have no header
    header = parse_int(t[0], path, k0, "state index") == n
    body = lines[1:] if header else lines
    _counted(path, k0, parse_count(t[1], path, k0, "number of rewards") if header else None, len(body),
             "rewards")
    r = np.zeros(n)
    listed = np.zeros(n, dtype=bool)
    for k, line in body:
        t = fields(line)
        if len(t) != 2:
            raise fail(path, k, f"expected 'i r', got {line!r}")
        i = parse_index(t[0], n, path, k)
        if listed[i]:
            raise fail(path, k, f"state {i} is listed twice")
        listed[i] = True
        r[i] = parse_reward(t[1], path, k)
    return r


def _read_trew(raw: List[str], path, Q: sp.csr_matrix, tra: _Tra) -> np.ndarray:
    """The transition reward of a ``.trew`` file (its lines ``raw``) folded into a state reward rate.

    Each entry names a transition of the ``.tra`` file (a self-loop of it
    is taken and ignored: it never fires), once.
    """
    n = Q.shape[0]
    lines = data_lines(raw)
    if not lines:
        raise fail(path, None, "empty file: expected a header 'n m'")
    k0, head = lines[0]
    t = fields(head)
    body = lines  # Storm's transition reward files have no header
    if len(t) == 2:
        nn = parse_count(t[0], path, k0, "number of states")
        if nn != n:
            raise fail(path, k0, f"the header gives {nn} states, the transitions file has {n}")
        body = lines[1:]
    loops = set(tra.rows[tra.rows == tra.cols].tolist())
    rows, cols, vals, where = [], [], [], []
    for k, line in body:
        t = fields(line)
        if len(t) not in (3, 4):
            raise fail(path, k, f"expected 'i j r', got {line!r}")
        i, j = parse_index(t[0], n, path, k, "source"), parse_index(t[1], n, path, k, "target")
        x = parse_reward(t[2], path, k)
        if i == j and i not in loops:
            raise fail(path, k, f"reward on the transition {i} -> {j}, which the chain does not have")
        if i != j:
            rows.append(i); cols.append(j); vals.append(x); where.append(k)
    rows_a, cols_a = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    rates = np.asarray(Q[rows_a, cols_a]).ravel() if rows else np.zeros(0)
    if (rates == 0).any():
        a = int(np.flatnonzero(rates == 0)[0])
        raise fail(path, where[a], f"reward on the transition {rows[a]} -> {cols[a]}, which the chain "
                   "does not have")
    key = rows_a * n + cols_a
    order = np.argsort(key, kind="stable")
    twice = np.flatnonzero(key[order][1:] == key[order][:-1])
    if twice.size:
        a = int(order[twice[0] + 1])
        raise fail(path, where[a], f"the transition {rows[a]} -> {cols[a]} has a second reward "
                   f"(first on line {where[int(order[twice[0]])]})")
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.bincount(rows_a, weights=rates * np.asarray(vals, dtype=float), minlength=n)
    if not np.isfinite(out).all():
        i = int(np.flatnonzero(~np.isfinite(out))[0])
        raise fail(path, where[rows.index(i)], f"the transition rewards of state {i} times their rates "
                   "sum beyond the largest double (1.8e308)")
    return out


def _read_rewards(srew, trew, Q: sp.csr_matrix, tra: _Tra) -> Dict[str, np.ndarray]:
    """The rewards of the ``.srew`` and ``.trew`` files, each name once a kind (a state and a transition
    reward of the same name add up)."""
    n = Q.shape[0]
    rewards: Dict[str, np.ndarray] = {}
    for kind, arg in (("srew", srew), ("trew", trew)):
        seen: Dict[str, PathLike] = {}
        for given, path in _reward_files(arg, kind):
            raw = read_lines(path)
            name, line = _reward_name(raw, path, given)
            if name in seen:
                raise fail(path, line, f"reward {name!r} is declared twice (also in {seen[name]})")
            seen[name] = path
            r = _read_srew(raw, path, n) if kind == "srew" else _read_trew(raw, path, Q, tra)
            rewards[name] = rewards.get(name, 0.0) + r
    return rewards


def read_prism(tra: PathLike, sta: Optional[PathLike] = None, lab: Optional[PathLike] = None,
               srew=None, trew=None) -> CTMC:
    r"""Read a CTMC from PRISM explicit files.

    Parameters
    ----------
    tra : path
        Transitions (``n m`` header, ``i j rate`` lines; Storm's ``ctmc``
        hint line is accepted instead of the header).
    sta : path, optional
        States (``(v1,...,vk)`` header, ``i:(a1,...,ak)`` lines). Without
        it the chain has one variable ``state`` equal to the index.
    lab : path, optional
        Labels (``0="init" 1="deadlock" ...`` header, ``i: 0 1`` lines).
        ``init`` gives ``chain.initial``; the other labels go to
        ``chain.labels``.
    srew, trew : path, list of paths or dict name -> path, optional
        State and transition reward files. A reward's name is the dict key,
        else the ``# Reward structure "name"`` comment of the file, else the
        last dotted part of the file name (``out.queue.srew`` gives
        ``queue``). Transition rewards are folded into state reward rates
        :math:`\sum_j q_{ij} r_{ij}` (see :mod:`ctmc.io`); a state and
        a transition reward file of the same name add up.

    Returns
    -------
    CTMC

    Raises
    ------
    ValueError
        For a malformed or inconsistent file, naming the file and the line.

    Examples
    --------
    A three-state cycle :math:`0 \to 1 \to 2 \to 0` with rates 1, 2, 4 spends
    time in proportion to the mean holding times 1, 1/2, 1/4:

    >>> import os, tempfile, ctmc.io
    >>> with tempfile.TemporaryDirectory() as d:
    ...     tra = os.path.join(d, "cycle.tra")
    ...     with open(tra, "w") as fh:
    ...         _ = fh.write("3 3\n0 1 1\n1 2 2.0\n2 0 4e0\n")
    ...     chain = ctmc.io.read_prism(tra)
    >>> chain.stationary().pi * 7
    array([4., 2., 1.])
    """
    sta_data = read_bytes(sta) if sta is not None else b""
    Q, transitions = _read_tra(tra, sta_data.count(b"\n") + 1)
    n = Q.shape[0]
    columns = _read_sta(sta_data, sta, n) if sta is not None else None
    labels = _read_lab(lab, n) if lab is not None else {}
    initial = labels.pop(INIT, None)
    return make_chain(Q, columns, labels, _read_rewards(srew, trew, Q, transitions), initial)
