"""Sparrow's crash recovery, beside the paper's protocol (``scheduler``, ``node``): driven only by the
fabric's ``ConnectionBroken`` notices (``common.recovery``), so a fault-free run pays nothing for it. The
scheduler's part is ``common.probe_recovery.ProbeRecovery`` (Hawk's and Eagle's too), which probes again
through the scheduler's ``place_again`` (its ``probe``).

On a live connection nothing is lost, so the protocol sends each message once. A break with a node
(it crashed, refused a message while down, or a cut outlasted ``conn_timeout_s``) is the only evidence
that work there is lost, and the only time a scheduler probes again:
- the probes this scheduler had queued there are taken for lost (a restarted node starts empty; what was
  undelivered on a broken connection is dropped), and so are the tasks bound to it without a result (a
  crash ends them; after a cut their result may be lost): each such task goes back to its group's queue
  (``tasks_relaunched``). A probe or task that was not lost after all costs only a cancel or a second
  execution (the first result counts).
- the node is suspected (``common.recovery.Suspects``): no probe goes to it until its backoff is over or
  it is heard from, so an outage is not probed into at the rate of the network.
- each group whose unbound tasks now outnumber its probes still waiting is probed again for the
  difference (``probes_resent``), among the nodes not suspected; with none left, when the first
  suspicion ends.
A node keeps what it holds for a request until the answer comes: after a break with a scheduler that is
still up (a cut) it asks again, with the same number, at each break with a backoff (``common.recovery.
Retries``), and the scheduler answers a repeated request with the task still bound to it, else a cancel
(its task went back to the queue at the break); a scheduler that crashed (or refuses) has forgotten its
jobs, so the node drops its probes and requests at once.
"""

from __future__ import annotations

from ..common.probe_recovery import GROUP_SHIFT, SUSPECT_US, ProbeRecovery

RESEND_US = 1_000_000  # a node asks again a second after a break with a scheduler that is up, doubling

__all__ = ["GROUP_SHIFT", "RESEND_US", "SUSPECT_US", "ProbeRecovery"]
