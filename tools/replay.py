"""`fedemu replay LOG`: re-run a recorded run from its header and check it, or print its records."""

from __future__ import annotations

import os
import tempfile

from fedemu.fabric.errors import JournalError
from fedemu.fabric.journal import CODE_NAMES, JournalReader
from fedemu.fabric.replay import Formatter, compare, describe

from . import runner


def rerun(header: dict, journal_path) -> runner.RunResult:
    """Run again the scenario a journal header describes, recording to ``journal_path``.

    The header is checked like user input: a damaged one is a JournalError, and its parameters go
    through the scenario's own validation (an unknown or mistyped key is a ConfigError)."""
    for key, kind in (("scenario", str), ("seed", int), ("params", dict)):
        if not isinstance(header.get(key), kind):
            raise JournalError(f"journal header has no valid {key!r} ({kind.__name__}); found keys: "
                               f"{', '.join(sorted(map(str, header)))}")
    return runner.execute(header["scenario"], seed=header["seed"], overrides=header["params"],
                          journal_path=journal_path)


def verify(log_path, out=print) -> int:
    """Re-run and compare; prints 'identical' (exit 0) or the first differing record (exit 1)."""
    reader = JournalReader(log_path)
    header = reader.header
    reader.close()
    with tempfile.TemporaryDirectory(prefix="fedemu-replay-") as tmp:
        again = os.path.join(tmp, "again.fjl")
        rerun(header, again)
        return report_comparison(log_path, again, header, "identical: {count} records, digest matches", out)


def report_comparison(expected, got, header: dict, same: str, out=print) -> int:
    """Compare two journals; print ``same`` (with {count}) and return 0, or the divergence and 1."""
    names = header.get("actors", [])
    fmt = Formatter(list(names) if isinstance(names, (list, tuple)) else [])
    div, count = compare(expected, got, fmt)
    if div is None:
        out(same.format(count=count))
        return 0
    out(describe(div, fmt.names, fmt))
    return 1


def parse_time(text: str | None) -> int | None:
    """Seconds (float) to microseconds; None passes through."""
    return None if text is None else int(round(float(text) * 1e6))


def show(log_path, *, actor=None, kind=None, t_from=None, t_to=None, out=print) -> int:
    """Print records matching every filter given; returns 0."""
    reader = JournalReader(log_path)
    fmt = Formatter(reader.header.get("actors", []))
    lo, hi = parse_time(t_from), parse_time(t_to)
    shown = 0
    for index, _, rec in reader.records():
        line = fmt.format(index, rec)  # also learns message kinds for later deliveries
        if lo is not None and rec[1] < lo or hi is not None and rec[1] > hi:
            continue
        if actor is not None and actor not in fmt.actors_of(rec):
            continue
        if kind is not None and kind != fmt.kind_of(rec) and kind != CODE_NAMES[rec[0]]:
            continue
        out(line)
        shown += 1
    out(f"-- {shown} records shown; footer: {reader.footer}")
    return 0
