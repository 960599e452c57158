"""Eagle as a plug-in: Hawk's actors (``actors/hawk/plugin``) with Eagle's classes and keys.

Actors, in this order: ``eagle-<i>`` (the distributed schedulers), ``eagle-long-0`` (the long-job scheduler), then
``w-<worker id>`` in cluster order; the reserved partition and the submission are Hawk's. The defaults are the
Eagle authors' simulator's Eagle mode (its README's example line): at least 20 probes a job, Succinct State
Sharing, Sticky Batch Probing, shortest remaining job first with a bound of 5, no stealing; the reserved share
is 2% (the Yahoo trace's; the Pigeon paper's 4.1 gives 9% for Cloudera and 17% for Google).
"""

from __future__ import annotations

import math

import attrs

from fedemu.fabric.faults import FAULT_KINDS
from fedemu.model import param, whole_at_least

from ..hawk.events import EVENTS as HAWK_EVENTS
from ..hawk.plugin import COUNTERS as HAWK_COUNTERS
from ..hawk.plugin import CHECKS, PATHS, SEARCH, HybridParams, build_hybrid, panels, roles, size, submission, tour
from ..plugin import Context, Scheduler
from .events import EVENTS

_BOUND = {"ok": lambda v: v == math.inf or 0 <= v <= 1000, "expected": "a number from 0 to 1000, or inf (no bound)"}
_ORDERS = ("srpt", "fifo")


@attrs.frozen
class EagleParams(HybridParams):
    """Eagle's keys: Hawk's shared ones, and its own mechanisms'."""

    min_probes: int = param(20, "probes a short job sends at least (the simulator's Eagle mode: 20)", whole_at_least(1))
    sss: bool = param(True, "Succinct State Sharing: a node with long work rejects short probes, which are sent "
                      "again avoiding the bitmap's workers")
    sticky: bool = param(True, "Sticky Batch Probing: a short reservation that got a task stays in its queue")
    queue_order: str = param("srpt", "a node's queue order: srpt (shortest remaining job first, bounded by "
                             "srpt_bound) or fifo", {"ok": lambda v: v in _ORDERS, "expected": "srpt or fifo"})
    srpt_bound: float = param(5.0, "how many times its own task estimate a short reservation may be delayed by "
                              "reservations served past it (inf: no bound)", _BOUND)


COUNTERS = HAWK_COUNTERS + (
    ("rejections", "short probes a node with long work rejected (Succinct State Sharing)"),
    ("rejected_probes", "rejections a scheduler acted on (its job still open)"),
    ("probes_sent_again", "short probes sent again after a rejection, avoiding the bitmap's workers"),
    ("probe_fallbacks", "probes rejected in the last round and sent to the reserved partition"),
    ("sticky_hits", "tasks a short reservation got after its first (Sticky Batch Probing)"),
    ("reservations_dropped", "short reservations a node dropped without asking: their job's tasks were all bound"),
    ("drops_sent", "jobs whose last task was bound: their scheduler told the other nodes holding their reservations"),
)


def build(ctx: Context) -> list[str]:
    """Add every Eagle actor; returns the front ends' names (the long-job scheduler last)."""
    # (imported here: the registry imports every plug-in, and a run only its own scheduler's actors)
    from .long_scheduler import EagleLongScheduler
    from .node import EagleNode
    from .scheduler import EagleScheduler

    cfg: EagleParams = ctx.config
    bound = None if cfg.queue_order == "fifo" else cfg.srpt_bound
    return build_hybrid(ctx, "eagle", scheduler=EagleScheduler, long_scheduler=EagleLongScheduler, node=EagleNode,
                        scheduler_keys={"min_probes": cfg.min_probes, "sticky": cfg.sticky},
                        node_keys={"sticky": cfg.sticky, "srpt_bound": bound, "sss": cfg.sss})


EAGLE = Scheduler("eagle", "Eagle (2016): Hawk plus Succinct State Sharing, Sticky Batch Probing and bounded "
                  "shortest-remaining-job-first queues",
                  build, config=EagleParams, counters=COUNTERS, takes_policy=False, survives=FAULT_KINDS,
                  checks=CHECKS, roles=roles("eagle", "Eagle"),
                  events=HAWK_EVENTS + EVENTS,
                  search=SEARCH + (("min_probes", (1, 2, 20)), ("sticky", (False, True)),
                                   ("queue_order", _ORDERS), ("srpt_bound", (0.0, 1.0, 5.0, math.inf))),
                  paths=PATHS + ("probe_fallbacks",), size=size, submission=submission, panels=panels("eagle"),
                  tour=tour("eagle"))
