"""Megha's protocol between Global Managers (GMs) and Local Managers (LMs).

State changes travel as absolute values: ``workers`` are LM-local worker indices and ``frees`` the
free-capacity vectors the LM holds for them, so applying a change twice is harmless.
"""

from __future__ import annotations

from fedemu.fabric.messages import lean, message

RETRIES = 10  # a GM's unanswered asks of an LM before it moves all its work there elsewhere (gm_recovery)


@lean
@message("megha.launch")
class Launch:
    """GM -> LM: run this task on ``worker`` (LM-local). ``external`` asks for a repartition; ``attempt``
    is the GM's number for this launch, echoed by a failure reply."""

    job_id: int
    index: int
    duration_us: int
    demand: tuple
    worker: int
    gm: int
    external: bool
    attempt: int
    user: int = -1  # the task's user (runs with users only)


@lean
@message("megha.launch_failed")
class LaunchFailed:
    """LM -> GM: the requested resources are gone (launch ``attempt``), or the worker is ``down``; here is
    every change that GM has not seen."""

    job_id: int
    index: int
    attempt: int
    lm: int
    workers: tuple
    frees: tuple
    holders: tuple = ()  # with users: per worker of ``workers``, its running tasks as (job, index, user, demand)
    down: bool = False  # the worker is down, not busy: no end of a task there will be reported (gm_waiting)


@lean
@message("megha.launch_ok")
class LaunchOk:
    """LM -> GM (``launch_replies=delta``): the launch is valid and under way; here is every change that
    GM has not seen since its last heartbeat or launch reply (the workshop paper: GMs "collect partial
    state information about an entire LM cluster after every launch request")."""

    job_id: int
    index: int
    lm: int
    workers: tuple
    frees: tuple
    holders: tuple = ()


@message("megha.task_completed")
class TaskCompleted:
    """LM -> GM: one of that GM's tasks finished; ``free`` is the worker's free vector now."""

    job_id: int
    index: int
    lm: int
    worker: int
    free: tuple


@lean
@message("megha.heartbeat")
class Heartbeat:
    """LM -> GM, periodic: the changes since the last status update to this GM (a delta), cut at log
    position ``upto`` of LM epoch ``incarnation``."""

    lm: int
    incarnation: int
    workers: tuple
    frees: tuple
    upto: int
    holders: tuple = ()  # with users: who holds each changed worker (the per-user consumption delta)


@message("megha.heartbeat_tick")
class HeartbeatTick:
    """LM's own timer."""


@message("megha.launch_accepted")
class LaunchAccepted:
    """LM -> GM: a launch of a task the LM already runs (a retry or a duplicate); it ends near ``end_us``.
    ``free`` is the requested worker's free vector now (the GM had taken the demand from it)."""

    job_id: int
    index: int
    lm: int
    worker: int
    free: tuple
    end_us: int


@message("megha.task_lost")
class TaskLost:
    """LM -> GM: the task's worker stayed down past worker_down_timeout_s and the launch can no longer arrive
    there: schedule the task again."""

    job_id: int
    index: int
    lm: int


@message("megha.snapshot_request")
class SnapshotRequest:
    """GM -> LM, from a restarted (stateless) GM, or one whose connection with the LM broke: send me your
    whole state."""

    gm: int


@lean
@message("megha.snapshot")
class Snapshot:
    """LM -> GM: every worker's free vector (a full state, not a delta), as of log position ``upto``."""

    lm: int
    incarnation: int
    workers: tuple
    frees: tuple
    upto: int
    holders: tuple = ()


@message("megha.adopt_job")
class AdoptJob:
    """GM -> LM, for a resubmitted job: which of its tasks run or ran here? Their owner is now ``gm``."""

    job_id: int
    gm: int


@message("megha.job_tasks")
class JobTasks:
    """LM -> GM: the job's tasks running here, as (index, worker, end_us), and those done here."""

    lm: int
    job_id: int
    running: tuple
    done: tuple


