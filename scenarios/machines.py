"""Heterogeneous machines: the ``machine_types`` text, its parse, and which machine gets which type.

Format: comma-separated entries ``CAPACITY@SPEED:SHARE``, e.g. ``4x16@1.0:60,8x32@1.5:40``:

- CAPACITY: the capacity vector, whole numbers >= 1 joined by ``x`` (``4x16`` = cpu 4, mem 16; ``8`` =
  8 slots). Every type names the same number of resources.
- SPEED: the speed factor k_n >= 1 (TEBAS: the parallel part of a task runs
  k_n times faster). Optional, default 1. At least 1 because the schedulers' overdue checks take a
  task's nominal duration as an upper bound of its run time; give the slowest type 1.
- SHARE: a positive number; the types' shares are proportions (60 and 40, or 3 and 2, are the same).

Every cluster (a Megha LM, a Pigeon group) gets the proportions exactly as far as whole machines allow
(largest remainders, ties to the earlier type), and the order of its machines is shuffled by the
``machine-types`` stream so every partition sees a mix.
"""

from __future__ import annotations

import math

import attrs

from fedemu.fabric.errors import ConfigError
from fedemu.fabric.rand import Stream
from fedemu.model import Cluster

RESOURCE_NAMES = ("cpu", "mem", "disk", "gpu")


@attrs.frozen
class MachineType:
    """One kind of machine: capacity vector, speed factor k_n and its share of the machines."""

    capacity: tuple[int, ...]
    speed: float
    share: float


def resource_names(n: int) -> tuple[str, ...]:
    """The names of an n-entry capacity vector: ``slots`` for one, else cpu, mem, disk, gpu."""
    return ("slots",) if n == 1 else RESOURCE_NAMES[:n]


def parse(text: str, key: str = "machine_types") -> tuple[MachineType, ...]:
    """The types of a ``machine_types`` text; a ConfigError naming ``key`` and the value otherwise."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"parameter {key!r} is {text!r}; {why} (expected e.g. 4x16@1.0:60,8x32@1.5:40)")

    out = []
    for entry in str(text).split(","):
        entry = entry.strip()
        head, sep, share_text = entry.partition(":")
        if not sep:
            raise bad(f"entry {entry!r} has no ':SHARE'")
        cap_text, at, speed_text = head.partition("@")
        try:
            capacity = tuple(int(x) for x in cap_text.split("x"))
            speed = float(speed_text) if at else 1.0
            share = float(share_text)
        except ValueError:
            raise bad(f"entry {entry!r} is not CAPACITY@SPEED:SHARE") from None
        if any(c < 1 or c > 2**31 - 1 for c in capacity):
            raise bad(f"entry {entry!r}: capacities are whole numbers from 1 to 2^31-1")
        if not (math.isfinite(speed) and speed >= 1):
            raise bad(f"entry {entry!r}: the speed is a finite number >= 1")
        if not (math.isfinite(share) and share > 0):
            raise bad(f"entry {entry!r}: the share is a finite number > 0")
        out.append(MachineType(capacity, speed, share))
    if len({len(t.capacity) for t in out}) != 1:
        raise bad("every type must name the same number of resources")
    if len(out[0].capacity) > len(RESOURCE_NAMES):
        raise bad(f"at most {len(RESOURCE_NAMES)} resources ({', '.join(RESOURCE_NAMES)})")
    return tuple(out)


def counts(types: tuple[MachineType, ...], machines: int) -> list[int]:
    """How many of ``machines`` get each type: the proportions, rounded by largest remainder."""
    total = sum(t.share for t in types)
    exact = [machines * t.share / total for t in types]
    out = [math.floor(x) for x in exact]
    order = sorted(range(len(types)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[: machines - sum(out)]:
        out[i] += 1
    return out


def assign(cluster: Cluster, types: tuple[MachineType, ...], stream: Stream) -> Cluster:
    """``cluster`` with each machine's capacity and speed set by its type (constraints unchanged)."""
    specs = []
    for spec in cluster.clusters:
        kinds = [k for k, n in enumerate(counts(types, len(spec.workers))) for _ in range(n)]
        stream.child(f"cluster-{spec.index}").shuffle(kinds)
        workers = tuple(attrs.evolve(w, capacity=types[k].capacity, speed=types[k].speed)
                        for w, k in zip(spec.workers, kinds))
        specs.append(attrs.evolve(spec, workers=workers))
    return attrs.evolve(cluster, clusters=tuple(specs), resources=resource_names(len(types[0].capacity)))


def parse_alpha(text, key: str = "alpha") -> tuple[float, float]:
    """The range (low, high) of the jobs' parallel fraction: ``0.5`` is fixed, ``U(0.2,0.9)`` uniform."""
    s = str(text).strip().replace(" ", "")
    try:
        if s[:2] in ("U(", "u(") and s.endswith(")"):
            low, high = (float(x) for x in s[2:-1].split(","))
        else:
            low = high = float(s)
    except ValueError:
        raise ConfigError(f"parameter {key!r} is {text!r}; expected a number from 0 to 1 or U(a,b) "
                          "with 0 <= a <= b <= 1") from None
    if not 0 <= low <= high <= 1:
        raise ConfigError(f"parameter {key!r} is {text!r}; expected a number from 0 to 1 or U(a,b) "
                          "with 0 <= a <= b <= 1")
    return low, high


@attrs.frozen
class DemandMix:
    """The jobs' demand vectors and their shares (``--set demands=1x2:60,2x4:40``), drawn per job."""

    vectors: tuple[tuple[int, ...], ...]
    shares: tuple[float, ...]

    def draw(self, stream: Stream) -> tuple[int, ...]:
        return self.vectors[stream.weighted_index(self.shares)] if len(self.vectors) > 1 else self.vectors[0]


def parse_vector(text: str, what: str, bad) -> tuple[int, ...]:
    """``2x4`` -> (2, 4): whole numbers from 1 to 2^31-1 joined by ``x``; ``bad(why)`` makes the error."""
    try:
        out = tuple(int(x) for x in str(text).split("x"))
    except ValueError:
        raise bad(f"{what} {text!r} is not whole numbers joined by 'x'") from None
    if not out or any(v < 1 or v > 2**31 - 1 for v in out):
        raise bad(f"{what} {text!r}: each amount is a whole number from 1 to 2^31-1")
    if len(out) > len(RESOURCE_NAMES):
        raise bad(f"{what} {text!r}: at most {len(RESOURCE_NAMES)} resources ({', '.join(RESOURCE_NAMES)})")
    return out


def parse_demands(text: str, key: str = "demands") -> DemandMix:
    """The ``demands`` text ``DEMAND:SHARE,...`` (DEMAND like a machine type's capacity, ``2x4``; SHARE a
    positive proportion; ``2x4`` alone is every job). Every vector names the same number of resources."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"parameter {key!r} is {text!r}; {why} (expected e.g. 1x2:60,2x4:30,4x8:10)")

    vectors, shares = [], []
    for entry in str(text).split(","):
        head, sep, share_text = entry.strip().partition(":")
        vectors.append(parse_vector(head, "demand", bad))
        try:
            share = float(share_text) if sep else 1.0
        except ValueError:
            raise bad(f"entry {entry.strip()!r}: the share is not a number") from None
        if not (math.isfinite(share) and share > 0):
            raise bad(f"entry {entry.strip()!r}: the share is a finite number > 0")
        shares.append(share)
    if len({len(v) for v in vectors}) != 1:
        raise bad("every demand must name the same number of resources")
    return DemandMix(tuple(vectors), tuple(shares))
