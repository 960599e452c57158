"""Megha's protocol events (``fabric.log.emit``), beside the common ones (``common.events``)."""

from fedemu.fabric.log import Event

LAUNCH_INVALID = Event("launch_invalid", "info", "an LM refused a GM's launch: the worker no longer has the "
                       "demand free (the GM's view was stale); external: it was a repartition request")
REPARTITION = Event("repartition", "info", "an LM granted a launch on another GM's partition: the resources move "
                    "to the requester until the task ends")
PREEMPTION = Event("preemption", "info", "an LM stopped a user's tasks on a worker to launch another user's task "
                   "there (global fairness): the victims go back to their GMs' queues")
PREEMPT_REFUSED = Event("preempt_refused", "info", "an LM refused a GM's preemption request: its true state "
                        "differs from the GM's view (the victims no longer run there, or a worker has room)")
LAUNCH_REQUEUED = Event("launch_requeued", "debug", "a GM heard its launch failed: it learns the LM's changes and "
                        "queues the task again")

EVENTS = (LAUNCH_INVALID, REPARTITION, PREEMPTION, PREEMPT_REFUSED, LAUNCH_REQUEUED)
