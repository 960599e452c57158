"""How an actor's trio task sleeps until the fabric wakes it, at the least cost trio allows.

A parked actor waits in trio's lowest-level trap (what ``trio.lowlevel.wait_task_rescheduled`` does),
and is resumed with ``trio.lowlevel.reschedule(task, WAKE)``. Per park, the public call allocates a
coroutine, a trap message and an Outcome; here the trap message and the Outcome are made once and
reused, which halves the cost of a task step (measured: 3.3 us -> 1.5 us at 10,000 tasks). The trap
message class is trio-internal; if a trio release moves it, ``wait`` falls back to the public call
(``wait_public``), at about twice the cost per park but with the same results.

trio is imported by the first run on its engine (``use_trio``): a run on the direct engine, which steps the
same tasks and ignores what they yield, never imports it (about 0.2 billion instructions of a run).
"""

from __future__ import annotations

import types

import outcome


def _abort(_raise_cancel):
    import trio

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


def wait_public():
    """Sleep until rescheduled, through trio's public call (a coroutine made per park); returns what
    ``wait`` returns. Used when this trio has no usable trap class; tests force it."""
    import trio

    return trio.lowlevel.wait_task_rescheduled(_abort)


@types.coroutine
def _wait_trap():
    """Sleep until rescheduled; returns None, or STOP when the run is over; raises what the waker
    sent otherwise (a crash, trio's cancellation)."""
    return (yield PARK).unwrap()


def _trap():
    """trio's trap message for a park, made once; None when this trio has no such class (tested up
    to the version bound in pyproject.toml), and then every park takes the public call."""
    try:
        from trio._core._traps import WaitTaskRescheduled
        return WaitTaskRescheduled(_abort)
    except (ImportError, TypeError):
        return None


class _Unarmed:
    """What a parked task yields before any trio run: the direct engine's loop ignores it."""

    __slots__ = ()


UNARMED = _Unarmed()

# The kernel reads PARK at each actor task's start (``Fabric._handle``) and calls wait: set PARK to None and wait to
# wait_public to run on the public call alone (tests/test_fabric_parking.py does, and compares digests).
PARK = UNARMED
wait = _wait_trap


def trio_reschedule():
    """How to wake a parked task in this trio run: the run's own ``Runner.reschedule``, which
    ``trio.lowlevel.reschedule`` looks up and calls on every wake-up (a frame fewer per wake-up: about
    1% of a sparse run on trio); the public call when this trio keeps its runner elsewhere."""
    import trio

    try:
        from trio._core._run import GLOBAL_RUN_CONTEXT

        return GLOBAL_RUN_CONTEXT.runner.reschedule
    except (ImportError, AttributeError):
        return trio.lowlevel.reschedule


def use_trio() -> None:
    """A trio run begins: from now on a park yields trio's trap (or takes the public call, if this trio has none)."""
    global PARK, wait
    if PARK is UNARMED:
        PARK = _trap()
        if PARK is None:
            wait = wait_public
