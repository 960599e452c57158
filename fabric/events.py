"""The fabric's event queue: every pending entry, handed out in key order.

Entries are tuples whose first field is the virtual time and whose first five fields are unique (see
``kernel``). Rather than one binary heap, where every entry sifts through ~log2(n) others scattered
in memory, entries are kept in buckets of ``width`` microseconds: a push appends to its bucket, and a
bucket is sorted once, when it becomes the current one. Sorting touches each entry a few times in a
row (while it is in cache) and compares ints with the sort's fast path, so it costs less than the
heap, most of all with thousands of actors. The order handed out is exactly the heap's.

With ``width`` at most the network's minimum latency, a send always lands in a later bucket; only a
timer or a fault can land in the current one, and is inserted in place.
"""

from __future__ import annotations

from bisect import insort
from heapq import heappop, heappush


class EventQueue:
    """Pending entries in key order: ``first()`` peeks, ``pop()`` takes, ``push(entry)`` adds.

    The kernel's delivery loop reads ``current`` from ``pos`` directly and writes ``pos`` back; the
    fast send path (``fastpath``) appends to an existing later bucket directly (``index``, ``buckets``)."""

    __slots__ = ("width", "current", "pos", "index", "buckets", "_order")

    def __init__(self, width: int = 1) -> None:
        self.width = max(1, int(width))
        self.current: list = []  # the bucket being handed out, sorted; entries before ``pos`` are gone
        self.pos = 0
        self.index = -1  # bucket number of ``current``
        self.buckets: dict[int, list] = {}  # later buckets, unsorted
        self._order: list[int] = []  # heap of the numbers in ``buckets``

    def push(self, entry) -> None:
        b = entry[0] // self.width
        if b > self.index:
            bucket = self.buckets.get(b)
            if bucket is None:
                self.buckets[b] = [entry]
                heappush(self._order, b)
            else:
                bucket.append(entry)
        else:  # due within the bucket being handed out (a timer or a fault)
            insort(self.current, entry, lo=self.pos)

    def first(self):
        """The next entry, or None when there is none."""
        if self.pos < len(self.current):
            return self.current[self.pos]
        return self.next_bucket()

    def pop(self):
        entry = self.first()
        if entry is not None:
            self.pos += 1
        return entry

    def next_bucket(self):
        """Make the next non-empty bucket current (``current`` is used up); its first entry or None."""
        if not self._order:
            return None
        b = heappop(self._order)
        bucket = self.buckets.pop(b)
        bucket.sort()
        self.current = bucket
        self.pos = 0
        self.index = b
        return bucket[0]

    def rebucket(self, width: int) -> None:
        """Use buckets ``width`` wide from now on (the entries are re-filed)."""
        entries = self.current[self.pos:]
        for b in self._order:
            entries.extend(self.buckets[b])
        self.__init__(width)
        for entry in entries:
            self.push(entry)

    def __len__(self) -> int:
        return len(self.current) - self.pos + sum(len(self.buckets[b]) for b in self._order)

    def __bool__(self) -> bool:
        return self.pos < len(self.current) or bool(self._order)
