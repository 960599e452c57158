"""The live view's panels: rich renderables built from one ``Snapshot`` (and the one before it).

An actor's role comes from its name (``gm-2`` is a gm: the roles and their name prefixes are the
plug-ins', ``actors.registry.roles``), and each scheduler's plug-in declares its topology panels as plain
data (``actors.plugin.Table`` and ``Histogram``: which role, which statistics fields, how shown). A field
a snapshot lacks shows as a dash, never an error, so a new scheduler plug-in gets its panels by
declaring them.
"""

from __future__ import annotations

import math
import re

import attrs
from rich import box
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from fedemu.actors import registry
from fedemu.actors.plugin import Histogram

GM_COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan", "bright_magenta")
SHADES = " ░▒▓█"  # occupancy 0 .. 1 in five steps
DASH = "-"


@attrs.frozen
class Snapshot:
    """What one sample of a run holds: the fabric's counts, every actor's statistics (None while it
    is crashed), the jobs and delay percentiles so far, the network's live faults and new events."""

    now_us: int
    wall_s: float
    fabric: object  # FabricStatistics
    names: tuple = ()
    stats: tuple = ()  # per actor: its statistics snapshot, or None while crashed
    jobs: tuple = (0, 0, 0, None)  # submitted, completed, rejected, expected (None: not known yet)
    delays: tuple | None = None  # (p50, p90, p99) in s of completed jobs, None before the first
    network: tuple = ()  # lines describing active partitions, slow and lossy links
    shares: tuple = ()  # (user, share, target) when the run has users
    workers: tuple = ()  # indices of the actors that are workers (known from their first snapshot)
    down: tuple = ()  # the last statistics of each crashed actor, marked ``down`` (rows say so)


def field(stat, name: str, default=None):
    """A statistics field, or ``default`` when this snapshot type has none."""
    return getattr(stat, name, default)


def _num(value) -> str:
    return DASH if value is None else f"{value:,}"


def _seconds(us: int) -> str:
    return f"{us / 1e6:,.6f} s"


def _fmt_rate(value: float | None, unit: str) -> str:
    return DASH if value is None else f"{value:,.0f} {unit}"


def table(title: str, columns, left=(), names=()) -> Table:
    """A compact table: ``columns`` right-aligned except those in ``left``, no cell wrapped (a row is one
    line: a narrow panel cuts a cell short with …, never wraps it); the first column is as wide as the
    longest of ``names`` (the actors of the rows), so a name is never cut."""
    t = Table(title=title, expand=True, title_justify="left", pad_edge=False, box=box.SIMPLE_HEAD,
              title_style="bold", show_edge=False)
    for i, col in enumerate(columns):
        t.add_column(col, justify="left" if col in left else "right", no_wrap=True, overflow="ellipsis",
                     min_width=max(map(len, names), default=None) if i == 0 else None)
    return t


# name prefix -> role (every role but ``manager``, which spans the others)
PREFIXES = {prefix: name for name, prefixes in registry.roles().items() if name != "manager" for prefix in prefixes}
_NAME = re.compile(r"(.+?)-\d+(?:-.*)?")  # ``lm-0``, and a replica's ``lm-0-standby`` (a role's actor too)


def role(stat) -> str | None:
    """The role of the actor a statistics snapshot belongs to, from its name (``<prefix>-<number>...``)."""
    m = _NAME.fullmatch(str(field(stat, "name", "")))
    return PREFIXES.get(m.group(1)) if m else None


def kinds(snap: Snapshot) -> dict[str, list]:
    """The snapshots grouped by role (see ``role``), in actor order; crashed actors other than workers
    are in their lists as ``down`` (crashed workers show in the worker map)."""
    out: dict[str, list] = {}
    for stat in snap.stats:
        if stat is not None and (r := role(stat)) is not None:
            out.setdefault(r, []).append(stat)
    touched = set()
    for stat in snap.down:
        r = role(stat)
        if r not in (None, "worker"):
            out.setdefault(r, []).append(stat)
            touched.add(r)
    for r in sorted(touched):
        out[r].sort(key=_order)
    return out


