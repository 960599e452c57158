"""Chrome trace-event files of journals (``fedemu replay LOG --trace FILE.json``): every event has the
fields its phase needs, flows pair up and bind to slices, the delivered messages of the window are all
there (or 1 in k of them, as the file says), service slices are the services the fabric ran (checked
against a run that records them at the source), and the same journal gives the same bytes."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict

import pytest

from fedemu.fabric import service
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.journal import DELIVER, DROP, SEND, TIMER_FIRE, JournalReader
from fedemu.scenarios import fault_plan
from fedemu.tools.run import runner
from fedemu.tools.replay import trace_events, trace_probe
from fedemu.tools.cli import main

from test_diagram import PLAN, SMALL

PHASES = {"X", "i", "s", "f", "b", "e", "C", "M"}


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trace")
    (folder / "plan.toml").write_text(PLAN)
    path = folder / "messages.log"
    # a short RTO: a retransmission then hands a server what waited behind it at once (its queue shows)
    runner.execute("default", seed=1, overrides={**SMALL, "rto_ms": 20.0}, journal_path=path,
                   faults=fault_plan.load(folder / "plan.toml"))
    return path


@pytest.fixture(scope="module")
def trace(journal, tmp_path_factory):
    out = tmp_path_factory.mktemp("t") / "run.json"
    said = trace_events.write(journal, out)
    return json.loads(out.read_text()), said, out


def check_fields(event: dict) -> None:
    """The trace-event format's fields, by phase (the Trace Event Format document)."""
    ph = event["ph"]
    assert ph in PHASES, event
    assert isinstance(event["name"], str) and event["name"], event
    assert isinstance(event["pid"], int), event
    if ph == "M":
        assert event["name"] in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")
        assert isinstance(event["args"], dict)
        return
    assert isinstance(event["ts"], int) and event["ts"] >= 0, event
    assert isinstance(event.get("cat", ""), str)
    if ph in ("X", "s", "f") or (ph == "i" and event["s"] == "t"):
        assert isinstance(event["tid"], int), event
    if ph == "X":
        assert isinstance(event["dur"], int) and event["dur"] >= 0, event
    if ph == "i":
        assert event["s"] in ("g", "p", "t"), event
    if ph in ("s", "f", "b", "e"):
        assert isinstance(event["id"], int), event
    if ph == "f":
        assert event["bp"] == "e", event
    if ph == "C":
        assert event["args"] and all(isinstance(v, (int, float)) for v in event["args"].values()), event


def test_every_event_has_the_fields_of_its_phase(trace):
    data, _, _ = trace
    assert data["displayTimeUnit"] == "ms" and isinstance(data["otherData"], dict)
    for event in data["traceEvents"]:
        check_fields(event)
    phases = Counter(e["ph"] for e in data["traceEvents"])
    assert {"X", "s", "f", "i", "b", "e", "C", "M"} <= set(phases)


def test_flows_pair_up_and_bind_to_a_slice_at_their_ends(trace):
    events = trace[0]["traceEvents"]
    starts, ends = defaultdict(list), defaultdict(list)
    slices = {(e["pid"], e["tid"], e["ts"]) for e in events if e["ph"] == "X"}
    for e in events:
        if e["ph"] == "s":
            starts[e["id"]].append(e)
        elif e["ph"] == "f":
            ends[e["id"]].append(e)
    assert starts and set(starts) == set(ends)
    for fid, (start,) in starts.items():
        for end in ends[fid]:
            assert (end["name"], end["cat"]) == (start["name"], start["cat"]) and end["ts"] >= start["ts"]
            assert (end["pid"], end["tid"], end["ts"]) in slices
        assert (start["pid"], start["tid"], start["ts"]) in slices
    # nothing is duplicated on a connection: one start, one end
    assert set(Counter(len(v) for v in ends.values())) == {1}


def _delivered(journal):
    reader = JournalReader(journal)
    kinds, out = {}, Counter()
    for _, _, rec in reader.records():
        if rec[0] == SEND:
            kinds[(rec[2], rec[3])] = rec[6]
        elif rec[0] == DELIVER:
            out[kinds[(rec[2], rec[3])]] += 1
    return out


