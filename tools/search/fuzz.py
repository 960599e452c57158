"""``fedemu fuzz``: a property-based fault search over a scenario, with shrunk, replayable reproducers.

Each example (``tools.search.strategies.examples``) is one scheduler on a small cluster and workload under one
fault plan, run through ``tools.run.runner.execute``. A run has two phases, as in TigerBeetle's VOPR: in the
**safety** phase faults come and go (some last until the heal), and every invariant must hold; at the
heal every fault still in force ends (but workers drawn to die for good stay down), and in the
**liveness** phase every job must be done within a stated bound (``strategies.liveness_bound_us``), or
the run is stopped there and the verdict is ``liveness``. A run whose verdict is broken (RunViolation),
that failed (an actor raised) or that missed the liveness bound is a violation: hypothesis shrinks it to
a minimal example, and the search writes ``OUT/failure-K/`` with the plan (``plan.toml``, the ``--faults``
format, the heal's events included), the ``fedemu run`` command that reproduces it (``command.txt``), the
journal (``messages.log``, replayable, its printout ``messages.txt`` and its space-time diagram
``diagram.md``, the last ``drawing.MAX_ROWS`` messages and timer fires of a longer run) and the verdict
with the journal's digest and the phase that failed (``verdict.txt``). The hypothesis example database
lives in ``OUT/.hypothesis``, so a failure found once is tried first the next time.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import attrs
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase

from fedemu.actors import registry
from fedemu.fabric.errors import ConfigError
from fedemu.fabric.journal import JournalReader
from fedemu.scenarios import fault_plan

from ..run import runner
from . import strategies
from ..run.atomic import write_text

# counters of the protocol paths a search reaches (whichever a run's summary has; each plug-in lists its
# own, ``paths``), in display order
PATH_COUNTERS = registry.paths()
KEPT_NOTE = re.compile(r"; (the journal is kept in|`fedemu replay).*$")


STALL_AFTER_S = 3600  # virtual seconds past the workload's horizon after which a run that still has
# events (timers that never stop, messages that bounce forever) is stopped and called a violation


# a run past STORM_EVENTS + STORM_PER_S per virtual second of its workload's horizon is stopped as a
# message storm (the small runs a search draws handle a few hundred events; a storm doubles them per hop)
STORM_EVENTS, STORM_PER_S = 50_000, 20_000


class Stalled(Exception):
    """A run that did not quiesce: still busy long after its workload and faults were over; or, with a
    liveness phase, one whose jobs were not all done by its deadline."""


LIVENESS_VERDICTS = ("violation: liveness:", "violation: quiescence: the run", "violation: jobs_closed:")


def phase_of(verdict: str) -> str:
    """Which phase a verdict failed: liveness (a job not done: by the deadline, or ever) or safety."""
    return "liveness" if verdict.startswith(LIVENESS_VERDICTS) else "safety"


# A full collection every this many runs: without it a 2-minute search grew past 2 GB (each run leaves
# about 800 objects in cycles, frozen by the next run's gc_paused and rarely collected after); with it
# a 1,500-run search stays near 160 MB. A collection costs a few ms.
COLLECT_EVERY = 200


def run_guarded(example: strategies.Example, **kwargs):
    """``example.run`` stopped at its liveness deadline (``Example.deadline_us``), or without a liveness
    phase once it is STALL_AFTER_S virtual seconds past its horizon: Stalled then (a safety invariant
    broken by then is the verdict before the liveness one)."""
    horizon = example.horizon_us
    storm = STORM_EVENTS + STORM_PER_S * horizon // 10**6
    deadline = example.deadline_us
    guard = strategies.Guard(horizon + STALL_AFTER_S * 10**6 if deadline is None else deadline, storm)
    try:
        result = example.run(progress=guard, **kwargs)
    except Exception:
        if guard.stalled_at is None:
            raise
        result = None
    if guard.storm:
        raise Stalled(f"quiescence: a message storm: more than {storm:,} events by virtual time "
                      f"{guard.stalled_at / 1e6:.3f} s (the workload's horizon is {horizon / 1e6:.3f} s): "
                      "messages that multiply (each answered or resent more than once)")
    if guard.stalled_at is not None and guard.safety is not None:
        raise runner.RunViolation(guard.safety)
    if guard.stalled_at is not None and deadline is not None:
        first = guard.stuck[0].line().split(" (virtual time")[0] if guard.stuck else "no job is open, yet it ran on"
        raise Stalled(f"liveness: {len(guard.stuck)} job(s) not done by virtual time {deadline / 1e6:.6f} s, "
                      f"{strategies.liveness_bound_us(horizon) / 1e6:g} s after every fault healed at "
                      f"{example.heal_us / 1e6:.6f} s{_died(example)}: {first}")
    if guard.stalled_at is not None:
        raise Stalled(f"quiescence: the run was still busy at virtual time {guard.stalled_at / 1e6:.3f} s, "
                      f"{STALL_AFTER_S} s past its workload's horizon ({horizon / 1e6:.3f} s): a protocol that "
                      "never settles (timers or messages that go on forever)")
    return result


def _died(example: strategies.Example) -> str:
    return f" ({', '.join(example.for_good)} died for good)" if example.for_good else ""


class _BudgetOver(BaseException):
    """Raised inside the search when its time is up: hypothesis lets it through without shrinking."""


@attrs.define
class Tally:
    """What a search did so far: runs, violations, the protocol paths hit, faults applied."""

    runs: int = 0
    violations: int = 0
    started: float = attrs.field(factory=time.perf_counter)
    counters: Counter = attrs.field(factory=Counter)
    by_scheduler: Counter = attrs.field(factory=Counter)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    @property
    def rate(self) -> float:
        return self.runs / self.elapsed if self.elapsed > 0 else 0.0

    def paths(self) -> str:
        """``failovers 3, gm_rebuilds 1, crashes 7`` (the path counters hit, then faults applied)."""
        shown = [k for k in PATH_COUNTERS if self.counters.get(k)] + \
            [k for k in ("crashes", "restarts") if self.counters.get(k)]
        return ", ".join(f"{k} {self.counters[k]:,}" for k in shown) or "none yet"

    def line(self) -> str:
        return (f"{self.runs:,} runs in {self.elapsed:.1f} s ({self.rate:.1f} runs/s), {self.violations} "
                f"violation(s); paths hit: {self.paths()}")


@attrs.frozen
class Failure:
    """A violation the search found and shrank, and the folder it wrote."""

    example: strategies.Example
    verdict: str  # one line: "violation: ..." or "failed: ..." (as fedemu run says it, without "fedemu: ")
    folder: Path | None = None
    digest: str | None = None
    reproduced: bool = True

    @property
    def phase(self) -> str:
        """The phase that failed: safety or liveness (``phase_of``)."""
        return phase_of(self.verdict)


@attrs.frozen
class Outcome:
    """What ``search`` returns: the tally and the failure it found (None: nothing found)."""

    tally: Tally
    failure: Failure | None

    @property
    def status(self) -> int:
        return 0 if self.failure is None else 1


def verdict_of(exc: BaseException) -> str:
    """The one line ``fedemu run`` prints for a broken or failed run, without its prefix and the
    journal note (which names a path)."""
    if isinstance(exc, (runner.RunViolation, Stalled)):
        return KEPT_NOTE.sub("", f"violation: {exc}")
    where = getattr(exc, "fedemu_where", None)
    name = getattr(exc, "fedemu_actor", (None,))[0]
    who = "raised" if where and name and where.startswith(f"{name} ") else "the scenario raised"
    return f"failed: {where or 'the run'}: {who} {runner.failure(exc)}"


def _display_name(scenario: str) -> str:
    """A scenario as a command names it: the project's by name, a user's file by its absolute path."""
    ref = runner.scenario_ref(scenario)
    return ref.removeprefix("scenarios.")


@contextlib.contextmanager
def _hypothesis_home(out):
    """Hypothesis keeps its files (the example database, its cache of constants) in ``OUT/.hypothesis``
    during a search, never in the current folder; without ``out``, in a temporary folder."""
    from hypothesis import configuration

    before = getattr(configuration, "__hypothesis_home_directory", None)
    with contextlib.ExitStack() as stack:
        home = Path(out) / ".hypothesis" if out is not None else \
            Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fedemu-fuzz-")))
        configuration.set_hypothesis_home_dir(home)
        try:
            yield home
        finally:
            configuration.set_hypothesis_home_dir(before)


@contextlib.contextmanager
def _no_local_constants():
    """Hypothesis sometimes draws a constant found in the source of whatever local modules are imported, so a
    seeded search would depend on what else the process has loaded (a test run before it, a user's
    scenario). During a search it draws from its own constants only, and the same seed draws the same
    examples in any process. (A private hook of hypothesis 6.1xx; if it moves, the search still runs.)"""
    try:
        from hypothesis.internal.conjecture import providers
        original, cache = providers._get_local_constants, providers.CONSTANTS_CACHE.cache
    except (ImportError, AttributeError):  # pragma: no cover - another hypothesis
        yield
        return
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.clear()


def search(scenario: str = "default", **kwargs) -> Outcome:
    """Run examples until ``examples`` have run or ``budget_s`` wall seconds are spent, or a violation is
    found and shrunk (then written to ``out``/failure-K when ``out`` is given). ``on_run(tally)`` is
    called after each run (the progress bar). Hypothesis keeps its files in ``out`` (``_hypothesis_home``)."""
    with _hypothesis_home(kwargs.get("out")), _no_local_constants():
        return _search(scenario, **kwargs)


def _search(scenario: str = "default", *, schedulers=None, kinds=None, fixed: dict | None = None,
            examples: int | None = None, budget_s: float | None = None, seed: int | None = None,
            out=None, derandomize: bool = False, max_events: int = 6, on_run=None,
            liveness: bool = True) -> Outcome:
    """``search``, with hypothesis' home set; ``liveness`` False: the safety phase only (every fault
    ends by itself, and the run must end with every invariant ok)."""
    scenario = _display_name(scenario)
    if schedulers is not None and "scheduler" in strategies.scenario_keys(scenario):
        for name in schedulers:
            registry.get(name)  # an unknown name is one line listing the known ones
    runs = _Runs(budget_s, on_run)
    db = DirectoryBasedExampleDatabase(str(Path(out) / ".hypothesis")) if out is not None else None
    test = _hypothesis_test(runs, scenario, schedulers, kinds, fixed, max_events, liveness, examples=examples,
                            database=db, derandomize=derandomize, seed=seed)
    _run_until_found(test, runs.found)
    if not runs.found:
        return Outcome(runs.tally, None)
    example, exc = runs.found[-1]  # hypothesis' minimal failing example
    verdict = verdict_of(exc)
    failure = Failure(_with_bursts_merged(example, verdict), verdict)
    if out is not None:
        failure = write_failure(Path(out), failure)
    return Outcome(runs.tally, failure)


class _Runs:
    """The search's test body: runs each example it is given, counts it in ``tally``, keeps each failing
    one in ``found`` (the last is hypothesis' minimal one), and stops the search once the budget is spent."""

    def __init__(self, budget_s: float | None, on_run) -> None:
        self.tally = Tally()
        self.found: list = []  # (example, exception) of each failing run
        self.budget_s = budget_s
        self.on_run = on_run

    def __call__(self, example: strategies.Example) -> None:
        tally = self.tally
        if not self.found and self.budget_s is not None and tally.elapsed >= self.budget_s:
            raise _BudgetOver
        try:
            result = run_guarded(example)
        except Exception as exc:  # noqa: BLE001 - any failed run is what the search is for
            if isinstance(exc, ConfigError):  # the example's input was refused: a bug of the strategies
                raise
            if not self.found:
                tally.violations += 1
            self.found.append((example, exc))
            tally.runs += 1
            if self.on_run is not None:
                self.on_run(tally)
            raise
        tally.runs += 1
        if tally.runs % COLLECT_EVERY == 0:
            gc.collect()  # runs pause the collector (fabric.collector.gc_paused): their cycles pile up otherwise
        tally.by_scheduler[example.scheduler or "-"] += 1
        tally.counters.update({k: v for k, v in result.summary.get("counters", {}).items() if isinstance(v, int)})
        faults = result.summary.get("faults") or {}
        tally.counters.update({k: faults.get(k, 0) for k in ("crashes", "restarts")})
        if self.on_run is not None:
            self.on_run(tally)


def _hypothesis_test(body, scenario: str, schedulers, kinds, fixed, max_events: int, liveness: bool, *,
                     examples: int | None, database, derandomize: bool, seed: int | None):
    """``body`` as a hypothesis test over ``strategies.examples``, with the search's settings; its database
    key is this search's scenario, schedulers, kinds and fixed keys (not only the function's code)."""
    def run_one(example: strategies.Example) -> None:  # hypothesis takes a function, not any callable
        body(example)

    test = given(strategies.examples(scenario, schedulers=schedulers, kinds=kinds, fixed=fixed,
                                     max_events=max_events, liveness=liveness))(run_one)
    test = settings(max_examples=examples if examples is not None else 10**9, deadline=None, database=database,
                    derandomize=derandomize, verbosity=Verbosity.quiet, report_multiple_bugs=False,
                    print_blob=False, suppress_health_check=list(HealthCheck),
                    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink))(test)
    test.hypothesis.inner_test._hypothesis_internal_add_digest = repr(
        (scenario, sorted(schedulers or ()), sorted(kinds or ()), sorted((fixed or {}).items()))
        + (() if liveness else ("safety only",))).encode()
    if seed is not None and not derandomize:
        test = hypothesis_seed(seed)(test)
    return test


