"""The direct engine: the trio engine's actor tasks, windows and wake-ups, stepped by a plain loop.

Every actor's task is the same coroutine (``Fabric._actor_main``) parking in the same trap, and the kernel
wakes it through ``Fabric._reschedule`` as under trio; here a wake-up appends the task to a deque, and the
loop sends each its wake-up in turn. trio's scheduler costs a pass per window (its run queue, its I/O
poll, its deadlines), and a window holds one or two entries on a sparse run; this loop costs a send. The
journal, the queue and every draw are the same, because the kernel never let trio's order reach them
(``kernel``): tests/test_fabric_engines.py runs every scheduler, fault-free and under each kind of fault,
on both and compares the journals byte for byte. trio stays the default (``Fabric.engine``).
"""

from __future__ import annotations

from collections import deque

from . import parking
from .collector import gc_paused

_DRIVER = object()  # what ``Fabric._end`` wakes when the run is over: the loop has no driver task


def run(fabric, until_us: int | None = None) -> None:
    """``Fabric.run`` without trio: the same steps, then the same error, if an actor raised one."""
    ready: deque = deque()
    tasks: list = []

    def reschedule(task, value=parking.WAKE) -> None:
        ready.append((task, value))

    def start(actor) -> None:
        task = fabric._actor_main(actor)
        actor._task = task
        tasks.append(task)
        ready.append((task, None))

    fabric._reschedule, fabric._start_task, fabric._driver = reschedule, start, _DRIVER
    fabric._begin(until_us)
    with gc_paused():
        try:
            _drive(fabric, ready)
        finally:
            for task in tasks:  # those still parked (after an error) end here; the others are done
                task.close()
            fabric._reschedule, fabric._start_task, fabric._driver = None, None, None
            fabric._ended()
    if fabric._error is not None:
        raise fabric._error


def _drive(fabric, ready: deque) -> None:
    """As ``Fabric._drive``: start-time faults, the actors, their steps until the run is over; then let
    every task return."""
    fabric._window_end = fabric.now + 1
    fabric._start_faults()
    fabric._woken = [fabric._spawn(idx) for idx in range(len(fabric._names)) if fabric._up[idx]]
    fabric._driver_waiting = fabric._running > 0
    if not fabric._driver_waiting:  # no actors at all
        fabric._advance(None)
    _step(fabric, ready)
    if fabric._error is None and fabric._stop_actors():
        _step(fabric, ready)


def _step(fabric, ready: deque) -> None:
    """Send each woken task its wake-up until none is left (the run is over) or one raised."""
    pop = ready.popleft
    while ready:
        task, value = pop()
        if task is _DRIVER:
            continue
        try:
            task.send(value)
        except StopIteration:
            pass
        if fabric._error is not None:
            return
