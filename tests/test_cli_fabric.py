"""The `fedemu run` front door for the fabric: journals, parameters, --check-determinism."""

import textwrap

import pytest

from fedemu.tools.cli import main

from fabric_helpers import read_journal


def run_cli(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_run_writes_a_journal_whose_digest_the_summary_prints(capsys, tmp_path):
    path = tmp_path / "demo.fjl"
    code, out, err = run_cli(capsys, "run", "demo", "--journal", str(path), "--quiet", "--set", "duration_ms=200")
    assert code == 0 and err == ""
    header, records, footer = read_journal(path)
    assert footer["digest"] in out
    assert out.rstrip().endswith(f"journal: {path}")
    assert header["params"]["duration_ms"] == 200 and header["seed"] == 1
    assert f"messages        {footer['sent']}" in out or str(footer["sent"]) in out


def test_record_writes_messages_log_into_out(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "run", "demo", "--record", "--out", "o", "--quiet", "--set", "duration_ms=50")
    assert code == 0 and (tmp_path / "o" / "messages.log").exists()
    read_journal(tmp_path / "o" / "messages.log")


def test_unknown_parameter_is_named_with_the_known_ones(capsys):
    code, out, err = run_cli(capsys, "run", "demo", "--set", "nope=1")
    assert code == 2 and out == ""
    assert err == ("fedemu: error: unknown parameter 'nope'; known: duration_ms, faults, jitter_ms, latency_ms, "
                   "loss, peers, period_ms, ties\n")


@pytest.mark.parametrize("item, message", [
    ("peers", "--set 'peers' is not key=value"),
    ("=3", "--set '=3' is not key=value"),
    ("peers=x", "parameter 'peers' expects a number, got 'x'"),
    ("peers=2.5", "parameter 'peers' expects a whole number, got 2.5"),
    ("faults=1", "parameter 'faults' expects true or false, got 1"),
])
def test_malformed_parameters(capsys, item, message):
    code, out, err = run_cli(capsys, "run", "demo", "--set", item)
    assert (code, err) == (2, f"fedemu: error: {message}\n")


def test_unknown_scenario(capsys):
    code, _, err = run_cli(capsys, "run", "nosuch")
    assert code == 2 and err.startswith("fedemu: error: unknown scenario 'nosuch'; known: ") and "demo" in err


@pytest.mark.parametrize("name", ["default", "demo", "nosuch", "constraints", "__init__", "", ".", "..", "a/b",
                                  "../scenarios/default", "default.py", "demo\x00", "DEFAULT", " demo"])
def test_a_name_is_known_as_the_whole_list_says(name):
    """``is_known`` reads one file where ``known_scenarios`` reads them all: the same answer, whatever the
    name (modules that are not scenarios, paths, names no file can have)."""
    from fedemu.tools.run import runner

    assert runner.is_known(name) == (name in runner.known_scenarios())
    for known in runner.known_scenarios():
        assert runner.is_known(known)


def test_check_determinism_on_the_demo(capsys, tmp_path):
    main(["run", "demo", "--journal", str(tmp_path / "j"), "--quiet", "--set", "duration_ms=300"])
    capsys.readouterr()
    n = len(read_journal(tmp_path / "j")[1])
    code, out, err = run_cli(capsys, "run", "demo", "--check-determinism", "--set", "duration_ms=300")
    assert code == 0 and err == ""
    assert out == f"deterministic: two runs (PYTHONHASHSEED differing) gave {n} identical records\n"


@pytest.mark.parametrize("ours", ["random", "4294967295", "0"])
def test_check_determinism_under_any_hash_seed(tmp_path, ours):
    """Finding 9: PYTHONHASHSEED=random gave a ValueError traceback, and 4294967295 a second run that died
    of a fatal error (its seed 4294967295 + 12345 is out of Python's range)."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "fedemu", "run", "demo", "--check-determinism", "--set",
                           "duration_ms=50"], capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": ours})
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout.startswith("deterministic: "), proc.stderr


def test_the_second_run_gets_another_valid_hash_seed():
    from fedemu.tools.cli import HASH_SEED_MAX, _other_hash_seed

    for ours in (None, "", "random", "0", "1", "4294967295", "4294967296", "-3"):
        other = int(_other_hash_seed(ours))
        assert 0 <= other <= HASH_SEED_MAX and str(other) != (ours or "0")


NONDETERMINISTIC = textwrap.dedent('''
    import os
    from fedemu.fabric.actor import Actor
    from fedemu.fabric.messages import message

    PARAMS = {"n": 3}

    @message("fabtest.cli.pid")
    class Pid:
        pid: int

    class A(Actor):
        def on_start(self):
            self.set_timer(10, Pid(0))

        def on_Pid(self, msg, src):
            if src == self.id and self.id != 0:
                self.send(0, Pid(os.getpid() if self.id == 1 else 0))

    def build(fabric, params):
        for i in range(params["n"]):
            fabric.add(f"a{i}", A)
''')


def test_check_determinism_finds_the_first_divergence(capsys, tmp_path):
    """Actor a1 leaks its process id into a message: the second (subprocess) run differs exactly there."""
    scen = tmp_path / "leaky.py"
    scen.write_text(NONDETERMINISTIC)
    main(["run", str(scen), "--journal", str(tmp_path / "j"), "--quiet"])
    capsys.readouterr()
    _, records, _ = read_journal(tmp_path / "j")
    first = next(i for i, r in enumerate(records) if r[0] == 0 and r[2] == 1)
    code, out, _ = run_cli(capsys, "run", str(scen), "--check-determinism")
    assert code == 1
    lines = out.splitlines()
    assert lines[0] == f"journals diverge at record {first} (virtual time 0.000010s): records differ"
    assert "a1 -> a0" in lines[1] and "fabtest.cli.pid" in lines[1] and lines[1] != lines[2]


def test_check_determinism_reports_a_failing_second_run(capsys, tmp_path):
    scen = tmp_path / "fails_in_child.py"
    scen.write_text(NONDETERMINISTIC.replace("PARAMS = {\"n\": 3}", "import sys\nPARAMS = {\"n\": 3}\n"
                                             "if getattr(sys.modules['__main__'].__spec__, 'name', '') == 'fedemu.__main__'"
                                             ":\n    raise SystemExit('child refuses')"))
    code, out, err = run_cli(capsys, "run", str(scen), "--check-determinism")
    assert code == 1 and "child refuses" in err


def test_unwritable_output_paths_are_errors_not_tracebacks(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, out, err = run_cli(capsys, "run", "demo", "--quiet", "--out", str(blocker))
    assert code == 2 and err == f"fedemu: error: --out {blocker} is a file, not a folder\n"
    code, out, err = run_cli(capsys, "run", "demo", "--quiet", "--journal", str(tmp_path / "no" / "j.fjl"))
    assert code == 2 and err == f"fedemu: error: --journal {tmp_path / 'no' / 'j.fjl'}: the folder {tmp_path / 'no'} " \
        "does not exist\n"
    assert not list(tmp_path.glob("**/*.tmp"))


def test_malformed_numbers_on_the_command_line_are_usage_errors(capsys):
    for argv, why in ((["replay", "x.fjl", "--from", "abc"], "not a number of seconds"),
                      (["bench", "fabric", "--sizes", "a,b"], "not a list of actor counts"),
                      (["bench", "fabric", "--repeat", "0"], "expected a whole number from 1 to 100, got '0'")):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("fedemu: error: fedemu ") and why in err


def test_an_unknown_bench_case_is_named_before_anything_runs(capsys):
    code, out, err = run_cli(capsys, "bench", "megha", "--case", "yh1-1k,nope")
    assert code == 2 and out == ""
    assert err == "fedemu: error: unknown bench case 'nope'; known: goog, syn1000, yh1, yh1-1k\n"

    code, out, err = run_cli(capsys, "bench", "megha", "--case", " , ")
    assert code == 2 and out == ""
    assert err == "fedemu: error: --case names no bench case; known: goog, syn1000, yh1, yh1-1k\n"

    code, out, err = run_cli(capsys, "bench", "schedulers", "--case", "yh1-1k")
    assert code == 2 and out == ""
    assert err == "fedemu: error: unknown bench case 'yh1-1k'; known: centralized, megha, pigeon, pigeonc, sparrow\n"


def test_every_scheduler_bench_case_names_a_known_scheduler_and_a_valid_shape():
    """Each case's shape and keys run as given (on two syn_50 jobs instead of the trace)."""
    from fedemu.tools.bench.bench_megha import SCHEDULERS
    from fedemu.tools.run.runner import execute

    for case, (_, overrides) in SCHEDULERS.items():
        params = {k: v for k, v in overrides.items() if k != "trace"}
        assert params["scheduler"] == case
        r = execute("default", seed=1, overrides=dict(params, workload="syn_50", jobs=2))
        assert r.summary["jobs"] == 2, case


def test_a_run_that_keeps_no_fabric_lets_it_go_before_its_results(tmp_path):
    """``keep_fabric=False`` (the command line and the API): the actors, their tasks and the queue are freed
    before the results are written (a run's peak memory), with the same summary and files."""
    import json
    import weakref

    from fedemu.tools.run.runner import execute

    def run(keep: bool):
        seen = []

        def progress(fabric, run):
            seen.append(weakref.ref(fabric))

        progress.every = 1
        out = tmp_path / f"keep-{keep}"
        r = execute("default", seed=2, overrides={"workload": "syn_50", "jobs": 20}, out_dir=out, plots=False,
                    progress=progress, keep_fabric=keep)
        return r, seen[0], out

    kept, kept_ref, kept_out = run(True)
    freed, freed_ref, freed_out = run(False)
    assert kept.fabric is not None and kept_ref() is kept.fabric
    assert freed.fabric is None and freed_ref() is None  # nothing held it: the collection freed it
    assert freed.recorder is not None and freed.digest == kept.digest
    drop = {"wall_s"}
    assert {k: v for k, v in freed.summary.items() if k not in drop} == \
        {k: v for k, v in kept.summary.items() if k not in drop}
    for name in ("tasks.csv", "jobs.csv"):
        assert (freed_out / name).read_bytes() == (kept_out / name).read_bytes()
    assert json.loads((freed_out / "summary.json").read_text())["digest"] == kept.digest


def test_the_progress_bar_shows_the_workloads_total_from_the_start(monkeypatch):
    """Before any job is submitted the bar already says jobs 0/500 (the run's total_jobs), not 0/0."""
    import io
    import types

    from fedemu.tools.run import progress

    updates = []

    class FakeProgress:
        def __init__(self, *columns, **kw):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def add_task(self, *a, **kw):
            return 0

        def update(self, task, **kw):
            updates.append(kw)

    tty = io.StringIO()
    tty.isatty = lambda: True
    monkeypatch.setattr(progress, "Progress", FakeProgress)
    monkeypatch.setattr(progress.sys, "stderr", tty)
    run = types.SimpleNamespace(progress=lambda: (0, 0), total_jobs=500)
    fabric = types.SimpleNamespace(now=1_500_000, events=42)
    with progress.progress_bar(enabled=True) as update:
        update(fabric, run)
    assert updates[-1]["total"] == 500 and "jobs 0/500" in updates[-1]["status"]
    with progress.progress_bar(enabled=False) as update:
        assert update is None


def test_the_collector_is_paused_through_the_end_of_run_work_and_restored_after(monkeypatch):
    """``execute`` keeps the cyclic collector off from the build through the end-of-run checks and
    metrics (not only for the fabric's run), and on again afterwards, whether the run ends well or not."""
    import gc

    from fedemu.tools.run import runner

    seen = []
    real = runner.summarize_run

    def summarize(recorder):
        seen.append(gc.isenabled())
        return real(recorder)

    monkeypatch.setattr(runner, "summarize_run", summarize)
    overrides = {"workload": "syn_50", "jobs": 2}
    runner.execute("default", seed=1, overrides=overrides)
    assert seen == [False] and gc.isenabled() and gc.get_freeze_count() == 0

    def broken(recorder):
        raise RuntimeError("metrics failed")

    monkeypatch.setattr(runner, "summarize_run", broken)
    with pytest.raises(RuntimeError, match="metrics failed"):
        runner.execute("default", seed=1, overrides=overrides)
    assert gc.isenabled() and gc.get_freeze_count() == 0
