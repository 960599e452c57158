"""Failed runs leave a journal that replays to the same failure; SIGTERM and Ctrl-C leave no temporary
file; a closed pipe ends `fedemu replay` quietly."""

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fedemu.fabric.errors import ConfigError
from fedemu.tools.run import runner
from fedemu.tools.cli import main

from fabric_helpers import read_journal

FAILING = textwrap.dedent('''
    from fedemu.fabric.actor import Actor
    from fedemu.fabric.errors import ConfigError
    from fedemu.fabric.messages import message

    PARAMS = {"n": 6, "fail": "finish"}

    @message("fabtest.evidence.ping")
    class Ping:
        k: int

    class A(Actor):
        def __init__(self, params):
            super().__init__()
            self.params = params
            self.seen = 0

        def on_start(self):
            if self.id == 0:
                for k in range(self.params["n"]):
                    self.set_timer(100 * k, Ping(k))

        def on_Ping(self, msg, src):
            if src == self.id:
                self.send(1, Ping(msg.k))
                return
            self.seen += 1
            if self.params["fail"] == "actor" and msg.k == 3:
                raise ValueError(f"ping {msg.k} is one too many for {object()}")
            if self.params["fail"] == "config" and msg.k == 3:
                raise ConfigError("bad input found mid-run")

    class Run:
        def __init__(self, actors):
            self.actors = actors

        def finish(self, fabric, info):
            seen = self.actors[1].seen
            if self.actors[1].params["fail"] == "finish":
                raise AssertionError(f"b saw {seen} pings, expected {seen + 1}")
            return info

    def build(fabric, params):
        actors = [A(params), A(params)]
        for name, actor in zip(("a", "b"), actors):
            fabric.add(name, lambda actor=actor: actor)
        return Run(actors)
''')


@pytest.fixture()
def scenario(tmp_path):
    path = tmp_path / "failing_scen.py"
    path.write_text(FAILING)
    return path


def test_a_run_that_fails_at_its_end_check_keeps_its_journal(tmp_path, scenario, capsys):
    log = tmp_path / "log.fjl"
    with pytest.raises(AssertionError, match="b saw 6 pings, expected 7") as err:
        runner.execute(str(scenario), journal_path=log)
    assert any(f"the journal is kept in {log}" in note for note in err.value.__notes__)
    _, records, footer = read_journal(log)
    assert footer["ended"] == "AssertionError: b saw 6 pings, expected 7" and footer["sent"] == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["failing_scen.py", "log.fjl"]  # no temporary file
    code, out, err = (main(["replay", str(log), "--verify", "--scenario", str(scenario)]), *capsys.readouterr())
    assert (code, err) == (0, "")
    assert out == (f"identical: {len(records)} records, digest matches "
                   "(run ended with: AssertionError: b saw 6 pings, expected 7)\n")
    code, out, _ = (main(["replay", str(log)]), *capsys.readouterr())
    assert code == 0 and out.splitlines()[-1].endswith("(run ended with: AssertionError: b saw 6 pings, expected 7)")


def test_a_run_whose_actor_raises_keeps_its_journal_and_replays_the_same_way(tmp_path, scenario, capsys):
    """The failure's text has a memory address in it: the footer leaves it out, so it replays equal."""
    log = tmp_path / "log.fjl"
    with pytest.raises(ValueError, match="ping 3 is one too many"):
        runner.execute(str(scenario), journal_path=log, overrides={"fail": "actor"})
    _, records, footer = read_journal(log)
    assert footer["ended"] == "ValueError: ping 3 is one too many for <object object>"
    assert max(r[1] for r in records) <= 400 + 1000
    assert main(["replay", str(log), "--verify", "--scenario", str(scenario)]) == 0
    assert capsys.readouterr().out.endswith("(run ended with: ValueError: ping 3 is one too many for <object object>)\n")


def test_a_failure_that_changes_is_a_divergence(tmp_path, scenario, capsys):
    """Record a run that fails at its end check; then make the code fail elsewhere: verify says how the
    two ends differ."""
    log = tmp_path / "log.fjl"
    with pytest.raises(AssertionError):
        runner.execute(str(scenario), journal_path=log)
    n = len(read_journal(log)[1])
    scenario.write_text(FAILING.replace('raise AssertionError(f"b saw {seen} pings, expected {seen + 1}")',
                                        'raise AssertionError("something else")'))
    code, out, _ = (main(["replay", str(log), "--verify", "--scenario", str(scenario)]), *capsys.readouterr())
    assert code == 1
    assert out.splitlines()[0] == (f"journals diverge at record {n} (virtual time ?): footers differ (ended: expected "
                                   "'AssertionError: b saw 6 pings, expected 7', got 'AssertionError: something else')")
    scenario.write_text(FAILING.replace('if self.actors[1].params["fail"] == "finish":', "if False:"))
    code, out, _ = (main(["replay", str(log), "--verify", "--scenario", str(scenario)]), *capsys.readouterr())
    assert code == 1 and out.splitlines()[0].endswith(
        "footers differ (ended: expected 'AssertionError: b saw 6 pings, expected 7', got None)")


