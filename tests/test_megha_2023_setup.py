"""The 2023 paper's set-up as its authors' simulator has it (constraint_table=megha-2023,
shared/papers/megha-2023-setup.md): machines synthesised from the per-constraint fractions with the run's
seed, tasks drawn by type, cluster and constraint (1.854 constraints a task, about 3e-5 infeasible), and
what happens to a task no machine can run (infeasible=drop-task: dropped and counted; reject-job: the job)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.rand import Stream
from fedemu.model import Job, Recorder
from fedemu.scenarios import federation
from fedemu.scenarios.constraints import TABLES, ConstraintTable, assign_task_constraints, build_cluster
from fedemu.scenarios.synthetic import syn_jobs
from fedemu.tools.run.runner import execute

AUTHORS = ConstraintTable.load("megha-2023")
SETUP = json.loads(TABLES["megha-2023"].read_text())
# the setup file's figures: machine fractions and the derived P(task requests c_j)
FRACTIONS = (.3761, .6570, .1556, .3766, .6828, .1111, .2839, .1547, .7028, .7326, .4869, .4703, .3169, .0799, .6927,
             .1512, .5628, .2764, .6677, .7004, 1.0)
MARGINALS = (.0714, .0624, .0624, .0892, .2050, .1783, .2675, .0088, .0267, .0088, .0357, .0267, .0178, .0088, .0357,
             .0178, .0803, .0714, .0980, .2229, .2586)


def _machines(seed: int):
    """The authors' 10,000 machines as `reproduce megha-2023` builds them: 25 clusters of 400 (5 x 5 x 400)."""
    return build_cluster(clusters=25, workers_per_cluster=400, table=AUTHORS, stream=Stream(seed, "cluster"))


def test_the_table_carries_the_setup_figures():
    assert AUTHORS.profiles == ("DC",) and AUTHORS.fractions("DC") == FRACTIONS
    assert AUTHORS.task_model is not None and AUTHORS.task_model.types == 4
    assert np.allclose(AUTHORS.task_model.marginals(), MARGINALS, atol=1e-4)
    assert AUTHORS.task_probability == MARGINALS
    assert abs(AUTHORS.constrained_share - 0.857) < 0.001  # 85.7% of tasks request at least one constraint
    assert "b503dbc" in AUTHORS.description


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_synthesised_machines_match_the_fractions(seed):
    """Each machine draws each constraint with its fraction: over 10,000 machines every fraction is within
    4.5 binomial standard deviations of the table's, c20 is on every machine, and pairs are independent
    (correlations at noise level, as in the authors' file: largest 0.043)."""
    cluster = _machines(seed)
    bits = np.array([[c in w.constraints for c in range(21)] for w in cluster.workers()], dtype=float)
    n = len(bits)
    f = np.array(FRACTIONS)
    sd = np.sqrt(f * (1 - f) / n)
    assert np.all(np.abs(bits.mean(axis=0) - f) <= 4.5 * sd + 1e-12)
    assert bits[:, 20].all()
    corr = np.corrcoef(bits[:, :20].T)
    assert np.abs(corr[np.triu_indices(20, 1)]).max() < 0.06
    assert 9.3 < bits.sum(axis=1).mean() < 10.0  # the authors' machines: 9.64 constraints on average
    first, last = bits[:400].mean(axis=0), bits[-400:].mean(axis=0)  # every LM alike (no profiles)
    assert np.all(np.abs(first - last) <= 5 * np.sqrt(2 * f * (1 - f) / 400) + 1e-12)


def test_a_seed_gives_other_machines_and_the_same_seed_the_same():
    assert _machines(1) == _machines(1) and _machines(1) != _machines(2)


def test_the_task_draw_has_the_setup_mean_and_marginals():
    """200,000 tasks: 1.854 constraints a task, 85.7% with at least one, each constraint at its marginal."""
    jobs = list(assign_task_constraints(syn_jobs(1000, jobs=200, task_s=1.0), AUTHORS, Stream(7, "task-constraints")))
    per = [c for j in jobs for c in j.constraints]
    counts = np.array([len(c) for c in per])
    assert abs(counts.mean() - 1.854) < 0.01
    assert abs((counts > 0).mean() - 0.857) < 0.003
    asked = np.zeros(21)
    for c in per:
        asked[list(c)] += 1
    sd = np.sqrt(np.array(MARGINALS) * (1 - np.array(MARGINALS)) / len(per))
    assert np.all(np.abs(asked / len(per) - MARGINALS) <= 5 * sd + 2e-4)
    again = list(assign_task_constraints(syn_jobs(1000, jobs=200, task_s=1.0), AUTHORS, Stream(7, "task-constraints")))
    assert again == jobs


