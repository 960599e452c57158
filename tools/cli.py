"""The `fedemu` command line: run, compare, replay, fuzz and bench."""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
import threading

from fedemu.fabric.atomic import STDOUT
from fedemu.fabric.errors import ConfigError, FedemuError
from fedemu.scenarios.trace import MAX_TRACE_S

from .run import outdir

MAX_SECONDS = MAX_TRACE_S  # no run's virtual time goes beyond the largest time a trace may give


def _progress(args):
    """The run's progress hook, as a context manager: the live view's (``tools.live.tui``, imported only when
    ``--tui``, ``--paused`` or ``--pace`` asks for it), the bar's, or None with ``--quiet``."""
    if args.tui or args.paused or args.pace is not None:
        from .live.tui import progress_for

        return progress_for(args)
    if args.quiet:
        return None
    from .run.progress import progress_bar

    return progress_bar()


def _cmd_run(args) -> int:
    from .api import api
    from .run import params, runner

    overrides = params.parse_overrides(args.set)
    if args.help_params:
        print(params.describe(runner.load(runner.scenario_ref(args.scenario or "default")), overrides))
        return 0
    if args.scenario is None:
        raise FedemuError("run needs a scenario name (e.g. default) or a scenario .py file")
    if args.log_level is not None and not args.log:
        raise ConfigError(f"--log-level {args.log_level} filters the event log: add --log FILE")
    args.out, journal = api.journal_place(args.scenario, args.seed, args.out, args.record, args.journal)
    view = [opt for opt, on in (("--tui", args.tui), ("--paused", args.paused), ("--pace", args.pace)) if on]
    if args.check_determinism and view:  # two runs, one in a child process: no live view to show them in
        raise ConfigError(f"--check-determinism runs the scenario twice, the second in another process, with no "
                          f"live view; {view[0]} shows one run: give one of them")
    faults = _fault_plan(args.faults)
    if args.check_determinism:
        return _check_determinism(args, overrides, journal, faults)
    if args.engine != "trio" and view:
        raise ConfigError(f"{view[0]} paces the run on trio's engine; --engine {args.engine} is for runs without "
                          "a live view: give one of them")
    result, _, _ = api.execute_run(args.scenario, args.seed, overrides, out=args.out, journal=journal, log=args.log,
                                   log_level=args.log_level or "info", faults=faults, progress=_progress(args),
                                   engine=args.engine)
    with contextlib.redirect_stdout(sys.stderr) if args.log == STDOUT else contextlib.nullcontext():
        _print_summary(result.summary)  # with --log -, standard output holds the event log alone
        _warn_unfinished(result.summary)
        _warn_late_faults(result.summary)
        if journal:
            print(f"journal: {journal}")
        if args.log and args.log != STDOUT:
            print(f"event log: {args.log}")
        if args.out:
            print(f"results: {args.out}")
    return _say_stopped_early(result.summary, args.out)


STOPPED_STATUS = {"SIGTERM": 128 + signal.SIGTERM}  # else 130, as for Ctrl-C: the user stopped the run


def _say_stopped_early(summary: dict, out) -> int:
    """For a run stopped early (q in the live view, Ctrl-C, SIGTERM): a line on stderr saying when, by
    what and how many of the jobs asked were done, and the exit status (130, or 143 for SIGTERM); 0 for
    a run that ended by itself."""
    partial = summary.get("partial")
    if not isinstance(partial, dict):
        return 0
    asked, done = partial.get("jobs_asked"), summary.get("jobs_completed")
    jobs = "" if not isinstance(done, int) else f": {done:,} of {asked:,} jobs done" if isinstance(asked, int) \
        else f": {done:,} jobs done"
    where = f"; the results in {out} are partial (summary.json says so)" if out else ""
    print(f"fedemu: stopped early by {partial.get('by')} at {partial.get('stopped_at_s', 0):,.6f} s of virtual "
          f"time{jobs}{where}", file=sys.stderr)
    return STOPPED_STATUS.get(partial.get("by"), 130)


def _fault_plan(path):
    """``--faults PLAN``: the plan file read and checked before the run (None without the option)."""
    if path is None:
        return None
    from fedemu.scenarios import fault_plan

    return fault_plan.load(path)


