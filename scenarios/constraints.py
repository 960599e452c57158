"""Placement constraints: the constraint table, constrained machines and tasks, and feasibility lookups.

Constraint ids are 0-20 (the 21 of Sharma et al. 2011 used by the 2023 Megha paper). Two tables ship
(``--set constraint_table=NAME``, or a JSON file's path): ``standin`` (the default, ``constraint_table.json``),
invented before the paper's inputs were known, and ``megha-2023`` (``constraint_table_megha_2023.json``),
the figures of the 2023 paper's authors' simulator: machines draw each constraint with its fraction,
tasks a type, then a statistical cluster, then each constraint (``TaskModel``).

Scarcity is the stand-in's knob for how rare constrained machines are (``--set constraint_scarcity=S``,
``ConstraintTable.with_scarcity``): every machine fraction f becomes min(1, f / S). S = 1 is the table as
written; S = 2 halves the machines providing each constraint (those every machine had become a coin
flip), S = 0.5 doubles them (capped at all machines). Tasks request constraints as before, so a larger
S means more contention for the same requests, and some requests no machine satisfies any more (their
jobs are rejected as unschedulable and counted). A fraction of 0 stays 0, so the profiles keep their
character.
"""

from __future__ import annotations

import heapq
import json
import math
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import attrs
import numpy as np

from fedemu.fabric.errors import ConfigError, unknown_name
from fedemu.fabric.rand import Stream
from fedemu.model import NUM_CONSTRAINTS, Cluster, ClusterSpec, Job, WorkerSpec, positive_int
from fedemu.fabric.inputs import read_text

DEFAULT_TABLE = Path(__file__).with_name("constraint_table.json")
TABLES = {"standin": DEFAULT_TABLE,  # plugin-boundary: a table named for the 2023 paper, not its scheduler
          "megha-2023": Path(__file__).with_name("constraint_table_megha_2023.json")}  # plugin-boundary: the same

_TOP_KEYS = ("constraints", "description", "max_task_constraints", "profiles")
_MODEL_KEYS = ("cluster_percent", "cluster_weights", "types")
_ROW_REQUIRED = ("id", "machine_fraction", "task_probability")
_ROW_KEYS = ("id", "label", "machine_fraction", "task_probability")


# ---------------------------------------------------------------------------------------------- table


@attrs.frozen(slots=True)
class TaskModel:
    """How a task draws its constraints (Megha 2023, 2.3, after Sharma et al.; the authors' simulator): a type
    uniformly from ``types``, a statistical cluster k with the type's weight ``weights[k][type]``, then
    each constraint j independently with probability ``percent[k][j] / 100``."""

    types: int
    weights: tuple[tuple[float, ...], ...]  # [cluster][type], unnormalised within a type
    percent: tuple[tuple[float, ...], ...]  # [cluster][constraint]

    def marginals(self) -> tuple[float, ...]:
        """P(a task requests constraint j), for every j."""
        share = [sum(self.weights[k][t] / sum(row[t] for row in self.weights) for t in range(self.types)) / self.types
                 for k in range(len(self.weights))]
        return tuple(sum(share[k] * self.percent[k][j] / 100 for k in range(len(share)))
                     for j in range(NUM_CONSTRAINTS))


