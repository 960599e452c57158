"""Sparrow, Hawk and Eagle schedulers share one read-only view of the cluster and one cache of probe pools
(the plug-ins build them once: a pool follows from the cluster alone). That is safe only while no scheduler
changes the view: after a run with a scheduler crash and restart, every scheduler, the restarted one
included, holds the same view and cache, and the view is still the whole cluster, free."""

from __future__ import annotations

import numpy as np
import pytest

from fedemu.actors.hawk.scheduler import HawkScheduler
from fedemu.actors.sparrow.scheduler import SparrowScheduler
from fedemu.tools.run import runner
from scheduler_helpers import EventPlan as Plan

S = 1_000_000


@pytest.mark.parametrize("scheduler", ["sparrow", "hawk", "eagle"])
def test_one_unchanged_view_and_pool_cache_for_every_scheduler_and_incarnation(scheduler):
    plan = Plan(((S // 2, "crash", f"{scheduler}-0"), (S, "restart", f"{scheduler}-0")))
    result = runner.execute("default", seed=3, overrides={"scheduler": scheduler, "jobs": 30, "schedulers": 2},
                            faults=plan)
    assert set(result.summary["invariants"].values()) == {"ok"}
    fabric = result.fabric
    front_ends = [a for a in map(fabric.actor, range(len(fabric.names)))
                  if isinstance(a, (SparrowScheduler, HawkScheduler))]
    assert len(front_ends) == (2 if scheduler == "sparrow" else 3)  # (a hybrid's long-job scheduler too)
    assert fabric.actor(fabric.addr(f"{scheduler}-0")).incarnation == 1
    view, pools = front_ends[0].view, front_ends[0].pools
    assert pools, "no pool was made: the run placed nothing"
    assert all(s.view is view and s.pools is pools for s in front_ends)
    assert view.n == len(fabric.names) - len(front_ends) - 1  # every node (and the submitter, not a worker)
    assert view.free_count == view.n
    assert np.array_equal(view.free, view.capacity)
