r"""Structure facts of a closed class, and the ``auto`` plan chosen by them.

``auto`` measures the class cheaply before any heavy work, in :math:`O(\mathrm{nnz})`
(:func:`structure_facts`): its states, transitions, the envelope of the
symmetrised pattern in state order over its number of entries (below about 10
the chain is banded and a direct solve in state order fills in little), the
profile work :math:`\sum_i w_i^2` of that solve (:math:`w_i` the row widths) and its
dimensions (state variables that vary on the class). :func:`auto_plan` turns
the facts into the methods to try in turn: dense GTH up to 1000 states; a
sparse direct solve on banded or at most two-dimensional chains; on
many-dimensional chains, where a direct solve fills in badly, a GMRES probe
with a Gauss-Seidel preconditioner, Gauss-Seidel sweeps while they converge
fast, then the direct solve, GMRES with its whole budget and power iteration.
When every planned method fails on a class small enough (:func:`dense_fallback`:
up to :data:`DENSE_FALLBACK` states, its dense matrix within the memory budget),
the dense elimination is the last resort.
The stationary ``auto`` runs the plan; the passage ``auto`` takes its first
step that a passage system has.

Memory. A solve of the pinned system on :math:`n` states and :math:`e` stored
entries holds, beyond the generator (and its transpose where one was made), one
matrix of its own (:math:`M` or :math:`M^T`, :data:`MATRIX_ENTRY_BYTES` a
stored entry and :data:`MATRIX_ROW_BYTES` a row; none where the scipy
backend's compiled kernels read the pinned system of a whole class from
``Q``'s rows, :class:`ctmc.backends.csr.MaskedTranspose`: the count is then
an upper bound by the matrix) and per-state float64
vectors: GMRES(:math:`m`) :math:`m + 1` Arnoldi vectors and
:data:`WORK_VECTORS` more, BiCGStab :data:`BICGSTAB_VECTORS` and the work
vectors, Gauss-Seidel sweeps on the transpose itself :data:`SWEEP_VECTORS`
and the work vectors; the error bound of an iterative answer then solves
the return-time system by BiCGStab (a matrix and its vectors again, after
the solve's are freed). :func:`memory_plan` fits the plan into a budget of
bytes (by default :func:`ctmc._util.available_memory` at the time of the
plan, :data:`BUDGET_FRACTION` of it): the GMRES restart that fits, down to
:data:`LEAN_MIN_RESTART`; below that, BiCGStab, then Gauss-Seidel sweeps,
in place of GMRES, and no direct solve (its fill is larger than the matrix);
below what the error bound's solve needs, an error naming the budget,
before any heavy work.
"""
from __future__ import annotations

import numpy as np

from .._sparse_lu import natural_is_cheap
from .classes import count

__all__ = ["structure_facts", "auto_plan", "probe_restart", "memory_plan", "solve_bytes", "AUTO_GTH", "DIM_VALUES",
           "DENSE_FALLBACK", "DENSE_BYTES", "dense_fallback",
           "PROBE_ITERATIONS", "BICGSTAB_FIRST_ITERATIONS", "BICGSTAB_STALL", "PROBE_RESTART",
           "PROBE_MIN_RESTART", "LEAN_MIN_RESTART", "BASIS_BYTES_PER_ENTRY", "MATRIX_ENTRY_BYTES",
           "MATRIX_ROW_BYTES", "WORK_VECTORS", "BICGSTAB_VECTORS", "SWEEP_VECTORS", "BUDGET_FRACTION",
           "PEAK_BYTES_PER_TRANSITION", "BESIDE_VECTORS", "beside_fits", "peak_fits", "copy_fits",
           "COPY_SHARE", "POLISH_COPY_VECTORS", "LEVEL_COPY_VECTORS"]

