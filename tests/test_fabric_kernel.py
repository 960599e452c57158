"""The kernel: virtual time, windows, timers, handler time, run control, errors and statistics."""

import gc
import weakref
from collections import Counter

import pytest
import trio

from fedemu.fabric.actor import Actor, ActorStatistics
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.journal import DELIVER, DROP, SEND, TIMER_FIRE, TIMER_SET, Journal
from fedemu.fabric.kernel import Fabric, FabricStatistics, gc_paused
from fedemu.fabric.network import Latency, Link, Network

from fabric_helpers import (Note, Probe, Scripted, Sender, Sink, by_code, multiset_diff, normalize, per_actor,
                            read_journal, reference_run, run_fabric)

OUT = -1


# ---- windows: handler time and timer order, computed by hand -----------------------------------
# Network: constant 1000 us, so the lookahead (window) is 1000 us. Actor a = 0, b = 1.
A_SCRIPT = {
    "start": [("timer", 0, "a-zero"), ("timer", 100, "a-go")],
    "a-go": [("send", 1, "x")],
}
B_SCRIPT = {
    "m1": [("timer", 300, "t1"), ("timer", 400, "t2"), ("send", 0, "p")],
    "t1": [("timer", 50, "t3"), ("timer", 1000, "t4")],
    "t2": [("timer", 0, "t5")],
    "m3": [("timer", 200, "t6"), ("timer", 199, "t7")],
}
INJECTS = [(1, "m1", 100), (1, "m2", 500), (1, "m3", 900), (1, "m4", 1200)]

# (incarnation, now, kind, src, payload) per actor, in handling order, worked out by hand:
# window 1 is [100, 1100): b handles m1@100, whose timers t1@400 and t2@500 fall inside it; t1 adds t3@450
# (before m2@500) and t4@1400 (after the window); at 500 the message m2 (rank 1) precedes the timer t2
# (rank 2), and t2's zero-delay t5 comes right after t2; m3@900 sets t7@1099 (inside) and t6@1100 (== the
# window's end, so the next window). Window 2 is [1100, 2100): at 1100 a's message x precedes b's timer t6.
EXPECTED_A = [
    (0, 0, "start", OUT, 0),
    (0, 0, "note", 0, "a-zero"),
    (0, 100, "note", 0, "a-go"),
    (0, 1100, "note", 1, "p"),
]
EXPECTED_B = [
    (0, 0, "start", OUT, 0),
    (0, 100, "note", OUT, "m1"),
    (0, 400, "note", 1, "t1"),
    (0, 450, "note", 1, "t3"),
    (0, 500, "note", OUT, "m2"),
    (0, 500, "note", 1, "t2"),
    (0, 500, "note", 1, "t5"),
    (0, 900, "note", OUT, "m3"),
    (0, 1099, "note", 1, "t7"),
    (0, 1100, "note", 0, "x"),
    (0, 1100, "note", 1, "t6"),
    (0, 1200, "note", OUT, "m4"),
    (0, 1400, "note", 1, "t4"),
]


def _windowed(trace, seed=5, path=None):
    def build(f):
        f.network = Network(Link(Latency.const(1000)))
        f.add("a", lambda: Scripted(trace, A_SCRIPT))
        f.add("b", lambda: Scripted(trace, B_SCRIPT))
        for dst, label, at in INJECTS:
            f.inject(dst, Note(label), at)

    return run_fabric(seed, build, path=path)


def test_timers_inside_a_window_are_handled_in_key_order(tmp_path):
    trace = []
    fabric, _ = _windowed(trace, path=tmp_path / "j")
    got = per_actor(trace)
    assert got["a"] == EXPECTED_A
    assert got["b"] == EXPECTED_B
    assert fabric.windows == 2  # the whole run is two windows: the timers really were merged in-window
    _, records, _ = read_journal(tmp_path / "j")
    fires = sorted((r[1], r[2]) for r in by_code(records, TIMER_FIRE))
    assert fires == [(0, 0), (100, 0), (400, 1), (450, 1), (500, 1), (500, 1), (1099, 1), (1100, 1), (1400, 1)]
    sets = {(r[1], r[4]) for r in by_code(records, TIMER_SET)}
    assert (900, 1100) in sets and (900, 1099) in sets and (400, 1400) in sets


