"""The fabric's event queue: every pending entry, handed out in key order.

Entries are tuples whose first field is the virtual time and whose first five fields are unique (see
``kernel``). Rather than one binary heap, where every entry sifts through ~log2(n) others scattered
in memory, entries are kept in buckets of ``width`` microseconds: a push appends to its bucket, and a
bucket is sorted once, when it becomes the current one. Sorting touches each entry a few times in a
row (while it is in cache) and compares ints with the sort's fast path, so it costs less than the
heap, most of all with thousands of actors. The order handed out is exactly the heap's.

With ``width`` the network's minimum latency, a send lands in a later bucket, or in the current one
when the window it was sent in reached into that bucket (windows start anywhere, buckets at multiples
of the width). Entries pushed into the current bucket wait in ``late`` and are merged in by the next
``first``: one sort of two sorted runs per window rather than a sorted insert per entry (syn_1000 sends
a job's 1,000 launches at once, into buckets that hold thousands).
"""

from __future__ import annotations

from bisect import insort
from heapq import heappop, heappush

MERGE_BY_INSERT = 8  # late entries up to this many are inserted one by one; more are merged by a sort


class EventQueue:
    """Pending entries in key order: ``first()`` peeks, ``pop()`` takes, ``push(entry)`` adds.

    The kernel's delivery loop reads ``current`` from ``pos`` directly and writes ``pos`` back; the
    fast send path (``fastpath``) appends to an existing later bucket directly (``index``, ``buckets``)."""

    __slots__ = ("width", "current", "pos", "index", "buckets", "_order", "late")

    def __init__(self, width: int = 1) -> None:
        self.width = max(1, int(width))
        self.current: list = []  # the bucket being handed out, sorted; entries before ``pos`` are gone
        self.pos = 0
        self.index = -1  # bucket number of ``current``
        self.buckets: dict[int, list] = {}  # later buckets, unsorted
        self._order: list[int] = []  # heap of the numbers in ``buckets``
        self.late: list = []  # entries pushed into the current bucket since the last ``first``, unsorted

    def push(self, entry) -> None:
        b = entry[0] // self.width
        if b > self.index:
            bucket = self.buckets.get(b)
            if bucket is None:
                self.buckets[b] = [entry]
                heappush(self._order, b)
            else:
                bucket.append(entry)
        else:  # due within the bucket being handed out: merged in by the next ``first``
            self.late.append(entry)

    def entries(self) -> list:
        """Every pending entry, in no set order (an inspection: the run's end, a check, a test)."""
        out = self.current[self.pos:] + self.late
        for b in sorted(self.buckets):
            out.extend(self.buckets[b])
        return out

    def first(self):
        """The next entry, or None when there is none. The ``late`` entries are put in their places in
        the current bucket first: a few by sorted inserts (here: the kernel calls this once a window),
        many by ``_merge``."""
        late = self.late
        if late:
            if len(late) <= MERGE_BY_INSERT:
                current, pos = self.current, self.pos
                for entry in late:
                    insort(current, entry, lo=pos)
                late.clear()
            else:
                self._merge()
        if self.pos < len(self.current):
            return self.current[self.pos]
        return self.next_bucket()

    def _merge(self) -> None:
        """Many ``late`` entries: one sort of what is left of the current bucket and them (two sorted
        runs: a linear merge)."""
        late, self.late = self.late, []
        rest = self.current[self.pos:]
        late.sort()
        rest += late
        rest.sort()
        self.current = rest
        self.pos = 0

    def pop(self):
        entry = self.first()
        if entry is not None:
            self.pos += 1
        return entry

    def next_bucket(self):
        """Make the next non-empty bucket current (``current`` is used up); its first entry or None."""
        if self.late:  # pushed into the bucket being handed out (used up): they come next
            late, self.late = self.late, []
            late.sort()
            self.current = late
            self.pos = 0
            return late[0]
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
        entries = self.current[self.pos:] + self.late
        for b in self._order:
            entries.extend(self.buckets[b])
        self.__init__(width)
        for entry in entries:
            self.push(entry)

    def __len__(self) -> int:
        return len(self.current) - self.pos + len(self.late) + sum(len(self.buckets[b]) for b in self._order)

    def __bool__(self) -> bool:
        return self.pos < len(self.current) or bool(self.late) or bool(self._order)
