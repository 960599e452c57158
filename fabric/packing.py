"""The journal's records packed a batch at a time: ormsgpack where it gives msgpack's bytes, msgpack elsewhere.

msgpack (msgpack-python) spends about 200 ns on a record of six small ints, nearly all of it per value;
ormsgpack packs a list of such records in about 80 ns each. A list packs as an array head followed by each
item's bytes, so the batch with its head cut off is byte for byte the records packed one at a time: the
digest, which covers those bytes, cannot tell. ormsgpack is given only what it packs as msgpack does: plain
values and the fabric's own kinds (``_default``). Everything else it would treat otherwise (a subclass of
tuple or float, an enum, a dataclass, a date) is refused, and then the batch is packed by msgpack, record by
record, which packs it, or raises its own error at the record that cannot be journalled.
tests/test_fabric_packing.py holds both paths to the same bytes on random records.
"""

from __future__ import annotations

import ormsgpack

from . import messages

# Types ormsgpack would pack itself but msgpack would hand to ``default``, passed to ``_default`` too
# (subclasses of int, str, list and dict are packed as msgpack packs them); dicts keyed by numbers as msgpack.
_OPTIONS = (ormsgpack.OPT_NON_STR_KEYS | ormsgpack.OPT_PASSTHROUGH_DATACLASS | ormsgpack.OPT_PASSTHROUGH_DATETIME
            | ormsgpack.OPT_PASSTHROUGH_ENUM | ormsgpack.OPT_PASSTHROUGH_UUID)


class _Refused(TypeError):
    """A value ormsgpack may not pack as msgpack does: the batch goes to msgpack."""


def _default(obj):
    """``messages._default`` for ormsgpack: a registered message, a set, a numpy scalar; nothing else."""
    tag = getattr(obj, "_fedemu_tag", None)
    if tag is not None:
        return ormsgpack.Ext(messages.NESTED_EXT,
                             ormsgpack.packb((tag, obj._fedemu_fields(obj)), default=_default, option=_OPTIONS))
    if isinstance(obj, (frozenset, set)):
        return sorted(obj)
    if type(obj).__module__ == "numpy" and hasattr(obj, "item"):  # a numpy scalar (msgpack takes a float64 as a float)
        return obj.item()
    raise _Refused(type(obj).__name__)  # a tuple or float subclass (msgpack packs it), or what msgpack refuses


def _head_bytes(n: int) -> int:
    """The length of msgpack's head of an array of ``n`` items (fixarray, array 16, array 32)."""
    return 1 if n < 16 else 3 if n < 1 << 16 else 5


def pack_into(records: list, chunks: list) -> None:
    """Append the msgpack bytes of ``records`` (each packed on its own, one after the other) to ``chunks``, as
    one bytes-like chunk. A record that cannot be journalled raises msgpack's error, the records before it
    appended first."""
    try:
        data = ormsgpack.packb(records, default=_default, option=_OPTIONS)
    except Exception:  # noqa: BLE001 - refused, or ormsgpack's own error: msgpack decides, record by record
        packb = messages.packb
        done = []
        try:
            for record in records:
                done.append(packb(record))
        finally:
            chunks.append(b"".join(done))
        return
    chunks.append(memoryview(data)[_head_bytes(len(records)):])
