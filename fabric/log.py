"""structlog for replayable runs: the protocol event log (``fedemu run --log FILE``) and a console
fallback. Every record carries the actor and its virtual time, never a wall-clock stamp.

Actors log protocol events (``Event``: name, level, meaning) with ``emit(self, EVENT, **fields)``,
behind ``if self.fabric.event_log is not None:`` so that a run without an event log builds no logger
and no field dict. With an ``EventLog`` attached, ``Actor.log`` is a structlog logger whose
processors add the level, put the fixed keys first and render one JSON line (``JSONRenderer``).
Lines wait in a buffer and are written sorted by (virtual time, actor index), a stable sort, so each
actor's own lines keep their order: actors woken in one window run in trio's order, which must not
reach the file. A line older than the current window start is final (nothing later in the run can
come before it), so the buffer is written up to there whenever it grows past ``batch`` lines.
"""

from __future__ import annotations

import os
import sys
from operator import itemgetter

import attrs

from . import atomic
from .atomic import PendingFile
from .errors import ConfigError


# ---- the protocol events ---------------------------------------------------------------
@attrs.frozen
class Event:
    """One protocol event: its name, the level it is logged at, and what it means. The events are
    declared beside the actors that log them (``actors/common/events.py`` and each scheduler's)."""

    name: str
    level: str
    meaning: str


LEVELS = {"debug": 10, "info": 20, "warning": 30}
_HEAD = ("vtime_us", "vtime_s", "level", "actor", "event")


def emit(actor, event: Event, **fields) -> None:
    """Log protocol event ``event`` from ``actor`` at the event's level; nothing when the run has no
    event log or the level is filtered out."""
    level = LEVELS[event.level]
    events = actor.fabric.event_log
    if events is not None and level >= events.min_level:
        getattr(actor.log, event.level)(event.name, **fields)


def _plain(value):
    """JSON for what event fields hold besides str/int/float/bool/list/tuple: numpy integers; anything
    else is a bug (a repr could hold a memory address and vary between runs)."""
    if hasattr(value, "__index__"):
        return value.__index__()
    raise TypeError(f"event field of type {type(value).__name__} is not plain JSON")


def _fixed_keys_first(logger, method_name, event_dict):
    """Put time, level, actor and event first, then the event's own fields in the order given."""
    head = {k: event_dict.pop(k) for k in _HEAD if k in event_dict}
    head.update(event_dict)
    return head


class _Line:
    """The structlog 'logger' of one actor at one virtual time: hands the rendered line to the log."""

    __slots__ = ("events", "t_us", "actor_id")

    def __init__(self, events: EventLog, t_us: int, actor_id: int) -> None:
        self.events, self.t_us, self.actor_id = events, t_us, actor_id

    def msg(self, line: str) -> None:
        self.events._add(self.t_us, self.actor_id, line)

    debug = info = warning = error = critical = msg


_ORDER = itemgetter(0, 1)


class EventLog:
    """One run's protocol events as JSON lines in ``path`` (through ``fabric.atomic``: a temporary file
    renamed into place at ``close``, like the journal), at ``level`` and above; ``on_line`` also sees each
    line as written. With ``path`` None nothing is written to disk: the lines go to ``on_line`` only (the
    live view); with ``path`` ``-`` they go to standard output as they become final."""

    def __init__(self, path, level: str = "info", *, on_line=None, batch: int = 4096) -> None:
        if level not in LEVELS:
            raise ConfigError(f"--log-level {level!r}: known levels are {', '.join(LEVELS)}")
        self.path = None if path is None else os.fspath(path)
        self.level = level
        self.min_level = LEVELS[level]
        self.on_line = on_line
        self.batch = batch
        self.written = 0
        self.fabric = None
        self._output = None  # the PendingFile of a log on disk
        try:
            if path is None:
                self._file = _Discard()
            elif self.path == atomic.STDOUT:
                self._file = _Stdout()
            else:
                self._output = PendingFile(self.path, "w", newline="\n", option="--log")
                self._file = self._output.file
        except OSError as e:
            raise ConfigError(f"--log {self.path}: {e.strerror or e}") from None
        self._pending: list[tuple[int, int, str]] = []
        self._final_before = 0  # every line before this virtual time has been written
        import structlog  # (here, not at the top: a run without an event log never loads it, nor rich)

        self._bound = structlog.make_filtering_bound_logger(self.min_level)
        self._processors = [structlog.processors.add_log_level, _fixed_keys_first,
                            structlog.processors.JSONRenderer(default=_plain, ensure_ascii=False)]

    def attach(self, fabric) -> None:
        """Make this the event log of ``fabric``'s actors."""
        self.fabric = fabric
        fabric.event_log = self

    def logger(self, actor_id: int, name: str, now_us: int):
        """A structlog logger for actor ``actor_id`` (``name``) at virtual time ``now_us``."""
        return self._bound(_Line(self, now_us, actor_id), self._processors,
                           {"vtime_us": now_us, "vtime_s": now_us / 1e6, "actor": name})

    def _add(self, t_us: int, actor_id: int, line: str) -> None:
        if t_us < self._final_before:
            raise AssertionError(f"event log: a line at {t_us} us after every line before "
                                 f"{self._final_before} us was written")
        pending = self._pending
        pending.append((t_us, actor_id, line))
        if len(pending) >= self.batch and self.fabric is not None:
            self.flush(self.fabric.now)

    def flush(self, before_us: int | None = None) -> None:
        """Write the buffered lines older than ``before_us`` (all when None), in order; the rest wait.
        ``before_us`` must not be later than the start of the window the fabric is in."""
        pending = self._pending
        if before_us is None:
            ready, self._pending = pending, []
        else:
            ready = [r for r in pending if r[0] < before_us]
            self._pending = [r for r in pending if r[0] >= before_us]
            self._final_before = max(self._final_before, before_us)
        ready.sort(key=_ORDER)
        write, on_line = self._file.write, self.on_line
        for _, _, line in ready:
            write(line + "\n")
            if on_line is not None:
                on_line(line)
        self.written += len(ready)

    def close(self) -> None:
        """Write every buffered line, then rename the file into place."""
        if self._file is None:
            return
        self.flush()
        self._file = None
        if self._output is not None:
            self._output.commit()
        if self.fabric is not None:
            self.fabric.event_log = None

    def abort(self) -> None:
        """Drop the half-written log (an interrupted run leaves no temporary file behind)."""
        if self._file is None:
            return
        self._file = None
        if self._output is not None:
            self._output.abort()
        if self.fabric is not None:
            self.fabric.event_log = None


class _Discard:
    """Where an event log without a file writes: nowhere (its lines reach ``on_line`` only)."""

    def write(self, text: str) -> None:
        pass


class _Stdout:
    """Where ``--log -`` writes: standard output, as it is when the line is written (tests swap it)."""

    def write(self, text: str) -> None:
        sys.stdout.write(text)


# ---- the console fallback ----------------------------------------------------------------
_configured = False


def configure(stream=None) -> None:
    """Human-readable key=value lines on ``stream`` (stderr), without structlog's default TimeStamper."""
    global _configured
    import structlog

    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    _configured = True


def get_logger(**bound):
    """A logger bound to ``bound`` (e.g. actor and vtime_us); configures structlog on first use."""
    import structlog

    if not _configured and not structlog.is_configured():
        configure()
    return structlog.get_logger().bind(**bound)
