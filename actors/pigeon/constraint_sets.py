"""PigeonC's CS_i, the per-cluster constraint-set counts its distributors weigh the masters by (Megha 2023,
4.2), built in one of two ways (``cs_counts``).

- ``paper``: the paper counts, per cluster, each distinct machine constraint set with its frequency (its
  example: workers (C2, C4), (C4), (C2, C4) give CS = {(C2, C4): 2, (C4): 1}); the distributors weigh a
  cluster for a task by the count of machines whose set contains the task's constraints
  (``ConstraintSetCounts``; the counts only include machines whose capacity covers the task's demand).
- ``subset-merge``: the authors' simulator (meghanat/megha-constraint-aware at b503dbc, pigeon_sim's
  Simulation, where it builds WORKERS_CONSTRAINT_SETS) builds it otherwise, machine by machine in each
  cluster's order: a machine whose set is a subset of one or more sets already counted adds one to each of
  those and gets no entry of its own; any other machine starts an entry with count 1. The example gives
  {(C2, C4): 3}. A cluster with an early machine of many constraints then has that set's count swollen by
  the later machines it contains, and draws far more of the tasks that need one of its rarer constraints
  than the machines that can run them (``SubsetMergedCounts``; docs/reproductions/pigeonc.md measures what
  that does to PigeonC).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fedemu.fabric.rand import Weights

_CACHE_LIMIT = 4096


class _Tables:
    """``table``: a task shape's weights made ready for draws (``Stream.pick``), once per distinct shape for
    every distributor (the counts never change during a run)."""

    _tables: dict

    def table(self, constraints: tuple, demand: tuple = (1,)) -> Weights:
        key = (constraints, demand)
        table = self._tables.get(key)
        if table is None:
            if len(self._tables) >= _CACHE_LIMIT:
                self._tables.clear()
            table = self._tables[key] = Weights(self.weights(constraints, demand))
        return table


class ConstraintSetCounts(_Tables):
    """PigeonC's CS_i: per group, how many machines have each distinct (constraint set, capacity).

    ``weights`` counts a group's machines with a bit per machine: one mask per constraint (the machines
    that have it) and one per demand (those big enough), ANDed and counted, so a new constraint set costs
    a few big-integer operations per group rather than a pass over the group's distinct sets."""

    def __init__(self, groups: Sequence[Sequence]) -> None:
        self.tables: list[dict[tuple, int]] = []
        self._masks: list[dict[int, int]] = []  # per group: constraint id -> the machines that have it
        self._capacities: list[list[tuple]] = []  # per group: each machine's capacity, in order
        for workers in groups:
            table: dict[tuple, int] = {}
            masks: dict[int, int] = {}
            for i, w in enumerate(workers):
                cons = tuple(sorted(dict.fromkeys(w.constraints)))
                table[cons] = table.get(cons, 0) + 1
                for c in cons:
                    masks[c] = masks.get(c, 0) | (1 << i)
            self.tables.append(table)
            self._masks.append(masks)
            self._capacities.append([tuple(w.capacity) for w in workers])
        self._fits: dict[tuple, list[int]] = {}  # demand -> per group: the machines with room for it
        self._cache: dict[tuple, tuple[int, ...]] = {}
        self._tables: dict[tuple, Weights] = {}

    def _fit(self, demand: tuple) -> list[int]:
        fits = self._fits.get(demand)
        if fits is None:
            fits = self._fits[demand] = [
                sum(1 << i for i, cap in enumerate(caps) if all(c >= d for c, d in zip(cap, demand)))
                for caps in self._capacities]
        return fits

    def weights(self, constraints: tuple, demand: tuple = (1,)) -> tuple[int, ...]:
        """count_i(C_T) for every group i: machines whose constraint set contains ``constraints``."""
        key = (constraints, demand)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        out = []
        for fit, masks in zip(self._fit(demand), self._masks):
            for c in constraints:
                fit &= masks.get(c, 0)
                if not fit:
                    break
            out.append(fit.bit_count())
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = hit = tuple(out)
        return hit


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


class SubsetMergedCounts(_Tables):
    """``weights`` as ``ConstraintSetCounts`` has it, from the authors' merged tables: for every cluster, the
    sum of the counts of its entries whose set contains the task's constraints. Capacities are not looked
    at (the authors' machines are one slot each)."""

    def __init__(self, groups: Sequence[Sequence]) -> None:
        self.tables = [tuple(subset_merged([w.constraints for w in workers]).items()) for workers in groups]
        self._cache: dict[tuple, tuple[int, ...]] = {}
        self._tables: dict[tuple, Weights] = {}
        # every table's entries in one array (a task asks them all: 100 clusters of ~75 entries at paper
        # scale), with each table's end in the running sum; Python ints where a set does not fit 63 bits
        keys = [key for table in self.tables for key, _ in table]
        self._flat = None
        if max(keys, default=0).bit_length() < 63:
            sizes = np.array([len(table) for table in self.tables], dtype=np.int64)
            ends = np.cumsum(sizes)
            self._flat = (np.array(keys, dtype=np.int64),
                          np.array([v for table in self.tables for _, v in table], dtype=np.int64),
                          ends - sizes, ends)

    def weights(self, constraints: tuple, demand: tuple = (1,)) -> tuple[int, ...]:
        hit = self._cache.get(constraints)
        if hit is not None:
            return hit
        need = _mask(constraints)
        if self._flat is not None and need.bit_length() < 63:
            keys, counts, starts, ends = self._flat
            running = np.concatenate(([0], np.cumsum(np.where(keys & need == need, counts, 0))))
            out = tuple((running[ends] - running[starts]).tolist())
        else:
            out = tuple(sum(v for key, v in table if need & ~key == 0) for table in self.tables)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[constraints] = out
        return out
