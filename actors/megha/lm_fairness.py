"""The LM's side of Megha's global fairness (Megha 2022, IV-C): it checks a
GM's preemption request against its true state, stops the victims on their worker, and launches the task.

A GM plans a preemption from a possibly stale view (``gm_fairness``), so the LM verifies it (our reading
where the paper gives no protocol):

- **Verification.** The victims still run on the named worker for the named user; the worker is up and
  no other preemption is under way there; stopping the victims makes room for the task; and no other
  worker of this cluster that satisfies the task's constraints already has room for it (work conserving:
  preemption never happens while an eligible worker here is idle). Otherwise the answer is
  ``PreemptFailed`` with every change the GM has not seen (and who holds each worker), as for an invalid
  launch, and nothing moves.
- **Stop, then launch.** The LM sends the worker ``StopTask`` and changes nothing until the worker answers
  ``Stopped``: a victim that finished before the stop came has its ``TaskFinished`` ahead of the answer on
  the same link and completes normally, so a task is never both completed and preempted. On the answer
  the victims' resources are free, each victim's owner GM is told (``Preempted``: it queues the task
  again, from scratch) and the task is launched (a repartition if the worker is another GM's). The
  change is logged with no cause, so every GM (the preemptor too) hears who holds the worker now.
- **Faults.** A repeated request for the task a stop under way will launch (a duplicate, or the GM's
  launch retry) is not answered until the stop is. The stop is asked again every
  ``worker_probe_timeout_s`` (``StopTask`` is idempotent), up to ``worker_probe_retries`` times; then the preemption is abandoned (``PreemptFailed``) and the worker's
  failure detection takes over its tasks. A worker that answers a probe or registers while a stop is under
  way keeps the victims in the record until the stop is answered. An LM that fails over or restarts loses
  the stop in hand: its rebuild learns from the workers what still runs, and the GMs' launch retries
  start whatever no longer runs anywhere (a task is never lost).
"""

from __future__ import annotations

from fedemu.fabric.log import emit
from fedemu.actors.megha.change_log import NO_CAUSE

from .events import PREEMPTION, PREEMPT_REFUSED
from .messages import LmTimer, PreemptFailed, Preempted, StopTask


