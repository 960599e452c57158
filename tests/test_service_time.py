"""Single-server scheduler components under a cost model (fabric.service, fabric.costs), and the
allocation time's measured parts."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.fabric import costs
from fedemu.fabric.actor import Actor
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.journal import Journal
from fedemu.fabric.kernel import Fabric
from fedemu.fabric.network import Latency, Link, Network
from fedemu.tools.replay import replay
from fedemu.tools.run import runner

from fabric_helpers import Note, Probe

C = 3_000  # us of service per message: longer than a window (the 1000 us latency), so entries wait across windows


def model(message_us=C, units=None, role="srv"):
    units = {"item": 0} if units is None else units
    return costs.parse({"roles": {role: {"messages": {"*": message_us}, "units": units}}}, "test")


class Server(Actor):
    """A single server: logs (now, arrived, label) per message, answers each Note to its sender, charges
    ``Probe.n`` units, and sets a timer on a Note labelled 'tick'."""

    COST_ROLE, COST_UNITS = "srv", ("item",)

    def __init__(self, log: list) -> None:
        super().__init__()
        self.seen = log

    def on_Note(self, msg, src):
        self.seen.append((self.now, self.arrived, msg.label))
        if msg.label == "tick":
            self.set_timer(500, Note("fired"))
        elif src >= 0 and src != self.id and not msg.label.startswith("re:"):
            self.send(src, Note("re:" + msg.label))

    def on_Probe(self, msg, src):
        self.seen.append((self.now, self.arrived, f"probe {msg.n}"))
        self.charge("item", msg.n)


class Client(Actor):
    """Not a server (no role): logs when each answer arrives."""

    def __init__(self, log: list) -> None:
        super().__init__()
        self.seen = log

    def on_Note(self, msg, src):
        self.seen.append((self.now, msg.label))


def fabric_with(cost_model, path=None, latency=1000):
    fab = Fabric(seed=1, network=Network(Link(Latency.const(latency))), journal=Journal(path))
    fab.cost_model = cost_model
    served, answers = [], []
    fab.add("server", lambda: Server(served))
    fab.add("client", lambda: Client(answers))
    return fab, served, answers


def test_two_messages_arriving_together_are_served_one_after_the_other():
    fab, served, answers = fabric_with(model())
    fab.inject(0, Note("a"), at_us=100)
    fab.inject(0, Note("b"), at_us=100)
    fab.inject(0, Note("c"), at_us=4_000)  # arrives while b is still in service: waits for it
    fab.run_blocking()
    assert served == [(100, 100, "a"), (100 + C, 100, "b"), (100 + 2 * C, 4_000, "c")]
    assert fab.now == 100 + 2 * C  # the last event: c's service started (it sends nothing)


def test_answers_leave_at_the_end_of_each_service():
    fab, served, answers = fabric_with(model())
    fab.add("asker", lambda: Asker())
    fab.run_blocking()
    asker = fab.actor(fab.addr("asker"))
    # both questions arrive at 1000 us; the answers leave at 1000 + C and 1000 + 2C and take 1000 us
    assert asker.got == [(1000 + C + 1000, "re:q1"), (1000 + 2 * C + 1000, "re:q2")]


class Asker(Actor):
    def __init__(self):
        super().__init__()
        self.got = []

    def on_start(self):
        self.send(0, Note("q1"))
        self.send(0, Note("q2"))

    def on_Note(self, msg, src):
        self.got.append((self.now, msg.label))


def test_charged_units_lengthen_the_service():
    fab, served, _ = fabric_with(model(100, {"item": 2.5}))
    fab.inject(0, Probe(400), at_us=0)  # 100 + 400 * 2.5 = 1100 us
    fab.inject(0, Probe(0), at_us=0)
    fab.inject(0, Note("after"), at_us=0)
    fab.run_blocking()
    assert [start for start, _, _ in served] == [0, 1100, 1200]


def test_a_timer_fires_its_delay_after_the_service_started_and_waits_if_the_server_is_busy():
    fab, served, _ = fabric_with(model())
    fab.inject(0, Note("tick"), at_us=0)  # served 0..C; its timer is due at 500, inside that service
    fab.run_blocking()
    assert served == [(0, 0, "tick"), (C, 500, "fired")]


def test_an_actor_without_a_role_takes_no_time():
    fab, _, answers = fabric_with(model())
    fab.inject(1, Note("x"), at_us=10)
    fab.inject(1, Note("y"), at_us=10)
    fab.run_blocking()
    assert answers == [(10, "x"), (10, "y")]


def test_a_crash_takes_the_backlog_and_the_restarted_server_starts_idle():
    fab, served, _ = fabric_with(model())
    for label in "abcd":
        fab.inject(0, Note(label), at_us=0)
    fab.add_faults([(2 * C + 10, "crash", "server"), (2 * C + 20, "restart", "server")])
    fab.inject(0, Note("e"), at_us=2 * C + 30)
    fab.run_blocking()
    # a and b were served before the crash, c was in service (committed when it started), d was lost
    assert [label for _, _, label in served] == ["a", "b", "c", "e"]
    assert served[-1] == (2 * C + 30, 2 * C + 30, "e")


def test_an_unknown_unit_or_role_is_a_config_error():
    with pytest.raises(ConfigError, match="no cost for unit.*item"):
        model(units={}).for_class(Server)
    with pytest.raises(ConfigError, match="has no role 'srv'"):
        model(role="other").for_class(Server)


@pytest.mark.parametrize("value,match", [
    ("nope", "cost_model 'nope' is neither a known model nor a JSON file; known: zero, prototype"),
])
def test_a_bad_cost_model_is_one_line(value, match):
    with pytest.raises(ConfigError, match=match):
        runner.execute("default", overrides={"cost_model": value, "jobs": 2})


def test_a_model_file_with_a_bad_cost_is_refused(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"roles": {"gm": {"messages": {"*": -1}}}}))
    with pytest.raises(ConfigError, match=r"role 'gm', message '\*' is -1; expected microseconds"):
        runner.execute("default", overrides={"cost_model": str(path), "jobs": 2})
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read it as JSON"):
        runner.execute("default", overrides={"cost_model": str(path), "jobs": 2})


# ---- the served path with every cost 0 is today's path, record for record --------------------------------
def zero_file(tmp_path):
    """Every role of the default model, every cost 0: the served path, but no service time."""
    table = json.loads((costs_dir() / "prototype.json").read_text())
    for spec in table["roles"].values():
        spec["messages"] = {k: 0 for k in spec["messages"]}
        spec["units"] = {k: 0 for k in spec["units"]}
    path = tmp_path / "all-zero.json"
    path.write_text(json.dumps(table))
    return str(path)


def costs_dir():
    from fedemu.actors.plugin import COST_MODELS
    return COST_MODELS


@settings(max_examples=6, deadline=None)
@given(scheduler=st.sampled_from(["megha", "centralized", "pigeonc", "sparrow"]), seed=st.integers(0, 2**16),
       jitter=st.sampled_from([0.0, 0.2]))
def test_all_zero_costs_give_the_journal_of_no_model(tmp_path_factory, scheduler, seed, jitter):
    path = zero_file(tmp_path_factory.mktemp("zero"))
    over = {"scheduler": scheduler, "jobs": 30, "load": 1.0, "jitter_ms": jitter}
    plain = runner.execute("default", seed=seed, overrides={**over, "cost_model": "zero"})
    served = runner.execute("default", seed=seed, overrides={**over, "cost_model": path})
    assert served.digest == plain.digest
    assert served.summary["allocation_s"]["processing"] == 0


# ---- the default model ---------------------------------------------------------------------------------
def test_a_run_under_the_default_model_replays_and_its_parts_add_up(tmp_path):
    log = tmp_path / "run.fjl"
    result = runner.execute("default", seed=2, overrides={"jobs": 60, "load": 1.0}, journal_path=log)
    alloc = result.summary["allocation_s"]
    assert alloc["processing"] > 0 and alloc["framework_queueing"] > 0 and alloc["communication"] > 0
    assert alloc["parts_sum"] == pytest.approx(alloc["allocation"])
    tasks = [t for t in result.fabric.actor(0).recorder.tasks.values() if t.start_us >= 0]
    for t in tasks:  # every part is an interval between the task's own events: none is negative
        assert min(t.queue_us, t.processing_us, t.comm_us, t.worker_queue_us) >= 0, t
        assert t.queue_us + t.processing_us + t.comm_us + t.worker_queue_us == t.allocation_us, t
    lines = []
    assert replay.verify(log, out=lines.append) == 0, lines
    assert lines[0].startswith("identical")
    zero = runner.execute("default", seed=2, overrides={"jobs": 60, "load": 1.0, "cost_model": "zero"})
    assert zero.digest != result.digest and zero.summary["allocation_s"]["processing"] == 0


def test_a_centralized_scheduler_over_more_workers_takes_longer_per_task():
    """The search examines every worker of its one partition: twice the workers, twice the processing."""
    over = {"scheduler": "centralized", "workload": "syn_20", "jobs": 5, "constraints": False, "gms": 1, "lms": 1}
    small = runner.execute("default", overrides={**over, "workers": 2000}).summary["allocation_s"]
    large = runner.execute("default", overrides={**over, "workers": 4000}).summary["allocation_s"]
    assert large["processing"] > 1.5 * small["processing"] > 0
