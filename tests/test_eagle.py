"""Eagle's mechanisms in runs: Succinct State Sharing (rejections with the bitmap, probes sent again avoiding the
workers with long work, the fallback to the reserved partition), Sticky Batch Probing, and the switches that turn
each off."""

from __future__ import annotations

import pytest

from fedemu.actors.eagle.node import EagleNode
from fedemu.tools.run import runner

S = 1_000_000


def run(tmp_path, lines, workers, **over):
    trace = tmp_path / "t.tr"
    trace.write_text("".join(line + "\n" for line in lines))
    r = runner.execute("default", seed=1, overrides={
        "scheduler": "eagle", "jobs": len(lines), "workload": "trace", "trace": str(trace), "lms": 1, "gms": 1,
        "workers_per_partition": workers, "constraints": False, "cost_model": "zero", **over})
    assert set(r.summary["invariants"].values()) == {"ok"}
    return r


def tasks(r):
    rec = r.fabric.actor(r.fabric.addr("eagle-0")).recorder
    return rec.tasks


def test_short_probes_avoid_the_workers_with_long_work_and_fall_back_to_the_reserved_partition(tmp_path):
    """Four workers, the first reserved; a long job holds the three others: every probe of the short job that
    reaches one of them is rejected, sent again avoiding them (the bitmap has them all), then to the reserved
    worker: every short task runs there, none waits behind a long one."""
    r = run(tmp_path, ["0 3 100 100 100 100", "0.01 4 1 1 1 1 1"], 4, reserved_fraction=0.25)
    c = r.summary["counters"]
    assert c["rejections"] > 0 and c["probes_sent_again"] > 0
    assert {t.worker for (j, _), t in tasks(r).items() if j == 0} == {1, 2, 3}
    assert {t.worker for (j, _), t in tasks(r).items() if j == 1} == {0}
    assert max(t.end_us for (j, _), t in tasks(r).items() if j == 1) < 10 * S
    nodes = [r.fabric.actor(r.fabric.addr(f"w-{i}")) for i in range(1, 4)]
    assert all(n.bitmap_stamp >= 0 and len(n.bitmap) == 1 and n.bitmap[0] == 0b1110 for n in nodes)


@pytest.mark.parametrize("sss", [True, False])
def test_without_sss_short_tasks_wait_behind_long_ones(tmp_path, sss):
    """One probe a task, none sticky: without SSS a probe that lands behind a long task waits 100 s for it."""
    r = run(tmp_path, ["0 3 100 100 100 100", "0.01 4 1 1 1 1 1"], 4, reserved_fraction=0.25, sss=sss,
            sticky=False, min_probes=1, probe_ratio=1.0)
    assert ("rejections" in r.summary["counters"]) == sss
    assert (max(t.end_us for (j, _), t in tasks(r).items() if j == 1) > 100 * S) == (not sss)


@pytest.mark.parametrize("sticky", [True, False])
def test_a_reservation_that_got_a_task_asks_again_for_its_jobs_next(tmp_path, sticky):
    """One worker, one job of six tasks and min_probes 1: with Sticky Batch Probing its first reservation runs
    every task (the others are dropped unasked once the job has none left); without it each task needs a
    reservation of its own."""
    r = run(tmp_path, ["0 6 1 1 1 1 1 1 1"], 1, min_probes=1, probe_ratio=1.0, sticky=sticky, reserved_fraction=0.0)
    c = r.summary["counters"]
    by = r.summary["messages_by_kind"]
    if sticky:
        assert c["sticky_hits"] == 5 and by["hawk.get_task"] == 6 and c["reservations_dropped"] == 5
    else:
        assert "sticky_hits" not in c and by["hawk.get_task"] == 6


def test_the_shortest_remaining_job_goes_first_within_the_bound(tmp_path):
    """One worker busy for 10 s; then a job of five 2-s tasks, then a one-task job: in FIFO order the small job
    waits for the big one; in SRPT order it passes it (its delay to the big job's reservation, 1 s, is within
    5 times 2 s)."""
    lines = ["0 1 10 10", "0.01 5 2 2 2 2 2 2", "0.02 1 1 1"]
    ends = {}
    for order in ("srpt", "fifo"):
        r = run(tmp_path, lines, 1, min_probes=1, probe_ratio=1.0, queue_order=order, sticky=False,
                reserved_fraction=0.0, short_cutoff_s=100)
        ends[order] = max(t.end_us for (j, _), t in tasks(r).items() if j == 2)
    assert ends["srpt"] < 12 * S < ends["fifo"]


def test_eagle_nodes_do_not_steal():
    r = runner.execute("default", seed=1, overrides={"scheduler": "eagle", "jobs": 40, "short_cutoff_s": 0.9})
    assert "hawk.steal_ask" not in r.summary["messages_by_kind"]
    fabric = r.fabric
    assert all(n.steal_attempts == 0 for n in (fabric.actor(fabric.addr(x)) for x in fabric.names)
               if isinstance(n, EagleNode))