def _run_until_found(test, found: list) -> None:
    """Run the search to its end (its examples, its budget, or its first failure shrunk); a refused shape
    is bad input, and any other error with no failing run found is the search's own bug."""
    try:
        test()
    except _BudgetOver:
        pass
    except strategies.Refused as refused:  # every shape drawn with the user's --set values was refused
        raise ConfigError(str(refused)) from None
    except ConfigError:
        raise
    except Exception:  # noqa: BLE001 - hypothesis re-raised the minimal failing example's error
        if not found:
            raise


def _with_bursts_merged(example: strategies.Example, verdict: str) -> strategies.Example:
    """``example`` with adjacent bursts of loss merged (``merged_bursts``, what hypothesis cannot shrink)
    for as long as it still fails with ``verdict``."""
    while (simpler := merged_bursts(example.plan)) is not None:
        candidate = attrs.evolve(example, plan=simpler)
        try:
            run_guarded(candidate)
            break
        except Exception as again:  # noqa: BLE001 - the same failure, we hope
            if verdict_of(again) != verdict:
                break
            example = candidate
    return example


def merged_bursts(plan):
    """The plan with one "off, then on again at the same instant" of a lossy link dropped (two
    adjacent bursts made one, which deleting single events cannot do), or None when it has none."""
    entries = plan.entries
    for i in range(len(entries) - 1):
        off, on = entries[i], entries[i + 1]
        if (off.kind == on.kind and off.kind in fault_plan.PROBABILITY_KINDS and off.target == on.target
                and off.at_us == on.at_us and off.value == 0 and off.for_us is None and on.for_us is None):
            before = [e for e in entries[:i] if e.kind == off.kind and e.target == off.target]
            if before and before[-1].value == on.value and before[-1].for_us is None:
                return attrs.evolve(plan, entries=entries[:i] + entries[i + 2:])
    return None


