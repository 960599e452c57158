"""`fedemu bench fabric`: per-message cost of the fabric vs a plain heapq loop (the CPython floor).

Two patterns among N actors: ping-pong (N/2 pairs bouncing a counter) and fan-out (a hub sends one
message to every actor, each replies, repeated). Both run with 400-600 us uniform latency, journal
digest on (recording off). The floor runs the same handlers as plain functions on a heapq loop, with
the same messages and latency draws; a bare inline loop is printed as a lower bound for reference.
Each figure is the best of ``--repeat`` runs (3), the three sides taking turns.
"""

from __future__ import annotations

import gc
import heapq
import time

from fedemu.fabric.actor import Actor
from fedemu.fabric.kernel import Fabric
from fedemu.fabric.messages import message
from fedemu.fabric.network import Latency, Link, Network
from fedemu.tools.bench.rss import peak_rss_mb


@message("bench.ball")
class Ball:
    hops: int


class Bouncer(Actor):
    """Ping-pong: even actors serve to their odd partner; both return the ball until it is spent."""

    __slots__ = ("hops",)

    def __init__(self, hops: int) -> None:
        super().__init__()
        self.hops = hops

    def on_start(self) -> None:
        if self.id % 2 == 0:
            self.send(self.id + 1, Ball(self.hops))

    def on_Ball(self, msg, src) -> None:
        if msg.hops > 1:
            self.send(src, Ball(msg.hops - 1))


class Hub(Actor):
    def __init__(self, rounds: int, n: int) -> None:
        super().__init__()
        self.rounds = rounds
        self.n = n
        self.pending = 0

    def on_start(self) -> None:
        self._round()

    def _round(self) -> None:
        if self.rounds == 0:
            return
        self.rounds -= 1
        for dst in range(1, self.n):
            self.send(dst, Ball(1))
        self.pending = self.n - 1

    def on_Ball(self, msg, src) -> None:
        self.pending -= 1
        if self.pending == 0:
            self._round()


class Leaf(Actor):
    def on_Ball(self, msg, src) -> None:
        self.send(src, Ball(0))


def _network() -> Network:
    return Network(Link(Latency.uniform(400, 600)))


def fabric_pingpong(n: int, hops: int) -> tuple[int, float]:
    f = Fabric(1, network=_network())
    for i in range(n):
        f.add(f"a{i}", lambda: Bouncer(hops))
    t0 = time.perf_counter()
    f.run_blocking()
    return f.sent, time.perf_counter() - t0


def fabric_fanout(n: int, rounds: int) -> tuple[int, float]:
    f = Fabric(1, network=_network())
    f.add("hub", lambda: Hub(rounds, n))
    for i in range(1, n):
        f.add(f"a{i}", Leaf)
    t0 = time.perf_counter()
    f.run_blocking()
    return f.sent, time.perf_counter() - t0


def _floor_loop():
    """The floor: a plain heapq event loop. Each event is handed to a plain function (the actor's
    handler, written without the fabric); sends draw the same uniform latency as the fabric's link.
    Returns (send, run, sent) closures."""
    from fedemu.fabric import rand

    key, draw = rand.name_key(1, "plain"), rand.draw
    heap: list = []
    seq = [0]
    push, pop = heapq.heappush, heapq.heappop

    def send(now, src, dst, msg):
        seq[0] += 1
        push(heap, (now + 400 + (draw(key, seq[0]) * 201 >> 64), src, seq[0], dst, msg))

    def run(handlers):
        while heap:
            now, src, _, dst, msg = pop(heap)
            handlers[dst](now, dst, src, msg)

    return send, run, lambda: seq[0]


def heap_pingpong(n: int, hops: int) -> tuple[int, float]:
    """Ping-pong on the floor loop: the same handler logic and Ball messages as ``Bouncer``."""
    send, run, sent = _floor_loop()

    def on_ball(now, me, src, msg):
        if msg.hops > 1:
            send(now, me, src, Ball(msg.hops - 1))

    t0 = time.perf_counter()
    for i in range(0, n, 2):
        send(0, i, i + 1, Ball(hops))
    run([on_ball] * n)
    return sent(), time.perf_counter() - t0


def heap_fanout(n: int, rounds: int) -> tuple[int, float]:
    """Fan-out on the floor loop: the same logic as ``Hub`` and ``Leaf``."""
    send, run, sent = _floor_loop()
    state = {"rounds": rounds, "pending": 0}

    def hub_round(now):
        if state["rounds"] == 0:
            return
        state["rounds"] -= 1
        for dst in range(1, n):
            send(now, 0, dst, Ball(1))
        state["pending"] = n - 1

    def on_hub(now, me, src, msg):
        state["pending"] -= 1
        if state["pending"] == 0:
            hub_round(now)

    def on_leaf(now, me, src, msg):
        send(now, me, src, Ball(0))

    t0 = time.perf_counter()
    hub_round(0)
    run([on_hub] + [on_leaf] * (n - 1))
    return sent(), time.perf_counter() - t0