@lean
@message("megha.probe")
class Probe:
    """LM -> worker: what do you run, and which of ``keys`` ((job, index) pairs) have you finished?
    ``everything``: list every finished task (a restarted LM rebuilding its state). ``epoch``: an active
    replica's epoch (``lm_standby``; 0 otherwise), so a worker whose ``Takeover`` was lost follows it."""

    keys: tuple
    everything: bool
    epoch: int = 0


@message("megha.worker_status")
class WorkerStatus:
    """Worker -> LM: what it runs, as (job, index, duration_us, demand, owner, end_us[, user]), and the asked
    tasks it finished. Sent on a probe, on a refused launch, and by a restarted worker (registration)."""

    incarnation: int
    running: tuple
    done: tuple


@message("megha.registered")
class Registered:
    """LM -> worker: your registration after a restart was handled; I am the active LM of ``epoch``."""

    epoch: int


# ---- active-standby LMs (``lm_standby``): see ``standby`` -------------------------------------
@message("megha.takeover")
class Takeover:
    """New active LM -> worker: follow me from ``epoch`` on, and tell me everything you run and ran
    (answered with a ``WorkerStatus`` listing every finished task, or ``Fenced`` if the worker knows a
    later epoch)."""

    epoch: int


@message("megha.fenced")
class Fenced:
    """Worker or GM -> LM: your epoch is stale; the active LM's epoch is ``epoch`` (the sender steps down)."""

    epoch: int


@message("megha.join")
class Join:
    """A standby LM (at the start, restarted, or one that stepped down) -> its peer: I am your standby (this
    opens the connection whose break tells the standby that the active failed)."""

    epoch: int


@message("megha.joined")
class Joined:
    """Active LM -> a joining standby: I am the active LM of ``epoch``."""

    epoch: int


@message("megha.not_active")
class NotActive:
    """Standby LM replica -> a GM that sent it what only the active acts on (a launch, a preemption, a gang's
    reserve, commit or release): I am the standby of LM ``lm`` (I know of ``epoch``), and I drop it."""

    lm: int
    epoch: int


@message("megha.gm_timer")
class GmTimer:
    """GM's own timer for a retry: ``what`` is "snapshots", "resync" (``key``: the LM) or "adopt" (``key``:
    the job); ``nonce`` says which arming (a later one for the same ``what`` and ``key`` supersedes it)."""

    what: str
    key: int
    nonce: int


@message("megha.lm_timer")
class LmTimer:
    """LM's own timer: ``what`` is "probe", "down" or "stop" (``key``: the worker), or "rebuild" (``key`` -1,
    ``nonce``: the ask's attempt; only the one due when the last ask wanted it acts); ``nonce`` says which
    arming."""

    what: str
    key: int
    nonce: int


# ---- global fairness (Megha 2022, IV-C; see gm_fairness and lm_fairness) --------------------------------
@message("megha.preempt")
class Preempt:
    """GM -> LM: stop ``victims`` ((job, index) pairs of ``victim_user``, running on ``worker``) and launch
    this task (of ``user``, needing ``constraints``) there in their place; ``attempt`` as in ``Launch``."""

    job_id: int
    index: int
    duration_us: int
    demand: tuple
    worker: int
    gm: int
    external: bool
    attempt: int
    user: int
    constraints: tuple
    victim_user: int
    victims: tuple


@message("megha.preempt_failed")
class PreemptFailed:
    """LM -> GM: the preemption request ``attempt`` failed verification (``why``); here is every change
    that GM has not seen, with who holds each worker."""

    job_id: int
    index: int
    attempt: int
    lm: int
    why: str
    workers: tuple
    frees: tuple
    holders: tuple


@message("megha.preempted")
class Preempted:
    """LM -> the task's owner GM: launch ``attempt`` of the task was preempted on ``worker`` (its work is
    lost): queue it again, from scratch."""

    job_id: int
    index: int
    lm: int
    worker: int
    attempt: int


@message("megha.stop_task")
class StopTask:
    """LM -> worker: stop these tasks ((job, index) pairs) now; their work is lost."""

    keys: tuple


@message("megha.stopped")
class Stopped:
    """Worker -> LM, answering ``StopTask``: none of ``keys`` runs here now; ``finished`` of them had
    finished before the stop came (their ``TaskFinished`` went first on the same link)."""

    keys: tuple
    finished: tuple