def _delta(snap: Snapshot, prev: Snapshot | None, idx: int, name: str):
    """How much counter ``name`` of actor ``idx`` grew since ``prev`` (since the start without one,
    or when the actor restarted and its counters began again); None when it has no such counter."""
    now = field(snap.stats[idx], name)
    if now is None:
        return None
    before = field(prev.stats[idx], name) if prev is not None and idx < len(prev.stats) else None
    return now if before is None or before > now else now - before


# ---- clock ------------------------------------------------------------------------------
def clock(snap: Snapshot, prev: Snapshot | None, status: str = "") -> Panel:
    """Virtual and wall time, event and message rates, speed, jobs and delay percentiles."""
    fab = snap.fabric
    rate_e = rate_m = speed = None
    if prev is not None and snap.wall_s > prev.wall_s:
        dt = snap.wall_s - prev.wall_s
        rate_e = (fab.events - prev.fabric.events) / dt
        rate_m = (fab.sent - prev.fabric.sent) / dt
        speed = (snap.now_us - prev.now_us) / 1e6 / dt
    submitted, done, rejected, expected = snap.jobs
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("virtual", _seconds(snap.now_us), "wall", f"{snap.wall_s:,.1f} s")
    grid.add_row("events/s", _fmt_rate(rate_e, ""), "messages/s", _fmt_rate(rate_m, ""))
    grid.add_row("speed", DASH if speed is None else f"{speed:,.2f}x real time", "events",
                 f"{fab.events:,}  (windows {fab.windows:,})")
    of = "" if expected is None else f" of {expected:,}"
    grid.add_row("jobs", f"submitted {submitted:,}{of}  done {done:,}  rejected {rejected:,}", "actors",
                 f"{fab.alive:,} up of {fab.actors:,}")
    delays = DASH if snap.delays is None else "  ".join(
        f"{k} {v:.4g} s" for k, v in zip(("p50", "p90", "p99"), snap.delays))
    grid.add_row("delay", delays, "", "")
    return Panel(grid, title="clock", subtitle=status or None, border_style="bright_blue")


# ---- topology ---------------------------------------------------------------------------
def _order(stat) -> tuple:
    """Actor order by name: ``gm-2`` before ``gm-10``."""
    prefix, _, number = str(field(stat, "name", "")).rpartition("-")
    return (prefix, int(number)) if number.isdigit() else (str(field(stat, "name", "")), -1)


def _down_row(t: Table, stat) -> bool:
    """A crashed actor's row (its name and "down"); False for a live one."""
    if not field(stat, "down"):
        return False
    t.add_row(Text(stat.name, style="bold red"), Text("down", style="bold red"))
    return True


def _index(snap: Snapshot) -> dict[int, int]:
    """id(statistics object) -> actor index, to look up deltas against the previous snapshot."""
    return {id(s): i for i, s in enumerate(snap.stats) if s is not None}


def _cell(snap: Snapshot, prev: Snapshot | None, where: dict, stat, column):
    """One cell of a declared table (``actors.plugin.Column``)."""
    how, fields = column.how, column.fields
    if how == "delta":
        return _num(_delta(snap, prev, where[id(stat)], fields[0]))
    if how == "sum":
        return _num(sum(field(stat, f) or 0 for f in fields))
    if how == "pair":
        return f"{_num(field(stat, fields[0]))}/{_num(field(stat, fields[1]))}"
    if how == "max_ms":
        ages = field(stat, fields[0])
        return DASH if not ages else f"{max(ages) / 1e3:,.1f} ms"  # the stalest (its header says so)
    if how == "grid":
        lent = _delta(snap, prev, where[id(stat)], fields[1])
        return partition_grid(field(stat, fields[0]), bool(lent))
    return _num(field(stat, fields[0]))


