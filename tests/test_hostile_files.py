"""Hostile interchange files: every reader refuses them with one ValueError naming the file and the line.

The promise of :mod:`ctmc.io` under test: on any malformed file a reader
(and ``ctmc solve``) raises a :class:`ValueError` whose message starts with
``path:line:`` (``path: member 'name':`` for the members of an ``.npz``
archive), never another exception; numbers follow one strict rule (ASCII
digits, no ``_``, integers within int64, indices never negative); a name, a
state or a transition reward given twice is refused, never merged; and the
memory a reader uses is bounded by what the file holds, not by a size it
declares (checked with :mod:`tracemalloc` on tiny files declaring 3e8
states). A fuzz test mutates valid small files and checks that the only
outcomes are a ValueError naming the file or a chain; for ``.tra`` files a
reference parser written here, line by line with Python's exact integers,
says which of the two and which chain.
"""
from __future__ import annotations

import io
import itertools
import re
import tracemalloc
import zipfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctmc
import ctmc.io as cio
from ctmc.cli import main

# ---------------------------------------------------------------------------
# small valid files, each of which the rows below breaks in one place

TRA = "3 3\n0 1 1\n1 2 2\n2 0 4\n"
STA = "(a)\n0:(0)\n1:(1)\n2:(2)\n"
LAB = '0="init" 1="busy"\n0: 0\n1: 1\n'
SREW = "3 2\n0 1.5\n2 2\n"
DRN_HEAD = "@type: CTMC\n@parameters\n\n@reward_models\nr\n@nr_states\n2\n@nr_choices\n2\n@model\n"
DRN_BODY = ("state 0 !3 [1] init\n//[x=0]\n\taction 0\n\t\t1 : 3\n"      # lines 11-14
            "state 1 !1 [0]\n//[x=1]\n\taction 0\n\t\t0 : 1\n")           # lines 15-18
BIG = 2 ** 63            # one past the largest int64
ARABIC_ONE = "\u0661"    # a digit of another script: int() takes it, the rule does not


def _chain():
    m = ctmc.Model("small")
    n = m.var("n", 0, 2)
    m.event("up", guard=n < 2, rate=1.0, update={n: n + 1})
    m.event("down", guard=n > 0, rate=2.5, update={n: n - 1})
    m.label("full", n == 2)
    m.reward("queue", n)
    return m.build(initial={"n": 0})


