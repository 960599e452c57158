"""The model: plain types every layer may import (fabric <- model <- policies <- actors <- ...).

- Units: virtual time is integer microseconds (``US_PER_S``, ``seconds_to_us``).
- Jobs and tasks as every workload produces them and every scheduler consumes them: a job's tasks
  share its arrival; each has a duration and a sorted tuple of constraint ids (0-20) it needs.
- The cluster, described once: workers grouped into clusters (a Megha LM's cluster = a Pigeon
  group). Every scheduler maps these same machines onto its own shape, so comparisons are fair.
- What a run measures (``Recorder``): per-job records, the tasks' records in columns (``TaskTable``), and
  named counters. Actors report protocol events through its methods (never by touching its records);
  ``tools.results.metrics`` turns it into percentiles, CSVs and plots. -1 means "not yet".
- Declared parameters (``Param``, and parameter classes of ``param`` fields): what scenarios, workloads
  and scheduler plug-ins accept from ``--set``.
"""

from __future__ import annotations

import functools
import typing
from array import array
from bisect import insort
from typing import Any, Callable

import attrs

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.messages import lean, message

NUM_CONSTRAINTS = 21  # constraint ids 0..20 (the 2023 Megha paper's 21 machine attributes)

# ---- units ----------------------------------------------------------------------------
US_PER_S = 1_000_000


def seconds_to_us(seconds: float) -> int:
    """Round seconds to integer microseconds."""
    return int(round(seconds * US_PER_S))


# ---- parameters ---------------------------------------------------------------------------
@attrs.frozen
class Param:
    """One ``--set`` key a scenario or scheduler declares: default, meaning and what a valid value is.

    ``--set`` reads a value as its ``kind`` (bool, whole number, number or text; the default's type
    when not declared); ``ok(value)`` then says whether it is valid, and ``expected`` words the rule
    for the one-line error naming key and value. Parameter classes (``param`` fields) declare them."""

    name: str
    default: Any
    help: str
    ok: Callable[[Any], bool] | None = None
    expected: str = ""
    choices: tuple = ()  # a choice key's values (``one_of``): what a fault search draws its variants from
    kind: type | None = None  # the declared type; None: the default's

    @property
    def type(self) -> type:
        return self.kind if self.kind is not None else type(self.default)

    def check(self, value) -> None:
        """Raise a ConfigError naming the key and value unless ``value`` is valid."""
        if self.ok is not None and not self.ok(value):
            raise ConfigError(f"parameter {self.name!r} is {value!r}; expected {self.expected}")


def whole_at_least(minimum: int) -> dict:
    """``ok``/``expected`` of a whole-number Param with a lower bound."""
    return {"ok": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= minimum,
            "expected": f"a whole number >= {minimum}"}


def probability() -> dict:
    """``ok``/``expected`` of a probability Param: a number in [0, 1]."""
    return {"ok": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1,
            "expected": "a probability from 0 to 1"}


