r"""First passage at scale: the joint law of :math:`(T_A, X_{T_A})` from given sources, block by block.

For a target set :math:`A`, sources :math:`i` and target columns :math:`j`,

.. math::

    \Phi_{ij}(s) = E_i[e^{-sT_A};\, X_{T_A} = j], \qquad
    (sI - Q_{RR})\, \Phi(s) = Q_{RA},

whose value at :math:`s = 0` is the absorption law, and the joint CDF
:math:`P_i(T_A \le t, X_{T_A} = j)` (uniformisation of the chain with
:math:`A` absorbing). :func:`ctmc.passage.first_passage` sets up the sets and
systems (:class:`~ctmc.passage.PassageSetup`) and grades the answer; the
solves and products that make it cheap at scale are here (:func:`solve_joint`),
on the primitives of :mod:`ctmc.backends.base`.

Cost model
----------
With ``n`` the states solved on, ``r`` the sources and ``m`` the target columns:

* **The set solved on** is :math:`X = R \cap \mathrm{reach}^+(\text{sources})`,
  the states the sources can visit before :math:`A`. It is closed under the
  moves inside :math:`R`, so solves on :math:`X` alone give the sources'
  rows exactly; ``n = |X|`` (``info["n_reach"]``): a source near the
  bottom of a level-structured chain sees a small corner of it.
* :math:`Q_{XA}` is a sparse block
  (:meth:`~ctmc.backends.base.Operator.rate_columns`: the in-rates of the
  targets, a few per target), never a dense states x targets array.
* **Adjoint** (``r <= m``, any solver but ``gth``): one transposed solve
  :math:`M^T y_i = e_i` per source and point ``s``; row ``i`` is
  :math:`Q_{XA}^T y_i`. **Forward** (``r > m``): one solve
  :math:`M x_j = Q_{XA} e_j` per target column and point. So
  ``min(r, m)`` solves per point (``info["solves_per_point"]``) and, for
  ``lu``, one factorisation per point. Under ``auto``, an
  ``X`` that splits into strongly connected components none larger than
  a quarter of it is factorised block by block
  (:class:`~ctmc.passage_systems.BlockTriangularSystem`, ``method == "btf"``): time and memory
  about linear in ``n`` when the components are small or banded (the JSQ
  levels before the first equality), where one factorisation of ``X``
  fills the triangle between them. On several processes ``X`` is gathered
  and solved so on each when it fits the memory
  (:func:`~ctmc.passage_systems.gathered_fits`), else factorised as one distributed set.
  An ``X`` of at most 1000 states with adjoint solves and more target columns than one block holds takes the
  sparse solver (``gth`` has no transposed solve); on several processes it is gathered and factorised on each
  (:class:`~ctmc.passage_systems.ReplicatedSystem`, ``method == "lu-replicated"``), not by one
  distributed factorisation spanning every state.
* Right-hand sides are dense blocks of ``w`` columns of the owned length
  ``N`` (the process's rows of the chain), ``24 w N`` bytes within
  ``block_memory`` (``1 <= w <=``
  :data:`RHS_BLOCK`, ``info["block_width"]``), solved one block after
  another: memory is the factorisation (or Krylov basis) plus one block,
  whatever ``r`` and ``m``.
* The CDF (``t``) is uniformised forward from each source (``r <= m``) or
  backward from each target column, in the same blocks: ``w`` vectors of
  the owned length at a time, products with :math:`Q` only.
* The answer is ``r x m`` numbers per point (plus the absorption law),
  replicated on every process; above ``max_result_bytes`` it is refused
  before any work. The laws from *every* state into *every* target state
  are ``states x targets`` numbers whatever the method; ask for the columns
  needed (``targets``: one forward solve each gives them from every
  source) or for the sources needed, and call again for the next block.
"""
from __future__ import annotations

import numpy as np

from .backends.base import worst
from .progress import Progress
from .results import Status
from .sets import global_indices, owned_mask

__all__ = ["BLOCK_MEMORY", "RESULT_MEMORY", "RHS_BLOCK", "block_width", "rows_and_columns", "solve_joint"]