# (case, {suffix: text or bytes}, the file at fault, its line, a fragment of the message)
PRISM_ROWS = [
    ("sta value 2^63", {"tra": TRA, "sta": f"(a)\n0:(0)\n1:({BIG})\n2:(2)\n"}, "sta", 3, "out of range"),
    ("sta value -2^63-1", {"tra": TRA, "sta": f"(a)\n0:(0)\n1:(-{BIG + 1})\n2:(2)\n"}, "sta", 3,
     "out of range"),
    ("sta variable twice", {"tra": TRA, "sta": "(a,a)\n0:(0,0)\n1:(1,1)\n2:(2,2)\n"}, "sta", 1, "twice"),
    ("sta same values", {"tra": TRA, "sta": "(a)\n0:(0)\n1:(1)\n2:(1)\n"}, "sta", 4, "same values"),
    ("sta underscore", {"tra": TRA, "sta": "(a)\n0:(0)\n1:(1_0)\n2:(2)\n"}, "sta", 3, "integer"),
    ("tra underscore rate", {"tra": "3 3\n0 1 1_0\n1 2 2\n2 0 4\n"}, "tra", 2, "expected a number"),
    ("tra underscore index", {"tra": "11 3\n0 1_0 1\n1 2 2\n2 0 4\n"}, "tra", 2, "integer"),
    ("tra non-ascii digit", {"tra": f"3 3\n0 {ARABIC_ONE} 1\n1 2 2\n2 0 4\n"}, "tra", 2, "integer"),
    ("tra non-ascii header", {"tra": f"3 {ARABIC_ONE}\n0 1 1\n"}, "tra", 1, "integer"),
    ("tra negative index", {"tra": "ctmc\n0 1 1\n-1 0 1\n"}, "tra", 3, "out of range"),
    ("tra rational of floats", {"tra": "3 3\n0 1 1\n1 2 2.1/05\n2 0 4\n"}, "tra", 3, "expected a number"),
    ("tra rational over 0", {"tra": "3 3\n0 1 1\n1 2 1/0\n2 0 4\n"}, "tra", 3, "expected a number"),
    ("tra 5000-digit index", {"tra": f"3 3\n0 1 1\n1 {'1' * 5000} 2\n2 0 4\n"}, "tra", 3, "out of range"),
    ("sta 5000-digit value", {"tra": TRA, "sta": f"(a)\n0:(0)\n1:(-{'7' * 5000})\n2:(2)\n"}, "sta", 3,
     "out of range"),
    ("tra zero rate", {"tra": "3 3\n0 1 0\n1 2 2\n2 0 4\n"}, "tra", 2, "> 0"),
    ("tra infinite rate", {"tra": "3 3\n0 1 inf\n1 2 2\n2 0 4\n"}, "tra", 2, "finite"),
    ("tra states beyond content", {"tra": "300000000 1\n0 1 1\n"}, "tra", 1, "at most 3 states"),
    ("tra hint index 2^62", {"tra": f"ctmc\n0 {2 ** 62} 1\n"}, "tra", 1, "at most 3 states"),
    ("tra header 2^63", {"tra": f"{BIG} 1\n0 1 1\n"}, "tra", 1, "out of range"),
    ("tra not utf-8", {"tra": b"3 3\n0 1 1\n1 2 \xff\n2 0 4\n"}, "tra", 3, "not UTF-8"),
    ("tra not utf-8 after comment", {"tra": b"# \xc3\n3 1\n0 1 1\n"}, "tra", 1, "not UTF-8"),
    ("lab name twice", {"tra": TRA, "lab": '0="init" 1="a" 2="a"\n0: 0 1\n'}, "lab", 1,
     "'a' is declared twice"),
    ("lab state twice", {"tra": TRA, "lab": '0="init" 1="a"\n0: 0\n0: 1\n'}, "lab", 3, "twice"),
    ("lab non-ascii number", {"tra": TRA, "lab": f'0="init" {ARABIC_ONE}="a"\n0: 0\n'}, "lab", 1, "header"),
    ("storm lab name twice", {"tra": TRA, "lab": "#DECLARATION\ninit a a\n#END\n0 init\n"}, "lab", 2,
     "twice"),
    ("lab not utf-8", {"tra": TRA, "lab": b'0="init"\n0: 0\n1: \xfe\n'}, "lab", 3, "not UTF-8"),
    ("srew state twice", {"tra": TRA, "srew": "3 2\n0 1\n0 2\n"}, "srew", 3, "twice"),
    ("srew underscore", {"tra": TRA, "srew": "3 1\n0 1_000\n"}, "srew", 2, "expected a number"),
    ("trew absent transition", {"tra": TRA, "trew": "3 1\n1 0 1.0\n"}, "trew", 2, "does not have"),
    ("trew absent self-loop", {"tra": TRA, "trew": "3 1\n1 1 1.0\n"}, "trew", 2, "does not have"),
    ("tra rates summing beyond 1.8e308", {"tra": "3 4\n0 1 1\n1 2 1e308\n1 0 1e308\n2 0 4\n"}, "tra", 3,
     "state 1 sum beyond"),
    ("tra duplicates summing beyond 1.8e308", {"tra": "# c\n3 4\n0 1 1\n2 0 1e308\n\n2 0 1e308\n1 2 1\n"},
     "tra", 4, "state 2 sum beyond"),
    ("trew rewards beyond 1.8e308", {"tra": "3 3\n0 1 1\n1 2 1e300\n2 0 4\n",
                                     "trew": "3 2\n0 1 1\n1 2 1e10\n"}, "trew", 3, "state 1 times their rates"),
    ("trew transition twice", {"tra": TRA, "trew": "3 2\n0 1 1\n0 1 2\n"}, "trew", 3, "second reward"),
]

