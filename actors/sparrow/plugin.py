"""Sparrow as a plug-in: ``schedulers`` distributed schedulers and one probe-queue node per machine.

Every scheduler sees every machine (Sparrow has no groups); the cluster's grouping only fixes worker ids.
Actors, in this order: ``sparrow-<i>``, then ``w-<worker id>`` in cluster order. Sparrow places tasks by
late binding, so the worker-choice ``policy`` does not apply to it.

Faults: lost, duplicated or delayed messages, partitions and node crashes (with or without restart) are
recovered by timeouts at the schedulers and nodes (``scheduler``, ``node``); a fault-free
run pays one ``ResultAck`` per task and a few timer events per actor.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.faults import FAULT_KINDS
from fedemu.model import finite_at_least, param, seconds_between, seconds_to_us, typed, whole_at_least
from fedemu.policies.partition_view import PartitionView

from ..plugin import FRONT_END_COUNTERS, Context, Histogram, Role, Scheduler, Size
from .events import EVENTS
from .node import SparrowNode, node_books_balance, nodes_not_stuck
from .scheduler import SparrowScheduler

_SECONDS = seconds_between(0.001, 3600)


@attrs.frozen
class SparrowParams:
    """Sparrow's keys: its schedulers and probe ratio, then the timeouts of its recovery (the paper gives none:
    the defaults are ours)."""

    schedulers: int = param(3, "Sparrow schedulers (front ends jobs are submitted to)", whole_at_least(1))
    probe_ratio: float = param(2.0, "probes per task (d in the Sparrow paper)", finite_at_least(1))
    probe_timeout_s: float = param(10.0, "seconds after a job's last probes after which its scheduler probes again "
                                   "for its tasks still unbound (a lost probe or request, a failed node); doubles per "
                                   "round", _SECONDS)
    result_grace_s: float = param(1.0, "seconds past a task's duration before its scheduler asks the node for the "
                                  "result, and then waits for an answer before placing the task again", _SECONDS)
    request_timeout_s: float = param(1.0, "seconds before a node asks again for an unanswered request, and between "
                                     "its resends of an unacknowledged result", _SECONDS)
    resubmit_s: float = param(10.0, "the submitter pings each scheduler holding open jobs this often, resubmitting "
                              "the jobs it does not hold; 3 missed pings take the scheduler for down", _SECONDS)
    request_retries: int = param(3, "times a node asks again before it gives a request up and frees what it held "
                                 "for it", {"ok": lambda v: isinstance(v, int) and not isinstance(v, bool) and
                                            0 <= v <= 100, "expected": "a whole number from 0 to 100"})


COUNTERS = FRONT_END_COUNTERS + (
    ("probes", "probes the schedulers sent"),
    ("cancels", "node requests answered with a cancel (the probe's group was already placed)"),
    ("probes_resent", "probes sent again: a job's probe timeout for its unbound tasks, or a relaunched task"),
    ("tasks_relaunched", "bound tasks placed again: their node did not answer, knew nothing of them or refused"),
    ("results_queried", "overdue results a scheduler asked a node about"),
    ("answers_resent", "Assigns a scheduler sent again: the node, asked about the result, was still asking"),
    ("results_resent", "results a node sent again (unacknowledged, or asked for)"),
    ("requests_retried", "requests a node sent again (no answer within request_timeout_s)"),
    ("requests_repeated", "requests a scheduler got again and answered as the first time"),
    ("reservations_dropped", "requests a node gave up after its retries, freeing what it held"),
    ("late_answers_run", "answers to a request given up on that a node ran anyway (they fit)"),
    ("late_answers_rejected", "answers to a request given up on that a node refused (no room)"),
    ("duplicate_answers_ignored", "answers a node got again for a request already answered"),
    ("duplicate_launches_suppressed", "launches of a task a node runs or has a result for: nothing started"),
    ("repeated_jobs", "submissions of a job a scheduler already has (ignored) or closed (its JobDone again)"),
    ("jobs_resubmitted", "jobs the submitter handed out again (a scheduler forgot it, or stopped answering)"),
    ("repeated_job_reports", "JobDone reports of a job already recorded (a resend, or two schedulers)"),
    ("front_ends_taken_down", "schedulers the submitter took for down (missed pings): their jobs went elsewhere"),
    ("repeated_completions", "results of a task already counted (a resend or a second execution)"),
)


def build(ctx: Context) -> list[str]:
    """Add every Sparrow actor; returns the scheduler names."""
    workers = tuple(ctx.cluster.workers())
    num_resources = len(ctx.cluster.resources)
    cfg: SparrowParams = ctx.config
    ratio = cfg.probe_ratio
    probe_timeout = seconds_to_us(cfg.probe_timeout_s)
    grace = seconds_to_us(cfg.result_grace_s)
    request_timeout = seconds_to_us(cfg.request_timeout_s)
    retries = cfg.request_retries
    node_names = [f"w-{w.worker_id}" for w in workers]
    names = [f"sparrow-{i}" for i in range(cfg.schedulers)]

    def make(index):
        view = PartitionView(workers, num_resources=num_resources)
        return SparrowScheduler(node_names, view, probe_ratio=ratio, recorder=ctx.recorder, feasible=ctx.feasible,
                                index=index, probe_timeout_us=probe_timeout, result_grace_us=grace)

    for i, name in enumerate(names):
        ctx.add(name, lambda i=i: make(i))
    for w, name in zip(workers, node_names):
        ctx.add(name, lambda w=w: SparrowNode(w, ctx.recorder, request_timeout_us=request_timeout,
                                              request_retries=retries))
    return names


ROLES = (Role("sparrow", ("sparrow",), "a Sparrow scheduler (a front end); its node monitors are the workers"),)
SEARCH = (("schedulers", range(1, 4)), ("probe_ratio", (1.0, 2.0, 3.0)))  # what a fault search draws
PATHS = ("tasks_relaunched", "duplicate_launches_suppressed", "repeated_completions")
PANELS = (Histogram("probe queues over nodes", "worker", "queued_probes", "probes queued", "nodes",
                    ((0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, None)), when="sparrow",
                    caption_role="sparrow", caption=(("", "schedulers"), ("open_jobs", "open jobs"),
                                                     ("probes", "probes sent"))),)
# the failover scenario's tour: sparrow-0 crashes and restarts, then is cut off from 5 random nodes
TOUR = ({"at_s": 2.0, "kind": "crash", "target": "sparrow-0", "for_s": 1.0},
        {"at_s": 4.0, "kind": "partition", "sides": [["sparrow-0"], {"role": "worker", "count": 5}], "for_s": 2.0})


def size(params: dict) -> Size:
    """The schedulers; a job's probes (probe_ratio per task) all leave at once."""
    cfg = typed(SparrowParams, params)
    return Size(cfg.schedulers, keys=("schedulers",), burst=cfg.probe_ratio, burst_key="probe_ratio")


SPARROW = Scheduler("sparrow", "Sparrow (2013): distributed schedulers, batch probing, late binding",
                    build, config=SparrowParams, counters=COUNTERS, takes_policy=False,
                    survives=FAULT_KINDS, checks=(node_books_balance, nodes_not_stuck), roles=ROLES,
                    events=EVENTS, search=SEARCH, paths=PATHS, size=size, panels=PANELS,
                    tour=TOUR)
