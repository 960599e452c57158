"""fedemu: a deterministic emulator of federated datacenter schedulers.

The Python API (docs/api.md): ``fedemu.run``, ``fedemu.compare``, ``fedemu.load`` and ``fedemu.replay``, which
return ``Result``, ``Comparison`` and ``Replay``; bad input raises ``fedemu.ConfigError`` (its message the
line the command prints), a broken invariant ``fedemu.RunViolation``. They are imported when first used, so
``import fedemu`` (and the command's start) stays cheap.

The repository's folders are installed as the subpackages ``fedemu.fabric``, ``fedemu.actors``,
``fedemu.policies``, ``fedemu.scenarios`` and ``fedemu.tools``; ``fedemu.model`` holds the plain
types every layer may import. Imports run one way only:
fabric <- model <- policies <- actors <- scenarios <- tools.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# each public name, and the module that defines it
_PUBLIC = {
    "run": "fedemu.tools.api.api", "compare": "fedemu.tools.api.api", "load": "fedemu.tools.api.api",
    "replay": "fedemu.tools.api.api", "Replay": "fedemu.tools.api.api", "Record": "fedemu.tools.api.api",
    "Result": "fedemu.tools.api.api_result", "Comparison": "fedemu.tools.api.api_comparison",
    "ConfigError": "fedemu.fabric.errors", "FedemuError": "fedemu.fabric.errors",
    "RunViolation": "fedemu.tools.run.runner",
}
__all__ = ["Comparison", "ConfigError", "FedemuError", "Record", "Replay", "Result", "RunViolation", "compare",
           "load", "replay", "run"]  # the keys of _PUBLIC (tests/test_api.py checks)

if TYPE_CHECKING:  # what editors and type checkers see; at run time, __getattr__ imports on first use
    from fedemu.fabric.errors import ConfigError, FedemuError
    from fedemu.tools.api.api import Record, Replay, compare, load, replay, run
    from fedemu.tools.api.api_comparison import Comparison
    from fedemu.tools.api.api_result import Result
    from fedemu.tools.run.runner import RunViolation


def __getattr__(name: str):
    """A public name, imported from its module when first asked for."""
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'fedemu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
