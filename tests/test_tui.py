"""The live view: panels rendered from fixed statistics, the layout at every terminal size, the hook
driven by scripted keys (same digest as without it), and end-to-end runs in a real terminal (tmux)."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from fedemu.actors.common.worker import WorkerStatistics
from fedemu.actors.megha.global_manager import GlobalManagerStatistics
from fedemu.actors.megha.local_manager import LocalManagerStatistics
from fedemu.actors.pigeon.distributor import DistributorStatistics
from fedemu.actors.pigeon.master import MasterStatistics
from fedemu.actors.sparrow.node import SparrowNodeStatistics
from fedemu.actors.sparrow.scheduler import SparrowSchedulerStatistics
from fedemu.fabric.kernel import FabricStatistics
from fedemu.tools.run import runner
from fedemu.tools.live import tui
from fedemu.tools.live import tui_panels as panels
from fedemu.tools.live.tui_panels import Snapshot

ROOT = Path(__file__).resolve().parent.parent


def make(cls, **given_fields):
    """A statistics object with the given fields and zero (or an empty tuple) for the rest, so a field
    added to the class later does not break these tests."""
    values = {}
    for f in attrs.fields(cls):
        if f.name in given_fields:
            values[f.name] = given_fields[f.name]
        else:
            values[f.name] = () if f.type in (tuple, "tuple") else {} if f.type in (dict, "dict") else 0
    return cls(**values)


def fabric_stats(now_us=0, events=0, sent=0, actors=0, alive=0):
    return make(FabricStatistics, now_us=now_us, events=events, sent=sent, actors=actors, alive=alive,
                sent_by_kind={}, drops_by_cause={})


def render(renderable, width=120, height=None) -> str:
    console = Console(record=True, width=width, height=height, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def snapshot(stats, now_us=1_000_000, prev=None, **kw) -> Snapshot:
    names = tuple(s.name if s is not None else f"w-{i}" for i, s in enumerate(stats))
    workers = tuple(i for i, s in enumerate(stats) if s is None or hasattr(s, "running"))
    return Snapshot(now_us, 1.0, fabric_stats(now_us, 100, 80, len(stats), sum(s is not None for s in stats)),
                    names, tuple(stats), workers=workers, **kw)


def row(text: str, name: str) -> list[str]:
    """The cells of the table row that starts with ``name``."""
    for line in text.splitlines():
        cells = line.strip("│ ").split()
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name!r} in:\n{text}")


# ---- panels from fixed statistics ------------------------------------------------------------
def megha_stats(failures=(1, 4), repartitions=(0, 3)):
    gms = [make(GlobalManagerStatistics, name=f"gm-{g}", gm=g, queued=7 + g, inflight=2 * g, launches=100 + g,
                external=5, failures=failures[g], view_age_us=(1_500, 40_000 * g)) for g in range(2)]
    parts = ((0, 10, 20), (1, 0, 20))
    lms = [tui.Augmented(make(LocalManagerStatistics, name=f"lm-{l}", lm=l, free_units=10 + 5 * l,
                              invalid_internal=2, invalid_external=l, repartitions=repartitions[l]),
                         {"total_units": 40, "partitions": parts, "inflight": 0}) for l in range(2)]
    workers = [make(WorkerStatistics, name="w-0", free=(0,), running=1),
               make(WorkerStatistics, name="w-1", free=(1,), running=0), None]
    return [*gms, *lms, *workers]


def test_megha_panel_shows_queues_deltas_capacity_and_partitions():
    before = snapshot(megha_stats(failures=(1, 1), repartitions=(0, 1)), now_us=500_000)
    snap = snapshot(megha_stats(), prev=before)
    text = render(panels.topology(snap, before))
    assert row(text, "gm-0")[1:3] == ["7", "0"]  # queued, in flight
    assert row(text, "gm-1")[1:4] == ["8", "2", "3"]  # failures grew 1 -> 4 since the last sample
    assert row(text, "gm-0")[-2:] == ["1.5", "ms"] and row(text, "gm-1")[-2:] == ["40.0", "ms"]  # the stalest view
    assert row(text, "gm-0")[3] == "0"
    lm0, lm1 = row(text, "lm-0"), row(text, "lm-1")
    assert lm0[1:4] == ["10/40", "2", "0"] and lm1[1:4] == ["15/40", "3", "3"]
    # two partitions each: half used (shade 2 of 4) and full; lm-1 lent capacity since the last sample
    assert lm0[4:] == ["▒▒", "██"] and lm1[4:] == ["▒▒", "██", "<>"]


def test_megha_partition_grid_colours_cells_by_home_gm():
    grid = panels.partition_grid(((0, 5, 5), (1, 0, 5), (2, 5, 10)), lent=False)
    assert grid.plain == "·· ██ ▒▒ "
    assert [span.style for span in grid.spans] == [panels.GM_COLOURS[g] for g in range(3)]


def test_pigeon_panel_shows_each_masters_queues_and_idle_workers():
    masters = [make(MasterStatistics, name=f"master-{i}", group=i, queued_high=3 * i, queued_low=i, served_high=10,
                    served_low=2, idle_workers=5 - i, reserved=2) for i in range(3)]
    dists = [make(DistributorStatistics, name="dist-0", open_jobs=4), make(DistributorStatistics, name="dist-1",
                                                                             open_jobs=1)]
    text = render(panels.topology(snapshot([*dists, *masters]), None))
    assert row(text, "master-2")[1:] == ["6", "2", "10/2", "3", "2"]
    assert "idle reserved" not in text  # not in these statistics: no column, no error
    assert "2 distributors, 5 open jobs" in text


def test_pigeon_panel_shows_optional_idle_split_when_a_plugin_reports_it():
    m = tui.Augmented(make(MasterStatistics, name="master-0", idle_workers=4, reserved=2),
                      {"idle_reserved": 1, "idle_general": 3})
    text = render(panels.topology(snapshot([m]), None))
    assert "idle reserved" in text and row(text, "master-0")[5:7] == ["1", "3"]


def test_sparrow_panel_buckets_probe_queue_lengths_over_nodes():
    queues = [0, 0, 1, 3, 4, 9, 40]
    nodes = [make(SparrowNodeStatistics, name=f"w-{i}", free=(1,), queued_probes=q) for i, q in enumerate(queues)]
    sched = make(SparrowSchedulerStatistics, name="sparrow-0", open_jobs=2, probes=30)
    text = render(panels.topology(snapshot([sched, *nodes]), None))
    counts = {label: int(row(text, label)[1]) for label in ("0", "1", "2", "3-4", "5-8", "9-16", "17+")}
    assert counts == {"0": 2, "1": 1, "2": 0, "3-4": 2, "5-8": 0, "9-16": 1, "17+": 1}
    assert "1 schedulers, 2 open jobs, 30 probes sent" in text


def test_clock_panel_rates_jobs_and_delays():
    prev = Snapshot(0, 1.0, fabric_stats(0, 0, 0, 5, 5))
    snap = Snapshot(2_000_000, 2.0, fabric_stats(2_000_000, 500, 300, 5, 4), jobs=(12, 7, 1, 30),
                    delays=(0.5, 1.25, 3.0))
    text = render(panels.clock(snap, prev, "t"))
    assert "2.000000 s" in text and "500" in text and "300" in text and "2.00x real time" in text
    assert "submitted 12 of 30  done 7  rejected 1" in text and "4 up of 5" in text
    assert "p50 0.5 s  p90 1.25 s  p99 3 s" in text


def test_faults_panel_lists_crashed_actors_network_faults_and_the_log():
    snap = snapshot([make(WorkerStatistics, name="w-0"), None], network=("partition: {gm-0} | {lm-1}",))
    log = [(1_500_000, "fault crash w-1", "red"), (2_000_000, "lm-0: 2 invalid internal", "yellow")]
    text = render(panels.faults(snap, log, height=10))
    assert "crashed: w-1" in text and "partition: {gm-0} | {lm-1}" in text
    assert "1.500000 fault crash w-1" in text and "2.000000 lm-0: 2 invalid internal" in text
    quiet = render(panels.faults(snapshot([make(WorkerStatistics, name="w-0")]), [], height=10))
    assert "no active faults" in quiet


def test_fairness_panel_only_when_the_run_has_users():
    assert panels.fairness(snapshot([])) is None
    text = render(panels.fairness(snapshot([], shares=(("alice", 0.6, 0.5), ("bob", 0.4, 0.5)))))
    assert row(text, "alice")[1:3] == ["60.0%", "50.0%"]


@given(st.lists(st.integers(0, 3), min_size=1, max_size=3000), st.integers(1, 500))
def test_worker_cells_fold_into_the_room_keeping_the_busiest(levels, cells):
    """At most ``cells`` cells; no folding when the workers fit; folding keeps the busiest level (a
    busy worker is never hidden by idle neighbours) and invents none."""
    out = panels.worker_cells(levels, cells)
    assert 1 <= len(out) <= cells
    if len(levels) <= cells:
        assert out == levels
        return
    assert max(out) == max(levels) and set(out) <= set(levels)


def test_worker_map_stays_readable_at_ten_thousand_workers():
    stats = [make(WorkerStatistics, name=f"w-{i}", free=(0 if i % 3 == 0 else 1,), running=int(i % 3 != 1))
             for i in range(10_000)]
    stats[17] = None
    text = render(panels.workers(snapshot(stats), 60, 20), width=60)
    lines = text.splitlines()
    assert len(lines) <= 20 and all(len(line) <= 60 for line in lines)
    assert "workers (10,000, " in lines[0] and "per cell)" in lines[0]
    # counts are of workers, not cells: i % 3 == 0 full, 1 idle, 2 busy (w-17 of those is down)
    assert "idle 3,333" in text and "busy 3,332" in text and "full 3,334" in text and "down 1" in text


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 220), st.integers(1, 70))
def test_the_layout_fits_any_terminal_and_never_fails(width, height):
    stats = megha_stats() + [make(MasterStatistics, name="master-0")] + [
        make(SparrowNodeStatistics, name="w-9", free=(1,), queued_probes=2)]
    snap = snapshot(stats, network=("slow: gm-0 <-> lm-0 4x latency",))
    status = panels.status_line("PAUSED", "10x")
    console = Console(record=True, width=width, height=height, file=io.StringIO(), color_system=None)
    console.print(tui.frame(snap, None, [(0, "x", "red")], (width, height), status, "t"))
    lines = console.export_text().splitlines()
    assert all(len(line) <= width for line in lines)
    if width >= 60 and height >= 20:
        assert len(lines) <= height
        assert "clock" in lines[0]


def test_at_100_by_30_every_manager_has_its_one_line_row():
    """Finding 12: at 100x30 the live view wrapped the GM "view age" column over three lines and dropped the
    LM rows. A row is one line (a cell too wide is cut short with an ellipsis), a name is never cut."""
    stats = megha_stats()
    stats[2] = tui.Augmented(make(LocalManagerStatistics, name="lm-0-standby", lm=0, free_units=10),
                             {"total_units": 40, "partitions": ((0, 10, 20),), "inflight": 0})
    console = Console(record=True, width=100, height=30, file=io.StringIO(), color_system=None)
    console.print(tui.frame(snapshot(stats), None, [(0, "x", "red")], (100, 30), panels.status_line("PAUSED", "1x")))
    lines = console.export_text().splitlines()
    for name in ("gm-0", "gm-1", "lm-0-standby", "lm-1"):
        mine = [line for line in lines if f" {name} " in line]
        assert len(mine) == 1, (name, lines)
    gm = next(line for line in lines if " gm-1 " in line)
    assert "40.0 ms" in gm
    under = lines[lines.index(gm) + 1]
    assert under.split("│")[1].strip() in ("", "local managers"), under


def test_a_frame_leaves_no_reference_cycles():
    """The fabric runs with the garbage collector off: a frame must be freed by reference counting."""
    import gc

    snap = snapshot(megha_stats(), shares=(("alice", 0.5, 0.5),))
    console = Console(file=io.StringIO(), width=140, height=45, force_terminal=True)
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            console.print(tui.frame(snap, None, [(0, "x", "red")], (140, 45), panels.status_line("RUNNING", "max")))
        assert gc.collect() == 0
    finally:
        gc.enable()


FAULTY = """
from fedemu.scenarios.federation import PARAMS as _BASE
from fedemu.scenarios.federation import build as _build

