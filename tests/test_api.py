"""The Python API (``import fedemu``, docs/api.md): the command line and the API make the same runs (one
implementation), the API writes nothing unless asked, holds its data read-only, and refuses bad input with
``fedemu.ConfigError`` carrying the command's line. Tiny runs (20 jobs): seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

import fedemu
from fedemu.tools.run import pool, progress
from fedemu.tools.cli import main

TINY = {"jobs": 20}


def _same_tables(a: fedemu.Result, b: fedemu.Result) -> None:
    for table in ("jobs", "tasks", "utilization"):
        left, right = getattr(a, table), getattr(b, table)
        assert list(left) == list(right), table
        for name in left:
            assert left[name].dtype == right[name].dtype, (table, name)
            np.testing.assert_array_equal(left[name], right[name], err_msg=f"{table}.{name}")


def _without_wall(summary) -> dict:
    return {k: v for k, v in summary.items() if k != "wall_s"}


def test_public_names_are_exported_lazily():
    """``import fedemu`` imports none of the project's modules (the command's start stays cheap); every
    public name resolves, and ``__all__`` lists exactly them."""
    code = "import sys, fedemu; print(sorted(m for m in sys.modules if m.startswith('fedemu.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert fedemu.__all__ == sorted(fedemu._PUBLIC)
    for name in fedemu.__all__:
        assert getattr(fedemu, name) is not None
    with pytest.raises(AttributeError):
        fedemu.nothing_here  # noqa: B018 - the attribute access is the test
    assert (Path(fedemu.__file__).parent / "py.typed").is_file()


def test_run_both_ways_agree(tmp_path, monkeypatch, capsys):
    """``fedemu run --out`` and ``fedemu.run`` give the same digest, summary and tables; the API's run wrote
    nothing (its working folder stays empty), and ``load`` reads the CLI's folder back exactly."""
    folder = tmp_path / "cli"
    assert main(["run", "default", "--seed", "2", "--set", "jobs=20", "--set", "scheduler=sparrow", "--out",
                 str(folder), "--quiet"]) == 0
    capsys.readouterr()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ours = fedemu.run("default", seed=2, scheduler="sparrow", **TINY)
    assert list(work.iterdir()) == []  # nothing written unless asked
    theirs = fedemu.load(folder)
    assert isinstance(theirs, fedemu.Result) and theirs.path == folder
    assert ours.digest == theirs.digest and ours.digest
    assert _without_wall(ours.summary) == _without_wall(theirs.summary)
    _same_tables(ours, theirs)
    assert ours.verdict == "ok" and ours.ok and set(ours.invariants.values()) == {"ok"}
    assert ours.jobs["job_id"].size == 20
    unfinished = np.isnan(ours.jobs["completion_s"])  # the NaN of a job that never completed, both ways
    assert int(unfinished.sum()) == 20 - ours.summary["jobs_completed"]


def test_result_is_read_only():
    result = fedemu.run("default", **TINY)
    with pytest.raises(ValueError):
        result.jobs["delay_s"][0] = 0.0
    with pytest.raises(TypeError):
        result.jobs["delay_s"] = np.zeros(3)
    with pytest.raises(TypeError):
        result.summary["jobs"] = 1
    with pytest.raises(TypeError):
        result.summary["delay_s"]["p50"] = 0.0
    x, p = result.delay_cdf()
    assert np.array_equal(x, np.sort(result.delays())) and p[-1] == 1.0
    assert x.size == result.summary["delay_s"]["count"]


def test_compare_both_ways_agree(tmp_path, capsys):
    """``fedemu compare --out`` and ``fedemu.compare`` (in memory) give the same rows, digests and pooled
    CDF data; ``load`` reads the CLI's folder back as a Comparison."""
    folder = tmp_path / "cmp"
    assert main(["compare", "default", "--schedulers", "megha,sparrow", "--seeds", "1,2", "--set", "jobs=20",
                 "--jobs", "1", "--out", str(folder)]) == 0
    printed = capsys.readouterr().out
    ours = fedemu.compare("default", schedulers=["megha", "sparrow"], seeds=[1, 2], processes=1, progress=False,
                          **TINY)
    theirs = fedemu.load(folder)
    assert isinstance(theirs, fedemu.Comparison) and len(ours) == len(theirs) == 4
    assert not ours.failures and ours.ok
    drop = ("wall_s", "run_dir")
    assert [{k: v for k, v in r.items() if k not in drop} for r in ours.rows] == \
        [{k: v for k, v in r.items() if k not in drop} for r in theirs.rows]
    assert [r["digest"] for r in ours.rows] == [r["digest"] for r in theirs.rows]
    for what in ("delay", "utilization"):
        a, b = ours.pooled(what), theirs.pooled(what)
        assert list(a) == list(b) == ["megha/random", "sparrow"]
        for label in a:
            np.testing.assert_array_equal(a[label], b[label])
    for name, result in ours.results.items():
        _same_tables(result, theirs[name])
    assert "scenarios.default: every run" in printed and "mean over seeds" in printed