class LmFairness:
    """The preemption protocol of one LM: a component its ``LocalManager`` holds (``users``). It keeps the
    stops under way and acts through the LM (its state, its launches)."""

    def __init__(self, lm) -> None:
        self.core = lm
        self.stopping: dict[int, list] = {}  # worker -> [Preempt request, victims, asks, nonce, since]
        self.provides = [frozenset(w.constraints) for w in lm.specs]

    def forget(self) -> None:
        """A takeover or step-down: a stop under way is forgotten (the rebuild learns what still runs)."""
        self.stopping = {}

    def holders(self, workers) -> tuple:
        """Per worker of ``workers``, its running tasks as (job, index, user, demand)."""
        lm = self.core
        tasks = lm.tasks
        out = []
        for w in workers:
            row = []
            for key in sorted(lm.execs[w]):
                task = tasks.get(key)
                if task is not None and task.worker == w:
                    row.append((key[0], key[1], task.user, task.demand))
            out.append(tuple(row))
        return tuple(out)

    def stop_pending(self, msg) -> bool:
        """Whether ``msg`` (a launch or preemption request) is of the task a stop under way will launch:
        a duplicate or a retry, answered when the stop is (so the task cannot also be queued again)."""
        key = (msg.job_id, msg.index)
        return any((e[0].job_id, e[0].index) == key for e in self.stopping.values())

    def on_preempt(self, msg, src: int) -> None:
        lm = self.core
        if lm.hold(msg, src) or lm.repeated(msg) or self.stop_pending(msg):
            return
        lm.recorder.task_handled(msg.job_id, msg.index, lm.arrived, lm.now)
        w = msg.worker
        why = self._refuse(msg)
        if why:
            lm.recorder.count("preemptions_refused")
            lm.recorder.count_user("preemptions_refused", msg.user)
            if lm.fabric.event_log is not None:
                emit(lm, PREEMPT_REFUSED, job=msg.job_id, task=msg.index, worker=lm.worker_names[w], why=why)
            self._preempt_failed(msg, why)
            return
        self.stopping[w] = [msg, tuple(sorted(tuple(k) for k in msg.victims)), 1, lm.number(), lm.now]
        self.ask_stop(w)

    def _preempt_failed(self, msg, why: str) -> None:
        lm = self.core
        workers, frees = lm.change_log.since(msg.gm, always=msg.worker)
        lm.charge("change", len(workers))
        lm.send(lm.gm_ids[msg.gm], PreemptFailed(msg.job_id, msg.index, msg.attempt, lm.lm, why, workers,
                                                 frees, self.holders(workers)))

    def _refuse(self, msg) -> str:
        """Why the preemption request cannot go ahead on the true state ("" when it can)."""
        lm = self.core
        w, demand = msg.worker, msg.demand
        if w in lm.recovery.down or w in lm.recovery.rebuilding:
            return "the worker is down"
        if w in self.stopping:
            return "a preemption is under way on the worker"
        room = list(lm.free[w])
        for key in msg.victims:
            task = lm.tasks.get(tuple(key))
            if task is None or task.worker != w or task.user != msg.victim_user:
                return f"task {key[0]}.{key[1]} no longer runs there for user {msg.victim_user}"
            for r, d in enumerate(task.demand):
                room[r] += d
        if not all(f >= d for f, d in zip(room, demand)):
            return "stopping the victims leaves too little room"
        need = set(msg.constraints)
        for v, free in enumerate(lm.free):
            if v not in lm.recovery.down and v not in self.stopping and all(f >= d for f, d in zip(free, demand)) \
                    and need <= self.provides[v]:
                return f"{lm.worker_names[v]} has room for the task (no preemption while a worker is idle)"
        return ""

    def ask_stop(self, w: int) -> None:
        """Ask worker ``w`` to stop the victims, and wait for its answer (the entry's one timer)."""
        self.resend_stop(w)
        self.core.set_timer(self.core.faults.probe_timeout_us, LmTimer("stop", w, self.stopping[w][3]))

    def resend_stop(self, w: int) -> None:
        """The stop again, to a worker heard from again that may have missed it; the entry's timer is
        pending already (a second would run a second chain of asks, and give the stop up early)."""
        lm = self.core
        lm.send(lm.worker_ids[w], StopTask(self.stopping[w][1]))

    def due(self, msg: LmTimer) -> None:
        """No answer to a stop: ask again, or give the preemption up after the probe retries."""
        w = msg.key
        entry = self.stopping.get(w)
        if entry is None or entry[3] != msg.nonce:
            return
        if entry[2] < self.core.faults.probe_retries:
            entry[2] += 1
            self.ask_stop(w)
            return
        del self.stopping[w]
        self._preempt_failed(entry[0], "the worker did not answer the stop")

    def on_stopped(self, msg, src: int) -> None:
        lm = self.core
        if lm.hold(msg, src):
            return
        w = lm.local_of[src]
        entry = self.stopping.get(w)
        if entry is None or tuple(tuple(k) for k in msg.keys) != entry[1]:
            return  # a late or repeated answer
        del self.stopping[w]
        request = entry[0]
        finished = {tuple(k) for k in msg.finished}
        execs, free = lm.execs[w], lm.free[w]
        stopped = []
        for key in entry[1]:
            if key not in execs:
                continue  # it completed meanwhile (its TaskFinished came first), or was reconciled
            if key in finished:  # its TaskFinished was lost: complete it now
                lm.finished(w, key)
                continue
            demand = execs.pop(key)
            for r, d in enumerate(demand):
                free[r] += d
            task = lm.tasks.pop(key, None)
            if task is not None:
                stopped.append(key)
                lm.recorder.count("preemptions")
                lm.send(lm.gm_ids[task.owner], Preempted(key[0], key[1], lm.lm, w, task.attempt))
        if stopped and lm.fabric.event_log is not None:
            emit(lm, PREEMPTION, job=request.job_id, task=request.index, worker=lm.worker_names[w],
                 user=request.user, victim_user=request.victim_user, victims=[list(k) for k in stopped])
        if stopped:
            lm.recorder.preemptions.append((lm.now, lm.specs[w].worker_id, request.user, request.victim_user,
                                            (request.job_id, request.index), tuple(stopped), entry[4]))
        if all(f >= d for f, d in zip(free, request.demand)) and w not in lm.recovery.down:
            lm.start(request, w, NO_CAUSE)
        else:
            lm.changed(w, NO_CAUSE)
            self._preempt_failed(request, "stopping the victims left too little room")

    def stopping_keys(self, w: int) -> tuple:
        """The tasks a stop under way on worker ``w`` names (kept in the record until it is answered)."""
        entry = self.stopping.get(w)
        return entry[1] if entry is not None else ()
