"""Megha as plug-ins: LMs own clusters, GMs own one partition in each, workers run tasks.

The centralized baseline of the 2022 paper is the same code over the same machines gathered into
one cluster, with one GM and one LM. Actors, in this order: ``gm-<g>``, ``lm-<c>``, ``w-<worker id>``.

Both survive crashes and restarts of any actor, partitions, slow links, message loss and duplication
(``survives``); the recovery protocols are described in ``global_manager``, ``local_manager``,
``worker`` and ``common.submitter``; fairness, gangs and standby LMs are components of the GM and the LM
(``gm_fairness``/``lm_fairness``, ``gang``, ``standby``). End-of-run checks of the live actors: ``checks``.
"""

from __future__ import annotations

import attrs

from fedemu.fabric.errors import ConfigError
from fedemu.model import finite_at_least, one_of, param, seconds_between, seconds_to_us, typed, whole_at_least
from fedemu.policies.fair_share import Shares
from fedemu.actors.megha.partition_search import ORDERS as SPILL_ORDERS
from fedemu.policies.partition_view import PartitionView

from ..plugin import FRONT_END_COUNTERS, Column, Context, Role, Scheduler, Size, Submission, Table, Users, deferred
from .events import EVENTS


GM_QUEUES = ("fifo", "fewest-remaining")
FAILED_LAUNCH = ("back", "front")
VIEW_REFRESH = ("delta", "full")
REFUSED_TASK = ("retry", "wait-free")
JOB_TO_GM = ("round-robin", "task-count")
USER_ASSIGN = ("round-robin", "weighted", "trace")
PAPER_USER_GMS = (0, 1, 1, 2)  # the 2022 paper's mapping (IV-E): queue 1 -> GM 1, 2 and 3 -> GM 2, 4 -> GM 3


