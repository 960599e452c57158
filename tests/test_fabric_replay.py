"""`fedemu replay`: --verify on good, diverging, damaged, truncated and stale journals; --show, its
filters and its labels; what is an error."""

import os
import textwrap

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fedemu.fabric.journal as journal_mod
import fedemu.tools.replay.replay as replay_mod
from fedemu.fabric.errors import JournalError
from fedemu.fabric.journal import CODE_NAMES, DELIVER, DROP, FAULT, SEND, TIMER_FIRE, TIMER_SET, JournalReader
from fedemu.fabric.replay import Divergence, Formatter, compare, describe, name_ranges
from fedemu.tools.run import runner
from fedemu.tools.cli import main

from fabric_helpers import read_journal
from journal_frames import reframe, split

SMALL = {"duration_ms": 20}  # a demo journal of 72 records: every byte of it can be flipped


def _record(path, overrides=SMALL, seed=1):
    runner.execute("demo", seed=seed, overrides=overrides, journal_path=path)
    return path


@pytest.fixture(scope="module")
def journals(tmp_path_factory):
    base = tmp_path_factory.mktemp("replay")
    small, again, full = base / "small.fjl", base / "again.fjl", base / "full.fjl"
    _record(small), _record(again), _record(full, overrides={})
    assert small.read_bytes() == again.read_bytes()
    return small, again, full


def layout(path):
    """(record offsets, records_start, records_end, records)."""
    reader = JournalReader(path)
    items = list(reader.records())
    out = ([o for _, o, _ in items], reader.records_start, reader.records_end, [r for _, _, r in items])
    reader.close()
    return out


