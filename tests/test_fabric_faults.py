"""Fault plans: crash, restart, partitions and heal, validation of plans as data, resolution of names and
the network's own faults (``Network.apply``)."""

import pytest
from hypothesis import given, settings, strategies as st

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.faults import FAULT_KINDS, Fault, plan
from fedemu.fabric.journal import DELIVER, DROP, FAULT, TIMER_FIRE, TIMER_SET
from fedemu.fabric.kernel import Fabric
from fedemu.fabric.network import Latency, Link, Network

from fabric_helpers import (Logger, Note, Sender, Sink, by_code, check_invariants, per_actor, read_journal,
                            run_fabric, static_links)


class Ticker(Logger):
    """Ticks every ``period`` us up to ``until``; at start also sets a 'late' timer 3000 us ahead. Counts the
    probes it gets in volatile state ``got``."""

    def __init__(self, trace, period=300, until=6000):
        super().__init__(trace)
        self.period = period
        self.until = until
        self.got = 0

    def on_start(self):
        self.log_call("start", -1, self.got)
        self.set_timer(self.period, Note("tick"))
        self.set_timer(3000, Note("late"))

    def on_Note(self, msg, src):
        self.log_call(msg.label, src, self.got)
        if msg.label == "tick" and self.now + self.period <= self.until:
            self.set_timer(self.period, Note("tick"))

    def on_Probe(self, msg, src):
        self.got += 1
        self.log_call("probe", src, msg.n)


def crash_restart_run(tmp_path, faults, seed=0):
    """x (0) ticks; y (1) sends x a probe every 200 us, 25 of them (const 100 us: arrivals 100, 300, ..., 4900)."""
    trace = []
    net = lambda: Network(Link(Latency.const(100)))  # noqa: E731

    def build(f):
        f.network = net()
        f.add("x", lambda: Ticker(trace))
        f.add("y", lambda: Sender(trace, 0, 25, every=200))
        f.add_faults(faults)

    fabric, _ = run_fabric(seed, build, path=tmp_path / "j")
    header, records, _ = read_journal(tmp_path / "j")
    check_invariants(header["actors"], records, static_links(net()))
    return fabric, records, per_actor(trace)["x"]


def test_a_crashed_actor_receives_nothing_and_restart_gives_a_fresh_instance(tmp_path):
    fabric, records, x = crash_restart_run(tmp_path, [(1000, "crash", "x"), (2500, "restart", "x")])
    # No handler of x runs while it is dead, and each call belongs to the incarnation alive at that time.
    assert all(not 1000 <= now < 2500 for _, now, *_ in x)
    assert all(inc == (0 if now < 1000 else 1) for inc, now, *_ in x)
    # Incarnation 0: start, probes at 100..900, ticks at 300, 600, 900.
    assert x[:7] == [(0, 0, "start", -1, 0), (0, 100, "probe", 1, 1), (0, 300, "probe", 1, 2),
                     (0, 300, "tick", 0, 2), (0, 500, "probe", 1, 3), (0, 600, "tick", 0, 3),
                     (0, 700, "probe", 1, 4)]
    assert x[7:9] == [(0, 900, "probe", 1, 5), (0, 900, "tick", 0, 5)]
    # Incarnation 1: on_start again at 2500 with its state reset (got == 0), then the probe due at 2500.
    assert x[9:11] == [(1, 2500, "start", -1, 0), (1, 2500, "probe", 1, 13)]
    late = [c for c in x if c[2] == "late"]
    assert late == [(1, 5500, "late", 0, 13)]  # the old incarnation's late timer (3000) never ran
    # The crash broke y's connection to x (nothing was in flight: y's last probe before 1000 arrived at 900);
    # y's probes due while x was dead were refused, each at its due time, and y told of each.
    refused = [(r[1], r[2]) for r in by_code(records, DROP) if r[5] == "refused"]
    assert refused == [(t, 1) for t in range(1100, 2500, 200)]
    # Timers of the old incarnation: 'tick' at 1200 (dead then) and 'late' at 3000 (after the restart).
    stale = [(r[1], r[2]) for r in by_code(records, DROP) if r[5] == "stale-timer"]
    assert stale == [(1200, 0), (3000, 0)]
    faults = [(r[1], r[3], r[4]) for r in by_code(records, FAULT)]
    assert faults == [(1000, "crash", ("x",)), (2500, "restart", ("x",))]
    actor = fabric.actor(0)
    assert actor.incarnation == 1 and actor.rng.name == "actor/x#1" and actor.got == 13
    assert fabric.statistics().drops_by_cause == {"refused": 7, "stale-timer": 2}
    assert fabric.statistics().breaks == 1 + 7


