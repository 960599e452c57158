"""Shared test actors, a tick-by-tick reference simulator and journal invariant checks for the
fabric test suite (tests/test_fabric_*.py).

Nothing here imports pytest: the helpers raise AssertionError with a precise message, so they can be
used from plain tests and from hypothesis properties alike.
"""

from __future__ import annotations

import os
import textwrap
import types
from collections import Counter, defaultdict
from heapq import heappop, heappush

import attrs

from fedemu.fabric import messages, rand, ties
from fedemu.fabric.actor import RANK_FAULT, RANK_MESSAGE, RANK_RETRY, RANK_TIMER, Actor
from fedemu.fabric.connections import ConnectionBroken
from fedemu.fabric.faults import plan as make_plan
from fedemu.fabric.journal import DELIVER, DROP, FAULT, SEND, TIMER_FIRE, TIMER_SET, Journal, JournalReader
from fedemu.fabric.kernel import OUTSIDE, Fabric
from fedemu.fabric.messages import message
from fedemu.fabric.network import Latency, Link, Network

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- messages -----------------------------------------------------------------------------
@message("fabtest.note")
class Note:
    """A labelled message (scripted actors): the label says what the receiver does."""

    label: str


@message("fabtest.hop")
class Hop:
    """A token travelling between actors; ``hops`` is the remaining budget."""

    origin: int
    uid: int
    hops: int


@message("fabtest.wake")
class Wake:
    """A timer an actor sets for itself before forwarding a token later."""

    uid: int
    hops: int


@message("fabtest.probe")
class Probe:
    n: int


@message("fabtest.box")
class Box:
    """A message nesting another registered message (journal encoding of nested kinds)."""

    inner: object
    note: str


# ---- actors -------------------------------------------------------------------------------
class Logger(Actor):
    """Logs every handler call into a shared list as (name, incarnation, now, kind, src, payload)."""

    def __init__(self, trace: list) -> None:
        super().__init__()
        self.trace = trace

    def log_call(self, kind: str, src: int, payload) -> None:
        self.trace.append((self.name, self.incarnation, self.now, kind, src, payload))

    def on_ConnectionBroken(self, msg, src) -> None:
        self.log_call("broken", src, (msg.src, msg.dst, msg.at_us, msg.cause))


class Scripted(Logger):
    """Reacts to ``Note(label)`` per ``script[label]``: a list of actions
    ("send", dst_index, label) | ("timer", delay_us, label) | ("stop",). ``script["start"]`` runs in
    on_start. Every handler call (and on_start) is logged with the label as payload."""

    def __init__(self, trace: list, script: dict) -> None:
        super().__init__(trace)
        self.script = script
        self.seen: list[str] = []  # volatile state: reset by a restart

    def _act(self, label: str) -> None:
        for action in self.script.get(label, ()):
            if action[0] == "send":
                self.send(action[1], Note(action[2]))
            elif action[0] == "timer":
                self.set_timer(action[1], Note(action[2]))
            elif action[0] == "stop":
                self.stop_run()
            else:  # pragma: no cover - a typo in a test script
                raise AssertionError(f"unknown action {action!r}")

    def on_start(self) -> None:
        self.log_call("start", -1, len(self.seen))
        self._act("start")

    def on_Note(self, msg, src) -> None:
        self.seen.append(msg.label)
        self.log_call("note", src, msg.label)
        self._act(msg.label)


