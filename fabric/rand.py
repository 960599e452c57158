"""Seeded random streams: counter-based splitmix64 of (run seed, stream name, counter).

A stream is cheap (three ints), so every actor, link and generator gets its own, derived from the run
seed and a stable name. Nothing here depends on ``hash()``, ``id()``, the module ``random`` or order of
creation: the n-th draw of stream ``name`` under seed ``s`` is always the same number.
"""

from __future__ import annotations

import hashlib
import math
from array import array
from bisect import bisect_right

import numpy as np

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
MIX1, MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB  # splitmix64's multipliers (fastpath inlines mix64)
MASK, GOLDEN = _MASK, _GOLDEN
_TWO_64 = float(1 << 64)
_TWO_53 = float(1 << 53)


def mix64(z: int) -> int:
    """The splitmix64 finalizer: a bijective scramble of a 64-bit integer."""
    z = ((z ^ (z >> 30)) * MIX1) & _MASK
    z = ((z ^ (z >> 27)) * MIX2) & _MASK
    return z ^ (z >> 31)


def name_key(seed: int, name: str) -> int:
    """A stable 64-bit key for stream ``name`` under run seed ``seed`` (blake2b, not ``hash()``)."""
    digest = hashlib.blake2b(f"{seed}\x00{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")


def draw(key: int, counter: int) -> int:
    """The 64-bit value number ``counter`` of the stream with ``key``; pure function, no state."""
    return mix64((key + (counter + 1) * _GOLDEN) & _MASK)


def unit(key: int, counter: int) -> float:
    """A float in [0, 1) from draw ``counter`` of stream ``key`` (53 random bits)."""
    return (draw(key, counter) >> 11) / _TWO_53


class Stream:
    """A named random stream: each call consumes the next counter value.

    ``Stream(seed, "gm-3/choice")`` gives the same sequence in every process. Use ``child`` to derive
    sub-streams with stable names instead of sharing one stream between unrelated decisions.
    """

    __slots__ = ("seed", "name", "key", "counter")

    def __init__(self, seed: int, name: str) -> None:
        self.seed = seed
        self.name = name
        self.key = name_key(seed, name)
        self.counter = 0

    def child(self, name: str) -> "Stream":
        """A new stream named ``<self.name>/<name>`` under the same seed."""
        return Stream(self.seed, f"{self.name}/{name}")

    def bits64(self) -> int:
        """The next raw 64-bit value."""
        c = self.counter = self.counter + 1
        z = (self.key + c * _GOLDEN) & _MASK  # draw(key, c - 1) with mix64 inlined: every actor's hot draw
        z = ((z ^ (z >> 30)) * MIX1) & _MASK
        z = ((z ^ (z >> 27)) * MIX2) & _MASK
        return z ^ (z >> 31)

    def random(self) -> float:
        """A float in [0, 1)."""
        return (self.bits64() >> 11) / _TWO_53

    def randoms(self, n: int) -> np.ndarray:
        """The next ``n`` values of ``random()`` at once, as float64: the same numbers, in order (numpy's
        uint64 arithmetic wraps as ``& MASK`` does), for draws made by the thousand."""
        c = np.arange(self.counter + 1, self.counter + n + 1, dtype=np.uint64)
        self.counter += n
        z = np.uint64(self.key) + c * np.uint64(_GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(MIX2)
        z ^= z >> np.uint64(31)
        return (z >> np.uint64(11)).astype(np.float64) / _TWO_53

    def randrange(self, n: int) -> int:
        """An integer in [0, n), n >= 1 (multiply-shift; bias below 2**-40 for n < 2**24)."""
        if n <= 0:
            raise ValueError(f"randrange needs n >= 1, got {n}")
        return (self.bits64() * n) >> 64

    def uniform(self, lo: float, hi: float) -> float:
        """A float in [lo, hi)."""
        return lo + (hi - lo) * self.random()

    def choice(self, seq):
        """One element of a non-empty sequence."""
        return seq[self.randrange(len(seq))]

    def shuffle(self, items: list) -> None:
        """Shuffle a list in place (Fisher-Yates)."""
        for i in range(len(items) - 1, 0, -1):
            j = self.randrange(i + 1)
            items[i], items[j] = items[j], items[i]

    def sample(self, seq, k: int) -> list:
        """``k`` distinct elements of ``seq`` in random order."""
        pool = list(seq)
        if not 0 <= k <= len(pool):
            raise ValueError(f"sample size {k} out of range 0..{len(pool)}")
        for i in range(k):
            j = i + self.randrange(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def expovariate(self, mean: float) -> float:
        """An exponential variate with the given mean."""
        return -mean * math.log(1.0 - self.random())

    def lognormal(self, mu: float, sigma: float) -> float:
        """A lognormal variate exp(N(mu, sigma)) (Box-Muller, two draws)."""
        u1 = 1.0 - self.random()
        u2 = self.random()
        z = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        return math.exp(mu + sigma * z)

    def pick(self, table: "Weights") -> int:
        """An index i of the weights ``table`` was made from, with probability weights[i] / sum(weights): one
        draw scaled by the total, and the first positive weight whose running sum passes it, found by
        bisection (the last positive weight if rounding leaves the draw past them all)."""
        x = self.random() * table.total
        i = bisect_right(table.sums, x)
        return i if i < len(table.sums) else table.last

    def weighted_index(self, weights) -> int:
        """An index i with probability weights[i] / sum(weights); weights non-negative, sum > 0. One draw;
        ``pick`` on ``Weights(weights)``, which is made once where the same weights are drawn from often."""
        return self.pick(Weights(weights))


class Weights:
    """Weights made ready for draws (``Stream.pick``): their total and running sums, zero weights
    repeating the sum before them, so the first sum past a draw is at a positive weight."""

    __slots__ = ("sums", "total", "last")

    def __init__(self, weights) -> None:
        total = sum(weights)
        if total <= 0:
            raise ValueError("weighted_index needs a positive total weight")
        sums = array("d")  # 8 bytes a weight: a run may hold thousands of these
        acc = 0.0
        last = 0
        for i, w in enumerate(weights):
            if w > 0:
                acc += w
                last = i
            sums.append(acc)
        self.sums = sums
        self.total = total
        self.last = last
