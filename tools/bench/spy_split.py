"""Where a whole ``fedemu run`` process goes, from py-spy's raw samples, in the parts issue 47's profile used.

Record with ``py-spy record -r 100 -f raw -o FILE -- python -m fedemu run ...`` (``pip install py-spy``;
it is not a dependency), then ``python -m fedemu.tools.bench.spy_split FILE``. A raw line is a stack,
outermost frame first and frames split by ``;``, then a space and its sample count. The stack decides the
phase (start-up, the run, the checks, the results), and within the run its innermost frame decides the part:
the fabric, the engine (trio's scheduler or the direct loop), a message's attrs-made constructor, or the
schedulers' own code (actors, policies, the model and recorder, and what they call).
"""

from __future__ import annotations

import re
import sys
from collections import Counter

PARTS = (
    "fabric: kernel, queue, delivery, send, journal",
    "engine: trio's scheduler",
    "engine: the direct loop",
    "message construction (attrs-made methods)",
    "schedulers' own logic (with the recorder)",
    "end-of-run checks",
    "letting the fabric go (gc.collect)",
    "results: metrics, CSVs",
    "results: the PNG plots",
    "start-up, trace parsing and build",
)
FABRIC, TRIO, DIRECT, MESSAGES, SCHEDULERS, CHECKS, LET_GO, RESULTS, PLOTS, START = PARTS

# py-spy names a file from the folder its package is imported from: ``fedemu/`` when installed, the checkout's
# own folder name (``main/``, ``fedemu/``...) under an editable install. So a frame of ours is matched by
# that one folder, whatever its name, then the path inside the project.
_OURS = r"\([^/;()]+/"
_FABRIC_FRAME = re.compile(_OURS + r"fabric/")
_DIRECT_FRAME = re.compile(_OURS + r"fabric/direct\.py:")
_CHECKS_FRAME = re.compile(r"\bfinish " + _OURS + r"scenarios/run\.py:")
_RUNNER_LEAF = re.compile(r"(?:\w+\.)?_execute " + _OURS + r"tools/run/runner\.py:")


def part_of(stack: str) -> str:
    """The part one sampled stack (frames outermost first, ``;`` between them) belongs to."""
    leaf = stack.rsplit(";", 1)[-1]
    if "write_results (" in stack:
        return PLOTS if "plot_" in stack or "matplotlib/" in stack else RESULTS
    if "run_blocking (" in stack:
        if "trio/" in leaf or "outcome/" in leaf:
            return TRIO
        if _DIRECT_FRAME.search(leaf):
            return DIRECT
        if "<attrs generated" in leaf:
            return MESSAGES
        return FABRIC if _FABRIC_FRAME.search(leaf) else SCHEDULERS
    if _CHECKS_FRAME.search(stack):
        return CHECKS
    if _RUNNER_LEAF.match(leaf):
        return LET_GO  # the runner's own line after the run: its gc.collect (C, so no frame of its own)
    return START


class BadLine(ValueError):
    """A line that is not a stack and a count (``number``: its line number, from 1)."""

    def __init__(self, number: int, text: str) -> None:
        super().__init__(text)
        self.number = number


def split(lines) -> dict[str, int]:
    """Samples per part, every part listed (in ``PARTS`` order), from py-spy's raw lines."""
    counts = Counter()
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if line:
            stack, _, n = line.rpartition(" ")
            if not stack or not n.isdigit():
                raise BadLine(number, f"not a py-spy raw line (a stack, a space, a sample count): {line[:60]!r}")
            counts[part_of(stack)] += int(n)
    return {part: counts[part] for part in PARTS}


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m fedemu.tools.bench.spy_split RAW_FILE (py-spy record -f raw)", file=sys.stderr)
        return 2
    try:
        with open(args[0]) as f:
            counts = split(f)
    except BadLine as e:
        print(f"spy_split: {args[0]}:{e.number}: {e}", file=sys.stderr)
        return 2
    except (OSError, UnicodeDecodeError) as e:
        print(f"spy_split: {args[0]}: {e}", file=sys.stderr)
        return 2
    total = sum(counts.values()) or 1
    print(f"{sum(counts.values())} samples")
    for part, n in counts.items():
        print(f"{100 * n / total:5.1f}%  {part}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