class Forwarder(Logger):
    """Random traffic for property tests: on start, sends ``fanout`` tokens to random peers and a burst of
    ``burst`` tokens to one random peer (same link, same time: FIFO matters); on each
    token with hops left, forwards it (to one peer, or to two with probability ``branch``), or with
    probability ``timer_p`` first waits on a fabric timer of a random delay and forwards on wake.
    All choices come from ``self.rng``. ``self.count`` is volatile state (reset by restart)."""

    def __init__(self, trace: list, n: int, fanout: int, hops: int, timer_p: float = 0.0,
                 branch: float = 0.0, max_wait: int = 3000, burst: int = 0) -> None:
        super().__init__(trace)
        self.burst = burst
        self.n = n
        self.fanout = fanout
        self.hops = hops
        self.timer_p = timer_p
        self.branch = branch
        self.max_wait = max_wait
        self.count = 0

    def on_start(self) -> None:
        self.log_call("start", -1, self.count)
        for _ in range(self.fanout):
            self._emit(self.hops)
        if self.burst:
            peer = self.rng.randrange(self.n)
            for _ in range(self.burst):
                self._emit(self.hops, peer)

    def _emit(self, hops: int, dst: int | None = None) -> None:
        self.count += 1
        self.send(self.rng.randrange(self.n) if dst is None else dst, Hop(self.id, self.count, hops))

    def on_Hop(self, msg, src) -> None:
        self.log_call("hop", src, (msg.origin, msg.uid, msg.hops))
        if msg.hops <= 0:
            return
        if self.timer_p and self.rng.random() < self.timer_p:
            self.count += 1
            self.set_timer(self.rng.randrange(self.max_wait + 1), Wake(self.count, msg.hops - 1))
            return
        self._emit(msg.hops - 1)
        if self.branch and self.rng.random() < self.branch:
            self._emit(msg.hops - 1)

    def on_Wake(self, msg, src) -> None:
        self.log_call("wake", src, (msg.uid, msg.hops))
        self._emit(msg.hops)


class Sink(Logger):
    """Counts what it receives; sets a periodic timer of ``period`` us ``ticks`` times from on_start."""

    def __init__(self, trace: list, period: int = 0, ticks: int = 0) -> None:
        super().__init__(trace)
        self.period = period
        self.ticks = ticks
        self.got = 0

    def on_start(self) -> None:
        self.log_call("start", -1, self.got)
        if self.ticks:
            self.set_timer(self.period, Note("tick"))

    def on_Note(self, msg, src) -> None:
        self.log_call("note", src, msg.label)
        if msg.label == "tick":
            self.ticks -= 1
            if self.ticks:
                self.set_timer(self.period, Note("tick"))

    def on_Probe(self, msg, src) -> None:
        self.got += 1
        self.log_call("probe", src, msg.n)


class Sender(Logger):
    """Sends probe n = 1..count to ``dst`` (an index or a list of them) every ``every`` us from its start
    (all at once if every == 0); logs the probes it receives."""

    def __init__(self, trace: list, dst, count: int, every: int = 0) -> None:
        super().__init__(trace)
        self.dsts = list(dst) if isinstance(dst, (list, tuple)) else [dst]
        self.count = count
        self.every = every
        self.n = 0

    def on_start(self) -> None:
        self.log_call("start", -1, 0)
        if self.every == 0:
            for _ in range(self.count):
                self._one()
        elif self.count:
            self.set_timer(0, Note("next"))

    def _one(self) -> None:
        self.n += 1
        for dst in self.dsts:
            self.send(dst, Probe(self.n))

    def on_Note(self, msg, src) -> None:
        self._one()
        if self.n < self.count:
            self.set_timer(self.every, Note("next"))

    def on_Probe(self, msg, src) -> None:
        self.log_call("probe", src, msg.n)


# ---- running and reading ------------------------------------------------------------------
def run_fabric(seed: int, build, *, path=None, until_us=None) -> tuple[Fabric, str]:
    """Build (``build(fabric)``), run to the end and close the journal; returns (fabric, digest)."""
    journal = Journal(path)
    fabric = Fabric(seed, journal=journal)
    build(fabric)
    journal.write_header({"seed": seed, "scenario": "test", "params": {}, "actors": fabric.names})
    try:
        fabric.run_blocking(until_us)
    except BaseException:
        journal.abort()
        raise
    stats = fabric.statistics()
    digest = journal.close({"events": stats.events, "sent": stats.sent, "now_us": stats.now_us})
    return fabric, digest


def read_journal(path) -> tuple[dict, list[tuple], dict]:
    """(header, records in journal order, footer) of a journal; also checks its digest."""
    reader = JournalReader(path)
    try:
        records = [rec for _, _, rec in reader.records()]
        reader.check_digest()
        return reader.header, records, reader.footer
    finally:
        reader.close()