def _caption(spec, actors: list) -> str | None:
    """A declared caption: a count of ``actors`` or a sum of a field of the live ones, per part."""
    if not spec.caption or not actors:
        return None
    live = [a for a in actors if not field(a, "down")]
    return ", ".join(f"{len(actors) if not name else sum(field(a, name, 0) for a in live):,} {words}"
                     for name, words in spec.caption)


def declared_table(spec, snap: Snapshot, prev: Snapshot | None, k: dict) -> Table:
    """A plug-in's table (``actors.plugin.Table``): a row per actor of its role, crashed ones marked down."""
    actors = k.get(spec.role, [])
    columns = [c for c in spec.columns if not c.optional or any(hasattr(a, c.fields[0]) for a in actors)]
    t = table(spec.title, (spec.header, *(c.header for c in columns)),
              left=(spec.header, *(c.header for c in columns if c.how == "grid")),
              names=[str(field(a, "name", "")) for a in actors])
    where = _index(snap)
    for stat in actors:
        if _down_row(t, stat):
            continue
        name = stat.name
        if spec.colour_by:
            name = Text(name, style=GM_COLOURS[field(stat, spec.colour_by, 0) % len(GM_COLOURS)])
        t.add_row(name, *(_cell(snap, prev, where, stat, c) for c in columns))
    t.caption = _caption(spec, k.get(spec.caption_role, []))
    return t


def declared_histogram(spec, k: dict, width: int = 40) -> Table:
    """A plug-in's histogram (``actors.plugin.Histogram``): actors of its role per bucket of a field."""
    counts = [0] * len(spec.buckets)
    for stat in k.get(spec.role, []):
        q = field(stat, spec.field, 0)
        for i, (lo, hi) in enumerate(spec.buckets):
            if q >= lo and (hi is None or q <= hi):
                counts[i] += 1
                break
    t = table(spec.title, (spec.header, spec.count_header, ""), left=(spec.header, ""))
    most = max(counts) or 1
    for (lo, hi), n in zip(spec.buckets, counts):
        label = f"{lo}" if hi == lo else f"{lo}+" if hi is None else f"{lo}-{hi}"
        t.add_row(label, f"{n:,}", Text("█" * round(width * n / most), style="cyan"))
    t.caption = _caption(spec, k.get(spec.caption_role, []))
    return t


def partition_grid(partitions, lent: bool) -> Text:
    """One cell per partition: its home GM's colour, shaded by how much of it is in use."""
    text = Text()
    if not partitions:
        return Text(DASH)
    for home, free, total in partitions:
        used = 0.0 if total <= 0 else 1.0 - free / total
        shade = SHADES[min(len(SHADES) - 1, math.ceil(used * (len(SHADES) - 1)))]
        text.append(shade * 2 if shade != " " else "··", style=GM_COLOURS[home % len(GM_COLOURS)])
        text.append(" ")
    if lent:
        text.append("<>", style="bold yellow")
    return text


def topology(snap: Snapshot, prev: Snapshot | None) -> Panel:
    """The panels the plug-ins declare (``registry.panels``) for the roles this run has actors of."""
    k = kinds(snap)
    parts = []
    for spec in registry.panels():
        if isinstance(spec, Histogram):
            if k.get(spec.when):
                parts.append(declared_histogram(spec, k))
        elif k.get(spec.role):
            parts.append(declared_table(spec, snap, prev, k))
    body = Group(*parts) if parts else Text("no scheduler statistics found in this run", style="dim")
    return Panel(body, title="topology", border_style="bright_blue")


# ---- workers ----------------------------------------------------------------------------
WORKER_STYLES = ("grey35", "yellow", "bright_red", "red")  # idle, partly busy, full, down
WORKER_LEGEND = ("idle", "busy", "full", "down")


def worker_level(stat) -> int:
    """0 idle, 1 running something with room left, 2 full (its first resource used up), 3 down."""
    if stat is None:
        return 3
    if not field(stat, "running", 0):
        return 0
    free = field(stat, "free", ())
    return 2 if free and free[0] <= 0 else 1


