"""Reading a user's input file (fault plans, constraint tables, cost models) whole, with one-line errors
and a size limit: such a file is small, and one that is not (a device, a huge or endless file) is
refused before it fills memory. Traces are read line by line instead (``scenarios.trace``). Every input
(journals and traces too) is opened with ``open_regular``: a FIFO or a device is refused, never waited on."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .atomic import kind_of
from .errors import ConfigError

MAX_INPUT_BYTES = 16 << 20  # a plan, table or model larger than this is refused (real ones hold kilobytes)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def open_regular(path, what: str, mode: str = "rb", error=ConfigError, **kwargs):
    """``path`` opened for reading if it is a regular file; anything else (a FIFO, which would block for
    ever with no writer, a device, a socket, a folder) raises ``error`` naming it and ``what`` it should
    have been. Opened without blocking, then checked on the open file, so the check is of what is read;
    an OSError of the open itself (no such file, no permission) is the caller's to word."""
    fd = os.open(path, _READ_FLAGS)
    try:
        mode_bits = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode_bits):
            raise error(f"{path}: is {kind_of(mode_bits)}, not a regular file; expected {what}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def read_text(path, what: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of ``path`` (at most ``limit`` bytes); a missing file, a folder, an unreadable or
    larger file is a ConfigError that names the path and ``what`` it should have been (e.g. "a
    constraint table JSON file")."""
    path = Path(path)
    try:
        with open_regular(path, what) as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; expected {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None
    if len(data) > limit:
        raise ConfigError(f"{path}: larger than {limit >> 20} MiB; {what} is at most that (is it the right file?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None
