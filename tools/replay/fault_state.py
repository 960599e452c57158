"""The faults in force at a point of a run, followed from the journal's fault records: actors down,
partitions, lossy, duplicating and slow links. A diagram that starts mid-run says what holds then."""

from __future__ import annotations

from collections import Counter

import attrs

from fedemu.fabric.replay import name_ranges

from .timeline import Break, FaultEvent


def _link(target: tuple) -> str:
    return "every link" if tuple(target) == ("*",) else f"{target[0]}<->{target[1]}"


def _side(side) -> str:
    return "{" + ", ".join(side) + "}"


def describe(fault: FaultEvent) -> str:
    """One line for a fault as it is applied, e.g. ``partition {gm-0} | {lm-1}``, ``loss 0.3 on
    gm-0<->lm-1``, ``loss ends on every link``."""
    kind, target, value = fault.kind, fault.target, fault.value
    if kind in ("crash", "restart"):
        return f"{kind} {target[0]}"
    if kind == "partition":
        return f"partition {_side(target[0])} | {_side(target[1])}"
    if kind == "heal":
        return "heal: every partition ends"
    if kind == "restore":
        return f"restore: latency back to normal on {_link(target)}"
    if kind in ("loss", "dup") and value == 0:
        return f"{kind} ends on {_link(target)}"
    if kind == "slow":
        return f"slow x{value:g} on {_link(target)}"
    return f"{kind} {value:g} on {_link(target)}"


class FaultState:
    """What the faults applied so far leave in force (the network's rules, ``fabric.network.apply``)."""

    def __init__(self) -> None:
        self.down: dict[str, int] = {}  # actor -> crashed at
        self.partitions: list[tuple] = []
        self.links: dict[tuple[str, tuple], float] = {}  # (kind, link) -> value, for loss, dup, slow

    def apply(self, fault: FaultEvent) -> None:
        kind, target = fault.kind, tuple(fault.target)
        if kind in ("slow", "restore", "loss", "dup") and target != ("*",):
            target = tuple(sorted(target))  # a link acts both ways
        if kind == "crash":
            self.down.setdefault(target[0], fault.at_us)
        elif kind == "restart":
            self.down.pop(target[0], None)
        elif kind == "partition":
            self.partitions.append(target)
        elif kind == "heal":
            self.partitions.clear()
        elif kind == "restore":
            for key in [k for k in self.links if k[0] == "slow" and (target == ("*",) or k[1] == target)]:
                del self.links[key]
        elif target == ("*",):  # loss or dup on every link replaces the per-link ones
            for key in [k for k in self.links if k[0] == kind]:
                del self.links[key]
            self._set(kind, target, fault.value)
        else:
            self._set(kind, target, fault.value)

    def _set(self, kind: str, target: tuple, value: float) -> None:
        if value == 0 and kind in ("loss", "dup"):
            self.links.pop((kind, target), None)
        else:
            self.links[(kind, target)] = value

    def lines(self, names=None) -> list[str]:
        """What holds now, one line each, in a fixed order (empty: nothing); ``names`` given, only what
        concerns those actors or every link."""
        def shown(*actors) -> bool:
            return names is None or "*" in actors or bool(set(actors) & names)

        out = [f"{name} down since {at / 1e6:.6f} s" for name, at in sorted(self.down.items()) if shown(name)]
        out += [f"partition {_side(a)} | {_side(b)}" for a, b in self.partitions if shown(*a, *b)]
        for (kind, target), value in sorted(self.links.items(), key=repr):
            if shown(*target):
                out.append(f"slow x{value:g} on {_link(target)}" if kind == "slow" else
                           f"{kind} {value:g} on {_link(target)}")
        return out


@attrs.frozen
class Window:
    """A span while a fault holds: an actor ``down``, a ``partition``, a lossy, duplicating or ``slow``
    link. ``opened``/``closed`` are the fault records that began and ended it (None: it held already
    where the span of interest starts, or still holds where it ends)."""

    kind: str
    label: str
    actors: tuple[str, ...]  # the actors it concerns; ("*",) every link
    start_us: int
    end_us: int
    opened: int | None
    closed: int | None


