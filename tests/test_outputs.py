"""Every file fedemu writes goes through the one safe writer (``fabric.atomic``): an exclusive temporary
file beside the target that never follows a link, no target that is not a regular file, no two outputs
on one path, no output on a result file, and a result set cut short that says so."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from fedemu.fabric.errors import ConfigError
from fedemu.tools.results import results
from fedemu.tools.cli import main

ROOT = Path(__file__).resolve().parent.parent
DEMO = ["run", "demo", "--quiet", "--set", "duration_ms=50"]


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_link_planted_at_a_temporary_name_is_never_followed(capsys, tmp_path):
    """Finding 3: a symlink at OUT/messages.log.tmp made --record overwrite a file outside OUT."""
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("precious\n")
    for name in ("messages.log.tmp", "summary.json.tmp"):
        (out / name).symlink_to(victim)
    code, _, err = _run(capsys, *DEMO, "--record", "--out", out)
    assert code == 0, err
    assert victim.read_text() == "precious\n"
    assert (out / "messages.log").is_file() and not (out / "messages.log").is_symlink()


@pytest.mark.parametrize("option", ["--journal", "--log"])
def test_a_link_or_a_device_as_an_output_is_refused(capsys, tmp_path, option):
    """Finding 3: --journal /dev/stdout (a link) and /dev/full (a device) were replaced by regular files."""
    link, victim = tmp_path / "link", tmp_path / "victim.txt"
    victim.write_text("precious\n")
    link.symlink_to(victim)
    code, _, err = _run(capsys, *DEMO, option, link)
    assert code == 2 and f"{option} {link} exists and is a symbolic link" in err, err
    assert link.is_symlink() and victim.read_text() == "precious\n"
    code, _, err = _run(capsys, *DEMO, option, "/dev/null")
    assert code == 2 and "/dev/null exists and is a character device" in err, err


def test_the_writer_refuses_a_non_regular_target_and_leaves_nothing(tmp_path):
    from fedemu.fabric.atomic import PendingFile, atomic_write

    (tmp_path / "d").mkdir()
    with pytest.raises(ConfigError, match="exists and is a folder"):
        PendingFile(tmp_path / "d")
    pending = PendingFile(tmp_path / "f")
    pending.file.write(b"x")
    (tmp_path / "f").symlink_to(tmp_path / "elsewhere")  # planted while the file was written
    with pytest.raises(ConfigError, match="symbolic link"):
        pending.commit()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "f"] and not (tmp_path / "elsewhere").exists()
    with atomic_write(tmp_path / "g", "wb") as f:
        f.write(b"y")
    assert (tmp_path / "g").read_bytes() == b"y"


@pytest.mark.parametrize("argv, said", [
    (["--journal", "{o}/summary.json"], "is the run's own summary.json in --out"),
    (["--log", "{o}/jobs.csv"], "is the run's own jobs.csv in --out"),
    (["--journal", "{t}/x", "--log", "{t}/x"], "--log {t}/x is also --journal {t}/x"),
    (["--record", "--log", "{o}/messages.log"], "is also --journal"),
])
def test_outputs_on_one_path_or_on_a_result_file_are_refused(capsys, tmp_path, argv, said):
    """Finding 8: --journal OUT/summary.json, --log OUT/jobs.csv and --journal X --log X exited 0 and lost data."""
    out = tmp_path / "out"
    argv = [a.format(o=out, t=tmp_path) for a in argv]
    code, _, err = _run(capsys, *DEMO, "--out", out, *argv)
    assert code == 2 and said.format(o=out, t=tmp_path) in err, err
    assert not out.exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv", [DEMO, ["compare", "default", "--set", "jobs=5"], ["fuzz", "default", "--examples", "1"],
                                  ["reproduce", "pigeon-2019", "--quick"]])
def test_an_empty_out_is_refused(capsys, tmp_path, monkeypatch, argv):
    """Finding 8: --out '' exited 0 and wrote nothing (reproduce wrote into the current folder)."""
    monkeypatch.chdir(tmp_path)
    code, _, err = _run(capsys, *argv, "--out", "")
    assert code == 2 and "--out '': expected the path of a folder" in err
    assert list(tmp_path.iterdir()) == []


def test_the_event_log_may_go_to_standard_output_alone(capsys, tmp_path):
    code, out, err = _run(capsys, "run", "default", "--quiet", "--set", "jobs=5", "--log", "-", "--log-level",
                          "debug")
    assert code == 0, err
    lines = out.splitlines()
    assert lines and all(json.loads(line)["actor"] for line in lines)
    assert "digest" in err and "event log:" not in err
    assert list(tmp_path.iterdir()) == []


def test_a_result_set_cut_short_says_so_in_its_summary(capsys, tmp_path, monkeypatch):
    """Finding 8: a SIGTERM while the results were written left a partial set with nothing marking it."""
    out = tmp_path / "out"

    def stopped(*_a, **_k):
        raise KeyboardInterrupt  # what the SIGTERM handler raises when no fabric is running

    monkeypatch.setattr(results, "write_tasks_csv", stopped)
    code, _, err = _run(capsys, "run", "default", "--quiet", "--set", "jobs=5", "--out", out)
    assert code == 130 and f"the results in {out} are incomplete" in err, err
    summary = json.loads((out / "summary.json").read_text())
    assert results.INCOMPLETE in summary and results.finished(out) is None
    assert sorted(p.name for p in out.iterdir()) == ["jobs.csv", "summary.json"]
    monkeypatch.undo()
    code, _, _ = _run(capsys, "run", "default", "--quiet", "--set", "jobs=5", "--out", out)
    assert code == 0 and results.INCOMPLETE not in json.loads((out / "summary.json").read_text())
    assert results.finished(out)["digest"]


# ---- every writer goes through fabric.atomic ---------------------------------------------------------
WRITERS = {"write_text", "write_bytes", "savefig", "dump", "to_csv", "save", "mkstemp", "NamedTemporaryFile"}


def _raw_writes(path: Path):
    """Calls in ``path`` that write a file other than through fabric.atomic: open() with a write mode,
    Path.write_text/write_bytes, fig.savefig(a path), json.dump, numpy save."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name == "open" and isinstance(f, ast.Name):
            modes = [a for a in node.args[1:2]] + [k.value for k in node.keywords if k.arg == "mode"]
            if any(isinstance(m, ast.Constant) and set(str(m.value)) & set("wax+") for m in modes):
                yield node.lineno, "open(..., write mode)"
        elif name in WRITERS and isinstance(f, ast.Attribute):
            base = f.value
            if name in ("write_text", "write_bytes") and isinstance(base, ast.Name) and base.id in ("atomic",):
                continue
            if name == "savefig" and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == "f":
                continue  # a figure saved into a file atomic_write opened
            yield node.lineno, f".{name}(...)"


