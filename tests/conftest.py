"""The suite's three tiers (README, Tests; issue 46), marked here by rules rather than in each file:

- ``unit`` (``pytest -m unit``): the tests of the pieces below a whole run: unit, property and stateful tests.
  A test file is in it when its imports name nothing of ``fedemu.scenarios``, ``fedemu.tools``, the
  ``fedemu`` API or ``subprocess`` (read from the file, so a new file is placed by what it imports), unless
  ``NOT_UNIT`` names it (it runs whole runs by another road).
- ``slow``: the tests ``SLOW`` names (reproductions, Dask, process pools, bounded fault searches and every
  command of every doc page), those using a ``SLOW_FIXTURES`` fixture, and those ``tests/slow.txt`` lists
  (5 s or more in a measured run). ``pytest -m "not slow"`` is the default tier; CI runs everything.
"""

from __future__ import annotations

import ast
import fnmatch
from functools import cache
from pathlib import Path

import pytest

WHOLE_RUNS = ("fedemu.scenarios", "fedemu.tools", "subprocess")
NOT_UNIT = {
    "test_api_docs.py",  # runs docs/api.md's examples: whole runs through the API
    "test_bounded_inputs.py",  # runs ``python -m fedemu`` in capped processes (fabric_helpers.capped_fedemu)
}
# node ids (fnmatch patterns; ``[...]`` parameters as ``*``), each with why it is slow
SLOW = {
    "test_doc_printouts.py::test_the_printouts_of_a_page_are_what_its_commands_print*": "every command of a page",
    "test_doc_printouts.py::test_the_failover_diagram_and_picture_are_what_the_docs_commands_draw":
        "runs and draws the failover scenario in processes",
    "test_fuzz.py::test_a_bounded_search_finds_nothing*": "a bounded fault search, 14-24 s per scheduler",
    "test_api.py::test_compare_on_a_dask_client_gives_the_same_runs": "Dask: a LocalCluster of processes",
    "test_reproduce.py::test_on_dask_each_run_has_a_process_of_its_own": "Dask: a LocalCluster of processes",
    "test_reproduce.py::test_the_worked_example_centralized_sum_is_the_papers":
        "a reproduction: pigeon-2019's worked example, 4 seeds (over 20 min on two loaded cores)",
}
# and every test tests/slow.txt lists: those of the default tier that took 5 s or more in a measured run
MEASURED = Path(__file__).with_name("slow.txt")
SLOW_MEASURED = {line.split()[1] for line in MEASURED.read_text().splitlines() if line.strip() and line[0] != "#"}
# fixtures whose tests are slow however many use them
SLOW_FIXTURES = {
    "tiny_run": "the tiny megha-2023 reproduction (test_reproduce.py): 137 s of setup; a process pool and Dask",
}


@cache
def imports_a_whole_run(path: Path) -> bool:
    """Whether the test file at ``path`` imports a module that runs whole scenarios (or starts processes)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        if any(n == "fedemu" or n.startswith(WHOLE_RUNS) for n in names):
            return True
    return False


def is_unit(path: Path) -> bool:
    return path.name.startswith("test_") and path.name not in NOT_UNIT and not imports_a_whole_run(path)


def is_slow(nodeid: str) -> bool:
    """Whether SLOW names the test ``nodeid`` (``tests/test_x.py::test_y[...]``; patterns start at the file)."""
    path, _, rest = nodeid.partition("::")
    name = f"{Path(path).name}::{rest}"
    return name in SLOW_MEASURED or any(fnmatch.fnmatchcase(name, pattern.replace("[", "[[]")) for pattern in SLOW)


TIER_OF: dict[str, str] = {}  # node id -> "unit", "default" or "slow", for the summary
SPENT: dict[str, list] = {}  # tier -> [tests, seconds]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_slow(item.nodeid) or SLOW_FIXTURES.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") is None and is_unit(Path(item.fspath)):
            item.add_marker(pytest.mark.unit)
        TIER_OF[item.nodeid] = "slow" if item.get_closest_marker("slow") else \
            "unit" if item.get_closest_marker("unit") else "default"


def _tier(report) -> str:
    """A report's tier, from its marks (pytest-xdist's controller collects nothing, so TIER_OF is empty there)."""
    marks = getattr(report, "keywords", {})
    return TIER_OF.get(report.nodeid) or ("slow" if "slow" in marks else "unit" if "unit" in marks else "default")


def pytest_runtest_logreport(report):
    spent = SPENT.setdefault(_tier(report), [0, 0.0])
    spent[0] += report.when == "call"
    spent[1] += report.duration


def pytest_terminal_summary(terminalreporter):
    """One line per tier that ran: its tests and their time (setup included, summed over the workers), so that
    CI's output says them."""
    names = {"unit": "unit", "default": "the rest of the default tier", "slow": "slow"}
    said = [f"{names[tier]}: {SPENT[tier][0]} tests, {SPENT[tier][1]:.0f} s" for tier in names if tier in SPENT]
    workers = getattr(terminalreporter.config.option, "numprocesses", None)
    if said:
        terminalreporter.write_line("tiers: " + "; ".join(said) + (f" (test time over {workers} workers)"
                                                                    if isinstance(workers, int) and workers > 1 else ""))


def pytest_ignore_collect(collection_path, config):
    """``pytest -m unit`` does not import the other files at all (collecting them all costs ~10 CPU-s)."""
    if (config.getoption("markexpr") == "unit" and collection_path.suffix == ".py"
            and collection_path.name.startswith("test_") and not is_unit(collection_path)):
        return True
    return None
