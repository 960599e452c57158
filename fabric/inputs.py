"""Reading a user's input file (fault plans, constraint tables, cost models) whole, with one-line errors
and a size limit: such a file is small, and one that is not (a device, a huge or endless file) is
refused before it fills memory. Traces are read line by line instead (``scenarios.trace``)."""

from __future__ import annotations

from pathlib import Path

from .errors import ConfigError

MAX_INPUT_BYTES = 16 << 20  # a plan, table or model larger than this is refused (real ones hold kilobytes)


def read_text(path, what: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of ``path`` (at most ``limit`` bytes); a missing file, a folder, an unreadable or
    larger file is a ConfigError that names the path and ``what`` it should have been (e.g. "a
    constraint table JSON file")."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; expected {what}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory; expected {what}") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None
    if len(data) > limit:
        raise ConfigError(f"{path}: larger than {limit >> 20} MiB; {what} is at most that (is it the right file?)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None
