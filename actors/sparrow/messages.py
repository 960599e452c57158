"""Sparrow's protocol between schedulers and worker nodes: probes, late binding and cancels (Sparrow 2013).

A probe reserves a place in a node's FIFO queue for one task of a job's probe group (the job's tasks
sharing one (constraints, demand)); when it reaches the head and the node has room, the node asks the
scheduler for a task (``GetTask``, numbered by the node: ``request``), and the scheduler answers with one
(``Assign``) or with ``Cancel``, echoing the number. The node reports the task's end with the common
``TaskFinished``. Nothing else is sent: messages travel on connections, and recovery starts from the
fabric's notices (``recovery``); a request asked again after a break gets the same answer again.
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
