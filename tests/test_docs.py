"""The Sphinx documentation builds without a single warning, and its pages work offline.

``-W --keep-going`` turns every warning (a malformed docstring, a broken
toctree, an unknown directive) into a failure and reports all of them at once.
The HTML is built once per run (:func:`html`); the checks on it follow.
"""
import ast
import doctest
import html as htmllib
import pydoc
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    """The docs built into a temporary folder: ``(completed sphinx process, output folder)``."""
    tmp = tmp_path_factory.mktemp("docs")
    out = tmp / "html"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-b", "html",
         "-d", str(tmp / "doctrees"), str(DOCS), str(out)],
        capture_output=True, text=True, timeout=300,
    )
    return proc, out


@pytest.fixture
def built(html):
    proc, out = html
    if proc.returncode != 0:
        pytest.fail(f"sphinx-build failed (exit {proc.returncode}):\n{proc.stderr}\n{proc.stdout[-2000:]}")
    return out


def test_docs_build_without_warnings(built):
    assert "balance_error" in (built / "guide.html").read_text(encoding="utf-8")


# ---------------------------------------------------------------------------
# The API reference: docs/api.rst is an index whose toctrees list one page per
# module (or small group of modules), docs/api/<module>.rst.

def _api_pages(out):
    return {p.stem: p.read_text(encoding="utf-8") for p in (out / "api").glob("*.html")}


def test_api_reference_is_one_page_per_module(built):
    sources = sorted(p.stem for p in (DOCS / "api").glob("*.rst"))
    pages = _api_pages(built)
    assert len(sources) > 20, f"docs/api/ holds {len(sources)} pages: the reference is not split per module"
    assert sorted(pages) == sources
    index = (built / "api.html").read_text(encoding="utf-8")
    linked = set(re.findall(r'href="api/([^"#]+)\.html"', index))
    assert linked == set(sources), f"pages not linked from api.html: {sorted(set(sources) - linked)}"
    # split, not copied: no page carries more than a quarter of the reference
    sizes = {name: len(text) for name, text in pages.items()}
    biggest = max(sizes, key=sizes.get)
    assert sizes[biggest] < sum(sizes.values()) / 4, f"api/{biggest}.html holds {sizes[biggest]} of " \
                                                     f"{sum(sizes.values())} characters"


@pytest.mark.parametrize("obj", [
    "ctmc.analyses.Analyses.hitting_times", "ctmc.passage.hitting_times",
    "ctmc.results.StationaryResult", "ctmc.results.Status.TAIL_INACCURATE",
    "ctmc.meanfield.PopulationModel", "ctmc.models.jsq.JSQ2",
])
def test_api_documents_each_object_once(built, obj):
    assert pydoc.locate(obj) is not None, f"{obj} does not exist"     # no typo in the list above
    anchor = f'id="{obj}"'
    holders = [name for name, text in _api_pages(built).items() if anchor in text]
    assert len(holders) == 1, f"{obj} is documented on the API pages {holders}"


# ---------------------------------------------------------------------------
# Offline: every script and stylesheet a page loads is a file of the build.

_RESOURCE = re.compile(r'<(?:script|img)\b[^>]*\bsrc="([^"]+)"'
                       r'|<link\b[^>]*\brel="stylesheet"[^>]*\bhref="([^"]+)"')


def _resources(page_html):
    """The URLs of the scripts, images and stylesheets that a page loads (not the links it shows)."""
    return [a or b for a, b in _RESOURCE.findall(page_html)]


def test_pages_load_nothing_from_the_network(built):
    pages = sorted(built.rglob("*.html"))
    assert len(pages) > 40
    for page in pages:
        for url in _resources(page.read_text(encoding="utf-8")):
            assert not re.match(r"(?:[a-z]+:)?//", url), f"{page.relative_to(built)} loads {url}"
            assert (page.parent / url.split("?")[0].split("#")[0]).is_file(), \
                f"{page.relative_to(built)} loads {url}, which is not in the build"


def test_math_is_rendered_by_a_local_mathjax(built):
    page = built / "meanfield.html"
    text = page.read_text(encoding="utf-8")
    assert 'class="math' in text                      # the page has formulas ...
    scripts = [u for u in _resources(text) if "mathjax" in u.lower()]
    assert scripts, "a page with formulas loads no MathJax"
    for url in scripts:                               # ... and MathJax is a file next to it
        path = page.parent / url.split("?")[0]
        assert path.is_file() and "MathJax" in path.read_text(encoding="utf-8", errors="replace")[:20000]
    # MathJax's CHTML output loads its fonts relative to the script: they must be there too
    fonts = list((built / "_static" / "mathjax" / "output" / "chtml" / "fonts").rglob("*.woff"))
    assert len(fonts) > 10


# ---------------------------------------------------------------------------
# The copy button copies what one types: the prompted lines of a ``>>>`` block,
# without prompts and output, which are exactly doctest's example sources.

def _copy_text(text, prompt, only_prompt_lines=True, copy_empty=True):
    """sphinx-copybutton's ``formatCopyText`` (copybutton_funcs.js) for a regexp prompt, in Python."""
    regexp = re.compile("^(" + prompt + ")(.*)")
    lines, found = [], False
    for line in text.split("\n"):
        m = regexp.match(line)
        if m:
            found = True
            lines.append(m.group(2))
        elif not only_prompt_lines or (copy_empty and line.strip() == ""):
            lines.append(line)
    return "\n".join(lines) if found else text


def _lines(text):
    return [line for line in text.split("\n") if line.strip()]


def test_copy_button_strips_prompts_and_output(built):
    js = (built / "_static" / "copybutton.js").read_text(encoding="utf-8")
    call = re.search(r"formatCopyText\(text, ('(?:[^'\\]|\\.)*'), (true|false), (true|false)", js)
    assert call, "the copy button's prompt configuration is missing from copybutton.js"
    prompt = ast.literal_eval(call.group(1))
    assert call.group(2) == "true" and call.group(3) == "true"     # a regexp; prompt lines only
    checked = 0
    for rst in sorted(DOCS.rglob("*.rst")):
        name = str(rst.relative_to(DOCS).with_suffix(".html"))
        if "literature" in rst.parts or not (built / name).is_file():
            continue
        source = rst.read_text(encoding="utf-8")
        examples = doctest.DocTestParser().get_examples(source)
        if not examples or ".. auto" in source:     # docstrings pulled in would add their own examples
            continue
        page = (built / name).read_text(encoding="utf-8")
        assert "copybutton.js" in page, f"{name} has no copy button"
        blocks = [htmllib.unescape(re.sub(r"<[^>]+>", "", b))
                  for b in re.findall(r"<pre>(.*?)</pre>", page, flags=re.S)]
        copied = "\n".join(_copy_text(b, prompt) for b in blocks if ">>>" in b)
        # Sphinx hides doctest flags (trim_doctest_flags), so they are not copied either
        typed = re.sub(r"[ \t]*#\s*doctest:[^\n]*", "", "".join(e.source for e in examples))
        assert _lines(copied) == _lines(typed), name
        checked += 1
    assert checked >= 5, f"only {checked} pages with >>> examples were checked"


# ---------------------------------------------------------------------------
# Doctests of every module of ctmc and of ctmc.models, imported under their
# installed names. pytest's --doctest-modules would collect models/*.py as a
# top-level package "models" (a second module object for each file), so the
# examples run here instead, one test per module.

import importlib  # noqa: E402
import os  # noqa: E402
import pkgutil  # noqa: E402


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
