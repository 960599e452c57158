"""Bad input, table-driven: every case ends in exit 2 with one line on stderr, no traceback, nothing left.

Each case runs ``fedemu.tools.cli.main`` in-process with ``--out OUT`` where the command takes one, and
checks that OUT does not exist afterwards (a refused run leaves no folder behind). The second half checks
what is legal but worth saying: warnings and notes on stderr, and the files a run must leave.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fedemu.scenarios import preflight
from fedemu.tools.cli import main

from fabric_helpers import ping_pong_scenario

TRACES = Path(__file__).resolve().parents[2] / "shared/data/meghanat_megha_simulator/traces/input"

# Files the cases refer to as {name}; written into the test's tmp folder.
FILES = {
    "t_1e300.tr": "0 1 1 1\n1e300 1 1 1\n",
    "t_1e13.tr": "0 1 1 1e13\n",
    "t_1e12.tr": "0 1 1 1\n1e12 1 1 1\n",
    "t_empty.tr": "",
    "t_key.tr": "0 1 1 1\n0 1 1 1 gpu=2\n",
    "t_blank.tr": "\n   \n\t\n",
    "s_syntax.py": "PARAMS = {}\ndef build(fabric, params)\n    pass\n",
    "s_import.py": "import fedemu_no_such_module\nPARAMS = {}\ndef build(fabric, params):\n    pass\n",
    "s_build42.py": "PARAMS = {}\nbuild = 42\n",
    "s_signature.py": "PARAMS = {}\ndef build(fabric):\n    pass\n",
    "s_raises.py": "PARAMS = {}\ndef build(fabric, params):\n    table = {}\n    return table['missing']\n",
    "s_noparams.py": "def build(fabric, params):\n    pass\n",
    "s_finish.py": ("PARAMS = {}\n\n\nclass Run:\n    def finish(self, fabric, info):\n        return info['nope']\n"
                    "\n\ndef build(fabric, params):\n    return Run()\n"),
    "s_text.txt": "PARAMS = {}\n",
    "a_file": "not a folder\n",
    # findings of the trust-boundary issue: values that passed the checks, then failed or did nothing
    "s_exit_import.py": "import sys\nsys.exit(3)\nPARAMS = {}\ndef build(fabric, params):\n    pass\n",
    "s_exit_build.py": "import sys\nPARAMS = {}\ndef build(fabric, params):\n    sys.exit(0)\n",
    "s_set_param.py": "PARAMS = {'when': 1j}\ndef build(fabric, params):\n    pass\n",
    "p_slow_huge.toml": '[[fault]]\nat_s = 1\nkind = "slow"\nlink = ["gm-0", "lm-0"]\nvalue = 1e17\n',
    "p_self_link.toml": '[[fault]]\nat_s = 1\nkind = "loss"\nlink = ["lm-1", "lm-1"]\nvalue = 1.0\n',
    "p_self_partition.toml": '[[fault]]\nat_s = 1\nkind = "partition"\nsides = [["gm-0"], ["gm-0", "lm-1"]]\n',
    "p_restart_running.toml": '[[fault]]\nat_s = 1\nkind = "restart"\ntarget = "gm-1"\n',
}

RUN = ["run", "default", "--quiet", "--out", "{out}", "--set", "jobs=20"]
PIGEON = RUN + ["--set", "scheduler=pigeon"]
SPARROW = RUN + ["--set", "scheduler=sparrow"]


def _set(*items, base=RUN):
    """``base`` with ``--set item`` for each item; a key of ``base`` set again is taken out of it first
    (a key given twice is an error of its own)."""
    keys = {item.split("=", 1)[0] for item in items}
    kept, skip = [], False
    for i, word in enumerate(base):
        if skip:
            skip = False
            continue
        if word == "--set" and base[i + 1].split("=", 1)[0] in keys:
            skip = True
            continue
        kept.append(word)
    return [*kept, *(x for item in items for x in ("--set", item))]


# (case id, argv, a piece of the one error line)
CASES = [
    # runaway sizes and non-finite numbers
    ("fanout-1e7", _set("fanout=1e7", "jobs=50"), "fanout=10000000: the run would need"),
    ("lms-1e9", _set("lms=1e9"), "lms=1000000000: the run would need"),
    ("workers-1e12", _set("workers=1e12"), "workers=1000000000000: the run would need"),
    ("syn-huge", _set("workload=syn_100000000"), "workload='syn_100000000': the run would need"),
    ("masters-1e12", _set("masters=1e12", base=PIGEON), "masters=1000000000000: the run would need"),
    ("probe-ratio-1e12", _set("probe_ratio=1e12", base=SPARROW), "probe_ratio=1000000000000.0: the run would need"),
    ("gms-inf", _set("gms=inf"), "'gms'"),
    ("wpp-inf", _set("workers_per_partition=inf"), "'workers_per_partition'"),
    ("jobs-inf", _set("jobs=inf"), "'jobs'"),
    ("latency-inf", _set("latency_ms=inf"), "parameter 'latency_ms' is inf; expected a finite number >= 0"),
    ("latency-nan", _set("latency_ms=nan"), "parameter 'latency_ms' is nan; expected a finite number >= 0"),
    ("latency-negative", _set("latency_ms=-1"), "parameter 'latency_ms' is -1; expected a finite number >= 0"),
    ("latency-huge", _set("latency_ms=1e12"), "more than the longest time a run may span"),
    ("task-s-huge", _set("task_s=1e12"), "parameter 'task_s' is 1000000000000.0; more than the longest time"),
    ("rate-tiny", _set("rate=1e-12"), "rate=1e-12: 20 jobs would arrive over about 2e+13 s"),
    ("jitter-above-latency", _set("jitter_ms=1"), "jitter_ms=1 is more than latency_ms=0.5"),
    ("short-cutoff-negative", _set("short_cutoff_s=-1"), "'short_cutoff_s' is -1"),
    # nothing can run
    ("capacity-two-resources", _set("capacity=4,16"),
     "no job can run: every one of the 20 jobs has a task no worker can run; demand names 1 resource(s)"),
    ("demand-above-capacity", _set("demand=2"), "demand (2,) is more than the largest worker's capacity (1,)"),
    ("one-worker-with-constraints", _set("gms=1", "lms=1", "workers=1"),
     "every one of the 20 jobs has a task no worker can run; no worker both holds the demand and has every constraint"),
    # traces
    ("trace-1e300", _set("workload=trace", "trace={t_1e300.tr}"),
     "{t_1e300.tr}:2: field 1 (arrival_s) is '1e300', more than the largest time a trace may give"),
    ("trace-1e13", _set("workload=trace", "trace={t_1e13.tr}"), "{t_1e13.tr}:1: field 4 (dur_1) is '1e13'"),
    ("trace-1e12", _set("workload=trace", "trace={t_1e12.tr}"), "{t_1e12.tr}:2: field 1 (arrival_s) is '1e12'"),
    ("trace-empty", _set("workload=trace", "trace={t_empty.tr}"), "{t_empty.tr}: the trace has no jobs"),
    ("trace-unknown-key", _set("workload=trace", "trace={t_key.tr}"),
     "{t_key.tr}:2: field 5 ('gpu=2') has unknown key 'gpu'; known: alpha, demand, user"),
    # gangs and per-job demands
    ("gang-pigeon", _set("gang=true", base=PIGEON),
     "parameter 'gang' does not apply to scheduler 'pigeon' (it is centralized/megha's)"),
    ("gang-sparrow", _set("gang=true", base=SPARROW),
     "parameter 'gang' does not apply to scheduler 'sparrow' (it is centralized/megha's)"),
    ("user-assign-trace-poisson", _set("users=2", "user_assign=trace"),
     "user_assign=trace reads each job's user=K from a trace, but the workload is 'poisson'"),
    ("gang-users", _set("gang=true", "users=3"),
     "gang=true with users needs fairness=off: Algorithm 2 preempts single tasks, and a gang's tasks start "
     "together and never run alone"),
    ("demands-bad", _set("demands=1x2:60,2:40"), "parameter 'demands' is '1x2:60,2:40'; every demand must name"),
    ("trace-blank", _set("workload=trace", "trace={t_blank.tr}"), "{t_blank.tr}: the trace has no jobs"),
    ("trace-missing", _set("workload=trace", "trace={tmp}/nope.tr"), "{tmp}/nope.tr: no such trace file"),
    ("trace-with-poisson", _set("trace={tmp}/nope.tr"),
     "parameter 'trace' does not apply to workload 'poisson' (only trace reads it)"),
    ("fanout-with-trace", _set("workload=trace", "trace={tmp}/nope.tr", "fanout=3"),
     "parameter 'fanout' does not apply to workload 'trace' (only poisson reads it)"),
    ("task-s-with-trace", _set("workload=trace", "trace={tmp}/nope.tr", "task_s=2"),
     "parameter 'task_s' does not apply to workload 'trace' (only poisson and syn_N read it)"),
    # seeds
    ("seed-2-64", [*RUN, "--seed", str(2**64)], "argument --seed: expected a whole number from 0 to"),
    ("seed-negative", [*RUN, "--seed", "-1"], "argument --seed: expected a whole number from 0 to"),
    ("seed-2-64-record", [*RUN, "--record", "--seed", str(2**70)], "argument --seed"),
    # scenario files
    ("scenario-unknown", ["run", "nosuch", "--out", "{out}"],
     "unknown scenario 'nosuch'; known: default, demo, failover, fairness, federation, heterogeneous, or the path "
     "of a scenario .py file"),
    ("scenario-syntax", ["run", "{s_syntax.py}", "--out", "{out}"], "{s_syntax.py}:2: syntax error in the scenario"),
    ("scenario-import", ["run", "{s_import.py}", "--out", "{out}"],
     "{s_import.py}:1: importing the scenario raised ModuleNotFoundError"),
    ("scenario-build-42", ["run", "{s_build42.py}", "--out", "{out}"], "build is int, expected a function"),
    ("scenario-signature", ["run", "{s_signature.py}", "--out", "{out}"],
     "build(fabric) cannot be called as build(fabric, params)"),
    ("scenario-build-raises", ["run", "{s_raises.py}", "--out", "{out}"], "{s_raises.py}:4: build raised KeyError"),
    ("scenario-no-params", ["run", "{s_noparams.py}", "--out", "{out}"], "has no PARAMS dict"),
    ("scenario-txt", ["run", "{s_text.txt}", "--out", "{out}"], "is not a .py file"),
    ("scenario-directory", ["run", "{tmp}", "--out", "{out}"], "is a directory; expected a scenario .py file"),
    ("scenario-missing", ["run", "{tmp}/nope.py", "--out", "{out}"], "does not exist"),
    # output folders
    ("out-is-a-file", ["run", "demo", "--quiet", "--out", "{a_file}"], "is a file, not a folder"),
    ("out-in-write-protected", ["run", "demo", "--quiet", "--out", "/proc/fedemu-test-out"],
     "--out /proc/fedemu-test-out: /proc is write-protected (mode 555)"),
    ("out-write-protected", ["run", "demo", "--quiet", "--out", "/proc/sys"],
     "--out /proc/sys: the folder is write-protected (mode 555)"),
    ("out-cannot-create", ["run", "demo", "--quiet", "--out", "/sys/kernel/fedemu-test-out"], "cannot create the folder"),
    ("out-cannot-write", ["run", "demo", "--quiet", "--out", "/sys/kernel"], "cannot write there"),
    # journal and event log paths, checked before the run
    ("journal-in-write-protected", [*RUN, "--journal", "/proc/fedemu-test.log"],
     "--journal /proc/fedemu-test.log: /proc is write-protected (mode 555)"),
    ("journal-cannot-write", [*RUN, "--journal", "/sys/kernel/fedemu-test.log"], "/sys/kernel: cannot write there"),
    ("journal-folder-missing", [*RUN, "--journal", "{tmp}/nodir/j.log"], "the folder {tmp}/nodir does not exist"),
    ("journal-in-a-file", [*RUN, "--journal", "{a_file}/j.log"], "{a_file} is a file, not a folder"),
    ("journal-is-a-folder", [*RUN, "--journal", "{tmp}"], "--journal {tmp} is a folder; expected the path of a file"),
    ("journal-check-determinism", [*RUN, "--check-determinism", "--journal", "/proc/fedemu-test.log"],
     "/proc is write-protected"),
    ("log-in-write-protected", [*RUN, "--log", "/proc/fedemu-test.jsonl"],
     "--log /proc/fedemu-test.jsonl: /proc is write-protected (mode 555)"),
    # numbers no run can hold
    ("heartbeat-huge", _set("heartbeat_s=1e300"), "parameter 'heartbeat_s' is 1e+300; more than the longest time"),
    ("fqw-2-64-record", [*_set("fqw=18446744073709551616", base=PIGEON), "--record"],
     "parameter 'fqw' is 18446744073709551616; expected a whole number of at most 2^63-1"),
    ("capacity-2-64", _set("capacity=18446744073709551616"), "expected whole numbers from 0 to 2^31-1"),
    ("constraint-table-number", _set("constraint_table=nan"), "nan"),
    # the demo scenario
    ("demo-latency-inf", ["run", "demo", "--out", "{out}", "--set", "latency_ms=inf"], "'latency_ms' is inf"),
    ("demo-jitter-nan", ["run", "demo", "--out", "{out}", "--set", "jitter_ms=nan"], "'jitter_ms' is nan"),
    ("demo-latency-negative", ["run", "demo", "--out", "{out}", "--set", "latency_ms=-1"],
     "parameter 'latency_ms' is -1; expected a finite number >= 0"),
    ("demo-peers-1e9", ["run", "demo", "--out", "{out}", "--set", "peers=1e9"], "peers=1000000000: the run would"),
    ("demo-one-peer", ["run", "demo", "--out", "{out}", "--set", "peers=1"], "expected at least 2"),
    ("demo-period-0", ["run", "demo", "--out", "{out}", "--set", "period_ms=0"], "expected at least 0.001 (1 us)"),
    ("demo-duration-huge", ["run", "demo", "--out", "{out}", "--set", "duration_ms=1e15"], "longest time a run"),
    # other commands
    ("compare-jobs-negative", ["compare", "default", "--jobs", "-1", "--out", "{out}"],
     "argument --jobs: expected a whole number >= 0"),
    ("compare-seeds-huge", ["compare", "default", "--seeds", str(2**64), "--out", "{out}"], "is not from 0 to 2^64-1"),
    ("bench-messages-negative", ["bench", "fabric", "--messages", "-5"], "argument --messages: expected a whole"),
    ("bench-neighbour-negative", ["bench", "fabric", "--neighbour", "-5"], "argument --neighbour: expected a whole"),
    ("replay-from-inf", ["replay", "no.log", "--from", "inf"], "argument --from: 'inf' is not a number of seconds"),
    ("replay-to-huge", ["replay", "no.log", "--to", "1e400"], "argument --to: '1e400' is not a number of seconds"),
    ("replay-seek-nan", ["replay", "no.log", "--tui", "--seek", "nan"], "argument --seek: 'nan' is not a number"),
    ("no-such-command", ["bogus"], "error: argument command: invalid choice: 'bogus'"),
    ("set-not-key-value", ["run", "default", "--out", "{out}", "--set", "jobs"], "is not key=value"),
    # values that passed validation and then failed, or did nothing (findings 7 and 11)
    ("set-twice", [*RUN, "--set", "jobs=10"], "--set jobs is given twice (jobs=20, then 'jobs=10')"),
    ("slow-1e17", [*RUN, "--faults", "{p_slow_huge.toml}"], "a latency factor is at most 1e+06"),
    ("self-link", [*RUN, "--faults", "{p_self_link.toml}"], "fault loss on the link from lm-1 to itself"),
    ("self-partition", [*RUN, "--faults", "{p_self_partition.toml}"], "gm-0 on both sides"),
    ("restart-running", [*RUN, "--faults", "{p_restart_running.toml}"],
     ":1: fault 1 (restart at 1 s): restart of gm-1: nothing crashed gm-1 before then, so the restart would do nothing"),
    ("scenario-exit-import", ["run", "{s_exit_import.py}", "--out", "{out}"],
     "{s_exit_import.py}:2: importing the scenario called sys.exit(3)"),
    ("scenario-exit-build", ["run", "{s_exit_build.py}", "--out", "{out}"], "{s_exit_build.py}:4: build called sys.exit(0)"),
    ("parameter-not-journalable", ["run", "{s_set_param.py}", "--record", "--out", "{out}"],
     "parameter 'when' is 1j (complex); a parameter is a number, text"),
    ("replay-from-after-to", ["replay", "no.log", "--from", "5", "--to", "1"], "--to 1 is before --from 5"),
    # issue 45: --record with --journal wrote only --journal, and OUT/messages.log silently not
    ("record-and-journal", [*RUN, "--record", "--journal", "{tmp}/j.fjl"],
     "--record writes the journal to {out}/messages.log and --journal to {tmp}/j.fjl: give one of them"),
    ("record-and-journal-no-out", ["run", "default", "--record", "--journal", "{tmp}/j.fjl"],
     "--record writes the journal to OUT/messages.log and --journal to {tmp}/j.fjl"),
    # issue 45: --check-determinism ignored --tui in silence
    ("check-determinism-tui", [*RUN, "--check-determinism", "--tui"],
     "--check-determinism runs the scenario twice, the second in another process, with no live view; --tui shows "
     "one run: give one of them"),
    ("check-determinism-pace", [*RUN, "--check-determinism", "--pace", "10"], "; --pace shows one run"),
]


@pytest.fixture
def files(tmp_path):
    names = {"tmp": str(tmp_path), "out": str(tmp_path / "out" / "nested")}
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
        names[name] = str(tmp_path / name)
    return names


def _fill(text: str, names: dict) -> str:
    for key, value in names.items():
        text = text.replace("{" + key + "}", value)
    return text


@pytest.mark.parametrize("argv, says", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_leaves_nothing(capsys, files, argv, says):
    code = main([_fill(a, files) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith("fedemu: error: ") and err.count("\n") == 1 and err.endswith("\n"), err
    assert "Traceback" not in err
    assert _fill(says, files) in err
    assert out == ""
    assert not Path(files["out"]).exists() and not Path(files["out"]).parent.exists()
    assert not list(Path(files["tmp"]).glob("**/*.tmp"))


def test_a_scenario_whose_finish_raises_is_one_line_and_keeps_its_journal(capsys, files):
    """Not bad input but a failed run: exit 1, one line naming file and line, the journal kept and replayable."""
    out = Path(files["out"])
    code = main(["run", files["s_finish.py"], "--record", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith(f"fedemu: failed: {files['s_finish.py']}:6: the scenario raised KeyError: 'nope'; "
                          f"the journal is kept in {out / 'messages.log'}")
    assert main(["replay", str(out / "messages.log"), "--verify", "--scenario", files["s_finish.py"]]) == 0
    assert capsys.readouterr().out.endswith("(run ended with: KeyError: 'nope')\n")


def test_the_console_command_exits_2_in_a_real_process(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "fedemu", "run", "default", "--seed", str(2**64), "--out",
                           str(tmp_path / "o")], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("fedemu: error: fedemu run: argument --seed:") and proc.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("key", ["gms", "lms", "workers_per_partition", "workers", "jobs", "fanout", "load", "rate",
                                 "task_s", "short_cutoff_s", "latency_ms", "jitter_ms", "loss", "heartbeat_s"])
@pytest.mark.parametrize("value", ["x", "nan", "-1"])
def test_every_common_number_key_refuses_a_wrong_type_nan_and_negative(capsys, tmp_path, key, value):
    out = tmp_path / "o"
    code = main(["run", "default", "--quiet", "--out", str(out), "--set", "jobs=5", "--set", f"{key}={value}"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fedemu: error: ") and err.count("\n") == 1, err
    assert key in err or "link loss" in err
    assert not out.exists()


def _scheduler_keys():
    """(scheduler, Param) for every key every registered scheduler plug-in declares."""
    from fedemu.actors.registry import SCHEDULERS

    return [(s.name, p) for s in SCHEDULERS.values() for p in s.params]


# A wrong type, non-finite values, a negative value and absurd sizes (beyond float-exact, beyond 64 bits).
BAD_VALUES = ["x", "nan", "inf", "-inf", "-1", "1e300", str(2**64)]


@pytest.mark.parametrize("value", BAD_VALUES)
@pytest.mark.parametrize("scheduler, param", _scheduler_keys(), ids=[f"{s}-{p.name}" for s, p in _scheduler_keys()])
def test_every_scheduler_key_refuses_bad_values_in_one_line(capsys, tmp_path, scheduler, param, value):
    """Each plug-in's own keys (from the registry): exit 2, one line naming the key, no folder left; only a
    value the key's Param itself declares legal (fqw=inf: strict priority) runs, and then ends in 0."""
    from fedemu.tools.run.params import parse_value

    out = tmp_path / "o"
    code = main(["run", "default", "--quiet", "--record", "--out", str(out), "--set", "jobs=5",
                 "--set", f"scheduler={scheduler}", "--set", f"{param.name}={value}"])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if value == "inf" and param.ok is not None and param.ok(parse_value(value)):
        assert code == 0 and (out / "summary.json").is_file()
        return
    assert code == 2 and err.startswith("fedemu: error: ") and err.count("\n") == 1, err
    assert param.name in err
    assert not out.exists()


