"""`fedemu reproduce`: a tiny megha-2023 (the quick grid shrunk to 100 workers) writes a report with every
claim, verdicts that follow the rules, the root causes, the stand-in sensitivity case and plots; finished
runs are reused; a process pool and a Dask LocalCluster give the same numbers as one process."""

from __future__ import annotations

import csv
from pathlib import Path

import attrs
import pytest

from fedemu.tools.reproduce import evaluate as ev
from fedemu.tools.reproduce import reproduce as rp
from fedemu.tools.cli import main
from fedemu.tools.reproduce.experiments import PAPERS, megha_2023
from fedemu.tools.reproduce.verdict import combine, verdict

KNOWN = {"reproduces", "same direction", "same order", "differs", "not measured", "not testable",
         "reproduces for the wrong reason"}
SAME_COLUMNS = ("experiment", "scheduler", "policy", "seed", "jobs_completed", "delay_p50_s", "delay_p99_s",
                "utilization_mean", "digest")


def tiny() -> list:
    """The quick megha-2023 experiments on 100 workers with 12 jobs (5 of each trace), Random only."""
    out = []
    for e in megha_2023(quick=True):
        o = {**e.overrides, "gms": 2, "lms": 2, "workers_per_partition": 25}
        if "masters" in o:
            o["masters"] = 2
        o["jobs"] = 5 if o["workload"] == "trace" else 12
        if o["workload"].startswith("syn_"):
            o["workload"] = "syn_5"
        out.append(attrs.evolve(e, overrides=o, policies="random"))
    return out


def numbers(path):
    with open(path / "runs.csv", newline="") as f:
        return sorted(tuple(r[k] for k in SAME_COLUMNS) for r in csv.DictReader(f))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    missing = sorted({e.overrides["trace"] for e in tiny() if e.overrides.get("trace") and
                      not Path(e.overrides["trace"]).exists()})
    if missing:  # a clone without the papers' data beside it (docs/data.md)
        pytest.skip(f"the papers' traces are absent ({missing[0]}); they live in ../shared/data, see docs/data.md")
    out = tmp_path_factory.mktemp("repro") / "megha-2023"
    verdicts, failures = rp.reproduce("megha-2023", tiny(), "1,2", out, jobs=1)
    return out, verdicts, failures


def test_every_claim_gets_a_verdict_that_follows_the_rules(tiny_run):
    out, verdicts, failures = tiny_run
    assert failures == []
    claims = ev.load_claims("megha-2023")["claims"]
    assert [v["id"] for v in verdicts] == [c["id"] for c in claims]
    for v, c in zip(verdicts, claims):
        assert v["verdict"] in KNOWN or v["verdict"].startswith("needs ")
        if "needs" in c or "ours" not in c:
            continue
        kw = {k: c[k] for k in ev.OPTIONS if k in c}
        if c.get("aggregate") != "worst" and c["kind"] != "occurs":  # each seed judged by the rules
            assert v["seeds"] == {s: verdict(c["kind"], c.get("paper", 1), x, **kw) for s, x in v["values"].items()}
        if c.get("on") != "mean" and not c.get("not_testable") and not c.get("mechanism"):
            assert v["verdict"] == combine(list(v["seeds"].values()))
        for _, _, exp, metric in ev.terms(c):
            assert f"@{exp} {metric}:" in v["evidence"]
        random_only = all(t[1] in ("random", "-") for t in ev.terms(c))
        assert (v["verdict"] == "not measured") == (not random_only or len(v["values"]) < 2)
    assert sum(v["verdict"] == "not measured" for v in verdicts) <= 40


def test_the_report_holds_the_claims_rules_causes_sensitivity_and_experiments(tiny_run):
    out, verdicts, _ = tiny_run
    report = (out / "report.md").read_text()
    for v in verdicts:
        assert f"| {v['id']} |" in report and f"**{v['verdict']}**" in report
    assert "Verdict rules" in report and "## Not testable, or needing a scheduler fedemu lacks" in report
    assert "## Sensitivity: standin" in report and "claims change verdict" in report
    assert "at commit `" in report and "runs.csv" in report
    for e in tiny():
        assert f"### {e.name}:" in report
        assert (out / e.name / "delay_cdf.png").stat().st_size > 0
        assert (out / e.name / "utilization_cdf.png").exists()
    causes = ev.load_claims("megha-2023")["causes"]
    differing = {c.get("cause") for c in ev.load_claims("megha-2023")["claims"]
                 if {v["id"]: v for v in verdicts}[c["id"]]["verdict"] in ("differs", "same order", "same direction")}
    for key in differing - {None}:
        assert f"### {causes[key]['title']}" in report  # each root cause once, with its claims


