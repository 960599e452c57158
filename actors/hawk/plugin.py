"""Hawk as a plug-in: ``schedulers`` distributed schedulers, one long-job scheduler and a node per machine.

Actors, in this order: ``hawk-<i>`` (the distributed schedulers), ``hawk-long-0`` (the long-job scheduler),
then ``w-<worker id>`` in cluster order. The first ``reserved_fraction`` of the workers in cluster order
(rounded down, as the Eagle authors' simulator's partition) are the reserved partition: short tasks only. The
submitter hands long jobs (mean task time above ``short_cutoff_s``) to the long-job scheduler and short ones
round robin to the distributed schedulers; when a front end is down its jobs go to another, and every front end
can place either kind. Hawk places tasks by late binding and least waiting time, so the worker-choice
``policy`` does not apply.

Faults: messages travel on connections, so loss and short partitions only delay them; crashes and cuts longer
than the connection timeout are recovered from the fabric's notices (``recovery``, ``node``,
``long_scheduler``). A fault-free run sends the protocol's messages only, and sets no timer.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.faults import FAULT_KINDS
from fedemu.model import finite_at_least, param, seconds_between, seconds_to_us, typed, whole_at_least
from fedemu.policies.partition_view import PartitionView

from ..plugin import FRONT_END_COUNTERS, Column, Context, Histogram, Role, Scheduler, Size, Submission, Table, deferred
from .events import EVENTS

_SECONDS = seconds_between(0.001, 3600)
_FRACTION = {"ok": lambda v: 0 <= v < 1, "expected": "a number in [0, 1)"}


@attrs.frozen
class HybridParams:
    """The keys Hawk and Eagle share: the distributed schedulers, the probe ratio, the reserved partition and
    the submitter's resubmission period."""

    schedulers: int = param(3, "distributed schedulers (front ends for short jobs; the long-job scheduler is "
                            "one more)", whole_at_least(1))
    probe_ratio: float = param(2.0, "probes per task (d in the Sparrow paper)", finite_at_least(1))
    reserved_fraction: float = param(0.02, "share of the workers (the first ones) that run short tasks only; "
                                     "rounded down", _FRACTION)
    resubmit_s: float = param(10.0, "the submitter's first backoff after a connection notice for a scheduler: one "
                              "that crashed is not handed jobs for this long, one cut off past conn_timeout_s is "
                              "asked what it holds after it (doubling per notice, up to a minute)", _SECONDS)


@attrs.frozen
class HawkParams(HybridParams):
    """Hawk's keys: the shared ones, and work stealing's."""

    steal_attempts: int = param(10, "nodes an idle node asks in turn for short tasks to steal before it waits "
                                "to be idle again (0: no stealing)", whole_at_least(0))
    steal_limit: int = param(10_000, "short reservations one node gives a thief at most", whole_at_least(1))


COUNTERS = FRONT_END_COUNTERS + (
    ("probes", "reservations the schedulers sent (short jobs' probes and long tasks' placements)"),
    ("long_jobs", "jobs placed as long (mean task time above short_cutoff_s)"),
    ("long_tasks_placed", "long tasks the long-job scheduler placed by least waiting time"),
    ("cancels", "node requests answered with a cancel (the reservation's group was already placed)"),
    ("steal_asks", "requests idle nodes sent to steal short reservations"),
    ("steals", "steal requests that got some reservations"),
    ("stolen_probes", "short reservations stolen"),
    ("probes_resent", "reservations sent again after a break with a node that held a job's reservations or a task"),
    ("tasks_relaunched", "bound tasks placed again: a break with their node (crashed, refused, or cut off)"),
    ("lent_reported_lost", "stolen reservations a lender reported lost: the connection to their thief broke"),
    ("long_views_rebuilt", "restarts of the long-job scheduler: it asked every node for its long work"),
    ("requests_retried", "requests a node asked again after a break with a scheduler that is up"),
    ("requests_repeated", "requests a scheduler got again and answered as the first time"),
    ("duplicate_answers_ignored", "answers a node got again for a request already answered"),
    ("duplicate_launches_suppressed", "launches of a task a node runs already: nothing started"),
    ("repeated_jobs", "submissions of a job a scheduler already has (ignored) or closed (its JobDone again)"),
    ("jobs_resubmitted", "jobs the submitter handed out again (a scheduler forgot it, or stopped answering)"),
    ("repeated_job_reports", "JobDone reports of a job already recorded (a resend, or two schedulers)"),
    ("front_ends_taken_down", "schedulers the submitter took for down (a crash or refusal notice): their jobs "
                              "went elsewhere"),
    ("repeated_completions", "results of a task already counted (a resend or a second execution)"),
)


def reserved_count(fraction: float, workers: int) -> int:
    """The reserved partition's size: ``fraction`` of ``workers``, rounded down (the simulator's ``int()``)."""
    return int(fraction * workers + 1e-9)