DRN_ROWS = [
    ("choices not one a state", DRN_HEAD.replace("@nr_choices\n2", "@nr_choices\n3") + DRN_BODY, 9,
     "@nr_choices is 3 for 2 states"),
    ("valuation of another variable", DRN_HEAD + DRN_BODY.replace("x=1", "y=1"), 12, "no value for y"),
    ("valuation missing on a state", DRN_HEAD + DRN_BODY.replace("//[x=1]\n", ""), 15,
     "no valuation comment"),
    ("valuation 2^63", DRN_HEAD + DRN_BODY.replace("x=1", f"x={BIG}"), 16, "out of range"),
    ("valuation underscore", DRN_HEAD + DRN_BODY.replace("x=1", "x=1_0"), 16, "integer"),
    ("valuation twice a variable", DRN_HEAD + DRN_BODY.replace("[x=1]", "[x=1\t& x=2]"), 16, "two values"),
    ("same valuations", DRN_HEAD + DRN_BODY.replace("x=1", "x=0"), 16, "same values"),
    ("rate underscore", DRN_HEAD + DRN_BODY.replace("0 : 1", "0 : 1_0").replace("!1 ", "!10 "), 18,
     "expected a number"),
    ("target non-ascii", DRN_HEAD + DRN_BODY.replace("\t\t1 : 3", f"\t\t{ARABIC_ONE} : 3"), 14, "integer"),
    ("target negative", DRN_HEAD + DRN_BODY.replace("\t\t1 : 3", "\t\t-1 : 3"), 14, "out of range"),
    ("state id underscore", DRN_HEAD + DRN_BODY.replace("state 1 ", "state 0_1 "), 15, "integer"),
    ("nr_states 2^63", DRN_HEAD.replace("\n2\n@nr_choices", f"\n{BIG}\n@nr_choices"), 7, "out of range"),
    ("nr_states 3e8, two states", DRN_HEAD.replace("\n2\n@nr_choices", "\n300000000\n@nr_choices") + DRN_BODY,
     7, "lists 2 states"),
    ("reward model twice", DRN_HEAD.replace("\nr\n", "\nr r\n") + DRN_BODY, 5, "declared twice"),
    ("reward bracket too long", DRN_HEAD + DRN_BODY.replace("[1]", "[1, 2]"), 11, "2 rewards"),
    ("reward underscore", DRN_HEAD + DRN_BODY.replace("[1]", "[1_0]"), 11, "expected a number"),
    ("label twice on a state line", DRN_HEAD + DRN_BODY.replace("init", "init init"), 11,
     "label 'init' is given twice"),
    ("quoted label twice", DRN_HEAD + DRN_BODY.replace("[0]", '[0] "a b" busy "a b"'), 15,
     "label 'a b' is given twice"),
    ("transition without its action line", DRN_HEAD + DRN_BODY.replace("//[x=1]\n\taction 0\n", "//[x=1]\n"),
     17, "before its 'action' line"),
    ("not utf-8", (DRN_HEAD + DRN_BODY).encode().replace(b"init", b"in\xe9t"), 11, "not UTF-8"),
]


def _write(d: Path, name: str, content) -> Path:
    p = d / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return p


def _read_prism_case(files, d: Path):
    p = {k: _write(d, f"m.{k}", v) for k, v in files.items()}
    return cio.read_prism(p["tra"], p.get("sta"), p.get("lab"), srew=p.get("srew"), trew=p.get("trew")), p


def _assert_names(err, path, line, fragment):
    msg = str(err.value)
    assert msg.startswith(f"{path}:{line}: "), msg
    assert fragment in msg, msg
    assert "\n" not in msg


@pytest.mark.parametrize("case, files, wrong, line, fragment", PRISM_ROWS, ids=[r[0] for r in PRISM_ROWS])
def test_prism_reader_refuses(case, files, wrong, line, fragment, tmp_path):
    with pytest.raises(ValueError) as err:
        _read_prism_case(files, tmp_path)
    _assert_names(err, tmp_path / f"m.{wrong}", line, fragment)


@pytest.mark.parametrize("case, text, line, fragment", DRN_ROWS, ids=[r[0] for r in DRN_ROWS])
def test_drn_reader_refuses(case, text, line, fragment, tmp_path):
    p = _write(tmp_path, "m.drn", text)
    with pytest.raises(ValueError) as err:
        cio.read_drn(p)
    _assert_names(err, p, line, fragment)


def test_the_valid_small_files_are_read(tmp_path):
    """The files the rows break are valid as they are (a row fails for its own reason only)."""
    chain, _ = _read_prism_case({"tra": TRA, "sta": STA, "lab": LAB, "srew": SREW,
                                 "trew": "3 2\n0 1 2\n2 0 0.5\n"}, tmp_path)
    # cycle 0 -> 1 -> 2 -> 0 with rates 1, 2, 4: pi = (4, 2, 1) / 7
    np.testing.assert_allclose(chain.stationary().pi, np.array([4, 2, 1]) / 7, rtol=1e-14)
    assert chain.rewards["m"].tolist() == [1.5 + 1 * 2, 0, 2 + 4 * 0.5]
    drn = cio.read_drn(_write(tmp_path, "m.drn", DRN_HEAD + DRN_BODY))
    assert drn.states["x"].tolist() == [0, 1] and drn.initial.tolist() == [0]
    assert drn.rewards["r"].tolist() == [1, 0]


