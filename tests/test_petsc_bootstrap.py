"""``scripts/bootstrap.sh`` (the documented PETSc install route) on a simulated machine.

The script's apt-get branch runs against stub commands on a private ``PATH``:
``id`` says "not root", ``dpkg-query`` says nothing is installed, and
``apt-get``/``sudo`` only record how they were called (``sudo`` drops
``DEBIAN_FRONTEND`` as the real one's env_reset does). ``apt-get install`` then
fails, so the script stops before it touches a virtual environment; it runs
from a copy in a temporary directory all the same, so that a misbehaving
version cannot create ``.venv`` in the repository.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "bootstrap.sh"
PACKAGES = ("python3-petsc4py-real", "python3-slepc4py-real", "openmpi-bin")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or not Path("/usr/bin/env").exists(),
                                reason="needs bash and /usr/bin/env")


def _stub(bin_dir, name, body):
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


def _run(tmp_path, args, with_sudo):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    for tool in ("dirname", "basename", "grep", "sed", "env", "pwd", "cat"):
        real = shutil.which(tool)
        if real:
            (bin_dir / tool).symlink_to(real)
    _stub(bin_dir, "id", 'echo 1000')
    _stub(bin_dir, "dpkg-query", 'exit 1')
    _stub(bin_dir, "apt-get", f'echo "DEBIAN_FRONTEND=$DEBIAN_FRONTEND apt-get $*" >> "{log}"\n'
                              'case "$1" in install) exit 1;; esac\nexit 0')
    if with_sudo:
        _stub(bin_dir, "sudo", f'echo "sudo $*" >> "{log}"\nexec /usr/bin/env -u DEBIAN_FRONTEND "$@"')
    (tmp_path / "repo" / "scripts").mkdir(parents=True)
    script = tmp_path / "repo" / "scripts" / "bootstrap.sh"
    shutil.copy(SCRIPT, script)
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path), "PIP_NO_INDEX": "1"}
    proc = subprocess.run([shutil.which("bash"), str(script), *args], check=False, capture_output=True,
                          text=True, env=env, timeout=120)
    return proc, (log.read_text().splitlines() if log.exists() else [])


def test_apt_get_through_sudo_is_noninteractive(tmp_path):
    proc, calls = _run(tmp_path, ["--petsc"], with_sudo=True)
    installs = [c for c in calls if "apt-get install" in c and not c.startswith("sudo")]
    assert installs, (calls, proc.stderr)
    assert installs[0].startswith("DEBIAN_FRONTEND=noninteractive apt-get install -y")
    assert all(p in installs[0] for p in PACKAGES)
    assert proc.returncode != 0  # the stubbed install failed, and the script stopped there


def test_non_root_without_sudo_says_what_to_install(tmp_path):
    proc, calls = _run(tmp_path, ["--petsc"], with_sudo=False)
    assert proc.returncode == 1 and calls == []
    assert "not root" in proc.stderr and "as root" in proc.stderr
    assert all(p in proc.stderr for p in PACKAGES)
    assert "command not found" not in proc.stderr


@pytest.mark.parametrize("args", [["--petc"], ["--petsc", "extra"], ["-x"]])
def test_unknown_arguments_are_rejected(tmp_path, args):
    proc, calls = _run(tmp_path, args, with_sudo=True)
    assert proc.returncode == 2 and calls == []
    assert f"unknown argument '{next(a for a in args if a != '--petsc')}'" in proc.stderr


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    command = "bash scripts/bootstrap.sh --test && .venv/bin/python -m pytest"
    assert command in (ROOT / "README.md").read_text()
    steps = [line for line in ci.splitlines() if line and not line.startswith(("#", "set ", "cd "))]
    assert steps == [command]
