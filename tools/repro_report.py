"""The report of `fedemu reproduce`: report.md (claims, verdicts, root causes, sensitivity cases, experiments
with their tables and plots) and verdicts.json, from the per-seed rows of the runs.

The report holds no wall-clock figure, so the same runs give the same report whichever executor ran
them (``runs.csv`` has the wall times)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from . import compare, verdict
from .atomic import atomic_write, write_text
from .evaluate import evaluate_all, num, terms
from .experiments import DATA, VARIANTS, Experiment

PACKAGE = Path(__file__).resolve().parents[1]

EXP_COLUMNS = (("scheduler", "scheduler"), ("policy", "policy"), ("done", None), ("unschedulable", "unschedulable"),
               ("tasks dropped", "tasks_dropped"),
               ("p50 s", "delay_p50_s"), ("p90 s", "delay_p90_s"), ("p99 s", "delay_p99_s"),
               ("max s", "delay_max_s"), ("short p99 s", "short_p99_s"), ("long p99 s", "long_p99_s"),
               ("util", "utilization_mean"), ("invalid launches", "invalid_requests"),
               ("alloc mean s", "alloc_allocation_s"), ("alloc p99 s", "alloc_allocation_p99_s"))
TALLIED = (verdict.REPRODUCES, verdict.WRONG_REASON, verdict.SAME, verdict.SAME_ORDER, verdict.DIFFERS)
PARTS = (("framework queueing", "framework_queueing_s"), ("processing", "processing_s"),
         ("worker queueing", "worker_queueing_s"), ("communication", "communication_s"))


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _exp_table(means: list[dict]) -> str:
    rows = []
    for m in means:
        cells = []
        for _, key in EXP_COLUMNS:
            cells.append(f"{num(m['jobs_completed'])}/{num(m['jobs'])}" if key is None else
                         (m[key] if key in ("scheduler", "policy") else num(m.get(key))))
        rows.append(cells)
    return md_table([t for t, _ in EXP_COLUMNS], rows)


def shown(value) -> str:
    """An override as the report prints it: paths inside fedemu relative to it, the papers' data as
    ../shared/data/..., so the report reads the same wherever the checkout is."""
    text = str(value)
    for root, alias in ((str(DATA), "../shared/data"), (str(PACKAGE) + "/", "")):
        text = text.replace(root, alias)
    return text


def paper_cell(c: dict) -> str:
    if "paper" not in c:
        return "-"
    if c["kind"] == "range":
        return f"{num(float(c['paper'][0]))} to {num(float(c['paper'][1]))}"
    prefix = {"at_least": "≥ ", "at_most": "≤ ", "occurs": "one outcome: "}.get(c["kind"], "")
    return prefix + num(c["paper"])


def verdict_cell(r: dict) -> str:
    out = f"**{r['verdict']}**"
    return out + (f" (measured: {r['measured']})" if r.get("measured") else "")


def tally(claims: list[dict], evaluated: dict) -> str:
    """``reproduces N, ..., differs N in K root causes; not testable N (not counted)``."""
    counts: dict[str, int] = {}
    for c in claims:
        v = evaluated[c["id"]]["verdict"]
        counts[v] = counts.get(v, 0) + 1
    parts = [f"{v} {counts[v]}" for v in TALLIED if counts.get(v)]
    causes = {c.get("cause") or c["id"] for c in claims if evaluated[c["id"]]["verdict"] == verdict.DIFFERS}
    if counts.get(verdict.DIFFERS):
        parts[-1] += f" (in {len(causes)} root cause{'s' if len(causes) != 1 else ''})"
    rest = [f"{v} {n}" for v, n in sorted(counts.items()) if v not in TALLIED]
    return ", ".join(parts) + (f"; not counted: {', '.join(rest)}" if rest else "")


RULES = f"""Verdict rules (`tools/verdict.py`; numbers below {verdict.FLOOR:g} count as {verdict.FLOOR:g}):

- **ratio** (the paper gives A/B): a ratio goes up (> {verdict.TIE}), down (< 1/{verdict.TIE}) or neither (the tie
  band). Ours in another direction than the paper's: *differs*; same direction and within a factor
  {verdict.TOL:g} of the paper's number: *reproduces*; same direction otherwise: *same direction*.
- **at_least** (the paper gives a lower bound, or only says A exceeds B: bound = baseline = 1): ours at least
  the bound and beyond the tie band above the baseline: *reproduces*; beyond the tie band only: *same
  direction*; else *differs*. **at_most** is the mirror image.
