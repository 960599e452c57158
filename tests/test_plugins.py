"""Schedulers as plug-ins: the registry, what each declares (keys, counters, traits), keys that do not
apply, --help-params, a scheduler added without touching the scenario, name-based addressing, and a
run under ``python -O``."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedemu.actors import registry
from fedemu.actors.megha import plugin as megha
from fedemu.actors.plugin import Scheduler
from fedemu.fabric.errors import ConfigError
from fedemu.scenarios import default, federation
from fedemu.tools.cli import main
from fedemu.tools.run.params import describe, resolve_scenario
from fedemu.tools.run.runner import execute
from scheduler_helpers import ROOT, rebuilt, recorder_of

NAMES = tuple(registry.SCHEDULERS)  # the tests below cover whatever the registry holds


def test_the_registry_lists_every_scheduler_once():
    assert {"centralized", "megha", "pigeon", "pigeonc", "sparrow"} <= set(NAMES)
    assert all(s.name == name for name, s in registry.SCHEDULERS.items())
    with pytest.raises(ConfigError, match="unknown scheduler 'yarn'; known: centralized, (.+, )?megha, pigeon"):
        registry.get("yarn")


@pytest.mark.parametrize("name", NAMES)
def test_declared_parameters_have_help_and_valid_defaults(name):
    scheduler = registry.SCHEDULERS[name]
    for p in federation.COMMON + scheduler.params:
        assert p.help, p.name
        p.check(p.default)  # every default passes its own rule
        assert federation.PARAMS[p.name] == p.default
    assert not set(scheduler.param_names) & {p.name for p in federation.COMMON}


@pytest.mark.parametrize("name", NAMES)
def test_a_run_keeps_only_declared_counters_and_parameters(name):
    r = execute("default", seed=2, overrides={"scheduler": name, "jobs": 60})
    declared = {c for c, _ in registry.SCHEDULERS[name].counters}
    assert set(r.summary["counters"]) <= declared
    scheduler = registry.SCHEDULERS[name]
    applies = {p.name for p in federation.COMMON} | set(scheduler.param_names)
    if not scheduler.takes_policy:
        applies -= {"policy", *(p.name for p in federation.POLICY_OPTIONS)}
    assert set(r.summary["params"]) == applies  # the journal header holds these same keys


@pytest.mark.parametrize("name", NAMES)
def test_every_other_schedulers_key_is_refused(name, capsys):
    mine = set(registry.SCHEDULERS[name].param_names)
    others = {p.name: p.default for s in registry.SCHEDULERS.values() for p in s.params if p.name not in mine}
    assert others
    for key, value in others.items():
        with pytest.raises(ConfigError, match=f"parameter '{key}' does not apply to scheduler '{name}'"):
            resolve_scenario(default, {"scheduler": name, key: value})
        assert main(["run", "default", "--quiet", "--set", f"scheduler={name}", "--set", f"{key}={value}"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("fedemu: error: parameter")


def test_policy_applies_only_to_schedulers_that_take_one():
    free = [n for n in NAMES if not registry.SCHEDULERS[n].takes_policy]
    assert "sparrow" in free and "megha" not in free
    for name in free:
        with pytest.raises(ConfigError, match=f"'policy' does not apply to scheduler '{name}'"):
            resolve_scenario(default, {"scheduler": name, "policy": "random"})
        assert "policy" not in resolve_scenario(default, {"scheduler": name})


@pytest.mark.parametrize("name", NAMES)
def test_help_params_lists_exactly_the_keys_that_apply(name, capsys):
    assert main(["run", "--help-params", "--set", f"scheduler={name}"]) == 0
    out = capsys.readouterr().out
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("  ")}
    assert listed == set(resolve_scenario(default, {"scheduler": name}))
    assert f"scheduler {name} (key, default, meaning):" in out
    for p in registry.SCHEDULERS[name].params:
        assert p.help in out


def test_help_params_of_a_scenario_without_declarations(capsys):
    assert main(["run", "demo", "--help-params"]) == 0
    assert "peers" in capsys.readouterr().out


def test_a_scheduler_added_through_the_registry_alone(monkeypatch):
    """A new plug-in (Megha with one GM over the same clusters) runs by name with no change elsewhere."""
    one_gm = Scheduler("one-gm", "Megha with a single GM", lambda ctx: megha.add_actors(ctx, ctx.cluster, 1),
                       config=megha.MeghaParams, counters=megha.COUNTERS)
    monkeypatch.setitem(registry.SCHEDULERS, "one-gm", one_gm)
    r = execute("default", overrides={"scheduler": "one-gm", "jobs": 40})
    assert r.fabric.names[:5] == ["gm-0", "lm-0", "lm-1", "lm-2", "lm-3"]
    assert r.summary["jobs_completed"] + r.summary["unschedulable"] == 40
    with pytest.raises(ConfigError, match="'probe_ratio' does not apply to scheduler 'one-gm'"):
        execute("default", overrides={"scheduler": "one-gm", "probe_ratio": 3})


def reversed_workers(build):
    """A plug-in that builds like ``build`` but adds the worker actors in reverse order (other actor ids)."""
    def wrapped(ctx):
        held = []

        def add(name, factory):
            return held.append((name, factory)) if name.startswith("w-") else ctx.fabric.add(name, factory)

        names = build(attrs.evolve(ctx, fabric=SimpleNamespace(seed=ctx.fabric.seed, add=add)))
        for name, factory in reversed(held):
            ctx.fabric.add(name, factory)
        return names
    return wrapped


@pytest.mark.parametrize("name", NAMES)
def test_actors_address_each_other_by_name_not_by_id(name, monkeypatch):
    """Workers renumbered (added in reverse order): every message still reaches the actor it names, so the
    run completes, every task runs once, and constraint-aware schedulers place only on machines that
    satisfy the task. (Id arithmetic would send launches and probes to the wrong machines, or refuse the
    ids.) Placements may differ: ids still order some choices (and, under ties=sender, messages arriving at
    the same microsecond)."""
    base = registry.SCHEDULERS[name]
    monkeypatch.setitem(registry.SCHEDULERS, "renumbered", attrs.evolve(base, name="renumbered",
                                                                          build=reversed_workers(base.build)))
    overrides = {"jobs": 80, "load": 0.9}
    a = execute("default", seed=3, overrides={"scheduler": name, **overrides})
    b = execute("default", seed=3, overrides={"scheduler": "renumbered", **overrides})
    assert a.fabric.addr("w-0") != b.fabric.addr("w-0")
    assert sorted(a.fabric.names) == sorted(b.fabric.names)
    for key in ("jobs_completed", "unschedulable", "tasks_completed"):
        assert a.summary[key] == b.summary[key]
    if base.constraint_aware:
        cluster, jobs = rebuilt({"scheduler": name, **overrides}, 3)
        provides = {w.worker_id: set(w.constraints) for w in cluster.workers()}
        placed = [(k, t.worker) for k, t in recorder_of(b.fabric).tasks.items() if t.worker >= 0]
        assert len(placed) == b.summary["tasks_completed"]
        for (job_id, index), worker in placed:
            assert set(jobs[job_id].constraints[index]) <= provides[worker]


def test_python_dash_o_runs_megha():
    """No side effects inside assert: under -O the default scenario builds every actor and runs the same."""
    proc = subprocess.run([sys.executable, "-O", "-m", "fedemu", "run", "default", "--quiet", "--set", "jobs=50"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    digest = execute("default", overrides={"jobs": 50}).digest
    assert digest in proc.stdout.split()  # the same journal as without -O


_ACTOR_MODULES = """
import sys
from fedemu.fabric.actor import Actor
{run}
found = sorted({{cls.__module__ for m in list(sys.modules.values()) for cls in vars(m).values()
                 if isinstance(cls, type) and issubclass(cls, Actor) and cls.__module__.startswith("fedemu.actors.")}})
