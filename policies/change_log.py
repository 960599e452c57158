"""An LM's delta updates: which workers changed since each GM last heard, minus what that GM caused.

Megha 2023, 4.4: an LM no longer sends GMs snapshots of its whole
cluster, only what changed since the GM's last status update, kept separately per GM; and it leaves
out resources freed by the GM's own tasks, which reach that GM through task-completion messages.

Our reading (where the paper is silent): every change appends the worker to one shared log and
notes its cause (the GM whose launch or task changed it). A delta is the workers changed since the
last one sent to that GM, each once, in order of first change, with their current free values. A
worker whose latest change that GM caused (its own launch, or the completion of its own task) is left
out: the GM already knows it. A failed launch's reply is a delta too (it moves nothing) and always
carries the worker the launch named.

Loss (our scheme, cheaper than acknowledging every heartbeat): each delta names the log position of
the previous one sent to that GM (``prev``) and its own (``upto``), so the GM sees a gap when one was
lost and asks for a snapshot. The last delta of a burst has no successor to reveal its loss, so after
``BEACON_AFTER`` ticks with nothing new for that GM the LM sends it a beacon (an empty delta,
``prev == upto``) each tick until the GM acknowledges it (``ack``). Waiting a few ticks means a pause
shorter than that is not a burst's end: fewer beacons. Three positions per GM: ``sent`` (log read up to), ``told`` (``upto`` of
the last delta sent), ``cursor`` (confirmed by the GM: the log is trimmed to the lowest one, and
``unsent`` is what lies past it). A busy LM sends a delta every tick and needs no acknowledgement.
"""

from __future__ import annotations

from itertools import compress

NO_CAUSE = -1
BEACON_AFTER = 3  # ticks with nothing new for a GM before its last delta is confirmed by a beacon


class ChangeLog:
    """Changes of one LM's workers, three positions per GM, and each worker's latest cause."""

    def __init__(self, free: list, num_gms: int) -> None:
        """``free``: the LM's live free vectors, one list per worker, read whenever a delta is cut."""
        self.free = free
        self.cause = [NO_CAUSE] * len(free)
        self.changes: list[int] = []
        self.base = 0  # log position of changes[0] (positions before it were trimmed)
        self.cursor = [0] * num_gms  # log position each GM confirmed hearing
        self.sent = [0] * num_gms  # log position each GM's deltas were cut up to
        self.told = [0] * num_gms  # ``upto`` of the last delta (or snapshot) sent to each GM
        self.idle = [0] * num_gms  # ticks since the last delta sent to each GM
        self.replied = [0] * num_gms  # log position each GM's last launch reply was cut up to

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
        self.changes.append(worker)

    def since(self, gm: int, always: int = -1) -> tuple[tuple, tuple]:
        """(workers, free tuples) changed since the last delta sent to ``gm``, minus those ``gm`` caused
        (nothing moves). ``always`` (a worker index) is included in any case."""
        changed = dict.fromkeys(self.changes[self.sent[gm] - self.base:])
        cause = self.cause
        workers = [w for w in changed if cause[w] != gm]
        if always >= 0 and (always not in changed or cause[always] == gm):
            workers.append(always)
        return tuple(workers), tuple(map(tuple, map(self.free.__getitem__, workers)))

    def unsent(self, gm: int) -> set[int]:
        """Workers changed past ``gm``'s confirmed cursor (what it may not know, own changes included)."""
        return set(self.changes[self.cursor[gm] - self.base:])

    def pending(self) -> bool:
        """Some GM has not confirmed every change."""
        end = self.end
        return any(c < end for c in self.cursor)

    def fresh(self, gm: int) -> tuple[tuple, tuple]:
        """(workers, free tuples) for a launch reply to ``gm``: changed since its last delta or launch
        reply, whichever is later, minus those it caused. Nothing moves but the reply position: the next
        delta still carries them (values are absolute), so a lost reply loses nothing."""
        start = max(self.sent[gm], self.replied[gm])
        self.replied[gm] = self.end
        cause = self.cause
        workers = tuple([w for w in dict.fromkeys(self.changes[start - self.base:]) if cause[w] != gm])
        return workers, tuple(map(tuple, map(self.free.__getitem__, workers)))

    def deltas(self) -> list[tuple[int, tuple, tuple, int, int]]:
        """(gm, workers, free tuples, prev, upto) for every GM with something new (a heartbeat), and a
        beacon (no workers, prev == upto) for every GM whose last delta is unconfirmed and was sent
        ``BEACON_AFTER`` ticks ago or more.
        A GM whose new changes are all its own is sent nothing. GMs whose positions agree share one
        pass over the log and one snapshot of the values."""
        end = self.end
        cause, free, changes, base = self.cause, self.free, self.changes, self.base
        shared: dict[int, tuple] = {}  # position -> (workers changed since, their free tuples, causes)
        out = []
        for gm, start in enumerate(self.sent):
            workers = ()
            if start < end:
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
                    out.append((gm, workers, tuple(compress(fs, keep)), self.told[gm], end))
                    self.told[gm] = end
                    self.idle[gm] = 0
                    continue
            told = self.told[gm]
            if self.cursor[gm] >= told:  # everything told is confirmed; the rest was its own
                self.cursor[gm] = self.sent[gm]
            else:
                self.idle[gm] += 1
                if self.idle[gm] >= BEACON_AFTER:
                    out.append((gm, (), (), told, told))
        self.trim()
        return out

    def ack(self, gm: int, upto: int) -> None:
        """GM ``gm`` confirms it heard every delta up to position ``upto`` (a beacon's)."""
        if upto == self.told[gm] and self.cursor[gm] < upto:
            self.cursor[gm] = self.sent[gm]  # what was not told since was its own
            self.trim()

    def reset(self, gm: int) -> None:
        """GM ``gm`` is being sent the whole state (a snapshot): it has heard everything."""
        self.cursor[gm] = self.sent[gm] = self.told[gm] = self.end
        self.trim()

    def trim(self) -> None:
        """Drop the changes every GM has confirmed."""
        low = min(self.cursor)
        if low > self.base:
            del self.changes[: low - self.base]
            self.base = low