def normalize(records) -> list[tuple]:
    """Records as they read back from a journal (msgpack round trip: lists become tuples)."""
    packer = messages.new_packer()
    for rec in records:
        packer.pack(rec)
    return _unpack_all(packer.bytes())


def _unpack_all(data: bytes) -> list:
    unpacker = messages.new_unpacker(max(1, len(data)))
    unpacker.feed(data)
    return list(unpacker)


def by_code(records, code) -> list[tuple]:
    return [r for r in records if r[0] == code]


def per_actor(trace) -> dict:
    """A trace grouped by actor name, each actor's calls in the order it made them."""
    out = defaultdict(list)
    for entry in trace:
        out[entry[0]].append(entry[1:])
    return dict(out)


def multiset_diff(expected, got, limit: int = 8) -> str:
    e, g = Counter(expected), Counter(got)
    missing = list((e - g).elements())[:limit]
    extra = list((g - e).elements())[:limit]
    return f"missing from fabric: {missing}\nextra in fabric: {extra}"


# ---- the reference: one event at a time, in heap-key order ---------------------------------
@attrs.define
class _Stall:
    """A connection whose first undelivered message (``seq``, first due at ``first``) is being retransmitted;
    what the sender sent after it on the connection waits behind it (``held``: (seq, message))."""

    seq: int
    first: int
    tries: int = 0
    held: list = attrs.Factory(list)


