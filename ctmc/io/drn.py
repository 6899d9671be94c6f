r"""Storm's DRN format (``@type: CTMC``): :func:`write_drn` and :func:`read_drn`.

The layout (header, one block per state, valuation comments, action rewards
folded into state reward rates :math:`E_i a_i`) is described in :mod:`ctmc.io`.
:func:`read_drn` reads a file in named steps: the header up to ``@model``
(:func:`_read_header`), the state blocks (:func:`_read_blocks`), the check of
the declared exit rates (:func:`_exit_rates`), the rewards (:func:`_rewards`)
and the state variables from the valuation comments (:func:`_drn_states`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .._version import __version__
from ..chain import CTMC
from ._common import (BLANKS, INIT, PathLike, batch_indices, batch_rates, check_label_names,
                      distinct_states, fail, fields, fmt, gc_paused, generator_from_rates, label_sets,
                      make_chain, parse_count, parse_index, parse_int, parse_rate, parse_reward, read_lines,
                      unique_names, warn_initial_law)

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


def _valuation(text: str, path, lineno):
    """``{name: value}`` and the number of empty items of a Storm valuation comment ``[x=1\t& b\t& !c]``."""
    out, empty = {}, 0
    for item in text.split("&"):
        item = item.strip(BLANKS)
        if not item:
            empty += 1
            continue
        if "=" in item:
            k, v = item.split("=", 1)
            k, v = k.strip(BLANKS), v.strip(BLANKS)
            if len(v) <= 18 and v.isascii() and v.isdigit():     # the common case, without a call
                value = int(v)
            else:
                low = v.lower()
                value = (1 if low == "true" else 0 if low == "false" else
                         parse_int(v, path, lineno, f"variable {k!r}"))
        elif item.startswith("!"):
            k, value = item[1:].strip(BLANKS), 0
        else:
            k, value = item, 1
        if k in out:
            raise fail(path, lineno, f"variable {k!r} has two values in the valuation")
        out[k] = value
    return out, empty


def _drn_states(blocks: "_Blocks", path):
    """State variables from the valuation comments; None when no state has one. A file where some
    states have one and others not, or where a state lacks a variable another has, is refused (naming
    the line): dropping every valuation for an index variable would reinterpret the file silently."""
    vals, empties, n = blocks.vals, blocks.empties, len(blocks.vals)
    if all(v is None for v in vals):
        return None
    if any(v is None for v in vals):
        i = next(i for i, v in enumerate(vals) if v is None)
        raise fail(path, blocks.val_line[i], f"state {i} has no valuation comment '//[...]', other states do")
    names: List[str] = []
    for v in vals:
        names += [k for k in v if k not in names]
    booleans = {k for v in vals for k, x in v.items() if x in (0, 1)}
    table = np.zeros((n, len(names)), dtype=np.int64)
    for i, (v, e) in enumerate(zip(vals, empties)):
        missing = [k for k in names if k not in v]
        # Storm writes a true boolean as an empty item in some versions: one empty item per missing boolean
        if missing and (len(missing) != e or not set(missing) <= booleans):
            raise fail(path, blocks.val_line[i], f"the valuation of state {i} has no value for "
                       f"{', '.join(missing)} (other states have one)")
        for c, k in enumerate(names):
            table[i, c] = v.get(k, 1)
    distinct_states(table, path, blocks.val_line)
    return {k: table[:, c].copy() for c, k in enumerate(names)}


@dataclass(frozen=True)
class _Header:
    """What the header of a DRN file declares before ``@model``."""
    n: int                      # @nr_states (checked against the blocks read, never allocated)
    reward_names: List[str]     # @reward_models, in the order of the reward brackets
    model: int                  # line number of @model: the state blocks follow it
    n_line: int                 # line number of the value of @nr_states
    choices: Optional[Tuple[int, int]] = None   # @nr_choices and the line of its value


def _read_header(raw: List[str], path) -> _Header:
    """The header of a DRN file, from its first line to ``@model``.

    ``@type`` (CTMC only), ``@value_type`` (numbers), ``@parameters`` (none),
    ``@reward_models``, ``@nr_states`` and ``@nr_choices``; ``//`` comments.
    """
    k, N = 0, len(raw)
    mtype = n = n_line = choices = None
    reward_names: List[str] = []

    def next_line(after):
        nonlocal k
        if k >= N:
            raise fail(path, after, "the file ends here, a value was expected on the next line")
        k += 1
        return raw[k - 1].strip(BLANKS)

    in_model = False
    while k < N and not in_model:
        k += 1
        line = raw[k - 1].strip(BLANKS)
        if not line or line.startswith("//"):
            continue
        if line.startswith("@type:"):
            mtype = line[6:].strip(BLANKS)
            if mtype.upper() != "CTMC":
                raise fail(path, k, f"model type {mtype!r}: only CTMC files can be read")
        elif line.startswith("@value_type:"):
            vt = line.split(":", 1)[1].strip(BLANKS)
            if vt not in ("double", "rational"):
                raise fail(path, k, f"value type {vt!r}: only numbers (double, rational) can be read")
        elif line == "@parameters":
            params = fields(next_line(k))
            if params:
                raise fail(path, k, f"parametric model (parameters {params}): only numbers can be read")
        elif line == "@placeholders":
            raise fail(path, k, "placeholders ($name) are not supported: export the model with numbers")
        elif line == "@reward_models":
            text = next_line(k)         # k is now the line of the value
            reward_names = unique_names(fields(text), path, k, "reward model")
        elif line == "@nr_states":
            text = next_line(k)
            n, n_line = parse_count(text, path, k, "number of states", lo=1), k
        elif line == "@nr_choices":
            text = next_line(k)
            choices = (parse_count(text, path, k, "number of choices"), k)
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
    return _Header(n, reward_names, k, n_line, choices)


@dataclass
class _Blocks:
    """What the state blocks after ``@model`` hold, gathered line by line (one method a kind of line).

    Every list grows with the states actually read (one entry a state), never
    with the ``@nr_states`` the header declares: a short file declaring a
    huge chain costs what it holds before it is refused.
    """
    n: int                      # @nr_states: the bound of the state ids and targets
    path: object
    n_rewards: Optional[int] = None   # values in each reward bracket (@reward_models), None: not declared
    rows: List[int] = field(default_factory=list)       # transitions: source, target, rate (as read)
    targets: List[str] = field(default_factory=list)
    values: List[str] = field(default_factory=list)
    where: List[int] = field(default_factory=list)      # and the line of each
    state_rew: List[Sequence[float]] = field(default_factory=list)   # of each state, one a reward model
    action_rew: List[Sequence[float]] = field(default_factory=list)
    labels: Dict[str, List[int]] = field(default_factory=dict)   # name -> its states, init among them
    vals: List[Optional[dict]] = field(default_factory=list)     # valuation comment of each state
    empties: List[int] = field(default_factory=list)  # its empty items (true booleans, some Storm versions)
    val_line: List[int] = field(default_factory=list)  # and its line
    declared_exit: List[float] = field(default_factory=list)   # '!rate' of each state line
    exit_line: List[int] = field(default_factory=list)         # and the line it is on
    actions: int = 0            # actions of the current state so far
    state: int = -1             # the state whose block is being read (-1 before the first)

    def comment(self, body: str, k: int) -> None:
        r"""A comment ``// body``: the valuation ``[x=1\t& b]`` of the current state, or nothing."""
        state = self.state
        if state >= 0 and self.vals[state] is None and body.startswith("[") and body.endswith("]"):
            self.vals[state], self.empties[state] = _valuation(body[1:-1], self.path, k)
            self.val_line[state] = k

    def state_line(self, line: str, k: int) -> None:
        """``state i !exit [r1, r2] label "a label"``: the next state, its exit rate, rewards and labels."""
        path, n = self.path, self.n
        t = fields(line[6:].strip(BLANKS), 1)
        i = parse_int(t[0], path, k, "state id") if t else None
        if i != self.state + 1:
            raise fail(path, k, "states must be listed in order 0, 1, ...: "
                       f"expected state {self.state + 1}, got {i}")
        if i >= n:
            raise fail(path, k, f"state {i} out of range: @nr_states is {n}")
        rest = t[1].strip(BLANKS) if len(t) > 1 else ""
        if not rest.startswith("!"):
            raise fail(path, k, "a CTMC state line needs its exit rate '!rate' after the id")
        tok, _, rest = rest[1:].partition(" ")
        self.state = i
        self.declared_exit.append(parse_rate(tok, path, k, "exit rate", zero=True))
        self.exit_line.append(k)
        self.vals.append(None); self.empties.append(0); self.val_line.append(k)
        self.state_rew.append(()); self.action_rew.append(())     # () is one object, not one a state
        self.actions = 0
        rest = rest.strip(BLANKS)
        if rest.startswith("["):
            end = rest.find("]")
            if end < 0:
                raise fail(path, k, "']' missing after the state rewards")
            self.state_rew[i] = self._rewards(rest[1:end], k)
            rest = rest[end + 1:].strip(BLANKS)
        for mq in _LABEL_TOKEN.finditer(rest):
            name = mq.group(1) or mq.group(2)
            states = self.labels.setdefault(name, [])
            if states and states[-1] == i:
                raise fail(path, k, f"label {name!r} is given twice on the line of state {i}")
            states.append(i)

    def action_line(self, line: str, k: int) -> None:
        """``action 0 [a1, a2]``: the one action of a CTMC state and its action rewards."""
        path = self.path
        if self.state < 0:
            raise fail(path, k, "'action' before the first 'state'")
        self.actions += 1
        if self.actions > 1:
            raise fail(path, k, f"state {self.state} has a second action: a CTMC has one per state "
                       "(this is a Markov automaton or an MDP)")
        rest = line[6:].strip(BLANKS)
        if "[" in rest:
            end = rest.find("]")
            if end < 0:
                raise fail(path, k, "']' missing after the action rewards")
            self.action_rew[self.state] = self._rewards(rest[rest.find("[") + 1:end], k)

    def _rewards(self, text: str, k: int) -> List[float]:
        """The values of a reward bracket, one a reward model of ``@reward_models`` when it is declared."""
        values = [parse_reward(s.strip(BLANKS), self.path, k) for s in text.split(",")]
        if self.n_rewards is not None and len(values) != self.n_rewards:
            raise fail(self.path, k, f"{len(values)} rewards in the bracket for the {self.n_rewards} "
                       "reward models of @reward_models")
        return values

    def transition(self, line: str, k: int) -> None:
        """``j : rate``: a transition of the current state."""
        path = self.path
        if self.state < 0:
            raise fail(path, k, f"transition before the first 'state': {line!r}")
        if not self.actions:
            raise fail(path, k, f"transition of state {self.state} before its 'action' line: {line!r}")
        target, sep, value = line.partition(":")
        if not sep:
            raise fail(path, k, f"expected a transition 'j : rate', got {line!r}")
        self.rows.append(self.state); self.targets.append(target.strip(BLANKS))
        self.values.append(value.strip(BLANKS)); self.where.append(k)

    def transitions(self):
        """Sources, targets and rates of the transitions: in one batch, else one by one naming the line."""
        cols, rates = batch_indices(self.targets, self.n), batch_rates(self.values)
        if cols is None or rates is None:
            path, n = self.path, self.n
            cols = np.array([parse_index(t, n, path, k, "target state")
                             for t, k in zip(self.targets, self.where)], dtype=np.int64)
            rates = np.array([parse_rate(v, path, k) for v, k in zip(self.values, self.where)], dtype=float)
        return np.asarray(self.rows, dtype=np.int64), cols, rates


