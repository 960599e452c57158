"""Test helpers that take a version-2 journal apart into its frames and put it back together.

``reframe`` writes a journal whose checksums and digest are all valid again after an edit: what a
journal written by other code (not damaged) looks like, so a reader must call it a divergence."""

from __future__ import annotations

import hashlib
import zlib

import msgpack

from fedemu.fabric.journal import BLOCK, FOOTER, HEAD_BYTES, frame_head


def split(data: bytes) -> tuple[bytes, list[tuple[int, bytes, bytes]]]:
    """(header bytes without its CRC, [(frame offset, kind, payload), ...]) of an intact journal."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(data)
    unpacker.unpack()
    header_end = unpacker.tell()
    frames, at = [], header_end + 4
    while at < len(data):
        kind, length = data[at:at + 1], int.from_bytes(data[at + 1:at + 9], "big")
        frames.append((at, kind, data[at + HEAD_BYTES:at + HEAD_BYTES + length]))
        at += HEAD_BYTES + length
    return data[:header_end], frames


def blocks(data: bytes) -> list[tuple[int, int]]:
    """(payload start, payload end) of every block of records."""
    return [(at + HEAD_BYTES, at + HEAD_BYTES + len(p)) for at, kind, p in split(data)[1] if kind == BLOCK]


def reframe(data: bytes, *, records=None, footer=None) -> bytes:
    """The journal with its record bytes passed through ``records(bytes) -> bytes`` and its footer map
    through ``footer(dict) -> dict``, every checksum and the digest recomputed (one block)."""
    header, frames = split(data)
    body = b"".join(p for _, kind, p in frames if kind == BLOCK)
    foot = msgpack.unpackb(next(p for _, kind, p in frames if kind == FOOTER), raw=False)
    if records is not None:
        body = records(body)
    foot["digest"] = hashlib.blake2b(body, digest_size=16).hexdigest()
    if footer is not None:
        foot = footer(foot)
    packed = msgpack.packb(foot, use_bin_type=True)
    out = header + zlib.crc32(header).to_bytes(4, "big")
    if body:
        out += frame_head(BLOCK, body) + body
    return out + frame_head(FOOTER, packed) + packed