# ---------------------------------------------------------------------------
# .npz archives: one member broken at a time

def _saved(tmp_path: Path) -> dict:
    p = cio.save_npz(_chain(), tmp_path / "good.npz")
    with np.load(p) as z:
        return {k: z[k] for k in z.files}


def _npy_bytes(header_shape, dtype, payload: bytes) -> bytes:
    """A ``.npy`` member whose header declares ``header_shape`` of ``dtype`` with ``payload`` as data."""
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                               "fortran_order": False, "shape": header_shape})
    return out.getvalue() + payload


def _zip(path: Path, members: dict) -> Path:
    """An archive of raw ``.npy`` members (bytes) or arrays."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, v in members.items():
            if not isinstance(v, bytes):
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.asarray(v), allow_pickle=True)
                v = buf.getvalue()
            zf.writestr(k + ".npy", v)
    return path


NPZ_ROWS = [
    # (case, change to the members of a good archive, member named, fragment)
    ("version an array", lambda z: z.update(version=np.array([1])), "version", "0-d"),
    ("format an array", lambda z: z.update(format=np.array(["ctmc-chain"])), "format", "0-d"),
    ("initial -1", lambda z: z.update(initial=np.array([-1])), "initial", "0..2"),
    ("initial twice", lambda z: z.update(initial=np.array([0, 0])), "initial", "twice"),
    ("same states", lambda z: z.update(state_0=np.array([0, 1, 1])), None, "same values"),
    ("state name twice", lambda z: z.update(state_names=np.array(["n", "n"]), state_1=z["state_0"]),
     "state_names", "twice"),
    ("label name twice", lambda z: z.update(label_names=np.array(["full", "full"]), label_1=z["label_0"]),
     "label_names", "twice"),
    ("object array", lambda z: z.update(reward_0=np.array([1, "x", None], dtype=object)), "reward_0",
     "objects"),
    ("label of floats", lambda z: z.update(label_0=np.array([0.0, 0.0, 1.0])), "label_0", "kind"),
    ("row pointers short", lambda z: z.update(Q_indptr=z["Q_indptr"][:-1]), "Q_shape", "pointers"),
    ("column index -1", lambda z: z.update(Q_indices=np.where(z["Q_indices"] == 2, -1, z["Q_indices"])),
     "Q_indices", "0..2"),
    ("member not of the layout", lambda z: z.update(extra=np.zeros(2)), "extra", "layout"),
    ("declared shape beyond the data", lambda z: z.update(
        Q_data=_npy_bytes((300_000_000,), float, z["Q_data"].tobytes())), "Q_data", "300000000"),
]


@pytest.mark.parametrize("case, change, member, fragment", NPZ_ROWS, ids=[r[0] for r in NPZ_ROWS])
def test_npz_reader_refuses(case, change, member, fragment, tmp_path):
    z = _saved(tmp_path)
    change(z)
    p = _zip(tmp_path / "m.npz", z)
    with pytest.raises(ValueError) as err:
        cio.load_npz(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}: member {member!r}: " if member else f"{p}: "), msg
    assert fragment in msg, msg


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9, 0.99])
def test_truncated_npz_is_refused(cut, tmp_path):
    good = cio.save_npz(_chain(), tmp_path / "good.npz").read_bytes()
    p = _write(tmp_path, "m.npz", good[:int(cut * len(good))])
    with pytest.raises(ValueError, match=re.escape(f"{p}: ")):
        cio.load_npz(p)


def test_the_good_npz_is_read_back(tmp_path):
    chain = _chain()
    back = cio.load_npz(_zip(tmp_path / "m.npz", _saved(tmp_path)))
    assert (back.Q != chain.Q).nnz == 0 and back.initial.tolist() == [0]
    assert back.states["n"].tolist() == [0, 1, 2] and back.labels["full"].tolist() == [False, False, True]


# ---------------------------------------------------------------------------
# Matrix Market

MTX = "%%MatrixMarket matrix coordinate real general\n% a generator\n2 2 4\n1 1 -1\n1 2 1\n2 1 2\n2 2 -2\n"
MTX_ROWS = [
    ("underscore", MTX.replace("2 1 2\n", "2 1 2_0\n").replace("2 2 -2", "2 2 -20"), 6, "expected a number"),
    ("entry twice", MTX.replace("2 2 4", "2 2 5") + "1 2 1\n", 8, "twice"),
    ("index 0", MTX.replace("1 2 1\n", "0 2 1\n"), 5, "out of range"),
    ("size beyond entries", MTX.replace("2 2 4", "300000000 300000000 4"), 3, "at most 9 states"),
    ("fewer entries", MTX.replace("2 2 4", "2 2 5"), 3, "announces 5"),
    ("not square", MTX.replace("2 2 4", "2 3 4"), 3, "square"),
    ("not utf-8", MTX.encode().replace(b"a generator", b"a g\xe9n"), 2, "not UTF-8"),
]


@pytest.mark.parametrize("case, text, line, fragment", MTX_ROWS, ids=[r[0] for r in MTX_ROWS])
def test_mtx_reader_refuses(case, text, line, fragment, tmp_path):
    p = _write(tmp_path, "m.mtx", text)
    with pytest.raises(ValueError) as err:
        cio.read_mtx(p)
    _assert_names(err, p, line, fragment)


def test_the_good_mtx_is_read(tmp_path):
    chain = cio.read_mtx(_write(tmp_path, "m.mtx", MTX))
    assert chain.Q.toarray().tolist() == [[-1, 1], [2, -2]]


# ---------------------------------------------------------------------------
# ctmc solve: exit status 2 and one line naming the file and the line

SOLVE_ROWS = [
    ("drn valuation 2^63", "m.drn", DRN_HEAD + DRN_BODY.replace("x=1", f"x={BIG}"), ":16: "),
    ("drn declares 3e8 states", "m.drn",
     DRN_HEAD.replace("\n2\n@nr_choices", "\n300000000\n@nr_choices") + DRN_BODY, ":7: "),
    ("tra not utf-8", "m.tra", b"3 3\n0 1 1\n1 2 \xff\n2 0 4\n", ":3: "),
    ("tra underscore", "m.tra", "3 3\n0 1 1_0\n1 2 2\n2 0 4\n", ":2: "),
    ("npz truncated", "m.npz", None, ": "),
]


@pytest.mark.parametrize("case, name, content, where", SOLVE_ROWS, ids=[r[0] for r in SOLVE_ROWS])
def test_ctmc_solve_refuses_in_one_line(case, name, content, where, tmp_path, capsys):
    if content is None:
        good = cio.save_npz(_chain(), tmp_path / "good.npz").read_bytes()
        content = good[:len(good) // 2]
    p = _write(tmp_path, name, content)
    try:
        status = main(["solve", str(p), "--stationary"])
    except SystemExit as exc:
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert f"{p}{where}" in err, err


def test_ctmc_solve_reports_the_sta_beside_the_tra(tmp_path, capsys):
    _write(tmp_path, "m.tra", TRA)
    _write(tmp_path, "m.sta", f"(a)\n0:(0)\n1:({BIG})\n2:(2)\n")
    try:
        status = main(["solve", str(tmp_path / "m.tra"), "--stationary"])
    except SystemExit as exc:
        status = exc.code
    err = capsys.readouterr().err
    assert status == 2 and f"{tmp_path / 'm.sta'}:3: " in err and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------------------
# memory: bounded by the file, never by the size it declares

HUGE = 300_000_000
FUZZ_ROUTES = settings(max_examples=60, deadline=None,
                       suppress_health_check=[HealthCheck.function_scoped_fixture])


def _peak(fn) -> int:
    """Peak traced memory (bytes) of ``fn()``, which must raise ValueError."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError):
            fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


