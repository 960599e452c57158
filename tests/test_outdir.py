"""Output folders: made and checked before a run, removed again only when made here and left empty."""

from __future__ import annotations

import json
import re

import pytest

from fedemu.fabric.errors import ConfigError
from fedemu.tools.run import outdir


def test_a_new_nested_folder_is_made_and_kept_after_success(tmp_path):
    target = tmp_path / "a" / "b"
    with outdir.prepared(str(target)) as out:
        assert out == str(target) and target.is_dir()
        (target / "summary.json").write_text("{}")
    assert (target / "summary.json").exists()


def test_a_failure_removes_only_the_empty_folders_made_for_the_run(tmp_path):
    (tmp_path / "a").mkdir()
    with pytest.raises(ConfigError):
        with outdir.prepared(str(tmp_path / "a" / "b" / "c")):
            raise ConfigError("refused")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"]  # a existed before: kept
    assert list((tmp_path / "a").iterdir()) == []


def test_a_failure_keeps_a_folder_with_evidence_in_it(tmp_path):
    target = tmp_path / "run"
    with pytest.raises(RuntimeError):
        with outdir.prepared(str(target)):
            (target / "messages.log").write_text("journal of the failed run")
            raise RuntimeError("mid-run failure")
    assert (target / "messages.log").exists()


def test_an_existing_folder_is_never_removed(tmp_path):
    with pytest.raises(ConfigError):
        with outdir.prepared(str(tmp_path)):
            raise ConfigError("refused")
    assert tmp_path.is_dir()


def test_no_out_yields_none():
    with outdir.prepared(None) as out:
        assert out is None


def _earlier_compare(folder, *runs):
    """A folder as an earlier compare left it: compare.json naming ``runs``, each with a summary."""
    (folder / "compare.json").write_text(json.dumps({"runs": [{"name": r} for r in runs]}))
    (folder / "compare.csv").write_text("x\n")
    for r in runs:
        (folder / r).mkdir()
        (folder / r / "summary.json").write_text("{}")


def test_compare_folders_empty_force_and_foreign_files(tmp_path):
    _earlier_compare(tmp_path, "megha-random-s1")
    with pytest.raises(ConfigError, match="is not empty .* give --force"):
        outdir.clear_compare(tmp_path, force=False)
    outdir.clear_compare(tmp_path, force=True)
    assert list(tmp_path.iterdir()) == []
    _earlier_compare(tmp_path, "megha-random-s1")
    (tmp_path / "notes.md").write_text("mine")
    with pytest.raises(ConfigError, match=r"compare did not write \(notes.md\)"):
        outdir.clear_compare(tmp_path, force=True)
    assert (tmp_path / "notes.md").read_text() == "mine"


def test_a_run_folder_holding_something_else_is_not_compares(tmp_path):
    _earlier_compare(tmp_path, "megha-random-s1")
    (tmp_path / "megha-random-s1" / "analysis.ipynb").write_text("{}")
    with pytest.raises(ConfigError, match="megha-random-s1"):
        outdir.clear_compare(tmp_path, force=True)
    assert (tmp_path / "megha-random-s1" / "analysis.ipynb").exists()