@attrs.frozen(slots=True)
class ConstraintTable:
    """Per constraint id: the chance a task requests it and, per profile, the share of machines providing it.

    ``machine_fraction[p][c]`` belongs to profile ``profiles[p]``; a task carries at most
    ``max_task_constraints`` constraints.
    """

    description: str
    max_task_constraints: int
    profiles: tuple[str, ...]
    labels: tuple[str, ...]
    task_probability: tuple[float, ...]
    machine_fraction: tuple[tuple[float, ...], ...]
    source: str = "<table>"
    task_model: TaskModel | None = None  # None: each constraint independently with its task_probability

    @classmethod
    def load(cls, path: str | os.PathLike | None = None) -> "ConstraintTable":
        """Read and validate a table from JSON ``path`` or a table's name (None or "": the stand-in)."""
        source = DEFAULT_TABLE if not path else TABLES.get(str(path), Path(path))
        text = read_text(source, "a constraint table JSON file")
        try:
            data = json.loads(text, object_pairs_hook=_no_duplicates)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{source}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            ) from None
        except _DuplicateKey as exc:
            raise ConfigError(f"{source}: duplicate key {exc.args[0]!r}") from None
        return cls.from_mapping(data, source=str(source))

    @classmethod
    def from_mapping(cls, data, *, source: str = "<table>") -> "ConstraintTable":
        """Validate an already-parsed table; errors read ``SOURCE: constraint 7: what is wrong``."""
        return _validate(data, source)

    def fractions(self, profile: str) -> tuple[float, ...]:
        """The machine fraction of every constraint id under ``profile``."""
        if profile not in self.profiles:
            raise unknown_name("profile", profile, self.profiles)
        return self.machine_fraction[self.profiles.index(profile)]

    def with_scarcity(self, scarcity: float) -> "ConstraintTable":
        """This table with every machine fraction f replaced by min(1, f / scarcity) (1: unchanged)."""
        if isinstance(scarcity, bool) or not _is_number(scarcity) or scarcity <= 0:
            raise ConfigError(f"constraint_scarcity is {scarcity!r}, expected a finite number > 0 (1: the table as written)")
        if scarcity == 1:
            return self
        scaled = tuple(tuple(min(1.0, f / scarcity) for f in row) for row in self.machine_fraction)
        return attrs.evolve(self, machine_fraction=scaled, source=f"{self.source} (scarcity {scarcity:g})")

    @property
    def constrained_share(self) -> float:
        """The expected share of tasks with at least one constraint (the cap never empties a task)."""
        m = self.task_model
        if m is None:
            return 1.0 - math.prod(1.0 - p for p in self.task_probability)
        total = 0.0
        for t in range(m.types):
            norm = sum(row[t] for row in m.weights)
            total += sum(m.weights[k][t] / norm * math.prod(1 - p / 100 for p in m.percent[k])
                         for k in range(len(m.weights))) / m.types
        return 1.0 - total


class _DuplicateKey(Exception):
    """Internal: a JSON object repeats a key."""


