"""Sphinx configuration for the ctmc documentation.

The API reference is generated from the numpydoc docstrings of the installed
(or, failing that, the in-tree) ``ctmc`` package. The build needs no network
access: there is no intersphinx mapping, and the theme ships with Sphinx.
"""
import os
import sys

# Document the in-tree package even when it is not installed.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import ctmc  # noqa: E402

project = "ctmc"
author = "the ctmc authors"
copyright = "the ctmc authors"
version = release = ctmc.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
]

root_doc = "index"
source_suffix = {".rst": "restructuredtext"}
exclude_patterns = ["_build"]
templates_path = []

html_theme = "alabaster"
html_static_path = []
html_title = f"ctmc {release}"

# autodoc / autosummary
autosummary_generate = False  # tables only; the pages are written by hand in api.rst
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
