"""The fast paths against their plain twins: the fabric's inlined send (``fastpath.make_send``) must
queue, journal and clamp exactly as the plain send (``Network.route``, ``SenderFifo.clamp``,
``EventQueue.push``), and the inlined splitmix64 must draw what ``rand.draw`` draws."""

from hypothesis import given, settings, strategies as st

from fedemu.fabric import rand
from fedemu.fabric.actor import Actor
from fedemu.fabric.kernel import Fabric
from fedemu.fabric.network import Latency, Link, Network

from fabric_helpers import Probe

N = 4  # actors: each may send to any, itself included


@st.composite
def links(draw):
    """Mostly plain links (the fast path), sometimes with loss (the plain path)."""
    lo = draw(st.integers(0, 2000))
    span = draw(st.integers(0, 3000))
    latency = Latency.uniform(lo, lo + span) if span and draw(st.booleans()) else Latency.const(lo)
    loss = draw(st.sampled_from([0.0] * 4 + [0.3, 1.0]))
    return Link(latency, loss=loss, fifo=draw(st.booleans()))


# An operation: a send (sender, receiver, time step) or popping the next queue entry (the fabric moving on).
OPS = st.lists(st.one_of(st.tuples(st.just("send"), st.integers(0, N - 1), st.integers(0, N - 1),
                                   st.sampled_from([0, 0, 1, 7, 150, 900, 4000])),
                         st.tuples(st.just("pop"), st.just(0), st.just(0), st.just(0))), max_size=80)


def world(seed: int, link: Link) -> tuple[Fabric, list[Actor]]:
    """A fabric with N actors set up as ``Fabric._spawn`` sets them up, without starting any task."""
    fabric = Fabric(seed, network=Network(link))
    actors = []
    for i in range(N):
        fabric.add(f"a{i}", Actor)
        actor = Actor()
        actor.fabric, actor.id, actor.name = fabric, i, f"a{i}"
        actor._fifo = fabric.network.sender_fifo(i)
        fabric._actors[i] = actor
        actors.append(actor)
    return fabric, actors


def state(fabric: Fabric, actors: list[Actor]) -> tuple:
    fifos = tuple((a._fifo.latest, a._fifo.last_dst, a._fifo.table) for a in actors)
    return tuple(a._outbox for a in actors), dict(fabric.sent_by_kind), dict(fabric.drops_by_cause), fifos


@settings(max_examples=400, deadline=None, database=None)
@given(seed=st.integers(0, 2**32 - 1), link=links(), ops=OPS)
def test_the_fast_send_equals_the_plain_send(seed, link, ops):
    fast, fast_actors = world(seed, link)
    plain, plain_actors = world(seed, link)
    assert (fast.network.fixed is not None or fast.network.jitter is not None) == (not link.loss)
    now = 0
    for op, src, dst, step in ops:
        if op == "pop":
            got = fast._queue.pop()
            assert got == plain._queue.pop()
            if got is not None:
                now = max(now, got[0])  # the fabric has moved on to the popped entry's time
            continue
        now += step
        for fabric, actors, send in ((fast, fast_actors, fast._send), (plain, plain_actors, plain._send_routed)):
            actor = actors[src]
            actor._now = now
            actor._seq += 1  # what Actor.send does first
            send(actor, dst, Probe(actor._seq))
    assert state(fast, fast_actors) == state(plain, plain_actors)
    assert len(fast._queue) == len(plain._queue)
    assert [fast._queue.pop() for _ in range(len(fast._queue))] == [plain._queue.pop() for _ in range(len(plain._queue))]


def test_the_fast_send_is_taken_on_plain_networks_only():
    """Plain constant and uniform networks route inline; loss, a per-link override or a network fault
    send every message through ``Network.route``."""
    assert Network(Link(Latency.const(300))).fixed == 300
    assert Network(Link(Latency.uniform(300, 900), fifo=False)).jitter == (300, 601, False)
    for net in (Network(Link(Latency.uniform(300, 900), loss=0.1)), Network(Link(Latency.const(300), loss=1.0))):
        assert net.fixed is None and net.jitter is None
    net = Network(Link(Latency.const(300)))
    net.set_link(0, 1, Link(Latency.const(100)))
    assert net.fixed is None and net.jitter is None


@settings(max_examples=300, deadline=None, database=None)
@given(seed=st.integers(0, 2**64 - 1), name=st.text(max_size=12), n=st.integers(1, 40))
def test_a_streams_draws_are_rand_draw_of_its_key(seed, name, n):
    stream = rand.Stream(seed, name)
    assert [stream.bits64() for _ in range(n)] == [rand.draw(stream.key, c) for c in range(n)]


def test_splitmix64_known_answers():
    """splitmix64's published first outputs from state 0 (so a wrong constant cannot pass unnoticed)."""
    assert [rand.draw(0, c) for c in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
