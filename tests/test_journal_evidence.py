"""Failed runs leave a journal that replays to the same failure; SIGTERM and Ctrl-C leave no temporary
file; a closed pipe ends `fedemu replay` quietly."""

import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fedemu.fabric.errors import ConfigError
from fedemu.tools import runner
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
    from fedemu.tools import runner

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


@pytest.mark.parametrize("twice", [False, True])
def test_an_interrupt_stops_the_fabric_and_removes_the_journal(tmp_path, twice):
    """``runner.interrupt`` (what the SIGINT/SIGTERM handler calls) mid-run: the fabric stops at the end of
    that window and the run ends in KeyboardInterrupt with no journal and no temporary file; asked twice,
    it raises at once, still leaving nothing."""
    import sys

    scen = tmp_path / "interrupted_scen.py"
    scen.write_text(INTERRUPTED)
    log = tmp_path / "out" / "m.log"
    log.parent.mkdir()
    with pytest.raises(KeyboardInterrupt):
        runner.execute(str(scen), journal_path=log, overrides={"twice": twice})
    assert list(log.parent.iterdir()) == []
    fabric, *handled = sys.modules["fedemu_scenario_interrupted_scen"].HANDLED
    window = fabric.network.window  # ticks due inside the window of the 5th still run; an endless ticker ends
    assert handled == list(range(len(handled))) and 6 <= len(handled) <= 6 + window // 10
    assert fabric.now < 10 * len(handled) + window
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


@pytest.mark.parametrize("sig, status, says", [(signal.SIGTERM, 143, "fedemu: terminated (SIGTERM); temporary "
                                                "files removed\n"), (signal.SIGINT, 130, "fedemu: interrupted\n")])
def test_a_signal_mid_run_leaves_no_temporary_file(tmp_path, sig, status, says):
    """A long demo run, recorded: once its journal has blocks on disk, the signal ends it with one line,
    its status, and neither the journal nor its temporary file left."""
    out = tmp_path / "out"
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
    assert (proc.returncode, stdout, last) == (status, "", says)
    assert all(line.startswith("fedemu: warning: a large run") for line in before)
    assert list(out.iterdir()) == []


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
