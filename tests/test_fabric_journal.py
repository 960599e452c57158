"""The journal: layout, record shapes, digest, chunked writing, message encoding, damage reporting."""

import hashlib
import os
import zlib

import attrs
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedemu.fabric.journal as journal_mod
from fedemu.fabric import messages
from fedemu.fabric.errors import JournalError
from fedemu.fabric.journal import CODE_NAMES, DELIVER, DROP, FAULT, SEND, TIMER_FIRE, TIMER_SET, Journal, JournalReader
from fedemu.fabric.network import Latency, Link, Network
from fedemu.tools.run import runner

from fabric_helpers import Box, Probe, Sender, Sink, by_code, read_journal, run_fabric
from journal_frames import blocks, reframe, split

SHAPES = {SEND: 8, DELIVER: 6, DROP: 6, TIMER_SET: 7, TIMER_FIRE: 4, FAULT: 6}


@pytest.fixture(scope="module")
def demo_journal(tmp_path_factory):
    path = tmp_path_factory.mktemp("journal") / "demo.fjl"
    result = runner.execute("demo", seed=1, overrides={"duration_ms": 400}, journal_path=path)
    return path, result


def test_layout_header_records_footer(demo_journal):
    path, result = demo_journal
    header, records, footer = read_journal(path)
    assert header["format"] == "fedemu-journal" and header["version"] == 2
    assert header["seed"] == 1 and header["scenario"] == "scenarios.demo"
    assert header["params"]["duration_ms"] == 400 and header["actors"] == tuple(f"peer-{i}" for i in range(5))
    assert footer["footer"] is True and footer["digest"] == result.digest
    notices = [r for r in by_code(records, SEND) if r[2] == -1]  # the fabric's notices of broken connections
    assert notices and {r[6] for r in notices} == {"fabric.broken"}
    assert footer["sent"] == result.fabric.statistics().sent == len(by_code(records, SEND)) - len(notices)
    assert footer["events"] == result.fabric.statistics().events
    # events counts heap entries: deliveries, drops, faults, the timers that fired from the heap (timers
    # merged into a mailbox inside a window are not heap events) and the transmissions a connection lost,
    # which write no record (a delivery says how many its message needed; those behind it needed none)
    popped = sum(1 for r in records if r[0] in (DELIVER, FAULT, DROP))
    lost = sum(r[5] for r in by_code(records, DELIVER))
    assert lost > 0
    assert popped + lost < footer["events"] <= popped + lost + len(by_code(records, TIMER_FIRE))


def test_every_record_has_its_documented_shape(demo_journal):
    _, records, _ = read_journal(demo_journal[0])
    seen = {CODE_NAMES[r[0]] for r in records}
    assert seen == set(CODE_NAMES)  # the demo produces every kind of record
    causes = {r[5] for r in records if r[0] == DROP}
    assert {"refused", "stale-timer"} <= causes <= {"broken", "refused", "dead", "stale-timer"}
    for rec in records:
        assert len(rec) == SHAPES[rec[0]], rec
        assert all(isinstance(x, int) for x in rec[1:3 if rec[0] == FAULT else 4]), rec
        if rec[0] == SEND:
            assert isinstance(rec[4], int) and isinstance(rec[5], int) and isinstance(rec[6], str)
            assert isinstance(rec[7], tuple) and rec[5] >= rec[1]
        elif rec[0] in (DELIVER, DROP):
            assert isinstance(rec[4], int)
        elif rec[0] == TIMER_SET:
            assert rec[4] >= rec[1] and isinstance(rec[5], str) and isinstance(rec[6], tuple)
        elif rec[0] == FAULT:
            assert rec[3] in ("crash", "restart", "partition", "heal", "slow", "restore", "loss")
            assert isinstance(rec[4], tuple) and isinstance(rec[5], float)


def test_layout_is_header_checksum_then_checksummed_frames(demo_journal):
    """Header map, its CRC-32, then frames: each a 17-byte head (kind, length, CRC-32 of the payload,
    CRC-32 of the head) and its payload; blocks of records, then one footer that ends the file."""
    data = demo_journal[0].read_bytes()
    header, frames = split(data)
    assert msgpack.unpackb(header, raw=False)["version"] == 2
    assert data[len(header):len(header) + 4] == zlib.crc32(header).to_bytes(4, "big")
    assert [kind for _, kind, _ in frames] == [b"R"] * (len(frames) - 1) + [b"F"]
    for at, kind, payload in frames:
        head = data[at:at + 13]
        assert head[:1] == kind and int.from_bytes(head[1:9], "big") == len(payload)
        assert int.from_bytes(head[9:13], "big") == zlib.crc32(payload)
        assert data[at + 13:at + 17] == zlib.crc32(head).to_bytes(4, "big")
    last_at, _, last = frames[-1]
    assert last_at + 17 + len(last) == len(data)
    assert msgpack.unpackb(last, raw=False) == read_journal(demo_journal[0])[2]


