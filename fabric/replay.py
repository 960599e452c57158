"""Reading journals back: compare two record streams, and print records in readable form."""

from __future__ import annotations

import difflib
import re

import attrs

from . import messages
from .connections import ConnectionBroken
from .errors import ConfigError
from .journal import CODE_NAMES, DELIVER, DROP, FAULT, SEND, TIMER_FIRE, TIMER_SET, JournalReader


@attrs.frozen
class Divergence:
    """The first record where two journals differ (``expected``/``got`` None past an end)."""

    index: int
    time_us: int | None
    expected: tuple | None
    got: tuple | None
    reason: str = ""


BROKEN = ConnectionBroken._fedemu_tag
STOPPED_EARLY = "stopped early"  # how a journal's footer begins when the live view's q ended the run


def compare(expected_path, got_path, formatter: "Formatter | None" = None) -> tuple[Divergence | None, int]:
    """Walk two journals in lockstep; returns (first divergence or None, records compared).

    Damage in either journal (truncation, a failed checksum, a digest mismatch) is not a divergence:
    it raises JournalError. Different footers (counts, or how the run ended) are a divergence.
    ``formatter`` (if given) learns message kinds along the way, so the divergence can be described
    with them, and the expected journal's footer once it is reached. A recording stopped early (the
    live view's q: its footer's ``ended`` says so) is compared as a prefix: the re-run goes on past it."""
    exp = JournalReader(expected_path)
    got = JournalReader(got_path)
    try:
        differ = actors_differ(exp.header["actors"], got.header["actors"])
        if differ:  # the records name actors by index: a list edited in the header renames them all
            return Divergence(0, None, None, None, f"the header's actors differ from the re-run's: {differ}"), 0
        it_got = got.records()
        count = 0
        for index, _, rec in exp.records():
            other = next(it_got, None)
            if other is None:
                return Divergence(index, rec[1], rec, None, "the re-run ended earlier"), count
            if other[2] != rec:
                return Divergence(index, rec[1], rec, other[2], "records differ"), count
            if formatter is not None:
                formatter.kind_of(rec)
            count += 1
        if str(exp.footer.get("ended", "")).startswith(STOPPED_EARLY):
            if formatter is not None:
                formatter.footer = exp.footer
            return None, count  # every recorded record matched; the recording stopped there
        extra = next(it_got, None)
        if extra is not None:
            return Divergence(extra[0], extra[2][1], None, extra[2], "the re-run has more records"), count
        diff = sorted((k for k in set(exp.footer) | set(got.footer) if exp.footer.get(k) != got.footer.get(k)),
                      key=repr)
        if formatter is not None:
            formatter.footer = exp.footer
        if diff:
            detail = ", ".join(f"{k}: expected {exp.footer.get(k)!r}, got {got.footer.get(k)!r}" for k in diff)
            return Divergence(count, None, None, None, f"footers differ ({detail})"), count
        return None, count
    finally:
        exp.close()
        got.close()


def actors_differ(recorded, rerun) -> str:
    """Where a journal header's actor names differ from a re-run's, in words ("" when they are the same):
    the first differing position, or the lengths."""
    recorded, rerun = list(recorded), list(rerun)
    if recorded == rerun:
        return ""
    for i, (a, b) in enumerate(zip(recorded, rerun)):
        if a != b:
            return f"actor {i} is {a!r} in the journal, {b!r} in the re-run"
    return f"the journal lists {len(recorded)} actors, the re-run has {len(rerun)}"


def _t(us) -> str:
    return "?" if us is None else f"{us / 1e6:.6f}s"


def _value(name: str, value) -> str:
    """``name=value``; a ``*_us`` integer is shown in seconds under the name without ``_us``."""
    if name.endswith("_us") and type(value) is int:
        return f"{name[:-3]}={_t(value)}"
    return f"{name}={value!r}"


