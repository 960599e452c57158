"""Megha's protocol between Global Managers (GMs) and Local Managers (LMs).

State changes travel as absolute values: ``workers`` are LM-local worker indices and ``frees`` the
free-capacity vectors the LM holds for them, so applying a change twice is harmless.
"""

from __future__ import annotations

from fedemu.fabric.messages import message


@message("megha.launch")
class Launch:
    """GM -> LM: run this task on ``worker`` (LM-local). ``external`` asks for a repartition."""

    job_id: int
    index: int
    duration_us: int
    demand: tuple
    worker: int
    gm: int
    external: bool


@message("megha.launch_failed")
class LaunchFailed:
    """LM -> GM: the requested resources are gone; here is every change that GM has not seen."""

    job_id: int
    index: int
    lm: int
    workers: tuple
    frees: tuple


@message("megha.task_completed")
class TaskCompleted:
    """LM -> GM: one of that GM's tasks finished; ``free`` is the worker's free vector now."""

    job_id: int
    index: int
    lm: int
    worker: int
    free: tuple


@message("megha.heartbeat")
class Heartbeat:
    """LM -> GM, periodic: only the changes since this GM's last update (delta update)."""

    lm: int
    workers: tuple
    frees: tuple


@message("megha.heartbeat_tick")
class HeartbeatTick:
    """LM's own timer."""
