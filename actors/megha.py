"""Megha as plug-ins: LMs own clusters, GMs own one partition in each, workers run tasks.

The centralized baseline of the 2022 paper is the same code over the same machines gathered into
one cluster, with one GM and one LM. Actors, in this order: ``gm-<g>``, ``lm-<c>``, ``w-<worker id>``.

Both survive crashes and restarts of any actor, partitions, slow links, message loss and duplication
(``survives``); the recovery protocols are described in ``global_manager``, ``local_manager``,
``megha_worker`` and ``submitter``. Two end-of-run checks look at the live actors: every live LM's free
vectors equal its live workers' true free capacity (``lm_matches_workers``), and every live GM's view
equals the LMs' state once each LM's unacknowledged changes are applied (``views_converge``).
"""

from __future__ import annotations

import attrs

from fedemu.model import Param, finite_at_least, one_of, seconds_between, seconds_to_us, whole_at_least
from fedemu.policies.partition_view import PartitionView

from .global_manager import GlobalManager
from .invariants import Violation
from .local_manager import FaultTimes, LocalManager
from .megha_messages import RETRIES
from .megha_worker import MeghaWorker
from .plugin import FRONT_END_COUNTERS, Context, Scheduler


GM_QUEUES = ("fifo", "fewest-remaining")
FAILED_LAUNCH = ("back", "front")
JOB_TO_GM = ("round-robin", "task-count")


PARAMS = (
    Param("heartbeat_s", 10.0, "LM heartbeat period in seconds (delta updates to the GMs)",
          **finite_at_least(0, strict=True)),
    Param("launch_timeout_s", 2.0, "a GM asks a launch again when its completion is this late (past the "
          "task's expected end)", **seconds_between(1e-6, 1e7)),
    Param("request_timeout_s", 1.0, "a GM asks again for a snapshot or a job's tasks after this long; a "
          "restarted worker registers again", **seconds_between(1e-6, 1e7)),
    Param("resubmit_s", 10.0, "the submitter pings each GM holding open jobs this often, resubmitting the "
          "jobs it does not hold; 3 missed pings take the GM for down", **seconds_between(1e-6, 1e7)),
    Param("worker_grace_s", 1.0, "an LM probes the worker of a task overdue by this much (checked at its "
          "heartbeat tick)", **seconds_between(1e-6, 1e7)),
    Param("worker_probe_timeout_s", 1.0, "an LM's wait for a probed worker's answer", **seconds_between(1e-6, 1e7)),
    Param("worker_probe_retries", 3, "unanswered probes before an LM marks a worker down",
          **whole_at_least(1)),
    Param("worker_down_timeout_s", 30.0, "a worker down this long has its tasks handed back to their GMs",
          **seconds_between(1e-6, 1e7)),
    Param("gm_queue", GM_QUEUES[0], "a GM's queue: fifo (oldest task first; the workshop paper's rescheduling "
          "puts a task 'at the end of its task request queue') or fewest-remaining (the task whose job had the "
          "fewest tasks not yet done when it was queued first)", **one_of(GM_QUEUES)),
    Param("failed_launch", FAILED_LAUNCH[0], "where a GM queues a task whose launch the LM refused: back (behind "
          "the queue) or front (ahead of it)", **one_of(FAILED_LAUNCH)),
    Param("job_to_gm", JOB_TO_GM[0], "how a job picks its GM: round-robin, or task-count (its number of tasks "
          "modulo the number of GMs)", **one_of(JOB_TO_GM)),
)

