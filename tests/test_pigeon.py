"""Pigeon end to end and by parts: the task split, WFQ order at a master, reserved workers, the 4-worker
example of section 4 of the Pigeon paper (36 units vs 45 centralized), parameters and errors."""

from __future__ import annotations

import math

import pytest

from fedemu.actors.pigeon.distributor import split_evenly
from fedemu.actors.pigeon.plugin import fair_queue_weight, groups_of, reserved_count
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.rand import Stream
from fedemu.model import US_PER_S as US
from fedemu.model import Cluster, ClusterSpec, WorkerSpec
from fedemu.tools.run.runner import execute


def run(seed=1, **overrides):
    return execute("default", seed=seed, overrides=overrides)


def recorder_of(result, actor="dist-0"):
    return result.fabric.actor(result.fabric.addr(actor)).recorder


def write_trace(tmp_path, lines, name="jobs.tr"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# ---- the split (2.2) --------------------------------------------------------------------------
def test_split_hand_worked():
    s = Stream(1, "t")
    assert split_evenly(6, 2, s) == [0, 0, 0, 1, 1, 1]  # S = 3, r = 0: contiguous blocks in master order
    assert split_evenly(9, 3, s) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    seven = split_evenly(7, 3, s)  # S = 2, r = 1
    assert seven[:6] == [0, 0, 1, 1, 2, 2] and seven[6] in (0, 1, 2)


@pytest.mark.parametrize("tasks,masters", [(2, 5), (7, 3), (13, 4), (1, 1), (3, 3), (0, 2)])
def test_split_sends_floor_to_all_and_the_remainder_to_distinct_masters(tasks, masters):
    s = Stream(7, "split")
    per, rest = divmod(tasks, masters)
    seen_extra = [0] * masters
    for _ in range(300):
        where = split_evenly(tasks, masters, s)
        counts = [where.count(m) for m in range(masters)]
        assert sorted(counts) == sorted([per + 1] * rest + [per] * (masters - rest))
        for m, c in enumerate(counts):
            seen_extra[m] += c - per
    if rest:  # the remainder lands on every master eventually (uniform choice)
        assert all(x > 0 for x in seen_extra)


def test_split_end_to_end_tasks_per_group():
    r = run(jobs=60, fanout=7, lms=3, gms=1, workers_per_partition=20, load=0.2, constraints=False,
            scheduler="pigeon")
    rec = recorder_of(r)
    for job_id, job in rec.jobs.items():
        groups = [rec.tasks[(job_id, i)].worker // 20 for i in range(job.num_tasks)]
        assert sorted(groups.count(g) for g in range(3)) == [2, 2, 3]
    assert r.summary["messages_by_kind"]["pigeon.tasks"] == 60 * 3


def test_low_load_delay_is_the_four_hop_path():
    # submitter->distributor, distributor->master, master->worker, worker->distributor: 4 x 0.5 ms
    r = run(jobs=40, workload="syn_10", lms=4, gms=1, workers_per_partition=25, constraints=False,
            scheduler="pigeon", cost_model="zero")  # the message path alone: handlers take no time
    s = r.summary
    assert s["jobs_completed"] == 40
    assert s["delay_s"]["max"] == pytest.approx(0.002)
    # the paper's messages (2.2) and nothing else: a batch per master per job, a launch, a result and an
    # idle notice per task; the job's owner of record hears it is done. The run ends before the masters'
    # first periodic update of their second masters (master_sync_s)
    assert s["messages_by_kind"] == {"job": 40, "pigeon.tasks": 40 * 4, "pigeon.launch": 400, "worker.finished": 400,
                                     "pigeon.idle": 400, "submit.job_done": 40}


def test_a_second_master_is_updated_once_a_period_while_its_group_changes():
    """Pigeon (2019), "Master Failure Recovery": the master updates its second master periodically, with
    what changed; not once per task event, and not while nothing changes."""
    r = run(jobs=40, workload="syn_10", lms=4, gms=1, workers_per_partition=25, constraints=False,
            scheduler="pigeon", cost_model="zero", master_sync_s=5.0)
    kinds = r.summary["messages_by_kind"]
    end_s = r.fabric.now / US
    assert 4 * math.floor(end_s / 5.0) - 4 <= kinds["pigeon.sync"] <= 4 * math.ceil(end_s / 5.0)
    assert kinds["pigeon.sync"] < kinds["pigeon.launch"] / 10


# ---- the 4-worker example of section 4 ------------------------------------------------------------
EXAMPLE = ["0 6 8.666667 20 1 1 10 10 10",  # job A: six tasks, all arriving at time 0 (units = seconds)
           "0 1 2 2",  # job B
           "0 1 2 2"]  # job C
# Total JCT for each placement of B's and C's single task (group of B, group of C), worked by hand with
# the walk-through of section 4: A always ends at 20.
HAND_WORKED = {(0, 1): (20, 4, 12), (1, 0): (20, 12, 4), (0, 0): (20, 4, 6), (1, 1): (20, 12, 14)}
EXAMPLE_SET = {"workload": "trace", "latency_ms": 0, "constraints": False, "short_cutoff_s": 90.5811}


def jcts(result, actor):
    rec = recorder_of(result, actor)
    return tuple((rec.jobs[j].completion_us - rec.jobs[j].arrival_us) / US for j in range(3))


def test_section4_example_pigeon_36_units_vs_centralized_45(tmp_path):
    """Mapping: 2 groups (clusters) of 2 one-slot workers, one distributor, no reserved workers, zero
    latency, one time unit = 1 s. All three jobs are short (single job type, as in the example). A's six
    tasks split 3/3 in order; B's and C's single tasks go to random distinct-per-job masters, so seeds are
    scanned for each of the four placements; the paper's narrative is B -> group one, C -> group two."""
    trace = write_trace(tmp_path, EXAMPLE)
    seen = {}
    for seed in range(1, 80):
        r = run(seed=seed, trace=trace, scheduler="pigeon", lms=2, gms=1, workers_per_partition=2,
                reserved_fraction=0, distributors=1, cost_model="zero", **EXAMPLE_SET)
        rec = recorder_of(r)
        placement = (rec.tasks[(1, 0)].worker // 2, rec.tasks[(2, 0)].worker // 2)
        # A: tasks 0-2 (20, 1, 1) in group one, tasks 3-5 (10, 10, 10) in group two
        assert [rec.tasks[(0, i)].worker // 2 for i in range(6)] == [0, 0, 0, 1, 1, 1]
        seen.setdefault(placement, jcts(r, "dist-0"))
        if len(seen) == 4:
            break
    assert seen == HAND_WORKED
    assert sum(seen[(0, 1)]) == 36  # the paper's Pigeon total

    central = run(trace=trace, scheduler="centralized", lms=2, gms=1, workers_per_partition=2, cost_model="zero",
                  **EXAMPLE_SET)
    assert jcts(central, "gm-0") == (20, 12, 13)
    assert sum(jcts(central, "gm-0")) == 45  # the paper's centralized total: head-of-line blocking by A


# ---- WFQ at a master, end to end ---------------------------------------------------------------------
def start_order(result):
    rec = recorder_of(result)
    tasks = sorted(rec.tasks.values(), key=lambda t: (t.start_us, t.job_id, t.index))
    return " ".join(("S" if rec.jobs[t.job_id].short else "L") + str(t.index + 1) for t in tasks)


@pytest.mark.parametrize("fqw,expected", [
    # one worker; L1 starts at once, then the queues hold L2-L4 (low) and S1-S4 (high)
    (2, "L1 S1 S2 L2 S3 S4 L3 L4"),
    (1, "L1 S1 L2 S2 L3 S3 L4 S4"),
    ("inf", "L1 S1 S2 S3 S4 L2 L3 L4"),
])
def test_wfq_order_at_one_master(tmp_path, fqw, expected):
    trace = write_trace(tmp_path, ["0 4 10 10 10 10 10",  # long: mean 10 s > cutoff 5 s
                                   "0.001 4 1 1 1 1 1"])  # short
    r = run(workload="trace", trace=trace, scheduler="pigeon", lms=1, gms=1, workers_per_partition=1,
            reserved_fraction=0, constraints=False, short_cutoff_s=5, fqw=math.inf if fqw == "inf" else fqw)
    assert start_order(r) == expected
    c = r.summary["counters"]
    assert c["wfq_high"] == 4 and c["wfq_low"] == 4


def test_reserved_workers_serve_short_tasks_only(tmp_path):
    # 4 workers, 1 reserved: a long job of 8 tasks runs 3 at a time; a later short job runs at once.
    trace = write_trace(tmp_path, ["0 8 10 10 10 10 10 10 10 10 10", "1 1 1 1"])
    r = run(workload="trace", trace=trace, scheduler="pigeon", lms=1, gms=1, workers_per_partition=4,
            reserved_fraction=0.25, constraints=False, short_cutoff_s=5, cost_model="zero")
    rec = recorder_of(r)
    long_starts = sorted(rec.tasks[(0, i)].start_us for i in range(8))
    assert long_starts[:3] == [1500] * 3 and long_starts[3] > 10 * US  # reserved worker 3 stays out
    assert all(rec.tasks[(0, i)].worker != 3 for i in range(8))
    assert rec.tasks[(1, 0)].worker == 3
    assert r.summary["delay_short_s"]["max"] == pytest.approx(0.002)


def test_pigeon_ignores_constraints_and_counts_violations():
    r = run(jobs=150, scheduler="pigeon")
    s = r.summary
    assert s["jobs_completed"] + s["unschedulable"] == 150
    assert s["counters"].get("constraint_violations", 0) > 0
    assert run(jobs=150, scheduler="pigeon", constraints=False).summary["counters"].get(
        "constraint_violations", 0) == 0


def test_masters_regroup_workers():
    r = run(jobs=50, scheduler="pigeon", masters=6, lms=3, gms=2, workers_per_partition=5, constraints=False)
    names = r.fabric.names
    assert [n for n in names if n.startswith("master-")] == [f"master-{g}" for g in range(6)]
    assert r.summary["jobs_completed"] == 50


def test_groups_of():
    specs = tuple(ClusterSpec(c, "A", tuple(WorkerSpec(c * 4 + j, c) for j in range(4))) for c in range(3))
    cluster = Cluster(specs)
    assert [len(g) for g in groups_of(cluster, 0)] == [4, 4, 4]
    assert [[w.worker_id for w in g] for g in groups_of(cluster, 2)] == [list(range(6)), list(range(6, 12))]
    with pytest.raises(ConfigError, match="masters=5 does not divide the 12 workers"):
        groups_of(cluster, 5)


def test_parameter_helpers():
    assert fair_queue_weight(0) == 20 and fair_queue_weight(3) == 3 and fair_queue_weight(math.inf) == math.inf
    assert reserved_count(0.02, 100) == 2 and reserved_count(0.02, 75) == 2 and reserved_count(0.02, 2) == 0
    assert reserved_count(0.0, 10) == 0


@pytest.mark.parametrize("key,value,message", [
    ("masters", 7, "masters=7 does not divide the 300 workers into equal groups"),
    ("masters", -1, "parameter 'masters' is -1; expected a whole number >= 0"),
    ("distributors", 0, "parameter 'distributors' is 0; expected a whole number >= 1"),
    ("fqw", -2, "parameter 'fqw' is -2; expected an integer >= 1, inf, or 0 for the default"),
    ("fqw", 0.5, "parameter 'fqw' expects a whole number, got 0.5"),
    ("reserved_fraction", 1.0, "parameter 'reserved_fraction' is 1.0; expected a number in [0, 1)"),
    ("reserved_fraction", 0.995, "reserved_fraction=0.995 reserves 75 of 75 workers per group, leaving none"),
    ("short_cutoff_s", -1, "parameter 'short_cutoff_s' is -1; expected a finite number >= 0"),
])
def test_bad_parameters_are_clear_errors(key, value, message):
    with pytest.raises(ConfigError) as err:
        run(scheduler="pigeon", **{key: value})
    assert str(err.value).startswith(message)


def test_fqw_inf_from_the_command_line(tmp_path, capsys):
    from fedemu.tools.cli import main

    assert main(["run", "default", "--quiet", "--set", "scheduler=pigeon", "--set", "fqw=inf",
                 "--set", "jobs=20"]) == 0
    assert main(["run", "default", "--quiet", "--set", "scheduler=pigeon", "--set", "fqw=x"]) == 2
    assert "parameter 'fqw' expects a number, got 'x'" in capsys.readouterr().err