def test_no_module_writes_a_file_but_through_the_safe_writer():
    found = []
    for folder in ("fabric", "model.py", "policies", "actors", "scenarios", "tools"):
        paths = [ROOT / folder] if folder.endswith(".py") else sorted((ROOT / folder).rglob("*.py"))
        for path in paths:
            if path.name == "atomic.py":
                continue
            found += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in _raw_writes(path)]
    assert found == []


def test_the_scan_sees_raw_writes(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("open(p, 'w')\nPath(p).write_text('x')\nfig.savefig('a.png')\njson.dump(x, f)\n")
    assert [line for line, _ in _raw_writes(bad)] == [1, 2, 3, 4]


def test_the_temporary_files_are_exclusive_and_hidden(tmp_path):
    from fedemu.fabric.atomic import PendingFile

    pending = PendingFile(tmp_path / "x.log")
    assert pending.tmp.parent == tmp_path and pending.tmp.name.startswith(".x.log.")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    with pytest.raises(FileExistsError):
        os.open(pending.tmp, flags)
    pending.abort()
    assert list(tmp_path.iterdir()) == []


def test_a_backend_matplotlib_does_not_know_still_draws_the_plots(tmp_path):
    """Finding: MPLBACKEND=nonsense gave a 26-line matplotlib traceback (after the CSVs, before the plots).
    fedemu draws on Agg alone, so it sets the variable aside and every plot is drawn."""
    import subprocess
    import sys

    out = tmp_path / "o"
    proc = subprocess.run([sys.executable, "-m", "fedemu", "run", "default", "--quiet", "--set", "jobs=5", "--set",
                           "users=2", "--out", str(out)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MPLBACKEND": "nonsense"})
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert {"delay_cdf.png", "imbalance.png", "share_over_time.png"} <= {p.name for p in out.iterdir()}
    assert results.finished(out) is not None
