r"""PRISM's explicit files: ``.tra``, ``.sta``, ``.lab``, ``.srew``, ``.trew``.

:func:`write_prism` and :func:`read_prism` (layout of the files, Storm's
explicit dialect and the folding of transition rewards into state reward
rates: see :mod:`ctmc.io`).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

import numpy as np
import scipy.sparse as sp

from ..chain import CTMC
from ._common import (INIT, PathLike, check_label_names, data_lines, fail, fmt, generator_from_rates,
                      label_sets, make_chain, parse_index, parse_int, parse_rate, parse_reward,
                      read_lines, warn_initial_law)

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


def _read_tra(path) -> Tuple[sp.csr_matrix, Dict[Tuple[int, int], float]]:
    """The generator of a ``.tra`` file and its rates ``{(i, j): q_ij}`` (for the transition rewards)."""
    lines = data_lines(read_lines(path))
    if not lines:
        raise fail(path, None, "empty file: expected a header 'n m' and transition lines")
    k0, head = lines[0]
    toks = head.split()
    n = m = None
    body = lines[1:]
    if toks[0].lower() in _HINTS:
        if not _HINTS[toks[0].lower()]:
            raise fail(path, k0, f"this is a {toks[0]} file, not a CTMC")
    elif len(toks) == 2:
        n = parse_int(toks[0], path, k0, "number of states")
        m = parse_int(toks[1], path, k0, "number of transitions")
        if n < 1 or m < 0:
            raise fail(path, k0, f"header 'n m' needs n >= 1 and m >= 0, got {head!r}")
    elif len(toks) == 3:
        raise fail(path, k0, "header 'n c m' is an MDP's (states, choices, transitions): not a CTMC")
    else:
        raise fail(path, k0, f"expected a header 'n m' (states, transitions), got {head!r}")
    rows, cols, rates = [], [], []
    for k, line in body:
        t = line.split()
        if len(t) not in (3, 4):
            raise fail(path, k, f"expected 'i j rate' (and an optional action name), got {line!r}")
        if len(t) == 4 and re.fullmatch(r"[-+.\deE]+", t[3]):
            raise fail(path, k, "four numbers 'i k j p' are an MDP's transition: not a CTMC")
        if n is not None:
            i, j = parse_index(t[0], n, path, k, "source"), parse_index(t[1], n, path, k, "target")
        else:
            i, j = parse_int(t[0], path, k, "source"), parse_int(t[1], path, k, "target")
            if i < 0 or j < 0:
                raise fail(path, k, f"state indices must be >= 0, got {line!r}")
        rows.append(i); cols.append(j); rates.append(parse_rate(t[2], path, k))
    if m is not None and len(rows) != m:
        raise fail(path, k0, f"the header announces {m} transitions, the file has {len(rows)} "
                   "(a truncated file?)")
    if n is None:
        n = max(max(rows, default=-1), max(cols, default=-1)) + 1
        if n == 0:
            raise fail(path, k0, "no transitions and no header: the number of states is unknown")
    pairs: Dict[Tuple[int, int], float] = {}
    for i, j, x in zip(rows, cols, rates):
        if i != j:
            pairs[(i, j)] = pairs.get((i, j), 0.0) + x
    return generator_from_rates(rows, cols, rates, n), pairs


def _read_sta(path, n: int) -> Dict[str, np.ndarray]:
    """The state variables of a ``.sta`` file, one integer column a variable."""
    lines = data_lines(read_lines(path))
    if not lines:
        raise fail(path, None, "empty file: expected a header '(v1,...,vk)'")
    k0, head = lines[0]
    mh = re.fullmatch(r"\((.*)\)", head)
    if not mh:
        raise fail(path, k0, f"expected a header '(v1,...,vk)', got {head!r}")
    names = [s.strip() for s in mh.group(1).split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise fail(path, k0, f"variable names must be non-empty and distinct, got {head!r}")
    vals = np.zeros((n, len(names)), dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    for k, line in lines[1:]:
        ml = re.fullmatch(r"(\S+)\s*:\s*\((.*)\)", line)
        if not ml:
            raise fail(path, k, f"expected 'i:(a1,...,ak)', got {line!r}")
        i = parse_index(ml.group(1), n, path, k)
        if seen[i]:
            raise fail(path, k, f"state {i} is listed twice")
        toks = [s.strip() for s in ml.group(2).split(",")]
        if len(toks) != len(names):
            raise fail(path, k, f"{len(toks)} values for the {len(names)} variables {names}")
        for c, tok in enumerate(toks):
            low = tok.lower()
            if low in ("true", "false"):
                vals[i, c] = int(low == "true")
            else:
                try:
                    vals[i, c] = int(tok)
                except ValueError:
                    raise fail(path, k, f"variable {names[c]!r}: expected an integer or true/false, "
                               f"got {tok!r}") from None
        seen[i] = True
    if not seen.all():
        raise fail(path, None, f"{int((~seen).sum())} of the {n} states have no line "
                   f"(first missing: {int(np.flatnonzero(~seen)[0])})")
    _, first, counts = np.unique(vals, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():     # two states with the same values: index(...) could not tell them apart
        row = vals[first[np.flatnonzero(counts > 1)[0]]]
        twins = np.flatnonzero((vals == row).all(axis=1))[:2].tolist()
        raise fail(path, None, f"states {twins[0]} and {twins[1]} have the same values "
                   f"{tuple(int(v) for v in row)}")
    return {name: vals[:, c].copy() for c, name in enumerate(names)}


def _read_lab(path, n: int) -> Dict[str, np.ndarray]:
    """The labels of a ``.lab`` file (PRISM's or Storm's), ``init`` among them."""
    raw = read_lines(path)
    if next((s.strip() for s in raw if s.strip()), "") == "#DECLARATION":
        return _read_storm_lab(raw, path, n)
    lines = data_lines(raw)
    if not lines:
        return {}  # no labels (what write_prism writes for a chain without labels or initial states)
    k0, head = lines[0]
    decl = re.findall(r'(\d+)\s*=\s*"([^"]*)"', head)
    if not decl or re.sub(r'(\d+)\s*=\s*"([^"]*)"', "", head).strip():
        raise fail(path, k0, f'expected a header 0="init" 1="deadlock" ..., got {head!r}')
    ids = {}
    for num, name in decl:
        if int(num) in ids:
            raise fail(path, k0, f"label number {num} is declared twice")
        ids[int(num)] = name
    masks = {name: np.zeros(n, dtype=bool) for name in ids.values()}
    for k, line in lines[1:]:
        head_, sep, rest = line.partition(":")
        if not sep:
            raise fail(path, k, f"expected 'i: l1 l2 ...', got {line!r}")
        i = parse_index(head_.strip(), n, path, k)
        for tok in rest.split():
            num = parse_int(tok, path, k, "label number")
            if num not in ids:
                raise fail(path, k, f"label number {num} is not declared in the header")
            masks[ids[num]][i] = True
    return masks


def _read_storm_lab(lines: List[str], path, n: int) -> Dict[str, np.ndarray]:
    """Storm's labelling file: ``#DECLARATION``, the label names, ``#END``, then ``i l1 l2`` lines."""
    raw = [(k, s.strip()) for k, s in enumerate(lines, start=1) if s.strip()]
    try:
        end = next(a for a, (_, s) in enumerate(raw) if s == "#END")
    except StopIteration:
        raise fail(path, raw[0][0], "'#DECLARATION' without '#END'") from None
    masks = {name: np.zeros(n, dtype=bool) for _, s in raw[1:end] for name in s.split()}
    for k, line in raw[end + 1:]:
        t = line.split()
        i = parse_index(t[0], n, path, k)
        for name in t[1:]:
            if name not in masks:
                raise fail(path, k, f"label {name!r} is not declared")
            masks[name][i] = True
    return masks


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
        raise TypeError(f"{kind}: expected a path, a list of paths or a dict name -> path, got {arg!r}") from None


