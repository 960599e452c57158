"""The submitter, each job's owner of record, on connections: fault-free it sends each job once and hears
one ``JobDone`` per job, whatever the front end and however long the jobs wait (no periodic pings); a front
end's failure reaches it as a connection notice, and only then does it ask (``Ping``) or hand jobs again."""

from __future__ import annotations

import pytest

from fedemu.scenarios import fault_plan
from fedemu.tools.run.runner import execute

FRONT_ENDS = {"megha": "gm-0", "centralized": "gm-0", "pigeon": "dist-0", "pigeonc": "dist-0", "sparrow": "sparrow-0"}
# a backlog: long tasks at 150% load, so jobs wait far longer than resubmit_s (10 s) and a periodic ping
# of the front ends holding them would have been sent many times
BACKLOG = {"jobs": 60, "load": 1.5, "task_s": 60.0}


def run(scheduler, tables=(), **overrides):
    plan = fault_plan.from_tables(list(tables), "test plan") if tables else None
    r = execute("default", overrides={"scheduler": scheduler, **BACKLOG, **overrides}, faults=plan)
    s = r.summary
    assert set(s["invariants"].values()) == {"ok"}, s["invariants"]
    assert s["jobs_completed"] + s["unschedulable"] == s["jobs"]
    return r


@pytest.mark.parametrize("scheduler", sorted(FRONT_ENDS))
def test_fault_free_the_submitter_sends_each_job_once_and_hears_one_report_per_job(scheduler):
    """Before, Megha's GMs, centralized's GM and Pigeon's distributors were pinged every ``resubmit_s`` while
    they held jobs (about 2 pings a job on this backlog)."""
    r = run(scheduler)
    by = r.summary["messages_by_kind"]
    assert by["job"] == by["submit.job_done"] == BACKLOG["jobs"]
    assert not {"submit.ping", "submit.pong", "submit.resubmit"} & set(by)
    assert r.summary["virtual_end_s"] > 10 * 10  # the jobs did wait for many resubmit_s periods


@pytest.mark.parametrize("scheduler", ["megha", "centralized", "pigeon", "pigeonc"])
def test_a_cut_longer_than_the_connection_timeout_makes_the_submitter_ask_the_front_end(scheduler):
    """300 s between the submitter and a front end (the timeout is 60 s): jobs and reports on the cut
    connections are lost; at the break the submitter asks the front end what it holds (``Ping``), hands it
    again what it does not, and every job completes once."""
    front_end = FRONT_ENDS[scheduler]
    r = run(scheduler, [{"at_s": 0.5, "kind": "partition", "sides": [["submitter"], [front_end]], "for_s": 300.0}],
            jobs=100, task_s=1.0, load=0.5)
    by = r.summary["messages_by_kind"]
    assert by.get("submit.ping", 0) >= 1 and by.get("submit.pong", 0) >= 1
    assert r.summary["counters"].get("jobs_resubmitted", 0) > 0


@pytest.mark.parametrize("scheduler", ["megha", "centralized", "pigeon", "pigeonc"])
def test_a_front_end_crash_hands_its_jobs_again(scheduler):
    """The crash notice reaches the submitter at once: the crashed front end's open jobs go to the others
    (centralized: to its one GM once it is back, when the backoff ends, or when the GM announces itself)."""
    front_end = FRONT_ENDS[scheduler]
    r = run(scheduler, [{"at_s": 2.0, "kind": "crash", "target": front_end, "for_s": 5.0}], jobs=30, task_s=1.0,
            load=0.5)
    c = r.summary["counters"]
    assert c["front_ends_taken_down"] == 1 and c["jobs_resubmitted"] > 0


@pytest.mark.parametrize("scheduler", ["centralized", "sparrow"])
def test_with_every_front_end_down_the_submitter_asks_whether_they_are_up_and_hands_each_job_out_once(scheduler):
    """Its only front end down for 20 minutes: the submitter pings it when each backoff ends (refused: a
    notice, the backoff doubling to a minute) instead of handing out every job again each time (which cost
    a refused message and a notice per job per minute), and hands the jobs out once it answers (or, a GM,
    announces its restart)."""
    front_end = FRONT_ENDS[scheduler]
    one = {"schedulers": 1} if scheduler == "sparrow" else {}
    r = run(scheduler, [{"at_s": 0.5, "kind": "crash", "target": front_end, "for_s": 1200.0}], jobs=30, task_s=1.0,
            load=0.5, **one)
    by, c = r.summary["messages_by_kind"], r.summary["counters"]
    assert 0 < c["jobs_resubmitted"] <= 30
    assert by.get("submit.ping", 0) <= 30  # one a minute at most, after the first few backoffs
    assert r.summary["virtual_end_s"] < 1200.5 + 60 + 60  # handed out within a minute of the restart
