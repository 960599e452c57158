"""Streaming loader for ``.tr`` workload traces (the Megha/Eagle simulator format).

One job per line: ``arrival_s num_tasks mean_task_duration_s dur_1 ... dur_n`` in seconds; blank lines
are skipped. Our extension, optional per line and invisible to readers of the plain format's fields:
``key=value`` fields after the durations, ``demand=2x4`` (the job's demand vector, whole numbers >= 1
joined by ``x``), ``alpha=0.6`` (its parallel fraction, 0 to 1) and ``user=K`` (its user, for Megha's
fairness with ``user_assign=trace``; readers that do not ask for users ignore it); a line without them
takes the run's ``demand``/``demands`` and ``alpha``. Times become integer microseconds; a malformed
line raises ``TraceError("FILE:LINE: ...")``.
Every time must lie in [0, MAX_TRACE_S]: a larger one would overflow the journal's 64-bit integers or
the per-second utilization series long before the run could finish. A line is at most MAX_LINE_CHARS
characters (16 Mi: a million durations): a longer one, e.g. a huge file without newlines, is refused
before it is held in memory.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from fedemu.fabric.errors import ConfigError, FedemuError
from fedemu.fabric.inputs import open_regular
from fedemu.model import US_PER_S, Job, seconds_to_us

from . import machines


class TraceError(FedemuError):
    """A workload trace is malformed; the message is ``FILE:LINE: what is wrong``."""

# A task whose duration rounds to 0 us is stretched to this: a zero-length task would finish at the
# instant it starts, tying its completion with its own launch, and that tie would decide event order.
MIN_TASK_US = 1

# The largest time a trace may give, in seconds (about 116 days; real traces span at most a month).
MAX_TRACE_S = 1e7

MAX_LINE_CHARS = 16 << 20

_HEAD = ("arrival_s", "num_tasks", "mean_task_duration_s")


def _field_name(index: int) -> str:
    """The name of 0-based field ``index``: arrival_s, num_tasks, mean_task_duration_s, dur_1, ..."""
    return _HEAD[index] if index < 3 else f"dur_{index - 2}"


def _check_count(value, what: str, minimum: int) -> None:
    """Reject a count parameter that is not an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{what} is {value!r}, expected an integer >= {minimum}")


def _check_file(path: str | os.PathLike) -> None:
    """Raise a TraceError naming ``path`` unless it is an existing regular file."""
    p = Path(path)
    if not p.exists():
        raise TraceError(f"{path}: no such trace file")
    if not p.is_file():
        raise TraceError(f"{path}: is not a regular file")


