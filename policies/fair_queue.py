"""Weighted fair queuing of two task classes (a Pigeon master's queues): one LOW per W HIGH while LOW waits.

A Megha GM's task queue is the same structure with one class: tasks keyed by (constraints, demand),
the oldest signature that ``PartitionSearch.find`` places served first.

Choices where the papers are silent:
- "One low-priority task for every W high-priority tasks while the low queue is non-empty" (our reading
  of the Megha 2023 paper, 4.2: "one task from a long job for every FQW number
  of tasks from short jobs"): a streak counts HIGH serves made while LOW holds items; once it reaches W
  the next serve prefers LOW; any LOW serve resets it. HIGH serves while LOW is empty do not count, so a LOW item
  arriving later waits for W fresh HIGH serves. W = ``math.inf`` is strict priority.
- The preference is an order, not a veto: when the preferred class has nothing to serve, the other one
  is served (work conserving; PigeonC's "long tasks that fit idle workers no short task matches").
- Items carry a key (a task's (constraints, demand)); within a class the oldest item whose key the caller
  accepts is served. With a single key per class this is plain FIFO (Pigeon). A key the caller rejects
  is parked until ``reopen`` (the end of the caller's dispatch pass), so a pass costs O(keys), not
  O(items).
- Megha's GM knobs: a ``ranked`` queue serves a lower ``rank`` first (FIFO among equal ranks; the GM's
  ``gm_queue=fewest-remaining`` ranks a task by its job's tasks not yet done when it is queued), and
  ``push_front`` puts an item ahead of every other of its class (``failed_launch=front``).
"""

from __future__ import annotations

import math
from collections import deque
from heapq import heapify, heappop, heappush, heapreplace

from fedemu.fabric.errors import ConfigError

HIGH = 0
LOW = 1
CLASS_NAMES = ("high", "low")
RANK_SHIFT = 40  # a ranked item's position: rank << RANK_SHIFT + its push number (fewer than 2^40 pushes)