PARAMS = dict(_BASE)


def build(fabric, params):
    run = _build(fabric, params)
    fabric.add_faults([(1_000_000, "crash", "gm-1"), (1_000_000, "partition", (("gm-2",), ("lm-3", "lm-0"))),
                       (1_000_000, "slow", ("gm-0", "lm-1"), 4.0), (1_000_000, "loss", ("gm-0", "lm-2"), 0.25),
                       (1_000_000, "loss", ("gm-1", "lm-3"), 0.5)])
    return run
"""


def test_faults_of_a_real_run_show_in_the_panels(tmp_path):
    """A crashed GM is a 'down' row and listed as crashed; the network's faults and the fault log show."""
    scenario = tmp_path / "faulty.py"
    scenario.write_text(FAULTY)

    class Stop:
        every = 1
        partial = None

        def __init__(self):
            self.sampler = None

        def __call__(self, fabric, run):
            self.sampler = self.sampler or tui.Sampler(fabric)
            self.sampler.sample(run)
            if fabric.now >= 1_500_000 and self.partial is None:
                self.partial = {"by": "test"}
                fabric.stop()

    hook = Stop()
    result = runner.execute(str(scenario), overrides=PARAMS, progress=hook)
    assert result.summary["partial"] == {"by": "test", "jobs_asked": 30}
    snap = hook.sampler.last
    assert set(snap.network) == {"partition: {gm-2} | {lm-0, lm-3}", "slow: gm-0 <-> lm-1 4x latency",
                                 "loss: gm-0 <-> lm-2 0.25 loss", "loss: gm-1 <-> lm-3 0.5 loss"}
    logged = [text for t, text, _ in hook.sampler.log if t == 1_000_000]
    assert logged[:4] == ["fault crash gm-1", "fault partition {gm-2} | {lm-3, lm-0}", "fault slow gm-0 lm-1 4",
                          "fault loss gm-0 lm-2 0.25"]
    topology = render(panels.topology(snap, hook.sampler.prev))
    cells = [line.strip("│ ").split() for line in topology.splitlines()]
    names = [c[0] for c in cells if c and c[0].startswith("gm-")]
    assert names == ["gm-0", "gm-1", "gm-2"] and row(topology, "gm-1")[1:] == ["down"]
    assert "crashed: gm-1" in render(panels.faults(snap, hook.sampler.log, 12))


