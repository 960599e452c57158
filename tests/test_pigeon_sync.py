"""The delta sync of Pigeon's second master against a brute-force model: whenever the second master
applies a sync, what it holds is exactly the master's waiting tasks at that sync, whatever syncs were lost
before it. On a connection a sync is lost only when the connection breaks, and the master learns of it
from the fabric's notice (then its next sync is the whole state); syncs sent between the break and the
notice arrive on a new connection, after a gap."""

from __future__ import annotations

import attrs
from hypothesis import given, settings, strategies as st

from fedemu.actors.pigeon.sync import SyncedState, SyncSender, queued_entry


@attrs.define
class Task:
    job_id: int
    index: int
    duration_us: int = 5
    constraints: tuple = ()
    demand: tuple = (1,)
    since_us: int = 0
    distributor: int = 0


class Core:
    """The part of the master role the sync reads (its dispatch's queued tasks), changed the way the role
    changes it."""

    def __init__(self) -> None:
        self.queued: dict = {}
        self.sync = SyncSender()

    def full(self) -> dict:
        return {(t.job_id, t.index): queued_entry(t, cls) for t, cls in self.queued.values()}

    def step(self, op: int, job: int, now: int) -> None:
        key = (job, 0)
        if op == 0 and key not in self.queued:  # a batch arrives, or a lost task is queued again
            self.queued[key] = (Task(job, 0, since_us=now), job % 2)
            self.sync.queued[key] = None
        elif op == 1 and key in self.queued:  # dispatched
            self.queued.pop(key)
            self.sync.queued[key] = None
        elif op == 2 and key in self.queued:  # handed to another distributor
            self.queued[key][0].distributor += 1
            self.sync.queued[key] = None


ops = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.sampled_from(["deliver", "lose", "notice"])),
               max_size=80)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_every_applied_sync_equals_the_masters_whole_state(steps):
    core = Core()
    second = SyncedState(epoch=1)
    broken = False  # a sync was lost with its connection, and the master has not had the notice yet
    for now, (op, job, fate) in enumerate(steps):
        if op < 3:
            core.step(op, job, now)
            continue
        if fate == "notice":
            if broken:
                core.sync.reset, broken = True, False
            continue
        msg = core.sync.message(core.queued, second=7, epoch=1)
        expected = core.full()
        if fate == "lose":
            broken = True
            continue
        seq_before = second.seq
        if not second.apply(msg):
            assert second.seq == seq_before  # a gap changes nothing
        elif second.seq == msg.seq:
            assert second.queued == expected
    if broken:  # the notice comes
        core.sync.reset = True
    msg = core.sync.message(core.queued, second=7, epoch=1)  # one more sync, delivered
    assert second.apply(msg)
    assert second.queued == core.full()


def test_a_new_second_master_gets_the_full_state_and_then_only_changes():
    core = Core()
    for job in range(5):
        core.step(0, job, job)
    first = core.sync.message(core.queued, second=7, epoch=1)
    assert first.base == 0 and len(first.queued) == 5
    core.step(1, 2, 10)
    delta = core.sync.message(core.queued, second=7, epoch=1)
    assert delta.base == first.seq and delta.gone_queued == ((2, 0),) and delta.queued == ()
    other = core.sync.message(core.queued, second=8, epoch=1)  # a new second master: full again
    assert other.base == 0 and len(other.queued) == 4 and other.gone_queued == ()


def test_a_task_queued_and_dispatched_between_two_syncs_is_not_in_them():
    core = Core()
    core.step(0, 0, 0)
    core.sync.message(core.queued, second=7, epoch=1)
    core.step(0, 1, 1)
    core.step(1, 1, 2)  # queued and dispatched before the next sync: the second master never held it
    core.step(1, 0, 3)
    msg = core.sync.message(core.queued, second=7, epoch=1)
    assert msg.queued == () and msg.gone_queued == ((0, 0),)


def test_a_master_without_a_second_keeps_no_changes_and_syncs_the_next_one_in_full():
    core = Core()
    core.sync.message(core.queued, second=7, epoch=1)
    for job in range(5):
        core.step(0, job, job)
    core.sync.forget()  # the group has no second master now
    assert not core.sync.queued and not core.sync.held
    msg = core.sync.message(core.queued, second=7, epoch=1)  # the same member is second again
    assert msg.base == 0 and len(msg.queued) == 5
