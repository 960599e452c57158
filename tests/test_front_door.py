"""The front door's figures cannot drift (issue 46): the README's first run prints what the README shows, and
the committed digest file that CI checks every run against (``.ci/run``: ``python -m fedemu.tools.bench.digests
--against tests/digests.txt``) names every case the tool runs.

These are the quick guards, in the default tier; ``tests/test_doc_printouts.py`` (slow: it runs every
command of every page) checks every printout of the README and docs/ in full.
"""

from __future__ import annotations

import re
from pathlib import Path

from fedemu.tools.bench import digests
from fedemu.tools.run.runner import execute

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
COMMITTED = ROOT / "tests" / "digests.txt"
FIRST_RUN = "fedemu run default --out out/default"


def printout(text: str, command: str) -> dict[str, str]:
    """The ``key value`` lines of the block marked ``<!-- printout: command -->`` (a wrapped value's later
    lines are left out)."""
    m = re.search(r"<!-- printout: " + re.escape(command) + r" -->\n```[^\n]*\n(.*?)```", text, re.S)
    assert m, f"README.md: no printout block of `{command}`"
    return dict(line.split(None, 1) for line in m.group(1).splitlines() if re.match(r" \w+ +\S", line))


def test_the_readme_shows_what_its_first_run_prints():
    shown = printout(README.read_text(), FIRST_RUN)
    result = execute("default", seed=int(shown["seed"]))
    s = result.summary
    assert (shown["digest"], int(shown["events"]), int(shown["messages"]), int(shown["jobs_completed"])) == \
        (result.digest, s["events"], s["messages"], s["jobs_completed"]), \
        "README.md's first printout no longer matches `fedemu run default`: run it and paste its table"


def test_the_committed_digest_file_names_every_case():
    """A case the file lacks would print as new and never be compared: regenerate the file
    (``python -m fedemu.tools.bench.digests > tests/digests.txt``) when a scheduler or case is added."""
    committed = [line.split(" ", 1)[0] for line in COMMITTED.read_text().splitlines() if line.strip()]
    assert committed == [name for name, *_ in digests._cases()]
    assert not [line for line in COMMITTED.read_text().splitlines() if " skipped" in line or " error " in line]


def test_against_skips_cases_it_could_not_run_and_names_those_that_moved(tmp_path, monkeypatch, capsys):
    cases = [("a", "default", {}, None), ("b", "default", {}, None), ("t", "default", {}, "yh1")]
    monkeypatch.setattr(digests, "_cases", lambda: cases)
    monkeypatch.setattr(digests, "YH1", tmp_path / "absent.tr")
    monkeypatch.setattr(digests, "run_case", lambda *args, **kwargs: "d1 events=1")
    earlier = tmp_path / "earlier.txt"
    earlier.write_text("a d1 events=1\nb d0 events=1\nt d2 events=9\n")
    assert digests.main(["--against", str(earlier)]) == 1
    err = capsys.readouterr().err
    assert "MOVED b" in err and "MOVED a" not in err and "MOVED t" not in err
    assert "1 of 2 cases unchanged; 1 skipped" in err


def test_ci_runs_the_readmes_test_command_and_the_digests():
    """``.ci/run`` runs exactly the README's test command (every tier), then the digests against the committed
    file."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    command = re.search(r"```sh\n(python3 -m venv .venv && .venv/bin/pip install -e ..\[test\]. && (.+?pytest.*?))\n```",
                        README.read_text())
    assert command, "README.md: no test command block"
    assert command.group(2) in ci
    assert ".venv/bin/python -m fedemu.tools.bench.digests --against tests/digests.txt" in ci