@attrs.frozen
class MeghaParams:
    """Megha's keys (and the centralized baseline's): timeouts and periods, standby LMs, gangs, the GM's
    queue, users (global fairness: Megha 2022, IV-C)."""

    heartbeat_s: float = param(10.0, "LM heartbeat period in seconds (delta updates to the GMs)",
                               finite_at_least(0, strict=True))
    launch_timeout_s: float = param(2.0, "after a broken connection with an LM, a GM queues elsewhere each launch "
                                    "there whose task is this late (past its expected end) while the LM has not "
                                    "answered 3 asks for its state", seconds_between(1e-6, 1e7))
    request_timeout_s: float = param(1.0, "a GM asks again for a snapshot or a job's tasks after this long; a "
                                     "restarted worker registers again", seconds_between(1e-6, 1e7))
    resubmit_s: float = param(10.0, "the submitter's first backoff after a connection notice for a GM: one that "
                              "crashed is not handed jobs for this long, one cut off past conn_timeout_s is asked "
                              "what it holds after it (doubling per notice, up to a minute)", seconds_between(1e-6, 1e7))
    worker_grace_s: float = param(1.0, "an LM probes the worker of a task overdue by this much (checked at its "
                                  "heartbeat tick)", seconds_between(1e-6, 1e7))
    worker_probe_timeout_s: float = param(1.0, "an LM's wait for a probed worker's answer", seconds_between(1e-6, 1e7))
    worker_probe_retries: int = param(3, "unanswered probes before an LM marks a worker down", whole_at_least(1))
    worker_down_timeout_s: float = param(30.0, "a worker down this long has its tasks handed back to their GMs, once "
                                         "its launches can no longer arrive (it crashed, or the cut broke the connection)",
                                         seconds_between(1e-6, 1e7))
    launch_replies: str = param("delta", "what a GM hears back from a launch: 'delta' (every launch is answered with "
                                "the LM's changes that GM has not seen; the workshop paper) or 'failures' (only "
                                "invalid launches are)", one_of(("delta", "failures")))
    lm_standby: bool = param(False, "give each LM a standby replica (lm-<c>-standby) that takes over when the active "
                             "fails (2022 paper, IV-D; see actors/megha/standby.py)")
    gang: bool = param(False, "gang scheduling: every job is all-or-nothing; a GM reserves its tasks on every LM "
                       "involved and commits once all hold (see actors/megha/gang.py)")
    gang_lease_s: float = param(2.0, "with gang: an LM lets go of a gang's hold that saw neither a commit nor a "
                                "release this long", seconds_between(1e-6, 1e7))
    gm_queue: str = param(GM_QUEUES[0], "a GM's queue: fifo (oldest task first; the workshop paper's rescheduling "
                          "puts a task 'at the end of its task request queue') or fewest-remaining (the task whose "
                          "job had the fewest tasks not yet done when it was queued first)", one_of(GM_QUEUES))
    failed_launch: str = param(FAILED_LAUNCH[0], "where a GM queues a task whose launch the LM refused: back (behind "
                               "the queue) or front (ahead of it)", one_of(FAILED_LAUNCH))
    view_refresh: str = param(VIEW_REFRESH[0], "what a GM hears of the LMs' state: delta (heartbeats and the answers "
                              "to its own launches, the papers' protocol) or full (as the workshop paper's public "
                              "simulator, megha_simulator's GM.update_status: on each of its completions and each "
                              "refused launch it asks every LM for its whole state)", one_of(VIEW_REFRESH))
    refused_task: str = param(REFUSED_TASK[0], "what a GM does with a task the LM refused (and one no worker in its "
                              "view matched): retry (queue it and match it against the view at once, refreshed by "
                              "the refusal's reply) or wait-free (the 2023 authors' simulator, meghanat/megha-"
                              "constraint-aware b503dbc megha3.0/src/megha_sim/global_master/gm_constraints_rand.py "
                              "l.156-158, l.316-337, l.361-391, l.402: it waits in a second queue, a refused one at "
                              "its front, and is placed only on a worker later reported free: this GM's own "
                              "completion or a worker an LM update reports; never matched against the view "
                              "again; see actors/megha/gm_waiting.py; needs users=0 and gang=false)",
                              one_of(REFUSED_TASK))
    spill_order: str = param(SPILL_ORDERS[0], "the order a GM searches partitions in: rotate (its own partition in "
                             "each LM round robin from the LM after the last match, then the others' from the LM "
                             "after the last external match, from GM home+1) or fixed (the 2023 authors' "
                             "simulator, gm_constraints_rand.py l.221 and l.252-253: its own partitions in LM "
                             "order, then LM by LM the others' in GM order, every search from the start)",
                             one_of(SPILL_ORDERS))
    job_to_gm: str = param(JOB_TO_GM[0], "how a job picks its GM: round-robin, or task-count (its number of tasks "
                           "modulo the number of GMs); with users, a job goes to its user's GM", one_of(JOB_TO_GM))
    users: int = param(0, "users, each with a queue and a share of the datacenter (global fairness); 0: no users",
                       whole_at_least(0))
    shares: str = param("", "with users: each user's share in percent, e.g. 10,25,15,50 (each > 0, summing to at most "
                        "100, not normalised); empty: equal shares summing to 100")
    user_gms: str = param("", "with users: each user's GM (its queue's), e.g. 0,1,1,2; empty: the paper's 0,1,1,2 for "
                          "4 users on 3 GMs, else user u -> GM u mod gms (centralized: its one GM)")
    user_assign: str = param(USER_ASSIGN[0], "with users: how jobs get their user: round-robin, weighted (drawn by "
                             "share from a seeded stream) or trace (the trace's user=K column)", one_of(USER_ASSIGN))
    fairness: str = param("on", "with users: on (Algorithm 2: a user under its share that finds no worker preempts "
                          "users over theirs) or off (the same user queues, no preemption)", one_of(("on", "off")))