def test_windowed_run_equals_the_tick_by_tick_reference(tmp_path):
    trace, ref_trace = [], []
    _windowed(trace, path=tmp_path / "j")
    _, records, _ = read_journal(tmp_path / "j")
    ref = reference_run(5, ["a", "b"], [lambda: Scripted(ref_trace, A_SCRIPT), lambda: Scripted(ref_trace, B_SCRIPT)],
                        Network(Link(Latency.const(1000))),
                        injects=[(dst, Note(label), at) for dst, label, at in INJECTS])
    assert Counter(normalize(ref)) == Counter(records), multiset_diff(normalize(ref), records)
    assert per_actor(ref_trace) == per_actor(trace)


def test_handlers_see_each_messages_own_delivery_time(tmp_path):
    """Uniform latency [1000, 1600]: one window holds deliveries at many different times; each handler
    call must see self.now == that message's DELIVER time, in (time, src, seq) order."""
    trace = []

    def build(f):
        f.network = Network(Link(Latency.uniform(1000, 1600), fifo=False))
        f.add("sink", lambda: Sink(trace))
        for i in range(4):
            f.add(f"s{i}", lambda i=i: Sender(trace, 0, 40, every=7 * (i + 1)))

    fabric, _ = run_fabric(11, build, path=tmp_path / "j")
    _, records, _ = read_journal(tmp_path / "j")
    sends = {(r[2], r[3]): r for r in by_code(records, SEND)}
    expected = [(0, r[1], "probe", r[2], sends[(r[2], r[3])][7][0]) for r in by_code(records, DELIVER) if r[4] == 0]
    got = per_actor(trace)["sink"][1:]
    assert len(got) == 160
    assert got == expected
    assert [g[1] for g in got] == sorted(g[1] for g in got)
    distinct = len({g[1] for g in got})
    assert fabric.windows < distinct / 4, "expected several delivery times per window"


def test_a_fault_inside_a_window_splits_it(tmp_path):
    """Const 1000 us: deliveries to b at 1000, 1040, ... A crash of b at 1050 falls inside the window
    [1000, 2000): what is due before 1050 is handled, what is due at or after it is dropped as 'dead'."""
    trace = []

    def build(f):
        f.network = Network(Link(Latency.const(1000)))
        f.add("a", lambda: Sender(trace, 1, 4, every=20))
        f.add("b", lambda: Sink(trace))
        f.add_faults([(1050, "crash", "b")])

    run_fabric(1, build, path=tmp_path / "j")
    _, records, _ = read_journal(tmp_path / "j")
    to_b = [(r[1], r[0], r[5]) for r in records if r[0] in (DELIVER, DROP) and r[4] == 1]
    assert to_b == [(1000, DELIVER, 0), (1020, DELIVER, 0), (1040, DELIVER, 0), (1060, DROP, "broken")]
    assert [(c[1], c[2], c[4]) for c in per_actor(trace)["b"]] == [
        (0, "start", 0), (1000, "probe", 1), (1020, "probe", 2), (1040, "probe", 3)]


# ---- virtual time ----------------------------------------------------------------------------
def test_virtual_time_jumps_from_event_to_event():
    """A year of hourly ticks costs one event and one window per tick, however long the gaps: time jumps
    to the next event (work is counted in events, never in simulated microseconds or wall time)."""
    hour = 3_600_000_000
    ticks = 24 * 365
    trace = []

    def build(f):
        f.add("clock", lambda: Sink(trace, period=hour, ticks=ticks))

    fabric, _ = run_fabric(0, build)
    assert fabric.now == ticks * hour
    assert [c[1] for c in per_actor(trace)["clock"]] == [hour * k for k in range(ticks + 1)]
    assert fabric.timers == ticks
    assert fabric.events == ticks and fabric.windows == ticks


