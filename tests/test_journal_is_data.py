"""A journal is data, not code (docs/trust.md): replay, in any mode, imports no file a journal's header
names; it re-runs built-in scenarios by name, or the file the user names with ``--scenario``. Reads are
bounded: a frame or header claiming more than its limit is "corrupted" before anything is allocated."""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import msgpack
import pytest

from fedemu.fabric import journal as jmod
from fedemu.fabric.journal import HEAD_BYTES, JournalReader, frame_head
from fedemu.tools.cli import main

from fabric_helpers import capped_fedemu

ROOT = Path(__file__).resolve().parent.parent
EVIL = "from pathlib import Path\nPath(__file__).with_name('IMPORTED').write_text('ran')\nPARAMS = {}\n" \
       "def build(fabric, params):\n    pass\n"


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def demo_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("demo") / "demo.fjl"
    assert main(["run", "demo", "--quiet", "--set", "duration_ms=30", "--journal", str(log)]) == 0
    return log


def _with_header(src: Path, dst: Path, **changes) -> None:
    """``src`` with its header changed and its checksum recomputed (anyone can: it is only a CRC)."""
    reader = JournalReader(src)
    rest = src.read_bytes()[reader.records_start:]
    reader.close()
    data = msgpack.packb({**reader.header, **changes}, use_bin_type=True)
    dst.write_bytes(data + struct.pack(">I", zlib.crc32(data)) + rest)


@pytest.mark.parametrize("mode", [[], ["--kind", "fault"], ["--verify"], ["--tui"], ["--actor", "peer-0"],
                                  ["--diagram", "{t}/d.md"], ["--trace", "{t}/t.json"]])
@pytest.mark.parametrize("how", ["absolute", "relative"])
def test_a_crafted_header_never_makes_replay_import_its_file(capsys, tmp_path, demo_log, monkeypatch, mode, how):
    """Finding 2: a header naming another file ran it on show, --kind, twice on --verify, and on --tui;
    a relative path resolved against the reader's folder."""
    (tmp_path / "evil.py").write_text(EVIL)
    monkeypatch.chdir(tmp_path)
    crafted = tmp_path / "crafted.fjl"
    _with_header(demo_log, crafted, scenario=str(tmp_path / "evil.py") if how == "absolute" else "evil.py")
    code, out, err = _run(capsys, "replay", crafted, *[m.format(t=tmp_path) for m in mode])
    assert not (tmp_path / "IMPORTED").exists(), (code, err)
    if mode in ([], ["--kind", "fault"], ["--actor", "peer-0"]):
        assert code == 0 and "which replay does not import" in err and err.count("\n") == 1
    elif mode[0] in ("--verify", "--tui"):
        assert code == 2 and "replay imports no file a journal names" in err and "--scenario FILE" in err, err


def test_the_file_the_user_names_is_run_and_a_line_says_so(capsys, tmp_path):
    scen = tmp_path / "mine.py"
    scen.write_text(NESTED)
    log = tmp_path / "mine.fjl"
    assert main(["run", str(scen), "--quiet", "--journal", str(log)]) == 0
    capsys.readouterr()
    code, out, err = _run(capsys, "replay", log, "--verify", "--scenario", scen)
    assert (code, err) == (0, "") and out.startswith("identical:")
    moved = tmp_path / "moved.py"
    scen.rename(moved)
    code, out, err = _run(capsys, "replay", log, "--verify", "--scenario", moved)
    assert code == 0 and out.startswith("identical:")
    assert err == f"fedemu: note: re-running {moved}, the scenario you named; the journal was recorded from {scen}\n"
    code, _, err = _run(capsys, "replay", log, "--verify", "--scenario", scen)
    assert code == 2 and f"scenario file '{scen}' does not exist" in err


NESTED = textwrap.dedent('''
    from fedemu.fabric.actor import Actor
    from fedemu.fabric.messages import message

    PARAMS = {}

    @message("usertest.inner")
    class Inner:
        k: int

    @message("usertest.outer")
    class Outer:
        inner: Inner

    class A(Actor):
        def on_start(self):
            if self.id == 0:
                self.send(1, Outer(Inner(7)))

        def on_Outer(self, msg, src):
            pass

    def build(fabric, params):
        for name in ("a", "b"):
            fabric.add(name, A)
''')


