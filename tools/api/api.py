"""fedemu's Python API (``import fedemu``): run, compare, load and replay, returning data.

The command line is a thin layer over this module: ``fedemu run`` calls ``execute_run`` and ``fedemu compare``
calls ``sweep``, so both always agree (tests/test_api.py runs a case both ways). Parameters are the keys
``--set`` takes, checked the same way; bad input raises ``ConfigError`` (``fedemu.ConfigError``) whose
message is the line the command prints. Nothing is written unless asked (``out=``, ``journal=``, ``log=``).
See docs/api.md.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from fedemu.fabric.errors import ConfigError

from ..run import outdir, runner
from .api_result import Result, loaded, tables_of

if TYPE_CHECKING:  # imported where used: ``fedemu run`` needs none of a comparison's machinery
    from .api_comparison import Comparison

PathLike = str | os.PathLike


def _params(params: Mapping | None, more: dict) -> dict:
    """The scenario parameters: ``params`` (for keys that are also this API's own argument names) and the
    keyword arguments; a key given both ways is refused."""
    given = dict(params or {})
    both = sorted(set(given) & set(more))
    if both:
        raise ConfigError(f"parameter {both[0]!r} is given twice (in params= and as a keyword); give it once")
    return {**given, **more}


def _text(value, what: str) -> str:
    """A list of names or seeds as the comma-separated text the command line takes."""
    if isinstance(value, (str, int)):
        return str(value)
    if isinstance(value, Iterable):
        return ",".join(str(v) for v in value)
    raise ConfigError(f"{what} {value!r}: expected a name, a list of names or all")


def execute_run(scenario: str, seed: int, overrides: dict, *, out=None, record: bool = False, journal=None,
                log=None, log_level: str = "info", faults=None, progress=None,
                engine: str = "trio") -> tuple[runner.RunResult, str | None, str | None]:
    """One run, its outputs checked first (``out`` made, nothing left behind when refused); returns the
    runner's result (a run stopped early by a signal: its partial result), the journal's path and the
    results folder (``record`` without ``out``: out/<scenario>-seed<N>).
    ``progress``: a context manager yielding the fabric's progress hook (the command line's bar or live
    view), entered once ``out`` is ready."""
    out, journal = journal_place(scenario, seed, out, record, journal)
    outdir.check_outputs(out, {"--journal": journal, "--log": log}, probe=False)
    with outdir.prepared(out), outdir.owned(out), progress or contextlib.nullcontext() as hook:
        outdir.check_outputs(out, {"--journal": journal, "--log": log})
        try:
            result = runner.execute(scenario, seed=seed, overrides=overrides, journal_path=journal, out_dir=out,
                                    progress=hook, log_path=log, log_level=log_level, faults=faults, engine=engine,
                                    keep_fabric=False)
        except runner.RunInterrupted as stop:  # Ctrl-C, SIGTERM: the results so far, marked partial
            result = stop.result
    return result, journal, out


def journal_place(scenario: str, seed: int, out, record: bool, journal) -> tuple[str | None, str | None]:
    """A run's results folder and journal path: ``record`` puts the journal in ``out`` (by default
    out/<scenario>-seed<N>), ``journal`` anywhere; both at once is refused."""
    if record and journal:  # one journal per run, in one place: say which
        where = os.path.join(out, outdir.JOURNAL_FILE) if out else f"OUT/{outdir.JOURNAL_FILE}"
        raise ConfigError(f"--record writes the journal to {where} and --journal to {journal}: give one of "
                          "them (--journal alone, or --record with --out)")
    if record and not out:
        out = outdir.default_run_dir(scenario, seed)
    return out, journal or (os.path.join(out, outdir.JOURNAL_FILE) if record else None)


def _result(run: runner.RunResult, out, journal) -> Result:
    """The API's Result of a finished run: read back from ``out`` when it wrote there (the same data), else
    its tables taken from its recorder now (the run's fabric is not kept)."""
    journal = None if journal is None else Path(journal)
    if out:
        return loaded(Path(out), journal=journal)
    tables = tables_of(run.recorder)
    return Result(run.summary, lambda: tables, journal=journal)


def run(scenario: str = "default", seed: int = 1, *, out: PathLike | None = None, record: bool = False,
        journal: PathLike | None = None, log: PathLike | None = None, log_level: str = "info",
        fault_plan: PathLike | None = None, progress: bool = False, params: Mapping[str, Any] | None = None,
        engine: str = "trio", **more: Any) -> Result:
    """Run ``scenario`` (a built-in name or a scenario .py file) with ``seed`` and parameters (the keys
    ``--set`` takes, as keywords or in ``params``) and return its ``Result``.

    ``out``: a folder for summary.json, the CSVs and plots (as ``fedemu run --out``); ``record``: the journal
    in ``out``/messages.log; ``journal``: the journal at this path; ``log``: the protocol events as JSON
    lines (at ``log_level`` and above); ``fault_plan``: a fault plan file (TOML or JSON); ``progress``: a
    progress bar on a terminal; ``engine``: what steps the actors, ``"trio"`` (the reference) or ``"direct"``
    (the same journal, sooner: docs/performance.md). Nothing is written unless asked. Bad input raises
    ``ConfigError``; a broken invariant raises ``RunViolation``, whose ``result`` is the run's Result."""
    if log_level not in ("debug", "info", "warning"):
        raise ConfigError(f"--log-level {log_level!r}: expected debug, info or warning")
    if seed is None or isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**64:
        raise ConfigError(f"--seed {seed!r}: expected a whole number from 0 to 2^64-1")
    faults = None
    if fault_plan is not None:
        from fedemu.scenarios import fault_plan as plans

        faults = plans.load(os.fspath(fault_plan))
    out, journal = journal_place(scenario, seed, None if out is None else os.fspath(out), record,
                                 None if journal is None else os.fspath(journal))
    bar = None
    if progress:
        from ..run.progress import progress_bar

        bar = progress_bar(enabled=True)
    try:
        done, _, _ = execute_run(scenario, seed, _params(params, more), out=out, journal=journal,
                                 log=None if log is None else os.fspath(log), log_level=log_level, faults=faults,
                                 progress=bar, engine=engine)
    except runner.RunViolation as violation:
        if violation.result is not None:  # the run's data, for the caller to look into
            violation.result = _result(violation.result, out, journal)
        raise
    return _result(done, out, journal)


def sweep(scenario: str, *, schedulers, policies, seeds, overrides: dict, out=None, force: bool = False,
          processes: int = 0, cluster=None, progress: bool = False, say=None, note=None,
          plots: bool = False, engine: str = "trio") -> Comparison:
    """``compare``'s work (and ``fedemu compare``'s): plan, run what an earlier compare in ``out`` did not
    finish (compare's resume rules), write compare.csv and the plots there, and return the Comparison.
    ``say(text)`` gets the lines the command prints before the runs, ``note(result, finished, total)`` each
    run's end; ``plots``: each run's folder gets its own plots too; ``engine``: the runs' (``run``)."""
    from ..run import compare, pool
    from .api_comparison import Comparison

    out = None if out is None else os.fspath(out)
    folder = None if out is None else Path(out)
    with outdir.prepared(out):
        plan = compare.plan_runs(scenario, _text(schedulers, "schedulers"), _text(policies, "policies"),
                                 _text(seeds, "seeds"), overrides, out, plots, engine)
        jobs = processes if processes and processes > 0 else (os.cpu_count() or 1)
        client_given = cluster is not None and not isinstance(cluster, str)  # a distributed.Client: the caller's
        with contextlib.nullcontext(cluster) if client_given else pool.connected(cluster) as client:
            # (an address is connected to before anything is written: a bad one leaves nothing)
            done = compare.ready_folder(folder, plan, force) if folder is not None else {}
            if say is not None:
                where = f"on the Dask cluster at {cluster}" if cluster else \
                    f"in {min(jobs, max(1, len(plan) - len(done)))} process(es)"
                say(f"compare: {len(plan)} runs of {plan[0]['scenario']} {where}")
                if done:
                    say(f"compare: resuming the compare in {folder}: {len(done)} of {len(plan)} runs finished "
                        "earlier are reused (--force starts again)")
            results = compare.execute_plan(plan, jobs, cluster=client, done=done, note=note, progress=progress)
    comparison = Comparison(plan, results, path=folder, reused=len(done))
    if folder is not None and comparison.rows:
        compare.write_csv(folder / "compare.csv", list(comparison.rows))
        compare.plot(comparison, folder)
    return comparison


def compare(scenario: str = "default", *, schedulers: str | Iterable[str] = "all",
            policies: str | Iterable[str] = "random", seeds: int | str | Iterable[int] = 1, processes: int = 0,
            cluster: str | Any = None, out: PathLike | None = None, force: bool = False, progress: bool = True,
            params: Mapping[str, Any] | None = None, engine: str = "trio", **more: Any) -> Comparison:
    """Run every scheduler x policy x seed of ``scenario`` with the same parameters and return the
    ``Comparison``: as ``fedemu compare``, whose table ``Comparison.table()`` is.

    ``schedulers``, ``policies``: names or ``all``; ``seeds``: a seed or several; ``processes``: local
    processes (0: one per CPU); ``cluster``: a Dask scheduler's address (or a ``distributed.Client``) to run
    on instead; ``out``: a folder for compare.csv, the plots and one folder per run, resumed as ``fedemu
    compare`` resumes one (``force``: start again); ``progress``: a progress bar over the runs on a terminal
    or in a notebook. Without ``out`` nothing is written and the runs' tables come back in memory. Bad
    input raises ``ConfigError`` before anything runs; a run that fails is in ``Comparison.failures``.
    ``engine``: what steps the actors (as ``run``'s)."""
    return sweep(scenario, schedulers=schedulers, policies=policies, seeds=seeds, overrides=_params(params, more),
                 out=out, force=force, processes=processes, cluster=cluster, progress=progress, engine=engine)


def load(path: PathLike) -> Result | Comparison | Replay:
    """Read what the command line wrote: a ``fedemu run --out`` folder (a ``Result``), a ``fedemu compare
    --out`` folder (a ``Comparison``) or a journal file (its records, as ``replay(path)``)."""
    folder = Path(path)
    if folder.is_file():
        return replay(folder)
    if not folder.is_dir():
        raise ConfigError(f"{path}: no such folder or journal")
    if (folder / outdir.COMPARE_PLAN).is_file():
        from .api_comparison import loaded_comparison

        return loaded_comparison(folder)
    return loaded(folder)


class Record(NamedTuple):
    """One journal record: its index, virtual time (s), type (send, deliver, drop, timer, fire, fault),
    message kind (e.g. ``megha.launch_failed``; None for a fault), the actors it names and its line as
    ``fedemu replay`` prints it."""

    index: int
    time_s: float
    type: str
    kind: str | None
    actors: tuple[str, ...]
    line: str


class Replay:
    """A journal read back: its header and footer, the records the filters kept, and (``verify``) whether
    a re-run from its header reproduced it record for record."""

    def __init__(self, header: Mapping, footer: Mapping, records: list[Record], total: int,
                 verified: bool | None = None, report: str = "") -> None:
        from .api_result import frozen

        self.header = frozen(dict(header))
        self.footer = frozen(dict(footer or {}))
        self.records = tuple(records)
        self.total = total
        self.verified = verified
        self.report = report

    def count(self, kind: str, type: str = "send") -> int:
        """How many records of message ``kind`` (and record ``type``: a send by default, so each message
        counts once) the filters kept."""
        return sum(1 for r in self.records if r.kind == kind and r.type == type)

    def kinds(self) -> dict[str, int]:
        """Messages sent, by kind (the records the filters kept), most frequent first."""
        counts: dict[str, int] = {}
        for r in self.records:
            if r.type == "send" and r.kind is not None:
                counts[r.kind] = counts.get(r.kind, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def __repr__(self) -> str:
        checked = "" if self.verified is None else f" verified={self.verified}"
        return f"<fedemu.Replay {len(self.records)} of {self.total} records{checked}>"


def replay(journal: PathLike, *, verify: bool = False, scenario: PathLike | None = None, actor: str | None = None,
           kind: str | None = None, t_from: float | None = None, t_to: float | None = None) -> Replay:
    """Read a journal (``fedemu run --record`` or ``--journal``) as data: its records, filtered as ``fedemu
    replay --show`` filters them (``actor``, ``kind``: a record type or message kind, ``t_from``/``t_to`` in
    seconds), the footer's digest checked. ``verify``: re-run the run from the header and compare record for
    record (``Replay.verified``, and ``Replay.report`` the line ``--verify`` prints). ``scenario``: the
    scenario .py file to re-run and name message fields from (a journal never names code to import)."""
    from fedemu.fabric.journal import CODE_NAMES

    from ..replay import replay as replay_mod

    path = os.fspath(journal)
    script = None if scenario is None else os.fspath(scenario)
    if verify and any(v is not None for v in (actor, kind, t_from, t_to)):
        raise ConfigError("actor, kind, t_from and t_to filter the records shown; verify compares them all")
    for name, value in (("t_from", t_from), ("t_to", t_to)):
        if value is not None and not (isinstance(value, (int, float)) and 0 <= value < float("inf")):
            raise ConfigError(f"{name} {value!r}: expected a number of seconds >= 0")
    if t_from is not None and t_to is not None and float(t_from) > float(t_to):
        raise ConfigError(f"--to {t_to} is before --from {t_from}: no record lies between them")
    records: list[Record] = []

    def keep(index, rec, line, fmt) -> None:
        records.append(Record(index, rec[1] / 1e6, CODE_NAMES[rec[0]], fmt.kind_of(rec), fmt.actors_of(rec), line))

    _, total, footer = replay_mod.select(path, keep, actor=actor, kind=kind,
                                         t_from=None if t_from is None else str(t_from),
                                         t_to=None if t_to is None else str(t_to), scenario_file=script)
    from fedemu.fabric.journal import JournalReader

    reader = JournalReader(path)
    header = reader.header
    reader.close()
    verified, report = None, ""
    if verify:
        lines: list[str] = []
        verified = replay_mod.verify(path, out=lines.append, scenario_file=script) == 0
        report = "\n".join(lines)
    return Replay(header, footer, records, total, verified, report)
