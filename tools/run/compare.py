"""`fedemu compare`: every scheduler x policy x seed of one scenario, run side by side and tabulated.

Choices made here:
- Every run is ``runner.execute`` with the same scenario, overrides and seed, so the cluster, workload and
  constraint assignment are the same for every scheduler of a seed (a ``--set`` key that only some
  schedulers declare goes to those runs only); each writes its own folder
  ``OUT/<scheduler>-<policy>-s<seed>/`` exactly as ``fedemu run --out`` does.
- Runs go to ``tools.run.pool``: a pool of ``--jobs`` processes (default: the CPU count), started with
  ``spawn`` so no trio or numpy state is inherited (with one process or one run they run here, one after
  another), or the Dask cluster at ``--cluster ADDRESS``. Results are the same whichever ran them.
- A scheduler that takes no worker-choice policy (its plug-in says so; Sparrow) runs once per seed and
  its rows show policy ``-``.
- CDFs pool the seeds of one scheduler/policy into one curve: delays from each run's jobs.csv, utilization
  from its utilization.csv (1 s buckets).
- compare.csv has one row per run in plan order; "invalid_requests" (the requests a scheduler found
  invalid, from the counters its plug-in names: Megha's failed validations) is empty where the
  scheduler names none; every counter any run kept is a ``counter:<name>`` column, and with Megha's users
  each user's share, measured shares, tasks preempted and wasted seconds are ``fair:user<u>_<name>``
  columns (compare ``--set fairness=off`` in a second compare against the default).
"""

from __future__ import annotations

import csv
import gc
import io
import sys
import time
import traceback
from pathlib import Path

from rich.console import Console
from rich.table import Table

from fedemu.actors.registry import SCHEDULERS
from fedemu.fabric.errors import ConfigError, FedemuError, unknown_name

from . import outdir, runner
from . import params as params_mod
from .atomic import write_json, write_text
from ..results.results import finished, plain

STATS = ("p50", "p90", "p99", "max", "mean")
ALLOCATION_KEYS = ("allocation", "allocation_p50", "allocation_p99", "framework_queueing", "processing",
                   "worker_queueing", "communication")


def _names(text: str, what: str, known) -> list[str]:
    """The comma-separated names of ``text`` (``all``: every known one, in its order), each checked."""
    if str(text).strip() == "all":
        return list(known)
    names = list(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))
    if not names:
        raise ConfigError(f"--{what}s is empty; known: {', '.join(sorted(known))}")
    for n in names:
        if n not in known:
            raise unknown_name(what, n, known)
    return names


def _seeds(text: str) -> list[int]:
    out = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            out.append(int(part))
        except ValueError:
            raise ConfigError(f"--seeds {text!r}: {part!r} is not a whole number; expected e.g. 1,2,3") from None
        if not 0 <= out[-1] < 2**64:  # as for run --seed: the journal holds a 64-bit unsigned seed
            raise ConfigError(f"--seeds {text!r}: {part} is not from 0 to 2^64-1")
    return list(dict.fromkeys(out))


def plan_runs(scenario: str, schedulers: str, policies: str, seeds: str, overrides: dict, out: str | None,
              plots: bool = False, engine: str = "trio") -> list[dict]:
    """The runs to make, in table order; every parameter set is checked before anything runs. Each run
    writes its folder under ``out`` (None: none, its results come back in memory), without its own plots
    unless ``plots`` (the grid draws pooled ones; a run's take a second or two each), on ``engine``."""
    from fedemu.policies.worker_choice import WORKER_CHOICE_NAMES

    ref = runner.scenario_ref(scenario)
    module = runner.load(ref)
    for key in ("scheduler", "policy"):
        if key in overrides:
            raise ConfigError(f"--set {key}=... is chosen by compare; use --{key}s instead")
        if key not in module.PARAMS:
            raise ConfigError(f"scenario {scenario!r} has no {key!r} parameter, so compare cannot vary it")
    scheds = _names(schedulers, "scheduler", SCHEDULERS)
    pols = _names(policies, "policy", WORKER_CHOICE_NAMES)
    seed_list = _seeds(seeds)
    plan = []
    own = {name for s in SCHEDULERS.values() for name in s.param_names}  # keys of some scheduler only
    for key in overrides:
        if key in own and not any(key in SCHEDULERS[s].param_names for s in scheds):
            raise ConfigError(f"--set {key}=... applies to none of the schedulers compared ({', '.join(scheds)})")
    for scheduler in scheds:
        free = not SCHEDULERS[scheduler].takes_policy
        mine = {k: v for k, v in overrides.items() if k not in own or k in SCHEDULERS[scheduler].param_names}
        for policy in [None] if free else pols:
            for seed in seed_list:
                run_overrides = {**mine, "scheduler": scheduler, **({} if free else {"policy": policy})}
                params_mod.resolve_scenario(module, run_overrides)
                label = "-" if free else policy
                name = f"{scheduler}-{'any' if free else policy}-s{seed}"
                plan.append({"scenario": ref, "scheduler": scheduler, "policy": label, "seed": seed,
                             "overrides": run_overrides, "out_dir": None if out is None else str(Path(out) / name),
                             "name": name, "plots": plots, "engine": engine})
    return plan