def test_compare_resumes_a_folder(tmp_path):
    """Compare's resume rules: the same plan into the same folder reuses every finished run."""
    first = fedemu.compare("default", schedulers="sparrow", seeds=[1, 2], processes=1, out=tmp_path / "c",
                           progress=False, **TINY)
    again = fedemu.compare("default", schedulers="sparrow", seeds=[1, 2], processes=1, out=tmp_path / "c",
                           progress=False, **TINY)
    assert first.reused == 0 and again.reused == 2
    assert [r["digest"] for r in first.rows] == [r["digest"] for r in again.rows]


@pytest.mark.parametrize("argv, call", [
    (["--set", "bogus=1"], dict(bogus=1)),
    (["--set", "jobs=-3"], dict(jobs=-3)),
    (["--set", "heartbeat_s=often"], dict(heartbeat_s="often")),
    (["--set", "scheduler=nobody"], dict(scheduler="nobody")),
])
def test_bad_input_is_the_command_line(argv, call, capsys, tmp_path, monkeypatch):
    """A bad key or value: ``fedemu.ConfigError`` whose message is the line ``fedemu run`` prints."""
    monkeypatch.chdir(tmp_path)
    assert main(["run", "default", *argv]) == 2
    line = capsys.readouterr().err.strip()
    with pytest.raises(fedemu.ConfigError) as refused:
        fedemu.run("default", **call)
    assert line == f"fedemu: error: {refused.value}"
    assert list(tmp_path.iterdir()) == []


def test_bad_compare_input_is_the_command_line(capsys, tmp_path):
    assert main(["compare", "default", "--schedulers", "megha,nobody", "--out", str(tmp_path / "c")]) == 2
    line = capsys.readouterr().err.strip()
    with pytest.raises(fedemu.ConfigError) as refused:
        fedemu.compare("default", schedulers=["megha", "nobody"], progress=False)
    assert line == f"fedemu: error: {refused.value}"
    assert not (tmp_path / "c").exists()


def test_params_for_keys_the_api_takes_itself():
    """A key given both in params= and as a keyword is refused; params= alone works."""
    with pytest.raises(fedemu.ConfigError, match="given twice"):
        fedemu.run("default", params={"jobs": 20}, jobs=20)
    assert fedemu.run("default", params=TINY).summary["jobs"] == 20


def test_replay_counts_what_the_counters_count(tmp_path):
    """The journal read as data: the LMs' refusals sent (``megha.launch_failed``) are the run's invalid
    launches; ``verify`` re-runs and agrees."""
    journal = tmp_path / "run.fjl"
    result = fedemu.run("default", journal=journal, **TINY)
    assert result.journal == journal and list(tmp_path.iterdir()) == [journal]
    read = fedemu.replay(journal)
    invalid = result.counters.get("invalid_internal", 0) + result.counters.get("invalid_external", 0)
    assert read.count("megha.launch_failed") == invalid > 0
    assert read.total == len(read.records) and read.footer["digest"] == result.digest
    assert fedemu.load(journal).count("megha.launch_failed") == invalid
    checked = fedemu.replay(journal, verify=True)
    assert checked.verified is True and checked.report.startswith("identical")
    early = fedemu.replay(journal, t_to=0.01)
    assert early.records and all(r.time_s <= 0.01 for r in early.records)


def test_to_pandas_without_pandas_names_the_extra(monkeypatch):
    result = fedemu.run("default", **TINY)
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install 'fedemu\[pandas\]'"):
        result.to_pandas()


def test_to_pandas():
    pd = pytest.importorskip("pandas")
    result = fedemu.run("default", **TINY)
    frame = result.to_pandas("tasks")
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == list(result.tasks)
    comparison = fedemu.compare("default", schedulers="sparrow", processes=1, progress=False, **TINY)
    assert list(comparison.to_pandas()["digest"]) == [comparison.rows[0]["digest"]]