def test_timers_set_before_a_restart_are_stale_even_if_due_later(tmp_path):
    _, records, x = crash_restart_run(tmp_path, [(1000, "crash", "x"), (1000, "restart", "x")])
    sets = {(r[2], r[3]): r for r in by_code(records, TIMER_SET)}
    fired = {(r[2], r[3]) for r in by_code(records, TIMER_FIRE)}
    stale = {(r[2], r[3]) for r in by_code(records, DROP) if r[5] == "stale-timer"}
    for key, rec in sets.items():
        if key[0] != 0:
            continue
        if rec[1] < 1000:
            assert key in stale or rec[4] < 1000 and key in fired, rec
        else:
            assert key in fired, rec
    assert [c[:3] for c in x if c[2] == "start"] == [(0, 0, "start"), (1, 1000, "start")]
    assert [r for r in by_code(records, DROP) if r[5] == "dead"] == []


def test_crash_of_a_dead_actor_and_restart_of_a_live_one_do_nothing(tmp_path):
    fabric, records, x = crash_restart_run(tmp_path, [(500, "restart", "x"), (1000, "crash", "x"),
                                                      (1200, "crash", "x"), (2500, "restart", "x"),
                                                      (2600, "restart", "x")])
    assert [c[:3] for c in x if c[2] == "start"] == [(0, 0, "start"), (1, 2500, "start")]
    assert fabric.actor(0).incarnation == 1
    assert len(by_code(records, FAULT)) == 5  # every fault is journaled, effective or not


def test_crash_without_restart_leaves_the_actor_dead(tmp_path):
    fabric, records, x = crash_restart_run(tmp_path, [(1000, "crash", "x")])
    assert max(now for _, now, *_ in x) < 1000
    assert fabric.actor(0) is None
    assert fabric.statistics().alive == 1
    assert len([r for r in by_code(records, DROP) if r[5] == "refused"]) == 20  # arrivals 1100..4900


def test_messages_sent_before_a_crash_of_their_sender_are_lost_with_its_connection(tmp_path):
    """y (1) sends x (0) a burst at 0 with latency 500, then y crashes at 100: the connection breaks, the burst
    is lost with it, and x is told one latency after the crash."""
    trace = []

    def build(f):
        f.network = Network(Link(Latency.const(500)))
        f.add("x", lambda: Sink(trace))
        f.add("y", lambda: Sender(trace, 0, 5))
        f.add_faults([(100, "crash", "y")])

    run_fabric(0, build, path=tmp_path / "j")
    _, records, _ = read_journal(tmp_path / "j")
    assert [(r[1], r[3], r[5]) for r in by_code(records, DROP)] == [(500, n, "broken") for n in range(1, 6)]
    assert [(c[1], c[2], c[4]) for c in per_actor(trace)["x"]] == [(0, "start", 0),
                                                                  (600, "broken", (1, 0, 100, "crash"))]


def test_crash_at_the_time_of_a_delivery_comes_first(tmp_path):
    """Faults come first at a time: a crash at 300 precedes the probe due at 300, which is lost with the
    connection (sent at 200, before the crash)."""
    _, records, x = crash_restart_run(tmp_path, [(300, "crash", "x")])
    assert [(c[1], c[2]) for c in x] == [(0, "start"), (100, "probe")]
    assert [(r[1], r[5]) for r in by_code(records, DROP)][0] == (300, "broken")


def test_heal_clears_every_partition(tmp_path):
    """a (0), b (1), c (2): two partitions a|b and a|c from 1000, healed together at 2000. The probes due at
    1000 are retransmitted at 2500 (RTO 1500), after the heal, with everything behind them: none is lost."""
    trace = []

    def build(f):
        f.network = Network(Link(Latency.const(100)), rto_us=1500)
        f.add("a", lambda: Sender(trace, [1, 2], 30, every=100))
        f.add("b", lambda: Sink(trace))
        f.add("c", lambda: Sink(trace))
        f.add_faults([(1000, "partition", (["a"], ["b"])), (1000, "partition", ("a", ("c",))),
                      (2000, "heal", ())])

    run_fabric(0, build, path=tmp_path / "j")
    _, records, _ = read_journal(tmp_path / "j")
    assert by_code(records, DROP) == []
    at = sorted((r[4], r[1]) for r in by_code(records, DELIVER))
    assert at == [(d, 2500 if 1000 <= t < 2500 else t) for d in (1, 2) for t in range(100, 3100, 100)]