def _read_blocks(raw: List[str], head: _Header, path):
    """The state blocks after ``@model`` (each line goes to the method of its kind) and their transitions
    (sources, targets, rates)."""
    blocks = _Blocks(head.n, path, len(head.reward_names) if head.reward_names else None)
    for k in range(head.model + 1, len(raw) + 1):
        line = raw[k - 1].strip(BLANKS)
        if not line:
            continue
        if line.startswith("//"):
            blocks.comment(line[2:].strip(BLANKS), k)
        elif line.startswith("state "):
            blocks.state_line(line, k)
        elif line.startswith("action"):
            blocks.action_line(line, k)
        else:
            blocks.transition(line, k)
    transitions = blocks.transitions()      # a malformed transition is named before a missing state
    if blocks.state != head.n - 1:
        raise fail(path, head.n_line, f"@nr_states is {head.n} but the file lists {blocks.state + 1} states")
    if head.choices is not None and head.choices[0] != head.n:
        raise fail(path, head.choices[1], f"@nr_choices is {head.choices[0]} for {head.n} states: a CTMC "
                   "has one choice a state (more is a Markov automaton or an MDP)")
    return blocks, transitions


def _exit_rates(blocks: _Blocks, rows_a: np.ndarray, rates_a: np.ndarray, path) -> np.ndarray:
    """The sums of the rates of each state, checked against the exit rates ``!rate`` the file declares."""
    row_sums = np.bincount(rows_a, weights=rates_a, minlength=blocks.n)  # self-loops included, as in Storm
    declared_exit = np.asarray(blocks.declared_exit, dtype=float)
    # Storm prints about 10 significant digits (older versions 6): a loose check, for a lost transition
    bad = np.abs(row_sums - declared_exit) > 1e-5 * np.maximum(row_sums, declared_exit)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise fail(path, blocks.exit_line[i], f"exit rate !{fmt(declared_exit[i])} of state {i} is not "
                   "the sum "
                   f"of its rates ({fmt(row_sums[i])})")
    return row_sums


