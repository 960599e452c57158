"""The report of `fedemu reproduce`: report.md (provenance, the headline, the rules, every claim with each
seed's value and verdict, root causes, sensitivity cases, per-seed experiment tables and plots) and
verdicts.json, from the per-seed rows of the runs."""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import verdict
from ..run.atomic import write_text
from .evaluate import evaluate_all, num, terms
from .experiments import DATA, VARIANTS, Experiment

PACKAGE = Path(__file__).resolve().parents[2]

EXP_COLUMNS = (("scheduler", "scheduler"), ("policy", "policy"), ("seed", "seed"), ("done", None),
               ("unschedulable", "unschedulable"), ("tasks dropped", "tasks_dropped"),
               ("p50 s", "delay_p50_s"), ("p90 s", "delay_p90_s"), ("p99 s", "delay_p99_s"),
               ("max s", "delay_max_s"), ("short p99 s", "short_p99_s"), ("long p99 s", "long_p99_s"),
               ("util", "utilization_mean"), ("invalid launches", "invalid_requests"),
               ("alloc mean s", "alloc_allocation_s"), ("alloc p99 s", "alloc_allocation_p99_s"))
# per-seed figures shown when a run has them: the busiest worker's offered load (why a PigeonC master backs up)
DIAGNOSTICS = (("busiest worker", "busiest_worker"), ("its group", "busiest_group"),
               ("its offered load", "busiest_rho"), ("fluid wait of the middle job s", "busiest_fluid_s"),
               ("offered load p50", "offered_load_p50"), ("mean", "offered_load_mean"), ("p99", "offered_load_p99"))
TALLIED = (verdict.REPRODUCES, verdict.WRONG_REASON, verdict.SAME, verdict.SAME_ORDER, verdict.DIFFERS)
PLACEHOLDER = re.compile(r"\{([\w.-]+)(?:@([\w-]+))?(?::(\w+))?\}")


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]
    return "\n".join(lines)


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
    p = c["paper"]
    if c["kind"] == "range":
        return f"{num(float(p[0]))} to {num(float(p[1]))}"
    if c["kind"] == "exceeds":
        return f"> 1 (by ≥ {c.get('margin', verdict.MARGIN) - 1:.2g})"
    if isinstance(p, list):
        return f"{num(float(p[0]))} or {num(float(p[1]))}"
    prefix = {"at_least": "≥ ", "at_most": "≤ ", "occurs": "one outcome: "}.get(c["kind"], "")
    return prefix + num(p)


def seeds_cell(r: dict) -> str:
    """Every seed's value and verdict, and their mean."""
    if not r.get("values"):
        return "-"
    parts = [f"s{s} {num(v)} ({r['seeds'].get(s, '-')}{': ' + r['reasons'][s] if r['reasons'].get(s) else ''})"
             for s, v in sorted(r["values"].items())]
    return "; ".join(parts) + f"; mean {num(r['mean'])}"


def verdict_cell(r: dict, flag: str = "") -> str:
    out = f"**{r['verdict']}**" + flag
    n = [v for v in r.get("seeds", {}).values() if v in verdict.RANK]
    if n and r["verdict"] in verdict.RANK:
        out += f" ({sum(verdict.RANK[v] >= verdict.RANK[r['verdict']] for v in n)} of {len(n)} seeds)"
    if r.get("why_wrong"):
        out += f" (mechanism differs: {', '.join(r['why_wrong'])})"
    return out + (f" (measured: {r['measured']})" if r.get("measured") else "")


def tally(claims: list[dict], evaluated: dict) -> str:
    """``reproduces N, ..., differs N in K root causes; not counted: ...``."""
    counts: dict[str, int] = {}
    for c in claims:
        v = evaluated[c["id"]]["verdict"]
        counts[v] = counts.get(v, 0) + 1
    parts = [f"{v} {counts[v]}" for v in TALLIED if counts.get(v)]
    causes = {c.get("cause") or c["id"] for c in claims if evaluated[c["id"]]["verdict"] == verdict.DIFFERS}
    if counts.get(verdict.DIFFERS):
        parts[-1] += f" (in {len(causes)} root cause{'s' if len(causes) != 1 else ''})"
    rest = [f"{v} {n}" for v, n in sorted(counts.items()) if v not in TALLIED]
    return (", ".join(parts) or "no claim judged") + (f"; not counted: {', '.join(rest)}" if rest else "")


def variant_results(claims: dict, rows: dict, experiments: list[Experiment]) -> dict[str, dict]:
    """Per sensitivity variant: every claim whose experiments all have the variant, evaluated on it."""
    names = {e.name for e in experiments}
    out: dict[str, dict] = {}
    for name in VARIANTS:
        if not any(e.variant == name for e in experiments):
            continue
        other = evaluate_all(claims["claims"], rows, rename=lambda x, v=name: f"{x}-{v}")
        out[name] = {c["id"]: other[c["id"]] for c in claims["claims"] if "needs" not in c and "ours" in c
                     and all(f"{t[2]}-{name}" in names for t in terms(c))}
    return out