def _check_files(out, journal, log) -> None:
    """The journal's and the event log's paths, checked before the run (after ``--out`` is made)."""
    outdir.check_outputs(out, {"--journal": journal, "--log": log})


def _warn_unfinished(summary: dict) -> None:
    """A line on stderr when some jobs did not complete (most often: no worker could run them), and one
    when tasks no worker can run were dropped (``infeasible=drop-task``)."""
    dropped = summary.get("tasks_dropped") or 0
    if dropped:
        print(f"fedemu: note: {dropped:,} tasks no worker can run were dropped (infeasible=drop-task); their "
              f"{summary.get('jobs_with_dropped_tasks', 0):,} jobs ran without them", file=sys.stderr)
    jobs, done = summary.get("jobs"), summary.get("jobs_completed")
    if not isinstance(jobs, int) or not isinstance(done, int) or done >= jobs or summary.get("partial"):
        return  # a run stopped early says so in a line of its own
    rejected = summary.get("unschedulable", 0)
    why = f"{rejected:,} unschedulable (a task no worker can run: see capacity, demand, constraints)" \
        if rejected else "still running when the run ended"
    level = "warning" if 2 * (jobs - done) > jobs else "note"  # most jobs lost: the results mean little
    print(f"fedemu: {level}: {jobs - done:,} of {jobs:,} jobs did not complete; {why}", file=sys.stderr)


def _warn_late_faults(summary: dict) -> None:
    """A line on stderr when faults of the plan lay after the run's end: they never happened."""
    late = summary.get("faults_never_applied")
    if not late or summary.get("partial"):
        return
    first = late[0]
    more = f" and {len(late) - 1} more" if len(late) > 1 else ""
    print(f"fedemu: warning: {len(late)} fault(s) of the plan never happened: the run ended at "
          f"{summary.get('virtual_end_s', 0):g} s, before {first[1]} {'/'.join(map(str, first[2]))} at "
          f"{first[0] / 1e6:g} s{more}", file=sys.stderr)


def _print_summary(summary: dict) -> None:
    from .results.report import print_summary

    print_summary(summary)


def _check_determinism(args, overrides, journal, faults=None) -> int:
    """Run twice (the second time in a fresh process with another PYTHONHASHSEED) and compare.

    The first run writes ``--out`` and keeps its journal where ``--record``/``--journal`` say."""
    from fedemu.fabric.journal import JournalReader

    from .run import runner
    from .replay.replay import report_comparison

    if args.log == STDOUT:
        raise ConfigError(f"--check-determinism compares the two runs' event logs: give --log a file, not {STDOUT}")
    outdir.check_outputs(args.out, {"--journal": journal, "--log": args.log}, probe=False)
    with tempfile.TemporaryDirectory(prefix="fedemu-det-") as tmp, outdir.prepared(args.out), outdir.owned(args.out):
        _check_files(args.out, journal, args.log)
        first, second = journal or os.path.join(tmp, "first.fjl"), os.path.join(tmp, "second.fjl")
        runner.execute(args.scenario, seed=args.seed, overrides=overrides, journal_path=first, out_dir=args.out,
                       log_path=args.log, log_level=args.log_level or "info", faults=faults)
        cmd = [sys.executable, "-m", "fedemu", "run", args.scenario, "--seed", str(args.seed), "--quiet",
               "--journal", second]
        second_log = os.path.join(tmp, "second.jsonl")
        if args.log:
            cmd += ["--log", second_log, "--log-level", args.log_level or "info"]
        for item in args.set or ():
            cmd += ["--set", item]
        if args.faults:
            cmd += ["--faults", args.faults]
        env = dict(os.environ, PYTHONHASHSEED=_other_hash_seed(os.environ.get("PYTHONHASHSEED")))
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr.strip() or proc.stdout.strip(), file=sys.stderr)
            return 1
        code = report_comparison(first, second, JournalReader(first).header,
                                 "deterministic: two runs (PYTHONHASHSEED differing) gave {count} identical records")
        return _compare_event_logs(args.log, second_log) if code == 0 and args.log else code


HASH_SEED_MAX = 4_294_967_295  # Python's largest PYTHONHASHSEED


