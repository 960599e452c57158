"""What a Megha LM does when a worker or the LM itself fails: a component its ``LocalManager`` holds (``recovery``).

Our reading of the 2022 paper's high availability (section IV), with our timers where it gives none:

- **Overdue tasks.** Each task launched is checked at the first heartbeat tick after it is overdue by
  ``worker_grace_s`` (the check rides on the LM's heartbeat timer: no timer of its own; ``Overdue``).
- **Worker failure** without per-worker heartbeats (their cost: one message per busy worker per period,
  5.6M messages on the yh1-1k bench at 10 s): at its heartbeat tick the LM probes the worker of any
  task overdue; no answer after ``worker_probe_retries`` probes of ``worker_probe_timeout_s`` marks the
  worker down (its capacity leaves the GMs' views through the deltas). A worker's answer is reconciled
  with the LM's record: tasks it finished are completed, tasks it does not run (a launch lost on the way,
  or a restart) are relaunched, tasks it runs that the LM did not know are counted against its capacity.
- **A restarted worker** registers; the LM relaunches every task that ran on it (the paper's rule,
  ``tasks_relaunched``). A worker still down after ``worker_down_timeout_s`` has its tasks handed back
  to their GMs for rescheduling (``TaskLost``; our extension, not in the papers) once its launches can no
  longer arrive: a notice said it crashed or refuses, or this LM's connection to it broke (a cut past
  ``conn_timeout_s``). A worker behind a shorter cut is waited for: the launches held on the connection
  would run there after the cut, besides the GM's new launch elsewhere. After the hand-back it is asked once
  more what it runs: a cut that breaks that ask's connection has it sent again after a backoff (the worker
  may be alive behind the cut), for as long as the cut lasts; a worker that crashed registers itself when
  it restarts, so a notice that it crashed or is down ends the asking (one that died for good costs nothing).
- **A restarted LM** has lost its memory: it asks every worker what it runs and has finished before it
  validates anything (messages meanwhile wait), then sends every GM its whole state. A standby that takes
  over rebuilds the same way (``standby``).

Its timers are the LM's ``LmTimer`` (what, key, nonce): "probe" and "down" (key: the worker), "rebuild" (whose nonce is
the ask's attempt; a rebuild over drops it, and so does a later rebuild: only the timer its last ask set, due
when it arrives, acts, as the LM's heartbeat tick does).
"""

from __future__ import annotations

import heapq

from fedemu.fabric.log import emit
from fedemu.actors.megha.change_log import NO_CAUSE

from ..common.events import RELAUNCH
from ..common.protocol import RunTask
from ..common.recovery import Retries, backoff
from .messages import LmTimer, Probe, Registered, TaskLost, Takeover, WorkerStatus


class Overdue:
    """Tasks to check once overdue, bucketed by the heartbeat tick that checks them (the LM's own timer):
    each entry is (seq, key), and a task relaunched or finished since has another seq and is skipped."""

    __slots__ = ("due", "due_at")

    def __init__(self) -> None:
        self.due: dict[int, list] = {}  # tick time -> [(seq, key)] of tasks overdue by then
        self.due_at: list[int] = []  # the tick times of ``due``, a heap

    def add(self, at: int, seq: int, key) -> None:
        bucket = self.due.get(at)
        if bucket is None:
            bucket = self.due[at] = []
            heapq.heappush(self.due_at, at)
        bucket.append((seq, key))

    def pop_due(self, now: int):
        """The (seq, key) entries due by ``now``, earliest tick first."""
        due, due_at = self.due, self.due_at
        while due_at and due_at[0] <= now:
            yield from due.pop(heapq.heappop(due_at))

    def next_at(self) -> int | None:
        return self.due_at[0] if self.due_at else None

    def clear(self) -> None:
        self.due.clear()
        self.due_at.clear()


