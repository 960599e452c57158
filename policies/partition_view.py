"""The matching structure one scheduler keeps for one partition (Megha) or cluster (Pigeon) of workers.

Per constraint id a packed bit vector of the machines providing it (built once), a free-capacity
matrix and an availability bit vector for the unit demand; ``suitable`` is Algorithm 1 of the Megha
2023 paper. Availability and the cached AND of each task's constraint
vectors are kept as Python ints (see ``bitvec``): a partition has ~100 workers, where an int AND
costs 60 ns and a numpy one 500 ns.
"""

from __future__ import annotations

import copy
from typing import Sequence

import numpy as np

from fedemu.fabric.errors import ConfigError
from fedemu.policies import bitvec
from fedemu.model import NUM_CONSTRAINTS, WorkerSpec

_EMPTY = np.empty(0, dtype=np.intp)
_CACHE_LIMIT = 4096


class _Demand:
    """A parsed demand: padded to R entries, and how it relates to the unit demand."""

    __slots__ = ("vec", "first", "is_unit", "covers_unit")

    def __init__(self, vec: np.ndarray, unit: np.ndarray) -> None:
        self.vec = vec
        self.first = int(vec[0])
        self.is_unit = bool((vec == unit).all())
        self.covers_unit = bool((vec >= unit).all())


