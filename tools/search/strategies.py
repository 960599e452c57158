"""Hypothesis strategies for fault searches: fault plans over a built scenario's actors, small workloads
and cluster shapes, and whole runs (``examples``), for ``fedemu fuzz`` and for users' own property tests.

A fault plan is drawn as the ``[[fault]]`` tables of a ``--faults`` file (``scenarios.fault_plan``), so
any example can be written out and run again with ``fedemu run --faults``. Plans use **swarm testing**:
each one first picks a non-empty subset of the fault families it may use, then draws events only of
those. ``slow``/``restore`` need no recovery protocol (messages are only delayed; each link stays FIFO),
so they are always allowed; other kinds only where the scheduler's ``survives`` lists them. Each run is
also a variant of its scheduler: a value of every choice key that applies (``variants``).

A run has two phases, as in TigerBeetle's VOPR simulator (``examples``):
- **safety**: faults start within the workload's horizon; each ends after its drawn duration, or lasts
  until the heal. Every invariant must hold throughout (checked at the end, from what was recorded).
- **liveness**: at the heal (``Example.heal_us``: after every drawn fault, often long after, so cuts and
  outages outlast the connection timeout and any retry budget) every fault still in force ends at once:
  crashed actors restart, partitions heal, loss goes back to 0, slowed links are restored, except the
  workers drawn to die for good (``Example.for_good``), whose work must move elsewhere. Then every job
  must be done within ``liveness_bound_us`` of the heal.
``fault_plans`` alone draws the safety phase's kind of plan, with every fault ending by itself.

    from hypothesis import given
    from fedemu.tools.search import strategies

    @given(strategies.examples("default", schedulers=["megha"]))
    def test_megha_survives(example):
        example.run()          # raises RunViolation (or the actor's exception) on a broken run
"""

from __future__ import annotations

import functools
import shlex
from typing import Any

import attrs
from hypothesis import reject
from hypothesis import strategies as st

from fedemu.actors import registry
from fedemu.actors.common.invariants import jobs_closed
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.faults import FAULT_KINDS
from fedemu.fabric.journal import Journal
from fedemu.fabric.kernel import Fabric
from fedemu.fabric.network import CONNECTION_TIMEOUT_US
from fedemu.scenarios import fault_plan
from fedemu.scenarios.fault_plan import LIVENESS_GRACE_US, liveness_bound_us  # noqa: F401 (the search's API)
from fedemu.scenarios.run import FederationRun

from ..run import params as params_mod
from ..run import runner

# family -> the kinds it uses: the start of a fault and what ends it
FAMILIES = {"crash": ("crash", "restart"), "partition": ("partition", "heal"), "slow": ("slow", "restore"),
            "loss": ("loss",)}
BENIGN = ("slow", "restore")  # kinds no scheduler needs a protocol for: always allowed
HARNESS = ("submitter",)  # actors that are the workload, not the scheduler: never crashed
PLAN_SOURCE = "plan.toml"
DEFAULT_HORIZON_US = 1_000_000  # a scenario with no workload horizon and no fault-free end time
S_US = 1_000_000

# The liveness phase. The heal comes after every drawn fault, up to LONG_HEAL_US later: twenty minutes
# outlasts the connection timeout (60 s) many times over and any retry budget a protocol might keep
# (ten asks backing off to a minute apart take about seven). After it, every job must be done within
# ``liveness_bound_us``: LIVENESS_GRACE_US plus twice the workload's horizon (``scenarios.fault_plan`` says
# why; a plain run whose faults never heal is stopped as long after its last fault).
LONG_HEAL_US = 20 * 60 * S_US
# A long heal comes at least this long after every fault: past the connection timeout (60 s), so a cut then
# breaks its connections and loses what they carried. Drawn from 1 us, hypothesis' integers (which favour small
# values) made it longer than a minute in 1.5% of runs only, and a cut outlasting the timeout rarer still.
LONG_CUT_US = CONNECTION_TIMEOUT_US + S_US
FOR_GOOD_ROLE = "worker"  # the actors that may die for good: workers, whose work can always go elsewhere
FOR_GOOD_KEPT = ("demand", "demands", "machine_types", "constraint_table")  # keys under which it may not


def families(kinds) -> tuple[str, ...]:
    """The families whose every kind is in ``kinds`` (or is benign)."""
    allowed = set(kinds) | set(BENIGN)
    return tuple(f for f, ks in FAMILIES.items() if set(ks) <= allowed)