def test_run_until_stops_at_the_limit_and_keeps_later_events():
    trace = []

    def build(f):
        f.add("clock", lambda: Sink(trace, period=1000, ticks=10))

    fabric, _ = run_fabric(0, build, until_us=4500)
    assert [c[1] for c in per_actor(trace)["clock"]] == [0, 1000, 2000, 3000, 4000]
    assert fabric.now == 4500
    assert fabric.statistics().events == 4


def test_run_until_includes_events_at_the_limit():
    trace = []
    fabric, _ = run_fabric(0, lambda f: f.add("clock", lambda: Sink(trace, period=1000, ticks=10)), until_us=4000)
    assert [c[1] for c in per_actor(trace)["clock"]] == [0, 1000, 2000, 3000, 4000]
    assert fabric.now == 4000


def test_stop_run_ends_after_the_current_window(tmp_path):
    """b stops the run while handling m at 100; the window [100, 1100) still completes (t@600 fires),
    but nothing at or after 1100 happens (the timer at 5000 and the message due at 1100)."""
    trace = []

    def build(f):
        f.network = Network(Link(Latency.const(1000)))
        f.add("a", lambda: Scripted(trace, {}))
        f.add("b", lambda: Scripted(trace, {"start": [("timer", 5000, "late")],
                                           "m": [("stop",), ("timer", 500, "t"), ("send", 0, "x")]}))
        f.inject(1, Note("m"), 100)

    fabric, _ = run_fabric(0, build, path=tmp_path / "j")
    assert [(c[1], c[4]) for c in per_actor(trace)["b"]] == [(0, 0), (100, "m"), (600, "t")]
    assert [c[1] for c in per_actor(trace)["a"]] == [0]
    _, records, _ = read_journal(tmp_path / "j")
    assert max(r[1] for r in records) == 600
    assert fabric.windows == 1


@pytest.mark.trio
async def test_fabric_runs_inside_an_existing_trio_run():
    trace = []
    fabric = Fabric(3)
    fabric.network = Network(Link(Latency.const(250)))
    fabric.add("a", lambda: Sender(trace, 1, 3, every=100))
    fabric.add("b", lambda: Sink(trace))
    async with trio.open_nursery() as nursery:  # the fabric must not disturb other tasks of the run
        ticks = []

        async def bystander():
            await trio.sleep(0)
            ticks.append(1)

        nursery.start_soon(bystander)
        await fabric.run()
    assert ticks == [1]
    assert [(c[1], c[4]) for c in per_actor(trace)["b"][1:]] == [(250, 1), (350, 2), (450, 3)]


# ---- errors ----------------------------------------------------------------------------------
class Boom(Actor):
    def on_start(self):
        self.set_timer(10, Note("boom"))

    def on_Note(self, msg, src):
        raise ZeroDivisionError(f"boom at {self.now}")


def test_an_actor_exception_ends_the_run_with_that_exception_and_restores_gc():
    was = gc.isenabled()
    fabric = Fabric(0)
    fabric.add("x", Boom)
    with pytest.raises(ZeroDivisionError, match="boom at 10"):
        fabric.run_blocking()
    assert gc.isenabled() == was


def test_gc_state_is_restored_after_a_run():
    fabric = Fabric(0)
    fabric.add("x", lambda: Sink([]))
    gc.disable()
    try:
        fabric.run_blocking()
        assert not gc.isenabled()
    finally:
        gc.enable()
    fabric = Fabric(0)
    fabric.add("x", lambda: Sink([]))
    fabric.run_blocking()
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # what the run froze is thawed again


