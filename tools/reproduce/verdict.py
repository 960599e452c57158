"""The verdict of one reproduced claim: the paper's number against ours, by fixed rules a strict reader can
check. Every report states them (``RULES``); ``judge`` gives a verdict and the reason in words.

Kinds of claim, and their rules:

- **Bounds** (``at_least``, ``at_most``): the paper says the quantity is at least (at most) p. The bound
  holds (*reproduces*) or it does not (*differs*, with the factor by which it misses).
- **Bare comparisons** (``exceeds``): the paper says only that A exceeds B; ours is A/B. A bound with a
  margin: A must exceed B by at least ``margin`` (default MARGIN, 1%; a claim may set the paper's own,
  such as section 6's 0.5% for utilization), so a 0.01% edge is a tie, not "exceeds".
- **Ratios** (``ratio``): the paper says A/B = p (or gives two figures [lo, hi] for it). Ours must point
  the same way as the paper's (above or below 1); its effect (the ratio minus 1; below 1, its inverse
  minus 1: "x times more") within a factor ``tol`` (default TOL = 2) of the paper's effect: *reproduces*;
  within ``limit`` (default LIMIT = 10): *same direction*; further off, or pointing the other way:
  *differs*. The effect, not the ratio, so that 1.012 is not "within 2x" of the paper's 1.1. A tie band (``tie``) applies only where the paper calls the difference similar or
  insignificant (the claim quotes it in ``similar``): a paper effect inside the band needs ours inside it
  too; outside the band, ours must be outside it, on the paper's side.
- **Values** (``value``): within a factor ``tol`` (default 2): *reproduces*; within ``order`` (default
  ORDER = 3): *same order*; else *differs*. ``abs_tol`` judges a probability or a share by its difference
  (within abs_tol, else *differs*); ``offset`` judges a slowdown by its queueing part (slowdown - 1);
  ``exact`` (a worked example) needs equality up to rounding.
- **Ranges** (``range``, the paper gives lo to hi): inside: *reproduces*; within ``order`` (3) of the nearer
  end: *same order*; else *differs*. A range stays a range and a bound stays a bound.
- **Occurs** (``occurs``, a randomised worked example): the paper's outcome is among the seeds' outcomes.

Seeds (``combine``): each seed is judged on its own (a ratio divides one seed's terms); a claim takes the
best verdict that at least two thirds of its measured seeds reach (two of three), and fewer than MIN_SEEDS
measured seeds is *not measured*. A claim that reproduces while a claim stating its mechanism differs
*reproduces for the wrong reason* (``wrong_reason``).

Numbers below FLOOR (delays of 0 s, for instance) count as FLOOR, so every ratio is defined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

TOL = 2.0  # reproduces: within a factor 2 of the paper's number
LIMIT = 10.0  # a ratio further off than TOL but within LIMIT, the right way: same direction
ORDER = 3.0  # same order: within a factor 3 of a value, or of a range's nearer end
MARGIN = 1.01  # a bare comparison needs a 1% effect
MIN_SEEDS = 2
AGREE = 2 / 3  # the share of the measured seeds that must reach a verdict
FLOOR = 1e-6
EXACT = 1e-9  # relative rounding margin of an exact number

REPRODUCES, SAME, SAME_ORDER, DIFFERS = "reproduces", "same direction", "same order", "differs"
NOT_MEASURED, NOT_TESTABLE, WRONG_REASON = "not measured", "not testable", "reproduces for the wrong reason"
RANK = {DIFFERS: 0, SAME: 1, SAME_ORDER: 1, REPRODUCES: 2}
KINDS = ("ratio", "at_least", "at_most", "exceeds", "value", "range", "occurs")


def _floor(x: float) -> float:
    return max(float(x), FLOOR)


def factor(a: float, b: float) -> float:
    """How many times a and b (both floored) are apart: at least 1."""
    return math.exp(abs(math.log(_floor(a)) - math.log(_floor(b))))


def within(a: float, b: float, f: float) -> bool:
    """Whether a and b (both floored) are within a factor ``f`` of each other (a margin for rounding)."""
    return abs(math.log(_floor(a)) - math.log(_floor(b))) <= math.log(f) + 1e-12


def side(ratio: float, tie: float | None = None) -> int:
    """+1 above 1, -1 below, 0 at 1 (or inside the tie band [1/tie, tie] when there is one)."""
    r, band = _floor(ratio), tie or 1.0
    return 1 if r > band * (1 + EXACT) else -1 if r < (1 - EXACT) / band else 0


def effect(ratio: float) -> float:
    """How much a ratio says one side exceeds the other: r - 1 above 1, 1/r - 1 below (floored)."""
    r = _floor(ratio)
    return max(r - 1 if r >= 1 else 1 / r - 1, FLOOR)


def same(a: float, b: float) -> bool:
    """Equal up to rounding (an exact number)."""
    return abs(a - b) <= EXACT * max(abs(a), abs(b)) + 1e-12


def missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def times(f: float) -> str:
    return f"x{f:.3g}" if f < 1e4 else f"x{f:.2e}"


def judge(kind: str, paper, ours, *, tol: float = TOL, limit: float = LIMIT, order: float = ORDER,
          tie: float | None = None, margin: float = MARGIN, exact: bool = False, abs_tol: float | None = None,
          offset: float = 0.0) -> tuple[str, str]:
    """(verdict, reason) of ``ours`` against the paper's ``paper`` for a claim of ``kind`` (the module doc).
    ``paper`` is [lo, hi] for a range (and may be for a ratio); ``ours`` is the seeds' values for ``occurs``."""
    if kind not in KINDS:
        raise ValueError(f"unknown claim kind {kind!r}; known: {', '.join(KINDS)}")
    if kind == "occurs":
        values = [v for v in (ours or ()) if not missing(v)]
        if not values:
            return NOT_MEASURED, ""
        return (REPRODUCES, "the paper's outcome occurs") if any(same(v, paper) for v in values) else \
            (DIFFERS, "the paper's outcome never occurs")
    if missing(ours):
        return NOT_MEASURED, ""
    if offset:
        ours, paper = ours - offset, [p - offset for p in paper] if isinstance(paper, list) else paper - offset
    if kind == "exceeds":
        if ours >= margin * (1 - EXACT):
            return REPRODUCES, f"exceeds by {ours - 1:.3g}"
        return DIFFERS, "the other way" if ours < 1 - EXACT else f"by {ours - 1:.2g}, under the {margin - 1:.2g} margin"
    if kind == "at_least" or kind == "at_most":
        holds = ours >= paper * (1 - EXACT) if kind == "at_least" else ours <= paper * (1 + EXACT)
        return (REPRODUCES, "the bound holds") if holds else \
            (DIFFERS, f"misses the bound by {times(factor(ours, paper))}")
    if kind == "range":
        lo, hi = paper
        if lo - EXACT * abs(lo) <= ours <= hi + EXACT * abs(hi):
            return REPRODUCES, "inside the range"
        f = factor(ours, lo if ours < lo else hi)
        return (SAME_ORDER if f <= order * (1 + EXACT) else DIFFERS), f"{times(f)} {'below' if ours < lo else 'above'} it"
    if exact:
        return (REPRODUCES, "equal") if same(ours, paper) else (DIFFERS, "not equal")
    if abs_tol is not None:
        gap = abs(ours - paper)
        return (REPRODUCES if gap <= abs_tol + EXACT else DIFFERS), f"{gap:.3g} apart (tolerance {abs_tol:g})"
    if kind == "value":
        f = factor(ours, paper)
        return (REPRODUCES if f <= tol * (1 + EXACT) else SAME_ORDER if f <= order * (1 + EXACT) else DIFFERS), \
            f"{times(f)} {'above' if ours > paper else 'below'}" if f > 1 + EXACT else "equal"
    return _ratio(paper, ours, tol, limit, tie)