COUNTERS = FRONT_END_COUNTERS + (
    ("reschedules", "times a GM's scheduling pass found no worker in its view for a queued signature"),
    ("repartitions", "launches the LM granted on another GM's partition"),
    ("invalid_internal", "launches on the GM's own partition the LM refused (stale view)"),
    ("invalid_external", "repartition requests the LM refused (stale view)"),
    ("duplicate_launches_suppressed", "launches of a task already running or done, answered and not run again"),
    ("launches_retried", "launches a GM asked again when an LM's state came back (a broken connection, a new epoch)"),
    ("launches_abandoned", "launches given up on an LM that did not answer (launch_timeout_s): queued again"),
    ("tasks_relaunched", "tasks an LM launched again: lost with a restarted worker, or on the way to it"),
    ("tasks_handed_back", "tasks an LM handed back to their GM: their worker stayed down"),
    ("workers_marked_down", "times an LM marked a worker down (unanswered probes)"),
    ("launches_refused", "launches a worker refused: they did not fit (a stale LM)"),
    ("stale_finishes", "task-end reports an LM ignored: a duplicate, or of an execution already reconciled"),
    ("gm_rebuilds", "restarted GMs that rebuilt their view from every LM's snapshot"),
    ("lm_rebuilds", "LMs that rebuilt their state from their workers (a restart, or a standby's takeover)"),
    ("failovers", "standby LMs that took over from an active LM that stopped answering (lm_standby)"),
    ("lm_step_downs", "active LMs that stepped down on hearing of a later epoch (lm_standby)"),
    ("gm_lm_switches", "times a GM began to follow the other replica of an LM (a later epoch; lm_standby)"),
    ("launches_fenced", "launches a worker refused because they came from an LM of an older epoch (lm_standby)"),
    ("jobs_adopted", "resubmitted jobs a GM took over after asking the LMs what of them ran"),
    ("jobs_resubmitted", "jobs the submitter handed out again (a GM forgot it, or stopped answering)"),
    ("front_ends_taken_down", "times the submitter took a GM for down (a crash or refusal notice)"),
    ("repeated_job_reports", "job-done reports after the first (two GMs finished the same job)"),
    ("repeated_completions", "task completions a GM heard again (a retry's answer, a duplicate)"),
    ("view_resyncs", "snapshots a GM asked for after its connection with an LM broke (or of a new epoch)"),
    ("view_refreshes", "view_refresh=full: completions and refused launches on which a GM asked every LM for its state"),
    ("tasks_waited", "refused_task=wait-free: tasks a GM held for a worker reported free (a refused launch, or no "
                     "match in its view)"),
    ("preemption_attempts", "preemption requests GMs sent (users; Algorithm 2 under contention)"),
    ("preemptions", "tasks an LM preempted: stopped on their worker, their work lost, queued again at their GM"),
    ("preemptions_refused", "preemption requests an LM refused on verification (the GM's view was stale)"),
    # gangs (``gang``)
    ("gang_attempts", "gang placements a GM sent out (reservations, or one launch of a one-LM gang)"),
    ("gang_refusals", "gang parts an LM refused to hold: its true state had not room for every task"),
    ("gang_aborts", "gang attempts a GM released: a part was refused or not answered"),
    ("gang_leases_expired", "gang holds an LM let go because neither a commit nor a release came in time"),
    ("gang_commits_rechecked", "committed gang tasks an LM found no hold for and checked again (a lost hold)"),
)


