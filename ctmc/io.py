r"""Reading and writing chains: PRISM explicit files, Storm's DRN, NumPy archives, Matrix Market.

A chain travels as its generator :math:`Q` (or, in the PRISM and Storm
formats, its off-diagonal *rates* :math:`q_{ij} = Q_{ij} \ge 0`,
:math:`i \ne j`, from which :math:`Q_{ii} = -\sum_{j \ne i} q_{ij}`), its
table of integer state variables, its labels (named sets of states), its
named state rewards :math:`r` (a reward *rate* earned while in a state) and
its initial states. Every reader returns a :class:`ctmc.CTMC` and checks what
it reads; a malformed file raises :class:`ValueError` naming the file and the
line (``path:line: message``). State indices are zero-based everywhere.

PRISM explicit files (``prism model.sm -exportmodel out.tra,sta,lab``)
    ``.tra``: a header ``n m`` (states, transitions), then ``i j rate`` lines,
    one per transition (an optional fourth column, PRISM's action name, is
    ignored). The reader also takes a file that lists a transition
    twice (the rates are summed) or a self-loop ``i i rate`` (ignored: it does
    not change a CTMC).
    ``.sta``: a header ``(v1,...,vk)``, then ``i:(a1,...,ak)`` lines; values
    are integers (negative allowed) or ``true``/``false`` (read as 1/0).
    ``.lab``: a header ``0="init" 1="deadlock" 2="name" ...``, then lines
    ``i: 0 2`` listing the labels of state ``i``. The label ``init`` becomes
    the chain's initial states (``chain.initial``), every other label is kept
    in ``chain.labels``.
    ``.srew`` (state rewards): a header ``n nnz`` then ``i r`` lines.
    ``.trew`` (transition rewards): a header ``n m`` then ``i j r`` lines, an
    impulse :math:`r_{ij}` earned each time the transition :math:`i \to j`
    fires. The reader folds it into the state reward rate with the same
    long-run and cumulative effect,

    .. math:: \tilde r_i = \sum_{j \ne i} q_{ij}\, r_{ij},

    which is exact for long-run averages and expected cumulative rewards
    (the expected number of :math:`i \to j` firings in :math:`[0, t]` is
    :math:`q_{ij}` times the expected time spent in :math:`i`), not for the
    law of the accumulated reward. Lines starting with ``#`` or ``//`` are
    comments everywhere; PRISM writes ``# Reward structure "name"`` at the
    top of reward files and the reader takes the reward's name from it.
    The reader also takes Storm's explicit dialect: a ``.tra`` starting with
    the hint ``ctmc``, a ``.lab`` of the form ``#DECLARATION`` / label names
    / ``#END`` / ``i l1 l2`` lines, reward files without a header.

Storm's DRN format (``storm --prism model.sm --exportbuild out.drn``)
    A header (``@type: CTMC``, ``@parameters``, ``@reward_models`` followed
    by the reward names, ``@nr_states``, ``@nr_choices``), then after
    ``@model`` one block per state::

        state 0 !5 [1.5, 0] init full
        //[n1=0	& n2=1]
        	action 0 [0.5, 0]
        		1 : 2
        		2 : 3

    ``!5`` is the exit rate :math:`E_i = \sum_j q_{ij}`, the bracket the
    state rewards (one per reward model), then the state's labels (quoted
    when they contain blanks). For a CTMC the numbers after ``action`` are
    *rates* (Storm writes the rate matrix, not the embedded probabilities).
    A CTMC has one action per state; its bracket holds *action rewards*,
    earned each time the state is left, which the reader folds into the
    state reward rate :math:`E_i a_i` (exact for long-run and cumulative
    measures, as above). DRN has no section for state variables: Storm
    writes each state's valuation as a comment line ``//[x=1	& b	& !c]``
    after the ``state`` line, and so does :func:`write_drn`; :func:`read_drn`
    reads the variables back from those comments when every state has one
    (``b`` and ``!c`` are the booleans 1 and 0), and otherwise gives the chain
    a single variable ``state`` equal to the index.

NumPy archives (:func:`save_npz`, :func:`load_npz`)
    The generator in CSR form, the state variables, labels, rewards and
    initial states in one compressed ``.npz`` file, read back without pickle
    (``allow_pickle=False``): the exact chain, bit for bit.

Matrix Market (:func:`write_mtx`, :func:`read_mtx`)
    The generator alone, as a sparse real matrix, through
    :func:`scipy.io.mmwrite` / :func:`scipy.io.mmread`.

Rates and rewards are written with Python's shortest round-trip form of a
float (``repr``), so a write followed by a read gives back exactly the same
numbers.

References
----------
PRISM manual, appendix "Explicit Model Files",
https://www.prismmodelchecker.org/manual/Appendices/ExplicitModelFiles.
Storm, DRN format: ``src/storm-parsers/parser/DirectEncodingParser.cpp`` and
``src/storm/io/DirectEncodingExporter.cpp`` in https://github.com/moves-rwth/storm.

Examples
--------
>>> import os, tempfile
>>> import ctmc, ctmc.io
>>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 3)
>>> m.event("arrival", guard=n < 3, rate=1.0, update={n: n + 1})
>>> m.event("departure", guard=n > 0, rate=2.0, update={n: n - 1})
>>> m.label("full", n == 3); m.reward("queue", n)
>>> chain = m.build(initial={"n": 0})
>>> with tempfile.TemporaryDirectory() as d:
...     paths = ctmc.io.write_prism(chain, os.path.join(d, "mm1k"))
...     back = ctmc.io.read_prism(*paths[:3], srew=paths[3:])
...     [os.path.basename(p) for p in paths]
['mm1k.tra', 'mm1k.sta', 'mm1k.lab', 'mm1k.queue.srew']
>>> (back.Q != chain.Q).nnz, back.states["n"].tolist(), back.initial.tolist()
(0, [0, 1, 2, 3], [0])
>>> round(float(back.stationary().pi @ back.rewards["queue"]) * 15, 12)  # pi = (8, 4, 2, 1) / 15
11.0
"""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple, Union

