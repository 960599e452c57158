"""The printed summary: the fault line and the verdict line."""

from __future__ import annotations

from rich.console import Console

from fedemu.tools.results.report import fault_line, print_summary

QUIET = {"crashes": 0, "restarts": 0, "executions_aborted": 0, "wasted_s": 0.0,
         "recovery_s": {"count": 0, "p50": None, "p99": None, "max": None}}


def test_a_run_without_faults_prints_no_fault_line():
    assert fault_line(QUIET) == "" and fault_line(None) == ""


def test_the_fault_line_names_what_faults_cost():
    faults = {**QUIET, "crashes": 2, "restarts": 1, "executions_aborted": 3, "wasted_s": 1.25,
              "recovery_s": {"count": 2, "p50": 0.5, "p99": 1.5, "max": 1.5}}
    assert fault_line(faults) == ("crashes=2, restarts=1, executions_aborted=3, wasted_s=1.25, "
                                  "recovery_s p50=0.5 p99=1.5 max=1.5 (n=2)")


def test_the_verdict_line_lists_broken_invariants():
    console = Console(record=True, width=200)
    print_summary({"invariants": {"jobs_closed": "ok", "capacity_respected": "capacity_respected: w-1: ..."},
                   "faults": {**QUIET, "crashes": 1}}, console)
    text = console.export_text()
    assert "broken: capacity_respected" in text and "crashes=1" in text
    console = Console(record=True, width=200)
    print_summary({"invariants": {"jobs_closed": "ok", "tasks_ran_once": "ok"}}, console)
    assert "all 2 ok (jobs_closed, tasks_ran_once)" in console.export_text()
