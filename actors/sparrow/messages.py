"""Sparrow's protocol between schedulers and worker nodes: probes, late binding, cancels, and recovery.

A probe reserves a place in a node's FIFO queue for one task of a job's probe group (the job's tasks
sharing one (constraints, demand)); when it reaches the head and the node has room, the node asks the
scheduler for a task (``GetTask``, numbered by the node: ``request``), and the scheduler answers with one
(``Assign``) or with ``Cancel``, echoing the number. A repeated request gets the same answer again, so a
lost answer is repaired by the node asking again and a duplicated one binds nothing twice.

Recovery: the scheduler acknowledges every result (``ResultAck``; the node resends ``TaskFinished`` until
it is); a result overdue by the grace gets a ``TaskQuery`` the node answers with ``TaskStatus`` (or the
result itself); a node refuses an answer to a request it gave up on when it has no room (``Reject``).
"""

from __future__ import annotations

from fedemu.fabric.messages import message


@message("sparrow.probe")
class Probe:
    """Scheduler -> node: a reservation for one task of ``job_id``'s probe group ``group``."""

    job_id: int
    group: int
    demand: tuple


@message("sparrow.get_task")
class GetTask:
    """Node -> scheduler: my reservation for (job_id, group) reached the head; give me a task. ``request``
    numbers it on the node (its incarnation in the high bits), and every answer echoes it."""

    job_id: int
    group: int
    request: int


@message("sparrow.assign")
class Assign:
    """Scheduler -> node: run this task now (the late-bound answer to ``GetTask`` ``request``)."""

    job_id: int
    group: int
    index: int
    duration_us: int
    demand: tuple
    request: int


@message("sparrow.cancel")
class Cancel:
    """Scheduler -> node: no task for ``request`` (every task of (job_id, group) is bound); drop it."""

    job_id: int
    group: int
    request: int


@message("sparrow.reject")
class Reject:
    """Node -> scheduler: an ``Assign`` for a request this node gave up on, and it has no room now."""

    job_id: int
    index: int
    request: int


@message("sparrow.result_ack")
class ResultAck:
    """Scheduler -> node: your ``TaskFinished`` for (job_id, index) arrived; stop resending it."""

    job_id: int
    index: int


@message("sparrow.task_query")
class TaskQuery:
    """Scheduler -> node: the result of (job_id, index), bound by ``request``, is overdue: where is it?"""

    job_id: int
    index: int
    request: int


@message("sparrow.task_status")
class TaskStatus:
    """Node -> scheduler: the answer to ``TaskQuery``: the task ends at ``ends_us`` (it runs here, or its
    request is still being asked for: then -1 and ``pending``), or the node knows nothing of it."""

    job_id: int
    index: int
    request: int
    ends_us: int
    pending: bool


@message("sparrow.tick")
class Tick:
    """A scheduler's or node's own timer: some of its timeouts are due (``common.deadlines``)."""


TICK = Tick()  # the one instance both carry (it has no fields)