MEMORY_ROWS = [
    ("drn", "m.drn", DRN_HEAD.replace("\n2\n@nr_choices", f"\n{HUGE}\n@nr_choices") + DRN_BODY, cio.read_drn),
    ("tra", "m.tra", f"{HUGE} 1\n0 1 1\n", cio.read_prism),
    ("tra hint", "m.tra", f"ctmc\n0 {HUGE - 1} 1\n", cio.read_prism),
    ("mtx", "m.mtx", MTX.replace("2 2 4", f"{HUGE} {HUGE} 4"), cio.read_mtx),
    ("npz", "m.npz", None, cio.load_npz),
]


@pytest.mark.parametrize("case, name, content, reader", MEMORY_ROWS, ids=[r[0] for r in MEMORY_ROWS])
def test_a_tiny_file_declaring_3e8_states_costs_little(case, name, content, reader, tmp_path):
    if content is None:
        z = _saved(tmp_path)
        z["Q_shape"] = np.array([HUGE, HUGE])
        z["Q_indptr"] = _npy_bytes((HUGE + 1,), np.int64, z["Q_indptr"].tobytes())
        p = _zip(tmp_path / name, z)
    else:
        p = _write(tmp_path, name, content)
    assert p.stat().st_size < 4000
    assert _peak(lambda: reader(p)) < 4 * 2 ** 20


