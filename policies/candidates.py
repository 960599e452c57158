"""What every worker-choice policy does first with its candidates (suitable machine indices)."""

from __future__ import annotations


def sole(candidates) -> int | None:
    """The only candidate (nothing to draw), or None when there are several; none at all is an error."""
    if len(candidates) == 0:
        raise ValueError("choose needs at least one candidate")
    return int(candidates[0]) if len(candidates) == 1 else None