def _no_duplicates(pairs):
    """json object hook that rejects repeated keys instead of silently keeping the last."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_keys(obj: dict, where: str, known: Sequence[str], required: Sequence[str]) -> None:
    """Reject unknown keys and report the first missing required key, in sorted order."""
    for key in sorted(obj, key=str):
        if key not in known:
            raise ConfigError(f"{where}unknown key {key!r}; known: {', '.join(known)}")
    for key in required:
        if key not in obj:
            raise ConfigError(f"{where}missing key {key!r}")


def _unit(value, where: str, name: str) -> float:
    """A probability or fraction: a finite number in [0, 1]."""
    if not _is_number(value):
        raise ConfigError(f"{where}{name} {value!r} is not a number in [0, 1]")
    if not 0 <= value <= 1:
        raise ConfigError(f"{where}{name} {value} is not in [0, 1]")
    return float(value)


def _validate_profiles(profiles, src: str) -> tuple[str, ...]:
    """``profiles`` maps each non-empty profile name to a description string."""
    if not isinstance(profiles, dict) or not profiles:
        raise ConfigError(
            f"{src}: profiles is {profiles!r}, expected an object of profile name -> description"
        )
    for name, text in profiles.items():
        if not name:
            raise ConfigError(f"{src}: profile name '' is empty, expected a name such as 'A'")
        if not isinstance(text, str):
            raise ConfigError(f"{src}: profile {name!r} has description {text!r}, expected a string")
    return tuple(profiles)


def _validate_row(row, index: int, profiles: tuple[str, ...], src: str):
    """Check one constraint entry; returns (label, task_probability, fraction per profile)."""
    if not isinstance(row, dict):
        raise ConfigError(f"{src}: constraints[{index}] is {row!r}, expected an object")
    if "id" not in row:
        raise ConfigError(f"{src}: constraints[{index}]: missing key 'id'")
    if row["id"] != index or isinstance(row["id"], bool) or not isinstance(row["id"], int):
        raise ConfigError(
            f"{src}: constraints[{index}] has id {row['id']!r}, expected {index} (ids 0-20 in order)"
        )
    where = f"{src}: constraint {index}: "
    _check_keys(row, where, _ROW_KEYS, _ROW_REQUIRED)
    label = row.get("label", "")
    if not isinstance(label, str):
        raise ConfigError(f"{where}label is {label!r}, expected a string")
    prob = _unit(row["task_probability"], where, "task_probability")
    fractions = row["machine_fraction"]
    if not isinstance(fractions, dict):
        raise ConfigError(
            f"{where}machine_fraction is {fractions!r}, "
            f"expected an object with profiles {', '.join(profiles)}"
        )
    for name in sorted(fractions, key=str):
        if name not in profiles:
            raise ConfigError(
                f"{where}machine_fraction has unknown profile {name!r}; known: {', '.join(profiles)}"
            )
    for name in profiles:
        if name not in fractions:
            raise ConfigError(f"{where}machine_fraction is missing profile {name!r}")
    per_profile = tuple(_unit(fractions[name], where, f"machine_fraction[{name!r}]") for name in profiles)
    if not any(per_profile):
        raise ConfigError(
            f"{where}no profile provides it (every machine_fraction is 0); "
            "tasks requesting it could never run"
        )
    return label, prob, per_profile


def _validate(data, src: str) -> ConstraintTable:
    """Build a ConstraintTable from parsed JSON, or raise the first problem as a ConfigError."""
    if not isinstance(data, dict):
        raise ConfigError(f"{src}: the table is a {type(data).__name__}, expected a JSON object")
    _check_keys(data, f"{src}: ", _TOP_KEYS + ("task_model",), _TOP_KEYS)
    if not isinstance(data["description"], str):
        raise ConfigError(f"{src}: description is {data['description']!r}, expected a string")
    k = data["max_task_constraints"]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= NUM_CONSTRAINTS:
        raise ConfigError(
            f"{src}: max_task_constraints is {k!r}, expected an integer in 1..{NUM_CONSTRAINTS}"
        )
    profiles = _validate_profiles(data["profiles"], src)
    rows = data["constraints"]
    if not isinstance(rows, list):
        raise ConfigError(
            f"{src}: constraints is {type(rows).__name__}, expected a list of {NUM_CONSTRAINTS} objects"
        )
    if len(rows) != NUM_CONSTRAINTS:
        raise ConfigError(
            f"{src}: constraints has {len(rows)} entries, expected {NUM_CONSTRAINTS} (ids 0-20)"
        )
    checked = [_validate_row(row, i, profiles, src) for i, row in enumerate(rows)]
    return ConstraintTable(
        description=data["description"],
        max_task_constraints=k,
        profiles=profiles,
        labels=tuple(c[0] for c in checked),
        task_probability=tuple(c[1] for c in checked),
        machine_fraction=tuple(tuple(c[2][p] for c in checked) for p in range(len(profiles))),
        source=src,
        task_model=_validate_model(data["task_model"], src) if "task_model" in data else None,
    )


def _validate_model(model, src: str) -> TaskModel:
    """``task_model``: ``types`` (>= 1), ``cluster_weights`` (per cluster, one weight >= 0 per type, every
    type with some weight) and ``cluster_percent`` (per cluster, 21 percentages in [0, 100])."""
    where = f"{src}: task_model: "
    if not isinstance(model, dict):
        raise ConfigError(f"{where}is {model!r}, expected an object with {', '.join(_MODEL_KEYS)}")
    _check_keys(model, where, _MODEL_KEYS, _MODEL_KEYS)
    types = model["types"]
    if isinstance(types, bool) or not isinstance(types, int) or types < 1:
        raise ConfigError(f"{where}types is {types!r}, expected a whole number >= 1")
    weights, percent = model["cluster_weights"], model["cluster_percent"]
    if not isinstance(weights, list) or not isinstance(percent, list) or len(weights) != len(percent) or not weights:
        raise ConfigError(f"{where}cluster_weights and cluster_percent must be lists with one entry per cluster")
    for k, (w, p) in enumerate(zip(weights, percent)):
        if not isinstance(w, list) or len(w) != types or not all(_is_number(x) and x >= 0 for x in w):
            raise ConfigError(f"{where}cluster_weights[{k}] is {w!r}, expected {types} numbers >= 0")
        if not isinstance(p, list) or len(p) != NUM_CONSTRAINTS or not all(_is_number(x) and 0 <= x <= 100 for x in p):
            raise ConfigError(f"{where}cluster_percent[{k}] is {p!r}, expected {NUM_CONSTRAINTS} percentages")
    for t in range(types):
        if not sum(w[t] for w in weights) > 0:
            raise ConfigError(f"{where}type {t + 1} has no cluster with a weight above 0")
    return TaskModel(types, tuple(tuple(float(x) for x in w) for w in weights),
                     tuple(tuple(float(x) for x in p) for p in percent))


# -------------------------------------------------------------------------------------------- machines


def _need(value, name: str, kind: type, what: str) -> None:
    """Reject an argument of the wrong type with a ConfigError naming it."""
    if not isinstance(value, kind):
        raise ConfigError(f"{name} is {type(value).__name__}, expected {what}")


def _cluster_profiles(profiles, clusters: int, table: ConstraintTable) -> tuple[str, ...]:
    """The profile of each cluster: given one per cluster, or the table's profiles cycled in order."""
    if profiles is None:
        return tuple(table.profiles[i % len(table.profiles)] for i in range(clusters))
    if isinstance(profiles, str) or not isinstance(profiles, Sequence):
        raise ConfigError(f"profiles is {profiles!r}, expected a sequence of {clusters} profile names")
    if len(profiles) != clusters:
        raise ConfigError(f"profiles has {len(profiles)} entries, expected one per cluster ({clusters})")
    for name in profiles:
        if name not in table.profiles:
            raise unknown_name("profile", name, table.profiles)
    return tuple(profiles)


