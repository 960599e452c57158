"""The verdict of one reproduced claim: the paper's number against ours, by fixed, documented rules.

Verdicts: ``reproduces``, ``same direction``, ``differs``; ``not measured`` when our number is missing
(its runs failed or were not part of this reproduction). The rules, per kind of claim:

- ``ratio`` (the paper says A/B = p, e.g. "Megha cuts p99 by 5.61x"): a ratio's *direction* is up
  (> tie), down (< 1/tie) or none (within the tie band; tie = TIE unless the claim sets it). Directions differ: ``differs``. Same direction
  and ours within a factor TOL of p: ``reproduces``; same direction otherwise: ``same direction``.
- ``at_least`` (the paper says the quantity is at least p, or only that A exceeds B: p = baseline = 1):
  ours > baseline * tie and ours >= p: ``reproduces``; ours > baseline * tie only: ``same direction``;
  else ``differs``. ``baseline`` is the value that separates the two directions (1 for a ratio, 0.5 for
  "the largest part of a whole").
- ``at_most``: the mirror image (ours < baseline / tie and ours <= p; ours < baseline / tie only).
- ``value`` (a single number, e.g. "the median delay was 1.5 ms"): ours within a factor ``tol`` (default
  TOL) of p: ``reproduces``; within a factor ``order`` (default ORDER = 10, the same order of
  magnitude): ``same direction``; else ``differs``. An exact number (a worked example) sets both to 1.001.

Numbers below FLOOR (delays of 0 s, for instance) count as FLOOR, so every ratio is defined.
"""

from __future__ import annotations

import math

TIE = 1.1  # ratios within [1/1.1, 1.1] of the baseline show no difference either way
TOL = 2.0  # "reproduces": within a factor of 2 of the paper's number
ORDER = 10.0  # "same direction" for a single value: within a factor of 10
FLOOR = 1e-6

REPRODUCES, SAME, DIFFERS, NOT_MEASURED = "reproduces", "same direction", "differs", "not measured"
RANK = {DIFFERS: 0, SAME: 1, REPRODUCES: 2}
KINDS = ("ratio", "at_least", "at_most", "value")


def _floor(x: float) -> float:
    return max(float(x), FLOOR)


def direction(ratio: float, tie: float = TIE) -> int:
    """+1 up, -1 down, 0 within the tie band around 1."""
    r = _floor(ratio)
    return 1 if r > tie else -1 if r < 1 / tie else 0


def within(a: float, b: float, factor: float) -> bool:
    """Whether a and b (both floored) are within ``factor`` of each other (a small margin for rounding)."""
    return abs(math.log(_floor(a)) - math.log(_floor(b))) <= math.log(factor) + 1e-12


def verdict(kind: str, paper: float, ours: float | None, *, baseline: float = 1.0, tol: float = TOL,
            tie: float = TIE, order: float = ORDER) -> str:
    """The verdict of ``ours`` against the paper's ``paper`` for a claim of ``kind`` (see the module doc)."""
    if kind not in KINDS:
        raise ValueError(f"unknown claim kind {kind!r}; known: {', '.join(KINDS)}")
    if ours is None or (isinstance(ours, float) and math.isnan(ours)):
        return NOT_MEASURED
    if kind == "ratio":
        if direction(ours, tie) != direction(paper, tie):
            return DIFFERS
        return REPRODUCES if within(ours, paper, tol) else SAME
    if kind == "value":
        return REPRODUCES if within(ours, paper, tol) else SAME if within(ours, paper, order) else DIFFERS
    if kind == "at_least":
        edge = baseline * tie
        return (REPRODUCES if ours >= paper else SAME) if ours > edge else DIFFERS
    edge = baseline / tie  # at_most
    return (REPRODUCES if ours <= paper else SAME) if ours < edge else DIFFERS