def test_a_wide_number_does_not_widen_the_fast_route(tmp_path):
    """3000 lines, one rate of 200,000 digits: read line by line, not as 3000 x 200 kB numpy strings."""
    wide = "1." + "0" * 200_000
    p = _write(tmp_path, "m.tra", "2 3000\n" + "0 1 1\n" * 2998 + f"0 1 {wide}\n1 0 2\n")
    tracemalloc.start()
    try:
        chain = cio.read_prism(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert chain.Q.toarray().tolist() == [[-2999, 2999], [2, -2]]     # the 2999 rates 0 -> 1 summed
    assert peak < 40 * 2 ** 20


def test_the_fast_route_takes_exactly_the_numbers_of_the_rule():
    """Every token of up to 4 bytes from ``01+-.eE``: numpy's conversions on the fast route accept it as an
    integer or a number exactly when the rule does (``parse_int``, ``parse_float``), with the same value."""
    from ctmc.io._common import fast_triples, parse_float, parse_int
    tokens = {"".join(t) for size in range(1, 5) for t in itertools.product("01+-.eE", repeat=size)}
    for tok in sorted(tokens):
        as_int = fast_triples(f"{tok} 0 1\n".encode())
        as_num = fast_triples(f"0 0 {tok}\n".encode())
        try:
            want_int = parse_int(tok, "f", 1, "i")
        except ValueError:
            want_int = None
        try:
            want_num = parse_float(tok, "f", 1, "x")
        except ValueError:
            want_num = None
        assert (None if as_int is None else int(as_int[0][0])) == want_int, tok
        assert (None if as_num is None else float(as_num[2][0])) == want_num, tok


@st.composite
def _tables(draw):
    """A chain's files: n states, distinct int64 rows of k variables, transitions with any positive rates."""
    n, k = draw(st.integers(1, 12)), draw(st.integers(1, 3))
    rows = draw(st.lists(st.tuples(*[st.integers(-2 ** 63, 2 ** 63 - 1)] * k), min_size=n, max_size=n,
                         unique=True))
    order = draw(st.permutations(range(n)))
    sta = f"({','.join(f'v{c}' for c in range(k))})\n" + "".join(
        f"{i}:({','.join(map(str, rows[i]))})\n" for i in order)
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=(n + 1) // 2,
                          max_size=20))
    rates = draw(st.lists(st.floats(min_value=5e-324, max_value=1e300), min_size=len(pairs),
                          max_size=len(pairs)))
    style = draw(st.sampled_from(["{!r}", "{:.17e}", "{:.3g}"]))
    tra = f"{n} {len(pairs)}\n" + "".join(f"{i} {j} {style.format(x)}\n" for (i, j), x in zip(pairs, rates))
    return tra, sta


@FUZZ_ROUTES
@given(files=_tables())
def test_the_fast_route_and_the_line_by_line_route_read_the_same_chain(files, tmp_path_factory):
    """A comment on line 1 sends a file down the line-by-line route: both routes give the same chain."""
    tra, sta = files
    d = tmp_path_factory.mktemp("routes")
    fast = cio.read_prism(_write(d, "f.tra", tra), _write(d, "f.sta", sta))
    slow = cio.read_prism(_write(d, "s.tra", "// slow\n" + tra), _write(d, "s.sta", "// slow\n" + sta))
    assert fast.Q.shape == slow.Q.shape and (fast.Q != slow.Q).nnz == 0
    assert np.array_equal(fast.Q.data, slow.Q.data) and np.array_equal(fast.Q.indices, slow.Q.indices)
    for name in fast.states.names:
        assert fast.states[name].tolist() == slow.states[name].tolist()
    values = [tuple(int(v) for v in line[line.index("(") + 1:-1].split(","))
              for line in sta.splitlines()[1:]]
    index = [int(line.split(":")[0]) for line in sta.splitlines()[1:]]
    table = list(zip(*[fast.states[name].tolist() for name in fast.states.names]))
    assert all(table[i] == v for i, v in zip(index, values))      # against Python's exact integers


