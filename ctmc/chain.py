r"""The :class:`CTMC` object: a generator, its states, and every analysis.

A chain is a sparse generator :math:`Q` (CSR, :math:`Q_{ij} \ge 0` for
:math:`i \ne j`, rows summing to zero) with an optional table of state
variables. All analyses are methods of the chain (:class:`ctmc.analyses.Analyses`), with
one call shape on every backend (``"scipy"`` by default), so the same call
works on a chain built from a :class:`~ctmc.Model` or from a user's matrix, on
a laptop or (with the PETSc backend) under MPI.
"""
from __future__ import annotations

from typing import Mapping, Optional

import numpy as np
import scipy.sparse as sp

from .analyses import Analyses
from ._util import blocks
from .encoding import StateLayout
from .sets import as_law, owned_mask, owned_values
from .structure import ClassStructure, class_structure

__all__ = ["CTMC", "StateTable"]


#: codes :meth:`StateTable.value_range` and :meth:`StateTable.column` decode at a time
#: (:func:`_decode_blocks`)
_DECODE_BLOCK = 1 << 15


def _decode_blocks(m: int):
    """Slices of ``range(m)`` of :data:`_DECODE_BLOCK` codes at most (:func:`ctmc._util.blocks`)."""
    return blocks(m, _DECODE_BLOCK)


class StateTable:
    """Per-variable integer arrays describing each state of a chain.

    ``table[name]`` is the array of variable ``name`` over all states;
    ``table.names`` lists the variables. Chains built by a model carry the
    sorted state codes, which makes :meth:`index` a binary search; their
    columns (``columns=None``) are decoded from the codes when first read.
    """

    def __init__(self, columns: Mapping[str, np.ndarray], codes=None, layout: Optional[StateLayout] = None):
        if columns is None:
            # a model's chain: each column decoded from the codes when first read (a model
            # of many variables is often asked for a few of them)
            self._cols = layout.decode(codes)
            self._codes, self._layout, self._lookup = codes, layout, None
            return
        self._cols = {k: np.asarray(v) for k, v in columns.items()}
        lens = {v.shape for v in self._cols.values()}
        if len(lens) != 1 or len(next(iter(lens))) != 1:
            raise ValueError("states: every column must be a 1-D array of the same length")
        for k, v in self._cols.items():
            if v.dtype.kind not in "iub":
                raise ValueError(f"states: column {k!r} must hold integers")
        self._codes, self._layout, self._lookup = codes, layout, None

    @property
    def names(self) -> tuple:
        return tuple(self._cols)

    @property
    def codes(self) -> Optional[np.ndarray]:
        """The sorted state codes of a model's chain (:mod:`ctmc.encoding`), else ``None``."""
        return self._codes

    @property
    def layout(self) -> Optional[StateLayout]:
        """The encoding of the codes (:class:`~ctmc.encoding.StateLayout`) of a model's chain, else ``None``."""
        return self._layout

    def __getitem__(self, name) -> np.ndarray:
        if hasattr(name, "name") and not isinstance(name, str):
            name = name.name
        try:
            return self._cols[name]
        except KeyError:
            raise KeyError(f"no state variable {name!r}; variables are {list(self._cols)}") from None

    def __len__(self) -> int:
        if self._codes is not None:
            return len(self._codes)
        return len(next(iter(self._cols.values())))

    def __iter__(self):
        return iter(self._cols)

    def __repr__(self) -> str:
        spans = ", ".join(f"{k} in [{v.min()}, {v.max()}]" if v.size else k for k, v in self._cols.items())
        return f"<StateTable: {len(self)} states; {spans}>"

    def _repr_html_(self) -> str:
        from .tables import html_table
        return html_table(f"{len(self)} states", [(k, f"[{v.min()}, {v.max()}]") for k, v in self._cols.items()])

    def to_frame(self):
        """The states as a :class:`pandas.DataFrame`, one column per variable (needs pandas)."""
        from .tables import frame
        return frame(self)

    def column(self, name) -> np.ndarray:
        """Variable ``name``'s value in every state, without keeping it: a model's column is decoded for
        this call (a search over the variables holds one column at a time, where ``table[name]`` keeps
        each for the life of the chain), by blocks (:func:`_decode_blocks`) into int32 where the variable's
        bounds fit (else int64): half a float64 vector of the states, not the two int64 vectors of a whole
        decode (the quotients, then the remainders).

        >>> StateTable({"n": np.array([4, 1])}).column("n").tolist()
        [4, 1]
        """
        if name not in self.names:
            raise KeyError(f"no state variable {name!r}; variables are {list(self.names)}")
        if self._codes is None:
            return self._cols[name]
        lay, codes = self._layout, self._codes
        i = lay.names.index(name)
        small = np.iinfo(np.int32)
        fits = small.min <= int(lay.lo[i]) and int(lay.lo[i]) + int(lay.span[i]) - 1 <= small.max
        out = np.empty(len(codes), dtype=np.int32 if fits else np.int64)
        for part in _decode_blocks(len(codes)):
            out[part] = lay.decode(codes[part])[name]
        return out

    def value_range(self, name, rows=None) -> Optional[tuple]:
        """``(min, max)`` of variable ``name`` over the states ``rows`` (indices; all by default), None if none.

        A model's column is decoded for those rows alone and not kept (a
        column read by ``table[name]`` is kept for the life of the chain).

        >>> t = StateTable({"n": np.array([4, 1, 7, 2])})
        >>> t.value_range("n"), t.value_range("n", np.array([1, 3])), t.value_range("n", np.array([], int))
        ((1, 7), (1, 2), None)
        """
        if hasattr(name, "name") and not isinstance(name, str):
            name = name.name
        if name not in self.names:      # (``in`` on the lazy columns would decode the column)
            raise KeyError(f"no state variable {name!r}; variables are {list(self.names)}")
        if self._codes is None:
            col = self._cols[name] if rows is None else self._cols[name][rows]
            return (int(col.min()), int(col.max())) if col.size else None
        # decoded block by block (a block's codes and quotients, not vectors of the rows beside them)
        m, lo, hi = len(self._codes) if rows is None else len(rows), None, None
        for part in _decode_blocks(m):
            col = self._layout.decode(self._codes[part] if rows is None else self._codes[rows[part]])[name]
            lo = int(col.min()) if lo is None else min(lo, int(col.min()))
            hi = int(col.max()) if hi is None else max(hi, int(col.max()))
        return None if lo is None else (lo, hi)

    def as_dict(self) -> dict:
        """The columns as a ``{name: array}`` dict (the expression environment)."""
        return dict(self._cols)

    def as_array(self) -> np.ndarray:
        """States as an ``(n_states, n_vars)`` integer array."""
        return np.column_stack([self._cols[k] for k in self._cols])

    def index(self, **values) -> int:
        """Index of the state with the given variable values.

        Raises
        ------
        ValueError
            If a variable is missing or unknown, or no such state exists.
        """
        if set(values) != set(self._cols):
            raise ValueError(f"index: give exactly the variables {list(self._cols)}, got {sorted(values)}")
        if self._codes is not None:
            code = self._layout.code(values)
            if code is None:
                raise ValueError(f"index: no state {values}")
            k = int(np.searchsorted(self._codes, code))
            if k < self._codes.size and self._codes[k] == code:
                return k
            raise ValueError(f"index: {values} is not a (reachable) state")
        if self._lookup is None:
            self._lookup = {tuple(r): i for i, r in enumerate(self.as_array().tolist())}
        key = tuple(int(values[k]) for k in self._cols)
        try:
            return self._lookup[key]
        except KeyError:
            raise ValueError(f"index: {values} is not a state") from None