def run_one(spec: dict) -> dict:
    """One run in whatever process this is; errors come back as text, never as a lost pool worker.

    A pool worker runs one spec after another. A run's actors and records form cycles that only the
    collector frees, and the next run's ``kernel.gc_paused`` would freeze them unfreed: two workers held
    12 GB each after 21 megha-2023 paper-scale runs between them; one of those runs, alone, peaks at 3.5 GB.
    So each run ends with a collection. A run without a folder brings its tables back (``tables``)."""
    try:
        result = runner.execute(spec["scenario"], seed=spec["seed"], overrides=spec["overrides"],
                                out_dir=spec["out_dir"], plots=spec.get("plots", False),
                                engine=spec.get("engine", "trio"), keep_fabric=False)
        if spec["out_dir"] is None:
            from ..api.api_result import tables_of

            return {"name": spec["name"], "summary": result.summary, "tables": tables_of(result.recorder)}
        return {"name": spec["name"], "summary": result.summary}
    except FedemuError as e:
        return {"name": spec["name"], "error": str(e), "config": True}
    except Exception:  # a bug: report it with its run instead of killing the whole comparison
        return {"name": spec["name"], "error": traceback.format_exc(), "config": False}
    finally:
        result = None
        gc.collect()


def execute_plan(plan: list[dict], jobs: int, cluster=None, done: dict[str, dict] | None = None, *,
                 note=None, progress: bool = False) -> dict[str, dict]:
    """Run every spec not in ``done`` (``pool.run_all``: a spawn pool when jobs > 1, or the Dask ``cluster``,
    a client or its address); results by run name, those of ``done`` included. ``note(result, finished,
    total)`` is called as each run ends; ``progress``: the pool's progress bar (a terminal or a notebook)."""
    from . import pool

    results: dict[str, dict] = dict(done or {})

    def arrived(_, res):
        results[res["name"]] = res
        if note is not None:
            note(res, len(results), len(plan))

    todo = [spec for spec in plan if spec["name"] not in results]
    pool.run_all(todo, run_one, jobs=jobs, cluster=cluster, on_result=arrived, progress=progress)
    return results


def line_per_run(console: Console):
    """``execute_plan``'s ``note`` for the command line: ``[k/n] name: wall s (elapsed s)`` on ``console``."""
    t0 = time.perf_counter()

    def note(res: dict, finished: int, total: int) -> None:
        state = "failed" if "error" in res else f"{res['summary'].get('wall_s', 0):.1f} s"
        console.print(f"[{finished}/{total}] {res['name']}: {state}  (elapsed {time.perf_counter() - t0:.0f} s)")

    return note


def plan_record(plan: list[dict]) -> dict:
    """What ``compare.json`` holds: each run's name, scheduler, policy, seed and parameters."""
    keys = ("name", "scenario", "scheduler", "policy", "seed", "overrides")
    return plain({"runs": [{k: spec[k] for k in keys} for spec in plan]})


def ready_folder(out: Path, plan: list[dict], force: bool) -> dict[str, dict]:
    """Make ``out`` ready for ``plan``: a folder holding an earlier compare of the same plan is resumed
    (its complete runs are returned, to be reused; not with ``force``); else it must be empty, or with
    ``force`` hold only an earlier compare's results (``outdir.clear_compare``), and gets ``compare.json``."""
    record = plan_record(plan)
    if not force and outdir.compare_plan(out) == record:
        done = {}
        for spec in plan:
            summary = finished(spec["out_dir"])
            if summary is None:
                continue
            why = disagreement(spec, summary)
            if why:
                print(f"fedemu: note: run {spec['name']} runs again: its summary.json {why}", file=sys.stderr)
                for name in sorted(outdir.RUN_FILES):  # its folder holds this run's files alone: start afresh
                    path = Path(spec["out_dir"]) / name
                    if path.is_file() and not path.is_symlink():
                        path.unlink()
                continue
            done[spec["name"]] = {"name": spec["name"], "summary": summary}
        return done
    outdir.clear_compare(out, force)
    write_json(out / outdir.COMPARE_PLAN, record)
    return {}