def _next_folder(out: Path) -> Path:
    """``out/failure-K`` for the first K not taken."""
    taken = {int(m.group(1)) for p in out.glob("failure-*") if (m := re.fullmatch(r"failure-(\d+)", p.name))}
    k = 1
    while k in taken:
        k += 1
    return out / f"failure-{k}"


def write_failure(out: Path, failure: Failure) -> Failure:
    """Write ``failure-K/``: plan.toml, command.txt, then run that command (in this process, journaled)
    for messages.log, messages.txt, diagram.md and verdict.txt (the line it printed and the journal's digest)."""
    from ..replay import diagram, replay

    folder = _next_folder(out)
    folder.mkdir(parents=True)
    example = failure.example
    plan_path = folder / "plan.toml"
    write_text(plan_path, fault_plan.to_toml(example.plan))
    command = example.command(str(plan_path.resolve()))
    write_text(folder / "command.txt", command + "\n")
    journal = folder / "messages.log"
    err, said = io.StringIO(), io.StringIO()
    if failure.verdict.startswith("violation: quiescence:") or example.deadline_us is not None:
        # the search stops a run at its deadline (or when it never settles); the command does not: run here
        note = (f"# the liveness phase: every fault healed at {example.heal_us / 1e6:.6f} s; every job must be "
                f"done by {example.deadline_us / 1e6:.6f} s (virtual), where the search stops the run; this "
                "command runs on past that (a job done later, or never)" if example.deadline_us is not None else
                f"# this run never settles: the search stopped it {STALL_AFTER_S} virtual s past its horizon")
        write_text(folder / "command.txt", f"{command}\n{note}; Ctrl-C stops it\n")
        try:
            with contextlib.redirect_stderr(err):
                run_guarded(example, journal_path=str(journal), faults=fault_plan.load(plan_path))
            status, again = 0, None
        except Exception as exc:  # noqa: BLE001 - the failure again, we hope
            status, again = 1, verdict_of(exc)
    else:
        status, said_err = run_command(shlex.split(command)[1:] + ["--quiet", "--journal", str(journal)])
        lines = [KEPT_NOTE.sub("", line.removeprefix("fedemu: ")) for line in said_err.splitlines()
                 if line.startswith(("fedemu: violation:", "fedemu: failed:"))]
        again = lines[0] if lines else None
    digest = None
    if journal.exists():
        reader = JournalReader(journal)
        for _ in reader.records():
            pass
        digest = reader.footer.get("digest")
        ref = runner.scenario_ref(example.scenario)
        with contextlib.redirect_stdout(said):  # the search ran the user's file: its kinds print by name
            replay.show(journal, scenario_file=None if ref.startswith("scenarios.") else ref)
        write_text(folder / "messages.txt", said.getvalue())
        diagram.write(journal, folder / "diagram.md", tail=True)
    reproduced = status == 1 and again == failure.verdict
    text = [failure.verdict, f"digest: {digest}", f"scheduler: {example.scheduler or '-'}",
            f"fault events: {example.events}", f"phase: {failure.phase}" + _phases(example)]
    if not reproduced:
        text.append(f"NOT REPRODUCED by command.txt: status {status}, said {again!r}")
    write_text(folder / "verdict.txt", "\n".join(text) + "\n")
    return attrs.evolve(failure, folder=folder, digest=digest, reproduced=reproduced)