print(" ".join(found))
"""


@pytest.mark.parametrize("name", [None, "pigeon", "sparrow"])
def test_a_run_imports_only_its_own_schedulers_actors(name):
    """The registry holds every plug-in's declarations, and no actor class (a plug-in imports its actors inside its
    build and checks, ``actors.plugin.deferred``); a run loads its own scheduler's (and the common ones)."""
    run = "import fedemu.actors.registry" if name is None else \
        f"from fedemu.tools.run.runner import execute; execute('default', overrides={{'scheduler': {name!r}, 'jobs': 2}})"
    proc = subprocess.run([sys.executable, "-c", _ACTOR_MODULES.format(run=run)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    modules = proc.stdout.split()
    if name is None:
        assert modules == []
    else:
        assert modules and all(m.startswith((f"fedemu.actors.{name}.", "fedemu.actors.common.")) for m in modules)


def test_a_kind_of_a_scheduler_not_run_here_is_read_after_importing_the_actors():
    """A journal of any scheduler reads in any process: the first unknown kind imports every actor module once
    (``registry.import_actors``); a kind no module defines is still an error."""
    code = """
import sys
from fedemu.actors import registry  # (sets messages.import_kinds)
from fedemu.fabric import messages
before = "fedemu.actors.megha.messages" in sys.modules
msg = messages.decode("megha.launch_ok", (52, 1, 0, (), ()))
print(before, type(msg).__module__, msg.job_id, "fedemu.actors.sparrow.node" in sys.modules)
try:
    messages.decode("no.such.kind", ())
except Exception as e:
    print(type(e).__name__)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "fedemu.actors.megha.messages", "52", "True", "JournalError"]


def test_help_params_text_names_default_and_rule():
    text = describe(default, {"scheduler": "pigeon"})
    assert "fqw" in text and "an integer >= 1, inf, or 0 for the default" in text
    assert "heartbeat_s" not in text and "probe_ratio" not in text


every_key = sorted(federation.PARAMS)


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(NAMES), keys=st.lists(st.sampled_from(every_key), unique=True, max_size=6))
def test_resolve_accepts_exactly_the_keys_that_apply(name, keys):
    """Against the plug-in's own declaration: any set of keys (at their defaults) either resolves, when
    every key applies, or is refused naming a key that does not."""
    scheduler = registry.SCHEDULERS[name]
    applies = {p.name for p in federation.COMMON} | set(scheduler.param_names)
    if not scheduler.takes_policy:
        applies -= {"policy", *(p.name for p in federation.POLICY_OPTIONS)}
    overrides = {k: federation.PARAMS[k] for k in keys if k != "scheduler"}
    bad = [k for k in overrides if k not in applies]
    if bad:
        with pytest.raises(ConfigError) as err:
            resolve_scenario(default, {**overrides, "scheduler": name})
        assert any(f"parameter '{k}' does not apply to scheduler '{name}'" in str(err.value) for k in bad)
    else:
        params = resolve_scenario(default, {**overrides, "scheduler": name})
        assert set(params) == applies
