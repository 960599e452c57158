"""The direct engine (``fabric.direct``) against trio's, the reference: every scheduler, fault-free and under
every kind of fault its search draws (crash, restart, partition, loss, slow links, both phases), with and
without service times, gives the same journal byte for byte, and the same summary."""

from __future__ import annotations

import gc

import pytest
from hypothesis import HealthCheck, given, settings

from fedemu.actors import registry
from fedemu.fabric.actor import Actor
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.kernel import ENGINES, Fabric
from fedemu.tools.run import runner
from fedemu.tools.search import strategies

from fabric_helpers import Note, Sink, per_actor, run_fabric
from test_fabric_properties import worlds

SMALL = {"jobs": 30, "gms": 2, "lms": 2, "workers_per_partition": 4, "load": 0.9}


def _both(tmp_path, run):
    """``run(engine, journal)`` on each engine: (digest, journal bytes, summary) of each, or the failure."""
    out = {}
    for engine in ENGINES:
        journal = tmp_path / f"{engine}.log"
        try:
            result = run(engine, journal)
        except runner.RunViolation as violation:  # a broken run must break the same way on both
            result = violation.result
        summary = {k: v for k, v in result.summary.items() if k != "wall_s"}
        out[engine] = (result.digest, journal.read_bytes(), summary)
    return out


@pytest.mark.parametrize("scheduler", sorted(registry.SCHEDULERS))
@pytest.mark.parametrize("cost_model", ["zero", "prototype"])
def test_every_scheduler_writes_the_same_journal_on_both_engines(tmp_path, scheduler, cost_model):
    got = _both(tmp_path, lambda engine, journal: runner.execute(
        "default", seed=3, overrides={**SMALL, "scheduler": scheduler, "cost_model": cost_model},
        journal_path=journal, engine=engine))
    assert got["direct"] == got["trio"]


@settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(strategies.examples("default", liveness=True))
def test_a_fault_search_example_writes_the_same_journal_on_both_engines(tmp_path_factory, example):
    tmp_path = tmp_path_factory.mktemp("engines")
    got = _both(tmp_path, lambda engine, journal: example.run(journal_path=journal, engine=engine))
    assert got["direct"] == got["trio"]


@given(worlds())
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_a_random_world_runs_the_same_handlers_on_both_engines(world):
    """The fabric's own property worlds (random networks, traffic, crashes, partitions, loss): the same
    digest, and every actor runs the same handlers at the same times in the same incarnations."""
    traces, digests = {}, {}
    for engine in ENGINES:
        traces[engine] = trace = []
        build = world.build(trace)

        def on(fabric, build=build, engine=engine):
            build(fabric)
            fabric.engine = engine

        digests[engine] = run_fabric(world.seed, on)[1]
    assert digests["direct"] == digests["trio"]
    assert per_actor(traces["direct"]) == per_actor(traces["trio"])


class Boom(Actor):
    def on_start(self):
        self.set_timer(5, Note("go"))

    def on_Note(self, msg, src):
        raise ZeroDivisionError(f"boom at {self.now}")


@pytest.mark.parametrize("engine", ENGINES)
def test_an_actor_that_raises_ends_the_run_with_its_error(engine):
    was = gc.isenabled()
    fabric = Fabric(1)
    fabric.add("boom", Boom)
    fabric.add("sink", lambda: Sink([]))
    fabric.engine = engine
    with pytest.raises(ZeroDivisionError, match="boom at 5"):
        fabric.run_blocking()
    assert fabric.now == 5 and gc.isenabled() == was
    # nothing of the direct engine stays (the trio engine sets its own hooks as its runs begin)
    assert (fabric._reschedule is None) == (engine == "direct")
    assert fabric._start_task is None


def test_an_unknown_engine_is_refused_by_name():
    fabric = Fabric(1)
    fabric.engine = "threads"
    with pytest.raises(ConfigError, match="unknown engine 'threads'; known: trio, direct"):
        fabric.run_blocking()