def check_kinds(kinds) -> None:
    """Refuse requested ``kinds`` that start no fault: a search of them would run with none (benign slow
    links at most). A fault is a family's first kind, drawn only with what ends it (``FAMILIES``)."""
    if kinds is None:
        return
    for kind in kinds:
        if kind not in FAULT_KINDS:
            raise ConfigError(f"unknown fault kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
    if not any(FAMILIES[f][0] in kinds for f in families(kinds)):
        pairs = "; ".join(",".join(ks) for ks in FAMILIES.values())
        raise ConfigError(f"--kinds {','.join(kinds)}: no fault starts from these kinds, so the search would draw "
                          f"none; a fault is drawn with what ends it: {pairs} (e.g. --kinds partition,heal)")


def allowed_kinds(scheduler: str | None, requested=None) -> tuple[str, ...]:
    """The kinds the search may draw for ``scheduler``: what it ``survives`` and the benign ones, within
    ``requested`` (None: every kind). A scenario without schedulers (``scheduler`` None) gets ``requested``."""
    requested = tuple(FAULT_KINDS) if requested is None else tuple(requested)
    if scheduler is None:
        return tuple(k for k in FAULT_KINDS if k in requested)
    survives = set(registry.get(scheduler).survives) | set(BENIGN)
    return tuple(k for k in FAULT_KINDS if k in survives and k in requested)


# ---- fault plans --------------------------------------------------------------------------------
def _durations(horizon_us: int):
    """How long a fault lasts: often a blip (up to 5 ms), else anything up to the horizon."""
    return st.one_of(st.integers(1, 5_000), st.integers(1, max(1, horizon_us)))


@st.composite
def _sides(draw, names):
    """Two disjoint non-empty groups of actors."""
    names = list(names)
    marks = draw(st.lists(st.integers(0, 2), min_size=len(names), max_size=len(names)))
    a = [n for n, m in zip(names, marks) if m == 1] or [names[0]]
    a = a if len(a) < len(names) else a[:1]
    b = [n for n, m in zip(names, marks) if m == 2 and n not in a] or [next(n for n in names if n not in a)]
    return [a, b]


def _actor(names):
    """One of ``names``: half the time one of its managers (every actor but the workers), so that in a
    cluster of many workers a GM, an LM or its standby, a master or a scheduler is still often the one hit."""
    names = list(names)
    managers = [n for n in names if n not in set(fault_plan.members(names, FOR_GOOD_ROLE))]
    if not managers or len(managers) == len(names):
        return st.sampled_from(names)
    return st.one_of(st.sampled_from(names), st.sampled_from(managers))


@st.composite
def _pair(draw, names):
    """Two different actors, cut from each other alone (``_sides`` cuts groups)."""
    a = draw(_actor(names))
    b = draw(_actor([n for n in names if n != a]))
    return [[a], [b]]


@st.composite
def _isolated(draw, names):
    """One actor cut off from every other."""
    a = draw(_actor(names))
    return [[a], [n for n in names if n != a]]


def _cut(names):
    """A partition's sides: two random groups, two actors, or one actor against all the others."""
    return st.one_of(_sides(names), _pair(names), _isolated(names))


@st.composite
def fault_tables(draw, names, horizon_us: int, kinds=FAULT_KINDS, *, max_events: int = 6):
    """A plan's ``[[fault]]`` tables (dicts) over actors ``names``, starting within ``[0, horizon_us]``:
    swarm testing over the families ``kinds`` allow; every fault drawn ends."""
    names = list(names)
    usable = [f for f in families(kinds) if f != "partition" or len(names) >= 2]
    usable = [f for f in usable if f not in ("slow", "loss") or len(names) >= 2]
    if not usable:
        return []
    swarm = draw(st.lists(st.sampled_from(usable), min_size=1, unique=True))
    crashable = [n for n in names if n not in HARNESS] or names
    # each event is drawn whole (family and details), so the shrinker deletes events, not their parts
    events = draw(st.lists(_event(names, crashable, horizon_us, swarm), min_size=1, max_size=max_events))
    events = draw(_cascades(events, horizon_us))
    return [table for event in without_no_ops(events) for table in event]


def without_no_ops(events):
    """The drawn events (each its tables, or ``(tables, open)``) less those that would make a plan event
    do nothing, which a plan refuses (``fault_plan.check_no_ops``): a crash of an actor while an earlier
    kept crash of it may still hold it down, and a partition that overlaps another while either ends by
    itself (a heal ends every partition, so the other's end would heal nothing). Partitions that last
    until the heal may overlap: the one heal ends them all. Kept in drawn order, so the shrinker's
    deletions act as before."""
    kept, down, cut = [], {}, []  # down: actor -> its kept crash windows; cut: kept partition windows
    for event in events:
        tables = event[0] if isinstance(event, tuple) else event
        first = tables[0]
        start = _us(first["at_s"])
        end = start + _us(first["for_s"]) if "for_s" in first else None  # None: until the heal
        if first["kind"] == "crash":
            windows = down.setdefault(first["target"], [])
            if any(_overlap(start, end, a, b) for a, b in windows):
                continue
            windows.append((start, end))
        elif first["kind"] == "partition":
            if any(_overlap(start, end, a, b) and not (end is None and b is None) for a, b in cut):
                continue
            cut.append((start, end))
        kept.append(event)
    return kept


def _overlap(a: int, b: int | None, c: int, d: int | None) -> bool:
    """Whether closed windows [a, b] and [c, d] share an instant (None: open to the end)."""
    return (d is None or a <= d) and (b is None or c <= b)


def _s(us: int) -> float:
    """Whole microseconds as the seconds a plan file says (exact decimals)."""
    return float(fault_plan._toml_seconds(us))


@st.composite
def _event(draw, names, crashable, horizon_us: int, swarm, until_heal: bool = False):
    """One fault of a family in ``swarm``, with what ends it: its plan tables (one, or two for loss). With
    ``until_heal``, a fault may instead last until the heal: then it has no end of its own (no ``for_s``, no
    loss set back), and is returned with what the heal must end, ``(tables, open)``; ``open`` is None for a
    fault that ends by itself, else ("crash", actor), ("partition",), ("slow", link) or ("loss", link)."""
    family = draw(st.sampled_from(swarm))
    t = draw(st.integers(0, max(0, horizon_us)))
    d = draw(st.one_of(_durations(horizon_us), st.just(None)) if until_heal else _durations(horizon_us))
    link = _pair(names).map(lambda sides: [sides[0][0], sides[1][0]])
    ends = {} if d is None else {"for_s": _s(d)}
    if family == "crash":
        target = draw(_actor(crashable))
        tables, opened = [{"at_s": _s(t), "kind": "crash", "target": target, **ends}], ("crash", target)
    elif family == "partition":
        sides = draw(_cut(names))
        tables, opened = [{"at_s": _s(t), "kind": "partition", "sides": sides, **ends}], ("partition",)
    elif family == "slow":
        factor = draw(st.sampled_from([2.0, 10.0, 100.0, 1000.0]))
        where = draw(link)
        tables, opened = [{"at_s": _s(t), "kind": "slow", "link": where, "value": factor, **ends}], ("slow", where)
    else:
        # loss: a probability on a link or every link, set back to 0 when it ends; certain first, so a plan
        # shrinks towards a fault whose effect does not hinge on the dice
        where = draw(st.one_of(link, st.just("*")))
        p = draw(st.sampled_from([1.0, 0.3, 0.05]))
        tables = [{"at_s": _s(t), "kind": family, "link": where, "value": p}]
        if d is not None:
            tables.append({"at_s": _s(t + d), "kind": family, "link": where, "value": 0.0})
        opened = ("loss", where)
    if not until_heal:
        return tables
    return tables, (None if d is not None else opened)


CASCADE_US = 5_000  # a fault of a cascade starts this close after the one before it, at most


@st.composite
def _cascades(draw, events: list, horizon_us: int) -> list:
    """Each drawn event starts anywhere in the horizon, so two faults within a few milliseconds of each other
    (a replica crashing twice while a cut begins, issue 45's find) were all but never drawn. Each event after
    the first may instead start up to CASCADE_US after the one before it: a cascade, as real failures often
    are (never past the horizon). ``events``: each a list of tables, or (tables, open) as ``_event`` returns
    them; they shrink back to independent starts."""
    out = list(events[:1])
    for event in events[1:]:
        if draw(st.booleans()):
            tables = event[0] if isinstance(event, tuple) else event
            shift = min(_start_us(out[-1]) + draw(st.integers(0, CASCADE_US)), horizon_us) - _start_us(event)
            moved = [{**t, "at_s": _s(_us(t["at_s"]) + shift)} for t in tables]
            event = (moved, event[1]) if isinstance(event, tuple) else moved
        out.append(event)
    return out


def _start_us(event) -> int:
    tables = event[0] if isinstance(event, tuple) else event
    return min(_us(t["at_s"]) for t in tables)


def _end_us(table) -> int:
    """When a drawn table's fault is over by itself (its start for one that lasts until the heal)."""
    return _us(table["at_s"]) + _us(table.get("for_s", 0.0))


def _us(seconds: float) -> int:
    return round(seconds * S_US)


@st.composite
def phased_plans(draw, names, horizon_us: int, kinds=FAULT_KINDS, *, for_good=(), most_died: int = 0,
                 max_events: int = 6):
    """The two phases' plan (module docstring): ``(plan, heal_us, died)``. Faults start within the horizon
    and may last until the heal; at the heal every fault still in force ends, but the crashed actors of
    ``for_good`` drawn to die for good (``died``, at most ``most_died``) stay down. The heal's own events are in the plan, so its
    file reproduces both phases."""
    names = list(names)
    usable = [f for f in families(kinds) if f != "partition" or len(names) >= 2]
    usable = [f for f in usable if f not in ("slow", "loss") or len(names) >= 2]
    if not usable:
        return fault_plan.from_tables([], PLAN_SOURCE), horizon_us, ()
    swarm = draw(st.lists(st.sampled_from(usable), min_size=1, unique=True))
    crashable = [n for n in names if n not in HARNESS] or names
    drawn = draw(st.lists(_event(names, crashable, horizon_us, swarm, until_heal=True), min_size=1,
                          max_size=max_events))
    drawn = without_no_ops(draw(_cascades(drawn, horizon_us)))
    tables = [t for ts, _ in drawn for t in ts]
    last = max([horizon_us] + [_end_us(t) for t in tables])
    heal = last + draw(st.one_of(st.just(0), _durations(horizon_us), st.integers(LONG_CUT_US, LONG_HEAL_US)))
    opened = [o for _, o in drawn if o is not None]
    restarted = {t["target"] for ts, o in drawn if o is None for t in ts if t["kind"] == "crash"}  # by itself
    died = []
    restart, links_lost, links_slowed, cut = [], [], [], False
    for o in opened:
        if o[0] == "crash":
            if (o[1] in for_good and o[1] not in died and o[1] not in restarted and len(died) < most_died
                    and draw(st.booleans())):
                died.append(o[1])
            elif o[1] not in restart:
                restart.append(o[1])
        elif o[0] == "partition":
            cut = True
        elif o[0] == "loss" and o[1] not in links_lost:
            links_lost.append(o[1])
        elif o[0] == "slow" and o[1] not in links_slowed:
            links_slowed.append(o[1])
    at = _s(heal)
    tables += [{"at_s": at, "kind": "restart", "target": n} for n in restart if n not in died]
    tables += [{"at_s": at, "kind": "heal"}] if cut else []
    tables += [{"at_s": at, "kind": "loss", "link": where, "value": 0.0} for where in links_lost]
    tables += [{"at_s": at, "kind": "restore", "link": where} for where in links_slowed]
    return fault_plan.from_tables(tables, PLAN_SOURCE), heal, tuple(died)


def fault_plans(names, horizon_us: int, kinds=FAULT_KINDS, *, max_events: int = 6):
    """Checked ``fault_plan.Plan`` values (see ``fault_tables``)."""
    return fault_tables(names, horizon_us, kinds, max_events=max_events).map(
        lambda tables: fault_plan.from_tables(tables, PLAN_SOURCE))


# ---- workloads and clusters (``--set`` overrides of the federation scenario) -------------------------
def workloads():
    """Small Poisson jobs: count, fanout, durations, load, constraints, network jitter, and the cutoff between
    short and long jobs. Mostly a handful of jobs of a few tasks, sometimes up to 40 jobs of up to 12 tasks
    (more jobs meet a fault after it, wider jobs span more workers and LMs); they shrink to the handful."""
    return st.fixed_dictionaries({
        "workload": st.just("poisson"),
        "jobs": st.one_of(st.integers(1, 8), st.integers(9, 40)),
        "fanout": st.one_of(st.integers(1, 4), st.integers(5, 12)),
        "task_s": st.sampled_from([0.05, 0.2, 1.0, 3.0]),
        "task_dist": st.sampled_from(["exp", "const"]),
        "load": st.sampled_from([0.3, 0.8, 1.0]),
        "constraints": st.booleans(),
        "jitter_ms": st.sampled_from([0.0, 0.0, 0.2, 0.5]),  # at most the default 0.5 ms latency
        # the default makes every drawn job short; 0.5 s makes some long (Pigeon's long queue, reserved workers)
        "short_cutoff_s": st.sampled_from([90.5811, 0.5]),
    })


def drawn(values):
    """The strategy a plug-in's ``search`` values stand for: a range draws an integer in it, (False,
    True) a boolean, anything else one of the values."""
    if isinstance(values, range):
        return st.integers(values.start, values.stop - 1)
    if len(values) == 2 and all(isinstance(v, bool) for v in values) and tuple(values) == (False, True):
        return st.booleans()
    return st.sampled_from(list(values))


def clusters(scheduler: str | None = None):
    """A small cluster: 1-3 partitions of 1-4 clusters of 1-4 workers each, 1 or 2 slots per worker,
    and small values of ``scheduler``'s own keys that its plug-in lists for the search (``search``): with
    standby LMs, up to four clusters each have one."""
    own = registry.get(scheduler).search if scheduler else ()
    return st.fixed_dictionaries({
        "gms": st.integers(1, 3), "lms": st.integers(1, 4), "workers_per_partition": st.integers(1, 4),
        "capacity": st.sampled_from(["1", "2"]),
        **{k: drawn(values) for k, values in own}})


# choice values the search never draws: they need a workload it does not draw (its workloads are Poisson)
NOT_DRAWN = {("user_assign", "trace")}


@functools.cache
def _choice_keys(ref: str, scheduler: str) -> tuple[tuple[str, tuple], ...]:
    """(key, values) of every choice key (``Param.choices``) that applies to ``scheduler`` in scenario
    ``ref`` (its ``declare``): the worker-choice policy, the tie order, the scheduler's own queue and
    protocol choices. The default comes first, so a failure shrinks towards it."""
    module = runner.load(ref)
    declare = getattr(module, "declare", None)
    if declare is None:
        return ()
    out = []
    for _, declared in declare(params_mod.resolve_scenario(module, {"scheduler": scheduler}), ()):
        for p in declared:
            values = (p.default,) + tuple(v for v in p.choices if v != p.default and (p.name, v) not in NOT_DRAWN)
            if p.choices and len(values) > 1:
                out.append((p.name, values))
    return tuple(out)


# a scheduler's timeouts and periods (its own ``*_s`` keys) are scaled together by one of these: shorter
# ones fire while answers are still on their way, so retries, takeovers and resends race the originals
TIMING_SCALES = (1, 0.1, 0.01)


def _timing_keys(scheduler: str) -> tuple:
    """``scheduler``'s own timeouts and periods: its keys in seconds with a positive default."""
    return tuple(p for p in registry.get(scheduler).params
                 if p.name.endswith("_s") and isinstance(p.default, float) and p.default > 0)


@st.composite
def variants(draw, ref: str, scheduler: str):
    """A variant of ``scheduler``: one value of each of its choice keys (``_choice_keys``), and its timing
    keys scaled together by one of TIMING_SCALES (so their order stays the default's). Only the keys not
    at their default are returned, so a reproducer's command names what differs."""
    out = {}
    for key, values in _choice_keys(ref, scheduler):
        value = draw(st.sampled_from(values))
        if value != values[0]:
            out[key] = value
    scale = draw(st.sampled_from(TIMING_SCALES))
    if scale != 1:
        for p in _timing_keys(scheduler):
            out[p.name] = round(p.default * scale, 9)
            p.check(out[p.name])
    return out


def _combine(scheduler: str, overrides: dict, fixed: dict) -> None:
    """Keys the plug-in says combine only under a condition (``combine``): when every key of a rule is set,
    its values are set too; when a fixed key says otherwise, the last drawn key goes back to its default."""
    plugin = registry.get(scheduler)
    defaults = {p.name: p.default for p in plugin.params}
    for keys, values in plugin.combine:
        if not all(overrides.get(k, defaults[k]) != defaults[k] for k in keys):
            continue
        if any(k in fixed and fixed[k] != v for k, v in values.items()):
            drop = next((k for k in reversed(keys) if k not in fixed), None)
            if drop is not None:  # (all fixed: the run says itself why it does not combine)
                overrides[drop] = defaults[drop]
        else:
            overrides.update(values)


def _jobs_for_every_user(overrides: dict, fixed: dict) -> None:
    """A run has at least as many jobs as users (more users is refused): drawn jobs are raised to the
    users, or drawn users lowered to the jobs when the jobs are fixed."""
    users, jobs = int(overrides.get("users") or 0), int(overrides.get("jobs") or 0)
    if users and jobs and users > jobs:
        if "jobs" in fixed and "users" not in fixed:
            overrides["users"] = jobs
        else:
            overrides["jobs"] = users


# ---- whole runs ---------------------------------------------------------------------------------
def set_text(value) -> str:
    """A value as ``--set`` writes it (``parse_value`` reads it back the same)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else str(value)


@attrs.frozen
class Example:
    """One run of the search: the scenario, its seed, ``--set`` overrides, and a fault plan."""

    scenario: str  # as the user named it (a name or a file path)
    seed: int
    overrides: dict = attrs.field(hash=False)
    plan: Any  # scenarios.fault_plan.Plan
    scheduler: str | None = None
    heal_us: int | None = None  # when every fault has healed and the liveness phase starts (None: none)
    for_good: tuple = ()  # the actors that died for good (never restarted)

    @property
    def deadline_us(self) -> int | None:
        """When every job must be done: ``liveness_bound_us`` after the heal (None: no liveness phase)."""
        return None if self.heal_us is None else self.heal_us + liveness_bound_us(self.horizon_us)

    @property
    def events(self) -> int:
        """How many fault events the plan makes (a crash with ``for_s`` is two: crash and restart)."""
        return len(fault_plan_events(self.plan, self.names))

    @property
    def names(self) -> list[str]:
        return built(runner.scenario_ref(self.scenario), self.seed, tuple(sorted(self.overrides.items())))[0]

    @property
    def horizon_us(self) -> int:
        """The virtual time the plan's faults start within (the workload's horizon, ``built``)."""
        return built(runner.scenario_ref(self.scenario), self.seed, tuple(sorted(self.overrides.items())))[1]

    def run(self, **kwargs) -> runner.RunResult:
        """Run it (``tools.run.runner.execute``): raises RunViolation on a broken verdict, or what an actor raised."""
        kwargs.setdefault("faults", self.plan)
        return runner.execute(self.scenario, seed=self.seed, overrides=dict(self.overrides), **kwargs)

    def command(self, plan_path: str) -> str:
        """The ``fedemu run`` command that runs this example with its plan written to ``plan_path``."""
        words = ["fedemu", "run", self.scenario, "--seed", str(self.seed)]
        for key, value in self.overrides.items():
            words += ["--set", f"{key}={set_text(value)}"]
        return shlex.join(words + ["--faults", plan_path])


def _sets(overrides: dict) -> str:
    return " ".join(f"--set {k}={set_text(v)}" for k, v in overrides.items())


def fault_plan_events(plan, names) -> list:
    """The plan's plain events for a run with actors ``names`` (picks drawn with seed 0)."""
    return plan.faults(names, 0)


