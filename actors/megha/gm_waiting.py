"""``refused_task=wait-free``: a GM's queued tasks wait for a worker reported free, as in the 2023 authors' GM.

The 2023 authors' simulator (meghanat/megha-constraint-aware b503dbc, megha3.0/src/megha_sim/global_master/
gm_constraints_rand.py; gm_constraints_minC.py has the same code at the second line numbers):
- a task no partition matches at its job's arrival goes to the back of the GM's ``task_queue`` (l.156-158);
- a task whose launch the LM refused goes to its front (``unschedule_task`` l.402 / l.418, called by
  events/events.py ``BatchedInconsistencyEvent.run`` l.304-307 before the reply's ``update_status``);
- a queued task is never matched against the view again (``schedule_job_batched_all`` l.111-196 reads only
  the new job's tasks). It is placed only on a worker reported free afterwards: the worker one of this
  GM's own tasks just left (``receive_task_response`` l.316-337 / l.332-353), or each worker of an LM
  update's "available" list (``update_status`` l.361-391 / l.377-407), each given to the first queued task
  it suits, in queue order; a worker no queued task takes is free in the view for later jobs.

Here: ``GlobalManager.apply``/``set_free`` note every worker an LM message reports (a heartbeat's delta, a
launch's reply, a completion, a snapshot), and ``schedule`` first gives each of them that the unit demand
fits to the first waiting task it suits (``serve``), then matches the queue's new tasks against the view,
and holds what found no worker (``park``). Tasks that recovery hands back (an abandoned launch, a lost
task, an adopted job's) are new tasks: matched against the view once, held only if nothing matches.

Fault story: a waiting task needs a later report of a worker it can use. A refusal because the worker
was busy promises one: the task there ends, and the LM tells the owner GM by its completion and every
other by its next delta (a worker that dies instead has its tasks handed back, run elsewhere, and
reported when they end). A broken connection loses reports: the GM then asks for a snapshot, and a
snapshot reports every free worker. A refusal because the worker is down (``LaunchFailed.down``)
promises nothing (an idle worker dead for good is never reported again): that task is matched against
the view again at once, as ``retry`` does. A restarted GM has lost its queue; its jobs come back as
adopted ones. Fault-free none of this runs.
"""

from __future__ import annotations

import math

from fedemu.policies.fair_queue import HIGH, FairQueue

from ..common.front_end import Pending


class GmWaiting:
    """The tasks waiting for a worker reported free (one FIFO class keyed by signature; a refused task
    goes to the front), and the workers reported since the last ``serve``."""

    def __init__(self, gm) -> None:
        self.core = gm
        self.queue = FairQueue(math.inf)
        self.reported: list[tuple[int, tuple]] = []  # (lm, LM-wide workers) of each report since ``serve``

    def __len__(self) -> int:
        return len(self.queue)

    def hold(self, task: Pending, front: bool = False) -> None:
        """Make ``task`` wait: at the front (a refused launch) or the back (no match)."""
        self.core.recorder.count("tasks_waited")
        if front:
            self.queue.push_front(HIGH, task, (task.constraints, task.demand))
        else:
            self.queue.push(HIGH, task, (task.constraints, task.demand))

    def heard(self, lm: int, workers: tuple) -> None:
        """An LM message reported these workers' state (absolute values, already in the view)."""
        self.reported.append((lm, workers))

    def serve(self) -> None:
        """Give each reported worker the unit demand fits to the first waiting task it suits, while it
        has room; the rest stay free in the view."""
        reported, self.reported = self.reported, []
        queue = self.queue
        if not queue.sizes[HIGH]:
            return
        gm = self.core
        views, per = gm.search.views, gm.search.per_partition
        for lm, workers in reported:
            for w in workers:
                p, local = divmod(w, per)
                view = views[lm][p]
                rejected = queue.rejected
                while view.is_available(local):
                    got = queue.take(HIGH, lambda key: True if view.fits(local, *key) else None)
                    if got is None:
                        break
                    gm.launch(got[0], lm, p, local)
                if queue.rejected != rejected:
                    queue.reopen()
                if not queue.sizes[HIGH]:
                    return

    def park(self) -> None:
        """Hold every task still in the GM's queue (no worker in the view matched it), oldest first."""
        take, hold = self.core.queue.take, self.hold
        while True:
            got = take(HIGH)
            if got is None:
                return
            hold(got[0])
