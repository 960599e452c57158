"""The network model: latency bounds, loss and partitions on connections (retransmission, head-of-line
blocking, timeouts and notices), FIFO, slow links, per-link overrides; dup retired."""

import statistics as pystats

import pytest
from hypothesis import given, settings, strategies as st

from fedemu.fabric import rand
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.journal import DELIVER, DROP, SEND
from fedemu.fabric.network import Latency, Link, Network, SenderFifo

from fabric_helpers import (Sender, Sink, by_code, check_invariants, per_actor, read_journal, run_fabric,
                            static_links)


def run_traffic(tmp_path, network_factory, *, seed=0, senders=((1, 500, 3),), faults=(), names=None):
    """Actor 0 is a sink; each sender (dst, count, every) is its own actor. Returns (fabric, records, trace)."""
    trace = []

    def build(f):
        f.network = network_factory()
        f.add("sink", lambda: Sink(trace))
        for i, (dst, count, every) in enumerate(senders):
            f.add(names[i] if names else f"s{i}", lambda d=dst, c=count, e=every: Sender(trace, d, c, every=e))
        f.add_faults(faults)

    path = tmp_path / f"j{seed}"
    fabric, _ = run_fabric(seed, build, path=path)
    header, records, _ = read_journal(path)
    check_invariants(header["actors"], records, static_links(network_factory()))
    return fabric, records, trace


def latencies(records):
    return [r[5] - r[1] for r in by_code(records, SEND)]


# ---- latency bounds ----------------------------------------------------------------------------
def test_constant_latency_is_exact(tmp_path):
    _, records, _ = run_traffic(tmp_path, lambda: Network(Link(Latency.const(700))),
                                senders=[(0, 100, 3), (0, 100, 0), (0, 50, 11)])
    assert set(latencies(records)) == {700}
    sends = {(r[2], r[3]): r for r in by_code(records, SEND)}
    delivers = by_code(records, DELIVER)
    assert len(delivers) == 250
    assert all(d[1] == sends[(d[2], d[3])][1] + 700 for d in delivers)


