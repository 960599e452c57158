"""`fedemu reproduce PAPER`: a paper's experiments (``tools/experiments.py``), then every claim of
``tools/claims/PAPER.json`` with the paper's number, ours, a verdict (``tools/verdict.py``) and the
evidence, written to ``OUT/report.md`` with plots.

Choices made here:
- Runs are content-addressed: a run's folder is ``OUT/runs/<key>``, the key a hash of (scenario,
  overrides, seed, code version), where the code version hashes fedemu's own source and data files. A
  run whose folder already holds its key and summary is not run again, so an interrupted reproduction
  resumes where it stopped, a run two experiments share runs once, and a change of code runs afresh.
- Our number for a claim comes from the mean over seeds of each run's figure (the 2023 paper reports
  "the average values of the delays that were reported in the three runs"); the evidence lists every
  seed's value.
- report.md holds no wall-clock figure, so the same runs give the same report whichever executor ran
  them (``runs.csv`` has the wall times).
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from fedemu.fabric.errors import ConfigError, unknown_name

from . import compare, outdir, pool, verdict
from .atomic import atomic_write, write_text
from .experiments import PAPERS, SCARCITY_LEVELS, Experiment

CLAIMS_DIR = Path(__file__).with_name("claims")
PACKAGE = Path(__file__).resolve().parents[1]
LAYER_DIRS = ("actors", "fabric", "policies", "scenarios", "tools")
# the folders of fedemu's own code and data: the root, each layer and every folder in it (a scheduler's
# package, the cost models), but not the claims, the report side's data
SOURCE_DIRS = ("",) + tuple(sorted(
    str(d.relative_to(PACKAGE)) for layer in LAYER_DIRS for d in (PACKAGE / layer, *(PACKAGE / layer).rglob("*"))
    if d.is_dir() and d.name not in ("claims", "__pycache__")))
# the modules that only plan runs and read their results (the overrides they choose are part of each key)
REPORT_SIDE = frozenset({"tools/reproduce.py", "tools/verdict.py", "tools/experiments.py", "tools/pool.py"})
MARKER = "reproduce.json"
ZERO_QUEUE_S = 0.01  # a job "did not queue" when its delay is under 10 ms (a few network hops)
COMPARABLE = 0.25  # a scarcity level that rejects more of the jobs than this no longer runs the same workload
OPTIONS = ("baseline", "tol", "tie", "order")  # a claim's own verdict settings
TERM = re.compile(r"^\s*([\w.-]+)/([\w.-]+)@([\w.-]+):(\w+)\s*$")


# ---- claims ---------------------------------------------------------------------------------------
def load_claims(paper: str) -> dict:
    """The paper's claims file, checked: every claim has an id, section, text, kind and paper number."""
    path = CLAIMS_DIR / f"{paper}.json"
    data = json.loads(path.read_text())
    seen = set()
    for c in data["claims"]:
        for key in ("id", "section", "text", "kind"):
            if key not in c:
                raise ValueError(f"{path}: claim {c.get('id', '?')}: missing {key!r}")
        if c["id"] in seen:
            raise ValueError(f"{path}: claim id {c['id']!r} repeats")
        seen.add(c["id"])
        if "needs" not in c:
            if c["kind"] not in verdict.KINDS or not isinstance(c.get("paper"), (int, float)):
                raise ValueError(f"{path}: claim {c['id']}: kind must be one of {verdict.KINDS} with a number 'paper'")
            for term in c["ours"].split(" / "):
                if not TERM.match(term):
                    raise ValueError(f"{path}: claim {c['id']}: {term!r} is not scheduler/policy@experiment:metric")
    return data


def _terms(claim: dict) -> list[tuple[str, str, str, str]]:
    return [TERM.match(t).groups() for t in claim["ours"].split(" / ")]


