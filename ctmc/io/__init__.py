r"""Reading and writing chains: PRISM explicit files, Storm's DRN, NumPy archives, Matrix Market.

A chain travels as its generator :math:`Q` (or, in the PRISM and Storm
formats, its off-diagonal *rates* :math:`q_{ij} = Q_{ij} \ge 0`,
:math:`i \ne j`, from which :math:`Q_{ii} = -\sum_{j \ne i} q_{ij}`), its
table of integer state variables, its labels (named sets of states), its
named state rewards :math:`r` (a reward *rate* earned while in a state) and
its initial states. Every reader returns a :class:`ctmc.CTMC` and checks what
it reads; a malformed file raises :class:`ValueError` naming the file and the
line (``path:line: message``), never another exception. State indices are
zero-based everywhere. One number rule holds in every format: integers are
ASCII ``[+-]?[0-9]+`` within int64 (no ``_``, no other scripts' digits),
numbers decimal floats (or Storm's rationals ``p/q``), indices in
``0..n-1``; names, states and transition rewards given twice are refused,
not merged; and a declared size (``n m``, ``@nr_states``, an ``.npy``
header, a Matrix Market size line) is checked against what the file holds
before anything of that size is made.

One module a format, all their functions importable from here:
``ctmc.io.prism`` (:func:`write_prism`, :func:`read_prism`), ``ctmc.io.drn``
(:func:`write_drn`, :func:`read_drn`), ``ctmc.io.npz`` (:func:`save_npz`,
:func:`load_npz`) and ``ctmc.io.mtx`` (:func:`write_mtx`, :func:`read_mtx`);
``ctmc.io._common`` holds what they share (lines and numbers read with the
file and line in the message, the shortest text of a float, the ``init``
label).

PRISM explicit files (``prism model.sm -exportmodel out.tra,sta,lab``), ``ctmc.io.prism``
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

Storm's DRN format (``storm --prism model.sm --exportbuild out.drn``), ``ctmc.io.drn``
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

NumPy archives (:func:`save_npz`, :func:`load_npz`), ``ctmc.io.npz``
    The generator in CSR form, the state variables, labels, rewards and
    initial states in one compressed ``.npz`` file, read back without pickle
    (object arrays are refused; each member's header is checked against its
    size before it is read): the exact chain, bit for bit.

Matrix Market (:func:`write_mtx`, :func:`read_mtx`), ``ctmc.io.mtx``
    The generator alone, as a sparse real matrix, written through
    :func:`scipy.io.mmwrite` and read by ctmc (coordinate or array, real or
    integer, general or symmetric) with the rules above.

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

from ._common import INIT, PathLike  # noqa: F401  (kept importable from ctmc.io)
from .drn import read_drn, write_drn
from .mtx import read_mtx, write_mtx
from .npz import NPZ_VERSION, load_npz, save_npz  # noqa: F401  (NPZ_VERSION: as above)
from .prism import read_prism, write_prism

__all__ = ["write_prism", "read_prism", "write_drn", "read_drn", "save_npz", "load_npz",
           "write_mtx", "read_mtx"]