def test_force_removes_only_the_folders_the_earlier_compare_named(tmp_path):
    """Finding 8: --force deleted a user's folder that held a summary.json, and an empty folder."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "summary.json").write_text("{}")  # the user's, no compare.json beside it
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no compare.json"):
        outdir.clear_compare(tmp_path, force=True)
    _earlier_compare(tmp_path, "megha-random-s1")
    with pytest.raises(ConfigError, match=r"compare did not write \((empty|results), (empty|results)\)"):
        outdir.clear_compare(tmp_path, force=True)
    assert (tmp_path / "results" / "summary.json").exists() and (tmp_path / "empty").is_dir()


def test_an_empty_out_is_refused():
    """Finding 8: --out '' exited 0 and wrote nothing."""
    with pytest.raises(ConfigError, match="--out '': expected the path of a folder"):
        with outdir.prepared(""):
            raise AssertionError("the run must not start")


@pytest.mark.parametrize("files, said", [
    ({"--journal": "{o}/x", "--log": "{o}/x"}, "--log {o}/x is also --journal {o}/x"),
    ({"--journal": "{o}/out/summary.json"}, "is the run's own summary.json in --out"),
    ({"--log": "{o}/out/../out/jobs.csv"}, "is the run's own jobs.csv"),
    ({"--journal": "{o}/link"}, "exists and is a symbolic link"),
    ({"--journal": "/dev/null"}, "/dev/null exists and is a character device"),
    ({"--journal": "-"}, "cannot go to standard output"),
])
def test_outputs_that_would_lose_data_are_refused(tmp_path, files, said):
    """Findings 3 and 8: two outputs on one path, an output on a result file, a link or a device."""
    (tmp_path / "out").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    files = {k: v.format(o=tmp_path) for k, v in files.items()}
    with pytest.raises(ConfigError, match=re.escape(said.format(o=tmp_path))):
        outdir.check_outputs(str(tmp_path / "out"), files)
    assert not (tmp_path / "elsewhere").exists()


def test_the_log_may_be_standard_output(tmp_path):
    outdir.check_outputs(str(tmp_path), {"--journal": str(tmp_path / "messages.log"), "--log": "-"})


def test_the_default_run_folder_is_under_the_ignored_out(tmp_path):
    assert outdir.default_run_dir("default", 3) == "out/default-seed3"
    assert outdir.default_run_dir(str(tmp_path / "mine.py"), 1) == "out/mine-seed1"


def test_a_write_protected_folder_is_refused_before_the_run_even_for_root(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        with pytest.raises(ConfigError, match="the folder is write-protected \\(mode 555\\)"):
            with outdir.prepared(str(locked)):
                raise AssertionError("the run must not start")
        assert list(locked.iterdir()) == []
        with pytest.raises(ConfigError, match=f"{locked} is write-protected"):
            with outdir.prepared(str(locked / "new" / "run")):
                raise AssertionError("the run must not start")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


# ---- a run owns its --out folder (issue 45) ------------------------------------------------------------

def _names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_second_run_into_the_same_out_leaves_only_its_own_files_and_names_the_rest(capsys, tmp_path):
    """Finding: a second run into the same --out left the first's messages.log and share_over_time.png beside
    its own summary.json, with no word."""
    from fedemu.tools.cli import main

    out = tmp_path / "o"
    first = ["run", "default", "--quiet", "--set", "jobs=10", "--out", str(out)]
    assert main([*first, "--set", "users=2", "--record"]) == 0
    assert {"messages.log", "share_over_time.png"} <= set(_names(out))
    capsys.readouterr()
    (out / "mine.txt").write_text("not fedemu's")
    assert main(first) == 0
    err = capsys.readouterr().err
    assert f"fedemu: note: removed from {out} what an earlier run wrote there and this run did not: messages.log, " \
        "share_over_time.png\n" in err
    assert _names(out) == ["balance.csv", "delay_cdf.png", "imbalance.png", "jobs.csv", "mine.txt", "summary.json",
                           "tasks.csv", "utilization.csv"]
    assert json.loads((out / "summary.json").read_text())["params"]["users"] == 0


def test_a_refused_run_leaves_an_earlier_runs_results_as_they_were(capsys, tmp_path):
    from fedemu.tools.cli import main

    out = tmp_path / "o"
    assert main(["run", "default", "--quiet", "--set", "jobs=10", "--record", "--out", str(out)]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    capsys.readouterr()
    assert main(["run", "default", "--quiet", "--set", "lms=-1", "--out", str(out)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_owned_removes_only_fedemus_files_this_run_did_not_write(tmp_path, capsys):
    for name in ("summary.json", "messages.log", "jobs.csv", "notes.md"):
        (tmp_path / name).write_text("earlier")
    (tmp_path / "tasks.csv").symlink_to(tmp_path / "notes.md")  # not a regular file: never touched
    with outdir.owned(str(tmp_path)):
        (tmp_path / "summary.json").unlink()
        (tmp_path / "summary.json").write_text("this run")
    assert _names(tmp_path) == ["notes.md", "summary.json", "tasks.csv"]
    assert capsys.readouterr().err.endswith("this run did not: jobs.csv, messages.log\n")
    with outdir.owned(str(tmp_path)):  # nothing written: nothing removed
        pass
    assert _names(tmp_path) == ["notes.md", "summary.json", "tasks.csv"]