def test_digest_is_blake2b_of_the_record_bytes_not_of_their_framing(demo_journal):
    path, result = demo_journal
    _, frames = split(path.read_bytes())
    body = b"".join(p for _, kind, p in frames if kind == b"R")
    assert hashlib.blake2b(body, digest_size=16).hexdigest() == result.digest
    unpacker = msgpack.Unpacker(raw=False, use_list=False)
    unpacker.feed(body)
    assert len(list(unpacker)) == len(read_journal(path)[1])


def test_chunked_writing_changes_no_record_and_no_digest(tmp_path, monkeypatch, demo_journal):
    """With a 64-byte flush threshold every window drains into its own block: more frames, the same
    records and the same digest."""
    monkeypatch.setattr(journal_mod, "FLUSH_BYTES", 64)
    path = tmp_path / "small-chunks.fjl"
    result = runner.execute("demo", seed=1, overrides={"duration_ms": 400}, journal_path=path)
    assert result.digest == demo_journal[1].digest
    assert len(blocks(path.read_bytes())) > 5 > len(blocks(demo_journal[0].read_bytes()))
    assert read_journal(path)[1] == read_journal(demo_journal[0])[1]


def test_recording_off_still_computes_the_digest(demo_journal):
    result = runner.execute("demo", seed=1, overrides={"duration_ms": 400}, journal_path=None)
    assert result.digest == demo_journal[1].digest


def test_nested_messages_and_sets_round_trip(tmp_path):
    class Boxer(Sink):
        def on_start(self):
            self.send(1, Box(Probe(7), "seven"))
            self.send(1, Box(frozenset({"b", "c", "a"}), "set"))
            self.send(1, Box((Probe(1), (Probe(2), None)), "deep"))

    got = []

    class Unboxer(Sink):
        def on_Box(self, msg, src):
            got.append(msg)

    def build(f):
        f.add("boxer", lambda: Boxer([]))
        f.add("unboxer", lambda: Unboxer([]))

    run_fabric(0, build, path=tmp_path / "j")
    _, records, _ = read_journal(tmp_path / "j")
    fields = [r[7] for r in by_code(records, SEND)]
    assert fields == [(Probe(7), "seven"), (("a", "b", "c"), "set"), ((Probe(1), (Probe(2), None)), "deep")]
    assert got[0] == Box(Probe(7), "seven")  # the live message is the object itself, not a copy


def test_message_registration_rules():
    @messages.message("fabtest.once")
    class Once:
        x: int

    assert messages.tag_of(Once(1)) == "fabtest.once"
    assert messages.encode(Once(3)) == ("fabtest.once", (3,))
    assert messages.decode("fabtest.once", (4,)) == Once(4)
    assert attrs.has(Once) and Once.__slots__
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        Once(1).x = 2

    class Other:
        pass

    with pytest.raises(TypeError, match="Other is not an attrs class"):
        messages.register(Other, "fabtest.other")
    with pytest.raises(ValueError, match="message tag 'fabtest.probe' is taken by Probe"):
        messages.message("fabtest.probe")(attrs.frozen(type("Impostor", (), {"__annotations__": {"n": int}})))
    with pytest.raises(JournalError, match="unknown message tag 'fabtest.nope'; known: "):
        messages.decode("fabtest.nope", ())


def test_unjournalable_field_is_a_clear_error(tmp_path):
    class Bad(Sink):
        def on_start(self):
            self.send(1, Box(object(), "x"))

    def build(f):
        f.add("a", lambda: Bad([]))
        f.add("b", lambda: Sink([]))

    with pytest.raises(TypeError, match="cannot journal a value of type object"):
        run_fabric(0, build, path=tmp_path / "j")
    assert list(tmp_path.iterdir()) == []  # the half-written journal is removed


# ---- reading damaged or foreign files --------------------------------------------------------------
def test_reader_rejects_foreign_and_missing_files(tmp_path):
    with pytest.raises(JournalError, match="cannot open journal: No such file or directory"):
        JournalReader(tmp_path / "missing")
    (tmp_path / "x").write_bytes(msgpack.packb({"hello": 1}))
    with pytest.raises(JournalError, match="not a fedemu journal \\(no 'fedemu-journal' header at byte 0\\)"):
        JournalReader(tmp_path / "x")
    (tmp_path / "t").write_text("hello, world\n")
    with pytest.raises(JournalError, match="not a fedemu journal"):
        JournalReader(tmp_path / "t")
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(JournalError, match="journal truncated at byte 0: expected the header"):
        JournalReader(tmp_path / "empty")


