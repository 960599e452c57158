"""The fairness scenario (2022 Megha paper, shared/papers file 002, IV-E, Figs. 10 and 11): Megha with 4 users
whose queues have 10%, 25%, 15% and 50% of the datacenter, mapped as in the paper (user 0 -> gm-0, users
1 and 2 -> gm-1, user 3 -> gm-2), on a small datacenter so that the users contend.

- Workload: the first ``jobs`` jobs of the Google-derived ``GOOG_subtrace.tr`` (shared data) when it is
  present, users assigned round robin; else a Poisson stand-in of long tasks (mean 300 s) at load 1.5.
- Datacenter: 2 LMs of 3 partitions; ``--set workers=198``, ``498`` or ``1500`` are the paper's 200, 500
  and 1,500 (a multiple of 6 workers). The default is the smallest.
- ``--set fairness=off`` runs the same user queues without Algorithm 2.

Run ``fedemu run fairness --set workers=498`` (the summary's ``fairness`` block, ``share_over_time.png``
with ``--out``); the README's Fairness section has the table for the three sizes.
"""

from pathlib import Path

from fedemu.scenarios.federation import PARAMS as _BASE
from fedemu.scenarios.federation import build  # noqa: F401  (the scenario is the federation's)
from fedemu.scenarios.federation import declare  # noqa: F401  (the scenario's keys)

TRACE = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "meghanat_megha_simulator" / "traces" \
    / "input" / "GOOG_subtrace.tr"
_SHAPE = {"scheduler": "megha", "gms": 3, "lms": 2, "workers": 198, "users": 4, "shares": "10,25,15,50",
          "constraints": False}
_TRACE = {"workload": "trace", "trace": str(TRACE), "jobs": 150}
_STAND_IN = {"workload": "poisson", "jobs": 300, "fanout": 30, "task_s": 300.0, "load": 1.5}  # long tasks, oversubscribed
PARAMS = {**_BASE, **_SHAPE, **(_TRACE if TRACE.is_file() else _STAND_IN)}
