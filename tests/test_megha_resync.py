"""A GM asks an LM for its whole state in one chain of asks at a time (``gm_recovery``: resync, refresh).

A chain starts when the GM begins asking (a break, a later epoch, ``view_refresh=full``) and ends when the
state comes; its timer re-asks, backing off, while it lasts. A timer left over from an ended chain must not
re-ask in a later one: that was a double chain (issue 46: a fault-free ``view_refresh=full`` run fired 454
timers of stale chains and sent more state requests than the mode allows). The watch below is observation
only: it counts the chains started and, for each timer that re-asked, whether its own chain was the live one.
"""

from __future__ import annotations

import pytest

from fedemu.actors.megha.global_manager import GlobalManager
from fedemu.actors.megha.gm_recovery import GmRecovery
from fedemu.scenarios import fault_plan
from fedemu.tools.run.runner import execute


class ChainWatch:
    """Counts per GM and LM: chains started, state asks, and asks by a timer whose chain had ended."""

    def __init__(self, monkeypatch) -> None:
        self.chain: dict = {}  # (recovery, lm) -> the number of its live chain
        self.armed: dict = {}  # id(timer message) -> ((recovery, lm), the chain that armed it)
        self.arming: list = []  # the (recovery, lm) arming a timer now
        self.starts = self.asks = self.timer_asks = self.stale = 0
        watch = self

        def starting(orig):
            def wrapper(rec, lm, *args, **kwargs):
                if lm not in rec.resyncing and lm not in rec.rebuilding:
                    watch.starts += 1
                    watch.chain[(id(rec), lm)] = watch.chain.get((id(rec), lm), 0) + 1
                watch.arming.append((id(rec), lm))
                try:
                    return orig(rec, lm, *args, **kwargs)
                finally:
                    watch.arming.pop()
            return wrapper

        def ask_resync(rec, lm, _orig=GmRecovery.ask_resync):
            watch.arming.append((id(rec), lm))
            try:
                return _orig(rec, lm)
            finally:
                watch.arming.pop()

        def ask_state(rec, lm, _orig=GmRecovery.ask_state):
            watch.asks += 1
            return _orig(rec, lm)

        def set_timer(gm, delay_us, msg, _orig=GlobalManager.set_timer):
            if watch.arming:
                key = watch.arming[-1]
                watch.armed[id(msg)] = (key, watch.chain.get(key, 0))
            return _orig(gm, delay_us, msg)

        def due(rec, msg, _orig=GmRecovery.due):
            before = watch.asks
            armed = watch.armed.pop(id(msg), None)
            result = _orig(rec, msg)
            if watch.asks > before and armed is not None:
                watch.timer_asks += 1
                key, chain = armed
                watch.stale += chain != watch.chain.get(key, 0)
            return result

        monkeypatch.setattr(GmRecovery, "resync", starting(GmRecovery.resync))
        monkeypatch.setattr(GmRecovery, "refresh", starting(GmRecovery.refresh))
        monkeypatch.setattr(GmRecovery, "ask_resync", ask_resync)
        monkeypatch.setattr(GmRecovery, "ask_state", ask_state)
        monkeypatch.setattr(GlobalManager, "set_timer", set_timer)
        monkeypatch.setattr(GmRecovery, "due", due)


def _run(plan_tables=(), **overrides):
    plan = fault_plan.from_tables(list(plan_tables), "test plan") if plan_tables else None
    result = execute("default", seed=1, overrides={"jobs": 20, **overrides}, faults=plan)
    assert set(result.summary["invariants"].values()) == {"ok"}
    return result


@pytest.mark.parametrize("jobs", [20, 40])
def test_a_full_view_refresh_asks_each_lm_once_per_chain(monkeypatch, jobs):
    """Fault-free, every state asked for comes well within the retry period: each chain is one ask, and no
    timer re-asks (before the fix: 24 and 72 asks by timers of ended chains)."""
    watch = ChainWatch(monkeypatch)
    result = _run(jobs=jobs, view_refresh="full")
    assert result.summary["counters"]["view_refreshes"] > 0 and watch.starts > 0
    assert (watch.stale, watch.timer_asks) == (0, 0)
    assert watch.asks == watch.starts


def test_a_second_break_inside_the_first_backoff_leaves_one_chain(monkeypatch):
    """An LM crashes twice, the second time before the GM's first re-ask is due (1 s after the first break;
    the restarted LM's state came back in between): the first chain's timer, firing inside the second chain,
    must not re-ask (before the fix it did, each GM once, of the LM still down)."""
    crash = [{"at_s": 1.0, "kind": "crash", "target": "lm-0", "for_s": 0.2},
             {"at_s": 1.9, "kind": "crash", "target": "lm-0", "for_s": 0.2}]
    watch = ChainWatch(monkeypatch)
    result = _run(crash, jobs=40)
    assert result.summary["counters"]["view_resyncs"] >= 2 * 3  # each GM asked in each chain
    assert watch.stale == 0