def body_offsets(body: bytes) -> list[int]:
    """Where each record starts in the concatenated record bytes, plus the end."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(body)
    offsets = []
    while unpacker.tell() < len(body):
        offsets.append(unpacker.tell())
        unpacker.unpack()
    return offsets + [len(body)]


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def no_rerun(monkeypatch):
    """Make --verify fail loudly if it re-runs (damage must be found before the re-run)."""
    def rerun(header, path):
        raise AssertionError("re-ran a damaged journal")

    monkeypatch.setattr(replay_mod, "rerun", rerun)


# ---- --verify --------------------------------------------------------------------------------------
def test_verify_a_good_journal(capsys, journals):
    full = journals[2]
    n = len(read_journal(full)[1])
    code, out, err = run_cli(capsys, "replay", str(full), "--verify")
    assert (code, out, err) == (0, f"identical: {n} records, digest matches\n", "")


def _other_code(src, dst, i, edit):
    """A journal as other code would have written it: record ``i``'s bytes passed through ``edit``, every
    checksum and the digest valid."""
    def records(body):
        offs = body_offsets(body)
        return body[:offs[i]] + edit(body[offs[i]:offs[i + 1]]) + body[offs[i + 1]:]

    dst.write_bytes(reframe(src.read_bytes(), records=records))
    return dst


def test_verify_reports_the_first_differing_record(capsys, tmp_path, journals):
    """The retransmissions byte (fixint 0 -> 1) of the first delivery differs: record i differs, at its time."""
    _, _, _, records = layout(journals[0])
    i = next(k for k, r in enumerate(records) if r[0] == DELIVER)
    x = _other_code(journals[0], tmp_path / "x.fjl", i, lambda rec: rec[:-1] + b"\x01")
    code, out, err = run_cli(capsys, "replay", str(x), "--verify")
    t, src, seq, dst = records[i][1:5]
    lines = out.splitlines()
    assert code == 1 and err == ""
    assert lines[0] == f"journals diverge at record {i} (virtual time {t / 1e6:.6f}s): records differ"
    assert lines[1].startswith(f"  expected: [{i:>8}] ") and lines[1].endswith(" (after 1 retransmission)")
    assert f"deliver peer-{src} -> peer-{dst} #{seq}" in lines[1] and f"#{seq}" in lines[2]
    assert lines[2].startswith(f"  got:      [{i:>8}] ") and not lines[2].endswith("retransmission)")


def test_verify_names_the_message_kind_of_a_differing_delivery(capsys, tmp_path, journals):
    _, _, _, records = layout(journals[0])
    i = next(k for k, r in enumerate(records) if r[0] == DELIVER)
    x = _other_code(journals[0], tmp_path / "x.fjl", i, lambda rec: rec[:-1] + b"\x01")
    _, out, _ = run_cli(capsys, "replay", str(x), "--verify")
    assert "None" not in out and "demo.ping" in out.splitlines()[1]


def test_verify_reports_a_different_footer_as_a_divergence(capsys, tmp_path, journals):
    """A footer with another count (checksums valid: other code, not damage) is a divergence after the
    last record, naming the key."""
    footer = read_journal(journals[0])[2]
    (tmp_path / "f.fjl").write_bytes(reframe(journals[0].read_bytes(), footer=lambda f: {**f, "sent": f["sent"] + 1}))
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "f.fjl"), "--verify")
    n = len(read_journal(journals[0])[1])
    assert code == 1 and err == ""
    assert out.splitlines()[0] == (f"journals diverge at record {n} (virtual time ?): footers differ "
                                   f"(sent: expected {footer['sent'] + 1}, got {footer['sent']})")


def test_an_altered_digest_is_an_error_not_a_divergence(capsys, tmp_path, journals, monkeypatch):
    no_rerun(monkeypatch)
    digest = read_journal(journals[0])[2]["digest"]
    other = ("0" if digest[0] != "0" else "1") + digest[1:]
    (tmp_path / "d.fjl").write_bytes(reframe(journals[0].read_bytes(), footer=lambda f: {**f, "digest": other}))
    for mode in ("--verify", "--show"):
        code, out, err = run_cli(capsys, "replay", str(tmp_path / "d.fjl"), mode)
        assert code == 2 and "journals diverge" not in out
        assert err == (f"fedemu: error: {tmp_path / 'd.fjl'}: digest mismatch: footer says {other}, records hash to "
                       f"{digest} (the checksums hold, so the journal was altered, not damaged)\n")


def test_bytes_after_the_footer_are_an_error(capsys, tmp_path, journals, monkeypatch):
    no_rerun(monkeypatch)
    data = journals[0].read_bytes()
    (tmp_path / "tail.fjl").write_bytes(data + b"\x00")
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "tail.fjl"), "--verify")
    assert code == 2 and out == "" and f"journal corrupted at byte {len(data)}: unexpected data" in err


def _flips(path, copy, start=0, end=None):
    """Every single-byte change (xor 0x01, 0x80 and 0xff) of bytes [start, end) of ``path``, made in place
    in ``copy`` (one pwrite each way: rewriting whole files is slow on some disks); yields each offset."""
    data = path.read_bytes()
    copy.write_bytes(data)
    fd = os.open(copy, os.O_RDWR)
    try:
        for off in range(start, len(data) if end is None else end):
            for x in (0x01, 0x80, 0xFF):
                os.pwrite(fd, bytes([data[off] ^ x]), off)
                yield off
                os.pwrite(fd, data[off:off + 1], off)
    finally:
        os.close(fd)


def test_no_single_byte_change_is_a_divergence(tmp_path, journals):
    """Every byte after the header's checksum, flipped: compare raises 'journal corrupted at byte N
    (record R)' (the frame head, the block or the footer), never returns a divergence."""
    small, again, _ = journals
    offsets, start, _, _ = layout(small)
    bad = tmp_path / "flip.fjl"
    n = 0
    for off in _flips(small, bad, start=start):
        with pytest.raises(JournalError, match="journal corrupted at byte "):
            compare(bad, again)
        n += 1
    assert n == 3 * (len(small.read_bytes()) - start) > 3000


def test_the_cli_reports_damage_as_one_line_and_status_2(capsys, tmp_path, journals, monkeypatch):
    """On a sample of single-byte changes anywhere in the file: --verify and --show end with status 2
    and one line on stderr; --verify prints nothing and never re-runs."""
    small = journals[0]
    no_rerun(monkeypatch)
    bad = tmp_path / "flip.fjl"
    for off in _flips(small, bad):
        if off % 23:
            continue
        code, out, err = run_cli(capsys, "replay", str(bad), "--verify")
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith("fedemu: error: "), (off, err)
        code, out, err = run_cli(capsys, "replay", str(bad), "--show")
        assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (off, err)


