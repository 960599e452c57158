"""How an actor's trio task sleeps until the fabric wakes it, at the least cost trio allows.

A parked actor waits in trio's lowest-level trap (what ``trio.lowlevel.wait_task_rescheduled`` does),
and is resumed with ``trio.lowlevel.reschedule(task, WAKE)``. Per park, the public call allocates a
coroutine, a trap message and an Outcome; here the trap message and the Outcome are made once and
reused, which halves the cost of a task step (measured: 3.3 us -> 1.5 us at 10,000 tasks). The trap
message class is trio-internal; if a trio release moves it, ``wait`` falls back to the public call.
"""

from __future__ import annotations

import types

import outcome
import trio


def _abort(_raise_cancel):
    return trio.lowlevel.Abort.SUCCEEDED


class _Wake(outcome.Value):
    """A Value(None) that may be unwrapped any number of times, so one instance serves every wake-up."""

    __slots__ = ()

    def unwrap(self):
        return None


class _Stop(outcome.Value):
    """Sent to every parked actor when the run is over: ``wait`` returns it, and the task returns
    normally (cheaper than cancelling thousands of tasks, which raises in each)."""

    __slots__ = ()

    def unwrap(self):
        return self


WAKE = _Wake(None)
STOP = _Stop(None)

try:
    from trio._core._traps import WaitTaskRescheduled as _TrapMessage

    PARK = _TrapMessage(_abort)  # yield it from a types.coroutine; it resumes with WAKE, STOP or an Error
except (ImportError, TypeError):  # pragma: no cover - a trio without the internal class
    PARK = None


if PARK is not None:

    @types.coroutine
    def wait():
        """Sleep until rescheduled; returns None, or STOP when the run is over; raises what the waker
        sent otherwise (a crash, trio's cancellation)."""
        return (yield PARK).unwrap()

else:  # pragma: no cover

    def wait():
        return trio.lowlevel.wait_task_rescheduled(_abort)
