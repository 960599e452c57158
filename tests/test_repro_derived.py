"""The derived figures of `fedemu reproduce` (tools/reproduce/repro_derived.py), on hand-made run files: exact values."""

from __future__ import annotations

import pytest

from fedemu.tools.reproduce.repro_derived import allocation_tail, derived, offered_load

HEADER = ("job_id,index,arrival_s,start_s,end_s,worker,allocation_s,framework_queueing_s,processing_s,"
          "worker_queueing_s,communication_s,attempts")
# five tasks that started (allocation = the sum of its parts) and one that never did
TASKS = [
    "0,0,0.0,0.002,1.0,0,0.002,0.0,0.0005,0.0,0.0015,1",
    "0,1,0.0,0.003,1.0,1,0.003,0.001,0.0005,0.0,0.0015,1",
    "0,2,0.0,0.004,1.0,2,0.004,0.002,0.0005,0.0,0.0015,1",
    "1,0,0.5,0.51,1.5,0,0.01,0.008,0.0005,0.0,0.0015,1",
    "1,1,0.5,1.7,2.7,1,1.2,1.198,0.0005,0.0,0.0015,3",
    "1,2,0.5,,,,,0.0,0.0,0.0,0.0,0",  # a task of a rejected job, as tasks.csv holds it
]


def write(path, rows):
    path.write_text("\n".join([HEADER] + rows) + "\n")
    return path


def test_the_allocation_tail_is_its_p90_p9999_and_maximum_over_started_tasks(tmp_path):
    out = allocation_tail(write(tmp_path / "tasks.csv", TASKS))
    # numpy's linear percentile over 0.002, 0.003, 0.004, 0.01, 1.2: rank 3.6 and 3.9996
    assert out["alloc_allocation_p90_s"] == pytest.approx(0.01 + 0.6 * 1.19, rel=1e-12)
    assert out["alloc_allocation_p9999_s"] == pytest.approx(0.01 + 0.9996 * 1.19, rel=1e-12)
    assert out["alloc_allocation_max_s"] == 1.2


def test_each_parts_median_is_a_share_of_the_medians_sum(tmp_path):
    out = allocation_tail(write(tmp_path / "tasks.csv", TASKS))
    # medians: framework queueing 0.002, processing 0.0005, worker queueing 0, communication 0.0015 (sum 0.004)
    assert out["alloc_fq_median_share"] == pytest.approx(0.5, rel=1e-12)
    assert out["alloc_proc_median_share"] == pytest.approx(0.125, rel=1e-12)
    assert out["alloc_wq_median_share"] == 0.0
    assert out["alloc_comm_median_share"] == pytest.approx(0.375, rel=1e-12)
    assert (out["alloc_framework_queueing_p50_s"], out["alloc_processing_p50_s"], out["alloc_worker_queueing_p50_s"],
            out["alloc_communication_p50_s"]) == (0.002, 0.0005, 0.0, 0.0015)


def test_no_started_task_or_no_file_gives_no_figures(tmp_path):
    assert set(allocation_tail(write(tmp_path / "tasks.csv", TASKS[-1:])).values()) == {None}
    assert set(allocation_tail(tmp_path / "absent.csv").values()) == {None}


def test_the_offered_loads_peak_is_the_busiest_second(tmp_path):
    # two slots; a task of 2 s from 0 and one of 1 s arriving at 0.5 (it ran from 1 to 2): demand counts it from
    # its arrival, so the seconds [0, 1) and [1, 2) each hold 1.5 slots of demand and [2, 3) none
    rows = ["0,0,0.0,0.0,2.0,0,0.0,0.0,0.0,0.0,0.0,1", "1,0,0.5,1.0,2.0,1,0.5,0.5,0.0,0.0,0.0,1"]
    out = offered_load(write(tmp_path / "tasks.csv", rows), 2)
    assert out["offered_load_max"] == pytest.approx(0.75, rel=1e-12)
    assert out["offered_load_mean"] == pytest.approx(0.5, rel=1e-12)


def test_derived_gathers_the_tail_and_the_worker_queueing_share(tmp_path):
    write(tmp_path / "tasks.csv", TASKS)
    summary = {"allocation_s": {"allocation": 0.4, "framework_queueing": 0.1, "processing": 0.0,
                                "worker_queueing": 0.2, "communication": 0.1}, "total_units": 3}
    out = derived(tmp_path, summary)
    assert out["alloc_allocation_max_s"] == 1.2
    assert out["alloc_wq_share"] == pytest.approx(0.5, rel=1e-12)
    assert out["alloc_fq_share"] == pytest.approx(0.25, rel=1e-12)


def test_the_allocation_parts_plot_and_table_leave_out_tasks_that_never_started(tmp_path):
    """A task of a rejected job has parts of 0 and no allocation time: counting it pulled the parts' means
    (the report's table) and medians (the plot's bars) down."""
    from fedemu.tools.reproduce.repro_plots import plot_allocation_parts

    write(tmp_path / "tasks.csv", TASKS)
    spec = {"name": "r", "scheduler": "megha", "policy": "random", "seed": 1, "out_dir": str(tmp_path)}
    parts = plot_allocation_parts(tmp_path / "parts.png", [spec], {"r"})["megha/random"]
    assert parts["mean"] == pytest.approx([1.209 / 5, 0.0005, 0.0, 0.0015], rel=1e-12)
    assert len(parts["median"]) == 4 and parts["median"][2] == 0.0
    assert (tmp_path / "parts.png").stat().st_size > 0


def test_the_allocation_plot_marks_the_papers_bound_and_sparrows_maximum():
    from fedemu.tools.reproduce.evaluate import load_claims
    from fedemu.tools.reproduce.repro_plots import paper_marks

    claims = load_claims("megha-2022")["claims"]
    assert paper_marks(claims, "vs-sparrow", prefix="alloc_allocation_") == [
        ("megha/random", 1.5, None, "paper's bound (megha-alloc-bound)"), ("sparrow", 100.0, 1.0, "paper: sparrow max")]
    assert paper_marks(claims, "vs-sparrow") == []  # no claim on its job delays


@pytest.mark.parametrize("newline_at_end", [True, False])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_task_columns_read_every_cell_as_float_and_an_empty_one_as_nan(tmp_path, newline_at_end, newline):
    """The fast reader against the csv module, on cells empty at a line's start, end and side by side."""
    import csv
    import math

    from hypothesis import given, settings, strategies as st

    from fedemu.tools.reproduce.repro_derived import TASK_COLUMNS, task_columns

    header = ["job_id", "attempts"] + list(TASK_COLUMNS[1:5])  # read columns first and last: empty cells at both ends
    cell = st.one_of(st.just(""), st.floats(allow_nan=False, allow_infinity=False).map(repr),
                     st.integers(-10**6, 10**6).map(str))

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.lists(cell, min_size=len(header), max_size=len(header)), max_size=6))
    def check(rows):
        path = tmp_path / "tasks.csv"
        text = newline.join([",".join(header)] + [",".join(r) for r in rows])
        path.write_bytes((text + newline if newline_at_end or not rows else text).encode())
        cols = task_columns(path)
        with open(path, newline="") as f:
            expected = list(csv.DictReader(f))
        assert set(cols) == set(TASK_COLUMNS[:5])
        for name in cols:
            want = [float(r[name]) if r[name] != "" else math.nan for r in expected]
            got = cols[name].tolist()
            assert len(got) == len(want)
            assert all(g == w or (math.isnan(g) and math.isnan(w)) for g, w in zip(got, want)), (name, got, want)

    check()
