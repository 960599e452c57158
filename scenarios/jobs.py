"""Jobs and tasks as every workload produces them and every scheduler consumes them.

Times are integer microseconds of virtual time. A job's tasks share its arrival; each task has a
duration and a (possibly empty) sorted tuple of constraint ids (0-20) it needs from a machine.
"""

from __future__ import annotations

import attrs

US_PER_S = 1_000_000


def seconds_to_us(seconds: float) -> int:
    """Round seconds to integer microseconds."""
    return int(round(seconds * US_PER_S))


@attrs.frozen(slots=True)
class Job:
    """One job: ``durations_us[i]`` and ``constraints[i]`` describe task ``i``.

    ``demand`` is what each task takes from a worker's capacity vector (default one slot).
    """

    job_id: int
    arrival_us: int
    durations_us: tuple[int, ...]
    constraints: tuple[tuple[int, ...], ...] = attrs.field()
    demand: tuple[int, ...] = (1,)

    @constraints.default
    def _no_constraints(self):
        return ((),) * len(self.durations_us)

    @property
    def num_tasks(self) -> int:
        return len(self.durations_us)

    @property
    def ideal_jrt_us(self) -> int:
        """The job's ideal response time: its longest task (000, Eq. 1)."""
        return max(self.durations_us)

    @property
    def mean_task_us(self) -> float:
        return sum(self.durations_us) / len(self.durations_us)
