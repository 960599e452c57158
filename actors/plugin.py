"""The scheduler plug-in interface: what a scheduler declares, and what it builds its actors from.

A scheduler is one ``Scheduler`` value in the ``plugin`` module of its own package (``actors/megha/``,
``pigeon/``, ``sparrow/``), listed once in ``actors/registry.py``. It declares its ``--set`` keys (a parameter class),
the counters it keeps and its traits; ``build(ctx)`` adds its actors to ``ctx.fabric`` and returns the
names of the front ends that jobs are submitted to. Actors address each other by these names, resolved
to actor ids by the fabric when each actor starts, never by id arithmetic.

Everything scheduler-specific that the layers above need is declared here as plain data or a small
function of the run's parameters (its roles, events, search keys, size, how jobs reach its front ends,
which checks apply, its live-view panels), so that nothing below or beside ``actors/`` names a
scheduler (``tests/test_plugin_boundary.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable

import attrs

from fedemu.fabric.log import Event
from fedemu.fabric.rand import Stream
from fedemu.model import Cluster, Param, Recorder, declared, seconds_to_us, typed


@attrs.frozen
class Context:
    """Everything a scheduler builds its actors from: ``config``, its own keys (an instance of its
    parameter class); ``params``, every key of the run as resolved (the common ones: the cluster's
    shape, the short-job cutoff)."""

    fabric: Any
    cluster: Cluster
    params: dict
    recorder: Recorder
    feasible: Callable[[tuple, tuple], bool]  # can some machine ever run a task (constraints, demand)?
    policy: Any = None  # the worker-choice policy; None for a scheduler that takes none
    config: Any = None

    def stream(self, name: str) -> Stream:
        """A random stream of the run's seed for a build-time draw, named for what it draws."""
        return Stream(self.fabric.seed, name)

    def add(self, name: str, factory) -> str:
        """Add an actor built by ``factory()``; returns its name, which is how others address it."""
        self.fabric.add(name, factory)
        return name


@attrs.frozen
class Role:
    """A kind of actor that fault plans (``{role = "gm", count = 2}``) and the search can name: its
    actors are called ``<prefix>-<number>``. Managers are what ``manager_mtbf_s`` crashes."""

    name: str
    prefixes: tuple[str, ...]
    help: str = ""
    manager: bool = True


WORKER = Role("worker", ("w",), "a worker (every scheduler names its workers w-<worker id>)", manager=False)


@attrs.frozen
class Size:
    """What a run of a scheduler holds besides its workers and the submitter, for the size estimate
    made before anything is built (``scenarios.preflight``)."""

    actors: int  # its other actors: managers, front ends
    keys: tuple[str, ...] = ()  # the keys that decide ``actors`` (named when the run is too big)
    burst: float = 0.0  # messages one task sends at once when its job arrives (Sparrow's probes)
    burst_key: str = ""  # the key that decides ``burst``


@attrs.frozen
class Submission:
    """How the submitter hands jobs to the front ends (``actors.common.submitter``)."""

    # "round-robin"; "task-count": its number of tasks modulo the front ends; "by-length": a long job (mean task
    # above short_cutoff_s) to the last front end, a short one round robin to the others
    choice: str = "round-robin"
    resubmit_us: int = 0  # > 0: the front ends report JobDone, and the submitter pings them this often
    route: tuple | None = None  # per user: the index of the front end its jobs go to


@attrs.frozen
class Users:
    """A run's users (global fairness): each one's share of the datacenter and front end, how jobs get
    their user, and whether preemption (Megha 2022, IV-C, Algorithm 2) is on."""

    shares: Any  # policies.fair_share.Shares
    front_ends: tuple[int, ...]
    assign: str  # "round-robin", "weighted" (drawn by share) or "trace" (the trace's user=K column)
    preempts: bool


@attrs.frozen
class Column:
    """One column of a live-view table: ``header`` over what ``how`` makes of ``fields`` of an actor's
    statistics: "num" (a number), "delta" (growth since the last sample), "sum" (of the fields), "pair"
    (``a/b``), "max_ms" (the largest of a tuple of microseconds, as ms), "grid" (a partition grid:
    (home, free, total) per partition, ``<>`` when the second field grew). ``optional``: shown only when
    some actor's statistics have the field."""

    header: str
    fields: tuple[str, ...]
    how: str = "num"
    optional: bool = False


@attrs.frozen
class Table:
    """A live-view table: a row per actor of ``role`` (its name under ``header``, coloured by the
    value of ``colour_by`` when given), then ``columns``; shown when the run has actors of ``role``.
    ``caption`` describes the actors of ``caption_role``: ("", "distributors") counts them, ("open_jobs",
    "open jobs") sums a field of theirs."""

    title: str
    role: str
    header: str
    columns: tuple[Column, ...]
    colour_by: str = ""
    caption_role: str = ""
    caption: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Histogram:
    """A live-view histogram: how many actors of ``role`` have ``field`` in each of ``buckets`` ((low,
    high) each, high None: no limit), as a bar per bucket; shown when the run has actors of ``when``;
    ``caption`` as for ``Table``."""

    title: str
    role: str
    field: str
    header: str
    count_header: str
    buckets: tuple[tuple[int, int | None], ...]
    when: str
    caption_role: str = ""
    caption: tuple[tuple[str, str], ...] = ()


