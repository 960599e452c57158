"""Messages shared by the schedulers: task launch on workers, completion (a job is ``model.Job``).

Scheduler-specific messages live beside their actors (each scheduler package's ``messages``). Every
message is a frozen attrs class registered with a stable tag.
"""

from __future__ import annotations

from fedemu.fabric.messages import lean, message


@message("submit.next")
class SubmitNext:
    """Submitter's own timer: release the jobs arriving now."""


@lean
@message("worker.run")
class RunTask:
    """Run one task on the receiving worker; ``notify`` are the actors told when it finishes.

    ``owner`` is the scheduler index that placed it (a GM index in Megha, else -1); ``user`` the task's
    user (Megha with users, else -1: then it is not journaled)."""

    job_id: int
    index: int
    duration_us: int
    demand: tuple
    owner: int
    notify: tuple
    user: int = -1


@message("worker.timer")
class TaskTimer:
    """Worker's own timer: the task's duration has elapsed."""

    job_id: int
    index: int


@message("worker.finished")
class TaskFinished:
    """A worker tells ``notify`` actors that a task is done and its resources are free again."""

    job_id: int
    index: int
    demand: tuple
    owner: int
