"""An LM's delta updates: which workers changed since each GM last heard, minus what that GM caused.

Megha 2023, 4.4: an LM no longer sends GMs snapshots of its whole
cluster, only what changed since the GM's last status update, kept separately per GM; and it leaves
out resources freed by the GM's own tasks, which reach that GM through task-completion messages.

Our reading (where the paper is silent): every change appends the worker to one shared log and
notes its cause (the GM whose launch or task changed it). A status update to a GM (a heartbeat, or
the reply to its launch) carries the workers changed since the last one sent to that GM, each once,
in order of first change, with their current free values, and moves that GM's position to the end of
the log. A worker whose latest change that GM caused (its own launch, or the completion of its own
task) is left out: the GM already knows it. A failed launch's reply always carries the worker the
launch named.

Updates travel on connections (docs/connections.md): none is lost while the connection is up, so no
update is acknowledged or repeated; one lost with a broken connection is made good by a snapshot the
GM asks for (``reset``). The log is trimmed to the lowest position once every GM's heartbeat is cut.
"""

from __future__ import annotations

from itertools import compress

NO_CAUSE = -1


class ChangeLog:
    """Changes of one LM's workers, one position per GM, and each worker's latest cause and position."""

    def __init__(self, free: list, num_gms: int) -> None:
        """``free``: the LM's live free vectors, one list per worker, read whenever a delta is cut."""
        self.free = free
        self.cause = [NO_CAUSE] * len(free)
        self.at = [-1] * len(free)  # the log position of each worker's latest change
        self.changes: list[int] = []
        self.base = 0  # log position of changes[0] (positions before it were trimmed)
        self.sent = [0] * num_gms  # log position each GM's last status update was cut at

    def __len__(self) -> int:
        """Changes kept (not yet trimmed)."""
        return len(self.changes)

    @property
    def end(self) -> int:
        """The log position after the latest change."""
        return self.base + len(self.changes)

    def record(self, worker: int, cause: int) -> None:
        """Worker ``worker`` changed because of GM ``cause`` (its launch or its task's end)."""
        self.cause[worker] = cause
        self.at[worker] = self.base + len(self.changes)
        self.changes.append(worker)

    def since(self, gm: int, always: int = -1) -> tuple[tuple, tuple]:
        """A launch reply's delta: (workers, free tuples) changed since the last update sent to ``gm``,
        minus those ``gm`` caused; ``always`` (a worker index) is included in any case. Moves ``gm``'s
        position: the next heartbeat carries only what changes after it."""
        changed = dict.fromkeys(self.changes[self.sent[gm] - self.base:])
        self.sent[gm] = self.end
        cause = self.cause
        workers = [w for w in changed if cause[w] != gm]
        if always >= 0 and (always not in changed or cause[always] == gm):
            workers.append(always)
        return tuple(workers), tuple(map(tuple, map(self.free.__getitem__, workers)))

    def pending(self) -> bool:
        """Some GM has changes not yet cut into an update (a heartbeat is due)."""
        end = self.end
        return any(s < end for s in self.sent)

    def deltas(self) -> list[tuple[int, tuple, tuple, int]]:
        """(gm, workers, free tuples, upto) for every GM with something new it did not cause (a
        heartbeat: ``upto`` is the log position it is cut at); moves every position and trims. A GM
        whose new changes are all its own is sent nothing. GMs whose positions agree (all, unless a
        launch reply moved one) share one pass over the log and one snapshot of the values."""
        end = self.end
        cause, free, changes, base = self.cause, self.free, self.changes, self.base
        shared: dict[int, tuple] = {}  # position -> (workers changed since, their free tuples, causes)
        out = []
        for gm, start in enumerate(self.sent):
            if start >= end:
                continue
            changed = shared.get(start)
            if changed is None:
                ws = tuple(dict.fromkeys(changes[start - base:]))
                changed = shared[start] = (ws, tuple(map(tuple, map(free.__getitem__, ws))),
                                           list(map(cause.__getitem__, ws)))
            ws, fs, causes = changed
            keep = list(map(gm.__ne__, causes))
            workers = tuple(compress(ws, keep))
            self.sent[gm] = end
            if workers:
                out.append((gm, workers, tuple(compress(fs, keep)), end))
        self.trim()
        return out

    def reset(self, gm: int) -> None:
        """GM ``gm`` is being sent the whole state (a snapshot): it has heard everything."""
        self.sent[gm] = self.end
        self.trim()

    def unheard(self, gm: int, heard: int) -> set[int]:
        """Workers ``gm`` may not know yet if the last update it took was cut at log position ``heard``:
        those whose latest change came at or after it, not caused by ``gm`` (what it caused it learns
        from its own launch or its task's completion)."""
        cause, at = self.cause, self.at
        return {w for w in range(len(at)) if at[w] >= heard and cause[w] != gm}

    def trim(self) -> None:
        """Drop the changes every GM has been sent."""
        low = min(self.sent)
        if low > self.base:
            del self.changes[: low - self.base]
            self.base = low
