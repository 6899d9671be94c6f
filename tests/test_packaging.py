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


def _run(code, cwd, *args):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}   # the installation only
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=cwd, env=env,
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


# ---------------------------------------------------------------------------
# `pip install ctmc-exact` without extras: a working core. sympy (the meanfield
# extra), pandas (frame) and matplotlib (plot) are never imported by `import ctmc`,
# and with them made unimportable the core still builds and solves, the command
# line starts, and PopulationModel says which extra to install.

OPTIONAL_EXTRAS = ("sympy", "pandas", "matplotlib")

#: run first in the child: the packages named on its command line behave as if not installed
_BLOCK = textwrap.dedent("""
    import importlib.abc, sys
    class _NotInstalled(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in sys.argv[1:]:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None
    sys.meta_path.insert(0, _NotInstalled())
    """)


def test_import_ctmc_imports_no_optional_package(tmp_path):
    proc = _run("""
        import sys
        import ctmc, ctmc.cli, ctmc.meanfield, ctmc.report, ctmc.tables
        import ctmc.models.jsq, ctmc.models.hysteresis, ctmc.models.supermarket, ctmc.models.gallery
        print(" ".join(sorted({m.split(".")[0] for m in sys.modules} & set(sys.argv[1:]))) or "-")
        """, tmp_path, *OPTIONAL_EXTRAS)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["-"], f"imported at `import ctmc`: {proc.stdout.strip()}"


def test_core_works_without_sympy_pandas_and_matplotlib(tmp_path):
    proc = _run(_BLOCK + textwrap.dedent("""
        import contextlib, io
        from fractions import Fraction
        for name in sys.argv[1:]:                     # the blocker works: as if not installed
            try:
                __import__(name)
            except ModuleNotFoundError:
                pass
            else:
                raise SystemExit(f"{name} is still importable")

        import ctmc, ctmc.cli, ctmc.meanfield
        import ctmc.models.supermarket, ctmc.models.jsq

        # an M/M/1/K queue: pi_n = rho^n (1 - rho) / (1 - rho^(K+1)), checked against exact fractions
        K, lam, mu = 6, 1.0, 2.0
        m = ctmc.Model("mm1k")
        n = m.var("n", 0, K)
        m.event("arrival", guard=n < K, rate=lam, update={n: n + 1})
        m.event("departure", guard=n > 0, rate=mu, update={n: n - 1})
        chain = m.build(initial={"n": 0})
        pi = chain.stationary().pi
        rho = Fraction(1, 2)
        law = [rho ** k * (1 - rho) / (1 - rho ** (K + 1)) for k in range(K + 1)]
        err = max(abs(pi[chain.index(n=k)] - float(p)) / float(p) for k, p in enumerate(law))
        assert err < 1e-12, err
        # a model family's exact chain: with d = 1 choice each queue is an M/M/1/B queue
        sm = ctmc.models.supermarket.Supermarket(2, 1, 0.5, capacity=3)
        loss = rho ** 3 * (1 - rho) / (1 - rho ** 4)
        assert abs(sm.loss_probability() - float(loss)) < 1e-12 * float(loss), sm.loss_probability()

        # the command line starts and lists its commands
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            try:
                ctmc.cli.main(["--help"])
            except SystemExit as exc:
                assert exc.code == 0, exc.code
        assert "supermarket" in out.getvalue() and "solve" in out.getvalue(), out.getvalue()

        # a command that needs the mean field ends with the message, one line, exit status 1
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = ctmc.cli.main(["supermarket", "--n", "2", "--capacity", "3"])
        assert status == 1 and "ctmc-exact[meanfield]" in err.getvalue(), (status, err.getvalue())
        assert "Traceback" not in err.getvalue(), err.getvalue()

        # the mean field names the extra that brings sympy, before any work
        try:
            ctmc.meanfield.PopulationModel("sis", ["S", "I"])
        except ImportError as exc:
            print("ERROR:", exc)
        """), tmp_path, *OPTIONAL_EXTRAS)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    err = proc.stdout.split("ERROR:", 1)
    assert len(err) == 2, f"PopulationModel did not fail without sympy: {proc.stdout}"
    assert "sympy" in err[1] and "pip install 'ctmc-exact[meanfield]'" in err[1], err[1]