def test_every_delivered_message_is_a_flow_and_every_drop_an_instant(trace, journal):
    events = trace[0]["traceEvents"]
    assert Counter(e["name"] for e in events if e["ph"] == "f") == _delivered(journal)
    reader = JournalReader(journal)
    drops = sum(1 for _, _, rec in reader.records() if rec[0] == DROP and rec[5] != "stale-timer")
    assert sum(1 for e in events if e["ph"] == "i" and e["cat"] == "drop") == drops
    fires = sum(1 for _, _, rec in JournalReader(journal).records() if rec[0] == TIMER_FIRE)
    assert sum(1 for e in events if e["ph"] == "X" and e["cat"] == "timer") == fires


def test_service_slices_are_the_services_the_fabric_ran(journal, trace, monkeypatch):
    """Ground truth from the source: a run whose ``service.drain`` notes each entry it hands to a handler."""
    truth = []
    real = service.drain

    def drain(fabric, actor):
        queue = list(actor._backlog)
        hook = fabric.on_served

        def noting(a, arrived, start, end):
            if end >= 0:
                entry = queue.pop(0)
                truth.append((a.name, start, end - start, entry[6]._fedemu_tag))
            return hook(a, arrived, start, end) if hook is not None else None

        fabric.on_served = noting
        try:
            return real(fabric, actor)
        finally:
            fabric.on_served = hook

    monkeypatch.setattr(service, "drain", drain)
    reader = JournalReader(journal)
    header = reader.header
    runner.execute(header["scenario"], seed=header["seed"], overrides=header["params"],
                   faults=runner.recorded_faults(header))
    events = trace[0]["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    drawn = [(names[(e["pid"], e["tid"])], e["ts"], e["dur"], e["name"].removeprefix("timer "))
             for e in events if e["ph"] == "X" and e["cat"] in ("handle", "timer") and "waited_us" in e["args"]]
    assert len(truth) > 500 and sorted(drawn) == sorted(truth)


def _counters(data) -> set:
    return {(e["name"], k) for e in data["traceEvents"] if e["ph"] == "C" for k in e["args"]}


def test_counters_include_the_components_queues_and_statistics(trace):
    counters = _counters(trace[0])
    assert {("gm-0 service", "busy_percent"), ("lm-0 service", "busy_percent"), ("gm-0 service", "queue")} <= counters
    assert ("network", "in_flight") in counters and ("network", "actors_down") in counters
    assert {("gm-0", "queued"), ("lm-1", "free_units"), ("w-3", "running"), ("w-3", "free[0]")} <= counters
    assert not any(name == "gm-0" and key == "gm" for name, key in counters)  # constant: left out


def test_a_role_of_many_actors_is_summed(journal, tmp_path, monkeypatch):
    monkeypatch.setattr(trace_probe, "PER_ACTOR", 4)
    out = tmp_path / "t.json"
    trace_events.write(journal, out)
    counters = _counters(json.loads(out.read_text()))
    assert {("worker", "idle"), ("worker", "running"), ("worker", "free[0]")} <= counters  # "up": constant here
    assert not any(name.startswith("w-") for name, _ in counters) and ("gm-0", "queued") in counters


def test_faults_are_instants_and_windows(trace):
    events = trace[0]["traceEvents"]
    instants = [e["name"] for e in events if e["ph"] == "i" and e["cat"] == "fault"]
    assert "FAULT crash lm-0" in instants and "FAULT partition {gm-0} | {lm-1}" in instants
    begins = {(e["name"], e["id"]): e["ts"] for e in events if e["ph"] == "b"}
    ends = {(e["name"], e["id"]): e["ts"] for e in events if e["ph"] == "e"}
    assert set(begins) == set(ends) and all(begins[k] <= ends[k] for k in begins)
    windows = {k[0]: (begins[k], ends[k]) for k in begins}
    assert windows["lm-0 down"] == (500_000, 800_000)
    assert windows["partition {gm-0} | {lm-1}"] == (1_000_000, 1_500_000)
    assert windows["loss 0.5 on gm-1<->lm-0"] == (300_000, 2_000_000)  # ended by the loss on every link at 2 s