import numpy as np
import scipy.sparse as sp

from .chain import CTMC

__all__ = ["write_prism", "read_prism", "write_drn", "read_drn", "save_npz", "load_npz",
           "write_mtx", "read_mtx"]

PathLike = Union[str, os.PathLike]

#: Label name that PRISM and Storm give the initial states.
INIT = "init"
#: Version of the layout of :func:`save_npz` archives.
NPZ_VERSION = 1


# ---------------------------------------------------------------------------
# shared helpers

def _fail(path, lineno: Optional[int], msg: str) -> ValueError:
    where = f"{path}:{lineno}" if lineno is not None else f"{path}"
    return ValueError(f"{where}: {msg}")


def _lines(path) -> List[Tuple[int, str]]:
    """Non-blank, non-comment lines of a text file as ``(line number, stripped text)``."""
    try:
        with open(path, encoding="utf-8") as fh:
            raw = fh.read().splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    out = []
    for k, line in enumerate(raw, start=1):
        s = line.strip()
        if s and not s.startswith("#") and not s.startswith("//"):
            out.append((k, s))
    return out


def _float(tok: str, path, lineno, what: str) -> float:
    try:
        if "/" in tok:  # Storm may write rationals as p/q
            p, q = tok.split("/")
            return float(p) / float(q)
        return float(tok)
    except (ValueError, ZeroDivisionError):
        raise _fail(path, lineno, f"{what}: expected a number, got {tok!r}") from None


def _int(tok: str, path, lineno, what: str) -> int:
    try:
        return int(tok)
    except ValueError:
        raise _fail(path, lineno, f"{what}: expected an integer, got {tok!r}") from None


def _index(tok: str, n: int, path, lineno, what: str = "state index") -> int:
    i = _int(tok, path, lineno, what)
    if not 0 <= i < n:
        raise _fail(path, lineno, f"{what} {i} out of range: the chain has {n} states (0..{n - 1})")
    return i


def _rate(tok: str, path, lineno, what: str = "rate") -> float:
    x = _float(tok, path, lineno, what)
    if not np.isfinite(x) or x < 0:
        raise _fail(path, lineno, f"{what} must be finite and >= 0, got {tok}")
    return x


def _fmt(x) -> str:
    """Shortest text that reads back as the same float (integers without '.0')."""
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 2 ** 53 else repr(x)


def _off_diagonal(Q: sp.csr_matrix):
    """Rows, columns and rates of the non-zero off-diagonal entries of ``Q``, row-major sorted."""
    C = Q.tocoo()
    keep = (C.row != C.col) & (C.data != 0)
    r, c, v = C.row[keep], C.col[keep], C.data[keep]
    order = np.lexsort((c, r))
    return r[order], c[order], v[order]


