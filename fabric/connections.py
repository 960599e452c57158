"""Connections: each ordered pair of actors that talk has one, FIFO and reliable while it is up, as a TCP
connection is (the papers' systems ran over TCP: Megha's prototype over RabbitMQ and HTTP, Megha 2022,
V-D; Pigeon's and the Sparrow it was compared with over Thrift RPC, Pigeon 2019's prototype evaluation).
docs/connections.md says it for users.

- Loss is retransmission delay. A message whose transmission fails (its draw against the loss in force
  when it is due, or a partition between its ends) is transmitted again one RTO later, the RTO doubling
  at each try (Linux: 200 ms minimum, 120 s maximum) and never less than the network's least latency
  (a real RTO exceeds the round trip; the kernel's windows need it). Try k of send s of sender a draws
  counter ``4 s + 2 + k * 2^40`` of a's network stream: its fate depends on nothing another actor did.
- Head-of-line blocking: while a message waits for its retransmission, the later ones on its
  connection wait behind it (they have reached the receiver's buffer) and are delivered with it, in order.
- A connection breaks when an end crashes (``crash``), or when its waiting message has been undelivered
  for the connection timeout (``timeout``: a partition or total loss outlasted it; the last try is made
  at the timeout). What its sender sent on it before the break and was not delivered is lost (dropped
  as ``broken`` when it comes due); the next send opens a new connection. A message that finds its
  receiver down is lost alone (``refused``), as a connect to a dead process is: each send tries again.
  Crashes and retransmissions start a window (``actor.RANK_*``), so "before the break" is "before its
  time" in the windowed kernel and in a tick-by-tick one alike.
- Each live end (of a refusal, the sender) is told by a ``ConnectionBroken`` notice, a fabric-made
  message from outside (journaled as a send and a delivery, so replay reproduces it). It arrives one
  network latency (the least the network has now) after the break. The survivor of a crash learns at
  once, as from the reset its peer's host sends when the process dies (a restart brings the same actor
  back, so a crash is a process's, not a lost host's); both ends of a timed-out connection learn at the
  timeout, the sender from its retransmissions and the receiver from its keepalive.

Nothing here runs in a fault-free run: the kernel calls ``arrive`` only while ``watch`` is non-empty
(a partition, loss or a broken connection), and pairs are tracked (``opened``) only when the plan has
a crash: only a crash breaks a connection with nothing in flight, so only a crash needs to know them.
"""

from __future__ import annotations

from . import rand
from .actor import RANK_RETRY
from .messages import message
from .network import DRAWS_PER_SEND

RTO_MAX_US = 120_000_000  # Linux's TCP_RTO_MAX: the backoff stops doubling here
TRY_STRIDE = 1 << 40  # the loss draw of try k of a send is its first one's counter + k * TRY_STRIDE


@message("fabric.broken")
class ConnectionBroken:
    """The fabric's notice to a live end: connection ``src`` -> ``dst`` broke at ``at_us``, and what was sent
    on it and not delivered is lost. ``cause``: crash (an end crashed), timeout (a cut outlasted the
    connection timeout) or refused (a message found ``dst`` down)."""

    src: int
    dst: int
    at_us: int
    cause: str


class _Stall:
    """A connection whose first undelivered message (``seq``) waits for its retransmission."""

    __slots__ = ("seq", "first", "tries", "held")

    def __init__(self, seq: int, first: int) -> None:
        self.seq = seq
        self.first = first  # when it first came due: the connection times out at first + timeout
        self.tries = 0  # retransmissions so far
        self.held: list = []  # later queue entries on the connection, waiting behind it