COUNTERS = FRONT_END_COUNTERS + (
    ("reschedules", "times a GM's scheduling pass found no worker in its view for a queued signature"),
    ("repartitions", "launches the LM granted on another GM's partition"),
    ("invalid_internal", "launches on the GM's own partition the LM refused (stale view)"),
    ("invalid_external", "repartition requests the LM refused (stale view)"),
    ("duplicate_launches_suppressed", "launches of a task already running or done, answered and not run again"),
    ("launches_retried", "launches a GM asked again after no answer by the task's expected end + launch_timeout_s"),
    ("launches_abandoned", "launches given up after 3 unanswered asks: the task was queued again"),
    ("tasks_relaunched", "tasks an LM launched again: lost with a restarted worker, or on the way to it"),
    ("tasks_handed_back", "tasks an LM handed back to their GM: their worker stayed down"),
    ("workers_marked_down", "times an LM marked a worker down (unanswered probes)"),
    ("launches_refused", "launches a worker refused: they did not fit (a stale LM)"),
    ("stale_finishes", "task-end reports an LM ignored: a duplicate, or of an execution already reconciled"),
    ("gm_rebuilds", "restarted GMs that rebuilt their view from every LM's snapshot"),
    ("lm_rebuilds", "restarted LMs that rebuilt their state from their workers"),
    ("jobs_adopted", "resubmitted jobs a GM took over after asking the LMs what of them ran"),
    ("jobs_resubmitted", "jobs the submitter handed out again (a GM forgot it, or stopped answering)"),
    ("front_ends_taken_down", "times the submitter took a GM for down (3 pings unanswered)"),
    ("repeated_job_reports", "job-done reports after the first (two GMs finished the same job)"),
    ("repeated_completions", "task completions a GM heard again (a retry's answer, a duplicate)"),
    ("view_resyncs", "snapshots a GM asked for after a heartbeat went missing"),
)


def centralize(cluster):
    """The same machines as one cluster (one LM), keeping every worker's id and constraints."""
    profiles = "+".join(c.profile for c in cluster.clusters)
    workers = tuple(w for c in cluster.clusters for w in c.workers)
    return attrs.evolve(cluster, clusters=(attrs.evolve(cluster.clusters[0], index=0, profile=profiles,
                                                        workers=workers),))


def add_actors(ctx: Context, cluster, gms: int) -> list[str]:
    """Add every Megha actor over ``cluster`` with ``gms`` GMs; returns the GM names."""
    for spec in cluster.clusters:
        if len(spec.workers) % gms:
            raise ValueError(f"cluster {spec.index} has {len(spec.workers)} workers, not a multiple of {gms} GMs")
    gm_names = [f"gm-{g}" for g in range(gms)]
    lm_names = [f"lm-{c}" for c in range(len(cluster.clusters))]
    heartbeat_us = seconds_to_us(float(ctx.params["heartbeat_s"]))
    p = ctx.params
    launch_timeout_us = seconds_to_us(float(p["launch_timeout_s"]))
    request_timeout_us = seconds_to_us(float(p["request_timeout_s"]))
    faults = FaultTimes(seconds_to_us(float(p["worker_grace_s"])), seconds_to_us(float(p["worker_probe_timeout_s"])),
                        int(p["worker_probe_retries"]), seconds_to_us(float(p["worker_down_timeout_s"])))
    num_resources = len(cluster.resources)

    def partitions(spec):
        n = len(spec.workers) // gms
        return [spec.workers[p * n:(p + 1) * n] for p in range(gms)]

    templates = [[PartitionView(part, num_resources=num_resources) for part in partitions(spec)]
                 for spec in cluster.clusters]

    def gm_factory(g):
        def make():
            views = [[view.clone() for view in row] for row in templates]
            return GlobalManager(g, lm_names, views, policy=ctx.policy, feasible=ctx.feasible, recorder=ctx.recorder,
                                 launch_timeout_us=launch_timeout_us, request_timeout_us=request_timeout_us,
                                 gm_queue=p["gm_queue"], failed_launch=p["failed_launch"])
        return make

    for g in range(gms):
        ctx.add(gm_names[g], gm_factory(g))
    for c, spec in enumerate(cluster.clusters):
        workers = [f"w-{w.worker_id}" for w in spec.workers]
        ctx.add(lm_names[c], lambda c=c, spec=spec, workers=workers: LocalManager(
            c, spec.workers, workers, gm_names, heartbeat_us=heartbeat_us, recorder=ctx.recorder, faults=faults))
    for c, spec in enumerate(cluster.clusters):
        for w in spec.workers:
            ctx.add(f"w-{w.worker_id}", lambda w=w, c=c: MeghaWorker(w, ctx.recorder, lm_names[c],
                                                                      retry_us=request_timeout_us))
    return gm_names


