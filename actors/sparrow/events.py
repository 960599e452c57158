"""Sparrow's protocol events (``fabric.log.emit``), beside the common ones (``common.events``)."""

from fedemu.fabric.log import Event

LATE_BIND_CANCEL = Event("late_bind_cancel", "debug", "a scheduler answered a node's request with Cancel: the job "
                         "group's tasks are all bound (late binding)")

EVENTS = (LATE_BIND_CANCEL,)