class Guard:
    """A fabric progress hook that stops a run past ``limit_us`` of virtual time (deterministically: it
    looks every ``every`` windows), or past ``max_events`` events (messages that multiply faster than
    time goes on), so a run that never settles cannot hang a search; ``stalled_at`` says when it
    stopped one, ``storm`` whether for the event count. Stopping a federation run, it notes what its
    invariants say then (``safety``: the first broken one but ``jobs_closed``; ``stuck``: the jobs not
    done), for the liveness phase's verdict."""

    every = 1  # every window: a storm can multiply the events many times over in a few windows

    def __init__(self, limit_us: int, max_events: int = 10**9) -> None:
        self.limit_us = limit_us
        self.max_events = max_events
        self.stalled_at: int | None = None
        self.storm = False
        self.safety: str | None = None
        self.stuck: list = []

    def __call__(self, fabric, run) -> None:
        if self.stalled_at is None and (fabric.now > self.limit_us or fabric.events > self.max_events):
            self.stalled_at = fabric.now
            self.storm = fabric.events > self.max_events
            fabric.stop()
            if isinstance(run, FederationRun):
                self._note(run, fabric.now)

    def _note(self, run, now_us: int) -> None:
        broken = [line for line in run.verdict(now_us, partial=True).values() if line != "ok"]
        self.safety = broken[0] if broken else None
        self.stuck = jobs_closed(run.recorder, run.cluster, now_us)


