"""Load-aware worker choices: Qin's D-choices, and spread / bin-pack stand-ins.

Load (our definition, for Qin's L_i(t), Guan and Ababei, IV-A): a machine's allocated share of
its capacity, in its most-used resource: ``max_r (capacity_r - free_r) / capacity_r``, from 0 (idle) to
1 (full). The schedulers that take a worker-choice policy (Megha GMs, centralized, PigeonC masters) do
not queue tasks at workers, so there is no queued work to add. ``tools.results.metrics`` measures imbalance with
the same load.
"""

from __future__ import annotations

import numpy as np

from fedemu.fabric.rand import Stream
from fedemu.policies.candidates import sole
from fedemu.policies.partition_view import PartitionView


def load(view: PartitionView, candidates: np.ndarray) -> np.ndarray:
    """Each candidate's allocated share of capacity in its most-used resource (0 idle .. 1 full)."""
    cap = view.capacity[candidates]
    used = cap - view.free[candidates]
    return (used / np.maximum(cap, 1)).max(axis=1)


def _best(candidates: np.ndarray, score: np.ndarray, stream: Stream) -> int:
    """Uniform among the candidates with the highest score (no draw when one is best)."""
    best = candidates[score == score.max()]
    return int(best[stream.randrange(len(best)) if len(best) > 1 else 0])


class DChoices:
    """Qin's D-choices greedy (Guan and Ababei, IV-A): rank the candidates by load, draw uniformly among the D
    least loaded. D = 1 is the single-choice greedy (a least-loaded machine); D >= the number of
    candidates is random among them. Equal loads are ranked from a random rotation of the candidate
    list, so ties do not always favour low indices (two draws, one when D = 1 or D covers them all)."""

    name = "d-choices"

    def __init__(self, d: int = 2) -> None:
        self.d = d

    def configure(self, *, d: int = 2, **_) -> None:
        self.d = d

    def choose(self, view: PartitionView, candidates: np.ndarray, stream: Stream, demand=(1,)) -> int:
        one = sole(candidates)
        if one is not None:
            return one
        n = len(candidates)
        if self.d >= n:
            return int(candidates[stream.randrange(n)])
        return int(candidates[self.ranked(view, candidates, stream)[stream.randrange(self.d) if self.d > 1 else 0]])

    @staticmethod
    def ranked(view: PartitionView, candidates: np.ndarray, stream: Stream) -> np.ndarray:
        """Positions in ``candidates``, least loaded first; ties from a random rotation (one draw)."""
        n = len(candidates)
        rotation = (np.arange(n) - stream.randrange(n)) % n
        return np.lexsort((rotation, load(view, candidates)))


class SpreadChoice:
    """Least-allocated spreading, a simple stand-in for kube-scheduler's default resource scoring (not
    that system): the highest mean free share over resources, ``mean_r free_r / capacity_r``; ties uniform."""

    name = "spread"

    def choose(self, view: PartitionView, candidates: np.ndarray, stream: Stream, demand=(1,)) -> int:
        if len(candidates) == 0:
            raise ValueError("choose needs at least one candidate")
        cap = np.maximum(view.capacity[candidates], 1)
        return _best(candidates, (view.free[candidates] / cap).mean(axis=1), stream)


class BinPackChoice:
    """Most-allocated bin packing, a simple stand-in for a bin-packing batch scheduler's choice (Volcano's
    binpack, not that system): the highest mean allocated share over resources; ties uniform."""

    name = "binpack"

    def choose(self, view: PartitionView, candidates: np.ndarray, stream: Stream, demand=(1,)) -> int:
        if len(candidates) == 0:
            raise ValueError("choose needs at least one candidate")
        cap = np.maximum(view.capacity[candidates], 1)
        return _best(candidates, ((cap - view.free[candidates]) / cap).mean(axis=1), stream)