def flags(evaluated: dict, variants: dict[str, dict]) -> dict[str, str]:
    """Claims that reproduce on the main set-up but not under a variant that VARIANTS flags (the paper's own
    description of a set-up the main runs take from the authors' code): {claim: the variant's name}."""
    out: dict[str, str] = {}
    for name, results in variants.items():
        if not VARIANTS[name].get("flag"):
            continue
        for cid, r in results.items():
            main = evaluated[cid]["verdict"]
            if main in (verdict.REPRODUCES, verdict.WRONG_REASON) and r["verdict"] in verdict.RANK and \
                    r["verdict"] != verdict.REPRODUCES:
                out.setdefault(cid, name)
    return out


def headline(claims: dict, evaluated: dict, variants: dict[str, dict]) -> list[str]:
    """The claims file's ``headline`` with its placeholders filled from the runs: {id} the median seed's
    value, {id:seeds} every seed's, {id:verdict}; {id@variant...} the same on a sensitivity variant."""
    text = claims.get("headline")
    if not text:
        return []

    def fill(m: re.Match) -> str:
        cid, var, what = m.groups()
        if cid not in evaluated:
            raise ValueError(f"headline: {m.group(0)} names no claim")
        r = (variants.get(var) or {}).get(cid) if var else evaluated[cid]
        if r is None:  # a sensitivity case this reproduction did not run (--only, a test's grid)
            return verdict.NOT_MEASURED if what == "verdict" else "-"
        if what == "verdict":
            return r["verdict"]
        if what == "seeds":
            return " / ".join(num(v) for _, v in sorted(r["values"].items())) or "-"
        return num(r["ours"])

    return ["## Headline", "", PLACEHOLDER.sub(fill, " ".join(text) if isinstance(text, list) else text), ""]


def causes_section(claims: dict, evaluated: dict) -> list[str]:
    """Every claim not reproduced (or for the wrong reason), grouped by root cause (each cause once), with
    the experiment, run or source line the cause names."""
    causes = claims.get("causes", {})
    groups: dict[str, list[dict]] = {}
    for c in claims["claims"]:
        if evaluated[c["id"]]["verdict"] in (verdict.REPRODUCES, verdict.NOT_MEASURED, verdict.NOT_TESTABLE) or \
                evaluated[c["id"]]["verdict"].startswith("needs"):
            continue
        groups.setdefault(c.get("cause") or "", []).append(c)
    if not groups:
        return []
    md = ["## Not reproduced, by root cause", "",
          "Each cause once, with the claims it accounts for and the run, knob or source that shows it:", ""]
    for key in sorted(groups, key=lambda k: (k == "", -len(groups[k]), k)):
        cause = causes.get(key)
        md += [f"### {cause['title']}" if cause else "### Claims with their own reason", ""]
        if cause:
            md += [cause["text"], ""]
        for c in groups[key]:
            why = f": {c['why']}" if c.get("why") else ""
            md.append(f"- **{c['id']}** ({evaluated[c['id']]['verdict']}){why}")
        md.append("")
    return md


def sensitivity_section(claims: dict, evaluated: dict, variants: dict[str, dict]) -> list[str]:
    """Per sensitivity variant: every claim evaluated on it beside the main set-up, and which claims move."""
    md: list[str] = []
    for name, results in variants.items():
        table, moved = [], 0
        for c in claims["claims"]:
            if c["id"] not in results or c.get("not_testable"):
                continue
            a, b = evaluated[c["id"]], results[c["id"]]
            change = a["verdict"] != b["verdict"]
            moved += change
            table.append([c["id"], num(a["ours"]), a["verdict"], num(b["ours"]), b["verdict"],
                          "**moves**" if change else ""])
        md += [f"## Sensitivity: {name}", "", VARIANTS[name]["text"], "",
               f"{moved} of {len(table)} claims change verdict:", "",
               md_table(["claim", "ours (main set-up)", "verdict", f"ours ({name})", "verdict", ""], table), ""]
    return md


def _exp_table(rows: list[dict]) -> str:
    """One line per run (scheduler, policy, seed), each seed apart; the busiest-worker columns when runs
    have them."""
    extra = [(t, k) for t, k in DIAGNOSTICS if any(r.get(k) is not None for r in rows)]
    out = []
    for r in sorted(rows, key=lambda r: (r["scheduler"], r["policy"], r["seed"])):
        cells = []
        for _, key in EXP_COLUMNS + tuple(extra):
            cells.append(f"{num(r.get('jobs_completed'))}/{num(r.get('jobs'))}" if key is None else
                         (r[key] if key in ("scheduler", "policy") else num(r.get(key))))
        out.append(cells)
    return md_table([t for t, _ in EXP_COLUMNS + tuple(extra)], out)


