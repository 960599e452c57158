"""TEBAS (Liu et al., Algorithm 1): Fitness, RemainCap and beta node groups.

- Fitness_n = 1 / ((1 - alpha) + alpha / k_n): the Amdahl speed-up of a task of parallel fraction alpha
  on a machine of speed k_n (line 4). For any alpha > 0 it orders machines as k_n does; alpha = 0
  makes every machine equally fit.
- RemainCap_n = min over the demanded resources of floor(free / demand): how many more of the task a
  machine holds (line 5).
- ``assign`` is Algorithm 1 for a whole job: machines sorted by Fitness, split into P = floor(|N| / beta)
  groups, the job's tasks spread group by group, each machine taking its share up to its RemainCap.
- ``TebasChoice`` is the per-task worker choice the schedulers call: Algorithm 1 with one task places it
  on the first machine, in Fitness order, that has RemainCap > 0, so it takes the highest Fitness and,
  among equals, the highest RemainCap (the most room: the spreading tie-break), then uniform.

Where it applies: every scheduler that takes a worker-choice policy (Megha GMs inside the partition
search, centralized, PigeonC masters) places one task at a time, so ``TebasChoice`` is what they run.
``assign`` (whole-job placement) runs where a job's tasks are placed together: a Megha or centralized GM
placing a gang (``--set gang=true``, actors/megha/gang.py) whose tasks share one constraint set, with the job's
own alpha and ``--set beta``.

Alpha: the schedulers match queued tasks by (constraints, demand), not per job, so the choice uses the
run's alpha (the middle of ``--set alpha``'s range); as Fitness orders machines the same for every
alpha > 0, this gives each job's own order unless the range includes alpha = 0 exactly.
"""

from __future__ import annotations

import numpy as np

from fedemu.fabric.rand import Stream
from fedemu.model import speedup_factor
from fedemu.policies.candidates import sole
from fedemu.policies.partition_view import PartitionView


def fitness(alpha: float, speed) -> np.ndarray:
    """TEBAS's Fitness of a task with parallel fraction ``alpha`` on machines of speed ``speed`` (k_n)."""
    speed = np.asarray(speed, dtype=np.float64)
    return 1.0 / speedup_factor(alpha, speed)


def remain_cap(free, demand) -> np.ndarray:
    """TEBAS's RemainCap: per machine (rows of ``free``), how many tasks of ``demand`` still fit."""
    free = np.asarray(free, dtype=np.int64).reshape(len(free), -1)
    d = np.zeros(free.shape[1], dtype=np.int64)
    d[: len(demand)] = demand
    used = d > 0
    if not used.any():
        raise ValueError(f"demand {tuple(demand)} takes nothing")
    return (free[:, used] // d[used]).min(axis=1)


def groups(n: int, beta: int) -> list[range]:
    """NodeDivision (lines 8-9): positions 0..n-1 of the Fitness-sorted machines in P = max(1, n // beta)
    groups, the first P-1 of n // P machines each, the last one the rest."""
    p = max(1, n // beta)
    size = n // p
    return [range(i * size, (i + 1) * size) for i in range(p - 1)] + [range((p - 1) * size, n)]


def assign(fit, remain, tasks: int, beta: int = 3) -> np.ndarray:
    """Algorithm 1, lines 7-39: how many of a job's ``tasks`` each machine takes (same order as ``fit``).

    Machines in descending Fitness (stable: equal Fitness keeps the given order) are split into groups;
    at each group's first machine the remaining tasks are shared out over the group's size
    (aveTaskAllocated); a machine takes one task if that share is below 1, else the whole share (rounded
    down) up to its RemainCap. Passes repeat until every task is placed or a pass places none (the
    cluster is full)."""
    fit = np.asarray(fit, dtype=np.float64)
    cap = np.asarray(remain, dtype=np.int64).copy()
    if tasks < 0 or (cap < 0).any():
        raise ValueError("tasks and RemainCap must be >= 0")
    n = len(fit)
    out = np.zeros(n, dtype=np.int64)
    order = np.argsort(-fit, kind="stable")
    parts = groups(n, beta)
    left = tasks
    while left > 0:
        placed_before = left
        for part in parts:
            share = left / len(part)
            for pos in part:
                m = order[pos]
                take = (1 if cap[m] > 0 else 0) if share < 1 else min(int(share), int(cap[m]))
                take = min(take, left)
                out[m] += take
                cap[m] -= take
                left -= take
                if left == 0:
                    return out
        if left == placed_before:
            break
    return out


class TebasChoice:
    """Per task: the candidate of highest Fitness, then highest RemainCap, then uniform (see module doc)."""

    name = "tebas"

    def __init__(self, alpha: float = 0.0, beta: int = 3) -> None:
        self.alpha = alpha
        self.beta = beta  # for ``assign`` where a whole job is placed at once (a Megha gang: actors/megha/gang.py)

    def configure(self, *, alpha: float = 0.0, beta: int = 3, **_) -> None:
        self.alpha = alpha
        self.beta = beta

    def choose(self, view: PartitionView, candidates: np.ndarray, stream: Stream, demand=(1,)) -> int:
        one = sole(candidates)
        if one is not None:
            return one
        fit = fitness(self.alpha, view.speed[candidates])
        top = candidates[fit == fit.max()]
        if len(top) > 1:
            room = remain_cap(view.free[top], demand)
            top = top[room == room.max()]
        return int(top[stream.randrange(len(top)) if len(top) > 1 else 0])
