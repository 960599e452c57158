"""The journal: layout, record shapes, digest, chunked writing, message encoding, damage reporting."""

import hashlib

import attrs
import msgpack
import pytest

import fedemu.fabric.journal as journal_mod
from fedemu.fabric import messages
from fedemu.fabric.errors import JournalError
from fedemu.fabric.journal import CODE_NAMES, DELIVER, DROP, FAULT, SEND, TIMER_FIRE, TIMER_SET, Journal, JournalReader
from fedemu.fabric.network import Latency, Link, Network
from fedemu.tools import runner

from fabric_helpers import Box, Probe, Sender, Sink, by_code, read_journal, run_fabric

SHAPES = {SEND: 8, DELIVER: 6, DROP: 6, TIMER_SET: 7, TIMER_FIRE: 4, FAULT: 6}


@pytest.fixture(scope="module")
def demo_journal(tmp_path_factory):
    path = tmp_path_factory.mktemp("journal") / "demo.fjl"
    result = runner.execute("demo", seed=1, overrides={"duration_ms": 400}, journal_path=path)
    return path, result


def test_layout_header_records_footer(demo_journal):
    path, result = demo_journal
    header, records, footer = read_journal(path)
    assert header["format"] == "fedemu-journal" and header["version"] == 1
    assert header["seed"] == 1 and header["scenario"] == "scenarios.demo"
    assert header["params"]["duration_ms"] == 400 and header["actors"] == tuple(f"peer-{i}" for i in range(5))
    assert footer["footer"] is True and footer["digest"] == result.digest
    assert footer["sent"] == result.fabric.statistics().sent == len(by_code(records, SEND))
    assert footer["events"] == result.fabric.statistics().events
    # events counts heap entries: deliveries, drops at delivery time, faults and the timers that fired from the
    # heap (timers merged into a mailbox inside a window are not heap events)
    popped = sum(1 for r in records if r[0] in (DELIVER, FAULT) or r[0] == DROP and r[5] != "loss")
    assert popped < footer["events"] <= popped + len(by_code(records, TIMER_FIRE))


def test_every_record_has_its_documented_shape(demo_journal):
    _, records, _ = read_journal(demo_journal[0])
    seen = {CODE_NAMES[r[0]] for r in records}
    assert seen == set(CODE_NAMES)  # the demo produces every kind of record
    causes = {r[5] for r in records if r[0] == DROP}
    assert causes == {"loss", "partition", "dead", "stale-timer"}
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


def test_digest_is_blake2b_of_the_record_bytes(demo_journal):
    path, result = demo_journal
    reader = JournalReader(path)
    for _ in reader.records():
        pass
    data = path.read_bytes()
    body = data[reader.records_start:reader.records_end]
    assert hashlib.blake2b(body, digest_size=16).hexdigest() == result.digest
    assert msgpack.unpackb(data[:reader.records_start], raw=False)["format"] == "fedemu-journal"
    reader.check_digest()
    reader.close()


def test_chunked_writing_changes_nothing(tmp_path, monkeypatch, demo_journal):
    """With a 64-byte flush threshold every window drains: same bytes, same digest."""
    monkeypatch.setattr(journal_mod, "FLUSH_BYTES", 64)
    path = tmp_path / "small-chunks.fjl"
    result = runner.execute("demo", seed=1, overrides={"duration_ms": 400}, journal_path=path)
    assert result.digest == demo_journal[1].digest
    assert path.read_bytes() == demo_journal[0].read_bytes()


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
    (tmp_path / "v").write_bytes(msgpack.packb({"format": "fedemu-journal", "version": 99}))
    with pytest.raises(JournalError, match="journal version 99 is not supported; this fedemu reads version 1"):
        JournalReader(tmp_path / "v")


def test_reader_reports_a_bad_record_with_its_offset(tmp_path, demo_journal):
    data = demo_journal[0].read_bytes()
    reader = JournalReader(demo_journal[0])
    start = reader.records_start
    reader.close()
    (tmp_path / "bad").write_bytes(data[:start] + msgpack.packb((9, 0)) + data[start:])
    with pytest.raises(JournalError, match=f"journal corrupted at byte {start}: record 0 is \\(9, 0\\)"):
        list(JournalReader(tmp_path / "bad").records())
    (tmp_path / "map").write_bytes(data[:start] + msgpack.packb({"x": 1}) + data[start:])
    with pytest.raises(JournalError, match=f"journal corrupted at byte {start}: unexpected map"):
        list(JournalReader(tmp_path / "map").records())


def _first_record_offsets(path):
    reader = JournalReader(path)
    offsets = [off for _, off, _ in reader.records()]
    end = reader.records_end
    reader.close()
    return offsets, end


def test_truncation_is_reported_with_the_offset_of_the_broken_record(tmp_path, demo_journal):
    data = demo_journal[0].read_bytes()
    offsets, end = _first_record_offsets(demo_journal[0])
    for cut in (offsets[3] + 1, offsets[10], (offsets[20] + offsets[21]) // 2, end, len(data) - 1):
        (tmp_path / "t").write_bytes(data[:cut])
        broken = max(o for o in offsets + [end] if o <= cut)
        with pytest.raises(JournalError, match=f"at byte {broken}:"):
            list(JournalReader(tmp_path / "t").records())


def test_truncation_is_reported_as_truncation(tmp_path, demo_journal):
    data = demo_journal[0].read_bytes()
    offsets, end = _first_record_offsets(demo_journal[0])
    for cut, broken in ((offsets[5] + 2, offsets[5]), (end, end), (7, 0)):
        (tmp_path / "t").write_bytes(data[:cut])
        with pytest.raises(JournalError, match=f"journal truncated at byte {broken}: expected "):
            list(JournalReader(tmp_path / "t").records())


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
        f.network = Network(Link(Latency.uniform(10, 90), loss=0.2, dup=0.3))
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
    assert {r[5] for r in by_code(records, DELIVER)} == {0, 1}