def _generator(rows, cols, rates, n: int) -> sp.csr_matrix:
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


def _check_label_names(chain: CTMC) -> None:
    for name in chain.labels:
        if name == INIT:
            raise ValueError(f"labels: the name {INIT!r} is reserved for the initial states in PRISM and "
                             "Storm files (set them with initial=...); rename the label")
        if '"' in name or any(ch.isspace() and ch != " " for ch in name):
            raise ValueError(f"labels: a label name cannot hold quotes, tabs or newlines, got {name!r}")


_SAFE_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")


def _warn_initial_law(chain: CTMC, fmt: str) -> None:
    """PRISM and DRN files hold initial states, not an initial law: say so when the chain has one."""
    law = getattr(chain, "_initial_law", None)
    if law is not None and not np.allclose(law[law > 0], law[law > 0].max(), rtol=1e-12, atol=0):
        from .progress import CtmcWarning
        warnings.warn(f"{fmt} files hold initial states, not an initial law: the chain's law (non-uniform "
                      f"over {int((law > 0).sum())} states) is written as the set of its states; save_npz "
                      "keeps it", CtmcWarning, stacklevel=3)


def _label_sets(chain: CTMC) -> list:
    """``[(name, mask)]``: the initial states as ``init``, then the chain's labels (both writers)."""
    sets = []
    if chain.initial is not None:
        mask = np.zeros(chain.n_states, dtype=bool)
        mask[chain.initial] = True
        sets.append((INIT, mask))
    return sets + [(k, np.asarray(v, dtype=bool)) for k, v in chain.labels.items()]


def _make_chain(Q, columns, labels, rewards, initial_mask) -> CTMC:
    init = initial_mask if initial_mask is not None and initial_mask.any() else None
    return CTMC(Q, columns, labels=labels, rewards=rewards, initial=init)


# ---------------------------------------------------------------------------
# PRISM explicit files

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
    _check_label_names(chain)
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
        fh.writelines(f"{i} {j} {_fmt(x)}\n" for i, j, x in zip(rows.tolist(), cols.tolist(), rates.tolist()))
    names = chain.states.names
    cols_ = [np.asarray(chain.states[k]).astype(np.int64).tolist() for k in names]
    with open(paths[1], "w", encoding="utf-8") as fh:
        fh.write("(" + ",".join(names) + ")\n")
        fh.writelines(f"{i}:(" + ",".join(str(c[i]) for c in cols_) + ")\n" for i in range(n))
    _warn_initial_law(chain, "PRISM")
    sets = _label_sets(chain)
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
            fh.writelines(f"{i} {_fmt(r[i])}\n" for i in nz.tolist())
        paths.append(p)
    return paths


_HINTS = {"ctmc": True, "dtmc": False, "mdp": False, "ma": False}


def _read_tra(path) -> Tuple[sp.csr_matrix, Dict[Tuple[int, int], float]]:
    lines = _lines(path)
    if not lines:
        raise _fail(path, None, "empty file: expected a header 'n m' and transition lines")
    k0, head = lines[0]
    toks = head.split()
    n = m = None
    body = lines[1:]
    if toks[0].lower() in _HINTS:
        if not _HINTS[toks[0].lower()]:
            raise _fail(path, k0, f"this is a {toks[0]} file, not a CTMC")
    elif len(toks) == 2:
        n = _int(toks[0], path, k0, "number of states")
        m = _int(toks[1], path, k0, "number of transitions")
        if n < 1 or m < 0:
            raise _fail(path, k0, f"header 'n m' needs n >= 1 and m >= 0, got {head!r}")
    elif len(toks) == 3:
        raise _fail(path, k0, "header 'n c m' is an MDP's (states, choices, transitions): not a CTMC")
    else:
        raise _fail(path, k0, f"expected a header 'n m' (states, transitions), got {head!r}")
    rows, cols, rates = [], [], []
    for k, line in body:
        t = line.split()
        if len(t) not in (3, 4):
            raise _fail(path, k, f"expected 'i j rate' (and an optional action name), got {line!r}")
        if len(t) == 4 and re.fullmatch(r"[-+.\deE]+", t[3]):
            raise _fail(path, k, "four numbers 'i k j p' are an MDP's transition: not a CTMC")
        if n is not None:
            i, j = _index(t[0], n, path, k, "source"), _index(t[1], n, path, k, "target")
        else:
            i, j = _int(t[0], path, k, "source"), _int(t[1], path, k, "target")
            if i < 0 or j < 0:
                raise _fail(path, k, f"state indices must be >= 0, got {line!r}")
        rows.append(i); cols.append(j); rates.append(_rate(t[2], path, k))
    if m is not None and len(rows) != m:
        raise _fail(path, k0, f"the header announces {m} transitions, the file has {len(rows)} "
                    "(a truncated file?)")
    if n is None:
        n = max(max(rows, default=-1), max(cols, default=-1)) + 1
        if n == 0:
            raise _fail(path, k0, "no transitions and no header: the number of states is unknown")
    pairs: Dict[Tuple[int, int], float] = {}
    for i, j, x in zip(rows, cols, rates):
        if i != j:
            pairs[(i, j)] = pairs.get((i, j), 0.0) + x
    return _generator(rows, cols, rates, n), pairs