def _as_csr(Q) -> sp.csr_matrix:
    kind = Q.dtype.kind if sp.issparse(Q) else np.asarray(Q).dtype.kind
    if kind not in "iuf":
        raise ValueError(f"Q: expected a real matrix, got dtype kind {kind!r} (a complex or non-numeric "
                         "generator is not a CTMC)")
    if sp.issparse(Q):
        A = sp.csr_matrix(Q, dtype=float)
    else:
        a = np.asarray(Q, dtype=float)
        if a.ndim != 2:
            raise ValueError(f"Q: expected a 2-D matrix, got shape {a.shape}")
        A = sp.csr_matrix(a)
    if A.shape[0] != A.shape[1]:
        raise ValueError(f"Q: a generator must be square, got shape {A.shape}")
    if A.shape[0] == 0:
        raise ValueError("Q: the generator has no states")
    A.sum_duplicates()
    A.sort_indices()
    return A


def validate_generator(Q: sp.csr_matrix, rtol: float = 1e-10) -> None:
    """Check that ``Q`` is a generator; raise ValueError naming the problem."""
    if not np.all(np.isfinite(Q.data)):
        raise ValueError("Q: contains NaN or infinite entries")
    coo = Q.tocoo()
    off = coo.row != coo.col
    neg = off & (coo.data < 0)
    if neg.any():
        k = np.flatnonzero(neg)[0]
        raise ValueError(f"Q: off-diagonal entries must be >= 0, Q[{coo.row[k]}, {coo.col[k]}] = {coo.data[k]}")
    rowsum = np.asarray(Q.sum(axis=1)).ravel()
    scale = np.abs(Q.diagonal())
    bad = np.abs(rowsum) > rtol * np.maximum(scale, np.finfo(float).tiny)
    if bad.any():
        k = np.flatnonzero(bad)[0]
        raise ValueError(f"Q: rows of a generator sum to 0, row {k} sums to {rowsum[k]:.3g} "
                         "(use CTMC.from_rates for a matrix of rates)")


