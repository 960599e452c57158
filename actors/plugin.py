"""The scheduler plug-in interface: what a scheduler declares, and what it builds its actors from.

A scheduler is one ``Scheduler`` value in the ``plugin`` module of its own package (``actors/megha/``,
``pigeon/``, ``sparrow/``), listed once in ``actors/registry.py``. It declares its ``--set`` keys (``Param``),
the counters it keeps and its traits; ``build(ctx)`` adds its actors to ``ctx.fabric`` and returns the
names of the front ends that jobs are submitted to. Actors address each other by these names, resolved
to actor ids by the fabric when each actor starts, never by id arithmetic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import attrs

from fedemu.fabric.rand import Stream
from fedemu.model import Cluster, Param, Recorder


@attrs.frozen
class Context:
    """Everything a scheduler builds its actors from (``params``: the common keys and its own)."""

    fabric: Any
    cluster: Cluster
    params: dict
    recorder: Recorder
    feasible: Callable[[tuple, tuple], bool]  # can some machine ever run a task (constraints, demand)?
    policy: Any = None  # the worker-choice policy; None for a scheduler that takes none

    def stream(self, name: str) -> Stream:
        """A random stream of the run's seed for a build-time draw, named for what it draws."""
        return Stream(self.fabric.seed, name)

    def add(self, name: str, factory) -> str:
        """Add an actor built by ``factory()``; returns its name, which is how others address it."""
        self.fabric.add(name, factory)
        return name


@attrs.frozen
class Scheduler:
    """One scheduler behind the common interface."""

    name: str
    help: str  # one line: what it is
    build: Callable[[Context], list[str]]  # adds the actors; returns the front ends' names
    params: tuple[Param, ...] = ()
    counters: tuple[tuple[str, str], ...] = ()  # (name, meaning) of each recorder counter it keeps
    takes_policy: bool = True  # whether the worker-choice ``policy`` applies to it
    constraint_aware: bool = True  # whether it places tasks only on machines that satisfy their constraints
    invalid_counters: tuple[str, ...] = ()  # counters of requests it found invalid ("invalid" in compare)
    # the fault kinds (fabric.faults.FAULT_KINDS) its protocols recover from; the fault search only
    # draws these for it, and the README's table lists them
    survives: tuple[str, ...] = ()
    # end-of-run checks of its live state (LM state equal to the workers', views converged):
    # each is fn(fabric) -> list of actors.invariants.Violation, run after the recorder's checks
    checks: tuple[Callable[[Any], list], ...] = ()

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)


# the cost models (``fabric.costs``) a run may name with --set cost_model=NAME: one JSON table each, with
# the costs of every scheduler's roles (gm, lm, master, distributor, sparrow) and where each comes from
COST_MODELS = Path(__file__).resolve().parent / "costs"
DEFAULT_COST_MODEL = "prototype"

FRONT_END_COUNTERS = (("unschedulable_tasks", "tasks of jobs rejected at submission: no machine can run them"),)
