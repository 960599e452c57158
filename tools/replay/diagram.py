"""`fedemu replay LOG --diagram FILE`: a space-time diagram of a journal, or of a window of it.

The file's extension picks the form: ``.md`` a Mermaid sequence diagram (``mermaid``), ``.svg`` a
standalone picture with time going down at true scale between events (``svg_diagram``), ``.html``
that picture in a page. Only the journal is read; the same journal gives the same bytes.
"""

from __future__ import annotations

import os

from fedemu.fabric.errors import ConfigError

from ..run import atomic
from . import drawing, mermaid, svg_diagram
from .selection import Selection
from .timeline import Timeline

FORMS = {".md": mermaid.render, ".svg": svg_diagram.render, ".html": svg_diagram.page}


def renderer(out_path):
    """The function that writes the form ``out_path``'s extension names; else a ConfigError."""
    ext = os.path.splitext(os.fspath(out_path))[1].lower()
    if ext not in FORMS:
        raise ConfigError(f"--diagram {os.fspath(out_path)!r}: the extension picks the form; known: "
                          f"{', '.join(FORMS)}")
    return FORMS[ext]


def write(log_path, out_path, *, t_from=None, t_to=None, actor=None, job=None, kind=None,
          tail: bool = False) -> str:
    """Draw the journal at ``log_path`` into ``out_path``; returns the line saying what was drawn.
    ``tail``: keep the last rows rather than refuse a long run (failure folders)."""
    render = renderer(out_path)
    timeline = Timeline(log_path)
    sel = Selection.parse(timeline.names, t_from=t_from, t_to=t_to, actor=actor, job=job, kind=kind)
    picture = drawing.collect(timeline, sel, tail=tail)
    atomic.write_text(out_path, render(picture))
    left = f" (the last of the run; {picture.left_out:,} earlier left out)" if picture.left_out else ""
    return (f"diagram: {out_path}: {picture.messages:,} messages, {picture.fires:,} timer fires{left} "
            f"between {drawing.lane_summary(picture) or 'no actors'}")