AUTO_GTH = 1000
#: the last resort of ``auto`` (stationary and passage): a dense subtraction-free elimination after every
#: planned method failed, on up to this many states (GTH took 3 s on 1500 states, about 1 min on 4000)
DENSE_FALLBACK = 4000
#: bytes a dense elimination holds per squared state (the gathered matrix and its working copy)
DENSE_BYTES = 16.0
#: a state variable counts as a dimension of the chain when it takes more than this many values
#: (binary variables count: fifteen of them make a 15-dimensional hypercube, where LU fills in)
DIM_VALUES = 1
#: iterations of the Krylov probe of ``auto`` on many-dimensional chains
PROBE_ITERATIONS = 300
#: iterations of the BiCGStab tried first there (``bicgstab-first-probe``; GMRES follows where it fails): two
#: fused Gauss-Seidel products an iteration and no basis to orthogonalise against, 0.65-0.7 of GMRES's CPU
#: on kanban t=4/5 and fms n=6 (29-38 iterations against GMRES's 44-64; benchmarks/README.md)
BICGSTAB_FIRST_ITERATIONS = 150
#: ... given up earlier where its residual falls less than tenfold in this many iterations
#: (:class:`ctmc.krylov.Stall`, the ``stall`` option): on the gallery the solves it wins fall 78-fold or more in
#: every 20 iterations (fms n=5/6, kanban t=3/4, polling N=15); on a shuffled 20000-state cycle with one
#: rate of 1e8 it never fell below its start, and three pins cost 450 iterations before GMRES.
#: The GMRES probe (``gmres-probe``) takes the same test: on that cycle its residual fell 3 % in every 25
#: steps after the first ten (300 steps, 0.55 s, before LU's 0.08 s); the gallery's GMRES solves fall
#: 1e5-fold or more in every 25 (kanban t=4, fms n=5, tandem c=255; polling, cluster converge in fewer)
BICGSTAB_STALL = 25
#: its Arnoldi basis at most: GMRES(50) stagnated on 4-species population chains (JIQ with buffer 3,
#: N = 120: backward error 7e-8 after 10,000 steps) where GMRES(100) converged in 77 steps (with the
#: walked pin of Krylov solves it converges with 30 vectors too, in 150 steps)
PROBE_RESTART = 100
#: ... and at least
PROBE_MIN_RESTART = 20
#: ... or, where a memory budget allows no more, this many (GMRES(10) took 1.2-3.4x the iterations of
#: GMRES(48) on the gallery, 0.6-1.6x its time; BiCGStab with the Gauss-Seidel sweep, which holds
#: about as many vectors, broke down on polling)
LEAN_MIN_RESTART = 10
#: bytes of Arnoldi basis per stored entry of the generator at most (the generator takes 12: a value
#: and a 32-bit index): the basis is the largest array of a GMRES solve (100 vectors on kanban were
#: 93 bytes per transition, 7 times the matrix), and beyond about 45 vectors the gallery's iteration
#: counts no longer fall (benchmarks/README.md, bench_memory.py)
BASIS_BYTES_PER_ENTRY = 40.0