# ---- the hook, driven by scripted keys --------------------------------------------------------
class ScriptedKeys:
    """Keys typed at given hook calls: ``script`` maps the n-th read to what is typed then."""

    def __init__(self, script: dict[int, str]) -> None:
        self.script = dict(script)
        self.reads = 0
        self.fd = None

    def read(self, timeout: float = 0.0) -> str:
        self.reads += 1
        return self.script.pop(self.reads, "")


def scripted_view(script, **kw) -> tui.LiveView:
    console = Console(file=io.StringIO(), width=120, height=40, force_terminal=True)
    view = tui.LiveView(console, ScriptedKeys(script), **kw)
    return view


PARAMS = {"jobs": 30}


@pytest.fixture(scope="module")
def plain():
    return runner.execute("default", overrides=PARAMS)


def test_pause_steps_and_pace_changes_leave_the_digest_unchanged(plain, monkeypatch):
    monkeypatch.setattr(tui, "FRAME_S", 0.0)  # no waiting between frames or while paused

    class Recording(tui.LiveView):
        def __call__(self, fabric, run):
            calls.append((fabric.windows, self.paused))
            super().__call__(fabric, run)

    calls = []
    console = Console(file=io.StringIO(), width=120, height=40, force_terminal=True)
    view = Recording(console, ScriptedKeys({3: "nnn", 6: "+-+", 9: " ", 12: "n", 14: " "}), paused=True)
    with view:
        result = runner.execute("default", overrides=PARAMS, progress=view)
    assert result.digest == plain.digest and view.partial is None
    assert result.summary.get("partial") is None
    paused_windows = [w for w, paused in calls if paused]
    assert paused_windows[:4] == [1, 2, 3, 4]  # paused, each n lets exactly one window through
    assert view.pace is None or view.pace in tui.PACES


