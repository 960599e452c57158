"""The schedulers, by name: ``fedemu run``, ``compare`` and the tests enumerate this, not lists of their own.

Adding a scheduler: write its package (``actors/<name>/``, with a ``plugin.Scheduler`` value in its
``plugin`` module) and add it to the two lines below (docs/extending.md walks through Sparrow's).
"""

from __future__ import annotations

import importlib
import pkgutil

from fedemu.fabric import messages
from fedemu.fabric.errors import unknown_name
from fedemu.fabric.log import Event

from .common.events import COMMON_EVENTS
from .eagle.plugin import EAGLE
from .hawk.plugin import HAWK
from .megha.plugin import CENTRALIZED, MEGHA
from .pigeon.plugin import PIGEON, PIGEONC
from .plugin import WORKER, Scheduler
from .sparrow.plugin import SPARROW

SCHEDULERS: dict[str, Scheduler] = {s.name: s for s in (CENTRALIZED, MEGHA, PIGEON, PIGEONC, SPARROW, HAWK, EAGLE)}
DEFAULT = MEGHA.name  # the scheduler a run has unless it sets one


def get(name: str) -> Scheduler:
    """The scheduler called ``name``; an unknown name is a ConfigError listing the known ones."""
    try:
        return SCHEDULERS[name]
    except (KeyError, TypeError):
        raise unknown_name("scheduler", name, tuple(SCHEDULERS)) from None


def import_actors() -> None:
    """Import every module of the actors' packages. The plug-ins import their actors when a run builds them, so a
    process holds only its own scheduler's message kinds; reading a journal of another needs them all
    (``fabric.messages`` calls this the first time it meets a kind it does not know)."""
    package = importlib.import_module(__package__)
    for found in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        importlib.import_module(found.name)


messages.import_kinds = import_actors


def _first_of_each(items, key) -> tuple:
    seen, out = set(), []
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            out.append(item)
    return tuple(out)


def roles() -> dict[str, tuple[str, ...]]:
    """Every role fault plans can name -> the name prefixes of its actors: the workers, each scheduler's
    roles, and ``manager`` (every role that is not a worker)."""
    declared = _first_of_each([WORKER, *(r for s in SCHEDULERS.values() for r in s.roles)], lambda r: r.name)
    out = {r.name: r.prefixes for r in declared}
    out["manager"] = tuple(dict.fromkeys(p for r in declared if r.manager for p in r.prefixes))
    return out


def events() -> tuple[Event, ...]:
    """Every protocol event a run may log: the common ones, then each scheduler's."""
    return _first_of_each([*COMMON_EVENTS, *(e for s in SCHEDULERS.values() for e in s.events)], lambda e: e.name)


def paths() -> tuple[str, ...]:
    """The counters of every scheduler's recovery paths, in the order the schedulers list them."""
    return tuple(dict.fromkeys(c for s in SCHEDULERS.values() for c in s.paths))


def retired() -> dict[str, str]:
    """Every scheduler's retired keys, each with why it went."""
    return {key: why for s in SCHEDULERS.values() for key, why in s.retired}


def panels() -> tuple:
    """Every scheduler's live-view panels, each once (schedulers that share actors share panels)."""
    return _first_of_each([p for s in SCHEDULERS.values() for p in s.panels], lambda p: p)
