"""The printouts the README and docs/ show are the ones the commands print (issue 45: stale digests and
counts had crept into docs/fairness.md, docs/policies.md and docs/diagrams.md).

A code block is checked when its lines hold ``$ fedemu ...`` commands (each followed by what it prints),
or when a ``<!-- printout: fedemu ... -->`` comment stands just before it (the block is then that command's
printout). Each command runs in a fresh process, in a scratch folder that sees the repository's ``docs/``,
with an 80-column terminal width, each page's commands in its order; every line the doc shows must be among the lines it printed (stdout and
stderr as they came), in the doc's order. A doc may leave lines out; `` ...`` alone on a line says so, and
``…`` inside a line stands for the rest of it. Lines that change from run to run (``wall_s``) are not
compared. A line starting with ``{`` after a ``--log FILE`` command is looked up in FILE instead, and a
``# N lines`` comment on that command is FILE's length. A block whose output cannot be the same twice
(a time-budgeted search) says why in an ``<!-- unchecked: why -->`` comment before it. Every printout
with a digest in it must be checked.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md"))]  # not notes/ nor reproductions/
BLOCK = re.compile(r"((?:<!--[^\n]*-->\n)?)```[^\n]*\n(.*?)```", re.S)
MARK = re.compile(r"<!-- (printout|unchecked): (.+?) -->")
VOLATILE = ("wall_s",)  # wall-clock figures: they differ from run to run
DIGEST_LINE = re.compile(r"^ digest\s+[0-9a-f]{32}\s*$", re.M)


@attrs.frozen
class Command:
    """One command a doc shows, with the lines it says the command prints."""

    where: str
    line: str
    expected: tuple[str, ...]


def blocks(path: Path):
    """(line number, marker kind or None, marker text, the block's text) of every code block of ``path``."""
    text = path.read_text()
    for m in BLOCK.finditer(text):
        mark = MARK.fullmatch(m.group(1).strip()) if m.group(1) else None
        yield (text.count("\n", 0, m.start(2)) + 1, mark.group(1) if mark else None, mark.group(2) if mark else "",
               m.group(2))


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def commands(path: Path) -> list[Command]:
    """The commands of ``path``'s checked blocks."""
    found = []
    for line, kind, text, body in blocks(path):
        if kind == "unchecked":
            continue
        where = f"{_name(path)}:{line}"
        lines = body.rstrip("\n").split("\n")
        if kind == "printout":
            found.append(Command(where, text, tuple(lines)))
            continue
        current, shown = None, []
        for n, text_line in enumerate(lines):
            if text_line.startswith("$ fedemu"):
                if current is not None:
                    found.append(Command(current[0], current[1], tuple(shown)))
                current, shown = (f"{_name(path)}:{line + n}", text_line[2:]), []
            elif current is not None:
                shown.append(text_line)
        if current is not None:
            found.append(Command(current[0], current[1], tuple(shown)))
    return found


CHECKED = [page for page in PAGES if commands(page)]


def _matches(expected: str, actual: str) -> bool:
    if "…" not in expected:
        return expected == actual
    return re.fullmatch(".*".join(map(re.escape, expected.split("…"))), actual) is not None


def missing_lines(expected, printed: list[str], logged: list[str]) -> list[str]:
    """The doc's lines not found, in order, among ``printed`` (``{...}`` lines: among ``logged``)."""
    missing, at, at_log = [], 0, 0
    for line in expected:
        line = line.rstrip()
        if line.strip() in ("", "...") or line.split()[0] in VOLATILE:
            continue
        pool, start = (logged, at_log) if line.startswith("{") else (printed, at)
        for i in range(start, len(pool)):
            if _matches(line, pool[i]):
                if pool is logged:
                    at_log = i + 1
                else:
                    at = i + 1
                break
        else:
            missing.append(line)
    return missing


def run(command: Command, cwd: Path) -> tuple[list[str], list[str], int]:
    """Run a doc's command: (lines printed, lines of its --log file, that file's length)."""
    words = shlex.split(command.line, comments=True)
    assert words[0] == "fedemu", f"{command.where}: not a fedemu command: {command.line}"
    env = {**os.environ, "COLUMNS": "80", "PYTHONUNBUFFERED": "1", "PYTHONHASHSEED": "0"}
    env.pop("LINES", None)
    proc = subprocess.run([sys.executable, "-m", "fedemu", *words[1:]], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)
    printed = [line.rstrip() for line in proc.stdout.splitlines()]
    logged: list[str] = []
    if "--log" in words and words[words.index("--log") + 1] != "-":
        logged = (cwd / words[words.index("--log") + 1]).read_text().splitlines()
    return printed, logged, len(logged)


@pytest.mark.parametrize("page", CHECKED, ids=_name)
def test_the_printouts_of_a_page_are_what_its_commands_print(page, tmp_path):
    """The page's commands in its order (a later one may read what an earlier one wrote), in a scratch
    folder that sees the repository's docs/ (the plans the commands name) and nothing else of it."""
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    for command in commands(page):
        if "--budget" in shlex.split(command.line, comments=True):
            continue  # test_no_checked_command_is_a_search_for_a_time says so
        printed, logged, count = run(command, tmp_path)
        missing = missing_lines(command.expected, printed, logged)
        assert not missing, f"{command.where}: `{command.line}` no longer prints:\n" + "\n".join(missing) + \
            "\n-- it printed:\n" + "\n".join(printed)
        said = re.search(r"#\s*([\d,]+) lines", command.line)
        if said and logged:
            assert count == int(said.group(1).replace(",", "")), f"{command.where}: the log has {count} lines"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_checked_command_is_a_search_for_a_time(path):
    """A `fuzz --budget` block must be marked unchecked: run, it would take its budget (30 minutes for the
    hawk and eagle searches of docs/fault-search.md) and print other counts anyway."""
    timed = [c.where for c in commands(path) if "--budget" in shlex.split(c.line, comments=True)]
    assert not timed, f"{timed}: a search for a time in a checked block; mark it <!-- unchecked: why -->"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_printout_with_a_digest_is_checked(path):
    for line, kind, _, body in blocks(path):
        if DIGEST_LINE.search(body):
            assert kind == "printout" or "$ fedemu" in body, \
                f"{path.relative_to(ROOT)}:{line}: a printout with a digest, but no command to check it by"


def test_the_checker_finds_what_is_missing_and_accepts_elisions(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("<!-- printout: fedemu run demo -->\n```\n a  1\n```\n\n```\n$ fedemu run x   # note\n"
                    " ...\n b  2\n$ fedemu replay y\nidentical: 9 records (run ended with: …)\n```\n"
                    "<!-- unchecked: timed -->\n```\n$ fedemu fuzz z\n```\n")
    found = commands(page)
    assert [(c.line, c.expected) for c in found] == [
        ("fedemu run demo", (" a  1",)), ("fedemu run x   # note", (" ...", " b  2")),
        ("fedemu replay y", ("identical: 9 records (run ended with: …)",))]
    assert missing_lines(found[2].expected, ["identical: 9 records (run ended with: violation: x)"], []) == []
    assert missing_lines((" b  2", " a  1"), [" a  1", " b  2"], []) == [" a  1"]  # order counts
    assert missing_lines((" wall_s  0.9", "{\"k\": 1}"), [], ['{"k": 1}']) == []


def test_the_failover_diagram_and_picture_are_what_the_docs_commands_draw(tmp_path):
    """docs/diagrams.md's Mermaid block and docs/diagrams-failover.svg are the output of the page's own
    commands, byte for byte (the picture's title names the journal, messages.log)."""
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    page = ROOT / "docs" / "diagrams.md"
    job = next(c for c in commands(page) if "--job 52" in c.line)
    picture = attrs.evolve(job, line=job.line.replace("job52.md", "job52.svg"))
    for command in (next(c for c in commands(page) if c.line.startswith("fedemu run")), job, picture):
        run(command, tmp_path)
    block = re.search(r"```mermaid\n.*?```", page.read_text(), re.S).group(0)
    assert block in (tmp_path / "out" / "failover" / "job52.md").read_text()
    assert (tmp_path / "out" / "failover" / "job52.svg").read_bytes() == (ROOT / "docs" / "diagrams-failover.svg").read_bytes()
