"""The verdict of one reproduced claim: the paper's number against ours, by fixed, documented rules.

Verdicts of one number (``verdict``), by kind of claim:

- ``ratio`` (the paper says A/B = p, e.g. "Megha cuts p99 by 5.61x"): a ratio's *direction* is up
  (> tie), down (< 1/tie) or none (within the tie band; tie = TIE unless the claim sets it). Directions
  differ: ``differs``. Same direction and ours within a factor TOL of p: ``reproduces``; same direction
  otherwise: ``same direction``.
- ``at_least`` (the paper says the quantity is at least p, or only that A exceeds B: p = baseline = 1):
  ours > baseline * tie and ours >= p: ``reproduces``; ours > baseline * tie only: ``same direction``;
  else ``differs``. ``baseline`` separates the two directions (1 for a ratio, 0.5 for "the largest part").
- ``at_most``: the mirror image (ours < baseline / tie and ours <= p; ours < baseline / tie only).
- ``value`` (a single number, e.g. "the median delay was 1.5 ms"): ours within a factor ``tol`` (default
  TOL) of p: ``reproduces``; within a factor ``order`` (default ORDER = 10): ``same order`` (a single
  value has no direction); else ``differs``.
- ``range`` (the paper gives [lo, hi], e.g. "3 to 6 orders of magnitude"): ours in the range:
  ``reproduces``; within a factor ``order`` of the nearer end: ``same order``; else ``differs``.
- ``occurs`` (a randomised example: the paper's outcome is one of several, e.g. Pigeon's shuffle of
  masters): the paper's number is among the seeds' values (``occurs``): ``reproduces``; else ``differs``.

Options any claim may set: ``exact`` (a worked example: equal up to rounding, else ``differs``);
``abs_tol`` (probabilities and shares: ours within abs_tol of p reproduces, else ``differs``; a factor
says little about 0.91 against 0.7); ``offset`` (compare ours - offset with p - offset: a slowdown is
>= 1 by definition, so its queueing part, slowdown - 1, is what is judged).

Several seeds (``combine``): each seed gets its own verdict (a ratio divides the same seed's terms); the
claim's verdict is the best one that at least two thirds of the seeds reach (two of three), so one lucky
seed decides nothing. Claims the paper contradicts, or whose effect sits below its own seed noise, are
``not testable`` (kept out of the tallies, the measured verdict shown beside); a claim that reproduces
while every claim naming its mechanism differs ``reproduces for the wrong reason``.

Numbers below FLOOR (delays of 0 s, for instance) count as FLOOR, so every ratio is defined.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

TIE = 1.1  # ratios within [1/1.1, 1.1] of the baseline show no difference either way
TOL = 2.0  # "reproduces": within a factor of 2 of the paper's number
ORDER = 10.0  # "same order" for a single value: within a factor of 10
FLOOR = 1e-6
EXACT = 1e-9  # relative rounding margin of an exact number

REPRODUCES, SAME, SAME_ORDER, DIFFERS = "reproduces", "same direction", "same order", "differs"
NOT_MEASURED, NOT_TESTABLE, WRONG_REASON = "not measured", "not testable", "reproduces for the wrong reason"
RANK = {DIFFERS: 0, SAME: 1, SAME_ORDER: 1, REPRODUCES: 2}
KINDS = ("ratio", "at_least", "at_most", "value", "range", "occurs")
AGREE = 2 / 3  # the share of seeds that must reach a verdict


def _floor(x: float) -> float:
    return max(float(x), FLOOR)


def direction(ratio: float, tie: float = TIE) -> int:
    """+1 up, -1 down, 0 within the tie band around 1."""
    r = _floor(ratio)
    return 1 if r > tie else -1 if r < 1 / tie else 0


def within(a: float, b: float, factor: float) -> bool:
    """Whether a and b (both floored) are within ``factor`` of each other (a small margin for rounding)."""
    return abs(math.log(_floor(a)) - math.log(_floor(b))) <= math.log(factor) + 1e-12


def same(a: float, b: float) -> bool:
    """Equal up to rounding (an exact number)."""
    return abs(a - b) <= EXACT * max(abs(a), abs(b)) + 1e-12


def missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def verdict(kind: str, paper, ours, *, baseline: float = 1.0, tol: float = TOL, tie: float = TIE,
            order: float = ORDER, exact: bool = False, abs_tol: float | None = None, offset: float = 0.0) -> str:
    """The verdict of ``ours`` against the paper's ``paper`` for a claim of ``kind`` (see the module doc).
    ``paper`` is [lo, hi] for a range; ``ours`` is the seeds' values for ``occurs``."""
    if kind not in KINDS:
        raise ValueError(f"unknown claim kind {kind!r}; known: {', '.join(KINDS)}")
    if kind == "occurs":
        values = [v for v in (ours or ()) if not missing(v)]
        return NOT_MEASURED if not values else REPRODUCES if any(same(v, paper) for v in values) else DIFFERS
    if missing(ours):
        return NOT_MEASURED
    if kind == "range":
        lo, hi = paper
        if lo - EXACT * abs(lo) <= ours <= hi + EXACT * abs(hi):
            return REPRODUCES
        return SAME_ORDER if within(ours, lo if ours < lo else hi, order) else DIFFERS
    if offset:
        ours, paper, baseline = ours - offset, paper - offset, baseline - offset if kind != "ratio" else baseline
    if exact:
        if kind == "value" or kind == "ratio":
            return REPRODUCES if same(ours, paper) else DIFFERS
    if abs_tol is not None and kind == "value":
        return REPRODUCES if abs(ours - paper) <= abs_tol + EXACT else DIFFERS
    if kind == "ratio":
        if direction(ours, tie) != direction(paper, tie):
            return DIFFERS
        return REPRODUCES if within(ours, paper, tol) else SAME
    if kind == "value":
        return REPRODUCES if within(ours, paper, tol) else SAME_ORDER if within(ours, paper, order) else DIFFERS
    if kind == "at_least":
        edge = baseline * tie if abs_tol is None else baseline + abs_tol
        return (REPRODUCES if ours >= paper else SAME) if ours > edge else DIFFERS
    edge = baseline / tie if abs_tol is None else baseline - abs_tol  # at_most
    return (REPRODUCES if ours <= paper else SAME) if ours < edge else DIFFERS


def combine(per_seed: Sequence[str]) -> str:
    """The claim's verdict from its seeds' verdicts: the best verdict that at least two thirds of the
    measured seeds reach or beat (one seed: its own). No measured seed: ``not measured``."""
    ranked = [v for v in per_seed if v in RANK]
    if not ranked:
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
    """``reproduces for the wrong reason`` when a claim reproduces while every measured claim that names its
    mechanism differs; else the verdict unchanged."""
    measured = [v for v in mechanism_verdicts if v in RANK]
    if claim_verdict == REPRODUCES and measured and all(v == DIFFERS for v in measured):
        return WRONG_REASON
    return claim_verdict
