"""`fedemu compare`: the run plan, one folder per run, compare.csv, the table, both CDF plots, parallel runs
giving the same results as serial ones, and clear errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fedemu.actors import registry
from fedemu.fabric.errors import ConfigError
from fedemu.tools.run import compare, params
from fedemu.tools.cli import main

SMALL = ["--set", "jobs=12", "--set", "lms=2", "--set", "gms=2", "--set", "workers_per_partition=4",
         "--set", "load=0.9"]


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_plan_covers_every_combination_and_runs_sparrow_once_per_seed(tmp_path):
    plan = compare.plan_runs("default", "megha,pigeonc,pigeon,sparrow,centralized", "random,min-constraints",
                             "1,2", {"jobs": 5}, str(tmp_path))
    keys = [(p["scheduler"], p["policy"], p["seed"]) for p in plan]
    assert len(keys) == len(set(keys)) == 4 * 2 * 2 + 2
    assert ("sparrow", "-", 1) in keys and ("sparrow", "-", 2) in keys
    assert all(p["overrides"]["jobs"] == 5 for p in plan)
    assert len({p["out_dir"] for p in plan}) == len(plan)


def test_plan_of_all_schedulers_comes_from_the_registry(tmp_path):
    from fedemu.actors.registry import SCHEDULERS

    plan = compare.plan_runs("default", "all", "random", "1", {}, str(tmp_path))
    assert [p["scheduler"] for p in plan] == list(SCHEDULERS)
    assert [p["policy"] for p in plan] == ["-" if not s.takes_policy else "random" for s in SCHEDULERS.values()]
    assert all("policy" not in p["overrides"] for p in plan if p["policy"] == "-")


def test_a_schedulers_own_key_goes_to_its_runs_only(tmp_path):
    plan = compare.plan_runs("default", "megha,sparrow", "random", "1", {"probe_ratio": 3, "jobs": 5}, str(tmp_path))
    by = {p["scheduler"]: p["overrides"] for p in plan}
    assert by["sparrow"]["probe_ratio"] == 3 and "probe_ratio" not in by["megha"]
    assert by["megha"]["jobs"] == by["sparrow"]["jobs"] == 5


@pytest.mark.parametrize("kwargs,message", [
    ({"overrides": {"probe_ratio": 3}}, "--set probe_ratio=... applies to none of the schedulers compared (megha)"),
    ({"schedulers": "megha,yarn"}, "unknown scheduler 'yarn'; known: centralized, eagle, hawk, megha, pigeon, pigeonc, sparrow"),
    ({"policies": "best"}, "unknown policy 'best'; known: binpack, d-choices, min-constraints, random, spread, tebas"),
    ({"seeds": "1,x"}, "--seeds '1,x': 'x' is not a whole number; expected e.g. 1,2,3"),
    ({"schedulers": " , "}, "--schedulers is empty; known: centralized, eagle, hawk, megha, pigeon, pigeonc, sparrow"),
    ({"overrides": {"scheduler": "megha"}}, "--set scheduler=... is chosen by compare; use --schedulers instead"),
    ({"overrides": {"lod": 1}}, "unknown parameter 'lod'"),
    ({"scenario": "nosuch"}, "unknown scenario 'nosuch'"),
])
def test_plan_errors(tmp_path, kwargs, message):
    args = {"scenario": "default", "schedulers": "megha", "policies": "random", "seeds": "1", "overrides": {},
            "out": str(tmp_path)}
    args.update(kwargs)
    with pytest.raises(ConfigError) as err:
        compare.plan_runs(**args)
    assert str(err.value).startswith(message)


def test_cli_bad_scheduler_exits_2(tmp_path, capsys):
    assert main(["compare", "default", "--schedulers", "megha,yarn", "--out", str(tmp_path)]) == 2
    assert "unknown scheduler 'yarn'" in capsys.readouterr().err


def test_compare_end_to_end_serial(tmp_path, capsys):
    out = tmp_path / "cmp"
    rc = main(["compare", "default", "--schedulers", "megha,centralized,pigeonc,pigeon,sparrow",
               "--policies", "random", "--seeds", "1,2", "--jobs", "1", "--out", str(out), *SMALL])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "every run" in printed and "mean over seeds" in printed
    rows = read_rows(out / "compare.csv")
    assert len(rows) == 10
    for name in ("delay_cdf.png", "utilization_cdf.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for row in rows:
        summary = json.loads(Path(row["run_dir"], "summary.json").read_text())
        assert summary["scheduler"] == row["scheduler"] and summary["digest"] == row["digest"]
        assert int(row["jobs_completed"]) + int(row["unschedulable"]) == int(row["jobs"]) == 12
        assert (row["invalid_requests"] != "") == bool(registry.get(row["scheduler"]).invalid_counters)
    for row in rows:  # a grid's runs draw no plots of their own unless asked (--plots)
        assert not list(Path(row["run_dir"]).glob("*.png"))
    # the same cluster and workload per seed: every federated scheduler rejects the same jobs
    for seed in ("1", "2"):
        rejected = {r["unschedulable"] for r in rows if r["seed"] == seed and r["scheduler"] != "centralized"}
        assert len(rejected) == 1
    header = rows[0].keys()
    for counter in ("counter:probes", "counter:cancels", "counter:wfq_high", "counter:repartitions"):
        assert counter in header
    sparrow = [r for r in rows if r["scheduler"] == "sparrow"]
    assert len(sparrow) == 2 and {r["policy"] for r in sparrow} == {"-"}
    assert all(int(r["counter:probes"]) > 0 for r in sparrow)


def test_plots_and_the_direct_engine_move_no_figure(tmp_path):
    """--plots draws each run's own plots; --engine direct runs them on the other engine: the same rows."""
    plain, drawn = tmp_path / "plain", tmp_path / "drawn"
    common = ["compare", "default", "--schedulers", "sparrow", "--seeds", "1", "--jobs", "1", *SMALL]
    assert main([*common, "--out", str(plain)]) == 0
    assert main([*common, "--out", str(drawn), "--plots", "--engine", "direct"]) == 0
    [bare], [full] = read_rows(plain / "compare.csv"), read_rows(drawn / "compare.csv")
    assert sorted(p.name for p in Path(full["run_dir"]).glob("*.png")) == ["delay_cdf.png", "imbalance.png"]
    assert not list(Path(bare["run_dir"]).glob("*.png"))
    assert {k: v for k, v in bare.items() if k not in ("run_dir", "wall_s")} == \
        {k: v for k, v in full.items() if k not in ("run_dir", "wall_s")}