PROBE_LIMIT_US = 3600 * 10**6  # a fault-free run that finds its horizon is stopped here


@functools.lru_cache(maxsize=256)
def built(ref: str, seed: int, overrides: tuple) -> tuple[list[str], int]:
    """Build (not run) the scenario ``ref`` with ``overrides``: its actor names and the horizon faults
    fall within (the workload's: its last arrival plus its longest task, or its backlog on the cluster if
    longer, ``fault_plan.workload_horizon_us``; a scenario's own ``horizon_us``; or the virtual end of a
    fault-free run)."""
    module = runner.load(ref)
    params = params_mod.resolve_scenario(module, dict(overrides))
    fabric = Fabric(seed, journal=Journal(None))
    run = runner.build_run(module, ref, fabric, dict(params))
    names = list(fabric.names)
    horizon = getattr(run, "horizon_us", None)
    if horizon is None and isinstance(run, FederationRun):
        from fedemu.scenarios import federation

        _, table = federation.build_cluster(run.params, seed)
        jobs = federation.build_workload(run.params, seed, run.recorder.total_units, table)
        horizon = fault_plan.workload_horizon_us(jobs, run.recorder.total_units)
    if horizon is None:
        guard = Guard(PROBE_LIMIT_US)
        try:
            horizon = runner.execute(ref, seed=seed, overrides=dict(overrides), progress=guard).fabric.now
        except Exception:  # noqa: BLE001 - a scenario that fails fault-free: the search will show it
            horizon = DEFAULT_HORIZON_US
        if guard.stalled_at is not None:  # it never settles even without faults
            horizon = DEFAULT_HORIZON_US
    return names, max(1, int(horizon))


