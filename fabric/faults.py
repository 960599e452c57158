"""Fault plans: timed events a scenario or a test supplies, applied by the fabric at their time.

A plan is plain data, so hypothesis can generate and shrink it: ``(at_us, kind, target, value)``.
Kinds: crash/restart an actor; partition two sets of actors and heal all partitions; slow a link
(latency multiplier) and restore it; set loss on a link ("*" targets every link, for loss and restore).
Loss and partitions delay messages on their connections (``connections``); ``dup`` is retired
(``RETIRED``). Times are integer microseconds: a float is refused, not truncated (a plan file says
seconds, ``scenarios.fault_plan`` converts).
Faults name actors; the fabric resolves the names to actor indices once, when the plan is added
(``Fault.resolve``). The kernel applies crash and restart, the network every other kind
(``Network.apply``).
"""

from __future__ import annotations

import math

import attrs

from .errors import ConfigError

FAULT_KINDS = ("crash", "restart", "partition", "heal", "slow", "restore", "loss")
LINK_KINDS = ("slow", "restore", "loss")  # a link (a, b) or '*'
MAX_SLOW_FACTOR = 1e6  # a larger one would push a message's time past what the journal's integers hold
PROBABILITY_KINDS = ("loss",)
# Kinds that no longer exist, with why: a plan or a key that names one is refused with this.
RETIRED = {"dup": "dup is retired: messages travel on connections (TCP), which never deliver one twice; "
                  "model a lossy link with loss (retransmission delay) and a peer's resend with crash or partition"}
ACTOR_KINDS = ("crash", "restart")  # what the kernel applies; the network applies the rest


def _tupleize(target):
    if isinstance(target, str):
        return (target,)
    return tuple(tuple(t) if isinstance(t, (list, tuple)) else t for t in target)


@attrs.frozen
class Fault:
    """One fault event. ``target``: (actor,) for crash/restart; (names_a, names_b) for partition;
    () for heal; (a, b) or ("*",) for slow/restore/loss. ``value``: slow factor, or loss probability."""

    at_us: int
    kind: str
    target: tuple = attrs.field(default=(), converter=_tupleize)
    value: float = 0.0

    def __attrs_post_init__(self):
        if self.kind in RETIRED:
            raise ConfigError(f"fault {self.kind}: {RETIRED[self.kind]}")
        if self.kind not in FAULT_KINDS:
            raise ConfigError(f"unknown fault kind {self.kind!r}; known: {', '.join(FAULT_KINDS)}")
        if isinstance(self.at_us, bool) or not isinstance(self.at_us, int):
            raise ConfigError(f"fault {self.kind} at {self.at_us!r}: the time must be whole microseconds (an int), "
                              f"got {type(self.at_us).__name__}; seconds go through model.seconds_to_us")
        if self.at_us < 0:
            raise ConfigError(f"fault {self.kind} at {self.at_us} us: time must be >= 0")
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)) or not math.isfinite(self.value):
            raise ConfigError(f"fault {self.kind} at {self.at_us} us: value must be a finite number, got {self.value!r}")
        arity = {"crash": 1, "restart": 1, "partition": 2, "heal": 0}.get(self.kind)
        if arity is not None and len(self.target) != arity:
            raise ConfigError(f"fault {self.kind} needs {arity} target(s), got {self.target!r}")
        if self.kind in LINK_KINDS and self.target != ("*",) and len(self.target) != 2:
            raise ConfigError(f"fault {self.kind} needs a link (a, b) or '*', got {self.target!r}")
        if self.kind == "slow" and self.target == ("*",):
            raise ConfigError("fault slow needs a link (a, b); '*' is only for loss and restore")
        if self.kind == "slow" and self.value <= 0:
            raise ConfigError(f"fault slow needs a latency factor > 0, got {self.value}")
        if self.kind == "slow" and self.value > MAX_SLOW_FACTOR:
            raise ConfigError(f"fault slow: a latency factor is at most {MAX_SLOW_FACTOR:g} (a 1 ms link then takes "
                              f"{MAX_SLOW_FACTOR / 1e3 / 60:.0f} minutes), got {self.value:g}")
        if self.kind in LINK_KINDS and len(self.target) == 2 and self.target[0] == self.target[1]:
            raise ConfigError(f"fault {self.kind} on the link from {self.target[0]} to itself: an actor's messages to "
                              "itself cross no link; name two actors")
        if self.kind == "partition" and set(self.target[0]) & set(self.target[1]):
            both = sorted(set(self.target[0]) & set(self.target[1]), key=str)
            raise ConfigError(f"fault partition: {', '.join(map(str, both[:3]))} on both sides; the sides of a "
                              "partition are two disjoint groups of actors")
        if self.kind in PROBABILITY_KINDS and not 0.0 <= self.value <= 1.0:
            raise ConfigError(f"fault {self.kind} needs a probability in [0, 1], got {self.value}")

    def names(self) -> list[str]:
        """Every actor name the fault refers to (for validation)."""
        if self.kind == "partition":
            return [*self.target[0], *self.target[1]]
        return [t for t in self.target if t != "*"]

    def as_data(self) -> tuple:
        return (self.at_us, self.kind, self.target, self.value)

    def resolve(self, index: dict[str, int]) -> "Resolved":
        """This fault with its actor names turned into indices (``index``: name -> index, in actor
        order); a name not in ``index`` is a ConfigError that lists the known ones."""
        for name in self.names():
            if name not in index:
                known = list(index)
                listed = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
                raise ConfigError(f"fault {self.kind} at {self.at_us} us names unknown actor {name!r}; known: {listed}")
        if self.kind in ACTOR_KINDS:
            return Resolved(self, actor=index[self.target[0]])
        if self.kind == "partition":
            return Resolved(self, sides=tuple(frozenset(index[n] for n in side) for side in self.target))
        if self.kind == "heal" or self.target == ("*",):
            return Resolved(self)
        return Resolved(self, link=(index[self.target[0]], index[self.target[1]]))


@attrs.frozen
class Resolved:
    """A fault as the fabric applies it: ``actor`` (crash, restart), ``sides`` (partition) and
    ``link`` (slow, restore, loss; None for every link) are actor indices. ``fault`` is the plan's
    own event, which the journal records."""

    fault: Fault
    actor: int = -1
    link: tuple[int, int] | None = None
    sides: tuple = ()

    @property
    def kind(self) -> str:
        return self.fault.kind

    @property
    def value(self) -> float:
        return self.fault.value


def plan(events) -> list[Fault]:
    """A fault plan from data: Fault objects, tuples ``(at_us, kind, target[, value])`` or dicts."""
    out = []
    for ev in events:
        if isinstance(ev, Fault):
            out.append(ev)
        elif isinstance(ev, dict):
            out.append(Fault(**ev))
        else:
            out.append(Fault(*ev))
    return out