def test_every_window_sampled_changes_nothing(plain):
    class Sampling:
        every = 1

        def __init__(self):
            self.sampler = None

        def __call__(self, fabric, run):
            self.sampler, self.run = self.sampler or tui.Sampler(fabric), run
            self.sampler.sample(run)

    hook = Sampling()
    result = runner.execute("default", overrides=PARAMS, progress=hook)
    assert result.digest == plain.digest
    last = hook.sampler.sample(hook.run)  # after the last window's handlers ran
    assert last.jobs == (plain.summary["jobs"], plain.summary["jobs_completed"], plain.summary["unschedulable"],
                         plain.summary["jobs"])
    delays = plain.summary["delay_s"]
    assert last.delays == pytest.approx((delays["p50"], delays["p90"], delays["p99"]))


def test_quit_stops_early_and_marks_the_results_partial(tmp_path, plain):
    view = scripted_view({2: "n", 4: "q"}, paused=True)
    out = tmp_path / "out"
    journal = tmp_path / "run.fjl"
    with view:
        result = runner.execute("default", overrides=PARAMS, progress=view, out_dir=out, journal_path=journal)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"]["by"] == "q in the live view"
    assert summary["partial"]["stopped_at_s"] == result.summary["virtual_end_s"]
    assert summary["virtual_end_s"] < plain.summary["virtual_end_s"]
    assert summary["jobs_completed"] < plain.summary["jobs_completed"]
    from fedemu.fabric.journal import check

    assert "partial" in check(journal).footer["ended"]


