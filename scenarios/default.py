"""The default scenario: Megha with 3 GMs x 4 LMs x 25 workers (300 slots), 500 Poisson jobs of
10 tasks (1 s mean) at 80% load, constraints from the stand-in table, 0.5 ms links."""

from fedemu.scenarios.federation import PARAMS as _BASE
from fedemu.scenarios.federation import build, declare  # noqa: F401  (the scenario's build and keys)

PARAMS = dict(_BASE)
