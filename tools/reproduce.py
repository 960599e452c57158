"""`fedemu reproduce PAPER`: a paper's experiments (``tools/experiments.py``), then every claim of
``tools/claims/PAPER.json`` with the paper's number, ours, a verdict (``tools/verdict.py``) and the
evidence, written to ``OUT/report.md`` with plots.

Choices made here:
- Runs are content-addressed: a run's folder is ``OUT/runs/<key>``, the key a hash of (scenario,
  overrides, seed, code version), where the code version hashes fedemu's own source and data files. A
  run whose folder already holds its key and summary is not run again, so an interrupted reproduction
  resumes where it stopped, a run two experiments share runs once, and a change of code runs afresh.
- A claim's verdict combines its seeds' own verdicts (``tools/evaluate.py``); the number shown is the
  mean over seeds of each run's figure (the 2023 paper reports "the average values of the delays that
  were reported in the three runs"), and the evidence lists every seed's value.
- report.md (``tools/repro_report.py``) holds no wall-clock figure, so the same runs give the same report
  whichever executor ran them (``runs.csv`` has the wall times).
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from fedemu.fabric.errors import ConfigError, unknown_name

from . import compare, outdir, pool
from .atomic import write_text
from .evaluate import load_claims, num
from .results import finished
from .experiments import PAPERS, Experiment
from .repro_report import paper_cell, plot_allocation, write_report

PACKAGE = Path(__file__).resolve().parents[1]
LAYER_DIRS = ("actors", "fabric", "policies", "scenarios", "tools")
# the folders of fedemu's own code and data: the root, each layer and every folder in it (a scheduler's
# package, the cost models), but not the claims, the report side's data
SOURCE_DIRS = ("",) + tuple(sorted(
    str(d.relative_to(PACKAGE)) for layer in LAYER_DIRS for d in (PACKAGE / layer, *(PACKAGE / layer).rglob("*"))
    if d.is_dir() and d.name not in ("claims", "__pycache__")))
# the modules that only plan runs and read their results (the overrides they choose are part of each key)
REPORT_SIDE = frozenset({"tools/reproduce.py", "tools/verdict.py", "tools/experiments.py", "tools/pool.py",
                         "tools/evaluate.py", "tools/repro_report.py"})
MARKER = "reproduce.json"
ZERO_QUEUE_S = 1e-5  # a job "did not queue" when its delay is within 10 us of the run's smallest (rounding)


# ---- runs -----------------------------------------------------------------------------------------
def code_version() -> str:
    """A hash of fedemu's own source and data files that decide a run's results (not tests, not the
    report side): a change of that code means fresh runs."""
    h = hashlib.blake2b(digest_size=16)
    for sub in SOURCE_DIRS:
        folder = PACKAGE / sub
        for f in sorted(list(folder.glob("*.py")) + list(folder.glob("*.json"))):
            if f"{sub}/{f.name}" in REPORT_SIDE:
                continue
            h.update(f"{sub}/{f.name}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def run_key(spec: dict, code: str) -> str:
    text = json.dumps({"scenario": spec["scenario"], "overrides": spec["overrides"], "seed": spec["seed"],
                       "code": code}, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=10).hexdigest()


def run_cached(spec: dict) -> dict:
    """One run, or its earlier result when its folder holds the same key (runs anywhere: pool or Dask)."""
    folder = Path(spec["out_dir"])
    key_file, summary_file = folder / "run-key", folder / "summary.json"
    if key_file.exists() and summary_file.exists() and key_file.read_text() == spec["key"]:
        summary = finished(folder)  # a whole result set, not one cut short or stopped early
        if summary is not None and not compare.disagreement(spec, summary):  # and one that agrees with its run
            return {"name": spec["name"], "summary": summary, "cached": True}
    res = compare.run_one(spec)
    if "summary" in res:
        write_text(key_file, spec["key"])
        res["summary"] = json.loads(summary_file.read_text())  # as a cached run would see it
    return res


def derived(run_dir: Path, summary: dict) -> dict:
    """Figures the claims need beyond compare's row: slowdowns and completion times of short and long jobs,
    the share of jobs that did not queue, the sum of completion times, the parts of the allocation time as
    shares, and the offered load (Megha 2023, 2.3)."""
    out: dict = {}
    path = run_dir / "jobs.csv"
    if path.exists():
        with open(path, newline="") as f:
            done = [r for r in csv.DictReader(f) if r["jrt_s"] != ""]
        jrt = np.array([float(r["jrt_s"]) for r in done])
        ideal = np.array([float(r["ideal_jrt_s"]) for r in done])
        delay = np.array([float(r["delay_s"]) for r in done])
        short = np.array([r["short"] == "1" for r in done], dtype=bool)
        out["jrt_sum_s"] = float(jrt.sum()) if len(jrt) else None
        # Pigeon (3): a job did not queue when it took its longest task plus communication only: the run's
        # smallest delay (every such job crosses the same hops)
        out["zero_queue_share"] = float((delay <= delay.min() + ZERO_QUEUE_S).mean()) if len(delay) else None
        for name, mask in (("short", short), ("long", ~short)):
            for p in (50, 90, 99):  # the Pigeon paper's slowdown: percentile of JRT over percentile of ideal JRT
                ok = mask.any() and np.percentile(ideal[mask], p) > 0
                out[f"{name}_slowdown_p{p}"] = float(np.percentile(jrt[mask], p) / np.percentile(ideal[mask], p)) \
                    if ok else None
                out[f"{name}_jrt_p{p}_s"] = float(np.percentile(jrt[mask], p)) if mask.any() else None
    out.update(offered_load(run_dir / "tasks.csv", summary.get("total_units") or 0))
    alloc = summary.get("allocation_s") or {}
    total = alloc.get("allocation")
    for part, key in (("fq", "framework_queueing"), ("proc", "processing"), ("comm", "communication")):
        out[f"alloc_{part}_share"] = alloc[key] / total if total and alloc.get(key) is not None else None
    counters = summary.get("counters") or {}
    for name in ("preemptions", "preemption_attempts", "repartitions"):  # fairness (megha-2022, Fig. 11)
        out[name] = counters.get(name, 0)
    jobs = summary.get("jobs") or 0
    out["unschedulable_share"] = (summary.get("unschedulable") or 0) / jobs if jobs else None
    return out


def offered_load(path: Path, units: int) -> dict:
    """Megha 2023 (2.3, Table 1): per second, the slots the active tasks need over the slots there are, each
    task active from its job's arrival for its run time (as if it never waited): p50, mean and p99."""
    keys = ("offered_load_p50", "offered_load_mean", "offered_load_p99")
    if not path.exists() or not units:
        return dict.fromkeys(keys)
    with open(path, newline="") as f:
        rows = [(float(r["arrival_s"]), float(r["end_s"]) - float(r["start_s"])) for r in csv.DictReader(f)
                if r["end_s"] != "" and r["start_s"] != ""]
    if not rows:
        return dict.fromkeys(keys)
    arrival = np.array([a for a, _ in rows])
    run = np.array([d for _, d in rows])
    t0 = arrival.min()
    seconds = int(np.ceil((arrival + run).max() - t0)) + 1
    busy = np.zeros(seconds + 1)
    # exact overlap of [a, a + d) with each 1-s bucket, from the cumulative of starts and ends
    for edge, sign in ((arrival - t0, 1.0), (arrival + run - t0, -1.0)):
        whole = np.floor(edge).astype(int)
        frac = edge - whole
        np.add.at(busy, whole, sign * (1 - frac))
        np.add.at(busy, np.minimum(whole + 1, seconds), sign * frac)
    load = np.cumsum(busy)[:seconds] / units
    return {"offered_load_p50": float(np.percentile(load, 50)), "offered_load_mean": float(load.mean()),
            "offered_load_p99": float(np.percentile(load, 99))}


