"""Eagle's messages beside Hawk's (``actors/hawk/messages``): its reservation carries the probing round and the
job's estimated remaining work, a long one the long-job scheduler's bitmap; a node with long work rejects a
short probe (``Reject``); an answer says how many of the job's tasks are still unbound (``Assign``)."""

from __future__ import annotations

from fedemu.fabric.messages import lean, message


@lean(last=2)
@message("eagle.probe")
class Probe:
    """Scheduler -> node: a reservation (as Hawk's) in probing ``round`` (1, 2; 3: the fallback to the reserved
    partition, never rejected; 0: a long task's), with its job's estimated remaining work ``remaining_us``. A long
    task's from the long-job scheduler carries its bitmap of the workers with long work (bit p of byte p // 8:
    the p-th worker in cluster order) and when it was taken (``stamp_us``)."""

    job_id: int
    group: int
    demand: tuple
    constraints: tuple
    estimate_us: int
    long: bool
    round: int
    remaining_us: int
    bitmap: bytes = b""
    stamp_us: int = -1


@message("eagle.reject")
class Reject:
    """Node -> scheduler: I have long work, so I do not queue this short probe of (job_id, group) from ``round``;
    here is the freshest bitmap I have (``stamp_us`` -1: none)."""

    job_id: int
    group: int
    round: int
    bitmap: bytes
    stamp_us: int


@message("eagle.assign")
class Assign:
    """Scheduler -> node: run this task now (as Hawk's); ``left``: the job's tasks still unbound after it."""

    job_id: int
    group: int
    index: int
    duration_us: int
    demand: tuple
    request: int
    left: int


@message("eagle.drop")
class Drop:
    """Scheduler -> node: every task of ``job_id`` is bound; drop its reservations queued here (the simulator
    removes them as the job's last task is handed out)."""

    job_id: int
