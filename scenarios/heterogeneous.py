"""The heterogeneous scenario: Megha over mixed machines, per-job demands and alpha, gang scheduling on.

Three machine types (``machine_types``): half are 4 cpu x 16 GB at speed 1, 30% 8 x 32 at speed 1.5 and
20% 16 x 64 at speed 2.5, shuffled into every partition. Each job draws its demand per task from
``demands`` (60% 1 cpu x 2 GB, 30% 2 x 4, 10% 4 x 8) and its parallel fraction alpha from U(0.3, 0.9)
(TEBAS's Amdahl run time: duration x ((1 - alpha) + alpha / k_n)). Every job is a gang (``gang``): its
tasks are held on every LM involved and start together or not at all (actors/megha/gang.py); the GMs place
with the ``tebas`` policy (highest Fitness, then RemainCap). 600 Poisson jobs of 8 tasks (1 s mean) offered
at 90% of the cpus as slots (one cpu per task; the demands and speeds make the real load differ), no task
constraints, 3 GMs x 4 LMs x 25 workers, 0.5 ms links.

Run it with ``fedemu run heterogeneous`` (``--set scheduler=centralized``, ``--set policy=random`` ...).
"""

from fedemu.scenarios.federation import PARAMS as _BASE
from fedemu.scenarios.federation import build, declare  # noqa: F401  (the scenario's build and keys)

PARAMS = {**_BASE, "machine_types": "4x16@1.0:50,8x32@1.5:30,16x64@2.5:20", "demands": "1x2:60,2x4:30,4x8:10",
          "alpha": "U(0.3,0.9)", "gang": True, "policy": "tebas", "jobs": 600, "fanout": 8, "load": 0.9,
          "constraints": False}
