"""Parking without trio's internal trap: the public fallback of ``fabric/parking.py`` must give the
same runs, to the digest, as the reused trap the fabric takes by default."""

import json
import subprocess
import sys
import tempfile

import trio

from fedemu.fabric import parking

from fabric_helpers import per_actor, run_fabric
from test_fabric_properties import FIXED_WORLD


def test_this_trio_has_the_trap_the_fast_park_uses():
    """The version bound in pyproject.toml covers trios where this holds; if it fails, the bound is wrong."""
    parking.use_trio()  # (what a trio run does as it begins)
    assert parking.PARK is not None and parking.PARK is not parking.UNARMED and parking.wait is not parking.wait_public


def test_a_run_on_the_direct_engine_does_not_import_trio():
    """trio is the reference engine's; the direct engine steps the same tasks without it (``parking.use_trio``)."""
    code = ("import sys; from fedemu.tools.run.runner import execute; "
            "r = execute('default', overrides={'jobs': 3}, engine='direct'); "
            "print('trio' in sys.modules, r.digest)")
    direct = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert direct.returncode == 0, direct.stderr
    imported, digest = direct.stdout.split()
    assert imported == "False"
    trio_run = subprocess.run([sys.executable, "-c", code.replace("'direct'", "'trio'")], capture_output=True,
                              text=True, timeout=120)
    assert trio_run.stdout.split() == ["True", digest]


def test_the_public_fallback_gives_the_same_run(monkeypatch):
    """The fixed property world (faults, crashes and restarts included) through both ways to park."""
    trace_trap, trace_public = [], []
    _, digest = run_fabric(FIXED_WORLD.seed, FIXED_WORLD.build(trace_trap))
    calls = []

    def counted():
        calls.append(1)
        return parking.wait_public()

    monkeypatch.setattr(parking, "PARK", None)
    monkeypatch.setattr(parking, "wait", counted)
    _, digest_public = run_fabric(FIXED_WORLD.seed, FIXED_WORLD.build(trace_public))
    assert digest_public == digest
    assert per_actor(trace_public) == per_actor(trace_trap)
    assert len(calls) > 20  # the actors really parked through the public call


def test_the_public_reschedule_gives_the_same_run(monkeypatch):
    """Waking through trio's public ``reschedule`` (the fallback of ``parking.trio_reschedule``) gives the
    run that waking through the run's own ``Runner.reschedule`` gives."""

    async def which():
        return parking.trio_reschedule()

    assert trio.run(which) is not trio.lowlevel.reschedule  # this trio has its runner where the fast wake finds it
    trace_runner, trace_public = [], []
    _, digest = run_fabric(FIXED_WORLD.seed, FIXED_WORLD.build(trace_runner))
    calls = []

    def counted(task, value=None):
        calls.append(1)
        return trio.lowlevel.reschedule(task, value) if value is not None else trio.lowlevel.reschedule(task)

    monkeypatch.setattr(parking, "trio_reschedule", lambda: counted)
    _, digest_public = run_fabric(FIXED_WORLD.seed, FIXED_WORLD.build(trace_public))
    assert digest_public == digest and per_actor(trace_public) == per_actor(trace_runner)
    assert len(calls) > 20  # the actors really were woken through the public call


SCRIPT = """
import contextlib, io, json, sys
from fedemu.fabric import parking
from fedemu.tools.cli import main

def digest(args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["run", *args, "--quiet", "--out", sys.argv[1]])
    assert status == 0, out.getvalue()
    return next(line.split()[1] for line in out.getvalue().splitlines() if line.split()[:1] == ["digest"])

runs = [["demo"], ["default", "--set", "jobs=30"]]
trap = [digest(args) for args in runs]
calls = []
def counted():
    calls.append(1)
    return parking.wait_public()
parking.PARK, parking.wait = None, counted
public = [digest(args) for args in runs]
print(json.dumps({"trap": trap, "public": public, "calls": len(calls)}))
"""


def test_scenarios_through_the_public_fallback_keep_their_digests():
    """The demo (with its fault plan) and the default scenario with few jobs, in a fresh process: each
    digest with the public call equals the digest with the trap."""
    with tempfile.TemporaryDirectory(prefix="fedemu-park-") as tmp:
        proc = subprocess.run([sys.executable, "-c", SCRIPT, tmp], capture_output=True, text=True, cwd=tmp,
                              timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.splitlines()[-1])
    assert len(got["trap"]) == 2 and all(len(d) == 32 for d in got["trap"])
    assert got["public"] == got["trap"]
    assert got["calls"] > 100  # the actors really parked through the public call
