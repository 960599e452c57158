"""The journal: every send, delivery, drop, timer and fault as a msgpack record, with a digest.

Layout (version 2): a header map (``format``, ``version`` and the run's seed, scenario, params and
actors), the CRC-32 of the header's bytes, then frames. A frame is a 17-byte head (kind ``R`` for a
block of records or ``F`` for the footer, the payload's length and CRC-32, and the CRC-32 of those 13
bytes) followed by its payload. A block's payload is whole records (arrays ``[code, time_us, ...]``);
the footer's is a map with counts and the blake2b digest of all blocks' payloads. Records wait in a list
and are packed a batch at a time (``packing``), then hashed (and, when recording, framed and written) in
1 MiB blocks; with recording off the digest is still computed. The checksums frame the record bytes, they
are not part of what the digest covers, so a run's digest does not depend on the layout.

Reads are bounded (a journal is data from anywhere, docs/trust.md): a frame holds at most
``MAX_FRAME_BYTES`` (64 MiB; the writer splits a larger window's records over several frames) and a
header at most ``MAX_HEADER_BYTES`` (64 MiB); no msgpack string, array, map or ext may claim more items
or bytes than the frame (or the header bytes read so far) holds. A length beyond them is "journal
corrupted at byte N", found before anything is allocated for it.
"""

from __future__ import annotations

import hashlib
import os
import struct
import zlib

import msgpack

from . import messages, packing
from .atomic import PendingFile
from .errors import JournalError
from .inputs import open_regular

FORMAT = "fedemu-journal"
VERSION = 2

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
MAX_FRAME_BYTES = 64 << 20
MAX_HEADER_BYTES = 64 << 20
BLOCK, FOOTER = b"R", b"F"
_HEAD = struct.Struct(">cQI")  # kind, payload length, payload CRC-32
_HEAD_CRC = struct.Struct(">I")
HEAD_BYTES = _HEAD.size + _HEAD_CRC.size


def frame_head(kind: bytes, payload) -> bytes:
    """The 17 bytes that precede a payload: kind, length, CRC-32 of the payload, CRC-32 of those."""
    head = _HEAD.pack(kind, len(payload), zlib.crc32(payload))
    return head + _HEAD_CRC.pack(zlib.crc32(head))


class Journal:
    """Append-only record stream; ``path=None`` keeps only the digest (recording off)."""

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = None if path is None else os.fspath(path)
        self._pending = None if path is None else PendingFile(self.path, "wb")  # renamed into place at close
        self._file = None if path is None else self._pending.file
        self._records: list = []  # appended as they come, packed a batch at a time (``packing``)
        self._packed: list = []  # the packed batches not yet hashed and written
        self._packed_bytes = 0
        self._digest = hashlib.blake2b(digest_size=16)
        self.pack = self._records.append
        self.extend = self._records.extend  # several records, in order (an actor's outbox)
        self.bytes = 0
        self.header: dict | None = None

    def write_header(self, header: dict) -> None:
        """Write the header; ``header`` is set only once it could be packed (a failure before leaves none)."""
        full = {"format": FORMAT, "version": VERSION, **header}
        data = messages.packb(full)
        if self._file is not None:
            self._file.write(data + _HEAD_CRC.pack(zlib.crc32(data)))
        self.header = full

    def append(self, record: tuple) -> None:
        """Add one record (the fabric calls ``pack`` directly and ``maybe_drain`` once every 16 windows)."""
        self.pack(record)

    def maybe_drain(self) -> None:
        """Pack the records added since; hash and write the packed chunks once they pass FLUSH_BYTES."""
        if self._records:
            self._pack()
        if self._packed_bytes >= FLUSH_BYTES:
            self._drain()

    def _pack(self) -> None:
        """Pack the waiting records into one more chunk (chunks, not one growing buffer: that cost about 4 MB
        of peak RSS in Sparrow at 10,000 workers). A record that cannot be journalled raises msgpack's error
        with the records before it packed; it and those after it are dropped (before batches, it raised as
        it was added)."""
        packed = self._packed
        before = len(packed)
        try:
            packing.pack_into(self._records, packed)
        finally:
            self._records.clear()
            self._packed_bytes += sum(len(chunk) for chunk in packed[before:])

    def _drain(self) -> None:
        if self._records:
            self._pack()
        if self._packed_bytes:
            for data in self._packed:
                self._digest.update(data)
            self.bytes += self._packed_bytes
            if self._file is not None:
                buf = b"".join(self._packed)
                for start, end in _blocks(buf):
                    self._file.write(frame_head(BLOCK, buf[start:end]))
                    self._file.write(buf[start:end])
        self._packed.clear()
        self._packed_bytes = 0

    @property
    def digest(self) -> str:
        self._drain()
        return self._digest.hexdigest()

    def close(self, footer: dict | None = None) -> str:
        """Finish: write the footer (``footer`` adds to it) and rename the file into place; returns the digest."""
        digest = self.digest
        if self._file is not None:
            data = messages.packb({"footer": True, "digest": digest, **(footer or {})})
            self._file.write(frame_head(FOOTER, data) + data)
            self._file = None
            self._pending.commit()
        return digest

    def abort(self) -> None:
        """Drop a half-written journal (an interrupted run leaves no temporary file behind)."""
        if self._file is not None:
            self._file = None
            self._pending.abort()


