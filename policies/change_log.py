"""An LM's delta updates: which workers changed since each GM last heard, minus what that GM caused.

Megha 2023 paper (shared/papers file 000), 4.4: an LM no longer sends GMs snapshots of its whole
cluster, only what changed since the GM's last status update, kept separately per GM; and it leaves
out resources freed by the GM's own tasks, which reach that GM through task-completion messages.

Our reading (where the paper is silent): every change appends the worker to one shared log and
notes its cause (the GM whose launch or task changed it). Each GM has a cursor into the log; a delta
is the workers after the cursor, each once, in order of first change, with their current free
values. A worker whose latest change that GM caused (its own launch, or the completion of its own
task) is left out: the GM already knows it. A failed launch's reply is a delta too, and always
carries the worker the launch named. The log is trimmed to the lowest cursor after each heartbeat.
"""

from __future__ import annotations

from itertools import compress

NO_CAUSE = -1


class ChangeLog:
    """Changes of one LM's workers, one cursor per GM, and each worker's latest cause."""

    def __init__(self, free: list, num_gms: int) -> None:
        """``free``: the LM's live free vectors, one list per worker, read whenever a delta is cut."""
        self.free = free
        self.cause = [NO_CAUSE] * len(free)
        self.changes: list[int] = []
        self.base = 0  # log position of changes[0] (positions before it were trimmed)
        self.cursor = [0] * num_gms  # log position each GM has heard up to

    def __len__(self) -> int:
        """Changes kept (not yet trimmed)."""
        return len(self.changes)

    def record(self, worker: int, cause: int) -> None:
        """Worker ``worker`` changed because of GM ``cause`` (its launch or its task's end)."""
        self.cause[worker] = cause
        self.changes.append(worker)

    def since(self, gm: int, always: int = -1) -> tuple[tuple, tuple]:
        """(workers, free tuples) changed since ``gm``'s cursor, minus those ``gm`` caused; moves the
        cursor. ``always`` (a worker index) is included in any case: the worker of a failed launch."""
        start = self.cursor[gm] - self.base
        changed = dict.fromkeys(self.changes[start:])
        self.cursor[gm] = self.base + len(self.changes)
        cause = self.cause
        workers = [w for w in changed if cause[w] != gm]
        if always >= 0 and (always not in changed or cause[always] == gm):
            workers.append(always)
        free = self.free
        return tuple(workers), tuple(tuple(free[w]) for w in workers)

    def deltas(self) -> list[tuple[int, tuple, tuple]]:
        """(gm, workers, free tuples) for every GM with something new (a heartbeat); moves every cursor
        and trims. GMs whose cursors agree (all, unless a failure reply moved one) share one pass
        over the log and one snapshot of the changed workers' values."""
        end = self.base + len(self.changes)
        cause, free, changes, base = self.cause, self.free, self.changes, self.base
        shared: dict[int, tuple] = {}  # cursor -> (workers changed since, their free tuples, causes)
        out = []
        for gm, start in enumerate(self.cursor):
            changed = shared.get(start)
            if changed is None:
                ws = tuple(dict.fromkeys(changes[start - base:]))
                changed = shared[start] = (ws, tuple([tuple(free[w]) for w in ws]), [cause[w] for w in ws])
            ws, fs, causes = changed
            keep = list(map(gm.__ne__, causes))
            workers = tuple(compress(ws, keep))
            if workers:
                out.append((gm, workers, tuple(compress(fs, keep))))
        self.cursor = [end] * len(self.cursor)
        self.trim()
        return out

    def trim(self) -> None:
        """Drop the changes every GM has heard."""
        low = min(self.cursor)
        if low > self.base:
            del self.changes[: low - self.base]
            self.base = low
