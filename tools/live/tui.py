"""The live view (``--tui``): a full-screen rich dashboard of a run, sampled through the fabric's
progress hook.

The hook (``LiveView.__call__``) runs between two of the fabric's windows. It reads statistics
snapshots, never changes an actor, and is the only place that waits: pausing blocks inside it,
pacing sleeps inside it, stepping lets exactly one more window through. So the keys only delay the
fabric's steps, and a run has the same digest with and without the view. Frames are drawn at about
10 Hz of wall time; at full speed less often when a frame is expensive (a frame may cost at most
about 5% of the wall time), and the hook is called every ``EVERY`` windows (every window while
paused, paced or seeking). Paced, the hook runs after a window is delivered, so an idle gap in
virtual time shows at once and the wait for it follows.

``fedemu replay LOG --tui`` cannot rebuild actor state from the journal's records alone (they hold
messages, not queues or free capacity), so it re-runs the journal's scenario, seed and params with
the view, which is the same run, and checks the digest against the journal's footer at the end. A
seek runs at full speed to the requested virtual time and pauses there; a seek backwards starts the
re-run again from the beginning.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import os
import select
import sys
import time

import numpy as np
from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from fedemu.fabric.errors import ConfigError
from fedemu.model import seconds_to_us

from . import tui_panels as panels
from ..run.progress import progress_bar
from .tui_panels import Snapshot

PACES = (1.0, 10.0, 100.0, 1000.0, None)  # virtual seconds per wall second; None: as fast as it goes
FRAME_S = 0.1  # the wall time between frames, at least
FRAME_SHARE = 0.05  # at full speed a frame costs at most about this share of the wall time (frames thin out)
EVERY = 64  # windows between hook calls at full speed (each call only reads the clock)
LOG_LINES = 200
EVENT_STYLES = {"warning": "red", "info": "yellow"}  # event-log lines by level (debug: plain)


def pace_name(pace: float | None) -> str:
    return "max" if pace is None else f"{pace:g}x"


def parse_pace(text: str) -> float | None:
    """``max`` or a virtual/wall ratio such as ``1``, ``10x``; a ValueError otherwise."""
    text = text.strip().lower()
    if text == "max":
        return None
    value = float(text[:-1] if text.endswith("x") else text)
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(text)
    return value


class Rewind(BaseException):
    """Raised out of the fabric by a seek backwards in replay mode: the re-run starts again."""

    def __init__(self, to_us: int) -> None:
        super().__init__(to_us)
        self.to_us = to_us


# ---- sampling ---------------------------------------------------------------------------
class Augmented:
    """A statistics snapshot plus fields the view adds (``extra``: ``down`` for a crashed actor's last one)."""

    __slots__ = ("_stat", "_extra")

    def __init__(self, stat, extra: dict) -> None:
        self._stat = stat
        self._extra = extra

    def __getattr__(self, name):
        extra = self._extra
        if name in extra:
            return extra[name]
        return getattr(self._stat, name)


class JobsSoFar:
    """Jobs submitted, completed and rejected so far, and the delay percentiles of the completed
    ones, kept up to date incrementally from the run's recorder."""

    def __init__(self) -> None:
        self.seen = 0
        self.pending: list = []
        self.delays: list[int] = []

    def update(self, recorder) -> tuple[tuple, tuple | None]:
        if recorder is None:
            return (0, 0, 0, None), None
        jobs = recorder.jobs
        if len(jobs) > self.seen:
            self.pending.extend(itertools.islice(jobs.values(), self.seen, None))
            self.seen = len(jobs)
        still = []
        for job in self.pending:
            if job.completion_us >= 0:
                self.delays.append(job.completion_us - job.arrival_us - job.ideal_jrt_us)
            else:
                still.append(job)
        self.pending = still
        rejected = len(recorder.unschedulable)
        counts = (len(jobs), len(self.delays), rejected, recorder.expected)
        if not self.delays:
            return counts, None
        p = np.percentile(np.asarray(self.delays, dtype=np.float64), (50, 90, 99)) / 1e6
        return counts, tuple(float(x) for x in p)


def _names(fabric, ids) -> str:
    names = sorted(fabric.name_of(i) for i in ids)
    return ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")


def network_lines(fabric) -> tuple[str, ...]:
    """The network's active faults, as lines: partitions, slow links and lossy links."""
    net = fabric.network
    lines = [f"partition: {{{_names(fabric, a)}}} | {{{_names(fabric, b)}}}" for a, b in getattr(net, "partitions", ())]
    for kind, table, unit in (("slow", getattr(net, "slow", {}), "x latency"),
                              ("loss", getattr(net, "loss", {}), " loss")):
        for (a, b), value in sorted(table.items()):
            if a < b:
                lines.append(f"{kind}: {fabric.name_of(a)} <-> {fabric.name_of(b)} {value:g}{unit}")
    value = getattr(net, "default_loss", None)
    if value:
        lines.append(f"loss: every link {value:g}")
    return tuple(lines)


COUNTERS = (("failovers", "failovers", "bold red"), ("preemptions", "preemptions", "magenta"),
            ("failures", "invalid requests answered", "yellow"), ("invalid_internal", "invalid internal", "yellow"),
            ("invalid_external", "invalid external", "yellow"), ("repartitions", "repartitions", "cyan"),
            ("rejected", "jobs rejected", "red"))


class Sampler:
    """Turns a running fabric into Snapshots, and keeps the event log: faults as they take
    effect, crashes and restarts, and growth of the counters in ``COUNTERS`` per sample."""

    def __init__(self, fabric) -> None:
        self.fabric = fabric
        self.t0 = time.perf_counter()
        self.jobs = JobsSoFar()
        self.workers: tuple | None = None
        self.known: list = [None] * len(fabric.names)  # each actor's latest statistics, kept across a crash
        self.log: collections.deque = collections.deque(maxlen=LOG_LINES)
        self.logged_faults: set[int] = set()
        self.prev: Snapshot | None = None
        self.last: Snapshot | None = None

    def sample(self, run) -> Snapshot:
        fabric = self.fabric
        events = getattr(fabric, "event_log", None)
        if events is not None:  # every line before this window is final: show it now, not at the end
            events.flush(fabric.now)
        stats = []
        for i in range(len(fabric.names)):
            actor = fabric.actor(i)
            stats.append(actor.statistics() if actor is not None and hasattr(actor, "statistics") else None)
        known = self.known
        down = []
        for i, stat in enumerate(stats):
            if stat is not None:
                known[i] = stat
            elif known[i] is not None:
                down.append(Augmented(known[i], {"down": True}))
        if self.workers is None:
            self.workers = tuple(i for i, s in enumerate(stats) if s is not None and hasattr(s, "running")
                                 and hasattr(s, "free"))
        counts, delays = self.jobs.update(getattr(run, "recorder", None))
        snap = Snapshot(fabric.now, time.perf_counter() - self.t0, fabric.statistics(), tuple(fabric.names),
                        tuple(stats), counts, delays, network_lines(fabric), shares(run), self.workers, tuple(down))
        self._events(snap)
        self.prev, self.last = self.last, snap
        return snap

    def _events(self, snap: Snapshot) -> None:
        """Log what happened since the last sample, stamped with this sample's virtual time."""
        t = snap.now_us
        for i, resolved in enumerate(getattr(self.fabric, "_faults", ())):
            fault = resolved.fault
            if i not in self.logged_faults and fault.at_us <= t:
                self.logged_faults.add(i)
                target = " | ".join(f"{{{', '.join(side)}}}" for side in fault.target) \
                    if fault.kind == "partition" else " ".join(map(str, fault.target))
                value = f" {fault.value:g}" if fault.kind in ("slow", "loss") else ""
                self.log.append((fault.at_us, f"fault {fault.kind} {target}{value}".rstrip(), "bold red"))
        prev = self.last
        if prev is None:  # the first sample is the baseline the next ones are counted from
            return
        for i, (name, stat) in enumerate(zip(snap.names, snap.stats)):
            before = prev.stats[i]
            if (before is None) != (stat is None):
                self.log.append((t, f"{name} {'restarted' if stat is not None else 'crashed'}", "bold red"))
            if stat is None:
                continue
            grew, style = [], None
            for counter, what, colour in COUNTERS:
                now = panels.field(stat, counter)
                old = panels.field(before, counter, 0) if before is not None else 0
                if now and now > old:
                    grew.append(f"{now - old:,} {what}")
                    style = style or colour
            if grew:
                self.log.append((t, f"{name}: {', '.join(grew)}", style))


def shares(run) -> tuple:
    """(user, share, target) per user when the run reports them (``run.shares()``), else empty."""
    get = getattr(run, "shares", None)
    return tuple(get()) if callable(get) else ()


# ---- the screen -------------------------------------------------------------------------
def frame(snap: Snapshot, prev: Snapshot | None, log, size: tuple[int, int], status: Text, title: str = ""):
    """The whole dashboard for a terminal of ``size`` (columns, rows): fewer panels when it is small.

    Built from fixed-height panels in a grid, not rich's Layout: a Layout keeps reference cycles,
    and while the fabric runs the garbage collector is off, so every frame would stay in memory."""
    width, height = size
    if width < 60 or height < 20:
        return Group(Text(f"virtual {snap.now_us / 1e6:,.6f} s  events {snap.fabric.events:,}  "
                          f"(terminal too small for the panels: {width}x{height})"), status)
    clock = panels.clock(snap, prev, title)
    clock.height = 7
    parts = [clock]
    body_h = height - 7 - 1
    if body_h >= 8:
        faults_h = min(12, max(5, body_h // 3)) if body_h >= 16 else 0
        top_h = body_h - faults_h
        topology = panels.topology(snap, prev)
        topology.height = top_h
        if width >= 100:
            right_w = width * 2 // 5
            workers = panels.workers(snap, right_w, top_h)
            workers.height = top_h
            parts.append(_row((topology, None), (workers, right_w)))
        else:
            parts.append(topology)
        if faults_h:
            faults = panels.faults(snap, log, faults_h)
            faults.height = faults_h
            fair = panels.fairness(snap)
            if fair is not None:
                fair.height = faults_h
                parts.append(_row((faults, None), (fair, width * 2 // 5)))
            else:
                parts.append(faults)
    parts.append(status)
    return Group(*parts)


def _row(*cells) -> Table:
    """Panels side by side: ``(panel, width)``, a width of None taking the rest of the line."""
    grid = Table.grid(expand=True)
    for _, width in cells:
        grid.add_column(ratio=1 if width is None else None, width=width)
    grid.add_row(*(panel for panel, _ in cells))
    return grid


class Keys:
    """Single key presses from a terminal (cbreak mode while inside; restored on the way out)."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        self._saved = None

    def __enter__(self) -> "Keys":
        if self.fd is not None and os.isatty(self.fd):
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setcbreak(self.fd)
        return self

    def __exit__(self, *exc) -> None:
        if self._saved is not None:
            import termios

            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def read(self, timeout: float = 0.0) -> str:
        """What was typed within ``timeout`` seconds ('' when nothing); escape sequences (arrows) dropped."""
        if self.fd is None:
            if timeout:
                time.sleep(timeout)
            return ""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return ""
        data = os.read(self.fd, 64).decode(errors="replace")
        return data if not (data.startswith("\x1b") and len(data) > 1) else ""


class LiveView:
    """The fabric's progress hook while the dashboard is up; see the module docstring.

    ``partial`` is set when ``q`` ended the run early (the runner marks the results partial)."""

    def __init__(self, console: Console, keys: Keys, *, paused: bool = False, pace: float | None = None,
                 seek_us: int | None = None, title: str = "", replay: bool = False) -> None:
        self.console = console
        self.keys = keys
        self.paused = paused
        self.pace = pace
        self.seek_us = seek_us
        self.title = title
        self.replay = replay
        self.sampler: Sampler | None = None
        self.run = None
        self.partial: dict | None = None
        self.quit = False
        self.early: list = []  # event-log lines that came before the first sample
        self.steps = 0
        self.prompt: str | None = None
        self.note = ""
        self.live = Live(console=console, screen=True, auto_refresh=False, redirect_stdout=False,
                         redirect_stderr=False)
        self.next_frame = 0.0
        self.frame_s = FRAME_S
        self.anchor: tuple[float, int] | None = None
        self.spent = 0.0  # wall time spent drawing frames at full speed (the view's cost to the run)

    def __enter__(self) -> "LiveView":
        self.live.start()
        return self

    def __exit__(self, *exc) -> None:
        self.live.stop()

    @property
    def every(self) -> int:
        """Windows between hook calls: 1 while paused, paced or seeking, else ``EVERY``."""
        return 1 if self.paused or self.pace is not None or self.seek_us is not None else EVERY

    def event_line(self, line: str) -> None:
        """One line of the run's event log (the runner gives the view one, file or not): into the
        scrolling log, stamped with its own virtual time."""
        try:
            record = json.loads(line)
        except ValueError:
            return
        fields = " ".join(f"{k}={v}" for k, v in record.items()
                          if k not in ("vtime_us", "vtime_s", "level", "actor", "event"))
        style = EVENT_STYLES.get(record.get("level"), None)
        entry = (record.get("vtime_us", 0), f"{record.get('actor', '?')} {record.get('event', '?')} {fields}".rstrip(),
                 style)
        (self.sampler.log if self.sampler is not None else self.early).append(entry)

    # ---- the hook -----------------------------------------------------------------------
    def __call__(self, fabric, run) -> None:
        if self.sampler is None or self.sampler.fabric is not fabric:
            self.sampler, self.run, self.anchor = Sampler(fabric), run, None
            self.sampler.log.extend(self.early)
            self.early.clear()
            self._cadence(fabric)
        if self.quit:
            return
        now = time.perf_counter()
        if self.seek_us is not None:
            if fabric.now < self.seek_us:
                if now >= self.next_frame:
                    self._keys(fabric, self.keys.read())
                    self.draw()
                return
            self.seek_us, self.paused = None, True
            self.note = f"seeked to {fabric.now / 1e6:,.6f} s"
            self._cadence(fabric)
        if self.pace is not None:
            self._hold(fabric)
        elif now >= self.next_frame:
            self._keys(fabric, self.keys.read())
            self.draw()
        if self.paused and not self.quit:
            self.draw()  # where the pause or the step landed
        while self.paused and not self.quit:
            if self.steps:  # 'n': let one window through
                self.steps -= 1
                return
            typed = self.keys.read(FRAME_S)
            if typed:
                self._keys(fabric, typed)
                if self.steps:
                    continue
            if typed or time.perf_counter() >= self.next_frame:
                self.draw()

    def _cadence(self, fabric) -> None:
        """Every window while paused, paced or seeking; every ``every`` windows at full speed."""
        fabric.progress_every = self.every

    def _hold(self, fabric) -> None:
        """Keep virtual time at most ``pace`` times wall time: sleep (drawing, reading keys) until due."""
        now = time.perf_counter()
        if self.anchor is None:
            self.anchor = (now, fabric.now)
        wall0, virt0 = self.anchor
        due = wall0 + (fabric.now - virt0) / 1e6 / self.pace
        if now - due > 0.5:  # the emulation is slower than the pace: do not race to catch up
            self.anchor = (now, fabric.now)
        while self.pace is not None and not self.paused and not self.quit and due > now:
            typed = self.keys.read(min(due - now, FRAME_S))
            if typed:
                self._keys(fabric, typed)
            now = time.perf_counter()
            if now >= self.next_frame:
                self.draw()
            if self.anchor is None:  # the pace changed: measure from here
                return
        if now >= self.next_frame:  # behind the pace (or just due): keys and a frame all the same
            self._keys(fabric, self.keys.read())
            self.draw()

    def _keys(self, fabric, typed: str) -> None:
        """Act on what was typed (each ``n`` while paused is one more window to let through)."""
        for key in typed:
            if self.prompt is not None:
                self._prompt_key(fabric, key)
            elif key == " ":
                self.paused, self.steps, self.anchor = not self.paused, 0, None
            elif key == "n" and self.paused:
                self.steps += 1
            elif key in "+=":
                self.pace = PACES[min(PACES.index(self.pace) + 1, len(PACES) - 1)] if self.pace in PACES else None
                self.anchor = None
            elif key in "-_":
                self.pace = PACES[max(PACES.index(self.pace) - 1, 0)] if self.pace in PACES else PACES[0]
                self.anchor = None
            elif key == "g":
                self.prompt = ""
            elif key in "qQ":
                self._quit(fabric)
                return
        self._cadence(fabric)

    def _prompt_key(self, fabric, key: str) -> None:
        """Typing a virtual time after ``g``: digits and '.', Enter seeks, Escape cancels."""
        if key in "\r\n":
            text, self.prompt = self.prompt, None
            try:
                to_us = seconds_to_us(float(text))
            except (ValueError, OverflowError):
                self.note = f"not a time: {text!r}"
                return
            if to_us < fabric.now:
                if self.replay:
                    raise Rewind(to_us)
                self.note = "a live run cannot go back; `fedemu replay LOG --tui` can"
                return
            self.seek_us, self.paused, self.note = to_us, False, f"seeking to {to_us / 1e6:,.6f} s"
        elif key == "\x1b":
            self.prompt = None
        elif key in "\x7f\b":
            self.prompt = self.prompt[:-1]
        elif key.isdigit() or key == ".":
            self.prompt += key

    def _quit(self, fabric) -> None:
        self.quit, self.paused, self.seek_us = True, False, None
        self.partial = {"stopped_at_s": fabric.now / 1e6, "by": "q in the live view"}
        fabric.stop()
        self.draw()

    # ---- drawing ------------------------------------------------------------------------
    def state(self) -> str:
        if self.quit:
            return "QUIT (partial results)"
        if self.seek_us is not None:
            return f"SEEKING to {self.seek_us / 1e6:,.6f} s"
        return "PAUSED" if self.paused else "RUNNING"

    def status(self) -> Text:
        note = self.note if self.prompt is None else f"seek to virtual time (s): {self.prompt}_  (Enter, Esc)"
        if self.sampler is not None and self.spent:
            note = f"frames {self.spent / max(time.perf_counter() - self.sampler.t0, 1e-9):.1%} of wall  {note}"
        return panels.status_line(self.state(), pace_name(self.pace), note=note)

    def draw(self, final: str | None = None) -> None:
        """Sample and draw one frame; frames thin out when one costs more than FRAME_SHARE of the time."""
        if self.sampler is None:
            return
        start = time.perf_counter()
        snap = self.sampler.sample(self.run)
        status = self.status() if final is None else panels.status_line(final, pace_name(self.pace), keys="")
        self.live.update(frame(snap, self.sampler.prev, self.sampler.log, tuple(self.console.size), status,
                               self.title), refresh=True)
        end = time.perf_counter()
        full_speed = self.pace is None and not self.paused
        if full_speed:
            self.spent += end - start
        self.frame_s = max(FRAME_S, (end - start) / FRAME_SHARE) if full_speed else FRAME_S
        self.next_frame = end + self.frame_s

    def linger(self, message: str) -> None:
        """The run is over: show its last state with ``message`` until a key is pressed."""
        if self.sampler is None:
            return
        if self.spent:
            share = self.spent / max(time.perf_counter() - self.sampler.t0, 1e-9)
            message = f"{message}  (frames took {share:.1%} of the run's wall time)"
        self.paused = True  # these frames are not the run's cost
        self.draw(final=message)
        while not self.keys.read(0.5):
            self.draw(final=message)


# ---- entry points ---------------------------------------------------------------------------
def terminal_ok() -> bool:
    """The view needs a terminal on stdin (keys) and stdout (the screen)."""
    return sys.stdin.isatty() and sys.stdout.isatty()


def pace_option(text: str | None) -> float | None:
    """``--pace``: ``max`` or a ratio (``1``, ``10x``); anything else is a ConfigError."""
    if text is None:
        return None
    try:
        return parse_pace(text)
    except ValueError:
        raise ConfigError(f"--pace {text!r}: expected max or a virtual/wall ratio such as 1, 10 or 100") from None


@contextlib.contextmanager
def progress_for(args):
    """What ``fedemu run`` hands the fabric as its progress hook: the live view with ``--tui`` on a
    terminal (lingering on the last frame until a key is pressed), else the progress bar (with a
    note when ``--tui`` was asked for without a terminal)."""
    tui = getattr(args, "tui", False)
    if not tui and (getattr(args, "paused", False) or getattr(args, "pace", None) is not None):
        raise ConfigError("--paused and --pace control the live view: add --tui")
    pace = pace_option(getattr(args, "pace", None))
    if tui and not terminal_ok():
        print("fedemu: note: --tui needs a terminal on stdin and stdout; showing the progress bar instead",
              file=sys.stderr)
        tui = False
    if not tui:
        with progress_bar(enabled=not args.quiet) as progress:
            yield progress
        return
    with live_view(paused=args.paused, pace=pace, title=f"{args.scenario} seed {args.seed}") as view:
        yield view
        if not view.quit:
            view.linger("FINISHED; press any key to leave")


@contextlib.contextmanager
def live_view(**kwargs):
    """Keys in cbreak mode and the dashboard on the alternate screen, both undone on the way out."""
    with Keys(sys.stdin.fileno()) as keys, LiveView(Console(), keys, **kwargs) as view:
        yield view


def replay_live(log_path, *, seek_s: float | None, paused: bool, pace: float | None, scenario_file=None) -> int:
    """``fedemu replay LOG --tui``: re-run the journal's scenario (the built-in one its header names, or
    ``scenario_file``: never a file the journal names) with the dashboard (the journal holds messages, not
    actor state) and check the digest against the journal's footer."""
    from fedemu.fabric.journal import check

    from ..run import runner
    from ..replay.replay import overrides_of, scenario_of

    reader = check(log_path)
    header = reader.header
    ref = scenario_of(header, scenario_file)
    if not terminal_ok():
        raise ConfigError("--tui needs a terminal on stdin and stdout; `fedemu replay LOG --verify` checks a "
                          "journal without one")
    expected = (reader.footer or {}).get("digest")
    seek_us = None if seek_s is None else seconds_to_us(seek_s)
    title = f"replay of {os.path.basename(str(log_path))}: re-running {ref} seed {header['seed']}"
    with live_view(paused=paused and seek_us is None, pace=pace, seek_us=seek_us, title=title, replay=True) as view:
        view.note = "actor state is not in the journal: re-running it from the header (same run)"
        while True:
            try:
                result = runner.execute(ref, seed=header["seed"], overrides=overrides_of(header, ref),
                                        progress=view, faults=runner.recorded_faults(header))
                break
            except Rewind as back:
                view.seek_us, view.paused, view.sampler = back.to_us, False, None
                view.note = f"seeking back to {back.to_us / 1e6:,.6f} s: re-running from the start"
        if view.quit:
            verdict, status = f"stopped early at {view.partial['stopped_at_s']:,.6f} s (q): digest not compared (partial)", 130
        elif result.digest == expected:
            verdict, status = f"replayed: digest {result.digest} matches the journal's footer", 0
        else:
            verdict, status = f"DIVERGED: digest {result.digest}, the journal's footer says {expected}", 1
        if not view.quit:
            view.linger(verdict + "; press any key to leave")
    print(verdict)
    return status
