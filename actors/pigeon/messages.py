"""Pigeon's protocol between distributors, masters and workers (PigeonC uses the same messages).

Fault-free path: a distributor sends ``TaskBatch`` (acknowledged by ``BatchAck``); the master
``Launch``es a task on a worker; the worker sends ``TaskFinished`` (``protocol``) to the job's
distributor (acknowledged by ``ResultAck``, retried until then) and an ``Idle`` notice to its master.
Recovery adds ``Sync`` (master -> second master, with ``SyncReset``), ``Claim`` (who is master, the
election), ``Status`` and ``Outstanding`` (what the workers run and the distributors still wait for, to
rebuild a master), ``Probe``, ``MasterPing``, ``Suspect``, ``Refused`` and ``Hello``. Every state message
from a worker carries ``told``, its count of such messages, so a master applies each once and sees a gap
(a lost one). ``told`` keeps the worker's incarnation in its high bits (``TOLD_SHIFT``), so it grows
across restarts: a master that missed a restarted worker's ``Hello`` still tells the new incarnation's
messages from the old one's late ones.
"""

from __future__ import annotations

from fedemu.fabric.messages import message

TOLD_SHIFT = 32  # ``told`` is incarnation << TOLD_SHIFT | the incarnation's count of state messages
RESULT_KEEP_US = 300 * 10**6  # an unacknowledged result (a worker's, or one a master resends for a dead
# worker) is given up only after its tries and this long from its first send, whatever the retry period:
# a partition shorter than this loses no result; a distributor dead for good is given up after it


def told_incarnation(told: int) -> int:
    """The worker incarnation that sent a message numbered ``told``."""
    return told >> TOLD_SHIFT


@message("pigeon.tasks")
class TaskBatch:
    """Distributor -> master: this job's tasks for your group, handled one by one in order.

    ``short`` is the job's class (high priority when True); the distributor is the message's sender.
    ``constraints[k]`` belongs to task ``indices[k]``."""

    job_id: int
    short: bool
    demand: tuple
    indices: tuple
    durations: tuple
    constraints: tuple


@message("pigeon.batch_ack")
class BatchAck:
    """Master -> distributor: the job's batch for ``group`` is queued (job -1: the ``Outstanding`` list)."""

    job_id: int
    group: int
    epoch: int


@message("pigeon.launch")
class Launch:
    """Master -> worker: run this task; ``seq`` numbers the master's launches to this worker."""

    job_id: int
    index: int
    duration_us: int
    demand: tuple
    distributor: int
    epoch: int
    seq: int


@message("pigeon.idle")
class Idle:
    """Worker -> master: the task ended (its resources are free); ``told`` as in the module docstring;
    ``unacked``: the (job, index) of its results no distributor has acknowledged yet (the master
    resends those itself if the worker dies)."""

    job_id: int
    index: int
    demand: tuple
    told: int
    unacked: tuple


@message("pigeon.refused")
class Refused:
    """Worker -> master: the launch does not fit what the worker runs; ``running`` is (job, index, demand)
    of each task it does run, ``unacked`` the tasks it finished lately (as in ``Status``), ``last`` its
    latest (epoch, seq) launch."""

    job_id: int
    index: int
    running: tuple
    last: tuple
    told: int
    unacked: tuple


@message("pigeon.status")
class Status:
    """Worker -> master: everything it runs (``running``: (job, index, demand)), the tasks it finished
    lately (``unacked``: (job, index)), its latest launch, ``told``, and ``answers``: the launch count of
    the ``Probe`` it answers (0: none); a launch up to that count it does not run was lost."""

    running: tuple
    unacked: tuple
    last: tuple
    told: int
    answers: int


@message("pigeon.probe")
class Probe:
    """Master -> worker: send me your ``Status`` (a task is overdue, or an idle notice went missing);
    ``seq``: the launches the master had sent the worker by then."""

    epoch: int
    seq: int


@message("pigeon.result_ack")
class ResultAck:
    """Distributor -> worker: your ``TaskFinished`` for (job, index) arrived."""

    job_id: int
    index: int


@message("pigeon.claim")
class Claim:
    """``master`` (an actor id, its ``rank`` in the group) is the group's master for ``epoch``, declared at
    ``declared_us``; ``second`` its second master (-1: none). The better claim is the higher
    (epoch, -declared_us, -rank): a later epoch, then the earliest declaration, then the lowest rank."""

    group: int
    epoch: int
    declared_us: int
    rank: int
    master: int
    second: int


@message("pigeon.sync")
class Sync:
    """Master -> second master: the group's task state (``sync``). ``seq`` numbers the syncs of
    the epoch; ``base`` is the sync this one follows (0: the full state). ``queued``: (job, index,
    duration, constraints, demand, since, distributor, class) per waiting task that changed;
    ``gone_queued``: (job, index) no longer waiting; ``running``: (worker rank, job, index, duration,
    constraints, demand, distributor, class) per changed running task; ``gone_running``: (rank, job,
    index) no longer running; ``next_us``: when the next sync is due (0: none, the master is idle)."""

    epoch: int
    seq: int
    base: int
    queued: tuple
    gone_queued: tuple
    running: tuple
    gone_running: tuple
    next_us: int


@message("pigeon.sync_reset")
class SyncReset:
    """Second master -> master: a sync did not follow the last one I applied; send the full state."""

    epoch: int


@message("pigeon.outstanding")
class Outstanding:
    """Distributor -> a new master: every task the distributor sent to ``group`` whose result it still
    waits for, as (job, short, demand, index, duration, constraints)."""

    group: int
    epoch: int
    tasks: tuple


@message("pigeon.ping")
class MasterPing:
    """Is the master alive? The receiver answers with the ``Claim`` it believes."""

    group: int


@message("pigeon.suspect")
class Suspect:
    """Distributor -> group member: your master does not answer me; check, and take over if it is gone."""

    group: int


@message("pigeon.hello")
class Hello:
    """A restarted group member -> every member: I am back with nothing (the master requeues what I ran)."""

    group: int
    told: int


@message("pigeon.tick")
class MasterTick:
    """Master's own timer: sync the second master, look for overdue tasks and silent workers."""

    epoch: int


@message("pigeon.watch")
class Watchdog:
    """Second master's own timer: has the master's next sync come?"""

    epoch: int


@message("pigeon.suspect_timer")
class SuspectTimer:
    """A member's own timer: did the master answer my ping (stage 1), did anyone take over (stage 2)?"""

    stage: int
    key: tuple


@message("pigeon.recover_timer")
class RecoverTimer:
    """A new master's own timer: re-ask whoever has not answered its claim, or finish recovering."""

    epoch: int
    round: int


@message("pigeon.result_timer")
class ResultTimer:
    """Worker's own timer: resend the results no distributor has acknowledged."""


@message("pigeon.dist_tick")
class DistTick:
    """Distributor's own timer: resend unacknowledged batches, ping silent masters."""