class _Reference:
    """The fabric written again as plainly as it can be: one heap of events keyed as the fabric documents
    them, ``(time, rank + tie, src, seq)``, popped one at a time; handlers called directly. The network's
    ``route``, ``loss_of``, ``blocked`` and ``apply`` are reused (tested on their own); the connections are
    written again here: each pair that talked, its stall, its cut when it broke."""

    def __init__(self, seed: int, names: list[str], factories: list, network: Network, tie_order: str) -> None:
        self.seed, self.names, self.factories, self.network = seed, names, factories, network
        self.index = {name: i for i, name in enumerate(names)}
        self.net_keys = [rand.name_key(seed, f"net/{name}") for name in names]
        self.tie_keys = [ties.sender_key(seed, name, tie_order) for name in names]
        self.outside_tie = ties.sender_key(seed, "outside", tie_order)
        self.fabric = types.SimpleNamespace(stop=lambda: None, _send=self.send, _set_timer=self.set_timer)
        self.heap: list = []
        self.records: list = []
        self.now = 0
        self.actors: list = [None] * len(names)  # the live incarnation of each actor, None while down
        self.seqs = [0] * len(names)  # each actor's latest seq, kept across its incarnations
        self.epochs = [0] * len(names)  # its seq when it last restarted: its timers up to it are stale
        self.incarnations = [0] * len(names)
        self.sends: list = [[] for _ in names]  # per actor, (time, seq) of each of its sends
        self.outside_seq = 0
        self.talked: dict = {}  # (src, dst) -> the time of its latest send
        self.broken_at: dict = {}  # (src, dst) -> the time its connection last broke
        self.cut: dict = {}  # (src, dst) -> the sender's last seq sent before its connection broke
        self.stalls: dict = {}  # (src, dst) -> _Stall
        self.starting: list = []  # actors to start once every fault due now is applied

    # -- what actors call
    def send(self, actor, dst: int, msg) -> None:
        src, seq, now = actor.id, actor._seq, actor._now
        self.seqs[src] = seq
        at = self.network.route(src, dst, seq, now, self.net_keys[src])
        self.records.append((SEND, now, src, seq, dst, at, msg._fedemu_tag, msg._fedemu_fields(msg)))
        self.talked[(src, dst)] = now
        self.sends[src].append((now, seq))
        self.push(at, RANK_MESSAGE + ties.tie(self.tie_keys[src], at), src, seq, dst, msg)

    def set_timer(self, actor, at: int, msg) -> None:  # never merged into a mailbox: no windows here
        seq = self.seqs[actor.id] = actor._seq
        self.records.append((TIMER_SET, actor._now, actor.id, seq, at, msg._fedemu_tag, msg._fedemu_fields(msg)))
        self.push(at, RANK_TIMER, actor.id, seq, actor.id, msg)

    # -- the heap and the actors
    def push(self, at: int, rank: int, src: int, seq: int, dst: int, payload) -> None:
        heappush(self.heap, (at, rank, src, seq, dst, payload))

    def outside_send(self, now: int, dst: int, msg, at: int) -> None:
        self.outside_seq += 1
        seq = self.outside_seq
        self.records.append((SEND, now, OUTSIDE, seq, dst, at, msg._fedemu_tag, msg._fedemu_fields(msg)))
        self.push(at, RANK_MESSAGE + ties.tie(self.outside_tie, at), OUTSIDE, seq, dst, msg)

    def fresh(self, i: int) -> None:
        """A new incarnation of actor ``i``, to start once the faults due now are applied."""
        actor = self.actors[i] = self.factories[i]()
        actor.fabric = self.fabric
        actor.id, actor.name, actor.incarnation = i, self.names[i], self.incarnations[i]
        actor.rng = rand.Stream(self.seed, f"actor/{self.names[i]}#{self.incarnations[i]}")
        actor._now, actor._seq = self.now, self.seqs[i]
        self.starting.append(actor)

    def start_fresh(self) -> None:
        for actor in self.starting:
            if self.actors[actor.id] is actor:  # not crashed again before it started
                actor.on_start()
        self.starting.clear()

    def handle(self, dst: int, src: int, msg) -> None:
        actor = self.actors[dst]
        actor._now = self.now
        getattr(actor, "on_" + type(msg).__name__)(msg, src)

    # -- connections
    def broke(self, pair: tuple, cause: str) -> None:
        """The connection ``pair`` broke now: what its sender sent before now and is not delivered is lost,
        and each live end is told."""
        src, dst = pair
        self.cut[pair] = max((seq for t, seq in self.sends[src] if t < self.now), default=0)
        stall = self.stalls.pop(pair, None)
        for seq, _ in sorted(stall.held if stall else []):
            self.records.append((DROP, self.now, src, seq, dst, "broken"))
        self.broken_at[pair] = self.now
        for end in pair:
            if self.actors[end] is not None:
                self.outside_send(self.now, end, ConnectionBroken(src, dst, self.now, cause),
                                  self.now + self.network.window)

    def gets_through(self, src: int, seq: int, dst: int, tries: int) -> bool:
        loss = self.network.loss_of(src, dst)
        lost = loss > 0 and rand.unit(self.net_keys[src], 4 * seq + 2 + (tries << 40)) < loss
        return not lost and not self.network.blocked(src, dst)

    def deliver(self, src: int, seq: int, dst: int, msg, tries: int) -> None:
        self.records.append((DELIVER, self.now, src, seq, dst, tries))
        self.handle(dst, src, msg)

    def retransmit(self, src: int, seq: int, dst: int, msg) -> None:
        """Not through: try again after the backoff, or break the connection once it has waited too long."""
        stall = self.stalls.setdefault((src, dst), _Stall(seq, self.now))
        deadline = stall.first + self.network.timeout_us
        if self.now >= deadline:
            self.records.append((DROP, self.now, src, seq, dst, "broken"))
            self.broke((src, dst), "timeout")
            return
        wait = min(self.network.rto_us * 2 ** stall.tries, 120_000_000)
        stall.tries += 1
        self.push(max(min(self.now + wait, deadline), self.now + self.network.window), RANK_RETRY, src, seq, dst, msg)

    # -- the events
    def arrive(self, src: int, seq: int, dst: int, msg) -> None:
        """A message is due at ``dst`` (an actor's, or the fabric's own notice from OUTSIDE)."""
        pair = (src, dst)
        if src == OUTSIDE:
            self.notice(seq, dst, msg)
        elif seq <= self.cut.get(pair, 0):
            self.records.append((DROP, self.now, src, seq, dst, "broken"))
        elif self.actors[dst] is None:  # refused: this message only; its sender is told
            self.records.append((DROP, self.now, src, seq, dst, "refused"))
            if self.actors[src] is not None:
                self.outside_send(self.now, src, ConnectionBroken(src, dst, self.now, "refused"),
                                  self.now + self.network.window)
        elif pair in self.stalls and self.stalls[pair].seq != seq:
            self.stalls[pair].held.append((seq, msg))  # FIFO: behind the one being retransmitted
        else:
            self.transmit(src, seq, dst, msg)

    def notice(self, seq: int, dst: int, msg) -> None:
        if self.actors[dst] is None:
            self.records.append((DROP, self.now, OUTSIDE, seq, dst, "dead"))
        else:
            self.deliver(OUTSIDE, seq, dst, msg, 0)

    def transmit(self, src: int, seq: int, dst: int, msg) -> None:
        """The first message waiting on a live connection to a live actor: delivered, with what waited
        behind it, or retransmitted."""
        stall = self.stalls.get((src, dst))
        tries = stall.tries if stall else 0
        if not self.gets_through(src, seq, dst, tries):
            self.retransmit(src, seq, dst, msg)
            return
        self.deliver(src, seq, dst, msg, tries)
        if stall is not None:
            del self.stalls[(src, dst)]
            for held_seq, held_msg in sorted(stall.held, key=lambda h: h[0]):
                self.deliver(src, held_seq, dst, held_msg, 0)

    def timer(self, seq: int, dst: int, msg) -> None:
        if self.actors[dst] is None or seq <= self.epochs[dst]:
            self.records.append((DROP, self.now, dst, seq, dst, "stale-timer"))
        else:
            self.records.append((TIMER_FIRE, self.now, dst, seq))
            self.handle(dst, dst, msg)

    def fault(self, k: int, f) -> None:
        self.records.append((FAULT, self.now, k, f.kind, f.target, f.value))
        if f.kind not in ("crash", "restart"):
            self.network.apply(f.resolve(self.index))  # the network's own faults (tested on their own)
            return
        i = self.index[f.target[0]]
        if f.kind == "crash" and self.actors[i] is not None:
            self.actors[i] = None
            for pair in sorted(p for p, t in self.talked.items() if i in p and t >= self.broken_at.get(p, -1)):
                self.broke(pair, "crash")  # every pair that talked since it last broke
        elif f.kind == "restart" and self.actors[i] is None:
            self.incarnations[i] += 1
            self.epochs[i] = self.seqs[i]
            self.fresh(i)

    def run(self, faults, injects) -> list[tuple]:
        for dst, msg, at in injects:
            self.outside_send(0, dst, msg, at)
        for k, fault in enumerate(make_plan(faults)):
            self.push(fault.at_us, RANK_FAULT, OUTSIDE, k, OUTSIDE, fault)
        for i in range(len(self.names)):
            self.fresh(i)
        while self.starting or self.heap:
            # faults due at a time come before everything else then, the start of the actors they restart
            # (and the first start, at 0) included: an actor restarted and crashed again at t never runs
            if self.starting and not self.fault_due():
                self.start_fresh()
            elif self.heap:
                self.step(heappop(self.heap))
        return self.records

    def fault_due(self) -> bool:
        return bool(self.heap) and self.heap[0][1] == RANK_FAULT and self.heap[0][0] <= self.now

    def step(self, event: tuple) -> None:
        self.now, rank, src, seq, dst, payload = event
        if rank == RANK_FAULT:
            self.fault(seq, payload)
        elif rank == RANK_TIMER:
            self.timer(seq, dst, payload)
        else:
            self.arrive(src, seq, dst, payload)


