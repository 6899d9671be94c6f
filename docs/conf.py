"""Sphinx configuration for the ctmc documentation.

The API reference is generated from the numpydoc docstrings of the installed
(or, failing that, the in-tree) ``ctmc`` package. The build needs no network
access, and neither do the pages it writes: there is no intersphinx mapping, the
theme ships with Sphinx, MathJax is copied into ``_static/mathjax`` from the
package ``sphinx-mathjax-offline`` (the ``docs`` extra), so formulas show
offline, and the copy button (``sphinx-copybutton``) is served from ``_static``.
"""
import importlib.util
import os
import sys

try:
    import ctmc.models  # installed (pip install [-e] .): ctmc with its families as ctmc.models
except ImportError:
    # Not installed: document the in-tree package, with the folder models/
    # mounted as ctmc.models as the installation does (no top-level `models`).
    _root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
    sys.path.insert(0, _root)
    import ctmc
    _models = os.path.join(_root, "models")
    _spec = importlib.util.spec_from_file_location("ctmc.models", os.path.join(_models, "__init__.py"),
                                                   submodule_search_locations=[_models])
    sys.modules["ctmc.models"] = ctmc.models = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(ctmc.models)

import ctmc  # noqa: E402

project = "ctmc"
author = "the ctmc authors"
copyright = "the ctmc authors"
version = release = ctmc.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static/mathjax when the build succeeds
    "sphinx_copybutton",
    "numpydoc",
]

root_doc = "index"
source_suffix = {".rst": "restructuredtext"}
exclude_patterns = ["_build"]
templates_path = []

html_theme = "alabaster"
html_static_path = []
html_title = f"ctmc {release}"

# MathJax from the build itself, never from a CDN (relative to _static; the
# files are those of sphinx-mathjax-offline, which copies them there)
mathjax_path = "mathjax/tex-chtml.js"

# Copy buttons copy the commands without their prompts: the lines that start
# with ">>> ", "... " (or a bare ">>>" / "...") or "$ ", with the prompt
# removed; output lines are left out. A block without prompts is copied whole.
copybutton_prompt_text = r"(?:>>>|\.\.\.)(?: |$)|\$ "
copybutton_prompt_is_regexp = True
copybutton_only_copy_prompt_lines = True

# autodoc / autosummary
autosummary_generate = False  # tables only; the pages are written by hand in api/*.rst
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "none"  # types are given in the numpydoc sections

# numpydoc
numpydoc_show_class_members = False  # autodoc's :members: lists them once
numpydoc_class_members_toctree = False
numpydoc_attributes_as_param_list = True


# ---------------------------------------------------------------------------
# Cross-references to the re-exported names (``ctmc.CTMC``, ``ctmc.Model``,
# ...): the objects are documented once, where they are defined
# (``ctmc.chain.CTMC``); resolve the short spelling to that location.
# ---------------------------------------------------------------------------
_CANONICAL = {name: f"{getattr(ctmc, name).__module__}.{getattr(ctmc, name).__qualname__}"
              for name in ctmc.__all__}


def _resolve_reexports(app, env, node, contnode):
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    if not target.startswith("ctmc.") and node.get("py:module") == "ctmc":
        target = "ctmc." + target
    if not target.startswith("ctmc."):
        return None
    head, _, rest = target[len("ctmc."):].partition(".")
    if head not in _CANONICAL:
        return None
    new = _CANONICAL[head] + ("." + rest if rest else "")
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, node["reftype"],
                                             new, node, contnode)


def setup(app):
    app.connect("missing-reference", _resolve_reexports)


# ---------------------------------------------------------------------------
# The gallery of plots.rst (ctmc.plot): its >>> examples run at every build,
# in docs/_gallery/ (git-ignored), and write the images the page shows. The
# test suite runs the same examples (tests/test_docs.py runs every page's).
# Needs matplotlib (the plot extra). Appended: the setup above is wrapped.
# ---------------------------------------------------------------------------
def _run_gallery(app):
    import doctest
    page = os.path.join(str(app.srcdir), "plots.rst")
    out = os.path.join(str(app.srcdir), "_gallery")
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError("docs/plots.rst draws its gallery with matplotlib: "
                          "pip install 'ctmc-exact[plot]'") from exc
    os.makedirs(out, exist_ok=True)
    with open(page, encoding="utf-8") as f:
        text = f.read()
    test = doctest.DocTestParser().get_doctest(text, {"__name__": "__gallery__"}, "plots.rst", page, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report, here = [], os.getcwd()
    os.chdir(out)
    try:
        runner.run(test, out=report.append)
    finally:
        os.chdir(here)
    if runner.summarize(verbose=False).failed:
        raise RuntimeError("docs/plots.rst: the gallery's examples fail:\n" + "".join(report))


_setup_before_gallery = setup


def setup(app):  # noqa: F811
    out = _setup_before_gallery(app)
    app.connect("builder-inited", _run_gallery)
    return out
