"""The fabric's window loop: one event queue owns virtual time and every cross-actor effect.

Queue entries are ``(time_us, rank, src, seq, copy, dst, payload)``: faults first, then retransmissions,
then messages, then timers at one time (``actor.RANK_*``). A message's rank is its tie, a seeded order of senders
that changes with the time (``ties``), so at one time messages from different senders are ordered by
(tie, src) and no sender wins every race by its number (``ties="sender"``: by src alone, the older
order). ``(src, seq)`` is the sender's own counter, so the order never depends on which actor ran
first. The fabric advances in windows ``[t, t + L)`` where L is the network's minimum latency (its
lookahead): nothing sent inside a window can arrive inside it, so every entry due in the window is
put in its receiver's mailbox at once and the receivers (trio tasks) are woken. A window that would
hold more than ``WINDOW_CAP`` entries ends early, at a time boundary, so its actors stay in the CPU
cache. Sends and timers are routed and queued as they are made (``routing``); each actor's journal
records wait in its outbox until all are parked again, then are written actor by actor in wake
order. A timer that falls inside the window is merged into its owner's own sorted mailbox. Faults
start a new window: the kernel crashes and restarts actors, the network applies every other fault
(``Network.apply``). So trio's scheduling order never reaches the journal, the queue or a random
draw, and the result is the same as delivering tick by tick.

Under a cost model (``cost_model``, see ``service``) scheduler components are single servers: an
entry handled later than it arrived starts at most at the window's end, and an entry due to start
later waits in its actor's backlog until a resume entry (rank 3, never journaled) in the queue wakes
it. Without a cost model no actor takes that path.

Messages travel on connections (``connections``): while the network has a partition or loss, or a
connection has broken, every due message passes through ``Connections.arrive``, which may hold it for
retransmission or behind an earlier one, or lose it with its broken connection; otherwise, as in every
fault-free run, delivery is the plain loop below. When the plan has a crash, sends take the routed path,
which records the pairs that talk, so that a crash breaks their connections.

Zero latency is allowed (then windows are one tick long): a message sent with latency 0 is delivered
in a later window of the same tick, after the receiver's own timers due at that tick, so at equal
times the (time, rank, tie, sender, seq) order holds only among entries already queued.
"""

from __future__ import annotations

import types

import attrs
import outcome

from . import parking, rand, service, ties
from .collector import gc_paused
from .actor import LOCAL, RANK_FAULT, RANK_MESSAGE, RANK_RESUME, RANK_TIMER, Actor, ActorCrashed
from .connections import Connections
from .errors import ConfigError
from .faults import Resolved, plan as make_plan
from .journal import DELIVER, FAULT, TIMER_FIRE, Journal
from .network import Network, listed
from .routing import OUTSIDE, Routing

__all__ = ["ENGINES", "OUTSIDE", "WINDOW_CAP", "Fabric", "FabricStatistics", "gc_paused"]

# What steps the actors' tasks: trio's scheduler (the reference), or a plain loop over the same tasks
# (``direct``), which gives the same journal at a lower cost per window.
ENGINES = ("trio", "direct")

# A window delivers at most about this many entries (more only when they share a time): the actors
# it wakes, their tasks and records then stay in the CPU cache from delivery through journaling.
# Cachegrind, 10,000-actor ping-pong, misses per message: with a 2 MiB cache about 41 at 64 or 256
# and 92 uncapped; with a 512 KiB cache 57 at 64 and 79 at 256.
WINDOW_CAP = 64


@attrs.frozen
class FabricStatistics:
    """Counts the fabric keeps: messages per kind, drops per cause, timers, actors alive."""

    now_us: int
    events: int
    windows: int
    sent: int
    delivered: int
    timers: int
    sent_by_kind: dict
    drops_by_cause: dict
    actors: int
    alive: int
    crashes: int = 0  # crash faults that took a live actor down
    restarts: int = 0  # restart faults that brought one back
    breaks: int = 0  # connections that broke (``connections``)


