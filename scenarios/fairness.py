"""The fairness scenario (Megha 2022, IV-E, Figs. 10 and 11): Megha with 4 users
whose queues have 10%, 25%, 15% and 50% of the datacenter, mapped as in the paper (user 0 -> gm-0, users
1 and 2 -> gm-1, user 3 -> gm-2), on a small datacenter so that the users contend.

- Workload: the first ``jobs`` jobs of the Google-derived ``GOOG_subtrace.tr`` (the papers' data beside the
  clone, docs/data.md), users assigned round robin. Without that file the scenario is refused (it never
  changes workload silently); ``STAND_IN`` (a Poisson stand-in of long tasks, mean 300 s, at load 1.5) is
  what the refusal offers, given as ``--set`` keys.
- Datacenter: 2 LMs of 3 partitions; ``--set workers=198``, ``498`` or ``1500`` are the paper's 200, 500
  and 1,500 (a multiple of 6 workers). The default is the smallest.
- ``--set fairness=off`` runs the same user queues without Algorithm 2.

Run ``fedemu run fairness --set workers=498`` (the summary's ``fairness`` block, ``share_over_time.png``
with ``--out``); docs/fairness.md has the table for the three sizes.
"""

from pathlib import Path

from fedemu.fabric.errors import ConfigError
from fedemu.scenarios.federation import PARAMS as _BASE
from fedemu.scenarios.federation import build as _build
from fedemu.scenarios.federation import declare  # noqa: F401  (the scenario's keys)

TRACE = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "meghanat_megha_simulator" / "traces" \
    / "input" / "GOOG_subtrace.tr"
_SHAPE = {"scheduler": "megha", "gms": 3, "lms": 2, "workers": 198, "users": 4, "shares": "10,25,15,50",
          "constraints": False}
PARAMS = {**_BASE, **_SHAPE, "workload": "trace", "trace": str(TRACE), "jobs": 150}
STAND_IN = {"workload": "poisson", "jobs": 300, "fanout": 30, "task_s": 300.0, "load": 1.5}  # long tasks, oversubscribed


def build(fabric, params):
    """The federation's build; the paper's trace, when it is the workload, must be there."""
    if params["workload"] == "trace" and params["trace"] == str(TRACE) and not TRACE.is_file():
        sets = " ".join(f"--set {k}={v:g}" if isinstance(v, float) else f"--set {k}={v}" for k, v in STAND_IN.items())
        raise ConfigError(f"the fairness scenario replays the first jobs of GOOG_subtrace.tr, the papers' data, which "
                          f"is absent here ({TRACE}; see docs/data.md); a Poisson stand-in of long tasks: fedemu run "
                          f"fairness {sets}")
    return _build(fabric, params)
