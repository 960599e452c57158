"""Pigeon's protocol between Distributors and Masters (PigeonC uses the same messages).

Workers are the generic ``actors.worker.Worker``: a master launches with ``RunTask`` and the worker sends
``TaskFinished`` both to the job's distributor (the result) and to its master (the idle notice).
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
