"""Fair tie-breaking: messages due at one time reach a receiver in a seeded order of their senders.

A message's queue key is ``(time, RANK_MESSAGE + tie, sender, seq, copy)`` (RANK_MESSAGE is 0) with
``tie = (time + 1) * k & TIE_MASK``: ``k`` is the sender's key, drawn once per run from the seed and
the sender's name (``rand.name_key``, blake2b). At one time the senders' ties are ``k * (time + 1)``
modulo 2^30, a multiplicative (Weyl) sequence per sender: the order of the senders is a different
permutation from one time to the next, and over many times each comes first about equally often
(measured: 10 senders, 100,000 times spaced 1 us, 500 us, 10 s or 30 s apart, each first in 9.8-10.3%
of them). So no actor wins races by its number, while the order stays a pure function of (seed, time,
sender name): runs are deterministic and ``replay --verify`` holds. One sender's messages share a tie
and keep their ``seq`` order.

Cost: the fast path inlines ``tie`` (an add, a multiply and a mask: about a quarter of the splitmix64
finalizer in CPython), and 30 bits keep every tie a one-digit CPython int, as cheap to store and
compare as the sender id it replaces. The price of 30 bits: when 2^s divides time + 1, only 30 - s
bits order the senders, and at the one microsecond in every 2^30 (about 17.9 minutes) where time + 1
is a multiple of 2^30 every tie is 0 and the order falls back to sender id.

``ties=sender`` gives every sender key 0: every tie is 0 and the order is the older
``(time, rank, sender, seq)``, lowest sender id first (digests as before the seeded order).
Faults (rank -1, before every message) and timers (rank 2^30, after them; one receiver each) carry no tie.
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