# ---- plans as data -------------------------------------------------------------------------------
def test_plans_accept_tuples_dicts_and_faults():
    events = [(5, "crash", "a"), {"at_us": 7, "kind": "restart", "target": "a"},
              Fault(9, "partition", (["a", "b"], ["c"])), (11, "heal", ()), (12, "slow", ("a", "b"), 2.5),
              (13, "restore", "*"), (14, "loss", ("a", "c"), 0.5)]
    faults = plan(events)
    assert [f.as_data() for f in faults] == [
        (5, "crash", ("a",), 0.0), (7, "restart", ("a",), 0.0), (9, "partition", (("a", "b"), ("c",)), 0.0),
        (11, "heal", (), 0.0), (12, "slow", ("a", "b"), 2.5), (13, "restore", ("*",), 0.0),
        (14, "loss", ("a", "c"), 0.5)]
    assert plan([f.as_data() for f in faults]) == faults
    assert faults[2].names() == ["a", "b", "c"] and faults[5].names() == []
    assert FAULT_KINDS == ("crash", "restart", "partition", "heal", "slow", "restore", "loss")


@pytest.mark.parametrize("event, message", [
    ((1, "explode", "a"), "unknown fault kind 'explode'; known: crash, restart, partition, heal, slow, restore, loss"),
    ((-1, "crash", "a"), "fault crash at -1 us: time must be >= 0"),
    ((1, "crash", ("a", "b")), r"fault crash needs 1 target\(s\), got \('a', 'b'\)"),
    ((1, "partition", ("a",)), r"fault partition needs 2 target\(s\)"),
    ((1, "heal", ("a",)), r"fault heal needs 0 target\(s\)"),
    ((1, "slow", ("a", "b"), 0.0), "fault slow needs a latency factor > 0, got 0.0"),
    ((1, "loss", ("a", "b"), 1.5), r"fault loss needs a probability in \[0, 1\], got 1.5"),
    ((1, "restore", ("a",)), r"fault restore needs a link \(a, b\) or '\*', got \('a',\)"),
])
def test_fault_validation(event, message):
    with pytest.raises(ConfigError, match=message):
        plan([event])


def test_faults_must_name_known_actors():
    fabric = Fabric(0)
    fabric.add("a", lambda: Sink([]))
    fabric.add("b", lambda: Sink([]))
    with pytest.raises(ConfigError, match="fault crash at 5 us names unknown actor 'zz'; known: a, b"):
        fabric.add_faults([(5, "crash", "zz")])
    with pytest.raises(ConfigError, match="fault partition at 1 us names unknown actor 'q'"):
        fabric.add_faults([(1, "partition", (("a",), ("q",)))])
    with pytest.raises(ConfigError, match=r"fault slow needs a link \(a, b\); '\*' is only for loss"):
        fabric.add_faults([(1, "slow", "*", 2.0)])
    fabric.add_faults([(1, "loss", "*", 0.5), (2, "restore", "*")])  # '*' is fine for these


def test_unknown_actor_list_is_abbreviated_after_twelve_names():
    fabric = Fabric(0)
    for i in range(14):
        fabric.add(f"n{i}", lambda: Sink([]))
    with pytest.raises(ConfigError, match=r"known: n0, n1, .*, n11, \.\.\.$"):
        fabric.add_faults([(5, "crash", "zz")])


def test_a_fault_plan_alone_keeps_time_moving(tmp_path):
    """Faults are heap events: with idle actors the run still walks through every fault, in plan order at
    equal times, journaling each with its plan index."""
    def build(f):
        f.add("a", lambda: Sink([]))
        f.add("b", lambda: Sink([]))
        f.add_faults([(700, "heal", ()), (300, "crash", "a"), (300, "restart", "a"), (50, "slow", ("a", "b"), 2.0)])

    fabric, _ = run_fabric(0, build, path=tmp_path / "j")
    _, records, _ = read_journal(tmp_path / "j")
    assert [(r[1], r[2], r[3]) for r in records] == [(50, 3, "slow"), (300, 1, "crash"), (300, 2, "restart"),
                                                     (700, 0, "heal")]
    assert fabric.actor(0).incarnation == 1


