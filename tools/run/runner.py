"""Loads a scenario script, builds its fabric, runs it and returns what it measured.

A scenario is a Python module (``scenarios/*.py`` or any file) with ``PARAMS`` (defaults of every
parameter ``--set`` may change) and ``build(fabric, params)``, which adds actors, network and faults
and returns an object whose ``finish(fabric, info)`` checks the run and returns a summary dict; when the
object has a ``recorder``, the runner adds its measurements and writes the result files. It may also
define ``declare(params, given)``, which says which keys apply to a run (``tools.run.params.resolve``).
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import importlib
import importlib.util
import inspect
import os
import re
import shlex
import sys
import time
from pathlib import Path

import attrs

from fedemu.fabric import messages
from fedemu.fabric.errors import ConfigError, FedemuError
from fedemu.fabric.journal import Journal
from fedemu.fabric.kernel import ENGINES, Fabric, gc_paused
from fedemu.fabric.log import EventLog
from fedemu.fabric.replay import STOPPED_EARLY

from . import outdir
from . import params as params_mod
from ..results.results import summarize_run, write_results, write_summary

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"


class RunViolation(FedemuError):
    """A run ended, but broke an invariant: the verdict names it, the job, task or worker, and the
    virtual time. Exit status 1; the run's results and journal are still written, and ``result`` holds
    what ``execute`` would have returned (None where it was not kept)."""

    exit_status = 1
    label = "violation"
    result = None


def scenario_ref(ref: str) -> str:
    """A stable name for a scenario: ``scenarios.x`` for the project's own, else an absolute path.

    A name the project knows wins over a file of that name in the working directory."""
    name = ref.split(".", 1)[1] if ref.startswith("scenarios.") else ref
    if is_known(name):
        return f"scenarios.{name}"
    path = Path(ref)
    if not (ref.endswith(".py") or os.sep in ref or path.exists()):
        raise ConfigError(f"unknown scenario {ref!r}; known: {', '.join(known_scenarios())}, "
                          "or the path of a scenario .py file")
    if not path.exists():
        raise ConfigError(f"scenario file {ref!r} does not exist")
    if path.is_dir():
        raise ConfigError(f"scenario {ref!r} is a directory; expected a scenario .py file")
    if not path.is_file():  # a FIFO would block the import for ever
        raise ConfigError(f"scenario {ref!r} is not a regular file; expected a scenario .py file")
    if path.suffix != ".py":
        raise ConfigError(f"scenario file {ref!r} is not a .py file")
    resolved = path.resolve()
    if resolved.parent == SCENARIO_DIR and is_known(resolved.stem):
        return f"scenarios.{resolved.stem}"
    return str(resolved)


def _is_scenario(path: Path) -> bool:
    """Whether a module's source defines (or imports) both ``PARAMS`` and ``build`` at top level."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return False
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return {"PARAMS", "build"} <= names


def known_scenarios() -> list[str]:
    """The names ``fedemu run`` accepts: modules in scenarios/ with PARAMS and build."""
    files = tuple(sorted((p, p.stat().st_mtime_ns) for p in SCENARIO_DIR.glob("*.py")))
    return list(_scenarios_among(files))


def is_known(name: str) -> bool:
    """Whether ``name`` is in ``known_scenarios()``, from its own file alone (a run parses one, not all)."""
    path = SCENARIO_DIR / f"{name}.py"
    try:
        if os.sep in name or name.startswith(".") or not path.is_file():
            return False
        return bool(_scenarios_among(((path, path.stat().st_mtime_ns),)))
    except (OSError, ValueError):  # a name no file can have (a NUL in it)
        return False


@functools.lru_cache(maxsize=16)
def _scenarios_among(files: tuple) -> tuple[str, ...]:
    """The scenario modules among ``files`` ((path, mtime) pairs: a changed file is parsed again); the
    fault search resolves a scenario name for each of its many runs."""
    return tuple(sorted(p.stem for p, _ in files if _is_scenario(p)))


def _where(exc: BaseException, path: str) -> str:
    """``FILE:LINE`` of the deepest traceback frame in ``path`` (just ``FILE`` when none is)."""
    line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return f"{path}:{line}" if line else path


def _actor_where(exc: BaseException) -> str:
    """``gm-0 at virtual time 3.000500 s (actors/common/front_end.py:37)``: the actor that raised, when, and
    the deepest line of fedemu's own code it raised from."""
    name, now_us = exc.fedemu_actor
    root = str(Path(os.path.realpath(__file__)).parents[2])  # real paths: a symlinked package too
    where, tb = "", exc.__traceback__
    while tb is not None:
        path = os.path.realpath(tb.tb_frame.f_code.co_filename)
        if path.startswith(root + os.sep):
            where = f"{os.path.relpath(path, root)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return f"{name} at virtual time {now_us / 1e6:.6f} s" + (f" ({where})" if where else "")