@pytest.mark.parametrize("version, why", [(99, ""), (3, ""), ("2", ""), (None, ""),
                                          (1, " \\(written by an older fedemu, before checksums; record it again\\)")])
def test_another_version_is_a_clear_error(tmp_path, version, why):
    header = msgpack.packb({"format": "fedemu-journal", "version": version, "seed": 1})
    (tmp_path / "v").write_bytes(header + zlib.crc32(header).to_bytes(4, "big"))
    with pytest.raises(JournalError, match=f"journal version {version!r} is not supported{why}; "
                                           "this fedemu reads version 2$"):
        JournalReader(tmp_path / "v")


def test_a_version_1_journal_is_named_as_such(tmp_path):
    """What fedemu wrote before checksums: header map, bare records, footer map."""
    old = (msgpack.packb({"format": "fedemu-journal", "version": 1, "seed": 1, "actors": ["a"]})
           + msgpack.packb((0, 0, -1, 1, 0, 5, "x", ())) + msgpack.packb({"footer": True, "digest": "00"}))
    (tmp_path / "old.fjl").write_bytes(old)
    with pytest.raises(JournalError, match="journal version 1 is not supported \\(written by an older fedemu"):
        JournalReader(tmp_path / "old.fjl")


def _read_all(path):
    reader = JournalReader(path)
    try:
        return [rec for _, _, rec in reader.records()], reader.footer
    finally:
        reader.close()


def _small_blocks(tmp_path_factory):
    """A demo journal of 80 records, drained at every chance (every 16 windows): three blocks."""
    old = journal_mod.FLUSH_BYTES
    journal_mod.FLUSH_BYTES = 1
    try:
        path = tmp_path_factory.mktemp("blocks") / "small.fjl"
        runner.execute("demo", seed=1, overrides={"duration_ms": 20}, journal_path=path)
    finally:
        journal_mod.FLUSH_BYTES = old
    return path


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = _small_blocks(tmp_path_factory)
    data = path.read_bytes()
    reader = JournalReader(path)
    offsets = [off for _, off, _ in reader.records()]
    reader.close()
    spans = blocks(data)
    assert len(spans) >= 3 and len(offsets) == 80
    first = [sum(1 for o in offsets if o < start) for start, _ in spans]  # first record of each block
    return path, data, offsets, spans, first


def _where(off, data, spans, first, header_end):
    """What the reader must say about a change at ``off``: (byte, record) of the block holding it."""
    for k, (start, end) in enumerate(spans):
        if start - 17 <= off < start:  # the frame head
            return start - 17, first[k]
        if start <= off < end:
            return start, first[k]
    return None  # header or footer


def test_every_single_byte_change_is_reported_as_corruption(tmp_path, small):
    """xor 0x01, 0x80 and 0xff at every byte of the file: the header is refused, a block or frame head
    is 'corrupted at byte N (record R)' with the block's first byte and first record, the footer is
    'corrupted'. Never a silent read, never a digest mismatch (that would be an altered journal)."""
    path, data, offsets, spans, first = small
    header_end = len(split(data)[0])
    bad = tmp_path / "flip.fjl"
    bad.write_bytes(data)
    fd = os.open(bad, os.O_RDWR)
    try:
        for off in range(len(data)):
            for x in (0x01, 0x80, 0xFF):
                os.pwrite(fd, bytes([data[off] ^ x]), off)
                with pytest.raises(JournalError) as err:
                    _read_all(bad)
                text = str(err.value)
                where = _where(off, data, spans, first, header_end)
                if off < header_end + 4:
                    assert "version" in text or "not a fedemu journal" in text or "(header)" in text \
                        or "truncated" in text, (off, text)
                elif where is not None:
                    byte, record = where
                    assert f"journal corrupted at byte {byte} (record {record}): " in text, (off, text)
                else:
                    assert "journal corrupted at byte " in text and ("footer" in text or "frame head" in text), \
                        (off, text)
                os.pwrite(fd, data[off:off + 1], off)
    finally:
        os.close(fd)


def test_every_truncation_is_reported_as_truncation(tmp_path, small):
    """Cut the file at every length: 'truncated at byte N', N the start of the frame (or header) the cut
    falls in."""
    path, data, _, _, _ = small
    header_end = len(split(data)[0])
    frame_starts = [at for at, _, _ in split(data)[1]]
    cut_path = tmp_path / "cut.fjl"
    cut_path.write_bytes(data)
    for cut in range(len(data) - 1, -1, -1):
        os.truncate(cut_path, cut)
        with pytest.raises(JournalError) as err:
            _read_all(cut_path)
        if cut < header_end + 4:
            assert "journal truncated at byte 0: expected the header" in str(err.value) \
                or f"journal truncated at byte {header_end}: expected the header's checksum" in str(err.value), cut
        else:
            broken = max(at for at in frame_starts if at <= cut)
            assert f"journal truncated at byte {broken}: " in str(err.value), (cut, str(err.value))