def _read_sta(path, n: int) -> Dict[str, np.ndarray]:
    lines = _lines(path)
    if not lines:
        raise _fail(path, None, "empty file: expected a header '(v1,...,vk)'")
    k0, head = lines[0]
    mh = re.fullmatch(r"\((.*)\)", head)
    if not mh:
        raise _fail(path, k0, f"expected a header '(v1,...,vk)', got {head!r}")
    names = [s.strip() for s in mh.group(1).split(",")]
    if not all(names) or len(set(names)) != len(names):
        raise _fail(path, k0, f"variable names must be non-empty and distinct, got {head!r}")
    vals = np.zeros((n, len(names)), dtype=np.int64)
    seen = np.zeros(n, dtype=bool)
    for k, line in lines[1:]:
        ml = re.fullmatch(r"(\S+)\s*:\s*\((.*)\)", line)
        if not ml:
            raise _fail(path, k, f"expected 'i:(a1,...,ak)', got {line!r}")
        i = _index(ml.group(1), n, path, k)
        if seen[i]:
            raise _fail(path, k, f"state {i} is listed twice")
        toks = [s.strip() for s in ml.group(2).split(",")]
        if len(toks) != len(names):
            raise _fail(path, k, f"{len(toks)} values for the {len(names)} variables {names}")
        for c, tok in enumerate(toks):
            low = tok.lower()
            if low in ("true", "false"):
                vals[i, c] = int(low == "true")
            else:
                try:
                    vals[i, c] = int(tok)
                except ValueError:
                    raise _fail(path, k, f"variable {names[c]!r}: expected an integer or true/false, "
                                f"got {tok!r}") from None
        seen[i] = True
    if not seen.all():
        raise _fail(path, None, f"{int((~seen).sum())} of the {n} states have no line "
                    f"(first missing: {int(np.flatnonzero(~seen)[0])})")
    _, first, counts = np.unique(vals, axis=0, return_index=True, return_counts=True)
    if (counts > 1).any():     # two states with the same values: index(...) could not tell them apart
        row = vals[first[np.flatnonzero(counts > 1)[0]]]
        twins = np.flatnonzero((vals == row).all(axis=1))[:2].tolist()
        raise _fail(path, None, f"states {twins[0]} and {twins[1]} have the same values "
                    f"{tuple(int(v) for v in row)}")
    return {name: vals[:, c].copy() for c, name in enumerate(names)}


def _read_lab(path, n: int) -> Dict[str, np.ndarray]:
    lines = _lines(path)
    with open(path, encoding="utf-8") as fh:
        if next((s.strip() for s in fh if s.strip()), "") == "#DECLARATION":
            return _read_storm_lab(path, n)
    if not lines:
        return {}  # no labels (what write_prism writes for a chain without labels or initial states)
    k0, head = lines[0]
    decl = re.findall(r'(\d+)\s*=\s*"([^"]*)"', head)
    if not decl or re.sub(r'(\d+)\s*=\s*"([^"]*)"', "", head).strip():
        raise _fail(path, k0, f'expected a header 0="init" 1="deadlock" ..., got {head!r}')
    ids = {}
    for num, name in decl:
        if int(num) in ids:
            raise _fail(path, k0, f"label number {num} is declared twice")
        ids[int(num)] = name
    masks = {name: np.zeros(n, dtype=bool) for name in ids.values()}
    for k, line in lines[1:]:
        head_, sep, rest = line.partition(":")
        if not sep:
            raise _fail(path, k, f"expected 'i: l1 l2 ...', got {line!r}")
        i = _index(head_.strip(), n, path, k)
        for tok in rest.split():
            num = _int(tok, path, k, "label number")
            if num not in ids:
                raise _fail(path, k, f"label number {num} is not declared in the header")
            masks[ids[num]][i] = True
    return masks