def test_bad_input_found_mid_run_leaves_no_journal(tmp_path, scenario):
    log = tmp_path / "log.fjl"
    with pytest.raises(ConfigError, match="bad input found mid-run"):
        runner.execute(str(scenario), journal_path=log, overrides={"fail": "config"})
    assert list(tmp_path.iterdir()) == [scenario]


def test_a_good_journal_says_nothing_about_how_it_ended(tmp_path, scenario, capsys):
    log = tmp_path / "log.fjl"
    runner.execute(str(scenario), journal_path=log, overrides={"fail": "none"})
    assert "ended" not in read_journal(log)[2]
    assert main(["replay", str(log), "--verify", "--scenario", str(scenario)]) == 0
    assert capsys.readouterr().out.endswith("digest matches\n")


# ---- signals and pipes ------------------------------------------------------------------------------
INTERRUPTED = textwrap.dedent('''
    from fedemu.fabric.actor import Actor
    from fedemu.fabric.messages import message
    from fedemu.tools.run import runner

    PARAMS = {"at": 5, "twice": False}
    HANDLED = []

    @message("fabtest.evidence.tick")
    class Tick:
        k: int

    class A(Actor):
        def __init__(self, params):
            super().__init__()
            self.params = params

        def on_start(self):
            self.set_timer(10, Tick(0))

        def on_Tick(self, msg, src):
            HANDLED.append(msg.k)
            if msg.k == self.params["at"]:  # what a signal handler does when Ctrl-C arrives here
                runner.interrupt()
                if self.params["twice"]:
                    runner.interrupt()
            self.set_timer(10, Tick(msg.k + 1))

    def build(fabric, params):
        HANDLED.clear()
        fabric.add("a", lambda: A(params))
        HANDLED.append(fabric)
''')


def test_an_interrupt_stops_the_fabric_and_keeps_the_run_so_far_marked_partial(tmp_path):
    """``runner.interrupt`` (what the SIGINT/SIGTERM handler calls) mid-run: the fabric stops at the end of
    that window, and the run ends as the live view's q ends it (issue 45: it used to leave nothing): its
    journal closed with a ``stopped early`` footer, no temporary file, and RunInterrupted (a
    KeyboardInterrupt) carrying the result marked partial."""
    import sys

    from fedemu.fabric.journal import check

    scen = tmp_path / "interrupted_scen.py"
    scen.write_text(INTERRUPTED)
    log = tmp_path / "out" / "m.log"
    log.parent.mkdir()
    with pytest.raises(runner.RunInterrupted) as stopped:
        runner.execute(str(scen), journal_path=log, overrides={"twice": False})
    assert list(log.parent.iterdir()) == [log]
    fabric, *handled = sys.modules["fedemu_scenario_interrupted_scen"].HANDLED
    sys.modules["fedemu_scenario_interrupted_scen"].HANDLED.clear()  # the fabric is freed with the test
    window = fabric.network.window  # ticks due inside the window of the 5th still run; an endless ticker ends
    assert handled == list(range(len(handled))) and 6 <= len(handled) <= 6 + window // 10
    assert fabric.now < 10 * len(handled) + window
    assert stopped.value.result.summary["partial"] == {"stopped_at_s": fabric.now / 1e6, "by": "a signal"}
    assert check(log).footer["ended"] == "stopped early (a signal): partial"


def test_a_second_interrupt_stops_at_once_and_leaves_nothing(tmp_path):
    """Asked twice, the stop is at once (KeyboardInterrupt inside trio), still leaving no file; and with no
    run going, at once too, the stop standing until it is cleared."""
    import sys

    scen = tmp_path / "interrupted_scen.py"
    scen.write_text(INTERRUPTED)
    log = tmp_path / "out" / "m.log"
    log.parent.mkdir()
    with pytest.raises(KeyboardInterrupt) as stopped:
        runner.execute(str(scen), journal_path=log, overrides={"twice": True})
    assert not isinstance(stopped.value, runner.RunInterrupted)
    assert list(log.parent.iterdir()) == []
    sys.modules["fedemu_scenario_interrupted_scen"].HANDLED.clear()  # the fabric is freed with the test
    with pytest.raises(KeyboardInterrupt):  # no run going: at once
        runner.interrupt()
    try:  # and the stop stands, for a raise a ``__del__`` swallowed: no run starts until it is cleared
        with pytest.raises(KeyboardInterrupt):
            runner.execute("default", overrides={"jobs": 3})
    finally:
        runner.clear_interrupt()
    assert runner.execute("default", overrides={"jobs": 3}).summary["invariants"]["jobs_closed"] == "ok"


