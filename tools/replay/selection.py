"""Which part of a run a diagram or a trace shows: a window of virtual time, actors (by name or role),
one job, message kinds. A message is in when it arrives (or is dropped) inside the window, one of its
ends is a chosen actor, it is about the job and its kind matches."""

from __future__ import annotations

import fnmatch

import attrs

from fedemu.fabric.errors import ConfigError
from fedemu.model import seconds_to_us

from . import roles
from .timeline import FaultEvent, Fire, Message

RECORD_KINDS = ("deliver", "drop", "fire")  # what --kind may name besides message and timer kinds


@attrs.frozen
class Selection:
    t_from: int | None = None  # microseconds, inclusive
    t_to: int | None = None
    actors: frozenset[int] | None = None
    job: int | None = None
    kinds: tuple[str, ...] | None = None  # message/timer kinds (fnmatch patterns) or RECORD_KINDS
    given: tuple[str, ...] = ()  # the filters as the command line gave them, for messages
    named: frozenset[int] = frozenset()  # actors named one by one (not by role): a diagram draws their lanes

    @classmethod
    def parse(cls, names: list[str], *, t_from=None, t_to=None, actor=None, job=None, kind=None) -> "Selection":
        """From the command line's text (seconds, comma-separated names and roles, a job number, kinds)."""
        lo = None if t_from is None else seconds_to_us(float(t_from))
        hi = None if t_to is None else seconds_to_us(float(t_to))
        if lo is not None and hi is not None and hi < lo:
            raise ConfigError(f"--to {t_to} is before --from {t_from}")
        given = [f"--from {t_from}"] * (t_from is not None) + [f"--to {t_to}"] * (t_to is not None)
        chosen, named = None, frozenset()
        if actor is not None:
            chosen, items = roles.select(names, actor)
            given.append(f"--actor {','.join(items)}")
            named = frozenset(names.index(item) for item in items if item in names)
        number = None
        if job is not None:
            try:
                number = int(job)
            except ValueError:
                raise ConfigError(f"--job {job!r}: expected a job number, e.g. 3") from None
            given.append(f"--job {number}")
        kinds = None
        if kind is not None:
            kinds = tuple(k.strip() for k in kind.split(",") if k.strip())
            if not kinds:
                raise ConfigError(f"--kind {kind!r}: expected comma-separated message kinds")
            given.append(f"--kind {','.join(kinds)}")
        return cls(lo, hi, chosen, number, kinds, tuple(given), named)

    def in_window(self, at_us: int) -> bool:
        return (self.t_from is None or at_us >= self.t_from) and (self.t_to is None or at_us <= self.t_to)

    def _kind(self, kind: str, record: str) -> bool:
        return self.kinds is None or any(k == record or fnmatch.fnmatchcase(kind, k) for k in self.kinds)

    def message(self, m: Message, timeline) -> bool:
        if not self.in_window(m.at_us):
            return False
        if self.actors is not None and m.src not in self.actors and m.dst not in self.actors:
            return False
        if not self._kind(m.kind, "drop" if m.dropped else "deliver"):
            return False
        return self.job is None or self.job in timeline.job_of(m.kind, m.values)

    def fire(self, f: Fire, timeline) -> bool:
        if not self.in_window(f.at_us) or (self.actors is not None and f.actor not in self.actors):
            return False
        if not self._kind(f.kind, "fire"):
            return False
        return self.job is None or self.job in timeline.job_of(f.kind, f.values)

    def fault(self, f: FaultEvent) -> bool:
        return self.in_window(f.at_us)

    def check_kinds(self, seen: set[str]) -> None:
        """Once the journal is read: a --kind item that matches no kind of this run is a ConfigError
        listing those it has (a typo draws nothing otherwise)."""
        for k in self.kinds or ():
            if k not in RECORD_KINDS and not any(fnmatch.fnmatchcase(s, k) for s in seen):
                close = sorted(seen)
                raise ConfigError(f"--kind {k!r} matches no message or timer kind of this run; known: "
                                  f"{', '.join([*RECORD_KINDS, *close])}")

    def text(self) -> str:
        return " ".join(self.given) or "(none)"