class LmRecovery:
    """The LM's failure handling (above). The LM calls it where a launch starts (``track``, ``launched``),
    a task ends on a down worker (``heard_finish``), a launch is repeated for an overdue task (``suspect``),
    at each heartbeat tick (``check_overdue``), and while it rebuilds (``hold``)."""

    def __init__(self, core) -> None:
        self.core = core
        self.overdue = Overdue()
        self.probing: dict[int, list] = {}  # worker -> [probes sent, nonce]
        self.down: dict[int, int] = {}  # worker -> nonce of its down period
        self.hand_back_at: dict[int, int] = {}  # down worker -> when its tasks go back (the timer is pending)
        self.asking: set[int] = set()  # down workers asked again after the hand-back, until they answer
        self.severed: set[int] = set()  # workers this LM's launches can no longer reach (a notice), until heard
        self.awaiting_cut: set[int] = set()  # down workers whose hand-back waits for such a notice
        self.worker_inc = [0] * len(core.specs)  # each worker's incarnation as last heard
        self.rebuilding: set[int] = set()  # workers a restarted LM still waits for
        self.held: list = []  # messages that arrived while rebuilding
        self.started_us = 0
        self.rebuild_at = -1  # when the one rebuild timer wanted is due (an earlier rebuild's is stale)
        self.asks: Retries | None = None

    def start(self) -> None:
        """At the LM's start: the asks a down worker owes an answer to are resent after a cut."""
        lm = self.core
        self.asks = lm.recover(Retries(lm, "down", lm.faults.down_timeout_us, self._reask, self._asked))

    def forget(self) -> None:
        """A takeover or step-down: what only an active holds goes."""
        self.overdue.clear()
        self.probing.clear()
        self.down.clear()
        self.hand_back_at.clear()
        self.asking.clear()
        self.severed.clear()
        self.awaiting_cut.clear()
        self.rebuilding = set()
        self.held = []

    # ---- overdue tasks --------------------------------------------------------------------
    def track(self, key, task) -> None:
        """Check the task at the first tick after it is overdue."""
        lm = self.core
        task.seq = lm.number()
        period = lm.heartbeat_us
        at = ((task.end_us + lm.faults.grace_us - 1) // period + 1) * period
        self.overdue.add(at, task.seq, key)
        lm.tick_by(at)

    def check_overdue(self) -> None:
        """At a heartbeat tick: probe the workers of the tasks overdue by now."""
        lm = self.core
        tasks = lm.tasks
        ask = set()
        for seq, key in self.overdue.pop_due(lm.now):
            task = tasks.get(key)
            if task is not None and task.seq == seq and task.worker not in self.down \
                    and task.worker not in self.probing:
                ask.add(task.worker)
        for w in sorted(ask):
            self._probe(w, 0)

    def next_check(self) -> int | None:
        """When the next overdue check is due (None: nothing tracked)."""
        return self.overdue.next_at()

    def suspect(self, w: int) -> None:
        """A launch asked again for a task overdue on worker ``w``: its end (or its launch) was lost: probe."""
        if w not in self.down and w not in self.probing:
            self._probe(w, 0)

    def heard_finish(self, w: int) -> None:
        """Worker ``w`` reported a task's end: if it was taken for down, find out what it runs."""
        if w in self.down:
            self._probe(w, 0)

    def launched(self, w: int) -> None:
        """A launch went to worker ``w`` on a new connection: it may yet arrive."""
        if self.severed:
            self.severed.discard(w)

    # ---- worker failure ----------------------------------------------------------------
    def _probe(self, w: int, sent: int) -> None:
        lm = self.core
        nonce = lm.number()
        self.probing[w] = [sent + 1, nonce]
        self._ask(w)
        lm.set_timer(lm.faults.probe_timeout_us, LmTimer("probe", w, nonce))

    def _ask(self, w: int) -> None:
        """Probe worker ``w`` for what this LM records there; an active replica names its epoch, which the
        worker follows if it missed the takeover (no answer to ``Takeover`` before the rebuild gave up)."""
        lm = self.core
        epoch = lm.epoch if lm.standby is not None and lm.active else 0
        lm.send(lm.worker_ids[w], Probe(tuple(sorted(lm.execs[w])), False, epoch))

    def due(self, msg: LmTimer) -> None:
        """A probe unanswered, a worker down long enough, or a rebuild's ask unanswered."""
        w = msg.key
        if msg.what == "probe":
            probe = self.probing.get(w)
            if probe is None or probe[1] != msg.nonce:
                return
            if probe[0] < self.core.faults.probe_retries:
                self._probe(w, probe[0])
            else:
                self._mark_down(w)
        elif msg.what == "down":
            if self.down.get(w) == msg.nonce:  # hand its tasks back, then ask it once more (``_asked``)
                del self.hand_back_at[w]
                if w in self.severed:
                    self._hand_back(w)
                else:  # its launches may still arrive: wait for the notice that they cannot
                    self.awaiting_cut.add(w)
                self.asking.add(w)  # (an ask held by the cut breaks the connection: the notice)
                self._ask(w)
        elif msg.what == "rebuild" and self.rebuilding and self.core.arrived == self.rebuild_at:
            if msg.nonce < self.core.faults.probe_retries:
                self.ask_rebuild(msg.nonce + 1)
            else:
                for w in sorted(self.rebuilding):
                    self._mark_down(w)
                self._rebuilt()

    def _mark_down(self, w: int) -> None:
        """No answer: the worker's capacity leaves the GMs' views; its tasks wait for it to come back."""
        lm = self.core
        self.probing.pop(w, None)
        nonce = self.down[w] = lm.number()
        lm.recorder.count("workers_marked_down")
        free = lm.free[w]
        for r in range(len(free)):
            free[r] = 0
        lm.changed(w, NO_CAUSE)
        self.hand_back_at[w] = lm.now + lm.faults.down_timeout_us
        lm.set_timer(lm.faults.down_timeout_us, LmTimer("down", w, nonce))

    def _hand_back(self, w: int) -> None:
        """The worker stayed down: its tasks go back to their GMs (our extension, not in the papers)."""
        lm = self.core
        for key in sorted(lm.execs[w]):
            task = lm.tasks.get(key)
            if task is not None and task.worker == w:
                del lm.tasks[key]
                lm.recorder.count("tasks_handed_back")
                lm.send(lm.gm_ids[task.owner], TaskLost(key[0], key[1], lm.lm))
        lm.execs[w].clear()

    def _asked(self, peer: int) -> list:
        """The ask a down worker still owes an answer to (``Retries``): a cut that broke the probe's connection
        (the worker may be alive behind it) has it sent again, after a backoff, for as long as it lasts."""
        w = self.core.local_of.get(peer, -1)
        return [w] if w in self.asking and w in self.down else []

    def _reask(self, peer: int, w: int) -> None:
        self._ask(w)

    def broken(self, brk) -> None:
        """A notice: a down worker that crashed or is down (refused) is asked no more (a restarted worker
        registers itself); the launches sent to a worker that crashed, refuses, or whose connection from this
        LM broke can no longer arrive (a hand-back waiting for that happens now)."""
        w = self.core.local_of.get(brk.peer)
        if w is not None and (brk.peer_lost_state or brk.sent):
            if brk.peer_lost_state:
                self.asking.discard(w)
            self.severed.add(w)
            if w in self.awaiting_cut:
                self.awaiting_cut.discard(w)
                self._hand_back(w)

    def on_worker_status(self, msg: WorkerStatus, src: int) -> None:
        """A worker's answer to a probe or a rebuild's ask, or a restarted worker registering."""
        lm = self.core
        if not lm.active:
            return  # (a restarted worker registers with both replicas: the active answers)
        w = lm.local_of[src]
        self.asks.heard(src)
        if msg.incarnation > self.worker_inc[w]:  # a restarted worker registers (or answers)
            self.worker_inc[w] = msg.incarnation
            lm.send(src, Registered(lm.epoch))
        elif msg.incarnation < self.worker_inc[w]:
            return  # from an earlier incarnation: stale
        self.reconcile(w, msg)
        if w in self.rebuilding:
            self.rebuilding.discard(w)
            if not self.rebuilding:
                self._rebuilt()

    def reconcile(self, w: int, status: WorkerStatus) -> None:
        """Make the record of worker ``w`` what it says: complete what it finished, count what it runs,
        relaunch what it lost (a lost launch, or a restart), or hand that back when it no longer fits."""
        lm = self.core
        self.probing.pop(w, None)
        self.down.pop(w, None)
        self.hand_back_at.pop(w, None)
        self.asking.discard(w)
        self.severed.discard(w)
        self.awaiting_cut.discard(w)
        execs, tasks = lm.execs[w], lm.tasks
        running = {(r[0], r[1]): r for r in status.running}
        done = set(map(tuple, status.done))
        relaunch = []
        # victims of a stop under way stay recorded until it is answered
        stopping = lm.users.stopping_keys(w) if lm.users is not None else ()
        for key in sorted(execs):
            if key in running or (key in stopping and key not in done):
                continue
            if key in done:
                lm.finished(w, key)
                continue
            del execs[key]
            task = tasks.get(key)
            if task is not None and task.worker == w:
                relaunch.append(key)
        for key in sorted(done):  # finished here while this LM did not know (a restarted LM)
            if key not in tasks and key not in lm.done:
                lm.done[key] = w
        for key, row in sorted(running.items()):
            _, _, duration_us, demand, owner, end_us = row[:6]
            execs.setdefault(key, tuple(demand))
            task = tasks.get(key)
            if task is None and key not in lm.done:  # (with users the worker says whose task it is)
                user = row[6] if len(row) > 6 else -1
                task = tasks[key] = lm.new_task(w, owner, tuple(demand), duration_us, end_us, user)
            if task is not None and task.worker == w:
                task.end_us = end_us
                self.track(key, task)
        free, cap = lm.free[w], lm.capacity[w]
        before = list(free)
        for r in range(len(cap)):
            free[r] = cap[r] - sum(d[r] for d in execs.values())
        for key in relaunch:
            task = tasks[key]
            if all(f >= d for f, d in zip(free, task.demand)):
                for r, d in enumerate(task.demand):
                    free[r] -= d
                execs[key] = task.demand
                task.end_us = lm.now + task.duration_us
                self.track(key, task)
                lm.recorder.count("tasks_relaunched")
                if lm.fabric.event_log is not None:
                    emit(lm, RELAUNCH, job=key[0], task=key[1], worker=lm.worker_names[w])
                lm.send(lm.worker_ids[w], RunTask(key[0], key[1], task.duration_us, task.demand, task.owner,
                                                  lm.notify, task.user))
            else:
                del tasks[key]
                lm.recorder.count("tasks_handed_back")
                lm.send(lm.gm_ids[task.owner], TaskLost(key[0], key[1], lm.lm))
        if free != before:
            lm.changed(w, NO_CAUSE)
        if lm.users is not None and w in lm.users.stopping:  # it may not have had the stop: ask again
            lm.users.resend_stop(w)
        if lm.gang is not None:
            lm.gang.reconciled(w)

    # ---- a restarted LM (or a standby taking over) -------------------------------------------
    def rebuild(self, since_us: int) -> None:
        """The LM's memory is gone (a restart, or a takeover at ``since_us``): ask every worker what it runs
        before validating anything."""
        lm = self.core
        self.started_us = since_us
        self.rebuilding = set(range(len(lm.specs)))
        self.ask_rebuild(0)

    def ask_rebuild(self, attempt: int) -> None:
        lm = self.core
        ask = Probe((), True) if lm.standby is None else Takeover(lm.epoch)
        for w in sorted(self.rebuilding):
            lm.send(lm.worker_ids[w], ask)
        wait = backoff(lm.faults.probe_timeout_us, attempt + 1)
        self.rebuild_at = lm.now + wait
        lm.set_timer(wait, LmTimer("rebuild", -1, attempt))

    def hold(self, msg, src) -> bool:
        """While rebuilding a message waits (True); it is handled once every worker answered."""
        if self.rebuilding:
            self.held.append((msg, src))
            return True
        return False

    def _rebuilt(self) -> None:
        """Every worker answered (or is down): send every GM the whole state, then serve what waited."""
        lm = self.core
        self.rebuilding.clear()
        lm.recorder.count("lm_rebuilds")
        lm.recorder.recovered(lm.now - self.started_us)
        for gm in range(len(lm.gm_ids)):
            lm.send_snapshot(gm)
        held, self.held = self.held, []
        for msg, src in held:
            lm.handle(msg, src)