#: bytes of a solve's matrix per stored entry (a float64 value, a 32-bit column index) and per row
#: (a row pointer, the diagonal and its index kept beside it)
MATRIX_ENTRY_BYTES = 12.0
MATRIX_ROW_BYTES = 24.0
#: per-state float64 vectors a Krylov or sweep solve holds beside its own (the iterate, right-hand
#: side, answer embedded in the chain, exit rates, the set's mask and indices, the preconditioner's
#: and the stopping test's work): 6 outside GMRES and 4 inside it on kanban t=4 (tracemalloc)
WORK_VECTORS = 10
#: BiCGStab's own vectors (the iterate, the residual with the half step in it, the shadow, the direction,
#: the two products, the preconditioned direction and half step in one; the numpy steps' scratch)
BICGSTAB_VECTORS = 8
#: the peak of build + default solve per transition of the chain at most (issue 23's target; the generator
#: itself takes 12-17): the error bound's return times are solved beside the stationary solve
#: (:mod:`ctmc.kernels.ahead`) only where both fit in it (:func:`beside_fits`), however much memory is free.
#: Where a state has few transitions they cannot: cluster N=64 (4.85 a state) has 5 x 4.85 = 24.3
#: float64 vectors of room in 40 bytes a transition, and the generator with the state codes takes 10.3 of
#: them and the two BiCGStab solves 7 each (50 bytes a transition measured beside, 38 after, at the same
#: CPU time and within the shared machine's noise of its wall time: benchmarks/README.md)
PEAK_BYTES_PER_TRANSITION = 40.0
#: float64 vectors (of the chain's states) held while the two run at once: each BiCGStab's seven and its
#: right-hand side, the exit rates, both systems' diagonal positions (int32) and set masks
BESIDE_VECTORS = 2 * (7 + 1) + 2
#: Gauss-Seidel sweeps on the transpose in place: the iterate and the residual's product
SWEEP_VECTORS = 2
#: the share of the available memory ``auto`` plans with (the rest for the allocator's slack and
#: other processes' growth)
BUDGET_FRACTION = 0.9
#: a second matrix of ``Q``'s size that only buys speed (``Q^T`` for the polish, ``Q`` in level order for the
#: return times on levels: :func:`ctmc.kernels.sweeps.copy_plentiful`) is made where it takes at most this
#: share of the budget and the stage's peak with it stays within :data:`PEAK_BYTES_PER_TRANSITION`
#: (:func:`copy_fits`, the rule of the bound's thread); elsewhere the sweeps read ``Q``'s own rows (tandem
#: c=1023: 1.21x the CPU)
COPY_SHARE = 0.01
#: float64 vectors of the chain's states held beside the generator and its copy ``Q^T`` at the peak of the
#: polish: the iterate, the sweep's zero right-hand side, the balance measurement's block of ``x Q``, the
#: state codes and one vector more of the solve's (cluster N=64: 4 vectors and the codes,
#: tests/test_memory_plan.py)
POLISH_COPY_VECTORS = 5
#: ... and beside the copy of ``Q_XX`` in level order at the peak of the return times' level cycles
#: (:class:`~ctmc.kernels.levels.LevelSystem`): the order and the levels' ranks (one), the shares, the
#: right-hand side, the iterate and the product's residual, the state codes, the answer and the bound's two
#: vectors held beside (tandem, tests/test_memory_plan.py)
LEVEL_COPY_VECTORS = 9


def _size(b: float) -> str:
    """Bytes for a message: ``'1.50 GB'``, ``'12.3 MB'``, ``'1000 bytes'``."""
    return f"{b / 1e9:.2f} GB" if b >= 1e9 else (f"{b / 1e6:.1f} MB" if b >= 1e6 else f"{b:.0f} bytes")


def solve_bytes(method: str, states: int, entries: int, restart: int = PROBE_RESTART) -> float:
    """Bytes a pinned solve of ``method`` allocates on ``states`` states and ``entries`` stored
    entries of the generator, the generator itself (and its transpose) not counted.

    ``"gmres"`` (with ``restart`` Arnoldi vectors), ``"bicgstab"``, ``"gauss_seidel"`` (sweeps on
    the transpose in place) and ``"bound"``, the error bound's return-time solve (BiCGStab).

    >>> solve_bytes("gmres", 10**6, 10**7, restart=20) / 1e6     # the matrix 144 MB, 31 vectors
    392.0
    >>> solve_bytes("gauss_seidel", 10**6, 10**7) / 1e6
    96.0
    """
    matrix = MATRIX_ENTRY_BYTES * entries + MATRIX_ROW_BYTES * states
    vec = 8.0 * states
    if method == "gmres":
        return matrix + (restart + 1 + WORK_VECTORS) * vec
    if method in ("bicgstab", "bound"):
        return matrix + (BICGSTAB_VECTORS + WORK_VECTORS) * vec
    if method == "gauss_seidel":
        return (SWEEP_VECTORS + WORK_VECTORS) * vec
    raise ValueError(f"method: expected one of gmres, bicgstab, gauss_seidel, bound; got {method!r}")


