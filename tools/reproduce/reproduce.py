"""`fedemu reproduce PAPER`: a paper's experiments (``tools/reproduce/experiments.py``), then every claim of
``tools/reproduce/claims/PAPER.json`` with the paper's number, ours, a verdict (``tools/reproduce/verdict.py``) and the
evidence, written to ``OUT/report.md`` with plots.

Choices made here:
- Runs are content-addressed: a run's folder is ``OUT/runs/<key>``, the key a hash of (scenario,
  overrides, seed, code version), where the code version hashes fedemu's own source and data files. A
  run whose folder already holds its key and summary is not run again, so an interrupted reproduction
  resumes where it stopped, a run two experiments share runs once, and a change of code runs afresh.
- A claim's verdict combines its seeds' own verdicts (``tools/reproduce/evaluate.py``); the number shown is the
  mean over seeds of each run's figure (the 2023 paper reports "the average values of the delays that
  were reported in the three runs"), and the evidence lists every seed's value.
- report.md (``tools/reproduce/repro_report.py``) records where it came from: the commit, the command, the date and
  the wall time; ``runs.csv`` beside it holds every run's figures with the commit it ran at, so
  ``--report-only`` can judge the claims again from it without running anything.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import json
import subprocess
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fedemu.fabric.errors import ConfigError, unknown_name

from ..run import compare, outdir, pool
from ..run.atomic import write_text
from .evaluate import load_claims, num
from ..results.results import finished
from .experiments import PAPERS, Experiment
from .repro_derived import derived
from .repro_plots import paper_marks, plot_allocation_parts, plot_cdf_by_seed
from .repro_report import paper_cell, write_report

PACKAGE = Path(__file__).resolve().parents[2]
LAYER_DIRS = ("actors", "fabric", "policies", "scenarios", "tools")
# the folders of fedemu's own code and data: the root, each layer and every folder in it (a scheduler's
# package, the cost models), but not the report side's (the claims, the experiments' plans)
SOURCE_DIRS = ("",) + tuple(sorted(
    str(d.relative_to(PACKAGE)) for layer in LAYER_DIRS for d in (PACKAGE / layer, *(PACKAGE / layer).rglob("*"))
    if d.is_dir() and d.name not in ("claims", "experiments", "__pycache__")))
# the modules that only plan runs and read their results (the overrides they choose are part of each key)
REPORT_SIDE = frozenset({"tools/reproduce/reproduce.py", "tools/reproduce/verdict.py", "tools/run/pool.py", "tools/reproduce/evaluate.py",
                         "tools/reproduce/repro_report.py", "tools/reproduce/repro_plots.py", "tools/reproduce/repro_derived.py",
                         "tools/reproduce/group_queueing.py"})
MARKER = "reproduce.json"


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


def run_and_derive(spec: dict) -> dict:
    """``run_cached``, then the run's figures beyond its summary (``derived``, which reads its CSVs), in the
    same process: a grid reads each run's files in its run processes, beside the runs still going, not one
    run after another once the last has ended (about 8 minutes of the paper-scale grid's report, on one
    core). When they cannot be had here the report computes them, and fails there as it would have."""
    res = run_cached(spec)
    if "summary" in res:
        try:
            res["derived"] = derived(Path(spec["out_dir"]), res["summary"])
        except Exception:  # noqa: BLE001 - computed again by the report, which says what broke
            pass
    return res


def plan(experiments: list[Experiment], seeds: str, out: Path, code: str, plots: bool = False,
         engine: str = "trio") -> list[dict]:
    """Every run of every experiment, each tagged with its experiment and its content key (the report
    draws its own plots from the runs' CSVs: a run draws its own only with ``plots``)."""
    specs = []
    for e in experiments:
        for spec in compare.plan_runs("default", e.schedulers, e.policies, e.seeds or seeds, e.overrides,
                                      str(out / "runs"), plots, engine):
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
    given = args.seeds if args.seeds is not None else ("1,2" if args.quick else "1,2,3")  # '' is refused, as by compare
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
        (f" --only {args.only}" if args.only else "") + (f" --engine {args.engine}" if args.engine != "trio" else "")
    if getattr(args, "report_only", False):
        evaluated = report_only(args.paper, experiments, seeds, out, quick=args.quick, command=command)
        failures: list[dict] = []
    else:
        jobs = args.jobs if args.jobs and args.jobs > 0 else 1
        evaluated, failures = reproduce(args.paper, experiments, seeds, out, jobs=jobs, cluster=args.cluster,
                                        plots=args.plots, engine=args.engine,
                                        quick=args.quick, command=command)
    table = Table(title=f"{args.paper}: claims", header_style="bold")
    for c in ("claim", "paper", "ours (median seed)", "verdict"):
        table.add_column(c, overflow="fold")
    for v in evaluated:
        table.add_row(v["id"], paper_cell(v), num(v["ours"]), v["verdict"])
    Console(width=max(Console().width, 120)).print(table)
    print(f"report: {out / 'report.md'} (verdicts.json, runs.csv, plots; run folders under {out / 'runs'})")
    return compare.failed_status(failures, f"{len(failures)} runs failed (see above)")


def commit() -> str:
    """The commit of the checkout fedemu runs from, with "+changes" when its code differs from it."""
    try:
        head = subprocess.run(["git", "-C", str(PACKAGE), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                              text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(PACKAGE), "status", "--porcelain", "--untracked-files=no", "--",
                                *LAYER_DIRS, "*.py"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown (not a git checkout)"
    return head + ("+changes" if dirty else "")


def _duration(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s"


def _info(command: str, seeds: str, quick: bool, wall: float, runs: str) -> dict:
    return {"command": command, "seeds": seeds, "scale": "--quick: scaled down, see each experiment" if quick else
            "paper scale", "commit": commit(), "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC"), "wall": _duration(wall), "runs": runs}


def reproduce(paper: str, experiments: list[Experiment], seeds: str, out: Path, *, jobs: int = 1,
              cluster: str | None = None, quick: bool = False, command: str = "",
              plots: bool = False, engine: str = "trio") -> tuple[list[dict], list[dict]]:
    """Run ``experiments`` (finished runs reused), write OUT/report.md, verdicts.json, runs.csv and the plots;
    returns (the verdicts, the failed runs)."""
    started = time.monotonic()
    title = PAPERS[paper][0]
    claims = load_claims(paper)
    missing = sorted({e.overrides["trace"] for e in experiments if e.overrides.get("trace") and
                      not Path(e.overrides["trace"]).exists()})
    if missing:
        raise ConfigError(f"trace {missing[0]} is absent (the papers' traces live in ../shared/data)")
    with pool.connected(cluster) as client:  # before anything is written: a bad address leaves nothing
        _prepare_out(out, paper)
        specs = plan(experiments, seeds, out, code_version(), plots, engine)
        unique = list({s["key"]: s for s in specs}.values())
        console = Console(stderr=True)
        where = f"the Dask cluster at {cluster}" if cluster else f"{min(jobs, len(unique))} process(es)"
        console.print(f"reproduce {paper}: {len(experiments)} experiments, {len(unique)} runs on {where}; output "
                      f"in {out}")

        def note(_, res):
            if "error" in res:
                console.print(f"run {res['name']} failed: {res['error'].strip().splitlines()[-1]}")

        done = pool.run_all(unique, run_and_derive, jobs=jobs, cluster=client, on_result=note)
    results = {s["key"]: r for s, r in zip(unique, done)}
    cached = sum(1 for r in done if r.get("cached"))
    if cached:
        console.print(f"{cached} of {len(unique)} runs reused from {out / 'runs'} (same scenario, parameters, seed "
                      "and code)")
    here = commit()
    rows: dict[tuple, list[dict]] = {}
    for s in specs:
        res = results[s["key"]]
        if "summary" in res:
            row = compare.row_of(s, res["summary"])
            row.update(res["derived"] if "derived" in res else derived(Path(s["out_dir"]), res["summary"]))
            row["commit"] = _ran_at(Path(s["out_dir"]), here, res.get("cached"))
            row["run_dir"] = Path(s["out_dir"]).relative_to(out).as_posix()  # runs.csv reads the same anywhere
            rows.setdefault((s["experiment"], s["scheduler"], s["policy"]), []).append(row)
    if rows:
        compare.write_csv(out / "runs.csv", [{"experiment": e, **r} for (e, _, _), rs in rows.items() for r in rs])
    results["_parts"] = draw(claims, experiments, specs, results, out)
    ran = f"{len(unique)} runs ({cached} reused from an earlier invocation)" if cached else f"{len(unique)} runs"
    write_report(out, paper, title, claims, experiments, specs, rows, results,
                 _info(command or f"fedemu reproduce {paper}", seeds, quick, time.monotonic() - started, ran))
    return json.loads((out / "verdicts.json").read_text()), [r for r in done if "error" in r]


def _ran_at(folder: Path, here: str, cached: bool | None) -> str:
    """The commit a run ran at: written beside it when it runs, read back when it is reused."""
    path = folder / "commit"
    if cached and path.exists():
        return path.read_text().strip()
    write_text(path, here + "\n")
    return here


def draw(claims: dict, experiments: list[Experiment], specs: list[dict], results: dict, out: Path) -> dict:
    """Each experiment's plots, a panel per seed, the paper's numbers marked; returns the allocation parts'
    means per experiment that draws them."""
    parts = {}
    for e in experiments:
        mine = [s for s in specs if s["experiment"] == e.name]
        finished = {s["name"] for s in mine if "summary" in results[s["key"]]}
        if not finished:
            continue
        (out / e.name).mkdir(exist_ok=True)
        plot_cdf_by_seed(out / e.name / "delay_cdf.png", mine, finished, ("jobs.csv", "delay_s"),
                         "delay in job response time (s)", log=True, title=f"{e.name}: job delay",
                         marks=paper_marks(claims["claims"], e.name))
        plot_cdf_by_seed(out / e.name / "utilization_cdf.png", mine, finished, ("utilization.csv", "utilization"),
                         "utilization (1 s buckets)", log=False, title=f"{e.name}: utilization")
        if "allocation" in e.plots:
            plot_cdf_by_seed(out / e.name / "allocation_cdf.png", mine, finished, ("tasks.csv", "allocation_s"),
                             "allocation time of a task (s)", log=True, title=f"{e.name}: allocation time",
                             marks=paper_marks(claims["claims"], e.name, prefix="alloc_allocation_"))
            parts[e.name] = plot_allocation_parts(out / e.name / "allocation_parts.png", mine, finished)
    return parts


def read_runs(path: Path) -> dict[tuple, list[dict]]:
    """runs.csv back as the per-seed rows the claims read: numbers as numbers, empty cells as None."""
    rows: dict[tuple, list[dict]] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            row: dict = {"counters": {}, "fairness": {}}
            for k, v in r.items():
                value = None if v == "" else _number(v)
                if k.startswith("counter:"):
                    row["counters"][k[8:]] = value
                elif k.startswith("fair:"):
                    row["fairness"][k[5:]] = value
                else:
                    row[k] = value
            row["seed"] = int(row["seed"])
            rows.setdefault((r["experiment"], r["scheduler"], r["policy"]), []).append(row)
    return rows


def _number(text: str):
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def report_only(paper: str, experiments: list[Experiment], seeds: str, out: Path, *, quick: bool = False,
                command: str = "") -> list[dict]:
    """Judge the claims again from OUT/runs.csv (the runs an earlier reproduction recorded), running nothing;
    the plots already in OUT stay."""
    path = out / "runs.csv"
    if not path.is_file():
        raise ConfigError(f"--report-only: {path} is not there; run the reproduction first (or give its --out)")
    rows = read_runs(path)
    own = {e.name: (e.seeds or seeds).split(",") for e in experiments}  # an experiment's own seeds (the example's 8)
    rows = {k: [r for r in v if str(r["seed"]) in own[k[0]]] for k, v in rows.items() if k[0] in own}
    specs = plan(experiments, seeds, out, code_version())
    at = sorted({str(r.get("commit")) for rs in rows.values() for r in rs})
    info = _info(command + " --report-only", seeds, quick, 0.0, f"judged again from runs.csv without running "
                 f"(the runs ran at {', '.join(at)})")
    write_report(out, paper, PAPERS[paper][0], load_claims(paper), experiments, specs, rows,
                 {s["key"]: {"summary": True} for s in specs}, info)
    return json.loads((out / "verdicts.json").read_text())
