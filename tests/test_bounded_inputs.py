"""Input files are read with bounds (docs/trust.md): a trace line by line, each line at most
``MAX_LINE_CHARS``; plans, constraint tables and cost models whole, at most ``MAX_INPUT_BYTES``. A
huge or endless file is one line of error, not a MemoryError."""

from __future__ import annotations

import pytest

from fabric_helpers import capped_fedemu

GIB = 1 << 30


def _sparse(path, size: int, head: bytes = b""):
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)  # zeros the disk does not hold
    return path


def test_a_trace_line_without_end_is_refused_before_it_fills_memory(tmp_path):
    """Finding 4: a 3 GB trace with no newline was read whole into memory by count_trace."""
    trace = _sparse(tmp_path / "big.tr", GIB, b"0 1 1 ")
    proc = capped_fedemu(["run", "default", "--quiet", "--set", "workload=trace", "--set", f"trace={trace}"])
    assert proc.returncode == 2, proc.stderr[-1500:]
    assert proc.stderr == (f"fedemu: error: {trace}:1: the line is longer than 16,777,216 characters (a trace line "
                           "is one job: arrival, task count, mean and one duration per task)\n")


@pytest.mark.parametrize("option, what", [("--faults", "a fault plan"), ("--set", "a constraint table"),
                                          ("--set", "a cost model")])
def test_a_huge_plan_table_or_model_is_refused_unread(tmp_path, option, what):
    path = _sparse(tmp_path / ("huge.json" if "plan" not in what else "huge.toml"), GIB)
    if what == "a constraint table":
        argv = ["--set", f"constraint_table={path}"]
    elif what == "a cost model":
        argv = ["--set", f"cost_model={path}"]
    else:
        argv = ["--faults", path]
    proc = capped_fedemu(["run", "default", "--quiet", "--set", "jobs=5", *argv])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-1500:]
    assert f"{path}: larger than 16 MiB; {what}" in proc.stderr


def test_an_endless_plan_is_refused(tmp_path):
    """An endless stream is not a regular file, so it is refused before anything reads it (open_regular)."""
    proc = capped_fedemu(["run", "default", "--quiet", "--set", "jobs=5", "--faults", "/dev/zero"])
    assert proc.returncode == 2 and proc.stderr == "fedemu: error: /dev/zero: is a character device, not a " \
        "regular file; expected a fault plan (.toml or .json)\n", proc.stderr[-1500:]