def _per_state(values: List[Sequence[float]], count: int) -> np.ndarray:
    """States x ``count`` table of per-state lists (a missing value is 0)."""
    if all(len(v) == count for v in values):
        return np.array(values, dtype=float).reshape(len(values), count)
    out = np.zeros((len(values), count))
    for i, v in enumerate(values):
        out[i, :len(v)] = v
    return out


def _rewards(blocks: _Blocks, reward_names: List[str], row_sums: np.ndarray) -> Dict[str, np.ndarray]:
    r"""Each reward model's state reward rate: its state rewards plus its action rewards :math:`E_i a_i`."""
    count = max([len(v) for v in blocks.state_rew] + [len(v) for v in blocks.action_rew] + [0])
    names = [reward_names[c] if c < len(reward_names) else f"rew{c}" for c in range(count)]
    state_rew, action_rew = _per_state(blocks.state_rew, count), _per_state(blocks.action_rew, count)
    return {name: state_rew[:, c] + row_sums * action_rew[:, c] for c, name in enumerate(names)}


def _label_masks(blocks: _Blocks) -> Dict[str, np.ndarray]:
    """Each label's states as a mask."""
    masks = {}
    for name, states in blocks.labels.items():
        masks[name] = np.zeros(blocks.n, dtype=bool)
        masks[name][states] = True
    return masks


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
    raw = read_lines(path)
    head = _read_header(raw, path)
    with gc_paused():       # one dict a state: the collector would walk them again and again
        blocks, (rows, cols, rates) = _read_blocks(raw, head, path)
    row_sums = _exit_rates(blocks, rows, rates, path)
    Q = generator_from_rates(rows, cols, rates, head.n, path)
    rewards = _rewards(blocks, head.reward_names, row_sums)
    masks = _label_masks(blocks)
    initial = masks.pop(INIT, None)
    return make_chain(Q, _drn_states(blocks, path), masks, rewards, initial)
