"""Space-time diagrams of journals (``fedemu replay LOG --diagram FILE``): the Mermaid text passes our own
grammar check and draws exactly the messages that arrived or were dropped in the window (read here from
the journal's raw records, not through the diagram's reader), faults are marked, a diagram too large
to read is refused in one line, SVG and HTML are well-formed, and the same journal gives the same bytes."""

from __future__ import annotations

import re
import textwrap
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedemu.fabric import messages
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.journal import DELIVER, DROP, SEND, JournalReader
from fedemu.fabric.replay import BROKEN, name_ranges
from fedemu.scenarios import fault_plan
from fedemu.tools.replay import diagram, drawing, mermaid
from fedemu.tools.run import runner
from fedemu.tools.cli import main
from fedemu.tools.replay.fault_state import FaultState
from fedemu.tools.replay.timeline import FaultEvent

from mermaid_grammar import decode, parse

PLAN = textwrap.dedent("""
    [[fault]]
    at_s = 0.05
    kind = "loss"
    link = "*"
    value = 0.3

    [[fault]]
    at_s = 0.3
    kind = "loss"
    link = ["gm-1", "lm-0"]
    value = 0.5

    [[fault]]
    at_s = 0.5
    kind = "crash"
    target = "lm-0"
    for_s = 0.3

    [[fault]]
    at_s = 1.0
    kind = "partition"
    sides = [["gm-0"], ["lm-1"]]
    for_s = 0.5

    [[fault]]
    at_s = 1.2
    kind = "slow"
    link = ["gm-0", "lm-0"]
    value = 5.0
    for_s = 0.4

    [[fault]]
    at_s = 2.0
    kind = "loss"
    link = "*"
    value = 0.0

    [[fault]]
    at_s = 2.5
    kind = "loss"
    link = ["gm-1", "lm-0"]
    value = 0.0
""")
SMALL = {"gms": 2, "lms": 2, "workers_per_partition": 2, "jobs": 60, "load": 0.9, "constraints": False,
         "task_s": 0.05}


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    """A small Megha run under every kind of fault: retransmissions, a crash and what it breaks."""
    folder = tmp_path_factory.mktemp("diagram")
    (folder / "plan.toml").write_text(PLAN)
    path = folder / "messages.log"
    runner.execute("default", seed=3, overrides=SMALL, journal_path=path,
                   faults=fault_plan.load(folder / "plan.toml"))
    return path


def raw_arrivals(path, lo=None, hi=None):
    """(src, dst, time, kind, outcome) of every arrival and drop in [lo, hi], from the raw records."""
    reader = JournalReader(path)
    names = reader.header["actors"]
    kinds, out = {}, []
    for _, _, rec in reader.records():
        if rec[0] == SEND:
            kinds[(rec[2], rec[3])] = rec[6]
        elif rec[0] in (DELIVER, DROP) and not (rec[0] == DROP and rec[5] == "stale-timer"):
            if kinds[(rec[2], rec[3])] == BROKEN:  # the fabric's notice of a break: drawn as a note
                continue
            if (lo is None or rec[1] >= lo) and (hi is None or rec[1] <= hi):
                outcome = "deliver" if rec[0] == DELIVER else rec[5]  # a delivery records its retransmissions
                name = "outside" if rec[2] < 0 else names[rec[2]]
                out.append((name, names[rec[4]], rec[1], kinds[(rec[2], rec[3])], outcome))
    reader.close()
    return out


def drawn_arrivals(text: str):
    """The same, read back from a Mermaid diagram's arrows."""
    statements = parse(text)
    names = {s[1]: decode(s[2]) for s in statements if s[0] == "participant"}
    out = []
    for s in statements:
        if s[0] != "message":
            continue
        _, src, arrow, dst, label = s
        m = re.fullmatch(r"(\d+\.\d{6}) (\S+)(.*)", decode(label))
        at, kind, rest = round(float(m.group(1)) * 1e6), m.group(2), m.group(3)
        if arrow == "-x":
            outcome = re.search(r" DROPPED \((\w[\w-]*)\)$", rest).group(1)
        else:
            outcome = "duplicate" if rest.endswith(" (duplicate copy)") else "deliver"
            assert arrow == {"deliver": "->>", "duplicate": "-->>"}[outcome]
        out.append((names[src], names[dst], at, kind, outcome))
    return out