def beside_fits(chain_states: int, chain_entries: int, states: int, entries: int, budget: float,
                matrices: bool = False) -> bool:
    """Whether the error bound's return-time solve may run beside the stationary solve of a class of
    ``states`` states and ``entries`` stored entries (the diagonal included), on a chain of
    ``chain_states`` and ``chain_entries``. What the two add, :data:`BESIDE_VECTORS` vectors of the
    chain's states and, with ``matrices`` (systems extracted, not read from ``Q``'s rows), both
    solves' matrices, must fit in ``budget`` bytes (:data:`BUDGET_FRACTION` of the available memory)
    and, with the generator (:data:`MATRIX_ENTRY_BYTES` a stored entry, 4 bytes a row), in
    :data:`PEAK_BYTES_PER_TRANSITION` a transition of the class, whatever the budget.

    >>> beside_fits(58_400, 504_800, 58_400, 504_800, 1e9)          # kanban t=3: 14.1 + 18.8 bytes a transition
    True
    >>> beside_fits(151_060, 884_276, 151_060, 884_276, 24e9)       # cluster N=64: 15.3 + 29.7
    False
    """
    vectors = BESIDE_VECTORS * 8.0 * chain_states
    if matrices:
        vectors += 2 * (MATRIX_ENTRY_BYTES * entries + MATRIX_ROW_BYTES * states)
    return vectors <= budget and peak_fits(chain_states, chain_entries, int(entries) - int(states), vectors)


def peak_fits(chain_states: int, chain_entries: int, transitions: int, held: float) -> bool:
    """Whether ``held`` bytes beside the generator of a chain of ``chain_states`` states and ``chain_entries``
    stored entries (:data:`MATRIX_ENTRY_BYTES` a stored entry, 4 bytes a row) stay within
    :data:`PEAK_BYTES_PER_TRANSITION` a transition (of ``transitions``, at least one): the one rule of the
    peak, for the bound's thread (:func:`beside_fits`) and the copies of ``Q`` that buy speed
    (:func:`copy_fits`).

    >>> peak_fits(2_096_128, 9_424_899, 7_328_771, 8.0 * 2_096_128)        # tandem c=1023: 16.6 + 2.3
    True
    """
    generator = MATRIX_ENTRY_BYTES * chain_entries + 4.0 * chain_states
    return generator + held <= PEAK_BYTES_PER_TRANSITION * max(int(transitions), 1)


def copy_fits(states: int, entries: int, copy_bytes: float, vectors: float, budget: float) -> bool:
    """Whether a copy of ``copy_bytes`` of a generator of ``states`` states and ``entries`` stored entries
    (the diagonal included), made only for speed, may be made: at most :data:`COPY_SHARE` of ``budget``
    and, with
    ``vectors`` float64 vectors of the states held beside it at its stage's peak
    (:data:`POLISH_COPY_VECTORS`, :data:`LEVEL_COPY_VECTORS`), within :data:`PEAK_BYTES_PER_TRANSITION` a
    transition (:func:`peak_fits`), whatever the budget.

    >>> q = 12 * 9_424_899 + 4 * 2_096_129                 # tandem c=1023: Q, 16.6 bytes a transition
    >>> copy_fits(2_096_128, 9_424_899, q, POLISH_COPY_VECTORS, 24e9)          # 16.6 + 16.6 + 11.4
    False
    >>> q = 12 * 884_276 + 4 * 151_061                     # cluster N=64: 15.3 + 15.3 + 8.2
    >>> copy_fits(151_060, 884_276, q, POLISH_COPY_VECTORS, 24e9), copy_fits(151_060, 884_276, q, 5, 1e9)
    (True, False)
    """
    held = copy_bytes + float(vectors) * 8.0 * states
    return copy_bytes <= COPY_SHARE * budget and peak_fits(states, entries, int(entries) - int(states), held)


