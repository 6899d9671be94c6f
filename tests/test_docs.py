"""The Sphinx documentation builds without a single warning.

``-W --keep-going`` turns every warning (a malformed docstring, a broken
toctree, an unknown directive) into a failure and reports all of them at once.
"""
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_docs_build_without_warnings(tmp_path):
    out = tmp_path / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(DOCS), str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, (
        f"sphinx-build failed (exit {proc.returncode}):\n{proc.stderr}\n{proc.stdout[-2000:]}")
    api = (out / "api.html").read_text(encoding="utf-8")
    for name in ("hitting_times", "StationaryResult", "TAIL_INACCURATE"):
        assert name in api, f"{name} missing from the API reference"
    assert "balance_error" in (out / "guide.html").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------
# Doctests of every module of ctmc and of ctmc.models, imported under their
# installed names. pytest's --doctest-modules would collect models/*.py as a
# top-level package "models" (a second module object for each file), so the
# examples run here instead, one test per module.

import doctest  # noqa: E402
import importlib  # noqa: E402
import os  # noqa: E402
import pkgutil  # noqa: E402

import pytest  # noqa: E402

#: docstrings with examples that pytest --doctest-modules collected from ctmc/
#: and models/ before they moved here; the count must not go down unnoticed.
DOCTESTS_BEFORE = 39
_OPTIONAL = ("petsc4py", "slepc4py", "mpi4py")


def _walk(name, paths):
    """``name`` and the dotted names of all its submodules, found without importing them."""
    yield name
    for info in pkgutil.iter_modules(paths):
        full = f"{name}.{info.name}"
        if info.ispkg:
            yield from _walk(full, [os.path.join(info.module_finder.path, info.name)])
        else:
            yield full


def _module_names():
    import ctmc
    import ctmc.models
    # editable installs keep models/ outside ctmc/: walk both; a plain install has it inside
    names = set(_walk("ctmc", list(ctmc.__path__))) | set(_walk("ctmc.models", list(ctmc.models.__path__)))
    return sorted(names)


MODULES = _module_names()


def _import(name):
    """The module, or a skip when it needs an optional package that is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing in _OPTIONAL:
            pytest.skip(f"{name} needs {missing}, which is not importable ({exc})")
        raise


def _doctests(module):
    return [t for t in doctest.DocTestFinder().find(module, module.__name__) if t.examples]


def test_the_walk_finds_core_and_families():
    assert "ctmc.cli" in MODULES and "ctmc.models" in MODULES
    assert any(m.startswith("ctmc.models.jsq") for m in MODULES)
    assert not any(m == "models" or m.startswith("models.") for m in MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = _import(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    report = []
    before = set(sys.modules)
    for test in _doctests(module):
        runner.run(test, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} failing doctest example(s) in {name}:\n" + "".join(report)
    # `from models.x import ...` works only where the checkout is on sys.path, and
    # there it loads a second copy of ctmc.models: examples must use ctmc.models.
    stray = sorted(m for m in set(sys.modules) - before if m == "models" or m.startswith("models."))
    for m in stray:
        del sys.modules[m]
    assert not stray, f"the doctests of {name} import the top-level package {stray} (use ctmc.models)"


def test_doctest_count_did_not_go_down():
    found = {}
    for name in MODULES:
        try:
            found[name] = len(_doctests(importlib.import_module(name)))
        except ImportError as exc:
            if (exc.name or "").split(".")[0] not in _OPTIONAL:
                raise
    assert sum(found.values()) >= DOCTESTS_BEFORE, (
        f"{sum(found.values())} docstrings with examples, {DOCTESTS_BEFORE} before: {found}")


# ---------------------------------------------------------------------------
# The pages themselves: every ``>>>`` example of every page under docs/ runs
# (one namespace per page, in order), so a page that shows an answer is
# checked against it. Pages without examples are listed as such.

PAGES = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.rst") if "literature" not in p.parts)
#: pages that must carry runnable examples (the cookbook and the how-to pages)
RUNNABLE = ("cookbook",)


@pytest.mark.parametrize("page", PAGES)
def test_doc_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)            # pages that write files write them here
    path = DOCS / page
    parser = doctest.DocTestParser()
    test = parser.get_doctest(path.read_text(encoding="utf-8"), {"__name__": "__docs__"}, page, str(path), 0)
    if any(page.startswith(r) for r in RUNNABLE) and not page.endswith("index.rst"):
        assert test.examples, f"{page}: a cookbook page must show runnable >>> examples"
    if not test.examples:
        pytest.skip(f"{page} has no >>> examples")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(report)
