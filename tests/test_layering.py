"""The import graph of the installed packages: one namespace, layers without cycles.

Every import statement counts, at module level or inside a function (a lazy import is still a
dependency); only those under ``if TYPE_CHECKING:`` are left out.  Layers, bottom to top:
``tritondiff.base``; ``tritondiff.kernels``; ``tritondiff.compiler``; ``tritondiff.harness``.
A module may import its own layer and the layers below, never one above, and the graph of
modules has no cycle.
"""
from __future__ import annotations

import ast
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: folder -> the package it installs as (pyproject.toml's package-dir)
FOLDERS = {"tritondiff": "tritondiff", "harness": "tritondiff.harness", "kernels": "tritondiff.kernels",
           "compiler": "tritondiff.compiler"}
#: layer of each package, bottom first
LAYERS = ("tritondiff.base", "tritondiff.kernels", "tritondiff.compiler", "tritondiff.harness")
#: folders that are not installed but import the packages (they must use tritondiff.* too)
USERS = ("tests", "bench", "tools", "examples")


def _modules() -> dict[str, str]:
    out = {}
    for folder, package in FOLDERS.items():
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, folder)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            rel = os.path.relpath(dirpath, os.path.join(ROOT, folder))
            prefix = package if rel == "." else package + "." + rel.replace(os.sep, ".")
            for f in filenames:
                if f.endswith(".py"):
                    name = prefix if f == "__init__.py" else f"{prefix}.{f[:-3]}"
                    out[name] = os.path.join(dirpath, f)
    return out


MODULES = _modules()


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in node.body:
                skip.update(id(n) for n in ast.walk(sub))
    return skip


def _imports(name: str, path: str) -> list[tuple[str, int]]:
    """(imported module, line) of every import in ``path``: ``from a import b`` imports ``a.b`` where
    that is a module, else ``a``."""
    tree = ast.parse(open(path).read(), path)
    skip = _type_checking_nodes(tree)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.extend((a.name, node.lineno) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            for a in node.names:
                full = f"{module}.{a.name}"
                out.append((full if full in MODULES else module, node.lineno))
    return out


def _graph() -> dict[str, set[str]]:
    graph = {}
    for name, path in MODULES.items():
        targets = set()
        for target, _ in _imports(name, path):
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, on_stack, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]; counter[0] += 1
        stack.append(root); on_stack.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop(); on_stack.discard(w); comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def _layer(module: str) -> int | None:
    for i, prefix in enumerate(LAYERS):
        if module == prefix or module.startswith(prefix + "."):
            return i
    return None


def test_the_module_graph_has_no_cycle():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_package_imports_a_layer_above_its_own():
    wrong = []
    for name, targets in _graph().items():
        here = _layer(name)
        for target in targets:
            there = _layer(target)
            if here is not None and there is not None and there > here:
                wrong.append(f"{name} imports {target}")
    assert not wrong, "\n".join(sorted(wrong))


def test_the_root_package_imports_nothing_eagerly():
    """``import tritondiff`` must stay free of torch, triton and the device decision."""
    assert _graph()["tritondiff"] == set()


def test_the_installed_packages_never_import_bench_tools_or_tests():
    wrong = [f"{name} imports {t}" for name, path in MODULES.items() for t, _ in _imports(name, path)
             if t.split(".")[0] in ("bench", "tools", "tests")]
    assert not wrong, "\n".join(wrong)


def _python_files(folder: str):
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, folder)):
        dirnames[:] = [d for d in dirnames if d not in ("__pycache__", ".venv")]
        yield from (os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))


@pytest.mark.parametrize("folder", [*FOLDERS, *USERS])
def test_nothing_imports_the_folders_by_their_bare_names(folder):
    """``harness`` / ``kernels`` / ``compiler`` are folder names, not packages: outside a checkout's root
    they do not import, and ``kernels`` is another popular package's name."""
    bare = re.compile(r"^(harness|kernels|compiler)(\.|$)")
    wrong = []
    for path in _python_files(folder):
        for node in ast.walk(ast.parse(open(path).read(), path)):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level and node.module else [])
            wrong += [f"{os.path.relpath(path, ROOT)}:{node.lineno} imports {n}" for n in names if bare.match(n)]
    assert not wrong, "\n".join(wrong)


def test_pyproject_lists_every_package_folder():
    if sys.version_info >= (3, 11):
        import tomllib
    else:                                    # pragma: no cover
        tomllib = pytest.importorskip("tomli")
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    packages = {name for name, path in MODULES.items() if path.endswith("__init__.py")}
    assert sorted(setuptools["packages"]) == sorted(packages)
    assert setuptools["package-dir"] == {package: folder for folder, package in FOLDERS.items()}


def test_cycle_finder_finds_a_planted_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
