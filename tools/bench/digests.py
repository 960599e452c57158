"""Digests of a fixed set of runs, to show that a refactor changed no run (``python -m fedemu.tools.bench.digests``).

Each case is one in-process run: a scenario, a seed, ``--set`` overrides and an optional fault plan. The
output is one line per case, ``NAME digest events messages p50 p99``; ``--against FILE`` compares with an
earlier output and exits 1 naming every case that moved. Cases on the public traces are skipped (and say
so) when ``../shared/data`` is absent.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fedemu.fabric.errors import FedemuError

ROOT = Path(__file__).resolve().parents[2]
YH1 = ROOT.parent / "shared" / "data" / "meghanat_megha_simulator" / "traces" / "input" / "YH1_sub.tr"


def _cases() -> list[tuple[str, str, dict, str | None]]:
    """(name, scenario, overrides, fault plan path or None), in a fixed order: every registered scheduler's
    cases (a new scheduler gets its own; ``--against`` matches cases by name)."""
    from fedemu.actors.registry import SCHEDULERS

    small = {"jobs": 150}
    cases = [(f"default-{s}", "default", {**small, "scheduler": s}, None) for s in SCHEDULERS]
    cases += [(f"lossy-{s}", "default", {**small, "scheduler": s, "loss": 0.05}, None)
              for s in SCHEDULERS]
    cases += [(f"failover-{s}", "failover", {"scheduler": s, "jobs": 120}, None) for s in SCHEDULERS]
    cases += [(f"policy-{p}", "default", {**small, "policy": p}, None)
              for p in ("min-constraints", "d-choices", "spread", "binpack", "tebas")]
    cases += [
        ("megha-gang", "default", {**small, "gang": True}, None),
        ("megha-standby", "default", {**small, "lm_standby": True}, None),
        ("megha-users", "default", {**small, "users": 4}, None),
        ("megha-replies-failures", "default", {**small, "launch_replies": "failures", "ties": "sender",
                                               "cost_model": "zero"}, None),
        ("heterogeneous", "heterogeneous", {"jobs": 80}, None),
        ("demo", "demo", {}, None),
        ("plan-megha", "default", {"loss": 0.02, "jobs": 200}, str(ROOT / "docs" / "failover-plan.toml")),
        ("plan-pigeon", "default", {"loss": 0.02, "jobs": 200, "scheduler": "pigeon"},
         str(ROOT / "docs" / "failover-plan-pigeon.toml")),
    ]
    cases += [(f"yh1-{s}", "default", {"scheduler": s, "workload": "trace", "trace": str(YH1), "jobs": 300,
                                       "gms": 10, "lms": 10, "workers_per_partition": 12, "constraints": False,
                                       **({"heartbeat_s": 30.0} if s in ("megha", "centralized") else {})},
                "yh1") for s in SCHEDULERS]
    return cases


def run_case(scenario: str, overrides: dict, plan: str | None, engine: str = "trio") -> str:
    from fedemu.scenarios import fault_plan
    from fedemu.tools.run.runner import execute

    faults = fault_plan.load(plan) if plan and plan != "yh1" else None
    try:
        result = execute(scenario, seed=1, overrides=overrides, faults=faults, engine=engine)
    except FedemuError as exc:
        return f"error {type(exc).__name__}: {exc}"
    s = result.summary
    delay = s.get("delay_s") or {}
    return (f"{result.digest} events={s.get('events')} messages={s.get('messages')} "
            f"p50={delay.get('p50')} p99={delay.get('p99')}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="an earlier output to compare with")
    parser.add_argument("--only", help="comma-separated case names (prefixes)")
    parser.add_argument("--engine", default="trio", help="what steps the actors: trio (the default) or direct "
                        "(the same digests are expected on both)")
    args = parser.parse_args(argv)
    only = tuple(args.only.split(",")) if args.only else None
    lines = {}
    for name, scenario, overrides, plan in _cases():
        if only and not name.startswith(only):
            continue
        if plan == "yh1" and not YH1.exists():
            lines[name] = "skipped (../shared/data absent)"
        else:
            lines[name] = run_case(scenario, overrides, plan, args.engine)
        print(f"{name} {lines[name]}", flush=True)
    if not args.against:
        return 0
    before = {}
    for line in Path(args.against).read_text().splitlines():
        name, _, rest = line.partition(" ")
        before[name] = rest
    skipped = [n for n in lines if lines[n].startswith("skipped")]  # a clone without the traces: not compared
    moved = [n for n in lines if n in before and n not in skipped and before[n] != lines[n]]
    for n in moved:
        print(f"MOVED {n}:\n  before {before[n]}\n  now    {lines[n]}", file=sys.stderr)
    new = [n for n in lines if n not in before]
    compared = len(lines) - len(new) - len(skipped)
    print(f"{compared - len(moved)} of {compared} cases unchanged"
          + (f"; {len(skipped)} skipped" if skipped else "")
          + (f"; {len(new)} new (not in {args.against}): {', '.join(new)}" if new else ""), file=sys.stderr)
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