def test_a_second_reproduction_reuses_every_finished_run(tiny_run, tmp_path):
    out, verdicts, _ = tiny_run
    before = numbers(out)
    specs = rp.plan(tiny(), "1,2", out, rp.code_version())
    assert all(rp.run_cached(s).get("cached") for s in list({s["key"]: s for s in specs}.values())[:3])
    again, _ = rp.reproduce("megha-2023", tiny(), "1,2", out, jobs=1)
    assert again == verdicts and numbers(out) == before


def test_a_run_process_derives_what_the_report_would(tiny_run, monkeypatch):
    """``run_and_derive`` reads a run's derived figures where the run ran, the same as the report reads them;
    when they cannot be had there, it leaves them to the report."""
    out, _, _ = tiny_run
    spec = [s for s in rp.plan(tiny(), "1", out, rp.code_version()) if s["experiment"] == "syn_250"][0]
    res = rp.run_and_derive(spec)
    assert res.get("cached") and repr(res["derived"]) == repr(rp.derived(Path(spec["out_dir"]), res["summary"]))

    def unreadable(*_):
        raise OSError("tasks.csv: unreadable")

    monkeypatch.setattr(rp, "derived", unreadable)
    res = rp.run_and_derive(spec)
    assert res.get("cached") and "derived" not in res


def test_a_changed_parameter_or_seed_is_a_new_run(tmp_path):
    [e] = [e for e in tiny() if e.name == "syn_250"]
    code = rp.code_version()
    keys = {s["key"] for s in rp.plan([e], "1,2", tmp_path, code)}
    other = attrs.evolve(e, overrides={**e.overrides, "jobs": 13})
    assert len(keys) == 4 and not keys & {s["key"] for s in rp.plan([other], "1,2", tmp_path, code)}
    assert not keys & {s["key"] for s in rp.plan([e], "1,2", tmp_path, code + "x")}


SOME = ("syn_250", "syn_250-standin")


def test_a_process_pool_gives_the_same_numbers(tiny_run, tmp_path):
    out, verdicts, _ = tiny_run
    again, failures = rp.reproduce("megha-2023", [e for e in tiny() if e.name in SOME], "1,2", tmp_path / "pool", jobs=2)
    assert failures == []
    mine = {v["id"]: v for v in again if "not measured" not in (v["verdict"], v.get("measured"))}
    assert mine and all(v == mine[v["id"]] for v in verdicts if v["id"] in mine)
    assert set(numbers(tmp_path / "pool")) == {r for r in numbers(out) if r[0] in SOME}


def test_a_dask_cluster_gives_the_same_numbers(tiny_run, tmp_path):
    """`--cluster` on a Dask LocalCluster of two worker processes (Dask is in the test extra, so CI runs this)."""
    from distributed import LocalCluster

    out, verdicts, _ = tiny_run
    experiments = [e for e in tiny() if e.name in SOME]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=None) as cluster:
        again, failures = rp.reproduce("megha-2023", experiments, "1,2", tmp_path / "dask",
                                       cluster=cluster.scheduler_address)
    assert failures == []
    mine = {v["id"]: v for v in again if "not measured" not in (v["verdict"], v.get("measured"))}
    assert mine and all(v == mine[v["id"]] for v in verdicts if v["id"] in mine)
    assert set(numbers(tmp_path / "dask")) == {r for r in numbers(out) if r[0] in SOME}


def test_on_dask_each_run_has_a_process_of_its_own():
    """A Dask worker's memory falls back after each run: the run is done by a child process (a worker that
    kept a large run's memory paused at its limit and never ran again), and a crash there is the run's error."""
    import os

    from fedemu.tools.run import pool

    child = pool._in_child(os.readlink, "/proc/self")  # the pid of the process that ran it
    assert child.isdigit() and int(child) != os.getpid()
    failed = pool._in_child(os.readlink, {"name": "r1"})  # a TypeError in the child
    assert failed["name"] == "r1" and "TypeError" in failed["error"]