def _reward_name(raw: List[str], path, given: Optional[str]) -> str:
    """A reward's name: ``given``, else the file's ``# Reward structure "name"``, else its file name's."""
    if given:
        return given
    for line in raw:
        mm = re.match(r'\s*#\s*Reward structure\s+"([^"]+)"', line)
        if mm:
            return mm.group(1)
        if line.strip() and not line.lstrip().startswith(("#", "//")):
            break
    stem = Path(path).stem
    return stem.rsplit(".", 1)[-1] if "." in stem else stem


def _read_srew(raw: List[str], path, n: int) -> np.ndarray:
    """The state reward of a ``.srew`` file (its lines ``raw``)."""
    lines = data_lines(raw)
    if not lines:
        raise fail(path, None, "empty file: expected a header 'n nnz'")
    k0, head = lines[0]
    t = head.split()
    if len(t) != 2:
        raise fail(path, k0, f"expected a header 'n nnz' (states, non-zero rewards), got {head!r}")
    # PRISM's header 'n nnz' starts with n, never a state index; Storm's files have no header
    body = lines[1:] if parse_int(t[0], path, k0, "state index") == n else lines
    r = np.zeros(n)
    for k, line in body:
        t = line.split()
        if len(t) != 2:
            raise fail(path, k, f"expected 'i r', got {line!r}")
        i = parse_index(t[0], n, path, k)
        r[i] += parse_reward(t[1], path, k)
    return r


def _read_trew(raw: List[str], path, n: int, rates: Dict[Tuple[int, int], float]) -> np.ndarray:
    """The transition reward of a ``.trew`` file (its lines ``raw``) folded into a state reward rate."""
    lines = data_lines(raw)
    if not lines:
        raise fail(path, None, "empty file: expected a header 'n m'")
    k0, head = lines[0]
    t = head.split()
    body = lines  # Storm's transition reward files have no header
    if len(t) == 2:
        nn = parse_int(t[0], path, k0, "number of states")
        if nn != n:
            raise fail(path, k0, f"the header gives {nn} states, the transitions file has {n}")
        body = lines[1:]
    r = np.zeros(n)
    for k, line in body:
        t = line.split()
        if len(t) not in (3, 4):
            raise fail(path, k, f"expected 'i j r', got {line!r}")
        i, j = parse_index(t[0], n, path, k, "source"), parse_index(t[1], n, path, k, "target")
        x = parse_reward(t[2], path, k)
        if i == j:
            continue  # a self-loop never fires in a CTMC
        if (i, j) not in rates:
            raise fail(path, k, f"reward on the transition {i} -> {j}, which the chain does not have")
        r[i] += rates[(i, j)] * x
    return r


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
    Q, rates = _read_tra(tra)
    n = Q.shape[0]
    columns = _read_sta(sta, n) if sta is not None else None
    labels = _read_lab(lab, n) if lab is not None else {}
    initial = labels.pop(INIT, None)
    rewards: Dict[str, np.ndarray] = {}
    for given, path in _reward_files(srew, "srew"):
        raw = read_lines(path)
        name = _reward_name(raw, path, given)
        rewards[name] = rewards.get(name, 0.0) + _read_srew(raw, path, n)
    for given, path in _reward_files(trew, "trew"):
        raw = read_lines(path)
        name = _reward_name(raw, path, given)
        rewards[name] = rewards.get(name, 0.0) + _read_trew(raw, path, n, rates)
    return make_chain(Q, columns, labels, rewards, initial)
