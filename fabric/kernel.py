"""The fabric: one event queue owns virtual time and every cross-actor effect.

Queue entries are ``(time_us, rank, src, seq, copy, dst, payload)``: rank 0 faults, 1 messages,
2 timers; ``(src, seq)`` is the sender's own counter, so the order never depends on which actor ran
first. The fabric advances in windows ``[t, t + L)`` where L is the network's minimum latency (its
lookahead): nothing sent inside a window can arrive inside it, so every entry due in the window is
put in its receiver's mailbox at once and the receivers (trio tasks) are woken. A window that would
hold more than ``WINDOW_CAP`` entries ends early, at a time boundary, so its actors stay in the CPU
cache. A send is routed and queued as it is made: its key, its latency draw (counter-based) and its
link's FIFO state (owned by its one sender) do not depend on which actor ran first. Only the
journal order would, so each actor's records wait in its outbox until all are parked again, then
are written actor by actor in wake order. A timer that falls inside the window is merged into its
owner's own sorted mailbox. Faults start a new window. So trio's scheduling order never reaches the
journal, the queue or a random draw, and the result is the same as delivering tick by tick.

Zero latency is allowed (then windows are one tick long): a message sent with latency 0 is delivered
in a later window of the same tick, after the receiver's own timers due at that tick, so at equal
times the (time, rank, sender, seq) order holds only among entries already queued.
"""

from __future__ import annotations

import gc
import types
from bisect import insort

import attrs
import outcome
import trio

from . import parking, rand
from .actor import LOCAL, RANK_FAULT, RANK_MESSAGE, RANK_TIMER, Actor, ActorCrashed, RunOver
from .errors import ConfigError
from .events import EventQueue
from .faults import Fault, plan as make_plan
from .journal import DELIVER, DROP, FAULT, SEND, TIMER_FIRE, TIMER_SET, Journal
from .network import DRAWS_PER_SEND, Network
from .rand import GOLDEN, MASK, MIX1, MIX2

OUTSIDE = -1  # sender index of messages injected by the scenario
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