def _common_number_keys():
    from fedemu.scenarios.federation import COMMON

    return [p for p in COMMON if isinstance(p.default, (int, float)) and not isinstance(p.default, bool)]


@pytest.mark.parametrize("value", ["inf", "-inf", "1e300", str(2**64)])
@pytest.mark.parametrize("param", _common_number_keys(), ids=[p.name for p in _common_number_keys()])
def test_every_common_number_key_ends_in_a_verdict_at_extremes(capsys, tmp_path, param, value):
    """The federation scenario's number keys at the extremes: a one-line refusal (always, where the key's Param
    rejects the value), or a run that ends 0 with at most warnings and notes on stderr."""
    from fedemu.tools.run.params import parse_value

    out = tmp_path / "o"
    code = main(["run", "default", "--quiet", "--record", "--out", str(out), "--set", "jobs=5",
                 "--set", f"{param.name}={value}"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and code in (0, 2), err
    if code == 2:
        assert err.startswith("fedemu: error: ") and err.count("\n") == 1 and param.name in err, err
        assert not out.exists()
    else:
        assert all(line.startswith(("fedemu: warning: ", "fedemu: note: ")) for line in err.splitlines()), err
        assert (out / "summary.json").is_file() and (out / "messages.log").is_file()
    number = parse_value(value)
    if number in (math.inf, -math.inf) and param.ok is not None and not param.ok(number):
        assert code == 2


# ---- legal, but worth a line on stderr ---------------------------------------------------------------


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_overload_is_a_warning_not_an_error(capsys):
    code, _, err = _run(capsys, "run", "default", "--quiet", "--set", "jobs=20", "--set", "load=2")
    assert code == 0
    assert "fedemu: warning: load=2 is above 1" in err and "never reaches a steady state" in err


def test_most_jobs_unschedulable_is_a_warning_after_the_run(capsys):
    """One worker with constraints on: 98 of 100 jobs cannot run (and with 30 jobs, none can: an error)."""
    code, _, err = _run(capsys, "run", "default", "--quiet", "--set", "jobs=100", "--set", "gms=1", "--set", "lms=1",
                        "--set", "workers=1")
    assert code == 0
    assert err.splitlines()[-1] == ("fedemu: warning: 98 of 100 jobs did not complete; 98 unschedulable (a task no "
                                    "worker can run: see capacity, demand, constraints)")


def test_a_trace_runs_whole_by_default_and_a_cut_is_said(capsys):
    trace = TRACES / "YH_small.tr"
    if not trace.is_file():
        pytest.skip("example trace not available")
    base = ("run", "default", "--quiet", "--set", "workload=trace", "--set", f"trace={trace}", "--set", "workers=300")
    code, out, err = _run(capsys, *base)
    assert code == 0
    assert "the trace" not in err  # nothing cut: no note
    assert any(line.split()[:2] == ["jobs", "10"] for line in out.splitlines())
    code, out, err = _run(capsys, *base, "--set", "jobs=3")
    assert code == 0
    assert f"fedemu: note: the trace {trace} has 10 jobs; this run uses the first 3" in err


def test_the_size_refusal_follows_the_machine_memory(monkeypatch):
    params = dict(preflight_params())
    est = preflight.estimate(params)
    monkeypatch.setattr(preflight, "machine_memory", lambda: int(est.bytes / preflight.MEMORY_SHARE) + 1)
    assert preflight.check(params) == est
    monkeypatch.setattr(preflight, "machine_memory", lambda: int(est.bytes / preflight.MEMORY_SHARE) - 1)
    with pytest.raises(preflight.ConfigError, match="the run would need"):
        preflight.check(params)


def preflight_params() -> dict:
    from fedemu.scenarios import default

    return {**default.PARAMS, "jobs": 40}


@pytest.mark.parametrize("jobs, fanout", [(1, 1), (40, 10), (1000, 3)])
def test_the_estimate_grows_with_what_the_run_holds(jobs, fanout):
    small = preflight.estimate({**preflight_params(), "jobs": jobs, "fanout": fanout})
    more_tasks = preflight.estimate({**preflight_params(), "jobs": jobs, "fanout": fanout + 1})
    more_workers = preflight.estimate({**preflight_params(), "jobs": jobs, "fanout": fanout, "lms": 5})
    assert small.tasks == jobs * fanout and small.jobs == jobs
    assert more_tasks.bytes > small.bytes and more_workers.bytes > small.bytes
    assert more_workers.actors == small.actors + 3 * 25 + 1


# ---- what a run leaves ---------------------------------------------------------------------------------


def test_every_scenario_writes_a_summary(capsys, tmp_path):
    code, out, _ = _run(capsys, "run", "demo", "--quiet", "--out", str(tmp_path / "d"), "--set", "duration_ms=50")
    assert code == 0 and out.rstrip().endswith(f"results: {tmp_path / 'd'}")
    summary = json.loads((tmp_path / "d" / "summary.json").read_text())
    assert summary["seed"] == 1 and summary["digest"] in out


def test_strict_priority_writes_inf_into_the_summary(capsys, tmp_path):
    code, _, _ = _run(capsys, "run", "default", "--quiet", "--out", str(tmp_path / "p"), "--set", "jobs=10",
                      "--set", "scheduler=pigeon", "--set", "fqw=inf")
    assert code == 0
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["params"]["fqw"] == "inf"
    nc = summary["jobs_not_completed"]
    assert nc["total"] == summary["jobs"] - summary["jobs_completed"] == nc["unschedulable"] + nc["still_running"]
    assert summary["delay_s"]["count"] == summary["jobs_completed"]


def test_record_without_out_writes_under_the_ignored_out_folder(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run(capsys, "run", "demo", "--quiet", "--record", "--set", "duration_ms=50", "--seed", "7")
    assert code == 0
    assert (tmp_path / "out" / "demo-seed7" / "messages.log").is_file()
    assert (tmp_path / "out" / "demo-seed7" / "summary.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_check_determinism_honours_out_and_record(capsys, tmp_path):
    code, out, _ = _run(capsys, "run", "demo", "--check-determinism", "--record", "--out", str(tmp_path / "c"),
                        "--set", "duration_ms=50")
    assert code == 0 and out.startswith("deterministic:")
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["messages.log", "summary.json"]


def test_compare_refuses_a_used_folder_and_force_replaces_only_its_own_results(capsys, tmp_path):
    out = tmp_path / "cmp"

    def argv(seeds):
        return ["compare", "default", "--schedulers", "megha", "--seeds", seeds, "--jobs", "1", "--out", str(out),
                "--set", "jobs=5"]

    code, _, _ = _run(capsys, *argv("1,2"))
    assert code == 0 and len([p for p in out.iterdir() if p.is_dir()]) == 2
    code, _, err = _run(capsys, *argv("1,2"))  # the same plan: resumed, every run reused
    assert code == 0 and "2 of 2 runs finished earlier are reused" in err
    code, _, err = _run(capsys, *argv("1,2,3"))  # another plan
    assert code == 2 and "is not empty" in err and "--force" in err
    code, _, _ = _run(capsys, *argv("3"), "--force")
    assert code == 0
    runs = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert len(runs) == 1 and "3" in runs[0]
    (out / "mine.txt").write_text("keep me")
    code, _, err = _run(capsys, *argv("1"), "--force")
    assert code == 2 and "compare did not write (mine.txt)" in err
    assert (out / "mine.txt").read_text() == "keep me"


def test_an_interrupted_compare_is_resumed_with_its_finished_runs(capsys, tmp_path, monkeypatch):
    """Finding 12: a Ctrl-C'd compare's finished runs could not be resumed (the folder was "not empty")."""
    from fedemu.tools.run import compare

    out = tmp_path / "cmp"
    argv = ["compare", "default", "--schedulers", "megha", "--seeds", "1,2", "--jobs", "1", "--out", str(out),
            "--set", "jobs=5"]
    real, ran = compare.run_one, []

    def second_interrupted(spec):
        ran.append(spec["name"])
        if len(ran) == 2:
            raise KeyboardInterrupt
        return real(spec)

    monkeypatch.setattr(compare, "run_one", second_interrupted)
    code, _, _ = _run(capsys, *argv)
    assert code == 130 and ran == ["megha-random-s1", "megha-random-s2"]
    monkeypatch.setattr(compare, "run_one", lambda spec: ran.append(spec["name"]) or real(spec))
    code, out_text, err = _run(capsys, *argv)
    assert code == 0 and "1 of 2 runs finished earlier are reused" in err, err
    assert ran[2:] == ["megha-random-s2"] and out_text.count("megha") >= 2


_numbers = st.one_of(st.integers(min_value=-5, max_value=10**15), st.floats(allow_nan=True, allow_infinity=True),
                     st.sampled_from([0, 1, 2, 0.5, 1e7, 1e300]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["gms", "lms", "workers_per_partition", "workers", "jobs", "fanout", "load",
                                        "rate", "task_s", "latency_ms", "jitter_ms", "short_cutoff_s"]), _numbers,
                       max_size=4))
def test_preflight_accepts_what_fits_or_refuses_in_one_config_error(capsys, changes):
    """Any mix of numbers, resolved as --set resolves them: check() returns an estimate that fits the machine,
    or the key's own rule or check() raises a one-line ConfigError."""
    from fedemu.scenarios import default
    from fedemu.tools.run.params import resolve_scenario

    try:
        params = resolve_scenario(default, {"jobs": 40, **changes})
        est = preflight.check(params)
    except preflight.ConfigError as e:
        assert "\n" not in str(e)
        return
    finally:
        capsys.readouterr()
    event("accepted")
    assert est.bytes <= preflight.MEMORY_SHARE * preflight.machine_memory()
    assert est.jobs >= 1 and est.tasks >= est.jobs
    for key in preflight.COUNT_KEYS:
        if key in params:
            assert float(params[key]).is_integer() and params[key] >= 0


def test_a_scenario_whose_finish_returns_no_dict_or_whose_params_have_odd_keys(tmp_path, capsys):
    """finish() returning 5 is a failed run (exit 1, one line); a PARAMS key that is not a name is bad input."""
    fin = tmp_path / "fin5.py"
    fin.write_text("from fedemu.scenarios.federation import PARAMS as P, build as b\nPARAMS = dict(P)\n"
                   "def build(f, p):\n    r = b(f, p)\n    r.finish = lambda fabric, info: 5\n    return r\n")
    odd = tmp_path / "odd.py"
    odd.write_text("PARAMS = {1: 2}\ndef build(f, p):\n    pass\n")
    assert main(["run", str(fin), "--set", "jobs=5", "--quiet"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "finish returned int, expected the summary as a dict" in err[0]
    assert main(["run", str(odd), "--set", "1=3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fedemu: error: scenario {str(odd)!r}: PARAMS key 1 is not a name (letters, digits, _)"]


def test_a_summary_value_json_cannot_hold_is_one_line(tmp_path, capsys):
    """A scenario whose finish puts an object into its summary: one line naming the type, exit 2."""
    scen = tmp_path / "obj.py"
    scen.write_text("from fedemu.scenarios.demo import PARAMS, build as b\n"
                    "def build(f, p):\n    r = b(f, p)\n    old = r.finish\n"
                    "    r.finish = lambda fabric, info: {**old(fabric, info), 'x': object}\n    return r\n")
    assert main(["run", str(scen), "--quiet", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "summary.json cannot hold a value of type type" in err[0]


def test_a_fault_after_the_end_of_the_run_is_said(capsys, tmp_path):
    """Finding 7: a fault whose at_s lies past the end of the run was accepted and never happened, silently."""
    plan = tmp_path / "late.toml"
    plan.write_text('[[fault]]\nat_s = 5000\nkind = "crash"\ntarget = "gm-0"\n')
    code, _, err = _run(capsys, "run", "default", "--quiet", "--set", "jobs=5", "--faults", str(plan))
    assert code == 0
    assert err.startswith("fedemu: warning: 1 fault(s) of the plan never happened: the run ended at ")
    assert err.rstrip().endswith("s, before crash gm-0 at 5000 s") and err.count("\n") == 1


@pytest.mark.parametrize("where", ["actor", "finish"])
def test_a_scenario_calling_sys_exit_during_the_run_is_a_failed_run(capsys, tmp_path, where):
    """Finding 7: a scenario calling sys.exit(0) or sys.exit(3) ended fedemu with no message."""
    scen = tmp_path / "exits.py"
    scen.write_text(ping_pong_scenario("exits.ping", **{f"on_{'ping' if where == 'actor' else where}": "sys.exit(3)"}))
    code, _, err = _run(capsys, "run", str(scen), "--quiet", "--journal", str(tmp_path / "j.fjl"))
    assert code == 1 and err.startswith(f"fedemu: failed: {scen}:") and err.count("\n") == 1, err
    assert "sys.exit(3) was called" in err and (tmp_path / "j.fjl").is_file()




def test_a_run_refused_before_its_header_leaves_no_journal(capsys, tmp_path):
    """Finding 11: a failed run's "kept journal" was 162 bytes without a header when the failure came before
    the first record (a parameter the journal cannot hold); such a parameter is bad input, and nothing is left."""
    scen = tmp_path / "set_param.py"
    scen.write_text("PARAMS = {'when': 1j}\n\n\ndef build(fabric, params):\n    pass\n")
    code, _, err = _run(capsys, "run", str(scen), "--journal", str(tmp_path / "j.fjl"))
    assert code == 2 and "parameter 'when' is 1j (complex)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["set_param.py"]
    from fedemu.fabric.journal import Journal

    journal = Journal(tmp_path / "k.fjl")
    with pytest.raises(TypeError):
        journal.write_header({"params": {"when": object()}})
    assert journal.header is None  # so a failure here leaves no journal (see tools.run.runner.keep_failed_journal)
    journal.abort()


# ---- inputs that are not regular files (issue 45) ------------------------------------------------------

FIFO_CASES = [
    ("constraint-table", ["run", "default", "--quiet", "--set", "jobs=5", "--set", "constraint_table={fifo}"],
     "{fifo}: is a FIFO, not a regular file; expected a constraint table JSON file"),
    ("trace", ["run", "default", "--quiet", "--set", "workload=trace", "--set", "trace={fifo}"],
     "{fifo}: is not a regular file"),
    ("cost-model", ["run", "default", "--quiet", "--set", "jobs=5", "--set", "cost_model={fifo}"],
     "cost_model '{fifo}' is neither a known model nor a JSON file"),
    ("fault-plan", ["run", "default", "--quiet", "--set", "jobs=5", "--faults", "{fifo}"],
     "{fifo}: is a FIFO, not a regular file; expected a fault plan (.toml or .json)"),
    ("journal-show", ["replay", "{fifo}"], "{fifo}: is a FIFO, not a regular file; expected a fedemu journal"),
    ("journal-verify", ["replay", "{fifo}", "--verify"], "{fifo}: is a FIFO, not a regular file; expected a fedemu "
     "journal"),
    ("journal-diagram", ["replay", "{fifo}", "--diagram", "{tmp}/d.md"], "{fifo}: is a FIFO, not a regular file"),
    ("journal-trace", ["replay", "{fifo}", "--trace", "{tmp}/t.json"], "{fifo}: is a FIFO, not a regular file"),
    ("scenario", ["run", "{fifo}.py"], "scenario '{fifo}.py' is not a regular file; expected a scenario .py file"),
]


@pytest.mark.parametrize("argv, says", [c[1:] for c in FIFO_CASES], ids=[c[0] for c in FIFO_CASES])
def test_a_fifo_given_as_an_input_is_refused_not_waited_on(tmp_path, argv, says):
    """Finding: a FIFO as constraint_table, fault plan or journal blocked for ever with no writer. In a real
    process with a time limit, so that a read that waits fails the test instead of hanging it."""
    import os

    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    os.mkfifo(f"{fifo}.py")
    names = {"fifo": str(fifo), "tmp": str(tmp_path)}
    try:
        proc = subprocess.run([sys.executable, "-m", "fedemu", *(_fill(a, names) for a in argv)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"fedemu {' '.join(argv)} waited on the FIFO")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("fedemu: error: ") and _fill(says, names) in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["input", "input.py"]


# ---- no output path may destroy an input (issue 45) ----------------------------------------------------

PLAN_TEXT = '[[fault]]\nat_s = 1\nkind = "crash"\ntarget = "gm-0"\nfor_s = 1\n'
SAME_FILE = [
    ("journal-is-the-plan", ["run", "default", "--quiet", "--set", "jobs=5", "--faults", "{tmp}/p.toml", "--journal",
                             "{tmp}/p.toml"], "--journal {tmp}/p.toml is the fault plan {tmp}/p.toml"),
    ("journal-is-the-plan-by-another-name", ["run", "default", "--quiet", "--set", "jobs=5", "--faults", "{tmp}/p.toml",
                                             "--journal", "{tmp}/sub/../p.toml"], "is the fault plan {tmp}/p.toml"),
    ("log-is-a-hard-link-of-the-plan", ["run", "default", "--quiet", "--set", "jobs=5", "--faults", "{tmp}/p.toml",
                                        "--log", "{tmp}/hard.toml"], "--log {tmp}/hard.toml is the fault plan"),
    ("out-holds-the-plan", ["run", "default", "--quiet", "--set", "jobs=5", "--faults", "{tmp}/o/summary.json", "--out",
                            "{tmp}/o"], "--out {tmp}/o (its summary.json) is the fault plan {tmp}/o/summary.json"),
    ("journal-is-the-trace", ["run", "default", "--quiet", "--set", "workload=trace", "--set", "trace={tmp}/t.tr",
                              "--journal", "{tmp}/t.tr"], "is the file of parameter trace ({tmp}/t.tr)"),
    ("journal-is-the-scenario", ["run", "{tmp}/s.py", "--quiet", "--set", "jobs=5", "--journal", "{tmp}/s.py"],
     "--journal {tmp}/s.py is the scenario file {tmp}/s.py"),
    ("replay-trace-is-the-journal", ["replay", "{tmp}/J.json", "--trace", "{tmp}/J.json"],
     "--trace {tmp}/J.json is the journal {tmp}/J.json, which this command reads"),
    ("replay-diagram-is-the-journal", ["replay", "{tmp}/J.svg", "--diagram", "{tmp}/J.svg"],
     "--diagram {tmp}/J.svg is the journal {tmp}/J.svg"),
    ("replay-diagram-is-a-hard-link-of-the-journal", ["replay", "{tmp}/J.json", "--diagram", "{tmp}/J.md"],
     "--diagram {tmp}/J.md is the journal {tmp}/J.json"),
    ("replay-trace-is-the-scenario", ["replay", "{tmp}/J.json", "--trace", "{tmp}/s.json", "--scenario", "{tmp}/s.json"],
     "--trace {tmp}/s.json is the scenario file {tmp}/s.json"),
]


@pytest.fixture(scope="module")
def small_journal(tmp_path_factory):
    log = tmp_path_factory.mktemp("journal") / "j.fjl"
    assert main(["run", "default", "--quiet", "--set", "jobs=5", "--journal", str(log)]) == 0
    return log.read_bytes()


@pytest.mark.parametrize("argv, says", [c[1:] for c in SAME_FILE], ids=[c[0] for c in SAME_FILE])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(capsys, tmp_path, small_journal, argv, says):
    """Finding: `replay J --trace J` and `--diagram J` wrote over the journal they read (a name ending in .json,
    .md, .svg or .html); `run --faults P --journal P` wrote over the plan. Refused, comparing where paths
    lead (links, ``..``) and hard links, and every input is as it was."""
    import os

    (tmp_path / "sub").mkdir()
    (tmp_path / "o").mkdir()
    inputs = {"p.toml": PLAN_TEXT.encode(), "o/summary.json": b'{"fault": []}\n', "t.tr": b"0 1 1 1\n",
              "s.py": b"from fedemu.scenarios.default import PARAMS, build  # noqa: F401\n",
              "s.json": b"{}\n", "J.json": small_journal, "J.svg": small_journal}
    for name, data in inputs.items():
        (tmp_path / name).write_bytes(data)
    os.link(tmp_path / "p.toml", tmp_path / "hard.toml")
    os.link(tmp_path / "J.json", tmp_path / "J.md")
    code = main([a.format(tmp=tmp_path) for a in argv])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("fedemu: error: ") and err.count("\n") == 1, err
    assert says.format(tmp=tmp_path) in err and "writing there would destroy it" in err
    assert {name: (tmp_path / name).read_bytes() for name in inputs} == inputs
    assert not list(tmp_path.glob("**/*.tmp"))


@pytest.mark.parametrize("argv", [["run", "default", "--quiet", "--set", "jobs=5", "--out", "{tmp}/o"],
                                  ["compare", "default", "--schedulers", "megha", "--set", "jobs=5", "--out", "{tmp}/o"]])
def test_a_closed_stdout_is_one_line_and_exit_2_not_a_lost_summary(tmp_path, argv):
    """Finding: `fedemu run default >&-` exited 0 and the summary was lost."""
    import os

    proc = subprocess.run([sys.executable, "-m", "fedemu", *(a.format(tmp=tmp_path) for a in argv)],
                          stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1), timeout=120)
    assert proc.returncode == 2 and proc.stderr == (f"fedemu: error: standard output is closed, so what {argv[0]} "
                                                    "prints (the summary, the table) would be lost; redirect it to a "
                                                    "file, or to /dev/null to drop it\n")
    assert not (tmp_path / "o").exists()


def _tamper(path: Path, **changes) -> None:
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, **changes}))


@pytest.mark.parametrize("how, says", [
    ("jobs_completed", "says 999 of 5 jobs completed"),
    ("fewer_completed", "says 4 of 5 jobs completed, its jobs.csv 5 of 5"),
    ("seed", "says seed 7, the plan 1"),
    ("param", "says jobs=6, the plan jobs=5"),
    ("journal", "says digest"),
])
def test_a_compare_resume_runs_again_a_run_whose_summary_disagrees_with_the_plan(capsys, tmp_path, how, says):
    """Finding: a resumed compare reused a run whose summary.json said 999 of 20 jobs done. A reused summary is
    checked against the plan (scenario, scheduler, policy, seed, parameters), its job counts against its
    jobs.csv, and its digest against its journal where it kept one; a run that disagrees runs again."""
    out = tmp_path / "cmp"
    argv = ["compare", "default", "--schedulers", "megha", "--seeds", "1,2", "--jobs", "1", "--out", str(out),
            "--set", "jobs=5"]
    code, _, _ = _run(capsys, *argv)
    assert code == 0
    run = out / "megha-random-s1"
    honest = json.loads((run / "summary.json").read_text())
    if how == "jobs_completed":
        _tamper(run / "summary.json", jobs_completed=999)
    elif how == "fewer_completed":
        _tamper(run / "summary.json", jobs_completed=honest["jobs_completed"] - 1)
    elif how == "seed":
        _tamper(run / "summary.json", seed=7)
    elif how == "param":
        _tamper(run / "summary.json", params={**honest["params"], "jobs": 6})
    else:  # another run's journal beside it
        assert main(["run", "default", "--quiet", "--set", "jobs=5", "--seed", "3", "--journal",
                     str(run / "messages.log")]) == 0
    capsys.readouterr()
    code, _, err = _run(capsys, *argv)
    assert code == 0, err
    assert f"fedemu: note: run megha-random-s1 runs again: its summary.json {says}" in err, err
    assert "1 of 2 runs finished earlier are reused" in err
    assert json.loads((run / "summary.json").read_text())["digest"] == honest["digest"]
    assert not (run / "messages.log").exists()
    code, _, err = _run(capsys, *argv)  # and now it is reused, as is the other
    assert code == 0 and "2 of 2 runs finished earlier are reused" in err and "runs again" not in err
