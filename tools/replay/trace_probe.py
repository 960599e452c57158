"""What a trace needs that a journal does not hold: when each handler's service started and ended under a
cost model, how long each component's queue was, and the actors' own statistics (queues, free
capacity), all read from a re-run of the journal's run, as ``fedemu replay --tui`` does.

The probe only reads: it wraps the fabric's ``on_served`` hook (``fabric.service``) and samples the
actors' ``statistics()`` between windows through the progress hook, so the re-run is the same run
(its digest is compared with the journal's footer: a re-run that differs gives nothing).

A served entry is told apart from the others that arrived at its actor at the same time by its rank
among them: a server handles its arrivals in order (FIFO) and a crash loses a suffix of them, so the
r-th service of arrivals at time T is the r-th arrival at T (``trace_events`` matches it to the
journal's records).
"""

from __future__ import annotations

import math
import operator

import attrs

from fedemu.fabric.errors import FedemuError, JournalError
from fedemu.fabric.replay import actors_differ

from . import roles

POINTS = 2000  # counter samples over the window, at most
PER_ACTOR = 8  # a role with at most this many actors has counters per actor, else one per role
READS = 200_000  # statistics records read per role over a trace, at most


@attrs.define
class Observed:
    """The probe's findings: ``served[(actor, arrived, rank)] = (start, end)``; ``counters`` maps a
    (track name, group) to [(time, {field: value})] samples; ``note`` says why something is missing."""

    served: dict = attrs.field(factory=dict)
    counters: dict = attrs.field(factory=dict)
    grid: list = attrs.field(factory=list)
    note: str = ""
    ok: bool = False


_PLANS: dict[type, tuple] = {}  # statistics class -> (getter, [(field, width)]), width 0: a whole number


def _numbers(stat) -> dict[str, int]:
    """The whole-number fields of a statistics record, tuples of up to four of them as ``name[i]`` (which
    fields those are is learnt once per class, from its first record)."""
    cls = type(stat)
    plan = _PLANS.get(cls)
    if plan is None:
        fields = []
        for field in attrs.fields(cls) if attrs.has(cls) else ():
            value = getattr(stat, field.name)
            if type(value) is int:
                fields.append((field.name, 0))
            elif isinstance(value, tuple) and 0 < len(value) <= 4 and all(type(v) is int for v in value):
                fields.append((field.name, len(value)))
        getter = operator.attrgetter(*(f for f, _ in fields)) if len(fields) > 1 else (
            (lambda s, name=fields[0][0]: (getattr(s, name),)) if fields else (lambda s: ()))
        plan = _PLANS[cls] = (getter, fields)
    getter, fields = plan
    out = {}
    for (name, width), value in zip(fields, getter(stat)):
        if width == 0:
            if type(value) is int:
                out[name] = value
        elif isinstance(value, tuple) and len(value) == width:
            for i, v in enumerate(value):
                out[f"{name}[{i}]"] = v
    return out