def build_hybrid(ctx: Context, prefix: str, *, scheduler, long_scheduler, node,
                 scheduler_keys: dict | None = None, node_keys: dict | None = None) -> list[str]:
    """Add a hybrid scheduler's actors (``<prefix>-<i>``, ``<prefix>-long-0``, the nodes); returns the front ends'
    names, the long-job scheduler last. ``scheduler_keys`` and ``node_keys`` go to every scheduler and node."""
    workers = tuple(ctx.cluster.workers())
    num_resources = len(ctx.cluster.resources)
    cfg = ctx.config
    node_names = [f"w-{w.worker_id}" for w in workers]
    reserved = reserved_count(cfg.reserved_fraction, len(workers))
    names = [f"{prefix}-{i}" for i in range(cfg.schedulers)]
    long_name = f"{prefix}-long-0"
    cutoff_us = seconds_to_us(float(ctx.params["short_cutoff_s"]))
    rtt_us = 2 * seconds_to_us(float(ctx.params["latency_ms"]) / 1000)
    # The cluster's description, read only: one view and one cache of probe pools for every scheduler and each
    # of its incarnations (what a scheduler learns at run time is its own, and a crash loses it).
    view = PartitionView(workers, num_resources=num_resources)
    common = dict(reserved=reserved, probe_ratio=cfg.probe_ratio, cutoff_us=cutoff_us, recorder=ctx.recorder,
                  feasible=ctx.feasible, pools={}, **(scheduler_keys or {}))

    def make(index):
        if index == len(names):
            return long_scheduler(node_names, view, rtt_us=rtt_us, index=index, **common)
        return scheduler(node_names, view, index=index, **common)

    for i, name in enumerate(names + [long_name]):
        ctx.add(name, lambda i=i: make(i))
    victims = tuple(node_names[reserved:])
    for w, name in zip(workers, node_names):
        ctx.add(name, lambda w=w: node(w, ctx.recorder, victims=victims, long_scheduler=long_name,
                                       **(node_keys or {})))
    return names + [long_name]


def build(ctx: Context) -> list[str]:
    """Add every Hawk actor; returns the front ends' names (the long-job scheduler last)."""
    # (imported here: the registry imports every plug-in, and a run only its own scheduler's actors)
    from .long_scheduler import LongScheduler
    from .node import HawkNode
    from .scheduler import HawkScheduler

    cfg: HawkParams = ctx.config
    return build_hybrid(ctx, "hawk", scheduler=HawkScheduler, long_scheduler=LongScheduler, node=HawkNode,
                        scheduler_keys={"min_probes": 0},
                        node_keys={"steal_attempts": cfg.steal_attempts, "steal_limit": cfg.steal_limit})


def submission(params: dict) -> Submission:
    """Long jobs to the long-job scheduler (the last front end), short ones round robin to the others; the front
    ends report JobDone and the submitter hands a down one's jobs to another."""
    return Submission(choice="by-length", resubmit_us=seconds_to_us(float(params["resubmit_s"])))


def roles(prefix: str, what: str) -> tuple[Role, ...]:
    return (Role(prefix, (prefix,), f"a {what} distributed scheduler (a front end for short jobs); its node "
                                    "monitors are the workers"),
            Role(f"{prefix}-long", (f"{prefix}-long",), f"the {what} long-job scheduler (a front end: least "
                                                        "waiting time placement)"))


def panels(prefix: str) -> tuple:
    return (Histogram("reservation queues over nodes", "worker", "queued_probes", "reservations queued", "nodes",
                      ((0, 0), (1, 1), (2, 2), (3, 4), (5, 8), (9, 16), (17, None)), when=prefix,
                      caption_role=prefix, caption=(("", "schedulers"), ("open_jobs", "open jobs"),
                                                    ("probes", "probes sent"))),
            Table("long-job scheduler", f"{prefix}-long", "scheduler", (
                Column("open jobs", ("open_jobs",)), Column("placed", ("probes",)), Column("asks", ("requests",)),
                Column("assigns", ("assigns",)), Column("cancels", ("cancels",)),
                Column("busy nodes", ("busy_nodes",), optional=True))))


def tour(prefix: str) -> tuple[dict, ...]:
    """The failover scenario's tour: a distributed scheduler crashes and restarts, the long-job scheduler crashes
    and restarts (its view rebuilt), a scheduler is cut off from 5 random nodes."""
    return ({"at_s": 2.0, "kind": "crash", "target": f"{prefix}-0", "for_s": 1.0},
            {"at_s": 3.0, "kind": "crash", "target": f"{prefix}-long-0", "for_s": 1.0},
            {"at_s": 5.0, "kind": "partition", "sides": [[f"{prefix}-0"], {"role": "worker", "count": 5}],
             "for_s": 2.0})


def size(params: dict) -> Size:
    """The schedulers and the long-job scheduler; a job's probes (probe_ratio per task) all leave at once."""
    cfg = typed(HybridParams, params)
    return Size(cfg.schedulers + 1, keys=("schedulers",), burst=cfg.probe_ratio, burst_key="probe_ratio")


SEARCH = (("schedulers", range(1, 4)), ("probe_ratio", (1.0, 2.0, 3.0)), ("reserved_fraction", (0.0, 0.2, 0.5)))
PATHS = ("tasks_relaunched", "probes_resent", "requests_retried", "duplicate_launches_suppressed",
         "repeated_completions", "lent_reported_lost", "long_views_rebuilt")
CHECKS = (deferred("fedemu.actors.hawk.node", "node_books_balance"), deferred("fedemu.actors.hawk.node", "nodes_not_stuck"))

HAWK = Scheduler("hawk", "Hawk (2015): long jobs placed centrally by least waiting time, short ones by "
                 "distributed batch probing; a short-only partition; work stealing",
                 build, config=HawkParams, counters=COUNTERS, takes_policy=False, survives=FAULT_KINDS,
                 checks=CHECKS, roles=roles("hawk", "Hawk"), events=EVENTS,
                 search=SEARCH + (("steal_attempts", (0, 1, 10)),), paths=PATHS, size=size,
                 submission=submission, panels=panels("hawk"), tour=tour("hawk"))