@pytest.mark.parametrize("fifo", [False, True])
def test_uniform_latency_within_bounds_and_spread(tmp_path, fifo):
    _, records, _ = run_traffic(tmp_path, lambda: Network(Link(Latency.uniform(300, 900), fifo=fifo)),
                                senders=[(0, 1000, 7), (0, 1000, 0)])
    lat = latencies(records)
    assert len(lat) == 2000
    assert min(lat) >= 300 and max(lat) <= 900
    if not fifo:  # raw draws: they cover the range evenly
        assert min(lat) <= 305 and max(lat) >= 895
        bins = [0] * 6
        for x in lat:
            bins[min((x - 300) * 6 // 601, 5)] += 1
        assert all(250 <= b <= 420 for b in bins), bins


@pytest.mark.parametrize("fifo", [False, True])
def test_lognormal_latency_is_clipped_to_its_bounds(tmp_path, fifo):
    _, records, _ = run_traffic(tmp_path, lambda: Network(Link(Latency.lognormal(1000, 0.8, 400, 3000), fifo=fifo)),
                                senders=[(0, 1500, 5), (0, 1500, 0)])
    lat = latencies(records)
    assert min(lat) >= 400 and max(lat) <= 3000
    if not fifo:
        # P(below 400) = P(z < ln(0.4)/0.8) ~ 12.6 %, P(above 3000) = P(z > ln(3)/0.8) ~ 8.5 %
        assert 0.09 < lat.count(400) / len(lat) < 0.16
        assert 0.06 < lat.count(3000) / len(lat) < 0.11
        assert 920 <= pystats.median(lat) <= 1080


def test_latency_sample_is_a_pure_function_of_key_and_counter():
    lat = Latency.uniform(10, 20)
    key = rand.name_key(7, "net/x")
    first = [lat.sample(key, 4 * c) for c in range(200)]
    assert first == [lat.sample(key, 4 * c) for c in range(200)]
    assert set(first) == set(range(10, 21))
    assert Latency.const(42).sample(key, 0) == 42
    assert Latency.uniform(5, 5).sample(key, 3) == 5 and Latency.uniform(5, 5).constant


@pytest.mark.parametrize("args, message", [
    (("gauss", 1, 2), "latency kind 'gauss' is unknown; known: const, uniform, lognormal"),
    (("uniform", 5, 4), r"latency bounds \[5, 4\] us are invalid; need 0 <= lo <= hi"),
    (("const", -1, 3), r"latency bounds \[-1, 3\] us are invalid"),
    (("lognormal", 1, 9, 0.0, 1.0), "lognormal latency needs median > 0 and sigma >= 0, got 0.0, 1.0"),
])
def test_latency_validation(args, message):
    with pytest.raises(ConfigError, match=message):
        Latency(*args)


def test_link_validation():
    with pytest.raises(ConfigError, match="link loss probability 1.5 is not in"):
        Link(loss=1.5)
    with pytest.raises(ConfigError, match="must be at least 1 us"):
        Network(rto_us=0)


def test_lookahead_is_the_least_possible_latency():
    net = Network(Link(Latency.uniform(500, 900)))
    assert net.lookahead() == 500 and net.window == 500
    net.set_link(0, 1, Link(Latency.const(120)))
    assert net.lookahead() == 120
    net.slow[(1, 0)] = 0.5
    assert net.lookahead() == 60
    assert Network(Link(Latency.const(0))).window == 1


def test_per_link_override(tmp_path):
    def net():
        n = Network(Link(Latency.const(1000)))
        n.set_link(1, 0, Link(Latency.const(250)))
        return n

    _, records, _ = run_traffic(tmp_path, net, senders=[(0, 5, 10), (0, 5, 10)])
    assert {(r[2], r[5] - r[1]) for r in by_code(records, SEND)} == {(1, 250), (2, 1000)}


# ---- loss and partitions: delays on connections ----------------------------------------------------
def delivered(records, src, dst=None):
    """(due, delivered at, retransmissions) of src's deliveries (to dst, if given), in delivery order."""
    due = {r[3]: r[5] for r in by_code(records, SEND) if r[2] == src}
    return [(due[r[3]], r[1], r[5]) for r in by_code(records, DELIVER) if r[2] == src and dst in (None, r[4])]


def test_total_loss_delays_until_the_connection_times_out(tmp_path):
    """Loss 1.0 for good: the first probe is retransmitted (RTO 1000 us, doubling) and the others wait behind
    it, until the timeout (5000 us after it first came due) breaks the connection: all 30 are lost, and both
    ends are told one latency (the lookahead, 100 us) later."""
    fabric, records, trace = run_traffic(
        tmp_path, lambda: Network(Link(Latency.uniform(100, 200), loss=1.0), rto_us=1000, timeout_us=5000),
        senders=[(0, 30, 10)])
    assert all(r[2] == -1 for r in by_code(records, DELIVER))  # only the notices
    first_due = min(r[5] for r in by_code(records, SEND))
    drops = by_code(records, DROP)
    assert len(drops) == 30 and {d[5] for d in drops} == {"broken"} and {d[1] for d in drops} == {first_due + 5000}
    told = {name: [(c[1], c[4]) for c in calls if c[2] == "broken"] for name, calls in per_actor(trace).items()}
    notice = [(first_due + 5100, (1, 0, first_due + 5000, "timeout"))]
    assert told == {"sink": notice, "s0": notice}
    assert [c for c in per_actor(trace)["sink"] if c[2] == "probe"] == []
    assert fabric.statistics().drops_by_cause == {"broken": 30} and fabric.statistics().breaks == 1


def test_partial_loss_delays_but_delivers_everything_in_order(tmp_path):
    """Loss 0.25: every probe arrives, once and in order; about a quarter of the transmissions were lost."""
    fabric, records, trace = run_traffic(tmp_path, lambda: Network(Link(Latency.const(100), loss=0.25), rto_us=300),
                                         senders=[(0, 2000, 0), (0, 2000, 1)], seed=3)
    assert by_code(records, DROP) == []
    got = [(c[3], c[4]) for c in per_actor(trace)["sink"] if c[2] == "probe"]
    for src in (1, 2):
        assert [n for s, n in got if s == src] == list(range(1, 2001))
    rows = delivered(records, 1) + delivered(records, 2)
    retransmitted = sum(tries for _, _, tries in rows)
    transmissions = sum(1 for due, at, tries in rows if tries or at == due) + retransmitted
    assert 0.22 < retransmitted / transmissions < 0.28
    assert any(at > due and not tries for due, at, tries in rows)  # held behind a retransmission


def test_loss_faults_on_a_link_and_on_all_links(tmp_path):
    """Const 100 us, RTO 300; s0 (1) and s1 (2) send to the sink every 100 us, 0..3000. Link s1-sink is
    lossy during [1000, 2000); every link is during [2500, 2800) (the latest loss fault wins on every
    link). s1's probe due at 1000 is retransmitted at 1300, 1900 and 3100 (the RTO doubling), where it
    arrives with the 20 behind it; s0's due at 2500 arrives at 2800 with the two behind it."""
    faults = [(1000, "loss", ("s1", "sink"), 1.0), (2000, "loss", ("s1", "sink"), 0.0),
              (2500, "loss", "*", 1.0), (2800, "loss", "*", 0.0)]
    _, records, _ = run_traffic(tmp_path, lambda: Network(Link(Latency.const(100)), rto_us=300), faults=faults,
                                senders=[(0, 31, 100), (0, 31, 100)])
    assert by_code(records, DROP) == []
    s0 = [(due, 2800 if 2500 <= due < 2800 else due, 1 if due == 2500 else 0) for due in range(100, 3200, 100)]
    s1 = [(due, 3100 if 1000 <= due <= 3100 else due, 3 if due == 1000 else 0) for due in range(100, 3200, 100)]
    assert delivered(records, 1) == s0
    assert delivered(records, 2) == s1


def test_a_later_loss_on_all_links_overrides_an_earlier_link_loss():
    """A loss fault on a link set back to 0.0, then one on '*': the latest wins on that link too (as
    restore '*' clears every slow link)."""
    from fedemu.fabric.faults import Fault
    net = Network(Link(Latency.const(100)))
    index = {"sink": 0, "s0": 1}
    for fault, loss in (((1000, "loss", ("s0", "sink"), 1.0), 1.0), ((2000, "loss", ("s0", "sink"), 0.0), 0.0),
                        ((2500, "loss", "*", 1.0), 1.0), ((2800, "loss", "*", 0.0), 0.0)):
        net.apply(Fault(*fault).resolve(index))
        assert net.loss_of(1, 0) == net.loss_of(0, 1) == loss and net.lossy == (loss > 0)


def test_partition_delays_both_ways_only_across_the_cut(tmp_path):
    """sink=0, a=1, b=2, c=3, d=4; const 500 us, RTO 600; a, c and d send every 400 us (arrivals 500, 900,
    ..., 6100). {a, b} | {c} is cut during [1000, 5000): a->c and c->a are retransmitted from 1300 at 1900,
    3100 and 5500 (after the heal), where everything behind arrives too; a->b and d->c (d is on neither
    side) are not delayed, and nothing is lost."""
    names = ["a", "b", "c", "d"]
    faults = [(1000, "partition", (("a", "b"), ("c",))), (5000, "heal", ())]
    _, records, trace = run_traffic(tmp_path, lambda: Network(Link(Latency.const(500)), rto_us=600), faults=faults,
                                    names=names, senders=[([3, 2], 15, 400), ([0], 1, 0), ([1], 15, 400),
                                                          ([3], 15, 400)])
    assert by_code(records, DROP) == []
    arrivals = [500 + 400 * k for k in range(15)]
    across = [(t, 5500 if 1300 <= t <= 5500 else t) for t in arrivals]
    for src, dst in ((1, 3), (3, 1)):
        assert [(due, at) for due, at, _ in delivered(records, src, dst)] == across
    rows = {(r[2], r[4], r[1]) for r in by_code(records, DELIVER)}
    assert {(1, 2, t) for t in arrivals} <= rows and {(4, 3, t) for t in arrivals} <= rows
    c_got = [(c[1], c[3]) for c in per_actor(trace)["c"] if c[2] == "probe"]
    assert sorted(c_got) == sorted([(at, 1) for _, at in across] + [(t, 4) for t in arrivals])


def test_messages_in_flight_when_the_partition_heals_are_delivered(tmp_path):
    """Latency 3000: sent at 0 (during the cut [0, 2000)), arriving at 3000 after the heal: delivered."""
    faults = [(0, "partition", (("s0",), ("sink",))), (2000, "heal", ())]
    _, records, _ = run_traffic(tmp_path, lambda: Network(Link(Latency.const(3000))), faults=faults,
                                senders=[(0, 1, 0)])
    assert [(r[1], r[2]) for r in by_code(records, DELIVER)] == [(3000, 1)]


def test_a_partition_that_outlasts_the_timeout_breaks_the_connection_and_a_new_one_opens(tmp_path):
    """Const 500, RTO 300, timeout 2000: the probe due at 500 is retransmitted at 1000 (a retransmission
    waits one latency at least), 1600 and, at 2500 (the timeout), lost with its connection; both ends hear of it at 3000. After the heal at 4000, the probe
    sent at 5000 opens a new connection and arrives at 5500."""
    faults = [(0, "partition", (("s0",), ("sink",))), (4000, "heal", ())]
    _, records, trace = run_traffic(tmp_path, lambda: Network(Link(Latency.const(500)), rto_us=300, timeout_us=2000),
                                    faults=faults, senders=[(0, 2, 5000)])
    assert [(r[1], r[2], r[3], r[5]) for r in by_code(records, DROP)] == [(2500, 1, 2, "broken")]
    assert [(r[1], r[2], r[3]) for r in by_code(records, DELIVER) if r[2] == 1] == [(5500, 1, 4)]
    told = {name: [(c[1], c[4]) for c in calls if c[2] == "broken"] for name, calls in per_actor(trace).items()}
    assert told == {"sink": [(3000, (1, 0, 2500, "timeout"))], "s0": [(3000, (1, 0, 2500, "timeout"))]}


def test_dup_is_retired_with_a_reason():
    """Connections never deliver twice: a dup fault is refused, saying why and what to use instead."""
    from fedemu.fabric.faults import Fault
    with pytest.raises(ConfigError, match=r"fault dup: dup is retired: messages travel on connections.*loss"):
        Fault(0, "dup", "*", 0.5)
    with pytest.raises(TypeError):
        Link(dup=0.5)


# ---- FIFO ----------------------------------------------------------------------------------------
def _probe_order(trace):
    return [c[4] for c in per_actor(trace)["sink"] if c[2] == "probe"]


def test_fifo_holds_per_link_under_jitter(tmp_path):
    fabric, records, trace = run_traffic(tmp_path, lambda: Network(Link(Latency.uniform(1000, 5000), fifo=True)),
                                         senders=[(0, 300, 10), (0, 300, 13)])
    for src in (1, 2):
        seqs = [r[3] for r in by_code(records, DELIVER) if r[2] == src]
        assert seqs == sorted(seqs) and len(seqs) == 300
        times = [r[1] for r in by_code(records, DELIVER) if r[2] == src]
        assert times == sorted(times)
        assert len(times) - len(set(times)) >= 20, "FIFO should have held back many messages"
    sink = [(c[3], c[4]) for c in per_actor(trace)["sink"] if c[2] == "probe"]
    for src in (1, 2):
        assert [n for s, n in sink if s == src] == list(range(1, 301))


def test_reordering_happens_without_fifo(tmp_path):
    def net(fifo):
        return lambda: Network(Link(Latency.uniform(1000, 5000), fifo=fifo))

    found = None
    for seed in range(20):
        _, _, trace = run_traffic(tmp_path, net(False), senders=[(0, 30, 100)], seed=seed)
        order = _probe_order(trace)
        assert sorted(order) == list(range(1, 31))
        if order != sorted(order):
            found = seed
            break
    assert found is not None, "no seed in 0..19 reordered 30 messages with 4 ms of jitter"
    _, _, trace = run_traffic(tmp_path, net(True), senders=[(0, 30, 100)], seed=found + 100)
    assert _probe_order(trace) == list(range(1, 31))


# ---- slow links ----------------------------------------------------------------------------------
@pytest.mark.parametrize("fifo", [True, False])
def test_slow_multiplies_latency_on_the_link_both_ways_until_restore(tmp_path, fifo):
    """Const 1000; s0-sink slowed x3 during [2000, 6000). s0 (1) and s1 (2) send every 500 us from 0 to 9000."""
    faults = [(2000, "slow", ("s0", "sink"), 3.0), (6000, "restore", ("s0", "sink"))]
    _, records, _ = run_traffic(tmp_path, lambda: Network(Link(Latency.const(1000), fifo=fifo)), faults=faults,
                                senders=[(0, 19, 500), (0, 19, 500)])
    sends = [(r[2], r[1], r[5]) for r in by_code(records, SEND)]
    last = 0
    for src, t, at in sends:
        if src == 2:
            assert at == t + 1000
            continue
        raw = t + (3000 if 2000 <= t < 6000 else 1000)
        last = max(last, raw) if fifo else raw
        assert at == last, (t, at)
    if fifo:  # sends at 6000..7500 are held behind the one sent at 5500 (due 8500)
        assert [at for src, t, at in sends if src == 1 and 6000 <= t <= 7500] == [8500] * 4


def test_slow_factor_truncates_to_whole_microseconds(tmp_path):
    faults = [(5, "slow", ("s0", "sink"), 1.5)]
    _, records, _ = run_traffic(tmp_path, lambda: Network(Link(Latency.const(333))), faults=faults,
                                senders=[(0, 3, 10)])
    assert [r[5] - r[1] for r in by_code(records, SEND)] == [333, 499, 499]  # sent at 0, 10, 20


def test_restore_all_links(tmp_path):
    faults = [(300, "slow", ("s0", "sink"), 2.0), (300, "slow", ("s1", "sink"), 4.0), (1000, "restore", "*")]
    _, records, _ = run_traffic(tmp_path, lambda: Network(Link(Latency.const(100))), faults=faults,
                                senders=[(0, 3, 600), (0, 3, 600)])
    assert sorted((r[2], r[1], r[5] - r[1]) for r in by_code(records, SEND)) == [
        (1, 0, 100), (1, 600, 200), (1, 1200, 100), (2, 0, 100), (2, 600, 400), (2, 1200, 100)]


@pytest.mark.parametrize("fifo", [False, True])
def test_inline_uniform_routing_matches_route(tmp_path, fifo):
    """On a plain uniform network the fabric routes inline (``fastpath``); every send time must be what
    ``Network.route`` gives for the same sender key and sequence number (FIFO clamp included)."""
    make = lambda: Network(Link(Latency.uniform(300, 900), fifo=fifo))  # noqa: E731
    assert make().jitter == (300, 601, fifo) and make().fixed is None
    fabric, records, _ = run_traffic(tmp_path, make, senders=[(0, 300, 7), (0, 300, 0), (1, 200, 5)])
    reference = make()
    keys = {i: rand.name_key(0, f"net/{name}") for i, name in enumerate(fabric.names)}
    sends = by_code(records, SEND)
    assert len(sends) == 800
    for _, now, src, seq, dst, at, _, _ in sends:
        assert reference.route(src, dst, seq, now, keys[src]) == at
    assert Network(Link(Latency.uniform(300, 900), loss=0.1)).jitter is None
    assert Network(Link(Latency.const(300))).jitter is None


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(0, 3), st.integers(0, 900)), max_size=60))
def test_sender_fifo_clamps_as_a_per_link_table_would(sends):
    """SenderFifo drops its table once everything sent has arrived; the clamps must be exactly those
    of a table that remembers every link forever. Sends: (time step, dst, latency)."""
    fifo, table, now = SenderFifo(), {}, 0
    for step, dst, latency in sends:
        now += step
        want = max(now + latency, table.get(dst, 0))
        table[dst] = want
        assert fifo.clamp(now, dst, now + latency) == want
