"""Crash recovery that costs nothing while nothing fails: the parts every scheduler's recovery is built from.

Messages travel on connections (``fabric.connections``, docs/connections.md): while one is up nothing on
it is lost, duplicated or reordered, so a protocol sends each message once, with no acks, no resends on a
timer and no deduplication. A message is lost only with its connection (an end crashed, or a cut outlasted
``conn_timeout_s``) or when its receiver is down (refused), and then the fabric tells each live end with a
``ConnectionBroken`` notice. So recovery starts from notices, and its timers run only while something is
wrong. What it needs, once for every scheduler:

- ``backoff``: the wait before retry k, doubling, capped at ``RETRY_CAP_US``.
- ``Recovering``, the hook by which a notice reaches an actor's recovery components. An actor mixes it in
  (before ``Actor``) and registers its components with ``recover``; each notice becomes one ``Break`` (the
  peer, the cause, when, and whether it was the connection this actor sent on), handed to every
  component's ``broken`` in the order they were registered. The two notices one crash makes (one per
  direction) are one Break. A component's own timers come back to it the same way (``arm`` -> ``due``).
- ``Retries``: asks that wait on a peer's answer. A live connection loses none, so they are sent once; when
  the connection to the peer breaks they are sent again after a backoff, and again at each break (a peer
  that is down refuses each one), never given up while the owner still waits: a peer may come back after
  any outage. The owner stops waiting when the answer comes, or when it has moved the work elsewhere.
- ``Suspects``: peers a notice showed down (crashed, or refusing), not to be counted on until a backoff
  has passed or they are heard from: where work can go elsewhere, it goes elsewhere meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from fedemu.fabric.messages import message

RETRY_CAP_US = 60_000_000  # retries back off exponentially up to a minute apart


def backoff(base_us: int, tries: int, cap_us: int = RETRY_CAP_US) -> int:
    """The wait before retry ``tries`` (1, 2, ...): ``base_us`` doubled each time, at most ``cap_us`` (or
    ``base_us`` itself when that is longer)."""
    return min(base_us << min(max(tries, 1) - 1, 40), max(base_us, cap_us))


@attrs.frozen
class Break:
    """A connection of this actor with ``peer`` broke at ``at_us`` (``cause``: crash, timeout or refused).
    ``sent``: it was the connection this actor sent on (what it sent and was not delivered is lost; a refusal
    is always one); else the one the peer sent on (what the peer sent is lost)."""

    peer: int
    at_us: int
    cause: str
    sent: bool

    @property
    def peer_lost_state(self) -> bool:
        """The peer crashed or is down (refused): what it held in memory is gone (a restart starts empty)."""
        return self.cause != "timeout"


@message("recovery.due")
class RecoveryDue:
    """A recovery component's own timer (``Recovering.arm``): ``what`` names the component, ``key`` what is
    due, ``nonce`` which arming (a later one supersedes it)."""

    what: str
    key: object
    nonce: int


class Recovering:
    """Mixin for an Actor (list it before ``Actor``): the fabric's notices and the recovery timers reach the
    components registered with ``recover``. A component has a ``name`` (its timers' ``what``), and may
    define ``broken(brk: Break)`` and ``due(key, nonce)``."""

    def recover(self, component):
        """Register ``component`` (its ``name`` unique on this actor); returns it."""
        components = self.__dict__.setdefault("_recovery", {})
        if component.name in components:
            raise ValueError(f"{self.name}: a recovery component named {component.name!r} is registered already")
        components[component.name] = component
        return component

    def arm(self, component, delay_us: int, key, nonce: int) -> None:
        """Set a timer that comes back as ``component.due(key, nonce)`` after ``delay_us``."""
        self.set_timer(delay_us, RecoveryDue(component.name, key, nonce))

    def on_ConnectionBroken(self, msg, src: int) -> None:
        mine = msg.src == self.id
        brk = Break(msg.dst if mine else msg.src, msg.at_us, msg.cause, mine)
        seen = self.__dict__.setdefault("_breaks_seen", {})
        if brk.cause == "crash" and seen.get(brk.peer) == brk.at_us:
            return  # the other direction of the same crash: one Break
        seen[brk.peer] = brk.at_us if brk.cause == "crash" else -1
        self.connection_broke(brk)
        for component in self.__dict__.get("_recovery", {}).values():
            broken = getattr(component, "broken", None)
            if broken is not None:
                broken(brk)

    def connection_broke(self, brk: Break) -> None:
        """The actor's own reaction to a break, before its components' (none by default)."""

    def on_RecoveryDue(self, msg: RecoveryDue, src: int) -> None:
        self._recovery[msg.what].due(msg.key, msg.nonce)


class Retries:
    """Asks an actor waits on, per peer: sent once; sent again ``backoff(base_us, k)`` after the k-th break
    of a connection with the peer since it was last heard from (``heard``), for as long as the owner waits
    (``answered`` ends one ask; ``forget`` every ask to a peer). ``resend(peer, key)`` sends an ask again.
    Keys are plain data (they travel in a journaled timer) and are resent in the order they were asked.
    An owner that keeps its asks anyway may give ``pending(peer)``, the keys it still waits on from
    ``peer`` in order, instead of calling ``asked``/``answered``: then a fault-free run pays nothing here.
    Register it with the actor's ``recover``."""

    # one per node in some schedulers (10,000 of them): slots, not an instance dict
    __slots__ = ("actor", "name", "base_us", "resend", "pending", "waiting", "breaks", "armed", "nonce")

    def __init__(self, actor, name: str, base_us: int, resend: Callable[[int, object], None],
                 pending: Callable[[int], list] | None = None) -> None:
        self.actor = actor
        self.name = name
        self.base_us = base_us
        self.resend = resend
        self.pending = pending
        self.waiting: dict[int, dict] = {}  # peer -> {key: None}, in the order asked
        self.breaks: dict[int, int] = {}  # peer -> breaks since it was last heard from
        self.armed: dict[int, int] = {}  # peer -> nonce of its pending resend
        self.nonce = 0

    def asked(self, peer: int, key) -> None:
        """``key`` was asked of ``peer`` (the owner sent it): wait for its answer."""
        self.waiting.setdefault(peer, {})[key] = None

    def answered(self, peer: int, key) -> None:
        """The answer to ``key`` came (or it is no longer wanted)."""
        asks = self.waiting.get(peer)
        if asks is not None:
            asks.pop(key, None)
            if not asks:
                del self.waiting[peer]

    def forget(self, peer: int) -> list:
        """Stop waiting on ``peer`` at all (its work moved elsewhere); returns the keys that were waiting."""
        self.armed.pop(peer, None)
        return list(self.waiting.pop(peer, {}))

    def heard(self, peer: int) -> None:
        """``peer`` answered something: its next break backs off from the start again."""
        self.breaks.pop(peer, None)

    def waits_on(self, peer: int) -> bool:
        return bool(self.pending(peer)) if self.pending is not None else peer in self.waiting

    def broken(self, brk: Break) -> None:
        peer = brk.peer
        if peer in self.armed or not self.waits_on(peer):
            return
        tries = self.breaks[peer] = self.breaks.get(peer, 0) + 1
        self.nonce += 1
        self.armed[peer] = self.nonce
        self.actor.arm(self, backoff(self.base_us, tries), peer, self.nonce)

    def due(self, peer: int, nonce: int) -> None:
        if self.armed.get(peer) != nonce:
            return  # forgotten, or superseded
        del self.armed[peer]
        for key in self.pending(peer) if self.pending is not None else list(self.waiting.get(peer, ())):
            self.resend(peer, key)


class Suspects:
    """Peers a notice showed down (crashed, or refusing messages): each is not counted on until ``backoff(
    base_us, k)`` after its k-th such notice since it was last heard from. Hearing from it clears it."""

    def __init__(self, base_us: int) -> None:
        self.base_us = base_us
        self.until: dict[int, int] = {}  # peer -> when it may be tried again
        self.strikes: dict[int, int] = {}  # peer -> notices since last heard from

    def __bool__(self) -> bool:
        return bool(self.until)

    def down(self, peer: int, now_us: int) -> int:
        """``peer`` is down as of ``now_us``; returns when it may be tried again."""
        strikes = self.strikes[peer] = self.strikes.get(peer, 0) + 1
        until = self.until[peer] = now_us + backoff(self.base_us, strikes)
        return until

    def usable(self, peer: int, now_us: int) -> bool:
        """Whether ``peer`` may be counted on now (never suspected, or its backoff is over)."""
        until = self.until.get(peer)
        return until is None or until <= now_us

    def heard(self, peer: int) -> None:
        """``peer`` sent something: it is up."""
        if peer in self.until:
            del self.until[peer]
            self.strikes.pop(peer, None)


__all__ = ["RETRY_CAP_US", "Break", "RecoveryDue", "Recovering", "Retries", "Suspects", "backoff"]
