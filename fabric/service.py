"""Single-server actors: handling a message occupies a scheduler component for a virtual service time.

Only actors whose class names a ``COST_ROLE`` in the run's cost model (``costs``) are servers; without a
model (``cost_model=zero``) the kernel never comes here and runs exactly as before. The semantics:

- A message or timer that arrives at a server at time t waits in its mailbox, in arrival order (FIFO),
  and is handled at ``start = max(t, busy_until)``. Its handler sees ``now == start`` and
  ``arrived == t``.
- Its sends are held and leave at ``end = start + service``, the end of its service: ``service`` is
  the model's fixed cost for the message kind plus the units the handler charged (``Actor.charge``).
  Then ``busy_until = end``. A timer set with delay d is set when the service starts and fires at
  ``start + d``, so that timers aimed at a time (the LMs' heartbeat ticks, aligned to the period)
  still fire then; one that falls inside the service waits in the mailbox like any entry, and its
  handler sees ``arrived`` = the time it was set for.
- The kernel delivers in windows [t0, t0 + L) (``kernel``): no other actor's message can reach the
  server before the window ends, so an entry whose start falls inside the window is handled in it. An
  entry whose start falls at or after the window's end waits in the actor's backlog, and one resume
  entry (rank ``RANK_RESUME``) goes into the event queue at that start; it wakes the actor in the
  window that holds it. Its key is (start, rank, actor, the actor's resume count): it depends on
  nothing trio orders, so the journal stays deterministic and replay verifies. Resumes write no journal
  record; an arrival is journaled when it arrives (DELIVER at t), as without service times, and the
  deferral shows as the later send times of what the handler sent.
- A crash takes the mailbox and the backlog (their messages had arrived; they are lost as a mailbox is)
  and makes a pending resume stale. A handler's effects are committed when its service starts: a crash
  during its service does not undo them.
- ``on_start`` takes no time; what it sends leaves at once.
- ``fabric.on_served(actor, arrived, start, end)``, when set, is called before (with end -1) and after
  each handled entry (the recorder uses it to measure processing time).
"""

from __future__ import annotations

import types
from collections import deque

from . import parking
from .actor import LOCAL, RANK_RESUME


def install(actor, cost) -> None:
    """Make ``actor`` a server with role costs ``cost``: ``Actor.send`` and ``Actor.set_timer`` then
    hold what each handler makes (``_deferred``) until ``release``."""
    actor._cost = cost
    actor._backlog = deque()
    actor._deferred = []


def release(fabric, actor, start: int, end: int) -> None:
    """Send (at ``end``, the service's end) and set (at ``start``) what the handler held, each with the
    sequence number it was given when the handler made it; ``actor._now`` is left at ``end``."""
    held = actor._deferred
    last = actor._seq
    for seq, dst, msg, delay in held:
        actor._seq = seq
        if delay < 0:
            actor._now = end
            fabric._send(actor, dst, msg)
        else:
            actor._now = start
            fabric._set_timer(actor, start + delay, msg)
    held.clear()
    actor._seq = last
    actor._now = end


@types.coroutine
def serve(fabric, actor):
    """A server actor's loop (``Fabric._handle``'s twin): each mailbox entry joins the backlog, and the
    backlog is handled as far as the window allows."""
    actor.on_start()
    actor._busy = actor._now
    release(fabric, actor, actor._now, actor._now)
    idle = fabric._idle
    park = parking.PARK
    stop = parking.STOP
    backlog = actor._backlog
    while True:
        mb = actor._mailbox
        if actor._pos >= len(mb):
            if idle(actor):
                woke = (yield from parking.wait()) if park is None else (yield park).unwrap()
                if woke is stop:
                    return
            mb = actor._mailbox
        while actor._pos < len(mb):
            entry = mb[actor._pos]
            actor._pos += 1
            if entry[1] == RANK_RESUME:
                actor.received -= 1  # not a message
                actor._resume_at = -1
            else:
                if entry[4] == LOCAL:  # a timer merged into this window fired
                    fabric._local_fired(actor, entry)
                backlog.append(entry)
            if backlog:
                drain(fabric, actor)


def drain(fabric, actor) -> None:
    """Handle backlog entries in order while their start falls inside the window; else make sure a
    resume entry waits in the event queue at the first one's start."""
    backlog = actor._backlog
    cache = actor._handlers()
    cost = actor._cost
    window_end = fabric._window_end
    hook = fabric.on_served
    while backlog:
        entry = backlog[0]
        arrived = entry[0]
        start = arrived if arrived > actor._busy else actor._busy
        if start >= window_end:
            if actor._resume_at < 0:
                actor._resume_at = start
                fabric._resume(actor, start)
            return
        backlog.popleft()
        actor._now = start
        actor._arrived = arrived
        actor._charged = 0
        if hook is not None:
            hook(actor, arrived, start, -1)
        msg = entry[6]
        handler = cache.get(msg.__class__)
        if handler is None:
            handler = actor._resolve(msg.__class__)
        handler(actor, msg, entry[2])
        end = start + cost.service_us(msg.__class__, actor._charged)
        actor._busy = actor._now = end
        if actor._deferred:
            release(fabric, actor, start, end)
        if hook is not None:
            hook(actor, arrived, start, end)