def test_parallel_runs_match_serial_runs(tmp_path):
    args = ["--schedulers", "pigeonc,sparrow", "--policies", "random", "--seeds", "3", *SMALL]
    assert main(["compare", "default", *args, "--jobs", "1", "--out", str(tmp_path / "serial")]) == 0
    assert main(["compare", "default", *args, "--jobs", "2", "--out", str(tmp_path / "parallel")]) == 0
    serial = read_rows(tmp_path / "serial" / "compare.csv")
    parallel = read_rows(tmp_path / "parallel" / "compare.csv")
    assert [r["digest"] for r in serial] == [r["digest"] for r in parallel]
    assert [r["scheduler"] for r in parallel] == ["pigeonc", "sparrow"]  # plan order, not finish order


def test_a_pool_worker_keeps_nothing_of_its_earlier_runs(tmp_path):
    """A run's actors are freed when run_one returns: a pool worker runs spec after spec, and the next run's
    gc_paused froze the last one's cycles unfreed (two workers held 12 GB each after 21 paper-scale runs)."""
    import gc

    from fedemu.fabric.kernel import Fabric

    for seed in (1, 2, 3):
        res = compare.run_one({"name": f"r{seed}", "scenario": "default", "seed": seed, "out_dir": str(tmp_path / str(seed)),
                               "overrides": params.parse_overrides(["jobs=20"])})
        assert "summary" in res
        assert not [o for o in gc.get_objects() if isinstance(o, Fabric)]


def test_a_failing_run_is_reported_with_its_name(tmp_path, capsys):
    # masters=3 cannot split 16 workers: only the Pigeon runs fail, the others are still written.
    rc = main(["compare", "default", "--schedulers", "megha,pigeon", "--jobs", "1", "--out", str(tmp_path),
               *SMALL, "--set", "masters=3"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "run pigeon-random-s1 failed: masters=3 does not divide the 16 workers" in err
    assert [r["scheduler"] for r in read_rows(tmp_path / "compare.csv")] == ["megha"]


def test_the_table_never_breaks_a_cell_inside_a_token():
    """Finding 12: the compare table broke a counter inside its value (``reschedules=5`` / ``5354``)."""
    import io
    import re

    counters = {"repartitions": 480, "reschedules": 55354, "invalid_external": 150, "preemptions_refused": 12345678}
    row = {k: None for k in ("jobs", "jobs_completed", "utilization_mean", "invalid_requests", "messages", "wall_s")}
    row.update({f"{p}_{s}_s": 1.25 for p in ("delay", "short", "long") for s in compare.STATS})
    row.update({f"alloc_{k}_s": 0.000255 for k in compare.ALLOCATION_KEYS})
    rows = [{**row, "scheduler": name, "policy": "random", "seed": 1, "counters": counters}
            for name in ("megha", "pigeonc")]
    buf = io.StringIO()
    compare.print_table(compare.build_table(rows, "every run"), file=buf)
    text = buf.getvalue()
    for key, value in counters.items():
        assert len(re.findall(rf"\b{key}={value}\b", text)) == 2, text
    assert "2.550e-04 / 2.550e-04 / 2.550e-04" in text


def test_a_ctrl_c_reaching_the_pool_workers_leaves_them_running_quietly():
    """Finding 12: a Ctrl-C'd compare printed a stray ``Process SpawnPoolWorker-2:`` traceback: Ctrl-C reaches
    the terminal's whole process group, workers included. The workers ignore it (the parent alone stops):
    here each worker gets SIGINT in the middle of its task, which still completes."""
    import subprocess
    import sys

    code = ("import signal; from fedemu.tools.run import pool; "
            "print(pool.run_all([signal.SIGINT] * 2, signal.raise_signal, jobs=2, progress=False))")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired as e:  # a worker died of it and its task was lost: the pool waits forever
        raise AssertionError(f"the pool hung: {e.stderr}") from None
    assert proc.returncode == 0 and proc.stdout.strip() == "[None, None]", proc.stderr
    assert "Process SpawnPoolWorker" not in proc.stderr