def positive_int(value, name: str) -> int:
    """``value`` if it is a whole number >= 1, else a ConfigError naming ``name`` (for builders' arguments)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} is {value!r}, expected an integer >= 1")
    return value


def seconds_between(low: float, high: float) -> dict:
    """``ok``/``expected`` of a period or timeout in seconds, from ``low`` to ``high`` inclusive."""
    return {"ok": lambda v: not isinstance(v, bool) and isinstance(v, (int, float)) and low <= v <= high,
            "expected": f"seconds from {low:g} to {high:g}"}


def one_of(names) -> dict:
    """``ok``/``expected`` of a Param that takes one of ``names`` (text)."""
    return {"ok": lambda v: v in names, "expected": " or ".join(names), "choices": tuple(names)}


def finite_at_least(minimum: float, strict: bool = False) -> dict:
    """``ok``/``expected`` of a finite-number Param with a lower bound (``strict``: above it)."""
    def ok(v) -> bool:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (float("inf"), -float("inf")):
            return False
        return v > minimum if strict else v >= minimum
    return {"ok": ok, "expected": f"a finite number {'>' if strict else '>='} {minimum:g}"}


# A parameter class is a frozen attrs class whose fields are ``param``s: the keys of one scheduler, one
# workload or one part of the run, with their types, defaults, rules and meanings. ``--set`` text is
# read once, at the edge (``tools.run.params``); what builds a run gets the class's instance (``typed``).
_DECLARED = "fedemu.param"  # the metadata key of a ``param`` field: (help, rule)


def param(default, help: str, rule: dict | None = None) -> Any:
    """One ``--set`` key of a parameter class (an attrs field): its default, meaning and rule (``ok``,
    ``expected``, ``choices``: ``whole_at_least(1)``, ``one_of(...)``, ...), checked whenever the class is
    built, in one line naming the key and the value."""
    return attrs.field(default=default, validator=_check_field, metadata={_DECLARED: (help, dict(rule or {}))})


def _declared(f: attrs.Attribute, kind=None) -> Param:
    help_text, rule = f.metadata[_DECLARED]
    return Param(f.name, f.default, help_text, kind=kind, **rule)


def _check_field(instance, attribute, value) -> None:
    _declared(attribute).check(value)


@functools.cache
def declared(cls) -> tuple[Param, ...]:
    """The ``Param`` of every field of parameter class ``cls``, in order, of its annotated type."""
    hints = typing.get_type_hints(cls)
    return tuple(_declared(f, hints[f.name]) for f in attrs.fields(cls))


def typed(cls, params: dict):
    """The instance of parameter class ``cls`` that ``params`` (a run's resolved keys) holds; a whole
    number given for a number key is that number as a float (``params`` keeps what was given: the
    journal's header holds it)."""
    return cls(**{p.name: _as_kind(p.type, params[p.name]) for p in declared(cls) if p.name in params})


def _as_kind(kind: type, value):
    return float(value) if kind is float and isinstance(value, int) and not isinstance(value, bool) else value


# ---- jobs -------------------------------------------------------------------------------
@lean(last=3)  # alpha, user, gang are journaled only when set: runs without them keep their bytes (digests)
@message("job")  # the submitter sends jobs to the front ends
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
    alpha: float = 0.0  # the parallel fraction of its tasks (TEBAS's Amdahl model, see ``run_time_us``)
    user: int = -1  # the user whose queue its tasks go to (Megha's fairness: Megha 2022, IV-C); -1: no users
    gang: bool = False  # all-or-nothing: every task is placed and starts, or none holds resources (Megha's gang)

    @constraints.default
    def _no_constraints(self):
        return ((),) * len(self.durations_us)

    @property
    def num_tasks(self) -> int:
        return len(self.durations_us)

    @property
    def ideal_jrt_us(self) -> int:
        """The job's ideal response time: its longest task (Megha 2023, Eq. 1)."""
        return max(self.durations_us)

    @property
    def mean_task_us(self) -> float:
        return sum(self.durations_us) / len(self.durations_us)


# ---- machines and clusters ---------------------------------------------------------------
@attrs.frozen(slots=True)
class WorkerSpec:
    """One machine: global id, owning cluster, capacity vector, constraint ids it provides, and its speed
    factor k_n (TEBAS: the parallel part of a task runs k_n times faster)."""

    worker_id: int
    cluster: int
    capacity: tuple[int, ...] = (1,)
    constraints: tuple[int, ...] = ()
    speed: float = 1.0


def speedup_factor(alpha: float, speed: float) -> float:
    """(1 - alpha) + alpha / k_n: the share of its nominal duration a task takes on a machine of speed k_n."""
    return (1.0 - alpha) + alpha / speed


def run_time_us(duration_us: int, alpha: float, speed: float) -> int:
    """A task's run time on a machine of speed k_n by TEBAS's Amdahl model (the Fitness metric):
    ``duration * ((1 - alpha) + alpha / k_n)``, rounded half to even to whole microseconds. With
    alpha = 0 or k_n = 1 it is exactly ``duration_us`` (no float arithmetic on that path)."""
    if alpha == 0 or speed == 1:
        return duration_us
    return int(round(duration_us * speedup_factor(alpha, speed)))


@attrs.frozen(slots=True)
class ClusterSpec:
    """One cluster (one LM in Megha, one group/master in Pigeon) and its constraint profile."""

    index: int
    profile: str
    workers: tuple[WorkerSpec, ...]


@attrs.frozen(slots=True)
class Cluster:
    """All clusters; ``resources`` names the entries of every capacity vector."""

    clusters: tuple[ClusterSpec, ...]
    resources: tuple[str, ...] = ("slots",)

    @property
    def num_workers(self) -> int:
        return sum(len(c.workers) for c in self.clusters)

    def workers(self):
        """Every worker, cluster by cluster, in id order."""
        for c in self.clusters:
            yield from c.workers


# ---- what a run records --------------------------------------------------------------------
# A task's record, field by field. Allocation time (start - arrival) splits as in the 2022 Megha paper (Megha
# 2022, III), each part summed from intervals between real events of the task, never derived from the
# total: ``comm_us``, on the wire (from the event that sent it on to the arrival of the message carrying it);
# ``queue_us``, framework queueing (from that arrival until the handler that passed it on started: a busy
# component's mailbox, a scheduler's task queue); ``processing_us``, that handler's service time (0 without a
# cost model); ``worker_queue_us``, from its arrival at the worker to its start. ``mark_us`` is the task's
# last such event, so the parts add up to the allocation time. start, end and worker are -1 until they happen.
TASK_FIELDS = ("job_id", "index", "arrival_us", "duration_us", "start_us", "end_us", "worker", "queue_us",
               "attempts", "processing_us", "worker_queue_us", "comm_us", "mark_us")
_SMALL = frozenset({"index", "worker", "attempts"})  # 32-bit columns: counts and ids, never times
_UNSET = {code: array(code, (-1,)).tobytes() for code in "iq"}  # one -1 of each column type


class TaskTable:
    """Every task's record, one row a task in arrival order, one typed array a field (``TASK_FIELDS``):
    8 bytes a time where an object per task took about 360 (a run of 400,000 tasks keeps 40 MB, not 140).
    Read it as a mapping (job id, index) -> ``TaskRecord``, a view of the row; ``columns`` gives numpy arrays.
    The recorder's hot paths index the arrays by ``row``."""

    def __init__(self):
        self._rows: dict[int, tuple[int, int]] = {}  # job id -> (first row, number of tasks)
        for name in TASK_FIELDS:
            setattr(self, name, array("i" if name in _SMALL else "q"))

    def add_job(self, job_id: int, arrival_us: int, durations_us) -> None:
        """The job's tasks, at its arrival: nothing started, nothing timed. A job added again starts over
        in its own rows (as a dict's entries would be replaced in place)."""
        n = len(durations_us)
        if job_id in self._rows:
            first, size = self._rows[job_id]
            if size != n:
                raise ValueError(f"job {job_id} added again with {n} tasks, not {size}")
            for k, d in enumerate(durations_us):
                for name, value in zip(TASK_FIELDS, (job_id, k, arrival_us, d, -1, -1, -1, 0, 0, 0, 0, 0, arrival_us)):
                    getattr(self, name)[first + k] = value
            return
        first = len(self.job_id)
        try:
            self.index.extend(range(n))
            self.duration_us.extend(durations_us)
            for col, value in ((self.job_id, job_id), (self.arrival_us, arrival_us), (self.mark_us, arrival_us)):
                col.frombytes(array("q", (value,)).tobytes() * n)  # a value repeated: bytes, no int per row
            for col in (self.start_us, self.end_us, self.worker):
                col.frombytes(_UNSET[col.typecode] * n)
            for col in (self.queue_us, self.attempts, self.processing_us, self.worker_queue_us, self.comm_us):
                col.frombytes(bytes(col.itemsize * n))
        except BaseException:  # (a value out of range, or a view of a column alive): the rows added so far go
            for name in TASK_FIELDS:
                if len(col := getattr(self, name)) > first:  # (one not grown may be a view's: leave it be)
                    del col[first:]
            raise
        self._rows[job_id] = (first, n)

    def span(self, job_id: int) -> tuple[int, int]:
        """(first row, number of tasks) of the job; (0, 0) for a job never added."""
        return self._rows.get(job_id, (0, 0))

    def spans(self):
        """(job id, (first row, number of tasks)) of every job, in row order (jobs' rows are contiguous)."""
        return self._rows.items()

    def find(self, job_id: int, index: int) -> int:
        """The task's row, or -1 for a task never added."""
        first, n = self._rows.get(job_id, (0, 0))
        return first + index if 0 <= index < n else -1

    def row(self, job_id: int, index: int) -> int:
        """The task's row; KeyError for a task never added."""
        first, n = self._rows.get(job_id, (0, 0))
        if 0 <= index < n:
            return first + index
        raise KeyError((job_id, index))

    def columns(self, fields=TASK_FIELDS, copy: bool = True) -> dict:
        """Int64 numpy arrays of ``fields``, a row a task in arrival order: copies, or with ``copy=False``
        read-only views of the 64-bit columns (no memory of their own; while one lives, the table cannot
        grow: for a finished run's results only)."""
        import numpy as np  # (the model layer itself needs no numpy)

        out = {}
        for name in fields:
            col = getattr(self, name)
            if copy or col.typecode != "q":
                out[name] = np.array(col, dtype=np.int64)
            else:
                out[name] = view = np.frombuffer(col, dtype=np.int64)
                view.flags.writeable = False
        return out

    # the mapping (job id, index) -> TaskRecord
    def __getitem__(self, key) -> TaskRecord:
        return TaskRecord(self, self.row(*key))

    def get(self, key, default=None):
        r = self.find(*key)
        return default if r < 0 else TaskRecord(self, r)

    def __contains__(self, key) -> bool:
        return self.find(*key) >= 0

    def __len__(self) -> int:
        return len(self.job_id)

    def __iter__(self):
        return zip(self.job_id, self.index)

    def keys(self):
        return iter(self)

    def values(self):
        return (TaskRecord(self, r) for r in range(len(self.job_id)))

    def items(self):
        return (((j, i), TaskRecord(self, r)) for r, (j, i) in enumerate(zip(self.job_id, self.index)))


class TaskRecord:
    """One task's record: a view of its row in a ``TaskTable``, each field (``TASK_FIELDS``) read and
    written in place."""

    __slots__ = ("_table", "_row")

    def __init__(self, table: TaskTable, row: int):
        self._table = table
        self._row = row

    @property
    def allocation_us(self) -> int:
        return self.start_us - self.arrival_us

    def __eq__(self, other) -> bool:
        return isinstance(other, TaskRecord) and self._values() == other._values()

    __hash__ = None

    def _values(self) -> tuple:
        return tuple(getattr(self._table, name)[self._row] for name in TASK_FIELDS)

    def __repr__(self) -> str:
        return "TaskRecord(" + ", ".join(f"{n}={v}" for n, v in zip(TASK_FIELDS, self._values())) + ")"


def _field(name: str) -> property:
    def get(self):
        return getattr(self._table, name)[self._row]

    def put(self, value):
        getattr(self._table, name)[self._row] = value

    return property(get, put, doc=f"the task's ``{name}``")


for _name in TASK_FIELDS:
    setattr(TaskRecord, _name, _field(_name))
del _name


@attrs.define(slots=True)
class JobRecord:
    """One job: arrival, ideal JRT (its longest task), completion, and whether it counts as short.
    ``demand`` and ``constraints`` are the job's own tuples, kept for the end-of-run invariants."""

    job_id: int
    arrival_us: int
    num_tasks: int
    ideal_jrt_us: int
    mean_task_us: float
    short: bool = True
    done: int = 0
    completion_us: int = -1
    demand: tuple = (1,)
    constraints: tuple = ()
    alpha: float = 0.0
    user: int = -1
    gang: bool = False
    committed_us: int = -1  # a gang: when all its tasks were first held at once (the commit)

    @property
    def jrt_us(self) -> int:
        return self.completion_us - self.arrival_us

    @property
    def delay_us(self) -> int:
        """Delay in job response time: actual JRT - ideal JRT (Megha 2023, Eq. 1)."""
        return self.jrt_us - self.ideal_jrt_us


@attrs.define
class Recorder:
    """Everything a run measures: a record per job, the tasks' records in columns (``TaskTable``), counters.
    ``busy`` logs each start and end as a pair (time, +/-units) of 64-bit ints, flat in one array (16 bytes
    an event, where a list of tuples took about 97), so utilization can be rebuilt."""

    total_units: int = 0
    machines: dict = attrs.Factory(dict)  # worker id -> capacity vector, for per-machine balance metrics
    jobs: dict = attrs.Factory(dict)
    tasks: TaskTable = attrs.Factory(TaskTable)
    counters: dict = attrs.Factory(dict)
    busy: array = attrs.Factory(lambda: array("q"))
    unschedulable: list = attrs.Factory(list)
    dropped: list = attrs.Factory(list)  # (job id, indices in the job as read) of tasks no machine can run, dropped
    closed: int = 0
    expected: int | None = None
    # executions besides each task's own record: [job, index, worker, start, end (-1: running), units];
    # aborted ones (a worker crash) and concurrent duplicates, so the capacity check sees them all
    other_runs: list = attrs.Factory(list)
    aborted: int = 0  # executions ended by a worker crash
    wasted_us: int = 0  # unit-microseconds of work those executions lost
    recoveries_us: list = attrs.Factory(list)  # per failover: detection plus takeover time
    # Megha's fairness (Megha 2022, IV-C): per preemption (time, worker, requester user, victim user, task launched,
    # victims, time the LM verified the request), the preempted executions as (job, index, worker, start, stop, units), and per task the
    # times its owner GM queued it again after hearing it was preempted
    preemptions: list = attrs.Factory(list)
    preempted: list = attrs.Factory(list)
    requeued: dict = attrs.Factory(dict)
    per_user: dict = attrs.Factory(dict)  # (counter name, user) -> count
    # a cost model is on: the rows of the tasks the handler being served passed on, whose processing ends with its
    # service (``served``, called by the fabric after each handler of a single-server actor)
    timed: bool = False
    serving: list = attrs.Factory(list)

    def alpha_of(self, job_id: int) -> float:
        """The job's parallel fraction, as submitted (workers use it for a task's run time)."""
        return self.jobs[job_id].alpha

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def job_arrived(self, job, short: bool = True) -> None:
        self.jobs[job.job_id] = JobRecord(job.job_id, job.arrival_us, job.num_tasks, job.ideal_jrt_us,
                                          job.mean_task_us, short, demand=job.demand, constraints=job.constraints,
                                          alpha=job.alpha, user=job.user, gang=job.gang)
        self.tasks.add_job(job.job_id, job.arrival_us, job.durations_us)

    def task_handled(self, job_id: int, index: int, arrived_us: int, start_us: int) -> None:
        """The message carrying the task reached a scheduler component at ``arrived_us`` (or the task
        was queued there again then), and the handler passing it on started at ``start_us``: the time
        since its last event was communication, the wait framework queueing, and that handler's service
        (``served``) is processing. Ignored once the task runs (a duplicate launch), and for a task
        never submitted (a test driving one component alone)."""
        t = self.tasks
        r = t.find(job_id, index)
        if r >= 0 and t.start_us[r] == -1:
            mark = t.mark_us
            t.comm_us[r] += arrived_us - mark[r]
            t.queue_us[r] += start_us - arrived_us
            mark[r] = start_us
            if self.timed:
                self.serving.append(r)

    def tasks_handled(self, job_id: int, num_tasks: int, arrived_us: int, start_us: int) -> None:
        """``task_handled`` for each of the job's tasks 0 .. ``num_tasks`` - 1 (a front end passing a whole
        job on), written out here: it runs once per task of every job."""
        t, timed = self.tasks, self.timed
        first, n = t.span(job_id)
        started, mark, comm, queue = t.start_us, t.mark_us, t.comm_us, t.queue_us
        wait = start_us - arrived_us
        for r in range(first, first + min(num_tasks, n)):
            if started[r] == -1:
                comm[r] += arrived_us - mark[r]
                queue[r] += wait
                mark[r] = start_us
                if timed:
                    self.serving.append(r)

    def task_dispatched(self, job_id: int, index: int, since_us: int, start_us: int) -> None:
        """A scheduler took the task off its queue (where it was put at ``since_us``) in a handler that
        started at ``start_us`` and sent it towards a worker: one attempt (a failed launch, a retry or a
        relaunch queues it again), timed as in ``task_handled`` (written out: it runs once per task)."""
        t = self.tasks
        r = t.row(job_id, index)
        if t.start_us[r] == -1:
            mark = t.mark_us
            t.comm_us[r] += since_us - mark[r]
            t.queue_us[r] += start_us - since_us
            mark[r] = start_us
            if self.timed:
                self.serving.append(r)
        t.attempts[r] += 1

    def served(self, actor, arrived_us: int, start_us: int, end_us: int) -> None:
        """A single-server actor ended a handler's service at ``end_us``: the tasks it passed on were in
        processing until then (their sends leave at the end of the service). Called with ``end_us`` -1
        as the service starts: tasks passed on since by an actor that takes no time are let go (their
        processing was 0)."""
        if end_us < 0:
            self.serving.clear()
            return
        t = self.tasks
        processing, mark = t.processing_us, t.mark_us
        for r in self.serving:
            processing[r] += end_us - mark[r]
            mark[r] = end_us
        self.serving.clear()

    def task_started(self, job_id: int, index: int, now: int, worker: int, units: int = 1,
                     arrived_us: int | None = None) -> None:
        """An execution of the task began on ``worker`` (its launch arrived there at ``arrived_us``, by
        default now). The first live one is the task's own record; another while it runs (a retried
        launch that crossed a partition) is kept in ``other_runs``."""
        t = self.tasks
        r = t.row(job_id, index)
        self.busy.extend((now, units))
        if t.start_us[r] == -1:
            arrived = now if arrived_us is None else arrived_us
            t.comm_us[r] += arrived - t.mark_us[r]
            t.worker_queue_us[r] += now - arrived
            t.mark_us[r] = t.start_us[r] = now
            t.worker[r] = worker
            return
        self.other_runs.append([job_id, index, worker, now, -1, units])
        self.count("duplicate_executions")

    def task_aborted(self, job_id: int, index: int, worker: int, now: int, units: int = 1) -> None:
        """A crash of ``worker`` ended the task's execution there: its work so far is wasted and the
        task may start again (an execution may repeat; a completion may not)."""
        rec = self.tasks[(job_id, index)]
        self.busy.extend((now, -units))
        if rec.worker == worker and rec.start_us != -1 and rec.end_us == -1:
            start = rec.start_us
            self.other_runs.append([job_id, index, worker, start, now, units])
            rec.start_us = rec.worker = -1
            for i, run in enumerate(self.other_runs):  # another execution still live becomes the task's own
                if run[0] == job_id and run[1] == index and run[4] == -1:
                    rec.start_us, rec.worker = run[3], run[2]
                    del self.other_runs[i]
                    break
        else:
            run = self._live_run(job_id, index, worker)
            start = run[3]
            run[4] = now
        self.aborted += 1
        self.wasted_us += (now - start) * units

    def task_preempted(self, job_id: int, index: int, worker: int, now: int, units: int = 1) -> None:
        """A preemption stopped the task's execution on ``worker``: as a crash's abort (its work is
        wasted, it may start again), and kept in ``preempted``."""
        rec = self.tasks[(job_id, index)]
        start = rec.start_us if rec.worker == worker and rec.end_us == -1 else self._live_run(job_id, index, worker)[3]
        self.task_aborted(job_id, index, worker, now, units)
        self.preempted.append((job_id, index, worker, start, now, units))

    def count_user(self, name: str, user: int, n: int = 1) -> None:
        """A per-user counter (preemption attempts of a user's tasks, its tasks preempted)."""
        self.per_user[(name, user)] = self.per_user.get((name, user), 0) + n

    def task_requeued(self, job_id: int, index: int) -> None:
        """The task's owner GM queued it again on hearing it was preempted."""
        key = (job_id, index)
        self.requeued[key] = self.requeued.get(key, 0) + 1

    def task_finished(self, job_id: int, index: int, now: int, units: int = 1, worker: int | None = None) -> None:
        """Record the end of the task's execution on ``worker`` (None: its only one)."""
        t = self.tasks
        r = t.row(job_id, index)
        self.busy.extend((now, -units))
        ended = t.end_us
        if worker is None or (t.worker[r] == worker and ended[r] == -1):
            if ended[r] != -1:
                raise AssertionError(f"task {job_id}.{index} finished twice")
            if t.start_us[r] == -1:
                raise AssertionError(f"task {job_id}.{index} finished without starting")
            ended[r] = now
            return
        self._live_run(job_id, index, worker)[4] = now

    def recovered(self, duration_us: int) -> None:
        """A failover completed ``duration_us`` after the failure it recovered from (detection plus takeover)."""
        self.recoveries_us.append(duration_us)

    def _live_run(self, job_id: int, index: int, worker: int) -> list:
        for run in self.other_runs:
            if run[0] == job_id and run[1] == index and run[2] == worker and run[4] == -1:
                return run
        raise AssertionError(f"task {job_id}.{index} has no execution running on worker {worker}")

    def gang_committed(self, job_id: int, now: int) -> None:
        """Every task of the gang is held at once (on every LM involved): its tasks may start from now.
        The first commit is the gang's; a later one (an adopting GM's) changes nothing."""
        job = self.jobs.get(job_id)
        if job is not None and job.committed_us < 0:
            job.committed_us = now

    def job_completed(self, job_id: int, now: int) -> None:
        """The scheduler learnt that the job's last task is done: its response time ends here."""
        job = self.jobs[job_id]
        if job.completion_us != -1:
            raise AssertionError(f"job {job_id} completed twice")
        job.done = job.num_tasks
        job.completion_us = now
        self.closed += 1

    def job_unschedulable(self, job_id: int, tasks: tuple[int, ...]) -> None:
        """A job with tasks no machine can run: rejected at submission, never queued. Kept sorted by
        job id, so the list does not depend on which front end's task trio ran first."""
        insort(self.unschedulable, (job_id, tasks))
        self.closed += 1

    def tasks_dropped(self, job, indices: tuple[int, ...]) -> None:
        """``infeasible=drop-task``: the job's tasks at ``indices`` (as read) can run nowhere and were dropped
        before submission; the job runs without them."""
        self.dropped.append((job.job_id, indices))
        self.count("tasks_dropped", len(indices))

    def submitted_all(self, count: int) -> None:
        self.expected = count

    @property
    def finished(self) -> bool:
        """Every submitted job has completed or been rejected."""
        return self.expected is not None and self.closed >= self.expected
