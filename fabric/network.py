"""The network model: per-link latency, loss and ordering, the connections' RTO and timeout, plus live
fault state.

Each directed link uses the default ``Link`` unless overridden. Network faults change the live state,
through ``Network.apply`` only: partitions between sets of actors, latency multipliers (slow) and
loss overrides on links. Loss is not decided here: it delays a message on its connection
(``connections``), as partitions do.
Draws come from counter-based streams keyed by (seed, "net", sender) and the send's sequence number,
so a message's fate does not depend on what any other actor did first.
"""

from __future__ import annotations

import math

import attrs

from . import rand
from .errors import ConfigError
from .faults import ACTOR_KINDS, Resolved

LATENCY_KINDS = ("const", "uniform", "lognormal")


@attrs.frozen
class Latency:
    """One-way latency in microseconds: ``const`` (lo), ``uniform`` [lo, hi], or ``lognormal``
    with median ``median`` and shape ``sigma``, clipped to [lo, hi]."""

    kind: str = "const"
    lo: int = 500
    hi: int = 500
    median: float = 0.0
    sigma: float = 0.0

    def __attrs_post_init__(self):
        if self.kind not in LATENCY_KINDS:
            raise ConfigError(f"latency kind {self.kind!r} is unknown; known: {', '.join(LATENCY_KINDS)}")
        if self.lo < 0 or self.hi < self.lo:
            raise ConfigError(f"latency bounds [{self.lo}, {self.hi}] us are invalid; need 0 <= lo <= hi")
        if self.kind == "lognormal" and (self.median <= 0 or self.sigma < 0):
            raise ConfigError(f"lognormal latency needs median > 0 and sigma >= 0, got {self.median}, {self.sigma}")

    @classmethod
    def const(cls, us: int) -> "Latency":
        return cls("const", int(us), int(us))

    @classmethod
    def uniform(cls, lo: int, hi: int) -> "Latency":
        return cls("uniform", int(lo), int(hi))

    @classmethod
    def lognormal(cls, median: float, sigma: float, lo: int, hi: int) -> "Latency":
        return cls("lognormal", int(lo), int(hi), float(median), float(sigma))

    @property
    def constant(self) -> bool:
        return self.kind == "const" or self.lo == self.hi

    def sample(self, key: int, counter: int) -> int:
        """A latency for the send with counter ``counter`` of stream ``key``."""
        if self.constant:
            return self.lo
        if self.kind == "uniform":
            return self.lo + (rand.draw(key, counter) * (self.hi - self.lo + 1) >> 64)
        u1 = 1.0 - rand.unit(key, counter)
        u2 = rand.unit(key, counter + 1)
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        value = int(round(self.median * math.exp(self.sigma * z)))
        return min(max(value, self.lo), self.hi)


@attrs.frozen
class Link:
    """How one directed link behaves: latency, the probability that a transmission is lost (then
    retransmitted: ``connections``), FIFO or not (``fifo=False`` lets jittered sends overtake: tests only)."""

    latency: Latency = Latency()
    loss: float = 0.0
    fifo: bool = True

    def __attrs_post_init__(self):
        if not 0.0 <= self.loss <= 1.0:
            raise ConfigError(f"link loss probability {self.loss} is not in [0, 1]")


# Per send, draws are taken at counters 4*seq + k: k = 0,1 latency, 2 loss (its first transmission; see
# ``connections`` for the retransmissions'), 3 unused (it was duplication's).
DRAWS_PER_SEND = 4

# A connection's first retransmission timeout: Linux's minimum RTO (TCP_RTO_MIN, 200 ms), which is what a
# data-centre RTT of well under a millisecond gets. A connection breaks when a message has waited this
# long: RabbitMQ's default heartbeat timeout (Megha's prototype ran over RabbitMQ and HTTP).
RTO_US = 200_000
CONNECTION_TIMEOUT_US = 60_000_000