def check_weight(weight) -> float | int:
    """``weight`` if it is an integer >= 1 or ``math.inf``; otherwise a ConfigError."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        raise ConfigError(f"fair queue weight is {weight!r}; expected an integer >= 1 or inf")
    if isinstance(weight, float):
        if math.isinf(weight) and weight > 0:
            return math.inf
        if not weight.is_integer():
            raise ConfigError(f"fair queue weight is {weight!r}; expected an integer >= 1 or inf")
        weight = int(weight)
    if weight < 1:
        raise ConfigError(f"fair queue weight is {weight!r}; expected an integer >= 1 or inf")
    return weight


class FairQueue:
    """Two classes (HIGH, LOW) of keyed FIFO items served by weighted fair queuing with weight W.

    Each item has a position (its push number, below every pushed one for ``push_front``, and its
    rank above the push number in a ``ranked`` queue); a class serves the accepted item of least
    position. Per key the items wait in a deque (a heap when ``ranked``)."""

    def __init__(self, weight, ranked: bool = False) -> None:
        self.weight = check_weight(weight)
        self.ranked = ranked
        self._front = 0  # positions of push_front, going down from 0
        self.streak = 0  # HIGH serves since the last LOW serve, counted while LOW held items
        self.served = [0, 0]
        self.rejected = 0  # keys parked because the caller rejected them (Megha counts "reschedules")
        self.sizes = [0, 0]  # items waiting per class (read only; a list, so hot callers skip a call)
        self._seq = 0
        self._items: tuple[dict, dict] = ({}, {})  # per class: key -> deque of (seq, item)
        self._heads: tuple[list, list] = ([], [])  # per class: heap of (seq of the key's oldest item, key)
        self._parked: tuple[list, list] = ([], [])  # per class: heads of keys rejected in this pass

    def __len__(self) -> int:
        return self.sizes[HIGH] + self.sizes[LOW]

    def stamp(self) -> tuple[int, int]:
        """Changes whenever an item is queued (``push`` or ``push_front``): a caller that found nothing to
        serve can tell whether anything new came since."""
        return self._seq, self._front

    def size(self, cls: int) -> int:
        """Items waiting in class ``cls``."""
        return self.sizes[cls]

    def keys(self, cls: int) -> int:
        """Distinct keys with items waiting in class ``cls``."""
        return len(self._items[cls])

    def push(self, cls: int, item, key=None, rank: int = 0) -> None:
        """Append ``item`` to class ``cls`` under ``key`` (any hashable; None groups everything);
        a ``ranked`` queue serves it after the items of lower ``rank`` (a whole number >= 0)."""
        self._seq += 1
        if not self.ranked:
            items = self._items[cls]
            q = items.get(key)
            if q is None:
                q = items[key] = deque()
                heappush(self._heads[cls], (self._seq, key))
            q.append((self._seq, item))
            self.sizes[cls] += 1
            return
        self._insert(cls, key, (rank << RANK_SHIFT) + self._seq, item)

    def push_front(self, cls: int, item, key=None) -> None:
        """Put ``item`` ahead of every item of class ``cls`` (ahead of the earlier ``push_front`` ones too)."""
        self._front -= 1
        self._insert(cls, key, self._front, item)

    def _insert(self, cls: int, key, pos: int, item) -> None:
        """Add ``item`` at position ``pos``; when it becomes its key's head, the key's entry moves."""
        items = self._items[cls]
        q = items.get(key)
        self.sizes[cls] += 1
        if q is None:
            items[key] = [(pos, item)] if self.ranked else deque([(pos, item)])
            heappush(self._heads[cls], (pos, key))
            return
        old = q[0][0]
        if self.ranked:
            heappush(q, (pos, item))
        elif pos < old:
            q.appendleft((pos, item))
        else:
            q.append((pos, item))
        if pos < old:  # the key's head is now this item: move its entry (wherever it waits)
            for entries in (self._heads[cls], self._parked[cls]):
                for i, entry in enumerate(entries):
                    if entry[1] == key and entry[0] == old:
                        entries[i] = (pos, key)
                        if entries is self._heads[cls]:
                            heapify(entries)
                        return

    def low_due(self) -> bool:
        """Whether the next serve should come from LOW (it waits and HIGH has had its W)."""
        return self.sizes[LOW] > 0 and self.streak >= self.weight

    def order(self) -> tuple[int, int]:
        """The classes in the order the next serve should try them."""
        return (LOW, HIGH) if self.low_due() else (HIGH, LOW)

    def take(self, cls: int, accept=None):
        """Remove the oldest item of ``cls`` whose key ``accept(key)`` does not map to None.

        Returns ``(item, accept(key))`` (``(item, True)`` without ``accept``) and counts the serve, or
        None when no key of the class is accepted. Rejected keys stay parked until ``reopen``.
        """
        heads = self._heads[cls]
        placement = True
        if accept is not None:  # a refused key is parked (most of a busy pass's offers are refusals)
            park = self._parked[cls].append
            refused = 0
            while heads:
                placement = accept(heads[0][1])
                if placement is not None:
                    break
                park(heappop(heads))
                refused += 1
            self.rejected += refused
        if not heads:
            return None
        key = heads[0][1]
        items = self._items[cls]
        q = items[key]
        item = (heappop(q) if self.ranked else q.popleft())[1]
        if q:
            heapreplace(heads, (q[0][0], key))
        else:
            heappop(heads)
            del items[key]
        sizes = self.sizes
        sizes[cls] -= 1
        self.served[cls] += 1
        if cls == LOW:
            self.streak = 0
        elif sizes[LOW]:
            self.streak += 1
        return item, placement

    def reopen(self, refused=None) -> None:
        """Make parked keys eligible again (call when what callers accept may have changed). With
        ``refused``, the keys for which ``refused(key)`` is true stay parked: the caller knows it would
        refuse them again (so a pass skips them, in the same order as if it had offered them)."""
        for cls in (HIGH, LOW):
            parked = self._parked[cls]
            if parked:  # one heapify, not a push each (a pass parks every signature it cannot place)
                heads = self._heads[cls]
                if refused is None:
                    heads.extend(parked)
                    parked.clear()
                else:
                    kept = []
                    for entry in parked:
                        (kept if refused(entry[1]) else heads).append(entry)
                    parked[:] = kept
                heapify(heads)

    def pop(self, accept=None):
        """One WFQ step: ``(cls, item, placement)`` from the due class first, else the other; or None."""
        for cls in self.order():
            got = self.take(cls, accept)
            if got is not None:
                return cls, got[0], got[1]
        return None