- **value** (a single number): within a factor {verdict.TOL:g} (or the claim's `tol`): *reproduces*; within a
  factor {verdict.ORDER:g} (or the claim's `order`): *same order*; else *differs*. **range** (the paper gives
  lo to hi): inside: *reproduces*; within a factor {verdict.ORDER:g} of the nearer end: *same order*; else *differs*.
- **occurs** (a randomised worked example): the paper's outcome is among the seeds' outcomes: *reproduces*.
- Options: `exact` (a worked example: equal or *differs*); `abs_tol` (probabilities and shares: within that
  much, else *differs*); `offset` (a slowdown is judged by its queueing part, slowdown - 1).
- Seeds: each seed gets its own verdict (a ratio divides one seed's terms); the claim's verdict is the best
  one that at least two thirds of the seeds reach (two of three). "ours" is the mean over seeds (a ratio
  of means), shown for reading; the evidence lists every seed's value and verdict.
- *reproduces for the wrong reason*: it reproduces while every claim naming its mechanism differs.
- *not testable* (not counted): the paper contradicts the claim, or its effect sits below the paper's own
  seed noise; the measured verdict is shown beside it. *not measured*: a run it needs failed or was not
  part of this reproduction."""


def causes_section(claims: dict, evaluated: dict) -> list[str]:
    """The claims not reproduced, grouped by root cause (each cause counted once), with its evidence."""
    causes = claims.get("causes", {})
    groups: dict[str, list[dict]] = {}
    for c in claims["claims"]:
        if evaluated[c["id"]]["verdict"] in (verdict.REPRODUCES, verdict.NOT_MEASURED, verdict.NOT_TESTABLE):
            continue
        groups.setdefault(c.get("cause") or "", []).append(c)
    if not groups:
        return []
    md = ["## Not reproduced, by root cause", "",
          "Each cause once, with the claims it accounts for and the experiment in this report that shows it:", ""]
    for key in sorted(groups, key=lambda k: (k == "", -len(groups[k]), k)):
        members = groups[key]
        cause = causes.get(key)
        head = f"### {cause['title']}" if cause else "### Claims with their own reason"
        md += [head, ""]
        if cause:
            md += [cause["text"], ""]
        for c in members:
            why = f": {c['why']}" if c.get("why") else ""
            md.append(f"- **{c['id']}** ({evaluated[c['id']]['verdict']}){why}")
        md.append("")
    return md


def sensitivity_section(claims: dict, evaluated: dict, rows: dict, experiments: list[Experiment]) -> list[str]:
    """Per sensitivity variant (experiments named ``NAME-VARIANT``): every claim evaluated on it beside the
    main set-up, and which claims move."""
    names = {e.name for e in experiments}
    md: list[str] = []
    for variant, text in VARIANTS.items():
        mine = {e.name for e in experiments if e.variant == variant}
        if not mine:
            continue
        other = evaluate_all(claims["claims"], rows, rename=lambda x, v=variant: f"{x}-{v}")
        table, moved = [], 0
        for c in claims["claims"]:
            if "needs" in c or c.get("not_testable"):
                continue
            exps = {t[2] for t in terms(c)}
            if not all(f"{x}-{variant}" in names for x in exps):
                continue
            a, b = evaluated[c["id"]], other[c["id"]]
            change = a["verdict"] != b["verdict"]
            moved += change
            table.append([c["id"], num(a["ours"]), a["verdict"], num(b["ours"]), b["verdict"],
                          "**moves**" if change else ""])
        md += [f"## Sensitivity: {variant}", "", text, "",
               f"{moved} of {len(table)} claims change verdict:", "",
               md_table(["claim", "ours (main set-up)", "verdict", f"ours ({variant})", "verdict", ""], table), ""]
    return md


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
                cells += [num(a), num(b), num(b / max(a, verdict.FLOOR)) if None not in (a, b) else "-"]
            out.append(cells)
    if not out:
        return ""
    return md_table(["workload", "policy", "Megha p50 s", "PigeonC p50 s", "p50 ratio", "Megha p99 s", "PigeonC p99 s",
                     "p99 ratio (PigeonC/Megha)"], out)


def _floats(path: Path, columns: tuple[str, ...]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {c: [] for c in columns}
    if not path.exists():
        return out
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if all(r.get(c, "") != "" for c in columns):
                for c in columns:
                    out[c].append(float(r[c]))
    return out


def plot_allocation(specs: list[dict], results: dict, out: Path) -> bool:
    """allocation_cdf.png (each task's allocation time, seeds pooled) and allocation_parts.png (the mean of
    each part, Fig. 7 of the workshop paper) for one experiment's runs; False when no run has tasks."""
    from .results import agg_figure, plot_cdfs

    cdf: dict[str, list[float]] = {}
    per_run: dict[str, list[list[float]]] = {}
    for s in specs:
        if "summary" not in results[s["key"]]:
            continue
        label = s["scheduler"] if s["policy"] == "-" else f"{s['scheduler']}/{s['policy']}"
        cols = _floats(Path(s["out_dir"]) / "tasks.csv", ("allocation_s",) + tuple(k for _, k in PARTS))
        cdf.setdefault(label, []).extend(cols["allocation_s"])
        per_run.setdefault(label, []).append([float(np.mean(cols[k])) if cols[k] else 0.0 for _, k in PARTS])
    parts = {label: np.mean(np.array(runs), axis=0) for label, runs in per_run.items()}
    if not any(cdf.values()):
        return False
    plot_cdfs(out / "allocation_cdf.png", cdf, "allocation time of a task (s)", log=True,
              title="Allocation time, all seeds pooled")
    fig = agg_figure(figsize=(6, 4))
    ax = fig.add_subplot()
    labels = list(parts)
    bottom = np.zeros(len(labels))
    for i, (name, _) in enumerate(PARTS):
        vals = np.array([parts[lb][i] for lb in labels])
        ax.bar(labels, vals, bottom=bottom, label=name)
        bottom += vals
    ax.set_ylabel("mean per task (s)")
    ax.set_title("Allocation time by part (mean over tasks and seeds)")
    ax.legend()
    fig.tight_layout()
    with atomic_write(out / "allocation_parts.png", "wb") as f:
        fig.savefig(f, format="png", dpi=100)
    return True


def write_report(out: Path, paper: str, title: str, claims: dict, experiments: list[Experiment], specs: list[dict],
                 rows: dict, results: dict, command: str, quick: bool, seeds: str) -> str:
    evaluated = evaluate_all(claims["claims"], rows)
    main = claims["claims"]
    md = [f"# Reproducing {paper}: {title}", "",
          f"Produced by `{command}` ({'--quick: scaled down, see each experiment' if quick else 'paper scale'}; "
          f"seeds {seeds}).", "",
          "Verdicts: " + tally(main, evaluated), "",
          "## Claims", "",
          md_table(["claim", "section", "the paper says", "paper", "ours", "verdict", "evidence"],
                   [[c["id"], c["section"], c["text"], paper_cell(c), num(evaluated[c["id"]]["ours"]),
                     verdict_cell(evaluated[c["id"]]), evaluated[c["id"]]["evidence"]] for c in main]), "",
          RULES, ""]
    md += causes_section(claims, evaluated)
    untestable = [c for c in main if evaluated[c["id"]]["verdict"] == verdict.NOT_TESTABLE]
    if untestable:
        md += ["## Not testable", ""] + [f"- **{c['id']}**: {c['not_testable']}" for c in untestable] + [""]
    md += sensitivity_section(claims, evaluated, rows, experiments)
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
        md += ["Overrides: `" + " ".join(f"--set {k}={shown(v)}" for k, v in e.overrides.items()) + "`", ""]
        if means:
            md += [_exp_table(means), ""]
            if (out / e.name / "delay_cdf.png").exists():
                md += [f"![delay CDF]({e.name}/delay_cdf.png) ![utilization CDF]({e.name}/utilization_cdf.png)", ""]
            if (out / e.name / "allocation_cdf.png").exists():
                md += [f"![allocation CDF]({e.name}/allocation_cdf.png) "
                       f"![allocation parts]({e.name}/allocation_parts.png)", ""]
        else:
            md += ["No run of this experiment completed.", ""]
        failed = [s["name"] for s in specs if s["experiment"] == e.name and "summary" not in results[s["key"]]]
        if failed:
            md += [f"Failed runs: {', '.join(failed)} (see the command's stderr).", ""]
    report = "\n".join(md)
    write_text(out / "report.md", report)
    write_text(out / "verdicts.json", json.dumps(
        [{"id": c["id"], "section": c["section"], "kind": c["kind"], "paper": c.get("paper"),
          **{k: v for k, v in evaluated[c["id"]].items()}} for c in main], indent=1, default=str) + "\n")
    return report
