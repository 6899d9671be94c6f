"""Layers: the core (ctmc/) never imports a model family; families use only ctmc's public names.

Checked on the source (``ast``), so every import counts, at module level or
inside a function, whether or not the code path runs in a test:

- no file of ``ctmc/`` imports ``models`` or ``ctmc.models`` (families reach the
  ``ctmc`` command through the entry-point group ``ctmc.families``);
- the module-level imports of the core form no cycle;
- no file of ``models/`` imports a private name of the core: a module or an
  attribute of ``ctmc`` whose name starts with an underscore (``ctmc._util``,
  ``from ctmc.stationary import _pin``, ``ctmc.chain._x``).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "ctmc"
FAMILIES = ROOT / "models"


def _module_name(path: Path, top: Path, package: str) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def _sources(top: Path, package: str) -> dict:
    """Dotted module name -> (path, is_package, ast) for every .py below ``top``."""
    out = {}
    for path in sorted(top.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        out[_module_name(path, top, package)] = (path, path.name == "__init__.py",
                                                 ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return out


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """Absolute name of the module a ``from ... import`` statement reads from."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(tree, module: str, is_package: bool, *, module_level_only: bool = False):
    """(imported module, names imported from it or None, line) for each import in ``tree``."""
    def walk(node):
        for child in ast.iter_child_nodes(node):
            if module_level_only and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if module_level_only and isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            yield child
            yield from walk(child)

    for node in walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            yield _resolve(node, module, is_package), [a.name for a in node.names], node.lineno


CORE_SOURCES = _sources(CORE, "ctmc")
FAMILY_SOURCES = _sources(FAMILIES, "ctmc.models")


def _is_family(name: str) -> bool:
    return name.split(".")[0] == "models" or name == "ctmc.models" or name.startswith("ctmc.models.")


def test_the_sources_are_found():
    assert {"ctmc", "ctmc.cli", "ctmc.chain"} <= set(CORE_SOURCES)
    assert "ctmc.models" in FAMILY_SOURCES and any(m.startswith("ctmc.models.jsq") for m in FAMILY_SOURCES)


def test_core_never_imports_a_model_family():
    offenders = []
    for module, (path, is_pkg, tree) in CORE_SOURCES.items():
        for target, names, line in _imports(tree, module, is_pkg):
            full = [target] + [f"{target}.{n}" for n in names or ()]
            if any(_is_family(t) for t in full):
                offenders.append(f"{path.relative_to(ROOT)}:{line} imports {target} {names or ''}")
    assert not offenders, "the core imports model families:\n" + "\n".join(offenders)


def _core_graph() -> dict:
    """Core module -> core modules it imports at module level (import time)."""
    graph = {}
    for module, (_, is_pkg, tree) in CORE_SOURCES.items():
        deps = set()
        for target, names, _line in _imports(tree, module, is_pkg, module_level_only=True):
            if target in CORE_SOURCES:
                # `from pkg import sub` imports the submodule sub; `from mod import name` only mod
                subs = [f"{target}.{n}" for n in names or () if f"{target}.{n}" in CORE_SOURCES]
                if subs:
                    deps.update(subs)
                    if any(f"{target}.{n}" not in CORE_SOURCES for n in names):
                        deps.add(target)
                else:
                    deps.add(target)
        deps.discard(module)
        graph[module] = deps
    return graph


