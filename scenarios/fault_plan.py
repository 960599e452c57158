"""Fault plans a user writes (``fedemu run --faults PLAN``) and random failure processes (``--set``).

A plan file is TOML (or JSON, by the ``.json`` extension): a list of ``[[fault]]`` tables, each one
event. Times are seconds (``at_s``, ``for_s``), rounded to integer microseconds. Targets name actors
(``w-17``) or pick them by role with a seeded random choice (``{role = "worker", count = 5}``).
The file is checked as a whole when it is read; names and roles are checked against the run's actors
once the scenario is built, before anything runs. Every mistake is one ConfigError naming the file
and the entry. ``Plan.faults`` gives plain ``fabric.faults.Fault`` events, which the journal header
keeps, so a replay needs no file and draws nothing.

Failure processes (``worker_mtbf_s`` ...) become the same plain events at build time: per actor, a
seeded exponential time to failure, then an exponential time to repair, until the horizon.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import tomllib
from pathlib import Path

import attrs

from fedemu.actors import registry
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.faults import FAULT_KINDS, LINK_KINDS, PROBABILITY_KINDS, RETIRED, Fault
from fedemu.fabric.rand import Stream
from fedemu.model import seconds_to_us
from fedemu.fabric.inputs import read_text

# role -> the name prefixes of its actors (an actor of a role is named ``<prefix>-<number>``): the workers,
# each scheduler's roles (its plug-in declares them) and ``manager``, every role but the workers
ROLES = registry.roles()
TARGET_KEY = {"crash": "target", "restart": "target", "partition": "sides", "heal": None,
              **{k: "link" for k in LINK_KINDS}}
ENDS_WITH = {"crash": "restart", "slow": "restore", "partition": "heal"}  # what ``for_s`` adds
WORKLOAD_OWNER = "submitter"  # the jobs' owner of record: linked to faults (slow, loss, partition), never crashed
MAX_PROCESS_EVENTS = 1_000_000  # failure processes expected to make more events than this are refused


def members(names, role: str) -> list[str]:
    """The actors of ``role`` among ``names``, in actor order."""
    pattern = re.compile(rf"({'|'.join(ROLES[role])})-\d+")
    return [n for n in names if pattern.fullmatch(n)]


@attrs.frozen
class Pick:
    """A seeded random choice of ``count`` actors of ``role`` (None: all of them)."""

    role: str
    count: int | None = 1


@attrs.frozen
class Entry:
    """One event of a plan file: ``target`` is a tuple of names and Picks (crash, restart), two such
    tuples (partition), a pair of ends or ("*",) (link kinds), or () (heal)."""

    where: str
    at_us: int
    kind: str
    target: tuple
    value: float = 0.0
    for_us: int | None = None


@attrs.frozen
class Plan:
    """A checked fault plan: ``source`` names it (the file), ``entries`` are its events in file order."""

    source: str
    entries: tuple[Entry, ...]

    def faults(self, names, seed: int) -> list[Fault]:
        """The plan as plain Fault events for a run with actors ``names``: picks drawn from
        ``Stream(seed, "faults/plan/<entry>/<pick>")``; an unknown name, a role with no actors here or
        a count above its size is a ConfigError naming the file and entry."""
        return [fault for _, fault in self.placed(names, seed)]

    def placed(self, names, seed: int) -> list[tuple[str, Fault]]:
        """``faults``, each with the plan entry it came from (``plan.toml:7: fault 2 (crash at 1 s)``)."""
        index = set(names)
        out: list[Fault] = []
        wheres: list[str] = []
        for n, entry in enumerate(self.entries, start=1):
            picks = itertools.count()

            def resolve(item) -> list[str]:
                if isinstance(item, str):
                    if item not in index:
                        shown = ", ".join(list(names)[:8]) + (", ..." if len(names) > 8 else "")
                        raise ConfigError(f"{entry.where}: unknown actor {item!r}; known: {shown}")
                    return [item]
                pool = members(names, item.role)
                if not pool:
                    here = sorted(r for r in ROLES if members(names, r))
                    raise ConfigError(f"{entry.where}: no actor has role {item.role!r} in this run; roles "
                                      f"here: {', '.join(here)}")
                count = len(pool) if item.count is None else item.count
                if count > len(pool):
                    raise ConfigError(f"{entry.where}: count {count} is more than the {len(pool)} actors of "
                                      f"role {item.role!r}")
                chosen = set(Stream(seed, f"faults/plan/{n}/{next(picks)}").sample(pool, count))
                return [a for a in pool if a in chosen]  # in actor order

            def side(items) -> tuple[str, ...]:
                return tuple(dict.fromkeys(a for item in items for a in resolve(item)))

            kind, at = entry.kind, entry.at_us
            if kind in ("crash", "restart"):
                targets = side(entry.target)
                _check_crashable(entry.where, kind, targets, names)
                out += [_fault(entry.where, at, kind, (a,)) for a in targets]
                if entry.for_us is not None:
                    out += [_fault(entry.where, at + entry.for_us, "restart", (a,)) for a in targets]
            elif kind == "partition":
                sides = (side(entry.target[0]), side(entry.target[1]))
                out.append(_fault(entry.where, at, kind, sides))
            elif kind == "heal" or entry.target == ("*",):
                out.append(_fault(entry.where, at, kind, entry.target, entry.value))
            else:
                link = tuple(resolve(end)[0] for end in entry.target)
                out.append(_fault(entry.where, at, kind, link, entry.value))
            if entry.for_us is not None and kind != "crash":
                end = out[-1]
                out.append(_fault(entry.where, at + entry.for_us, ENDS_WITH[kind], () if kind == "partition" else end.target))
            wheres += [entry.where] * (len(out) - len(wheres))
        return list(zip(wheres, out))


def recorded(data, source: str = "the journal header") -> Plan:
    """A plan of already resolved events, as ``Fault.as_data`` lists (what a journal header keeps)."""
    if not isinstance(data, (list, tuple)):
        raise ConfigError(f"{source}: faults must be a list of [at_us, kind, target, value], got "
                          f"{type(data).__name__}")
    entries = []
    for n, ev in enumerate(data, start=1):
        where = f"{source}: fault {n}"
        if not isinstance(ev, (list, tuple)) or len(ev) != 4:
            raise ConfigError(f"{where}: expected [at_us, kind, target, value], got {ev!r}")
        fault = _fault(where, *ev)
        entries.append(fault)
    return _Recorded(source, tuple(entries))


@attrs.frozen
class _Recorded(Plan):
    """A plan whose entries are plain Faults already (a replay's)."""

    def placed(self, names, seed: int) -> list[tuple[str, Fault]]:
        known = set(names)
        for n, fault in enumerate(self.entries, start=1):
            for name in fault.names():
                if name not in known:
                    raise ConfigError(f"{self.source}: fault {n} names actor {name!r}, which this run does not have")
            if fault.kind in ("crash", "restart"):
                _check_crashable(f"{self.source}: fault {n}", fault.kind, fault.target, names)
        return [(f"{self.source}: fault {n}", fault) for n, fault in enumerate(self.entries, start=1)]


def _check_crashable(where: str, kind: str, targets, names) -> None:
    """Refuse a crash or restart of the submitter, naming the roles that may crash."""
    if WORKLOAD_OWNER in targets:
        crashable = [r for r in ROLES if members(names, r)]
        raise ConfigError(f"{where}: {WORKLOAD_OWNER} cannot {kind}: it is the workload's owner of record, not part "
                          "of a scheduler, and a crash would lose the jobs it holds, which no scheduler could recover "
                          f"(docs/faults.md); crash targets: the actors of roles {', '.join(crashable)}")


def _fault(where: str, *args) -> Fault:
    try:
        return Fault(*args)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None


# ---- reading a file -------------------------------------------------------------------------------
def load(path) -> Plan:
    """Read and check a plan file (TOML; JSON when it ends in .json)."""
    path = Path(path)
    name = str(path)
    text = read_text(path, "a fault plan (.toml or .json)")
    return parse(text, name, json_format=path.suffix.lower() == ".json")


def parse(text: str, source: str, *, json_format: bool = False) -> Plan:
    """Check a plan's text; ``source`` names it in errors."""
    try:
        data = json.loads(text) if json_format else tomllib.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from None
    if json_format and isinstance(data, list):
        data = {"fault": data}
    if not isinstance(data, dict) or set(data) - {"fault"}:
        extra = sorted(set(data) - {"fault"}) if isinstance(data, dict) else type(data).__name__
        raise ConfigError(f"{source}: a plan holds only [[fault]] tables (a 'fault' list); found {extra}")
    return from_tables(data.get("fault", []), source, lines=None if json_format else _table_lines(text))


_TABLE = re.compile(r"\s*\[\[\s*fault\s*\]\]\s*(#.*)?")


def _table_lines(text: str) -> list[int]:
    """The line of each ``[[fault]]`` table header of a TOML plan, in order (an error names it)."""
    return [n for n, line in enumerate(text.splitlines(), start=1) if _TABLE.fullmatch(line)]


def from_tables(events, source: str, lines: list[int] | None = None) -> Plan:
    """Check a plan given as its ``[[fault]]`` tables (dicts, as a plan file holds them); ``lines``: the line
    of each table in its file, when known, for errors (``plan.toml:7: fault 2 (crash at 1 s): ...``)."""
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise ConfigError(f"{source}: 'fault' must be a list of tables ([[fault]] in TOML)")
    if lines is None or len(lines) != len(events):  # (tables written inline: no line to name)
        lines = [None] * len(events)
    return Plan(source, tuple(_entry(f"{source}{'' if at is None else f':{at}'}: fault {n}", ev)
                              for n, (ev, at) in enumerate(zip(events, lines), start=1)))


# ---- writing a file -------------------------------------------------------------------------------
def _toml_seconds(us: int) -> str:
    """Whole microseconds as exact decimal seconds (``1.5``, ``0.000001``), which read back the same."""
    whole, frac = divmod(us, 10**6)
    return f"{whole}.{f'{frac:06d}'.rstrip('0') or '0'}"


def _toml_item(item) -> str:
    if isinstance(item, str):
        return json.dumps(item)  # a TOML basic string (JSON's escapes are TOML's)
    count = '"all"' if item.count is None else str(item.count)
    return f'{{ role = {json.dumps(item.role)}, count = {count} }}'


def _toml_group(items) -> str:
    return "[" + ", ".join(_toml_item(i) for i in items) + "]"


def to_toml(plan: Plan) -> str:
    """The plan in the ``--faults`` file format (``[[fault]]`` tables); ``parse`` reads back the same entries."""
    out = []
    for entry in plan.entries:
        lines = ["[[fault]]", f"at_s = {_toml_seconds(entry.at_us)}", f"kind = {json.dumps(entry.kind)}"]
        key = TARGET_KEY[entry.kind]
        if key == "target":
            lines.append(f"target = {_toml_group(entry.target)}")
        elif key == "sides":
            lines.append(f"sides = [{_toml_group(entry.target[0])}, {_toml_group(entry.target[1])}]")
        elif key == "link":
            lines.append('link = "*"' if entry.target == ("*",) else f"link = {_toml_group(entry.target)}")
        if entry.kind in ("slow", *PROBABILITY_KINDS):
            lines.append(f"value = {float(entry.value)!r}")
        if entry.for_us is not None:
            lines.append(f"for_s = {_toml_seconds(entry.for_us)}")
        out.append("\n".join(lines))
    return "\n\n".join(out) + ("\n" if out else "")


MAX_SECONDS = 2**62 // 10**6  # a time and a for_s added stay below 2^63 microseconds


def _seconds(where: str, key: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where}: {key} must be a number of seconds >= 0, got {value!r}")
    if value > MAX_SECONDS:
        raise ConfigError(f"{where}: {key} is {value!r} s; at most {MAX_SECONDS:,} s")
    return seconds_to_us(value)


def _name_or_pick(where: str, item, *, single: bool = False):
    """An actor name, or ``{role = R, count = N}`` (``count = "all"``: every actor of the role)."""
    if isinstance(item, str) and item:
        return item
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: a target is an actor name or {{role = ..., count = ...}}, got {item!r}")
    extra = sorted(set(item) - {"role", "count"})
    if extra:
        raise ConfigError(f"{where}: a role target takes role and count, not {', '.join(extra)}")
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise ConfigError(f"{where}: unknown role {role!r}; known: {', '.join(ROLES)}")
    count = item.get("count", 1)
    if count == "all":
        count = None
    elif isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ConfigError(f"{where}: count must be a whole number >= 1 or \"all\", got {count!r}")
    if single and count != 1:
        raise ConfigError(f"{where}: each end of a link is one actor (count 1), got count {item.get('count')!r}")
    return Pick(role, count)


def _group(where: str, value) -> tuple:
    """A name, a role pick, or a list of them."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise ConfigError(f"{where}: an empty target names no actor")
    return tuple(_name_or_pick(where, item) for item in items)


def _entry(where: str, ev: dict) -> Entry:
    kind = ev.get("kind")
    if isinstance(kind, str) and kind in RETIRED:
        raise ConfigError(f"{where}: kind {kind!r}: {RETIRED[kind]}")
    if kind not in FAULT_KINDS:
        raise ConfigError(f"{where}: unknown kind {kind!r}; known: {', '.join(FAULT_KINDS)}")
    at = ev.get("at_s")
    where = f"{where} ({kind}{f' at {at} s' if at is not None else ''})"
    if "at_s" not in ev:
        raise ConfigError(f"{where}: needs at_s, the time in seconds")
    key = TARGET_KEY[kind]
    allowed = {"at_s", "kind", *([key] if key else []), *(["value"] if kind in ("slow", *PROBABILITY_KINDS) else []),
               *(["for_s"] if kind in ENDS_WITH else [])}
    extra = sorted(set(ev) - allowed)
    if extra:
        raise ConfigError(f"{where}: unexpected key(s) {', '.join(extra)}; {kind} takes {', '.join(sorted(allowed))}")
    at_us = _seconds(where, "at_s", at)
    for_us = _seconds(where, "for_s", ev["for_s"]) if "for_s" in ev else None
    if key and key not in ev:
        raise ConfigError(f"{where}: needs {key}")
    if kind in ("slow", *PROBABILITY_KINDS) and "value" not in ev:
        what = "the latency factor (> 0)" if kind == "slow" else "the probability (0 to 1)"
        raise ConfigError(f"{where}: needs value, {what}")
    value = ev.get("value", 0.0)
    if key == "target":
        target = _group(where, ev["target"])
    elif key == "sides":
        sides = ev["sides"]
        if not isinstance(sides, list) or len(sides) != 2:
            raise ConfigError(f"{where}: sides must be two groups of actors, e.g. [[\"gm-0\"], [\"lm-0\", \"lm-1\"]]")
        target = (_group(where, sides[0]), _group(where, sides[1]))
    elif key == "link":
        link = ev["link"]
        if link == "*":
            target = ("*",)
        elif isinstance(link, list) and len(link) == 2:
            target = tuple(_name_or_pick(where, end, single=True) for end in link)
        else:
            raise ConfigError(f"{where}: link must be two actors, e.g. [\"gm-0\", \"lm-0\"], or \"*\" (every link)")
    else:
        target = ()
    # the same checks as a Fault's own (kind, value, '*' only where it applies), with names stood in
    stand_in = {"target": ("x",), "sides": (("a",), ("b",)), "link": target if target == ("*",) else ("a", "b"),
                None: ()}[key]
    _fault(where, at_us, kind, stand_in, value)
    return Entry(where, at_us, kind, target, value, for_us)


# ---- failure processes ----------------------------------------------------------------------------
def failure_process(names, seed: int, role: str, mtbf_s: float, mttr_s: float, horizon_us: int) -> list[Fault]:
    """Crash and restart events for every actor of ``role``: from time 0, an exponential time to failure
    (mean ``mtbf_s``) gives a crash while before ``horizon_us``, then an exponential repair time (mean
    ``mttr_s``) its restart, and so on; ``mttr_s`` = 0: a crashed actor stays down. Each actor draws from
    its own ``Stream(seed, "faults/<role>/<name>")``, so adding actors changes no other actor's failures."""
    if mtbf_s <= 0:
        return []
    actors = members(names, role)
    expected = len(actors) * horizon_us / max(1, seconds_to_us(mtbf_s + mttr_s))
    if expected > MAX_PROCESS_EVENTS:
        raise ConfigError(f"{role}_mtbf_s={mtbf_s:g} with {len(actors)} {role}s over {horizon_us / 1e6:g} s would "
                          f"make about {expected:,.0f} failures (at most {MAX_PROCESS_EVENTS:,}); raise the MTBF")
    out = []
    for name in actors:
        stream = Stream(seed, f"faults/{role}/{name}")
        t = 0
        while True:
            t += max(1, seconds_to_us(stream.expovariate(mtbf_s)))
            if t >= horizon_us:
                break
            out.append(Fault(t, "crash", (name,)))
            if mttr_s <= 0:
                break
            t += max(1, seconds_to_us(stream.expovariate(mttr_s)))
            out.append(Fault(t, "restart", (name,)))
    return out


def processes(params: dict, names, seed: int, jobs) -> list[Fault]:
    """The failure processes a run's ``--set`` keys ask for (workers, then managers); ``jobs()`` makes the
    workload again, read only when a process is on and ``fault_horizon_s`` is 0."""
    on = [(role, float(params[f"{role}_mtbf_s"]), float(params[f"{role}_mttr_s"])) for role in ("worker", "manager")]
    on = [p for p in on if p[1] > 0]
    if not on:
        return []
    horizon = seconds_to_us(float(params["fault_horizon_s"])) or workload_horizon_us(jobs())
    return [f for role, mtbf, mttr in on for f in failure_process(names, seed, role, mtbf, mttr, horizon)]


def check_no_ops(existing, placed) -> None:
    """Refuse a plan event that would do nothing (``placed``: the plan's ``(where, Fault)`` pairs, applied
    after the scenario's own ``existing`` events at the same instant): a restart of an actor that is up
    (nothing crashed it, or it is up again), a crash of an actor the plan already took down (two crashes at
    one instant, or one while it is down), a heal with no partition in force. A no-op in a plan is most
    often a mistake in it (a wrong time or name), and it would pass in silence."""
    down: dict[str, tuple[int, bool]] = {}  # actor -> (when it went down, whether the plan took it down)
    up_again: dict[str, int] = {}  # actor -> when it was last restarted
    cut: list[int] = []  # when each partition in force began
    events = sorted(enumerate([*((None, f) for f in existing), *placed]), key=lambda p: (p[1][1].at_us, p[0]))
    for _, (where, fault) in events:
        at, kind = fault.at_us, fault.kind
        mine = where is not None
        if kind == "crash":
            name = fault.target[0]
            if name in down and down[name][1] and mine:
                raise ConfigError(f"{where}: {name} is already down (the plan crashed it at {down[name][0] / 1e6:g} "
                                  "s), so the crash would do nothing")
            down.setdefault(name, (at, mine))
        elif kind == "restart":
            name = fault.target[0]
            if name not in down and mine:
                why = f"it is up again since its restart at {up_again[name] / 1e6:g} s" if name in up_again else \
                    f"nothing crashed {name} before then"
                raise ConfigError(f"{where}: restart of {name}: {why}, so the restart would do nothing")
            down.pop(name, None)
            up_again[name] = at
        elif kind == "partition":
            cut.append(at)
        elif kind == "heal":
            if not cut and mine:
                raise ConfigError(f"{where}: no partition is in force then, so the heal would do nothing")
            cut.clear()


def workload_horizon_us(jobs, total_units: int = 0) -> int:
    """The workload's horizon: the last arrival plus the longest task (the default end of the failure
    processes, and where the fault search draws faults). Given the cluster's ``total_units`` (of its first
    resource), no earlier than the first arrival plus all the work spread over them plus the longest task:
    the backlog of a workload that asks for more than the cluster has."""
    last, first, longest, work = 0, None, 0, 0
    for job in jobs:
        end = max(job.durations_us, default=0)
        last = max(last, job.arrival_us + end)
        if total_units:
            first = job.arrival_us if first is None else min(first, job.arrival_us)
            longest = max(longest, end)
            work += sum(job.durations_us) * (job.demand[0] if job.demand else 1)
    if first is None:
        return last
    return max(last, first + work // total_units + longest)


# The time a run is given after its last fault, whether its faults healed or not. The fault search's
# liveness phase gives it after its heal (tools/strategies: every job must be done by then), and a run
# whose faults never heal is stopped this long after its last fault event (``run_horizon_us``): the
# grace, plus twice the workload's horizon.
# - 60 s for a message stalled at the heal to be delivered, or its connection to break and both ends be
#   told (conn_timeout_s: the last retransmission is made by then);
# - 60 s for a retry backing off at its cap (common.recovery.RETRY_CAP_US) to be made;
# - three minutes more for failure detection and takeovers to move the work of what died for good
#   (the papers' own periods and timeouts are seconds);
# - the workload's horizon twice: every job may have to run again from its start, and queue behind others.
LIVENESS_GRACE_US = 300 * 10**6


def liveness_bound_us(horizon_us: int) -> int:
    """How long after its last fault (the fault search: its heal) every job of a run must be done."""
    return LIVENESS_GRACE_US + 2 * horizon_us


def run_horizon_us(workload_us: int, faults) -> int:
    """Where a run with a fault still in force is stopped (``fabric.kernel.Fabric.horizon_us``): the
    liveness bound after its last fault event, or after the workload's horizon ``workload_us`` if later."""
    last = max((f.at_us for f in faults), default=0)
    return max(last, workload_us) + liveness_bound_us(workload_us)
