"""`fedemu replay`: --verify on good, altered, truncated and stale journals; --show and its filters."""

import os
import shutil
import textwrap

import pytest

import fedemu.tools.replay as replay_mod
from fedemu.fabric.journal import CODE_NAMES, DELIVER, DROP, FAULT, SEND, TIMER_FIRE, TIMER_SET, JournalReader
from fedemu.fabric.replay import Divergence, Formatter, compare, describe
from fedemu.tools import runner
from fedemu.tools.cli import main

from fabric_helpers import read_journal

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


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ---- --verify --------------------------------------------------------------------------------------
def test_verify_a_good_journal(capsys, journals):
    full = journals[2]
    n = len(read_journal(full)[1])
    code, out, err = run_cli(capsys, "replay", str(full), "--verify")
    assert (code, out, err) == (0, f"identical: {n} records, digest matches\n", "")


def test_verify_reports_the_first_differing_record(capsys, tmp_path, journals):
    """Flip the 'copy' byte (fixint 0 -> 1) of the first delivery: record i differs, at its time."""
    offsets, _, end, records = layout(journals[0])
    i = next(k for k, r in enumerate(records) if r[0] == DELIVER)
    last_byte = (offsets + [end])[i + 1] - 1
    data = bytearray(journals[0].read_bytes())
    assert data[last_byte] == 0
    data[last_byte] = 1
    (tmp_path / "x.fjl").write_bytes(data)
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "x.fjl"), "--verify")
    t, src, seq, dst = records[i][1:5]
    lines = out.splitlines()
    assert code == 1 and err == ""
    assert lines[0] == f"journals diverge at record {i} (virtual time {t / 1e6:.6f}s): records differ"
    assert lines[1].startswith(f"  expected: [{i:>8}] ") and lines[1].endswith(" (duplicate)")
    assert f"deliver peer-{src} -> peer-{dst} #{seq}" in lines[1] and f"#{seq}" in lines[2]
    assert lines[2].startswith(f"  got:      [{i:>8}] ") and not lines[2].endswith("(duplicate)")


def test_verify_names_the_message_kind_of_a_differing_delivery(capsys, tmp_path, journals):
    offsets, _, end, records = layout(journals[0])
    i = next(k for k, r in enumerate(records) if r[0] == DELIVER)
    data = bytearray(journals[0].read_bytes())
    data[(offsets + [end])[i + 1] - 1] = 1
    (tmp_path / "x.fjl").write_bytes(data)
    _, out, _ = run_cli(capsys, "replay", str(tmp_path / "x.fjl"), "--verify")
    assert "None" not in out and "demo.ping" in out.splitlines()[1]


def test_verify_detects_an_altered_footer_digest(capsys, tmp_path, journals):
    data = bytearray(journals[0].read_bytes())
    _, _, end, records = layout(journals[0])
    digest = read_journal(journals[0])[2]["digest"]
    at = data.index(digest.encode(), end)
    data[at] = ord("0") if data[at] != ord("0") else ord("1")
    (tmp_path / "d.fjl").write_bytes(data)
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "d.fjl"), "--verify")
    assert code == 1
    assert f"journals diverge at record {len(records)} (virtual time ?)" in out
    assert f"digest mismatch: footer says {data[at:at + 32].decode()}, records hash to {digest}" in out


def test_verify_detects_an_altered_footer_count(capsys, tmp_path, journals):
    data = bytearray(journals[0].read_bytes())
    _, _, end, _ = layout(journals[0])
    footer = read_journal(journals[0])[2]
    assert footer["sent"] < 128  # a positive fixint: one byte
    at = data.index(b"\xa4sent", end) + 5
    assert data[at] == footer["sent"]
    data[at] ^= 0x01
    (tmp_path / "f.fjl").write_bytes(data)
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "f.fjl"), "--verify")
    assert code == 1, out


def test_bytes_after_the_footer_are_reported(capsys, tmp_path, journals):
    data = journals[0].read_bytes()
    (tmp_path / "tail.fjl").write_bytes(data + b"\x00")
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "tail.fjl"), "--verify")
    assert code in (1, 2) and f"at byte {len(data)}" in out + err


def _flips(path, copy, region="records"):
    """Every single-byte change (xor 0x01, 0x80 and 0xff) of the records region of ``path``, or of the footer
    after it, made in place in ``copy`` (one pwrite each way: rewriting whole files is slow on some disks);
    yields each offset."""
    data = path.read_bytes()
    copy.write_bytes(data)
    _, start, end, _ = layout(path)
    fd = os.open(copy, os.O_RDWR)
    try:
        for off in range(start, end) if region == "records" else range(end, len(data)):
            for x in (0x01, 0x80, 0xFF):
                os.pwrite(fd, bytes([data[off] ^ x]), off)
                yield off
                os.pwrite(fd, data[off:off + 1], off)
    finally:
        os.close(fd)


