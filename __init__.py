"""fedemu: a deterministic emulator of federated datacenter schedulers.

The repository's folders are installed as the subpackages ``fedemu.fabric``, ``fedemu.actors``,
``fedemu.policies``, ``fedemu.scenarios`` and ``fedemu.tools``; ``fedemu.model`` holds the plain
types every layer may import. Imports run one way only:
fabric <- model <- policies <- actors <- scenarios <- tools.
"""