def test_the_collector_is_paused_during_a_run_only():
    """Inside a run the collector is off and what existed at the start is frozen (gc_paused); after it,
    the collector is on again."""
    seen = []

    class Probe0(Actor):
        def on_start(self):
            seen.append((gc.isenabled(), gc.get_freeze_count() > 0))

    fabric = Fabric(0)
    fabric.add("p", Probe0)
    assert gc.isenabled()
    fabric.run_blocking()
    assert seen == [(False, True)] and gc.isenabled()


def test_what_a_run_leaves_alive_skips_the_young_collections():
    """What a run made and left alive goes to the oldest generation at its end (gc_paused): the first
    young collection after the run does not walk it (it walked every record and actor of the run)."""
    kept = []

    class Keeper(Actor):
        def on_start(self):
            kept.append(self)

    fabric = Fabric(0)
    fabric.add("k", Keeper)
    fabric.run_blocking()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    young = gc.get_objects(generation=0) + gc.get_objects(generation=1)
    assert not any(o is kept[0] or o is fabric for o in young)
    assert any(o is kept[0] for o in gc.get_objects(generation=2))


def test_a_run_inside_a_pause_freezes_nothing_and_one_collection_frees_it():
    """Inside a pause already (the runner's, from build to results), a run leaves what it made young and
    unfrozen: one collection after it frees the finished run, and walks nothing the outer pause froze."""
    kept = []

    class Keeper(Actor):
        def on_start(self):
            kept.append(weakref.ref(self))

    with gc_paused():
        frozen = gc.get_freeze_count()
        fabric = Fabric(0)
        fabric.add("k", Keeper)
        fabric.run_blocking()
        assert not gc.isenabled() and gc.get_freeze_count() == frozen
        assert any(o is fabric for o in gc.get_objects(generation=0))
        del fabric
        gc.collect()
        assert kept[0]() is None  # the actor and its fabric form a cycle: only the collection freed them
    assert gc.isenabled() and gc.get_freeze_count() == 0


class NoHandler(Actor):
    def on_start(self):
        self.set_timer(1, Probe(1))


def test_message_without_handler_is_a_type_error():
    fabric = Fabric(0)
    fabric.add("nh", NoHandler)
    with pytest.raises(TypeError, match="NoHandler nh has no handler on_Probe"):
        fabric.run_blocking()


class BadDst(Actor):
    def on_start(self):
        self.send(7, Probe(1))


def test_sending_to_an_unknown_index_is_an_error():
    fabric = Fabric(0)
    fabric.add("bad", BadDst)
    fabric.add("other", lambda: Sink([]))
    with pytest.raises(ValueError, match=r"bad sent fabtest.probe to actor index 7; valid: 0..1"):
        fabric.run_blocking()


class NegativeTimer(Actor):
    def on_start(self):
        self.set_timer(-1, Probe(1))


def test_negative_timer_delay_is_an_error():
    fabric = Fabric(0)
    fabric.add("neg", NegativeTimer)
    with pytest.raises(ValueError, match="neg: timer delay -1 us is negative"):
        fabric.run_blocking()


def test_factory_must_return_an_actor():
    fabric = Fabric(0)
    fabric.add("x", lambda: object())
    with pytest.raises(TypeError, match="factory for 'x' returned object, not an Actor"):
        fabric.run_blocking()


def test_actor_names_are_unique_and_addresses_checked():
    fabric = Fabric(0)
    assert fabric.add("a", lambda: Sink([])) == 0
    assert fabric.add("b", lambda: Sink([])) == 1
    with pytest.raises(ConfigError, match="actor name 'a' is used twice"):
        fabric.add("a", lambda: Sink([]))
    assert fabric.addr("b") == 1 and fabric.name_of(1) == "b" and fabric.name_of(-1) == "outside"
    with pytest.raises(ConfigError, match="unknown actor 'zz'"):
        fabric.addr("zz")
    assert fabric.names == ["a", "b"]