def _live(fabric, kind) -> list:
    """The live actors of class ``kind``, in actor order."""
    out = []
    for idx in range(len(fabric.names)):
        actor = fabric.actor(idx)
        if isinstance(actor, kind):
            out.append(actor)
    return out


def lm_matches_workers(fabric) -> list[Violation]:
    """Every live LM (not rebuilding) holds each live worker's true free vector, and has none of them down
    for good (a worker it still probes, after a partition say, is on its way back up)."""
    out = []
    for lm in _live(fabric, LocalManager):
        if lm.rebuilding:
            continue
        for w, wid in enumerate(lm.worker_ids):
            worker = fabric.actor(wid)
            if worker is None:
                continue
            if w in lm.down:
                if lm.down_asks.get(w, 0) < RETRIES:
                    continue  # the LM still probes it: the worker's recovery was under way when the run ended
                out.append(Violation("lm_matches_workers", lm.worker_names[w], fabric.now,
                                     f"{lm.name} has it down, but it is up"))
            elif tuple(lm.free[w]) != tuple(worker.free):
                out.append(Violation("lm_matches_workers", lm.worker_names[w], fabric.now,
                                     f"{lm.name} holds free {tuple(lm.free[w])}, the worker has {tuple(worker.free)}"))
    return out


def views_converge(fabric) -> list[Violation]:
    """Every live GM's view of every live LM equals the LM's state, once the changes that GM has not
    acknowledged yet (past its cursor in the LM's change log) are applied."""
    out = []
    for gm in _live(fabric, GlobalManager):
        for c, lm_id in enumerate(gm.lm_ids):
            lm = fabric.actor(lm_id)
            if lm is None or lm.rebuilding or c in gm.rebuilding or c in gm.resyncing:
                continue
            unsent = lm.change_log.unsent(gm.gm)
            per = gm.search.per_partition
            for p, view in enumerate(gm.search.views[c]):
                free = view.free
                for local in range(view.n):
                    w = p * per + local
                    if w in unsent:
                        continue
                    seen = tuple(int(x) for x in free[local])
                    if seen != tuple(lm.free[w]):
                        out.append(Violation("views_converge", f"{gm.name} view of {lm.worker_names[w]}",
                                             fabric.now, f"{gm.name} sees free {seen}, {lm.name} holds "
                                             f"{tuple(lm.free[w])}"))
    return out


def build_megha(ctx: Context) -> list[str]:
    """Megha over the cluster description: one LM per cluster, ``gms`` GMs."""
    return add_actors(ctx, ctx.cluster, int(ctx.params["gms"]))


def build_centralized(ctx: Context) -> list[str]:
    """The centralized baseline: the same machines as one cluster, one GM and one LM."""
    return add_actors(ctx, centralize(ctx.cluster), 1)


SURVIVES = ("crash", "restart", "partition", "heal", "slow", "restore", "loss", "dup")
CHECKS = (lm_matches_workers, views_converge)

MEGHA = Scheduler("megha", "Megha (2022/2023 papers): GMs with eventually consistent views, LMs that validate",
                  build_megha, params=PARAMS, counters=COUNTERS,
                  invalid_counters=("invalid_internal", "invalid_external"), survives=SURVIVES, checks=CHECKS)
CENTRALIZED = Scheduler("centralized", "the 2022 paper's centralized baseline: Megha with one GM and one LM over "
                        "every machine", build_centralized, params=PARAMS, counters=COUNTERS,
                        invalid_counters=("invalid_internal", "invalid_external"), survives=SURVIVES, checks=CHECKS)