def evaluate(claim: dict, rows: dict) -> dict:
    """Our number for ``claim`` from ``rows[(experiment, scheduler, policy)]`` (per-seed rows), its verdict
    and the evidence. A ratio of two terms is the ratio of their seed means."""
    if "needs" in claim:
        return {"ours": None, "verdict": f"needs {claim['needs']}", "evidence": claim.get("why", "")}
    values, evidence = [], []
    for sched, pol, exp, metric in _terms(claim):
        members = rows.get((exp, sched, pol), [])
        seeds = [(m["seed"], m.get(metric)) for m in members]
        if not seeds or any(v is None for _, v in seeds):
            values.append(None)
            evidence.append(f"{sched}/{pol}@{exp} {metric}: not measured")
            continue
        mean = sum(v for _, v in seeds) / len(seeds)
        values.append(mean)
        per = ", ".join(f"s{s}: {_num(v)}" for s, v in seeds)
        evidence.append(f"{sched}/{pol}@{exp} {metric} = {_num(mean)}" + (f" ({per})" if len(seeds) > 1 else ""))
    ours = None
    if all(v is not None for v in values):
        ours = values[0]
        for v in values[1:]:
            ours = ours / max(v, verdict.FLOOR)
    kw = {k: claim[k] for k in OPTIONS if k in claim}
    return {"ours": ours, "verdict": verdict.verdict(claim["kind"], claim["paper"], ours, **kw),
            "evidence": "; ".join(evidence)}


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
        return {"name": spec["name"], "summary": json.loads(summary_file.read_text()), "cached": True}
    res = compare.run_one(spec)
    if "summary" in res:
        write_text(key_file, spec["key"])
        res["summary"] = json.loads(summary_file.read_text())  # as a cached run would see it
    return res


def _num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float) and (abs(v) >= 1e5 or (v != 0 and abs(v) < 1e-3)):
        return f"{v:.3g}"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def derived(run_dir: Path, summary: dict) -> dict:
    """Figures the claims need beyond compare's row: slowdowns, the share of jobs that did not queue, the
    sum of completion times, and the parts of the allocation time as shares."""
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
        out["zero_queue_share"] = float((delay < ZERO_QUEUE_S).mean()) if len(delay) else None
        for name, mask in (("short", short), ("long", ~short)):
            for p in (50, 90, 99):  # the Pigeon paper's slowdown: percentile of JRT over percentile of ideal JRT
                ok = mask.any() and np.percentile(ideal[mask], p) > 0
                out[f"{name}_slowdown_p{p}"] = float(np.percentile(jrt[mask], p) / np.percentile(ideal[mask], p)) \
                    if ok else None
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


# ---- report -----------------------------------------------------------------------------------------
EXP_COLUMNS = (("scheduler", "scheduler"), ("policy", "policy"), ("done", None), ("unschedulable", "unschedulable"),
               ("p50 s", "delay_p50_s"), ("p90 s", "delay_p90_s"), ("p99 s", "delay_p99_s"),
               ("short p99 s", "short_p99_s"), ("long p99 s", "long_p99_s"), ("util", "utilization_mean"),
               ("invalid launches", "invalid_requests"),
               ("alloc mean s", "alloc_allocation_s"), ("alloc p99 s", "alloc_allocation_p99_s"))


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _exp_table(means: list[dict]) -> str:
    rows = []
    for m in means:
        cells = []
        for title, key in EXP_COLUMNS:
            cells.append(f"{_num(m['jobs_completed'])}/{_num(m['jobs'])}" if key is None else
                         (m[key] if key in ("scheduler", "policy") else _num(m.get(key))))
        rows.append(cells)
    return _md_table([t for t, _ in EXP_COLUMNS], rows)


def _verdict_rows(claims: list[dict], results: dict) -> list[list[str]]:
    rows = []
    for c in claims:
        r = results[c["id"]]
        paper = "-" if "paper" not in c else (("≥ " if c["kind"] == "at_least" else "≤ " if c["kind"] == "at_most"
                                                else "") + _num(c["paper"]))
        rows.append([c["id"], c["section"], c["text"], paper, _num(r["ours"]), f"**{r['verdict']}**", r["evidence"]])
    return rows


RULES = f"""Verdict rules (`tools/verdict.py`; numbers below {verdict.FLOOR:g} count as {verdict.FLOOR:g}):

- **ratio** (the paper gives A/B): a ratio goes up (> {verdict.TIE}), down (< 1/{verdict.TIE}) or neither (the tie
  band). Ours in another direction than the paper's: *differs*; same direction and within a factor
  {verdict.TOL:g} of the paper's number: *reproduces*; same direction otherwise: *same direction*.
- **at_least** (the paper gives a lower bound, or only says A exceeds B: bound = baseline = 1): ours at least
  the bound and beyond the tie band above the baseline: *reproduces*; beyond the tie band only: *same
  direction*; else *differs*. **at_most** is the mirror image.
- **value** (a single number): within a factor {verdict.TOL:g} (or the claim's own `tol`): *reproduces*; within a
  factor {verdict.ORDER:g} (the same order of magnitude; or the claim's `order`): *same direction*; else *differs*.
  An exact number (the worked example) sets `tol` and `order` to 1.001: it reproduces or differs.
- *not measured*: a run it needs failed or was not part of this reproduction; *needs issue N*: not built yet.

Our number is the mean over seeds of each run's figure; a ratio divides two such means. The evidence
lists each term with every seed's value. A claim may set its own `tol`, `order`, `tie` or `baseline` (shown in
tools/claims/PAPER.json with the reason)."""