# ---- statistics ------------------------------------------------------------------------------
def test_statistics_count_exactly():
    """a sends 5 probes to b, one retransmitted (loss=1.0 on link a-b during [100, 150), RTO 150); b crashes
    at 400, so the probe due at 400 is lost with the connection (a is told at 500), and the one a sends at
    400, after the crash, on a new connection, is refused at 500 (a is told at 600); b's clock sets 2 timers
    (the second goes stale), a's sender loop 5."""
    trace = []

    def build(f):
        f.network = Network(Link(Latency.const(100)), rto_us=150)
        f.add("a", lambda: Sender(trace, 1, 5, every=100))
        f.add("b", lambda: Sink(trace, period=250, ticks=3))
        f.add_faults([(100, "loss", ("a", "b"), 1.0), (150, "loss", ("a", "b"), 0.0), (400, "crash", "b")])

    fabric, _ = run_fabric(0, build)
    stats = fabric.statistics()
    assert isinstance(stats, FabricStatistics)
    # a sends at 0, 100, 200, 300, 400: #1 (due 100) is retransmitted at 250, #2 (due 200) waits behind it,
    # #3 arrives at 300; #4 (due 400) is lost with the connection, #5 (due 500) is refused.
    assert stats.sent == 5
    assert stats.sent_by_kind == {"fabtest.probe": 5}
    assert stats.delivered == 3 + 2  # and the two notices
    assert stats.drops_by_cause == {"broken": 1, "refused": 1, "stale-timer": 1}
    assert stats.breaks == 2 and stats.now_us == 600
    assert stats.timers == 2 + 5  # two clock ticks, five sender 'next' timers
    assert (stats.actors, stats.alive) == (2, 1)
    assert fabric.actor(1) is None
    a = fabric.actor(0).statistics()
    assert a == ActorStatistics("a", 0, 7, 5)  # received: its five 'next' timers and the notices
    assert [(c[1], c[4]) for c in per_actor(trace)["a"] if c[2] == "broken"] == [
        (500, (0, 1, 400, "crash")), (600, (0, 1, 500, "refused"))]
    assert [(c[1], c[4]) for c in per_actor(trace)["b"] if c[2] == "probe"] == [(250, 1), (250, 2), (300, 3)]


def test_now_after_a_run_is_the_time_of_the_last_event():
    """Arrivals at b: 500, 600, 700, 800, 900; b crashes at 800, so the probes due at 800 and 900 are lost
    with the connection and the last event is a's notice of it, at 1300."""

    def build(f):
        f.network = Network(Link(Latency.const(500)))
        f.add("a", lambda: Sender([], 1, 5, every=100))
        f.add("b", lambda: Sink([]))
        f.add_faults([(800, "crash", "b")])

    fabric, _ = run_fabric(0, build)
    assert fabric.statistics().drops_by_cause == {"broken": 2}
    assert fabric.statistics().now_us == 1300


def test_now_after_a_run_counts_timers_fired_inside_a_window():
    """Const 1000 us (window [100, 1100)): m at 100 sets a timer for 600, the run's last event."""
    trace = []

    def build(f):
        f.network = Network(Link(Latency.const(1000)))
        f.add("a", lambda: Scripted(trace, {"m": [("timer", 500, "t")]}))
        f.inject(0, Note("m"), 100)

    fabric, _ = run_fabric(0, build)
    assert trace[-1][2:5] == (600, "note", 0)
    assert fabric.statistics().now_us == 600


def test_recording_off_gives_the_same_digest(tmp_path):
    def build(f):
        f.network = Network(Link(Latency.uniform(100, 900), loss=0.1))
        f.add("a", lambda: Sender([], 1, 50, every=13))
        f.add("b", lambda: Sender([], 0, 50, every=17))

    _, on = run_fabric(4, build, path=tmp_path / "j")
    _, off = run_fabric(4, build)
    assert on == off
    assert read_journal(tmp_path / "j")[2]["digest"] == on