def memory_plan(steps, states: int, entries: int, budget: float, given: bool = False, released: float = 0.0) -> tuple:
    """Fit ``auto``'s plan into ``budget`` bytes: ``(steps, restart, note)``.

    The GMRES steps (``gmres-probe``, ``gmres-long``, ``gmres``) take the restart of
    :func:`probe_restart` when GMRES with it fits (:func:`solve_bytes`), else the
    largest that fits, at least :data:`LEAN_MIN_RESTART`. Where not even that fits,
    they become BiCGStab and Gauss-Seidel sweeps (``bicgstab-probe``, then
    ``gauss_seidel``, whose error bound needs the same memory) and the direct
    solve is dropped; ``note`` says why (empty when the plan is unchanged).
    ``released`` bytes (the scipy operator's ``Q^T``, :meth:`~ctmc.backends.base.Operator.releasable`)
    are freed by a Krylov solve after its matrix is made and before its vectors
    are: they count towards the vectors, not the matrix.
    A budget below what the error bound's solve needs raises (``ValueError``
    when the budget was ``given`` as the ``memory`` option, else
    ``MemoryError``), naming the budget and what is needed.

    >>> plan = ["gmres-probe", "gauss_seidel-probe", "lu", "gmres-long", "power"]
    >>> memory_plan(plan, 10**6, 10**7, 24e9)[:2]
    (['gmres-probe', 'gauss_seidel-probe', 'lu', 'gmres-long', 'power'], 49)
    >>> memory_plan(plan, 10**6, 10**7, 0.45e9)[:2]
    (['gmres-probe', 'gauss_seidel-probe', 'lu', 'gmres-long', 'power'], 27)
    >>> memory_plan(plan, 10**6, 10**7, 0.305e9)[:2]
    (['bicgstab-probe', 'gauss_seidel-probe', 'gauss_seidel', 'power'], 10)
    >>> memory_plan(plan, 10**6, 10**7, 0.2e9)
    Traceback (most recent call last):
    ...
    MemoryError: memory: a budget of 200.0 MB is below the 288.0 MB the leanest route needs on this class (1000000 states, 10000000 stored entries: the error bound's BiCGStab, a matrix of 12 bytes a stored entry and 18 vectors); free memory or pass a larger memory= (bytes)
    """
    n, e = max(int(states), 1), max(int(entries), 1)
    matrix = MATRIX_ENTRY_BYTES * e + MATRIX_ROW_BYTES * n

    def need(method, restart=PROBE_RESTART):           # beyond what is held when the plan is made
        return max(solve_bytes(method, n, e, restart) - released, matrix)

    need_bound = need("bound")
    if budget < need_bound:
        msg = (f"memory: a budget of {_size(budget)} is below the {_size(need_bound)} the leanest route "
               f"needs on this class ({n} states, {e} stored entries: the error bound's BiCGStab, a matrix of "
               f"{MATRIX_ENTRY_BYTES:.0f} bytes a stored entry and {BICGSTAB_VECTORS + WORK_VECTORS} vectors); "
               "free memory or pass a larger memory= (bytes)")
        raise (ValueError if given else MemoryError)(msg)
    krylov = [s for s in steps if s.startswith("gmres")]
    restart = probe_restart(n, None, entries_per_state=e / n)
    if not krylov:
        return list(steps), restart, ""
    fit = int((budget + released - solve_bytes("gmres", n, e, restart=0)) / (8.0 * n))
    if fit >= restart:
        return list(steps), restart, ""
    if fit >= LEAN_MIN_RESTART:
        return list(steps), fit, (f"GMRES({fit}): the largest basis that fits the budget of {_size(budget)} "
                                  f"(GMRES({restart}) needs {_size(need('gmres', restart))})")
    lean = []
    for s in steps:
        if s in ("lu", "bicgstab-first-probe"):           # the lean plan's BiCGStab takes the whole probe budget
            continue
        if s.startswith("gmres"):
            s = "bicgstab-probe" if s == krylov[0] else "gauss_seidel"
        if s not in lean:
            lean.append(s)
    return lean, LEAN_MIN_RESTART, (
        f"lean: GMRES({LEAN_MIN_RESTART}) needs {_size(need('gmres', LEAN_MIN_RESTART))}, above the budget "
        f"of {_size(budget)}: BiCGStab ({_size(need('bicgstab'))}) then Gauss-Seidel sweeps on Q^T in "
        "place instead, and no direct solve")