def scarcity_section(rows: dict) -> tuple[str, list[tuple[float, float | None]]]:
    """How the Megha-vs-PigeonC conclusion (p99 and median) moves with constraint scarcity."""
    lines, points = [], []
    table = []
    for s in SCARCITY_LEVELS:
        exp = f"scarcity-{s:g}"
        mg, pc = rows.get((exp, "megha", "random")), rows.get((exp, "pigeonc", "random"))
        if not mg or not pc:
            continue
        mean = lambda rs, k: (sum(r[k] for r in rs) / len(rs)) if all(r.get(k) is not None for r in rs) else None  # noqa: E731
        p99m, p99p = mean(mg, "delay_p99_s"), mean(pc, "delay_p99_s")
        p50m, p50p = mean(mg, "delay_p50_s"), mean(pc, "delay_p50_s")
        ratio = p99p / max(p99m, verdict.FLOOR) if None not in (p99m, p99p) else None
        ratio50 = p50p / max(p50m, verdict.FLOOR) if None not in (p50m, p50p) else None
        points.append((s, ratio))
        d = verdict.direction(ratio) if ratio is not None else None
        holds = {1: "Megha better", -1: "PigeonC better", 0: "no difference", None: "-"}[d]
        rejected = mean(mg, "unschedulable_share")
        if rejected is not None and rejected > COMPARABLE:
            holds += f" (not comparable: over {COMPARABLE:.0%} of jobs rejected)"
        table.append([f"{s:g}", _num(rejected), _num(p50m), _num(p50p), _num(ratio50),
                      _num(p99m), _num(p99p), _num(ratio), holds])
    if not table:
        return "", points
    lines.append(_md_table(["scarcity", "unschedulable share", "Megha p50 s", "PigeonC p50 s", "p50 ratio",
                            "Megha p99 s", "PigeonC p99 s", "p99 ratio PigeonC/Megha", "p99 conclusion"], table))
    kinds = {r[-1] for r in table if "not comparable" not in r[-1]}
    lines.append("")
    lines.append(f"A job with a task no machine can serve is rejected at submission; levels that reject more than "
                 f"{COMPARABLE:.0%} of the jobs (the unschedulable share) run a different, lighter workload and are "
                 "left out of the verdict below.")
    lines.append("")
    lines.append("The p99 conclusion is the same at every comparable scarcity level: robust to the stand-in table."
                 if len(kinds) == 1 else
                 "The p99 conclusion changes with scarcity: with this workload it is an artefact of the stand-in "
                 "table, not a property of the schedulers alone." if kinds else
                 "No level is comparable.")
    return "\n".join(lines), points


def ratio_table(rows: dict, experiments: list[Experiment]) -> str:
    """Megha against PigeonC per workload and policy: p50 and p99 delays (seed means) and their ratios."""
    out = []
    for e in experiments:
        if e.group != "main" or e.schedulers != "megha,pigeonc":
            continue
        for pol in e.policies.split(","):
            mg, pc = rows.get((e.name, "megha", pol)), rows.get((e.name, "pigeonc", pol))
            if not mg or not pc:
                continue
            m = {k: [sum(r[k] for r in rs) / len(rs) if all(r.get(k) is not None for r in rs) else None
                     for rs in (mg, pc)] for k in ("delay_p50_s", "delay_p99_s")}
            cells = [e.name, pol]
            for k in ("delay_p50_s", "delay_p99_s"):
                a, b = m[k]
                cells += [_num(a), _num(b), _num(b / max(a, verdict.FLOOR)) if None not in (a, b) else "-"]
            out.append(cells)
    if not out:
        return ""
    return _md_table(["workload", "policy", "Megha p50 s", "PigeonC p50 s", "p50 ratio", "Megha p99 s", "PigeonC p99 s",
                      "p99 ratio (PigeonC/Megha)"], out)


def _plot_scarcity(path: Path, points) -> bool:
    pts = [(s, r) for s, r in points if r is not None]
    if not pts:
        return False
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.plot([s for s, _ in pts], [r for _, r in pts], marker="o")
    ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("constraint_scarcity (machine fractions divided by this)")
    ax.set_ylabel("p99 delay, PigeonC / Megha")
    ax.set_title("Megha vs PigeonC across constraint scarcity")
    fig.tight_layout()
    with atomic_write(path, "wb") as f:
        fig.savefig(f, format="png", dpi=100)
    return True


