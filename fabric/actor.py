"""The actor: a trio task with a mailbox, private state, sends and fabric timers.

Subclasses write handlers ``on_<MessageClass>(self, msg, src)`` (``src`` is the sender's actor
index) and optionally ``on_start``. Handlers are plain methods: they read and change state and call
``send`` / ``set_timer``. The fabric routes a send at once (nothing in routing depends on which actor
ran first) and journals what each actor emitted once every actor woken in the window has gone idle,
actor by actor in wake order. An actor never sleeps on trio itself: waiting is a fabric timer.
"""

from __future__ import annotations

import attrs

from .log import get_logger
from .rand import Stream

# A queue entry's rank field: faults, then retransmissions, then messages, then timers at one time. A
# message's rank is its tie (``ties``, 0 <= tie < 2^TIE_BITS), so the order takes one int, not another tuple
# field. Faults and retransmissions (``connections``) start a window: what they change (a crash, a
# connection that times out) then holds from the start of the window, as from their time.
TIE_BITS = 30
RANK_FAULT, RANK_RETRY, RANK_MESSAGE, RANK_TIMER = -2, -1, 0, 1 << TIE_BITS
RANK_RESUME = 2 << TIE_BITS  # a server actor's backlog is due (``service``), after timers; never journaled
LOCAL = 2  # 'copy' field of a timer merged into its owner's mailbox within a window


@attrs.frozen
class ActorStatistics:
    """A snapshot of what every actor counts."""

    name: str
    incarnation: int
    received: int
    sent: int


class ActorCrashed(BaseException):
    """Thrown into a parked actor's task when the fault plan crashes it; ends the task."""


class Actor:
    """Base class of every scheduler component. ``self.id`` is the stable actor index."""

    # The fabric's per-actor fields live in slots (compact, and the fastest attribute access);
    # subclasses keep their own state in an ordinary ``__dict__`` unless they declare slots too.
    # The fields every message touches come first, so that they share as few cache lines as can be.
    __slots__ = ("_mailbox", "_pos", "_now", "_outbox", "_seq", "id", "fabric", "_fifo", "_parked",
                 "_task", "_crashed", "received", "name", "incarnation", "_rng", "_seq0", "_timers",
                 # single-server actors only (``service``): role costs (None: takes no time), busy until,
                 # arrival of the entry being handled, nanoseconds charged, backlog, held effects, resume
                 "_cost", "_busy", "_arrived", "_charged", "_backlog", "_deferred", "_resume_at", "__dict__")

    def __init__(self) -> None:
        # Set by Fabric._spawn before the task starts.
        self.fabric = None
        self.id = -1
        self.name = ""
        self.incarnation = 0
        self._rng: Stream | None = None
        self._mailbox: list = []  # key-sorted entries due in the current window
        self._pos = 0  # next mailbox entry to handle
        self._outbox: list = []  # journal records of this window's effects, in emission order
        self._now = 0
        self._seq = 0
        self._fifo = None  # the network's FIFO state of this actor's links
        self._parked = False
        self._crashed = False
        self._task = None
        self.received = 0
        self._seq0 = 0  # _seq when this incarnation started
        self._timers = 0  # timers this incarnation set
        self._cost = None
        self._busy = self._arrived = self._charged = 0
        self._backlog = self._deferred = None
        self._resume_at = -1

    @property
    def sent(self) -> int:
        """Messages this incarnation sent (counted as sequence numbers not spent on timers)."""
        return self._seq - self._seq0 - self._timers

    # ---- what handlers call -------------------------------------------------------------
    @property
    def now(self) -> int:
        """Virtual time of the message being handled, in microseconds."""
        return self._now

    @property
    def arrived(self) -> int:
        """Virtual time the message being handled arrived: ``now`` unless it waited in the mailbox of
        this actor while it was busy (a single server under a cost model, see ``service``)."""
        return self._now if self._cost is None else self._arrived

    @property
    def timed(self) -> bool:
        """Whether a cost model gives this actor service times (its ``charge`` counts)."""
        return self._cost is not None

    def charge(self, unit: str, count: int = 1) -> None:
        """Report ``count`` units of work (partitions searched, workers scanned, changes applied, ...)
        done by the handler running now; the cost model turns them into service time. A no-op for an
        actor that takes no time."""
        cost = self._cost
        if cost is not None and count:
            self._charged += cost.unit_ns(unit) * count

    @property
    def rng(self) -> Stream:
        """This incarnation's random stream, ``actor/<name>#<incarnation>`` under the run seed (made
        on first use: most actors never draw, and a stream costs a hash to derive)."""
        rng = self._rng
        if rng is None:
            rng = self._rng = Stream(self.fabric.seed, f"actor/{self.name}#{self.incarnation}")
        return rng

    @rng.setter
    def rng(self, stream: Stream) -> None:
        self._rng = stream

    def send(self, dst: int, msg) -> None:
        """Send ``msg`` to actor index ``dst`` across the network (a single server holds it until the
        end of its service: ``service``)."""
        self._seq += 1
        held = self._deferred
        if held is None:
            self.fabric._send(self, dst, msg)
        else:
            held.append((self._seq, dst, msg, -1))

    def set_timer(self, delay_us: int, msg) -> None:
        """Deliver ``msg`` to this actor itself after ``delay_us`` (bypasses the network)."""
        if delay_us < 0:
            raise ValueError(f"{self.name}: timer delay {delay_us} us is negative")
        self._seq += 1
        self._timers += 1
        held = self._deferred
        if held is None:
            self.fabric._set_timer(self, self._now + delay_us, msg)
        else:
            held.append((self._seq, -1, msg, delay_us))

    def stop_run(self) -> None:
        """Ask the fabric to end the run after the current window."""
        self.fabric.stop()

    @property
    def log(self):
        """A structlog logger bound to this actor and the current virtual time: into the run's event
        log when it has one (``fabric.log.EventLog``), else structlog's global configuration."""
        events = getattr(self.fabric, "event_log", None)
        if events is not None:
            return events.logger(self.id, self.name, self._now)
        return get_logger(actor=self.name, vtime_us=self._now)

    # ---- what subclasses override -------------------------------------------------------
    def on_start(self) -> None:
        """Called once when this incarnation's task starts (at time 0 or at restart)."""

    def on_crash(self) -> None:
        """Called as a crash takes this incarnation down, so measurements can note what is lost (a
        worker's running tasks); it must not send or set timers: the instance is gone after it."""

    def on_ConnectionBroken(self, msg, src: int) -> None:
        """The fabric's notice that a connection of this actor broke (``connections``): ignored unless a
        subclass acts on it."""

    def statistics(self):
        """A frozen snapshot of this actor's state for tools (subclasses extend)."""
        return ActorStatistics(self.name, self.incarnation, self.received + self._pos, self.sent)

    def unhandled(self, msg, src: int) -> None:
        raise TypeError(f"{type(self).__name__} {self.name} has no handler on_{type(msg).__name__}")

    # ---- handler lookup (the fabric runs the task: ``Fabric._handle``) --------------------
    @classmethod
    def _handlers(cls) -> dict:
        cache = cls.__dict__.get("_fedemu_handlers")
        if cache is None:
            cache = {}
            cls._fedemu_handlers = cache
        return cache

    @classmethod
    def _resolve(cls, msg_cls):
        fn = getattr(cls, "on_" + msg_cls.__name__, None)
        if fn is None:
            fn = cls.unhandled
        cls._handlers()[msg_cls] = fn
        return fn