def test_a_large_window_keeps_one_in_k_and_says_so(journal, tmp_path, monkeypatch):
    monkeypatch.setattr(trace_events, "MAX_ITEMS", 500)
    out = tmp_path / "t.json"
    trace_events.write(journal, out, rerun=lambda header, probe: (_ for _ in ()).throw(ConfigError("no")))
    data = json.loads(out.read_text())
    reader = JournalReader(journal)
    items = sum(1 for _, _, rec in reader.records()
                if rec[0] in (DELIVER, TIMER_FIRE) or (rec[0] == DROP and rec[5] != "stale-timer"))
    k = math.ceil(items / 500)
    kept = data["otherData"]["messages_and_timer_fires"]
    assert kept == f"1 in {k} of the {items:,} (every {k}th)"
    drawn = sum(1 for e in data["traceEvents"] if e["ph"] == "f" or (e["ph"] == "X" and e["cat"] == "timer")
                or (e["ph"] == "i" and e["cat"] == "drop"))
    assert drawn == math.ceil(items / k) <= 500
    assert "cannot be re-run" in data["otherData"]["service_times"]


def test_the_same_journal_gives_the_same_bytes(journal, trace, tmp_path):
    again = tmp_path / "again.json"
    trace_events.write(journal, again)
    assert again.read_bytes() == trace[2].read_bytes()


def test_the_command_writes_a_trace_and_a_diagram(journal, tmp_path, capsys):
    code = main(["replay", str(journal), "--trace", str(tmp_path / "t.json"), "--diagram", str(tmp_path / "d.md"),
                 "--from", "1", "--to", "1.1"])
    said = capsys.readouterr().out
    assert code == 0 and "diagram: " in said and "trace: " in said
    data = json.loads((tmp_path / "t.json").read_text())
    assert data["otherData"]["window_s"] == [1.0, 1.1]
    assert all(e["ts"] >= 1_000_000 for e in data["traceEvents"] if e["ph"] == "f")


@pytest.mark.parametrize("argv, message", [
    (["--trace", "t.txt"], "a trace is a .json file"),
    (["--trace", "t.json", "--verify"], "--trace writes a file, --verify does something else"),
    (["--job", "3"], "--job filters a diagram or a trace"),
])
def test_bad_trace_options_are_one_line(journal, tmp_path, capsys, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    code = main(["replay", str(journal), *argv])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err


def test_a_recording_stopped_early_gets_a_trace_without_a_re_run(tmp_path):
    class Stop:
        every = 1
        partial = None

        def __call__(self, fabric, run):
            if fabric.now >= 500_000 and self.partial is None:
                self.partial = {"by": "test"}
                fabric.stop()

    runner.execute("default", seed=3, overrides=SMALL, journal_path=tmp_path / "part.log", progress=Stop())

    def rerun(header, probe):
        raise AssertionError("a partial recording is not re-run")

    said = trace_events.write(tmp_path / "part.log", tmp_path / "t.json", rerun=rerun)
    data = json.loads((tmp_path / "t.json").read_text())
    assert "the recording stopped early" in said and data["otherData"]["ended"].startswith("stopped early")
    assert any(e["ph"] == "f" for e in data["traceEvents"])


def test_connection_breaks_are_global_instants(trace, journal):
    """Breaks of one time and cause are one instant per shared end: each names its actors, each break is in one."""
    from test_diagram import raw_breaks

    instants = [e for e in trace[0]["traceEvents"] if e["ph"] == "i" and "BROKEN" in e["name"]]
    expected = raw_breaks(journal, 0, 10**12)
    assert expected and {(e["ts"], e["args"]["cause"]) for e in instants} == {(b[2], b[3]) for b in expected}
    for a, b, at, cause in expected:
        assert any(e["ts"] == at and e["args"]["cause"] == cause and
                   (f"{a} -> {b} " in e["name"] or (f" {a} and " in e["name"] or f" {b} and " in e["name"]))
                   for e in instants), (a, b, at)
