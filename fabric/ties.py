"""Fair tie-breaking: messages due at one time reach a receiver in a seeded order of their senders.

A message's queue key is ``(time, RANK_MESSAGE | tie, sender, seq, copy)`` with
``tie = (time + 1) * k & TIE_MASK``: ``k`` is the sender's key, drawn once per run from the seed and
the sender's name. For one time the ties of different senders are ``frac(k * (time + 1) / 2**62)``
scaled up: a different permutation of the senders at each time, and over many times (Weyl's
equidistribution theorem, for keys drawn at random) every sender comes first equally often, whatever
the spacing of the times. So no actor wins races by its number, while the order stays a pure function
of (seed, time, sender): runs are deterministic and ``replay --verify`` holds. One sender's messages
share a tie and keep their ``seq`` order. A multiply-and-mask is about a quarter of the cost of a
splitmix64 round in CPython, and the send path is the fabric's hottest.

``ties=sender`` gives every sender key 0: every tie is 0 and the order is the older
``(time, rank, sender, seq)``, lowest sender id first (digests as before the seeded order).
Faults (rank 0) and timers (rank 2, one receiver each) carry no tie.
"""

from __future__ import annotations

from . import rand
from .actor import TIE_BITS
from .errors import unknown_name

TIE_MASK = (1 << TIE_BITS) - 1
TIE_ORDERS = ("seeded", "sender")  # the fabric's ``ties`` option; the first is the default


def check(order: str) -> str:
    """``order`` if it is a known tie order, else the one-line ConfigError naming the known ones."""
    if order not in TIE_ORDERS:
        raise unknown_name("ties", order, TIE_ORDERS)
    return order


def sender_key(seed: int, name: str, order: str = "seeded") -> int:
    """The tie key of the actor called ``name`` (``outside`` for injected messages); 0 under ``sender``."""
    return rand.name_key(seed, f"tie/{name}") & TIE_MASK if order == "seeded" else 0


def tie(key: int, at: int) -> int:
    """The tie of a message from the sender with ``key`` due at ``at`` (the fast path inlines it)."""
    return (at + 1) * key & TIE_MASK