def test_bytes_after_the_footer_are_corruption(tmp_path, small):
    data = small[1]
    (tmp_path / "tail.fjl").write_bytes(data + b"\x00")
    with pytest.raises(JournalError, match=f"journal corrupted at byte {len(data)}: unexpected data after the footer"):
        _read_all(tmp_path / "tail.fjl")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_damage_is_never_read_as_a_journal(tmp_path_factory, small, data):
    """Several bytes overwritten at random places (a burst, or scattered): the reader refuses the file."""
    path, original, _, _, _ = small
    damaged = bytearray(original)
    for _ in range(data.draw(st.integers(1, 6), label="changes")):
        at = data.draw(st.integers(0, len(original) - 1), label="offset")
        new = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
        damaged[at:at + len(new)] = new
    if bytes(damaged[:len(original)]) == original:
        return
    bad = tmp_path_factory.mktemp("damage") / "bad.fjl"
    bad.write_bytes(bytes(damaged))
    with pytest.raises(JournalError):
        _read_all(bad)


def test_an_altered_journal_with_valid_checksums_is_a_digest_mismatch(tmp_path, small):
    """Checksums recomputed after a change but the footer's digest left alone: the reader names it."""
    data = small[1]
    digest = read_journal(small[0])[2]["digest"]
    edited = reframe(data, records=lambda body: body[:-1] + bytes([body[-1] ^ 1]), footer=lambda f: {**f, "digest": digest})
    (tmp_path / "alt.fjl").write_bytes(edited)
    with pytest.raises(JournalError, match=f"digest mismatch: footer says {digest}, records hash to [0-9a-f]{{32}} "
                                           "\\(the checksums hold, so the journal was altered, not damaged\\)"):
        _read_all(tmp_path / "alt.fjl")


def test_a_checksummed_record_of_the_wrong_shape_is_named(tmp_path, small):
    data = small[1]
    header_end = len(split(data)[0])
    start = header_end + 4 + 17
    for junk, what in ((msgpack.packb((9, 0)), "record 0 is \\(9, 0\\)"), (msgpack.packb({"x": 1}), "record 0 is {'x': 1}"),
                       (b"\xc1", "record 0 cannot be decoded \\(FormatError\\)")):
        (tmp_path / "bad").write_bytes(reframe(data, records=lambda body: junk + body))
        with pytest.raises(JournalError, match=f"journal corrupted at byte {start} \\(record 0\\): {what}"):
            _read_all(tmp_path / "bad")


def test_a_reframed_journal_reads_back_the_same(tmp_path, small):
    """The helper the replay tests use to fake other code's journals is itself faithful."""
    (tmp_path / "same.fjl").write_bytes(reframe(small[1]))
    assert _read_all(tmp_path / "same.fjl") == _read_all(small[0])


def test_abort_leaves_nothing(tmp_path):
    journal = Journal(tmp_path / "j")
    journal.write_header({"seed": 0})
    journal.append((SEND, 0, 0, 1, 0, 5, "x", ()))
    journal.abort()
    assert list(tmp_path.iterdir()) == []


def test_close_without_a_path_returns_the_digest_of_nothing():
    assert Journal(None).close() == hashlib.blake2b(b"", digest_size=16).hexdigest()


def test_journaled_links_are_consistent(tmp_path):
    """Every DELIVER/DROP names the sender, seq and destination of a SEND journaled before it."""
    def build(f):
        f.network = Network(Link(Latency.uniform(10, 90), loss=0.2), rto_us=100)
        f.add("a", lambda: Sender([], [0, 1], 40, every=7))
        f.add("b", lambda: Sender([], [0], 40, every=5))

    run_fabric(9, build, path=tmp_path / "j")
    _, records, _ = read_journal(tmp_path / "j")
    sent = {}
    for rec in records:
        if rec[0] == SEND:
            sent[(rec[2], rec[3])] = rec
        elif rec[0] in (DELIVER, DROP):
            assert sent[(rec[2], rec[3])][4] == rec[4]
    assert {r[5] for r in by_code(records, DELIVER)} >= {0, 1}  # retransmissions, when a message needed some


def test_a_flipped_byte_in_the_header_format_is_corruption_not_a_foreign_file(small, tmp_path):
    """The header is ours (it names seed, scenario, actors) but its format string was hit: corrupted."""
    path, data, *_ = small
    at = data.index(b"fedemu-journal")
    bad = tmp_path / "fmt.fjl"
    bad.write_bytes(data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1:])
    with pytest.raises(JournalError, match=r"journal corrupted at byte 0 \(header\): its checksum does not match"):
        JournalReader(bad)
