"""`fedemu bench megha`: Megha at scale on the public traces and syn_1000, journal on.

Each case runs in its own process (so peak memory is its own) and prints wall time, peak RSS,
events, messages and tasks, plus the delay percentiles it produced. Trace cases are skipped with a
note when ``../shared/data`` is absent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "meghanat_megha_simulator" / "traces" / "input"

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


def _child(case: str, out: str) -> None:
    """Run one case in this process and write its figures as JSON to ``out``."""
    from fedemu.tools.rss import peak_rss_mb
    from fedemu.tools.runner import execute

    _, overrides = CASES[case]
    overrides = dict(overrides)
    if overrides.get("trace"):
        overrides["trace"] = str(TRACES / overrides["trace"])
    with tempfile.TemporaryDirectory(prefix="fedemu-bench-") as tmp:
        journal = os.path.join(tmp, "messages.log")
        r = execute("default", seed=1, overrides=overrides, journal_path=journal)
        size = os.path.getsize(journal)
    s = r.summary
    figures = {"case": case, "wall_s": r.wall_s, "peak_rss_mb": peak_rss_mb(),
               "events": s["events"], "messages": s["messages"], "tasks": s["tasks"], "jobs": s["jobs"],
               "journal_mb": size / 2**20, "delay_p50_s": s["delay_s"]["p50"], "delay_p99_s": s["delay_s"]["p99"],
               "utilization_mean": s["utilization_mean"], "counters": s["counters"]}
    with open(out, "w") as f:
        json.dump(figures, f)


def main(args) -> int:
    cases = [c.strip() for arg in args.case for c in arg.split(",") if c.strip()] if args.case else list(CASES)
    if not cases:
        from fedemu.fabric.errors import ConfigError

        raise ConfigError(f"--case names no bench case; known: {', '.join(sorted(CASES))}")
    for case in cases:
        if case not in CASES:
            from fedemu.fabric.errors import unknown_name

            raise unknown_name("bench case", case, CASES)
    print(f"{'case':8} {'wall s':>8} {'us/event':>9} {'peak MB':>8} {'events':>10} {'messages':>10} {'tasks':>9} "
          f"{'p50 s':>8} {'p99 s':>9}  what")
    for case in cases:
        what, overrides = CASES[case]
        if overrides.get("trace") and not (TRACES / overrides["trace"]).exists():
            print(f"{case:8} skipped: {TRACES / overrides['trace']} is absent")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "figures.json")
            proc = subprocess.run([sys.executable, "-c", f"from fedemu.tools.bench_megha import _child; _child({case!r}, {out!r})"])
            if proc.returncode != 0:
                print(f"{case:8} failed with exit status {proc.returncode}")
                continue
            with open(out) as f:
                r = json.load(f)
        print(f"{case:8} {r['wall_s']:>8.1f} {r['wall_s'] / r['events'] * 1e6:>9.1f} {r['peak_rss_mb']:>8.0f} "
              f"{r['events']:>10,} {r['messages']:>10,} {r['tasks']:>9,} {r['delay_p50_s']:>8.4f} "
              f"{r['delay_p99_s']:>9.3f}  {what}", flush=True)
    return 0
