"""PRISM CTMC case studies outside the gallery: PRISM's own files, Storm, and a dense reference.

Optional part: PRISM's ``prism-examples`` files (GPL-2.0, not copied here) are read when
``CTMC_PRISM_EXAMPLES`` names a checkout's ``prism-examples/ctmcs`` folder (the molecules are in
its sibling ``simple/molecules``); Storm's answers when ``CTMC_STORM_PYTHON`` (or ``.venv-storm``,
``scripts/storm_venv.sh``) is a python with stormpy, run through ``models/gallery/storm_worker.py``.
Every published property of each case study's ``.csl`` file is checked against a dense reference
computed here from the chain's state variables (``scipy.linalg.expm``, a dense null-space solve),
independent of ctmc's property evaluator, to 1e-9 relative.

Default part: ``tests/data/prism/cell.sm``, the wireless cell written for ctmc from the case
study's published facts, against the closed-form birth-death law in exact fractions.
"""
from __future__ import annotations

import json
import os
import subprocess
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg

import ctmc.prism

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data" / "prism"
EXAMPLES = os.environ.get("CTMC_PRISM_EXAMPLES", "")
_VENV_STORM = ROOT / ".venv-storm" / "bin" / "python"
STORM = os.environ.get("CTMC_STORM_PYTHON") or (str(_VENV_STORM) if _VENV_STORM.exists() else "")
REL = 1e-9


# ------------------------------------------------------------------ dense references (numpy only)
def _q(chain):
    return chain.Q.toarray()


def _p0(chain):
    p = np.zeros(chain.n_states)
    p[np.asarray(chain.initial)] = 1.0 / len(chain.initial)
    return p


def _var(chain, name):
    return np.asarray(chain.states[name]).astype(float)


def _stationary(chain):
    """pi Q = 0, sum pi = 1, by a dense least-squares solve of the stacked system."""
    Q = _q(chain)
    A = np.vstack([Q.T, np.ones(len(Q))])
    b = np.zeros(len(Q) + 1)
    b[-1] = 1.0
    return np.linalg.lstsq(A, b, rcond=None)[0]


def at_time(t, f):
    """E[f(X_t)] from the initial law."""
    return lambda c: _p0(c) @ scipy.linalg.expm(_q(c) * t) @ f(c)


def long_run(f):
    return lambda c: _stationary(c) @ f(c)


def reach_within(t, target, op, states):
    """``op`` over ``states`` of P_i(F<=t target): expm with the target absorbing."""
    def ref(c):
        Q, psi = _q(c), target(c)
        Q[psi] = 0.0
        v = scipy.linalg.expm(Q * t)[:, psi].sum(axis=1)
        return op(v[states(c)])
    return ref


# ------------------------------------------------------------------ the case studies
#: (file under prism-examples, its .csl, model constants, property constants, one reference per
#: property of the .csl in order). Constants: those of the files' ``auto`` scripts.
N_CELL, T_CELL, T_MOL, I_MOL = 50, 0.5, 0.004, 4
guarded = int(np.ceil(N_CELL * 0.8))        # n < N*0.8 <=> n < 40
CASES = {
    "cell": ("ctmcs/cell/cell.sm", "ctmcs/cell/cell.csl", {"N": N_CELL}, {"T": T_CELL}, [
        reach_within(T_CELL, lambda c: _var(c, "n") == N_CELL, np.max, lambda c: _var(c, "n") < N_CELL),
        reach_within(T_CELL, lambda c: _var(c, "n") >= guarded, np.max, lambda c: _var(c, "n") < guarded),
        reach_within(T_CELL, lambda c: _var(c, "n") < guarded, np.min, lambda c: _var(c, "n") == N_CELL),
        at_time(T_CELL, lambda c: _var(c, "n")),
        long_run(lambda c: (_var(c, "n") < guarded).astype(float)),
        long_run(lambda c: _var(c, "n"))]),
    "nacl": ("simple/molecules/nacl.sm", "simple/molecules/nacl.csl", {"N1": 10, "N2": 10},
             {"T": T_MOL, "i": I_MOL}, [
                 at_time(T_MOL, lambda c: (_var(c, "na") == I_MOL).astype(float)),
                 at_time(T_MOL, lambda c: 10 * _var(c, "na")),
                 long_run(lambda c: 10 * _var(c, "na"))]),
    "knacl": ("simple/molecules/knacl.sm", "simple/molecules/knacl.csl", {"N1": 10, "N2": 10, "N3": 10},
              {"T": T_MOL, "i": I_MOL}, [
                  at_time(T_MOL, lambda c: (_var(c, "na") == I_MOL).astype(float)),
                  at_time(T_MOL, lambda c: (_var(c, "k") == I_MOL).astype(float)),
                  at_time(T_MOL, lambda c: 10 * _var(c, "na")),
                  at_time(T_MOL, lambda c: 10 * _var(c, "k")),
                  long_run(lambda c: 10 * _var(c, "na")),
                  long_run(lambda c: 10 * _var(c, "k"))]),
    "mc": ("simple/molecules/mc.sm", "simple/molecules/mc.csl", {"N1": 10, "N2": 10},
           {"T": T_MOL, "i": I_MOL}, [
               at_time(T_MOL, lambda c: (_var(c, "mg") == I_MOL).astype(float)),
               at_time(T_MOL, lambda c: (_var(c, "mg_p") == I_MOL).astype(float)),
               at_time(T_MOL, lambda c: (10 - _var(c, "mg") - _var(c, "mg_p") == I_MOL).astype(float)),
               at_time(T_MOL, lambda c: 10 * _var(c, "mg")),
               at_time(T_MOL, lambda c: 10 * _var(c, "mg_p")),
               at_time(T_MOL, lambda c: 10 * (10 - _var(c, "mg") - _var(c, "mg_p"))),
               long_run(lambda c: 10 * _var(c, "mg")),
               long_run(lambda c: 10 * _var(c, "mg_p")),
               long_run(lambda c: 10 * (10 - _var(c, "mg") - _var(c, "mg_p")))]),
}
PROPS = [(name, k) for name, case in CASES.items() for k in range(len(case[4]))]