def inline_pingpong(n: int, hops: int) -> tuple[int, float]:
    """A lower bound below the floor: the loop body does the pattern itself (no handler call, no
    message object). Reported for reference only."""
    from fedemu.fabric import rand

    key = rand.name_key(1, "plain")
    heap = []
    seq = 0
    t0 = time.perf_counter()
    for i in range(0, n, 2):
        seq += 1
        heapq.heappush(heap, (400 + (rand.draw(key, seq) * 201 >> 64), i, seq, i + 1, hops))
    while heap:
        now, src, _, dst, h = heapq.heappop(heap)
        if h > 1:
            seq += 1
            heapq.heappush(heap, (now + 400 + (rand.draw(key, seq) * 201 >> 64), dst, seq, src, h - 1))
    return seq, time.perf_counter() - t0


def inline_fanout(n: int, rounds: int) -> tuple[int, float]:
    """The fan-out counterpart of ``inline_pingpong``."""
    from fedemu.fabric import rand

    key = rand.name_key(1, "plain")
    heap = []
    seq = 0
    now = 0
    t0 = time.perf_counter()
    for _ in range(rounds):
        for dst in range(1, n):
            seq += 1
            heapq.heappush(heap, (now + 400 + (rand.draw(key, seq) * 201 >> 64), 0, seq, dst))
        pending = n - 1
        while pending:
            now, src, _, dst = heapq.heappop(heap)
            if dst == 0:
                pending -= 1
            else:
                seq += 1
                heapq.heappush(heap, (now + 400 + (rand.draw(key, seq) * 201 >> 64), dst, seq, 0))
    return seq, time.perf_counter() - t0


def idle_memory_mb(n: int) -> float:
    """Peak RSS growth for ``n`` idle actors started and parked on the fabric."""
    gc.collect()
    before = peak_rss_mb()
    f = Fabric(1)
    for i in range(n):
        f.add(f"i{i}", Leaf)
    f.run_blocking()
    return peak_rss_mb() - before


BYTES_PER_ACTOR = 4096  # measured: about 3 KB per actor at 100,000 (304 MB peak RSS, docs/performance.md)


def check_memory(sizes, neighbour_mb: int = 0) -> None:
    """Refuse (one line) sizes whose actors, with the neighbour's array, would not fit the share of this
    machine's memory a run may plan to use (``preflight.MEMORY_SHARE``)."""
    from fedemu.fabric.errors import ConfigError
    from fedemu.scenarios.preflight import MEMORY_SHARE, machine_memory

    need = max(sizes) * BYTES_PER_ACTOR + neighbour_mb * (1 << 20)
    room = int(MEMORY_SHARE * machine_memory())
    if need > room:
        raise ConfigError(f"bench fabric --sizes {max(sizes):,}" + (f" --neighbour {neighbour_mb}" if neighbour_mb
                          else "") + f" would need about {need / 2**30:.1f} GiB; this machine allows "
                          f"{room / 2**30:.1f} GiB (about {BYTES_PER_ACTOR} bytes per actor)")


def run(sizes=(100, 1_000, 10_000, 100_000), messages: int = 200_000, out=print, repeat: int = 3) -> list[dict]:
    """Run both patterns at each size; print and return the figures. ``ratio`` is against the
    floor (a heapq loop calling plain handler functions); ``inline`` is a bare loop for reference.
    Each case runs ``repeat`` times, the fabric, floor and inline loop taking turns so that they see
    the same machine load, and each side's best time is reported (as ``timeit`` does)."""
    rows = []
    out(f"{'pattern':9} {'actors':>7} {'messages':>9} {'fabric us/msg':>14} {'floor us/msg':>13} {'ratio':>6} "
        f"{'inline us/msg':>14} {'ratio':>6}")
    for n in sizes:
        hops = max(2, messages // max(1, n // 2))
        rounds = max(1, messages // (2 * n))
        for name, fab, plain, inline, arg in (("ping-pong", fabric_pingpong, heap_pingpong, inline_pingpong, hops),
                                              ("fan-out", fabric_fanout, heap_fanout, inline_fanout, rounds)):
            ft = pt = it = float("inf")
            for _ in range(repeat):
                fm, t = fab(n, arg)
                ft = min(ft, t)
                pm, t = plain(n, arg)
                pt = min(pt, t)
                im, t = inline(n, arg)
                it = min(it, t)
            assert fm == pm == im, (name, n, fm, pm, im)  # the same pattern, message for message
            fus, pus, ius = ft / fm * 1e6, pt / pm * 1e6, it / im * 1e6
            rows.append({"pattern": name, "actors": n, "messages": fm, "fabric_us": fus, "heapq_us": pus,
                         "ratio": fus / pus, "inline_us": ius, "inline_ratio": fus / ius})
            out(f"{name:9} {n:>7} {fm:>9} {fus:>14.2f} {pus:>13.2f} {fus / pus:>6.2f} {ius:>14.2f} {fus / ius:>6.2f}")
    out(f"peak RSS so far: {peak_rss_mb():.0f} MB")
    idle = max(sizes)
    out(f"{idle:,} idle actors started and parked: +{idle_memory_in_subprocess(idle):.0f} MB peak RSS")
    return rows


def idle_memory_in_subprocess(n: int) -> float:
    """``idle_memory_mb`` in a fresh process, so earlier cases' peak does not hide it."""
    import subprocess
    import sys

    code = f"from fedemu.tools.bench.bench_fabric import idle_memory_mb; print(idle_memory_mb({n}))"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
