"""Claims and their verdicts: a paper's claims file (``tools/claims/PAPER.json``) checked, and each claim
evaluated on the per-seed rows of the runs (``tools/verdict.py`` has the rules)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import verdict

CLAIMS_DIR = Path(__file__).with_name("claims")

OPTIONS = ("baseline", "tol", "tie", "order", "exact", "abs_tol", "offset")  # a claim's own verdict settings
TERM = re.compile(r"^\s*([\w.-]+)/([\w.-]+)@([\w.-]+):(\w+)\s*$")
OPS = (" / ", " - ")  # a claim's number: one term, a ratio of two, or a difference of two


# ---- claims ---------------------------------------------------------------------------------------
def load_claims(paper: str) -> dict:
    """The paper's claims file, checked: every claim has an id, section, text, kind and paper number, its
    terms name scheduler/policy@experiment:metric, its cause is one of the file's causes and its
    mechanism claims exist."""
    path = CLAIMS_DIR / f"{paper}.json"
    data = json.loads(path.read_text())
    seen = set()
    causes = data.get("causes", {})
    for c in data["claims"]:
        for key in ("id", "section", "text", "kind"):
            if key not in c:
                raise ValueError(f"{path}: claim {c.get('id', '?')}: missing {key!r}")
        if c["id"] in seen:
            raise ValueError(f"{path}: claim id {c['id']!r} repeats")
        seen.add(c["id"])
        if c.get("cause") and c["cause"] not in causes:
            raise ValueError(f"{path}: claim {c['id']}: cause {c['cause']!r} is not one of {sorted(causes)}")
        if "needs" in c:
            continue
        paper_ok = (isinstance(c.get("paper"), list) and len(c["paper"]) == 2 and c["paper"][0] <= c["paper"][1]
                    if c["kind"] == "range" else isinstance(c.get("paper"), (int, float)))
        if c["kind"] not in verdict.KINDS or not paper_ok:
            raise ValueError(f"{path}: claim {c['id']}: kind must be one of {verdict.KINDS} with a number 'paper' "
                             "([lo, hi] for a range)")
        if c.get("aggregate", "max") not in ("max", "min"):
            raise ValueError(f"{path}: claim {c['id']}: 'aggregate' is max or min")
        for term in (t for text in expansions(c) for t in split(text)[0]):
            if not TERM.match(term):
                raise ValueError(f"{path}: claim {c['id']}: {term!r} is not scheduler/policy@experiment:metric")
    for c in data["claims"]:
        for m in c.get("mechanism", ()):
            if m not in seen:
                raise ValueError(f"{path}: claim {c['id']}: mechanism claim {m!r} is not in the file")
    return data


def split(ours: str) -> tuple[list[str], str]:
    """(terms, operator) of a claim's ``ours``: ``A``, ``A / B`` or ``A - B``."""
    for op in OPS:
        if op in ours:
            return ours.split(op), op.strip()
    return [ours], ""


def terms(claim: dict) -> list[tuple[str, str, str, str]]:
    """(scheduler, policy, experiment, metric) of every term of every expansion of the claim."""
    return [TERM.match(t).groups() for text in expansions(claim) for t in split(text)[0]]


def _apply(op: str, values: list, absolute: bool):
    if any(v is None for v in values):
        return None
    out = values[0]
    for v in values[1:]:
        out = out / max(v, verdict.FLOOR) if op == "/" else out - v
    return abs(out) if absolute else out


def _measure(ours: str, rows: dict, rename, absolute: bool, evidence: list) -> tuple:
    """(mean-level number, {seed: number}) of one ``ours`` expression; (None, {}) when a term is missing."""
    term_texts, op = split(ours)
    per_term = []
    for text in term_texts:
        sched, pol, exp, metric = TERM.match(text).groups()
        exp = rename(exp) if rename else exp
        seeds = {m["seed"]: m.get(metric) for m in rows.get((exp, sched, pol), [])}
        if not seeds or any(v is None for v in seeds.values()):
            evidence.append(f"{sched}/{pol}@{exp} {metric}: not measured")
            return None, {}
        per_term.append(seeds)
        mean = sum(seeds.values()) / len(seeds)
        per = ", ".join(f"s{s}: {num(v)}" for s, v in seeds.items())
        evidence.append(f"{sched}/{pol}@{exp} {metric} = {num(mean)}" + (f" ({per})" if len(seeds) > 1 else ""))
    common = [s for s in per_term[0] if all(s in t for t in per_term)]
    return (_apply(op, [sum(t.values()) / len(t) for t in per_term], absolute),
            {s: _apply(op, [t[s] for t in per_term], absolute) for s in common})


