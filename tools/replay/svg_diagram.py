"""A Drawing as a standalone SVG picture (or an HTML page holding it), with no dependency: actors as
vertical lanes, time going down, each message a slanted arrow from its send to its arrival.

Every send, arrival, timer fire and fault is a point, and the points are spaced evenly in time order
(same-time points in the order the fabric recorded them, a send after what its sender handled then), so
a burst of events and an idle second take the same room; the times are written on the left. A lane is
dashed red while its actor is down; partitions and lossy, duplicating or slow links are shaded bands
over the lanes they concern, from when they begin to when they end. Hovering over an arrow shows all of
its fields.
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from .drawing import Drawing
from .fault_state import Breaks, broken, describe, windows
from .timeline import FaultEvent, Fire, Message

STEP = 22  # pixels between two points in time order
LEFT = 110  # the time axis
HEAD = 120  # title, legend and lane names
LANE_MIN = 120  # a lane's least width
COLUMN_CHARS = 110  # a row's text on the right; its tooltip has the rest
COLOURS = {"deliver": "#1f4e99", "duplicate": "#7a4fb5", "drop": "#c0392b", "timer": "#666666",
           "crash": "#c0392b", "restart": "#2e8b57", "band": "#e67e22", "partition": "#c0392b"}
FONT = "font-family:Helvetica,Arial,sans-serif"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def _points(d: Drawing) -> dict:
    """Each point's y: rows by (time, faults first, journal record), each send after what arrived
    at its time (a loss drop after its own send)."""
    keys = {}
    for row in d.rows:
        if isinstance(row, Message):  # one point for what a sender sent at one time
            key = ("send", row.src, row.sent_us)
            keys[key] = min(keys.get(key, (row.sent_us, 1, row.sent_index)), (row.sent_us, 1, row.sent_index))
            order = 2 if row.outcome == "loss" else 0
            keys[("row", row.index)] = (row.at_us, order, row.index)
        else:
            keys[("row", row.index)] = (row.at_us, -1 if isinstance(row, FaultEvent) else 0, row.index)
    ranked = sorted(keys, key=lambda k: keys[k])
    return {k: (HEAD + STEP * (n + 1), keys[k][0]) for n, k in enumerate(ranked)}


class _Canvas:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, text: str) -> None:
        self.parts.append(text)

    def text(self, x: int, y: int, s: str, *, size: int = 11, anchor: str = "start", colour: str = "#222",
             bold: bool = False, tip: str | None = None) -> None:
        weight = ' font-weight="bold"' if bold else ""
        body = escape(s) + (f"<title>{escape(tip)}</title>" if tip else "")
        self.add(f'<text x="{x}" y="{y}" font-size="{size}" text-anchor="{anchor}" fill="{colour}"{weight}>'
                 f'{body}</text>')

    def line(self, x1, y1, x2, y2, colour: str, *, width: float = 1.2, dash: str = "", marker: str = "",
             tip: str | None = None) -> None:
        extra = (f' stroke-dasharray="{dash}"' if dash else "") + (f' marker-end="url(#{marker})"' if marker else "")
        body = f"<title>{escape(tip)}</title></line>" if tip else "/>"
        self.add(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" stroke-width="{width}"{extra}'
                 + (">" + body if tip else body))


def _lanes(d: Drawing) -> dict[int, int]:
    """Each lane's x (its centre)."""
    xs, x = {}, LEFT
    for idx in d.lanes:
        width = max(LANE_MIN, 7 * len(d.name(idx)) + 24)
        xs[idx] = x + width // 2
        x += width
    return xs


def _windows(d: Drawing, bottom: int) -> list:
    """The fault windows of the drawing (``fault_state.windows``) that concern its lanes."""
    faults = [r for r in d.rows if isinstance(r, FaultEvent)]
    start = d.start_us if d.start_us is not None else 0
    names = {d.name(i) for i in d.lanes}
    return [w for w in windows(d.start_state, faults, start, bottom) if w.actors == ("*",) or names & set(w.actors)]


