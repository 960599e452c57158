"""Least estimated waiting time: a centralized scheduler's view of the long work queued on each worker, and
the placement of a job's tasks on the workers whose queues will free first (Hawk 2015; Eagle 2016).

A worker's estimated waiting time is the estimated run time of the long tasks placed on it and not yet
finished, less what its running ones have already run (each at most its estimate), plus one round trip while
one runs (the Eagle authors' simulator: ``2 * NETWORK_DELAY + queue - min(executed, estimate)``).
``place`` puts each task in turn on the worker with the least waiting time, ties to the lowest position;
a worker's waiting time grows by the task's estimate as it gets one. When enough workers hold no long work
at all, the lowest such positions take one task each (as the simulator's shortcut, the same choice).
"""

from __future__ import annotations

import heapq


class WaitingView:
    """Per worker position: ``load`` (µs of estimated long work placed and not finished) and ``running``
    ({key: (start_us, estimate_us)} of its long tasks running). ``busy`` positions (load > 0) are the ones
    a bitmap of workers with long work would set."""

    def __init__(self, size: int, rtt_us: int = 0) -> None:
        self.load = [0] * size
        self.running: list[dict] = [{} for _ in range(size)]
        self.rtt_us = rtt_us
        self.busy_count = 0

    def __len__(self) -> int:
        return len(self.load)

    def wait_us(self, p: int, now_us: int) -> int:
        """The estimated waiting time of position ``p`` at ``now_us`` (never below 0)."""
        load = self.load[p]
        if not load:
            return 0
        running = self.running[p]
        if not running:
            return load
        ran = sum(min(now_us - start, est) for start, est in running.values())
        return max(0, self.rtt_us + load - ran)

    def add(self, p: int, estimate_us: int) -> None:
        """A long task of ``estimate_us`` was placed on ``p``."""
        if not self.load[p] and estimate_us > 0:
            self.busy_count += 1
        self.load[p] += estimate_us
        self.changed(p)

    def remove(self, p: int, estimate_us: int) -> None:
        """A long task of ``estimate_us`` left ``p`` (it ended, or its reservation was cancelled)."""
        before = self.load[p]
        self.load[p] = max(0, before - estimate_us)
        if before and not self.load[p]:
            self.busy_count -= 1
            self.running[p].clear()
        self.changed(p)

    def clear(self, p: int) -> None:
        """``p`` lost its long work (it crashed, or a break left its queue unknown)."""
        self.remove(p, self.load[p])
        self.running[p].clear()

    def started(self, p: int, key, now_us: int, estimate_us: int) -> None:
        self.running[p][key] = (now_us, estimate_us)

    def finished(self, p: int, key, estimate_us: int) -> None:
        self.running[p].pop(key, None)
        self.remove(p, estimate_us)

    def changed(self, p: int) -> None:
        """Hook: ``p``'s load changed (a bitmap kept beside the view follows it)."""

    def place(self, count: int, estimate_us: int, positions, now_us: int) -> list[int]:
        """Positions for ``count`` tasks of ``estimate_us`` each among ``positions`` (ascending, not empty), each
        task on the least waiting one; adds them to the view."""
        load = self.load
        empty = []
        for p in positions:
            if not load[p]:
                empty.append(p)
                if len(empty) == count:
                    break
        if len(empty) == count:
            out = empty
        else:
            heap = [(self.wait_us(p, now_us), p) for p in positions]
            heapq.heapify(heap)
            out = []
            for _ in range(count):
                wait, p = heap[0]
                out.append(p)
                heapq.heapreplace(heap, (wait + estimate_us, p))
        for p in out:
            self.add(p, estimate_us)
        return out