def users_of(cfg: MeghaParams, gms: int):
    """The run's users as (Shares, each user's GM), or None without users; bad keys are one-line errors."""
    users = cfg.users
    if users == 0:
        for key, value in (("shares", cfg.shares), ("user_gms", cfg.user_gms)):
            if value != "":
                raise ConfigError(f"parameter {key!r} is {value!r}, but there are no users; set users=N too")
        return None
    shares = Shares.parse(cfg.shares, users)
    text = cfg.user_gms.strip()
    if gms == 1:  # the centralized baseline: its one GM serves every queue
        user_gm = (0,) * users
    elif not text:
        user_gm = PAPER_USER_GMS if (users, gms) == (4, 3) else tuple(u % gms for u in range(users))
    else:
        try:
            user_gm = tuple(int(x) for x in text.split(","))
        except ValueError:
            raise ConfigError(f"parameter 'user_gms' is {text!r}; expected GM numbers separated by commas, "
                              "e.g. 0,1,1,2") from None
        if len(user_gm) != users:
            raise ConfigError(f"parameter 'user_gms' is {text!r}: {len(user_gm)} GMs for {users} users")
        bad = [g for g in user_gm if not 0 <= g < gms]
        if bad:
            raise ConfigError(f"parameter 'user_gms' is {text!r}: GM {bad[0]} does not exist (the GMs are 0 to "
                              f"{gms - 1})")
    return shares, user_gm


def centralize(cluster):
    """The same machines as one cluster (one LM), keeping every worker's id and constraints."""
    profiles = "+".join(c.profile for c in cluster.clusters)
    workers = tuple(w for c in cluster.clusters for w in c.workers)
    return attrs.evolve(cluster, clusters=(attrs.evolve(cluster.clusters[0], index=0, profile=profiles,
                                                        workers=workers),))


def add_actors(ctx: Context, cluster, gms: int) -> list[str]:
    """Add every Megha actor over ``cluster`` with ``gms`` GMs; returns the GM names."""
    # (imported here: the registry imports every plug-in, and a run only its own scheduler's actors)
    from .global_manager import GlobalManager
    from .gm_fairness import FairConfig
    from .local_manager import FaultTimes, LocalManager
    from .worker import MeghaWorker

    for spec in cluster.clusters:
        if len(spec.workers) % gms:
            raise ValueError(f"cluster {spec.index} has {len(spec.workers)} workers, not a multiple of {gms} GMs")
    gm_names = [f"gm-{g}" for g in range(gms)]
    lm_names = [f"lm-{c}" for c in range(len(cluster.clusters))]
    cfg: MeghaParams = ctx.config
    heartbeat_us = seconds_to_us(cfg.heartbeat_s)
    launch_timeout_us = seconds_to_us(cfg.launch_timeout_s)
    request_timeout_us = seconds_to_us(cfg.request_timeout_s)
    faults = FaultTimes(seconds_to_us(cfg.worker_grace_s), seconds_to_us(cfg.worker_probe_timeout_s),
                        cfg.worker_probe_retries, seconds_to_us(cfg.worker_down_timeout_s))
    num_resources = len(cluster.resources)
    standby_names = [f"{name}-standby" for name in lm_names] if cfg.lm_standby else None

    def partitions(spec):
        n = len(spec.workers) // gms
        return [spec.workers[p * n:(p + 1) * n] for p in range(gms)]

    templates = [[PartitionView(part, num_resources=num_resources) for part in partitions(spec)]
                 for spec in cluster.clusters]
    users = users_of(cfg, gms)
    if cfg.refused_task == "wait-free" and (users is not None or cfg.gang):
        raise ConfigError("refused_task=wait-free needs users=0 and gang=false: the 2023 authors' GM it follows "
                          "has neither (a waiting task is placed on a reported worker one at a time, not by a "
                          "user's turn or as part of a whole gang)")
    if users is not None and cfg.gang and cfg.fairness == "on":
        raise ConfigError("gang=true with users needs fairness=off: Algorithm 2 preempts single tasks, and a "
                          "gang's tasks start together and never run alone (preempting one would leave its gang "
                          "part-run; preempting a whole gang across LMs is a protocol not built here)")
    fair = None
    if users is not None:
        total = tuple(sum(w.capacity[r] for w in cluster.workers()) for r in range(num_resources))
        provides = tuple(tuple(frozenset(w.constraints) for w in spec.workers) for spec in cluster.clusters)
        fair = FairConfig(users[0], users[1], cfg.fairness == "on", total, provides)

    machines = tuple(cluster.workers()) if cfg.gang else None  # (gangs are placed whole: see gang)
    lease_us = seconds_to_us(cfg.gang_lease_s) if cfg.gang else None

    def gm_factory(g):
        def make():
            views = [[view.clone() for view in row] for row in templates]
            return GlobalManager(g, lm_names, views, policy=ctx.policy, feasible=ctx.feasible, recorder=ctx.recorder,
                                 launch_timeout_us=launch_timeout_us, request_timeout_us=request_timeout_us,
                                 standby_names=standby_names, gm_queue=cfg.gm_queue,
                                 failed_launch=cfg.failed_launch, fair=fair, machines=machines,
                                 view_refresh=cfg.view_refresh, refused_task=cfg.refused_task,
                                 spill_order=cfg.spill_order)
        return make

    for g in range(gms):
        ctx.add(gm_names[g], gm_factory(g))
    for c, spec in enumerate(cluster.clusters):
        workers = [f"w-{w.worker_id}" for w in spec.workers]
        replicas = [(lm_names[c], None, 0)] if standby_names is None else \
            [(lm_names[c], standby_names[c], 0), (standby_names[c], lm_names[c], 1)]
        for name, peer, replica in replicas:
            ctx.add(name, lambda c=c, spec=spec, workers=workers, peer=peer, replica=replica: LocalManager(
                c, spec.workers, workers, gm_names, heartbeat_us=heartbeat_us, recorder=ctx.recorder, faults=faults,
                peer_name=peer, replica=replica, launch_replies=cfg.launch_replies == "delta",
                users=fair is not None, gang_lease_us=lease_us))
    for c, spec in enumerate(cluster.clusters):
        standby_name = standby_names[c] if standby_names else None
        for w in spec.workers:
            ctx.add(f"w-{w.worker_id}", lambda w=w, c=c, standby_name=standby_name: MeghaWorker(
                w, ctx.recorder, lm_names[c], retry_us=request_timeout_us, standby_name=standby_name))
    return gm_names


