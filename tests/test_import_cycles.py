"""No import cycle among the project's modules: each import, at module level or inside a function, read from
the source (nothing is executed), is an edge from the importing module to the module it names; the graph must
have no cycle (issue 46: ``tools/cli.py`` and ``tools/search/fuzz.py`` imported each other). A cycle is named by its
modules, so the fix is where to look."""

from __future__ import annotations

import ast
from pathlib import Path

from test_layers import ROOT, _sources


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["fedemu", *parts])


def _file(module: str, root: Path) -> Path | None:
    rel = module.split(".")[1:]
    for candidate in (root.joinpath(*rel).with_suffix(".py"), root.joinpath(*rel, "__init__.py")):
        if rel and candidate.is_file():
            return candidate
    return None


def edges(paths, root: Path) -> dict[str, set[str]]:
    """Each module's imports of the project's own modules."""
    graph: dict[str, set[str]] = {}
    for path in paths:
        me = _module(path, root)
        package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
        out = graph.setdefault(me, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                named = [f"{base}.{alias.name}" if _file(f"{base}.{alias.name}", root) else base for alias in node.names]
            else:
                continue
            out.update(m for m in named if m.startswith("fedemu.") and _file(m, root) and m != me)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_one_that_imports_it_back():
    assert cycles(edges(list(_sources()), ROOT)) == []


def test_the_check_finds_a_cycle_through_a_function_level_import(tmp_path):
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "__init__.py").write_text("")
    (tmp_path / "tools" / "a.py").write_text("from . import b\n")
    (tmp_path / "tools" / "b.py").write_text("def f():\n    from fedemu.tools import c\n")
    (tmp_path / "tools" / "c.py").write_text("def g():\n    from .a import thing\n")
    found = cycles(edges(sorted((tmp_path / "tools").glob("*.py")), tmp_path))
    assert found == [["fedemu.tools.a", "fedemu.tools.b", "fedemu.tools.c"]]