class PartitionView:
    """n workers (local indices 0..n-1) with constraint vectors, free capacity and availability.

    Policies get it read-only; the owning scheduler mutates it through allocate/release/set_free.
    ``free_count`` (read only) is how many workers can take the unit demand now: O(1), so callers
    skip full partitions without searching them.
    """

    # Slots: a GM holds one view per (LM, partition) and touches one on every state change it learns.
    __slots__ = ("n", "num_constraints", "num_resources", "worker_ids", "_local_of", "capacity", "speed",
                 "constraint_counts", "constraint_vectors", "worker_constraints", "count_bits",
                 "_all", "_unit_tuple", "_demands", "_masks", "_unit", "_unit_first",
                 "_single", "_cap0", "_free0", "_free", "_flags", "_avail", "free_count", "grew")

    def __init__(
        self,
        workers: Sequence[WorkerSpec],
        *,
        num_constraints: int = NUM_CONSTRAINTS,
        num_resources: int | None = None,
        unit_demand: tuple[int, ...] = (1,),
    ) -> None:
        workers = tuple(workers)
        n = len(workers)
        if num_resources is None:
            num_resources = len(workers[0].capacity) if workers else len(unit_demand)
        if num_resources < 1:
            raise ConfigError(f"num_resources must be >= 1, got {num_resources}")
        self.n = n
        self.num_constraints = num_constraints
        self.num_resources = num_resources
        self.worker_ids = np.array([w.worker_id for w in workers], dtype=np.int64)
        self._local_of = {w.worker_id: i for i, w in enumerate(workers)}
        if len(self._local_of) != n:
            raise ConfigError(f"duplicate worker ids in a partition: {self.worker_ids.tolist()}")

        capacity = np.zeros((n, num_resources), dtype=np.int64)
        per_constraint: list[list[int]] = [[] for _ in range(num_constraints)]
        counts = np.zeros(n, dtype=np.int64)
        bits = [0] * n
        for i, w in enumerate(workers):
            if len(w.capacity) != num_resources:
                raise ConfigError(
                    f"worker {w.worker_id}: capacity {w.capacity} has {len(w.capacity)} entries; "
                    f"expected {num_resources}"
                )
            if min(w.capacity) < 0:
                raise ConfigError(f"worker {w.worker_id}: capacity {w.capacity} has a negative entry")
            capacity[i] = w.capacity
            distinct = sorted(dict.fromkeys(w.constraints))
            for c in distinct:
                if not 0 <= c < num_constraints:
                    raise ConfigError(
                        f"worker {w.worker_id}: constraint id {c} out of range; "
                        f"expected 0..{num_constraints - 1}"
                    )
                per_constraint[c].append(i)
                bits[i] |= 1 << c
            counts[i] = len(distinct)
        self.capacity = capacity
        self.speed = np.array([w.speed for w in workers], dtype=np.float64)  # k_n, for speed-aware policies
        self.speed.flags.writeable = False
        free = capacity.copy()
        self.constraint_counts = counts
        self.worker_constraints = tuple(bits)  # per worker, its constraint ids as bits of an int
        by_count: dict[int, int] = {}
        for i in np.argsort(counts, kind="stable").tolist():
            by_count[int(counts[i])] = by_count.get(int(counts[i]), 0) | 1 << i
        self.count_bits = tuple(by_count.values())  # the workers with the fewest constraints, then more, as bits
        vectors = np.zeros((num_constraints, bitvec.num_words(n)), dtype=np.uint64)
        for c, members in enumerate(per_constraint):
            vectors[c] = bitvec.from_indices(n, members)
        self.constraint_vectors = vectors
        for arr in (self.worker_ids, capacity, counts, self.constraint_vectors):
            arr.flags.writeable = False

        self._all = (1 << n) - 1
        self._unit_tuple = tuple(unit_demand)
        self._demands: dict[tuple, _Demand] = {}
        self._masks: dict[tuple, int | None] = {(): None}
        unit = np.zeros(num_resources, dtype=np.int64)
        if len(unit_demand) > num_resources or min(unit_demand, default=0) < 0 or not any(unit_demand):
            raise ConfigError(
                f"unit demand {unit_demand} is invalid; expected 1..{num_resources} "
                "non-negative entries, not all zero"
            )
        unit[: len(unit_demand)] = unit_demand
        self._unit = unit
        self._unit_first = int(unit[0])
        self._single = num_resources == 1
        self._cap0 = self.capacity[:, 0].tolist()
        # Free capacity: with one resource a plain list (the hot path, no numpy per worker), else a matrix.
        self._free0 = list(self._cap0) if self._single else None
        self._free = None if self._single else free
        ok = (free >= unit).all(axis=1)
        self._flags = bytearray(ok.astype(np.uint8).tobytes())
        self._avail = bitvec.to_int(bitvec.from_indices(n, np.flatnonzero(ok)))
        self.free_count = int(ok.sum())
        self.grew = False  # whether the last ``update`` that changed a worker gave it more of something

    def clone(self) -> "PartitionView":
        """An independent view of the same workers in the same state: the constraint vectors and
        caches (functions of the machines only) are shared, free capacity and availability copied.
        Cheap, so every scheduler can start from one template."""
        other = copy.copy(self)
        if self._single:
            other._free0 = list(self._free0)
        else:
            other._free = self._free.copy()
        other._flags = bytearray(self._flags)
        return other

    # --- read side -------------------------------------------------------------------------------

    @property
    def free(self) -> np.ndarray:
        """Free capacity, one row per worker (read it only: with one resource this is a fresh copy)."""
        if self._single:
            return np.array(self._free0, dtype=np.int64).reshape(-1, 1)
        return self._free

    @property
    def free_values(self) -> list | None:
        """With one resource, the live list of free values, one per worker (read it only: it is the same
        list for the view's whole life, so a caller may keep it); with more, None."""
        return self._free0

    @property
    def available(self) -> np.ndarray:
        """A copy of the availability bit vector: bit i set when worker i can take the unit demand."""
        return bitvec.from_int(self.n, self._avail)

    def free_of(self, local: int) -> tuple:
        """Worker ``local``'s free vector, as a tuple of ints."""
        if self._single:
            return (int(self._free0[local]),)
        return tuple(int(x) for x in self._free[local])

    def local_of(self, worker_id: int) -> int:
        """The local index of a global worker id."""
        try:
            return self._local_of[worker_id]
        except KeyError:
            raise KeyError(f"worker {worker_id} is not in this partition") from None

    def is_available(self, local: int) -> bool:
        """Whether worker ``local`` can take the unit demand now."""
        return bool(self._flags[local])

    def suitable(self, constraints: tuple[int, ...] = (), demand: tuple[int, ...] = (1,)) -> np.ndarray:
        """Local indices (ascending) having every constraint and free capacity >= demand."""
        v, d = self._covering(constraints, demand)
        if not v:
            return _EMPTY
        idx = bitvec.int_indices(v)
        return idx if d.is_unit else self._with_room(idx, d)

    def suitable_bits(self, constraints: tuple[int, ...] = (), demand: tuple[int, ...] = (1,)) -> int:
        """``suitable`` as bits of an int (bit i: local index i); for the unit demand, nothing unpacked."""
        v, d = self._covering(constraints, demand)
        if not v or d.is_unit:
            return v
        return bitvec.to_int(bitvec.from_indices(self.n, self._with_room(bitvec.int_indices(v), d)))

    def _covering(self, constraints, demand) -> tuple[int, _Demand]:
        """The workers having every constraint, and free for the unit demand when ``demand`` covers it
        (as bits), and the parsed demand."""
        mask, d = self._lookup(constraints, demand)
        if d.covers_unit:
            if self.free_count == 0:
                return 0, d
            return (self._avail if mask is None else mask & self._avail), d
        return (self._all if mask is None else mask), d

    def _with_room(self, idx: np.ndarray, d: _Demand) -> np.ndarray:
        """Those of ``idx`` whose free capacity covers the demand ``d``."""
        if self._single:
            free0, first = self._free0, d.first
            return np.array([i for i in idx.tolist() if free0[i] >= first], dtype=np.intp)
        return idx[(self._free[idx] >= d.vec).all(axis=1)]

    def fits(self, local: int, constraints: tuple[int, ...] = (), demand: tuple[int, ...] = (1,)) -> bool:
        """Whether worker ``local`` has every constraint and free capacity >= demand (``suitable`` for one worker)."""
        mask, d = self._lookup(constraints, demand)
        if mask is not None and not (mask >> local) & 1:
            return False
        if self._single:
            return self._free0[local] >= d.first
        return bool((self._free[local] >= d.vec).all())

    def suitable_among(self, bits: int, constraints: tuple[int, ...] = (), demand: tuple[int, ...] = (1,)) -> bool:
        """Whether ``suitable`` holds a worker of ``bits`` (local indices as bits of an int): a search
        of a few workers, without unpacking."""
        mask, d = self._lookup(constraints, demand)
        v = bits if mask is None else mask & bits
        if d.covers_unit:
            v &= self._avail
            if d.is_unit or not v:
                return bool(v)
        while v:
            low = v & -v
            v ^= low
            if self.fits(low.bit_length() - 1, (), demand):
                return True
        return False

    def having(self, constraints: tuple[int, ...] = ()) -> int:
        """The workers having every one of ``constraints`` (all of them for none), as bits of an int."""
        mask = self._masks.get(constraints, False)
        if mask is False:
            mask = self._build_mask(constraints)
        return self._all if mask is None else mask

    def constraint_bits(self, constraints: tuple[int, ...] = ()) -> int:
        """``constraints`` as bits of an int (bit c for id c): a worker has them all when they are
        among its ``worker_constraints``. ConfigError for an id out of range, like ``suitable``."""
        return sum(1 << c for c in self._checked(constraints))

    @property
    def available_bits(self) -> int:
        """The workers that can take the unit demand now, as bits of an int (``available`` unpacked)."""
        return self._avail

    def is_unit(self, demand: tuple[int, ...]) -> bool:
        """Whether ``demand`` is the unit demand (zeros for resources it leaves out)."""
        d = self._demands.get(demand)
        return (self._parse_demand(demand) if d is None else d).is_unit

    def covers_unit(self, demand: tuple[int, ...]) -> bool:
        """Whether ``demand`` needs at least the unit demand of every resource (a worker not available
        for the unit demand then fits it nowhere)."""
        d = self._demands.get(demand)
        return (self._parse_demand(demand) if d is None else d).covers_unit

    def any_suitable(self, constraints: tuple[int, ...] = (), demand: tuple[int, ...] = (1,)) -> bool:
        """Whether ``suitable`` would be non-empty (cheaper for the unit demand: no unpacking)."""
        if demand == self._unit_tuple:
            if self.free_count == 0:
                return False
            mask = self._lookup(constraints, demand)[0]
            return mask is None or bool(mask & self._avail)
        return self.suitable(constraints, demand).size > 0

    # --- write side (the owning scheduler only) ---------------------------------------------------

    def allocate(self, local: int, demand: tuple[int, ...] = (1,)) -> None:
        """Take ``demand`` from worker ``local``; AssertionError if free capacity would go negative."""
        d = self._demands.get(demand)
        if d is None:
            d = self._parse_demand(demand)
        if self._single:
            f = self._free0[local] - d.first
            if f < 0:
                raise AssertionError(
                    f"over-allocation of worker {self.worker_ids[local]}: free {f + d.first}, demand {demand}"
                )
            self._free0[local] = f
            self._set_flag(local, f >= self._unit_first)
            return
        free = self._free
        new = free[local] - d.vec
        if (new < 0).any():
            raise AssertionError(
                f"over-allocation of worker {self.worker_ids[local]}: free {free[local].tolist()}, "
                f"demand {demand}"
            )
        free[local] = new
        self._set_flag(local, bool((new >= self._unit).all()))

    def release(self, local: int, demand: tuple[int, ...] = (1,)) -> None:
        """Give ``demand`` back to worker ``local``; AssertionError if that exceeds its capacity."""
        d = self._demands.get(demand)
        if d is None:
            d = self._parse_demand(demand)
        if self._single:
            f = self._free0[local] + d.first
            if f > self._cap0[local]:
                raise AssertionError(
                    f"release beyond capacity on worker {self.worker_ids[local]}: free would be {f}, "
                    f"capacity {self._cap0[local]}"
                )
            self._free0[local] = f
            self._set_flag(local, f >= self._unit_first)
            return
        free = self._free
        new = free[local] + d.vec
        if (new > self.capacity[local]).any():
            raise AssertionError(
                f"release beyond capacity on worker {self.worker_ids[local]}: free would be "
                f"{new.tolist()}, capacity {self.capacity[local].tolist()}"
            )
        free[local] = new
        self._set_flag(local, bool((new >= self._unit).all()))

    def set_free(self, local: int, free_vector) -> None:
        """Overwrite worker ``local``'s free capacity (a state update learnt from elsewhere)."""
        if self._single and len(free_vector) == 1:  # the common one-resource case, without numpy math
            f = free_vector[0]
            if not 0 <= f <= self._cap0[local]:
                raise AssertionError(f"free {list(free_vector)} for worker {self.worker_ids[local]} is not within "
                                     f"0..{[self._cap0[local]]}")
            self._free0[local] = f
            self._set_flag(local, f >= self._unit_first)
            return
        new = np.asarray(free_vector, dtype=np.int64).reshape(-1)
        if new.size != self.num_resources or (new < 0).any() or (new > self.capacity[local]).any():
            raise AssertionError(
                f"free {new.tolist()} for worker {self.worker_ids[local]} is not within "
                f"0..{self.capacity[local].tolist()}"
            )
        if self._single:
            self._free0[local] = int(new[0])
        else:
            self._free[local] = new
        self._set_flag(local, bool((new >= self._unit).all()))

    def update(self, local: int, free_vector) -> int | None:
        """``set_free`` that returns what changed: None when the view already held this vector, else
        how availability changed (+1 became available, -1 became unavailable, 0 unchanged), which is
        what a scheduler's counters and search memo need, in one call. After a change, ``grew`` says
        whether the worker gained some resource (a search memo need not look again otherwise)."""
        if self._single and len(free_vector) == 1:  # the hot one-resource case, inlined
            f = free_vector[0]
            old = self._free0[local]
            if f == old:
                return None
            if not 0 <= f <= self._cap0[local]:
                raise AssertionError(f"free {list(free_vector)} for worker {self.worker_ids[local]} is not within "
                                     f"0..{[self._cap0[local]]}")
            self.grew = f > old
            self._free0[local] = f
            now = f >= self._unit_first
            if self._flags[local] == now:
                return 0
            self._flags[local] = now
            self._avail ^= 1 << local
            if now:
                self.free_count += 1
                return 1
            self.free_count -= 1
            return -1
        if not self._single:
            held = self._free[local].tolist()
            if held == list(free_vector):
                return None
            self.grew = any(f > h for f, h in zip(free_vector, held))
        else:
            self.grew = free_vector[0] > self._free0[local]
        before = self._flags[local]
        self.set_free(local, free_vector)
        return self._flags[local] - before

    def replace_free(self, free: np.ndarray) -> None:
        """Overwrite the whole free matrix (a full snapshot) and rebuild availability in one pass."""
        free = np.asarray(free, dtype=np.int64)
        if free.shape != self.capacity.shape or (free < 0).any() or (free > self.capacity).any():
            raise AssertionError(f"free snapshot of shape {free.shape} is not within 0..capacity")
        if self._single:
            self._free0[:] = free[:, 0].tolist()  # in place: ``free_values`` stays the live list
        else:
            self._free[:] = free
        ok = (free >= self._unit).all(axis=1)
        self._flags[:] = ok.astype(np.uint8).tobytes()
        self._avail = bitvec.to_int(bitvec.from_indices(self.n, np.flatnonzero(ok)))
        self.free_count = int(ok.sum())

    # --- internals -------------------------------------------------------------------------------

    def _set_flag(self, local: int, now: bool) -> None:
        if self._flags[local] != now:
            self._flags[local] = now
            self._avail ^= 1 << local
            if now:
                self.free_count += 1
            else:
                self.free_count -= 1

    def _lookup(self, constraints, demand) -> tuple[int | None, _Demand]:
        """The constraints' worker mask (None: every worker) and the parsed demand, each cached."""
        mask = self._masks.get(constraints, False)
        if mask is False:
            mask = self._build_mask(constraints)
        d = self._demands.get(demand)
        return mask, (self._parse_demand(demand) if d is None else d)

    def _parse_demand(self, demand) -> _Demand:
        key = demand
        demand = tuple(demand)
        if not 1 <= len(demand) <= self.num_resources or min(demand) < 0 or not any(demand):
            raise ConfigError(
                f"task demand {demand} is invalid; expected 1..{self.num_resources} "
                "non-negative entries, not all zero"
            )
        vec = np.zeros(self.num_resources, dtype=np.int64)
        vec[: len(demand)] = demand
        vec.flags.writeable = False
        d = _Demand(vec, self._unit)
        if len(self._demands) >= _CACHE_LIMIT:
            self._demands.clear()
        self._demands[key] = d
        return d

    def _checked(self, constraints) -> list[int]:
        """The distinct ids of ``constraints``, ascending; ConfigError for one out of range."""
        ids = sorted(dict.fromkeys(constraints))
        for c in ids:
            if not 0 <= c < self.num_constraints:
                raise ConfigError(
                    f"task constraint id {c} out of range; expected 0..{self.num_constraints - 1}"
                )
        return ids

    def _build_mask(self, constraints) -> int | None:
        key = constraints
        ids = self._checked(constraints)
        mask = bitvec.to_int(bitvec.and_all(self.constraint_vectors[c] for c in ids)) if ids else None
        if len(self._masks) >= _CACHE_LIMIT:
            self._masks.clear()
            self._masks[()] = None
        self._masks[key] = mask
        return mask
