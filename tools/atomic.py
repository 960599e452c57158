"""Crash-safe file writes: write a temp file beside the target, fsync it, then ``os.replace``.

A reader sees either the old file or the complete new one, never a half-written file.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from pathlib import Path
from typing import IO, Iterator

_serial = itertools.count()


def _create_temp(target: Path) -> tuple[int, Path]:
    """Create an unused ``.<name>.<pid>.<n>.tmp`` beside target (mode 0o666 minus umask)."""
    while True:
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{next(_serial)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue


@contextlib.contextmanager
def atomic_write(
    path, mode: str = "w", *, encoding: str = "utf-8", newline: str | None = None
) -> Iterator[IO]:
    """Yield a file open on a temp file; on success it replaces ``path``, on error it is deleted."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_write mode must be 'w' or 'wb', got {mode!r}")
    target = Path(path)
    fd, tmp = _create_temp(target)
    try:
        try:
            f = os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": encoding, "newline": newline}))
        except BaseException:
            os.close(fd)
            raise
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write_text(path, text: str, *, encoding: str = "utf-8") -> None:
    """Atomically replace ``path`` with ``text``."""
    with atomic_write(path, "w", encoding=encoding) as f:
        f.write(text)


def write_bytes(path, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``."""
    with atomic_write(path, "wb") as f:
        f.write(data)


def write_json(path, obj, *, indent: int | None = 2, sort_keys: bool = False, default=None) -> None:
    """Atomically replace ``path`` with ``obj`` as JSON (strict: NaN/inf rejected) plus a newline."""
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys, allow_nan=False, default=default)
    write_text(path, text + "\n")
