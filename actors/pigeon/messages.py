"""Pigeon's protocol between distributors, masters and workers (PigeonC uses the same messages).

The paper's path (Pigeon 2019, 2.2), all a run without faults sends: a distributor sends each master a
``TaskBatch`` of the job's tasks for its group; the master ``Launch``es a task on an idle worker; the
worker sends its result (``TaskFinished``, ``common.protocol``) to the job's distributor and an ``Idle``
notice to its master. The master updates its second master periodically (``Sync``, "Master Failure
Recovery"), with what changed since the last update.

Messages travel on connections (docs/connections.md): nothing is lost, duplicated or reordered while one
is up, so none is acknowledged, numbered or resent on a timer. Recovery starts from the fabric's notice
that a connection broke, and adds: ``Claim`` (who is master, in which epoch), ``Status`` and ``Probe``
(what a worker runs), ``Outstanding`` (what a distributor still waits for from a group), ``Suspect`` and
``MasterPing`` (is the master alive?), ``Hello`` (a restarted member) and ``Refused`` (a launch that does
not fit what the worker runs).
"""

from __future__ import annotations

from fedemu.fabric.messages import message


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


@message("pigeon.launch")
class Launch:
    """Master -> worker: run this task, and send its result to ``distributor``. ``seq`` numbers the
    master's launches to this worker in ``epoch``, so that a status tells the launches still on their way."""

    job_id: int
    index: int
    duration_us: int
    demand: tuple
    distributor: int
    epoch: int
    seq: int


@message("pigeon.idle")
class Idle:
    """Worker -> master: the task ended, its resources are free (the paper's idle notice)."""

    job_id: int
    index: int
    demand: tuple


@message("pigeon.refused")
class Refused:
    """Worker -> master: the launch does not fit what the worker runs; ``running`` is (job, index, demand,
    distributor) of each task it does run and ``last`` its latest (epoch, seq) launch, as in ``Status``."""

    job_id: int
    index: int
    running: tuple
    last: tuple


@message("pigeon.status")
class Status:
    """Worker -> master: everything it runs (``running``: (job, index, demand, the distributor its result
    goes to)), its latest (epoch, seq)
    launch, and ``answers``: the launch count of the ``Probe`` it answers (0: none); a launch up to that
    count it does not run was lost."""

    running: tuple
    last: tuple
    answers: int


@message("pigeon.probe")
class Probe:
    """Master -> worker: send me your ``Status`` (its connection broke, or it spoke while taken for down);
    ``seq``: the launches the master had sent the worker by then."""

    epoch: int
    seq: int


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
    """Master -> second master: what changed among the group's waiting tasks since the last update
    (``sync``). ``seq`` numbers the syncs of the epoch; ``base`` is the sync this one follows (0: the whole
    state). ``queued``: (job, index, duration, constraints, demand, since, distributor, class) per waiting
    task that changed; ``gone_queued``: (job, index) of those the second master holds that no longer wait."""

    epoch: int
    seq: int
    base: int
    queued: tuple
    gone_queued: tuple


@message("pigeon.outstanding")
class Outstanding:
    """Distributor -> the group's master: every task the distributor sent to ``group`` whose result it still
    waits for, as (job, short, demand, index, duration, constraints): to a new master, or after a
    connection that may have lost some of them broke."""

    group: int
    epoch: int
    tasks: tuple


@message("pigeon.ping")
class MasterPing:
    """Is the master alive? The receiver answers with the ``Claim`` it believes."""

    group: int


@message("pigeon.suspect")
class Suspect:
    """Distributor -> group member: your master's connection to me broke; check it, and take over if it is
    gone."""

    group: int


@message("pigeon.hello")
class Hello:
    """A restarted group member -> every member: I am back with nothing (the master requeues what I ran)."""

    group: int


@message("pigeon.tick")
class MasterTick:
    """Master's own timer: update the second master with what changed."""

    epoch: int


@message("pigeon.suspect_timer")
class SuspectTimer:
    """A member's own timer: did the master answer my ping (stage 1), did anyone take over (stage 2)?"""

    stage: int
    key: tuple


@message("pigeon.recover_timer")
class RecoverTimer:
    """A new master's own timer: stop waiting for the members that have not answered its claim."""

    epoch: int


@message("pigeon.stranded_timer")
class StrandedTimer:
    """A master's own timer, while waiting tasks have no live worker to run them: hand those back."""

    epoch: int


@message("pigeon.returned")
class Returned:
    """Master -> distributor: tasks of ``group`` that no worker of it can run now (every one is down), as
    ``Outstanding`` lists them; the distributor sends them to another group."""

    group: int
    tasks: tuple


@message("pigeon.watch")
class DistWatch:
    """Distributor's own timer, while a group's master is suspected: alert its members again."""

    round: int
