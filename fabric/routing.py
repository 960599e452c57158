"""The fabric's send side: sends and timers are routed and queued as they are made, and their
journal records wait in their actor's outbox until every actor of the window is idle again.

A send's queue key ``(time, rank + tie, sender, sender's seq, copy)`` (``ties``), its latency draw
(counter-based) and its link's FIFO state (owned by its one sender) do not depend on which actor ran
first. Only the journal order would, so ``_flush`` writes the outboxes actor by actor in wake order.
A send on a plain network takes the fast path (``fastpath.make_send``); every other send takes
``_send_routed``, which is also the fast path's plain twin in the tests.
"""

from __future__ import annotations

from bisect import insort

from . import fastpath, ties
from .actor import LOCAL, RANK_MESSAGE, RANK_TIMER, Actor
from .events import EventQueue
from .journal import DROP, SEND, TIMER_FIRE, TIMER_SET, Journal
from .network import Network

OUTSIDE = -1  # sender index of messages injected by the scenario


class Routing:
    """The event queue, the network and the journal, and how sends and timers enter them.

    ``Fabric`` (``kernel``) builds on it: it adds the actors (``_actors``, ``_keys``) and moves
    ``_window_end`` and ``_last_event`` as it delivers."""

    def __init__(self, network: Network | None, journal: Journal | None) -> None:
        self.network = network or Network()
        self.journal = journal or Journal(None)
        self._queue = EventQueue(self._bucket_width())
        self._push = self._queue.push
        self._actors: list[Actor | None] = []  # the live instance per actor index, None while down
        self._keys: list[int] = []  # the network stream key of each actor's sends
        self._ties: list[int] = []  # the tie key of each actor's sends (``ties.sender_key``)
        self._outside_tie = 0  # the tie key of injected messages
        self._outside_seq = 0
        self._window_end = 0  # a timer due before it is merged into its owner's mailbox
        self._last_event = 0
        self.timers = 0
        self.sent_by_kind: dict[str, int] = {}
        self.drops_by_cause: dict[str, int] = {}
        self._fast_send = fastpath.make_send(self)
        self._send = self._fast_send  # Actor.send calls it: (actor, dst, msg); the routed path when tracking
        self._opened = None  # when pairs are tracked (``connections``): called with each send's (src, dst, now)

    def _bucket_width(self) -> int:
        """Event-queue buckets one window wide. Measured against a sixteenth of a window: fewer cache
        misses per message in the 10,000-actor ping-pong, and Megha's goog case 45.3 s, not 47.1 s."""
        return self.network.window

    @property
    def sent(self) -> int:
        """Messages the actors sent (injected ones are not counted)."""
        return sum(self.sent_by_kind.values())

    def inject(self, dst: int, msg, at_us: int = 0) -> None:
        """Schedule a message from outside the system (no network) for delivery at ``at_us``."""
        self._notify(self.now, dst, msg, at_us)

    def _notify(self, now: int, dst: int, msg, at_us: int) -> None:
        """A message from outside made at ``now`` (an injected one, or the fabric's own notice), due at ``at_us``."""
        self._outside_seq += 1
        seq = self._outside_seq
        self.journal.append((SEND, now, OUTSIDE, seq, dst, at_us, msg._fedemu_tag, msg._fedemu_fields(msg)))
        self._push((at_us, RANK_MESSAGE + ties.tie(self._outside_tie, at_us), OUTSIDE, seq, 0, dst, msg))

    def _bad_dst(self, actor: Actor, dst: int, msg) -> None:
        raise ValueError(f"{actor.name} sent {msg._fedemu_tag} to actor index {dst}; "
                         f"valid: 0..{len(self._actors) - 1}")

    def _send_routed(self, actor: Actor, dst: int, msg) -> None:
        """Route ``actor``'s send number ``actor._seq`` with ``Network.route`` (any network: faults,
        per-link overrides) and queue it; its record goes to the actor's outbox."""
        idx, seq, now = actor.id, actor._seq, actor._now
        if not 0 <= dst < len(self._actors):
            self._bad_dst(actor, dst, msg)
        at = self.network.route(idx, dst, seq, now, self._keys[idx])
        tag = msg._fedemu_tag
        actor._outbox.append((SEND, now, idx, seq, dst, at, tag, msg._fedemu_fields(msg)))
        self.sent_by_kind[tag] = self.sent_by_kind.get(tag, 0) + 1
        if self._opened is not None:
            self._opened(idx, dst, now)
        self._push((at, RANK_MESSAGE + ties.tie(self._ties[idx], at), idx, seq, 0, dst, msg))

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
        extend = self.journal.extend
        for actor in actors:
            out = actor._outbox
            if out:
                extend(out)
                out.clear()

    def _drop(self, cause: str) -> None:
        self.drops_by_cause[cause] = self.drops_by_cause.get(cause, 0) + 1

    def _dropped(self, at: int, src: int, seq: int, dst: int, cause: str) -> None:
        """An entry due now is not delivered (its receiver is down, or its connection broke)."""
        self.journal.pack((DROP, at, src, seq, dst, cause))
        self._drop(cause)
