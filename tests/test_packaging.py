"""The installed layout: ctmc with its model families as ctmc.models, no top-level ``models``.

Run in a fresh interpreter whose working directory is a temporary folder, so
that the checkout is not on ``sys.path`` and only the installation (editable
or not) is seen.
"""
import os
import subprocess
import sys
import textwrap

import ctmc


def _run(code, cwd):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # the installation only
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_families_install_as_ctmc_models_and_models_is_not_a_package(tmp_path):
    proc = _run("""
        import sys
        sys.path[:] = [p for p in sys.path if p not in ("", ".")]
        try:
            import models
        except ImportError:
            pass
        else:
            raise SystemExit(f"a top-level package 'models' is importable: {models.__file__}")
        import ctmc.models.jsq
        from ctmc.models.jsq import JSQ2
        import ctmc.models.hysteresis, ctmc.models.supermarket
        print(ctmc.models.jsq.__name__, JSQ2.__module__)
        """, tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert proc.stdout.split()[0] == "ctmc.models.jsq"


def test_version_has_one_source(tmp_path):
    from importlib.metadata import version
    assert version("ctmc-exact") == ctmc.__version__
    proc = _run("import sys, ctmc.cli; sys.exit(ctmc.cli.main(['--version']))", tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == f"ctmc {ctmc.__version__}", proc.stderr


def test_families_are_registered_as_entry_points():
    from importlib.metadata import entry_points
    eps = {ep.name: ep.value for ep in entry_points(group="ctmc.families")}
    assert eps == {"jsq": "ctmc.models.jsq.cli", "hysteresis": "ctmc.models.hysteresis.cli",
                   "supermarket": "ctmc.models.supermarket.cli"}