class SenderFifo:
    """One sender's FIFO state: the latest delivery time on each of its links that may still be in
    flight. Once everything it sent has arrived (``now >= latest``) no send can overtake another, so
    the per-link table is dropped: a sender with one message in flight at a time never builds one."""

    __slots__ = ("latest", "last_dst", "table")

    def __init__(self) -> None:
        self.latest = 0  # the latest delivery time of anything this sender sent
        self.last_dst = -1  # while ``table`` is None: the link of the one send since it was dropped
        self.table: dict[int, int] | None = None  # dst -> latest delivery time on that link

    def clamp(self, now: int, dst: int, at: int) -> int:
        """The delivery time of a send to ``dst`` made at ``now`` and drawn as ``at``: no earlier than
        the link's last delivery. (``fastpath`` inlines the first branch.)"""
        if now >= self.latest:  # all sent before has arrived; at >= now, so nothing can be overtaken
            self.table = None
            self.last_dst = dst
            self.latest = at
            return at
        table = self.table
        if table is None:
            table = self.table = {self.last_dst: self.latest}
        last = table.get(dst, 0)
        if at < last:
            at = last
        table[dst] = at
        if at > self.latest:
            self.latest = at
        return at


def listed(names, shown: int = 5) -> str:
    """Names in order, comma-separated, the first ``shown`` of them and how many more."""
    names = sorted(names)
    more = f", … ({len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