def test_every_single_byte_change_of_the_records_is_detected(tmp_path, journals):
    small, again, _ = journals
    offsets, start, end, records = layout(small)
    bad = tmp_path / "flip.fjl"
    n = 0
    for off in _flips(small, bad):
        div, count = compare(bad, again)
        assert div is not None, f"a change at byte {off} went unnoticed"
        rec_index = max(k for k, o in enumerate(offsets) if o <= off)
        # the changed record itself, or (when it still decodes equal, e.g. float64 0.0 read as float32 0.0
        # followed by stray bytes) the one after it, or the digest
        assert div.index <= rec_index + 1 or "digest mismatch" in div.reason, (off, div)
        assert div.index == count, (off, div)
        n += 1
    assert n == 3 * (end - start) > 3000


def test_every_single_byte_change_of_the_footer_is_detected(tmp_path, journals):
    """The footer's digest and counts are checked too: any change there is a divergence after the last
    record, described without a traceback."""
    small, again, _ = journals
    _, _, end, records = layout(small)
    names = list(JournalReader(small).header["actors"])
    bad = tmp_path / "flip.fjl"
    n = 0
    for off in _flips(small, bad, region="footer"):
        div, count = compare(bad, again)
        assert div is not None, f"a change at byte {off} (footer) went unnoticed"
        assert div.index == count == len(records), (off, div)
        assert describe(div, names).startswith(f"journals diverge at record {len(records)} ")
        n += 1
    assert n == 3 * (len(small.read_bytes()) - end) > 150


def test_no_single_byte_change_makes_verify_or_show_raise(tmp_path, journals, monkeypatch, capsys):
    small, again, _ = journals
    monkeypatch.setattr(replay_mod, "rerun", lambda header, path: shutil.copy(again, path))
    names = list(JournalReader(small).header["actors"])
    bad = tmp_path / "flip.fjl"
    for off in _flips(small, bad):
        div, _ = compare(bad, again)
        describe(div, names)  # what --verify prints
        if off % 9 == 0:  # the CLI itself, on a sample
            assert main(["replay", str(bad), "--verify"]) == 1
            assert main(["replay", str(bad), "--show"]) in (0, 2)
            capsys.readouterr()


def test_a_damaged_record_is_reported_with_its_byte_offset(capsys, tmp_path, journals):
    """Replace a record's array header with 0xc1 (never used by msgpack): corrupted at that record's offset."""
    offsets, _, _, _ = layout(journals[0])
    data = bytearray(journals[0].read_bytes())
    data[offsets[7]] = 0xC1
    (tmp_path / "c.fjl").write_bytes(data)
    code, out, _ = run_cli(capsys, "replay", str(tmp_path / "c.fjl"), "--verify")
    assert code == 1
    assert out.startswith(f"journals diverge at record 7 (virtual time ?): {tmp_path / 'c.fjl'}: "
                          f"journal corrupted at byte {offsets[7]}: ")
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "c.fjl"), "--show")
    assert code == 2 and f"journal corrupted at byte {offsets[7]}" in err and "Traceback" not in err
    assert len(out.splitlines()) == 7  # the seven good records were shown first


# ---- truncation ------------------------------------------------------------------------------------
def test_verify_reports_every_truncation_with_its_offset(capsys, tmp_path, journals):
    small, again, _ = journals
    offsets, start, end, _ = layout(small)
    data = small.read_bytes()
    cut_path = tmp_path / "cut.fjl"
    cut_path.write_bytes(data)
    for cut in range(len(data) - 1, start - 1, -1):  # shorten the file in place, byte by byte
        os.truncate(cut_path, cut)
        div, count = compare(cut_path, again)
        broken = max(o for o in offsets + [end] if o <= cut)
        assert div is not None and div.expected is None and div.got is None
        assert f" at byte {broken}: " in div.reason, (cut, div.reason)
        assert div.index == count == len([o for o in offsets if o < broken])
    cut_path.write_bytes(data[: offsets[5] + 2])
    code, out, err = run_cli(capsys, "replay", str(cut_path), "--verify")
    assert code == 1 and f"at byte {offsets[5]}" in out and err == ""
    cut_path.write_bytes(data[:10])
    code, out, err = run_cli(capsys, "replay", str(cut_path), "--verify")
    assert code == 2 and "at byte 0" in err and out == ""


def test_verify_says_truncated_at_byte_n(capsys, tmp_path, journals):
    offsets, _, end, _ = layout(journals[0])
    data = journals[0].read_bytes()
    for cut, broken in ((offsets[5] + 2, offsets[5]), (end, end), (end + 3, end)):
        (tmp_path / "cut.fjl").write_bytes(data[:cut])
        code, out, err = run_cli(capsys, "replay", str(tmp_path / "cut.fjl"), "--verify")
        assert code in (1, 2) and f"truncated at byte {broken}" in out + err


