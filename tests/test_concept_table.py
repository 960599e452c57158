"""docs/architecture.md's table from paper concept to file: every file it names exists, and every class,
function or method it names is defined in that file (read from the source), so the table cannot drift."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| [^|]+ \| [^|]+ \| (.+) \|$")
PLACE = re.compile(r"`([\w/]+\.py)`(?: \(`([\w.]+)`\))?")


def rows(text: str) -> list[str]:
    """The 'where' cells of the Paper concepts table."""
    part = text.split("## Paper concepts", 1)[1].split("\n## ", 1)[0]
    return [m.group(1) for line in part.splitlines() if (m := ROW.match(line)) and not line.startswith("| paper")
            and not line.startswith("| ---")]


def defined(path: Path) -> set[str]:
    """Top-level names, and Class.method for the methods of top-level classes."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names.update(f"{node.name}.{item.name}" for item in node.body if isinstance(item, ast.FunctionDef))
    return names


def problems(text: str, root: Path) -> list[str]:
    out = []
    for cell in rows(text):
        places = PLACE.findall(cell)
        if not places:
            out.append(f"no file in {cell!r}")
        for file, symbol in places:
            path = root / file
            if not path.is_file():
                out.append(f"{file} does not exist")
            elif symbol and symbol not in defined(path):
                out.append(f"{file} defines no {symbol}")
    return out


def test_every_concept_names_a_file_and_a_symbol_that_exist():
    text = (ROOT / "docs" / "architecture.md").read_text()
    assert len(rows(text)) >= 20
    assert problems(text, ROOT) == []


def test_the_check_catches_a_moved_file_and_a_renamed_class(tmp_path):
    (tmp_path / "a.py").write_text("class Kept:\n    def on_x(self):\n        pass\n")
    text = ("## Paper concepts\n\n| paper | concept | where |\n| --- | --- | --- |\n"
            "| P, 1 | kept | `a.py` (`Kept.on_x`) |\n| P, 2 | renamed | `a.py` (`Gone`) |\n| P, 3 | moved | `b.py` |\n")
    assert problems(text, tmp_path) == ["a.py defines no Gone", "b.py does not exist"]
