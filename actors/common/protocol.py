"""Messages shared by the schedulers: job submission, task launch on workers, completion.

Scheduler-specific messages live beside their actors (each scheduler package's ``messages``). Every message is a frozen attrs class registered with a stable tag.
"""

from __future__ import annotations

from fedemu.fabric.messages import lean, message, register
from fedemu.model import Job

register(Job, "job")
_JOB_FIELDS = Job._fedemu_fields
_TRAILING = (0.0, -1, False)  # the defaults of Job's last fields: alpha, user, gang


def _job_fields(job: Job) -> tuple:
    """A job's journal fields; its last three (alpha, user, gang) only up to the last that is not its
    default, so runs without them keep their bytes (and digests), and replay rebuilds the defaults."""
    fields = _JOB_FIELDS(job)
    end = len(fields)
    base = end - len(_TRAILING)
    while end > base and fields[end - 1] == _TRAILING[end - 1 - base]:
        end -= 1
    return fields if end == len(fields) else fields[:end]


Job._fedemu_fields = staticmethod(_job_fields)


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