def disagreement(spec: dict, summary: dict) -> str:
    """Why a finished run's summary cannot be reused for ``spec`` ("" when it can): a resumed sweep
    trusts nothing it did not check. Its scenario, scheduler, policy, seed and parameters must be the
    plan's, its job counts those of its own jobs.csv, and its digest that of its journal, if it kept one."""
    expect = {"scenario": spec["scenario"], "scheduler": spec["scheduler"], "seed": spec["seed"],
              **({} if spec["policy"] == "-" else {"policy": spec["policy"]})}
    for key, value in expect.items():
        if summary.get(key) != value:
            return f"says {key} {summary.get(key)!r}, the plan {value!r}"
    params = summary.get("params") if isinstance(summary.get("params"), dict) else {}
    for key, value in spec["overrides"].items():
        if key not in params or params[key] != plain(value):
            return f"says {key}={params.get(key)!r}, the plan {key}={plain(value)!r}"
    jobs, done = summary.get("jobs"), summary.get("jobs_completed")
    if type(jobs) is not int or type(done) is not int or not 0 <= done <= jobs:
        return f"says {done!r} of {jobs!r} jobs completed"
    folder = Path(spec["out_dir"])
    table = folder / "jobs.csv"
    if table.is_file():
        completed = [row.get("completion_s") for row in _rows(table)]
        counted = (len(completed), sum(1 for c in completed if c))
        if counted != (jobs, done):
            return f"says {done} of {jobs} jobs completed, its jobs.csv {counted[1]} of {counted[0]}"
    journal = folder / outdir.JOURNAL_FILE
    if journal.is_file():
        from fedemu.fabric.journal import check

        try:
            recorded = check(journal).footer.get("digest")
        except FedemuError as e:
            return f"sits beside a damaged journal ({e})"
        if recorded != summary.get("digest"):
            return f"says digest {summary.get('digest')}, its journal {recorded}"
    return ""


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---- rows, table, files ------------------------------------------------------------------------
def row_of(spec: dict, summary: dict) -> dict:
    counters = summary.get("counters") or {}
    row = {"scheduler": spec["scheduler"], "policy": spec["policy"], "seed": spec["seed"],
           "jobs": summary.get("jobs"), "jobs_completed": summary.get("jobs_completed"),
           "unschedulable": summary.get("unschedulable"), "tasks_dropped": summary.get("tasks_dropped"),
           "tasks_completed": summary.get("tasks_completed")}
    for prefix, key in (("delay", "delay_s"), ("short", "delay_short_s"), ("long", "delay_long_s")):
        d = summary.get(key) or {}
        if prefix != "delay":
            row[f"{prefix}_jobs"] = d.get("count", 0)
        for stat in STATS:
            row[f"{prefix}_{stat}_s"] = d.get(stat)
    row["utilization_mean"] = summary.get("utilization_mean")
    for key in ("imbalance_mean", "utilization_variance_mean"):  # the balance metrics (policies side by side)
        row[key] = summary.get(key)
    alloc = summary.get("allocation_s") or {}
    for key in ALLOCATION_KEYS:  # allocation time (mean, p50, p99) and the mean of each measured part
        row[f"alloc_{key}_s"] = alloc.get(key)
    invalid = SCHEDULERS[spec["scheduler"]].invalid_counters
    row["invalid_requests"] = sum(counters.get(k, 0) for k in invalid) if invalid else None
    for key in ("messages", "events", "wall_s", "virtual_end_s", "digest"):
        row[key] = summary.get(key)
    row["run_dir"] = spec["out_dir"]
    row["counters"] = {k: v for k, v in counters.items()
                       if k not in invalid and k not in ("unschedulable_tasks", "tasks_dropped")}
    row["fairness"] = {}  # Megha with users: per user its share, measured share (overall, while it waited)
    for u in (summary.get("fairness") or {}).get("users", ()):
        for key in ("share", "measured", "measured_waiting", "preempted", "wasted_s"):
            row["fairness"][f"user{u['user']}_{key}"] = u[key]
    return row


def flat_rows(rows: list[dict]) -> tuple[list[str], list[list]]:
    """compare.csv's header and cells (None where a value is missing): every counter any run kept is a
    ``counter:<name>`` column, every fairness figure a ``fair:<name>`` one."""
    counter_names = sorted({k for r in rows for k in r["counters"]})
    fair_names = list(dict.fromkeys(k for r in rows for k in r.get("fairness", {})))
    fields = [k for k in rows[0] if k not in ("counters", "fairness")] if rows else []
    header = fields + [f"counter:{c}" for c in counter_names] + [f"fair:{c}" for c in fair_names]
    cells = []
    for r in rows:
        fair = r.get("fairness", {})
        cells.append([r[k] for k in fields] + [r["counters"].get(c) for c in counter_names]
                     + [fair.get(c) for c in fair_names])
    return header, cells


