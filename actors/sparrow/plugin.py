"""Sparrow as a plug-in: ``schedulers`` distributed schedulers and one probe-queue node per machine.

Every scheduler sees every machine (Sparrow has no groups); the cluster's grouping only fixes worker ids.
Actors, in this order: ``sparrow-<i>``, then ``w-<worker id>`` in cluster order. Sparrow places tasks by
late binding, so the worker-choice ``policy`` does not apply to it.

Faults: messages travel on connections, so loss and short partitions only delay them; crashes (with or
without restart) and cuts longer than the connection timeout are recovered from the fabric's notices
(``recovery``). A fault-free run sends the paper's messages only, and sets no timer.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.faults import FAULT_KINDS
from fedemu.model import finite_at_least, param, seconds_between, typed, whole_at_least
from fedemu.policies.partition_view import PartitionView

from ..plugin import FRONT_END_COUNTERS, Context, Histogram, Role, Scheduler, Size, deferred
from .events import EVENTS

_SECONDS = seconds_between(0.001, 3600)


@attrs.frozen
class SparrowParams:
    """Sparrow's keys: its schedulers and probe ratio, and the submitter's resubmission period (recovery has
    no keys of its own: it starts from connection notices, ``recovery``)."""

    schedulers: int = param(3, "Sparrow schedulers (front ends jobs are submitted to)", whole_at_least(1))
    probe_ratio: float = param(2.0, "probes per task (d in the Sparrow paper)", finite_at_least(1))
    resubmit_s: float = param(10.0, "the submitter's first backoff after a connection notice for a scheduler: one "
                              "that crashed is not handed jobs for this long, one cut off past conn_timeout_s is "
                              "asked what it holds after it (doubling per notice, up to a minute)", _SECONDS)


# Keys of Sparrow's recovery before it ran on connections: setting one is a one-line error saying why.
RETIRED_KEYS = tuple(
    (key, f"{key} is retired: Sparrow no longer {what}; it probes again, or asks again, only when a "
          "connection breaks (docs/connections.md)")
    for key, what in (("probe_timeout_s", "probes again for tasks that wait in a queue"),
                      ("result_grace_s", "asks a node about an overdue result"),
                      ("request_retries", "gives a request up after a number of asks")))


COUNTERS = FRONT_END_COUNTERS + (
    ("probes", "probes the schedulers sent"),
    ("cancels", "node requests answered with a cancel (the probe's group was already placed)"),
    ("probes_resent", "probes sent again after a break with a node that held a job's probes or a bound task"),
    ("tasks_relaunched", "bound tasks placed again: a break with their node (crashed, refused, or cut off)"),
    ("requests_retried", "requests a node asked again after a break with a scheduler that is up"),
    ("requests_repeated", "requests a scheduler got again and answered as the first time"),
    ("duplicate_answers_ignored", "answers a node got again for a request already answered"),
    ("duplicate_launches_suppressed", "launches of a task a node runs already: nothing started"),
    ("repeated_jobs", "submissions of a job a scheduler already has (ignored) or closed (its JobDone again)"),
    ("jobs_resubmitted", "jobs the submitter handed out again (a scheduler forgot it, or stopped answering)"),
    ("repeated_job_reports", "JobDone reports of a job already recorded (a resend, or two schedulers)"),
    ("front_ends_taken_down", "schedulers the submitter took for down (a crash or refusal notice): their jobs went elsewhere"),
    ("repeated_completions", "results of a task already counted (a resend or a second execution)"),
)


def build(ctx: Context) -> list[str]:
    """Add every Sparrow actor; returns the scheduler names."""
    # (imported here: the registry imports every plug-in, and a run only its own scheduler's actors)
    from .node import SparrowNode
    from .scheduler import SparrowScheduler

    workers = tuple(ctx.cluster.workers())
    num_resources = len(ctx.cluster.resources)
    cfg: SparrowParams = ctx.config
    ratio = cfg.probe_ratio
    node_names = [f"w-{w.worker_id}" for w in workers]
    names = [f"sparrow-{i}" for i in range(cfg.schedulers)]

    # The cluster's description, read only: one view and one cache of probe pools for every scheduler and each
    # of its incarnations (what a scheduler learns at run time is its own, and a crash loses it).
    view = PartitionView(workers, num_resources=num_resources)
    pools: dict = {}

    def make(index):
        return SparrowScheduler(node_names, view, probe_ratio=ratio, recorder=ctx.recorder, feasible=ctx.feasible,
                                index=index, pools=pools)

    for i, name in enumerate(names):
        ctx.add(name, lambda i=i: make(i))
    for w, name in zip(workers, node_names):
        ctx.add(name, lambda w=w: SparrowNode(w, ctx.recorder))
    return names


CHECKS = (deferred("fedemu.actors.sparrow.node", "node_books_balance"),
          deferred("fedemu.actors.sparrow.node", "nodes_not_stuck"))
ROLES = (Role("sparrow", ("sparrow",), "a Sparrow scheduler (a front end); its node monitors are the workers"),)
SEARCH = (("schedulers", range(1, 4)), ("probe_ratio", (1.0, 2.0, 3.0)))  # what a fault search draws
PATHS = ("tasks_relaunched", "probes_resent", "requests_retried", "duplicate_launches_suppressed", "repeated_completions")
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
                    survives=FAULT_KINDS, checks=CHECKS, roles=ROLES,
                    events=EVENTS, search=SEARCH, paths=PATHS, size=size, panels=PANELS,
                    tour=TOUR, retired=RETIRED_KEYS)
