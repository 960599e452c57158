"""The tiers' rules (``tests/conftest.py``) say what they mean and do not rot: each SLOW pattern names a test
that exists, and the unit rule reads a file's imports."""

from __future__ import annotations

import re
from pathlib import Path

import conftest

HERE = Path(__file__).resolve().parent


def test_every_slow_pattern_names_a_test_that_exists():
    for pattern in conftest.SLOW:
        file, _, test = pattern.partition("::")
        assert (HERE / file).exists(), f"SLOW names {file}, which is gone"
        name = re.match(r"\w+", test.split("::")[-1]).group(0) if test else ""
        if name:
            assert re.search(rf"^\s*(def|class) {name}\b", (HERE / file).read_text(), re.M), \
                f"SLOW names {pattern}: no {name} in {file}"


def test_slow_patterns_match_node_ids_from_the_file_on():
    assert conftest.is_slow("tests/test_doc_printouts.py::test_the_printouts_of_a_page_are_what_its_commands_print"
                            "[docs/api.md]")
    assert not conftest.is_slow("tests/test_doc_printouts.py::test_the_checker_finds_what_is_missing_and_accepts_"
                                "elisions")


def test_a_file_is_unit_by_what_it_imports(tmp_path):
    cases = {"import numpy\nfrom fedemu.fabric import rand\n": True,
             "from fedemu.tools.run.runner import execute\n": False,
             "import subprocess\n": False,
             "import fedemu\n": False,
             "from fedemu.scenarios import federation\n": False,
             "def f():\n    from fedemu.tools import cli\n": False}
    for n, (text, unit) in enumerate(cases.items()):
        path = tmp_path / f"test_{n}.py"
        path.write_text(text)
        assert conftest.is_unit(path) is unit, text
    assert not conftest.is_unit(HERE / "test_api_docs.py")  # NOT_UNIT: it runs whole runs through the API


def test_every_slow_fixture_exists():
    for fixture in conftest.SLOW_FIXTURES:
        assert any(re.search(rf"^def {fixture}\(", p.read_text(), re.M) for p in HERE.glob("*.py")), fixture


def test_every_measured_slow_test_exists():
    """tests/slow.txt names tests by node id: each names a test function of an existing file."""
    for nodeid in conftest.SLOW_MEASURED:
        file, _, test = nodeid.partition("::")
        name = re.match(r"\w+", test).group(0)
        assert (HERE / file).exists() and re.search(rf"^\s*(def|class) {name}\b|^{name} = ", (HERE / file).read_text(), re.M), \
            f"tests/slow.txt: {nodeid} is gone; remove it"
