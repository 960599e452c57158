"""Pigeon's and PigeonC's protocol events (``fabric.log.emit``), beside the common ones (``common.events``)."""

from fedemu.fabric.log import Event

RESERVED_PLACED = Event("reserved_placed", "info", "a master put a short task on a reserved worker: no "
                        "low-priority worker was idle")
TASK_PLACED = Event("task_placed", "debug", "a master placed a task: the queue it served (high/low) and the worker")

EVENTS = (RESERVED_PLACED, TASK_PLACED)
