"""Reading a user's input file (a trace's neighbours: constraint tables, fault plans) with one-line errors."""

from __future__ import annotations

from pathlib import Path

from fedemu.fabric.errors import ConfigError


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of ``path``; a missing file, a folder or an unreadable file is a ConfigError that
    names the path and ``what`` it should have been (e.g. "a constraint table JSON file")."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file; expected {what}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory; expected {what}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc}") from None
