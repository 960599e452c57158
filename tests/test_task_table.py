"""The recorder's task records in columns (``model.TaskTable``) against a plain dict of records: the same
fields after any sequence of the recorder's task events, and the mapping's edges (unknown jobs, indices out
of range, a job added again)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.model import TASK_FIELDS, Job, Recorder, TaskTable

FRESH = dict(start_us=-1, end_us=-1, worker=-1, queue_us=0, attempts=0, processing_us=0, worker_queue_us=0, comm_us=0)


class Model:
    """The task events' effect on one dict per task, written from their docstrings (what the columns replace)."""

    def __init__(self, timed: bool):
        self.tasks: dict[tuple, dict] = {}
        self.timed = timed
        self.serving: list[dict] = []

    def arrive(self, job: Job) -> None:
        for i, d in enumerate(job.durations_us):
            self.tasks[(job.job_id, i)] = dict(job_id=job.job_id, index=i, arrival_us=job.arrival_us, duration_us=d,
                                               mark_us=job.arrival_us, **FRESH)

    def _pass_on(self, t: dict, since: int, start: int) -> None:
        if t["start_us"] == -1:
            t["comm_us"] += since - t["mark_us"]
            t["queue_us"] += start - since
            t["mark_us"] = start
            if self.timed:
                self.serving.append(t)

    def apply(self, op: tuple) -> None:
        kind, key, a, b = op
        t = self.tasks.get(key)
        if kind == "handled" and t is not None:
            self._pass_on(t, a, b)
        elif kind == "all" and key[0] in {k[0] for k in self.tasks}:
            for i in range(key[1]):
                if (key[0], i) in self.tasks:
                    self._pass_on(self.tasks[(key[0], i)], a, b)
        elif kind == "dispatched" and t is not None:
            self._pass_on(t, a, b)
            t["attempts"] += 1
        elif kind == "served":
            for t in self.serving if b >= 0 else ():
                t["processing_us"] += b - t["mark_us"]
                t["mark_us"] = b
            self.serving.clear()
        elif kind == "started" and t is not None and t["start_us"] == -1:
            t["comm_us"] += a - t["mark_us"]
            t["worker_queue_us"] += b - a
            t["mark_us"] = t["start_us"] = b
            t["worker"] = key[1] % 3
        elif kind == "finished" and t is not None and t["start_us"] != -1 and t["end_us"] == -1:
            t["end_us"] = b


def drive(rec: Recorder, op: tuple) -> None:
    """The same event through the recorder (events the model skips are not sent: they would raise)."""
    kind, key, a, b = op
    if kind == "handled":
        rec.task_handled(*key, a, b)
    elif kind == "all":
        rec.tasks_handled(*key, a, b)
    elif kind == "dispatched" and key in rec.tasks:
        rec.task_dispatched(*key, a, b)
    elif kind == "served":
        rec.served(None, 0, 0, b)
    elif kind == "started" and key in rec.tasks and rec.tasks[key].start_us == -1:
        rec.task_started(*key, b, key[1] % 3, arrived_us=a)
    elif kind == "finished" and key in rec.tasks and rec.tasks[key].start_us != -1 and rec.tasks[key].end_us == -1:
        rec.task_finished(*key, b)


jobs = st.lists(st.tuples(st.integers(0, 40), st.lists(st.integers(1, 10**9), min_size=1, max_size=5)),
                max_size=6, unique_by=lambda j: j[0])
ops = st.lists(st.tuples(st.sampled_from(["handled", "all", "dispatched", "served", "started", "finished"]),
                         st.tuples(st.integers(-1, 41), st.integers(-1, 6)),
                         st.integers(0, 10**9), st.integers(-1, 10**9)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(jobs, ops, st.booleans())
def test_the_columns_hold_what_a_dict_of_records_would(jobs, ops, timed):
    rec, model = Recorder(total_units=3, timed=timed), Model(timed)
    for n, (job_id, durations) in enumerate(jobs):
        job = Job(job_id, n * 1000, tuple(durations))
        rec.job_arrived(job)
        model.arrive(job)
    for op in ops:
        drive(rec, op)
        model.apply(op)
    assert list(rec.tasks) == list(model.tasks)  # the same keys, in arrival order
    assert len(rec.tasks) == len(model.tasks)
    for key, want in model.tasks.items():
        got = rec.tasks[key]
        assert {name: getattr(got, name) for name in TASK_FIELDS} == want
    cols = rec.tasks.columns()
    assert [tuple(int(cols[name][r]) for name in TASK_FIELDS) for r in range(len(rec.tasks))] == \
        [tuple(t[name] for name in TASK_FIELDS) for t in model.tasks.values()]


def test_the_mapping_knows_only_the_tasks_it_was_given():
    t = TaskTable()
    t.add_job(7, 100, (5, 6))
    t.add_job(3, 200, (9,))
    assert list(t) == [(7, 0), (7, 1), (3, 0)]
    assert [r.job_id for r in t.values()] == [7, 7, 3] and [k for k, _ in t.items()] == list(t)
    for missing in ((7, 2), (7, -1), (3, 1), (4, 0), (3, -1)):
        assert missing not in t and t.get(missing) is None and t.find(*missing) == -1
        with pytest.raises(KeyError):
            t[missing]
        with pytest.raises(KeyError):
            t.row(*missing)
    view = t[(7, 1)]
    view.end_us = 55  # a view writes its row
    assert t.end_us[1] == 55 and t[(7, 1)] == view and t[(7, 0)] != view
    assert view.allocation_us == -101 and "duration_us=6" in repr(view)


def test_a_job_added_again_starts_over_in_its_own_rows():
    t = TaskTable()
    t.add_job(1, 0, (5, 6))
    t.add_job(2, 0, (7,))
    t[(1, 0)].start_us = 3
    t.add_job(1, 50, (8, 9))
    assert list(t) == [(1, 0), (1, 1), (2, 0)]
    assert (t[(1, 0)].start_us, t[(1, 0)].arrival_us, t[(1, 1)].duration_us, t[(1, 1)].mark_us) == (-1, 50, 9, 50)
    with pytest.raises(ValueError, match="job 2 added again with 2 tasks, not 1"):
        t.add_job(2, 0, (1, 2))


def test_views_of_the_columns_are_the_columns_read_only_and_copies_are_the_same_values():
    t = TaskTable()
    t.add_job(4, 10, (5, 6, 7))
    views, copies = t.columns(copy=False), t.columns()
    assert {k: v.tolist() for k, v in views.items()} == {k: v.tolist() for k, v in copies.items()}
    assert not views["start_us"].flags.writeable and copies["start_us"].flags.writeable
    with pytest.raises(ValueError):
        views["end_us"][0] = 3  # the recorder's own data: not through a view
    with pytest.raises(BufferError):
        t.add_job(5, 20, (1,))  # a table with a live view cannot grow: views are for a finished run's results
    assert list(t) == [(4, 0), (4, 1), (4, 2)] and {len(getattr(t, name)) for name in TASK_FIELDS} == {3}  # nothing half-added
    del views
    t.add_job(5, 20, (1,))
    assert len(t) == 4 and TaskTable().columns(copy=False)["end_us"].size == 0


def test_a_job_that_cannot_be_added_leaves_no_rows_behind():
    t = TaskTable()
    t.add_job(1, 0, (5,))
    with pytest.raises(OverflowError):
        t.add_job(2, 0, (1, 2**63))  # a duration no 64-bit column holds
    assert list(t) == [(1, 0)] and {len(getattr(t, name)) for name in TASK_FIELDS} == {1} and (2, 0) not in t