def _read_storm_lab(path, n: int) -> Dict[str, np.ndarray]:
    """Storm's labelling file: ``#DECLARATION``, the label names, ``#END``, then ``i l1 l2`` lines."""
    with open(path, encoding="utf-8") as fh:
        raw = [(k, s.strip()) for k, s in enumerate(fh.read().splitlines(), start=1) if s.strip()]
    try:
        end = next(a for a, (_, s) in enumerate(raw) if s == "#END")
    except StopIteration:
        raise _fail(path, raw[0][0], "'#DECLARATION' without '#END'") from None
    masks = {name: np.zeros(n, dtype=bool) for _, s in raw[1:end] for name in s.split()}
    for k, line in raw[end + 1:]:
        t = line.split()
        i = _index(t[0], n, path, k)
        for name in t[1:]:
            if name not in masks:
                raise _fail(path, k, f"label {name!r} is not declared")
            masks[name][i] = True
    return masks


def _reward_files(arg, kind: str) -> List[Tuple[Optional[str], PathLike]]:
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


def _reward_name(path, given: Optional[str]) -> str:
    if given:
        return given
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                mm = re.match(r'\s*#\s*Reward structure\s+"([^"]+)"', line)
                if mm:
                    return mm.group(1)
                if line.strip() and not line.lstrip().startswith(("#", "//")):
                    break
    except OSError:
        pass  # _lines reports it
    stem = Path(path).stem
    return stem.rsplit(".", 1)[-1] if "." in stem else stem


def _read_srew(path, n: int) -> np.ndarray:
    lines = _lines(path)
    if not lines:
        raise _fail(path, None, "empty file: expected a header 'n nnz'")
    k0, head = lines[0]
    t = head.split()
    if len(t) != 2:
        raise _fail(path, k0, f"expected a header 'n nnz' (states, non-zero rewards), got {head!r}")
    # PRISM's header 'n nnz' starts with n, never a state index; Storm's files have no header
    body = lines[1:] if _int(t[0], path, k0, "state index") == n else lines
    r = np.zeros(n)
    for k, line in body:
        t = line.split()
        if len(t) != 2:
            raise _fail(path, k, f"expected 'i r', got {line!r}")
        i = _index(t[0], n, path, k)
        x = _float(t[1], path, k, "reward")
        if not np.isfinite(x):
            raise _fail(path, k, f"reward must be finite, got {t[1]}")
        r[i] += x
    return r


def _read_trew(path, n: int, rates: Dict[Tuple[int, int], float]) -> np.ndarray:
    lines = _lines(path)
    if not lines:
        raise _fail(path, None, "empty file: expected a header 'n m'")
    k0, head = lines[0]
    t = head.split()
    body = lines  # Storm's transition reward files have no header
    if len(t) == 2:
        nn = _int(t[0], path, k0, "number of states")
        if nn != n:
            raise _fail(path, k0, f"the header gives {nn} states, the transitions file has {n}")
        body = lines[1:]
    r = np.zeros(n)
    for k, line in body:
        t = line.split()
        if len(t) not in (3, 4):
            raise _fail(path, k, f"expected 'i j r', got {line!r}")
        i, j = _index(t[0], n, path, k, "source"), _index(t[1], n, path, k, "target")
        x = _float(t[2], path, k, "reward")
        if not np.isfinite(x):
            raise _fail(path, k, f"reward must be finite, got {t[2]}")
        if i == j:
            continue  # a self-loop never fires in a CTMC
        if (i, j) not in rates:
            raise _fail(path, k, f"reward on the transition {i} -> {j}, which the chain does not have")
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
        :math:`\sum_j q_{ij} r_{ij}` (see the module docstring); a state and
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
        name = _reward_name(path, given)
        rewards[name] = rewards.get(name, 0.0) + _read_srew(path, n)
    for given, path in _reward_files(trew, "trew"):
        name = _reward_name(path, given)
        rewards[name] = rewards.get(name, 0.0) + _read_trew(path, n, rates)
    return _make_chain(Q, columns, labels, rewards, initial)


# ---------------------------------------------------------------------------
# Storm's DRN