def scenario_keys(ref: str) -> set[str]:
    """The keys the scenario ``ref`` has (its PARAMS)."""
    return set(runner.load(runner.scenario_ref(ref)).PARAMS)


# keys a search never keeps from a scenario: its workload and its total of workers (the search draws a
# small workload and cluster); a drawn key is left out where the scenario sets the other key named
NOT_KEPT = ("workers", "workload", "trace", "rate", "jobs", "fanout", "task_s", "task_dist", "load")
NOT_DRAWN_WITH = {"capacity": "machine_types"}  # machine_types gives every machine's capacity


def _build(ref: str, seed: int, overrides: dict, fixed: dict) -> tuple[list[str], int]:
    """``built`` for an example; drawn constraints too rare for its tiny cluster are dropped (in ``overrides``)."""
    try:
        return built(ref, seed, tuple(sorted(overrides.items())))
    except ConfigError:
        if not overrides.get("constraints") or "constraints" in fixed:
            raise
    overrides["constraints"] = False
    return built(ref, seed, tuple(sorted(overrides.items())))


def _read_by(workload, key: str) -> bool:
    """Whether ``workload`` (the user's, or None: the search's own Poisson) reads the workload key ``key``."""
    from fedemu.scenarios import federation

    readers = federation.WORKLOAD_KEYS.get(key)
    if workload is None or readers is None or key == "workload":
        return True
    return ("syn_N" if str(workload).startswith("syn_") else str(workload)) in readers


