"""`fedemu replay LOG`: re-run a recorded run from its header and check it, or print its records.

A journal is data, never code (docs/trust.md): replay imports no file a journal's header names. A re-run
runs the built-in scenario the header names, or the scenario file the user names with ``--scenario
FILE``; records print with the message classes of fedemu's own packages, a user's own kinds as plain
lists unless ``--scenario`` names the file that defines them.
"""

from __future__ import annotations

import os
import sys
import tempfile

from fedemu.fabric.errors import ConfigError, FedemuError, JournalError
from fedemu.fabric.journal import CODE_NAMES, JournalReader, check
from fedemu.fabric.replay import Formatter, compare, describe, unknown
from fedemu.model import seconds_to_us

from ..run import runner


def _checked_header(header: dict) -> dict:
    """The header's scenario, seed and params, checked like user input (a damaged one is a JournalError)."""
    for key, kind in (("scenario", str), ("seed", int), ("params", dict)):
        if not isinstance(header.get(key), kind):
            raise JournalError(f"journal header has no valid {key!r} ({kind.__name__}); found keys: "
                               f"{', '.join(sorted(map(str, header)))}")
    return header


def builtin(recorded: str) -> str | None:
    """``scenarios.X`` when a header's scenario names a built-in scenario X, else None."""
    name = recorded.removeprefix("scenarios.")
    return f"scenarios.{name}" if recorded.startswith("scenarios.") and name in runner.known_scenarios() else None


def _say(text: str) -> None:
    print(f"fedemu: note: {text}", file=sys.stderr)


def scenario_of(header: dict, scenario_file=None, say=_say) -> str:
    """The scenario a re-run of this journal runs: the file the user named (``--scenario FILE``; a line
    says so when the header names another), else the built-in one the header names. A header naming
    a file is refused without ``--scenario``: replay never imports a file a journal names."""
    recorded = _checked_header(header)["scenario"]
    if scenario_file is not None:
        ref = runner.scenario_ref(scenario_file)
        if ref != recorded:
            say(f"re-running {ref}, the scenario you named; the journal was recorded from {recorded}")
        return ref
    ref = builtin(recorded)
    if ref is None:
        raise ConfigError(f"the journal was recorded from the scenario file {recorded}; replay imports no file a "
                          "journal names (docs/trust.md): give --scenario FILE to re-run it")
    return ref


def register_messages(scenario=None) -> None:
    """Register the message classes of fedemu's own schedulers and built-in scenarios, and those of
    ``scenario`` (a ``scenario_ref`` the user named), so records print their fields by name."""
    from fedemu.actors import registry  # noqa: F401 - its import registers every scheduler's messages

    for name in runner.known_scenarios():
        runner.load(f"scenarios.{name}")
    if scenario is not None:
        runner.load(scenario)


def rerun(header: dict, journal_path, progress=None, scenario_file=None, say=_say) -> runner.RunResult:
    """Run again the run a journal header describes (its scenario as ``scenario_of`` says), recording
    to ``journal_path`` (None: not recorded), ``progress`` called between windows as ``runner.execute``
    says.

    Its parameters go through the scenario's own validation (an unknown or mistyped key is a
    ConfigError). A run that fails raises as the recorded one did, its journal kept (see runner)."""
    ref = scenario_of(header, scenario_file, say)
    return runner.execute(ref, seed=header["seed"], overrides=overrides_of(header, ref),
                          journal_path=journal_path, faults=runner.recorded_faults(header), progress=progress)


def overrides_of(header: dict, ref: str) -> dict:
    """The recorded parameters that differ from the scenario's defaults, as the ``--set`` keys of the
    re-run: a key the run did not set is not "given" (a workload's key at the scenario's own default,
    e.g. the fairness scenario's trace in a Poisson run, is not refused as set for nothing)."""
    defaults = runner.load(ref).PARAMS
    return {k: v for k, v in header["params"].items() if k not in defaults or defaults[k] != v
            or type(defaults[k]) is not type(v)}


def ending(footer: dict | None) -> str:
    """`` (run ended with: ...)`` for the journal of a failed run, else empty."""
    return f" (run ended with: {footer['ended']})" if footer and footer.get("ended") else ""


def verify(log_path, out=print, scenario_file=None) -> int:
    """Check the journal, re-run and compare; prints 'identical' (exit 0) or the first differing record
    (exit 1). A damaged journal, or one whose scenario cannot be re-run here, is an error (exit 2),
    found before the re-run starts."""
    header = check(log_path).header
    with tempfile.TemporaryDirectory(prefix="fedemu-replay-") as tmp:
        again = os.path.join(tmp, "again.fjl")
        try:
            rerun(header, again, scenario_file=scenario_file)
        except runner.RunViolation:  # the run ended with a verdict; its journal's footer says which (compared below)
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


def show(log_path, *, actor=None, kind=None, t_from=None, t_to=None, out=print, scenario_file=None,
         say=_say) -> int:
    """Print records matching every filter given, then check the footer's digest; returns 0.

    An ``actor`` not in the header, or a ``kind`` that is neither a record type nor a message kind
    of this run, is a ConfigError listing the known names. Nothing the journal names is imported: a
    user's own message kinds print as plain lists unless ``scenario_file`` names the file of its run."""
    shown, total, footer = select(log_path, lambda index, rec, line, fmt: out(line), actor=actor, kind=kind,
                                  t_from=t_from, t_to=t_to, scenario_file=scenario_file, say=say)
    out(f"-- {shown} of {total} records shown; footer (digest checked): {footer}{ending(footer)}")
    return 0


def select(log_path, emit, *, actor=None, kind=None, t_from=None, t_to=None, scenario_file=None,
           say=_say) -> tuple[int, int, dict]:
    """``emit(index, record, line, formatter)`` for each record matching every filter given (``show``'s,
    checked as it says); returns how many matched, how many records there were, and the footer (its
    digest checked)."""
    reader = JournalReader(log_path)
    try:
        names = reader.header.get("actors", [])
        names = list(names) if isinstance(names, (list, tuple)) else []
        if actor is not None and actor not in names and actor != "outside":
            raise unknown("actor", actor, names)
        recorded = reader.header.get("scenario")
        ref = None if scenario_file is None else scenario_of(reader.header, scenario_file, say)
        if ref is None and isinstance(recorded, str) and builtin(recorded) is None:
            say(f"the journal was recorded from the scenario file {recorded}, which replay does not import "
                "(docs/trust.md): its own message kinds print as plain lists; --scenario FILE names their fields")
        register_messages(ref)
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
            emit(index, rec, line, fmt)
            shown += 1
    finally:
        reader.close()
    if kind is not None and shown == 0 and kind not in CODE_NAMES and kind not in fmt.kinds.values():
        tags = sorted(set(fmt.kinds.values()))
        raise unknown("--kind (a record type, or a message kind of this run)", kind, [*CODE_NAMES, *tags])
    return shown, total, reader.footer