def plan(experiments: list[Experiment], seeds: str, out: Path, code: str) -> list[dict]:
    """Every run of every experiment, each tagged with its experiment and its content key."""
    specs = []
    for e in experiments:
        for spec in compare.plan_runs("default", e.schedulers, e.policies, e.seeds or seeds, e.overrides,
                                      str(out / "runs")):
            spec["experiment"] = e.name
            spec["key"] = run_key(spec, code)
            spec["out_dir"] = str(out / "runs" / f"{spec['name']}-{spec['key']}")
            specs.append(spec)
    return specs


# ---- command ----------------------------------------------------------------------------------------
def _prepare_out(out: Path, paper: str) -> None:
    """OUT is new, empty, or an earlier reproduction of the same paper (whose runs are reused)."""
    marker = out / MARKER
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; expected a folder")
    if out.is_dir() and any(out.iterdir()):
        if not marker.exists():
            raise ConfigError(f"--out {out} is not empty and holds no earlier reproduction; give a new folder")
        earlier = json.loads(marker.read_text()).get("paper")
        if earlier != paper:
            raise ConfigError(f"--out {out} holds a reproduction of {earlier}, not {paper}; give another folder")
    out.mkdir(parents=True, exist_ok=True)
    write_text(marker, json.dumps({"paper": paper}) + "\n")