def provenance(info: dict) -> list[str]:
    """Where the report came from: the commit, the command, the date and the wall time."""
    if not info:
        return []
    return [f"Produced by `{info['command']}` ({info['scale']}; seeds {info['seeds']}) at commit "
            f"`{info['commit']}` on {info['date']} in {info['wall']} of wall time; {info['runs']}. Every run's "
            "figures are in `runs.csv` beside this report (one row per run and seed, with the commit it ran at).", ""]


def write_report(out: Path, paper: str, title: str, claims: dict, experiments: list[Experiment], specs: list[dict],
                 rows: dict, results: dict, info: dict) -> str:
    evaluated = evaluate_all(claims["claims"], rows)
    main = claims["claims"]
    variants = variant_results(claims, rows, experiments)
    flagged = flags(evaluated, variants)
    md = [f"# Reproducing {paper}: {title}", ""] + provenance(info)
    md += headline(claims, evaluated, variants)
    md += ["Verdicts: " + tally(main, evaluated), ""]
    for name in {v for v in flagged.values()}:
        both = {cid: (variants[name][cid] if variants[name].get(cid, {}).get("verdict") in verdict.RANK else r)
                for cid, r in evaluated.items()}
        mine = sorted(c for c, v in flagged.items() if v == name)
        md += [f"With the set-up of the sensitivity case {name} ({VARIANTS[name]['flag']}) in place of the main "
               f"one where a claim has it: " + tally(main, both) + ".", "",
               f"† {len(mine)} claim(s) reproduce only on the main set-up, not under {name}: {', '.join(mine)}.", ""]
    md += [verdict.RULES, "", "## Claims", "",
           md_table(["claim", "section", "the paper says", "paper", "ours (median seed)", "seeds", "verdict",
                     "evidence"],
                    [[c["id"], c["section"], c["text"], paper_cell(c), num(evaluated[c["id"]]["ours"]),
                      seeds_cell(evaluated[c["id"]]), verdict_cell(evaluated[c["id"]], " †" if c["id"] in flagged
                                                                   else ""),
                      evaluated[c["id"]]["evidence"]] for c in main]), ""]
    md += causes_section(claims, evaluated)
    parked = [c for c in main if evaluated[c["id"]]["verdict"] == verdict.NOT_TESTABLE or "needs" in c]
    if parked:
        md += ["## Not testable, or needing a scheduler fedemu lacks", ""] + \
              [f"- **{c['id']}** ({evaluated[c['id']]['verdict']}): {c.get('not_testable') or c.get('why', '')}"
               for c in parked] + [""]
    md += sensitivity_section(claims, evaluated, variants)
    if claims.get("notes"):
        md += ["## Notes on the set-up", ""] + [f"- {n}" for n in claims["notes"]] + [""]
    md += ["## Experiments", "", "Each run on a line of its own (seeds apart); the plots have a panel per seed, "
           "with the paper's numbers marked (a star: a percentile the paper gives; a dotted line: a bound).", ""]
    for e in experiments:
        mine = [r for key, rs in rows.items() if key[0] == e.name for r in rs]
        md += [f"### {e.name}: {e.title}", ""]
        if e.note:
            md += [f"{e.note}.", ""]
        md += ["Overrides: `" + " ".join(f"--set {k}={shown(v)}" for k, v in e.overrides.items()) + "`", ""]
        if mine:
            md += [_exp_table(mine), ""]
            pics = [(f, t) for f, t in (("delay_cdf.png", "delay CDF"), ("utilization_cdf.png", "utilization CDF"),
                                        ("allocation_cdf.png", "allocation CDF"),
                                        ("allocation_parts.png", "allocation parts")) if (out / e.name / f).exists()]
            if pics:
                md += [" ".join(f"![{t}]({e.name}/{f})" for f, t in pics), ""]
            parts = (results.get("_parts") or {}).get(e.name)
            if parts:
                rows_ = []
                for n, v in parts.items():
                    total = sum(v["median"]) or 1.0
                    rows_ += [[n, "median"] + [f"{x:.3g}" for x in v["median"]],
                              [n, "share of the medians' sum"] + [f"{x / total:.3f}" for x in v["median"]],
                              [n, "mean"] + [f"{x:.3g}" for x in v["mean"]]]
                md += ["Allocation time by part (s; over the tasks that started, then the mean over seeds):", "",
                       md_table(["scheduler", "statistic", "framework queueing", "processing", "worker queueing",
                                 "communication"], rows_), ""]
        else:
            md += ["No run of this experiment completed.", ""]
        failed = [s["name"] for s in specs if s["experiment"] == e.name and "summary" not in results.get(s["key"], {})]
        if failed:
            md += [f"Failed runs: {', '.join(failed)} (see the command's stderr).", ""]
    report = "\n".join(md)
    write_text(out / "report.md", report)
    write_text(out / "verdicts.json", json.dumps(
        [{"id": c["id"], "section": c["section"], "kind": c["kind"], "paper": c.get("paper"),
          "flag": flagged.get(c["id"]), **{k: v for k, v in evaluated[c["id"]].items()}} for c in main],
        indent=1, default=str) + "\n")
    return report
