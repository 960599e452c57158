"""`fedemu replay LOG --trace FILE.json`: a run in the Chrome trace-event JSON format, which Perfetto
(ui.perfetto.dev) and chrome://tracing open.

- Each actor is a track (a thread), grouped by role (a process); a track named ``faults`` holds the
  fault windows and the network's counters.
- What an actor handles is a slice named by the message or timer kind: its service time (start to end)
  under a cost model, read from a re-run of the journal's run (``trace_probe``), else a zero-length
  slice where it arrived. Its args hold the sender, the times and the message's fields.
- Each delivered message is a flow (``s`` at a zero-length ``send`` slice on its sender, ``f`` binding
  to the slice that handles it); a dropped one is an instant on the track of the actor that lost it.
- Faults and connection breaks are instants (an actor's fault on its track, the others global), and
  faults windows while they hold (async slices: an actor down, a partition, a lossy or slow link).
- Counters: messages in flight and actors down (from the journal), and, from the re-run, each
  scheduler component's queue (arrived, not yet handled) and busy share, and the numbers of every
  actor's statistics (summed over a role of more than eight actors, with ``up`` and ``idle``).

Size: the window (``--from``/``--to`` and the other filters, as for diagrams) is drawn whole up to
``MAX_ITEMS`` messages, drops and timer fires; beyond, 1 in k of them is kept (every k-th in the
journal's order, k the smallest that fits), and the file says so (``otherData``). Counters have at
most ``trace_probe.POINTS`` samples each. So a trace stays under about 40 MB whatever the run.
"""

from __future__ import annotations

import json
import math
import os

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.replay import STOPPED_EARLY

from ..run import atomic
from . import roles, trace_probe
from .fault_state import FaultState, broken, describe, grouped, windows
from .selection import Selection
from .timeline import OUTSIDE, Break, FaultEvent, Fire, Message, Timeline

MAX_ITEMS = 50_000
FAULTS_PID = 1


def _json(event: dict) -> str:
    return json.dumps(event, separators=(",", ":"), allow_nan=False)