def scenario_keeps(ref: str) -> dict:
    """What a scenario built on the federation keeps in a search: every key it sets away from the
    federation's defaults (its setup: the fairness scenario's users and shares, the heterogeneous one's
    machines and gangs), and the keys its ``SEARCH_KEEPS`` names (e.g. the failover scenario's shape, which
    its own fault plan needs), at its values; not its workload (``NOT_KEPT``)."""
    from fedemu.scenarios import federation

    params = runner.load(ref).PARAMS
    named = set(getattr(runner.load(ref), "SEARCH_KEEPS", ()))
    return {k: v for k, v in params.items() if k in named or (k not in NOT_KEPT and k in federation.PARAMS
                                                              and federation.PARAMS[k] != v)}


def _sets_workers(ref: str) -> bool:
    return runner.load(ref).PARAMS.get("workers", 0) != 0


def applies(key: str, scheduler: str) -> bool:
    """Whether ``key`` applies to a federation run of ``scheduler`` (``federation.declare``): a common key
    (the policy's only for schedulers that take one), or one of the scheduler's own."""
    return key in _keys_of(scheduler)


@functools.cache
def _keys_of(scheduler: str) -> frozenset:
    from fedemu.scenarios import federation

    params = {**federation.PARAMS, "scheduler": scheduler}
    return frozenset(p.name for _, declared in federation.declare(params) for p in declared)