def name_ranges(names) -> str:
    """Names listed compactly: ``gm-0..gm-9, lm-0..lm-99, submitter`` (numbered runs folded)."""
    groups: dict[str, list[int]] = {}
    out: list[tuple[str, str]] = []
    for name in names:
        m = re.fullmatch(r"(.*?)(0|[1-9][0-9]*)", name)
        if m is None:
            out.append((name, name))
        else:
            groups.setdefault(m.group(1), []).append(int(m.group(2)))
    for prefix, nums in groups.items():
        nums.sort()
        lo = prev = nums[0]
        for n in nums[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            text = f"{prefix}{lo}" if lo == prev else f"{prefix}{lo}..{prefix}{prev}"
            out.append((f"{prefix}{lo:020d}", text))
            if n is not None:
                lo = prev = n
    return ", ".join(text for _, text in sorted(out))


def unknown(what: str, value: str, known) -> ConfigError:
    """'unknown X' naming the closest known names first, then all of them compactly."""
    known = list(known)
    close = difflib.get_close_matches(value, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ConfigError(f"unknown {what} {value!r}{hint}; known: {name_ranges(known) or '(none)'}")


class Formatter:
    """Turns records into one-line text, naming actors from the header, message kinds from sends, and
    message fields from the registered message classes."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.kinds: dict[tuple[int, int], str] = {}
        self._fields: dict[str, tuple[str, ...] | None] = {}
        self._required: dict[str, int] = {}  # per tag: the fields without a default
        self.footer: dict | None = None

    def fields(self, tag: str | None, values: tuple) -> str:
        """A message's fields as `` name=value`` pairs (times in seconds) when its class is registered,
        else as the plain list the journal holds; empty when there are none."""
        if not values:
            return ""
        names = self._fields.get(tag, ())
        if names == ():
            try:
                fields = attrs.fields(type(messages.decode(tag, values)))
                names = tuple(f.name for f in fields)
                self._required[tag] = sum(f.default is attrs.NOTHING for f in fields)
            except Exception:  # noqa: BLE001 - unregistered tag, or a class that changed since the recording
                names = None
            self._fields[tag] = names
        # (fewer values than fields: trailing defaults left out, see ``messages.lean``)
        if names is None or not self._required[tag] <= len(values) <= len(names):
            return f" {list(values)!r}"
        return "".join(" " + _value(n, v) for n, v in zip(names, values))

    def name(self, idx: int) -> str:
        return "outside" if idx < 0 else (self.names[idx] if idx < len(self.names) else f"#{idx}")

    def kind_of(self, rec: tuple) -> str | None:
        """Message tag a record is about (sends and timers carry it; deliveries look it up)."""
        code = rec[0]
        if code in (SEND, TIMER_SET):
            self.kinds[(rec[2], rec[3])] = rec[-2]
            return rec[-2]
        if code in (DELIVER, DROP):
            return self.kinds.get((rec[2], rec[3]))
        if code == TIMER_FIRE:
            return self.kinds.get((rec[2], rec[3]))
        return None

    def actors_of(self, rec: tuple) -> tuple[str, ...]:
        code = rec[0]
        if code in (SEND, DELIVER, DROP):
            return (self.name(rec[2]), self.name(rec[4]))
        if code in (TIMER_SET, TIMER_FIRE):
            return (self.name(rec[2]),)
        if code == FAULT:
            flat = []
            for t in rec[4]:
                flat.extend(t if isinstance(t, tuple) else (t,))
            return tuple(flat)
        return ()

    def format(self, index: int, rec: tuple) -> str:
        try:
            return self._format(index, rec)
        except (TypeError, IndexError, ValueError):  # a damaged record: show it raw
            return f"[{index:>8}] (malformed) {rec!r}"

    def _format(self, index: int, rec: tuple) -> str:
        code = rec[0]
        head = f"[{index:>8}] {_t(rec[1]):>16} {CODE_NAMES[code]:<7}"
        kind = self.kind_of(rec)
        if code == SEND:
            if kind == BROKEN and len(rec[7]) == 4:  # the fabric's notice: name the connection's actors
                src, dst, at_us, cause = rec[7]
                return (f"{head} fabric -> {self.name(rec[4])} #{rec[3]} {kind}: connection {self.name(src)} -> "
                        f"{self.name(dst)} broke at {_t(at_us)} ({cause}) due {_t(rec[5])}")
            return (f"{head} {self.name(rec[2])} -> {self.name(rec[4])} #{rec[3]} {kind}{self.fields(kind, rec[7])} "
                    f"due {_t(rec[5])}")
        if code == DELIVER:
            tries = f" (after {rec[5]} retransmission{'s' if rec[5] > 1 else ''})" if rec[5] else ""
            return f"{head} {self.name(rec[2])} -> {self.name(rec[4])} #{rec[3]} {kind}{tries}"
        if code == DROP:
            return f"{head} {self.name(rec[2])} -> {self.name(rec[4])} #{rec[3]} {kind} cause={rec[5]}"
        if code == TIMER_SET:
            return f"{head} {self.name(rec[2])} #{rec[3]} {kind}{self.fields(kind, rec[6])} fires {_t(rec[4])}"
        if code == TIMER_FIRE:
            return f"{head} {self.name(rec[2])} #{rec[3]} {kind}"
        return f"{head} {rec[3]} target={list(rec[4])} value={rec[5]}"


def describe(div: Divergence, names: list[str], formatter: "Formatter | None" = None) -> str:
    """A human-readable account of a divergence (``formatter``: one that saw the records before it)."""
    fmt = formatter or Formatter(names)
    lines = [f"journals diverge at record {div.index} (virtual time {_t(div.time_us)}): {div.reason}"]
    lines.append("  expected: " + (fmt.format(div.index, div.expected) if div.expected else "(nothing)"))
    lines.append("  got:      " + (fmt.format(div.index, div.got) if div.got else "(nothing)"))
    return "\n".join(lines)
