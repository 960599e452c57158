"""A late-binding job's probe groups: its tasks split by (constraints, demand), in first-appearance order.

Each group is the queue of its unbound task indices, served oldest first. It is a list with the next
task last (``pop()``), not a deque: a job's groups are mostly a task or a few, and an empty deque takes
760 bytes where a short list takes 60 to 100 (6 MB at the busiest moment of Sparrow's run at 10,000
workers). A task that goes back to its queue after a fault joins it at the far end (``requeue``).
"""

from __future__ import annotations


def probe_groups(job) -> tuple[list[list[int]], dict[tuple, int]]:
    """``job``'s groups (each its task indices, the first to serve last) and (constraints, demand) -> group."""
    group_of: dict[tuple, int] = {}
    groups: list[list[int]] = []
    demand = job.demand
    for i, c in enumerate(job.constraints):
        key = (c, demand)
        g = group_of.get(key)
        if g is None:
            g = group_of[key] = len(groups)
            groups.append([])
        groups[g].append(i)
    for queue in groups:
        queue.reverse()
    return groups, group_of


def requeue(queue: list[int], index: int) -> None:
    """Task ``index`` goes back to ``queue``, behind every task waiting there (served after them)."""
    queue.insert(0, index)