def build_megha(ctx: Context) -> list[str]:
    """Megha over the cluster description: one LM per cluster, ``gms`` GMs."""
    return add_actors(ctx, ctx.cluster, int(ctx.params["gms"]))


def build_centralized(ctx: Context) -> list[str]:
    """The centralized baseline: the same machines as one cluster, one GM and one LM."""
    return add_actors(ctx, centralize(ctx.cluster), 1)


SURVIVES = ("crash", "restart", "partition", "heal", "slow", "restore", "loss")
CHECKS = tuple(deferred("fedemu.actors.megha.checks", name)
               for name in ("lm_matches_workers", "views_converge", "one_active_lm"))
ROLES = (Role("gm", ("gm",), "a global manager (a front end)"),
         Role("lm", ("lm",), "a local manager (lm-<c>; its standby replica, lm-<c>-standby, is named by name)"))
# what a fault search draws: standby LMs, gangs, users (2 or 3: fairness preempts under contention)
SEARCH = (("lm_standby", (False, True)), ("gang", (False, True)), ("users", (0, 2, 3)))
# gangs with users: round robin, no preemption; wait-free GMs have neither (a fixed wait-free drops them)
COMBINE = ((("gang", "users"), {"fairness": "off"}), (("refused_task", "users"), {"refused_task": "retry"}),
           (("refused_task", "gang"), {"refused_task": "retry"}))
PATHS = ("invalid_internal", "invalid_external", "repartitions", "failovers", "gm_rebuilds", "tasks_relaunched",
         "launches_retried", "duplicate_launches_suppressed", "preemption_attempts", "preemptions",
         "preemptions_refused", "repeated_completions", "gang_aborts", "gang_leases_expired", "gang_commits_rechecked")