class Fabric(Routing):
    """Actors, network, fault plan and journal of one deterministic run."""

    def __init__(self, seed: int = 0, *, network: Network | None = None, journal: Journal | None = None,
                 ties: str = "seeded"):
        super().__init__(network, journal)
        self.seed = int(seed)
        self.now = 0
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._factories: list = []
        self._seq: list[int] = []  # each actor's next sequence number, kept across its incarnations
        self._epoch: list[int] = []  # timers numbered up to this belong to an earlier incarnation
        self._incarnations: list[int] = []
        self.crashes = self.restarts = 0
        self._up: list[bool] = []  # False from a crash to the next restart
        self._faults: list[Resolved] = []  # in plan order (a fault's index is its queue seq)
        self._running = 0
        self._driver = None
        self.engine = "trio"  # see ``ENGINES`` and ``run_blocking``
        # How a parked task is woken, and the exception a cancelled one raises: trio's (``run``) or the direct
        # engine's, set as a run begins (trio is imported by a run on its engine only: ``parking``)
        self._reschedule = None
        self._cancelled: type[BaseException] = GeneratorExit
        self._current_task = None  # trio's current_task, on its engine
        self._start_task = None  # the direct engine's: start an actor's task (trio's: the nursery)
        self._driver_waiting = False
        self._woken = ()
        self._until = None
        self._limit = None  # ``_until``, or the horizon when that comes first
        self.horizon_us: int | None = None  # see ``run``: set by the runner, from the workload
        self.stopped_at_horizon = False
        self._down_since: dict[int, int] = {}  # crashed actor -> when, until it restarts
        self._current = None
        self._nursery = None
        self._stop = False
        self._closing = False
        self._error: BaseException | None = None
        self.events = 0
        self.windows = 0
        self.delivered = 0
        self.progress = None  # optional callable(fabric), called every ``progress_every`` windows
        self.progress_every = 1024
        self.window_cap = WINDOW_CAP
        self.event_log = None  # a fabric.log.EventLog when the run writes protocol events (--log)
        self._tie_order = "seeded"
        self.ties = ties  # checked; draws the outside key
        self.cost_model = None  # a costs.CostModel: scheduler components become single servers (``service``)
        self.on_served = None  # optional callable(actor, arrived, start, end): before (end -1) and after each served entry
        self._roles: dict[type, object] = {}  # actor class -> its RoleCost (None: takes no time)
        self._resumes: dict[int, int] = {}  # actor index -> resume entries queued for it so far
        self.connections = Connections(self)

    # ---- building a run -----------------------------------------------------------------
    def add(self, name: str, factory) -> int:
        """Register an actor built by ``factory()`` (called again on restart); returns its index."""
        if name in self._index:
            raise ConfigError(f"actor name {name!r} is used twice")
        idx = len(self._names)
        self._names.append(name)
        self._index[name] = idx
        self._factories.append(factory)
        self._actors.append(None)
        self._seq.append(0)
        self._epoch.append(0)
        self._keys.append(rand.name_key(self.seed, f"net/{name}"))
        self._ties.append(ties.sender_key(self.seed, name, self._tie_order))
        self._incarnations.append(0)
        self._up.append(True)
        return idx

    @property
    def ties(self) -> str:
        """How messages due at one time are ordered: ``seeded`` (``fabric.ties``) or ``sender`` (by id)."""
        return self._tie_order

    @ties.setter
    def ties(self, order: str) -> None:
        """Set before the run starts; the sender keys of the actors added so far are redrawn in place."""
        self._tie_order = ties.check(order)
        self._ties[:] = [ties.sender_key(self.seed, name, order) for name in self._names]
        self._outside_tie = ties.sender_key(self.seed, "outside", order)

    def addr(self, name: str) -> int:
        try:
            return self._index[name]
        except KeyError:
            raise ConfigError(f"unknown actor {name!r}") from None

    def name_of(self, idx: int) -> str:
        return "outside" if idx == OUTSIDE else self._names[idx]

    @property
    def names(self) -> list[str]:
        return list(self._names)

    def actor(self, idx: int) -> Actor | None:
        """The live instance at ``idx`` (None while crashed)."""
        return self._actors[idx]

    def add_faults(self, events) -> None:
        """Add fault events (Fault objects or plain tuples); their actor names are resolved here,
        once (an unknown name is a ConfigError)."""
        for fault in make_plan(events):
            resolved = fault.resolve(self._index)
            self._push((fault.at_us, RANK_FAULT, OUTSIDE, len(self._faults), 0, OUTSIDE, resolved))
            self._faults.append(resolved)

    @property
    def faults(self) -> tuple:
        """The fault events added so far (``fabric.faults.Fault``), in the order they were added."""
        return tuple(r.fault for r in self._faults)

    def in_flight(self, src: int | None = None, dst: int | None = None,
                  live: bool = False) -> list[tuple[int, int, object]]:
        """The messages sent and not yet handled, as ``(sender, receiver, message)`` in the order of
        (sender, receiver, the sender's sequence number); only those from ``src`` and/or to ``dst`` when
        given. In flight means: in the event queue (on the wire, or due for retransmission), held behind an
        earlier message on a stalled connection, in a receiver's mailbox this window, waiting for a busy
        server (its backlog), or made by a server's handler and held until its service ends. Timers are not
        messages. ``live``: only those still to be delivered, not those a broken connection cut off (dropped
        as ``broken`` when they come due) nor those on their way to an actor that is down (to be refused),
        so that a check can tell a message on its way from one lost for good. For checks at the end of a
        run and tests: no actor may base a decision on it."""
        found = []
        entries = self._queue.entries()
        for stall in self.connections.stalls.values():
            entries += stall.held
        if live:
            cut, actors = self.connections.cut, self._actors
            entries = [e for e in entries if e[2] < 0 or (e[3] > cut.get((e[2], e[5]), 0) and actors[e[5]] is not None)]
        for actor in self._actors:
            if actor is not None:
                entries += actor._mailbox[actor._pos:]
                entries += actor._backlog or ()
                found += [(actor.id, held[1], held[0], held[2]) for held in actor._deferred or () if held[3] < 0]
        found += [(e[2], e[5], e[3], e[6]) for e in entries if RANK_FAULT < e[1] < RANK_TIMER]
        found = [f for f in found if (src is None or f[0] == src) and (dst is None or f[1] == dst)]
        found.sort(key=lambda f: f[:3])
        return [(f[0], f[1], f[3]) for f in found]

    def stop(self) -> None:
        """End the run once the current window is done."""
        self._stop = True

    def statistics(self) -> FabricStatistics:
        alive = sum(1 for a in self._actors if a is not None)
        return FabricStatistics(self.now, self.events, self.windows, self.sent, self.delivered, self.timers,
                                dict(sorted(self.sent_by_kind.items())), dict(sorted(self.drops_by_cause.items())),
                                len(self._actors), alive, self.crashes, self.restarts, self.connections.breaks)

    # ---- running ------------------------------------------------------------------------
    def run_blocking(self, until_us: int | None = None) -> None:
        """``run`` to the end on the fabric's ``engine``: under ``trio.run``, or stepped by ``direct``."""
        if self.engine == "direct":
            from . import direct

            direct.run(self, until_us)
        elif self.engine == "trio":
            import trio

            trio.run(self.run, until_us)
        else:
            raise ConfigError(f"unknown engine {self.engine!r}; known: {', '.join(ENGINES)}")

    async def run(self, until_us: int | None = None) -> None:
        """Run until the queue is empty, ``stop()`` is called, or the next event is after ``until_us``; or
        after ``horizon_us``, if a fault is still in force then (``faults_in_force``: it never healed, so the
        run would go on for ever, its retries backing off; ``stopped_at_horizon`` says so). A run with none
        in force at its horizon goes on: the horizon comes after the last fault event, so none ever will be.

        The driver task only starts the actors and waits for the end: whichever actor goes idle last
        runs the fabric's next step (``_advance``) itself, so a window costs one trio scheduling pass.
        For the whole run the process's cyclic garbage collector is off (``gc_paused``: objects
        that exist at the start are frozen, collection is disabled, and both are undone at the end),
        because its passes over every live actor and task find nothing to free and cost time."""
        import trio

        parking.use_trio()
        self._reschedule, self._cancelled = parking.trio_reschedule(), trio.Cancelled
        self._current_task = trio.lowlevel.current_task
        self._driver = trio.lowlevel.current_task()
        self._begin(until_us)
        with gc_paused():
            try:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    await self._drive(nursery)
            finally:
                self._nursery = None
                self._ended()
        if self._error is not None:
            raise self._error

    def _begin(self, until_us: int | None) -> None:
        """What every engine does before the actors start: the queue's buckets, the run's limits, and the
        routed send path when a crash is planned."""
        if self._queue.width != self._bucket_width():  # the network may have changed since __init__
            self._queue.rebucket(self._bucket_width())
        self._until = until_us
        horizon = self.horizon_us
        self._limit = horizon if horizon is not None and (until_us is None or horizon < until_us) else until_us
        self._closing = False
        conns = self.connections
        if conns.out is None and any(f.kind == "crash" for f in self._faults):
            conns.track()  # a crash breaks the connections of its actor: record who talks
            self._opened = conns.opened
            self._send = self._send_routed
        conns.refresh()

    def _ended(self) -> None:
        """What every engine does when the actors are done: note where each sender's sequence stands
        (flushes do not track it)."""
        for actor in self._actors:
            if actor is not None:
                self._seq[actor.id] = actor._seq

    async def _drive(self, nursery) -> None:
        """The driver task's part: apply the start-time faults, start the actors, wait for the end."""
        try:
            self._window_end = self.now + 1
            self._start_faults()
            self._woken = [self._spawn(idx) for idx in range(len(self._names)) if self._up[idx]]
            self._driver_waiting = self._running > 0
            if not self._driver_waiting:  # no actors at all: nothing will ever run the steps
                self._advance(None)
            if self._driver_waiting:
                await parking.wait()
        except self._cancelled:  # (trio's Cancelled: this is the trio engine's driver)
            raise
        except BaseException as e:  # surface the driver's own error unwrapped
            self._error = e
        if self._error is not None or not self._stop_actors():
            nursery.cancel_scope.cancel()

    def _stop_actors(self) -> bool:
        """The run is over: let every actor task return (all are parked now). False if one is not."""
        live = [a for a in self._actors if a is not None]
        if not all(a._parked for a in live):
            return False
        self._closing = True
        for actor in live:
            self._reschedule(actor._task, parking.STOP)
        return True

    def _start_faults(self) -> None:
        """Apply the faults due at the start time before any actor starts, as faults precede
        everything else at any later time (an actor restarted here starts with the others)."""
        queue = self._queue
        while (entry := queue.first()) is not None and entry[1] == RANK_FAULT and entry[0] <= self.now:
            queue.pop()
            self.events += 1
            self._fault(entry, None)

    def _advance(self, current) -> bool:
        """Every actor is idle: flush what the last window emitted, then deliver windows until some
        actor has work. Returns True when ``current`` (the actor running this) was woken again."""
        self._flush(self._woken)
        self._woken = ()
        queue = self._queue
        net = self.network
        journal = self.journal
        until_us = self._limit  # (the caller's ``until``, or the horizon)
        clip_us = self._until
        progress = self.progress
        reschedule = self._reschedule
        wake = parking.WAKE
        while True:
            if self.windows & 15 == 0:
                journal.maybe_drain()
            first = queue.first()
            if first is None or self._stop or self._error is not None or (until_us is not None and first[0] > until_us):
                if first is not None and until_us is not None and first[0] > until_us and self._past_horizon():
                    until_us = self._limit
                    continue
                self._end(first)
                return False
            t = self.now = first[0]
            end = t + net.window
            if clip_us is not None and end > clip_us + 1:
                end = clip_us + 1
            self._window_end = end
            self._current = current
            woken = self._deliver(t, end)
            self._current = None
            self.windows += 1
            if progress is not None and self.windows % self.progress_every == 0:
                progress(self)
            if not woken:
                continue
            # Wake the parked actors among them; ``current``, if it is one, goes on by itself when
            # this returns True (no trio round trip). Written here, not called: once per window.
            self._woken = woken
            resume = False
            running = 0
            for actor in woken:
                if actor._parked:
                    actor._parked = False
                    running += 1
                    if actor is current:
                        resume = True
                    else:
                        reschedule(actor._task, wake)
            self._running += running
            if self._running:
                return resume
            self._flush(woken)
            self._woken = ()

    def _past_horizon(self) -> bool:
        """The next event is past ``_limit``. When that is the horizon and nothing is in force, the run goes
        on (True: ``_limit`` is the caller's ``until`` again); with a fault in force it stops there."""
        horizon = self.horizon_us
        if horizon is None or self._limit != horizon or self._stop or self._error is not None:
            return False
        if self.faults_in_force():
            self.stopped_at_horizon = True
            return False
        self._limit = self._until
        return True

    def faults_in_force(self) -> list[str]:
        """What faults leave in force now, one line each: actors down, then the network's (``Network.in_force``)."""
        since: dict[int, list[str]] = {}
        for idx, at_us in self._down_since.items():
            since.setdefault(at_us, []).append(self._names[idx])
        down = [f"{listed(names)} down since {at_us / 1e6:g} s" for at_us, names in sorted(since.items())]
        return down + self.network.in_force(self.name_of)

    def _end(self, first) -> None:
        """No window is left to deliver: set the end time and let the driver finish the run."""
        until_us = self.horizon_us if self.stopped_at_horizon else self._until
        self.now = self._last_event
        if until_us is not None and not self._stop and (first is None or first[0] > until_us):
            self.now = max(self.now, until_us)
        if self._driver_waiting:
            self._driver_waiting = False
            self._reschedule(self._driver)

    # ---- actor tasks --------------------------------------------------------------------
    def _spawn(self, idx: int) -> Actor:
        actor = self._factories[idx]()
        if not isinstance(actor, Actor):
            raise TypeError(f"factory for {self._names[idx]!r} returned {type(actor).__name__}, not an Actor")
        actor.fabric = self
        actor.id = idx
        actor.name = self._names[idx]
        actor.incarnation = self._incarnations[idx]
        actor._now = self.now
        actor._seq = actor._seq0 = self._seq[idx]
        actor._fifo = self.network.sender_fifo(idx)
        self._actors[idx] = actor
        if self.cost_model is not None:
            cls = type(actor)
            if cls not in self._roles:
                self._roles[cls] = self.cost_model.for_class(cls)
            if self._roles[cls] is not None:
                service.install(actor, self._roles[cls])
        self._running += 1
        if self._start_task is None:
            self._nursery.start_soon(self._actor_main, actor, name=actor.name)
        else:
            self._start_task(actor)
        return actor

    async def _actor_main(self, actor: Actor) -> None:
        """The actor's trio task: ``on_start``, then its handlers (``_handle``) until the run ends."""
        if self._start_task is None:  # (the direct engine set it when it made the task)
            actor._task = self._current_task()
        try:
            if self._actors[actor.id] is actor:  # else it crashed before its task first ran
                await (self._handle(actor) if actor._cost is None else service.serve(self, actor))
        except ActorCrashed:
            pass
        except (self._cancelled, GeneratorExit):  # trio's cancellation, or the task's coroutine closed
            raise
        except BaseException as e:  # a bug in an actor (or the fabric step it ran) ends the run
            if self._error is None:
                self._error = e
                try:  # who raised, and when: the run's one-line verdict names them
                    e.fedemu_actor = (actor.name, actor._now)
                except AttributeError:
                    pass
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()
            return
        if self._closing:
            return
        self._running -= 1
        if self._running == 0:
            self._advance(None)

    @types.coroutine
    def _handle(self, actor: Actor):
        """A handler actor's loop: start, then hand each mailbox entry to its handler, parking when
        the mailbox is empty. One generator for the actor's whole life, which parks by yielding
        trio's trap itself: no coroutine is made and freed per wake-up (see ``parking``; without
        the trap it awaits ``parking.wait``, trio's public call)."""
        actor.on_start()
        cache = actor._handlers()
        idle = self._idle
        park = parking.PARK
        stop = parking.STOP
        mb = actor._mailbox  # (one list for the incarnation's life: emptied in place, never replaced)
        while True:
            pos = actor._pos
            if pos >= len(mb):
                if idle(actor):
                    woke = (yield from parking.wait()) if park is None else (yield park).unwrap()
                    if woke is stop:
                        return
                pos = actor._pos
            # ``pos`` mirrors ``actor._pos``, which nothing else moves while a handler runs (a timer merged
            # into the mailbox goes after it). Read back, an actor's slot costs more: every kind of actor
            # passes here, so CPython cannot specialize the access to one class.
            while pos < len(mb):
                entry = mb[pos]
                pos += 1
                actor._pos = pos
                actor._now = entry[0]
                if entry[4] == LOCAL:  # a timer merged into this window fired
                    self._local_fired(actor, entry)
                msg = entry[6]
                handler = cache.get(type(msg))  # (``msg.__class__`` is a generic lookup on every kind of message)
                if handler is None:
                    handler = actor._resolve(type(msg))
                handler(actor, msg, entry[2])

    def _idle(self, actor: Actor) -> bool:
        """``actor`` has handled its mailbox. Returns True when it must wait (``parking.wait``) for
        the fabric to wake it, False when it was the last busy actor and has mail in the next window
        (it ran the fabric step itself: no trio round trip). The handled entries are let go now,
        while they are still in the cache."""
        pos = actor._pos
        if pos:
            actor.received += pos
            actor._pos = 0
            actor._mailbox.clear()
        actor._parked = True
        self._running -= 1
        if self._running == 0:
            if self._advance(actor):
                return False
            if actor._crashed:  # (only ``_advance`` run by this actor sets it: ``_crash``)
                raise ActorCrashed()
        return True

    # ---- delivery -----------------------------------------------------------------------
    def _deliver(self, t: int, end: int) -> list:
        """Move every entry due in [t, end) into mailboxes; returns the actors to wake, in order.
        A fault after ``t`` ends the window early, so it is applied at the start of the next one."""
        queue = self._queue
        cur, pos = queue.current, queue.pos
        actors = self._actors
        append = self.journal.pack
        net = self.network
        conns = self.connections
        watch = conns.watch  # non-empty while a message may be delayed or lost (changed in place)
        epoch = self._epoch
        woken = []
        n = delivered = 0
        last = self._last_event
        cap = self.window_cap
        while True:
            if pos >= len(cur):  # the current bucket is used up: sort the next one
                queue.pos = pos
                if queue.next_bucket() is None:
                    break
                cur, pos = queue.current, 0
            entry = cur[pos]
            at, rank = entry[0], entry[1]
            if at >= end or (n >= cap and at > last) or (rank < RANK_MESSAGE and at > t):
                if at < end:  # a full batch ends at a time boundary; a later fault or retry starts the next window
                    self._window_end = at
                break
            pos += 1
            n += 1
            last = at
            if rank == RANK_FAULT:
                queue.pos = pos
                self._fault(entry, woken)
                end = self._window_end = min(end, t + net.window)  # a slow link may lower the lookahead
                cur, pos = queue.current, queue.pos
                continue
            dst = entry[5]
            actor = actors[dst]
            if rank >= RANK_TIMER:
                if rank == RANK_RESUME:
                    if actor is not entry[6]:  # its actor crashed since: nothing waits for it
                        continue
                elif actor is None or entry[3] <= epoch[dst]:
                    self._dropped(at, entry[2], entry[3], dst, "stale-timer")
                    continue
                else:
                    append((TIMER_FIRE, at, dst, entry[3]))
            elif actor is None or watch:
                got = conns.arrive(entry, actor)
                if got is None:
                    continue
                mb = actor._mailbox
                if not mb:
                    woken.append(actor)
                for entry, tries in got:  # a retransmitted message, and those that waited behind it
                    append((DELIVER, at, entry[2], entry[3], dst, tries))
                    mb.append(entry)
                delivered += len(got)
                continue
            else:
                append((DELIVER, at, entry[2], entry[3], dst, entry[4]))
                delivered += 1
            mb = actor._mailbox  # empty unless it got an entry earlier in this window
            if not mb:
                woken.append(actor)
            mb.append(entry)
        queue.pos = pos
        self.events += n
        self.delivered += delivered
        self._last_event = last
        return woken

    def _resume(self, actor: Actor, at: int) -> None:
        """Queue a resume entry for server ``actor`` at ``at`` (``service``): unique per actor index by
        its own count, so its key depends on nothing trio orders."""
        idx = actor.id
        n = self._resumes[idx] = self._resumes.get(idx, 0) + 1
        self._push((at, RANK_RESUME, idx, n, 0, idx, actor))

    # ---- faults -------------------------------------------------------------------------
    def _fault(self, entry, woken: list | None) -> None:
        """Journal and apply a fault: crash and restart here, every other kind in the network.
        ``woken`` gets a restarted actor (None before the actors start: it starts with them)."""
        resolved: Resolved = entry[6]
        fault = resolved.fault
        self.journal.append((FAULT, entry[0], entry[3], fault.kind, fault.target, fault.value))
        if fault.kind == "crash":
            self._crash(resolved.actor, entry[0])
        elif fault.kind == "restart":
            self._restart(resolved.actor, woken)
        else:
            self.network.apply(resolved)
            self.connections.refresh()

    def _crash(self, idx: int, at_us: int) -> None:
        """Take actor ``idx`` down: its instance and mailbox go; a parked task is ended by
        ActorCrashed (the running one ends itself when it next goes idle)."""
        if not self._up[idx]:
            return
        self._up[idx] = False
        self._down_since[idx] = at_us
        self.crashes += 1
        actor = self._actors[idx]
        if actor is None:  # crashed before the start
            return
        actor._now = at_us
        actor.on_crash()  # observers only (the recorder): what the instance held is lost
        self._actors[idx] = None
        self._seq[idx] = actor._seq  # its next incarnation continues the sequence
        self.connections.crashed(idx, at_us)  # its open connections break; their live ends are told
        actor._mailbox.clear()
        actor._pos = 0
        if actor._parked:
            actor._parked = False
            self._running += 1
            if actor is self._current:  # it is running this very step: it ends itself on return
                actor._crashed = True
            else:
                self._reschedule(actor._task, outcome.Error(ActorCrashed()))

    def _restart(self, idx: int, woken: list | None) -> None:
        """Bring actor ``idx`` back up as a new incarnation; timers its earlier ones set go stale."""
        if self._up[idx]:
            return
        self._up[idx] = True
        self._down_since.pop(idx, None)
        self._incarnations[idx] += 1
        self.restarts += 1
        self._epoch[idx] = self._seq[idx]
        if woken is not None:
            woken.append(self._spawn(idx))