def _bands(d: Drawing, ys: dict, xs: dict, bottom: int) -> list[tuple]:
    """(y0, y1, x0, x1, label, colour) of each partition and link fault, from its start to its end."""
    out = []
    for w in _windows(d, bottom):
        if w.kind == "down":
            continue
        lanes = [xs[i] for i in d.lanes if w.actors == ("*",) or d.name(i) in w.actors]
        y0 = HEAD if w.opened is None else ys[("row", w.opened)][0]
        y1 = bottom if w.closed is None else ys[("row", w.closed)][0]
        colour = COLOURS["partition"] if w.kind == "partition" else COLOURS["band"]
        out.append((y0, y1, min(lanes) - 50, max(lanes) + 50, w.label, colour))
    return out


def render(d: Drawing) -> str:
    """The SVG document."""
    ys = _points(d)
    xs = _lanes(d)
    bottom = HEAD + STEP * (len(ys) + 1)
    column = max(xs.values(), default=LEFT) + LANE_MIN // 2 + 30  # where each row's text is written
    width = column + 7 * COLUMN_CHARS
    height = bottom + (40 if d.ended else 16)
    c = _Canvas()
    c.add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
          f'viewBox="0 0 {width} {height}" style="{FONT};background:#fff">')
    c.add('<defs>' + "".join(
        f'<marker id="head-{k}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        f'orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{COLOURS[k]}"/></marker>'
        for k in ("deliver", "duplicate")) + '</defs>')
    c.add(f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>')
    for n, y in enumerate(sorted(y for y, _ in ys.values())):
        if n % 2:
            c.add(f'<rect x="{LEFT - 100}" y="{y - STEP // 2}" width="{width - LEFT + 100}" height="{STEP}" '
                  f'fill="#f4f6f9"/>')
    c.text(8, 18, f"{d.title}: {d.messages:,} messages, {d.fires:,} timer fires", size=14, bold=True)
    c.text(8, 36, f"{d.run}; filters: {d.filters}", size=11, colour="#555")
    c.text(8, 50, "Time goes down, one row per event, the time on the left and what happened on the right. Arrows "
           "from send to arrival: blue delivered, purple dashed the second copy of a duplicated message,", size=10,
           colour="#555")
    c.text(8, 63, "red ending in x dropped. Dots: timer fires. Shaded bands: partitions and link faults while they "
           "hold. Dashed red lane: the actor is down; a dotted red bar: a connection broke. Hover for fields.",
           size=10, colour="#555")
    if d.left_out or d.before:
        first = f"{d.left_out:,} earlier messages and timer fires left out. " if d.left_out else ""
        held = f"In force at {d.start_us / 1e6:.6f} s: {'; '.join(d.before)}." if d.before else ""
        c.text(8, 76, first + held, size=10, colour=COLOURS["crash"])
    stacked: dict[int, int] = {}
    for y0, y1, x0, x1, label, colour in _bands(d, ys, xs, bottom):
        c.add(f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{max(y1 - y0, 2)}" fill="{colour}" '
              f'fill-opacity="0.10" stroke="{colour}" stroke-opacity="0.5" stroke-dasharray="4 3"/>')
        stacked[y0] = stacked.get(y0, -1) + 1
        c.text(x0 + 4, y0 + 11 + 12 * stacked[y0], label, size=10, colour=colour)
    _lane_lines(c, d, ys, xs, bottom)
    _axis(c, ys)
    for row in d.rows:
        y = ys[("row", row.index)][0]
        if isinstance(row, Message):
            text, colour = _arrow(c, d, row, xs, ys[("send", row.src, row.sent_us)][0], y)
        elif isinstance(row, Fire):
            x = xs[row.actor]
            label = d.labels[row.index]
            c.add(f'<circle cx="{x}" cy="{y}" r="3.5" fill="{COLOURS["timer"]}"><title>{escape(label)}</title></circle>')
            text, colour = f"{d.name(row.actor)}: timer {label}", COLOURS["timer"]
        elif isinstance(row, Breaks):
            text, colour = broken(row, d.name), COLOURS["crash"]
            ends = [xs[i] for i in d.fault_lanes(row)]
            c.line(min(ends) - 8, y, max(ends) + 8, y, colour, width=2, dash="2 3")
        else:
            text, colour = f"FAULT {describe(row)}", COLOURS["crash"]
            lane = d.fault_lanes(row)
            if row.kind in ("crash", "restart") and lane:
                x = xs[lane[0]]
                colour = COLOURS[row.kind]
                if row.kind == "crash":
                    c.line(x - 7, y - 7, x + 7, y + 7, colour, width=3)
                    c.line(x - 7, y + 7, x + 7, y - 7, colour, width=3)
                else:
                    c.add(f'<circle cx="{x}" cy="{y}" r="6" fill="none" stroke="{colour}" stroke-width="3"/>')
        c.text(column, y + 4, _cut(text, COLUMN_CHARS), size=10, colour=colour, tip=text,
               bold=isinstance(row, (FaultEvent, Breaks)))
    if d.ended:
        c.text(8, bottom + 24, f"run ended: {d.ended}", size=12, colour=COLOURS["crash"], bold=True)
    c.add("</svg>")
    return "\n".join(c.parts) + "\n"


def _lane_lines(c: _Canvas, d: Drawing, ys: dict, xs: dict, bottom: int) -> None:
    """Lane names on top and each lane's line: solid while up, dashed red while down."""
    downs: dict[int, list[tuple[int, int]]] = {i: [] for i in d.lanes}
    by_name = {d.name(i): i for i in d.lanes}
    for w in _windows(d, bottom):
        if w.kind == "down" and w.actors[0] in by_name:
            y0 = HEAD if w.opened is None else ys[("row", w.opened)][0]
            y1 = bottom if w.closed is None else ys[("row", w.closed)][0]
            downs[by_name[w.actors[0]]].append((y0, y1))
    for i in d.lanes:
        x = xs[i]
        c.add(f'<rect x="{x - 55}" y="{HEAD - 30}" width="110" height="22" rx="4" fill="#eef2f8" stroke="#8899bb"/>')
        c.text(x, HEAD - 15, d.name(i), size=12, anchor="middle", bold=True)
        y = HEAD - 8
        for y0, y1 in sorted(downs[i]):
            c.line(x, y, x, y0, "#8899bb", width=1.5)
            c.line(x, y0, x, y1, COLOURS["crash"], width=1.5, dash="5 4")
            y = y1
        c.line(x, y, x, bottom, "#8899bb", width=1.5)


def _axis(c: _Canvas, ys: dict) -> None:
    """The time of each point, on the left, where it differs from the point above."""
    last = None
    for y, t in sorted(ys.values()):
        if t != last:
            c.text(LEFT - 12, y + 4, f"{t / 1e6:.6f}", size=10, anchor="end", colour="#777")
            c.line(LEFT - 8, y, LEFT - 2, y, "#bbbbbb")
            last = t


def _arrow(c: _Canvas, d: Drawing, m: Message, xs: dict, y0: int, y1: int) -> tuple[str, str]:
    """Draw message ``m`` from its send (``y0``) to its arrival or drop (``y1``); returns its row's text and
    colour."""
    x0, x1 = xs[m.src], xs[m.dst]
    label = d.labels[m.index]
    text = (f"{d.name(m.src)} -> {d.name(m.dst)}: {label}"
            + {"deliver": "", "duplicate": " (second copy)"}.get(m.outcome, f" DROPPED ({m.outcome})")
            + (f" (after {m.tries} retransmission{'s' * (m.tries > 1)})" if m.tries else ""))
    tip = f"{text}\nsent {m.sent_us / 1e6:.6f} s, {'dropped' if m.dropped else 'arrived'} {m.at_us / 1e6:.6f} s"
    if m.dropped:
        if m.outcome == "loss":  # lost on its way: it ends halfway
            x1, y1 = (x0 + x1) // 2, y0 + STEP // 2
        colour = COLOURS["drop"]
        c.line(x0, y0, x1, y1, colour, width=1.4, dash="2 2", tip=tip)
        c.line(x1 - 5, y1 - 5, x1 + 5, y1 + 5, colour, width=2.5)
        c.line(x1 - 5, y1 + 5, x1 + 5, y1 - 5, colour, width=2.5)
        return text, colour
    kind = "duplicate" if m.outcome == "duplicate" else "deliver"
    c.line(x0, y0, x1, y1, COLOURS[kind], width=1.4, dash="5 3" if kind == "duplicate" else "",
           marker=f"head-{kind}", tip=tip)
    return text, COLOURS[kind]


def page(d: Drawing) -> str:
    """An HTML page with the picture (opens in any browser, no script)."""
    title = escape(f"{d.title}: space-time diagram")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{title}</title>\n<style>body{{margin:12px;{FONT}}}</style>\n</head>\n<body>\n"
            + render(d) + "</body>\n</html>\n")