def test_faults_due_at_time_zero_apply_before_the_start(tmp_path):
    trace = []

    def build(f):
        f.network = Network(Link(Latency.const(100)))
        f.add("x", lambda: Sink(trace))
        f.add("y", lambda: Sender(trace, 0, 3))  # a burst from on_start, at time 0
        f.add_faults([(0, "crash", "y"), (50, "restart", "y")])

    run_fabric(0, build, path=tmp_path / "j")
    starts = [(c[0], c[1], c[2]) for c in trace if c[3] == "start"]
    assert ("y", 0, 0) not in starts and ("y", 1, 50) in starts


def test_faults_due_together_all_precede_the_restarted_actors_start(tmp_path):
    """Faults due at one time are applied before anything else at that time, the start of an actor they
    restart included: restarted then crashed again at 500, x's new incarnation never runs; restarted at 900
    it starts as incarnation 2."""
    _, records, x = crash_restart_run(tmp_path, [(200, "crash", "x"), (500, "restart", "x"), (500, "crash", "x"),
                                                 (900, "restart", "x")])
    assert [c[:3] for c in x if c[2] == "start"] == [(0, 0, "start"), (2, 900, "start")]
    assert all(not 200 <= now < 900 for _, now, *_ in x)
    # the probe due at 500 was in flight on the connection the crash at 500 broke; the others found x down
    assert [(r[1], r[5]) for r in by_code(records, DROP) if r[2] == 1] == [(300, "refused"), (500, "broken"),
                                                                         (700, "refused")]


# ---- the network applies network faults; names are resolved once ---------------------------------
def test_faults_resolve_names_to_indices():
    index = {"a": 0, "b": 1, "c": 2}
    faults = plan([(1, "crash", "b"), (2, "partition", (["a", "b"], ["c"])), (3, "heal", ()),
                   (4, "slow", ("c", "a"), 2.0), (5, "restore", "*"), (6, "loss", "*", 0.5)])
    got = [f.resolve(index) for f in faults]
    assert [(r.fault, r.actor, r.link, r.sides) for r in got] == [
        (faults[0], 1, None, ()), (faults[1], -1, None, (frozenset({0, 1}), frozenset({2}))),
        (faults[2], -1, None, ()), (faults[3], -1, (2, 0), ()), (faults[4], -1, None, ()), (faults[5], -1, None, ())]
    assert [(r.kind, r.value) for r in got][3] == ("slow", 2.0)
    with pytest.raises(ConfigError, match="fault loss at 1 us names unknown actor 'z'; known: a, b, c"):
        Fault(1, "loss", ("a", "z"), 0.1).resolve(index)


def _cached(net: Network) -> tuple:
    return net.window, net.fixed, net.jitter


_LINK = st.tuples(st.integers(0, 3), st.integers(0, 3)).filter(lambda link: link[0] != link[1])  # no self-link
NETWORK_FAULTS = st.lists(st.one_of(
    st.tuples(st.just("partition"), st.tuples(st.sets(st.integers(0, 3)), st.sets(st.integers(0, 3))).map(
        lambda ab: (ab[0], ab[1] - ab[0]))),  # disjoint sides
    st.tuples(st.just("heal"), st.just(())),
    st.tuples(st.just("slow"), _LINK, st.sampled_from([0.25, 0.5, 3.0])),
    st.tuples(st.sampled_from(["restore", "loss"]), _LINK, st.sampled_from([0.0, 0.5, 1.0])),
    st.tuples(st.sampled_from(["restore", "loss"]), st.just("*"), st.sampled_from([0.0, 0.5, 1.0])),
), max_size=12)