# ---------------------------------------------------------------------------
# fuzz: mutated valid files give a ValueError naming the file, or a chain

_INT = re.compile(r"[+-]?[0-9]+")
_NUM = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_RATIO = re.compile(r"([+-]?[0-9]+)/([0-9]+)")


def _number(tok: str):
    """A decimal float or a rational ``p/q`` (q > 0) as the nearest double, None otherwise."""
    if _NUM.fullmatch(tok):
        return float(tok)
    mq = _RATIO.fullmatch(tok)
    if mq and int(mq.group(2)) > 0:
        try:
            return float(Fraction(int(mq.group(1)), int(mq.group(2))))
        except OverflowError:
            return float("inf")
    return None


def _reference_tra(data: bytes):
    """What a ``.tra`` file (header ``n m``, ``i j rate`` lines) means, or None when it is malformed.

    Written apart from ctmc.io, line by line with Python's exact integers
    and fractions: ``{(i, j): rate}`` summed over duplicates, self-loops
    dropped, and ``n``; comments and blank lines skipped.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = [s.strip(" \t\r\f\v") for s in text.split("\n")]
    lines = [s for s in lines if s and not s.startswith(("#", "//"))]
    if not lines:
        return None
    head = re.split(r"[ \t\r\f\v]+", lines[0])
    if len(head) != 2 or not all(_INT.fullmatch(t) for t in head):
        return None
    if any(len(t.lstrip("+-").lstrip("0")) > 19 for t in head):
        return None
    n, m = int(head[0]), int(head[1])
    if not (1 <= n < 2 ** 63 and 0 <= m < 2 ** 63) or len(lines) - 1 != m or n > 2 * m + 1:
        return None
    rates = {}
    for line in lines[1:]:
        t = re.split(r"[ \t\r\f\v]+", line)
        if len(t) != 3 or not (_INT.fullmatch(t[0]) and _INT.fullmatch(t[1])) or _number(t[2]) is None:
            return None
        if any(len(s.lstrip("+-").lstrip("0")) > 19 for s in t[:2]):
            return None
        i, j, x = int(t[0]), int(t[1]), _number(t[2])     # the rate as the double nearest to it
        if not (0 <= i < n and 0 <= j < n) or not 0 < x < float("inf"):
            return None
        if i != j:
            rates[(i, j)] = rates.get((i, j), 0) + Fraction(x)
    return n, rates


@st.composite
def _mutations(draw, data: bytes):
    """``data`` with one mutation: a byte changed, inserted or removed, a cut, two fields swapped, a line
    repeated or dropped."""
    kind = draw(st.sampled_from(["flip", "insert", "delete", "cut", "swap", "repeat", "drop"]))
    pos = draw(st.integers(0, max(len(data) - 1, 0)))
    if kind == "flip":
        new = draw(st.sampled_from(b"0123456789 -+._eE\n\t#\xff\xc3x"))
        return data[:pos] + bytes([new]) + data[pos + 1:]
    if kind == "insert":
        return data[:pos] + draw(st.sampled_from([b"0", b"_", b"-", b" ", b"\n", b"\xd9\xa1", b"9" * 20]))\
            + data[pos:]
    if kind == "delete":
        return data[:pos] + data[pos + 1:]
    if kind == "cut":
        return data[:pos]
    lines = data.split(b"\n")
    a = draw(st.integers(0, len(lines) - 1))
    if kind == "swap":
        t = lines[a].split(b" ")
        if len(t) > 1:
            b = draw(st.integers(0, len(t) - 2))
            t[b], t[b + 1] = t[b + 1], t[b]
        lines[a] = b" ".join(t)
    elif kind == "repeat":
        lines.insert(a, lines[a])
    else:
        del lines[a]
    return b"\n".join(lines)


def _good_files(tmp: Path) -> dict:
    chain = _chain()
    paths = cio.write_prism(chain, tmp / "good")
    return {"tra": paths[0].read_bytes(), "sta": paths[1].read_bytes(), "lab": paths[2].read_bytes(),
            "srew": paths[3].read_bytes(), "drn": cio.write_drn(chain, tmp / "good.drn").read_bytes(),
            "mtx": cio.write_mtx(chain, tmp / "good.mtx").read_bytes(),
            "npz": cio.save_npz(chain, tmp / "good.npz").read_bytes()}


_GOOD = {}


def _good(tmp_path_factory) -> dict:
    if not _GOOD:
        _GOOD.update(_good_files(tmp_path_factory.mktemp("good")))
    return _GOOD


def _read_one(kind: str, p: Path, d: Path):
    if kind == "drn":
        return cio.read_drn(p)
    if kind == "mtx":
        return cio.read_mtx(p)
    if kind == "npz":
        return cio.load_npz(p)
    if kind == "tra":
        return cio.read_prism(p)
    good = {k: _write(d, f"g.{k}", v) for k, v in _GOOD.items() if k in ("tra", "sta", "lab", "srew")}
    good[kind] = p
    return cio.read_prism(good["tra"], good["sta"], good["lab"], srew={"queue": good["srew"]})


FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("kind", ["tra", "sta", "lab", "srew", "drn", "mtx", "npz"])
@FUZZ
@given(data=st.data())
def test_a_mutated_file_is_a_valueerror_naming_it_or_a_chain(kind, data, tmp_path_factory):
    good = _good(tmp_path_factory)
    bad = data.draw(_mutations(good[kind]))
    d = tmp_path_factory.mktemp("fuzz")
    p = _write(d, f"m.{kind}", bad)
    try:
        chain = _read_one(kind, p, d)
    except ValueError as exc:
        assert str(exc).startswith(f"{p}:"), str(exc)
        assert kind != "tra" or _reference_tra(bad) is None, str(exc)
        return
    assert isinstance(chain, ctmc.CTMC)
    if bad == good[kind]:
        assert (chain.Q != _chain().Q).nnz == 0
    if kind == "tra":
        ref = _reference_tra(bad)
        assert ref is not None, bad
        n, rates = ref
        R = chain.Q.tocoo()
        got = {(int(i), int(j)): x for i, j, x in zip(R.row, R.col, R.data) if i != j}
        assert chain.n_states == n and got.keys() == rates.keys()
        assert all(abs(got[k] - float(rates[k])) <= 2e-16 * got[k] for k in got), (got, rates)


def test_a_truncated_srew_is_refused(tmp_path):
    # the header 'n nnz' announces 3 rewards, the file lists one: the others were silently 0
    tra = _write(tmp_path, "t.tra", "3 4\n0 1 1.0\n1 2 2.0\n2 0 4.0\n1 0 1.0\n")
    srew = _write(tmp_path, "t.srew", "3 3\n0 1.5\n")
    with pytest.raises(ValueError, match=r"t\.srew.*announces 3 rewards, the file has 1"):
        cio.read_prism(tra, srew={"r": srew})


@pytest.mark.parametrize("top, ok", [(2, True), (2 ** 64 - 1, False)])
def test_unsigned_state_values_are_read_as_signed_integers_or_refused(tmp_path, top, ok):
    # a uint64 state column was taken as it is: n - 1 at n = 0 then "overflowed" to 2**64 - 1, and values
    # beyond 2**63 - 1 were accepted against the documented 64-bit range
    import ctmc
    m = ctmc.Model("u")
    n = m.var("n", 0, 2)
    m.event("up", guard=n < 2, rate=1.0, update={n: n + 1})
    m.event("down", guard=n > 0, rate=2.0, update={n: n - 1})
    p = tmp_path / "u.npz"
    cio.save_npz(m.build(initial={"n": 0}), p)
    members = dict(np.load(p, allow_pickle=False))
    members["state_0"] = np.array([0, 1, top], dtype=np.uint64)
    np.savez(p, **members)
    if ok:
        chain = cio.load_npz(p)
        assert np.asarray(chain.states["n"]).dtype.kind == "i"
        assert (np.asarray(chain.states["n"]) - 1).tolist() == [-1, 0, 1]
    else:
        with pytest.raises(ValueError, match="u.npz.*state_0.*beyond the 64-bit"):
            cio.load_npz(p)
