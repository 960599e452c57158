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
def reference_run(seed: int, names: list[str], factories: list, network: Network, faults=(),
                  injects=(), tie_order: str = "seeded") -> list[tuple]:
    """Run the same actors tick by tick, one heap event at a time, without trio or windows.

    Event keys are the fabric's documented ``(time, rank + tie, src, seq, copy)`` (``tie_order`` as the
    fabric's ``ties``); handlers are called directly. The network's ``route``, ``loss_of`` and ``apply``
    are reused (the thing under test here is the kernel); the connections (``fabric.connections``) are
    written again here, plainly, tracking every pair that talks. Returns the records it would journal
    (in its own order; compare as multisets)."""
    n = len(names)
    index = {name: i for i, name in enumerate(names)}
    heap: list = []
    records: list = []
    actors: list = [None] * n
    seqs = [0] * n
    epochs = [0] * n
    incs = [0] * n
    keys = [rand.name_key(seed, f"net/{name}") for name in names]
    tie_keys = [ties.sender_key(seed, name, tie_order) for name in names]
    outside_tie = ties.sender_key(seed, "outside", tie_order)
    def send(actor, dst, msg) -> None:
        seq, now = actor._seq, actor._now
        at = network.route(actor.id, dst, seq, now, keys[actor.id])
        records.append((SEND, now, actor.id, seq, dst, at, msg._fedemu_tag, msg._fedemu_fields(msg)))
        talked[(actor.id, dst)] = now
        sent_at[actor.id].append((now, seq))
        heappush(heap, (at, RANK_MESSAGE + ties.tie(tie_keys[actor.id], at), actor.id, seq, 0, dst, msg))

    def set_timer(actor, at, msg) -> None:  # never merged into a mailbox: no windows here
        seq = actor._seq
        records.append((TIMER_SET, actor._now, actor.id, seq, at, msg._fedemu_tag, msg._fedemu_fields(msg)))
        heappush(heap, (at, RANK_TIMER, actor.id, seq, 0, actor.id, msg))

    fake_fabric = types.SimpleNamespace(stop=lambda: None, _send=send, _set_timer=set_timer)

    # connections, written plainly: a stalled pair's waiting message (seq, first due, retransmissions so
    # far) and what waits behind it; each broken pair's cut (its sender's last seq); the pairs that talked
    stalls: dict = {}
    cut: dict = {}
    talked: dict = {}  # (src, dst) -> the time of its latest send
    broken_at: dict = {}  # (src, dst) -> the time its connection last broke
    outside = [0]

    def outside_send(now: int, dst: int, msg, at: int) -> None:
        outside[0] += 1
        records.append((SEND, now, OUTSIDE, outside[0], dst, at, msg._fedemu_tag, msg._fedemu_fields(msg)))
        heappush(heap, (at, RANK_MESSAGE + ties.tie(outside_tie, at), OUTSIDE, outside[0], 0, dst, msg))

    sent_at: list = [[] for _ in range(n)]  # per actor, (time, seq) of its sends

    def broke(pair, at: int, cause: str) -> None:
        src, dst = pair
        cut[pair] = max([seq for t, seq in sent_at[src] if t < at], default=0)  # what it sent before the break
        stall = stalls.pop(pair, None)
        for held_seq, _ in sorted(stall["held"] if stall else []):
            records.append((DROP, at, src, held_seq, dst, "broken"))
        broken_at[pair] = at
        for end in pair:
            if actors[end] is not None:
                outside_send(at, end, ConnectionBroken(src, dst, at, cause), at + network.window)

    def arrive(at: int, rank: int, src: int, seq: int, dst: int, msg) -> None:
        actor = actors[dst]
        if src == OUTSIDE:
            if actor is None:
                records.append((DROP, at, src, seq, dst, "dead"))
            else:
                records.append((DELIVER, at, src, seq, dst, 0))
                handle(actor, at, src, msg)
            return
        pair = (src, dst)
        if seq <= cut.get(pair, 0):
            records.append((DROP, at, src, seq, dst, "broken"))
            return
        if actor is None:  # refused: this message only; its sender is told
            records.append((DROP, at, src, seq, dst, "refused"))
            if actors[src] is not None:
                outside_send(at, src, ConnectionBroken(src, dst, at, "refused"), at + network.window)
            return
        stall = stalls.get(pair)
        if stall is not None and stall["seq"] != seq:
            stall["held"].append((seq, msg))
            return
        tries = stall["tries"] if stall else 0
        loss = network.loss_of(src, dst)
        lost = loss > 0 and rand.unit(keys[src], 4 * seq + 2 + (tries << 40)) < loss
        if not network.blocked(src, dst) and not lost:
            records.append((DELIVER, at, src, seq, dst, tries))
            handle(actor, at, src, msg)
            if stall is not None:
                del stalls[pair]
                for held_seq, held_msg in sorted(stall["held"], key=lambda h: h[0]):
                    records.append((DELIVER, at, src, held_seq, dst, 0))
                    if actors[dst] is not None:
                        handle(actors[dst], at, src, held_msg)
            return
        if stall is None:
            stall = stalls[pair] = {"seq": seq, "first": at, "tries": 0, "held": []}
        deadline = stall["first"] + network.timeout_us
        if at >= deadline:
            records.append((DROP, at, src, seq, dst, "broken"))
            broke(pair, at, "timeout")
            return
        nxt = max(min(at + min(network.rto_us * 2 ** tries, 120_000_000), deadline), at + network.window)
        stall["tries"] = tries + 1
        heappush(heap, (nxt, RANK_RETRY, src, seq, 0, dst, msg))

    for k, (dst, msg, at) in enumerate(injects, start=1):
        outside_send(0, dst, msg, at)
    for k, fault in enumerate(make_plan(faults)):
        heappush(heap, (fault.at_us, RANK_FAULT, OUTSIDE, k, 0, OUTSIDE, fault))

    def flush(actor) -> None:
        seqs[actor.id] = actor._seq

    def spawn(i: int, now: int) -> None:
        actor = actors[i] = _fresh(i, now)
        actor.on_start()
        flush(actor)

    def _fresh(i: int, now: int):
        actor = factories[i]()
        actor.fabric = fake_fabric
        actor.id, actor.name, actor.incarnation = i, names[i], incs[i]
        actor.rng = rand.Stream(seed, f"actor/{names[i]}#{incs[i]}")
        actor._now, actor._seq = now, seqs[i]
        return actor

    def handle(actor, at: int, src: int, msg) -> None:
        actor._now = at
        getattr(actor, "on_" + type(msg).__name__)(msg, src)
        flush(actor)

    def apply(at: int, k: int, f, starting: bool) -> None:
        records.append((FAULT, at, k, f.kind, f.target, f.value))
        if f.kind in ("crash", "restart"):
            i = index[f.target[0]]
            if f.kind == "crash":
                if starting:
                    dead_at_start.add(i)
                if actors[i] is not None:
                    actors[i] = None
                    for pair in sorted(p for p, t in talked.items() if i in p and t >= broken_at.get(p, -1)):
                        broke(pair, at, "crash")
                actors[i] = None
            elif starting and i in dead_at_start:  # restarted before it ever started
                dead_at_start.discard(i)
                incs[i] += 1
            elif not starting and actors[i] is None:
                incs[i] += 1
                epochs[i] = seqs[i]
                actors[i] = _fresh(i, at)  # it starts once every fault due now is applied
                pending_starts.append(actors[i])
        else:  # the network's own faults: Network.apply (tested on its own against a model)
            network.apply(f.resolve(index))

    # Faults due at a time come before everything else at that time, including the start of the actors they
    # restart (and the first start, at 0): an actor restarted and crashed again at t never runs.
    pending_starts: list = []
    dead_at_start: set = set()
    while heap and heap[0][1] == RANK_FAULT and heap[0][0] <= 0:
        at, _, _, k, _, _, f = heappop(heap)
        apply(at, k, f, True)
    for i in range(n):
        if i not in dead_at_start:
            spawn(i, 0)
    while heap:
        at, rank, src, seq, copy, dst, payload = heappop(heap)
        if rank == RANK_FAULT:
            apply(at, seq, payload, False)
            if not (heap and heap[0][1] == RANK_FAULT and heap[0][0] == at):
                for actor in pending_starts:
                    if actors[actor.id] is actor:
                        actor.on_start()
                        flush(actor)
                pending_starts.clear()
        elif rank == RANK_TIMER:
            actor = actors[dst]
            if actor is None or seq <= epochs[dst]:
                records.append((DROP, at, src, seq, dst, "stale-timer"))
                continue
            records.append((TIMER_FIRE, at, dst, seq))
            handle(actor, at, src, payload)
        else:
            arrive(at, rank, src, seq, dst, payload)
    return records


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
