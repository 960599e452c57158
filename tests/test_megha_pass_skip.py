"""A GM's pass skipped when nothing was gained or queued since a pass that refused every signature
(``GlobalManager._pass``): the runs are the same as with every pass asked in full, counters included."""

from __future__ import annotations

import pytest

from fedemu.actors.megha.global_manager import GlobalManager
from fedemu.policies.fair_queue import FairQueue
from fedemu.tools.run.runner import execute

SMALL = {"jobs": 150, "gms": 3, "lms": 2, "workers_per_partition": 4, "load": 0.95, "heartbeat_s": 1.0,
         "cost_model": "zero", "constraints": True}  # constraints: a pass can refuse every signature with workers free


def outcome(overrides: dict) -> tuple:
    result = execute("default", seed=3, overrides={**SMALL, **overrides})
    summary = {k: v for k, v in result.summary.items() if k != "wall_s"}
    return summary, result.digest


@pytest.mark.parametrize("knobs", [{}, {"gm_queue": "fewest-remaining"}, {"failed_launch": "front"},
                                   {"spill_order": "fixed"}, {"cost_model": "prototype"},
                                   {"constraint_table": "megha-2023"}])
def test_skipped_passes_change_nothing(monkeypatch, knobs):
    skipped = []
    keys = FairQueue.keys

    def counting_keys(self, cls):  # the skip asks the queue for its keys: count the skips
        skipped.append(cls)
        return keys(self, cls)

    monkeypatch.setattr(FairQueue, "keys", counting_keys)
    fast = outcome(knobs)
    assert skipped, "no pass was skipped: the case does not test the skip"
    # every pass asked in full: a GM that never remembers a refusing pass
    monkeypatch.setattr(GlobalManager, "fruitless", property(lambda self: None, lambda self, value: None),
                        raising=False)
    assert outcome(knobs) == fast