def test_a_seek_forward_pauses_at_the_requested_time(plain):
    view = scripted_view({}, seek_us=2_000_000)
    seen = []
    original = view.draw

    def draw(final=None):
        original(final)
        if view.paused and not seen:
            seen.append(view.sampler.last.now_us)
            view.keys.script[view.keys.reads + 1] = " "  # resume once the seek has landed
    view.draw = draw
    with view:
        result = runner.execute("default", overrides=PARAMS, progress=view)
    assert seen and 2_000_000 <= seen[0] < 2_100_000
    assert result.digest == plain.digest


def test_pace_words():
    assert tui.parse_pace("max") is None and tui.parse_pace("10x") == 10.0 and tui.parse_pace("0.5") == 0.5
    for bad in ("0", "-1", "nan", "inf", "fast"):
        with pytest.raises(ValueError):
            tui.parse_pace(bad)


def test_without_a_terminal_tui_falls_back_to_the_progress_bar_with_a_note(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fedemu", "run", "default", "--set", "jobs=5", "--tui"],
                          cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0
    assert "fedemu: note: --tui needs a terminal on stdin and stdout; showing the progress bar instead" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "fedemu", "run", "default", "--pace", "10"], cwd=tmp_path,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and proc.stderr.strip() == "fedemu: error: --paused and --pace control the live " \
        "view: add --tui"


