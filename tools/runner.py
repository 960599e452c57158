"""Loads a scenario script, builds its fabric, runs it and returns what it measured.

A scenario is a Python module (``scenarios/*.py`` or any file) with ``PARAMS`` (defaults of every
parameter ``--set`` may change) and ``build(fabric, params)``, which adds actors, network and faults
and returns an object whose ``finish(fabric, info)`` checks the run and returns a summary dict; when the
object has a ``recorder``, the runner adds its measurements and writes the result files.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import time
from pathlib import Path

import attrs

from fedemu.fabric.errors import ConfigError, FedemuError
from fedemu.fabric.journal import Journal
from fedemu.fabric.kernel import Fabric

from . import params as params_mod
from .results import summarize_run, write_results

SCENARIO_DIR = Path(__file__).resolve().parent.parent / "scenarios"


def scenario_ref(ref: str) -> str:
    """A stable name for a scenario: ``scenarios.x`` for the project's own, else an absolute path."""
    path = Path(ref)
    if ref.endswith(".py") or os.sep in ref:
        if not path.exists():
            raise ConfigError(f"scenario file {ref!r} does not exist")
        resolved = path.resolve()
        if resolved.parent == SCENARIO_DIR:
            return f"scenarios.{resolved.stem}"
        return str(resolved)
    name = ref if ref.startswith("scenarios.") else f"scenarios.{ref}"
    if not (SCENARIO_DIR / f"{name.split('.', 1)[1]}.py").exists():
        raise ConfigError(f"unknown scenario {ref!r}; known: {', '.join(known_scenarios())}")
    return name


def known_scenarios() -> list[str]:
    """The project's scenario scripts (modules in scenarios/ that define build)."""
    return sorted(p.stem for p in SCENARIO_DIR.glob("*.py") if "\ndef build(" in p.read_text())


def load(ref: str):
    """Import the scenario module named by ``scenario_ref``."""
    if ref.startswith("scenarios."):
        module = importlib.import_module(f"fedemu.{ref}")
    else:
        spec = importlib.util.spec_from_file_location(f"fedemu_scenario_{abs(len(ref))}", ref)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    if not hasattr(module, "PARAMS") or not hasattr(module, "build"):
        raise ConfigError(f"scenario {ref!r} has no PARAMS dict and build(fabric, params) function")
    return module


def failure(exc: BaseException) -> str:
    """``Type: first line of the message``, without memory addresses (a journal footer must not vary)."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {re.sub(r' at 0x[0-9a-fA-F]+', '', text)}".rstrip(": ")


def keep_failed_journal(journal: Journal, fabric: Fabric | None, exc: Exception) -> None:
    """A run that failed after its header was written keeps its journal, closed with a footer whose
    ``ended`` says how, so ``fedemu replay LOG --verify`` can reproduce the failure. Bad input (a
    FedemuError) and a failure before the header leave nothing."""
    if journal.header is None or journal.path is None or fabric is None or isinstance(exc, FedemuError):
        journal.abort()
        return
    try:
        stats = fabric.statistics()
        counts = {"events": stats.events, "sent": stats.sent, "now_us": stats.now_us}
    except Exception:  # noqa: BLE001 - a fabric broken by the failure: the footer says less
        counts = {}
    journal.close({**counts, "ended": failure(exc)})
    exc.add_note(f"fedemu: the journal is kept in {journal.path}, its footer saying how the run ended; "
                 f"`fedemu replay {journal.path} --verify` reproduces the failure")


@attrs.define
class RunResult:
    """What ``execute`` returns: the fabric after the run, the summary, and the journal digest."""

    fabric: Fabric
    summary: dict
    digest: str
    wall_s: float


def execute(ref: str, *, seed: int = 1, overrides: dict | None = None, journal_path=None, out_dir=None,
            progress=None) -> RunResult:
    """Run one scenario: its PARAMS updated by ``overrides`` (validated), optionally journaled to
    ``journal_path`` and written to ``out_dir``."""
    ref = scenario_ref(ref)
    module = load(ref)
    params = params_mod.resolve(module.PARAMS, overrides or {})
    journal = Journal(journal_path)
    fabric = None
    try:
        fabric = Fabric(seed, journal=journal)
        run = module.build(fabric, dict(params))
        journal.write_header({"seed": seed, "scenario": ref, "params": params, "actors": fabric.names})
        fabric.progress = progress and (lambda f: progress(f, run))
        t0 = time.perf_counter()
        fabric.run_blocking()
        wall = time.perf_counter() - t0
        stats = fabric.statistics()
        digest = journal.digest
        info = {"scenario": ref, "seed": seed, "params": params, "wall_s": round(wall, 3), "events": stats.events,
                "messages": stats.sent, "virtual_end_s": stats.now_us / 1e6, "digest": digest,
                "messages_by_kind": stats.sent_by_kind, "drops_by_cause": stats.drops_by_cause}
        summary = run.finish(fabric, info) if hasattr(run, "finish") else info
    except Exception as exc:
        keep_failed_journal(journal, fabric, exc)
        raise
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): nothing to replay, no temporary file left
        journal.abort()
        raise
    journal.close({"events": stats.events, "sent": stats.sent, "now_us": stats.now_us})
    recorder = getattr(run, "recorder", None)
    if recorder is not None:
        summary = write_results(out_dir, recorder=recorder, summary_extra=summary) if out_dir else \
            {**summary, **summarize_run(recorder)}
    return RunResult(fabric, summary, digest, wall)
