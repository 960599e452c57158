"""Sparrow end to end: probe placement, the late-binding round trip, FIFO probe queues, cancels,
constraint-respecting placement, capacity vectors and parameter errors."""

from __future__ import annotations

import pytest

from fedemu.actors.sparrow.scheduler import probe_targets
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.rand import Stream
from fedemu.tools.run.runner import execute
from scheduler_helpers import rebuilt


def run(seed=1, **overrides):
    return execute("default", seed=seed, overrides={"scheduler": "sparrow", **overrides})


def recorder_of(result):
    return result.fabric.actor(result.fabric.addr("sparrow-0")).recorder


def test_probe_targets_distinct_or_evenly_spread():
    s = Stream(2, "t")
    for pool, count in [(1000, 20), (10, 8), (10, 10), (5, 12), (1, 4), (3, 3)]:
        for _ in range(50):
            got = probe_targets(pool, count, s)
            assert len(got) == count and all(0 <= g < pool for g in got)
            per = [got.count(p) for p in range(pool)]
            assert max(per) - min(per) <= 1 if count >= pool else max(per) == 1


def test_low_load_delay_is_probe_request_assign_path():
    # submit->sched, probe, get-task, assign, finished: 5 hops of 0.5 ms
    r = run(jobs=30, workload="syn_10", lms=4, gms=1, workers_per_partition=25, constraints=False,
            cost_model="zero")  # the message path alone: handlers take no time
    s = r.summary
    assert s["jobs_completed"] == 30
    assert s["delay_s"]["max"] == pytest.approx(0.0025)
    kinds = s["messages_by_kind"]
    assert kinds["sparrow.probe"] == 600 and s["counters"]["probes"] == 600  # d * F = 2 * 10 per job
    assert kinds["sparrow.get_task"] == 600  # every probe comes back once
    assert kinds["sparrow.assign"] == 300 and kinds["sparrow.cancel"] == 300 == s["counters"]["cancels"]


def test_fifo_probe_queue_late_binding_and_cancel(tmp_path):
    # One worker: A's two probes queue before B's. A's first request binds A's task; its second is
    # answered with a cancel only after A's task ends; then B's first probe binds B's task. B's task
    # waits 10 s in the queue, and is never probed for again (Sparrow re-probes only after a fault).
    trace = tmp_path / "t.tr"
    trace.write_text("0 1 10 10\n0.001 1 1 1\n")
    r = run(workload="trace", trace=str(trace), lms=1, gms=1, workers_per_partition=1, constraints=False,
            cost_model="zero")  # the probe queue alone
    rec = recorder_of(r)
    a, b = rec.tasks[(0, 0)], rec.tasks[(1, 0)]
    assert a.start_us == 2000  # submit, probe, get-task, assign
    assert b.start_us == a.end_us + 2000  # get-task + cancel, then get-task + assign
    assert r.summary["counters"] == {"cancels": 2, "probes": 4}
    assert r.summary["messages_by_kind"] == {"job": 2, "sparrow.probe": 4, "sparrow.get_task": 4,
                                             "sparrow.assign": 2, "sparrow.cancel": 2, "worker.finished": 2,
                                             "submit.job_done": 2}


def test_placement_respects_constraints():
    overrides = {"scheduler": "sparrow", "jobs": 200, "load": 0.9}
    r = execute("default", seed=2, overrides=overrides)
    s = r.summary
    assert s["jobs_completed"] + s["unschedulable"] == 200
    cluster, jobs = rebuilt(overrides, 2)
    provides = {w.worker_id: set(w.constraints) for w in cluster.workers()}
    rec = recorder_of(r)
    for (job_id, index), task in rec.tasks.items():
        if task.worker >= 0:
            assert set(jobs[job_id].constraints[index]) <= provides[task.worker]


def test_capacity_vectors_and_several_schedulers():
    r = run(capacity="4,16", demand="1,3", jobs=120, load=0.9, lms=2, gms=2, workers_per_partition=5,
            schedulers=4)
    s = r.summary
    assert s["jobs_completed"] + s["unschedulable"] == 120
    for name in r.fabric.names:
        if name.startswith("w-"):
            node = r.fabric.actor(r.fabric.addr(name)).statistics()
            assert node.free == (4, 16) and node.queued_probes == 0 and node.outstanding == 0


@pytest.mark.parametrize("key,value,message", [
    ("probe_ratio", 0, "parameter 'probe_ratio' is 0; expected a finite number >= 1"),
    ("schedulers", 0, "parameter 'schedulers' is 0; expected a whole number >= 1"),
])
def test_bad_parameters(key, value, message):
    with pytest.raises(ConfigError) as err:
        run(**{key: value})
    assert str(err.value) == message


@pytest.mark.parametrize("key", ["probe_timeout_s", "result_grace_s", "request_retries"])
def test_the_keys_of_the_old_timeouts_are_retired_with_a_reason(key):
    with pytest.raises(ConfigError, match=rf"^parameter '{key}': {key} is retired: Sparrow no longer .* only when "
                       r"a connection breaks \(docs/connections.md\)$"):
        run(**{key: 1})