def _cycle(graph: dict):
    """One cycle of ``graph`` as a list of nodes, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "active"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "active":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_core_module_level_imports_have_no_cycle():
    graph = _core_graph()
    assert graph["ctmc"], "the import graph is empty: the parser missed the imports of ctmc/__init__.py"
    cycle = _cycle(graph)
    assert cycle is None, "import cycle in the core: " + " -> ".join(cycle)


def _private(dotted: str) -> bool:
    return dotted.split(".")[0] == "ctmc" and any(p.startswith("_") for p in dotted.split(".")[1:])


def _private_core_uses() -> list:
    offenders = []
    for module, (path, is_pkg, tree) in FAMILY_SOURCES.items():
        where = f"{path.relative_to(ROOT)}"
        ctmc_aliases = set()
        for target, names, line in _imports(tree, module, is_pkg):
            if _is_family(target) or target.split(".")[0] != "ctmc":
                continue
            full = [target] + [f"{target}.{n}" for n in names or () if n != "*"]
            bad = [t for t in full if _private(t)]
            if bad:
                offenders.append(f"{where}:{line} imports {', '.join(bad)}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                ctmc_aliases.update(a.asname or a.name.split(".")[0] for a in node.names
                                    if a.name.split(".")[0] == "ctmc")
        # attribute chains such as ctmc.stationary._pin(...) through `import ctmc [as c]`
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                chain, cur = [], node
                while isinstance(cur, ast.Attribute):
                    chain.append(cur.attr)
                    cur = cur.value
                if isinstance(cur, ast.Name) and cur.id in ctmc_aliases:
                    dotted = ".".join(["ctmc", *reversed(chain)])
                    if not _is_family(dotted) and _private(dotted):
                        offenders.append(f"{where}:{node.lineno} uses {dotted}")
    return sorted(set(offenders))


def test_private_name_finder_finds_private_names():
    assert _private("ctmc._util") and _private("ctmc.stationary._pin")
    assert not _private("ctmc.stationary.stationary_evidence") and not _private("ctmc.report.format_table")


# If a family still needs a private name of the core, mark this test
# xfail(strict=True) naming the offenders, so that it fails once they are gone.
def test_model_families_use_only_public_core_names():
    offenders = _private_core_uses()
    assert not offenders, "model families import private names of the core:\n" + "\n".join(offenders)


# --------------------------------------------------------------------------
# rooms (issue 22): no circle even through imports inside functions, no file over
# 900 lines, no module reading another module's underscore names, kernels below
# the analyses, tests importing helper modules rather than each other
# --------------------------------------------------------------------------
ALL_SOURCES = {**CORE_SOURCES, **FAMILY_SOURCES}
#: compiled extension modules, by their C entry file: ctmc/_explore.c is ctmc._explore
EXTENSIONS = {"ctmc._explore"}
#: the analyses: modules that answer a question about a chain
ANALYSES = {"ctmc.stationary", "ctmc.passage", "ctmc.transient", "ctmc.aggregation", "ctmc.measures",
            "ctmc.analyses"}
MAX_LINES = 900


def _absolute(name: str) -> str:
    """``models.x`` (a family seen from its own folder) is ``ctmc.models.x``."""
    return "ctmc." + name if name.split(".")[0] == "models" else name


def _edges(module: str, is_pkg: bool, tree, *, module_level_only: bool = False):
    """(imported source module, line) for each import of another module of ctmc/ or models/.

    ``from pkg import sub`` depends on the submodule ``sub`` only, where ``sub`` is one;
    ``from mod import name`` depends on ``mod``.
    """
    known = set(ALL_SOURCES) | EXTENSIONS
    for target, names, line in _imports(tree, module, is_pkg, module_level_only=module_level_only):
        target = _absolute(target)
        if target not in known:
            continue
        subs = [f"{target}.{n}" for n in names or () if f"{target}.{n}" in known]
        for sub in subs:
            yield sub, line
        if not subs or len(subs) < len(names or ()):
            yield target, line


def _full_graph() -> dict:
    """Module -> modules it imports anywhere in its text (module level or inside functions)."""
    graph = {}
    for module, (_, is_pkg, tree) in ALL_SOURCES.items():
        graph[module] = {t for t, _ in _edges(module, is_pkg, tree)} - {module}
    return graph


def test_no_import_cycle_even_through_imports_inside_functions():
    graph = _full_graph()
    assert graph["ctmc"] and graph["ctmc.models"] is not None
    cycle = _cycle(graph)
    assert cycle is None, "import cycle (imports inside functions included): " + " -> ".join(cycle)


def test_no_file_of_the_core_or_the_families_is_over_900_lines():
    long = []
    for top in (CORE, FAMILIES):
        for path in sorted(top.rglob("*")):
            if path.suffix in {".py", ".c", ".h"} and "__pycache__" not in path.parts:
                n = len(path.read_text(encoding="utf-8").splitlines())
                if n > MAX_LINES:
                    long.append(f"{path.relative_to(ROOT)}: {n} lines")
    assert not long, f"files over {MAX_LINES} lines:\n" + "\n".join(long)


def _private_name(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _foreign_private_uses() -> list:
    """``from other import _x`` and ``other._x`` across modules of ctmc/ and models/.

    A private *module* (``ctmc._util``, ``ctmc._compiled``) may be imported for its
    public names; what may not cross a file is a name its own module keeps private.
    """
    known = set(ALL_SOURCES) | EXTENSIONS
    offenders = []
    for module, (path, is_pkg, tree) in ALL_SOURCES.items():
        where = path.relative_to(ROOT)
        aliases = {}      # local name -> the source module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if _absolute(a.name) in known:
                        aliases[a.asname or a.name.split(".")[0]] = _absolute(a.name.split(".")[0]) \
                            if a.asname is None else _absolute(a.name)
            elif isinstance(node, ast.ImportFrom):
                target = _absolute(_resolve(node, module, is_pkg))
                for a in node.names:
                    full = f"{target}.{a.name}"
                    if full in known:
                        aliases[a.asname or a.name] = full
                    elif target in known and target != module and _private_name(a.name):
                        offenders.append(f"{where}:{node.lineno} imports {a.name} from {target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and _private_name(node.attr) and aliases.get(node.value.id, module) != module:
                bound = aliases[node.value.id]
                if f"{bound}.{node.attr}" not in known:
                    offenders.append(f"{where}:{node.lineno} uses {bound}.{node.attr}")
    return sorted(set(offenders))


def test_the_private_use_finder_finds_private_uses(tmp_path):
    tree = ast.parse("from ctmc.stationary import _pin\nimport ctmc.chain as ch\nch._x\nfrom ctmc import _util\n")
    ALL_SOURCES["ctmc.probe"] = (CORE / "probe.py", False, tree)
    try:
        found = [o for o in _foreign_private_uses() if o.startswith("ctmc/probe.py")]
    finally:
        del ALL_SOURCES["ctmc.probe"]
    assert found == ["ctmc/probe.py:1 imports _pin from ctmc.stationary", "ctmc/probe.py:3 uses ctmc.chain._x"]


def test_no_module_uses_another_modules_private_names():
    offenders = _foreign_private_uses()
    assert not offenders, "private names used across files:\n" + "\n".join(offenders)


def test_kernels_never_import_an_analysis():
    kernels = {m: s for m, s in CORE_SOURCES.items() if m == "ctmc.kernels" or m.startswith("ctmc.kernels.")}
    assert kernels, "ctmc.kernels is missing"
    offenders = [f"{path.relative_to(ROOT)}:{line} imports {target}"
                 for module, (path, is_pkg, tree) in kernels.items()
                 for target, line in _edges(module, is_pkg, tree) if target in ANALYSES]
    assert not offenders, "the kernels import analyses:\n" + "\n".join(offenders)


def test_tests_import_helper_modules_not_other_tests():
    tests = Path(__file__).resolve().parent
    offenders = []
    for path in sorted(tests.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.name}:{node.lineno} imports {n}" for n in names
                          if n.split(".")[0].startswith("test_") or n.split(".")[0] in {"conftest", "tests"}]
    assert not offenders, "tests import other test files (use a helper module):\n" + "\n".join(offenders)