def main(args) -> int:
    if args.paper not in PAPERS:
        raise unknown_name("paper", args.paper, PAPERS)
    _, build = PAPERS[args.paper]
    given = args.seeds if args.seeds is not None else ("1" if args.quick else "1,2,3")  # '' is refused, as by compare
    seeds = ",".join(str(s) for s in compare._seeds(given))
    experiments = build(args.quick)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        for n in names:
            if n not in {e.name for e in experiments}:
                raise unknown_name("experiment", n, [e.name for e in experiments])
        experiments = [e for e in experiments if e.name in names]
    outdir.check_out(args.out)
    out = Path(args.out or f"out/reproduce/{args.paper}{'-quick' if args.quick else ''}")
    command = "fedemu reproduce " + args.paper + (" --quick" if args.quick else "") + f" --seeds {seeds}" + \
        (f" --only {args.only}" if args.only else "")
    jobs = args.jobs if args.jobs and args.jobs > 0 else 1
    evaluated, failures = reproduce(args.paper, experiments, seeds, out, jobs=jobs, cluster=args.cluster,
                                    quick=args.quick, command=command)
    table = Table(title=f"{args.paper}: claims", header_style="bold")
    for c in ("claim", "paper", "ours", "verdict"):
        table.add_column(c, overflow="fold")
    for v in evaluated:
        table.add_row(v["id"], paper_cell(v), num(v["ours"]), v["verdict"])
    Console(width=max(Console().width, 120)).print(table)
    print(f"report: {out / 'report.md'} (verdicts.json, runs.csv, plots; run folders under {out / 'runs'})")
    return compare.failed_status(failures, f"{len(failures)} runs failed (see above)")


def reproduce(paper: str, experiments: list[Experiment], seeds: str, out: Path, *, jobs: int = 1,
              cluster: str | None = None, quick: bool = False, command: str = "") -> tuple[list[dict], list[dict]]:
    """Run ``experiments`` (finished runs reused), write OUT/report.md, verdicts.json, runs.csv and the plots;
    returns (the verdicts, the failed runs)."""
    title = PAPERS[paper][0]
    claims = load_claims(paper)
    missing = sorted({e.overrides["trace"] for e in experiments if e.overrides.get("trace") and
                      not Path(e.overrides["trace"]).exists()})
    if missing:
        raise ConfigError(f"trace {missing[0]} is absent (the papers' traces live in ../shared/data)")
    with pool.connected(cluster) as client:  # before anything is written: a bad address leaves nothing
        _prepare_out(out, paper)
        specs = plan(experiments, seeds, out, code_version())
        unique = list({s["key"]: s for s in specs}.values())
        console = Console(stderr=True)
        where = f"the Dask cluster at {cluster}" if cluster else f"{min(jobs, len(unique))} process(es)"
        console.print(f"reproduce {paper}: {len(experiments)} experiments, {len(unique)} runs on {where}; output "
                      f"in {out}")

        def note(_, res):
            if "error" in res:
                console.print(f"run {res['name']} failed: {res['error'].strip().splitlines()[-1]}")

        done = pool.run_all(unique, run_cached, jobs=jobs, cluster=client, on_result=note)
    results = {s["key"]: r for s, r in zip(unique, done)}
    cached = sum(1 for r in done if r.get("cached"))
    if cached:
        console.print(f"{cached} of {len(unique)} runs reused from {out / 'runs'} (same scenario, parameters, seed "
                      "and code)")
    rows: dict[tuple, list[dict]] = {}
    for s in specs:
        res = results[s["key"]]
        if "summary" in res:
            row = compare.row_of(s, res["summary"])
            row.update(derived(Path(s["out_dir"]), res["summary"]))
            rows.setdefault((s["experiment"], s["scheduler"], s["policy"]), []).append(row)
    if rows:
        compare.write_csv(out / "runs.csv", [{"experiment": e, **r} for (e, _, _), rs in rows.items() for r in rs])
    for e in experiments:
        mine = [s for s in specs if s["experiment"] == e.name]
        if any("summary" in results[s["key"]] for s in mine):
            (out / e.name).mkdir(exist_ok=True)
            compare.plot(mine, {s["name"]: results[s["key"]] for s in mine}, out / e.name)
            if "allocation" in e.plots:
                plot_allocation(mine, results, out / e.name)
    write_report(out, paper, title, claims, experiments, specs, rows, results, command or f"fedemu reproduce {paper}",
                 quick, seeds)
    return json.loads((out / "verdicts.json").read_text()), [r for r in done if "error" in r]