def deferred(module: str, name: str) -> Callable:
    """The function ``name`` of ``module``, imported when first called. The registry imports every plug-in for its
    declarations; a plug-in names its actor modules' functions (its checks) this way, and imports its actor
    classes inside its build, so that a run imports only its own scheduler's actors."""

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported at the first call."
    return call


def _nothing(params) -> None:
    return None


def _no_traits(params) -> dict:
    return {}


def _no_features(params) -> frozenset:
    return frozenset()


def _no_size(params) -> Size:
    return Size(0)


def _keeps_none(params, workers) -> tuple:
    return ()


def _submit(params) -> Submission:
    """Round robin; a scheduler that declares ``resubmit_s`` has front ends that report JobDone, and the
    submitter pings them that often (handing a job again to another when one stops answering)."""
    resubmit_s = params.get("resubmit_s")
    return Submission(resubmit_us=seconds_to_us(float(resubmit_s)) if resubmit_s is not None else 0)


@attrs.frozen
class Scheduler:
    """One scheduler behind the common interface."""

    name: str
    help: str  # one line: what it is
    build: Callable[[Context], list[str]]  # adds the actors; returns the front ends' names
    config: type | None = None  # its parameter class (``model.param`` fields): its own --set keys
    counters: tuple[tuple[str, str], ...] = ()  # (name, meaning) of each recorder counter it keeps
    takes_policy: bool = True  # whether the worker-choice ``policy`` applies to it
    constraint_aware: bool = True  # whether it places tasks only on machines that satisfy their constraints
    invalid_counters: tuple[str, ...] = ()  # counters of requests it found invalid ("invalid" in compare)
    # the fault kinds (fabric.faults.FAULT_KINDS) its protocols recover from; the fault search only
    # draws these for it, and the README's table lists them (tests/test_docs.py checks it)
    survives: tuple[str, ...] = ()
    # end-of-run checks of its live state (LM state equal to the workers', views converged):
    # each is fn(fabric) -> list of actors.invariants.Violation, run after the recorder's checks
    checks: tuple[Callable[[Any], list], ...] = ()
    roles: tuple[Role, ...] = ()  # its actors besides the workers (``WORKER``), for fault plans
    events: tuple[Event, ...] = ()  # the protocol events its actors log besides the common ones
    # the keys a fault search draws small values of for its runs ((key, values): a range draws an integer
    # in it, (False, True) a boolean, else one of the values), and keys that combine only under a condition
    # ((keys, values): when every key is set, the values are too; when a fixed key says otherwise, the
    # last drawn key goes back to its default)
    search: tuple[tuple[str, Any], ...] = ()
    combine: tuple[tuple[tuple[str, ...], dict], ...] = ()
    paths: tuple[str, ...] = ()  # counters of its recovery paths, which a fault search reports as reached
    size: Callable[[dict], Size] = _no_size  # its size in a run with ``params``
    submission: Callable[[dict], Submission] = _submit  # how jobs reach its front ends
    users: Callable[[dict], Users | None] = _nothing  # the run's users, if it has any
    job_traits: Callable[[dict], dict] = _no_traits  # Job fields every job of the run gets (a gang, say)
    # what a run uses of what some invariants check (``common.invariants.FEATURE_CHECKS``: "gangs",
    # "users"); an invariant whose feature a run does not use holds trivially and is not checked
    features: Callable[[dict], frozenset] = _no_features
    # the workers a fault search never lets die for good, because a job may need them to stay runnable:
    # fn(params, workers) -> names among ``workers`` (the run's worker actors, in the order it added them)
    keeps: Callable[[dict, list], tuple] = _keeps_none
    panels: tuple = ()  # its live-view tables and histograms (``Table``, ``Histogram``), plain data
    tour: tuple[dict, ...] = ()  # fault tables taking it through its recovery protocols (scenario failover)
    retired: tuple[tuple[str, str], ...] = ()  # (key, why): keys it had once; setting one is a one-line error

    @property
    def params(self) -> tuple[Param, ...]:
        """Its keys, as declared by its parameter class."""
        return declared(self.config) if self.config is not None else ()

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def config_of(self, params: dict):
        """Its parameter class's instance for a run with ``params`` (None without a class)."""
        return typed(self.config, params) if self.config is not None else None


# the cost models (``fabric.costs``) a run may name with --set cost_model=NAME: one JSON table each, with
# the costs of every scheduler's roles (gm, lm, master, distributor, sparrow) and where each comes from
COST_MODELS = Path(__file__).resolve().parent / "costs"
DEFAULT_COST_MODEL = "prototype"

FRONT_END_COUNTERS = (("unschedulable_tasks", "tasks of jobs rejected at submission: no machine can run them"),)