#: stormpy 2.0's long-run answers off the dense reference by this much (measured with this file, default
#: environment and gmm++ alike; ctmc's answers are within 5e-15 of the same reference): held to the
#: measured error, rounded up; every other answer of Storm is held to REL like ctmc's
STORM_REL = {("knacl", 4): 5e-3,         # Storm 34.7492885077, reference 34.8849181986 (3.9e-3)
             ("knacl", 5): 3e-3,         # Storm 79.7533271673, reference 79.5814945514 (2.2e-3)
             ("mc", 6): 4e-5,            # Storm 61.2247953896, reference 61.2265716320 (2.9e-5)
             ("mc", 7): 2e-7,            # Storm 4.78153749646, reference 4.78153676198 (1.5e-7)
             ("mc", 8): 1e-5}            # Storm 33.9915942225, reference 33.9918916060 (8.7e-6)
#: stormpy 2.0 answers reference - max: S=? [ n<N*0.8 ] of cell N=50 -0.61661612597 (reference
#: 0.38338387403), R=? [ S ] of nacl -77.377002024 (reference 22.6229177639)
STORM_WRONG = {("cell", 4), ("nacl", 2)}
STORM_PROPS = [pytest.param(n, k, id=f"{n}-{k + 1}", marks=pytest.mark.xfail(
    strict=True, reason="stormpy 2.0's long-run answer is the reference minus the maximum"))
    if (n, k) in STORM_WRONG else pytest.param(n, k, id=f"{n}-{k + 1}") for n, k in PROPS]

needs_examples = pytest.mark.skipif(not EXAMPLES,
                                    reason="CTMC_PRISM_EXAMPLES (prism-examples/ctmcs) is not set")
needs_storm = pytest.mark.skipif(not STORM, reason="no stormpy python (CTMC_STORM_PYTHON or .venv-storm)")


def storm(program, prop, constants, solver="default"):
    """Storm's build (and answer at the initial state) through models/gallery/storm_worker.py."""
    cmd = [STORM, str(ROOT / "models" / "gallery" / "storm_worker.py"), str(program), "--property", prop,
           "--constants", json.dumps(constants), "--solver", solver]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("@@")]
    assert p.returncode == 0 and lines, p.stderr[-2000:]
    return json.loads(lines[-1][2:])


def _case(name):
    file, csl, consts, pconsts, refs = CASES[name]
    base = Path(EXAMPLES).parent
    chain = ctmc.prism.load(base / file, constants=consts).build()
    return base / file, chain, ctmc.prism.check_file(chain, base / csl, constants=pconsts), refs


@needs_examples
@needs_storm
@pytest.mark.parametrize("name", list(CASES))
def test_prisms_case_study_builds_storms_state_and_transition_counts(name):
    path, chain, _, _ = _case(name)
    out = storm(path, "S=? [ true ]", CASES[name][2], solver="none")
    assert (chain.n_states, chain.n_transitions) == (out["states"], out["transitions"])


@needs_examples
@pytest.mark.parametrize("name, k", PROPS, ids=[f"{n}-{k + 1}" for n, k in PROPS])
def test_prisms_case_study_property_matches_a_dense_reference(name, k):
    _, chain, results, refs = _case(name)
    assert len(results) == len(refs)
    r = results[k]
    assert r.status.value == "success"
    ref = refs[k](chain)
    assert r.value == pytest.approx(ref, rel=REL)
    assert abs(r.value - ref) <= max(r.error_bound, 1e-15 * abs(ref)) + REL * abs(ref)


@needs_examples
@needs_storm
@pytest.mark.parametrize("name, k", STORM_PROPS)
def test_prisms_case_study_property_against_storm(name, k):
    path, chain, results, refs = _case(name)
    prop = results[k].property
    if results[k].method.startswith("filter("):
        pytest.skip("old-style filter: the worker reports Storm's value at the initial state only")
    pconsts = CASES[name][3]
    decl = "".join(f"const {'int' if isinstance(v, int) else 'double'} {c} = {v}; "
                   for c, v in pconsts.items())
    out = storm(path, decl + prop, CASES[name][2])
    ref = refs[k](chain)
    assert out["value"] == pytest.approx(ref, rel=STORM_REL.get((name, k), REL))