def _ratio(paper, ours: float, tol: float, limit: float, tie: float | None) -> tuple[str, str]:
    lo, hi = paper if isinstance(paper, list) else (paper, paper)
    if tie and side(lo, tie) == 0 and side(hi, tie) == 0:  # the paper's effect is inside its own tie band
        inside = side(ours, tie) == 0
        return (REPRODUCES, "inside the tie band, as the paper's") if inside else \
            (DIFFERS, f"outside the tie band ({times(factor(ours, 1))} from 1), where the paper's effect is inside it")
    want = side(hi if side(hi, tie) else lo, tie)
    got = side(ours, tie)
    if got != want:
        what = "no effect" + (" (inside the tie band)" if tie else "") if got == 0 else "the other way"
        return DIFFERS, what
    near = lo if ours < lo else hi
    f = 1.0 if lo <= ours <= hi else factor(effect(ours), effect(near))
    words = f"an effect {times(f)} {'larger' if effect(ours) > effect(near) else 'smaller'} than the paper's" \
        if f > 1 + EXACT else "the paper's number"
    return (REPRODUCES if f <= tol * (1 + EXACT) else SAME if f <= limit * (1 + EXACT) else DIFFERS), words


def verdict(kind: str, paper, ours, **kw) -> str:
    """The verdict alone (``judge`` without its reason)."""
    return judge(kind, paper, ours, **kw)[0]