#: default memory for the dense blocks of right-hand sides (bytes per process)
BLOCK_MEMORY = 1 << 28
#: default largest answer (bytes, every array of the answer together)
RESULT_MEMORY = 1 << 31
#: most right-hand sides in one block (of every passage solve: :meth:`ctmc.passage.PassageSetup.solve` too)
RHS_BLOCK = 256


def block_width(op, budget: int) -> int:
    """Right-hand sides per block: three dense owned blocks (right-hand side, solution, a copy for the
    check) within ``budget`` bytes, at least one, at most :data:`RHS_BLOCK`."""
    for name, v in (("block_memory", budget),):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}: expected an integer number of bytes >= 1, got {v!r}")
    rows = max(1, op.stop - op.start)
    return int(min(RHS_BLOCK, max(1, int(budget) // (24 * rows))))


def _unit_block(op, idx, rows: int) -> np.ndarray:
    """Owned block of unit columns: column ``c`` is ``e_{idx[c]}`` (global indices)."""
    E = np.zeros((rows, idx.size))
    mine = (idx >= op.start) & (idx < op.stop)
    E[idx[mine] - op.start, np.flatnonzero(mine)] = 1.0
    return E


def rows_and_columns(op, tgt, sources, targets, points: int, max_result_bytes):
    """``(source mask (owned) or None, sources, target columns)`` (global indices), checked before any
    work: non-empty, the columns inside ``target``, the answer (``points`` arrays of sources x
    columns) at most ``max_result_bytes``."""
    v = max_result_bytes
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"max_result_bytes: expected an integer number of bytes >= 1, got {v!r}")
    n = op.n
    mask = None if sources is None else owned_mask(sources, op.states, n, op.start, op.stop, "sources")
    src = global_indices(op, np.ones(tgt.size, dtype=bool) if mask is None else mask)
    if src.size == 0:
        raise ValueError("sources: the set of states is empty")
    cols = tgt
    if targets is not None:
        want = owned_mask(targets, op.states, n, op.start, op.stop, "targets")
        if op.allsum(float((want & ~tgt).sum())) > 0:
            raise ValueError("targets: the columns asked for must be states of target")
        cols = want & tgt
    columns = global_indices(op, cols)
    if columns.size == 0:
        raise ValueError("targets: the set of states is empty")
    need = 8.0 * src.size * columns.size * points
    if need > max_result_bytes:
        raise ValueError(f"sources, targets: the answer would hold {src.size} sources x {columns.size} targets x "
                         f"{points} arrays = {need / 2**30:.3g} GiB, above max_result_bytes={max_result_bytes}; "
                         "ask for fewer sources or target columns (targets=...) per call, or raise max_result_bytes")
    return mask, src, columns


def solve_joint(op, ps, tgt, src, columns, svals, tvals, *, adjoint: bool, width: int, lam: float, eps: float,
                max_terms: int):
    """The answer of :func:`ctmc.passage.first_passage` from its set-up ``ps``
    (:class:`~ctmc.passage.PassageSetup`), block by block.

    Returns ``(probabilities, laplace or None, cdf or None, truncation bound, backward error, balance
    error, solve report (status, reason, iterations, blocks), solves per point)``.
    """
    Rm = ps.reach
    r, m, nloc = src.size, columns.size, tgt.size
    own = (src >= op.start) & (src < op.stop)
    lrow = src[own] - op.start
    at_target = np.zeros((r, m))
    a_src = np.isin(src, columns)
    at_target[np.flatnonzero(a_src), np.searchsorted(columns, src[a_src])] = 1.0
    B = op.rate_columns(Rm, columns).tocsc()      # Q_XA, owned rows x target columns, sparse
    in_r = np.zeros(r, dtype=bool)
    in_r[np.flatnonzero(own)] = Rm[lrow]
    # the sources whose rows need a solve (in X), numbered globally, the same list on every process
    solve_src = np.flatnonzero(op.allsum(in_r.astype(float)) > 0.5)
    state = {"st": Status.SUCCESS, "reason": "", "iters": 0, "blocks": 0}

    def account(rep):
        state["st"], state["reason"] = worst(state["st"], rep.status), rep.reason or state["reason"]
        state["iters"] += rep.iterations
        state["blocks"] += 1

    def joint(sv):
        """E_i[exp(-s T); X_T = j] for the sources (rows) and target columns, block by block."""
        part = np.zeros((r, m))
        err = bal = 0.0
        if adjoint:  # one transposed solve per source: M^T y_i = e_i, row i = Q_XA^T y_i
            for c0 in range(0, solve_src.size, width):
                blk = solve_src[c0:c0 + width]
                E = _unit_block(op, src[blk], nloc)
                Y, rep = ps.solve(sv, "reach", E, transpose=True)
                account(rep)
                part[blk] = (B.T @ Y).T
                e, b2 = ps.errors(sv, "reach", Y, E, transpose=True)
                err, bal = max(err, e), max(bal, b2)
        else:        # one solve per target column: M x_j = Q_XA e_j
            for c0 in range(0, m, width):
                c1 = min(m, c0 + width)
                Bj = B[:, c0:c1].toarray()
                X, rep = ps.solve(sv, "reach", Bj)
                account(rep)
                part[np.flatnonzero(own), c0:c1] = X[lrow]
                e, b2 = ps.errors(sv, "reach", X, Bj)
                err, bal = max(err, e), max(bal, b2)
        return at_target + op.allsum(part.ravel()).reshape(r, m), err, bal

    probs, err, bal = joint(0.0)
    lap = None
    if svals is not None:
        lap = np.empty((svals.size, r, m))
        with Progress(f"first_passage, {svals.size} transform points", total=svals.size) as prog:
            for k, sv in enumerate(svals):
                lap[k], e, b2 = joint(sv)
                err, bal = max(err, e), max(bal, b2)
                if sv != 0.0:                     # s = 0's system serves the condition estimate
                    ps.release(sv, "reach")
                prog.update(f"s = {sv:g}", done=k + 1)
    cdf, bound = None, 0.0
    if tvals is not None:
        cdf, bound = _passage_cdf(op, tgt, src, columns, tvals, lam, width, eps, max_terms)
    n_solves = int(solve_src.size if adjoint else m)
    return probs, lap, cdf, bound, err, bal, state, n_solves


def _passage_cdf(op, tgt, src, columns, tvals, lam, width, eps, max_terms):
    r""":math:`P_i(T_A \le t, X_{T_A} = j)` by uniformisation of the chain with ``A`` absorbing, in blocks
    of ``width`` vectors: forward from the sources when they are fewer than the target columns
    (:math:`e_i^T e^{Q_a t}`, :math:`Q_a = \mathrm{diag}(1_{A^c}) Q`), else backward from each target
    column (:math:`e^{Q_a t} e_j`). Returns ``(cdf (n_t, r, m), truncation bound)``."""
    from .transient import uniformize_operator as uniformize
    keep = (~tgt).astype(float)
    r, m, nloc = src.size, columns.size, tgt.size
    own = (src >= op.start) & (src < op.stop)
    lrow = src[own] - op.start
    tl = (columns >= op.start) & (columns < op.stop)
    part = np.zeros((tvals.size, r, m))
    bound = 0.0
    if r <= m:
        def apply(V):
            return op.apply(keep[:, None] * V, transpose=True)
        for c0 in range(0, r, width):
            blk = np.arange(c0, min(r, c0 + width))
            Pt, b = uniformize(apply, _unit_block(op, src[blk], nloc), tvals, lam, eps=eps, max_terms=max_terms,
                               roundoff=op.product_roundoff())
            bound = max(bound, b)
            # Pt: (n_t, owned states, sources of the block) -> rows = sources, columns = owned targets
            part[:, blk[:, None], np.flatnonzero(tl)[None, :]] = np.transpose(
                Pt[:, columns[tl] - op.start, :], (0, 2, 1))
    else:
        def apply(V):
            return keep[:, None] * op.apply(V)
        rows = np.flatnonzero(own)
        for c0 in range(0, m, width):
            c1 = min(m, c0 + width)
            Pt, b = uniformize(apply, _unit_block(op, columns[c0:c1], nloc), tvals, lam, eps=eps,
                               max_terms=max_terms, roundoff=op.product_roundoff())
            bound = max(bound, b)
            part[:, rows, c0:c1] = Pt[:, lrow, :]
    return op.allsum(part.ravel()).reshape(tvals.size, r, m), bound
