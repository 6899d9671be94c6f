"""What tests/test_io.py and tests/test_measures.py share: the tandem chain and Storm.

``model_chain`` builds the three-variable tandem model both files check;
``storm(job)`` runs Storm (through stormpy, in its own interpreter:
``CTMC_STORMPY_PYTHON``, else the repo's ``.venv-storm/bin/python``, which
``scripts/storm_venv.sh`` makes) and skips the test, with the reason, when no
interpreter with stormpy is found. Not collected by pytest (no ``test_``
prefix); ``tests/conftest.py`` puts ``tests/`` on ``sys.path``.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess
from pathlib import Path

import pytest

import ctmc

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------
# chains

def tandem_model():
    """Two queues in tandem, the second served in two phases: three variables."""
    m = ctmc.Model("tandem3")
    n1, n2, ph = m.var("n1", 0, 3), m.var("n2", 0, 2), m.var("ph", 0, 1)
    m.event("arrive", guard=n1 < 3, rate=0.7, update={n1: n1 + 1})
    m.event("move", guard=(n1 > 0) & (n2 < 2), rate=1.0 / 3.0, update={n1: n1 - 1, n2: n2 + 1})
    m.event("phase", guard=(n2 > 0) & (ph == 0), rate=2.5, update={ph: 1})
    m.event("leave", guard=(n2 > 0) & (ph == 1), rate=1.1, update={n2: n2 - 1, ph: 0})
    m.label("full", n1 == 3)
    m.label("idle", (n1 == 0) & (n2 == 0))
    m.reward("load", n1 + n2)
    m.reward("cost", 0.1 * n1 + n2 / 7.0)
    return m


def model_chain():
    return tandem_model().build(initial={"n1": 0, "n2": 0, "ph": 0})


# ---------------------------------------------------------------------------
# Storm (skipped without stormpy)

STORM_SCRIPT = r'''
import json, sys
import stormpy
import stormpy.environments as envs
import stormpy.io
job = json.loads(sys.argv[1])
env = envs.Environment()
env.solver().set_linear_equation_solver_type(envs.EquationSolverType.ELIMINATION)  # direct: exact to round-off
prog = None
if job["kind"] == "drn":
    model = stormpy.build_model_from_drn(job["path"])
elif job["kind"] == "explicit":
    model = stormpy.build_model_from_explicit(job["tra"], job["lab"], state_rewards=job.get("srew"))
else:
    prog = stormpy.parse_prism_program(job["path"], prism_compatibility=True)
    if job.get("constants"):
        prog, _ = stormpy.io.instantiate_constants(prog, job["constants"])
    model = stormpy.build_model(prog, options=stormpy.BuilderOptions(build_full=True))
    stormpy.io.export_to_drn(model, job["export"])
values = []
for p in job["properties"]:
    prop = stormpy.parse_properties(p, prog)[0] if prog is not None else stormpy.parse_properties(p)[0]
    res = stormpy.model_checking(model, prop, environment=env)
    values.append(float(res.get_value(model.initial_states[0])))
print("@@" + json.dumps({"states": model.nr_states, "transitions": model.nr_transitions,
                         "type": str(model.model_type), "values": values}), flush=True)
'''


@functools.lru_cache(maxsize=1)
def _storm_python():
    """(interpreter, None) or (None, reason to skip)."""
    env = os.environ.get("CTMC_STORMPY_PYTHON")
    py = Path(env) if env else ROOT / ".venv-storm" / "bin" / "python"
    if not py.exists():
        return None, (f"no stormpy interpreter: CTMC_STORMPY_PYTHON={env!r} does not exist" if env else
                      f"no stormpy interpreter: set CTMC_STORMPY_PYTHON or run scripts/storm_venv.sh ({py} absent)")
    proc = subprocess.run([str(py), "-c", "import stormpy, stormpy.io"], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return None, f"{py} cannot import stormpy: {proc.stderr.strip().splitlines()[-1:]}"
    return str(py), None


def storm(job):
    py, reason = _storm_python()
    if py is None:
        pytest.skip(reason)
    proc = subprocess.run([py, "-c", STORM_SCRIPT, json.dumps(job)], capture_output=True, text=True, timeout=300)
    out = [s for s in proc.stdout.splitlines() if s.startswith("@@")]
    assert proc.returncode == 0 and out, f"stormpy failed:\n{proc.stderr[-3000:]}\n{proc.stdout[-2000:]}"
    return json.loads(out[-1][2:])
