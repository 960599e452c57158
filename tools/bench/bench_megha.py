"""`fedemu bench megha` and `fedemu bench schedulers`: whole runs with the journal on.

``megha``: Megha at scale on the public traces and syn_1000. ``schedulers``: one case per scheduler on
YH1_sub, the cases of the speed issue, so every scheduler's cost per event is measured the same way.
Each case runs in its own process (so peak memory is its own) and prints wall time, cost per event,
peak RSS, events, messages and tasks, plus the delay percentiles it produced. With ``--repeat N`` the
cases run N rounds in turn (a, b, c, a, b, c, ...: alternating, so a noisy spell hits every case) and
the spread of wall times is printed. Trace cases are skipped with a note when ``../shared/data`` is
absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TRACES = Path(__file__).resolve().parents[3] / "shared" / "data" / "meghanat_megha_simulator" / "traces" / "input"

# every case runs without service times (cost_model=zero): the emulator's own speed on the same work as before
CASES = {
    "yh1-1k": ("first 1,000 jobs of YH1_sub.tr, 10 GMs x 10 LMs x 100 workers (10k)",
               {"workload": "trace", "trace": "YH1_sub.tr", "jobs": 1000, "gms": 10, "lms": 10,
                "workers_per_partition": 100, "cost_model": "zero"}),
    "yh1": ("YH1_sub.tr (2,910 jobs, 122,878 tasks), 10 GMs x 10 LMs x 100 workers (10k)",
            {"workload": "trace", "trace": "YH1_sub.tr", "jobs": 0, "gms": 10, "lms": 10,
             "workers_per_partition": 100, "cost_model": "zero"}),
    "goog": ("GOOG_subtrace.tr (312,558 tasks), 10 GMs x 20 LMs x 100 workers (20k)",
             {"workload": "trace", "trace": "GOOG_subtrace.tr", "jobs": 0, "gms": 10, "lms": 20,
              "workers_per_partition": 100, "cost_model": "zero"}),
    "syn1000": ("syn_1000 (2,000 jobs, 2 M tasks), 10 GMs x 10 LMs x 100 workers (10k)",
                {"workload": "syn_1000", "jobs": 2000, "gms": 10, "lms": 10, "workers_per_partition": 100, "cost_model": "zero"}),
}


def _yh1(scheduler: str, gms: int, lms: int, wpp: int) -> dict:
    """YH1_sub in full on ``gms`` x ``lms`` x ``wpp`` workers, without service times."""
    return {"scheduler": scheduler, "workload": "trace", "trace": "YH1_sub.tr", "jobs": 0, "gms": gms, "lms": lms,
            "workers_per_partition": wpp, "cost_model": "zero"}


# one case per scheduler: the speed issue's table (Sparrow at 10k, Pigeon at 1k = 10 x 100, Megha 10 x 10 x 10)
SCHEDULERS = {
    "megha": ("YH1_sub.tr, Megha, 10 GMs x 10 LMs x 10 workers (1k)", _yh1("megha", 10, 10, 10)),
    "pigeon": ("YH1_sub.tr, Pigeon, 10 groups x 100 workers (1k), 3 distributors", _yh1("pigeon", 1, 10, 100)),
    "pigeonc": ("YH1_sub.tr, PigeonC, 10 groups x 100 workers (1k), 3 distributors", _yh1("pigeonc", 1, 10, 100)),
    "sparrow": ("YH1_sub.tr, Sparrow, 10k workers, 3 schedulers", _yh1("sparrow", 10, 10, 100)),
    "centralized": ("YH1_sub.tr, centralized, 1k workers", _yh1("centralized", 10, 10, 10)),
}
ALL = {**CASES, **SCHEDULERS}


def _child(case: str, out: str, profile: bool = False) -> None:
    """Run one case in this process and write its figures as JSON to ``out`` (with ``profile``, under
    cProfile, and the split of its time by part of the code, ``profile_split``)."""
    from fedemu.tools.bench.rss import peak_rss_mb
    from fedemu.tools.run.runner import execute

    _, overrides = ALL[case]
    overrides = dict(overrides)
    if overrides.get("trace"):
        overrides["trace"] = str(TRACES / overrides["trace"])
    with tempfile.TemporaryDirectory(prefix="fedemu-bench-") as tmp:
        journal = os.path.join(tmp, "messages.log")
        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        r = execute("default", seed=1, overrides=overrides, journal_path=journal)
        if profiler is not None:
            profiler.disable()
        size = os.path.getsize(journal)
    s = r.summary
    figures = {"case": case, "wall_s": r.wall_s, "peak_rss_mb": peak_rss_mb(),
               "events": s["events"], "messages": s["messages"], "tasks": s["tasks"], "jobs": s["jobs"],
               "journal_mb": size / 2**20, "delay_p50_s": s["delay_s"]["p50"], "delay_p99_s": s["delay_s"]["p99"],
               "utilization_mean": s["utilization_mean"], "counters": s["counters"]}
    if profiler is not None:
        import pstats

        from fedemu.tools.bench.profile_split import split

        figures["profile"] = split(pstats.Stats(profiler))
    from fedemu.tools.run.atomic import write_json

    write_json(out, figures, indent=None)


def main(args) -> int:
    table = SCHEDULERS if args.what == "schedulers" else CASES
    cases = [c.strip() for arg in args.case for c in arg.split(",") if c.strip()] if args.case else list(table)
    if not cases:
        from fedemu.fabric.errors import ConfigError

        raise ConfigError(f"--case names no bench case; known: {', '.join(sorted(table))}")
    for case in cases:
        if case not in table:
            from fedemu.fabric.errors import unknown_name

            raise unknown_name("bench case", case, table)
    rounds = args.repeat or 1
    runs: dict[str, list] = {}
    print(f"{'case':11} {'wall s':>8} {'us/event':>9} {'peak MB':>8} {'events':>10} {'messages':>10} {'tasks':>9} "
          f"{'p50 s':>8} {'p99 s':>9}  what")
    for r_ in range(rounds):
        for case in cases:
            what, overrides = table[case]
            if overrides.get("trace") and not (TRACES / overrides["trace"]).exists():
                if r_ == 0:
                    print(f"{case:11} skipped: {TRACES / overrides['trace']} is absent")
                continue
            r = _run_child(case, getattr(args, "profile", False))
            if r is None:
                print(f"{case:11} failed", flush=True)
                continue
            runs.setdefault(case, []).append(r)
            print(f"{case:11} {r['wall_s']:>8.2f} {r['wall_s'] / r['events'] * 1e6:>9.2f} {r['peak_rss_mb']:>8.0f} "
                  f"{r['events']:>10,} {r['messages']:>10,} {r['tasks']:>9,} {r['delay_p50_s']:>8.4f} "
                  f"{r['delay_p99_s']:>9.3f}  {what}", flush=True)
            if "profile" in r:
                _print_profile(r["profile"])
    if rounds > 1 and runs:
        print(f"\n{rounds} alternating rounds: wall s and us/event, min-max")
        for case, rs in runs.items():
            walls = sorted(r["wall_s"] for r in rs)
            per = [w / rs[0]["events"] * 1e6 for w in walls]
            print(f"{case:11} {walls[0]:.2f}-{walls[-1]:.2f} s   {per[0]:.2f}-{per[-1]:.2f} us/event   "
                  f"{rs[0]['events']:,} events")
    return 0


def _print_profile(parts, top: int = 12) -> None:
    """The profiled time by layer, then its largest parts."""
    from fedemu.tools.bench.profile_split import layers

    total = sum(p[1] for p in parts) or 1.0
    print("    by layer: " + ", ".join(f"{name} {own / total:.0%}" for name, own in layers(parts) if own / total >= 0.01))
    for name, own, calls in parts[:top]:
        print(f"    {own / total:6.1%}  {calls:>10,} calls  {name}")


def _run_child(case: str, profile: bool = False) -> dict | None:
    """Run ``case`` in a fresh interpreter; its figures, or None if it failed."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "figures.json")
        code = f"from fedemu.tools.bench.bench_megha import _child; _child({case!r}, {out!r}, {bool(profile)!r})"
        proc = subprocess.run([sys.executable, "-c", code])
        if proc.returncode != 0:
            return None
        with open(out) as f:
            return json.load(f)