def _blocks(buf) -> list[tuple[int, int]]:
    """``buf`` (whole records) cut into frames of at most MAX_FRAME_BYTES at record boundaries: one frame
    almost always (a block is about FLUSH_BYTES); the rare larger window is read record by record."""
    if len(buf) <= MAX_FRAME_BYTES:
        return [(0, len(buf))]
    unpacker = msgpack.Unpacker(max_buffer_size=len(buf))
    unpacker.feed(buf)
    cuts, start = [], 0
    while unpacker.tell() < len(buf):
        before = unpacker.tell()
        unpacker.skip()
        if unpacker.tell() - start > MAX_FRAME_BYTES:
            if before == start:
                raise JournalError(f"a record of {unpacker.tell() - before:,} bytes is larger than a journal frame "
                                   f"may be ({MAX_FRAME_BYTES:,} bytes): it cannot be recorded")
            cuts.append((start, before))
            start = before
    return cuts + [(start, len(buf))]


class JournalReader:
    """Reads a journal: ``header``, then iterate ``records()``, then ``footer``. Damage raises
    JournalError: ``journal truncated at byte N`` when the file ends early, ``journal corrupted at byte
    N (record R)`` when a checksum fails or the bytes make no sense, ``digest mismatch`` when the
    checksums hold but the records are not the ones the footer's digest was computed over."""

    def __init__(self, path) -> None:
        self.path = os.fspath(path)
        try:
            self._file = open_regular(self.path, "a fedemu journal", error=JournalError)
        except OSError as e:
            raise JournalError(f"{self.path}: cannot open journal: {e.strerror}") from None
        self.size = os.fstat(self._file.fileno()).st_size
        self.header = self._read_header()
        actors = self.header.get("actors")
        if not isinstance(actors, (list, tuple)) or not all(isinstance(a, str) for a in actors):
            raise self._error("journal corrupted at byte 0 (header): its 'actors' is not a list of actor names")
        self.actors = len(actors)  # records name actors by index into this list: one past it is damage
        seed = self.header.get("seed", 0)
        if type(seed) is not int or not 0 <= seed < 2**64:  # as run --seed: no run can have been recorded so
            raise self._error(f"journal header's seed {seed!r} is not a seed a run can have (a whole number from "
                              "0 to 2^64-1)")
        self.records_start = self._file.tell()
        self.footer: dict | None = None
        self.records_end: int | None = None
        self._digest = hashlib.blake2b(digest_size=16)

    def _error(self, text: str) -> JournalError:
        return JournalError(f"{self.path}: {text}")

    def _read_header(self) -> dict:
        """The header map, read in growing chunks: each try unpacks with lengths bounded by the bytes
        read so far (``messages.new_unpacker``), up to MAX_HEADER_BYTES."""
        data = b""
        while True:
            chunk = self._file.read(max(1 << 16, len(data)))
            data += chunk
            unpacker = messages.new_unpacker(max(1, len(data)))
            unpacker.feed(data)
            try:
                header = unpacker.unpack()
                break
            except (msgpack.OutOfData, ValueError):  # it needs more bytes (ValueError: a length beyond them)
                if not chunk:
                    raise self._error("journal truncated at byte 0: expected the header") from None
                if len(data) >= MAX_HEADER_BYTES:
                    raise self._error(f"journal corrupted at byte 0 (header): it claims more than the "
                                      f"{MAX_HEADER_BYTES:,} bytes a header may hold") from None
            except Exception:  # noqa: BLE001 - msgpack raises several types for foreign bytes
                raise self._error(f"not a fedemu journal (no '{FORMAT}' header at byte 0)") from None
        end = unpacker.tell()
        self._file.seek(0)
        data = self._file.read(end)
        crc = self._file.read(_HEAD_CRC.size)
        intact = len(crc) == _HEAD_CRC.size and _HEAD_CRC.unpack(crc)[0] == zlib.crc32(data)
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            if intact:  # a checksummed map that is not ours: name what it is not
                raise self._error(f"not a fedemu journal (its header has no format '{FORMAT}')")
            if isinstance(header, dict) and {"seed", "scenario", "actors"} & {str(k) for k in header}:
                raise self._error("journal corrupted at byte 0 (header): its checksum does not match")
            raise self._error(f"not a fedemu journal (no '{FORMAT}' header at byte 0)")
        version = header.get("version")
        if version != VERSION:
            older = " (written by an older fedemu, before checksums; record it again)" if version == 1 else ""
            raise self._error(f"journal version {version!r} is not supported{older}; "
                              f"this fedemu reads version {VERSION}")
        if len(crc) < _HEAD_CRC.size:
            raise self._error(f"journal truncated at byte {end}: expected the header's checksum")
        if not intact:
            raise self._error("journal corrupted at byte 0 (header): its checksum does not match")
        return header

    def records(self):
        """Yield ``(index, offset, record)``; stops at the footer (checking the digest there), raises
        JournalError on truncation, corruption or a digest mismatch."""
        index = 0
        read = self._file.read
        actors = self.actors
        while True:
            at = self._file.tell()
            head = read(HEAD_BYTES)
            if len(head) < HEAD_BYTES:
                raise self._error(f"journal truncated at byte {at}: expected a block of records from record "
                                  f"{index} or the footer")
            if _HEAD_CRC.unpack_from(head, _HEAD.size)[0] != zlib.crc32(head[:_HEAD.size]):
                raise self._error(f"journal corrupted at byte {at} (record {index}): a frame head fails its "
                                  "checksum")
            kind, length, crc = _HEAD.unpack_from(head)
            start = at + HEAD_BYTES
            what = "block" if kind == BLOCK else "footer" if kind == FOOTER else None
            if what is None:
                raise self._error(f"journal corrupted at byte {at} (record {index}): unknown frame kind {kind!r}")
            if length > MAX_FRAME_BYTES:
                raise self._error(f"journal corrupted at byte {at} (record {index}): the {what} there claims "
                                  f"{length:,} bytes, more than the {MAX_FRAME_BYTES:,} a frame may hold")
            if length > self.size - start:
                raise self._error(f"journal truncated at byte {at}: the {what} there needs {length} bytes, "
                                  f"the file ends {self.size - start} bytes after its head")
            payload = read(length)
            if zlib.crc32(payload) != crc:
                held = f"the block of bytes {start}..{start + length - 1} (records from {index})" \
                    if kind == BLOCK else f"the footer (bytes {start}..{start + length - 1})"
                raise self._error(f"journal corrupted at byte {start} (record {index}): {held} fails its checksum")
            if kind == FOOTER:
                self._read_footer(payload, at)
                return
            self._digest.update(payload)
            unpacker = messages.new_unpacker(max(1, length))
            unpacker.feed(payload)
            while unpacker.tell() < length:
                offset = start + unpacker.tell()
                try:
                    item = unpacker.unpack()
                except Exception as e:  # noqa: BLE001 - checksummed but undecodable: written wrong
                    detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
                    raise self._error(f"journal corrupted at byte {offset} (record {index}): record {index} "
                                      f"cannot be decoded ({detail})") from None
                if not well_formed(item):
                    raise self._error(f"journal corrupted at byte {offset} (record {index}): record {index} "
                                      f"is {item!r}")
                code = item[0]  # actor indices (integers, well_formed said): inline, a reader's hot loop
                if code != FAULT and not (-1 <= item[2] < actors and (code > DROP or -1 <= item[4] < actors)):
                    self.check_actor(item[2], offset, index)
                    self.check_actor(item[4], offset, index)
                yield index, offset, item
                index += 1

    def check_actor(self, idx: int, offset: int, index: int) -> None:
        """Raise "journal corrupted at byte N" unless ``idx`` names an actor of the header's list (or is
        -1, outside): an edited list, shortened or emptied with its checksum recomputed, must not reach a
        reader as an index past its end (nor wrap round from the end, as a negative one would)."""
        if type(idx) is not int or not -1 <= idx < self.actors:
            raise self._error(f"journal corrupted at byte {offset} (record {index}): actor index {idx!r} is not in "
                              f"the header's list of {self.actors} actors")

    def _read_footer(self, payload: bytes, at: int) -> None:
        try:
            footer = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        except Exception as e:  # noqa: BLE001
            raise self._error(f"journal corrupted at byte {at + HEAD_BYTES} (footer): {type(e).__name__}: {e}") \
                from None
        if not isinstance(footer, dict) or footer.get("footer") is not True:
            raise self._error(f"journal corrupted at byte {at + HEAD_BYTES} (footer): {footer!r} is not a footer")
        end = self._file.tell()
        if end != self.size:
            raise self._error(f"journal corrupted at byte {end}: unexpected data after the footer")
        got = self._digest.hexdigest()
        if got != footer.get("digest"):
            raise self._error(f"digest mismatch: footer says {footer.get('digest')}, records hash to {got} "
                              "(the checksums hold, so the journal was altered, not damaged)")
        self.records_end = at
        self.footer = footer

    def check_digest(self) -> None:
        """Read to the end if not done yet: every checksum and the footer's digest are checked on the way."""
        if self.footer is None:
            for _ in self.records():
                pass

    def close(self) -> None:
        self._file.close()


def check(path) -> JournalReader:
    """Read a whole journal, checking every checksum and the digest; returns the (closed) reader."""
    reader = JournalReader(path)
    try:
        reader.check_digest()
    finally:
        reader.close()
    return reader