COMMAND_TIMEOUT_S = 900  # a failure's command that runs longer is stopped and said not to reproduce it


def run_command(argv: list[str], timeout_s: float = COMMAND_TIMEOUT_S) -> tuple[int, str]:
    """Run ``fedemu ARGV`` as a user would, in a process of its own: (its exit status, what it wrote to
    stderr). A failure's command.txt is then shown to reproduce it, not a call that resembles it (and the
    search does not import the command line that starts it). One still running after ``timeout_s`` of wall
    time is killed: status 124, and a line saying so."""
    package = Path(__file__).resolve().parents[2]  # this fedemu, when it is not the installed one
    first = str(package.parent) if package.name == "fedemu" else None
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (first, os.environ.get("PYTHONPATH")) if p)}
    try:
        proc = subprocess.run([sys.executable, "-m", "fedemu", *argv], capture_output=True, text=True, env=env,
                              check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return 124, f"fedemu: failed: the command did not end within {timeout_s:g} s of wall time, and was stopped\n"
    return proc.returncode, proc.stderr


def _phases(example: strategies.Example) -> str:
    """What the phases were, for verdict.txt."""
    if example.heal_us is None:
        return " (safety only: every fault ended by itself)"
    return (f" (every fault healed at {example.heal_us / 1e6:.6f} s{_died(example)}; every job due by "
            f"{example.deadline_us / 1e6:.6f} s)")


# ---- the command line ------------------------------------------------------------------------------
def parse_budget(text: str) -> float:
    """``90``, ``90s``, ``10m``, ``2h`` -> seconds (> 0); else a ConfigError."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text or "")
    value = float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)] if m else 0.0
    if not m or not 0 < value <= 10**7:
        raise ConfigError(f"--budget {text!r}: expected a time such as 90s, 10m or 2h (more than 0)")
    return value


def _names(text: str | None, what: str) -> list[str] | None:
    if text is None or text == "all":
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ConfigError(f"--{what} {text!r}: expected comma-separated names")
    return names


@contextlib.contextmanager
def _progress(enabled: bool, total: float | None, by_time: bool):
    """A rich progress bar on stderr (a terminal only): runs, runs/s, violations, paths hit."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("[bold]fuzz"), BarColumn(), TextColumn("{task.fields[status]}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as bar:
        task = bar.add_task("fuzz", total=total, status="")

        def update(tally: Tally) -> None:
            done = tally.elapsed if by_time else tally.runs
            bar.update(task, completed=min(done, total) if total else done, status=(
                f"runs {tally.runs:,}  {tally.rate:.1f}/s  violations {tally.violations}  paths: {tally.paths()}"))

        yield update


def main(args) -> int:
    from ..run import outdir, params

    if args.examples is not None and args.budget is not None:
        raise ConfigError("give --examples N or --budget TIME, not both")
    budget = parse_budget(args.budget) if args.budget is not None else None
    examples = args.examples if args.examples is not None or budget is not None else 100
    fixed = params.parse_overrides(args.set)
    schedulers = _names(args.schedulers, "schedulers")
    kinds = _names(args.kinds, "kinds")
    with outdir.prepared(args.out) as out, _progress(not args.quiet, budget or examples, budget is not None) as bar:
        outcome = search(args.scenario, schedulers=schedulers, kinds=kinds, fixed=fixed,
                         examples=examples if budget is None else None, budget_s=budget, seed=args.seed,
                         out=out, on_run=bar, liveness=not args.safety_only)
    print(f"fuzz: {outcome.tally.line()}")
    by = ", ".join(f"{k} {v:,}" for k, v in sorted(outcome.tally.by_scheduler.items()))
    if by:
        print(f"fuzz: runs by scheduler: {by}")
    failure = outcome.failure
    if failure is None:
        print("fuzz: no violation found")
        return 0
    print(f"fuzz: {failure.verdict}", file=sys.stderr)
    print(f"fuzz: the {failure.phase} phase failed")
    print(f"fuzz: shrunk to {failure.example.events} fault event(s); reproduce with: {failure.example.command('PLAN')}"
          if failure.folder is None else
          f"fuzz: shrunk to {failure.example.events} fault event(s); written to {failure.folder} "
          f"(command.txt reproduces it{'' if failure.reproduced else '; WARNING: it did not reproduce'})")
    return 1