def test_a_window_lists_exactly_its_delivered_and_dropped_messages_in_delivery_order(journal, tmp_path):
    out = tmp_path / "d.md"
    said = diagram.write(journal, out, t_from="0.3", t_to="0.55")
    expected = raw_arrivals(journal, 300_000, 550_000)
    drawn = drawn_arrivals(out.read_text())
    assert 20 < len(expected) <= drawing.MAX_ROWS and sorted(drawn) == sorted(expected)
    # same-time arrivals in the order the fabric delivered them (the journal's order), times in order
    assert drawn == sorted(expected, key=lambda a: a[2])
    assert f"{len(expected):,} messages" in said
    assert {"broken"} <= {a[4] for a in drawn}  # lost with lm-0's connections when it crashed at 0.5 s


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(lo=st.integers(0, 3_000_000), span=st.integers(0, 600_000), who=st.sampled_from([None, "gm-0", "lm", "lm-0,gm-1"]))
def test_any_window_and_actors_draw_exactly_their_messages_or_are_refused(journal, tmp_path_factory, lo, span, who):
    out = tmp_path_factory.mktemp("w") / "d.md"
    names = JournalReader(journal).header["actors"]
    chosen = None if who is None else {n for item in who.split(",")
                                       for n in ([item] if item in names else fault_plan.members(names, item))}
    expected = [a for a in raw_arrivals(journal, lo, lo + span)
                if chosen is None or a[0] in chosen or a[1] in chosen]
    t_from, t_to = f"{lo / 1e6:.6f}", f"{(lo + span) / 1e6:.6f}"
    try:
        diagram.write(journal, out, t_from=t_from, t_to=t_to, actor=who, kind="deliver,drop")
    except ConfigError as e:
        assert len(expected) > drawing.MAX_ROWS and "\n" not in str(e)
        assert f"--from {t_from} --to {t_to}" in str(e)
        return
    assert sorted(drawn_arrivals(out.read_text())) == sorted(expected)


def test_faults_are_marked_and_what_holds_at_the_start_is_said(journal, tmp_path):
    out = tmp_path / "d.md"
    diagram.write(journal, out, t_from="0.45", t_to="1.65")
    notes = [decode(s[3]) for s in parse(out.read_text()) if s[0] == "note"]
    text = "\n".join(notes)
    for line in ("FAULT crash lm-0", "FAULT restart lm-0", "FAULT partition {gm-0} | {lm-1}",
                 "FAULT heal: every partition ends", "FAULT slow x5 on gm-0<->lm-0",
                 "FAULT restore: latency back to normal on gm-0<->lm-0"):
        assert line in text, line
    held = next(n for n in notes if n.startswith("in force at 0.450000 s:"))
    assert "loss 0.3 on every link" in held and "loss 0.5 on gm-1<->lm-0" in held


def test_every_fault_kind_is_described_and_followed():
    state = FaultState()
    for at, kind, target, value in ((1, "crash", ("lm-0",), 0.0), (2, "partition", (("gm-0",), ("lm-1", "lm-2")), 0.0),
                                    (3, "loss", ("lm-0", "gm-0"), 0.5), (4, "dup", ("*",), 0.25),
                                    (5, "slow", ("gm-0", "lm-1"), 3.0)):
        state.apply(FaultEvent(at, at, kind, target, value))
    assert state.lines() == ["lm-0 down since 0.000001 s", "partition {gm-0} | {lm-1, lm-2}",
                             "dup 0.25 on every link", "loss 0.5 on gm-0<->lm-0", "slow x3 on gm-0<->lm-1"]
    assert state.lines({"lm-2"}) == ["partition {gm-0} | {lm-1, lm-2}", "dup 0.25 on every link"]
    for at, kind, target, value in ((6, "restart", ("lm-0",), 0.0), (7, "heal", (), 0.0),
                                    (8, "loss", ("gm-0", "lm-0"), 0.0), (9, "dup", ("*",), 0.0),
                                    (10, "restore", ("*",), 0.0)):
        state.apply(FaultEvent(at, at, kind, target, value))
    assert state.lines() == []


