"""The delta sync of Pigeon's second master against a brute-force model: whenever the second master
applies a sync, what it holds is exactly the master's whole state at that sync, whatever syncs were lost
before it. On a connection a sync is lost only when the connection breaks, and the master learns of it
from the fabric's notice (then its next sync is the whole state); syncs sent between the break and the
notice arrive on a new connection, after a gap."""

from __future__ import annotations

import attrs
from hypothesis import given, settings, strategies as st

from fedemu.actors.pigeon.sync import SyncedState, SyncSender, queued_entry, running_entry

WORKERS = 2


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
    """The parts of the master role the sync reads (its dispatch's queued tasks, what runs where), changed
    the way the role changes them."""

    def __init__(self) -> None:
        self.queued: dict = {}
        self.running = [{} for _ in range(WORKERS)]
        self.sync = SyncSender()

    def full(self) -> tuple:
        q = {(t.job_id, t.index): queued_entry(t, cls) for t, cls in self.queued.values()}
        r = {(local + 1, t.job_id, t.index): running_entry(local, t, cls) for local in range(WORKERS)
             for (t, cls, _, _) in self.running[local].values() if cls >= 0}
        return q, r

    def step(self, op: int, job: int, local: int, now: int) -> None:
        key = (job, 0)
        if op == 0 and key not in self.queued:  # a batch arrives, or a lost task is queued again
            self.queued[key] = (Task(job, 0, since_us=now), job % 2)
            self.sync.queued[key] = None
        elif op == 1 and key in self.queued:  # dispatched
            task, cls = self.queued.pop(key)
            self.sync.queued[key] = None
            self.running[local][key] = (task, cls, 0, 0)
            self.sync.running[(local, *key)] = None
        elif op == 2 and key in self.running[local]:  # ended or lost
            self.running[local].pop(key)
            self.sync.running[(local, *key)] = None
        elif op == 3 and key in self.queued:  # handed to another distributor
            self.queued[key][0].distributor += 1
            self.sync.queued[key] = None
        elif op == 4 and key in self.running[local]:  # an earlier master's copy: not relaunched
            t, _, e, s = self.running[local][key]
            self.running[local][key] = (t, -1, e, s)
            self.sync.running[(local, *key)] = None


ops = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2), st.integers(0, WORKERS - 1),
                         st.sampled_from(["deliver", "lose", "notice"])), max_size=80)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_every_applied_sync_equals_the_masters_whole_state(steps):
    core = Core()
    second = SyncedState(epoch=1)
    broken = False  # a sync was lost with its connection, and the master has not had the notice yet
    for now, (op, job, local, fate) in enumerate(steps):
        if op < 5:
            core.step(op, job, local, now)
            continue
        if fate == "notice":
            if broken:
                core.sync.reset, broken = True, False
            continue
        msg = core.sync.message(core.queued, core.running, second=7, epoch=1)
        expected = core.full()
        if fate == "lose":
            broken = True
            continue
        seq_before = second.seq
        if not second.apply(msg):
            assert second.seq == seq_before  # a gap changes nothing
        elif second.seq == msg.seq:
            assert (second.queued, second.running) == expected
    if broken:  # the notice comes
        core.sync.reset = True
    msg = core.sync.message(core.queued, core.running, second=7, epoch=1)  # one more sync, delivered
    assert second.apply(msg)
    assert (second.queued, second.running) == core.full()


def test_a_new_second_master_gets_the_full_state_and_then_only_changes():
    core = Core()
    for job in range(5):
        core.step(0, job, 0, job)
    first = core.sync.message(core.queued, core.running, second=7, epoch=1)
    assert first.base == 0 and len(first.queued) == 5
    core.step(1, 2, 1, 10)
    delta = core.sync.message(core.queued, core.running, second=7, epoch=1)
    assert delta.base == first.seq and delta.gone_queued == ((2, 0),) and len(delta.running) == 1
    assert delta.queued == ()
    other = core.sync.message(core.queued, core.running, second=8, epoch=1)  # a new second master: full again
    assert other.base == 0 and len(other.queued) == 4 and len(other.running) == 1


def test_a_master_without_a_second_keeps_no_changes_and_syncs_the_next_one_in_full():
    core = Core()
    core.sync.message(core.queued, core.running, second=7, epoch=1)
    for job in range(5):
        core.step(0, job, 0, job)
    core.sync.forget()  # the group has no second master now
    assert not core.sync.queued and not core.sync.running
    msg = core.sync.message(core.queued, core.running, second=7, epoch=1)  # the same member is second again
    assert msg.base == 0 and len(msg.queued) == 5
