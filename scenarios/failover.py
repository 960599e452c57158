"""The failover scenario: the default federation (300 jobs at 90% load) under a fault plan that takes the
chosen scheduler through its recovery protocols, one after another, while jobs keep arriving (each
plug-in's ``tour``, then five workers failing):

- Megha and centralized (standby LMs on): at 2 s the active ``lm-0`` fails for good (its standby takes
  over), at 3 s ``gm-0`` crashes and restarts 1 s later (stateless: it rebuilds from the LMs' snapshots),
  at 4 s ``gm-0`` is cut off from ``lm-0-standby`` (the new active) for 2 s.
- Pigeon and PigeonC: at 2 s ``master-0`` fails for good (its second master takes over), at 3 s
  ``dist-0`` crashes and restarts 1 s later, at 4 s ``dist-1`` is cut off from ``master-1`` for 2 s.
- Sparrow: at 2 s ``sparrow-0`` crashes and restarts 1 s later, at 4 s ``sparrow-0`` is cut off from
  5 random workers for 2 s.
- Every scheduler: at 5 s five random workers fail for 2 s.

Run it with ``fedemu run failover`` (``--set scheduler=pigeon`` and so on); ``--faults PLAN`` adds more.
"""

from fedemu.actors import registry
from fedemu.scenarios import fault_plan
from fedemu.scenarios.federation import PARAMS as _BASE
from fedemu.scenarios.federation import build as _build
from fedemu.scenarios.federation import declare  # noqa: F401  (the scenario's keys)

PARAMS = {**_BASE, "jobs": 300, "load": 0.9, "lm_standby": True}
# what a fault search (``fedemu fuzz failover``) keeps at these values: the shape this scenario's own plan
# names actors of (a second distributor, five workers, the standby LMs), while it draws the workload
SEARCH_KEEPS = ("gms", "lms", "workers_per_partition", "capacity", "distributors", "masters", "schedulers",
                "lm_standby")


def _crash(at_s, target, for_s=None):
    return {"at_s": at_s, "kind": "crash", "target": target, **({"for_s": for_s} if for_s else {})}


WORKERS = {"role": "worker", "count": 5}


def plan(scheduler: str) -> fault_plan.Plan:
    """The scenario's fault plan for ``scheduler``: its plug-in's tour, then five workers failing."""
    tables = [dict(table) for table in registry.get(scheduler).tour] + [_crash(5.0, WORKERS, 2.0)]
    return fault_plan.from_tables(tables, f"scenario failover ({scheduler})")


def build(fabric, params):
    run = _build(fabric, params)
    fabric.add_faults(plan(params["scheduler"]).faults(fabric.names, fabric.seed))
    return run