@pytest.fixture(scope="module")
def blocked(tmp_path_factory):
    """The full demo journal drained at every chance: many blocks (so --show has records before damage)."""
    old, journal_mod.FLUSH_BYTES = journal_mod.FLUSH_BYTES, 1
    try:
        return _record(tmp_path_factory.mktemp("blocked") / "blocked.fjl", overrides={})
    finally:
        journal_mod.FLUSH_BYTES = old


def test_a_damaged_block_is_named_by_its_first_byte_and_record(capsys, tmp_path, blocked):
    offsets, _, _, _ = layout(blocked)
    data = bytearray(blocked.read_bytes())
    _, frames = split(bytes(data))
    at, _, payload = frames[3]
    start = at + 17
    first = offsets.index(start)
    data[start + len(payload) // 2] ^= 0x10
    (tmp_path / "c.fjl").write_bytes(data)
    expected = (f"fedemu: error: {tmp_path / 'c.fjl'}: journal corrupted at byte {start} (record {first}): the block of "
                f"bytes {start}..{start + len(payload) - 1} (records from {first}) fails its checksum\n")
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "c.fjl"), "--verify")
    assert (code, out, err) == (2, "", expected)
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "c.fjl"), "--show")
    assert (code, err) == (2, expected)
    assert len(out.splitlines()) == first  # the records of the good blocks before it were shown


# ---- truncation ------------------------------------------------------------------------------------
def test_truncation_keeps_its_message(capsys, tmp_path, blocked, monkeypatch):
    no_rerun(monkeypatch)
    data = blocked.read_bytes()
    _, frames = split(data)
    at = frames[4][0]
    for cut, expect in ((at + 5, f"journal truncated at byte {at}: expected a block of records from record "),
                        (at + 40, f"journal truncated at byte {at}: the block there needs "),
                        (frames[-1][0] + 20, f"journal truncated at byte {frames[-1][0]}: the footer there needs "),
                        (10, "journal truncated at byte 0: expected the header")):
        (tmp_path / "cut.fjl").write_bytes(data[:cut])
        for mode in ("--verify", "--show"):
            code, out, err = run_cli(capsys, "replay", str(tmp_path / "cut.fjl"), mode)
            assert code == 2 and expect in err and err.count("\n") == 1, (cut, err)


# ---- header damage and stale journals ----------------------------------------------------------------
@pytest.mark.parametrize("key", [b"peers", b"scenario"])
def test_a_damaged_header_is_an_error_not_a_traceback(capsys, tmp_path, journals, key):
    data = bytearray(journals[0].read_bytes())
    at = data.index(key)
    data[at + 1] ^= 0x20  # same length, another name
    (tmp_path / "h.fjl").write_bytes(data)
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "h.fjl"), "--verify")
    assert code == 2 and err.endswith("journal corrupted at byte 0 (header): its checksum does not match\n")


SCENARIO = textwrap.dedent('''
    from fedemu.fabric.actor import Actor
    from fedemu.fabric.messages import message

    PARAMS = {"n": 4}

    @message("fabtest.replay.ping")
    class Ping:
        k: int

    class A(Actor):
        def on_start(self):
            if self.id == 0:
                for k in range(self.fabric_n):
                    self.set_timer(100 * k, Ping(k))

        def on_Ping(self, msg, src):
            if src == self.id:
                self.send(1, Ping(msg.k * MULT))
            elif msg.k == LAST:
                self.send(0, Ping(-1))

    MULT = 1
    LAST = 3

    def build(fabric, params):
        for name in ("a", "b"):
            fabric.add(name, lambda: _mk(params["n"]))

    def _mk(n):
        a = A()
        a.fabric_n = n
        return a
''')