def _other_hash_seed(ours: str | None) -> str:
    """A PYTHONHASHSEED for the second run that differs from this process's: ours plus 12345, wrapped into
    Python's range; with ours unset, 0 or ``random`` (not a number), a fixed 12345."""
    try:
        value = int(ours or "")
    except ValueError:
        return "12345"
    if not 0 <= value <= HASH_SEED_MAX:
        return "12345"
    return str((value + 12345) % (HASH_SEED_MAX + 1))


def _compare_event_logs(first: str, second: str) -> int:
    """The two runs' event logs, line by line (streamed): 0 when identical, else the first difference and 1."""
    n = 0
    with open(first, encoding="utf-8") as a, open(second, encoding="utf-8") as b:
        for n, (x, y) in enumerate(itertools.zip_longest(a, b), start=1):
            if x is None or y is None:  # one ended: count the rest of the other
                longer = n + sum(1 for _ in (a if y is None else b))
                ours, theirs = (longer, n - 1) if y is None else (n - 1, longer)
                print(f"event logs differ: {ours:,} lines in the first run, {theirs:,} in the second")
                return 1
            if x != y:
                print(f"event logs differ at line {n}:\n  first:  {x.rstrip()}\n  second: {y.rstrip()}")
                return 1
    print(f"event log: the same {n:,} lines in both runs")
    return 0


def _cmd_replay(args) -> int:
    from .replay import replay

    filters = [opt for opt, value in (("--actor", args.actor), ("--kind", args.kind), ("--from", args.t_from),
                                      ("--to", args.t_to), ("--job", args.job)) if value is not None]
    drawn = [opt for opt, value in (("--diagram", args.diagram), ("--trace", args.trace)) if value is not None]
    if args.t_from is not None and args.t_to is not None and float(args.t_from) > float(args.t_to):
        raise ConfigError(f"--to {args.t_to} is before --from {args.t_from}: no record lies between them")
    if args.scenario is not None and args.diagram is not None and args.trace is None:
        raise ConfigError("--scenario names the scenario file to re-run (--verify, --tui, --trace) or whose "
                          "message kinds to name (show): a diagram reads the journal alone")
    if drawn and (args.verify or args.tui or args.show):
        mode = "--verify" if args.verify else "--tui" if args.tui else "--show"
        raise ConfigError(f"{drawn[0]} writes a file, {mode} does something else: give one of them")
    if args.tui:
        from .live.tui import pace_option, replay_live

        if filters:
            raise ConfigError(f"{', '.join(filters)} filter the records shown; --tui shows the whole run")
        return replay_live(args.log, seek_s=args.seek, paused=args.paused, pace=pace_option(args.pace),
                           scenario_file=args.scenario)
    if args.seek is not None or args.paused or args.pace is not None:
        raise ConfigError("--seek, --paused and --pace control the live view: add --tui")
    if args.verify:
        if filters:
            raise ConfigError(f"{', '.join(filters)} filter the records shown; --verify compares them all")
        return replay.verify(args.log, scenario_file=args.scenario)
    if args.diagram is not None or args.trace is not None:
        return _draw(args)
    if args.job is not None:
        raise ConfigError("--job filters a diagram or a trace: add --diagram FILE or --trace FILE.json")
    return replay.show(args.log, actor=args.actor, kind=args.kind, t_from=args.t_from, t_to=args.t_to,
                       scenario_file=args.scenario)


def _draw(args) -> int:
    """``--diagram FILE`` and ``--trace FILE.json``: the journal drawn, with the filters given."""
    from .replay import diagram, replay, trace_events

    given = dict(t_from=args.t_from, t_to=args.t_to, actor=args.actor, job=args.job, kind=args.kind)
    outdir.check_file(args.diagram, "--diagram")
    outdir.check_file(args.trace, "--trace")
    outdir.check_inputs(None, {"--diagram": args.diagram, "--trace": args.trace},
                        {f"the journal {args.log}": args.log, f"the scenario file {args.scenario}": args.scenario})
    if args.diagram is not None:
        print(diagram.write(args.log, args.diagram, **given))
    if args.trace is not None:
        def rerun(header, probe):  # the service times: a re-run of the scenario --scenario or the header names
            return replay.rerun(header, None, progress=probe, scenario_file=args.scenario).digest

        print(trace_events.write(args.log, args.trace, rerun=rerun, **given))
    return 0


