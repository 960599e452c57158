"""The schedulers, by name: ``fedemu run``, ``compare`` and the tests enumerate this, not lists of their own.

Adding a scheduler: write its module (a ``plugin.Scheduler`` value) and add it to the line below.
"""

from __future__ import annotations

from fedemu.fabric.errors import unknown_name

from .megha.plugin import CENTRALIZED, MEGHA
from .pigeon.plugin import PIGEON, PIGEONC
from .plugin import Scheduler
from .sparrow.plugin import SPARROW

SCHEDULERS: dict[str, Scheduler] = {s.name: s for s in (CENTRALIZED, MEGHA, PIGEON, PIGEONC, SPARROW)}


def get(name: str) -> Scheduler:
    """The scheduler called ``name``; an unknown name is a ConfigError listing the known ones."""
    try:
        return SCHEDULERS[name]
    except (KeyError, TypeError):
        raise unknown_name("scheduler", name, tuple(SCHEDULERS)) from None
