"""Sparrow's protocol between schedulers and worker nodes: probes, late binding, cancels.

A probe reserves a place in a node's FIFO queue for one task of a job's probe group (the job's tasks
sharing one (constraints, demand)); when it reaches the head and the node has room, the node asks the
scheduler for a task, and the scheduler answers with one (``Assign``) or with ``Cancel``.
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
    """Node -> scheduler: my reservation for (job_id, group) reached the head; give me a task."""

    job_id: int
    group: int


@message("sparrow.assign")
class Assign:
    """Scheduler -> node: run this task now (the late-bound answer to ``GetTask`` for (job_id, group))."""

    job_id: int
    group: int
    index: int
    duration_us: int
    demand: tuple


@message("sparrow.cancel")
class Cancel:
    """Scheduler -> node: every task of (job_id, group) is placed; drop the reservation."""

    job_id: int
    group: int