def _cmd_bench(args) -> int:
    if args.what == "fabric":
        from .bench import bench_fabric

        from .bench.neighbour import neighbour

        sizes = args.sizes or (100, 1_000, 10_000, 100_000)
        bench_fabric.check_memory(sizes, args.neighbour)
        with neighbour(args.neighbour) as alive:
            if args.neighbour:
                print(f"with a neighbour process streaming through {args.neighbour} MiB")
            bench_fabric.run(sizes=sizes, messages=args.messages or BENCH_MESSAGES, repeat=args.repeat or 3)
            alive()  # a neighbour that died during the figures: they were not taken beside it
        return 0
    fabric_only = [opt for opt, value in (("--sizes", args.sizes), ("--messages", args.messages),
                                          ("--neighbour", args.neighbour)) if value]
    if fabric_only:
        raise ConfigError(f"{', '.join(fabric_only)} {'is' if len(fabric_only) == 1 else 'are'} for bench fabric "
                          f"only; bench {args.what} runs whole scenarios")
    from .bench import bench_megha

    return bench_megha.main(args)


def _cmd_fuzz(args) -> int:
    from .search import fuzz

    return fuzz.main(args)


def _cmd_compare(args) -> int:
    """``fedemu compare``: the runs made by the API (``api.sweep``), their table printed."""
    from rich.console import Console

    from .api import api
    from .run import params
    from .run.compare import build_table, failed_status, line_per_run, mean_rows, print_table

    console = Console(stderr=True, soft_wrap=True)  # one line per message, never wrapped inside a path
    comparison = api.sweep(args.scenario, schedulers=args.schedulers, policies=args.policies, seeds=args.seeds,
                           overrides=params.parse_overrides(args.set), out=args.out, force=args.force,
                           processes=args.jobs, cluster=args.cluster, say=console.print,
                           note=line_per_run(console), plots=args.plots, engine=args.engine)
    rows = list(comparison.rows)
    if rows:
        print_table(build_table(rows, f"{comparison.scenario}: every run"))
        if len({r["seed"] for r in rows}) > 1:
            print_table(build_table(mean_rows(rows), "mean over seeds", with_seed=False))
        out = Path(args.out)
        print(f"results: {out / 'compare.csv'}, {out / 'delay_cdf.png'}, {out / 'utilization_cdf.png'}, "
              f"run folders under {out}" + ("" if args.plots else " (without plots of their own: --plots draws them)"))
    failures = [dict(f) for f in comparison.failures]
    return failed_status(failures, f"{len(failures)} of {len(comparison.runs)} runs failed (see above)")


def _cmd_reproduce(args) -> int:
    from .reproduce import reproduce

    return reproduce.main(args)


def _seconds(text: str) -> str:
    """argparse type for --from/--to/--seek: a finite number of seconds >= 0, within the 1e7 s any run
    may last (kept as text for tools.replay.replay)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 0 to {MAX_SECONDS:g}, e.g. 0.5")
    return text


def _whole(text: str, minimum: int, maximum: int | None = None) -> int:
    """``text`` as a whole number in [minimum, maximum], else an argparse error saying the range."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum or (maximum is not None and value > maximum):
        bound = f"from {minimum} to {maximum}" if maximum is not None else f">= {minimum}"
        raise argparse.ArgumentTypeError(f"expected a whole number {bound}, got {text!r}")
    return value


def _positive(text: str) -> int:
    """argparse type: a positive integer."""
    return _whole(text, 1)


