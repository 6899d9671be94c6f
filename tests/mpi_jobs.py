"""Running a test's job on two MPI ranks: the one launcher every ``mpirun`` test uses.

A job is a script run as ``mpirun -n N python SCRIPT ARGS...`` with the
repository and ``tests/`` on the path; it writes its numbers to a JSON file
that the test then reads. Under root, Open MPI needs the two ``ALLOW_RUN_AS_ROOT``
variables; oversubscription lets two ranks run on a one-core machine.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def mpi_ready() -> bool:
    """petsc4py importable and ``mpirun`` on the path."""
    try:
        from ctmc.backends.petsc_backend import available
    except ImportError:
        return False
    return available() and shutil.which("mpirun") is not None


#: skip a test (or, as ``pytestmark``, a module) without PETSc or mpirun
needs_mpi = pytest.mark.skipif(not mpi_ready(), reason="petsc4py or mpirun not installed (scripts/bootstrap.sh)")


def mpirun_env() -> dict:
    """The environment of a job: run as root allowed, oversubscription, the repository and tests/ importable."""
    return dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                OMPI_MCA_rmaps_base_oversubscribe="1",
                PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE), os.environ.get("PYTHONPATH", "")]))


def run_job(script, out, *args, ranks: int = 2, timeout: float = 300) -> dict:
    """Run ``script ARGS... OUT`` on ``ranks`` processes and return the JSON it wrote to ``out``.

    Fails the test (with the job's last output) when the job exits non-zero,
    writes nothing, or hangs past ``timeout`` (a collective one rank left unmatched);
    checks that the job saw ``ranks`` processes when it reports a ``size``.
    """
    cmd = [shutil.which("mpirun"), "-n", str(ranks), sys.executable, str(Path(script).resolve()),
           *map(str, args), str(out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=mpirun_env(), timeout=timeout, cwd=str(ROOT))
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mpirun job timed out after {timeout} s (unmatched collectives?):\n{exc.stdout}\n{exc.stderr}")
    out = Path(out)
    assert proc.returncode == 0 and out.exists(), f"mpirun job failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    data = json.loads(out.read_text())
    if isinstance(data, dict) and "size" in data:
        assert data["size"] == ranks, data["size"]
    return data