def test_journal_is_renamed_into_place_only_when_closed(tmp_path):
    journal = Journal(tmp_path / "j")
    fabric = Fabric(0, journal=journal)
    fabric.add("x", Boom)
    journal.write_header({"seed": 0})
    with pytest.raises(ZeroDivisionError):
        fabric.run_blocking()
    journal.abort()
    assert list(tmp_path.iterdir()) == []


# ---- a handler actor end to end, progress, logs ------------------------------------------------------
class Echo(Actor):
    """Replies -n to each probe; on probe 1 also sets a 10 us timer (inside the window) and echoes on it."""

    def __init__(self, trace):
        super().__init__()
        self.trace = trace

    def on_Probe(self, msg, src):
        self.trace.append((self.now, src, "probe", msg.n))
        self.send(src, Probe(-msg.n))
        if msg.n == 1:
            self.set_timer(10, Note("later"))

    def on_Note(self, msg, src):
        self.trace.append((self.now, src, "note", msg.label))
        self.send(1, Probe(0))


@pytest.mark.parametrize("latency", [Latency.const(300), Latency.uniform(100, 700)])
def test_a_handler_actor_answers_every_message_at_its_delivery_time(tmp_path, latency):
    """The echo's handler calls are exactly its journal's deliveries and timer fires, in order and at their
    times, and every reply it sends is in the journal; with constant latency the whole trace is known."""
    trace = []

    def build(f):
        f.network = Network(Link(latency))
        f.add("echo", lambda: Echo(trace))
        f.add("s", lambda: Sender([], 0, 6, every=40))

    _, digest = run_fabric(8, build, path=tmp_path / "j")
    _, records, footer = read_journal(tmp_path / "j")
    assert footer["digest"] == digest
    handled = [(r[1], r[2]) for r in records if (r[0] == DELIVER and r[4] == 0) or (r[0] == TIMER_FIRE and r[2] == 0)]
    assert [(now, src) for now, src, *_ in trace] == handled  # a timer's "sender" is its owner, the echo
    replies = [r[7][0] for r in by_code(records, SEND) if r[2] == 0]
    assert sorted(replies) == sorted([-n for *_, kind, n in trace if kind == "probe"] + [0])
    fires = by_code(records, TIMER_FIRE)
    assert len(fires) == 1 + 6  # the echo's timer and the sender's six
    if latency.constant:  # probes sent at 0, 40, ..., 200 arrive 300 us later; probe 1's timer fires at 310
        assert trace == [(300, 1, "probe", 1), (310, 0, "note", "later")] + [
            (300 + 40 * k, 1, "probe", k + 1) for k in range(1, 6)]


def test_progress_is_called_every_n_windows():
    calls = []
    fabric = Fabric(0)
    fabric.add("clock", lambda: Sink([], period=1000, ticks=10))
    fabric.progress = lambda f: calls.append(f.windows)
    fabric.progress_every = 3
    fabric.run_blocking()
    assert fabric.windows == 10 and calls == [3, 6, 9]


def test_a_fabric_without_actors_returns_at_once():
    fabric = Fabric(0)
    fabric.run_blocking()
    assert fabric.statistics() == FabricStatistics(0, 0, 0, 0, 0, 0, {}, {}, 0, 0)


class Chatty(Actor):
    def on_start(self):
        self.set_timer(250, Note("hello"))

    def on_Note(self, msg, src):
        self.log.info("greeting", label=msg.label)


def test_logs_are_bound_to_actor_and_virtual_time_without_wall_clock():
    from structlog.testing import capture_logs

    fabric = Fabric(0)
    fabric.add("chatty", Chatty)
    with capture_logs() as logs:
        fabric.run_blocking()
    assert logs == [{"actor": "chatty", "vtime_us": 250, "label": "hello", "event": "greeting", "log_level": "info"}]


