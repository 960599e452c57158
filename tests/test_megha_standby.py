"""Megha's active-standby LMs (``lm_standby``): takeover of a crashed active, an old active rejoining as
the standby, a partition between the two replicas (no takeover: the active is alive), both replicas lost
and restarted at once (never two actives whose launches run), and no change without faults but one join
per LM. Every run must end with every invariant "ok"."""

from __future__ import annotations

from fedemu.actors.megha.worker import MeghaWorker
from fedemu.tools.run.runner import execute

from test_megha_faults import counters, crash, run

STANDBY = {"lm_standby": True, "load": 0.95}


def replicas(r, c=0):
    """(active, standby) actors of LM ``c`` (either may be None: dead)."""
    f = r.fabric
    return f.actor(f.addr(f"lm-{c}")), f.actor(f.addr(f"lm-{c}-standby"))


def gms(r):
    f = r.fabric
    return [f.actor(f.addr(n)) for n in f.names if n.startswith("gm-")]


def test_without_faults_a_standby_costs_one_join_per_lm():
    """The standby is fed nothing: each one joins its active once at the start (``Join``, ``Joined``), which
    opens the connection whose break would tell it of the active's crash; the run is otherwise the same."""
    base = {"jobs": 40, "load": 0.95}
    plain = execute("default", overrides=base)
    standby = execute("default", overrides={**base, **STANDBY})
    p, s = plain.summary, standby.summary
    assert s["delay_s"] == p["delay_s"] and s["counters"] == p["counters"]
    lms = sum(name.endswith("-standby") for name in standby.fabric.names)
    assert s["messages"] == p["messages"] + 2 * lms and set(s["invariants"].values()) == {"ok"}
    kinds = standby.fabric.statistics().sent_by_kind
    assert kinds["megha.join"] == kinds["megha.joined"] == lms


def test_the_standby_takes_over_a_crashed_active_lm_with_launches_in_flight():
    r = run([crash("lm-0", 1.0)], **STANDBY)
    old, new = replicas(r)
    assert old is None and new.active and new.epoch == 1 and not new.recovery.rebuilding
    assert counters(r)["failovers"] == 1 and counters(r)["launches_retried"] >= 1
    assert all(gm.lm_ids[0] == new.id for gm in gms(r))
    rec = r.summary["faults"]["recovery_s"]
    assert rec["count"] == 1 and rec["max"] <= 0.1  # the crash notice at once, then one round of Takeovers


def test_a_restarted_old_active_rejoins_as_the_standby():
    r = run([crash("lm-0", 1.0, 4.0)], **STANDBY)
    old, new = replicas(r)
    assert old.incarnation == 1 and not old.active and old.standby.joined and old.epoch == new.epoch == 1
    assert new.active and counters(r)["failovers"] == 1
    assert not old.tasks and not old.done  # a standby holds nothing: it rebuilds from the workers if it takes over


def test_a_partition_between_active_and_standby_is_no_takeover():
    """A cut is no evidence that the active failed (it is alive behind it): the standby takes over only on
    a notice that it crashed or is down."""
    r = run([{"at_s": 1.0, "kind": "partition", "sides": ["lm-0", "lm-0-standby"], "for_s": 90.0}], **STANDBY)
    c = counters(r)
    assert "failovers" not in c and "lm_step_downs" not in c
    old, new = replicas(r)
    assert old.active and not new.active and new.standby.joined
    acting = old
    workers = [r.fabric.actor(w) for w in acting.worker_ids]
    assert all(w.lm_id == acting.id and w.epoch == acting.epoch for w in workers)


def test_both_replicas_lost_and_restarted_one_takes_over_when_the_other_does_not_answer():
    r = run([crash("lm-0", 1.0, 2.0), crash("lm-0-standby", 1.0, 2.5)], **STANDBY)
    old, new = replicas(r)
    assert [old.active, new.active].count(True) == 1 and counters(r)["failovers"] >= 1


def test_a_gm_restarted_after_a_failover_follows_the_new_active():
    r = run([crash("lm-0", 1.0), crash("gm-1", 6.0, 0.5)], **STANDBY)
    _, new = replicas(r)
    assert all(gm.lm_ids[0] == new.id for gm in gms(r)) and counters(r)["gm_rebuilds"] == 1