def reference_run(seed: int, names: list[str], factories: list, network: Network, faults=(),
                  injects=(), tie_order: str = "seeded") -> list[tuple]:
    """Run the same actors tick by tick, one heap event at a time, without trio or windows (``_Reference``;
    ``tie_order`` as the fabric's ``ties``). Returns the records it would journal (in its own order;
    compare as multisets)."""
    return _Reference(seed, names, factories, network, tie_order).run(faults, injects)


# ---- invariants read from a journal --------------------------------------------------------
def check_invariants(names: list[str], records: list[tuple], link_of) -> dict:
    """Check the fabric's invariants on a journal's records (in journal order).

    ``link_of(src, dst)`` gives the configured Link of a directed link (before faults). Checks: sends come
    due no earlier than send time + minimum latency (times the slow factor in force at the send), never
    later than the maximum unless FIFO held them back; a delivery happens at or after its due time (later
    only when its connection retransmitted it, or it waited behind one that was); nothing is delivered
    to (and no timer fires at) a dead actor, nor across an active partition; per-link FIFO where
    configured; connections are reliable while up: a message is lost only with its connection, and then
    exactly the messages sent on it and not delivered when it broke (a crash of an end, or the fabric's
    notice of a timeout or a refusal) are dropped as 'broken', each no earlier than its due time; a
    'refused' drop is a message due at a dead actor; every send ends in exactly one delivery or one
    drop, every timer in one fire or one stale-timer drop; each notice is sent at the time it names.
    Returns counts by outcome for the caller's own assertions (``fifo_ordered``: deliveries on a FIFO
    link checked against an earlier one; ``fifo_held``: sends FIFO held past the link's maximum;
    ``delayed``: deliveries after their due time; ``notices``; ``broken``)."""
    index = {name: i for i, name in enumerate(names)}
    alive = [True] * len(names)
    max_seq = [0] * len(names)
    epoch = [0] * len(names)
    slow: dict = {}
    partitions: list = []
    sends: dict = {}
    timers: dict = {}
    outcomes: Counter = Counter()
    timer_outcomes: Counter = Counter()
    last_deliver_at: dict = {}  # (src, dst) -> latest deliver_at of the sends (FIFO bound)
    delivered_seq: dict = {}  # (src, dst) -> seq of the previous delivery (FIFO order)
    pending: dict = defaultdict(set)  # (src, dst) -> seqs sent on it, not yet delivered or dropped
    doomed: set = set()  # (src, seq) of the messages a break lost
    unexplained: dict = defaultdict(set)  # (src, dst) -> seqs dropped as 'broken' before their break's notice
    counts: Counter = Counter()
    notice_tag = ConnectionBroken._fedemu_tag

    def blocked(s, d):
        return any((s in a and d in b) or (s in b and d in a) for a, b in partitions)

    def broke(pair):
        doomed.update((pair[0], seq) for seq in pending.pop(pair, ()))

    for i, rec in enumerate(records):
        code, t = rec[0], rec[1]
        where = f"record {i} {rec}"
        if code == SEND:
            _, _, src, seq, dst, at, tag, fields = rec
            assert (src, seq) not in sends, f"{where}: (src, seq) sent twice"
            sends[(src, seq)] = rec
            if src == OUTSIDE:
                if tag == notice_tag:
                    b_src, b_dst, b_at, _cause = fields
                    assert b_at == t and at > t, f"{where}: a notice is sent when its connection breaks, due later"
                    assert dst in (b_src, b_dst) and alive[dst], f"{where}: a notice to {names[dst]}, not a live end"
                    if _cause != "refused":  # a refusal loses the one message, dropped as 'refused'
                        broke((b_src, b_dst))
                        unexplained.pop((b_src, b_dst), None)
                    counts["notices"] += 1
                continue
            assert seq > max_seq[src], f"{where}: sender seq not increasing"
            max_seq[src] = seq
            pending[(src, dst)].add(seq)
            link = link_of(src, dst)
            factor = slow.get((src, dst), 1.0)
            lo, hi = int(link.latency.lo * factor), int(link.latency.hi * factor)
            assert at - t >= lo, f"{where}: latency {at - t} below the minimum {lo}"
            if link.fifo:
                assert at - t <= hi or at == last_deliver_at.get((src, dst)), \
                    f"{where}: latency {at - t} above the maximum {hi} and not held back by FIFO"
                if at - t > hi:
                    counts["fifo_held"] += 1
            else:
                assert at - t <= hi, f"{where}: latency {at - t} above the maximum {hi}"
            pair = (src, dst)
            last_deliver_at[pair] = max(at, last_deliver_at.get(pair, 0)) if link.fifo else at
        elif code == TIMER_SET:
            _, _, owner, seq, at, _tag, _fields = rec
            assert seq > max_seq[owner], f"{where}: timer seq not increasing"
            max_seq[owner] = seq
            assert at >= t, f"{where}: timer fires before it was set"
            timers[(owner, seq)] = rec
        elif code == DELIVER:
            _, _, src, seq, dst, tries = rec
            send = sends.get((src, seq))
            assert send is not None, f"{where}: delivery of a message never sent"
            assert send[4] == dst, f"{where}: delivered to {dst}, sent to {send[4]}"
            assert t >= send[5], f"{where}: delivered at {t}, before its due time {send[5]}"
            assert tries == 0 or t > send[5], f"{where}: retransmitted {tries} times, yet delivered when due"
            assert alive[dst], f"{where}: delivered to dead actor {names[dst]}"
            assert src == OUTSIDE or not blocked(src, dst), f"{where}: delivered across a partition"
            assert (src, seq) not in doomed, f"{where}: delivered after its connection broke"
            outcomes[(src, seq)] += 1
            if src != OUTSIDE:
                pending[(src, dst)].discard(seq)
                if link_of(src, dst).fifo:
                    prev = delivered_seq.get((src, dst), 0)
                    assert seq > prev, f"{where}: FIFO broken on {names[src]}->{names[dst]}: #{seq} after #{prev}"
                    delivered_seq[(src, dst)] = seq
                    counts["fifo_ordered"] += prev > 0  # a delivery that had to follow an earlier one
            counts["delayed"] += t > send[5]
            counts["deliver"] += 1
        elif code == DROP:
            _, _, src, seq, dst, cause = rec
            counts[cause] += 1
            if cause == "stale-timer":
                timer = timers.get((src, seq))
                assert timer is not None and src == dst, f"{where}: stale-timer drop of no timer"
                assert t == timer[4], f"{where}: timer dropped at {t}, due at {timer[4]}"
                assert not alive[dst] or seq <= epoch[dst], f"{where}: live timer of a live actor dropped"
                timer_outcomes[(src, seq)] += 1
                continue
            send = sends.get((src, seq))
            assert send is not None, f"{where}: drop of a message never sent"
            assert send[4] == dst, f"{where}: dropped for {dst}, sent to {send[4]}"
            assert t >= send[5], f"{where}: dropped at {t}, before its due time {send[5]}"
            outcomes[(src, seq)] += 1
            if src != OUTSIDE:
                pending[(src, dst)].discard(seq)
            if cause == "broken":
                if (src, seq) not in doomed:  # lost as its connection times out: the notices follow
                    unexplained[(src, dst)].add(seq)
                    doomed.add((src, seq))
            elif cause == "refused":
                assert src != OUTSIDE and t == send[5], f"{where}: a refusal is of a message when it is due"
                assert not alive[dst], f"{where}: 'refused' drop for live actor {names[dst]}"
            elif cause == "dead":
                assert src == OUTSIDE, f"{where}: only an injected message is dropped as 'dead'"
                assert t == send[5], f"{where}: dropped at {t}, due at {send[5]}"
                assert not alive[dst], f"{where}: 'dead' drop for live actor {names[dst]}"
            else:
                raise AssertionError(f"{where}: unknown drop cause {cause!r}")
        elif code == TIMER_FIRE:
            _, _, owner, seq = rec
            timer = timers.get((owner, seq))
            assert timer is not None, f"{where}: fire of a timer never set"
            assert t == timer[4], f"{where}: timer fired at {t}, due at {timer[4]}"
            assert alive[owner], f"{where}: timer fired at dead actor {names[owner]}"
            assert seq > epoch[owner], f"{where}: a timer of an earlier incarnation fired"
            timer_outcomes[(owner, seq)] += 1
            counts["fire"] += 1
        elif code == FAULT:
            _, _, _k, kind, target, value = rec
            counts["fault:" + kind] += 1
            if kind == "crash":
                x = index[target[0]]
                if alive[x]:
                    for pair in [p for p in pending if x in p]:
                        broke(pair)
                alive[x] = False
            elif kind == "restart":
                i_ = index[target[0]]
                if not alive[i_]:
                    alive[i_] = True
                    epoch[i_] = max_seq[i_]
                    counts["restarts"] += 1
            elif kind == "partition":
                partitions.append(({index[x] for x in target[0]}, {index[x] for x in target[1]}))
            elif kind == "heal":
                partitions.clear()
            elif kind == "slow":
                a, b = index[target[0]], index[target[1]]
                slow[(a, b)] = slow[(b, a)] = value
            elif kind == "restore":
                if tuple(target) == ("*",):
                    slow.clear()
                else:
                    a, b = index[target[0]], index[target[1]]
                    slow.pop((a, b), None)
                    slow.pop((b, a), None)
        else:
            raise AssertionError(f"{where}: unknown record code")
    for key in sends:
        assert outcomes[key] == 1, f"send {key} ({sends[key]}) ended in {outcomes[key]} deliveries/drops, not 1"
    for key in doomed:
        assert key in sends and outcomes[key] == 1, f"send {key} lost to a break never ended"
    for key in timers:
        assert timer_outcomes[key] == 1, f"timer {key} ended in {timer_outcomes[key]} fires/drops, not 1"
    assert not any(unexplained.values()), f"lost with no break of their connection: {dict(unexplained)}"
    assert counts["broken"] == len(doomed), f"{counts['broken']} 'broken' drops, {len(doomed)} messages lost to breaks"
    counts["sends"] = len(sends)
    counts["timers"] = len(timers)
    return counts


