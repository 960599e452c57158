"""What a space-time diagram of a journal shows, whatever draws it: its lanes (actors), its rows
(arrivals and drops of messages, timer fires, faults) in time order, same-time rows in the order the
fabric recorded them (its delivery order), the faults already in force where it starts, and how the
run ended.

``collect`` reads the journal once. A diagram is refused (one line naming the filters) when it would
hold more than ``MAX_ROWS`` messages and timer fires: no one reads more. ``tail=True`` keeps the last
``MAX_ROWS`` instead (a failure folder: the failure is at the end of its run).
"""

from __future__ import annotations

import heapq
import os
from collections import Counter

import attrs

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.replay import BROKEN, name_ranges

from . import roles
from .fault_state import Breaks, FaultState, grouped
from .selection import Selection
from .timeline import OUTSIDE, Break, FaultEvent, Fire, Message, Timeline

MAX_ROWS = 300  # messages and timer fires in one diagram, at most


@attrs.frozen
class Drawing:
    title: str  # the journal's file name
    run: str  # scenario, seed and digest, in a line
    filters: str  # the filters as given ("(none)")
    lanes: tuple[int, ...]  # actor indices, in actor order (OUTSIDE first)
    names: tuple[str, ...]  # every actor's name, by index
    rows: tuple  # Message, Fire, FaultEvent, Breaks sorted by (time, journal record)
    labels: dict  # journal record index -> "kind name=value ..." of each Message and Fire row
    before: tuple[str, ...] = ()  # the faults in force where the diagram starts
    start_state: FaultState | None = None  # the same, as data (None: the diagram starts the run)
    start_us: int | None = None  # where the diagram starts when it does not start the run
    ended: str = ""  # how the run ended, when it failed and the diagram reaches its end
    left_out: int = 0  # rows of the run before those shown (tail mode)
    messages: int = 0
    fires: int = 0

    def name(self, idx: int) -> str:
        return "outside" if idx == OUTSIDE else self.names[idx]

    def fault_lanes(self, fault) -> tuple[int, ...]:
        """The lanes a fault or a connection break concerns, in lane order (empty: the whole network)."""
        if isinstance(fault, Breaks):
            return tuple(i for i in self.lanes if i in fault.ends)
        target = fault.target
        if fault.kind == "partition":
            named = {n for side in target for n in side}
        else:
            named = {t for t in target if isinstance(t, str) and t != "*"}
        return tuple(i for i in self.lanes if i != OUTSIDE and self.names[i] in named)


def _fault_shown(fault: FaultEvent, lanes: set[str]) -> bool:
    """A fault on actors is shown when it concerns a lane; one on the whole network always."""
    target = fault.target
    if fault.kind == "heal" or tuple(target) == ("*",):
        return True
    named = {n for side in target for n in side} if fault.kind == "partition" else set(target)
    return bool(named & lanes)


def _too_many(timeline: Timeline, sel: Selection, messages: int, fires: int, kinds: Counter) -> ConfigError:
    end = timeline.footer.get("now_us", 0) / 1e6
    groups = sorted({roles.group_of(n) for n in timeline.names})
    busiest = ", ".join(f"{k} {n:,}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))[:4])
    return ConfigError(
        f"the diagram would draw {messages:,} messages and {fires:,} timer fires (more than {MAX_ROWS} is "
        f"unreadable) with filters {sel.text()}; narrow it with --from/--to (the run spans 0 to {end:.6f} s), "
        f"--actor NAMES or roles ({', '.join(groups)}), --job N or --kind KINDS (the most drawn: {busiest})")


def collect(timeline: Timeline, sel: Selection, *, tail: bool = False) -> Drawing:
    """Read the journal and pick what the diagram shows (see the module's docstring)."""
    kept: list = []  # a min-heap of (time, record, row): the last MAX_ROWS rows when tail
    faults: list[FaultEvent] = []
    labels: dict[int, str] = {}
    seen: set[str] = set()
    kinds: Counter = Counter()
    messages = fires = 0
    breaks: list[Break] = []
    for ev in timeline.events():
        if isinstance(ev, FaultEvent):
            faults.append(ev)
            continue
        if isinstance(ev, Break):
            breaks.append(ev)
            continue
        if isinstance(ev, Message) and ev.src == OUTSIDE and ev.kind == BROKEN:
            continue  # the fabric's notice of a break: the break is drawn instead
        seen.add(ev.kind)
        if not (sel.message(ev, timeline) if isinstance(ev, Message) else sel.fire(ev, timeline)):
            continue
        kinds[ev.kind] += 1
        if isinstance(ev, Message):
            messages += 1
        else:
            fires += 1
        if len(kept) < MAX_ROWS or tail:
            heapq.heappush(kept, (ev.at_us, ev.index, ev))
            if len(kept) > MAX_ROWS:
                heapq.heappop(kept)
    sel.check_kinds(seen)
    if messages + fires > MAX_ROWS and not tail:
        raise _too_many(timeline, sel, messages, fires, kinds)
    rows = [row for _, _, row in sorted(kept, key=lambda k: (k[0], k[1]))]
    lanes: set[int] = set(sel.named)  # an actor named on its own has its lane, messages or not
    for row in rows:
        lanes.update((row.src, row.dst) if isinstance(row, Message) else (row.actor,))
        labels[row.index] = timeline.label(row.kind, row.values)
    names = tuple(timeline.names)
    lane_names = {names[i] for i in lanes if i != OUTSIDE}
    left_out = messages + fires - len(rows)
    start = sel.t_from if not left_out else rows[0].at_us
    state = FaultState()
    shown: list[FaultEvent] = []
    for fault in faults:
        if start is not None and fault.at_us < start:
            state.apply(fault)
        elif sel.fault(fault) and _fault_shown(fault, lane_names):
            shown.append(fault)
    shown += grouped(b for b in breaks if b.cause != "refused" and sel.in_window(b.at_us)  # (a refusal: its drop)
                     and (b.src in lanes or b.dst in lanes))
    rows = sorted(rows + shown, key=lambda r: (r.at_us, r.index))
    footer = timeline.footer
    ended = str(footer.get("ended", ""))
    if ended and sel.t_to is not None and sel.t_to < footer.get("now_us", 0):
        ended = ""
    header = timeline.header
    run = f"scenario {header.get('scenario', '?')}, seed {header.get('seed', '?')}, digest {footer.get('digest', '?')}"
    shown_messages = sum(isinstance(r, Message) for r in rows)
    return Drawing(title=os.path.basename(os.fspath(timeline.path)), run=run, filters=sel.text(), lanes=tuple(sorted(lanes)), names=names, rows=tuple(rows),
                   labels=labels, before=tuple(state.lines(lane_names)) if start is not None else (),
                   start_state=state if start is not None else None,
                   start_us=start, ended=ended, left_out=left_out, messages=shown_messages,
                   fires=sum(isinstance(r, Fire) for r in rows))


def lane_summary(drawing: Drawing) -> str:
    """The lanes compactly, e.g. ``gm-0..gm-2, lm-0, submitter``."""
    return name_ranges([drawing.name(i) for i in drawing.lanes])
