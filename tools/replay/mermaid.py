"""A Drawing as a Mermaid ``sequenceDiagram`` in Markdown, which code hosts and most Markdown viewers
render: one participant per lane, one arrow per message where it arrived (``->>`` delivered, with its
retransmissions if any, ``-->>`` the second copy of a duplicated message in journals from before
connections, ``-x`` dropped, its cause named), notes for timer fires, faults and connection breaks,
and the faults already in force and how the run ended.

Text is escaped with Mermaid's entity codes (``#59;`` for ``;`` and so on), so a field's value never
breaks the diagram's syntax.
"""

from __future__ import annotations

from .drawing import Drawing
from .fault_state import Breaks, broken, describe
from .timeline import OUTSIDE, Fire, Message

LABEL_CHARS = 100  # a label's longest text; the rest is cut (messages.txt has every field)
MAX_CHARS = 45_000  # the diagram's text at most: Mermaid refuses more than 50,000 characters (maxTextSize)
_ENTITIES = {"#": "#35;", ";": "#59;", "<": "#lt;", ">": "#gt;", "`": "'"}
ARROWS = {"deliver": "->>", "duplicate": "-->>"}  # any other outcome is a drop: "-x"


def escape(text: str) -> str:
    """``text`` safe in a Mermaid message or note (control characters and line breaks become spaces)."""
    return "".join(_ENTITIES.get(c, c) if c.isprintable() else " " for c in text)


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 3] + "..."


def pid(idx: int) -> str:
    """A lane's participant id (ids, not names: a name's dashes would read as arrows)."""
    return "ext" if idx == OUTSIDE else f"a{idx}"


def _span(ids: list[str]) -> str:
    return ids[0] if len(ids) == 1 else f"{ids[0]},{ids[-1]}"


def render(d: Drawing) -> str:
    """The Markdown text: a heading, what is shown and how to read it, and the mermaid block (its labels
    cut shorter when needed to keep it within MAX_CHARS)."""
    chars = LABEL_CHARS
    lines = _block(d, chars)
    while sum(len(line) + 1 for line in lines) > MAX_CHARS and chars > 16:
        chars = max(16, chars * 3 // 4)
        lines = _block(d, chars)
    shown = f"{d.messages:,} messages, {d.fires:,} timer fires"
    text = [f"# {d.title}: {shown}", "",
            f"{d.run}; filters: {d.filters}.", "",
            "Time goes down; each arrow is drawn where its message arrived, same-time arrivals in the order "
            "the fabric delivered them, and is labelled with that time in seconds, the message kind and "
            "its fields. `->>` delivered, dotted: the second copy of a duplicated message, `-x` dropped "
            "(the cause is named). Notes mark timer fires and faults.", "",
            "```mermaid", *lines, "```", ""]
    return "\n".join(text)


def _block(d: Drawing, chars: int) -> list[str]:
    """The diagram's lines, labels cut at ``chars``."""
    every = [pid(i) for i in d.lanes] or ["none"]
    lines = ["sequenceDiagram"]
    if not d.lanes:
        lines.append("    participant none as (no messages here)")
    lines += [f"    participant {pid(i)} as {escape(d.name(i))}" for i in d.lanes]
    if d.left_out:
        lines.append(f"    Note over {_span(every)}: {d.left_out:,} earlier messages and timer fires left out")
    if d.before:
        at = f"{d.start_us / 1e6:.6f} s"
        lines.append(f"    Note over {_span(every)}: in force at {at}:<br/>" + "<br/>".join(escape(b) for b in d.before))
    for row in d.rows:
        t = f"{row.at_us / 1e6:.6f}"
        if isinstance(row, Message):
            label = escape(_cut(d.labels[row.index], chars))
            arrow = ARROWS.get(row.outcome, "-x")
            what = {"deliver": "", "duplicate": " (duplicate copy)"}.get(row.outcome, f" DROPPED ({row.outcome})")
            what += f" (after {row.tries} retransmission{'s' * (row.tries > 1)})" if row.tries else ""
            lines.append(f"    {pid(row.src)}{arrow}{pid(row.dst)}: {t} {label}{what}")
        elif isinstance(row, Fire):
            lines.append(f"    Note over {pid(row.actor)}: {t} timer {escape(_cut(d.labels[row.index], chars))}")
        elif isinstance(row, Breaks):
            lines.append(f"    Note over {_span([pid(i) for i in d.fault_lanes(row)])}: {t} "
                         f"{escape(_cut(broken(row, d.name), 2 * chars))}")
        else:
            lines.append(f"    Note over {_span([pid(i) for i in d.fault_lanes(row)] or every)}: {t} "
                         f"FAULT {escape(describe(row))}")
    if d.ended:
        lines.append(f"    Note over {_span(every)}: run ended: {escape(_cut(d.ended, LABEL_CHARS))}")
    return lines