def _non_negative(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _whole(text, 0)


SEED_MAX = 2**64 - 1  # the journal stores the seed as a 64-bit unsigned integer


def _seed(text: str) -> int:
    """argparse type for --seed: a whole number from 0 to 2^64 - 1 (refused outside, never reduced)."""
    return _whole(text, 0, SEED_MAX)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, ``fedemu: error: ...``, with exit status 2."""

    def error(self, message: str):
        where = "" if self.prog == "fedemu" else f"{self.prog}: "  # the prefix already says fedemu
        self.exit(2, f"fedemu: error: {where}{message} (see {self.prog} --help)\n")


BENCH_MAX_ACTORS = 1_000_000  # 10 times the default's largest size; about 3 KB each (docs/performance.md)
BENCH_MESSAGES = 200_000  # bench fabric's messages per pattern and size
BENCH_MAX_MESSAGES = 10_000_000  # 50 times the default: at tens of us each, minutes per case already
BENCH_MAX_REPEAT = 100
NEIGHBOUR_MAX_MB = 4096  # far beyond any cache a neighbour could load


def _sizes(text: str) -> tuple[int, ...]:
    """argparse type for --sizes: comma-separated actor counts from 2 to BENCH_MAX_ACTORS."""
    try:
        sizes = tuple(int(s) for s in text.split(","))
    except ValueError:
        sizes = ()
    if not sizes or min(sizes) < 2 or max(sizes) > BENCH_MAX_ACTORS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of actor counts from 2 to {BENCH_MAX_ACTORS:,}, "
                                         "e.g. 100,1000")
    return sizes


def _engine_option(parser) -> None:
    from fedemu.fabric.kernel import ENGINES

    parser.add_argument("--engine", choices=ENGINES, default="trio",
                        help="what steps the actors: trio's scheduler (the default, the reference) or direct, a "
                        "plain loop over the same tasks that writes the same journal in less time (docs/performance.md)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="fedemu", description="Deterministic emulator of federated schedulers.")
    sub = p.add_subparsers(dest="command", required=True)

    r = sub.add_parser("run", help="run a scenario script")
    r.add_argument("scenario", nargs="?", help="scenario name (e.g. default) or path to a scenario .py file")
    r.add_argument("--seed", type=_seed, default=1, help="the run's seed, 0 to 2^64-1 (default 1)")
    r.add_argument("--out", help="directory for summary.json, CSVs and plots")
    r.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a scenario parameter")
    r.add_argument("--record", action="store_true", help="write the message journal (OUT/messages.log)")
    r.add_argument("--journal", help="write the message journal to this path")
    r.add_argument("--faults", metavar="PLAN", help="inject the faults of a plan file (TOML, or JSON by the .json "
                   "extension): [[fault]] tables with at_s, kind and target/link/sides; see docs/faults.md")
    r.add_argument("--check-determinism", action="store_true",
                   help="run twice in two processes and report the first event where they diverge")
    r.add_argument("--log", metavar="FILE", help="write the protocol events (invalid launches, repartitions, "
                   "rejected jobs ...) to FILE as JSON lines, stamped with actor and virtual time (- : standard "
                   "output, the summary then goes to stderr)")
    r.add_argument("--log-level", choices=("debug", "info", "warning"),
                   help="--log: the lowest level written (default info; debug adds every placement)")
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    _engine_option(r)
    r.add_argument("--tui", action="store_true", help="a live full-screen view of the run (keys: space pause, "
                   "n step, +/- pace, g seek, q quit with partial results); needs a terminal")
    r.add_argument("--paused", action="store_true", help="--tui: start paused")
    r.add_argument("--pace", metavar="RATIO", help="--tui: virtual seconds per wall second (1, 10, 100, 1000 "
                   "or max, the default)")
    r.add_argument("--help-params", action="store_true",
                   help="list the keys --set may change for this scenario (default: default) and scheduler "
                   "(--set scheduler=X), with defaults and meaning, and exit")
    r.set_defaults(func=_cmd_run)

    c = sub.add_parser("compare", help="run several schedulers/policies/seeds on the same scenario")
    c.add_argument("scenario")
    c.add_argument("--schedulers", default="all",
                   help="comma-separated scheduler names, or all (every registered scheduler; the default)")
    c.add_argument("--policies", default="random")
    c.add_argument("--seeds", default="1")
    c.add_argument("--out", default="out/compare",
                   help="folder for compare.csv, plots and one folder per run (default out/compare); it must "
                   "be empty or new")
    c.add_argument("--force", action="store_true",
                   help="reuse a non-empty --out: remove an earlier compare's results first")
    c.add_argument("--set", action="append", metavar="KEY=VALUE")
    c.add_argument("--jobs", type=_non_negative, default=0, help="parallel processes (default: CPU count)")
    c.add_argument("--cluster", metavar="ADDRESS", help="run on the Dask distributed scheduler at ADDRESS "
                   "(e.g. tcp://10.0.0.5:8786) instead of local processes; needs pip install 'fedemu[dask]'")
    _engine_option(c)
    c.add_argument("--plots", action="store_true", help="also draw each run's own plots in its folder (the "
                   "pooled ones in --out are always drawn)")
    c.set_defaults(func=_cmd_compare)

    from .reproduce.experiments import PAPERS

    rr = sub.add_parser("reproduce", help="run a paper's experiments and write a report with a verdict per claim")
    rr.add_argument("paper", help=f"which paper: {', '.join(PAPERS)}")
    rr.add_argument("--quick", action="store_true", help="scaled down (fewer workers and jobs, two seeds): minutes")
    rr.add_argument("--seeds", help="comma-separated seeds (default 1,2,3; --quick: 1,2); a claim needs two measured "
                    "seeds for a verdict")
    rr.add_argument("--out", help="folder for report.md, plots and the runs (default out/reproduce/PAPER[-quick]); an "
                    "earlier reproduction of the same paper there is resumed (finished runs are reused)")
    rr.add_argument("--only", metavar="EXP,...", help="run only these experiments (their names are in the report)")
    rr.add_argument("--jobs", type=_non_negative, default=1, help="parallel processes (default 1: the machine is shared)")
    rr.add_argument("--cluster", metavar="ADDRESS", help="run on the Dask distributed scheduler at ADDRESS instead "
                    "of local processes; needs pip install 'fedemu[dask]'")
    _engine_option(rr)
    rr.add_argument("--plots", action="store_true", help="also draw each run's own plots in its folder (the "
                    "report's are always drawn)")
    rr.add_argument("--report-only", action="store_true", help="run nothing: judge the claims again from the runs.csv "
                    "an earlier reproduction left in --out (after a change of claims or rules)")
    rr.set_defaults(func=_cmd_reproduce)

    rp = sub.add_parser("replay", help="verify or show a recorded journal")
    rp.add_argument("log")
    rp.add_argument("--scenario", metavar="FILE", help="the scenario .py file to re-run (--verify, --tui, --trace) "
                    "and whose message kinds to name: replay never imports a file a journal names (docs/trust.md)")
    mode = rp.add_mutually_exclusive_group()
    mode.add_argument("--verify", action="store_true", help="re-run from the header and compare")
    mode.add_argument("--show", action="store_true", help="print records, filtered by the options below "
                      "(the default)")
    rp.add_argument("--actor", help="show: records involving this actor (a name from the header, e.g. gm-0); "
                    "--diagram/--trace: messages to or from any of these comma-separated actors or roles (those a fault "
                    "plan names, e.g. worker, manager)")
    rp.add_argument("--kind", help="show: record type (send, deliver, drop, timer, fire, fault) or message kind; "
                    "--diagram/--trace: comma-separated message or timer kinds (patterns such as worker.*) or "
                    "deliver, drop, fire")
    rp.add_argument("--from", dest="t_from", metavar="SECONDS", type=_seconds,
                    help="show, --diagram, --trace: from this virtual time")
    rp.add_argument("--to", dest="t_to", metavar="SECONDS", type=_seconds,
                    help="show, --diagram, --trace: up to this virtual time")
    rp.add_argument("--job", metavar="N", help="--diagram/--trace: only messages and timers about job N (those with "
                    "a job_id field, or carrying the job)")
    rp.add_argument("--diagram", metavar="FILE", help="draw the run (or the part the filters pick) as a space-time "
                    "diagram: FILE.md a Mermaid sequence diagram, FILE.svg a picture, FILE.html a page with it; "
                    "refused beyond a few hundred messages (see docs/diagrams.md)")
    rp.add_argument("--trace", metavar="FILE.json", help="write the run as a Chrome trace-event file for Perfetto "
                    "or chrome://tracing: actors as tracks, messages as flows, faults, handler service times and "
                    "counters (see docs/diagrams.md)")
    mode.add_argument("--tui", action="store_true", help="the live view of the recorded run (re-run from the "
                      "header: the journal holds messages, not actor state; digest checked at the end)")
    rp.add_argument("--seek", metavar="SECONDS", type=lambda t: float(_seconds(t)), help="--tui: run at full speed to this virtual time, "
                    "then pause")
    rp.add_argument("--paused", action="store_true", help="--tui: start paused")
    rp.add_argument("--pace", metavar="RATIO", help="--tui: virtual seconds per wall second (1, 10, 100, 1000 "
                    "or max)")
    rp.set_defaults(func=_cmd_replay)

    fz = sub.add_parser("fuzz", help="search for fault plans that break a scheduler (hypothesis), shrink and "
                        "write each as a reproducible failure folder")
    fz.add_argument("scenario", help="scenario name (e.g. default) or path to a scenario .py file")
    fz.add_argument("--schedulers", default="all", help="comma-separated schedulers to draw from, or all (default)")
    fz.add_argument("--kinds", default="all", help="comma-separated fault kinds to allow, or all (default); a "
                    "fault is drawn with what ends it (crash,restart; partition,heal; slow,restore; loss); each "
                    "scheduler gets only those it survives (and slow/restore, which need no recovery)")
    size = fz.add_mutually_exclusive_group()
    size.add_argument("--examples", type=_positive, help="runs to try (default 100)")
    size.add_argument("--budget", metavar="TIME", help="search for this long instead, e.g. 90s, 10m, 2h")
    fz.add_argument("--seed", type=_seed, help="the search's seed: the same seed tries the same examples")
    fz.add_argument("--out", default="out/fuzz", help="folder for failure-K/ folders and the example database "
                    "(.hypothesis), which a later search retries first (default out/fuzz)")
    fz.add_argument("--set", action="append", metavar="KEY=VALUE", help="fix a scenario parameter (not drawn)")
    fz.add_argument("--safety-only", action="store_true", help="no liveness phase: every fault ends by itself "
                    "(within the workload's horizon), none lasts until a heal, no worker dies for good")
    fz.add_argument("--quiet", action="store_true", help="no progress bar")
    fz.set_defaults(func=_cmd_fuzz)

    own = "megha"  # plugin-boundary: the name of Megha's own benchmark (tools/bench/bench_megha.py)
    b = sub.add_parser("bench", help=f"benchmarks: fabric, {own} or schedulers")
    b.add_argument("what", choices=["fabric", own, "schedulers"])
    b.add_argument("--sizes", type=_sizes, help="fabric: comma-separated actor counts")
    b.add_argument("--messages", type=lambda t: _whole(t, 1, BENCH_MAX_MESSAGES),
                   help=f"fabric: messages per pattern and size (default {BENCH_MESSAGES:,}, at most "
                   f"{BENCH_MAX_MESSAGES:,})")
    b.add_argument("--repeat", type=lambda t: _whole(t, 1, BENCH_MAX_REPEAT), default=None,
                   help="runs of each case, alternating (fabric: the sides, default 3, the best of each is "
                   f"reported; {own} and schedulers: rounds over the cases, default 1, with the spread)")
    b.add_argument("--neighbour", type=lambda t: _whole(t, 0, NEIGHBOUR_MAX_MB), default=0, metavar="MB",
                   help="fabric: run beside a process that streams through MB MiB (a tenant that loads the cache; "
                   f"at most {NEIGHBOUR_MAX_MB})")
    b.add_argument("--case", action="append", help=f"{own}: which cases (yh1-1k, yh1, goog, syn1000); "
                   "schedulers: scheduler names; repeat the option or separate with commas; default all")
    b.add_argument("--profile", action="store_true", help=f"{own} and schedulers: run each case under cProfile "
                   "and print where its time goes, by layer and by file (the profiler slows calls: a guide, not a "
                   "timing)")
    b.set_defaults(func=_cmd_bench)
    return p


class _Signals:
    """The signal (SIGINT or SIGTERM) that ended the command, for its message and exit status."""

    got: int | None = None


def _on_signal(signum, frame) -> None:
    """Ctrl-C and SIGTERM alike: a running fabric stops at the end of its window, then the run unwinds
    outside trio and removes its temporary files; with no run going, the command stops at once."""
    _Signals.got = signum
    runner = sys.modules.get("fedemu.tools.run.runner")
    if runner is None:
        raise KeyboardInterrupt
    runner.interrupt("SIGTERM" if signum == signal.SIGTERM else "Ctrl-C (SIGINT)")


def _quiet_unraisable(hook):
    """``sys.unraisablehook`` less our stop: a signal handled inside a ``__del__`` (trio's nurseries have
    one) raises there, and Python would print that as a traceback; the stop stands all the same
    (``runner.interrupt``)."""
    def quiet(unraisable) -> None:
        if not issubclass(unraisable.exc_type, KeyboardInterrupt):
            hook(unraisable)
    return quiet


def _install_signals() -> list:
    """Our handler for SIGTERM, and for SIGINT unless it is ignored (a background job); returns what to
    restore. Only the main thread can do this."""
    if threading.current_thread() is not threading.main_thread():
        return []
    sigs = [signal.SIGTERM] + ([signal.SIGINT] if signal.getsignal(signal.SIGINT) is signal.default_int_handler else [])
    return [(sig, signal.signal(sig, _on_signal)) for sig in sigs]


def _quiet_stdout() -> None:
    """The reader of our stdout went away (``| head``): drop what is still buffered, say nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # stdout without a file descriptor (captured in tests)
        pass


def _say_scenario_failed(e: Exception, where: str) -> None:
    """One line for a user's scenario file that raised during or after its run (its journal kept)."""
    from .run.runner import failure

    kept = "".join(f"; {n.removeprefix('fedemu: ')}" for n in getattr(e, "__notes__", ()))
    who = "raised" if getattr(e, "fedemu_actor", None) and where.startswith(e.fedemu_actor[0] + " ") \
        else "the scenario raised"
    print(f"fedemu: failed: {where}: {who} {failure(e)}{kept}", file=sys.stderr)


def _cut_short(out) -> str:
    """``; the results in OUT are incomplete ...`` when a stop came while a run's result files were written."""
    if not isinstance(out, str) or not out:
        return ""
    from .results.results import incomplete

    return f"; the results in {out} are incomplete (summary.json says so)" if incomplete(out) else ""


def _stdout_closed() -> bool:
    """Whether standard output is closed (``fedemu run default >&-``): Python then drops every print, and the
    first file opened would take its descriptor. A stream without a descriptor (captured) is open."""
    if sys.stdout is None:
        return True
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def main(argv=None) -> int:
    closed = _stdout_closed()  # before anything opens a file, which would take its descriptor
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error already printed as one line
        return e.code if isinstance(e.code, int) else 2
    if closed:
        print(f"fedemu: error: standard output is closed, so what {args.command} prints (the summary, the table) "
              "would be lost; redirect it to a file, or to /dev/null to drop it", file=sys.stderr)
        return 2
    _Signals.got = None
    previous = _install_signals()
    hook = sys.unraisablehook
    sys.unraisablehook = _quiet_unraisable(hook)
    try:
        return args.func(args)
    except FedemuError as e:
        print(f"fedemu: {e.label}: {e}", file=sys.stderr)
        return e.exit_status
    except BrokenPipeError:  # like other Unix tools: stop quietly, with SIGPIPE's status
        _quiet_stdout()
        return 128 + signal.SIGPIPE
    except OSError as e:  # an output path that cannot be written, a directory that does not exist
        where = e.filename if e.filename is not None else ""
        print(f"fedemu: error: {where}: {e.strerror or e}", file=sys.stderr)
        return 2
    except Exception as e:
        where = getattr(e, "fedemu_where", None)
        if where is None or os.environ.get("FEDEMU_TRACEBACK"):  # fedemu's own bug: a report needs the traceback
            raise
        _say_scenario_failed(e, where)
        return 1
    except KeyboardInterrupt:
        cut = _cut_short(getattr(args, "out", None))
        if _Signals.got == signal.SIGTERM:
            print(f"fedemu: terminated (SIGTERM); temporary files removed{cut}", file=sys.stderr)
            return 128 + signal.SIGTERM
        print(f"fedemu: interrupted{cut}", file=sys.stderr)
        return 130
    finally:
        sys.unraisablehook = hook
        for sig, handler in previous:
            signal.signal(sig, handler)
        runner = sys.modules.get("fedemu.tools.run.runner")
        if runner is not None:  # a stop that came between runs ends with its command
            runner.clear_interrupt()


def entry() -> None:
    """The ``fedemu`` command (and ``python -m fedemu``): ``main``, then out of the process without the
    interpreter's teardown once the output is flushed. A run's records and actors are millions of objects,
    and freeing them one by one at exit cost about 0.8 s after a whole-trace run; every file is closed by
    then (written through ``atomic_write``), and no command leaves a process or thread behind."""
    code = main()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:  # (None: the process was started with that descriptor closed)
                stream.flush()
    except (OSError, ValueError):  # the reader went away, or a stream was closed: exit the usual way
        sys.exit(code)
    os._exit(code if isinstance(code, int) else 1)


if __name__ == "__main__":
    entry()