def static_links(network: Network):
    """``link_of`` for check_invariants from a network's configured (not live) links."""
    default, links = network.default, dict(network.links)
    return lambda s, d: links.get((s, d), default)


__all__ = [
    "Box", "Sink", "Forwarder", "Hop", "Latency", "Link", "Logger", "Network", "Note", "Probe",
    "Scripted", "Sender", "Wake", "by_code", "check_invariants", "multiset_diff", "normalize", "per_actor",
    "read_journal", "reference_run", "run_fabric", "static_links",
]


def capped_fedemu(argv, limit_mb: int = 700, **kwargs):
    """``python -m fedemu ARGV`` in a child whose address space is capped at ``limit_mb``: a reader that
    allocates what a file claims, or reads a huge file whole, fails there with a MemoryError."""
    import resource
    import subprocess
    import sys

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    return subprocess.run([sys.executable, "-m", "fedemu", *map(str, argv)], capture_output=True, text=True,
                          preexec_fn=cap, timeout=300, **kwargs)


def ping_pong_scenario(tag: str, *, on_ping: str = "", on_finish: str = "") -> str:
    """The text of a user's scenario file: actors ``a`` and ``b``, ``a`` sends ``b`` a ``Ping(1)`` and each
    answers with the next ``k`` until 5. ``on_ping`` and ``on_finish`` are lines (``msg`` in scope) added to
    the handler and to the run's ``finish``."""
    return textwrap.dedent(f'''
        import sys
        from fedemu.fabric.actor import Actor
        from fedemu.fabric.messages import message

        PARAMS = {{}}


        @message("{tag}")
        class Ping:
            k: int


        class A(Actor):
            def on_start(self):
                if self.id == 0:
                    self.send(1, Ping(1))

            def on_Ping(self, msg, src):
                {on_ping or "pass"}
                if msg.k < 5:
                    self.send(src, Ping(msg.k + 1))


        class Run:
            def finish(self, fabric, info):
                {on_finish or "pass"}
                return info


        def build(fabric, params):
            for name in ("a", "b"):
                fabric.add(name, A)
            return Run()
    ''')