def _cli(*argv, **kw):
    return subprocess.Popen([sys.executable, "-m", "fedemu", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


@pytest.mark.parametrize("sig, status, by", [(signal.SIGTERM, 143, "SIGTERM"), (signal.SIGINT, 130, "Ctrl-C (SIGINT)")])
@pytest.mark.parametrize("used", [False, True], ids=["new-folder", "used-folder"])
def test_a_signal_mid_run_keeps_the_results_so_far_marked_partial(tmp_path, sig, status, by, used):
    """Issue 45: Ctrl-C or SIGTERM removed a new folder, so a long run left nothing, and in a used folder the
    earlier complete results stayed with no word. Now, once the journal has blocks on disk, the signal ends
    the run with its results so far (summary.json and the journal marked partial), the printout, one line
    saying so, the signal's status, and no temporary file."""
    out = tmp_path / "out"
    if used:  # an earlier complete run's results there
        assert subprocess.run([sys.executable, "-m", "fedemu", "run", "demo", "--quiet", "--record", "--out", str(out),
                               "--set", "duration_ms=50"], capture_output=True).returncode == 0
    else:
        out.mkdir()
    # SIGINT as a terminal delivers it: a suite started as a background job passes SIGINT on ignored, and
    # fedemu rightly leaves an ignored SIGINT alone (tools/cli.py)
    proc = _cli("run", "demo", "--set", "duration_ms=100000000", "--set", "peers=20", "--record", "--out", str(out),
                "--quiet", preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while not any(t.stat().st_size > 2 << 20 for t in out.glob(".messages.log.*.tmp")):  # two blocks written
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(proc.communicate())
        time.sleep(0.05)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=60)
    *before, last = stderr.splitlines(keepends=True)  # before: the demo's warning that this run is long
    summary = json.loads((out / "summary.json").read_text())
    assert summary["partial"]["by"] == by
    assert (proc.returncode, last) == (status, f"fedemu: stopped early by {by} at "
                                       f"{summary['partial']['stopped_at_s']:,.6f} s of virtual time; the results "
                                       f"in {out} are partial (summary.json says so)\n")
    assert all(line.startswith("fedemu: warning: a large run") for line in before)
    assert summary["digest"] in stdout and stdout.rstrip().endswith(f"results: {out}")
    assert sorted(p.name for p in out.iterdir()) == ["messages.log", "summary.json"]
    from fedemu.fabric.journal import check

    assert check(out / "messages.log").footer["ended"] == f"stopped early ({by}): partial"


def test_a_closed_pipe_ends_replay_quietly(tmp_path):
    """`fedemu replay LOG | head -1`: no message, SIGPIPE's status (141) like other Unix tools."""
    log = tmp_path / "big.fjl"
    runner.execute("demo", overrides={"duration_ms": 20000}, journal_path=log)
    assert log.stat().st_size > 1 << 20
    proc = _cli("replay", str(log))
    first = proc.stdout.readline()
    proc.stdout.close()
    stderr = proc.stderr.read()
    assert (proc.wait(timeout=60), stderr) == (141, "")
    assert first.startswith("[       0]")


def test_a_stop_raised_inside_a_del_is_not_printed_but_other_unraisables_are():
    """The signal handler may run inside a ``__del__`` (trio's nurseries have one), where Python prints the
    KeyboardInterrupt it raises as a traceback and goes on: the command's hook keeps that quiet (the stop
    stands in ``runner``) and passes anything else on."""
    import types

    from fedemu.tools import cli

    seen = []
    quiet = cli._quiet_unraisable(seen.append)
    stop, other = types.SimpleNamespace(exc_type=KeyboardInterrupt), types.SimpleNamespace(exc_type=ValueError)
    quiet(stop)
    quiet(other)
    assert seen == [other]


def test_an_interrupted_run_writes_its_result_files_marked_partial_with_the_jobs_asked(tmp_path):
    """Issue 45: the results so far, as the live view's q writes them: every result file, the summary marked
    partial with the jobs the workload holds, and a later compare never reuses it as finished."""
    from fedemu.tools.results.results import finished

    def stop_at_one_second(fabric, run):
        if fabric.now >= 1_000_000:
            runner.interrupt("SIGTERM")

    out = tmp_path / "out"
    with pytest.raises(runner.RunInterrupted) as stopped:
        runner.execute("default", overrides={"jobs": 300}, out_dir=out, progress=stop_at_one_second)
    summary = json.loads((out / "summary.json").read_text())
    assert summary == stopped.value.result.summary
    assert summary["partial"]["by"] == "SIGTERM" and summary["partial"]["jobs_asked"] == 300
    assert summary["jobs_completed"] < 300 and "jobs_closed" not in summary["invariants"]
    assert {"jobs.csv", "tasks.csv", "delay_cdf.png", "imbalance.png"} <= {p.name for p in out.iterdir()}
    assert finished(out) is None
