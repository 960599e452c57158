"""Megha's active-standby LMs (``lm_standby``): takeover of a crashed active, an old active rejoining as
the standby, a partition between the two replicas (never two actives whose launches run), both replicas
lost, and no change at all without faults. Every run must end with every invariant "ok"."""

from __future__ import annotations

from fedemu.actors.megha.worker import MeghaWorker
from fedemu.tools.runner import execute

from test_megha_faults import counters, crash, run

STANDBY = {"lm_standby": True, "load": 0.95}


def replicas(r, c=0):
    """(active, standby) actors of LM ``c`` (either may be None: dead)."""
    f = r.fabric
    return f.actor(f.addr(f"lm-{c}")), f.actor(f.addr(f"lm-{c}-standby"))


def gms(r):
    f = r.fabric
    return [f.actor(f.addr(n)) for n in f.names if n.startswith("gm-")]


def test_without_faults_a_standby_changes_nothing_but_messages():
    """(With no service times: under a cost model the active's beats occupy it a little.)"""
    base = {"jobs": 40, "load": 0.95, "cost_model": "zero"}
    plain = execute("default", overrides=base).summary
    standby = execute("default", overrides={**base, **STANDBY}).summary
    assert standby["delay_s"] == plain["delay_s"] and standby["counters"] == plain["counters"]
    assert standby["messages"] > plain["messages"] and set(standby["invariants"].values()) == {"ok"}


def test_the_standby_takes_over_a_crashed_active_lm_with_launches_in_flight():
    r = run([crash("lm-0", 1.0)], **STANDBY)
    old, new = replicas(r)
    assert old is None and new.active and new.epoch == 1 and not new.rebuilding
    assert counters(r)["failovers"] == 1 and counters(r)["launches_retried"] >= 1
    assert all(gm.lm_ids[0] == new.id for gm in gms(r))
    rec = r.summary["faults"]["recovery_s"]
    assert rec["count"] == 1 and 2.0 <= rec["max"] <= 4.0  # a beat period late, then a ping unanswered


def test_a_restarted_old_active_rejoins_as_the_standby():
    r = run([crash("lm-0", 1.0, 4.0)], **STANDBY)
    old, new = replicas(r)
    assert old.incarnation == 1 and not old.active and old.standby.joined and old.epoch == new.epoch == 1
    assert new.active and counters(r)["failovers"] == 1
    assert old.done == new.done  # the done tasks: from the join, then from the workers' reports to both


def test_a_partition_between_active_and_standby_never_gives_two_acting_lms():
    r = run([{"at_s": 1.0, "kind": "partition", "sides": ["lm-0", "lm-0-standby"], "for_s": 6.0}], **STANDBY)
    c = counters(r)
    assert c["failovers"] >= 1 and c["lm_step_downs"] >= 1
    old, new = replicas(r)
    assert [old.active, new.active].count(True) == 1
    acting = old if old.active else new
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


def test_workers_fence_the_launches_of_an_old_active_cut_off_from_its_standby_and_the_gms_follow(monkeypatch):
    """The standby, cut off from the active and the GMs but not the workers, takes over (the workers'
    task ends reach it); the GMs still send to the old active, whose launches the workers refuse: every
    launch a worker ran came from the replica it followed then."""
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
    r = run([{"at_s": 1.0, "kind": "partition", "sides": [["lm-0-standby"], ["lm-0", "gm-0", "gm-1"]],
              "for_s": 6.0}], **{**STANDBY, "jobs": 200})  # jobs still arrive after the takeover
    c = counters(r)
    assert c["failovers"] >= 1 and c["launches_fenced"] >= 1 and c["lm_step_downs"] >= 1
    old, new = replicas(r)
    assert [old.active, new.active].count(True) == 1
    assert ran and all(src == following for src, following in ran)
