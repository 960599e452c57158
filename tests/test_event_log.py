"""The protocol event log (``fedemu run --log``): what each scheduler logs agrees with its counters,
lines are in (virtual time, actor index) order whatever order trio ran the actors in, the file is
byte-identical across runs and hash seeds, logging never changes the digest, and a run without a
log builds no logger at all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.actors import registry
from fedemu.actors.common.events import JOB_UNSCHEDULABLE
from fedemu.actors.megha.events import LAUNCH_INVALID, LAUNCH_REQUEUED, REPARTITION
from fedemu.actors.pigeon.events import RESERVED_PLACED, TASK_PLACED
from fedemu.actors.sparrow.events import LATE_BIND_CANCEL
from fedemu.fabric import log
from fedemu.fabric.actor import Actor
from fedemu.fabric.errors import ConfigError, FedemuError
from fedemu.tools.run import runner
from fedemu.tools.cli import main

SMALL = {"jobs": 120}
SCHEDULERS = tuple(registry.SCHEDULERS)  # every registered scheduler


def _run(tmp_path, scheduler: str, level: str = "debug", **extra):
    path = tmp_path / f"{scheduler}-{level}.jsonl"
    result = runner.execute("default", seed=3, overrides={**SMALL, "scheduler": scheduler, **extra},
                            log_path=path, log_level=level)
    return result, path


def _records(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _count(records, event: str) -> int:
    return sum(1 for r in records if r["event"] == event)


# ---- the event table ----------------------------------------------------------------------
def test_every_event_is_in_the_table_once_with_a_known_level():
    """Every Event an actors module defines is in the registry's table (the common ones and each plug-in's
    ``events``), once by name, with a known level and a meaning."""
    import importlib
    import pkgutil

    from fedemu import actors

    table = registry.events()
    names = [e.name for e in table]
    assert len(names) == len(set(names))
    defined = set()
    for info in pkgutil.walk_packages(actors.__path__, "fedemu.actors."):
        module = importlib.import_module(info.name)
        defined |= {v for v in vars(module).values() if isinstance(v, log.Event)}
    assert defined == set(table)
    assert all(e.level in log.LEVELS and e.meaning for e in table)


# ---- what the schedulers log ---------------------------------------------------------------
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_lines_are_ordered_json_with_actor_and_virtual_time_and_the_digest_is_unchanged(tmp_path, scheduler):
    plain = runner.execute("default", seed=3, overrides={**SMALL, "scheduler": scheduler})
    logged, path = _run(tmp_path, scheduler)
    assert logged.digest == plain.digest  # logging never sends a message
    records = _records(path)
    assert records, "every scheduler rejects the default workload's unschedulable jobs at least"
    index = {name: i for i, name in enumerate(logged.fabric.names)}
    level_of = {e.name: e.level for e in registry.events()}
    for r in records:
        assert list(r)[:5] == ["vtime_us", "vtime_s", "level", "actor", "event"]
        assert r["level"] == level_of[r["event"]] and r["actor"] in index
        assert isinstance(r["vtime_us"], int) and r["vtime_s"] == r["vtime_us"] / 1e6
        assert 0 <= r["vtime_us"] <= logged.fabric.now
        assert not {"timestamp", "time", "ts"} & set(r)
    keys = [(r["vtime_us"], index[r["actor"]]) for r in records]
    assert keys == sorted(keys)
    assert _count(records, JOB_UNSCHEDULABLE.name) == logged.summary["unschedulable"]
    assert sum(len(r["tasks"]) for r in records if r["event"] == JOB_UNSCHEDULABLE.name) == \
        logged.summary["counters"].get("unschedulable_tasks", 0)


def test_megha_logs_each_invalid_launch_repartition_and_requeue(tmp_path):
    result, path = _run(tmp_path, "megha")
    records, counters = _records(path), result.summary["counters"]
    assert _count(records, LAUNCH_INVALID.name) == counters["invalid_internal"] + counters["invalid_external"] > 0
    assert sum(r["external"] for r in records if r["event"] == LAUNCH_INVALID.name) == counters["invalid_external"]
    assert _count(records, REPARTITION.name) == counters["repartitions"] > 0
    assert _count(records, LAUNCH_REQUEUED.name) == result.summary["messages_by_kind"]["megha.launch_failed"]
    for r in records:
        if r["event"] == LAUNCH_INVALID.name:  # the worker really lacked the demand
            assert any(f < d for f, d in zip(r["free"], r["demand"]))
        if r["event"] == REPARTITION.name:
            assert r["gm"] != r["home"]


def test_pigeon_logs_every_placement_and_each_reserved_one(tmp_path):
    result, path = _run(tmp_path, "pigeon", load=1.5)
    records, counters = _records(path), result.summary["counters"]
    placed = [r for r in records if r["event"] == TASK_PLACED.name]
    assert len(placed) == counters.get("wfq_high", 0) + counters.get("wfq_low", 0)
    assert sum(r["queue"] == "high" for r in placed) == counters.get("wfq_high", 0)
    reserved = [r for r in records if r["event"] == RESERVED_PLACED.name]
    assert reserved, "an overloaded Pigeon cluster puts short tasks on reserved workers"
    # each reserved placement is also a placement, logged just before it by the same master
    for r in reserved:
        i = records.index(r)
        assert {k: v for k, v in records[i - 1].items() if k not in ("event", "level", "queue")} == \
            {k: v for k, v in r.items() if k not in ("event", "level")}


def test_pigeonc_has_no_reserved_workers(tmp_path):
    result, path = _run(tmp_path, "pigeonc", load=1.5)
    assert _count(_records(path), RESERVED_PLACED.name) == 0
    assert _count(_records(path), TASK_PLACED.name) == result.summary["counters"]["wfq_high"]


def test_sparrow_logs_each_late_binding_cancel(tmp_path):
    result, path = _run(tmp_path, "sparrow")
    assert _count(_records(path), LATE_BIND_CANCEL.name) == result.summary["counters"]["cancels"] > 0


def test_a_level_keeps_exactly_the_debug_lines_at_or_above_it(tmp_path):
    _, debug = _run(tmp_path, "megha", "debug")
    lines = debug.read_text().splitlines()
    for level in ("info", "warning"):
        _, path = _run(tmp_path, "megha", level)
        floor = log.LEVELS[level]
        assert path.read_text().splitlines() == [x for x in lines if log.LEVELS[json.loads(x)["level"]] >= floor]


# ---- determinism ---------------------------------------------------------------------------
def _cli_log(tmp_path, name: str, hashseed: str, scheduler: str) -> bytes:
    path = tmp_path / name
    env = dict(os.environ, PYTHONHASHSEED=hashseed)
    subprocess.run([sys.executable, "-m", "fedemu", "run", "default", "--quiet", "--set", "jobs=150", "--set",
                    f"scheduler={scheduler}", "--seed", "5", "--log", str(path), "--log-level", "debug"],
                   env=env, check=True, capture_output=True)
    return path.read_bytes()


@pytest.mark.parametrize("scheduler", ("megha", "sparrow"))
def test_the_log_file_is_byte_identical_across_runs_and_hash_seeds(tmp_path, scheduler):
    first = _cli_log(tmp_path, "a.jsonl", "0", scheduler)
    assert first
    assert _cli_log(tmp_path, "b.jsonl", "0", scheduler) == first
    assert _cli_log(tmp_path, "c.jsonl", "4242", scheduler) == first


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_lines_come_out_sorted_whatever_order_the_actors_ran_in(data):
    """A brute-force check of the buffer: windows of actors that each log at non-decreasing times
    inside the window, interleaved in an arbitrary (trio-like) order, with a small flush batch."""
    fabric = types.SimpleNamespace(now=0, event_log=None)
    written: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "e.jsonl")
        events = log.EventLog(path, "debug", on_line=written.append, batch=data.draw(st.integers(1, 6)))
        events.attach(fabric)
        expected = []
        end = 0
        for _ in range(data.draw(st.integers(1, 5))):
            start = end + data.draw(st.integers(0, 3))
            end = start + data.draw(st.integers(1, 4))
            fabric.now = start  # the kernel's window [start, end)
            queues = {}
            for aid in data.draw(st.lists(st.integers(0, 4), unique=True, max_size=4)):
                times = sorted(data.draw(st.lists(st.integers(start, end - 1), min_size=1, max_size=5)))
                queues[aid] = [(t, aid, k) for k, t in enumerate(times)]
                expected += queues[aid]
            while queues:  # trio runs the woken actors in some order, each its records in its own order
                aid = data.draw(st.sampled_from(sorted(queues)))
                t, _, k = queues[aid].pop(0)
                events.logger(aid, f"a{aid}", t).info(TASK_PLACED.name, k=k)
                if not queues[aid]:
                    del queues[aid]
        events.close()
        with open(path, encoding="utf-8") as f:
            assert f.read().splitlines() == written
    assert fabric.event_log is None
    got = [(r["vtime_us"], int(r["actor"][1:]), r["k"]) for r in map(json.loads, written)]
    assert got == sorted(expected)


# ---- zero cost when off ----------------------------------------------------------------------
@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_a_run_without_a_log_never_builds_a_logger_or_calls_emit(monkeypatch, scheduler):
    class Untouchable:
        def __getitem__(self, key):
            raise AssertionError(f"emit({key!r}) called with logging off")

    def no_logger(self):
        raise AssertionError(f"{self.name} built a logger with logging off")

    monkeypatch.setattr(log, "LEVELS", Untouchable())
    monkeypatch.setattr(Actor, "log", property(no_logger))
    result = runner.execute("default", seed=3, overrides={**SMALL, "scheduler": scheduler, "load": 1.5})
    assert result.summary["unschedulable"] > 0  # the guarded call sites were reached


def test_emit_without_an_event_log_is_silent(capsys):
    actor = types.SimpleNamespace(fabric=types.SimpleNamespace(event_log=None))
    log.emit(actor, JOB_UNSCHEDULABLE, job=1, tasks=(0,))
    assert capsys.readouterr() == ("", "")


def test_a_field_that_is_not_plain_json_is_refused(tmp_path):
    events = log.EventLog(tmp_path / "x.jsonl")
    events.attach(types.SimpleNamespace(now=0, event_log=None))
    with pytest.raises(TypeError, match="not plain JSON"):
        events.logger(0, "a", 0).info(TASK_PLACED.name, worker=object())
    events.abort()
    assert list(tmp_path.iterdir()) == []


# ---- the command line ------------------------------------------------------------------------
def test_cli_writes_the_log_and_names_it(tmp_path, capsys):
    path = tmp_path / "events.jsonl"
    assert main(["run", "default", "--quiet", "--set", "jobs=30", "--log", str(path)]) == 0
    assert f"event log: {path}" in capsys.readouterr().out
    assert {r["level"] for r in _records(path)} <= {"info", "warning"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl"]


@pytest.mark.parametrize("argv, says", [
    (["--log-level", "debug"], "--log-level debug filters the event log: add --log FILE"),
    (["--log", "{tmp}/no/such/dir/e.jsonl"], "--log {tmp}/no/such/dir/e.jsonl: the folder {tmp}/no/such/dir does not exist"),
    (["--log", "{tmp}/e.jsonl", "--log-level", "loud"], "invalid choice: 'loud'"),
])
def test_bad_log_options_are_one_line_errors(tmp_path, capsys, argv, says):
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main(["run", "default", "--quiet", "--set", "jobs=10", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedemu: error:")
    assert says.format(tmp=tmp_path) in err
    assert not list(tmp_path.rglob("*.jsonl*"))


def test_an_unknown_level_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="known levels are debug, info, warning"):
        log.EventLog(tmp_path / "e.jsonl", "loud")


def test_bad_input_after_the_log_opened_leaves_no_file(tmp_path):
    path = tmp_path / "e.jsonl"
    with pytest.raises(FedemuError, match="no such trace file"):  # found by the scenario's build
        runner.execute("default", overrides={"jobs": 10, "workload": "trace", "trace": str(tmp_path / "none.tr")},
                       log_path=path)
    assert list(tmp_path.iterdir()) == []


CRASHING = '''
from fedemu.fabric.actor import Actor
from fedemu.actors.common.events import JOB_UNSCHEDULABLE
from fedemu.fabric.log import emit
from fedemu.fabric.messages import message

PARAMS = {}


@message("test.event_log.boom")
class Boom:
    pass


class Faulty(Actor):
    def on_start(self):
        if self.fabric.event_log is not None:
            emit(self, JOB_UNSCHEDULABLE, job=7, tasks=(0,))
        self.set_timer(5, Boom())

    def on_Boom(self, msg, src):
        raise RuntimeError("a bug in an actor")


def build(fabric, params):
    fabric.add("faulty", Faulty)
'''


def test_a_run_that_fails_keeps_the_events_logged_before_the_failure(tmp_path):
    scenario = tmp_path / "crashing.py"
    scenario.write_text(CRASHING)
    path = tmp_path / "e.jsonl"
    with pytest.raises(RuntimeError, match="a bug in an actor"):
        runner.execute(str(scenario), log_path=path)
    assert path.read_text() == ('{"vtime_us": 0, "vtime_s": 0.0, "level": "warning", "actor": "faulty", '
                                '"event": "job_unschedulable", "job": 7, "tasks": [0]}\n')
    assert sorted(p.name for p in tmp_path.iterdir()) == ["crashing.py", "e.jsonl"]


def test_check_determinism_compares_the_event_logs_too(tmp_path, capsys):
    path = tmp_path / "e.jsonl"
    assert main(["run", "default", "--quiet", "--set", "jobs=40", "--check-determinism", "--log", str(path),
                 "--log-level", "debug"]) == 0
    lines = len(path.read_text().splitlines())
    assert f"event log: the same {lines:,} lines in both runs" in capsys.readouterr().out


@pytest.mark.parametrize("second, says", [
    ("a\nB\nc\n", "event logs differ at line 2:\n  first:  b\n  second: B"),
    ("a\nb\n", "event logs differ: 3 lines in the first run, 2 in the second"),
])
def test_differing_event_logs_are_reported_at_the_first_difference(tmp_path, capsys, second, says):
    from fedemu.tools.cli import _compare_event_logs

    (tmp_path / "1").write_text("a\nb\nc\n")
    (tmp_path / "2").write_text(second)
    assert _compare_event_logs(str(tmp_path / "1"), str(tmp_path / "2")) == 1
    assert says in capsys.readouterr().out