def test_verify_detects_that_the_code_changed_since_recording(capsys, tmp_path):
    """Record with a scenario file, then change what it sends (MULT) or how much (n): --verify names the first
    record that differs, or says which run ended first."""
    scen = tmp_path / "scen_replay.py"
    scen.write_text(SCENARIO)
    log = tmp_path / "log.fjl"
    assert main(["run", str(scen), "--journal", str(log), "--quiet", "--set", "n=4"]) == 0
    capsys.readouterr()
    _, records, _ = read_journal(log)
    assert run_cli(capsys, "replay", str(log), "--verify", "--scenario", str(scen))[0] == 0

    scen.write_text(SCENARIO.replace("MULT = 1", "MULT = 2"))
    code, out, _ = run_cli(capsys, "replay", str(log), "--verify", "--scenario", str(scen))
    first = next(i for i, r in enumerate(records) if r[0] == SEND and r[7] != (0,))  # Ping(1) became Ping(2)
    assert code == 1
    assert out.splitlines()[0] == (f"journals diverge at record {first} (virtual time "
                                   f"{records[first][1] / 1e6:.6f}s): records differ")
    assert out.splitlines()[1].endswith("fabtest.replay.ping k=1 due 0.000600s") and " k=2 " in out.splitlines()[2]

    # b no longer answers the last ping: the re-run is the recording minus its last records
    assert records[-2][0] == SEND and records[-2][7] == (-1,)
    scen.write_text(SCENARIO.replace("LAST = 3", "LAST = 99"))
    code, out, _ = run_cli(capsys, "replay", str(log), "--verify", "--scenario", str(scen))
    assert code == 1
    assert out.splitlines()[0] == (f"journals diverge at record {len(records) - 2} (virtual time "
                                   f"{records[-2][1] / 1e6:.6f}s): the re-run ended earlier")
    assert out.splitlines()[2] == "  got:      (nothing)"

    # and the other way round: a journal of the shorter run, verified against the longer code
    assert main(["run", str(scen), "--journal", str(log), "--quiet"]) == 0
    capsys.readouterr()
    scen.write_text(SCENARIO)
    code, out, _ = run_cli(capsys, "replay", str(log), "--verify", "--scenario", str(scen))
    assert code == 1 and out.splitlines()[0].endswith("the re-run has more records")
    assert out.splitlines()[1] == "  expected: (nothing)"


# ---- --show ----------------------------------------------------------------------------------------
def test_show_prints_every_record_then_the_footer(capsys, journals):
    full = journals[2]
    _, records, footer = read_journal(full)
    code, out, _ = run_cli(capsys, "replay", str(full), "--show")
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(records) + 1
    assert lines[-1] == f"-- {len(records)} of {len(records)} records shown; footer (digest checked): {footer}"
    assert lines[0] == "[       0]        0.000000s timer   peer-0 #1 demo.tick fires 0.010000s"
    send = next(line for line in lines if " send " in line)
    assert send.endswith("due 0.010308s") and " demo.ping n=1 " in send
    assert all(line.startswith(f"[{i:>8}] ") for i, line in enumerate(lines[:-1]))
    assert all(f" {CODE_NAMES[r[0]]} " in line for r, line in zip(records, lines))


def _involves(rec, idx, name):
    code = rec[0]
    if code in (SEND, DELIVER, DROP):
        return idx in (rec[2], rec[4])
    if code in (TIMER_SET, TIMER_FIRE):
        return rec[2] == idx
    flat = [x for t in rec[4] for x in (t if isinstance(t, tuple) else (t,))]
    return name in flat


def _shown_indices(out):
    return [int(line[1:9]) for line in out.splitlines()[:-1]]


def test_show_filters_by_actor(capsys, journals):
    full = journals[2]
    _, records, _ = read_journal(full)
    _, out, _ = run_cli(capsys, "replay", str(full), "--show", "--actor", "peer-2")
    expected = [i for i, r in enumerate(records) if _involves(r, 2, "peer-2")]
    assert _shown_indices(out) == expected
    assert any(records[i][0] == FAULT for i in expected)  # its crash and restart


@pytest.mark.parametrize("kind", ["fault", "drop", "timer", "fire", "deliver", "send"])
def test_show_filters_by_record_type(capsys, journals, kind):
    full = journals[2]
    _, records, _ = read_journal(full)
    _, out, _ = run_cli(capsys, "replay", str(full), "--show", "--kind", kind)
    assert _shown_indices(out) == [i for i, r in enumerate(records) if CODE_NAMES[r[0]] == kind]