def test_actor_log_lines_carry_actor_and_virtual_time_but_no_wall_clock():
    import io
    import re

    from fedemu.fabric import log
    from fedemu.fabric.messages import message as _message

    @_message("fabtest.kernel.say")
    class Say:
        pass

    class Talker(Actor):
        def on_start(self):
            self.set_timer(1234, Say())

        def on_Say(self, msg, src):
            self.log.info("hello", n=1)

    buf = io.StringIO()
    log.configure(buf)
    try:
        f = Fabric(1)
        f.add("talker", Talker)
        f.run_blocking()
    finally:
        log.configure()
    line = buf.getvalue().strip()
    assert "hello" in line and "actor=talker" in line and "vtime_us=1234" in line and "n=1" in line
    assert not re.search(r"\d{4}-\d{2}-\d{2}|\d{2}:\d{2}:\d{2}", line)


# ---- what is in flight: a public view for end-of-run checks ---------------------------------------
IN_FLIGHT_SCRIPTS = {
    "a": {"start": [("send", 1, "x"), ("timer", 100, "t"), ("send", 2, "y")], "t": [("send", 1, "w")]},
    "b": {"start": [("send", 0, "z")]},
    "c": {"start": [("send", 1, "v")]},
}


def _in_flight_run(until_us, faults=()):
    def build(f):
        f.network = Network(Link(Latency.const(1000)))
        for name, script in IN_FLIGHT_SCRIPTS.items():
            f.add(name, lambda script=script: Scripted([], script))
        if faults:
            f.add_faults(faults)

    fabric, _ = run_fabric(1, build, until_us=until_us)
    return [(s, d, m.label) for s, d, m in fabric.in_flight()], fabric


def test_in_flight_lists_messages_sent_and_not_handled_by_sender_receiver_and_order():
    """Stopped at 500 us, every start-time send (latency 1000 us) is on the wire and a's timer-made one
    too; the timer itself is not a message. Filters by sender and receiver; nothing once all arrived."""
    got, fabric = _in_flight_run(500)
    assert got == [(0, 1, "x"), (0, 1, "w"), (0, 2, "y"), (1, 0, "z"), (2, 1, "v")]
    assert [(s, d, m.label) for s, d, m in fabric.in_flight(src=0, dst=1)] == [(0, 1, "x"), (0, 1, "w")]
    assert [m.label for _, _, m in fabric.in_flight(dst=1)] == ["x", "w", "v"]
    assert _in_flight_run(None)[0] == []


def test_in_flight_includes_messages_held_behind_a_retransmission():
    """A lossy link stalls its connection: the lost message waits for its retransmission, the next one
    behind it on the same connection; both are in flight, in send order."""
    got, _ = _in_flight_run(1500, faults=[(0, "loss", ("a", "b"), 1.0)])
    assert (0, 1, "x") in got and (0, 1, "w") in got
    assert [g for g in got if g[:2] == (0, 1)] == [(0, 1, "x"), (0, 1, "w")]


def test_in_flight_live_leaves_out_what_a_broken_connection_cut_off():
    """a crashes at 200 us: its connections break, and what it sent (x and y, on the wire until 1000 us) is cut
    off (and w, which its timer sent at 100 us), to be dropped as broken when it comes due. It is still in the queue, so in flight, but not live;
    nor is z, on its way to a, which is down (it will be refused); c's send to b is both."""
    def build(f):
        f.network = Network(Link(Latency.const(1000)))
        for name, script in IN_FLIGHT_SCRIPTS.items():
            f.add(name, lambda script=script: Scripted([], script))
        f.add_faults([(200, "crash", "a")])

    fabric, _ = run_fabric(1, build, until_us=500)

    def labels(**kw):
        return [(s, d, m.label) for s, d, m in fabric.in_flight(**kw) if s >= 0]  # (not the fabric's notices)

    assert labels() == [(0, 1, "x"), (0, 1, "w"), (0, 2, "y"), (1, 0, "z"), (2, 1, "v")]
    assert labels(live=True) == [(2, 1, "v")]
