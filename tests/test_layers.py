"""Imports run one way only: fabric <- model <- policies <- actors <- scenarios <- tools.

Every import of the project's own code, at module level or inside a function, is read from the
source (no import is executed) and must name a layer at or below the importer's own. Project code
is imported as ``fedemu.<layer>``, never by the bare folder name (that would load a second copy).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("fabric", "model", "policies", "actors", "scenarios", "tools")
RANK = {name: i for i, name in enumerate(LAYERS)}
RANK["__main__"] = RANK["__init__"] = RANK["tools"]


def _layer_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _sources():
    for folder in ("fabric", "policies", "actors", "scenarios", "tools"):
        yield from sorted((ROOT / folder).glob("*.py"))
    yield from (ROOT / name for name in ("model.py", "__init__.py", "__main__.py"))


def _imports(path: Path):
    """(line, imported module) for every import in ``path``, relative ones made absolute."""
    tree = ast.parse(path.read_text(), str(path))
    package = ["fedemu"] + list(path.relative_to(ROOT).parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            if module == "fedemu":  # ``from fedemu import model``
                for alias in node.names:
                    yield node.lineno, f"fedemu.{alias.name}"
            else:
                yield node.lineno, module


def _violations(path: Path) -> list[str]:
    own = RANK[_layer_of(path)]
    out = []
    for line, module in _imports(path):
        parts = module.split(".")
        if parts[0] in LAYERS:
            out.append(f"{path.relative_to(ROOT)}:{line}: imports {module!r}; write fedemu.{module}")
        elif parts[0] == "fedemu" and len(parts) > 1 and parts[1] in RANK:
            if RANK[parts[1]] > own:
                out.append(f"{path.relative_to(ROOT)}:{line}: {_layer_of(path)} imports {module}, a higher layer")
    return out


@pytest.mark.parametrize("path", list(_sources()), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_run_one_way(path):
    assert _violations(path) == []


def test_the_checker_catches_an_upward_import(tmp_path, monkeypatch):
    """A policy that imports an actor, and a bare ``import fabric``, are both reported."""
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "policies").mkdir()
    bad = tmp_path / "policies" / "bad.py"
    bad.write_text("import fabric.kernel\n\ndef f():\n    from fedemu.actors import worker\n    from ..tools import cli\n")
    found = _violations(bad)
    assert len(found) == 3
    assert "imports 'fabric.kernel'" in found[0]
    assert "policies imports fedemu.actors" in found[1] and "policies imports fedemu.tools," in found[2]