def test_show_filters_by_message_kind(capsys, journals):
    """A tag filter shows the pings' sends and, via their (src, seq), their deliveries and drops."""
    full = journals[2]
    _, records, _ = read_journal(full)
    pings = {(r[2], r[3]) for r in records if r[0] == SEND and r[6] == "demo.ping"}
    expected = [i for i, r in enumerate(records) if r[0] in (SEND, DELIVER, DROP) and (r[2], r[3]) in pings]
    _, out, _ = run_cli(capsys, "replay", str(full), "--show", "--kind", "demo.ping")
    assert _shown_indices(out) == expected
    assert {records[i][0] for i in expected} == {SEND, DELIVER, DROP}


def test_show_filters_by_time_window_and_combines_filters(capsys, journals):
    full = journals[2]
    _, records, _ = read_journal(full)
    _, out, _ = run_cli(capsys, "replay", str(full), "--show", "--from", "0.1", "--to", "0.2")
    expected = [i for i, r in enumerate(records) if 100_000 <= r[1] <= 200_000]
    assert _shown_indices(out) == expected and records[expected[0]][1] == 100_000
    _, out, _ = run_cli(capsys, "replay", str(full), "--show", "--from", "0.3", "--to", "0.6", "--kind", "deliver",
                        "--actor", "peer-3")
    expected = [i for i, r in enumerate(records)
                if 300_000 <= r[1] <= 600_000 and r[0] == DELIVER and _involves(r, 3, "peer-3")]
    assert _shown_indices(out) == expected and expected
    assert any("retransmission" in line for line in out.splitlines()[:-1])  # the partition of 0.3-0.4 s delayed some


def test_formatter_lines_for_each_record_type():
    fmt = Formatter(["a", "b"])
    assert fmt.format(0, (SEND, 1500, 0, 3, 1, 2500, "k.x", (1, "y"))) == \
        "[       0]        0.001500s send    a -> b #3 k.x [1, 'y'] due 0.002500s"
    assert fmt.format(1, (DELIVER, 2500, 0, 3, 1, 1)) == \
        "[       1]        0.002500s deliver a -> b #3 k.x (after 1 retransmission)"
    assert fmt.format(1, (DELIVER, 2500, 0, 3, 1, 3)).endswith("k.x (after 3 retransmissions)")
    assert fmt.format(9, (SEND, 1500, -1, 2, 1, 2000, "fabric.broken", (0, 1, 1500, "timeout"))) == \
        "[       9]        0.001500s send    fabric -> b #2 fabric.broken: connection a -> b broke at 0.001500s " \
        "(timeout) due 0.002000s"
    assert fmt.format(2, (DROP, 2500, 0, 3, 1, "dead")) == \
        "[       2]        0.002500s drop    a -> b #3 k.x cause=dead"
    assert fmt.format(3, (TIMER_SET, 0, 1, 4, 10, "k.t", ())) == \
        "[       3]        0.000000s timer   b #4 k.t fires 0.000010s"
    assert fmt.format(4, (TIMER_FIRE, 10, 1, 4)) == "[       4]        0.000010s fire    b #4 k.t"
    assert fmt.format(5, (FAULT, 7, 2, "partition", (("a",), ("b",)), 0.0)) == \
        "[       5]        0.000007s fault   partition target=[('a',), ('b',)] value=0.0"
    assert fmt.name(-1) == "outside" and fmt.name(9) == "#9"
    assert describe(Divergence(3, None, None, None, "why"), ["a"]).splitlines() == [
        "journals diverge at record 3 (virtual time ?): why", "  expected: (nothing)", "  got:      (nothing)"]


def test_registered_messages_print_field_names_and_times_in_seconds():
    """A ``*_us`` field is shown in seconds under its name without ``_us``; a field count that no longer
    matches the class (a journal from older code) falls back to the plain list."""
    from fedemu.actors.megha.messages import Launch

    fmt = Formatter(["gm-0", "lm-0"])
    rec = (SEND, 0, 0, 1, 1, 300, "megha.launch", (0, 0, 42800, (1,), 12, 0, False, 7))
    assert Launch.__name__ and fmt.format(0, rec) == (
        "[       0]        0.000000s send    gm-0 -> lm-0 #1 megha.launch job_id=0 index=0 duration=0.042800s "
        "demand=(1,) worker=12 gm=0 external=False attempt=7 due 0.000300s")
    assert fmt.format(1, rec[:7] + ((0, 0, 42800),)).endswith("megha.launch [0, 0, 42800] due 0.000300s")