# ------------------------------------------------------------------ default suite: our own cell.sm
def _cell_law(N, lam_new, lam_handoff, mu, guard):
    """pi_n of the birth-death chain, exact: pi_{n+1} mu (n+1) = pi_n (lam_new [n < guard] + lam_handoff)."""
    w = [Fraction(1)]
    for n in range(N):
        up = (lam_new if n < guard else 0) + lam_handoff
        w.append(w[-1] * Fraction(up) / (mu * (n + 1)))
    total = sum(w)
    return [x / total for x in w]


@pytest.mark.parametrize("N", [10, 50, 500])       # N = 500: P(full) = 5.9e-295, to its relative accuracy
def test_our_cell_program_gives_the_closed_form_birth_death_law(N):
    chain = ctmc.prism.load(DATA / "cell.sm", constants={"N": N}).build()
    assert (chain.n_states, chain.n_transitions) == (N + 1, 2 * N)
    guard = -(-4 * N // 5)                      # n < 0.8 N
    pi = _cell_law(N, 49, 21, 1, guard)
    want_blocked = float(sum(pi[guard:]))
    want_mean = float(sum(n * p for n, p in enumerate(pi)))
    got = ctmc.prism.check_file(chain, DATA / "cell.csl")
    assert [g.value for g in got] == pytest.approx([want_blocked, float(pi[N]), want_mean], rel=1e-12, abs=0)


# ------------------------------------------------------------------ the syntax cell.csl needs
QUEUE = """ctmc
module q n : [0..3] init 0; [] n<3 -> 2 : (n'=n+1); [] n>0 -> 3 : (n'=n-1); endmodule"""


def test_time_bound_name_then_parenthesis_and_old_style_filters_follow_prism():
    chain = ctmc.prism.load(QUEUE).build()
    n = _var(chain, "n")
    full = reach_within(0.7, lambda c: n == 3, np.max, lambda c: n < 3)(chain)
    low = reach_within(0.7, lambda c: n == 3, np.min, lambda c: n < 3)(chain)
    consts = {"T": 0.7}
    got = ctmc.prism.check_file(chain, "const double T;\nP=? [ true U<=T (n=3) {n<3}{max} ]\n"
                                "P=? [ F<=T (n=3) {n<3}{min} ]\n", constants=consts)
    assert [g.value for g in got] == pytest.approx([full, low], rel=1e-12)
    one = ctmc.prism.check(chain, "P=? [ F<=0.7 n=3 {n=1} ]")         # no {min}/{max}: the one state
    assert one.value == pytest.approx(reach_within(0.7, lambda c: n == 3, np.max, lambda c: n == 1)(chain),
                                      rel=1e-12)
    with pytest.raises(ctmc.prism.PrismError, match=r"\{min\}\{max\} \(PRISM's range\) is not supported"):
        ctmc.prism.check(chain, "P=? [ F<=0.7 n=3 {n<3}{min}{max} ]")
    with pytest.raises(ctmc.prism.PrismError, match="unknown function 'T'"):
        ctmc.prism.load(QUEUE.replace("-> 2 :", "-> T(2) :"))


def _salt_law(sodium, chlorine):
    """pi over na (cl = na + chlorine - sodium), exact: pi_{n-1} 10 (Na+)(Cl-) = pi_n 100 na cl."""
    lo = max(0, sodium - chlorine)
    w = {sodium: Fraction(1)}
    for n in range(sodium, lo, -1):
        down = 100 * n * (n + chlorine - sodium)                    # ionisation out of na = n
        up = 10 * (sodium - n + 1) * (sodium - n + 1)                # recombination into na = n
        w[n - 1] = w[n] * down / up
    total = sum(w.values())
    return {n: x / total for n, x in w.items()}


@pytest.mark.parametrize("sodium, chlorine", [(6, 6), (3, 5), (5, 3)])
def test_our_salt_program_synchronises_mass_action_rates(sodium, chlorine):
    chain = ctmc.prism.load(DATA / "salt.sm", constants={"SODIUM": sodium, "CHLORINE": chlorine}).build()
    law = _salt_law(sodium, chlorine)
    assert chain.n_states == len(law) and chain.n_transitions == 2 * (len(law) - 1)
    na = _var(chain, "na")
    assert np.all(_var(chain, "cl") - na == chlorine - sodium)       # one ionisation takes one of each
    i = chain.index(na=sodium, cl=chlorine)
    assert chain.Q[i, chain.index(na=sodium - 1, cl=chlorine - 1)] == 100 * sodium * chlorine
    mean = float(sum(Fraction(100 * n, sodium) * p for n, p in law.items()))
    got = ctmc.prism.check_file(chain, DATA / "salt.csl")
    assert [g.value for g in got] == pytest.approx([mean, float(law.get(0, 0))], rel=1e-12, abs=0)