def test_replay_live_view_options_are_checked(tmp_path):
    log = tmp_path / "run.fjl"
    runner.execute("default", overrides={"jobs": 5}, journal_path=log)
    for args, message in (
        (["--tui", "--actor", "gm-0"], "--actor filter the records shown; --tui shows the whole run"),
        (["--seek", "3"], "--seek, --paused and --pace control the live view: add --tui"),
        (["--tui", "--pace", "fast"], "--pace 'fast': expected max or a virtual/wall ratio such as 1, 10 or 100"),
        (["--tui"], "--tui needs a terminal on stdin and stdout; `fedemu replay LOG --verify` checks a journal "
                    "without one"),
    ):
        proc = subprocess.run([sys.executable, "-m", "fedemu", "replay", str(log), *args], capture_output=True,
                              text=True, stdin=subprocess.DEVNULL)
        assert (proc.returncode, proc.stderr) == (2, f"fedemu: error: {message}\n"), args


# ---- end to end, in a real terminal -----------------------------------------------------------
TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed (Debian package tmux): the "
                                "end-to-end live-view tests drive a real terminal through it")


class Terminal:
    """A private tmux server running one command in a 120x40 window (COLUMNS and LINES, which pytest
    sets, are dropped so the program sees the window's size)."""

    def __init__(self, command: str, cwd, **env_vars) -> None:
        self.socket = f"fedemu-test-{uuid.uuid4().hex[:8]}"
        env = " ".join(f"{k}={v}" for k, v in {"PYTHONHASHSEED": "0", "TERM": "xterm-256color", **env_vars}.items())
        self.tmux("new-session", "-d", "-x", "120", "-y", "40", f"cd {cwd} && env -u COLUMNS -u LINES {env} {command}; "
                  "echo EXIT=$?; sleep 60")

    def tmux(self, *args) -> str:
        return subprocess.run([TMUX, "-L", self.socket, *args], capture_output=True, text=True, check=True).stdout

    def screen(self, escapes: bool = False) -> str:
        return self.tmux("capture-pane", "-p", *(["-e"] if escapes else []))

    def keys(self, *keys) -> None:
        self.tmux("send-keys", *keys)

    def wait(self, predicate, timeout=30.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; the screen:\n{text}")
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run([TMUX, "-L", self.socket, "kill-server"], capture_output=True)


def virtual(text: str) -> float | None:
    found = re.search(r"virtual\s+([\d,]+\.\d+) s", text)
    return None if found is None else float(found.group(1).replace(",", ""))


FEDEMU = f"{sys.executable} -m fedemu"


@needs_tmux
def test_live_run_in_a_terminal_pauses_steps_and_quits_with_partial_results(tmp_path):
    term = Terminal(f"{FEDEMU} run default --set jobs=30 --tui --paused --pace 1 --out {tmp_path}/out", tmp_path)
    try:
        text = term.wait(lambda s: "PAUSED" in s and virtual(s) is not None)
        for title in ("clock", "topology", "workers", "faults and events", "global managers", "local managers"):
            assert title in text
        start = virtual(text)
        for _ in range(20):  # n advances one window at a time (some windows share a time)
            term.keys("n")
            text = term.wait(lambda s: "PAUSED" in s)
            if virtual(text) > start:
                break
        stepped = virtual(term.screen())
        assert stepped > start
        term.keys("Space")
        term.wait(lambda s: "RUNNING" in s and virtual(s) > stepped)
        term.keys("Space")
        paused = term.wait(lambda s: "PAUSED" in s)
        time.sleep(0.3)  # the last frame of the pause is drawn
        held = virtual(term.screen())
        time.sleep(0.6)  # paused: virtual time must stand still (no speed is measured)
        assert virtual(term.screen()) == held >= virtual(paused)
        term.keys("q")
        text = term.wait(lambda s: "EXIT=" in s)
    finally:
        term.close()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    # issue 45: q exited 0, and the printout did not say the run stopped early
    assert "EXIT=130" in text, text
    said = "".join(text.split())  # the line wraps at the window's width
    assert "".join((f"fedemu: stopped early by q in the live view at {summary['partial']['stopped_at_s']:,.6f} s of "
                    f"virtual time: {summary['jobs_completed']} of 30 jobs done; the results in {tmp_path}/out are "
                    "partial (summary.json says so)").split()) in said, text
    assert summary["partial"]["by"] == "q in the live view"
    assert abs(summary["partial"]["stopped_at_s"] - held) < 1e-6
    assert summary["jobs_completed"] < summary["jobs"]


@needs_tmux
def test_live_run_finishing_has_the_same_digest_as_without_and_honours_no_color(tmp_path, plain):
    term = Terminal(f"{FEDEMU} run default --set jobs=30 --tui --out {tmp_path}/out", tmp_path, NO_COLOR="1")
    try:
        term.wait(lambda s: "FINISHED" in s)
        styled = term.screen(escapes=True)
        assert "\x1b[1m" in styled  # bold is still used
        assert not re.search(r"\x1b\[(?:[0-9;]*;)?(?:3[0-7]|4[0-7]|9[0-7]|10[0-7]|38;|48;)", styled)  # no colour
        term.keys("x")
        term.wait(lambda s: "EXIT=0" in s)
    finally:
        term.close()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["digest"] == plain.digest and "partial" not in summary


@needs_tmux
def test_replay_in_a_terminal_seeks_both_ways_and_checks_the_digest(tmp_path, plain):
    log = tmp_path / "run.fjl"
    runner.execute("default", overrides=PARAMS, journal_path=log)
    term = Terminal(f"{FEDEMU} replay {log} --tui --seek 3", tmp_path)
    try:
        text = term.wait(lambda s: "PAUSED" in s and (virtual(s) or 0) >= 3.0)
        assert 3.0 <= virtual(text) < 3.1 and "replay of run.fjl" in text
        term.keys("g", "1", ".", "5", "Enter")  # back: the re-run starts again and stops at 1.5 s
        text = term.wait(lambda s: "PAUSED" in s and 1.5 <= (virtual(s) or 0) < 3.0)
        assert virtual(text) < 1.6
        term.keys("Space")
        text = term.wait(lambda s: "replayed: digest" in s)
        assert f"replayed: digest {plain.digest} matches the journal's footer" in text
        term.keys("x")
        text = term.wait(lambda s: "EXIT=0" in s)
        assert f"replayed: digest {plain.digest} matches the journal's footer" in text
    finally:
        term.close()


def test_the_event_panel_shows_the_runs_event_log_as_it_happens(plain, monkeypatch):
    """Without --log the view still gets the protocol events (an in-memory event log): each invalid
    launch and repartition appears with its own virtual time, before the run ends, in time order, and
    the digest is the run's own."""
    monkeypatch.setattr(tui, "FRAME_S", 0.0)
    view = scripted_view({}, pace=None)
    seen_during_run = []

    class Watching(tui.LiveView):
        def __call__(self, fabric, run):
            super().__call__(fabric, run)
            seen_during_run.append(sum(1 for _, text, _ in self.sampler.log if " launch_invalid " in text))

    view = Watching(view.console, ScriptedKeys({}))
    over = {**PARAMS, "load": 0.95, "launch_replies": "failures"}  # staler views: invalid launches all along
    with view:
        result = runner.execute("default", overrides=over, progress=view)
    assert result.digest == runner.execute("default", overrides=over).digest
    events = [(t, text) for t, text, _ in view.sampler.log if " launch_invalid " in text or " repartition " in text]
    counters = result.summary["counters"]
    assert len([1 for _, text in events if " launch_invalid " in text]) == \
        counters.get("invalid_internal", 0) + counters.get("invalid_external", 0) > 0
    assert [t for t, _ in events] == sorted(t for t, _ in events)
    assert max(seen_during_run) > 0  # shown while the run went on, not only at its end
