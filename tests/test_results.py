"""Result files (summary.json, CSVs, plot) and crash-safe atomic writes."""

import csv
import json
import os

import numpy as np
import pytest

from fedemu.model import US_PER_S as S
from fedemu.model import Job, Recorder
from fedemu.tools.run.atomic import atomic_write, write_bytes, write_json, write_text
from fedemu.tools.results.results import JOBS_HEADER, TASKS_HEADER, plot_cdfs, write_results
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def small_recorder() -> Recorder:
    """One unit; job 0 (one 1 s task) runs 0.25-1.25 s; job 1 (long) never starts."""
    rec = Recorder(total_units=1)
    rec.job_arrived(Job(0, 0, (S,)), short=True)
    rec.job_arrived(Job(1, S, (2 * S,)), short=False)
    rec.task_dispatched(0, 0, 0, S // 10)
    rec.task_started(0, 0, S // 4, worker=7)
    rec.task_finished(0, 0, 5 * S // 4)
    rec.job_completed(0, 5 * S // 4)
    rec.count("probes", 3)
    return rec


def leftovers(path):
    return [p for p in os.listdir(path) if p.endswith(".tmp")]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def test_write_results_files(tmp_path):
    rec = small_recorder()
    extra = {"scheduler": "megha", "policy": "random", "seed": np.int64(4), "counters": dict(rec.counters)}
    summary = write_results(tmp_path / "run", recorder=rec, summary_extra=extra)
    out = tmp_path / "run"
    assert sorted(os.listdir(out)) == ["balance.csv", "delay_cdf.png", "imbalance.png", "jobs.csv", "summary.json",
                                       "tasks.csv", "utilization.csv"]
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk == summary
    assert list(on_disk)[:4] == ["scheduler", "policy", "seed", "counters"]
    assert on_disk["seed"] == 4 and on_disk["counters"] == {"probes": 3}
    assert on_disk["jobs"] == 2 and on_disk["jobs_completed"] == 1
    assert on_disk["tasks"] == 2 and on_disk["tasks_completed"] == 1
    assert on_disk["delay_s"]["p99"] == pytest.approx(0.25)
    assert on_disk["delay_long_s"]["count"] == 0 and on_disk["delay_long_s"]["p50"] is None
    assert on_disk["utilization_mean"] == pytest.approx(0.8)  # busy 1 s of [0, 1.25]
    assert on_disk["window_s"] == [0.0, 1.25]

    jobs = read_csv(out / "jobs.csv")
    assert tuple(jobs[0]) == JOBS_HEADER
    assert jobs[1] == ["0", "0.0", "1", "1.0", "1.25", "1.25", "0.25", "1"]
    assert jobs[2] == ["1", "1.0", "1", "2.0", "", "", "", "0"]
    tasks = read_csv(out / "tasks.csv")
    assert tuple(tasks[0]) == TASKS_HEADER
    assert tasks[1] == ["0", "0", "0.0", "0.25", "1.25", "7", "0.25", "0.1", "0.0", "0.0", "0.15", "1"]
    assert tasks[2] == ["1", "0", "1.0", "", "", "", "", "0.0", "0.0", "0.0", "0.0", "0"]  # parts so far
    util = read_csv(out / "utilization.csv")
    assert util[0] == ["time_s", "utilization"]
    assert [float(u) for _, u in util[1:]] == pytest.approx([0.75, 1.0])
    assert (out / "delay_cdf.png").read_bytes()[:8] == PNG_MAGIC
    assert (out / "imbalance.png").read_bytes()[:8] == PNG_MAGIC
    assert leftovers(out) == []


def test_write_results_without_csv_and_key_clash(tmp_path):
    write_results(tmp_path, recorder=small_recorder(), summary_extra={}, record_csv=False, plot=False)
    assert os.listdir(tmp_path) == ["summary.json"]
    with pytest.raises(ValueError, match=r"\['jobs'\] clash"):
        write_results(tmp_path, recorder=small_recorder(), summary_extra={"jobs": 1})


def test_plot_cdfs_overlay_with_nonpositive_and_empty_series(tmp_path):
    path = tmp_path / "cdf.png"
    plot_cdfs(path, {"megha": [0.0, -1.0, 0.5, 10.0], "pigeon": np.linspace(0, 100, 20_000), "none": []}, "delay (s)")
    assert path.read_bytes()[:8] == PNG_MAGIC
    plot_cdfs(tmp_path / "util.png", {"megha": [0.2, 0.9]}, "utilization", log=False)
    plot_cdfs(tmp_path / "empty.png", {}, "delay (s)")
    assert leftovers(tmp_path) == []


def test_log_axis_labels_are_plain_text_with_superscripts():
    """The CDF's log axis labels the ticks matplotlib's own formatter labels, without mathtext."""
    from fedemu.tools.results.results import agg_figure, draw_cdfs, plain_power

    assert plain_power(r"$\mathdefault{10^{-3}}$") == "10⁻³"
    assert plain_power(r"$\mathdefault{10^{12}}$") == "10¹²"
    assert plain_power(r"$\mathdefault{2\times10^{0}}$") == "2×10⁰"
    for other in (r"$\mathdefault{0}$", "0.5", ""):
        assert plain_power(other) == other
    for values, expected in (([1e-3, 0.5, 40.0], {"10⁻³", "10⁻¹", "10¹"}),
                             ([2.0, 2.5, 3.0], {"2×10⁰", "3×10⁰"})):
        fig = agg_figure()
        ax = fig.add_subplot()
        draw_cdfs(ax, {"a": values}, "delay (s)")
        fig.canvas.draw()
        labels = {t.get_text() for t in ax.get_xticklabels(minor=False) + ax.get_xticklabels(minor=True)} - {""}
        assert expected <= labels and not any("$" in text for text in labels)


def test_atomic_write_keeps_old_file_when_body_raises(tmp_path):
    path = tmp_path / "f.txt"
    write_text(path, "old\n")
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_write(path) as f:
            f.write("half")
            raise RuntimeError("boom")
    assert path.read_text() == "old\n"
    assert leftovers(tmp_path) == []
    with pytest.raises(ValueError):
        write_json(path, {"x": float("nan")})
    assert path.read_text() == "old\n"
    assert leftovers(tmp_path) == []


def test_atomic_write_helpers(tmp_path):
    write_bytes(tmp_path / "b", b"\x00\x01")
    assert (tmp_path / "b").read_bytes() == b"\x00\x01"
    write_json(tmp_path / "j.json", {"b": 1, "a": [1, 2]})
    assert (tmp_path / "j.json").read_text().endswith("}\n")
    assert json.loads((tmp_path / "j.json").read_text()) == {"b": 1, "a": [1, 2]}
    with atomic_write(tmp_path / "t.txt") as f:
        f.write("new")
    assert (tmp_path / "t.txt").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["b", "j.json", "t.txt"]
    with pytest.raises(ValueError, match="mode must be"):
        with atomic_write(tmp_path / "x", "a"):
            pass
