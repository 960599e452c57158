"""Determinism by construction: seeds, named random streams, trio's scheduling order, other processes."""

import hashlib
import os
import random
import subprocess
import sys

import pytest
import trio

from fedemu.fabric import rand
from fedemu.fabric.network import Latency, Link, Network
from fedemu.tools.run import runner

from fabric_helpers import ROOT, Forwarder, read_journal, run_fabric

NAMES = [f"n{i}" for i in range(6)]
FAULTS = [(900, "crash", "n1"), (2500, "restart", "n1"), (1200, "partition", (("n0", "n2"), ("n3", "n4"))),
          (3000, "heal", ()), (400, "slow", ("n0", "n5"), 2.0), (2000, "loss", "*", 0.2), (3500, "restore", "*")]


def busy(trace=None, faults=FAULTS):
    trace = [] if trace is None else trace

    def build(f):
        f.network = Network(Link(Latency.uniform(200, 1200), loss=0.05, fifo=False))
        for name in NAMES:
            f.add(name, lambda: Forwarder(trace, len(NAMES), 2, 6, timer_p=0.3, branch=0.3))
        f.add_faults(faults)

    return build


def test_same_seed_same_journal_bytes(tmp_path):
    _, d1 = run_fabric(7, busy(), path=tmp_path / "a")
    _, d2 = run_fabric(7, busy(), path=tmp_path / "b")
    assert d1 == d2
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
    assert len(read_journal(tmp_path / "a")[1]) > 100


def test_different_seeds_different_digests():
    digests = {run_fabric(seed, busy())[1] for seed in range(8)}
    assert len(digests) == 8
    demo = {runner.execute("demo", seed=seed, overrides={"duration_ms": 100}).digest for seed in (1, 2, 3)}
    assert len(demo) == 3


@pytest.fixture
def shuffled_trio(monkeypatch):
    """Let trio shuffle every batch of runnable tasks with a chosen seed (its own test hook)."""
    import trio._core._run as trio_run

    def use(seed):
        monkeypatch.setattr(trio_run, "_ALLOW_DETERMINISTIC_SCHEDULING", True)
        monkeypatch.setattr(trio_run, "_r", random.Random(seed))

    return use


def test_trios_scheduling_order_never_reaches_the_journal(shuffled_trio):
    digests, orders, per_actor_traces = set(), set(), []
    for seed in range(6):
        shuffled_trio(seed)
        trace = []
        _, digest = run_fabric(3, busy(trace))
        digests.add(digest)
        orders.add(tuple(trace))
        per_actor_traces.append(sorted(trace, key=lambda e: e[0]))  # stable sort: each actor's own order
    assert len(digests) == 1
    assert len(orders) > 1, "the shuffled scheduler should have interleaved the actors differently"
    assert all(t == per_actor_traces[0] for t in per_actor_traces)


def test_actor_streams_depend_on_seed_name_and_incarnation_only():
    a = rand.Stream(5, "actor/x#0")
    b = rand.Stream(5, "actor/x#0")
    other = rand.Stream(5, "actor/y#0")
    first = [a.bits64() for _ in range(5)]
    [other.bits64() for _ in range(100)]  # drawing from another stream changes nothing
    assert first == [b.bits64() for _ in range(5)]
    assert first != [rand.Stream(5, "actor/x#1").bits64() for _ in range(5)]
    assert first != [rand.Stream(6, "actor/x#0").bits64() for _ in range(5)]
    assert a.child("c").name == "actor/x#0/c"


def test_splitmix64_reference_values():
    """draw(0, c) is splitmix64 seeded with 0: its published first outputs."""
    assert [rand.draw(0, c) for c in range(3)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    key = int.from_bytes(hashlib.blake2b(b"1\x00x", digest_size=8).digest(), "little")
    assert rand.name_key(1, "x") == key
    s = rand.Stream(1, "x")
    assert [s.bits64(), s.bits64()] == [rand.draw(key, 0), rand.draw(key, 1)]
    assert rand.unit(key, 0) == (rand.draw(key, 0) >> 11) / 2.0 ** 53


def test_stream_helpers():
    s = rand.Stream(0, "helpers")
    assert sorted({s.randrange(7) for _ in range(500)}) == list(range(7))
    with pytest.raises(ValueError, match="randrange needs n >= 1, got 0"):
        s.randrange(0)
    items = list(range(20))
    s.shuffle(items)
    assert sorted(items) == list(range(20)) and items != list(range(20))
    picked = s.sample(range(10), 4)
    assert len(set(picked)) == 4 and all(0 <= p < 10 for p in picked)
    with pytest.raises(ValueError, match="sample size 11 out of range 0..10"):
        s.sample(range(10), 11)
    assert all(0.0 <= s.random() < 1.0 for _ in range(1000))
    assert all(2.0 <= s.uniform(2.0, 3.0) < 3.0 for _ in range(100))
    counts = [0, 0, 0]
    for _ in range(3000):
        counts[s.weighted_index([1, 0, 3])] += 1
    assert counts[1] == 0 and 0.2 < counts[0] / 3000 < 0.3
    with pytest.raises(ValueError, match="positive total weight"):
        s.weighted_index([0, 0])
    mean = sum(s.expovariate(5.0) for _ in range(4000)) / 4000
    assert 4.5 < mean < 5.5
    assert s.choice("abc") in "abc"


def _cli_journal(path, hashseed, *extra):
    env = dict(os.environ, PYTHONHASHSEED=str(hashseed))
    proc = subprocess.run([sys.executable, "-m", "fedemu", "run", "demo", "--journal", str(path), "--quiet",
                           *extra], env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_another_process_with_another_hash_seed_writes_the_same_bytes(tmp_path):
    in_process = runner.execute("demo", seed=1, journal_path=tmp_path / "here.fjl")
    out0 = _cli_journal(tmp_path / "h0.fjl", 0)
    out1 = _cli_journal(tmp_path / "h1.fjl", 4242)
    assert (tmp_path / "h0.fjl").read_bytes() == (tmp_path / "h1.fjl").read_bytes() \
        == (tmp_path / "here.fjl").read_bytes()
    assert in_process.fabric.statistics().breaks > 0  # the demo's crash breaks connections: notices included
    assert in_process.digest in out0 and in_process.digest in out1
    assert f"journal: {tmp_path / 'h0.fjl'}" in out0


def test_trio_run_per_fabric_is_independent_of_earlier_runs():
    """Leftover state (the network's FIFO memory, gc freezing, actor caches) must not leak between runs."""
    first = run_fabric(11, busy())[1]
    for seed in (1, 2):
        run_fabric(seed, busy())
    trio.run(trio.sleep, 0)
    assert run_fabric(11, busy())[1] == first
