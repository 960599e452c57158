"""Metrics on a hand-built Recorder with exact expected numbers."""

import numpy as np
import pytest

from fedemu.fabric.errors import ConfigError
from fedemu.model import US_PER_S as S
from fedemu.model import Job, Recorder
from fedemu.tools.results import metrics


def hand_recorder() -> Recorder:
    """Two units; three finished jobs (delays 0.5 s, 1.5 s, 0 s) and one job that never starts.

    Busy units: [0,.5)=1 [.5,1)=2 [1,2)=1 [2,3)=2 [3,3.5)=1, so the area is 5 unit-s over 3.5 s.
    """
    rec = Recorder(total_units=2)
    rec.job_arrived(Job(0, 0, (1 * S, 2 * S)), short=True)
    rec.job_arrived(Job(1, 1 * S, (1 * S,)), short=False)
    rec.job_arrived(Job(2, 2 * S, (1 * S,)), short=True)
    rec.job_arrived(Job(3, 3 * S, (S // 2,)), short=True)
    rec.task_started(0, 0, 0, worker=0)
    rec.task_started(0, 1, S // 2, worker=1)
    rec.task_finished(0, 0, 1 * S)
    rec.task_started(2, 0, 2 * S, worker=0)
    rec.task_finished(0, 1, 5 * S // 2)
    rec.job_completed(0, 5 * S // 2)
    rec.task_dispatched(1, 0, 1 * S, 5 * S // 4)  # a launch that failed, then the one that ran: 1 s queued in all
    rec.task_dispatched(1, 0, 3 * S // 2, 9 * S // 4)  # (its failure came back 0.25 s after it left)
    rec.task_started(1, 0, 5 * S // 2, worker=1)
    rec.task_finished(2, 0, 3 * S)
    rec.job_completed(2, 3 * S)
    rec.task_finished(1, 0, 7 * S // 2)
    rec.job_completed(1, 7 * S // 2)
    return rec


def test_job_delays():
    rec = hand_recorder()
    assert metrics.job_delays_s(rec).tolist() == [0.5, 1.5, 0.0]
    assert metrics.job_delays_s(rec, "short").tolist() == [0.5, 0.0]
    assert metrics.job_delays_s(rec, "long").tolist() == [1.5]
    with pytest.raises(ConfigError, match=r"unknown job kind 'medium'; known: all, long, short"):
        metrics.job_delays_s(rec, "medium")


def test_delay_percentiles():
    stats = metrics.delay_stats(hand_recorder())
    a = stats["all"]
    assert a["count"] == 3
    assert a["p50"] == pytest.approx(0.5)
    assert a["p90"] == pytest.approx(1.3)
    assert a["p99"] == pytest.approx(1.48)
    assert a["p99.9"] == pytest.approx(1.498)
    assert a["max"] == 1.5 and a["mean"] == pytest.approx(2 / 3)
    assert stats["short"]["p50"] == pytest.approx(0.25) and stats["short"]["max"] == 0.5
    assert stats["long"] == {"count": 1, "p50": 1.5, "p90": 1.5, "p99": 1.5, "p99.9": 1.5, "max": 1.5, "mean": 1.5}


def test_summarize_empty_is_none():
    assert metrics.summarize([]) == {
        "count": 0, "p50": None, "p90": None, "p99": None, "p99.9": None, "max": None, "mean": None,
    }


def test_utilization_step_function_and_mean():
    rec = hand_recorder()
    times, busy = metrics.utilization_steps(rec)
    assert (times / S).tolist() == [0, 0.5, 1, 2, 2.5, 3, 3.5]
    assert busy.tolist() == [1, 2, 1, 2, 2, 1, 0]  # the two events at 2.5 s are merged
    assert metrics.time_window_us(rec) == (0, 7 * S // 2)
    assert metrics.mean_utilization(rec) == pytest.approx(5 / 7)


def test_utilization_series_per_bucket():
    rec = hand_recorder()
    t, u = metrics.utilization_series(rec)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert u.tolist() == pytest.approx([0.75, 0.5, 1.0, 0.5])
    t, u = metrics.utilization_series(rec, bucket_us=S // 2)
    assert u.tolist() == pytest.approx([0.5, 1.0, 0.5, 0.5, 1.0, 1.0, 0.5])
    x, p = metrics.cdf(u)
    assert x.tolist() == pytest.approx([0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0])
    assert p[-1] == 1.0 and p[0] == pytest.approx(1 / 7)
    with pytest.raises(ValueError, match="bucket_us must be > 0"):
        metrics.utilization_series(rec, bucket_us=0)


def test_allocation_components():
    comp = metrics.allocation_components(hand_recorder())
    assert comp["count"] == 4
    assert comp["allocation"] == pytest.approx(0.5)
    assert comp["framework_queueing"] == pytest.approx(0.25)  # job 1's task: 0.25 s + 0.75 s, over 4 tasks
    assert comp["communication"] == pytest.approx(0.25)  # task (0, 1): 0.5 s; job 1's: 0.25 s + 0.25 s
    assert comp["processing"] == 0 and comp["worker_queueing"] == 0  # no cost model: handlers take no time
    assert comp["parts_sum"] == pytest.approx(comp["allocation"])
    assert comp["allocation_p50"] == pytest.approx(0.25) and comp["allocation_p99"] == pytest.approx(1.47)


def test_tables_are_sorted_and_mark_missing_values():
    jobs = metrics.job_table(hand_recorder())
    assert jobs["job_id"].tolist() == [0, 1, 2, 3]
    assert jobs["completion_us"].tolist() == [5 * S // 2, 7 * S // 2, 3 * S, -1]
    assert jobs["short"].dtype == bool and jobs["short"].tolist() == [True, False, True, True]
    tasks = metrics.task_table(hand_recorder())
    assert list(zip(tasks["job_id"].tolist(), tasks["index"].tolist())) == [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0)]
    assert tasks["start_us"][-1] == -1 and tasks["worker"][-1] == -1


def test_empty_recorder():
    rec = Recorder(total_units=4)
    assert metrics.delay_stats(rec)["all"]["count"] == 0
    assert metrics.mean_utilization(rec) is None
    assert metrics.time_window_us(rec) is None
    assert all(a.size == 0 for a in metrics.utilization_series(rec))
    assert metrics.allocation_components(rec)["allocation"] is None
    assert metrics.cdf([])[0].size == 0
    assert np.array_equal(metrics.utilization_steps(rec)[0], np.empty(0))


def test_the_recorder_refuses_impossible_reports():
    rec = hand_recorder()
    with pytest.raises(AssertionError, match="finished twice"):
        rec.task_finished(0, 0, 5 * S)
    with pytest.raises(AssertionError, match="no execution running on worker 5"):
        rec.task_finished(0, 0, 5 * S, worker=5)
    with pytest.raises(AssertionError, match="completed twice"):
        rec.job_completed(0, 5 * S)


def test_executions_may_repeat_after_a_crash_and_are_counted():
    """A crash aborts an execution (its work is wasted, the task may start again); a second start while
    the first still runs is a duplicate execution, kept beside the task's own record."""
    rec = Recorder(total_units=2)
    rec.job_arrived(Job(0, 0, (S, S)))
    rec.task_dispatched(0, 0, 0, 0)
    rec.task_started(0, 0, 0, worker=3, units=2)
    rec.task_aborted(0, 0, 3, S // 2, units=2)
    assert rec.tasks[(0, 0)].start_us == -1 and rec.aborted == 1 and rec.wasted_us == S
    rec.task_dispatched(0, 0, S // 2, S)
    rec.task_started(0, 0, S, worker=3, units=2)
    rec.task_started(0, 1, S, worker=4)
    rec.task_started(0, 1, S + 5, worker=6)  # a retried launch that crossed a partition
    rec.task_finished(0, 1, 2 * S + 5, worker=6)
    rec.task_finished(0, 1, 2 * S, worker=4)
    rec.task_finished(0, 0, 2 * S, units=2, worker=3)
    t = rec.tasks[(0, 0)]
    assert (t.start_us, t.end_us, t.worker, t.attempts, t.queue_us) == (S, 2 * S, 3, 2, S // 2)
    assert rec.other_runs == [[0, 0, 3, 0, S // 2, 2], [0, 1, 6, S + 5, 2 * S + 5, 1]]
    assert rec.counters == {"duplicate_executions": 1}
    assert sum(rec.busy[1::2]) == 0  # (time, units) pairs, flat
