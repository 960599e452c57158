"""The plug-in boundary: below and beside ``actors/`` nothing names a scheduler or imports a scheduler's package.

Everything scheduler-specific that ``fabric/``, ``policies/``, ``model.py``, ``scenarios/`` and ``tools/``
need is declared by the plug-ins (``actors.plugin.Scheduler``) and reached through ``actors.registry``,
so that adding a scheduler is one folder and a registry line. Read from the source (nothing is run):
an import of ``fedemu.actors.<package>`` for a scheduler's package (any folder of ``actors/`` but
``common``), and code that names a registered scheduler (a string outside docstrings whose words
include a scheduler's name, or an identifier that is one). Comments and docstrings may cite the papers.

A few modules are about particular schedulers by purpose and may name them as data (``PRESETS``, with
the reason); one line elsewhere may too when it ends with ``# plugin-boundary: <why>``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from fedemu.actors.registry import SCHEDULERS

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("fabric", "policies", "scenarios", "tools")
PRESETS = {
    "scenarios/fairness.py": "the 2022 Megha paper's fairness experiment: a Megha run by definition",
    "tools/bench/bench_megha.py": "Megha's own benchmark, and one fixed case per scheduler",
    "tools/bench/digests.py": "a fixed list of runs, one or more per scheduler",
    "tools/bench/paired.py": "issue 47's whole-process cases: one fixed shape per scheduler",
    "tools/reproduce/experiments/megha_2022.py": "the papers' experiments: the schedulers each one compares",
    "tools/reproduce/experiments/megha_2023.py": "the papers' experiments: the schedulers each one compares",
    "tools/reproduce/experiments/pigeon_2019.py": "the papers' experiments: the schedulers each one compares",
    "tools/reproduce/experiments/base.py": "the papers' experiments: their sensitivity cases name a scheduler's knob",
    "tools/reproduce/experiments/__init__.py": "the papers' experiments: the registry of papers",
    "tools/reproduce/reproduce.py": "the papers' reports: their tables name the schedulers they compare",
    "tools/reproduce/repro_report.py": "the papers' reports: their tables name the schedulers they compare",
}
PRAGMA = "# plugin-boundary:"
WORD = re.compile(r"[a-z]+")


def _sources():
    for folder in CHECKED:
        yield from sorted((ROOT / folder).rglob("*.py"))
    yield from (ROOT / name for name in ("model.py", "__init__.py", "__main__.py"))


def _docstrings(tree) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and \
                    isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _imported(node, package: list[str]) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package[: len(package) - node.level + 1]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        return [f"{module}.{a.name}" for a in node.names] if module in ("fedemu", "fedemu.actors") else [module]
    return []


def violations(path: Path, root: Path = ROOT, names=tuple(SCHEDULERS)) -> list[str]:
    """Where ``path`` imports a scheduler's package or names a scheduler (``names``)."""
    rel = path.relative_to(root)
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text, str(path))
    docs = _docstrings(tree)
    packages = {p.name for p in (root / "actors").iterdir() if p.is_dir() and p.name != "common"}
    package = ["fedemu", *rel.parts[:-1]]
    out = []
    for node in ast.walk(tree):
        for module in _imported(node, package):
            parts = module.split(".")
            if parts[:2] == ["fedemu", "actors"] and len(parts) > 2 and parts[2] in packages:
                out.append(f"{rel}:{node.lineno}: imports {module}, a scheduler's package")
        said = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if set(WORD.findall(node.value.lower())) & set(names):
                said = repr(node.value if len(node.value) < 50 else node.value[:47] + "...")
        elif isinstance(node, ast.Name) and node.id.lower() in names:
            said = node.id
        elif isinstance(node, ast.Attribute) and node.attr.lower() in names:
            said = node.attr
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name.lower() in names:
            said = node.name
        if said is not None and PRAGMA not in lines[node.lineno - 1]:
            out.append(f"{rel}:{node.lineno}: names a scheduler: {said}")
    return out


@pytest.mark.parametrize("path", [p for p in _sources() if str(p.relative_to(ROOT)) not in PRESETS],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_below_or_beside_actors_names_a_scheduler(path):
    assert violations(path) == []


@pytest.mark.parametrize("path", sorted(PRESETS))
def test_a_preset_may_name_schedulers_but_imports_no_scheduler_package(path):
    assert [v for v in violations(ROOT / path) if "imports" in v] == []


def test_the_checker_catches_a_scheduler_named_or_imported(tmp_path):
    """Each way of reaching past the plug-ins is reported; docstrings, comments, a pragma'd line, the
    registry and the shared base are not."""
    (tmp_path / "actors" / "alpha").mkdir(parents=True)
    (tmp_path / "actors" / "common").mkdir()
    (tmp_path / "tools").mkdir()
    bad = tmp_path / "tools" / "bad.py"
    bad.write_text('"""Alpha (2019, 2.2) is cited here."""\n'
                   "from fedemu.actors import alpha, registry\n"
                   "from fedemu.actors.alpha.plugin import ALPHA\n"
                   "from fedemu.actors.common.worker import Worker  # alpha in a comment\n"
                   "def alpha():\n"
                   "    '''alpha: in a docstring'''\n"
                   "    if params['scheduler'] == 'alpha':\n"
                   "        return f'{x} alpha-0'\n"
                   "    x = registry.alpha\n"
                   "    return 'alpha' # plugin-boundary: a pragma'd line\n")
    found = sorted(violations(bad, root=tmp_path, names=("alpha",)), key=lambda f: int(f.split(":")[1]))
    assert found == [
        "tools/bad.py:2: imports fedemu.actors.alpha, a scheduler's package",
        "tools/bad.py:3: imports fedemu.actors.alpha.plugin, a scheduler's package",
        "tools/bad.py:5: names a scheduler: alpha",
        "tools/bad.py:7: names a scheduler: 'alpha'",
        "tools/bad.py:8: names a scheduler: ' alpha-0'",
        "tools/bad.py:9: names a scheduler: alpha",
    ]
