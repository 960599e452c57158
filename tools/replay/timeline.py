"""A journal read as a timeline: each message's arrival (or drop) joined to its send, timer fires and
faults, in the order the fabric recorded them, named from the journal's header.

Only the journal is read: no file it names is imported (a journal is data). The message classes of
the built-in schedulers and scenarios are registered, so fields have names and nested messages
decode; a message of an unknown class keeps its plain values.
"""

from __future__ import annotations

import importlib
import re

import attrs

from fedemu.fabric import messages
from fedemu.fabric.journal import DELIVER, DROP, FAULT, SEND, TIMER_FIRE, TIMER_SET, JournalReader
from fedemu.fabric.replay import BROKEN, Formatter

OUTSIDE = -1  # the sender of messages the scenario injects


@attrs.frozen
class Message:
    """One arrival of a message at ``at_us`` (``outcome`` "deliver"; "duplicate", the second copy of a
    duplicated one, only in journals from before connections), or its drop (``outcome`` the cause:
    "broken" with its connection, "refused" by a receiver that was down, "dead" for an injected one; before
    connections also "loss" at the send and "partition"). See docs/connections.md."""

    index: int  # the journal record of the arrival or drop
    at_us: int
    src: int
    seq: int
    dst: int
    kind: str
    sent_us: int
    values: tuple
    outcome: str
    sent_index: int  # the journal record of the send
    tries: int = 0  # retransmissions before it was delivered (a connection's loss or partition delays it)

    @property
    def dropped(self) -> bool:
        return self.outcome not in ("deliver", "duplicate")


@attrs.frozen
class Fire:
    """A timer of ``actor`` that fired at ``at_us`` (set at ``set_us``)."""

    index: int
    at_us: int
    actor: int
    seq: int
    kind: str
    set_us: int
    values: tuple


@attrs.frozen
class Break:
    """Connection ``src`` -> ``dst`` broke at ``at_us`` (``cause``: crash, timeout or refused), as the
    fabric's notices to its live ends say (``fabric.connections``); what was sent on it and not
    delivered is dropped as "broken". One per break, however many ends were told."""

    index: int  # the journal record of its first notice
    at_us: int
    src: int
    dst: int
    cause: str


@attrs.frozen
class FaultEvent:
    """A fault applied at ``at_us``: ``target`` as the plan named it (actor names), ``value`` its factor or
    probability."""

    index: int
    at_us: int
    kind: str
    target: tuple
    value: float


def _register_messages(header: dict) -> None:
    """Register the message classes of the built-in schedulers, and of the recorded scenario when it is
    one of the project's own (``scenarios.demo``): field names, nested messages. A file the header
    names is never imported (a journal is data); its messages keep their plain values."""
    from fedemu.actors import registry  # noqa: F401 - importing it registers every scheduler's messages

    scenario = header.get("scenario")
    if isinstance(scenario, str) and re.fullmatch(r"scenarios\.[a-z_][a-z0-9_]*", scenario):
        try:
            importlib.import_module(f"fedemu.{scenario}")
        except ImportError:  # a scenario this version does not have: plain values
            pass


class Timeline:
    """A journal opened for reading: ``names``, ``header``; ``events()`` once; then ``footer``."""

    def __init__(self, path) -> None:
        self.path = path
        self.reader = JournalReader(path)
        _register_messages(self.reader.header)
        names = self.reader.header.get("actors", [])
        self.names: list[str] = list(names) if isinstance(names, (list, tuple)) else []
        self.formatter = Formatter(self.names)
        self.sent = 0

    @property
    def header(self) -> dict:
        return self.reader.header

    @property
    def footer(self) -> dict:
        return self.reader.footer or {}

    def name(self, idx: int) -> str:
        return self.formatter.name(idx)

    def label(self, kind: str, values: tuple) -> str:
        """``kind name=value ...`` (times in seconds) for a message or timer."""
        return f"{kind}{self.formatter.fields(kind, values)}"

    def events(self):
        """Yield Message, Fire, FaultEvent and Break in journal order (each connection break once, when
        its first notice is made; the notices themselves arrive as messages from outside); the digest is checked at the end (a
        damaged journal raises JournalError there or where the damage is)."""
        sends: dict[tuple[int, int], tuple] = {}  # (src, seq) -> (sent_us, dst, kind, values, record)
        timers: dict[tuple[int, int], tuple] = {}  # (actor, seq) -> (set_us, kind, values), pending
        last_key, last = None, None  # the message that arrived or dropped last: a duplicate copy follows it
        breaks: set[tuple[int, int, int]] = set()  # (src, dst, at) of the connection breaks told so far
        try:
            for index, offset, rec in self.reader.records():
                code = rec[0]
                if code == SEND:
                    if rec[2] == OUTSIDE and rec[6] == BROKEN and len(rec[7]) == 4:  # the fabric's notice
                        src, dst, at_us, cause = rec[7]
                        self.reader.check_actor(src, offset, index)  # indices too, in the notice's fields
                        self.reader.check_actor(dst, offset, index)
                        if (src, dst, at_us) not in breaks:
                            breaks.add((src, dst, at_us))
                            yield Break(index, at_us, src, dst, cause)
                    sends[(rec[2], rec[3])] = (rec[1], rec[4], rec[6], rec[7], index)
                    self.sent += 1
                elif code in (DELIVER, DROP):
                    key = (rec[2], rec[3])
                    if code == DROP and rec[5] == "stale-timer":
                        timers.pop(key, None)
                        continue
                    sent = sends.pop(key, None)
                    if sent is None:
                        sent = last if key == last_key else None
                    if sent is None:  # a send before the journal began cannot be: a damaged journal
                        continue
                    last_key, last = key, sent
                    outcome = "deliver" if code == DELIVER else rec[5]
                    tries = rec[5] if code == DELIVER else 0  # a delivery's rec[5]: its retransmissions
                    yield Message(index, rec[1], rec[2], rec[3], sent[1], sent[2], sent[0], sent[3], outcome, sent[4],
                                  tries)
                elif code == TIMER_SET:
                    timers[(rec[2], rec[3])] = (rec[1], rec[5], rec[6])
                elif code == TIMER_FIRE:
                    set_ = timers.pop((rec[2], rec[3]), None)
                    if set_ is not None:
                        yield Fire(index, rec[1], rec[2], rec[3], set_[1], set_[0], set_[2])
                elif code == FAULT:
                    yield FaultEvent(index, rec[1], rec[3], rec[4], rec[5])
        finally:
            self.reader.close()

    def job_of(self, kind: str, values: tuple) -> set[int]:
        """The jobs a message or timer is about: every ``job_id`` among its fields and the messages
        nested in them (a resubmitted Job); empty when its class is unknown."""
        try:
            msg = messages.decode(kind, values)
        except Exception:  # noqa: BLE001 - an unknown class or changed fields: no job known
            return set()
        found: set[int] = set()
        _jobs(msg, found, 0)
        return found


def _jobs(obj, found: set[int], depth: int) -> None:
    if depth > 4:
        return
    if attrs.has(type(obj)):
        job = getattr(obj, "job_id", None)
        if isinstance(job, int) and not isinstance(job, bool):
            found.add(job)
        for field in attrs.fields(type(obj)):
            value = getattr(obj, field.name)
            if attrs.has(type(value)) or isinstance(value, tuple):
                _jobs(value, found, depth + 1)
    elif isinstance(obj, tuple):
        for item in obj:
            if attrs.has(type(item)):
                _jobs(item, found, depth + 1)
