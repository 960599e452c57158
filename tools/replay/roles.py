"""Naming actors by name or by role, for the filters of diagrams and traces.

A role is one a fault plan may name (``scenarios.fault_plan``: gm, lm, worker, master, dist, sparrow,
manager), matched against the recorded actor names only, so a journal needs no scheduler code to be read.
An actor of no role is grouped under its name without numbers (``submitter``, ``lm-standby``).
"""

from __future__ import annotations

import re

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.replay import name_ranges
from fedemu.scenarios import fault_plan

UMBRELLA = ("manager",)  # roles that gather other roles: never an actor's own group


def group_of(name: str) -> str:
    """The role of actor ``name`` (the first role that claims it), else its name without numbers."""
    for role in fault_plan.ROLES:
        if role not in UMBRELLA and fault_plan.members([name], role):
            return role
    return re.sub(r"-\d+(?=-|$)", "", name) or name


def select(names: list[str], spec: str) -> tuple[frozenset[int], list[str]]:
    """The actor indices ``spec`` names (comma-separated actor names or roles; ``outside`` is the
    scenario's injected messages, index -1) and the items as given; an item that is neither an actor
    nor a role with actors in this run is a ConfigError listing both."""
    items = [item.strip() for item in spec.split(",") if item.strip()]
    if not items:
        raise ConfigError(f"--actor {spec!r}: expected comma-separated actor names or roles")
    index = {name: i for i, name in enumerate(names)}
    chosen: set[int] = set()
    for item in items:
        if item in index:
            chosen.add(index[item])
        elif item == "outside":
            chosen.add(-1)
        elif item in fault_plan.ROLES and fault_plan.members(names, item):
            chosen.update(index[n] for n in fault_plan.members(names, item))
        else:
            roles = [r for r in fault_plan.ROLES if fault_plan.members(names, r)]
            raise ConfigError(f"--actor: {item!r} is neither an actor nor a role of this run; roles: "
                              f"{', '.join(roles) or '(none)'}; actors: {name_ranges(names)}")
    return frozenset(chosen), items