def _capacity(capacity, resources) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """Validate the per-worker capacity vector and the resource names that label it."""
    if isinstance(capacity, Sequence) and not isinstance(capacity, str):
        capacity = tuple(capacity)
    ok = isinstance(capacity, tuple) and capacity and all(
        isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in capacity
    )
    if not ok:
        raise ConfigError(f"capacity is {capacity!r}, expected a non-empty tuple of integers >= 1")
    if resources is None:
        if len(capacity) != 1:
            raise ConfigError(
                f"capacity {capacity!r} has {len(capacity)} entries; pass resources=(...) naming each"
            )
        return capacity, ("slots",)
    resources = tuple(resources) if not isinstance(resources, str) else (resources,)
    if len(resources) != len(capacity) or not all(isinstance(r, str) and r for r in resources):
        raise ConfigError(
            f"resources is {resources!r}, expected {len(capacity)} non-empty names, one per capacity entry"
        )
    return capacity, resources


def build_cluster(
    *,
    clusters: int,
    workers_per_cluster: int,
    table: ConstraintTable,
    stream: Stream,
    profiles: Sequence[str] | None = None,
    capacity: tuple[int, ...] = (1,),
    resources: Sequence[str] | None = None,
) -> Cluster:
    """A federation of ``clusters`` equal clusters whose machines draw constraints from their profile.

    Profiles cycle through ``table.profiles`` unless given per cluster (cycling keeps small federations
    balanced). Each machine gets each constraint independently with its profile's fraction; cluster i
    draws from ``stream.child(f"cluster-{i}")``. Worker ids are global and consecutive from 0.
    """
    positive_int(clusters, "clusters")
    positive_int(workers_per_cluster, "workers_per_cluster")
    _need(table, "table", ConstraintTable, "a ConstraintTable")
    _need(stream, "stream", Stream, "a fabric.rand.Stream")
    names = _cluster_profiles(profiles, clusters, table)
    capacity, resources = _capacity(capacity, resources)
    specs = []
    for index, profile in enumerate(names):
        fractions = table.fractions(profile)
        always = [c for c, f in enumerate(fractions) if f >= 1.0]
        maybe = [(c, f) for c, f in enumerate(fractions) if 0.0 < f < 1.0]
        draws = stream.child(f"cluster-{index}")
        # Worker j's draws are numbers j * len(maybe) ... of the stream, one per maybe-constraint in order:
        # drawn at once (``randoms``), the same numbers as a draw a constraint.
        draws = draws.randoms(workers_per_cluster * len(maybe)).reshape(workers_per_cluster, len(maybe))
        got = (draws < np.array([f for _, f in maybe], dtype=np.float64)).tolist()
        ids = [c for c, _ in maybe]
        workers = []
        for j, row in enumerate(got):
            provided = [c for c, g in zip(ids, row) if g]
            if always:
                provided = sorted(always + provided)
            workers.append(
                WorkerSpec(
                    worker_id=index * workers_per_cluster + j,
                    cluster=index,
                    capacity=capacity,
                    constraints=tuple(provided),
                )
            )
        specs.append(ClusterSpec(index=index, profile=profile, workers=tuple(workers)))
    return Cluster(clusters=tuple(specs), resources=resources)