def worker_cells(levels: list[int], cells: int) -> list[int]:
    """``levels`` folded into at most ``cells`` groups: a group shows its worst (busiest) member."""
    n = len(levels)
    if n <= cells:
        return list(levels)
    size = math.ceil(n / cells)
    return [max(levels[i:i + size]) for i in range(0, n, size)]


def workers(snap: Snapshot, width: int, height: int) -> Panel:
    """A dense map of every worker (half-block cells: two per character), coloured by state; a
    large cluster is folded so that one cell stands for a group (readable at 10,000 workers)."""
    levels = [worker_level(snap.stats[i]) for i in snap.workers]
    inner_w, inner_h = max(width - 4, 4), max(height - 4, 1)
    cells = worker_cells(levels, inner_w * inner_h * 2)
    per = math.ceil(len(levels) / len(cells)) if cells else 1
    cols = max(1, min(inner_w, len(cells)))
    text = Text(no_wrap=True, overflow="crop")
    for start in range(0, len(cells), 2 * cols):
        if start:
            text.append("\n")
        top, bottom = cells[start:start + cols], cells[start + cols:start + 2 * cols]
        for c, level in enumerate(top):
            under = f" on {WORKER_STYLES[bottom[c]]}" if c < len(bottom) else ""
            text.append("▀", style=WORKER_STYLES[level] + under)
    counts = [levels.count(i) for i in range(len(WORKER_LEGEND))]
    legend = Text("  ").join(Text(f"■ {label} {n:,}", style=WORKER_STYLES[i])
                             for i, (label, n) in enumerate(zip(WORKER_LEGEND, counts)))
    title = f"workers ({len(levels):,}" + (f", {per} per cell" if per > 1 else "") + ")"
    return Panel(Group(text, legend), title=title, border_style="bright_blue")


# ---- faults and events ------------------------------------------------------------------
def faults(snap: Snapshot, log, height: int) -> Panel:
    """Active faults (crashed actors, network faults) and the latest events, newest last."""
    down = [name for name, s in zip(snap.names, snap.stats) if s is None]
    lines = []
    if down:
        shown = ", ".join(down[:8]) + (f" and {len(down) - 8} more" if len(down) > 8 else "")
        lines.append(Text(f"crashed: {shown}", style="bold red"))
    lines.extend(Text(line, style="red") for line in snap.network)
    if not lines:
        lines.append(Text("no active faults", style="green"))
    room = max(height - 3 - len(lines), 1)
    for t_us, text, style in list(log)[-room:]:
        lines.append(Text.assemble((f"{t_us / 1e6:>12,.6f} ", "dim"), (text, style)))
    return Panel(Group(*lines), title="faults and events", border_style="bright_blue")


def fairness(snap: Snapshot) -> Panel | None:
    """Per user its share of the cluster against its target; None when the run has no users."""
    if not snap.shares:
        return None
    t = table("", ("user", "share", "target", ""), left=("user", ""))
    for user, share, target in snap.shares:
        bar = Text("█" * round(20 * share), style="green" if share >= target else "yellow")
        t.add_row(str(user), f"{share:.1%}", f"{target:.1%}", bar)
    return Panel(t, title="fairness", border_style="bright_blue")


KEYS_HELP = "space pause/resume  n step  +/- pace  g seek  q quit"


def status_line(state: str, pace: str, keys: str = KEYS_HELP, note: str = "") -> Text:
    """The bottom line: running/paused, pace, the keys, and a note (replay mode, prompts)."""
    style = "bold black on yellow" if state.startswith("PAUSED") else "bold black on green"
    text = Text.assemble((f" {state} ", style), "  ", (f"pace {pace}", "bold"), "  ", (keys, "dim"))
    if note:
        text.append(f"  {note}", style="italic")
    text.no_wrap, text.overflow = True, "ellipsis"  # one line, whatever the width
    return text