def examples(scenario: str = "default", schedulers=None, kinds=None, fixed: dict | None = None,
             max_events: int = 6, liveness: bool = False):
    """Whole runs of ``scenario``: a scheduler from ``schedulers`` (default: every registered one; none for
    a scenario without a ``scheduler`` key), a small workload and cluster where the scenario has those
    keys, a seed, and a fault plan over the built run's own actor names with the kinds ``allowed_kinds``
    gives (``kinds``: what the user asks for). ``fixed`` overrides, and what the scenario keeps
    (``scenario_keys``), are never drawn; each goes to the runs of the schedulers it applies to (a key of
    some schedulers only is refused when it applies to none of ``schedulers``). With ``liveness``, a run of a
    scheduler has both phases (module docstring); else its faults all end by themselves, and it must end
    with every invariant ok."""
    ref = runner.scenario_ref(scenario)
    keys = frozenset(runner.load(ref).PARAMS)
    check_kinds(kinds)
    searched: list = [None]
    if "scheduler" in keys:
        chosen = (fixed or {}).get("scheduler")
        if chosen is not None and schedulers is not None and list(schedulers) != [chosen]:
            raise ConfigError(f"--set scheduler={chosen} and --schedulers {','.join(schedulers)} disagree: name the "
                              "schedulers to search with --schedulers alone")
        searched = list(schedulers or ([chosen] if chosen is not None else registry.SCHEDULERS))
        for key in fixed or ():
            if not any(applies(key, s) for s in searched):
                raise ConfigError(f"--set {key}=... applies to none of the schedulers searched ({', '.join(searched)})")
    check_fixed(ref, searched, fixed or {})
    refusals = Refusals(dict(fixed or {}))
    return _examples(scenario, ref, keys, schedulers, kinds, fixed, max_events, liveness, refusals)