def windows(state: "FaultState | None", faults, start_us: int, end_us: int) -> list[Window]:
    """The fault windows over [start_us, end_us]: those in force in ``state`` at the start, then those the
    ``faults`` (in time order) open and close; in the order they close."""
    open_: dict = {}  # key -> (kind, label, actors, start, opened)
    out: list[Window] = []

    def close(key, at, index):
        kind, label, actors, start, opened = open_.pop(key)
        out.append(Window(kind, label, actors, start, at, opened, index))

    if state is not None:
        for name in sorted(state.down):
            open_[("down", name)] = ("down", f"{name} down", (name,), start_us, None)
        for n, (a, b) in enumerate(state.partitions):
            open_[("partition", -1 - n)] = ("partition", f"partition {_side(a)} | {_side(b)}", (*a, *b), start_us, None)
        for (kind, link), value in sorted(state.links.items(), key=repr):
            label = f"slow x{value:g} on {_link(link)}" if kind == "slow" else f"{kind} {value:g} on {_link(link)}"
            open_[(kind, link)] = (kind, label, tuple(link), start_us, None)
    for f in faults:
        kind, target = f.kind, tuple(f.target)
        link = target if target == ("*",) or kind not in ("slow", "restore", "loss", "dup") else tuple(sorted(target))
        if kind == "crash" and ("down", target[0]) not in open_:
            open_[("down", target[0])] = ("down", f"{target[0]} down", target, f.at_us, f.index)
        elif kind == "restart" and ("down", target[0]) in open_:
            close(("down", target[0]), f.at_us, f.index)
        elif kind == "partition":
            open_[("partition", f.index)] = ("partition", describe(f), (*target[0], *target[1]), f.at_us, f.index)
        elif kind == "heal":
            for key in [k for k in open_ if k[0] == "partition"]:
                close(key, f.at_us, f.index)
        elif kind == "restore":
            for key in [k for k in open_ if k[0] == "slow" and (link == ("*",) or k[1] == link)]:
                close(key, f.at_us, f.index)
        elif kind in ("slow", "loss", "dup"):
            for key in [k for k in open_ if k[0] == kind and (link == ("*",) or k[1] == link)]:
                close(key, f.at_us, f.index)
            if f.value != 0 or kind == "slow":
                open_[(kind, link)] = (kind, describe(f), link, f.at_us, f.index)
    for key in list(open_):
        kind, label, actors, start, opened = open_.pop(key)
        out.append(Window(kind, label, actors, start, end_us, opened, None))
    return out


@attrs.frozen
class Breaks:
    """The connections that broke at one time for one cause, drawn as one row: those between ``actor`` and
    each of ``peers`` (both ways), e.g. every connection of a crashed actor; a single break has one peer
    and keeps its direction (``actor`` -> the peer)."""

    index: int  # the journal record of its first notice
    at_us: int
    actor: int
    peers: tuple[int, ...]
    cause: str
    single: bool

    @property
    def ends(self) -> tuple[int, ...]:
        return (self.actor, *self.peers)


def grouped(breaks) -> list[Breaks]:
    """``breaks`` (Break, in journal order) as rows: those of one time and cause that share an end are one
    (the end shared by the most first: a crashed actor and all its connections)."""
    out: list[Breaks] = []
    groups: dict[tuple[int, str], list[Break]] = {}
    for b in breaks:
        groups.setdefault((b.at_us, b.cause), []).append(b)
    for group in groups.values():
        while group:
            ends = Counter(end for b in group for end in (b.src, b.dst))
            actor = min(ends, key=lambda a: (-ends[a], a))
            mine = [b for b in group if actor in (b.src, b.dst)]
            if len(mine) == 1:
                b = mine[0]
                out.append(Breaks(b.index, b.at_us, b.src, (b.dst,), b.cause, True))
            else:
                peers = sorted({b.dst if b.src == actor else b.src for b in mine})
                out.append(Breaks(mine[0].index, mine[0].at_us, actor, tuple(peers), mine[0].cause, False))
            group = [b for b in group if actor not in (b.src, b.dst)]
    return sorted(out, key=lambda r: (r.at_us, r.index))


def broken(row: Breaks, name) -> str:
    """``CONNECTION BROKEN lm-0 -> gm-1 (crash)``, or ``CONNECTIONS BROKEN between lm-0 and gm-0..gm-2, w-0
    (crash)`` for a group (``name``: actor index -> name)."""
    if row.single:
        return f"CONNECTION BROKEN {name(row.actor)} -> {name(row.peers[0])} ({row.cause})"
    return (f"CONNECTIONS BROKEN between {name(row.actor)} and {name_ranges([name(p) for p in row.peers])} "
            f"({row.cause})")