class ScenarioExit(Exception):
    """A scenario's code called ``sys.exit`` during a run: the run failed (its journal kept), not fedemu."""


def _user_error(exc: Exception, path: str, doing: str) -> ConfigError:
    """A one-line error for an exception raised by a user's scenario file: file, line, exception."""
    if isinstance(exc, SyntaxError):
        return ConfigError(f"{_where(exc, path)}: syntax error in the scenario: {exc.msg}")
    if isinstance(exc, SystemExit):
        return ConfigError(f"{_where(exc, path)}: {doing} called sys.exit({exc.code!r})")
    text = str(exc).strip().splitlines()
    return ConfigError(f"{_where(exc, path)}: {doing} raised {type(exc).__name__}"
                       + (f": {text[0]}" if text else ""))


def load(ref: str):
    """Import the scenario module named by ``scenario_ref`` and check it has PARAMS and build."""
    if ref.startswith("scenarios."):
        module = importlib.import_module(f"fedemu.{ref}")
    else:
        name = f"fedemu_scenario_{Path(ref).stem}"
        spec = importlib.util.spec_from_file_location(name, ref)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except FedemuError:
            sys.modules.pop(name, None)
            raise
        except (Exception, SystemExit) as exc:  # the user's file: its bug, one line naming file and line
            sys.modules.pop(name, None)
            raise _user_error(exc, ref, "importing the scenario") from None
    params, build = getattr(module, "PARAMS", None), getattr(module, "build", None)
    if not isinstance(params, dict) or build is None:
        raise ConfigError(f"scenario {ref!r} has no PARAMS dict and build(fabric, params) function")
    odd = [key for key in params if not isinstance(key, str) or not key.isidentifier()]
    if odd:
        raise ConfigError(f"scenario {ref!r}: PARAMS key {odd[0]!r} is not a name (letters, digits, _)")
    if not callable(build):
        raise ConfigError(f"scenario {ref!r}: build is {type(build).__name__}, expected a function "
                          "build(fabric, params)")
    try:
        inspect.signature(build).bind(None, None)
    except TypeError:
        raise ConfigError(f"scenario {ref!r}: build{inspect.signature(build)} cannot be called as "
                          "build(fabric, params)") from None
    except ValueError:  # a builtin without a signature: let the call decide
        pass
    return module


def build_run(module, ref: str, fabric, params: dict):
    """Call the scenario's ``build``; an exception other than a FedemuError from a user's file is one line."""
    if ref.startswith("scenarios."):
        return module.build(fabric, params)
    try:
        return module.build(fabric, params)
    except FedemuError:
        raise
    except (Exception, SystemExit) as exc:
        raise _user_error(exc, ref, "build") from None


def failure(exc: BaseException) -> str:
    """``Type: first line of the message``, without memory addresses (a journal footer must not vary)."""
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {re.sub(r' at 0x[0-9a-fA-F]+', '', text)}".rstrip(": ")


def keep_failed_journal(journal: Journal, fabric: Fabric | None, exc: Exception, ref: str = "") -> None:
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
    named = "" if ref.startswith("scenarios.") or not ref else f" --scenario {shlex.quote(ref)}"
    exc.add_note(f"fedemu: the journal is kept in {journal.path}, its footer saying how the run ended; "
                 f"`fedemu replay {journal.path} --verify{named}` reproduces the failure")


def journalable(params: dict, ref: str) -> None:
    """Refuse (bad input, before the run) a parameter the journal's header cannot hold: a run is recorded
    with its parameters, and one that could not be would leave a journal without a header."""
    for key, value in params.items():
        try:
            messages.packb(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"scenario {ref}: parameter {key!r} is {value!r:.80} ({type(value).__name__}); a "
                              "parameter is a number, text, true/false, or a list or dict of those") from None


class _running:
    """The fabric ``execute`` is running (for ``interrupt``), whether a stop was asked for and by what, and
    whether one came while no run was going (``stopping``: it stands until ``clear_interrupt``)."""

    fabric: Fabric | None = None
    requested: str | None = None
    stopping = False


class RunInterrupted(KeyboardInterrupt):
    """A signal stopped a run at the end of a window: its results so far are written and marked partial,
    its journal closed with a ``stopped early`` footer; ``result`` is what ``execute`` would have returned.
    A KeyboardInterrupt still, so a sweep of runs stops with it."""

    def __init__(self, result: "RunResult") -> None:
        super().__init__(result.summary.get("partial", {}).get("by", "a signal"))
        self.result = result