class CTMC(Analyses):
    """A finite continuous-time Markov chain.

    Parameters
    ----------
    Q : sparse matrix or array_like, shape (n, n)
        Generator: off-diagonal entries >= 0, rows summing to 0.
    states : mapping of str to int arrays, optional
        State variables (one column per variable). Default: one variable
        ``"state"`` equal to the index.
    labels : mapping of str to set, optional
        Named sets of states (``{"full": n == 10}``; masks, index sets or
        expressions), usable wherever a set is expected by name
        (``chain.hitting_times("full")``) and written by :mod:`ctmc.io`.
    rewards : mapping of str to per-state values, optional
        Named reward structures (arrays, expressions or constants), usable by
        name wherever per-state values are expected.
    initial : set of states or law, optional
        The initial state(s): an index, a set, a mask, an expression or
        ``{var: value}``; or an initial law (a numeric vector of length n,
        the rule of ``p0``: ``[0, 0, 1]`` is state 2; ``chain.initial`` is
        then its support). The one-liners
        (:meth:`prob_within`, ...) start there (:attr:`initial_law`).
    check : bool, default True
        Validate ``Q`` (finite, non-negative off-diagonal, zero row sums).

    Attributes
    ----------
    Q : scipy.sparse.csr_matrix
    states : StateTable
    n_states : int

    Examples
    --------
    >>> import ctmc
    >>> chain = ctmc.CTMC([[-2.0, 2.0], [1.0, -1.0]])
    >>> chain.stationary().pi
    array([0.33333333, 0.66666667])
    >>> chain.hitting_times(chain.states["state"] == 1).mean
    array([0.5, 0. ])
    """

    def __init__(self, Q, states=None, *, labels=None, rewards=None, initial=None, check: bool = True,
                 model=None):
        A = _as_csr(Q)
        if check:
            validate_generator(A)
        self.Q: sp.csr_matrix = A
        n = A.shape[0]
        if states is None:
            states = StateTable({"state": np.arange(n)})
        elif not isinstance(states, StateTable):
            states = StateTable(states)
        if len(states) != n:
            raise ValueError(f"states: {len(states)} states given for a {n}x{n} generator")
        self.states: StateTable = states
        self._model = model
        self._initial = None
        self._structure: Optional[ClassStructure] = None
        self.build_info: dict = {}
        self.labels: dict = {}
        self.rewards: dict = {}
        for k, v in (labels or {}).items():
            self.add_label(k, v)
        for k, v in (rewards or {}).items():
            self.add_reward(k, v)
        self._initial_law = None
        if initial is not None:
            if isinstance(initial, (int, np.integer)) and not isinstance(initial, bool):
                initial = {int(initial)}
            law = as_law(initial, n, "initial")      # the rule of p0: a vector of length n is a law
            if law is not None:
                self.set_initial_law(law)
            else:
                self._initial = np.flatnonzero(self._mask(initial, "initial"))

    def add_label(self, name: str, states) -> None:
        """Name a set of states (mask, indices, set, expression, callable or dict)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"labels: a label name must be a non-empty string, got {name!r}")
        self.labels[name] = owned_mask(states, self.states, self.n_states, name=f"label {name!r}")

    def add_reward(self, name: str, values) -> None:
        """Name a per-state reward (array, constant, expression or callable)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"rewards: a reward name must be a non-empty string, got {name!r}")
        self.rewards[name] = owned_values(values, self.states, self.n_states, name=f"reward {name!r}", finite=True)

    @classmethod
    def from_rates(cls, R, states=None) -> "CTMC":
        """Chain from a matrix of transition rates (the diagonal is ignored).

        Examples
        --------
        >>> import ctmc
        >>> ctmc.CTMC.from_rates([[0, 3.0], [1.0, 0]]).Q.toarray()
        array([[-3.,  3.],
               [ 1., -1.]])
        """
        A = _as_csr(R)
        A.setdiag(0)
        A.eliminate_zeros()
        if not np.all(np.isfinite(A.data)) or (A.data < 0).any():
            raise ValueError("R: rates must be finite and >= 0")
        Q = A - sp.diags(np.asarray(A.sum(axis=1)).ravel())
        return cls(Q.tocsr(), states)

    # basic properties ---------------------------------------------------
    @property
    def n_states(self) -> int:
        return self.Q.shape[0]

    @property
    def n_transitions(self) -> int:
        """Number of non-zero off-diagonal entries of ``Q``."""
        return int(self.Q.nnz - np.count_nonzero(self.Q.diagonal()))

    @property
    def model(self):
        """The :class:`ctmc.Model` this chain was built from (None for a chain made from a generator)."""
        return self._model

    @property
    def initial(self) -> Optional[np.ndarray]:
        """Indices of the initial states (None when none were given)."""
        return self._initial

    @property
    def initial_law(self) -> Optional[np.ndarray]:
        """The law the one-liners start from: the one given (or left by eliminating a vanishing
        initial state, :meth:`ctmc.Model.immediate`), else uniform on :attr:`initial`, else None."""
        if self._initial_law is not None:
            view = self._initial_law.view()
            view.flags.writeable = False
            return view
        if self._initial is None or len(self._initial) == 0:
            return None
        p = np.zeros(self.n_states)
        p[self._initial] = 1.0 / len(self._initial)
        return p

    def set_initial_law(self, law) -> None:
        """Start from the law ``law`` (floats, one per state, >= 0, summing to 1); ``initial`` becomes its support."""
        p = np.asarray(law, dtype=float)
        if p.shape != (self.n_states,) or not np.all(np.isfinite(p)) or (p < 0).any() or abs(p.sum() - 1) > 1e-9:
            raise ValueError(f"initial: a law must be {self.n_states} finite values >= 0 summing to 1 "
                             f"(got shape {p.shape}, sum {p.sum() if p.size else 0:.6g})")
        self._initial_law = p
        self._initial = np.flatnonzero(p > 0)

    def __repr__(self) -> str:
        name = f" {self._model.name!r}" if self._model is not None else ""
        return f"<CTMC{name}: {self.n_states} states, {self.n_transitions} transitions>"

    def _repr_html_(self) -> str:
        from .tables import html_table
        rows = [("states", self.n_states), ("transitions", self.n_transitions),
                ("variables", ", ".join(self.states.names))]
        if self.labels:
            rows.append(("labels", ", ".join(self.labels)))
        if self.rewards:
            rows.append(("rewards", ", ".join(self.rewards)))
        if self._initial is not None:
            rows.append(("initial", ", ".join(map(str, self._initial[:5])) + (" ..." if self._initial.size > 5 else "")))
        return html_table(repr(self)[1:-1], rows)

    def eval(self, expr) -> np.ndarray:
        """Values of an expression of the model's variables over all states.

        Also takes a reward name, a constant, an array or a callable
        ``f(states)``; boolean expressions give 0/1.

        >>> import ctmc
        >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 3)
        >>> m.event("a", guard=n < 3, rate=1.0, update={n: n + 1})
        >>> m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
        >>> m.build(initial={"n": 0}).eval(n * (n - 1)).tolist()
        [0.0, 0.0, 2.0, 6.0]
        """
        return owned_values(expr, self.states, self.n_states, name="expr", named=self.named_vectors())

    def to_frame(self, **values):
        """States as a :class:`pandas.DataFrame`, with the labels and any ``values`` as columns.

        ``values`` maps column names to per-state vectors or expressions
        (``chain.to_frame(load=n1 + n2)``). Needs pandas.
        """
        from .tables import frame
        cols = {k: v for k, v in self.labels.items()}
        cols.update({k: self.eval(v) for k, v in values.items()})
        return frame(self.states, cols)

    def index(self, **values) -> int:
        """Index of the state with the given variable values (``chain.index(n=3)``)."""
        return self.states.index(**values)

    def where(self, expr) -> np.ndarray:
        """Boolean mask of the states where ``expr`` holds.

        Parameters
        ----------
        expr : Expr, callable, bool array, index array or dict
            An expression over the model's variables, ``f(states) -> mask``,
            a boolean mask, integer state indices, or ``{var: value}`` for one
            state.
        """
        return self._mask(expr, "expr", allow_empty=True)

    def _mask(self, target, name="target", allow_empty=False) -> np.ndarray:
        mask = owned_mask(self._named_set(target, name), self.states, self.n_states, name=name)
        if not allow_empty and not mask.any():
            raise ValueError(f"{name}: the set of states is empty")
        return mask

    def event_rate(self, name: str) -> np.ndarray:
        """Per-state rate of a model event (0 where disabled).

        The stationary throughput of the event is ``pi @ chain.event_rate(name)``;
        events whose update leaves the state unchanged (e.g. a blocked
        arrival) count too.
        """
        if self._model is None:
            raise ValueError("name: this chain was not built from a Model, it has no events")
        return self._model.event_rate(name, self.states.as_dict())

    # structure ------------------------------------------------------------
    @property
    def structure(self) -> ClassStructure:
        """Communicating classes (computed once, cached)."""
        if self._structure is None:
            self._structure = class_structure(self.Q)
        return self._structure

    @property
    def is_irreducible(self) -> bool:
        return self.structure.is_irreducible

    def closed_classes(self) -> list:
        """State indices of each closed class."""
        return self.structure.closed_classes