def write_drn(chain: CTMC, path: PathLike) -> Path:
    """Write a chain in Storm's DRN format (``@type: CTMC``).

    Parameters
    ----------
    chain : CTMC
    path : path
        The ``.drn`` file to write.

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        If a label is called ``init`` (reserved for the initial states) or
        holds quotes, or a reward name holds blanks.

    Notes
    -----
    Rewards are written as state rewards in ``@reward_models`` order, the
    initial states as the label ``init``, the state variables as a comment
    line ``//[x=1	& y=0]`` after each ``state`` line (Storm's own style;
    Storm ignores comments) and each transition as ``j : rate``.

    Examples
    --------
    >>> import os, tempfile, ctmc, ctmc.io
    >>> chain = ctmc.CTMC.from_rates([[0, 2.0], [1.0, 0]])
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = ctmc.io.write_drn(chain, os.path.join(d, "two.drn"))
    ...     print(open(p).read().split("@model")[1].strip().replace("\\t", "  "))
    state 0 !2
    //[state=0]
      action 0
        1 : 2
    state 1 !1
    //[state=1]
      action 0
        0 : 1
    """
    _check_label_names(chain)
    for name in chain.rewards:
        if not name or any(ch.isspace() for ch in name) or "," in name:
            raise ValueError(f"rewards: a DRN reward name cannot hold blanks or commas, got {name!r}")
    p = Path(path)
    n = chain.n_states
    Q = chain.Q
    exit_rates = -Q.diagonal()
    R = Q.copy().tolil()
    R.setdiag(0)
    R = R.tocsr()
    R.eliminate_zeros()
    R.sort_indices()
    names = chain.states.names
    cols_ = [np.asarray(chain.states[k]).astype(np.int64).tolist() for k in names]
    rew_names = list(chain.rewards)
    rew = [np.asarray(chain.rewards[k], dtype=float).tolist() for k in rew_names]
    _warn_initial_law(chain, "DRN")
    sets = _label_sets(chain)
    quoted = [f'"{k}"' if any(ch.isspace() for ch in k) else k for k, _ in sets]
    member = np.column_stack([m for _, m in sets]) if sets else np.zeros((n, 0), dtype=bool)
    from ._version import __version__
    with open(p, "w", encoding="utf-8") as fh:
        fh.write(f"// Exported by ctmc {__version__}\n@type: CTMC\n@parameters\n\n")
        if rew_names:
            fh.write("@reward_models\n" + " ".join(rew_names) + "\n")
        fh.write(f"@nr_states\n{n}\n@nr_choices\n{n}\n@model\n")
        indptr, indices, data = R.indptr, R.indices.tolist(), R.data.tolist()
        for i in range(n):
            line = f"state {i} !{_fmt(exit_rates[i])}"
            if rew_names:
                line += " [" + ", ".join(_fmt(r[i]) for r in rew) + "]"
            labs = [quoted[k] for k in np.flatnonzero(member[i]).tolist()]
            if labs:
                line += " " + " ".join(labs)
            fh.write(line + "\n")
            fh.write("//[" + "\t& ".join(f"{k}={c[i]}" for k, c in zip(names, cols_)) + "]\n")
            fh.write("\taction 0\n")
            for a in range(indptr[i], indptr[i + 1]):
                fh.write(f"\t\t{indices[a]} : {_fmt(data[a])}\n")
    return p


_LABEL_TOKEN = re.compile(r'"([^"]+)"|(\S+)')


def _valuation(text: str):
    """``{name: value}`` and the number of empty items of a Storm valuation comment ``[x=1\t& b\t& !c]``."""
    out, empty = {}, 0
    for item in text.split("&"):
        item = item.strip()
        if not item:
            empty += 1
        elif "=" in item:
            k, v = item.split("=", 1)
            v = v.strip().lower()
            out[k.strip()] = 1 if v == "true" else 0 if v == "false" else int(v)
        elif item.startswith("!"):
            out[item[1:].strip()] = 0
        else:
            out[item] = 1
    return out, empty


def _drn_states(vals, empties, n, path):
    """State variables from the valuation comments, or None when they are missing or inconsistent."""
    if any(v is None for v in vals):
        return None
    names: List[str] = []
    for v in vals:
        names += [k for k in v if k not in names]
    booleans = {k for v in vals for k, x in v.items() if x in (0, 1)}
    table = np.zeros((n, len(names)), dtype=np.int64)
    for i, (v, e) in enumerate(zip(vals, empties)):
        missing = [k for k in names if k not in v]
        # Storm writes a true boolean as an empty item in some versions: one empty item per missing boolean
        if missing and (len(missing) != e or not set(missing) <= booleans):
            return None
        for c, k in enumerate(names):
            table[i, c] = v.get(k, 1)
    return {k: table[:, c].copy() for c, k in enumerate(names)}