@attrs.define
class _Stop:
    """What stopped a run early by a signal (``by``: None when nothing did)."""

    by: str | None = None


@contextlib.contextmanager
def _interruptible(fabric: Fabric, stop: _Stop):
    """While the fabric runs, ``interrupt`` stops it at the end of a window; leaving, ``stop.by`` says that a
    signal did (the run then ends as the live view's q ends it: partial). A second signal that broke into
    trio is KeyboardInterrupt, raised here, outside trio. After a stop asked for between runs, no run
    starts."""
    if _running.stopping:
        raise KeyboardInterrupt
    _running.fabric, _running.requested = fabric, None
    try:
        yield
    except Exception as exc:
        if _running.requested:  # a second signal broke into trio: an interruption still, not a failure
            raise KeyboardInterrupt from exc
        raise
    finally:
        stop.by = _running.requested
        _running.fabric, _running.requested = None, None


def interrupt(by: str = "a signal") -> None:
    """For a SIGINT/SIGTERM handler (``by`` names it): a running fabric is asked to stop once its current
    window is done (trio is never broken into mid-step), and the run then writes its results so far, marked
    partial (``RunInterrupted``); with no run, or when asked a second time, KeyboardInterrupt is raised at
    once. That raise can be lost (a handler that runs inside a ``__del__``, as trio's nurseries have, is
    silenced), so the stop also stands: no later run starts until ``clear_interrupt``."""
    fabric = _running.fabric
    if fabric is None or _running.requested:
        _running.stopping = True
        raise KeyboardInterrupt
    _running.requested = by
    fabric.stop()


def clear_interrupt() -> None:
    """A new command (or a test) starts: no stop stands."""
    _running.stopping = False


@attrs.define
class RunResult:
    """What ``execute`` returns: the fabric after the run, the summary, the journal digest, and the run's
    recorder (None for a scenario without one), from which the Python API takes its columns."""

    fabric: Fabric
    summary: dict
    digest: str
    wall_s: float
    recorder: object = None