class Fabric:
    """Actors, network, fault plan and journal of one deterministic run."""

    def __init__(self, seed: int = 0, *, network: Network | None = None, journal: Journal | None = None):
        self.seed = int(seed)
        self.now = 0
        self.network = network or Network()
        self.journal = journal or Journal(None)
        self._queue = EventQueue(self._bucket_width())
        self._push = self._queue.push
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._factories: list = []
        self._actors: list[Actor | None] = []
        self._seq: list[int] = []
        self._epoch: list[int] = []
        self._keys: list[int] = []
        self._incarnations: list[int] = []
        self._faults: list[Fault] = []
        self._outside_seq = 0
        self._window_end = 0
        self._running = 0
        self._driver = None
        self._driver_waiting = False
        self._woken = ()
        self._last_event = 0
        self._until = None
        self._current = None
        self._nursery = None
        self._stop = False
        self._closing = False
        self._error: BaseException | None = None
        self.events = 0
        self.windows = 0
        self.delivered = 0
        self.timers = 0
        self.sent_by_kind: dict[str, int] = {}
        self.drops_by_cause: dict[str, int] = {}
        self.progress = None  # optional callable(fabric), called every ``progress_every`` windows
        self.progress_every = 1024
        self.window_cap = WINDOW_CAP

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
        self._incarnations.append(0)
        return idx

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

    def inject(self, dst: int, msg, at_us: int = 0) -> None:
        """Schedule a message from outside the system (no network) for delivery at ``at_us``."""
        self._outside_seq += 1
        seq = self._outside_seq
        self.journal.append((SEND, self.now, OUTSIDE, seq, dst, at_us, msg._fedemu_tag, msg._fedemu_fields(msg)))
        self._push((at_us, RANK_MESSAGE, OUTSIDE, seq, 0, dst, msg))

    def add_faults(self, events) -> None:
        """Add fault events (Fault objects or plain tuples); names are checked against the actors."""
        for fault in make_plan(events):
            for n in fault.names():
                if n not in self._index:
                    known = ", ".join(self._names[:12]) + (", ..." if len(self._names) > 12 else "")
                    raise ConfigError(f"fault {fault.kind} at {fault.at_us} us names unknown actor {n!r}; "
                                      f"known: {known}")
            if fault.kind == "slow" and fault.target == ("*",):
                raise ConfigError("fault slow needs a link (a, b); '*' is only for loss")
            self._push((fault.at_us, RANK_FAULT, OUTSIDE, len(self._faults), 0, OUTSIDE, fault))
            self._faults.append(fault)

    def _bucket_width(self) -> int:
        """Event-queue buckets one window wide. Measured against a sixteenth of a window: fewer cache
        misses per message in the 10,000-actor ping-pong, and Megha's goog case 45.3 s, not 47.1 s."""
        return self.network.window

    def stop(self) -> None:
        """End the run once the current window is done."""
        self._stop = True

    @property
    def sent(self) -> int:
        """Messages the actors sent (injected ones are not counted)."""
        return sum(self.sent_by_kind.values())

    def statistics(self) -> FabricStatistics:
        alive = sum(1 for a in self._actors if a is not None)
        return FabricStatistics(self.now, self.events, self.windows, self.sent, self.delivered, self.timers,
                                dict(sorted(self.sent_by_kind.items())), dict(sorted(self.drops_by_cause.items())),
                                len(self._actors), alive)

    # ---- running ------------------------------------------------------------------------
    def run_blocking(self, until_us: int | None = None) -> None:
        trio.run(self.run, until_us)

    async def run(self, until_us: int | None = None) -> None:
        """Run until the queue is empty, ``stop()`` is called, or the next event is after ``until_us``.

        The driver task only starts the actors and waits for the end: whichever actor goes idle last
        runs the fabric's next step (``_advance``) itself, so a window costs one trio scheduling pass."""
        self._driver = trio.lowlevel.current_task()
        if self._queue.width != self._bucket_width():  # the network may have changed since __init__
            self._queue.rebucket(self._bucket_width())
        self._until = until_us
        self._closing = False
        gc_was_enabled = gc.isenabled()
        gc.freeze()  # no collect first: garbage frozen here is collected after unfreeze
        gc.disable()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    self._window_end = self.now + 1
                    dead = self._start_faults()
                    self._woken = [self._spawn(idx) for idx in range(len(self._names)) if idx not in dead]
                    self._driver_waiting = self._running > 0
                    if not self._driver_waiting:  # no actors at all: nothing will ever run the steps
                        self._advance(None)
                    if self._driver_waiting:
                        await parking.wait()
                except trio.Cancelled:
                    raise
                except BaseException as e:  # surface the driver's own error unwrapped
                    self._error = e
                if self._error is not None or not self._stop_actors():
                    nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            for actor in self._actors:  # where each sender's sequence stands (flushes do not track it)
                if actor is not None:
                    self._seq[actor.id] = actor._seq
            gc.unfreeze()
            if gc_was_enabled:
                gc.enable()
        if self._error is not None:
            raise self._error

    def _stop_actors(self) -> bool:
        """The run is over: let every actor task return (all are parked now). False if one is not."""
        live = [a for a in self._actors if a is not None]
        if not all(a._parked for a in live):
            return False
        self._closing = True
        for actor in live:
            trio.lowlevel.reschedule(actor._task, parking.STOP)
        return True

    def _start_faults(self) -> set:
        """Apply the faults due at the start time before any actor starts (as faults precede
        everything else at any later time); returns the actors that start crashed."""
        queue = self._queue
        dead = set()
        while (entry := queue.first()) is not None and entry[1] == RANK_FAULT and entry[0] <= self.now:
            queue.pop()
            fault = entry[6]
            self.events += 1
            if fault.kind in ("crash", "restart"):
                idx = self._index[fault.target[0]]
                self.journal.append((FAULT, entry[0], entry[3], fault.kind, fault.target, fault.value))
                if fault.kind == "crash":
                    dead.add(idx)
                elif idx in dead:
                    dead.discard(idx)
                    self._incarnations[idx] += 1
            else:
                self._apply_fault(entry, [])
                self.network.changed()
        return dead

    def _advance(self, current) -> bool:
        """Every actor is idle: flush what the last window emitted, then deliver windows until some
        actor has work. Returns True when ``current`` (the actor running this) was woken again."""
        self._flush(self._woken)
        self._woken = ()
        queue = self._queue
        net = self.network
        journal = self.journal
        until_us = self._until
        progress = self.progress
        reschedule = trio.lowlevel.reschedule
        while True:
            if self.windows & 15 == 0:
                journal.maybe_drain()
            first = queue.first()
            if first is None or self._stop or self._error is not None or (until_us is not None and first[0] > until_us):
                self.now = self._last_event
                if until_us is not None and not self._stop and (first is None or first[0] > until_us):
                    self.now = max(self.now, until_us)
                self._finish()
                return False
            t = first[0]
            self.now = t
            end = t + net.window
            if until_us is not None and end > until_us + 1:
                end = until_us + 1
            self._window_end = end
            self._current = current
            woken = self._deliver(t, end)
            self._current = None
            self.windows += 1
            if progress is not None and self.windows % self.progress_every == 0:
                progress(self)
            if not woken:
                continue
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
                        reschedule(actor._task, parking.WAKE)
            self._running += running
            if self._running:
                return resume
            self._flush(woken)
            self._woken = ()

    def _finish(self) -> None:
        if self._driver_waiting:
            self._driver_waiting = False
            trio.lowlevel.reschedule(self._driver)

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
        actor._key = self._keys[idx]
        actor._fifo = self.network.sender_fifo(idx)
        self._actors[idx] = actor
        self._running += 1
        self._nursery.start_soon(self._actor_main, actor, name=actor.name)
        return actor

    async def _actor_main(self, actor: Actor) -> None:
        """The actor's trio task: ``on_start``, then its handlers (``_handle``) or its own ``run``."""
        actor._task = trio.lowlevel.current_task()
        try:
            if self._actors[actor.id] is not actor:
                pass
            elif type(actor).run is not Actor.run:
                await actor.run()  # an imperative actor: its own body, with receive()
            else:
                await self._handle(actor)
        except ActorCrashed:
            pass
        except RunOver:
            return
        except (trio.Cancelled, GeneratorExit):  # trio's cancellation, or the task's coroutine closed
            raise
        except BaseException as e:  # a bug in an actor (or the fabric step it ran) ends the run
            if self._error is None:
                self._error = e
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
        trio's trap itself: no coroutine is made and freed per wake-up (see ``parking``)."""
        actor.on_start()
        cache = actor._handlers()
        idle = self._idle
        park = parking.PARK
        stop = parking.STOP
        while True:
            mb = actor._mailbox
            if actor._pos >= len(mb):
                if idle(actor):
                    if park is None:  # pragma: no cover - a trio without the internal trap
                        woke = yield from parking.wait()
                    else:
                        woke = (yield park).unwrap()
                    if woke is stop:
                        return
                mb = actor._mailbox
            while actor._pos < len(mb):
                entry = mb[actor._pos]
                actor._pos += 1
                actor._now = entry[0]
                if entry[4] == LOCAL:  # a timer merged into this window fired
                    self._local_fired(actor, entry)
                msg = entry[6]
                handler = cache.get(msg.__class__)
                if handler is None:
                    handler = actor._resolve(msg.__class__)
                handler(actor, msg, entry[2])

    def _idle(self, actor: Actor) -> bool:
        """``actor`` has handled its mailbox. Returns True when it must wait (``parking.wait``) for
        the fabric to wake it, False when it was the last busy actor and has mail in the next window
        (it ran the fabric step itself: no trio round trip). The handled entries are let go now,
        while they are still in the cache."""
        if actor._pos:
            actor.received += actor._pos
            actor._pos = 0
            actor._mailbox.clear()
        actor._parked = True
        self._running -= 1
        if self._running == 0 and self._advance(actor):
            return False
        if actor._crashed:
            raise ActorCrashed()
        return True

    async def _park(self, actor: Actor) -> None:
        if self._idle(actor) and await parking.wait() is parking.STOP:
            raise RunOver()

    def _deliver(self, t: int, end: int) -> list:
        """Move every entry due in [t, end) into mailboxes; returns the actors to wake, in order.

        A fault after ``t`` ends the window early, so it is applied at the start of the next one."""
        queue = self._queue
        cur, pos = queue.current, queue.pos
        actors = self._actors
        append = self.journal.pack
        net = self.network
        partitions = net.partitions  # faults change this list in place
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
            at = entry[0]
            if at >= end:
                break
            if n >= cap and at > last:  # a full batch: end the window at a time boundary
                self._window_end = at
                break
            rank = entry[1]
            if rank == RANK_FAULT:
                if at > t:
                    self._window_end = at
                    break
                queue.pos = pos = pos + 1
                n += 1
                last = at
                self._apply_fault(entry, woken)
                cur, pos = queue.current, queue.pos
                net.changed()
                end = self._window_end = min(end, t + net.window)
                continue
            pos += 1
            n += 1
            last = at
            dst = entry[5]
            actor = actors[dst]
            if rank == RANK_TIMER:
                if actor is None or entry[3] <= epoch[dst]:
                    append((DROP, at, entry[2], entry[3], dst, "stale-timer"))
                    self._drop("stale-timer")
                    continue
                append((TIMER_FIRE, at, dst, entry[3]))
            else:
                src = entry[2]
                if actor is None:
                    append((DROP, at, src, entry[3], dst, "dead"))
                    self._drop("dead")
                    continue
                if partitions and net.blocked(src, dst):
                    append((DROP, at, src, entry[3], dst, "partition"))
                    self._drop("partition")
                    continue
                append((DELIVER, at, src, entry[3], dst, entry[4]))
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

    def _drop(self, cause: str) -> None:
        self.drops_by_cause[cause] = self.drops_by_cause.get(cause, 0) + 1

    def _send(self, actor: Actor, dst: int, msg) -> None:
        """Route ``actor``'s send number ``actor._seq`` now and queue it. Nothing here
        depends on which actor ran first: queue keys are unique, draws are counter-based, a link's
        FIFO state belongs to its one sender, counts add up. Only the journal order does, so the
        records wait in the actor's outbox until ``_flush``."""
        live = self._actors
        if not 0 <= dst < len(live):
            raise ValueError(f"{actor.name} sent {msg._fedemu_tag} to actor index {dst}; "
                             f"valid: 0..{len(live) - 1}")
        idx, seq, now = actor.id, actor._seq, actor._now
        net = self.network
        fixed = net.fixed
        if fixed is not None:
            at = now + fixed
            copies = 1
        elif net.jitter is not None:  # route() for a plain uniform network, inlined
            lo, span, fifo = net.jitter
            z = (actor._key + (seq * DRAWS_PER_SEND + 1) * GOLDEN) & MASK  # rand.draw(key, seq * 4)
            z = ((z ^ (z >> 30)) * MIX1) & MASK
            z = ((z ^ (z >> 27)) * MIX2) & MASK
            at = now + lo + ((z ^ (z >> 31)) * span >> 64)
            if fifo:
                clamp = actor._fifo  # the network's sender_fifo(idx)
                if now >= clamp.latest:  # SenderFifo.clamp's first branch, inlined
                    clamp.table = None
                    clamp.last_dst = dst
                    clamp.latest = at
                else:
                    at = clamp.clamp(now, dst, at)
            copies = 1
        else:
            at, copies = net.route(idx, dst, seq, now, self._keys[idx])
        tag = msg._fedemu_tag
        out = actor._outbox
        out.append((SEND, now, idx, seq, dst, at, tag, msg._fedemu_fields(msg)))
        by_kind = self.sent_by_kind
        by_kind[tag] = by_kind.get(tag, 0) + 1
        if copies == 0:
            out.append((DROP, now, idx, seq, dst, "loss"))
            self._drop("loss")
            return
        entry = (at, RANK_MESSAGE, idx, seq, 0, dst, msg)
        queue = self._queue  # EventQueue.push, inlined: a send lands in a later bucket
        b = at // queue.width
        if b > queue.index:
            bucket = queue.buckets.get(b)
            if bucket is not None:
                bucket.append(entry)
            else:
                queue.push(entry)
        else:
            queue.push(entry)
        if copies == 2:
            self._push((at, RANK_MESSAGE, idx, seq, 1, dst, msg))

    def _set_timer(self, actor: Actor, at: int, msg) -> None:
        """Set ``actor``'s timer number ``actor._seq``: into its own sorted mailbox when it falls in
        the window being handled, else in the queue."""
        idx, seq = actor.id, actor._seq
        actor._outbox.append((TIMER_SET, actor._now, idx, seq, at, msg._fedemu_tag, msg._fedemu_fields(msg)))
        self.timers += 1
        if at < self._window_end:
            insort(actor._mailbox, (at, RANK_TIMER, idx, seq, LOCAL, idx, msg), lo=actor._pos)
        else:
            self._push((at, RANK_TIMER, idx, seq, 0, idx, msg))

    def _local_fired(self, actor: Actor, entry) -> None:
        """A timer merged into ``actor``'s mailbox is being handled."""
        actor._outbox.append((TIMER_FIRE, entry[0], actor.id, entry[3]))
        if entry[0] > self._last_event:
            self._last_event = entry[0]

    def _flush(self, actors) -> None:
        """Journal what each actor emitted, in the given (deterministic) wake order."""
        append = self.journal.pack
        for actor in actors:
            out = actor._outbox
            if out:
                for record in out:
                    append(record)
                out.clear()

    def _apply_fault(self, entry, woken: list) -> None:
        fault: Fault = entry[6]
        net = self.network
        self.journal.append((FAULT, entry[0], entry[3], fault.kind, fault.target, fault.value))
        kind = fault.kind
        if kind == "crash":
            idx = self._index[fault.target[0]]
            actor = self._actors[idx]
            if actor is None:
                return
            self._actors[idx] = None
            self._seq[idx] = actor._seq  # its next incarnation continues the sequence
            actor._mailbox.clear()
            actor._pos = 0
            if actor._parked:
                actor._parked = False
                self._running += 1
                if actor is self._current:  # it is running this very step: it ends itself on return
                    actor._crashed = True
                else:
                    trio.lowlevel.reschedule(actor._task, outcome.Error(ActorCrashed()))
        elif kind == "restart":
            idx = self._index[fault.target[0]]
            if self._actors[idx] is not None:
                return
            self._incarnations[idx] += 1
            self._epoch[idx] = self._seq[idx]  # timers set by earlier incarnations are stale
            woken.append(self._spawn(idx))
        elif kind == "partition":
            a = frozenset(self._index[n] for n in fault.target[0])
            b = frozenset(self._index[n] for n in fault.target[1])
            net.partitions.append((a, b))
        elif kind == "heal":
            net.partitions.clear()
        elif fault.target == ("*",):
            if kind == "loss":  # the most recent loss fault wins, for every link
                net.default_loss = fault.value
                net.loss.clear()
            elif kind == "restore":
                net.slow.clear()
        else:
            a, b = self._index[fault.target[0]], self._index[fault.target[1]]
            for pair in ((a, b), (b, a)):
                if kind == "slow":
                    net.slow[pair] = fault.value
                    net.ever_slowed = True
                elif kind == "restore":
                    net.slow.pop(pair, None)
                else:
                    net.loss[pair] = fault.value
