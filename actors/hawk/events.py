"""Hawk's protocol events (``fabric.log.emit``), beside the common ones (``common.events``)."""

from fedemu.fabric.log import Event

HAWK_CANCEL = Event("hawk_cancel", "debug", "a scheduler answered a node's request with Cancel: the job group's "
                    "tasks are all bound (late binding)")
STEAL = Event("steal", "debug", "an idle node stole short reservations queued behind long ones (count: how many, "
              "victim: from whom)")
LONG_PLACED = Event("long_placed", "debug", "the long-job scheduler placed a long job's tasks on the workers with "
                    "the least estimated waiting time (workers: how many distinct)")

EVENTS = (HAWK_CANCEL, STEAL, LONG_PLACED)
