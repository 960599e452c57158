"""Cost models: how long a scheduler component is busy handling one message (see ``service``).

A model is a JSON table: ``{"name", "about", "roles": {ROLE: {"messages": {KIND: us, "*": us},
"units": {UNIT: us}, "source": text}}}``. An actor class that is a single server names its ``COST_ROLE``
(``gm``, ``lm``, ``master``, ``distributor``, ``sparrow``) and the units its handlers charge
(``COST_UNITS``); an actor whose class has no role (workers, the submitter) takes no time. Handling a
message of kind KIND (its class name) costs ``messages[KIND]`` (else ``messages["*"]``) plus, for every
unit the handler charged with ``Actor.charge(unit, n)``, n times ``units[unit]``. Costs are given in
microseconds (fractions allowed) and summed as integer nanoseconds, then rounded to whole microseconds,
so a service time never depends on float summation order.

``zero`` is no model at all: the fabric then runs exactly as without service times (same code path,
same journal). Named models are the JSON files in ``actors/costs/``; any other value is read as the
path of such a file.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from .errors import ConfigError
from .inputs import read_text

ZERO = "zero"
NS_PER_US = 1000


def _ns(value, where: str) -> int:
    """A cost in microseconds (a finite number >= 0) as integer nanoseconds."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{where} is {value!r}; expected microseconds, a finite number >= 0")
    return int(round(value * NS_PER_US))


class RoleCost:
    """One role's costs in nanoseconds: per message kind (``default`` for the others) and per unit."""

    __slots__ = ("role", "messages", "default", "units", "_by_class")

    def __init__(self, role: str, messages: dict[str, int], units: dict[str, int]) -> None:
        self.role = role
        self.default = messages.get("*", 0)
        self.messages = {k: v for k, v in messages.items() if k != "*"}
        self.units = units
        self._by_class: dict[type, int] = {}

    def fixed_ns(self, cls: type) -> int:
        """The fixed cost of handling a message of class ``cls`` (looked up by name once per class)."""
        ns = self._by_class.get(cls)
        if ns is None:
            ns = self._by_class[cls] = self.messages.get(cls.__name__, self.default)
        return ns

    def unit_ns(self, unit: str) -> int:
        try:
            return self.units[unit]
        except KeyError:
            raise ConfigError(f"cost model role {self.role!r} has no unit {unit!r}; known: "
                              f"{', '.join(sorted(self.units)) or '(none)'}") from None

    def service_us(self, cls: type, charged_ns: int) -> int:
        """Whole microseconds of service: the kind's fixed cost plus the charged units, rounded."""
        return (self.fixed_ns(cls) + charged_ns + NS_PER_US // 2) // NS_PER_US


class CostModel:
    """A named table of role costs; ``for_class(cls)`` is the RoleCost of an actor class or None."""

    def __init__(self, name: str, roles: dict[str, RoleCost], about: str = "") -> None:
        self.name = name
        self.roles = roles
        self.about = about

    def for_class(self, cls: type) -> RoleCost | None:
        role = getattr(cls, "COST_ROLE", None)
        if role is None:
            return None
        cost = self.roles.get(role)
        if cost is None:
            raise ConfigError(f"cost model {self.name!r} has no role {role!r} ({cls.__name__}); its roles: "
                              f"{', '.join(sorted(self.roles)) or '(none)'}")
        missing = [u for u in getattr(cls, "COST_UNITS", ()) if u not in cost.units]
        if missing:
            raise ConfigError(f"cost model {self.name!r}, role {role!r}: no cost for unit(s) {', '.join(missing)} "
                              f"that {cls.__name__} charges")
        return cost


def parse(table, name: str) -> CostModel:
    """Check a model table (a dict as read from JSON) and build it; any fault is a ConfigError naming it."""
    if not isinstance(table, dict) or not isinstance(table.get("roles"), dict):
        raise ConfigError(f"cost model {name!r}: expected a JSON object with a 'roles' object")
    roles = {}
    for role, spec in table["roles"].items():
        where = f"cost model {name!r}, role {role!r}"
        if not isinstance(spec, dict):
            raise ConfigError(f"{where}: expected an object with 'messages' and 'units'")
        odd = sorted(set(spec) - {"messages", "units", "source"})
        if odd:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(odd)}; known: messages, units, source")
        messages, units = spec.get("messages", {}), spec.get("units", {})
        if not isinstance(messages, dict) or not isinstance(units, dict):
            raise ConfigError(f"{where}: 'messages' and 'units' must be objects")
        roles[role] = RoleCost(role, {k: _ns(v, f"{where}, message {k!r}") for k, v in messages.items()},
                               {k: _ns(v, f"{where}, unit {k!r}") for k, v in units.items()})
    return CostModel(str(table.get("name", name)), roles, str(table.get("about", "")))


def load(value, folder: str | os.PathLike) -> CostModel | None:
    """The model ``value`` names: None for ``zero``, a file of ``folder`` by stem, else a JSON file path."""
    text = str(value).strip()
    if text == ZERO:
        return None
    folder = Path(folder)
    known = sorted(p.stem for p in folder.glob("*.json"))
    path = folder / f"{text}.json" if text in known else Path(text)
    if not path.is_file():
        raise ConfigError(f"cost_model {text!r} is neither a known model nor a JSON file; known: "
                          f"{', '.join([ZERO, *known])}, or the path of a model file")
    try:
        table = json.loads(read_text(path, "a cost model JSON file"))
    except ValueError as e:
        raise ConfigError(f"cost_model {str(path)!r}: cannot read it as JSON: {e}") from None
    return parse(table, path.stem)