@settings(max_examples=300, deadline=None, database=None)
@given(uniform=st.booleans(), faults=NETWORK_FAULTS)
def test_network_apply_keeps_a_model_of_the_live_state_and_its_own_caches(uniform, faults):
    """Each network fault against a plain model (partitions, slow factors and loss per directed link), and
    the cached window, fixed latency and jitter always what a fresh ``changed()`` computes."""
    names = ["n0", "n1", "n2", "n3"]
    index = {n: i for i, n in enumerate(names)}
    net = Network(Link(Latency.uniform(400, 900) if uniform else Latency.const(400)))
    sides, slow, loss, every_loss, ever_slowed = [], {}, {}, None, False
    for k, (kind, target, *value) in enumerate(faults):
        if kind == "partition":
            target = tuple(tuple(names[i] for i in sorted(side)) for side in target)
        elif kind != "heal" and target != "*":
            if target[0] == target[1]:
                continue
            target = (names[target[0]], names[target[1]])
        fault = Fault(k, kind, target, *value)
        net.apply(fault.resolve(index))
        ever_slowed = ever_slowed or kind == "slow"
        if kind == "partition":
            sides.append(tuple(frozenset(index[n] for n in side) for side in fault.target))
        elif kind == "heal":
            sides.clear()
        elif fault.target == ("*",):
            if kind == "loss":
                every_loss, loss = fault.value, {}
            else:
                slow.clear()
        else:
            a, b = index[target[0]], index[target[1]]
            for pair in ((a, b), (b, a)):
                if kind == "slow":
                    slow[pair] = fault.value
                elif kind == "restore":
                    slow.pop(pair, None)
                else:
                    loss[pair] = fault.value
        assert (net.partitions, net.slow, net.loss, net.default_loss) == (sides, slow, loss, every_loss)
        for s in range(4):
            for d in range(4):
                assert net.blocked(s, d) == any((s in x and d in y) or (s in y and d in x) for x, y in sides)
        cached = _cached(net)
        net.changed()
        assert cached == _cached(net)
        assert net.window == max(1, min([400, *(int(400 * f) for f in slow.values())]))
        assert net.fixed is None if (slow or loss or every_loss is not None or uniform or ever_slowed) else net.fixed == 400


def test_the_network_leaves_crash_and_restart_to_the_kernel():
    for kind in ("crash", "restart"):
        with pytest.raises(ValueError, match=f"fault {kind} is the fabric's to apply"):
            Network().apply(Fault(1, kind, "a").resolve({"a": 0}))


# ---- the horizon: a run whose faults never heal still ends --------------------------------------------
def _horizon_run(faults, horizon_us=10_000):
    """x ticks every 300 us for ever (a retry that never gives up), y listens; the run's horizon is 10 ms."""
    trace = []

    def build(f):
        f.add("x", lambda: Ticker(trace, until=10**12))
        f.add("y", lambda: Sink(trace))
        f.add_faults(faults)
        f.horizon_us = horizon_us

    fabric, _ = run_fabric(0, build, until_us=100_000)  # (the test's own bound: without a horizon it ends here)
    return fabric


@pytest.mark.parametrize("faults, in_force", [
    ([(1000, "partition", (["x"], ["y"]))], ["partition {x} | {y}"]),
    ([(1000, "loss", ("*",), 1.0)], ["loss 1 on every link"]),
    ([(1000, "crash", "y")], ["y down since 0.001 s"]),
    ([(1000, "slow", ("x", "y"), 3.0), (2000, "loss", ("x", "y"), 0.5)], ["loss 0.5 on x<->y", "slow x3 on x<->y"]),
])
def test_a_run_with_a_fault_in_force_at_its_horizon_is_stopped_there_and_names_it(faults, in_force):
    """Stopped at the first window past its horizon (within one window: as long as the shortest latency)."""
    fabric = _horizon_run(faults)
    assert fabric.stopped_at_horizon and 10_000 <= fabric.now < 10_000 + fabric.network.window
    assert fabric.faults_in_force() == in_force


def test_a_run_whose_faults_healed_goes_on_past_its_horizon():
    """The horizon comes after the last fault event: with nothing in force by then the run is not stopped
    (a fault-free run, or one whose faults healed, ends as it would have without a horizon)."""
    faults = [(1000, "partition", (["x"], ["y"])), (2000, "heal", ()), (3000, "crash", "y"), (4000, "restart", "y")]
    trace = []

    def build(f):
        f.add("x", lambda: Ticker(trace, until=30_000))
        f.add("y", lambda: Sink(trace))
        f.add_faults(faults)
        f.horizon_us = 10_000

    fabric, digest = run_fabric(0, build)
    assert not fabric.stopped_at_horizon and fabric.now == 30_000 and fabric.faults_in_force() == []

    def unbounded(f):
        build(f)
        f.horizon_us = None

    assert run_fabric(0, unbounded)[1] == digest