PANELS = (
    Table("global managers", "gm", "GM", (
        Column("queue", ("queued",)), Column("flight", ("inflight",)), Column("inval.", ("failures",), "delta"),
        Column("launch", ("launches",)), Column("ext.", ("external",)), Column("age", ("view_age_us",), "max_ms")),
        colour_by="gm"),
    Table("local managers", "lm", "LM", (
        Column("free/total", ("free_units", "total_units"), "pair"),
        Column("invalid", ("invalid_internal", "invalid_external"), "sum"), Column("repart.", ("repartitions",)),
        Column("partitions", ("partitions", "repartitions"), "grid"))),
)
# the failover scenario's tour: the active lm-0 fails for good (its standby takes over), gm-0 crashes and
# restarts (it rebuilds from the LMs' snapshots), gm-0 is cut off from the new active LM
TOUR = ({"at_s": 2.0, "kind": "crash", "target": "lm-0"},
        {"at_s": 3.0, "kind": "crash", "target": "gm-0", "for_s": 1.0},
        {"at_s": 4.0, "kind": "partition", "sides": ["gm-0", "lm-0-standby"], "for_s": 2.0})


# Keys of the standby LMs' beats before they ran on connections: setting one is a one-line error saying why.
RETIRED_KEYS = tuple(
    (key, f"{key} is retired: a standby LM no longer {what}; it takes over when the fabric reports that the "
          "active crashed or is down (docs/connections.md, actors/megha/standby.py)")
    for key, what in (("lm_beat_s", "hears beats from the active"), ("lm_takeover_s", "pings an active whose beat "
                                                                                      "is overdue")))


def _declare(name: str, text: str, build, centralized: bool) -> Scheduler:
    """Megha, or the centralized baseline (one GM, one LM), with what the layers above need of it."""

    def gms(params: dict) -> int:
        return 1 if centralized else int(params["gms"])

    def size(params: dict) -> Size:
        """GMs and LMs (and the LMs' standbys)."""
        lms = 1 if centralized else int(params["lms"])
        return Size(gms(params) + lms * (2 if typed(MeghaParams, params).lm_standby else 1))

    def users(params: dict) -> Users | None:
        cfg = typed(MeghaParams, params)
        got = users_of(cfg, gms(params))
        return None if got is None else Users(got[0], got[1], cfg.user_assign, cfg.fairness == "on")

    def submission(params: dict) -> Submission:
        """Jobs go to a GM round robin or by task count, or to their user's GM; GMs report JobDone."""
        cfg, run_users = typed(MeghaParams, params), users(params)
        return Submission(cfg.job_to_gm, seconds_to_us(cfg.resubmit_s),
                          run_users.front_ends if run_users is not None else None)

    return Scheduler(name, text, build, config=MeghaParams, counters=COUNTERS,
                     invalid_counters=("invalid_internal", "invalid_external"), survives=SURVIVES, checks=CHECKS,
                     roles=ROLES, events=EVENTS, search=SEARCH, combine=COMBINE, paths=PATHS, size=size,
                     submission=submission, users=users, job_traits=job_traits, features=features, panels=PANELS,
                     tour=TOUR, retired=RETIRED_KEYS)


def job_traits(params: dict) -> dict:
    """Every job of a run with gang=true is a gang."""
    return {"gang": True} if typed(MeghaParams, params).gang else {}


def features(params: dict) -> frozenset:
    cfg = typed(MeghaParams, params)
    return frozenset(f for f, on in (("gangs", cfg.gang), ("users", cfg.users)) if on)


MEGHA = _declare("megha", "Megha (2022/2023 papers): GMs with eventually consistent views, LMs that validate",
                 build_megha, centralized=False)
CENTRALIZED = _declare("centralized", "the 2022 paper's centralized baseline: Megha with one GM and one LM over "
                       "every machine", build_centralized, centralized=True)