class Network:
    """Default link, per-link overrides, and the live fault state the fabric consults per message."""

    def __init__(self, default: Link | None = None, *, rto_us: int = RTO_US,
                 timeout_us: int = CONNECTION_TIMEOUT_US) -> None:
        if rto_us < 1 or timeout_us < 1:
            raise ConfigError(f"connection rto {rto_us} us and timeout {timeout_us} us must be at least 1 us")
        self._default = default or Link()
        self.rto_us = int(rto_us)  # a connection's first retransmission timeout (``connections``)
        self.timeout_us = int(timeout_us)  # a message undelivered this long breaks its connection
        self.links: dict[tuple[int, int], Link] = {}
        self.slow: dict[tuple[int, int], float] = {}
        self.loss: dict[tuple[int, int], float] = {}
        self.default_loss: float | None = None
        self.lossy = False  # any loss in force now (cached by ``changed``)
        self.partitions: list[tuple[frozenset, frozenset]] = []
        self.ever_slowed = False
        self.fifo: dict[int, SenderFifo] = {}  # per sender, its links' FIFO clamps
        self.window = 1
        self.fixed = None
        self.jitter = None
        self.changed()

    @property
    def default(self) -> Link:
        return self._default

    @default.setter
    def default(self, link: Link) -> None:
        self._default = link
        self.changed()

    def set_link(self, src: int, dst: int, link: Link) -> None:
        self.links[(src, dst)] = link
        self.changed()

    def lookahead(self) -> int:
        """The least latency any message can have now: the fabric's safe window length."""
        return self._lookahead()

    def _lookahead(self) -> int:
        low = min([self.default.latency.lo, *(l.latency.lo for l in self.links.values())])
        if self.slow:
            low = min(low, *(int(low * f) for f in self.slow.values()))
        return low

    def apply(self, fault: Resolved) -> None:
        """Apply a network fault (partition, heal, slow, restore, loss; names already resolved to indices)
        and refresh what is cached from the live state. Slow, restore and loss act on both directions of a
        link; on every link ('*'), loss replaces every earlier loss fault and restore ends every slow link."""
        kind = fault.kind
        if kind in ACTOR_KINDS:
            raise ValueError(f"fault {kind} is the fabric's to apply, not the network's")
        if kind == "partition":
            self.partitions.append(fault.sides)
        elif kind == "heal":
            self.partitions.clear()
        elif fault.link is None:
            if kind == "loss":
                self.default_loss = fault.value
                self.loss.clear()
            else:  # restore; slow on every link is refused when the plan is made
                self.slow.clear()
        else:
            a, b = fault.link
            for pair in ((a, b), (b, a)):
                if kind == "slow":
                    self.slow[pair] = fault.value
                    self.ever_slowed = True
                elif kind == "restore":
                    self.slow.pop(pair, None)
                else:
                    self.loss[pair] = fault.value
        self.changed()

    def in_force(self, name_of) -> list[str]:
        """The network faults in force now, one line each (``name_of``: actor index -> name): partitions,
        loss (a fault's, or the run's own links'), slowed links. Empty for a plain network."""
        out = [f"partition {{{listed(map(name_of, a))}}} | {{{listed(map(name_of, b))}}}" for a, b in self.partitions]
        if self.default_loss is None and self.default.loss:
            out.append(f"loss {self.default.loss:g} on every link, from the start")
        elif self.default_loss:
            out.append(f"loss {self.default_loss:g} on every link")
        if self.default_loss is None:
            out += [f"loss {link.loss:g} on {name_of(a)}->{name_of(b)}, from the start"
                    for (a, b), link in sorted(self.links.items()) if link.loss and (a, b) not in self.loss]
        out += [f"loss {p:g} on {name_of(a)}<->{name_of(b)}" for (a, b), p in sorted(self.loss.items()) if p and a < b]
        out += [f"slow x{f:g} on {name_of(a)}<->{name_of(b)}" for (a, b), f in sorted(self.slow.items()) if a < b]
        return out

    def changed(self) -> None:
        """Recompute the cached ``window`` (lookahead, at least one tick), ``fixed`` latency and
        ``jitter`` and ``lossy``; call after changing links in place (``apply`` calls it for faults)."""
        self.window = max(self._lookahead(), 1)
        own = self.default.loss or any(link.loss for link in self.links.values())  # unless a '*' fault overrides
        self.lossy = bool(any(self.loss.values()) or self.default_loss or (self.default_loss is None and own))
        self.fixed = self.fixed_latency()
        self.jitter = self.plain_jitter()

    def _plain(self) -> bool:
        """Only the default link applies, without loss or faults."""
        return not (self.links or self.slow or self.loss or self.default_loss is not None or self.ever_slowed
                    or self.default.loss)

    def fixed_latency(self) -> int | None:
        """The latency of every send when the network is plain with a constant latency, so the
        fabric may skip routing; else None."""
        return self.default.latency.lo if self._plain() and self.default.latency.constant else None

    def plain_jitter(self) -> tuple[int, int, bool] | None:
        """``(lo, hi - lo + 1, fifo)`` when the network is plain with a uniform latency, so the
        fabric may route inline (the same draws as ``route``); else None."""
        lat = self.default.latency
        if not self._plain() or lat.kind != "uniform" or lat.constant:
            return None
        return lat.lo, lat.hi - lat.lo + 1, self.default.fifo

    def sender_fifo(self, src: int) -> SenderFifo:
        """The FIFO state of ``src``'s links (made on first use; it outlives crashes, as links do)."""
        fifo = self.fifo.get(src)
        if fifo is None:
            fifo = self.fifo[src] = SenderFifo()
        return fifo

    def link(self, src: int, dst: int) -> Link:
        links = self.links
        return links.get((src, dst), self.default) if links else self.default

    def blocked(self, src: int, dst: int) -> bool:
        """True when an active partition separates src from dst."""
        for a, b in self.partitions:
            if (src in a and dst in b) or (src in b and dst in a):
                return True
        return False

    def loss_of(self, src: int, dst: int) -> float:
        """The probability that a transmission from src to dst is lost now: a loss fault on the link, else
        one on every link, else the link's own."""
        loss = self.link(src, dst).loss
        if self.loss or self.default_loss is not None:
            loss = self.loss.get((src, dst), self.default_loss if self.default_loss is not None else loss)
        return loss

    def route(self, src: int, dst: int, seq: int, now: int, key: int) -> int:
        """The time send ``seq`` of ``src`` comes due at ``dst`` (its first transmission's arrival)."""
        link = self.link(src, dst)
        delay = link.latency.sample(key, seq * DRAWS_PER_SEND)
        if self.slow:
            factor = self.slow.get((src, dst))
            if factor is not None:
                delay = int(delay * factor)
        at = now + delay
        if link.fifo and (self.ever_slowed or not link.latency.constant):
            at = self.sender_fifo(src).clamp(now, dst, at)
        return at
