"""Claims and their verdicts: a paper's claims file (``tools/reproduce/claims/PAPER.json``) checked, and each claim
evaluated seed by seed on the per-seed rows of the runs (``tools/reproduce/verdict.py`` has the rules).

A claim's ``ours`` is an arithmetic expression over terms ``scheduler/policy@experiment:metric`` (spaces
around operators; + - * /, parentheses, numbers, abs(), min(), max()), evaluated on each seed's rows, so a
ratio divides one seed's terms."""

from __future__ import annotations

import ast
import json
import re
import statistics
from pathlib import Path

from . import verdict

CLAIMS_DIR = Path(__file__).with_name("claims")

OPTIONS = ("tol", "limit", "tie", "order", "exact", "abs_tol", "offset", "margin")  # a claim's own verdict settings
TERM = re.compile(r"([\w.-]+)/([\w.-]+)@([\w.-]+):(\w+)")
FUNCTIONS = {"abs": abs, "min": min, "max": max}
REQUIRED = ("id", "section", "text", "kind")


# ---- expressions ----------------------------------------------------------------------------------
class Expression:
    """A claim's ``ours``: its terms, and a function of their values (one seed's)."""

    def __init__(self, text: str):
        self.text = text
        self.terms: list[tuple[str, str, str, str]] = []
        names: dict[str, str] = {}

        def name(m: re.Match) -> str:
            if m.group(0) not in names:
                names[m.group(0)] = f"_t{len(names)}"
                self.terms.append(m.groups())
            return names[m.group(0)]

        source = TERM.sub(name, text)
        try:
            self.tree = ast.parse(source.strip(), mode="eval")
        except SyntaxError as e:
            raise ValueError(f"{text!r} is not an expression of terms scheduler/policy@experiment:metric") from e
        for node in ast.walk(self.tree):
            if not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name, ast.Call,
                                     ast.Add, ast.Sub, ast.Mult, ast.Div, ast.USub, ast.Load)):
                raise ValueError(f"{text!r}: {type(node).__name__} is not allowed (terms, numbers, + - * /, "
                                 "abs, min, max)")
            if isinstance(node, ast.Call) and not (isinstance(node.func, ast.Name) and node.func.id in FUNCTIONS):
                raise ValueError(f"{text!r}: only {', '.join(FUNCTIONS)} may be called")
            if isinstance(node, ast.Name) and not (node.id.startswith("_t") or node.id in FUNCTIONS):
                raise ValueError(f"{text!r}: {node.id!r} is not a term scheduler/policy@experiment:metric")
            if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
                raise ValueError(f"{text!r}: {node.value!r} is not a number")
        if not self.terms:
            raise ValueError(f"{text!r} names no term scheduler/policy@experiment:metric")

    def __call__(self, values: list[float]) -> float:
        return _eval(self.tree.body, values)


def _eval(node, values: list[float]) -> float:
    if isinstance(node, ast.Constant):
        return float(node.value)
    if isinstance(node, ast.Name):
        return float(values[int(node.id[2:])])
    if isinstance(node, ast.UnaryOp):
        return -_eval(node.operand, values)
    if isinstance(node, ast.Call):
        return FUNCTIONS[node.func.id](*(_eval(a, values) for a in node.args))
    a, b = _eval(node.left, values), _eval(node.right, values)
    op = type(node.op)
    return a + b if op is ast.Add else a - b if op is ast.Sub else a * b if op is ast.Mult else a / max(b, verdict.FLOOR)


def expansions(claim: dict) -> list[str]:
    """The ``ours`` expressions of a claim: one, or one per combination of its ``over`` placeholders' values
    (none for a claim with no number of ours)."""
    if "ours" not in claim:
        return []
    out = [claim["ours"]]
    for key, values in (claim.get("over") or {}).items():
        out = [text.replace("{" + key + "}", str(v)) for text in out for v in values]
    return out


def terms(claim: dict) -> list[tuple[str, str, str, str]]:
    """(scheduler, policy, experiment, metric) of every term of every expansion of the claim."""
    return [t for text in expansions(claim) for t in Expression(text).terms]


