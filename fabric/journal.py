"""The journal: every send, delivery, drop, timer and fault as a msgpack record, with a digest.

Layout: a header map, then records (arrays ``[code, time_us, ...]``), then a footer map with counts
and the blake2b digest of the records' bytes. Records are packed into one reusable buffer and hashed
and written in 1 MiB chunks; with recording off the digest is still computed.
"""

from __future__ import annotations

import hashlib
import os

import msgpack

from . import messages
from .errors import JournalError

FORMAT = "fedemu-journal"
VERSION = 1

SEND, DELIVER, DROP, TIMER_SET, TIMER_FIRE, FAULT = range(6)
CODE_NAMES = ("send", "deliver", "drop", "timer", "fire", "fault")
ARITY = (8, 6, 6, 7, 4, 6)  # record length per code
INT_FIELDS = ((1, 2, 3, 4, 5), (1, 2, 3, 4, 5), (1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3), (1, 2))


def well_formed(item) -> bool:
    """Whether ``item`` has the shape of a record: a known code, its arity, integers where due."""
    if not isinstance(item, tuple) or not item or type(item[0]) is not int or not 0 <= item[0] < len(ARITY):
        return False
    code = item[0]
    if len(item) != ARITY[code] or any(type(item[i]) is not int for i in INT_FIELDS[code]):
        return False
    if code in (SEND, TIMER_SET) and not (isinstance(item[-2], str) and isinstance(item[-1], tuple)):
        return False
    if code == FAULT and not (isinstance(item[3], str) and isinstance(item[4], tuple)):
        return False
    return True
FLUSH_BYTES = 1 << 20


class Journal:
    """Append-only record stream; ``path=None`` keeps only the digest (recording off)."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self._tmp = None if path is None else f"{self.path}.tmp"
        self._file = None if path is None else open(self._tmp, "wb", buffering=FLUSH_BYTES)
        self._packer = messages.new_packer()
        self._digest = hashlib.blake2b(digest_size=16)
        self.pack = self._packer.pack
        self.bytes = 0
        self.header: dict | None = None

    def write_header(self, header: dict) -> None:
        self.header = {"format": FORMAT, "version": VERSION, **header}
        if self._file is not None:
            self._file.write(messages.packb(self.header))

    def append(self, record: tuple) -> None:
        """Pack one record (the fabric calls ``pack`` directly and ``maybe_drain`` once per window)."""
        self.pack(record)

    def maybe_drain(self) -> None:
        """Hash and write the buffered records once they pass FLUSH_BYTES."""
        buf = self._packer.getbuffer()
        size = len(buf)
        buf.release()
        if size >= FLUSH_BYTES:
            self._drain()

    def _drain(self) -> None:
        buf = self._packer.getbuffer()
        if len(buf):
            self._digest.update(buf)
            self.bytes += len(buf)
            if self._file is not None:
                self._file.write(buf)
        buf.release()
        self._packer.reset()

    @property
    def digest(self) -> str:
        self._drain()
        return self._digest.hexdigest()

    def close(self, footer: dict | None = None) -> str:
        """Finish: write the footer and rename the file into place; returns the digest."""
        digest = self.digest
        if self._file is not None:
            tail = {"footer": True, "digest": digest, **(footer or {})}
            self._file.write(messages.packb(tail))
            self._file.close()
            os.replace(self._tmp, self.path)
            self._file = None
        return digest

    def abort(self) -> None:
        """Drop a half-written journal (a crashed run leaves nothing behind)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            try:
                os.unlink(self._tmp)
            except FileNotFoundError:
                pass


class JournalReader:
    """Reads a journal: ``header``, then iterate ``records()``, then ``footer``; damage raises
    JournalError naming the byte offset where the file stops making sense."""

    def __init__(self, path) -> None:
        self.path = os.fspath(path)
        try:
            self._file = open(self.path, "rb")
        except OSError as e:
            raise JournalError(f"{self.path}: cannot open journal: {e.strerror}") from None
        self._unpacker = messages.new_unpacker(self._file)
        self.header = self._next("header")
        if not isinstance(self.header, dict) or self.header.get("format") != FORMAT:
            raise JournalError(f"{self.path}: not a fedemu journal (no '{FORMAT}' header at byte 0)")
        if self.header.get("version") != VERSION:
            raise JournalError(f"{self.path}: journal version {self.header.get('version')!r} is not supported; "
                               f"this fedemu reads version {VERSION}")
        self.records_start = self._unpacker.tell()
        self.footer: dict | None = None
        self.records_end = None

    def _next(self, what: str):
        offset = self._unpacker.tell()
        try:
            return self._unpacker.unpack()
        except (StopIteration, msgpack.OutOfData):
            raise JournalError(f"{self.path}: journal truncated at byte {offset}: expected {what}") from None
        except Exception as e:  # msgpack raises several types for damaged input
            raise JournalError(f"{self.path}: journal corrupted at byte {offset}: {type(e).__name__}: {e}") from None

    def records(self):
        """Yield ``(index, offset, record)``; stops at the footer, raises on truncation or damage."""
        index = 0
        while True:
            offset = self._unpacker.tell()
            item = self._next(f"record {index} or the footer")
            if isinstance(item, dict):
                if not item.get("footer"):
                    raise JournalError(f"{self.path}: journal corrupted at byte {offset}: unexpected map")
                self.footer = item
                self.records_end = offset
                end = self._unpacker.tell()
                try:
                    self._unpacker.unpack()
                except (StopIteration, msgpack.OutOfData):
                    return
                except Exception:  # noqa: BLE001 - any trailing bytes are damage
                    pass
                raise JournalError(f"{self.path}: journal corrupted at byte {end}: unexpected data after the footer")
            if not well_formed(item):
                raise JournalError(f"{self.path}: journal corrupted at byte {offset}: record {index} is {item!r}")
            yield index, offset, item
            index += 1

    def check_digest(self) -> None:
        """Recompute the digest of the record bytes and compare it with the footer's."""
        if self.footer is None:
            for _ in self.records():
                pass
        with open(self.path, "rb") as f:
            f.seek(self.records_start)
            data = f.read(self.records_end - self.records_start)
        got = hashlib.blake2b(data, digest_size=16).hexdigest()
        if got != self.footer.get("digest"):
            raise JournalError(f"{self.path}: digest mismatch: footer says {self.footer.get('digest')}, "
                               f"records hash to {got} (journal altered)")

    def close(self) -> None:
        self._file.close()