def write_report(out: Path, paper: str, title: str, claims: dict, experiments: list[Experiment], specs: list[dict],
                 rows: dict, results: dict, command: str, quick: bool, seeds: str) -> str:
    evaluated = {c["id"]: evaluate(c, rows) for c in claims["claims"]}
    counts: dict[str, int] = {}
    for r in evaluated.values():
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    md = [f"# Reproducing {paper}: {title}", "",
          f"Produced by `{command}` ({'--quick: scaled down, see each experiment' if quick else 'paper scale'}; "
          f"seeds {seeds}).", "",
          "Verdicts: " + ", ".join(f"{v} {n}" for v, n in sorted(counts.items())), "",
          "## Claims", "",
          _md_table(["claim", "section", "the paper says", "paper", "ours", "verdict", "evidence"],
                    _verdict_rows(claims["claims"], evaluated)), "", RULES, ""]
    differs = [c for c in claims["claims"] if evaluated[c["id"]]["verdict"] not in (verdict.REPRODUCES,)
               and c.get("why")]
    if differs:
        md += ["## Why ours may differ", "",
               "For each claim not reproduced, what is known to differ between the paper's set-up and ours "
               "(the evidence column above has our numbers):", ""]
        md += [f"- **{c['id']}** ({evaluated[c['id']]['verdict']}): {c['why']}" for c in differs]
        md.append("")
    ratios = ratio_table(rows, experiments)
    if ratios:
        md += ["## Megha against PigeonC: delay ratios", "", "Above 1: Megha's delay is the lower.", "", ratios, ""]
    if claims.get("notes"):
        md += ["## Notes on the set-up", ""] + [f"- {n}" for n in claims["notes"]] + [""]
    md += ["## Experiments", ""]
    for e in experiments:
        means = compare.mean_rows([r for key, rs in rows.items() if key[0] == e.name for r in rs])
        md += [f"### {e.name}: {e.title}", ""]
        if e.note:
            md += [f"{e.note}.", ""]
        md += ["Overrides: `" + " ".join(f"--set {k}={v}" for k, v in e.overrides.items()) + "`", ""]
        if means:
            md += [_exp_table(means), ""]
            if (out / e.name / "delay_cdf.png").exists():
                md += [f"![delay CDF]({e.name}/delay_cdf.png) ![utilization CDF]({e.name}/utilization_cdf.png)", ""]
        else:
            md += ["No run of this experiment completed.", ""]
        failed = [s["name"] for s in specs if s["experiment"] == e.name and "summary" not in results[s["key"]]]
        if failed:
            md += [f"Failed runs: {', '.join(failed)} (see the command's stderr).", ""]
    if any(e.group == "scarcity" for e in experiments):
        text, points = scarcity_section(rows)
        md += ["## Constraint scarcity: does Megha-vs-PigeonC survive the unknown constraint table?", "",
               "The paper's constraint distributions (Sharma et al. 2011) are not available; our stand-in table "
               "decides how scarce constrained machines are. `constraint_scarcity=S` divides every machine "
               "fraction of the table by S (capped at 1): S < 1 makes constrained machines plentiful, S > 1 "
               "scarce. Tasks request constraints as before. Same workload, Random policy:", "", text, ""]
        if _plot_scarcity(out / "scarcity.png", points):
            md += ["![scarcity](scarcity.png)", ""]
    report = "\n".join(md)
    write_text(out / "report.md", report)
    write_text(out / "verdicts.json", json.dumps(
        [{"id": c["id"], "section": c["section"], "kind": c["kind"], "paper": c.get("paper"), **evaluated[c["id"]]}
         for c in claims["claims"]], indent=1, default=str) + "\n")
    return report


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
    seeds = ",".join(str(s) for s in compare._seeds(args.seeds or ("1" if args.quick else "1,2,3")))
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
        table.add_row(v["id"], _num(v["paper"]), _num(v["ours"]), v["verdict"])
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
    pool.require_dask(cluster)
    _prepare_out(out, paper)
    specs = plan(experiments, seeds, out, code_version())
    unique = list({s["key"]: s for s in specs}.values())
    console = Console(stderr=True)
    where = f"the Dask cluster at {cluster}" if cluster else f"{min(jobs, len(unique))} process(es)"
    console.print(f"reproduce {paper}: {len(experiments)} experiments, {len(unique)} runs on {where}; output in {out}")

    def note(_, res):
        if "error" in res:
            console.print(f"run {res['name']} failed: {res['error'].strip().splitlines()[-1]}")

    done = pool.run_all(unique, run_cached, jobs=jobs, cluster=cluster, on_result=note)
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
    write_report(out, paper, title, claims, experiments, specs, rows, results, command or f"fedemu reproduce {paper}",
                 quick, seeds)
    return json.loads((out / "verdicts.json").read_text()), [r for r in done if "error" in r]
