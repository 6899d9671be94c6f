r"""Storm's DRN format (``@type: CTMC``): :func:`write_drn` and :func:`read_drn`.

The layout (header, one block per state, valuation comments, action rewards
folded into state reward rates :math:`E_i a_i`) is described in :mod:`ctmc.io`.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

from .._version import __version__
from ..chain import CTMC
from ._common import (INIT, PathLike, check_label_names, fail, fmt, generator_from_rates, label_sets,
                      make_chain, parse_float, parse_index, parse_int, parse_rate,
                      warn_initial_law)

__all__ = ["write_drn", "read_drn"]


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
    check_label_names(chain)
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
    warn_initial_law(chain, "DRN")
    sets = label_sets(chain)
    quoted = [f'"{k}"' if any(ch.isspace() for ch in k) else k for k, _ in sets]
    member = np.column_stack([m for _, m in sets]) if sets else np.zeros((n, 0), dtype=bool)
    with open(p, "w", encoding="utf-8") as fh:
        fh.write(f"// Exported by ctmc {__version__}\n@type: CTMC\n@parameters\n\n")
        if rew_names:
            fh.write("@reward_models\n" + " ".join(rew_names) + "\n")
        fh.write(f"@nr_states\n{n}\n@nr_choices\n{n}\n@model\n")
        indptr, indices, data = R.indptr, R.indices.tolist(), R.data.tolist()
        for i in range(n):
            line = f"state {i} !{fmt(exit_rates[i])}"
            if rew_names:
                line += " [" + ", ".join(fmt(r[i]) for r in rew) + "]"
            labs = [quoted[k] for k in np.flatnonzero(member[i]).tolist()]
            if labs:
                line += " " + " ".join(labs)
            fh.write(line + "\n")
            fh.write("//[" + "\t& ".join(f"{k}={c[i]}" for k, c in zip(names, cols_)) + "]\n")
            fh.write("\taction 0\n")
            for a in range(indptr[i], indptr[i + 1]):
                fh.write(f"\t\t{indices[a]} : {fmt(data[a])}\n")
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
            raise fail(path, after, "the file ends here, a value was expected on the next line")
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
                raise fail(path, k, f"model type {mtype!r}: only CTMC files can be read")
        elif line.startswith("@value_type:"):
            vt = line.split(":", 1)[1].strip()
            if vt not in ("double", "rational"):
                raise fail(path, k, f"value type {vt!r}: only numbers (double, rational) can be read")
        elif line == "@parameters":
            params = next_line(k).split()
            if params:
                raise fail(path, k, f"parametric model (parameters {params}): only numbers can be read")
        elif line == "@placeholders":
            raise fail(path, k, "placeholders ($name) are not supported: export the model with numbers")
        elif line == "@reward_models":
            reward_names = next_line(k).split()
        elif line == "@nr_states":
            text = next_line(k)
            n = parse_int(text, path, k, "number of states")
            if n < 1:
                raise fail(path, k, f"the number of states must be >= 1, got {n}")
        elif line == "@nr_choices":
            next_line(k)
        elif line == "@model":
            in_model = True
        else:
            raise fail(path, k, f"unexpected header line {line!r}")
    if not in_model:
        raise fail(path, None, "no '@model' section")
    if mtype is None:
        raise fail(path, None, "no '@type:' line before '@model'")
    if n is None:
        raise fail(path, None, "no '@nr_states' before '@model'")

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
            x = parse_float(tok.strip(), path, lineno, "reward")
            if not np.isfinite(x):
                raise fail(path, lineno, f"reward must be finite, got {tok.strip()}")
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
            i = parse_int(t[0], path, k, "state id")
            if i != state + 1:
                raise fail(path, k, f"states must be listed in order 0, 1, ...: expected state {state + 1}, got {i}")
            if i >= n:
                raise fail(path, k, f"state {i} out of range: @nr_states is {n}")
            state, actions = i, 0
            rest = t[1].strip() if len(t) > 1 else ""
            if not rest.startswith("!"):
                raise fail(path, k, "a CTMC state line needs its exit rate '!rate' after the id")
            tok, _, rest = rest[1:].partition(" ")
            declared_exit[i] = parse_rate(tok, path, k, "exit rate")
            exit_line[i] = k
            rest = rest.strip()
            if rest.startswith("["):
                end = rest.find("]")
                if end < 0:
                    raise fail(path, k, "']' missing after the state rewards")
                put(state_rew, rest[1:end].split(","), i, k)
                rest = rest[end + 1:].strip()
            for mq in _LABEL_TOKEN.finditer(rest):
                name = mq.group(1) or mq.group(2)
                masks.setdefault(name, np.zeros(n, dtype=bool))[i] = True
        elif line.startswith("action"):
            if state < 0:
                raise fail(path, k, "'action' before the first 'state'")
            actions += 1
            if actions > 1:
                raise fail(path, k, f"state {state} has a second action: a CTMC has one per state "
                           "(this is a Markov automaton or an MDP)")
            rest = line[6:].strip()
            if "[" in rest:
                end = rest.find("]")
                if end < 0:
                    raise fail(path, k, "']' missing after the action rewards")
                put(action_rew, rest[rest.find("[") + 1:end].split(","), state, k)
        else:
            if state < 0:
                raise fail(path, k, f"transition before the first 'state': {line!r}")
            target, sep, value = line.partition(":")
            if not sep:
                raise fail(path, k, f"expected a transition 'j : rate', got {line!r}")
            j = parse_index(target.strip(), n, path, k, "target state")
            rows.append(state); cols.append(j); rates.append(parse_rate(value.strip(), path, k))
    if state != n - 1:
        raise fail(path, None, f"@nr_states is {n} but the file lists {state + 1} states")

    rows_a, rates_a = np.asarray(rows, dtype=np.int64), np.asarray(rates, dtype=float)
    row_sums = np.bincount(rows_a, weights=rates_a, minlength=n)  # self-loops included, as in Storm
    # Storm prints about 10 significant digits (older versions 6): a loose check, for a lost transition
    bad = np.abs(row_sums - declared_exit) > 1e-5 * np.maximum(row_sums, declared_exit)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise fail(path, exit_line[i], f"exit rate !{fmt(declared_exit[i])} of state {i} is not the sum "
                   f"of its rates ({fmt(row_sums[i])})")
    Q = generator_from_rates(rows, cols, rates, n)
    count = max(len(state_rew), len(action_rew))
    names = [reward_names[c] if c < len(reward_names) else f"rew{c}" for c in range(count)]
    rewards = {}
    for c, name in enumerate(names):
        r = state_rew[c].copy() if c < len(state_rew) else np.zeros(n)
        if c < len(action_rew):
            r += row_sums * action_rew[c]
        rewards[name] = r
    initial = masks.pop(INIT, None)
    return make_chain(Q, _drn_states(vals, empties, n, path), masks, rewards, initial)