def test_a_diagram_too_large_to_read_is_refused_in_one_line_naming_the_filters(journal, tmp_path, capsys):
    code = main(["replay", str(journal), "--diagram", str(tmp_path / "d.md"), "--actor", "lm"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("fedemu: error: the diagram would draw ") and "with filters --actor lm;" in err[0]
    assert "--from/--to" in err[0] and "--job" in err[0] and "--kind" in err[0]
    assert not (tmp_path / "d.md").exists()


def test_the_tail_of_a_long_run_is_drawn_when_asked(journal, tmp_path):
    out = tmp_path / "d.md"
    said = diagram.write(journal, out, tail=True)
    everything = raw_arrivals(journal)
    drawn = drawn_arrivals(out.read_text())
    assert "earlier left out" in said
    fires = sum(1 for s in parse(out.read_text()) if s[0] == "note" and re.match(r"\d+\.\d{6} timer ", s[3]))
    assert len(drawn) + fires == drawing.MAX_ROWS
    assert drawn == sorted(everything, key=lambda a: a[2])[len(everything) - len(drawn):]


def _about(value, job: int) -> bool:
    """Whether a decoded message, or a message nested in it, has job_id ``job``."""
    if isinstance(value, tuple):
        return any(_about(v, job) for v in value)
    if not hasattr(value, "__attrs_attrs__"):
        return False
    return getattr(value, "job_id", None) == job or any(
        _about(getattr(value, a.name), job) for a in value.__attrs_attrs__)


def test_a_job_filter_keeps_exactly_the_messages_about_that_job(journal, tmp_path):
    out = tmp_path / "d.md"
    diagram.write(journal, out, job="7", kind="deliver,drop")
    reader = JournalReader(journal)
    sends, expected = {}, 0
    for _, _, rec in reader.records():
        if rec[0] == SEND:
            sends[(rec[2], rec[3])] = messages.decode(rec[6], rec[7])
        elif rec[0] in (DELIVER, DROP) and (rec[2], rec[3]) in sends:
            expected += _about(sends[(rec[2], rec[3])], 7)
    labels = [decode(s[4]) for s in parse(out.read_text()) if s[0] == "message"]
    assert expected > 5 and len(labels) == expected
    assert all("job_id=7 " in label for label in labels)


@pytest.mark.parametrize("argv, message", [
    (["--actor", "nobody"], "'nobody' is neither an actor nor a role of this run; roles: worker, gm, lm, manager"),
    (["--kind", "megha.nothing"], "--kind 'megha.nothing' matches no message or timer kind of this run"),
    (["--job", "x"], "--job 'x': expected a job number"),
    (["--from", "2", "--to", "1"], "--to 1 is before --from 2"),
])
def test_bad_filters_are_one_line(journal, tmp_path, capsys, argv, message):
    code = main(["replay", str(journal), "--diagram", str(tmp_path / "d.md"), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_the_extension_picks_the_form(journal, tmp_path, capsys):
    code = main(["replay", str(journal), "--diagram", str(tmp_path / "d.png"), "--to", "0.1"])
    err = capsys.readouterr().err
    assert code == 2 and "known: .md, .svg, .html" in err


def test_svg_and_html_are_well_formed_and_draw_every_message(journal, tmp_path):
    args = dict(t_from="0.95", t_to="1.2")
    diagram.write(journal, tmp_path / "d.svg", **args)
    diagram.write(journal, tmp_path / "d.html", **args)
    svg = ElementTree.parse(tmp_path / "d.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    arrows = [t.text for t in svg.iter(f"{ns}title") if t.text and "\nsent " in t.text]
    assert len(arrows) == len(raw_arrivals(journal, 950_000, 1_200_000))
    assert any("partition" in t.text for t in svg.iter(f"{ns}text") if t.text)
    html = (tmp_path / "d.html").read_text()
    assert html.startswith("<!DOCTYPE html>") and (tmp_path / "d.svg").read_text() in html


def test_the_same_journal_gives_the_same_bytes(journal, tmp_path):
    for ext in (".md", ".svg", ".html"):
        first, second = tmp_path / f"a{ext}", tmp_path / f"b{ext}"
        diagram.write(journal, first, t_from="0.4", t_to="1.0", actor="lm-0")
        diagram.write(journal, second, t_from="0.4", t_to="1.0", actor="lm-0")
        assert first.read_bytes() == second.read_bytes()


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_is_escaped_into_valid_mermaid(text):
    markdown = "```mermaid\nsequenceDiagram\n    participant a0 as x\n" \
               f"    a0->>a0: 1.000000 {mermaid.escape(text)}\n    Note over a0: 1.000000 {mermaid.escape(text)}\n```\n"
    statements = parse(markdown)
    shown = "".join(c if c.isprintable() else " " for c in text).replace("`", "'")
    assert decode(statements[1][4]) == f"1.000000 {shown}".strip()


@pytest.mark.parametrize("bad", [
    "    a0->>a0: one; two",  # a semicolon ends the statement
    "    a0->>a9: undeclared",
    "    Note over a0: a # b",
    "    a0=>a0: not an arrow",
    "    loop forever",  # never closed
])
def test_the_grammar_check_rejects_what_mermaid_would(bad):
    with pytest.raises(AssertionError):
        parse(f"```mermaid\nsequenceDiagram\n    participant a0 as x\n{bad}\n```\n")


def test_the_docs_hold_a_real_failover_diagram():
    """docs/diagrams.md: its diagram passes the grammar check and draws what its text explains."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "diagrams.md").read_text()
    statements = parse(text)
    lines = [decode(s[4] if s[0] == "message" else s[3]) for s in statements if s[0] in ("message", "note")]
    for want in ("FAULT crash lm-0", "FAULT restart lm-0", "CONNECTIONS BROKEN between gm-1 and lm-0..lm-3, submitter",
                 "job job_id=52", "FAULT partition", "megha.launch_failed job_id=52 index=1 attempt=181",
                 "megha.launch_ok job_id=52 index=1"):
        assert any(want in line for line in lines), want
    # the submitter acts on gm-1's crash notice: job 52 goes to a live GM, is never refused nor handed again
    assert not any(bad in line for line in lines for bad in ("DROPPED", "submit.resubmit", "submit.ping"))
    assert "fedemu replay out/failover/messages.log --diagram out/failover/job52.md --job 52 --to 3.04" in text
    svg = ElementTree.parse(Path(__file__).resolve().parent.parent / "docs" / "diagrams-failover.svg").getroot()
    assert "filters: --to 3.04 --job 52" in "".join(svg.itertext())


def test_a_journal_is_data_no_file_it_names_is_imported(tmp_path):
    """A user's scenario file named by a journal is never imported to draw it (here it would raise); a
    built-in scenario's messages get their field names."""
    scenario = tmp_path / "mine.py"
    scenario.write_text("from fedemu.scenarios.demo import PARAMS, build  # noqa: F401\n")
    runner.execute(str(scenario), seed=2, overrides={"duration_ms": 60.0}, journal_path=tmp_path / "mine.log")
    scenario.write_text("raise RuntimeError('a journal must not import me')\n")
    diagram.write(tmp_path / "mine.log", tmp_path / "mine.md", kind="demo.ping")
    labels = [decode(s[4]) for s in parse((tmp_path / "mine.md").read_text()) if s[0] == "message"]
    assert labels and all(re.fullmatch(r"\d+\.\d{6} demo\.ping n=\d+", label) for label in labels), labels[:3]
    runner.execute("demo", seed=2, overrides={"duration_ms": 60.0}, journal_path=tmp_path / "demo.log")
    diagram.write(tmp_path / "demo.log", tmp_path / "demo.md", kind="demo.ping")
    assert "demo.ping n=1" in (tmp_path / "demo.md").read_text()


def test_an_actor_named_on_its_own_has_its_lane_even_without_messages(journal, tmp_path):
    out = tmp_path / "d.md"
    diagram.write(journal, out, actor="lm-0", t_from="0.8", t_to="0.8")
    statements = parse(out.read_text())
    assert [s[2] for s in statements if s[0] == "participant"] == ["lm-0"]
    assert [decode(s[3]) for s in statements if s[0] == "note"][-1] == "0.800000 FAULT restart lm-0"


def test_the_same_bytes_in_processes_with_other_hash_seeds(journal, tmp_path):
    """No set or hash order reaches a diagram or a trace: two processes with different PYTHONHASHSEED agree."""
    import os
    import subprocess
    import sys

    script = ("import sys; from fedemu.tools.replay import diagram, trace_events\n"
              "log, out = sys.argv[1], sys.argv[2]\n"
              "for ext in ('md', 'svg'): diagram.write(log, f'{out}/d.{ext}', t_from='0.9', t_to='1.3')\n"
              "trace_events.write(log, f'{out}/t.json', t_from='0.9', t_to='1.3')\n")
    outs = []
    for seed in ("1", "2"):
        folder = tmp_path / seed
        folder.mkdir()
        subprocess.run([sys.executable, "-c", script, str(journal), str(folder)], check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed})
        outs.append([(folder / name).read_bytes() for name in ("d.md", "d.svg", "t.json")])
    assert outs[0] == outs[1]


def test_a_full_diagram_stays_within_mermaids_text_limit(journal, tmp_path, monkeypatch):
    """Mermaid refuses a diagram of more than 50,000 characters (its maxTextSize): labels are cut to fit
    MAX_CHARS (set lower here, as this run's labels are short)."""
    assert mermaid.MAX_CHARS < 50_000
    monkeypatch.setattr(mermaid, "MAX_CHARS", 15_000)
    out = tmp_path / "d.md"
    diagram.write(journal, out, tail=True)
    block = re.search(r"```mermaid\n(.*?)```", out.read_text(), re.S).group(1)
    assert len(parse(out.read_text())) > drawing.MAX_ROWS and len(block) <= 15_000
    assert any(s[0] == "message" and s[4].endswith("...") for s in parse(out.read_text()))


def raw_breaks(path, lo, hi):
    """(src, dst, at, cause) of every connection break told in [lo, hi], from the notices' raw records."""
    reader = JournalReader(path)
    names = reader.header["actors"]
    out = set()
    for _, _, rec in reader.records():
        if rec[0] == SEND and rec[2] < 0 and rec[6] == BROKEN and lo <= rec[7][2] <= hi:
            out.add((names[rec[7][0]], names[rec[7][1]], rec[7][2], rec[7][3]))
    reader.close()
    return out


def test_connection_breaks_are_marked_a_crashed_actors_together(journal, tmp_path):
    """lm-0's crash at 0.5 s breaks each of its connections both ways: one note names them all."""
    out = tmp_path / "d.md"
    diagram.write(journal, out, t_from="0.5", t_to="0.52")
    notes = [decode(s[3]) for s in parse(out.read_text()) if s[0] == "note" and "BROKEN" in s[3]]
    expected = raw_breaks(journal, 500_000, 520_000)
    assert expected and {b[3] for b in expected} == {"crash"} and all("lm-0" in b[:2] for b in expected)
    peers = sorted({b[1] if b[0] == "lm-0" else b[0] for b in expected}, key=lambda n: (n[0], int(n.split("-")[1])))
    assert notes == [f"0.500000 CONNECTIONS BROKEN between lm-0 and {name_ranges(peers)} (crash)"]
    messages = [decode(s[4]) for s in parse(out.read_text()) if s[0] == "message"]
    assert any(m.endswith("DROPPED (broken)") for m in messages) and not any(BROKEN in m for m in messages)
