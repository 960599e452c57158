"""Worker-choice policies: pick one of a PartitionView's suitable candidates; stateless.

Section numbers are those of the Megha 2023 paper, 4.3 "Matching Algorithm".

Others live in their own modules and register here: ``d-choices``, ``spread`` and ``binpack``
(``load_choice``), ``tebas`` (``tebas``). A policy with parameters has ``configure(**options)``;
``get_worker_choice`` passes it the run's options (d, beta, alpha). ``demand`` is the task's demand
vector (the callers' signature), for policies that weigh room left for it.

A policy may also have ``choose_among(view, bits, stream, demand)``: the same choice, with the same
draws, from the candidates as bits of an int (bit i: local index i), so a large partition's candidates are
never unpacked into an array; ``among`` gives it, or ``choose`` on the unpacked array for one without.
"""

from __future__ import annotations

from typing import Callable, Protocol

import numpy as np

from fedemu.fabric.rand import Stream
from fedemu.policies import bitvec
from fedemu.policies.candidates import sole
from fedemu.policies.load_choice import BinPackChoice, DChoices, SpreadChoice
from fedemu.policies.partition_view import PartitionView
from fedemu.policies.registry import Registry
from fedemu.policies.tebas import TebasChoice


class WorkerChoice(Protocol):
    """``choose`` returns one local index from a non-empty ascending candidate array."""

    name: str

    def choose(self, view: PartitionView, candidates: np.ndarray, stream: Stream, demand=(1,)) -> int: ...


class RandomChoice:
    """Megha 2023 paper 4.3.1, Random: uniform among the candidates (spreads parallel GMs, fewer conflicts)."""

    name = "random"

    def choose(self, view: PartitionView, candidates: np.ndarray, stream: Stream, demand=(1,)) -> int:
        n = len(candidates)
        if n == 0:
            raise ValueError("choose needs at least one candidate")
        return int(candidates[stream.randrange(n) if n > 1 else 0])

    def choose_among(self, view: PartitionView, bits: int, stream: Stream, demand=(1,)) -> int:
        n = bits.bit_count()
        if n == 0:
            raise ValueError("choose needs at least one candidate")
        return bitvec.nth_set_bit(bits, stream.randrange(n) if n > 1 else 0)


class MinConstraintsChoice:
    """Megha 2023 paper 4.3.2, Minimum Constraints: a candidate with the fewest machine constraints (best fit).

    Ties are broken uniformly by the stream; a unique minimum consumes no draw.
    """

    name = "min-constraints"

    def choose(self, view: PartitionView, candidates: np.ndarray, stream: Stream, demand=(1,)) -> int:
        one = sole(candidates)
        if one is not None:
            return one
        counts = view.constraint_counts[candidates]
        best = candidates[counts == counts.min()]
        m = len(best)
        return int(best[stream.randrange(m) if m > 1 else 0])

    def choose_among(self, view: PartitionView, bits: int, stream: Stream, demand=(1,)) -> int:
        if not bits:
            raise ValueError("choose needs at least one candidate")
        for fewest in view.count_bits:  # by number of constraints, fewest first
            best = bits & fewest
            if best:
                m = best.bit_count()
                return bitvec.nth_set_bit(best, stream.randrange(m) if m > 1 else 0)
        raise AssertionError("a candidate outside the partition")  # (count_bits covers every worker)


def among(policy: WorkerChoice) -> Callable[[PartitionView, int, Stream, tuple], int]:
    """``policy``'s choice from candidates as bits: its ``choose_among``, else ``choose`` on them unpacked."""
    fast = getattr(policy, "choose_among", None)
    if fast is not None:
        return fast
    return lambda view, bits, stream, demand=(1,): policy.choose(view, bitvec.int_indices(bits), stream, demand)


_REGISTRY: Registry[WorkerChoice] = Registry("policy")
_REGISTRY.register(RandomChoice.name, RandomChoice)
_REGISTRY.register(MinConstraintsChoice.name, MinConstraintsChoice)
for _cls in (DChoices, SpreadChoice, BinPackChoice, TebasChoice):
    _REGISTRY.register(_cls.name, _cls)

WORKER_CHOICE_NAMES: tuple[str, ...] = _REGISTRY.names


def get_worker_choice(name: str, **options) -> WorkerChoice:
    """The policy called ``name``, configured with ``options`` if it takes any; ConfigError
    ``unknown policy 'x'; known: ...`` otherwise."""
    policy = _REGISTRY.get(name)
    configure = getattr(policy, "configure", None)
    if configure is not None:
        configure(**options)
    return policy