def check_fixed(ref: str, searched: list, fixed: dict) -> None:
    """Check the user's ``--set`` values before the search, as ``fedemu run`` would (the scenario at its
    defaults, with them, for each scheduler ``searched`` they apply to): a mistake is one line naming them."""
    if not fixed:
        return
    for scheduler in searched:
        mine = {k: v for k, v in fixed.items() if scheduler is None or applies(k, scheduler)}
        overrides = mine if scheduler is None else {**mine, "scheduler": scheduler}
        try:
            built(ref, 0, tuple(sorted(overrides.items())))
        except ConfigError as exc:
            raise ConfigError(f"fuzz: {_sets(mine)}: {exc}") from None


class Refused(BaseException):
    """Every example drawn with the user's ``--set`` values was refused: a BaseException, so hypothesis lets it
    through (it is no failure of a run, and nothing is saved in its database); the search says it in one line."""


class Refusals:
    """Examples whose drawn shape does not fit the user's ``--set`` values are left out (``hypothesis.reject``):
    the search explores the shapes that fit. If none of the first ``LIMIT`` fits, the values are refused."""

    LIMIT = 50

    def __init__(self, user: dict) -> None:
        self.user = user
        self.refused = 0
        self.fitted = 0

    def refuse(self, exc: ConfigError) -> None:
        """Leave the example out (or refuse the values); returns only when the user set nothing: then the
        strategies drew a run that cannot be (their bug), which the caller raises."""
        if not self.user:
            return
        self.refused += 1
        if not self.fitted and self.refused >= self.LIMIT:
            raise Refused(f"fuzz: {_sets(self.user)}: none of the {self.refused} small clusters and workloads the "
                          f"search drew fits these values; the first said: {exc}")
        reject()


def may_die_for_good(names, overrides: dict) -> tuple[list[str], int]:
    """The actors a run may lose for good, and how many at most: its workers, as long as the rest can run
    every job: no constraints, every machine alike (no demand or machine keys), as many survivors as a
    job has tasks (a gang needs them all at once), and the workers its scheduler keeps (``keeps``)."""
    if overrides.get("constraints", True) or any(k in overrides for k in FOR_GOOD_KEPT):
        return [], 0
    workers = fault_plan.members(names, FOR_GOOD_ROLE)
    scheduler = overrides.get("scheduler")
    kept = set(registry.get(scheduler).keeps(overrides, workers)) if scheduler else set()
    return [w for w in workers if w not in kept], max(0, len(workers) - max(1, int(overrides.get("fanout", 1))))


@st.composite
def _examples(draw, scenario, ref, keys, schedulers, kinds, fixed, max_events, liveness=False, refusals=None):
    fixed = dict(fixed or {})
    scheduler = None
    overrides: dict = {}
    if "scheduler" in keys:
        kept = scenario_keeps(ref)
        scheduler = fixed.get("scheduler") or draw(st.sampled_from(list(schedulers or registry.SCHEDULERS)))
        fixed = {k: v for k, v in {**kept, **fixed}.items() if applies(k, scheduler)}
        overrides["scheduler"] = scheduler
        drawn = {**draw(clusters(scheduler)), **draw(workloads())}
        overrides.update({k: v for k, v in drawn.items() if (k in keys or k in registry.get(scheduler).param_names)
                          and not (k in NOT_DRAWN_WITH and NOT_DRAWN_WITH[k] in kept)
                          and _read_by(fixed.get("workload"), k)})
        if _sets_workers(ref) and "workers" not in fixed:  # the drawn partitions make the cluster, not its total
            overrides["workers"] = 0
        overrides.update(draw(variants(ref, scheduler)))
    overrides.update(fixed)
    if scheduler is not None:
        _combine(scheduler, overrides, fixed)
        _jobs_for_every_user(overrides, fixed)
    seed = draw(st.integers(0, 2**16))
    try:
        names, horizon = _build(ref, seed, overrides, fixed)
    except ConfigError as exc:
        if refusals is not None:
            refusals.refuse(exc)  # the drawn shape does not fit the user's values: left out
        raise ConfigError(f"fuzz: scenario {scenario} with {_sets(overrides)}: {exc}") from None
    if refusals is not None:
        refusals.fitted += 1
    if not names:
        raise ConfigError(f"fuzz: scenario {scenario} builds no actors, so there is nothing to inject a fault into")
    allowed = allowed_kinds(scheduler, kinds)
    if not (liveness and scheduler is not None):
        plan = draw(fault_plans(names, horizon, allowed, max_events=max_events))
        return Example(scenario, seed, overrides, plan, scheduler)
    mortal, most = may_die_for_good(names, overrides)
    plan, heal, died = draw(phased_plans(names, horizon, allowed, for_good=mortal, most_died=most,
                                         max_events=max_events))
    return Example(scenario, seed, overrides, plan, scheduler, heal_us=heal, for_good=died)