def test_plot_cdf_draws_onto_the_axis_given():
    pytest.importorskip("matplotlib")
    from fedemu.tools.results.results import agg_figure

    ax = agg_figure().add_subplot()
    a = fedemu.run("default", **TINY)
    b = fedemu.run("default", scheduler="sparrow", **TINY)
    assert a.plot_cdf(ax) is ax and b.plot_cdf(ax, label="sparrow") is ax
    lines = ax.get_lines()
    assert len(lines) == 2 and lines[0].get_linestyle() != lines[1].get_linestyle()
    assert [t.get_text().split(" (")[0] for t in ax.get_legend().get_texts()] == ["megha/random", "sparrow"]


def _square(spec: dict) -> dict:
    return {"name": str(spec["n"]), "value": spec["n"] ** 2}


def test_notebook_progress_bar(monkeypatch):
    """In a notebook the bar over runs is drawn into it (an HTML line updated in place); off with
    progress=False."""
    shown = []

    class Handle:
        def update(self, obj):
            shown.append(obj.data)

    def display(obj, display_id=False):
        shown.append(obj.data)
        return Handle()

    fake = types.ModuleType("IPython.display")
    fake.HTML = type("HTML", (), {"__init__": lambda self, data: setattr(self, "data", data)})
    fake.display = display
    monkeypatch.setitem(sys.modules, "IPython.display", fake)
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    assert pool.run_all([{"n": 2}, {"n": 3}], _square, progress=True) == [{"name": "2", "value": 4},
                                                                          {"name": "3", "value": 9}]
    assert len(shown) == 3 and "runs 0/2" in shown[0] and "runs 2/2" in shown[-1] and "(3)" in shown[-1]
    shown.clear()
    pool.run_all([{"n": 2}], _square, progress=False)
    assert shown == []


@pytest.mark.parametrize("shell, inside", [("ZMQInteractiveShell", True), ("TerminalInteractiveShell", False),
                                           (None, False)])
def test_in_notebook_asks_ipython(shell, inside, monkeypatch):
    """A Jupyter kernel's shell is a notebook; IPython in a terminal, or no shell, is not."""
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: None if shell is None else type(shell, (), {})()
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert progress.in_notebook() is inside


def test_load_refuses_what_the_cli_did_not_write(tmp_path):
    with pytest.raises(fedemu.ConfigError, match="no summary.json"):
        fedemu.load(tmp_path)
    with pytest.raises(fedemu.ConfigError, match="no such folder"):
        fedemu.load(tmp_path / "missing")
    assert os.listdir(tmp_path) == []


DASK_CASE = """
import distributed, fedemu
from numpy.testing import assert_array_equal
here = fedemu.compare("default", schedulers="sparrow", processes=1, progress=False, jobs=20)
with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                              dashboard_address=None) as cluster, distributed.Client(cluster) as client:
    there = fedemu.compare("default", schedulers="sparrow", cluster=client, progress=False, jobs=20)
assert [r["digest"] for r in here.rows] == [r["digest"] for r in there.rows] and len(here.rows) == 1
for name, result in here.results.items():
    for table in ("jobs", "tasks", "utilization"):
        mine, theirs = getattr(result, table), getattr(there[name], table)
        assert list(mine) == list(theirs)
        for column in mine:
            assert_array_equal(mine[column], theirs[column])  # NaN equal to NaN
print("same")
"""


def test_compare_on_a_dask_client_gives_the_same_runs():
    """``cluster=`` takes a ``distributed.Client`` as well as an address; the runs are the same. In a process
    of its own: a Dask LocalCluster leaves multiprocessing's resource tracker running until its process ends,
    which tests of child processes (test_bench_neighbour.py) would see."""
    pytest.importorskip("distributed")
    done = subprocess.run([sys.executable, "-c", DASK_CASE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "same", done.stderr[-2000:]


BROKEN = '''PARAMS = {"n": 1}


class Run:
    def finish(self, fabric, info):
        return {**info, "invariants": {"made_up": "job 1 ran twice (made up)"}}


def build(fabric, params):
    return Run()
'''


def test_a_broken_invariant_raises_run_violation_with_the_result(tmp_path, monkeypatch, capsys):
    """As ``fedemu run`` says ``violation: ...`` (exit 1), the API raises RunViolation with that message; its
    ``result`` holds the run's data, its verdict the violation; a folder asked for is written, and loads."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_text(BROKEN)
    assert main(["run", "broken.py"]) == 1
    line = capsys.readouterr().err.strip()
    with pytest.raises(fedemu.RunViolation) as broke:
        fedemu.run("broken.py", out="o")
    assert line == f"fedemu: violation: {broke.value}"
    result = broke.value.result
    assert not result.ok and result.verdict == "violation: job 1 ran twice (made up)"
    assert fedemu.load(tmp_path / "o").verdict == result.verdict
