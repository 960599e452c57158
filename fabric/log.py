"""structlog set up for replayable runs: level, actor and virtual time, never a wall-clock stamp."""

from __future__ import annotations

import sys

import structlog

_configured = False


def configure(stream=None) -> None:
    """Human-readable key=value lines on ``stream`` (stderr), without structlog's default TimeStamper."""
    global _configured
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    _configured = True


def get_logger(**bound):
    """A logger bound to ``bound`` (e.g. actor and vtime_us); configures structlog on first use."""
    if not _configured and not structlog.is_configured():
        configure()
    return structlog.get_logger().bind(**bound)