def test_both_replicas_restarted_at_once_both_take_over_and_the_workers_fence_the_older(monkeypatch):
    """Both replicas restart at the same instant: each takes the other's join for the sign that nobody
    acts, and both take over, in epochs of different parity. The workers follow the later epoch and refuse
    the other's launches, and the older active steps down: every launch a worker ran came from the
    replica it followed then."""
    ran = []
    handle = MeghaWorker.on_RunTask

    def spy(self, msg, src):
        key, following = (msg.job_id, msg.index), self.lm_id
        before = key in self.running
        handle(self, msg, src)
        if not before and key in self.running:
            ran.append((src, following))

    monkeypatch.setattr(MeghaWorker, "on_RunTask", spy)
    monkeypatch.setattr(MeghaWorker, "_fedemu_handlers", {}, raising=False)  # the fabric's handler cache
    r = run([crash("lm-0", 1.0, 0.5), crash("lm-0-standby", 1.0, 0.5)], **{**STANDBY, "jobs": 200})
    c = counters(r)
    assert c["failovers"] == 2 and c["lm_step_downs"] == 1
    old, new = replicas(r)
    assert [old.active, new.active].count(True) == 1
    assert ran and all(src == following for src, following in ran)


def test_a_gm_that_launches_into_an_lm_restarted_as_the_standby_moves_the_work_elsewhere():
    """Issue 45: lm-0 crashes twice at the start while its standby is cut off from every GM. The standby takes
    over and lm-0 restarts as its standby; no GM ever had a connection with lm-0's first life, so no notice
    tells them, and the new active's snapshot is held by the cut. A standby used to drop their launches
    without a word and the GMs waited for ever; it now answers ``NotActive``, and the GMs launch nothing more
    there and queue the overdue launches elsewhere: every job is done long before the cut heals."""
    cut = {"at_s": 0.0, "kind": "partition", "sides": [["lm-0-standby"], ["gm-0", "gm-1", "gm-2"]]}
    r = run([crash("lm-0", 0.0, 0.000001), cut, crash("lm-0", 0.000001, 0.000001), {"at_s": 93.3, "kind": "heal"}],
            **STANDBY, constraints=False)
    old, new = replicas(r)
    assert new.active and not old.active and counters(r)["launches_abandoned"] >= 1
    assert r.summary["virtual_end_s"] < 30 and r.summary["jobs_completed"] == r.summary["jobs"]


def test_a_second_takeover_inside_the_first_rebuilds_backoff_runs_one_chain_of_asks(monkeypatch):
    """Both replicas of lm-0 restart at 1.5 s and both take over; lm-0-standby steps down, then takes over
    again at 1.6 s when lm-0 crashes for good, while w-0 is down (so the rebuild waits). Its first rebuild's
    timer was still pending: it used to drive a second chain of asks (attempt 1 at 2.5 s and at 2.6 s, 2 at
    4.5 s and 4.6 s), which gives the rebuild up a backoff early. Only the last rebuild's timer acts now."""
    from fedemu.actors.megha.lm_recovery import LmRecovery

    asks: dict[str, list] = {}
    rebuild, ask_rebuild = LmRecovery.rebuild, LmRecovery.ask_rebuild

    def spy_rebuild(self, since_us):
        asks.setdefault(self.core.name, []).append([])  # a new chain
        rebuild(self, since_us)

    def spy_ask(self, attempt):
        asks[self.core.name][-1].append((self.core.now, attempt))
        ask_rebuild(self, attempt)

    monkeypatch.setattr(LmRecovery, "rebuild", spy_rebuild)
    monkeypatch.setattr(LmRecovery, "ask_rebuild", spy_ask)
    run([crash("lm-0", 1.0, 0.5), crash("lm-0-standby", 1.0, 0.5), crash("w-0", 1.5, 5.0), crash("lm-0", 1.6)],
        **STANDBY, jobs=60)
    for name, chains in asks.items():
        for chain in chains:
            assert [a for _, a in chain] == list(range(len(chain))), (name, chain)
    assert len(asks["lm-0-standby"]) == 2
    assert asks["lm-0-standby"][-1] == [(1_600_500, 0), (2_600_500, 1), (4_600_500, 2)]