class Connections:
    """The fabric's connection state: stalled connections, the cut of each broken one (the sender's last
    sequence number when it broke: entries up to it are lost) and, when tracked, the open pairs."""

    def __init__(self, fabric) -> None:
        self.fabric = fabric
        self.stalls: dict[tuple[int, int], _Stall] = {}
        self.cut: dict[tuple[int, int], int] = {}
        self.out: dict[int, set] | None = None  # when tracked: actor -> every actor it sent to
        self.into: dict[int, set] | None = None  # actor -> every actor that sent to it
        self.last: dict[tuple[int, int], int] = {}  # when tracked: the time of each pair's latest send
        self.broken_at: dict[tuple[int, int], int] = {}  # the time each pair's connection last broke
        self.watch: list = []  # non-empty while deliveries must come here (the kernel keeps a reference)
        self.breaks = 0

    def track(self) -> None:
        """Record which pairs talk (``opened``): a crash then breaks every open connection of its actor."""
        self.out, self.into = {}, {}

    def opened(self, src: int, dst: int, now: int) -> None:
        """``src`` sent to ``dst`` at ``now`` (tracked runs only): the pair's connection is open unless it broke
        after that. Times, not the order of calls, decide, so that a send and a break at one time agree with
        the cut (a send at the break's time is on the new connection)."""
        pair = (src, dst)
        if pair not in self.last:
            self.out.setdefault(src, set()).add(dst)
            self.into.setdefault(dst, set()).add(src)
        self.last[pair] = now

    def is_open(self, pair: tuple[int, int]) -> bool:
        """Whether ``pair`` has sent since its connection last broke (tracked runs only)."""
        return self.last[pair] >= self.broken_at.get(pair, -1)

    def refresh(self) -> None:
        """Watch deliveries while anything can delay or lose one: a partition, loss, a stall or a cut."""
        net = self.fabric.network
        on = bool(net.partitions or net.lossy or self.stalls or self.cut)
        if on != bool(self.watch):
            self.watch[:] = [True] if on else []

    # ---- a message comes due ------------------------------------------------------------------
    def arrive(self, entry, actor) -> list | None:
        """A message ``entry`` is due at its receiver ``actor`` (None: down). Returns the entries to deliver
        now with their retransmission counts, in order, or None (held, retransmitted, or lost)."""
        f = self.fabric
        at, src, seq, dst = entry[0], entry[2], entry[3], entry[5]
        if src < 0:  # injected from outside: no connection
            if actor is None:
                f._dropped(at, src, seq, dst, "dead")
                return None
            return [(entry, 0)]
        pair = (src, dst)
        if seq <= self.cut.get(pair, 0):
            f._dropped(at, src, seq, dst, "broken")
            return None
        if actor is None:  # refused: lost, and its sender told (the next send tries again)
            f._dropped(at, src, seq, dst, "refused")
            self.refused(pair, at)
            return None
        stall = self.stalls.get(pair)
        if stall is not None and stall.seq != seq:
            stall.held.append(entry)
            return None
        tries = 0 if stall is None else stall.tries
        net = f.network
        failed = bool(net.partitions) and net.blocked(src, dst)
        if not failed:
            loss = net.loss_of(src, dst)
            failed = loss > 0.0 and rand.unit(f._keys[src], seq * DRAWS_PER_SEND + 2 + tries * TRY_STRIDE) < loss
        if not failed:
            if stall is None:
                return [(entry, 0)]
            del self.stalls[pair]
            self.refresh()
            rank = entry[1]
            held = sorted(stall.held, key=lambda e: e[3])
            return [(entry, tries)] + [((at, rank, src, e[3], 0, dst, e[6]), 0) for e in held]
        if stall is None:
            stall = self.stalls[pair] = _Stall(seq, at)
            self.refresh()
        deadline = stall.first + net.timeout_us
        if at >= deadline:
            f._dropped(at, src, seq, dst, "broken")
            self.broke(pair, at, "timeout")
            return None
        nxt = max(min(at + min(net.rto_us << tries, RTO_MAX_US), deadline), at + net.window)
        stall.tries = tries + 1
        f._push((nxt, RANK_RETRY, src, seq, 0, dst, entry[6]))
        return None

    # ---- breaks -------------------------------------------------------------------------------
    def crashed(self, idx: int, at: int) -> None:
        """Actor ``idx`` crashed at ``at``: every open connection it is an end of breaks (tracked runs)."""
        if self.out is None:
            return
        pairs = {(idx, d) for d in self.out.get(idx, ())} | {(s, idx) for s in self.into.get(idx, ())}
        for pair in sorted(p for p in pairs if self.is_open(p)):
            self.broke(pair, at, "crash")

    def refused(self, pair: tuple[int, int], at: int) -> None:
        """A message on ``pair`` found its receiver down at ``at``: the connection never opened, and its
        sender (if up) is told one network latency later. Nothing else on the pair is cut: each message is
        a new try, refused while the receiver is down (so this needs no sequence cut, which a break in the
        middle of a window could not place)."""
        f = self.fabric
        src, dst = pair
        self.breaks += 1
        if f._actors[src] is not None:
            f._notify(at, src, ConnectionBroken(src, dst, at, "refused"), at + f.network.window)

    def broke(self, pair: tuple[int, int], at: int, cause: str) -> None:
        """Connection ``pair`` breaks at ``at``: what was sent on it and not delivered is lost (what waits
        behind a stalled message is dropped now, what is still in flight when it comes due), and each live
        end gets a notice one network latency later."""
        f = self.fabric
        src, dst = pair
        sender = f._actors[src]
        self.cut[pair] = sender._seq if sender is not None else f._seq[src]
        self.breaks += 1
        stall = self.stalls.pop(pair, None)
        if stall is not None:
            for e in sorted(stall.held, key=lambda e: e[3]):
                f._dropped(at, src, e[3], dst, "broken")
        self.broken_at[pair] = at
        self.refresh()
        due = at + f.network.window
        for end in (src, dst):
            if f._actors[end] is not None:
                f._notify(at, end, ConnectionBroken(src, dst, at, cause), due)


__all__ = ["RTO_MAX_US", "TRY_STRIDE", "ConnectionBroken", "Connections"]
