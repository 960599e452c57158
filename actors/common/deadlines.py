"""Many timeouts behind one fabric timer: overdue tracking for a protocol that needs many timeouts, without
an event per timeout.

An actor adds ``(due_us, key)`` pairs; one timer (carrying the owner's ``tick`` message) is armed for the
earliest, never sooner than ``quantum_us`` after the previous one, so a burst of timeouts costs one event and
a timeout fires at most ``quantum_us`` late. Entries are never removed early: the owner checks, when a key comes due, whether it
still matters (a request answered meanwhile is skipped), which keeps adding O(log n) and cancelling free.
"""

from __future__ import annotations

import heapq


class Deadlines:
    """The timeouts of one actor incarnation (``actor``: its Actor, whose timers carry ``tick``)."""

    __slots__ = ("actor", "quantum_us", "tick", "heap", "armed", "seq")

    def __init__(self, actor, quantum_us: int, tick) -> None:
        self.actor = actor
        self.quantum_us = quantum_us
        self.tick = tick
        self.heap: list = []  # (due_us, seq, key): seq keeps equal times in insertion order
        self.armed = -1  # when the pending tick fires (-1: none pending)
        self.seq = 0

    def __len__(self) -> int:
        return len(self.heap)

    def add(self, due_us: int, key) -> None:
        """Time out ``key`` at ``due_us`` (or up to ``quantum_us`` later)."""
        self.seq += 1
        heapq.heappush(self.heap, (due_us, self.seq, key))
        if self.armed < 0 or due_us + self.quantum_us < self.armed:
            self._arm(due_us)  # sooner than the pending tick by more than a quantum

    def due(self) -> list:
        """On a tick: the keys due by now, in due order; re-arms for the next one."""
        now = self.actor.now
        if now >= self.armed:
            self.armed = -1
        heap = self.heap
        out = []
        while heap and heap[0][0] <= now:
            out.append(heapq.heappop(heap)[2])
        if heap and self.armed < 0:
            self._arm(heap[0][0])
        return out

    def _arm(self, due_us: int) -> None:
        now = self.actor.now
        at = max(due_us, now + self.quantum_us)
        if 0 <= self.armed <= at:
            return
        self.armed = at
        self.actor.set_timer(at - now, self.tick)