def test_a_moved_scenario_file_is_not_called_corruption(tmp_path):
    """Finding 5: show and verify called a healthy journal "corrupted" (unknown message tag) when its
    scenario file had moved: its nested messages could not be decoded."""
    scen = tmp_path / "nested.py"
    scen.write_text(NESTED)
    log = tmp_path / "nested.fjl"
    assert main(["run", str(scen), "--quiet", "--journal", str(log)]) == 0
    scen.rename(tmp_path / "elsewhere.py")
    for argv, status, said in ((["replay", str(log)], 0, "which replay does not import"),
                               (["replay", str(log), "--verify"], 2, f"recorded from the scenario file {scen}")):
        proc = subprocess.run([sys.executable, "-m", "fedemu", *argv], capture_output=True, text=True, cwd=tmp_path)
        assert proc.returncode == status and said in proc.stderr, proc.stderr
        assert "corrupted" not in proc.stderr and proc.stderr.count("\n") == 1
    assert "usertest.outer" in proc.stdout or status == 2
    shown = subprocess.run([sys.executable, "-m", "fedemu", "replay", str(log), "--scenario",
                            str(tmp_path / "elsewhere.py")], capture_output=True, text=True).stdout
    assert "usertest.outer inner=Inner(k=7)" in shown


def test_a_resubmitted_job_journal_checks_in_a_fresh_process(tmp_path):
    """Finding 5: the live view checked the journal before the scenario's message classes were registered,
    and called a run that resubmitted a job "corrupted ... unknown message tag 'job'"."""
    out = tmp_path / "x"
    assert main(["run", "default", "--quiet", "--faults", str(ROOT / "docs/failover-plan.toml"), "--record",
                 "--out", str(out), "--set", "jobs=200"]) == 0
    log = out / "messages.log"
    assert b"\xa3job" in log.read_bytes()  # a resubmitted Job, nested in a message
    code = f"from fedemu.fabric.journal import check; r = check({str(log)!r}); print(r.footer['digest'])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and len(proc.stdout.strip()) == 32, proc.stderr


# ---- bounded reads ---------------------------------------------------------------------------------
def test_a_frame_claiming_gigabytes_is_corrupt_before_it_is_read(tmp_path, demo_log):
    """Finding 4: a frame whose head claims 5 GiB, in a sparse file, made replay take 5.3 GB (a
    MemoryError traceback under a 4 GB limit) before it reported the bad checksum."""
    reader = JournalReader(demo_log)
    start = reader.records_start
    reader.close()
    data = demo_log.read_bytes()
    huge = 5 << 30
    head = struct.pack(">cQI", b"R", huge, 0)
    head += struct.pack(">I", zlib.crc32(head))
    bad = tmp_path / "sparse.fjl"
    with open(bad, "wb") as f:
        f.write(data[:start] + head)
        f.truncate(start + HEAD_BYTES + huge)  # sparse: 5 GiB of zeros the file does not hold
    proc = capped_fedemu(["replay", str(bad)])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr == (f"fedemu: error: {bad}: journal corrupted at byte {start} (record 0): the block there "
                           f"claims {huge:,} bytes, more than the {jmod.MAX_FRAME_BYTES:,} a frame may hold\n")


def test_a_header_claiming_a_huge_string_is_refused_without_reading_it(tmp_path):
    bad = tmp_path / "h.fjl"
    with open(bad, "wb") as f:
        f.write(b"\x81\xa6format\xdb" + struct.pack(">I", 0xFFFFFFF0))  # {"format": <a 4 GiB string>}
        f.truncate(1 << 30)
    proc = capped_fedemu(["replay", str(bad)])
    assert proc.returncode == 2 and "journal corrupted at byte 0 (header)" in proc.stderr, proc.stderr[-2000:]


def test_a_window_larger_than_a_frame_is_split_and_reads_back(tmp_path, monkeypatch):
    """The writer never writes a frame the reader would refuse: a large window goes out in several frames,
    and the digest (over the records' bytes) does not depend on the cut."""
    from fedemu.tools.run import runner

    plain = runner.execute("demo", overrides={"duration_ms": 40}, journal_path=tmp_path / "a.fjl").digest
    monkeypatch.setattr(jmod, "MAX_FRAME_BYTES", 200)
    cut = runner.execute("demo", overrides={"duration_ms": 40}, journal_path=tmp_path / "b.fjl").digest
    assert cut == plain
    reader = jmod.check(tmp_path / "b.fjl")
    assert reader.footer["digest"] == plain
    frames, at, data = 0, reader.records_start, (tmp_path / "b.fjl").read_bytes()
    while at < len(data):
        kind, length, _ = struct.unpack_from(">cQI", data, at)
        assert length <= 200 or kind == b"F"
        at += HEAD_BYTES + length
        frames += 1
    assert frames > 3


def test_a_record_larger_than_a_frame_cannot_be_recorded(monkeypatch):
    monkeypatch.setattr(jmod, "MAX_FRAME_BYTES", 8)
    with pytest.raises(jmod.JournalError, match="larger than a journal frame may be"):
        jmod._blocks(msgpack.packb([1, 2, "x" * 20]) * 2)