def execute(ref: str, *, seed: int = 1, overrides: dict | None = None, journal_path=None, out_dir=None,
            progress=None, log_path=None, log_level: str = "info", faults=None, plots: bool = True,
            engine: str = "trio", keep_fabric: bool = True) -> RunResult:
    """Run one scenario: its PARAMS updated by ``overrides`` (validated), optionally journaled to
    ``journal_path``, its protocol events at ``log_level`` and above logged to ``log_path`` (JSON
    lines; a failed run keeps those logged so far) and written to ``out_dir`` (with its plots unless
    ``plots`` is False: a grid's reports draw their own). ``faults``: a
    ``scenarios.fault_plan.Plan`` added after the build; its events go into the journal header. ``engine``:
    what steps the actors (``fabric.kernel.ENGINES``; the journal is the same on each). ``keep_fabric``
    False: the fabric (actors, their tasks, the queue) is let go once the checks and the summary have read
    it, before the results are made, and the result's ``fabric`` is None. That takes one collection (about
    0.4 s after Sparrow at 10,000 workers, where the results then run at 133-150 MiB, not 166-190).

    The cyclic garbage collector is paused from the build to the summary, not only for the fabric's run
    (``kernel.gc_paused``): after the run, the end-of-run checks and the metrics allocate enough to set
    off collections, and each walked every record, actor and message the run left alive (measured on
    Sparrow at 10,000 workers: 0.35 s of those phases' 1.2 s)."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    with gc_paused():
        return _execute(scenario_ref(ref), seed, overrides, journal_path, out_dir, progress, log_path, log_level,
                        faults, plots, engine, keep_fabric)


def _execute(ref: str, seed: int, overrides, journal_path, out_dir, progress, log_path, log_level: str,
             faults, plots: bool = True, engine: str = "trio", keep_fabric: bool = True) -> RunResult:
    """``execute``'s body, with the collector paused: build, run, summarize (each failure said in one
    line, the journal kept), close the journal, write the results, then the verdict."""
    module = load(ref)
    params = params_mod.resolve_scenario(module, overrides or {})
    journalable(params, ref)
    outdir.check_inputs(out_dir, {"--journal": journal_path, "--log": log_path}, _inputs(ref, params, faults))
    journal = Journal(journal_path)
    fabric = events = None
    try:
        fabric = Fabric(seed, journal=journal)
        fabric.engine = engine
        on_line = getattr(progress, "event_line", None)  # the live view shows the events as they come
        if log_path is not None or on_line is not None:
            events = EventLog(log_path, log_level, on_line=on_line)
            events.attach(fabric)
        run = build_run(module, ref, fabric, dict(params))
        planned, plan = _add_plan(fabric, faults, seed)
        journal.write_header({"seed": seed, "scenario": ref, "params": params, "actors": fabric.names, **plan})
        # a progress hook with a limit of its own (the fault search's Guard) stops the run itself
        horizon = run_horizon(run, fabric) if getattr(progress, "limit_us", None) is None else None
        fabric.progress = progress and (lambda f: progress(f, run))
        fabric.progress_every = getattr(progress, "every", fabric.progress_every)  # e.g. the live view's
        t0 = time.perf_counter()
        stop = _Stop()
        with _interruptible(fabric, stop):
            fabric.run_blocking()
        wall = time.perf_counter() - t0
        digest = journal.digest
        info, partial = _run_info(ref, seed, params, plan, planned, fabric, run, wall, digest, horizon, progress,
                                  stop)
        summary = run.finish(fabric, info) if hasattr(run, "finish") else info
        if not isinstance(summary, dict):
            raise TypeError(f"finish returned {type(summary).__name__}, expected the summary as a dict")
    except (Exception, SystemExit) as exc:
        raise _failed(exc, ref, journal, fabric, events)
    except BaseException:  # interrupted (Ctrl-C, SIGTERM): nothing to replay, no temporary file left
        journal.abort()
        if events is not None:
            events.abort()
        raise
    broken = _close_journal(journal, fabric.statistics(), summary, partial)
    if events is not None:
        events.close()
    recorder = getattr(run, "recorder", None)
    if not keep_fabric:  # the actors, their tasks and the queue go before the results are made (peak memory)
        fabric = run = events = None
        gc.collect()
    result = RunResult(fabric, _results(summary, recorder, out_dir, plots), digest, wall, recorder)
    if broken:  # the verdict: results and journal are written, and the run's status is 1
        more = f" (and {len(broken) - 1} more invariant(s) broken; see summary.json)" if len(broken) > 1 else ""
        kept = f"; the journal is kept in {journal.path}" if journal.path else ""
        violation = RunViolation(f"{broken[0]}{more}{kept}")
        violation.result = result
        raise violation
    if stop.by is not None:
        raise RunInterrupted(result)
    return result


def _results(summary: dict, recorder, out_dir, plots: bool) -> dict:
    """The whole summary (the recorder's metrics added), with the result files in ``out_dir`` when given."""
    if recorder is not None:
        return write_results(out_dir, recorder=recorder, summary_extra=summary, plot=plots) if out_dir else \
            {**summary, **summarize_run(recorder)}
    if out_dir:  # a scenario without a recorder (e.g. demo) still leaves its summary
        return write_summary(out_dir, summary)
    return summary


def _add_plan(fabric: Fabric, faults, seed: int) -> tuple[list, dict]:
    """Place a fault plan's events on the built actors (checked before anything runs) and add them; returns
    them, and what the journal header records of the plan (nothing without one)."""
    if faults is None:
        return [], {}
    from fedemu.scenarios import fault_plan

    placed = faults.placed(fabric.names, seed)
    fault_plan.check_no_ops(fabric.faults, placed)
    planned = [fault for _, fault in placed]
    fabric.add_faults(planned)
    return planned, {"fault_plan": faults.source, "faults": [list(f.as_data()) for f in planned]}


def _run_info(ref: str, seed: int, params: dict, plan: dict, planned: list, fabric: Fabric, run, wall: float,
              digest: str, horizon: dict | None, progress, stop: _Stop) -> tuple[dict, dict | None]:
    """The summary's part the runner knows (counts, digest, faults never applied, the horizon a run was
    stopped at), and whether the run was stopped early (by the live view's q or a signal): its ``partial``."""
    stats = fabric.statistics()
    info = {"scenario": ref, "seed": seed, "params": params, **{k: v for k, v in plan.items() if k == "fault_plan"},
            "wall_s": round(wall, 3), "events": stats.events,
            "messages": stats.sent, "virtual_end_s": stats.now_us / 1e6, "digest": digest,
            "messages_by_kind": stats.sent_by_kind, "drops_by_cause": stats.drops_by_cause}
    late = [f for f in planned if f.at_us > stats.now_us]
    if late:  # the run ended before them: said, not silently dropped
        info["faults_never_applied"] = [list(f.as_data()) for f in late]
    if fabric.stopped_at_horizon:  # a fault never healed: said in the summary, and why
        info["horizon"] = {**horizon, "stopped_at_s": fabric.now / 1e6, "in_force": fabric.faults_in_force()}
    partial = getattr(progress, "partial", None)  # the live view's q stopped the run early
    if stop.by is not None and not partial:  # so did a signal
        partial = {"stopped_at_s": stats.now_us / 1e6, "by": stop.by}
    if partial:
        info["partial"] = partial = {**partial, **_jobs_asked(run)}
    return info, partial


def _failed(exc: BaseException, ref: str, journal: Journal, fabric: Fabric | None, events) -> BaseException:
    """A run that failed (a scenario's error, an actor's, ``sys.exit`` in a user's code): the exception to
    raise, marked with where it came from for the one-line message; the journal kept for replay."""
    if isinstance(exc, SystemExit):  # the scenario's own code ended the process: a failed run, said
        exc = ScenarioExit(f"sys.exit({exc.code!r}) was called").with_traceback(exc.__traceback__)
    if not ref.startswith("scenarios.") and not isinstance(exc, FedemuError):
        exc.fedemu_where = _where(exc, ref)  # a user's scenario failed (an actor, finish): the CLI says one line
    elif getattr(exc, "fedemu_actor", None) is not None and not isinstance(exc, FedemuError):
        exc.fedemu_where = _actor_where(exc)  # an actor of ours raised mid-run: a failed run, one line
    keep_failed_journal(journal, fabric, exc, ref)
    if events is not None and isinstance(exc, FedemuError):
        events.abort()
    elif events is not None:
        events.close()
    return exc


def _close_journal(journal: Journal, stats, summary: dict, partial: dict | None) -> list[str]:
    """Close the journal with its footer (how the run ended: a violation, stopped early, or neither);
    returns the broken invariants' lines."""
    broken = [line for line in (summary.get("invariants") or {}).values() if line != "ok"]
    ended = {"ended": f"{STOPPED_EARLY} ({partial['by']}): partial"} if partial else {}
    if broken:
        ended = {"ended": f"violation: {broken[0]}"}
    journal.close({"events": stats.events, "sent": stats.sent, "now_us": stats.now_us, **ended})
    return broken


def run_horizon(run, fabric) -> dict | None:
    """Give a run that has faults (a plan's, random failures, or the run's own ``loss``) its horizon, where
    it is stopped if one is still in force (``Fabric.horizon_us``); returns how it was derived, for the
    summary. A fault-free run, or a scenario whose run has no workload horizon, has none (and costs nothing)."""
    if not (fabric.faults or fabric.faults_in_force()):
        return None
    workload_us = getattr(run, "workload_horizon_us", lambda: None)()
    if workload_us is None:
        return None
    from fedemu.scenarios import fault_plan

    fabric.horizon_us = fault_plan.run_horizon_us(workload_us, fabric.faults)
    last_us = max((f.at_us for f in fabric.faults), default=0)
    grace_s, w_s = fault_plan.LIVENESS_GRACE_US // 10**6, workload_us / 1e6
    derived = f"the last fault ({last_us / 1e6:g} s) + {grace_s} s + 2 x the workload's horizon ({w_s:g} s)" \
        if last_us > workload_us else f"3 x the workload's horizon ({w_s:g} s) + {grace_s} s"
    return {"at_s": fabric.horizon_us / 1e6, "workload_horizon_s": w_s, "last_fault_s": last_us / 1e6,
            "derived": derived}


def _inputs(ref: str, params: dict, faults) -> dict:
    """The files a run reads, named for an error: its scenario file, fault plan, and every parameter that
    names an existing file (a trace, a constraint table, a cost model ...); no output may be one of them."""
    found = {f"the scenario file {ref}": ref} if not ref.startswith("scenarios.") else {}
    if faults is not None and os.path.isfile(faults.source):
        found[f"the fault plan {faults.source}"] = faults.source
    for key, value in params.items():
        if isinstance(value, str) and value and os.path.isfile(value):
            found[f"the file of parameter {key} ({value})"] = value
    return found


def _jobs_asked(run) -> dict:
    """``{"jobs_asked": N}``: the jobs the workload holds, for a run stopped early (its summary's ``jobs``
    counts those submitted by then); empty for a scenario that does not say (no ``progress()``)."""
    progress = getattr(run, "progress", None)
    asked = getattr(run, "total_jobs", None) or (progress()[1] if callable(progress) else None)
    return {} if asked is None else {"jobs_asked": asked}


def recorded_faults(header: dict):
    """The fault plan a journal header recorded (``--faults``), as a plan a re-run adds again; else None."""
    if "faults" not in header:
        return None
    from fedemu.scenarios import fault_plan

    return fault_plan.recorded(header["faults"], f"journal header (plan {header.get('fault_plan', '?')})")
