"""What changed between two reports of one paper, claim by claim, and why: the tables of
docs/reproductions/changes-*.md.

Each claim gets three verdicts: the old report's (its runs, its rules), the old runs judged by today's
claims and rules (the per-seed values the old report printed in its evidence, rebuilt into rows), and the
new report's. A change between the first two comes from the rules or the claim's encoding; one between
the last two from the runs (new code, new set-ups). ``python -m fedemu.tools.reproduce.repro_changes OLD.md NEW_DIR
PAPER [OLD_CLAIMS.json]`` prints the table; OLD.md is the old report.md (its verdicts.json beside it),
OLD_CLAIMS.json the claims file it was judged by (``git show COMMIT:tools/reproduce/claims/PAPER.json``)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from .evaluate import evaluate_all, load_claims, num
from .repro_report import md_table, tally

EVIDENCE = re.compile(r"([\w.-]+)/([\w.-]+)@([\w.-]+) (\w+) = ([-\d.e+]+)(?: \(([^)]*)\))?")


def rows_from_evidence(report: str) -> dict[tuple, list[dict]]:
    """Per-seed rows rebuilt from an old report's evidence column ("term = mean (s1: v, s2: v, ...)"), to the
    3-4 digits it printed; a term printed with no seeds belongs to seed 1."""
    rows: dict[tuple, dict[int, dict]] = {}
    for m in EVIDENCE.finditer(report):
        sched, pol, exp, metric, mean, per = m.groups()
        seeds = {int(s.strip()[1:]): float(v) for s, v in (p.split(":") for p in per.split(","))} if per else \
            {1: float(mean)}
        for seed, value in seeds.items():
            rows.setdefault((exp, sched, pol), {}).setdefault(seed, {"seed": seed})[metric] = value
    return {k: list(v.values()) for k, v in rows.items()}


ENCODING = ("kind", "paper", "ours", "over", "aggregate", "tol", "tie", "order", "abs_tol", "offset", "exact", "margin",
            "on", "mechanism", "not_testable", "needs")


def _encoding(was: dict | None, now: dict) -> str:
    """What of a claim's encoding changed: its kind, number, expression, options, mechanism, parking."""
    if was is None:
        return ""
    moved = [k for k in ENCODING if was.get(k) != now.get(k) and not (k == "paper" and now["kind"] == "exceeds")]
    if "not_testable" in moved and was.get("not_testable"):
        return "no longer parked as not testable" + (f"; {', '.join(m for m in moved if m != 'not_testable')}"
                                                       if len(moved) > 1 else "")
    return ", ".join(moved)


def _cause(old: dict | None, mid: dict, new: dict | None, claim: dict, was: dict | None) -> str:
    before = old["verdict"] if old else None
    if before is None:
        return "new claim"
    parts = []
    if mid["verdict"] != before:
        what = _encoding(was, claim)
        parts.append(f"re-encoded ({what})" if what else f"the rules ({claim['kind']})")
    if new and new["verdict"] != mid["verdict"]:
        parts.append(f"the runs ({num(mid['ours'])} -> {num(new['ours'])})")
    return "; ".join(parts) or "unchanged"


def changes(old_report: Path, new_dir: Path, paper: str, old_claims: Path | None = None) -> str:
    """The tally before and after, and a row per claim (the old report's claims that are gone at the end);
    with the old claims file, a change of encoding is told apart from a change of rules."""
    claims = load_claims(paper)["claims"]
    was = {c["id"]: c for c in json.loads(old_claims.read_text())["claims"]} if old_claims else {}
    old = {v["id"]: v for v in json.loads((old_report.parent / "verdicts.json").read_text())}
    mid = evaluate_all(claims, rows_from_evidence(old_report.read_text()))
    new_path = new_dir / "verdicts.json"
    new = {v["id"]: v for v in json.loads(new_path.read_text())} if new_path.exists() else {}
    table = [[c["id"], old[c["id"]]["verdict"] if c["id"] in old else "-", mid[c["id"]]["verdict"],
              new[c["id"]]["verdict"] if c["id"] in new else "-",
              _cause(old.get(c["id"]), mid[c["id"]], new.get(c["id"]), c, was.get(c["id"]))] for c in claims]
    table += [[cid, v["verdict"], "-", "-", "gone (folded into another claim or re-encoded)"]
              for cid, v in old.items() if cid not in mid]
    said = re.search(r"^Verdicts: (.*)$", old_report.read_text(), re.M)
    md = [f"Before (the old report, as it said): {said.group(1) if said else '-'}.", "",
          f"The old runs judged by today's claims and rules: {tally(claims, mid)}.", ""]
    if new:
        md += [f"After (the new report): {tally(claims, new)}.", ""]
    md += [md_table(["claim", "before", "old runs, today's rules", "after", "what changed it"], table)]
    return "\n".join(md)


if __name__ == "__main__":  # pragma: no cover
    print(changes(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], Path(sys.argv[4]) if len(sys.argv) > 4 else None))