def test_cluster_without_dask_is_one_line_saying_how_to_install(monkeypatch, capsys, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)  # as if not installed
    status = main(["reproduce", "pigeon-2019", "--only", "example", "--out", str(tmp_path / "o"),
                   "--cluster", "tcp://127.0.0.1:8786"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert "Dask distributed is not installed; pip install 'fedemu[dask]'" in err


@pytest.mark.parametrize("argv,message", [
    (["reproduce", "megha-2099"], "unknown paper 'megha-2099'; known: megha-2022, megha-2023, pigeon-2019"),
    (["reproduce", "megha-2023", "--only", "syn_9"], "unknown experiment 'syn_9'"),
    (["reproduce", "megha-2023", "--seeds", "1,x"], "--seeds '1,x': 'x' is not a whole number"),
    # issue 45: --seeds '' ran the default seeds, where compare refuses it
    (["reproduce", "megha-2023", "--seeds", ""], "--seeds '': '' is not a whole number; expected e.g. 1,2,3"),
    (["compare", "default", "--seeds", ""], "--seeds '': '' is not a whole number; expected e.g. 1,2,3"),
])
def test_bad_input_is_one_line(argv, message, capsys, tmp_path):
    assert main(argv + ["--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and not (tmp_path / "o").exists()


def test_an_unrelated_folder_is_not_overwritten(tmp_path, capsys):
    (tmp_path / "mine.txt").write_text("keep")
    assert main(["reproduce", "pigeon-2019", "--only", "example", "--out", str(tmp_path)]) == 2
    assert "holds no earlier reproduction" in capsys.readouterr().err


def test_every_papers_claims_name_experiments_it_runs():
    """At paper scale every claim's experiments run; at --quick all but the ones a claim's why names as
    paper scale only."""
    for paper, (_, build) in PAPERS.items():
        full, quick = {e.name for e in build(False)}, {e.name for e in build(True)}
        for c in ev.load_claims(paper)["claims"]:
            if "needs" in c:
                continue
            for _, _, exp, _ in ev.terms(c):
                assert exp in full, (paper, c["id"])
                assert exp in quick or "paper scale only" in c.get("why", ""), (paper, c["id"])


def test_the_worked_example_centralized_sum_is_the_papers(tmp_path):
    [example] = [e for e in PAPERS["pigeon-2019"][1](True) if e.name == "example"]
    verdicts, failures = rp.reproduce("pigeon-2019", [attrs.evolve(example, seeds="1,2,3,4")], "1", tmp_path / "ex")
    by = {v["id"]: v for v in verdicts}
    assert failures == [] and by["example-centralized"]["ours"] == 45
    assert by["example-centralized"]["verdict"] == "reproduces"
    ratios = list(by["example-gain"]["values"].values())  # 45 over Pigeon's sum
    assert len(ratios) == 4 and set(ratios) <= {45 / 30, 45 / 36, 45 / 46}  # B and C: both in group one, one each, both in two
    assert by["example-gain"]["verdict"] == ("reproduces" if 45 / 36 in ratios else "differs")


def test_compare_cluster_without_dask_is_one_line_too(monkeypatch, capsys, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "distributed", None)
    status = main(["compare", "default", "--schedulers", "megha", "--set", "jobs=5", "--out", str(tmp_path / "c"),
                   "--cluster", "tcp://127.0.0.1:8786"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "pip install 'fedemu[dask]'" in err


@pytest.fixture
def junk_server():
    """A TCP server that answers every connection with bytes that are not Dask's (as a proxy or another
    service at a mistyped address would)."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 4)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    server.close()


@pytest.mark.parametrize("command", [["compare", "default", "--schedulers", "megha", "--set", "jobs=5"],
                                     ["reproduce", "pigeon-2019", "--only", "example"]])
@pytest.mark.parametrize("address", ["nonsense", "junk"])
def test_a_bad_cluster_address_is_one_line_at_once_and_leaves_nothing(tmp_path, junk_server, command, address):
    """Finding: a bad --cluster gave the right error, then a 20 s stall and a Dask TimeoutError traceback at
    exit, and left compare.json / reproduce.json behind. In a real process, so what happens at exit shows."""
    import subprocess
    import sys
    import time

    address = junk_server if address == "junk" else address
    out = tmp_path / "o"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "fedemu", *command, "--out", str(out), "--cluster", address],
                          capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"fedemu: error: --cluster {address}: cannot connect to a Dask scheduler there (")
    assert took < 15, f"{took:.1f} s: the client stalled on the way out"
    assert not out.exists()