# ----------------------------------------------------------------------------------------------- tasks


def assign_task_constraints(jobs: Iterable[Job], table: ConstraintTable, stream: Stream) -> Iterator[Job]:
    """Stream ``jobs`` back with per-task constraints drawn from ``table`` (replacing any they had).

    Each task requests each id independently with its task_probability; a task that draws more than
    max_task_constraints keeps a random subset of that size. A table with a ``task_model`` draws each
    task's type, cluster and constraints instead (``_assign_model``). Tuples are sorted.
    """
    _need(table, "table", ConstraintTable, "a ConstraintTable")
    _need(stream, "stream", Stream, "a fabric.rand.Stream")
    if table.task_model is not None:
        return _assign_model(jobs, table.task_model, stream)
    return _assign(jobs, table, stream)


def _assign_model(jobs: Iterable[Job], model: TaskModel, stream: Stream) -> Iterator[Job]:
    """The task model's draw, a job at a time with numpy: a PCG64 bit generator seeded from ``stream`` gives
    raw 64-bit words (whose sequence numpy keeps stable across versions), turned into uniforms here.
    A task's type is the top two bits' worth (``types`` equal parts), its cluster the first whose
    cumulative weight exceeds a uniform, each constraint a uniform below its percentage / 100."""

    bits = np.random.PCG64(stream.bits64())
    per_type = np.array(model.weights, dtype=float).T  # [type][cluster]
    cum = np.cumsum(per_type / per_type.sum(axis=1, keepdims=True), axis=1)
    cum[:, -1] = 1.0
    prob = np.array(model.percent, dtype=float) / 100.0  # [cluster][constraint]
    powers = np.left_shift(np.uint64(1), np.arange(NUM_CONSTRAINTS, dtype=np.uint64))
    names: dict[int, tuple[int, ...]] = {0: ()}

    def uniforms(n: int) -> np.ndarray:
        return (bits.random_raw(n) >> np.uint64(11)).astype(np.float64) / float(1 << 53)

    for job in jobs:
        if not isinstance(job, Job):
            raise ConfigError(f"assign_task_constraints got a {type(job).__name__}, expected a model.Job")
        n = job.num_tasks
        kinds = np.minimum((uniforms(n) * model.types).astype(np.int64), model.types - 1)
        u = uniforms(n)
        cluster = (u[:, None] >= cum[kinds]).sum(axis=1)
        asked = uniforms(n * NUM_CONSTRAINTS).reshape(n, NUM_CONSTRAINTS) < prob[cluster]
        masks = (asked.astype(np.uint64) * powers).sum(axis=1)
        per_task = []
        for m in masks.tolist():
            t = names.get(m)
            if t is None:
                if len(names) > 1 << 16:
                    names = {0: ()}
                t = names[m] = tuple(j for j in range(NUM_CONSTRAINTS) if m >> j & 1)
            per_task.append(t)
        yield attrs.evolve(job, constraints=tuple(per_task))


GAP_BATCH = 256  # uniforms drawn at once for the gaps


def _uniforms(stream: Stream) -> Iterator[float]:
    """``stream.random()``'s values in order, drawn ``GAP_BATCH`` at a time (``Stream.randoms``, the same numbers)."""
    while True:
        yield from stream.randoms(GAP_BATCH).tolist()


def _gap(uniforms: Iterator[float], log_q: float) -> int:
    """How many tasks to skip before the next that requests a constraint: geometric, P(skip >= k) = q**k."""
    if log_q == -math.inf:
        return 0
    return int(math.log(1.0 - next(uniforms)) / log_q)


