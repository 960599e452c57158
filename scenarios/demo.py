"""A tiny fabric demo: peers gossip a counter over a lossy, jittery network under a fault plan.

Each peer wakes every ``period_ms`` (a fabric timer) and sends a ping to a random peer, which answers
with a pong. Peer 2 crashes and restarts; peers {0,1} and {3,4} are partitioned for a while.
"""

from __future__ import annotations

from fedemu.fabric.actor import Actor
from fedemu.fabric.messages import message
from fedemu.fabric.network import Latency, Link
from fedemu.scenarios.preflight import check_demo

PARAMS = {
    "peers": 5,
    "period_ms": 10.0,
    "duration_ms": 1000.0,
    "latency_ms": 0.5,
    "jitter_ms": 0.2,
    "loss": 0.01,
    "faults": True,
    "ties": "seeded",  # order of messages due at one time (the fabric's ``ties``): seeded or sender
}


@message("demo.tick")
class Tick:
    pass


@message("demo.ping")
class Ping:
    n: int


@message("demo.pong")
class Pong:
    n: int


class Peer(Actor):
    """Pings a random other peer each period; counts pongs. Its counter is volatile state."""

    def __init__(self, peers: int, period_us: int, until_us: int) -> None:
        super().__init__()
        self.peers = peers
        self.period_us = period_us
        self.until_us = until_us
        self.pings = 0
        self.pongs = 0

    def on_start(self) -> None:
        self.set_timer(self.period_us, Tick())

    def on_Tick(self, msg, src) -> None:
        if self.now + self.period_us <= self.until_us:
            self.set_timer(self.period_us, Tick())
        peer = self.rng.randrange(self.peers - 1)
        self.pings += 1
        self.send(peer if peer < self.id else peer + 1, Ping(self.pings))

    def on_Ping(self, msg, src) -> None:
        self.send(src, Pong(msg.n))

    def on_Pong(self, msg, src) -> None:
        self.pongs += 1


class DemoRun:
    def finish(self, fabric, info):
        peers = {}
        for name in fabric.names:
            actor = fabric.actor(fabric.addr(name))
            peers[name] = None if actor is None else {"incarnation": actor.incarnation, "pings": actor.pings,
                                                     "pongs": actor.pongs}
        return {**info, "peers": peers}


def build(fabric, params):
    check_demo(params)  # one-line errors for numbers the demo cannot use, before any actor exists
    fabric.ties = params["ties"]
    jitter = int(params["jitter_ms"] * 1000)
    base = int(params["latency_ms"] * 1000)
    fabric.network.default = Link(Latency.uniform(max(0, base - jitter), base + jitter), loss=params["loss"])
    n = int(params["peers"])
    period = int(params["period_ms"] * 1000)
    until = int(params["duration_ms"] * 1000)
    for i in range(n):
        fabric.add(f"peer-{i}", lambda: Peer(n, period, until))
    if params["faults"] and n >= 5:
        ms = 1000
        fabric.add_faults([
            (100 * ms, "crash", "peer-2"),
            (200 * ms, "restart", "peer-2"),
            (300 * ms, "partition", (("peer-0", "peer-1"), ("peer-3", "peer-4"))),
            (400 * ms, "heal", ()),
            (500 * ms, "slow", ("peer-0", "peer-1"), 10.0),
            (600 * ms, "restore", ("peer-0", "peer-1")),
        ])
    return DemoRun()