def _open(path):
    """Open a trace for reading text; undecodable bytes become U+FFFD so they fail as bad numbers."""
    try:
        return open_regular(path, "a trace file", "r", TraceError, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise TraceError(f"{path}: cannot read trace: {exc.strerror}") from None


def _lines(f, path) -> Iterator[tuple[int, str]]:
    """(line number, line) of an open trace, each read with a bound: a line longer than MAX_LINE_CHARS
    is a TraceError naming it."""
    lineno = 0
    while True:
        line = f.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        lineno += 1
        if len(line) > MAX_LINE_CHARS:
            raise TraceError(f"{path}:{lineno}: the line is longer than {MAX_LINE_CHARS:,} characters (a trace line "
                             "is one job: arrival, task count, mean and one duration per task)")
        yield lineno, line


EXTRA_KEYS = ("alpha", "demand", "user")


def _extras(path, lineno: int, fields: list[str]) -> tuple[list[str], dict]:
    """Split a line into its plain fields and its trailing ``key=value`` fields, parsed."""
    n = len(fields)
    while n and "=" in fields[n - 1]:
        n -= 1
    out: dict = {}
    for k, tok in enumerate(fields[:n], 1):
        if "=" in tok:
            raise TraceError(f"{path}:{lineno}: field {k} ({tok!r}): key=value fields come after the durations")
    for k, tok in enumerate(fields[n:], n + 1):
        key, _, value = tok.partition("=")
        if key not in EXTRA_KEYS:
            raise TraceError(f"{path}:{lineno}: field {k} ({tok!r}) has unknown key {key!r}; known: "
                             f"{', '.join(EXTRA_KEYS)}")
        if key in out:
            raise TraceError(f"{path}:{lineno}: field {k} ({tok!r}) gives {key} a second time")
        if key == "demand":
            def bad(why: str) -> TraceError:
                return TraceError(f"{path}:{lineno}: field {k} ({tok!r}): {why}")
            out[key] = machines.parse_vector(value, "demand", bad)
        elif key == "user":
            if not (value.isascii() and value.isdigit()):
                raise TraceError(f"{path}:{lineno}: field {k} ({tok!r}): user is a whole number from 0")
            out[key] = int(value)
        else:
            try:
                alpha = float(value) if "_" not in value else math.nan
            except ValueError:
                alpha = math.nan
            if not 0 <= alpha <= 1:
                raise TraceError(f"{path}:{lineno}: field {k} ({tok!r}): alpha is a number from 0 to 1")
            out[key] = alpha
    return fields[:n], out


def _num_tasks(path, lineno: int, fields: list[str]) -> int:
    """Parse field 2 and check the line has exactly that many durations."""
    if len(fields) < 3:
        raise TraceError(
            f"{path}:{lineno}: the line has {len(fields)} field{'s' if len(fields) != 1 else ''}, "
            "expected arrival_s num_tasks mean_task_duration_s dur_1 ... dur_n"
        )
    tok = fields[1]
    n = int(tok) if tok.isascii() and tok.isdigit() else 0
    if n < 1:
        raise TraceError(f"{path}:{lineno}: field 2 (num_tasks) is {tok!r}, expected a positive integer")
    if len(fields) != n + 3:
        raise TraceError(f"{path}:{lineno}: num_tasks is {n} but the line has {len(fields) - 3} durations")
    return n


def _seconds(path, lineno: int, fields: list[str], index: int) -> float:
    """Parse field ``index`` as a number of seconds in [0, MAX_TRACE_S]."""
    tok = fields[index]
    try:
        if "_" in tok:  # float() would accept Python's digit separators; a trace never has them
            raise ValueError(tok)
        value = float(tok)
    except ValueError:
        raise TraceError(
            f"{path}:{lineno}: field {index + 1} ({_field_name(index)}) is {tok!r}, expected a number"
        ) from None
    if not math.isfinite(value) or value < 0:
        raise TraceError(
            f"{path}:{lineno}: field {index + 1} ({_field_name(index)}) is {tok!r}, "
            "expected a finite number >= 0"
        )
    if value > MAX_TRACE_S:
        raise TraceError(
            f"{path}:{lineno}: field {index + 1} ({_field_name(index)}) is {tok!r}, "
            f"more than the largest time a trace may give, {MAX_TRACE_S:.0e} s"
        )
    return value


def _parse_line(path, lineno: int, fields: list[str]) -> tuple[int, tuple[int, ...]]:
    """Validate one split line and return (arrival_us, durations_us)."""
    n = _num_tasks(path, lineno, fields)
    arrival_us = seconds_to_us(_seconds(path, lineno, fields, 0))
    _seconds(path, lineno, fields, 2)  # the trace's own mean is checked but not used: Job derives it
    seconds = _plain_seconds(fields[3:])
    if seconds is None:  # some duration is not a plain number in range: the field-by-field read names it
        seconds = [_seconds(path, lineno, fields, i) for i in range(3, n + 3)]
    return arrival_us, durations_us(seconds)


VECTOR_FROM = 16  # a line with this many durations or more has them converted with numpy


def durations_us(seconds: list[float]) -> tuple[int, ...]:
    """Each duration (seconds, in [0, MAX_TRACE_S]) as ``max(seconds_to_us(s), MIN_TASK_US)``; a long line's
    at once with numpy, the same integers: the same product, and ``np.rint`` rounds half to even as ``round``."""
    if len(seconds) < VECTOR_FROM:
        return tuple(us if us > MIN_TASK_US else MIN_TASK_US for us in map(seconds_to_us, seconds))
    us = np.rint(np.array(seconds, dtype=np.float64) * US_PER_S).astype(np.int64)
    return tuple(np.maximum(us, MIN_TASK_US).tolist())


def _plain_seconds(tokens: list[str]) -> list[float] | None:
    """The tokens as numbers of seconds when every one is what ``_seconds`` accepts, else None: a line's
    durations read at once (a trace has a hundred thousand of them), the same floats."""
    if any(map(str.__contains__, tokens, itertools.repeat("_"))):
        return None
    try:
        values = list(map(float, tokens))
    except ValueError:
        return None
    total = sum(values)  # NaN if any is NaN (or they hold both infinities), infinite if any is
    if total != total or total == math.inf or total == -math.inf:
        return None
    return values if min(values) >= 0 and max(values) <= MAX_TRACE_S else None


def _jobs(path, limit: int | None, first_job_id: int, fill=None, users: int | None = None) -> Iterator[Job]:
    """The generator behind ``read_trace``: reads lazily and closes the file when done."""
    if limit == 0:
        return
    made = 0
    prev_us = -1
    prev_tok = ""
    with _open(path) as f:
        for lineno, line in _lines(f, path):
            fields = line.split()
            if not fields:
                continue
            fields, extras = _extras(path, lineno, fields) if "=" in line else (fields, {})
            arrival_us, durations = _parse_line(path, lineno, fields)
            if arrival_us < prev_us:
                raise TraceError(
                    f"{path}:{lineno}: field 1 (arrival_s) is {fields[0]!r}, before the previous "
                    f"job's {prev_tok!r}; arrivals must be non-decreasing"
                )
            prev_us, prev_tok = arrival_us, fields[0]
            extras = dict(extras)
            user = extras.pop("user", -1)
            if users is not None:
                if user < 0:
                    raise TraceError(f"{path}:{lineno}: no user field; user_assign=trace needs user=K (K from 0 to "
                                     f"{users - 1}) after the durations on every line")
                if user >= users:
                    raise TraceError(f"{path}:{lineno}: user={user}: expected user=K with K a whole number from 0 "
                                     f"to {users - 1}")
            else:
                user = -1
            job = Job(job_id=first_job_id + made, arrival_us=arrival_us, durations_us=durations, user=user, **extras)
            yield job if fill is None else fill(job, frozenset(extras))
            made += 1
            if made == limit:
                return


def read_trace(path: str | os.PathLike, *, jobs: int | None = None, first_job_id: int = 0,
               fill=None, users: int | None = None) -> Iterator[Job]:
    """Stream the jobs of trace ``path`` in file order, ids from ``first_job_id``; ``jobs=N`` stops after N.
    ``fill(job, keys)`` completes each job (``keys``: the extension's keys its line gave); ``users=K``:
    every line must name its user (``user=0`` to ``user=K-1``), which the job carries.

    Arguments and the file's existence are checked now; lines are parsed and checked as they are read.
    """
    if jobs is not None:
        _check_count(jobs, "jobs", 0)
    _check_count(first_job_id, "first_job_id", 0)
    _check_file(path)
    _check_not_empty(path)
    return _jobs(path, jobs, first_job_id, fill, users)


def _check_not_empty(path) -> None:
    """Raise a TraceError unless the trace has a line that is not blank (read only up to that line)."""
    with _open(path) as f:
        if not any(line.strip() for _, line in _lines(f, path)):
            raise TraceError(f"{path}: the trace has no jobs (the file is empty or has only blank lines)")


def count_trace(path: str | os.PathLike) -> tuple[int, int]:
    """(jobs, tasks) of trace ``path``, checking only num_tasks and the field count (no float parsing)."""
    _check_file(path)
    jobs = tasks = 0
    with _open(path) as f:
        for lineno, line in _lines(f, path):
            fields = line.split()
            if fields:
                tasks += _num_tasks(path, lineno, _extras(path, lineno, fields)[0] if "=" in line else fields)
                jobs += 1
    if jobs == 0:
        raise TraceError(f"{path}: the trace has no jobs (the file is empty or has only blank lines)")
    return jobs, tasks
