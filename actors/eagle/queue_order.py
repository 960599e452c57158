"""Eagle's queue order at a worker: shortest remaining job first, with a bound against starvation (Eagle 2016,
4.3; the Eagle authors' simulator's ``get_next_probe_acc_to_sbp_srpt``, whose rule this is).

The queue is scanned front to back. A long reservation at the front is served first. Otherwise the reservation
of the job with the least estimated remaining work is served (the earliest of equals), but only if its task's
estimate fits the slack of every short reservation in front of it: a short reservation's slack is ``bound``
times its own task estimate less the delay it has already suffered from reservations served past it (each
such service adds that task's estimate to the delay of everything it passed). A bound of infinity is plain
shortest-remaining-first; 0 lets nothing pass a short reservation that has any estimate.
"""

from __future__ import annotations

import math


def choose(queue, bound: float) -> int:
    """The position to serve next in ``queue`` (entries with ``long``, ``remaining_us``, ``estimate_us`` and
    ``delay_us``), -1 when it is empty."""
    best, least, slack_min = -1, math.inf, math.inf
    bounded = bound != math.inf
    for pos, r in enumerate(queue):
        if r.long and pos == 0:
            return 0
        if r.remaining_us < least and r.estimate_us <= slack_min:
            best, least = pos, r.remaining_us
            if r.long:
                return pos
        if bounded and not r.long:
            slack = bound * r.estimate_us - r.delay_us
            if slack < slack_min:
                slack_min = slack
    return best


def passed(queue, pos: int, estimate_us: int) -> None:
    """The reservation at ``pos`` was served past the ones in front of it: each is delayed by its estimate."""
    for i in range(pos):
        queue[i].delay_us += estimate_us