# ---- claims ---------------------------------------------------------------------------------------
def check_claim(c: dict, causes: dict, where: str) -> None:
    """One claim's shape, or a ValueError naming the claim and what is wrong."""
    for key in REQUIRED:
        if key not in c:
            raise ValueError(f"{where}: claim {c.get('id', '?')}: missing {key!r}")
    cid = c["id"]
    if c.get("cause") and c["cause"] not in causes:
        raise ValueError(f"{where}: claim {cid}: cause {c['cause']!r} is not one of {sorted(causes)}")
    if "needs" in c or "not_testable" in c and "ours" not in c:
        return
    if "baseline" in c or "absolute" in c:
        raise ValueError(f"{where}: claim {cid}: 'baseline' and 'absolute' are gone: a bound holds or not, and "
                         "abs() goes in the expression")
    shown = "not_testable" in c and "paper" not in c  # our figure shown where the paper gives none to judge it by
    if c["kind"] == "exceeds" and not shown:
        c.setdefault("paper", 1)
    paper = c.get("paper")
    two = isinstance(paper, list) and len(paper) == 2 and all(isinstance(p, (int, float)) for p in paper) \
        and paper[0] <= paper[1]
    ok = two if c["kind"] == "range" else (isinstance(paper, (int, float)) or c["kind"] == "ratio" and two)
    if c["kind"] not in verdict.KINDS or not (ok or shown):
        raise ValueError(f"{where}: claim {cid}: kind must be one of {verdict.KINDS} with a number 'paper' "
                         "([lo, hi] for a range, or for a ratio the paper gives two figures for)")
    if "tie" in c and not c.get("similar"):
        raise ValueError(f"{where}: claim {cid}: a tie band needs 'similar': the paper's words that call the "
                         "difference similar or insignificant")
    if "margin" in c and c["kind"] != "exceeds":
        raise ValueError(f"{where}: claim {cid}: 'margin' belongs to a bare comparison (kind 'exceeds')")
    if c.get("on", "seeds") not in ("seeds", "mean") or c.get("on") == "mean" and not c.get("why"):
        raise ValueError(f"{where}: claim {cid}: 'on' is seeds (each seed judged) or mean (the seeds' mean judged, "
                         "where the paper's own figure is a mean over runs: say so in 'why')")
    if "margin" in c and not c.get("why"):
        raise ValueError(f"{where}: claim {cid}: a margin of its own needs a 'why' that gives its source")
    unknown = set(c) - set(OPTIONS) - {"id", "section", "text", "kind", "paper", "ours", "over", "aggregate",
                                       "mechanism", "cause", "why", "not_testable", "similar", "needs", "on"}
    if unknown:
        raise ValueError(f"{where}: claim {cid}: unknown keys {sorted(unknown)}")
    if c.get("aggregate", "max") not in ("max", "min", "worst"):
        raise ValueError(f"{where}: claim {cid}: 'aggregate' is max, min or worst (each expansion judged)")
    for text in expansions(c):
        try:
            Expression(text)
        except ValueError as e:
            raise ValueError(f"{where}: claim {cid}: {e}") from None


def load_claims(paper: str) -> dict:
    """The paper's claims file, checked: every claim has an id, section, text, kind and paper number, its
    ``ours`` is an expression of terms scheduler/policy@experiment:metric, its cause is one of the file's
    causes, a tie band quotes the paper, and its mechanism claims exist."""
    path = CLAIMS_DIR / f"{paper}.json"
    data = json.loads(path.read_text())
    seen: set[str] = set()
    causes = data.get("causes", {})
    for c in data["claims"]:
        check_claim(c, causes, str(path))
        if c["id"] in seen:
            raise ValueError(f"{path}: claim id {c['id']!r} repeats")
        seen.add(c["id"])
    for c in data["claims"]:
        for m in c.get("mechanism", ()):
            if m not in seen:
                raise ValueError(f"{path}: claim {c['id']}: mechanism claim {m!r} is not in the file")
    return data


# ---- evaluation -----------------------------------------------------------------------------------
def _per_seed(text: str, rows: dict, rename, evidence: list) -> dict:
    """{seed: value} of one expression on the seeds that measured every term; the terms' values go to
    ``evidence``."""
    expr = Expression(text)
    columns = []
    for sched, pol, exp, metric in expr.terms:
        exp = rename(exp) if rename else exp
        seeds = {m["seed"]: m.get(metric) for m in rows.get((exp, sched, pol), [])}
        seeds = {s: v for s, v in seeds.items() if not verdict.missing(v)}
        columns.append(seeds)
        shown = ", ".join(f"s{s} {num(v)}" for s, v in seeds.items()) or "not measured"
        evidence.append(f"{sched}/{pol}@{exp} {metric}: {shown}")
    common = [s for s in columns[0] if all(s in c for c in columns)]
    return {s: expr([c[s] for c in columns]) for s in common}