class _Tracks:
    """Processes (one per role, in actor order) and threads (one per actor) as the trace numbers them."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.pids: dict[str, int] = {}
        for group in ["outside", *(roles.group_of(n) for n in names)]:  # numbered in actor order
            self.pid_of_group(group)
        self.used: set[int] = set()

    def name(self, idx: int) -> str:
        return "outside" if idx == OUTSIDE else self.names[idx]

    def pid_of_group(self, group: str) -> int:
        return self.pids.setdefault(group, FAULTS_PID + 1 + len(self.pids))

    def at(self, idx: int) -> dict:
        """``pid`` and ``tid`` of actor ``idx``'s track."""
        self.used.add(idx)
        group = "outside" if idx == OUTSIDE else roles.group_of(self.names[idx])
        return {"pid": self.pid_of_group(group), "tid": idx + 2}

    def metadata(self) -> list[dict]:
        out = [{"name": "process_name", "ph": "M", "pid": FAULTS_PID, "args": {"name": "faults"}},
               {"name": "process_sort_index", "ph": "M", "pid": FAULTS_PID, "args": {"sort_index": 0}}]
        for group, pid in self.pids.items():
            out.append({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": group}})
            out.append({"name": "process_sort_index", "ph": "M", "pid": pid, "args": {"sort_index": pid}})
        for idx in sorted(self.used):
            where = self.at(idx)
            out.append({"name": "thread_name", "ph": "M", **where, "args": {"name": self.name(idx)}})
            out.append({"name": "thread_sort_index", "ph": "M", **where, "args": {"sort_index": idx + 2}})
        return out


def _count(timeline: Timeline, sel: Selection) -> int:
    """Messages (arrivals and drops) and timer fires the selection keeps (the first reading of the journal)."""
    n, seen = 0, set()
    for ev in timeline.events():
        if isinstance(ev, (FaultEvent, Break)):
            continue
        seen.add(ev.kind)
        n += sel.message(ev, timeline) if isinstance(ev, Message) else sel.fire(ev, timeline)
    sel.check_kinds(seen)
    return n


def _rerun(header: dict, probe) -> str:
    from .replay import rerun

    return rerun(header, None, progress=probe).digest


def write(log_path, out_path, *, t_from=None, t_to=None, actor=None, job=None, kind=None, rerun=_rerun) -> str:
    """Write the trace of the journal at ``log_path`` to ``out_path``; returns the line saying what it holds."""
    if os.path.splitext(os.fspath(out_path))[1].lower() != ".json":
        raise ConfigError(f"--trace {os.fspath(out_path)!r}: a trace is a .json file")
    first = Timeline(log_path)
    sel = Selection.parse(first.names, t_from=t_from, t_to=t_to, actor=actor, job=job, kind=kind)
    items = _count(first, sel)
    header, footer = first.header, first.footer
    lo = sel.t_from or 0
    hi = sel.t_to if sel.t_to is not None else max(lo, int(footer.get("now_us", 0)))
    if str(footer.get("ended", "")).startswith(STOPPED_EARLY):  # a re-run would go on past it: no digest to match
        observed = trace_probe.Observed(note="no service times or actor counters: the recording stopped early "
                                        "(the live view's q), so no re-run can be checked against it")
    else:
        observed = trace_probe.observe(header, footer.get("digest"), lo, hi, rerun)
    every = max(1, math.ceil(items / MAX_ITEMS))
    events, tracks = _events(Timeline(log_path), sel, observed, every, lo, hi)
    kept = f"every one of the {items:,}" if every == 1 else f"1 in {every} of the {items:,} (every {every}th)"
    other = {"journal": os.path.basename(os.fspath(log_path)), "scenario": header.get("scenario"),
             "seed": header.get("seed"), "digest": footer.get("digest"), "ended": footer.get("ended", ""),
             "filters": sel.text(), "window_s": [lo / 1e6, hi / 1e6],
             "messages_and_timer_fires": kept,
             "rule": f"at most {MAX_ITEMS:,} messages, drops and timer fires: beyond, every k-th in journal order "
                     f"for the smallest k that fits; counters at most {trace_probe.POINTS} samples each",
             "service_times": "from a re-run of the journal's run (its digest matched)" if observed.ok else observed.note}
    with atomic.atomic_write(out_path) as f:
        f.write('{"displayTimeUnit":"ms","otherData":' + _json(other) + ',"traceEvents":[\n')
        f.write(",\n".join(_json(e) for e in tracks.metadata() + events))
        f.write("\n]}\n")
    note = "" if observed.ok else f"; {observed.note}"
    return f"trace: {out_path}: {kept} messages and timer fires, {len(events):,} events{note}"


def _events(timeline: Timeline, sel: Selection, observed, every: int, lo: int, hi: int):
    """The trace events in the journal's order (metadata apart), and the tracks they use."""
    tracks = _Tracks(timeline.names)
    served = observed.served
    out: list[dict] = []
    flows: dict[tuple[int, int], int] = {}  # (src, seq) -> flow id of the send drawn
    ranks: dict[tuple[int, int], int] = {}  # (server, time) -> arrivals there so far (the mailbox order)
    servers = {key[0] for key in served}
    faults: list[FaultEvent] = []
    breaks: list[Break] = []
    state = FaultState()
    grid = observed.grid or list(range(lo, hi + 1, max(1, math.ceil((hi - lo) / trace_probe.POINTS))))
    period = grid[1] - grid[0] if len(grid) > 1 else 1
    flight = [0] * (len(grid) + 1)  # a difference array over the grid points
    n = 0

    def cell(t: int) -> int:  # the first grid point at or after t
        return min(len(grid), max(0, -(-(t - lo) // period)))

    last_key = None
    for ev in timeline.events():
        if isinstance(ev, FaultEvent):
            if ev.at_us < lo:
                state.apply(ev)
            elif ev.at_us <= hi:
                faults.append(ev)
            continue
        if isinstance(ev, Break):
            if lo <= ev.at_us <= hi:
                breaks.append(ev)
            continue
        actor = ev.dst if isinstance(ev, Message) else ev.actor
        rank = None  # the arrival's place among those at its server at its time (a drop never arrives)
        if actor in servers and lo <= ev.at_us <= hi and (isinstance(ev, Fire) or not ev.dropped):
            rank = ranks.get((actor, ev.at_us), 0)
            ranks[(actor, ev.at_us)] = rank + 1
        if isinstance(ev, Message) and (ev.src, ev.seq) != last_key:  # its first arrival or drop
            flight[cell(ev.sent_us)] += 1
            flight[cell(ev.at_us)] -= 1
            last_key = (ev.src, ev.seq)
        if not (sel.message(ev, timeline) if isinstance(ev, Message) else sel.fire(ev, timeline)):
            continue
        n += 1
        if (n - 1) % every:
            continue
        span = served.get((actor, ev.at_us, rank)) if rank is not None else None
        if isinstance(ev, Fire):
            out.append(_slice(tracks, ev.actor, f"timer {ev.kind}", "timer", ev.at_us, span,
                              {"set_s": ev.set_us / 1e6, "fields": timeline.label(ev.kind, ev.values)}))
        elif ev.dropped:
            lost_at = ev.src if ev.outcome == "loss" else ev.dst
            out.append({"name": f"dropped {ev.kind}", "cat": "drop", "ph": "i", "s": "t", "ts": ev.at_us,
                        **tracks.at(lost_at), "args": {"cause": ev.outcome, "from": tracks.name(ev.src),
                                                       "to": tracks.name(ev.dst), "sent_s": ev.sent_us / 1e6,
                                                       "fields": timeline.label(ev.kind, ev.values)}})
        else:
            fid = flows.get((ev.src, ev.seq))
            if fid is None:
                fid = flows[(ev.src, ev.seq)] = len(flows) + 1
                where = tracks.at(ev.src)
                out.append({"name": ev.kind, "cat": "send", "ph": "X", "ts": ev.sent_us, "dur": 0, **where,
                            "args": {"to": tracks.name(ev.dst), "seq": ev.seq}})
                out.append({"name": ev.kind, "cat": "message", "ph": "s", "id": fid, "ts": ev.sent_us, **where})
            args = {"from": tracks.name(ev.src), "sent_s": ev.sent_us / 1e6, "arrived_s": ev.at_us / 1e6,
                    "fields": timeline.label(ev.kind, ev.values)}
            if ev.outcome == "duplicate":
                args["copy"] = "the second copy of a duplicated message"
            if ev.tries:
                args["retransmissions"] = ev.tries
            handled = _slice(tracks, ev.dst, ev.kind, "handle", ev.at_us, span, args)
            out.append(handled)
            out.append({"name": ev.kind, "cat": "message", "ph": "f", "bp": "e", "id": fid, "ts": handled["ts"],
                        **tracks.at(ev.dst)})
    out += [{"name": broken(row, tracks.name), "cat": "fault", "ph": "i", "s": "g", "ts": row.at_us, "pid": FAULTS_PID,
             "tid": 1, "args": {"cause": row.cause}} for row in grouped(breaks)]
    spans = windows(state, faults, lo, hi)
    out += _fault_events(tracks, faults, spans)
    out += _counters(tracks, observed, grid, flight, [w for w in spans if w.kind == "down"])
    return out, tracks


def _slice(tracks: _Tracks, actor: int, name: str, cat: str, arrived: int, span, args: dict) -> dict:
    """What ``actor`` handled: its service (``span``: start, end) when measured, else zero-length at arrival."""
    if span is None:
        return {"name": name, "cat": cat, "ph": "X", "ts": arrived, "dur": 0, **tracks.at(actor), "args": args}
    start, end = span
    return {"name": name, "cat": cat, "ph": "X", "ts": start, "dur": end - start, **tracks.at(actor),
            "args": {**args, "waited_us": start - arrived}}


def _fault_events(tracks: _Tracks, faults: list[FaultEvent], spans) -> list[dict]:
    """Each fault an instant, each fault window (``fault_state.windows``) an async slice."""
    out = []
    index = {name: i for i, name in enumerate(tracks.names)}
    for f in faults:
        text = f"FAULT {describe(f)}"
        if f.kind in ("crash", "restart") and f.target[0] in index:
            out.append({"name": text, "cat": "fault", "ph": "i", "s": "t", "ts": f.at_us,
                        **tracks.at(index[f.target[0]])})
        else:
            out.append({"name": text, "cat": "fault", "ph": "i", "s": "g", "ts": f.at_us, "pid": FAULTS_PID,
                        "tid": 1})
    for n, w in enumerate(spans, start=1):
        common = {"name": w.label, "cat": f"fault.{w.kind}", "id": n, "pid": FAULTS_PID, "tid": 1}
        out.append({**common, "ph": "b", "ts": w.start_us})
        out.append({**common, "ph": "e", "ts": w.end_us})
    return out


def _counters(tracks: _Tracks, observed, grid: list[int], flight: list[int], downs) -> list[dict]:
    """Counter events: each series sampled on the grid, written where it changes; constant ones left out."""
    network, value = [], 0
    for n, at in enumerate(grid):
        value += flight[n]
        down = sum(w.start_us <= at < w.end_us for w in downs)
        network.append((at, {"in_flight": value, "actors_down": down}))
    series = {("network", "faults"): network}
    series.update(observed.counters)
    out = []
    for (name, group), samples in series.items():
        pid = FAULTS_PID if group == "faults" else tracks.pid_of_group(group)
        keys = sorted({key for _, values in samples for key in values})
        moving = [key for key in keys if len({values.get(key) for _, values in samples}) > 1]
        last: dict = {}
        for at, values in samples:
            changed = {key: values[key] for key in moving if key in values and last.get(key) != values[key]}
            if changed:
                out.append({"name": name, "cat": "counter", "ph": "C", "ts": at, "pid": pid, "args": changed})
                last.update(changed)
    return out