# ---- header damage and stale journals ----------------------------------------------------------------
@pytest.mark.parametrize("key", [b"peers", b"scenario"])
def test_a_damaged_header_key_is_an_error_not_a_traceback(capsys, tmp_path, journals, key):
    data = bytearray(journals[0].read_bytes())
    at = data.index(key)
    data[at + 1] ^= 0x20  # same length, another name
    (tmp_path / "h.fjl").write_bytes(data)
    code, out, err = run_cli(capsys, "replay", str(tmp_path / "h.fjl"), "--verify")
    assert code in (1, 2) and "Traceback" not in err


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
    assert run_cli(capsys, "replay", str(log), "--verify")[0] == 0

    scen.write_text(SCENARIO.replace("MULT = 1", "MULT = 2"))
    code, out, _ = run_cli(capsys, "replay", str(log), "--verify")
    first = next(i for i, r in enumerate(records) if r[0] == SEND and r[7] != (0,))  # Ping(1) became Ping(2)
    assert code == 1
    assert out.splitlines()[0] == (f"journals diverge at record {first} (virtual time "
                                   f"{records[first][1] / 1e6:.6f}s): records differ")
    assert "[1]" in out.splitlines()[1] and "[2]" in out.splitlines()[2]

    # b no longer answers the last ping: the re-run is the recording minus its last records
    assert records[-2][0] == SEND and records[-2][7] == (-1,)
    scen.write_text(SCENARIO.replace("LAST = 3", "LAST = 99"))
    code, out, _ = run_cli(capsys, "replay", str(log), "--verify")
    assert code == 1
    assert out.splitlines()[0] == (f"journals diverge at record {len(records) - 2} (virtual time "
                                   f"{records[-2][1] / 1e6:.6f}s): the re-run ended earlier")
    assert out.splitlines()[2] == "  got:      (nothing)"

    # and the other way round: a journal of the shorter run, verified against the longer code
    assert main(["run", str(scen), "--journal", str(log), "--quiet"]) == 0
    capsys.readouterr()
    scen.write_text(SCENARIO)
    code, out, _ = run_cli(capsys, "replay", str(log), "--verify")
    assert code == 1 and out.splitlines()[0].endswith("the re-run has more records")
    assert out.splitlines()[1] == "  expected: (nothing)"


# ---- --show ----------------------------------------------------------------------------------------
def test_show_prints_every_record_then_the_footer(capsys, journals):
    full = journals[2]
    _, records, footer = read_journal(full)
    code, out, _ = run_cli(capsys, "replay", str(full), "--show")
    lines = out.splitlines()
    assert code == 0 and len(lines) == len(records) + 1
    assert lines[-1] == f"-- {len(records)} records shown; footer: {footer}"
    assert lines[0] == "[       0]        0.000000s timer   peer-0 #1 demo.tick [] fires 0.010000s"
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
    _, out, _ = run_cli(capsys, "replay", str(full), "--show", "--from", "0.3", "--to", "0.4", "--kind", "drop",
                        "--actor", "peer-3")
    expected = [i for i, r in enumerate(records)
                if 300_000 <= r[1] <= 400_000 and r[0] == DROP and _involves(r, 3, "peer-3")]
    assert _shown_indices(out) == expected and expected
    assert all("cause=partition" in line for line in out.splitlines()[:-1])


def test_formatter_lines_for_each_record_type():
    fmt = Formatter(["a", "b"])
    assert fmt.format(0, (SEND, 1500, 0, 3, 1, 2500, "k.x", (1, "y"))) == \
        "[       0]        0.001500s send    a -> b #3 k.x [1, 'y'] due 0.002500s"
    assert fmt.format(1, (DELIVER, 2500, 0, 3, 1, 1)) == \
        "[       1]        0.002500s deliver a -> b #3 k.x (duplicate)"
    assert fmt.format(2, (DROP, 2500, 0, 3, 1, "dead")) == \
        "[       2]        0.002500s drop    a -> b #3 k.x cause=dead"
    assert fmt.format(3, (TIMER_SET, 0, 1, 4, 10, "k.t", ())) == \
        "[       3]        0.000000s timer   b #4 k.t [] fires 0.000010s"
    assert fmt.format(4, (TIMER_FIRE, 10, 1, 4)) == "[       4]        0.000010s fire    b #4 k.t"
    assert fmt.format(5, (FAULT, 7, 2, "partition", (("a",), ("b",)), 0.0)) == \
        "[       5]        0.000007s fault   partition target=[('a',), ('b',)] value=0.0"
    assert fmt.name(-1) == "outside" and fmt.name(9) == "#9"
    assert describe(Divergence(3, None, None, None, "why"), ["a"]).splitlines() == [
        "journals diverge at record 3 (virtual time ?): why", "  expected: (nothing)", "  got:      (nothing)"]