def write_csv(path: Path, rows: list[dict]) -> None:
    header, cells = flat_rows(rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    for row in cells:
        w.writerow(["" if v is None else v for v in row])
    write_text(path, buf.getvalue())


def _fmt(value, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
            return f"{value:.{digits - 1}e}"
        return f"{value:.{digits}g}"
    return str(value)


def _counters_text(counters: dict) -> str:
    return " ".join(f"{k}={_fmt(v)}" for k, v in counters.items())


def build_table(rows: list[dict], title: str, with_seed: bool = True) -> Table:
    table = Table(title=title, show_lines=False, header_style="bold")
    cols = ["scheduler", "policy"] + (["seed"] if with_seed else []) + [
        "done", "p50 s", "p90 s", "p99 s", "max s", "short p50/p99 s", "long p50/p99 s", "util",
        "invalid", "alloc mean/p50/p99 s", "alloc parts s: fq/proc/wq/comm", "msgs", "wall s", "counters"]
    for c in cols:
        table.add_column(c, justify="left" if c in ("scheduler", "policy", "counters") else "right",
                         overflow="fold")
    for r in rows:
        cells = [r["scheduler"], r["policy"]] + ([str(r["seed"])] if with_seed else [])
        cells += [f"{_fmt(r['jobs_completed'])}/{_fmt(r['jobs'])}", _fmt(r["delay_p50_s"]), _fmt(r["delay_p90_s"]),
                  _fmt(r["delay_p99_s"]), _fmt(r["delay_max_s"]),
                  f"{_fmt(r['short_p50_s'])} / {_fmt(r['short_p99_s'])}",
                  f"{_fmt(r['long_p50_s'])} / {_fmt(r['long_p99_s'])}",
                  _fmt(r["utilization_mean"]), _fmt(r["invalid_requests"]),
                  " / ".join(_fmt(r[f"alloc_{k}_s"]) for k in ALLOCATION_KEYS[:3]),
                  " / ".join(_fmt(r[f"alloc_{k}_s"]) for k in ALLOCATION_KEYS[3:]), _fmt(r["messages"]),
                  _fmt(r["wall_s"], 3), _counters_text(r["counters"]).replace(" ", "\n")]  # one a line
        table.add_row(*cells)
    return table


def print_table(table: Table, file=None) -> None:
    """Print a table on stdout as wide as its cells need (at least 200 columns): no cell is broken inside a
    token, e.g. a counter's name=value (each counter has a line of its own)."""
    from rich.measure import Measurement

    console = Console(file=file, width=max(Console().width, 200))
    need = Measurement.get(console, console.options.update(width=10**4), table).maximum
    console.width = max(console.width, need)
    console.print(table)


def mean_rows(rows: list[dict]) -> list[dict]:
    """One row per scheduler/policy: the mean of every number over its seeds (None stays None)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["scheduler"], r["policy"]), []).append(r)
    out = []
    for (scheduler, policy), members in groups.items():
        row = {"scheduler": scheduler, "policy": policy, "seed": ",".join(str(m["seed"]) for m in members)}
        for key, value in members[0].items():
            if key in row or key in ("digest", "run_dir"):
                continue
            if key == "counters":
                names = list(dict.fromkeys(k for m in members for k in m["counters"]))
                row[key] = {k: sum(m["counters"].get(k, 0) for m in members) / len(members) for k in names}
                continue
            if key == "fairness":
                names = list(dict.fromkeys(k for m in members for k in m["fairness"]))
                values = {k: [m["fairness"].get(k) for m in members] for k in names}
                row[key] = {k: None if None in v else sum(v) / len(v) for k, v in values.items()}
                continue
            values = [m[key] for m in members]
            row[key] = None if any(v is None for v in values) else sum(values) / len(values)
        out.append(row)
    return out


def plot(comparison, out: Path) -> tuple[Path, Path]:
    """delay_cdf.png and utilization_cdf.png in ``out``: each scheduler/policy's runs pooled into one curve."""
    from ..results.results import plot_cdfs

    delay_png, util_png = out / "delay_cdf.png", out / "utilization_cdf.png"
    plot_cdfs(delay_png, comparison.pooled("delay"), "delay in job response time (s)", log=True,
              title="Job delay, all seeds pooled")
    plot_cdfs(util_png, comparison.pooled("utilization"), "utilization (1 s buckets)", log=False,
              title="Utilization, all seeds pooled")
    return delay_png, util_png


def failed_status(failures: list[dict], summary: str) -> int:
    """Name each failed run on stderr; exit status 1 if one ended in a verdict (a run's failure), a
    one-line error if all were refused as bad input, else 0."""
    for res in failures:
        print(f"fedemu: run {res['name']} failed: {res['error']}", file=sys.stderr)
    if any(not f["config"] for f in failures):
        return 1
    if failures:
        raise ConfigError(summary)
    return 0
