"""`fedemu replay LOG`: re-run a recorded run from its header and check it, or print its records."""

from __future__ import annotations

import os
import tempfile

from fedemu.fabric.errors import FedemuError, JournalError, RunViolation
from fedemu.fabric.journal import CODE_NAMES, JournalReader, check
from fedemu.fabric.replay import Formatter, compare, describe, unknown
from fedemu.model import seconds_to_us

from . import runner


def _checked_header(header: dict) -> dict:
    """The header's scenario, seed and params, checked like user input (a damaged one is a JournalError)."""
    for key, kind in (("scenario", str), ("seed", int), ("params", dict)):
        if not isinstance(header.get(key), kind):
            raise JournalError(f"journal header has no valid {key!r} ({kind.__name__}); found keys: "
                               f"{', '.join(sorted(map(str, header)))}")
    return header


def rerun(header: dict, journal_path, progress=None) -> runner.RunResult:
    """Run again the scenario a journal header describes, recording to ``journal_path`` (None: not
    recorded), ``progress`` called between windows as ``runner.execute`` says.

    Its parameters go through the scenario's own validation (an unknown or mistyped key is a
    ConfigError). A run that fails raises as the recorded one did, its journal kept (see runner)."""
    _checked_header(header)
    return runner.execute(header["scenario"], seed=header["seed"], overrides=header["params"],
                          journal_path=journal_path, faults=runner.recorded_faults(header), progress=progress)


def ending(footer: dict | None) -> str:
    """`` (run ended with: ...)`` for the journal of a failed run, else empty."""
    return f" (run ended with: {footer['ended']})" if footer and footer.get("ended") else ""


def verify(log_path, out=print) -> int:
    """Check the journal, re-run and compare; prints 'identical' (exit 0) or the first differing record
    (exit 1). A damaged journal is a JournalError (exit 2), found before the re-run starts."""
    load_messages(JournalReader(log_path).header)  # nested messages (a resubmitted Job) decode by their class
    header = check(log_path).header
    with tempfile.TemporaryDirectory(prefix="fedemu-replay-") as tmp:
        again = os.path.join(tmp, "again.fjl")
        try:
            rerun(header, again)
        except RunViolation:  # the run ended with a verdict; its journal's footer says which (compared below)
            pass
        except FedemuError:
            raise
        except Exception:  # noqa: BLE001 - the run failed; its journal, kept, says how (compared below)
            if not os.path.exists(again):
                raise
        return report_comparison(log_path, again, header, "identical: {count} records, digest matches{ended}", out)


def report_comparison(expected, got, header: dict, same: str, out=print) -> int:
    """Compare two journals; print ``same`` (with {count} and {ended}) and return 0, or the divergence and 1."""
    names = header.get("actors", [])
    fmt = Formatter(list(names) if isinstance(names, (list, tuple)) else [])
    div, count = compare(expected, got, fmt)
    if div is None:
        out(same.format(count=count, ended=ending(fmt.footer)))
        return 0
    out(describe(div, fmt.names, fmt))
    return 1


def parse_time(text: str | None) -> int | None:
    """Seconds (float) to microseconds; None passes through."""
    return None if text is None else seconds_to_us(float(text))


def load_messages(header: dict) -> None:
    """Import the recorded scenario so its message classes are registered (field names for ``show``);
    a scenario that is gone or fails to load only costs the names."""
    try:
        runner.load(runner.scenario_ref(_checked_header(header)["scenario"]))
    except Exception:  # noqa: BLE001 - the records still print, as plain lists
        pass


def show(log_path, *, actor=None, kind=None, t_from=None, t_to=None, out=print) -> int:
    """Print records matching every filter given, then check the footer's digest; returns 0.

    An ``actor`` not in the header, or a ``kind`` that is neither a record type nor a message kind
    of this run, is a ConfigError listing the known names."""
    reader = JournalReader(log_path)
    try:
        names = reader.header.get("actors", [])
        names = list(names) if isinstance(names, (list, tuple)) else []
        if actor is not None and actor not in names and actor != "outside":
            raise unknown("actor", actor, names)
        load_messages(reader.header)
        fmt = Formatter(names)
        lo, hi = parse_time(t_from), parse_time(t_to)
        shown = total = 0
        for index, _, rec in reader.records():
            total += 1
            line = fmt.format(index, rec)  # also learns message kinds for later deliveries
            if lo is not None and rec[1] < lo or hi is not None and rec[1] > hi:
                continue
            if actor is not None and actor not in fmt.actors_of(rec):
                continue
            if kind is not None and kind != fmt.kind_of(rec) and kind != CODE_NAMES[rec[0]]:
                continue
            out(line)
            shown += 1
    finally:
        reader.close()
    if kind is not None and shown == 0 and kind not in CODE_NAMES and kind not in fmt.kinds.values():
        tags = sorted(set(fmt.kinds.values()))
        raise unknown("--kind (a record type, or a message kind of this run)", kind, [*CODE_NAMES, *tags])
    out(f"-- {shown} of {total} records shown; footer (digest checked): {reader.footer}{ending(reader.footer)}")
    return 0