def dense_fallback(states: int, budget: float) -> bool:
    """Whether ``auto``'s dense last resort fits a class: at most :data:`DENSE_FALLBACK` states and
    :data:`DENSE_BYTES` ``* states**2`` bytes within the plan's ``budget``.

    >>> dense_fallback(1500, 24e9), dense_fallback(5000, 24e9), dense_fallback(3000, 1e8)
    (True, False, False)
    """
    return int(states) <= DENSE_FALLBACK and DENSE_BYTES * float(states) ** 2 <= budget


def probe_restart(owned_states: int, memory, entries_per_state: float = None) -> int:
    """The restart of ``auto``'s GMRES probe: :data:`PROBE_RESTART` Arnoldi vectors, fewer (but at
    least :data:`PROBE_MIN_RESTART`) where their basis would take more than a tenth of ``memory``
    bytes (None: no such limit; :func:`memory_plan` fits the whole solve into its budget) or more
    than :data:`BASIS_BYTES_PER_ENTRY` per stored entry of the generator (``entries_per_state`` of
    them a state, the diagonal included).

    >>> probe_restart(10**6, 24e9), probe_restart(10**7, 24e9), probe_restart(10**9, 24e9)
    (100, 29, 20)
    >>> probe_restart(10**6, 24e9, entries_per_state=9.8), probe_restart(10**6, 24e9, entries_per_state=4.5)
    (48, 21)
    """
    fit = PROBE_RESTART if memory is None else int(0.1 * memory / (8.0 * max(owned_states, 1))) - 1
    if entries_per_state is not None:
        fit = min(fit, int(BASIS_BYTES_PER_ENTRY * entries_per_state / 8.0) - 1)
    return max(PROBE_MIN_RESTART, min(PROBE_RESTART, fit))


def structure_facts(op, support) -> dict:
    """Cheap facts about a closed class that ``auto`` chooses by (every backend; O(nnz)).

    Returns a dict with ``states``, ``transitions`` (off-diagonal entries in the
    class), ``envelope_per_nnz`` (the envelope of the symmetrised pattern in
    state order over its number of entries: below about 10 the chain is
    banded and a direct solve in state order fills in little),
    ``profile_flops`` (the sum of the squared row widths: a bound on the work
    of that solve), and
    ``dimensions``: how many state variables vary on the class (None for a
    chain without a state table).

    Examples
    --------
    >>> import ctmc
    >>> from ctmc.backends import operator_for
    >>> m = ctmc.Model("mm1k"); n = m.var("n", 0, 50)
    >>> m.event("a", guard=n < 50, rate=1.0, update={n: n + 1})
    >>> m.event("d", guard=n > 0, rate=2.0, update={n: n - 1})
    >>> c = m.build(initial={"n": 0}); op = operator_for(c, "scipy")
    >>> f = structure_facts(op, np.ones(c.n_states, dtype=bool))
    >>> f["dimensions"], f["envelope_per_nnz"] <= 1
    (1, True)
    """
    m = op.stop - op.start
    nnz = int(np.sum(op.offdiagonal_counts(), where=support)) if m else 0
    # the first column of each row of the symmetrised pattern: the smallest column of a non-zero
    # entry of the row of Q or of Q^T, or the diagonal (column start + i); one pass over each, lowering
    # one int64 vector, and the row widths w = start + i - first made in its place block by block
    # (exact as floats): one vector beside Q (the scipy backend reads Q^T's rows as Q's columns)
    first = op.lowest_columns(False)
    op.lowest_columns(True, out=first)                    # (the scipy backend: from Q's columns, no Q^T made)
    w = first.view(float)
    for s in range(0, m, _BLOCK):
        e = min(s + _BLOCK, m)
        w[s:e] = np.arange(op.start + s, op.start + e, dtype=np.int64) - first[s:e]   # read, then written
    del first
    np.copyto(w, 0.0, where=~support)
    g = op.allsum(np.array([w.sum(), nnz, w @ w], dtype=float))
    del w                                                 # (not held beside the class's rows below)
    facts = {"states": count(op, support), "transitions": int(g[1]),
             "envelope_per_nnz": float(g[0] / max(g[1], 1.0)), "profile_flops": float(g[2]),
             "dimensions": None}
    if op.states is not None:
        rows = np.flatnonzero(support)
        rows += op.start                                  # (in place: one vector, not two)
        facts["dimensions"] = _dimensions(op, rows)
    return facts


