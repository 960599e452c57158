"""PigeonC's CS_i as the 2023 authors' simulator builds it: a plug-in choice for the distributors' weights.

The paper (Megha 2023, 4.2) counts, per cluster, each distinct machine constraint set with its frequency
(its example: workers (C2, C4), (C4), (C2, C4) give CS = {(C2, C4): 2, (C4): 1}); the distributors weigh a
cluster for a task by the count of machines whose set contains the task's constraints. That is what
``actors.pigeon.distributor.ConstraintSetCounts`` does (``cs_counts=paper``).

The authors' simulator (meghanat/megha-constraint-aware at b503dbc, pigeon_sim's Simulation, where it
builds WORKERS_CONSTRAINT_SETS) builds it otherwise, machine by machine in each cluster's order: a machine
whose set is a subset of one or more sets already counted adds one to each of those and gets no entry of
its own; any other machine starts an entry with count 1. The example gives {(C2, C4): 3}. A cluster with an
early machine of many constraints then has that set's count swollen by the later machines it contains,
and draws far more of the tasks that need one of its rarer constraints than the machines that can run
them (``cs_counts=subset-merge``; docs/reproductions/pigeonc.md measures what that does to PigeonC).
"""

from __future__ import annotations

from typing import Sequence

_CACHE_LIMIT = 4096


def _mask(constraints) -> int:
    return sum(1 << c for c in dict.fromkeys(constraints))


def subset_merged(constraint_sets: Sequence) -> dict[int, int]:
    """The authors' table for one cluster: machine constraint sets (in the cluster's order) -> {set as a bit
    mask: count}; a set contained in entries already there adds one to each of them instead of its own."""
    table: dict[int, int] = {}
    for cons in constraint_sets:
        m = _mask(cons)
        hit = False
        for key in table:
            if m & ~key == 0:
                table[key] += 1
                hit = True
        if not hit:
            table[m] = 1
    return table


class SubsetMergedCounts:
    """``weights`` as ``ConstraintSetCounts`` has it, from the authors' merged tables: for every cluster, the
    sum of the counts of its entries whose set contains the task's constraints. Capacities are not looked
    at (the authors' machines are one slot each)."""

    def __init__(self, groups: Sequence[Sequence]) -> None:
        self.tables = [tuple(subset_merged([w.constraints for w in workers]).items()) for workers in groups]
        self._cache: dict[tuple, tuple[int, ...]] = {}

    def weights(self, constraints: tuple, demand: tuple = (1,)) -> tuple[int, ...]:
        hit = self._cache.get(constraints)
        if hit is not None:
            return hit
        need = _mask(constraints)
        out = tuple(sum(v for key, v in table if need & ~key == 0) for table in self.tables)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[constraints] = out
        return out