def test_nothing_is_allocated_for_an_array_a_block_cannot_hold(tmp_path, demo_log):
    """A checksummed block whose record claims 2^31 items: corrupt at once (msgpack's lengths are bounded
    by the block's bytes)."""
    reader = JournalReader(demo_log)
    start = reader.records_start
    reader.close()
    payload = b"\xdd" + struct.pack(">I", 1 << 31)
    bad = tmp_path / "array.fjl"
    bad.write_bytes(demo_log.read_bytes()[:start] + frame_head(b"R", payload) + payload)
    proc = capped_fedemu(["replay", str(bad)])
    assert proc.returncode == 2 and f"corrupted at byte {start + HEAD_BYTES} (record 0)" in proc.stderr, proc.stderr
    assert os.path.getsize(bad) < 1 << 20


# ---- the header's actor list and seed are data too (issue 45) ------------------------------------------

def _edited_actors(names: list, how: str) -> list:
    return {"shortened": names[:5], "emptied": [], "swapped": [names[1], names[0], *names[2:]]}[how]


@pytest.fixture(scope="module")
def default_log(tmp_path_factory):
    log = tmp_path_factory.mktemp("default") / "default.fjl"
    assert main(["run", "default", "--quiet", "--set", "jobs=5", "--journal", str(log)]) == 0
    return log


MODES = {"show": [], "verify": ["--verify"], "diagram": ["--diagram", "{t}/d.md", "--to", "0.01"],
         "trace": ["--trace", "{t}/t.json"]}


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("how", ["shortened", "emptied"])
def test_an_actor_list_cut_short_is_corruption_at_a_byte_in_every_reader(capsys, tmp_path, default_log, mode, how):
    """Finding: a shortened list crashed --diagram and --trace with an IndexError (tools/replay/drawing.py,
    tools/replay/trace_probe.py, tools/replay/trace_events.py); every reader now says where the damage is."""
    forged = tmp_path / "forged.fjl"
    names = JournalReader(default_log).header["actors"]
    _with_header(default_log, forged, actors=_edited_actors(names, how))
    code, out, err = _run(capsys, "replay", forged, *[m.format(t=tmp_path) for m in MODES[mode]])
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert re.fullmatch(rf"fedemu: error: {re.escape(str(forged))}: journal corrupted at byte \d+ \(record \d+\): "
                        rf"actor index \d+ is not in the header's list of {len(_edited_actors(names, how))} actors\n",
                        err), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["forged.fjl"]


@pytest.mark.parametrize("how", ["shortened", "emptied", "swapped"])
def test_verify_compares_the_headers_actor_names_with_the_reruns(capsys, tmp_path, default_log, how):
    """Finding: a header whose actor list was edited (its CRC recomputed) passed --verify as "identical"."""
    forged = tmp_path / "forged.fjl"
    names = JournalReader(default_log).header["actors"]
    _with_header(default_log, forged, actors=_edited_actors(names, how))
    code, out, err = _run(capsys, "replay", forged, "--verify")
    assert code != 0 and "identical" not in out
    if how == "swapped":  # the records are whole: the names alone differ
        assert code == 1 and out.startswith(f"journals diverge at record 0 (virtual time ?): the header's actors "
                                            f"differ from the re-run's: actor 0 is {names[1]!r} in the journal, "
                                            f"{names[0]!r} in the re-run\n"), out
    code, out, err = _run(capsys, "replay", default_log, "--verify")
    assert code == 0 and out.startswith("identical:")


def test_trace_refuses_a_header_whose_names_differ_from_its_rerun(capsys, tmp_path, default_log):
    forged = tmp_path / "forged.fjl"
    names = JournalReader(default_log).header["actors"]
    _with_header(default_log, forged, actors=_edited_actors(names, "swapped"))
    code, _, err = _run(capsys, "replay", forged, "--trace", tmp_path / "t.json")
    assert (code, err) == (2, f"fedemu: error: journal header's actors differ from its re-run's (actor 0 is "
                              f"{names[1]!r} in the journal, {names[0]!r} in the re-run): the header was altered\n")
    assert not (tmp_path / "t.json").exists()


@pytest.mark.parametrize("seed", [-1, -2**63, "1", 1.5])
@pytest.mark.parametrize("mode", list(MODES))
def test_a_header_seed_no_run_can_have_is_bad_input(capsys, tmp_path, default_log, mode, seed):
    """Finding: a header with seed -1 replayed as "journals diverge at record 0" (exit 1); like --seed -1, it
    is bad input, one line and exit 2, in every mode."""
    forged = tmp_path / "forged.fjl"
    _with_header(default_log, forged, seed=seed)
    code, out, err = _run(capsys, "replay", forged, *[m.format(t=tmp_path) for m in MODES[mode]])
    assert (code, out) == (2, "")
    assert err == f"fedemu: error: {forged}: journal header's seed {seed!r} is not a seed a run can have (a whole " \
        "number from 0 to 2^64-1)\n"