#: rows :func:`structure_facts` turns from first columns into widths at a time
_BLOCK = 1 << 14

#: states of a class whose variables are decoded first (every k-th state): a variable that varies on
#: them varies on the class, and only the others are decoded for the whole class
DIM_SAMPLE = 4096


def _dimensions(op, rows) -> int:
    """How many state variables take more than :data:`DIM_VALUES` values on the states ``rows`` (owned).

    Every variable is decoded on :data:`DIM_SAMPLE` of them, evenly spread; those
    that vary there count at once and the others are decoded on all of them
    (decoding costs a few milliseconds a variable per million states). The
    same collectives on every process: the choice of the second round is made
    from global values.
    """
    names = list(op.states.names)

    def spans(names, rows):
        out = []
        for name in names:
            span = op.states.value_range(name, rows)      # decoded for these states alone, not kept
            lo = op.allmin(float(span[0]) if span else np.inf)
            hi = op.allmax(float(span[1]) if span else -np.inf)
            out.append(hi - lo + 1)
        return out

    first = spans(names, rows[::max(1, -(-rows.size // DIM_SAMPLE))])   # spread over the class (codes sort
                                                                             # by the first variables)
    dims = sum(int(v > DIM_VALUES) for v in first)
    rest = [name for name, v in zip(names, first) if not v > DIM_VALUES]
    if rest and op.allmax(float(rows.size > DIM_SAMPLE)) > 0:
        dims += sum(int(v > DIM_VALUES) for v in spans(rest, rows))
    return dims


def auto_plan(facts) -> tuple:
    """The methods ``auto`` tries in turn, and why (a pure rule on :func:`structure_facts`).

    >>> auto_plan({"states": 500, "envelope_per_nnz": 40.0, "dimensions": 2})[0]
    ['gth']
    >>> auto_plan({"states": 10**5, "envelope_per_nnz": 3.0, "dimensions": 3})[0]
    ['lu', 'gmres']
    >>> auto_plan({"states": 10**5, "envelope_per_nnz": 300.0, "dimensions": 2})[0]
    ['lu', 'gmres']
    >>> auto_plan({"states": 10**5, "envelope_per_nnz": 300.0, "dimensions": 16})[0]
    ['bicgstab-first-probe', 'gmres-probe', 'gauss_seidel-probe', 'lu', 'gmres-long', 'power']
    """
    n, env, dims = facts["states"], facts["envelope_per_nnz"], facts["dimensions"]
    flops = facts.get("profile_flops", np.inf)
    if n <= AUTO_GTH:
        return ["gth"], f"{n} states <= {AUTO_GTH}: dense subtraction-free elimination"
    if natural_is_cheap(env, flops, 1.0):
        return ["lu", "gmres"], (f"banded in state order (envelope {env:.1f} x nnz, profile work {flops:.1e}): "
                                 "direct solve")
    if dims is None or dims <= 2:
        return ["lu", "gmres"], (f"{'no state table' if dims is None else f'{dims} dimensions'}: "
                                 "direct solve with a fill-reducing ordering")
    return ["bicgstab-first-probe", "gmres-probe", "gauss_seidel-probe", "lu", "gmres-long", "power"], (
        f"{dims} dimensions: a direct solve fills in badly; BiCGStab with a Gauss-Seidel preconditioner "
        f"({BICGSTAB_FIRST_ITERATIONS} iterations at most), then GMRES (its basis sized to the generator and the "
        f"memory budget, memory_plan) with it "
        f"({PROBE_ITERATIONS} iterations at most), then Gauss-Seidel sweeps while they converge fast, "
        "then the direct solve (given up when its factors outgrow the memory), then GMRES with its whole "
        "iteration budget")