def _assign(jobs: Iterable[Job], table: ConstraintTable, stream: Stream) -> Iterator[Job]:
    """Geometric skipping per constraint id over the global task sequence: ~0.7 draws per task.

    Exactly the distribution of independent per-task coin flips, but only requests cost any work.
    """
    cap = stream.child("cap")
    uniforms = _uniforms(stream)  # (the stream is the assignment's own: what it draws ahead is never used)
    k = table.max_task_constraints
    log_q = [math.log1p(-p) if p < 1.0 else -math.inf for p in table.task_probability]
    heap = [(_gap(uniforms, log_q[c]), c) for c, p in enumerate(table.task_probability) if p > 0.0]
    heapq.heapify(heap)
    first = 0  # global index of the current job's first task
    for job in jobs:
        if not isinstance(job, Job):
            raise ConfigError(
                f"assign_task_constraints got a {type(job).__name__}, expected a model.Job"
            )
        n = job.num_tasks
        end = first + n
        per_task = [()] * n
        while heap and heap[0][0] < end:
            t = heap[0][0]
            chosen = []
            while heap and heap[0][0] == t:
                c = heap[0][1]
                chosen.append(c)
                heapq.heapreplace(heap, (t + 1 + _gap(uniforms, log_q[c]), c))
            if len(chosen) > k:
                chosen = sorted(cap.sample(chosen, k))
            per_task[t - first] = tuple(chosen)
        yield attrs.evolve(job, constraints=tuple(per_task))
        first = end


# ------------------------------------------------------------------------------------------ feasibility


class ConstraintIndex:
    """Answers which machines of a cluster satisfy a constraint tuple, with answers cached per tuple.

    Built once per cluster so a scheduler can flag unschedulable tasks at submission cheaply.
    """

    __slots__ = ("_ids", "_masks", "_cluster_masks", "_all", "_cache")

    def __init__(self, cluster: Cluster) -> None:
        _need(cluster, "cluster", Cluster, "a model.Cluster")
        workers = tuple(cluster.workers())
        self._ids = tuple(w.worker_id for w in workers)
        bits = [bytearray((len(workers) + 7) // 8) for _ in range(NUM_CONSTRAINTS)]
        for pos, w in enumerate(workers):
            for c in w.constraints:
                if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < NUM_CONSTRAINTS:
                    raise ConfigError(
                        f"worker {w.worker_id} provides constraint {c!r}, expected an id in 0..20"
                    )
                bits[c][pos >> 3] |= 1 << (pos & 7)
        self._masks = tuple(int.from_bytes(b, "little") for b in bits)
        self._all = (1 << len(workers)) - 1
        self._cluster_masks = []
        start = 0
        for spec in cluster.clusters:
            size = len(spec.workers)
            self._cluster_masks.append((spec.index, ((1 << size) - 1) << start))
            start += size
        self._cache: dict[tuple[int, ...], tuple[int, tuple[int, ...]]] = {}

    def _lookup(self, constraints) -> tuple[int, tuple[int, ...]]:
        """(mask of satisfying workers, indices of clusters holding any), computed once per tuple."""
        key = tuple(constraints)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        mask = self._all
        for c in key:
            if isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < NUM_CONSTRAINTS:
                raise ConfigError(f"constraint id {c!r} is not in 0..20")
            mask &= self._masks[c]
        clusters = tuple(index for index, cmask in self._cluster_masks if mask & cmask)
        self._cache[key] = hit = (mask, clusters)
        return hit

    def feasible(self, constraints: Iterable[int]) -> bool:
        """Whether at least one machine provides every id in ``constraints``."""
        return self._lookup(constraints)[0] != 0

    def count(self, constraints: Iterable[int]) -> int:
        """How many machines provide every id in ``constraints``."""
        return self._lookup(constraints)[0].bit_count()

    def clusters(self, constraints: Iterable[int]) -> tuple[int, ...]:
        """Indices of the clusters that hold at least one machine providing every id in ``constraints``."""
        return self._lookup(constraints)[1]

    def workers(self, constraints: Iterable[int]) -> tuple[int, ...]:
        """Ids of the machines providing every id in ``constraints``, in cluster order."""
        mask = self._lookup(constraints)[0]
        out = []
        while mask:
            low = mask & -mask
            out.append(self._ids[low.bit_length() - 1])
            mask ^= low
        return tuple(out)

    def unschedulable(self, job: Job) -> tuple[int, ...]:
        """Indices of ``job``'s tasks that no machine can run."""
        return tuple(i for i, c in enumerate(job.constraints) if not self.feasible(c))