def _infeasible_share(cluster) -> float:
    """P(a drawn task can run on no machine), exactly: over all 2^21 constraint sets, the task model's
    probability of each set that no machine's set contains (down-closure of the machines' sets)."""
    size = 1 << 21
    feasible = np.zeros(size, dtype=bool)
    feasible[[sum(1 << c for c in w.constraints) for w in cluster.workers()]] = True
    index = np.arange(size)
    for j in range(21):
        low = index[(index >> j & 1) == 0]
        feasible[low] |= feasible[low | 1 << j]
    m = AUTHORS.task_model
    w = np.array(m.weights).T
    share = (w / w.sum(axis=1, keepdims=True)).mean(axis=0)
    total = 0.0
    for k, p in enumerate(np.array(m.percent) / 100):
        prob = np.ones(size)
        for j in range(21):
            prob *= np.where(index >> j & 1, p[j], 1 - p[j])
        total += share[k] * prob[~feasible].sum()
    return total


def test_about_three_in_a_hundred_thousand_tasks_can_run_nowhere():
    share = _infeasible_share(_machines(2))
    assert 1e-5 < share < 1e-4  # the setup file: about 3e-5 (seed 2: 2.9e-5)


def test_drop_infeasible_removes_only_the_tasks_no_machine_can_run():
    feasible = lambda c, d: 13 not in c  # noqa: E731  (no machine has constraint 13)
    jobs = [Job(0, 0, (1, 2, 3), constraints=((), (13,), (4,))), Job(1, 5, (7,), constraints=((13,),)),
            Job(2, 9, (4, 5), constraints=((1,), (2,)))]
    heard = []
    out = list(federation.drop_infeasible(iter(jobs), feasible, lambda job, idx: heard.append((job.job_id, idx))))
    assert out[0] == Job(0, 0, (1, 3), constraints=((), (4,))) and out[0].ideal_jrt_us == 3
    assert out[1] == jobs[1] and out[2] == jobs[2]  # none left to run: passed whole, the front end rejects it
    assert heard == [(0, (1,))]


def _syn_run(infeasible: str, seed: int = 4):
    return execute("default", seed=seed, overrides={
        "scheduler": "pigeonc", "constraint_table": "megha-2023", "infeasible": infeasible, "workload": "syn_10",
        "jobs": 60, "gms": 1, "lms": 2, "workers_per_partition": 100, "masters": 2, "cost_model": "zero",
        "constraint_scarcity": 3.0}).summary


def test_dropped_tasks_are_counted_and_their_jobs_complete():
    """With machines made scarce, some tasks can run nowhere: drop-task runs their jobs without them and
    counts them; reject-job rejects those jobs whole; the tasks that ran are the same in both."""
    dropped, rejected = _syn_run("drop-task"), _syn_run("reject-job")
    assert dropped["tasks_dropped"] > 0 and rejected["unschedulable"] > 0
    # a job with an infeasible task is rejected whole by reject-job; drop-task runs it without that task
    # unless none of its tasks can run
    assert dropped["jobs_with_dropped_tasks"] + dropped["unschedulable"] == rejected["unschedulable"]
    assert dropped["counters"]["tasks_dropped"] == dropped["tasks_dropped"]
    assert dropped["jobs_completed"] + dropped["unschedulable"] == dropped["jobs"] == 60
    assert dropped["tasks_completed"] == 60 * 10 - dropped["tasks_dropped"] - 10 * dropped["unschedulable"]
    assert rejected["tasks_dropped"] == 0 and rejected["jobs_completed"] == 60 - rejected["unschedulable"]
    assert rejected["tasks_completed"] == 10 * rejected["jobs_completed"]
    assert all(v == "ok" for v in dropped["invariants"].values())


def test_an_unknown_table_or_infeasible_choice_is_one_line():
    with pytest.raises(ConfigError, match="infeasible"):
        execute("default", overrides={"infeasible": "skip"})
    with pytest.raises(ConfigError, match="no-such-table"):
        execute("default", overrides={"constraint_table": "no-such-table"})


def test_the_recorder_keeps_each_jobs_dropped_tasks():
    rec = Recorder()
    rec.tasks_dropped(Job(3, 0, (1,)), (0, 2))
    assert rec.dropped == [(3, (0, 2))] and rec.counters == {"tasks_dropped": 2}
