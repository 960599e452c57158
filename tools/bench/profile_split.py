"""Where a run's time goes: cProfile's own time per function, summed by the part of the code it is in.

The parts are the project's layers and units (``fabric/kernel.py``, ``actors/megha/local_manager.py``, ...),
trio, and the rest (``C builtins``: built-in functions and methods, such as msgpack's packer and dict
methods; ``stdlib``; other packages by name). The profiler slows function calls, so the split is a
guide to where to look, not a measurement of the run's speed (the bench's wall time is that).
"""

from __future__ import annotations

import pstats
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the package's folder (the repository root)
LAYERS = ("fabric", "policies", "actors", "scenarios", "tools")


def part_of(filename: str) -> str:
    """The part of the code a profiled function's file belongs to."""
    if filename.startswith("~") or filename.startswith("<"):
        return "C builtins" if filename.startswith("~") else "generated (attrs)"
    path = Path(filename)
    parts = path.parts
    if "site-packages" in parts:  # an installed package (a venv may sit inside the repository)
        return parts[parts.index("site-packages") + 1]
    try:
        rel = path.resolve().relative_to(ROOT)
    except ValueError:
        return "stdlib"
    return str(rel) if rel.parts[0] in LAYERS or len(rel.parts) == 1 else rel.parts[0]


def split(stats: pstats.Stats) -> list[tuple[str, float, int]]:
    """(part, own seconds, calls), the largest first."""
    totals: dict[str, list] = {}
    for (filename, _line, _name), (_cc, calls, own, _cum, _callers) in stats.stats.items():
        t = totals.setdefault(part_of(filename), [0.0, 0])
        t[0] += own
        t[1] += calls
    return sorted(((k, v[0], v[1]) for k, v in totals.items()), key=lambda x: (-x[1], x[0]))


def layers(parts: list[tuple[str, float, int]]) -> list[tuple[str, float]]:
    """The same split summed by layer (``fabric``, ``actors``, ..., ``trio``, ``C builtins``, ...)."""
    out: dict[str, float] = {}
    for part, own, _ in parts:
        out[part.split("/")[0]] = out.get(part.split("/")[0], 0.0) + own
    return sorted(out.items(), key=lambda x: (-x[1], x[0]))
