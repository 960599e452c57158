"""The one safe writer for every file fedemu writes (journals, event logs, results, reports, plots).

A file is written to an exclusive temporary file beside its target (``O_CREAT|O_EXCL|O_NOFOLLOW``
under a random name, so a symlink or file planted there is never followed nor reused), flushed and
fsynced, then renamed over the target: a reader sees the old file or the complete new one. A target
that exists and is not a regular file (a symlink, a device such as ``/dev/stdout``, a folder, a FIFO)
is refused before anything is written, and again just before the rename; ``-`` is how a command that
can write to standard output is asked to (see ``STDOUT``), never a device path.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from pathlib import Path
from typing import IO, Iterator

from .errors import ConfigError

STDOUT = "-"  # the path that means standard output, for the options that allow it
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_KINDS = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """What a file of ``mode`` is, in words: "a FIFO", "a folder" ..."""
    return next((text for test, text in _KINDS if test(mode)), "not a regular file")


def check_target(path, option: str | None = None, *, stdout_ok: bool = False) -> None:
    """Refuse (ConfigError) a target that exists and is not a regular file: fedemu replaces only
    regular files, by a rename, and never writes through a link or into a device."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new file (a bad folder is the caller's to say)
        return
    except OSError as e:
        raise ConfigError(f"{option + ' ' if option else ''}{path}: {e.strerror or e}") from None
    if stat.S_ISREG(mode):
        return
    hint = f"; {STDOUT} writes to standard output" if stdout_ok else ""
    raise ConfigError(f"{option + ' ' if option else ''}{path} exists and is {kind_of(mode)}; fedemu writes only "
                      f"to a new path or over a regular file{hint}")


class PendingFile:
    """A file being written: ``file`` is open on an exclusive temporary file beside ``target``;
    ``commit`` renames it over the target, ``abort`` removes it. For writes that outlive one block of
    code (a journal, an event log); ``atomic_write`` is the usual way."""

    def __init__(self, target, mode: str = "wb", *, encoding: str = "utf-8", newline: str | None = None,
                 option: str | None = None) -> None:
        if mode not in ("w", "wb"):
            raise ValueError(f"PendingFile mode must be 'w' or 'wb', got {mode!r}")
        self.target = Path(target)
        self.option = option
        check_target(self.target, option)
        while True:
            self.tmp = self.target.with_name(f".{self.target.name}.{secrets.token_hex(6)}.tmp")
            try:
                fd = os.open(self.tmp, _FLAGS, 0o666)
                break
            except FileExistsError:
                continue
        try:
            self.file: IO = os.fdopen(fd, mode, **({} if mode == "wb" else {"encoding": encoding, "newline": newline}))
        except BaseException:
            os.close(fd)
            self._unlink()
            raise

    def _unlink(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)

    def commit(self) -> None:
        """Flush, fsync and rename into place (a target turned into a non-regular file meanwhile is refused)."""
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
            check_target(self.target, self.option)
            os.replace(self.tmp, self.target)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Close and remove the temporary file (the target is left as it was)."""
        with contextlib.suppress(OSError):
            self.file.close()
        self._unlink()


@contextlib.contextmanager
def atomic_write(path, mode: str = "w", *, encoding: str = "utf-8", newline: str | None = None,
                 option: str | None = None) -> Iterator[IO]:
    """Yield a file open on a temporary file; on success it replaces ``path``, on error it is removed."""
    pending = PendingFile(path, mode, encoding=encoding, newline=newline, option=option)
    try:
        yield pending.file
    except BaseException:
        pending.abort()
        raise
    pending.commit()


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