def read_drn(path: PathLike) -> CTMC:
    r"""Read a CTMC from a file in Storm's DRN format.

    Parameters
    ----------
    path : path
        A DRN file of ``@type: CTMC`` with numeric values (no parameters).

    Returns
    -------
    CTMC
        Labels from the ``state`` lines (``init`` gives ``chain.initial``),
        rewards from ``@reward_models`` (state rewards plus action rewards
        folded as :math:`E_i a_i`), state variables from Storm's valuation
        comments when every state has one.

    Raises
    ------
    ValueError
        For a malformed file or one that is not a CTMC, naming the file and
        the line.

    Examples
    --------
    >>> import os, tempfile, ctmc.io
    >>> text = '''@type: CTMC
    ... @parameters
    ...
    ... @nr_states
    ... 2
    ... @nr_choices
    ... 2
    ... @model
    ... state 0 !3 init
    ... \taction 0
    ... \t\t1 : 3
    ... state 1 !1 busy
    ... \taction 0
    ... \t\t0 : 1
    ... '''
    >>> with tempfile.TemporaryDirectory() as d:
    ...     p = os.path.join(d, "two.drn")
    ...     with open(p, "w") as fh:
    ...         _ = fh.write(text)
    ...     chain = ctmc.io.read_drn(p)
    >>> chain.stationary().pi, chain.initial.tolist(), chain.labels["busy"].tolist()
    (array([0.25, 0.75]), [0], [False, True])
    """
    try:
        with open(path, encoding="utf-8") as fh:
            raw = fh.read().splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    k, N = 0, len(raw)
    mtype = n = None
    reward_names: List[str] = []

    def next_line(after):
        nonlocal k
        if k >= N:
            raise _fail(path, after, "the file ends here, a value was expected on the next line")
        k += 1
        return raw[k - 1].strip()

    in_model = False
    while k < N and not in_model:
        k += 1
        line = raw[k - 1].strip()
        if not line or line.startswith("//"):
            continue
        if line.startswith("@type:"):
            mtype = line[6:].strip()
            if mtype.upper() != "CTMC":
                raise _fail(path, k, f"model type {mtype!r}: only CTMC files can be read")
        elif line.startswith("@value_type:"):
            vt = line.split(":", 1)[1].strip()
            if vt not in ("double", "rational"):
                raise _fail(path, k, f"value type {vt!r}: only numbers (double, rational) can be read")
        elif line == "@parameters":
            params = next_line(k).split()
            if params:
                raise _fail(path, k, f"parametric model (parameters {params}): only numbers can be read")
        elif line == "@placeholders":
            raise _fail(path, k, "placeholders ($name) are not supported: export the model with numbers")
        elif line == "@reward_models":
            reward_names = next_line(k).split()
        elif line == "@nr_states":
            text = next_line(k)
            n = _int(text, path, k, "number of states")
            if n < 1:
                raise _fail(path, k, f"the number of states must be >= 1, got {n}")
        elif line == "@nr_choices":
            next_line(k)
        elif line == "@model":
            in_model = True
        else:
            raise _fail(path, k, f"unexpected header line {line!r}")
    if not in_model:
        raise _fail(path, None, "no '@model' section")
    if mtype is None:
        raise _fail(path, None, "no '@type:' line before '@model'")
    if n is None:
        raise _fail(path, None, "no '@nr_states' before '@model'")

    rows, cols, rates = [], [], []
    state_rew: List[np.ndarray] = []
    action_rew: List[np.ndarray] = []
    masks: Dict[str, np.ndarray] = {}
    vals: List[Optional[dict]] = [None] * n
    empties = [0] * n
    declared_exit = np.zeros(n)
    exit_line = [0] * n
    state = -1
    actions = 0

    def put(store, values, i, lineno):
        while len(store) < len(values):
            store.append(np.zeros(n))
        for c, tok in enumerate(values):
            x = _float(tok.strip(), path, lineno, "reward")
            if not np.isfinite(x):
                raise _fail(path, lineno, f"reward must be finite, got {tok.strip()}")
            store[c][i] = x

    while k < N:
        k += 1
        line = raw[k - 1].strip()
        if not line:
            continue
        if line.startswith("//"):
            body = line[2:].strip()
            if state >= 0 and vals[state] is None and body.startswith("[") and body.endswith("]"):
                try:
                    vals[state], empties[state] = _valuation(body[1:-1])
                except ValueError:
                    pass  # not a valuation: an ordinary comment
            continue
        if line.startswith("state "):
            t = line[6:].split(None, 1)
            i = _int(t[0], path, k, "state id")
            if i != state + 1:
                raise _fail(path, k, f"states must be listed in order 0, 1, ...: expected state {state + 1}, got {i}")
            if i >= n:
                raise _fail(path, k, f"state {i} out of range: @nr_states is {n}")
            state, actions = i, 0
            rest = t[1].strip() if len(t) > 1 else ""
            if not rest.startswith("!"):
                raise _fail(path, k, "a CTMC state line needs its exit rate '!rate' after the id")
            tok, _, rest = rest[1:].partition(" ")
            declared_exit[i] = _rate(tok, path, k, "exit rate")
            exit_line[i] = k
            rest = rest.strip()
            if rest.startswith("["):
                end = rest.find("]")
                if end < 0:
                    raise _fail(path, k, "']' missing after the state rewards")
                put(state_rew, rest[1:end].split(","), i, k)
                rest = rest[end + 1:].strip()
            for mq in _LABEL_TOKEN.finditer(rest):
                name = mq.group(1) or mq.group(2)
                masks.setdefault(name, np.zeros(n, dtype=bool))[i] = True
        elif line.startswith("action"):
            if state < 0:
                raise _fail(path, k, "'action' before the first 'state'")
            actions += 1
            if actions > 1:
                raise _fail(path, k, f"state {state} has a second action: a CTMC has one per state "
                            "(this is a Markov automaton or an MDP)")
            rest = line[6:].strip()
            if "[" in rest:
                end = rest.find("]")
                if end < 0:
                    raise _fail(path, k, "']' missing after the action rewards")
                put(action_rew, rest[rest.find("[") + 1:end].split(","), state, k)
        else:
            if state < 0:
                raise _fail(path, k, f"transition before the first 'state': {line!r}")
            target, sep, value = line.partition(":")
            if not sep:
                raise _fail(path, k, f"expected a transition 'j : rate', got {line!r}")
            j = _index(target.strip(), n, path, k, "target state")
            rows.append(state); cols.append(j); rates.append(_rate(value.strip(), path, k))
    if state != n - 1:
        raise _fail(path, None, f"@nr_states is {n} but the file lists {state + 1} states")

    rows_a, rates_a = np.asarray(rows, dtype=np.int64), np.asarray(rates, dtype=float)
    row_sums = np.bincount(rows_a, weights=rates_a, minlength=n)  # self-loops included, as in Storm
    # Storm prints about 10 significant digits (older versions 6): a loose check, for a lost transition
    bad = np.abs(row_sums - declared_exit) > 1e-5 * np.maximum(row_sums, declared_exit)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise _fail(path, exit_line[i], f"exit rate !{_fmt(declared_exit[i])} of state {i} is not the sum "
                    f"of its rates ({_fmt(row_sums[i])})")
    Q = _generator(rows, cols, rates, n)
    count = max(len(state_rew), len(action_rew))
    names = [reward_names[c] if c < len(reward_names) else f"rew{c}" for c in range(count)]
    rewards = {}
    for c, name in enumerate(names):
        r = state_rew[c].copy() if c < len(state_rew) else np.zeros(n)
        if c < len(action_rew):
            r += row_sums * action_rew[c]
        rewards[name] = r
    initial = masks.pop(INIT, None)
    return _make_chain(Q, _drn_states(vals, empties, n, path), masks, rewards, initial)


# ---------------------------------------------------------------------------
# NumPy archives

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
    if getattr(chain, "_initial_law", None) is not None:
        arrays["initial_law"] = np.asarray(chain.initial_law, dtype=float)
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
        chain = _make_chain(Q, states or None, labels, rewards, mask)
        if law is not None:
            chain.set_initial_law(law)
        return chain
    except (ValueError, IndexError) as exc:
        raise ValueError(f"{path}: {exc}") from None


# ---------------------------------------------------------------------------
# Matrix Market

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