def combine(per_seed: Sequence[str]) -> str:
    """The claim's verdict from its seeds' verdicts: the best verdict that at least two thirds of the
    measured seeds reach or beat; fewer than MIN_SEEDS measured seeds: ``not measured``."""
    ranked = [v for v in per_seed if v in RANK]
    if len(ranked) < MIN_SEEDS:
        return NOT_MEASURED
    need = math.ceil(AGREE * len(ranked) - 1e-9)
    for v in (REPRODUCES, SAME, SAME_ORDER):
        if sum(RANK[x] >= RANK[v] for x in ranked) >= need:
            if v == REPRODUCES:
                return v
            # the middle rung keeps the kind's own word (a value's "same order", a ratio's "same direction")
            return max((x for x in ranked if RANK[x] == 1), key=ranked.count, default=v)
    return DIFFERS


def wrong_reason(claim_verdict: str, mechanism_verdicts: Sequence[str]) -> str:
    """``reproduces for the wrong reason`` when a claim reproduces while any claim stating its mechanism
    differs; else the verdict unchanged."""
    if claim_verdict == REPRODUCES and any(v == DIFFERS for v in mechanism_verdicts):
        return WRONG_REASON
    return claim_verdict


RULES = f"""Verdict rules (`tools/reproduce/verdict.py`, property-tested in `tests/test_verdict.py`):

- **Bounds** ("at least p", "at most p"): the bound holds (*reproduces*) or not (*differs*, with the factor
  by which it misses). A bare comparison ("A exceeds B", no number) holds when A/B is at least 1 plus a
  margin: {MARGIN - 1:.0%}, or the margin the paper itself gives (the claim says which); else *differs*.
- **Ratios** (the paper gives A/B): ours must point the paper's way (above or below 1), and its effect (the
  ratio minus 1; below 1, its inverse minus 1) is compared with the paper's: within a factor {TOL:g}:
  *reproduces*; within {LIMIT:g}: *same direction*; further, or the other way: *differs* (so 1.012 does
  not reproduce 1.1: an effect 8x smaller). A tie band applies only where the paper calls the difference similar or
  insignificant (the claim quotes it): a paper effect inside the band needs ours inside it too.
- **Values**: within a factor {TOL:g}: *reproduces*; within {ORDER:g}: *same order*; else *differs*.
  Probabilities and shares: within the claim's absolute tolerance, else *differs*. A slowdown is judged
  by its queueing part (slowdown - 1). A worked example is exact.
- **Ranges** (lo to hi): inside: *reproduces*; within a factor {ORDER:g} of the nearer end: *same order*;
  else *differs*. A randomised worked example: the paper's outcome *occurs* among the seeds, or not.
- **Seeds**: each seed is judged on its own; the claim takes the best verdict that at least two thirds
  of its measured seeds reach (two of three). Fewer than {MIN_SEEDS} measured seeds: *not measured*. "ours" is
  the median seed's value; the seeds column gives every seed's value and verdict, and their mean.
- *reproduces for the wrong reason*: it reproduces while a claim stating the paper's mechanism for it
  differs. *not testable* (not counted): the quantity is not modelled, or the input is not available;
  never a result that goes against the paper. *needs X*: a scheduler fedemu does not have.
- Numbers below {FLOOR:g} count as {FLOOR:g}."""