class Probe:
    """The progress hook of the re-run (called between windows, ``every`` = 1)."""

    every = 1

    def __init__(self, names: list[str], lo: int, hi: int) -> None:
        self.names = names
        self.lo, self.hi = lo, hi
        self.period = max(1, math.ceil((hi - lo) / POINTS))
        self.grid = list(range(lo, hi + 1, self.period))
        self.next = 0  # the next grid point to sample
        groups: dict[str, list[int]] = {}
        for i, name in enumerate(names):
            groups.setdefault(roles.group_of(name), []).append(i)
        self.groups = groups
        self.observed = Observed(grid=self.grid)
        self.fabric = None
        self._last: dict[int, tuple[int, int]] = {}  # actor -> (last arrived, rank of it)
        self._queue: dict[int, list[int]] = {}  # server -> per grid point: entries waiting there
        self._busy: dict[int, list[int]] = {}  # server -> per grid cell: microseconds of service in it

    def __call__(self, fabric, run) -> None:
        if self.fabric is None:
            self.fabric = fabric
            inner = fabric.on_served
            fabric.on_served = self._served if inner is None else (
                lambda actor, arrived, start, end: (inner(actor, arrived, start, end), self._served(
                    actor, arrived, start, end)))
        while self.next < len(self.grid) and fabric.now >= self.grid[self.next]:
            self._sample(fabric, self.next)
            self.next += 1

    def _served(self, actor, arrived: int, start: int, end: int) -> None:
        if end < 0:
            return
        idx = actor.id
        last = self._last.get(idx)
        rank = last[1] + 1 if last is not None and last[0] == arrived else 0
        self._last[idx] = (arrived, rank)
        if self.lo <= arrived <= self.hi:
            self.observed.served[(idx, arrived, rank)] = (start, end)
        if end <= self.lo or arrived > self.hi:
            return
        period, lo, n = self.period, self.lo, len(self.grid)
        queue = self._queue.setdefault(idx, [0] * (n + 1))
        first, stop = max(0, -(-(arrived - lo) // period)), min(n, -(-(start - lo) // period))
        if first < stop:  # waiting at the grid points in [arrived, start): a difference array
            queue[first] += 1
            queue[stop] -= 1
        busy = self._busy.setdefault(idx, [0] * n)
        cell = max(0, (start - lo) // period)
        while cell < n and lo + cell * period < end:
            a, b = lo + cell * period, lo + (cell + 1) * period
            busy[cell] += max(0, min(end, b) - max(start, a))
            cell += 1

    def _sample(self, fabric, n: int) -> None:
        """Every statistics record's numbers at grid point ``n``: per actor for small roles, summed (with
        ``up``: actors alive and ``idle``: those running nothing) for the others, whose reads are bounded
        by READS (a role of many actors is sampled at every k-th grid point)."""
        counters, at = self.observed.counters, self.grid[n]
        for group, members in self.groups.items():
            if n % max(1, math.ceil(len(members) * len(self.grid) / READS)):
                continue
            live = [(i, a) for i, a in zip(members, map(fabric.actor, members)) if a is not None]
            stats = [(i, a.statistics()) for i, a in live if hasattr(a, "statistics")]
            if len(members) <= PER_ACTOR:
                for i, stat in stats:
                    counters.setdefault((self.names[i], group), []).append((at, _numbers(stat)))
                continue
            total: dict[str, int] = {"up": len(live)}
            for _, stat in stats:
                for key, value in _numbers(stat).items():
                    total[key] = total.get(key, 0) + value
            if stats and hasattr(stats[0][1], "running"):
                total["idle"] = sum(getattr(s, "running", 1) == 0 for _, s in stats)
            counters.setdefault((group, group), []).append((at, total))

    def finish(self) -> None:
        """Turn the servers' difference arrays into queue and busy samples (per server, at every grid point)."""
        counters = self.observed.counters
        for idx in sorted(set(self._queue) | set(self._busy)):
            queue, busy = self._queue.get(idx), self._busy.get(idx)
            samples, waiting = [], 0
            for n, at in enumerate(self.grid):
                waiting += queue[n] if queue else 0
                values = {"queue": waiting}
                if busy:
                    values["busy_percent"] = round(100 * busy[n] / self.period)
                samples.append((at, values))
            counters[(f"{self.names[idx]} service", roles.group_of(self.names[idx]))] = samples


def observe(header: dict, expected_digest: str | None, lo: int, hi: int, rerun) -> Observed:
    """Re-run the journal's run with a probe (``rerun(header, progress)`` runs it and returns its
    digest); the observations are kept only when the digest matches ``expected_digest``."""
    names = list(header.get("actors", []))
    probe = Probe(names, lo, hi)
    try:
        digest = rerun(header, probe)
    except FedemuError as exc:
        if probe.fabric is None:  # it could not start (e.g. the scenario is not known here)
            return Observed(note=f"no service times or actor counters: the run cannot be re-run ({exc})")
        digest = probe.fabric.journal.digest  # it ended with its verdict, as the recorded one may have
    except Exception:  # noqa: BLE001 - the run failed as the recorded one did: its digest says whether
        if probe.fabric is None:
            raise
        digest = probe.fabric.journal.digest
    if digest != expected_digest:
        return Observed(note=f"no service times or actor counters: the re-run's digest {digest} is not the "
                        f"journal's {expected_digest} (recorded by other code?)")
    differ = actors_differ(names, probe.fabric.names) if probe.fabric is not None else ""
    if differ:  # the same records under another list of names: the header was edited
        raise JournalError(f"journal header's actors differ from its re-run's ({differ}): the header was altered")
    probe.finish()
    probe.observed.ok = True
    return probe.observed
