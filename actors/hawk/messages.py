"""Hawk's protocol between schedulers and worker nodes (Hawk 2015; the Eagle authors' simulator).

A reservation (``Probe``) holds a place in a node's queue for one task of a job's probe group (its tasks
sharing one (constraints, demand)). Distributed schedulers send them for short jobs (batch probing); the
long-job scheduler sends one per task of a long job, each to the worker it chose. When a reservation is
served the node asks its scheduler for a task (``GetTask``, numbered by the node) and gets one (``Assign``)
or ``Cancel``. An idle node steals short reservations queued behind long ones (``StealAsk``/``Stolen``);
a restarted long-job scheduler asks the nodes for the long work they hold (``LoadAsk``/``Load``). The
task's end is the common ``TaskFinished``. Recovery sends ``Lost`` (a node whose thief broke lost the
reservations it lent); nothing else is sent without a fault.
"""

from __future__ import annotations

from fedemu.fabric.messages import message


@message("hawk.probe")
class Probe:
    """Scheduler -> node: a reservation for one task of ``job_id``'s probe group ``group``. ``estimate_us``
    is the job's estimated task time (its mean), ``long`` whether the job is long; ``constraints`` let a
    thief check it can run a stolen one."""

    job_id: int
    group: int
    demand: tuple
    constraints: tuple
    estimate_us: int
    long: bool


@message("hawk.get_task")
class GetTask:
    """Node -> scheduler: my reservation for (job_id, group) is served; give me a task. ``request`` numbers it
    on the node (its incarnation in the high bits); ``origin`` is the node the reservation was sent to (another
    than the asker when it was stolen)."""

    job_id: int
    group: int
    request: int
    origin: int


@message("hawk.assign")
class Assign:
    """Scheduler -> node: run this task now (the late-bound answer to ``GetTask`` ``request``)."""

    job_id: int
    group: int
    index: int
    duration_us: int
    demand: tuple
    request: int


@message("hawk.cancel")
class Cancel:
    """Scheduler -> node: no task for ``request`` (every task of (job_id, group) is bound); drop it."""

    job_id: int
    group: int
    request: int


@message("hawk.steal_ask")
class StealAsk:
    """Idle node -> node of the general partition: give me short reservations queued behind long ones that I
    can run (``provides``: my constraints; ``capacity``: my capacity vector)."""

    provides: tuple
    capacity: tuple


@message("hawk.stolen")
class Stolen:
    """Victim -> thief: the reservations it gives away, each (scheduler, job_id, group, demand, constraints,
    estimate_us, origin); empty: nothing to steal."""

    reservations: tuple


@message("hawk.lost")
class Lost:
    """Victim -> scheduler (recovery only): ``count`` reservations of (job_id, group) that it lent to a thief
    whose connection broke may be lost; they were sent to ``origin``."""

    job_id: int
    group: int
    origin: int
    count: int


@message("hawk.load_ask")
class LoadAsk:
    """Restarted long-job scheduler -> node (recovery only): what long work do you hold?"""


@message("hawk.load")
class Load:
    """Node -> long-job scheduler: its long work, each (job_id, index or -1 when queued, estimate_us, started_us
    or -1)."""

    work: tuple