def expansions(claim: dict) -> list[str]:
    """The ``ours`` expressions of a claim: one, or one per combination of its ``over`` placeholders' values."""
    out = [claim["ours"]]
    for key, values in (claim.get("over") or {}).items():
        out = [text.replace("{" + key + "}", str(v)) for text in out for v in values]
    return out


def evaluate(claim: dict, rows: dict, rename=None) -> dict:
    """Our number for ``claim`` from ``rows[(experiment, scheduler, policy)]`` (per-seed rows), its verdict
    and the evidence. ``ours`` is the terms' seed means combined (a ratio of means); the verdict combines
    each seed's own verdict (``verdict.combine``); ``occurs`` looks at every seed's value. A claim with
    ``over`` (placeholders and their values) takes, per seed, the ``aggregate`` (max or min) of its
    expansions (the paper's "up to"). ``rename`` maps an experiment name to the one to read (a variant)."""
    if "needs" in claim:
        return {"ours": None, "verdict": f"needs {claim['needs']}", "evidence": claim.get("why", ""), "seeds": {}}
    evidence: list[str] = []
    absolute = bool(claim.get("absolute"))
    measured = [_measure(text, rows, rename, absolute, evidence) for text in expansions(claim)]
    if any(m[0] is None for m in measured):
        return {"ours": None, "verdict": verdict.NOT_MEASURED, "evidence": "; ".join(evidence), "seeds": {}}
    pick = {"max": max, "min": min}[claim.get("aggregate", "max")]
    ours = pick(m[0] for m in measured)
    common = [s for s in measured[0][1] if all(s in m[1] for m in measured)]
    by_seed = {s: pick(m[1][s] for m in measured) for s in common}
    kw = {k: claim[k] for k in OPTIONS if k in claim}
    if claim["kind"] == "occurs":
        got = verdict.verdict("occurs", claim["paper"], list(by_seed.values()))
        seeds = {s: verdict.REPRODUCES if verdict.same(v, claim["paper"]) else verdict.DIFFERS
                 for s, v in by_seed.items()}
    else:
        seeds = {s: verdict.verdict(claim["kind"], claim["paper"], v, **kw) for s, v in by_seed.items()}
        got = verdict.combine(list(seeds.values()))
    if len(by_seed) > 1 and (split(claim["ours"])[1] or len(measured) > 1 or claim["kind"] == "occurs"):
        evidence.append("per seed: " + ", ".join(f"s{s}: {num(v)}" for s, v in by_seed.items()))
    if len(seeds) > 1:
        evidence.append("seed verdicts: " + ", ".join(f"s{s}: {v}" for s, v in seeds.items()))
    return {"ours": ours, "verdict": got, "evidence": "; ".join(evidence), "seeds": seeds}


def evaluate_all(claims: list[dict], rows: dict, rename=None) -> dict:
    """Every claim's evaluation, then the two rules that look across claims: ``not testable`` claims keep
    their measured verdict as ``measured``, and a claim that reproduces while its mechanism claims all
    differ reproduces for the wrong reason."""
    out = {c["id"]: evaluate(c, rows, rename) for c in claims}
    for c in claims:
        r = out[c["id"]]
        if c.get("mechanism"):
            r["verdict"] = verdict.wrong_reason(r["verdict"], [out[m]["verdict"] for m in c["mechanism"]])
    for c in claims:
        if c.get("not_testable") and "needs" not in c:
            out[c["id"]]["measured"] = out[c["id"]]["verdict"]
            out[c["id"]]["verdict"] = verdict.NOT_TESTABLE
    return out


def num(v) -> str:
    """A number as the report prints it (3-4 significant digits)."""
    if v is None:
        return "-"
    if isinstance(v, float) and (abs(v) >= 1e5 or (v != 0 and abs(v) < 1e-3)):
        return f"{v:.3g}"
    return f"{v:.4g}" if isinstance(v, float) else str(v)