# ---- what is an error ------------------------------------------------------------------------------
def test_an_unknown_actor_is_an_error_listing_the_names(capsys, journals):
    code, out, err = run_cli(capsys, "replay", str(journals[2]), "--actor", "peer2")
    assert (code, out) == (2, "")
    assert err == "fedemu: error: unknown actor 'peer2' (did you mean peer-2?); known: peer-0..peer-4\n"
    code, out, err = run_cli(capsys, "replay", str(journals[2]), "--actor", "outside")
    assert code == 0 and "fabric.broken" in out  # the fabric's notices come from outside


def test_an_unknown_kind_is_an_error_listing_types_and_kinds(capsys, journals):
    code, out, err = run_cli(capsys, "replay", str(journals[2]), "--kind", "demo.pin")
    assert (code, out) == (2, "")
    assert err == ("fedemu: error: unknown --kind (a record type, or a message kind of this run) 'demo.pin' "
                   "(did you mean demo.ping?); known: deliver, demo.ping, demo.pong, demo.tick, drop, "
                   "fabric.broken, fault, fire, send, timer\n")
    code, out, _ = run_cli(capsys, "replay", str(journals[2]), "--kind", "fault", "--from", "99")
    assert code == 0 and out.startswith("-- 0 of ")  # a known kind that matches nothing is no error


def test_verify_takes_no_filters_and_not_show(capsys, journals):
    code, out, err = run_cli(capsys, "replay", str(journals[0]), "--verify", "--actor", "peer-1", "--to", "1")
    assert (code, out) == (2, "")
    assert err == "fedemu: error: --actor, --to filter the records shown; --verify compares them all\n"
    try:
        code = main(["replay", str(journals[0]), "--verify", "--show"])
    except SystemExit as exit_:  # argparse's usage error, if main lets it through
        code = exit_.code
    assert code == 2 and "argument --show: not allowed with argument --verify" in capsys.readouterr().err


def test_name_ranges_examples():
    assert name_ranges(["gm-0", "gm-1", "gm-2", "lm-0", "w-0", "w-1", "w-3", "submitter"]) == \
        "gm-0..gm-2, lm-0, submitter, w-0..w-1, w-3"
    assert name_ranges([]) == "" and name_ranges(["a", "a1", "a01"]) == "a, a01, a1"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.from_regex(r"[a-z]{1,3}-(0|[1-9][0-9]{0,2})", fullmatch=True),
                          st.from_regex(r"[a-z]{1,5}", fullmatch=True)), unique=True, max_size=40))
def test_name_ranges_lists_every_name_once(names):
    """Expanding the folded list gives back exactly the names."""
    import re

    got = set()
    for part in filter(None, name_ranges(names).split(", ")):
        m = re.fullmatch(r"(.*?)(\d+)\.\.(.*?)(\d+)", part)
        if m is None:
            assert part not in got
            got.add(part)
        else:
            assert m.group(1) == m.group(3) and int(m.group(2)) < int(m.group(4))
            for k in range(int(m.group(2)), int(m.group(4)) + 1):
                assert f"{m.group(1)}{k}" not in got
                got.add(f"{m.group(1)}{k}")
    assert got == set(names)


def test_a_recording_stopped_early_verifies_as_the_prefix_of_its_rerun(tmp_path, capsys):
    """The live view's q stops a run: its journal holds what happened up to there, and replay --verify
    finds those records identical in the re-run (which goes on past them)."""
    class StopSoon:
        every = 64
        partial = None

        def __call__(self, fabric, run):
            if fabric.events > 2_000 and self.partial is None:
                self.partial = {"by": "q"}
                fabric.stop()

    path = tmp_path / "stopped.fjl"
    runner.execute("default", overrides={"jobs": 40}, journal_path=path, progress=StopSoon())
    assert read_journal(path)[2]["ended"].startswith("stopped early (q)")
    assert main(["replay", str(path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("identical: ") and "stopped early (q)" in out
    full = tmp_path / "full.fjl"
    runner.execute("default", overrides={"jobs": 40}, journal_path=full)
    assert compare(full, full)[0] is None and compare(path, full)[0] is None
    assert compare(full, path)[0].reason == "the re-run ended earlier"  # a finished run is not a prefix
