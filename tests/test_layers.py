"""Imports run one way only: fabric <- model <- policies <- actors <- scenarios <- tools.

Every import of the project's own code, at module level or inside a function, is read from the
source (no import is executed) and must name a layer at or below the importer's own. Project code
is imported as ``fedemu.<layer>``, never by the bare folder name (that would load a second copy).
Inside ``actors/``, the shared base (``actors/common/``) imports no scheduler's package, and no
scheduler's package imports another's, except a variant the package it extends (``EXTENDS``: Eagle is Hawk
plus its mechanisms, its classes Hawk's subclasses).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python < 3.11
    tomllib = None

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("fabric", "model", "policies", "actors", "scenarios", "tools")
RANK = {name: i for i, name in enumerate(LAYERS)}
RANK["__main__"] = RANK["__init__"] = RANK["tools"]


def _layer_of(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _sources():
    for folder in ("fabric", "policies", "actors", "scenarios", "tools"):
        yield from sorted((ROOT / folder).rglob("*.py"))
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


EXTENDS = {"eagle": "hawk"}  # a variant package -> the one package it may import besides the shared base


def _actor_package(rel: Path) -> str | None:
    """The package inside ``actors/`` a file is in (``common``, a scheduler's), or None (``actors/*.py``)."""
    return rel.parts[1] if len(rel.parts) > 2 and rel.parts[0] == "actors" else None


def _violations(path: Path) -> list[str]:
    own = RANK[_layer_of(path)]
    rel = path.relative_to(ROOT)
    package = _actor_package(rel)
    out = []
    for line, module in _imports(path):
        parts = module.split(".")
        if parts[0] in LAYERS:
            out.append(f"{rel}:{line}: imports {module!r}; write fedemu.{module}")
        elif parts[0] == "fedemu" and len(parts) > 1 and parts[1] in RANK:
            if RANK[parts[1]] > own:
                out.append(f"{rel}:{line}: {_layer_of(path)} imports {module}, a higher layer")
            elif package is not None and parts[1] == "actors" and len(parts) > 2 and \
                    (ROOT / "actors" / parts[2]).is_dir() and parts[2] not in (package, "common", EXTENDS.get(package)):
                out.append(f"{rel}:{line}: actors/{package} imports {module}, a scheduler's package not its own")
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


def test_the_checker_catches_a_package_that_reaches_into_another(tmp_path, monkeypatch):
    """The shared base importing a scheduler's package, or one scheduler's package importing another's,
    is reported; a scheduler's package importing the base, the plug-in interface or itself is not."""
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    for sub in ("common", "alpha", "beta"):
        (tmp_path / "actors" / sub).mkdir(parents=True)
    base = tmp_path / "actors" / "common" / "bad.py"
    base.write_text("from ..alpha import plugin\n")
    alpha = tmp_path / "actors" / "alpha" / "mixed.py"
    alpha.write_text("from ..common.worker import Worker\nfrom ..plugin import Scheduler\nfrom .messages import M\n"
                     "from fedemu.actors.beta.node import Node\n")
    assert [v.split(": ", 1)[1] for v in _violations(base)] == [
        "actors/common imports fedemu.actors.alpha, a scheduler's package not its own"]
    assert [v.split(": ", 1)[1] for v in _violations(alpha)] == [
        "actors/alpha imports fedemu.actors.beta.node, a scheduler's package not its own"]


def test_every_package_is_installed():
    """pyproject.toml lists every folder with an ``__init__.py`` (a fresh ``pip install`` finds them all)."""
    if tomllib is None:  # pragma: no cover
        pytest.skip("tomllib needs Python 3.11")
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"fedemu"} | {"fedemu." + ".".join(p.parent.relative_to(ROOT).parts)
                          for layer in LAYERS[:1] + LAYERS[2:] for p in (ROOT / layer).rglob("__init__.py")}
    assert listed == found