def evaluate(claim: dict, rows: dict, rename=None) -> dict:
    """Our number for ``claim`` from ``rows[(experiment, scheduler, policy)]`` (per-seed rows), seed by seed:
    {"ours": the median seed's value, "mean", "values": {seed: value}, "seeds": {seed: verdict},
    "reasons": {seed: why}, "verdict", "evidence"}. A claim with ``over`` takes, per seed, the ``aggregate``
    of its expansions: max or min (the paper's "up to"), or worst (every expansion judged, the worst verdict
    kept: the paper's "on every workload"). ``on: mean`` judges the seeds' mean once (a paper figure that
    is itself a mean over runs). A not-testable claim with ``ours`` and no paper number shows our figure,
    judged against nothing. ``rename`` maps an experiment to the one to read."""
    empty = {"ours": None, "evidence": "", "seeds": {}, "values": {}, "reasons": {}, "mean": None}
    if "needs" in claim:
        return {**empty, "verdict": f"needs {claim['needs']}", "evidence": claim.get("why", "")}
    if "ours" not in claim:
        return {**empty, "verdict": verdict.NOT_TESTABLE}
    evidence: list[str] = []
    measured = [_per_seed(text, rows, rename, evidence) for text in expansions(claim)]
    common = [s for s in measured[0] if all(s in m for m in measured)]
    kw = {k: claim[k] for k in OPTIONS if k in claim}
    kind, paper = claim["kind"], claim.get("paper", 1)
    aggregate = claim.get("aggregate", "max")
    if aggregate == "worst":
        values, judged = {}, {}
        for s in common:
            each = [(m[s], verdict.judge(kind, paper, m[s], **kw)) for m in measured]
            values[s], judged[s] = min(each, key=lambda e: verdict.RANK.get(e[1][0], -1))
    else:
        pick = {"max": max, "min": min}[aggregate]
        values = {s: pick(m[s] for m in measured) for s in common}
        if claim.get("not_testable") and "paper" not in claim:  # shown beside the claim, judged against nothing
            judged = {}
        elif kind == "occurs":
            judged = {s: (verdict.REPRODUCES, "the paper's outcome") if verdict.same(v, paper) else
                      (verdict.DIFFERS, "another outcome") for s, v in values.items()}
        else:
            judged = {s: verdict.judge(kind, paper, v, **kw) for s, v in values.items()}
    ordered = sorted(values.values())
    mean = sum(ordered) / len(ordered) if ordered else None
    if claim.get("not_testable") and "paper" not in claim:
        got = verdict.NOT_TESTABLE
    elif len(values) < verdict.MIN_SEEDS:
        got = verdict.NOT_MEASURED
    elif kind == "occurs":
        got = verdict.judge("occurs", paper, ordered)[0]
    elif claim.get("on") == "mean":
        got, why = verdict.judge(kind, paper, mean, **kw)
        evidence.append(f"judged on the seeds' mean {num(mean)}: {why}")
    else:
        got = verdict.combine([j[0] for j in judged.values()])
    return {"ours": statistics.median(ordered) if ordered else None, "mean": mean, "values": values,
            "seeds": {s: j[0] for s, j in judged.items()}, "reasons": {s: j[1] for s, j in judged.items()},
            "verdict": got, "evidence": "; ".join(evidence)}


def evaluate_all(claims: list[dict], rows: dict, rename=None) -> dict:
    """Every claim's evaluation, then the rules that look across claims: a claim that reproduces while a
    claim stating its mechanism differs reproduces for the wrong reason (``why_wrong`` names them); a
    ``not testable`` claim keeps what it measured, if anything, as ``measured``."""
    out = {c["id"]: evaluate(c, rows, rename) for c in claims}
    for c in claims:
        r = out[c["id"]]
        if c.get("mechanism"):
            r["verdict"] = verdict.wrong_reason(r["verdict"], [out[m]["verdict"] for m in c["mechanism"]])
            if r["verdict"] == verdict.WRONG_REASON:
                r["why_wrong"] = [m for m in c["mechanism"] if out[m]["verdict"] == verdict.DIFFERS]
    for c in claims:
        if c.get("not_testable") and "needs" not in c:
            if out[c["id"]]["verdict"] != verdict.NOT_TESTABLE:
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
